/* Virtual time for libevent timers, for unit tests of state machines that
 * wait (backoff, deadlines, resync delays). Header-only, test code only.
 *
 * The test file wraps event_add event_del event_pending event_free (its
 * first line: see the Makefile's wrap hook). Pure timers (no fd, no signal,
 * no read/write interest) then never reach libevent: they wait here until
 * faketimer_advance() moves the virtual clock past them, and their callbacks
 * run from there in deadline order. Every other event goes to libevent as
 * usual (event_active() is not wrapped: run the loop for those). So "the API
 * failed for ten minutes" takes no time and no test ever sleeps.
 */
#pragma once

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <event2/event.h>

#define FAKETIMER_MAX 1024

struct faketimer {
	struct event *ev;
	int64_t at;	/* virtual ms */
	int64_t period; /* EV_PERSIST: re-armed this much later */
};

static struct {
	int64_t now;
	struct faketimer t[FAKETIMER_MAX];
	int n;
} faketimers;

int __real_event_add(struct event *ev, const struct timeval *tv);
int __real_event_del(struct event *ev);
int __real_event_pending(const struct event *ev, short what, struct timeval *tv);
void __real_event_free(struct event *ev);
int __wrap_event_add(struct event *ev, const struct timeval *tv);
int __wrap_event_del(struct event *ev);
int __wrap_event_pending(const struct event *ev, short what, struct timeval *tv);
void __wrap_event_free(struct event *ev);

static bool faketimer_is_timer(const struct event *ev)
{
	return event_get_fd(ev) == -1 &&
	       !(event_get_events(ev) & (EV_READ | EV_WRITE | EV_SIGNAL));
}

static int faketimer_find(const struct event *ev)
{
	for (int i = 0; i < faketimers.n; i++)
		if (faketimers.t[i].ev == ev)
			return i;
	return -1;
}

static void faketimer_remove(int i)
{
	faketimers.t[i] = faketimers.t[--faketimers.n];
}

int __wrap_event_add(struct event *ev, const struct timeval *tv)
{
	int i;

	if (!tv || !faketimer_is_timer(ev))
		return __real_event_add(ev, tv);
	i = faketimer_find(ev);
	if (i < 0) {
		assert(faketimers.n < FAKETIMER_MAX);
		i = faketimers.n++;
		faketimers.t[i].ev = ev;
	}
	faketimers.t[i].period = (int64_t)tv->tv_sec * 1000 + tv->tv_usec / 1000;
	faketimers.t[i].at = faketimers.now + faketimers.t[i].period;
	return 0;
}

int __wrap_event_del(struct event *ev)
{
	int i = faketimer_find(ev);

	if (i >= 0)
		faketimer_remove(i);
	return __real_event_del(ev);
}

int __wrap_event_pending(const struct event *ev, short what, struct timeval *tv)
{
	if ((what & EV_TIMEOUT) && faketimer_find(ev) >= 0)
		return EV_TIMEOUT;
	return __real_event_pending(ev, what, tv);
}

void __wrap_event_free(struct event *ev)
{
	int i = faketimer_find(ev);

	if (i >= 0)
		faketimer_remove(i);
	__real_event_free(ev);
}

/* Forgets every timer and sets the clock to 0 (between tests). */
static inline void faketimer_reset(void)
{
	memset(&faketimers, 0, sizeof(faketimers));
}

static inline int64_t faketimer_now(void)
{
	return faketimers.now;
}

/* Timers armed. */
static inline int faketimer_count(void)
{
	return faketimers.n;
}

/* Milliseconds until ev fires, or -1 when it is not armed. */
static inline int64_t faketimer_left(const struct event *ev)
{
	int i = faketimer_find(ev);

	return i < 0 ? -1 : faketimers.t[i].at - faketimers.now;
}

/* The armed timer that fires first (NULL: none) and when. */
static inline struct event *faketimer_next(int64_t *ret_at)
{
	int best = -1;

	for (int i = 0; i < faketimers.n; i++)
		if (best < 0 || faketimers.t[i].at < faketimers.t[best].at)
			best = i;
	if (best < 0)
		return NULL;
	if (ret_at)
		*ret_at = faketimers.t[best].at;
	return faketimers.t[best].ev;
}

/* Moves the clock ms forward, running every timer that falls due on the way,
 * earliest first (a callback may arm timers; those due in the window run
 * too). Returns how many callbacks ran. advance(0) runs what is due now. */
static inline int faketimer_advance(int64_t ms)
{
	int64_t end = faketimers.now + ms, at;
	struct event *ev;
	int ran = 0;

	while ((ev = faketimer_next(&at)) && at <= end) {
		int i = faketimer_find(ev);

		faketimers.now = at > faketimers.now ? at : faketimers.now;
		if (event_get_events(ev) & EV_PERSIST)
			faketimers.t[i].at += faketimers.t[i].period > 0 ? faketimers.t[i].period : 1;
		else
			faketimer_remove(i);
		event_get_callback(ev)(event_get_fd(ev), EV_TIMEOUT, event_get_callback_arg(ev));
		ran++;
		assert(ran < 100000); /* a timer re-arming itself at 0 ms forever */
	}
	faketimers.now = end;
	return ran;
}
