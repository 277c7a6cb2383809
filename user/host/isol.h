/* isol: the CPUs the kernel sets apart, at boot or in cpuset partitions,
 * as the driver needs them.
 *
 * Admins isolate CPUs for latency work with isolcpus= and nohz_full=. What
 * the kernel made of those options, not what the command line says, is
 * what counts:
 *
 *  - domain: CPUs outside the scheduler's load-balancing domains
 *    (/sys/devices/system/cpu/isolated, the complement of the kernel's
 *    domain housekeeping set: isolcpus= without flags, or with "domain").
 *    A task placed there stays there, and the threads of a multi-CPU claim
 *    on them are never balanced between its CPUs. cgroup v2 isolated cpuset
 *    partitions are not load-balanced either: they are added from
 *    /sys/fs/cgroup/cpuset.cpus.isolated (the root cgroup's list, Linux
 *    6.8+; where the isolated file follows the partitions too, both say the
 *    same). Partitions come and go while the driver runs, so the lists are
 *    read again then (host/isolwatch.h; isol_same() tells a change);
 *  - nohz_full: CPUs whose tick stops while they run one task
 *    (/sys/devices/system/cpu/nohz_full, present only on kernels built with
 *    CONFIG_NO_HZ_FULL; "(null)" or an empty line when there are none);
 *  - managed_irq: CPUs kept out of the affinity of kernel-managed interrupts
 *    (isolcpus=managed_irq,...); no file shows it, so it comes from
 *    /proc/cmdline.
 *
 * isolated = domain | nohz_full: the CPUs the driver keeps out of the shared
 * pool and of ordinary claims (docs/isolated-cpus.md). A kernel older than
 * the isolated file (before 4.2) gets domain from isolcpus= on the command
 * line; source says which. Roots are parameters so tests read captures:
 * NULL or "" is this machine.
 */
#pragma once

#include <stdbool.h>

#include "lib/cpuset.h"

struct errbuf;

struct isol {
	struct cpuset domain;	   /* not load-balanced */
	struct cpuset nohz_full;   /* tickless */
	struct cpuset managed_irq; /* managed interrupts kept off */
	struct cpuset partition;   /* isolated cgroup v2 partitions (in domain too) */
	struct cpuset isolated;	   /* domain | nohz_full */
	const char *domain_source; /* "sysfs", "cmdline", "none" (static text) */
	/* Not empty: what of /proc/cmdline was not understood and left out (the
	 * kernel refuses such an option too); for the caller to log. */
	char note[160];
};

/* Reads the three under root. Absent files are "none"; a sysfs file that is
 * there but not a CPU list is -EINVAL with eb naming it (never a guess). A
 * command line option that cannot be read is left out and said in note. */
int isol_read(const char *root, struct isol *ret, struct errbuf *eb);

/* a and b isolate the same CPUs the same way (domain, nohz_full,
 * managed_irq). */
bool isol_same(const struct isol *a, const struct isol *b);

/* The isolation a node publishes: isol_read() with what it found logged
 * (the lists, an option left out). no_kernel: the topology came from a
 * file, with no kernel behind it: none, nothing logged. -errno, logged,
 * when a sysfs list cannot be read. */
int isol_read_logged(const char *sysfs_root, bool no_kernel, struct isol *ret);

/* The isolcpus= and nohz_full= options of a kernel command line: CPUs the
 * command line isolates from the domains (isolcpus= with no flag or with
 * "domain"), asks to be tickless (nohz_full=, isolcpus=nohz) and keeps
 * managed interrupts off (isolcpus=managed_irq); an option given twice adds
 * up. -EINVAL with eb for a bad CPU list or a flag without CPUs (the kernel
 * ignores such an option); unknown flags are skipped. Everything after "--"
 * belongs to init and is not read. */
int isol_parse_cmdline(const char *cmdline, struct cpuset *ret_domain, struct cpuset *ret_nohz,
		       struct cpuset *ret_managed_irq, struct errbuf *eb);
