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

const char *log_quote(const char *s)
{
	static char bufs[4][256];
	static unsigned next;
	char *b = bufs[next++ % 4];
	size_t o = 0;

	if (!s)
		return "\"\"";
	if (*s && !strpbrk(s, " \"=\t\n\\"))
		return s;
	b[o++] = '"';
	for (; *s && o < sizeof(bufs[0]) - 4; s++) {
		if (*s == '"' || *s == '\\') {
			b[o++] = '\\';
			b[o++] = *s;
		} else if (*s == '\n' || *s == '\t') {
			b[o++] = '\\';
			b[o++] = *s == '\n' ? 'n' : 't';
		} else {
			b[o++] = *s;
		}
	}
	b[o++] = '"';
	b[o] = 0;
	return b;
}

void log_emitv(enum log_level level, const char *mod, const char *event, const char *fmt,
	       va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	int n, m;

	if (level > cur_level)
		return;
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
		m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		if (m > 0)
			n += m;
	}
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

void log_emit(enum log_level level, const char *mod, const char *event, const char *fmt, ...)
{
	va_list ap;

	if (level > cur_level)
		return;
	va_start(ap, fmt);
	log_emitv(level, mod, event, fmt, ap);
	va_end(ap);
}

int log_errno(enum log_level level, const char *mod, int r, const char *event, const char *fmt,
	      ...)
{
	char buf[1536];
	va_list ap;

	if (level > cur_level)
		return r;
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
