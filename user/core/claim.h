/* What a ResourceClaim asks of this driver on this node: the allocation
 * results whose driver is dra.cpu and whose pool is this node, each with its
 * consumed CPU count (grouped modes) and the CPUConfig that applies to it;
 * and the pods it is reserved for (status.reservedFor), the only pods whose
 * containers may hold its CPUs.
 *
 * Parsing is strict where the claim speaks to us (our results, our opaque
 * config: unknown fields and kinds are errors) and ignores what belongs to
 * other drivers. Errors are per claim and say what is wrong in words a user
 * can act on; they go back to the kubelet in the claim's PrepareResult.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/rtbudget.h"

struct errbuf;
struct json_object;

#define CLAIM_MAX_RESULTS 32 /* AllocationResultsMaxSize */
#define CLAIM_STR_MAX 254
/* Longest cpuset override we take, as text ("0-3,64-67" and the like: room
 * for a few hundred CPUs in ranges). */
#define CLAIM_CPUSET_MAX 512
/* The reference driver's opaque parameters: {"apiVersion": "v1alpha1",
 * "cpuConfig": {"cpuset": "2-5"}} (no kind), written by a scheduler plugin
 * (or the user, in the claim's spec) to say exactly which CPUs a grouped
 * request gets. */
#define CLAIM_OVERRIDE_API_VERSION "v1alpha1"
#define CLAIM_NAMESPACE_MAX 63 /* a DNS-1123 label */
#define CLAIM_NAME_MAX 253     /* a DNS-1123 subdomain */

enum claim_policy { CLAIM_POLICY_PACKED = 0, CLAIM_POLICY_SPREAD_CORES, CLAIM_POLICY_DISTRIBUTED };

enum claim_memory { CLAIM_MEMORY_DEFAULT = 0, CLAIM_MEMORY_ALL, CLAIM_MEMORY_LOCAL };

enum claim_irq { CLAIM_IRQ_DEFAULT = 0, CLAIM_IRQ_ISOLATE, CLAIM_IRQ_KEEP };

/* isolated: may the result's device be isolated CPUs (docs/isolated-cpus.md)? */
enum claim_isolated {
	CLAIM_ISOLATED_AVOID = 0, /* never (default): only when the claim asks */
	CLAIM_ISOLATED_PREFER,	  /* either (a prioritized list asks for both) */
	CLAIM_ISOLATED_REQUIRE,	  /* only isolated CPUs */
};

/* Opaque parameters {"apiVersion":"dra.cpu/v1alpha1","kind":"CPUConfig",...}. */
struct claim_config {
	/* memory: "local" (cpuset.mems = the NUMA nodes of the claim's CPUs) or
	 * "all"; DEFAULT when not given (the node's --memory-locality) */
	enum claim_memory memory;
	/* sharedPool: the container also gets the current shared pool */
	bool shared_pool;
	/* irq: "isolate" (movable interrupts leave the claim's CPUs) or "keep";
	 * DEFAULT when not given (the node's --irq-isolation) */
	enum claim_irq irq;
	enum claim_policy policy; /* default packed */
	bool full_cores;	  /* default false */
	bool align_l3;		  /* default: true with packed (kubelet refuses it with the others) */
	bool align_l3_set;	  /* alignL3 was given explicitly */
	enum claim_isolated isolated; /* default avoid */
	bool rt_set;		  /* "realtime" was given: rt holds the budget */
	struct rt_budget rt;	  /* real-time devices only (core/rt.h) */
};

struct claim_result {
	char request[CLAIM_STR_MAX]; /* "req" or "req/sub" */
	char device[CLAIM_STR_MAX];
	char share_id[64]; /* "" when absent */
	char consumed[64]; /* consumedCapacity["dra.cpu/cpu"], "" when absent */
	char rt_consumed[64]; /* consumedCapacity["dra.cpu/rtBandwidth"], "" when absent */
	struct claim_config config;
	/* The exact CPUs named by the reference's override (a syntactically
	 * valid CPU list, checked against the node at Prepare), "" when none:
	 * at most one override applies to a result, and only from the claim
	 * (FromClaim); a DeviceClass-level one is refused, as the reference
	 * does. */
	char cpuset[CLAIM_CPUSET_MAX];
};

struct claim_alloc {
	int n;
	struct claim_result results[CLAIM_MAX_RESULTS];
	/* metadata.annotations["resource.kubernetes.io/pod-claim-name"]: the
	 * claim was made from a ResourceClaimTemplate for the pod's claim of
	 * that name; "" otherwise. */
	char pod_claim_name[CLAIM_STR_MAX];
};

/* claim: the object GET returned. uid: what the kubelet asked for (the claim
 * must still be that one). Fills *ret with at least one result: a claim the
 * kubelet sends us but that holds nothing for this driver is an error (it
 * would prepare to zero CPUs and an empty DRA_CPUSET_ variable).
 * -EINVAL with eb (may be NULL) saying what is wrong. */
int claim_parse(struct json_object *claim, const char *uid, const char *driver, const char *pool,
		struct claim_alloc *ret, struct errbuf *eb);

/* A pod the claim is reserved for (one entry of status.reservedFor with
 * resource "pods" in the core API group). Its namespace is the claim's. */
#define CLAIM_MAX_CONSUMERS 256 /* ResourceClaimReservedForMaxSize */
#define CLAIM_UID_MAX 64	/* as CDI_UID_MAX: [A-Za-z0-9-], not starting with '-' */
struct claim_consumer {
	char uid[CLAIM_UID_MAX];
	char name[CLAIM_NAME_MAX + 1];
};

/* The pods among claim's status.reservedFor, in order. Entries for other
 * resources (a consumer that is not a pod runs no container of ours) are
 * skipped; an absent list is no consumer. A pod entry must have a valid uid
 * and a Kubernetes object name; more than CLAIM_MAX_CONSUMERS entries, or
 * anything not shaped as the API defines it, is -EINVAL with eb (may be NULL)
 * saying what, and so is a claim whose metadata.uid is not uid (NULL: not
 * checked; a claim deleted and created again under its name is another
 * claim). Returns the count and, when it is not 0, a new array in *ret
 * (caller frees; *ret is NULL for 0). */
int claim_consumers_parse(struct json_object *claim, const char *uid,
			  struct claim_consumer **ret, struct errbuf *eb);

/* Parses one CPUConfig parameters object onto *cfg (fields it sets override). */
int claim_config_parse(struct json_object *params, struct claim_config *cfg, struct errbuf *eb);

const char *claim_policy_name(enum claim_policy p);

/* Does the result's CPUConfig.isolated take its device (isolated or not)?
 * 0, or -EINVAL with eb saying what to change. */
int claim_isolation_check(const struct claim_result *r, bool device_isolated, struct errbuf *eb);

/* The kubelet names a claim by namespace and name; both are checked before
 * they reach a URL or a log line. A namespace is a DNS-1123 label (1-63 of
 * [a-z0-9-], alphanumeric at both ends), a claim name a DNS-1123 subdomain
 * (1-253, such labels joined by '.'). 0 or -EINVAL. */
int claim_namespace_check(const char *ns);
int claim_name_check(const char *name);
