/* prepare: the Prepare policy. Which CPUs a claim gets, whether a claim
 * prepared before may be prepared again, and the commit to state; the
 * kubelet plugin (kubelet/dra.c) only turns the wire request into a
 * prepare_request and the result back into a reply.
 *
 * Per claim (its allocation already read from the API server, core/claim.h):
 *   - individual devices (cpuNNN): each result is its CPU, online, not twice;
 *   - grouped devices: the CPUs dra.cpu/cpu consumed, chosen inside the
 *     device's group by the allocator (core/allocator.h) among the CPUs
 *     nobody holds, or exactly the cpuConfig.cpuset a result names (online,
 *     not reserved, inside the device, as many as consumed, free);
 *   - real-time devices (cpurtNNN, core/rt.h): every result real-time, one
 *     CPUConfig.realtime budget for all of them, within the kernel's limits,
 *     within what each result consumes, and within what the claims already
 *     prepared on each CPU leave;
 *   - a claim already prepared: only to the same allocation (idempotent);
 *     another allocation is refused, never answered with the old CPUs. Its
 *     consumers are recorded again (this read is newer);
 *   - device metadata (on): written before the commit, so a committed claim
 *     always has it, and repaired when a claim is prepared again.
 *
 * Every decision runs on the loop, one at a time: no two claims can pick the
 * same CPUs. A refusal is -EINVAL with the reason in err (the kubelet shows
 * it: valid UTF-8, errbuf keeps it so).
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct claim_alloc;
struct devices;
struct errbuf;
struct json_object;
struct prepare;
struct rt_limits;
struct state;
struct state_consumer;
struct topo;

struct prepare_opts {
	struct state *state;	       /* where claims are committed */
	const struct topo *topo;
	const struct devices *devices; /* what this node publishes */
	/* Real-time CPUs: the kernel's limits budgets are checked against;
	 * NULL when there are none. */
	const struct rt_limits *rt;
	/* Claims whose CPUConfig does not say: NUMA-local memory. */
	bool memory_local;
	/* An external allocator picks the CPUs (docs/external-allocator.md): a
	 * grouped result without a cpuset override is refused, the allocator
	 * never runs. */
	bool external_allocator;
	/* Device metadata (docs/device-metadata.md): a file and CDI spec per
	 * request, into cdi_dir and data_dir, for driver's pool. */
	bool device_metadata;
	const char *data_dir, *cdi_dir, *driver, *pool;
	/* The attributes the slice gives a device (a new object, the policy
	 * puts it); NULL: none. */
	int (*device_attributes)(void *ud, const char *device, struct json_object **ret);
	void *attributes_ud;
};

/* One claim to prepare: what the kubelet named and what the API server says
 * it was allocated. Everything is borrowed for the call. */
struct prepare_request {
	const char *ns, *name, *uid;	     /* uid: checked with cdi_uid_valid() */
	const struct claim_alloc *alloc;     /* its results for this driver and pool */
	const struct state_consumer *consumers; /* the pods it is reserved for */
	int n_consumers;
};

struct prepare_result {
	bool again;  /* it was prepared already, to the same allocation */
	bool rt;     /* a real-time claim */
	int n_cpus;  /* a claim committed now: the CPUs it holds; else 0 */
};

/* Everything in o is borrowed and must outlive the policy. Returns 0 and a
 * new policy in *ret, or -errno (the topology does not suit the allocator). */
int prepare_new(const struct prepare_opts *o, struct prepare **ret);
struct prepare *prepare_free(struct prepare *p);
DEFINE_FREEP(prepare, prepare_free)

/* CPU hotplug: the CPUs online now (copied); no claim gets an offline CPU.
 * Before the first call: the topology's online CPUs. */
void prepare_set_online(struct prepare *p, const struct cpuset *online);

/* Decides and commits one claim. Returns 0 and *ret, or -errno with the
 * reason in err (-EINVAL for every refusal the kubelet is told about). */
int prepare_claim(struct prepare *p, const struct prepare_request *rq, struct prepare_result *ret,
		  struct errbuf *err);
