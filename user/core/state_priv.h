/* What the files of the claim state share and nothing outside it sees:
 * struct state, the claim records (struct entry and its block), and the steps
 * one file calls in another. The state is one module in three files:
 * state.c the records and the changes, state_checkpoint.c the checkpoint's
 * JSON, state_load.c the restart. Its public API is state.h; include this
 * header only from user/core/state*.c, after core/state.h, whose types it
 * uses (including state.h here would read as an include circle to
 * tools/check-layers.py).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cpuset.h"
#include "lib/hashtab.h"

struct json_object;

#define CHECKPOINT_NAME "checkpoint.json"
#define CHECKPOINT_VERSION 1
#define CHECKPOINT_MAX (64 * 1024 * 1024)

/* A claim and its checkpoint record, serialized once per change so that
 * writing the checkpoint is a concatenation, not a re-encoding.
 *
 *   struct entry   c: the claim handed out ---------------+
 *                  data ---> struct block                  | points into
 *                            results[n_results]  <---------+
 *                            consumers[n_consumers]
 *                            CPU words of each result (and of the union
 *                              when it has several results, or none)
 *                            strings, NUL-terminated
 *                            record text (no NUL)
 *
 * Two allocations per claim: the entry, because it stays where it is while
 * the claim is prepared (callers may hold c across a change and read the new
 * values), and one block for everything c points to, replaced as a whole by
 * a change (entry_update). */
struct block {
	uint32_t record_off; /* from the start of the block */
	uint32_t record_len; /* one JSON object, no comma; 0: none (load) */
};

struct entry {
	struct state_claim c;
	struct block *data;
};

struct observer {
	state_observer_fn fn;
	void *ud;
};

struct state {
	char *cdi_dir, *state_dir, *checkpoint;
	struct cpuset allocatable;
	struct cpuset offline; /* by CPU hotplug since start (state_set_offline) */
	struct cpuset rt_cpus;	  /* where real-time claims live */
	struct cpuset isolated;	  /* allocatable, never shared */
	struct cpuset prepared;	  /* union of claims (real-time ones aside) */
	struct cpuset quarantine; /* CPUs of specs we could not honour */
	struct hashtab claims;	  /* uid -> struct entry, keyed by its c.uid */
	struct observer observers[8];
	int n_observers;
	state_guard_fn guard;
	void *guard_ud;
	bool dirty; /* the record holds changes the checkpoint file does not */
};

static inline const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

/* state.c */
int state_entry_new(const struct state_claim *c, bool encode, struct entry **ret);
void state_entry_free(struct entry *e);
int state_write_checkpoint(struct state *s);
void state_notify(struct state *s, enum state_event ev, const struct state_claim *c);
int state_consumers_check(const struct state_consumer *v, int n);

/* state_checkpoint.c: claim c as its checkpoint entry. */
int state_claim_json(const struct state_claim *c, struct json_object **ret);
