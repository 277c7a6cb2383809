/* writer: a bounded queue of background API writes, one in flight. See writer.h. */
#include "kube/writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/backoff.h"
#include "lib/clock.h"

struct job {
	struct job *next;
	char key[WRITER_KEY_MAX];
	enum kube_verb verb;
	char *path, *ctype, *body;
	writer_done_fn done;
	void *ud;
	int attempts;	  /* made so far */
	int64_t due_ms;	  /* not sent before */
	struct backoff bo;
};

struct writer {
	struct event_base *base;
	struct kube *kube;
	struct writer_opts o;
	struct job *head, *tail; /* queued, FIFO */
	size_t n_queued;
	struct job *cur;	 /* in flight */
	struct kube_call *call;
	struct event *timer;	 /* the next due job */
};

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->path);
	free(j->ctype);
	free(j->body);
	free(j);
}

bool writer_is_transient(int e)
{
	switch (e) {
	case -EAGAIN: case -EIO: case -ETIMEDOUT: case -ECONNREFUSED: case -ECONNRESET:
	case -EHOSTUNREACH: case -ECONNABORTED:
		return true;
	default:
		return false;
	}
}

static void append(struct writer *w, struct job *j)
{
	j->next = NULL;
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	w->n_queued++;
}

static void unlink_job(struct writer *w, struct job *prev, struct job *j)
{
	if (prev)
		prev->next = j->next;
	else
		w->head = j->next;
	if (w->tail == j)
		w->tail = prev;
	j->next = NULL;
	w->n_queued--;
}

static void on_done(void *ud, const struct kube_result *r);

/* Sends the first due job if nothing is in flight; else arms the timer for
 * the earliest one. */
static void pump(struct writer *w)
{
	struct kube_req_opts ro = { .timeout_ms = w->o.timeout_ms, .max_attempts = 1 };
	int64_t now = clock_now_ms(), next = INT64_MAX;
	struct job *prev = NULL;

	if (w->cur)
		return;
	for (struct job *j = w->head; j; prev = j, j = j->next) {
		struct timeval tv;
		int r;

		if (j->due_ms > now) {
			if (j->due_ms < next)
				next = j->due_ms;
			continue;
		}
		unlink_job(w, prev, j);
		ro.content_type = j->ctype;
		j->attempts++;
		r = kube_request(w->kube, j->verb, j->path, j->body, &ro, on_done, w, &w->call);
		if (r < 0) {
			struct kube_result res = { .error = r, .error_text = strerror(-r),
						   .retry_after_s = -1 };

			j->done(j->ud, j->key, &res);
			job_free(j);
			/* the list changed under us: start over on the next turn */
			tv = clock_tv_ms(0);
			(void)event_add(w->timer, &tv);
			return;
		}
		w->cur = j;
		return;
	}
	if (next != INT64_MAX) {
		struct timeval tv = clock_tv_ms(next - now);

		(void)event_add(w->timer, &tv);
	}
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	pump(ud);
}

static void on_done(void *ud, const struct kube_result *r)
{
	struct writer *w = ud;
	struct job *j = w->cur;

	w->cur = NULL;
	w->call = NULL;
	if (r->error && writer_is_transient(r->error) && j->attempts < w->o.max_attempts) {
		uint32_t floor = r->retry_after_s > 0 ? (uint32_t)r->retry_after_s * 1000u : 0;
		struct job *newer = NULL;

		/* a newer request of the key already queued wins over the retry */
		for (struct job *q = w->head; q; q = q->next)
			if (strcmp(q->key, j->key) == 0)
				newer = q;
		if (!newer) {
			j->due_ms = clock_now_ms() + backoff_next_at_least(&j->bo, floor);
			append(w, j);
			pump(w);
			return;
		}
	}
	j->done(j->ud, j->key, r);
	job_free(j);
	pump(w);
}

int writer_put(struct writer *w, const char *key, enum kube_verb verb, const char *path,
	       const char *content_type, const char *body, writer_done_fn done, void *ud)
{
	struct job *j, *prev = NULL;
	struct timeval tv = clock_tv_ms(0);

	if (!key || strlen(key) >= WRITER_KEY_MAX || !path || !done)
		return -EINVAL;
	for (j = w->head; j; prev = j, j = j->next)
		if (strcmp(j->key, key) == 0)
			break;
	if (j)
		unlink_job(w, prev, j); /* replaced: the newer request wins */
	else if (w->n_queued >= (size_t)w->o.max_jobs)
		return -EAGAIN;
	job_free(j);
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	memcpy(j->key, key, strlen(key) + 1);
	j->verb = verb;
	j->path = strdup(path);
	j->ctype = content_type ? strdup(content_type) : NULL;
	j->body = body ? strdup(body) : NULL;
	if (!j->path || (content_type && !j->ctype) || (body && !j->body)) {
		job_free(j);
		return -ENOMEM;
	}
	j->done = done;
	j->ud = ud;
	backoff_init(&j->bo, w->o.backoff_initial_ms, w->o.backoff_max_ms);
	append(w, j);
	/* sent from the loop, never from inside the caller */
	if (!w->cur)
		(void)event_add(w->timer, &tv);
	return 0;
}

size_t writer_pending(const struct writer *w)
{
	return w->n_queued + (w->cur ? 1 : 0);
}

int writer_new(struct event_base *base, struct kube *k, const struct writer_opts *o,
	       struct writer **ret)
{
	struct writer *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->base = base;
	w->kube = k;
	if (o)
		w->o = *o;
	if (w->o.max_jobs <= 0)
		w->o.max_jobs = WRITER_MAX_JOBS;
	if (w->o.timeout_ms <= 0)
		w->o.timeout_ms = 5000;
	if (w->o.max_attempts <= 0)
		w->o.max_attempts = 3;
	if (!w->o.backoff_initial_ms)
		w->o.backoff_initial_ms = 500;
	if (!w->o.backoff_max_ms)
		w->o.backoff_max_ms = 8000;
	w->timer = evtimer_new(base, on_timer, w);
	if (!w->timer) {
		free(w);
		return -ENOMEM;
	}
	*ret = w;
	return 0;
}

struct writer *writer_free(struct writer *w)
{
	if (!w)
		return NULL;
	if (w->call)
		kube_call_cancel(w->call);
	job_free(w->cur);
	while (w->head) {
		struct job *j = w->head;

		w->head = j->next;
		job_free(j);
	}
	event_free(w->timer);
	free(w);
	return NULL;
}
