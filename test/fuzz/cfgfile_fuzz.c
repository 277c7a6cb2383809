/* Configuration file reader: any bytes either parse into at most
 * CFGFILE_KEYS_MAX typed entries or fail with a reason; never a crash, a
 * leak or a read past the input. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "cmd/cfgfile.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfgfile *f = NULL;
	struct errbuf eb = {};
	int r = cfgfile_parse((const char *)data, size, &f, &eb);

	if (r < 0) {
		assert(!f && eb.s[0]);
		return 0;
	}
	assert(f && f->n <= CFGFILE_KEYS_MAX);
	for (int i = 0; i < f->n; i++) {
		assert(f->v[i].key[0] && f->v[i].line >= 1);
		assert(strlen(f->v[i].value) <= CFGFILE_VALUE_MAX);
	}
	cfgfile_free(f);
	return 0;
}
