/* bpfmon_load: choosing and loading the BPF programs of a new bpfmon. The
 * pinning object always (tp_btf programs, or their raw_tp twins on kernels
 * without tp_btf; the run-queue pair only with contention, dropped when it is
 * what fails), the enforce object in deny mode on top of it (sharing its
 * owners, cpu_stats and events maps). What does not load degrades with a note
 * or leaves the reason in m->error (bpfmon.h); nothing here fails bpfmon_new().
 * Apart from bpfmon.c because it runs once, at start, while the rest of the
 * module runs on the loop.
 */
#include "pinning/bpfmon.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/caps.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "pinning/bpfmon_priv.h"

#include "enforce.skel.h"
#include "pinning.skel.h"

/* ---- loading ------------------------------------------------------------------------- */

/* strerror() of a load or attach failure. 524 is the kernel's own ENOTSUPP,
 * which bpf() passes out as it is and libc has no text for: an LSM or fentry
 * program needs a BPF trampoline on its hook, and some kernels cannot make
 * one (arm64 before 6.4, without ftrace direct calls). */
static const char *load_strerror(int r)
{
	if (r == -524)
		return "the kernel cannot attach it (ENOTSUPP: no BPF trampoline on this "
		       "architecture and kernel, e.g. arm64 before 6.4)";
	return strerror(-r);
}

/* Every program of pinning.bpf.c comes as a pair: tp_btf, and a raw_tp twin
 * for kernels without tp_btf (< 5.5; libbpf-tools choose the same way).
 * Exactly one of each pair loads; the run-queue pair only with contention. */
static void select_programs(struct pinning_bpf *s, bool raw, bool contention)
{
	(void)bpf_program__set_autoload(s->progs.handle_sched_switch, !raw);
	(void)bpf_program__set_autoload(s->progs.handle_sched_switch_raw, raw);
	(void)bpf_program__set_autoload(s->progs.handle_sched_switch_runq, contention && !raw);
	(void)bpf_program__set_autoload(s->progs.handle_sched_switch_runq_raw, contention && raw);
	/* Interrupt time: tp_btf only (the raw_tp arguments of these hooks
	 * differ across kernels more than it is worth here). */
	(void)bpf_program__set_autoload(s->progs.handle_irq_entry, !raw);
	(void)bpf_program__set_autoload(s->progs.handle_irq_exit, !raw);
	(void)bpf_program__set_autoload(s->progs.handle_softirq_entry, !raw);
	(void)bpf_program__set_autoload(s->progs.handle_softirq_exit, !raw);
}

/* Knobs and map sizes of a freshly opened pinning object. */
int bpfmon_pinning_prepare(const struct bpfmon *m, struct pinning_bpf *s, bool contention)
{
	unsigned rate = m->opts.event_rate ? m->opts.event_rate : 100;
	int r;

	s->rodata->cgroup_mode = m->opts.cgroup == CGROUP_V1 ? PINNING_CGROUP_V1
							     : PINNING_CGROUP_V2;
	s->rodata->event_interval_ns = 1000000000ull / rate ? 1000000000ull / rate : 1;
	s->rodata->event_burst = m->opts.event_burst ? m->opts.event_burst : 16;
	s->rodata->events_enabled = !!(m->features & BPFMON_FEAT_RINGBUF);
	r = bpf_map__set_max_entries(s->maps.owners, (__u32)m->ncpu);
	if (!r)
		r = bpf_map__set_max_entries(s->maps.shared_cpus, (__u32)m->ncpu);
	if (!r && !(m->features & BPFMON_FEAT_RINGBUF)) {
		/* A placeholder so the object still loads; every use is pruned. */
		r = bpf_map__set_type(s->maps.events, BPF_MAP_TYPE_ARRAY);
		if (!r)
			r = bpf_map__set_key_size(s->maps.events, sizeof(__u32));
		if (!r)
			r = bpf_map__set_value_size(s->maps.events, sizeof(__u32));
		if (!r)
			r = bpf_map__set_max_entries(s->maps.events, 1);
	}
	if (!r)
		select_programs(s, !(m->features & BPFMON_FEAT_TP_BTF), contention);
	return r;
}

static int pinning_load(struct bpfmon *m, bool contention, struct pinning_bpf **ret)
{
	struct pinning_bpf *s = pinning_bpf__open();
	int r;

	if (!s)
		return -errno;
	r = bpfmon_pinning_prepare(m, s, contention);
	if (!r)
		r = pinning_bpf__load(s);
	if (!r)
		r = pinning_bpf__attach(s);
	if (r) {
		pinning_bpf__destroy(s);
		return r < 0 ? r : -EINVAL;
	}
	*ret = s;
	return 0;
}

static int enforce_load(struct bpfmon *m, struct enforce_bpf **ret)
{
	struct enforce_bpf *e = enforce_bpf__open();
	int r;

	if (!e)
		return -errno;
	e->rodata->cgroup_mode = m->skel->rodata->cgroup_mode;
	r = bpf_map__set_max_entries(e->maps.owners, (__u32)m->ncpu);
	if (!r)
		r = bpf_map__reuse_fd(e->maps.owners, bpf_map__fd(m->skel->maps.owners));
	if (!r)
		r = bpf_map__reuse_fd(e->maps.cpu_stats, bpf_map__fd(m->skel->maps.cpu_stats));
	if (!r)
		r = bpf_map__reuse_fd(e->maps.events, bpf_map__fd(m->skel->maps.events));
	if (!r)
		r = enforce_bpf__load(e);
	if (!r)
		r = enforce_bpf__attach(e);
	if (r) {
		enforce_bpf__destroy(e);
		return r < 0 ? r : -EINVAL;
	}
	*ret = e;
	return 0;
}

/* 1 when this process runs under a seccomp filter (/proc/self/status
 * "Seccomp: 2"), 0 when not, -errno when that cannot be told. */
static int seccomp_filtered(void)
{
	_cleanup_free_ char *st = NULL;
	const char *p;
	int r;

	r = fileio_read("/proc/self/status", 64 * 1024, &st, NULL, NULL);
	if (r < 0)
		return r;
	p = strstr(st, "\nSeccomp:");
	if (!p)
		return -ENOENT;
	p += strlen("\nSeccomp:");
	p += strspn(p, " \t");
	return *p == '2';
}

/* Why bpf() refused to load the pinning program (r < 0), for the error line.
 * EPERM or ENOSYS with CAP_BPF and CAP_PERFMON held, under a seccomp filter,
 * is the container runtime's seccomp profile, not the kernel: the default
 * profiles of podman and CRI-O (containers-common), of Docker before 23.0
 * (moby/moby#43987) and of containerd before 1.7 (containerd/containerd#7301;
 * backported to release/1.6 in #7574, October 2022) allow bpf() and
 * perf_event_open() only with
 * CAP_SYS_ADMIN, answering EPERM or ENOSYS ("Function not implemented")
 * otherwise. docs/deploy.md names the profiles under which BPF loads. */
static void load_error(struct bpfmon *m, int r)
{
	const uint64_t need = UINT64_C(1) << 39 /* BPF */ | UINT64_C(1) << 38 /* PERFMON */;
	uint64_t caps = 0;
	bool held = caps_effective(&caps) == 0 && (caps & need) == need;
	const char *why = "";

	/* The log quotes at most 250 bytes of it: short. */
	if ((r == -EPERM || r == -ENOSYS) && held && seccomp_filtered() == 1)
		why = ": bpf() refused under seccomp with CAP_BPF and CAP_PERFMON held: likely "
		      "the runtime's seccomp profile; use one allowing bpf() to CAP_BPF, or "
		      "Unconfined, not CAP_SYS_ADMIN (docs/deploy.md)";
	else if (r == -EPERM || (r == -ENOSYS && !held))
		why = " (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)";
	else if (r == -ENOSYS)
		why = " (no bpf() system call: kernel without CONFIG_BPF_SYSCALL?)";
	errbuf_set(&m->error, "pinning program did not load: %s%s", strerror(-r), why);
}

void bpfmon_load_all(struct bpfmon *m)
{
	bool contention = m->opts.contention;
	int r;

	/* Both kinds of program are CO-RE: without the kernel's BTF neither
	 * can be relocated. */
	if (!(m->features & BPFMON_FEAT_BTF)) {
		errbuf_set(&m->error, "kernel lacks BTF (CONFIG_DEBUG_INFO_BTF) for tp_btf or "
				      "raw_tp programs");
		return;
	}
	if (!(m->features & BPFMON_FEAT_TP_BTF))
		bpfmon_note(m, "raw_tp programs: kernel lacks tp_btf (< 5.5) or refused the probe");
	r = pinning_load(m, contention, &m->skel);
	if (r < 0 && contention) {
		bpfmon_note(m, "contention off: its programs did not load (%s; -v 1 logs why)",
			    load_strerror(r));
		contention = false;
		r = pinning_load(m, false, &m->skel);
	}
	if (r < 0) {
		load_error(m, r);
		return;
	}
	m->contention = contention;
	if (!(m->features & BPFMON_FEAT_RINGBUF))
		bpfmon_note(m,
			    "no violation events: kernel lacks BPF ring buffers (< 5.8), counters only");

	if (m->opts.enforcement == BPFMON_DENY) {
		if (!(m->features & BPFMON_FEAT_BPF_LSM))
			bpfmon_note(m,
				    "deny -> remediate: bpf is not an active LSM (lsm= boot parameter)");
		else if ((m->features & (BPFMON_FEAT_RINGBUF | BPFMON_FEAT_TASK_STORAGE)) !=
			 (BPFMON_FEAT_RINGBUF | BPFMON_FEAT_TASK_STORAGE))
			bpfmon_note(m,
				    "deny -> remediate: kernel lacks ring buffers or task storage");
		else if ((r = enforce_load(m, &m->enforce)) < 0)
			bpfmon_note(m, "deny -> remediate: BPF LSM program did not load: %s (-v 1 "
				    "logs why)",
				    load_strerror(r));
		else
			m->effective = BPFMON_DENY;
	}
}
