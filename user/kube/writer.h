/* writer: background writes to the API server that nobody waits for (Events,
 * ResourceClaim device status), off every critical path.
 *
 *   writer_put(key, request) --> bounded queue --> one request in flight --> done(result)
 *                                  (same key: the newer request replaces the queued one)
 *
 * One request at a time, whatever the queue holds: over HTTP/1.1 the API
 * client has KUBE_MAX_CONNECTIONS connections, and a stalled server must
 * not let these writes take the ones a Prepare needs for its claim read.
 * The queue holds at most max_jobs requests; writer_put() beyond that is
 * -EAGAIN and the caller drops and counts. A request that fails with a
 * transient error (transport, 429, 5xx, timeout) goes back to the end of the
 * queue after an exponential backoff, at most max_attempts times in all;
 * any other answer (403, 404, 409, 422...) is final. writer_put() never
 * blocks and never calls back from inside itself.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"
#include "kube/kube.h"

struct event_base;
struct writer;

#define WRITER_MAX_JOBS 64
#define WRITER_KEY_MAX 96

struct writer_opts {
	int max_jobs;		     /* 0: WRITER_MAX_JOBS */
	int timeout_ms;		     /* 0: 5000: one attempt, whole */
	int max_attempts;	     /* 0: 3 */
	uint32_t backoff_initial_ms; /* 0: 500 */
	uint32_t backoff_max_ms;     /* 0: 8000 */
};

/* The final answer for key: r->error 0 on success. Everything borrowed for
 * the call. May call writer_put(). */
typedef void (*writer_done_fn)(void *ud, const char *key, const struct kube_result *r);

/* base and k are borrowed and must outlive the writer. */
int writer_new(struct event_base *base, struct kube *k, const struct writer_opts *o,
	       struct writer **ret);
/* Cancels what is in flight and drops the queue, without callbacks. NULL-safe. */
struct writer *writer_free(struct writer *w);
DEFINE_FREEP(writer, writer_free)

/* Queues a request (verb, path, content type for PATCH, body: all copied;
 * key < WRITER_KEY_MAX bytes). A queued request of the same key is
 * replaced (its done is not called). Returns 0, -EAGAIN (queue full),
 * -EINVAL or -ENOMEM; done runs later, exactly once, unless replaced. */
int writer_put(struct writer *w, const char *key, enum kube_verb verb, const char *path,
	       const char *content_type, const char *body, writer_done_fn done, void *ud);

/* Requests queued or in flight. */
size_t writer_pending(const struct writer *w);

/* True for the errors a retry may cure. */
bool writer_is_transient(int error);
