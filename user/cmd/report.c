/* report: decisions into Events and claim status. See report.h. */
#include "cmd/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cfg.h"
#include "core/claim.h"
#include "core/state.h"
#include "kube/claimstatus.h"
#include "kube/events.h"
#include "kubelet/dra.h"
#include "lib/cpuset.h"
#include "lib/log.h"
#include "nri/nri.h"

struct report {
	struct report_opts o;
	char node[256];
	char instance[EVENTS_INSTANCE_MAX];
	struct events *ev;
	struct claimstatus *cs;
};

int report_new(const struct report_opts *o, struct report **ret)
{
	struct report *rp = calloc(1, sizeof(*rp));

	if (!rp)
		return -ENOMEM;
	rp->o = *o;
	(void)snprintf(rp->node, sizeof(rp->node), "%s", o->node);
	rp->o.node = rp->node;
	/* who reported: this driver's instance on this node */
	(void)snprintf(rp->instance, sizeof(rp->instance), "dra-cpu-%.110s", o->node);
	*ret = rp;
	return 0;
}

int report_start(struct report *rp, struct event_base *base, struct kube *k, struct metrics *m)
{
	int r;

	if (rp->o.events != CFG_EVENTS_NONE) {
		struct events_opts eo = { .controller = DRA_DRIVER, .instance = rp->instance,
					  .normal = rp->o.events == CFG_EVENTS_ALL,
					  .flush_ms = rp->o.series_interval_s * 1000 };

		r = events_new(base, k, &eo, m, &rp->ev);
		if (r < 0)
			return r;
	}
	if (rp->o.claim_status) {
		struct claimstatus_opts co = { .driver = DRA_DRIVER, .pool = rp->node,
					       .topo = rp->o.topo };

		r = claimstatus_new(base, k, &co, m, &rp->cs);
		if (r < 0)
			return r;
	}
	return 0;
}

struct report *report_free(struct report *rp)
{
	if (!rp)
		return NULL;
	events_free(rp->ev);
	claimstatus_free(rp->cs);
	free(rp);
	return NULL;
}

static struct events_ref claim_ref(const char *ns, const char *name, const char *uid)
{
	return (struct events_ref){ "resource.k8s.io/v1", "ResourceClaim", ns, name, uid };
}

static void on_prepared(void *ud, const char *ns, const char *name, const char *uid,
			const char *error, struct json_object *claim,
			const struct claim_alloc *alloc, const struct state_claim *c)
{
	struct report *rp = ud;
	struct events_ref reg = claim_ref(ns, name, uid);

	if (error) {
		/* The kubelet reports the failure on the pod; the claim gets why. */
		events_record(rp->ev, EVENTS_WARNING, &reg, NULL, "PrepareRefused", "Prepare",
			      "%s", error);
		return;
	}
	if (c && rp->ev) {
		struct cpuset cpus;
		char list[512];

		(void)cpuset_format(cpuset_from_view(&c->cpus, &cpus), list, sizeof(list));
		events_record(rp->ev, EVENTS_NORMAL, &reg, NULL, "Prepared", "Prepare",
			      "CPUs %s set aside on node %s", list, rp->node);
	}
	if (c && alloc)
		(void)claimstatus_prepared(rp->cs, claim, alloc, c);
}

static void on_unprepared(void *ud, const char *ns, const char *name, const char *uid)
{
	struct report *rp = ud;

	(void)claimstatus_unprepared(rp->cs, ns, name, uid);
}

static void on_offline(void *ud, const struct state_claim *c, const struct cpuset *off)
{
	struct report *rp = ud;
	struct events_ref reg = claim_ref(c->ns, c->name, c->uid);
	char list[512];

	(void)cpuset_format(off, list, sizeof(list));
	events_record(rp->ev, EVENTS_WARNING, &reg, NULL, "CPUsOffline", "Hotplug",
		      "CPUs %s of this claim went offline on node %s: the claim keeps its other "
		      "CPUs and is not moved; its pods run on fewer CPUs until they come back "
		      "or the pods are recreated",
		      list, rp->node);
}

const struct dra_report_ops report_dra_ops = {
	.prepared = on_prepared,
	.unprepared = on_unprepared,
	.offline = on_offline,
};

void report_not_consumer(void *ud, const struct nri_pod *pod, const char *container,
			 const struct state_claim *claim, const char *why)
{
	struct report *rp = ud;
	struct events_ref reg = { "v1", "Pod", pod->namespace, pod->name, pod->uid };
	struct events_ref rel = claim_ref(claim->ns, claim->name, claim->uid);

	events_record(rp->ev, EVENTS_WARNING, &reg, claim->ns[0] ? &rel : NULL, "BindingRefused",
		      "CreateContainer", "container %s refused: %s", container, why);
}

void report_rt_failure(void *ud, const char *pod, const char *pod_uid, const char *container,
		       const struct state_claim *claim, const char *why, bool evicted)
{
	struct report *rp = ud;
	struct events_ref reg = { "v1", "Pod", claim->ns, pod, pod_uid };
	struct events_ref rel = claim_ref(claim->ns, claim->name, claim->uid);

	events_record(rp->ev, EVENTS_WARNING, &reg, &rel, "RealtimeNotApplied",
		      evicted ? "Evict" : "RunWithoutGuarantees",
		      "the real-time policy of claim %s could not be applied to container %s: %s; %s",
		      claim->name, container, why,
		      evicted ? "the container was evicted (onFailure: evict)"
			      : "it keeps running without real-time guarantees");
}
