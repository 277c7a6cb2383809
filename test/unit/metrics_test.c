/* metrics: registry semantics and the exact text exposition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "obs/metrics.h"

static char *render(struct metrics *m)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *s;

	assert_non_null(b);
	assert_int_equal(metrics_render(m, b), 0);
	n = evbuffer_get_length(b);
	s = calloc(1, n + 1);
	assert_non_null(s);
	evbuffer_remove(b, s, n);
	evbuffer_free(b);
	return s;
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("missing:\n%s\nin:\n%s", needle, hay);
}

static void test_metrics_counter_and_gauge_render(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	struct metric *c, *g;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	c = metrics_counter(m, "dra_cpu_prepare_claims_total", "Claims prepared.", "result");
	g = metrics_gauge(m, "dra_cpu_allocated_cpus", "CPUs held by claims.", NULL);
	assert_non_null(c);
	assert_non_null(g);
	metric_series_add(metric_with(c, "success"), 2);
	metric_series_add(metric_with(c, "error"), 1);
	metric_series_add(metric_with(c, "success"), 1);
	metric_set(g, 12);
	s = render(m);
	assert_string_equal(s, "# HELP dra_cpu_prepare_claims_total Claims prepared.\n"
			       "# TYPE dra_cpu_prepare_claims_total counter\n"
			       "dra_cpu_prepare_claims_total{result=\"success\"} 3\n"
			       "dra_cpu_prepare_claims_total{result=\"error\"} 1\n"
			       "# HELP dra_cpu_allocated_cpus CPUs held by claims.\n"
			       "# TYPE dra_cpu_allocated_cpus gauge\n"
			       "dra_cpu_allocated_cpus 12\n");
	free(s);
}

static void test_metrics_unlabelled_family_shows_zero_before_use(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	assert_non_null(metrics_gauge(m, "dra_cpu_bpf_loaded", "BPF state.", NULL));
	s = render(m);
	assert_contains(s, "\ndra_cpu_bpf_loaded 0\n");
	free(s);
}

static void test_metrics_histogram_buckets_are_cumulative(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	const double b[] = { 0.001, 0.01, 0.1 };
	struct metric *h;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	h = metrics_histogram(m, "lat_seconds", "Latency.", NULL, b, 3);
	assert_non_null(h);
	metric_observe(h, 0.0005);
	metric_observe(h, 0.005);
	metric_observe(h, 0.005);
	metric_observe(h, 5);
	s = render(m);
	assert_contains(s, "lat_seconds_bucket{le=\"0.001\"} 1\n"
			   "lat_seconds_bucket{le=\"0.01\"} 3\n"
			   "lat_seconds_bucket{le=\"0.1\"} 3\n"
			   "lat_seconds_bucket{le=\"+Inf\"} 4\n"
			   "lat_seconds_sum 5.0105\n"
			   "lat_seconds_count 4\n");
	free(s);
}

static void test_metrics_histogram_set_from_bucketed_counts(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	const double b[] = { 0.001, 0.01 };
	const unsigned long long first[] = { 1, 2, 3 }, second[] = { 4, 0, 1 };
	struct metric *h;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	h = metrics_histogram(m, "rq_seconds", "Wait.", "pool", b, 2);
	metric_series_set_histogram(metric_with(h, "shared"), first, 1.5);
	metric_series_set_histogram(metric_with(h, "shared"), second, 0.25);
	/* Wrong type: ignored, no crash. */
	metric_series_set_histogram(metric_with(metrics_counter(m, "c_total", "c", NULL)),
				    second, 1);
	s = render(m);
	assert_contains(s, "rq_seconds_bucket{pool=\"shared\",le=\"0.001\"} 4\n"
			   "rq_seconds_bucket{pool=\"shared\",le=\"0.01\"} 4\n"
			   "rq_seconds_bucket{pool=\"shared\",le=\"+Inf\"} 5\n"
			   "rq_seconds_sum{pool=\"shared\"} 0.25\n"
			   "rq_seconds_count{pool=\"shared\"} 5\n");
	assert_contains(s, "\nc_total 0\n");
	free(s);
}

static void test_metrics_labelled_histogram_and_escaping(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	const double b[] = { 1 };
	struct metric *h, *c;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	h = metrics_histogram(m, "h", "Help with \\ and\nnewline.", "cpu,kind", b, 1);
	metric_series_observe(metric_with(h, "3", "user"), 0.5);
	c = metrics_counter(m, "c_total", "x", "v");
	metric_series_add(metric_with(c, "a\"b\\c\nd"), 1);
	s = render(m);
	assert_contains(s, "# HELP h Help with \\\\ and\\nnewline.\n");
	assert_contains(s, "h_bucket{cpu=\"3\",kind=\"user\",le=\"1\"} 1\n");
	assert_contains(s, "h_count{cpu=\"3\",kind=\"user\"} 1\n");
	assert_contains(s, "c_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(s);
}

static void test_metrics_rejects_bad_names_and_label_counts(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	const double bad[] = { 2, 1 };
	struct metric *c;

	assert_int_equal(metrics_new(&m), 0);
	assert_null(metrics_counter(m, "9bad", "x", NULL));
	assert_null(metrics_counter(m, "bad-name", "x", NULL));
	assert_null(metrics_counter(m, "ok", "x", "bad label"));
	assert_null(metrics_histogram(m, "h", "x", NULL, bad, 2));
	c = metrics_counter(m, "two_total", "x", "a,b");
	assert_non_null(c);
	assert_null(metric_with(c, "1"));
	assert_null(metric_with(c, "1", "2", "3"));
	assert_non_null(metric_with(c, "1", "2"));
	/* same name, same type: the same family; other type: refused */
	assert_ptr_equal(metrics_counter(m, "two_total", "x", "a,b"), c);
	assert_null(metrics_gauge(m, "two_total", "x", NULL));
	/* NULL-safe calls */
	metric_add(NULL, 1);
	metric_series_add(NULL, 1);
}

static void churn(struct metrics *m, void *ud)
{
	struct metric *g = ud;
	static int calls;
	char k[16];

	/* every render names two label sets it never named before, and one it
	 * names every time */
	metric_reset(g);
	for (int i = 0; i < 2; i++) {
		(void)snprintf(k, sizeof(k), "c%d", calls * 2 + i);
		metric_series_set(metric_with(g, k), 1);
	}
	metric_series_set(metric_with(g, "always"), 2);
	calls++;
}

static void test_metrics_reset_frees_label_sets_no_longer_named(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	struct metric *g;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	g = metrics_gauge(m, "owner", "x", "k");
	assert_int_equal(metrics_add_collector(m, churn, g), 0);
	for (int i = 0; i < 500; i++)
		free(render(m));
	/* this render's three, the previous render's two hidden ones */
	assert_int_equal(metric_series_count(g), 5);
	s = render(m);
	assert_contains(s, "owner{k=\"c1000\"} 1\n");
	assert_contains(s, "owner{k=\"c1001\"} 1\n");
	assert_contains(s, "owner{k=\"always\"} 2\n");
	assert_null(strstr(s, "c998"));
	free(s);
	/* a label set named again after it was freed comes back */
	metric_series_set(metric_with(g, "c0"), 3);
	s = render(m);
	assert_null(strstr(s, "c0\"} 3")); /* the collector's reset hid it first */
	free(s);
	assert_int_equal(metric_series_count(g), 6);
}

static void test_metrics_series_are_found_by_their_exact_label_set(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	struct metric_series *first[2000];
	struct metric *c;
	char a[16], big[5000];

	assert_int_equal(metrics_new(&m), 0);
	c = metrics_counter(m, "pairs_total", "x", "a,b");
	assert_non_null(c);
	/* ("a","bc") and ("ab","c") are two series */
	assert_ptr_not_equal(metric_with(c, "a", "bc"), metric_with(c, "ab", "c"));
	assert_ptr_equal(metric_with(c, "a", "bc"), metric_with(c, "a", "bc"));
	/* many series (the index grows), each found again */
	for (int i = 0; i < 2000; i++) {
		(void)snprintf(a, sizeof(a), "%d", i);
		first[i] = metric_with(c, a, "v");
		assert_non_null(first[i]);
	}
	for (int i = 0; i < 2000; i++) {
		(void)snprintf(a, sizeof(a), "%d", i);
		assert_ptr_equal(metric_with(c, a, "v"), first[i]);
	}
	/* a label set past the key cap is refused, and counting into it is a no-op */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_null(metric_with(c, big, "v"));
	metric_series_add(metric_with(c, big, "v"), 1);
}

static void collect(struct metrics *m, void *ud)
{
	struct metric *g = ud;
	static int calls;

	metric_reset(g);
	metric_series_set(metric_with(g, calls++ % 2 ? "odd" : "even"), 7);
}

static void test_metrics_collectors_run_before_render_and_reset_hides(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	struct metric *g;
	char *s;

	assert_int_equal(metrics_new(&m), 0);
	g = metrics_gauge(m, "g", "x", "k");
	assert_int_equal(metrics_add_collector(m, collect, g), 0);
	s = render(m);
	assert_contains(s, "g{k=\"even\"} 7\n");
	free(s);
	s = render(m);
	assert_contains(s, "g{k=\"odd\"} 7\n");
	assert_null(strstr(s, "even"));
	free(s);
}

/* Every family of the table registers (valid name and labels, ascending
 * buckets), once: a second lookup is the same family, and the rendering has
 * one # TYPE line per id. */
static void test_metrics_every_table_family_registers_once(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	struct metric *f[MF_COUNT];
	int types = 0;
	char *s, *p;

	assert_int_equal(metrics_new(&m), 0);
	for (int id = 0; id < MF_COUNT; id++) {
		f[id] = metrics_family(m, (enum metric_family)id);
		if (!f[id])
			fail_msg("family id %d did not register", id);
	}
	for (int id = 0; id < MF_COUNT; id++)
		assert_ptr_equal(metrics_family(m, (enum metric_family)id), f[id]);
	assert_null(metrics_family(m, MF_COUNT));
	assert_null(metrics_family(m, (enum metric_family)-1));
	s = render(m);
	for (p = s; (p = strstr(p, "# TYPE ")); p++)
		types++;
	assert_int_equal(types, MF_COUNT);
	assert_contains(s, "# HELP dra_cpu_prepare_claims_total ");
	assert_contains(s, "# TYPE dra_cpu_prepare_claims_total counter\n");
	assert_contains(s, "# TYPE dra_cpu_rt_runtime_seconds histogram\n");
	free(s);
}

/* A table histogram's buckets come from its bucket set; other families have none. */
static void test_metrics_table_histogram_bounds(void **st)
{
	_cleanup_(metrics_freep) struct metrics *m = NULL;
	const double *b;
	int n = -1;
	char *s;

	b = metrics_family_bounds(MF_CLAIM_ALLOCATED_CPUS, &n);
	assert_non_null(b);
	assert_int_equal(n, MB_N_CLAIM_CPUS);
	assert_true(b[0] == 1 && b[n - 1] == 1024);
	assert_null(metrics_family_bounds(MF_PREPARE_CLAIMS_TOTAL, &n));
	assert_int_equal(n, 0);
	assert_null(metrics_family_bounds(MF_COUNT, &n));
	assert_int_equal(metrics_new(&m), 0);
	metric_observe(metrics_family(m, MF_CLAIM_ALLOCATED_CPUS), 3);
	s = render(m);
	assert_contains(s, "dra_cpu_claim_allocated_cpus_bucket{le=\"2\"} 0\n"
			   "dra_cpu_claim_allocated_cpus_bucket{le=\"4\"} 1\n");
	assert_contains(s, "dra_cpu_claim_allocated_cpus_bucket{le=\"1024\"} 1\n"
			   "dra_cpu_claim_allocated_cpus_bucket{le=\"+Inf\"} 1\n");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_counter_and_gauge_render),
		cmocka_unit_test(test_metrics_unlabelled_family_shows_zero_before_use),
		cmocka_unit_test(test_metrics_histogram_buckets_are_cumulative),
		cmocka_unit_test(test_metrics_histogram_set_from_bucketed_counts),
		cmocka_unit_test(test_metrics_labelled_histogram_and_escaping),
		cmocka_unit_test(test_metrics_rejects_bad_names_and_label_counts),
		cmocka_unit_test(test_metrics_collectors_run_before_render_and_reset_hides),
		cmocka_unit_test(test_metrics_series_are_found_by_their_exact_label_set),
		cmocka_unit_test(test_metrics_reset_frees_label_sets_no_longer_named),
		cmocka_unit_test(test_metrics_every_table_family_registers_once),
		cmocka_unit_test(test_metrics_table_histogram_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
