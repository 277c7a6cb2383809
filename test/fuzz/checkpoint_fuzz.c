/* Checkpoint parser: never crashes; every entry it accepts has a valid uid
 * and at most STATE_MAX_RESULTS results. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/state.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check(void *ud, const struct state_claim *c)
{
	assert(cdi_uid_valid(c->uid) == 0);
	assert(c->n_results >= 0 && c->n_results <= STATE_MAX_RESULTS);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf why = { "" };

	if (state_checkpoint_parse((const char *)data, size, check, NULL, &why) < 0)
		assert(why.s[0]);
	return 0;
}
