/* procfs: parsers of the kernel's /proc text files. See procfs.h.
 *
 * Every loop is bounded by the caller's length, never by a NUL: the buffers
 * come straight from read() and the fuzz target hands them over without one.
 */
#include "host/procfs.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The line at p of [p, end), without its '\n'. */
static const char *line_end(const char *p, const char *end)
{
	const char *eol = memchr(p, '\n', (size_t)(end - p));

	return eol ? eol : end;
}

/* The next space-separated field of [*p, end) (a line): false at its end. */
static bool next_field(const char **p, const char *end, struct procfs_field *ret)
{
	const char *s = *p, *e;

	while (s < end && *s == ' ')
		s++;
	e = s;
	while (e < end && *e != ' ')
		e++;
	*p = e;
	if (e == s)
		return false;
	*ret = (struct procfs_field){ s, (size_t)(e - s) };
	return true;
}

/* A decimal number of exactly f.len digits, at most max. */
static bool field_u64(struct procfs_field f, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!f.len)
		return false;
	for (size_t i = 0; i < f.len; i++) {
		unsigned d = (unsigned)(f.s[i] - '0');

		if (d > 9 || v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

bool procfs_field_is(struct procfs_field f, const char *s)
{
	size_t n = strlen(s);

	return f.len == n && !memcmp(f.s, s, n);
}

bool procfs_list_has(const char *list, size_t len, const char *want)
{
	const char *p = list, *end = list + len;
	size_t n = strlen(want);

	while (p < end) {
		const char *c = memchr(p, ',', (size_t)(end - p));

		if (!c)
			c = end;
		if ((size_t)(c - p) == n && !memcmp(p, want, n))
			return true;
		p = c + 1;
	}
	return false;
}

/* ---- schedstat ---------------------------------------------------------------------- */

int procfs_schedstat_parse(const char *buf, size_t len, uint64_t *wait_ns, int n)
{
	const char *p = buf, *end = buf + len;
	bool versioned = false;
	int cpus = 0;

	while (p < end) {
		const char *eol = line_end(p, end), *q = p;
		struct procfs_field tok;
		uint64_t v;

		if (!next_field(&q, eol, &tok)) {
			/* blank line */
		} else if (!versioned) {
			if (!procfs_field_is(tok, "version") || !next_field(&q, eol, &tok) ||
			    !field_u64(tok, UINT64_MAX, &v) || v < 15 || v > 17)
				return -EPROTO;
			versioned = true;
		} else if (tok.len >= 3 && !memcmp(tok.s, "cpu", 3)) {
			/* cpuN yld_count legacy sched_count sched_goidle ttwu_count
			 * ttwu_local rq_cpu_time run_delay pcount */
			struct procfs_field id = { tok.s + 3, tok.len - 3 };
			uint64_t cpu, f[9];

			if (!field_u64(id, UINT64_MAX, &cpu))
				return -EPROTO;
			for (int i = 0; i < 9; i++)
				if (!next_field(&q, eol, &tok) || !field_u64(tok, UINT64_MAX, &f[i]))
					return -EPROTO;
			if (cpu < (uint64_t)n)
				wait_ns[cpu] = f[7];
			cpus++;
		}
		/* Other lines (domainN, timestamp) carry nothing we read. */
		p = eol + 1;
	}
	return versioned ? cpus : -EPROTO;
}

/* ---- mountinfo ---------------------------------------------------------------------- */

int procfs_mountinfo_next(const char **p, const char *end, struct procfs_mount *ret)
{
	while (*p < end) {
		const char *eol = line_end(*p, end), *q = *p;
		struct procfs_mount m;
		struct procfs_field f, skip;
		bool ok;

		*p = eol < end ? eol + 1 : end;
		if (!next_field(&q, eol, &f))
			continue; /* blank */
		/* id (f) parent maj:min root point options [optional...] - ... */
		ok = next_field(&q, eol, &skip) && next_field(&q, eol, &skip) &&
		     next_field(&q, eol, &m.root) && next_field(&q, eol, &m.point) &&
		     next_field(&q, eol, &skip);
		while (ok && (ok = next_field(&q, eol, &f)) && !procfs_field_is(f, "-"))
			;
		ok = ok && next_field(&q, eol, &m.fstype) && next_field(&q, eol, &m.source) &&
		     next_field(&q, eol, &m.super);
		if (!ok)
			return -EPROTO;
		*ret = m;
		return 1;
	}
	return 0;
}

char *procfs_unescape(struct procfs_field f)
{
	char *r = malloc(f.len + 1), *o = r;
	const char *s = f.s, *end = f.s + f.len;

	if (!r)
		return NULL;
	while (s < end) {
		/* \ooo with a first digit 0-3 (a byte); "\000" would cut the
		 * string short, so it stays as written. */
		if (end - s >= 4 && s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7' &&
		    (s[1] != '0' || s[2] != '0' || s[3] != '0')) {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = 0;
	return r;
}

/* ---- status ------------------------------------------------------------------------- */

/* The value of "Key:\t..." in a status-style buffer, up to the newline. */
static bool status_field(const char *buf, size_t len, const char *key, struct procfs_field *ret)
{
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *eol = line_end(p, end);

		if ((size_t)(eol - p) > klen && !memcmp(p, key, klen) && p[klen] == ':') {
			const char *v = p + klen + 1;

			while (v < eol && (*v == '\t' || *v == ' '))
				v++;
			*ret = (struct procfs_field){ v, (size_t)(eol - v) };
			return true;
		}
		p = eol + 1;
	}
	return false;
}

int procfs_status_parse(const char *buf, size_t len, struct procfs_status *ret)
{
	struct procfs_field name, tgid, cpus;
	struct cpuset allowed;
	uint64_t t;
	size_t n;

	if (!status_field(buf, len, "Name", &name) || !status_field(buf, len, "Tgid", &tgid) ||
	    !status_field(buf, len, "Cpus_allowed_list", &cpus) || !field_u64(tgid, INT_MAX, &t) ||
	    cpuset_parse_n(cpus.s, cpus.len, &allowed, NULL) < 0)
		return -EPROTO;
	n = name.len < PROCFS_COMM_MAX ? name.len : PROCFS_COMM_MAX - 1;
	memcpy(ret->name, name.s, n);
	ret->name[n] = 0;
	ret->tgid = (int)t;
	ret->allowed = allowed;
	return 0;
}

/* ---- stat --------------------------------------------------------------------------- */

int procfs_stat_parse(const char *buf, size_t len, struct procfs_stat *ret)
{
	const char *p = NULL, *end = buf + len;
	uint64_t flags = 0, utime = 0, stime = 0;

	for (const char *q = buf; q < end; q++)
		if (*q == ')')
			p = q + 1;
	if (!p)
		return -EPROTO;
	/* After comm: state(3) ppid pgrp session tty_nr tpgid flags(9) minflt
	 * cminflt majflt cmajflt utime(14) stime(15), proc(5). ppid, tty_nr and
	 * tpgid can be negative: only the fields we use must be numbers. */
	for (int i = 3; i <= 15; i++) {
		const char *eol = line_end(p, end);
		struct procfs_field f;

		if (!next_field(&p, eol, &f))
			return -EPROTO;
		if ((i == 9 && !field_u64(f, UINT32_MAX, &flags)) ||
		    (i == 14 && !field_u64(f, UINT64_MAX / 2, &utime)) ||
		    (i == 15 && !field_u64(f, UINT64_MAX / 2, &stime)))
			return -EPROTO;
	}
	*ret = (struct procfs_stat){ .flags = (unsigned)flags, .ticks = utime + stime };
	return 0;
}

/* ---- cgroup ------------------------------------------------------------------------- */

int procfs_cgroup_parse(const char *buf, size_t len, const char *controller, char *path,
			size_t size)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *eol = line_end(p, end);
		/* hierarchy-id:controllers:path; the path itself may hold ':' */
		const char *c1 = memchr(p, ':', (size_t)(eol - p));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		bool match;

		if (c2) {
			if (!controller)
				match = c1 - p == 1 && p[0] == '0' && c2 == c1 + 1;
			else
				match = procfs_list_has(c1 + 1, (size_t)(c2 - c1 - 1), controller);
			if (match) {
				size_t n = (size_t)(eol - c2 - 1);

				if (n > dlen && !memcmp(eol - dlen, deleted, dlen))
					n -= dlen;
				if (!n || c2[1] != '/')
					return -EPROTO;
				if (n >= size)
					return -E2BIG;
				memcpy(path, c2 + 1, n);
				path[n] = 0;
				return 0;
			}
		}
		p = eol + 1;
	}
	return -ENOENT;
}
