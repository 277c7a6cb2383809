/* report: the verdict of bpf-verify from what the window and the scan
 * found. See report.h for the checks and the invariants.
 */
#include "pinning/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinning.h"

/* ---- the report ----------------------------------------------------------------------- */

int verify_report_new(const struct verify_owners *o, bool strict_kthreads,
		      struct verify_report **ret)
{
	struct verify_report *r = calloc(1, sizeof(*r));
	int n = cpuset_count(&o->exclusive), i = 0;

	if (!r)
		return -ENOMEM;
	r->cpus = calloc((size_t)(n ? n : 1), sizeof(*r->cpus));
	r->owner_tasks = calloc((size_t)(o->n ? o->n : 1), sizeof(*r->owner_tasks));
	r->seen = calloc(VERIFY_SEEN_MAX, sizeof(*r->seen));
	hashtab_init(&r->seen_index, VERIFY_SEEN_MAX);
	if (!r->cpus || !r->owner_tasks || !r->seen) {
		verify_report_free(r);
		return -ENOMEM;
	}
	r->owners = o;
	r->strict_kthreads = strict_kthreads;
	CPUSET_FOREACH(cpu, &o->exclusive)
	{
		r->cpus[i].cpu = cpu;
		r->cpus[i].owner = verify_owner_of(o, cpu);
		i++;
	}
	r->ncpus = n;
	*ret = r;
	return 0;
}

struct verify_report *verify_report_free(struct verify_report *r)
{
	if (!r)
		return NULL;
	for (int i = 0; i < r->nseen; i++)
		free(r->seen[i].cgroup);
	for (int i = 0; i < r->npinned; i++)
		free(r->pinned[i].cgroup);
	for (int i = 0; i < r->ntop; i++) {
		free(r->top[i].cgroup);
		free(r->top[i].allowed);
	}
	free(r->proc.cgroup);
	free(r->proc.allowed);
	free(r->seen);
	hashtab_done(&r->seen_index);
	free(r->pinned);
	free(r->cpus);
	free(r->owner_tasks);
	free(r);
	return NULL;
}

void verify_report_note(struct verify_report *r, const char *fmt, ...)
{
	size_t len = strlen(r->notes);
	va_list ap;

	if (len && len < sizeof(r->notes) - 2) {
		r->notes[len++] = ';';
		r->notes[len++] = ' ';
		r->notes[len] = 0;
	}
	va_start(ap, fmt);
	(void)vsnprintf(r->notes + len, sizeof(r->notes) - len, fmt, ap);
	va_end(ap);
}

static struct verify_cpu *report_cpu(const struct verify_report *r, int cpu)
{
	for (int i = 0; i < r->ncpus; i++)
		if (r->cpus[i].cpu == cpu)
			return &r->cpus[i];
	return NULL;
}

/* A user task is outside the scope when its cgroup is known and not under it. */
static bool is_outside(const struct verify_report *r, uint32_t kind, const char *cgroup)
{
	return kind == PINNING_KIND_USER && r->owners->scope_path && cgroup &&
	       !cgroup_path_is_under(cgroup, r->owners->scope_path);
}

int verify_report_add_event(struct verify_report *r, const struct pinning_event *e,
			    const char *cgroup)
{
	uint64_t key = (uint64_t)e->cpu << 32 | e->pid;
	uint64_t t = e->ts_ns - r->t0_ns;
	bool outside = is_outside(r, e->kind, cgroup);
	struct verify_seen *s;
	int rr;

	if (e->ts_ns < r->t0_ns || (r->t1_ns && e->ts_ns > r->t1_ns) ||
	    !report_cpu(r, (int)e->cpu) ||
	    (e->kind != PINNING_KIND_USER && e->kind != PINNING_KIND_KTHREAD_UNBOUND))
		return 0;
	s = hashtab_get_u64(&r->seen_index, key);
	if (s) {
		/* A task that moved cgroups: once seen inside the scope it stays
		 * inside (conservative); the latest such cgroup is the one shown. */
		if (cgroup && (!outside || s->outside) && (!s->cgroup || strcmp(s->cgroup, cgroup))) {
			char *c = strdup(cgroup);

			if (!c)
				return -ENOMEM;
			free(s->cgroup);
			s->cgroup = c;
		}
		s->outside = s->outside && outside;
	} else {
		if (r->nseen == VERIFY_SEEN_MAX) {
			r->seen_untracked++;
			return 0;
		}
		s = &r->seen[r->nseen];
		*s = (struct verify_seen){ .cpu = (int)e->cpu, .pid = e->pid, .tgid = e->tgid,
					   .kind = e->kind, .first_ns = t, .outside = outside };
		if (cgroup && !(s->cgroup = strdup(cgroup)))
			return -ENOMEM;
		rr = hashtab_put_u64(&r->seen_index, key, s, NULL);
		if (rr < 0) {
			free(s->cgroup);
			s->cgroup = NULL;
			return rr;
		}
		r->nseen++;
	}
	/* The latest name wins: a task may exec meanwhile. */
	memcpy(s->comm, e->comm, sizeof(s->comm));
	s->comm[sizeof(s->comm) - 1] = 0;
	s->switches++;
	s->last_ns = t;
	return 0;
}

void verify_report_set_irq(struct verify_report *r, int cpu, const struct bpfmon_irq *b,
			   const struct bpfmon_irq *a)
{
	struct verify_cpu *c = report_cpu(r, cpu);

	if (!c)
		return;
	c->irq.hardirqs = a->hardirqs - b->hardirqs;
	c->irq.hardirq_ns = a->hardirq_ns - b->hardirq_ns;
	c->irq.softirqs = a->softirqs - b->softirqs;
	c->irq.softirq_ns = a->softirq_ns - b->softirq_ns;
	c->irq_counted = true;
}

void verify_report_set_counters(struct verify_report *r, int cpu,
				const struct bpfmon_counters *b, const struct bpfmon_counters *a)
{
	struct verify_cpu *c = report_cpu(r, cpu);

	if (!c)
		return;
	c->c.switches = a->switches - b->switches;
	c->c.owner_switches = a->owner_switches - b->owner_switches;
	for (int k = 0; k < PINNING_KIND_MAX; k++) {
		c->c.violations[k] = a->violations[k] - b->violations[k];
		c->c.foreign_ns[k] = a->foreign_ns[k] - b->foreign_ns[k];
	}
	c->c.events_sent = a->events_sent - b->events_sent;
	c->c.events_ratelimited = a->events_ratelimited - b->events_ratelimited;
	c->c.events_dropped = a->events_dropped - b->events_dropped;
	c->c.denials = a->denials - b->denials;
	c->counted = true;
}

/* ---- the static check ----------------------------------------------------------------- */

static int add_pinned(struct verify_report *r, const struct verify_task *t)
{
	bool kthread = t->flags & PROCFS_PF_KTHREAD;
	struct verify_pinned *p;

	if (r->npinned == VERIFY_PINNED_MAX) {
		r->pinned_untracked[kthread]++;
		return 0;
	}
	if (r->npinned == r->pinned_cap) {
		/* An array of structs (a cpuset each), not bytes: grown here,
		 * under the cap above. */
		int cap = r->pinned_cap ? 2 * r->pinned_cap : 16;
		struct verify_pinned *np = realloc(r->pinned, sizeof(*np) * (size_t)cap);

		if (!np)
			return -ENOMEM;
		r->pinned = np;
		r->pinned_cap = cap;
	}
	p = &r->pinned[r->npinned];
	*p = (struct verify_pinned){ .tid = t->tid, .pid = t->pid, .allowed = t->allowed,
				     .kthread = kthread };
	memcpy(p->comm, t->comm, sizeof(p->comm));
	p->cgroup = strdup(t->cgroup);
	if (!p->cgroup)
		return -ENOMEM;
	r->npinned++;
	return 0;
}

int verify_report_add_thread(struct verify_report *r, const struct verify_task *t)
{
	const struct verify_owners *o = r->owners;
	bool kthread = t->flags & PROCFS_PF_KTHREAD;
	struct verify_unconfined *u = &r->proc;
	enum verify_class cls;

	r->threads++;
	for (int i = 0; i < o->n; i++)
		if (o->v[i].path && cgroup_path_is_under(t->cgroup, o->v[i].path))
			r->owner_tasks[i]++;
	cls = verify_classify(o, t->cgroup, &t->allowed, NULL);
	if (cls == VERIFY_FINE)
		return 0;
	if (!kthread && o->scope_path && !cgroup_path_is_under(t->cgroup, o->scope_path)) {
		if (cls == VERIFY_PINNED)
			r->outside_pinned++;
		else
			r->outside_unconfined++;
		return 0;
	}
	if (cls == VERIFY_PINNED)
		return add_pinned(r, t);
	if (kthread) {
		r->unconfined_kthreads++;
		return 0;
	}
	r->unconfined_threads++;
	if (!u->threads++) {
		/* The process as its first unconfined thread sees it. */
		u->pid = t->pid;
		memcpy(u->comm, t->comm, sizeof(u->comm));
		u->cgroup = strdup(t->cgroup);
		u->allowed = cpuset_to_string(&t->allowed);
		if (!u->cgroup || !u->allowed)
			return -ENOMEM;
	}
	u->ticks += t->ticks;
	return 0;
}

int verify_report_end_process(struct verify_report *r)
{
	struct verify_unconfined *last = &r->top[VERIFY_TOP - 1], u = r->proc;
	int i;

	r->proc = (struct verify_unconfined){ 0 };
	if (!u.threads)
		return 0;
	r->unconfined_procs++;
	if (r->ntop == VERIFY_TOP && u.ticks <= last->ticks) {
		free(u.cgroup);
		free(u.allowed);
		return 0;
	}
	if (r->ntop == VERIFY_TOP) {
		free(last->cgroup);
		free(last->allowed);
		r->ntop--;
	}
	for (i = r->ntop; i > 0 && r->top[i - 1].ticks < u.ticks; i--)
		r->top[i] = r->top[i - 1];
	r->top[i] = u; /* the strings move with it */
	r->ntop++;
	return u.cgroup && u.allowed ? 0 : -ENOMEM;
}

/* ---- the verdict ------------------------------------------------------------------------ */

void verify_report_tally(const struct verify_report *r, struct verify_tally *ret)
{
	struct verify_tally t = { 0 };
	uint64_t counted = 0, named = 0;
	bool kthreads, have_counts = false;

	for (int i = 0; i < r->ncpus; i++) {
		const struct bpfmon_counters *c = &r->cpus[i].c;

		have_counts |= r->cpus[i].counted;
		counted += c->violations[PINNING_KIND_USER];
		t.kthread_switches += c->violations[PINNING_KIND_KTHREAD] +
				      c->violations[PINNING_KIND_KTHREAD_UNBOUND];
	}
	for (int i = 0; i < r->nseen; i++) {
		const struct verify_seen *s = &r->seen[i];

		if (s->kind != PINNING_KIND_USER) {
			t.kthreads_named++;
			continue;
		}
		named += s->switches;
		if (s->outside) {
			t.outside_tasks++;
			t.outside_switches += s->switches;
		} else {
			t.running_tasks++;
		}
	}
	/* The counters say exactly which switch-ins sent no event; the events
	 * themselves may number a few more (those at the window's edges). */
	t.unattributed = r->seen_untracked;
	for (int i = 0; i < r->ncpus; i++)
		t.unattributed += r->cpus[i].c.events_ratelimited + r->cpus[i].c.events_dropped;
	if (have_counts && !r->events)
		t.unattributed = counted;
	if (!have_counts || counted < named)
		counted = named; /* events only */
	/* Without a scope the kernel's count is the truth. With one, only
	 * events can place a task inside or outside it: switch-ins no event
	 * named leave the verdict open. */
	if (r->owners->scope_path) {
		t.running = named - t.outside_switches;
		t.incomplete = t.unattributed > 0;
	} else {
		t.running = counted;
	}
	t.pinned = r->pinned_untracked[0];
	t.kthreads_pinned = r->pinned_untracked[1];
	for (int i = 0; i < r->npinned; i++) {
		if (r->pinned[i].kthread)
			t.kthreads_pinned++;
		else
			t.pinned++;
	}
	t.outside_pinned = r->outside_pinned;
	kthreads = t.kthread_switches || t.kthreads_pinned || t.kthreads_named;
	t.violation = t.running || t.running_tasks || t.pinned || (r->strict_kthreads && kthreads);
	t.exit_code = t.violation ? 1 : t.incomplete ? 2 : 0;
	*ret = t;
}

double verify_ticks_s(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);

	return (double)ticks / (double)(hz > 0 ? hz : 100);
}

/* snprintf at *n into buf, *n stays within size. */
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n >= size - 1)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *n, size - *n, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n = *n + (size_t)k < size - 1 ? *n + (size_t)k : size - 1;
}

void verify_report_verdict(const struct verify_report *r, const struct verify_tally *t, char *buf,
			   size_t size)
{
	bool kthreads = t->kthread_switches || t->kthreads_pinned || t->kthreads_named;
	char cpus[128];
	size_t n = 0;

	buf[0] = 0;
	if (cpuset_format(&r->owners->exclusive, cpus, sizeof(cpus)) < 0)
		(void)snprintf(cpus + sizeof(cpus) - 4, 4, "...");
	if (!r->ncpus) {
		append(buf, size, &n, "clean: no exclusive CPUs to check");
		return;
	}
	if (!t->violation && t->incomplete) {
		append(buf, size, &n,
		       "INCOMPLETE on CPU %s: %" PRIu64 " foreign switch-ins went unnamed (events "
		       "rate-limited or dropped) and may be inside --scope %s: run again, or without "
		       "--scope",
		       cpus, t->unattributed, r->owners->scope_path);
	} else if (!t->violation) {
		append(buf, size, &n,
		       "clean: only owners ran on CPU %s for %.2f s and no foreign task is pinned "
		       "to them",
		       cpus, r->duration_s);
	} else {
		const char *sep = "";

		append(buf, size, &n, "VIOLATION on CPU %s: ", cpus);
		if (t->running || t->running_tasks) {
			append(buf, size, &n, "foreign tasks ran there (%" PRIu64 " switch-ins, %d task%s named)",
			       t->running, t->running_tasks, t->running_tasks == 1 ? "" : "s");
			sep = "; ";
		}
		if (t->pinned) {
			append(buf, size, &n, "%s%d foreign task%s pinned there", sep, t->pinned,
			       t->pinned == 1 ? " is" : "s are");
			sep = "; ";
		}
		if (r->strict_kthreads && kthreads)
			append(buf, size, &n, "%skernel threads ran or are bound there", sep);
	}
	append(buf, size, &n,
	       " (kernel threads: %" PRIu64 " switch-ins, %d bound, %d unbound named; %s)",
	       t->kthread_switches, t->kthreads_pinned, t->kthreads_named,
	       r->strict_kthreads ? "counted: --strict-kthreads" : "not counted");
	if (r->owners->scope_path)
		append(buf, size, &n,
		       " (outside --scope %s: %d task%s ran, %" PRIu64 " switch-ins, %d pinned; not "
		       "counted)",
		       r->owners->scope_path, t->outside_tasks, t->outside_tasks == 1 ? "" : "s",
		       t->outside_switches, t->outside_pinned);
}

static int by_switches(const void *a, const void *b)
{
	const struct verify_seen *x = *(const struct verify_seen *const *)a;
	const struct verify_seen *y = *(const struct verify_seen *const *)b;

	if (x->switches != y->switches)
		return x->switches < y->switches ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static bool selected(const struct verify_seen *s, enum verify_sel sel)
{
	if (sel == VERIFY_SEL_KTHREAD)
		return s->kind != PINNING_KIND_USER;
	return s->kind == PINNING_KIND_USER && s->outside == (sel == VERIFY_SEL_OUTSIDE);
}

int verify_report_seen(const struct verify_report *r, int cpu, enum verify_sel sel,
		       const struct verify_seen ***ret)
{
	const struct verify_seen **v = calloc((size_t)r->nseen + 1, sizeof(*v));
	int n = 0;

	*ret = v;
	if (!v)
		return 0;
	for (int i = 0; i < r->nseen; i++)
		if (r->seen[i].cpu == cpu && selected(&r->seen[i], sel))
			v[n++] = &r->seen[i];
	qsort(v, (size_t)n, sizeof(*v), by_switches);
	return n;
}
