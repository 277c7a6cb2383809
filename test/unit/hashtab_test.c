/* hashtab: put/get/del, replace, growth, tombstone churn, collisions, caps. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/hashtab.h"

#define N 5000

/* Values are addresses in this array: stable, distinct, never NULL. */
static int vals[N];

static uint64_t same_hash(const void *key, size_t len)
{
	return 7; /* every key on one probe path */
}

static uint64_t low_bits_zero(const void *key, size_t len)
{
	uint64_t h = 0;

	memcpy(&h, key, len < sizeof(h) ? len : sizeof(h));
	return h << 20; /* distinct hashes that share every slot index */
}

static void key_of(int i, char *k, size_t size)
{
	(void)snprintf(k, size, "claim-%08d-%d", i, i * 7919);
}

static void test_hashtab_put_get_del_strings(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	void *old = NULL;

	assert_null(hashtab_get_str(&t, "a")); /* empty, no slots yet */
	assert_null(hashtab_del_str(&t, "a"));
	assert_int_equal(hashtab_put_str(&t, "a", &vals[0], NULL), 0);
	assert_int_equal(hashtab_put_str(&t, "a-much-longer-key-than-a-slot", &vals[1], NULL), 0);
	assert_int_equal(hashtab_put_str(&t, "", &vals[2], NULL), 0); /* empty key is a key */
	assert_int_equal(hashtab_count(&t), 3);
	assert_ptr_equal(hashtab_get_str(&t, "a"), &vals[0]);
	assert_ptr_equal(hashtab_get_str(&t, "a-much-longer-key-than-a-slot"), &vals[1]);
	assert_ptr_equal(hashtab_get_str(&t, ""), &vals[2]);
	assert_null(hashtab_get_str(&t, "b"));
	assert_null(hashtab_get_str(&t, "a-much-longer-key-than-a-slo"));
	/* replace reports the old value and does not count twice */
	assert_int_equal(hashtab_put_str(&t, "a", &vals[3], &old), 1);
	assert_ptr_equal(old, &vals[0]);
	assert_int_equal(hashtab_count(&t), 3);
	assert_ptr_equal(hashtab_del_str(&t, "a"), &vals[3]);
	assert_null(hashtab_get_str(&t, "a"));
	assert_null(hashtab_del_str(&t, "a"));
	assert_int_equal(hashtab_count(&t), 2);
	hashtab_done(&t);
	assert_int_equal(hashtab_count(&t), 0);
	assert_null(hashtab_get_str(&t, ""));
}

static void test_hashtab_key_is_copied(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	char k[64];

	(void)snprintf(k, sizeof(k), "%s", "a-key-longer-than-eight-bytes");
	assert_int_equal(hashtab_put_str(&t, k, &vals[0], NULL), 0);
	k[0] = 'X';
	assert_null(hashtab_get_str(&t, k));
	assert_ptr_equal(hashtab_get_str(&t, "a-key-longer-than-eight-bytes"), &vals[0]);
	hashtab_done(&t);
}

/* A borrowing table reads keys where the values keep them: a replacement
 * moves the entry to the new value's key, so the old one may be freed (ASan
 * sees any read of it), and a deleted entry's key is never read again. */
static void test_hashtab_borrowed_keys_are_the_values_own(void **st)
{
	static const char id[] = "a-key-longer-than-eight-bytes";
	struct hashtab t;
	char *k1 = strdup(id), *k2 = strdup(id), *k3 = strdup("short"), probe[64];
	static char more[64][32];
	void *old = NULL;

	assert_true(k1 && k2 && k3);
	hashtab_init_borrowing(&t, 0);
	assert_int_equal(hashtab_put_str(&t, k1, k1, NULL), 0);
	assert_int_equal(hashtab_put_str(&t, k3, k3, NULL), 0);
	(void)snprintf(probe, sizeof(probe), "%s", id); /* found by bytes, not address */
	assert_ptr_equal(hashtab_get_str(&t, probe), k1);
	assert_int_equal(hashtab_put_str(&t, k2, k2, &old), 1);
	assert_ptr_equal(old, k1);
	free(k1);
	assert_ptr_equal(hashtab_get_str(&t, probe), k2);
	assert_ptr_equal(hashtab_del_str(&t, "short"), k3);
	free(k3);
	/* a rebuild over the dead entry must not read its freed key */
	for (int i = 0; i < 64; i++) {
		key_of(i, more[i], sizeof(more[i]));
		assert_int_equal(hashtab_put_str(&t, more[i], &vals[i], NULL), 0);
	}
	assert_ptr_equal(hashtab_get_str(&t, probe), k2);
	assert_null(hashtab_get_str(&t, "short"));
	assert_int_equal(hashtab_count(&t), 65);
	hashtab_done(&t);
	assert_true(t.borrow_keys); /* still borrowing when used again */
	free(k2);
}

static void test_hashtab_u64_keys(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);

	for (uint64_t i = 0; i < 1000; i++)
		assert_int_equal(hashtab_put_u64(&t, i << 32 | (i * 3), &vals[i], NULL), 0);
	for (uint64_t i = 0; i < 1000; i++)
		assert_ptr_equal(hashtab_get_u64(&t, i << 32 | (i * 3)), &vals[i]);
	assert_null(hashtab_get_u64(&t, 1));
	for (uint64_t i = 0; i < 1000; i += 2)
		assert_ptr_equal(hashtab_del_u64(&t, i << 32 | (i * 3)), &vals[i]);
	for (uint64_t i = 0; i < 1000; i++)
		if (i % 2)
			assert_ptr_equal(hashtab_get_u64(&t, i << 32 | (i * 3)), &vals[i]);
		else
			assert_null(hashtab_get_u64(&t, i << 32 | (i * 3)));
	/* bytes are bytes: an 8-byte string is not the u64 with the same bits */
	assert_int_equal(hashtab_count(&t), 500);
	hashtab_done(&t);
}

static void test_hashtab_grows_and_keeps_every_entry(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	char k[64];
	size_t last_size = 0;
	int grew = 0;

	for (int i = 0; i < N; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
		if (t.size != last_size) {
			grew++;
			last_size = t.size;
		}
		/* never more than half the slots in use */
		assert_true(2 * t.used <= t.size);
	}
	assert_true(grew >= 8);
	assert_int_equal(hashtab_count(&t), N);
	for (int i = 0; i < N; i++) {
		key_of(i, k, sizeof(k));
		assert_ptr_equal(hashtab_get_str(&t, k), &vals[i]);
	}
	hashtab_done(&t);
}

static void test_hashtab_delete_reinsert_churn_stays_bounded(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	char k[64];
	for (int i = 0; i < 100; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
	}
	/* a sliding window of 100 live keys over 100000 inserts: tombstones are
	 * swept by rebuilds, the table does not grow with the inserts */
	for (int i = 100; i < 100000; i++) {
		key_of(i - 100, k, sizeof(k));
		assert_ptr_equal(hashtab_del_str(&t, k), &vals[(i - 100) % N]);
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i % N], NULL), 0);
		assert_true(2 * t.used <= t.size);
		assert_true(t.size <= 8 * (hashtab_count(&t) + 1));
	}
	assert_int_equal(hashtab_count(&t), 100);
	for (int i = 99900; i < 100000; i++) {
		key_of(i, k, sizeof(k));
		assert_ptr_equal(hashtab_get_str(&t, k), &vals[i % N]);
	}
	key_of(99899, k, sizeof(k));
	assert_null(hashtab_get_str(&t, k));
	hashtab_done(&t);
}

static void test_hashtab_reinsert_after_delete_reuses_the_key(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);

	assert_int_equal(hashtab_put_str(&t, "x", &vals[0], NULL), 0);
	assert_ptr_equal(hashtab_del_str(&t, "x"), &vals[0]);
	assert_int_equal(hashtab_put_str(&t, "x", &vals[1], NULL), 0); /* new, not replace */
	assert_ptr_equal(hashtab_get_str(&t, "x"), &vals[1]);
	assert_int_equal(hashtab_count(&t), 1);
	hashtab_done(&t);
}

static void check_all_collide(uint64_t (*hash)(const void *, size_t))
{
	struct hashtab t = HASHTAB_INIT(0);
	char k[64];

	t.hash = hash;
	for (int i = 0; i < 300; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
	}
	/* delete every third from the middle of the one long probe path */
	for (int i = 0; i < 300; i += 3) {
		key_of(i, k, sizeof(k));
		assert_ptr_equal(hashtab_del_str(&t, k), &vals[i]);
	}
	for (int i = 0; i < 300; i++) {
		key_of(i, k, sizeof(k));
		if (i % 3)
			assert_ptr_equal(hashtab_get_str(&t, k), &vals[i]);
		else
			assert_null(hashtab_get_str(&t, k));
	}
	/* re-insert into the tombstones */
	for (int i = 0; i < 300; i += 3) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i + 1000], NULL), 0);
	}
	assert_int_equal(hashtab_count(&t), 300);
	for (int i = 0; i < 300; i++) {
		key_of(i, k, sizeof(k));
		assert_ptr_equal(hashtab_get_str(&t, k), &vals[i % 3 ? i : i + 1000]);
	}
	hashtab_done(&t);
}

static void test_hashtab_many_collisions(void **st)
{
	check_all_collide(same_hash);
	check_all_collide(low_bits_zero);
}

static void test_hashtab_cap_refuses_new_keys_not_replacements(void **st)
{
	struct hashtab t;

	hashtab_init(&t, 2);
	assert_int_equal(hashtab_put_str(&t, "a", &vals[0], NULL), 0);
	assert_int_equal(hashtab_put_str(&t, "b", &vals[1], NULL), 0);
	assert_int_equal(hashtab_put_str(&t, "c", &vals[2], NULL), -E2BIG);
	assert_null(hashtab_get_str(&t, "c"));
	assert_int_equal(hashtab_put_str(&t, "a", &vals[3], NULL), 1);
	assert_ptr_equal(hashtab_del_str(&t, "b"), &vals[1]);
	assert_int_equal(hashtab_put_str(&t, "c", &vals[2], NULL), 0);
	assert_int_equal(hashtab_count(&t), 2);
	hashtab_done(&t);
}

static void test_hashtab_walk_sees_each_once_and_may_delete(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	static bool seen[N];
	char k[64];
	int *v, count = 0;

	for (int i = 0; i < 1000; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
	}
	HASHTAB_FOREACH(v, &t)
	{
		int i = (int)(v - vals);

		assert_false(seen[i]);
		seen[i] = true;
		count++;
		if (i % 2 == 0) { /* delete the current entry mid-walk */
			key_of(i, k, sizeof(k));
			assert_ptr_equal(hashtab_del_str(&t, k), v);
		}
	}
	assert_int_equal(count, 1000);
	assert_int_equal(hashtab_count(&t), 500);
	count = 0;
	HASHTAB_FOREACH(v, &t)
	{
		assert_true((v - vals) % 2 == 1);
		count++;
	}
	assert_int_equal(count, 500);
	hashtab_done(&t);
	HASHTAB_FOREACH(v, &t)
		fail_msg("an emptied table yielded a value");
}

static void test_hashtab_walks_in_insertion_order(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);
	char k[64];
	int *v, last = -1, count = 0;

	for (int i = 0; i < 1000; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
	}
	/* deletes, a replace (keeps its place) and rebuilds in between */
	for (int i = 0; i < 1000; i += 3) {
		key_of(i, k, sizeof(k));
		assert_ptr_equal(hashtab_del_str(&t, k), &vals[i]);
	}
	key_of(500, k, sizeof(k));
	assert_int_equal(hashtab_put_str(&t, k, &vals[500], NULL), 1);
	for (int i = 1000; i < 3000; i++) {
		key_of(i, k, sizeof(k));
		assert_int_equal(hashtab_put_str(&t, k, &vals[i], NULL), 0);
	}
	HASHTAB_FOREACH(v, &t)
	{
		int i = (int)(v - vals);

		assert_true(i > last);
		assert_true(i >= 1000 || i % 3 != 0);
		last = i;
		count++;
	}
	assert_int_equal(count, (int)hashtab_count(&t));
	hashtab_done(&t);
}

static void test_hashtab_binary_keys_with_nuls(void **st)
{
	struct hashtab t = HASHTAB_INIT(0);

	/* ("a","bc") and ("ab","c") joined with NULs are different keys */
	assert_int_equal(hashtab_put(&t, "a\0bc", 4, &vals[0], NULL), 0);
	assert_int_equal(hashtab_put(&t, "ab\0c", 4, &vals[1], NULL), 0);
	assert_ptr_equal(hashtab_get(&t, "a\0bc", 4), &vals[0]);
	assert_ptr_equal(hashtab_get(&t, "ab\0c", 4), &vals[1]);
	assert_null(hashtab_get(&t, "a", 1));
	hashtab_done(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hashtab_put_get_del_strings),
		cmocka_unit_test(test_hashtab_key_is_copied),
		cmocka_unit_test(test_hashtab_borrowed_keys_are_the_values_own),
		cmocka_unit_test(test_hashtab_u64_keys),
		cmocka_unit_test(test_hashtab_grows_and_keeps_every_entry),
		cmocka_unit_test(test_hashtab_delete_reinsert_churn_stays_bounded),
		cmocka_unit_test(test_hashtab_reinsert_after_delete_reuses_the_key),
		cmocka_unit_test(test_hashtab_many_collisions),
		cmocka_unit_test(test_hashtab_cap_refuses_new_keys_not_replacements),
		cmocka_unit_test(test_hashtab_walk_sees_each_once_and_may_delete),
		cmocka_unit_test(test_hashtab_walks_in_insertion_order),
		cmocka_unit_test(test_hashtab_binary_keys_with_nuls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
