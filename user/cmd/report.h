/* report: the daemon's translation of what the driver decided into what
 * Kubernetes users read (docs/events.md): Events (kube/events.h) and the
 * claims' status.devices (kube/claimstatus.h).
 *
 * The deciding modules tell it through small callbacks at their edge
 * (dra_report_ops, pools_opts.on_not_consumer, rtctl_opts.on_failure);
 * each callback only queues. Created before the node agents (they keep the
 * pointer) and started once the API client exists: until then, and with
 * --events=none / --no-claim-status, the callbacks do nothing.
 *
 *   refused Prepare          Warning  PrepareRefused      on the ResourceClaim
 *   pod not a consumer       Warning  BindingRefused      on the Pod, related: the claim
 *   real-time policy failed  Warning  RealtimeNotApplied  on the Pod, related: the claim
 *   claim's CPUs offline     Warning  CPUsOffline         on the ResourceClaim
 *   prepared (--events=all)  Normal   Prepared            on the ResourceClaim
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct event_base;
struct kube;
struct metrics;
struct nri_pod;
struct state_claim;
struct topo;
struct report;

struct report_opts {
	const char *node;	 /* pool name, and the reportingInstance's node */
	const struct topo *topo; /* borrowed */
	int events;		 /* enum cfg_events */
	int series_interval_s;	 /* events_opts.flush_ms, in seconds */
	bool claim_status;
};

int report_new(const struct report_opts *o, struct report **ret);
/* The API client is up: events and status writes start. */
int report_start(struct report *rp, struct event_base *base, struct kube *k, struct metrics *m);
struct report *report_free(struct report *rp);
DEFINE_FREEP(report, report_free)

/* For dra_opts.report (ud: the report). */
extern const struct dra_report_ops report_dra_ops;
/* For pools_opts.on_not_consumer and rtctl_opts.on_failure (ud: the report). */
void report_not_consumer(void *ud, const struct nri_pod *pod, const char *container,
			 const struct state_claim *claim, const char *why);
void report_rt_failure(void *ud, const char *pod, const char *pod_uid, const char *container,
		       const struct state_claim *claim, const char *why, bool evicted);
