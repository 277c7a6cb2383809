/* fileio: the one way the daemon and its tools read and replace local files.
 *
 * Reading: every read opens with O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY
 * (and O_NOFOLLOW unless FILEIO_FOLLOW), fstat()s the open file and refuses
 * anything but a regular file before reading a byte. A FIFO, socket, device
 * node, directory or symlink where a file belongs is a clear error
 * ("<path>: is a FIFO, not a regular file"), never a hang: O_NONBLOCK keeps
 * open() of a FIFO without a writer from waiting, and nothing is read from it.
 *
 * Every read goes to EOF under a hard cap; the size fstat() reports is only a
 * hint for the first allocation. procfs files report size 0, sysfs files
 * 4096, and a file someone rewrites may grow while we read: the cap, not the
 * size, is what bounds memory. Over the cap: -E2BIG, nothing returned.
 *
 * Errors are -errno with, when eb is not NULL, one line naming the path:
 *   -EISDIR   a directory                 -ELOOP   a symlink (not followed)
 *   -EINVAL   FIFO, socket, device node   -E2BIG   larger than the cap
 *   anything else open(2)/read(2) said ("<path>: No such file or directory").
 *
 * Writing: fileio_write_atomic() replaces a file so that a crash leaves the old
 * content or the new one, never a mix.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct buf;
struct errbuf;

/* Follow symlinks in the last component. For kernel files (sysfs names devices
 * through links) and for files the kubelet mounts: a ConfigMap, Secret or
 * projected volume presents each key as "key -> ..data/key" with "..data ->
 * ..<timestamp>/", swapped atomically on update. What the links end in must
 * still be a regular file. Our own state files are never links. */
#define FILEIO_FOLLOW 1u

/* Reads the regular file at path (relative to dfd: AT_FDCWD or an open
 * directory such as /proc/<pid>) to EOF, appending to b; the cap is b->max.
 * On failure b is freed (see buf.h) and eb says why. */
int fileio_read_at(int dfd, const char *path, unsigned flags, struct buf *b, struct errbuf *eb);

/* Reads a whole regular file of at most max bytes, symlinks not followed: a
 * NUL-terminated copy in *ret (caller frees), its length without the NUL in
 * *ret_len (may be NULL). *ret is written only on success. */
int fileio_read(const char *path, size_t max, char **ret, size_t *ret_len, struct errbuf *eb);

/* fileio_read() for a file the kubelet mounts (FILEIO_FOLLOW): the
 * configuration file, a kubeconfig, a token, a CA bundle. */
int fileio_read_mounted(const char *path, size_t max, char **ret, size_t *ret_len,
			struct errbuf *eb);

/* Reads the file like fileio_read_at() (at most max bytes) and calls fn once
 * per line, the line NUL-terminated without its '\n' (writable, valid during
 * the call; a last line without '\n' counts too). fn returns 0 to go on, < 0
 * to stop with that error, > 0 to stop early with that value. For procfs and
 * sysfs tables (mountinfo, cgroup, status, schedstat). */
int fileio_read_lines(int dfd, const char *path, unsigned flags, size_t max,
		      int (*fn)(void *ud, char *line), void *ud, struct errbuf *eb);

/* Replaces dir/name with data atomically and durably: a temp file on a fresh
 * name ".<name>.tmp.XXXXXX" created with O_CREAT | O_EXCL | O_NOFOLLOW (so
 * nothing planted in the directory is ever opened, followed or written
 * through), mode, write, fsync, rename over name, fsync of dir. A crash
 * leaves the old content or the new one, plus at most a stale temp file that
 * fileio_remove_stale_temps() removes. rename() replaces whatever non-directory
 * is at name (a FIFO, socket, device node or symlink is replaced, the link's
 * target untouched); a directory there is -EISDIR. On failure the temp file
 * is removed and the old file is untouched. */
int fileio_write_atomic(const char *dir, const char *name, const char *data, size_t len,
			mode_t mode);

/* Removes from dir what fileio_write_atomic() leaves behind when it dies
 * between create and rename: names ".<prefix>...tmp.XXXXXX" and the fixed
 * ".<prefix>...tmp" of earlier versions ("" matches every name), whatever
 * their file type (a symlink is removed, not followed; an empty directory
 * too). Call it at start, before anything writes there. Returns the count
 * removed; what cannot be removed is skipped; -errno only when dir cannot
 * be read (a missing dir: 0). */
int fileio_remove_stale_temps(const char *dir, const char *prefix);

/* unlink + fsync of the directory; a missing file is success. */
int fileio_remove(const char *dir, const char *name);

/* Writes value to an existing kernel file (cgroupfs, procfs) in one write(),
 * as those files want a whole value per write: no create, no symlink
 * followed. -errno of open() or write() (a kernel refusing the value says so
 * with write()'s errno, e.g. -EIO or -EINVAL), -EIO for a short write. */
int fileio_write_value(int dfd, const char *path, const char *value);

/* rm -r of dir/name without ever following a symbolic link: every level is
 * opened relative to its parent with O_NOFOLLOW, every entry removed with
 * unlinkat(), so a link planted anywhere below is removed itself and
 * nothing of its target is touched (name itself a link: the link goes).
 * Directories deeper than depth levels below name are left (and so name).
 * 1 when there was something, 0 when name did not exist, -errno (the first
 * failure; the rest is still removed). */
int fileio_remove_tree(const char *dir, const char *name, int depth);

/* mkdir -p: parents 0755, the last component with mode. An existing
 * directory is success (its mode is left alone). */
int fileio_mkdir_p(const char *path, mode_t mode);
