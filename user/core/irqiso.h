/* irqiso: which claims keep interrupts off their CPUs (docs/irq-isolation.md).
 *
 * A claim asks with CPUConfig irq: isolate (or says irq: keep); the node's
 * --irq-isolation sets what a claim that does not say gets, real-time claims
 * included. The CPUs of the claims that do are held in host/irq's guard under
 * the claim's uid; a CPU several claims share (real-time CPUs, shared by
 * bandwidth) stays isolated until the last of them that holds it is gone:
 *
 *   claim prepared (state observer) ──> hold uid -> its CPUs, apply
 *   claim unprepared ──────────────────> release uid, apply (exact restore)
 *   start ──> the guard's record: holders whose claim is still prepared stay,
 *             the others are released; apply puts back what they moved
 *
 * The guard's record is the only durable trace (the checkpoint does not keep
 * the irq flags): a claim prepared before a restart keeps isolation if it had
 * it, and a changed node default applies to claims prepared after it.
 *
 * Every apply logs what it did (event=irq_isolated), interrupts the kernel
 * refused (managed, with their names from /proc/interrupts and the remedy:
 * isolcpus=managed_irq) and a running irqbalance (which would move them back:
 * ban the CPUs there). Metrics: dra_cpu_irq_isolated_cpus,
 * dra_cpu_irq_managed_on_isolated (refused), dra_cpu_irq_left_on_isolated
 * (would have been left without CPUs), dra_cpu_irq_moves_total,
 * dra_cpu_irqbalance_running.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct irqiso;
struct metrics;
struct state;

struct irqiso_opts {
	bool isolate; /* --irq-isolation=isolate: claims that do not say isolate */
	const char *procfs_root; /* NULL: /proc */
	const char *state_dir;	 /* where the guard's record lives */
};

/* state and m borrowed (state must outlive it). Loads the record and, when
 * it holds anything, reconciles it with the prepared claims at once (a
 * malformed record is logged and set aside as irq.json.bad). -errno for
 * memory and an unreadable state dir only. */
int irqiso_new(struct state *state, const struct irqiso_opts *o, struct metrics *m,
	       struct irqiso **ret);
struct irqiso *irqiso_free(struct irqiso *x);
DEFINE_FREEP(irqiso, irqiso_free)
