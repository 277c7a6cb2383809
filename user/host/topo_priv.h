/* What the files of the topology loader share and nothing outside it sees:
 * the facts read from sysfs next to hwloc (struct sysfs_facts) and the
 * sysfs steps the hwloc loader calls. The module's files: topo.c the model
 * (topo_build) and the hwloc loaders, topo_sysfs.c the sysfs reads and
 * checks, topo_json.c the topology JSON. Its public API is topo.h; include
 * this header only from user/host/topo*.c.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>

#include "lib/cpuset.h"

struct errbuf;

#define SYSFS_CPU "/sys/devices/system/cpu"
#define SYSFS_NODE "/sys/devices/system/node"

/* Room after the root for the longest name we build,
 * "/sys/devices/system/node/node2147483647/cpulist" (48) or
 * "/sys/devices/system/cpu/cpu8191/cache/index63/shared_cpu_map" (61). */
#define SYSFS_SUFFIX_MAX 128

struct sysfs_node {
	int id;
	struct cpuset cpus; /* cpulist (cpumap on old kernels) & the CPUs that exist */
};

/* What we read from sysfs ourselves, next to hwloc. */
struct sysfs_facts {
	const char *root; /* "" = the live machine */
	bool has_online;
	struct cpuset online; /* cpu/online */
	struct cpuset known;  /* cpu/present plus every cpuN directory */
	bool has_atom;
	struct cpuset atom; /* cpu_atom/cpus: the E-cores of an Intel hybrid */
	struct sysfs_node *nodes;
	int n_nodes; /* 0 when there is no node/ directory (hwloc then invents node 0) */
};


/* Formats root + the rest into path (PATH_MAX bytes). The loaders reject roots
 * longer than PATH_MAX - SYSFS_SUFFIX_MAX, so this cannot truncate. */
void topo_sysfs_path(char *path, const char *root, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

bool topo_sysfs_exists(const char *path);
void topo_sysfs_facts_done(struct sysfs_facts *f);

/* A per-CPU file that is empty (-ENODATA) or cannot be read at all (a
 * directory, a dangling link, EACCES, EIO) says nothing rather than
 * something wrong: hwloc then builds the CPU from the lists that name it
 * elsewhere (its siblings' and its package's masks, the node lists), so the
 * machine is not refused for it. Garbage in a readable file is still refused:
 * hwloc would misread that silently. Counted, and the first one named, for
 * the caller to log once (topo_sysfs.c counts, the loader resets and logs). */
extern int topo_sysfs_fallbacks;
extern char topo_sysfs_fallback_first[PATH_MAX];

/* Before hwloc: the CPU directory, cpu/online, cpu/present, per-CPU online files. */
int topo_sysfs_scan_cpus(struct sysfs_facts *f, struct errbuf *eb);
/* NUMA nodes as sysfs lists them (cpulist, or cpumap alone). */
int topo_sysfs_scan_nodes(struct sysfs_facts *f, struct errbuf *eb);
/* The E-cores of an Intel hybrid (cpu_atom/cpus), when the kernel lists them. */
int topo_sysfs_scan_atom(struct sysfs_facts *f, struct errbuf *eb);
/* The per-CPU topology and cache files of an online CPU, which hwloc would misread. */
int topo_sysfs_check_cpu(const struct sysfs_facts *f, int cpu, struct errbuf *eb);
