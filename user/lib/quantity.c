/* Quantity parsing and canonical formatting. See quantity.h. */
#include "lib/quantity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/errbuf.h"

/* a * b into *ret, false on int64 overflow. */
static bool mul_ok(int64_t a, int64_t b, int64_t *ret)
{
	return !__builtin_mul_overflow(a, b, ret);
}

int quantity_parse_milli(const char *s, int64_t *ret_milli, bool *ret_exact)
{
	static const struct {
		const char *suffix;
		int pow10, pow1024;
	} suffixes[] = {
		{ "Ki", 0, 1 }, { "Mi", 0, 2 }, { "Gi", 0, 3 }, { "Ti", 0, 4 }, { "Pi", 0, 5 },
		{ "Ei", 0, 6 }, { "n", -9, 0 }, { "u", -6, 0 }, { "m", -3, 0 }, { "k", 3, 0 },
		{ "M", 6, 0 },	{ "G", 9, 0 },	{ "T", 12, 0 }, { "P", 15, 0 }, { "E", 18, 0 },
	};
	int64_t n = 0, v;
	int digits = 0, frac = 0, pow10 = 0, pow1024 = 0;
	bool neg = false, exact = true;
	const char *p = s;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9') {
		/* ".5" is valid Kubernetes syntax too */
		if (!(*p == '.' && p[1] >= '0' && p[1] <= '9'))
			return -EINVAL;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n == 0 && *p == '0')
			continue; /* leading zeros carry no digits */
		if (++digits > 18)
			return -ERANGE;
		n = n * 10 + (*p - '0');
	}
	if (*p == '.') {
		p++;
		if ((*p < '0' || *p > '9') && p - 1 == s)
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (n == 0 && *p == '0') {
				frac++;
				continue;
			}
			if (++digits > 18)
				return -ERANGE;
			n = n * 10 + (*p - '0');
			frac++;
		}
	}
	/* "e3"/"E-2" are exponents; a bare "E" or "Ei" is a suffix (exa, exbi). */
	if ((*p == 'e' || *p == 'E') &&
	    ((p[1] >= '0' && p[1] <= '9') ||
	     ((p[1] == '+' || p[1] == '-') && p[2] >= '0' && p[2] <= '9'))) {
		int e = 0, sign = 1;

		p++;
		if (*p == '+' || *p == '-')
			sign = *p++ == '-' ? -1 : 1;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			e = e * 10 + (*p - '0');
			if (e > 1000)
				return -ERANGE;
		}
		pow10 = sign * e;
	} else if (*p) {
		size_t i;

		for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
			if (!strcmp(p, suffixes[i].suffix))
				break;
		if (i == sizeof(suffixes) / sizeof(suffixes[0]))
			return -EINVAL;
		pow10 = suffixes[i].pow10;
		pow1024 = suffixes[i].pow1024;
		p += strlen(p);
	}
	if (*p)
		return -EINVAL;

	/* milli = n * 10^(pow10 + 3 - frac) * 1024^pow1024 */
	v = n;
	for (int i = 0; i < pow1024; i++)
		if (!mul_ok(v, 1024, &v))
			return -ERANGE;
	for (int e = pow10 + 3 - frac; e != 0;) {
		if (e > 0) {
			if (v && !mul_ok(v, 10, &v))
				return -ERANGE;
			e--;
		} else {
			if (v % 10)
				exact = false;
			v /= 10;
			e++;
		}
	}
	*ret_milli = neg ? -v : v;
	*ret_exact = exact;
	return 0;
}

int quantity_parse_count(const char *s, int64_t max, int64_t *ret, struct errbuf *eb)
{
	int64_t milli;
	bool exact;
	int r;

	r = quantity_parse_milli(s, &milli, &exact);
	if (r == -ERANGE)
		return errbuf_fail(eb, -ERANGE, "\"%.32s\" is out of range", s);
	if (r < 0)
		return errbuf_fail(eb, -EINVAL, "\"%.32s\" is not a quantity", s);
	if (!exact || milli % 1000)
		return errbuf_fail(eb, -EINVAL, "\"%.32s\" is not a whole number", s);
	if (milli < 1000)
		return errbuf_fail(eb, -EINVAL, "\"%.32s\" must be at least 1", s);
	if (milli / 1000 > max)
		return errbuf_fail(eb, -ERANGE, "\"%.32s\" exceeds %lld", s, (long long)max);
	*ret = milli / 1000;
	return 0;
}

void quantity_format_int(int64_t v, char *buf, size_t size)
{
	static const char *const suffix[] = { "", "k", "M", "G", "T", "P", "E" };
	int i = 0;

	while (v != 0 && v % 1000 == 0 && i < 6) {
		v /= 1000;
		i++;
	}
	(void)snprintf(buf, size, "%lld%s", (long long)v, suffix[i]);
}
