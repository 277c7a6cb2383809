/* isolwatch: the kernel's isolated CPUs, followed while the driver runs.
 *
 * Isolation set at boot (isolcpus=, nohz_full=) stays, but cgroup v2
 * isolated cpuset partitions are made and undone at run time, and the
 * kernel tells nobody: no uevent, and the only file that says so
 * (cpuset.cpus.partition) is per cgroup. So the lists (host/isol.h) are read
 * again every period_ms on the loop, and when the caller knows of a moment
 * they may have changed (a CPU came or went): three small files and the
 * command line. A change of what isol_same() compares goes to the callback
 * once, logged (event=isolated_cpus_changed); a read that fails keeps the
 * last lists and is logged once until reads work again.
 *
 *   isolwatch_new(start) ──every period_ms, isolwatch_poll()──> read ──changed──> on_change
 */
#pragma once

#include <stdint.h>

#include "host/isol.h"
#include "lib/cleanup.h"

struct event_base;
struct isolwatch;

/* now: the new lists (borrowed for the call); before: what was in effect. */
typedef void (*isolwatch_fn)(void *ud, const struct isol *now, const struct isol *before);

struct isolwatch_opts {
	const char *root; /* "" or NULL: this machine (isol_read()) */
	int period_ms;	  /* 0: ISOLWATCH_PERIOD_MS; < 0: only isolwatch_poll() */
	isolwatch_fn on_change;
	void *ud;
};

#define ISOLWATCH_PERIOD_MS 5000

/* Starts from start (what the devices were built with: copied) and re-reads
 * on a timer. base and the callback's ud are borrowed. -ENOMEM only. */
int isolwatch_new(struct event_base *base, const struct isolwatch_opts *o,
		  const struct isol *start, struct isolwatch **ret);

/* Reads again now: 1 when the lists changed (the callback ran), 0 when not,
 * < 0 when the read failed (the last lists stay). */
int isolwatch_poll(struct isolwatch *w);

/* Re-reads that found a change, and that failed, since start. */
uint64_t isolwatch_changes(const struct isolwatch *w);
uint64_t isolwatch_failures(const struct isolwatch *w);

/* NULL-safe; returns NULL. */
struct isolwatch *isolwatch_free(struct isolwatch *w);
DEFINE_FREEP(isolwatch, isolwatch_free)
