/* cgroup: the path rules (tables), the hierarchies of the recorded mountinfo
 * files, placing directories, runtime cgroupsPaths, and id <-> path both on
 * a fake tree (tmpfs: the walk) and on the real cgroupfs (root only: file
 * handles), which is skipped with its reason where it cannot run; the CFS
 * quota dropped on the real cgroupfs, v1 here, v2 in tools/vm.sh. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/cgroup.h"
#include "lib/cleanup.h"
#include "testfilter.h"
#include "testutil.h"

#define DATA "test/data/procfs"


/* ---- paths ---------------------------------------------------------------------------- */

static void test_cgroup_path_is_under_compares_components(void **st)
{
	static const struct {
		const char *path, *dir;
		bool under;
	} cases[] = {
		{ "/a/b", "/a", true },
		{ "/a", "/a", true },
		{ "/a/b", "/a/", true },   /* a trailing slash on dir does not count */
		{ "/a//b", "/a/b", true }, /* nor a doubled one */
		{ "/a/b/", "//a", true },
		{ "/ab", "/a", false }, /* a prefix of the name is not a parent */
		{ "/a", "/ab", false },
		{ "/a", "/a/b", false },
		{ "/", "/", true },
		{ "/x", "/", true },
		{ "x", "/", false }, /* not absolute: under nothing */
		{ "", "/", false },
		{ "/a", "", false },
		{ "/a", "a", false },
		{ "/../x", "/", false }, /* outside our cgroup namespace */
		{ "/a/../b", "/a", false },
		{ "/a/./b", "/a", false },
		{ "/a/b", "/a/..", false },
		{ "/a/...", "/a", true }, /* only "." and ".." are special */
		{ "/kubepods/pod1/c1", "/kubepods/pod1", true },
		{ "/kubepods/pod10", "/kubepods/pod1", false },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (cgroup_path_is_under(cases[i].path, cases[i].dir) != cases[i].under)
			fail_msg("\"%s\" under \"%s\": want %s", cases[i].path, cases[i].dir,
				 cases[i].under ? "yes" : "no");
}

static void test_cgroup_path_depth_counts_components(void **st)
{
	static const struct {
		const char *path;
		int depth;
	} cases[] = {
		{ "/", 0 },	 { "//", 0 },	    { "/a", 1 },      { "/a/", 1 },
		{ "/a//b/", 2 }, { "a", -EINVAL },  { "", -EINVAL },  { "/a/..", -EINVAL },
		{ "/./a", -EINVAL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (cgroup_path_depth(cases[i].path) != cases[i].depth)
			fail_msg("\"%s\": depth %d, want %d", cases[i].path,
				 cgroup_path_depth(cases[i].path), cases[i].depth);
}

static void test_cgroup_path_normalize_drops_extra_slashes(void **st)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "/", "/" },	  { "//", "/" },	 { "/a/", "/a" },	  { "/a//b///", "/a/b" },
		{ "///a", "/a" }, { "/a/./b", "/a/./b" }, /* the file system resolves dots */
	};
	char *out;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(cgroup_path_normalize(cases[i].in, strlen(cases[i].in), &out), 0);
		if (strcmp(out, cases[i].out))
			fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].in, out, cases[i].out);
		free(out);
	}
	assert_int_equal(cgroup_path_normalize("a/b", 3, &out), -EINVAL);
	assert_int_equal(cgroup_path_normalize("", 0, &out), -EINVAL);
	assert_int_equal(cgroup_path_normalize("/a\0b", 4, &out), -EINVAL);
	/* The length bounds, not a NUL. */
	assert_int_equal(cgroup_path_normalize("/ab/", 2, &out), 0);
	assert_string_equal(out, "/a");
	free(out);
}

/* ---- mounts --------------------------------------------------------------------------- */

static void test_cgroup_mounts_tell_the_layout(void **st)
{
	static const struct {
		const char *file;
		enum cgroup_layout layout;
		enum cgroup_hier pinning;
		const char *v2, *v1, *v1_root, *cpu;
	} cases[] = {
		{ "mountinfo-hybrid", CGROUP_LAYOUT_HYBRID, CGROUP_V1, "/sys/fs/cgroup/unified",
		  "/sys/fs/cgroup/cpu\\set", "/kubepods", "/sys/fs/cgroup/cpu acct" },
		{ "mountinfo-legacy", CGROUP_LAYOUT_LEGACY, CGROUP_V1, NULL, "/sys/fs/cgroup/cpuset",
		  "/", "/sys/fs/cgroup/cpu,cpuacct" },
		{ "mountinfo-v2only", CGROUP_LAYOUT_UNIFIED, CGROUP_V2, "/sys/fs/cgroup", NULL, NULL,
		  NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char path[PATH_MAX];
		size_t len;
		_cleanup_free_ char *buf = NULL;
		struct cgroup_mounts m;
		enum cgroup_hier h;

		snprintf(path, sizeof(path), DATA "/%s", cases[i].file);
		buf = testutil_slurp(path, &len);
		assert_int_equal(cgroup_mounts_parse(buf, len, &m), 0);
		assert_int_equal(cgroup_mounts_layout(&m), cases[i].layout);
		assert_int_equal(cgroup_mounts_pinning(&m, &h), 0);
		assert_int_equal(h, cases[i].pinning);
		if (cases[i].v2)
			assert_string_equal(m.h[CGROUP_V2].point, cases[i].v2);
		else
			assert_null(m.h[CGROUP_V2].point);
		if (cases[i].v1) {
			assert_string_equal(m.h[CGROUP_V1].point, cases[i].v1);
			assert_string_equal(m.h[CGROUP_V1].root, cases[i].v1_root);
		} else {
			assert_null(m.h[CGROUP_V1].point);
		}
		/* The cpu controller's v1 hierarchy (cpuacct alone is not it). */
		if (cases[i].cpu)
			assert_string_equal(m.cpu_v1.point, cases[i].cpu);
		else
			assert_null(m.cpu_v1.point);
		cgroup_mounts_done(&m);
	}
}

static void test_cgroup_parent_path_expands_a_pod_slice(void **st)
{
	char buf[256];

	assert_int_equal(cgroup_parent_path("kubepods-burstable-pod1.slice", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/kubepods.slice/kubepods-burstable.slice/"
				 "kubepods-burstable-pod1.slice");
	assert_int_equal(cgroup_parent_path("/kubepods/pod1", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/kubepods/pod1");
	assert_int_equal(cgroup_parent_path("", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cgroup_parent_path("kubepods/pod1", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cgroup_parent_path("/kubepods/../etc", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cgroup_parent_path("a:b:c.slice", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cgroup_parent_path("kubepods-a-b-c.slice", buf, 20), -ENAMETOOLONG);
}

static void test_cgroup_mounts_without_cgroups(void **st)
{
	static const char none[] = "26 1 8:1 / / rw - ext4 /dev/vda1 rw\n";
	struct cgroup_mounts m;
	enum cgroup_hier h = CGROUP_V1;

	assert_int_equal(cgroup_mounts_parse(none, sizeof(none) - 1, &m), 0);
	assert_int_equal(cgroup_mounts_layout(&m), CGROUP_LAYOUT_NONE);
	assert_int_equal(cgroup_mounts_pinning(&m, &h), -ENOENT);
	assert_int_equal(h, CGROUP_V1); /* untouched */
	cgroup_mounts_done(&m);
	assert_int_equal(cgroup_mounts_parse("22 1 0:21 / /x", 14, &m), -EPROTO);
}

/* This machine's own mounts parse, and the daemon's choice agrees with them. */
static void test_cgroup_mounts_read_this_node(void **st)
{
	struct cgroup_mounts m;
	enum cgroup_hier h;

	assert_int_equal(cgroup_mounts_read(&m), 0);
	if (cgroup_mounts_pinning(&m, &h) == 0)
		assert_int_equal(cgroup_pinning_hier(), h);
	else
		assert_int_equal(cgroup_pinning_hier(), CGROUP_V2);
	cgroup_mounts_done(&m);
}

static void test_cgroup_mount_dir_joins_point_and_root(void **st)
{
	struct cgroup_mount v1 = { "/sys/fs/cgroup/cpuset", "/kubepods" };
	struct cgroup_mount v2 = { "/sys/fs/cgroup/", "/" };
	struct cgroup_mount none = { NULL, NULL };
	char buf[PATH_MAX];

	assert_int_equal(cgroup_mount_dir(&v1, "/kubepods/pod1//c1/", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup/cpuset/pod1/c1");
	assert_int_equal(cgroup_mount_dir(&v1, "/kubepods", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup/cpuset");
	assert_int_equal(cgroup_mount_dir(&v1, "/system.slice", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cgroup_mount_dir(&v1, "/kubepodsX/a", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cgroup_mount_dir(&v2, "/a/b", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup/a/b");
	assert_int_equal(cgroup_mount_dir(&v2, "/", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup");
	assert_int_equal(cgroup_mount_dir(&v2, "/../a", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cgroup_mount_dir(&v2, "a", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cgroup_mount_dir(&none, "/a", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cgroup_mount_dir(&v2, "/abcdefgh", buf, 20), -ENAMETOOLONG);
}

static void test_cgroup_of_task_reads_the_right_line(void **st)
{
	size_t len;
	_cleanup_free_ char *buf = testutil_slurp(DATA "/cgroup-hybrid", &len);
	char p[PATH_MAX];

	assert_int_equal(cgroup_of_task(buf, len, CGROUP_V1, p, sizeof(p)), 0);
	assert_string_equal(p, "/kubepods/besteffort/pod1/c1");
	assert_int_equal(cgroup_of_task(buf, len, CGROUP_V2, p, sizeof(p)), 0);
	assert_string_equal(p, "/user.slice/a:b");
}

/* ---- runtimes ------------------------------------------------------------------------- */

static void test_cgroup_runtime_path_expands_systemd_slices(void **st)
{
	static const struct {
		const char *in, *out;
		int r;
	} cases[] = {
		{ "/kubepods/besteffort/pod1/abc", "/kubepods/besteffort/pod1/abc", 0 },
		{ "kubepods-besteffort-pod1.slice:cri-containerd:abc",
		  "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/"
		  "cri-containerd-abc.scope",
		  0 },
		{ "kubepods.slice:crio:x", "/kubepods.slice/crio-x.scope", 0 },
		{ "", NULL, -ENOENT },
		{ "/kubepods/../etc", NULL, -EINVAL },
		{ "kubepods.slice:crio", NULL, -EINVAL },	    /* two fields */
		{ "kubepods.slice:crio:x:y", NULL, -EINVAL },	    /* four */
		{ "kubepods:crio:x", NULL, -EINVAL },		    /* not a slice */
		{ ".slice:crio:x", NULL, -EINVAL },		    /* no slice name */
		{ "kubepods.slice:crio:a/b", NULL, -EINVAL },	    /* a '/' */
		{ "/kubepods/./x", NULL, -EINVAL },		    /* a "." component */
		{ "/kubepods/..", NULL, -EINVAL },
		{ "kubepods.slice:crio:..", "/kubepods.slice/crio-...scope", 0 }, /* a name */
		{ "kubepods-x.slice:crio:a..b",			    /* ".." inside a name */
		  "/kubepods.slice/kubepods-x.slice/crio-a..b.scope", 0 },
		{ "kubepods.-x.slice:c:n", "/kubepods..slice/kubepods.-x.slice/c-n.scope", 0 },
	};
	char buf[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = cgroup_runtime_path(cases[i].in, buf, sizeof(buf));

		if (r != cases[i].r)
			fail_msg("\"%s\": got %d, want %d", cases[i].in, r, cases[i].r);
		if (!r && strcmp(buf, cases[i].out))
			fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].in, buf, cases[i].out);
	}
	assert_int_equal(cgroup_runtime_path(NULL, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cgroup_runtime_path("kubepods-a-b-c.slice:p:n", buf, 30), -ENAMETOOLONG);
	assert_int_equal(cgroup_runtime_path("/kubepods/pod1", buf, 8), -ENAMETOOLONG);
}

/* ---- a fake tree ---------------------------------------------------------------------- */

struct tree {
	char dir[PATH_MAX];
	char mountinfo[3 * PATH_MAX];
};

static void path_of(const struct tree *t, const char *rel, char *buf)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", t->dir, rel);

	assert_true(n > 0 && n < PATH_MAX);
}

static void mk(const struct tree *t, const char *rel)
{
	char p[PATH_MAX];

	path_of(t, rel, p);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* <tmp>/v2/{k,k/A,k/A/c,k/B} as a cgroup2 mount, <tmp>/v2/k/v1/{A} as the
 * cpuset v1 mount rooted at /kubepods (below the v2 one: the deeper mount
 * wins), <tmp>/plain outside both, <tmp>/link -> v2/k/A. On /dev/shm: tmpfs
 * keeps readdir's d_ino equal to the inode, which the walk relies on. */
static int tree_setup(void **st)
{
	struct tree *t = calloc(1, sizeof(*t));
	char p[PATH_MAX], target[PATH_MAX];
	int fd;

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "%s/cgroup-test.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	static const char *const dirs[] = { "v2", "v2/k", "v2/k/A", "v2/k/A/c", "v2/k/B",
					    "v2/k/v1", "v2/k/v1/A", "plain" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		mk(t, dirs[i]);
	path_of(t, "link", p);
	path_of(t, "v2/k/A", target);
	assert_int_equal(symlink(target, p), 0);
	path_of(t, "v2/k/file", p);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(t->mountinfo, sizeof(t->mountinfo),
		 "25 1 0:22 / /proc rw - proc proc rw\n"
		 "30 1 0:26 / %s/v2 rw,nosuid - cgroup2 cgroup2 rw\n"
		 "31 1 0:27 /kubepods %s/v2/k/v1 rw shared:9 - cgroup cgroup rw,cpu,cpuset\n",
		 t->dir, t->dir);
	*st = t;
	return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int tree_teardown(void **st)
{
	struct tree *t = *st;

	(void)nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

static void test_cgroup_place_finds_hierarchy_path_and_id(void **st)
{
	struct tree *t = *st;
	static const struct {
		const char *rel;
		int r;
		enum cgroup_hier h;
		const char *path;
	} cases[] = {
		{ "v2/k/A/", 0, CGROUP_V2, "/k/A" },
		{ "v2/k/A/c/../../B", 0, CGROUP_V2, "/k/B" }, /* dots resolved */
		{ "link", 0, CGROUP_V2, "/k/A" },	      /* and symlinks */
		{ "v2", 0, CGROUP_V2, "/" },
		{ "v2/k/v1/A", 0, CGROUP_V1, "/kubepods/A" }, /* joined with the mount's root */
		{ "v2/k/v1", 0, CGROUP_V1, "/kubepods" },
		{ "v2/k/gone", -ENOENT, 0, NULL },
		{ "v2/k/file", -ENOTDIR, 0, NULL },
		{ "plain", -EINVAL, 0, NULL },
	};
	struct cgroup_mounts m;

	assert_int_equal(cgroup_mounts_parse(t->mountinfo, strlen(t->mountinfo), &m), 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char dir[PATH_MAX];
		enum cgroup_hier h = CGROUP_HIER_MAX;
		char *path = NULL;
		uint64_t id = 0, want;
		int r;

		path_of(t, cases[i].rel, dir);
		r = cgroup_place(&m, dir, &h, &path, &id);
		if (r != cases[i].r)
			fail_msg("%s: got %d, want %d", cases[i].rel, r, cases[i].r);
		if (r < 0) {
			assert_null(path);
			continue;
		}
		assert_int_equal(h, cases[i].h);
		if (strcmp(path, cases[i].path))
			fail_msg("%s: path %s, want %s", cases[i].rel, path, cases[i].path);
		assert_int_equal(cgroup_id(dir, &want), 0);
		assert_int_equal(id, want);
		free(path);
	}
	cgroup_mounts_done(&m);
}

static void test_cgroup_hierarchy_maps_ids_and_paths_by_walking(void **st)
{
	struct tree *t = *st;
	_cleanup_(cgroup_hierarchy_freep) struct cgroup_hierarchy *h = NULL;
	char dir[PATH_MAX], mount[PATH_MAX];
	uint64_t id, want;
	const char *p;

	path_of(t, "v2/", mount);
	assert_int_equal(cgroup_hierarchy_new(CGROUP_V2, mount, "/", &h), 0);
	path_of(t, "v2", dir);
	assert_string_equal(cgroup_hierarchy_point(h), dir);
	assert_int_equal(cgroup_hierarchy_which(h), CGROUP_V2);

	path_of(t, "v2/k/A/c", dir);
	assert_int_equal(cgroup_id(dir, &want), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/A//c/", &id), 0);
	assert_int_equal(id, want);
	p = cgroup_hierarchy_path(h, want);
	assert_non_null(p);
	assert_string_equal(p, "/k/A/c");
	assert_int_equal(cgroup_hierarchy_id(h, "/", &id), 0);
	assert_string_equal(cgroup_hierarchy_path(h, id), "/");

	assert_int_equal(cgroup_hierarchy_id(h, "/k/none", &id), -ENOENT);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/file", &id), -ENOTDIR);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/../k", &id), -EINVAL);
	assert_null(cgroup_hierarchy_path(h, 0));
	assert_null(cgroup_hierarchy_path(h, 1)); /* no such directory */

	/* A directory reached through no link of the mount is not ours. */
	path_of(t, "plain", dir);
	assert_int_equal(cgroup_id(dir, &id), 0);
	assert_null(cgroup_hierarchy_path(h, id));
}

static void test_cgroup_hierarchy_joins_the_mount_root(void **st)
{
	struct tree *t = *st;
	_cleanup_(cgroup_hierarchy_freep) struct cgroup_hierarchy *h = NULL;
	struct cgroup_mounts m;
	char dir[PATH_MAX];
	uint64_t id, want;

	assert_int_equal(cgroup_mounts_parse(t->mountinfo, strlen(t->mountinfo), &m), 0);
	/* The mount point given: its root still comes from mountinfo. */
	path_of(t, "v2/k/v1/", dir);
	assert_int_equal(cgroup_hierarchy_open(&m, CGROUP_V1, dir, &h), 0);
	path_of(t, "v2/k/v1/A", dir);
	assert_int_equal(cgroup_id(dir, &want), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/kubepods/A", &id), 0);
	assert_int_equal(id, want);
	assert_string_equal(cgroup_hierarchy_path(h, want), "/kubepods/A");
	/* Outside the root: not visible through this mount. */
	assert_int_equal(cgroup_hierarchy_id(h, "/A", &id), -ENOENT);
	h = cgroup_hierarchy_free(h);

	/* Another directory as mount point: nothing says its root, "/". */
	path_of(t, "v2/k", dir);
	assert_int_equal(cgroup_hierarchy_open(&m, CGROUP_V1, dir, &h), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/A", &id), 0);
	h = cgroup_hierarchy_free(h);

	assert_int_equal(cgroup_hierarchy_open(&m, CGROUP_V2, NULL, &h), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/v1/A", &id), 0);
	assert_int_equal(id, want);
	cgroup_mounts_done(&m);
	memset(&m, 0, sizeof(m));
	assert_int_equal(cgroup_hierarchy_open(&m, CGROUP_V2, NULL, &h), -ENOENT);
	assert_int_equal(cgroup_hierarchy_new(CGROUP_V2, "relative", NULL, &h), -EINVAL);
	assert_int_equal(cgroup_hierarchy_new(CGROUP_V2, "/nonexistent-cgroup-mount", NULL, &h),
			 -ENOENT);
}

/* Answers stay valid for CGROUP_CACHE_SLOTS lookups of other ids. */
static void test_cgroup_hierarchy_cache_keeps_answers(void **st)
{
	struct tree *t = *st;
	_cleanup_(cgroup_hierarchy_freep) struct cgroup_hierarchy *h = NULL;
	char dir[PATH_MAX];
	uint64_t a, b;
	const char *pa;

	path_of(t, "v2", dir);
	assert_int_equal(cgroup_hierarchy_new(CGROUP_V2, dir, NULL, &h), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/A", &a), 0);
	assert_int_equal(cgroup_hierarchy_id(h, "/k/B", &b), 0);
	pa = cgroup_hierarchy_path(h, a);
	assert_string_equal(pa, "/k/A");
	/* The answer is the same string for as long as the header promises. */
	for (uint64_t i = 0; i < CGROUP_CACHE_SLOTS - 1; i++)
		(void)cgroup_hierarchy_path(h, 1000000 + i);
	assert_ptr_equal(cgroup_hierarchy_path(h, a), pa);
	(void)cgroup_hierarchy_path(h, b);
	assert_string_equal(cgroup_hierarchy_path(h, b), "/k/B");
}

/* ---- the real cgroupfs ---------------------------------------------------------------- */

/* Creates <mount>/dra-cpu-cgroup-test-<pid>/child in hierarchy which and
 * checks id <-> path through file handles. */
static void check_real(enum cgroup_hier which)
{
	_cleanup_(cgroup_hierarchy_freep) struct cgroup_hierarchy *h = NULL;
	struct cgroup_mounts m;
	char top[PATH_MAX], child[PATH_MAX], path[PATH_MAX];
	const char *got;
	uint64_t id, want;

	assert_int_equal(cgroup_mounts_read(&m), 0);
	if (!m.h[which].point) {
		cgroup_mounts_done(&m);
		print_message("skipped: no %s hierarchy mounted here\n", cgroup_hier_name(which));
		skip();
	}
	assert_true(snprintf(top, sizeof(top), "%s/dra-cpu-cgroup-test-%d", m.h[which].point,
			     (int)getpid()) < (int)sizeof(top));
	assert_true(snprintf(child, sizeof(child), "%s/child", top) < (int)sizeof(child));
	if (mkdir(top, 0755) < 0) {
		int e = errno;

		cgroup_mounts_done(&m);
		print_message("skipped: cannot create a cgroup in %s: %s\n",
			      cgroup_hier_name(which), strerror(e));
		skip();
	}
	assert_int_equal(mkdir(child, 0755), 0);
	assert_int_equal(cgroup_hierarchy_open(&m, which, NULL, &h), 0);
	assert_int_equal(cgroup_id(child, &want), 0);
	snprintf(path, sizeof(path), "%s%sdra-cpu-cgroup-test-%d/child",
		 m.h[which].root, strcmp(m.h[which].root, "/") ? "/" : "", (int)getpid());
	assert_int_equal(cgroup_hierarchy_id(h, path, &id), 0);
	got = cgroup_hierarchy_path(h, want);
	assert_int_equal(rmdir(child), 0);
	assert_int_equal(rmdir(top), 0);
	cgroup_mounts_done(&m);
	assert_int_equal(id, want);
	assert_non_null(got);
	assert_string_equal(got, path);
	/* Gone: a new lookup finds nothing. */
	h = cgroup_hierarchy_free(h);
	assert_int_equal(cgroup_mounts_read(&m), 0);
	assert_int_equal(cgroup_hierarchy_open(&m, which, NULL, &h), 0);
	assert_null(cgroup_hierarchy_path(h, want));
	cgroup_mounts_done(&m);
}

static void test_cgroup_hierarchy_on_cgroupfs_v2(void **st)
{
	if (geteuid() != 0) {
		print_message("skipped: needs root to create cgroups\n");
		skip();
	}
	check_real(CGROUP_V2);
}

static void test_cgroup_hierarchy_on_cgroupfs_v1_cpuset(void **st)
{
	if (geteuid() != 0) {
		print_message("skipped: needs root to create cgroups\n");
		skip();
	}
	check_real(CGROUP_V1);
}

/* ---- CFS quota on the real cgroupfs -------------------------------------------------------- */

/* The text of cgroup file dir/name (a kernel file: its size says nothing). */
static void cg_read(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX + 64];
	ssize_t n;
	int fd;

	assert_true(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, buf, size - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = 0;
}

/* nr_throttled of the cpu.stat in dir. */
static uint64_t nr_throttled(const char *dir)
{
	char text[1024], *at;

	cg_read(dir, "cpu.stat", text, sizeof(text));
	at = strstr(text, "nr_throttled ");
	assert_non_null(at);
	return strtoull(at + strlen("nr_throttled "), NULL, 10);
}

/* The test's cgroup, removed by the teardown whatever failed. */
static char quota_dir[PATH_MAX];

static int quota_teardown(void **st)
{
	(void)st;
	if (quota_dir[0])
		(void)rmdir(quota_dir);
	quota_dir[0] = 0;
	return 0;
}

/* text into the cgroup file path: 0 or -errno (the kernel says no at the write). */
static int cg_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* A child that joins dir and spins until it has had ms of CPU. */
static void burn_in(const char *dir, int ms)
{
	char procs[PATH_MAX];
	int status;
	pid_t pid;

	assert_true(snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir) < (int)sizeof(procs));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct timespec t = { 0, 0 };
		FILE *f = fopen(procs, "w");

		if (!f || fprintf(f, "0\n") < 0 || fclose(f) != 0)
			_exit(2);
		while (t.tv_sec * 1000 + t.tv_nsec / 1000000 < ms)
			(void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* cgroup_cpu_quota_drop() on the kernel's own files: a task that needs
 * 250 ms of CPU under a 20 % quota (20 of every 100 ms) spans 13 periods and
 * is throttled in at least 5 of them (the first and last are partial, and the
 * kernel hands out quota in slices); after the drop the same task is not
 * throttled once, and the quota file says "no limit". The cpu hierarchy is v1's where one is mounted
 * (this machine), else v2's, with the cpu controller enabled for the test's
 * cgroup (test/run.sh also runs this on a pure v2 kernel, tools/vm.sh). */
static void test_cgroup_quota_drop_on_cgroupfs(void **st)
{
	struct cgroup_mounts m;
	char dir[PATH_MAX], path[PATH_MAX + 64], name[64];
	const struct cgroup_mount *cpu;
	char text[64];
	uint64_t before;

	if (geteuid() != 0) {
		print_message("skipped: needs root to create cgroups\n");
		skip();
	}
	assert_int_equal(cgroup_mounts_read(&m), 0);
	cpu = m.cpu_v1.point ? &m.cpu_v1 : &m.h[CGROUP_V2];
	if (!cpu->point) {
		cgroup_mounts_done(&m);
		print_message("skipped: no cpu controller mounted here\n");
		skip();
	}
	(void)snprintf(name, sizeof(name), "/dra-cpu-quota-test-%d", (int)getpid());
	assert_int_equal(cgroup_cpu_dir(&m, name, dir, sizeof(dir)), 0);
	if (!m.cpu_v1.point) {
		/* v2: the root hands the cpu controller down, as a node's does */
		(void)snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cpu->point);
		assert_int_equal(cg_write(path, "+cpu"), 0);
	}
	assert_int_equal(mkdir(dir, 0755), 0);
	(void)snprintf(quota_dir, sizeof(quota_dir), "%s", dir);
	if (m.cpu_v1.point) {
		(void)snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		assert_int_equal(cg_write(path, "100000"), 0);
	}
	(void)snprintf(path, sizeof(path), "%s/%s", dir, m.cpu_v1.point ? "cpu.cfs_quota_us" : "cpu.max");
	assert_int_equal(cg_write(path, m.cpu_v1.point ? "20000" : "20000 100000"), 0);

	before = nr_throttled(dir);
	burn_in(dir, 250);
	assert_true(nr_throttled(dir) >= before + 5);

	assert_int_equal(cgroup_cpu_quota_drop(dir), 1);
	assert_int_equal(cgroup_cpu_quota_drop(dir), 0); /* none left */
	cg_read(dir, m.cpu_v1.point ? "cpu.cfs_quota_us" : "cpu.max", text, sizeof(text));
	assert_string_equal(text, m.cpu_v1.point ? "-1\n" : "max 100000\n");
	before = nr_throttled(dir);
	burn_in(dir, 250);
	assert_int_equal(nr_throttled(dir), before);
	cgroup_mounts_done(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_path_is_under_compares_components),
		cmocka_unit_test(test_cgroup_path_depth_counts_components),
		cmocka_unit_test(test_cgroup_path_normalize_drops_extra_slashes),
		cmocka_unit_test(test_cgroup_mounts_tell_the_layout),
		cmocka_unit_test(test_cgroup_mounts_without_cgroups),
		cmocka_unit_test(test_cgroup_mounts_read_this_node),
		cmocka_unit_test(test_cgroup_mount_dir_joins_point_and_root),
		cmocka_unit_test(test_cgroup_of_task_reads_the_right_line),
		cmocka_unit_test(test_cgroup_runtime_path_expands_systemd_slices),
		cmocka_unit_test(test_cgroup_parent_path_expands_a_pod_slice),
		cmocka_unit_test_setup_teardown(test_cgroup_place_finds_hierarchy_path_and_id,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_hierarchy_maps_ids_and_paths_by_walking,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_hierarchy_joins_the_mount_root,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_hierarchy_cache_keeps_answers,
						tree_setup, tree_teardown),
		cmocka_unit_test(test_cgroup_hierarchy_on_cgroupfs_v2),
		cmocka_unit_test(test_cgroup_hierarchy_on_cgroupfs_v1_cpuset),
		cmocka_unit_test_teardown(test_cgroup_quota_drop_on_cgroupfs, quota_teardown),
	};

	testfilter_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
