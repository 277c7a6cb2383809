/* wrap: unlink malloc */
/* state: reservations, commit order, recovery from CDI specs and checkpoint. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/log.h"
#include "core/state.h"
#include "lib/errbuf.h"
#include "testutil.h"

static char root[64], cdi_dir[96], state_dir[96];

/* unlink() of the path named here fails with this errno (0: never). */
static char unlink_fail_path[256];
static int unlink_fail_errno;

int __real_unlink(const char *path);
int __wrap_unlink(const char *path);
int __wrap_unlink(const char *path)
{
	if (unlink_fail_errno && strcmp(path, unlink_fail_path) == 0) {
		errno = unlink_fail_errno;
		return -1;
	}
	return __real_unlink(path);
}

/* The n-th malloc() from now (of state and lib code, not of shared
 * libraries) fails; 0: none does. */
static int malloc_fail_in;

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_malloc(size_t size)
{
	if (malloc_fail_in > 0 && --malloc_fail_in == 0)
		return NULL;
	return __real_malloc(size);
}

static int setup(void **st)
{
	snprintf(root, sizeof(root), "/dev/shm/state-test.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(cdi_dir, sizeof(cdi_dir), "%s/cdi", root);
	snprintf(state_dir, sizeof(state_dir), "%s/state", root);
	log_set_level(LOG_ERROR);
	unlink_fail_errno = 0;
	malloc_fail_in = 0;
	/* A load that blocks on a planted FIFO would stop the suite. */
	alarm(20 * (unsigned)testutil_time_scale()); /* emulators: DRA_CPU_TEST_TIME_SCALE */
	return 0;
}

static int teardown(void **st)
{
	char cmd[160];

	alarm(0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static struct state *open_state(const char *allocatable)
{
	struct state_opts o = { .cdi_dir = cdi_dir, .state_dir = state_dir,
				.allocatable = cs(allocatable) };
	struct state *s = NULL;

	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	return s;
}

/* A claim with one result per list given. */
static int add(struct state *s, const char *uid, const char *ns, const char *name, ...)
{
	static const char *const reqs[] = { "req0", "req1", "req2", "req3" };
	struct state_result res[4];
	struct cpuset sets[4];
	struct state_claim c;
	struct errbuf why = { "" };
	const char *l;
	va_list ap;

	memset(&c, 0, sizeof(c));
	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.ns = ns;
	c.name = name;
	c.results = res;
	va_start(ap, name);
	while ((l = va_arg(ap, const char *))) {
		memset(&res[c.n_results], 0, sizeof(res[0]));
		res[c.n_results].request = reqs[c.n_results];
		res[c.n_results].device = "cpudevnuma000";
		sets[c.n_results] = cs(l);
		res[c.n_results].cpus = cpuset_view(&sets[c.n_results]);
		c.n_results++;
	}
	va_end(ap);
	return state_claim_add(s, &c, &why);
}

static void assert_pool(struct state *s, const char *want)
{
	struct cpuset p;
	char buf[128];

	state_shared_pool(s, &p);
	cpuset_format(&p, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static int spec_exists(const char *uid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-%s.json", cdi_dir, uid);
	return access(path, F_OK) == 0;
}

static void test_state_add_reserves_writes_spec_and_shrinks_pool(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("1-7");
	const struct state_claim *c;
	struct cpuset held;

	assert_pool(s, "1-7");
	assert_int_equal(add(s, "u1", "ns", "db", "2-3", "6", NULL), 0);
	assert_pool(s, "1,4-5,7");
	assert_true(spec_exists("u1"));
	c = state_claim(s, "u1");
	assert_non_null(c);
	assert_int_equal(cpuset_count(cpuset_from_view(&c->cpus, &held)), 3);
	assert_int_equal(c->n_results, 2);
	assert_string_equal(c->name, "db");
	assert_int_equal(state_claim_count(s), 1);
}

static void test_state_add_refuses_overlap_duplicates_and_foreign_cpus(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("1-7");

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	assert_int_equal(add(s, "u2", "ns", "b", "3-4", NULL), -EBUSY);
	assert_int_equal(add(s, "u1", "ns", "a", "5", NULL), -EEXIST);
	assert_int_equal(add(s, "u3", "ns", "c", "0", NULL), -EINVAL);  /* reserved */
	assert_int_equal(add(s, "u4", "ns", "d", "9", NULL), -EINVAL);  /* offline */
	assert_int_equal(add(s, "u5", "ns", "e", "5", "5-6", NULL), -EINVAL); /* own overlap */
	assert_int_equal(add(s, "../x", "ns", "f", "5", NULL), -EINVAL);
	assert_false(spec_exists("u2"));
	assert_pool(s, "1,4-7");
	assert_int_equal(state_claim_count(s), 1);
}

static void test_state_add_rolls_back_when_the_spec_cannot_be_written(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-3");
	char cmd[256];
	FILE *f;

	/* The CDI dir turns into a regular file after start. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", cdi_dir);
	assert_int_equal(system(cmd), 0);
	f = fopen(cdi_dir, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(add(s, "u1", "ns", "a", "1", NULL), -ENOTDIR);
	assert_null(state_claim(s, "u1"));
	assert_pool(s, "0-3");
}

static void test_state_remove_deletes_spec_then_releases(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	assert_int_equal(state_claim_remove(s, "u1"), 0);
	assert_false(spec_exists("u1"));
	assert_null(state_claim(s, "u1"));
	assert_pool(s, "0-7");
	/* unknown: idempotent */
	assert_int_equal(state_claim_remove(s, "u1"), 0);
	assert_int_equal(state_claim_remove(s, "never"), 0);
}

static void test_state_remove_keeps_reservation_when_spec_removal_fails(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");
	char path[256];

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-u1.json", cdi_dir);
	snprintf(unlink_fail_path, sizeof(unlink_fail_path), "%s", path);
	unlink_fail_errno = EIO;
	assert_int_equal(state_claim_remove(s, "u1"), -EIO);
	assert_non_null(state_claim(s, "u1"));
	assert_true(spec_exists("u1"));
	assert_pool(s, "0-1,4-7");
}

/* A directory where the spec was is not a spec: a restart would not restore
 * the claim from it, so Unprepare releases the CPUs (and leaves the directory
 * alone) instead of failing for ever and keeping them. */
static void test_state_remove_releases_a_claim_whose_spec_became_a_directory(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");
	struct state *again;
	char path[256];

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-u1.json", cdi_dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(state_claim_remove(s, "u1"), 0);
	assert_null(state_claim(s, "u1"));
	assert_pool(s, "0-7");
	assert_int_equal(access(path, F_OK), 0);
	state_free(s);
	s = NULL;
	again = open_state("0-7");
	assert_int_equal(state_claim_count(again), 0);
	assert_pool(again, "0-7");
	state_free(again);
}

static mode_t kind_at(const char *dir, const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(void)
{
	assert_int_equal(mkdir(cdi_dir, 0755), 0);
	assert_int_equal(mkdir(state_dir, 0700), 0);
}

/* A crash between create and rename leaves temp files; an earlier version
 * used one fixed temp name, and whatever sits there (a FIFO blocked the
 * first checkpoint write for good, a symlink or directory failed it and so
 * every start) is removed at load, ours only, links not followed. */
static void test_state_load_removes_stale_temps_never_follows_them(void **st)
{
	char target[160], link[200];
	struct state *s;

	mkdirs();
	snprintf(target, sizeof(target), "%s/target", root);
	put_file(root, "target", "precious");
	snprintf(link, sizeof(link), "%s/.checkpoint.json.tmp", state_dir);
	assert_int_equal(mkfifo(link, 0600), 0);
	snprintf(link, sizeof(link), "%s/.owners.json.tmp.Zx81Qa", state_dir);
	assert_int_equal(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/.dra.k8s.io-cpu_claim-u1.json.tmp", cdi_dir);
	assert_int_equal(mkfifo(link, 0600), 0);
	put_file(cdi_dir, ".dra.k8s.io-cpu_claim-u2.json.tmp.a1b2c3", "{");
	put_file(cdi_dir, ".vendor.com-gpu.json.tmp", "{"); /* not ours */

	s = open_state("0-7");
	assert_int_equal(kind_at(state_dir, ".checkpoint.json.tmp"), 0);
	assert_int_equal(kind_at(state_dir, ".owners.json.tmp.Zx81Qa"), 0);
	assert_int_equal(kind_at(cdi_dir, ".dra.k8s.io-cpu_claim-u1.json.tmp"), 0);
	assert_int_equal(kind_at(cdi_dir, ".dra.k8s.io-cpu_claim-u2.json.tmp.a1b2c3"), 0);
	assert_int_equal(kind_at(cdi_dir, ".vendor.com-gpu.json.tmp"), S_IFREG);
	assert_int_equal(kind_at(state_dir, "checkpoint.json"), S_IFREG);
	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	state_free(s);
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	state_free(s);
	assert_int_equal(kind_at(root, "target"), S_IFREG);
	{
		FILE *f = fopen(target, "r");
		char buf[32] = "";

		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		assert_string_equal(buf, "precious");
	}
}

/* A device node at the old temp name was opened, written and renamed into
 * place as the checkpoint. Needs CAP_MKNOD: skipped without it. */
static void test_state_load_never_writes_through_a_planted_device_node(void **st)
{
	char path[200];
	struct state *s;

	mkdirs();
	snprintf(path, sizeof(path), "%s/.checkpoint.json.tmp", state_dir);
	if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) < 0)
		skip();
	s = open_state("0-7");
	assert_int_equal(add(s, "u1", "ns", "a", "2", NULL), 0);
	assert_int_equal(kind_at(state_dir, "checkpoint.json"), S_IFREG);
	state_free(s);
}

/* A FIFO or symlink at the checkpoint's name is neither read (no hang) nor
 * followed: the claims come from the CDI specs and the checkpoint is
 * replaced by a regular file, the link's target untouched. */
static void test_state_load_replaces_a_fifo_or_symlink_checkpoint(void **st)
{
	char path[200], target[160];
	struct state *s;

	s = open_state("0-7");
	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	state_free(s);
	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	assert_int_equal(kind_at(state_dir, "checkpoint.json"), S_IFREG);
	state_free(s);

	put_file(root, "target", "precious");
	snprintf(target, sizeof(target), "%s/target", root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(target, path), 0);
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	assert_int_equal(kind_at(state_dir, "checkpoint.json"), S_IFREG);
	state_free(s);
	assert_int_equal(kind_at(root, "target"), S_IFREG);
	{
		FILE *f = fopen(target, "r");
		char buf[32] = "";

		assert_non_null(f);
		assert_non_null(fgets(buf, sizeof(buf), f));
		fclose(f);
		assert_string_equal(buf, "precious");
	}
}

/* An empty directory at the checkpoint's name (a hostPath mount of type
 * DirectoryOrCreate) is removed and the start goes on; one with content is
 * somebody's: the load fails with -EISDIR (the daemon says why and exits)
 * rather than serving claims it could never record. */
static void test_state_load_directory_checkpoint_removed_if_empty_else_refused(void **st)
{
	struct state_opts o = { .cdi_dir = cdi_dir, .state_dir = state_dir };
	char path[200];
	struct state *s = NULL;

	mkdirs();
	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	assert_int_equal(mkdir(path, 0700), 0);
	s = open_state("0-7");
	assert_int_equal(kind_at(state_dir, "checkpoint.json"), S_IFREG);
	assert_int_equal(add(s, "u1", "ns", "a", "2", NULL), 0);
	state_free(s);

	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	put_file(path, "keep", "x");
	assert_int_equal(cpuset_parse("0-7", &o.allocatable, NULL), 0);
	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), -EISDIR);
	state_free(s);
	assert_int_equal(kind_at(path, "keep"), S_IFREG);
}

static void test_state_restart_restores_claims_and_metadata(void **st)
{
	struct state *s = open_state("0-15");

	assert_int_equal(add(s, "u1", "team-a", "db", "2-3", "8-9", NULL), 0);
	assert_int_equal(add(s, "u2", "team-b", "web", "4", NULL), 0);
	assert_int_equal(state_claim_bind(s, "u1", "pod-1", "main"), 0);
	state_free(s);

	s = open_state("0-15");
	const struct state_claim *c = state_claim(s, "u1");
	assert_non_null(c);
	assert_string_equal(c->ns, "team-a");
	assert_string_equal(c->name, "db");
	assert_int_equal(c->n_results, 2);
	assert_string_equal(c->owner_pod, "pod-1");
	assert_string_equal(c->owner_container, "main");
	assert_non_null(state_claim(s, "u2"));
	assert_pool(s, "0-1,5-7,10-15");
	/* the next claim cannot get a restored claim's CPUs */
	assert_int_equal(add(s, "u3", "x", "y", "3", NULL), -EBUSY);
	state_free(s);
}

static void test_state_restart_without_checkpoint_uses_cdi_specs(void **st)
{
	struct state *s = open_state("0-7");
	char path[256];

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	state_free(s);
	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	assert_int_equal(unlink(path), 0);
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	assert_string_equal(state_claim(s, "u1")->ns, "");
	assert_pool(s, "0-1,4-7");
	state_free(s);
}

static void test_state_restart_drops_checkpoint_entries_without_spec(void **st)
{
	struct state *s = open_state("0-7");

	assert_int_equal(add(s, "u1", "ns", "a", "2-3", NULL), 0);
	state_free(s);
	/* the spec went away (Unprepare committed) but the checkpoint was not rewritten */
	assert_int_equal(cdi_spec_remove(cdi_dir, "u1"), 0);
	s = open_state("0-7");
	assert_null(state_claim(s, "u1"));
	assert_pool(s, "0-7");
	state_free(s);
}

static void test_state_restart_quarantines_conflicting_specs(void **st)
{
	struct state *s;
	struct cpuset a = cs("2-3"), b = cs("3-4"), r = cs("0");

	assert_int_equal(mkdir(cdi_dir, 0755), 0);
	assert_int_equal(cdi_spec_write(cdi_dir, "aaa", &a), 0);
	assert_int_equal(cdi_spec_write(cdi_dir, "bbb", &b), 0);
	assert_int_equal(cdi_spec_write(cdi_dir, "ccc", &r), 0); /* CPU 0 now reserved */
	s = open_state("1-7");
	/* one of aaa/bbb is restored, the other quarantined; CPUs 2-4 never shared */
	assert_int_equal(state_claim_count(s), 1);
	assert_null(state_claim(s, "ccc"));
	assert_pool(s, "1,5-7");
	assert_int_equal(add(s, "ddd", "ns", "d", "4", NULL), -EBUSY);
	state_free(s);
}

/* A spec planted beside a checkpointed claim, on its CPUs: whatever order
 * the directory lists them in, the claim the checkpoint records is restored
 * and the planted ones are quarantined. */
static void test_state_restart_the_checkpoint_wins_over_a_planted_spec(void **st)
{
	static const char *const planted[] = { "aaa", "mmm", "yyy", "zzz-2" };
	struct state *s;
	struct cpuset one = cs("3");

	s = open_state("0-7");
	assert_int_equal(add(s, "real", "ns", "r", "3-4", NULL), 0);
	state_free(s);
	for (size_t i = 0; i < sizeof(planted) / sizeof(planted[0]); i++)
		assert_int_equal(cdi_spec_write(cdi_dir, planted[i], &one), 0);
	s = open_state("0-7");
	assert_int_equal(state_claim_count(s), 1);
	assert_non_null(state_claim(s, "real"));
	assert_string_equal(state_claim(s, "real")->name, "r");
	for (size_t i = 0; i < sizeof(planted) / sizeof(planted[0]); i++)
		assert_null(state_claim(s, planted[i]));
	assert_pool(s, "0-2,5-7");
	state_free(s);
}

/* CPUs hotplug took offline leave the shared pool until they are back. */
static void test_state_offline_cpus_leave_the_shared_pool(void **st)
{
	struct state *s = open_state("0-7");
	struct cpuset off = cs("2,6"), none;

	cpuset_zero(&none);
	assert_int_equal(add(s, "u1", "ns", "a", "1-2", NULL), 0);
	assert_true(state_set_offline(s, &off));
	assert_pool(s, "0,3-5,7");
	assert_false(state_set_offline(s, &off));
	assert_true(state_set_offline(s, &none));
	assert_pool(s, "0,3-7");
	state_free(s);
}

/* CPUs the kernel isolates at run time (cpuset partitions) leave the shared
 * pool, and come back when no longer isolated; claims keep theirs. */
static void test_state_isolated_cpus_follow_the_kernel(void **st)
{
	struct state *s = open_state("0-7");
	struct cpuset iso = cs("2-3,6"), want = cs("0,3-7"), none, unclaimed;

	cpuset_zero(&none);
	assert_int_equal(add(s, "u1", "ns", "a", "1-2", NULL), 0);
	assert_true(state_set_isolated(s, &iso));
	assert_pool(s, "0,4-5,7");
	state_unclaimed(s, &unclaimed); /* free isolated CPUs stay claimable */
	assert_true(cpuset_equal(&unclaimed, &want));
	assert_false(state_set_isolated(s, &iso));
	assert_true(state_set_isolated(s, &none));
	assert_pool(s, "0,3-7");
	state_free(s);
}

static void test_state_bad_checkpoint_is_ignored_not_fatal(void **st)
{
	struct state *s = open_state("0-7");
	char path[256];
	FILE *f;

	assert_int_equal(add(s, "u1", "ns", "a", "2", NULL), 0);
	state_free(s);
	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"version\":1,\"claims\":[{\"uid\":42}]}", f);
	fclose(f);
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	state_free(s);
	struct stat stt;
	assert_int_equal(stat(state_dir, &stt), 0);
	assert_int_equal(stt.st_mode & 0777, 0700);
}

static void test_state_bind_one_owner_per_claim(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");

	assert_int_equal(add(s, "u1", "ns", "a", "2", NULL), 0);
	assert_int_equal(state_claim_bind(s, "u1", "pod-1", "c1"), 0);
	assert_int_equal(state_claim_bind(s, "u1", "pod-1", "c1"), 0);
	assert_int_equal(state_claim_bind(s, "u1", "pod-1", "c2"), -EBUSY);
	assert_int_equal(state_claim_bind(s, "u1", "pod-2", "c1"), -EBUSY);
	assert_int_equal(state_claim_bind(s, "nope", "pod-1", "c1"), -ENOENT);
	/* an untrusted binding is forgotten; another container may then bind */
	assert_int_equal(state_claim_unbind(s, "u1"), 0);
	assert_string_equal(state_claim(s, "u1")->owner_pod, "");
	assert_int_equal(state_claim_unbind(s, "u1"), 0);
	assert_int_equal(state_claim_bind(s, "u1", "pod-2", "c1"), 0);
	assert_int_equal(state_claim_unbind(s, "nope"), -ENOENT);
}

struct counts {
	int added, removed, bound;
};

static void observe(void *ud, enum state_event ev, const struct state_claim *c)
{
	struct counts *n = ud;

	if (ev == STATE_CLAIM_ADDED)
		n->added++;
	else if (ev == STATE_CLAIM_REMOVED)
		n->removed++;
	else
		n->bound++;
}

static void test_state_observers_see_committed_changes_only(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");
	struct counts n = { 0 };

	assert_int_equal(state_add_observer(s, observe, &n), 0);
	assert_int_equal(add(s, "u1", "ns", "a", "2", NULL), 0);
	assert_int_equal(add(s, "u2", "ns", "b", "2", NULL), -EBUSY);
	assert_int_equal(state_claim_bind(s, "u1", "p", "c"), 0);
	assert_int_equal(state_claim_remove(s, "u1"), 0);
	assert_int_equal(n.added, 1);
	assert_int_equal(n.bound, 1);
	assert_int_equal(n.removed, 1);
}

static void test_state_table_handles_the_claim_cap(void **st)
{
	struct state_opts o = { .cdi_dir = cdi_dir, .state_dir = state_dir };
	_cleanup_(state_freep) struct state *s = NULL;
	struct state_claim c;
	struct errbuf why = { "" };

	/* Empty claims (no CPUs) are legal and cheap: exercise the table alone. */
	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < STATE_MAX_CLAIMS; i++) {
		snprintf(c.uid, sizeof(c.uid), "uid-%d", i);
		if (state_claim_add(s, &c, &why) != 0)
			fail_msg("add %d: %s", i, why.s);
	}
	snprintf(c.uid, sizeof(c.uid), "one-too-many");
	assert_int_equal(state_claim_add(s, &c, &why), -E2BIG);
	for (int i = 0; i < STATE_MAX_CLAIMS; i += 2) {
		snprintf(c.uid, sizeof(c.uid), "uid-%d", i);
		assert_int_equal(state_claim_remove(s, c.uid), 0);
	}
	for (int i = 0; i < STATE_MAX_CLAIMS; i++) {
		snprintf(c.uid, sizeof(c.uid), "uid-%d", i);
		if ((state_claim(s, c.uid) != NULL) != (i % 2 == 1))
			fail_msg("lookup %d wrong after deletions", i);
	}
	assert_int_equal(state_claim_count(s), STATE_MAX_CLAIMS / 2);
}

static int guard_nonempty(void *ud, const struct cpuset *after, struct errbuf *eb)
{
	if (!cpuset_is_empty(after))
		return 0;
	return errbuf_fail(eb, -ENOSPC, "would empty the pool");
}

static void test_state_guard_can_refuse_a_claim(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-3");

	state_set_guard(s, guard_nonempty, NULL);
	assert_int_equal(add(s, "u1", "ns", "a", "0-2", NULL), 0);
	assert_int_equal(add(s, "u2", "ns", "b", "3", NULL), -ENOSPC);
	assert_false(spec_exists("u2"));
	assert_pool(s, "3");
}

static int count_cb(void *ud, const struct state_claim *c)
{
	(*(int *)ud)++;
	return 0;
}

static void test_state_checkpoint_parse_rejects_malformed(void **st)
{
	const char *bad[] = {
		"",
		"[]",
		"{\"version\":2,\"claims\":[]}",
		"{\"version\":1}",
		"{\"version\":1,\"claims\":[{}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"a/b\",\"namespace\":\"\",\"name\":\"\","
		"\"cpus\":\"1\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"results\":[]}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"a\",\"namespace\":\"\",\"name\":\"\","
		"\"cpus\":\"1-\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"results\":[]}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"a\",\"namespace\":\"\",\"name\":\"\","
		"\"cpus\":\"1\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"results\":[{}]}]}",
	};
	int n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct errbuf why = { "" };

		if (state_checkpoint_parse(bad[i], strlen(bad[i]), count_cb, &n, &why) != -EPROTO)
			fail_msg("case %zu accepted", i);
		assert_true(why.s[0] != 0);
	}
	assert_int_equal(n, 0);
}

static int take_flags(void *ud, const struct state_claim *c)
{
	((unsigned *)ud)[c->uid[0] - 'a'] = c->flags;
	return 0;
}

/* What a claim asked of its container (NUMA-local memory, the shared pool)
 * is kept across restarts; checkpoints without it read as nothing asked. */
static void test_state_checkpoint_keeps_claim_flags(void **st)
{
	static const char *text =
		"{\"version\":1,\"claims\":["
		"{\"uid\":\"a\",\"namespace\":\"\",\"name\":\"\",\"cpus\":\"1\",\"ownerPod\":\"\","
		"\"ownerContainer\":\"\",\"results\":[],\"memoryLocal\":true,\"sharedPool\":true},"
		"{\"uid\":\"b\",\"namespace\":\"\",\"name\":\"\",\"cpus\":\"2\",\"ownerPod\":\"\","
		"\"ownerContainer\":\"\",\"results\":[],\"sharedPool\":false},"
		"{\"uid\":\"c\",\"namespace\":\"\",\"name\":\"\",\"cpus\":\"3\",\"ownerPod\":\"\","
		"\"ownerContainer\":\"\",\"results\":[]}]}";
	struct state *s = open_state("0-7");
	struct state_claim c = { 0 };
	struct cpuset set;
	struct errbuf why = { "" };
	unsigned flags[3] = { 9, 9, 9 };
	char *out;

	assert_int_equal(state_checkpoint_parse(text, strlen(text), take_flags, flags, &why), 0);
	assert_int_equal(flags[0], STATE_CLAIM_MEMORY_LOCAL | STATE_CLAIM_SHARED_POOL);
	assert_int_equal(flags[1], 0);
	assert_int_equal(flags[2], 0);
	/* and written back */
	snprintf(c.uid, sizeof(c.uid), "u1");
	assert_int_equal(cpuset_parse("4-5", &set, NULL), 0);
	c.cpus = cpuset_view(&set);
	c.flags = STATE_CLAIM_SHARED_POOL;
	assert_int_equal(state_claim_add(s, &c, &why), 0);
	assert_int_equal(state_claim(s, "u1")->flags, STATE_CLAIM_SHARED_POOL);
	out = state_checkpoint_serialize(s);
	assert_non_null(strstr(out, "\"sharedPool\":true"));
	assert_null(strstr(out, "memoryLocal"));
	free(out);
	state_free(s);
}

static struct state_consumer pod(const char *uid, const char *name)
{
	struct state_consumer c;

	memset(&c, 0, sizeof(c));
	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.name = name;
	return c;
}

/* A claim of one result on cpus, reserved for the n pods in v. */
static int add_reserved(struct state *s, const char *uid, const char *cpus,
			const struct state_consumer *v, int n)
{
	struct state_result res = { .request = "r", .device = "cpudevnuma000" };
	struct state_claim c;
	struct cpuset set = cs(cpus);
	struct errbuf why = { "" };

	memset(&c, 0, sizeof(c));
	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.ns = "team-a";
	c.name = "db";
	res.cpus = cpuset_view(&set);
	c.results = &res;
	c.n_results = 1;
	c.consumers_known = true;
	c.consumers = v;
	c.n_consumers = n;
	return state_claim_add(s, &c, &why);
}

static char *read_checkpoint(void)
{
	char path[256], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

static void write_checkpoint_text(const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_state_consumers_are_matched_by_uid_namespace_and_name(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");
	struct state_consumer v[2] = { pod("pod-a", "web-0"), pod("pod-b", "web-1") };
	const struct state_claim *c;

	assert_int_equal(add_reserved(s, "u1", "2", v, 2), 0);
	c = state_claim(s, "u1");
	assert_true(c->consumers_known);
	assert_true(state_claim_has_consumer(c, "pod-a", "team-a", "web-0"));
	assert_true(state_claim_has_consumer(c, "pod-b", "team-a", "web-1"));
	assert_false(state_claim_has_consumer(c, "pod-a", "team-b", "web-0")); /* namespace */
	assert_false(state_claim_has_consumer(c, "pod-a", "team-a", "web-1")); /* name */
	assert_false(state_claim_has_consumer(c, "pod-c", "team-a", "web-0")); /* uid */
	assert_false(state_claim_has_consumer(c, "", "", ""));
	/* consumers are copied: the caller's array is not kept */
	v[0] = pod("pod-x", "x");
	assert_true(state_claim_has_consumer(state_claim(s, "u1"), "pod-a", "team-a", "web-0"));
}

static void test_state_consumers_survive_a_restart(void **st)
{
	struct state_consumer v[1] = { pod("pod-a", "web-0") };
	struct state *s = open_state("0-7");
	const struct state_claim *c;

	assert_int_equal(add_reserved(s, "u1", "2", v, 1), 0);
	assert_int_equal(add_reserved(s, "u2", "3", NULL, 0), 0); /* read: nobody */
	state_free(s);
	s = open_state("0-7");
	c = state_claim(s, "u1");
	assert_non_null(c);
	assert_true(c->consumers_known);
	assert_int_equal(c->n_consumers, 1);
	assert_true(state_claim_has_consumer(c, "pod-a", "team-a", "web-0"));
	c = state_claim(s, "u2");
	assert_true(c->consumers_known);
	assert_int_equal(c->n_consumers, 0);
	state_free(s);
}

static void test_state_old_checkpoint_without_consumers_loads_unverified(void **st)
{
	struct state *s = open_state("0-7");
	struct state_consumer v[1] = { pod("pod-a", "web-0") };
	struct cpuset two = cs("2");
	_cleanup_free_ char *text = NULL;

	state_free(s);
	/* what the driver wrote before consumers were recorded */
	assert_int_equal(cdi_spec_write(cdi_dir, "u1", &two), 0);
	write_checkpoint_text("{\"version\":1,\"claims\":[{\"uid\":\"u1\",\"namespace\":"
			      "\"team-a\",\"name\":\"db\",\"cpus\":\"2\",\"ownerPod\":\"pod-a\","
			      "\"ownerContainer\":\"app\",\"results\":[{\"request\":\"r\","
			      "\"device\":\"cpudevnuma000\",\"cpus\":\"2\"}]}]}\n");
	s = open_state("0-7");
	assert_non_null(state_claim(s, "u1"));
	assert_string_equal(state_claim(s, "u1")->name, "db");
	assert_false(state_claim(s, "u1")->consumers_known);
	assert_false(state_claim_has_consumer(state_claim(s, "u1"), "pod-a", "team-a", "web-0"));
	/* the rewritten checkpoint still says nothing of consumers */
	text = read_checkpoint();
	assert_null(strstr(text, "consumers"));
	/* a read of the claim vouches for the pod, on disk at once */
	assert_int_equal(state_claim_set_consumers(s, "u1", "team-a", "db", v, 1), 0);
	assert_true(state_claim_has_consumer(state_claim(s, "u1"), "pod-a", "team-a", "web-0"));
	free(text);
	text = read_checkpoint();
	assert_non_null(strstr(text, "\"consumers\":[{\"uid\":\"pod-a\",\"name\":\"web-0\"}]"));
	state_free(s);
}

static void test_state_set_consumers_checks_its_input(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("0-7");
	static struct state_consumer many[STATE_MAX_CONSUMERS + 1];
	struct state_consumer bad[] = { pod("a/b", "x"), pod("ok", "Not-A-Name"), pod("ok", ""),
					pod("ok", "a\nb") };
	struct state_consumer v[1] = { pod("pod-a", "web-0") };
	struct cpuset three = cs("3");

	assert_int_equal(add_reserved(s, "u1", "2", v, 1), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(state_claim_set_consumers(s, "u1", "team-a", "db", &bad[i], 1),
				 -EINVAL);
	for (int i = 0; i <= STATE_MAX_CONSUMERS; i++)
		many[i] = pod("p", "p");
	assert_int_equal(state_claim_set_consumers(s, "u1", "team-a", "db", many,
						   STATE_MAX_CONSUMERS + 1),
			 -E2BIG);
	assert_int_equal(state_claim_set_consumers(s, "u1", "team-a", "db", many,
						   STATE_MAX_CONSUMERS),
			 0);
	assert_int_equal(state_claim_set_consumers(s, "nope", "team-a", "db", v, 1), -ENOENT);
	/* a claim's namespace and name do not change */
	assert_int_equal(state_claim_set_consumers(s, "u1", "team-b", "db", v, 1), -EINVAL);
	assert_int_equal(state_claim_set_consumers(s, "u1", "team-a", "other", v, 1), -EINVAL);
	assert_false(state_claim_has_consumer(state_claim(s, "u1"), "pod-a", "team-a", "web-0"));
	assert_int_equal(state_claim_add(s, &(struct state_claim){ .uid = "u2", .n_consumers = 1,
								    .consumers = bad },
					 NULL),
			 -EINVAL);
	/* restored from its spec alone: a read names it */
	assert_int_equal(cdi_spec_write(cdi_dir, "u3", &three), 0);
	state_free(s);
	s = open_state("0-7");
	assert_string_equal(state_claim(s, "u3")->ns, "");
	assert_int_equal(state_claim_set_consumers(s, "u3", "Bad_NS", "db", v, 1), -EINVAL);
	assert_int_equal(state_claim_set_consumers(s, "u3", "team-c", "c3", v, 1), 0);
	assert_string_equal(state_claim(s, "u3")->ns, "team-c");
	assert_string_equal(state_claim(s, "u3")->name, "c3");
	assert_true(state_claim_has_consumer(state_claim(s, "u3"), "pod-a", "team-c", "web-0"));
}

static void test_state_checkpoint_parse_rejects_malformed_consumers(void **st)
{
#define ENTRY(consumers)                                                                 \
	"{\"version\":1,\"claims\":[{\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"c\","     \
	"\"cpus\":\"1\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"results\":[],"          \
	"\"consumers\":" consumers "}]}"
	const char *bad[] = {
		ENTRY("{}"),
		ENTRY("null"),
		ENTRY("[7]"),
		ENTRY("[{\"uid\":\"p\"}]"),
		ENTRY("[{\"name\":\"p\"}]"),
		ENTRY("[{\"uid\":\"p/1\",\"name\":\"p\"}]"),
		ENTRY("[{\"uid\":\"p\",\"name\":\"P Q\"}]"),
		ENTRY("[{\"uid\":\"p\",\"name\":7}]"),
	};
	const char *good = ENTRY("[{\"uid\":\"p\",\"name\":\"q\"}]");
#undef ENTRY
	int n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct errbuf why = { "" };

		if (state_checkpoint_parse(bad[i], strlen(bad[i]), count_cb, &n, &why) != -EPROTO)
			fail_msg("case %zu accepted", i);
		assert_non_null(strstr(why.s, "consumers"));
	}
	assert_int_equal(n, 0);
	assert_int_equal(state_checkpoint_parse(good, strlen(good), count_cb, &n, NULL), 0);
	assert_int_equal(n, 1);
}

static char *set_text(const struct cpuset_view *v)
{
	struct cpuset c;

	return cpuset_to_string(cpuset_from_view(v, &c));
}

static void assert_view(const struct cpuset_view *v, const char *want)
{
	char *got = set_text(v);

	assert_string_equal(got, want);
	free(got);
}

/* The fields of a and b, sets compared as sets, strings as strings. */
static void assert_claims_equal(const struct state_claim *a, const struct state_claim *b)
{
	char *x = set_text(&a->cpus), *y = set_text(&b->cpus);

	assert_string_equal(x, y);
	free(x);
	free(y);
	assert_string_equal(a->uid, b->uid);
	assert_string_equal(a->ns, b->ns);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->owner_pod, b->owner_pod);
	assert_string_equal(a->owner_container, b->owner_container);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->rt, b->rt);
	assert_int_equal(a->consumers_known, b->consumers_known);
	assert_int_equal(a->n_consumers, b->n_consumers);
	for (int i = 0; i < a->n_consumers; i++) {
		assert_string_equal(a->consumers[i].uid, b->consumers[i].uid);
		assert_string_equal(a->consumers[i].name, b->consumers[i].name);
	}
	assert_int_equal(a->n_results, b->n_results);
	for (int i = 0; i < a->n_results; i++) {
		x = set_text(&a->results[i].cpus);
		y = set_text(&b->results[i].cpus);
		assert_string_equal(x, y);
		free(x);
		free(y);
		assert_string_equal(a->results[i].request, b->results[i].request);
		assert_string_equal(a->results[i].device, b->results[i].device);
	}
}

struct seen {
	const struct state *s;
	int n;
};

static int compare_with_state(void *ud, const struct state_claim *c)
{
	struct seen *x = ud;
	const struct state_claim *have = state_claim(x->s, c->uid);

	assert_non_null(have);
	assert_claims_equal(c, have);
	x->n++;
	return 0;
}

/* Records hold only the CPU words in use, from wherever the lowest CPU is;
 * what they say goes to the checkpoint exactly, before and after a change,
 * and comes back the same from it and from a restart. */
static void test_state_record_round_trips_cpus_far_from_zero(void **st)
{
	static const char *want =
		"{\"version\":1,\"claims\":["
		"{\"results\":[{\"request\":\"req0\",\"device\":\"cpudevnuma000\",\"cpus\":\"1000\"},"
		"{\"request\":\"req1\",\"device\":\"cpudevnuma000\",\"cpus\":\"1023\"}],"
		"\"uid\":\"u1\",\"namespace\":\"ns\",\"name\":\"db\",\"cpus\":\"1000,1023\","
		"\"ownerPod\":\"pod-a\",\"ownerContainer\":\"app\"},"
		"{\"results\":[{\"request\":\"req0\",\"device\":\"cpudevnuma000\",\"cpus\":\"1024,1087\"}],"
		"\"uid\":\"u2\",\"namespace\":\"ns\",\"name\":\"web\",\"cpus\":\"1024,1087\","
		"\"ownerPod\":\"\",\"ownerContainer\":\"\"},"
		"{\"results\":[{\"request\":\"req0\",\"device\":\"cpudevnuma000\",\"cpus\":\"3,1090\"}],"
		"\"uid\":\"u3\",\"namespace\":\"ns\",\"name\":\"batch\",\"cpus\":\"3,1090\","
		"\"ownerPod\":\"\",\"ownerContainer\":\"\"}]}\n";
	struct state *s = open_state("1-1100");
	const struct state_claim *c;
	struct seen seen = { 0 };
	struct errbuf why = { "" };
	char *text, *again;

	assert_int_equal(add(s, "u1", "ns", "db", "1000", "1023", NULL), 0);
	assert_int_equal(add(s, "u2", "ns", "web", "1024,1087", NULL), 0);
	assert_int_equal(add(s, "u3", "ns", "batch", "3,1090", NULL), 0);
	c = state_claim(s, "u1");
	assert_view(&c->cpus, "1000,1023");
	assert_int_equal(c->cpus.off, 15);
	assert_int_equal(c->cpus.n, 1);
	assert_view(&c->results[0].cpus, "1000");
	assert_view(&c->results[1].cpus, "1023");
	/* one result: the claim's set is the result's, held once */
	c = state_claim(s, "u2");
	assert_ptr_equal(c->cpus.w, c->results[0].cpus.w);
	assert_int_equal(c->cpus.off, 16);
	assert_int_equal(c->cpus.n, 1);
	c = state_claim(s, "u3");
	assert_int_equal(c->cpus.off, 0);
	assert_int_equal(c->cpus.n, 18);
	assert_view(&c->cpus, "3,1090");

	/* a change rebuilds the record; the claim stays where it was */
	c = state_claim(s, "u1");
	assert_int_equal(state_claim_bind(s, "u1", "pod-a", "app"), 0);
	assert_ptr_equal(state_claim(s, "u1"), c);
	assert_string_equal(c->owner_pod, "pod-a");
	assert_view(&c->cpus, "1000,1023");
	assert_view(&c->results[1].cpus, "1023");
	assert_string_equal(c->results[1].request, "req1");

	text = state_checkpoint_serialize(s);
	assert_string_equal(text, want);
	seen.s = s;
	assert_int_equal(state_checkpoint_parse(text, strlen(text), compare_with_state, &seen, &why),
			 0);
	assert_int_equal(seen.n, 3);
	state_free(s); /* writes the binding */

	s = open_state("1-1100");
	assert_int_equal(state_claim_count(s), 3);
	/* the same records, in the order the CDI specs were found */
	again = state_checkpoint_serialize(s);
	assert_int_equal(strlen(again), strlen(want));
	seen = (struct seen){ .s = s };
	assert_int_equal(state_checkpoint_parse(text, strlen(text), compare_with_state, &seen, &why),
			 0);
	assert_int_equal(seen.n, 3);
	free(text);
	free(again);
	state_free(s);
}

/* Out of memory at any allocation of a change: -ENOMEM, and the claim,
 * the pool and the checkpoint are what they were. */
static void test_state_enomem_keeps_everything(void **st)
{
	_cleanup_(state_freep) struct state *s = open_state("1-1100");
	struct state_consumer v[1] = { pod("pod-a", "web-0") };
	const struct state_claim *c;
	struct state_claim before;
	char *text, *now;
	int n, r;

	for (n = 1;; n++) {
		malloc_fail_in = n;
		r = add(s, "u1", "ns", "db", "1000", "1023", NULL);
		malloc_fail_in = 0;
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_null(state_claim(s, "u1"));
		assert_false(spec_exists("u1"));
		assert_pool(s, "1-1100");
	}
	assert_true(n > 1);
	c = state_claim(s, "u1");
	before = *c;
	text = state_checkpoint_serialize(s);

	for (n = 1;; n++) {
		malloc_fail_in = n;
		r = state_claim_bind(s, "u1", "pod-a", "app");
		malloc_fail_in = 0;
		if (r == 0)
			break;
		assert_int_equal(r, -ENOMEM);
		assert_ptr_equal(state_claim(s, "u1"), c);
		assert_memory_equal(c, &before, sizeof(before));
		assert_claims_equal(c, &before);
		now = state_checkpoint_serialize(s);
		assert_string_equal(now, text);
		free(now);
	}
	assert_true(n > 1);
	assert_string_equal(c->owner_pod, "pod-a");

	before = *c;
	free(text);
	text = state_checkpoint_serialize(s);
	malloc_fail_in = 1;
	r = state_claim_set_consumers(s, "u1", "ns", "db", v, 1);
	malloc_fail_in = 0;
	assert_int_equal(r, -ENOMEM);
	assert_memory_equal(c, &before, sizeof(before));
	assert_false(c->consumers_known);
	now = state_checkpoint_serialize(s);
	assert_string_equal(now, text);
	free(now);
	free(text);
	assert_int_equal(state_claim_set_consumers(s, "u1", "ns", "db", v, 1), 0);
	assert_true(state_claim_has_consumer(c, "pod-a", "ns", "web-0"));
	assert_view(&c->cpus, "1000,1023");
}

static void test_state_isolated_cpus_are_claimed_never_shared(void **st)
{
	struct state_opts o = { .cdi_dir = cdi_dir, .state_dir = state_dir,
				.allocatable = cs("0-7"), .isolated = cs("4-5") };
	struct state *s = NULL;
	struct cpuset free_cpus;
	char buf[64];

	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	assert_pool(s, "0-3,6-7");
	state_unclaimed(s, &free_cpus);
	(void)cpuset_format(&free_cpus, buf, sizeof(buf));
	assert_string_equal(buf, "0-7");
	/* a claim on an isolated CPU and one on an ordinary CPU */
	assert_int_equal(add(s, "a1", "ns", "iso", "4", NULL), 0);
	assert_int_equal(add(s, "b2", "ns", "plain", "0", NULL), 0);
	assert_pool(s, "1-3,6-7");
	state_unclaimed(s, &free_cpus);
	(void)cpuset_format(&free_cpus, buf, sizeof(buf));
	assert_string_equal(buf, "1-3,5-7");
	state_free(s);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_state_add_reserves_writes_spec_and_shrinks_pool),
		T(test_state_isolated_cpus_are_claimed_never_shared),
		T(test_state_add_refuses_overlap_duplicates_and_foreign_cpus),
		T(test_state_add_rolls_back_when_the_spec_cannot_be_written),
		T(test_state_remove_deletes_spec_then_releases),
		T(test_state_remove_keeps_reservation_when_spec_removal_fails),
		T(test_state_remove_releases_a_claim_whose_spec_became_a_directory),
		T(test_state_load_removes_stale_temps_never_follows_them),
		T(test_state_load_never_writes_through_a_planted_device_node),
		T(test_state_load_replaces_a_fifo_or_symlink_checkpoint),
		T(test_state_load_directory_checkpoint_removed_if_empty_else_refused),
		T(test_state_restart_restores_claims_and_metadata),
		T(test_state_restart_without_checkpoint_uses_cdi_specs),
		T(test_state_restart_drops_checkpoint_entries_without_spec),
		T(test_state_restart_quarantines_conflicting_specs),
		T(test_state_restart_the_checkpoint_wins_over_a_planted_spec),
		T(test_state_offline_cpus_leave_the_shared_pool),
		T(test_state_isolated_cpus_follow_the_kernel),
		T(test_state_bad_checkpoint_is_ignored_not_fatal),
		T(test_state_bind_one_owner_per_claim),
		T(test_state_observers_see_committed_changes_only),
		T(test_state_table_handles_the_claim_cap),
		T(test_state_checkpoint_parse_rejects_malformed),
		T(test_state_checkpoint_keeps_claim_flags),
		T(test_state_guard_can_refuse_a_claim),
		T(test_state_consumers_are_matched_by_uid_namespace_and_name),
		T(test_state_consumers_survive_a_restart),
		T(test_state_old_checkpoint_without_consumers_loads_unverified),
		T(test_state_set_consumers_checks_its_input),
		T(test_state_checkpoint_parse_rejects_malformed_consumers),
		T(test_state_record_round_trips_cpus_far_from_zero),
		T(test_state_enomem_keeps_everything),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
