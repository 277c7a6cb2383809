/* cdi: spec content byte for byte, atomic replace, strict parse, scan. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/cdi.h"
#include "lib/errbuf.h"
#include "testutil.h"

#define UID "02b50f8a-a8f4-4e6b-a042-b672b4f1f075"

static char dir[64];

static int setup(void **st)
{
	snprintf(dir, sizeof(dir), "/dev/shm/cdi-test.XXXXXX");
	/* A write or scan that blocks on a planted FIFO would stop the suite. */
	alarm(20 * (unsigned)testutil_time_scale()); /* emulators: DRA_CPU_TEST_TIME_SCALE */
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[256];

	alarm(0);
	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[65536];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static const char *in_dir(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static mode_t kind_of(const char *name)
{
	struct stat st;

	assert_int_equal(lstat(in_dir(name), &st), 0);
	return st.st_mode & S_IFMT;
}

static void put(const char *name, const char *content)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static void test_cdi_spec_write_exact_content_and_name(void **st)
{
	struct cpuset c = cs("0-1,32-33");
	char path[256], id[128];

	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-" UID ".json", dir);
	assert_string_equal(slurp(path),
			    "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{"
			    "\"name\":\"claim-" UID "\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_" UID
			    "=0-1,32-33\"]}}]}\n");
	cdi_device_id(UID, id, sizeof(id));
	assert_string_equal(id, "dra.k8s.io/cpu=claim-" UID);
}

static void test_cdi_spec_write_replaces_and_leaves_no_temp(void **st)
{
	struct cpuset a = cs("1"), b = cs("2-3"), got;
	char uid[CDI_UID_MAX], path[256];
	char *s;

	assert_int_equal(cdi_spec_write(dir, UID, &a), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &b), 0);
	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-" UID ".json", dir);
	s = slurp(path);
	assert_int_equal(cdi_spec_parse(s, strlen(s), uid, &got, NULL), 0);
	assert_true(cpuset_equal(&got, &b));
	snprintf(path, sizeof(path), "ls -A %s | wc -l | grep -qx 1", dir);
	assert_int_equal(system(path), 0);
}

static void test_cdi_spec_write_refuses_bad_uids(void **st)
{
	struct cpuset c = cs("1");
	const char *bad[] = { "", "../etc", "a/b", "-x", "a b", "a=b",
			      "0123456789012345678901234567890123456789012345678901234567890123" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(cdi_spec_write(dir, bad[i], &c), -EINVAL);
	assert_int_equal(cdi_spec_remove(dir, "../x"), -EINVAL);
}

static void test_cdi_spec_write_fails_cleanly_when_dir_is_unusable(void **st)
{
	struct cpuset c = cs("1");
	char sub[128];

	/* A regular file where the directory should be: works as root too. */
	put("plainfile", "x");
	snprintf(sub, sizeof(sub), "%s/plainfile/cdi", dir);
	assert_int_equal(cdi_spec_write(sub, UID, &c), -ENOTDIR);
	snprintf(sub, sizeof(sub), "%s/plainfile", dir);
	assert_int_equal(cdi_spec_write(sub, UID, &c), -ENOTDIR);
}

static void test_cdi_spec_remove_is_idempotent(void **st)
{
	struct cpuset c = cs("1");
	char path[256];

	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(cdi_spec_remove(dir, UID), 0);
	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-" UID ".json", dir);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(cdi_spec_remove(dir, UID), 0);
}

static void test_cdi_spec_parse_rejects_foreign_and_broken_specs(void **st)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ "", "not a JSON object" },
		{ "[]", "not a JSON object" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[]}", "kind is not" },
		{ "{\"cdiVersion\":\"0.6.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[]}",
		  "cdiVersion is not" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[]}",
		  "not exactly one device" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":\"x\"}]}",
		  "device name is not claim-<uid>" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
		  "\"claim-a\",\"containerEdits\":{\"env\":[]}}]}",
		  "not exactly one env entry" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
		  "\"claim-a\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_b=1\"]}}]}",
		  "env entry is not" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
		  "\"claim-a\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_a=3-1\"]}}]}",
		  "env cpuset: reversed range" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
		  "\"claim-a\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_a=1\"]}}]} junk",
		  "not a JSON object" },
		{ "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
		  "\"claim-../x\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_../x=1\"]}}]}",
		  "invalid uid" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char uid[CDI_UID_MAX] = "keep";
		struct errbuf why = { "" };
		struct cpuset c;

		assert_int_equal(cdi_spec_parse(bad[i].json, strlen(bad[i].json), uid, &c, &why),
				 -EPROTO);
		if (!strstr(why.s, bad[i].why))
			fail_msg("case %zu: '%s' lacks '%s'", i, why.s, bad[i].why);
		assert_string_equal(uid, "keep");
	}
}

struct seen {
	int n, bad;
	char uids[8][CDI_UID_MAX];
	char why[8][160];
};

static int on_spec(void *ud, const char *uid, const struct cpuset *cpus)
{
	struct seen *s = ud;

	snprintf(s->uids[s->n++], CDI_UID_MAX, "%s", uid);
	return 0;
}

static void on_bad(void *ud, const char *path, const char *why)
{
	struct seen *s = ud;

	if (s->bad < 8)
		snprintf(s->why[s->bad], sizeof(s->why[0]), "%s", why);
	s->bad++;
}

static void test_cdi_scan_reports_bad_files_and_ignores_foreign_names(void **st)
{
	struct cpuset c = cs("4-5");
	struct seen s = { 0 };

	assert_int_equal(cdi_spec_write(dir, "aaa", &c), 0);
	assert_int_equal(cdi_spec_write(dir, "bbb", &c), 0);
	put("nvidia.com-gpu.json", "{}");
	put("dra.k8s.io-cpu_claim-broken.json", "{not json");
	/* content names another uid than the file name */
	put("dra.k8s.io-cpu_claim-ccc.json",
	    "{\"cdiVersion\":\"0.8.0\",\"kind\":\"dra.k8s.io/cpu\",\"devices\":[{\"name\":"
	    "\"claim-ddd\",\"containerEdits\":{\"env\":[\"DRA_CPUSET_ddd=1\"]}}]}");
	assert_int_equal(cdi_scan(dir, on_spec, on_bad, &s), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.bad, 2);
	/* missing dir = empty */
	memset(&s, 0, sizeof(s));
	assert_int_equal(cdi_scan("/nonexistent/cdi", on_spec, on_bad, &s), 0);
	assert_int_equal(s.n, 0);
}

#define SPEC "dra.k8s.io-cpu_claim-" UID ".json"
#define OLD_TEMP "." SPEC ".tmp" /* the fixed temp name of earlier versions */

/* Whatever was planted at the temp name is never opened: a FIFO blocked the
 * write for good, a device node was written to and renamed into place, a
 * symlink or directory made every Prepare of the claim fail. */
static void test_cdi_spec_write_never_opens_what_is_planted_at_the_temp_name(void **st)
{
	struct cpuset c = cs("2-3"), got;
	char uid[CDI_UID_MAX];
	const char *s;

	put("target", "precious");
	assert_int_equal(mkfifo(in_dir(OLD_TEMP), 0600), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(unlink(in_dir(OLD_TEMP)), 0);

	assert_int_equal(symlink("target", in_dir(OLD_TEMP)), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(unlink(in_dir(OLD_TEMP)), 0);
	assert_string_equal(slurp(in_dir("target")), "precious");

	assert_int_equal(mkdir(in_dir(OLD_TEMP), 0700), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(rmdir(in_dir(OLD_TEMP)), 0);

	/* a device node (root only: mknod needs CAP_MKNOD) */
	if (mknod(in_dir(OLD_TEMP), S_IFCHR | 0600, makedev(1, 3)) == 0) {
		assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
		assert_int_equal(kind_of(OLD_TEMP), S_IFCHR);
	}
	assert_int_equal(kind_of(SPEC), S_IFREG);
	s = slurp(in_dir(SPEC));
	assert_int_equal(cdi_spec_parse(s, strlen(s), uid, &got, NULL), 0);
	assert_true(cpuset_equal(&got, &c));
}

/* At the spec's own name: a FIFO or symlink is replaced (the link's target
 * untouched), a directory is a clear -EISDIR, and nothing is left behind. */
static void test_cdi_spec_write_replaces_a_fifo_or_symlink_refuses_a_directory(void **st)
{
	struct cpuset c = cs("1");
	char cmd[160];

	put("target", "precious");
	assert_int_equal(symlink("target", in_dir(SPEC)), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(kind_of(SPEC), S_IFREG);
	assert_string_equal(slurp(in_dir("target")), "precious");
	assert_int_equal(unlink(in_dir(SPEC)), 0);

	assert_int_equal(mkfifo(in_dir(SPEC), 0600), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(kind_of(SPEC), S_IFREG);
	assert_int_equal(unlink(in_dir(SPEC)), 0);

	assert_int_equal(mkdir(in_dir(SPEC), 0700), 0);
	assert_int_equal(cdi_spec_write(dir, UID, &c), -EISDIR);
	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l | grep -qx 2", dir); /* target, dir */
	assert_int_equal(system(cmd), 0);
}

static void test_cdi_spec_remove_removes_a_fifo_leaves_a_directory(void **st)
{
	assert_int_equal(mkfifo(in_dir(SPEC), 0600), 0);
	assert_int_equal(cdi_spec_remove(dir, UID), 0);
	assert_int_equal(access(in_dir(SPEC), F_OK), -1);
	put("target", "precious");
	assert_int_equal(symlink("target", in_dir(SPEC)), 0);
	assert_int_equal(cdi_spec_remove(dir, UID), 0);
	assert_string_equal(slurp(in_dir("target")), "precious");
	assert_int_equal(mkdir(in_dir(SPEC), 0700), 0);
	assert_int_equal(cdi_spec_remove(dir, UID), -EISDIR);
	assert_int_equal(kind_of(SPEC), S_IFDIR);
}

/* A FIFO named like a spec is reported with its file type, without a hang;
 * a directory and a symlink likewise. */
static void test_cdi_scan_names_what_is_not_a_regular_file(void **st)
{
	struct cpuset c = cs("4-5");
	struct seen s = { 0 };

	put("target", "{}");
	assert_int_equal(cdi_spec_write(dir, "aaa", &c), 0);
	assert_int_equal(mkfifo(in_dir("dra.k8s.io-cpu_claim-bbb.json"), 0600), 0);
	assert_int_equal(mkdir(in_dir("dra.k8s.io-cpu_claim-ccc.json"), 0700), 0);
	assert_int_equal(symlink("target", in_dir("dra.k8s.io-cpu_claim-ddd.json")), 0);
	assert_int_equal(cdi_scan(dir, on_spec, on_bad, &s), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.uids[0], "aaa");
	assert_int_equal(s.bad, 3);
	for (int i = 0; i < 3; i++)
		if (!strstr(s.why[i], "is a FIFO, not a regular file") &&
		    !strstr(s.why[i], "is a directory, not a regular file") &&
		    !strstr(s.why[i], "is a symbolic link (not followed)"))
			fail_msg("reason '%s' does not name the file type", s.why[i]);
}

static void test_cdi_remove_stale_temps_removes_only_our_temp_files(void **st)
{
	struct cpuset c = cs("1");
	char cmd[160];

	put("target", "precious");
	assert_int_equal(cdi_spec_write(dir, UID, &c), 0);
	assert_int_equal(mkfifo(in_dir(OLD_TEMP), 0600), 0);
	put("." SPEC ".tmp.a1B2c3", "{");
	assert_int_equal(symlink("target", in_dir(".dra.k8s.io-cpu_claim-x.json.tmp.zzzzzz")), 0);
	/* another CDI producer's temp files and specs are not ours to touch */
	put(".nvidia.com-gpu.json.tmp", "{");
	put(".nvidia.com-gpu.json.tmp.a1B2c3", "{");
	assert_int_equal(cdi_remove_stale_temps(dir), 3);
	assert_string_equal(slurp(in_dir("target")), "precious");
	assert_int_equal(kind_of(SPEC), S_IFREG);
	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l | grep -qx 4", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(cdi_remove_stale_temps("/nonexistent/cdi"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cdi_spec_write_exact_content_and_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cdi_spec_write_replaces_and_leaves_no_temp,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdi_spec_write_refuses_bad_uids, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cdi_spec_write_fails_cleanly_when_dir_is_unusable,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdi_spec_remove_is_idempotent, setup, teardown),
		cmocka_unit_test(test_cdi_spec_parse_rejects_foreign_and_broken_specs),
		cmocka_unit_test_setup_teardown(
			test_cdi_scan_reports_bad_files_and_ignores_foreign_names, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cdi_spec_write_never_opens_what_is_planted_at_the_temp_name, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_cdi_spec_write_replaces_a_fifo_or_symlink_refuses_a_directory, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_cdi_spec_remove_removes_a_fifo_leaves_a_directory,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cdi_scan_names_what_is_not_a_regular_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cdi_remove_stale_temps_removes_only_our_temp_files,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
