/* ResourceSlice objects for this node's devices (resource.k8s.io/v1).
 *
 * One pool named after the node; devices in enumeration order, split into
 * slices of at most SLICES_MAX_DEVICES; every slice carries the pool
 * generation and resourceSliceCount, spec.nodeName, and (when the node uid is
 * known) a controller ownerReference to the Node so the slices go away with
 * it. Names come from generateName "<5 hex index>-dra.cpu-<node>-".
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct devices;
struct json_object;
struct pcie;

#define SLICES_DRIVER "dra.cpu"
#define SLICES_MAX_DEVICES 128
/* A slice with list-type attributes holds at most this many devices (1.36). */
#define SLICES_MAX_DEVICES_LISTS 64
/* Attribute values per device (a list counts each of its items). */
#define SLICES_MAX_ATTRIBUTE_VALUES 48
#define SLICES_PCIE_ROOT_ATTR "resource.kubernetes.io/pcieRoot"

#define SLICES_CAPACITY_KEY "dra.cpu/cpu"

struct slices_opts {
	const char *node;     /* node and pool name */
	const char *node_uid; /* NULL: no ownerReference (dry run) */
	int64_t generation;   /* pool generation, >= 1 */
	int max_devices;      /* 0: SLICES_MAX_DEVICES */
	/* Every device carries nodeAllocatableResources.cpu.mapping (KEP-5517,
	 * the 1.37 shape): grouped devices map the consumed dra.cpu/cpu
	 * capacity one to one, individual devices one CPU per device. An API
	 * server without the field drops it (the publisher notices). */
	bool node_allocatable;
	/* Not NULL: every device carries resource.kubernetes.io/pcieRoot, the
	 * sorted names of the PCIe roots local to any of its CPUs, as a
	 * list-type attribute (1.36+, DRAListTypeAttributes); omitted when no
	 * root is local to it, or when the list would pass the device's
	 * attribute-value limit. Slices then hold at most
	 * SLICES_MAX_DEVICES_LISTS devices. Borrowed. */
	const struct pcie *pcie;
	/* Not NULL: the CPUs online now (CPU hotplug). A device none of whose
	 * CPUs is online is left out (names of the others do not change); a
	 * group's capacity and dra.cpu/numCPUs count its online CPUs only.
	 * NULL: every device as built. Borrowed. */
	const struct cpuset *online;
	/* Not NULL: an external allocator picks the CPUs (--allocator
	 * external), and every group carries what it needs to, under the
	 * reference driver's names: dra.cpu/cpuIDs, the group's allocatable
	 * CPUs online (a CPU list), and dra.cpu/smtLayout, this string
	 * (devices_smt_layout(), node-wide). A value longer than
	 * SLICES_MAX_STRING is left out. Borrowed. */
	const char *smt_layout;
};

#define SLICES_MAX_STRING 64 /* bytes of a string attribute (API validation) */
#define SLICES_CPU_IDS_ATTR "dra.cpu/cpuIDs"
#define SLICES_SMT_LAYOUT_ATTR "dra.cpu/smtLayout"

/* Number of devices published (see slices_opts.online). */
int slices_published(const struct devices *d, const struct slices_opts *o);

/* Number of slices the devices need. */
int slices_count(const struct devices *d, const struct slices_opts *o);

/* A new JSON array of complete ResourceSlice objects; caller puts it. */
int slices_build(const struct devices *d, const struct slices_opts *o, struct json_object **ret);

/* Slice i alone, complete (what slices_build() puts at index i). */
int slices_build_one(const struct devices *d, const struct slices_opts *o, int i,
		     struct json_object **ret);

/* The spec.devices array of slice i alone (what the publisher compares). */
int slices_build_devices(const struct devices *d, const struct slices_opts *o, int i,
			 struct json_object **ret);

/* The attributes object the slice gives device name (a new object; the
 * caller puts it), -ENOENT for no such device. For the device metadata
 * file, which carries the same attributes. */
int slices_device_attributes(const struct devices *d, const struct slices_opts *o,
			     const char *name, struct json_object **ret);

/* Fields an API server may drop silently from what we publish (a feature gate
 * off, or a release that predates the field), by the feature that carries
 * them. */
enum slices_feature {
	SLICES_FEAT_CONSUMABLE = 1 << 0,     /* allowMultipleAllocations, requestPolicy */
	SLICES_FEAT_NODE_ALLOCATABLE = 1 << 1, /* nodeAllocatableResources */
	SLICES_FEAT_LIST_ATTRIBUTES = 1 << 2,  /* ints/bools/strings/versions attributes */
	SLICES_FEAT_OTHER = 1 << 3,	       /* anything else that differs */
};

/* Which features' fields are in sent (a spec.devices array we wrote) but not
 * in got (what the server returned), devices matched by name: a mask of enum
 * slices_feature, 0 when nothing was dropped. Either may be NULL. */
unsigned slices_dropped_features(struct json_object *sent, struct json_object *got);

/* The feature gate behind one bit, and a sentence on what is lost without it. */
const char *slices_feature_gate(enum slices_feature f);
const char *slices_feature_loss(enum slices_feature f);
