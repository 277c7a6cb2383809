/* bpfmon: the pinning check on the real kernel (its parsers and cgroup
 * lookups are host/procfs and host/cgroup, tested there).
 *
 * The kernel tests build a private cgroup v2 subtree (dra-cpu-test-<pid>/{A,
 * A/child, B}), spawn real busy processes in it pinned with sched_setaffinity,
 * mark CPU 1 exclusive for A and watch what the BPF side reports through the
 * libevent loop. The subtree and every child are removed in the teardown,
 * also after a failed assertion. Other tasks of the machine may run on CPU 1
 * meanwhile: assertions only look at our own pids.
 *
 * Without root (CAP_BPF, cgroup writes) they print "skipped: needs CAP_BPF".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "host/cgroup.h"
#include "lib/clock.h"
#include "lib/cpuset.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "pinning/bpfmon.h"
#include "testfilter.h"
#include "testutil.h"

#define EXCL_CPU 1
#define SHARED_CPU 0
#define MAX_PIDS 8
#define MAX_SEEN 4096

/* ---- kernel fixture ------------------------------------------------------------------- */

struct seen_event {
	uint32_t pid, cpu, kind, flags;
	char comm[16];
	char action[32];
};

struct fx {
	char mnt[PATH_MAX];
	char root[PATH_MAX], a[PATH_MAX], child[PATH_MAX], b[PATH_MAX];
	char v1[PATH_MAX], v1_a[PATH_MAX], v1_child[PATH_MAX]; /* only the v1 test */
	uint64_t id_root, id_a, id_child, id_b;
	pid_t pids[MAX_PIDS];
	int npids;
	cpu_set_t saved_affinity;
	struct event_base *base;
	struct bpfmon *m;
	struct seen_event seen[MAX_SEEN];
	int nseen;
};

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static void cg_path(char *dst, const char *a, const char *b)
{
	int n = snprintf(dst, PATH_MAX, "%s/%s", a, b);

	assert_true(n > 0 && n < PATH_MAX);
}

static int setup(void **st)
{
	struct fx *f;
	struct cgroup_mounts m;
	char name[64];

	if (geteuid() != 0) {
		*st = NULL;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(cgroup_mounts_read(&m), 0);
	if (!m.h[CGROUP_V2].point) {
		cgroup_mounts_done(&m);
		free(f);
		*st = NULL; /* no cgroup2: skipped */
		return 0;
	}
	snprintf(f->mnt, sizeof(f->mnt), "%s", m.h[CGROUP_V2].point);
	cgroup_mounts_done(&m);
	snprintf(name, sizeof(name), "dra-cpu-test-%d", (int)getpid());
	cg_path(f->root, f->mnt, name);
	cg_path(f->a, f->root, "A");
	cg_path(f->child, f->a, "child");
	cg_path(f->b, f->root, "B");
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(mkdir(f->a, 0755), 0);
	assert_int_equal(mkdir(f->child, 0755), 0);
	assert_int_equal(mkdir(f->b, 0755), 0);
	assert_int_equal(cgroup_id(f->root, &f->id_root), 0);
	assert_int_equal(cgroup_id(f->a, &f->id_a), 0);
	assert_int_equal(cgroup_id(f->child, &f->id_child), 0);
	assert_int_equal(cgroup_id(f->b, &f->id_b), 0);
	f->base = event_base_new();
	assert_non_null(f->base);
	/* Keep the test (and each child until it pins itself) off the
	 * exclusive CPU: otherwise the child's first run there is a real
	 * violation under the test's own name. */
	{
		cpu_set_t set;

		assert_int_equal(sched_getaffinity(0, sizeof(f->saved_affinity), &f->saved_affinity),
				 0);
		CPU_ZERO(&set);
		CPU_SET(SHARED_CPU, &set);
		assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	}
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	struct fx *f = *st;

	if (!f)
		return 0;
	for (int i = 0; i < f->npids; i++) {
		kill(f->pids[i], SIGKILL);
		waitpid(f->pids[i], NULL, 0);
	}
	bpfmon_free(f->m);
	event_base_free(f->base);
	(void)sched_setaffinity(0, sizeof(f->saved_affinity), &f->saved_affinity);
	rmdir(f->child);
	rmdir(f->a);
	rmdir(f->b);
	rmdir(f->root);
	if (f->v1_child[0])
		rmdir(f->v1_child);
	if (f->v1_a[0])
		rmdir(f->v1_a);
	if (f->v1[0])
		rmdir(f->v1);
	free(f);
	return 0;
}

/* Skips the test where bpf() itself is missing (qemu-user, a kernel
 * without it), found by calling it. */
static void need_bpf_syscall(void)
{
	char why[192];

	if (!testutil_have_bpf_syscall(why, sizeof(why))) {
		print_message("skipped: %s\n", why);
		skip();
	}
}

static struct fx *need_kernel(void **st)
{
	if (!*st) {
		print_message("skipped: needs CAP_BPF\n");
		skip();
	}
	need_bpf_syscall();
	return *st;
}

static void record(const struct pinning_event *e, const char *cgroup, const char *action,
		   void *userdata)
{
	struct fx *f = userdata;
	struct seen_event *s;

	if (f->nseen == MAX_SEEN)
		return;
	s = &f->seen[f->nseen++];
	s->pid = e->pid;
	s->cpu = e->cpu;
	s->kind = e->kind;
	s->flags = e->task_flags;
	memcpy(s->comm, e->comm, sizeof(s->comm));
	snprintf(s->action, sizeof(s->action), "%s", action);
}

/* Loads bpfmon; skips when the kernel refuses us the programs. */
static void start(struct fx *f, struct bpfmon_opts *o)
{
	if (!o->event_rate) {
		/* Every violation becomes an event: absence then means something. */
		o->event_rate = 1000000;
		o->event_burst = 1000000;
	}
	assert_int_equal(bpfmon_new(f->base, o, &f->m), 0);
	if (!bpfmon_is_loaded(f->m)) {
		if (strstr(bpfmon_error(f->m), "CAP_BPF")) {
			print_message("skipped: needs CAP_BPF (%s)\n", bpfmon_error(f->m));
			skip();
		}
		fail_msg("not loaded: %s", bpfmon_error(f->m));
	}
	bpfmon_set_event_fn(f->m, record, f);
}

/* A child that joins cgroup (a directory, or NULL to stay), pins itself to
 * cpu, names itself comm and alternates 2 ms of spinning with 0.5 ms of
 * sleep (many switch-ins) for ms milliseconds. Returns once it is set up. */
static pid_t spawn(struct fx *f, const char *cgroup, int cpu, const char *comm, int ms)
{
	int p[2];
	pid_t pid;
	char c;

	assert_true(f->npids < MAX_PIDS);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char procs[PATH_MAX];
		cpu_set_t set;
		int64_t t0;

		close(p[0]);
		/* Named first: the first switch-in onto the CPU is the one reported. */
		prctl(PR_SET_NAME, comm);
		if (cgroup) {
			snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup);
			if (write_str(procs, "0") < 0)
				_exit(2);
		}
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			_exit(3);
		if (write(p[1], "x", 1) != 1)
			_exit(4);
		close(p[1]);
		t0 = clock_now_ms();
		for (;;) {
			int64_t el;

			do
				el = clock_now_ms() - t0;
			while (el % 3 < 2 && el < ms);
			if (el >= ms)
				_exit(0);
			usleep(500);
		}
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	f->pids[f->npids++] = pid;
	return pid;
}

static void run_loop(struct fx *f, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(f->base, &tv);
	event_base_dispatch(f->base);
}

static int events_for(const struct fx *f, pid_t pid)
{
	int n = 0;

	for (int i = 0; i < f->nseen; i++)
		n += f->seen[i].pid == (uint32_t)pid;
	return n;
}

static const struct seen_event *event_of(const struct fx *f, pid_t pid)
{
	for (int i = 0; i < f->nseen; i++)
		if (f->seen[i].pid == (uint32_t)pid)
			return &f->seen[i];
	return NULL;
}

static bool pinned_to(pid_t pid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (sched_getaffinity(pid, sizeof(set), &set) < 0)
		return false;
	return CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set);
}

/* ---- kernel tests --------------------------------------------------------------------- */

/* (a) The owner and a task in a child cgroup of the owner run on the
 * exclusive CPU: switches are counted as owner switches, no event names them. */
static void test_bpfmon_owner_and_descendant_are_not_violations(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { 0 };
	struct bpfmon_counters c;
	pid_t owner, desc;

	start(f, &o);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	owner = spawn(f, f->a, EXCL_CPU, "dra-owner", 400);
	desc = spawn(f, f->child, EXCL_CPU, "dra-owner-child", 400);
	run_loop(f, 600);
	assert_int_equal(bpfmon_drain(f->m) >= 0, 1);
	assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &c), 0);
	assert_true(c.owner_switches >= 100);
	assert_true(c.switches >= c.owner_switches);
	assert_int_equal(events_for(f, owner), 0);
	assert_int_equal(events_for(f, desc), 0);
	assert_int_equal(c.events_dropped, 0);
}

/* (b) A task of another cgroup pinned to the exclusive CPU is a user
 * violation, and the ring buffer names it (pid, comm, cpu) on the loop. */
static void test_bpfmon_intruder_is_counted_and_named(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { 0 };
	struct bpfmon_counters before, after;
	const struct seen_event *e;
	pid_t intruder;

	start(f, &o);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &before), 0);
	(void)spawn(f, f->a, EXCL_CPU, "dra-owner", 400);
	intruder = spawn(f, f->b, EXCL_CPU, "dra-intruder", 400);
	run_loop(f, 600);
	assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &after), 0);
	/* ~130 wakeups of the intruder in 400 ms. */
	assert_true(after.violations[PINNING_KIND_USER] - before.violations[PINNING_KIND_USER] >=
		    50);
	assert_true(after.foreign_ns[PINNING_KIND_USER] > before.foreign_ns[PINNING_KIND_USER]);
	e = event_of(f, intruder);
	assert_non_null(e);
	assert_string_equal(e->comm, "dra-intruder");
	assert_int_equal(e->cpu, EXCL_CPU);
	assert_int_equal(e->kind, PINNING_KIND_USER);
	assert_string_equal(e->action, "audit_only"); /* B is no owner: a host task */
	/* Once per interval per (cpu, pid), however many switches. */
	assert_int_equal(events_for(f, intruder), 1);
}

/* (c) Per-CPU kernel threads (here migration/1, woken by moving a task off
 * the CPU) are counted under kind=kthread and send no event. */
static void test_bpfmon_kthreads_are_counted_apart(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { 0 };
	struct bpfmon_counters c = { 0 };
	cpu_set_t set;
	pid_t busy;

	start(f, &o);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	busy = spawn(f, f->a, EXCL_CPU, "dra-owner", 3000);
	for (int i = 0; i < 40 && c.violations[PINNING_KIND_KTHREAD] == 0; i++) {
		/* Each round trip off and back on CPU 1 runs its stopper thread. */
		CPU_ZERO(&set);
		CPU_SET(i % 2 ? EXCL_CPU : SHARED_CPU, &set);
		assert_int_equal(sched_setaffinity(busy, sizeof(set), &set), 0);
		run_loop(f, 50);
		assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &c), 0);
	}
	assert_true(c.violations[PINNING_KIND_KTHREAD] > 0);
	for (int i = 0; i < f->nseen; i++)
		assert_int_not_equal(f->seen[i].kind, PINNING_KIND_KTHREAD);
}

/* (d) Two busy tasks sharing the shared CPU wait for each other: the
 * run-queue latency histogram fills. */
static void test_bpfmon_runq_histogram_samples_shared_cpu(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .contention = true };
	uint64_t slots[PINNING_HIST_SLOTS], sum_ns, n = 0, n0 = 0;
	struct cpuset shared;

	start(f, &o);
	assert_true(bpfmon_has_contention(f->m));
	cpuset_zero(&shared);
	cpuset_set(&shared, SHARED_CPU);
	assert_int_equal(bpfmon_set_shared(f->m, &shared), 0);
	assert_int_equal(bpfmon_read_runq(f->m, slots, &sum_ns), 0);
	for (int i = 0; i < PINNING_HIST_SLOTS; i++)
		n0 += slots[i];
	(void)spawn(f, f->b, SHARED_CPU, "dra-shared-1", 300);
	(void)spawn(f, f->b, SHARED_CPU, "dra-shared-2", 300);
	run_loop(f, 400);
	assert_int_equal(bpfmon_read_runq(f->m, slots, &sum_ns), 0);
	for (int i = 0; i < PINNING_HIST_SLOTS; i++)
		n += slots[i];
	assert_true(n - n0 >= 50);
	assert_true(sum_ns > 0);
}

/* (e) remediate: a host intruder (in no owner cgroup) is moved to the shared
 * pool; the owner stays where it is. The scope keeps the test from touching
 * the machine's own tasks. */
static void test_bpfmon_remediate_moves_host_intruder(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .enforcement = BPFMON_REMEDIATE };
	struct bpfmon_actions act;
	struct cpuset shared;
	pid_t owner, intruder;

	o.remediate_scope = f->id_root;
	start(f, &o);
	assert_int_equal(bpfmon_enforcement(f->m), BPFMON_REMEDIATE);
	cpuset_zero(&shared);
	cpuset_set(&shared, SHARED_CPU);
	assert_int_equal(bpfmon_set_shared(f->m, &shared), 0);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	owner = spawn(f, f->a, EXCL_CPU, "dra-owner", 3000);
	intruder = spawn(f, f->b, EXCL_CPU, "dra-host-daemon", 3000);
	for (int i = 0; i < 30 && !pinned_to(intruder, SHARED_CPU); i++)
		run_loop(f, 50);
	assert_true(pinned_to(intruder, SHARED_CPU));
	assert_true(pinned_to(owner, EXCL_CPU));
	bpfmon_read_actions(f->m, &act);
	assert_true(act.remediated >= 1);
	assert_non_null(event_of(f, intruder));
	assert_string_equal(event_of(f, intruder)->action, "remediated");
}

/* Deny: where BPF LSM loads, an affinity change of a B task onto A's CPU is
 * refused. Where the kernel refuses the LSM program the mode falls back to
 * remediate and says why, and the refusal itself cannot be tested: a skip
 * with that reason, so the tally shows it. */
static void test_bpfmon_deny_refuses_affinity_escape(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .enforcement = BPFMON_DENY };
	cpu_set_t set;
	pid_t victim;

	o.remediate_scope = f->id_root;
	start(f, &o);
	if (bpfmon_enforcement(f->m) != BPFMON_DENY) {
		assert_int_equal(bpfmon_enforcement(f->m), BPFMON_REMEDIATE);
		assert_non_null(strstr(bpfmon_notes(f->m), "deny -> remediate"));
		print_message("skipped: deny mode unavailable here (%s)\n", bpfmon_notes(f->m));
		skip();
	}
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	victim = spawn(f, f->b, SHARED_CPU, "dra-escaper", 1000);
	CPU_ZERO(&set);
	CPU_SET(EXCL_CPU, &set);
	assert_int_equal(sched_setaffinity(victim, sizeof(set), &set), -1);
	assert_int_equal(errno, EPERM);
	CPU_ZERO(&set);
	CPU_SET(SHARED_CPU, &set);
	assert_int_equal(sched_setaffinity(victim, sizeof(set), &set), 0);
}

/* Kernels without ring buffers or task storage: the check still loads,
 * counters only, each with a reason. The histogram needs no task storage
 * (it reads the scheduler's own enqueue stamp) and stays on. */
static void test_bpfmon_degrades_without_ringbuf_and_task_storage(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = {
		.contention = true,
		.without = BPFMON_FEAT_RINGBUF | BPFMON_FEAT_TASK_STORAGE | BPFMON_FEAT_BPF_LSM,
		.enforcement = BPFMON_DENY,
	};
	struct bpfmon_counters c;
	uint64_t slots[PINNING_HIST_SLOTS], sum;

	start(f, &o);
	assert_true(bpfmon_has_contention(f->m));
	assert_int_equal(bpfmon_read_runq(f->m, slots, &sum), 0);
	assert_null(strstr(bpfmon_notes(f->m), "contention off"));
	assert_non_null(strstr(bpfmon_notes(f->m), "ring buffers"));
	assert_non_null(strstr(bpfmon_notes(f->m), "not an active LSM"));
	assert_int_equal(bpfmon_enforcement(f->m), BPFMON_REMEDIATE);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	(void)spawn(f, f->b, EXCL_CPU, "dra-intruder", 300);
	run_loop(f, 400);
	assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &c), 0);
	assert_true(c.violations[PINNING_KIND_USER] > 0);
	assert_int_equal(c.events_sent, 0);
	assert_int_equal(f->nseen, 0);
}

/* Deny needs the ring buffer and task storage even where BPF LSM is on. */
static void test_bpfmon_deny_without_ring_buffer_falls_back(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .without = BPFMON_FEAT_RINGBUF, .enforcement = BPFMON_DENY };

	start(f, &o);
	assert_int_equal(bpfmon_enforcement(f->m), BPFMON_REMEDIATE);
	assert_non_null(strstr(bpfmon_notes(f->m), "deny -> remediate: kernel lacks ring buffers"));
}

/* No BTF: neither tp_btf nor the raw_tp twins (CO-RE) can load; the object
 * still works and says why. Runs without privileges too. */
static void test_bpfmon_keeps_going_when_nothing_loads(void **st)
{
	struct bpfmon_opts o = { .without = BPFMON_FEAT_TP_BTF | BPFMON_FEAT_BTF };
	_cleanup_(bpfmon_freep) struct bpfmon *m = NULL;
	_cleanup_(metrics_freep) struct metrics *reg = NULL;
	struct bpfmon_counters c;
	struct evbuffer *out;
	char *text;

	assert_int_equal(bpfmon_new(NULL, &o, &m), 0);
	assert_false(bpfmon_is_loaded(m));
	assert_non_null(strstr(bpfmon_error(m), "kernel lacks BTF"));
	assert_int_equal(bpfmon_set_owner(m, EXCL_CPU, 12345), 0);
	assert_int_equal(bpfmon_clear_owner(m, EXCL_CPU), 0);
	assert_int_equal(bpfmon_set_owner(m, 1 << 20, 12345), -EINVAL);
	assert_int_equal(bpfmon_read_counters(m, -1, &c), -ENODEV);
	assert_int_equal(bpfmon_drain(m), 0);
	assert_int_equal(metrics_new(&reg), 0);
	assert_int_equal(bpfmon_metrics_register(m, reg), 0);
	out = evbuffer_new();
	assert_non_null(out);
	assert_int_equal(metrics_render(reg, out), 0);
	evbuffer_add(out, "", 1);
	text = (char *)evbuffer_pullup(out, -1);
	assert_non_null(strstr(text, "dra_cpu_bpf_program_loaded{program=\"pinning\"} 0\n"));
	assert_non_null(strstr(text, "\ndra_cpu_bpf_loaded 0\n"));
	assert_non_null(strstr(text, "dra_cpu_pinning_enforcement_info{mode=\"audit\",requested=\"audit\"} 1\n"));
	evbuffer_free(out);
}

/* The families of bpf-anchors.md section 6 carry what the kernel counted. */
/* The buckets the table gives dra_cpu_runqueue_latency_seconds are the BPF
 * histogram's slots: slot i ends at 2^(i+1) µs (the count is checked when
 * bpfmon.c compiles). */
static void test_bpfmon_runqueue_buckets_are_the_bpf_slots(void **st)
{
	int n;
	const double *b = metrics_family_bounds(MF_RUNQUEUE_LATENCY_SECONDS, &n);

	assert_non_null(b);
	assert_int_equal(n, PINNING_HIST_SLOTS - 1);
	for (int i = 0; i < n; i++)
		if (b[i] != (double)(2ull << i) * 1e-6)
			fail_msg("bound %d is %g, slot %d ends at %llu us", i, b[i], i, 2ull << i);
}

static void test_bpfmon_metrics_export_counters_and_histogram(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .contention = true, .self_stats = true };
	_cleanup_(metrics_freep) struct metrics *reg = NULL;
	struct cpuset shared;
	struct evbuffer *out;
	char *text;

	start(f, &o);
	assert_int_equal(metrics_new(&reg), 0);
	assert_int_equal(bpfmon_metrics_register(f->m, reg), 0);
	cpuset_zero(&shared);
	cpuset_set(&shared, SHARED_CPU);
	assert_int_equal(bpfmon_set_shared(f->m, &shared), 0);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	(void)spawn(f, f->b, EXCL_CPU, "dra-intruder", 300);
	(void)spawn(f, f->b, SHARED_CPU, "dra-shared-1", 300);
	(void)spawn(f, f->b, SHARED_CPU, "dra-shared-2", 300);
	run_loop(f, 400);
	out = evbuffer_new();
	assert_non_null(out);
	assert_int_equal(metrics_render(reg, out), 0);
	evbuffer_add(out, "", 1);
	text = (char *)evbuffer_pullup(out, -1);
	assert_non_null(strstr(text, "dra_cpu_bpf_program_loaded{program=\"pinning\"} 1\n"));
	assert_non_null(strstr(text, "dra_cpu_bpf_program_loaded{program=\"runqueue\"} 1\n"));
	assert_non_null(strstr(text, "\ndra_cpu_bpf_loaded 1\n"));
	assert_non_null(strstr(text, "dra_cpu_enforcement_mode{mode=\"audit\"} 1\n"));
	assert_non_null(strstr(text, "dra_cpu_enforcement_mode{mode=\"deny\"} 0\n"));
	assert_non_null(strstr(text, "\ndra_cpu_remediations_total "));
	assert_non_null(strstr(text, "\ndra_cpu_shared_pool_wait_seconds_total "));
	assert_non_null(strstr(text, "dra_cpu_pinning_violations_total{cpu=\"1\",kind=\"user\"} "));
	assert_null(strstr(text, "dra_cpu_pinning_violations_total{cpu=\"1\",kind=\"user\"} 0\n"));
	assert_non_null(strstr(text, "dra_cpu_pinning_violation_seconds_total{cpu=\"1\",kind=\"user\"} "));
	assert_non_null(strstr(text, "dra_cpu_runqueue_latency_seconds_bucket{pool=\"shared\",le=\"2e-06\"} "));
	assert_non_null(strstr(text, "dra_cpu_runqueue_latency_seconds_count{pool=\"shared\"} "));
	assert_null(strstr(text, "dra_cpu_runqueue_latency_seconds_count{pool=\"shared\"} 0\n"));
	assert_non_null(strstr(text, "dra_cpu_affinity_denials_total{mode=\"audit\"} "));
	assert_non_null(strstr(text, "\ndra_cpu_bpf_events_dropped_total "));
	assert_non_null(strstr(text, "dra_cpu_bpf_program_runs_total{program=\"handle_sched_switch\"} "));
	/* CPU 0 was never exclusive: no series for it. */
	assert_null(strstr(text, "dra_cpu_pinning_violations_total{cpu=\"0\""));
	evbuffer_free(out);
}

/* Interrupt work is counted on the exclusive CPU only: softirqs come with
 * the owner's ticks, hard interrupts with disk writes (the block queue's
 * interrupt lands on CPU 1 here; elsewhere it may not, so only the sum is
 * asserted). CPU 0 is nobody's: nothing there. */
static void test_bpfmon_counts_interrupt_time_on_exclusive_cpus_only(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { 0 };
	struct bpfmon_irq one, zero;
	char path[] = "/var/tmp/dra-irq-test.XXXXXX", block[4096];
	int fd;

	start(f, &o);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	(void)spawn(f, f->a, EXCL_CPU, "dra-owner", 400);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	memset(block, 'x', sizeof(block));
	for (int i = 0; i < 20; i++) {
		assert_int_equal(pwrite(fd, block, sizeof(block), (off_t)i * 4096), 4096);
		assert_int_equal(fdatasync(fd), 0);
	}
	close(fd);
	unlink(path);
	run_loop(f, 500);
	assert_int_equal(bpfmon_read_irq(f->m, EXCL_CPU, &one), 0);
	assert_int_equal(bpfmon_read_irq(f->m, 0, &zero), 0);
	print_message("CPU 1: %llu hard (%llu ns), %llu soft (%llu ns)\n",
		      (unsigned long long)one.hardirqs, (unsigned long long)one.hardirq_ns,
		      (unsigned long long)one.softirqs, (unsigned long long)one.softirq_ns);
	assert_true(one.softirqs > 0 && one.softirq_ns > 0);
	assert_true(one.hardirqs == 0 || one.hardirq_ns > 0);
	assert_int_equal(zero.hardirqs + zero.softirqs, 0);
	assert_int_equal(bpfmon_read_irq(f->m, 99999, &zero), -EINVAL);
}

/* cgroup v1 nodes: the owner is a cgroup of the cpuset hierarchy. without:
 * BPFMON_FEAT_TP_BTF runs the raw_tp twin. */
static void check_v1_cpuset_owner(void **st, unsigned without)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .cgroup = CGROUP_V1, .without = without };
	char name[64], file[PATH_MAX];
	struct cgroup_mounts m;
	uint64_t id;
	pid_t owner, desc, intruder;

	assert_int_equal(cgroup_mounts_read(&m), 0);
	if (!m.h[CGROUP_V1].point) {
		cgroup_mounts_done(&m);
		print_message("skipped: no cgroup v1 cpuset hierarchy\n");
		skip();
	}
	snprintf(name, sizeof(name), "dra-cpu-test-%d", (int)getpid());
	cg_path(f->v1, m.h[CGROUP_V1].point, name);
	cgroup_mounts_done(&m);
	cg_path(f->v1_a, f->v1, "A");
	cg_path(f->v1_child, f->v1_a, "child");
	assert_int_equal(mkdir(f->v1, 0755), 0);
	assert_int_equal(mkdir(f->v1_a, 0755), 0);
	assert_int_equal(mkdir(f->v1_child, 0755), 0);
	for (int i = 0; i < 3; i++) {
		const char *dir = i == 0 ? f->v1 : i == 1 ? f->v1_a : f->v1_child;

		cg_path(file, dir, "cpuset.cpus");
		assert_int_equal(write_str(file, "0-1"), 0);
		cg_path(file, dir, "cpuset.mems");
		assert_int_equal(write_str(file, "0"), 0);
	}
	assert_int_equal(cgroup_id(f->v1_a, &id), 0);
	start(f, &o);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, id), 0);
	/* Owner: in v1 A; its v2 cgroup (the test's own) plays no part. */
	owner = spawn(f, f->v1_a, EXCL_CPU, "dra-v1-owner", 400);
	desc = spawn(f, f->v1_child, EXCL_CPU, "dra-v1-child", 400);
	intruder = spawn(f, NULL, EXCL_CPU, "dra-v1-intruder", 400);
	run_loop(f, 600);
	assert_int_equal(events_for(f, owner), 0);
	assert_int_equal(events_for(f, desc), 0);
	assert_non_null(event_of(f, intruder));
	assert_string_equal(event_of(f, intruder)->comm, "dra-v1-intruder");
}

static void test_bpfmon_cgroup_v1_cpuset_owner(void **st)
{
	check_v1_cpuset_owner(st, 0);
}

static void test_bpfmon_cgroup_v1_cpuset_owner_raw_tp(void **st)
{
	check_v1_cpuset_owner(st, BPFMON_FEAT_TP_BTF);
}

/* The tap sees every switch-in the ring buffer carries, while the event
 * callback still gets one call per (cpu, pid) per interval. */
static int tapped;
static pid_t tap_pid;
static char tap_cgroup[PATH_MAX];

static void tap(const struct pinning_event *e, const char *cgroup, void *userdata)
{
	if (e->pid != (uint32_t)tap_pid)
		return;
	tapped++;
	snprintf(tap_cgroup, sizeof(tap_cgroup), "%s", cgroup ? cgroup : "?");
}

static void test_bpfmon_tap_sees_every_switch_in(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { 0 };

	start(f, &o);
	tapped = 0;
	tap_cgroup[0] = 0;
	bpfmon_set_tap_fn(f->m, tap, NULL);
	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	tap_pid = spawn(f, f->b, EXCL_CPU, "dra-tapped", 400);
	run_loop(f, 600);
	assert_int_equal(bpfmon_drain(f->m) >= 0, 1);
	/* ~130 wakeups in 400 ms; other tasks on CPU 1 may fill the ring
	 * buffer meanwhile, so ask only for more than the filter lets through. */
	assert_true(tapped >= 2);
	assert_int_equal(events_for(f, tap_pid), 1);
	assert_string_equal(tap_cgroup, f->b + strlen(f->mnt));
	bpfmon_set_tap_fn(f->m, NULL, NULL);
}

/* run_delay of a task (/proc/<pid>/schedstat, second field): the kernel's
 * sum of its completed run-queue waits, ns. */
static uint64_t run_delay_of(pid_t pid)
{
	unsigned long long exec_ns, delay_ns;
	char path[64];
	FILE *fp;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	fp = fopen(path, "re");
	assert_non_null(fp);
	n = fscanf(fp, "%llu %llu", &exec_ns, &delay_ns);
	fclose(fp);
	assert_int_equal(n, 2);
	return delay_ns;
}

struct runq_snap {
	uint64_t n, long_waits, sum_ns;
};

static void runq_snap(struct fx *f, struct runq_snap *ret)
{
	uint64_t slots[PINNING_HIST_SLOTS];

	memset(ret, 0, sizeof(*ret));
	assert_int_equal(bpfmon_read_runq(f->m, slots, &ret->sum_ns), 0);
	for (int i = 0; i < PINNING_HIST_SLOTS; i++) {
		ret->n += slots[i];
		/* Slot 8 starts at 256 µs: a wait behind a busy task, not a
		 * wakeup on an idle CPU. */
		if (i >= 8)
			ret->long_waits += slots[i];
	}
}

/* Waits (polling, 10 ms apart, at most 5 s) until the two tasks have waited
 * want_ns more in all than at start_ns; returns their sum. */
static uint64_t wait_run_delay(pid_t a, pid_t b, uint64_t start_ns, uint64_t want_ns)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	uint64_t now_ns = 0;

	for (int i = 0; i < 500; i++) {
		now_ns = run_delay_of(a) + run_delay_of(b);
		if (now_ns - start_ns >= want_ns)
			break;
		nanosleep(&tick, NULL);
	}
	assert_true(now_ns - start_ns >= want_ns);
	return now_ns;
}

/* Two tasks share the shared CPU and wait for each other. Off the pool their
 * waits are not measured; in it, every wait that ends while we watch is in
 * the histogram with the length the kernel adds to their run_delay (the
 * histogram also holds other tasks' waits on that CPU: a lower bound). */
static void check_runq_sees_real_waits(struct fx *f)
{
	struct runq_snap h0, h1;
	struct cpuset shared;
	uint64_t rd0, rd1;
	pid_t a, b;

	a = spawn(f, f->b, SHARED_CPU, "dra-shared-1", 5000);
	b = spawn(f, f->b, SHARED_CPU, "dra-shared-2", 5000);

	cpuset_zero(&shared);
	assert_int_equal(bpfmon_set_shared(f->m, &shared), 0);
	runq_snap(f, &h0);
	rd0 = run_delay_of(a) + run_delay_of(b);
	(void)wait_run_delay(a, b, rd0, 20 * 1000 * 1000);
	runq_snap(f, &h1);
	assert_int_equal(h1.n, h0.n);
	assert_int_equal(h1.sum_ns, h0.sum_ns);

	cpuset_set(&shared, SHARED_CPU);
	assert_int_equal(bpfmon_set_shared(f->m, &shared), 0);
	runq_snap(f, &h0);
	rd0 = run_delay_of(a) + run_delay_of(b);
	rd1 = wait_run_delay(a, b, rd0, 100 * 1000 * 1000);
	runq_snap(f, &h1);
	print_message("runq: %" PRIu64 " waits (%" PRIu64 " >= 256 us), %.1f ms; the two "
		      "tasks' run_delay grew %.1f ms\n",
		      h1.n - h0.n, h1.long_waits - h0.long_waits,
		      (double)(h1.sum_ns - h0.sum_ns) / 1e6, (double)(rd1 - rd0) / 1e6);
	assert_true(h1.n - h0.n >= 20);
	assert_true(h1.long_waits - h0.long_waits >= 10);
	assert_true(h1.sum_ns - h0.sum_ns >= rd1 - rd0);
}

/* The histogram measures waits the scheduler itself accounts. */
static void test_bpfmon_runq_histogram_matches_kernel_run_delay(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .contention = true };
	uint64_t runs, ns;

	start(f, &o);
	assert_true(bpfmon_has_contention(f->m));
	assert_int_equal(bpfmon_prog_stats(f->m, "handle_sched_switch_runq", &runs, &ns), 0);
	check_runq_sees_real_waits(f);
}

/* Kernels without tp_btf get the raw_tp twins: forced here, they load in
 * place of the tp_btf programs, name an intruder and fill the histogram. */
static void test_bpfmon_raw_tp_twins_load_and_count(void **st)
{
	struct fx *f = need_kernel(st);
	struct bpfmon_opts o = { .contention = true, .without = BPFMON_FEAT_TP_BTF };
	struct bpfmon_counters c;
	uint64_t runs, ns;
	pid_t owner, intruder;

	start(f, &o);
	assert_non_null(strstr(bpfmon_notes(f->m), "raw_tp programs"));
	assert_true(bpfmon_has_contention(f->m));
	assert_int_equal(bpfmon_prog_stats(f->m, "handle_sched_switch_raw", &runs, &ns), 0);
	assert_int_equal(bpfmon_prog_stats(f->m, "handle_sched_switch_runq_raw", &runs, &ns), 0);
	assert_int_equal(bpfmon_prog_stats(f->m, "handle_sched_switch", &runs, &ns), -ENOENT);
	assert_int_equal(bpfmon_prog_stats(f->m, "handle_sched_switch_runq", &runs, &ns), -ENOENT);

	assert_int_equal(bpfmon_set_owner(f->m, EXCL_CPU, f->id_a), 0);
	owner = spawn(f, f->child, EXCL_CPU, "dra-raw-owner", 400);
	intruder = spawn(f, f->b, EXCL_CPU, "dra-raw-intrude", 400);
	run_loop(f, 600);
	assert_int_equal(bpfmon_read_counters(f->m, EXCL_CPU, &c), 0);
	assert_true(c.owner_switches >= 50);
	assert_true(c.violations[PINNING_KIND_USER] >= 50);
	assert_int_equal(events_for(f, owner), 0);
	assert_non_null(event_of(f, intruder));
	assert_string_equal(event_of(f, intruder)->comm, "dra-raw-intrude");
	assert_int_equal(event_of(f, intruder)->kind, PINNING_KIND_USER);

	check_runq_sees_real_waits(f);
}

/* The probe loads and attaches every object it can and says why the others
 * fail; enforce is allowed to fail (BPF LSM is not everywhere), but then
 * with a reason. */
/* Object i of the probe is name, loaded and attached. */
static void assert_probed(const struct bpfmon_probe *p, int i, const char *name)
{
	assert_string_equal(p->obj[i].name, name);
	assert_int_equal(p->obj[i].load, 0);
	assert_int_equal(p->obj[i].attach, 0);
}

static void test_bpfmon_probe_loads_every_object(void **st)
{
	_cleanup_(bpfmon_probe_freep) struct bpfmon_probe *p = NULL;

	if (geteuid() != 0) {
		print_message("skipped: needs CAP_BPF\n");
		skip();
	}
	need_bpf_syscall();
	assert_int_equal(bpfmon_probe_new(CGROUP_V2, &p), 0);
	assert_true(p->features & BPFMON_FEAT_BTF);
	assert_true(p->features & BPFMON_FEAT_TP_BTF);
	assert_probed(p, BPFMON_OBJ_PINNING, "pinning");
	assert_probed(p, BPFMON_OBJ_BASELINE, "baseline");
	/* the run-queue programs and the real-time monitor: every kernel with
	 * tp_btf takes them (6.1's verifier once refused the first) */
	assert_probed(p, BPFMON_OBJ_RUNQUEUE, "runqueue");
	assert_probed(p, BPFMON_OBJ_RT, "rt");
	for (int i = 0; i < BPFMON_OBJ_MAX; i++)
		assert_non_null(p->obj[i].log);
	if (p->obj[BPFMON_OBJ_ENFORCE].load < 0) {
		/* libbpf names the program that failed. */
		assert_non_null(strstr(p->obj[BPFMON_OBJ_ENFORCE].log, "prog '"));
		print_message("enforce does not load here: %s\n",
			      strerror(-p->obj[BPFMON_OBJ_ENFORCE].load));
	}
	assert_int_equal(bpfmon_probe_new((enum cgroup_hier)7, &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bpfmon_counts_interrupt_time_on_exclusive_cpus_only,
						setup, teardown),
		cmocka_unit_test(test_bpfmon_keeps_going_when_nothing_loads),
		cmocka_unit_test(test_bpfmon_runqueue_buckets_are_the_bpf_slots),
		cmocka_unit_test_setup_teardown(test_bpfmon_owner_and_descendant_are_not_violations,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_intruder_is_counted_and_named, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_kthreads_are_counted_apart, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_runq_histogram_samples_shared_cpu, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_remediate_moves_host_intruder, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_deny_refuses_affinity_escape, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_degrades_without_ringbuf_and_task_storage,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_deny_without_ring_buffer_falls_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_metrics_export_counters_and_histogram,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_cgroup_v1_cpuset_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_cgroup_v1_cpuset_owner_raw_tp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_runq_histogram_matches_kernel_run_delay,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_raw_tp_twins_load_and_count, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bpfmon_tap_sees_every_switch_in, setup,
						teardown),
		cmocka_unit_test(test_bpfmon_probe_loads_every_object),
	};

	log_set_level(LOG_ERROR); /* violations by the machine's own tasks are warnings */
	testfilter_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
