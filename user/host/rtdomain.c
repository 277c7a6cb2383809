/* Root domains for real-time CPUs. See rtdomain.h.
 *
 * v1 state: the CPUs in use with their user counts, and the list of cpusets
 * whose sched_load_balance we turned off (the root first). The list is the
 * record: it is rewritten to <state-dir>/rt-domains.json after each change,
 * so a restart that finds no CPU in use any more can put the node back.
 *
 * v2 state: the partitions this run made (the container's cgroup and its
 * CPUs), in the same record, written before the cgroup files are: a run
 * killed at any point leaves a record of every partition it may have made.
 * A restart keeps them as left partitions until a claim's container takes
 * one again (the same cgroup: adopted) or nothing holds their CPUs (undone:
 * partition member, the CPUs out of cpuset.cpus.exclusive up the path).
 */
#include "host/rtdomain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#define LOG_MOD "rtdomain"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/num.h"

#define MAX_DEPTH 32
#define MAX_VISITS 200000 /* cpusets walked per refresh */
#define MAX_CHANGES 4096
#define CGROUP_FILE_MAX 65536

struct change {
	char *path;	 /* absolute */
	int load_balance; /* what it was */
};

struct v2_part {
	char *dir;
	struct cpuset cpus;
};

struct rtdomain {
	int version;
	char *root, *state_dir;
	struct cpuset active;
	int users[CPUSET_MAX];
	struct change *changes;
	int n_changes;
	struct v2_part *parts; /* made by this run */
	int n_parts;
	struct v2_part *left; /* a previous run's, from the record */
	int n_left;
};

/* ---- files --------------------------------------------------------------------------- */

static int read_text(const char *path, char **ret)
{
	size_t len;
	int r = fileio_read(path, CGROUP_FILE_MAX, ret, &len, NULL);

	if (r < 0)
		return r;
	while (len && ((*ret)[len - 1] == '\n' || (*ret)[len - 1] == ' '))
		(*ret)[--len] = 0;
	return 0;
}

static int read_cpus(const char *dir, const char *file, struct cpuset *ret)
{
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	int r;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, file);
	r = read_text(path, &text);
	if (r < 0)
		return r;
	return cpuset_parse(text, ret, NULL) < 0 ? -EPROTO : 0;
}

static int read_int(const char *dir, const char *file, int *ret)
{
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	int r;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, file);
	r = read_text(path, &text);
	if (r < 0)
		return r;
	if (num_parse_int(text, NULL, INT_MIN, INT_MAX, ret) < 0)
		return -EPROTO;
	return 0;
}

/* A cgroup file takes one write of the whole value. */
static int write_text(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -1;
	size_t len = strlen(value);

	(void)snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_TRUNC);
	if (fd < 0)
		return -errno;
	if (write(fd, value, len) != (ssize_t)len)
		return errno ? -errno : -EIO;
	return 0;
}

static int write_cpus(const char *dir, const char *file, const struct cpuset *cpus)
{
	_cleanup_free_ char *list = cpuset_to_string(cpus);

	/* An empty cpuset.cpus is written as a newline: "" would be no write. */
	return list ? write_text(dir, file, list[0] ? list : "\n") : -ENOMEM;
}

/* ---- the record ---------------------------------------------------------------------- */

/* "partitions": [{"cgroup": dir, "cpus": "3"}], this run's and those
 * left by a previous one. */
static int add_parts(struct json_object *o, const struct rtdomain *d)
{
	struct json_object *arr = json_object_new_array();

	if (!arr)
		return -ENOMEM;
	json_object_object_add(o, "partitions", arr);
	for (int i = 0; i < d->n_parts + d->n_left; i++) {
		const struct v2_part *p = i < d->n_parts ? &d->parts[i] : &d->left[i - d->n_parts];
		_cleanup_free_ char *cpus = cpuset_to_string(&p->cpus);
		struct json_object *c = json_object_new_object();

		if (!c || !cpus) {
			json_object_put(c);
			return -ENOMEM;
		}
		json_object_object_add(c, "cgroup", json_object_new_string(p->dir));
		json_object_object_add(c, "cpus", json_object_new_string(cpus));
		json_object_array_add(arr, c);
	}
	return 0;
}

static int save_record(struct rtdomain *d)
{
	struct json_object *o, *arr;
	const char *text;
	int r;

	if (!d->state_dir)
		return 0;
	if (d->n_changes == 0 && d->n_parts == 0 && d->n_left == 0)
		return fileio_remove(d->state_dir, RTDOMAIN_RECORD);
	o = json_object_new_object();
	arr = json_object_new_array();
	if (!o || !arr) {
		json_object_put(o);
		json_object_put(arr);
		return -ENOMEM;
	}
	json_object_object_add(o, "root", json_object_new_string(d->root));
	json_object_object_add(o, "changes", arr);
	for (int i = 0; i < d->n_changes; i++) {
		struct json_object *c = json_object_new_object();

		if (!c)
			continue;
		json_object_object_add(c, "path", json_object_new_string(d->changes[i].path));
		json_object_object_add(c, "loadBalance",
				       json_object_new_int(d->changes[i].load_balance));
		json_object_array_add(arr, c);
	}
	r = add_parts(o, d);
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							 JSON_C_TO_STRING_NOSLASHESCAPE);
	r = fileio_write_atomic(d->state_dir, RTDOMAIN_RECORD, text, strlen(text), 0600);
	json_object_put(o);
	return r;
}

static int add_change(struct rtdomain *d, const char *path, int was)
{
	struct change *v;

	if (d->n_changes >= MAX_CHANGES)
		return -E2BIG;
	v = realloc(d->changes, sizeof(*v) * (size_t)(d->n_changes + 1));
	if (!v)
		return -ENOMEM;
	d->changes = v;
	v[d->n_changes].path = strdup(path);
	if (!v[d->n_changes].path)
		return -ENOMEM;
	v[d->n_changes++].load_balance = was;
	return 0;
}

static int part_add(struct v2_part **v, int *n, const char *dir, const struct cpuset *cpus)
{
	struct v2_part *nv;

	if (*n >= MAX_CHANGES)
		return -E2BIG;
	nv = realloc(*v, sizeof(*nv) * (size_t)(*n + 1));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n].dir = strdup(dir);
	if (!nv[*n].dir)
		return -ENOMEM;
	nv[(*n)++].cpus = *cpus;
	return 0;
}

static void part_del(struct v2_part *v, int *n, int i)
{
	free(v[i].dir);
	v[i] = v[--*n];
}

/* Is path a cgroup under our root, not climbing out of it? */
static bool under_root(const struct rtdomain *d, const char *path)
{
	size_t len = strlen(d->root);

	return !strncmp(path, d->root, len) && path[len] == '/' && !strstr(path, "/..");
}

/* The partitions of a previous run's record, as left ones. */
static void load_parts(struct rtdomain *d, struct json_object *o)
{
	struct json_object *arr;

	if (!json_object_object_get_ex(o, "partitions", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *c = json_object_array_get_idx(arr, i), *dir, *cpus;
		struct cpuset set;

		if (!json_object_object_get_ex(c, "cgroup", &dir) ||
		    !json_object_object_get_ex(c, "cpus", &cpus) ||
		    !json_object_is_type(dir, json_type_string) ||
		    !json_object_is_type(cpus, json_type_string) ||
		    !under_root(d, json_object_get_string(dir)) ||
		    cpuset_parse(json_object_get_string(cpus), &set, NULL) < 0 ||
		    cpuset_is_empty(&set))
			continue;
		if (part_add(&d->left, &d->n_left, json_object_get_string(dir), &set) < 0)
			break;
	}
}

/* Reads the record of a previous run (only changes under our root count). */
static void load_record(struct rtdomain *d)
{
	_cleanup_free_ char *text = NULL;
	struct json_object *o, *arr, *root;
	char path[PATH_MAX];
	size_t len;

	(void)snprintf(path, sizeof(path), "%s/%s", d->state_dir, RTDOMAIN_RECORD);
	if (fileio_read(path, 1 << 20, &text, &len, NULL) < 0)
		return;
	o = json_tokener_parse(text);
	if (!json_object_object_get_ex(o, "root", &root) ||
	    strcmp(json_object_get_string(root), d->root) != 0 ||
	    !json_object_object_get_ex(o, "changes", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		log_warn("rt_record_ignored", "path=%s", path);
		json_object_put(o);
		return;
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *c = json_object_array_get_idx(arr, i), *p, *lb;
		const char *s;

		if (!json_object_object_get_ex(c, "path", &p) ||
		    !json_object_object_get_ex(c, "loadBalance", &lb) ||
		    !json_object_is_type(lb, json_type_int))
			continue;
		s = json_object_get_string(p);
		/* Only cpusets under our root, never a path that climbs out. */
		if (strncmp(s, d->root, strlen(d->root)) != 0 || strstr(s, "/.."))
			continue;
		if (add_change(d, s, json_object_get_int(lb)) < 0)
			break;
	}
	load_parts(d, o);
	json_object_put(o);
	if (d->n_changes || d->n_left)
		log_info("rt_record_loaded", "changes=%d partitions=%d path=%s", d->n_changes,
			 d->n_left, path);
}

/* ---- lifecycle ----------------------------------------------------------------------- */

int rtdomain_new(const struct rtdomain_opts *o, struct rtdomain **ret)
{
	_cleanup_(rtdomain_freep) struct rtdomain *d = calloc(1, sizeof(*d));
	_cleanup_free_ char *ctl = NULL;
	const char *root = o->root;
	int version = o->version;

	if (!d)
		return -ENOMEM;
	if (!version) {
		version = read_text("/sys/fs/cgroup/cgroup.controllers", &ctl) == 0 &&
					  strstr(ctl, "cpuset")
				  ? 2
				  : 1;
	}
	if (!root)
		root = version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpuset";
	if (version != 1 && version != 2)
		return -EINVAL;
	d->version = version;
	d->root = strdup(root);
	if (!d->root || (o->state_dir && !(d->state_dir = strdup(o->state_dir))))
		return -ENOMEM;
	if (d->state_dir)
		load_record(d);
	*ret = TAKE_PTR(d);
	return 0;
}

struct rtdomain *rtdomain_free(struct rtdomain *d)
{
	if (!d)
		return NULL;
	for (int i = 0; i < d->n_changes; i++)
		free(d->changes[i].path);
	free(d->changes);
	for (int i = 0; i < d->n_parts; i++)
		free(d->parts[i].dir);
	free(d->parts);
	for (int i = 0; i < d->n_left; i++)
		free(d->left[i].dir);
	free(d->left);
	free(d->root);
	free(d->state_dir);
	free(d);
	return NULL;
}

int rtdomain_version(const struct rtdomain *d)
{
	return d->version;
}

const char *rtdomain_root(const struct rtdomain *d)
{
	return d->root;
}

const struct cpuset *rtdomain_active(const struct rtdomain *d)
{
	return &d->active;
}

/* ---- v1 ------------------------------------------------------------------------------ */

static bool is_recorded(const struct rtdomain *d, const char *path)
{
	for (int i = 0; i < d->n_changes; i++)
		if (!strcmp(d->changes[i].path, path))
			return true;
	return false;
}

/* Turns load balancing off in dir, recording what it was. */
static int balance_off(struct rtdomain *d, const char *dir, int was)
{
	int r;

	if (!is_recorded(d, dir)) {
		r = add_change(d, dir, was);
		if (r < 0)
			return r;
	}
	return write_text(dir, "cpuset.sched_load_balance", "0");
}

/* Does a load-balanced cpuset of these CPUs merge an isolated CPU with
 * another one? */
static bool merges(const struct cpuset *cpus, const struct cpuset *active)
{
	return cpuset_intersects(cpus, active) && cpuset_count(cpus) > 1;
}

struct walk {
	struct rtdomain *d;
	bool fix;	   /* turn balancing off where it merges; else only report */
	int visits, changed;
	struct cpuset unisolated;
	char *who;
	size_t who_size;
	int err;
};

/* The kernel's v1 walk (generate_sched_domains): below a cpuset with CPUs
 * and balancing off it descends; a balancing cpuset with CPUs is a domain
 * and ends the descent; a cpuset without CPUs ends it too. */
static void walk_children(struct walk *w, const char *dir, int depth)
{
	_cleanup_(closedirp) DIR *dd = NULL;
	struct dirent *e;

	if (depth > MAX_DEPTH)
		return;
	dd = opendir(dir);
	if (!dd)
		return;
	while ((e = readdir(dd))) {
		char child[PATH_MAX];
		struct cpuset cpus;
		int lb;

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (depth == 0 && !strcmp(e->d_name, RTDOMAIN_DIR))
			continue; /* ours: built to be right */
		if (++w->visits > MAX_VISITS)
			return;
		if (snprintf(child, sizeof(child), "%s/%s", dir, e->d_name) >= (int)sizeof(child))
			continue;
		if (read_cpus(child, "cpuset.cpus", &cpus) < 0 ||
		    read_int(child, "cpuset.sched_load_balance", &lb) < 0)
			continue; /* gone meanwhile, or not a cpuset */
		if (cpuset_is_empty(&cpus))
			continue;
		if (lb && !merges(&cpus, &w->d->active))
			continue; /* a domain that leaves the real-time CPUs alone */
		if (lb) {
			if (!w->fix) {
				struct cpuset both;

				cpuset_and(&both, &cpus, &w->d->active);
				cpuset_or(&w->unisolated, &w->unisolated, &both);
				if (w->who && !w->who[0])
					(void)snprintf(w->who, w->who_size, "%s",
						       child + strlen(w->d->root));
				continue;
			}
			w->err = balance_off(w->d, child, lb);
			if (w->err < 0)
				return;
			w->changed++;
			log_info("rt_cpuset_unbalanced", "cpuset=%s cpus_in_use=%d", child,
				 cpuset_count(&w->d->active));
		}
		walk_children(w, child, depth + 1);
		if (w->err < 0)
			return;
	}
}

int rtdomain_refresh(struct rtdomain *d, struct errbuf *eb)
{
	struct walk w = { .d = d, .fix = true };

	if (d->version != 1 || cpuset_is_empty(&d->active))
		return 0;
	walk_children(&w, d->root, 0);
	if (w.changed && save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
	if (w.err < 0)
		return errbuf_fail(eb, w.err, "turning off load balancing under %s: %s", d->root,
				   strerror(-w.err));
	return w.changed;
}

int rtdomain_v1_unisolated(const struct rtdomain *d, struct cpuset *ret, char *who, size_t size)
{
	struct walk w = { .d = (struct rtdomain *)d, .who = who, .who_size = size };
	int lb;

	if (who && size)
		who[0] = 0;
	cpuset_zero(&w.unisolated);
	if (d->version == 1 && !cpuset_is_empty(&d->active)) {
		if (read_int(d->root, "cpuset.sched_load_balance", &lb) == 0 && lb) {
			w.unisolated = d->active; /* one domain for the machine */
			if (who && size)
				(void)snprintf(who, size, "/");
		} else {
			walk_children(&w, d->root, 0);
		}
	}
	*ret = w.unisolated;
	return cpuset_count(ret);
}

/* dra-cpu-rt and its children as the active set says. */
static int build_tree(struct rtdomain *d, struct errbuf *eb)
{
	_cleanup_free_ char *mems = NULL;
	char top[PATH_MAX], sub[PATH_MAX + 16], path[PATH_MAX];
	struct cpuset online, balanced;
	int r;

	(void)snprintf(top, sizeof(top), "%s/%s", d->root, RTDOMAIN_DIR);
	(void)snprintf(path, sizeof(path), "%s/cpuset.mems", d->root);
	r = read_text(path, &mems);
	r = r ?: read_cpus(d->root, "cpuset.cpus", &online);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: cannot read the root cpuset: %s", d->root,
				   strerror(-r));
	if (mkdir(top, 0755) < 0 && errno != EEXIST)
		return errbuf_fail(eb, -errno, "mkdir %s: %s", top, strerror(errno));
	/* Children must stay within the parent: the parent first. */
	r = write_text(top, "cpuset.mems", mems);
	r = r ?: write_cpus(top, "cpuset.cpus", &online);
	r = r ?: write_text(top, "cpuset.sched_load_balance", "0");
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", top, strerror(-r));
	cpuset_andnot(&balanced, &online, &d->active);
	(void)snprintf(sub, sizeof(sub), "%s/balanced", top);
	if (mkdir(sub, 0755) < 0 && errno != EEXIST)
		return errbuf_fail(eb, -errno, "mkdir %s: %s", sub, strerror(errno));
	r = write_text(sub, "cpuset.mems", mems);
	r = r ?: write_cpus(sub, "cpuset.cpus", &balanced);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", sub, strerror(-r));
	CPUSET_FOREACH(cpu, &d->active)
	{
		struct cpuset one;

		(void)snprintf(sub, sizeof(sub), "%s/cpu%d", top, cpu);
		if (mkdir(sub, 0755) < 0 && errno != EEXIST)
			return errbuf_fail(eb, -errno, "mkdir %s: %s", sub, strerror(errno));
		cpuset_zero(&one);
		cpuset_set(&one, cpu);
		r = write_text(sub, "cpuset.mems", mems);
		r = r ?: write_cpus(sub, "cpuset.cpus", &one);
		r = r ?: write_text(sub, "cpuset.sched_load_balance", "1");
		if (r < 0)
			return errbuf_fail(eb, r, "%s: %s", sub, strerror(-r));
	}
	return 0;
}

/* Puts back every recorded flag and removes our tree. */
static void undo_all(struct rtdomain *d)
{
	char top[PATH_MAX], sub[PATH_MAX + 256];
	_cleanup_(closedirp) DIR *dd = NULL;
	struct dirent *e;

	(void)snprintf(top, sizeof(top), "%s/%s", d->root, RTDOMAIN_DIR);
	dd = opendir(top);
	while (dd && (e = readdir(dd)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			(void)snprintf(sub, sizeof(sub), "%s/%s", top, e->d_name);
			if (rmdir(sub) < 0 && errno != ENOENT)
				log_warn("rt_cpuset_kept", "cpuset=%s reason=%s", sub,
					 log_quote(strerror(errno)));
		}
	if (rmdir(top) < 0 && errno != ENOENT)
		log_warn("rt_cpuset_kept", "cpuset=%s reason=%s", top, log_quote(strerror(errno)));
	/* The root last: until then the machine keeps its domains. */
	for (int i = d->n_changes - 1; i >= 0; i--) {
		char v[8];
		int r;

		(void)snprintf(v, sizeof(v), "%d", d->changes[i].load_balance);
		r = write_text(d->changes[i].path, "cpuset.sched_load_balance", v);
		if (r < 0 && r != -ENOENT)
			log_warn("rt_cpuset_restore_failed", "cpuset=%s reason=%s",
				 d->changes[i].path, log_quote(strerror(-r)));
		free(d->changes[i].path);
	}
	d->n_changes = 0;
	if (save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
	log_info("rt_domains_restored", "root=%s", d->root);
}

int rtdomain_v1_acquire(struct rtdomain *d, int cpu, struct errbuf *eb)
{
	bool first = cpuset_is_empty(&d->active);
	int lb, r;

	if (d->version != 1 || cpu < 0 || cpu >= CPUSET_MAX)
		return errbuf_fail(eb, -EINVAL, "not a cgroup v1 node, or CPU %d out of range", cpu);
	if (d->users[cpu]++ > 0)
		return 0;
	cpuset_set(&d->active, cpu);
	if (first) {
		r = read_int(d->root, "cpuset.sched_load_balance", &lb);
		if (r < 0) {
			d->users[cpu] = 0;
			cpuset_clear(&d->active, cpu);
			return errbuf_fail(eb, r, "%s/cpuset.sched_load_balance: %s", d->root,
					   strerror(-r));
		}
	}
	r = build_tree(d, eb);
	if (r == 0 && first && lb) {
		r = balance_off(d, d->root, lb);
		if (r < 0)
			errbuf_set(eb, "%s/cpuset.sched_load_balance: %s", d->root, strerror(-r));
	}
	if (r == 0) {
		r = rtdomain_refresh(d, eb);
		r = r < 0 ? r : 0;
	}
	if (save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
	if (r < 0) {
		d->users[cpu] = 1;
		(void)rtdomain_v1_release(d, cpu);
		return r;
	}
	log_info("rt_cpu_isolated", "cpu=%d cpuset=%s/%s/cpu%d", cpu, d->root, RTDOMAIN_DIR, cpu);
	return 0;
}

/* v1: the record, or our tree (its cpuN cpusets: the CPUs in *cpus). */
static bool v1_leftovers(const struct rtdomain *d, struct cpuset *cpus)
{
	char top[PATH_MAX];
	_cleanup_(closedirp) DIR *dd = NULL;
	struct dirent *e;
	bool tree;

	(void)snprintf(top, sizeof(top), "%s/%s", d->root, RTDOMAIN_DIR);
	dd = opendir(top);
	tree = dd != NULL;
	while (dd && (e = readdir(dd))) {
		int cpu;

		if (e->d_type == DT_DIR && strncmp(e->d_name, "cpu", 3) == 0 &&
		    num_parse_int(e->d_name + 3, NULL, 0, CPUSET_MAX - 1, &cpu) == 0)
			cpuset_set(cpus, cpu);
	}
	return tree || d->n_changes > 0;
}

bool rtdomain_leftovers(const struct rtdomain *d, struct cpuset *cpus)
{
	cpuset_zero(cpus);
	if (d->version == 1)
		return v1_leftovers(d, cpus);
	for (int i = 0; i < d->n_left; i++)
		cpuset_or(cpus, cpus, &d->left[i].cpus);
	return d->n_left > 0;
}

static void v2_undo(struct rtdomain *d, const char *dir, const struct cpuset *cpus, int depth);
static int ancestors(const struct rtdomain *d, const char *dir, size_t *ret, int max);

/* A previous run's partition i is undone: its cgroup (if still there) a
 * member again, its CPUs out of cpuset.cpus.exclusive up the path. */
static void v2_undo_left(struct rtdomain *d, int i)
{
	size_t cut[MAX_DEPTH];
	char cpus[64];

	v2_undo(d, d->left[i].dir, &d->left[i].cpus,
		ancestors(d, d->left[i].dir, cut, MAX_DEPTH));
	(void)cpuset_format(&d->left[i].cpus, cpus, sizeof(cpus));
	log_info("rt_partition_restored", "cgroup=%s cpus=%s reason=left_by_previous_run",
		 d->left[i].dir, cpus);
	part_del(d->left, &d->n_left, i);
}

void rtdomain_settle(struct rtdomain *d, const struct cpuset *held)
{
	struct cpuset left;
	bool changed = false;

	if (d->version == 1) {
		cpuset_zero(&left);
		if (cpuset_is_empty(&d->active) && v1_leftovers(d, &left) &&
		    !(held && cpuset_intersects(held, &left)))
			undo_all(d);
		return;
	}
	for (int i = d->n_left - 1; i >= 0; i--)
		if (!held || !cpuset_intersects(held, &d->left[i].cpus)) {
			v2_undo_left(d, i);
			changed = true;
		}
	if (changed && save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
}

int rtdomain_v1_release(struct rtdomain *d, int cpu)
{
	char sub[PATH_MAX];

	if (d->version != 1 || cpu < 0 || cpu >= CPUSET_MAX || d->users[cpu] == 0)
		return 0;
	if (--d->users[cpu] > 0)
		return 0;
	cpuset_clear(&d->active, cpu);
	(void)snprintf(sub, sizeof(sub), "%s/%s/cpu%d", d->root, RTDOMAIN_DIR, cpu);
	if (rmdir(sub) < 0 && errno != ENOENT)
		log_warn("rt_cpuset_kept", "cpuset=%s reason=%s", sub, log_quote(strerror(errno)));
	if (cpuset_is_empty(&d->active)) {
		undo_all(d);
	} else {
		struct errbuf eb = {};

		if (build_tree(d, &eb) < 0)
			log_warn("rt_cpuset_update_failed", "reason=%s", log_quote(eb.s));
	}
	log_info("rt_cpu_released", "cpu=%d", cpu);
	return 0;
}

/* ---- v2 ------------------------------------------------------------------------------ */

static int part_of(const struct rtdomain *d, const char *dir)
{
	for (int i = 0; i < d->n_parts; i++)
		if (!strcmp(d->parts[i].dir, dir))
			return i;
	return -1;
}

/* Adds (or with remove, takes away) cpus in dir/cpuset.cpus.exclusive. */
static int exclusive_edit(const char *dir, const struct cpuset *cpus, bool remove)
{
	struct cpuset have;
	int r = read_cpus(dir, "cpuset.cpus.exclusive", &have);

	if (r < 0)
		return r;
	if (remove)
		cpuset_andnot(&have, &have, cpus);
	else
		cpuset_or(&have, &have, cpus);
	return write_cpus(dir, "cpuset.cpus.exclusive", &have);
}

/* The ancestors of dir below the root, top-down, by their path lengths. */
static int ancestors(const struct rtdomain *d, const char *dir, size_t *ret, int max)
{
	size_t root_len = strlen(d->root), len = strlen(dir);
	int n = 0;

	if (strncmp(dir, d->root, root_len) != 0 || dir[root_len] != '/' || strstr(dir, "/.."))
		return -EINVAL;
	for (size_t i = root_len + 1; i < len && n < max; i++)
		if (dir[i] == '/')
			ret[n++] = i;
	return n;
}

static void v2_undo(struct rtdomain *d, const char *dir, const struct cpuset *cpus, int depth)
{
	size_t cut[MAX_DEPTH];
	int n = ancestors(d, dir, cut, MAX_DEPTH);

	(void)write_text(dir, "cpuset.cpus.partition", "member");
	(void)exclusive_edit(dir, cpus, true);
	for (int i = (depth < n ? depth : n) - 1; i >= 0; i--) {
		char a[PATH_MAX];

		(void)snprintf(a, sizeof(a), "%.*s", (int)cut[i], dir);
		(void)exclusive_edit(a, cpus, true);
	}
}

/* Before dir becomes the partition of cpus: a previous run's partition of
 * the same cgroup and CPUs is taken over (written again); one of other
 * CPUs there, or of another cgroup on these CPUs, is undone when that
 * cgroup is gone, and refuses them while it is there. */
static int take_left(struct rtdomain *d, const char *dir, const struct cpuset *cpus,
		     struct errbuf *eb)
{
	for (int i = d->n_left - 1; i >= 0; i--) {
		const struct v2_part *p = &d->left[i];
		bool same_dir = !strcmp(p->dir, dir);

		if (same_dir && cpuset_equal(&p->cpus, cpus)) {
			part_del(d->left, &d->n_left, i);
			continue;
		}
		if (!same_dir && !cpuset_intersects(&p->cpus, cpus))
			continue;
		if (!same_dir && access(p->dir, F_OK) == 0)
			return errbuf_fail(eb, -EBUSY,
					   "on cgroup v2 a real-time CPU is one container's "
					   "partition, and %s holds it (made by a previous run)",
					   p->dir);
		v2_undo_left(d, i);
	}
	return 0;
}

/* The writes that make dir (n ancestors, cut) the partition of cpus; all
 * undone on a failure. */
static int v2_make(struct rtdomain *d, const char *dir, const struct cpuset *cpus,
		   const size_t *cut, int n, struct errbuf *eb)
{
	_cleanup_free_ char *state = NULL;
	char path[PATH_MAX];
	int r;

	/* Remote partition: the CPUs exclusive all the way down, then the
	 * container's cgroup a partition root. */
	for (int i = 0; i < n; i++) {
		char a[PATH_MAX];

		(void)snprintf(a, sizeof(a), "%.*s", (int)cut[i], dir);
		r = exclusive_edit(a, cpus, false);
		if (r < 0) {
			v2_undo(d, dir, cpus, i);
			return errbuf_fail(eb, r, "%s/cpuset.cpus.exclusive: %s%s", a, strerror(-r),
					   r == -ENOENT ? " (is the cpuset controller enabled?)"
							: "");
		}
	}
	r = write_cpus(dir, "cpuset.cpus.exclusive", cpus);
	r = r ?: write_text(dir, "cpuset.cpus.partition", "root");
	if (r == 0) {
		(void)snprintf(path, sizeof(path), "%s/cpuset.cpus.partition", dir);
		r = read_text(path, &state);
		if (r == 0 && strcmp(state, "root") != 0) {
			errbuf_set(eb, "%s is not a valid partition: %s", dir, state);
			v2_undo(d, dir, cpus, n);
			return -EINVAL;
		}
	}
	if (r < 0) {
		v2_undo(d, dir, cpus, n);
		return errbuf_fail(eb, r, "%s: making it a partition: %s", dir, strerror(-r));
	}
	return 0;
}

int rtdomain_v2_acquire(struct rtdomain *d, const char *dir, const struct cpuset *cpus,
			struct errbuf *eb)
{
	size_t cut[MAX_DEPTH];
	int n, r;

	if (d->version != 2)
		return errbuf_fail(eb, -EINVAL, "not a cgroup v2 node");
	if (part_of(d, dir) >= 0)
		return 0;
	for (int i = 0; i < d->n_parts; i++)
		if (cpuset_intersects(&d->parts[i].cpus, cpus))
			return errbuf_fail(eb, -EBUSY,
					   "on cgroup v2 a real-time CPU is one container's "
					   "partition, and %s holds it",
					   d->parts[i].dir);
	n = ancestors(d, dir, cut, MAX_DEPTH);
	if (n < 0)
		return errbuf_fail(eb, n, "%s is not a cgroup under %s", dir, d->root);
	r = take_left(d, dir, cpus, eb);
	if (r < 0)
		return r;
	/* The record first: a run killed from here on leaves it behind. */
	r = part_add(&d->parts, &d->n_parts, dir, cpus);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", dir, strerror(-r));
	if (save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
	r = v2_make(d, dir, cpus, cut, n, eb);
	if (r < 0) {
		part_del(d->parts, &d->n_parts, d->n_parts - 1);
		if (save_record(d) < 0)
			log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
		return r;
	}
	cpuset_or(&d->active, &d->active, cpus);
	log_info("rt_partition", "cgroup=%s cpus=%d", dir, cpuset_first(cpus));
	return 0;
}

int rtdomain_v2_release(struct rtdomain *d, const char *dir)
{
	int i = part_of(d, dir);
	size_t cut[MAX_DEPTH];

	if (i < 0)
		return 0;
	v2_undo(d, dir, &d->parts[i].cpus, ancestors(d, dir, cut, MAX_DEPTH));
	cpuset_andnot(&d->active, &d->active, &d->parts[i].cpus);
	part_del(d->parts, &d->n_parts, i);
	if (save_record(d) < 0)
		log_warn("rt_record_write_failed", "dir=%s", d->state_dir);
	return 0;
}
