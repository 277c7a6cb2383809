/* report_json: a report as one JSON object. See report_json.h.
 */
#include "pinning/report_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "pinning.h"
#include "pinning/report.h"

/* Nanoseconds as seconds. */
static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case PINNING_KIND_USER:
		return "user";
	case PINNING_KIND_KTHREAD:
		return "kthread";
	case PINNING_KIND_KTHREAD_UNBOUND:
		return "kthread_unbound";
	}
	return "?";
}

/* json-c returns NULL only when out of memory; every add below goes through
 * these so that one check at the end covers them. */
struct jb {
	bool oom;
};

static struct json_object *jnew(struct jb *b, struct json_object *o)
{
	if (!o)
		b->oom = true;
	return o;
}

static void jadd(struct jb *b, struct json_object *obj, const char *key, struct json_object *v)
{
	if (!obj || !v || json_object_object_add(obj, key, v) < 0) {
		json_object_put(v);
		b->oom = true;
	}
}

static void jpush(struct jb *b, struct json_object *arr, struct json_object *v)
{
	if (!arr || !v || json_object_array_add(arr, v) < 0) {
		json_object_put(v);
		b->oom = true;
	}
}

static struct json_object *jstr(struct jb *b, const char *s)
{
	return s ? jnew(b, json_object_new_string(s)) : NULL;
}

static void jadd_str(struct jb *b, struct json_object *obj, const char *key, const char *s)
{
	if (s)
		jadd(b, obj, key, jstr(b, s));
}

static void jadd_u64(struct jb *b, struct json_object *obj, const char *key, uint64_t v)
{
	jadd(b, obj, key, jnew(b, json_object_new_uint64(v)));
}

static void jadd_int(struct jb *b, struct json_object *obj, const char *key, int v)
{
	jadd(b, obj, key, jnew(b, json_object_new_int(v)));
}

/* Seconds with millisecond (or finer) digits, not %.17g noise. */
static void jadd_secs(struct jb *b, struct json_object *obj, const char *key, double v, int prec)
{
	char s[48];

	(void)snprintf(s, sizeof(s), "%.*f", prec, v);
	jadd(b, obj, key, jnew(b, json_object_new_double_s(v, s)));
}

static void jadd_cpus(struct jb *b, struct json_object *obj, const char *key,
		      const struct cpuset *s)
{
	_cleanup_free_ char *list = cpuset_to_string(s);

	if (!list)
		b->oom = true;
	jadd_str(b, obj, key, list);
}

static struct json_object *json_owner(struct jb *b, const struct verify_report *r, int idx)
{
	const struct verify_owner *w = &r->owners->v[idx];
	struct json_object *o = jnew(b, json_object_new_object());

	jadd_str(b, o, "cgroup", w->cgroup);
	jadd_str(b, o, "path", w->path);
	jadd_u64(b, o, "cgroupId", w->cgroup_id);
	jadd_cpus(b, o, "cpus", &w->cpus);
	jadd_str(b, o, "claim", w->claim);
	jadd_str(b, o, "pod", w->pod);
	jadd_str(b, o, "container", w->container);
	if (r->scanned)
		jadd_int(b, o, "threads", r->owner_tasks[idx]);
	return o;
}

/* What the window counted on c: switches, foreign time by kind, interrupts,
 * events lost. */
static void json_counts(struct jb *b, struct json_object *o, const struct verify_cpu *c)
{
	static const char *const kinds[PINNING_KIND_MAX] = {
		[PINNING_KIND_USER] = "user",
		[PINNING_KIND_KTHREAD] = "kthread",
		[PINNING_KIND_KTHREAD_UNBOUND] = "kthreadUnbound",
	};
	struct json_object *foreign = jnew(b, json_object_new_object());

	jadd_u64(b, o, "switches", c->c.switches);
	jadd_u64(b, o, "ownerSwitches", c->c.owner_switches);
	for (int k = 0; k < PINNING_KIND_MAX; k++) {
		struct json_object *x = jnew(b, json_object_new_object());

		jadd_u64(b, x, "switches", c->c.violations[k]);
		jadd_secs(b, x, "seconds", secs(c->c.foreign_ns[k]), 6);
		jadd(b, foreign, kinds[k], x);
	}
	jadd(b, o, "foreign", foreign);
	if (c->irq_counted) {
		struct json_object *irq = jnew(b, json_object_new_object());

		jadd_u64(b, irq, "hard", c->irq.hardirqs);
		jadd_secs(b, irq, "hardSeconds", secs(c->irq.hardirq_ns), 6);
		jadd_u64(b, irq, "soft", c->irq.softirqs);
		jadd_secs(b, irq, "softSeconds", secs(c->irq.softirq_ns), 6);
		jadd(b, o, "interrupts", irq);
	}
	jadd_u64(b, o, "eventsDropped", c->c.events_dropped);
	jadd_u64(b, o, "eventsRatelimited", c->c.events_ratelimited);
}

/* A task the window saw switch in. */
static struct json_object *json_seen(struct jb *b, const struct verify_seen *s)
{
	struct json_object *x = jnew(b, json_object_new_object());

	jadd_int(b, x, "pid", (int)s->pid);
	jadd_int(b, x, "tgid", (int)s->tgid);
	jadd_str(b, x, "comm", s->comm);
	jadd_str(b, x, "kind", kind_name(s->kind));
	jadd_str(b, x, "cgroup", s->cgroup);
	jadd_u64(b, x, "switches", s->switches);
	jadd_secs(b, x, "firstSeenSeconds", secs(s->first_ns), 3);
	jadd_secs(b, x, "lastSeenSeconds", secs(s->last_ns), 3);
	return x;
}

/* A task the scan found allowed on an exclusive CPU. */
static struct json_object *json_pinned(struct jb *b, const struct verify_pinned *p)
{
	struct json_object *x = jnew(b, json_object_new_object());

	jadd_int(b, x, "tid", p->tid);
	jadd_int(b, x, "pid", p->pid);
	jadd_str(b, x, "comm", p->comm);
	jadd_str(b, x, "kind", p->kthread ? "kthread" : "user");
	jadd_str(b, x, "cgroup", p->cgroup);
	jadd_cpus(b, x, "allowed", &p->allowed);
	return x;
}

static struct json_object *json_cpu(struct jb *b, const struct verify_report *r,
				    const struct verify_cpu *c)
{
	struct json_object *o = jnew(b, json_object_new_object());
	struct json_object *ran = jnew(b, json_object_new_array());
	struct json_object *outside = jnew(b, json_object_new_array());
	struct json_object *kran = jnew(b, json_object_new_array());
	struct json_object *pinned = jnew(b, json_object_new_array());

	jadd_int(b, o, "cpu", c->cpu);
	jadd(b, o, "owner", json_owner(b, r, c->owner));
	if (r->watched && c->counted)
		json_counts(b, o, c);
	for (int sel = 0; sel < VERIFY_SEL_MAX; sel++) {
		const struct verify_seen **v = NULL;
		int n = verify_report_seen(r, c->cpu, (enum verify_sel)sel, &v);

		if (!v)
			b->oom = true;
		for (int i = 0; i < n; i++)
			jpush(b, sel == VERIFY_SEL_USER ? ran : sel == VERIFY_SEL_OUTSIDE ? outside : kran,
			      json_seen(b, v[i]));
		free(v);
	}
	if (r->owners->scope_path)
		jadd(b, o, "ranOutsideScope", outside);
	else
		json_object_put(outside);
	jadd(b, o, "kthreadsRan", kran);
	jadd(b, o, "ran", ran);
	for (int i = 0; i < r->npinned; i++)
		if (cpuset_has(&r->pinned[i].allowed, c->cpu))
			jpush(b, pinned, json_pinned(b, &r->pinned[i]));
	jadd(b, o, "pinned", pinned);
	return o;
}

int verify_report_json(const struct verify_report *r, struct json_object **ret)
{
	struct jb b = { false };
	struct json_object *o = jnew(&b, json_object_new_object());
	struct json_object *cpus = jnew(&b, json_object_new_array());
	struct json_object *sum = jnew(&b, json_object_new_object());
	struct verify_tally t;
	char line[1024];

	verify_report_tally(r, &t);
	verify_report_verdict(r, &t, line, sizeof(line));
	jadd_str(&b, o, "verdict",
		 t.violation ? "violation" : t.incomplete ? "incomplete" : "clean");
	jadd_int(&b, o, "exitCode", t.exit_code);
	jadd_str(&b, o, "summary", line);
	jadd_str(&b, o, "source", r->source);
	jadd_str(&b, o, "cgroupMode", cgroup_hier_name(r->owners->mode));
	jadd(&b, o, "strictKthreads", jnew(&b, json_object_new_boolean(r->strict_kthreads)));
	jadd_cpus(&b, o, "exclusiveCpus", &r->owners->exclusive);
	jadd_str(&b, o, "scope", r->owners->scope_path);
	if (r->watched)
		jadd_secs(&b, o, "watchedSeconds", r->duration_s, 3);
	for (int i = 0; i < r->ncpus; i++)
		jpush(&b, cpus, json_cpu(&b, r, &r->cpus[i]));
	jadd(&b, o, "cpus", cpus);

	jadd_u64(&b, sum, "foreignSwitches", t.running);
	jadd_int(&b, sum, "foreignTasksRan", t.running_tasks);
	jadd_int(&b, sum, "foreignTasksPinned", t.pinned);
	jadd_u64(&b, sum, "kthreadSwitches", t.kthread_switches);
	jadd_int(&b, sum, "kthreadsBound", t.kthreads_pinned);
	jadd_int(&b, sum, "kthreadsUnboundNamed", t.kthreads_named);
	jadd_u64(&b, sum, "untrackedSwitches", r->seen_untracked);
	jadd_int(&b, sum, "untrackedPinned", r->pinned_untracked[0] + r->pinned_untracked[1]);
	jadd_u64(&b, sum, "unnamedSwitches", t.unattributed);
	if (r->owners->scope_path) {
		jadd_u64(&b, sum, "outsideScopeSwitches", t.outside_switches);
		jadd_int(&b, sum, "outsideScopeTasksRan", t.outside_tasks);
		jadd_int(&b, sum, "outsideScopePinned", t.outside_pinned);
		jadd_int(&b, sum, "outsideScopeUnconfined", r->outside_unconfined);
	}
	jadd(&b, o, "counts", sum);

	if (r->scanned) {
		struct json_object *u = jnew(&b, json_object_new_object());
		struct json_object *top = jnew(&b, json_object_new_array());
		struct json_object *scan = jnew(&b, json_object_new_object());

		jadd_int(&b, u, "threads", r->unconfined_threads);
		jadd_int(&b, u, "processes", r->unconfined_procs);
		jadd_int(&b, u, "kthreads", r->unconfined_kthreads);
		for (int i = 0; i < r->ntop; i++) {
			struct json_object *x = jnew(&b, json_object_new_object());

			jadd_int(&b, x, "pid", r->top[i].pid);
			jadd_str(&b, x, "comm", r->top[i].comm);
			jadd_int(&b, x, "threads", r->top[i].threads);
			jadd_secs(&b, x, "cpuSeconds", verify_ticks_s(r->top[i].ticks), 2);
			jadd_str(&b, x, "allowed", r->top[i].allowed);
			jadd_str(&b, x, "cgroup", r->top[i].cgroup);
			jpush(&b, top, x);
		}
		jadd(&b, u, "top", top);
		jadd(&b, o, "unconfined", u);
		jadd_int(&b, scan, "threads", r->threads);
		jadd_int(&b, scan, "unreadable", r->unreadable);
		jadd(&b, o, "scan", scan);
	}
	if (r->notes[0])
		jadd_str(&b, o, "notes", r->notes);
	if (b.oom) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}
