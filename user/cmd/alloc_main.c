/* dra-cpu-alloc: one allocation decision from the command line, exactly as the
 * driver (and kubelet's CPU manager) would make it. For operators asking "what
 * would a claim get here?" and for tests that replay kubelet's cases.
 *
 *   dra-cpu-alloc --topology node.json --available 0-63 --count 8 --full-cores
 *   2-5,34-37
 *
 * Exit codes: 0 the CPU list on stdout; 1 no allocation (kubelet's error text
 * on stderr); 2 bad flags or an unreadable topology.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/allocator.h"
#include "cmd/cfg.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/num.h"
#include "host/topo.h"
#include "host/topo_json.h"

#define PROG "dra-cpu-alloc"

enum opt_id {
	OPT_TOPOLOGY = 1,
	OPT_AVAILABLE,
	OPT_COUNT,
	OPT_POLICY,
	OPT_ALIGN_L3,
	OPT_FULL_CORES,
	OPT_MIXED_CORES,
	OPT_GROUP_SIZE,
	OPT_RESERVED,
	OPT_PREFER,
	OPT_HEADER,
	OPT_HELP,
};

/* The one table: getopt_long's options and --help. */
static const struct cfg_cli_opt opts[] = {
	{ OPT_TOPOLOGY, "topology", "FILE",
	  "node topology JSON, as printed by dra-cpu-driver --print-topology (required)" },
	{ OPT_AVAILABLE, "available", "LIST",
	  "CPUs free for this claim, Linux list format such as 0-7,16 (required)" },
	{ OPT_COUNT, "count", "N", "CPUs to allocate, 0-8192 (required)" },
	{ OPT_POLICY, "policy", "NAME",
	  "packed (default), distributed (distribute-cpus-across-numa) or spread-cores "
	  "(distribute-cpus-across-cores)" },
	{ OPT_ALIGN_L3, "align-l3", NULL,
	  "prefer CPUs sharing an L3 (uncore) cache: prefer-align-cpus-by-uncorecache" },
	{ OPT_FULL_CORES, "full-cores", NULL,
	  "whole physical cores only, with kubelet's SMT checks: full-pcpus-only" },
	{ OPT_MIXED_CORES, "mixed-cores", NULL,
	  "decide as the driver does on a node where claims with and without whole cores "
	  "share CPUs: --full-cores counts and takes only wholly free cores, other claims "
	  "take threads whose siblings are busy first" },
	{ OPT_GROUP_SIZE, "group-size", "N",
	  "distributed: CPUs per group, 1-8192 (default 1, or CPUs per core with --full-cores)" },
	{ OPT_RESERVED, "reserved", "LIST",
	  "the node's reserved CPUs: with --full-cores their cores' other threads are not "
	  "free physical CPUs" },
	{ OPT_PREFER, "prefer", "LIST",
	  "take from these CPUs first, the rest elsewhere (kubelet's NUMA hint)" },
	{ OPT_HEADER, "header", "C,K,S,N,L",
	  "kubelet's topology counts: CPUs, cores, sockets, NUMA nodes, L3 caches (default: "
	  "counted from the topology; kubelet derives CPUs per core, socket and cache from "
	  "them)" },
	{ OPT_HELP, "help", NULL, "print this help" },
};

struct args {
	const char *topology;
	struct cpuset available, reserved, prefer;
	bool has_available, has_reserved, has_prefer, has_header, help;
	int count;
	struct alloc_header header;
	struct alloc_opts o;
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: " PROG " --topology FILE --available LIST --count N [options]\n\n"
		   "Chooses CPUs for one claim exactly as kubelet's CPU manager (static policy)\n"
		   "would, and prints them as a CPU list.\n\nOptions:\n");
	cfg_cli_print_options(f, opts, ARRAY_SIZE(opts), 25);
	fprintf(f, "\nExit status: 0 CPUs printed, 1 no allocation (reason on stderr),\n"
		   "2 bad options or unreadable topology.\n");
}

/* A whole decimal string in [lo, hi]. */
static int parse_int(const char *flag, const char *s, int lo, int hi, int *ret, struct errbuf *err)
{
	if (num_parse_int(s, NULL, lo, hi, ret) < 0)
		return errbuf_fail(err, -EINVAL, "--%s: \"%s\" is not a number in %d-%d", flag, s,
				   lo, hi);
	return 0;
}

static int parse_list(const char *flag, const char *s, struct cpuset *ret, struct errbuf *err)
{
	if (cpuset_parse(s, ret, err) < 0)
		return errbuf_wrap(err, -EINVAL, "--%s: \"%s\" is not a CPU list", flag, s);
	return 0;
}

static int parse_header(const char *s, struct alloc_header *ret, struct errbuf *err)
{
	int v[5], n = 0;
	const char *p = s;

	while (n < 5) {
		const char *end;

		if (num_parse_int(p, &end, 0, INT_MAX, &v[n]) < 0)
			break;
		n++;
		p = end;
		if (*p != ',')
			break;
		p++;
	}
	if (n != 5 || *p)
		return errbuf_fail(
			err, -EINVAL,
			"--header: \"%s\" is not five counts >= 0 (CPUs,cores,sockets,NUMA nodes,"
			"L3 caches)",
			s);
	*ret = (struct alloc_header){
		.cpus = v[0], .cores = v[1], .sockets = v[2], .numa = v[3], .l3 = v[4]
	};
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a, struct errbuf *err)
{
	struct option lopts[ARRAY_SIZE(opts) + 1];
	bool has_count = false;
	int r = 0, c;

	cfg_cli_getopt_table(opts, ARRAY_SIZE(opts), lopts);
	opterr = 0;
	optind = 1;
	while (r == 0 && (c = getopt_long(argc, argv, ":", lopts, NULL)) != -1) {
		switch (c) {
		case OPT_TOPOLOGY:
			a->topology = optarg;
			break;
		case OPT_AVAILABLE:
			r = parse_list("available", optarg, &a->available, err);
			a->has_available = true;
			break;
		case OPT_COUNT:
			r = parse_int("count", optarg, 0, CPUSET_MAX, &a->count, err);
			has_count = true;
			break;
		case OPT_POLICY:
			if (strcmp(optarg, "packed") == 0)
				a->o.policy = ALLOC_PACKED;
			else if (strcmp(optarg, "distributed") == 0)
				a->o.policy = ALLOC_DISTRIBUTED;
			else if (strcmp(optarg, "spread-cores") == 0)
				a->o.policy = ALLOC_SPREAD_CORES;
			else
				r = errbuf_fail(
					err, -EINVAL,
					"--policy: \"%s\" is not one of packed, distributed, "
					"spread-cores",
					optarg);
			break;
		case OPT_ALIGN_L3:
			a->o.align_l3 = true;
			break;
		case OPT_FULL_CORES:
			a->o.full_cores = true;
			break;
		case OPT_MIXED_CORES:
			a->o.strict_cores = a->o.spare_cores = true;
			break;
		case OPT_GROUP_SIZE:
			r = parse_int("group-size", optarg, 1, CPUSET_MAX, &a->o.group_size, err);
			break;
		case OPT_RESERVED:
			r = parse_list("reserved", optarg, &a->reserved, err);
			a->has_reserved = true;
			break;
		case OPT_PREFER:
			r = parse_list("prefer", optarg, &a->prefer, err);
			a->has_prefer = true;
			break;
		case OPT_HEADER:
			r = parse_header(optarg, &a->header, err);
			a->has_header = true;
			break;
		case OPT_HELP:
			a->help = true;
			break;
		case ':':
			r = errbuf_fail(err, -EINVAL, "%s needs a value (see --help)",
					argv[optind - 1]);
			break;
		default:
			r = errbuf_fail(err, -EINVAL, "unknown option \"%s\" (see --help)",
					argv[optind - 1]);
			break;
		}
	}
	if (r < 0 || a->help)
		return r;
	if (optind < argc)
		return errbuf_fail(err, -EINVAL, "unexpected argument \"%s\" (see --help)",
				   argv[optind]);
	if (!a->topology)
		return errbuf_fail(err, -EINVAL, "--topology FILE is required (see --help)");
	if (!a->has_available)
		return errbuf_fail(err, -EINVAL, "--available LIST is required (see --help)");
	if (!has_count)
		return errbuf_fail(err, -EINVAL, "--count N is required (see --help)");
	/* kubelet refuses these option mixes at start; so do we, as flag errors */
	if (a->o.policy == ALLOC_SPREAD_CORES && (a->o.full_cores || a->o.align_l3))
		return errbuf_fail(err, -EINVAL, "--policy spread-cores cannot be combined with %s",
				   a->o.full_cores ? "--full-cores" : "--align-l3");
	if (a->o.policy == ALLOC_DISTRIBUTED && a->o.align_l3)
		return errbuf_fail(err, -EINVAL,
				   "--policy distributed cannot be combined with --align-l3");
	if (a->o.group_size && a->o.policy != ALLOC_DISTRIBUTED)
		return errbuf_fail(err, -EINVAL,
				   "--group-size applies to --policy distributed only");
	a->o.reserved = a->has_reserved ? &a->reserved : NULL;
	a->o.prefer = a->has_prefer ? &a->prefer : NULL;
	return 0;
}

int main(int argc, char **argv)
{
	_cleanup_(topo_freep) struct topo *t = NULL;
	_cleanup_(alloc_topo_freep) struct alloc_topo *at = NULL;
	_cleanup_free_ char *list = NULL;
	struct args a = { 0 };
	struct cpuset got;
	struct errbuf err = { "" }, twhy = { "" };
	int r;

	if (parse_args(argc, argv, &a, &err) < 0) {
		fprintf(stderr, PROG ": %s\n", err.s);
		return 2;
	}
	if (a.help) {
		usage(stdout);
		return 0;
	}
	r = topo_load_json_file(a.topology, &t, &twhy);
	if (r < 0) {
		if (twhy.s[0]) /* the loader's text names the file */
			fprintf(stderr, PROG ": %s\n", twhy.s);
		else
			fprintf(stderr, PROG ": %s: %s\n", a.topology, strerror(-r));
		return 2;
	}
	r = alloc_topo_from_topo_header(t, a.has_header ? &a.header : NULL, &at, &err);
	if (r < 0) {
		fprintf(stderr, PROG ": --header: %s\n", errbuf_text(&err, r));
		return 2;
	}
	r = alloc_take(at, &a.available, a.count, &a.o, &got, &err);
	if (r < 0) {
		fprintf(stderr, PROG ": %s\n", errbuf_text(&err, r));
		return 1;
	}
	list = cpuset_to_string(&got);
	if (!list) {
		fprintf(stderr, PROG ": %s\n", strerror(ENOMEM));
		return 1;
	}
	printf("%s\n", list);
	return fflush(stdout) == 0 ? 0 : 1;
}
