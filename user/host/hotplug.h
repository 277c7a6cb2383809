/* Which CPUs are online right now: the set CPU hotplug changes under a
 * running driver (echo 0 > /sys/devices/system/cpu/cpuN/online).
 *
 * The kernel keeps /sys/devices/system/cpu/online and every cpuN/online in
 * step; a copied sysfs capture (--sysfs-root) does not, so under a capture
 * root the per-CPU files of the CPUs asked about are read too and win: a
 * CPU whose cpuN/online says 0 is offline, one that says 1 is online. On the
 * live machine the one global list is read (cheap enough to poll). CPUs
 * without a cpuN/online file (CPU 0 on most x86 machines: it cannot be
 * unplugged) keep what the global list says. An old kernel's capture has no
 * global list: there a CPU with a cpuN/topology directory is online unless
 * its file says 0. An empty or garbled per-CPU file says nothing.
 *
 * No state: the caller polls and compares (sysfs offers no notification
 * for these files).
 */
#pragma once

#include "lib/cpuset.h"

struct errbuf;

/* The online CPUs under sysfs_root (NULL or "" = the live /sys) into *ret.
 * known: the CPUs whose per-CPU file counts (captures only; may be NULL).
 * -errno when the global list cannot be read or parsed (eb says why);
 * *ret is written only on success. */
int hotplug_online(const char *sysfs_root, const struct cpuset *known, struct cpuset *ret,
		   struct errbuf *eb);

/* The NUMA nodes that have memory (node/has_memory under sysfs_root), as a
 * set of node ids in *ret: cpuset.mems may name only those. -ENOENT when the
 * kernel has no such list (no NUMA): every node then has memory. */
int hotplug_memory_nodes(const char *sysfs_root, struct cpuset *ret, struct errbuf *eb);
