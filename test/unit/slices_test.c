/* slices: ResourceSlice JSON per mode, chunking, identity fields. */
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

#include "cmd/cfg.h"
#include "core/devices.h"
#include "host/pcie.h"
#include "kube/slices.h"
#include "testutil.h"

static struct json_object *get(struct json_object *o, const char *path)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
		if (json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, (size_t)strtol(k, NULL, 10));
		else if (!json_object_object_get_ex(o, k, &o))
			return NULL;
		if (!o)
			return NULL;
	}
	return o;
}

static const char *str(struct json_object *o, const char *path)
{
	struct json_object *v = get(o, path);

	if (!v)
		fail_msg("missing %s", path);
	return json_object_get_string(v);
}

static int64_t num(struct json_object *o, const char *path)
{
	struct json_object *v = get(o, path);

	if (!v)
		fail_msg("missing %s", path);
	return json_object_get_int64(v);
}

static struct json_object *build(int sockets, int numa, int cores, int threads, int mode,
				 int group_by, const char *reserved, const char *uid)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(sockets, numa, cores, threads);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct slices_opts o = { .node = "worker-1", .node_uid = uid, .generation = 1 };
	struct json_object *arr = NULL;
	struct cpuset res;

	assert_int_equal(cpuset_parse(reserved, &res, NULL), 0);
	assert_int_equal(devices_build(t, &res, mode, group_by, &d), 0);
	assert_int_equal(slices_build(d, &o, &arr), 0);
	return arr;
}

static void test_slices_individual_384_cpus_make_three_full_slices(void **st)
{
	struct json_object *arr = build(2, 1, 96, 2, DEVICES_INDIVIDUAL, 0, "", "uid-1");

	assert_int_equal(json_object_array_length(arr), 3);
	for (int i = 0; i < 3; i++) {
		struct json_object *s = json_object_array_get_idx(arr, (size_t)i);
		char want[64];

		snprintf(want, sizeof(want), "%05x-dra.cpu-worker-1-", i);
		assert_string_equal(str(s, "metadata.generateName"), want);
		assert_string_equal(str(s, "apiVersion"), "resource.k8s.io/v1");
		assert_string_equal(str(s, "kind"), "ResourceSlice");
		assert_string_equal(str(s, "spec.driver"), "dra.cpu");
		assert_string_equal(str(s, "spec.nodeName"), "worker-1");
		assert_string_equal(str(s, "spec.pool.name"), "worker-1");
		assert_int_equal(num(s, "spec.pool.generation"), 1);
		assert_int_equal(num(s, "spec.pool.resourceSliceCount"), 3);
		assert_int_equal(json_object_array_length(get(s, "spec.devices")), 128);
		assert_string_equal(str(s, "metadata.ownerReferences.0.kind"), "Node");
		assert_string_equal(str(s, "metadata.ownerReferences.0.uid"), "uid-1");
		assert_true(json_object_get_boolean(get(s, "metadata.ownerReferences.0.controller")));
	}
	/* devices continue across slices in enumeration order */
	assert_string_equal(str(arr, "1.spec.devices.0.name"), "cpudev128");
	assert_string_equal(str(arr, "2.spec.devices.127.name"), "cpudev383");
	/* cpudev001 is CPU 0's sibling, 192 (siblings N and N+192) */
	struct json_object *cpu = NULL;
	assert_true(json_object_object_get_ex(get(arr, "0.spec.devices.1.attributes"),
					      "dra.cpu/cpuID", &cpu));
	assert_int_equal(num(cpu, "int"), 192);
	json_object_put(arr);
}

static void test_slices_individual_attributes(void **st)
{
	struct json_object *arr = build(2, 1, 2, 2, DEVICES_INDIVIDUAL, 0, "0", NULL);
	struct json_object *attrs = get(arr, "0.spec.devices.0.attributes"), *v;
	struct {
		const char *key;
		int64_t want;
	} ints[] = {
		{ "resource.kubernetes.io/numaNode", 0 }, { "dra.cpu/numaNodeID", 0 },
		{ "dra.net/numaNode", 0 },		  { "dra.cpu/socketID", 0 },
		{ "dra.cpu/cpuID", 1 },			  { "dra.cpu/coreID", 1 },
		{ "dra.cpu/cacheL3ID", 0 },
	};

	/* CPU 0 reserved: cpudev000 is CPU 1 (cores 0-3, siblings N and N+4). */
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		assert_true(json_object_object_get_ex(attrs, ints[i].key, &v));
		assert_true(json_object_object_get_ex(v, "int", &v));
		if (json_object_get_int64(v) != ints[i].want)
			fail_msg("%s = %lld", ints[i].key, (long long)json_object_get_int64(v));
	}
	assert_true(json_object_object_get_ex(attrs, "dra.cpu/coreType", &v));
	assert_string_equal(json_object_get_string(get(v, "string")), "standard");
	assert_true(json_object_object_get_ex(attrs, "dra.cpu/smtEnabled", &v));
	assert_true(json_object_get_boolean(get(v, "bool")));
	assert_int_equal(json_object_object_length(attrs), 9);
	assert_null(get(arr, "0.spec.devices.0.capacity"));
	assert_null(get(arr, "0.spec.devices.0.allowMultipleAllocations"));
	assert_null(get(arr, "0.metadata.ownerReferences"));
	json_object_put(arr);
}

static void test_slices_grouped_capacity_and_request_policy(void **st)
{
	struct json_object *arr = build(2, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "0", NULL);
	struct json_object *dev = get(arr, "0.spec.devices.0"), *attrs = get(dev, "attributes");
	struct json_object *cap = NULL;

	assert_int_equal(json_object_array_length(arr), 1);
	assert_int_equal(json_object_array_length(get(arr, "0.spec.devices")), 4);
	assert_string_equal(str(dev, "name"), "cpudevnuma000");
	assert_true(json_object_object_get_ex(get(dev, "capacity"), "dra.cpu/cpu", &cap));
	assert_string_equal(str(cap, "value"), "7");
	assert_string_equal(str(cap, "requestPolicy.default"), "1");
	assert_string_equal(str(cap, "requestPolicy.validRange.min"), "1");
	assert_string_equal(str(cap, "requestPolicy.validRange.step"), "1");
	assert_true(json_object_get_boolean(get(dev, "allowMultipleAllocations")));
	assert_int_equal(json_object_object_length(attrs), 6);
	assert_true(json_object_object_get_ex(attrs, "dra.cpu/numCPUs", NULL));
	assert_false(json_object_object_get_ex(attrs, "dra.cpu/cpuID", NULL));
	json_object_put(arr);
}

static void test_slices_one_cpu_group_has_no_step(void **st)
{
	/* 2 NUMA nodes of 2 CPUs; reserving 0 leaves a one-CPU group. */
	struct json_object *arr = build(2, 1, 2, 1, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "0", NULL);
	struct json_object *cap = NULL;

	assert_true(json_object_object_get_ex(get(arr, "0.spec.devices.0.capacity"), "dra.cpu/cpu",
					      &cap));
	assert_string_equal(str(cap, "value"), "1");
	assert_null(get(cap, "requestPolicy.validRange.step"));
	json_object_put(arr);
}

static void test_slices_socket_and_machine_attribute_sets(void **st)
{
	struct json_object *s = build(2, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_SOCKET, "", NULL);
	struct json_object *m = build(2, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_MACHINE, "", NULL);
	struct json_object *a;

	a = get(s, "0.spec.devices.1.attributes");
	assert_string_equal(str(s, "0.spec.devices.1.name"), "cpudevsocket001");
	assert_int_equal(json_object_object_length(a), 3);
	assert_false(json_object_object_get_ex(a, "resource.kubernetes.io/numaNode", NULL));
	a = get(m, "0.spec.devices.0.attributes");
	assert_string_equal(str(m, "0.spec.devices.0.name"), "cpudevmachine");
	assert_int_equal(json_object_object_length(a), 2);
	json_object_put(s);
	json_object_put(m);
}

static void test_slices_1000_cpu_group_capacity_is_canonical(void **st)
{
	/* 1 NUMA node of 500 cores x 2 threads = 1000 CPUs: "1k", as the server stores it. */
	struct json_object *arr = build(1, 1, 500, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "", NULL);
	struct json_object *cap = NULL;

	assert_true(json_object_object_get_ex(get(arr, "0.spec.devices.0.capacity"), "dra.cpu/cpu",
					      &cap));
	assert_string_equal(str(cap, "value"), "1k");
	json_object_put(arr);
}

/* Attribute keys hold dots: looked up whole, not as a path. */
static int64_t attr_int(struct json_object *attrs, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(attrs, key, &v))
		fail_msg("missing %s", key);
	return num(v, "int");
}

static void test_slices_rt_device_attributes_and_bandwidth(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 2, 2);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct slices_opts o = { .node = "worker-1", .generation = 1 };
	struct json_object *arr = NULL, *dev, *attrs, *cap = NULL, *v;
	struct cpuset off, rt;

	assert_int_equal(cpuset_parse("0,3", &off, NULL), 0);
	assert_int_equal(cpuset_parse("3", &rt, NULL), 0);
	assert_int_equal(devices_build(t, &off, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &rt, 900), 0);
	assert_int_equal(slices_build(d, &o, &arr), 0);
	/* after the two NUMA groups */
	dev = get(arr, "0.spec.devices.2");
	assert_string_equal(str(dev, "name"), "cpurt003");
	attrs = get(dev, "attributes");
	assert_int_equal(attr_int(attrs, "dra.cpu/cpuID"), 3);
	assert_int_equal(attr_int(attrs, "dra.cpu/coreID"), topo_cpu(t, 3)->core_id);
	assert_int_equal(attr_int(attrs, "dra.cpu/socketID"), topo_cpu(t, 3)->socket);
	assert_int_equal(attr_int(attrs, "dra.cpu/cacheL3ID"), topo_cpu(t, 3)->l3);
	assert_int_equal(attr_int(attrs, "resource.kubernetes.io/numaNode"), topo_cpu(t, 3)->numa);
	assert_true(json_object_object_get_ex(attrs, "dra.cpu/coreType", &v));
	assert_string_equal(json_object_get_string(get(v, "string")), "standard");
	assert_true(json_object_object_get_ex(attrs, "dra.cpu/realtime", &v));
	assert_true(json_object_get_boolean(get(v, "bool")));
	/* the individual set (9) plus realtime */
	assert_int_equal(json_object_object_length(attrs), 10);
	assert_true(json_object_object_get_ex(get(dev, "capacity"), "dra.cpu/rtBandwidth", &cap));
	assert_int_equal(json_object_object_length(get(dev, "capacity")), 1);
	assert_string_equal(str(cap, "value"), "900m");
	assert_string_equal(str(cap, "requestPolicy.default"), "900m");
	assert_string_equal(str(cap, "requestPolicy.validRange.min"), "1m");
	assert_string_equal(str(cap, "requestPolicy.validRange.step"), "1m");
	assert_null(get(cap, "requestPolicy.validRange.max"));
	assert_true(json_object_get_boolean(get(dev, "allowMultipleAllocations")));
	json_object_put(arr);
}

static bool attr_bool(struct json_object *attrs, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(attrs, key, &v))
		fail_msg("missing %s", key);
	return json_object_get_boolean(get(v, "bool"));
}

static void test_slices_isolated_devices_say_so_and_ordinary_ones_do_not(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 2, 2); /* 0-1,4-5 | 2-3,6-7 */
	_cleanup_(devices_freep) struct devices *d = NULL, *ind = NULL;
	struct slices_opts o = { .node = "worker-1", .generation = 1 };
	struct json_object *arr = NULL, *attrs;
	struct isol iso = { .domain_source = "sysfs" };

	assert_int_equal(cpuset_parse("1,5", &iso.domain, NULL), 0);
	assert_int_equal(cpuset_parse("1,5,3", &iso.nohz_full, NULL), 0);
	cpuset_or(&iso.isolated, &iso.domain, &iso.nohz_full);
	assert_int_equal(devices_build_isol(t, NULL, &iso, DEVICES_GROUPED, DEVICES_BY_NUMANODE, &d),
			 0);
	assert_int_equal(slices_build(d, &o, &arr), 0);
	/* ordinary groups: the reference's five attributes, nothing more */
	attrs = get(arr, "0.spec.devices.0.attributes");
	assert_string_equal(str(arr, "0.spec.devices.0.name"), "cpudevnuma000");
	assert_int_equal(json_object_object_length(attrs), 6);
	assert_false(json_object_object_get_ex(attrs, "dra.cpu/isolated", NULL));
	assert_int_equal(attr_int(attrs, "dra.cpu/numCPUs"), 2);
	/* isolated groups: the same plus four, and their own capacity */
	assert_string_equal(str(arr, "0.spec.devices.2.name"), "cpuisonuma000");
	attrs = get(arr, "0.spec.devices.2.attributes");
	assert_int_equal(json_object_object_length(attrs), 10);
	assert_true(attr_bool(attrs, "dra.cpu/isolated"));
	assert_true(attr_bool(attrs, "dra.cpu/isolatedDomain"));
	assert_true(attr_bool(attrs, "dra.cpu/nohzFull"));
	assert_false(attr_bool(attrs, "dra.cpu/isolatedManagedIRQ"));
	assert_int_equal(attr_int(attrs, "dra.cpu/numCPUs"), 2);
	assert_string_equal(str(arr, "0.spec.devices.3.name"), "cpuisonuma001");
	attrs = get(arr, "0.spec.devices.3.attributes");
	assert_false(attr_bool(attrs, "dra.cpu/isolatedDomain"));
	assert_int_equal(attr_int(attrs, "dra.cpu/numCPUs"), 1);
	json_object_put(arr);
	/* individual: per CPU */
	assert_int_equal(devices_build_isol(t, NULL, &iso, DEVICES_INDIVIDUAL, 0, &ind), 0);
	assert_int_equal(slices_build(ind, &o, &arr), 0);
	for (int k = 0; k < ind->n; k++) {
		char path[64];

		(void)snprintf(path, sizeof(path), "0.spec.devices.%d.attributes", k);
		attrs = get(arr, path);
		assert_int_equal(json_object_object_get_ex(attrs, "dra.cpu/isolated", NULL),
				 cpuset_has(&iso.isolated, ind->v[k].id));
		assert_int_equal(json_object_object_length(attrs),
				 cpuset_has(&iso.isolated, ind->v[k].id) ? 13 : 9);
	}
	json_object_put(arr);
}

static void test_slices_rt_whole_cpu_capacity_is_canonical(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(1, 1, 2, 1);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct slices_opts o = { .node = "worker-1", .generation = 1 };
	struct json_object *arr = NULL, *cap = NULL;
	struct cpuset rt;

	assert_int_equal(cpuset_parse("1", &rt, NULL), 0);
	assert_int_equal(devices_build(t, &rt, DEVICES_INDIVIDUAL, 0, &d), 0);
	assert_int_equal(devices_add_rt(d, t, &rt, 1000), 0);
	assert_int_equal(slices_build(d, &o, &arr), 0);
	assert_true(json_object_object_get_ex(get(arr, "0.spec.devices.1.capacity"),
					      "dra.cpu/rtBandwidth", &cap));
	assert_string_equal(str(cap, "value"), "1");
	json_object_put(arr);
}

static struct json_object *build_with(int sockets, int numa, int cores, int threads, int mode,
				      int group_by, const char *reserved, struct slices_opts o)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(sockets, numa, cores, threads);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct json_object *arr = NULL;
	struct cpuset res;

	assert_int_equal(cpuset_parse(reserved, &res, NULL), 0);
	assert_int_equal(devices_build(t, &res, mode, group_by, &d), 0);
	assert_int_equal(slices_build(d, &o, &arr), 0);
	return arr;
}

static void test_slices_node_allocatable_off_by_default(void **st)
{
	struct json_object *g = build(2, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "", NULL);
	struct json_object *i = build(2, 2, 4, 2, DEVICES_INDIVIDUAL, 0, "", NULL);

	assert_null(get(g, "0.spec.devices.0.nodeAllocatableResources"));
	assert_null(get(i, "0.spec.devices.0.nodeAllocatableResources"));
	json_object_put(g);
	json_object_put(i);
}

static void test_slices_node_allocatable_grouped_maps_consumed_capacity(void **st)
{
	static const int by[] = { DEVICES_BY_NUMANODE, DEVICES_BY_SOCKET, DEVICES_BY_MACHINE };

	for (size_t k = 0; k < sizeof(by) / sizeof(by[0]); k++) {
		struct slices_opts o = { .node = "worker-1", .generation = 1,
					 .node_allocatable = true };
		struct json_object *arr = build_with(2, 2, 4, 2, DEVICES_GROUPED, by[k], "0", o);
		struct json_object *devs = get(arr, "0.spec.devices");

		for (size_t i = 0; i < json_object_array_length(devs); i++) {
			struct json_object *dev = json_object_array_get_idx(devs, i);
			struct json_object *res = get(dev, "nodeAllocatableResources");
			struct json_object *map = get(dev, "nodeAllocatableResources.cpu.mapping");

			assert_non_null(map);
			assert_int_equal(json_object_object_length(res), 1);
			assert_int_equal(json_object_object_length(get(res, "cpu")), 1);
			assert_int_equal(json_object_object_length(map), 2);
			assert_string_equal(str(map, "capacityKey"), "dra.cpu/cpu");
			assert_string_equal(str(map, "capacityMultiplier"), "1");
			/* the key names a capacity the device has */
			assert_true(json_object_object_get_ex(get(dev, "capacity"), "dra.cpu/cpu",
							      NULL));
		}
		json_object_put(arr);
	}
}

static void test_slices_node_allocatable_individual_maps_one_cpu_per_device(void **st)
{
	struct slices_opts o = { .node = "worker-1", .generation = 1, .node_allocatable = true };
	struct json_object *arr = build_with(2, 1, 96, 2, DEVICES_INDIVIDUAL, 0, "", o);

	for (int s = 0; s < 3; s++)
		for (int i = 0; i < 128; i++) {
			char p[96];
			struct json_object *map;

			snprintf(p, sizeof(p), "%d.spec.devices.%d.nodeAllocatableResources.cpu.mapping",
				 s, i);
			map = get(arr, p);
			assert_non_null(map);
			assert_int_equal(json_object_object_length(map), 1);
			assert_string_equal(str(map, "deviceMultiplier"), "1");
		}
	json_object_put(arr);
}

static void test_slices_dropped_features_name_what_the_server_lost(void **st)
{
	struct json_object *sent = json_tokener_parse(
		"[{\"name\":\"a\",\"allowMultipleAllocations\":true,"
		"\"capacity\":{\"dra.cpu/cpu\":{\"value\":\"4\",\"requestPolicy\":{}}},"
		"\"nodeAllocatableResources\":{\"cpu\":{}},"
		"\"attributes\":{\"x/r\":{\"strings\":[\"pci0000:00\"]},\"x/i\":{\"int\":1}}}]");
	struct json_object *same = json_object_get(sent);
	struct json_object *no_na = json_tokener_parse(
		"[{\"name\":\"a\",\"allowMultipleAllocations\":true,"
		"\"capacity\":{\"dra.cpu/cpu\":{\"value\":\"4\",\"requestPolicy\":{}}},"
		"\"attributes\":{\"x/r\":{\"strings\":[\"pci0000:00\"]},\"x/i\":{\"int\":1}}}]");
	struct json_object *bare = json_tokener_parse(
		"[{\"name\":\"a\",\"capacity\":{\"dra.cpu/cpu\":{\"value\":\"4\"}},"
		"\"attributes\":{\"x/r\":{},\"x/i\":{\"int\":1}}}]");
	struct json_object *renamed = json_tokener_parse("[{\"name\":\"b\"}]");

	assert_non_null(sent);
	assert_int_equal(slices_dropped_features(sent, same), 0);
	assert_int_equal(slices_dropped_features(sent, no_na), SLICES_FEAT_NODE_ALLOCATABLE);
	assert_int_equal(slices_dropped_features(sent, bare),
			 SLICES_FEAT_CONSUMABLE | SLICES_FEAT_NODE_ALLOCATABLE |
				 SLICES_FEAT_LIST_ATTRIBUTES);
	assert_int_equal(slices_dropped_features(sent, renamed), SLICES_FEAT_OTHER);
	assert_int_equal(slices_dropped_features(sent, NULL), SLICES_FEAT_OTHER);
	assert_int_equal(slices_dropped_features(NULL, sent), 0);
	assert_string_equal(slices_feature_gate(SLICES_FEAT_NODE_ALLOCATABLE),
			    "DRANodeAllocatableResources");
	assert_non_null(strstr(slices_feature_loss(SLICES_FEAT_NODE_ALLOCATABLE), "1.37"));
	json_object_put(sent);
	json_object_put(same);
	json_object_put(no_na);
	json_object_put(bare);
	json_object_put(renamed);
}

/* The roots of a device as one comma-joined string, "" when it has none. */
static void roots_of(struct json_object *dev, char *buf, size_t size)
{
	struct json_object *a = NULL, *l;

	buf[0] = 0;
	if (!json_object_object_get_ex(get(dev, "attributes"), SLICES_PCIE_ROOT_ATTR, &a))
		return;
	assert_int_equal(json_object_object_length(a), 1);
	l = get(a, "strings");
	assert_non_null(l);
	assert_true(json_object_array_length(l) > 0);
	for (size_t i = 0; i < json_object_array_length(l); i++)
		(void)snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? "," : "",
			       json_object_get_string(json_object_array_get_idx(l, i)));
}

static struct pcie two_socket_roots(void)
{
	struct pcie p = { 0 };

	/* 2 sockets x 1 node x 4 cores x 2 threads: socket 0 = 0-3,8-11 */
	assert_int_equal(pcie_add_root(&p, "pci0000:80", "4-7,12-15", 9), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:00", "0-3,8-11", 8), 1);
	assert_int_equal(pcie_add_root(&p, "pci0000:10", "0-3,8-11", 8), 1);
	assert_int_equal(pcie_add_root(&p, "pci0001:00", "2", 1), 1);
	return p;
}

static void test_slices_pcie_roots_per_cpu_and_per_group(void **st)
{
	struct pcie p = two_socket_roots();
	struct slices_opts o = { .node = "worker-1", .generation = 1, .pcie = &p };
	struct json_object *ind = build_with(2, 1, 4, 2, DEVICES_INDIVIDUAL, 0, "", o);
	struct json_object *numa = build_with(2, 1, 4, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "", o);
	struct json_object *mach = build_with(2, 1, 4, 2, DEVICES_GROUPED, DEVICES_BY_MACHINE, "", o);
	struct json_object *devs = get(ind, "0.spec.devices");
	char got[256];

	/* individual: cpudev000 = CPU 0, cpudev001 = CPU 8 (its sibling), ... */
	for (size_t i = 0; i < json_object_array_length(devs); i++) {
		struct json_object *dev = json_object_array_get_idx(devs, i), *v = NULL;
		int cpu;

		assert_true(json_object_object_get_ex(get(dev, "attributes"), "dra.cpu/cpuID", &v));
		cpu = (int)num(v, "int");
		roots_of(dev, got, sizeof(got));
		if (cpu == 2)
			assert_string_equal(got, "pci0000:00,pci0000:10,pci0001:00");
		else if (cpu % 8 < 4)
			assert_string_equal(got, "pci0000:00,pci0000:10");
		else
			assert_string_equal(got, "pci0000:80");
	}
	roots_of(get(numa, "0.spec.devices.0"), got, sizeof(got));
	assert_string_equal(got, "pci0000:00,pci0000:10,pci0001:00");
	roots_of(get(numa, "0.spec.devices.1"), got, sizeof(got));
	assert_string_equal(got, "pci0000:80");
	roots_of(get(mach, "0.spec.devices.0"), got, sizeof(got));
	assert_string_equal(got, "pci0000:00,pci0000:10,pci0000:80,pci0001:00");
	json_object_put(ind);
	json_object_put(numa);
	json_object_put(mach);
	free(p.v);
}

static void test_slices_pcie_roots_omitted_where_none_is_local(void **st)
{
	struct pcie p = { 0 };
	struct slices_opts o = { .node = "worker-1", .generation = 1, .pcie = &p };
	struct json_object *arr;
	char got[64];

	assert_int_equal(pcie_add_root(&p, "pci0000:00", "0-3,8-11", 8), 1);
	arr = build_with(2, 1, 4, 2, DEVICES_GROUPED, DEVICES_BY_SOCKET, "", o);
	roots_of(get(arr, "0.spec.devices.0"), got, sizeof(got));
	assert_string_equal(got, "pci0000:00");
	roots_of(get(arr, "0.spec.devices.1"), got, sizeof(got));
	assert_string_equal(got, "");
	json_object_put(arr);
	free(p.v);
}

static void test_slices_with_pcie_roots_hold_64_devices(void **st)
{
	struct pcie p = { 0 }, none = { 0 };
	struct slices_opts o = { .node = "worker-1", .generation = 1, .pcie = &p };
	struct json_object *arr;

	assert_int_equal(pcie_add_root(&p, "pci0000:00", "0", 1), 1);
	arr = build_with(2, 1, 96, 2, DEVICES_INDIVIDUAL, 0, "", o);
	assert_int_equal(json_object_array_length(arr), 6);
	for (int i = 0; i < 6; i++) {
		struct json_object *s = json_object_array_get_idx(arr, (size_t)i);

		assert_int_equal(json_object_array_length(get(s, "spec.devices")), 64);
		assert_int_equal(num(s, "spec.pool.resourceSliceCount"), 6);
	}
	json_object_put(arr);
	/* the option on but no root found: no list, the usual 128 */
	o.pcie = &none;
	arr = build_with(2, 1, 96, 2, DEVICES_INDIVIDUAL, 0, "", o);
	assert_int_equal(json_object_array_length(arr), 3);
	json_object_put(arr);
	free(p.v);
}

static void test_slices_pcie_list_never_passes_the_attribute_value_limit(void **st)
{
	struct slices_opts o = { .node = "worker-1", .generation = 1 };
	struct pcie p = { 0 };
	struct json_object *arr;
	char name[16], got[1024];

	/* an individual device has 9 other attributes: 39 roots fit in 48 values */
	for (int i = 0; i < 39; i++) {
		(void)snprintf(name, sizeof(name), "pci%04x:00", i);
		assert_int_equal(pcie_add_root(&p, name, "0-15", 4), 1);
	}
	o.pcie = &p;
	arr = build_with(2, 1, 4, 2, DEVICES_INDIVIDUAL, 0, "", o);
	roots_of(get(arr, "0.spec.devices.0"), got, sizeof(got));
	assert_int_equal(strlen(got), 39 * 11 - 1);
	json_object_put(arr);
	assert_int_equal(pcie_add_root(&p, "pci0100:00", "0-15", 4), 1);
	arr = build_with(2, 1, 4, 2, DEVICES_INDIVIDUAL, 0, "", o);
	roots_of(get(arr, "0.spec.devices.0"), got, sizeof(got));
	assert_string_equal(got, "");
	json_object_put(arr);
	free(p.v);
}

static void test_slices_online_mask_drops_devices_and_shrinks_groups(void **st)
{
	struct cpuset online;
	struct slices_opts o = { .node = "worker-1", .generation = 1, .online = &online };
	struct json_object *arr, *cap = NULL;

	/* 2 nodes x 4 cores x 2 threads: node 0 = 0-3,8-11 */
	assert_int_equal(cpuset_parse("0-2,4-15", &online, NULL), 0);
	arr = build_with(1, 2, 4, 2, DEVICES_INDIVIDUAL, 0, "", o);
	assert_int_equal(json_object_array_length(get(arr, "0.spec.devices")), 15);
	for (int i = 0; i < 15; i++) {
		char p[64];
		struct json_object *v = NULL;

		snprintf(p, sizeof(p), "0.spec.devices.%d.attributes", i);
		assert_true(json_object_object_get_ex(get(arr, p), "dra.cpu/cpuID", &v));
		assert_int_not_equal(num(v, "int"), 3);
	}
	/* the names of the others do not move: CPU 3 was cpudev006, so cpudev007 (CPU 11)
	 * now sits in its place */
	assert_string_equal(str(arr, "0.spec.devices.6.name"), "cpudev007");
	json_object_put(arr);
	arr = build_with(1, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "", o);
	assert_true(json_object_object_get_ex(get(arr, "0.spec.devices.0.capacity"), "dra.cpu/cpu",
					      &cap));
	assert_string_equal(str(cap, "value"), "7");
	json_object_put(arr);
	/* a whole node offline: its device leaves, one slice of one device */
	assert_int_equal(cpuset_parse("4-7,12-15", &online, NULL), 0);
	arr = build_with(1, 2, 4, 2, DEVICES_GROUPED, DEVICES_BY_NUMANODE, "", o);
	assert_int_equal(json_object_array_length(get(arr, "0.spec.devices")), 1);
	assert_string_equal(str(arr, "0.spec.devices.0.name"), "cpudevnuma001");
	json_object_put(arr);
}

static void test_slices_online_mask_moves_devices_across_slices(void **st)
{
	_cleanup_(topo_freep) struct topo *t = testutil_topo(2, 1, 96, 2);
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset online;
	struct slices_opts o = { .node = "worker-1", .generation = 1, .online = &online };
	struct json_object *s1 = NULL;

	assert_int_equal(devices_build(t, NULL, DEVICES_INDIVIDUAL, 0, &d), 0);
	/* 384 CPUs, 3 slices; 0-9 offline: 374 devices, still 3 slices, the
	 * second starting 128 published devices in */
	assert_int_equal(cpuset_parse("10-383", &online, NULL), 0);
	assert_int_equal(slices_published(d, &o), 374);
	assert_int_equal(slices_count(d, &o), 3);
	assert_int_equal(slices_build_devices(d, &o, 1, &s1), 0);
	assert_int_equal(json_object_array_length(s1), 128);
	json_object_put(s1);
	assert_int_equal(slices_build_devices(d, &o, 2, &s1), 0);
	assert_int_equal(json_object_array_length(s1), 374 - 256);
	json_object_put(s1);
	/* 200 left: 2 slices */
	assert_int_equal(cpuset_parse("0-99,192-291", &online, NULL), 0);
	assert_int_equal(slices_count(d, &o), 2);
	assert_int_equal(slices_build_devices(d, &o, 2, &s1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slices_individual_384_cpus_make_three_full_slices),
		cmocka_unit_test(test_slices_individual_attributes),
		cmocka_unit_test(test_slices_grouped_capacity_and_request_policy),
		cmocka_unit_test(test_slices_one_cpu_group_has_no_step),
		cmocka_unit_test(test_slices_socket_and_machine_attribute_sets),
		cmocka_unit_test(test_slices_1000_cpu_group_capacity_is_canonical),
		cmocka_unit_test(test_slices_rt_device_attributes_and_bandwidth),
		cmocka_unit_test(test_slices_rt_whole_cpu_capacity_is_canonical),
		cmocka_unit_test(test_slices_isolated_devices_say_so_and_ordinary_ones_do_not),
		cmocka_unit_test(test_slices_node_allocatable_off_by_default),
		cmocka_unit_test(test_slices_node_allocatable_grouped_maps_consumed_capacity),
		cmocka_unit_test(test_slices_node_allocatable_individual_maps_one_cpu_per_device),
		cmocka_unit_test(test_slices_dropped_features_name_what_the_server_lost),
		cmocka_unit_test(test_slices_pcie_roots_per_cpu_and_per_group),
		cmocka_unit_test(test_slices_pcie_roots_omitted_where_none_is_local),
		cmocka_unit_test(test_slices_with_pcie_roots_hold_64_devices),
		cmocka_unit_test(test_slices_pcie_list_never_passes_the_attribute_value_limit),
		cmocka_unit_test(test_slices_online_mask_drops_devices_and_shrinks_groups),
		cmocka_unit_test(test_slices_online_mask_moves_devices_across_slices),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
