/* CPU bitmap and the Linux cpulist format. See cpuset.h for the contract. */
#include "lib/cpuset.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"

void cpuset_zero(struct cpuset *s)
{
	memset(s, 0, sizeof(*s));
}

void cpuset_set(struct cpuset *s, int cpu)
{
	assert(cpu >= 0 && cpu < CPUSET_MAX);
	s->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}

void cpuset_clear(struct cpuset *s, int cpu)
{
	if (cpu < 0 || cpu >= CPUSET_MAX)
		return;
	s->w[cpu / 64] &= ~(UINT64_C(1) << (cpu % 64));
}

void cpuset_set_range(struct cpuset *s, int lo, int hi)
{
	assert(lo >= 0 && lo <= hi && hi < CPUSET_MAX);
	for (int w = lo / 64; w <= hi / 64; w++) {
		int a = w == lo / 64 ? lo % 64 : 0;
		int b = w == hi / 64 ? hi % 64 : 63;
		uint64_t mask = (b == 63 ? ~UINT64_C(0) : (UINT64_C(1) << (b + 1)) - 1) &
				~((UINT64_C(1) << a) - 1);

		s->w[w] |= mask;
	}
}

bool cpuset_has(const struct cpuset *s, int cpu)
{
	if (cpu < 0 || cpu >= CPUSET_MAX)
		return false;
	return s->w[cpu / 64] >> (cpu % 64) & 1;
}

int cpuset_count(const struct cpuset *s)
{
	int n = 0;

	for (int i = 0; i < CPUSET_WORDS; i++)
		n += __builtin_popcountll(s->w[i]);
	return n;
}

bool cpuset_is_empty(const struct cpuset *s)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		if (s->w[i])
			return false;
	return true;
}

bool cpuset_equal(const struct cpuset *a, const struct cpuset *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

bool cpuset_is_subset(const struct cpuset *a, const struct cpuset *b)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		if (a->w[i] & ~b->w[i])
			return false;
	return true;
}

bool cpuset_intersects(const struct cpuset *a, const struct cpuset *b)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		if (a->w[i] & b->w[i])
			return true;
	return false;
}

void cpuset_and(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		dst->w[i] = a->w[i] & b->w[i];
}

void cpuset_or(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		dst->w[i] = a->w[i] | b->w[i];
}

void cpuset_andnot(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b)
{
	for (int i = 0; i < CPUSET_WORDS; i++)
		dst->w[i] = a->w[i] & ~b->w[i];
}

int cpuset_next(const struct cpuset *s, int cpu)
{
	int start = cpu + 1;

	if (start < 0)
		start = 0;
	if (start >= CPUSET_MAX)
		return -1;
	int w = start / 64;
	uint64_t word = s->w[w] & (~UINT64_C(0) << (start % 64));

	for (;;) {
		if (word)
			return w * 64 + __builtin_ctzll(word);
		if (++w >= CPUSET_WORDS)
			return -1;
		word = s->w[w];
	}
}

int cpuset_first(const struct cpuset *s)
{
	return cpuset_next(s, -1);
}

int cpuset_last(const struct cpuset *s)
{
	for (int w = CPUSET_WORDS - 1; w >= 0; w--)
		if (s->w[w])
			return w * 64 + 63 - __builtin_clzll(s->w[w]);
	return -1;
}

int cpuset_nth(const struct cpuset *s, int n)
{
	if (n < 0)
		return -1;
	for (int w = 0; w < CPUSET_WORDS; w++) {
		int c = __builtin_popcountll(s->w[w]);
		uint64_t word = s->w[w];

		if (n >= c) {
			n -= c;
			continue;
		}
		while (n--)
			word &= word - 1;
		return w * 64 + __builtin_ctzll(word);
	}
	return -1;
}

/* Names the unexpected byte at s[i]. */
static int bad_char(const char *s, size_t i, struct errbuf *eb)
{
	unsigned char c = (unsigned char)s[i];

	if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		return errbuf_fail(eb, -EINVAL, "whitespace at offset %zu", i);
	if (c >= 0x20 && c < 0x7f)
		return errbuf_fail(eb, -EINVAL, "invalid character '%c' at offset %zu", c, i);
	return errbuf_fail(eb, -EINVAL, "invalid byte 0x%02x at offset %zu", c, i);
}

/* Reads a decimal id at s[*i], advancing *i. Digits only, value < CPUSET_MAX. */
static int parse_id(const char *s, size_t len, size_t *i, int *ret, struct errbuf *eb)
{
	size_t start = *i;
	long v = 0;

	if (*i >= len || s[*i] == ',')
		return errbuf_fail(eb, -EINVAL, "empty item at offset %zu", start);
	if (s[*i] < '0' || s[*i] > '9')
		return bad_char(s, *i, eb);
	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		v = v * 10 + (s[*i] - '0');
		if (v >= CPUSET_MAX)
			return errbuf_fail(eb, -ERANGE, "CPU id at offset %zu exceeds the limit %d",
					   start, CPUSET_MAX - 1);
		(*i)++;
	}
	*ret = (int)v;
	return 0;
}

int cpuset_parse_n(const char *s, size_t len, struct cpuset *ret, struct errbuf *eb)
{
	struct cpuset out;
	size_t i = 0;
	int r;

	/* sysfs framing: NUL padding, then at most one trailing newline. */
	while (len > 0 && s[len - 1] == '\0')
		len--;
	if (len > 0 && s[len - 1] == '\n')
		len--;

	cpuset_zero(&out);
	while (i < len) {
		size_t item = i;
		int lo, hi;

		r = parse_id(s, len, &i, &lo, eb);
		if (r < 0)
			return r;
		hi = lo;
		if (i < len && s[i] == '-') {
			i++;
			r = parse_id(s, len, &i, &hi, eb);
			if (r < 0)
				return r;
			if (hi < lo)
				return errbuf_fail(eb, -EINVAL,
						   "reversed range %d-%d at offset %zu", lo, hi,
						   item);
		}
		cpuset_set_range(&out, lo, hi);
		if (i == len)
			break;
		if (s[i] != ',')
			return bad_char(s, i, eb);
		i++;
		if (i == len)
			return errbuf_fail(eb, -EINVAL, "empty item at offset %zu", i);
	}
	*ret = out;
	return 0;
}

int cpuset_parse(const char *s, struct cpuset *ret, struct errbuf *eb)
{
	return cpuset_parse_n(s, strlen(s), ret, eb);
}

/* The list form of s into buf as snprintf() does: as many whole items as fit
 * in size bytes, NUL-terminated when size > 0; returns the length of the
 * whole text (without the NUL). */
static size_t format_list(const struct cpuset *s, char *buf, size_t size)
{
	size_t o = 0;
	int cpu = cpuset_first(s);

	if (size > 0)
		buf[0] = 0;
	while (cpu >= 0) {
		const char *sep = o ? "," : "";
		char *at = o < size ? buf + o : NULL;
		size_t room = o < size ? size - o : 0;
		int end = cpu, n;

		while (cpuset_has(s, end + 1))
			end++;
		if (end == cpu)
			n = snprintf(at, room, "%s%d", sep, cpu);
		else
			n = snprintf(at, room, "%s%d-%d", sep, cpu, end);
		if ((size_t)n >= room && at)
			*at = 0; /* no part of an item */
		o += (size_t)n;
		cpu = cpuset_next(s, end);
	}
	return o;
}

int cpuset_format(const struct cpuset *s, char *buf, size_t size)
{
	size_t len = format_list(s, buf, size);

	return len < size ? (int)len : -ENOSPC;
}

char *cpuset_to_string(const struct cpuset *s)
{
	/* Measured first, then written: no buffer of the worst case (5 bytes per
	 * id, 40 KiB), whose stack pages would stay dirty once written. */
	char empty[1];
	size_t len = format_list(s, empty, sizeof(empty));
	char *buf = malloc(len + 1);

	if (buf)
		(void)format_list(s, buf, len + 1);
	return buf;
}

struct cpuset_view cpuset_view(const struct cpuset *s)
{
	int lo = 0, hi = CPUSET_WORDS;

	while (lo < hi && !s->w[lo])
		lo++;
	while (hi > lo && !s->w[hi - 1])
		hi--;
	if (lo == hi)
		return (struct cpuset_view){ .w = s->w, .off = 0, .n = 0 };
	return (struct cpuset_view){ .w = s->w + lo, .off = lo, .n = hi - lo };
}

static void view_check(const struct cpuset_view *v)
{
	assert(v->off >= 0 && v->n >= 0 && v->off <= CPUSET_WORDS - v->n);
	(void)v;
}

const struct cpuset *cpuset_from_view(const struct cpuset_view *v, struct cpuset *ret)
{
	view_check(v);
	memset(ret->w, 0, sizeof(ret->w));
	if (v->n > 0)
		memcpy(ret->w + v->off, v->w, sizeof(uint64_t) * (size_t)v->n);
	return ret;
}

bool cpuset_view_has(const struct cpuset_view *v, int cpu)
{
	if (cpu < v->off * 64 || cpu >= (v->off + v->n) * 64)
		return false;
	return v->w[cpu / 64 - v->off] >> (cpu % 64) & 1;
}

void cpuset_or_view(struct cpuset *dst, const struct cpuset_view *v)
{
	view_check(v);
	for (int i = 0; i < v->n; i++)
		dst->w[v->off + i] |= v->w[i];
}
