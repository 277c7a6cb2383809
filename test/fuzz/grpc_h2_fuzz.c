/* grpc server input path: whatever bytes a peer sends on a connection, the
 * server neither crashes nor leaks, handlers only ever see one complete
 * message within the limit, and every call and connection is accounted for
 * once the connection is gone. Input = the byte stream from the client,
 * fed in chunks whose size depends on the input length so frames straddle
 * reads. Handlers cover sync, async (completed before and after the
 * connection goes), streaming and protobuf-c paths. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kubelet/grpc.h"
#include "kubelet_dra_v1.pb-c.h"
#include "kubelet_pluginregistration.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MESSAGE 65536
#define MAX_HELD 8

static struct grpc_call *held[MAX_HELD];
static int n_held;

static void h_echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	assert(len <= MAX_MESSAGE);
	(void)grpc_call_reply(call, req, len);
}

/* The handle ends when this returns: forget it (odd slots) or complete it. */
static void on_cancel(struct grpc_call *call, void *ud)
{
	for (int i = 0; i < n_held; i++) {
		if (held[i] != call)
			continue;
		held[i] = NULL;
		if (i % 2 == 0)
			(void)grpc_call_fail(call, GRPC_STATUS_CANCELLED, "gone");
	}
}

/* ud non-NULL: with a cancel callback; without one the handle outlives the
 * stream until complete_held(). */
static void h_hold(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	if (n_held == MAX_HELD) {
		(void)grpc_call_fail(call, GRPC_STATUS_UNAVAILABLE, "busy");
		return;
	}
	held[n_held++] = call;
	if (ud)
		grpc_call_on_cancel(call, on_cancel, NULL);
}

static void h_stream(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	(void)grpc_call_send(call, req, len);
	(void)grpc_call_send(call, (const uint8_t *)"more", 4);
	(void)grpc_call_end(call);
}

static void h_fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	char msg[64];
	size_t n = len < sizeof(msg) - 1 ? len : sizeof(msg) - 1;

	memcpy(msg, req, n); /* arbitrary bytes into grpc-message */
	msg[n] = 0;
	(void)grpc_call_fail(call, (enum grpc_status)(1 + (len % 16)), msg);
}

static void h_prepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *rq;
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;

	rq = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
											 req);
	if (!rq) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad request");
		return;
	}
	info.name = rq->n_claims ? rq->claims[0]->uid : "none";
	(void)grpc_call_reply_pb(call, &info.base);
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(rq, NULL);
}

static void complete_held(int keep)
{
	while (n_held > keep) {
		struct grpc_call *call = held[--n_held];

		if (!call)
			continue;
		if (n_held % 2)
			(void)grpc_call_reply(call, (const uint8_t *)"late", 4);
		else
			(void)grpc_call_fail(call, GRPC_STATUS_ABORTED, "late");
	}
}

static struct grpc_server *server(void)
{
	static struct event_base *base;
	static struct grpc_server *srv;
	struct grpc_limits lim = {
		.max_message = MAX_MESSAGE,
		.max_conn_buffered = 2 * MAX_MESSAGE,
		.max_conn_queued = 2 * MAX_MESSAGE,
		.max_conn_output = 16384,
		.max_streams = 16,
	};

	if (srv)
		return srv;
	base = event_base_new();
	assert(base);
	assert(grpc_server_new(base, &lim, &srv) == 0);
	assert(grpc_server_add_method(srv, "/f.S/Echo", h_echo, NULL) == 0);
	assert(grpc_server_add_method(srv, "/f.S/Hold", h_hold, NULL) == 0);
	assert(grpc_server_add_method(srv, "/f.S/HoldCb", h_hold, srv) == 0);
	assert(grpc_server_add_method(srv, "/f.S/Stream", h_stream, NULL) == 0);
	assert(grpc_server_add_method(srv, "/f.S/Fail", h_fail, NULL) == 0);
	assert(grpc_server_add_method(srv, "/f.S/Prepare", h_prepare, NULL) == 0);
	return srv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grpc_server *srv = server();
	struct grpc_conn *c;
	struct grpc_stats st;
	size_t chunk = 1 + size % 113, off = 0;

	if (grpc_conn_new_memory(srv, &c) < 0)
		return 0;
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;

		if (grpc_conn_feed(c, data + off, n) < 0)
			break;
		off += n;
		(void)grpc_conn_take_output(c, NULL);
		complete_held(2); /* some async calls complete while the peer is there */
	}
	(void)grpc_conn_take_output(c, NULL);
	complete_held(1);
	grpc_conn_free(c);
	complete_held(0); /* and one after it went: -ECANCELED, no leak */

	grpc_server_get_stats(srv, &st);
	assert(st.conns_active == 0);
	assert(st.calls_active == 0);
	return 0;
}
