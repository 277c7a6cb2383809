/* events: Kubernetes Events (events.k8s.io/v1) about what the driver decided,
 * where `kubectl describe` shows them, off every critical path.
 *
 *   events_record() --> series cache (isomorphic events merge) --> writer --> POST / PATCH
 *
 * Shaped as Kubernetes components shape them: reportingController and
 * reportingInstance, reason and action within EVENTS_REASON_MAX, a note cut
 * to EVENTS_NOTE_MAX bytes, a name unique per object ("<object>.<hex
 * nanoseconds>"). An event with the action, reason, regarding and related
 * object of one already sent within the series window is not sent again:
 * the first one becomes a series (series.count, series.lastObservedTime),
 * written with a JSON merge patch at most once per flush interval; a patch
 * answered 404 (the event expired) creates it again, series and all.
 *
 * Nothing waits: events_record() copies what it needs and returns; requests
 * go one at a time through a bounded queue (writer.h), and an event that
 * does not fit, or that the API server refuses or does not answer after a
 * few attempts, is dropped and counted in dra_cpu_events_dropped_total by
 * reason. Memory is bounded by EVENTS_MAX_SERIES cached events.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct event_base;
struct kube;
struct metrics;
struct events;
struct json_object;

#define EVENTS_API_VERSION "events.k8s.io/v1"
#define EVENTS_REASON_MAX 128	/* reason, action (validation of events.k8s.io/v1) */
#define EVENTS_INSTANCE_MAX 128 /* reportingInstance */
#define EVENTS_NOTE_MAX 1024	/* note, bytes */
#define EVENTS_MAX_SERIES 128
#define EVENTS_SERIES_WINDOW_MS (6 * 60 * 1000) /* a series ends 6 min after its last repeat */

enum events_type { EVENTS_NORMAL, EVENTS_WARNING };

/* An object an event is about (core/v1 ObjectReference); all strings; NULL
 * or "" fields are left out. */
struct events_ref {
	const char *api_version; /* "v1", "resource.k8s.io/v1" */
	const char *kind;	 /* "Pod", "ResourceClaim" */
	const char *ns;
	const char *name;
	const char *uid;
};

struct events_opts {
	const char *controller; /* reportingController: a qualified name ("dra.cpu") */
	const char *instance;	/* reportingInstance (< EVENTS_INSTANCE_MAX bytes) */
	bool normal;		/* send Normal events too (off: Warnings only) */
	int max_queued;		/* 0: 32 requests waiting or in flight */
	int timeout_ms;		/* 0: 5000 per attempt */
	int max_attempts;	/* 0: 3 */
	int series_window_ms;	/* 0: EVENTS_SERIES_WINDOW_MS */
	int flush_ms;		/* 0: 10000: at most one series patch per event per this */
};

/* base, k and m are borrowed (m may be NULL). */
int events_new(struct event_base *base, struct kube *k, const struct events_opts *o,
	       struct metrics *m, struct events **ret);
struct events *events_free(struct events *e);
DEFINE_FREEP(events, events_free)

/* Records an event about regarding (its ns is the event's namespace; an
 * object without one is not reported), related may be NULL. reason and
 * action are UpperCamelCase words; the note is printf-formatted. Never
 * blocks, never fails the caller: problems are counted. NULL e: no-op. */
void events_record(struct events *e, enum events_type type, const struct events_ref *regarding,
		   const struct events_ref *related, const char *reason, const char *action,
		   const char *fmt, ...) __attribute__((format(printf, 7, 8)));

struct events_stats {
	uint64_t recorded;  /* events_record() calls that passed the type filter */
	uint64_t created;   /* Events created */
	uint64_t patched;   /* series patches written */
	uint64_t merged;    /* repeats merged into a series */
	uint64_t dropped;   /* dropped: queue full, refused, unanswered */
};
void events_get_stats(const struct events *e, struct events_stats *ret);

/* The Event object as sent (a new json-c object; for tests and the fuzz
 * corpus): wall_ns is the eventTime, name the metadata.name. */
int events_build(const struct events_opts *o, enum events_type type,
		 const struct events_ref *regarding, const struct events_ref *related,
		 const char *reason, const char *action, const char *note, const char *name,
		 int64_t wall_ns, struct json_object **ret);
