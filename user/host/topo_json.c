/* topo_json: the topology as JSON, in and out: the --print-topology format
 * that topo_write_json() prints and topo_parse_json() reads back, which is
 * also how tests and the allocator CLI describe nodes no machine here has
 * (1024 CPUs, 8 NUMA nodes). Both ends go through topo_build(), so a parsed
 * topology keeps every invariant of topo.h.
 *
 * Input is untrusted: strict keys and types, caps on bytes, CPUs and
 * nesting (see topo_json.h), one reason in eb naming the entry and field.
 */
#include "host/topo_json.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/jsonc.h"
#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "host/topo.h"

/* ---- topology JSON -------------------------------------------------------------------- */

/* Caps on what a topology file can make us allocate (8192 CPUs print as ~1 MiB). */
#define TOPO_JSON_MAX_BYTES (16u << 20)
#define TOPO_JSON_MAX_DEPTH 4 /* {"cpus": [{...}]} is 3; one more gives type errors, not depth ones */

static bool key_in(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return true;
	return false;
}

/* An integer member in [min, max]. -ENOENT (eb untouched) when absent. where
 * prefixes messages ("cpus[3] (CPU 7): "). */
static int json_get_int(struct json_object *obj, const char *key, long long min, long long max,
			int *ret, const char *where, struct errbuf *eb)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(obj, key, &v))
		return -ENOENT;
	if (!json_object_is_type(v, json_type_int))
		return errbuf_fail(eb, -EINVAL, "%s\"%s\" must be an integer", where, key);
	x = json_object_get_int64(v);
	if (x < min || x > max)
		return errbuf_fail(eb, -EINVAL, "%s\"%s\" %lld out of range %lld-%lld", where, key,
			    (long long)x, min, max);
	*ret = (int)x;
	return 0;
}

static int json_need_int(struct json_object *obj, const char *key, long long min, long long max,
			 int *ret, const char *where, struct errbuf *eb)
{
	int r = json_get_int(obj, key, min, max, ret, where, eb);

	if (r == -ENOENT)
		return errbuf_fail(eb, -EINVAL, "%smissing \"%s\"", where, key);
	return r;
}

static int parse_core_type(const char *s, enum topo_core_type *ret)
{
	for (enum topo_core_type t = TOPO_CORE_STANDARD; t <= TOPO_CORE_E; t++)
		if (strcmp(s, topo_core_type_name(t)) == 0) {
			*ret = t;
			return 0;
		}
	return -EINVAL;
}

static int parse_cpu_entry(struct json_object *e, size_t i, struct topo_cpu *c, struct errbuf *eb)
{
	static const char *const keys[] = {"cpu", "socket", "numa",   "core",
					   "coreId", "l3", "uncore", "coreType"};
	struct json_object *v;
	char where[64];
	int r;

	(void)snprintf(where, sizeof(where), "cpus[%zu]: ", i);
	if (!json_object_is_type(e, json_type_object))
		return errbuf_fail(eb, -EINVAL, "%smust be an object", where);
	r = json_need_int(e, "cpu", 0, CPUSET_MAX - 1, &c->cpu, where, eb);
	if (r < 0)
		return r;
	(void)snprintf(where, sizeof(where), "cpus[%zu] (CPU %d): ", i, c->cpu);
	{
		json_object_object_foreach(e, key, val)
		{
			(void)val;
			if (!key_in(key, keys, ARRAY_SIZE(keys)))
				return errbuf_fail(eb, -EINVAL, "%sunknown key \"%.64s\"", where, key);
		}
	}
	if ((r = json_need_int(e, "socket", -1, INT_MAX, &c->socket, where, eb)) < 0 ||
	    (r = json_need_int(e, "numa", -1, INT_MAX, &c->numa, where, eb)) < 0 ||
	    (r = json_need_int(e, "core", 0, CPUSET_MAX - 1, &c->core, where, eb)) < 0)
		return r;
	r = json_get_int(e, "coreId", 0, INT_MAX, &c->core_id, where, eb);
	if (r == -ENOENT)
		c->core_id = c->core;
	else if (r < 0)
		return r;
	/* "uncore" is what the reference driver calls the L3 (its cacheL3ID). */
	if (json_object_object_get_ex(e, "l3", NULL) && json_object_object_get_ex(e, "uncore", NULL))
		return errbuf_fail(eb, -EINVAL, "%sboth \"l3\" and its alias \"uncore\"", where);
	r = json_get_int(e, "l3", -1, INT_MAX, &c->l3, where, eb);
	if (r == -ENOENT)
		r = json_get_int(e, "uncore", -1, INT_MAX, &c->l3, where, eb);
	if (r == -ENOENT)
		return errbuf_fail(eb, -EINVAL, "%smissing \"l3\"", where);
	if (r < 0)
		return r;
	c->type = TOPO_CORE_STANDARD;
	if (json_object_object_get_ex(e, "coreType", &v)) {
		if (!json_object_is_type(v, json_type_string) ||
		    parse_core_type(json_object_get_string(v), &c->type) < 0)
			return errbuf_fail(eb, -EINVAL,
				    "%s\"coreType\" must be \"standard\", \"p-core\" or \"e-core\"",
				    where);
	}
	return 0;
}

static int check_summary(struct json_object *top, const char *key, int have, struct errbuf *eb)
{
	int want, r;

	r = json_get_int(top, key, 0, INT_MAX, &want, "", eb);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (want != have)
		return errbuf_fail(eb, -EINVAL, "\"%s\" is %d but the CPUs give %d", key, want, have);
	return 0;
}

static int parse_top(struct json_object *top, struct topo **ret, struct errbuf *eb)
{
	static const char *const keys[] = {"cpus",	"offline",  "sockets",	 "numaNodes",
					   "cores", "l3Caches", "smtEnabled"};
	_cleanup_(topo_freep) struct topo *t = NULL;
	_cleanup_free_ struct topo_cpu *rows = NULL;
	struct json_object *cpus, *v;
	struct cpuset offline, seen;
	size_t n;
	int r;

	if (!json_object_is_type(top, json_type_object))
		return errbuf_fail(eb, -EINVAL, "top level must be an object");
	{
		json_object_object_foreach(top, key, val)
		{
			(void)val;
			if (!key_in(key, keys, ARRAY_SIZE(keys)))
				return errbuf_fail(eb, -EINVAL, "unknown key \"%.64s\"", key);
		}
	}
	if (!json_object_object_get_ex(top, "cpus", &cpus))
		return errbuf_fail(eb, -EINVAL, "missing \"cpus\"");
	if (!json_object_is_type(cpus, json_type_array))
		return errbuf_fail(eb, -EINVAL, "\"cpus\" must be an array");
	n = json_object_array_length(cpus);
	if (n == 0)
		return errbuf_fail(eb, -EINVAL, "\"cpus\" is empty");
	if (n > CPUSET_MAX)
		return errbuf_fail(eb, -E2BIG, "\"cpus\" has %zu entries, more than %d", n, CPUSET_MAX);
	rows = calloc(n, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	cpuset_zero(&seen);
	for (size_t i = 0; i < n; i++) {
		r = parse_cpu_entry(json_object_array_get_idx(cpus, i), i, &rows[i], eb);
		if (r < 0)
			return r;
		if (cpuset_has(&seen, rows[i].cpu))
			return errbuf_fail(eb, -EINVAL, "cpus[%zu]: CPU %d listed twice", i, rows[i].cpu);
		cpuset_set(&seen, rows[i].cpu);
	}

	cpuset_zero(&offline);
	if (json_object_object_get_ex(top, "offline", &v)) {
		struct errbuf pwhy = { "" };

		if (!json_object_is_type(v, json_type_string))
			return errbuf_fail(eb, -EINVAL, "\"offline\" must be a CPU list string");
		r = cpuset_parse_n(json_object_get_string(v), (size_t)json_object_get_string_len(v),
				   &offline, &pwhy);
		if (r < 0)
			return errbuf_fail(eb, r == -ERANGE ? -E2BIG : -EINVAL, "\"offline\": %s",
					   pwhy.s);
	}

	r = topo_build(rows, (int)n, &offline, &t, eb);
	if (r < 0)
		return r;
	if ((r = check_summary(top, "sockets", t->n_sockets, eb)) < 0 ||
	    (r = check_summary(top, "numaNodes", t->n_numa, eb)) < 0 ||
	    (r = check_summary(top, "cores", t->n_cores, eb)) < 0 ||
	    (r = check_summary(top, "l3Caches", t->n_l3, eb)) < 0)
		return r;
	if (json_object_object_get_ex(top, "smtEnabled", &v)) {
		if (!json_object_is_type(v, json_type_boolean))
			return errbuf_fail(eb, -EINVAL, "\"smtEnabled\" must be true or false");
		if (json_object_get_boolean(v) != t->smt)
			return errbuf_fail(eb, -EINVAL, "\"smtEnabled\" is %s but the CPUs give %s",
				    t->smt ? "false" : "true", t->smt ? "true" : "false");
	}
	*ret = TAKE_PTR(t);
	return 0;
}

int topo_parse_json(const char *buf, size_t len, struct topo **ret, struct errbuf *eb)
{
	_cleanup_json_ struct json_object *top = NULL;
	int r;

	if (len > TOPO_JSON_MAX_BYTES)
		return errbuf_fail(eb, -E2BIG, "topology JSON of %zu bytes, more than %u", len,
			    TOPO_JSON_MAX_BYTES);
	r = jsonc_parse(buf, len, TOPO_JSON_MAX_DEPTH, &top, eb);
	if (r < 0)
		return r;
	return parse_top(top, ret, eb);
}

int topo_load_json_file(const char *path, struct topo **ret, struct errbuf *eb)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(TOPO_JSON_MAX_BYTES);
	int r;

	/* fileio names the path and says what a FIFO or a directory is. */
	r = fileio_read_at(AT_FDCWD, path, FILEIO_FOLLOW, &b, eb);
	if (r == -E2BIG)
		return errbuf_fail(eb, r, "%s: more than %u bytes", path, TOPO_JSON_MAX_BYTES);
	if (r < 0)
		return r;
	r = topo_parse_json(buf_str(&b), buf_len(&b), ret, eb);
	if (r < 0)
		return errbuf_wrap(eb, r, "%s", path);
	return 0;
}

int topo_write_json(const struct topo *t, FILE *f)
{
	_cleanup_free_ char *offline = cpuset_to_string(&t->offline);

	if (!offline)
		return -ENOMEM;
	(void)fputs("{\"cpus\": [", f);
	for (int i = 0; i < t->n_cpus; i++) {
		const struct topo_cpu *c = &t->cpus[i];

		(void)fprintf(f,
			      "%s{\"cpu\": %d, \"socket\": %d, \"numa\": %d, \"core\": %d, "
			      "\"coreId\": %d, \"l3\": %d, \"coreType\": \"%s\"}",
			      i ? ", " : "", c->cpu, c->socket, c->numa, c->core, c->core_id, c->l3,
			      topo_core_type_name(c->type));
	}
	(void)fprintf(f,
		      "], \"offline\": \"%s\", \"sockets\": %d, \"numaNodes\": %d, \"cores\": %d, "
		      "\"l3Caches\": %d, \"smtEnabled\": %s}\n",
		      offline, t->n_sockets, t->n_numa, t->n_cores, t->n_l3,
		      t->smt ? "true" : "false");
	if (ferror(f))
		return -EIO;
	return 0;
}
