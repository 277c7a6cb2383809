/* pcie: root-complex names, their CPU affinity, sorting and what is left out;
 * the loader over a sysfs tree written in a temporary directory and over the
 * real capture of test/data/topologies that carries a PCI tree. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/pcie.h"
#include "lib/errbuf.h"

static char tmpdir[] = "/tmp/pcie-test.XXXXXX";

static void mkdirs(const char *path)
{
	char buf[1024];

	(void)snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			(void)mkdir(buf, 0755);
			*p = '/';
		}
	(void)mkdir(buf, 0755);
}

/* <tmpdir>/<tree>/sys/devices/<root>/pci_bus/<bus>/cpulistaffinity = text
 * (text NULL: the directory without the file). */
static void root(const char *tree, const char *name, const char *bus, const char *text)
{
	char dir[1024], file[1100];
	FILE *f;

	(void)snprintf(dir, sizeof(dir), "%s/%s/sys/devices/%s/pci_bus/%s", tmpdir, tree, name,
		       bus);
	mkdirs(dir);
	if (!text)
		return;
	(void)snprintf(file, sizeof(file), "%s/cpulistaffinity", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static const char *tree(const char *name)
{
	static char buf[1024];

	(void)snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

static void test_pcie_root_names_are_exactly_the_kernels(void **st)
{
	static const char *const good[] = { "pci0000:00", "pci0000:3a", "pci10ff:ff" };
	static const char *const bad[] = { "pci0000:0",	  "pci0000:000", "pci00000:00",
					   "PCI0000:00",  "pci0000:0A",	 "pci000g:00",
					   "pci0000-00",  "pcix000:00",	 "",
					   "0000:00:00.0" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(pcie_is_root_name(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (pcie_is_root_name(bad[i]))
			fail_msg("'%s' taken for a root", bad[i]);
}

static void test_pcie_add_root_keeps_order_and_counts_what_is_left_out(void **st)
{
	struct pcie p = { 0 };

	assert_int_equal(pcie_add_root(&p, "pci0000:5d", "0-7,16-23\n", 10), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:17", "8-15", 4), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:3a", "0", 1), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:3a", "1", 1), -EEXIST);
	assert_int_equal(pcie_add_root(&p, "pci0000:3", "1", 1), -EINVAL);
	assert_int_equal(pcie_add_root(&p, "pci0001:00", NULL, 0), 0);
	assert_int_equal(pcie_add_root(&p, "pci0002:00", "7-3", 3), 0);
	assert_int_equal(pcie_add_root(&p, "pci0003:00", "\n", 1), 0);
	assert_int_equal(p.n, 3);
	assert_string_equal(p.v[0].name, "pci0000:17");
	assert_string_equal(p.v[1].name, "pci0000:3a");
	assert_string_equal(p.v[2].name, "pci0000:5d");
	assert_int_equal(cpuset_count(&p.v[2].cpus), 16);
	assert_int_equal(p.n_skipped, 3);
	assert_non_null(strstr(p.skipped, "pci0001:00: cpulistaffinity is missing"));
	free(p.v);
}

static void test_pcie_add_root_stops_at_the_cap(void **st)
{
	struct pcie p = { 0 };
	char name[16];

	for (int i = 0; i < PCIE_MAX_ROOTS; i++) {
		(void)snprintf(name, sizeof(name), "pci%04x:00", i);
		assert_int_equal(pcie_add_root(&p, name, "0", 1), 1);
	}
	assert_int_equal(pcie_add_root(&p, "pciffff:00", "0", 1), -E2BIG);
	assert_int_equal(p.n, PCIE_MAX_ROOTS);
	free(p.v);
}

static void test_pcie_roots_of_a_cpu_set(void **st)
{
	struct pcie p = { 0 };
	struct cpuset cpus;
	int idx[4];

	assert_int_equal(pcie_add_root(&p, "pci0000:00", "0-3", 3), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:80", "4-7", 3), 1);
	assert_int_equal(pcie_add_root(&p, "pci0001:00", "0-7", 3), 1);
	assert_int_equal(cpuset_parse("5", &cpus, NULL), 0);
	assert_int_equal(pcie_roots_of(&p, &cpus, idx), 2);
	assert_int_equal(idx[0], 1);
	assert_int_equal(idx[1], 2);
	assert_int_equal(cpuset_parse("3-4", &cpus, NULL), 0);
	assert_int_equal(pcie_roots_of(&p, &cpus, idx), 3);
	assert_int_equal(cpuset_parse("9", &cpus, NULL), 0);
	assert_int_equal(pcie_roots_of(&p, &cpus, idx), 0);
	assert_int_equal(pcie_roots_of(NULL, &cpus, idx), 0);
	free(p.v);
}

static void test_pcie_load_reads_a_sysfs_tree(void **st)
{
	struct pcie *p = NULL;
	struct errbuf eb = {};
	char other[1100];

	root("a", "pci0000:80", "0000:80", "4-7\n");
	root("a", "pci0000:00", "0000:00", "0-3\n");
	root("a", "pci0000:40", "0000:40", NULL);	    /* no affinity file */
	root("a", "pci0000:41", "0000:41", "garbage\n"); /* not a list */
	root("a", "PCI0000:50", "0000:50", "0-7\n");	    /* not a root name */
	/* a bus below a root is not a root */
	root("a", "pci0000:00/0000:00:01.0", "0000:01", "0-7\n");
	(void)snprintf(other, sizeof(other), "%s/a/sys/devices/system", tmpdir);
	mkdirs(other);

	assert_int_equal(pcie_load(tree("a"), &p, &eb), 0);
	assert_int_equal(p->n, 2);
	assert_string_equal(p->v[0].name, "pci0000:00");
	assert_string_equal(p->v[1].name, "pci0000:80");
	assert_int_equal(cpuset_first(&p->v[1].cpus), 4);
	assert_int_equal(p->n_skipped, 2);
	p = pcie_free(p);

	/* no sys/devices at all: no roots, no error */
	assert_int_equal(pcie_load(tree("absent"), &p, &eb), 0);
	assert_int_equal(p->n, 0);
	p = pcie_free(p);
}

static void test_pcie_load_the_capture_with_a_pci_tree(void **st)
{
	struct pcie *p = NULL;
	struct errbuf eb = {};
	char cmd[2048];

	(void)snprintf(cmd, sizeof(cmd),
		       "tar -xjf test/data/topologies/32intel64-2p8co2t+8ve.tar.bz2 -C %s", tmpdir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(pcie_load(tree("32intel64-2p8co2t+8ve"), &p, &eb), 0);
	/* three host bridges, all on socket 0 (CPUs 0-7 and their siblings) */
	assert_int_equal(p->n, 3);
	assert_string_equal(p->v[0].name, "pci0000:17");
	assert_string_equal(p->v[1].name, "pci0000:3a");
	assert_string_equal(p->v[2].name, "pci0000:5d");
	for (int i = 0; i < 3; i++) {
		char list[64];

		assert_true(cpuset_format(&p->v[i].cpus, list, sizeof(list)) > 0);
		assert_string_equal(list, "0-7,16-23");
	}
	assert_int_equal(p->n_skipped, 0);
	pcie_free(p);
}

static int group_setup(void **st)
{
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **st)
{
	char cmd[300];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pcie_root_names_are_exactly_the_kernels),
		cmocka_unit_test(test_pcie_add_root_keeps_order_and_counts_what_is_left_out),
		cmocka_unit_test(test_pcie_add_root_stops_at_the_cap),
		cmocka_unit_test(test_pcie_roots_of_a_cpu_set),
		cmocka_unit_test(test_pcie_load_reads_a_sysfs_tree),
		cmocka_unit_test(test_pcie_load_the_capture_with_a_pci_tree),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
