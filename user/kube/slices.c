/* ResourceSlice JSON. Attribute sets per mode follow the reference driver
 * exactly (names, types, which mode carries which); the grouped capacity adds
 * a requestPolicy so the scheduler itself refuses fractional CPUs. */
#include "kube/slices.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/jsonc.h"
#include "lib/cleanup.h"
#include "core/devices.h"
#include "core/rtbudget.h"
#include "host/pcie.h"
#include "lib/quantity.h"

static int max_per_slice(const struct slices_opts *o)
{
	int m = o->max_devices > 0 ? o->max_devices : SLICES_MAX_DEVICES;

	/* The server's lower limit for slices with list attributes. Every
	 * slice gets it, not only those whose devices carry a list: the count
	 * must not depend on which devices happen to sit next to a root. */
	if (o->pcie && o->pcie->n > 0 && m > SLICES_MAX_DEVICES_LISTS)
		m = SLICES_MAX_DEVICES_LISTS;
	return m;
}

/* The CPUs of a device that are online (all of them without a mask). */
static int live_cpus(const struct device *dev, const struct slices_opts *o, struct cpuset *ret)
{
	device_cpus(dev, ret);
	if (o->online)
		cpuset_and(ret, ret, o->online);
	return cpuset_count(ret);
}

static bool is_published(const struct device *dev, const struct slices_opts *o)
{
	struct cpuset cpus;

	return !o->online || live_cpus(dev, o, &cpus) > 0;
}

int slices_published(const struct devices *d, const struct slices_opts *o)
{
	int n = 0;

	for (int i = 0; i < d->n; i++)
		n += is_published(&d->v[i], o);
	return n;
}

int slices_count(const struct devices *d, const struct slices_opts *o)
{
	int m = max_per_slice(o), n = slices_published(d, o);

	return n == 0 ? 1 : (n + m - 1) / m;
}

/* A new empty object (or array) added under key; borrowed from parent. NULL on ENOMEM. */
static struct json_object *child(struct json_object *parent, const char *key, bool array)
{
	struct json_object *o = array ? json_object_new_array() : json_object_new_object();

	return jsonc_add(parent, key, o) < 0 ? NULL : o;
}

static int add_attr_int(struct json_object *attrs, const char *key, int64_t v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = jsonc_add(a, "int", json_object_new_int64(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return jsonc_add(attrs, key, a);
}

static int add_attr_bool(struct json_object *attrs, const char *key, bool v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = jsonc_add(a, "bool", json_object_new_boolean(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return jsonc_add(attrs, key, a);
}

static int add_attr_string(struct json_object *attrs, const char *key, const char *v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = jsonc_add(a, "string", json_object_new_string(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return jsonc_add(attrs, key, a);
}

/* resource.kubernetes.io/pcieRoot: {"strings": [roots local to the device's CPUs]}. */
static int pcie_attr(struct json_object *attrs, const struct pcie *p, const struct device *dev,
		     const struct slices_opts *so)
{
	_cleanup_free_ int *idx = NULL;
	struct json_object *a, *list;
	struct cpuset cpus;
	int n;

	if (!p || p->n == 0)
		return 0;
	idx = malloc(sizeof(*idx) * (size_t)p->n);
	if (!idx)
		return -ENOMEM;
	(void)live_cpus(dev, so, &cpus);
	n = pcie_roots_of(p, &cpus, idx);
	if (n == 0 || json_object_object_length(attrs) + n > SLICES_MAX_ATTRIBUTE_VALUES)
		return 0;
	a = json_object_new_object();
	if (!a || jsonc_add(attrs, SLICES_PCIE_ROOT_ATTR, a) < 0 ||
	    !(list = child(a, "strings", true)))
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct json_object *v = json_object_new_string(p->v[idx[i]].name);

		if (!v || json_object_array_add(list, v) < 0) {
			(void)json_object_put(v);
			return -ENOMEM;
		}
	}
	return 0;
}

static int numa_attrs(struct json_object *attrs, int numa)
{
	int r = 0;

	if (numa < 0)
		return 0; /* no NUMA information: say nothing rather than -1 */
	r = r ?: add_attr_int(attrs, "resource.kubernetes.io/numaNode", numa);
	r = r ?: add_attr_int(attrs, "dra.cpu/numaNodeID", numa);
	r = r ?: add_attr_int(attrs, "dra.net/numaNode", numa);
	return r;
}

/* An isolated device says so, with what the kernel does on all of its CPUs
 * (docs/isolated-cpus.md). Ordinary devices carry none of these: their
 * attribute sets stay the reference driver's, and a DeviceClass tells the
 * two apart with `"isolated" in device.attributes["dra.cpu"]`. */
static int isol_attrs(struct json_object *attrs, const struct device *dev)
{
	int r;

	if (!dev->isolated)
		return 0;
	r = add_attr_bool(attrs, "dra.cpu/isolated", true);
	r = r ?: add_attr_bool(attrs, "dra.cpu/isolatedDomain",
			       dev->isol_flags & DEVICE_ISOL_DOMAIN);
	r = r ?: add_attr_bool(attrs, "dra.cpu/nohzFull", dev->isol_flags & DEVICE_ISOL_NOHZ_FULL);
	return r ?: add_attr_bool(attrs, "dra.cpu/isolatedManagedIRQ",
				  dev->isol_flags & DEVICE_ISOL_MANAGED_IRQ);
}

static int capacity(struct json_object *dev, int n_cpus)
{
	struct json_object *cap, *cpu, *policy, *range;
	char value[32];
	int r;

	if (!(cap = child(dev, "capacity", false)) || !(cpu = child(cap, SLICES_CAPACITY_KEY, false)) ||
	    !(policy = child(cpu, "requestPolicy", false)) ||
	    !(range = child(policy, "validRange", false)))
		return -ENOMEM;
	quantity_format_int(n_cpus, value, sizeof(value));
	r = jsonc_add(cpu, "value", json_object_new_string(value));
	/* Whole CPUs only, at least one. The server requires min + step <= value,
	 * so a one-CPU group carries no step (nothing fractional fits anyway). */
	r = r ?: jsonc_add(policy, "default", json_object_new_string("1"));
	r = r ?: jsonc_add(range, "min", json_object_new_string("1"));
	if (!r && n_cpus >= 2)
		r = jsonc_add(range, "step", json_object_new_string("1"));
	return r ?: jsonc_add(dev, "allowMultipleAllocations", json_object_new_boolean(true));
}

/* nodeAllocatableResources: {"cpu": {"mapping": {...}}}. A grouped claim
 * takes consumedCapacity[dra.cpu/cpu] CPUs, an individual one one CPU per
 * device: either way the node's allocatable cpu goes down by the CPUs the
 * claim holds, so pods cannot be promised them twice. */
static int node_allocatable(struct json_object *dev, bool grouped)
{
	struct json_object *res, *cpu, *map;
	int r;

	if (!(res = child(dev, "nodeAllocatableResources", false)) ||
	    !(cpu = child(res, "cpu", false)) || !(map = child(cpu, "mapping", false)))
		return -ENOMEM;
	if (!grouped)
		return jsonc_add(map, "deviceMultiplier", json_object_new_string("1"));
	r = jsonc_add(map, "capacityKey", json_object_new_string(SLICES_CAPACITY_KEY));
	return r ?: jsonc_add(map, "capacityMultiplier", json_object_new_string("1"));
}

/* dra.cpu/rtBandwidth: the CPU's deadline bandwidth, shared by claims
 * (allowMultipleAllocations) in steps of 1m. A request that names no amount
 * gets the whole CPU: the safe default, and what FIFO/RR need. */
static int rt_capacity(struct json_object *dev, int64_t milli)
{
	struct json_object *cap, *bw, *policy, *range;
	char value[32];
	int r;

	if (!(cap = child(dev, "capacity", false)) || !(bw = child(cap, RT_CAPACITY_KEY, false)) ||
	    !(policy = child(bw, "requestPolicy", false)) ||
	    !(range = child(policy, "validRange", false)))
		return -ENOMEM;
	rt_milli_format(milli, value, sizeof(value));
	r = jsonc_add(bw, "value", json_object_new_string(value));
	r = r ?: jsonc_add(policy, "default", json_object_new_string(value));
	r = r ?: jsonc_add(range, "min", json_object_new_string("1m"));
	if (!r && milli >= 2)
		r = jsonc_add(range, "step", json_object_new_string("1m"));
	return r ?: jsonc_add(dev, "allowMultipleAllocations", json_object_new_boolean(true));
}

/* What an external allocator needs of a group (slices_opts.smt_layout). */
static int external_attrs(struct json_object *attrs, const struct cpuset *live,
			  const char *smt_layout)
{
	char ids[SLICES_MAX_STRING + 1];
	int r = 0;

	if (cpuset_format(live, ids, sizeof(ids)) >= 0)
		r = add_attr_string(attrs, SLICES_CPU_IDS_ATTR, ids);
	if (!r && strlen(smt_layout) <= SLICES_MAX_STRING)
		r = add_attr_string(attrs, SLICES_SMT_LAYOUT_ATTR, smt_layout);
	return r;
}

static int device_json(const struct devices *d, const struct device *dev,
		       const struct slices_opts *so, struct json_object **ret)
{
	_cleanup_json_ struct json_object *o = json_object_new_object();
	struct json_object *attrs;
	struct cpuset live;
	int r, n_cpus = live_cpus(dev, so, &live);

	if (!o)
		return -ENOMEM;
	r = jsonc_add(o, "name", json_object_new_string(dev->name));
	if (r < 0)
		return r;
	if (!(attrs = child(o, "attributes", false)))
		return -ENOMEM;
	switch (dev->kind) {
	case DEVICE_RT:
	case DEVICE_CPU:
		r = numa_attrs(attrs, dev->numa);
		r = r ?: add_attr_int(attrs, "dra.cpu/socketID", dev->socket < 0 ? 0 : dev->socket);
		r = r ?: add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/cpuID", dev->id);
		r = r ?: add_attr_int(attrs, "dra.cpu/coreID", dev->core_id);
		r = r ?: add_attr_string(attrs, "dra.cpu/coreType", topo_core_type_name(dev->type));
		r = r ?: add_attr_int(attrs, "dra.cpu/cacheL3ID", dev->l3);
		if (dev->kind == DEVICE_RT) {
			r = r ?: add_attr_bool(attrs, "dra.cpu/realtime", true);
			r = r ?: rt_capacity(o, dev->rt_capacity_milli);
		}
		break;
	case DEVICE_NUMA:
		r = numa_attrs(attrs, dev->numa);
		r = r ?: add_attr_int(attrs, "dra.cpu/socketID", dev->socket);
		r = r ?: add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", n_cpus);
		r = r ?: capacity(o, n_cpus);
		break;
	case DEVICE_SOCKET:
		r = add_attr_int(attrs, "dra.cpu/socketID", dev->socket);
		r = r ?: add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", n_cpus);
		r = r ?: capacity(o, n_cpus);
		break;
	case DEVICE_MACHINE:
		r = add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", n_cpus);
		r = r ?: capacity(o, n_cpus);
		break;
	}
	if (!r && so->smt_layout && dev->kind != DEVICE_CPU && dev->kind != DEVICE_RT)
		r = external_attrs(attrs, &live, so->smt_layout);
	if (!r)
		r = isol_attrs(attrs, dev);
	if (!r)
		r = pcie_attr(attrs, so->pcie, dev, so);
	/* Only the kinds whose capacity is dra.cpu/cpu (or one CPU each). */
	if (!r && so->node_allocatable &&
	    (dev->kind == DEVICE_CPU || dev->kind == DEVICE_NUMA || dev->kind == DEVICE_SOCKET ||
	     dev->kind == DEVICE_MACHINE))
		r = node_allocatable(o, dev->kind != DEVICE_CPU);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

int slices_build_devices(const struct devices *d, const struct slices_opts *o, int i,
			 struct json_object **ret)
{
	_cleanup_json_ struct json_object *arr = json_object_new_array();
	int m = max_per_slice(o), pos = 0;

	if (!arr)
		return -ENOMEM;
	if (i < 0 || i >= slices_count(d, o))
		return -EINVAL;
	/* Slice i holds published devices i*m .. (i+1)*m-1, in device order. */
	for (int k = 0; k < d->n && pos < (i + 1) * m; k++) {
		struct json_object *dev;
		int r;

		if (!is_published(&d->v[k], o) || pos++ < i * m)
			continue;
		r = device_json(d, &d->v[k], o, &dev);
		if (r < 0)
			return r;
		if (json_object_array_add(arr, dev) < 0) {
			(void)json_object_put(dev);
			return -ENOMEM;
		}
	}
	*ret = TAKE_PTR(arr);
	return 0;
}

int slices_build_one(const struct devices *d, const struct slices_opts *o, int i,
		     struct json_object **ret)
{
	int count = slices_count(d, o);
	_cleanup_json_ struct json_object *s = NULL;
	struct json_object *meta, *spec, *pool, *devs = NULL;
	char gen_name[320];
	int r;

	if (i < 0 || i >= count)
		return -EINVAL;
	s = json_object_new_object();
	if (!s)
		return -ENOMEM;
	r = jsonc_add(s, "apiVersion", json_object_new_string("resource.k8s.io/v1"));
	r = r ?: jsonc_add(s, "kind", json_object_new_string("ResourceSlice"));
	if (r < 0 || !(meta = child(s, "metadata", false)) || !(spec = child(s, "spec", false)))
		return -ENOMEM;
	r = jsonc_add(spec, "driver", json_object_new_string(SLICES_DRIVER));
	r = r ?: jsonc_add(spec, "nodeName", json_object_new_string(o->node));
	if (r < 0 || !(pool = child(spec, "pool", false)))
		return -ENOMEM;
	(void)snprintf(gen_name, sizeof(gen_name), "%05x-%s-%s-", i, SLICES_DRIVER, o->node);
	r = jsonc_add(meta, "generateName", json_object_new_string(gen_name));
	if (!r && o->node_uid) {
		struct json_object *refs = child(meta, "ownerReferences", true);
		struct json_object *ref = json_object_new_object();

		if (!refs || !ref || json_object_array_add(refs, ref) < 0) {
			(void)json_object_put(ref);
			return -ENOMEM;
		}
		r = jsonc_add(ref, "apiVersion", json_object_new_string("v1"));
		r = r ?: jsonc_add(ref, "kind", json_object_new_string("Node"));
		r = r ?: jsonc_add(ref, "name", json_object_new_string(o->node));
		r = r ?: jsonc_add(ref, "uid", json_object_new_string(o->node_uid));
		r = r ?: jsonc_add(ref, "controller", json_object_new_boolean(true));
	}
	r = r ?: jsonc_add(pool, "name", json_object_new_string(o->node));
	r = r ?: jsonc_add(pool, "generation", json_object_new_int64(o->generation));
	r = r ?: jsonc_add(pool, "resourceSliceCount", json_object_new_int64(count));
	r = r ?: slices_build_devices(d, o, i, &devs);
	r = r ?: jsonc_add(spec, "devices", devs);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

int slices_build(const struct devices *d, const struct slices_opts *o, struct json_object **ret)
{
	_cleanup_json_ struct json_object *arr = json_object_new_array();
	int count = slices_count(d, o);

	if (!arr)
		return -ENOMEM;
	for (int i = 0; i < count; i++) {
		struct json_object *s;
		int r = slices_build_one(d, o, i, &s);

		if (r < 0)
			return r;
		if (json_object_array_add(arr, s) < 0) {
			(void)json_object_put(s);
			return -ENOMEM;
		}
	}
	*ret = TAKE_PTR(arr);
	return 0;
}

static struct json_object *member(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;

	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

static struct json_object *device_named(struct json_object *arr, const char *name)
{
	size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *d = json_object_array_get_idx(arr, i);
		const char *dn = json_object_get_string(member(d, "name"));

		if (dn && !strcmp(dn, name))
			return d;
	}
	return NULL;
}

static bool is_list_attribute(struct json_object *a)
{
	static const char *const kinds[] = { "ints", "bools", "strings", "versions" };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (member(a, kinds[i]))
			return true;
	return false;
}

/* What of device s is missing from g. */
static unsigned device_dropped(struct json_object *s, struct json_object *g)
{
	unsigned m = 0;

	if (member(s, "allowMultipleAllocations") && !member(g, "allowMultipleAllocations"))
		m |= SLICES_FEAT_CONSUMABLE;
	if (member(s, "nodeAllocatableResources") && !member(g, "nodeAllocatableResources"))
		m |= SLICES_FEAT_NODE_ALLOCATABLE;
	if (json_object_is_type(member(s, "capacity"), json_type_object)) {
		json_object_object_foreach(member(s, "capacity"), ck, cv)
		{
			struct json_object *gc = member(member(g, "capacity"), ck);

			if (member(cv, "requestPolicy") && !member(gc, "requestPolicy"))
				m |= SLICES_FEAT_CONSUMABLE;
		}
	}
	if (json_object_is_type(member(s, "attributes"), json_type_object)) {
		json_object_object_foreach(member(s, "attributes"), ak, av)
		{
			struct json_object *ga = member(member(g, "attributes"), ak);

			if (is_list_attribute(av) && !is_list_attribute(ga))
				m |= SLICES_FEAT_LIST_ATTRIBUTES;
		}
	}
	return m;
}

unsigned slices_dropped_features(struct json_object *sent, struct json_object *got)
{
	size_t n = json_object_is_type(sent, json_type_array) ? json_object_array_length(sent) : 0;
	unsigned m = 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(sent, i);
		const char *name = json_object_get_string(member(s, "name"));
		struct json_object *g = name ? device_named(got, name) : NULL;

		if (!g) {
			m |= SLICES_FEAT_OTHER;
			continue;
		}
		m |= device_dropped(s, g);
	}
	return m;
}

const char *slices_feature_gate(enum slices_feature f)
{
	switch (f) {
	case SLICES_FEAT_CONSUMABLE:
		return "DRAConsumableCapacity";
	case SLICES_FEAT_NODE_ALLOCATABLE:
		return "DRANodeAllocatableResources";
	case SLICES_FEAT_LIST_ATTRIBUTES:
		return "DRAListTypeAttributes";
	default:
		return "unknown";
	}
}

const char *slices_feature_loss(enum slices_feature f)
{
	switch (f) {
	case SLICES_FEAT_CONSUMABLE:
		return "grouped devices cannot be shared by several claims; is the "
		       "DRAConsumableCapacity feature gate on?";
	case SLICES_FEAT_NODE_ALLOCATABLE:
		return "claims do not count against the node's allocatable cpu; the field needs "
		       "Kubernetes 1.37 with the DRANodeAllocatableResources feature gate";
	case SLICES_FEAT_LIST_ATTRIBUTES:
		return "claims cannot match resource.kubernetes.io/pcieRoot; list attributes need "
		       "the DRAListTypeAttributes feature gate (1.36+)";
	default:
		return "the API server changed device fields it does not know";
	}
}

int slices_device_attributes(const struct devices *d, const struct slices_opts *o,
			     const char *name, struct json_object **ret)
{
	const struct device *dev = devices_find(d, name);
	_cleanup_json_ struct json_object *j = NULL;
	struct json_object *attrs;
	int r;

	if (!dev)
		return -ENOENT;
	r = device_json(d, dev, o, &j);
	if (r < 0)
		return r;
	if (!json_object_object_get_ex(j, "attributes", &attrs))
		return -ENOENT;
	*ret = json_object_get(attrs);
	return 0;
}
