/* Real-time scheduling syscalls and limits. See sched.h. */
#include "host/sched.h"

#include <ctype.h>
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
#include "lib/num.h"

/* The kernel's default fair server: 50 ms every second on each CPU. */
#define FAIR_DEFAULT_RUNTIME_NS 50000000ll
#define FAIR_DEFAULT_PERIOD_NS 1000000000ll

/* struct sched_attr as of Linux 5.3 (SCHED_ATTR_SIZE_VER1, 56 bytes: a509a7cd7974
 * "sched/uclamp: Extend sched_setattr() to support utilization clamping");
 * glibc has a wrapper only since 2.41, and Debian 12 ships 2.36. */
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
	char full[4096];
	const char *end;
	long long v;
	int r;

	(void)snprintf(full, sizeof(full), "%s%s", root, path);
	r = fileio_read(full, 64, &text, NULL, eb);
	if (r < 0)
		return r;
	if (num_parse_ll(text, &end, LLONG_MIN, LLONG_MAX, &v) < 0 || (*end && *end != '\n'))
		return errbuf_fail(eb, -EINVAL, "%s: not an integer", full);
	*ret = v;
	return 0;
}

bool sched_release_at_least(const char *release, int major, int minor)
{
	const char *p;
	int ma = 0, mi = 0;

	/* "6.1.0-13-amd64": the major number, and the minor one if present. */
	if (num_parse_int(release, &p, 0, INT_MAX, &ma) < 0)
		return false;
	if (*p == '.')
		(void)num_parse_int(p + 1, &p, 0, INT_MAX, &mi);
	return ma > major || (ma == major && mi >= minor);
}

/* What the servers of one kind hold on the worst CPU, and all of them. */
struct servers {
	int64_t fair, ext, total;
	int n;
};

/* runtime/period of one server on one CPU in milli-CPU rounded up: 0 and
 * *ret, -ENOENT when the CPU has no such directory, another -errno (with eb)
 * when a file is there but cannot be read or makes no sense. */
static int read_server(const char *root, const char *server, int cpu, int64_t *ret,
		       struct errbuf *eb)
{
	char rp[512], pp[512], dir[4600];
	int64_t runtime, period;
	int r;

	/* Server names are shorter than 64 (read_servers' names[][64]); the
	 * precision says so to gcc, which cannot always see it (aarch64). */
	(void)snprintf(rp, sizeof(rp), "/sys/kernel/debug/sched/%.63s/cpu%d/runtime", server, cpu);
	(void)snprintf(pp, sizeof(pp), "/sys/kernel/debug/sched/%.63s/cpu%d/period", server, cpu);
	(void)snprintf(dir, sizeof(dir), "%s/sys/kernel/debug/sched/%s/cpu%d", root, server, cpu);
	if (access(dir, F_OK) < 0)
		return -ENOENT;
	r = read_int(root, rp, &runtime, eb);
	r = r ?: read_int(root, pp, &period, eb);
	if (r < 0)
		return r;
	if (period <= 0 || runtime < 0 || runtime > period)
		return errbuf_fail(eb, -EINVAL, "%s%s: runtime %" PRId64 " of period %" PRId64,
				   root, rp, runtime, period);
	*ret = (runtime * 1000 + period - 1) / period;
	return 0;
}

static bool is_server_dir(const char *name)
{
	size_t n = strlen(name);

	return n > 7 && !strcmp(name + n - 7, "_server");
}

/* The CPUs (cpuN entries) any of the server directories lists. */
static void server_cpus(const char *root, char (*names)[64], int n, struct cpuset *ret)
{
	cpuset_zero(ret);
	for (int i = 0; i < n; i++) {
		_cleanup_(closedirp) DIR *d = NULL;
		char dir[4200];
		struct dirent *e;

		(void)snprintf(dir, sizeof(dir), "%s/sys/kernel/debug/sched/%s", root, names[i]);
		d = opendir(dir);
		while (d && (e = readdir(d))) {
			int cpu;

			if (strncmp(e->d_name, "cpu", 3) == 0 &&
			    num_parse_int(e->d_name + 3, NULL, 0, CPUSET_MAX - 1, &cpu) == 0)
				cpuset_set(ret, cpu);
		}
	}
}

/* Every <name>_server directory under root's debugfs, summed per CPU of
 * cpus (NULL: every CPU 0..CPUSET_MAX-1 that has one), the worst CPU kept.
 * -ENOENT when debugfs shows no sched directory (not mounted), another
 * -errno with eb when it cannot be read. */
static int read_servers(const char *root, const struct cpuset *cpus, struct servers *ret,
			struct errbuf *eb)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char dir[4096], names[8][64];
	int n_names = 0, r = 0;
	struct servers w = { 0 };
	struct cpuset listed;
	struct dirent *e;

	(void)snprintf(dir, sizeof(dir), "%s/sys/kernel/debug/sched", root);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? -ENOENT
				       : errbuf_fail(eb, -errno, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)) && n_names < (int)ARRAY_SIZE(names))
		if (is_server_dir(e->d_name) && strlen(e->d_name) < sizeof(names[0]))
			memcpy(names[n_names++], e->d_name, strlen(e->d_name) + 1);
	if (!cpus) {
		server_cpus(root, names, n_names, &listed);
		cpus = &listed;
	}
	CPUSET_FOREACH(cpu, cpus)
	{
		int64_t fair = 0, ext = 0, total = 0;

		if (r < 0)
			break;
		for (int i = 0; i < n_names && r == 0; i++) {
			int64_t milli = 0;
			int q = read_server(root, names[i], cpu, &milli, eb);

			if (q == -ENOENT)
				continue;
			r = q;
			if (r < 0)
				break;
			total += milli;
			if (!strcmp(names[i], "fair_server"))
				fair = milli;
			else if (!strcmp(names[i], "ext_server"))
				ext = milli;
		}
		if (r == 0 && total > w.total)
			w = (struct servers){ .fair = fair, .ext = ext, .total = total };
	}
	if (r < 0)
		return r;
	w.n = n_names;
	*ret = w;
	return 0;
}

int sched_limits_read(const char *root, const char *release, struct sched_limits *ret,
		      struct errbuf *eb)
{
	return sched_limits_read_opts(root, release, NULL, ret, eb);
}

bool sched_limits_same(const struct sched_limits *a, const struct sched_limits *b)
{
	return a->capacity_milli == b->capacity_milli && a->period_min_ns == b->period_min_ns &&
	       a->period_max_ns == b->period_max_ns;
}

/* The servers of the kernel's defaults (debugfs not there or unreadable). */
static void servers_default(const char *root, const char *release, struct sched_limits *l)
{
	char ext[4096];

	if (!sched_release_at_least(release, 6, 12)) {
		l->fair_source = "none";
		return;
	}
	l->fair_milli = FAIR_DEFAULT_RUNTIME_NS * 1000 / FAIR_DEFAULT_PERIOD_NS;
	l->fair_source = "default";
	(void)snprintf(ext, sizeof(ext), "%s/sys/kernel/sched_ext", root);
	if (access(ext, F_OK) == 0)
		l->ext_milli = FAIR_DEFAULT_RUNTIME_NS * 1000 / FAIR_DEFAULT_PERIOD_NS;
}

int sched_limits_read_opts(const char *root, const char *release,
			   const struct sched_limits_opts *o, struct sched_limits *ret,
			   struct errbuf *eb)
{
	struct sched_limits l = { 0 };
	struct servers sv = { 0 };
	struct errbuf why = { "" };
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
	l.headroom_milli = o && o->headroom_milli > 0 ? o->headroom_milli : 0;
	/* -1 lifts the limit; deadline admission then allows the whole CPU. */
	share = l.rt_runtime_us < 0 ? 1000 : l.rt_runtime_us * 1000 / l.rt_period_us;
	if (!release) {
		if (uname(&u) < 0)
			return errbuf_fail(eb, -errno, "uname: %s", strerror(errno));
		release = u.release;
	}
	r = read_servers(root, o ? o->cpus : NULL, &sv, &why);
	if (r == 0 && sv.n > 0) {
		l.fair_milli = sv.fair;
		l.ext_milli = sv.ext;
		l.servers_milli = sv.total;
		l.n_servers = sv.n;
		l.fair_source = "debugfs";
	} else {
		if (r == -ENOENT)
			(void)snprintf(l.servers_note, sizeof(l.servers_note),
				       "debugfs is not mounted at %s/sys/kernel/debug", root);
		else if (r < 0)
			(void)snprintf(l.servers_note, sizeof(l.servers_note), "%s", why.s);
		else
			(void)snprintf(l.servers_note, sizeof(l.servers_note),
				       "debugfs lists no deadline server");
		servers_default(root, release, &l);
		l.servers_milli = l.fair_milli + l.ext_milli;
	}
	l.capacity_milli = share - l.servers_milli - l.headroom_milli;
	if (l.capacity_milli <= 0)
		return errbuf_fail(eb, -ENOSPC,
				   "no deadline bandwidth per CPU: sched_rt_runtime_us %" PRId64
				   " of %" PRId64 ", deadline servers %" PRId64 "m, headroom %" PRId64
				   "m",
				   l.rt_runtime_us, l.rt_period_us, l.servers_milli,
				   l.headroom_milli);
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
	int v;

	if (name[0] < '1' || name[0] > '9' || num_parse_int(name, NULL, 1, INT32_MAX, &v) < 0)
		return 0;
	return (pid_t)v;
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
	int cpu;
	int r = stat_field(proc_root, tid, 39, &text, &p);

	if (r < 0)
		return r;
	return num_parse_int(p, &p, 0, CPUSET_MAX - 1, &cpu) < 0 ? -EPROTO : cpu;
}

int sched_task_start(const char *proc_root, pid_t tid, uint64_t *ret)
{
	_cleanup_free_ char *text = NULL;
	const char *p;
	unsigned long long v;
	int r = stat_field(proc_root, tid, 22, &text, &p);

	if (r < 0)
		return r;
	if (num_parse_ull(p, &p, UINT64_MAX, &v) < 0)
		return -EPROTO;
	*ret = v;
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
