/* rtsweep: ending the tasks a real-time claim leaves behind. A claim is
 * ended by ending its tasks, never by switching a deadline task back to
 * SCHED_OTHER: blocked, it would keep its bandwidth charged until the root
 * domain is rebuilt; dead, it frees it (docs/realtime.md, "Teardown").
 *
 *   rtsweep_task    the container's main task, if still the one it was
 *   rtsweep_cgroup  whatever its cgroup and the cgroups below it hold
 *   rtsweep_cpus    every real-time task left on the claim's CPUs,
 *                   wherever it lives (a child that left the cgroup)
 *
 * Each returns how many tasks it sent SIGKILL (the caller counts them in
 * dra_cpu_rt_tasks_ended_total). Never pid 0, 1 or the driver itself.
 * proc_root: "" for this machine, a fixture's root in tests.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct state;
struct state_claim;

/* Ends pid when it is still the task that started at start (clock ticks
 * since boot, sched_task_start()): not a reused pid. */
int rtsweep_task(const char *proc_root, pid_t pid, uint64_t start);
/* Ends what the cgroup at dir (absolute) holds, its child cgroups
 * included (a container may make its own below its cgroup). */
int rtsweep_cgroup(const char *dir);
/* The claim gone is unprepared: ends every real-time task (deadline, FIFO,
 * RR) still allowed on its CPUs alone, wherever it lives, but kernel
 * threads. While another real-time claim state holds is on those CPUs,
 * only tasks under gone's own deadline budget are its (and none when that
 * claim has the same budget); the others are left and logged. since: when
 * the claim's first container started (clock ticks since boot), 0 when
 * unknown: a task started before it is not its child. */
int rtsweep_cpus(const char *proc_root, struct state *state, const struct state_claim *gone,
		 uint64_t since);
