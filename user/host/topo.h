/* The node's CPU model: which CPUs are online and where each one sits
 * (socket, NUMA node, physical core, L3 cache, P/E type).
 *
 * Three sources produce the same struct: hwloc over the live machine or over a
 * sysfs capture (topo_load_hwloc), and the topology JSON of --print-topology
 * (host/topo_json.h), which is how tests model nodes of 1024 CPUs. All of them
 * end in topo_build(), which validates the table and derives the summary, so
 * the invariants below hold for every struct topo:
 *
 *  - cpus[] holds the online CPUs, ascending by id, no duplicates;
 *  - core is machine-unique: two CPUs share it iff they are SMT siblings;
 *  - numa is the NUMA node OS index or -1; socket the package id or -1 when
 *    the machine reports no package at all; l3 is an L3 id or -1 (no L3);
 *  - online and offline are disjoint.
 *
 * A struct topo is immutable after build; consumers borrow it for the life of
 * the daemon.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

enum topo_core_type {
	TOPO_CORE_STANDARD = 0,
	TOPO_CORE_P,
	TOPO_CORE_E,
};

struct topo_cpu {
	int cpu;     /* Linux logical CPU id */
	int socket;  /* physical package id, -1 when the machine has no package */
	int numa;    /* NUMA node OS index, -1 when none */
	int core;    /* machine-unique core number (equal iff SMT siblings) */
	int core_id; /* the kernel's topology/core_id (unique per socket at best) */
	int l3;      /* L3 cache id, -1 when none */
	enum topo_core_type type;
};

struct topo {
	int n_cpus;
	struct topo_cpu *cpus; /* online CPUs ascending, n_cpus entries */
	struct cpuset online;
	struct cpuset offline;
	int n_sockets, n_numa, n_cores, n_l3; /* distinct values >= 0 */
	bool smt;			      /* some core has more than one online CPU */
	int *index;			      /* cpu id -> position in cpus[], -1; max_cpu+1 entries */
	int index_len;
};

struct errbuf;

/* Validates a table of online CPUs (any order; copied) and derives the rest.
 * offline may be NULL. Errors (-EINVAL, eb filled when not NULL): duplicate
 * or out-of-range CPU ids, no CPUs, an offline CPU also online, a core shared
 * by CPUs of different sockets or NUMA nodes. */
int topo_build(const struct topo_cpu *cpus, int n, const struct cpuset *offline,
	       struct topo **ret, struct errbuf *eb);

/* All loaders: 0 and a new topology in *ret (caller frees with topo_free()), or
 * -errno with a one-line reason in eb (may be NULL). */

/* Discovers the topology with hwloc. sysfs_root NULL = the live machine;
 * otherwise a directory holding sys/ (and proc/) of a capture, read with the
 * linux component only so the host's CPUID never leaks in. Disallowed CPUs are
 * included (the whole machine). Offline = present (or cpuN/) CPUs that are not
 * online. P/E cores come from sys/devices/cpu_atom/cpus, else from hwloc's
 * CoreType cpukinds. The sysfs files hwloc would misread silently (cpu/online,
 * core_id, package ids, sibling masks, L3 ids, node cpulists) are checked:
 * -EINVAL for garbage, -ENOENT for a missing required file, eb naming it.
 * Sets and restores HWLOC_* environment variables: not thread-safe. */
int topo_load_hwloc(const char *sysfs_root, struct topo **ret, struct errbuf *eb);

/* Same from an x86 CPUID dump directory (pu0, pu1, ... as written by
 * hwloc-gather-cpuid), with hwloc's x86 backend alone: for tests and for
 * looking at another machine's dump. NUMA nodes only from AMD topoext.
 * -EOPNOTSUPP when this hwloc has no x86 backend (hwloc builds it only for
 * x86 machines: an arm64 build cannot read the dump at all). */
int topo_load_cpuid_dump(const char *dir, struct topo **ret, struct errbuf *eb);

/* The row of an online CPU, or NULL. */
const struct topo_cpu *topo_cpu(const struct topo *t, int cpu);

/* "standard", "p-core", "e-core". */
const char *topo_core_type_name(enum topo_core_type type);

/* NULL-safe; returns NULL. */
struct topo *topo_free(struct topo *t);
DEFINE_FREEP(topo, topo_free)
