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
#define MAX_OTHERS 64	/* claims sharing a CPU whose budgets are known */

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

/* One sweep of the CPUs of a claim that is gone. */
struct sweep {
	const char *proc_root;
	const struct state_claim *gone;
	struct cpuset cpus;
	struct sched_params want; /* its own budget; policy OTHER: none known */
	uint64_t since;		  /* its containers' first start; 0: unknown */
	bool same_budget; /* another claim on cpus has its deadline budget */
	bool shared;	  /* another real-time claim is still on cpus */
	/* the deadline budgets of the others (a task under one is theirs) */
	struct sched_params others[MAX_OTHERS];
	int n_others;
	int ended;
};

/* A deadline budget as the kernel shows it. */
static struct sched_params dl_params(const struct rt_budget *b)
{
	return (struct sched_params){ .policy = SCHED_POLICY_DEADLINE,
				      .runtime_ns = b->runtime_ns,
				      .deadline_ns = b->deadline_ns,
				      .period_ns = b->period_ns };
}

/* Who else is still prepared on the gone claim's CPUs? */
static int others_on_cpus(void *ud, const struct state_claim *c)
{
	struct sweep *s = ud;
	struct sched_params b;
	struct cpuset cpus;

	if (!c->rt || !strcmp(c->uid, s->gone->uid) ||
	    !cpuset_intersects(cpuset_from_view(&c->cpus, &cpus), &s->cpus))
		return 0;
	s->shared = true;
	if (c->budget.policy != RT_POLICY_DEADLINE)
		return 0;
	b = dl_params(&c->budget);
	if (s->want.policy == SCHED_POLICY_DEADLINE && sched_params_match(&b, &s->want))
		s->same_budget = true;
	if (s->n_others < MAX_OTHERS)
		s->others[s->n_others++] = b;
	return 0;
}

/* Does the task run under the budget of another claim on these CPUs? */
static bool is_others(const struct sweep *s, const struct sched_params *have)
{
	for (int i = 0; i < s->n_others; i++)
		if (sched_params_match(have, &s->others[i]))
			return true;
	return false;
}

static bool is_real_time(uint32_t policy)
{
	return policy == SCHED_POLICY_DEADLINE || policy == SCHED_POLICY_FIFO ||
	       policy == SCHED_POLICY_RR;
}

/* Why tid, a real-time task allowed on the gone claim's CPUs alone, is
 * the claim's: NULL when it cannot be told from another's. */
static const char *why_ended(const struct sweep *s, pid_t tid, const struct sched_params *have)
{
	uint64_t start;

	if (s->want.policy == SCHED_POLICY_DEADLINE && sched_params_match(have, &s->want))
		return s->same_budget ? NULL : "running_under_unprepared_budget";
	if (s->shared)
		return NULL;
	/* No real-time claim is left on these CPUs: whatever still runs
	 * real-time there, started since the claim's container, is its. */
	if (s->since && (sched_task_start(s->proc_root, tid, &start) < 0 || start < s->since))
		return NULL;
	return "real_time_on_unprepared_cpu";
}

static int sweep_task(void *ud, pid_t pid, pid_t tid)
{
	struct sweep *s = ud;
	struct sched_params have;
	struct cpuset aff;
	const char *why;

	if (pid == getpid() || sched_get(tid, &have) < 0 || !is_real_time(have.policy) ||
	    sched_get_affinity(tid, &aff) < 0 || !cpuset_is_subset(&aff, &s->cpus))
		return 0;
	why = why_ended(s, tid, &have);
	if (!why && is_others(s, &have))
		return 0; /* another claim's task, as far as anyone can tell */
	if (!why) {
		log_info("rt_task_kept", "claim=%s pid=%d tid=%d policy=%s "
					 "reason=another_claim_on_cpu",
			 s->gone->uid, (int)pid, (int)tid, sched_policy_name(have.policy));
		return 0;
	}
	log_warn("rt_task_ended", "claim=%s pid=%d tid=%d policy=%s reason=%s", s->gone->uid,
		 (int)pid, (int)tid, sched_policy_name(have.policy), why);
	s->ended += kill_task(pid);
	return 0;
}

/* Ends every real-time task (deadline, FIFO, RR) still allowed on the CPUs
 * of the claim that is gone alone, wherever it lives: a child that left
 * its container's cgroup holds the CPU (and a deadline task its bandwidth)
 * as much as one that stayed. While another real-time claim is prepared on
 * those CPUs, only tasks under the gone claim's own deadline budget are
 * told apart from its tasks, and only when that claim's budget differs;
 * the others are left (logged). Kernel threads are never swept. */
int rtsweep_cpus(const char *proc_root, struct state *state, const struct state_claim *c,
		 uint64_t since)
{
	struct sweep s = { .proc_root = proc_root, .gone = c, .since = since };
	int r;

	(void)cpuset_from_view(&c->cpus, &s.cpus);
	if (c->budget.policy == RT_POLICY_DEADLINE)
		s.want = dl_params(&c->budget);
	(void)state_foreach_claim(state, others_on_cpus, &s);
	if (s.same_budget)
		log_info("rt_budget_sweep_skipped", "claim=%s reason=same_budget_prepared_on_cpu",
			 c->uid);
	r = sched_foreach_task(proc_root, sweep_task, &s);
	if (r < 0)
		log_warn_errno(r, "rt_budget_sweep_failed", "claim=%s", c->uid);
	return s.ended;
}
