/* Keeps this node's ResourceSlices on the API server equal to what the node
 * has, following the official publishing controller's rules
 * (k8s-api-facts.md section 5):
 *
 *   GET node (uid for the ownerReference)
 *     -> LIST our slices (fieldSelector spec.driver, spec.nodeName)
 *     -> WATCH from the list's resourceVersion, with bookmarks
 *     -> sync: match slices to desired ones by the hex index in their name;
 *        delete obsolete ones (preconditions uid + resourceVersion), PUT
 *        changed ones (full object, resourceVersion for optimistic
 *        concurrency), POST missing ones (generateName); keep the pool
 *        generation when at most one slice changes and none is created,
 *        else bump it and rewrite every slice.
 *
 * An identical restart writes nothing. A slice deleted or edited by anyone
 * (the kubelet wipes a node's slices when it starts) comes back through the
 * watch and a sync one second later. Any API error ends the sync; after a
 * backoff the publisher re-lists and syncs again. Fields the server dropped
 * (a feature gate off) are detected after each write, logged once, and
 * adopted so the publisher does not fight the server.
 *
 * Readiness (on_state, for /readyz) is not the same as being in sync (the
 * dra_cpu_slices_in_sync gauge): the node is ready from its first complete
 * publication on, and stops being ready only when its slices are known wrong
 * or missing (a sync has writes to do) and have stayed so for
 * repair_timeout_ms, repairs failing meanwhile (403, 422, conflicts, the
 * server down in the middle of a repair). It is ready again as soon as a sync
 * finds them right. A repair that succeeds within the bound (the kubelet
 * wiping the slices at its start) is not a readiness event, and an API
 * server that is merely unreachable says nothing about the slices.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct event_base;
struct kube;
struct devices;
struct metrics;
struct cpuset;
struct pcie;
struct publisher;

/* Called when the node becomes ready (true) or stops being ready (false)
 * as far as its slices go (see above). */
typedef void (*publisher_state_fn)(void *ud, bool ready);

struct publisher_opts {
	const char *node;
	const struct devices *devices; /* borrowed; changes: publisher_devices_changed() */
	int max_devices;	       /* per slice; 0 = 128 */
	int resync_delay_ms;	       /* after a watch event; 0 = 1000 */
	int repair_timeout_ms;	       /* known wrong this long: not ready; 0 = 30000 */
	bool node_allocatable;	       /* slices_opts.node_allocatable */
	const struct pcie *pcie;       /* slices_opts.pcie; borrowed */
	const char *smt_layout;	       /* slices_opts.smt_layout; borrowed */
	publisher_state_fn on_state;
	void *ud;
};

/* Starts publishing at once. k, base, metrics and the devices are borrowed. */
int publisher_new(struct event_base *base, struct kube *k, const struct publisher_opts *o,
		  struct metrics *m, struct publisher **ret);
/* The CPUs online now changed (CPU hotplug): devices none of whose CPUs is
 * online leave the slices, groups count their online CPUs, and a sync
 * writes the difference at once. online is copied. */
void publisher_set_online(struct publisher *p, const struct cpuset *online);
/* The devices changed in place (devices_set_rt_capacity()): the slices are
 * computed again and a sync writes the difference at once. reason goes to
 * the log. */
void publisher_devices_changed(struct publisher *p, const char *reason);

/* Stops (cancels requests and the watch). NULL-safe. Slices are left in
 * place: the kubelet removes them when the plugin goes away for good. */
struct publisher *publisher_free(struct publisher *p);
DEFINE_FREEP(publisher, publisher_free)
