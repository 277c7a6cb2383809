/* The running driver: one event loop and the parts plugged into it.
 *
 *   main -> daemon_run(cfg, topo)
 *             ├── httpd    /healthz /readyz /metrics
 *             ├── metrics  registry every part registers with
 *             └── signals  SIGTERM/SIGINT: stop accepting, finish, exit (<= 5 s)
 *
 * The daemon owns every part; parts borrow cfg, topo and devices for the
 * daemon's lifetime.
 */
#pragma once

struct cfg;
struct devices;
struct errbuf;
struct rt_limits;
struct topo;

/* Runs until SIGTERM/SIGINT. Returns 0 after a clean shutdown, -errno when
 * startup fails (already logged). Takes ownership of nothing. */
int daemon_run(const struct cfg *cfg, const struct topo *topo);

/* The real-time limits of this kernel (host/sched.h) for --rt-cpus. -errno
 * with eb when the kernel leaves deadline tasks nothing. */
int daemon_rt_limits(struct rt_limits *ret, struct errbuf *eb);

/* The devices this node publishes: devices_build() with the real-time CPUs
 * reserved, then one cpurt device per real-time CPU of rt->capacity_milli
 * (rt may be NULL when --rt-cpus is empty). Caller frees with
 * devices_free(). */
int daemon_devices(const struct cfg *c, const struct topo *t, const struct rt_limits *rt,
		   struct devices **ret);
