/* slices: ResourceSlice JSON per mode, chunking, identity fields. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "cmd/cfg.h"
#include "core/devices.h"
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
