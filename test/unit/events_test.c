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
#include <json-c/json.h>

#include "kube/events.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_build_is_an_events_v1_event),
		cmocka_unit_test(test_events_record_without_events_is_a_no_op),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
