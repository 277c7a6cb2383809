/* Driver configuration: one table of options (name, env, type, default,
 * range, help) drives parsing, validation and --help.
 *
 * Precedence: built-in defaults < the configuration file (--config, cfgfile.h)
 * < environment (DRA_CPU_<NAME>) < flags.
 * Flags take "--name value", "--name=value" or a single dash (the reference
 * driver uses Go's flag package, so "-v 4" and "--v=4" both work); booleans
 * take "--name", "--name=true|false" or "--no-name". Everything is checked
 * before the daemon starts; an error names the flag and its allowed values and
 * main() exits 2. Checks that need the topology (reserved CPUs online, not all
 * reserved) are in cfg_check_topology().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/devices.h"
#include "lib/cpuset.h"

struct errbuf;
struct topo;

enum cfg_action {
	CFG_RUN = 0,
	CFG_PRINT_TOPOLOGY,
	CFG_DRY_RUN,
	CFG_HELP,
	CFG_VERSION,
};

enum cfg_enforcement { CFG_ENFORCE_AUDIT = 0, CFG_ENFORCE_REMEDIATE, CFG_ENFORCE_DENY };
enum cfg_memory { CFG_MEMORY_ALL = 0, CFG_MEMORY_LOCAL };
enum cfg_cpu_quota { CFG_CPU_QUOTA_DROP = 0, CFG_CPU_QUOTA_KEEP };
enum cfg_irq { CFG_IRQ_KEEP = 0, CFG_IRQ_ISOLATE };
enum cfg_allocator { CFG_ALLOCATOR_CPUMANAGER = 0, CFG_ALLOCATOR_EXTERNAL };
enum cfg_events { CFG_EVENTS_WARNING = 0, CFG_EVENTS_ALL, CFG_EVENTS_NONE };

struct cfg {
	enum cfg_action action;
	/* devices and slices */
	int device_mode; /* enum devices_mode */
	int group_by;	 /* enum devices_group_by */
	int allocator;	 /* enum cfg_allocator (docs/external-allocator.md) */
	char *reserved_cpus_str;
	struct cpuset reserved;
	char *rt_cpus_str; /* --rt-cpus: real-time CPUs (docs/realtime.md) */
	struct cpuset rt_cpus;
	int rt_headroom_milli; /* --rt-headroom: per real-time CPU, beyond the kernel's servers */
	bool isolated_shared;  /* --isolated-cpus-shared (docs/isolated-cpus.md) */
	char *hostname_override;
	/* topology source */
	char *sysfs_root;
	char *topology_file;
	/* API server */
	char *kubeconfig;
	bool allow_insecure_kubeconfig;
	/* kubelet */
	char *kubelet_root_dir;
	bool kubelet_registration;
	int kubelet_first_request_timeout_s;
	/* API server */
	int slice_repair_timeout_s;
	/* state */
	char *cdi_dir;
	char *state_dir;
	/* NRI */
	bool nri;
	char *nri_socket;
	bool nri_push_updates;
	/* BPF */
	bool bpf;
	int pinning_enforcement; /* enum cfg_enforcement */
	bool contention_histogram;
	/* HTTP, logs */
	char *bind_address;
	int verbosity;
	char *config_file; /* --config: read before the environment and the flags */
	uint64_t config_digest; /* of the file's bytes as read (host/filewatch.h) */
	/* Kubernetes 1.36/1.37 slice and claim features (docs/node-allocatable.md) */
	bool node_allocatable; /* file only: nodeAllocatableResources.cpu on every device */
	bool expose_pcie_roots; /* resource.kubernetes.io/pcieRoot (docs/pcie-roots.md) */
	bool device_metadata;	/* metadata files in containers (docs/device-metadata.md) */
	int memory_locality;	/* enum cfg_memory: claims' default (docs/numa-memory.md) */
	int cpu_quota;		/* enum cfg_cpu_quota: on exclusive CPUs (docs/cpu-quota.md) */
	int irq_isolation;	/* enum cfg_irq: claims' default (docs/irq-isolation.md) */
	char *procfs_root;	/* "" = /proc; where /proc/irq is read and written */
	/* where users look (docs/events.md) */
	int events;		/* enum cfg_events */
	int events_series_interval_s; /* a growing series is patched at most this often */
	bool claim_status;	/* status.devices of prepared claims */
};

/* Fills c from defaults, environment and argv. Returns 0, or -EINVAL with a
 * message in err naming the flag (or variable) and its range. c must be freed
 * with cfg_done() either way. */
int cfg_parse(struct cfg *c, int argc, char **argv, struct errbuf *err);
void cfg_done(struct cfg *c);

/* --reserved-cpus and --rt-cpus against the discovered CPUs: every CPU they
 * name online, none in both, at least one CPU left for the shared pool. */
int cfg_check_topology(const struct cfg *c, const struct topo *t, struct errbuf *err);

/* Node name: --hostname-override, else $NODE_NAME, else the OS hostname,
 * lower-cased and trimmed. Writes into buf (size >= 256). -EINVAL when it
 * is not a Kubernetes node name (a DNS-1123 subdomain: "../x", a newline
 * inside), -ENAMETOOLONG when it does not fit buf. */
#define CFG_NODE_NAME_MAX 253
int cfg_node_name(const struct cfg *c, char *buf, size_t size);

/* --sysfs-root, or NULL for the live /sys. */
const char *cfg_sysfs_root(const struct cfg *c);
/* Was the topology given as a file (--topology-file)? Then it describes
 * another machine: no PCI tree, no hotplug to follow. */
bool cfg_has_topology_file(const struct cfg *c);

/* The option table of the project's smaller CLIs (dra-cpu-alloc,
 * bpf-verify): one row per long option drives both getopt_long and --help. */
struct cfg_cli_opt {
	int id;		  /* getopt_long's return value for it */
	const char *name; /* long name, without "--" */
	const char *arg;  /* argument placeholder, NULL for a switch */
	const char *help;
};
struct option;

/* The "Options:" lines of --help: "  --name ARG" padded to col, then the help
 * word-wrapped at 79 columns. */
void cfg_cli_print_options(FILE *f, const struct cfg_cli_opt *o, size_t n, int col);
/* getopt_long's table for o; out has room for n + 1 entries (zero last). */
void cfg_cli_getopt_table(const struct cfg_cli_opt *o, size_t n, struct option *out);

/* The full --help text, generated from the option table. */
void cfg_usage(FILE *f);

/* Logs the effective configuration (one line, info). */
void cfg_log(const struct cfg *c);

const char *cfg_device_mode_name(int mode);
const char *cfg_group_by_name(int group_by);
const char *cfg_enforcement_name(int mode);
