/* wrap: fileio_write_value */
/* irq: the mask and /proc/interrupts parsers, the guard on a fake procfs
 * tree (managed interrupts that refuse writes, affinities that would be left
 * empty, a record that outlives a killed daemon, affinities changed by
 * someone else), and on this machine's real /proc/irq (root, two CPUs or
 * more): every movable interrupt leaves CPU 1 and everything comes back
 * exactly, also when the test fails (the teardown writes the snapshot). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "host/irq.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "testutil.h"

#define DATA "test/data/irq"

/* ---- fileio_write_value: the fake tree's managed interrupts refuse writes ---------------- */

int __real_fileio_write_value(int dfd, const char *path, const char *value);
static const char *refuse_prefix; /* "36/": writes under it fail with EIO */

int __wrap_fileio_write_value(int dfd, const char *path, const char *value)
{
	if (refuse_prefix && !strncmp(path, refuse_prefix, strlen(refuse_prefix)))
		return -EIO;
	return __real_fileio_write_value(dfd, path, value);
}

/* ---- parsers ------------------------------------------------------------------------------ */

static void test_irq_mask_parse_reads_kernel_masks(void **st)
{
	struct cpuset s;
	char buf[64];

	assert_int_equal(irq_mask_parse("3\n", 2, &s), 0);
	assert_int_equal(cpuset_count(&s), 2);
	assert_true(cpuset_has(&s, 0) && cpuset_has(&s, 1));
	assert_int_equal(irq_mask_parse("ff,00000001", 11, &s), 0);
	assert_int_equal(cpuset_count(&s), 9);
	assert_true(cpuset_has(&s, 0) && cpuset_has(&s, 32) && cpuset_has(&s, 39));
	assert_int_equal(irq_mask_format(&s, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "ff,00000001");
	cpuset_zero(&s);
	assert_int_equal(irq_mask_format(&s, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0");
	cpuset_set(&s, 1);
	assert_int_equal(irq_mask_format(&s, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2");
	assert_int_equal(irq_mask_format(&s, buf, 1), -ENOSPC);
}

static void test_irq_mask_parse_rejects_bad_masks(void **st)
{
	static const char *const bad[] = { "", "\n", "xyz", ",1", "1,", "123456789", "1,,2",
					   "1 2", "-1", "0x3" };
	struct cpuset s;

	cpuset_zero(&s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(irq_mask_parse(bad[i], strlen(bad[i]), &s), -EINVAL);
	assert_true(cpuset_is_empty(&s)); /* untouched */
	/* CPU 8192 and above: named, not truncated */
	{
		char big[CPUSET_MAX / 4 + CPUSET_MAX / 32 + 16] = "1";
		size_t n = 1;

		for (int g = 0; g < CPUSET_MAX / 32; g++)
			n += (size_t)snprintf(big + n, sizeof(big) - n, ",00000000");
		assert_int_equal(irq_mask_parse(big, n, &s), -ERANGE);
	}
}

struct rows {
	uint64_t virtio_req, loc;
	char desc[128];
	int n;
};

static int on_row(void *ud, const struct irq_row *row)
{
	struct rows *r = ud;

	r->n++;
	if (!strcmp(row->label, "36")) {
		r->virtio_req = row->count;
		snprintf(r->desc, sizeof(r->desc), "%s", row->desc);
	}
	if (!strcmp(row->label, "LOC"))
		r->loc = row->count;
	return 0;
}

static void test_irq_interrupts_parse_reads_a_capture(void **st)
{
	_cleanup_free_ char *text = NULL;
	struct rows r = { 0 };
	size_t len;

	text = testutil_slurp(DATA "/interrupts-2cpu", &len);
	assert_int_equal(irq_interrupts_parse(text, len, 1, on_row, &r), 0);
	assert_true(r.n > 20);
	assert_true(r.virtio_req > 0); /* the block device's queue lands on CPU 1 */
	assert_string_equal(r.desc, "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0");
	assert_true(r.loc > 0);
	/* a CPU without a column counts nothing */
	memset(&r, 0, sizeof(r));
	assert_int_equal(irq_interrupts_parse(text, len, 7, on_row, &r), 0);
	assert_int_equal(r.virtio_req, 0);
}

static int stop_at_two(void *ud, const struct irq_row *row)
{
	return ++*(int *)ud == 2 ? 42 : 0;
}

static void test_irq_interrupts_parse_rejects_bad_text(void **st)
{
	static const char *const bad[] = {
		"",
		"  36:  1 2 x\n",		  /* no header */
		"  CPU0 CPUx\n",		  /* bad header */
		"  CPU0 CPU1\n  :  1 2 x\n",	  /* row without label */
		"  CPU0 CPU1\n  nolabel 1 2\n",	  /* no colon */
		"  CPU0 CPU1\n 36: 12z 3 x\n",	  /* junk in a count */
	};
	struct rows r = { 0 };
	int n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(irq_interrupts_parse(bad[i], strlen(bad[i]), 0, on_row, &r),
				 -EPROTO);
	assert_int_equal(irq_interrupts_parse("CPU0\n1: 1\n2: 2\n3: 3\n", 21, 0, stop_at_two, &n),
			 42);
}

/* ---- the guard on a fake tree ------------------------------------------------------------- */

struct fake {
	char root[64], state[96];
};

static void put(const char *root, const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	*strrchr(path, '/') = 0;
	assert_int_equal(fileio_mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *root, const char *rel)
{
	static char buf[256];
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static int fake_setup(void **st)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	log_set_level(LOG_ERROR);
	snprintf(f->root, sizeof(f->root), "/dev/shm/irq-test.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->state, sizeof(f->state), "%s/state", f->root);
	assert_int_equal(fileio_mkdir_p(f->state, 0700), 0);
	put(f->root, "irq/default_smp_affinity", "f\n");
	put(f->root, "irq/24/smp_affinity_list", "0-3\n");
	put(f->root, "irq/36/smp_affinity_list", "0-3\n"); /* managed: refuses */
	put(f->root, "irq/38/smp_affinity_list", "2\n");   /* only an isolated CPU */
	put(f->root, "irq/40/smp_affinity_list", "0\n");   /* not touching them */
	put(f->root, "irq/41/smp_affinity_list", "1-2\n");
	refuse_prefix = "36/";
	*st = f;
	return 0;
}

static int fake_teardown(void **st)
{
	struct fake *f = *st;
	char cmd[128];

	refuse_prefix = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->root);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static struct irq_guard *guard(struct fake *f)
{
	struct irq_guard *g = NULL;
	struct errbuf eb = { "" };

	assert_int_equal(irq_guard_new(&(struct irq_opts){ .procfs_root = f->root,
							   .state_dir = f->state },
				       &g, &eb),
			 0);
	return g;
}

static void hold(struct irq_guard *g, const char *key, const char *cpus)
{
	struct cpuset s;

	assert_int_equal(cpuset_parse(cpus, &s, NULL), 0);
	assert_int_equal(irq_guard_hold(g, key, &s), 0);
}

static bool record_exists(struct fake *f)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", f->state, IRQ_RECORD_FILE);
	return access(path, F_OK) == 0;
}

static void assert_original(struct fake *f)
{
	assert_string_equal(get(f->root, "irq/default_smp_affinity"), "f");
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0-3");
	assert_string_equal(get(f->root, "irq/36/smp_affinity_list"), "0-3");
	assert_string_equal(get(f->root, "irq/38/smp_affinity_list"), "2");
	assert_string_equal(get(f->root, "irq/40/smp_affinity_list"), "0");
	assert_string_equal(get(f->root, "irq/41/smp_affinity_list"), "1-2");
}

static void test_irq_guard_moves_what_it_can_reports_the_rest_and_restores(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct irq_report rep;

	hold(g, "claim-a", "1-2");
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0,3");
	assert_string_equal(get(f->root, "irq/41/smp_affinity_list"), "1-2"); /* would be empty */
	assert_string_equal(get(f->root, "irq/38/smp_affinity_list"), "2");
	assert_string_equal(get(f->root, "irq/40/smp_affinity_list"), "0");
	assert_string_equal(get(f->root, "irq/default_smp_affinity"), "9");
	assert_int_equal(rep.moved, 2); /* 24 and the default */
	assert_int_equal(rep.refused, 1);
	assert_int_equal(rep.refused_irqs[0], 36);
	assert_int_equal(rep.empty, 2);
	assert_int_equal(rep.empty_irqs[0], 38);
	assert_int_equal(rep.empty_irqs[1], 41);
	assert_true(rep.default_set);
	assert_true(record_exists(f));
	/* Applying again changes nothing and says the moved ones are kept. */
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_int_equal(rep.moved, 0);
	assert_int_equal(rep.kept, 2);
	assert_int_equal(irq_guard_release(g, "claim-a"), 0);
	assert_int_equal(irq_guard_release(g, "claim-a"), -ENOENT);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_int_equal(rep.moved, 2);
	assert_original(f);
	assert_false(record_exists(f));
	irq_guard_free(g);
}

static void test_irq_guard_holders_add_up_and_leave_one_by_one(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct irq_report rep;
	struct cpuset iso;

	hold(g, "a", "1");
	hold(g, "b", "3");
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0,2");
	irq_guard_isolated(g, &iso);
	assert_int_equal(cpuset_count(&iso), 2);
	assert_int_equal(irq_guard_release(g, "a"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0-2");
	assert_string_equal(get(f->root, "irq/default_smp_affinity"), "7");
	assert_int_equal(irq_guard_release(g, "b"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_original(f);
	irq_guard_free(g);
}

static void test_irq_guard_restores_from_the_record_after_a_kill(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct irq_report rep;

	hold(g, "claim-a", "1");
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0,2-3");
	irq_guard_free(g); /* the daemon dies: nothing restored */
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "0,2-3");

	g = guard(f); /* the next one starts from the record */
	assert_int_equal(irq_guard_n_holders(g), 1);
	assert_string_equal(irq_guard_holder(g, 0), "claim-a");
	assert_null(irq_guard_holder(g, 1));
	assert_int_equal(irq_guard_release(g, "claim-a"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_original(f);
	assert_false(record_exists(f));
	irq_guard_free(g);
}

static void test_irq_guard_leaves_an_affinity_someone_else_changed(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct irq_report rep;

	hold(g, "claim-a", "1");
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	put(f->root, "irq/24/smp_affinity_list", "3\n"); /* an admin's choice */
	assert_int_equal(irq_guard_release(g, "claim-a"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_string_equal(get(f->root, "irq/24/smp_affinity_list"), "3");
	assert_false(record_exists(f));
	irq_guard_free(g);
}

static void test_irq_guard_forgets_interrupts_that_went_away(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct irq_report rep;
	char cmd[160];

	hold(g, "claim-a", "1");
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/irq/24", f->root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(irq_guard_release(g, "claim-a"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	assert_int_equal(rep.failed, 0);
	assert_false(record_exists(f));
	irq_guard_free(g);
}

static void test_irq_guard_refuses_bad_holders_and_records(void **st)
{
	struct fake *f = *st;
	struct irq_guard *g = guard(f);
	struct errbuf eb = { "" };
	struct cpuset s, empty;
	static const char *const bad[] = {
		"{", "[]", "{\"holders\":[]}", "{\"holders\":[{\"key\":\"a\"}],\"irqs\":[]}",
		"{\"holders\":[],\"irqs\":[{\"irq\":-1,\"was\":\"0\",\"set\":\"0\"}]}",
		"{\"holders\":[],\"irqs\":[{\"irq\":3,\"was\":\"x\",\"set\":\"0\"}]}",
		"{\"holders\":[{\"key\":\"a b\",\"cpus\":\"1\"}],\"irqs\":[]}",
		"{\"holders\":[],\"irqs\":[],\"default\":{\"was\":\"0\"}}",
	};

	cpuset_zero(&empty);
	assert_int_equal(cpuset_parse("1", &s, NULL), 0);
	assert_int_equal(irq_guard_hold(g, "", &s), -EINVAL);
	assert_int_equal(irq_guard_hold(g, "a/b c", &s), -EINVAL);
	assert_int_equal(irq_guard_hold(g, "a", &empty), -EINVAL);
	irq_guard_free(g);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[PATH_MAX];
		FILE *fp;

		snprintf(path, sizeof(path), "%s/%s", f->state, IRQ_RECORD_FILE);
		fp = fopen(path, "w");
		assert_non_null(fp);
		fputs(bad[i], fp);
		fclose(fp);
		g = NULL;
		assert_int_equal(irq_guard_new(&(struct irq_opts){ .procfs_root = f->root,
								   .state_dir = f->state },
					       &g, &eb),
				 -EPROTO);
		assert_null(g);
	}
}

static void test_irq_balancer_pid_finds_irqbalance(void **st)
{
	struct fake *f = *st;

	assert_int_equal(irq_balancer_pid(f->root), 0);
	put(f->root, "4242/comm", "irqbalance\n");
	put(f->root, "4243/comm", "irqbalancer\n");
	assert_int_equal(irq_balancer_pid(f->root), 4242);
}

/* ---- this machine's /proc/irq -------------------------------------------------------------- */

#define REAL_MAX 1024

static struct snapshot {
	int n;
	int irq[REAL_MAX];
	char aff[REAL_MAX][128];
	char def[128];
	bool taken;
} snap;

/* Writes back what the snapshot holds wherever it differs (best effort). */
static void restore_snapshot(void)
{
	char path[PATH_MAX], *cur;

	if (!snap.taken)
		return;
	for (int i = 0; i < snap.n; i++) {
		snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", snap.irq[i]);
		cur = get("", path);
		if (cur && strcmp(cur, snap.aff[i]) != 0)
			(void)__real_fileio_write_value(AT_FDCWD, path, snap.aff[i]);
	}
	cur = get("/proc", "irq/default_smp_affinity");
	if (cur && strcmp(cur, snap.def) != 0)
		(void)__real_fileio_write_value(AT_FDCWD, "/proc/irq/default_smp_affinity", snap.def);
}

static int real_setup(void **st)
{
	char path[PATH_MAX], *v;

	log_set_level(LOG_ERROR);
	memset(&snap, 0, sizeof(snap));
	if (geteuid() != 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
	    access("/proc/irq/default_smp_affinity", W_OK) != 0)
		return 0;
	for (int irq = 0; irq < 4096 && snap.n < REAL_MAX; irq++) {
		snprintf(path, sizeof(path), "irq/%d/smp_affinity_list", irq);
		v = get("/proc", path);
		if (!v)
			continue;
		snap.irq[snap.n] = irq;
		snprintf(snap.aff[snap.n++], sizeof(snap.aff[0]), "%s", v);
	}
	v = get("/proc", "irq/default_smp_affinity");
	assert_non_null(v);
	snprintf(snap.def, sizeof(snap.def), "%s", v);
	snap.taken = true;
	return 0;
}

static int real_teardown(void **st)
{
	restore_snapshot();
	return 0;
}

static void test_irq_guard_on_this_machine_moves_off_cpu1_and_back(void **st)
{
	struct irq_guard *g = NULL;
	struct irq_report rep;
	struct errbuf eb = { "" };
	struct cpuset one, aff;
	char path[PATH_MAX], *v;
	int movable = 0;

	if (!snap.taken) {
		print_message("skipped: needs root, 2 CPUs and a writable /proc/irq\n");
		skip();
	}
	assert_int_equal(irq_guard_new(&(struct irq_opts){ 0 }, &g, &eb), 0);
	assert_int_equal(cpuset_parse("1", &one, NULL), 0);
	assert_int_equal(irq_guard_hold(g, "irq-test", &one), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	for (int i = 0; i < snap.n; i++) {
		bool refused = false, empty = false;

		for (int k = 0; k < rep.n_refused_irqs; k++)
			refused |= rep.refused_irqs[k] == snap.irq[i];
		for (int k = 0; k < rep.n_empty_irqs; k++)
			empty |= rep.empty_irqs[k] == snap.irq[i];
		snprintf(path, sizeof(path), "irq/%d/smp_affinity_list", snap.irq[i]);
		v = get("/proc", path);
		assert_non_null(v);
		assert_int_equal(cpuset_parse(v, &aff, NULL), 0);
		if (refused || empty) {
			assert_string_equal(v, snap.aff[i]); /* reported, left as found */
			continue;
		}
		if (!cpuset_has(&aff, 1) && strcmp(v, snap.aff[i]) != 0)
			movable++;
		if (cpuset_has(&aff, 1))
			fail_msg("irq %d still has CPU 1: %s", snap.irq[i], v);
	}
	print_message("moved %d, refused %d (e.g. irq %d), empty %d\n", rep.moved, rep.refused,
		      rep.n_refused_irqs ? rep.refused_irqs[0] : -1, rep.empty);
	assert_true(movable > 0);
	assert_true(rep.default_set);
	assert_int_equal(irq_mask_parse(get("/proc", "irq/default_smp_affinity"), 1, &aff), 0);
	assert_false(cpuset_has(&aff, 1));
	assert_int_equal(irq_guard_release(g, "irq-test"), 0);
	assert_int_equal(irq_guard_apply(g, &rep), 0);
	irq_guard_free(g);
	for (int i = 0; i < snap.n; i++) {
		snprintf(path, sizeof(path), "irq/%d/smp_affinity_list", snap.irq[i]);
		v = get("/proc", path);
		if (v)
			assert_string_equal(v, snap.aff[i]);
	}
	assert_string_equal(get("/proc", "irq/default_smp_affinity"), snap.def);
}

int main(void)
{
#define F(t) cmocka_unit_test_setup_teardown(t, fake_setup, fake_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_irq_mask_parse_reads_kernel_masks),
		cmocka_unit_test(test_irq_mask_parse_rejects_bad_masks),
		cmocka_unit_test(test_irq_interrupts_parse_reads_a_capture),
		cmocka_unit_test(test_irq_interrupts_parse_rejects_bad_text),
		F(test_irq_guard_moves_what_it_can_reports_the_rest_and_restores),
		F(test_irq_guard_holders_add_up_and_leave_one_by_one),
		F(test_irq_guard_restores_from_the_record_after_a_kill),
		F(test_irq_guard_leaves_an_affinity_someone_else_changed),
		F(test_irq_guard_forgets_interrupts_that_went_away),
		F(test_irq_guard_refuses_bad_holders_and_records),
		F(test_irq_balancer_pid_finds_irqbalance),
		cmocka_unit_test_setup_teardown(test_irq_guard_on_this_machine_moves_off_cpu1_and_back,
						real_setup, real_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
