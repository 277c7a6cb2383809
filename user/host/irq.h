/* irq: interrupts kept off exclusive CPUs (docs/irq-isolation.md).
 *
 * The kernel lets root move most interrupts: <procfs>/irq/N/smp_affinity_list
 * is the CPUs interrupt N may be delivered to, <procfs>/irq/default_smp_affinity
 * (a hex mask) what a new interrupt starts with. Kernel-managed interrupts
 * (multi-queue block and network devices spread by the kernel) refuse a
 * write (EIO, or EPERM on some kernels); only isolcpus=managed_irq at boot
 * moves them. The guard:
 *
 *   holders (key -> CPUs, e.g. claim uid -> its exclusive CPUs)
 *        │ union = the isolated CPUs
 *        ▼
 *   irq_guard_apply(): every interrupt whose affinity meets them gets its
 *   affinity minus them; one that would be left with none keeps its own
 *   (reported "empty"); one that refuses the write is reported "refused";
 *   the default affinity likewise. What it changed, with what was there
 *   before, goes to the record; an affinity no longer touching the isolated
 *   CPUs goes back to exactly what was recorded.
 *
 * The record, <state-dir>/irq.json, is rewritten atomically whenever it
 * changes and removed when nothing is held and everything is back:
 *   {"holders":[{"key":"<uid>","cpus":"1"}],
 *    "default":{"was":"3","set":"1"},
 *    "irqs":[{"irq":38,"was":"0-1","set":"0"}]}
 * A daemon killed with isolation in place finds it at start (irq_guard_new):
 * the holders still wanted stay, the others are released, and apply restores
 * what they had moved. An affinity someone else changed since we wrote it
 * is theirs: its new value becomes what is restored.
 *
 * Single-threaded; every call is a few hundred small procfs reads and writes
 * (bounded local I/O, like the CDI writes).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct cpuset;
struct errbuf;

#define IRQ_RECORD_FILE "irq.json"
#define IRQ_KEY_MAX 64	    /* bytes of a holder key, NUL included */
#define IRQ_HOLDERS_MAX 4096 /* claims per node, with room */
#define IRQ_MAX 65536	    /* interrupts we look at; more are ignored */
#define IRQ_REPORT_MAX 32   /* interrupts listed per kind in a report */

/* ---- parsers ------------------------------------------------------------------------------ */

/* A CPU mask in the kernel's hex format ("3", "ff,ffffffff": 32-bit groups,
 * most significant first, an optional trailing newline) into *ret. -EINVAL
 * for anything else, -ERANGE for a CPU >= CPUSET_MAX. */
int irq_mask_parse(const char *s, size_t len, struct cpuset *ret);
/* s as such a mask into buf ("0" for the empty set). -ENOSPC when short. */
int irq_mask_format(const struct cpuset *s, char *buf, size_t size);

/* One row of /proc/interrupts: its label ("36", "LOC"), its count on the CPU
 * asked for (0 when that CPU has no column), and the rest of the line (chip,
 * hardware irq and action names, spaces squeezed: "PCI-MSIX-0000:00:02.0
 * 1-edge virtio1-req.0"; "" for rows without one). Borrowed for the call. */
struct irq_row {
	const char *label;
	uint64_t count;
	const char *desc;
};
/* Calls fn for every row of the text of /proc/interrupts with the counts of
 * CPU cpu; fn returns 0 to go on, anything else stops with that value.
 * -EPROTO for a text without the "CPUn" header or with a row longer than
 * 4 KiB, -ENOMEM. Returns what fn stopped with, or 0. */
int irq_interrupts_parse(const char *text, size_t len, int cpu,
			 int (*fn)(void *ud, const struct irq_row *row), void *ud);

/* ---- the guard ---------------------------------------------------------------------------- */

struct irq_guard;

struct irq_opts {
	const char *procfs_root; /* NULL: "/proc" */
	const char *state_dir;	 /* NULL: no record (tests) */
};

/* What one irq_guard_apply() did. */
struct irq_report {
	int moved;    /* affinities written (changed or restored) */
	int kept;     /* isolated interrupts left as they were (already right) */
	int refused;  /* the kernel refused the write: managed */
	int empty;    /* only isolated CPUs in their affinity: left alone */
	int failed;   /* other errors (unreadable, vanished) */
	int n_refused_irqs, n_empty_irqs;
	int refused_irqs[IRQ_REPORT_MAX], empty_irqs[IRQ_REPORT_MAX];
	bool default_set;	/* default_smp_affinity holds no isolated CPU */
};

/* Loads the record from the state dir, if any (a malformed one is -EPROTO
 * with eb saying why: the caller decides whether to start without it).
 * Nothing is written yet. */
int irq_guard_new(const struct irq_opts *o, struct irq_guard **ret, struct errbuf *eb);
struct irq_guard *irq_guard_free(struct irq_guard *g);
DEFINE_FREEP(irq_guard, irq_guard_free)

/* key holds cpus (replacing what it held). -EINVAL for a bad key or an
 * empty set, -E2BIG past IRQ_HOLDERS_MAX. Takes effect at the next apply. */
int irq_guard_hold(struct irq_guard *g, const char *key, const struct cpuset *cpus);
/* key holds nothing any more; -ENOENT when it held nothing. */
int irq_guard_release(struct irq_guard *g, const char *key);
/* Holders, by index (0..n-1): key borrowed until the next change. */
int irq_guard_n_holders(const struct irq_guard *g);
const char *irq_guard_holder(const struct irq_guard *g, int i);
/* Nothing held and nothing moved: apply would change nothing. */
bool irq_guard_is_idle(const struct irq_guard *g);
/* The union of what is held. */
void irq_guard_isolated(const struct irq_guard *g, struct cpuset *ret);

/* Brings every affinity in line with the held CPUs (see above) and writes
 * the record. Returns 0, or -errno when the irq directory cannot be read or
 * the record cannot be written (affinities are changed all the same). */
int irq_guard_apply(struct irq_guard *g, struct irq_report *rep);

/* ---- irqbalance --------------------------------------------------------------------------- */

/* The pid of a running irqbalance (a process whose comm is "irqbalance")
 * under procfs_root (NULL: "/proc"), 0 when none. */
int irq_balancer_pid(const char *procfs_root);
