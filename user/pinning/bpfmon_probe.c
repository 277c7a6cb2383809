/* bpfmon_probe: what this kernel's BPF can do, asked two ways. The feature
 * probe (tp_btf, ring buffers, task storage, the BPF LSM) that bpfmon_new()
 * reads to choose its programs; and bpfmon_probe_new(), which loads every
 * object of the project once against the running kernel, with its verifier
 * log, for bpf-verify --probe. Apart from bpfmon.c because neither keeps any
 * state of a running check: they only ask the kernel (see bpfmon.h).
 */
#include "pinning/bpfmon.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "host/procfs.h"
#include "lib/buf.h"
#include "lib/cleanup.h"
#include "pinning/bpfmon_priv.h"

#include "baseline.skel.h"
#include "enforce.skel.h"
#include "pinning.skel.h"
#include "rt.skel.h"

/* ---- kernel features ----------------------------------------------------------------- */

static bool probe_tp_btf(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int id = libbpf_find_vmlinux_btf_id("sched_switch", BPF_TRACE_RAW_TP);
	struct bpf_prog_load_opts po;
	int fd;

	if (id <= 0)
		return false;
	/* LIBBPF_OPTS() spelled out: cppcheck does not know the macro. */
	memset(&po, 0, sizeof(po));
	po.sz = sizeof(po);
	po.expected_attach_type = BPF_TRACE_RAW_TP;
	po.attach_btf_id = (__u32)id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns, ARRAY_SIZE(insns), &po);
	if (fd < 0)
		return false;
	(void)close(fd);
	return true;
}

/* 1 = "bpf" is an active LSM, 0 = it is not, -errno = cannot tell. */
static int lsm_has_bpf(void)
{
	char buf[512];
	_cleanup_fclose_ FILE *f = fopen("/sys/kernel/security/lsm", "re");

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f))
		return -EIO;
	buf[strcspn(buf, "\n")] = 0;
	return procfs_list_has(buf, strlen(buf), "bpf");
}

unsigned bpfmon_probe_features(unsigned without)
{
	unsigned f = 0;

	if (probe_tp_btf())
		f |= BPFMON_FEAT_TP_BTF | BPFMON_FEAT_BTF;
	else if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
		f |= BPFMON_FEAT_BTF; /* there, but we may not load programs */
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1)
		f |= BPFMON_FEAT_RINGBUF;
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1)
		f |= BPFMON_FEAT_TASK_STORAGE;
	/* Unknown (securityfs not mounted) counts as present: loading the
	 * program is the real test. */
	if (lsm_has_bpf() != 0)
		f |= BPFMON_FEAT_BPF_LSM;
	return f & ~without;
}

/* ---- probe ---------------------------------------------------------------------------- */

#define PROBE_LOG_MAX (1u << 20)
#define PROBE_TRUNCATED "\n... (truncated)\n"

/* libbpf's print callback has no userdata: the capture buffer of the object
 * being probed is a file-scope pointer, set only inside bpfmon_probe_new().
 * The buffer's cap leaves room for PROBE_TRUNCATED after PROBE_LOG_MAX. */
struct capture {
	struct buf b;
	bool truncated;
};
static struct capture *probe_capture;

__attribute__((format(printf, 2, 0))) static int probe_print(enum libbpf_print_level level,
							     const char *fmt, va_list ap)
{
	struct capture *c = probe_capture;
	va_list aq;
	int n;

	/* Warnings carry the verifier log of a failed load; debug is noise. */
	if (!c || level == LIBBPF_DEBUG || c->truncated)
		return 0;
	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n <= 0)
		return 0;
	/* Keep the beginning of a long log: the first error is the one. */
	if (buf_len(&c->b) + (size_t)n > PROBE_LOG_MAX || buf_vaddf(&c->b, fmt, ap) < 0)
		c->truncated = true;
	return 0;
}

/* pinning.bpf.c without the run-queue programs (the pinning check), or with
 * them (contention): the two ways bpfmon_new() may load it. */
static void probe_pinning_with(const struct bpfmon *tmp, struct bpfmon_probe_obj *o,
			       bool contention)
{
	struct pinning_bpf *s = pinning_bpf__open();
	int r;

	if (!s) {
		o->load = -errno;
		return;
	}
	r = bpfmon_pinning_prepare(tmp, s, contention);
	if (!r)
		r = pinning_bpf__load(s);
	o->load = r < 0 ? r : r ? -EINVAL : 0;
	if (!o->load) {
		r = pinning_bpf__attach(s);
		o->attach = r < 0 ? r : r ? -EINVAL : 0;
	}
	pinning_bpf__destroy(s);
}

static void probe_pinning(const struct bpfmon *tmp, struct bpfmon_probe_obj *o)
{
	probe_pinning_with(tmp, o, false);
}

static void probe_runqueue(const struct bpfmon *tmp, struct bpfmon_probe_obj *o)
{
	probe_pinning_with(tmp, o, true);
}

static void probe_rt(const struct bpfmon *tmp, struct bpfmon_probe_obj *o)
{
	struct rt_bpf *s = rt_bpf__open();
	int r;

	if (!s) {
		o->load = -errno;
		return;
	}
	s->rodata->cgroup_mode = tmp->opts.cgroup == CGROUP_V1 ? PINNING_CGROUP_V1
							       : PINNING_CGROUP_V2;
	r = bpf_map__set_max_entries(s->maps.rt_cpus, (__u32)tmp->ncpu);
	if (!r)
		r = rt_bpf__load(s);
	o->load = r < 0 ? r : r ? -EINVAL : 0;
	if (!o->load) {
		r = rt_bpf__attach(s);
		o->attach = r < 0 ? r : r ? -EINVAL : 0;
	}
	rt_bpf__destroy(s);
}

static void probe_enforce(const struct bpfmon *tmp, struct bpfmon_probe_obj *o)
{
	struct enforce_bpf *e = enforce_bpf__open();
	int r;

	if (!e) {
		o->load = -errno;
		return;
	}
	e->rodata->cgroup_mode = tmp->opts.cgroup == CGROUP_V1 ? PINNING_CGROUP_V1
							       : PINNING_CGROUP_V2;
	/* Its own, empty maps: no CPU is exclusive, nothing is refused. */
	r = bpf_map__set_max_entries(e->maps.owners, (__u32)tmp->ncpu);
	if (!r)
		r = enforce_bpf__load(e);
	o->load = r < 0 ? r : r ? -EINVAL : 0;
	if (!o->load) {
		r = enforce_bpf__attach(e);
		o->attach = r < 0 ? r : r ? -EINVAL : 0;
	}
	enforce_bpf__destroy(e);
}

static void probe_baseline(const struct bpfmon *tmp, struct bpfmon_probe_obj *o)
{
	struct baseline_bpf *b = baseline_bpf__open();
	int r;

	if (!b) {
		o->load = -errno;
		return;
	}
	r = baseline_bpf__load(b);
	o->load = r < 0 ? r : r ? -EINVAL : 0;
	if (!o->load) {
		r = baseline_bpf__attach(b);
		o->attach = r < 0 ? r : r ? -EINVAL : 0;
	}
	baseline_bpf__destroy(b);
}

int bpfmon_probe_new(enum cgroup_hier cgroup, struct bpfmon_probe **ret)
{
	static const struct {
		const char *name;
		void (*run)(const struct bpfmon *tmp, struct bpfmon_probe_obj *o);
	} objs[BPFMON_OBJ_MAX] = {
		[BPFMON_OBJ_PINNING] = { "pinning", probe_pinning },
		[BPFMON_OBJ_ENFORCE] = { "enforce", probe_enforce },
		[BPFMON_OBJ_BASELINE] = { "baseline", probe_baseline },
		[BPFMON_OBJ_RUNQUEUE] = { "runqueue", probe_runqueue },
		[BPFMON_OBJ_RT] = { "rt", probe_rt },
	};
	_cleanup_(bpfmon_probe_freep) struct bpfmon_probe *p = NULL;
	_cleanup_free_ struct bpfmon *tmp = NULL;
	libbpf_print_fn_t old;

	if (cgroup >= CGROUP_HIER_MAX)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	tmp = calloc(1, sizeof(*tmp)); /* what bpfmon_pinning_prepare() reads, nothing else */
	if (!p || !tmp)
		return -ENOMEM;
	p->cgroup = cgroup;
	p->features = bpfmon_probe_features(0);
	tmp->opts.cgroup = cgroup;
	tmp->features = p->features;
	tmp->ncpu = libbpf_num_possible_cpus();
	if (tmp->ncpu <= 0)
		tmp->ncpu = 1;

	old = libbpf_set_print(probe_print);
	for (int i = 0; i < BPFMON_OBJ_MAX; i++) {
		struct bpfmon_probe_obj *o = &p->obj[i];
		struct capture c = { BUF_INIT(PROBE_LOG_MAX + sizeof(PROBE_TRUNCATED)), false };

		o->name = objs[i].name;
		o->attach = 1;
		probe_capture = &c;
		objs[i].run(tmp, o);
		probe_capture = NULL;
		if (c.truncated)
			(void)buf_add_str(&c.b, PROBE_TRUNCATED);
		o->log = buf_take(&c.b, NULL);
		if (!o->log) {
			(void)libbpf_set_print(old);
			return -ENOMEM;
		}
	}
	(void)libbpf_set_print(old);
	*ret = TAKE_PTR(p);
	return 0;
}

struct bpfmon_probe *bpfmon_probe_free(struct bpfmon_probe *p)
{
	if (!p)
		return NULL;
	for (int i = 0; i < BPFMON_OBJ_MAX; i++)
		free(p->obj[i].log);
	free(p);
	return NULL;
}
