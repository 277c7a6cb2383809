/* dra_health: what the kubelet is told about the health of our devices, and
 * what happens to prepared claims when CPUs go offline. NodeWatchResources
 * streams (v1 and v1alpha1 DRAResourceHealth) get a snapshot of every device
 * when they open, on every hotplug change (dra_set_online()) and every
 * HEALTH_RESEND_S; a claim that holds a CPU which went offline is named once
 * and kept there (never moved). Apart from dra.c, which is Prepare and
 * Unprepare: nothing here decides or commits a claim. See dra.h.
 */
#include "kubelet/dra.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#define LOG_MOD "dra"
#include "core/devices.h"
#include "core/prepare.h"
#include "core/state.h"
#include "host/topo.h"
#include "kubelet/dra_priv.h"
#include "kubelet/grpc.h"
#include "kubelet_dra_health_v1alpha1.pb-c.h"
#include "lib/cpuset.h"
#include "lib/log.h"
#include "obs/metrics.h"

#define HEALTH_TIMEOUT_S 20

/* ---- health ---------------------------------------------------------------------------- */

/* The CPUs online now: the hotplug view when the daemon gave one. */
static const struct cpuset *online_now(const struct dra *d)
{
	return d->has_online ? &d->online : &d->topo->online;
}

struct held {
	const struct cpuset *off; /* offline CPUs of the device */
	struct cpuset cpus;	  /* of those, the ones held by claims */
	char who[256];		  /* "ns/name, ns/name" (the first few) */
	int n;
};

static int find_holders(void *ud, const struct state_claim *c)
{
	struct held *h = ud;
	struct cpuset both;
	size_t len = strlen(h->who);

	cpuset_and(&both, cpuset_from_view(&c->cpus, &both), h->off);
	if (cpuset_is_empty(&both))
		return 0;
	cpuset_or(&h->cpus, &h->cpus, &both);
	/* names are cut to fit: the message has a limit of its own */
	if (h->n++ < 3 && len + 2 < sizeof(h->who) &&
	    snprintf(h->who + len, sizeof(h->who) - len, "%s%.63s/%.60s", len ? ", " : "",
		     c->ns[0] ? c->ns : "?", c->name[0] ? c->name : c->uid) < 0)
		h->who[len] = 0;
	return 0;
}

/* Health and message of one device. A CPU device whose CPU is offline is
 * unhealthy; a group is unhealthy when a prepared claim holds one of its
 * offline CPUs (such a claim keeps its CPUs: they are never moved), and
 * says how many CPUs it has left when only free ones went. */
static bool device_health(struct dra *d, const struct device *dev, char *msg, size_t size)
{
	struct cpuset cpus, off;
	struct held h = { .off = &off };
	char list[256], hl[256];

	device_cpus(dev, &cpus);
	cpuset_andnot(&off, &cpus, online_now(d));
	if (cpuset_is_empty(&off)) {
		(void)snprintf(msg, size, "ok");
		return true;
	}
	(void)state_foreach_claim(d->state, find_holders, &h);
	(void)cpuset_format(&off, list, sizeof(list));
	if (dev->kind == DEVICE_CPU || dev->kind == DEVICE_RT) {
		(void)snprintf(msg, size, "CPU %d is offline%s%s%s", dev->id,
			       h.n ? " (prepared for claim " : "", h.n ? h.who : "",
			       h.n ? "; kept there, not moved)" : "");
		return false;
	}
	if (cpuset_is_empty(&h.cpus)) {
		(void)snprintf(msg, size, "CPUs %s are offline; %d of its %d CPUs remain", list,
			       cpuset_count(&cpus) - cpuset_count(&off), cpuset_count(&cpus));
		return true;
	}
	(void)cpuset_format(&h.cpus, hl, sizeof(hl));
	(void)snprintf(msg, size,
		       "CPUs %s are offline; CPUs %s are prepared for claim%s %s%s and stay "
		       "with %s, not moved",
		       list, hl, h.n > 1 ? "s" : "", h.who, h.n > 3 ? ", ..." : "",
		       h.n > 1 ? "them" : "it");
	return false;
}

/* One complete snapshot of every device, packed once for every stream it
 * goes to. v1 and the renamed v1alpha1 share messages and field numbers, so
 * one encoding serves both services (the tests decode it with the v1 types).
 * Each stream gets it with grpc_call_send_latest(): a peer that does not read
 * holds the newest snapshot, not one per change (dra_cpu_health_updates_
 * coalesced_total), and the gRPC server bounds how many streams a peer holds.
 * only: that stream, or NULL for all. */
static void health_send(struct dra *d, struct health_stream *only)
{
	V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	size_t n = (size_t)d->devices->n;
	V1alpha1__DeviceHealth *h = calloc(n + 1, sizeof(*h));
	V1alpha1__DeviceHealth **hp = calloc(n + 1, sizeof(*hp));
	V1alpha1__DeviceIdentifier *ids = calloc(n + 1, sizeof(*ids));
	char (*msgs)[DRA_HEALTH_MESSAGE_MAX + 1] = calloc(n + 1, sizeof(*msgs));
	time_t now = time(NULL);
	uint8_t *buf = NULL;
	size_t len;

	if (!h || !hp || !ids || !msgs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct device *dev = &d->devices->v[i];
		bool ok = device_health(d, dev, msgs[i], sizeof(msgs[i]));

		v1alpha1__device_health__init(&h[i]);
		v1alpha1__device_identifier__init(&ids[i]);
		ids[i].pool_name = d->node;
		ids[i].device_name = (char *)dev->name;
		h[i].device = &ids[i];
		h[i].health = ok ? V1ALPHA1__HEALTH_STATUS__HEALTHY
				 : V1ALPHA1__HEALTH_STATUS__UNHEALTHY;
		h[i].message = msgs[i];
		h[i].last_updated_time = now;
		h[i].health_check_timeout_seconds = HEALTH_TIMEOUT_S;
		hp[i] = &h[i];
	}
	resp.n_devices = n;
	resp.devices = hp;
	len = protobuf_c_message_get_packed_size(&resp.base);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	(void)protobuf_c_message_pack(&resp.base, buf);
	for (struct health_stream *hs = only ? only : d->streams, *next; hs; hs = next) {
		next = only ? NULL : hs->next; /* a stream reset while sending frees hs */
		if (grpc_call_send_latest(hs->call, buf, len) == 1)
			metric_add(d->health_coalesced, 1);
	}
out:
	free(buf);
	free(h);
	free(hp);
	free(ids);
	free(msgs);
}

static void health_unlink(struct health_stream *hs)
{
	for (struct health_stream **pp = &hs->dra->streams; *pp; pp = &(*pp)->next)
		if (*pp == hs) {
			*pp = hs->next;
			return;
		}
}

static void on_health_cancel(struct grpc_call *call, void *ud)
{
	struct health_stream *hs = ud;

	health_unlink(hs);
	metric_add(hs->dra->g_health_streams, -1);
	free(hs); /* the call handle ends when this returns */
}

void dra_on_health_timer(evutil_socket_t fd, short what, void *ud)
{
	struct dra *d = ud;

	if (d->streams)
		health_send(d, NULL);
}

void dra_handle_watch_resources(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	struct dra *d = ud;
	struct health_stream *hs = calloc(1, sizeof(*hs));

	if (!hs) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	hs->call = call;
	hs->dra = d;
	hs->next = d->streams;
	d->streams = hs;
	metric_add(d->g_health_streams, 1);
	grpc_call_on_cancel(call, on_health_cancel, hs);
	health_send(d, hs);
}

struct offline_walk {
	struct dra *d;
	struct cpuset online;
};

static int report_offline_claim(void *ud, const struct state_claim *c)
{
	struct offline_walk *w = ud;
	const struct dra_report_ops *ops = w->d->o.report;
	struct cpuset off;
	char list[256];

	cpuset_andnot(&off, cpuset_from_view(&c->cpus, &off), &w->online);
	if (cpuset_is_empty(&off))
		return 0;
	(void)cpuset_format(&off, list, sizeof(list));
	log_warn("claim_cpus_offline", "claim=%s/%s uid=%s offline=%s action=kept_not_moved",
		 log_quote(c->ns), log_quote(c->name), c->uid, list);
	if (ops && ops->offline)
		ops->offline(w->d->o.report_ud, c, &off);
	return 1;
}

static int count_offline_claims(void *ud, const struct state_claim *c)
{
	struct dra *d = ud;
	struct cpuset off;

	cpuset_andnot(&off, cpuset_from_view(&c->cpus, &off), &d->online);
	metric_add(d->g_claims_offline, !cpuset_is_empty(&off));
	return 0;
}

void dra_set_online(struct dra *d, const struct cpuset *online)
{
	struct cpuset went;

	if (d->has_online && cpuset_equal(&d->online, online))
		return;
	/* Claims that hold a CPU that just went offline are named once. */
	cpuset_andnot(&went, online_now(d), online);
	if (!cpuset_is_empty(&went)) {
		struct offline_walk w = { .d = d, .online = *online };

		(void)state_foreach_claim(d->state, report_offline_claim, &w);
	}
	d->online = *online;
	d->has_online = true;
	prepare_set_online(d->prepare, online);
	metric_set(d->g_claims_offline, 0);
	(void)state_foreach_claim(d->state, count_offline_claims, d);
	if (d->streams)
		health_send(d, NULL);
}
