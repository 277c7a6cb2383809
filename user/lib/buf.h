/* buf: the one growable byte buffer, with a hard cap.
 *
 * Every place that builds text or collects bytes of unknown length (a file
 * read to EOF, a JSON document, a rendered report) uses a struct buf instead
 * of its own `cap * 2` loop. The cap is part of the buffer: whatever a peer or
 * a file can make us allocate is bounded where the buffer is made, not at
 * each append.
 *
 * Invariants: ptr is NULL (len 0) or a heap block of alloc bytes holding len
 * bytes and a NUL, so buf_str() is always a C string; len <= max. An append
 * that would pass max (-E2BIG) or cannot allocate (-ENOMEM) frees the buffer:
 * a half-built document is never mistaken for a whole one, and the caller's
 * only cleanup on any path is buf_done().
 *
 *	_cleanup_(buf_done) struct buf b = BUF_INIT(1 << 20);
 *
 *	r = buf_addf(&b, "{\"uid\":\"%s\"}", uid);
 *	if (r < 0)
 *		return r;
 *	*ret = buf_take(&b, NULL);
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *ptr;    /* NULL until the first byte, then NUL-terminated */
	size_t len;   /* bytes held, without the NUL */
	size_t alloc; /* bytes allocated at ptr */
	size_t max;   /* len never exceeds this */
};

#define BUF_INIT(m) ((struct buf){ .max = (m) })

/* An empty buffer that will hold at most max bytes; allocates nothing. */
void buf_init(struct buf *b, size_t max);
/* Frees the bytes; b stays usable, empty, with the same max. */
void buf_done(struct buf *b);
/* Forgets the bytes but keeps the allocation for reuse. */
void buf_reset(struct buf *b);

/* Appends; 0, or -E2BIG / -ENOMEM with b freed (see the top). data may be
 * NULL when len is 0. */
int buf_add(struct buf *b, const void *data, size_t len);
int buf_add_str(struct buf *b, const char *s);
int buf_add_char(struct buf *b, char c);
int buf_addf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vaddf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Makes room for n more bytes without appending (a size hint: fewer
 * reallocations for a file whose size is known). Never fails the cap: it
 * reserves at most up to max. -ENOMEM frees b. */
int buf_reserve(struct buf *b, size_t n);

/* Appends n uninitialized bytes for the caller to write in place (an
 * encoder that knows their size) and points *ret at them; errors and
 * freeing as buf_add(). The NUL after them is set. */
int buf_append(struct buf *b, size_t n, void **ret);

/* Drops the bytes past len (len <= buf_len(b)). */
void buf_truncate(struct buf *b, size_t len);

/* Hands the bytes to the caller (free() them) and leaves b empty. Never NULL
 * unless an empty buffer cannot allocate its "" (ENOMEM). ret_len may be NULL. */
char *buf_take(struct buf *b, size_t *ret_len);

static inline const char *buf_str(const struct buf *b)
{
	return b->ptr ? b->ptr : "";
}

static inline size_t buf_len(const struct buf *b)
{
	return b->len;
}
