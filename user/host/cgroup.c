/* cgroup: one answer to "which cgroup, where, in which hierarchy, under
 * which other". See cgroup.h for the three names of a cgroup and the path
 * rules.
 *
 * Invariants of an open hierarchy: fd is the mount point's directory, point
 * has no trailing '/' (readlink() output is compared against it), cache[]
 * holds at most one entry per id (id 0 = free slot; path NULL = known gone).
 */
#include "host/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "host/procfs.h"
#include "lib/buf.h"
#include "lib/fileio.h"

#define FILEID_KERNFS 0xfe /* include/linux/exportfs.h: a kernfs node id */
#define WALK_DEPTH 32	   /* cgroup trees are shallow; a deeper one is not walked */
#define MOUNTINFO_MAX (16u << 20)

const char *cgroup_hier_name(enum cgroup_hier h)
{
	return h == CGROUP_V1 ? "v1-cpuset" : "v2";
}

const char *cgroup_layout_name(enum cgroup_layout l)
{
	switch (l) {
	case CGROUP_LAYOUT_NONE:
		return "none";
	case CGROUP_LAYOUT_UNIFIED:
		return "unified";
	case CGROUP_LAYOUT_LEGACY:
		return "legacy";
	case CGROUP_LAYOUT_HYBRID:
		return "hybrid";
	}
	return "unknown";
}

/* ---- paths ---------------------------------------------------------------------------- */

/* The next component of *p (skipping slashes): its start and length, 0 at
 * the end. */
static size_t next_comp(const char **p, const char **ret)
{
	const char *s = *p;
	size_t n = 0;

	while (*s == '/')
		s++;
	while (s[n] && s[n] != '/')
		n++;
	*ret = s;
	*p = s + n;
	return n;
}

static bool is_dot(const char *c, size_t n)
{
	return (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.');
}

int cgroup_path_depth(const char *path)
{
	const char *p = path, *c;
	size_t n;
	int d = 0;

	if (path[0] != '/')
		return -EINVAL;
	while ((n = next_comp(&p, &c))) {
		if (is_dot(c, n))
			return -EINVAL;
		d++;
	}
	return d;
}

bool cgroup_path_is_under(const char *path, const char *dir)
{
	const char *p = path, *d = dir, *pc, *dc;
	size_t pn, dn;

	if (cgroup_path_depth(path) < 0 || cgroup_path_depth(dir) < 0)
		return false;
	for (;;) {
		dn = next_comp(&d, &dc);
		if (!dn)
			return true;
		pn = next_comp(&p, &pc);
		if (pn != dn || memcmp(pc, dc, dn))
			return false;
	}
}

int cgroup_path_normalize(const char *path, size_t len, char **ret)
{
	char *s, *o;

	if (!len || path[0] != '/' || memchr(path, 0, len))
		return -EINVAL;
	s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	o = s;
	for (size_t i = 0; i < len; i++)
		if (path[i] != '/' || o == s || o[-1] != '/')
			*o++ = path[i];
	if (o > s + 1 && o[-1] == '/')
		o--;
	*o = 0;
	*ret = s;
	return 0;
}

/* head + the components of tail after its first skip ones, as a normalised
 * path into buf ("/" + "/a" = "/a", "/k" + "/" = "/k"). -ENAMETOOLONG. */
static int join(const char *head, const char *tail, int skip, char *buf, size_t size)
{
	const char *p = head, *c;
	size_t o = 0, n;

	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; (n = next_comp(&p, &c)); i++) {
			if (pass == 1 && i < skip)
				continue;
			if (o + 1 + n >= size)
				return -ENAMETOOLONG;
			buf[o++] = '/';
			memcpy(buf + o, c, n);
			o += n;
		}
		p = tail;
	}
	if (size < 2)
		return -ENAMETOOLONG;
	if (!o)
		buf[o++] = '/';
	buf[o] = 0;
	return 0;
}

/* ---- mounts --------------------------------------------------------------------------- */

void cgroup_mounts_done(struct cgroup_mounts *m)
{
	for (int i = 0; i < CGROUP_HIER_MAX; i++) {
		free(m->h[i].point);
		free(m->h[i].root);
		m->h[i] = (struct cgroup_mount){ NULL, NULL };
	}
	free(m->cpu_v1.point);
	free(m->cpu_v1.root);
	m->cpu_v1 = (struct cgroup_mount){ NULL, NULL };
}

static int mount_set(struct cgroup_mount *mnt, const struct procfs_mount *e)
{
	mnt->point = procfs_unescape(e->point);
	mnt->root = procfs_unescape(e->root);
	return mnt->point && mnt->root ? 0 : -ENOMEM;
}

int cgroup_mounts_parse(const char *mountinfo, size_t len, struct cgroup_mounts *ret)
{
	struct cgroup_mounts m;
	const char *p = mountinfo, *end = mountinfo + len;
	struct procfs_mount e;
	int r;

	memset(&m, 0, sizeof(m));
	while ((r = procfs_mountinfo_next(&p, end, &e)) > 0) {
		struct cgroup_mount *mnt;

		if (procfs_field_is(e.fstype, "cgroup2")) {
			mnt = &m.h[CGROUP_V2];
		} else if (procfs_field_is(e.fstype, "cgroup")) {
			m.v1 = true;
			/* cpu may share a mount with cpuset or cpuacct */
			if (procfs_list_has(e.super.s, e.super.len, "cpu") && !m.cpu_v1.point &&
			    (r = mount_set(&m.cpu_v1, &e)) < 0)
				break;
			if (!procfs_list_has(e.super.s, e.super.len, "cpuset"))
				continue;
			mnt = &m.h[CGROUP_V1];
		} else {
			continue;
		}
		if (mnt->point)
			continue; /* the first mount of a hierarchy is the one we use */
		r = mount_set(mnt, &e);
		if (r < 0)
			break;
	}
	if (r < 0) {
		cgroup_mounts_done(&m);
		return r;
	}
	*ret = m;
	return 0;
}

int cgroup_mounts_read(struct cgroup_mounts *ret)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(MOUNTINFO_MAX);
	int r;

	r = fileio_read_at(AT_FDCWD, "/proc/self/mountinfo", 0, &b, NULL);
	if (r < 0)
		return r;
	return cgroup_mounts_parse(buf_str(&b), buf_len(&b), ret);
}

enum cgroup_layout cgroup_mounts_layout(const struct cgroup_mounts *m)
{
	bool v2 = m->h[CGROUP_V2].point;

	if (v2 && m->v1)
		return CGROUP_LAYOUT_HYBRID;
	if (v2)
		return CGROUP_LAYOUT_UNIFIED;
	return m->v1 ? CGROUP_LAYOUT_LEGACY : CGROUP_LAYOUT_NONE;
}

int cgroup_mounts_pinning(const struct cgroup_mounts *m, enum cgroup_hier *ret)
{
	if (m->h[CGROUP_V1].point)
		*ret = CGROUP_V1;
	else if (m->h[CGROUP_V2].point)
		*ret = CGROUP_V2;
	else
		return -ENOENT;
	return 0;
}

enum cgroup_hier cgroup_pinning_hier(void)
{
	struct cgroup_mounts m;
	enum cgroup_hier h = CGROUP_V2;

	if (cgroup_mounts_read(&m) < 0)
		return h;
	(void)cgroup_mounts_pinning(&m, &h);
	cgroup_mounts_done(&m);
	return h;
}

int cgroup_mount_dir(const struct cgroup_mount *m, const char *path, char *buf, size_t size)
{
	int skip;

	if (!m->point)
		return -ENOENT;
	if (cgroup_path_depth(path) < 0)
		return -EINVAL;
	skip = cgroup_path_depth(m->root ? m->root : "/");
	if (skip < 0 || !cgroup_path_is_under(path, m->root ? m->root : "/"))
		return -ENOENT;
	return join(m->point, path, skip, buf, size);
}

int cgroup_place(const struct cgroup_mounts *m, const char *dir, enum cgroup_hier *ret_hier,
		 char **ret_path, uint64_t *ret_id)
{
	_cleanup_free_ char *real = realpath(dir, NULL);
	char path[PATH_MAX];
	int best = -1, best_depth = -1, skip = 0, r;
	struct stat st;

	if (!real)
		return -errno;
	if (stat(real, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	for (int k = 0; k < CGROUP_HIER_MAX; k++) {
		_cleanup_free_ char *point = NULL;
		int d;

		if (!m->h[k].point)
			continue;
		/* mountinfo names the mount as the kernel sees it; compare
		 * like with like. */
		point = realpath(m->h[k].point, NULL);
		if (!point && !(point = strdup(m->h[k].point)))
			return -ENOMEM;
		d = cgroup_path_depth(point);
		if (d > best_depth && cgroup_path_is_under(real, point)) {
			best = k;
			best_depth = d;
		}
	}
	if (best < 0)
		return -EINVAL;
	skip = best_depth;
	r = join(m->h[best].root ? m->h[best].root : "/", real, skip, path, sizeof(path));
	if (r < 0)
		return r;
	*ret_path = strdup(path);
	if (!*ret_path)
		return -ENOMEM;
	*ret_hier = (enum cgroup_hier)best;
	*ret_id = (uint64_t)st.st_ino;
	return 0;
}

/* ---- ids ------------------------------------------------------------------------------ */

int cgroup_id(const char *dir, uint64_t *ret)
{
	struct stat st;

	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ret = (uint64_t)st.st_ino;
	return 0;
}

int cgroup_of_task(const char *buf, size_t len, enum cgroup_hier h, char *path, size_t size)
{
	return procfs_cgroup_parse(buf, len, h == CGROUP_V1 ? "cpuset" : NULL, path, size);
}

/* ---- container runtimes ----------------------------------------------------------------- */

/* The ancestry of slice name[0..slen) (without ".slice") into buf: "a-b" is
 * "/a.slice/a-b.slice" (systemd.slice(5)). Returns the length written. */
static int slice_path(const char *name, size_t slen, char *buf, size_t size)
{
	size_t o = 0;
	int n;

	for (size_t i = 1; i <= slen; i++) {
		if (i < slen && name[i] != '-')
			continue;
		n = snprintf(buf + o, size - o, "/%.*s.slice", (int)i, name);
		if (n < 0 || (size_t)n >= size - o)
			return -ENAMETOOLONG;
		o += (size_t)n;
	}
	return (int)o;
}

/* The runtime's cgroupsPath as a hierarchy path into buf, not checked. */
static int runtime_path(const char *path, char *buf, size_t size)
{
	const char *c1, *c2;
	size_t o, slen;
	int n;

	if (path[0] == '/') { /* cgroupfs driver: a hierarchy path already */
		n = snprintf(buf, size, "%s", path);
		return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
	}
	/* systemd driver: "<slice>:<prefix>:<name>" -> the slice's ancestry, then
	 * "<prefix>-<name>.scope". "kubepods-besteffort-pod1.slice" lives in
	 * kubepods.slice/kubepods-besteffort.slice/ (systemd.slice(5)). */
	c1 = strchr(path, ':');
	c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!c1 || !c2 || strchr(c2 + 1, ':') || strchr(path, '/') || c1 == path ||
	    (size_t)(c1 - path) < 7 || strncmp(c1 - 6, ".slice", 6) != 0)
		return -EINVAL;
	slen = (size_t)(c1 - 6 - path); /* the slice name without ".slice" */
	n = slice_path(path, slen, buf, size);
	if (n < 0)
		return n;
	o = (size_t)n;
	n = snprintf(buf + o, size - o, "/%.*s-%s.scope", (int)(c2 - c1 - 1), c1 + 1, c2 + 1);
	return n < 0 || (size_t)n >= size - o ? -ENAMETOOLONG : 0;
}

int cgroup_runtime_path(const char *cgroups_path, char *buf, size_t size)
{
	int r;

	if (!cgroups_path || !*cgroups_path)
		return -ENOENT;
	r = runtime_path(cgroups_path, buf, size);
	/* A "." or ".." component would lead out of the container's cgroup
	 * (the runtime is a peer: its paths are input). */
	if (r == 0 && cgroup_path_depth(buf) < 0)
		r = -EINVAL;
	return r;
}

int cgroup_parent_path(const char *parent, char *buf, size_t size)
{
	size_t len;
	int r;

	if (!parent || !*parent)
		return -ENOENT;
	len = strlen(parent);
	if (parent[0] == '/') {
		r = snprintf(buf, size, "%s", parent) >= (int)size ? -ENAMETOOLONG : 0;
	} else if (len > 6 && !strcmp(parent + len - 6, ".slice") && !strchr(parent, '/') &&
		   !strchr(parent, ':')) {
		r = slice_path(parent, len - 6, buf, size);
		r = r < 0 ? r : 0;
	} else {
		r = -EINVAL;
	}
	if (r == 0 && cgroup_path_depth(buf) < 0)
		r = -EINVAL;
	return r;
}

/* ---- CFS quota ---------------------------------------------------------------------------- */

int cgroup_cpu_dir(const struct cgroup_mounts *m, const char *path, char *buf, size_t size)
{
	return cgroup_mount_dir(m->cpu_v1.point ? &m->cpu_v1 : &m->h[CGROUP_V2], path, buf, size);
}

int cgroup_cpu_quota_drop(const char *dir)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(256);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool v2;
	int r;

	if (dfd < 0)
		return -errno;
	r = fileio_read_at(dfd, "cpu.max", 0, &b, NULL);
	v2 = r >= 0;
	if (r == -ENOENT) {
		b = BUF_INIT(256); /* a failed read freed it */
		r = fileio_read_at(dfd, "cpu.cfs_quota_us", 0, &b, NULL);
	}
	if (r < 0)
		return r;
	/* v2: "<quota|max> <period>"; v1: "<quota|-1>" */
	if (v2 ? !strncmp(buf_str(&b), "max", 3) : !strncmp(buf_str(&b), "-1", 2))
		return 0;
	if (buf_len(&b) == 0 || !strchr("0123456789", buf_str(&b)[0]))
		return -EPROTO;
	r = fileio_write_value(dfd, v2 ? "cpu.max" : "cpu.cfs_quota_us", v2 ? "max" : "-1");
	return r < 0 ? r : 1;
}

/* ---- an open hierarchy ------------------------------------------------------------------ */

struct cg_entry {
	uint64_t id; /* 0 = free slot */
	char *path;  /* NULL: gone, or not visible through our mount */
};

struct cgroup_hierarchy {
	enum cgroup_hier which;
	struct cgroup_mount mnt;
	int fd;
	bool handles; /* cgroupfs: file handles are kernfs ids */
	struct cg_entry cache[CGROUP_CACHE_SLOTS];
	unsigned next;
};

struct cgroup_hierarchy *cgroup_hierarchy_free(struct cgroup_hierarchy *h)
{
	if (!h)
		return NULL;
	if (h->fd >= 0)
		(void)close(h->fd);
	free(h->mnt.point);
	free(h->mnt.root);
	for (int i = 0; i < CGROUP_CACHE_SLOTS; i++)
		free(h->cache[i].path);
	free(h);
	return NULL;
}

int cgroup_hierarchy_new(enum cgroup_hier which, const char *point, const char *root,
			 struct cgroup_hierarchy **ret)
{
	_cleanup_(cgroup_hierarchy_freep) struct cgroup_hierarchy *h = NULL;
	struct statfs sfs;
	int r;

	if (which >= CGROUP_HIER_MAX || !point || point[0] != '/' ||
	    cgroup_path_depth(root ? root : "/") < 0)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = -1;
	h->which = which;
	r = cgroup_path_normalize(point, strlen(point), &h->mnt.point);
	if (r < 0)
		return r;
	h->mnt.root = strdup(root ? root : "/");
	if (!h->mnt.root)
		return -ENOMEM;
	h->fd = open(h->mnt.point, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (h->fd < 0)
		return -errno;
	h->handles = fstatfs(h->fd, &sfs) == 0 &&
		     (sfs.f_type == CGROUP2_SUPER_MAGIC || sfs.f_type == CGROUP_SUPER_MAGIC);
	*ret = TAKE_PTR(h);
	return 0;
}

int cgroup_hierarchy_open(const struct cgroup_mounts *m, enum cgroup_hier which,
			  const char *point, struct cgroup_hierarchy **ret)
{
	const struct cgroup_mount *mnt;

	if (which >= CGROUP_HIER_MAX)
		return -EINVAL;
	mnt = &m->h[which];
	if (!point) {
		if (!mnt->point)
			return -ENOENT;
		return cgroup_hierarchy_new(which, mnt->point, mnt->root, ret);
	}
	/* A mount point given: its root is known only if it is the one m has. */
	if (mnt->point) {
		_cleanup_free_ char *a = realpath(point, NULL), *b = realpath(mnt->point, NULL);

		if (a && b && !strcmp(a, b))
			return cgroup_hierarchy_new(which, point, mnt->root, ret);
	}
	return cgroup_hierarchy_new(which, point, "/", ret);
}

enum cgroup_hier cgroup_hierarchy_which(const struct cgroup_hierarchy *h)
{
	return h->which;
}

const char *cgroup_hierarchy_point(const struct cgroup_hierarchy *h)
{
	return h->mnt.point;
}

/* The directory of hierarchy path relative to the mount point ("" for the
 * mount point itself), into buf. */
static int relative_dir(const struct cgroup_hierarchy *h, const char *path, char *buf,
			size_t size)
{
	int skip = cgroup_path_depth(h->mnt.root), r;

	if (cgroup_path_depth(path) < 0)
		return -EINVAL;
	if (!cgroup_path_is_under(path, h->mnt.root))
		return -ENOENT;
	r = join("/", path, skip, buf, size);
	if (r < 0)
		return r;
	if (!strcmp(buf, "/"))
		buf[0] = 0;
	else
		memmove(buf, buf + 1, strlen(buf)); /* openat() wants it relative */
	return 0;
}

int cgroup_hierarchy_id(const struct cgroup_hierarchy *h, const char *path, uint64_t *ret)
{
	char rel[PATH_MAX];
	struct stat st;
	int r;

	r = relative_dir(h, path, rel, sizeof(rel));
	if (r < 0)
		return r;
	if (*rel ? fstatat(h->fd, rel, &st, AT_SYMLINK_NOFOLLOW) : fstat(h->fd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	*ret = (uint64_t)st.st_ino;
	return 0;
}

/* Depth-first search for a directory whose inode is id, by readdir's d_ino
 * alone (kernfs fills it in): no stat per file. rel is dfd's path relative
 * to the mount ("/" for it). Takes dfd. A new string, or NULL. */
static char *walk_for_id(int dfd, const char *rel, uint64_t id, int depth)
{
	DIR *d;
	struct dirent *de;
	char *found = NULL;

	if (depth > WALK_DEPTH) {
		(void)close(dfd);
		return NULL;
	}
	d = fdopendir(dfd);
	if (!d) {
		(void)close(dfd);
		return NULL;
	}
	while (!found && (de = readdir(d))) {
		char sub[PATH_MAX];
		int fd;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", strcmp(rel, "/") ? rel : "", de->d_name) >=
		    (int)sizeof(sub))
			continue;
		if ((uint64_t)de->d_ino == id) {
			found = strdup(sub);
			break;
		}
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0)
			found = walk_for_id(fd, sub, id, depth + 1);
	}
	(void)closedir(d);
	return found;
}

/* The path of id relative to the mount ("/" for the mount point itself), a
 * new string, or NULL. */
static char *find_relative(const struct cgroup_hierarchy *h, uint64_t id)
{
	union {
		struct file_handle fh;
		char raw[sizeof(struct file_handle) + sizeof(uint64_t)];
	} fh;
	char link[64], target[PATH_MAX];
	struct stat st;
	size_t plen;
	ssize_t n;
	int fd;

	if (fstat(h->fd, &st) == 0 && (uint64_t)st.st_ino == id)
		return strdup("/");
	if (h->handles) {
		fh.fh.handle_bytes = sizeof(uint64_t);
		fh.fh.handle_type = FILEID_KERNFS;
		memcpy(fh.fh.f_handle, &id, sizeof(id));
		fd = open_by_handle_at(h->fd, &fh.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && (errno == ESTALE || errno == ENOENT))
			return NULL; /* gone */
		if (fd >= 0) {
			(void)snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			n = readlink(link, target, sizeof(target) - 1);
			(void)close(fd);
			if (n <= 0)
				return NULL;
			target[n] = 0;
			plen = strcmp(h->mnt.point, "/") ? strlen(h->mnt.point) : 0;
			if (strncmp(target, h->mnt.point, plen) ||
			    (target[plen] != '/' && target[plen] != 0))
				return NULL; /* outside our mount (another cgroup namespace) */
			return strdup(target[plen] ? target + plen : "/");
		}
		/* No handles here (no CAP_DAC_READ_SEARCH, or a kernel before 4.14,
		 * aa8188253474 "kernfs: add exportfs operations"): walk. */
	}
	fd = openat(h->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? NULL : walk_for_id(fd, "/", id, 0);
}

/* The hierarchy path of id, a new string, or NULL. */
static char *resolve(const struct cgroup_hierarchy *h, uint64_t id)
{
	_cleanup_free_ char *rel = find_relative(h, id);
	char path[PATH_MAX];

	if (!rel || join(h->mnt.root, rel, 0, path, sizeof(path)) < 0)
		return NULL;
	return strdup(path);
}

const char *cgroup_hierarchy_path(struct cgroup_hierarchy *h, uint64_t id)
{
	struct cg_entry *e;

	if (!id)
		return NULL;
	for (int i = 0; i < CGROUP_CACHE_SLOTS; i++)
		if (h->cache[i].id == id)
			return h->cache[i].path;
	e = &h->cache[h->next++ % CGROUP_CACHE_SLOTS];
	free(e->path);
	e->id = id;
	e->path = resolve(h, id);
	return e->path;
}
