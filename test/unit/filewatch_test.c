/* filewatch: a ConfigMap volume updated the way the kubelet does it (a new
 * ..data swapped in) is noticed on a real inotify descriptor, once per change
 * of content; a file back to what was acted on is reported too; a volume
 * whose key disappears reports the error. Driven by a real libevent loop. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "host/filewatch.h"
#include "lib/errbuf.h"
#include "testutil.h"

struct seen {
	int calls;
	int r;
	uint64_t digest;
	char text[256];
};

static void on_change(void *ud, int r, uint64_t digest, const struct errbuf *eb)
{
	struct seen *s = ud;

	s->calls++;
	s->r = r;
	s->digest = digest;
	(void)snprintf(s->text, sizeof(s->text), "%s", r < 0 ? errbuf_text(eb, r) : "");
}

/* Runs the loop until the callback count reaches want, or 5 s pass. Returns
 * once the kernel delivered the inotify events (the count is the check). */
static void run_until(struct event_base *base, struct seen *s, int want)
{
	for (int i = 0; i < 500 && s->calls < want; i++) {
		struct timeval tv = { 0, 10000 };

		(void)event_base_loopexit(base, &tv);
		(void)event_base_dispatch(base);
	}
}

static char dir[] = "/tmp/filewatch-test.XXXXXX";

static void test_configmap_update_is_noticed_once_per_change(void **st)
{
	struct event_base *base = event_base_new();
	char vol[256];
	const char *path;
	struct filewatch *w = NULL;
	struct seen s = {};
	uint64_t a = filewatch_digest("a: 1\n", 5), b = filewatch_digest("a: 2\n", 5);

	(void)snprintf(vol, sizeof(vol), "%s/cm", dir);
	path = testutil_volume_write(vol, "config.yaml", "a: 1\n");
	assert_int_equal(filewatch_new(base, path, 4096, a, on_change, &s, &w), 0);
	assert_int_equal(s.calls, 0); /* what was acted on: nothing to say */

	(void)testutil_volume_write(vol, "config.yaml", "a: 2\n");
	run_until(base, &s, 1);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.r, 0);
	assert_true(s.digest == b);

	/* The same content written again (a new ..data, no new bytes): silent.
	 * A later real change proves the loop ran past it. */
	(void)testutil_volume_write(vol, "config.yaml", "a: 2\n");
	path = testutil_volume_write(vol, "config.yaml", "a: 1\n");
	run_until(base, &s, 2);
	assert_int_equal(s.calls, 2);
	assert_true(s.digest == a);

	/* The key was removed from the ConfigMap: the kubelet drops its link. */
	assert_int_equal(unlink(path), 0);
	run_until(base, &s, 3);
	assert_int_equal(s.calls, 3);
	assert_int_equal(s.r, -ENOENT);
	assert_non_null(strstr(s.text, "config.yaml"));

	filewatch_free(w);
	event_base_free(base);
}

/* A change between the caller's read and the watch's start is reported at once. */
static void test_change_before_the_watch_is_reported_at_start(void **st)
{
	struct event_base *base = event_base_new();
	char vol[256];
	const char *path;
	struct filewatch *w = NULL;
	struct seen s = {};

	(void)snprintf(vol, sizeof(vol), "%s/cm2", dir);
	path = testutil_volume_write(vol, "config.yaml", "new\n");
	assert_int_equal(filewatch_new(base, path, 4096, filewatch_digest("old\n", 4), on_change,
				       &s, &w),
			 0);
	assert_int_equal(s.calls, 1);
	assert_true(s.digest == filewatch_digest("new\n", 4));
	filewatch_free(w);
	assert_null(filewatch_free(NULL));
	/* A directory that does not exist cannot be watched: a clear -errno. */
	assert_int_equal(filewatch_new(base, "/nonexistent/dir/config.yaml", 4096, 0, on_change,
				       &s, &w),
			 -ENOENT);
	event_base_free(base);
}

static int group_setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[300];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_configmap_update_is_noticed_once_per_change),
		cmocka_unit_test(test_change_before_the_watch_is_reported_at_start),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
