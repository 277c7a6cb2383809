/* events: Events (events.k8s.io/v1) with client-go's series semantics, sent
 * in the background. See events.h. */
#include "kube/events.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/claim.h"
#include "kube/kube.h"
#include "kube/writer.h"
#include "lib/clock.h"
#include "lib/jsonc.h"
#include "lib/log.h"
#include "lib/num.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"

#define REF_STR 256

struct ref {
	char api_version[64], kind[64], ns[64], name[REF_STR], uid[64];
};

/* One event sent (or being sent) and its series. */
struct ev {
	uint64_t id;	       /* writer key "ev<id>" */
	enum events_type type;
	char reason[EVENTS_REASON_MAX + 1], action[EVENTS_REASON_MAX + 1];
	char note[EVENTS_NOTE_MAX + 1];
	struct ref regarding, related;
	bool has_related;
	char name[REF_STR];    /* metadata.name */
	int64_t first_wall_ns; /* eventTime */
	uint32_t count;	       /* occurrences; a series from 2 */
	uint32_t written;      /* count the server has */
	int64_t last_wall_ns;  /* series.lastObservedTime */
	int64_t last_ms;       /* monotonic, last occurrence */
	int64_t flushed_ms;    /* monotonic, last write sent */
	bool busy;	       /* a request of it is queued or in flight */
	bool created;	       /* the server has it */
};

struct events {
	struct event_base *base;
	struct events_opts o;
	char controller[EVENTS_REASON_MAX], instance[EVENTS_INSTANCE_MAX];
	struct writer *w;
	struct ev *evs[EVENTS_MAX_SERIES];
	int n;
	uint64_t next_id;
	struct event *tick;
	struct events_stats st;
	struct metric *m_sent, *m_dropped;
	struct ratelimit invalid_rl; /* "event_dropped" lines for invalid objects */
};

static int64_t wall_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* metav1.MicroTime: RFC 3339 with microseconds, UTC. */
static void micro_time(int64_t ns, char buf[static 64])
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;

	(void)gmtime_r(&s, &tm);
	(void)snprintf(buf, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
		       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		       (int)(ns % 1000000000 / 1000));
}

static void copy_str(char *dst, size_t size, const char *src)
{
	(void)snprintf(dst, size, "%s", src ? src : "");
}

/* Cuts s to at most max bytes at a UTF-8 character boundary. */
static void cut_utf8(char *s, size_t max)
{
	size_t n = strlen(s);

	if (n <= max)
		return;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	s[max] = '\0';
}

static void ref_copy(struct ref *d, const struct events_ref *s)
{
	copy_str(d->api_version, sizeof(d->api_version), s->api_version);
	copy_str(d->kind, sizeof(d->kind), s->kind);
	copy_str(d->ns, sizeof(d->ns), s->ns);
	copy_str(d->name, sizeof(d->name), s->name);
	copy_str(d->uid, sizeof(d->uid), s->uid);
}

/* The namespace and name reach the request path and the Event: they must be
 * the Kubernetes names they claim to be (the runtime relays pods' names). */
static bool ref_names_ok(const struct events_ref *r)
{
	return (!r->ns || !*r->ns || claim_namespace_check(r->ns) == 0) &&
	       (!r->name || !*r->name || claim_name_check(r->name) == 0);
}

static bool ref_eq(const struct ref *a, const struct ref *b)
{
	return !strcmp(a->api_version, b->api_version) && !strcmp(a->kind, b->kind) &&
	       !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name) && !strcmp(a->uid, b->uid);
}

static int ref_json(const struct events_ref *r, struct json_object **ret)
{
	_cleanup_json_ struct json_object *o = json_object_new_object();
	const char *keys[] = { "apiVersion", "kind", "namespace", "name", "uid" };
	const char *vals[] = { r->api_version, r->kind, r->ns, r->name, r->uid };
	int e = o ? 0 : -ENOMEM;

	for (size_t i = 0; i < 5 && !e; i++)
		if (vals[i] && *vals[i])
			e = jsonc_add(o, keys[i], json_object_new_string(vals[i]));
	if (e)
		return e;
	*ret = TAKE_PTR(o);
	return 0;
}

int events_build(const struct events_opts *o, enum events_type type,
		 const struct events_ref *regarding, const struct events_ref *related,
		 const char *reason, const char *action, const char *note, const char *name,
		 int64_t wall, struct json_object **ret)
{
	_cleanup_json_ struct json_object *ev = json_object_new_object();
	struct json_object *meta = json_object_new_object(), *reg = NULL, *rel = NULL;
	char t[64];
	int e;

	micro_time(wall, t);
	e = jsonc_add(ev, "apiVersion", json_object_new_string(EVENTS_API_VERSION));
	e = e ?: jsonc_add(ev, "kind", json_object_new_string("Event"));
	e = e ?: jsonc_add(ev, "metadata", meta);
	e = e ?: jsonc_add(meta, "name", json_object_new_string(name));
	e = e ?: jsonc_add(meta, "namespace", json_object_new_string(regarding->ns));
	e = e ?: jsonc_add(ev, "eventTime", json_object_new_string(t));
	e = e ?: jsonc_add(ev, "reportingController", json_object_new_string(o->controller));
	e = e ?: jsonc_add(ev, "reportingInstance", json_object_new_string(o->instance));
	e = e ?: jsonc_add(ev, "action", json_object_new_string(action));
	e = e ?: jsonc_add(ev, "reason", json_object_new_string(reason));
	e = e ?: jsonc_add(ev, "type", json_object_new_string(type == EVENTS_WARNING ? "Warning"
										 : "Normal"));
	e = e ?: jsonc_add(ev, "note", json_object_new_string(note));
	e = e ?: ref_json(regarding, &reg);
	e = e ?: jsonc_add(ev, "regarding", reg);
	if (!e && related) {
		e = ref_json(related, &rel);
		e = e ?: jsonc_add(ev, "related", rel);
	}
	if (e)
		return e;
	*ret = TAKE_PTR(ev);
	return 0;
}

static void to_ref(const struct ref *r, struct events_ref *ret)
{
	*ret = (struct events_ref){ r->api_version, r->kind, r->ns, r->name, r->uid };
}

static void drop(struct events *e, const char *reason)
{
	e->st.dropped++;
	if (e->m_dropped)
		metric_series_add(metric_with(e->m_dropped, reason), 1);
}

static void forget(struct events *e, struct ev *x)
{
	for (int i = 0; i < e->n; i++)
		if (e->evs[i] == x) {
			e->evs[i] = e->evs[--e->n];
			break;
		}
	free(x);
}

static struct ev *find_id(struct events *e, uint64_t id)
{
	for (int i = 0; i < e->n; i++)
		if (e->evs[i]->id == id)
			return e->evs[i];
	return NULL;
}

static void on_written(void *ud, const char *key, const struct kube_result *r);

/* Queues the create (with the series when it has one) or the series patch. */
static void ev_send(struct events *e, struct ev *x, bool create)
{
	_cleanup_json_ struct json_object *o = NULL;
	struct events_ref reg, rel;
	char key[32], path[512], t[64];
	int r;

	to_ref(&x->regarding, &reg);
	to_ref(&x->related, &rel);
	micro_time(x->last_wall_ns, t);
	if (create) {
		r = events_build(&e->o, x->type, &reg, x->has_related ? &rel : NULL, x->reason,
				 x->action, x->note, x->name, x->first_wall_ns, &o);
	} else {
		o = json_object_new_object();
		r = o ? 0 : -ENOMEM;
	}
	if (!r && x->count >= 2) {
		struct json_object *s = json_object_new_object();

		r = jsonc_add(o, "series", s);
		r = r ?: jsonc_add(s, "count", json_object_new_int64(x->count));
		r = r ?: jsonc_add(s, "lastObservedTime", json_object_new_string(t));
	}
	(void)snprintf(key, sizeof(key), "ev%llu", (unsigned long long)x->id);
	if (create)
		(void)snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events",
			       x->regarding.ns);
	else
		(void)snprintf(path, sizeof(path), "/apis/events.k8s.io/v1/namespaces/%s/events/%s",
			       x->regarding.ns, x->name);
	if (!r)
		r = writer_put(e->w, key, create ? KUBE_CREATE : KUBE_PATCH, path,
			       create ? NULL : "application/merge-patch+json",
			       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), on_written,
			       e);
	if (r < 0) {
		drop(e, r == -EAGAIN ? "queue_full" : "error");
		if (!x->created)
			forget(e, x);
		return;
	}
	x->busy = true;
	x->flushed_ms = clock_now_ms();
	x->written = x->count;
}

static void on_written(void *ud, const char *key, const struct kube_result *r)
{
	struct events *e = ud;
	unsigned long long id;
	struct ev *x = num_parse_ull(key + 2, NULL, UINT64_MAX, &id) == 0 ? find_id(e, id) : NULL;
	bool was_create;

	if (!x)
		return;
	x->busy = false;
	was_create = !x->created;
	if (!r->error) {
		x->created = true;
		if (was_create) {
			e->st.created++;
			if (e->m_sent)
				metric_series_add(metric_with(e->m_sent, "create"), 1);
		} else {
			e->st.patched++;
			if (e->m_sent)
				metric_series_add(metric_with(e->m_sent, "patch"), 1);
		}
		return;
	}
	if (!was_create && r->error == -ENOENT) {
		/* the event expired: a new one carries the series on */
		x->created = false;
		(void)snprintf(x->name, sizeof(x->name), "%.200s.%llx", x->regarding.name,
			       (unsigned long long)wall_ns());
		ev_send(e, x, true);
		return;
	}
	drop(e, writer_is_transient(r->error) ? "unanswered" : "refused");
	log_debug("event_dropped", "reason=%s object=%s/%s error=%s", x->reason, x->regarding.ns,
		  x->regarding.name, log_quote(r->error_text));
	if (!x->created)
		forget(e, x);
}

/* Writes the series that grew, at most once per flush interval each, and
 * forgets the series whose window has passed. */
static void on_tick(evutil_socket_t fd, short what, void *ud)
{
	struct events *e = ud;
	int64_t now = clock_now_ms();

	(void)fd;
	(void)what;
	for (int i = e->n - 1; i >= 0; i--) {
		struct ev *x = e->evs[i];

		if (x->busy)
			continue;
		if (x->created && x->count > x->written) {
			if (now - x->flushed_ms >= e->o.flush_ms)
				ev_send(e, x, false);
			continue;
		}
		if (now - x->last_ms > e->o.series_window_ms)
			forget(e, x);
	}
}

static bool same(const struct ev *x, const char *reason, const char *action,
		 const struct ref *reg, const struct ref *rel, bool has_rel)
{
	return !strcmp(x->reason, reason) && !strcmp(x->action, action) &&
	       ref_eq(&x->regarding, reg) && x->has_related == has_rel &&
	       (!has_rel || ref_eq(&x->related, rel));
}

/* Room for one more series: the one seen longest ago that is not being
 * written makes way. */
static bool make_room(struct events *e)
{
	struct ev *old = NULL;

	if (e->n < EVENTS_MAX_SERIES)
		return true;
	for (int i = 0; i < e->n; i++)
		if (!e->evs[i]->busy && (!old || e->evs[i]->last_ms < old->last_ms))
			old = e->evs[i];
	if (!old)
		return false;
	forget(e, old);
	return true;
}

void events_record(struct events *e, enum events_type type, const struct events_ref *regarding,
		   const struct events_ref *related, const char *reason, const char *action,
		   const char *fmt, ...)
{
	struct ref reg, rel;
	struct ev *x = NULL;
	int64_t now;
	va_list ap;

	if (!e || (type == EVENTS_NORMAL && !e->o.normal))
		return;
	if (!regarding || !regarding->ns || !*regarding->ns || !regarding->name ||
	    !*regarding->name)
		return;
	e->st.recorded++;
	if (!ref_names_ok(regarding) || (related && !ref_names_ok(related))) {
		uint64_t held;

		drop(e, "invalid_object");
		if (ratelimit_pass(&e->invalid_rl, &held))
			log_warn("event_dropped", "reason=%s why=%s held_back=%llu", reason,
				 "\"the object's namespace or name is not a Kubernetes name\"",
				 (unsigned long long)held);
		return;
	}
	now = clock_now_ms();
	ref_copy(&reg, regarding);
	memset(&rel, 0, sizeof(rel));
	if (related)
		ref_copy(&rel, related);
	for (int i = 0; i < e->n; i++)
		if (same(e->evs[i], reason, action, &reg, &rel, related != NULL) &&
		    now - e->evs[i]->last_ms <= e->o.series_window_ms) {
			x = e->evs[i];
			break;
		}
	if (x) {
		x->count++;
		x->last_ms = now;
		x->last_wall_ns = wall_ns();
		e->st.merged++;
		if (x->created && !x->busy && now - x->flushed_ms >= e->o.flush_ms)
			ev_send(e, x, false);
		return; /* else on_tick writes it */
	}
	if (!make_room(e) || !(x = calloc(1, sizeof(*x)))) {
		drop(e, "queue_full");
		return;
	}
	x->id = ++e->next_id;
	x->type = type;
	copy_str(x->reason, sizeof(x->reason), reason);
	copy_str(x->action, sizeof(x->action), action);
	va_start(ap, fmt);
	(void)vsnprintf(x->note, sizeof(x->note), fmt, ap);
	va_end(ap);
	cut_utf8(x->note, EVENTS_NOTE_MAX);
	x->regarding = reg;
	x->related = rel;
	x->has_related = related != NULL;
	x->first_wall_ns = x->last_wall_ns = wall_ns();
	/* the name client-go gives: object name, nanoseconds in hex */
	(void)snprintf(x->name, sizeof(x->name), "%.200s.%llx", reg.name,
		       (unsigned long long)x->first_wall_ns);
	x->count = 1;
	x->last_ms = now;
	e->evs[e->n++] = x;
	ev_send(e, x, true);
}

void events_get_stats(const struct events *e, struct events_stats *ret)
{
	*ret = e->st;
}

int events_new(struct event_base *base, struct kube *k, const struct events_opts *o,
	       struct metrics *m, struct events **ret)
{
	_cleanup_(events_freep) struct events *e = calloc(1, sizeof(*e));
	struct writer_opts wo = { 0 };
	struct timeval tv = clock_tv_ms(1000);
	int r;

	if (!e)
		return -ENOMEM;
	e->base = base;
	e->o = *o;
	e->invalid_rl = (struct ratelimit)RATELIMIT_INIT(10000, 5);
	copy_str(e->controller, sizeof(e->controller), o->controller);
	copy_str(e->instance, sizeof(e->instance), o->instance);
	e->o.controller = e->controller;
	e->o.instance = e->instance;
	if (e->o.series_window_ms <= 0)
		e->o.series_window_ms = EVENTS_SERIES_WINDOW_MS;
	if (e->o.flush_ms <= 0)
		e->o.flush_ms = 10000;
	wo.max_jobs = o->max_queued > 0 ? o->max_queued : 32;
	wo.timeout_ms = o->timeout_ms;
	wo.max_attempts = o->max_attempts;
	r = writer_new(base, k, &wo, &e->w);
	if (r < 0)
		return r;
	e->tick = event_new(base, -1, EV_PERSIST, on_tick, e);
	if (!e->tick || event_add(e->tick, &tv) < 0)
		return -ENOMEM;
	if (m) {
		e->m_sent = metrics_family(m, MF_EVENTS_SENT_TOTAL);
		e->m_dropped = metrics_family(m, MF_EVENTS_DROPPED_TOTAL);
	}
	*ret = TAKE_PTR(e);
	return 0;
}

struct events *events_free(struct events *e)
{
	if (!e)
		return NULL;
	writer_free(e->w);
	if (e->tick)
		event_free(e->tick);
	for (int i = 0; i < e->n; i++)
		free(e->evs[i]);
	free(e);
	return NULL;
}
