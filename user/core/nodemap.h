/* nodemap: a picture of the node. What every CPU is right now (which claim
 * and pod hold it, shared, reserved, real-time, offline) placed in its
 * socket, NUMA node, L3 group and core, as one JSON document the daemon
 * serves at /nodemap and `dra-cpu-driver map` draws in the terminal.
 *
 *   topology + state + the daemon's sets ──nodemap_build──> JSON ──HTTP──>
 *   nodemap_parse ──> struct nodemap ──nodemap_draw──> text (colour on a tty)
 *
 * The document (kind NodeMap, apiVersion dra.cpu/v1alpha1):
 *
 *   {"node": "worker-1",
 *    "claims": [{"name": "default/db", "uid": "...", "realtime": false,
 *                "pods": ["db-0"], "container": "postgres"}],
 *    "cpus": [{"cpu": 3, "socket": 0, "numa": 0, "l3": 0, "core": 1,
 *              "use": "claimed", "online": true, "claims": [0]}]}
 *
 * `use` is one of shared, claimed, realtime, reserved, offline, isolated
 * (unclaimed isolated CPUs, never in the shared pool); `claims`
 * index the claims array (a real-time CPU may carry several claims). A
 * claimed CPU that went offline stays "claimed" with "online": false: that
 * is the unhealthy case the picture must show.
 *
 * The parser is strict: the draw runs on what a peer sent, so every string
 * is bounded and free of control characters (nothing reaches the terminal
 * but what we print), indexes are in range, CPUs unique and bounded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct errbuf;
struct json_object;
struct state;
struct topo;

#define NODEMAP_MAX_BYTES (8u << 20)
#define NODEMAP_STRING_MAX 320 /* "namespace/name" of a claim: 63 + 1 + 253 */
#define NODEMAP_MAX_CLAIMS 4096
#define NODEMAP_MAX_PODS 256 /* per claim: status.reservedFor */
#define NODEMAP_CPU_CLAIMS 8 /* claims remembered per CPU (real-time CPUs have several) */

enum nodemap_use {
	NODEMAP_SHARED,
	NODEMAP_CLAIMED,
	NODEMAP_REALTIME,
	NODEMAP_RESERVED,
	NODEMAP_OFFLINE,
	NODEMAP_ISOLATED, /* the kernel's isolated CPUs, kept out of the shared pool */
};

/* What the daemon knows beyond the topology and the claims. */
struct nodemap_input {
	const char *node;
	const struct topo *topo;       /* CPUs online at start, and the offline ones */
	const struct state *state;     /* the claims */
	const struct cpuset *online;   /* online now (hotplug followed) */
	const struct cpuset *reserved; /* --reserved-cpus */
	const struct cpuset *rt_cpus;  /* --rt-cpus (may be NULL) */
};

struct nodemap_claim {
	char *name; /* namespace/name, or the UID when the name is not known */
	char *uid;
	bool realtime;
	int n_pods;
	char **pods;
	char *container; /* the container holding it, NULL when unbound */
};

struct nodemap_cpu {
	int cpu, socket, numa, l3, core;
	enum nodemap_use use;
	bool online;
	int n_claims; /* how many claims hold it */
	int claims[NODEMAP_CPU_CLAIMS]; /* the first of them: indexes into nodemap.claims */
};

struct nodemap {
	char *node;
	int n_cpus;
	struct nodemap_cpu *cpus; /* ascending by cpu */
	int n_claims;
	struct nodemap_claim *claims;
};

/* The document for in (json-c object in *ret, put it), or -ENOMEM. */
int nodemap_build(const struct nodemap_input *in, struct json_object **ret);

/* Parses a document of len bytes. -EINVAL/-E2BIG with eb saying where. */
int nodemap_parse(const char *buf, size_t len, struct nodemap **ret, struct errbuf *eb);

struct nodemap *nodemap_free(struct nodemap *m);
DEFINE_FREEP(nodemap, nodemap_free)

/* Draws m: a header, one block per socket / NUMA node / L3 group with its
 * cores and their threads, then the legend naming each claim and its pods.
 * colour: ANSI colours (a terminal), or plain text. */
int nodemap_draw(const struct nodemap *m, bool colour, FILE *out);

const char *nodemap_use_name(enum nodemap_use u);
