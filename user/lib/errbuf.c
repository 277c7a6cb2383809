/* One-line error text. See errbuf.h. */
#include "lib/errbuf.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Text cut at s[len] loses a UTF-8 sequence the cut went through: peers
 * show our text in proto3 strings (kubelet, NRI), which must be valid UTF-8
 * or the whole message is refused. Only what the cut broke is removed; text
 * that was invalid to begin with is the producer's business. */
static void utf8_cut(char *s, size_t len)
{
	size_t start = len, need;
	unsigned char lead;

	while (start > 0 && ((unsigned char)s[start - 1] & 0xc0) == 0x80)
		start--;
	if (start == 0 || (unsigned char)s[start - 1] < 0xc0)
		return;
	lead = (unsigned char)s[start - 1];
	need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
	if (len - (start - 1) < need)
		s[start - 1] = 0;
}

/* vsnprintf() into eb, cut at a character boundary. */
static void format(struct errbuf *eb, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void format(struct errbuf *eb, const char *fmt, va_list ap)
{
	int n = vsnprintf(eb->s, sizeof(eb->s), fmt, ap);

	if (n >= (int)sizeof(eb->s))
		utf8_cut(eb->s, sizeof(eb->s) - 1);
}

void errbuf_setv(struct errbuf *eb, const char *fmt, va_list ap)
{
	if (eb)
		format(eb, fmt, ap);
}

void errbuf_set(struct errbuf *eb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errbuf_setv(eb, fmt, ap);
	va_end(ap);
}

int errbuf_fail(struct errbuf *eb, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errbuf_setv(eb, fmt, ap);
	va_end(ap);
	return r;
}

/* Appends s to the text, cut to fit. */
static void append(struct errbuf *eb, const char *s)
{
	size_t at = strlen(eb->s), n = strlen(s);
	bool cut = n > sizeof(eb->s) - 1 - at;

	if (at >= sizeof(eb->s) - 1)
		return;
	if (cut)
		n = sizeof(eb->s) - 1 - at;
	memcpy(eb->s + at, s, n);
	eb->s[at + n] = 0;
	if (cut)
		utf8_cut(eb->s, at + n);
}

int errbuf_wrap(struct errbuf *eb, int r, const char *fmt, ...)
{
	char old[ERRBUF_MAX];
	va_list ap;

	if (!eb)
		return r;
	/* The old text is copied out first: it is both input and output here. */
	(void)snprintf(old, sizeof(old), "%s", errbuf_text(eb, r));
	va_start(ap, fmt);
	format(eb, fmt, ap);
	va_end(ap);
	append(eb, ": ");
	append(eb, old);
	return r;
}

const char *errbuf_text(const struct errbuf *eb, int r)
{
	if (eb && eb->s[0])
		return eb->s;
	return strerror(r < 0 ? -r : r);
}
