/* The Kubernetes client's watches: starting one (its stream time follows
 * the timeoutSeconds its query asks the server for) and delivering the
 * complete lines of its stream as events. See kube.h, and "Watch
 * back-pressure" in kube.c.
 *
 * Apart from kube.c because a watch is a call that never answers once: what
 * differs from a request is here, what they share (attempts, the queue,
 * results) is in kube.c and kube_attempt.c.
 */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/num.h"
#include "kube/kube_priv.h"

/* Delivers complete watch lines. Returns 0, or < 0 when the stream must end
 * (bad line; an ERROR event sets end_status and returns -ECANCELED). */
int kube_watch_drain(struct kube_call *c)
{
	struct kube *k = c->k;
	char *line;
	size_t n;
	int r;

	while (kube_lines_next(&c->lines, &line, &n) == 1) {
		struct kube_watch_event ev;

		r = kube_watch_event_parse(line, n, &ev);
		if (r < 0) {
			errbuf_set(&c->errtext, "watch: not a watch event (%zu bytes): %.64s", n,
				   line);
			for (char *p = c->errtext.s; *p; p++)
				if ((unsigned char)*p < 0x20)
					*p = ' ';
			return r == -E2BIG ? r : -EPROTO;
		}
		if (ev.type == KUBE_EVENT_ERROR) {
			c->end_status = json_object_get(ev.object);
			kube_watch_event_done(&ev);
			return -ECANCELED;
		}
		k->st.watch_events++;
		c->on_event(c->userdata, &ev);
		kube_watch_event_done(&ev);
		if (k->dead || c->cancelled)
			return 0;
	}
	return 0;
}

int kube_watch_deadline_ms(int timeout_s)
{
	return timeout_s * 1000 + (timeout_s * 100 < 30000 ? timeout_s * 100 : 30000) + 1000;
}

/* The stream time of a watch whose query asks the server for timeoutSeconds=N
 * (kube_watch_deadline_ms), so a stream that went silent is noticed soon
 * after the server should have ended it, not after the client default. 0 when
 * the query has no usable timeoutSeconds. */
static int watch_timeout_from_query(const char *path)
{
	const char *q = strchr(path, '?'), *v, *end;
	int n;

	for (v = q; v; v = strchr(v + 1, '&'))
		if (strncmp(v + 1, "timeoutSeconds=", 15) == 0)
			break;
	if (!v)
		return 0;
	v += 16;
	if (num_parse_int(v, &end, 1, 86400, &n) < 0 || (*end && *end != '&'))
		return 0;
	return kube_watch_deadline_ms(n);
}

int kube_watch(struct kube *k, const char *path_with_query, const struct kube_watch_opts *o,
	       kube_event_fn on_event, kube_watch_end_fn on_end, void *userdata,
	       struct kube_watch **ret)
{
	int asked;

	static const struct kube_watch_opts none;
	struct kube_call *c = NULL;
	int r;

	if (!o)
		o = &none;
	if (!k || !on_event || !on_end || !kube_path_ok(path_with_query) || o->timeout_ms < 0)
		return -EINVAL;
	if (k->dead)
		return -ESHUTDOWN;
	r = kube_call_new(k, CALL_WATCH, path_with_query, &c);
	if (r < 0)
		return r;
	c->verb = KUBE_GET;
	c->on_event = on_event;
	c->on_end = on_end;
	c->userdata = userdata;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : k->o.watch_timeout_ms;
	asked = watch_timeout_from_query(path_with_query);
	if (!o->timeout_ms && asked && asked < c->timeout_ms)
		c->timeout_ms = asked;
	c->max_body = k->o.max_body;
	c->max_attempts = 1;
	c->lines.max_line = o->max_line && o->max_line < k->o.max_line ? o->max_line
									: k->o.max_line;
	r = kube_call_start(c);
	if (r < 0) {
		kube_call_free(c);
		return r;
	}
	if (ret)
		*ret = (struct kube_watch *)c;
	return 0;
}

void kube_watch_stop(struct kube_watch *w)
{
	kube_call_cancel(w ? &w->call : NULL);
}
