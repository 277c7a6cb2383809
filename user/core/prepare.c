/* The Prepare policy. See prepare.h. */
#include "core/prepare.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define LOG_MOD "prepare"
#include "core/allocator.h"
#include "core/cdi.h"
#include "core/claim.h"
#include "core/devices.h"
#include "core/metadata.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/quantity.h"

struct prepare {
	struct prepare_opts o;
	struct alloc_topo *alloc;
	bool has_online;      /* prepare_set_online() was called */
	struct cpuset online; /* then: the CPUs online now */
};

/* A claim refused: the kubelet shows the text (errbuf keeps it valid UTF-8,
 * which the proto3 string it travels in requires). */
#define perr(eb, ...) errbuf_fail((eb), -EINVAL, __VA_ARGS__)

static const struct cpuset *online_now(const struct prepare *p)
{
	return p->has_online ? &p->online : &p->o.topo->online;
}

/* ---- deciding CPUs ----------------------------------------------------------------- */

static enum alloc_policy to_alloc_policy(enum claim_policy p)
{
	switch (p) {
	case CLAIM_POLICY_SPREAD_CORES:
		return ALLOC_SPREAD_CORES;
	case CLAIM_POLICY_DISTRIBUTED:
		return ALLOC_DISTRIBUTED;
	default:
		return ALLOC_PACKED;
	}
}

/* The CPUs a cpuset override names, checked the way the reference driver
 * checks them: online, not reserved, inside the device, as many as the
 * request consumed, not used by another result of the claim, and free. */
static int pick_exact(struct prepare *p, const struct claim_result *r, const struct device *dev,
		      int64_t count, const struct cpuset *taken, struct cpuset *out,
		      struct errbuf *err)
{
	struct cpuset want, bad, group, pool, reserved;
	char list[256];

	if (cpuset_parse(r->cpuset, &want, NULL) < 0)
		return perr(err, "request %s: cpuConfig.cpuset is not a CPU list", r->request);
	cpuset_andnot(&bad, &want, online_now(p));
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return perr(err, "request %s: cpuset %s: CPUs %s are not online", r->request,
			    r->cpuset, list);
	}
	cpuset_andnot(&reserved, &p->o.topo->online, state_allocatable(p->o.state));
	cpuset_and(&bad, &want, &reserved);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return perr(err, "request %s: cpuset %s: CPUs %s are reserved (--reserved-cpus)",
			    r->request, r->cpuset, list);
	}
	device_cpus(dev, &group);
	cpuset_andnot(&bad, &want, &group);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return perr(err, "request %s: cpuset %s: CPUs %s are not in device %s", r->request,
			    r->cpuset, list, r->device);
	}
	if (cpuset_count(&want) != count)
		return perr(err,
			    "request %s: cpuset %s has %d CPUs, the allocation consumed %lld "
			    "(dra.cpu/cpu \"%s\")",
			    r->request, r->cpuset, cpuset_count(&want), (long long)count,
			    r->consumed);
	cpuset_and(&bad, &want, taken);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return perr(err, "request %s: cpuset %s: CPUs %s are used by another device of the "
				 "claim",
			    r->request, r->cpuset, list);
	}
	state_unclaimed(p->o.state, &pool);
	cpuset_andnot(&bad, &want, &pool);
	if (!cpuset_is_empty(&bad)) {
		(void)cpuset_format(&bad, list, sizeof(list));
		return perr(err, "request %s: cpuset %s: CPUs %s are held by another claim",
			    r->request, r->cpuset, list);
	}
	*out = want;
	return 0;
}

/* CPUs for one result of a grouped claim, chosen inside the device's group
 * among CPUs nobody holds and this claim has not picked yet. */
static int pick_grouped(struct prepare *p, const struct claim_result *r, const struct cpuset *taken,
			struct cpuset *out, struct errbuf *err)
{
	const struct device *dev = devices_find(p->o.devices, r->device);
	struct cpuset avail, group, reserved;
	struct alloc_opts ao = { 0 };
	struct errbuf why = { "" }, qwhy = { "" };
	int64_t count;
	int rc;

	if (!dev)
		return perr(err, "device %s (request %s) is not a device of this node", r->device,
			    r->request);
	if (!r->consumed[0])
		return perr(err,
			    "result for request %s has no consumedCapacity[\"dra.cpu/cpu\"]: the "
			    "cluster needs the DRAConsumableCapacity feature",
			    r->request);
	rc = quantity_parse_count(r->consumed, dev->n_cpus, &count, &qwhy);
	if (rc < 0)
		return perr(err, "request %s: dra.cpu/cpu %s (device %s has %d CPUs)", r->request,
			    qwhy.s, r->device, dev->n_cpus);
	if (r->cpuset[0])
		return pick_exact(p, r, dev, count, taken, out, err);
	device_cpus(dev, &group);
	state_unclaimed(p->o.state, &avail);
	cpuset_and(&avail, &avail, &group);
	cpuset_and(&avail, &avail, online_now(p)); /* never a CPU that went offline */
	cpuset_andnot(&avail, &avail, taken);
	if (cpuset_count(&avail) < count)
		return perr(err, "request %s: dra.cpu/cpu \"%s\" is more than the %d CPUs %s has free",
			    r->request, r->consumed, cpuset_count(&avail), r->device);
	cpuset_andnot(&reserved, &p->o.topo->online, state_allocatable(p->o.state));
	ao.policy = to_alloc_policy(r->config.policy);
	/* alignL3 defaults on for packed only: kubelet refuses uncore alignment
	 * with the spread and distributed policies, so only an explicit request
	 * for that combination is an error. */
	ao.align_l3 = r->config.align_l3_set ? r->config.align_l3
					     : ao.policy == ALLOC_PACKED;
	ao.full_cores = r->config.full_cores;
	/* claims with and without fullCores share the device: whole cores only
	 * for the first, broken cores first for the second (allocation.md 7.4) */
	ao.strict_cores = ao.spare_cores = true;
	ao.reserved = &reserved;
	rc = alloc_take(p->alloc, &avail, (int)count, &ao, out, &why);
	if (rc < 0)
		return perr(err, "request %s: %s", r->request, why.s);
	return 0;
}

/* A claim prepared before is prepared again only to what it holds: the same
 * results in the same order (request, device, CPU count), each one's CPUs
 * inside its device. A claim restored from its CDI spec alone has no record
 * of its results: then its CPUs must be as many as asked and inside the
 * devices. Anything else is another allocation (the claim was deallocated
 * and allocated again while the kubelet still had it prepared): refused, so
 * the pod never runs on CPUs that were not allocated to it. */
static int check_same_allocation(struct prepare *p, const struct prepare_request *rq,
				 const struct state_claim *have, struct errbuf *err)
{
	struct cpuset within, held;
	int64_t total = 0;
	char list[128];

	cpuset_zero(&within);
	if (have->n_results && have->n_results != rq->alloc->n)
		return perr(err,
			    "claim is already prepared with %d results, its allocation now has %d: "
			    "unprepare it before preparing it again",
			    have->n_results, rq->alloc->n);
	for (int i = 0; i < rq->alloc->n; i++) {
		const struct claim_result *cr = &rq->alloc->results[i];
		const struct device *dev = devices_find(p->o.devices, cr->device);
		struct errbuf qwhy = { "" };
		struct cpuset cpus;
		int64_t count = 1;

		if (!dev)
			return perr(err, "device %s (request %s) is not a device of this node",
				    cr->device, cr->request);
		if (p->o.devices->kind != DEVICE_CPU &&
		    quantity_parse_count(cr->consumed, dev->n_cpus, &count, &qwhy) < 0)
			return perr(err, "request %s: dra.cpu/cpu %s", cr->request, qwhy.s);
		device_cpus(dev, &cpus);
		cpuset_or(&within, &within, &cpus);
		total += count;
		if (have->n_results) {
			const struct state_result *sr = &have->results[i];
			struct cpuset named, got;

			(void)cpuset_from_view(&sr->cpus, &got);
			if (cr->cpuset[0] && cpuset_parse(cr->cpuset, &named, NULL) == 0 &&
			    !cpuset_equal(&named, &got))
				return perr(err,
					    "claim is already prepared with other CPUs for request %s "
					    "than its cpuset %s: unprepare it before preparing it again",
					    cr->request, cr->cpuset);
			if (strcmp(sr->request, cr->request) != 0 ||
			    strcmp(sr->device, cr->device) != 0 ||
			    cpuset_count(&got) != count || !cpuset_is_subset(&got, &cpus))
				return perr(err,
					    "claim is already prepared with another allocation (request "
					    "%s: %d CPUs of %s, now request %s: %lld of %s): unprepare "
					    "it before preparing it again",
					    sr->request, cpuset_count(&got), sr->device,
					    cr->request, (long long)count, cr->device);
		}
	}
	(void)cpuset_from_view(&have->cpus, &held);
	if (cpuset_count(&held) != total || !cpuset_is_subset(&held, &within)) {
		(void)cpuset_format(&held, list, sizeof(list));
		return perr(err,
			    "claim is already prepared with CPUs %s, which its allocation (%lld CPUs) "
			    "does not name: unprepare it before preparing it again",
			    list, (long long)total);
	}
	return 0;
}

/* The metadata files of a claim (device_metadata on): one per base
 * request, its devices with their slice attributes and, grouped, the CPUs
 * each result holds (held[i], -1 for individual devices). */
static int write_metadata(struct prepare *p, const struct prepare_request *rq, const int64_t *held,
			  struct errbuf *err)
{
	struct metadata_opts mo = { .data_dir = p->o.data_dir, .cdi_dir = p->o.cdi_dir,
				    .driver = p->o.driver, .pool = p->o.pool };
	struct json_object *attrs[CLAIM_MAX_RESULTS] = { 0 };
	struct metadata_claim *mc = calloc(1, sizeof(*mc));
	struct errbuf why = { "" };
	int r = 0;

	if (!mc)
		return perr(err, "out of memory");
	mc->ns = rq->ns;
	mc->name = rq->name;
	mc->uid = rq->uid;
	mc->pod_claim_name = rq->alloc->pod_claim_name;
	for (int i = 0; i < rq->alloc->n && r >= 0; i++) {
		const struct claim_result *cr = &rq->alloc->results[i];
		size_t base = metadata_base_len(cr->request);
		struct metadata_request *mr = NULL;

		/* results of one base request share its file */
		for (int k = 0; k < mc->n; k++)
			if (metadata_base_len(mc->requests[k].name) == base &&
			    !strncmp(mc->requests[k].name, cr->request, base))
				mr = &mc->requests[k];
		if (!mr) {
			mr = &mc->requests[mc->n++];
			mr->name = cr->request;
		}
		if (p->o.device_attributes)
			r = p->o.device_attributes(p->o.attributes_ud, cr->device, &attrs[i]);
		mr->devices[mr->n++] = (struct metadata_device){ .name = cr->device,
								 .attributes = attrs[i],
								 .allocated_cpus = held[i] };
	}
	if (r >= 0)
		r = metadata_write(&mo, mc, &why);
	for (int i = 0; i < rq->alloc->n; i++)
		if (attrs[i])
			(void)json_object_put(attrs[i]);
	free(mc);
	if (r < 0)
		return perr(err, "writing the device metadata: %s",
			    why.s[0] ? why.s : strerror(-r));
	return 0;
}

static void remove_metadata(struct prepare *p, const char *uid)
{
	struct metadata_opts mo = { .data_dir = p->o.data_dir, .cdi_dir = p->o.cdi_dir,
				    .driver = p->o.driver, .pool = p->o.pool };

	(void)metadata_remove(&mo, uid, NULL);
}

/* What the container of the claim gets beside its CPUs: one container holds
 * all of a claim, so any result asking decides. */
static unsigned claim_flags(const struct prepare *p, const struct prepare_request *rq)
{
	unsigned flags = 0;

	for (int i = 0; i < rq->alloc->n; i++) {
		const struct claim_config *cc = &rq->alloc->results[i].config;

		if (cc->memory == CLAIM_MEMORY_LOCAL ||
		    (cc->memory == CLAIM_MEMORY_DEFAULT && p->o.memory_local))
			flags |= STATE_CLAIM_MEMORY_LOCAL;
		if (cc->shared_pool)
			flags |= STATE_CLAIM_SHARED_POOL;
		if (cc->irq == CLAIM_IRQ_ISOLATE)
			flags |= STATE_CLAIM_IRQ_ISOLATE;
		else if (cc->irq == CLAIM_IRQ_KEEP)
			flags |= STATE_CLAIM_IRQ_KEEP;
	}
	return flags;
}

/* ---- real-time claims ---------------------------------------------------------------- */

/* Does the claim name a real-time device? Then all of it must be real-time. */
static bool is_rt_claim(const struct prepare *p, const struct prepare_request *rq)
{
	for (int i = 0; i < rq->alloc->n; i++) {
		const struct device *dev = devices_find(p->o.devices, rq->alloc->results[i].device);

		if (dev && dev->kind == DEVICE_RT)
			return true;
	}
	return false;
}

/* A fresh state record for result cr, named as the claim names it. */
static int result_init(const struct claim_result *cr, struct state_result *sr, struct errbuf *err)
{
	memset(sr, 0, sizeof(*sr));
	if (strlen(cr->request) >= STATE_REQUEST_MAX || strlen(cr->device) >= STATE_DEVICE_MAX)
		return perr(err, "request or device name too long");
	sr->request = cr->request; /* borrowed: state copies them */
	sr->device = cr->device;
	return 0;
}

/* The results of a real-time claim as state records them, each checked:
 * a real-time device, the claim's one budget, within the kernel's limits
 * and within what the result consumes. res[i].cpus is a view of sets[i]. */
static int rt_results(struct prepare *p, const struct prepare_request *rq, struct state_result *res,
		      struct cpuset *sets, struct rt_budget *ret_budget, struct errbuf *err)
{
	const struct rt_limits *l = p->o.rt;
	const struct rt_budget *b = NULL;
	struct cpuset taken;
	struct errbuf why = { "" };

	cpuset_zero(&taken);
	for (int i = 0; i < rq->alloc->n; i++) {
		const struct claim_result *cr = &rq->alloc->results[i];
		const struct device *dev = devices_find(p->o.devices, cr->device);
		struct state_result *sr = &res[i];
		int64_t milli;

		if (!dev)
			return perr(err, "device %s (request %s) is not a device of this node",
				    cr->device, cr->request);
		if (dev->kind != DEVICE_RT || !l)
			return perr(err,
				    "request %s: device %s is not a real-time CPU: a claim's devices "
				    "must all be real-time CPUs or none",
				    cr->request, cr->device);
		if (!cr->config.rt_set)
			return perr(err,
				    "request %s: device %s is a real-time CPU: the claim needs a "
				    "CPUConfig with \"realtime\" (docs/realtime.md)",
				    cr->request, cr->device);
		if (b && !rt_budget_equal(b, &cr->config.rt))
			return perr(err, "request %s: every request of a real-time claim must "
					     "carry the same CPUConfig.realtime",
				    cr->request);
		b = &cr->config.rt;
		if (rt_budget_check(b, l, &why) < 0)
			return perr(err, "request %s: %s", cr->request, why.s);
		if (!cr->rt_consumed[0])
			return perr(err,
				    "result for request %s has no consumedCapacity[\"%s\"]: the "
				    "cluster needs the DRAConsumableCapacity feature",
				    cr->request, RT_CAPACITY_KEY);
		if (rt_milli_parse(cr->rt_consumed, &milli, &why) < 0)
			return perr(err, "request %s: %s %s", cr->request, RT_CAPACITY_KEY,
				    why.s);
		if (milli > dev->rt_capacity_milli)
			return perr(err, "request %s: %s \"%s\" is more than device %s has",
				    cr->request, RT_CAPACITY_KEY, cr->rt_consumed, cr->device);
		if (rt_budget_fits(b, milli, l, cr->device, &why) < 0)
			return perr(err, "request %s: %s", cr->request, why.s);
		if (cpuset_has(&taken, dev->id))
			return perr(err, "device %s is allocated twice in the claim",
				    cr->device);
		cpuset_set(&taken, dev->id);
		if (result_init(cr, sr, err) < 0)
			return -EINVAL;
		cpuset_zero(&sets[i]);
		cpuset_set(&sets[i], dev->id);
		sr->cpus = cpuset_view(&sets[i]);
		sr->rt_milli = milli;
	}
	if (!b) /* claim_parse() never yields an empty allocation */
		return perr(err, "the allocation has no results");
	*ret_budget = *b;
	return 0;
}

/* A real-time claim prepared again: the same devices, bandwidth and budget
 * (or, restored from its CDI spec alone, the same CPUs). */
static int check_same_rt(const struct prepare_request *rq, const struct state_claim *have,
			 const struct state_result *res, const struct rt_budget *b, struct errbuf *err)
{
	struct cpuset cpus, held;

	cpuset_zero(&cpus);
	for (int i = 0; i < rq->alloc->n; i++)
		cpuset_or_view(&cpus, &res[i].cpus);
	if (!have->rt)
		return perr(err, "claim is already prepared as an ordinary claim: unprepare it "
				     "before preparing it again");
	if (have->n_results == 0)
		return cpuset_equal(cpuset_from_view(&have->cpus, &held), &cpus)
			       ? 0
			       : perr(err, "claim is already prepared on other real-time CPUs: "
					       "unprepare it before preparing it again");
	if (have->n_results != rq->alloc->n || !rt_budget_equal(&have->budget, b))
		return perr(err, "claim is already prepared with another real-time budget or "
				     "devices: unprepare it before preparing it again");
	for (int i = 0; i < rq->alloc->n; i++)
		if (strcmp(have->results[i].device, res[i].device) != 0 ||
		    strcmp(have->results[i].request, res[i].request) != 0 ||
		    have->results[i].rt_milli != res[i].rt_milli)
			return perr(err,
				    "claim is already prepared with %s of %s, now %s: unprepare it "
				    "before preparing it again",
				    have->results[i].device, have->results[i].request, res[i].device);
	return 0;
}

/* A claim prepared again (another pod of a shared claim, or a claim restored
 * without its consumers): this read of its consumers is newer. */
static void record_consumers(struct prepare *p, const struct prepare_request *rq)
{
	int r = state_claim_set_consumers(p->o.state, rq->uid, rq->ns, rq->name, rq->consumers,
					  rq->n_consumers);

	if (r < 0)
		log_warn_errno(r, "claim_consumers_not_recorded",
			       "claim=%s/%s uid=%s action=next_read_retries", rq->ns, rq->name,
			       rq->uid);
}

static int decide_rt(struct prepare *p, const struct prepare_request *rq, const struct state_claim *have,
		     struct prepare_result *ret, struct errbuf *err)
{
	const struct rt_limits *l = p->o.rt;
	struct state_result res[CLAIM_MAX_RESULTS];
	struct cpuset sets[CLAIM_MAX_RESULTS], held;
	struct state_claim c;
	struct errbuf why = { "" };
	char list[256], have_q[32], cap_q[32], want_q[32];
	int r;

	memset(&c, 0, sizeof(c));
	r = rt_results(p, rq, res, sets, &c.budget, err);
	if (r < 0)
		return r;
	if (have) {
		r = check_same_rt(rq, have, res, &c.budget, err);
		if (r == 0) {
			record_consumers(p, rq);
			*ret = (struct prepare_result){ .again = true, .rt = true };
		}
		return r;
	}
	/* The scheduler admitted it against the published capacity; the claims
	 * prepared here are what the kernel will be asked for. */
	for (int i = 0; i < rq->alloc->n; i++) {
		int cpu = cpuset_first(&sets[i]);
		int64_t used = rt_cpu_used_milli(p->o.state, cpu, l);

		if (used + res[i].rt_milli > l->capacity_milli) {
			rt_milli_format(used, have_q, sizeof(have_q));
			rt_milli_format(l->capacity_milli, cap_q, sizeof(cap_q));
			rt_milli_format(res[i].rt_milli, want_q, sizeof(want_q));
			return perr(err,
				    "request %s: %s %s does not fit on %s: the real-time claims "
				    "prepared on it hold %s of %s",
				    res[i].request, RT_CAPACITY_KEY, want_q, res[i].device, have_q,
				    cap_q);
		}
	}
	memcpy(c.uid, rq->uid, strlen(rq->uid) + 1); /* length checked by prepare_claim() */
	c.ns = rq->ns;
	c.name = rq->name;
	c.rt = true;
	/* The irq choice only: the container of a real-time claim gets its CPU
	 * alone, never the shared pool, and the runtime's memory nodes. */
	c.flags = claim_flags(p, rq) & (STATE_CLAIM_IRQ_ISOLATE | STATE_CLAIM_IRQ_KEEP);
	c.n_results = rq->alloc->n;
	c.results = res;
	c.consumers_known = true;
	c.consumers = rq->consumers;
	c.n_consumers = rq->n_consumers;
	r = state_claim_add(p->o.state, &c, &why);
	if (r < 0)
		return perr(err, "%s", why.s);
	(void)cpuset_format(cpuset_from_view(&state_claim(p->o.state, rq->uid)->cpus, &held), list,
			    sizeof(list));
	log_info("claim_prepared", "claim=%s/%s uid=%s cpus=%s results=%d realtime=%s",
		 rq->ns, rq->name, rq->uid, list, rq->alloc->n, rt_policy_name(c.budget.policy));
	*ret = (struct prepare_result){ .rt = true, .n_cpus = cpuset_count(&held) };
	return 0;
}

/* An ordinary claim prepared again: the same allocation as the one held
 * (have), its metadata written again (the retry repairs metadata a crash or
 * a hand removed) and this newer read of its consumers recorded. */
static int decide_again(struct prepare *p, const struct prepare_request *rq,
			const struct state_claim *have, struct prepare_result *ret,
			struct errbuf *err)
{
	struct cpuset taken;
	int r;

	r = check_same_allocation(p, rq, have, err);
	if (r >= 0 && p->o.device_metadata) {
		int64_t held[CLAIM_MAX_RESULTS];

		for (int i = 0; i < rq->alloc->n; i++)
			held[i] = p->o.devices->kind == DEVICE_CPU ? -1
				  : have->n_results ? cpuset_count(cpuset_from_view(
							      &have->results[i].cpus, &taken))
						    : -1;
		r = write_metadata(p, rq, held, err);
	}
	if (r >= 0) {
		record_consumers(p, rq);
		*ret = (struct prepare_result){ .again = true };
	}
	return r;
}

/* The CPUs of result cr into *ret: its device's CPU where devices are CPUs,
 * otherwise a group picked for it (or the external allocator's cpuset).
 * taken: what the claim's earlier results hold. */
static int pick_result(struct prepare *p, const struct claim_result *cr,
		       const struct cpuset *taken, struct cpuset *ret, struct errbuf *err)
{
	if (p->o.devices->kind == DEVICE_CPU) {
		const struct device *dev = devices_find(p->o.devices, cr->device);

		if (!dev)
			return perr(err, "device %s (request %s) is not a device of this node",
				    cr->device, cr->request);
		if (cr->cpuset[0])
			return perr(err,
				    "request %s: a cpuset override (cpuConfig.cpuset) needs "
				    "grouped devices; device %s is one CPU",
				    cr->request, cr->device);
		if (!cpuset_has(online_now(p), dev->id))
			return perr(err, "device %s (request %s): CPU %d is offline", cr->device,
				    cr->request, dev->id);
		cpuset_zero(ret);
		cpuset_set(ret, dev->id);
		if (cpuset_has(taken, dev->id))
			return perr(err, "device %s is allocated twice in the claim", cr->device);
		return 0;
	}
	if (p->o.external_allocator && !cr->cpuset[0])
		return perr(err,
			    "request %s names no cpuset: this node's CPUs are picked by "
			    "an external allocator (allocator: external), which must put "
			    "them in the claim's opaque CPUConfig cpuset",
			    cr->request);
	return pick_grouped(p, cr, taken, ret, err);
}

/* The results of a new ordinary claim as state records them: res[i].cpus a
 * view of sets[i], their union into *ret_taken. */
static int pick_results(struct prepare *p, const struct prepare_request *rq,
			struct state_result *res, struct cpuset *sets, struct cpuset *ret_taken,
			struct errbuf *err)
{
	struct cpuset taken;
	int r;

	cpuset_zero(&taken);
	for (int i = 0; i < rq->alloc->n; i++) {
		const struct claim_result *cr = &rq->alloc->results[i];
		const struct device *dev;

		r = result_init(cr, &res[i], err);
		if (r < 0)
			return r;
		dev = devices_find(p->o.devices, cr->device);
		if (dev && claim_isolation_check(cr, dev->isolated, err) < 0)
			return -EINVAL;
		r = pick_result(p, cr, &taken, &sets[i], err);
		if (r < 0)
			return r;
		cpuset_or(&taken, &taken, &sets[i]);
		res[i].cpus = cpuset_view(&sets[i]);
	}
	*ret_taken = taken;
	return 0;
}

/* Decides and commits a claim, or says in err why not. */
static int decide(struct prepare *p, const struct prepare_request *rq, struct prepare_result *ret,
		  struct errbuf *err)
{
	const struct state_claim *have = state_claim(p->o.state, rq->uid);
	struct state_result res[CLAIM_MAX_RESULTS];
	struct cpuset sets[CLAIM_MAX_RESULTS], taken;
	struct state_claim c;
	struct errbuf why = { "" };
	char list[256];
	int r;

	if (is_rt_claim(p, rq))
		return decide_rt(p, rq, have, ret, err);
	if (have && have->rt)
		return perr(err, "claim is already prepared as a real-time claim: unprepare it "
				     "before preparing it again");
	if (have)
		return decide_again(p, rq, have, ret, err);
	r = pick_results(p, rq, res, sets, &taken, err);
	if (r < 0)
		return r;

	/* Metadata before the commit: a committed claim always has it. */
	if (p->o.device_metadata) {
		int64_t held[CLAIM_MAX_RESULTS];

		for (int i = 0; i < rq->alloc->n; i++)
			held[i] = p->o.devices->kind == DEVICE_CPU ? -1 : cpuset_count(&sets[i]);
		r = write_metadata(p, rq, held, err);
		if (r < 0)
			return r;
	}
	memset(&c, 0, sizeof(c));
	memcpy(c.uid, rq->uid, strlen(rq->uid) + 1); /* length checked by prepare_claim() */
	c.ns = rq->ns;
	c.name = rq->name;
	c.flags = claim_flags(p, rq);
	c.n_results = rq->alloc->n;
	c.results = res;
	c.consumers_known = true;
	c.consumers = rq->consumers;
	c.n_consumers = rq->n_consumers;
	r = state_claim_add(p->o.state, &c, &why);
	if (r < 0 && p->o.device_metadata)
		remove_metadata(p, rq->uid);
	if (r == -EBUSY && p->o.devices->kind == DEVICE_CPU)
		return perr(err, "overlapping device assignment: %s", why.s);
	if (r < 0)
		return perr(err, "%s", why.s);
	(void)cpuset_format(&taken, list, sizeof(list));
	log_info("claim_prepared", "claim=%s/%s uid=%s cpus=%s results=%d", rq->ns, rq->name,
		 rq->uid, list, rq->alloc->n);
	*ret = (struct prepare_result){ .n_cpus = cpuset_count(&taken) };
	return 0;
}


/* ---- lifecycle ------------------------------------------------------------------------ */

int prepare_new(const struct prepare_opts *o, struct prepare **ret)
{
	_cleanup_(prepare_freep) struct prepare *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	if (!o->state || !o->topo || !o->devices)
		return -EINVAL;
	p->o = *o;
	r = alloc_topo_from_topo(o->topo, &p->alloc);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

struct prepare *prepare_free(struct prepare *p)
{
	if (!p)
		return NULL;
	alloc_topo_free(p->alloc);
	free(p);
	return NULL;
}

void prepare_set_online(struct prepare *p, const struct cpuset *online)
{
	p->online = *online;
	p->has_online = true;
}

int prepare_claim(struct prepare *p, const struct prepare_request *rq, struct prepare_result *ret,
		  struct errbuf *err)
{
	if (!rq->alloc || strlen(rq->uid) >= CDI_UID_MAX)
		return perr(err, "claim uid is not one this driver can keep");
	return decide(p, rq, ret, err);
}
