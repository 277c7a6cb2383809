/* The daemon's HTTP endpoint (libevent evhttp): /healthz, /readyz, /metrics.
 *
 * /healthz is 200 once every part the daemon registered as required reports
 * healthy (the kubelet confirmed registration, slices published...), 503 with
 * the parts still missing otherwise; /readyz the same for readiness.
 * /metrics renders the registry. Handlers do bounded work on the loop.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct event_base;
struct metrics;
struct httpd;

/* Checks: a named condition, one bit each (at most 16). */
enum httpd_check_kind { HTTPD_HEALTH = 1, HTTPD_READY = 2 };

/* addr: "host:port", ":port" or "[v6]:port". -EINVAL on a bad address,
 * -errno when the bind fails. metrics is borrowed. */
int httpd_new(struct event_base *base, const char *addr, struct metrics *m, struct httpd **ret);
struct httpd *httpd_free(struct httpd *h);
DEFINE_FREEP(httpd, httpd_free)

/* The port actually bound (useful with port 0). */
int httpd_port(const struct httpd *h);

/* Declares a check (kinds: HTTPD_HEALTH|HTTPD_READY); it starts failing.
 * Returns its id (>= 0) for httpd_check_set(). */
int httpd_check_add(struct httpd *h, const char *name, int kinds);
void httpd_check_set(struct httpd *h, int id, bool ok);
