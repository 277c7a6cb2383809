/* bpf-verify: proves, right now, that exclusive CPUs run only their owners.
 * For an SRE on a node, or `kubectl exec` in the driver's pod.
 *
 *   bpf-verify [--duration S] [--state-dir DIR | --exclusive CPUS=CGROUP...] [--json]
 *   bpf-verify --probe [--json]
 *   bpf-verify --realtime [--duration S] [--state-dir DIR | --rt-cpus LIST] [--json]
 *
 * The check attaches the daemon's BPF object through its own bpfmon (own
 * maps: it works beside a running daemon and without one), marks each
 * exclusive CPU's owner, watches for --duration seconds, then scans every
 * task's allowed CPUs; pinning/owners, report, scan and report_{text,json}
 * decide and render. The probe loads
 * every BPF object of the project and says which kernel features exist.
 * --realtime watches the real-time CPUs with the real-time monitor
 * (pinning/rtmon, its own maps) and judges each deadline task against its
 * budget (pinning/rtreport): over budget, past its deadline, or a task no
 * claim owns on a real-time CPU is a violation.
 *
 * Exit status: 0 clean, 1 violations found, 2 could not check (the reason in
 * one line on stderr; with --json also as {"verdict":"error",...} on stdout)
 * or, with --scope, a verdict left open ("incomplete").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "cmd/cfg.h"
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
#include "pinning/report_json.h"
#include "pinning/report_text.h"
#include "pinning/rtmon.h"
#include "pinning/rtreport.h"
#include "pinning/scan.h"

#ifndef DRA_CPU_VERSION
#define DRA_CPU_VERSION "unknown"
#endif

#define PROG "bpf-verify"
#define DEFAULT_STATE_DIR "/var/run/dra-cpu"
#define DEFAULT_DURATION 5.0
#define MAX_DURATION 86400.0
#define EXIT_CLEAN 0
#define EXIT_VIOLATION 1
#define EXIT_CANNOT 2

/* Every violation becomes an event while we watch (the daemon rate-limits
 * to protect its log; a CLI counts): 1M/s per CPU, bursts of 100k. A ring
 * buffer that still overflows is reported as "names incomplete". */
#define EVENT_RATE 1000000
#define EVENT_BURST 100000
#define SETTLE_US 10000 /* after the window: events still in flight */

#define CAP_SYS_ADMIN 21
#define CAP_PERFMON 38
#define CAP_BPF 39

enum opt_id {
	OPT_DURATION = 1,
	OPT_STATE_DIR,
	OPT_EXCLUSIVE,
	OPT_SCOPE,
	OPT_JSON,
	OPT_STRICT_KTHREADS,
	OPT_PROBE,
	OPT_REALTIME,
	OPT_RT_CPUS,
	OPT_VERBOSE,
	OPT_HELP,
	OPT_VERSION,
};

/* The one table of flags: getopt_long's options and --help. */
static const struct cfg_cli_opt opts[] = {
	{ OPT_DURATION, "duration", "SECONDS",
	  "how long to watch the exclusive CPUs, 0.1-86400 (default 5)" },
	{ OPT_STATE_DIR, "state-dir", "DIR",
	  "the driver's state directory: owners come from DIR/owners.json (default "
	  "/var/run/dra-cpu)" },
	{ OPT_EXCLUSIVE, "exclusive", "CPUS=CGROUP",
	  "instead of the driver's state: CPUS (a list such as 4-7) are exclusive to the cgroup "
	  "directory CGROUP (v2 or cpuset v1) and its descendants; repeatable" },
	{ OPT_SCOPE, "scope", "CGROUP",
	  "only tasks under the cgroup directory CGROUP (such as kubepods.slice) can be "
	  "violations; the others are counted apart, like kernel threads (default: every task)" },
	{ OPT_JSON, "json", NULL, "print one JSON object instead of tables" },
	{ OPT_STRICT_KTHREADS, "strict-kthreads", NULL,
	  "kernel threads on exclusive CPUs are violations too (default: listed apart)" },
	{ OPT_PROBE, "probe", NULL,
	  "load every BPF object of the project against this kernel and list its features" },
	{ OPT_REALTIME, "realtime", NULL,
	  "watch the real-time CPUs instead: each deadline task with its budget and the CPU "
	  "time it used per period (p50, p99, max), overruns, deadline misses, and tasks no "
	  "claim owns; owners come from DIR/rt-owners.json" },
	{ OPT_RT_CPUS, "rt-cpus", "LIST",
	  "with --realtime, instead of the driver's state: watch these CPUs; every task on "
	  "them is then unowned" },
	{ OPT_VERBOSE, "verbose", NULL, "log what happens (logfmt on stderr)" },
	{ OPT_HELP, "help", NULL, "print this help" },
	{ OPT_VERSION, "version", NULL, "print the version" },
};

struct args {
	double duration;
	const char *state_dir;
	bool has_state_dir;
	const char **exclusive; /* borrowed from argv */
	int nexclusive;
	const char *scope; /* NULL: every task */
	const char *rt_cpus; /* --realtime --rt-cpus */
	bool json, strict_kthreads, verbose;
	enum opt_id verb; /* OPT_PROBE, OPT_HELP, OPT_VERSION, or 0: check */
};

/* The verbs: the flag that selects one (0: the default) and what it does. */
static int verb_check(const struct args *a);
static int verb_probe(const struct args *a);
static int verb_realtime(const struct args *a);
static int verb_help(const struct args *a);
static int verb_version(const struct args *a);

static const struct verb {
	enum opt_id flag;
	const char *name;
	int (*run)(const struct args *a);
} verbs[] = {
	{ 0, "check", verb_check },
	{ OPT_PROBE, "probe", verb_probe },
	{ OPT_REALTIME, "realtime", verb_realtime },
	{ OPT_HELP, "help", verb_help },
	{ OPT_VERSION, "version", verb_version },
};

/* ---- output helpers ------------------------------------------------------------------- */

static int print_json(struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
							      JSON_C_TO_STRING_NOSLASHESCAPE);

	if (!s)
		return -ENOMEM;
	printf("%s\n", s);
	return 0;
}

static int cannot_check(const struct args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "Could not check": the reason in one line on stderr (and as JSON). */
static int cannot_check(const struct args *a, const char *fmt, ...)
{
	char reason[ERRBUF_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	for (char *p = reason; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(stderr, PROG ": could not check: %s\n", reason);
	if (a && a->json) {
		struct json_object *o = json_object_new_object();

		if (o) {
			json_object_object_add(o, "verdict", json_object_new_string("error"));
			json_object_object_add(o, "exitCode", json_object_new_int(EXIT_CANNOT));
			json_object_object_add(o, "error", json_object_new_string(reason));
			(void)print_json(o);
			json_object_put(o);
		}
	}
	return EXIT_CANNOT;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " [--duration SECONDS] [--state-dir DIR | --exclusive CPUS=CGROUP]...\n"
		"                  [--scope CGROUP] [--json] [--strict-kthreads]\n"
		"       " PROG " --probe [--json]\n"
		"       " PROG " --realtime [--duration SECONDS] [--state-dir DIR | --rt-cpus LIST]\n"
		"                  [--json]\n\n"
		"Proves that exclusive CPUs run only their owners, right now. Watches each\n"
		"exclusive CPU with the driver's BPF check for the duration: any task outside the\n"
		"owner's cgroup (descendants count as the owner) that runs there is a violation.\n"
		"Then reads every task's allowed CPUs: a foreign task allowed only on exclusive\n"
		"CPUs is a violation too; one allowed on them among others is \"unconfined\".\n"
		"Per-CPU kernel threads are listed apart. Needs CAP_BPF and CAP_PERFMON (root).\n\n"
		"Options:\n");
	cfg_cli_print_options(f, opts, ARRAY_SIZE(opts), 27);
	fprintf(f, "\nExit status: 0 clean, 1 violations found, 2 could not check (no CAP_BPF,\n"
		   "no BTF, bad arguments, a cgroup that does not exist, unreadable state; with\n"
		   "--scope also: switch-ins no event could place inside or outside it).\n");
}

/* ---- arguments ------------------------------------------------------------------------ */

static const char *opt_name(enum opt_id id)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].id == (int)id)
			return opts[i].name;
	return "?";
}

static int parse_duration(const char *s, double *ret, char *err, size_t size)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0.1 || v > MAX_DURATION) {
		(void)snprintf(err, size, "--duration: \"%s\" is not a number of seconds in 0.1-86400",
			       s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a, char *err, size_t size)
{
	struct option lopts[ARRAY_SIZE(opts) + 1];
	int c;

	cfg_cli_getopt_table(opts, ARRAY_SIZE(opts), lopts);
	*a = (struct args){ .duration = DEFAULT_DURATION, .state_dir = DEFAULT_STATE_DIR };
	a->exclusive = calloc((size_t)argc + 1, sizeof(*a->exclusive));
	if (!a->exclusive)
		return -ENOMEM;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_DURATION:
			if (parse_duration(optarg, &a->duration, err, size) < 0)
				return -EINVAL;
			break;
		case OPT_STATE_DIR:
			a->state_dir = optarg;
			a->has_state_dir = true;
			break;
		case OPT_EXCLUSIVE:
			a->exclusive[a->nexclusive++] = optarg;
			break;
		case OPT_SCOPE:
			a->scope = optarg;
			break;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_STRICT_KTHREADS:
			a->strict_kthreads = true;
			break;
		case OPT_VERBOSE:
			a->verbose = true;
			break;
		case OPT_RT_CPUS:
			a->rt_cpus = optarg;
			break;
		case OPT_PROBE:
		case OPT_REALTIME:
		case OPT_HELP:
		case OPT_VERSION:
			/* --help wins over anything; otherwise one verb. */
			if (a->verb && a->verb != (enum opt_id)c && c != OPT_HELP &&
			    a->verb != OPT_HELP) {
				(void)snprintf(err, size, "--%s and --%s cannot be combined",
					       opt_name(a->verb), opt_name((enum opt_id)c));
				return -EINVAL;
			}
			if (a->verb != OPT_HELP)
				a->verb = (enum opt_id)c;
			break;
		case ':':
			(void)snprintf(err, size, "%s needs a value", argv[optind - 1]);
			return -EINVAL;
		default:
			(void)snprintf(err, size, "unknown option '%s'", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		(void)snprintf(err, size, "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (a->nexclusive && a->has_state_dir) {
		(void)snprintf(err, size, "--exclusive and --state-dir cannot be combined: owners "
					  "come from one or the other");
		return -EINVAL;
	}
	return 0;
}

/* ---- help, version -------------------------------------------------------------------- */

static int verb_help(const struct args *a)
{
	struct json_object *o, *arr;

	if (!a->json) {
		usage(stdout);
		return 0;
	}
	o = json_object_new_object();
	arr = json_object_new_array();
	if (!o || !arr) {
		json_object_put(o);
		json_object_put(arr);
		return cannot_check(a, "out of memory");
	}
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++) {
		struct json_object *x = json_object_new_object();

		json_object_object_add(x, "name", json_object_new_string(opts[i].name));
		if (opts[i].arg)
			json_object_object_add(x, "arg", json_object_new_string(opts[i].arg));
		json_object_object_add(x, "help", json_object_new_string(opts[i].help));
		json_object_array_add(arr, x);
	}
	json_object_object_add(o, "usage", json_object_new_string(PROG " [options]"));
	json_object_object_add(o, "options", arr);
	(void)print_json(o);
	json_object_put(o);
	return 0;
}

static int verb_version(const struct args *a)
{
	if (a->json)
		printf("{\"name\": \"" PROG "\", \"version\": \"%s\"}\n", DRA_CPU_VERSION);
	else
		printf(PROG " %s\n", DRA_CPU_VERSION);
	return 0;
}

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

static void load_failure(const struct bpfmon *m, char *buf, size_t size)
{
	const char *hint = load_hint(bpfmon_features(m));

	if (hint)
		(void)snprintf(buf, size, "%s", hint);
	else /* the verifier's say is long: --probe prints it */
		(void)snprintf(buf, size, "%s (bpf-verify --probe prints the verifier log)",
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

/* Owners from --exclusive or the state directory; *ret_source names which. */
static int load_owners(const struct args *a, struct verify_owners *o, char *source,
		       size_t source_size)
{
	struct errbuf why = { "" };
	int r;

	if (a->nexclusive) {
		for (int i = 0; i < a->nexclusive; i++) {
			r = verify_owners_add_flag(o, a->exclusive[i], &why);
			if (r == -ENOMEM)
				return cannot_check(a, "out of memory");
			if (r < 0)
				return cannot_check(a, "%s", why.s);
		}
		(void)snprintf(source, source_size, "--exclusive");
	} else {
		_cleanup_free_ char *buf = NULL;
		struct errbuf eb = { "" };
		size_t len = 0;

		(void)snprintf(source, source_size, "%s/owners.json", a->state_dir);
		r = fileio_read(source, VERIFY_STATE_MAX, &buf, &len, &eb);
		if (r == -ENOENT)
			return cannot_check(a,
					    "no %s: is dra-cpu-driver running with --state-dir %s, "
					    "and has it bound a claim yet? (or name owners with "
					    "--exclusive CPUS=CGROUP)",
					    source, a->state_dir);
		if (r < 0) /* eb names the path and, for a FIFO or a link, what it is */
			return cannot_check(a, "cannot read %s", errbuf_text(&eb, r));
		r = verify_owners_add_json(o, buf, len, &why);
		if (r == -ENOMEM)
			return cannot_check(a, "out of memory");
		if (r < 0)
			return cannot_check(a, "%s: %s", source, why.s);
	}
	if (a->scope) {
		r = verify_owners_set_scope(o, a->scope, &why);
		if (r == -ENOMEM)
			return cannot_check(a, "out of memory");
		if (r < 0)
			return cannot_check(a, "%s", why.s);
	}
	return 0;
}

static int resolve_owners(const struct args *a, struct verify_owners *o)
{
	_cleanup_free_ char *possible = NULL;
	struct errbuf why = { "" }, cwhy = { "" };
	struct cgroup_mounts mounts;
	struct cpuset cpus;
	size_t plen = 0;
	int r;

	r = cgroup_mounts_read(&mounts);
	if (r < 0)
		return cannot_check(a, "cannot read /proc/self/mountinfo: %s", strerror(-r));
	r = verify_owners_resolve(o, &mounts, &why);
	cgroup_mounts_done(&mounts);
	if (r == -ENOMEM)
		return cannot_check(a, "out of memory");
	if (r < 0)
		return cannot_check(a, "%s", why.s);
	r = fileio_read("/sys/devices/system/cpu/possible", 4096, &possible, &plen, NULL);
	if (r < 0 || cpuset_parse_n(possible, plen, &cpus, &cwhy) < 0)
		return cannot_check(a, "cannot read the possible CPUs (/sys/devices/system/cpu/"
				       "possible): %s",
				    r < 0 ? strerror(-r) : cwhy.s);
	r = verify_owners_check_cpus(o, &cpus, &why);
	if (r < 0)
		return cannot_check(a, "%s", why.s);
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

/* Watches the exclusive CPUs for a->duration seconds. 0, or the exit code. */
static int watch(const struct args *a, const struct verify_owners *o, struct verify_report *rep)
{
	struct bpfmon_opts bo = {
		.cgroup = o->mode,
		.enforcement = BPFMON_AUDIT, /* never remediate from here */
		.event_rate = EVENT_RATE,
		.event_burst = EVENT_BURST,
		.log_interval_s = 3600,
		.cgroup_mount = o->mount,
	};
	struct bpfmon_counters *before = NULL;
	struct event_base *base = NULL;
	struct event *timer = NULL, *sigint = NULL, *sigterm = NULL;
	struct bpfmon *m = NULL;
	struct watch w = { .r = rep };
	struct timeval tv;
	uint64_t t0;
	int r = 0, ret = 0;

	before = calloc((size_t)rep->ncpus, sizeof(*before));
	base = event_base_new();
	if (!before || !base) {
		ret = cannot_check(a, "out of memory");
		goto out;
	}
	w.base = base;
	r = bpfmon_new(base, &bo, &m);
	if (r < 0) {
		ret = cannot_check(a, "BPF: %s", strerror(-r));
		goto out;
	}
	if (!bpfmon_is_loaded(m)) {
		char why[ERRBUF_MAX];

		load_failure(m, why, sizeof(why));
		ret = cannot_check(a, "the BPF check did not load: %s", why);
		goto out;
	}
	rep->events = bpfmon_features(m) & BPFMON_FEAT_RINGBUF;
	if (!rep->events)
		verify_report_note(rep, "no task names: the kernel lacks BPF ring buffers (< 5.8), "
					"counts only");
	bpfmon_set_tap_fn(m, on_tap, &w);
	for (int i = 0; i < rep->ncpus; i++) {
		const struct verify_cpu *c = &rep->cpus[i];

		r = bpfmon_set_owner(m, c->cpu, o->v[c->owner].cgroup_id);
		if (r < 0) {
			ret = cannot_check(a, "cannot mark CPU %d: %s", c->cpu, strerror(-r));
			goto out;
		}
	}
	/* The window opens just before the first counter read and closes just
	 * before the last: the events inside it are the switch-ins counted,
	 * give or take one racing the read (the BPF side counts, then stamps). */
	t0 = clock_now_ns();
	rep->t0_ns = t0;
	for (int i = 0; i < rep->ncpus; i++) {
		r = bpfmon_read_counters(m, rep->cpus[i].cpu, &before[i]);
		if (r < 0) {
			ret = cannot_check(a, "cannot read the BPF counters: %s", strerror(-r));
			goto out;
		}
	}
	timer = evtimer_new(base, on_signal, &w);
	sigint = evsignal_new(base, SIGINT, on_signal, &w);
	sigterm = evsignal_new(base, SIGTERM, on_signal, &w);
	if (!timer || !sigint || !sigterm || evsignal_add(sigint, NULL) < 0 ||
	    evsignal_add(sigterm, NULL) < 0) {
		ret = cannot_check(a, "out of memory");
		goto out;
	}
	tv.tv_sec = (time_t)a->duration;
	tv.tv_usec = (suseconds_t)((a->duration - (double)tv.tv_sec) * 1e6);
	if (evtimer_add(timer, &tv) < 0) {
		ret = cannot_check(a, "cannot arm the timer");
		goto out;
	}
	log_info("window_started", "cpus=%d duration_s=%.3f", rep->ncpus, a->duration);
	(void)event_base_dispatch(base);
	/* The timer fired via on_signal too: only a real signal interrupts. */
	if (w.interrupted && evtimer_pending(timer, NULL))
		verify_report_note(rep, "interrupted: watched %.2f s of %.2f s",
				   (double)(clock_now_ns() - t0) / 1e9, a->duration);
	rep->t1_ns = clock_now_ns();
	rep->duration_s = (double)(rep->t1_ns - t0) / 1e9;
	for (int i = 0; i < rep->ncpus; i++) {
		struct bpfmon_counters after;

		r = bpfmon_read_counters(m, rep->cpus[i].cpu, &after);
		if (r < 0) {
			ret = cannot_check(a, "cannot read the BPF counters: %s", strerror(-r));
			goto out;
		}
		verify_report_set_counters(rep, rep->cpus[i].cpu, &before[i], &after);
	}
	/* Events of the window may still sit in the ring buffer or be on
	 * their way: let the loop run a little longer. */
	tv = (struct timeval){ 0, SETTLE_US };
	(void)event_base_loopexit(base, &tv);
	(void)event_base_dispatch(base);
	(void)bpfmon_drain(m);
	log_info("window_closed", "duration_s=%.3f", rep->duration_s);
	if (w.err) {
		ret = cannot_check(a, "out of memory");
		goto out;
	}
	rep->watched = true;
out:
	if (timer)
		event_free(timer);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	bpfmon_free(m); /* before the base its ring-buffer event lives on */
	if (base)
		event_base_free(base);
	free(before);
	return ret;
}

static int verb_check(const struct args *a)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = NULL;
	_cleanup_(verify_report_freep) struct verify_report *rep = NULL;
	struct verify_tally t;
	char source[PATH_MAX + 32];
	int r;

	if (verify_owners_new(&o) < 0)
		return cannot_check(a, "out of memory");
	r = load_owners(a, o, source, sizeof(source));
	if (r)
		return r;
	r = resolve_owners(a, o);
	if (r)
		return r;
	if (verify_report_new(o, a->strict_kthreads, &rep) < 0)
		return cannot_check(a, "out of memory");
	rep->source = source;
	if (rep->ncpus) {
		step_aside(rep, &o->exclusive);
		r = watch(a, o, rep);
		if (r)
			return r;
		r = verify_report_scan(rep, "/proc");
		if (r == -ENOMEM)
			return cannot_check(a, "out of memory");
		if (r < 0)
			return cannot_check(a, "cannot list /proc: %s", strerror(-r));
		if (rep->unreadable)
			verify_report_note(rep, "%d threads could not be read", rep->unreadable);
	}
	verify_report_tally(rep, &t);
	if (a->json) {
		struct json_object *j = NULL;

		if (verify_report_json(rep, &j) < 0)
			return cannot_check(a, "out of memory");
		json_object_object_add(j, "version", json_object_new_string(DRA_CPU_VERSION));
		r = print_json(j);
		json_object_put(j);
		if (r < 0)
			return cannot_check(a, "out of memory");
	} else {
		verify_report_print(rep, stdout);
	}
	return t.exit_code;
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
	  "task storage from tracing programs (5.11): deny mode" },
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

static int verb_probe(const struct args *a)
{
	_cleanup_(bpfmon_probe_freep) struct bpfmon_probe *p = NULL;
	enum cgroup_hier mode = cgroup_pinning_hier(); /* as dra-cpu-driver picks it */
	const struct bpfmon_probe_obj *pin;
	struct utsname u;
	bool ok;
	char buf[128];
	int r;

	if (uname(&u) < 0)
		(void)snprintf(u.release, sizeof(u.release), "?");
	r = bpfmon_probe_new(mode, &p);
	if (r < 0)
		return cannot_check(a, "probe: %s", strerror(-r));
	pin = &p->obj[BPFMON_OBJ_PINNING];
	ok = pin->load == 0 && pin->attach == 0;

	if (a->json) {
		struct json_object *o = json_object_new_object(), *f = json_object_new_object();
		struct json_object *objs = json_object_new_array();

		if (!o || !f || !objs) {
			json_object_put(o);
			json_object_put(f);
			json_object_put(objs);
			return cannot_check(a, "out of memory");
		}
		json_object_object_add(o, "verdict", json_object_new_string(ok ? "ok" : "error"));
		json_object_object_add(o, "exitCode", json_object_new_int(ok ? 0 : EXIT_CANNOT));
		json_object_object_add(o, "kernel", json_object_new_string(u.release));
		json_object_object_add(o, "cgroupMode",
				       json_object_new_string(cgroup_hier_name(mode)));
		for (size_t i = 0; i < ARRAY_SIZE(features); i++) {
			int s = feature_state(p, &features[i]);

			json_object_object_add(f, features[i].json,
					       s < 0 ? NULL : json_object_new_boolean(s));
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
		json_object_object_add(o, "version", json_object_new_string(DRA_CPU_VERSION));
		r = print_json(o);
		json_object_put(o);
		if (r < 0)
			return cannot_check(a, "out of memory");
	} else {
		printf(PROG " --probe: kernel %s, cgroup mode %s (as dra-cpu-driver picks it)\n\n"
		       "features:\n",
		       u.release, cgroup_hier_name(mode));
		for (size_t i = 0; i < ARRAY_SIZE(features); i++) {
			int s = feature_state(p, &features[i]);

			printf("  %-14s %-8s %s\n", features[i].name,
			       s < 0 ? "unknown" : s ? "yes" : "no", features[i].what);
		}
		printf("\nobjects:\n");
		for (int i = 0; i < BPFMON_OBJ_MAX; i++) {
			const struct bpfmon_probe_obj *ob = &p->obj[i];

			printf("  %-10s %s\n", ob->name, obj_state(ob, buf, sizeof(buf)));
			/* The verifier log (and libbpf's reasons) only where it failed. */
			if ((ob->load < 0 || ob->attach < 0) && ob->log[0]) {
				const char *s = ob->log;

				while (*s) {
					int n = (int)strcspn(s, "\n");

					printf("    | %.*s\n", n, s);
					s += n;
					if (*s)
						s++;
				}
			}
		}
		printf("\nverdict: %s\n",
		       ok ? (p->obj[BPFMON_OBJ_ENFORCE].load == 0 &&
				     p->obj[BPFMON_OBJ_ENFORCE].attach == 0
			     ? "ok: the pinning check and deny mode load here"
			     : "ok: the pinning check loads here; deny mode does not (the driver "
			       "falls back to remediate)")
			  : "the pinning check does not load here: bpf-verify and the driver's checks "
			    "cannot run");
	}
	if (!ok) {
		const char *hint = load_hint(p->features);

		fprintf(stderr, PROG ": could not check: the pinning check does not load: %s\n",
			hint ? hint : strerror(pin->load < 0 ? -pin->load : -pin->attach));
		return EXIT_CANNOT;
	}
	return 0;
}

/* ---- realtime ------------------------------------------------------------------------- */

/* The real-time CPUs and their owners: the driver's rt-owners.json, or
 * --rt-cpus alone. */
static int rt_load_owners(const struct args *a, struct rt_owners *o)
{
	struct errbuf why = { "" };
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX];
	size_t len = 0;
	int r;

	if (a->rt_cpus) {
		*o = (struct rt_owners){ 0 };
		if (cpuset_parse(a->rt_cpus, &o->cpus, &why) < 0)
			return cannot_check(a, "--rt-cpus: %s", why.s);
		return 0;
	}
	(void)snprintf(path, sizeof(path), "%s/%s", a->state_dir, RTREPORT_OWNERS_FILE);
	r = fileio_read(path, 16 << 20, &buf, &len, NULL);
	if (r == -ENOENT)
		return cannot_check(a,
				    "no %s: is dra-cpu-driver running with --rt-cpus and --state-dir "
				    "%s? (or name the CPUs with --rt-cpus)",
				    path, a->state_dir);
	if (r < 0)
		return cannot_check(a, "cannot read %s: %s", path, strerror(-r));
	r = rt_owners_parse(buf, len, o, &why);
	if (r < 0)
		return cannot_check(a, "%s: %s", path, why.s);
	return 0;
}

static int verb_realtime(const struct args *a)
{
	_cleanup_(rtmon_freep) struct rtmon *m = NULL;
	struct rtmon_opts mo = { 0 };
	struct rt_owners own = { 0 };
	struct rtmon_task *tasks = NULL;
	struct rtreport_cpu *cpus = NULL;
	struct rtreport rep = { 0 };
	struct cgroup_mounts mounts = { 0 };
	bool have_mounts = false;
	enum cgroup_hier hier = CGROUP_V2;
	struct errbuf eb = { "" };
	struct timespec ts;
	int n_tasks = 0, n_cpus = 0, ret, r;

	ret = rt_load_owners(a, &own);
	if (ret)
		return ret;
	if (cpuset_is_empty(&own.cpus)) {
		rt_owners_done(&own);
		return cannot_check(a, "no real-time CPU in use (%s)",
				    a->rt_cpus ? "--rt-cpus is empty" : "no real-time claim bound");
	}
	if (cgroup_mounts_read(&mounts) == 0) {
		(void)cgroup_mounts_pinning(&mounts, &hier);
		have_mounts = true;
	}
	mo.cgroup_v1 = hier == CGROUP_V1;
	r = rtmon_new(&mo, &m, &eb);
	if (r < 0) {
		rt_owners_done(&own);
		return cannot_check(a, "%s", eb.s);
	}
	cpus = calloc((size_t)cpuset_count(&own.cpus), sizeof(*cpus));
	if (!cpus) {
		ret = cannot_check(a, "out of memory");
		goto out;
	}
	CPUSET_FOREACH(cpu, &own.cpus)
	{
		r = rtmon_watch(m, cpu, true);
		if (r < 0) {
			ret = cannot_check(a, "cannot watch CPU %d: %s", cpu, strerror(-r));
			goto out;
		}
	}
	for (int i = 0; i < own.n; i++)
		(void)rtmon_own(m, own.v[i].cgroup_id, own.v[i].cpu, true);
	log_info("rt_window_started", "cpus=%d owners=%d duration_s=%.3f",
		 cpuset_count(&own.cpus), own.n, a->duration);
	ts.tv_sec = (time_t)a->duration;
	ts.tv_nsec = (long)((a->duration - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	r = rtmon_tasks(m, &tasks, &n_tasks);
	if (r < 0) {
		ret = cannot_check(a, "cannot read the monitor: %s", strerror(-r));
		goto out;
	}
	CPUSET_FOREACH(cpu, &own.cpus)
	{
		cpus[n_cpus].cpu = cpu;
		if (rtmon_cpu(m, cpu, &cpus[n_cpus].c) == 0)
			n_cpus++;
	}
	if (rtreport_build(&own, tasks, n_tasks, cpus, n_cpus, a->duration, &rep) < 0 ||
	    rtreport_scan_pinned(&rep, &own, "/proc", hier,
				 have_mounts ? &mounts.h[hier] : NULL) == -ENOMEM) {
		ret = cannot_check(a, "out of memory");
		goto out;
	}
	if (a->json) {
		struct json_object *j = NULL;

		if (rtreport_to_json(&rep, &j) < 0) {
			ret = cannot_check(a, "out of memory");
			goto out;
		}
		json_object_object_add(j, "version", json_object_new_string(DRA_CPU_VERSION));
		(void)print_json(j);
		json_object_put(j);
	} else {
		rtreport_print(&rep, stdout);
	}
	ret = rtreport_exit_code(&rep);
out:
	rtreport_done(&rep);
	free(tasks);
	free(cpus);
	rt_owners_done(&own);
	if (have_mounts)
		cgroup_mounts_done(&mounts);
	return ret;
}

/* ---- main ----------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct args a;
	char err[ERRBUF_MAX] = "";
	int r;

	r = parse_args(argc, argv, &a, err, sizeof(err));
	if (r < 0) {
		struct args ja = { .json = false };

		free(a.exclusive);
		/* --json may come after the bad flag: look for it anywhere. */
		for (int i = 1; i < argc; i++)
			ja.json |= !strcmp(argv[i], "--json");
		return cannot_check(&ja, "%s (see --help)", r == -ENOMEM ? "out of memory" : err);
	}
	log_set_level(a.verbose ? LOG_INFO : LOG_ERROR);
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (verbs[i].flag == a.verb) {
			r = verbs[i].run(&a);
			break;
		}
	free(a.exclusive);
	return r;
}
