/* scan: the walk of /proc that feeds the static check. See scan.h.
 *
 * One buffer serves every file read (lib/fileio reads /proc files to EOF
 * under PROC_FILE_MAX; status is the largest, a few KiB). A task that exits
 * while we read it (ENOENT, ESRCH, or a zombie's empty cgroup file) is not
 * a task any more: skipped, not counted as unreadable.
 */
#include "pinning/scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/cgroup.h"
#include "host/procfs.h"
#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/fileio.h"
#include "pinning/report.h"

#define PROC_FILE_MAX (64 * 1024)

/* A /proc directory name that is a pid: its value, else -1. */
static int pid_of(const char *s)
{
	int v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (INT_MAX - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/* One file of the task directory tdfd into b (emptied first). */
static int read_file(int tdfd, const char *name, struct buf *b)
{
	buf_reset(b);
	return fileio_read_at(tdfd, name, 0, b, NULL);
}

/* -ENOENT/-ESRCH: the task is gone. */
static int read_task(int tdfd, enum cgroup_hier mode, struct buf *b, struct verify_task *t)
{
	struct procfs_status status;
	struct procfs_stat stat;
	int r;

	r = read_file(tdfd, "status", b);
	if (r == 0)
		r = procfs_status_parse(buf_str(b), buf_len(b), &status);
	if (r < 0)
		return r;
	memcpy(t->comm, status.name, sizeof(t->comm));
	t->allowed = status.allowed;
	r = read_file(tdfd, "stat", b);
	if (r == 0)
		r = procfs_stat_parse(buf_str(b), buf_len(b), &stat);
	if (r < 0)
		return r;
	t->flags = stat.flags;
	t->ticks = stat.ticks;
	r = read_file(tdfd, "cgroup", b);
	if (r < 0)
		return r;
	/* A zombie thread has an empty cgroup file: gone for our purpose. */
	if (buf_len(b) == 0)
		return -ESRCH;
	return cgroup_of_task(buf_str(b), buf_len(b), mode, t->cgroup, sizeof(t->cgroup));
}

/* Every thread of one process; pdfd is /proc/<pid>. */
static int scan_process(struct verify_report *r, int pdfd, int pid, struct buf *b,
			struct verify_task *t)
{
	int tfd = openat(pdfd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (tfd < 0)
		return 0; /* gone */
	d = fdopendir(tfd);
	if (!d) {
		(void)close(tfd);
		return -errno;
	}
	while (ret == 0 && (de = readdir(d))) {
		_cleanup_close_ int tdfd = -1;
		int tid = pid_of(de->d_name), rr;

		if (tid < 0)
			continue;
		tdfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (tdfd < 0)
			continue;
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		t->tid = tid;
		rr = read_task(tdfd, r->owners->mode, b, t);
		if (rr == -ENOENT || rr == -ESRCH)
			continue;
		if (rr == -ENOMEM) {
			ret = rr;
		} else if (rr < 0) {
			r->unreadable++;
			continue;
		}
		if (ret == 0)
			ret = verify_report_add_thread(r, t);
	}
	(void)closedir(d);
	if (ret == 0)
		ret = verify_report_end_process(r);
	return ret;
}

int verify_report_scan(struct verify_report *r, const char *proc_root)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(PROC_FILE_MAX);
	_cleanup_free_ struct verify_task *t = NULL;
	struct dirent *de;
	DIR *d;
	int ret = 0;

	d = opendir(proc_root);
	if (!d)
		return -errno;
	t = malloc(sizeof(*t));
	if (!t)
		ret = -ENOMEM;
	while (ret == 0 && (de = readdir(d))) {
		_cleanup_close_ int pdfd = -1;
		int pid = pid_of(de->d_name);

		if (pid < 0)
			continue;
		pdfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pdfd < 0)
			continue;
		ret = scan_process(r, pdfd, pid, &b, t);
	}
	(void)closedir(d);
	if (ret < 0)
		return ret;
	r->scanned = true;
	return r->threads;
}
