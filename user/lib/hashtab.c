/* The hash table. See hashtab.h.
 *
 *   index[size]    0: empty; else 1 + the position of an entry in entries
 *   entries[cap]   used of them, in insertion order; cap = size / 2
 *
 * An index slot that points at a dead entry (value NULL) is a tombstone: a
 * probe passes it, an insert may take it. A rebuild copies the live entries
 * to the front of a new array, in order, and indexes them again. Keys of up
 * to 8 bytes (a uint64_t, a short name) live in the entry; longer ones in
 * one heap copy each. A borrowing table keeps only a pointer to every key,
 * short or long: it is the caller's, and a dead entry's is never read again
 * (probes and rebuilds look at live entries only). The full 64-bit hash is
 * kept so that a probe compares keys only on a hash match and a rebuild
 * never hashes a key again.
 */
#include "lib/hashtab.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "lib/hash.h"

#define HASHTAB_MIN_SIZE 16

struct hashtab_entry {
	uint64_t hash;
	void *value; /* NULL: deleted */
	size_t len;
	union {
		char *p;	 /* our copy */
		const void *ref; /* the caller's (borrow_keys) */
		unsigned char b[sizeof(char *)];
	} key;
};

static const void *entry_key(const struct hashtab *t, const struct hashtab_entry *e)
{
	if (t->borrow_keys)
		return e->key.ref;
	return e->len <= sizeof(e->key.b) ? (const void *)e->key.b : e->key.p;
}

static void entry_drop_key(const struct hashtab *t, struct hashtab_entry *e)
{
	if (!t->borrow_keys && e->len > sizeof(e->key.b))
		free(e->key.p);
}

static uint64_t hash_of(const struct hashtab *t, const void *key, size_t len)
{
	return t->hash ? t->hash(key, len) : hash_bytes(HASH_INIT, key, len);
}

void hashtab_init(struct hashtab *t, size_t max)
{
	*t = HASHTAB_INIT(max);
}

void hashtab_init_borrowing(struct hashtab *t, size_t max)
{
	*t = HASHTAB_INIT(max);
	t->borrow_keys = true;
}

void hashtab_done(struct hashtab *t)
{
	for (size_t i = 0; i < t->used; i++)
		if (t->entries[i].value)
			entry_drop_key(t, &t->entries[i]);
	free(t->entries);
	free(t->index);
	t->entries = NULL;
	t->index = NULL;
	t->size = t->n = t->used = 0;
}

/* The index slot holding key, or NULL. */
static uint32_t *find(const struct hashtab *t, uint64_t h, const void *key, size_t len)
{
	size_t mask = t->size - 1;

	if (!t->size)
		return NULL;
	/* Ends: at most size / 2 slots are taken, so an empty one comes. */
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		const struct hashtab_entry *e;

		if (!t->index[i])
			return NULL;
		e = &t->entries[t->index[i] - 1];
		if (e->value && e->hash == h && e->len == len && memcmp(entry_key(t, e), key, len) == 0)
			return &t->index[i];
	}
}

/* The first empty or dead slot on h's probe path (the key is not there). */
static uint32_t *free_slot(const struct hashtab *t, uint64_t h)
{
	size_t mask = t->size - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask)
		if (!t->index[i] || !t->entries[t->index[i] - 1].value)
			return &t->index[i];
}

/* Rebuilds for n + 1 entries: the smallest power of two where they fill at
 * most a third of the slots, so that size / 6 inserts (or deletes leaving
 * dead entries) pass before the next rebuild and rebuilds stay amortized
 * O(1). The live entries keep their order. */
static int rebuild(struct hashtab *t)
{
	size_t size = HASHTAB_MIN_SIZE, k = 0;
	struct hashtab_entry *entries;
	uint32_t *index;

	while (size / 3 < t->n + 1) {
		if (size > UINT32_MAX / 2)
			return -ENOMEM; /* entry positions are 32-bit */
		size *= 2;
	}
	index = calloc(size, sizeof(*index));
	entries = malloc(size / 2 * sizeof(*entries));
	if (!index || !entries) {
		free(index);
		free(entries);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->used; i++) {
		const struct hashtab_entry *e = &t->entries[i];

		if (!e->value)
			continue;
		entries[k] = *e;
		for (size_t j = e->hash & (size - 1);; j = (j + 1) & (size - 1))
			if (!index[j]) {
				index[j] = (uint32_t)(k + 1);
				break;
			}
		k++;
	}
	free(t->entries);
	free(t->index);
	t->entries = entries;
	t->index = index;
	t->size = size;
	t->used = k;
	return 0;
}

int hashtab_put(struct hashtab *t, const void *key, size_t len, void *value, void **ret_old)
{
	uint64_t h = hash_of(t, key, len);
	uint32_t *slot = find(t, h, key, len);
	struct hashtab_entry *e;
	char *copy = NULL;
	int r;

	assert(value);
	if (slot) {
		e = &t->entries[*slot - 1];
		if (ret_old)
			*ret_old = e->value;
		e->value = value;
		if (t->borrow_keys) /* the old key may go with the old value */
			e->key.ref = key;
		return 1;
	}
	if (t->max && t->n >= t->max)
		return -E2BIG;
	if (!t->borrow_keys && len > sizeof(e->key.b)) {
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
	e = &t->entries[t->used];
	*e = (struct hashtab_entry){ .hash = h, .value = value, .len = len };
	if (t->borrow_keys)
		e->key.ref = key;
	else if (copy)
		e->key.p = copy;
	else if (len)
		memcpy(e->key.b, key, len);
	*free_slot(t, h) = (uint32_t)(++t->used);
	t->n++;
	return 0;
}

void *hashtab_get(const struct hashtab *t, const void *key, size_t len)
{
	uint32_t *slot = find(t, hash_of(t, key, len), key, len);

	return slot ? t->entries[*slot - 1].value : NULL;
}

void *hashtab_del(struct hashtab *t, const void *key, size_t len)
{
	uint32_t *slot = find(t, hash_of(t, key, len), key, len);
	struct hashtab_entry *e;
	void *v;

	if (!slot)
		return NULL;
	/* The slot stays: pointing at a dead entry, it is the tombstone. */
	e = &t->entries[*slot - 1];
	v = e->value;
	entry_drop_key(t, e);
	e->value = NULL;
	t->n--;
	return v;
}

void *hashtab_next(const struct hashtab *t, size_t *iter)
{
	while (*iter < t->used) {
		const struct hashtab_entry *e = &t->entries[(*iter)++];

		if (e->value)
			return e->value;
	}
	return NULL;
}
