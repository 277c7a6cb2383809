/* bpfmon_priv: what the files of the bpfmon module share and nobody else
 * sees. struct bpfmon is defined here so that bpfmon_probe.c can fill the few
 * fields bpfmon_pinning_prepare() reads; outside the module it stays opaque
 * (bpfmon.h). Not a public header: only user/pinning/bpfmon*.c include it.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/ratelimit.h"
#include "pinning/bpfmon.h"

struct cgroup_hierarchy;
struct enforce_bpf;
struct event;
struct event_base;
struct metric;
struct pinning_bpf;
struct ring_buffer;

#define SEEN_SLOTS 256	      /* (cpu, pid) -> last logged, power of two */

struct owner {
	uint64_t id; /* 0 = not exclusive */
	uint32_t gen;
	char *path; /* NULL: unresolved, exact match only */
};

struct seen {
	uint32_t cpu, pid;
	uint64_t until_s; /* 0 = free */
};

struct bpfmon_metrics {
	struct metric *loaded, *enforcement, *switches, *violations, *violation_seconds;
	struct metric *denials, *dropped, *ratelimited, *read_errors, *runq, *schedstat_wait;
	struct metric *prog_runs, *prog_seconds;
	struct metric *loaded_any, *mode, *remediations, *pool_wait;
	struct metric *irqs, *irq_seconds;
	uint64_t *schedstat_ns; /* [ncpu] */
};

struct bpfmon {
	struct event_base *base;
	struct bpfmon_opts opts;
	int ncpu; /* possible CPUs: size of every per-CPU array */

	struct pinning_bpf *skel;
	struct enforce_bpf *enforce;
	struct ring_buffer *rb;
	struct event *rb_ev;
	int stats_fd; /* bpf_enable_stats(), -1 when off */
	unsigned features;
	bool contention;
	enum bpfmon_enforcement effective;
	struct errbuf error; /* why the pinning check is not loaded */
	char notes[512];

	struct owner *owners; /* [ncpu] */
	uint32_t gen;
	struct cpuset shared;
	cpu_set_t *shared_mask; /* CPU_ALLOC(ncpu), for sched_setaffinity */
	size_t shared_mask_size;

	struct cgroup_hierarchy *hier; /* NULL: no mount, paths unknown */
	char *scope_path;	       /* remediate_scope resolved, or NULL */
	char *schedstat_path;

	struct seen seen[SEEN_SLOTS];
	struct ratelimit log_rl;  /* violation lines, per log_interval_s */
	struct ratelimit slow_rl; /* slow_handler lines */

	struct pinning_cpu_stats *stats_buf; /* [ncpu] */
	struct pinning_hist *hist_buf;	     /* [ncpu] */
	struct pinning_irq_stats *irq_buf;   /* [ncpu] */
	struct bpfmon_actions act;
	struct bpfmon_metrics met;
	bpfmon_event_fn event_fn;
	void *event_userdata;
	bpfmon_tap_fn tap_fn;
	void *tap_userdata;
};


/* bpfmon_probe.c: the BPFMON_FEAT_* this kernel has, less those in without. */
unsigned bpfmon_probe_features(unsigned without);

/* bpfmon.c: adds "; " and the text to m->notes (what runs degraded, and why). */
void bpfmon_note(struct bpfmon *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* bpfmon_load.c: loads and attaches what the kernel allows (m->skel, and
 * m->enforce in deny mode) and sets m->contention and m->effective; what does
 * not load is noted, or for the pinning object said in m->error. */
void bpfmon_load_all(struct bpfmon *m);

/* bpfmon_load.c: knobs and map sizes of a freshly opened pinning object (from
 * m->opts, m->features and m->ncpu): 0 or -errno. */
int bpfmon_pinning_prepare(const struct bpfmon *m, struct pinning_bpf *s, bool contention);
