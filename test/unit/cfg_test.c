/* cfg: defaults, env, flags, validation messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmd/cfg.h"
#include "testutil.h"
#include "lib/errbuf.h"

static int parse(struct cfg *c, struct errbuf *err, ...)
{
	char *argv[32] = { "dra-cpu-driver" };
	int argc = 1;
	va_list ap;
	char *a;

	va_start(ap, err);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	return cfg_parse(c, argc, argv, err);
}

static void expect_error(const char *want, ...)
{
	char *argv[32] = { "dra-cpu-driver" };
	struct errbuf err = { "" };
	struct cfg c;
	int argc = 1;
	va_list ap;
	char *a;

	va_start(ap, want);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	assert_int_equal(cfg_parse(&c, argc, argv, &err), -EINVAL);
	if (!strstr(err.s, want))
		fail_msg("error '%s' lacks '%s'", err.s, want);
	cfg_done(&c);
}

static int setup(void **st)
{
	unsetenv("DRA_CPU_RESERVED_CPUS");
	unsetenv("DRA_CPU_RT_CPUS");
	unsetenv("DRA_CPU_CPU_DEVICE_MODE");
	unsetenv("DRA_CPU_NRI");
	unsetenv("NODE_NAME");
	return 0;
}

static void test_cfg_defaults_match_the_reference_driver(void **st)
{
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_int_equal(c.action, CFG_RUN);
	assert_int_equal(c.device_mode, DEVICES_GROUPED);
	assert_int_equal(c.group_by, DEVICES_BY_NUMANODE);
	assert_string_equal(c.bind_address, ":8080");
	assert_string_equal(c.kubelet_root_dir, "/var/lib/kubelet");
	assert_string_equal(c.cdi_dir, "/var/run/cdi");
	assert_string_equal(c.nri_socket, "/var/run/nri/nri.sock");
	assert_true(c.nri_push_updates);
	assert_true(c.kubelet_registration);
	assert_int_equal(c.pinning_enforcement, CFG_ENFORCE_AUDIT);
	assert_true(cpuset_is_empty(&c.reserved));
	assert_int_equal(c.kubelet_first_request_timeout_s, 10);
	assert_int_equal(c.slice_repair_timeout_s, 30);
	cfg_done(&c);
}

static void test_cfg_flag_syntaxes_and_alias(void **st)
{
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse(&c, &err, "--cpu-device-mode", "individual", "-reserved-cpus=0,4",
			       "--cpu-device-group-by=socket", "--no-nri", "--bpf=false", "-v", "2",
			       "--print-topology", NULL),
			 0);
	assert_int_equal(c.device_mode, DEVICES_INDIVIDUAL);
	assert_int_equal(c.group_by, DEVICES_BY_SOCKET);
	assert_int_equal(cpuset_count(&c.reserved), 2);
	assert_true(cpuset_has(&c.reserved, 4));
	assert_false(c.nri);
	assert_false(c.bpf);
	assert_int_equal(c.verbosity, 2);
	assert_int_equal(c.action, CFG_PRINT_TOPOLOGY);
	cfg_done(&c);
}

static void test_cfg_env_below_flags(void **st)
{
	struct errbuf err = { "" };
	struct cfg c;

	setenv("DRA_CPU_CPU_DEVICE_MODE", "individual", 1);
	setenv("DRA_CPU_RESERVED_CPUS", "1-2", 1);
	assert_int_equal(parse(&c, &err, "--reserved-cpus", "3", NULL), 0);
	assert_int_equal(c.device_mode, DEVICES_INDIVIDUAL);
	assert_string_equal(c.reserved_cpus_str, "3");
	assert_int_equal(cpuset_count(&c.reserved), 1);
	cfg_done(&c);
	setenv("DRA_CPU_CPU_DEVICE_MODE", "bogus", 1);
	assert_int_equal(parse(&c, &err, NULL), -EINVAL);
	assert_non_null(strstr(err.s, "env DRA_CPU_CPU_DEVICE_MODE: cpu-device-mode: unknown value"));
	cfg_done(&c);
	unsetenv("DRA_CPU_CPU_DEVICE_MODE");
	unsetenv("DRA_CPU_RESERVED_CPUS");
	unsetenv("DRA_CPU_RT_CPUS");
}

static void test_cfg_rejects_bad_values_with_the_flag_named(void **st)
{
	expect_error("cpu-device-mode: unknown value 'both' (one of grouped|individual)",
		     "--cpu-device-mode", "both", NULL);
	expect_error("group-by: unknown value 'l3' (one of numanode|socket|machine)", "--group-by=l3",
		     NULL);
	expect_error("reserved-cpus: invalid CPU list '3-1': reversed range 3-1", "--reserved-cpus",
		     "3-1", NULL);
	expect_error("reserved-cpus: invalid CPU list '0, 1': whitespace", "--reserved-cpus=0, 1",
		     NULL);
	expect_error("unknown flag 'frobnicate'", "--frobnicate", NULL);
	expect_error("flag reserved-cpus needs a value", "--reserved-cpus", NULL);
	expect_error("v: '11' is not an integer in 0..9", "-v", "11", NULL);
	expect_error("v: 'x' is not an integer", "--v=x", NULL);
	expect_error("nri: 'maybe' is not a boolean", "--nri=maybe", NULL);
	expect_error("unexpected argument 'extra'", "extra", NULL);
	expect_error("exclude each other", "--sysfs-root=/a", "--topology-file=/b", NULL);
	expect_error("kubelet-root-dir: 'relative' must be an absolute path", "--kubelet-root-dir",
		     "relative", NULL);
	expect_error("bind-address", "--bind-address", "8080", NULL);
	expect_error("flag no-nri takes no value", "--no-nri=true", NULL);
	expect_error("flag dry-run takes no value", "--dry-run=1", NULL);
	expect_error("unknown flag 'no-cdi-dir'", "--no-cdi-dir", NULL);
	expect_error("kubelet-first-request-timeout: '0' is not an integer in 1..600",
		     "--kubelet-first-request-timeout=0", NULL);
	expect_error("slice-repair-timeout: '3601' is not an integer in 1..3600",
		     "--slice-repair-timeout", "3601", NULL);
	expect_error("slice-repair-timeout: '1s' is not an integer", "--slice-repair-timeout=1s",
		     NULL);
}

static void test_cfg_rejects_kubelet_root_too_long_for_a_socket(void **st)
{
	char root[200];

	memset(root, 'a', sizeof(root));
	root[0] = '/';
	root[80] = 0; /* 80 + 34 > 107 */
	expect_error("registration socket path would exceed 107 bytes", "--kubelet-root-dir", root,
		     NULL);
	root[70] = 0; /* 70 + 34 = 104: fits */
	struct errbuf err = { "" };
	struct cfg c;
	assert_int_equal(parse(&c, &err, "--kubelet-root-dir", root, NULL), 0);
	cfg_done(&c);
}

static void test_cfg_check_topology_reserved_cpus(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1); /* CPUs 0-3 */
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse(&c, &err, "--reserved-cpus=0-1", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), 0);
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--reserved-cpus=2,7-8", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), -EINVAL);
	assert_non_null(strstr(err.s, "reserved-cpus: CPUs 7-8 are not online"));
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--reserved-cpus=0-3", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), -EINVAL);
	assert_non_null(strstr(err.s, "reserves every online CPU"));
	cfg_done(&c);
}

static void test_cfg_rt_cpus_parse_apart_from_reserved(void **st)
{
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_true(cpuset_is_empty(&c.rt_cpus)); /* off by default */
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--reserved-cpus", "0", "--rt-cpus=2-3", NULL), 0);
	assert_int_equal(cpuset_count(&c.rt_cpus), 2);
	assert_true(cpuset_has(&c.rt_cpus, 3));
	assert_int_equal(cpuset_count(&c.reserved), 1);
	assert_string_equal(c.rt_cpus_str, "2-3");
	cfg_done(&c);
	setenv("DRA_CPU_RT_CPUS", "5", 1);
	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_true(cpuset_has(&c.rt_cpus, 5));
	assert_true(cpuset_is_empty(&c.reserved));
	cfg_done(&c);
	unsetenv("DRA_CPU_RT_CPUS");
	expect_error("rt-cpus: invalid CPU list '3-1': reversed range 3-1", "--rt-cpus", "3-1",
		     NULL);
	expect_error("rt-cpus: invalid CPU list 'x'", "--rt-cpus=x", NULL);
}

static void test_cfg_check_topology_rt_cpus(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1); /* CPUs 0-3 */
	struct errbuf err = { "" };
	struct cfg c;

	assert_int_equal(parse(&c, &err, "--reserved-cpus=0", "--rt-cpus=2-3", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), 0);
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--rt-cpus=3-4", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), -EINVAL);
	assert_non_null(strstr(err.s, "rt-cpus: CPUs 4 are not online"));
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--reserved-cpus=1", "--rt-cpus=1-2", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), -EINVAL);
	assert_non_null(strstr(err.s, "rt-cpus and reserved-cpus both name CPUs 1"));
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--reserved-cpus=0", "--rt-cpus=1-3", NULL), 0);
	assert_int_equal(cfg_check_topology(&c, t, &err), -EINVAL);
	assert_non_null(strstr(err.s, "shared pool needs at least one"));
	cfg_done(&c);
}

static void test_cfg_node_name_precedence_and_normalisation(void **st)
{
	struct errbuf err = { "" };
	char name[256];
	struct cfg c;

	setenv("NODE_NAME", "Worker-7\n", 1);
	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_int_equal(cfg_node_name(&c, name, sizeof(name)), 0);
	assert_string_equal(name, "worker-7");
	cfg_done(&c);
	assert_int_equal(parse(&c, &err, "--hostname-override", " NodeA ", NULL), 0);
	assert_int_equal(cfg_node_name(&c, name, sizeof(name)), 0);
	assert_string_equal(name, "nodea");
	cfg_done(&c);
	unsetenv("NODE_NAME");
	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_int_equal(cfg_node_name(&c, name, sizeof(name)), 0);
	assert_true(strlen(name) > 0);
	cfg_done(&c);
}

/* The node name reaches URLs, selectors, slice names and log lines: what is
 * no Kubernetes node name is refused, from the flag at parse time, from the
 * environment when it is read. */
static void test_cfg_node_name_must_be_a_kubernetes_name(void **st)
{
	static const char *const bad[] = { "../etc", "node\nlevel=error", "a/b", "-node",
					   "node-", "a..b", "node 1", "n\u00e9" };
	struct errbuf err = { "" };
	char name[256], long_name[300];
	struct cfg c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.s[0] = 0;
		if (parse(&c, &err, "--hostname-override", bad[i], NULL) != -EINVAL)
			fail_msg("accepted: '%s'", bad[i]);
		assert_non_null(strstr(err.s, "flag hostname-override"));
		assert_null(strchr(err.s, '\n'));
		cfg_done(&c);
	}
	memset(long_name, 'a', 254);
	long_name[254] = 0;
	assert_int_equal(parse(&c, &err, "--hostname-override", long_name, NULL), -EINVAL);
	cfg_done(&c);
	setenv("NODE_NAME", "../../x", 1);
	assert_int_equal(parse(&c, &err, NULL), 0);
	assert_int_equal(cfg_node_name(&c, name, sizeof(name)), -EINVAL);
	cfg_done(&c);
	unsetenv("NODE_NAME");
	assert_int_equal(parse(&c, &err, "--hostname-override", "Worker-1.Zone-a", NULL), 0);
	assert_int_equal(cfg_node_name(&c, name, sizeof(name)), 0);
	assert_string_equal(name, "worker-1.zone-a");
	cfg_done(&c);
}

static void test_cfg_usage_lists_every_flag(void **st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	cfg_usage(f);
	fclose(f);
	const char *want[] = { "--cpu-device-mode grouped|individual", "--group-by",
			       "--cpu-device-group-by", "--reserved-cpus CPULIST",
			       "DRA_CPU_RESERVED_CPUS", "--nri-push-updates", "--no-nri-push-updates",
			       "--print-topology", "--dry-run", "--version", "--kubelet-root-dir",
			       "--rt-cpus CPULIST", "DRA_CPU_RT_CPUS", "file: rtCPUs" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(buf, want[i]))
			fail_msg("usage lacks %s", want[i]);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_cfg_defaults_match_the_reference_driver, setup),
		cmocka_unit_test_setup(test_cfg_flag_syntaxes_and_alias, setup),
		cmocka_unit_test_setup(test_cfg_env_below_flags, setup),
		cmocka_unit_test_setup(test_cfg_rejects_bad_values_with_the_flag_named, setup),
		cmocka_unit_test_setup(test_cfg_rejects_kubelet_root_too_long_for_a_socket, setup),
		cmocka_unit_test_setup(test_cfg_check_topology_reserved_cpus, setup),
		cmocka_unit_test_setup(test_cfg_rt_cpus_parse_apart_from_reserved, setup),
		cmocka_unit_test_setup(test_cfg_check_topology_rt_cpus, setup),
		cmocka_unit_test_setup(test_cfg_node_name_precedence_and_normalisation, setup),
		cmocka_unit_test_setup(test_cfg_node_name_must_be_a_kubernetes_name, setup),
		cmocka_unit_test_setup(test_cfg_usage_lists_every_flag, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
