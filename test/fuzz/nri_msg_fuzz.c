/* NRI message decode, through the session: each record of the input is one
 * message from the runtime, framed and fed to a registered session whose
 * handlers walk every view they are given and answer with adjustments and
 * updates. Never crashes or leaks; views hold no NULL strings.
 *
 * Input: records of [kind u8][len u16 LE][payload len bytes]; kind picks
 * a Plugin-service method (request on conn 1) or a reply to one of our
 * Runtime calls (on conn 2). */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/errbuf.h"
#include "nri/nri.h"
#include "nri_ttrpc.pb-c.h"
#include "nri/ttrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const methods[] = {
	"Configure",	   "Synchronize",	  "CreateContainer", "UpdateContainer",
	"StopContainer",   "RemoveContainer",	  "PostCreateContainer", "StartContainer",
	"StateChange",	   "Shutdown",		  "RunPodSandbox",   "NoSuchMethod",
};
#define KIND_REPLY_PUSH 0xfe /* the reply to our UpdateContainers (stream 3) */
#define KIND_REPLY_BAD 0xff  /* an error reply to it */

static void walk_pod(const struct nri_pod *p)
{
	assert(p->id && p->uid && p->name && p->namespace && p->cgroup_parent);
	(void)strlen(p->id);
	(void)strlen(p->cgroup_parent);
}

static void walk(const struct nri_container *c)
{
	assert(c->id && c->name && c->pod_sandbox_id && c->cgroups_path && c->cpus && c->mems);
	for (size_t i = 0; i < c->n_env; i++)
		assert(c->env[i]);
	(void)nri_container_getenv(c, "PIN");
	if (c->pod)
		walk_pod(c->pod);
}

static int on_sync(void *ud, const struct nri_pod *pods, size_t n_pods,
		   const struct nri_container *ctrs, size_t n_ctrs, struct nri_updates *upd,
		   struct errbuf *err)
{
	for (size_t i = 0; i < n_pods; i++)
		walk_pod(&pods[i]);
	for (size_t i = 0; i < n_ctrs; i++) {
		walk(&ctrs[i]);
		if (*ctrs[i].id)
			(void)nri_updates_add(upd, ctrs[i].id, *ctrs[i].cpus ? ctrs[i].cpus : "0");
	}
	return 0;
}

static int on_create(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     struct nri_adjust *adj, struct nri_updates *upd, struct errbuf *err)
{
	const char *pin = nri_container_getenv(c, "PIN");

	walk_pod(pod);
	walk(c);
	if (pin)
		(void)nri_adjust_set_cpus(adj, pin); /* invalid ones are refused */
	(void)nri_updates_add(upd, "other", "0-1");
	return 0;
}

static int on_update(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     const char *cpus, struct nri_updates *upd, struct errbuf *err)
{
	walk(c);
	assert(cpus);
	return 0;
}

static int on_stop(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		   struct nri_updates *upd, struct errbuf *err)
{
	walk(c);
	return 0;
}

static int on_note(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	walk_pod(pod);
	walk(c);
	return 0;
}

static void on_push_done(void *ud, int r, const char *const *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert(ids[i]);
}

static int sink(void *ud, const void *buf, size_t len)
{
	assert(len <= TTRPC_MUX_HDR_LEN + TTRPC_MUX_WRITE_MAX);
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* One ttrpc message on conn, as one mux frame (the mux accepts any size). */
static int feed_msg(struct nri_session *s, uint32_t conn, uint32_t stream, uint8_t type,
		    const ProtobufCMessage *body)
{
	size_t bl = protobuf_c_message_get_packed_size(body);
	uint8_t *buf = malloc(18 + bl);
	int r;

	assert(buf);
	put32(buf, conn);
	put32(buf + 4, (uint32_t)(10 + bl));
	put32(buf + 8, (uint32_t)bl);
	put32(buf + 12, stream);
	buf[16] = type;
	buf[17] = 0;
	(void)protobuf_c_message_pack(body, buf + 18);
	r = nri_session_feed(s, buf, 18 + bl);
	free(buf);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct nri_handlers h = {
		.synchronize = on_sync,
		.create_container = on_create,
		.update_container = on_update,
		.stop_container = on_stop,
		.post_create_container = on_note,
		.start_container = on_note,
		.remove_container = on_note,
		.push_done = on_push_done,
	};
	Ttrpc__Response ok = TTRPC__RESPONSE__INIT;
	struct nri_session *s = NULL;
	uint32_t stream = 1;
	size_t off = 0;
	int r;

	log_set_level(LOG_ERROR);
	if (nri_session_new(NULL, &h, NULL, sink, NULL, &s) < 0)
		return 0;
	/* Registered (our stream 1), with an UpdateContainers call (stream 3)
	 * out, so replies to it can be fuzzed too. */
	assert(nri_session_start(s) == 0);
	r = feed_msg(s, 2, 1, TTRPC_TYPE_RESPONSE, &ok.base);
	assert(r == 0 && nri_session_is_registered(s));
	assert(nri_session_push_updates(s, &(struct nri_update){ "c1", "1" }, 1) == 0);

	while (off + 3 <= size) {
		uint8_t kind = data[off];
		size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
		const uint8_t *p = data + off + 3;

		if (len > size - off - 3)
			len = size - off - 3;
		off += 3 + len;
		if (kind == KIND_REPLY_PUSH || kind == KIND_REPLY_BAD) {
			Ttrpc__Response resp = TTRPC__RESPONSE__INIT;
			Ttrpc__Status st = TTRPC__STATUS__INIT;

			resp.payload.data = (uint8_t *)p;
			resp.payload.len = len;
			if (kind == KIND_REPLY_BAD) {
				st.code = TTRPC_UNAVAILABLE;
				resp.status = &st;
			}
			r = feed_msg(s, 2, 3, TTRPC_TYPE_RESPONSE, &resp.base);
		} else {
			Ttrpc__Request req = TTRPC__REQUEST__INIT;

			req.service = "nri.pkg.api.v1alpha1.Plugin";
			req.method = (char *)methods[kind % (sizeof(methods) / sizeof(methods[0]))];
			req.payload.data = (uint8_t *)p;
			req.payload.len = len;
			r = feed_msg(s, 1, stream, TTRPC_TYPE_REQUEST, &req.base);
			stream += 2;
		}
		if (r < 0) {
			assert(nri_session_why(s));
			break;
		}
	}
	(void)nri_session_expire(s, INT64_MAX);
	nri_session_free(s);
	return 0;
}
