/* report_text: a report as text tables. See report_text.h.
 */
#include "pinning/report_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pinning.h"
#include "pinning/report.h"

/* Nanoseconds as seconds. */
static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

#define TEXT_ROWS 20 /* foreign tasks per CPU in the text tables */

static void print_owner(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	const struct verify_owner *w = &r->owners->v[c->owner];

	fprintf(f, "CPU %d: owner %s (cgroup id %" PRIu64, c->cpu, w->path ? w->path : w->cgroup,
		w->cgroup_id);
	if (w->claim)
		fprintf(f, ", claim %s", w->claim);
	if (w->pod)
		fprintf(f, ", pod %s", w->pod);
	if (w->container)
		fprintf(f, ", container %s", w->container);
	if (r->scanned)
		fprintf(f, ", %d thread%s in it", r->owner_tasks[c->owner],
			r->owner_tasks[c->owner] == 1 ? "" : "s");
	fprintf(f, ")\n");
}

/* What the window counted on c: switch-ins by kind, interrupts, events lost. */
static void print_counts(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	const struct bpfmon_counters *k = &c->c;

	fprintf(f,
		"  switch-ins %" PRIu64 ": owner %" PRIu64 ", foreign user %" PRIu64
		" (%.4f s), kernel threads %" PRIu64 " (%.4f s), unbound kernel threads %" PRIu64
		" (%.4f s)\n",
		k->switches, k->owner_switches, k->violations[PINNING_KIND_USER],
		secs(k->foreign_ns[PINNING_KIND_USER]), k->violations[PINNING_KIND_KTHREAD],
		secs(k->foreign_ns[PINNING_KIND_KTHREAD]),
		k->violations[PINNING_KIND_KTHREAD_UNBOUND],
		secs(k->foreign_ns[PINNING_KIND_KTHREAD_UNBOUND]));
	if (c->irq_counted)
		fprintf(f,
			"CPU %d: %" PRIu64 " interrupts, %.1f ms in %.0f s; %" PRIu64
			" softirqs, %.1f ms\n",
			c->cpu, c->irq.hardirqs, (double)c->irq.hardirq_ns / 1e6, r->duration_s,
			c->irq.softirqs, (double)c->irq.softirq_ns / 1e6);
	if (k->events_dropped || k->events_ratelimited)
		fprintf(f,
			"  names incomplete: %" PRIu64 " events dropped (ring buffer full), %" PRIu64
			" rate-limited\n",
			k->events_dropped, k->events_ratelimited);
}

/* The tasks the window saw switch in on c: foreign ones (a table), those
 * outside --scope (a count), unbound kernel threads (a line). */
static void print_seen(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	const struct verify_seen **v = NULL;
	int n;

	n = verify_report_seen(r, c->cpu, VERIFY_SEL_USER, &v);
	for (int i = 0; i < n && i < TEXT_ROWS; i++) {
		const struct verify_seen *s = v[i];

		if (!i)
			fprintf(f, "  foreign tasks that ran here:\n    %-8s %-8s %-16s %8s %8s %8s  %s\n",
				"PID", "TGID", "COMM", "SWITCHES", "FIRST_S", "LAST_S", "CGROUP");
		fprintf(f, "    %-8u %-8u %-16s %8" PRIu64 " %8.3f %8.3f  %s\n", s->pid, s->tgid,
			s->comm, s->switches, secs(s->first_ns), secs(s->last_ns),
			s->cgroup ? s->cgroup : "?");
	}
	if (n > TEXT_ROWS)
		fprintf(f, "    ... %d more (--json lists them all)\n", n - TEXT_ROWS);
	free(v);
	v = NULL;
	if (r->owners->scope_path) {
		uint64_t sw = 0;

		n = verify_report_seen(r, c->cpu, VERIFY_SEL_OUTSIDE, &v);
		for (int i = 0; i < n; i++)
			sw += v[i]->switches;
		if (n)
			fprintf(f, "  outside --scope (not counted): %d task%s, %" PRIu64 " switch-ins\n",
				n, n == 1 ? "" : "s", sw);
		free(v);
		v = NULL;
	}
	n = verify_report_seen(r, c->cpu, VERIFY_SEL_KTHREAD, &v);
	for (int i = 0; i < n && i < TEXT_ROWS; i++)
		fprintf(f, "%s %s (pid %u) x%" PRIu64, i ? "," : "  unbound kernel threads that ran here:",
			v[i]->comm, v[i]->pid, v[i]->switches);
	if (n > TEXT_ROWS)
		fprintf(f, ", ... (%d)", n);
	if (n)
		fprintf(f, " (%s)\n", r->strict_kthreads ? "counted" : "not counted");
	free(v);
}

/* The tasks the scan found allowed on c alone: foreign ones (a table), kernel
 * threads (a line). */
static void print_pinned(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	int n = 0, kn = 0;

	for (int i = 0; i < r->npinned; i++) {
		const struct verify_pinned *p = &r->pinned[i];
		char allowed[64];

		if (p->kthread || !cpuset_has(&p->allowed, c->cpu))
			continue;
		if (cpuset_format(&p->allowed, allowed, sizeof(allowed)) < 0)
			(void)snprintf(allowed + sizeof(allowed) - 4, 4, "...");
		if (!n++)
			fprintf(f, "  foreign tasks pinned here (no other CPU allowed):\n"
				   "    %-8s %-8s %-16s %-16s  %s\n",
				"TID", "PID", "COMM", "ALLOWED", "CGROUP");
		fprintf(f, "    %-8d %-8d %-16s %-16s  %s\n", p->tid, p->pid, p->comm, allowed,
			p->cgroup);
	}
	for (int i = 0; i < r->npinned; i++) {
		const struct verify_pinned *p = &r->pinned[i];

		if (!p->kthread || !cpuset_has(&p->allowed, c->cpu))
			continue;
		if (!kn++)
			fprintf(f, "  kernel threads bound here (%s):",
				r->strict_kthreads ? "counted" : "not counted");
		if (kn <= 12)
			fprintf(f, " %s", p->comm);
	}
	if (kn > 12)
		fprintf(f, " ... (%d)", kn);
	if (kn)
		fputc('\n', f);
}

static void print_cpu(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	print_owner(r, c, f);
	if (r->watched && c->counted)
		print_counts(r, c, f);
	print_seen(r, c, f);
	print_pinned(r, c, f);
}

void verify_report_print(const struct verify_report *r, FILE *f)
{
	struct verify_tally t;
	char line[1024], cpus[128];

	verify_report_tally(r, &t);
	if (cpuset_format(&r->owners->exclusive, cpus, sizeof(cpus)) < 0)
		(void)snprintf(cpus + sizeof(cpus) - 4, 4, "...");
	fprintf(f, "bpf-verify: %d exclusive CPU%s (%s), owners from %s, cgroup %s", r->ncpus,
		r->ncpus == 1 ? "" : "s", cpus, r->source ? r->source : "?",
		r->owners->mode == CGROUP_V1 ? "v1 cpuset" : "v2");
	if (r->owners->scope_path)
		fprintf(f, ", scope %s", r->owners->scope_path);
	if (r->watched)
		fprintf(f, ", watched %.2f s", r->duration_s);
	if (r->scanned)
		fprintf(f, ", %d threads scanned", r->threads);
	fprintf(f, "\n");
	for (int i = 0; i < r->ncpus; i++) {
		fputc('\n', f);
		print_cpu(r, &r->cpus[i], f);
	}
	if (r->scanned) {
		fprintf(f,
			"\nunconfined: %d thread%s in %d process%s may also run on exclusive CPUs "
			"(allowed CPUs include them among others: not violations); kernel threads: %d\n",
			r->unconfined_threads, r->unconfined_threads == 1 ? "" : "s",
			r->unconfined_procs, r->unconfined_procs == 1 ? "" : "es",
			r->unconfined_kthreads);
		if (r->ntop)
			fprintf(f, "  busiest:\n    %-8s %-16s %7s %9s %-16s  %s\n", "PID", "COMM",
				"THREADS", "CPU_S", "ALLOWED", "CGROUP");
		for (int i = 0; i < r->ntop; i++)
			fprintf(f, "    %-8d %-16s %7d %9.2f %-16s  %s\n", r->top[i].pid,
				r->top[i].comm, r->top[i].threads, verify_ticks_s(r->top[i].ticks),
				r->top[i].allowed, r->top[i].cgroup);
		if (r->owners->scope_path)
			fprintf(f, "  outside --scope (not counted): %d thread%s pinned to exclusive "
				   "CPUs, %d unconfined\n",
				r->outside_pinned, r->outside_pinned == 1 ? "" : "s",
				r->outside_unconfined);
	}
	if (t.unattributed && r->watched)
		fprintf(f, "\nunnamed: %" PRIu64 " foreign switch-ins no event named (dropped or "
			   "rate-limited)%s\n",
			t.unattributed, r->owners->scope_path ? ": they may be inside --scope" : "");
	if (r->seen_untracked)
		fprintf(f, "\nnames incomplete: %" PRIu64 " switch-ins by tasks beyond the first %d "
			   "not named\n",
			r->seen_untracked, VERIFY_SEEN_MAX);
	if (r->pinned_untracked[0] || r->pinned_untracked[1])
		fprintf(f, "\nnot listed: %d pinned task%s and %d pinned kernel thread%s beyond the "
			   "first %d (counted in the verdict)\n",
			r->pinned_untracked[0], r->pinned_untracked[0] == 1 ? "" : "s",
			r->pinned_untracked[1], r->pinned_untracked[1] == 1 ? "" : "s",
			VERIFY_PINNED_MAX);
	if (r->notes[0])
		fprintf(f, "\nnotes: %s\n", r->notes);
	verify_report_verdict(r, &t, line, sizeof(line));
	fprintf(f, "\nverdict: %s\n", line);
}
