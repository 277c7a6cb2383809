/* dra_unprepare: NodeUnprepareResources (v1 and v1beta1 DRAPlugin). Each
 * claim: a Prepare of it still waiting is superseded (dra.c), its device
 * metadata and CDI spec are removed, its CPUs go back; an unknown claim
 * succeeds (Unprepare is idempotent), a claim whose files stay keeps its CPUs
 * and says why. Apart from dra.c, which is Prepare's queue and fetches:
 * Unprepare waits for nothing and answers at once. See dra.h.
 */
#include "kubelet/dra.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MOD "dra"
#include "core/cdi.h"
#include "core/claim.h"
#include "core/metadata.h"
#include "core/state.h"
#include "kubelet/dra_priv.h"
#include "kubelet/grpc.h"
#include "kubelet_dra_v1.pb-c.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "obs/metrics.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareClaimResponse;

/* Tells the daemon a prepared claim is gone (its status is cleared). */
static void report_unprepared(struct dra *d, const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl,
			      const char *uid)
{
	const struct dra_report_ops *ops = d->o.report;

	if (!ops || !ops->unprepared || !cl->namespace_ || !cl->name ||
	    claim_namespace_check(cl->namespace_) < 0 || claim_name_check(cl->name) < 0)
		return;
	ops->unprepared(d->o.report_ud, cl->namespace_, cl->name, uid);
}

/* Logs, counts and puts in the claim's reply that it could not be unprepared. */
static void unprepare_failed(struct dra *d, const char *uid, UnprepareClaimResponse *cr,
			     struct errbuf *err)
{
	cr->error = err->s;
	metric_series_add(d->unprep_err, 1);
	log_error("claim_unprepare_failed", "uid=%s error=%s", uid, log_quote(err->s));
}

/* One claim of NodeUnprepareResources: a Prepare of it still waiting is
 * superseded, its device metadata and CDI spec go, its CPUs are freed. A
 * failure is in cr->error, its text in *err (which outlives the reply). */
static void unprepare_claim(struct dra *d, const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl,
			    const char *uid, UnprepareClaimResponse *cr, struct errbuf *err)
{
	const struct state_claim *c;
	bool known;
	int r;

	if (cdi_uid_valid(uid) == 0 && dra_supersede_prepares(d, uid) > 0)
		log_info("claim_prepare_superseded", "uid=%s", uid);
	c = cdi_uid_valid(uid) == 0 ? state_claim(d->state, uid) : NULL;
	if (c) {
		struct cpuset cpus;
		char list[256];

		(void)cpuset_format(cpuset_from_view(&c->cpus, &cpus), list, sizeof(list));
		log_info("claim_unpreparing", "claim=%s/%s uid=%s cpus=%s", log_quote(c->ns),
			 log_quote(c->name), uid, list);
	}
	/* Metadata first (whatever the option says now: it may have been on
	 * when the claim was prepared); a spec that stays keeps the claim. */
	if (cdi_uid_valid(uid) == 0) {
		struct metadata_opts mo = { .data_dir = d->data_dir, .cdi_dir = d->o.cdi_dir,
					    .driver = DRA_DRIVER, .pool = d->node };
		struct errbuf mwhy = { "" };

		r = d->o.cdi_dir ? metadata_remove(&mo, uid, &mwhy) : 0;
		if (r < 0) {
			errbuf_set(err,
				   "removing the device metadata of claim %s: %s (CPUs stay "
				   "reserved)",
				   uid, mwhy.s);
			unprepare_failed(d, uid, cr, err);
			return;
		}
	}
	/* Unknown claims succeed: Unprepare is idempotent. */
	known = c != NULL;
	r = state_claim_remove(d->state, uid);
	if (r < 0) {
		errbuf_set(err, "removing the CDI spec of claim %s: %s (CPUs stay reserved)", uid,
			   strerror(-r));
		unprepare_failed(d, uid, cr, err);
		return;
	}
	metric_series_add(d->unprep_ok, 1);
	if (known)
		report_unprepared(d, cl, uid);
}

void dra_handle_unprepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	struct dra *d = ud;
	UnprepareResponse resp = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	UnprepareRequest *rq;
	UnprepareEntry *entries = NULL, **eptrs = NULL;
	UnprepareClaimResponse *crs = NULL;
	struct errbuf *errs = NULL;
	size_t n;

	rq = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(NULL, len,
											       req);
	if (!rq) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
				     "NodeUnprepareResourcesRequest does not decode");
		return;
	}
	n = rq->n_claims;
	entries = calloc(n + 1, sizeof(*entries));
	eptrs = calloc(n + 1, sizeof(*eptrs));
	crs = calloc(n + 1, sizeof(*crs));
	errs = calloc(n + 1, sizeof(*errs));
	if (!entries || !eptrs || !crs || !errs) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *uid = rq->claims[i]->uid ? rq->claims[i]->uid : "";

		k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&crs[i]);
		k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
			&entries[i]);
		entries[i].key = (char *)uid;
		entries[i].value = &crs[i];
		eptrs[i] = &entries[i];
		unprepare_claim(d, rq->claims[i], uid, &crs[i], &errs[i]);
	}
	resp.n_claims = n;
	resp.claims = eptrs;
	dra_reply_message(call, &resp.base);
out:
	k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(rq, NULL);
	free(entries);
	free(eptrs);
	free(crs);
	free(errs);
}
