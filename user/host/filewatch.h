/* filewatch: notices when a file the kubelet mounts changes under a running
 * driver.
 *
 * A ConfigMap or Secret volume presents each key as "key -> ..data/key",
 * "..data -> ..<timestamp>/"; an update writes a new timestamped directory and
 * renames a fresh "..data" link over the old one, so the file's own inode
 * never changes and an inotify watch on the file itself sees nothing. The
 * watch is therefore on the directory that holds the path: every create,
 * rename, write or delete there (the "..data" swap among them) re-reads the
 * path, links followed, and compares a digest of its bytes with the last one
 * seen. A file edited in place (no kubelet) is noticed the same way. A volume
 * mounted with subPath is never updated by the kubelet: nothing to notice.
 *
 * The callback runs on the loop once per change of content: with the new
 * digest and r = 0, or with r < 0 when the path cannot be read any more (eb's
 * text). Reads are small and bounded (max bytes) and happen only after the
 * directory changed, never on a timer.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct event_base;
struct errbuf;
struct filewatch;

typedef void (*filewatch_fn)(void *ud, int r, uint64_t digest, const struct errbuf *eb);

/* The digest filewatch compares: FNV-1a over the bytes. */
uint64_t filewatch_digest(const void *data, size_t len);

/* Watches path; digest is that of the content the caller already acted on
 * (a change between that read and this call is reported at once). max caps a
 * read. -errno when inotify or the loop refuse (the caller goes on without). */
int filewatch_new(struct event_base *base, const char *path, size_t max, uint64_t digest,
		  filewatch_fn fn, void *ud, struct filewatch **ret);
struct filewatch *filewatch_free(struct filewatch *w);
DEFINE_FREEP(filewatch, filewatch_free)
