/* ResourceClaim parser over arbitrary JSON: never crashes, never reports more
 * results than the cap, always explains a failure. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "core/claim.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_tokener *tok = json_tokener_new_ex(32);
	struct json_object *o;
	struct claim_alloc a;
	struct errbuf err = { "" };

	if (!tok)
		return 0;
	o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	json_tokener_free(tok);
	if (!o)
		return 0;
	if (claim_parse(o, "uid-1", "dra.cpu", "node-1", &a, &err) < 0)
		assert(err.s[0]);
	else
		assert(a.n >= 0 && a.n <= CLAIM_MAX_RESULTS);
	json_object_put(o);
	return 0;
}
