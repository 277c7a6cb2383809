/* What the API server returned for a slice, against what we sent: the input
 * is "<sent JSON>\n<returned JSON>" (either half may be anything). Never
 * crashes or leaks; the mask only has known bits. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/slices.h"

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
	struct json_object *sent, *got;
	unsigned all = SLICES_FEAT_CONSUMABLE | SLICES_FEAT_NODE_ALLOCATABLE |
		       SLICES_FEAT_LIST_ATTRIBUTES | SLICES_FEAT_OTHER;
	unsigned m;

	if (size > 1 << 16)
		return 0;
	sent = parse(data, first);
	got = nl ? parse(nl + 1, size - first - 1) : NULL;
	m = slices_dropped_features(sent, got);
	assert((m & ~all) == 0);
	/* against itself: at most devices without a name, or a name given twice */
	assert((slices_dropped_features(sent, sent) & ~all) == 0);
	(void)slices_feature_gate((enum slices_feature)m);
	(void)slices_feature_loss((enum slices_feature)m);
	json_object_put(sent);
	json_object_put(got);
	return 0;
}
