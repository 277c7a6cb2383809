/* A small Prometheus registry: counter, gauge and histogram families with
 * optional labels, rendered in text format 0.0.4 for /metrics.
 *
 * The driver's families are one table, obs/metric_families.def (name, type,
 * help, label names, buckets); code registers one by its id, once at start,
 * and never writes a family's name or help itself. Series are created on
 * first use of a label combination and live as long as the registry, so hot
 * paths keep the series handle:
 *
 *	struct metric *f = metrics_family(m, MF_PREPARE_CLAIMS_TOTAL);
 *	struct metric_series *ok = metric_with(f, "success");
 *	metric_series_add(ok, 1);
 *
 * metrics_counter() and the like register a family that is not in the
 * table: for the registry's own tests (the driver's test suite checks that
 * nothing under user/ but this module calls them).
 *
 * Values that live elsewhere (BPF maps, state) are pulled by collectors, run
 * just before each render. Label values are escaped on output. Single-threaded
 * (the loop), no locks.
 */
#pragma once

#include <stddef.h>

#include "lib/cleanup.h"

struct metrics;
struct metric;
struct metric_series;
struct evbuffer;

int metrics_new(struct metrics **ret);
struct metrics *metrics_free(struct metrics *m);
DEFINE_FREEP(metrics, metrics_free)

/* The families of obs/metric_families.def, by id: MF_<name without dra_cpu_>. */
enum metric_family {
#define MW(...)
#define MB(...)
#define MF(id, ...) MF_##id,
#include "obs/metric_families.def"
#undef MF
#undef MB
#undef MW
	MF_COUNT
};

/* The number of bounds of each bucket set (MB_N_<set>), for code that
 * buckets values itself (the bounds: metrics_family_bounds()). */
enum {
#define MW(...)
#define MB(set, ...) MB_N_##set = (int)(sizeof((const double[]){ __VA_ARGS__ }) / sizeof(double)),
#define MF(...)
#include "obs/metric_families.def"
#undef MF
#undef MB
#undef MW
};

/* Registers family id of the table, or returns it when registered already
 * (cheap: collectors may call it at every render). NULL on ENOMEM or an id
 * out of range. */
struct metric *metrics_family(struct metrics *m, enum metric_family id);
/* The bucket bounds of a histogram of the table (*ret_n of them); NULL and 0
 * for other families. */
const double *metrics_family_bounds(enum metric_family id, int *ret_n);

/* label_names: NULL or a comma-separated list ("cpu,kind"). Returns the family,
 * or NULL on ENOMEM or a bad name (our bug: logged). Registering a name twice
 * returns the existing family. */
struct metric *metrics_counter(struct metrics *m, const char *name, const char *help,
			       const char *label_names);
struct metric *metrics_gauge(struct metrics *m, const char *name, const char *help,
			     const char *label_names);
/* bounds: ascending upper bounds (without +Inf), copied. */
struct metric *metrics_histogram(struct metrics *m, const char *name, const char *help,
				 const char *label_names, const double *bounds, int n_bounds);

/* The series of a label combination: exactly one value per label name.
 * Created on first use. NULL on ENOMEM or a wrong count. The macro adds the
 * typed sentinel (a bare NULL in a variadic call is not portable). */
struct metric_series *metric_with_labels(struct metric *f, ...) __attribute__((sentinel));
#define metric_with(...) metric_with_labels(__VA_ARGS__, (const char *)NULL)

void metric_series_add(struct metric_series *s, double v);
void metric_series_set(struct metric_series *s, double v);
void metric_series_observe(struct metric_series *s, double v);
/* Replaces a histogram series with counts bucketed elsewhere (a BPF map):
 * counts[i] observations fell at or below bounds[i] and above bounds[i-1],
 * counts[n_bounds] above the last bound (n_bounds + 1 entries, not
 * cumulative); sum is the sum of all observations. No-op on other types. */
void metric_series_set_histogram(struct metric_series *s, const unsigned long long *counts,
				 double sum);
/* Drops every series of a family, for families a collector rebuilds at each
 * render: they are hidden until set again, and freed at the next reset if
 * they were not (so a handle to a series of f is valid only until the second
 * reset that follows; collectors take theirs anew with metric_with()). */
void metric_reset(struct metric *f);
/* Series f holds, shown or hidden (what metric_reset() bounds). */
size_t metric_series_count(const struct metric *f);

/* Shortcuts for families without labels (NULL-safe, like the series calls). */
void metric_add(struct metric *f, double v);
void metric_set(struct metric *f, double v);
void metric_observe(struct metric *f, double v);

/* Called before each render, in registration order. */
typedef void (*metrics_collect_fn)(struct metrics *m, void *userdata);
int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *userdata);

/* Runs the collectors and appends the text exposition to out. */
int metrics_render(struct metrics *m, struct evbuffer *out);
