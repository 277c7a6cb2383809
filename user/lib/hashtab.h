/* hashtab: the one hash table, from byte-string keys to pointers.
 *
 * Open addressing with linear probing over a power-of-two index of 32-bit
 * slots, pointing into an array of entries kept in insertion order (the
 * layout of CPython's compact dict). Walking visits the entries in the order
 * they were first put, through one dense array: what callers write out
 * (checkpoints, owners files) comes out in a stable order, and a walk over
 * hundreds of objects touches them in the order they were allocated instead
 * of hash order. A delete leaves a dead entry whose slot acts as the
 * tombstone, so deleting while walking is safe and nothing moves except when
 * the table is rebuilt (larger, or the same size to drop dead entries)
 * before live and dead entries pass half the slots: a probe always ends at
 * an empty slot and stays short; get, put and del are O(1) on average.
 *
 * Keys are bytes (a string without its NUL, a uint64_t, or several strings
 * joined with NULs); the table keeps its own copy, so a key may come from a
 * stack buffer. A table made with hashtab_init_borrowing() keeps none: there
 * each key lives in its value (a record's own id), which saves a heap copy
 * per entry. Values are pointers the caller owns and the table only lends
 * back; NULL is not a value (hashtab_get() returns NULL for "absent").
 *
 * The hash is lib/hash.h's FNV-1a. Keys are ours or bounded (see hash.h):
 * nothing here defends against chosen collisions, but max bounds the size.
 *
 * Not thread-safe; no put while walking (it may rebuild the table).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hashtab_entry;

struct hashtab {
	struct hashtab_entry *entries; /* size / 2 of them, used in insertion order */
	uint32_t *index;	       /* size slots: 0 empty, else 1 + entry position */
	size_t size;		       /* slots: 0 or a power of two */
	size_t n;		       /* live entries */
	size_t used;		       /* live and dead entries */
	size_t max;		       /* live entries never exceed this; 0: no cap */
	bool borrow_keys;	       /* keys are the caller's (hashtab_init_borrowing) */
	/* NULL: FNV-1a. Tests set a poor one to force collisions. */
	uint64_t (*hash)(const void *key, size_t len);
};

#define HASHTAB_INIT(m) ((struct hashtab){ .max = (m) })

/* An empty table of at most max entries (0: no cap); allocates nothing. A
 * zero-filled struct hashtab is an empty table without a cap. */
void hashtab_init(struct hashtab *t, size_t max);
/* As hashtab_init(), but the table copies no key: the bytes given to
 * hashtab_put() must stay valid and unchanged while their entry lives, as a
 * key inside its value does. A replacement takes the key given with the new
 * value, so the old value (and its key) may be freed once it is returned.
 * The u64 helpers below pass a copy on the stack: not for such a table. */
void hashtab_init_borrowing(struct hashtab *t, size_t max);
/* Frees the entries and the key copies, not the values; t stays usable, empty. */
void hashtab_done(struct hashtab *t);

/* Maps key to value (not NULL). 0: inserted; 1: replaced an entry, whose old
 * value goes to *ret_old (may be NULL); -E2BIG: t holds max entries already;
 * -ENOMEM. On failure t is unchanged. */
int hashtab_put(struct hashtab *t, const void *key, size_t len, void *value, void **ret_old);
/* The value of key, or NULL. */
void *hashtab_get(const struct hashtab *t, const void *key, size_t len);
/* Removes key; its value, or NULL when absent. */
void *hashtab_del(struct hashtab *t, const void *key, size_t len);

/* Walks the values in insertion order: start with *iter = 0; NULL at the end.
 * hashtab_del() of any entry during the walk is fine; hashtab_put() is not. */
void *hashtab_next(const struct hashtab *t, size_t *iter);

#define HASHTAB_FOREACH(v, t) for (size_t v##_iter_ = 0; ((v) = hashtab_next((t), &v##_iter_));)

static inline size_t hashtab_count(const struct hashtab *t)
{
	return t->n;
}

/* String keys (the bytes without the NUL). */
static inline int hashtab_put_str(struct hashtab *t, const char *key, void *value, void **ret_old)
{
	return hashtab_put(t, key, strlen(key), value, ret_old);
}

static inline void *hashtab_get_str(const struct hashtab *t, const char *key)
{
	return hashtab_get(t, key, strlen(key));
}

static inline void *hashtab_del_str(struct hashtab *t, const char *key)
{
	return hashtab_del(t, key, strlen(key));
}

/* uint64_t keys (host byte order: the table is never written anywhere). */
static inline int hashtab_put_u64(struct hashtab *t, uint64_t key, void *value, void **ret_old)
{
	return hashtab_put(t, &key, sizeof(key), value, ret_old);
}

static inline void *hashtab_get_u64(const struct hashtab *t, uint64_t key)
{
	return hashtab_get(t, &key, sizeof(key));
}

static inline void *hashtab_del_u64(struct hashtab *t, uint64_t key)
{
	return hashtab_del(t, &key, sizeof(key));
}
