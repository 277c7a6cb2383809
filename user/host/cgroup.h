/* cgroup: which cgroup a directory or a task is, what its path is, in which
 * hierarchy, and whether one cgroup is under another; cgroup v1 and v2.
 *
 * Hierarchies. The one that confines CPUs is what we watch: the unified
 * hierarchy (CGROUP_V2, a "cgroup2" mount) or, on v1 and hybrid nodes, the v1
 * hierarchy that holds the cpuset controller (CGROUP_V1). The node's layout:
 *
 *   unified  cgroup2 only (/sys/fs/cgroup)                        -> v2
 *   legacy   v1 hierarchies only (/sys/fs/cgroup/<controller>)    -> v1 cpuset
 *   hybrid   both: systemd's v1 controllers plus a cgroup2 at
 *            .../unified without controllers                      -> v1 cpuset
 *
 * Three names for one cgroup:
 *   - its directory: an absolute path in our mount namespace
 *     ("/sys/fs/cgroup/kubepods.slice/x");
 *   - its hierarchy path: as /proc/<pid>/cgroup and container runtimes name
 *     it ("/kubepods.slice/x"; "/" is the root);
 *   - its id: the kernfs node id the BPF side reads, which is the inode
 *     number of its directory. Ids are never reused while the kernel runs.
 * A mount shows the hierarchy from its root (mountinfo's 4th field): the
 * directory <point>/x is the hierarchy path <root>/x.
 *
 * Hierarchy paths are compared component by component: doubled and trailing
 * slashes do not count ("/a//b/" is "/a/b"), "/a" is not under "/ab", every
 * absolute path is under "/". A path that is not absolute, or holds a "." or
 * ".." component (a task outside our cgroup namespace shows "/../x"), is
 * under nothing, not even "/".
 *
 * Ownership: struct cgroup_mounts owns its strings (cgroup_mounts_done()); a
 * struct cgroup_hierarchy owns its fd and its id -> path cache. Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

enum cgroup_hier {
	CGROUP_V2 = 0, /* the unified hierarchy */
	CGROUP_V1 = 1, /* the v1 hierarchy with the cpuset controller */
	CGROUP_HIER_MAX = 2,
};

enum cgroup_layout {
	CGROUP_LAYOUT_NONE = 0, /* no cgroup mounted */
	CGROUP_LAYOUT_UNIFIED,
	CGROUP_LAYOUT_LEGACY,
	CGROUP_LAYOUT_HYBRID,
};

/* "v2", "v1-cpuset". */
const char *cgroup_hier_name(enum cgroup_hier h);
/* "none", "unified", "legacy", "hybrid". */
const char *cgroup_layout_name(enum cgroup_layout l);

/* ---- paths ---------------------------------------------------------------------------- */

/* path is dir or below it (see the top for the rules). */
bool cgroup_path_is_under(const char *path, const char *dir);
/* Components of an absolute path: "/" 0, "/a//b/" 2. -EINVAL when path is
 * not absolute or holds "." or "..". */
int cgroup_path_depth(const char *path);
/* The len bytes at path, absolute, with doubled and trailing slashes
 * dropped, as a new string (caller frees). -EINVAL when not absolute or
 * holding a NUL, -ENOMEM. Dots are kept: directories are resolved by the
 * file system, not by us. */
int cgroup_path_normalize(const char *path, size_t len, char **ret);

/* ---- mounts --------------------------------------------------------------------------- */

struct cgroup_mount {
	char *point; /* mount point, NULL when this hierarchy is not mounted */
	char *root;  /* the hierarchy path mounted there */
};

struct cgroup_mounts {
	struct cgroup_mount h[CGROUP_HIER_MAX]; /* the first mount of each */
	struct cgroup_mount cpu_v1;		/* the v1 hierarchy with the cpu controller */
	bool v1;				/* some v1 hierarchy is mounted */
};

/* The cgroup mounts in the text of a mountinfo file. -EPROTO for a malformed
 * line, -ENOMEM; *ret is written only on success. */
int cgroup_mounts_parse(const char *mountinfo, size_t len, struct cgroup_mounts *ret);
/* Same from /proc/self/mountinfo. */
int cgroup_mounts_read(struct cgroup_mounts *ret);
void cgroup_mounts_done(struct cgroup_mounts *m);
enum cgroup_layout cgroup_mounts_layout(const struct cgroup_mounts *m);
/* The hierarchy that confines CPUs: v1 cpuset where it is mounted (legacy,
 * hybrid), else v2. -ENOENT when neither is mounted. */
int cgroup_mounts_pinning(const struct cgroup_mounts *m, enum cgroup_hier *ret);
/* The same for this node (/proc/self/mountinfo); v2 when that cannot be
 * read or names neither, the kernel's default. */
enum cgroup_hier cgroup_pinning_hier(void);

/* The directory of hierarchy path (absolute) under mount m, into buf.
 * -ENOENT when m is not mounted or path is not below its root (not visible
 * through it), -EINVAL for a path under nothing, -ENAMETOOLONG. */
int cgroup_mount_dir(const struct cgroup_mount *m, const char *path, char *buf, size_t size);

/* Where directory dir sits: the hierarchy (the deepest mount holding it, so
 * a cgroup2 below a v1 tmpfs is v2), its hierarchy path (new string, caller
 * frees) and its id. Symlinks and dots in dir are resolved first. -ENOENT:
 * dir does not exist; -ENOTDIR; -EINVAL: not under the cgroup2 mount nor
 * the v1 cpuset one. Outputs are written only on success. */
int cgroup_place(const struct cgroup_mounts *m, const char *dir, enum cgroup_hier *ret_hier,
		 char **ret_path, uint64_t *ret_id);

/* ---- ids ------------------------------------------------------------------------------ */

/* The id of the cgroup directory dir (absolute path). -ENOTDIR, -errno. */
int cgroup_id(const char *dir, uint64_t *ret);

/* The cgroup of a task, from the text of its /proc/<pid>/cgroup: its
 * hierarchy path in hierarchy h, into path (size bytes). As
 * procfs_cgroup_parse(): -ENOENT, -EPROTO, -E2BIG. */
int cgroup_of_task(const char *buf, size_t len, enum cgroup_hier h, char *path, size_t size);

/* ---- container runtimes ----------------------------------------------------------------- */

/* A runtime's cgroupsPath as a hierarchy path: cgroupfs "/kubepods/pod1/c1"
 * as is; systemd "<slice>:<prefix>:<name>" as the slice's ancestry and the
 * scope ("kubepods-besteffort-pod1.slice:cri-containerd:abc" ->
 * "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/
 * cri-containerd-abc.scope"). -ENOENT for an empty one, -EINVAL for a
 * malformed one or one with a "." or ".." component, -ENAMETOOLONG. */
int cgroup_runtime_path(const char *cgroups_path, char *buf, size_t size);

/* A pod's cgroup parent (NRI's PodSandbox linux.cgroup_parent) as a
 * hierarchy path: cgroupfs "/kubepods/burstable/pod1" as is; a systemd slice
 * "kubepods-burstable-pod1.slice" as its ancestry
 * ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice").
 * Errors as cgroup_runtime_path(). */
int cgroup_parent_path(const char *parent, char *buf, size_t size);

/* ---- CFS quota ---------------------------------------------------------------------------- */

/* The directory of hierarchy path in the hierarchy that holds the cpu
 * controller: v1 "cpu" where one is mounted, else v2. As cgroup_mount_dir(). */
int cgroup_cpu_dir(const struct cgroup_mounts *m, const char *path, char *buf, size_t size);

/* Removes the CFS bandwidth limit of the cgroup at directory dir, keeping
 * its period: cpu.max "max" (v2) or cpu.cfs_quota_us -1 (v1). 1 when it had
 * a limit, 0 when it had none, -ENOENT when dir has neither file (no cpu
 * controller there), -EPROTO for a file we cannot read, -errno of the write. */
int cgroup_cpu_quota_drop(const char *dir);

/* ---- an open hierarchy ------------------------------------------------------------------ */

/* A hierarchy opened at its mount point, answering id <-> path. */
struct cgroup_hierarchy;

/* How many id -> path answers stay valid (see cgroup_hierarchy_path()). */
#define CGROUP_CACHE_SLOTS 64

/* Opens hierarchy which as mounted at point with root (mountinfo's 4th
 * field; NULL = "/"). -errno from open(), -ENOMEM. Caller frees with
 * cgroup_hierarchy_free(). */
int cgroup_hierarchy_new(enum cgroup_hier which, const char *point, const char *root,
			 struct cgroup_hierarchy **ret);
/* Opens which as m has it mounted, or at point when point is not NULL (the
 * root then from m if m has a mount there, else "/"). -ENOENT when which is
 * not mounted. */
int cgroup_hierarchy_open(const struct cgroup_mounts *m, enum cgroup_hier which,
			  const char *point, struct cgroup_hierarchy **ret);
struct cgroup_hierarchy *cgroup_hierarchy_free(struct cgroup_hierarchy *h);
DEFINE_FREEP(cgroup_hierarchy, cgroup_hierarchy_free)

enum cgroup_hier cgroup_hierarchy_which(const struct cgroup_hierarchy *h);
/* The mount point, without a trailing '/'. Borrowed. */
const char *cgroup_hierarchy_point(const struct cgroup_hierarchy *h);

/* The id of the cgroup at hierarchy path. -ENOENT (no such cgroup, or not
 * visible through our mount), -ENOTDIR, -EINVAL for a path under nothing. */
int cgroup_hierarchy_id(const struct cgroup_hierarchy *h, const char *path, uint64_t *ret);
/* The hierarchy path of cgroup id, or NULL when it is gone or not visible
 * through our mount. On cgroupfs a file handle finds it at once; elsewhere
 * (and where the kernel exports no handles) a walk of the tree does. Cached
 * by id; the string is borrowed until CGROUP_CACHE_SLOTS further lookups of
 * other ids. */
const char *cgroup_hierarchy_path(struct cgroup_hierarchy *h, uint64_t id);
