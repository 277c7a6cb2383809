/* schedwatch: the real-time capacity of a node, followed while it runs.
 *
 * What deadline tasks may use on a real-time CPU (host/sched.h) changes
 * under a running driver: an admin writes a server's runtime in debugfs or
 * a sysctl, a sched_ext scheduler is loaded and its server with it. The
 * kernel tells nobody (debugfs has no inotify for its own changes), so the
 * limits are read again every period_ms on the loop, a few small files per
 * real-time CPU. A change of what would be published (capacity, period
 * range) goes to the callback once; a read that fails keeps the last limits
 * and is logged once until reads work again. That the servers are the
 * kernel's defaults (debugfs not mounted or not readable) is logged once.
 *
 *   schedwatch_new ──read──> limits ──every period_ms──> read ──changed──> on_change
 */
#pragma once

#include <stdint.h>

#include "host/sched.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct event_base;
struct errbuf;
struct schedwatch;

/* now: the new limits (borrowed for the call); before: what was in effect. */
typedef void (*schedwatch_fn)(void *ud, const struct sched_limits *now,
			      const struct sched_limits *before);

struct schedwatch_opts {
	const char *root;	/* "" or NULL: this machine */
	const char *release;	/* NULL: uname() */
	struct cpuset cpus;	/* the real-time CPUs: only their servers count */
	int64_t headroom_milli; /* sched_limits_opts.headroom_milli */
	int period_ms;		/* 0: SCHEDWATCH_PERIOD_MS; < 0: never re-read */
	schedwatch_fn on_change;
	void *ud;
};

#define SCHEDWATCH_PERIOD_MS 2000

/* Reads the limits once (errors as sched_limits_read_opts(), eb filled) and
 * starts re-reading. base and the callback's ud are borrowed. */
int schedwatch_new(struct event_base *base, const struct schedwatch_opts *o,
		   struct schedwatch **ret, struct errbuf *eb);

/* The limits in effect (borrowed until the next change). */
const struct sched_limits *schedwatch_limits(const struct schedwatch *w);

/* Reads again now (what the timer does): 1 when the published limits
 * changed (the callback ran), 0 when not, < 0 when the read failed (the
 * last limits stay). */
int schedwatch_poll(struct schedwatch *w);

/* Re-reads that found a change, and that failed, since start. */
uint64_t schedwatch_changes(const struct schedwatch *w);
uint64_t schedwatch_failures(const struct schedwatch *w);

/* NULL-safe; returns NULL. */
struct schedwatch *schedwatch_free(struct schedwatch *w);
DEFINE_FREEP(schedwatch, schedwatch_free)
