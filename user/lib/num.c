/* Decimal integers with full-input and range checks. See num.h. */
#include "lib/num.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>

/* The digits at s as a magnitude: 0 with *ret and *end set, -EINVAL without
 * a digit, -ERANGE past ULLONG_MAX (the digits are still all read). */
static int digits(const char *s, const char **end, unsigned long long *ret)
{
	unsigned long long v = 0;
	bool over = false;
	const char *p = s;

	if (!(*p >= '0' && *p <= '9'))
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (ULLONG_MAX - d) / 10)
			over = true;
		else
			v = v * 10 + d;
	}
	*end = p;
	if (over)
		return -ERANGE;
	*ret = v;
	return 0;
}

int num_parse_ull(const char *s, const char **end, unsigned long long max,
		  unsigned long long *ret)
{
	unsigned long long v = 0;
	const char *e = s;
	int r;

	if (!s)
		return -EINVAL;
	r = digits(s, &e, &v);
	if (r == -EINVAL || (!end && *e))
		return -EINVAL;
	if (r < 0 || v > max)
		return -ERANGE;
	if (end)
		*end = e;
	*ret = v;
	return 0;
}

int num_parse_ll(const char *s, const char **end, long long min, long long max, long long *ret)
{
	unsigned long long mag = 0;
	const char *e;
	bool neg;
	long long v;
	int r;

	if (!s)
		return -EINVAL;
	neg = *s == '-';
	r = digits(s + neg, &e, &mag);
	if (r == -EINVAL || (!end && *e))
		return -EINVAL;
	if (r < 0)
		return -ERANGE;
	if (neg) {
		/* LLONG_MIN's magnitude is one more than LLONG_MAX. */
		if (mag > (unsigned long long)LLONG_MAX + 1)
			return -ERANGE;
		v = mag == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
	} else {
		if (mag > (unsigned long long)LLONG_MAX)
			return -ERANGE;
		v = (long long)mag;
	}
	if (v < min || v > max)
		return -ERANGE;
	if (end)
		*end = e;
	*ret = v;
	return 0;
}

int num_parse_int(const char *s, const char **end, int min, int max, int *ret)
{
	long long v;
	int r = num_parse_ll(s, end, min, max, &v);

	if (r < 0)
		return r;
	*ret = (int)v;
	return 0;
}
