/* The daemon's HTTP endpoint (libevent evhttp): /healthz, /readyz, /metrics,
 * and the documents other parts add with httpd_document() (/nodemap).
 *
 * /healthz is 200 once every part the daemon registered as required reports
 * healthy (the kubelet confirmed registration, slices published...), 503 with
 * the parts still missing otherwise; /readyz the same for readiness.
 * /metrics renders the registry. Handlers do bounded work on the loop.
 *
 * The port is open to every pod of the node, so nobody who can connect may
 * starve the kubelet's probes: at most max_conns connections are open (a new
 * one closes the least recently active), each closes after idle_timeout_ms
 * without progress, and running out of descriptors closes our own idle
 * connections or sheds the waiting ones instead of retrying accept() in a
 * loop. What happened is counted in dra_cpu_http_* metrics and logged at
 * most once per interval.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct event_base;
struct metrics;
struct httpd;

/* Checks: a named condition, one bit each (at most 16). */
enum httpd_check_kind { HTTPD_HEALTH = 1, HTTPD_READY = 2 };

#define HTTPD_MAX_CONNS_DEFAULT 64
#define HTTPD_IDLE_TIMEOUT_MS_DEFAULT 5000

struct httpd_opts {
	int max_conns;	     /* open connections at most; 0: HTTPD_MAX_CONNS_DEFAULT */
	int idle_timeout_ms; /* without a byte read or written; 0: the default */
};

/* addr: "host:port", ":port" or "[v6]:port". opts: NULL for the defaults.
 * -EINVAL on a bad address or option, -errno when the bind fails. metrics is
 * borrowed. */
int httpd_new(struct event_base *base, const char *addr, const struct httpd_opts *opts,
	      struct metrics *m, struct httpd **ret);
struct httpd *httpd_free(struct httpd *h);
DEFINE_FREEP(httpd, httpd_free)

/* The port actually bound (useful with port 0). */
int httpd_port(const struct httpd *h);

/* Open connections, those accepted but not yet set up included. */
int httpd_connections(const struct httpd *h);

/* Declares a check (kinds: HTTPD_HEALTH|HTTPD_READY); it starts failing.
 * Returns its id (>= 0) for httpd_check_set(). */
int httpd_check_add(struct httpd *h, const char *name, int kinds);
void httpd_check_set(struct httpd *h, int id, bool ok);

/* A GET path served as a JSON document: fn appends it to out on the loop
 * (bounded work) and returns 0, or -errno for a 500. At most 8 documents. */
struct evbuffer;
typedef int (*httpd_document_fn)(void *ud, struct evbuffer *out);
int httpd_document(struct httpd *h, const char *path, httpd_document_fn fn, void *ud);
