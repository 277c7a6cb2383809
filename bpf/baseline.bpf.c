// SPDX-License-Identifier: GPL-2.0
/* The cheapest useful sched_switch program: count switches per CPU.
 *
 * It proves the build chain (clang -> .bpf.o -> skeleton -> load/attach) and is
 * the yardstick the pinning check is measured against: `make bench` compares
 * the per-switch cost of pinning.bpf.c with this one, and the interrupt-time
 * programs with the empty ones at the end.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} switches SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&switches, &zero);

	if (n)
		(*n)++;
	return 0;
}

/* The yardstick of the interrupt-time programs: an empty program on each of
 * their hooks (make bench compares their run time with these). */
SEC("tp_btf/irq_handler_entry")
int BPF_PROG(noop_irq_entry, int irq, struct irqaction *action)
{
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(noop_irq_exit, int irq, struct irqaction *action, int ret)
{
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(noop_softirq_entry, unsigned int vec)
{
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(noop_softirq_exit, unsigned int vec)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
