/* bpf-verify: proves, right now, that exclusive CPUs run only their owners.
 * For an SRE on a node, or `kubectl exec` in the driver's pod.
 *
 *   bpf-verify [--duration S] [--state-dir DIR | --exclusive CPUS=CGROUP...] [--json]
 *   bpf-verify --probe [--json]
 *   bpf-verify --realtime [--duration S] [--state-dir DIR | --rt-cpus LIST] [--json]
 *
 * This file is the wiring: flags, the verb they select, the output (tables
 * or JSON) and the exit status. The checks themselves are pinning/verify.h's.
 *
 * Exit status: 0 clean, 1 violations found, 2 could not check (the reason in
 * one line on stderr; with --json also as {"verdict":"error",...} on stdout)
 * or, with --scope, a verdict left open ("incomplete").
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cmd/cfg.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "pinning/report.h"
#include "pinning/report_json.h"
#include "pinning/report_text.h"
#include "pinning/rtreport.h"
#include "pinning/verify.h"

#ifndef DRA_CPU_VERSION
#define DRA_CPU_VERSION "unknown"
#endif

#define PROG "bpf-verify"
#define DEFAULT_STATE_DIR "/var/run/dra-cpu"
#define DEFAULT_DURATION 5.0

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
			json_object_object_add(o, "exitCode", json_object_new_int(VERIFY_EXIT_CANNOT));
			json_object_object_add(o, "error", json_object_new_string(reason));
			(void)print_json(o);
			json_object_put(o);
		}
	}
	return VERIFY_EXIT_CANNOT;
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

static int parse_duration(const char *s, double *ret, struct errbuf *eb)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0.1 || v > VERIFY_DURATION_MAX)
		return errbuf_fail(eb, -EINVAL,
				   "--duration: \"%s\" is not a number of seconds in 0.1-86400", s);
	*ret = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a, struct errbuf *eb)
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
			if (parse_duration(optarg, &a->duration, eb) < 0)
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
				return errbuf_fail(eb, -EINVAL, "--%s and --%s cannot be combined",
						   opt_name(a->verb), opt_name((enum opt_id)c));
			}
			if (a->verb != OPT_HELP)
				a->verb = (enum opt_id)c;
			break;
		case ':':
			return errbuf_fail(eb, -EINVAL, "%s needs a value", argv[optind - 1]);
		default:
			return errbuf_fail(eb, -EINVAL, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return errbuf_fail(eb, -EINVAL, "unexpected argument '%s'", argv[optind]);
	if (a->nexclusive && a->has_state_dir)
		return errbuf_fail(eb, -EINVAL, "--exclusive and --state-dir cannot be combined: "
						"owners come from one or the other");
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

/* ---- the checks ----------------------------------------------------------------------- */

static int verb_check(const struct args *a)
{
	struct verify_check_opts o = { .duration = a->duration, .state_dir = a->state_dir,
				       .exclusive = a->exclusive, .nexclusive = a->nexclusive,
				       .scope = a->scope, .strict_kthreads = a->strict_kthreads };
	_cleanup_(verify_check_freep) struct verify_check *c = NULL;
	struct errbuf eb = { "" };
	struct verify_tally t;
	int r;

	r = verify_check_run(&o, &c, &eb);
	if (r < 0)
		return cannot_check(a, "%s", errbuf_text(&eb, r));
	verify_report_tally(c->report, &t);
	if (a->json) {
		struct json_object *j = NULL;

		if (verify_report_json(c->report, &j) < 0)
			return cannot_check(a, "out of memory");
		json_object_object_add(j, "version", json_object_new_string(DRA_CPU_VERSION));
		r = print_json(j);
		json_object_put(j);
		if (r < 0)
			return cannot_check(a, "out of memory");
	} else {
		verify_report_print(c->report, stdout);
	}
	return t.exit_code;
}

static int verb_probe(const struct args *a)
{
	_cleanup_(verify_probe_freep) struct verify_probe *p = NULL;
	struct errbuf eb = { "" };
	int r;

	r = verify_probe_run(&p, &eb);
	if (r < 0)
		return cannot_check(a, "%s", errbuf_text(&eb, r));
	if (a->json) {
		struct json_object *o = NULL;

		if (verify_probe_json(p, &o) < 0)
			return cannot_check(a, "out of memory");
		json_object_object_add(o, "version", json_object_new_string(DRA_CPU_VERSION));
		r = print_json(o);
		json_object_put(o);
		if (r < 0)
			return cannot_check(a, "out of memory");
	} else {
		verify_probe_print(p, stdout);
	}
	if (!p->ok) {
		fprintf(stderr, PROG ": could not check: the pinning check does not load: %s\n",
			verify_probe_why(p));
		return VERIFY_EXIT_CANNOT;
	}
	return VERIFY_EXIT_CLEAN;
}

static int verb_realtime(const struct args *a)
{
	struct verify_realtime_opts o = { .duration = a->duration, .state_dir = a->state_dir,
					  .rt_cpus = a->rt_cpus };
	_cleanup_(verify_realtime_freep) struct verify_realtime *v = NULL;
	struct errbuf eb = { "" };
	int r;

	r = verify_realtime_run(&o, &v, &eb);
	if (r < 0)
		return cannot_check(a, "%s", errbuf_text(&eb, r));
	if (a->json) {
		struct json_object *j = NULL;

		if (rtreport_to_json(&v->report, &j) < 0)
			return cannot_check(a, "out of memory");
		json_object_object_add(j, "version", json_object_new_string(DRA_CPU_VERSION));
		(void)print_json(j);
		json_object_put(j);
	} else {
		rtreport_print(&v->report, stdout);
	}
	return rtreport_exit_code(&v->report);
}

/* ---- main ----------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct args a;
	struct errbuf err = {};
	int r;

	r = parse_args(argc, argv, &a, &err);
	if (r < 0) {
		struct args ja = { .json = false };

		free(a.exclusive);
		/* --json may come after the bad flag: look for it anywhere. */
		for (int i = 1; i < argc; i++)
			ja.json |= !strcmp(argv[i], "--json");
		return cannot_check(&ja, "%s (see --help)", r == -ENOMEM ? "out of memory" : err.s);
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
