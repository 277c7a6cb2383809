/* Real-time claims in the kernel. See rtctl.h.
 *
 * One record per container holding a real-time claim, in a small array
 * (real-time containers are few: a handful per real-time CPU):
 *
 *   WAITING ──pid known──> (v2: partition) ──sched_getattr matches──> APPLIED
 *                               │ else sched_setattr ──0──────────────> APPLIED
 *                               │        └─EPERM, within retry_max_ms: timer, again
 *                               └──────── EBUSY, EPERM too long, ESRCH ──> FAILED
 */
#include "pinning/rtctl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define LOG_MOD "rtctl"
#include "core/rt.h"
#include "core/state.h"
#include "host/cgroup.h"
#include "host/rtdomain.h"
#include "host/sched.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/num.h"
#include "obs/metrics.h"
#include "pinning/rtmon.h"
#include "pinning/rtreport.h"
#include "pinning/rtsweep.h"

enum rtc_state { RTC_WAITING, RTC_APPLIED, RTC_FAILED };

struct rtc {
	struct rtctl *rt;
	char *id, *name, *pod, *cgroups_path;
	char uid[CDI_UID_MAX];
	char pod_uid[CDI_UID_MAX];
	pid_t pid;
	uint64_t start; /* of pid: the same task, not a reused pid */
	enum rtc_state st;
	bool by_runtime; /* the runtime was given the adjustment */
	bool partitioned; /* v2: its cgroup is the partition */
	/* The runtime stopped it: kept until its claim is unprepared, so that
	 * what its cgroup still holds then is ended too. */
	bool stopped;
	uint64_t cgroup_id; /* its cgroup, an owner in the monitor; 0: none */
	struct cpuset owned; /* the CPUs it owns there */
	int64_t first_try_ms;
	struct event *retry;
};

struct rtctl {
	struct event_base *base;
	struct state *state;
	rtctl_evict_fn evict;
	void *evict_ud;
	struct rt_limits limits;
	struct rtdomain *dom;
	char *cgroup_root, *proc_root;
	unsigned retry_ms, retry_max_ms, refresh_ms;
	bool runtime_applies;
	struct rtc **v;
	int n;
	struct event *refresh;
	struct rtctl_stats st;
	struct metric *applied, *failures, *retries, *ended, *g_isolated;
	struct metric *g_capacity; /* dra_cpu_rt_bandwidth_capacity */
	/* the monitor's */
	struct rtmon *mon;
	char *state_dir;
	void (*on_failure)(void *ud, const char *pod, const char *pod_uid, const char *container,
			   const struct state_claim *claim, const char *why, bool evicted);
	void *report_ud;
	struct metric *m_tasks, *m_runtime, *m_throttled, *m_overruns, *m_misses, *m_bw,
		*m_foreign;
};

static void write_owners(struct rtctl *rt);

static void rtc_free(struct rtc *x)
{
	if (!x)
		return;
	if (x->retry)
		event_free(x->retry);
	free(x->id);
	free(x->name);
	free(x->pod);
	free(x->cgroups_path);
	free(x);
}

static struct rtc *find(const struct rtctl *rt, const char *id)
{
	for (int i = 0; i < rt->n; i++)
		if (!strcmp(rt->v[i]->id, id))
			return rt->v[i];
	return NULL;
}

static void disown(struct rtctl *rt, struct rtc *x)
{
	if (!rt->mon || !x->cgroup_id)
		return;
	CPUSET_FOREACH(cpu, &x->owned)
	(void)rtmon_own(rt->mon, x->cgroup_id, cpu, false);
	x->cgroup_id = 0;
	cpuset_zero(&x->owned);
	write_owners(rt);
}

static void drop(struct rtctl *rt, struct rtc *x)
{
	disown(rt, x);
	for (int i = 0; i < rt->n; i++)
		if (rt->v[i] == x) {
			rt->v[i] = rt->v[--rt->n];
			break;
		}
	rtc_free(x);
}

/* ---- which claims ---------------------------------------------------------------------- */

/* The one real-time claim among uids, or NULL; -EINVAL in *r with err when
 * the container mixes it with others or holds two. */
static const struct state_claim *rt_claim_of(struct rtctl *rt, const char (*uids)[CDI_UID_MAX],
					     int n, int *r, struct errbuf *eb)
{
	const struct state_claim *found = NULL;
	int others = 0;

	*r = 0;
	for (int i = 0; i < n; i++) {
		const struct state_claim *c = state_claim(rt->state, uids[i]);

		if (!c || !c->rt) {
			others++;
			continue;
		}
		if (found) {
			*r = errbuf_fail(eb, -EINVAL,
					 "claims %s and %s are both real-time: a container holds one "
					 "(its main task takes one policy)",
					 found->uid, c->uid);
			return NULL;
		}
		found = c;
	}
	if (found && others) {
		*r = errbuf_fail(eb, -EINVAL,
				 "real-time claim %s shares the container with other dra.cpu claims: "
				 "a real-time container holds no other",
				 found->uid);
		return NULL;
	}
	return found;
}

static void params_of(const struct rt_budget *b, struct sched_params *p)
{
	*p = (struct sched_params){ .flags = SCHED_FLAG_RESET_ON_FORK_ };
	switch (b->policy) {
	case RT_POLICY_DEADLINE:
		p->policy = SCHED_POLICY_DEADLINE;
		p->runtime_ns = b->runtime_ns;
		p->deadline_ns = b->deadline_ns;
		p->period_ns = b->period_ns;
		break;
	case RT_POLICY_FIFO:
	case RT_POLICY_RR:
		p->policy = b->policy == RT_POLICY_FIFO ? SCHED_POLICY_FIFO : SCHED_POLICY_RR;
		p->priority = (uint32_t)b->priority;
		break;
	default:
		p->policy = SCHED_POLICY_OTHER;
		break;
	}
}

/* The container's cgroup directory under our root, from the runtime's
 * cgroupsPath (host/cgroup.h). */
static int ctr_dir(const struct rtctl *rt, const char *cgroups_path, char *buf, size_t size)
{
	char path[PATH_MAX];
	int r = cgroup_runtime_path(cgroups_path, path, sizeof(path));

	if (r < 0)
		return r;
	r = snprintf(buf, size, "%s%s", rt->cgroup_root, path);
	return r < 0 || (size_t)r >= size ? -ENAMETOOLONG : 0;
}

/* ---- failures and teardown --------------------------------------------------------------- */

/* The first 12 characters of the container's id (as the runtime shows it),
 * in buf; the runtime's names and ids go through log_quote(). */
static const char *short_id(const struct rtc *x, char buf[13])
{
	(void)snprintf(buf, 13, "%s", x->id);
	return buf;
}

static void fail(struct rtctl *rt, struct rtc *x, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void fail(struct rtctl *rt, struct rtc *x, const char *reason, const char *fmt, ...)
{
	const struct state_claim *c = state_claim(rt->state, x->uid);
	bool evict = !c || c->budget.on_failure == RT_ON_FAILURE_EVICT;
	struct errbuf why = {};
	char id[13];
	va_list ap;
	int r;

	va_start(ap, fmt);
	errbuf_setv(&why, fmt, ap);
	va_end(ap);
	x->st = RTC_FAILED;
	rt->st.failures++;
	metric_series_add(metric_with(rt->failures, reason, evict ? "evict" : "warn"), 1);
	if (!evict) {
		log_warn("rt_policy_failed",
			 "container=%s pod=%s id=%s claim=%s reason=%s "
			 "why=%s action=running_without_guarantees",
			 log_quote(x->name), log_quote(x->pod), log_quote(short_id(x, id)), x->uid,
			 reason, log_quote(why.s));
		if (c && rt->on_failure)
			rt->on_failure(rt->report_ud, x->pod, x->pod_uid, x->name, c, why.s, false);
		return;
	}
	r = rt->evict ? rt->evict(rt->evict_ud, x->id, why.s) : -ENOTCONN;
	if (c && rt->on_failure)
		rt->on_failure(rt->report_ud, x->pod, x->pod_uid, x->name, c, why.s, r == 0);
	if (r == 0)
		rt->st.evictions++;
	log_error("rt_policy_failed",
		  "container=%s pod=%s id=%s claim=%s reason=%s why=%s "
		  "action=%s",
		  log_quote(x->name), log_quote(x->pod), log_quote(short_id(x, id)), x->uid, reason,
		  log_quote(why.s), r == 0 ? "evict" : "evict_failed");
}

static void count_ended(struct rtctl *rt, int n)
{
	rt->st.killed += (uint64_t)n;
	metric_add(rt->ended, n);
}

/* Ends the container's tasks: its main task if still the one it was, and
 * whatever its cgroup (and the cgroups below it) still holds, also the
 * children it forked that outlived it (pinning/rtsweep.h). */
static void end_tasks(struct rtctl *rt, struct rtc *x)
{
	char dir[PATH_MAX];
	int n = 0;

	if (x->pid)
		n += rtsweep_task(rt->proc_root, x->pid, x->start);
	if (ctr_dir(rt, x->cgroups_path, dir, sizeof(dir)) == 0)
		n += rtsweep_cgroup(dir);
	count_ended(rt, n);
}

/* What still runs real-time on the CPUs of the claim c that is gone;
 * since: when its first container started, 0 when unknown. */
static void end_budget(struct rtctl *rt, const struct state_claim *c, uint64_t since)
{
	count_ended(rt, rtsweep_cpus(rt->proc_root, rt->state, c, since));
}

static void v2_release(struct rtctl *rt, struct rtc *x)
{
	char dir[PATH_MAX];

	if (x->partitioned &&
	    ctr_dir(rt, x->cgroups_path, dir, sizeof(dir)) == 0)
		(void)rtdomain_v2_release(rt->dom, dir);
	x->partitioned = false;
}

/* ---- applying ---------------------------------------------------------------------------- */

static void apply(struct rtctl *rt, struct rtc *x);

static void on_retry(evutil_socket_t fd, short what, void *ud)
{
	struct rtc *x = ud;

	apply(x->rt, x);
}

static void applied(struct rtctl *rt, struct rtc *x, const char *by, const struct rt_budget *b)
{
	char id[13];

	x->st = RTC_APPLIED;
	metric_series_add(metric_with(rt->applied, by), 1);
	if (!strcmp(by, "runtime"))
		rt->st.applied_runtime++;
	else if (!strcmp(by, "plugin"))
		rt->st.applied_plugin++;
	else
		rt->st.applied_already++;
	log_info("rt_policy_applied", "container=%s pod=%s id=%s claim=%s pid=%d policy=%s "
				      "runtime_ns=%" PRIu64 " period_ns=%" PRIu64 " by=%s",
		 log_quote(x->name), log_quote(x->pod), log_quote(short_id(x, id)), x->uid,
		 (int)x->pid, rt_policy_name(b->policy),
		 b->runtime_ns, b->period_ns, by);
}

/* sched_setattr on x's task failed with r for good: why, for fail(). */
static void apply_failed(struct rtctl *rt, struct rtc *x, int cpu, int r)
{
	switch (r) {
	case -EBUSY:
		fail(rt, x, "ebusy",
		     "the kernel has no deadline bandwidth left on CPU %d (EBUSY): tasks outside "
		     "the driver's claims hold it",
		     cpu);
		break;
	case -EPERM: {
		struct cpuset un;
		char who[256] = "";
		int on = sched_task_cpu(rt->proc_root, x->pid);

		if (rtdomain_version(rt->dom) == 1)
			(void)rtdomain_v1_unisolated(rt->dom, &un, who, sizeof(who));
		fail(rt, x, "eperm",
		     "sched_setattr refused for %u ms (EPERM): the task runs on CPU %d, CPU %d %s%s",
		     rt->retry_max_ms, on, cpu,
		     who[0] ? "is merged into a larger root domain by cpuset " : "is isolated",
		     who);
		break;
	}
	case -ESRCH:
		fail(rt, x, "vanished", "the container's main task %d is gone", (int)x->pid);
		break;
	default:
		fail(rt, x, "error", "sched_setattr on task %d: %s", (int)x->pid, strerror(-r));
		break;
	}
}

static void apply(struct rtctl *rt, struct rtc *x)
{
	const struct state_claim *c = state_claim(rt->state, x->uid);
	struct sched_params want, have;
	struct cpuset one;
	struct errbuf eb = {};
	int cpu, r;

	if (!c || x->stopped)
		return; /* unprepared or stopped meanwhile: teardown has run */
	if (c->budget.policy == RT_POLICY_NONE) {
		fail(rt, x, "no_budget",
		     "claim %s was restored without its budget (no checkpoint): prepare it again",
		     x->uid);
		return;
	}
	params_of(&c->budget, &want);
	r = sched_get(x->pid, &have);
	if (r == 0 && sched_params_match(&have, &want)) {
		/* The runtime applied it, or it was before a restart. */
		applied(rt, x, x->by_runtime && x->first_try_ms == 0 ? "runtime" : "already",
			&c->budget);
		return;
	}
	if (r == -ESRCH) {
		fail(rt, x, "vanished", "the container's main task %d is gone", (int)x->pid);
		return;
	}
	if (!x->first_try_ms)
		x->first_try_ms = clock_now_ms();
	if (rtdomain_version(rt->dom) == 1 && rtdomain_refresh(rt->dom, &eb) < 0)
		log_warn("rt_refresh_failed", "reason=%s", log_quote(eb.s));
	/* One CPU: a deadline task's affinity must not be wider than its root
	 * domain (the kernel would charge one domain and let it run on others). */
	cpu = cpuset_first(cpuset_from_view(&c->cpus, &one));
	cpuset_zero(&one);
	cpuset_set(&one, cpu);
	r = sched_set_affinity(x->pid, &one);
	if (r == 0)
		r = sched_set(x->pid, &want);
	if (r == 0) {
		applied(rt, x, "plugin", &c->budget);
		return;
	}
	if (r == -EPERM && clock_now_ms() - x->first_try_ms < (int64_t)rt->retry_max_ms) {
		/* Most often a sleeping task still counted on the CPU it last ran
		 * on, another root domain: it moves when it wakes. */
		struct timeval tv = clock_tv_ms(rt->retry_ms);

		rt->st.retries++;
		metric_add(rt->retries, 1);
		if (!x->retry)
			x->retry = evtimer_new(rt->base, on_retry, x);
		if (x->retry && event_add(x->retry, &tv) == 0)
			return;
	}
	apply_failed(rt, x, cpu, r);
}

/* ---- NRI hooks ---------------------------------------------------------------------------- */

void rtctl_configured(struct rtctl *rt, const char *name, const char *version,
		      const char *nri_version)
{
	rt->runtime_applies = rtctl_runtime_applies_scheduler(name, version, nri_version);
	log_info("rt_runtime", "runtime=%s version=%s applies_scheduler=%s", log_quote(name),
		 log_quote(version), rt->runtime_applies ? "true" : "false");
}

static struct rtc *record(struct rtctl *rt, const struct rtctl_container *c,
			  const struct state_claim *cl)
{
	struct rtc *x = calloc(1, sizeof(*x)), **v;

	if (!x)
		return NULL;
	x->rt = rt;
	x->id = strdup(c->id);
	x->name = strdup(c->name);
	x->pod = strdup(c->pod ? c->pod : "");
	(void)snprintf(x->pod_uid, sizeof(x->pod_uid), "%s", c->pod_uid ? c->pod_uid : "");
	x->cgroups_path = strdup(c->cgroups_path);
	memcpy(x->uid, cl->uid, sizeof(x->uid));
	v = realloc(rt->v, sizeof(*v) * (size_t)(rt->n + 1));
	if (!x->id || !x->name || !x->pod || !x->cgroups_path || !v) {
		if (v)
			rt->v = v;
		rtc_free(x);
		return NULL;
	}
	rt->v = v;
	rt->v[rt->n++] = x;
	return x;
}

int rtctl_create(struct rtctl *rt, const struct rtctl_container *c,
		 const char (*uids)[CDI_UID_MAX], int n, struct rt_budget *sched,
		 struct errbuf *eb)
{
	const struct state_claim *cl;
	struct rtc *x;
	int r;

	cl = rt_claim_of(rt, uids, n, &r, eb);
	if (r < 0 || !cl)
		return r;
	x = find(rt, c->id);
	if (x)
		drop(rt, x); /* created again: a fresh start */
	x = record(rt, c, cl);
	if (!x)
		return -ENOMEM;
	/* The runtime applies it in the container, before the task runs, where
	 * the root domain already exists: v1 isolation follows the claim. On v2
	 * the partition is the container's own cgroup, made once it exists, so
	 * the policy can only come after it, from here. */
	if (sched && rt->runtime_applies && rtdomain_version(rt->dom) == 1 &&
	    cl->budget.policy != RT_POLICY_NONE) {
		*sched = cl->budget;
		x->by_runtime = true;
		return 1;
	}
	return 0;
}

/* The container's cgroup owns its claim's CPUs in the monitor. */
static void own(struct rtctl *rt, struct rtc *x, const struct state_claim *cl)
{
	char dir[PATH_MAX];
	uint64_t id;

	if (!rt->mon || x->cgroup_id || ctr_dir(rt, x->cgroups_path, dir, sizeof(dir)) < 0 ||
	    cgroup_id(dir, &id) < 0)
		return;
	x->cgroup_id = id;
	(void)cpuset_from_view(&cl->cpus, &x->owned);
	CPUSET_FOREACH(cpu, &x->owned)
	(void)rtmon_own(rt->mon, id, cpu, true);
	write_owners(rt);
}

void rtctl_started(struct rtctl *rt, const struct rtctl_container *c,
		   const char (*uids)[CDI_UID_MAX], int n)
{
	const struct state_claim *cl;
	struct rtc *x;
	int r;

	if (!c->pid)
		return;
	cl = rt_claim_of(rt, uids, n, &r, NULL);
	if (!cl)
		return;
	x = find(rt, c->id);
	if (!x)
		x = record(rt, c, cl); /* after a restart: Synchronize names it */
	if (!x)
		return;
	if (x->pid == (pid_t)c->pid && x->st != RTC_WAITING)
		return; /* Start after PostCreate: done already */
	if (x->retry)
		event_del(x->retry);
	x->pid = (pid_t)c->pid;
	x->st = RTC_WAITING;
	x->stopped = false;
	x->first_try_ms = 0;
	if (sched_task_start(rt->proc_root, x->pid, &x->start) < 0)
		x->start = 0;
	own(rt, x, cl);
	if (rtdomain_version(rt->dom) == 2 && !x->partitioned) {
		char dir[PATH_MAX];
		struct errbuf eb = {};
		struct cpuset cpus;

		r = ctr_dir(rt, x->cgroups_path, dir, sizeof(dir));
		if (r == 0)
			r = rtdomain_v2_acquire(rt->dom, dir, cpuset_from_view(&cl->cpus, &cpus),
						&eb);
		if (r < 0) {
			fail(rt, x, "isolation", "no partition for the container: %s",
			     eb.s[0] ? eb.s : strerror(-r));
			return;
		}
		x->partitioned = true;
	}
	apply(rt, x);
}

/* The runtime ended the main task; whatever the container's cgroup still
 * holds (children that outlived it) is ended now, and again when the claim
 * is unprepared: the record stays until then. */
void rtctl_stopped(struct rtctl *rt, const char *container_id)
{
	struct rtc *x = find(rt, container_id);

	if (!x || x->stopped)
		return;
	if (x->retry)
		event_del(x->retry);
	end_tasks(rt, x);
	v2_release(rt, x);
	disown(rt, x);
	x->stopped = true;
	x->pid = 0;
}

/* ---- state ------------------------------------------------------------------------------- */

static void update_gauge(struct rtctl *rt)
{
	metric_set(rt->g_isolated, cpuset_count(rtdomain_active(rt->dom)));
}

static void arm_refresh(struct rtctl *rt)
{
	struct timeval tv = clock_tv_ms(rt->refresh_ms);

	if (rtdomain_version(rt->dom) == 1 && !cpuset_is_empty(rtdomain_active(rt->dom)))
		(void)event_add(rt->refresh, &tv);
	else
		(void)event_del(rt->refresh);
}

static void isolate(struct rtctl *rt, const struct state_claim *c)
{
	struct errbuf eb = {};
	struct cpuset cpus;

	(void)cpuset_from_view(&c->cpus, &cpus);
	if (rt->mon)
		CPUSET_FOREACH(cpu, &cpus)
	(void)rtmon_watch(rt->mon, cpu, true);
	if (rtdomain_version(rt->dom) != 1)
		return;
	CPUSET_FOREACH(cpu, &cpus)
	if (rtdomain_v1_acquire(rt->dom, cpu, &eb) < 0)
		log_error("rt_isolation_failed", "claim=%s cpu=%d reason=%s", c->uid, cpu,
			  log_quote(eb.s));
	update_gauge(rt);
	arm_refresh(rt);
}

static int add_rt_cpus(void *ud, const struct state_claim *c)
{
	struct cpuset cpus;

	if (c->rt)
		cpuset_or(ud, ud, cpuset_from_view(&c->cpus, &cpus));
	return 0;
}

/* What a previous run left (v1 isolation, v2 partitions) on CPUs no
 * real-time claim holds any more is put back (host/rtdomain.h). */
static void settle(struct rtctl *rt)
{
	struct cpuset held;

	cpuset_zero(&held);
	(void)state_foreach_claim(rt->state, add_rt_cpus, &held);
	rtdomain_settle(rt->dom, &held);
}

/* The claim c is unprepared: its containers' tasks are ended, then what
 * still runs real-time on its CPUs (rtsweep.h); the CPUs it leaves leave
 * their root domain. */
static void claim_removed(struct rtctl *rt, const struct state_claim *c)
{
	struct cpuset cpus;
	uint64_t since = 0;

	(void)cpuset_from_view(&c->cpus, &cpus);
	for (int i = rt->n - 1; i >= 0; i--) {
		struct rtc *x = rt->v[i];
		char id[13];

		if (strcmp(x->uid, c->uid) != 0)
			continue;
		if (x->start && (!since || x->start < since))
			since = x->start;
		end_tasks(rt, x);
		v2_release(rt, x);
		log_info("rt_claim_ended", "claim=%s container=%s id=%s", c->uid,
			 log_quote(x->name), log_quote(short_id(x, id)));
		drop(rt, x);
	}
	end_budget(rt, c, since);
	if (rtdomain_version(rt->dom) == 1)
		CPUSET_FOREACH(cpu, &cpus)
	(void)rtdomain_v1_release(rt->dom, cpu);
	if (rt->mon)
		CPUSET_FOREACH(cpu, &cpus)
	if (rt_cpu_used_milli(rt->state, cpu, &rt->limits) == 0)
		(void)rtmon_watch(rt->mon, cpu, false);
	settle(rt);
	update_gauge(rt);
	arm_refresh(rt);
}

static void on_state(void *ud, enum state_event ev, const struct state_claim *c)
{
	struct rtctl *rt = ud;

	if (!c->rt)
		return;
	if (ev == STATE_CLAIM_ADDED)
		isolate(rt, c);
	else if (ev == STATE_CLAIM_REMOVED)
		claim_removed(rt, c);
}

static void on_refresh(evutil_socket_t fd, short what, void *ud)
{
	struct rtctl *rt = ud;
	struct errbuf eb = {};
	int r = rtdomain_refresh(rt->dom, &eb);

	if (r < 0)
		log_warn("rt_refresh_failed", "reason=%s", log_quote(eb.s));
	arm_refresh(rt);
}

static int isolate_each(void *ud, const struct state_claim *c)
{
	if (c->rt)
		isolate(ud, c);
	return 0;
}

/* ---- the monitor ------------------------------------------------------------------------- */

/* rt-owners.json for bpf-verify --realtime (rtreport.h): rewritten on every
 * change of ownership; a failure is logged, the monitor does not need it. */
static void write_owners(struct rtctl *rt)
{
	struct rt_owners o = { 0 };
	_cleanup_free_ char *text = NULL;
	int r;

	if (!rt->state_dir)
		return;
	o.cpus = *rtdomain_active(rt->dom);
	for (int i = 0; i < rt->n; i++) {
		const struct rtc *x = rt->v[i];
		const struct state_claim *cl = state_claim(rt->state, x->uid);

		if (!x->cgroup_id || !cl)
			continue;
		CPUSET_FOREACH(cpu, &x->owned)
		{
			struct rt_owner w = { .cpu = cpu,
					      .cgroup_id = x->cgroup_id,
					      .runtime_ns = cl->budget.runtime_ns,
					      .period_ns = cl->budget.period_ns };

			cpuset_set(&o.cpus, cpu);
			(void)ctr_dir(rt, x->cgroups_path, w.cgroup, sizeof(w.cgroup));
			(void)snprintf(w.claim, sizeof(w.claim), "%s/%s", cl->ns, cl->name);
			(void)snprintf(w.container, sizeof(w.container), "%s", x->name);
			if (rt_owners_add(&o, &w) < 0)
				break;
		}
	}
	r = rt_owners_json(&o, &text);
	if (r == 0)
		r = fileio_write_atomic(rt->state_dir, RTREPORT_OWNERS_FILE, text, strlen(text),
					0600);
	if (r < 0)
		log_warn_errno(r, "rt_owners_write_failed", "dir=%s", rt->state_dir);
	rt_owners_done(&o);
}

/* The claim label of a task's cgroup on cpu, NULL when none owns it. */
static const struct rtc *owner_of(const struct rtctl *rt, uint64_t cgroup_id, int cpu)
{
	for (int i = 0; i < rt->n; i++)
		if (rt->v[i]->cgroup_id == cgroup_id && cpuset_has(&rt->v[i]->owned, cpu))
			return rt->v[i];
	return NULL;
}

/* The buckets of dra_cpu_rt_runtime_seconds (obs/metric_families.def). */
#define N_BOUNDS MB_N_RT_RUNTIME_SECONDS

struct agg {
	char claim[STATE_NS_MAX + STATE_NAME_MAX + 2];
	int cpu;
	int tasks;
	uint64_t periods, used_ns, throttles, overruns, misses, period_ns;
	unsigned long long buckets[N_BOUNDS + 1];
};

/* A task's relative histogram (eighths of its budget) into seconds buckets:
 * each slot counts at the smallest bound above its upper edge. */
static void add_hist(struct agg *a, const struct rt_task *t)
{
	for (int i = 0; i < RT_HIST_SLOTS; i++) {
		double edge = i == RT_HIST_SLOTS - 1
				      ? (double)t->max_ns / 1e9
				      : (double)(i + 1) * (double)t->dl_runtime / RT_HIST_PER_BUDGET / 1e9;
		int b = 0, n;
		const double *bounds = metrics_family_bounds(MF_RT_RUNTIME_SECONDS, &n);

		if (!t->hist[i])
			continue;
		while (b < n && bounds[b] < edge)
			b++;
		a->buckets[b] += t->hist[i];
	}
}

/* The monitor's n tasks summed by claim and CPU into aggs (room for n):
 * returns how many. */
static int aggregate(const struct rtctl *rt, const struct rtmon_task *v, int n, struct agg *aggs)
{
	int na = 0;

	for (int i = 0; i < n; i++) {
		const struct rt_task *t = &v[i].s;
		const struct rtc *x = owner_of(rt, t->cgroup_id, (int)t->cpu);
		const struct state_claim *cl = x ? state_claim(rt->state, x->uid) : NULL;
		char claim[sizeof(aggs[0].claim)];
		struct agg *a = NULL;

		(void)snprintf(claim, sizeof(claim), "%s", cl ? cl->ns : "");
		if (cl)
			(void)snprintf(claim, sizeof(claim), "%s/%s", cl->ns, cl->name);
		else
			(void)snprintf(claim, sizeof(claim), "none");
		for (int k = 0; k < na && !a; k++)
			if (aggs[k].cpu == (int)t->cpu && !strcmp(aggs[k].claim, claim))
				a = &aggs[k];
		if (!a) {
			a = &aggs[na++];
			memcpy(a->claim, claim, sizeof(claim));
			a->cpu = (int)t->cpu;
		}
		a->tasks++;
		a->periods += t->periods;
		a->used_ns += t->used_ns;
		a->throttles += t->throttles;
		a->overruns += t->overruns;
		a->misses += t->misses;
		a->period_ns = t->dl_period;
		add_hist(a, t);
	}
	return na;
}

static void collect(struct metrics *m, void *ud)
{
	struct rtctl *rt = ud;
	struct rtmon_task *v = NULL;
	struct agg *aggs = NULL;
	int n = 0, na = 0;

	if (!rt->mon)
		return;
	(void)rtmon_prune(rt->mon);
	if (rtmon_tasks(rt->mon, &v, &n) < 0)
		return;
	aggs = calloc((size_t)n + 1, sizeof(*aggs));
	if (!aggs)
		goto out;
	metric_reset(rt->m_tasks);
	metric_reset(rt->m_runtime);
	metric_reset(rt->m_throttled);
	metric_reset(rt->m_overruns);
	metric_reset(rt->m_misses);
	metric_reset(rt->m_bw);
	na = aggregate(rt, v, n, aggs);
	for (int k = 0; k < na; k++) {
		struct agg *a = &aggs[k];
		char cpu[16];

		(void)snprintf(cpu, sizeof(cpu), "%d", a->cpu);
		metric_series_set(metric_with(rt->m_tasks, a->claim, cpu), a->tasks);
		metric_series_set_histogram(metric_with(rt->m_runtime, a->claim, cpu), a->buckets,
					    (double)a->used_ns / 1e9);
		metric_series_set(metric_with(rt->m_throttled, a->claim, cpu), (double)a->throttles);
		metric_series_set(metric_with(rt->m_overruns, a->claim, cpu), (double)a->overruns);
		metric_series_set(metric_with(rt->m_misses, a->claim, cpu), (double)a->misses);
		/* Average share of the CPU per period it ran in. */
		if (a->periods && a->period_ns)
			metric_series_set(metric_with(rt->m_bw, a->claim, cpu),
					  (double)a->used_ns / ((double)a->periods * (double)a->period_ns));
	}
	CPUSET_FOREACH(cpu, rtdomain_active(rt->dom))
	{
		struct rt_cpu c;
		char id[16];

		if (rtmon_cpu(rt->mon, cpu, &c) < 0)
			continue;
		(void)snprintf(id, sizeof(id), "%d", cpu);
		metric_series_set(metric_with(rt->m_foreign, id, "unconfined"),
				  (double)(c.foreign - c.foreign_pinned));
		metric_series_set(metric_with(rt->m_foreign, id, "pinned"), (double)c.foreign_pinned);
	}
out:
	free(aggs);
	free(v);
}

static int register_monitor(struct rtctl *rt, struct metrics *m)
{
	rt->m_tasks = metrics_family(m, MF_RT_TASKS);
	rt->m_runtime = metrics_family(m, MF_RT_RUNTIME_SECONDS);
	rt->m_throttled = metrics_family(m, MF_RT_THROTTLED_TOTAL);
	rt->m_overruns = metrics_family(m, MF_RT_OVERRUNS_TOTAL);
	rt->m_misses = metrics_family(m, MF_RT_DEADLINE_MISSES_TOTAL);
	rt->m_bw = metrics_family(m, MF_RT_BANDWIDTH_USED);
	rt->m_foreign = metrics_family(m, MF_RT_FOREIGN_SWITCHES_TOTAL);
	return metrics_add_collector(m, collect, rt);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int rtctl_new(struct event_base *base, struct state *state, struct metrics *m,
	      const struct rtctl_opts *o, struct rtctl **ret)
{
	_cleanup_(rtctl_freep) struct rtctl *rt = calloc(1, sizeof(*rt));
	struct rtdomain_opts dopt = { .version = o->cgroup_version,
				      .root = o->cgroup_root,
				      .state_dir = o->state_dir };
	int r;

	if (!rt)
		return -ENOMEM;
	if (!o->limits)
		return -EINVAL;
	rt->base = base;
	rt->state = state;
	rt->limits = *o->limits;
	rt->retry_ms = o->retry_ms ? o->retry_ms : 10;
	rt->retry_max_ms = o->retry_max_ms ? o->retry_max_ms : 2000;
	rt->refresh_ms = o->refresh_ms ? o->refresh_ms : 5000;
	rt->proc_root = strdup(o->proc_root ? o->proc_root : "");
	if (!rt->proc_root || (o->state_dir && !(rt->state_dir = strdup(o->state_dir))))
		return -ENOMEM;
	rt->mon = o->mon;
	rt->on_failure = o->on_failure;
	rt->report_ud = o->report_ud;
	r = rtdomain_new(&dopt, &rt->dom);
	if (r < 0)
		return r;
	rt->cgroup_root = strdup(rtdomain_root(rt->dom));
	rt->refresh = evtimer_new(base, on_refresh, rt);
	if (!rt->cgroup_root || !rt->refresh)
		return -ENOMEM;
	rt->applied = metrics_family(m, MF_RT_POLICY_APPLIED_TOTAL);
	rt->failures = metrics_family(m, MF_RT_POLICY_FAILURES_TOTAL);
	rt->retries = metrics_family(m, MF_RT_APPLY_RETRIES_TOTAL);
	rt->ended = metrics_family(m, MF_RT_TASKS_ENDED_TOTAL);
	rt->g_isolated = metrics_family(m, MF_RT_CPUS_ISOLATED);
	/* What dra_cpu_rt_bandwidth_used is measured against: the same on every
	 * real-time CPU, and what each cpurt device offers as dra.cpu/rtBandwidth. */
	rt->g_capacity = metrics_family(m, MF_RT_BANDWIDTH_CAPACITY);
	metric_set(rt->g_capacity, (double)rt->limits.capacity_milli / 1000.0);
	if (rt->mon) {
		r = register_monitor(rt, m);
		if (r < 0)
			return r;
	}
	r = state_add_observer(state, on_state, rt);
	if (r < 0)
		return r;
	(void)state_foreach_claim(state, isolate_each, rt);
	write_owners(rt);
	settle(rt);
	update_gauge(rt);
	log_info("rt_ready", "cgroup=v%d root=%s capacity_milli=%lld isolated=%d",
		 rtdomain_version(rt->dom), rt->cgroup_root, (long long)rt->limits.capacity_milli,
		 cpuset_count(rtdomain_active(rt->dom)));
	*ret = TAKE_PTR(rt);
	return 0;
}

void rtctl_set_limits(struct rtctl *rt, const struct rt_limits *l)
{
	rt->limits = *l;
	metric_set(rt->g_capacity, (double)l->capacity_milli / 1000.0);
}

struct rtctl *rtctl_free(struct rtctl *rt)
{
	if (!rt)
		return NULL;
	/* Claims outlive the daemon: isolation and policies stay as they are. */
	for (int i = 0; i < rt->n; i++)
		rtc_free(rt->v[i]);
	free(rt->v);
	if (rt->refresh)
		event_free(rt->refresh);
	rtdomain_free(rt->dom);
	free(rt->cgroup_root);
	free(rt->proc_root);
	free(rt->state_dir);
	free(rt);
	return NULL;
}

void rtctl_set_evict(struct rtctl *rt, rtctl_evict_fn fn, void *ud)
{
	rt->evict = fn;
	rt->evict_ud = ud;
}

void rtctl_get_stats(const struct rtctl *rt, struct rtctl_stats *ret)
{
	*ret = rt->st;
}
