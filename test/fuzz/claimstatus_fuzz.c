/* The claim the API server returned, against the status.devices entries we
 * would write: the input is "<claim JSON>\n<entries JSON>" (either half may
 * be anything). Never crashes or leaks; a claim whose status.devices is the
 * entries themselves is always current. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/claimstatus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct json_object *parse(const uint8_t *p, size_t n)
{
	struct json_tokener *tok = json_tokener_new_ex(32);
	struct json_object *o;

	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, (const char *)p, (int)n);
	json_tokener_free(tok);
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t first = nl ? (size_t)(nl - data) : size;
	struct json_object *claim, *want, *self, *st;

	if (size > 1 << 16)
		return 0;
	claim = parse(data, first);
	want = nl ? parse(nl + 1, size - first - 1) : NULL;
	(void)claimstatus_is_current("dra.cpu", claim, want);
	/* the entries, stored as they are, are current when each is ours,
	 * unique and Ready/Prepared with data: never a crash either way */
	if (json_object_is_type(want, json_type_array)) {
		self = json_object_new_object();
		st = json_object_new_object();
		json_object_object_add(self, "status", st);
		json_object_object_add(st, "devices", json_object_get(want));
		(void)claimstatus_is_current("dra.cpu", self, want);
		json_object_put(self);
	}
	json_object_put(claim);
	json_object_put(want);
	return 0;
}
