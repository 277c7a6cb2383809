/* ResourceSlice JSON. Attribute sets per mode follow the reference driver
 * exactly (names, types, which mode carries which); the grouped capacity adds
 * a requestPolicy so the scheduler itself refuses fractional CPUs. */
#include "kube/slices.h"

#include <errno.h>
#include <stdio.h>

#include <json-c/json.h>

#include "lib/jsonc.h"
#include "lib/cleanup.h"
#include "core/devices.h"
#include "core/rt.h"
#include "lib/quantity.h"

static int max_per_slice(const struct slices_opts *o)
{
	return o->max_devices > 0 ? o->max_devices : SLICES_MAX_DEVICES;
}

int slices_count(const struct devices *d, const struct slices_opts *o)
{
	int m = max_per_slice(o);

	return d->n == 0 ? 1 : (d->n + m - 1) / m;
}

/* json-c adds never fail on valid objects short of ENOMEM; collect that. */
static int add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val) < 0) {
		(void)json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

/* A new empty object (or array) added under key; borrowed from parent. NULL on ENOMEM. */
static struct json_object *child(struct json_object *parent, const char *key, bool array)
{
	struct json_object *o = array ? json_object_new_array() : json_object_new_object();

	return add(parent, key, o) < 0 ? NULL : o;
}

static int add_attr_int(struct json_object *attrs, const char *key, int64_t v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = add(a, "int", json_object_new_int64(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return add(attrs, key, a);
}

static int add_attr_bool(struct json_object *attrs, const char *key, bool v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = add(a, "bool", json_object_new_boolean(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return add(attrs, key, a);
}

static int add_attr_string(struct json_object *attrs, const char *key, const char *v)
{
	struct json_object *a = json_object_new_object();
	int r;

	if (!a)
		return -ENOMEM;
	r = add(a, "string", json_object_new_string(v));
	if (r < 0) {
		(void)json_object_put(a);
		return r;
	}
	return add(attrs, key, a);
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
	r = add(cpu, "value", json_object_new_string(value));
	/* Whole CPUs only, at least one. The server requires min + step <= value,
	 * so a one-CPU group carries no step (nothing fractional fits anyway). */
	r = r ?: add(policy, "default", json_object_new_string("1"));
	r = r ?: add(range, "min", json_object_new_string("1"));
	if (!r && n_cpus >= 2)
		r = add(range, "step", json_object_new_string("1"));
	return r ?: add(dev, "allowMultipleAllocations", json_object_new_boolean(true));
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
	r = add(bw, "value", json_object_new_string(value));
	r = r ?: add(policy, "default", json_object_new_string(value));
	r = r ?: add(range, "min", json_object_new_string("1m"));
	if (!r && milli >= 2)
		r = add(range, "step", json_object_new_string("1m"));
	return r ?: add(dev, "allowMultipleAllocations", json_object_new_boolean(true));
}

static int device_json(const struct devices *d, const struct device *dev, struct json_object **ret)
{
	_cleanup_json_ struct json_object *o = json_object_new_object();
	struct json_object *attrs;
	int r;

	if (!o)
		return -ENOMEM;
	r = add(o, "name", json_object_new_string(dev->name));
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
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", dev->n_cpus);
		r = r ?: capacity(o, dev->n_cpus);
		break;
	case DEVICE_SOCKET:
		r = add_attr_int(attrs, "dra.cpu/socketID", dev->socket);
		r = r ?: add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", dev->n_cpus);
		r = r ?: capacity(o, dev->n_cpus);
		break;
	case DEVICE_MACHINE:
		r = add_attr_bool(attrs, "dra.cpu/smtEnabled", d->smt);
		r = r ?: add_attr_int(attrs, "dra.cpu/numCPUs", dev->n_cpus);
		r = r ?: capacity(o, dev->n_cpus);
		break;
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(o);
	return 0;
}

int slices_build_devices(const struct devices *d, const struct slices_opts *o, int i,
			 struct json_object **ret)
{
	_cleanup_json_ struct json_object *arr = json_object_new_array();
	int m = max_per_slice(o);

	if (!arr)
		return -ENOMEM;
	if (i < 0 || i >= slices_count(d, o))
		return -EINVAL;
	for (int k = i * m; k < d->n && k < (i + 1) * m; k++) {
		struct json_object *dev;
		int r = device_json(d, &d->v[k], &dev);

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
	r = add(s, "apiVersion", json_object_new_string("resource.k8s.io/v1"));
	r = r ?: add(s, "kind", json_object_new_string("ResourceSlice"));
	if (r < 0 || !(meta = child(s, "metadata", false)) || !(spec = child(s, "spec", false)))
		return -ENOMEM;
	r = add(spec, "driver", json_object_new_string(SLICES_DRIVER));
	r = r ?: add(spec, "nodeName", json_object_new_string(o->node));
	if (r < 0 || !(pool = child(spec, "pool", false)))
		return -ENOMEM;
	(void)snprintf(gen_name, sizeof(gen_name), "%05x-%s-%s-", i, SLICES_DRIVER, o->node);
	r = add(meta, "generateName", json_object_new_string(gen_name));
	if (!r && o->node_uid) {
		struct json_object *refs = child(meta, "ownerReferences", true);
		struct json_object *ref = json_object_new_object();

		if (!refs || !ref || json_object_array_add(refs, ref) < 0) {
			(void)json_object_put(ref);
			return -ENOMEM;
		}
		r = add(ref, "apiVersion", json_object_new_string("v1"));
		r = r ?: add(ref, "kind", json_object_new_string("Node"));
		r = r ?: add(ref, "name", json_object_new_string(o->node));
		r = r ?: add(ref, "uid", json_object_new_string(o->node_uid));
		r = r ?: add(ref, "controller", json_object_new_boolean(true));
	}
	r = r ?: add(pool, "name", json_object_new_string(o->node));
	r = r ?: add(pool, "generation", json_object_new_int64(o->generation));
	r = r ?: add(pool, "resourceSliceCount", json_object_new_int64(count));
	r = r ?: slices_build_devices(d, o, i, &devs);
	r = r ?: add(spec, "devices", devs);
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
