/* The event loop and its parts. See daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define LOG_MOD "daemon"
#include "cfg.h"
#include "cleanup.h"
#include "devices.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "topo.h"

/* Longest a shutdown may take before the loop is broken off. */
#define SHUTDOWN_GRACE_S 5

struct daemon {
	const struct cfg *cfg;
	const struct topo *topo;
	char node[256];
	struct event_base *base;
	struct event *sigterm, *sigint, *grace;
	struct metrics *metrics;
	struct httpd *httpd;
	struct devices *devices;
	int check_serving;
	bool stopping;
};

static void daemon_free(struct daemon *d)
{
	if (!d)
		return;
	httpd_free(d->httpd);
	devices_free(d->devices);
	if (d->sigterm)
		event_free(d->sigterm);
	if (d->sigint)
		event_free(d->sigint);
	if (d->grace)
		event_free(d->grace);
	metrics_free(d->metrics);
	if (d->base)
		event_base_free(d->base);
	free(d);
}

static void daemon_freep(struct daemon **d)
{
	daemon_free(*d);
}

static void on_grace_expired(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	log_warn("shutdown_forced", "after_s=%d", SHUTDOWN_GRACE_S);
	event_base_loopbreak(d->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	struct timeval tv = { .tv_sec = SHUTDOWN_GRACE_S };

	if (d->stopping) {
		log_warn("shutdown_again", "signal=%d action=exiting_now", (int)sig);
		event_base_loopbreak(d->base);
		return;
	}
	d->stopping = true;
	log_info("shutdown", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
	httpd_check_set(d->httpd, d->check_serving, false);
	/* Parts stop on their own time; the loop exits when nothing is left,
	 * or when the grace timer fires. */
	(void)event_add(d->grace, &tv);
	event_base_loopexit(d->base, NULL);
}

static void register_gauges(struct daemon *d)
{
	struct metric *g;
	int reserved = cpuset_count(&d->cfg->reserved);

	g = metrics_gauge(d->metrics, "dra_cpu_reserved_cpus", "CPUs excluded by --reserved-cpus.",
			  NULL);
	metric_set(g, reserved);
	g = metrics_gauge(d->metrics, "dra_cpu_available_cpus",
			  "Allocatable CPUs not held by any claim.", NULL);
	metric_set(g, cpuset_count(&d->devices->allocatable));
	g = metrics_gauge(d->metrics, "dra_cpu_allocated_cpus", "CPUs held by prepared claims.",
			  NULL);
	metric_set(g, 0);
	(void)metrics_gauge(d->metrics, "dra_cpu_resource_claims_active",
			    "Prepared ResourceClaims.", NULL);
}

int daemon_run(const struct cfg *cfg, const struct topo *topo)
{
	_cleanup_(daemon_freep) struct daemon *d = NULL;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = cfg;
	d->topo = topo;
	r = cfg_node_name(cfg, d->node, sizeof(d->node));
	if (r < 0)
		return log_error_errno(r, "node_name_failed", "hint=\"set --hostname-override\"");
	(void)signal(SIGPIPE, SIG_IGN);

	d->base = event_base_new();
	if (!d->base)
		return log_error_errno(-ENOMEM, "event_base_failed", "");
	r = metrics_new(&d->metrics);
	if (r < 0)
		return r;
	r = devices_build(topo, &cfg->reserved, cfg->device_mode, cfg->group_by, &d->devices);
	if (r < 0)
		return log_error_errno(r, "devices_failed", "");
	register_gauges(d);

	r = httpd_new(d->base, cfg->bind_address, d->metrics, &d->httpd);
	if (r < 0)
		return log_error_errno(r, "http_bind_failed", "address=%s", cfg->bind_address);
	d->check_serving = httpd_check_add(d->httpd, "serving", HTTPD_HEALTH | HTTPD_READY);

	d->sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
	d->sigint = evsignal_new(d->base, SIGINT, on_signal, d);
	d->grace = evtimer_new(d->base, on_grace_expired, d);
	if (!d->sigterm || !d->sigint || !d->grace || event_add(d->sigterm, NULL) < 0 ||
	    event_add(d->sigint, NULL) < 0)
		return log_error_errno(-ENOMEM, "signal_setup_failed", "");

	log_info("started", "node=%s devices=%d mode=%s http_port=%d cpus=%d", d->node,
		 d->devices->n, cfg_device_mode_name(cfg->device_mode), httpd_port(d->httpd),
		 topo->n_cpus);
	httpd_check_set(d->httpd, d->check_serving, true);

	r = event_base_dispatch(d->base);
	if (r < 0)
		return log_error_errno(-EIO, "loop_failed", "");
	log_info("stopped", "");
	return 0;
}
