/* grpc_echo: a small server on user/kubelet/grpc.c for test/integration/test_grpc.py.
 *
 * Methods on --socket (request and reply bytes are raw, not protobuf):
 *   /echo.Echo/Unary   replies with the request
 *   /echo.Echo/Slow    "<ms>[:payload]": replies with the request after ms (async)
 *   /echo.Echo/Stream  "<count> <interval_ms>": count messages "msg <i>", then OK;
 *                      count 0 = until the client cancels
 *   /echo.Echo/Fail    "<code> <message>": fails with that status
 *   /echo.Echo/Big     "<n>": replies with n bytes of 'x'
 *   /echo.Echo/Stats   JSON: grpc_stats, cancels seen, completed calls by code
 * and, as a stand-in DRA plugin for test/sim/kubelet_client.py (protobuf-c):
 *   /pluginregistration.Registration/{GetInfo,NotifyRegistrationStatus}
 *   /k8s.io.kubelet.pkg.apis.dra.{v1,v1beta1}.DRAPlugin/Node{Prepare,Unprepare}Resources
 *   /v1alpha1.DRAResourceHealth/NodeWatchResources (every --health-ms)
 * --reg-socket serves only the registration service, like the real driver.
 *
 * Prints "ready" on stdout once listening; SIGTERM/SIGINT: clean exit 0.
 */
#define LOG_MOD "echo"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "kubelet/grpc.h"
#include "kubelet_dra_health_v1alpha1.pb-c.h"
#include "kubelet_dra_v1.pb-c.h"
#include "kubelet_dra_v1beta1.pb-c.h"
#include "kubelet_pluginregistration.pb-c.h"
#include "lib/log.h"

struct echo {
	struct event_base *base;
	struct grpc_server *srv;
	struct grpc_server *reg;
	const char *socket;
	uint32_t health_ms;
	uint64_t cancels;
	uint64_t notify_ok, notify_failed;
	uint64_t by_code[_GRPC_STATUS_MAX + 1];
};

/* One pending async operation: a timer owned with the call until either
 * completes or the client cancels. */
struct pending {
	struct echo *e;
	struct grpc_call *call;
	struct event *timer;
	uint8_t *data;
	size_t len;
	long count, sent;	/* streams */
	uint32_t interval_ms;
	bool health;
};

static void pending_free(struct pending *p)
{
	if (p->timer)
		event_free(p->timer);
	free(p->data);
	free(p);
}

static void on_pending_cancel(struct grpc_call *call, void *userdata)
{
	struct pending *p = userdata;

	p->e->cancels++;
	(void)grpc_call_fail(call, GRPC_STATUS_CANCELLED, "cancelled");
	pending_free(p);
}

static int pending_new(struct echo *e, struct grpc_call *call, event_callback_fn fn,
		       struct pending **ret)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->e = e;
	p->call = call;
	p->timer = evtimer_new(e->base, fn, p);
	if (!p->timer) {
		free(p);
		return -ENOMEM;
	}
	grpc_call_on_cancel(call, on_pending_cancel, p);
	*ret = p;
	return 0;
}

static void arm_ms(struct event *ev, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	(void)evtimer_add(ev, &tv);
}

/* ---- echo service --------------------------------------------------------------------------- */

static void on_unary(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	(void)grpc_call_reply(call, req, len);
}

static void on_slow_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;

	(void)grpc_call_reply(p->call, p->data, p->len);
	pending_free(p);
}

static void on_slow(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct pending *p;
	char num[16] = "";

	if (pending_new(userdata, call, on_slow_timer, &p) < 0) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->data = malloc(len ? len : 1);
	if (!p->data) {
		grpc_call_on_cancel(call, NULL, NULL);
		pending_free(p);
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	memcpy(p->data, req, len);
	p->len = len;
	memcpy(num, req, len < sizeof(num) - 1 ? len : sizeof(num) - 1);
	arm_ms(p->timer, (uint32_t)strtoul(num, NULL, 10));
}

static void on_stream_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	char msg[32];
	int n, r;

	n = snprintf(msg, sizeof(msg), "msg %ld", p->sent);
	r = grpc_call_send(p->call, (const uint8_t *)msg, (size_t)n);
	if (r < 0 && r != -ENOBUFS) { /* a stream we cannot feed any more */
		(void)grpc_call_fail(p->call, GRPC_STATUS_INTERNAL, strerror(-r));
		pending_free(p);
		return;
	}
	p->sent++;
	if (p->count > 0 && p->sent >= p->count) {
		(void)grpc_call_end(p->call);
		pending_free(p);
		return;
	}
	arm_ms(p->timer, p->interval_ms);
}

static void on_stream(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	char text[64] = "";
	struct pending *p;
	unsigned interval = 0;
	long count = 0;

	memcpy(text, req, len < sizeof(text) - 1 ? len : sizeof(text) - 1);
	if (sscanf(text, "%ld %u", &count, &interval) != 2 || count < 0) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "want \"<count> <ms>\"");
		return;
	}
	if (pending_new(userdata, call, on_stream_timer, &p) < 0) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->count = count;
	p->interval_ms = interval;
	arm_ms(p->timer, 0);
}

static void on_fail(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	_cleanup_free_ char *text = strndup((const char *)req, len);
	char *sp;
	long code;

	if (!text) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	code = strtol(text, &sp, 10);
	if (code <= 0 || code > _GRPC_STATUS_MAX) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad code");
		return;
	}
	(void)grpc_call_fail(call, (enum grpc_status)code, *sp ? sp + 1 : NULL);
}

static void on_big(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	_cleanup_free_ uint8_t *buf = NULL;
	char num[16] = "";
	size_t n;

	memcpy(num, req, len < sizeof(num) - 1 ? len : sizeof(num) - 1);
	n = strtoul(num, NULL, 10);
	buf = malloc(n ? n : 1);
	if (!buf) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	memset(buf, 'x', n);
	(void)grpc_call_reply(call, buf, n);
}

static void on_stats(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct echo *e = userdata;
	struct grpc_stats s;
	char out[2048];
	int n;

	grpc_server_get_stats(e->srv, &s);
	n = snprintf(out, sizeof(out),
		     "{\"conns_accepted\":%" PRIu64 ",\"conns_active\":%" PRIu64
		     ",\"conns_rejected\":%" PRIu64 ",\"conns_protocol_error\":%" PRIu64
		     ",\"conns_timed_out\":%" PRIu64 ",\"conns_evicted\":%" PRIu64
		     ",\"calls_started\":%" PRIu64
		     ",\"calls_cancelled\":%" PRIu64 ",\"calls_rejected\":%" PRIu64
		     ",\"calls_active\":%" PRIu64 ",\"messages_too_large\":%" PRIu64
		     ",\"replies_dropped\":%" PRIu64 ",\"cancels_seen\":%" PRIu64
		     ",\"notify_ok\":%" PRIu64 ",\"notify_failed\":%" PRIu64 ",\"by_code\":[",
		     s.conns_accepted, s.conns_active, s.conns_rejected, s.conns_protocol_error,
		     s.conns_timed_out, s.conns_evicted, s.calls_started, s.calls_cancelled, s.calls_rejected,
		     s.calls_active, s.messages_too_large, s.replies_dropped, e->cancels,
		     e->notify_ok, e->notify_failed);
	for (int i = 0; i <= _GRPC_STATUS_MAX; i++)
		n += snprintf(out + n, sizeof(out) - (size_t)n, "%s%" PRIu64, i ? "," : "",
			      e->by_code[i]);
	n += snprintf(out + n, sizeof(out) - (size_t)n, "]}");
	(void)grpc_call_reply(call, (const uint8_t *)out, (size_t)n);
}

static void on_observe(const char *path, enum grpc_status code, uint64_t duration_ns,
		       void *userdata)
{
	struct echo *e = userdata;

	if ((unsigned)code <= _GRPC_STATUS_MAX)
		e->by_code[code]++;
}

/* ---- stand-in DRA plugin -------------------------------------------------------------------- */

static void on_get_info(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct echo *e = userdata;
	char *versions[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth" };
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;

	info.type = "DRAPlugin";
	info.name = "dra.cpu";
	info.endpoint = (char *)e->socket;
	info.n_supported_versions = ARRAY_SIZE(versions);
	info.supported_versions = versions;
	(void)grpc_call_reply_pb(call, &info.base);
}

static void on_notify(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct echo *e = userdata;
	Pluginregistration__RegistrationStatusResponse resp =
		PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
	Pluginregistration__RegistrationStatus *st;

	st = pluginregistration__registration_status__unpack(NULL, len, req);
	if (!st) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad RegistrationStatus");
		return;
	}
	if (st->plugin_registered) {
		e->notify_ok++;
		log_info("registered", "ok=1");
	} else {
		e->notify_failed++;
		log_warn("registration_failed", "error=%s", log_quote(st->error));
	}
	pluginregistration__registration_status__free_unpacked(st, NULL);
	(void)grpc_call_reply_pb(call, &resp.base);
}

/* v1 and v1beta1 are wire-identical (wire-protocols.md 2.1): one
 * implementation on the v1 types serves both paths. */
static void on_prepare(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *rq;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse resp =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry *ents = NULL,
		**ep = NULL;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse *vals = NULL;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *devs = NULL, **dp = NULL;
	char **cdi = NULL;
	char *req_names[] = { "cpus" };
	size_t n;

	rq = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
											 req);
	if (!rq) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad request");
		return;
	}
	n = rq->n_claims;
	ents = calloc(n + 1, sizeof(*ents));
	ep = calloc(n + 1, sizeof(*ep));
	vals = calloc(n + 1, sizeof(*vals));
	devs = calloc(n + 1, sizeof(*devs));
	dp = calloc(n + 1, sizeof(*dp));
	cdi = calloc(n + 1, sizeof(*cdi));
	if (!ents || !ep || !vals || !devs || !dp || !cdi) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl = rq->claims[i];

		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
			&ents[i]);
		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&vals[i]);
		k8s__io__kubelet__pkg__apis__dra__v1__device__init(&devs[i]);
		ents[i].key = cl->uid;
		ents[i].value = &vals[i];
		ep[i] = &ents[i];
		if (strncmp(cl->name, "fail", 4) == 0) {
			vals[i].error = "refused by the stand-in plugin";
			continue;
		}
		if (asprintf(&cdi[i], "dra.k8s.io/cpu=claim-%s", cl->uid) < 0) {
			cdi[i] = NULL;
			(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
			goto out;
		}
		devs[i].pool_name = "node";
		devs[i].device_name = "cpudev000";
		devs[i].n_request_names = 1;
		devs[i].request_names = req_names;
		devs[i].n_cdi_device_ids = 1;
		devs[i].cdi_device_ids = &cdi[i];
		dp[i] = &devs[i];
		vals[i].n_devices = 1;
		vals[i].devices = &dp[i];
	}
	resp.n_claims = n;
	resp.claims = ep;
	(void)grpc_call_reply_pb(call, &resp.base);
out:
	for (size_t i = 0; cdi && i < n; i++)
		free(cdi[i]);
	free(cdi);
	free(dp);
	free(devs);
	free(vals);
	free(ep);
	free(ents);
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(rq, NULL);
}

static void on_unprepare(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest *rq;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse resp =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry *ents,
		**ep;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse *vals;
	size_t n;

	rq = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(
		NULL, len, req);
	if (!rq) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "bad request");
		return;
	}
	n = rq->n_claims;
	ents = calloc(n + 1, sizeof(*ents));
	ep = calloc(n + 1, sizeof(*ep));
	vals = calloc(n + 1, sizeof(*vals));
	if (!ents || !ep || !vals) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
	} else {
		for (size_t i = 0; i < n; i++) {
			k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
				&ents[i]);
			k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(
				&vals[i]);
			ents[i].key = rq->claims[i]->uid;
			ents[i].value = &vals[i];
			ep[i] = &ents[i];
		}
		resp.n_claims = n;
		resp.claims = ep;
		(void)grpc_call_reply_pb(call, &resp.base);
	}
	free(vals);
	free(ep);
	free(ents);
	k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(rq,
											      NULL);
}

static void on_health_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	V1alpha1__DeviceHealth dh[2], *dhp[2];
	V1alpha1__DeviceIdentifier id[2];
	char *names[] = { "cpudev000", "cpudev001" };
	int r;

	for (int i = 0; i < 2; i++) {
		v1alpha1__device_health__init(&dh[i]);
		v1alpha1__device_identifier__init(&id[i]);
		id[i].pool_name = "node";
		id[i].device_name = names[i];
		dh[i].device = &id[i];
		dh[i].health = V1ALPHA1__HEALTH_STATUS__HEALTHY;
		dh[i].last_updated_time = time(NULL);
		dh[i].health_check_timeout_seconds = 30;
		dhp[i] = &dh[i];
	}
	resp.n_devices = 2;
	resp.devices = dhp;
	r = grpc_call_send_pb(p->call, &resp.base);
	if (r < 0 && r != -ENOBUFS) {
		(void)grpc_call_fail(p->call, GRPC_STATUS_INTERNAL, strerror(-r));
		pending_free(p);
		return;
	}
	arm_ms(p->timer, p->interval_ms);
}

static void on_watch(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct echo *e = userdata;
	struct pending *p;

	if (pending_new(e, call, on_health_timer, &p) < 0) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->interval_ms = e->health_ms;
	p->health = true;
	arm_ms(p->timer, 0);
}

/* ---- main ----------------------------------------------------------------------------------- */

#define REG "/pluginregistration.Registration/"
#define DRA_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define DRA_V1B1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

static int add_methods(struct echo *e, struct grpc_server *srv, bool reg_only)
{
	static const struct {
		const char *path;
		grpc_handler_fn fn;
		bool reg;
	} table[] = {
		{ REG "GetInfo", on_get_info, true },
		{ REG "NotifyRegistrationStatus", on_notify, true },
		{ "/echo.Echo/Unary", on_unary, false },
		{ "/echo.Echo/Slow", on_slow, false },
		{ "/echo.Echo/Stream", on_stream, false },
		{ "/echo.Echo/Fail", on_fail, false },
		{ "/echo.Echo/Big", on_big, false },
		{ "/echo.Echo/Stats", on_stats, false },
		{ DRA_V1 "NodePrepareResources", on_prepare, false },
		{ DRA_V1 "NodeUnprepareResources", on_unprepare, false },
		{ DRA_V1B1 "NodePrepareResources", on_prepare, false },
		{ DRA_V1B1 "NodeUnprepareResources", on_unprepare, false },
		{ "/v1alpha1.DRAResourceHealth/NodeWatchResources", on_watch, false },
	};
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (reg_only && !table[i].reg)
			continue;
		r = grpc_server_add_method(srv, table[i].path, table[i].fn, e);
		if (r < 0)
			return r;
	}
	return 0;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)event_base_loopexit(arg, NULL);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: grpc_echo --socket PATH [--reg-socket PATH] [--mode OCTAL]\n"
		   "       [--handshake-ms N] [--first-request-ms N] [--idle-ms N] [--write-ms N]\n"
		   "       [--max-conns N]"
		   " [--max-message N] [--health-ms N] [-v]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "reg-socket", required_argument, NULL, 'r' },
		{ "mode", required_argument, NULL, 'm' },
		{ "handshake-ms", required_argument, NULL, 'H' },
		{ "first-request-ms", required_argument, NULL, 'F' },
		{ "idle-ms", required_argument, NULL, 'I' },
		{ "write-ms", required_argument, NULL, 'W' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "max-message", required_argument, NULL, 'M' },
		{ "health-ms", required_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, '?' },
		{}
	};
	struct echo e = { .health_ms = 1000 };
	struct grpc_limits lim = {};
	const char *reg_socket = NULL;
	struct event *sigs[2] = {};
	mode_t mode = 0600;
	int c, r, rc = 1;

	while ((c = getopt_long(argc, argv, "v", opts, NULL)) >= 0) {
		switch (c) {
		case 's': e.socket = optarg; break;
		case 'r': reg_socket = optarg; break;
		case 'm': mode = (mode_t)strtoul(optarg, NULL, 8); break;
		case 'H': lim.handshake_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'F': lim.first_request_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'I': lim.idle_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'W': lim.write_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'C': lim.max_connections = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'M': lim.max_message = strtoul(optarg, NULL, 10); break;
		case 'h': e.health_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'v': log_set_level(LOG_DEBUG); break;
		default: usage(stderr); return 2;
		}
	}
	if (!e.socket) {
		usage(stderr);
		return 2;
	}
	(void)signal(SIGPIPE, SIG_IGN);

	e.base = event_base_new();
	if (!e.base)
		goto out;
	r = grpc_server_new(e.base, &lim, &e.srv);
	if (r < 0) {
		log_error_errno(r, "server_new_failed", "%s", "");
		goto out;
	}
	grpc_server_set_observer(e.srv, on_observe, &e);
	r = add_methods(&e, e.srv, false);
	if (r < 0) {
		log_error_errno(r, "add_method_failed", "%s", "");
		goto out;
	}
	r = grpc_server_listen_unix(e.srv, e.socket, mode);
	if (r < 0) {
		log_error_errno(r, "listen_failed", "socket=%s len=%zu", log_quote(e.socket),
				strlen(e.socket));
		goto out;
	}
	if (reg_socket) {
		r = grpc_server_new(e.base, &lim, &e.reg);
		if (r >= 0)
			r = add_methods(&e, e.reg, true);
		if (r >= 0)
			r = grpc_server_listen_unix(e.reg, reg_socket, mode);
		if (r < 0) {
			log_error_errno(r, "listen_failed", "socket=%s", log_quote(reg_socket));
			goto out;
		}
	}
	sigs[0] = evsignal_new(e.base, SIGTERM, on_signal, e.base);
	sigs[1] = evsignal_new(e.base, SIGINT, on_signal, e.base);
	if (!sigs[0] || !sigs[1] || evsignal_add(sigs[0], NULL) < 0 ||
	    evsignal_add(sigs[1], NULL) < 0)
		goto out;
	printf("ready\n");
	fflush(stdout);
	if (event_base_dispatch(e.base) < 0)
		goto out;
	log_info("exiting", "%s", "");
	rc = 0;
out:
	/* the registration socket goes first, as for the real driver */
	grpc_server_free(e.reg);
	grpc_server_free(e.srv);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		if (sigs[i])
			event_free(sigs[i]);
	if (e.base)
		event_base_free(e.base);
	return rc;
}
