// SPDX-License-Identifier: GPL-2.0
/* The cheapest useful sched_switch program: count switches per CPU.
 *
 * It proves the build chain (clang -> .bpf.o -> skeleton -> load/attach) and is
 * the yardstick the pinning check is measured against: `make bench` compares
 * the per-switch cost of pinning.bpf.c with this one.
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

char LICENSE[] SEC("license") = "GPL";
