/* Ending what a real-time claim left running. See rtsweep.h. */
#include "pinning/rtsweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define LOG_MOD "rtctl" /* its events, as before the split */
#include "core/rt.h"
#include "core/state.h"
#include "host/sched.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/num.h"

#define CGROUP_DEPTH 8 /* cgroups below the container's, walked */

static int kill_task(pid_t pid)
{
	if (pid <= 1 || pid == getpid())
		return 0;
	return kill(pid, SIGKILL) == 0;
}

int rtsweep_task(const char *proc_root, pid_t pid, uint64_t start)
{
	uint64_t now;

	if (sched_task_start(proc_root, pid, &now) < 0 || now != start)
		return 0;
	return kill_task(pid);
}

static int kill_line(void *ud, char *line)
{
	int *n = ud;
	int pid;

	/* Never 0 or negative: kill() would take those for process groups. */
	if (num_parse_int(line, NULL, 1, INT_MAX, &pid) == 0)
		*n += kill_task((pid_t)pid);
	return 0;
}

/* Kills what the cgroup at dirfd holds, its child cgroups included (a
 * container may make its own below its cgroup), down to depth levels. */
static void kill_cgroup(int *n, int dirfd, int depth)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;
	int fd;

	(void)fileio_read_lines(dirfd, "cgroup.procs", 0, 1 << 20, kill_line, n, NULL);
	if (depth <= 0)
		return;
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		_cleanup_close_ int sub = -1;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			kill_cgroup(n, sub, depth - 1);
	}
}

int rtsweep_cgroup(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = 0;

	if (fd >= 0)
		kill_cgroup(&n, fd, CGROUP_DEPTH);
	return n;
}

/* Is another claim still prepared on one of cpus with the same deadline
 * budget? Then a task under that budget may be its, and is left alone. */
struct sweep {
	const struct state_claim *gone;
	struct cpuset cpus;
	struct sched_params want;
	bool ambiguous;
	int ended;
};

static int same_budget(void *ud, const struct state_claim *c)
{
	struct sweep *s = ud;
	struct cpuset cpus;

	if (c->rt && strcmp(c->uid, s->gone->uid) != 0 &&
	    c->budget.policy == RT_POLICY_DEADLINE &&
	    c->budget.runtime_ns == s->gone->budget.runtime_ns &&
	    c->budget.deadline_ns == s->gone->budget.deadline_ns &&
	    c->budget.period_ns == s->gone->budget.period_ns &&
	    cpuset_intersects(cpuset_from_view(&c->cpus, &cpus), &s->cpus))
		s->ambiguous = true;
	return 0;
}

static int sweep_task(void *ud, pid_t pid, pid_t tid)
{
	struct sweep *s = ud;
	struct sched_params have;
	struct cpuset aff;

	if (pid == getpid() || sched_get(tid, &have) < 0 || !sched_params_match(&have, &s->want) ||
	    sched_get_affinity(tid, &aff) < 0 || !cpuset_is_subset(&aff, &s->cpus))
		return 0;
	log_warn("rt_task_ended", "claim=%s pid=%d tid=%d reason=running_under_unprepared_budget",
		 s->gone->uid, (int)pid, (int)tid);
	s->ended += kill_task(pid);
	return 0;
}

/* Ends every task still running under the deadline budget of the claim
 * that is gone, allowed on its CPUs alone, wherever it lives: a child that
 * left its container's cgroup holds the claim's bandwidth as much as one
 * that stayed. Left alone when another claim prepared on those CPUs has the
 * same budget (logged): its tasks cannot be told apart from these. FIFO/RR
 * hold no deadline bandwidth and kernel threads use them: not swept. */
int rtsweep_budget(const char *proc_root, struct state *state, const struct state_claim *c)
{
	struct sweep s = { .gone = c };
	int r;

	if (c->budget.policy != RT_POLICY_DEADLINE)
		return 0;
	(void)cpuset_from_view(&c->cpus, &s.cpus);
	s.want = (struct sched_params){ .policy = SCHED_POLICY_DEADLINE,
					.runtime_ns = c->budget.runtime_ns,
					.deadline_ns = c->budget.deadline_ns,
					.period_ns = c->budget.period_ns };
	(void)state_foreach_claim(state, same_budget, &s);
	if (s.ambiguous) {
		log_info("rt_budget_sweep_skipped", "claim=%s reason=same_budget_prepared_on_cpu",
			 c->uid);
		return 0;
	}
	r = sched_foreach_task(proc_root, sweep_task, &s);
	if (r < 0)
		log_warn_errno(r, "rt_budget_sweep_failed", "claim=%s", c->uid);
	return s.ended;
}
