/* Helpers shared by unit tests (header-only, test code only). */
#pragma once

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/num.h"

/* A regular machine: sockets x numa_per_socket x cores_per_numa x threads,
 * numbered like Linux does on x86 (thread t of core c is CPU c + t * n_cores),
 * one L3 per NUMA node. Fails the test on error. */
static inline struct topo *testutil_topo(int sockets, int numa_per_socket, int cores_per_numa,
					 int threads)
{
	int n_cores = sockets * numa_per_socket * cores_per_numa;
	int n = n_cores * threads;
	struct topo_cpu *cpus = calloc((size_t)n, sizeof(*cpus));
	struct topo *t = NULL;
	struct errbuf why = { "" };

	if (!cpus)
		abort();
	for (int core = 0; core < n_cores; core++)
		for (int th = 0; th < threads; th++) {
			struct topo_cpu *c = &cpus[core + th * n_cores];
			int numa = core / cores_per_numa;

			c->cpu = core + th * n_cores;
			c->core = core;
			c->core_id = core % (numa_per_socket * cores_per_numa);
			c->numa = numa;
			c->socket = numa / numa_per_socket;
			c->l3 = numa;
			c->type = TOPO_CORE_STANDARD;
		}
	if (topo_build(cpus, n, NULL, &t, &why) < 0) {
		fprintf(stderr, "testutil_topo: %s\n", why.s);
		abort();
	}
	free(cpus);
	return t;
}

/* The bytes of the file at path in a buffer of exactly their size (no NUL
 * after them, so a parser that reads past its length trips ASan); the size in
 * *len. Caller frees. Aborts the test binary when the file cannot be read:
 * a fixture that is missing is a broken tree, not a test result. */
static inline char *testutil_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "testutil_slurp: %s: %s\n", path, strerror(errno));
		abort();
	}
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "testutil_slurp: %s: short read\n", path);
		abort();
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Writes key = text into dir as the kubelet's atomic writer lays out a
 * ConfigMap, Secret or projected volume (test/sim/volume.py says how): a new
 * "..<timestamp>.<n>" directory with the key, a "..data_tmp" link to it
 * renamed over "..data", and "key -> ..data/key" at the top. Calling it again
 * updates the volume in place the same way and removes the old directory.
 * Returns the path a container reads (dir/key), valid until the next call. Aborts on
 * failure: a fixture that cannot be laid out is a broken test. */
static inline const char *testutil_volume_write(const char *dir, const char *key,
						const char *text)
{
	static unsigned seq;
	static char *ret;
	char stamp[32], old[256] = "", *ts, *file, *tmp, *data, *link, *gone;
	time_t now = time(NULL);
	struct tm tm;
	ssize_t n;
	FILE *f;

	(void)gmtime_r(&now, &tm);
	(void)strftime(stamp, sizeof(stamp), "..%Y_%m_%d_%H_%M_%S", &tm);
	free(ret);
	if (asprintf(&ts, "%s/%s.%u%u", dir, stamp, (unsigned)getpid(), ++seq) < 0 ||
	    asprintf(&file, "%s/%s", ts, key) < 0 || asprintf(&tmp, "%s/..data_tmp", dir) < 0 ||
	    asprintf(&data, "%s/..data", dir) < 0 || asprintf(&link, "..data/%s", key) < 0 ||
	    asprintf(&ret, "%s/%s", dir, key) < 0)
		abort();
	n = readlink(data, old, sizeof(old) - 1);
	old[n > 0 ? n : 0] = 0;
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || mkdir(ts, 0755) < 0 ||
	    !(f = fopen(file, "we"))) {
		fprintf(stderr, "testutil_volume_write: %s: %s\n", file, strerror(errno));
		abort();
	}
	if (fputs(text, f) < 0 || fclose(f) != 0 || symlink(strrchr(ts, '/') + 1, tmp) < 0 ||
	    rename(tmp, data) < 0 || (symlink(link, ret) < 0 && errno != EEXIST)) {
		fprintf(stderr, "testutil_volume_write: %s: %s\n", dir, strerror(errno));
		abort();
	}
	if (*old) {
		if (asprintf(&gone, "%s/%s/%s", dir, old, key) < 0)
			abort();
		(void)unlink(gone);
		*strrchr(gone, '/') = 0;
		(void)rmdir(gone);
		free(gone);
	}
	free(ts);
	free(file);
	free(tmp);
	free(data);
	free(link);
	return ret;
}

/* Writes text to root/rel (a fake sysfs, procfs or debugfs file), making
 * the directories on the way; text NULL makes rel a directory. Aborts on
 * error. */
static inline void testutil_put(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		abort();
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			(void)mkdir(path, 0755);
			*p = '/';
		}
	if (!text) {
		(void)mkdir(path, 0755);
		return;
	}
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "testutil_put: %s: %s\n", path, strerror(errno));
		abort();
	}
}

static inline int testutil_rm_one(const char *path, const struct stat *sb, int flag,
				  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

/* Removes a tree made with testutil_put() (missing: nothing to do). */
static inline void testutil_rmtree(const char *root)
{
	(void)nftw(root, testutil_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* How much slower than a native run this one is: DRA_CPU_TEST_TIME_SCALE
 * (a whole number, 1 when unset), set by test runs under an emulator
 * (tools/cross.sh check: qemu-user runs 10-50 times slower). Guards and
 * bounds that are about wall-clock time multiply by it, so that a native run
 * keeps its tight ones. */
static inline int testutil_time_scale(void)
{
	const char *s = getenv("DRA_CPU_TEST_TIME_SCALE");
	int v;

	if (!s || !*s)
		return 1;
	if (num_parse_int(s, NULL, 1, 1000, &v) < 0) {
		fprintf(stderr, "DRA_CPU_TEST_TIME_SCALE=%s: not a whole number 1..1000\n", s);
		abort();
	}
	return v;
}

/* Whether the bpf() system call is there at all, found by calling it: a
 * command no kernel knows gets EINVAL (or EPERM) from one that has bpf(),
 * ENOSYS from a kernel without CONFIG_BPF_SYSCALL or from an emulator that
 * does not pass it on (qemu-user). On false, why says which. */
static inline bool testutil_have_bpf_syscall(char *why, size_t size)
{
	long r = syscall(__NR_bpf, -1, NULL, 0);

	if (r >= 0 || errno != ENOSYS)
		return true;
	snprintf(why, size,
		 "bpf() system call: %s (a kernel without CONFIG_BPF_SYSCALL, or qemu-user, "
		 "which does not emulate it)",
		 strerror(ENOSYS));
	return false;
}
