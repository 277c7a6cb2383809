/* The kubelet plugin: registration, DRA NodePrepareResources /
 * NodeUnprepareResources (v1 and v1beta1), and the resource health stream.
 *
 *   kubelet ── plugins_registry/dra.cpu-reg.sock ──> GetInfo, NotifyRegistrationStatus
 *           ── plugins/dra.cpu/dra.sock ──────────> Prepare / Unprepare / NodeWatchResources
 *
 * Prepare, per claim: fetch the claim from the API server (async, through the
 * fetch function the daemon provides), read our results (claim module), turn
 * them into CPUs (individual: device name -> CPU; grouped: allocator inside
 * the device's group, consumedCapacity CPUs), commit through state (CDI spec +
 * checkpoint), answer with pool/device/request names and the CDI device id.
 * Problems are per-claim errors in the reply; the call itself succeeds.
 * v1 and v1beta1 share field numbers, so one set of messages serves both
 * (v1beta1 replies just never carry share_id).
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct event_base;
struct json_object;
struct state;
struct topo;
struct devices;
struct metrics;
struct dra;

#define DRA_DRIVER "dra.cpu"
#define DRA_ERR_MAX 512

/* The result of a claim fetch: claim is borrowed for the callback only; on
 * failure claim is NULL and err says why (HTTP status or transport error). */
typedef void (*dra_claim_cb)(void *cb_ud, struct json_object *claim, const char *err);
/* Starts fetching namespace/name; cb runs exactly once, later, on the loop
 * (never from inside this call). Returns 0 or -errno (then cb never runs). */
typedef int (*dra_fetch_fn)(void *fetch_ud, const char *ns, const char *name, dra_claim_cb cb,
			    void *cb_ud);
/* Registration state changes (the kubelet accepted or rejected us). */
typedef void (*dra_registered_fn)(void *ud, bool registered);

struct dra_opts {
	const char *node;	  /* pool name */
	const char *kubelet_root; /* sockets go under it */
	const char *sysfs_root;	  /* NULL: / (health reads cpu/online) */
	bool watch_online;	  /* topology discovered here: report CPUs going offline */
	int device_mode;	  /* enum devices_mode */
	dra_fetch_fn fetch;
	void *fetch_ud;
	dra_registered_fn on_registered;
	void *registered_ud;
};

/* Everything is borrowed and must outlive the plugin. Creates the sockets
 * (their directories too), replacing stale socket files. */
int dra_new(struct event_base *base, const struct dra_opts *o, struct state *state,
	    const struct topo *topo, const struct devices *devices, struct metrics *metrics,
	    struct dra **ret);
/* Cancels health streams and closes the sockets. Fetches still in flight
 * must have been cancelled by their owner first (free the API client before
 * the plugin). NULL-safe. */
struct dra *dra_free(struct dra *d);
DEFINE_FREEP(dra, dra_free)
