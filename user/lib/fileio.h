/* Small, bounded local file I/O the daemon's durable records share. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Reads a whole regular file of at most max bytes (NUL-terminated copy in
 * *ret, caller frees; *ret_len without the NUL). -E2BIG over max, -EINVAL
 * for a non-regular file, -errno otherwise. Symlinks are not followed. */
int fileio_read(const char *path, size_t max, char **ret, size_t *ret_len);

/* Replaces dir/name with data atomically and durably: a temp file
 * ".<name>.tmp" (mode), write, fsync, rename over name, fsync of dir. A
 * crash leaves the old content or the new one. On failure the temp file is
 * removed and the old file is untouched. */
int fileio_write_atomic(const char *dir, const char *name, const char *data, size_t len,
			mode_t mode);

/* unlink + fsync of the directory; a missing file is success. */
int fileio_remove(const char *dir, const char *name);

/* mkdir -p: parents 0755, the last component with mode. An existing
 * directory is success (its mode is left alone). */
int fileio_mkdir_p(const char *path, mode_t mode);
