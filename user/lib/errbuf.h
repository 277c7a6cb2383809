/* errbuf: the one-line reason that travels with a negative errno.
 *
 * A function that can fail for a reason worth showing a person (a parser, a
 * loader, a flag check) takes a `struct errbuf *eb` and returns -errno; on
 * failure it has written one line of text into eb. The buffer carries its
 * size in its type, so no caller passes a bare `char *` of a size the callee
 * must guess, and every producer formats with the same truncation rule.
 *
 * NULL means "the caller does not want the text": every function accepts it.
 * Text is always NUL-terminated; longer text is cut at ERRBUF_MAX - 1 bytes,
 * or just before them when the cut would split a UTF-8 character: the text
 * goes to peers in proto3 strings, which refuse invalid UTF-8.
 *
 *	struct errbuf eb = {};
 *	r = cpuset_parse(v, &set, &eb);
 *	if (r < 0)
 *		return errbuf_wrap(err, r, "--%s", flag);   "--cpus: reversed range 7-3 ..."
 *
 * and in the callee:
 *
 *	return errbuf_fail(eb, -EINVAL, "reversed range %d-%d", lo, hi);
 */
#pragma once

#include <stdarg.h>

/* Room for the longest reason we write (a path, a value and what is wrong
 * with it) and for what a peer protocol shows of it (kubelet and NRI errors). */
#define ERRBUF_MAX 512

struct errbuf {
	char s[ERRBUF_MAX];
};

/* Replaces the text (eb may be NULL). */
void errbuf_set(struct errbuf *eb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void errbuf_setv(struct errbuf *eb, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* errbuf_set() and returns r: a failure path is one statement. */
int errbuf_fail(struct errbuf *eb, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Puts "<fmt...>: " in front of the text already there (or of strerror(-r)
 * when there is none) and returns r: adds the context a callee did not know,
 * e.g. the file name around a parser's reason. */
int errbuf_wrap(struct errbuf *eb, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The text, or strerror(-r) when eb is NULL or empty: what to print. The
 * result is borrowed (eb's storage or libc's). */
const char *errbuf_text(const struct errbuf *eb, int r);

/* Empties the text (eb may be NULL). */
static inline void errbuf_clear(struct errbuf *eb)
{
	if (eb)
		eb->s[0] = 0;
}
