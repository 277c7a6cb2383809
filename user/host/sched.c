/* Real-time scheduling syscalls and limits. See sched.h. */
#include "host/sched.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

/* The kernel's default fair server: 50 ms every second on each CPU. */
#define FAIR_DEFAULT_RUNTIME_NS 50000000ll
#define FAIR_DEFAULT_PERIOD_NS 1000000000ll

/* struct sched_attr as of Linux 4.13 (SCHED_ATTR_SIZE_VER1, 56 bytes);
 * glibc 2.36 has no wrapper. */
struct kattr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};
_Static_assert(sizeof(struct kattr) == 56, "SCHED_ATTR_SIZE_VER1");

/* One integer from a sysctl-like file. */
static int read_int(const char *root, const char *path, int64_t *ret, struct errbuf *eb)
{
	_cleanup_free_ char *text = NULL;
	char full[4096], *end;
	long long v;
	int r;

	(void)snprintf(full, sizeof(full), "%s%s", root, path);
	r = fileio_read(full, 64, &text, NULL, eb);
	if (r < 0)
		return r;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (end == text || errno || (*end && *end != '\n'))
		return errbuf_fail(eb, -EINVAL, "%s: not an integer", full);
	*ret = v;
	return 0;
}

bool sched_release_at_least(const char *release, int major, int minor)
{
	int ma = 0, mi = 0;

	if (!release || sscanf(release, "%d.%d", &ma, &mi) < 1)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

/* The largest fair server share of any CPU under root's debugfs, in
 * milli-CPU rounded up, or -ENOENT when debugfs does not show it. */
static int read_fair_debugfs(const char *root, int64_t *ret)
{
	char dir[4096];
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *e;
	int64_t worst = -1;

	(void)snprintf(dir, sizeof(dir), "%s/sys/kernel/debug/sched/fair_server", root);
	d = opendir(dir);
	if (!d)
		return -ENOENT;
	while ((e = readdir(d))) {
		char rp[4352], pp[4352];
		int64_t runtime, period, milli;

		if (strncmp(e->d_name, "cpu", 3) != 0)
			continue;
		(void)snprintf(rp, sizeof(rp), "/sys/kernel/debug/sched/fair_server/%s/runtime",
			       e->d_name);
		(void)snprintf(pp, sizeof(pp), "/sys/kernel/debug/sched/fair_server/%s/period",
			       e->d_name);
		if (read_int(root, rp, &runtime, NULL) < 0 || read_int(root, pp, &period, NULL) < 0 ||
		    period <= 0 || runtime < 0)
			continue;
		milli = (runtime * 1000 + period - 1) / period;
		if (milli > worst)
			worst = milli;
	}
	if (worst < 0)
		return -ENOENT;
	*ret = worst;
	return 0;
}

int sched_limits_read(const char *root, const char *release, struct sched_limits *ret,
		      struct errbuf *eb)
{
	struct sched_limits l = { 0 };
	struct utsname u;
	int64_t min_us, max_us, share;
	int r;

	if (!root)
		root = "";
	r = read_int(root, "/proc/sys/kernel/sched_rt_runtime_us", &l.rt_runtime_us, eb);
	r = r ?: read_int(root, "/proc/sys/kernel/sched_rt_period_us", &l.rt_period_us, eb);
	r = r ?: read_int(root, "/proc/sys/kernel/sched_deadline_period_min_us", &min_us, eb);
	r = r ?: read_int(root, "/proc/sys/kernel/sched_deadline_period_max_us", &max_us, eb);
	if (r < 0)
		return r;
	if (l.rt_period_us <= 0 || min_us < 0 || max_us < min_us)
		return errbuf_fail(eb, -EINVAL, "%s/proc/sys/kernel: inconsistent sched sysctls",
				   root);
	l.period_min_ns = (uint64_t)min_us * 1000;
	l.period_max_ns = (uint64_t)max_us * 1000;
	/* -1 lifts the limit; deadline admission then allows the whole CPU. */
	share = l.rt_runtime_us < 0 ? 1000 : l.rt_runtime_us * 1000 / l.rt_period_us;
	if (!release) {
		if (uname(&u) < 0)
			return errbuf_fail(eb, -errno, "uname: %s", strerror(errno));
		release = u.release;
	}
	if (read_fair_debugfs(root, &l.fair_milli) == 0) {
		l.fair_source = "debugfs";
	} else if (sched_release_at_least(release, 6, 12)) {
		l.fair_milli = FAIR_DEFAULT_RUNTIME_NS * 1000 / FAIR_DEFAULT_PERIOD_NS;
		l.fair_source = "default";
	} else {
		l.fair_source = "none";
	}
	l.capacity_milli = share - l.fair_milli;
	if (l.capacity_milli <= 0)
		return errbuf_fail(eb, -ENOSPC,
				   "no deadline bandwidth per CPU: sched_rt_runtime_us %" PRId64
				   " of %" PRId64 ", fair server %" PRId64 "m",
				   l.rt_runtime_us, l.rt_period_us, l.fair_milli);
	*ret = l;
	return 0;
}

int sched_set(pid_t tid, const struct sched_params *p)
{
	struct kattr a = {
		.size = sizeof(a),
		.sched_policy = p->policy,
		.sched_flags = p->flags,
		.sched_priority = p->priority,
		.sched_runtime = p->runtime_ns,
		.sched_deadline = p->deadline_ns,
		.sched_period = p->period_ns,
	};

	if (syscall(SYS_sched_setattr, tid, &a, 0) < 0)
		return -errno;
	return 0;
}

int sched_get(pid_t tid, struct sched_params *ret)
{
	struct kattr a = { 0 };

	if (syscall(SYS_sched_getattr, tid, &a, sizeof(a), 0) < 0)
		return -errno;
	*ret = (struct sched_params){
		.policy = a.sched_policy,
		.flags = a.sched_flags,
		.priority = a.sched_priority,
		.runtime_ns = a.sched_runtime,
		.deadline_ns = a.sched_deadline,
		.period_ns = a.sched_period,
	};
	return 0;
}

int sched_set_affinity(pid_t tid, const struct cpuset *cpus)
{
	cpu_set_t *set = CPU_ALLOC(CPUSET_MAX);
	size_t size = CPU_ALLOC_SIZE(CPUSET_MAX);
	int r = 0;

	if (!set)
		return -ENOMEM;
	CPU_ZERO_S(size, set);
	CPUSET_FOREACH(cpu, cpus)
	CPU_SET_S((size_t)cpu, size, set);
	if (sched_setaffinity(tid, size, set) < 0)
		r = -errno;
	CPU_FREE(set);
	return r;
}

int sched_get_affinity(pid_t tid, struct cpuset *ret)
{
	cpu_set_t *set = CPU_ALLOC(CPUSET_MAX);
	size_t size = CPU_ALLOC_SIZE(CPUSET_MAX);
	struct cpuset cpus;
	int r = 0;

	if (!set)
		return -ENOMEM;
	CPU_ZERO_S(size, set);
	if (sched_getaffinity(tid, size, set) < 0) {
		r = -errno;
	} else {
		cpuset_zero(&cpus);
		for (int cpu = 0; cpu < CPUSET_MAX; cpu++)
			if (CPU_ISSET_S((size_t)cpu, size, set))
				cpuset_set(&cpus, cpu);
		*ret = cpus;
	}
	CPU_FREE(set);
	return r;
}

/* A pid directory's name, or 0. */
static pid_t pid_name(const char *name)
{
	char *end;
	long v;

	if (name[0] < '1' || name[0] > '9')
		return 0;
	errno = 0;
	v = strtol(name, &end, 10);
	return *end || errno || v > INT32_MAX ? 0 : (pid_t)v;
}

/* Kernel threads have no command line (nor does a zombie: nothing to end
 * there either). */
static bool is_kthread(int procfd, const char *pid)
{
	char path[NAME_MAX + sizeof("/cmdline")], buf[256];
	_cleanup_close_ int fd = -1;
	ssize_t n;

	(void)snprintf(path, sizeof(path), "%s/cmdline", pid);
	fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf));
	return n == 0;
}

int sched_foreach_task(const char *proc_root, int (*fn)(void *ud, pid_t pid, pid_t tid),
		       void *ud)
{
	char path[4096];
	_cleanup_(closedirp) DIR *procs = NULL;
	struct dirent *de;
	int r = 0;

	(void)snprintf(path, sizeof(path), "%s/proc", proc_root ? proc_root : "");
	procs = opendir(path);
	if (!procs)
		return -errno;
	while (!r && (de = readdir(procs))) {
		pid_t pid = pid_name(de->d_name);
		_cleanup_(closedirp) DIR *tasks = NULL;
		struct dirent *te;
		int fd;

		if (!pid || is_kthread(dirfd(procs), de->d_name))
			continue;
		(void)snprintf(path, sizeof(path), "%s/task", de->d_name);
		fd = openat(dirfd(procs), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue; /* gone meanwhile */
		tasks = fdopendir(fd);
		if (!tasks) {
			close(fd);
			continue;
		}
		while (!r && (te = readdir(tasks))) {
			pid_t tid = pid_name(te->d_name);

			if (tid)
				r = fn(ud, pid, tid);
		}
	}
	return r;
}

/* Field n (1-based, n >= 3) of /proc/<tid>/stat as text in *ret (borrowed
 * from buf). */
static int stat_field(const char *proc_root, pid_t tid, int n, char **buf, const char **ret)
{
	char path[4096];
	const char *p;
	int field = 2, r;

	(void)snprintf(path, sizeof(path), "%s/proc/%d/stat", proc_root ? proc_root : "", (int)tid);
	r = fileio_read(path, 4096, buf, NULL, NULL);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	/* comm may hold spaces and parentheses: fields resume after the last ')'. */
	p = strrchr(*buf, ')');
	if (!p)
		return -EPROTO;
	p++;
	while (*p) {
		while (*p == ' ')
			p++;
		if (++field == n)
			break;
		p += strcspn(p, " ");
	}
	if (field != n || !*p)
		return -EPROTO;
	*ret = p;
	return 0;
}

int sched_task_cpu(const char *proc_root, pid_t tid)
{
	_cleanup_free_ char *text = NULL;
	const char *p;
	long cpu;
	int r = stat_field(proc_root, tid, 39, &text, &p);

	if (r < 0)
		return r;
	cpu = strtol(p, NULL, 10);
	return cpu < 0 || cpu >= CPUSET_MAX ? -EPROTO : (int)cpu;
}

int sched_task_start(const char *proc_root, pid_t tid, uint64_t *ret)
{
	_cleanup_free_ char *text = NULL;
	const char *p;
	int r = stat_field(proc_root, tid, 22, &text, &p);

	if (r < 0)
		return r;
	*ret = strtoull(p, NULL, 10);
	return 0;
}

bool sched_params_match(const struct sched_params *have, const struct sched_params *want)
{
	if (have->policy != want->policy)
		return false;
	if (want->policy == SCHED_POLICY_DEADLINE)
		return have->runtime_ns == want->runtime_ns &&
		       have->deadline_ns == want->deadline_ns && have->period_ns == want->period_ns;
	if (want->policy == SCHED_POLICY_FIFO || want->policy == SCHED_POLICY_RR)
		return have->priority == want->priority;
	return true;
}

const char *sched_policy_name(uint32_t policy)
{
	switch (policy) {
	case SCHED_POLICY_OTHER:
		return "other";
	case SCHED_POLICY_FIFO:
		return "fifo";
	case SCHED_POLICY_RR:
		return "rr";
	case 3:
		return "batch";
	case 5:
		return "idle";
	case SCHED_POLICY_DEADLINE:
		return "deadline";
	default:
		return "unknown";
	}
}
