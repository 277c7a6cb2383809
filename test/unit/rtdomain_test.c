/* wrap: rmdir mkdir */
/* rtdomain: root domains for real-time CPUs against a fake cgroupfs (plain
 * directories and files in /dev/shm). cgroupfs lets rmdir remove a cgroup
 * whose control files are still there; the wrapped rmdir does the same for
 * the fake. The real v1 hierarchy is exercised by the kernel tests. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/rtdomain.h"
#include "lib/errbuf.h"
#include "lib/log.h"

int __real_rmdir(const char *path);
int __real_mkdir(const char *path, mode_t mode);

/* A new cgroup comes with its control files: a v1 cpuset starts empty and
 * load-balanced. Directories the test makes itself are created unwrapped. */
int __wrap_mkdir(const char *path, mode_t mode)
{
	static const char *files[][2] = { { "cpuset.cpus", "\n" },
					  { "cpuset.mems", "\n" },
					  { "cpuset.sched_load_balance", "1\n" } };
	int r = __real_mkdir(path, mode);

	if (r < 0)
		return r;
	for (size_t i = 0; i < 3; i++) {
		char f[4096];
		FILE *fp;

		snprintf(f, sizeof(f), "%s/%s", path, files[i][0]);
		fp = fopen(f, "w");
		if (fp) {
			fputs(files[i][1], fp);
			fclose(fp);
		}
	}
	return 0;
}

int __wrap_rmdir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return __real_rmdir(path);
	while ((e = readdir(d))) {
		char f[4096];

		if (e->d_type != DT_REG)
			continue;
		snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
		unlink(f);
	}
	closedir(d);
	return __real_rmdir(path);
}

static char root[64], cg[128], state[128];

static void put(const char *rel, const char *file, const char *value)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", cg, rel);
	__real_mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s%s/%s", cg, rel, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", value);
	fclose(f);
}

static const char *get(const char *rel, const char *file)
{
	static char buf[8][256];
	static int next;
	char path[512], *b = buf[next++ % 8];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s/%s", cg, rel, file);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	if (!fgets(b, 256, f))
		b[0] = 0;
	fclose(f);
	b[strcspn(b, "\n")] = 0;
	return b;
}

static bool exists(const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s%s", cg, rel);
	return access(path, F_OK) == 0;
}

/* Does the record in the state dir name the cpuset rel? */
static bool record_lists(const char *rel)
{
	char path[512], want[512], buf[8192] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/rt-domains.json", state);
	f = fopen(path, "r");
	if (!f)
		return false;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	snprintf(want, sizeof(want), "\"path\":\"%s%s\"", cg, rel);
	return strstr(buf, want) != NULL;
}

/* Does the record in the state dir name the v2 partition rel? */
static bool record_lists_partition(const char *rel)
{
	char path[512], want[512], buf[8192] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/rt-domains.json", state);
	f = fopen(path, "r");
	if (!f)
		return false;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	snprintf(want, sizeof(want), "\"cgroup\":\"%s%s\"", cg, rel);
	return strstr(buf, want) != NULL;
}

/* A v1 cpuset: cpus and load balancing. */
static void cpuset_dir(const char *rel, const char *cpus, int lb)
{
	put(rel, "cpuset.cpus", cpus);
	put(rel, "cpuset.mems", "0");
	put(rel, "cpuset.sched_load_balance", lb ? "1" : "0");
}

static int setup(void **st)
{
	snprintf(root, sizeof(root), "/dev/shm/rtdomain-test.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(cg, sizeof(cg), "%s/cpuset", root);
	snprintf(state, sizeof(state), "%s/state", root);
	__real_mkdir(cg, 0755);
	__real_mkdir(state, 0700);
	log_set_level(LOG_ERROR);
	return 0;
}

static int teardown(void **st)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* A 4-CPU node as a kubelet and systemd leave it. */
static void v1_node(void)
{
	cpuset_dir("", "0-3", 1);
	cpuset_dir("/kubepods", "0-3", 1);
	cpuset_dir("/kubepods/pod1", "0-3", 1);
	cpuset_dir("/kubepods/pod1/shared", "0-2", 1);
	cpuset_dir("/kubepods/pod1/rt", "3", 1);
	cpuset_dir("/system.slice", "0-3", 1);
	cpuset_dir("/empty", "", 1);
	cpuset_dir("/pinned", "1", 1);
}

static struct rtdomain *open_v1(void)
{
	struct rtdomain_opts o = { .version = 1, .root = cg, .state_dir = state };
	struct rtdomain *d = NULL;

	assert_int_equal(rtdomain_new(&o, &d), 0);
	return d;
}

static void test_rtdomain_v1_isolates_a_cpu_and_puts_everything_back(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset un;
	char who[256];

	v1_node();
	d = open_v1();
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	assert_string_equal(get("", "cpuset.sched_load_balance"), "0");
	assert_string_equal(get("/dra-cpu-rt", "cpuset.sched_load_balance"), "0");
	assert_string_equal(get("/dra-cpu-rt", "cpuset.cpus"), "0-3");
	assert_string_equal(get("/dra-cpu-rt/balanced", "cpuset.cpus"), "0-2");
	assert_string_equal(get("/dra-cpu-rt/cpu3", "cpuset.cpus"), "3");
	assert_string_equal(get("/dra-cpu-rt/cpu3", "cpuset.sched_load_balance"), "1");
	/* every cpuset that merged CPU 3 with others stops asking for a domain */
	assert_string_equal(get("/kubepods", "cpuset.sched_load_balance"), "0");
	assert_string_equal(get("/kubepods/pod1", "cpuset.sched_load_balance"), "0");
	assert_string_equal(get("/system.slice", "cpuset.sched_load_balance"), "0");
	/* the rest is left alone */
	assert_string_equal(get("/kubepods/pod1/shared", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/kubepods/pod1/rt", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/pinned", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/empty", "cpuset.sched_load_balance"), "1");
	assert_int_equal(rtdomain_v1_unisolated(d, &un, who, sizeof(who)), 0);
	assert_true(record_lists("/kubepods/pod1"));
	/* counted: a second user, then both go */
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	assert_int_equal(rtdomain_v1_release(d, 3), 0);
	assert_true(exists("/dra-cpu-rt/cpu3"));
	assert_int_equal(rtdomain_v1_release(d, 3), 0);
	assert_false(exists("/dra-cpu-rt"));
	assert_string_equal(get("", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/kubepods", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/kubepods/pod1", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/system.slice", "cpuset.sched_load_balance"), "1");
	assert_true(cpuset_is_empty(rtdomain_active(d)));
	assert_false(record_lists("")); /* nothing left to undo: no record */
	rtdomain_free(d);
}

static void test_rtdomain_v1_new_cpusets_are_found_and_fixed(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset un;
	char who[256];

	v1_node();
	d = open_v1();
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	assert_int_equal(rtdomain_v1_acquire(d, 2, &eb), 0);
	assert_string_equal(get("/dra-cpu-rt/balanced", "cpuset.cpus"), "0-1");
	/* shared (0-2) merges CPU 2 with 0-1 now */
	assert_string_equal(get("/kubepods/pod1/shared", "cpuset.sched_load_balance"), "0");
	/* a pod created since copies its parent's CPUs */
	cpuset_dir("/kubepods/pod2", "0-3", 1);
	cpuset_dir("/kubepods/pod2/app", "0-1", 1);
	assert_int_equal(rtdomain_v1_unisolated(d, &un, who, sizeof(who)), 2);
	assert_string_equal(who, "/kubepods/pod2");
	assert_int_equal(rtdomain_refresh(d, &eb), 1);
	assert_string_equal(get("/kubepods/pod2", "cpuset.sched_load_balance"), "0");
	assert_string_equal(get("/kubepods/pod2/app", "cpuset.sched_load_balance"), "1");
	assert_int_equal(rtdomain_v1_unisolated(d, &un, NULL, 0), 0);
	assert_int_equal(rtdomain_refresh(d, &eb), 0);
	/* CPU 3 leaves: its cpuset goes, balanced grows back */
	assert_int_equal(rtdomain_v1_release(d, 3), 0);
	assert_false(exists("/dra-cpu-rt/cpu3"));
	assert_string_equal(get("/dra-cpu-rt/balanced", "cpuset.cpus"), "0-1,3");
	assert_int_equal(rtdomain_v1_release(d, 2), 0);
	assert_string_equal(get("/kubepods/pod2", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("/kubepods/pod1/shared", "cpuset.sched_load_balance"), "1");
	rtdomain_free(d);
}

static void test_rtdomain_v1_root_balancing_means_nothing_is_isolated(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset un;
	char who[256];

	v1_node();
	d = open_v1();
	assert_int_equal(rtdomain_v1_acquire(d, 1, &eb), 0);
	put("", "cpuset.sched_load_balance", "1"); /* someone turned it back on */
	assert_int_equal(rtdomain_v1_unisolated(d, &un, who, sizeof(who)), 1);
	assert_true(cpuset_has(&un, 1));
	assert_string_equal(who, "/");
	assert_int_equal(rtdomain_v1_release(d, 1), 0);
	rtdomain_free(d);
}

static void test_rtdomain_v1_a_restart_puts_back_what_a_crash_left(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset left;

	v1_node();
	d = open_v1();
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	rtdomain_free(d); /* killed: nothing undone */
	assert_string_equal(get("/kubepods", "cpuset.sched_load_balance"), "0");
	d = open_v1();
	/* the claims came back: the CPU is in use again, the record kept */
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	assert_int_equal(rtdomain_v1_release(d, 3), 0);
	assert_string_equal(get("/kubepods", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("", "cpuset.sched_load_balance"), "1");
	rtdomain_free(d);
	/* or no claim came back */
	d = open_v1();
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), 0);
	rtdomain_free(d);
	d = open_v1();
	assert_true(rtdomain_leftovers(d, &left));
	assert_int_equal(cpuset_count(&left), 1);
	assert_true(cpuset_has(&left, 3));
	rtdomain_settle(d, NULL);
	assert_false(exists("/dra-cpu-rt"));
	assert_string_equal(get("/system.slice", "cpuset.sched_load_balance"), "1");
	assert_string_equal(get("", "cpuset.sched_load_balance"), "1");
	assert_false(rtdomain_leftovers(d, &left));
	assert_true(cpuset_is_empty(&left));
	rtdomain_free(d);
}

static void test_rtdomain_v1_errors_undo_the_acquire(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};

	d = open_v1(); /* no root cpuset files at all */
	assert_true(rtdomain_v1_acquire(d, 1, &eb) < 0);
	assert_non_null(strstr(eb.s, "cpuset.sched_load_balance"));
	assert_true(cpuset_is_empty(rtdomain_active(d)));
	assert_int_equal(rtdomain_v1_acquire(d, -1, &eb), -EINVAL);
	rtdomain_free(d);
}

/* ---- v2 -------------------------------------------------------------------------------- */

static void cgroup2(const char *rel)
{
	put(rel, "cpuset.cpus", "");
	put(rel, "cpuset.cpus.exclusive", "");
	put(rel, "cpuset.cpus.partition", "member");
}

static struct rtdomain *open_v2(void)
{
	struct rtdomain_opts o = { .version = 2, .root = cg };
	struct rtdomain *d = NULL;

	assert_int_equal(rtdomain_new(&o, &d), 0);
	return d;
}

static void test_rtdomain_v2_remote_partition_down_the_path(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset three, two_three;
	char dir[256], other[256];

	put("", "cgroup.controllers", "cpuset cpu memory");
	cgroup2("/kubepods.slice");
	cgroup2("/kubepods.slice/pod1.slice");
	cgroup2("/kubepods.slice/pod1.slice/ctr-a.scope");
	cgroup2("/kubepods.slice/pod2.slice");
	cgroup2("/kubepods.slice/pod2.slice/ctr-b.scope");
	put("/kubepods.slice", "cpuset.cpus.exclusive", "7"); /* someone else's */
	d = open_v2();
	assert_int_equal(rtdomain_version(d), 2);
	cpuset_parse("3", &three, NULL);
	snprintf(dir, sizeof(dir), "%s/kubepods.slice/pod1.slice/ctr-a.scope", cg);
	assert_int_equal(rtdomain_v2_acquire(d, dir, &three, &eb), 0);
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "3,7");
	assert_string_equal(get("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive"), "3");
	assert_string_equal(get("/kubepods.slice/pod1.slice/ctr-a.scope", "cpuset.cpus.exclusive"),
			    "3");
	assert_string_equal(get("/kubepods.slice/pod1.slice/ctr-a.scope", "cpuset.cpus.partition"),
			    "root");
	assert_true(cpuset_has(rtdomain_active(d), 3));
	/* idempotent for the same cgroup; another container cannot share it */
	assert_int_equal(rtdomain_v2_acquire(d, dir, &three, &eb), 0);
	snprintf(other, sizeof(other), "%s/kubepods.slice/pod2.slice/ctr-b.scope", cg);
	cpuset_parse("2-3", &two_three, NULL);
	assert_int_equal(rtdomain_v2_acquire(d, other, &two_three, &eb), -EBUSY);
	assert_non_null(strstr(eb.s, "one container's partition"));
	assert_string_equal(get("/kubepods.slice/pod2.slice", "cpuset.cpus.exclusive"), "");
	assert_int_equal(rtdomain_v2_release(d, dir), 0);
	assert_string_equal(get("/kubepods.slice/pod1.slice/ctr-a.scope", "cpuset.cpus.partition"),
			    "member");
	assert_string_equal(get("/kubepods.slice/pod1.slice/ctr-a.scope", "cpuset.cpus.exclusive"),
			    "");
	assert_string_equal(get("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "7");
	assert_true(cpuset_is_empty(rtdomain_active(d)));
	/* now the other container may */
	assert_int_equal(rtdomain_v2_acquire(d, other, &two_three, &eb), 0);
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "2-3,7");
	assert_int_equal(rtdomain_v2_release(d, other), 0);
	assert_int_equal(rtdomain_v2_release(d, other), 0); /* twice: nothing */
	rtdomain_free(d);
}

static void test_rtdomain_v2_errors_leave_nothing_half_done(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset three;
	char dir[256];

	cgroup2("/kubepods.slice");
	put("/kubepods.slice/pod1.slice", "cpuset.cpus", ""); /* no cpuset.cpus.exclusive */
	cgroup2("/kubepods.slice/pod1.slice/ctr.scope");
	d = open_v2();
	cpuset_parse("3", &three, NULL);
	snprintf(dir, sizeof(dir), "%s/kubepods.slice/pod1.slice/ctr.scope", cg);
	assert_int_equal(rtdomain_v2_acquire(d, dir, &three, &eb), -ENOENT);
	assert_non_null(strstr(eb.s, "is the cpuset controller enabled?"));
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice/pod1.slice/ctr.scope", "cpuset.cpus.partition"),
			    "member");
	assert_int_equal(rtdomain_v2_acquire(d, "/elsewhere/ctr", &three, &eb), -EINVAL);
	snprintf(dir, sizeof(dir), "%s/kubepods.slice/../x", cg);
	assert_int_equal(rtdomain_v2_acquire(d, dir, &three, &eb), -EINVAL);
	assert_int_equal(rtdomain_v1_acquire(d, 3, &eb), -EINVAL); /* not v1 */
	rtdomain_free(d);
}

/* A v2 node: two pods, a container each. */
static void v2_node(void)
{
	put("", "cgroup.controllers", "cpuset cpu memory");
	cgroup2("/kubepods.slice");
	cgroup2("/kubepods.slice/pod1.slice");
	cgroup2("/kubepods.slice/pod1.slice/ctr-a.scope");
	cgroup2("/kubepods.slice/pod2.slice");
	cgroup2("/kubepods.slice/pod2.slice/ctr-b.scope");
}

static struct rtdomain *open_v2_recorded(void)
{
	struct rtdomain_opts o = { .version = 2, .root = cg, .state_dir = state };
	struct rtdomain *d = NULL;

	assert_int_equal(rtdomain_new(&o, &d), 0);
	return d;
}

static const char *ctr_path(const char *rel)
{
	static char buf[2][256];
	static int next;
	char *b = buf[next++ % 2];

	snprintf(b, 256, "%s%s", cg, rel);
	return b;
}

#define CTR_A "/kubepods.slice/pod1.slice/ctr-a.scope"
#define CTR_B "/kubepods.slice/pod2.slice/ctr-b.scope"

static void test_rtdomain_v2_a_restart_puts_back_what_a_killed_run_left(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset two, three, left;
	char path[512];

	v2_node();
	cpuset_parse("2", &two, NULL);
	cpuset_parse("3", &three, NULL);
	d = open_v2_recorded();
	assert_false(rtdomain_leftovers(d, &left));
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_A), &three, &eb), 0);
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_B), &two, &eb), 0);
	assert_true(record_lists_partition(CTR_A));
	assert_true(record_lists_partition(CTR_B));
	rtdomain_free(d); /* killed: nothing undone */
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "2-3");
	assert_string_equal(get(CTR_B, "cpuset.cpus.partition"), "root");
	d = open_v2_recorded();
	assert_true(rtdomain_leftovers(d, &left));
	assert_int_equal(cpuset_count(&left), 2);
	/* a claim still sits on CPU 3: its partition stays; CPU 2's goes */
	rtdomain_settle(d, &three);
	assert_string_equal(get(CTR_B, "cpuset.cpus.partition"), "member");
	assert_string_equal(get(CTR_B, "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice/pod2.slice", "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "3");
	assert_string_equal(get(CTR_A, "cpuset.cpus.partition"), "root");
	assert_true(rtdomain_leftovers(d, &left));
	assert_true(cpuset_equal(&left, &three));
	assert_false(record_lists_partition(CTR_B));
	assert_true(record_lists_partition(CTR_A));
	/* its container is named again: taken over, then released as usual */
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_A), &three, &eb), 0);
	assert_false(rtdomain_leftovers(d, &left));
	assert_true(cpuset_has(rtdomain_active(d), 3));
	assert_int_equal(rtdomain_v2_release(d, ctr_path(CTR_A)), 0);
	assert_string_equal(get(CTR_A, "cpuset.cpus.partition"), "member");
	assert_string_equal(get("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "");
	snprintf(path, sizeof(path), "%s/rt-domains.json", state);
	assert_int_equal(access(path, F_OK), -1); /* nothing left to record */
	rtdomain_free(d);
	/* or no claim came back at all */
	d = open_v2_recorded();
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_B), &two, &eb), 0);
	rtdomain_free(d);
	d = open_v2_recorded();
	rtdomain_settle(d, NULL);
	assert_string_equal(get(CTR_B, "cpuset.cpus.partition"), "member");
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "");
	assert_false(rtdomain_leftovers(d, &left));
	rtdomain_free(d);
}

static void test_rtdomain_v2_a_left_partition_holds_its_cpu_while_its_cgroup_lives(void **st)
{
	struct rtdomain *d;
	struct errbuf eb = {};
	struct cpuset three, left;

	v2_node();
	cpuset_parse("3", &three, NULL);
	d = open_v2_recorded();
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_A), &three, &eb), 0);
	rtdomain_free(d); /* killed */
	d = open_v2_recorded();
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_B), &three, &eb), -EBUSY);
	assert_non_null(strstr(eb.s, "made by a previous run"));
	assert_string_equal(get("/kubepods.slice/pod2.slice", "cpuset.cpus.exclusive"), "");
	/* the runtime removed the old container's cgroup: its partition is
	 * undone up the path, and the new container takes the CPU */
	assert_int_equal(rmdir(ctr_path(CTR_A)), 0);
	assert_int_equal(rtdomain_v2_acquire(d, ctr_path(CTR_B), &three, &eb), 0);
	assert_string_equal(get("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive"), "");
	assert_string_equal(get("/kubepods.slice/pod2.slice", "cpuset.cpus.exclusive"), "3");
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "3");
	assert_false(rtdomain_leftovers(d, &left));
	assert_false(record_lists_partition(CTR_A));
	assert_true(record_lists_partition(CTR_B));
	assert_int_equal(rtdomain_v2_release(d, ctr_path(CTR_B)), 0);
	assert_string_equal(get("/kubepods.slice", "cpuset.cpus.exclusive"), "");
	rtdomain_free(d);
}

/* A record names only cgroups under the root, with CPUs: the rest is not
 * touched. */
static void test_rtdomain_v2_a_bad_record_is_ignored(void **st)
{
	struct rtdomain *d;
	struct cpuset left;
	char path[512];
	FILE *f;

	v2_node();
	put("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive", "3");
	snprintf(path, sizeof(path), "%s/rt-domains.json", state);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"root\":\"%s\",\"changes\":[],\"partitions\":["
		"{\"cgroup\":\"%s/../etc\",\"cpus\":\"3\"},"
		"{\"cgroup\":\"/elsewhere/x\",\"cpus\":\"3\"},"
		"{\"cgroup\":\"%s\",\"cpus\":\"3\"},"
		"{\"cgroup\":\"%s\",\"cpus\":\"x-y\"},"
		"{\"cgroup\":\"%s\",\"cpus\":\"\"},"
		"{\"cgroup\":7,\"cpus\":\"3\"},"
		"{\"cgroup\":\"%s\",\"cpus\":3}]}",
		cg, cg, cg, ctr_path(CTR_A), ctr_path(CTR_A), ctr_path(CTR_A));
	fclose(f);
	d = open_v2_recorded();
	assert_false(rtdomain_leftovers(d, &left));
	rtdomain_settle(d, NULL);
	assert_string_equal(get("/kubepods.slice/pod1.slice", "cpuset.cpus.exclusive"), "3");
	rtdomain_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_rtdomain_v1_isolates_a_cpu_and_puts_everything_back),
		T(test_rtdomain_v1_new_cpusets_are_found_and_fixed),
		T(test_rtdomain_v1_root_balancing_means_nothing_is_isolated),
		T(test_rtdomain_v1_a_restart_puts_back_what_a_crash_left),
		T(test_rtdomain_v1_errors_undo_the_acquire),
		T(test_rtdomain_v2_remote_partition_down_the_path),
		T(test_rtdomain_v2_errors_leave_nothing_half_done),
		T(test_rtdomain_v2_a_restart_puts_back_what_a_killed_run_left),
		T(test_rtdomain_v2_a_left_partition_holds_its_cpu_while_its_cgroup_lives),
		T(test_rtdomain_v2_a_bad_record_is_ignored),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
