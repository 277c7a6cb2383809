/* claims: the claim source (core/claimsource.h) over the API client. A read
 * is one GET of /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>,
 * retried by the client on throttling (429/503), server errors and transport
 * errors, up to KUBE_CLAIMS_ATTEMPTS attempts, each attempt given what is left
 * of the caller's timeout but never more than KUBE_CLAIMS_ATTEMPT_MS. The
 * caller (the kubelet plugin at its Prepare deadline, the NRI checks)
 * cancels what it no longer waits for.
 *
 *	struct kube_claims kc;
 *	kube_claims_init(&kc);           ->  kc.source lent to dra and pools
 *	kube_claims_set_kube(&kc, kube); once the API client is up
 */
#pragma once

#include "core/claimsource.h"

struct kube;

#define KUBE_CLAIMS_ATTEMPTS 3
#define KUBE_CLAIMS_ATTEMPT_MS 10000

struct kube_claims {
	struct claimsource source; /* lend &source; its ud is this struct */
	struct kube *kube;	   /* borrowed; NULL: reads fail with -ENOTCONN */
};

/* No API client yet: the NRI plugin may ask before it is up. */
void kube_claims_init(struct kube_claims *kc);
/* The client reads go through from now on (borrowed: free every user of the
 * source, which cancels its reads, before the client). */
void kube_claims_set_kube(struct kube_claims *kc, struct kube *kube);
