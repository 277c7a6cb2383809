/* devices: the enumeration contract and grouped devices. */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cmd/cfg.h"
#include "core/devices.h"
#include "core/rt.h"
#include "testutil.h"

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static void test_devices_individual_siblings_follow_each_cpu(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2); /* 16 CPUs, sibling N+8 */
	_cleanup_(devices_freep) struct devices *d = NULL;
	const int want[] = { 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15 };

	assert_int_equal(devices_build(t, NULL, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(d->n, 16);
	for (int i = 0; i < 16; i++) {
		char name[16];

		snprintf(name, sizeof(name), "cpudev%03d", i);
		assert_string_equal(d->v[i].name, name);
		assert_int_equal(d->v[i].id, want[i]);
		assert_ptr_equal(devices_find(d, name), &d->v[i]);
	}
	assert_true(d->smt);
}

static void test_devices_individual_reserved_cpu_zero_shifts_names(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset reserved = cs("0");
	const int want[] = { 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 8 };

	assert_int_equal(devices_build(t, &reserved, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(d->n, 15);
	for (int i = 0; i < 15; i++)
		assert_int_equal(d->v[i].id, want[i]);
	for (int i = 0; i < d->n; i++)
		assert_int_not_equal(d->v[i].id, 0);
}

static void test_devices_individual_names_past_999_get_four_digits(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(4, 2, 64, 2); /* 1024 CPUs */
	_cleanup_(devices_freep) struct devices *d = NULL;

	assert_int_equal(devices_build(t, NULL, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(d->n, 1024);
	assert_string_equal(d->v[999].name, "cpudev999");
	assert_string_equal(d->v[1000].name, "cpudev1000");
	assert_ptr_equal(devices_find(d, "cpudev1000"), &d->v[1000]);
	assert_int_equal(d->v[1].id, 512);
	assert_int_equal(d->v[1].numa, 0);
}

static void test_devices_find_rejects_near_misses(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1);
	_cleanup_(devices_freep) struct devices *d = NULL;
	const char *bad[] = { "cpudev", "cpudev00", "cpudev0000", "cpudev004", "cpudev-01",
			      "cpudev+01", "cpudev 01", "xcpudev000", "cpudev000x", "cpudevnuma000",
			      "" };

	assert_int_equal(devices_build(t, NULL, DEVICES_INDIVIDUAL, 0, &d), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (devices_find(d, bad[i]))
			fail_msg("'%s' resolved", bad[i]);
	assert_non_null(devices_find(d, "cpudev003"));
}

static void test_devices_grouped_by_numa_socket_machine(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 2, 4, 2); /* 32 CPUs, 4 NUMA */
	_cleanup_(devices_freep) struct devices *numa = NULL, *sock = NULL, *mach = NULL;
	struct cpuset reserved = cs("0,16"), c;
	char buf[64];

	assert_int_equal(devices_build(t, &reserved, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &numa), 0);
	assert_int_equal(numa->n, 4);
	assert_string_equal(numa->v[0].name, "cpudevnuma000");
	assert_string_equal(numa->v[3].name, "cpudevnuma003");
	assert_int_equal(numa->v[0].n_cpus, 6);
	assert_int_equal(numa->v[1].n_cpus, 8);
	assert_int_equal(numa->v[2].socket, 1);
	device_cpus(&numa->v[0], &c);
	cpuset_format(&c, buf, sizeof(buf));
	assert_string_equal(buf, "1-3,17-19");

	assert_int_equal(devices_build(t, &reserved, DEVICES_GROUPED, DEVICES_BY_SOCKET, &sock), 0);
	assert_int_equal(sock->n, 2);
	assert_string_equal(sock->v[1].name, "cpudevsocket001");
	assert_int_equal(sock->v[0].n_cpus, 14);
	assert_int_equal(sock->v[1].n_cpus, 16);

	assert_int_equal(devices_build(t, &reserved, DEVICES_GROUPED, DEVICES_BY_MACHINE, &mach), 0);
	assert_int_equal(mach->n, 1);
	assert_string_equal(mach->v[0].name, "cpudevmachine");
	assert_int_equal(mach->v[0].n_cpus, 30);
	assert_ptr_equal(devices_find(mach, "cpudevmachine"), &mach->v[0]);
}

/* A grouped node holds a record per group, not per CPU: 8 of 88 bytes for
 * 1024 CPUs, not 88 KiB of which 8 are used. */
static void test_devices_grouped_table_holds_the_groups_only(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(4, 2, 64, 2); /* 1024 CPUs, 8 NUMA */
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct isol iso = {};

	iso.isolated = cs("1000-1023");
	assert_int_equal(devices_build_isol(t, NULL, &iso, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d),
			 0);
	assert_int_equal(d->n, 9);
	assert_string_equal(d->v[7].name, "cpudevnuma007");
	assert_string_equal(d->v[8].name, "cpuisonuma007");
	assert_int_equal(d->v[8].n_cpus, 24);
	assert_true(malloc_usable_size(d->v) < 16 * sizeof(*d->v));
}

static void test_devices_group_with_everything_reserved_is_skipped(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 2, 1); /* 4 CPUs, 2 NUMA */
	_cleanup_(devices_freep) struct devices *d = NULL, *none = NULL;
	struct cpuset reserved = cs("0-1"), all = cs("0-3");

	assert_int_equal(devices_build(t, &reserved, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d), 0);
	assert_int_equal(d->n, 1);
	assert_string_equal(d->v[0].name, "cpudevnuma001");
	assert_int_equal(devices_build(t, &all, DEVICES_GROUPED, 0, &none), -EINVAL);
	assert_null(none);
}

static void test_devices_cpus_without_numa_are_never_node_zero(void **st)
{
	/* CPUs 0-1 have no node (their node is offline), 2-3 are on node 1, and
	 * no package is reported at all. */
	struct topo_cpu cpus[] = {
		{ .cpu = 0, .core = 0, .numa = -1, .socket = -1, .l3 = -1 },
		{ .cpu = 1, .core = 0, .numa = -1, .socket = -1, .l3 = -1 },
		{ .cpu = 2, .core = 1, .numa = 1, .socket = -1, .l3 = -1 },
		{ .cpu = 3, .core = 1, .numa = 1, .socket = -1, .l3 = -1 },
	};
	_cleanup_(topo_freep) struct topo *t = NULL;
	_cleanup_(devices_freep) struct devices *d = NULL, *s = NULL, *i = NULL;
	struct cpuset c;

	assert_int_equal(topo_build(cpus, 4, NULL, &t, NULL), 0);
	assert_int_equal(devices_build(t, NULL, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d), 0);
	assert_int_equal(d->n, 2);
	assert_string_equal(d->v[0].name, "cpudevnuma001");
	assert_int_equal(d->v[0].numa, 1);
	assert_string_equal(d->v[1].name, "cpudevnonuma");
	assert_int_equal(d->v[1].numa, -1);
	assert_int_equal(d->v[1].n_cpus, 2);
	device_cpus(&d->v[1], &c);
	assert_true(cpuset_equal(&c, &(struct cpuset){ .w = { 0x3 } }));
	assert_null(devices_find(d, "cpudevnuma000"));
	assert_non_null(devices_find(d, "cpudevnonuma"));
	/* a machine without packages is one socket */
	assert_int_equal(devices_build(t, NULL, DEVICES_GROUPED, DEVICES_BY_SOCKET, &s), 0);
	assert_int_equal(s->n, 1);
	assert_string_equal(s->v[0].name, "cpudevsocket000");
	/* individual devices keep numa -1 (slices then publish no NUMA attribute) */
	assert_int_equal(devices_build(t, NULL, DEVICES_INDIVIDUAL, 0, &i), 0);
	assert_int_equal(i->v[0].numa, -1);
}

static void test_devices_socket_ids_beyond_the_cpu_limit(void **st)
{
	/* Kunpeng 920 reports packages 36 and 8442. */
	struct topo_cpu cpus[] = {
		{ .cpu = 0, .core = 0, .numa = 0, .socket = 8442, .l3 = 0 },
		{ .cpu = 1, .core = 1, .numa = 1, .socket = 36, .l3 = 1 },
	};
	_cleanup_(topo_freep) struct topo *t = NULL;
	_cleanup_(devices_freep) struct devices *d = NULL;

	assert_int_equal(topo_build(cpus, 2, NULL, &t, NULL), 0);
	assert_int_equal(devices_build(t, NULL, DEVICES_GROUPED, DEVICES_BY_SOCKET, &d), 0);
	assert_int_equal(d->n, 2);
	assert_string_equal(d->v[0].name, "cpudevsocket036");
	assert_string_equal(d->v[1].name, "cpudevsocket8442");
	assert_ptr_equal(devices_find(d, "cpudevsocket8442"), &d->v[1]);
}

static void test_devices_rt_cpus_are_named_by_cpu_id_after_the_others(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2); /* 16 CPUs, sibling N+8 */
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset rt = cs("5,12"), off = cs("0,5,12");

	assert_int_equal(devices_build(t, &off, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &rt, 900), 0);
	assert_int_equal(d->n, 15);
	assert_int_equal(d->n_rt, 2);
	assert_string_equal(d->v[13].name, "cpurt005");
	assert_string_equal(d->v[14].name, "cpurt012");
	assert_int_equal(d->v[14].kind, DEVICE_RT);
	assert_int_equal(d->v[14].id, 12);
	assert_int_equal(d->v[14].core_id, topo_cpu(t, 12)->core_id);
	assert_int_equal(d->v[14].numa, topo_cpu(t, 12)->numa);
	assert_int_equal(d->v[14].rt_capacity_milli, 900);
	/* the ordinary devices skip them */
	for (int i = 0; i < 13; i++) {
		assert_int_equal(d->v[i].kind, DEVICE_CPU);
		assert_false(cpuset_has(&rt, d->v[i].id));
	}
	assert_false(cpuset_has(&d->allocatable, 5));
	assert_ptr_equal(devices_find(d, "cpurt005"), &d->v[13]);
	assert_ptr_equal(devices_find(d, "cpurt012"), &d->v[14]);
	assert_string_equal(devices_find(d, "cpudev012")->name, "cpudev012");
	assert_null(devices_find(d, "cpudev013"));
	assert_null(devices_find(d, "cpurt5"));
	assert_null(devices_find(d, "cpurt0005"));
	assert_null(devices_find(d, "cpurt006"));
	assert_null(devices_find(d, "cpurt-05"));
	assert_null(devices_find(d, "cpurt005x"));
	assert_null(devices_find(d, "cpurt"));
	/* once only */
	assert_int_equal(devices_add_rt(d, t, &rt, 900), -EINVAL);
}

static void test_devices_rt_in_grouped_mode_and_bad_sets(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1);
	_cleanup_(devices_freep) struct devices *d = NULL, *e = NULL;
	struct cpuset rt = cs("3"), off = cs("3"), offline = cs("9");

	assert_int_equal(devices_build(t, &off, DEVICES_GROUPED, DEVICES_BY_MACHINE, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &offline, 900), -EINVAL);
	assert_int_equal(devices_add_rt(d, t, &rt, 0), -EINVAL);
	assert_int_equal(devices_add_rt(d, t, &rt, 950), 0);
	assert_int_equal(d->n, 2);
	assert_string_equal(d->v[0].name, "cpudevmachine");
	assert_int_equal(d->v[0].n_cpus, 3);
	assert_ptr_equal(devices_find(d, "cpurt003"), &d->v[1]);
	/* a real-time CPU that is still allocatable is refused */
	assert_int_equal(devices_build(t, NULL, DEVICES_GROUPED, DEVICES_BY_MACHINE, &e), 0);
	assert_int_equal(devices_add_rt(e, t, &rt, 950), -EINVAL);
}

/* The node's devices: reserved and real-time CPUs left out of the ordinary
 * devices, the real-time ones appended only with the kernel's limits. */
static void test_devices_build_node_leaves_out_reserved_and_rt_cpus(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1); /* CPUs 0-3 */
	_cleanup_(devices_freep) struct devices *d = NULL, *e = NULL;
	struct cpuset reserved = cs("0"), rt = cs("3");
	struct rt_limits limits = { .capacity_milli = 950 };
	struct cpuset left = cs("1-2");

	assert_int_equal(devices_build_node(t, &reserved, &rt, NULL, DEVICES_INDIVIDUAL, 0, &limits, &d),
			 0);
	assert_int_equal(d->n, 3);
	assert_int_equal(d->n_rt, 1);
	assert_int_equal(d->v[0].id, 1);
	assert_int_equal(d->v[1].id, 2);
	assert_string_equal(d->v[2].name, "cpurt003");
	assert_int_equal(d->v[2].rt_capacity_milli, 950);
	assert_true(cpuset_equal(&d->allocatable, &left));
	/* without the kernel's limits: the real-time CPUs are only left out */
	assert_int_equal(devices_build_node(t, NULL, &rt, NULL, DEVICES_INDIVIDUAL, 0, NULL, &e), 0);
	assert_int_equal(e->n, 3);
	assert_int_equal(e->n_rt, 0);
	assert_false(cpuset_has(&e->allocatable, 3));
}

/* dra.cpu/smtLayout: strided pairs by ascending stride, then the CPUs
 * without a sibling; three threads a core cannot be said. */
static void test_devices_smt_layout_encodes_pairs_and_singles(void **state)
{
	struct topo *t = testutil_topo(2, 1, 4, 2); /* siblings c, c + 8 */
	struct topo_cpu mixed[] = {
		/* hybrid: cores 0-1 with siblings 4 apart, 2 with 1 apart, 3 alone */
		{ .cpu = 0, .core = 0, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 4, .core = 0, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 1, .core = 1, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 5, .core = 1, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 2, .core = 2, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 3, .core = 2, .numa = 0, .socket = 0, .l3 = 0 },
		{ .cpu = 6, .core = 3, .numa = 0, .socket = 0, .l3 = 0 },
	};
	struct topo *m = NULL, *three = testutil_topo(1, 1, 2, 3);
	struct errbuf why = { "" };
	char buf[65], tiny[4];

	(void)state;
	assert_int_equal(devices_smt_layout(t, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "0-15>8");
	assert_int_equal(topo_build(mixed, 7, NULL, &m, &why), 0);
	assert_true(devices_smt_layout(m, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "2-3>1;0-1,4-5>4;6");
	assert_int_equal(devices_smt_layout(t, tiny, sizeof(tiny)), -E2BIG);
	assert_int_equal(devices_smt_layout(three, buf, sizeof(buf)), -EOPNOTSUPP);
	topo_free(t);
	topo_free(m);
	topo_free(three);
}

/* Isolation as host/isol reads it: domain and nohz_full per CPU. */
static struct isol iso(const char *domain, const char *nohz, const char *managed)
{
	struct isol i = { .domain_source = "sysfs" };

	i.domain = cs(domain);
	i.nohz_full = cs(nohz);
	i.managed_irq = cs(managed);
	cpuset_or(&i.isolated, &i.domain, &i.nohz_full);
	return i;
}

static void assert_cpus(const struct device *dev, const char *want)
{
	struct cpuset c;
	char got[128];

	device_cpus(dev, &c);
	(void)cpuset_format(&c, got, sizeof(got));
	assert_string_equal(got, want);
}

static void test_devices_grouped_isolated_cpus_are_devices_of_their_own(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2); /* nodes 0-3,8-11 | 4-7,12-15 */
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct isol i = iso("2-3,10-11", "2-3,6,10-11,14", "2-3,10-11");
	char list[64];

	assert_int_equal(devices_build_isol(t, NULL, &i, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d),
			 0);
	assert_int_equal(d->n, 4);
	/* the ordinary devices keep their names and lose the isolated CPUs */
	assert_string_equal(d->v[0].name, "cpudevnuma000");
	assert_cpus(&d->v[0], "0-1,8-9");
	assert_false(d->v[0].isolated);
	assert_string_equal(d->v[1].name, "cpudevnuma001");
	assert_cpus(&d->v[1], "4-5,7,12-13,15");
	/* then the isolated CPUs of each node, with what all of them share */
	assert_string_equal(d->v[2].name, "cpuisonuma000");
	assert_cpus(&d->v[2], "2-3,10-11");
	assert_true(d->v[2].isolated);
	assert_int_equal(d->v[2].n_cpus, 4);
	assert_int_equal(d->v[2].numa, 0);
	assert_int_equal(d->v[2].isol_flags,
			 DEVICE_ISOL_DOMAIN | DEVICE_ISOL_NOHZ_FULL | DEVICE_ISOL_MANAGED_IRQ);
	assert_string_equal(d->v[3].name, "cpuisonuma001");
	assert_cpus(&d->v[3], "6,14");
	assert_int_equal(d->v[3].isol_flags, DEVICE_ISOL_NOHZ_FULL);
	assert_ptr_equal(devices_find(d, "cpuisonuma001"), &d->v[3]);
	(void)cpuset_format(&d->isolated, list, sizeof(list));
	assert_string_equal(list, "2-3,6,10-11,14");
}

/* The kernel isolated CPUs at run time: the devices are built again and
 * take the place of the old ones, under the pointer everyone borrows. */
static void test_devices_replace_keeps_the_pointer(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct devices *nd = NULL, *before;
	struct isol i = iso("2-3", "", "");

	assert_int_equal(devices_build(t, NULL, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d), 0);
	assert_int_equal(d->n, 2);
	assert_int_equal(devices_build_isol(t, NULL, &i, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &nd),
			 0);
	before = d;
	devices_replace(d, nd); /* nd is freed: ASan and valgrind see a double free */
	assert_ptr_equal(d, before);
	assert_int_equal(d->n, 3);
	assert_cpus(&d->v[0], "0-1,8-11");
	assert_string_equal(d->v[2].name, "cpuisonuma000");
	assert_cpus(&d->v[2], "2-3");
	assert_true(cpuset_equal(&d->isolated, &i.isolated));
}

static void test_devices_grouped_all_isolated_leaves_no_ordinary_device(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 2, 1);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct isol i = iso("", "0-1", "");

	assert_int_equal(devices_build_isol(t, NULL, &i, DEVICES_GROUPED, DEVICES_BY_MACHINE, &d),
			 0);
	assert_int_equal(d->n, 1);
	assert_string_equal(d->v[0].name, "cpuisomachine");
	assert_null(devices_find(d, "cpudevmachine"));
	assert_int_equal(d->v[0].isol_flags, DEVICE_ISOL_NOHZ_FULL);
}

static void test_devices_individual_isolated_cpus_keep_the_names(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 4, 2);
	_cleanup_(devices_freep) struct devices *plain = NULL, *d = NULL;
	struct isol i = iso("1,9", "1,9,5", "");
	struct cpuset rt = cs("15"), off = cs("15");

	assert_int_equal(devices_build(t, &off, DEVICES_INDIVIDUAL, 0, &plain), 0);
	assert_int_equal(devices_build_isol(t, &off, &i, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &rt, 900), 0);
	assert_int_equal(d->n, plain->n + 1);
	for (int k = 0; k < plain->n; k++) {
		assert_string_equal(d->v[k].name, plain->v[k].name);
		assert_int_equal(d->v[k].id, plain->v[k].id);
		assert_int_equal(d->v[k].isolated, cpuset_has(&i.isolated, d->v[k].id));
		if (d->v[k].id == 1)
			assert_int_equal(d->v[k].isol_flags,
					 DEVICE_ISOL_DOMAIN | DEVICE_ISOL_NOHZ_FULL);
		if (d->v[k].id == 5)
			assert_int_equal(d->v[k].isol_flags, DEVICE_ISOL_NOHZ_FULL);
	}
	assert_false(d->v[d->n - 1].isolated); /* cpurt015 is not isolated */
}

static void test_devices_rt_capacity_follows_the_kernel(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 4, 1);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset rt = cs("2-3");

	assert_int_equal(devices_build(t, &rt, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &rt, 900), 0);
	assert_int_equal(devices_set_rt_capacity(d, 850), 0);
	assert_int_equal(devices_find(d, "cpurt002")->rt_capacity_milli, 850);
	assert_int_equal(devices_find(d, "cpurt003")->rt_capacity_milli, 850);
	assert_int_equal(devices_set_rt_capacity(d, 0), -EINVAL);
	assert_int_equal(devices_find(d, "cpurt003")->rt_capacity_milli, 850);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_devices_individual_siblings_follow_each_cpu),
		cmocka_unit_test(test_devices_individual_reserved_cpu_zero_shifts_names),
		cmocka_unit_test(test_devices_individual_names_past_999_get_four_digits),
		cmocka_unit_test(test_devices_find_rejects_near_misses),
		cmocka_unit_test(test_devices_grouped_by_numa_socket_machine),
		cmocka_unit_test(test_devices_grouped_table_holds_the_groups_only),
		cmocka_unit_test(test_devices_group_with_everything_reserved_is_skipped),
		cmocka_unit_test(test_devices_cpus_without_numa_are_never_node_zero),
		cmocka_unit_test(test_devices_socket_ids_beyond_the_cpu_limit),
		cmocka_unit_test(test_devices_rt_cpus_are_named_by_cpu_id_after_the_others),
		cmocka_unit_test(test_devices_rt_in_grouped_mode_and_bad_sets),
		cmocka_unit_test(test_devices_build_node_leaves_out_reserved_and_rt_cpus),
		cmocka_unit_test(test_devices_smt_layout_encodes_pairs_and_singles),
		cmocka_unit_test(test_devices_grouped_isolated_cpus_are_devices_of_their_own),
		cmocka_unit_test(test_devices_grouped_all_isolated_leaves_no_ordinary_device),
		cmocka_unit_test(test_devices_individual_isolated_cpus_keep_the_names),
		cmocka_unit_test(test_devices_rt_capacity_follows_the_kernel),
		cmocka_unit_test(test_devices_replace_keeps_the_pointer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
