/* owners: the exclusive CPUs and their owning cgroups, read from flags or
 * owners.json and placed in their hierarchy. See owners.h.
 */
#include "pinning/owners.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/errbuf.h"

/* ---- owners --------------------------------------------------------------------------- */

int verify_owners_new(struct verify_owners **ret)
{
	struct verify_owners *o = calloc(1, sizeof(*o));

	if (!o)
		return -ENOMEM;
	*ret = o;
	return 0;
}

static void owner_done(struct verify_owner *w)
{
	free(w->cgroup);
	free(w->path);
	free(w->claim);
	free(w->pod);
	free(w->container);
}

struct verify_owners *verify_owners_free(struct verify_owners *o)
{
	if (!o)
		return NULL;
	for (int i = 0; i < o->n; i++)
		owner_done(&o->v[i]);
	free(o->v);
	free(o->mount);
	free(o->scope);
	free(o->scope_path);
	free(o);
	return NULL;
}

int verify_owner_of(const struct verify_owners *o, int cpu)
{
	if (!cpuset_has(&o->exclusive, cpu))
		return -1;
	for (int i = 0; i < o->n; i++)
		if (cpuset_has(&o->v[i].cpus, cpu))
			return i;
	return -1;
}

/* One owner entry, already checked for syntax. labels may be NULL. */
struct entry {
	struct cpuset cpus;
	const char *cgroup; /* absolute */
	size_t cgroup_len;
	uint64_t id;
	const char *claim, *pod, *container;
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Appends ",add" to *claims unless it is there already. */
static int claims_add(char **claims, const char *add)
{
	size_t n, m;
	char *c;

	if (!add)
		return 0;
	if (!*claims) {
		*claims = strdup(add);
		return *claims ? 0 : -ENOMEM;
	}
	n = strlen(*claims);
	m = strlen(add);
	for (const char *p = *claims; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, add, m) && (p[m] == ',' || p[m] == 0))
			return 0;
	c = realloc(*claims, n + m + 2);
	if (!c)
		return -ENOMEM;
	c[n] = ',';
	memcpy(c + n + 1, add, m + 1);
	*claims = c;
	return 0;
}

static int add_entry(struct verify_owners *o, const struct entry *e, const char *what, struct errbuf *eb)
{
	_cleanup_free_ char *cg = NULL;
	struct verify_owner *w, *nv;
	size_t len = e->cgroup_len;
	int same = -1, r;

	if (cpuset_is_empty(&e->cpus))
		return errbuf_fail(eb, -EINVAL, "%s: the CPU list is empty", what);
	if (len >= PATH_MAX)
		return errbuf_fail(eb, -EINVAL, "%s: the cgroup path is longer than %d bytes", what,
			       PATH_MAX - 1);
	/* One spelling per directory ("/a//b/" is "/a/b"), so that the same
	 * cgroup given twice merges. */
	r = cgroup_path_normalize(e->cgroup, len, &cg);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return errbuf_fail(eb, -EINVAL, "%s: the cgroup must be an absolute directory path",
			       what);

	for (int i = 0; i < o->n; i++) {
		struct cpuset both;

		if (!strcmp(o->v[i].cgroup, cg)) {
			same = i;
			continue;
		}
		cpuset_and(&both, &o->v[i].cpus, &e->cpus);
		if (!cpuset_is_empty(&both))
			return errbuf_fail(eb, -EINVAL, "%s: CPU %d is exclusive to both %s and %s",
				       what, cpuset_first(&both), o->v[i].cgroup, cg);
	}
	if (same >= 0) {
		w = &o->v[same];
		if (e->id && w->cgroup_id && e->id != w->cgroup_id)
			return errbuf_fail(eb, -EINVAL,
				       "%s: %s is given with two cgroup ids, %" PRIu64 " and %" PRIu64,
				       what, cg, w->cgroup_id, e->id);
		if (claims_add(&w->claim, e->claim) < 0)
			return -ENOMEM;
		if (!w->pod && e->pod && !(w->pod = strdup(e->pod)))
			return -ENOMEM;
		if (!w->container && e->container && !(w->container = strdup(e->container)))
			return -ENOMEM;
		if (e->id)
			w->cgroup_id = e->id;
		cpuset_or(&w->cpus, &w->cpus, &e->cpus);
		cpuset_or(&o->exclusive, &o->exclusive, &e->cpus);
		return 0;
	}
	if (o->n >= VERIFY_OWNERS_MAX)
		return errbuf_fail(eb, -E2BIG, "%s: more than %d owners", what, VERIFY_OWNERS_MAX);
	nv = realloc(o->v, sizeof(*o->v) * (size_t)(o->n + 1));
	if (!nv)
		return -ENOMEM;
	o->v = nv;
	w = &o->v[o->n];
	*w = (struct verify_owner){ .cpus = e->cpus, .cgroup_id = e->id };
	w->claim = dup_or_null(e->claim);
	w->pod = dup_or_null(e->pod);
	w->container = dup_or_null(e->container);
	if ((e->claim && !w->claim) || (e->pod && !w->pod) || (e->container && !w->container)) {
		owner_done(w);
		return -ENOMEM;
	}
	w->cgroup = TAKE_PTR(cg);
	o->n++;
	cpuset_or(&o->exclusive, &o->exclusive, &e->cpus);
	return 0;
}

int verify_owners_add_flag(struct verify_owners *o, const char *arg, struct errbuf *eb)
{
	const char *eq = strchr(arg, '=');
	struct errbuf cpus_why = { "" };
	char what[64];
	struct entry e = { 0 };

	(void)snprintf(what, sizeof(what), "--exclusive %.40s%s", arg,
		       strlen(arg) > 40 ? "..." : "");
	if (!eq || eq == arg || !eq[1])
		return errbuf_fail(eb, -EINVAL, "%s: expected CPUS=CGROUP_PATH, such as 4-7=%s", what,
			       "/sys/fs/cgroup/kubepods.slice/...");
	if (cpuset_parse_n(arg, (size_t)(eq - arg), &e.cpus, &cpus_why) < 0)
		return errbuf_fail(eb, -EINVAL, "%s: \"%.*s\" is not a CPU list: %s", what,
			       (int)(eq - arg > 64 ? 64 : eq - arg), arg, cpus_why.s);
	e.cgroup = eq + 1;
	e.cgroup_len = strlen(eq + 1);
	return add_entry(o, &e, what, eb);
}

/* A string member of obj: NULL when absent; -EPROTO when not a string, over
 * max bytes or holding a NUL. */
static int get_string(struct json_object *obj, const char *key, size_t max, const char *what,
		      const char **ret, size_t *ret_len, struct errbuf *eb)
{
	struct json_object *v;
	size_t len;

	*ret = NULL;
	if (!json_object_object_get_ex(obj, key, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return errbuf_fail(eb, -EPROTO, "%s.%s: not a string", what, key);
	len = (size_t)json_object_get_string_len(v);
	if (len >= max)
		return errbuf_fail(eb, -EPROTO, "%s.%s: longer than %zu bytes", what, key, max - 1);
	if (memchr(json_object_get_string(v), 0, len))
		return errbuf_fail(eb, -EPROTO, "%s.%s: holds a NUL character", what, key);
	*ret = json_object_get_string(v);
	if (ret_len)
		*ret_len = len;
	return 0;
}

static int parse_entry(struct json_object *obj, const char *what, struct entry *e, struct errbuf *eb)
{
	struct errbuf cpus_why = { "" };
	struct json_object *v;
	const char *cpus;
	size_t cpus_len = 0;
	int r;

	if (!json_object_is_type(obj, json_type_object))
		return errbuf_fail(eb, -EPROTO, "%s: not an object", what);
	r = get_string(obj, "cpus", 4096, what, &cpus, &cpus_len, eb);
	if (r < 0)
		return r;
	if (!cpus)
		return errbuf_fail(eb, -EPROTO, "%s: no \"cpus\"", what);
	if (cpuset_parse_n(cpus, cpus_len, &e->cpus, &cpus_why) < 0)
		return errbuf_fail(eb, -EPROTO, "%s.cpus: \"%.64s\" is not a CPU list: %s", what, cpus,
			       cpus_why.s);
	r = get_string(obj, "cgroup", PATH_MAX, what, &e->cgroup, &e->cgroup_len, eb);
	if (r < 0)
		return r;
	if (!e->cgroup)
		return errbuf_fail(eb, -EPROTO, "%s: no \"cgroup\"", what);
	if (json_object_object_get_ex(obj, "cgroupId", &v) && !json_object_is_type(v, json_type_null)) {
		/* json-c keeps integers above INT64_MAX as uint64: then int64
		 * reads INT64_MAX, never negative. */
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) <= 0)
			return errbuf_fail(eb, -EPROTO, "%s.cgroupId: not a positive integer", what);
		e->id = json_object_get_uint64(v);
	}
	r = get_string(obj, "claim", VERIFY_LABEL_MAX, what, &e->claim, NULL, eb);
	if (r == 0)
		r = get_string(obj, "pod", VERIFY_LABEL_MAX, what, &e->pod, NULL, eb);
	if (r == 0)
		r = get_string(obj, "container", VERIFY_LABEL_MAX, what, &e->container, NULL, eb);
	return r;
}

int verify_owners_add_json(struct verify_owners *o, const char *buf, size_t len, struct errbuf *eb)
{
	struct json_tokener *tok;
	struct json_object *root, *arr;
	size_t end, n;
	int r = 0;

	if (len > VERIFY_STATE_MAX)
		return errbuf_fail(eb, -E2BIG, "owners.json: larger than %u bytes", VERIFY_STATE_MAX);
	if (len > INT_MAX)
		return -E2BIG;
	tok = json_tokener_new_ex(VERIFY_JSON_DEPTH);
	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, buf, (int)len);
	if (!root || json_tokener_get_error(tok) != json_tokener_success) {
		enum json_tokener_error err = json_tokener_get_error(tok);

		json_object_put(root);
		json_tokener_free(tok);
		return errbuf_fail(eb, -EPROTO, "owners.json: not JSON: %s",
			       err == json_tokener_continue ? "truncated"
							    : json_tokener_error_desc(err));
	}
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	for (; end < len; end++)
		if (!strchr(" \t\r\n", buf[end]) || !buf[end]) {
			json_object_put(root);
			return errbuf_fail(eb, -EPROTO, "owners.json: data after the JSON object");
		}
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "owners", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		json_object_put(root);
		return errbuf_fail(eb, -EPROTO, "owners.json: no \"owners\" array");
	}
	n = json_object_array_length(arr);
	if (n > VERIFY_OWNERS_MAX)
		r = errbuf_fail(eb, -E2BIG, "owners.json: more than %d entries", VERIFY_OWNERS_MAX);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct entry e = { 0 };
		char what[32];

		(void)snprintf(what, sizeof(what), "owners[%zu]", i);
		r = parse_entry(json_object_array_get_idx(arr, i), what, &e, eb);
		if (r == 0)
			r = add_entry(o, &e, what, eb);
	}
	json_object_put(root);
	return r;
}

/* ---- resolving ------------------------------------------------------------------------ */

/* One directory placed in a hierarchy (cgroup_place()), with the reason
 * in eb on failure. */
static int place(const struct cgroup_mounts *m, const char *dir, enum cgroup_hier *ret_hier,
		 char **ret_path, uint64_t *ret_id, struct errbuf *eb)
{
	int r = cgroup_place(m, dir, ret_hier, ret_path, ret_id);

	switch (r) {
	case 0:
	case -ENOMEM:
		return r;
	case -ENOENT:
		return errbuf_fail(eb, r, "cgroup %s does not exist", dir);
	case -ENOTDIR:
		return errbuf_fail(eb, r, "cgroup %s is not a directory", dir);
	case -EINVAL:
		return errbuf_fail(eb, r,
			       "%s is not a cgroup: not under the cgroup2 mount (%s) nor the cpuset "
			       "v1 one (%s)",
			       dir, m->h[CGROUP_V2].point ? m->h[CGROUP_V2].point : "none",
			       m->h[CGROUP_V1].point ? m->h[CGROUP_V1].point : "none");
	}
	return errbuf_fail(eb, r, "cgroup %s: %s", dir, strerror(-r));
}

static const char *mode_name(enum cgroup_hier mode)
{
	return mode == CGROUP_V1 ? "cpuset v1" : "cgroup2";
}

int verify_owners_resolve(struct verify_owners *o, const struct cgroup_mounts *mounts, struct errbuf *eb)
{
	enum cgroup_hier m;
	int mode = -1, r;
	uint64_t id;
	char *path;

	for (int i = 0; i < o->n; i++) {
		struct verify_owner *w = &o->v[i];

		r = place(mounts, w->cgroup, &m, &path, &id, eb);
		if (r < 0)
			return r;
		free(w->path);
		w->path = path;
		if (mode >= 0 && (int)m != mode)
			return errbuf_fail(eb, -EINVAL,
				       "owners are in two hierarchies; %s is in the %s one, %s in the "
				       "%s one",
				       o->v[0].cgroup, mode_name((enum cgroup_hier)mode), w->cgroup,
				       mode_name(m));
		mode = (int)m;
		if (w->cgroup_id && w->cgroup_id != id)
			return errbuf_fail(eb, -ESTALE,
				       "owners.json is stale: cgroup %s has id %" PRIu64 ", not %" PRIu64
				       " (recreated?)",
				       w->cgroup, id, w->cgroup_id);
		for (int j = 0; j < i; j++)
			if (o->v[j].cgroup_id == id)
				return errbuf_fail(eb, -EINVAL, "%s and %s are the same cgroup",
					       o->v[j].cgroup, w->cgroup);
		w->cgroup_id = id;
	}
	if (o->scope) {
		r = place(mounts, o->scope, &m, &path, &id, eb);
		if (r < 0)
			return r;
		free(o->scope_path);
		o->scope_path = path;
		if (mode >= 0 && (int)m != mode)
			return errbuf_fail(eb, -EINVAL, "--scope %s is in the %s hierarchy, the owners in "
						     "the %s one",
				       o->scope, mode_name(m), mode_name((enum cgroup_hier)mode));
		mode = (int)m;
	}
	o->mode = mode < 0 ? CGROUP_V2 : (enum cgroup_hier)mode;
	free(o->mount);
	o->mount = NULL;
	/* As the kernel names it, so that bpfmon finds the mount's root. */
	if (mounts->h[o->mode].point) {
		o->mount = realpath(mounts->h[o->mode].point, NULL);
		if (!o->mount && !(o->mount = strdup(mounts->h[o->mode].point)))
			return -ENOMEM;
	}
	return 0;
}

int verify_owners_set_scope(struct verify_owners *o, const char *path, struct errbuf *eb)
{
	size_t len = strlen(path);
	char *s;
	int r;

	if (len >= PATH_MAX)
		return errbuf_fail(eb, -EINVAL, "--scope: longer than %d bytes", PATH_MAX - 1);
	r = cgroup_path_normalize(path, len, &s);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return errbuf_fail(eb, -EINVAL, "--scope %s: must be an absolute cgroup directory",
			       path);
	free(o->scope);
	o->scope = s;
	return 0;
}

int verify_owners_check_cpus(const struct verify_owners *o, const struct cpuset *possible,
			     struct errbuf *eb)
{
	struct cpuset bad;
	char list[64];

	cpuset_andnot(&bad, &o->exclusive, possible);
	if (cpuset_is_empty(&bad))
		return 0;
	if (cpuset_format(possible, list, sizeof(list)) < 0)
		(void)snprintf(list, sizeof(list), "...");
	return errbuf_fail(eb, -EINVAL, "CPU %d does not exist on this node (possible: %s)",
		       cpuset_first(&bad), list);
}

/* ---- classification ------------------------------------------------------------------ */

enum verify_class verify_classify(const struct verify_owners *o, const char *path,
				  const struct cpuset *allowed, struct cpuset *ret_foreign)
{
	struct cpuset foreign, rest;

	cpuset_and(&foreign, allowed, &o->exclusive);
	if (!cpuset_is_empty(&foreign))
		for (int i = 0; i < o->n; i++)
			if (o->v[i].path && cgroup_path_is_under(path, o->v[i].path))
				cpuset_andnot(&foreign, &foreign, &o->v[i].cpus);
	if (ret_foreign)
		*ret_foreign = foreign;
	if (cpuset_is_empty(&foreign))
		return VERIFY_FINE;
	cpuset_andnot(&rest, allowed, &foreign);
	return cpuset_is_empty(&rest) ? VERIFY_PINNED : VERIFY_UNCONFINED;
}
