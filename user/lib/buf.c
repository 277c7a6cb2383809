/* The growable byte buffer. See buf.h. */
#include "lib/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN_ALLOC 64

void buf_init(struct buf *b, size_t max)
{
	*b = BUF_INIT(max);
}

void buf_done(struct buf *b)
{
	free(b->ptr);
	b->ptr = NULL;
	b->len = b->alloc = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->ptr)
		b->ptr[0] = 0;
}

/* Room for len + n bytes and the NUL; the caller checked len + n <= max. */
static int grow(struct buf *b, size_t n)
{
	size_t need = b->len + n + 1, size = b->alloc ? b->alloc : BUF_MIN_ALLOC;
	char *p;

	if (need <= b->alloc)
		return 0;
	/* Doubling keeps appends amortized O(1); the cap bounds the last step. */
	while (size < need)
		size = size > SIZE_MAX / 2 ? need : size * 2;
	if (b->max < SIZE_MAX && size > b->max + 1)
		size = b->max + 1;
	p = realloc(b->ptr, size);
	if (!p) {
		buf_done(b);
		return -ENOMEM;
	}
	b->ptr = p;
	b->alloc = size;
	return 0;
}

int buf_append(struct buf *b, size_t n, void **ret)
{
	int r;

	if (n > b->max - b->len) {
		buf_done(b);
		return -E2BIG;
	}
	r = grow(b, n);
	if (r < 0)
		return r;
	*ret = b->ptr + b->len;
	b->len += n;
	b->ptr[b->len] = 0;
	return 0;
}

int buf_add(struct buf *b, const void *data, size_t len)
{
	void *p;
	int r = buf_append(b, len, &p);

	if (r == 0 && len)
		memcpy(p, data, len);
	return r;
}

int buf_add_str(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

int buf_add_char(struct buf *b, char c)
{
	return buf_add(b, &c, 1);
}

int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
	size_t room = b->alloc ? b->alloc - b->len : 0;
	va_list aq;
	int n, r;

	/* First try into the room there is; only a miss formats twice. */
	va_copy(aq, ap);
	n = vsnprintf(room ? b->ptr + b->len : NULL, room, fmt, aq);
	va_end(aq);
	if (n < 0) {
		buf_done(b);
		return -EINVAL;
	}
	if ((size_t)n > b->max - b->len) {
		buf_done(b);
		return -E2BIG;
	}
	if ((size_t)n >= room) {
		r = grow(b, (size_t)n);
		if (r < 0)
			return r;
		(void)vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	}
	b->len += (size_t)n;
	return 0;
}

int buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vaddf(b, fmt, ap);
	va_end(ap);
	return r;
}

int buf_reserve(struct buf *b, size_t n)
{
	int r;

	if (n > b->max - b->len)
		n = b->max - b->len;
	r = grow(b, n);
	if (r == 0 && b->ptr)
		b->ptr[b->len] = 0;
	return r;
}

void buf_truncate(struct buf *b, size_t len)
{
	if (len < b->len) {
		b->len = len;
		b->ptr[len] = 0;
	}
}

char *buf_take(struct buf *b, size_t *ret_len)
{
	char *p = b->ptr ? b->ptr : calloc(1, 1);

	if (!p)
		return NULL;
	if (ret_len)
		*ret_len = b->len;
	b->ptr = NULL;
	b->len = b->alloc = 0;
	return p;
}
