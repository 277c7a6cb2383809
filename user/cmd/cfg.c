/* The option table and its parser. See cfg.h for precedence and syntax. */
#include "cmd/cfg.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define LOG_MOD "cfg"
#include "cmd/cfgfile.h"
#include "core/claim.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/num.h"

/* Longest unix socket path: sizeof(sun_path) - 1. */
#define SOCKET_PATH_MAX 107
#define REG_SOCKET_SUFFIX "/plugins_registry/dra.cpu-reg.sock"
#define DRA_SOCKET_SUFFIX "/plugins/dra.cpu/dra.sock"

enum opt_type { OPT_STRING, OPT_BOOL, OPT_INT, OPT_ENUM, OPT_CPUSET, OPT_ACTION };

struct opt {
	const char *name;
	const char *alias;
	enum opt_type type;
	size_t off;	     /* into struct cfg */
	const char *def;     /* default, as text */
	int min, max;	     /* OPT_INT */
	const char *const *values; /* OPT_ENUM, NULL-terminated; index stored */
	int action;	     /* OPT_ACTION */
	const char *help;
};

/* Options set only by the configuration file, as in the reference driver: no
 * flag, no environment variable (their table rows name them internally). */
static const char *const file_only_opts[] = { "publish-node-allocatable-resource-mapping" };

static bool is_file_only(const struct opt *o)
{
	for (size_t i = 0; i < ARRAY_SIZE(file_only_opts); i++)
		if (!strcmp(o->name, file_only_opts[i]))
			return true;
	return false;
}

static const char *const device_modes[] = { "grouped", "individual", NULL };
static const char *const group_bys[] = { "numanode", "socket", "machine", NULL };
static const char *const enforcements[] = { "audit", "remediate", "deny", NULL };
static const char *const memories[] = { "all", "local", NULL };
static const char *const cpu_quotas[] = { "drop", "keep", NULL };
static const char *const irq_isolations[] = { "keep", "isolate", NULL };
static const char *const allocators[] = { "cpumanager", "external", NULL };
static const char *const event_kinds[] = { "warning", "all", "none", NULL };

#define F(field) offsetof(struct cfg, field)

/* The configuration file's keys and the flags they set. The first block is
 * the reference driver's schema (same names, same meaning); the rest are
 * dra-cpu's own. A key with refuse set must stay a flag: the hint says which. */
struct file_key {
	const char *key;
	const char *flag;
	const char *refuse;
};

#define FILE_API_VERSION "v1alpha1"

static const struct file_key file_keys[] = {
	{ "cpuDeviceMode", "cpu-device-mode", NULL },
	{ "groupBy", "group-by", NULL },
	{ "allocator", "allocator", NULL },
	{ "reservedCPUs", "reserved-cpus", NULL },
	{ "hostnameOverride", "hostname-override", NULL },
	{ "kubeconfig", "kubeconfig", NULL },
	{ "bindAddress", NULL, "set it with --bind-address (the Helm chart's healthzPort)" },
	{ "kubeletRootDir", NULL, "set it with --kubelet-root-dir" },
	{ "sysfsOverlay", NULL, "dra-cpu reads a sysfs capture with the key sysfsRoot instead" },

	{ "sysfsRoot", "sysfs-root", NULL },
	{ "topologyFile", "topology-file", NULL },
	{ "allowInsecureKubeconfig", "allow-insecure-kubeconfig", NULL },
	{ "kubeletRegistration", "kubelet-registration", NULL },
	{ "cdiDir", "cdi-dir", NULL },
	{ "stateDir", "state-dir", NULL },
	{ "nri", "nri", NULL },
	{ "nriSocket", "nri-socket", NULL },
	{ "nriPushUpdates", "nri-push-updates", NULL },
	{ "bpf", "bpf", NULL },
	{ "pinningEnforcement", "pinning-enforcement", NULL },
	{ "contentionHistogram", "contention-histogram", NULL },
	{ "kubeletFirstRequestTimeout", "kubelet-first-request-timeout", NULL },
	{ "sliceRepairTimeout", "slice-repair-timeout", NULL },
	{ "rtCPUs", "rt-cpus", NULL },
	{ "rtHeadroom", "rt-headroom", NULL },
	{ "isolatedCPUsShared", "isolated-cpus-shared", NULL },
	{ "logVerbosity", "v", NULL },

	{ "publishNodeAllocatableResourceMapping", "publish-node-allocatable-resource-mapping",
	  NULL },
	{ "exposePCIeRoots", "expose-pcie-roots", NULL },
	{ "deviceMetadata", "device-metadata", NULL },
	{ "memoryLocality", "memory-locality", NULL },
	{ "cpuQuota", "cpu-quota", NULL },
	{ "irqIsolation", "irq-isolation", NULL },
	{ "procfsRoot", "procfs-root", NULL },
	{ "events", "events", NULL },
	{ "eventsSeriesInterval", "events-series-interval", NULL },
	{ "claimStatus", "claim-status", NULL },
};

static const struct opt opts[] = {
	{ "cpu-device-mode", NULL, OPT_ENUM, F(device_mode), "grouped", 0, 0, device_modes, 0,
	  "Publish one device per CPU (individual) or per group with consumable capacity (grouped)." },
	{ "group-by", "cpu-device-group-by", OPT_ENUM, F(group_by), "numanode", 0, 0, group_bys, 0,
	  "Grouped mode: one device per NUMA node, per socket, or one for the machine." },
	{ "allocator", NULL, OPT_ENUM, F(allocator), "cpumanager", 0, 0, allocators, 0,
	  "Who picks a grouped claim's CPUs: cpumanager (the driver), or external (a scheduler "
	  "names them in the claim's opaque CPUConfig cpuset; a claim without one is refused, and "
	  "every group publishes dra.cpu/cpuIDs and dra.cpu/smtLayout). Grouped mode only." },
	{ "reserved-cpus", NULL, OPT_CPUSET, F(reserved_cpus_str), "", 0, 0, NULL, 0,
	  "CPUs never published, allocated or shared (list format, e.g. 0,32)." },
	{ "rt-cpus", NULL, OPT_CPUSET, F(rt_cpus_str), "", 0, 0, NULL, 0,
	  "Real-time CPUs (list format; empty: off): each is published as its own device "
	  "cpurtNNN whose deadline bandwidth claims share (docs/realtime.md); they leave the "
	  "shared pool and ordinary allocation." },
	{ "rt-headroom", NULL, OPT_INT, F(rt_headroom_milli), "0", 0, 500, NULL, 0,
	  "Milli-CPU of each real-time CPU left unpublished beyond what the kernel reserves for "
	  "its deadline servers (fair, sched_ext), which are re-read while running "
	  "(docs/realtime.md)." },
	{ "isolated-cpus-shared", NULL, OPT_BOOL, F(isolated_shared), "false", 0, 0, NULL, 0,
	  "Let the kernel's isolated CPUs (isolcpus=, nohz_full=) join the shared pool; by "
	  "default only claims that ask for them get them (docs/isolated-cpus.md)." },
	{ "hostname-override", NULL, OPT_STRING, F(hostname_override), "", 0, 0, NULL, 0,
	  "Node name (default: $NODE_NAME, else the hostname)." },
	{ "sysfs-root", NULL, OPT_STRING, F(sysfs_root), "", 0, 0, NULL, 0,
	  "Discover the topology from a sysfs capture in DIR (holding sys/) instead of this machine." },
	{ "topology-file", NULL, OPT_STRING, F(topology_file), "", 0, 0, NULL, 0,
	  "Use a topology JSON file (the --print-topology format) instead of discovery." },
	{ "kubeconfig", NULL, OPT_STRING, F(kubeconfig), "", 0, 0, NULL, 0,
	  "Kubeconfig for running outside the cluster (default: in-cluster config)." },
	{ "allow-insecure-kubeconfig", NULL, OPT_BOOL, F(allow_insecure_kubeconfig), "false", 0,
	  0, NULL, 0, "Accept a kubeconfig with insecure-skip-tls-verify or an http:// server." },
	{ "kubelet-root-dir", NULL, OPT_STRING, F(kubelet_root_dir), "/var/lib/kubelet", 0, 0,
	  NULL, 0, "Kubelet root; sockets go to plugins_registry/ and plugins/dra.cpu/ under it." },
	{ "kubelet-registration", NULL, OPT_BOOL, F(kubelet_registration), "true", 0, 0, NULL, 0,
	  "Wait for the kubelet to confirm registration before /healthz turns 200." },
	{ "cdi-dir", NULL, OPT_STRING, F(cdi_dir), "/var/run/cdi", 0, 0, NULL, 0,
	  "Directory of CDI specs (one per prepared claim: the durable record)." },
	/* The checkpoint annotates the CDI specs and must live exactly as long as
	 * they do: both sit on the runtime tmpfs, gone together at reboot, when
	 * the kubelet prepares every claim again. tmpfs also makes the fsync of
	 * each commit free, which keeps Prepare well under a millisecond. */
	{ "state-dir", NULL, OPT_STRING, F(state_dir), "/var/run/dra-cpu", 0, 0, NULL, 0,
	  "Directory of the checkpoint (mode 0700); keep it on the same tmpfs as --cdi-dir." },
	{ "nri", NULL, OPT_BOOL, F(nri), "true", 0, 0, NULL, 0,
	  "Run the NRI plugin (pinning and the shared pool)." },
	{ "nri-socket", NULL, OPT_STRING, F(nri_socket), "/var/run/nri/nri.sock", 0, 0, NULL, 0,
	  "NRI socket of the container runtime." },
	{ "nri-push-updates", NULL, OPT_BOOL, F(nri_push_updates), "true", 0, 0, NULL, 0,
	  "Widen shared containers right after Unprepare (turn off for NRI older than 0.12.1)." },
	{ "bpf", NULL, OPT_BOOL, F(bpf), "true", 0, 0, NULL, 0,
	  "Load the eBPF pinning checks." },
	{ "pinning-enforcement", NULL, OPT_ENUM, F(pinning_enforcement), "audit", 0, 0,
	  enforcements, 0,
	  "audit: report violations; remediate: also move host tasks off exclusive CPUs; deny: "
	  "also refuse affinity escapes with BPF LSM where available." },
	{ "contention-histogram", NULL, OPT_BOOL, F(contention_histogram), "true", 0, 0, NULL, 0,
	  "Measure run-queue latency on shared CPUs with BPF." },
	{ "kubelet-first-request-timeout", NULL, OPT_INT, F(kubelet_first_request_timeout_s), "10",
	  1, 600, NULL, 0,
	  "Seconds a connection to the kubelet sockets may go without a request while a quarter "
	  "or more of its 64 connection slots are taken; then it is closed, so a crowd of idle "
	  "peers is gone in seconds." },
	{ "slice-repair-timeout", NULL, OPT_INT, F(slice_repair_timeout_s), "30", 1, 3600, NULL, 0,
	  "Seconds the node's ResourceSlices may be known wrong or missing, repairs failing, "
	  "before /readyz turns 503 (it is 200 again once they are right)." },
	{ "bind-address", NULL, OPT_STRING, F(bind_address), ":8080", 0, 0, NULL, 0,
	  "HTTP address for /healthz, /readyz and /metrics (host:port, :port)." },
	{ "v", NULL, OPT_INT, F(verbosity), "0", 0, 9, NULL, 0,
	  "Log verbosity: 0 info, 1-2 debug, 3+ trace." },
	{ "config", NULL, OPT_STRING, F(config_file), "", 0, 0, NULL, 0,
	  "YAML configuration file (docs/config.md): its keys set what the flags set; a flag "
	  "or environment variable given as well wins over the file." },
	{ "publish-node-allocatable-resource-mapping", NULL, OPT_BOOL, F(node_allocatable),
	  "false", 0, 0, NULL, 0,
	  "Every device maps what a claim gets onto the node's allocatable cpu "
	  "(nodeAllocatableResources, Kubernetes 1.37, DRANodeAllocatableResources): the "
	  "scheduler and the kubelet count claimed CPUs against the node." },
	{ "expose-pcie-roots", NULL, OPT_BOOL, F(expose_pcie_roots), "false", 0, 0, NULL, 0,
	  "Give every device resource.kubernetes.io/pcieRoot, the PCIe root complexes local to "
	  "its CPUs (a list attribute: the cluster needs DRAListTypeAttributes, 1.36+)." },
	{ "memory-locality", NULL, OPT_ENUM, F(memory_locality), "all", 0, 0, memories, 0,
	  "Claims that do not say (CPUConfig memory): local sets their containers' cpuset.mems "
	  "to the NUMA nodes of their CPUs; all leaves every node." },
	{ "cpu-quota", NULL, OPT_ENUM, F(cpu_quota), "drop", 0, 0, cpu_quotas, 0,
	  "Containers whose CPUs are all exclusive: drop runs them and their pods without CFS "
	  "quota, as the kubelet does for its exclusive CPUs; keep leaves the quota of their "
	  "CPU limit (docs/cpu-quota.md)." },
	{ "irq-isolation", NULL, OPT_ENUM, F(irq_isolation), "keep", 0, 0, irq_isolations, 0,
	  "Claims that do not say (CPUConfig irq): isolate moves every movable interrupt off "
	  "their CPUs (and out of default_smp_affinity) until Unprepare; keep leaves "
	  "interrupts alone (docs/irq-isolation.md)." },
	{ "procfs-root", NULL, OPT_STRING, F(procfs_root), "", 0, 0, NULL, 0,
	  "Read and write interrupt affinities in this directory's irq/ instead of /proc/irq: the "
	  "host's /proc/irq mounted writable into the pod (the DaemonSet: /host/proc). "
	  "interrupts and the task list are read there when it has them, else in /proc." },
	{ "device-metadata", NULL, OPT_BOOL, F(device_metadata), "false", 0, 0, NULL, 0,
	  "Give containers a read-only file describing their devices (KEP-5304, "
	  "/var/run/kubernetes.io/dra-device-attributes/...), through a second CDI device." },
	{ "events", NULL, OPT_ENUM, F(events), "warning", 0, 0, event_kinds, 0,
	  "Kubernetes Events (events.k8s.io/v1) about what the driver decided: warning "
	  "(refused claims, refused bindings, real-time failures, offline CPUs), all (also a "
	  "Normal event per prepared claim), none. Needs create and patch on events." },
	{ "events-series-interval", NULL, OPT_INT, F(events_series_interval_s), "10", 1, 3600, NULL,
	  0,
	  "Seconds: an event that repeats becomes a series (series.count), written back to "
	  "its Event with a patch at most this often." },
	{ "claim-status", NULL, OPT_BOOL, F(claim_status), "true", 0, 0, NULL, 0,
	  "Write what was decided for each prepared claim into its status.devices (CPUs, "
	  "NUMA nodes, sockets, policy, a Ready condition; KEP-4817); Unprepare removes it. "
	  "Needs patch on resourceclaims/status (and, from 1.36, associated-node:patch on "
	  "resourceclaims/driver)." },
	{ "print-topology", NULL, OPT_ACTION, 0, NULL, 0, 0, NULL, CFG_PRINT_TOPOLOGY,
	  "Print the discovered topology as JSON and exit." },
	{ "dry-run", NULL, OPT_ACTION, 0, NULL, 0, 0, NULL, CFG_DRY_RUN,
	  "Print the ResourceSlices this node would publish (a JSON List) and exit." },
	{ "help", "h", OPT_ACTION, 0, NULL, 0, 0, NULL, CFG_HELP, "Show this help and exit." },
	{ "version", NULL, OPT_ACTION, 0, NULL, 0, 0, NULL, CFG_VERSION,
	  "Print the version and exit." },
};

static const char *env_name(const struct opt *o, char buf[static 64])
{
	size_t i = 0;

	for (const char *p = "DRA_CPU_"; *p; p++)
		buf[i++] = *p;
	for (const char *p = o->name; *p && i < 63; p++)
		buf[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	buf[i] = 0;
	return buf;
}

static int parse_bool(const char *v, bool *ret)
{
	if (!strcmp(v, "true") || !strcmp(v, "1"))
		*ret = true;
	else if (!strcmp(v, "false") || !strcmp(v, "0"))
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

static void enum_list(const struct opt *o, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; o->values[i] && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "|" : "", o->values[i]);
}

/* The set an OPT_CPUSET option fills, next to its text. */
static struct cpuset *cpuset_of(struct cfg *c, const struct opt *o)
{
	return o->off == F(rt_cpus_str) ? &c->rt_cpus : &c->reserved;
}

/* Stores text value v for option o; src and name say where it came from in
 * errors ("flag" and the flag's name, or the file, line and key). */
static int set_opt_as(struct cfg *c, const struct opt *o, const char *v, const char *src,
		      const char *name, struct errbuf *err)
{
	void *field = (char *)c + o->off;
	char tmp[128];

	switch (o->type) {
	case OPT_STRING:
	case OPT_CPUSET: {
		char *s = strdup(v), **dst = field;

		if (!s)
			return -ENOMEM;
		free(*dst);
		*dst = s;
		if (o->type == OPT_CPUSET) {
			if (cpuset_parse(v, cpuset_of(c, o), err) < 0)
				return errbuf_wrap(err, -EINVAL, "%s %s: invalid CPU list '%s'",
						   src, name, v);
		}
		return 0;
	}
	case OPT_BOOL:
		if (parse_bool(v, field) < 0)
			return errbuf_fail(err, -EINVAL,
					   "%s %s: '%s' is not a boolean (true|false)", src, name,
					   v);
		return 0;
	case OPT_INT: {
		if (num_parse_int(v, NULL, o->min, o->max, (int *)field) < 0)
			return errbuf_fail(err, -EINVAL, "%s %s: '%s' is not an integer in %d..%d",
					   src, name, v, o->min, o->max);
		return 0;
	}
	case OPT_ENUM:
		for (int i = 0; o->values[i]; i++)
			if (!strcmp(v, o->values[i])) {
				*(int *)field = i;
				return 0;
			}
		enum_list(o, tmp, sizeof(tmp));
		return errbuf_fail(err, -EINVAL, "%s %s: unknown value '%s' (one of %s)", src, name,
				   v, tmp);
	case OPT_ACTION:
		c->action = o->action;
		return 0;
	}
	return -EINVAL;
}

static int set_opt(struct cfg *c, const struct opt *o, const char *v, const char *src,
		   struct errbuf *err)
{
	return set_opt_as(c, o, v, src, o->name, err);
}

static const struct opt *find_opt(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		const struct opt *o = &opts[i];

		if ((strlen(o->name) == len && !strncmp(o->name, name, len)) ||
		    (o->alias && strlen(o->alias) == len && !strncmp(o->alias, name, len)))
			return o;
	}
	return NULL;
}

static int check_kubelet_root(const struct cfg *c, struct errbuf *err)
{
	const char *root = c->kubelet_root_dir;
	size_t len = strlen(root);

	if (root[0] != '/')
		return errbuf_fail(err, -EINVAL,
				   "flag kubelet-root-dir: '%s' must be an absolute path", root);
	while (len > 1 && root[len - 1] == '/')
		len--;
	if (len + strlen(REG_SOCKET_SUFFIX) > SOCKET_PATH_MAX)
		return errbuf_fail(
			err, -EINVAL,
			"flag kubelet-root-dir: '%s' is too long: the registration socket "
			"path would exceed %d bytes",
			root, SOCKET_PATH_MAX);
	return 0;
}

static bool is_set(const char *s)
{
	return s && *s;
}

static const struct file_key *find_file_key(const char *key, bool ignore_case)
{
	for (size_t i = 0; i < ARRAY_SIZE(file_keys); i++)
		if (ignore_case ? !strcasecmp(file_keys[i].key, key) : !strcmp(file_keys[i].key, key))
			return &file_keys[i];
	return NULL;
}

/* The file key that sets flag name, or "?". */
static const char *file_key_of(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(file_keys); i++)
		if (file_keys[i].flag && !strcmp(file_keys[i].flag, name))
			return file_keys[i].key;
	return "?";
}

/* The kind of YAML scalar option o takes. */
static enum cfgfile_kind opt_kind(const struct opt *o)
{
	return o->type == OPT_BOOL ? CFGFILE_BOOL : o->type == OPT_INT ? CFGFILE_INT : CFGFILE_STRING;
}

/* Applies the configuration file at path over the defaults. */
static int apply_file(struct cfg *c, const char *path, struct errbuf *err)
{
	_cleanup_(cfgfile_freep) struct cfgfile *f = NULL;
	struct errbuf eb = {};
	int r;

	r = cfgfile_load(path, &f, &eb);
	if (r < 0)
		return errbuf_fail(err, -EINVAL, "config file %s%s%s", path,
				   strncmp(eb.s, "line ", 5) ? ": " : " ", errbuf_text(&eb, r));
	c->config_digest = f->digest;
	for (int i = 0; i < f->n; i++) {
		const struct cfgfile_entry *e = &f->v[i];
		const struct file_key *k = find_file_key(e->key, false);
		const struct opt *o;
		char src[PATH_MAX + 32];

		(void)snprintf(src, sizeof(src), "config file %s line %d:", path, e->line);
		if (!strcmp(e->key, "apiVersion")) {
			if (e->kind != CFGFILE_STRING || strcmp(e->value, FILE_API_VERSION) != 0)
				return errbuf_fail(
					err, -EINVAL,
					"%s apiVersion: unsupported apiVersion '%s' (only "
					"%s)",
					src, e->value, FILE_API_VERSION);
			continue;
		}
		if (!k) {
			k = find_file_key(e->key, true);
			if (k)
				return errbuf_fail(
					err, -EINVAL,
					"%s key %s is spelled differently from the schema; "
					"use %s",
					src, e->key, k->key);
			return errbuf_fail(err, -EINVAL, "%s unknown key %s (see docs/config.md)",
					   src, e->key);
		}
		if (k->refuse)
			return errbuf_fail(err, -EINVAL,
					   "%s key %s is not configurable in the file: %s", src,
					   e->key, k->refuse);
		if (e->kind == CFGFILE_NULL)
			continue; /* null: as if absent, the default stays */
		o = find_opt(k->flag, strlen(k->flag));
		assert(o);
		if (e->kind != opt_kind(o))
			return errbuf_fail(err, -EINVAL, "%s %s: must be %s, not %s%s", src, e->key,
					   cfgfile_kind_name(opt_kind(o)),
					   cfgfile_kind_name(e->kind),
					   opt_kind(o) == CFGFILE_STRING ? " (quote it)" : "");
		r = set_opt_as(c, o, e->value, src, e->key, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --config FILE (or --config=FILE, single dash too) in argv, else
 * $DRA_CPU_CONFIG: the file is read before the flags are, so they win. */
static const char *config_path(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (a[0] != '-')
			continue;
		a += 1 + (a[1] == '-');
		if (!strcmp(a, "config"))
			return i + 1 < argc ? argv[i + 1] : NULL;
		if (!strncmp(a, "config=", 7))
			return a + 7;
	}
	return getenv("DRA_CPU_CONFIG");
}

int cfg_parse(struct cfg *c, int argc, char **argv, struct errbuf *err)
{
	const char *path;
	int r;

	memset(c, 0, sizeof(*c));
	errbuf_clear(err);

	/* defaults, then the configuration file, then environment, then flags */
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		if (opts[i].type == OPT_ACTION)
			continue;
		r = set_opt(c, &opts[i], opts[i].def, "default", err);
		if (r < 0)
			return r;
	}
	path = config_path(argc, argv);
	if (is_set(path)) {
		r = apply_file(c, path, err);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		const struct opt *o = &opts[i];
		char name[64];
		const char *env;

		if (o->type == OPT_ACTION || is_file_only(o))
			continue;
		env = getenv(env_name(o, name));
		if (env) {
			char src[80];

			(void)snprintf(src, sizeof(src), "env %s:", name);
			r = set_opt(c, o, env, src, err);
			if (r < 0)
				return r;
		}
	}

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val = NULL;
		const struct opt *o;
		bool neg = false;
		size_t len;

		if (a[0] != '-' || !a[1])
			return errbuf_fail(err, -EINVAL, "unexpected argument '%s' (see --help)",
					   a);
		name = a + 1 + (a[1] == '-');
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		o = find_opt(name, len);
		if (!o && len > 3 && !strncmp(name, "no-", 3)) {
			o = find_opt(name + 3, len - 3);
			neg = o && o->type == OPT_BOOL;
			if (!neg)
				o = NULL;
		}
		if (!o)
			return errbuf_fail(err, -EINVAL, "unknown flag '%.*s' (see --help)",
					   (int)len, name);
		if (is_file_only(o))
			return errbuf_fail(err, -EINVAL,
					   "flag %s: set it in the configuration file (key %s), as "
					   "the reference driver does",
					   o->name, file_key_of(o->name));
		if (eq)
			val = eq + 1;
		if (o->type == OPT_BOOL || o->type == OPT_ACTION) {
			if (neg && eq)
				return errbuf_fail(err, -EINVAL, "flag no-%s takes no value",
						   o->name);
			if (o->type == OPT_ACTION && eq)
				return errbuf_fail(err, -EINVAL, "flag %s takes no value", o->name);
			if (!val)
				val = neg ? "false" : "true";
		} else if (!val) {
			if (i + 1 >= argc)
				return errbuf_fail(err, -EINVAL, "flag %s needs a value", o->name);
			val = argv[++i];
		}
		r = set_opt(c, o, val, "flag", err);
		if (r < 0)
			return r;
	}

	if (c->action == CFG_HELP || c->action == CFG_VERSION)
		return 0;
	if (is_set(c->sysfs_root) && is_set(c->topology_file))
		return errbuf_fail(err, -EINVAL,
				   "flags sysfs-root and topology-file exclude each other");
	if (c->device_mode == DEVICES_INDIVIDUAL && c->allocator == CFG_ALLOCATOR_EXTERNAL)
		return errbuf_fail(err, -EINVAL,
				   "allocator external needs cpu-device-mode grouped: an external "
				   "allocator names the CPUs of a group with a cpuset");
	if (c->device_mode == DEVICES_INDIVIDUAL && c->group_by != DEVICES_BY_NUMANODE)
		log_warn("flag_ignored", "flag=group-by reason=\"individual mode has no groups\"");
	if (!is_set(c->bind_address) || !strchr(c->bind_address, ':'))
		return errbuf_fail(err, -EINVAL,
				   "flag bind-address: '%s' must be host:port or :port",
				   c->bind_address ? c->bind_address : "");
	r = check_kubelet_root(c, err);
	if (r < 0)
		return r;
	if (is_set(c->hostname_override)) {
		char node[CFG_NODE_NAME_MAX + 2];

		if (cfg_node_name(c, node, sizeof(node)) < 0)
			return errbuf_fail(err, -EINVAL,
					   "flag hostname-override: %s is not a Kubernetes node name "
					   "(a DNS-1123 subdomain: up to 253 of a-z, 0-9, '-' and '.')",
					   log_quote(c->hostname_override));
	}
	if (c->cdi_dir[0] != '/' || c->state_dir[0] != '/')
		return errbuf_fail(err, -EINVAL,
				   "flags cdi-dir and state-dir must be absolute paths");
	log_set_level((enum log_level)(LOG_INFO + (c->verbosity > 2 ? 2 : c->verbosity)));
	return 0;
}

void cfg_done(struct cfg *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].type == OPT_STRING || opts[i].type == OPT_CPUSET) {
			char **p = (char **)((char *)c + opts[i].off);

			free(*p);
			*p = NULL;
		}
}

int cfg_check_topology(const struct cfg *c, const struct topo *t, struct errbuf *err)
{
	struct cpuset bad, left;
	char list[256];

	cpuset_andnot(&bad, &c->reserved, &t->online);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return errbuf_fail(err, -EINVAL,
				   "flag reserved-cpus: CPUs %s are not online (online: %s)", list,
				   "see --print-topology");
	}
	cpuset_andnot(&left, &t->online, &c->reserved);
	if (cpuset_is_empty(&left))
		return errbuf_fail(err, -EINVAL,
				   "flag reserved-cpus: reserves every online CPU; nothing is left "
				   "to publish");
	cpuset_andnot(&bad, &c->rt_cpus, &t->online);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return errbuf_fail(err, -EINVAL, "flag rt-cpus: CPUs %s are not online", list);
	}
	cpuset_and(&bad, &c->rt_cpus, &c->reserved);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return errbuf_fail(err, -EINVAL, "flags rt-cpus and reserved-cpus both name CPUs %s",
				   list);
	}
	cpuset_andnot(&left, &left, &c->rt_cpus);
	if (cpuset_is_empty(&left))
		return errbuf_fail(err, -EINVAL,
				   "flag rt-cpus: with the reserved CPUs, takes every online CPU; the "
				   "shared pool needs at least one");
	return 0;
}

const char *cfg_sysfs_root(const struct cfg *c)
{
	return c->sysfs_root && *c->sysfs_root ? c->sysfs_root : NULL;
}

bool cfg_has_topology_file(const struct cfg *c)
{
	return c->topology_file && *c->topology_file;
}

int cfg_node_name(const struct cfg *c, char *buf, size_t size)
{
	const char *src = c->hostname_override;
	char host[256];
	size_t n = 0;

	if (!is_set(src))
		src = getenv("NODE_NAME");
	if (!is_set(src)) {
		if (gethostname(host, sizeof(host)) < 0)
			return -errno;
		host[sizeof(host) - 1] = 0;
		src = host;
	}
	while (isspace((unsigned char)*src))
		src++;
	for (; *src && n + 1 < size; src++)
		buf[n++] = (char)tolower((unsigned char)*src);
	if (*src)
		return -ENAMETOOLONG;
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = 0;
	/* It goes into URLs, label selectors, slice names and log lines: a
	 * node name is a DNS-1123 subdomain, the rule of claim names too. */
	return claim_name_check(buf) == 0 ? 0 : -EINVAL;
}

static void print_wrapped(FILE *f, const char *s, int col, int width)
{
	int x = col;

	while (*s) {
		int len = (int)strcspn(s, " ");

		if (x > col && x + 1 + len > width) {
			fprintf(f, "\n%*s", col - 1, "");
			x = col;
		}
		fprintf(f, " %.*s", len, s);
		x += 1 + len;
		s += len;
		s += strspn(s, " ");
	}
	fputc('\n', f);
}

void cfg_cli_print_options(FILE *f, const struct cfg_cli_opt *o, size_t n, int col)
{
	for (size_t i = 0; i < n; i++) {
		char lhs[64];

		(void)snprintf(lhs, sizeof(lhs), "--%s%s%s", o[i].name, o[i].arg ? " " : "",
			       o[i].arg ? o[i].arg : "");
		fprintf(f, "  %-*s", col - 3, lhs);
		print_wrapped(f, o[i].help, col, 79);
	}
}

void cfg_cli_getopt_table(const struct cfg_cli_opt *o, size_t n, struct option *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (struct option){ o[i].name, o[i].arg ? required_argument : no_argument,
					  NULL, o[i].id };
	out[n] = (struct option){ 0 };
}

void cfg_usage(FILE *f)
{
	fputs("Usage: dra-cpu-driver [flags]\n\n"
	      "Kubernetes DRA driver for CPUs: publishes the node's CPUs as ResourceSlices,\n"
	      "prepares claims for the kubelet, pins containers through NRI and checks the\n"
	      "pinning in the kernel with eBPF.\n\n"
	      "Precedence: a flag wins over its environment variable, which wins over the\n"
	      "configuration file (--config), which wins over the default. The file's keys\n"
	      "are listed with the flags they set (docs/config.md).\n\n"
	      "Flags (each also read from the environment variable shown):\n",
	      f);
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		const struct opt *o = &opts[i];
		char arg[160] = "", env[64], vals[128];

		if (is_file_only(o))
			continue;
		switch (o->type) {
		case OPT_ENUM:
			enum_list(o, vals, sizeof(vals));
			(void)snprintf(arg, sizeof(arg), " %s", vals);
			break;
		case OPT_INT:
			(void)snprintf(arg, sizeof(arg), " N (%d..%d)", o->min, o->max);
			break;
		case OPT_STRING:
			(void)snprintf(arg, sizeof(arg), " VALUE");
			break;
		case OPT_CPUSET:
			(void)snprintf(arg, sizeof(arg), " CPULIST");
			break;
		default:
			break;
		}
		fprintf(f, "  --%s%s%s%s\n      %s\n", o->name, arg, o->alias ? ", --" : "",
			o->alias ? o->alias : "", o->help);
		if (o->type == OPT_ACTION)
			continue;
		if (o->type == OPT_BOOL)
			fprintf(f, "      default: %s (--no-%s to turn off)   env: %s", o->def,
				o->name, env_name(o, env));
		else
			fprintf(f, "      default: %s   env: %s", o->def[0] ? o->def : "\"\"",
				env_name(o, env));
		for (size_t k = 0; k < ARRAY_SIZE(file_keys); k++)
			if (file_keys[k].flag && !strcmp(file_keys[k].flag, o->name))
				fprintf(f, "   file: %s", file_keys[k].key);
		fputc('\n', f);
	}
	fputs("\nConfiguration file only (no flag, no environment variable):\n", f);
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (is_file_only(&opts[i])) {
			fprintf(f, "  %s: true|false\n     ", file_key_of(opts[i].name));
			print_wrapped(f, opts[i].help, 6, 79);
			fprintf(f, "      default: %s\n", opts[i].def);
		}
}

void cfg_log(const struct cfg *c)
{
	log_info("config",
		 "cpu_device_mode=%s group_by=%s reserved_cpus=%s kubelet_root_dir=%s cdi_dir=%s "
		 "state_dir=%s nri=%s nri_socket=%s nri_push_updates=%s bpf=%s "
		 "pinning_enforcement=%s contention_histogram=%s kubelet_first_request_timeout=%d "
		 "slice_repair_timeout=%d bind_address=%s kubeconfig=%s config=%s rt_cpus=%s "
		 "node_allocatable=%s expose_pcie_roots=%s device_metadata=%s "
		 "events=%s claim_status=%s allocator=%s "
		 "rt_headroom_milli=%d isolated_cpus_shared=%s",
		 cfg_device_mode_name(c->device_mode), cfg_group_by_name(c->group_by),
		 log_quote(c->reserved_cpus_str), c->kubelet_root_dir, c->cdi_dir, c->state_dir,
		 c->nri ? "true" : "false", c->nri_socket, c->nri_push_updates ? "true" : "false",
		 c->bpf ? "true" : "false", cfg_enforcement_name(c->pinning_enforcement),
		 c->contention_histogram ? "true" : "false", c->kubelet_first_request_timeout_s,
		 c->slice_repair_timeout_s, c->bind_address,
		 is_set(c->kubeconfig) ? c->kubeconfig : "in-cluster",
		 is_set(c->config_file) ? log_quote(c->config_file) : "none",
		 log_quote(c->rt_cpus_str),
		 c->node_allocatable ? "true" : "false", c->expose_pcie_roots ? "true" : "false",
		 c->device_metadata ? "true" : "false",
		 event_kinds[c->events],
		 c->claim_status ? "true" : "false", allocators[c->allocator], c->rt_headroom_milli,
		 c->isolated_shared ? "true" : "false");
}

const char *cfg_device_mode_name(int mode)
{
	return device_modes[mode == DEVICES_INDIVIDUAL];
}

const char *cfg_group_by_name(int group_by)
{
	return group_by >= 0 && group_by <= DEVICES_BY_MACHINE ? group_bys[group_by] : "?";
}

const char *cfg_enforcement_name(int mode)
{
	return mode >= 0 && mode <= CFG_ENFORCE_DENY ? enforcements[mode] : "?";
}
