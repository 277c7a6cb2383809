/* Real-time report and the owners file. See rtreport.h. */
#include "pinning/rtreport.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "host/cgroup.h"
#include "host/procfs.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/jsonc.h"
#include "lib/num.h"

#define OWNERS_FILE_MAX (16u << 20)

/* ---- owners ------------------------------------------------------------------------ */

void rt_owners_done(struct rt_owners *o)
{
	free(o->v);
	*o = (struct rt_owners){ 0 };
}

int rt_owners_add(struct rt_owners *o, const struct rt_owner *w)
{
	struct rt_owner *v;

	if (o->n >= RTREPORT_OWNERS_MAX)
		return -E2BIG;
	v = realloc(o->v, sizeof(*v) * (size_t)(o->n + 1));
	if (!v)
		return -ENOMEM;
	o->v = v;
	v[o->n++] = *w;
	return 0;
}

const struct rt_owner *rt_owners_find(const struct rt_owners *o, uint64_t cgroup_id, int cpu)
{
	for (int i = 0; i < o->n; i++)
		if (o->v[i].cgroup_id == cgroup_id && o->v[i].cpu == cpu)
			return &o->v[i];
	return NULL;
}

int rt_owners_json(const struct rt_owners *o, char **ret)
{
	struct json_object *root = json_object_new_object(), *arr = json_object_new_array();
	_cleanup_free_ char *cpus = cpuset_to_string(&o->cpus);
	char *text;

	if (!root || !arr || !cpus) {
		json_object_put(root);
		json_object_put(arr);
		return -ENOMEM;
	}
	json_object_object_add(root, "cpus", json_object_new_string(cpus));
	json_object_object_add(root, "owners", arr);
	for (int i = 0; i < o->n; i++) {
		const struct rt_owner *w = &o->v[i];
		struct json_object *e = json_object_new_object();

		if (!e)
			continue;
		json_object_object_add(e, "cpu", json_object_new_int(w->cpu));
		json_object_object_add(e, "cgroupId", json_object_new_uint64(w->cgroup_id));
		json_object_object_add(e, "cgroup", json_object_new_string(w->cgroup));
		json_object_object_add(e, "claim", json_object_new_string(w->claim));
		json_object_object_add(e, "container", json_object_new_string(w->container));
		json_object_object_add(e, "runtimeNs", json_object_new_uint64(w->runtime_ns));
		json_object_object_add(e, "periodNs", json_object_new_uint64(w->period_ns));
		json_object_array_add(arr, e);
	}
	text = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
								 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
	if (!text)
		return -ENOMEM;
	*ret = text;
	return 0;
}

static int get_u64(struct json_object *o, const char *k, uint64_t *ret)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0)
		return -EPROTO;
	*ret = json_object_get_uint64(v);
	return 0;
}

int rt_owners_parse(const char *buf, size_t len, struct rt_owners *ret, struct errbuf *eb)
{
	struct json_tokener *tok;
	struct json_object *root, *arr, *v;
	struct rt_owners o = { 0 };
	char list[CPUSET_MAX * 5];
	int r = 0;

	if (len > OWNERS_FILE_MAX)
		return errbuf_fail(eb, -E2BIG, "more than %u bytes", OWNERS_FILE_MAX);
	tok = json_tokener_new_ex(8);
	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, buf, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(root, json_type_object)) {
		r = errbuf_fail(eb, -EPROTO, "not a JSON object");
		goto out;
	}
	if (jsonc_str_copy(root, "cpus", list, sizeof(list)) < 0 || cpuset_parse(list, &o.cpus, NULL) < 0) {
		r = errbuf_fail(eb, -EPROTO, "\"cpus\" is not a CPU list");
		goto out;
	}
	if (!json_object_object_get_ex(root, "owners", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		r = errbuf_fail(eb, -EPROTO, "no \"owners\" list");
		goto out;
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);
		struct rt_owner w = { 0 };
		uint64_t cpu;

		if (!json_object_is_type(e, json_type_object) || get_u64(e, "cpu", &cpu) < 0 ||
		    cpu >= CPUSET_MAX || !cpuset_has(&o.cpus, (int)cpu) ||
		    get_u64(e, "cgroupId", &w.cgroup_id) < 0 || !w.cgroup_id ||
		    jsonc_str_copy(e, "cgroup", w.cgroup, sizeof(w.cgroup)) < 0 ||
		    jsonc_str_copy(e, "claim", w.claim, sizeof(w.claim)) < 0 ||
		    jsonc_str_copy(e, "container", w.container, sizeof(w.container)) < 0 ||
		    get_u64(e, "runtimeNs", &w.runtime_ns) < 0 ||
		    get_u64(e, "periodNs", &w.period_ns) < 0 || w.runtime_ns > w.period_ns) {
			r = errbuf_fail(eb, -EPROTO, "owner %zu is malformed", i);
			goto out;
		}
		w.cpu = (int)cpu;
		r = rt_owners_add(&o, &w);
		if (r < 0) {
			r = errbuf_fail(eb, r, "owner %zu: %s", i, strerror(-r));
			goto out;
		}
	}
	(void)v;
	*ret = o;
	o = (struct rt_owners){ 0 };
out:
	rt_owners_done(&o);
	json_tokener_free(tok);
	json_object_put(root);
	return r;
}

/* ---- report -------------------------------------------------------------------------- */

int rtreport_build(const struct rt_owners *owners, const struct rtmon_task *tasks, int n_tasks,
		   const struct rtreport_cpu *cpus, int n_cpus, double duration_s,
		   struct rtreport *ret)
{
	struct rtreport r = { .duration_s = duration_s };

	r.tasks = calloc((size_t)n_tasks + 1, sizeof(*r.tasks));
	r.cpus = calloc((size_t)n_cpus + 1, sizeof(*r.cpus));
	if (!r.tasks || !r.cpus) {
		rtreport_done(&r);
		return -ENOMEM;
	}
	for (int i = 0; i < n_tasks; i++) {
		struct rtreport_task *t = &r.tasks[r.n_tasks++];

		t->t = tasks[i];
		t->owner = rt_owners_find(owners, t->t.s.cgroup_id, (int)t->t.s.cpu);
		t->p50_ns = rtmon_quantile_ns(&t->t.s, 0.5);
		t->p99_ns = rtmon_quantile_ns(&t->t.s, 0.99);
		/* Over budget or past the deadline; or a deadline task on a
		 * real-time CPU that no claim of that CPU owns. */
		t->violation = t->t.s.overruns || t->t.s.misses || !t->owner;
		r.violations += t->violation;
	}
	for (int i = 0; i < n_cpus; i++) {
		r.cpus[r.n_cpus++] = cpus[i];
		r.violations += cpus[i].c.foreign_pinned > 0;
	}
	*ret = r;
	return 0;
}

void rtreport_done(struct rtreport *r)
{
	free(r->tasks);
	free(r->cpus);
	free(r->pinned);
	*r = (struct rtreport){ 0 };
}

/* Is thread dir (/proc/<pid>/task/<tid>) pinned to real-time CPUs without
 * owning them? 1 and its name, 0, or -errno (gone). */
static int pinned_foreign(const char *dir, const struct rt_owners *o, int h,
			  const struct cgroup_mount *mount, struct rtreport_pinned *ret)
{
	_cleanup_free_ char *status = NULL, *stat = NULL, *cg = NULL;
	char path[PATH_MAX + 64], cpath[PATH_MAX], cdir[PATH_MAX];
	struct procfs_status st;
	struct procfs_stat sp;
	size_t len;
	uint64_t id = 0;
	bool owned = true;
	int r;

	(void)snprintf(path, sizeof(path), "%s/status", dir);
	r = fileio_read(path, 1 << 16, &status, &len, NULL);
	if (r < 0)
		return r;
	if (procfs_status_parse(status, len, &st) < 0 || cpuset_is_empty(&st.allowed) ||
	    !cpuset_is_subset(&st.allowed, &o->cpus))
		return 0;
	(void)snprintf(path, sizeof(path), "%s/stat", dir);
	r = fileio_read(path, 1 << 16, &stat, &len, NULL);
	if (r < 0)
		return r;
	if (procfs_stat_parse(stat, len, &sp) < 0 || (sp.flags & PROCFS_PF_KTHREAD))
		return 0;
	(void)snprintf(path, sizeof(path), "%s/cgroup", dir);
	if (fileio_read(path, 1 << 16, &cg, &len, NULL) == 0 && mount &&
	    cgroup_of_task(cg, len, (enum cgroup_hier)h, cpath, sizeof(cpath)) == 0 &&
	    cgroup_mount_dir(mount, cpath, cdir, sizeof(cdir)) == 0)
		(void)cgroup_id(cdir, &id);
	CPUSET_FOREACH(cpu, &st.allowed)
	if (!rt_owners_find(o, id, cpu))
		owned = false;
	if (owned)
		return 0;
	(void)snprintf(ret->comm, sizeof(ret->comm), "%s", st.name);
	(void)cpuset_format(&st.allowed, ret->cpus, sizeof(ret->cpus));
	return 1;
}

/* A /proc directory name that is a pid: its value, else -1. */
static int pid_of(const char *s)
{
	int v;

	return num_parse_int(s, NULL, 1, INT_MAX, &v) == 0 ? v : -1;
}

int rtreport_scan_pinned(struct rtreport *r, const struct rt_owners *o, const char *proc_root,
			 int h, const struct cgroup_mount *mount)
{
	_cleanup_(closedirp) DIR *d = opendir(proc_root);
	struct dirent *e;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		_cleanup_(closedirp) DIR *td = NULL;
		char tasks[PATH_MAX];
		struct dirent *t;
		int pid = pid_of(e->d_name);

		if (pid <= 0)
			continue;
		(void)snprintf(tasks, sizeof(tasks), "%s/%d/task", proc_root, pid);
		td = opendir(tasks);
		while (td && (t = readdir(td))) {
			struct rtreport_pinned p = { .pid = pid, .tid = pid_of(t->d_name) };
			struct rtreport_pinned *v;
			char dir[PATH_MAX + 32];

			if (p.tid <= 0)
				continue;
			(void)snprintf(dir, sizeof(dir), "%s/%d", tasks, p.tid);
			if (pinned_foreign(dir, o, h, mount, &p) <= 0)
				continue;
			v = realloc(r->pinned, sizeof(*v) * (size_t)(r->n_pinned + 1));
			if (!v)
				return -ENOMEM;
			r->pinned = v;
			v[r->n_pinned++] = p;
			r->violations++;
		}
	}
	return r->n_pinned;
}

int rtreport_exit_code(const struct rtreport *r)
{
	return r->violations ? 1 : 0;
}

static void ms(char *buf, size_t size, uint64_t ns)
{
	(void)snprintf(buf, size, "%.3fms", (double)ns / 1e6);
}

void rtreport_print(const struct rtreport *r, FILE *f)
{
	fprintf(f, "real-time CPUs watched for %.2f s:", r->duration_s);
	for (int i = 0; i < r->n_cpus; i++)
		fprintf(f, " %d", r->cpus[i].cpu);
	fprintf(f, "\n\n%-4s %-8s %-15s %-24s %-17s %8s %10s %10s %10s %8s %9s %6s\n", "CPU",
		"PID", "COMM", "CLAIM", "BUDGET", "PERIODS", "P50", "P99", "MAX", "OVERRUNS",
		"THROTTLES", "MISSES");
	for (int i = 0; i < r->n_tasks; i++) {
		const struct rtreport_task *t = &r->tasks[i];
		char budget[48], p50[24], p99[24], mx[24];

		(void)snprintf(budget, sizeof(budget), "%.3f/%.3f ms", (double)t->t.s.dl_runtime / 1e6,
			       (double)t->t.s.dl_period / 1e6);
		ms(p50, sizeof(p50), t->p50_ns);
		ms(p99, sizeof(p99), t->p99_ns);
		ms(mx, sizeof(mx), t->t.s.max_ns);
		fprintf(f, "%-4u %-8u %-15.15s %-24.24s %-17s %8llu %10s %10s %10s %8llu %9llu %6llu%s\n",
			t->t.s.cpu, t->t.pid, t->t.s.comm, t->owner ? t->owner->claim : "(none)", budget,
			(unsigned long long)t->t.s.periods, p50, p99, mx,
			(unsigned long long)t->t.s.overruns, (unsigned long long)t->t.s.throttles,
			(unsigned long long)t->t.s.misses,
			!t->violation ? ""
			: !t->owner   ? "  FOREIGN deadline task"
			: t->t.s.overruns ? "  OVER BUDGET"
					  : "  PAST DEADLINE");
	}
	if (!r->n_tasks)
		fprintf(f, "(no deadline task ran on them)\n");
	fprintf(f, "\nforeign tasks (no claim of the CPU owns them):\n");
	for (int i = 0; i < r->n_cpus; i++) {
		const struct rt_cpu *c = &r->cpus[i].c;

		if (!c->foreign) {
			fprintf(f, "  CPU %d: none (%llu switch-ins, %llu of per-CPU kernel threads)\n",
				r->cpus[i].cpu, (unsigned long long)c->switches,
				(unsigned long long)c->kthreads);
			continue;
		}
		fprintf(f, "  CPU %d: %llu switch-ins, %.3f ms; last pid %u (%.16s) cgroup %llu%s\n",
			r->cpus[i].cpu, (unsigned long long)c->foreign, (double)c->foreign_ns / 1e6,
			c->last_foreign_pid, c->last_foreign_comm,
			(unsigned long long)c->last_foreign_cgroup,
			c->foreign_pinned ? "" : "  (unconfined: allowed elsewhere too)");
		if (c->foreign_pinned)
			fprintf(f, "  CPU %d: %llu switch-ins of tasks pinned to it; last pid %u (%.16s)  "
				   "FOREIGN\n",
				r->cpus[i].cpu, (unsigned long long)c->foreign_pinned,
				c->last_pinned_pid, c->last_pinned_comm);
	}
	if (r->n_pinned)
		fprintf(f, "\ntasks pinned to real-time CPUs that no claim owns:\n");
	for (int i = 0; i < r->n_pinned; i++)
		fprintf(f, "  pid %d tid %d (%s) on CPUs %s  FOREIGN\n", r->pinned[i].pid,
			r->pinned[i].tid, r->pinned[i].comm, r->pinned[i].cpus);
	fprintf(f, "\nverdict: %s\n", r->violations ? "violation" : "clean");
}

/* The tasks pinned to real-time CPUs that no claim owns; NULL when out of
 * memory. */
static struct json_object *json_pinned_foreign(const struct rtreport *r)
{
	struct json_object *arr = json_object_new_array();

	for (int i = 0; arr && i < r->n_pinned; i++) {
		struct json_object *e = json_object_new_object();

		if (!e)
			continue;
		json_object_object_add(e, "pid", json_object_new_int(r->pinned[i].pid));
		json_object_object_add(e, "tid", json_object_new_int(r->pinned[i].tid));
		json_object_object_add(e, "comm", json_object_new_string(r->pinned[i].comm));
		json_object_object_add(e, "cpus", json_object_new_string(r->pinned[i].cpus));
		json_object_array_add(arr, e);
	}
	return arr;
}

/* One deadline task and how it kept its budget; NULL when out of memory. */
static struct json_object *json_task(const struct rtreport_task *t)
{
	struct json_object *e = json_object_new_object();

	if (!e)
		return NULL;
	json_object_object_add(e, "pid", json_object_new_int64(t->t.pid));
	json_object_object_add(e, "tgid", json_object_new_int64(t->t.s.tgid));
	json_object_object_add(e, "comm", json_object_new_string(t->t.s.comm));
	json_object_object_add(e, "cpu", json_object_new_int64(t->t.s.cpu));
	json_object_object_add(e, "cgroupId", json_object_new_uint64(t->t.s.cgroup_id));
	json_object_object_add(e, "claim",
			       t->owner ? json_object_new_string(t->owner->claim) : NULL);
	json_object_object_add(e, "runtimeNs", json_object_new_uint64(t->t.s.dl_runtime));
	json_object_object_add(e, "deadlineNs", json_object_new_uint64(t->t.s.dl_deadline));
	json_object_object_add(e, "periodNs", json_object_new_uint64(t->t.s.dl_period));
	json_object_object_add(e, "periods", json_object_new_uint64(t->t.s.periods));
	json_object_object_add(e, "p50Ns", json_object_new_uint64(t->p50_ns));
	json_object_object_add(e, "p99Ns", json_object_new_uint64(t->p99_ns));
	json_object_object_add(e, "maxNs", json_object_new_uint64(t->t.s.max_ns));
	json_object_object_add(e, "overruns", json_object_new_uint64(t->t.s.overruns));
	json_object_object_add(e, "throttles", json_object_new_uint64(t->t.s.throttles));
	json_object_object_add(e, "misses", json_object_new_uint64(t->t.s.misses));
	json_object_object_add(e, "violation", json_object_new_boolean(t->violation));
	return e;
}

/* One real-time CPU: who else ran there; NULL when out of memory. */
static struct json_object *json_cpu(int cpu, const struct rt_cpu *c)
{
	struct json_object *e = json_object_new_object();

	if (!e)
		return NULL;
	json_object_object_add(e, "cpu", json_object_new_int(cpu));
	json_object_object_add(e, "switches", json_object_new_uint64(c->switches));
	json_object_object_add(e, "foreign", json_object_new_uint64(c->foreign));
	json_object_object_add(e, "foreignSeconds",
			       json_object_new_double((double)c->foreign_ns / 1e9));
	json_object_object_add(e, "kthreads", json_object_new_uint64(c->kthreads));
	json_object_object_add(e, "foreignPinned", json_object_new_uint64(c->foreign_pinned));
	json_object_object_add(e, "violation", json_object_new_boolean(c->foreign_pinned > 0));
	if (c->foreign_pinned) {
		struct json_object *l = json_object_new_object();

		json_object_object_add(l, "pid", json_object_new_int64(c->last_pinned_pid));
		json_object_object_add(l, "comm", json_object_new_string(c->last_pinned_comm));
		json_object_object_add(e, "lastPinned", l);
	}
	if (c->foreign) {
		struct json_object *l = json_object_new_object();

		json_object_object_add(l, "pid", json_object_new_int64(c->last_foreign_pid));
		json_object_object_add(l, "comm", json_object_new_string(c->last_foreign_comm));
		json_object_object_add(l, "cgroupId",
				       json_object_new_uint64(c->last_foreign_cgroup));
		json_object_object_add(e, "lastForeign", l);
	}
	return e;
}

int rtreport_to_json(const struct rtreport *r, struct json_object **ret)
{
	struct json_object *o = json_object_new_object(), *tasks = json_object_new_array(),
			   *cpus = json_object_new_array();

	if (!o || !tasks || !cpus) {
		json_object_put(o);
		json_object_put(tasks);
		json_object_put(cpus);
		return -ENOMEM;
	}
	json_object_object_add(o, "verdict",
			       json_object_new_string(r->violations ? "violation" : "clean"));
	json_object_object_add(o, "exitCode", json_object_new_int(rtreport_exit_code(r)));
	json_object_object_add(o, "durationSeconds", json_object_new_double(r->duration_s));
	json_object_object_add(o, "tasks", tasks);
	json_object_object_add(o, "cpus", cpus);
	json_object_object_add(o, "pinnedForeign", json_pinned_foreign(r));
	for (int i = 0; i < r->n_tasks; i++) {
		struct json_object *e = json_task(&r->tasks[i]);

		if (e)
			json_object_array_add(tasks, e);
	}
	for (int i = 0; i < r->n_cpus; i++) {
		struct json_object *e = json_cpu(r->cpus[i].cpu, &r->cpus[i].c);

		if (e)
			json_object_array_add(cpus, e);
	}
	*ret = o;
	return 0;
}
