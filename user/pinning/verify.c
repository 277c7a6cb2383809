/* verify: owners, the /proc scan, the verdict and its rendering for
 * bpf-verify. See verify.h for the picture.
 *
 * Invariants:
 *   - owners' CPU sets are pairwise disjoint, never empty, and their union is
 *     o->exclusive; o->n <= VERIFY_OWNERS_MAX.
 *   - a report's cpus[] lists o->exclusive in ascending order, once each;
 *     seen[] holds at most one entry per (cpu, pid), found through
 *     seen_slots (open addressing, 2 * VERIFY_SEEN_MAX slots).
 *   - top[] is sorted by ticks, busiest first.
 */
#include "pinning/verify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "pinning.h"

#define SEEN_SLOTS (2 * VERIFY_SEEN_MAX)
#define PROC_FILE_MAX (64 * 1024)
#define TEXT_ROWS 20 /* foreign tasks per CPU in the text tables */

_Static_assert((SEEN_SLOTS & (SEEN_SLOTS - 1)) == 0, "a power of two");

static int why_set(char *why, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Writes the reason (when why is not NULL) and returns r. */
static int why_set(char *why, int r, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		(void)vsnprintf(why, VERIFY_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return r;
}

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

static int add_entry(struct verify_owners *o, const struct entry *e, const char *what, char *why)
{
	_cleanup_free_ char *cg = NULL;
	struct verify_owner *w, *nv;
	size_t len = e->cgroup_len;
	int same = -1, r;

	if (cpuset_is_empty(&e->cpus))
		return why_set(why, -EINVAL, "%s: the CPU list is empty", what);
	if (len >= PATH_MAX)
		return why_set(why, -EINVAL, "%s: the cgroup path is longer than %d bytes", what,
			       PATH_MAX - 1);
	/* One spelling per directory ("/a//b/" is "/a/b"), so that the same
	 * cgroup given twice merges. */
	r = cgroup_path_normalize(e->cgroup, len, &cg);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return why_set(why, -EINVAL, "%s: the cgroup must be an absolute directory path",
			       what);

	for (int i = 0; i < o->n; i++) {
		struct cpuset both;

		if (!strcmp(o->v[i].cgroup, cg)) {
			same = i;
			continue;
		}
		cpuset_and(&both, &o->v[i].cpus, &e->cpus);
		if (!cpuset_is_empty(&both))
			return why_set(why, -EINVAL, "%s: CPU %d is exclusive to both %s and %s",
				       what, cpuset_first(&both), o->v[i].cgroup, cg);
	}
	if (same >= 0) {
		w = &o->v[same];
		if (e->id && w->cgroup_id && e->id != w->cgroup_id)
			return why_set(why, -EINVAL,
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
		return why_set(why, -E2BIG, "%s: more than %d owners", what, VERIFY_OWNERS_MAX);
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

int verify_owners_add_flag(struct verify_owners *o, const char *arg, char *why)
{
	const char *eq = strchr(arg, '=');
	char cpus_why[CPUSET_ERR_MAX] = "", what[64];
	struct entry e = { 0 };

	(void)snprintf(what, sizeof(what), "--exclusive %.40s%s", arg,
		       strlen(arg) > 40 ? "..." : "");
	if (!eq || eq == arg || !eq[1])
		return why_set(why, -EINVAL, "%s: expected CPUS=CGROUP_PATH, such as 4-7=%s", what,
			       "/sys/fs/cgroup/kubepods.slice/...");
	if (cpuset_parse_n(arg, (size_t)(eq - arg), &e.cpus, cpus_why) < 0)
		return why_set(why, -EINVAL, "%s: \"%.*s\" is not a CPU list: %s", what,
			       (int)(eq - arg > 64 ? 64 : eq - arg), arg, cpus_why);
	e.cgroup = eq + 1;
	e.cgroup_len = strlen(eq + 1);
	return add_entry(o, &e, what, why);
}

/* A string member of obj: NULL when absent; -EPROTO when not a string, over
 * max bytes or holding a NUL. */
static int get_string(struct json_object *obj, const char *key, size_t max, const char *what,
		      const char **ret, size_t *ret_len, char *why)
{
	struct json_object *v;
	size_t len;

	*ret = NULL;
	if (!json_object_object_get_ex(obj, key, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return why_set(why, -EPROTO, "%s.%s: not a string", what, key);
	len = (size_t)json_object_get_string_len(v);
	if (len >= max)
		return why_set(why, -EPROTO, "%s.%s: longer than %zu bytes", what, key, max - 1);
	if (memchr(json_object_get_string(v), 0, len))
		return why_set(why, -EPROTO, "%s.%s: holds a NUL character", what, key);
	*ret = json_object_get_string(v);
	if (ret_len)
		*ret_len = len;
	return 0;
}

static int parse_entry(struct json_object *obj, const char *what, struct entry *e, char *why)
{
	char cpus_why[CPUSET_ERR_MAX] = "";
	struct json_object *v;
	const char *cpus;
	size_t cpus_len = 0;
	int r;

	if (!json_object_is_type(obj, json_type_object))
		return why_set(why, -EPROTO, "%s: not an object", what);
	r = get_string(obj, "cpus", 4096, what, &cpus, &cpus_len, why);
	if (r < 0)
		return r;
	if (!cpus)
		return why_set(why, -EPROTO, "%s: no \"cpus\"", what);
	if (cpuset_parse_n(cpus, cpus_len, &e->cpus, cpus_why) < 0)
		return why_set(why, -EPROTO, "%s.cpus: \"%.64s\" is not a CPU list: %s", what, cpus,
			       cpus_why);
	r = get_string(obj, "cgroup", PATH_MAX, what, &e->cgroup, &e->cgroup_len, why);
	if (r < 0)
		return r;
	if (!e->cgroup)
		return why_set(why, -EPROTO, "%s: no \"cgroup\"", what);
	if (json_object_object_get_ex(obj, "cgroupId", &v) && !json_object_is_type(v, json_type_null)) {
		/* json-c keeps integers above INT64_MAX as uint64: then int64
		 * reads INT64_MAX, never negative. */
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) <= 0)
			return why_set(why, -EPROTO, "%s.cgroupId: not a positive integer", what);
		e->id = json_object_get_uint64(v);
	}
	r = get_string(obj, "claim", VERIFY_LABEL_MAX, what, &e->claim, NULL, why);
	if (r == 0)
		r = get_string(obj, "pod", VERIFY_LABEL_MAX, what, &e->pod, NULL, why);
	if (r == 0)
		r = get_string(obj, "container", VERIFY_LABEL_MAX, what, &e->container, NULL, why);
	return r;
}

int verify_owners_add_json(struct verify_owners *o, const char *buf, size_t len, char *why)
{
	struct json_tokener *tok;
	struct json_object *root, *arr;
	size_t end, n;
	int r = 0;

	if (len > VERIFY_STATE_MAX)
		return why_set(why, -E2BIG, "owners.json: larger than %u bytes", VERIFY_STATE_MAX);
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
		return why_set(why, -EPROTO, "owners.json: not JSON: %s",
			       err == json_tokener_continue ? "truncated"
							    : json_tokener_error_desc(err));
	}
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	for (; end < len; end++)
		if (!strchr(" \t\r\n", buf[end]) || !buf[end]) {
			json_object_put(root);
			return why_set(why, -EPROTO, "owners.json: data after the JSON object");
		}
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "owners", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		json_object_put(root);
		return why_set(why, -EPROTO, "owners.json: no \"owners\" array");
	}
	n = json_object_array_length(arr);
	if (n > VERIFY_OWNERS_MAX)
		r = why_set(why, -E2BIG, "owners.json: more than %d entries", VERIFY_OWNERS_MAX);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct entry e = { 0 };
		char what[32];

		(void)snprintf(what, sizeof(what), "owners[%zu]", i);
		r = parse_entry(json_object_array_get_idx(arr, i), what, &e, why);
		if (r == 0)
			r = add_entry(o, &e, what, why);
	}
	json_object_put(root);
	return r;
}

/* ---- resolving ------------------------------------------------------------------------ */

/* One directory placed in a hierarchy (cgroup_place()), with the reason
 * in why on failure. */
static int place(const struct cgroup_mounts *m, const char *dir, enum cgroup_hier *ret_hier,
		 char **ret_path, uint64_t *ret_id, char *why)
{
	int r = cgroup_place(m, dir, ret_hier, ret_path, ret_id);

	switch (r) {
	case 0:
	case -ENOMEM:
		return r;
	case -ENOENT:
		return why_set(why, r, "cgroup %s does not exist", dir);
	case -ENOTDIR:
		return why_set(why, r, "cgroup %s is not a directory", dir);
	case -EINVAL:
		return why_set(why, r,
			       "%s is not a cgroup: not under the cgroup2 mount (%s) nor the cpuset "
			       "v1 one (%s)",
			       dir, m->h[CGROUP_V2].point ? m->h[CGROUP_V2].point : "none",
			       m->h[CGROUP_V1].point ? m->h[CGROUP_V1].point : "none");
	}
	return why_set(why, r, "cgroup %s: %s", dir, strerror(-r));
}

static const char *mode_name(enum cgroup_hier mode)
{
	return mode == CGROUP_V1 ? "cpuset v1" : "cgroup2";
}

int verify_owners_resolve(struct verify_owners *o, const struct cgroup_mounts *mounts, char *why)
{
	enum cgroup_hier m;
	int mode = -1, r;
	uint64_t id;
	char *path;

	for (int i = 0; i < o->n; i++) {
		struct verify_owner *w = &o->v[i];

		r = place(mounts, w->cgroup, &m, &path, &id, why);
		if (r < 0)
			return r;
		free(w->path);
		w->path = path;
		if (mode >= 0 && (int)m != mode)
			return why_set(why, -EINVAL,
				       "owners are in two hierarchies; %s is in the %s one, %s in the "
				       "%s one",
				       o->v[0].cgroup, mode_name((enum cgroup_hier)mode), w->cgroup,
				       mode_name(m));
		mode = (int)m;
		if (w->cgroup_id && w->cgroup_id != id)
			return why_set(why, -ESTALE,
				       "owners.json is stale: cgroup %s has id %" PRIu64 ", not %" PRIu64
				       " (recreated?)",
				       w->cgroup, id, w->cgroup_id);
		for (int j = 0; j < i; j++)
			if (o->v[j].cgroup_id == id)
				return why_set(why, -EINVAL, "%s and %s are the same cgroup",
					       o->v[j].cgroup, w->cgroup);
		w->cgroup_id = id;
	}
	if (o->scope) {
		r = place(mounts, o->scope, &m, &path, &id, why);
		if (r < 0)
			return r;
		free(o->scope_path);
		o->scope_path = path;
		if (mode >= 0 && (int)m != mode)
			return why_set(why, -EINVAL, "--scope %s is in the %s hierarchy, the owners in "
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

int verify_owners_set_scope(struct verify_owners *o, const char *path, char *why)
{
	size_t len = strlen(path);
	char *s;
	int r;

	if (len >= PATH_MAX)
		return why_set(why, -EINVAL, "--scope: longer than %d bytes", PATH_MAX - 1);
	r = cgroup_path_normalize(path, len, &s);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return why_set(why, -EINVAL, "--scope %s: must be an absolute cgroup directory",
			       path);
	free(o->scope);
	o->scope = s;
	return 0;
}

int verify_owners_check_cpus(const struct verify_owners *o, const struct cpuset *possible,
			     char *why)
{
	struct cpuset bad;
	char list[64];

	cpuset_andnot(&bad, &o->exclusive, possible);
	if (cpuset_is_empty(&bad))
		return 0;
	if (cpuset_format(possible, list, sizeof(list)) < 0)
		(void)snprintf(list, sizeof(list), "...");
	return why_set(why, -EINVAL, "CPU %d does not exist on this node (possible: %s)",
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

/* ---- the report ----------------------------------------------------------------------- */

int verify_report_new(const struct verify_owners *o, bool strict_kthreads,
		      struct verify_report **ret)
{
	struct verify_report *r = calloc(1, sizeof(*r));
	int n = cpuset_count(&o->exclusive), i = 0;

	if (!r)
		return -ENOMEM;
	r->cpus = calloc((size_t)(n ? n : 1), sizeof(*r->cpus));
	r->owner_tasks = calloc((size_t)(o->n ? o->n : 1), sizeof(*r->owner_tasks));
	r->seen_slots = calloc(SEEN_SLOTS, sizeof(*r->seen_slots));
	r->seen = calloc(VERIFY_SEEN_MAX, sizeof(*r->seen));
	if (!r->cpus || !r->owner_tasks || !r->seen_slots || !r->seen) {
		verify_report_free(r);
		return -ENOMEM;
	}
	r->owners = o;
	r->strict_kthreads = strict_kthreads;
	CPUSET_FOREACH(cpu, &o->exclusive)
	{
		r->cpus[i].cpu = cpu;
		r->cpus[i].owner = verify_owner_of(o, cpu);
		i++;
	}
	r->ncpus = n;
	*ret = r;
	return 0;
}

struct verify_report *verify_report_free(struct verify_report *r)
{
	if (!r)
		return NULL;
	for (int i = 0; i < r->nseen; i++)
		free(r->seen[i].cgroup);
	for (int i = 0; i < r->npinned; i++)
		free(r->pinned[i].cgroup);
	for (int i = 0; i < r->ntop; i++) {
		free(r->top[i].cgroup);
		free(r->top[i].allowed);
	}
	free(r->seen);
	free(r->seen_slots);
	free(r->pinned);
	free(r->cpus);
	free(r->owner_tasks);
	free(r);
	return NULL;
}

void verify_report_note(struct verify_report *r, const char *fmt, ...)
{
	size_t len = strlen(r->notes);
	va_list ap;

	if (len && len < sizeof(r->notes) - 2) {
		r->notes[len++] = ';';
		r->notes[len++] = ' ';
		r->notes[len] = 0;
	}
	va_start(ap, fmt);
	(void)vsnprintf(r->notes + len, sizeof(r->notes) - len, fmt, ap);
	va_end(ap);
}

static struct verify_cpu *report_cpu(const struct verify_report *r, int cpu)
{
	for (int i = 0; i < r->ncpus; i++)
		if (r->cpus[i].cpu == cpu)
			return &r->cpus[i];
	return NULL;
}

/* A user task is outside the scope when its cgroup is known and not under it. */
static bool is_outside(const struct verify_report *r, uint32_t kind, const char *cgroup)
{
	return kind == PINNING_KIND_USER && r->owners->scope_path && cgroup &&
	       !cgroup_path_is_under(cgroup, r->owners->scope_path);
}

int verify_report_add_event(struct verify_report *r, const struct pinning_event *e,
			    const char *cgroup)
{
	uint32_t h = (e->pid * 2654435761u) ^ (e->cpu * 40503u);
	uint64_t t = e->ts_ns - r->t0_ns;
	bool outside = is_outside(r, e->kind, cgroup);
	struct verify_seen *s;

	if (e->ts_ns < r->t0_ns || (r->t1_ns && e->ts_ns > r->t1_ns) ||
	    !report_cpu(r, (int)e->cpu) ||
	    (e->kind != PINNING_KIND_USER && e->kind != PINNING_KIND_KTHREAD_UNBOUND))
		return 0;
	for (uint32_t i = 0; i < SEEN_SLOTS; i++) {
		int *slot = &r->seen_slots[(h + i) & (SEEN_SLOTS - 1)];

		if (*slot) {
			s = &r->seen[*slot - 1];
			if (s->cpu != (int)e->cpu || s->pid != e->pid)
				continue;
			/* A task that moved cgroups: once seen inside the scope it
			 * stays inside (conservative); the latest such cgroup is
			 * the one shown. */
			if (cgroup && (!outside || s->outside) &&
			    (!s->cgroup || strcmp(s->cgroup, cgroup))) {
				char *c = strdup(cgroup);

				if (!c)
					return -ENOMEM;
				free(s->cgroup);
				s->cgroup = c;
			}
			s->outside = s->outside && outside;
		} else {
			if (r->nseen == VERIFY_SEEN_MAX) {
				r->seen_untracked++;
				return 0;
			}
			s = &r->seen[r->nseen];
			*s = (struct verify_seen){ .cpu = (int)e->cpu, .pid = e->pid, .tgid = e->tgid,
						   .kind = e->kind, .first_ns = t, .outside = outside };
			if (cgroup && !(s->cgroup = strdup(cgroup)))
				return -ENOMEM;
			*slot = ++r->nseen;
		}
		/* The latest name wins: a task may exec meanwhile. */
		memcpy(s->comm, e->comm, sizeof(s->comm));
		s->comm[sizeof(s->comm) - 1] = 0;
		s->switches++;
		s->last_ns = t;
		return 0;
	}
	r->seen_untracked++; /* unreachable: the table is never more than half full */
	return 0;
}

void verify_report_set_counters(struct verify_report *r, int cpu,
				const struct bpfmon_counters *b, const struct bpfmon_counters *a)
{
	struct verify_cpu *c = report_cpu(r, cpu);

	if (!c)
		return;
	c->c.switches = a->switches - b->switches;
	c->c.owner_switches = a->owner_switches - b->owner_switches;
	for (int k = 0; k < PINNING_KIND_MAX; k++) {
		c->c.violations[k] = a->violations[k] - b->violations[k];
		c->c.foreign_ns[k] = a->foreign_ns[k] - b->foreign_ns[k];
	}
	c->c.events_sent = a->events_sent - b->events_sent;
	c->c.events_ratelimited = a->events_ratelimited - b->events_ratelimited;
	c->c.events_dropped = a->events_dropped - b->events_dropped;
	c->c.denials = a->denials - b->denials;
	c->counted = true;
}

/* ---- the static scan ------------------------------------------------------------------ */

/* Reads a /proc file (size 0 in stat: read until EOF) into buf. -E2BIG when
 * it does not fit. */
static int read_at(int dfd, const char *name, char *buf, size_t size, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == size - 1)
			return -E2BIG;
	}
	buf[len] = 0;
	*ret_len = len;
	return 0;
}

/* A /proc directory name that is a pid: its value, else -1. */
static int pid_of(const char *s)
{
	int v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (INT_MAX - (*s - '0')) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

struct task {
	int pid, tid, tgid;
	char comm[PROCFS_COMM_MAX];
	char cgroup[PATH_MAX];
	struct cpuset allowed;
	unsigned flags;
	uint64_t ticks;
};

/* -ENOENT/-ESRCH: the task is gone. */
static int read_task(int tdfd, enum cgroup_hier mode, char *buf, struct task *t)
{
	struct procfs_status status;
	struct procfs_stat stat;
	size_t len;
	int r;

	r = read_at(tdfd, "status", buf, PROC_FILE_MAX, &len);
	if (r == 0)
		r = procfs_status_parse(buf, len, &status);
	if (r == 0) {
		memcpy(t->comm, status.name, sizeof(t->comm));
		t->tgid = status.tgid;
		t->allowed = status.allowed;
		r = read_at(tdfd, "stat", buf, PROC_FILE_MAX, &len);
	}
	if (r == 0)
		r = procfs_stat_parse(buf, len, &stat);
	if (r == 0) {
		t->flags = stat.flags;
		t->ticks = stat.ticks;
	}
	if (r == 0)
		r = read_at(tdfd, "cgroup", buf, PROC_FILE_MAX, &len);
	/* A zombie thread has an empty cgroup file: gone for our purpose. */
	if (r == 0 && len == 0)
		r = -ESRCH;
	if (r == 0)
		r = cgroup_of_task(buf, len, mode, t->cgroup, sizeof(t->cgroup));
	return r;
}

static int add_pinned(struct verify_report *r, const struct task *t)
{
	struct verify_pinned *p;

	if (r->npinned == r->pinned_cap) {
		int cap = r->pinned_cap ? 2 * r->pinned_cap : 16;
		struct verify_pinned *np = realloc(r->pinned, sizeof(*np) * (size_t)cap);

		if (!np)
			return -ENOMEM;
		r->pinned = np;
		r->pinned_cap = cap;
	}
	p = &r->pinned[r->npinned];
	*p = (struct verify_pinned){ .tid = t->tid, .pid = t->pid, .allowed = t->allowed,
				     .kthread = !!(t->flags & PROCFS_PF_KTHREAD) };
	memcpy(p->comm, t->comm, sizeof(p->comm));
	p->cgroup = strdup(t->cgroup);
	if (!p->cgroup)
		return -ENOMEM;
	r->npinned++;
	return 0;
}

/* One process's unconfined threads, summed, into the busiest-first top. */
static int add_unconfined(struct verify_report *r, const struct verify_unconfined *u)
{
	struct verify_unconfined *last = &r->top[VERIFY_TOP - 1];
	int i;

	r->unconfined_procs++;
	if (r->ntop == VERIFY_TOP && u->ticks <= last->ticks)
		return 0;
	if (r->ntop == VERIFY_TOP) {
		free(last->cgroup);
		free(last->allowed);
		r->ntop--;
	}
	for (i = r->ntop; i > 0 && r->top[i - 1].ticks < u->ticks; i--)
		r->top[i] = r->top[i - 1];
	r->top[i] = *u;
	r->top[i].cgroup = strdup(u->cgroup);
	r->top[i].allowed = strdup(u->allowed);
	r->ntop++;
	if (!r->top[i].cgroup || !r->top[i].allowed)
		return -ENOMEM;
	return 0;
}

/* Every thread of one process; pdfd is /proc/<pid>. */
static int scan_process(struct verify_report *r, int pdfd, int pid, char *buf, struct task *t)
{
	struct verify_unconfined u = { .pid = pid };
	_cleanup_free_ char *allowed = NULL;
	char cg[PATH_MAX] = "";
	int tfd = openat(pdfd, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (tfd < 0)
		return 0; /* gone */
	d = fdopendir(tfd);
	if (!d) {
		(void)close(tfd);
		return -errno;
	}
	while (ret == 0 && (de = readdir(d))) {
		_cleanup_close_ int tdfd = -1;
		enum verify_class cls;
		int rr;

		if (pid_of(de->d_name) < 0)
			continue;
		tdfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (tdfd < 0)
			continue;
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		t->tid = pid_of(de->d_name);
		rr = read_task(tdfd, r->owners->mode, buf, t);
		if (rr == -ENOENT || rr == -ESRCH)
			continue;
		if (rr < 0) {
			r->unreadable++;
			continue;
		}
		r->threads++;
		for (int i = 0; i < r->owners->n; i++)
			if (r->owners->v[i].path && cgroup_path_is_under(t->cgroup, r->owners->v[i].path))
				r->owner_tasks[i]++;
		cls = verify_classify(r->owners, t->cgroup, &t->allowed, NULL);
		if (cls != VERIFY_FINE && !(t->flags & PROCFS_PF_KTHREAD) && r->owners->scope_path &&
		    !cgroup_path_is_under(t->cgroup, r->owners->scope_path)) {
			if (cls == VERIFY_PINNED)
				r->outside_pinned++;
			else
				r->outside_unconfined++;
		} else if (cls == VERIFY_PINNED) {
			ret = add_pinned(r, t);
		} else if (cls == VERIFY_UNCONFINED && (t->flags & PROCFS_PF_KTHREAD)) {
			r->unconfined_kthreads++;
		} else if (cls == VERIFY_UNCONFINED) {
			r->unconfined_threads++;
			if (!u.threads++) {
				memcpy(u.comm, t->comm, sizeof(u.comm));
				memcpy(cg, t->cgroup, sizeof(cg));
				allowed = cpuset_to_string(&t->allowed);
				if (!allowed)
					ret = -ENOMEM;
			}
			u.ticks += t->ticks;
		}
	}
	(void)closedir(d);
	if (ret == 0 && u.threads) {
		u.cgroup = cg;
		u.allowed = allowed;
		ret = add_unconfined(r, &u);
	}
	return ret;
}

int verify_report_scan(struct verify_report *r, const char *proc_root)
{
	struct dirent *de;
	struct task *t;
	char *buf;
	DIR *d;
	int ret = 0;

	d = opendir(proc_root);
	if (!d)
		return -errno;
	buf = malloc(PROC_FILE_MAX);
	t = malloc(sizeof(*t));
	if (!buf || !t)
		ret = -ENOMEM;
	while (ret == 0 && (de = readdir(d))) {
		_cleanup_close_ int pdfd = -1;

		if (pid_of(de->d_name) < 0)
			continue;
		pdfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pdfd < 0)
			continue;
		ret = scan_process(r, pdfd, pid_of(de->d_name), buf, t);
	}
	(void)closedir(d);
	free(buf);
	free(t);
	if (ret < 0)
		return ret;
	r->scanned = true;
	return r->threads;
}

/* ---- verdict and rendering ------------------------------------------------------------ */

void verify_report_tally(const struct verify_report *r, struct verify_tally *ret)
{
	struct verify_tally t = { 0 };
	uint64_t counted = 0, named = 0;
	bool kthreads, have_counts = false;

	for (int i = 0; i < r->ncpus; i++) {
		const struct bpfmon_counters *c = &r->cpus[i].c;

		have_counts |= r->cpus[i].counted;
		counted += c->violations[PINNING_KIND_USER];
		t.kthread_switches += c->violations[PINNING_KIND_KTHREAD] +
				      c->violations[PINNING_KIND_KTHREAD_UNBOUND];
	}
	for (int i = 0; i < r->nseen; i++) {
		const struct verify_seen *s = &r->seen[i];

		if (s->kind != PINNING_KIND_USER) {
			t.kthreads_named++;
			continue;
		}
		named += s->switches;
		if (s->outside) {
			t.outside_tasks++;
			t.outside_switches += s->switches;
		} else {
			t.running_tasks++;
		}
	}
	/* The counters say exactly which switch-ins sent no event; the events
	 * themselves may number a few more (those at the window's edges). */
	t.unattributed = r->seen_untracked;
	for (int i = 0; i < r->ncpus; i++)
		t.unattributed += r->cpus[i].c.events_ratelimited + r->cpus[i].c.events_dropped;
	if (have_counts && !r->events)
		t.unattributed = counted;
	if (!have_counts || counted < named)
		counted = named; /* events only */
	/* Without a scope the kernel's count is the truth. With one, only
	 * events can place a task inside or outside it: switch-ins no event
	 * named leave the verdict open. */
	if (r->owners->scope_path) {
		t.running = named - t.outside_switches;
		t.incomplete = t.unattributed > 0;
	} else {
		t.running = counted;
	}
	for (int i = 0; i < r->npinned; i++) {
		if (r->pinned[i].kthread)
			t.kthreads_pinned++;
		else
			t.pinned++;
	}
	t.outside_pinned = r->outside_pinned;
	kthreads = t.kthread_switches || t.kthreads_pinned || t.kthreads_named;
	t.violation = t.running || t.running_tasks || t.pinned || (r->strict_kthreads && kthreads);
	t.exit_code = t.violation ? 1 : t.incomplete ? 2 : 0;
	*ret = t;
}

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case PINNING_KIND_USER:
		return "user";
	case PINNING_KIND_KTHREAD:
		return "kthread";
	case PINNING_KIND_KTHREAD_UNBOUND:
		return "kthread_unbound";
	}
	return "?";
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static double tick_secs(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);

	return (double)ticks / (double)(hz > 0 ? hz : 100);
}

/* snprintf at *n into buf, *n stays within size. */
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n >= size - 1)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *n, size - *n, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n = *n + (size_t)k < size - 1 ? *n + (size_t)k : size - 1;
}

/* The verdict, one line without "verdict: " and the newline. */
static void verdict_line(const struct verify_report *r, const struct verify_tally *t, char *buf,
			 size_t size)
{
	bool kthreads = t->kthread_switches || t->kthreads_pinned || t->kthreads_named;
	char cpus[128];
	size_t n = 0;

	buf[0] = 0;
	if (cpuset_format(&r->owners->exclusive, cpus, sizeof(cpus)) < 0)
		(void)snprintf(cpus + sizeof(cpus) - 4, 4, "...");
	if (!r->ncpus) {
		append(buf, size, &n, "clean: no exclusive CPUs to check");
		return;
	}
	if (!t->violation && t->incomplete) {
		append(buf, size, &n,
		       "INCOMPLETE on CPU %s: %" PRIu64 " foreign switch-ins went unnamed (events "
		       "rate-limited or dropped) and may be inside --scope %s: run again, or without "
		       "--scope",
		       cpus, t->unattributed, r->owners->scope_path);
	} else if (!t->violation) {
		append(buf, size, &n,
		       "clean: only owners ran on CPU %s for %.2f s and no foreign task is pinned "
		       "to them",
		       cpus, r->duration_s);
	} else {
		const char *sep = "";

		append(buf, size, &n, "VIOLATION on CPU %s: ", cpus);
		if (t->running || t->running_tasks) {
			append(buf, size, &n, "foreign tasks ran there (%" PRIu64 " switch-ins, %d task%s named)",
			       t->running, t->running_tasks, t->running_tasks == 1 ? "" : "s");
			sep = "; ";
		}
		if (t->pinned) {
			append(buf, size, &n, "%s%d foreign task%s pinned there", sep, t->pinned,
			       t->pinned == 1 ? " is" : "s are");
			sep = "; ";
		}
		if (r->strict_kthreads && kthreads)
			append(buf, size, &n, "%skernel threads ran or are bound there", sep);
	}
	append(buf, size, &n,
	       " (kernel threads: %" PRIu64 " switch-ins, %d bound, %d unbound named; %s)",
	       t->kthread_switches, t->kthreads_pinned, t->kthreads_named,
	       r->strict_kthreads ? "counted: --strict-kthreads" : "not counted");
	if (r->owners->scope_path)
		append(buf, size, &n,
		       " (outside --scope %s: %d task%s ran, %" PRIu64 " switch-ins, %d pinned; not "
		       "counted)",
		       r->owners->scope_path, t->outside_tasks, t->outside_tasks == 1 ? "" : "s",
		       t->outside_switches, t->outside_pinned);
}

static void print_owner(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	const struct verify_owner *w = &r->owners->v[c->owner];

	fprintf(f, "CPU %d: owner %s (cgroup id %" PRIu64, c->cpu, w->path ? w->path : w->cgroup,
		w->cgroup_id);
	if (w->claim)
		fprintf(f, ", claim %s", w->claim);
	if (w->pod)
		fprintf(f, ", pod %s", w->pod);
	if (w->container)
		fprintf(f, ", container %s", w->container);
	if (r->scanned)
		fprintf(f, ", %d thread%s in it", r->owner_tasks[c->owner],
			r->owner_tasks[c->owner] == 1 ? "" : "s");
	fprintf(f, ")\n");
}

static int by_switches(const void *a, const void *b)
{
	const struct verify_seen *x = *(const struct verify_seen *const *)a;
	const struct verify_seen *y = *(const struct verify_seen *const *)b;

	if (x->switches != y->switches)
		return x->switches < y->switches ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Which seen[] entries: user tasks inside the scope (or no scope), user
 * tasks outside it, unbound kernel threads. */
enum sel { SEL_USER, SEL_OUTSIDE, SEL_KTHREAD, SEL_MAX };

static bool selected(const struct verify_seen *s, enum sel sel)
{
	if (sel == SEL_KTHREAD)
		return s->kind != PINNING_KIND_USER;
	return s->kind == PINNING_KIND_USER && s->outside == (sel == SEL_OUTSIDE);
}

/* The seen[] entries of cpu that sel selects, busiest first, in a new array
 * (*ret, caller frees; NULL only when out of memory). */
static int seen_sorted(const struct verify_report *r, int cpu, enum sel sel,
		       const struct verify_seen ***ret)
{
	const struct verify_seen **v = calloc((size_t)r->nseen + 1, sizeof(*v));
	int n = 0;

	*ret = v;
	if (!v)
		return 0;
	for (int i = 0; i < r->nseen; i++)
		if (r->seen[i].cpu == cpu && selected(&r->seen[i], sel))
			v[n++] = &r->seen[i];
	qsort(v, (size_t)n, sizeof(*v), by_switches);
	return n;
}

static void print_cpu(const struct verify_report *r, const struct verify_cpu *c, FILE *f)
{
	const struct bpfmon_counters *k = &c->c;
	const struct verify_seen **v = NULL;
	int n = 0, kn = 0;

	print_owner(r, c, f);
	if (r->watched && c->counted) {
		fprintf(f,
			"  switch-ins %" PRIu64 ": owner %" PRIu64 ", foreign user %" PRIu64
			" (%.4f s), kernel threads %" PRIu64 " (%.4f s), unbound kernel threads %" PRIu64
			" (%.4f s)\n",
			k->switches, k->owner_switches, k->violations[PINNING_KIND_USER],
			secs(k->foreign_ns[PINNING_KIND_USER]), k->violations[PINNING_KIND_KTHREAD],
			secs(k->foreign_ns[PINNING_KIND_KTHREAD]),
			k->violations[PINNING_KIND_KTHREAD_UNBOUND],
			secs(k->foreign_ns[PINNING_KIND_KTHREAD_UNBOUND]));
		if (k->events_dropped || k->events_ratelimited)
			fprintf(f,
				"  names incomplete: %" PRIu64 " events dropped (ring buffer full), %" PRIu64
				" rate-limited\n",
				k->events_dropped, k->events_ratelimited);
	}
	n = seen_sorted(r, c->cpu, SEL_USER, &v);
	for (int i = 0; i < n && i < TEXT_ROWS; i++) {
		const struct verify_seen *s = v[i];

		if (!i)
			fprintf(f, "  foreign tasks that ran here:\n    %-8s %-8s %-16s %8s %8s %8s  %s\n",
				"PID", "TGID", "COMM", "SWITCHES", "FIRST_S", "LAST_S", "CGROUP");
		fprintf(f, "    %-8u %-8u %-16s %8" PRIu64 " %8.3f %8.3f  %s\n", s->pid, s->tgid,
			s->comm, s->switches, secs(s->first_ns), secs(s->last_ns),
			s->cgroup ? s->cgroup : "?");
	}
	if (n > TEXT_ROWS)
		fprintf(f, "    ... %d more (--json lists them all)\n", n - TEXT_ROWS);
	free(v);
	v = NULL;
	if (r->owners->scope_path) {
		uint64_t sw = 0;

		n = seen_sorted(r, c->cpu, SEL_OUTSIDE, &v);
		for (int i = 0; i < n; i++)
			sw += v[i]->switches;
		if (n)
			fprintf(f, "  outside --scope (not counted): %d task%s, %" PRIu64 " switch-ins\n",
				n, n == 1 ? "" : "s", sw);
		free(v);
		v = NULL;
	}
	n = seen_sorted(r, c->cpu, SEL_KTHREAD, &v);
	for (int i = 0; i < n && i < TEXT_ROWS; i++)
		fprintf(f, "%s %s (pid %u) x%" PRIu64, i ? "," : "  unbound kernel threads that ran here:",
			v[i]->comm, v[i]->pid, v[i]->switches);
	if (n > TEXT_ROWS)
		fprintf(f, ", ... (%d)", n);
	if (n)
		fprintf(f, " (%s)\n", r->strict_kthreads ? "counted" : "not counted");
	free(v);
	n = 0;
	for (int i = 0; i < r->npinned; i++) {
		const struct verify_pinned *p = &r->pinned[i];
		char allowed[64];

		if (p->kthread || !cpuset_has(&p->allowed, c->cpu))
			continue;
		if (cpuset_format(&p->allowed, allowed, sizeof(allowed)) < 0)
			(void)snprintf(allowed + sizeof(allowed) - 4, 4, "...");
		if (!n++)
			fprintf(f, "  foreign tasks pinned here (no other CPU allowed):\n"
				   "    %-8s %-8s %-16s %-16s  %s\n",
				"TID", "PID", "COMM", "ALLOWED", "CGROUP");
		fprintf(f, "    %-8d %-8d %-16s %-16s  %s\n", p->tid, p->pid, p->comm, allowed,
			p->cgroup);
	}
	for (int i = 0; i < r->npinned; i++) {
		const struct verify_pinned *p = &r->pinned[i];

		if (!p->kthread || !cpuset_has(&p->allowed, c->cpu))
			continue;
		if (!kn++)
			fprintf(f, "  kernel threads bound here (%s):",
				r->strict_kthreads ? "counted" : "not counted");
		if (kn <= 12)
			fprintf(f, " %s", p->comm);
	}
	if (kn > 12)
		fprintf(f, " ... (%d)", kn);
	if (kn)
		fputc('\n', f);
}

void verify_report_print(const struct verify_report *r, FILE *f)
{
	struct verify_tally t;
	char line[1024], cpus[128];

	verify_report_tally(r, &t);
	if (cpuset_format(&r->owners->exclusive, cpus, sizeof(cpus)) < 0)
		(void)snprintf(cpus + sizeof(cpus) - 4, 4, "...");
	fprintf(f, "bpf-verify: %d exclusive CPU%s (%s), owners from %s, cgroup %s", r->ncpus,
		r->ncpus == 1 ? "" : "s", cpus, r->source ? r->source : "?",
		r->owners->mode == CGROUP_V1 ? "v1 cpuset" : "v2");
	if (r->owners->scope_path)
		fprintf(f, ", scope %s", r->owners->scope_path);
	if (r->watched)
		fprintf(f, ", watched %.2f s", r->duration_s);
	if (r->scanned)
		fprintf(f, ", %d threads scanned", r->threads);
	fprintf(f, "\n");
	for (int i = 0; i < r->ncpus; i++) {
		fputc('\n', f);
		print_cpu(r, &r->cpus[i], f);
	}
	if (r->scanned) {
		fprintf(f,
			"\nunconfined: %d thread%s in %d process%s may also run on exclusive CPUs "
			"(allowed CPUs include them among others: not violations); kernel threads: %d\n",
			r->unconfined_threads, r->unconfined_threads == 1 ? "" : "s",
			r->unconfined_procs, r->unconfined_procs == 1 ? "" : "es",
			r->unconfined_kthreads);
		if (r->ntop)
			fprintf(f, "  busiest:\n    %-8s %-16s %7s %9s %-16s  %s\n", "PID", "COMM",
				"THREADS", "CPU_S", "ALLOWED", "CGROUP");
		for (int i = 0; i < r->ntop; i++)
			fprintf(f, "    %-8d %-16s %7d %9.2f %-16s  %s\n", r->top[i].pid,
				r->top[i].comm, r->top[i].threads, tick_secs(r->top[i].ticks),
				r->top[i].allowed, r->top[i].cgroup);
		if (r->owners->scope_path)
			fprintf(f, "  outside --scope (not counted): %d thread%s pinned to exclusive "
				   "CPUs, %d unconfined\n",
				r->outside_pinned, r->outside_pinned == 1 ? "" : "s",
				r->outside_unconfined);
	}
	if (t.unattributed && r->watched)
		fprintf(f, "\nunnamed: %" PRIu64 " foreign switch-ins no event named (dropped or "
			   "rate-limited)%s\n",
			t.unattributed, r->owners->scope_path ? ": they may be inside --scope" : "");
	if (r->seen_untracked)
		fprintf(f, "\nnames incomplete: %" PRIu64 " switch-ins by tasks beyond the first %d "
			   "not named\n",
			r->seen_untracked, VERIFY_SEEN_MAX);
	if (r->notes[0])
		fprintf(f, "\nnotes: %s\n", r->notes);
	verdict_line(r, &t, line, sizeof(line));
	fprintf(f, "\nverdict: %s\n", line);
}

/* json-c returns NULL only when out of memory; every add below goes through
 * these so that one check at the end covers them. */
struct jb {
	bool oom;
};

static struct json_object *jnew(struct jb *b, struct json_object *o)
{
	if (!o)
		b->oom = true;
	return o;
}

static void jadd(struct jb *b, struct json_object *obj, const char *key, struct json_object *v)
{
	if (!obj || !v || json_object_object_add(obj, key, v) < 0) {
		json_object_put(v);
		b->oom = true;
	}
}

static void jpush(struct jb *b, struct json_object *arr, struct json_object *v)
{
	if (!arr || !v || json_object_array_add(arr, v) < 0) {
		json_object_put(v);
		b->oom = true;
	}
}

static struct json_object *jstr(struct jb *b, const char *s)
{
	return s ? jnew(b, json_object_new_string(s)) : NULL;
}

static void jadd_str(struct jb *b, struct json_object *obj, const char *key, const char *s)
{
	if (s)
		jadd(b, obj, key, jstr(b, s));
}

static void jadd_u64(struct jb *b, struct json_object *obj, const char *key, uint64_t v)
{
	jadd(b, obj, key, jnew(b, json_object_new_uint64(v)));
}

static void jadd_int(struct jb *b, struct json_object *obj, const char *key, int v)
{
	jadd(b, obj, key, jnew(b, json_object_new_int(v)));
}

/* Seconds with millisecond (or finer) digits, not %.17g noise. */
static void jadd_secs(struct jb *b, struct json_object *obj, const char *key, double v, int prec)
{
	char s[48];

	(void)snprintf(s, sizeof(s), "%.*f", prec, v);
	jadd(b, obj, key, jnew(b, json_object_new_double_s(v, s)));
}

static void jadd_cpus(struct jb *b, struct json_object *obj, const char *key,
		      const struct cpuset *s)
{
	_cleanup_free_ char *list = cpuset_to_string(s);

	if (!list)
		b->oom = true;
	jadd_str(b, obj, key, list);
}

static struct json_object *json_owner(struct jb *b, const struct verify_report *r, int idx)
{
	const struct verify_owner *w = &r->owners->v[idx];
	struct json_object *o = jnew(b, json_object_new_object());

	jadd_str(b, o, "cgroup", w->cgroup);
	jadd_str(b, o, "path", w->path);
	jadd_u64(b, o, "cgroupId", w->cgroup_id);
	jadd_cpus(b, o, "cpus", &w->cpus);
	jadd_str(b, o, "claim", w->claim);
	jadd_str(b, o, "pod", w->pod);
	jadd_str(b, o, "container", w->container);
	if (r->scanned)
		jadd_int(b, o, "threads", r->owner_tasks[idx]);
	return o;
}

static struct json_object *json_cpu(struct jb *b, const struct verify_report *r,
				    const struct verify_cpu *c)
{
	static const char *const kinds[PINNING_KIND_MAX] = {
		[PINNING_KIND_USER] = "user",
		[PINNING_KIND_KTHREAD] = "kthread",
		[PINNING_KIND_KTHREAD_UNBOUND] = "kthreadUnbound",
	};
	struct json_object *o = jnew(b, json_object_new_object());
	struct json_object *ran = jnew(b, json_object_new_array());
	struct json_object *outside = jnew(b, json_object_new_array());
	struct json_object *kran = jnew(b, json_object_new_array());
	struct json_object *pinned = jnew(b, json_object_new_array());

	jadd_int(b, o, "cpu", c->cpu);
	jadd(b, o, "owner", json_owner(b, r, c->owner));
	if (r->watched && c->counted) {
		struct json_object *foreign = jnew(b, json_object_new_object());

		jadd_u64(b, o, "switches", c->c.switches);
		jadd_u64(b, o, "ownerSwitches", c->c.owner_switches);
		for (int k = 0; k < PINNING_KIND_MAX; k++) {
			struct json_object *x = jnew(b, json_object_new_object());

			jadd_u64(b, x, "switches", c->c.violations[k]);
			jadd_secs(b, x, "seconds", secs(c->c.foreign_ns[k]), 6);
			jadd(b, foreign, kinds[k], x);
		}
		jadd(b, o, "foreign", foreign);
		jadd_u64(b, o, "eventsDropped", c->c.events_dropped);
		jadd_u64(b, o, "eventsRatelimited", c->c.events_ratelimited);
	}
	for (int sel = 0; sel < SEL_MAX; sel++) {
		const struct verify_seen **v = NULL;
		int n = seen_sorted(r, c->cpu, (enum sel)sel, &v);

		if (!v)
			b->oom = true;
		for (int i = 0; i < n; i++) {
			const struct verify_seen *s = v[i];
			struct json_object *x = jnew(b, json_object_new_object());

			jadd_int(b, x, "pid", (int)s->pid);
			jadd_int(b, x, "tgid", (int)s->tgid);
			jadd_str(b, x, "comm", s->comm);
			jadd_str(b, x, "kind", kind_name(s->kind));
			jadd_str(b, x, "cgroup", s->cgroup);
			jadd_u64(b, x, "switches", s->switches);
			jadd_secs(b, x, "firstSeenSeconds", secs(s->first_ns), 3);
			jadd_secs(b, x, "lastSeenSeconds", secs(s->last_ns), 3);
			jpush(b, sel == SEL_USER ? ran : sel == SEL_OUTSIDE ? outside : kran, x);
		}
		free(v);
	}
	if (r->owners->scope_path)
		jadd(b, o, "ranOutsideScope", outside);
	else
		json_object_put(outside);
	jadd(b, o, "kthreadsRan", kran);
	jadd(b, o, "ran", ran);
	for (int i = 0; i < r->npinned; i++) {
		const struct verify_pinned *p = &r->pinned[i];
		struct json_object *x;

		if (!cpuset_has(&p->allowed, c->cpu))
			continue;
		x = jnew(b, json_object_new_object());
		jadd_int(b, x, "tid", p->tid);
		jadd_int(b, x, "pid", p->pid);
		jadd_str(b, x, "comm", p->comm);
		jadd_str(b, x, "kind", p->kthread ? "kthread" : "user");
		jadd_str(b, x, "cgroup", p->cgroup);
		jadd_cpus(b, x, "allowed", &p->allowed);
		jpush(b, pinned, x);
	}
	jadd(b, o, "pinned", pinned);
	return o;
}

int verify_report_json(const struct verify_report *r, struct json_object **ret)
{
	struct jb b = { false };
	struct json_object *o = jnew(&b, json_object_new_object());
	struct json_object *cpus = jnew(&b, json_object_new_array());
	struct json_object *sum = jnew(&b, json_object_new_object());
	struct verify_tally t;
	char line[1024];

	verify_report_tally(r, &t);
	verdict_line(r, &t, line, sizeof(line));
	jadd_str(&b, o, "verdict",
		 t.violation ? "violation" : t.incomplete ? "incomplete" : "clean");
	jadd_int(&b, o, "exitCode", t.exit_code);
	jadd_str(&b, o, "summary", line);
	jadd_str(&b, o, "source", r->source);
	jadd_str(&b, o, "cgroupMode", cgroup_hier_name(r->owners->mode));
	jadd(&b, o, "strictKthreads", jnew(&b, json_object_new_boolean(r->strict_kthreads)));
	jadd_cpus(&b, o, "exclusiveCpus", &r->owners->exclusive);
	jadd_str(&b, o, "scope", r->owners->scope_path);
	if (r->watched)
		jadd_secs(&b, o, "watchedSeconds", r->duration_s, 3);
	for (int i = 0; i < r->ncpus; i++)
		jpush(&b, cpus, json_cpu(&b, r, &r->cpus[i]));
	jadd(&b, o, "cpus", cpus);

	jadd_u64(&b, sum, "foreignSwitches", t.running);
	jadd_int(&b, sum, "foreignTasksRan", t.running_tasks);
	jadd_int(&b, sum, "foreignTasksPinned", t.pinned);
	jadd_u64(&b, sum, "kthreadSwitches", t.kthread_switches);
	jadd_int(&b, sum, "kthreadsBound", t.kthreads_pinned);
	jadd_int(&b, sum, "kthreadsUnboundNamed", t.kthreads_named);
	jadd_u64(&b, sum, "untrackedSwitches", r->seen_untracked);
	jadd_u64(&b, sum, "unnamedSwitches", t.unattributed);
	if (r->owners->scope_path) {
		jadd_u64(&b, sum, "outsideScopeSwitches", t.outside_switches);
		jadd_int(&b, sum, "outsideScopeTasksRan", t.outside_tasks);
		jadd_int(&b, sum, "outsideScopePinned", t.outside_pinned);
		jadd_int(&b, sum, "outsideScopeUnconfined", r->outside_unconfined);
	}
	jadd(&b, o, "counts", sum);

	if (r->scanned) {
		struct json_object *u = jnew(&b, json_object_new_object());
		struct json_object *top = jnew(&b, json_object_new_array());
		struct json_object *scan = jnew(&b, json_object_new_object());

		jadd_int(&b, u, "threads", r->unconfined_threads);
		jadd_int(&b, u, "processes", r->unconfined_procs);
		jadd_int(&b, u, "kthreads", r->unconfined_kthreads);
		for (int i = 0; i < r->ntop; i++) {
			struct json_object *x = jnew(&b, json_object_new_object());

			jadd_int(&b, x, "pid", r->top[i].pid);
			jadd_str(&b, x, "comm", r->top[i].comm);
			jadd_int(&b, x, "threads", r->top[i].threads);
			jadd_secs(&b, x, "cpuSeconds", tick_secs(r->top[i].ticks), 2);
			jadd_str(&b, x, "allowed", r->top[i].allowed);
			jadd_str(&b, x, "cgroup", r->top[i].cgroup);
			jpush(&b, top, x);
		}
		jadd(&b, u, "top", top);
		jadd(&b, o, "unconfined", u);
		jadd_int(&b, scan, "threads", r->threads);
		jadd_int(&b, scan, "unreadable", r->unreadable);
		jadd(&b, o, "scan", scan);
	}
	if (r->notes[0])
		jadd_str(&b, o, "notes", r->notes);
	if (b.oom) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}
