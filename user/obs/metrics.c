/* Prometheus registry and text exposition (format 0.0.4).
 *
 *   metrics ── families[] (registration order = render order)
 *                 └── series list (label values + value or histogram buckets)
 *
 * Families are never freed before the registry, nor are series of families
 * nobody resets, so handles to them stay valid. metric_reset() is for
 * families a collector rebuilds at every render: it zeroes and hides the
 * series that were set since the previous reset (their label sets usually
 * come back, and keep their allocation) and frees those that were not, so a
 * family that follows changing label sets (containers, claims) holds only
 * what the last two renders named, not everything it ever saw.
 */
#include "obs/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#define LOG_MOD "metrics"
#include "lib/hashtab.h"
#include "lib/log.h"

#define METRIC_MAX_LABELS 6
/* Bytes of the label values of one series, with a NUL after each: far above
 * any name we label with; a larger set is refused (the series is NULL, which
 * every metric_series_*() takes as "not counted"). */
#define METRIC_KEY_MAX 4096

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

struct metric_series {
	struct metric_series *next;
	struct metric *family;
	char *values[METRIC_MAX_LABELS];
	bool live; /* false after metric_reset() until touched again */
	double value;
	double sum;
	unsigned long long count;
	unsigned long long *buckets; /* n_bounds cumulative-on-render counts */
};

struct metric {
	const char *name, *help;
	enum metric_type type;
	int n_labels;
	char *labels[METRIC_MAX_LABELS];
	double *bounds;
	int n_bounds;
	struct metric_series *series, **tail;
	/* Series by label values (see series_key()): labelled families can hold
	 * thousands of series (one per exclusive CPU), looked up at every scrape. */
	struct hashtab index;
};

struct collector {
	metrics_collect_fn fn;
	void *userdata;
};

/* The table, obs/metric_families.def: its bucket sets, the conditions a
 * family exists under (only type-checked here; docs/metrics.md says what
 * each means), then one entry per enum metric_family. */
#define MW(...)
#define MB(set, ...) static const double buckets_##set[] = { __VA_ARGS__ };
#define MF(...)
#include "obs/metric_families.def"
#undef MF
#undef MB
#undef MW

enum family_when {
#define MW(when, doc) WHEN_##when,
#define MB(...)
#define MF(...)
#include "obs/metric_families.def"
#undef MF
#undef MB
#undef MW
};

#define buckets_NONE NULL
#define MB_N_NONE 0

static const struct family_def {
	const char *name, *help, *label_names;
	enum metric_type type;
	enum family_when when;
	const double *bounds;
	int n_bounds;
} family_defs[MF_COUNT] = {
#define MW(...)
#define MB(...)
#define MF(id, type_, name_, labels_, when_, set_, help_)                                    \
	[MF_##id] = { .name = name_,                                                         \
		      .help = help_,                                                         \
		      .label_names = labels_,                                                \
		      .type = METRIC_##type_,                                                \
		      .when = WHEN_##when_,                                                  \
		      .bounds = buckets_##set_,                                              \
		      .n_bounds = MB_N_##set_ },
#include "obs/metric_families.def"
#undef MF
#undef MB
#undef MW
};

struct metrics {
	struct metric *by_id[MF_COUNT]; /* the table's families registered */
	struct metric **families;
	int n_families;
	struct collector *collectors;
	int n_collectors;
};

int metrics_new(struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	*ret = m;
	return 0;
}

static void series_free(struct metric_series *s, int n_labels)
{
	for (int i = 0; i < n_labels; i++)
		free(s->values[i]);
	free(s->buckets);
	free(s);
}

static void family_free(struct metric *f)
{
	struct metric_series *s, *next;

	for (s = f->series; s; s = next) {
		next = s->next;
		series_free(s, f->n_labels);
	}
	for (int i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->bounds);
	hashtab_done(&f->index);
	free(f);
}

struct metrics *metrics_free(struct metrics *m)
{
	if (!m)
		return NULL;
	for (int i = 0; i < m->n_families; i++)
		family_free(m->families[i]);
	free(m->families);
	free(m->collectors);
	free(m);
	return NULL;
}

static struct metric_series *series_find(struct metric *f, const char *const *values);

static bool name_ok(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
			return false;
	return true;
}

static struct metric *family_add(struct metrics *m, enum metric_type type, const char *name,
				 const char *help, const char *label_names, const double *bounds,
				 int n_bounds)
{
	struct metric *f, **fams;

	for (int i = 0; i < m->n_families; i++)
		if (strcmp(m->families[i]->name, name) == 0)
			return m->families[i]->type == type ? m->families[i] : NULL;
	if (!name_ok(name)) {
		log_error("metric_bad_name", "name=%s", log_quote(name));
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->name = name;
	f->help = help;
	f->type = type;
	f->tail = &f->series;
	if (label_names && *label_names) {
		const char *p = label_names;

		while (*p) {
			size_t len = strcspn(p, ",");

			if (f->n_labels == METRIC_MAX_LABELS ||
			    !(f->labels[f->n_labels] = strndup(p, len)) ||
			    !name_ok(f->labels[f->n_labels++])) {
				log_error("metric_bad_labels", "name=%s labels=%s", name,
					  log_quote(label_names));
				family_free(f);
				return NULL;
			}
			p += len + (p[len] == ',');
		}
	}
	if (type == METRIC_HISTOGRAM) {
		f->bounds = malloc(sizeof(double) * (size_t)(n_bounds > 0 ? n_bounds : 1));
		if (!f->bounds) {
			family_free(f);
			return NULL;
		}
		for (int i = 0; i < n_bounds; i++)
			f->bounds[i] = bounds[i];
		f->n_bounds = n_bounds;
	}
	/* A family without labels always shows (0 before the first event), so
	 * alerts and dashboards see a value, not an absent series. */
	if (f->n_labels == 0) {
		struct metric_series *s = series_find(f, NULL);

		if (!s) {
			family_free(f);
			return NULL;
		}
		s->live = true;
	}
	fams = realloc(m->families, sizeof(*fams) * (size_t)(m->n_families + 1));
	if (!fams) {
		family_free(f);
		return NULL;
	}
	m->families = fams;
	m->families[m->n_families++] = f;
	return f;
}

struct metric *metrics_counter(struct metrics *m, const char *name, const char *help,
			       const char *label_names)
{
	return family_add(m, METRIC_COUNTER, name, help, label_names, NULL, 0);
}

struct metric *metrics_gauge(struct metrics *m, const char *name, const char *help,
			     const char *label_names)
{
	return family_add(m, METRIC_GAUGE, name, help, label_names, NULL, 0);
}

struct metric *metrics_histogram(struct metrics *m, const char *name, const char *help,
				 const char *label_names, const double *bounds, int n_bounds)
{
	for (int i = 1; i < n_bounds; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return NULL;
	return family_add(m, METRIC_HISTOGRAM, name, help, label_names, bounds, n_bounds);
}

struct metric *metrics_family(struct metrics *m, enum metric_family id)
{
	const struct family_def *d;

	if ((unsigned)id >= MF_COUNT)
		return NULL;
	if (m->by_id[id])
		return m->by_id[id];
	d = &family_defs[id];
	m->by_id[id] = d->type == METRIC_HISTOGRAM
			       ? metrics_histogram(m, d->name, d->help, d->label_names, d->bounds,
						   d->n_bounds)
			       : family_add(m, d->type, d->name, d->help, d->label_names, NULL, 0);
	return m->by_id[id];
}

const double *metrics_family_bounds(enum metric_family id, int *ret_n)
{
	bool hist = (unsigned)id < MF_COUNT && family_defs[id].type == METRIC_HISTOGRAM;

	*ret_n = hist ? family_defs[id].n_bounds : 0;
	return hist ? family_defs[id].bounds : NULL;
}

/* The index key of a label set: each value followed by its NUL, so ("a","bc")
 * and ("ab","c") differ. -E2BIG past METRIC_KEY_MAX. */
static int series_key(const struct metric *f, const char *const *values, char *key, size_t *ret_len)
{
	size_t len = 0;

	for (int i = 0; i < f->n_labels; i++) {
		size_t n = strlen(values[i]) + 1;

		if (n > METRIC_KEY_MAX - len)
			return -E2BIG;
		memcpy(key + len, values[i], n);
		len += n;
	}
	*ret_len = len;
	return 0;
}

static struct metric_series *series_find(struct metric *f, const char *const *values)
{
	struct metric_series *s;
	char key[METRIC_KEY_MAX];
	size_t len = 0;

	if (f->n_labels == 0) {
		if (f->series)
			return f->series;
	} else {
		if (series_key(f, values, key, &len) < 0)
			return NULL;
		s = hashtab_get(&f->index, key, len);
		if (s)
			return s;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->family = f;
	for (int i = 0; i < f->n_labels; i++)
		if (!(s->values[i] = strdup(values[i]))) {
			series_free(s, f->n_labels);
			return NULL;
		}
	if (f->type == METRIC_HISTOGRAM) {
		s->buckets = calloc((size_t)(f->n_bounds > 0 ? f->n_bounds : 1), sizeof(*s->buckets));
		if (!s->buckets) {
			series_free(s, f->n_labels);
			return NULL;
		}
	}
	if (f->n_labels && hashtab_put(&f->index, key, len, s, NULL) < 0) {
		series_free(s, f->n_labels);
		return NULL;
	}
	*f->tail = s;
	f->tail = &s->next;
	return s;
}

struct metric_series *metric_with_labels(struct metric *f, ...)
{
	const char *values[METRIC_MAX_LABELS];
	const char *v;
	va_list ap;
	int n = 0;

	if (!f)
		return NULL;
	va_start(ap, f);
	while ((v = va_arg(ap, const char *))) {
		if (n == f->n_labels) {
			n = -1;
			break;
		}
		values[n++] = v;
	}
	va_end(ap);
	if (n != f->n_labels)
		return NULL;
	return series_find(f, values);
}

void metric_series_add(struct metric_series *s, double v)
{
	if (!s)
		return;
	s->live = true;
	s->value += v;
}

void metric_series_set(struct metric_series *s, double v)
{
	if (!s)
		return;
	s->live = true;
	s->value = v;
}

void metric_series_observe(struct metric_series *s, double v)
{
	struct metric *f;

	if (!s)
		return;
	f = s->family;
	s->live = true;
	s->count++;
	s->sum += v;
	for (int i = 0; i < f->n_bounds; i++)
		if (v <= f->bounds[i]) {
			s->buckets[i]++;
			break;
		}
}

void metric_series_set_histogram(struct metric_series *s, const unsigned long long *counts,
				 double sum)
{
	struct metric *f;

	if (!s || s->family->type != METRIC_HISTOGRAM)
		return;
	f = s->family;
	s->live = true;
	s->count = 0;
	for (int i = 0; i <= f->n_bounds; i++) {
		if (i < f->n_bounds)
			s->buckets[i] = counts[i];
		s->count += counts[i];
	}
	s->sum = sum;
}

void metric_reset(struct metric *f)
{
	struct metric_series **pp, *s;
	char key[METRIC_KEY_MAX];
	size_t len;

	if (!f)
		return;
	for (pp = &f->series; (s = *pp);) {
		/* Hidden since the last reset and not set again: gone. The only
		 * series of an unlabelled family always stays. */
		if (!s->live && f->n_labels) {
			if (series_key(f, (const char *const *)s->values, key, &len) == 0)
				(void)hashtab_del(&f->index, key, len);
			*pp = s->next;
			series_free(s, f->n_labels);
			continue;
		}
		s->live = false;
		s->value = s->sum = 0;
		s->count = 0;
		if (s->buckets)
			memset(s->buckets, 0, sizeof(*s->buckets) * (size_t)f->n_bounds);
		pp = &s->next;
	}
	f->tail = pp;
}

size_t metric_series_count(const struct metric *f)
{
	size_t n = 0;

	for (const struct metric_series *s = f ? f->series : NULL; s; s = s->next)
		n++;
	return n;
}

static struct metric_series *plain(struct metric *f)
{
	return f && f->n_labels == 0 ? series_find(f, NULL) : NULL;
}

void metric_add(struct metric *f, double v)
{
	metric_series_add(plain(f), v);
}

void metric_set(struct metric *f, double v)
{
	metric_series_set(plain(f), v);
}

void metric_observe(struct metric *f, double v)
{
	metric_series_observe(plain(f), v);
}

int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *userdata)
{
	struct collector *c = realloc(m->collectors, sizeof(*c) * (size_t)(m->n_collectors + 1));

	if (!c)
		return -ENOMEM;
	m->collectors = c;
	m->collectors[m->n_collectors++] = (struct collector){ fn, userdata };
	return 0;
}

/* Prometheus floats: the shortest text that reads back as the same double,
 * integers without exponent, +Inf/-Inf/NaN spelled out. */
static void fmt_double(char buf[static 32], double v)
{
	if (isnan(v)) {
		memcpy(buf, "NaN", 4);
	} else if (isinf(v)) {
		memcpy(buf, v > 0 ? "+Inf" : "-Inf", 5);
	} else if (v == (double)(long long)v && fabs(v) < 1e15) {
		(void)snprintf(buf, 32, "%lld", (long long)v);
	} else {
		for (int prec = 6; prec <= 17; prec++) {
			(void)snprintf(buf, 32, "%.*g", prec, v);
			if (strtod(buf, NULL) == v)
				break;
		}
	}
}

static void put_value(struct evbuffer *out, double v)
{
	char buf[32];

	fmt_double(buf, v);
	evbuffer_add(out, buf, strlen(buf));
}

/* Escapes \\ and newline (and " in label values), adding unescaped runs in
 * one piece: rendering thousands of series must not go byte by byte. */
static void put_escaped(struct evbuffer *out, const char *s, bool quote_too)
{
	const char *special = quote_too ? "\\\n\"" : "\\\n";

	for (;;) {
		size_t run = strcspn(s, special);

		if (run)
			evbuffer_add(out, s, run);
		s += run;
		if (!*s)
			return;
		evbuffer_add(out, *s == '\n' ? "\\n" : *s == '"' ? "\\\"" : "\\\\", 2);
		s++;
	}
}

/* {a="x",b="y"[,le="0.5"]} or nothing. */
static void put_labels(struct evbuffer *out, const struct metric *f, const struct metric_series *s,
		       const char *le)
{
	if (f->n_labels == 0 && !le)
		return;
	evbuffer_add(out, "{", 1);
	for (int i = 0; i < f->n_labels; i++) {
		evbuffer_add_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		put_escaped(out, s->values[i], true);
		evbuffer_add(out, "\"", 1);
	}
	if (le)
		evbuffer_add_printf(out, "%sle=\"%s\"", f->n_labels ? "," : "", le);
	evbuffer_add(out, "}", 1);
}

static void render_family(struct evbuffer *out, const struct metric *f)
{
	static const char *const type_names[] = { "counter", "gauge", "histogram" };

	evbuffer_add_printf(out, "# HELP %s ", f->name);
	put_escaped(out, f->help ? f->help : "", false);
	evbuffer_add_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
	for (const struct metric_series *s = f->series; s; s = s->next) {
		if (!s->live)
			continue;
		if (f->type != METRIC_HISTOGRAM) {
			evbuffer_add_printf(out, "%s", f->name);
			put_labels(out, f, s, NULL);
			evbuffer_add(out, " ", 1);
			put_value(out, s->value);
			evbuffer_add(out, "\n", 1);
			continue;
		}
		unsigned long long cum = 0;
		for (int i = 0; i < f->n_bounds; i++) {
			char le[32];

			cum += s->buckets[i];
			fmt_double(le, f->bounds[i]);
			evbuffer_add_printf(out, "%s_bucket", f->name);
			put_labels(out, f, s, le);
			evbuffer_add_printf(out, " %llu\n", cum);
		}
		evbuffer_add_printf(out, "%s_bucket", f->name);
		put_labels(out, f, s, "+Inf");
		evbuffer_add_printf(out, " %llu\n%s_sum", s->count, f->name);
		put_labels(out, f, s, NULL);
		evbuffer_add(out, " ", 1);
		put_value(out, s->sum);
		evbuffer_add_printf(out, "\n%s_count", f->name);
		put_labels(out, f, s, NULL);
		evbuffer_add_printf(out, " %llu\n", s->count);
	}
}

int metrics_render(struct metrics *m, struct evbuffer *out)
{
	for (int i = 0; i < m->n_collectors; i++)
		m->collectors[i].fn(m, m->collectors[i].userdata);
	for (int i = 0; i < m->n_families; i++)
		render_family(out, m->families[i]);
	return 0;
}
