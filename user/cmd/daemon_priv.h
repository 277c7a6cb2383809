/* daemon_priv: what the files of the daemon share and nobody else sees:
 * struct daemon, which owns every part of the running driver (daemon.h).
 * Only user/cmd/daemon*.c include this header.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/rt.h"
#include "kube/claims.h"
#include "kube/slices.h"
#include "lib/cpuset.h"

struct bpfmon;
struct devices;
struct dra;
struct event;
struct event_base;
struct filewatch;
struct httpd;
struct irqiso;
struct isolwatch;
struct kube;
struct metric;
struct metric_series;
struct metrics;
struct nri;
struct pcie;
struct pools;
struct publisher;
struct report;
struct rtctl;
struct rtdomain;
struct rtmon;
struct schedwatch;
struct state;
struct topo;

struct daemon {
	const struct cfg *cfg;
	const struct topo *topo;
	char node[256];
	char smt_layout[SLICES_MAX_STRING + 1]; /* --allocator external */
	struct event_base *base;
	struct event *sigterm, *sigint, *grace;
	struct metrics *metrics;
	struct httpd *httpd;
	struct devices *devices;
	struct pcie *pcie;
	struct event *hotplug_timer;
	struct event *uevents; /* the kernel's CPU hotplug messages, NULL: polling */
	int uevent_fd;
	struct metric_series *checks_uevent, *checks_timer;
	struct filewatch *config_watch; /* --config: changes need a restart */
	struct metric *g_config_stale;
	struct event *trim_timer; /* persistent: trim_check */
	struct event *trim_soon;  /* one-shot: after a burst we know of */
	size_t trim_free;	  /* free heap bytes right after the last trim */
	struct cpuset online;	     /* the CPUs online at the last poll */
	struct cpuset memory_nodes;  /* NUMA nodes with memory, read at start */
	bool hotplug_failed_logged;
	struct isolwatch *isolwatch; /* the kernel's isolated CPUs, followed */
	struct metric *g_online;
	struct kube *kube;
	struct kube_claims claims; /* claim reads for dra and pools, over kube */
	struct report *report; /* Events and claim status */
	struct publisher *publisher;
	struct state *state;
	struct dra *dra;
	struct bpfmon *bpf;
	struct pools *pools;
	struct rtctl *rtctl; /* --rt-cpus */
	struct irqiso *irqiso; /* interrupts off claims' CPUs */
	struct rtmon *rtmon; /* its BPF monitor, NULL without */
	struct schedwatch *rtwatch; /* the kernel's limits for --rt-cpus, followed */
	struct nri *nri;
	int check_serving, check_registered, check_slices;
	struct metric *g_allocated, *g_available, *g_claims;
	bool stopping;
	bool rt_on; /* --rt-cpus names CPUs */
	struct rt_limits rt;
	/* Without --rt-cpus: real-time isolation a previous run left and a
	 * prepared claim still sits on (its CPUs); undone once none does. */
	struct rtdomain *rt_left;
	struct cpuset rt_left_cpus;
};

/* daemon.c: the claims gauges (allocated, available, claims) read again. */
void daemon_update_gauges(struct daemon *d);
/* daemon.c: the isolated CPUs the shared pool leaves out, into *ret: none
 * when the node lets them in or nothing else would be left for it. */
void daemon_isolated_unshared(struct daemon *d, struct cpuset *ret);
/* daemon_hotplug.c: follows CPU hotplug from now on; nothing to follow with a
 * topology file (another machine). 0 or -errno. */
int daemon_hotplug_start(struct daemon *d);
