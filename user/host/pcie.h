/* PCIe root complexes and the CPUs local to each: what a claim needs to put
 * its CPUs next to a GPU or a NIC (resource.kubernetes.io/pcieRoot).
 *
 * A root complex is a host bridge: the kernel names its directory
 * /sys/devices/pciDDDD:BB (domain, root bus; pci_register_host_bridge() is
 * the only place that name is made) and lists the CPUs local to its bus in
 * /sys/devices/pciDDDD:BB/pci_bus/DDDD:BB/cpulistaffinity. Every device
 * below a root reaches memory through it, so two devices that share a root
 * name share the shortest path.
 *
 * Invariants of a loaded struct pcie: roots sorted by name, names unique and
 * exactly "pci" + 4 lower-case hex + ":" + 2 lower-case hex, each with a
 * non-empty CPU set. Roots whose affinity is missing, unreadable, garbage or
 * empty are left out and counted in n_skipped (the first reason kept).
 * Immutable after load; consumers borrow it.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct errbuf;

#define PCIE_NAME_LEN 10 /* "pci0000:00" */
#define PCIE_MAX_ROOTS 256

struct pcie_root {
	char name[PCIE_NAME_LEN + 1];
	struct cpuset cpus; /* CPUs local to the root's bus */
};

struct pcie {
	int n;
	struct pcie_root *v;
	int n_skipped;	     /* root directories left out */
	char skipped[160];   /* why the first one was, "" when none */
};

/* Is name a root-bridge directory name (pciDDDD:BB, lower-case hex)? */
bool pcie_is_root_name(const char *name);

/* Scans <sysfs_root>/sys/devices (sysfs_root NULL or "" = the live /sys).
 * 0 and a new struct in *ret (caller frees with pcie_free()); a missing
 * sys/devices or one without roots is an empty struct, not an error (most
 * virtual machines and non-PCI boards). -E2BIG over PCIE_MAX_ROOTS roots,
 * -errno when the directory cannot be listed; eb says why. */
int pcie_load(const char *sysfs_root, struct pcie **ret, struct errbuf *eb);

/* The PCIe roots a node publishes (--expose-pcie-roots): pcie_load() with
 * what it found logged (roots left out, the CPUs of online local to no
 * root). no_tree: the topology came from a file, with no PCI tree to go with
 * it: *ret NULL, logged. -errno, logged, only when sysfs cannot be read at
 * all. */
int pcie_load_logged(const char *sysfs_root, bool no_tree, const struct cpuset *online,
		     struct pcie **ret);

/* Adds root name with the text of its cpulistaffinity (len bytes; NULL
 * when the file could not be read), keeping p->v sorted: 1 added, 0 left
 * out and counted in n_skipped (missing, garbage or empty affinity),
 * -EINVAL name is not a root name, -EEXIST already there, -E2BIG past
 * PCIE_MAX_ROOTS. What pcie_load() does per directory; the parser a fuzzer
 * can reach without a file system. */
int pcie_add_root(struct pcie *p, const char *name, const char *affinity, size_t len);

/* The roots local to any CPU of cpus, as indexes into p->v ascending (so
 * sorted by name) in idx (room for p->n); returns how many. */
int pcie_roots_of(const struct pcie *p, const struct cpuset *cpus, int *idx);

struct pcie *pcie_free(struct pcie *p);
DEFINE_FREEP(pcie, pcie_free)
