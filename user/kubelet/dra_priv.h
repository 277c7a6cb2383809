/* dra_priv: what the files of the dra module share and nobody else sees.
 * struct dra is defined here for dra_health.c and dra_unprepare.c; outside
 * the module it stays opaque (dra.h). Only user/kubelet/dra*.c include this
 * header.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "kubelet/dra.h"
#include "lib/cpuset.h"
#include "lib/ratelimit.h"

struct event;
struct grpc_call;
struct grpc_server;
struct metric;
struct metric_series;
struct prep;
struct prep_claim;
struct prepare;
struct ProtobufCMessage;

struct health_stream {
	struct health_stream *next;
	struct grpc_call *call;
	struct dra *dra;
};

struct dra {
	struct event_base *base;
	struct dra_opts o;
	char *node, *kubelet_root, *endpoint, *reg_path;
	char *data_dir; /* <kubelet root>/plugins/dra.cpu: device metadata lives under it */
	struct state *state;
	const struct topo *topo;
	const struct devices *devices;
	struct prepare *prepare; /* the policy: which CPUs, may it be prepared again */
	struct grpc_server *grpc;
	struct prep *preps; /* calls with claims not done */
	/* claims waiting for a fetch slot, oldest first */
	struct prep_claim *queue, *queue_tail;
	int fetching; /* fetches in flight */
	struct event *pump; /* starts queued fetches on the next loop turn */
	bool closing;
	struct ratelimit cancel_rl; /* prepare_cancelled lines */
	struct health_stream *streams;
	struct event *health_timer;
	bool has_online;       /* dra_set_online() was called */
	struct cpuset online;  /* then: the CPUs online now */
	struct metric *g_claims_offline, *g_health_streams, *health_coalesced;
	bool registered;
	/* metrics */
	struct metric_series *prep_ok, *prep_err, *prep_cancelled, *unprep_ok, *unprep_err;
	struct metric_series *fetch_ok, *fetch_err, *fetch_cancelled;
	struct metric *prep_seconds, *claim_cpus, *grpc_calls, *grpc_seconds;
};

/* dra_health.c: NodeWatchResources (both services): the stream is kept and
 * gets a snapshot now and on every change. */
void dra_handle_watch_resources(struct grpc_call *call, const uint8_t *req, size_t len, void *ud);
/* dra_health.c: the periodic resend to every open stream (ud: struct dra). */
void dra_on_health_timer(evutil_socket_t fd, short what, void *ud);

/* dra.c: packs msg and sends it as the call's reply; out of memory fails the
 * call. */
void dra_reply_message(struct grpc_call *call, const struct ProtobufCMessage *msg);
/* dra.c: every Prepare of claim uid still waiting for its fetch answers with
 * an error and never commits. Returns how many were superseded. */
int dra_supersede_prepares(struct dra *d, const char *uid);
/* dra_unprepare.c: NodeUnprepareResources (both services). */
void dra_handle_unprepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud);
