/* Bounded reads and atomic replaces. See fileio.h. */
#include "lib/fileio.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"

/* What a non-regular file is, for the error text. */
static const char *kind_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFLNK:
		return "a symbolic link (not followed)";
	default:
		return "not a regular file";
	}
}

static int refuse(struct errbuf *eb, const char *path, mode_t mode)
{
	int r = S_ISDIR(mode) ? -EISDIR : S_ISLNK(mode) ? -ELOOP : -EINVAL;

	return errbuf_fail(eb, r, "%s: is %s, not a regular file", path, kind_of(mode));
}

/* open() failed with -r: name the file type when that is the reason. */
static int open_failed(struct errbuf *eb, int dfd, const char *path, int r)
{
	struct stat st;

	/* O_NOFOLLOW on a link gives ELOOP, a socket gives ENXIO: both say
	 * "wrong kind of file", which lstat() names better than strerror(). */
	if ((r == -ELOOP || r == -ENXIO) && fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISREG(st.st_mode))
		return refuse(eb, path, st.st_mode);
	return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
}

static int read_at(int dfd, const char *path, unsigned flags, struct buf *b, struct errbuf *eb)
{
	int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
	_cleanup_close_ int fd = -1;
	char chunk[16384];
	struct stat st;
	int r;

	if (!(flags & FILEIO_FOLLOW))
		oflags |= O_NOFOLLOW;
	fd = openat(dfd, path, oflags);
	if (fd < 0)
		return open_failed(eb, dfd, path, -errno);
	if (fstat(fd, &st) < 0)
		return errbuf_fail(eb, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return refuse(eb, path, st.st_mode);
	if ((uint64_t)st.st_size > b->max - buf_len(b))
		return errbuf_fail(eb, -E2BIG, "%s: larger than %zu bytes", path, b->max);
	r = buf_reserve(b, (size_t)st.st_size);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	/* To EOF, not to st_size: see the top. */
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errbuf_fail(eb, -errno, "%s: %s", path, strerror(errno));
		if (n == 0)
			return 0;
		r = buf_add(b, chunk, (size_t)n);
		if (r == -E2BIG)
			return errbuf_fail(eb, r, "%s: larger than %zu bytes", path, b->max);
		if (r < 0)
			return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	}
}

int fileio_read_at(int dfd, const char *path, unsigned flags, struct buf *b, struct errbuf *eb)
{
	int r = read_at(dfd, path, flags, b, eb);

	if (r < 0)
		buf_done(b);
	return r;
}

static int read_whole(const char *path, unsigned flags, size_t max, char **ret, size_t *ret_len,
		      struct errbuf *eb)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(max);
	int r = fileio_read_at(AT_FDCWD, path, flags, &b, eb);
	char *p;

	if (r < 0)
		return r;
	p = buf_take(&b, ret_len);
	if (!p)
		return errbuf_fail(eb, -ENOMEM, "%s: %s", path, strerror(ENOMEM));
	*ret = p;
	return 0;
}

int fileio_read(const char *path, size_t max, char **ret, size_t *ret_len, struct errbuf *eb)
{
	return read_whole(path, 0, max, ret, ret_len, eb);
}

int fileio_read_mounted(const char *path, size_t max, char **ret, size_t *ret_len,
			struct errbuf *eb)
{
	return read_whole(path, FILEIO_FOLLOW, max, ret, ret_len, eb);
}

int fileio_read_lines(int dfd, const char *path, unsigned flags, size_t max,
		      int (*fn)(void *ud, char *line), void *ud, struct errbuf *eb)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(max);
	char *p, *end;
	int r = fileio_read_at(dfd, path, flags, &b, eb);

	if (r < 0)
		return r;
	p = b.ptr;
	end = p ? p + b.len : p;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));

		if (nl)
			*nl = 0;
		r = fn(ud, p);
		if (r != 0)
			return r;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static int fsync_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

/* The temp name of fileio_write_atomic(): see fileio.h. */
#define TEMP_INFIX ".tmp"
#define TEMP_RANDOM "XXXXXX"

int fileio_write_atomic(const char *dir, const char *name, const char *data, size_t len,
			mode_t mode)
{
	_cleanup_close_ int fd = -1;
	char path[4096], tmp[4096];
	int r = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s" TEMP_INFIX "." TEMP_RANDOM, dir, name) >=
		    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	/* A fresh name, O_EXCL: whatever sits at an older temp name (a FIFO
	 * whose open would block, a device node, a link to elsewhere) is never
	 * opened. glibc passes O_NOFOLLOW through with O_CREAT | O_EXCL. */
	fd = mkostemp(tmp, O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode) < 0)
		r = -errno;
	while (!r && len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		data += n;
		len -= (size_t)n;
	}
	if (!r && fsync(fd) < 0)
		r = -errno;
	if (!r && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	return fsync_dir(dir);
}

/* ".<prefix>...tmp" or ".<prefix>...tmp.XXXXXX" (mkostemp's letters). */
static bool is_stale_temp(const char *n, const char *prefix)
{
	size_t len = strlen(n), pl = strlen(prefix), il = strlen(TEMP_INFIX);
	size_t rl = strlen(TEMP_RANDOM);

	if (n[0] != '.' || strncmp(n + 1, prefix, pl) != 0)
		return false;
	if (len > 1 + pl + il && strcmp(n + len - il, TEMP_INFIX) == 0)
		return true;
	if (len <= 1 + pl + il + 1 + rl || n[len - rl - 1] != '.' ||
	    strncmp(n + len - rl - 1 - il, TEMP_INFIX, il) != 0)
		return false;
	for (size_t i = len - rl; i < len; i++)
		if (!isalnum((unsigned char)n[i]))
			return false;
	return true;
}

int fileio_remove_stale_temps(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (!is_stale_temp(de->d_name, prefix))
			continue;
		/* unlink() removes a symlink itself; rmdir() only an empty directory. */
		if (unlinkat(dirfd(d), de->d_name, 0) == 0 ||
		    (errno == EISDIR && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0))
			n++;
	}
	closedir(d);
	if (n > 0)
		(void)fsync_dir(dir);
	return n;
}

int fileio_remove(const char *dir, const char *name)
{
	char path[4096];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	return fsync_dir(dir);
}

/* Removes name under the directory at dfd, what it holds first when it is a
 * directory (never a link's target). 0 or the first -errno. */
static int remove_at(int dfd, const char *name, int depth)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *e;
	struct stat st;
	int fd, r = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (depth <= 0)
		return -ELOOP;
	/* O_NOFOLLOW: swapped for a link since the fstatat, it is not opened */
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((e = readdir(d))) {
		int rr;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		rr = remove_at(dirfd(d), e->d_name, depth - 1);
		r = r ?: rr;
	}
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = r ?: -errno;
	return r;
}

int fileio_remove_tree(const char *dir, const char *name, int depth)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	int r;

	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	r = remove_at(dfd, name, depth);
	return r < 0 ? r : 1;
}

int fileio_mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return n ? -ENAMETOOLONG : -EINVAL;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int fileio_write_value(int dfd, const char *path, const char *value)
{
	_cleanup_close_ int fd = -1;
	size_t len = strlen(value);
	ssize_t n;

	fd = openat(dfd, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_TRUNC);
	if (fd < 0)
		return -errno;
	n = write(fd, value, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}
