/* The claim source over the API client. See claims.h. */
#include "kube/claims.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kube/kube.h"

/* A read in flight: the kube call and where its answer goes. */
struct read {
	struct kube_call *call;
	claimsource_cb cb;
	void *cb_ud;
};

static void on_claim_got(void *ud, const struct kube_result *r)
{
	struct read *rd = ud;

	rd->cb(rd->cb_ud, r->error ? NULL : r->body, r->error ? r->error_text : NULL);
	free(rd);
}

static int read_claim(void *ud, const char *ns, const char *name, int64_t timeout_ms,
		      claimsource_cb cb, void *cb_ud, void **ret)
{
	struct kube_claims *kc = ud;
	struct kube_req_opts o = { .timeout_ms = timeout_ms < KUBE_CLAIMS_ATTEMPT_MS
							 ? (int)timeout_ms
							 : KUBE_CLAIMS_ATTEMPT_MS,
				   .max_attempts = KUBE_CLAIMS_ATTEMPTS };
	struct read *rd;
	char path[1024];
	int r;

	if (!kc->kube)
		return -ENOTCONN;
	if (snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
		     ns, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rd = malloc(sizeof(*rd));
	if (!rd)
		return -ENOMEM;
	rd->cb = cb;
	rd->cb_ud = cb_ud;
	r = kube_request(kc->kube, KUBE_GET, path, NULL, &o, on_claim_got, rd, &rd->call);
	if (r < 0) {
		free(rd);
		return r;
	}
	*ret = rd;
	return 0;
}

static void read_cancel(void *ud, void *handle)
{
	struct read *rd = handle;

	kube_call_cancel(rd->call);
	free(rd);
}

void kube_claims_init(struct kube_claims *kc)
{
	*kc = (struct kube_claims){
		.source = { .start = read_claim, .cancel = read_cancel, .ud = kc },
	};
}

void kube_claims_set_kube(struct kube_claims *kc, struct kube *kube)
{
	kc->kube = kube;
}
