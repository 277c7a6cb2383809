/* rtbudget: the real-time budget, a value type: what a claim on a real-time
 * CPU asks the kernel for, and the limits it is checked against. Claims,
 * state and the checkpoint carry it; the ledger that sums what the prepared
 * claims hold per CPU is core/rt.h, above state.
 *
 * A real-time CPU (--rt-cpus) is published as one device, cpurt%03d, whose
 * consumable capacity dra.cpu/rtBandwidth is the share of that CPU deadline
 * tasks may use (rt_limits.capacity_milli: sched_rt_runtime_us /
 * sched_rt_period_us less the fair server's reservation). The scheduler
 * admits claims against it; the claim's opaque CPUConfig carries the budget:
 *
 *   "realtime": {"policy": "deadline", "runtimeNs": 2000000,
 *                "deadlineNs": 10000000, "periodNs": 10000000,
 *                "onFailure": "evict"}
 *   "realtime": {"policy": "fifo" | "rr", "priority": 1..99}
 *
 * Invariants checked at Prepare (rt_budget_check, rt_budget_fits):
 *   1024 ns <= runtime <= deadline <= period, period within the kernel's
 *   sched_deadline_period_{min,max}_us; runtime/period <= the bandwidth the
 *   claim consumes on each device; FIFO/RR consume a CPU's whole capacity;
 *   the bandwidth of every prepared claim on a CPU sums to at most its
 *   capacity (rt_cpu_used_milli over state, core/rt.h, the one ledger: a claim restored
 *   after a restart is counted once because it is in state once).
 *
 * Bandwidth is in milli-CPU, rounded up from the budget, so the driver's sum
 * never undercounts what the kernel (20-bit fixed point, truncating) charges.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct errbuf;
struct json_object;

#define RT_CAPACITY_KEY "dra.cpu/rtBandwidth"
#define RT_MIN_RUNTIME_NS 1024ull /* the kernel's 1 << DL_SCALE */
#define RT_PRIORITY_MAX 99

enum rt_policy { RT_POLICY_NONE = 0, RT_POLICY_DEADLINE, RT_POLICY_FIFO, RT_POLICY_RR };
enum rt_on_failure { RT_ON_FAILURE_EVICT = 0, RT_ON_FAILURE_WARN };

struct rt_budget {
	enum rt_policy policy; /* NONE: no budget (a claim restored without its record) */
	int priority;	       /* FIFO/RR: 1..99 */
	uint64_t runtime_ns, deadline_ns, period_ns; /* DEADLINE; deadline relative */
	enum rt_on_failure on_failure;
};

/* What the running kernel allows. */
struct rt_limits {
	int64_t capacity_milli;		/* per CPU, what deadline tasks may use */
	uint64_t period_min_ns, period_max_ns;
};

/* Parses a "realtime" object (CPUConfig or checkpoint form) into *ret.
 * Unknown fields, wrong types and values outside the static rules are
 * -EINVAL with eb saying which. */
int rt_budget_parse(struct json_object *o, struct rt_budget *ret, struct errbuf *eb);

/* The same object back (a new json-c object; caller puts it). */
int rt_budget_to_json(const struct rt_budget *b, struct json_object **ret);

/* The kernel's rules on b that depend on the node: the period within
 * l->period_{min,max}_ns. -EINVAL with eb. */
int rt_budget_check(const struct rt_budget *b, const struct rt_limits *l, struct errbuf *eb);

/* b fits a device from which the claim consumes consumed_milli: deadline
 * bandwidth <= consumed, FIFO/RR only with the whole capacity. -EINVAL with
 * eb naming device. */
int rt_budget_fits(const struct rt_budget *b, int64_t consumed_milli, const struct rt_limits *l,
		   const char *device, struct errbuf *eb);

/* runtime/period in milli-CPU, rounded up; 0 for FIFO/RR and NONE. */
int64_t rt_budget_milli(const struct rt_budget *b);

bool rt_budget_equal(const struct rt_budget *a, const struct rt_budget *b);

/* "1m".."900m": a milli quantity as Kubernetes prints it (canonical). */
void rt_milli_format(int64_t milli, char *buf, size_t size);
/* A quantity of dra.cpu/rtBandwidth into milli-CPU: positive, whole milli.
 * -EINVAL with eb. */
int rt_milli_parse(const char *s, int64_t *ret, struct errbuf *eb);

const char *rt_policy_name(enum rt_policy p);
const char *rt_on_failure_name(enum rt_on_failure f);
