/* The hash table. See hashtab.h.
 *
 * A slot is empty (value NULL), a tombstone (value == &tomb) or live. Keys of
 * up to 8 bytes (a uint64_t, a short name) live in the slot; longer ones in
 * one heap copy each. The full 64-bit hash is kept so that a probe compares
 * keys only on a hash match and a rebuild never hashes a key again.
 */
#include "lib/hashtab.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lib/hash.h"

#define HASHTAB_MIN_SIZE 16

struct hashtab_slot {
	uint64_t hash;
	void *value;
	size_t len;
	union {
		char *p;
		unsigned char b[sizeof(char *)];
	} key;
};

static char tomb;

static bool is_live(const struct hashtab_slot *s)
{
	return s->value && s->value != &tomb;
}

static const void *slot_key(const struct hashtab_slot *s)
{
	return s->len <= sizeof(s->key.b) ? (const void *)s->key.b : s->key.p;
}

static void slot_drop_key(struct hashtab_slot *s)
{
	if (s->len > sizeof(s->key.b))
		free(s->key.p);
}

static uint64_t hash_of(const struct hashtab *t, const void *key, size_t len)
{
	return t->hash ? t->hash(key, len) : hash_bytes(HASH_INIT, key, len);
}

void hashtab_init(struct hashtab *t, size_t max)
{
	*t = HASHTAB_INIT(max);
}

void hashtab_done(struct hashtab *t)
{
	for (size_t i = 0; i < t->size; i++)
		if (is_live(&t->slots[i]))
			slot_drop_key(&t->slots[i]);
	free(t->slots);
	t->slots = NULL;
	t->size = t->n = t->used = 0;
}

/* The slot holding key, or NULL. */
static struct hashtab_slot *find(const struct hashtab *t, uint64_t h, const void *key, size_t len)
{
	size_t mask = t->size - 1;

	if (!t->size)
		return NULL;
	/* Ends: the table is never more than half used, so an empty slot comes. */
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct hashtab_slot *s = &t->slots[i];

		if (!s->value)
			return NULL;
		if (s->value != &tomb && s->hash == h && s->len == len &&
		    memcmp(slot_key(s), key, len) == 0)
			return s;
	}
}

/* The first empty or dead slot on h's probe path (the key is not there). */
static struct hashtab_slot *free_slot(const struct hashtab *t, uint64_t h)
{
	size_t mask = t->size - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask)
		if (!is_live(&t->slots[i]))
			return &t->slots[i];
}

/* Rebuilds into the smallest power of two where n + 1 entries fill at most
 * a third: a third leaves room for size / 6 inserts (or deletes turned into
 * tombstones) before the next rebuild, so rebuilds stay amortized O(1). */
static int rebuild(struct hashtab *t)
{
	size_t size = HASHTAB_MIN_SIZE;
	struct hashtab_slot *slots;

	while (size / 3 < t->n + 1) {
		if (size > SIZE_MAX / 2 / sizeof(*slots))
			return -ENOMEM;
		size *= 2;
	}
	slots = calloc(size, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->size; i++) {
		const struct hashtab_slot *s = &t->slots[i];

		if (is_live(s))
			for (size_t j = s->hash & (size - 1);; j = (j + 1) & (size - 1))
				if (!slots[j].value) {
					slots[j] = *s;
					break;
				}
	}
	free(t->slots);
	t->slots = slots;
	t->size = size;
	t->used = t->n;
	return 0;
}

int hashtab_put(struct hashtab *t, const void *key, size_t len, void *value, void **ret_old)
{
	uint64_t h = hash_of(t, key, len);
	struct hashtab_slot *s = find(t, h, key, len);
	char *copy = NULL;
	int r;

	assert(value && value != &tomb);
	if (s) {
		if (ret_old)
			*ret_old = s->value;
		s->value = value;
		return 1;
	}
	if (t->max && t->n >= t->max)
		return -E2BIG;
	if (len > sizeof(s->key.b)) {
		copy = malloc(len);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, key, len);
	}
	if (2 * (t->used + 1) > t->size) {
		r = rebuild(t);
		if (r < 0) {
			free(copy);
			return r;
		}
	}
	s = free_slot(t, h);
	t->used += !s->value; /* reusing a tombstone adds no used slot */
	t->n++;
	*s = (struct hashtab_slot){ .hash = h, .value = value, .len = len };
	if (copy)
		s->key.p = copy;
	else if (len)
		memcpy(s->key.b, key, len);
	return 0;
}

void *hashtab_get(const struct hashtab *t, const void *key, size_t len)
{
	struct hashtab_slot *s = find(t, hash_of(t, key, len), key, len);

	return s ? s->value : NULL;
}

void *hashtab_del(struct hashtab *t, const void *key, size_t len)
{
	struct hashtab_slot *s = find(t, hash_of(t, key, len), key, len);
	void *v;

	if (!s)
		return NULL;
	v = s->value;
	slot_drop_key(s);
	s->value = &tomb;
	t->n--;
	return v;
}

void *hashtab_next(const struct hashtab *t, size_t *iter)
{
	while (*iter < t->size) {
		const struct hashtab_slot *s = &t->slots[(*iter)++];

		if (is_live(s))
			return s->value;
	}
	return NULL;
}
