/* Checkpoint parser: never crashes; every entry it accepts has a valid uid,
 * at most STATE_MAX_RESULTS results, and consumers only when they are known,
 * at most STATE_MAX_CONSUMERS, each a pod uid and a Kubernetes name. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/claim.h"
#include "core/state.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *ud, const struct state_claim *c)
{
	assert(cdi_uid_valid(c->uid) == 0);
	assert(c->n_results >= 0 && c->n_results <= STATE_MAX_RESULTS);
	assert(c->n_consumers >= 0 && c->n_consumers <= STATE_MAX_CONSUMERS);
	assert(c->consumers_known || c->n_consumers == 0);
	for (int i = 0; i < c->n_consumers; i++)
		assert(cdi_uid_valid(c->consumers[i].uid) == 0 &&
		       claim_name_check(c->consumers[i].name) == 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf why = { "" };

	if (state_checkpoint_parse((const char *)data, size, check, NULL, &why) < 0)
		assert(why.s[0]);
	return 0;
}
