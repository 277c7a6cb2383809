/* The kernel's isolated CPUs, re-read on a timer. See isolwatch.h. */
#include "host/isolwatch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define LOG_MOD "isol"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/log.h"

struct isolwatch {
	struct isolwatch_opts o;
	char *root;
	struct event *timer;
	struct isol now;
	uint64_t changes, failures;
	bool failing; /* the last read failed (logged once) */
};

static void log_changed(const struct isol *before, const struct isol *now)
{
	char a[256], b[256], dm[256], nz[256], pt[256];

	(void)cpuset_format(&now->isolated, a, sizeof(a));
	(void)cpuset_format(&before->isolated, b, sizeof(b));
	(void)cpuset_format(&now->domain, dm, sizeof(dm));
	(void)cpuset_format(&now->nohz_full, nz, sizeof(nz));
	(void)cpuset_format(&now->partition, pt, sizeof(pt));
	log_info("isolated_cpus_changed", "isolated=%s before=%s domain=%s nohz_full=%s "
		 "partitions=%s", a[0] ? a : "none", b[0] ? b : "none", dm[0] ? dm : "none",
		 nz[0] ? nz : "none", pt[0] ? pt : "none");
}

int isolwatch_poll(struct isolwatch *w)
{
	struct isol l, before;
	struct errbuf eb = { "" };
	int r = isol_read(w->root, &l, &eb);

	if (r < 0) {
		w->failures++;
		if (!w->failing)
			log_warn("isolation_unreadable", "error=%s action=keeping_the_last_lists",
				 log_quote(errbuf_text(&eb, r)));
		w->failing = true;
		return r;
	}
	if (w->failing)
		log_info("isolation_readable", "");
	w->failing = false;
	if (isol_same(&l, &w->now))
		return 0;
	before = w->now;
	w->now = l;
	w->changes++;
	log_changed(&before, &w->now);
	if (w->o.on_change)
		w->o.on_change(w->o.ud, &w->now, &before);
	return 1;
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	(void)isolwatch_poll(ud);
}

int isolwatch_new(struct event_base *base, const struct isolwatch_opts *o,
		  const struct isol *start, struct isolwatch **ret)
{
	_cleanup_(isolwatch_freep) struct isolwatch *w = calloc(1, sizeof(*w));
	int period = o->period_ms == 0 ? ISOLWATCH_PERIOD_MS : o->period_ms;

	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->now = *start;
	w->root = strdup(o->root ? o->root : "");
	if (!w->root)
		return -ENOMEM;
	if (period > 0) {
		struct timeval tv = clock_tv_ms(period);

		w->timer = event_new(base, -1, EV_PERSIST, on_timer, w);
		if (!w->timer || event_add(w->timer, &tv) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(w);
	return 0;
}

uint64_t isolwatch_changes(const struct isolwatch *w)
{
	return w->changes;
}

uint64_t isolwatch_failures(const struct isolwatch *w)
{
	return w->failures;
}

struct isolwatch *isolwatch_free(struct isolwatch *w)
{
	if (!w)
		return NULL;
	if (w->timer)
		event_free(w->timer);
	free(w->root);
	free(w);
	return NULL;
}
