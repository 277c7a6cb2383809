/* procfs: the parsers of the kernel's text files under /proc that the
 * daemon and bpf-verify read: /proc/schedstat, /proc/self/mountinfo and,
 * per task, status, stat and cgroup.
 *
 * Every parser takes the bytes of one file (len bytes, not necessarily
 * NUL-terminated, never read past) and returns 0 or a count, -EPROTO when the
 * text is not what the kernel writes, -ENOENT when a line asked for is not
 * there, -E2BIG when a value does not fit the caller's buffer. None keeps a
 * pointer into the buffer past the call unless it says so, none allocates
 * unless it says so. Reading the files is lib/fileio's job (procfs and sysfs
 * files report a size of 0: read to EOF, bounded).
 *
 * Pure functions: no state, any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cpuset.h"

/* A task's name as status shows it (comm is 15 bytes; the kernel may escape
 * some of them, and kernel threads' names can be longer), NUL included. */
#define PROCFS_COMM_MAX 64

/* task_struct flags (include/linux/sched.h) that readers of stat use. */
#define PROCFS_PF_KTHREAD 0x00200000u

/* ---- /proc/schedstat ---------------------------------------------------------------- */

/* Versions 15..17 (Documentation/scheduler/sched-stats.rst): the run-queue
 * wait (run_delay, ns) of each cpuN line into wait_ns[N] for N < n; CPUs not
 * listed stay untouched. Returns the number of cpu lines, -EPROTO for a
 * missing or unknown version or a malformed cpu line. */
int procfs_schedstat_parse(const char *buf, size_t len, uint64_t *wait_ns, int n);

/* ---- /proc/<pid>/mountinfo ---------------------------------------------------------- */

/* A field of a mountinfo line, as the kernel wrote it (octal escapes such as
 * "\040" left in; procfs_unescape() decodes them). Points into the buffer. */
struct procfs_field {
	const char *s;
	size_t len;
};

/* One line: "id parent maj:min root point options [optional...] - fstype
 * source super-options" (Documentation/filesystems/proc.rst, 3.5). */
struct procfs_mount {
	struct procfs_field root;  /* the directory of the filesystem mounted here */
	struct procfs_field point; /* where, in our mount namespace */
	struct procfs_field fstype;
	struct procfs_field source;
	struct procfs_field super; /* per-superblock options: a v1 cgroup's controllers */
};

/* The entry at *p of [*p, end): 1 with *ret filled and *p past the line, 0 at
 * the end, -EPROTO for a line without the fields above (*p is past it too,
 * so a caller may go on). Blank lines are skipped. The fields borrow from
 * the buffer. */
int procfs_mountinfo_next(const char **p, const char *end, struct procfs_mount *ret);

/* The field with "\ooo" escapes decoded (mountinfo escapes space, tab,
 * newline and backslash). A new string, caller frees; NULL on ENOMEM. */
char *procfs_unescape(struct procfs_field f);

/* f is equal to the NUL-terminated s. */
bool procfs_field_is(struct procfs_field f, const char *s);

/* The comma-separated list [list, list + len) has the item want ("rw,cpuset"
 * has "cpuset", "cpusetx" does not). */
bool procfs_list_has(const char *list, size_t len, const char *want);

/* ---- /proc/<pid>/task/<tid>/status, stat, cgroup ----------------------------------- */

struct procfs_status {
	char name[PROCFS_COMM_MAX]; /* Name:, cut to PROCFS_COMM_MAX - 1 bytes */
	int tgid;
	struct cpuset allowed; /* Cpus_allowed_list: */
};

/* Name, Tgid and Cpus_allowed_list. -EPROTO when one is missing or
 * malformed. */
int procfs_status_parse(const char *buf, size_t len, struct procfs_status *ret);

struct procfs_stat {
	unsigned flags; /* PF_* (field 9) */
	uint64_t ticks; /* utime + stime (fields 14 and 15), clock ticks */
};

/* "pid (comm) state ppid ...": comm may hold ')' and spaces; the fields are
 * counted from the last ')'. -EPROTO. */
int procfs_stat_parse(const char *buf, size_t len, struct procfs_stat *ret);

/* The cgroup path of one hierarchy in a /proc/<pid>/cgroup file: the v2 line
 * ("0::/path") when controller is NULL, else the v1 line whose controller
 * list has controller ("3:cpu,cpuset:/path"). Into path (size bytes),
 * without a trailing " (deleted)". -ENOENT when there is no such line,
 * -EPROTO when its path is not absolute, -E2BIG when it does not fit. */
int procfs_cgroup_parse(const char *buf, size_t len, const char *controller, char *path,
			size_t size);
