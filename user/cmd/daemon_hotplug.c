/* daemon_hotplug: following CPU hotplug and the kernel's isolated CPUs. The
 * kernel's CPU uevents on the loop with a slow safety poll, or a poll every
 * second where uevents cannot be had; each change goes to the state (the
 * shared pool holds no offline CPU), the kubelet plugin (device health) and
 * the publisher (devices leave or come back). The isolated CPUs are read
 * again with every read of the online CPUs and on their own timer
 * (host/isolwatch.h); a change rebuilds the devices. Apart from daemon.c,
 * which wires the parts together: this is one of them, kept beside it
 * because it reaches into most of the others.
 */
#include "cmd/daemon.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <event2/event.h>

#define LOG_MOD "daemon"
#include "cmd/cfg.h"
#include "cmd/daemon_priv.h"
#include "core/devices.h"
#include "core/state.h"
#include "host/hotplug.h"
#include "host/isol.h"
#include "host/isolwatch.h"
#include "host/topo.h"
#include "host/uevent.h"
#include "kube/publisher.h"
#include "kubelet/dra.h"
#include "lib/cleanup.h"
#include "lib/clock.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "nri/pools.h"
#include "obs/metrics.h"

/* How often the online CPUs are read (CPU hotplug): every second where the
 * kernel's uevents cannot be had (a sysfs capture, a socket refused), else
 * once a minute as a safety net under the uevents. */
#define HOTPLUG_POLL_MS 1000
#define HOTPLUG_CHECK_MS 60000
/* CPU hotplug: sysfs offers no notification for cpu/online, so it is polled
 * (one small read; the per-CPU files too under a capture root). A change
 * goes to the plugin (health, no new claim on an offline CPU) and to the
 * publisher (devices leave or come back, groups shrink or grow). */
/* The kernel's isolated CPUs changed (host/isolwatch.h: cgroup v2 isolated
 * partitions come and go): the devices are built again with them (in
 * place: everyone borrows them), the shared pool follows and the slices are
 * republished. */
static void on_isol_changed(void *ud, const struct isol *now, const struct isol *before)
{
	_cleanup_(devices_freep) struct devices *nd = NULL;
	struct daemon *d = ud;
	struct cpuset unshared;
	int r;

	(void)before;
	r = devices_build_node(d->topo, &d->cfg->reserved, &d->cfg->rt_cpus, now,
			       d->cfg->device_mode, d->cfg->group_by, d->rt_on ? &d->rt : NULL, &nd);
	if (r < 0) {
		log_warn_errno(r, "devices_failed", "action=\"keeping the devices published\"");
		return;
	}
	devices_replace(d->devices, TAKE_PTR(nd));
	daemon_isolated_unshared(d, &unshared);
	if (d->state && state_set_isolated(d->state, &unshared)) {
		daemon_update_gauges(d);
		if (d->pools)
			pools_shared_changed(d->pools);
	}
	if (d->publisher)
		publisher_devices_changed(d->publisher, "isolated_cpus");
}

/* Reads the online CPUs again; true when they changed. */
static bool hotplug_check(struct daemon *d)
{
	const char *root = d->cfg->sysfs_root && *d->cfg->sysfs_root ? d->cfg->sysfs_root : NULL;
	struct cpuset known, now, went, came;
	struct errbuf eb = {};
	char a[256], b[256];
	int r;

	if (d->isolwatch) /* a CPU came or went, or the safety poll */
		(void)isolwatch_poll(d->isolwatch);
	cpuset_or(&known, &d->topo->online, &d->topo->offline);
	r = hotplug_online(root, &known, &now, &eb);
	if (r < 0) {
		if (!d->hotplug_failed_logged)
			log_warn("hotplug_poll_failed", "error=%s action=keeping_the_last_view",
				 log_quote(errbuf_text(&eb, r)));
		d->hotplug_failed_logged = true;
		return false;
	}
	d->hotplug_failed_logged = false;
	if (cpuset_equal(&now, &d->online))
		return false;
	cpuset_andnot(&went, &d->online, &now);
	cpuset_andnot(&came, &now, &d->online);
	(void)cpuset_format(&went, a, sizeof(a));
	(void)cpuset_format(&came, b, sizeof(b));
	log_info("cpus_hotplugged", "offline=%s online=%s", a[0] ? a : "none", b[0] ? b : "none");
	/* CPUs first seen now have no place in the topology read at start: they
	 * are published after a restart. */
	cpuset_andnot(&came, &came, &d->topo->online);
	if (!cpuset_is_empty(&came)) {
		(void)cpuset_format(&came, b, sizeof(b));
		log_warn("cpus_new", "cpus=%s action=\"published after a restart\"", b);
	}
	d->online = now;
	metric_set(d->g_online, cpuset_count(&now));
	/* The shared pool never holds an offline CPU: the runtime could not
	 * write it into a container's cpuset. */
	cpuset_andnot(&went, &d->topo->online, &now);
	if (d->state && state_set_offline(d->state, &went)) {
		daemon_update_gauges(d);
		if (d->pools)
			pools_shared_changed(d->pools);
	}
	dra_set_online(d->dra, &now);
	publisher_set_online(d->publisher, &now);
	return true;
}

static void on_hotplug_timer(evutil_socket_t fd, short what, void *ud);

static int hotplug_timer_start(struct daemon *d, int ms)
{
	struct timeval tv = clock_tv_ms(ms);

	if (!d->hotplug_timer)
		d->hotplug_timer = event_new(d->base, -1, EV_PERSIST, on_hotplug_timer, d);
	if (!d->hotplug_timer || event_add(d->hotplug_timer, &tv) < 0)
		return -ENOMEM;
	return 0;
}

static void on_hotplug_timer(evutil_socket_t fd, short what, void *ud)
{
	struct daemon *d = ud;

	metric_series_add(d->checks_timer, 1);
	/* The safety net caught what no uevent announced: they do not reach us
	 * here after all (a user namespace, a filter), so poll from now on. */
	if (hotplug_check(d) && d->uevents) {
		log_warn("cpu_hotplug_without_uevent",
			 "action=\"reading the online CPUs every second from now on\"");
		event_free(d->uevents);
		d->uevents = NULL;
		if (hotplug_timer_start(d, HOTPLUG_POLL_MS) < 0)
			log_warn("hotplug_timer_failed", "action=\"CPU hotplug is no longer followed\"");
	}
}

static void on_uevent(evutil_socket_t fd, short what, void *ud)
{
	struct daemon *d = ud;
	int r = uevent_drain_cpu(fd);

	if (r < 0 && r != -ENOBUFS && r != -EAGAIN)
		log_warn_errno(r, "uevent_read_failed", "action=\"reading sysfs again\"");
	if (r != 0) { /* a CPU came or went, or messages were lost */
		metric_series_add(d->checks_uevent, 1);
		(void)hotplug_check(d);
	}
}

/* Follows CPU hotplug: the kernel's uevents on the loop with a slow safety
 * poll, or a poll every second where uevents cannot be had; and the isolated
 * CPUs on their own timer and with every read of the online CPUs. A
 * topology file describes another machine: nothing to follow then. */
int daemon_hotplug_start(struct daemon *d)
{
	const char *root = d->cfg->sysfs_root;
	struct metric *checks;
	int r;

	if (cfg_has_topology_file(d->cfg))
		return 0;
	r = isolwatch_new(d->base, &(struct isolwatch_opts){ .root = cfg_sysfs_root(d->cfg),
							     .on_change = on_isol_changed, .ud = d },
			  &d->devices->isol, &d->isolwatch);
	if (r < 0)
		return r;
	checks = metrics_family(d->metrics, MF_HOTPLUG_CHECKS_TOTAL);
	d->checks_uevent = metric_with(checks, "uevent");
	d->checks_timer = metric_with(checks, "timer");
	d->uevent_fd = root && *root ? -EOPNOTSUPP : uevent_open();
	if (d->uevent_fd >= 0) {
		d->uevents = event_new(d->base, d->uevent_fd, EV_READ | EV_PERSIST, on_uevent, d);
		if (!d->uevents || event_add(d->uevents, NULL) < 0)
			return -ENOMEM;
		log_info("cpu_hotplug_followed", "by=uevents check_every_s=%d",
			 HOTPLUG_CHECK_MS / 1000);
		return hotplug_timer_start(d, HOTPLUG_CHECK_MS);
	}
	r = d->uevent_fd;
	d->uevent_fd = -1;
	log_info("cpu_hotplug_followed", "by=polling every_ms=%d reason=%s", HOTPLUG_POLL_MS,
		 log_quote(root && *root ? "a sysfs capture sends no uevents" : strerror(-r)));
	return hotplug_timer_start(d, HOTPLUG_POLL_MS);
}
