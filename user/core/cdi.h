/* CDI specs: one file per prepared claim, the durable record of what was
 * prepared (DESIGN.md section 4).
 *
 *   <dir>/dra.k8s.io-cpu_claim-<uid>.json
 *   {"cdiVersion":"0.8.0","kind":"dra.k8s.io/cpu","devices":[{"name":"claim-<uid>",
 *    "containerEdits":{"env":["DRA_CPUSET_<uid>=<cpulist>"]}}]}
 *
 * The container runtime reads these (CDI id dra.k8s.io/cpu=claim-<uid>) and
 * puts the env var into the container, where workloads and the NRI plugin read
 * it. Writes are atomic (temp file, fsync, rename, fsync of the directory), so
 * a crash leaves the old spec or the new one, never a torn file. Small bounded
 * local I/O: fine on the loop.
 */
#pragma once

#include <stddef.h>

#include "lib/cpuset.h"

struct errbuf;

#define CDI_KIND "dra.k8s.io/cpu"
#define CDI_VERSION "0.8.0"
#define CDI_ENV_PREFIX "DRA_CPUSET_"
/* Kubernetes UIDs are 36-char UUIDs; allow some slack, never a path. */
#define CDI_UID_MAX 64
/* Largest spec file we read (ours are < 40 KiB even for 8192 CPUs). */
#define CDI_FILE_MAX (256 * 1024)

/* A claim uid usable in a file name and an env var name: 1..63 chars of
 * [A-Za-z0-9-], not starting with '-'. */
int cdi_uid_valid(const char *uid);

/* "dra.k8s.io/cpu=claim-<uid>" into buf. */
void cdi_device_id(const char *uid, char *buf, size_t size);

/* The spec file path for uid into buf; -ENAMETOOLONG if it does not fit. */
int cdi_spec_path(const char *dir, const char *uid, char *buf, size_t size);

/* Writes (or replaces) the spec of uid. Creates dir (0755) if missing. */
int cdi_spec_write(const char *dir, const char *uid, const struct cpuset *cpus);

/* Removes the spec of uid; a missing file is success. Whatever else sits at
 * the spec's name (FIFO, socket, symlink: never followed) is removed too,
 * except a directory: -EISDIR, left alone (it is not a spec, and not ours). */
int cdi_spec_remove(const char *dir, const char *uid);

/* Removes the temp files a crash left in dir: only our names
 * (".dra.k8s.io-cpu_claim-*.json.tmp*"), never another producer's. For the
 * start, before the first write. Returns the count removed or -errno. */
int cdi_remove_stale_temps(const char *dir);

/* Parses a spec of ours. -EPROTO (eb filled) when it is not one: wrong kind
 * or version, not exactly one device named claim-<uid> with exactly one env
 * DRA_CPUSET_<uid>=<valid cpulist>, or junk. uid_out: CDI_UID_MAX bytes. */
int cdi_spec_parse(const char *buf, size_t len, char *uid_out, struct cpuset *cpus,
		   struct errbuf *eb);

/* Calls fn for every spec of ours in dir (file name dra.k8s.io-cpu_claim-*.json).
 * Files that do not parse, or whose content names another uid than their
 * file name, or are not regular files (a FIFO is never opened for reading
 * in a way that blocks), are reported through bad (may be NULL, why names
 * the file type) and left alone. A missing
 * dir is empty. fn returning < 0 stops the scan with that value. */
typedef int (*cdi_spec_fn)(void *ud, const char *uid, const struct cpuset *cpus);
typedef void (*cdi_bad_fn)(void *ud, const char *path, const char *why);
int cdi_scan(const char *dir, cdi_spec_fn fn, cdi_bad_fn bad, void *ud);
