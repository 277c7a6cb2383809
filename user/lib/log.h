/* logfmt lines on stderr: ts=... level=... mod=... event=... key=value...
 *
 * Callers pass a module name, an event name (snake_case, stable: dashboards and
 * alerts grep for them) and printf-style key=value text. The level is checked
 * before anything is formatted. log_*_errno() log and return the (negative)
 * errno they were given so an error path is one line:
 *
 *	return log_error_errno(r, "cdi_write_failed", "claim=%s", uid);
 *
 * Values with spaces must be quoted by the caller (log_quote() helps).
 */
#pragma once

#include <stdarg.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3, LOG_TRACE = 4 };

/* -v N maps to LOG_INFO + N (capped at LOG_TRACE). */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

void log_emit(enum log_level level, const char *mod, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void log_emitv(enum log_level level, const char *mod, const char *event, const char *fmt,
	       va_list ap) __attribute__((format(printf, 4, 0)));

/* Quote s for a logfmt value when it is empty or holds spaces, quotes, '=',
 * backslashes or control bytes (escaped: \n \t \r \xNN), so a peer-supplied
 * value never splits or forges a line. Long values are cut at LOG_QUOTE_MAX
 * bytes (still quoted). Returns s itself or text in the line's quote space,
 * valid until the next log line is written or filtered: use it only as an
 * argument of a log statement, and call nothing that logs in that
 * statement's arguments. A line may hold LOG_QUOTE_SPACE / LOG_QUOTE_MAX
 * quoted values at least; past the space, the value reads
 * "(log_quote: no space left in this line)": visible, never an earlier value
 * overwritten. */
#define LOG_QUOTE_MAX 256
#define LOG_QUOTE_SPACE 8192
const char *log_quote(const char *s);

/* How many log_quote() calls found no space left (tests). */
unsigned long log_quote_exhausted(void);

#ifndef LOG_MOD
#define LOG_MOD "main"
#endif

#define log_enabled(l) ((l) <= log_get_level())
#define log_error(ev, ...) log_emit(LOG_ERROR, LOG_MOD, ev, __VA_ARGS__)
#define log_warn(ev, ...) log_emit(LOG_WARN, LOG_MOD, ev, __VA_ARGS__)
#define log_info(ev, ...) log_emit(LOG_INFO, LOG_MOD, ev, __VA_ARGS__)
#define log_debug(ev, ...) log_emit(LOG_DEBUG, LOG_MOD, ev, __VA_ARGS__)

/* Log at error level with err=<strerror> appended; evaluates to r. */
#define log_error_errno(r, ev, fmt, ...) log_errno(LOG_ERROR, LOG_MOD, (r), ev, fmt, ##__VA_ARGS__)
#define log_warn_errno(r, ev, fmt, ...) log_errno(LOG_WARN, LOG_MOD, (r), ev, fmt, ##__VA_ARGS__)

int log_errno(enum log_level level, const char *mod, int r, const char *event, const char *fmt,
	      ...) __attribute__((format(printf, 5, 6)));
