/* grpc: framing helpers, listener rules, and the server's behaviour seen by a
 * real HTTP/2 client (an nghttp2 client session) over a memory connection,
 * so every exchange is deterministic and needs no socket or loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "kubelet/grpc.h"
#include "kubelet_dra_health_v1alpha1.pb-c.h"
#include "kubelet_dra_v1.pb-c.h"
#include "kubelet_dra_v1beta1.pb-c.h"
#include "kubelet_pluginregistration.pb-c.h"

/* ---- framing helpers ------------------------------------------------------------------------ */

static void test_prefix_parse_reads_flag_and_big_endian_length(void **state)
{
	const uint8_t p[] = { 0, 0x01, 0x02, 0x03, 0x04 }, q[] = { 1, 0, 0, 0, 0 };
	bool comp = true;
	uint32_t len = 0;

	assert_int_equal(grpc_prefix_parse(p, &comp, &len), 0);
	assert_false(comp);
	assert_int_equal(len, 0x01020304);
	assert_int_equal(grpc_prefix_parse(q, &comp, &len), 0);
	assert_true(comp);
	assert_int_equal(len, 0);
}

static void test_prefix_parse_rejects_flag_above_one(void **state)
{
	const uint8_t p[] = { 2, 0, 0, 0, 1 };
	bool comp = false;
	uint32_t len = 7;

	assert_int_equal(grpc_prefix_parse(p, &comp, &len), -EPROTO);
	assert_int_equal(len, 7); /* untouched on failure */
}

static void test_prefix_write_is_uncompressed_big_endian(void **state)
{
	uint8_t p[GRPC_PREFIX_LEN];
	const uint8_t want[] = { 0, 0xde, 0xad, 0xbe, 0xef };

	grpc_prefix_write(p, 0xdeadbeef);
	assert_memory_equal(p, want, sizeof(want));
}

static void test_percent_encode_escapes_percent_and_non_printable(void **state)
{
	char buf[64];

	assert_int_equal(grpc_percent_encode("a b%c\n\xc3\xa9~", buf, sizeof(buf)), 17);
	assert_string_equal(buf, "a b%25c%0A%C3%A9~");
	assert_int_equal(grpc_percent_encode("", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_percent_encode_never_writes_half_an_escape(void **state)
{
	char buf[5];

	/* "ab%0A" needs 5 + NUL: the escape does not fit, nothing of it is written */
	assert_int_equal(grpc_percent_encode("ab\ncd", buf, sizeof(buf)), 7);
	assert_string_equal(buf, "ab");
	assert_int_equal(grpc_percent_encode("abcdef", NULL, 0), 6);
}

static void test_path_is_valid_accepts_service_and_method(void **state)
{
	const char *ok[] = {
		"/a/b",
		"/pluginregistration.Registration/GetInfo",
		"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
	};

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		assert_true(grpc_path_is_valid(ok[i], strlen(ok[i])));
}

static void test_path_is_valid_rejects_malformed(void **state)
{
	char longp[GRPC_PATH_MAX + 8];
	const char *bad[] = { "", "/", "//", "/a", "/a/", "//b", "a/b", "/a/b/c", "/a b/c",
			      "/a/b\x7f", "/a/\tb" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_false(grpc_path_is_valid(bad[i], strlen(bad[i])));
	assert_false(grpc_path_is_valid("/a/b\0c", 6));
	memset(longp, 'x', sizeof(longp));
	longp[0] = '/';
	longp[10] = '/';
	assert_false(grpc_path_is_valid(longp, GRPC_PATH_MAX));
	assert_true(grpc_path_is_valid(longp, GRPC_PATH_MAX - 1));
}

static void test_timeout_parse_units(void **state)
{
	uint64_t ns = 0;

	assert_int_equal(grpc_timeout_parse("44999951u", 9, &ns), 0);
	assert_true(ns == 44999951000ULL);
	assert_int_equal(grpc_timeout_parse("3S", 2, &ns), 0);
	assert_true(ns == 3000000000ULL);
	assert_int_equal(grpc_timeout_parse("2H", 2, &ns), 0);
	assert_true(ns == 7200000000000ULL);
	assert_int_equal(grpc_timeout_parse("5n", 2, &ns), 0);
	assert_true(ns == 5);
	assert_int_equal(grpc_timeout_parse("99999999H", 9, &ns), 0);
	assert_true(ns == UINT64_MAX); /* saturates */
}

static void test_timeout_parse_rejects_malformed(void **state)
{
	const char *bad[] = { "", "S", "1", "1x", "-1S", "123456789S", "1 S" };
	uint64_t ns = 42;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(grpc_timeout_parse(bad[i], strlen(bad[i]), &ns), -EINVAL);
	assert_true(ns == 42);
}

static void test_status_name(void **state)
{
	assert_string_equal(grpc_status_name(GRPC_STATUS_OK), "OK");
	assert_string_equal(grpc_status_name(GRPC_STATUS_UNIMPLEMENTED), "UNIMPLEMENTED");
	assert_string_equal(grpc_status_name(GRPC_STATUS_UNAUTHENTICATED), "UNAUTHENTICATED");
	assert_string_equal(grpc_status_name((enum grpc_status)17), "UNKNOWN_CODE");
}

/* ---- server setup --------------------------------------------------------------------------- */

struct fixture {
	struct event_base *base;
	struct grpc_server *srv;
	char dir[64];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct grpc_limits lim;

	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	grpc_limits_default(&lim);
	lim.max_message = 1000;
	lim.max_conn_queued = 4096;
	assert_int_equal(grpc_server_new(f->base, &lim, &f->srv), 0);
	strcpy(f->dir, "/tmp/grpc_test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	grpc_server_free(f->srv);
	event_base_free(f->base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void test_add_method_rejects_bad_path_and_duplicates(void **state);

/* ---- listener ------------------------------------------------------------------------------- */

static void test_listen_unix_rejects_path_longer_than_sun_path(void **state)
{
	struct fixture *f = *state;
	char p[200];

	memset(p, 'a', sizeof(p));
	p[0] = '/';
	p[108] = 0; /* 108 bytes + NUL does not fit sun_path[108] */
	assert_int_equal(grpc_server_listen_unix(f->srv, p, 0600), -ENAMETOOLONG);
}

static void test_listen_unix_creates_socket_with_exact_mode(void **state)
{
	struct fixture *f = *state;
	char p[128];
	struct stat st;
	mode_t old = umask(077); /* a umask that would strip group bits */

	snprintf(p, sizeof(p), "%s/a.sock", f->dir);
	assert_int_equal(grpc_server_listen_unix(f->srv, p, 0660), 0);
	assert_int_equal(umask(old), 077); /* ours again afterwards */
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
}

static void test_listen_unix_replaces_stale_socket(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/stale.sock", f->dir);
	strcpy(sa.sun_path, p);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* the file stays: a stale socket */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	assert_int_equal(grpc_server_listen_unix(f->srv, p, 0600), 0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

static void test_listen_unix_leaves_other_files_alone(void **state)
{
	struct fixture *f = *state;
	char p[128];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/regular", f->dir);
	fp = fopen(p, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(grpc_server_listen_unix(f->srv, p, 0600), -EEXIST);
	assert_int_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/nodir/x.sock", f->dir);
	assert_int_equal(grpc_server_listen_unix(f->srv, p, 0600), -ENOENT);
}

static void test_server_free_unlinks_only_its_own_socket(void **state)
{
	struct fixture *f = *state;
	struct grpc_server *a, *b;
	char p[128], q[128];

	snprintf(p, sizeof(p), "%s/mine.sock", f->dir);
	snprintf(q, sizeof(q), "%s/taken.sock", f->dir);
	assert_int_equal(grpc_server_new(f->base, NULL, &a), 0);
	assert_int_equal(grpc_server_new(f->base, NULL, &b), 0);
	assert_int_equal(grpc_server_listen_unix(a, p, 0600), 0);
	assert_int_equal(grpc_server_listen_unix(a, q, 0600), 0);
	assert_int_equal(grpc_server_listen_unix(b, q, 0600), 0); /* a successor took q */
	grpc_server_free(a);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(access(q, F_OK), 0);
	grpc_server_free(b);
	assert_int_equal(access(q, F_OK), -1);
}

/* ---- a client session over a memory connection ---------------------------------------------- */

#define MAX_STREAMS 8

struct body {
	const uint8_t *data;
	size_t len, off;
	size_t chunk; /* max bytes per DATA frame; 0 = any */
	bool hold;    /* do not end the stream after the data */
};

struct resp {
	int32_t id;
	int header_blocks;
	int http_status;
	int grpc_status; /* -1: none seen */
	char grpc_message[1024];
	uint8_t data[8192];
	size_t data_len;
	bool closed;
	uint32_t close_code;
	struct body body;
};

struct client {
	nghttp2_session *s;
	struct grpc_conn *conn;
	struct resp r[MAX_STREAMS];
	int n;
	bool conn_over;
	bool got_goaway;
	uint32_t goaway_code;
};

static struct resp *client_resp(struct client *cl, int32_t id)
{
	for (int i = 0; i < cl->n; i++)
		if (cl->r[i].id == id)
			return &cl->r[i];
	return NULL;
}

static int cl_on_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
			size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct resp *r = client_resp(ud, fr->hd.stream_id);

	if (!r)
		return 0;
	if (nl == 7 && !memcmp(name, ":status", 7))
		r->http_status = atoi((const char *)value);
	else if (nl == 11 && !memcmp(name, "grpc-status", 11))
		r->grpc_status = atoi((const char *)value);
	else if (nl == 12 && !memcmp(name, "grpc-message", 12))
		snprintf(r->grpc_message, sizeof(r->grpc_message), "%.*s", (int)vl, value);
	return 0;
}

static int cl_on_frame_recv(nghttp2_session *s, const nghttp2_frame *fr, void *ud)
{
	struct client *cl = ud;
	struct resp *r;

	if (fr->hd.type == NGHTTP2_GOAWAY) {
		cl->got_goaway = true;
		cl->goaway_code = fr->goaway.error_code;
	}
	if (fr->hd.type == NGHTTP2_HEADERS && (r = client_resp(cl, fr->hd.stream_id)))
		r->header_blocks++;
	return 0;
}

static int cl_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
		      size_t len, void *ud)
{
	struct resp *r = client_resp(ud, id);

	assert_non_null(r);
	assert_true(r->data_len + len <= sizeof(r->data));
	memcpy(r->data + r->data_len, data, len);
	r->data_len += len;
	return 0;
}

static int cl_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct resp *r = client_resp(ud, id);

	if (r) {
		r->closed = true;
		r->close_code = code;
	}
	return 0;
}

static ssize_t cl_body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			    uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct body *b = src->ptr;
	size_t n = b->len - b->off;

	if (b->chunk && n > b->chunk)
		n = b->chunk;
	if (n > length)
		n = length;
	memcpy(buf, b->data + b->off, n);
	b->off += n;
	if (b->off == b->len) {
		if (b->hold && n == 0)
			return NGHTTP2_ERR_DEFERRED;
		if (!b->hold)
			*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

static void client_init(struct client *cl, struct grpc_server *srv, uint32_t window)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window } };

	memset(cl, 0, sizeof(*cl));
	assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
	nghttp2_session_callbacks_set_on_header_callback(cbs, cl_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, cl_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cl_on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cl_on_close);
	assert_int_equal(nghttp2_session_client_new(&cl->s, cbs, cl), 0);
	nghttp2_session_callbacks_del(cbs);
	assert_int_equal(nghttp2_submit_settings(cl->s, NGHTTP2_FLAG_NONE, iv, 1), 0);
	assert_int_equal(grpc_conn_new_memory(srv, &cl->conn), 0);
}

static void client_done(struct client *cl)
{
	nghttp2_session_del(cl->s);
	grpc_conn_free(cl->conn);
}

/* Moves bytes both ways until neither side has anything to say. */
static void client_pump(struct client *cl)
{
	struct evbuffer *out = evbuffer_new();
	bool moved;

	assert_non_null(out);
	do {
		const uint8_t *data;
		ssize_t n;

		moved = false;
		while ((n = nghttp2_session_mem_send(cl->s, &data)) > 0) {
			moved = true;
			if (grpc_conn_feed(cl->conn, data, (size_t)n) < 0)
				cl->conn_over = true;
		}
		assert_true(n == 0);
		if (grpc_conn_take_output(cl->conn, out) > 0) {
			size_t len = evbuffer_get_length(out);
			uint8_t *p = evbuffer_pullup(out, (ev_ssize_t)len);

			moved = true;
			assert_int_equal(nghttp2_session_mem_recv(cl->s, p, len), (ssize_t)len);
			evbuffer_drain(out, len);
		}
	} while (moved && !cl->conn_over);
	evbuffer_free(out);
}

/* Starts a request; extra: NULL-terminated name, value pairs (replacing the
 * defaults of the same name). body NULL: HEADERS with END_STREAM. */
static struct resp *client_call(struct client *cl, const char *path, const struct body *body,
				...)
{
	const char *names[16] = { ":method", ":scheme", ":path", ":authority", "content-type",
				  "te" };
	const char *values[16] = { "POST", "http", path, "localhost", "application/grpc",
				   "trailers" };
	nghttp2_nv nva[16];
	size_t n = 6;
	struct resp *r;
	nghttp2_data_provider prd = { .read_callback = cl_body_read };
	const char *k;
	va_list ap;
	int32_t id;

	va_start(ap, body);
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		size_t i;

		for (i = 0; i < n && strcmp(names[i], k); i++)
			;
		names[i] = k;
		values[i] = v;
		if (i == n)
			n++;
	}
	va_end(ap);
	for (size_t i = 0; i < n; i++)
		nva[i] = (nghttp2_nv){ (uint8_t *)names[i], (uint8_t *)values[i], strlen(names[i]),
				       strlen(values[i]), NGHTTP2_NV_FLAG_NONE };
	assert_true(cl->n < MAX_STREAMS);
	r = &cl->r[cl->n++];
	memset(r, 0, sizeof(*r));
	r->grpc_status = -1;
	if (body) {
		r->body = *body;
		prd.source.ptr = &r->body;
	}
	id = nghttp2_submit_request(cl->s, NULL, nva, n, body ? &prd : NULL, NULL);
	assert_true(id > 0);
	r->id = id;
	client_pump(cl);
	return r;
}

/* Body bytes: one framed message. */
static struct body msg_body(uint8_t *buf, size_t size, const char *payload)
{
	size_t len = strlen(payload);

	assert_true(len + GRPC_PREFIX_LEN <= size);
	grpc_prefix_write(buf, (uint32_t)len);
	memcpy(buf + GRPC_PREFIX_LEN, payload, len);
	return (struct body){ .data = buf, .len = len + GRPC_PREFIX_LEN };
}

/* ---- handlers used by the tests ------------------------------------------------------------- */

static int handled;
static struct grpc_call *held[4];
static int n_held;
static int cancels;

static void h_echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handled++;
	assert_int_equal(grpc_call_reply(call, req, len), 0);
}

/* ud: NULL = forget the handle (it ends when we return), else complete it. */
static void on_cancel(struct grpc_call *call, void *ud)
{
	cancels++;
	assert_true(grpc_call_is_cancelled(call));
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"x", 1), -ECANCELED);
	for (int i = 0; i < n_held; i++)
		if (held[i] == call)
			held[i] = NULL;
	if (ud)
		assert_int_equal(grpc_call_fail(call, GRPC_STATUS_CANCELLED, "bye"), -ECANCELED);
}

/* ud: NULL = no cancel callback; else the on_cancel mode + 1. */
static void h_hold(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handled++;
	assert_true(n_held < (int)ARRAY_SIZE(held));
	held[n_held++] = call;
	if (ud)
		grpc_call_on_cancel(call, on_cancel, (void *)((uintptr_t)ud - 1));
}

static void h_stream2(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handled++;
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"one", 3), 0);
	assert_int_equal(grpc_call_send(call, (const uint8_t *)"two", 3), 0);
	assert_int_equal(grpc_call_end(call), 0);
}

static void h_fail(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handled++;
	assert_int_equal(grpc_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "50% done\nnow"), 0);
}

static void h_too_big(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	static uint8_t big[2000];

	handled++;
	assert_int_equal(grpc_call_reply(call, big, sizeof(big)), -E2BIG);
}

static void h_info(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	char *versions[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin" };
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;

	handled++;
	assert_int_equal(len, 0);
	info.type = "DRAPlugin";
	info.name = "dra.cpu";
	info.endpoint = "/var/lib/kubelet/plugins/dra.cpu/dra.sock";
	info.n_supported_versions = 2;
	info.supported_versions = versions;
	assert_int_equal(grpc_call_reply_pb(call, &info.base), 0);
}

struct observed {
	char path[GRPC_PATH_MAX];
	enum grpc_status code;
	int n;
};

static void observe(const char *path, enum grpc_status code, uint64_t ns, void *ud)
{
	struct observed *o = ud;

	snprintf(o->path, sizeof(o->path), "%s", path);
	o->code = code;
	o->n++;
}

static int setup_methods(void **state)
{
	struct fixture *f;

	setup(state);
	f = *state;
	handled = n_held = cancels = 0;
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/Echo", h_echo, NULL), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/Hold", h_hold, NULL), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/HoldCb", h_hold, (void *)1), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/HoldCbDone", h_hold, (void *)2), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/Stream", h_stream2, NULL), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/Fail", h_fail, NULL), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/TooBig", h_too_big, NULL), 0);
	assert_int_equal(grpc_server_add_method(f->srv, "/pluginregistration.Registration/GetInfo",
						h_info, NULL),
			 0);
	return 0;
}

static void test_add_method_rejects_bad_path_and_duplicates(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/Echo", h_echo, NULL), -EEXIST);
	assert_int_equal(grpc_server_add_method(f->srv, "t.S/Echo", h_echo, NULL), -EINVAL);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/", h_echo, NULL), -EINVAL);
	assert_int_equal(grpc_server_add_method(f->srv, "/t.S/X", NULL, NULL), -EINVAL);
}

/* ---- protocol behaviour --------------------------------------------------------------------- */

static void test_server_sends_settings_first(void **state)
{
	struct fixture *f = *state;
	struct grpc_conn *c;
	struct evbuffer *out = evbuffer_new();
	uint8_t *p;

	assert_int_equal(grpc_conn_new_memory(f->srv, &c), 0);
	assert_true(grpc_conn_take_output(c, out) >= 9);
	p = evbuffer_pullup(out, 9);
	assert_int_equal(p[3], NGHTTP2_SETTINGS);
	assert_int_equal(p[4], 0); /* not an ACK */
	assert_int_equal(p[5] | p[6] | p[7] | p[8], 0);
	evbuffer_free(out);
	grpc_conn_free(c);
}

static void test_unary_echo_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[64];
	struct body b = msg_body(buf, sizeof(buf), "hello");
	struct resp *r;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Echo", &b, NULL);
	assert_int_equal(handled, 1);
	assert_true(r->closed);
	assert_int_equal(r->close_code, NGHTTP2_NO_ERROR);
	assert_int_equal(r->http_status, 200);
	assert_int_equal(r->grpc_status, 0);
	assert_int_equal(r->header_blocks, 2); /* headers, trailers */
	assert_int_equal(r->data_len, b.len);
	assert_memory_equal(r->data, buf, b.len);
	/* the connection serves the next call too */
	r = client_call(&cl, "/t.S/Echo", &b, NULL);
	assert_int_equal(r->grpc_status, 0);
	assert_int_equal(handled, 2);
	client_done(&cl);
}

static void test_empty_message_is_a_message(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[8];
	struct body b = msg_body(buf, sizeof(buf), "");
	struct resp *r;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/pluginregistration.Registration/GetInfo", &b, NULL);
	assert_int_equal(r->grpc_status, 0);
	assert_true(r->data_len > GRPC_PREFIX_LEN);
	{
		Pluginregistration__PluginInfo *info = pluginregistration__plugin_info__unpack(
			NULL, r->data_len - GRPC_PREFIX_LEN, r->data + GRPC_PREFIX_LEN);

		assert_non_null(info);
		assert_string_equal(info->type, "DRAPlugin");
		assert_string_equal(info->name, "dra.cpu");
		assert_int_equal(info->n_supported_versions, 2);
		assert_string_equal(info->supported_versions[0], "v1.DRAPlugin");
		pluginregistration__plugin_info__free_unpacked(info, NULL);
	}
	client_done(&cl);
}

/* Requests the server answers itself, and their well-formed neighbours that
 * reach the handler: one row each, on one connection. */
enum body_kind { BODY_ONE, BODY_TWO, BODY_NONE, BODY_CUT, BODY_FLAG1, BODY_FLAG7 };

static const struct request_case {
	const char *what, *path;
	enum body_kind body;
	const char *header, *value; /* one extra or replaced header, or NULL */
	int http_status;
	int grpc_status;
	const char *grpc_message; /* NULL: not checked */
	bool trailers_only;
	bool handled;
} request_cases[] = {
	{ "unknown method", "/t.S/Nope", BODY_ONE, NULL, NULL, 200, GRPC_STATUS_UNIMPLEMENTED,
	  "unknown method Nope for service t.S", true, false },
	{ "unknown service", "/other.Svc/Nope", BODY_ONE, NULL, NULL, 200,
	  GRPC_STATUS_UNIMPLEMENTED, "unknown service other.Svc", true, false },
	{ "malformed path", "/not-a-path", BODY_ONE, NULL, NULL, 200, GRPC_STATUS_UNIMPLEMENTED,
	  "malformed method name", true, false },
	{ "compressed flag", "/t.S/Echo", BODY_FLAG1, NULL, NULL, 200, GRPC_STATUS_INTERNAL, NULL,
	  true, false },
	{ "flag above one", "/t.S/Echo", BODY_FLAG7, NULL, NULL, 200, GRPC_STATUS_INTERNAL, NULL,
	  true, false },
	{ "gzip encoding", "/t.S/Echo", BODY_ONE, "grpc-encoding", "gzip", 200,
	  GRPC_STATUS_UNIMPLEMENTED, NULL, true, false },
	{ "identity encoding", "/t.S/Echo", BODY_ONE, "grpc-encoding", "identity", 200,
	  GRPC_STATUS_OK, NULL, false, true },
	{ "two messages", "/t.S/Echo", BODY_TWO, NULL, NULL, 200, GRPC_STATUS_INTERNAL,
	  "more than one request message", true, false },
	{ "no message", "/t.S/Echo", BODY_NONE, NULL, NULL, 200, GRPC_STATUS_INTERNAL,
	  "missing request message", true, false },
	{ "truncated message", "/t.S/Echo", BODY_CUT, NULL, NULL, 200, GRPC_STATUS_INTERNAL,
	  "truncated request message", true, false },
	{ "GET", "/t.S/Echo", BODY_ONE, ":method", "GET", 405, GRPC_STATUS_UNIMPLEMENTED,
	  "only POST is allowed", true, false },
	{ "JSON content type", "/t.S/Echo", BODY_ONE, "content-type", "application/json", 415,
	  GRPC_STATUS_INTERNAL, "invalid gRPC request content-type", true, false },
	{ "grpc+proto content type", "/t.S/Echo", BODY_ONE, "content-type",
	  "application/grpc+proto", 200, GRPC_STATUS_OK, NULL, false, true },
};

static void test_requests_get_the_right_answer(void **state)
{
	struct fixture *f = *state;
	struct client cl;

	assert_true(ARRAY_SIZE(request_cases) > 0);
	client_init(&cl, f->srv, 65535);
	for (size_t i = 0; i < ARRAY_SIZE(request_cases); i++) {
		const struct request_case *t = &request_cases[i];
		uint8_t buf[32];
		struct body b = msg_body(buf, sizeof(buf), "ab"), *bp = &b;
		int before = handled;
		struct resp *r;

		switch (t->body) {
		case BODY_TWO:
			memcpy(buf + b.len, buf, b.len);
			b.len *= 2;
			break;
		case BODY_NONE:
			bp = NULL;
			break;
		case BODY_CUT:
			b.len = 4;
			break;
		case BODY_FLAG1:
		case BODY_FLAG7:
			buf[0] = t->body == BODY_FLAG1 ? 1 : 7;
			break;
		default:
			break;
		}
		if (cl.n == MAX_STREAMS) { /* a fresh connection every MAX_STREAMS rows */
			client_done(&cl);
			client_init(&cl, f->srv, 65535);
		}
		r = t->header ? client_call(&cl, t->path, bp, t->header, t->value, NULL)
			      : client_call(&cl, t->path, bp, NULL);
		if (r->http_status != t->http_status || r->grpc_status != t->grpc_status ||
		    (t->grpc_message && strcmp(r->grpc_message, t->grpc_message) != 0) ||
		    (t->trailers_only && r->header_blocks != 1) ||
		    handled - before != (t->handled ? 1 : 0))
			fail_msg("%s: http %d grpc-status %d \"%s\" header blocks %d handled %d",
				 t->what, r->http_status, r->grpc_status, r->grpc_message,
				 r->header_blocks, handled - before);
		if (t->trailers_only)
			assert_int_equal(r->data_len, 0);
	}
	client_done(&cl);
}

static void test_message_over_limit_is_refused_at_its_prefix(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t pfx[GRPC_PREFIX_LEN];
	struct body b = { .data = pfx, .len = sizeof(pfx), .hold = true };
	struct resp *r;
	struct grpc_stats st;

	grpc_prefix_write(pfx, 5 << 20); /* announced, never sent */
	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Echo", &b, NULL);
	assert_int_equal(r->grpc_status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_string_equal(r->grpc_message, "received message larger than max (5242880 vs. 1000)");
	/* our half closed first: the client half is reset, not left waiting */
	assert_true(r->closed);
	assert_int_equal(r->close_code, NGHTTP2_NO_ERROR);
	assert_int_equal(handled, 0);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.messages_too_large == 1 && st.calls_rejected == 1);
	client_done(&cl);
}

static void test_message_reassembled_from_one_byte_frames(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[64];
	struct body b = msg_body(buf, sizeof(buf), "split across frames");
	struct resp *r;

	b.chunk = 1;
	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Echo", &b, NULL);
	assert_int_equal(r->grpc_status, 0);
	assert_int_equal(r->data_len, b.len);
	assert_memory_equal(r->data, buf, b.len);
	client_done(&cl);
}

static void test_async_reply_after_handler_returns(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");
	struct resp *r;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Hold", &b, "grpc-timeout", "5S", NULL);
	assert_int_equal(n_held, 1);
	assert_false(r->closed);
	assert_string_equal(grpc_call_path(held[0]), "/t.S/Hold");
	assert_true(grpc_call_deadline_left_ms(held[0]) > 4000);
	assert_true(grpc_call_deadline_left_ms(held[0]) <= 5000);
	assert_int_equal(grpc_call_reply(held[0], (const uint8_t *)"late", 4), 0);
	client_pump(&cl);
	assert_true(r->closed);
	assert_int_equal(r->grpc_status, 0);
	assert_int_equal(r->data_len, GRPC_PREFIX_LEN + 4);
	assert_memory_equal(r->data + GRPC_PREFIX_LEN, "late", 4);
	assert_int_equal(cancels, 0);
	client_done(&cl);
}

static void test_client_reset_cancels_held_call(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");
	struct resp *r;
	struct grpc_stats st;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Hold", &b, NULL);
	assert_int_equal(grpc_call_deadline_left_ms(held[0]), -1);
	assert_int_equal(nghttp2_submit_rst_stream(cl.s, NGHTTP2_FLAG_NONE, r->id, NGHTTP2_CANCEL),
			 0);
	client_pump(&cl);
	assert_int_equal(cancels, 0); /* none registered: the handle is still ours */
	assert_true(grpc_call_is_cancelled(held[0]));
	assert_int_equal(grpc_call_send(held[0], (const uint8_t *)"x", 1), -ECANCELED);
	assert_int_equal(grpc_call_fail(held[0], GRPC_STATUS_INTERNAL, "too late"), -ECANCELED);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.calls_cancelled == 1 && st.calls_active == 0);
	client_done(&cl);
}

static void test_cancel_callback_ends_the_handle(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");
	struct resp *r;
	struct grpc_stats st;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/HoldCb", &b, NULL);
	b.off = 0;
	(void)client_call(&cl, "/t.S/HoldCbDone", &b, NULL);
	assert_int_equal(n_held, 2);
	assert_int_equal(nghttp2_submit_rst_stream(cl.s, NGHTTP2_FLAG_NONE, r->id, NGHTTP2_CANCEL),
			 0);
	client_pump(&cl);
	assert_int_equal(cancels, 1);
	assert_null(held[0]); /* forgotten in the callback, freed after it: no leak */
	client_done(&cl);     /* the second one is cancelled and completed inside */
	assert_int_equal(cancels, 2);
	assert_null(held[1]);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.calls_cancelled == 2 && st.calls_active == 0);
}

static void test_conn_free_cancels_held_call(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");

	client_init(&cl, f->srv, 65535);
	(void)client_call(&cl, "/t.S/Hold", &b, NULL);
	client_done(&cl);
	assert_true(grpc_call_is_cancelled(held[0]));
	assert_int_equal(grpc_call_reply(held[0], (const uint8_t *)"x", 1), -ECANCELED);
}

static void test_server_free_cancels_held_call(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");

	client_init(&cl, f->srv, 65535);
	(void)client_call(&cl, "/t.S/Hold", &b, NULL);
	b.off = 0;
	(void)client_call(&cl, "/t.S/HoldCb", &b, NULL);
	nghttp2_session_del(cl.s); /* the server frees the memory connection */
	f->srv = grpc_server_free(f->srv);
	assert_int_equal(cancels, 1);
	assert_null(held[1]);
	assert_int_equal(grpc_call_end(held[0]), -ECANCELED);
}

static void test_streaming_sends_messages_then_status(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "");
	const uint8_t want[] = { 0, 0, 0, 0, 3, 'o', 'n', 'e', 0, 0, 0, 0, 3, 't', 'w', 'o' };
	struct resp *r;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Stream", &b, NULL);
	assert_int_equal(r->grpc_status, 0);
	assert_int_equal(r->header_blocks, 2);
	assert_int_equal(r->data_len, sizeof(want));
	assert_memory_equal(r->data, want, sizeof(want));
	client_done(&cl);
}

static void test_fail_message_is_percent_encoded(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "");
	struct observed o = {};
	struct resp *r;

	grpc_server_set_observer(f->srv, observe, &o);
	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/Fail", &b, NULL);
	assert_int_equal(r->header_blocks, 1); /* trailers-only */
	assert_int_equal(r->grpc_status, GRPC_STATUS_FAILED_PRECONDITION);
	assert_string_equal(r->grpc_message, "50%25 done%0Anow");
	assert_int_equal(o.n, 1);
	assert_string_equal(o.path, "/t.S/Fail");
	assert_int_equal(o.code, GRPC_STATUS_FAILED_PRECONDITION);
	b.off = 0;
	(void)client_call(&cl, "/t.S/Missing", &b, NULL);
	assert_int_equal(o.n, 2);
	assert_string_equal(o.path, "unknown"); /* bounded label values */
	client_done(&cl);
}

static void test_reply_over_max_message_fails_the_call(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "");
	struct resp *r;

	client_init(&cl, f->srv, 65535);
	r = client_call(&cl, "/t.S/TooBig", &b, NULL);
	assert_int_equal(handled, 1);
	assert_int_equal(r->grpc_status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	client_done(&cl);
}

static void test_send_refuses_when_client_does_not_read(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16], chunk[900];
	struct body b = msg_body(buf, sizeof(buf), "");
	struct resp *r;
	struct grpc_stats st;
	int r1, sent = 0;

	memset(chunk, 'z', sizeof(chunk));
	client_init(&cl, f->srv, 0); /* stream window 0: nothing can leave */
	r = client_call(&cl, "/t.S/Hold", &b, NULL);
	while ((r1 = grpc_call_send(held[0], chunk, sizeof(chunk))) == 0)
		sent++;
	assert_int_equal(r1, -ENOBUFS);
	assert_int_equal(sent, 4096 / (sizeof(chunk) + GRPC_PREFIX_LEN));
	assert_int_equal(r->data_len, 0);
	assert_int_equal(grpc_call_end(held[0]), 0);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.replies_dropped == 1);
	client_done(&cl);
}

/* A watch's client opens no window: the first message waits in the output,
 * each later one replaces the one behind it, and once the client reads it
 * gets the first and the latest, nothing in between. */
static void test_send_latest_gives_a_slow_client_the_latest_only(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "");
	static const uint8_t want[] = { 0, 0, 0, 0, 3, 'o', 'n', 'e', 0, 0, 0, 0, 4, 'f', 'o', 'u', 'r' };
	struct resp *r;
	struct grpc_stats st;

	assert_int_equal(grpc_server_add_watch_method(f->srv, "/t.S/Watch", h_hold, NULL), 0);
	client_init(&cl, f->srv, 0); /* stream window 0: nothing can leave */
	r = client_call(&cl, "/t.S/Watch", &b, NULL);
	assert_int_equal(n_held, 1);
	assert_int_equal(grpc_call_send_latest(held[0], (const uint8_t *)"one", 3), 0);
	assert_int_equal(grpc_call_send_latest(held[0], (const uint8_t *)"two", 3), 0);
	assert_int_equal(grpc_call_send_latest(held[0], (const uint8_t *)"three", 5), 1);
	assert_int_equal(grpc_call_send_latest(held[0], (const uint8_t *)"four", 4), 1);
	client_pump(&cl);
	assert_int_equal(r->data_len, 0);
	grpc_server_get_stats(f->srv, &st);
	assert_int_equal(st.messages_coalesced, 2);
	/* the client reads: a window for the stream */
	assert_int_equal(nghttp2_submit_window_update(cl.s, NGHTTP2_FLAG_NONE, r->id, 1000), 0);
	client_pump(&cl);
	assert_int_equal(r->data_len, sizeof(want));
	assert_memory_equal(r->data, want, sizeof(want));
	/* with room, nothing is replaced any more */
	assert_int_equal(grpc_call_send_latest(held[0], (const uint8_t *)"five", 4), 0);
	client_pump(&cl);
	assert_int_equal(r->data_len, sizeof(want) + GRPC_PREFIX_LEN + 4);
	assert_int_equal(grpc_call_end(held[0]), 0);
	client_pump(&cl);
	assert_int_equal(r->grpc_status, 0);
	client_done(&cl);
}

/* At most max_conn_watches watches per connection, and watches on at most
 * max_connections - 1 connections: the last one is kept for other calls. */
static void test_watch_calls_are_bounded_and_leave_a_connection(void **state)
{
	struct fixture *f = *state;
	struct grpc_server *srv = NULL;
	struct grpc_limits lim;
	struct client a, b2, c;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "");
	struct resp *r;
	struct grpc_stats st;

	grpc_limits_default(&lim);
	lim.max_connections = 3;
	lim.max_conn_watches = 2;
	assert_int_equal(grpc_server_new(f->base, &lim, &srv), 0);
	assert_int_equal(grpc_server_add_watch_method(srv, "/t.S/Watch", h_hold, (void *)1), 0);
	assert_int_equal(grpc_server_add_method(srv, "/t.S/Echo", h_echo, NULL), 0);
	client_init(&a, srv, 65535);
	client_init(&b2, srv, 65535);
	client_init(&c, srv, 65535);
	(void)client_call(&a, "/t.S/Watch", &b, NULL);
	(void)client_call(&a, "/t.S/Watch", &b, NULL);
	r = client_call(&a, "/t.S/Watch", &b, NULL);
	assert_int_equal(r->grpc_status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_string_equal(r->grpc_message,
			    "too many watch streams on this connection (max 2)");
	(void)client_call(&b2, "/t.S/Watch", &b, NULL);
	assert_int_equal(n_held, 3);
	r = client_call(&c, "/t.S/Watch", &b, NULL);
	assert_int_equal(r->grpc_status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	assert_string_equal(r->grpc_message,
			    "watch streams are held on 2 connections, the most allowed: the last "
			    "one is kept for other calls");
	r = client_call(&c, "/t.S/Echo", &b, NULL);
	assert_int_equal(r->grpc_status, 0);
	grpc_server_get_stats(srv, &st);
	assert_int_equal(st.watches_refused, 2);
	/* a's watches end (one completed, one reset by the client): c may watch */
	assert_int_equal(grpc_call_end(held[0]), 0);
	assert_int_equal(nghttp2_submit_rst_stream(a.s, NGHTTP2_FLAG_NONE, 3, NGHTTP2_CANCEL), 0);
	client_pump(&a);
	assert_int_equal(cancels, 1);
	r = client_call(&c, "/t.S/Watch", &b, NULL);
	assert_int_equal(r->grpc_status, -1); /* held */
	assert_int_equal(n_held, 4);
	client_done(&a);
	client_done(&b2);
	client_done(&c);
	grpc_server_free(srv);
}

static void test_completion_on_a_closed_connection_reports_cancelled(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	uint8_t buf[16];
	struct body b = msg_body(buf, sizeof(buf), "x");
	const uint8_t bad[] = { 0, 0, 1, NGHTTP2_DATA, 0, 0, 0, 0, 0, 'x' };

	client_init(&cl, f->srv, 65535);
	(void)client_call(&cl, "/t.S/Hold", &b, NULL);
	(void)grpc_conn_feed(cl.conn, bad, sizeof(bad)); /* GOAWAY, then the connection is over */
	client_pump(&cl);
	assert_true(cl.got_goaway);
	assert_int_equal(grpc_call_reply(held[0], (const uint8_t *)"x", 1), -ECANCELED);
	client_done(&cl);
	assert_int_equal(cancels, 0); /* completed before the connection was freed */
}

static void test_bad_preface_ends_connection(void **state)
{
	struct fixture *f = *state;
	struct grpc_conn *c;
	const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct grpc_stats st;

	assert_int_equal(grpc_conn_new_memory(f->srv, &c), 0);
	assert_int_equal(grpc_conn_feed(c, (const uint8_t *)junk, sizeof(junk) - 1), -EPIPE);
	assert_int_equal(grpc_conn_feed(c, (const uint8_t *)"x", 1), -EPIPE);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.conns_protocol_error == 1);
	grpc_conn_free(c);
}

static void test_bad_frame_gets_goaway(void **state)
{
	struct fixture *f = *state;
	struct client cl;
	/* DATA on stream 0 is a connection error (RFC 9113 6.1) */
	const uint8_t bad[] = { 0, 0, 1, NGHTTP2_DATA, 0, 0, 0, 0, 0, 'x' };
	struct grpc_stats st;

	client_init(&cl, f->srv, 65535);
	client_pump(&cl);
	assert_false(cl.conn_over);
	(void)grpc_conn_feed(cl.conn, bad, sizeof(bad));
	client_pump(&cl);
	assert_true(cl.got_goaway);
	assert_int_equal(cl.goaway_code, NGHTTP2_PROTOCOL_ERROR);
	assert_int_equal(grpc_conn_feed(cl.conn, bad, sizeof(bad)), -EPIPE);
	grpc_server_get_stats(f->srv, &st);
	assert_true(st.conns_protocol_error == 1);
	client_done(&cl);
}

/* ---- protos: field numbers against hand-encoded bytes (wire-protocols.md 2.2, 2.6) ---------- */

static void test_dra_v1_request_decodes_hand_encoded_example(void **state)
{
	static const uint8_t req[] = "\x0a\x14\x0a\x07"
				     "default"
				     "\x12\x05"
				     "uid-1"
				     "\x1a\x02"
				     "c1"
				     "\x0a\x18\x0a\x07"
				     "default"
				     "\x12\x05"
				     "uid-2"
				     "\x1a\x06"
				     "fail-x";
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *v1;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesRequest *b1;

	v1 = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(
		NULL, sizeof(req) - 1, req);
	assert_non_null(v1);
	assert_int_equal(v1->n_claims, 2);
	assert_string_equal(v1->claims[0]->namespace_, "default");
	assert_string_equal(v1->claims[0]->uid, "uid-1");
	assert_string_equal(v1->claims[0]->name, "c1");
	assert_string_equal(v1->claims[1]->name, "fail-x");
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(v1,
											    NULL);
	b1 = k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__unpack(
		NULL, sizeof(req) - 1, req);
	assert_non_null(b1);
	assert_string_equal(b1->claims[1]->uid, "uid-2");
	k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__free_unpacked(
		b1, NULL);
}

static void test_dra_v1_response_map_entry_carries_value(void **state)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse resp =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry e =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT,
		*ep = &e;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse v =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
	const uint8_t want[] = { 0x0a, 0x07, 0x0a, 0x03, 'u', 'i', 'd', 0x12, 0x00 };
	uint8_t out[32];

	e.key = "uid";
	e.value = &v;
	resp.n_claims = 1;
	resp.claims = &ep;
	assert_int_equal(
		k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__pack(&resp,
											      out),
		sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
}

static void test_health_response_field_numbers(void **state)
{
	V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	V1alpha1__DeviceHealth dh = V1ALPHA1__DEVICE_HEALTH__INIT, *dhp = &dh;
	V1alpha1__DeviceIdentifier id = V1ALPHA1__DEVICE_IDENTIFIER__INIT;
	const uint8_t want[] = {
		0x0a, 0x0f,					   /* devices[0], 15 bytes */
		0x0a, 0x07, 0x0a, 0x01, 'p', 0x12, 0x02, 'd', '0', /* device {pool, name} */
		0x10, 0x02,					   /* health UNHEALTHY */
		0x18, 0x05,					   /* last_updated_time 5 */
		0x20, 0x1e,					   /* timeout 30 s */
	};
	uint8_t out[64];
	size_t n;

	id.pool_name = "p";
	id.device_name = "d0";
	dh.device = &id;
	dh.health = V1ALPHA1__HEALTH_STATUS__UNHEALTHY;
	dh.last_updated_time = 5;
	dh.health_check_timeout_seconds = 30;
	resp.n_devices = 1;
	resp.devices = &dhp;
	n = v1alpha1__node_watch_resources_response__pack(&resp, out);
	/* message (field 5) empty: not emitted in proto3 */
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(out, want, n);
}

static void test_registration_status_field_numbers(void **state)
{
	const uint8_t in[] = { 0x08, 0x00, 0x12, 0x04, 'n', 'o', 'p', 'e' };
	Pluginregistration__RegistrationStatus *st;

	st = pluginregistration__registration_status__unpack(NULL, sizeof(in), in);
	assert_non_null(st);
	assert_false(st->plugin_registered);
	assert_string_equal(st->error, "nope");
	pluginregistration__registration_status__free_unpacked(st, NULL);
}

#define T(fn) cmocka_unit_test(fn)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TM(fn) cmocka_unit_test_setup_teardown(fn, setup_methods, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_prefix_parse_reads_flag_and_big_endian_length),
		T(test_prefix_parse_rejects_flag_above_one),
		T(test_prefix_write_is_uncompressed_big_endian),
		T(test_percent_encode_escapes_percent_and_non_printable),
		T(test_percent_encode_never_writes_half_an_escape),
		T(test_path_is_valid_accepts_service_and_method),
		T(test_path_is_valid_rejects_malformed),
		T(test_timeout_parse_units),
		T(test_timeout_parse_rejects_malformed),
		T(test_status_name),
		TS(test_listen_unix_rejects_path_longer_than_sun_path),
		TS(test_listen_unix_creates_socket_with_exact_mode),
		TS(test_listen_unix_replaces_stale_socket),
		TS(test_listen_unix_leaves_other_files_alone),
		TS(test_server_free_unlinks_only_its_own_socket),
		TM(test_add_method_rejects_bad_path_and_duplicates),
		TS(test_server_sends_settings_first),
		TM(test_unary_echo_roundtrip),
		TM(test_empty_message_is_a_message),
		TM(test_requests_get_the_right_answer),
		TM(test_message_over_limit_is_refused_at_its_prefix),
		TM(test_message_reassembled_from_one_byte_frames),
		TM(test_async_reply_after_handler_returns),
		TM(test_client_reset_cancels_held_call),
		TM(test_cancel_callback_ends_the_handle),
		TM(test_conn_free_cancels_held_call),
		TM(test_server_free_cancels_held_call),
		TM(test_streaming_sends_messages_then_status),
		TM(test_fail_message_is_percent_encoded),
		TM(test_reply_over_max_message_fails_the_call),
		TM(test_send_refuses_when_client_does_not_read),
		TM(test_send_latest_gives_a_slow_client_the_latest_only),
		TM(test_watch_calls_are_bounded_and_leave_a_connection),
		TM(test_completion_on_a_closed_connection_reports_cancelled),
		TS(test_bad_preface_ends_connection),
		TS(test_bad_frame_gets_goaway),
		T(test_dra_v1_request_decodes_hand_encoded_example),
		T(test_dra_v1_response_map_entry_carries_value),
		T(test_health_response_field_numbers),
		T(test_registration_status_field_numbers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
