/* The event loop and its parts. See daemon.h. */
#include "cmd/daemon.h"

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#define LOG_MOD "daemon"
#include "cmd/cfg.h"
#include "lib/cleanup.h"
#include "core/devices.h"
#include "kubelet/dra.h"
#include "obs/httpd.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/log.h"
#include "pinning/bpfmon.h"
#include "pinning/rtmon.h"
#include "lib/caps.h"
#include "obs/metrics.h"
#include "nri/nri.h"
#include "nri/pools.h"
#include "nri/rtctl.h"
#include "kube/publisher.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/cgroup.h"
#include "host/sched.h"
#include "host/topo.h"
#include "lib/errbuf.h"

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
	struct kube *kube;
	struct publisher *publisher;
	struct state *state;
	struct dra *dra;
	struct bpfmon *bpf;
	struct pools *pools;
	struct rtctl *rtctl; /* --rt-cpus */
	struct rtmon *rtmon; /* its BPF monitor, NULL without */
	struct nri *nri;
	int check_serving, check_registered, check_slices;
	struct metric *g_allocated, *g_available, *g_claims;
	bool stopping;
	bool rt_on; /* --rt-cpus names CPUs */
	struct rt_limits rt;
};

/* A claim fetch in flight: the kube call and where its answer goes. */
struct fetch {
	struct kube_call *call;
	dra_claim_cb cb;
	void *cb_ud;
};

/* ---- real-time CPUs ------------------------------------------------------------------ */

int daemon_rt_limits(struct rt_limits *ret, struct errbuf *eb)
{
	struct sched_limits sl;
	int r = sched_limits_read("", NULL, &sl, eb);

	if (r < 0)
		return r;
	*ret = (struct rt_limits){ .capacity_milli = sl.capacity_milli,
				   .period_min_ns = sl.period_min_ns,
				   .period_max_ns = sl.period_max_ns };
	log_debug("rt_limits", "capacity_milli=%lld fair_milli=%lld fair_source=%s",
		  (long long)sl.capacity_milli, (long long)sl.fair_milli, sl.fair_source);
	return 0;
}

int daemon_devices(const struct cfg *c, const struct topo *t, const struct rt_limits *rt,
		   struct devices **ret)
{
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset off;
	int r;

	cpuset_or(&off, &c->reserved, &c->rt_cpus);
	r = devices_build(t, &off, c->device_mode, c->group_by, &d);
	if (r < 0)
		return r;
	if (rt && !cpuset_is_empty(&c->rt_cpus)) {
		r = devices_add_rt(d, t, &c->rt_cpus, rt->capacity_milli);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(d);
	return 0;
}

static void daemon_free(struct daemon *d)
{
	if (!d)
		return;
	/* NRI first (no handler after), the plugin and the pools next (they
	 * cancel their claim fetches through the API client), the API client
	 * after everyone that holds calls on it, state last (everyone observes
	 * it). */
	nri_free(d->nri);
	publisher_free(d->publisher);
	dra_free(d->dra);
	pools_free(d->pools);
	kube_free(d->kube);
	rtctl_free(d->rtctl);
	rtmon_free(d->rtmon);
	bpfmon_free(d->bpf);
	state_free(d->state);
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

static void update_gauges(struct daemon *d)
{
	struct cpuset c;

	state_prepared(d->state, &c);
	metric_set(d->g_allocated, cpuset_count(&c));
	state_shared_pool(d->state, &c);
	metric_set(d->g_available, cpuset_count(&c));
	metric_set(d->g_claims, state_claim_count(d->state));
}

static void on_state_change(void *ud, enum state_event ev, const struct state_claim *c)
{
	update_gauges(ud);
}

static void register_gauges(struct daemon *d)
{
	struct metric *g;

	g = metrics_gauge(d->metrics, "dra_cpu_reserved_cpus", "CPUs excluded by --reserved-cpus.",
			  NULL);
	metric_set(g, cpuset_count(&d->cfg->reserved));
	d->g_available = metrics_gauge(d->metrics, "dra_cpu_available_cpus",
				       "Allocatable CPUs not held by any claim (the shared pool).",
				       NULL);
	d->g_allocated = metrics_gauge(d->metrics, "dra_cpu_allocated_cpus",
				       "CPUs held by prepared claims.", NULL);
	d->g_claims = metrics_gauge(d->metrics, "dra_cpu_resource_claims_active",
				    "Prepared ResourceClaims.", NULL);
}

static void on_claim_got(void *ud, const struct kube_result *r)
{
	struct fetch *f = ud;

	f->cb(f->cb_ud, r->error ? NULL : r->body, r->error ? r->error_text : NULL);
	free(f);
}

/* The plugin's claim fetch over the API client: GET the claim, retried on
 * throttling and server errors, each attempt within what is left of the
 * kubelet's patience (the plugin cancels the fetch at that deadline). */
static int fetch_claim(void *ud, const char *ns, const char *name, int64_t timeout_ms,
		       dra_claim_cb cb, void *cb_ud, void **ret)
{
	struct daemon *d = ud;
	struct kube_req_opts o = { .timeout_ms = timeout_ms < 10000 ? (int)timeout_ms : 10000,
				   .max_attempts = 3 };
	struct fetch *f;
	char path[1024];
	int r;

	if (!d->kube) /* NRI may ask before the API client is up */
		return -ENOTCONN;
	f = malloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->cb = cb;
	f->cb_ud = cb_ud;
	if (snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
		     ns, name) >= (int)sizeof(path)) {
		free(f);
		return -ENAMETOOLONG;
	}
	r = kube_request(d->kube, KUBE_GET, path, NULL, &o, on_claim_got, f, &f->call);
	if (r < 0) {
		free(f);
		return r;
	}
	*ret = f;
	return 0;
}

static void fetch_cancel(void *ud, void *handle)
{
	struct fetch *f = handle;

	kube_call_cancel(f->call);
	free(f);
}

static const struct dra_fetch_ops fetch_ops = { .start = fetch_claim, .cancel = fetch_cancel };
/* The same reads for the NRI consumer checks (the callback types agree). */
static const struct pools_fetch_ops pools_fetch = { .start = fetch_claim, .cancel = fetch_cancel };

static void on_registered(void *ud, bool ok)
{
	struct daemon *d = ud;

	httpd_check_set(d->httpd, d->check_registered, ok);
}

static void on_slices(void *ud, bool ready)
{
	struct daemon *d = ud;

	httpd_check_set(d->httpd, d->check_slices, ready);
}

/* The BPF checks and the NRI plugin: both degrade (reported on /metrics and
 * in the log) rather than stop the driver when the node lacks them. */
static int start_node_agents(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct pools_opts po = { .push_updates = cfg->nri_push_updates,
				 .state_dir = cfg->state_dir,
				 .fetch = &pools_fetch,
				 .fetch_ud = d };
	int r;

	if (cfg->bpf) {
		struct bpfmon_opts bo = {
			.contention = cfg->contention_histogram,
			.cgroup = cgroup_pinning_hier(),
			.enforcement = (enum bpfmon_enforcement)cfg->pinning_enforcement,
		};

		r = bpfmon_new(d->base, &bo, &d->bpf);
		if (r < 0)
			return log_error_errno(r, "bpf_init_failed", "");
		if (bpfmon_is_loaded(d->bpf))
			log_info("bpf_loaded", "enforcement=%s contention=%s notes=%s",
				 bpfmon_enforcement_name(bpfmon_enforcement(d->bpf)),
				 bpfmon_has_contention(d->bpf) ? "on" : "off",
				 log_quote(bpfmon_notes(d->bpf) ? bpfmon_notes(d->bpf) : ""));
		else
			log_warn("bpf_not_loaded", "reason=%s action=serving_without_checks",
				 log_quote(bpfmon_error(d->bpf) ? bpfmon_error(d->bpf) : "unknown"));
		r = bpfmon_metrics_register(d->bpf, d->metrics);
		if (r < 0)
			return r;
	}
	r = pools_new(d->state, d->bpf && bpfmon_is_loaded(d->bpf) ? d->bpf : NULL, &po,
		      d->metrics, &d->pools);
	if (r < 0)
		return log_error_errno(r, "pools_init_failed", "");
	if (d->rt_on && cfg->bpf) {
		struct rtmon_opts mo = { .cgroup_v1 = cgroup_pinning_hier() == CGROUP_V1 };
		struct errbuf eb = {};

		/* Degrades like the pinning check: the claims work without it. */
		r = rtmon_new(&mo, &d->rtmon, &eb);
		if (r < 0)
			log_warn("rt_monitor_not_loaded", "reason=%s action=serving_without_it",
				 log_quote(eb.s));
		else
			log_info("rt_monitor_loaded", "");
	}
	if (d->rt_on) {
		struct rtctl_opts ro = { .limits = &d->rt, .state_dir = cfg->state_dir,
					 .mon = d->rtmon };

		r = rtctl_new(d->base, d->state, d->metrics, &ro, &d->rtctl);
		if (r < 0)
			return log_error_errno(r, "rt_init_failed", "");
		pools_set_rt(d->pools, d->rtctl);
	}
	if (!cfg->nri)
		return 0;
	{
		struct nri_config nc = { .socket_path = cfg->nri_socket };

		r = nri_new(d->base, &nc, pools_nri_handlers(), d->pools, &d->nri);
		if (r < 0)
			return log_error_errno(r, "nri_init_failed", "socket=%s", cfg->nri_socket);
		pools_set_nri(d->pools, d->nri);
		if (d->rtctl)
			rtctl_set_nri(d->rtctl, d->nri);
		r = nri_start(d->nri);
		if (r < 0)
			return log_error_errno(r, "nri_start_failed", "socket=%s", cfg->nri_socket);
	}
	return 0;
}

/* dra_cpu_kube_*: the API client's own counters, copied at each scrape. */
static void collect_kube(struct metrics *m, void *ud)
{
	struct daemon *d = ud;
	struct kube_stats st;
	static const struct {
		const char *name, *help;
		size_t off;
	} fams[] = {
		{ "dra_cpu_kube_requests_total", "HTTP attempts to the API server, watches included.",
		  offsetof(struct kube_stats, attempts) },
		{ "dra_cpu_kube_retries_total", "Attempts that were retries (backoff or 401).",
		  offsetof(struct kube_stats, retries) },
		{ "dra_cpu_kube_failures_total", "API requests that failed after retries.",
		  offsetof(struct kube_stats, failures) },
		{ "dra_cpu_kube_token_reloads_total", "Token file reads that changed the token.",
		  offsetof(struct kube_stats, token_reloads) },
		{ "dra_cpu_kube_oversized_total", "Bodies or watch lines over the size cap.",
		  offsetof(struct kube_stats, too_big) },
		{ "dra_cpu_kube_watch_events_total", "Watch events received.",
		  offsetof(struct kube_stats, watch_events) },
	};

	if (!d->kube)
		return;
	kube_get_stats(d->kube, &st);
	for (size_t i = 0; i < ARRAY_SIZE(fams); i++)
		metric_set(metrics_counter(m, fams[i].name, fams[i].help, NULL),
			   (double)*(const uint64_t *)((const char *)&st + fams[i].off));
}

static int start_kube(struct daemon *d)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *kc = NULL;
	char err[KUBECONFIG_ERR_MAX] = "";
	unsigned flags = d->cfg->allow_insecure_kubeconfig ? KUBECONFIG_ALLOW_INSECURE : 0;
	int r;

	if (d->cfg->kubeconfig && *d->cfg->kubeconfig)
		r = kubeconfig_load(d->cfg->kubeconfig, flags, &kc, err);
	else
		r = kubeconfig_in_cluster(KUBECONFIG_SA_DIR, flags, &kc, err);
	if (r < 0) {
		log_error("kubeconfig_failed", "error=%s", log_quote(err[0] ? err : strerror(-r)));
		return r;
	}
	r = kube_new(d->base, kc, NULL, &d->kube);
	if (r < 0)
		return log_error_errno(r, "api_client_failed", "server=%s", kc->server);
	r = metrics_add_collector(d->metrics, collect_kube, d);
	if (r < 0)
		return r;
	log_info("api_server", "server=%s source=%s", kc->server, kc->source);
	return 0;
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
	/* Replies to the runtime and the kubelet are tens to hundreds of KiB and
	 * short-lived: by default glibc hands such memory back to the kernel
	 * after each one (mmap/munmap, heap trimming) and faults it in again on
	 * the next, a fifth of a CreateContainer that updates 500 containers.
	 * Keep up to a few MiB of freed heap instead. */
	(void)mallopt(M_MMAP_THRESHOLD, 4 << 20);
	(void)mallopt(M_TRIM_THRESHOLD, 8 << 20);

	d->base = event_base_new();
	if (!d->base)
		return log_error_errno(-ENOMEM, "event_base_failed", "");
	r = metrics_new(&d->metrics);
	if (r < 0)
		return r;
	d->rt_on = !cpuset_is_empty(&cfg->rt_cpus);
	if (d->rt_on) {
		struct errbuf eb = {};

		r = daemon_rt_limits(&d->rt, &eb);
		if (r < 0)
			return log_error_errno(r, "rt_limits_failed", "error=%s",
					       log_quote(errbuf_text(&eb, r)));
	}
	r = daemon_devices(cfg, topo, d->rt_on ? &d->rt : NULL, &d->devices);
	if (r < 0)
		return log_error_errno(r, "devices_failed", "");
	register_gauges(d);

	r = httpd_new(d->base, cfg->bind_address, NULL, d->metrics, &d->httpd);
	if (r < 0)
		return log_error_errno(r, "http_bind_failed", "address=%s", cfg->bind_address);
	d->check_serving = httpd_check_add(d->httpd, "serving", HTTPD_HEALTH | HTTPD_READY);
	d->check_registered = !cfg->kubelet_registration
				      ? -1
				      : httpd_check_add(d->httpd, "kubelet-registration",
							HTTPD_HEALTH | HTTPD_READY);
	d->check_slices = httpd_check_add(d->httpd, "resourceslices", HTTPD_READY);

	/* Every prepared claim is reserved again before any socket opens. */
	{
		struct state_opts so = { .cdi_dir = cfg->cdi_dir, .state_dir = cfg->state_dir,
					 .allocatable = d->devices->allocatable,
					 .rt_cpus = cfg->rt_cpus };

		r = state_new(&so, &d->state);
		if (r < 0)
			return r;
		r = state_add_observer(d->state, on_state_change, d);
		if (r < 0)
			return r;
		r = state_load(d->state);
		if (r < 0)
			return r;
		update_gauges(d);
	}

	r = start_node_agents(d);
	if (r < 0)
		return r;
	r = start_kube(d);
	if (r < 0)
		return r;
	{
		struct publisher_opts po = { .node = d->node, .devices = d->devices,
					     .repair_timeout_ms = cfg->slice_repair_timeout_s * 1000,
					     .on_state = on_slices, .ud = d };

		r = publisher_new(d->base, d->kube, &po, d->metrics, &d->publisher);
		if (r < 0)
			return log_error_errno(r, "publisher_failed", "");
	}
	{
		struct dra_opts dopt = {
			.node = d->node,
			.kubelet_root = cfg->kubelet_root_dir,
			.sysfs_root = cfg->sysfs_root && *cfg->sysfs_root ? cfg->sysfs_root : NULL,
			.watch_online = !(cfg->topology_file && *cfg->topology_file),
			.device_mode = cfg->device_mode,
			.first_request_timeout_ms = cfg->kubelet_first_request_timeout_s * 1000,
			.fetch = &fetch_ops,
			.fetch_ud = d,
			.on_registered = on_registered,
			.registered_ud = d,
			.rt = d->rt_on ? &d->rt : NULL,
		};

		r = dra_new(d->base, &dopt, d->state, topo, d->devices, d->metrics, &d->dra);
		if (r < 0)
			return r;
	}

	d->sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
	d->sigint = evsignal_new(d->base, SIGINT, on_signal, d);
	d->grace = evtimer_new(d->base, on_grace_expired, d);
	if (!d->sigterm || !d->sigint || !d->grace || event_add(d->sigterm, NULL) < 0 ||
	    event_add(d->sigint, NULL) < 0)
		return log_error_errno(-ENOMEM, "signal_setup_failed", "");

	/* Everything that needs privilege is set up: keep only what the loop uses. */
	r = caps_drop_except(CAPS_KEEP_DAEMON | (d->rt_on ? CAPS_KEEP_RT : 0));
	if (r < 0)
		log_warn_errno(r, "capability_drop_failed", "action=continuing");
	else if (r > 0)
		log_info("capabilities_dropped", "dropped=%d kept=\"dac_override dac_read_search "
						 "fowner%s sys_nice\"",
			 r, d->rt_on ? " kill" : "");

	log_info("started", "node=%s devices=%d mode=%s http_port=%d cpus=%d", d->node,
		 d->devices->n, cfg_device_mode_name(cfg->device_mode), httpd_port(d->httpd),
		 topo->n_cpus);
	httpd_check_set(d->httpd, d->check_serving, true);
	/* Start-up parsed the checkpoint, the topology and the BPF objects:
	 * hand the freed heap back before settling down. */
	(void)malloc_trim(0);

	r = event_base_dispatch(d->base);
	if (r < 0)
		return log_error_errno(-EIO, "loop_failed", "");
	log_info("stopped", "");
	return 0;
}
