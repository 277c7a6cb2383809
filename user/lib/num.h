/* num: decimal integers read from text with full-input and range checks,
 * where the C library's strtol family would take leading blanks, a '+',
 * trailing junk, or an out-of-range value clamped to LONG_MAX without a word
 * unless errno is cleared and read back (make lint refuses those calls
 * outside this file).
 *
 * The grammar is the kernel's and the API server's plain integer: an
 * optional '-' (signed parsers only) then one or more digits 0-9; no blanks,
 * no '+', no base prefix. With end == NULL the number must be the whole
 * string; with end set, it is the longest such prefix of s and *end points
 * past it (for "5.10", "12 0 3", "1,2,3").
 *
 * Each returns 0 with *ret (and *end) written, -EINVAL when s does not start
 * with (or is not all) an integer, -ERANGE when the integer lies outside
 * [min, max]; nothing is written on an error. Pure functions, any thread.
 */
#pragma once

int num_parse_ll(const char *s, const char **end, long long min, long long max, long long *ret);

int num_parse_ull(const char *s, const char **end, unsigned long long max,
		  unsigned long long *ret);

/* num_parse_ll() for an int. */
int num_parse_int(const char *s, const char **end, int min, int max, int *ret);
