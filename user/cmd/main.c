/* dra-cpu-driver: flags, topology, then one of the actions (run the daemon,
 * print the topology, print the slices); or `dra-cpu-driver map` (cmd/map.c). Exit codes: 0 ok, 1 runtime failure,
 * 2 bad flags or input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define LOG_MOD "main"
#include "cmd/cfg.h"
#include "lib/cleanup.h"
#include "cmd/daemon.h"
#include "cmd/map.h"
#include "core/devices.h"
#include "core/rt.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "host/isol.h"
#include "host/pcie.h"
#include "kube/slices.h"
#include "host/topo.h"
#include "host/topo_json.h"

#ifndef DRA_CPU_VERSION
#define DRA_CPU_VERSION "unknown"
#endif

static int load_topology(const struct cfg *c, struct topo **ret)
{
	struct errbuf why = { "" };
	int r;

	if (c->topology_file && *c->topology_file)
		r = topo_load_json_file(c->topology_file, ret, &why);
	else
		r = topo_load_hwloc(c->sysfs_root && *c->sysfs_root ? c->sysfs_root : NULL, ret,
				    &why);
	if (r < 0)
		fprintf(stderr, "dra-cpu-driver: topology: %s\n", errbuf_text(&why, r));
	return r;
}

/* --dry-run: {"apiVersion":"v1","kind":"List","items":[slices]} on stdout. */
static int print_slices(const struct cfg *c, const struct topo *t)
{
	_cleanup_(devices_freep) struct devices *d = NULL;
	_cleanup_(pcie_freep) struct pcie *pcie = NULL;
	struct json_object *list, *items = NULL;
	struct slices_opts o = { .generation = 1 };
	struct rt_limits rt;
	struct isol iso;
	struct errbuf eb = {};
	char node[256], layout[SLICES_MAX_STRING + 1];
	int r;

	r = cfg_node_name(c, node, sizeof(node));
	if (r < 0) {
		fprintf(stderr, "dra-cpu-driver: node name ($NODE_NAME or the hostname): not a "
				"Kubernetes node name; set --hostname-override\n");
		return r;
	}
	o.node = node;
	o.node_allocatable = c->node_allocatable;
	if (!cpuset_is_empty(&c->rt_cpus)) {
		r = rt_limits_read(&c->rt_cpus, c->rt_headroom_milli, &rt, &eb);
		if (r < 0) {
			fprintf(stderr, "dra-cpu-driver: flag rt-cpus: %s\n", errbuf_text(&eb, r));
			return r;
		}
	}
	r = isol_read_logged(cfg_sysfs_root(c), cfg_has_topology_file(c), &iso);
	if (r < 0)
		return r;
	r = devices_build_node(t, &c->reserved, &c->rt_cpus, &iso, c->device_mode, c->group_by,
			       cpuset_is_empty(&c->rt_cpus) ? NULL : &rt, &d);
	if (r < 0)
		return r;
	if (c->expose_pcie_roots) {
		r = pcie_load_logged(cfg_sysfs_root(c), cfg_has_topology_file(c), &t->online, &pcie);
		if (r < 0)
			return r;
	}
	o.pcie = pcie;
	if (c->allocator == CFG_ALLOCATOR_EXTERNAL) {
		r = devices_external_layout(t, d, layout, sizeof(layout), &eb);
		if (r < 0) {
			fprintf(stderr, "dra-cpu-driver: allocator external: %s\n",
				errbuf_text(&eb, r));
			return r;
		}
		o.smt_layout = layout;
	}
	r = slices_build(d, &o, &items);
	if (r < 0)
		return r;
	list = json_object_new_object();
	if (!list) {
		json_object_put(items);
		return -ENOMEM;
	}
	json_object_object_add(list, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(list, "kind", json_object_new_string("List"));
	json_object_object_add(list, "items", items);
	puts(json_object_to_json_string_ext(list, JSON_C_TO_STRING_PRETTY |
							  JSON_C_TO_STRING_SPACED |
							  JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(list);
	return 0;
}

int main(int argc, char **argv)
{
	_cleanup_(topo_freep) struct topo *t = NULL;
	struct errbuf err = { "" };
	struct cfg c;
	int r;

	/* Subcommands come first; everything else is the driver's flags. */
	if (argc > 1 && !strcmp(argv[1], "map"))
		return map_main(argc - 1, argv + 1);
	r = cfg_parse(&c, argc, argv, &err);
	if (r < 0) {
		fprintf(stderr, "dra-cpu-driver: %s\n", err.s);
		cfg_done(&c);
		return 2;
	}
	switch (c.action) {
	case CFG_HELP:
		cfg_usage(stdout);
		cfg_done(&c);
		return 0;
	case CFG_VERSION:
		printf("dra-cpu-driver %s\n", DRA_CPU_VERSION);
		cfg_done(&c);
		return 0;
	default:
		break;
	}

	r = load_topology(&c, &t);
	if (r < 0) {
		cfg_done(&c);
		return 2;
	}
	r = cfg_check_topology(&c, t, &err);
	if (r < 0) {
		fprintf(stderr, "dra-cpu-driver: %s\n", err.s);
		cfg_done(&c);
		return 2;
	}

	switch (c.action) {
	case CFG_PRINT_TOPOLOGY:
		r = topo_write_json(t, stdout);
		break;
	case CFG_DRY_RUN:
		r = print_slices(&c, t);
		break;
	default:
		cfg_log(&c);
		r = daemon_run(&c, t);
		break;
	}
	if (r < 0 && c.action != CFG_RUN)
		fprintf(stderr, "dra-cpu-driver: %s\n", strerror(-r));
	cfg_done(&c);
	return r < 0 ? 1 : 0;
}
