/* CPU sets: a fixed-size bitmap of CPU ids 0..CPUSET_MAX-1 and the Linux list
 * format ("0-3,8,10-11") that sysfs, cgroups, kubelet and the CDI env speak.
 *
 * A struct cpuset is a plain value (1 KiB): copy it with '=', no allocation, no
 * cleanup. Every operation is total on valid sets; only parsing can fail.
 * CPUSET_MAX bounds what any input may name: a list naming CPU 8192 or above is
 * rejected, never truncated.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct errbuf;

#define CPUSET_MAX 8192
#define CPUSET_WORDS (CPUSET_MAX / 64)

struct cpuset {
	uint64_t w[CPUSET_WORDS];
};

void cpuset_zero(struct cpuset *s);
/* cpu must be < CPUSET_MAX (our bug otherwise: asserted). */
void cpuset_set(struct cpuset *s, int cpu);
void cpuset_clear(struct cpuset *s, int cpu);
/* Sets [lo, hi], both < CPUSET_MAX and lo <= hi. */
void cpuset_set_range(struct cpuset *s, int lo, int hi);
/* False for ids outside 0..CPUSET_MAX-1. */
bool cpuset_has(const struct cpuset *s, int cpu);

int cpuset_count(const struct cpuset *s);
bool cpuset_is_empty(const struct cpuset *s);
bool cpuset_equal(const struct cpuset *a, const struct cpuset *b);
/* a is a subset of b. */
bool cpuset_is_subset(const struct cpuset *a, const struct cpuset *b);
bool cpuset_intersects(const struct cpuset *a, const struct cpuset *b);

/* dst may alias a or b. */
void cpuset_and(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b);
void cpuset_or(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b);
/* dst = a minus b. */
void cpuset_andnot(struct cpuset *dst, const struct cpuset *a, const struct cpuset *b);

/* Lowest member, or -1 when empty. */
int cpuset_first(const struct cpuset *s);
/* Lowest member > cpu, or -1. */
int cpuset_next(const struct cpuset *s, int cpu);
/* Highest member, or -1 when empty. */
int cpuset_last(const struct cpuset *s);
/* The n-th lowest member (0-based), or -1. */
int cpuset_nth(const struct cpuset *s, int n);

#define CPUSET_FOREACH(cpu, s) \
	for (int cpu = cpuset_first(s); cpu >= 0; cpu = cpuset_next((s), cpu))

/* Parse exactly len bytes of s in the Linux list format into *ret.
 * Accepted: "" (empty set), items "N" and "N-M" separated by single commas,
 * optionally followed by one newline and/or NUL padding (sysfs files end with
 * "\n", some ARM kernels pad with NUL). Rejected with -EINVAL: junk, empty
 * items, whitespace inside, reversed ranges; with -ERANGE: ids >= CPUSET_MAX.
 * On error *ret is untouched and eb (may be NULL) says what and where, e.g.
 * "reversed range 7-3 at offset 2". */
int cpuset_parse_n(const char *s, size_t len, struct cpuset *ret, struct errbuf *eb);
/* Same over a NUL-terminated string. */
int cpuset_parse(const char *s, struct cpuset *ret, struct errbuf *eb);

/* A read-only window on the words of a set that hold its members, from the
 * lowest non-zero word to the highest (none for the empty set): how records
 * kept for long (core/state.h) hold a set of a few CPUs in a few bytes
 * instead of 1 KiB, wherever those CPUs are. w[0] is word off of the set;
 * every member lies in [off * 64, (off + n) * 64). The words belong to
 * whoever made the view. */
struct cpuset_view {
	const uint64_t *w;
	int off;
	int n;
};

/* A view of s, valid while s is. */
struct cpuset_view cpuset_view(const struct cpuset *s);
/* The set v shows, into *ret; returns ret (for use in an expression). */
const struct cpuset *cpuset_from_view(const struct cpuset_view *v, struct cpuset *ret);
/* False for ids outside the view. */
bool cpuset_view_has(const struct cpuset_view *v, int cpu);
/* dst |= the set v shows. */
void cpuset_or_view(struct cpuset *dst, const struct cpuset_view *v);

/* Canonical list form (ascending, maximal ranges, "" when empty) into buf.
 * Returns the length without the NUL, or -ENOSPC if size is too small (buf then
 * holds a truncated, NUL-terminated prefix). */
int cpuset_format(const struct cpuset *s, char *buf, size_t size);
/* Same, allocated; caller frees. NULL only on ENOMEM. */
char *cpuset_to_string(const struct cpuset *s);
