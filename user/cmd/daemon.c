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

#include <event2/buffer.h>
#include <event2/event.h>

#define LOG_MOD "daemon"
#include "cmd/cfg.h"
#include "cmd/cfgfile.h"
#include "lib/cleanup.h"
#include "core/devices.h"
#include "core/metadata.h"
#include "core/nodemap.h"
#include "kube/slices.h"
#include "kubelet/dra.h"
#include "obs/httpd.h"
#include "kube/claims.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pinning/bpfmon.h"
#include "pinning/rtmon.h"
#include "pinning/rtreport.h"
#include "lib/caps.h"
#include "obs/metrics.h"
#include "nri/nri.h"
#include "nri/pools.h"
#include "pinning/rtctl.h"
#include "kube/publisher.h"
#include "core/rt.h"
#include "core/irqiso.h"
#include "core/state.h"
#include "host/cgroup.h"
#include "host/filewatch.h"
#include "host/hotplug.h"
#include "host/isol.h"
#include "host/isolwatch.h"
#include "host/schedwatch.h"
#include "cmd/report.h"
#include "host/pcie.h"
#include "host/rtdomain.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/jsonc.h"
#include "cmd/daemon_priv.h"

/* Heap trimming (see trim_check): how often the heap is looked at, and how
 * much its free bytes must have grown since the last trim to trim again. */
#define TRIM_PERIOD_MS 1000
#define TRIM_FREED_MIN (256 * 1024)
/* Longest a shutdown may take before the loop is broken off. */
#define SHUTDOWN_GRACE_S 5

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
	/* before the API client (its writes are calls on it); after everyone
	 * that reports, but real-time control, which reports only from the loop */
	report_free(d->report);
	d->report = NULL;
	kube_free(d->kube);
	rtctl_free(d->rtctl);
	rtmon_free(d->rtmon);
	schedwatch_free(d->rtwatch);
	isolwatch_free(d->isolwatch);
	rtdomain_free(d->rt_left);
	bpfmon_free(d->bpf);
	irqiso_free(d->irqiso); /* isolation stays with the claims; its record too */
	state_free(d->state);
	httpd_free(d->httpd);
	devices_free(d->devices);
	pcie_free(d->pcie);
	if (d->hotplug_timer)
		event_free(d->hotplug_timer);
	if (d->uevents)
		event_free(d->uevents);
	if (d->uevent_fd >= 0)
		(void)close(d->uevent_fd);
	filewatch_free(d->config_watch);
	if (d->trim_timer)
		event_free(d->trim_timer);
	if (d->trim_soon)
		event_free(d->trim_soon);
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

void daemon_update_gauges(struct daemon *d)
{
	struct cpuset c;

	state_prepared(d->state, &c);
	metric_set(d->g_allocated, cpuset_count(&c));
	state_shared_pool(d->state, &c);
	metric_set(d->g_available, cpuset_count(&c));
	metric_set(d->g_claims, state_claim_count(d->state));
}

static int on_left_cpus(void *ud, const struct state_claim *c)
{
	struct cpuset cpus;

	cpuset_or(ud, ud, cpuset_from_view(&c->cpus, &cpus));
	return 0;
}

/* Without --rt-cpus, what real-time changes a previous run made (a kill -9
 * with a real-time claim, then a start without the flag) are found and
 * undone: v1, the root cpuset's load balancing, the driver's cpusets, its
 * record; v2, the partitions it made. While a prepared claim still sits on
 * a CPU they concern, they are kept and reported, and undone when the last
 * such claim goes. Called at start and on every claim removed while
 * something is kept. */
static void rt_leftovers(struct daemon *d, bool start)
{
	struct rtdomain_opts o = { .state_dir = d->cfg->state_dir };
	struct cpuset held, kept, undone;
	char cpus[128];
	bool left;

	if (!d->rt_left) {
		if (!start || rtdomain_new(&o, &d->rt_left) < 0)
			return;
		if (!rtdomain_leftovers(d->rt_left, &d->rt_left_cpus)) {
			d->rt_left = rtdomain_free(d->rt_left);
			return;
		}
	}
	cpuset_zero(&held);
	(void)state_foreach_claim(d->state, on_left_cpus, &held);
	rtdomain_settle(d->rt_left, &held);
	left = rtdomain_leftovers(d->rt_left, &kept);
	cpuset_andnot(&undone, &d->rt_left_cpus, &kept);
	if (!left || !cpuset_is_empty(&undone)) {
		(void)cpuset_format(left ? &undone : &d->rt_left_cpus, cpus, sizeof(cpus));
		log_info("rt_leftovers_undone", "cpus=%s", cpus);
	}
	if (!left) {
		(void)fileio_remove(d->cfg->state_dir, RTREPORT_OWNERS_FILE);
		d->rt_left = rtdomain_free(d->rt_left);
		return;
	}
	d->rt_left_cpus = kept;
	(void)cpuset_format(&kept, cpus, sizeof(cpus));
	if (start)
		log_warn("rt_leftovers_kept", "cgroup=v%d cpus=%s reason=%s",
			 rtdomain_version(d->rt_left), cpus,
			 log_quote("a prepared claim is on a CPU a previous run changed for "
				   "real-time claims; undone when the last one goes, or start "
				   "with --rt-cpus"));
}

static void on_state_change(void *ud, enum state_event ev, const struct state_claim *c)
{
	struct daemon *d = ud;

	daemon_update_gauges(d);
	if (ev == STATE_CLAIM_REMOVED && d->rt_left)
		rt_leftovers(d, false);
}

static void register_gauges(struct daemon *d)
{
	struct metric *g;

	g = metrics_family(d->metrics, MF_RESERVED_CPUS);
	metric_set(g, cpuset_count(&d->cfg->reserved));
	d->g_available = metrics_family(d->metrics, MF_AVAILABLE_CPUS);
	d->g_allocated = metrics_family(d->metrics, MF_ALLOCATED_CPUS);
	d->g_claims = metrics_family(d->metrics, MF_RESOURCE_CLAIMS_ACTIVE);
}

/* A device's slice attributes, for the device metadata files: as published
 * now (PCIe roots, online CPUs). */
static int device_attributes(void *ud, const char *device, struct json_object **ret)
{
	struct daemon *d = ud;
	struct slices_opts so = { .node = d->node, .pcie = d->pcie, .online = &d->online,
				  .smt_layout = d->smt_layout[0] ? d->smt_layout : NULL };

	return slices_device_attributes(d->devices, &so, device, ret);
}

static bool claim_is_prepared(void *ud, const char *uid)
{
	struct daemon *d = ud;

	return state_claim(d->state, uid) != NULL;
}

static void on_registered(void *ud, bool ok)
{
	struct daemon *d = ud;

	httpd_check_set(d->httpd, d->check_registered, ok);
}

/* ---- heap trimming ------------------------------------------------------------------- */

/* Work in bursts (publishing a 1024-CPU node builds and drops megabytes of
 * JSON; a restart parses the checkpoint and the runtime's Synchronize) frees
 * heap that glibc keeps dirty in the process: it returns only the top of the
 * heap by itself, and one live allocation above a hole keeps the hole.
 * malloc_trim gives the free pages anywhere in the heap back. It runs a
 * moment after a burst the daemon knows of (start-up, a publication), and
 * otherwise when the heap's free bytes have grown noticeably since the last
 * trim, looked at once a second (cheap: it walks malloc's bins, not the
 * heap). The check alone misses the publication when it fires in the middle
 * of it. make bench (docs/memory.md), private dirty memory: after publishing
 * 1024 CPUs 2.3-2.9 MiB with both, 3.6 MiB with neither, 2.3 to 4.3 MiB with
 * the check alone; after a restart with 1000 claims and 1000 containers
 * 3.6-3.7 MiB once the check ran, 4.9 MiB without it. glibc's own
 * thresholds stay at their defaults: raising them (mallopt) made no Prepare
 * or CreateContainer measurably faster and kept freed heap dirty against the
 * trim. */
static void trim_now(struct daemon *d)
{
	(void)malloc_trim(0);
	d->trim_free = mallinfo2().fordblks;
}

static void on_trim_check(evutil_socket_t fd, short what, void *ud)
{
	struct daemon *d = ud;

	(void)fd;
	(void)what;
	if (mallinfo2().fordblks > d->trim_free + TRIM_FREED_MIN)
		trim_now(d);
}

static void on_trim_soon(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	trim_now(ud);
}

static void trim_soon(struct daemon *d)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 50 * 1000 };

	if (d->trim_soon && !evtimer_pending(d->trim_soon, NULL))
		(void)evtimer_add(d->trim_soon, &tv);
}

static void on_slices(void *ud, bool ready)
{
	struct daemon *d = ud;

	httpd_check_set(d->httpd, d->check_slices, ready);
	if (ready) /* the publication's JSON is gone */
		trim_soon(d);
}

/* Nodes with memory, for NUMA-local claims (cpuset.mems may name only
 * those); a topology file has no machine behind it: no restriction. Returns
 * them (d->memory_nodes), or NULL for no restriction. */
static const struct cpuset *read_memory_nodes(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct errbuf eb = {};
	int r;

	if (cfg->topology_file && *cfg->topology_file)
		return NULL;
	r = hotplug_memory_nodes(cfg->sysfs_root && *cfg->sysfs_root ? cfg->sysfs_root : NULL,
				 &d->memory_nodes, &eb);
	if (r == 0)
		return &d->memory_nodes;
	if (r != -ENOENT)
		log_warn("memory_nodes_unknown", "error=%s action=every_node_has_memory",
			 log_quote(errbuf_text(&eb, r)));
	return NULL;
}

/* The pinning check (bpfmon); not loading is logged, not fatal. */
static int start_bpf(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct bpfmon_opts bo = {
		.contention = cfg->contention_histogram,
		.cgroup = cgroup_pinning_hier(),
		.enforcement = (enum bpfmon_enforcement)cfg->pinning_enforcement,
	};
	int r;

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
	return bpfmon_metrics_register(d->bpf, d->metrics);
}

/* --rt-cpus: the real-time monitor (degrades like the pinning check: the
 * claims work without it) and the real-time control. */
static int start_rt(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct rtctl_opts ro = { .limits = &d->rt, .state_dir = cfg->state_dir,
				 .on_failure = report_rt_failure, .report_ud = d->report };
	int r;

	if (cfg->bpf) {
		struct rtmon_opts mo = { .cgroup_v1 = cgroup_pinning_hier() == CGROUP_V1 };
		struct errbuf eb = {};

		r = rtmon_new(&mo, &d->rtmon, &eb);
		if (r < 0)
			log_warn("rt_monitor_not_loaded", "reason=%s action=serving_without_it",
				 log_quote(eb.s));
		else
			log_info("rt_monitor_loaded", "");
	}
	ro.mon = d->rtmon;
	r = rtctl_new(d->base, d->state, d->metrics, &ro, &d->rtctl);
	if (r < 0)
		return log_error_errno(r, "rt_init_failed", "");
	pools_set_rt(d->pools, d->rtctl);
	return 0;
}

static int start_nri(struct daemon *d)
{
	const char *socket = d->cfg->nri_socket;
	struct nri_config nc = { .socket_path = socket };
	int r;

	r = nri_new(d->base, &nc, pools_nri_handlers(), d->pools, &d->nri);
	if (r < 0)
		return log_error_errno(r, "nri_init_failed", "socket=%s", socket);
	pools_set_nri(d->pools, d->nri);
	r = nri_start(d->nri);
	if (r < 0)
		return log_error_errno(r, "nri_start_failed", "socket=%s", socket);
	return 0;
}

/* The BPF checks and the NRI plugin: both degrade (reported on /metrics and
 * in the log) rather than stop the driver when the node lacks them. */
static int start_node_agents(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct pools_opts po = { .push_updates = cfg->nri_push_updates,
				 .state_dir = cfg->state_dir,
				 .topo = d->topo,
				 .claims = &d->claims.source,
				 .keep_cpu_quota = cfg->cpu_quota == CFG_CPU_QUOTA_KEEP,
				 .on_not_consumer = report_not_consumer,
				 .report_ud = d->report };
	int r;

	po.memory_nodes = read_memory_nodes(d);
	if (cfg->bpf) {
		r = start_bpf(d);
		if (r < 0)
			return r;
	}
	r = pools_new(d->state, d->bpf && bpfmon_is_loaded(d->bpf) ? d->bpf : NULL, &po,
		      d->metrics, &d->pools);
	if (r < 0)
		return log_error_errno(r, "pools_init_failed", "");
	if (d->rt_on) {
		r = start_rt(d);
		if (r < 0)
			return r;
	}
	return cfg->nri ? start_nri(d) : 0;
}

/* dra_cpu_kube_*: the API client's own counters, copied at each scrape. */
static void collect_kube(struct metrics *m, void *ud)
{
	struct daemon *d = ud;
	struct kube_stats st;
	static const struct {
		enum metric_family id;
		size_t off;
	} fams[] = {
		{ MF_KUBE_REQUESTS_TOTAL, offsetof(struct kube_stats, attempts) },
		{ MF_KUBE_RETRIES_TOTAL, offsetof(struct kube_stats, retries) },
		{ MF_KUBE_FAILURES_TOTAL, offsetof(struct kube_stats, failures) },
		{ MF_KUBE_TOKEN_RELOADS_TOTAL, offsetof(struct kube_stats, token_reloads) },
		{ MF_KUBE_OVERSIZED_TOTAL, offsetof(struct kube_stats, too_big) },
		{ MF_KUBE_WATCH_EVENTS_TOTAL, offsetof(struct kube_stats, watch_events) },
	};

	if (!d->kube)
		return;
	kube_get_stats(d->kube, &st);
	for (size_t i = 0; i < ARRAY_SIZE(fams); i++)
		metric_set(metrics_family(m, fams[i].id),
			   (double)*(const uint64_t *)((const char *)&st + fams[i].off));
}

static int start_kube(struct daemon *d)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *kc = NULL;
	struct errbuf err = { "" };
	unsigned flags = d->cfg->allow_insecure_kubeconfig ? KUBECONFIG_ALLOW_INSECURE : 0;
	int r;

	if (d->cfg->kubeconfig && *d->cfg->kubeconfig)
		r = kubeconfig_load(d->cfg->kubeconfig, flags, &kc, &err);
	else
		r = kubeconfig_in_cluster(KUBECONFIG_SA_DIR, flags, &kc, &err);
	if (r < 0) {
		log_error("kubeconfig_failed", "error=%s", log_quote(errbuf_text(&err, r)));
		return r;
	}
	r = kube_new(d->base, kc, NULL, &d->kube);
	if (r < 0)
		return log_error_errno(r, "api_client_failed", "server=%s", kc->server);
	kube_claims_set_kube(&d->claims, d->kube);
	r = metrics_add_collector(d->metrics, collect_kube, d);
	if (r < 0)
		return r;
	log_info("api_server", "server=%s source=%s", kc->server, kc->source);
	return 0;
}

/* The isolated CPUs the shared pool leaves out: none when the node lets
 * them in (--isolated-cpus-shared) or when nothing else would be left for
 * shared containers. */
void daemon_isolated_unshared(struct daemon *d, struct cpuset *ret)
{
	cpuset_zero(ret);
	if (d->cfg->isolated_shared)
		return;
	if (cpuset_equal(&d->devices->isolated, &d->devices->allocatable)) {
		log_warn("isolated_cpus_shared", "reason=\"every allocatable CPU is isolated\" "
			 "action=\"they form the shared pool\"");
		return;
	}
	*ret = d->devices->isolated;
}

/* GET /nodemap: the picture `dra-cpu-driver map` draws (core/nodemap.h). */
static int serve_nodemap(void *ud, struct evbuffer *out)
{
	struct daemon *d = ud;
	struct nodemap_input in = { .node = d->node, .topo = d->topo, .state = d->state,
				    .online = &d->online, .reserved = &d->cfg->reserved,
				    .rt_cpus = &d->cfg->rt_cpus };
	_cleanup_json_ struct json_object *doc = NULL;
	const char *text;
	int r;

	r = nodemap_build(&in, &doc);
	if (r < 0)
		return r;
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	if (!text || evbuffer_add(out, text, strlen(text)) < 0)
		return -ENOMEM;
	return 0;
}

/* The configuration file changed under us (a ConfigMap update swaps
 * ..data). The driver keeps what it started with: mode, grouping and reserved
 * CPUs shape the published devices and the claims already prepared on them,
 * so a new file takes effect at the next start, which the pod's restart
 * gives. Say so once per change; a file back to what was read clears it. */
static void on_config_changed(void *ud, int r, uint64_t digest, const struct errbuf *eb)
{
	struct daemon *d = ud;
	bool stale = r < 0 || digest != d->cfg->config_digest;

	metric_set(d->g_config_stale, stale);
	if (r < 0)
		log_warn("config_file_unreadable", "file=%s error=%s action=\"keeping the "
			 "configuration read at start\"", log_quote(d->cfg->config_file),
			 log_quote(errbuf_text(eb, r)));
	else if (stale)
		log_warn("config_file_changed", "file=%s action=\"restart the driver's pod to "
			 "apply it; the configuration read at start stays in effect\"",
			 log_quote(d->cfg->config_file));
	else
		log_info("config_file_restored", "file=%s", log_quote(d->cfg->config_file));
}

static void watch_config(struct daemon *d)
{
	int r;

	if (!d->cfg->config_file || !*d->cfg->config_file)
		return;
	d->g_config_stale = metrics_family(d->metrics, MF_CONFIG_RESTART_REQUIRED);
	r = filewatch_new(d->base, d->cfg->config_file, CFGFILE_SIZE_MAX, d->cfg->config_digest,
			  on_config_changed, d, &d->config_watch);
	if (r < 0)
		log_warn_errno(r, "config_watch_failed", "file=%s action=\"changes to the file go "
			       "unnoticed until a restart\"", log_quote(d->cfg->config_file));
}

/* The kernel's deadline servers or sysctls changed: what claims are
 * admitted against, what rtctl reports and what the slices offer follow. */
static void on_rt_limits(void *ud, const struct sched_limits *now, const struct sched_limits *before)
{
	struct daemon *d = ud;

	(void)before;
	d->rt = rt_limits_of(now);
	(void)devices_set_rt_capacity(d->devices, d->rt.capacity_milli);
	if (d->rtctl)
		rtctl_set_limits(d->rtctl, &d->rt);
	if (d->publisher)
		publisher_devices_changed(d->publisher, "rt_capacity");
}

/* What this node offers: the real-time limits (followed), isolated CPUs, the
 * devices, the PCIe roots and the layout an external allocator is told. */
static int load_devices(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	const struct topo *topo = d->topo;
	struct isol iso;
	int r;

	d->rt_on = !cpuset_is_empty(&cfg->rt_cpus);
	if (d->rt_on) {
		struct schedwatch_opts wo = { .cpus = cfg->rt_cpus,
					      .headroom_milli = cfg->rt_headroom_milli,
					      .on_change = on_rt_limits,
					      .ud = d };
		struct errbuf eb = {};

		r = schedwatch_new(d->base, &wo, &d->rtwatch, &eb);
		if (r < 0)
			return log_error_errno(r, "rt_limits_failed", "error=%s",
					       log_quote(errbuf_text(&eb, r)));
		d->rt = rt_limits_of(schedwatch_limits(d->rtwatch));
	}
	r = isol_read_logged(cfg_sysfs_root(cfg), cfg_has_topology_file(cfg), &iso);
	if (r < 0)
		return r;
	r = devices_build_node(topo, &cfg->reserved, &cfg->rt_cpus, &iso, cfg->device_mode,
			       cfg->group_by, d->rt_on ? &d->rt : NULL, &d->devices);
	if (r < 0)
		return log_error_errno(r, "devices_failed", "");
	if (cfg->expose_pcie_roots) {
		r = pcie_load_logged(cfg_sysfs_root(cfg), cfg_has_topology_file(cfg), &topo->online,
				     &d->pcie);
		if (r < 0)
			return r;
	}
	if (cfg->allocator == CFG_ALLOCATOR_EXTERNAL) {
		struct errbuf eb = {};

		r = devices_external_layout(topo, d->devices, d->smt_layout,
					    sizeof(d->smt_layout), &eb);
		if (r < 0)
			return log_error_errno(r, "external_allocator_failed", "reason=%s",
					       log_quote(errbuf_text(&eb, r)));
		log_info("external_allocator", "smt_layout=%s", d->smt_layout);
	}
	return 0;
}

/* /metrics, /healthz, /readyz and /nodemap; not serving until the end. */
static int start_http(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	int r;

	r = httpd_new(d->base, cfg->bind_address, NULL, d->metrics, &d->httpd);
	if (r < 0)
		return log_error_errno(r, "http_bind_failed", "address=%s", cfg->bind_address);
	d->check_serving = httpd_check_add(d->httpd, "serving", HTTPD_HEALTH | HTTPD_READY);
	d->check_registered = !cfg->kubelet_registration
				      ? -1
				      : httpd_check_add(d->httpd, "kubelet-registration",
							HTTPD_HEALTH | HTTPD_READY);
	d->check_slices = httpd_check_add(d->httpd, "resourceslices", HTTPD_READY);
	r = httpd_document(d->httpd, "/nodemap", serve_nodemap, d);
	if (r < 0)
		return log_error_errno(r, "http_route_failed", "path=/nodemap");
	return 0;
}

/* Metadata a crash left behind (its claim never committed, or its Unprepare
 * did not finish). */
static void sweep_metadata(struct daemon *d)
{
	char data_dir[4096];
	struct metadata_opts mo = { .data_dir = data_dir, .cdi_dir = d->cfg->cdi_dir,
				    .driver = "dra.cpu", .pool = d->node };
	int r;

	(void)snprintf(data_dir, sizeof(data_dir), "%s/plugins/dra.cpu",
		       d->cfg->kubelet_root_dir);
	r = metadata_sweep(&mo, claim_is_prepared, d);
	if (r > 0)
		log_info("metadata_swept", "claims=%d", r);
}

/* Every prepared claim is reserved again before any socket opens. */
static int restore_state(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct state_opts so = { .cdi_dir = cfg->cdi_dir, .state_dir = cfg->state_dir,
				 .allocatable = d->devices->allocatable,
				 .rt_cpus = cfg->rt_cpus };
	int r;

	/* Isolated CPUs stay out of the shared pool, unless the node lets
	 * them in or nothing else would be left for shared containers. */
	daemon_isolated_unshared(d, &so.isolated);

	r = state_new(&so, &d->state);
	if (r < 0)
		return r;
	r = state_add_observer(d->state, on_state_change, d);
	if (r < 0)
		return r;
	r = state_load(d->state);
	if (r < 0)
		return r;
	daemon_update_gauges(d);
	r = irqiso_new(d->state,
		       &(struct irqiso_opts){
			       .isolate = cfg->irq_isolation == CFG_IRQ_ISOLATE,
			       .procfs_root = *cfg->procfs_root ? cfg->procfs_root : NULL,
			       .state_dir = cfg->state_dir },
		       d->metrics, &d->irqiso);
	if (r < 0)
		return log_error_errno(r, "irq_isolation_failed", "dir=%s", cfg->state_dir);
	if (!d->rt_on)
		rt_leftovers(d, true);
	sweep_metadata(d);
	return 0;
}

/* Events and claim status (cmd/report.h); started once the API client is. */
static int new_report(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct report_opts ro = { .node = d->node, .topo = d->topo, .events = cfg->events,
				  .series_interval_s = cfg->events_series_interval_s,
				  .claim_status = cfg->claim_status };

	return report_new(&ro, &d->report);
}

static int start_publisher(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct publisher_opts po = { .node = d->node, .devices = d->devices,
				     .repair_timeout_ms = cfg->slice_repair_timeout_s * 1000,
				     .on_state = on_slices, .ud = d,
				     .node_allocatable = cfg->node_allocatable,
				     .pcie = d->pcie,
				     .smt_layout = d->smt_layout[0] ? d->smt_layout : NULL };
	int r;

	r = publisher_new(d->base, d->kube, &po, d->metrics, &d->publisher);
	if (r < 0)
		return log_error_errno(r, "publisher_failed", "");
	return 0;
}

/* The kubelet plugin: registration, Prepare and Unprepare, device health. */
static int start_plugin(struct daemon *d)
{
	const struct cfg *cfg = d->cfg;
	struct dra_opts dopt = {
		.node = d->node,
		.kubelet_root = cfg->kubelet_root_dir,
		.device_mode = cfg->device_mode,
		.first_request_timeout_ms = cfg->kubelet_first_request_timeout_s * 1000,
		.claims = &d->claims.source,
		.on_registered = on_registered,
		.registered_ud = d,
		.device_metadata = cfg->device_metadata,
		.memory_local = cfg->memory_locality == CFG_MEMORY_LOCAL,
		.cdi_dir = cfg->cdi_dir,
		.device_attributes = device_attributes,
		.attributes_ud = d,
		.rt = d->rt_on ? &d->rt : NULL,
		.external_allocator = cfg->allocator == CFG_ALLOCATOR_EXTERNAL,
		.report = &report_dra_ops,
		.report_ud = d->report,
	};

	return dra_new(d->base, &dopt, d->state, d->topo, d->devices, d->metrics, &d->dra);
}

/* The heap trimmer's timers, and SIGTERM/SIGINT (graceful stop). */
static int start_timers(struct daemon *d)
{
	struct timeval tv = clock_tv_ms(TRIM_PERIOD_MS);

	d->trim_timer = event_new(d->base, -1, EV_PERSIST, on_trim_check, d);
	d->trim_soon = evtimer_new(d->base, on_trim_soon, d);
	if (!d->trim_timer || !d->trim_soon || event_add(d->trim_timer, &tv) < 0)
		return log_error_errno(-ENOMEM, "trim_timer_failed", "");
	d->sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
	d->sigint = evsignal_new(d->base, SIGINT, on_signal, d);
	d->grace = evtimer_new(d->base, on_grace_expired, d);
	if (!d->sigterm || !d->sigint || !d->grace || event_add(d->sigterm, NULL) < 0 ||
	    event_add(d->sigint, NULL) < 0)
		return log_error_errno(-ENOMEM, "signal_setup_failed", "");
	return 0;
}

/* Everything that needs privilege is set up: keep only what the loop uses. */
static void drop_privileges(struct daemon *d)
{
	int r = caps_drop_except(CAPS_KEEP_DAEMON | (d->rt_on ? CAPS_KEEP_RT : 0));

	if (r < 0)
		log_warn_errno(r, "capability_drop_failed", "action=continuing");
	else if (r > 0)
		log_info("capabilities_dropped", "dropped=%d kept=\"dac_override dac_read_search "
						 "fowner%s sys_nice\"",
			 r, d->rt_on ? " kill" : "");
}

int daemon_run(const struct cfg *cfg, const struct topo *topo)
{
	_cleanup_(daemon_freep) struct daemon *d = NULL;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->uevent_fd = -1;
	d->cfg = cfg;
	d->topo = topo;
	d->online = topo->online;
	kube_claims_init(&d->claims);
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
	r = load_devices(d);
	if (r < 0)
		return r;
	register_gauges(d);
	watch_config(d);
	r = start_http(d);
	if (r < 0)
		return r;
	r = restore_state(d);
	if (r < 0)
		return r;
	r = new_report(d);
	if (r < 0)
		return r;
	r = start_node_agents(d);
	if (r < 0)
		return r;
	r = start_kube(d);
	if (r < 0)
		return r;
	r = report_start(d->report, d->base, d->kube, d->metrics);
	if (r < 0)
		return log_error_errno(r, "report_init_failed", "");
	r = start_publisher(d);
	if (r < 0)
		return r;
	r = start_plugin(d);
	if (r < 0)
		return r;

	d->g_online = metrics_family(d->metrics, MF_ONLINE_CPUS);
	metric_set(d->g_online, cpuset_count(&topo->online));
	r = daemon_hotplug_start(d);
	if (r < 0)
		return log_error_errno(r, "hotplug_setup_failed", "");
	r = start_timers(d);
	if (r < 0)
		return r;
	drop_privileges(d);

	log_info("started", "node=%s devices=%d mode=%s http_port=%d cpus=%d", d->node,
		 d->devices->n, cfg_device_mode_name(cfg->device_mode), httpd_port(d->httpd),
		 topo->n_cpus);
	httpd_check_set(d->httpd, d->check_serving, true);
	/* Start-up parsed the checkpoint, the topology and the BPF objects:
	 * hand the freed heap back before settling down. */
	trim_now(d);

	r = event_base_dispatch(d->base);
	if (r < 0)
		return log_error_errno(-EIO, "loop_failed", "");
	log_info("stopped", "");
	return 0;
}
