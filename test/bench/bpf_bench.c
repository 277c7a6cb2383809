/* Per-switch cost of the sched_switch programs: none vs bpf/baseline.bpf.c vs
 * bpf/pinning.bpf.c (CPU not exclusive / owner running / every switch a
 * violation) vs pinning + run-queue latency.
 *
 * Two threads ping-pong one byte over two pipes, both pinned to one CPU, so a
 * round trip is exactly two context switches and two wakeups. Runs alternate
 * (no program, program, no program, program ...), each program run with a
 * fresh load and detach; the figure is the median of the per-pair ratios,
 * and "+ns/switch" the median of (t_prog - t_none) / 2 per round trip. A
 * separate pass with bpf_enable_stats(BPF_STATS_RUN_TIME) reports what the
 * kernel measured per program run (that instrumentation itself costs about
 * 30 ns per run, so it is kept out of the timed pairs).
 *
 * Needs root (CAP_BPF, cgroup v2 writes); prints "skipped: needs CAP_BPF"
 * and exits 0 otherwise. Build without make (after `make`, which generates
 * the skeletons and build/libdracpu.a):
 *
 *   cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Iuser -Iinclude -Ibuild \
 *      test/bench/bpf_bench.c build/libdracpu.a \
 *      $(pkg-config --cflags --libs libbpf libevent) -lpthread -lm -o build/bpf_bench
 *   build/bpf_bench [-c cpu] [-n round_trips] [-p pairs] [-f]
 *
 * -f runs both threads SCHED_FIFO so the rest of a busy machine does not
 * interleave with the ping-pong (RT throttling still leaves it 5 %).
 */
#include <errno.h>
#include <fcntl.h>
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
#include "lib/cpuset.h"
#include "lib/log.h"

enum mode { M_BASELINE, M_PIN_UNOWNED, M_PIN_OWNER, M_PIN_FOREIGN, M_PIN_RUNQ, M_COUNT };

static const char *const mode_names[M_COUNT] = {
	[M_BASELINE] = "baseline (count only)",
	[M_PIN_UNOWNED] = "pinning, CPU not exclusive",
	[M_PIN_OWNER] = "pinning, owner runs",
	[M_PIN_FOREIGN] = "pinning, all violations",
	[M_PIN_RUNQ] = "pinning + runq latency",
};

/* The sched_switch/wakeup programs of each mode, for the bpf_stats pass. */
static const char *const mode_progs[M_COUNT][3] = {
	[M_BASELINE] = { "handle_sched_switch" },
	[M_PIN_UNOWNED] = { "handle_sched_switch" },
	[M_PIN_OWNER] = { "handle_sched_switch" },
	[M_PIN_FOREIGN] = { "handle_sched_switch" },
	[M_PIN_RUNQ] = { "handle_sched_switch", "handle_sched_switch_runq", "handle_sched_wakeup" },
};

struct bench {
	int cpu;
	bool fifo;
	long round_trips;
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
		  struct bpfmon **ret_mon, bool stats)
{
	struct bpfmon_opts o = { .contention = m == M_PIN_RUNQ, .self_stats = stats };
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

/* ns per run of a mode's programs, from the kernel's own accounting. */
static double prog_ns_per_run(const struct bench *b, enum mode m, char *detail, size_t size)
{
	struct baseline_bpf *base = NULL;
	struct bpfmon *mon = NULL;
	double total = 0;
	size_t off = 0;
	int stats_fd = -1;

	detail[0] = 0;
	if (m == M_BASELINE) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0)
			return -1;
	}
	if (attach(b, m, &base, &mon, true) < 0) {
		detach(base, mon);
		if (stats_fd >= 0)
			close(stats_fd);
		return -1;
	}
	(void)ping_pong(b);
	for (int i = 0; i < 3 && mode_progs[m][i]; i++) {
		uint64_t runs = 0, ns = 0;
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);

		if (base) {
			if (bpf_obj_get_info_by_fd(bpf_program__fd(base->progs.handle_sched_switch),
						   &info, &len) == 0) {
				runs = info.run_cnt;
				ns = info.run_time_ns;
			}
		} else {
			(void)bpfmon_prog_stats(mon, mode_progs[m][i], &runs, &ns);
		}
		if (!runs)
			continue;
		total += (double)ns / (double)runs;
		off += (size_t)snprintf(detail + off, size - off, "%s%s %.1f", off ? ", " : "",
					mode_progs[m][i] + strlen("handle_"), (double)ns / (double)runs);
		if (off >= size)
			off = size - 1;
	}
	detach(base, mon);
	if (stats_fd >= 0)
		close(stats_fd);
	return total;
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

int main(int argc, char **argv)
{
	struct bench b = { .cpu = 1, .round_trips = 200000, .pairs = 7 };
	double base_per_run = 0;
	struct utsname u;
	int opt, r;

	while ((opt = getopt(argc, argv, "c:n:p:f")) != -1) {
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
		case 'f':
			b.fifo = true;
			break;
		default:
			fprintf(stderr, "usage: %s [-c cpu] [-n round_trips] [-p pairs] [-f]\n",
				argv[0]);
			return 2;
		}
	}
	if (b.round_trips < 2000 || b.pairs < 1 || b.pairs > 100 || b.cpu < 0) {
		fprintf(stderr, "bpf_bench: -n >= 2000, 1 <= -p <= 100, -c >= 0\n");
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
	printf("%-28s %10s %10s %7s %11s  %s\n", "program", "ns/rt none", "ns/rt prog", "ratio",
	       "+ns/switch", "kernel-measured ns/run (bpf_stats), +ns over baseline");
	for (int m = 0; m < M_COUNT; m++) {
		double ratio[100] = { 0 }, delta[100] = { 0 }, none[100] = { 0 }, prog[100] = { 0 };
		double per_run;
		char detail[160];

		for (int i = 0; i < b.pairs; i++) {
			struct baseline_bpf *base = NULL;
			struct bpfmon *mon = NULL;

			none[i] = ping_pong(&b);
			r = attach(&b, (enum mode)m, &base, &mon, false);
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
		per_run = prog_ns_per_run(&b, (enum mode)m, detail, sizeof(detail));
		printf("%-28s %10.0f %10.0f %7.3f %11.1f  ", mode_names[m], median(none, b.pairs),
		       median(prog, b.pairs), median(ratio, b.pairs), median(delta, b.pairs));
		if (m == M_BASELINE)
			base_per_run = per_run;
		if (per_run > 0 && base_per_run > 0 && m != M_BASELINE)
			printf("%.1f (%s), %+.1f\n", per_run, detail, per_run - base_per_run);
		else if (per_run > 0)
			printf("%.1f (%s)\n", per_run, detail);
		else
			printf("n/a\n");
	}
	cgroups_remove(&b);
	return 0;
}
