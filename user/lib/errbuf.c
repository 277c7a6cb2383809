/* One-line error text. See errbuf.h. */
#include "lib/errbuf.h"

#include <stdio.h>
#include <string.h>

void errbuf_setv(struct errbuf *eb, const char *fmt, va_list ap)
{
	if (eb)
		(void)vsnprintf(eb->s, sizeof(eb->s), fmt, ap);
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

	if (at >= sizeof(eb->s) - 1)
		return;
	if (n > sizeof(eb->s) - 1 - at)
		n = sizeof(eb->s) - 1 - at;
	memcpy(eb->s + at, s, n);
	eb->s[at + n] = 0;
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
	(void)vsnprintf(eb->s, sizeof(eb->s), fmt, ap);
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
