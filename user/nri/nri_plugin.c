/* The NRI plugin's Plugin service: the runtime's requests to us (Configure,
 * Synchronize, CreateContainer, UpdateContainer, StopContainer, the pod and
 * container events, Shutdown), each decoded, handed to its handler and
 * answered; a CreateContainer may wait for its handler (struct nri_resume).
 * See nri.h.
 *
 * Apart from nri.c because these are the requests one at a time; nri.c
 * holds the session they run in and our own calls to the runtime.
 */
#define LOG_MOD "nri"
#include "nri/nri.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "nri_api.pb-c.h"
#include "nri/nri_priv.h"
#include "nri/ttrpc.h"

#define SVC_PLUGIN "nri.pkg.api.v1alpha1.Plugin"
#define SYNC_PARTS_MAX 64u
#define SLOW_HANDLER_MS 10

/* Unique over every session of the process: a stale resume handle from an
 * ended connection must not wake a request of the next one. One thread. */
static uint64_t next_token;

/* ---- Plugin service ----------------------------------------------------------------------- */

static int reply_error(struct nri_session *s, uint32_t sid, int code, const char *msg)
{
	return ttrpc_mux_reply(s->mux, sid, code, msg, NULL, 0);
}

/* Answers with msg (packed by protobuf-c) followed by the encoded updates u (NULL: none).
 * msg sets no field numbered above u's, and protobuf-c packs fields in number order, so
 * the bytes are those protobuf-c would pack with the updates in msg. */
static int reply_msg(struct nri_session *s, uint32_t sid, const ProtobufCMessage *msg,
		     struct nri_updates *u)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t head = protobuf_c_message_get_packed_size(msg);
	size_t tail = u ? nri_updates_len(u) : 0;

	if (head + tail > TTRPC_MSG_MAX) {
		log_error("nri_reply_too_large", "bytes=%zu max=%u", head + tail, TTRPC_MSG_MAX);
		return reply_error(s, sid, TTRPC_RESOURCE_EXHAUSTED, "response too large");
	}
	if (head == 0) /* the updates alone */
		return ttrpc_mux_reply(s->mux, sid, TTRPC_OK, NULL, tail ? nri_updates_bytes(u) : NULL,
				       tail);
	if (tail && head <= UPDATES_ROOM) { /* in place, right before the updates */
		(void)protobuf_c_message_pack(msg, nri_updates_bytes(u) - head);
		return ttrpc_mux_reply(s->mux, sid, TTRPC_OK, NULL, nri_updates_bytes(u) - head,
				       head + tail);
	}
	buf = malloc(head + tail);
	if (!buf)
		return -ENOMEM;
	(void)protobuf_c_message_pack(msg, buf);
	if (tail)
		memcpy(buf + head, nri_updates_bytes(u), tail);
	return ttrpc_mux_reply(s->mux, sid, TTRPC_OK, NULL, buf, head + tail);
}

static int reply_empty(struct nri_session *s, uint32_t sid)
{
	return ttrpc_mux_reply(s->mux, sid, TTRPC_OK, NULL, NULL, 0);
}

/* A handler's error becomes the runtime's error; logged here, once. */
static int reply_failed(struct nri_session *s, uint32_t sid, const char *method,
			const struct nri_container *c, int r, const struct errbuf *err)
{
	const char *msg = errbuf_text(err, r < 0 ? r : -EINVAL);
	uint64_t held;

	s->st.handler_errors++;
	if (ratelimit_pass_at(&s->fail_rl, ttrpc_now_ms(), &held)) {
		if (c)
			log_error("nri_handler_failed",
				  "method=%s container=%s name=%s err=%s held_back=%llu", method,
				  log_quote(c->id), log_quote(c->name), log_quote(msg),
				  (unsigned long long)held);
		else
			log_error("nri_handler_failed", "method=%s err=%s held_back=%llu", method,
				  log_quote(msg), (unsigned long long)held);
	}
	return reply_error(s, sid, TTRPC_UNKNOWN, msg);
}

static void check_slow(const char *method, int64_t t0)
{
	int64_t ms = ttrpc_now_ms() - t0;

	if (ms > SLOW_HANDLER_MS)
		log_warn("nri_slow_handler", "method=%s ms=%lld budget_ms=%d", method,
			 (long long)ms, SLOW_HANDLER_MS);
}

static void *decode(struct nri_session *s, const ProtobufCMessageDescriptor *d,
		    const struct ttrpc_request *rq, struct ttrpc_pb_alloc *a)
{
	void *m;

	ttrpc_pb_alloc_init(a, NRI_DECODE_BUDGET);
	m = protobuf_c_message_unpack(d, &a->base, rq->len, rq->payload);
	if (!m)
		errbuf_set(&s->why, "undecodable %s request (%zu bytes)", rq->method, rq->len);
	return m;
}

static int do_configure(struct nri_session *s, const struct ttrpc_request *rq)
{
	Nri__ConfigureResponse resp = NRI__CONFIGURE_RESPONSE__INIT;
	struct ttrpc_pb_alloc a;
	Nri__ConfigureRequest *req = decode(s, &nri__configure_request__descriptor, rq, &a);
	int r;

	if (!req)
		return -EPROTO;
	log_info("nri_configured", "runtime=%s version=%s nri_version=%s events=0x%x",
		 log_quote(req->runtime_name), log_quote(req->runtime_version),
		 log_quote(req->nri_version), s->events);
	if (s->h.configured)
		s->h.configured(s->ud, nri_str(req->runtime_name), nri_str(req->runtime_version),
				nri_str(req->nri_version));
	resp.events = (int32_t)s->events;
	r = reply_msg(s, rq->stream_id, &resp.base, NULL);
	nri__configure_request__free_unpacked(req, &a.base);
	return r;
}

static int cmp_pod_id(const void *a, const void *b)
{
	const struct nri_pod *x = *(const struct nri_pod *const *)a;
	const struct nri_pod *y = *(const struct nri_pod *const *)b;

	return strcmp(x->id, y->id);
}

static const struct nri_pod *find_pod(const struct nri_pod **index, size_t n, const char *id)
{
	struct nri_pod key = { .id = id };
	const struct nri_pod *k = &key, **hit;

	if (!*id)
		return NULL;
	hit = bsearch(&k, index, n, sizeof(*index), cmp_pod_id);
	return hit ? *hit : NULL;
}

/* The last part is in: one handler call over all parts. */
static int sync_finish(struct nri_session *s, uint32_t sid)
{
	Nri__SynchronizeResponse resp = NRI__SYNCHRONIZE_RESPONSE__INIT;
	_cleanup_free_ struct nri_pod *pods = NULL;
	_cleanup_free_ const struct nri_pod **index = NULL;
	_cleanup_free_ struct nri_container *ctrs = NULL;
	_cleanup_(nri_updates_done) struct nri_updates upd = UPDATES_INIT(PB_UPDATE);
	struct errbuf err = { "" };
	size_t np = 0, nc = 0, ip = 0, ic = 0;
	int64_t t0;
	int r;

	for (size_t i = 0; i < s->n_parts; i++) {
		np += s->parts[i]->n_pods;
		nc += s->parts[i]->n_containers;
	}
	pods = calloc(np ? np : 1, sizeof(*pods));
	index = calloc(np ? np : 1, sizeof(*index));
	ctrs = calloc(nc ? nc : 1, sizeof(*ctrs));
	if (!pods || !index || !ctrs)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_parts; i++)
		for (size_t j = 0; j < s->parts[i]->n_pods; j++, ip++) {
			nri_pod_view(&pods[ip], s->parts[i]->pods[j]);
			index[ip] = &pods[ip];
		}
	qsort(index, np, sizeof(*index), cmp_pod_id);
	for (size_t i = 0; i < s->n_parts; i++)
		for (size_t j = 0; j < s->parts[i]->n_containers; j++) {
			const Nri__Container *c = s->parts[i]->containers[j];

			if (!c)
				continue;
			nri_container_view(&ctrs[ic], c, NULL);
			ctrs[ic].pod = find_pod(index, np, ctrs[ic].pod_sandbox_id);
			ic++;
		}
	r = 0;
	if (s->h.synchronize) {
		t0 = ttrpc_now_ms();
		r = s->h.synchronize(s->ud, pods, np, ctrs, ic, &upd, &err);
		check_slow("Synchronize", t0);
	}
	if (r < 0)
		return reply_failed(s, sid, "Synchronize", NULL, r, &err);
	r = reply_msg(s, sid, &resp.base, &upd);
	if (r < 0)
		return r;
	s->synchronized = true;
	log_info("nri_synchronized", "pods=%zu containers=%zu updates=%zu parts=%zu", np, ic,
		 upd.n, s->n_parts);
	return 0;
}

static int do_synchronize(struct nri_session *s, const struct ttrpc_request *rq)
{
	Nri__SynchronizeResponse resp = NRI__SYNCHRONIZE_RESPONSE__INIT;
	Nri__SynchronizeRequest *req, **parts;
	int r;

	s->st.sync_parts++;
	if (s->sync_bytes + rq->len > NRI_SYNC_MAX || s->n_parts >= SYNC_PARTS_MAX) {
		errbuf_set(&s->why, "Synchronize over %zu parts and %zu bytes", s->n_parts + 1,
			   s->sync_bytes + rq->len);
		return -E2BIG;
	}
	if (s->n_parts == 0)
		ttrpc_pb_alloc_init(&s->sync_alloc, NRI_SYNC_DECODE_BUDGET);
	parts = realloc(s->parts, (s->n_parts + 1) * sizeof(*parts));
	if (!parts)
		return -ENOMEM;
	s->parts = parts;
	req = nri__synchronize_request__unpack(&s->sync_alloc.base, rq->len, rq->payload);
	if (!req) {
		errbuf_set(&s->why, "undecodable Synchronize part %zu (%zu bytes)", s->n_parts + 1,
			   rq->len);
		return -EPROTO;
	}
	s->parts[s->n_parts++] = req;
	s->sync_bytes += rq->len;
	if (req->more) {
		/* An intermediate part is answered "more" and nothing else, or the
		 * runtime drops us (wire-protocols.md 4.6). */
		resp.more = true;
		return reply_msg(s, rq->stream_id, &resp.base, NULL);
	}
	r = sync_finish(s, rq->stream_id);
	nri_sync_reset(s);
	/* The parts and their decoded trees (MiBs for thousands of containers)
	 * are gone: hand the pages back, this happens once per connection. */
	(void)malloc_trim(0);
	return r;
}

/* The views of a container event's pod and container. A request without a
 * container is answered INVALID_ARGUMENT here: returns 1 then (or the
 * reply's -errno). */
static int container_views(struct nri_session *s, uint32_t sid, const Nri__PodSandbox *p,
			   const Nri__Container *ctr, struct nri_pod *pod, struct nri_container *c)
{
	int r;

	if (!ctr) {
		r = reply_error(s, sid, TTRPC_INVALID_ARGUMENT, "no container");
		return r < 0 ? r : 1;
	}
	nri_pod_view(pod, p);
	nri_container_view(c, ctr, pod);
	return 0;
}

/* The end of a container event: its handler (started at t0) failed with r
 * and err, or resp goes out with the updates. */
static int answer(struct nri_session *s, uint32_t sid, const char *method,
		  const struct nri_container *c, int r, const struct errbuf *err, int64_t t0,
		  const ProtobufCMessage *resp, struct nri_updates *upd)
{
	check_slow(method, t0);
	if (r < 0)
		return reply_failed(s, sid, method, c, r, err);
	return reply_msg(s, sid, resp, upd);
}

static void unlink_waiting(struct nri_session *s, struct create_call *cc)
{
	for (struct create_call **pp = &s->waiting; *pp; pp = &(*pp)->next)
		if (*pp == cc) {
			*pp = cc->next;
			s->n_waiting--;
			cc->waiting = false;
			return;
		}
}

/* One run of the CreateContainer handler over cc's request: it decides (the
 * answer goes out and cc is freed) or waits (cc joins the waiting list). */
/* The adjustment a CreateContainer answers with, built on the stack: the
 * protobuf-c messages point at each other and at the handler's strings. */
struct create_adjust {
	Nri__ContainerAdjustment adjust;
	Nri__LinuxContainerAdjustment ladj;
	Nri__LinuxResources res;
	Nri__LinuxCPU cpu;
	Nri__OptionalInt64 quota;
	Nri__LinuxScheduler sched;
	Nri__LinuxSchedulerFlag flags[NRI__LINUX_SCHEDULER_FLAG__SCHED_FLAG_UTIL_CLAMP_MAX + 1];
};

/* Points resp at the adjustment adj asks for, built in m; none when adj
 * asks for nothing. */
static void create_adjust_build(struct create_adjust *m, const struct nri_adjust *adj,
				Nri__CreateContainerResponse *resp)
{
	if (adj->cpus || adj->has_quota) {
		if (adj->cpus)
			m->cpu.cpus = adj->cpus;
		if (adj->mems)
			m->cpu.mems = adj->mems;
		if (adj->has_quota) {
			m->quota.value = adj->quota;
			m->cpu.quota = &m->quota;
		}
		m->res.cpu = &m->cpu;
		m->ladj.resources = &m->res;
		m->adjust.linux_ = &m->ladj;
		resp->adjust = &m->adjust;
	}
	if (adj->has_sched) {
		m->sched.policy = (Nri__LinuxSchedulerPolicy)adj->sched.policy;
		m->sched.nice = adj->sched.nice;
		m->sched.priority = adj->sched.priority;
		for (int f = 0; f < (int)ARRAY_SIZE(m->flags); f++)
			if (adj->sched.flags & (1u << f))
				m->flags[m->sched.n_flags++] = (Nri__LinuxSchedulerFlag)f;
		m->sched.flags = m->flags;
		m->sched.runtime = adj->sched.runtime;
		m->sched.deadline = adj->sched.deadline;
		m->sched.period = adj->sched.period;
		m->ladj.scheduler = &m->sched;
		m->adjust.linux_ = &m->ladj;
		resp->adjust = &m->adjust;
	}
}

/* The handler asked to wait: cc joins the waiting list, once. */
static void create_wait(struct nri_session *s, struct create_call *cc)
{
	if (cc->waiting)
		return;
	cc->waiting = true;
	cc->next = s->waiting;
	s->waiting = cc;
	s->n_waiting++;
	if (cc->attempt == 1)
		s->st.create_waits++;
}

int nri_run_create(struct nri_session *s, struct create_call *cc, bool final)
{
	Nri__CreateContainerResponse resp = NRI__CREATE_CONTAINER_RESPONSE__INIT;
	struct create_adjust m = {
		.adjust = NRI__CONTAINER_ADJUSTMENT__INIT,
		.ladj = NRI__LINUX_CONTAINER_ADJUSTMENT__INIT,
		.res = NRI__LINUX_RESOURCES__INIT,
		.cpu = NRI__LINUX_CPU__INIT,
		.quota = NRI__OPTIONAL_INT64__INIT,
		.sched = NRI__LINUX_SCHEDULER__INIT,
	};
	struct nri_adjust adj = { .s = s, .call = cc, .final = final };
	struct nri_updates upd = UPDATES_INIT(PB_CREATE_CONTAINER_RESPONSE_UPDATE);
	struct errbuf err = { "" };
	struct nri_container c;
	struct nri_pod pod;
	int64_t t0 = ttrpc_now_ms();
	int r;

	nri_pod_view(&pod, cc->req->pod);
	nri_container_view(&c, cc->req->container, &pod);
	cc->running = true;
	r = s->h.create_container(s->ud, &pod, &c, &adj, &upd, &err);
	cc->running = false;
	cc->attempt++;
	if (r == -EINPROGRESS && adj.defer) {
		check_slow("CreateContainer", t0);
		create_wait(s, cc);
		nri_updates_done(&upd);
		free(adj.cpus);
		free(adj.mems);
		return 0;
	}
	if (r == -EINPROGRESS) { /* waiting without asking, or past the end */
		if (final)
			s->st.create_wait_timeouts++;
		if (!err.s[0])
			errbuf_set(&err,
				   "no decision within the %u ms a container creation may wait",
				   s->conf.create_wait_ms);
		r = -ETIMEDOUT;
	}
	if (cc->waiting)
		unlink_waiting(s, cc);
	if (r >= 0) {
		create_adjust_build(&m, &adj, &resp);
		log_debug("nri_create", "container=%s cpus=%s updates=%zu attempt=%d",
			  log_quote(c.id), adj.cpus ? adj.cpus : "", upd.n, cc->attempt);
	}
	r = answer(s, cc->sid, "CreateContainer", &c, r, &err, t0, &resp.base, &upd);
	nri_create_call_free(cc);
	nri_updates_done(&upd);
	free(adj.cpus);
	free(adj.mems);
	return r < 0 ? r : 0;
}

static int do_create(struct nri_session *s, const struct ttrpc_request *rq)
{
	struct create_call *cc = calloc(1, sizeof(*cc));
	int64_t wait = s->conf.create_wait_ms;
	int r;

	if (!cc)
		return -ENOMEM;
	ttrpc_pb_alloc_init(&cc->a, NRI_DECODE_BUDGET);
	cc->req = nri__container_request__unpack(&cc->a.base, rq->len, rq->payload);
	if (!cc->req) {
		errbuf_set(&s->why, "undecodable %s request (%zu bytes)", rq->method, rq->len);
		free(cc);
		return -EPROTO;
	}
	if (!cc->req->container) {
		r = reply_error(s, rq->stream_id, TTRPC_INVALID_ARGUMENT, "no container");
		nri_create_call_free(cc);
		return r;
	}
	/* The answer must reach the runtime before it gives up on us. */
	if (rq->timeout_ns > 0 && rq->timeout_ns / 1000000 * 3 / 4 < wait)
		wait = rq->timeout_ns / 1000000 * 3 / 4;
	cc->token = ++next_token;
	cc->sid = rq->stream_id;
	cc->deadline_ms = ttrpc_now_ms() + wait;
	return nri_run_create(s, cc, false);
}

int nri_session_resume(struct nri_session *s, uint64_t token)
{
	struct create_call *cc = s->waiting;

	while (cc && cc->token != token)
		cc = cc->next;
	if (!cc)
		return -ENOENT;
	if (cc->running)
		return -EBUSY;
	return nri_run_create(s, cc, false);
}

int nri_adjust_defer(struct nri_adjust *a, struct nri_resume *ret)
{
	if (!a->call || a->final)
		return -ETIMEDOUT;
	if (!a->call->waiting && a->s->n_waiting >= NRI_WAITING_MAX)
		return -EBUSY;
	a->defer = true;
	*ret = (struct nri_resume){ .fn = a->s->resume_fn, .ctx = a->s->resume_ctx,
				    .token = a->call->token };
	return 0;
}

int nri_adjust_attempt(const struct nri_adjust *a)
{
	return a->call ? a->call->attempt : 0;
}

bool nri_adjust_is_final(const struct nri_adjust *a)
{
	return a->final;
}

int64_t nri_adjust_wait_left_ms(const struct nri_adjust *a)
{
	int64_t left;

	if (!a->call || a->final)
		return 0;
	left = a->call->deadline_ms - ttrpc_now_ms();
	return left > 0 ? left : 0;
}

int nri_resume_run(const struct nri_resume *r)
{
	return r->fn ? r->fn(r->ctx, r->token) : -ENOENT;
}

static int do_update(struct nri_session *s, const struct ttrpc_request *rq)
{
	Nri__UpdateContainerResponse resp = NRI__UPDATE_CONTAINER_RESPONSE__INIT;
	struct ttrpc_pb_alloc a;
	Nri__UpdateContainerRequest *req = decode(s, &nri__update_container_request__descriptor,
						  rq, &a);
	struct nri_updates upd = UPDATES_INIT(PB_UPDATE);
	struct errbuf err = { "" };
	struct nri_container c;
	struct nri_pod pod;
	const char *cpus = "";
	int64_t t0 = ttrpc_now_ms();
	int r;

	if (!req)
		return -EPROTO;
	if (req->linux_resources && req->linux_resources->cpu)
		cpus = nri_str(req->linux_resources->cpu->cpus);
	r = container_views(s, rq->stream_id, req->pod, req->container, &pod, &c);
	if (r == 0) {
		r = s->h.update_container(s->ud, &pod, &c, cpus, &upd, &err);
		r = answer(s, rq->stream_id, "UpdateContainer", &c, r, &err, t0, &resp.base, &upd);
	}
	nri_updates_done(&upd);
	nri__update_container_request__free_unpacked(req, &a.base);
	return r < 0 ? r : 0;
}

static int do_stop(struct nri_session *s, const struct ttrpc_request *rq)
{
	Nri__StopContainerResponse resp = NRI__STOP_CONTAINER_RESPONSE__INIT;
	struct ttrpc_pb_alloc a;
	Nri__ContainerRequest *req = decode(s, &nri__container_request__descriptor, rq, &a);
	struct nri_updates upd = UPDATES_INIT(PB_UPDATE);
	struct errbuf err = { "" };
	struct nri_container c;
	struct nri_pod pod;
	int64_t t0 = ttrpc_now_ms();
	int r;

	if (!req)
		return -EPROTO;
	r = container_views(s, rq->stream_id, req->pod, req->container, &pod, &c);
	if (r == 0) {
		r = s->h.stop_container(s->ud, &pod, &c, &upd, &err);
		r = answer(s, rq->stream_id, "StopContainer", &c, r, &err, t0, &resp.base, &upd);
	}
	nri_updates_done(&upd);
	nri__container_request__free_unpacked(req, &a.base);
	return r < 0 ? r : 0;
}

/* Events we only observe: the handler's error is logged, the runtime gets ok. */
static void notify(struct nri_session *s, int event, const char *method,
		   const Nri__PodSandbox *p, const Nri__Container *ctr)
{
	int (*fn)(void *, const struct nri_pod *, const struct nri_container *) = NULL;
	struct nri_pod pod;
	struct nri_container c;
	int64_t t0;
	int r;

	switch (event) {
	case NRI_EVENT_POST_CREATE_CONTAINER:
		fn = s->h.post_create_container;
		break;
	case NRI_EVENT_START_CONTAINER:
		fn = s->h.start_container;
		break;
	case NRI_EVENT_REMOVE_CONTAINER:
		fn = s->h.remove_container;
		break;
	}
	if (!fn || !ctr)
		return;
	nri_pod_view(&pod, p);
	nri_container_view(&c, ctr, &pod);
	t0 = ttrpc_now_ms();
	r = fn(s->ud, &pod, &c);
	check_slow(method, t0);
	if (r < 0) {
		s->st.handler_errors++;
		log_error_errno(r, "nri_handler_failed", "method=%s container=%s", method,
				log_quote(c.id));
	}
}

static int event_of(const char *method)
{
	if (strcmp(method, "PostCreateContainer") == 0)
		return NRI_EVENT_POST_CREATE_CONTAINER;
	if (strcmp(method, "StartContainer") == 0)
		return NRI_EVENT_START_CONTAINER;
	return NRI_EVENT_REMOVE_CONTAINER;
}

static int do_notify(struct nri_session *s, const struct ttrpc_request *rq)
{
	struct ttrpc_pb_alloc a;
	Nri__ContainerRequest *req = decode(s, &nri__container_request__descriptor, rq, &a);
	int r;

	if (!req)
		return -EPROTO;
	notify(s, event_of(rq->method), rq->method, req->pod, req->container);
	r = reply_empty(s, rq->stream_id);
	nri__container_request__free_unpacked(req, &a.base);
	return r;
}

/* What a runtime sends when a newer event method was UNIMPLEMENTED. */
static int do_state_change(struct nri_session *s, const struct ttrpc_request *rq)
{
	struct ttrpc_pb_alloc a;
	Nri__StateChangeEvent *ev = decode(s, &nri__state_change_event__descriptor, rq, &a);
	int r;

	if (!ev)
		return -EPROTO;
	if (ev->event == NRI__EVENT__POST_CREATE_CONTAINER ||
	    ev->event == NRI__EVENT__START_CONTAINER || ev->event == NRI__EVENT__REMOVE_CONTAINER)
		notify(s, (int)ev->event, "StateChange", ev->pod, ev->container);
	r = reply_empty(s, rq->stream_id);
	nri__state_change_event__free_unpacked(ev, &a.base);
	return r;
}

static int do_shutdown(struct nri_session *s, const struct ttrpc_request *rq)
{
	int r;

	if (s->h.shutdown)
		s->h.shutdown(s->ud);
	r = reply_empty(s, rq->stream_id);
	if (r < 0)
		return r;
	errbuf_set(&s->why, "the runtime asked us to shut down");
	return -ESHUTDOWN;
}

static const struct method {
	const char *name;
	int event; /* 0: always served */
	int (*fn)(struct nri_session *s, const struct ttrpc_request *rq);
} methods[] = {
	{ "Configure", 0, do_configure },
	{ "Synchronize", 0, do_synchronize },
	{ "Shutdown", 0, do_shutdown },
	{ "StateChange", 0, do_state_change },
	{ "CreateContainer", NRI_EVENT_CREATE_CONTAINER, do_create },
	{ "UpdateContainer", NRI_EVENT_UPDATE_CONTAINER, do_update },
	{ "StopContainer", NRI_EVENT_STOP_CONTAINER, do_stop },
	{ "PostCreateContainer", NRI_EVENT_POST_CREATE_CONTAINER, do_notify },
	{ "StartContainer", NRI_EVENT_START_CONTAINER, do_notify },
	{ "RemoveContainer", NRI_EVENT_REMOVE_CONTAINER, do_notify },
};

int nri_on_request(void *ud, const struct ttrpc_request *rq)
{
	struct nri_session *s = ud;
	const struct method *m = NULL;
	char msg[160];

	s->st.requests++;
	if (strcmp(rq->service, SVC_PLUGIN) == 0)
		for (size_t i = 0; i < ARRAY_SIZE(methods) && !m; i++)
			if (strcmp(rq->method, methods[i].name) == 0)
				m = &methods[i];
	if (m && m->event && !(s->events & NRI_EVENT_BIT(m->event)))
		m = NULL;
	if (m)
		return m->fn(s, rq);
	/* The text ttrpc's Go server uses, so runtimes see what they expect. */
	if (strcmp(rq->service, SVC_PLUGIN) != 0)
		(void)snprintf(msg, sizeof(msg), "service %s", rq->service);
	else
		(void)snprintf(msg, sizeof(msg), "method %s", rq->method);
	s->st.unimplemented++;
	log_debug("nri_unimplemented", "service=%s method=%s", log_quote(rq->service),
		  log_quote(rq->method));
	return reply_error(s, rq->stream_id, TTRPC_UNIMPLEMENTED, msg);
}
