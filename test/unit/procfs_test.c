/* procfs: the /proc parsers on recorded files (test/data/procfs) and on
 * every malformed file of test/data/procfs/bad, which each parser must
 * refuse. Buffers are copied without a NUL so that a read past the length is
 * an ASan report, not luck. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/procfs.h"
#include "lib/cleanup.h"
#include "testutil.h"

#define DATA "test/data/procfs"


/* s without its NUL, in a buffer of exactly strlen(s) bytes. */
static char *exact(const char *s, size_t *len)
{
	char *b;

	*len = strlen(s);
	b = malloc(*len ? *len : 1);
	assert_non_null(b);
	memcpy(b, s, *len);
	return b;
}

static void assert_cpus(const struct cpuset *s, const char *list)
{
	struct cpuset want;

	assert_int_equal(cpuset_parse(list, &want, NULL), 0);
	assert_true(cpuset_equal(s, &want));
}

/* ---- schedstat ---------------------------------------------------------------------- */

static void test_procfs_schedstat_reads_run_delay(void **st)
{
	uint64_t wait[4] = { 0, 0, 0, 77 };
	size_t len;
	_cleanup_free_ char *v15 = testutil_slurp(DATA "/schedstat-v15", &len);

	assert_int_equal(procfs_schedstat_parse(v15, len, wait, 4), 2);
	assert_int_equal(wait[0], 124556212470ull);
	assert_int_equal(wait[1], 123345434569ull);
	assert_int_equal(wait[3], 77); /* not listed: untouched */
}

static void test_procfs_schedstat_counts_cpus_beyond_the_array(void **st)
{
	uint64_t wait[2] = { 0, 0 };
	size_t len;
	_cleanup_free_ char *v17 = testutil_slurp(DATA "/schedstat-v17", &len);

	/* cpu3 is beyond n = 2: counted, not stored; domain lines skipped. */
	assert_int_equal(procfs_schedstat_parse(v17, len, wait, 2), 3);
	assert_int_equal(wait[0], 7654321000ull);
	assert_int_equal(wait[1], 6543210000ull);
}

static void test_procfs_schedstat_stops_at_the_length(void **st)
{
	static const char s[] = "version 15\ncpu0 0 0 0 0 0 0 1 2 3\n";
	uint64_t wait[1] = { 5 };

	/* Only "version 15\n": no cpu line yet. */
	assert_int_equal(procfs_schedstat_parse(s, 11, wait, 1), 0);
	assert_int_equal(wait[0], 5);
	assert_int_equal(procfs_schedstat_parse(s, sizeof(s) - 1, wait, 1), 1);
	assert_int_equal(wait[0], 2);
}

/* ---- mountinfo ---------------------------------------------------------------------- */

struct mount_row {
	const char *root, *point, *fstype, *super;
};

/* Every entry of a fixture, in order, as strings. */
static int read_mounts(const char *file, struct mount_row *rows, int max, char **owned)
{
	size_t len;
	_cleanup_free_ char *buf = testutil_slurp(file, &len);
	const char *p = buf, *end = buf + len;
	struct procfs_mount m;
	int n = 0, r, k = 0;

	while ((r = procfs_mountinfo_next(&p, end, &m)) > 0) {
		assert_true(n < max);
		rows[n].root = owned[k++] = procfs_unescape(m.root);
		rows[n].point = owned[k++] = procfs_unescape(m.point);
		rows[n].fstype = owned[k++] = procfs_unescape(m.fstype);
		rows[n].super = owned[k++] = procfs_unescape(m.super);
		n++;
	}
	assert_int_equal(r, 0);
	return n;
}

static void test_procfs_mountinfo_reads_every_field(void **st)
{
	struct mount_row rows[16];
	char *owned[64] = { NULL };
	int n = read_mounts(DATA "/mountinfo-hybrid", rows, 16, owned);

	assert_int_equal(n, 7);
	assert_string_equal(rows[3].point, "/sys/fs/cgroup/unified");
	assert_string_equal(rows[3].fstype, "cgroup2");
	assert_string_equal(rows[3].super, "rw,nsdelegate");
	/* Octal escapes decoded: \040 is a space, \134 a backslash. */
	assert_string_equal(rows[4].point, "/sys/fs/cgroup/cpu acct");
	assert_string_equal(rows[5].point, "/sys/fs/cgroup/cpu\\set");
	assert_string_equal(rows[5].root, "/kubepods");
	assert_true(procfs_list_has(rows[5].super, strlen(rows[5].super), "cpuset"));
	assert_false(procfs_list_has(rows[4].super, strlen(rows[4].super), "cpuset"));
	/* Optional fields ("shared:4 master:3") before the separator. */
	n = read_mounts(DATA "/mountinfo-v2only", rows, 16, owned + 32);
	assert_true(n >= 1);
	assert_string_equal(rows[0].fstype, "cgroup2");
	for (int i = 0; i < 64; i++)
		free(owned[i]);
}

static void test_procfs_mountinfo_goes_on_after_a_bad_line(void **st)
{
	size_t len;
	_cleanup_free_ char *buf =
		exact("22 1 0:21 /\n\n30 1 0:26 / /c rw - cgroup2 cgroup2 rw\n", &len);
	const char *p = buf, *end = buf + len;
	struct procfs_mount m;

	assert_int_equal(procfs_mountinfo_next(&p, end, &m), -EPROTO);
	assert_int_equal(procfs_mountinfo_next(&p, end, &m), 1); /* the blank line skipped */
	assert_true(procfs_field_is(m.point, "/c"));
	assert_int_equal(procfs_mountinfo_next(&p, end, &m), 0);
	assert_int_equal(procfs_mountinfo_next(&p, end, &m), 0);
}

static void test_procfs_unescape_leaves_what_is_no_escape(void **st)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "/a\\040b", "/a b" },	   { "/a\\011b", "/a\tb" }, { "/a\\012", "/a\n" },
		{ "/a\\134", "/a\\" },	   { "/a\\000b", "/a\\000b" }, /* would cut the string */
		{ "/a\\400", "/a\\400" },  /* not a byte */
		{ "/a\\08", "/a\\08" },	   { "/a\\04", "/a\\04" }, /* short at the end */
		{ "\\", "\\" },		   { "", "" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len;
		_cleanup_free_ char *in = exact(cases[i].in, &len);
		_cleanup_free_ char *out = procfs_unescape((struct procfs_field){ in, len });

		assert_non_null(out);
		if (strcmp(out, cases[i].out))
			fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].in, out, cases[i].out);
	}
}

static void test_procfs_list_has_whole_items_only(void **st)
{
	assert_true(procfs_list_has("rw,cpuset", 9, "cpuset"));
	assert_true(procfs_list_has("cpuset,rw", 9, "cpuset"));
	assert_false(procfs_list_has("rw,cpusetx", 10, "cpuset"));
	assert_false(procfs_list_has("rw,xcpuset", 10, "cpuset"));
	assert_false(procfs_list_has("rw,cpuset", 8, "cpuset")); /* the length bounds */
	assert_false(procfs_list_has("", 0, "cpuset"));
	assert_true(procfs_list_has(",,cpuset,", 9, "cpuset"));
}

/* ---- status, stat, cgroup ----------------------------------------------------------- */

static void test_procfs_status_reads_name_tgid_allowed(void **st)
{
	size_t len;
	_cleanup_free_ char *buf = testutil_slurp(DATA "/status-kworker", &len);
	struct procfs_status s;

	assert_int_equal(procfs_status_parse(buf, len, &s), 0);
	assert_string_equal(s.name, "kworker/1:0H");
	assert_int_equal(s.tgid, 17);
	assert_cpus(&s.allowed, "1");
}

static void test_procfs_status_cuts_a_long_name(void **st)
{
	char text[256];
	size_t len;
	struct procfs_status s;
	_cleanup_free_ char *buf = NULL;

	snprintf(text, sizeof(text), "Name:\t%0100d\nTgid:\t3\nCpus_allowed_list:\t0-1\n", 7);
	buf = exact(text, &len);
	assert_int_equal(procfs_status_parse(buf, len, &s), 0);
	assert_int_equal(strlen(s.name), PROCFS_COMM_MAX - 1);
}

static void test_procfs_stat_counts_fields_after_the_last_paren(void **st)
{
	size_t len;
	_cleanup_free_ char *buf = testutil_slurp(DATA "/stat-hostile-comm", &len);
	struct procfs_stat s;

	assert_int_equal(procfs_stat_parse(buf, len, &s), 0);
	assert_int_equal(s.flags, 4194560);
	assert_int_equal(s.ticks, 42);
	assert_false(s.flags & PROCFS_PF_KTHREAD);
}

static void test_procfs_cgroup_picks_the_hierarchy(void **st)
{
	size_t len;
	_cleanup_free_ char *hybrid = testutil_slurp(DATA "/cgroup-hybrid", &len);
	char p[PATH_MAX];

	assert_int_equal(procfs_cgroup_parse(hybrid, len, NULL, p, sizeof(p)), 0);
	assert_string_equal(p, "/user.slice/a:b"); /* ':' in the path, " (deleted)" dropped */
	assert_int_equal(procfs_cgroup_parse(hybrid, len, "cpuset", p, sizeof(p)), 0);
	assert_string_equal(p, "/kubepods/besteffort/pod1/c1");
	assert_int_equal(procfs_cgroup_parse(hybrid, len, "cpuacct", p, sizeof(p)), 0);
	assert_int_equal(procfs_cgroup_parse(hybrid, len, "pids", p, sizeof(p)), -ENOENT);
	assert_int_equal(procfs_cgroup_parse(hybrid, len, "cpu", p, sizeof(p)), 0);
	assert_int_equal(procfs_cgroup_parse(hybrid, len, NULL, p, 16), 0);
	assert_int_equal(procfs_cgroup_parse(hybrid, len, NULL, p, 15), -E2BIG);
}

static void test_procfs_cgroup_v2_only_has_no_v1_line(void **st)
{
	size_t len;
	_cleanup_free_ char *v2 = testutil_slurp(DATA "/cgroup-v2", &len);
	char p[PATH_MAX];

	assert_int_equal(procfs_cgroup_parse(v2, len, "cpuset", p, sizeof(p)), -ENOENT);
	assert_int_equal(procfs_cgroup_parse(v2, len, NULL, p, sizeof(p)), 0);
	assert_string_equal(p, "/kubepods.slice/kubepods-besteffort.slice/"
			       "kubepods-besteffort-pod1.slice/cri-containerd-abc.scope");
}

/* ---- bad input: every file of bad/ is refused by the parser its name says ---------- */

static int parse_bad(const char *name, const char *buf, size_t len)
{
	char path[PATH_MAX];
	uint64_t wait[4];

	if (!strncmp(name, "schedstat-", 10))
		return procfs_schedstat_parse(buf, len, wait, 4);
	if (!strncmp(name, "mountinfo-", 10)) {
		const char *p = buf, *end = buf + len;
		struct procfs_mount m;
		int r;

		while ((r = procfs_mountinfo_next(&p, end, &m)) > 0)
			;
		return r;
	}
	if (!strncmp(name, "status-", 7)) {
		struct procfs_status s;

		return procfs_status_parse(buf, len, &s);
	}
	if (!strncmp(name, "stat-", 5)) {
		struct procfs_stat s;

		return procfs_stat_parse(buf, len, &s);
	}
	if (!strncmp(name, "cgroup-v2-", 10))
		return procfs_cgroup_parse(buf, len, NULL, path, sizeof(path));
	if (!strncmp(name, "cgroup-v1-", 10))
		return procfs_cgroup_parse(buf, len, "cpuset", path, sizeof(path));
	fail_msg("%s: no parser has this prefix", name);
	return 0;
}

static void test_procfs_parsers_refuse_every_bad_file(void **st)
{
	DIR *d = opendir(DATA "/bad");
	struct dirent *de;
	int cases = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		size_t len;
		_cleanup_free_ char *buf = NULL;
		int r;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), DATA "/bad/%s", de->d_name);
		buf = testutil_slurp(path, &len);
		r = parse_bad(de->d_name, buf, len);
		if (r != -EPROTO)
			fail_msg("%s: got %d, want -EPROTO", de->d_name, r);
		cases++;
	}
	closedir(d);
	/* A table that loads nothing proves nothing. */
	if (cases < 20)
		fail_msg("only %d bad inputs found in " DATA "/bad", cases);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procfs_schedstat_reads_run_delay),
		cmocka_unit_test(test_procfs_schedstat_counts_cpus_beyond_the_array),
		cmocka_unit_test(test_procfs_schedstat_stops_at_the_length),
		cmocka_unit_test(test_procfs_mountinfo_reads_every_field),
		cmocka_unit_test(test_procfs_mountinfo_goes_on_after_a_bad_line),
		cmocka_unit_test(test_procfs_unescape_leaves_what_is_no_escape),
		cmocka_unit_test(test_procfs_list_has_whole_items_only),
		cmocka_unit_test(test_procfs_status_reads_name_tgid_allowed),
		cmocka_unit_test(test_procfs_status_cuts_a_long_name),
		cmocka_unit_test(test_procfs_stat_counts_fields_after_the_last_paren),
		cmocka_unit_test(test_procfs_cgroup_picks_the_hierarchy),
		cmocka_unit_test(test_procfs_cgroup_v2_only_has_no_v1_line),
		cmocka_unit_test(test_procfs_parsers_refuse_every_bad_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
