/* logfmt logging to stderr. One line per write(2) so lines from concurrent
 * processes (tests run several daemons) never interleave. */
#include "lib/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level cur_level = LOG_INFO;

static const char *const level_names[] = {
	[LOG_ERROR] = "error", [LOG_WARN] = "warn", [LOG_INFO] = "info",
	[LOG_DEBUG] = "debug", [LOG_TRACE] = "trace",
};

void log_set_level(enum log_level level)
{
	if (level > LOG_TRACE)
		level = LOG_TRACE;
	cur_level = level;
}

enum log_level log_get_level(void)
{
	return cur_level;
}

/* Control bytes would let a peer-supplied value end the line and forge the
 * next one (or drive a terminal): they are always quoted and escaped. */
static int needs_quote(const char *s)
{
	if (!*s)
		return 1;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f || c == ' ' || c == '"' || c == '=' || c == '\\')
			return 1;
	}
	return 0;
}

/* The quotes of the line being built. Every log_quote() of a statement is
 * evaluated before its log_emit() runs, and log_emit() starts the space over
 * once the line is out (or filtered): so a line may hold as many quoted
 * values as fit here, each intact, and never one overwritten by the next. */
static struct {
	char buf[LOG_QUOTE_SPACE];
	size_t used;
	unsigned long exhausted; /* quotes refused since start (tests read it) */
} quotes;

static const char quote_exhausted[] = "\"(log_quote: no space left in this line)\"";

unsigned long log_quote_exhausted(void)
{
	return quotes.exhausted;
}

/* A control byte as logfmt writes it (\n \t \r \xNN) into out (room for 4);
 * returns the length. */
static size_t escape_control(unsigned char c, char *out)
{
	out[0] = '\\';
	if (c == '\n' || c == '\t' || c == '\r') {
		out[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
		return 2;
	}
	out[1] = 'x';
	out[2] = "0123456789abcdef"[c >> 4];
	out[3] = "0123456789abcdef"[c & 15];
	return 4;
}

/* Appends the caller's text to line at n, control bytes escaped: a value a
 * caller forgot to log_quote() can make a line ugly, never split it in two
 * or send escape sequences to a terminal. Returns the new length, at most
 * size - 2 (room for the newline). */
static int append_text(char *line, int n, size_t size, const char *text)
{
	for (; *text && (size_t)n < size - 2; text++) {
		unsigned char c = (unsigned char)*text;

		if (c >= 0x20 && c != 0x7f) {
			line[n++] = (char)c;
		} else if ((size_t)n + 4 < size - 2) {
			n += (int)escape_control(c, line + n);
		} else {
			break;
		}
	}
	return n;
}

const char *log_quote(const char *s)
{
	char *b;
	size_t o = 0;

	if (!s)
		return "\"\"";
	if (!needs_quote(s))
		return s;
	if (sizeof(quotes.buf) - quotes.used < LOG_QUOTE_MAX) {
		quotes.exhausted++;
		return quote_exhausted;
	}
	b = quotes.buf + quotes.used;
	b[o++] = '"';
	/* Room for the longest escape (4), the closing quote and the NUL. */
	for (; *s && o < LOG_QUOTE_MAX - 6; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			b[o++] = '\\';
			b[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			o += escape_control(c, b + o);
		} else {
			b[o++] = (char)c;
		}
	}
	b[o++] = '"';
	b[o++] = 0;
	quotes.used += o;
	return b;
}

void log_emitv(enum log_level level, const char *mod, const char *event, const char *fmt,
	       va_list ap)
{
	char line[2048], text[sizeof(line)];
	struct timespec ts;
	struct tm tm;
	int n;

	if (level > cur_level)
		goto done;
	(void)clock_gettime(CLOCK_REALTIME, &ts);
	(void)gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s mod=%s event=%s",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], mod, event);
	if (n < 0)
		return;
	if (fmt && *fmt && (size_t)n < sizeof(line) - 2) {
		line[n++] = ' ';
		if (vsnprintf(text, sizeof(text), fmt, ap) >= 0)
			n = append_text(line, n, sizeof(line), text);
	}
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
done:
	quotes.used = 0; /* the line is out: its quotes are done with */
}

void log_emit(enum log_level level, const char *mod, const char *event, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emitv(level, mod, event, fmt, ap);
	va_end(ap);
}

int log_errno(enum log_level level, const char *mod, int r, const char *event, const char *fmt,
	      ...)
{
	char buf[1536];
	va_list ap;

	if (level > cur_level) {
		quotes.used = 0; /* filtered: the quotes made for it are done with */
		return r;
	}
	buf[0] = 0;
	if (fmt) {
		va_start(ap, fmt);
		(void)vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
	}
	log_emit(level, mod, event, "%s%serr=%s", buf, *buf ? " " : "",
		 log_quote(strerror(r < 0 ? -r : r)));
	return r;
}
