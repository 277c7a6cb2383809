/* rt: the real-time ledger of this node: what the prepared real-time
 * claims hold on each CPU (one walk of state, the one record: a claim
 * restored after a restart is counted once because it is in state once),
 * and the kernel's limits that capacity comes from (host/sched.h). The
 * budget itself, a value type claims and state carry, is core/rtbudget.h;
 * this module sits above state and walks it.
 */
#pragma once

#include <stdint.h>

#include "core/rtbudget.h"

struct cpuset;
struct errbuf;
struct sched_limits;
struct state;

/* The real-time limits of the running kernel (host/sched.h): what deadline
 * tasks may use per CPU of cpus (the real-time CPUs: their deadline servers
 * count) less headroom_milli, and the periods it takes. -errno with eb when
 * the kernel leaves deadline tasks nothing or its limits cannot be read. */
int rt_limits_read(const struct cpuset *cpus, int64_t headroom_milli, struct rt_limits *ret,
		   struct errbuf *eb);

/* The part of the kernel's limits the ledger and Prepare use. */
struct rt_limits rt_limits_of(const struct sched_limits *sl);

/* Milli-CPU the prepared real-time claims in s hold on cpu (their results on
 * that CPU; a claim restored without its record holds the whole capacity). */
int64_t rt_cpu_used_milli(const struct state *s, int cpu, const struct rt_limits *l);
