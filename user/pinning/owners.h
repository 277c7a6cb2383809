/* owners: the exclusive CPUs bpf-verify checks and the cgroup that owns
 * each, from --exclusive flags or the daemon's owners.json, placed in their
 * cgroup hierarchy; and the one question asked of them: may a task in this
 * cgroup, allowed on these CPUs, run on a CPU exclusive to someone else?
 *
 *   owners.json / --exclusive ──add──> verify_owners ──resolve(mounts)──> paths, ids
 *
 * An owner is a cgroup directory (v2, or v1 cpuset) and the CPUs exclusive to
 * it; its descendants count as the owner. A task is foreign to an exclusive
 * CPU when it is not under that CPU's owner (host/cgroup.h's path rules).
 *
 * Invariants: owners' CPU sets are pairwise disjoint, never empty, and their
 * union is exclusive; n <= VERIFY_OWNERS_MAX; cgroup strings are absolute
 * and normalised ("/a//b/" is "/a/b"), so one directory is one owner.
 * Ownership: the object owns every string it holds. Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/cgroup.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct errbuf;

#define VERIFY_OWNERS_MAX 1024	     /* owners.json entries and --exclusive flags */
#define VERIFY_STATE_MAX (1u << 20) /* owners.json bytes */
#define VERIFY_JSON_DEPTH 8
#define VERIFY_LABEL_MAX 256 /* claim, pod, container */

struct verify_owner {
	struct cpuset cpus;
	char *cgroup;	    /* absolute directory as given, extra slashes dropped */
	char *path;	    /* hierarchy path as /proc/<pid>/cgroup names it; after resolve */
	uint64_t cgroup_id; /* given by owners.json (0: absent); after resolve: the real one */
	char *claim;	    /* owners.json labels, NULL when absent; claims joined by ',' */
	char *pod, *container;
};

struct verify_owners {
	struct verify_owner *v;
	int n;
	struct cpuset exclusive;  /* the union of every owner's CPUs */
	enum cgroup_hier mode;	  /* after resolve */
	char *mount;		  /* that hierarchy's mount point, after resolve */
	/* --scope: only tasks under this cgroup can be violations; NULL = all. */
	char *scope;	  /* absolute directory as given */
	char *scope_path; /* its hierarchy path, after resolve */
};

/* Caller frees with verify_owners_free(). -ENOMEM. */
int verify_owners_new(struct verify_owners **ret);
struct verify_owners *verify_owners_free(struct verify_owners *o);
DEFINE_FREEP(verify_owners, verify_owners_free)

/* Adds one --exclusive CPUS=CGROUP_PATH. -EINVAL with the reason in eb
 * for bad syntax, an empty CPU list, a relative path, or CPUs already
 * exclusive to another cgroup; -E2BIG over VERIFY_OWNERS_MAX. The same
 * cgroup given twice gets the union of its CPUs. o is unchanged on error. */
int verify_owners_add_flag(struct verify_owners *o, const char *arg, struct errbuf *eb);
/* Restricts the check to tasks under the cgroup directory path (absolute):
 * the others are counted apart, like kernel threads. -EINVAL with eb. */
int verify_owners_set_scope(struct verify_owners *o, const char *path, struct errbuf *eb);
/* Adds the owners of an owners.json document (nri/pools.h,
 * POOLS_OWNERS_FILE), len bytes, not necessarily NUL-terminated: one entry
 * per claim, so one cgroup may appear several times. Unknown keys are
 * ignored. -EPROTO with eb for malformed JSON or a field of the wrong
 * type, -EINVAL/-E2BIG as verify_owners_add_flag(); entries before the bad
 * one may have been added. */
int verify_owners_add_json(struct verify_owners *o, const char *buf, size_t len, struct errbuf *eb);
/* Places every owner (and the scope) in its hierarchy, from the node's
 * cgroup mounts and the real directories (cgroup_place()): sets path,
 * cgroup_id, mode, mount and scope_path. -ENOENT: a cgroup does not exist;
 * -ENOTDIR; -EINVAL: not under the cgroup2 or cpuset v1 mount, owners in
 * both, one cgroup named twice; -ESTALE: owners.json's cgroupId is not the
 * directory's (recreated). */
int verify_owners_resolve(struct verify_owners *o, const struct cgroup_mounts *mounts, struct errbuf *eb);
/* Every exclusive CPU is in possible (-EINVAL with eb otherwise). */
int verify_owners_check_cpus(const struct verify_owners *o, const struct cpuset *possible,
			     struct errbuf *eb);
/* Index of the owner of cpu, or -1. */
int verify_owner_of(const struct verify_owners *o, int cpu);

enum verify_class {
	VERIFY_FINE = 0,       /* no foreign exclusive CPU allowed */
	VERIFY_UNCONFINED = 1, /* some allowed CPUs are foreign exclusive ones */
	VERIFY_PINNED = 2,     /* all of them are: a violation */
};

/* Where a task in cgroup path (a hierarchy path) allowed on allowed may run.
 * ret_foreign (may be NULL) gets the foreign exclusive CPUs it may run on. */
enum verify_class verify_classify(const struct verify_owners *o, const char *path,
				  const struct cpuset *allowed, struct cpuset *ret_foreign);
