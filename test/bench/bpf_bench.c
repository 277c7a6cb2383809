/* Per-switch cost of the sched_switch programs, two ways.
 *
 * 1. Wall clock: none vs bpf/baseline.bpf.c vs bpf/pinning.bpf.c (CPU not
 *    exclusive / owner running / every switch a violation) vs pinning +
 *    run-queue latency. Two threads ping-pong one byte over two pipes, both
 *    pinned to one CPU, so a round trip is exactly two context switches.
 *    Runs alternate (no program, program, ...), each program run with a
 *    fresh load and detach; the figure is the median of the per-pair
 *    ratios, and "+ns/switch" the median of (t_prog - t_none) / 2 per round
 *    trip.
 *
 * 2. The kernel's own accounting (bpf_enable_stats(BPF_STATS_RUN_TIME):
 *    run_time_ns / run_cnt per program), in one load: the empty program
 *    (baseline.bpf.c) and every pinning.bpf.c program attached together,
 *    then the same ping-pong through four phases that take each program
 *    down its paths (CPU 1 not exclusive, owned by the bench's cgroup, owned
 *    by another one, in the shared pool). Per phase and program: ns per run
 *    and the difference to the empty program, which cancels the
 *    instrumentation itself (about 30-60 ns per run: two clock reads). The
 *    run-queue programs' cost per context switch is their summed run time
 *    over the empty program's run count (it runs once per switch on every
 *    CPU; the ping-pong CPU makes nearly all of them). The same again with
 *    the raw_tp twins, as information. Last, the targets as ratio lines:
 *
 *      target <name>: <value> <unit> < <limit>: ratio <value/limit> PASS|FAIL
 *
 * 4. The interrupt-time programs of pinning.bpf.c (irq and softirq entry and
 *    exit) next to empty programs on the same hooks (baseline.bpf.c), while
 *    disk writes with fdatasync raise interrupts: every CPU not exclusive,
 *    then every CPU exclusive. -I runs only this part.
 *
 * 3. The real-time monitor (bpf/rt.bpf.c), the same way: its run time per
 *    run next to the empty program's while the CPU is not a real-time one
 *    (the early exit every other CPU of a node takes), while it is one and
 *    the ping-pong threads belong to no claim (the foreign path), and while
 *    their cgroup owns it (the owner lookup on every switch).
 *
 * Needs root (CAP_BPF, cgroup v2 writes); prints "skipped: needs CAP_BPF"
 * and exits 0 otherwise. Build without make (after `make`, which generates
 * the skeletons and build/libdracpu.a): test/bench/bpf_bench.sh, or
 *
 *   cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Iuser -Iinclude -Ibuild \
 *      test/bench/bpf_bench.c build/libdracpu.a \
 *      $(pkg-config --cflags --libs libbpf libevent) -lpthread -lm -o build/bpf_bench
 *   build/bpf_bench [-c cpu] [-n round_trips] [-p pairs] [-s stats_round_trips] [-f] [-I]
 *
 * -f runs both threads SCHED_FIFO so the rest of a busy machine does not
 * interleave with the ping-pong (RT throttling still leaves it 5 %).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "baseline.skel.h"
#include "host/cgroup.h"
#include "pinning/bpfmon.h"
#include "pinning/rtmon.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"

enum mode { M_BASELINE, M_PIN_UNOWNED, M_PIN_OWNER, M_PIN_FOREIGN, M_PIN_RUNQ, M_COUNT };

static const char *const mode_names[M_COUNT] = {
	[M_BASELINE] = "baseline (count only)",
	[M_PIN_UNOWNED] = "pinning, CPU not exclusive",
	[M_PIN_OWNER] = "pinning, owner runs",
	[M_PIN_FOREIGN] = "pinning, all violations",
	[M_PIN_RUNQ] = "pinning + runq latency",
};

struct bench {
	int cpu;
	bool fifo;
	long round_trips, stats_round_trips;
	int pairs;
	char cg_mine[PATH_MAX], cg_other[PATH_MAX], cg_procs_root[PATH_MAX];
	uint64_t id_mine, id_other;
};

struct pong {
	int in, out, cpu;
	bool fifo;
	long n;
};

static int pin_self(int cpu, bool fifo)
{
	struct sched_param sp = { .sched_priority = 10 };
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		return -errno;
	if (fifo && sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		return -errno;
	return 0;
}

static void *ponger(void *arg)
{
	struct pong *p = arg;
	char c;

	if (pin_self(p->cpu, p->fifo) < 0)
		return NULL;
	for (long i = 0; i < p->n; i++)
		if (read(p->in, &c, 1) != 1 || write(p->out, &c, 1) != 1)
			break;
	return NULL;
}

/* ns per round trip of one ping-pong run. */
static double ping_pong(const struct bench *b)
{
	int ab[2], ba[2];
	struct pong p;
	struct timespec t0, t1;
	pthread_t th;
	char c = 'x';

	if (pipe(ab) < 0 || pipe(ba) < 0)
		return -1;
	p = (struct pong){
		.in = ab[0], .out = ba[1], .cpu = b->cpu, .fifo = b->fifo, .n = b->round_trips
	};
	if (pin_self(b->cpu, b->fifo) < 0 || pthread_create(&th, NULL, ponger, &p))
		return -1;
	/* Warm up: both threads on the CPU, caches hot. */
	for (int i = 0; i < 1000; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < b->round_trips - 1000; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return -1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(th, NULL);
	if (b->fifo) {
		struct sched_param sp = { 0 };

		(void)sched_setscheduler(0, SCHED_OTHER, &sp); /* loading BPF is not RT work */
	}
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
	       (double)(b->round_trips - 1000);
}

/* What a mode attaches; *ret_base or *ret_mon is set. */
static int attach(const struct bench *b, enum mode m, struct baseline_bpf **ret_base,
		  struct bpfmon **ret_mon)
{
	struct bpfmon_opts o = { .contention = m == M_PIN_RUNQ };
	struct cpuset shared;
	int r;

	if (m == M_BASELINE) {
		*ret_base = baseline_bpf__open_and_load();
		if (!*ret_base)
			return -errno;
		return baseline_bpf__attach(*ret_base);
	}
	r = bpfmon_new(NULL, &o, ret_mon);
	if (r < 0)
		return r;
	if (!bpfmon_is_loaded(*ret_mon)) {
		fprintf(stderr, "bpf_bench: pinning not loaded: %s\n", bpfmon_error(*ret_mon));
		return -ENODEV;
	}
	if (m == M_PIN_OWNER)
		return bpfmon_set_owner(*ret_mon, b->cpu, b->id_mine);
	if (m == M_PIN_FOREIGN)
		return bpfmon_set_owner(*ret_mon, b->cpu, b->id_other);
	if (m == M_PIN_RUNQ) {
		cpuset_zero(&shared);
		cpuset_set(&shared, b->cpu);
		return bpfmon_set_shared(*ret_mon, &shared);
	}
	return 0;
}

static void detach(struct baseline_bpf *base, struct bpfmon *mon)
{
	baseline_bpf__destroy(base);
	bpfmon_free(mon);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the kernel's accounting: one load, four phases ------------------------------------ */

enum phase { P_UNOWNED, P_OWNER, P_FOREIGN, P_SHARED, P_COUNT };

static const char *const phase_names[P_COUNT] = {
	[P_UNOWNED] = "CPU not exclusive",
	[P_OWNER] = "owner runs",
	[P_FOREIGN] = "all violations",
	[P_SHARED] = "shared pool",
};

enum { PROG_EMPTY, PROG_PINNING, PROG_RUNQ, PROG_COUNT };

struct stats_run {
	bool raw; /* the raw_tp twins instead of the tp_btf programs */
	const char *names[PROG_COUNT];
	uint64_t runs[P_COUNT][PROG_COUNT], ns[P_COUNT][PROG_COUNT];
};

static int prog_read(struct baseline_bpf *base, struct bpfmon *mon, const char *name,
		     uint64_t *ret_runs, uint64_t *ret_ns)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (mon)
		return bpfmon_prog_stats(mon, name, ret_runs, ret_ns);
	if (bpf_obj_get_info_by_fd(bpf_program__fd(base->progs.handle_sched_switch), &info,
				   &len) < 0)
		return -errno;
	*ret_runs = info.run_cnt;
	*ret_ns = info.run_time_ns;
	return 0;
}

/* CPU b->cpu as phase p wants it: owned by us, by the other cgroup, in the
 * shared pool, or none of these. */
static int phase_set(struct bpfmon *mon, const struct bench *b, enum phase p)
{
	struct cpuset shared;
	int r;

	cpuset_zero(&shared);
	if (p == P_SHARED)
		cpuset_set(&shared, b->cpu);
	r = bpfmon_set_shared(mon, &shared);
	if (r < 0)
		return r;
	if (p == P_OWNER)
		return bpfmon_set_owner(mon, b->cpu, b->id_mine);
	if (p == P_FOREIGN)
		return bpfmon_set_owner(mon, b->cpu, b->id_other);
	return bpfmon_clear_owner(mon, b->cpu);
}

/* One load of the empty program and of pinning.bpf.c with its run-queue
 * program, stats on, then the ping-pong once per phase; run counts and run
 * time per phase into sr. */
static int stats_measure(const struct bench *b, struct stats_run *sr)
{
	struct bpfmon_opts o = { .contention = true,
				 .without = sr->raw ? BPFMON_FEAT_TP_BTF : 0 };
	struct baseline_bpf *base = NULL;
	struct bpfmon *mon = NULL;
	struct bench pb = *b;
	int stats_fd, r;

	sr->names[PROG_EMPTY] = "empty (baseline.bpf.c)";
	sr->names[PROG_PINNING] = sr->raw ? "handle_sched_switch_raw" : "handle_sched_switch";
	sr->names[PROG_RUNQ] = sr->raw ? "handle_sched_switch_runq_raw"
				       : "handle_sched_switch_runq";
	pb.round_trips = b->stats_round_trips;
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		return -errno;
	base = baseline_bpf__open_and_load();
	r = base ? baseline_bpf__attach(base) : -errno;
	if (r == 0)
		r = bpfmon_new(NULL, &o, &mon);
	if (r == 0 && !bpfmon_is_loaded(mon)) {
		fprintf(stderr, "bpf_bench: pinning not loaded: %s\n", bpfmon_error(mon));
		r = -ENODEV;
	} else if (r == 0 && !bpfmon_has_contention(mon)) {
		fprintf(stderr, "bpf_bench: no run-queue programs: %s\n", bpfmon_notes(mon));
		r = -ENODEV;
	}
	for (int p = 0; r == 0 && p < P_COUNT; p++) {
		uint64_t runs0[PROG_COUNT], ns0[PROG_COUNT];

		r = phase_set(mon, b, (enum phase)p);
		for (int i = 0; r == 0 && i < PROG_COUNT; i++)
			r = prog_read(base, i == PROG_EMPTY ? NULL : mon, sr->names[i], &runs0[i],
				      &ns0[i]);
		if (r == 0 && ping_pong(&pb) <= 0)
			r = -EIO;
		for (int i = 0; r == 0 && i < PROG_COUNT; i++) {
			r = prog_read(base, i == PROG_EMPTY ? NULL : mon, sr->names[i],
				      &sr->runs[p][i], &sr->ns[p][i]);
			sr->runs[p][i] -= runs0[i];
			sr->ns[p][i] -= ns0[i];
		}
	}
	bpfmon_free(mon);
	baseline_bpf__destroy(base);
	close(stats_fd);
	return r;
}

static double per_run(const struct stats_run *sr, enum phase p, int i)
{
	return sr->runs[p][i] ? (double)sr->ns[p][i] / (double)sr->runs[p][i] : 0;
}

/* Run-queue programs' run time per context switch in phase p: the empty
 * program runs once per switch. net: each run charged only what it costs
 * over an empty program's run, which cancels the instrumentation (the same
 * two clock reads around every program). */
static double runq_per_switch(const struct stats_run *sr, enum phase p, bool net)
{
	double ns = (double)sr->ns[p][PROG_RUNQ];

	if (!sr->runs[p][PROG_EMPTY])
		return 0;
	if (net)
		ns -= (double)sr->runs[p][PROG_RUNQ] * per_run(sr, p, PROG_EMPTY);
	return ns / (double)sr->runs[p][PROG_EMPTY];
}

static void stats_print(const struct bench *b, const struct stats_run *sr)
{
	printf("\nbpf_stats %s: kernel-accounted run time, one load, %ld round trips per phase on "
	       "CPU %d\n",
	       sr->raw ? "raw_tp" : "tp_btf", b->stats_round_trips, b->cpu);
	printf("%-18s %-30s %10s %8s %11s\n", "phase", "program", "runs", "ns/run", "over empty");
	for (int p = 0; p < P_COUNT; p++) {
		for (int i = 0; i < PROG_COUNT; i++) {
			printf("%-18s %-30s %10" PRIu64 " %8.1f", phase_names[p], sr->names[i],
			       sr->runs[p][i], per_run(sr, (enum phase)p, i));
			if (i != PROG_EMPTY)
				printf(" %+11.1f", per_run(sr, (enum phase)p, i) -
							   per_run(sr, (enum phase)p, PROG_EMPTY));
			putchar('\n');
		}
	}
	printf("bpf_stats %s: run-queue programs per context switch, shared pool: %+.1f ns over "
	       "empty, %.1f ns in all (%" PRIu64 " ns over %" PRIu64 " switches)\n",
	       sr->raw ? "raw_tp" : "tp_btf", runq_per_switch(sr, P_SHARED, true),
	       runq_per_switch(sr, P_SHARED, false), sr->ns[P_SHARED][PROG_RUNQ],
	       sr->runs[P_SHARED][PROG_EMPTY]);
}

static void target(const char *name, double value, const char *unit, double limit)
{
	printf("target %s: %.1f %s < %.0f: ratio %.2f %s\n", name, value, unit, limit,
	       value / limit, value < limit ? "PASS" : "FAIL");
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

/* The bench runs in cgroup "mine"; "other" owns the CPU in the violation
 * mode. Both under the cgroup2 mount, removed at the end. */
static int cgroups_make(struct bench *b)
{
	struct cgroup_mounts m;
	const char *mnt;
	char self[32];
	int r;

	r = cgroup_mounts_read(&m);
	if (r < 0)
		return r;
	mnt = m.h[CGROUP_V2].point;
	if (!mnt) {
		cgroup_mounts_done(&m);
		return -ENOENT;
	}
	snprintf(b->cg_mine, sizeof(b->cg_mine), "%s/dra-cpu-bench-%d", mnt, (int)getpid());
	snprintf(b->cg_other, sizeof(b->cg_other), "%s/dra-cpu-bench-%d-other", mnt, (int)getpid());
	snprintf(b->cg_procs_root, sizeof(b->cg_procs_root), "%s/cgroup.procs", mnt);
	cgroup_mounts_done(&m);
	if (mkdir(b->cg_mine, 0755) < 0 || mkdir(b->cg_other, 0755) < 0)
		return -errno;
	r = cgroup_id(b->cg_mine, &b->id_mine);
	if (!r)
		r = cgroup_id(b->cg_other, &b->id_other);
	if (r < 0)
		return r;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	{
		char procs[PATH_MAX + 16];

		snprintf(procs, sizeof(procs), "%s/cgroup.procs", b->cg_mine);
		return write_file(procs, self);
	}
}

/* ---- the real-time monitor ------------------------------------------------------------ */

enum rt_phase { RP_OFF, RP_FOREIGN, RP_OWNED, RP_COUNT };
static const char *const rt_phase_names[RP_COUNT] = {
	[RP_OFF] = "CPU not real-time",
	[RP_FOREIGN] = "foreign tasks",
	[RP_OWNED] = "claim's tasks",
};

struct rt_run {
	uint64_t runs[RP_COUNT][2], ns[RP_COUNT][2]; /* [phase][0: empty, 1: rt monitor] */
};

static int rt_read(struct baseline_bpf *base, struct rtmon *mon, uint64_t *runs, uint64_t *ns)
{
	int r = prog_read(base, NULL, "empty", &runs[0], &ns[0]);

	return r ?: rtmon_prog_stats(mon, &ns[1], &runs[1]);
}

static int rt_measure(const struct bench *b, struct rt_run *rr)
{
	struct rtmon_opts o = { 0 };
	struct baseline_bpf *base = NULL;
	struct rtmon *mon = NULL;
	struct errbuf eb = { "" };
	struct bench pb = *b;
	int stats_fd, r;

	pb.round_trips = b->stats_round_trips;
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		return -errno;
	base = baseline_bpf__open_and_load();
	r = base ? baseline_bpf__attach(base) : -errno;
	if (r == 0) {
		r = rtmon_new(&o, &mon, &eb);
		if (r < 0)
			fprintf(stderr, "bpf_bench: real-time monitor: %s\n", eb.s);
	}
	for (int p = 0; r == 0 && p < RP_COUNT; p++) {
		uint64_t runs0[2], ns0[2];

		if (p == RP_FOREIGN)
			r = rtmon_watch(mon, b->cpu, true);
		else if (p == RP_OWNED)
			r = rtmon_own(mon, b->id_mine, b->cpu, true);
		if (r == 0)
			r = rt_read(base, mon, runs0, ns0);
		if (r == 0 && ping_pong(&pb) <= 0)
			r = -EIO;
		if (r == 0)
			r = rt_read(base, mon, rr->runs[p], rr->ns[p]);
		for (int i = 0; r == 0 && i < 2; i++) {
			rr->runs[p][i] -= runs0[i];
			rr->ns[p][i] -= ns0[i];
		}
	}
	rtmon_free(mon);
	baseline_bpf__destroy(base);
	close(stats_fd);
	return r;
}

static double rt_per_run(const struct rt_run *rr, int p, int i)
{
	return rr->runs[p][i] ? (double)rr->ns[p][i] / (double)rr->runs[p][i] : 0;
}

static void rt_print(const struct bench *b, const struct rt_run *rr)
{
	printf("\nbpf_stats real-time monitor (bpf/rt.bpf.c), %ld round trips per phase on CPU %d\n",
	       b->stats_round_trips, b->cpu);
	printf("%-18s %-30s %10s %8s %11s\n", "phase", "program", "runs", "ns/run", "over empty");
	for (int p = 0; p < RP_COUNT; p++) {
		printf("%-18s %-30s %10" PRIu64 " %8.1f\n", rt_phase_names[p], "empty (baseline.bpf.c)",
		       rr->runs[p][0], rt_per_run(rr, p, 0));
		printf("%-18s %-30s %10" PRIu64 " %8.1f %+11.1f\n", rt_phase_names[p],
		       "handle_rt_switch", rr->runs[p][1], rt_per_run(rr, p, 1),
		       rt_per_run(rr, p, 1) - rt_per_run(rr, p, 0));
	}
}

/* ---- the interrupt-time programs: bpf_stats next to empty ones on their hooks ------------ */

enum { IP_NOT_EXCLUSIVE, IP_EXCLUSIVE, IP_COUNT };
/* Each phase in rounds of IRQ_WRITES writes: a round takes about 3000 runs of
 * each program. The program a hook calls first pays for what the interrupt
 * left cold (on the development VM 50-100 ns more per run than the same
 * program called second), so neither compared program is ever first: a third
 * set of empty programs (lead_attach) is attached before both. Half the rounds
 * run with the yardstick before ours, half after, and the figure is the mean
 * of the two halves' medians; the halves agree to a few ns.
 *
 * What remains is ours. Tried on the development VM, all in place of ours
 * behind the lead: an empty program again, -3 to +5 ns; one that only reads
 * the CPU number, +3; the full gate (one load from the owner table) +12 on
 * the softirq hooks and +20 to +80 on irq_handler_entry, the first hook of an
 * interrupt, where that load misses the caches of a CPU that was halted. A
 * gate in a global bitmap instead of the owner table costs the same. */
enum { IRQ_PROGS = 4, IRQ_WRITES = 1500, IRQ_ROUNDS = 8 };
static const char *const irq_phase_names[IP_COUNT] = { "CPU not exclusive", "CPU exclusive" };
static const char *const irq_progs[] = { "handle_irq_entry", "handle_irq_exit",
					 "handle_softirq_entry", "handle_softirq_exit" };
static const char *const irq_hooks[] = { "irq_handler_entry", "irq_handler_exit",
					 "softirq_entry", "softirq_exit" };

/* Per phase and round, each program's runs and run time, then the empty
 * program on the same hook at IRQ_PROGS + i. */
struct irq_run {
	uint64_t runs[IP_COUNT][IRQ_ROUNDS][2 * IRQ_PROGS];
	uint64_t ns[IP_COUNT][IRQ_ROUNDS][2 * IRQ_PROGS];
};

static int empty_read(struct baseline_bpf *base, int hook, uint64_t *runs, uint64_t *ns)
{
	struct bpf_program *const progs[] = { base->progs.noop_irq_entry,
					      base->progs.noop_irq_exit,
					      base->progs.noop_softirq_entry,
					      base->progs.noop_softirq_exit };
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(bpf_program__fd(progs[hook]), &info, &len) < 0)
		return -errno;
	*runs = info.run_cnt;
	*ns = info.run_time_ns;
	return 0;
}

static int irq_read(struct baseline_bpf *base, struct bpfmon *mon, uint64_t *runs, uint64_t *ns)
{
	int r = 0;

	for (int i = 0; r == 0 && i < IRQ_PROGS; i++) {
		r = bpfmon_prog_stats(mon, irq_progs[i], &runs[i], &ns[i]);
		r = r ?: empty_read(base, i, &runs[IRQ_PROGS + i], &ns[IRQ_PROGS + i]);
	}
	return r;
}

/* Interrupts for a while: disk writes with fdatasync (the block queue's
 * interrupt and its softirq) and the ticks and timers of a busy second. */
static int make_interrupts(void)
{
	char path[] = "/var/tmp/dra-bpf-bench.XXXXXX", block[4096];
	int fd = mkstemp(path), r = 0;

	if (fd < 0)
		return -errno;
	memset(block, 'i', sizeof(block));
	for (int i = 0; r == 0 && i < IRQ_WRITES; i++)
		if (pwrite(fd, block, sizeof(block), (off_t)(i % 64) * 4096) != 4096 ||
		    fdatasync(fd) < 0)
			r = -errno;
	close(fd);
	unlink(path);
	return r;
}

/* The empty programs of another baseline.bpf.c first on the four hooks:
 * whatever is called first pays for what the interrupt left cold, and that
 * is neither of the two compared. */
static int lead_attach(struct baseline_bpf *lead)
{
	lead->links.noop_irq_entry = bpf_program__attach(lead->progs.noop_irq_entry);
	lead->links.noop_irq_exit = bpf_program__attach(lead->progs.noop_irq_exit);
	lead->links.noop_softirq_entry = bpf_program__attach(lead->progs.noop_softirq_entry);
	lead->links.noop_softirq_exit = bpf_program__attach(lead->progs.noop_softirq_exit);
	return lead->links.noop_irq_entry && lead->links.noop_irq_exit &&
			       lead->links.noop_softirq_entry && lead->links.noop_softirq_exit
		       ? 0
		       : -EIO;
}

/* The phases alternate round by round, so that what the machine does over
 * the minute falls on both. */
static int irq_measure(const struct bench *b, struct irq_run *ir)
{
	struct bpfmon_opts o = { 0 };
	struct baseline_bpf *base = NULL, *lead = NULL;
	struct bpfmon *mon = NULL;
	int stats_fd, r;

	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		return -errno;
	lead = baseline_bpf__open_and_load();
	r = lead ? lead_attach(lead) : -errno;
	base = r == 0 ? baseline_bpf__open_and_load() : NULL;
	r = r ?: base ? baseline_bpf__attach(base) : -errno;
	if (r == 0)
		r = bpfmon_new(NULL, &o, &mon);
	if (r == 0 && !bpfmon_is_loaded(mon))
		r = -ENODEV;
	for (int k = 0; r == 0 && k < IRQ_ROUNDS; k++) {
		if (k == IRQ_ROUNDS / 2) { /* the empty programs after ours now */
			baseline_bpf__detach(base);
			r = baseline_bpf__attach(base);
		}
		for (int p = 0; r == 0 && p < IP_COUNT; p++) {
			uint64_t runs0[2 * IRQ_PROGS], ns0[2 * IRQ_PROGS];

			/* exclusive: every CPU, so that whichever takes the
			 * interrupts runs the full path */
			for (int cpu = 0; r == 0 && cpu <= b->cpu; cpu++)
				r = p == IP_EXCLUSIVE ? bpfmon_set_owner(mon, cpu, b->id_mine)
						      : bpfmon_clear_owner(mon, cpu);
			r = r ?: irq_read(base, mon, runs0, ns0);
			r = r ?: make_interrupts();
			r = r ?: irq_read(base, mon, ir->runs[p][k], ir->ns[p][k]);
			for (int i = 0; r == 0 && i < 2 * IRQ_PROGS; i++) {
				ir->runs[p][k][i] -= runs0[i];
				ir->ns[p][k][i] -= ns0[i];
			}
		}
	}
	bpfmon_free(mon);
	baseline_bpf__destroy(base);
	baseline_bpf__destroy(lead);
	close(stats_fd);
	return r;
}

static double ns_per_run(uint64_t ns, uint64_t runs)
{
	return runs ? (double)ns / (double)runs : 0;
}

/* Program i (< IRQ_PROGS) over the empty one on its hook: the mean of the
 * medians of the rounds' differences in each attach order. */
static double irq_delta(const struct irq_run *ir, int p, int i)
{
	double d[IRQ_ROUNDS];

	for (int k = 0; k < IRQ_ROUNDS; k++)
		d[k] = ns_per_run(ir->ns[p][k][i], ir->runs[p][k][i]) -
		       ns_per_run(ir->ns[p][k][IRQ_PROGS + i], ir->runs[p][k][IRQ_PROGS + i]);
	return (median(d, IRQ_ROUNDS / 2) + median(d + IRQ_ROUNDS / 2, IRQ_ROUNDS / 2)) / 2;
}

/* The worst program over the empty one on its hook. */
static double irq_over_empty(const struct irq_run *ir, int p)
{
	double worst = -1e9;

	for (int i = 0; i < IRQ_PROGS; i++) {
		double d = irq_delta(ir, p, i);

		worst = d > worst ? d : worst;
	}
	return worst;
}

static void irq_print(const struct irq_run *ir)
{
	printf("\nbpf_stats tp_btf: interrupt-time programs, %d rounds of %d disk writes with "
	       "fdatasync per phase, the phases alternating; on each hook another empty program "
	       "first, then the yardstick before ours in the first half, after it in the "
	       "second\n%-18s %-42s %10s %8s %11s\n",
	       IRQ_ROUNDS, IRQ_WRITES, "phase", "program", "runs", "ns/run",
	       "over empty (mean of the orders' medians)");
	for (int p = 0; p < IP_COUNT; p++) {
		for (int i = 0; i < 2 * IRQ_PROGS; i++) {
			uint64_t runs = 0, ns = 0;
			char name[64];

			for (int k = 0; k < IRQ_ROUNDS; k++) {
				runs += ir->runs[p][k][i];
				ns += ir->ns[p][k][i];
			}
			snprintf(name, sizeof(name), "%s%s", i < IRQ_PROGS ? "" : "empty ",
				 i < IRQ_PROGS ? irq_progs[i] : irq_hooks[i - IRQ_PROGS]);
			printf("%-18s %-42s %10" PRIu64 " %8.1f", irq_phase_names[p], name, runs,
			       ns_per_run(ns, runs));
			if (i < IRQ_PROGS)
				printf(" %+11.1f", irq_delta(ir, p, i));
			putchar('\n');
		}
	}
}

static void cgroups_remove(const struct bench *b)
{
	char self[32];

	snprintf(self, sizeof(self), "%d", (int)getpid());
	(void)write_file(b->cg_procs_root, self);
	if (b->cg_mine[0])
		rmdir(b->cg_mine);
	if (b->cg_other[0])
		rmdir(b->cg_other);
}

/* The pinning and real-time targets (the interrupt one is printed apart). */
static void print_targets(const struct bench *b, const struct stats_run *sr)
{
	int r;

	/* Both net of the instrumentation, which costs as much as the whole
	 * histogram on some machines (about 60 ns per run on the development
	 * VM, 30 on the reference one): the pinning check on its full path (the
	 * owner runs) per run, the histogram on a shared CPU per switch. */
	putchar('\n');
	target("pinning check over empty", per_run(&sr[0], P_OWNER, PROG_PINNING) -
						   per_run(&sr[0], P_OWNER, PROG_EMPTY),
	       "ns/run", 15);
	target("contention histogram over empty", runq_per_switch(&sr[0], P_SHARED, true),
	       "ns/switch", 60);
	{
		struct rt_run rr = { 0 };

		r = rt_measure(b, &rr);
		if (r < 0) {
			fprintf(stderr, "bpf_bench: real-time monitor: %s\n", strerror(-r));
		} else {
			rt_print(b, &rr);
			/* Every CPU but the real-time ones takes the early exit: it
			 * must cost what the pinning check's does. The real-time
			 * path runs only there, at a few switches per period. */
			putchar('\n');
			target("real-time monitor, other CPUs, over empty",
			       rt_per_run(&rr, RP_OFF, 1) - rt_per_run(&rr, RP_OFF, 0), "ns/run", 15);
			target("real-time monitor, real-time CPU, over empty",
			       rt_per_run(&rr, RP_OWNED, 1) - rt_per_run(&rr, RP_OWNED, 0), "ns/run",
			       200);
		}
	}
}

int main(int argc, char **argv)
{
	struct bench b = { .cpu = 1, .round_trips = 200000, .stats_round_trips = 200000, .pairs = 7 };
	struct stats_run sr[2] = { { .raw = false }, { .raw = true } };
	struct utsname u;
	int opt, r;

	bool irq_only = false;

	while ((opt = getopt(argc, argv, "c:n:p:s:fI")) != -1) {
		switch (opt) {
		case 'c':
			b.cpu = (int)strtol(optarg, NULL, 10);
			break;
		case 'n':
			b.round_trips = strtol(optarg, NULL, 10);
			break;
		case 'p':
			b.pairs = (int)strtol(optarg, NULL, 10);
			break;
		case 's':
			b.stats_round_trips = strtol(optarg, NULL, 10);
			break;
		case 'f':
			b.fifo = true;
			break;
		case 'I':
			irq_only = true;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-c cpu] [-n round_trips] [-p pairs] "
				"[-s stats_round_trips] [-f] [-I]\n",
				argv[0]);
			return 2;
		}
	}
	if (b.round_trips < 2000 || b.stats_round_trips < 2000 || b.pairs < 1 || b.pairs > 100 ||
	    b.cpu < 0) {
		fprintf(stderr, "bpf_bench: -n, -s >= 2000, 1 <= -p <= 100, -c >= 0\n");
		return 2;
	}
	if (geteuid() != 0) {
		puts("skipped: needs CAP_BPF");
		return 0;
	}
	log_set_level(LOG_ERROR);
	setvbuf(stdout, NULL, _IOLBF, 0); /* a row as soon as it is measured */
	r = cgroups_make(&b);
	if (r < 0) {
		fprintf(stderr, "bpf_bench: cgroups: %s\n", strerror(-r));
		cgroups_remove(&b);
		return 1;
	}
	uname(&u);
	printf("bpf_bench: %ld round trips x %d pairs, both threads on CPU %d%s, kernel %s\n",
	       b.round_trips, b.pairs, b.cpu, b.fifo ? " (SCHED_FIFO)" : "", u.release);
	if (!irq_only)
		printf("%-28s %10s %10s %7s %11s\n", "program", "ns/rt none", "ns/rt prog",
		       "ratio", "+ns/switch");
	for (int m = 0; !irq_only && m < M_COUNT; m++) {
		double ratio[100] = { 0 }, delta[100] = { 0 }, none[100] = { 0 }, prog[100] = { 0 };

		for (int i = 0; i < b.pairs; i++) {
			struct baseline_bpf *base = NULL;
			struct bpfmon *mon = NULL;

			none[i] = ping_pong(&b);
			r = attach(&b, (enum mode)m, &base, &mon);
			if (r < 0) {
				fprintf(stderr, "bpf_bench: %s: %s\n", mode_names[m], strerror(-r));
				detach(base, mon);
				cgroups_remove(&b);
				return 1;
			}
			prog[i] = ping_pong(&b);
			detach(base, mon);
			if (none[i] <= 0 || prog[i] <= 0) {
				fprintf(stderr, "bpf_bench: ping-pong failed\n");
				cgroups_remove(&b);
				return 1;
			}
			ratio[i] = prog[i] / none[i];
			delta[i] = (prog[i] - none[i]) / 2;
		}
		printf("%-28s %10.0f %10.0f %7.3f %11.1f\n", mode_names[m], median(none, b.pairs),
		       median(prog, b.pairs), median(ratio, b.pairs), median(delta, b.pairs));
	}
	for (int i = 0; !irq_only && i < 2; i++) {
		r = stats_measure(&b, &sr[i]);
		if (r < 0) {
			fprintf(stderr, "bpf_bench: bpf_stats %s: %s\n",
				sr[i].raw ? "raw_tp" : "tp_btf", strerror(-r));
			cgroups_remove(&b);
			return 1;
		}
		stats_print(&b, &sr[i]);
	}
	if (!irq_only)
		print_targets(&b, sr);
	{
		struct irq_run ir = { 0 };

		r = irq_measure(&b, &ir);
		if (r < 0) {
			fprintf(stderr, "bpf_bench: interrupt-time programs: %s\n", strerror(-r));
		} else {
			irq_print(&ir);
			/* Every CPU that is not exclusive takes the early exit. */
			putchar('\n');
			target("interrupt time, non-exclusive CPU, over empty",
			       irq_over_empty(&ir, IP_NOT_EXCLUSIVE), "ns/run", 15);
		}
	}
	cgroups_remove(&b);
	return 0;
}
