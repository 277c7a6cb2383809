/* irqiso: claims that keep interrupts off their CPUs, held in host/irq's
 * guard (see irqiso.h). */
#include "core/irqiso.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_MOD "irqiso"
#include "core/state.h"
#include "host/irq.h"
#include "lib/buf.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "obs/metrics.h"

struct irqiso {
	struct state *state;
	struct irq_guard *guard;
	bool isolate;
	char *procfs_root;
	/* Where /proc/interrupts and the task list are read: procfs_root when
	 * it is a whole procfs (it has an interrupts file), else /proc. A pod
	 * mounts only the host's /proc/irq at <root>/irq (writing the rest of
	 * the host's /proc, /proc/sys, would be a way out of the container),
	 * and its own /proc, with hostPID, shows the host's. */
	const char *proc_root;
	struct metric *g_cpus, *g_managed, *g_left, *moves, *g_balancer;
	int balancer_pid; /* the one last warned about */
};

struct irqiso *irqiso_free(struct irqiso *x)
{
	if (!x)
		return NULL;
	irq_guard_free(x->guard);
	free(x->procfs_root);
	free(x);
	return NULL;
}

/* "36 (virtio1-req.0), 41 (...)" for the interrupts in irqs, from
 * /proc/interrupts; just the numbers when it cannot be read. */
struct names {
	const int *irqs;
	int n;
	char *out;
	size_t size, len;
};

static int on_row(void *ud, const struct irq_row *row)
{
	struct names *nm = ud;
	const char *last = strrchr(row->desc, ' ');

	for (int i = 0; i < nm->n; i++) {
		char label[16];
		int k;

		(void)snprintf(label, sizeof(label), "%d", nm->irqs[i]);
		if (strcmp(label, row->label) != 0)
			continue;
		k = snprintf(nm->out + nm->len, nm->size - nm->len, "%s%s(%s)", nm->len ? "," : "",
			     label, last ? last + 1 : row->desc);
		if (k > 0 && (size_t)k < nm->size - nm->len)
			nm->len += (size_t)k;
	}
	return 0;
}

static void irq_names(const struct irqiso *x, const int *irqs, int n, char *out, size_t size)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(4u << 20);
	struct names nm = { irqs, n, out, size, 0 };
	char path[PATH_MAX];

	out[0] = 0;
	(void)snprintf(path, sizeof(path), "%s/interrupts", x->proc_root);
	if (fileio_read_at(AT_FDCWD, path, 0, &b, NULL) == 0)
		(void)irq_interrupts_parse(buf_str(&b), buf_len(&b), 0, on_row, &nm);
	for (int i = 0; !nm.len && i < n; i++) { /* no names: the numbers */
		int k = snprintf(out + nm.len, size - nm.len, "%s%d", i ? "," : "", irqs[i]);

		if (k > 0 && (size_t)k < size - nm.len)
			nm.len += (size_t)k;
	}
}

static void apply(struct irqiso *x)
{
	struct irq_report rep;
	struct cpuset iso;
	char cpus[256], names[512];
	int r, pid;

	r = irq_guard_apply(x->guard, &rep);
	irq_guard_isolated(x->guard, &iso);
	(void)cpuset_format(&iso, cpus, sizeof(cpus));
	metric_set(x->g_cpus, cpuset_count(&iso));
	metric_set(x->g_managed, rep.refused);
	metric_set(x->g_left, rep.empty);
	metric_series_add(metric_with(x->moves), rep.moved);
	if (r < 0)
		log_error_errno(r, "irq_isolation_failed", "cpus=%s", cpus);
	log_info("irq_isolated", "cpus=%s moved=%d kept=%d managed=%d left=%d failed=%d default=%s",
		 cpus[0] ? cpus : "none", rep.moved, rep.kept, rep.refused, rep.empty, rep.failed,
		 rep.default_set ? "set" : "unchanged");
	if (rep.refused) {
		irq_names(x, rep.refused_irqs, rep.n_refused_irqs, names, sizeof(names));
		log_warn("irq_managed_on_isolated_cpus",
			 "cpus=%s irqs=%s remedy=\"boot with isolcpus=managed_irq,%s\"", cpus, names,
			 cpus);
	}
	if (rep.empty) {
		irq_names(x, rep.empty_irqs, rep.n_empty_irqs, names, sizeof(names));
		log_warn("irq_left_on_isolated_cpus", "cpus=%s irqs=%s why=no_other_cpu_allowed",
			 cpus, names);
	}
	pid = cpuset_is_empty(&iso) ? 0 : irq_balancer_pid(x->proc_root);
	metric_set(x->g_balancer, pid > 0);
	if (pid > 0 && pid != x->balancer_pid)
		log_warn("irqbalance_running",
			 "pid=%d cpus=%s action=\"ban them: IRQBALANCE_BANNED_CPULIST=%s (or the "
			 "mask in IRQBALANCE_BANNED_CPUS) and restart irqbalance\"",
			 pid, cpus, cpus);
	x->balancer_pid = pid;
}

/* Real-time claims alike: several may hold one CPU, and the guard keeps it
 * isolated while any holder is left. */
static bool wants(const struct irqiso *x, const struct state_claim *c)
{
	if (c->flags & STATE_CLAIM_IRQ_KEEP)
		return false;
	return (c->flags & STATE_CLAIM_IRQ_ISOLATE) || x->isolate;
}

static void on_state(void *ud, enum state_event ev, const struct state_claim *c)
{
	struct irqiso *x = ud;
	struct cpuset cpus;
	int r;

	if (ev == STATE_CLAIM_ADDED && wants(x, c)) {
		cpuset_from_view(&c->cpus, &cpus);
		if (cpuset_is_empty(&cpus))
			return;
		r = irq_guard_hold(x->guard, c->uid, &cpus);
		if (r < 0) {
			log_error_errno(r, "irq_isolation_failed", "claim=%s/%s", c->ns, c->name);
			return;
		}
		apply(x);
	} else if (ev == STATE_CLAIM_REMOVED && irq_guard_release(x->guard, c->uid) == 0) {
		apply(x);
	}
}

/* Where the rest of procfs is read (see struct irqiso), and whether the
 * interrupt affinities can be written at all: a container's own /proc/irq
 * is read-only, and a claim that asks for isolation would get none. Said
 * once, at start, with what to do: a warning when the node isolates every
 * claim by default. */
static void check_procfs(struct irqiso *x)
{
	char path[PATH_MAX];

	(void)snprintf(path, sizeof(path), "%s/interrupts", x->procfs_root);
	x->proc_root = access(path, F_OK) == 0 ? x->procfs_root : "/proc";
	(void)snprintf(path, sizeof(path), "%s/irq/default_smp_affinity", x->procfs_root);
	if (access(path, W_OK) < 0)
		log_errno(x->isolate ? LOG_WARN : LOG_INFO, LOG_MOD, -errno, "irq_affinity_read_only",
			       "path=%s action=\"claims asking irq: isolate get no isolation; mount "
			       "the host's /proc/irq writable and point --procfs-root at it "
			       "(docs/irq-isolation.md)\"",
			       log_quote(path));
}

/* The record of a previous run against what is prepared now. */
static void reconcile(struct irqiso *x)
{
	for (int i = irq_guard_n_holders(x->guard) - 1; i >= 0; i--) {
		const char *uid = irq_guard_holder(x->guard, i);

		if (!state_claim(x->state, uid)) {
			log_info("irq_isolation_released", "claim_uid=%s why=not_prepared", uid);
			(void)irq_guard_release(x->guard, uid);
		}
	}
	apply(x);
}

int irqiso_new(struct state *state, const struct irqiso_opts *o, struct metrics *m,
	       struct irqiso **ret)
{
	_cleanup_(irqiso_freep) struct irqiso *x = calloc(1, sizeof(*x));
	struct irq_opts io = { .procfs_root = o->procfs_root, .state_dir = o->state_dir };
	struct errbuf eb = { "" };
	int r;

	if (!x)
		return -ENOMEM;
	x->state = state;
	x->isolate = o->isolate;
	x->procfs_root = strdup(o->procfs_root ? o->procfs_root : "/proc");
	if (!x->procfs_root)
		return -ENOMEM;
	check_procfs(x);
	r = irq_guard_new(&io, &x->guard, &eb);
	if (r == -EPROTO && o->state_dir) {
		char bad[PATH_MAX + 8], path[PATH_MAX];

		log_error("irq_record_malformed", "dir=%s err=%s action=set_aside", o->state_dir,
			  log_quote(eb.s));
		(void)snprintf(path, sizeof(path), "%s/%s", o->state_dir, IRQ_RECORD_FILE);
		(void)snprintf(bad, sizeof(bad), "%s/%s.bad", o->state_dir, IRQ_RECORD_FILE);
		if (rename(path, bad) < 0)
			return -errno;
		r = irq_guard_new(&io, &x->guard, &eb);
	}
	if (r < 0)
		return r;
	x->g_cpus = metrics_family(m, MF_IRQ_ISOLATED_CPUS);
	x->g_managed = metrics_family(m, MF_IRQ_MANAGED_ON_ISOLATED);
	x->g_left = metrics_family(m, MF_IRQ_LEFT_ON_ISOLATED);
	x->moves = metrics_family(m, MF_IRQ_MOVES_TOTAL);
	x->g_balancer = metrics_family(m, MF_IRQBALANCE_RUNNING);
	if (!irq_guard_is_idle(x->guard))
		reconcile(x);
	r = state_add_observer(state, on_state, x);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(x);
	return 0;
}
