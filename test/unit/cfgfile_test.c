/* cfgfile: the configuration file's reader (typed scalars, strictness, caps)
 * and its place in cfg_parse's precedence: default < file < env < flag. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/cfg.h"
#include "cmd/cfgfile.h"
#include "lib/errbuf.h"
#include "testutil.h"

static struct cfgfile *parse_ok(const char *yaml)
{
	struct cfgfile *f = NULL;
	struct errbuf eb = {};

	if (cfgfile_parse(yaml, strlen(yaml), &f, &eb) < 0)
		fail_msg("'%s' refused: %s", yaml, eb.s);
	return f;
}

static void test_scalars_are_typed_as_yaml_core_schema(void **state)
{
	struct cfgfile *f = parse_ok("apiVersion: v1alpha1\n"
				     "nri: false\n"
				     "bpf: True\n"
				     "logVerbosity: 2\n"
				     "reservedCPUs: \"0,32\"\n"
				     "cdiDir: '/run/cdi'\n"
				     "hostnameOverride: ~\n"
				     "groupBy: socket\n");

	assert_int_equal(f->n, 8);
	struct {
		const char *key, *value;
		enum cfgfile_kind kind;
		int line;
	} want[] = {
		{ "apiVersion", "v1alpha1", CFGFILE_STRING, 1 },
		{ "nri", "false", CFGFILE_BOOL, 2 },
		{ "bpf", "true", CFGFILE_BOOL, 3 },
		{ "logVerbosity", "2", CFGFILE_INT, 4 },
		{ "reservedCPUs", "0,32", CFGFILE_STRING, 5 },
		{ "cdiDir", "/run/cdi", CFGFILE_STRING, 6 },
		{ "hostnameOverride", "", CFGFILE_NULL, 7 },
		{ "groupBy", "socket", CFGFILE_STRING, 8 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		assert_string_equal(f->v[i].key, want[i].key);
		assert_string_equal(f->v[i].value, want[i].value);
		assert_int_equal(f->v[i].kind, want[i].kind);
		assert_int_equal(f->v[i].line, want[i].line);
	}
	cfgfile_free(f);
}

static void test_quoted_boolean_is_a_string(void **state)
{
	struct cfgfile *f = parse_ok("nri: \"false\"\n");

	assert_int_equal(f->v[0].kind, CFGFILE_STRING);
	cfgfile_free(f);
}

static void test_empty_file_and_comments_set_nothing(void **state)
{
	const char *empty[] = { "", "\n\n", "# nothing here\n", "---\n" };

	for (size_t i = 0; i < ARRAY_SIZE(empty); i++) {
		struct cfgfile *f = parse_ok(empty[i]);

		assert_int_equal(f->n, 0);
		cfgfile_free(f);
	}
}

/* Every malformed file: refused, with the line and the reason. */
static void test_bad_files_are_refused_with_line_and_reason(void **state)
{
	static const struct {
		const char *yaml;
		int r;
		const char *why;
	} cases[] = {
		{ "- a\n- b\n", -EINVAL, "line 1: the file must be a map" },
		{ "just text\n", -EINVAL, "line 1: the file must be a map" },
		{ "nri: true\nnri: false\n", -EINVAL, "line 2: key nri repeated (first on line 1)" },
		{ "a: [1, 2]\n", -EINVAL, "line 1: key a: the value must be a plain value, not a list" },
		{ "a:\n  b: c\n", -EINVAL, "line 2: key a: the value must be a plain value, not a map" },
		{ "? [x]\n: 1\n", -EINVAL, "line 1: a key must be a plain value, not a list" },
		{ "7: x\n", -EINVAL, "line 1: key '7' is not a name" },
		{ "true: x\n", -EINVAL, "line 1: key 'true' is not a name" },
		{ "a: &x v\nb: *x\n", -EINVAL, "line 2: aliases (*name) are not supported" },
		{ "a: !!int 3\n", -EINVAL, "tags are not supported" },
		{ "a: b\n---\nc: d\n", -EINVAL, "line 2: a second YAML document" },
		{ "a: \"unterminated\n", -EINVAL, "line 2:" },
		{ "a: b\n\tc: d\n", -EINVAL, "line 2:" },
		{ "a: \"x\\0y\"\n", -EINVAL, "line 1: key a: the value holds a NUL byte" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cfgfile *f = NULL;
		struct errbuf eb = {};
		int r = cfgfile_parse(cases[i].yaml, strlen(cases[i].yaml), &f, &eb);

		if (r != cases[i].r || !strstr(eb.s, cases[i].why))
			fail_msg("case %zu '%s': r=%d text '%s', want %d '%s'", i, cases[i].yaml, r,
				 eb.s, cases[i].r, cases[i].why);
		assert_null(f);
	}
}

static void test_caps_bound_what_a_file_can_make_us_hold(void **state)
{
	struct cfgfile *f = NULL;
	struct errbuf eb = {};
	size_t n = CFGFILE_SIZE_MAX + 1, off = 0;
	char *big = malloc(n + 1);

	assert_non_null(big);
	memset(big, '#', n);
	big[n] = 0;
	assert_int_equal(cfgfile_parse(big, n, &f, &eb), -E2BIG);
	/* 65 keys */
	for (int i = 0; i <= CFGFILE_KEYS_MAX; i++)
		off += (size_t)snprintf(big + off, n - off, "k%d: v\n", i);
	assert_int_equal(cfgfile_parse(big, off, &f, &eb), -E2BIG);
	assert_non_null(strstr(eb.s, "more than 64 keys"));
	/* a value over the cap */
	off = (size_t)snprintf(big, n, "k: ");
	memset(big + off, 'x', CFGFILE_VALUE_MAX + 1);
	off += CFGFILE_VALUE_MAX + 1;
	big[off++] = '\n';
	assert_int_equal(cfgfile_parse(big, off, &f, &eb), -E2BIG);
	assert_null(f);
	free(big);
}

/* ---- the file inside cfg_parse -------------------------------------------------------- */

static char tmpdir[] = "/tmp/cfgfile-test.XXXXXX";

static const char *write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	return path;
}

static int parse_argv(struct cfg *c, struct errbuf *err, ...)
{
	char *argv[16] = { "dra-cpu-driver" };
	int argc = 1;
	va_list ap;
	char *a;

	va_start(ap, err);
	while ((a = va_arg(ap, char *)) && argc < 15)
		argv[argc++] = a;
	va_end(ap);
	return cfg_parse(c, argc, argv, err);
}

static void test_file_sets_values_and_flags_and_env_win(void **state)
{
	const char *path = write_file("ok.yaml", "apiVersion: v1alpha1\n"
						 "cpuDeviceMode: individual\n"
						 "reservedCPUs: \"0\"\n"
						 "nri: false\n"
						 "cdiDir: /run/cdi-from-file\n"
						 "stateDir: /run/state-from-file\n");
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse_argv(&c, &err, "--config", path, NULL), 0);
	assert_int_equal(c.device_mode, DEVICES_INDIVIDUAL);
	assert_string_equal(c.reserved_cpus_str, "0");
	assert_false(c.nri);
	assert_string_equal(c.cdi_dir, "/run/cdi-from-file");
	assert_string_equal(c.config_file, path);
	cfg_done(&c);

	/* a flag wins over the file; the environment too, and a flag over both */
	setenv("DRA_CPU_CDI_DIR", "/run/cdi-from-env", 1);
	setenv("DRA_CPU_STATE_DIR", "/run/state-from-env", 1);
	assert_int_equal(parse_argv(&c, &err, "--cpu-device-mode=grouped", "--config=", NULL), 0);
	assert_null(strstr(c.cdi_dir, "file")); /* --config= empty: no file */
	cfg_done(&c);
	assert_int_equal(parse_argv(&c, &err, "--cpu-device-mode=grouped", "--config", path,
				    "--state-dir", "/run/state-from-flag", NULL),
			 0);
	assert_int_equal(c.device_mode, DEVICES_GROUPED);
	assert_string_equal(c.cdi_dir, "/run/cdi-from-env");
	assert_string_equal(c.state_dir, "/run/state-from-flag");
	assert_false(c.nri); /* still the file's */
	cfg_done(&c);

	/* $DRA_CPU_CONFIG names the file when no flag does */
	unsetenv("DRA_CPU_CDI_DIR");
	unsetenv("DRA_CPU_STATE_DIR");
	setenv("DRA_CPU_CONFIG", path, 1);
	assert_int_equal(parse_argv(&c, &err, NULL), 0);
	assert_string_equal(c.cdi_dir, "/run/cdi-from-file");
	cfg_done(&c);
	unsetenv("DRA_CPU_CONFIG");
}

/* A bad file names the file, the line and the key. */
static void test_bad_file_errors_name_file_line_and_key(void **state)
{
	static const struct {
		const char *yaml, *want;
	} cases[] = {
		{ "cpuDeviceMode: grouped\nfoo: 1\n", "line 2: unknown key foo" },
		{ "CPUDeviceMode: grouped\n",
		  "line 1: key CPUDeviceMode is spelled differently from the schema; use "
		  "cpuDeviceMode" },
		{ "bindAddress: \":9\"\n",
		  "line 1: key bindAddress is not configurable in the file: set it with "
		  "--bind-address" },
		{ "kubeletRootDir: /x\n", "key kubeletRootDir is not configurable in the file" },
		{ "apiVersion: v2\n", "line 1: apiVersion: unsupported apiVersion 'v2' (only v1alpha1)" },
		{ "\n\ngroupBy: rack\n",
		  "line 3: groupBy: unknown value 'rack' (one of numanode|socket|machine)" },
		{ "nri: \"false\"\n", "line 1: nri: must be a boolean, not a string" },
		{ "reservedCPUs: 0\n", "line 1: reservedCPUs: must be a string, not an integer (quote it)" },
		{ "reservedCPUs: \"3-1\"\n", "line 1: reservedCPUs: invalid CPU list '3-1'" },
		{ "rtCPUs: \"3-1\"\n", "line 1: rtCPUs: invalid CPU list '3-1'" },
		{ "rtCPUs: 3\n", "line 1: rtCPUs: must be a string, not an integer (quote it)" },
		{ "rtCpus: \"3\"\n", "key rtCpus is spelled differently from the schema; use rtCPUs" },
		{ "logVerbosity: 12\n", "line 1: logVerbosity: '12' is not an integer in 0..9" },
		{ "nri: [true]\n", "line 1: key nri: the value must be a plain value, not a list" },
	};
	struct errbuf err = { "" };
	struct cfg c;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *path = write_file("bad.yaml", cases[i].yaml);
		char prefix[300];
		int r = parse_argv(&c, &err, "--config", path, NULL);

		(void)snprintf(prefix, sizeof(prefix), "config file %s", path);
		if (r != -EINVAL || strncmp(err.s, prefix, strlen(prefix)) != 0 ||
		    !strstr(err.s, cases[i].want))
			fail_msg("case %zu: r=%d '%s', want '%s'", i, r, err.s, cases[i].want);
		cfg_done(&c);
	}
}

/* publishNodeAllocatableResourceMapping is set in the file only, as in the
 * reference driver: a flag or environment variable of that name is no way
 * to turn it on. */
static void test_node_allocatable_mapping_is_a_file_only_key(void **state)
{
	const char *on = write_file("na.yaml", "publishNodeAllocatableResourceMapping: true\n");
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse_argv(&c, &err, NULL), 0);
	assert_false(c.node_allocatable);
	cfg_done(&c);
	assert_int_equal(parse_argv(&c, &err, "--config", on, NULL), 0);
	assert_true(c.node_allocatable);
	cfg_done(&c);
	setenv("DRA_CPU_PUBLISH_NODE_ALLOCATABLE_RESOURCE_MAPPING", "false", 1);
	assert_int_equal(parse_argv(&c, &err, "--config", on, NULL), 0);
	assert_true(c.node_allocatable); /* the environment does not reach it */
	cfg_done(&c);
	unsetenv("DRA_CPU_PUBLISH_NODE_ALLOCATABLE_RESOURCE_MAPPING");
	assert_int_equal(parse_argv(&c, &err, "--publish-node-allocatable-resource-mapping", NULL),
			 -EINVAL);
	assert_non_null(strstr(err.s, "set it in the configuration file (key "
				    "publishNodeAllocatableResourceMapping)"));
	cfg_done(&c);
	on = write_file("na.yaml", "publishNodeAllocatableResourceMapping: \"yes\"\n");
	assert_int_equal(parse_argv(&c, &err, "--config", on, NULL), -EINVAL);
	assert_non_null(strstr(err.s, "publishNodeAllocatableResourceMapping: must be a boolean"));
	cfg_done(&c);
}

static void test_file_sets_rt_cpus(void **state)
{
	const char *path = write_file("rt.yaml", "apiVersion: v1alpha1\nrtCPUs: \"2-3\"\n");
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse_argv(&c, &err, "--config", path, NULL), 0);
	assert_string_equal(c.rt_cpus_str, "2-3");
	assert_int_equal(cpuset_count(&c.rt_cpus), 2);
	assert_true(cpuset_is_empty(&c.reserved));
	cfg_done(&c);
	assert_int_equal(parse_argv(&c, &err, "--config", path, "--rt-cpus", "", NULL), 0);
	assert_true(cpuset_is_empty(&c.rt_cpus)); /* the flag wins: off */
	cfg_done(&c);
}

/* A FIFO where the file belongs is an error, never a hang. */
static void test_missing_or_special_file_is_a_clear_error(void **state)
{
	struct errbuf err = { "" };
	char fifo[256];
	struct cfg c;

	assert_int_equal(parse_argv(&c, &err, "--config", "/nonexistent/dra.yaml", NULL), -EINVAL);
	assert_non_null(strstr(err.s, "config file /nonexistent/dra.yaml: cannot read it"));
	cfg_done(&c);
	(void)snprintf(fifo, sizeof(fifo), "%s/fifo.yaml", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(parse_argv(&c, &err, "--config", fifo, NULL), -EINVAL);
	assert_non_null(strstr(err.s, "config file"));
	cfg_done(&c);
}

/* The DaemonSet mounts the ConfigMap as a volume: config.yaml is a link to
 * ..data/config.yaml, ..data a link to a timestamped directory. It must be
 * read through them (this used to exit 2 on every node), and what the links
 * end in must still be a regular file. */
static void test_file_in_a_configmap_volume_is_read_through_its_links(void **state)
{
	struct errbuf err = { "" };
	char vol[256], fifo[256], dir[256], link[256];
	const char *path;
	uint64_t first;
	struct cfg c;

	(void)snprintf(vol, sizeof(vol), "%s/configmap", tmpdir);
	path = testutil_volume_write(vol, "config.yaml", "cpuDeviceMode: individual\n");
	assert_int_equal(parse_argv(&c, &err, "--config", path, NULL), 0);
	assert_int_equal(c.device_mode, DEVICES_INDIVIDUAL);
	first = c.config_digest;
	assert_true(first != 0);
	cfg_done(&c);

	/* An update in place: a new ..data; the same path reads the new file. */
	path = testutil_volume_write(vol, "config.yaml", "cpuDeviceMode: grouped\n");
	assert_int_equal(parse_argv(&c, &err, "--config", path, NULL), 0);
	assert_int_equal(c.device_mode, DEVICES_GROUPED);
	assert_true(c.config_digest != first);
	cfg_done(&c);

	/* Links that end in a FIFO or a directory are still refused. */
	(void)snprintf(fifo, sizeof(fifo), "%s/end-fifo", tmpdir);
	(void)snprintf(dir, sizeof(dir), "%s/end-dir", tmpdir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	(void)snprintf(link, sizeof(link), "%s/to-fifo.yaml", tmpdir);
	assert_int_equal(symlink(fifo, link), 0);
	assert_int_equal(parse_argv(&c, &err, "--config", link, NULL), -EINVAL);
	assert_non_null(strstr(err.s, "is a FIFO, not a regular file"));
	cfg_done(&c);
	(void)snprintf(link, sizeof(link), "%s/to-dir.yaml", tmpdir);
	assert_int_equal(symlink(dir, link), 0);
	assert_int_equal(parse_argv(&c, &err, "--config", link, NULL), -EINVAL);
	assert_non_null(strstr(err.s, "is a directory, not a regular file"));
	cfg_done(&c);
}

static int group_setup(void **state)
{
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[300];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars_are_typed_as_yaml_core_schema),
		cmocka_unit_test(test_quoted_boolean_is_a_string),
		cmocka_unit_test(test_empty_file_and_comments_set_nothing),
		cmocka_unit_test(test_file_in_a_configmap_volume_is_read_through_its_links),
		cmocka_unit_test(test_bad_files_are_refused_with_line_and_reason),
		cmocka_unit_test(test_caps_bound_what_a_file_can_make_us_hold),
		cmocka_unit_test(test_file_sets_values_and_flags_and_env_win),
		cmocka_unit_test(test_bad_file_errors_name_file_line_and_key),
		cmocka_unit_test(test_missing_or_special_file_is_a_clear_error),
		cmocka_unit_test(test_node_allocatable_mapping_is_a_file_only_key),
		cmocka_unit_test(test_file_sets_rt_cpus),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
