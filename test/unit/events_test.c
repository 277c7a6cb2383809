/* events: the Event object as sent (events.k8s.io/v1 shape and limits). The
 * series, queueing and dropping are exercised against the API-server
 * simulator in test/integration/test_events.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "kube/events.h"
#include "obs/metrics.h"

static const char *sget(struct json_object *o, const char *path)
{
	char buf[128], *save = NULL;

	(void)snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
		if (!json_object_object_get_ex(o, k, &o))
			return NULL;
	return json_object_get_string(o);
}

static void test_events_build_is_an_events_v1_event(void **state)
{
	struct events_opts o = { .controller = "dra.cpu", .instance = "dra-cpu-node-1" };
	struct events_ref pod = { "v1", "Pod", "team", "web-0", "p-uid" };
	struct events_ref claim = { "resource.k8s.io/v1", "ResourceClaim", "team", "db", "" };
	struct json_object *e = NULL;

	(void)state;
	/* 2026-11-27T10:00:00.123456Z */
	assert_int_equal(events_build(&o, EVENTS_WARNING, &pod, &claim, "BindingRefused",
				      "CreateContainer", "why", "web-0.1", 1795773600123456789LL,
				      &e),
			 0);
	assert_string_equal(sget(e, "apiVersion"), "events.k8s.io/v1");
	assert_string_equal(sget(e, "kind"), "Event");
	assert_string_equal(sget(e, "metadata.name"), "web-0.1");
	assert_string_equal(sget(e, "metadata.namespace"), "team");
	assert_string_equal(sget(e, "eventTime"), "2026-11-27T10:00:00.123456Z");
	assert_string_equal(sget(e, "reportingController"), "dra.cpu");
	assert_string_equal(sget(e, "reportingInstance"), "dra-cpu-node-1");
	assert_string_equal(sget(e, "type"), "Warning");
	assert_string_equal(sget(e, "reason"), "BindingRefused");
	assert_string_equal(sget(e, "action"), "CreateContainer");
	assert_string_equal(sget(e, "note"), "why");
	assert_string_equal(sget(e, "regarding.kind"), "Pod");
	assert_string_equal(sget(e, "regarding.uid"), "p-uid");
	assert_string_equal(sget(e, "related.name"), "db");
	/* empty fields are left out, not sent as "" */
	assert_null(sget(e, "related.uid"));
	/* deprecated fields and the series are never in a new Event */
	assert_null(sget(e, "series"));
	assert_null(sget(e, "deprecatedCount"));
	json_object_put(e);
	assert_int_equal(events_build(&o, EVENTS_NORMAL, &pod, NULL, "Prepared", "Prepare", "",
				      "web-0.2", 0, &e),
			 0);
	assert_string_equal(sget(e, "type"), "Normal");
	assert_null(sget(e, "related"));
	json_object_put(e);
}

static void test_events_record_without_events_is_a_no_op(void **state)
{
	struct events_ref pod = { "v1", "Pod", "team", "web-0", "p-uid" };

	(void)state;
	/* --events=none: the callers hold NULL and record anyway */
	events_record(NULL, EVENTS_WARNING, &pod, NULL, "R", "A", "%s", "x");
	assert_null(events_free(NULL));
}

static bool rendered_has(struct metrics *m, const char *line)
{
	struct evbuffer *b = evbuffer_new();
	bool found;

	assert_non_null(b);
	assert_int_equal(metrics_render(m, b), 0);
	assert_int_equal(evbuffer_add(b, "", 1), 0);
	found = strstr((const char *)evbuffer_pullup(b, -1), line) != NULL;
	evbuffer_free(b);
	return found;
}

/* A pod's namespace and name come from the runtime and reach the request
 * path: what is not a Kubernetes name is dropped before any request, and
 * counted, while a well-formed one is queued for the server. */
static void test_events_about_objects_without_kubernetes_names_are_dropped(void **state)
{
	static const struct events_ref bad[] = {
		{ "v1", "Pod", "../../api", "web-0", "u" },
		{ "v1", "Pod", "team", "web/../../x", "u" },
		{ "v1", "Pod", "Team", "web-0", "u" },
		{ "v1", "Pod", "team", "web-0\nlevel=error", "u" },
	};
	struct events_ref good = { "v1", "Pod", "team", "web-0", "u" };
	struct events_ref bad_related = { "resource.k8s.io/v1", "ResourceClaim", "team", "c..x", "u" };
	struct events_opts o = { .controller = "dra.cpu", .instance = "dra-cpu-n1" };
	struct event_base *base = event_base_new();
	struct metrics *m = NULL;
	struct events *e = NULL;
	struct events_stats st;

	(void)state;
	assert_non_null(base);
	assert_int_equal(metrics_new(&m), 0);
	assert_int_equal(events_new(base, NULL, &o, m, &e), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		events_record(e, EVENTS_WARNING, &bad[i], NULL, "PrepareRefused", "Prepare", "x");
	events_record(e, EVENTS_WARNING, &good, &bad_related, "BindingRefused", "Bind", "x");
	assert_true(rendered_has(m, "dra_cpu_events_dropped_total{reason=\"invalid_object\"} 5"));
	events_record(e, EVENTS_WARNING, &good, NULL, "PrepareRefused", "Prepare", "x");
	events_get_stats(e, &st);
	assert_int_equal(st.recorded, 6);
	assert_int_equal(st.dropped, 5); /* the well-named one is queued for the server */
	events_free(e);
	metrics_free(m);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_build_is_an_events_v1_event),
		cmocka_unit_test(test_events_record_without_events_is_a_no_op),
		cmocka_unit_test(test_events_about_objects_without_kubernetes_names_are_dropped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
