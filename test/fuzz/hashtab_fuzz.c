/* hashtab: any sequence of put/del/get/walk agrees with a plain list of the
 * same entries, in the same (insertion) order, whatever the keys (NUL bytes,
 * empty, long) and however many collide. Input: records of [op][len][len key bytes]; the low bit of the
 * first byte picks FNV-1a or a hash that sends every key to one slot. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hashtab.h"

#define MODEL_MAX 512

struct entry {
	unsigned char key[64];
	size_t len;
	int *value;
};

static int values[MODEL_MAX * 4];

static uint64_t one_slot(const void *key, size_t len)
{
	return 42;
}

static struct entry *model_find(struct entry *m, size_t n, const void *key, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].len == len && memcmp(m[i].key, key, len) == 0)
			return &m[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct entry model[MODEL_MAX];
	struct hashtab t = HASHTAB_INIT(MODEL_MAX);
	size_t n = 0, i = 1, next_value = 0;
	int *v;

	if (size == 0)
		return 0;
	if (data[0] & 1)
		t.hash = one_slot;
	while (i + 2 <= size && next_value < sizeof(values) / sizeof(values[0])) {
		uint8_t op = data[i] % 4;
		size_t len = data[i + 1] % 64;
		const uint8_t *key = data + i + 2;
		struct entry *e;
		void *old = NULL;
		int r;

		if (i + 2 + len > size)
			break;
		i += 2 + len;
		e = model_find(model, n, key, len);
		switch (op) {
		case 0: /* put */
			v = &values[next_value++];
			r = hashtab_put(&t, key, len, v, &old);
			if (e) {
				assert(r == 1 && old == e->value);
				e->value = v;
			} else if (n == MODEL_MAX) {
				assert(r == -E2BIG);
			} else {
				assert(r == 0);
				memcpy(model[n].key, key, len);
				model[n].len = len;
				model[n++].value = v;
			}
			break;
		case 1: /* del */
			v = hashtab_del(&t, key, len);
			assert(v == (e ? e->value : NULL));
			if (e) {
				memmove(e, e + 1, sizeof(*e) * (size_t)(model + n - (e + 1)));
				n--;
			}
			break;
		case 2: /* get */
			assert(hashtab_get(&t, key, len) == (e ? e->value : NULL));
			break;
		default: { /* walk: every live value once, in insertion order */
			size_t seen = 0;

			HASHTAB_FOREACH(v, &t)
			{
				assert(seen < n && model[seen].value == v);
				seen++;
			}
			assert(seen == n);
			break;
		}
		}
		assert(hashtab_count(&t) == n);
		assert(2 * t.used <= t.size || t.size == 0);
	}
	for (size_t k = 0; k < n; k++)
		assert(hashtab_get(&t, model[k].key, model[k].len) == model[k].value);
	hashtab_done(&t);
	return 0;
}
