/* ResourceSlice objects for this node's devices (resource.k8s.io/v1).
 *
 * One pool named after the node; devices in enumeration order, split into
 * slices of at most SLICES_MAX_DEVICES; every slice carries the pool
 * generation and resourceSliceCount, spec.nodeName, and (when the node uid is
 * known) a controller ownerReference to the Node so the slices go away with
 * it. Names come from generateName "<5 hex index>-dra.cpu-<node>-".
 */
#pragma once

#include <stdint.h>

struct devices;
struct json_object;

#define SLICES_DRIVER "dra.cpu"
#define SLICES_MAX_DEVICES 128
#define SLICES_CAPACITY_KEY "dra.cpu/cpu"

struct slices_opts {
	const char *node;     /* node and pool name */
	const char *node_uid; /* NULL: no ownerReference (dry run) */
	int64_t generation;   /* pool generation, >= 1 */
	int max_devices;      /* 0: SLICES_MAX_DEVICES */
};

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
