/* The kubelet plugin: registration, DRA NodePrepareResources /
 * NodeUnprepareResources (v1 and v1beta1), and the resource health stream.
 *
 *   kubelet ── plugins_registry/dra.cpu-reg.sock ──> GetInfo, NotifyRegistrationStatus
 *           ── plugins/dra.cpu/dra.sock ──────────> Prepare / Unprepare / NodeWatchResources
 *
 * Prepare, per claim: check the kubelet's namespace and name (Kubernetes
 * names, before they reach a URL or a log line), fetch the claim from the API
 * server (async, through the claim source the daemon lends), read our
 * results (core/claim.h), hand them to the Prepare policy (core/prepare.h:
 * which CPUs, real-time budgets, prepared again or refused, the commit
 * through state: CDI spec + checkpoint), answer with pool/device/request
 * names and the CDI device id. Problems are per-claim errors in the reply; the
 * call itself succeeds. v1 and v1beta1 share field numbers, so one set of
 * messages serves both (v1beta1 replies just never carry share_id).
 *
 * Timing rules (the kubelet gives up after 45 s, or sooner, and retries):
 *   - nothing outlives the call: at its deadline every fetch of the call is
 *     cancelled and the claims still waiting fail with a reason; when the
 *     kubelet cancels (RST_STREAM, closed connection) they are abandoned;
 *   - Unprepare of a claim supersedes any Prepare of it still fetching: that
 *     Prepare answers with an error and never commits afterwards;
 *   - at most max_fetches claim fetches are in flight; the rest wait in a
 *     queue that a cancelled call leaves at once, and queued fetches start on
 *     the next loop turn, so a peer that opens and resets streams costs
 *     the API server (almost) nothing;
 *   - a claim already prepared is prepared again only to the same allocation
 *     (idempotent); another allocation is refused, never answered with the
 *     old CPUs.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct event_base;
struct json_object;
struct state;
struct topo;
struct devices;
struct metrics;
struct dra;
struct cpuset;
struct claimsource;
struct claim_alloc;
struct state_claim;

#define DRA_DRIVER "dra.cpu"

/* What became of claims, for the daemon to show where users look (Events,
 * claim status). Everything is borrowed for the call; the callee queues and
 * returns, never waits. Any member may be NULL. */
struct dra_report_ops {
	/* A Prepare of a claim ended. error NULL: prepared, alloc says what
	 * was asked, c what state holds, claim is the claim as read. Else why
	 * it was refused (alloc, c, claim may be NULL). ns and name are NULL
	 * when the kubelet's are not Kubernetes names. */
	void (*prepared)(void *ud, const char *ns, const char *name, const char *uid,
			 const char *error, struct json_object *claim,
			 const struct claim_alloc *alloc, const struct state_claim *c);
	/* A prepared claim was unprepared (ns and name checked names). */
	void (*unprepared)(void *ud, const char *ns, const char *name, const char *uid);
	/* CPUs a prepared claim holds went offline (off: those). */
	void (*offline)(void *ud, const struct state_claim *c, const struct cpuset *off);
};

/* Registration state changes (the kubelet accepted or rejected us). */
typedef void (*dra_registered_fn)(void *ud, bool registered);

/* The longest health message the kubelet takes (it cuts longer ones). */
#define DRA_HEALTH_MESSAGE_MAX 1024
#define DRA_PREPARE_TIMEOUT_MS 45000 /* the kubelet's own deadline for Prepare */
#define DRA_MAX_FETCHES 16
#define DRA_MAX_CLAIMS_PER_CALL 256

struct dra_opts {
	const char *node;	  /* pool name */
	const char *kubelet_root; /* sockets go under it */
	int device_mode;	  /* enum devices_mode */
	/* Where claims are read (core/claimsource.h); borrowed, must outlive
	 * the plugin. */
	const struct claimsource *claims;
	int prepare_timeout_ms;	  /* 0: DRA_PREPARE_TIMEOUT_MS; also caps a longer deadline */
	int max_fetches;	  /* 0: DRA_MAX_FETCHES */
	int first_request_timeout_ms; /* sockets: a connection's first request; 0: grpc's default */
	dra_registered_fn on_registered;
	void *registered_ud;
	/* Real-time CPUs (--rt-cpus): the kernel's limits their budgets are
	 * checked against; NULL when there are none (core/rt.h). */
	const struct rt_limits *rt;
	/* Device metadata in the container (docs/device-metadata.md): Prepare
	 * writes a metadata file and CDI spec per request into cdi_dir (the
	 * claims' own CDI directory) and <kubelet_root>/plugins/dra.cpu, and
	 * returns their CDI ids; Unprepare always removes them. */
	bool device_metadata;
	const char *cdi_dir;
	/* Claims whose CPUConfig does not say: NUMA-local memory. */
	bool memory_local;
	/* The attributes the slice gives a device (a new object, the plugin
	 * puts it); lent by the daemon (slices are a sibling layer). */
	int (*device_attributes)(void *ud, const char *device, struct json_object **ret);
	void *attributes_ud;
	/* --allocator external: a grouped result without a cpuset override is
	 * refused; the driver never picks CPUs itself. */
	bool external_allocator;
	/* Outcomes (NULL: nobody is told). Borrowed. */
	const struct dra_report_ops *report;
	void *report_ud;
};

/* Everything is borrowed and must outlive the plugin. Creates the sockets
 * (their directories too), replacing stale socket files. */
int dra_new(struct event_base *base, const struct dra_opts *o, struct state *state,
	    const struct topo *topo, const struct devices *devices, struct metrics *metrics,
	    struct dra **ret);
/* CPU hotplug: the CPUs online now (copied). Devices with an offline CPU
 * are reported on the health streams at once (v1.DRAResourceHealth and
 * v1alpha1.DRAResourceHealth: a CPU device whose CPU is offline, or a group
 * one of whose offline CPUs a prepared claim holds, is UNHEALTHY with a
 * message; the claim keeps its CPUs, never moved, and is logged once); no
 * new claim gets an offline CPU. Before the first call: the CPUs online at
 * start. */
void dra_set_online(struct dra *d, const struct cpuset *online);

/* Cancels health streams, cancels every fetch still in flight (through the
 * claim source: free the plugin before the API client), closes the
 * sockets. NULL-safe. */
struct dra *dra_free(struct dra *d);
DEFINE_FREEP(dra, dra_free)
