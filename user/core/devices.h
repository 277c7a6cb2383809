/* The devices this node publishes, in publication order, and the mapping back
 * from a device name to CPUs that Prepare relies on.
 *
 * individual: one device per allocatable CPU, named cpudev%03d by enumeration
 *   index (not CPU id): allocatable CPUs ascending, each followed by its
 *   allocatable SMT siblings ascending. With CPU 0 reserved on a machine whose
 *   siblings are N and N+32: cpudev000 = 1, cpudev001 = 33, cpudev002 = 2.
 *   This order is a contract with claims already allocated by the scheduler:
 *   it must come out the same on every start.
 * grouped: one device per NUMA node (cpudevnuma%03d, the node id), per socket
 *   (cpudevsocket%03d, the socket id) or one for the machine (cpudevmachine),
 *   standing for the group's allocatable CPUs; groups with none are skipped
 *   (the machine device always exists: cfg refuses reserving every CPU).
 *   CPUs in no NUMA node (an offline node, a missing node directory) form one
 *   more device, cpudevnonuma, last and without NUMA attributes: they are
 *   never counted as node 0. A CPU with socket -1 (no package at all) counts
 *   as socket 0.
 *
 * real-time: with --rt-cpus, devices_add_rt() appends one device per
 *   real-time CPU after the devices above, in both modes: cpurt%03d by CPU
 *   id (cpurt005 is CPU 5), with the individual-mode attributes and the
 *   consumable capacity dra.cpu/rtBandwidth (core/rt.h). Those CPUs are not
 *   allocatable: the caller reserves them for devices_build().
 *
 * isolated: with the kernel's isolated CPUs (host/isol.h,
 *   devices_build_isol()), isolated capacity is never counted with ordinary
 *   capacity. individual: the CPU's device carries dra.cpu/isolated and the
 *   kernel's flags. grouped: the isolated CPUs of a group are a device of
 *   their own after every ordinary one, cpuisonuma%03d, cpuisosocket%03d,
 *   cpuisomachine or cpuisononuma, with dra.cpu/isolated; the ordinary group
 *   device keeps its name and stands for the group's other CPUs (a group
 *   whose CPUs are all isolated has no ordinary device). Names of ordinary
 *   devices do not depend on isolation in either mode.
 *
 * Allocatable = online minus --reserved-cpus (minus --rt-cpus). Immutable
 * after build, but for the real-time capacity (devices_set_rt_capacity())
 * and a rebuild when the kernel's isolated CPUs change (devices_replace()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "host/isol.h"
#include "host/topo.h"

#define DEVICE_NAME_MAX 32

enum device_kind { DEVICE_CPU, DEVICE_NUMA, DEVICE_SOCKET, DEVICE_MACHINE, DEVICE_RT };

/* What the kernel made of a device's CPUs (every one of them, for a group). */
enum device_isol_flag {
	DEVICE_ISOL_DOMAIN = 1 << 0,	  /* not load-balanced (isolcpus=domain) */
	DEVICE_ISOL_NOHZ_FULL = 1 << 1,	  /* tickless (nohz_full=) */
	DEVICE_ISOL_MANAGED_IRQ = 1 << 2, /* managed interrupts kept off */
};

struct device {
	char name[DEVICE_NAME_MAX];
	enum device_kind kind;
	int id;	      /* CPU id, NUMA node id, socket id; 0 for the machine */
	int n_cpus;   /* allocatable CPUs it stands for (1 for a CPU) */
	int numa;     /* individual, rt, numa group: the node; else -1 */
	int socket;   /* individual, rt, numa/socket group: the socket (of the first CPU); else -1 */
	int core_id;  /* individual and rt only */
	int l3;	      /* individual and rt only, -1 when none */
	enum topo_core_type type; /* individual and rt only */
	int64_t rt_capacity_milli; /* rt only: dra.cpu/rtBandwidth */
	struct cpuset *cpus; /* groups: their CPUs (owned); NULL for a CPU */
	bool isolated;	     /* its CPUs are isolated CPUs (struct isol.isolated) */
	unsigned isol_flags; /* enum device_isol_flag, when isolated */
};

/* How devices are cut (--cpu-device-mode, --group-by). */
enum devices_mode { DEVICES_GROUPED = 0, DEVICES_INDIVIDUAL };
enum devices_group_by { DEVICES_BY_NUMANODE = 0, DEVICES_BY_SOCKET, DEVICES_BY_MACHINE };

struct devices {
	int n;
	struct device *v;
	enum device_kind kind; /* of every device but the real-time ones */
	bool smt;	       /* node-wide dra.cpu/smtEnabled */
	struct cpuset allocatable;
	int n_rt;	       /* the last n_rt devices are DEVICE_RT */
	struct cpuset rt;      /* their CPUs */
	struct isol isol;      /* the kernel's isolation, as built with (zero: none) */
	struct cpuset isolated; /* allocatable CPUs that are isolated */
};

/* mode: enum devices_mode; group_by: enum devices_group_by. reserved may be
 * NULL. -EINVAL when nothing is allocatable. */
int devices_build(const struct topo *t, const struct cpuset *reserved, int mode, int group_by,
		  struct devices **ret);
/* The same with the kernel's isolated CPUs (NULL: none; copied). */
int devices_build_isol(const struct topo *t, const struct cpuset *reserved,
		       const struct isol *isol, int mode, int group_by, struct devices **ret);

struct errbuf;
struct rt_limits;

/* The devices a node publishes: devices_build_isol() with reserved and
 * rt_cpus left out, then, when rt is not NULL and rt_cpus not empty, one
 * DEVICE_RT per CPU of rt_cpus of rt->capacity_milli. reserved, rt_cpus and
 * isol may be NULL. Caller frees with devices_free(). */
int devices_build_node(const struct topo *t, const struct cpuset *reserved,
		       const struct cpuset *rt_cpus, const struct isol *isol, int mode,
		       int group_by, const struct rt_limits *rt, struct devices **ret);

/* Appends a DEVICE_RT per CPU of rt (ascending), each of capacity_milli.
 * Once, after devices_build() with rt among the reserved CPUs: -EINVAL when
 * a CPU of rt is offline or allocatable, or when called twice. */
int devices_add_rt(struct devices *d, const struct topo *t, const struct cpuset *rt,
		   int64_t capacity_milli);

/* Every real-time device offers capacity_milli from now on (the kernel's
 * deadline servers changed). -EINVAL for capacity_milli <= 0. */
int devices_set_rt_capacity(struct devices *d, int64_t capacity_milli);

/* d takes what with holds (devices built again: the kernel's isolated CPUs
 * changed), in place, so that everyone who borrows d sees the new devices;
 * d's old devices and with itself are freed. Nobody may hold a struct device
 * of d across the call. */
void devices_replace(struct devices *d, struct devices *with);

/* The device of that name, or NULL. */
const struct device *devices_find(const struct devices *d, const char *name);

/* External allocators (--allocator external): the node's SMT sibling
 * layout as dra.cpu/smtLayout carries it (the reference driver's encoding,
 * its version 1): entries "<cpu list>><stride>" joined by ';', each listing
 * both CPUs of every sibling pair whose ids differ by stride (the lowest
 * unpaired CPU of an entry pairs with the one stride above it), in
 * ascending stride order, then the CPUs without a sibling as a last entry
 * without stride. Node-wide: online CPUs, reserved ones included. Returns
 * the length written, -EOPNOTSUPP when a core has three or more CPUs (the
 * encoding has no word for it), -E2BIG when buf is too small. */
int devices_smt_layout(const struct topo *t, char *buf, size_t size);

/* The longest string attribute value the API takes (bytes). */
#define DEVICES_STRING_MAX 64

/* devices_smt_layout() into buf (size > DEVICES_STRING_MAX), after checking
 * that it and every group's CPU list (dra.cpu/cpuIDs) fit
 * DEVICES_STRING_MAX: -E2BIG or -EOPNOTSUPP with eb saying which. */
int devices_external_layout(const struct topo *t, const struct devices *d, char *buf,
			    size_t size, struct errbuf *eb);

/* The CPUs a device stands for. */
void device_cpus(const struct device *dev, struct cpuset *ret);

struct devices *devices_free(struct devices *d);
DEFINE_FREEP(devices, devices_free)
