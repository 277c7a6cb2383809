/* verify: what bpf-verify does, apart from its flags and its output. Three
 * checks, each run once, each failing with -errno and one line of text
 * ("could not check": no privileges, no BTF, unreadable state):
 *
 *   verify_check_run      owners (flags or <state-dir>/owners.json) -> marked in
 *                         the BPF check's own maps -> watched for a duration ->
 *                         every task's allowed CPUs scanned: a verify_report
 *   verify_probe_run      every BPF object of the project loaded against this
 *                         kernel: which features exist, which objects load
 *   verify_realtime_run   the real-time CPUs (<state-dir>/rt-owners.json or a
 *                         list) watched with the real-time monitor: an rtreport
 *
 * The checks attach their own BPF objects (own maps): they work beside a
 * running driver and without one, and never change what it enforces (audit
 * only). The caller renders the results (report_text, report_json, rtreport)
 * and turns them into an exit status (VERIFY_EXIT_*).
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "host/cgroup.h"
#include "lib/cleanup.h"
#include "pinning/rtreport.h"

struct bpfmon_probe;
struct errbuf;
struct json_object;
struct verify_owners;
struct verify_report;

/* bpf-verify's exit status: clean, violations found, could not check. */
#define VERIFY_EXIT_CLEAN 0
#define VERIFY_EXIT_VIOLATION 1
#define VERIFY_EXIT_CANNOT 2

#define VERIFY_DURATION_MAX 86400.0

struct verify_check_opts {
	double duration;	       /* seconds to watch */
	const char *state_dir;	       /* owners from <state_dir>/owners.json ... */
	const char *const *exclusive;  /* ... or from these CPUS=CGROUP flags */
	int nexclusive;
	const char *scope;	       /* only tasks under this cgroup count; NULL: all */
	bool strict_kthreads;	       /* kernel threads on exclusive CPUs are violations */
};

/* A check that ran: the report borrows owners and source. */
struct verify_check {
	struct verify_owners *owners;
	struct verify_report *report;
	char source[PATH_MAX + 32]; /* where the owners came from */
};

/* Loads the owners, keeps this process off their CPUs, watches them for
 * o->duration seconds (SIGINT/SIGTERM end the window early, noted in the
 * report) and scans /proc. Returns 0 and a new check in *ret, or -errno with
 * the reason in eb. Caller frees with verify_check_free(). */
int verify_check_run(const struct verify_check_opts *o, struct verify_check **ret,
		     struct errbuf *eb);
struct verify_check *verify_check_free(struct verify_check *c);
DEFINE_FREEP(verify_check, verify_check_free)

/* The kernel's BPF support, as the driver would find it. */
struct verify_probe {
	struct bpfmon_probe *probe;
	enum cgroup_hier mode; /* the cgroup hierarchy the driver would check */
	char kernel[65];       /* uname release */
	bool ok;	       /* the pinning check loads and attaches */
};

/* Returns 0 and a new probe in *ret whatever loaded, or -errno with eb.
 * Caller frees with verify_probe_free(). */
int verify_probe_run(struct verify_probe **ret, struct errbuf *eb);
struct verify_probe *verify_probe_free(struct verify_probe *p);
DEFINE_FREEP(verify_probe, verify_probe_free)
/* The probe as a new JSON object (verdict, exitCode, kernel, cgroupMode,
 * features, objects): 0 and *ret, or -ENOMEM. */
int verify_probe_json(const struct verify_probe *p, struct json_object **ret);
/* The probe as text for a person: features, objects (the verifier log of a
 * failed one) and a verdict line. */
void verify_probe_print(const struct verify_probe *p, FILE *f);
/* Why the pinning check does not load (p->ok false), in words an SRE can act
 * on. Borrowed. */
const char *verify_probe_why(const struct verify_probe *p);

struct verify_realtime_opts {
	double duration;       /* seconds to watch */
	const char *state_dir; /* owners from <state_dir>/rt-owners.json ... */
	const char *rt_cpus;   /* ... or these CPUs, every task on them unowned */
};

/* A real-time window that ran: the report borrows the owners. */
struct verify_realtime {
	struct rt_owners owners;
	struct rtreport report;
};

/* Watches the real-time CPUs for o->duration seconds and judges every
 * deadline task. Returns 0 and a new result in *ret, or -errno with eb.
 * Caller frees with verify_realtime_free(). */
int verify_realtime_run(const struct verify_realtime_opts *o, struct verify_realtime **ret,
			struct errbuf *eb);
struct verify_realtime *verify_realtime_free(struct verify_realtime *v);
DEFINE_FREEP(verify_realtime, verify_realtime_free)
