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

#include <stddef.h>

struct cfg;
struct topo;

/* Runs until SIGTERM/SIGINT. Returns 0 after a clean shutdown, -errno when
 * startup fails (already logged). Takes ownership of nothing. */
int daemon_run(const struct cfg *cfg, const struct topo *topo);
