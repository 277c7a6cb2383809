/* The running driver: one event loop and the parts plugged into it.
 *
 *   main -> daemon_run(cfg, topo)
 *             ├── httpd    /healthz /readyz /metrics
 *             ├── metrics  registry every part registers with
 *             └── signals  SIGTERM/SIGINT: stop accepting, finish, exit (<= 5 s)
 *
 * The daemon owns every part; parts borrow cfg, topo and devices for the
 * daemon's lifetime.
 */
#pragma once

struct cfg;
struct pcie;
struct topo;

/* Runs until SIGTERM/SIGINT. Returns 0 after a clean shutdown, -errno when
 * startup fails (already logged). Takes ownership of nothing. */
int daemon_run(const struct cfg *cfg, const struct topo *topo);

/* --expose-pcie-roots: the PCIe roots of the machine the topology came from
 * (--sysfs-root, else the live /sys); *ret stays NULL when the option is off
 * or the topology is a --topology-file (no PCI tree to go with it). Roots
 * left out and CPUs local to none are logged. -errno only when sysfs cannot
 * be read at all. */
int daemon_load_pcie(const struct cfg *cfg, const struct topo *topo, struct pcie **ret);
