/* claimsource: where the kubelet plugin and the NRI consumer checks read a
 * ResourceClaim from. Core owns the interface; kube/claims.h implements it
 * over the API client (GET with its retry policy); tests lend fakes. The two
 * users sit in sibling layers of the API client and never see it.
 *
 *	r = claimsource_start(src, "default", "claim-1", 5000, on_claim, pc, &pc->fetch);
 *	...
 *	claimsource_cancel(src, pc->fetch);   (only while on_claim has not run)
 *
 * Contract: cb runs exactly once, later, on the loop (never from inside
 * start), unless cancel runs first; then it never runs.
 */
#pragma once

#include <stdint.h>

struct json_object;

/* A read's answer: claim borrowed for the callback only; on failure claim is
 * NULL and err says why (HTTP status or transport error). */
typedef void (*claimsource_cb)(void *cb_ud, struct json_object *claim, const char *err);

struct claimsource {
	/* Starts reading namespace/name (both already checked Kubernetes
	 * names). timeout_ms bounds the whole read, retries and any Retry-After
	 * wait included; the caller cancels it then in any case. Returns 0 and
	 * a handle in *ret, or -errno (cb never runs then). */
	int (*start)(void *ud, const char *ns, const char *name, int64_t timeout_ms,
		     claimsource_cb cb, void *cb_ud, void **ret);
	/* Stops a read whose callback has not run: it never runs. */
	void (*cancel)(void *ud, void *handle);
	void *ud;
};

static inline int claimsource_start(const struct claimsource *s, const char *ns, const char *name,
				    int64_t timeout_ms, claimsource_cb cb, void *cb_ud, void **ret)
{
	return s->start(s->ud, ns, name, timeout_ms, cb, cb_ud, ret);
}

static inline void claimsource_cancel(const struct claimsource *s, void *handle)
{
	s->cancel(s->ud, handle);
}

/* Has s both operations? */
static inline int claimsource_is_valid(const struct claimsource *s)
{
	return s && s->start && s->cancel;
}
