/* The checks of bpf-verify: watching exclusive CPUs, probing the kernel's
 * BPF support, watching real-time CPUs. See verify.h; the flags and the
 * output are user/cmd/bpf_verify.c's.
 *
 * The check attaches the daemon's BPF object through its own bpfmon (own
 * maps: it works beside a running daemon and without one), marks each
 * exclusive CPU's owner, watches for the duration, then scans every task's
 * allowed CPUs; owners, report and scan decide. The probe loads every BPF
 * object of the project and says which kernel features exist. The real-time
 * window watches the real-time CPUs with the real-time monitor (rtmon, its
 * own maps) and judges each deadline task against its budget (rtreport).
 */
#include "pinning/verify.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#define LOG_MOD "verify"
#include "host/cgroup.h"
#include "lib/caps.h"
#include "lib/cleanup.h"
#include "lib/clock.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "pinning.h"
#include "pinning/bpfmon.h"
#include "pinning/owners.h"
#include "pinning/report.h"
#include "pinning/rtmon.h"
#include "pinning/rtreport.h"
#include "pinning/scan.h"

/* Every violation becomes an event while we watch (the daemon rate-limits
 * to protect its log; a CLI counts): 1M/s per CPU, bursts of 100k. A ring
 * buffer that still overflows is reported as "names incomplete". */
#define EVENT_RATE 1000000
#define EVENT_BURST 100000
#define SETTLE_US 10000 /* after the window: events still in flight */

#define CAP_SYS_ADMIN 21
#define CAP_PERFMON 38
#define CAP_BPF 39

#define OOM(eb) errbuf_fail((eb), -ENOMEM, "out of memory")

/* ---- privileges ----------------------------------------------------------------------- */

/* Why BPF programs do not load, in words an SRE can act on; NULL when
 * neither BTF nor privileges explain it. */
static const char *load_hint(unsigned features)
{
	uint64_t caps = 0;

	if (!(features & BPFMON_FEAT_BTF))
		return "the kernel has no BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)";
	if (caps_effective(&caps) == 0 && !(caps & (1ull << CAP_SYS_ADMIN)) &&
	    (!(caps & (1ull << CAP_BPF)) || !(caps & (1ull << CAP_PERFMON))))
		return "needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN): run as root";
	return NULL;
}

static int load_failure(const struct bpfmon *m, struct errbuf *eb)
{
	const char *hint = load_hint(bpfmon_features(m));

	if (hint)
		return errbuf_fail(eb, -EPERM, "the BPF check did not load: %s", hint);
	/* the verifier's say is long: --probe prints it */
	return errbuf_fail(eb, -ENOEXEC,
			   "the BPF check did not load: %s (bpf-verify --probe prints the verifier "
			   "log)",
			   bpfmon_error(m));
}

/* ---- check ---------------------------------------------------------------------------- */

struct watch {
	struct verify_report *r;
	struct event_base *base;
	int err; /* first -ENOMEM from the tap */
	bool interrupted;
};

static void on_tap(const struct pinning_event *e, const char *cgroup, void *userdata)
{
	struct watch *w = userdata;
	int r = verify_report_add_event(w->r, e, cgroup);

	if (r < 0 && !w->err)
		w->err = r;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct watch *w = arg;

	w->interrupted = true;
	(void)event_base_loopbreak(w->base);
}

/* Owners from the flags or the state directory; source names which. */
static int load_owners(const struct verify_check_opts *a, struct verify_owners *o, char *source,
		       size_t source_size, struct errbuf *eb)
{
	struct errbuf why = { "" };
	int r;

	if (a->nexclusive) {
		for (int i = 0; i < a->nexclusive; i++) {
			r = verify_owners_add_flag(o, a->exclusive[i], &why);
			if (r == -ENOMEM)
				return OOM(eb);
			if (r < 0)
				return errbuf_fail(eb, r, "%s", why.s);
		}
		(void)snprintf(source, source_size, "--exclusive");
	} else {
		_cleanup_free_ char *buf = NULL;
		struct errbuf rb = { "" };
		size_t len = 0;

		(void)snprintf(source, source_size, "%s/owners.json", a->state_dir);
		r = fileio_read(source, VERIFY_STATE_MAX, &buf, &len, &rb);
		if (r == -ENOENT)
			return errbuf_fail(eb, r,
					   "no %s: is dra-cpu-driver running with --state-dir %s, "
					   "and has it bound a claim yet? (or name owners with "
					   "--exclusive CPUS=CGROUP)",
					   source, a->state_dir);
		if (r < 0) /* rb names the path and, for a FIFO or a link, what it is */
			return errbuf_fail(eb, r, "cannot read %s", errbuf_text(&rb, r));
		r = verify_owners_add_json(o, buf, len, &why);
		if (r == -ENOMEM)
			return OOM(eb);
		if (r < 0)
			return errbuf_fail(eb, r, "%s: %s", source, why.s);
	}
	if (a->scope) {
		r = verify_owners_set_scope(o, a->scope, &why);
		if (r == -ENOMEM)
			return OOM(eb);
		if (r < 0)
			return errbuf_fail(eb, r, "%s", why.s);
	}
	return 0;
}

static int resolve_owners(struct verify_owners *o, struct errbuf *eb)
{
	_cleanup_free_ char *possible = NULL;
	struct errbuf why = { "" }, cwhy = { "" };
	struct cgroup_mounts mounts;
	struct cpuset cpus;
	size_t plen = 0;
	int r;

	r = cgroup_mounts_read(&mounts);
	if (r < 0)
		return errbuf_fail(eb, r, "cannot read /proc/self/mountinfo: %s", strerror(-r));
	r = verify_owners_resolve(o, &mounts, &why);
	cgroup_mounts_done(&mounts);
	if (r == -ENOMEM)
		return OOM(eb);
	if (r < 0)
		return errbuf_fail(eb, r, "%s", why.s);
	r = fileio_read("/sys/devices/system/cpu/possible", 4096, &possible, &plen, NULL);
	if (r >= 0)
		r = cpuset_parse_n(possible, plen, &cpus, &cwhy);
	else
		errbuf_set(&cwhy, "%s", strerror(-r));
	if (r < 0)
		return errbuf_fail(eb, r, "cannot read the possible CPUs (/sys/devices/system/cpu/"
					  "possible): %s",
				   cwhy.s);
	r = verify_owners_check_cpus(o, &cpus, &why);
	if (r < 0)
		return errbuf_fail(eb, r, "%s", why.s);
	return 0;
}

/* Off the exclusive CPUs: the observer must not be the intruder. */
static void step_aside(struct verify_report *rep, const struct cpuset *exclusive)
{
	cpu_set_t set;
	int moved = 0, left = 0;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		if (cpuset_has(exclusive, cpu)) {
			CPU_CLR(cpu, &set);
			moved++;
		} else {
			left++;
		}
	}
	if (!moved)
		return;
	if (!left || sched_setaffinity(0, sizeof(set), &set) < 0)
		verify_report_note(rep, "bpf-verify could not keep itself off the exclusive CPUs: "
					"it may be counted as a foreign task");
}

/* What watch() reads when the window opens, one of each per exclusive CPU. */
struct window_start {
	struct bpfmon_counters *counters;
	struct bpfmon_irq *irq;
	bool *irq_ok; /* irq read when the window opened */
};

/* The window's timer and the signals that end it early. */
struct window_events {
	struct event *timer, *sigint, *sigterm;
};

static void window_events_done(struct window_events *we)
{
	if (we->timer)
		event_free(we->timer);
	if (we->sigint)
		event_free(we->sigint);
	if (we->sigterm)
		event_free(we->sigterm);
}

/* The check is loaded; marks every exclusive CPU's owner in its maps and
 * taps its events. 0, or -errno with eb. */
static int watch_attach(struct bpfmon *m, const struct verify_owners *o,
			struct verify_report *rep, struct watch *w, struct errbuf *eb)
{
	int r;

	if (!bpfmon_is_loaded(m))
		return load_failure(m, eb);
	rep->events = bpfmon_features(m) & BPFMON_FEAT_RINGBUF;
	if (!rep->events)
		verify_report_note(rep, "no task names: the kernel lacks BPF ring buffers (< 5.8), "
					"counts only");
	bpfmon_set_tap_fn(m, on_tap, w);
	for (int i = 0; i < rep->ncpus; i++) {
		const struct verify_cpu *c = &rep->cpus[i];

		r = bpfmon_set_owner(m, c->cpu, o->v[c->owner].cgroup_id);
		if (r < 0)
			return errbuf_fail(eb, r, "cannot mark CPU %d: %s", c->cpu, strerror(-r));
	}
	return 0;
}

/* The counters as the window opens. 0, or -errno with eb. */
static int window_open(struct bpfmon *m, struct verify_report *rep, struct window_start *ws,
		       struct errbuf *eb)
{
	int r;

	for (int i = 0; i < rep->ncpus; i++) {
		r = bpfmon_read_counters(m, rep->cpus[i].cpu, &ws->counters[i]);
		if (r < 0)
			return errbuf_fail(eb, r, "cannot read the BPF counters: %s", strerror(-r));
		/* -ENODEV: no irq programs on this kernel; the line is left out */
		ws->irq_ok[i] = bpfmon_read_irq(m, rep->cpus[i].cpu, &ws->irq[i]) == 0;
	}
	return 0;
}

/* Ends the window after duration seconds, or at SIGINT/SIGTERM. The events
 * go into we, also when this fails (the caller frees them). */
static int window_arm(struct event_base *base, struct watch *w, double duration,
		      struct window_events *we, struct errbuf *eb)
{
	struct timeval tv;

	we->timer = evtimer_new(base, on_signal, w);
	we->sigint = evsignal_new(base, SIGINT, on_signal, w);
	we->sigterm = evsignal_new(base, SIGTERM, on_signal, w);
	if (!we->timer || !we->sigint || !we->sigterm || evsignal_add(we->sigint, NULL) < 0 ||
	    evsignal_add(we->sigterm, NULL) < 0)
		return OOM(eb);
	tv.tv_sec = (time_t)duration;
	tv.tv_usec = (suseconds_t)((duration - (double)tv.tv_sec) * 1e6);
	if (evtimer_add(we->timer, &tv) < 0)
		return errbuf_fail(eb, -EIO, "cannot arm the timer");
	return 0;
}

/* The counters as the window closes, minus those it opened with, into the
 * report. 0, or -errno with eb. */
static int window_close(struct bpfmon *m, struct verify_report *rep,
			const struct window_start *ws, struct errbuf *eb)
{
	struct bpfmon_irq irq_after;
	int r;

	for (int i = 0; i < rep->ncpus; i++) {
		struct bpfmon_counters after;

		r = bpfmon_read_counters(m, rep->cpus[i].cpu, &after);
		if (r < 0)
			return errbuf_fail(eb, r, "cannot read the BPF counters: %s", strerror(-r));
		verify_report_set_counters(rep, rep->cpus[i].cpu, &ws->counters[i], &after);
		if (ws->irq_ok[i] && bpfmon_read_irq(m, rep->cpus[i].cpu, &irq_after) == 0)
			verify_report_set_irq(rep, rep->cpus[i].cpu, &ws->irq[i], &irq_after);
	}
	return 0;
}

/* Watches the exclusive CPUs for duration seconds. 0, or -errno with eb. */
static int watch(double duration, const struct verify_owners *o, struct verify_report *rep,
		 struct errbuf *eb)
{
	struct bpfmon_opts bo = {
		.cgroup = o->mode,
		.enforcement = BPFMON_AUDIT, /* never remediate from here */
		.event_rate = EVENT_RATE,
		.event_burst = EVENT_BURST,
		.log_interval_s = 3600,
		.cgroup_mount = o->mount,
	};
	struct window_start ws = { 0 };
	struct window_events we = { 0 };
	struct event_base *base = NULL;
	struct bpfmon *m = NULL;
	struct watch w = { .r = rep };
	struct timeval tv;
	uint64_t t0;
	int r = 0;

	ws.counters = calloc((size_t)rep->ncpus, sizeof(*ws.counters));
	ws.irq = calloc((size_t)rep->ncpus, sizeof(*ws.irq));
	ws.irq_ok = calloc((size_t)rep->ncpus, sizeof(*ws.irq_ok));
	base = event_base_new();
	if (!ws.counters || !ws.irq || !ws.irq_ok || !base) {
		r = OOM(eb);
		goto out;
	}
	w.base = base;
	r = bpfmon_new(base, &bo, &m);
	if (r < 0) {
		r = errbuf_fail(eb, r, "BPF: %s", strerror(-r));
		goto out;
	}
	r = watch_attach(m, o, rep, &w, eb);
	if (r < 0)
		goto out;
	/* The window opens just before the first counter read and closes just
	 * before the last: the events inside it are the switch-ins counted,
	 * give or take one racing the read (the BPF side counts, then stamps). */
	t0 = clock_now_ns();
	rep->t0_ns = t0;
	r = window_open(m, rep, &ws, eb);
	if (r < 0)
		goto out;
	r = window_arm(base, &w, duration, &we, eb);
	if (r < 0)
		goto out;
	log_info("window_started", "cpus=%d duration_s=%.3f", rep->ncpus, duration);
	(void)event_base_dispatch(base);
	/* The timer fired via on_signal too: only a real signal interrupts. */
	if (w.interrupted && evtimer_pending(we.timer, NULL))
		verify_report_note(rep, "interrupted: watched %.2f s of %.2f s",
				   (double)(clock_now_ns() - t0) / 1e9, duration);
	rep->t1_ns = clock_now_ns();
	rep->duration_s = (double)(rep->t1_ns - t0) / 1e9;
	r = window_close(m, rep, &ws, eb);
	if (r < 0)
		goto out;
	/* Events of the window may still sit in the ring buffer or be on
	 * their way: let the loop run a little longer. */
	tv = (struct timeval){ 0, SETTLE_US };
	(void)event_base_loopexit(base, &tv);
	(void)event_base_dispatch(base);
	(void)bpfmon_drain(m);
	log_info("window_closed", "duration_s=%.3f", rep->duration_s);
	if (w.err) {
		r = OOM(eb);
		goto out;
	}
	rep->watched = true;
	r = 0;
out:
	window_events_done(&we);
	bpfmon_free(m); /* before the base its ring-buffer event lives on */
	if (base)
		event_base_free(base);
	free(ws.counters);
	free(ws.irq);
	free(ws.irq_ok);
	return r;
}

struct verify_check *verify_check_free(struct verify_check *c)
{
	if (!c)
		return NULL;
	verify_report_free(c->report); /* borrows the owners */
	verify_owners_free(c->owners);
	free(c);
	return NULL;
}

int verify_check_run(const struct verify_check_opts *o, struct verify_check **ret,
		     struct errbuf *eb)
{
	_cleanup_(verify_check_freep) struct verify_check *c = calloc(1, sizeof(*c));
	struct verify_report *rep;
	int r;

	if (!c || verify_owners_new(&c->owners) < 0)
		return OOM(eb);
	r = load_owners(o, c->owners, c->source, sizeof(c->source), eb);
	if (r < 0)
		return r;
	r = resolve_owners(c->owners, eb);
	if (r < 0)
		return r;
	if (verify_report_new(c->owners, o->strict_kthreads, &c->report) < 0)
		return OOM(eb);
	rep = c->report;
	rep->source = c->source;
	if (rep->ncpus) {
		step_aside(rep, &c->owners->exclusive);
		r = watch(o->duration, c->owners, rep, eb);
		if (r < 0)
			return r;
		r = verify_report_scan(rep, "/proc");
		if (r == -ENOMEM)
			return OOM(eb);
		if (r < 0)
			return errbuf_fail(eb, r, "cannot list /proc: %s", strerror(-r));
		if (rep->unreadable)
			verify_report_note(rep, "%d threads could not be read", rep->unreadable);
	}
	*ret = TAKE_PTR(c);
	return 0;
}

/* ---- probe ---------------------------------------------------------------------------- */

static const struct feature {
	unsigned bit;
	const char *name, *json, *what;
} features[] = {
	{ BPFMON_FEAT_BTF, "btf", "btf", "vmlinux BTF (CONFIG_DEBUG_INFO_BTF)" },
	{ BPFMON_FEAT_TP_BTF, "tp_btf", "tpBtf",
	  "BTF tracepoints we may load (5.5, CAP_BPF); else raw_tp twins of the same programs" },
	{ BPFMON_FEAT_RINGBUF, "ringbuf", "ringBuffer",
	  "BPF ring buffer (5.8): violation events name the offender" },
	{ BPFMON_FEAT_TASK_STORAGE, "task_storage", "taskStorage",
	  "task storage from tracing programs (5.13; the map type alone is 5.11): deny mode" },
	{ BPFMON_FEAT_BPF_LSM, "bpf_lsm", "bpfLsm",
	  "\"bpf\" among the active LSMs (lsm=): deny mode" },
};

/* 1 present, 0 absent, -1 unknown (BPF LSM without securityfs). */
static int feature_state(const struct bpfmon_probe *p, const struct feature *f)
{
	if (f->bit == BPFMON_FEAT_BPF_LSM && access("/sys/kernel/security/lsm", R_OK) < 0)
		return -1;
	return !!(p->features & f->bit);
}

static const char *obj_state(const struct bpfmon_probe_obj *o, char *buf, size_t size)
{
	if (o->load < 0)
		(void)snprintf(buf, size, "FAILED to load: %s", strerror(-o->load));
	else if (o->attach < 0)
		(void)snprintf(buf, size, "loaded, FAILED to attach: %s", strerror(-o->attach));
	else
		(void)snprintf(buf, size, "loaded and attached (then detached)");
	return buf;
}

struct verify_probe *verify_probe_free(struct verify_probe *p)
{
	if (!p)
		return NULL;
	bpfmon_probe_free(p->probe);
	free(p);
	return NULL;
}

int verify_probe_run(struct verify_probe **ret, struct errbuf *eb)
{
	_cleanup_(verify_probe_freep) struct verify_probe *p = calloc(1, sizeof(*p));
	const struct bpfmon_probe_obj *pin;
	struct utsname u;
	int r;

	if (!p)
		return OOM(eb);
	p->mode = cgroup_pinning_hier(); /* as dra-cpu-driver picks it */
	if (uname(&u) < 0)
		(void)snprintf(p->kernel, sizeof(p->kernel), "?");
	else
		(void)snprintf(p->kernel, sizeof(p->kernel), "%s", u.release);
	r = bpfmon_probe_new(p->mode, &p->probe);
	if (r < 0)
		return errbuf_fail(eb, r, "probe: %s", strerror(-r));
	pin = &p->probe->obj[BPFMON_OBJ_PINNING];
	p->ok = pin->load == 0 && pin->attach == 0;
	*ret = TAKE_PTR(p);
	return 0;
}

int verify_probe_json(const struct verify_probe *vp, struct json_object **ret)
{
	const struct bpfmon_probe *p = vp->probe;
	struct json_object *o = json_object_new_object(), *f = json_object_new_object();
	struct json_object *objs = json_object_new_array();
	char buf[128];

	if (!o || !f || !objs) {
		json_object_put(o);
		json_object_put(f);
		json_object_put(objs);
		return -ENOMEM;
	}
	json_object_object_add(o, "verdict", json_object_new_string(vp->ok ? "ok" : "error"));
	json_object_object_add(o, "exitCode",
			       json_object_new_int(vp->ok ? VERIFY_EXIT_CLEAN : VERIFY_EXIT_CANNOT));
	json_object_object_add(o, "kernel", json_object_new_string(vp->kernel));
	json_object_object_add(o, "cgroupMode", json_object_new_string(cgroup_hier_name(vp->mode)));
	for (size_t i = 0; i < ARRAY_SIZE(features); i++) {
		int s = feature_state(p, &features[i]);

		json_object_object_add(f, features[i].json, s < 0 ? NULL : json_object_new_boolean(s));
	}
	json_object_object_add(o, "features", f);
	for (int i = 0; i < BPFMON_OBJ_MAX; i++) {
		const struct bpfmon_probe_obj *ob = &p->obj[i];
		struct json_object *x = json_object_new_object();

		json_object_object_add(x, "name", json_object_new_string(ob->name));
		json_object_object_add(x, "loaded", json_object_new_boolean(ob->load == 0));
		json_object_object_add(x, "attached",
				       json_object_new_boolean(ob->load == 0 && ob->attach == 0));
		if (ob->load < 0 || ob->attach < 0)
			json_object_object_add(x, "error", json_object_new_string(
								   obj_state(ob, buf, sizeof(buf))));
		json_object_object_add(x, "log", json_object_new_string(ob->log));
		json_object_array_add(objs, x);
	}
	json_object_object_add(o, "objects", objs);
	*ret = o;
	return 0;
}

void verify_probe_print(const struct verify_probe *vp, FILE *out)
{
	const struct bpfmon_probe *p = vp->probe;
	char buf[128];

	fprintf(out,
		"bpf-verify --probe: kernel %s, cgroup mode %s (as dra-cpu-driver picks it)\n\n"
		"features:\n",
		vp->kernel, cgroup_hier_name(vp->mode));
	for (size_t i = 0; i < ARRAY_SIZE(features); i++) {
		int s = feature_state(p, &features[i]);

		fprintf(out, "  %-14s %-8s %s\n", features[i].name,
			s < 0 ? "unknown" : s ? "yes" : "no", features[i].what);
	}
	fprintf(out, "\nobjects:\n");
	for (int i = 0; i < BPFMON_OBJ_MAX; i++) {
		const struct bpfmon_probe_obj *ob = &p->obj[i];

		fprintf(out, "  %-10s %s\n", ob->name, obj_state(ob, buf, sizeof(buf)));
		/* The verifier log (and libbpf's reasons) only where it failed. */
		if ((ob->load < 0 || ob->attach < 0) && ob->log[0]) {
			const char *s = ob->log;

			while (*s) {
				int n = (int)strcspn(s, "\n");

				fprintf(out, "    | %.*s\n", n, s);
				s += n;
				if (*s)
					s++;
			}
		}
	}
	fprintf(out, "\nverdict: %s\n",
		vp->ok ? (p->obj[BPFMON_OBJ_ENFORCE].load == 0 &&
				  p->obj[BPFMON_OBJ_ENFORCE].attach == 0
			  ? "ok: the pinning check and deny mode load here"
			  : "ok: the pinning check loads here; deny mode does not (the driver "
			    "falls back to remediate)")
		       : "the pinning check does not load here: bpf-verify and the driver's checks "
			 "cannot run");
}

const char *verify_probe_why(const struct verify_probe *vp)
{
	const struct bpfmon_probe_obj *pin = &vp->probe->obj[BPFMON_OBJ_PINNING];
	const char *hint = load_hint(vp->probe->features);

	return hint ? hint : strerror(pin->load < 0 ? -pin->load : -pin->attach);
}

/* ---- realtime ------------------------------------------------------------------------- */

/* The real-time CPUs and their owners: the driver's rt-owners.json, or
 * the CPUs alone. */
static int rt_load_owners(const struct verify_realtime_opts *a, struct rt_owners *o,
			  struct errbuf *eb)
{
	struct errbuf why = { "" };
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX];
	size_t len = 0;
	int r;

	if (a->rt_cpus) {
		*o = (struct rt_owners){ 0 };
		r = cpuset_parse(a->rt_cpus, &o->cpus, &why);
		if (r < 0)
			return errbuf_fail(eb, r, "--rt-cpus: %s", why.s);
		return 0;
	}
	(void)snprintf(path, sizeof(path), "%s/%s", a->state_dir, RTREPORT_OWNERS_FILE);
	r = fileio_read(path, 16 << 20, &buf, &len, NULL);
	if (r == -ENOENT)
		return errbuf_fail(eb, r,
				   "no %s: is dra-cpu-driver running with --rt-cpus and --state-dir "
				   "%s? (or name the CPUs with --rt-cpus)",
				   path, a->state_dir);
	if (r < 0)
		return errbuf_fail(eb, r, "cannot read %s: %s", path, strerror(-r));
	r = rt_owners_parse(buf, len, o, &why);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", path, why.s);
	return 0;
}

struct verify_realtime *verify_realtime_free(struct verify_realtime *v)
{
	if (!v)
		return NULL;
	rtreport_done(&v->report); /* borrows the owners */
	rt_owners_done(&v->owners);
	free(v);
	return NULL;
}

int verify_realtime_run(const struct verify_realtime_opts *a, struct verify_realtime **ret,
			struct errbuf *eb)
{
	_cleanup_(verify_realtime_freep) struct verify_realtime *v = calloc(1, sizeof(*v));
	_cleanup_(rtmon_freep) struct rtmon *m = NULL;
	struct rtmon_opts mo = { 0 };
	struct rtmon_task *tasks = NULL;
	struct rtreport_cpu *cpus = NULL;
	struct cgroup_mounts mounts = { 0 };
	bool have_mounts = false;
	enum cgroup_hier hier = CGROUP_V2;
	struct timespec ts;
	int n_tasks = 0, n_cpus = 0, r;

	if (!v)
		return OOM(eb);
	r = rt_load_owners(a, &v->owners, eb);
	if (r < 0)
		return r;
	if (cpuset_is_empty(&v->owners.cpus))
		return errbuf_fail(eb, -ENOENT, "no real-time CPU in use (%s)",
				   a->rt_cpus ? "--rt-cpus is empty" : "no real-time claim bound");
	if (cgroup_mounts_read(&mounts) == 0) {
		(void)cgroup_mounts_pinning(&mounts, &hier);
		have_mounts = true;
	}
	mo.cgroup_v1 = hier == CGROUP_V1;
	r = rtmon_new(&mo, &m, eb);
	if (r < 0)
		goto out;
	cpus = calloc((size_t)cpuset_count(&v->owners.cpus), sizeof(*cpus));
	if (!cpus) {
		r = OOM(eb);
		goto out;
	}
	CPUSET_FOREACH(cpu, &v->owners.cpus)
	{
		r = rtmon_watch(m, cpu, true);
		if (r < 0) {
			r = errbuf_fail(eb, r, "cannot watch CPU %d: %s", cpu, strerror(-r));
			goto out;
		}
	}
	for (int i = 0; i < v->owners.n; i++)
		(void)rtmon_own(m, v->owners.v[i].cgroup_id, v->owners.v[i].cpu, true);
	log_info("rt_window_started", "cpus=%d owners=%d duration_s=%.3f",
		 cpuset_count(&v->owners.cpus), v->owners.n, a->duration);
	ts.tv_sec = (time_t)a->duration;
	ts.tv_nsec = (long)((a->duration - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	r = rtmon_tasks(m, &tasks, &n_tasks);
	if (r < 0) {
		r = errbuf_fail(eb, r, "cannot read the monitor: %s", strerror(-r));
		goto out;
	}
	CPUSET_FOREACH(cpu, &v->owners.cpus)
	{
		cpus[n_cpus].cpu = cpu;
		if (rtmon_cpu(m, cpu, &cpus[n_cpus].c) == 0)
			n_cpus++;
	}
	if (rtreport_build(&v->owners, tasks, n_tasks, cpus, n_cpus, a->duration, &v->report) < 0 ||
	    rtreport_scan_pinned(&v->report, &v->owners, "/proc", hier,
				 have_mounts ? &mounts.h[hier] : NULL) == -ENOMEM) {
		r = OOM(eb);
		goto out;
	}
	*ret = TAKE_PTR(v);
	r = 0;
out:
	free(tasks);
	free(cpus);
	if (have_mounts)
		cgroup_mounts_done(&mounts);
	return r;
}
