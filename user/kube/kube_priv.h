/* kube_priv: what the files of the Kubernetes client share and nothing
 * outside it sees: struct kube, struct kube_call and the steps one file does
 * for another. The client is one module in several files (kube.c the loop,
 * the calls and the public API; the others named for the part they hold);
 * outside it struct kube stays opaque (kube.h). Not a public header: only
 * user/kube/kube*.c include it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include <curl/curl.h>
#include <event2/util.h>

#include "lib/backoff.h"
#include "lib/errbuf.h"
#include "lib/ratelimit.h"
#include "kube/kube.h"

struct event;
struct event_base;
struct kubeconfig;

enum call_kind { CALL_REQUEST, CALL_WATCH };

struct kube_call {
	struct kube *k;
	enum call_kind kind;
	TAILQ_ENTRY(kube_call) link;  /* k->calls: every live call */
	TAILQ_ENTRY(kube_call) ready; /* k->ready while in_ready */
	bool in_ready;
	bool busy;	   /* the dispatcher is working on it: do not free */
	bool cancelled;	   /* cancelled while busy: the dispatcher frees it */
	bool finished;	   /* final callback delivered: the dispatcher frees it */
	bool done;	   /* the current attempt is over (curl finished or never started) */
	bool paused;	   /* watch: write callback returned CURL_WRITEFUNC_PAUSE */
	bool auth_retried; /* the one 401 retry has been used */
	bool status_seen;  /* watch: response code looked at in the write callback */
	bool stream_ok;	   /* watch: 200, bytes go to the line splitter */
	bool sent;	   /* the request left this host (pretransfer happened) */

	/* what to do */
	enum kube_verb verb;
	char *url;
	char *body;
	size_t body_len;
	char *content_type;
	int timeout_ms;
	int64_t deadline; /* clock_now_ms() after which no attempt starts; 0 = none */
	size_t max_body;
	int max_attempts;
	unsigned attempts;
	struct backoff bo;
	struct event *retry_ev;

	/* the current attempt */
	CURL *easy;
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	CURLcode cres;
	int local_err; /* set by our callbacks: -E2BIG, -ENOMEM, -EPROTO */
	long http_status;
	long proxy_status; /* the proxy's answer to CONNECT, 0 without a proxy */
	long retry_after_s;
	char *in; /* response body (non-stream) */
	size_t in_len, in_cap;
	struct kube_lines lines; /* watch stream */
	struct json_object *end_status; /* watch: the ERROR event's Status */
	char *warning;
	struct errbuf errtext;

	kube_done_fn done_cb;
	kube_event_fn on_event;
	kube_watch_end_fn on_end;
	void *userdata;
};

/* The watch handle is the call itself: kube_watch_stop() = kube_call_cancel(). */
struct kube_watch {
	struct kube_call call;
};

/* A client certificate or key file and what was last read from it. */
struct cred_file {
	const char *path; /* borrowed from k->cfg; NULL when the PEM is inline */
	const char *label;
	struct stat st;	  /* of the file when it was read */
	char *pem;
	size_t len;
};

struct kube {
	struct event_base *base;
	struct kubeconfig *cfg;
	struct kube_opts o;
	char *user_agent;
	char *token;
	char *proxy;   /* CURLOPT_PROXY: "" = direct */
	char *noproxy; /* CURLOPT_NOPROXY */
	struct cred_file cert, key;
	bool cert_failing;
	CURLM *multi;
	struct event *timer;	/* curl's timeout */
	struct event *token_ev; /* periodic token file re-read */
	TAILQ_HEAD(kube_call_list, kube_call) calls;
	TAILQ_HEAD(kube_ready_list, kube_call) ready;
	LIST_HEAD(kube_sock_list, kube_sock) socks;
	bool dispatching;
	bool dead; /* kube_free() called during dispatch: destroy on the way out */
	bool global_init;
	bool token_failing;
	struct ratelimit slow_rl; /* slow_dispatch lines */
	struct kube_stats st;
};

/* kube_proxy.c: logs the proxy's scheme, host and port, never its URL (which
 * may hold a password); nothing for "" (direct). */
void kube_proxy_log(const char *proxy);

/* kube_cred.c: the client certificate and key, the token. */
void kube_cred_file_done(struct cred_file *f);
bool kube_cred_refresh(struct kube *k, bool initial);
void kube_token_reload(struct kube *k, const char *why);
void kube_on_token_timer(evutil_socket_t fd, short what, void *arg);

/* kube.c: the calls. kube_call_mark_ready() puts c on the ready queue,
 * where the dispatcher finds it; kube_path_ok() is the last gate on what
 * may go to the server as a request path. */
bool kube_path_ok(const char *p);
int kube_call_new(struct kube *k, enum call_kind kind, const char *path, struct kube_call **ret);
void kube_call_free(struct kube_call *c);
void kube_call_mark_ready(struct kube_call *c);

/* kube_attempt.c: one HTTP attempt of a call. */
int kube_errno_from_curl(CURLcode c);
int kube_call_start(struct kube_call *c);
void kube_call_stop_easy(struct kube_call *c);
void kube_call_collect(struct kube_call *c, CURLcode res);

/* kube_watch.c: delivers complete watch lines. Returns 0, or < 0 when the
 * stream must end (bad line; an ERROR event sets end_status and returns
 * -ECANCELED). */
int kube_watch_drain(struct kube_call *c);
