/* claimstatus: what the driver decided for a claim, in the claim's
 * status.devices (KEP-4817), where `kubectl get resourceclaim -o yaml` shows it.
 *
 * After a Prepare, one entry per device of this driver's results (driver,
 * pool, device, shareID as allocated) whose `data` says what was decided:
 *
 *   {"request":"cpus","cpus":"4-7","numaNodes":"0","sockets":"0","policy":"packed"}
 *   real-time claims add "realtime": the budget, as CPUConfig writes it
 *
 * and a Ready condition (True, reason Prepared). Unprepare removes them.
 *
 * How the API server lets a driver write this (Kubernetes 1.33 and later,
 * feature gate DRAResourceClaimDeviceStatus: beta and on from 1.33, GA in
 * 1.37): the status subresource, PATCH .../resourceclaims/<name>/status,
 * as a server-side apply (application/apply-patch+yaml, fieldManager
 * dra.cpu, force): status.devices is a list map keyed by (driver, device,
 * pool, shareID), so an apply owns exactly this driver's entries, leaves
 * the other drivers' alone, and an apply without them removes them. The
 * body names the claim's uid: a claim deleted and created again under the
 * same name is never written (409). The server checks that every entry is
 * an allocated device of the claim, at most 8 conditions, data at most
 * 10 KiB. RBAC: patch on resourceclaims/status; from 1.36
 * (DRAResourceClaimGranularStatusAuthorization, beta) also
 * associated-node:patch on resourceclaims/driver for resourceName dra.cpu.
 *
 * Never on the critical path: writes go through a writer (writer.h), one at
 * a time, with bounded retries and backoff; a failure is logged and counted
 * (dra_cpu_claim_status_writes_total{result}), never returned to Prepare.
 * A claim whose status already says what would be written (a restart, a
 * repeated Prepare) is not written again.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct claim_alloc;
struct event_base;
struct json_object;
struct kube;
struct metrics;
struct state_claim;
struct topo;
struct claimstatus;

#define CLAIMSTATUS_FIELD_MANAGER "dra.cpu"
#define CLAIMSTATUS_DATA_MAX 10240 /* bytes of one entry's data (server limit) */

struct claimstatus_opts {
	const char *driver;	/* "dra.cpu" */
	const char *pool;	/* the node name */
	const struct topo *topo; /* borrowed: NUMA node and socket of each CPU */
	int max_queued;		/* 0: 64 claims waiting */
	int max_attempts;	/* 0: 5 */
	int timeout_ms;		/* 0: 5000 */
};

int claimstatus_new(struct event_base *base, struct kube *k, const struct claimstatus_opts *o,
		    struct metrics *m, struct claimstatus **ret);
struct claimstatus *claimstatus_free(struct claimstatus *cs);
DEFINE_FREEP(claimstatus, claimstatus_free)

/* The claim (as read for the Prepare; NULL: unknown) was prepared: alloc
 * are this driver's results, c what state holds. Queues the write unless
 * the claim's status already says it. Returns 1 queued, 0 nothing to do,
 * -errno (counted and logged here; the caller goes on). */
int claimstatus_prepared(struct claimstatus *cs, struct json_object *claim,
			 const struct claim_alloc *alloc, const struct state_claim *c);
/* The claim was unprepared: queues the removal of this driver's entries. */
int claimstatus_unprepared(struct claimstatus *cs, const char *ns, const char *name,
			   const char *uid);

/* True when claim (any JSON, as the API server sent it) has in
 * status.devices exactly the entries of driver that want (an array from
 * claimstatus_entries()) holds: same keys, same data, Ready and Prepared,
 * whatever their transition times. Anything malformed is false. */
bool claimstatus_is_current(const char *driver, struct json_object *claim,
			    struct json_object *want);

/* The status.devices entries claimstatus_prepared() would write (a new
 * JSON array; for tests). */
int claimstatus_entries(const struct claimstatus_opts *o, const struct claim_alloc *alloc,
			const struct state_claim *c, struct json_object **ret);
