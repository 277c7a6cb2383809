/* The maps and knob bpf/pinning.bpf.c and bpf/enforce.bpf.c share, declared
 * once for both.
 *
 * Each object still gets its own definition (a .bpf.o owns its maps), but
 * user/pinning/bpfmon.c loads pinning first and hands these fds to enforce
 * with bpf_map__reuse_fd() before its load: one owner table, one set of
 * counters, one event stream. Declaring them here keeps the two definitions
 * from drifting apart; a map only one object uses stays in that object.
 *
 * Layouts and meanings: include/pinning.h.
 */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "pinning.h"

/* Which cgroup names a task (PINNING_CGROUP_*), set before load. Not a map,
 * but both objects must agree on it: userspace copies pinning's value. */
const volatile __u32 cgroup_mode = PINNING_CGROUP_V2;

/* max_entries is set to the number of possible CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_owner);
} owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_cpu_stats);
} cpu_stats SEC(".maps");

/* Turned into a one-slot array by userspace on kernels without ring buffers
 * (< 5.8: 457f44363a88 "bpf: Implement BPF ring buffer and verifier support
 * for it"); every use is then pruned (pinning's events_enabled = 0). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");
