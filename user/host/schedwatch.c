/* The real-time capacity, re-read on a timer. See schedwatch.h. */
#include "host/schedwatch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define LOG_MOD "schedwatch"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/log.h"

struct schedwatch {
	struct schedwatch_opts o;
	char *root, *release;
	struct event *timer;
	struct sched_limits now;
	uint64_t changes, failures;
	bool failing; /* the last read failed (logged once) */
};

static int read_now(const struct schedwatch *w, struct sched_limits *ret, struct errbuf *eb)
{
	struct sched_limits_opts so = { .cpus = &w->o.cpus, .headroom_milli = w->o.headroom_milli };

	return sched_limits_read_opts(w->root, w->release, &so, ret, eb);
}

/* Once, when the servers are assumed rather than read. */
static void say_defaults(const struct sched_limits *l)
{
	if (!l->servers_note[0])
		return;
	log_warn("rt_servers_assumed", "reason=%s fair_milli=%lld ext_milli=%lld "
		 "action=\"the kernel's defaults are subtracted; mount debugfs at "
		 "/sys/kernel/debug for the values in effect\"",
		 log_quote(l->servers_note), (long long)l->fair_milli, (long long)l->ext_milli);
}

int schedwatch_poll(struct schedwatch *w)
{
	struct sched_limits l, before;
	struct errbuf eb = { "" };
	int r = read_now(w, &l, &eb);

	if (r < 0) {
		w->failures++;
		if (!w->failing)
			log_warn("rt_limits_unreadable", "error=%s action=\"keeping capacity_milli="
				 "%lld\"", log_quote(errbuf_text(&eb, r)),
				 (long long)w->now.capacity_milli);
		w->failing = true;
		return r;
	}
	if (w->failing)
		log_info("rt_limits_readable", "capacity_milli=%lld", (long long)l.capacity_milli);
	w->failing = false;
	if (!!l.servers_note[0] != !!w->now.servers_note[0] && l.servers_note[0])
		say_defaults(&l);
	before = w->now;
	w->now = l;
	if (sched_limits_same(&l, &before))
		return 0;
	w->changes++;
	log_info("rt_capacity_changed", "capacity_milli=%lld before=%lld servers_milli=%lld "
		 "fair_milli=%lld ext_milli=%lld headroom_milli=%lld",
		 (long long)l.capacity_milli, (long long)before.capacity_milli,
		 (long long)l.servers_milli, (long long)l.fair_milli, (long long)l.ext_milli,
		 (long long)l.headroom_milli);
	if (w->o.on_change)
		w->o.on_change(w->o.ud, &w->now, &before);
	return 1;
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	(void)schedwatch_poll(ud);
}

int schedwatch_new(struct event_base *base, const struct schedwatch_opts *o,
		   struct schedwatch **ret, struct errbuf *eb)
{
	_cleanup_(schedwatch_freep) struct schedwatch *w = calloc(1, sizeof(*w));
	int period = o->period_ms == 0 ? SCHEDWATCH_PERIOD_MS : o->period_ms;
	int r;

	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->root = strdup(o->root ? o->root : "");
	w->release = o->release ? strdup(o->release) : NULL;
	if (!w->root || (o->release && !w->release))
		return -ENOMEM;
	r = read_now(w, &w->now, eb);
	if (r < 0)
		return r;
	say_defaults(&w->now);
	if (period > 0) {
		struct timeval tv = clock_tv_ms(period);

		w->timer = event_new(base, -1, EV_PERSIST, on_timer, w);
		if (!w->timer || event_add(w->timer, &tv) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(w);
	return 0;
}

const struct sched_limits *schedwatch_limits(const struct schedwatch *w)
{
	return &w->now;
}

uint64_t schedwatch_changes(const struct schedwatch *w)
{
	return w->changes;
}

uint64_t schedwatch_failures(const struct schedwatch *w)
{
	return w->failures;
}

struct schedwatch *schedwatch_free(struct schedwatch *w)
{
	if (!w)
		return NULL;
	if (w->timer)
		event_free(w->timer);
	free(w->root);
	free(w->release);
	free(w);
	return NULL;
}
