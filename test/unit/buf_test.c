/* wrap: realloc */
/* buf: appends, the cap, freeing on failure, take/reset/truncate. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/cleanup.h"

/* realloc fails when this is true, to reach the -ENOMEM path. */
static bool realloc_fails;

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	if (realloc_fails)
		return NULL;
	return __real_realloc(p, n);
}

static void test_buf_empty_is_an_empty_string(void **st)
{
	struct buf b = BUF_INIT(16);
	char *p;
	size_t len = 99;

	assert_string_equal(buf_str(&b), "");
	assert_int_equal(buf_len(&b), 0);
	p = buf_take(&b, &len);
	assert_non_null(p);
	assert_string_equal(p, "");
	assert_int_equal(len, 0);
	free(p);
}

static void test_buf_appends_and_stays_terminated(void **st)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(1024);

	assert_int_equal(buf_add(&b, "ab", 2), 0);
	assert_int_equal(buf_add_char(&b, 'c'), 0);
	assert_int_equal(buf_add_str(&b, "de"), 0);
	assert_int_equal(buf_addf(&b, "-%d-%s", 42, "x"), 0);
	assert_int_equal(buf_add(&b, NULL, 0), 0);
	assert_string_equal(buf_str(&b), "abcde-42-x");
	assert_int_equal(buf_len(&b), 10);
	assert_int_equal(b.ptr[b.len], 0);
}

static void test_buf_grows_across_many_appends(void **st)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(1 << 20);

	for (int i = 0; i < 10000; i++)
		assert_int_equal(buf_addf(&b, "%04d", i % 10000), 0);
	assert_int_equal(buf_len(&b), 40000);
	assert_memory_equal(b.ptr, "000000010002", 12);
	assert_memory_equal(b.ptr + 39996, "9999", 4);
	assert_true(b.alloc > b.len);
}

static void test_buf_addf_longer_than_room_formats_again(void **st)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(1 << 16);
	char big[5000];

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(buf_add_str(&b, "x"), 0); /* some room, not enough */
	assert_int_equal(buf_addf(&b, "<%s>", big), 0);
	assert_int_equal(buf_len(&b), 1 + 2 + 4999);
	assert_int_equal(b.ptr[1], '<');
	assert_int_equal(b.ptr[b.len - 1], '>');
}

static void test_buf_exactly_the_cap_fits(void **st)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(8);

	assert_int_equal(buf_add(&b, "12345678", 8), 0);
	assert_string_equal(buf_str(&b), "12345678");
	assert_true(b.alloc <= 9); /* never more than the cap and its NUL */
}

static void test_buf_over_the_cap_fails_and_frees(void **st)
{
	struct buf b = BUF_INIT(8);

	assert_int_equal(buf_add(&b, "1234", 4), 0);
	assert_int_equal(buf_add(&b, "56789", 5), -E2BIG);
	assert_null(b.ptr);
	assert_int_equal(buf_len(&b), 0);
	assert_string_equal(buf_str(&b), "");
	/* still usable, same cap */
	assert_int_equal(buf_addf(&b, "%s", "123456789"), -E2BIG);
	assert_null(b.ptr);
	assert_int_equal(buf_add_char(&b, 'a'), 0);
	assert_string_equal(buf_str(&b), "a");
	buf_done(&b);
}

static void test_buf_addf_over_the_cap_with_room_frees(void **st)
{
	struct buf b = BUF_INIT(100);

	assert_int_equal(buf_reserve(&b, 100), 0);
	assert_int_equal(buf_add_str(&b, "abc"), 0);
	assert_int_equal(buf_addf(&b, "%0200d", 1), -E2BIG);
	assert_null(b.ptr);
	assert_int_equal(buf_len(&b), 0);
}

static void test_buf_enomem_frees(void **st)
{
	struct buf b = BUF_INIT(1 << 20);

	assert_int_equal(buf_add_str(&b, "abc"), 0);
	realloc_fails = true;
	assert_int_equal(buf_add(&b, NULL, 0), 0); /* no growth needed */
	assert_int_equal(buf_addf(&b, "%01000d", 7), -ENOMEM);
	realloc_fails = false;
	assert_null(b.ptr);
	assert_int_equal(buf_len(&b), 0);
}

static void test_buf_reserve_is_clamped_to_the_cap(void **st)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(10);

	assert_int_equal(buf_reserve(&b, 1 << 20), 0);
	assert_int_equal(b.alloc, 11);
	assert_string_equal(buf_str(&b), "");
	assert_int_equal(buf_add(&b, "0123456789", 10), 0);
}

static void test_buf_append_gives_room_to_write_in_place(void **st)
{
	struct buf b = BUF_INIT(10);
	void *p = NULL;

	assert_int_equal(buf_add_str(&b, "ab"), 0);
	assert_int_equal(buf_append(&b, 3, &p), 0);
	memcpy(p, "cde", 3);
	assert_string_equal(buf_str(&b), "abcde");
	assert_int_equal(buf_append(&b, 5, &p), 0); /* exactly the cap */
	memcpy(p, "fghij", 5);
	assert_string_equal(buf_str(&b), "abcdefghij");
	p = NULL;
	assert_int_equal(buf_append(&b, 1, &p), -E2BIG);
	assert_null(p); /* not written on failure */
	assert_null(b.ptr);
	buf_done(&b);
}

static void test_buf_reset_truncate_take(void **st)
{
	struct buf b = BUF_INIT(64);
	char *p;
	size_t len;

	assert_int_equal(buf_add_str(&b, "hello, world"), 0);
	buf_truncate(&b, 5);
	assert_string_equal(buf_str(&b), "hello");
	buf_truncate(&b, 50); /* longer: no change */
	assert_int_equal(buf_len(&b), 5);
	buf_reset(&b);
	assert_string_equal(buf_str(&b), "");
	assert_non_null(b.ptr); /* kept for reuse */
	assert_int_equal(buf_add_str(&b, "again"), 0);
	p = buf_take(&b, &len);
	assert_string_equal(p, "again");
	assert_int_equal(len, 5);
	assert_null(b.ptr);
	assert_int_equal(b.max, 64);
	free(p);
}

static void test_buf_zero_cap_holds_nothing(void **st)
{
	struct buf b;

	buf_init(&b, 0);
	assert_int_equal(buf_add(&b, NULL, 0), 0);
	assert_string_equal(buf_str(&b), "");
	assert_int_equal(buf_add_char(&b, 'x'), -E2BIG);
	buf_done(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_empty_is_an_empty_string),
		cmocka_unit_test(test_buf_appends_and_stays_terminated),
		cmocka_unit_test(test_buf_grows_across_many_appends),
		cmocka_unit_test(test_buf_addf_longer_than_room_formats_again),
		cmocka_unit_test(test_buf_exactly_the_cap_fits),
		cmocka_unit_test(test_buf_over_the_cap_fails_and_frees),
		cmocka_unit_test(test_buf_addf_over_the_cap_with_room_frees),
		cmocka_unit_test(test_buf_enomem_frees),
		cmocka_unit_test(test_buf_reserve_is_clamped_to_the_cap),
		cmocka_unit_test(test_buf_append_gives_room_to_write_in_place),
		cmocka_unit_test(test_buf_reset_truncate_take),
		cmocka_unit_test(test_buf_zero_cap_holds_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
