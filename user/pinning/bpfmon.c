/* bpfmon: loads bpf/pinning.bpf.c (and bpf/enforce.bpf.c in deny mode), keeps
 * the owner and shared-pool maps, turns ring-buffer events into log lines and
 * remediations, and exports the counters. See bpfmon.h for the picture.
 *
 * Invariants:
 *   - m->owners[] mirrors the BPF owners map (also when nothing is loaded);
 *     gen changes on every write so the BPF side can drop a stale interval.
 *   - m->skel != NULL  <=>  the pinning check is attached (m->error empty).
 *   - m->enforce != NULL  <=>  deny mode is in force.
 *   - cgroup paths are hierarchy paths (host/cgroup.h), resolved and cached
 *     by m->hier; an owner's level is the depth of its path.
 */
#include "pinning/bpfmon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <event2/event.h>

#define LOG_MOD "bpfmon"
#include "host/cgroup.h"
#include "host/procfs.h"
#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/clock.h"
#include "lib/cpuset.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"
#include "pinning/bpfmon_priv.h"

#include "enforce.skel.h"
#include "pinning.skel.h"

_Static_assert(sizeof(struct pinning_owner) == 24, "ABI with bpf/pinning.bpf.c");
_Static_assert(sizeof(struct pinning_cpu_stats) == 128, "ABI with bpf/pinning.bpf.c");
_Static_assert(sizeof(struct pinning_irq_stats) == 48, "ABI with bpf/pinning.bpf.c");
/* Slot i of the BPF histogram ends at 2^(i+1) µs, the last is +Inf: the
 * buckets of dra_cpu_runqueue_latency_seconds (bpfmon_test checks the values). */
_Static_assert(MB_N_RUNQUEUE_SECONDS == PINNING_HIST_SLOTS - 1, "runqueue buckets: one per slot");
_Static_assert(sizeof(struct pinning_hist) == 8 * (PINNING_HIST_SLOTS + 1),
	       "ABI with bpf/pinning.bpf.c");
_Static_assert(sizeof(struct pinning_event) == 64, "ABI with bpf/pinning.bpf.c");
_Static_assert(sizeof(struct pinning_mask) == 8 * PINNING_MASK_WORDS,
	       "ABI with bpf/enforce.bpf.c");

#define SEEN_PROBE 4
#define LOG_LINES_PER_INTERVAL 32
#define HANDLER_BUDGET_NS (10 * 1000 * 1000) /* STYLE.md: slow handlers are logged */
#define SCHEDSTAT_MAX (4u << 20)

static const char *const kind_names[] = {
	[PINNING_KIND_USER] = "user",
	[PINNING_KIND_KTHREAD] = "kthread",
	[PINNING_KIND_KTHREAD_UNBOUND] = "kthread_unbound",
	[PINNING_KIND_DENIED] = "denied",
};

void bpfmon_note(struct bpfmon *m, const char *fmt, ...)
{
	size_t len = strlen(m->notes);
	va_list ap;

	if (len && len < sizeof(m->notes) - 2) {
		m->notes[len++] = ';';
		m->notes[len++] = ' ';
		m->notes[len] = 0;
	}
	va_start(ap, fmt);
	(void)vsnprintf(m->notes + len, sizeof(m->notes) - len, fmt, ap);
	va_end(ap);
}

const char *bpfmon_enforcement_name(enum bpfmon_enforcement e)
{
	switch (e) {
	case BPFMON_AUDIT:
		return "audit";
	case BPFMON_REMEDIATE:
		return "remediate";
	case BPFMON_DENY:
		return "deny";
	}
	return "unknown";
}

/* ---- cgroups ----------------------------------------------------------------------- */

/* The hierarchy path of cgroup id, or NULL; borrowed (see
 * cgroup_hierarchy_path()). */
static const char *cgroup_path(struct bpfmon *m, uint64_t id)
{
	return m->hier ? cgroup_hierarchy_path(m->hier, id) : NULL;
}

/* mount: the hierarchy's mount point, or NULL for the one mountinfo names. */
static int open_hierarchy(struct bpfmon *m, const char *mount)
{
	struct cgroup_mounts mounts;
	int r;

	r = cgroup_mounts_read(&mounts);
	if (r == -ENOMEM)
		return r;
	if (r < 0 && !mount)
		return r;
	if (r < 0)
		memset(&mounts, 0, sizeof(mounts)); /* the given mount, root "/" */
	r = cgroup_hierarchy_open(&mounts, m->opts.cgroup, mount, &m->hier);
	cgroup_mounts_done(&mounts);
	return r;
}

/* libbpf's messages, at debug level, a log line for each of their lines. A
 * failed load's message holds the verifier's whole log, whose reason is at
 * its end ("R2 unbounded memory access", then "processed N insns"): its
 * first LIBBPF_LOG_HEAD lines and its last LIBBPF_LOG_TAIL are kept, the
 * count of those between said. */
enum { LIBBPF_LOG_HEAD = 2, LIBBPF_LOG_TAIL = 12 };

__attribute__((format(printf, 2, 0))) static int libbpf_log(enum libbpf_print_level level,
							    const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	size_t lines = 1, i = 0, n;
	char *line;

	if (level == LIBBPF_DEBUG || !log_enabled(LOG_DEBUG) || vasprintf(&text, fmt, ap) < 0)
		return 0;
	n = strlen(text);
	while (n && text[n - 1] == '\n')
		text[--n] = 0;
	for (size_t k = 0; k < n; k++)
		lines += text[k] == '\n';
	for (line = text; *line; i++) {
		char *end = line + strcspn(line, "\n");
		bool more = *end != 0;

		*end = 0;
		if (i < LIBBPF_LOG_HEAD || i + LIBBPF_LOG_TAIL >= lines)
			log_debug("libbpf", "msg=%s", log_quote(line));
		else if (i == LIBBPF_LOG_HEAD)
			log_debug("libbpf", "msg=%s lines_left_out=%zu",
				  log_quote("(the verifier log goes on)"),
				  lines - LIBBPF_LOG_HEAD - LIBBPF_LOG_TAIL);
		line = more ? end + 1 : end;
	}
	return 0;
}

static int write_exclusive_mask(struct bpfmon *m)
{
	struct pinning_mask mask = { { 0 } };
	__u32 zero = 0;

	if (!m->enforce)
		return 0;
	for (int cpu = 0; cpu < m->ncpu && cpu < PINNING_MASK_WORDS * 64; cpu++)
		if (m->owners[cpu].id)
			mask.w[cpu / 64] |= 1ull << (cpu % 64);
	return bpf_map__update_elem(m->enforce->maps.exclusive_mask, &zero, sizeof(zero), &mask,
				    sizeof(mask), BPF_ANY);
}

static void on_ring_readable(evutil_socket_t fd, short what, void *arg);
static int on_sample(void *ctx, void *data, size_t len);

static int start_events(struct bpfmon *m)
{
	if (!m->skel || !(m->features & BPFMON_FEAT_RINGBUF))
		return 0;
	m->rb = ring_buffer__new(bpf_map__fd(m->skel->maps.events), on_sample, m, NULL);
	if (!m->rb)
		return -errno;
	if (!m->base)
		return 0;
	m->rb_ev = event_new(m->base, ring_buffer__epoll_fd(m->rb), EV_READ | EV_PERSIST,
			     on_ring_readable, m);
	if (!m->rb_ev || event_add(m->rb_ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

int bpfmon_new(struct event_base *base, const struct bpfmon_opts *o, struct bpfmon **ret)
{
	_cleanup_(bpfmon_freep) struct bpfmon *m = NULL;
	int r;

	if (!o || o->enforcement > BPFMON_DENY || o->cgroup >= CGROUP_HIER_MAX)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base = base;
	m->opts = *o;
	m->opts.cgroup_mount = NULL; /* borrowed strings are not kept */
	m->opts.schedstat_path = NULL;
	m->stats_fd = -1;
	m->effective = o->enforcement == BPFMON_DENY ? BPFMON_REMEDIATE : o->enforcement;
	if (!m->opts.log_interval_s)
		m->opts.log_interval_s = 10;
	ratelimit_init(&m->log_rl, (int64_t)m->opts.log_interval_s * 1000, LOG_LINES_PER_INTERVAL);
	ratelimit_init(&m->slow_rl, 60000, 1);
	m->schedstat_path = strdup(o->schedstat_path ? o->schedstat_path : "/proc/schedstat");
	if (!m->schedstat_path)
		return -ENOMEM;
	m->ncpu = libbpf_num_possible_cpus();
	if (m->ncpu <= 0)
		return m->ncpu < 0 ? m->ncpu : -EINVAL;
	m->owners = calloc((size_t)m->ncpu, sizeof(*m->owners));
	m->stats_buf = calloc((size_t)m->ncpu, sizeof(*m->stats_buf));
	m->hist_buf = calloc((size_t)m->ncpu, sizeof(*m->hist_buf));
	m->irq_buf = calloc((size_t)m->ncpu, sizeof(*m->irq_buf));
	m->shared_mask = CPU_ALLOC((size_t)m->ncpu);
	m->shared_mask_size = CPU_ALLOC_SIZE((size_t)m->ncpu);
	if (!m->owners || !m->stats_buf || !m->hist_buf || !m->irq_buf || !m->shared_mask)
		return -ENOMEM;
	CPU_ZERO_S(m->shared_mask_size, m->shared_mask);

	r = open_hierarchy(m, o->cgroup_mount);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		bpfmon_note(m, "cgroup paths unknown: no %s hierarchy mount (%s)",
			    cgroup_hier_name(o->cgroup), strerror(-r));
	if (o->remediate_scope) {
		const char *p = cgroup_path(m, o->remediate_scope);

		if (p && !(m->scope_path = strdup(p)))
			return -ENOMEM;
		if (!p)
			bpfmon_note(m, "remediation off: scope cgroup %" PRIu64 " not found",
				    o->remediate_scope);
	}

	libbpf_set_print(libbpf_log);
	m->features = bpfmon_probe_features(o->without);
	bpfmon_load_all(m);
	if (m->skel && o->self_stats) {
		m->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (m->stats_fd < 0)
			bpfmon_note(m, "no self stats: bpf_enable_stats: %s", strerror(errno));
	}
	r = start_events(m);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		bpfmon_note(m, "no violation events: ring buffer: %s", strerror(-r));

	/* The caller logs the outcome once (bpfmon_error(), bpfmon_notes()). */
	*ret = TAKE_PTR(m);
	return 0;
}

struct bpfmon *bpfmon_free(struct bpfmon *m)
{
	if (!m)
		return NULL;
	if (m->rb_ev)
		event_free(m->rb_ev);
	ring_buffer__free(m->rb);
	enforce_bpf__destroy(m->enforce);
	pinning_bpf__destroy(m->skel);
	if (m->stats_fd >= 0)
		(void)close(m->stats_fd);
	cgroup_hierarchy_free(m->hier);
	if (m->owners)
		for (int i = 0; i < m->ncpu; i++)
			free(m->owners[i].path);
	free(m->owners);
	free(m->stats_buf);
	free(m->hist_buf);
	free(m->irq_buf);
	if (m->shared_mask)
		CPU_FREE(m->shared_mask);
	free(m->scope_path);
	free(m->schedstat_path);
	free(m->met.schedstat_ns);
	free(m);
	return NULL;
}

bool bpfmon_is_loaded(const struct bpfmon *m)
{
	return m->skel != NULL;
}

const char *bpfmon_error(const struct bpfmon *m)
{
	return m->skel ? NULL : m->error.s;
}

const char *bpfmon_notes(const struct bpfmon *m)
{
	return m->notes;
}

unsigned bpfmon_features(const struct bpfmon *m)
{
	return m->features;
}

bool bpfmon_has_contention(const struct bpfmon *m)
{
	return m->contention;
}

enum bpfmon_enforcement bpfmon_enforcement(const struct bpfmon *m)
{
	return m->effective;
}

/* ---- owners and the shared pool ------------------------------------------------------ */

static int write_owner(struct bpfmon *m, int cpu)
{
	const struct owner *ow = &m->owners[cpu];
	struct pinning_owner v = {
		.cgroup_id = ow->id,
		.gen = ow->gen,
	};
	int level = ow->path ? cgroup_path_depth(ow->path) : -1;
	__u32 key = (__u32)cpu;
	int r;

	if (!m->skel)
		return 0;
	/* The level of a cgroup is the depth of its hierarchy path: the
	 * descendant check compares ancestors at that level. */
	if (level >= 0)
		v.level = (__u32)level;
	else
		v.flags = PINNING_OWNER_EXACT;
	r = bpf_map__update_elem(m->skel->maps.owners, &key, sizeof(key), &v, sizeof(v), BPF_ANY);
	if (r < 0)
		return r;
	return write_exclusive_mask(m);
}

int bpfmon_set_owner(struct bpfmon *m, int cpu, uint64_t cgroup_id)
{
	struct owner *ow;
	const char *path;
	char *copy = NULL;

	if (cpu < 0 || cpu >= m->ncpu || !cgroup_id)
		return -EINVAL;
	path = cgroup_path(m, cgroup_id);
	if (path && !(copy = strdup(path)))
		return -ENOMEM;
	ow = &m->owners[cpu];
	free(ow->path);
	ow->path = copy;
	ow->id = cgroup_id;
	ow->gen = ++m->gen;
	if (!copy)
		log_warn("cpu_owner_unresolved", "cpu=%d cgroup_id=%" PRIu64 " action=exact_match_only",
			 cpu, cgroup_id);
	log_info("cpu_owner_set", "cpu=%d cgroup_id=%" PRIu64 " cgroup=%s", cpu, cgroup_id,
		 log_quote(copy ? copy : "?"));
	return write_owner(m, cpu);
}

int bpfmon_clear_owner(struct bpfmon *m, int cpu)
{
	struct owner *ow;

	if (cpu < 0 || cpu >= m->ncpu)
		return -EINVAL;
	ow = &m->owners[cpu];
	if (!ow->id)
		return 0;
	free(ow->path);
	*ow = (struct owner){ .gen = ++m->gen };
	log_info("cpu_owner_cleared", "cpu=%d", cpu);
	return write_owner(m, cpu);
}

int bpfmon_set_shared(struct bpfmon *m, const struct cpuset *shared)
{
	int r = 0;

	m->shared = *shared;
	CPU_ZERO_S(m->shared_mask_size, m->shared_mask);
	for (int cpu = 0; cpu < m->ncpu; cpu++) {
		__u32 key = (__u32)cpu, v = cpuset_has(shared, cpu);

		if (v)
			CPU_SET_S((size_t)cpu, m->shared_mask_size, m->shared_mask);
		if (m->skel && r == 0)
			r = bpf_map__update_elem(m->skel->maps.shared_cpus, &key, sizeof(key), &v,
						 sizeof(v), BPF_ANY);
	}
	return r;
}

/* ---- events: log once, remediate ---------------------------------------------------- */

/* True when (cpu, pid) was handled less than an interval ago; else marks it. */
static bool seen_recently(struct bpfmon *m, uint32_t cpu, uint32_t pid, uint64_t now_s)
{
	uint32_t h = (pid * 2654435761u) ^ (cpu * 40503u);
	struct seen *victim = NULL;

	for (int i = 0; i < SEEN_PROBE; i++) {
		struct seen *s = &m->seen[(h + (uint32_t)i) & (SEEN_SLOTS - 1)];

		if (s->until_s > now_s && s->cpu == cpu && s->pid == pid)
			return true;
		if (!victim || s->until_s < victim->until_s)
			victim = s;
	}
	*victim = (struct seen){ cpu, pid, now_s + m->opts.log_interval_s };
	return false;
}

/* Remediation touches host tasks only: not under any owner cgroup (the
 * owner of another exclusive CPU is a container too), under the scope if
 * one is set, and with a known path (a cgroup we cannot name is left alone). */
static bool is_host_task(const struct bpfmon *m, const struct pinning_event *e, const char *path)
{
	if (e->kind != PINNING_KIND_USER || !path)
		return false;
	for (int cpu = 0; cpu < m->ncpu; cpu++) {
		const struct owner *ow = &m->owners[cpu];

		if (ow->id &&
		    (ow->id == e->cgroup_id || (ow->path && cgroup_path_is_under(path, ow->path))))
			return false;
	}
	if (m->opts.remediate_scope &&
	    (!m->scope_path || !cgroup_path_is_under(path, m->scope_path)))
		return false;
	return true;
}

static const char *remediate(struct bpfmon *m, const struct pinning_event *e)
{
	if (cpuset_is_empty(&m->shared)) {
		m->act.remediate_failed++;
		return "no_shared_pool";
	}
	if (sched_setaffinity((pid_t)e->pid, m->shared_mask_size, m->shared_mask) == 0) {
		m->act.remediated++;
		return "remediated";
	}
	if (errno == ESRCH)
		return "exited";
	m->act.remediate_failed++;
	return errno == EINVAL ? "remediate_failed_cpuset" : "remediate_failed";
}

static void handle_event(struct bpfmon *m, const struct pinning_event *e)
{
	int64_t now_ms = clock_now_ms();
	uint64_t now_s = (uint64_t)now_ms / 1000, held;
	const char *path, *owner = "?", *action = "none";
	bool acted = false;

	if (seen_recently(m, e->cpu, e->pid, now_s))
		return;
	path = cgroup_path(m, e->cgroup_id);
	if (e->cpu < (uint32_t)m->ncpu && m->owners[e->cpu].path)
		owner = m->owners[e->cpu].path;
	if (e->kind == PINNING_KIND_USER && is_host_task(m, e, path)) {
		if (m->effective == BPFMON_AUDIT) {
			m->act.audited++;
			action = "audit_only";
		} else {
			action = remediate(m, e);
			acted = true;
		}
	}

	if (m->event_fn)
		m->event_fn(e, path, action, m->event_userdata);
	/* Lines that report an action always go out; the rest within budget. */
	if (acted)
		ratelimit_force_at(&m->log_rl, now_ms, &held);
	else if (!ratelimit_pass_at(&m->log_rl, now_ms, &held))
		return;
	if (held)
		log_warn("pinning_violations_suppressed", "count=%" PRIu64 " interval_s=%u", held,
			 m->opts.log_interval_s);
	log_warn(e->kind == PINNING_KIND_DENIED ? "affinity_denied" : "pinning_violation",
		 "cpu=%u pid=%u tgid=%u comm=%s kind=%s cgroup=%s cgroup_id=%" PRIu64
		 " owner=%s action=%s",
		 e->cpu, e->pid, e->tgid, log_quote(e->comm),
		 e->kind <= PINNING_KIND_DENIED ? kind_names[e->kind] : "?",
		 log_quote(path ? path : "?"), (uint64_t)e->cgroup_id, log_quote(owner), action);
}

static int on_sample(void *ctx, void *data, size_t len)
{
	struct bpfmon *m = ctx;
	struct pinning_event e;

	if (len < sizeof(e)) {
		m->act.read_errors++;
		return 0;
	}
	memcpy(&e, data, sizeof(e));
	e.comm[sizeof(e.comm) - 1] = 0;
	m->act.events++;
	if (m->tap_fn)
		m->tap_fn(&e, cgroup_path(m, e.cgroup_id), m->tap_userdata);
	handle_event(m, &e);
	return 0;
}

int bpfmon_drain(struct bpfmon *m)
{
	int n;

	if (!m->rb)
		return 0;
	n = ring_buffer__consume(m->rb);
	if (n < 0)
		m->act.read_errors++;
	return n;
}

/* On the loop: drain what the kernel already has, never wait for more. */
static void on_ring_readable(evutil_socket_t fd, short what, void *arg)
{
	struct bpfmon *m = arg;
	uint64_t t0 = clock_now_ns(), took, held;

	(void)bpfmon_drain(m);
	took = clock_now_ns() - t0;
	if (took > HANDLER_BUDGET_NS && ratelimit_pass(&m->slow_rl, &held))
		log_warn("slow_handler", "handler=ring_buffer took_ms=%" PRIu64 " suppressed=%" PRIu64,
			 took / 1000000, held);
}

void bpfmon_set_event_fn(struct bpfmon *m, bpfmon_event_fn fn, void *userdata)
{
	m->event_fn = fn;
	m->event_userdata = userdata;
}

void bpfmon_set_tap_fn(struct bpfmon *m, bpfmon_tap_fn fn, void *userdata)
{
	m->tap_fn = fn;
	m->tap_userdata = userdata;
}

void bpfmon_read_actions(const struct bpfmon *m, struct bpfmon_actions *ret)
{
	*ret = m->act;
}

static int prog_stats(const struct bpf_program *p, uint64_t *ret_runs, uint64_t *ret_ns)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_program__fd(p) < 0)
		return -ENOENT;
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) < 0)
		return -errno;
	*ret_runs = info.run_cnt;
	*ret_ns = info.run_time_ns;
	return 0;
}

int bpfmon_prog_stats(const struct bpfmon *m, const char *name, uint64_t *ret_runs,
		      uint64_t *ret_ns)
{
	struct bpf_object *objs[2] = { m->skel ? m->skel->obj : NULL,
				       m->enforce ? m->enforce->obj : NULL };

	for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
		struct bpf_program *p = objs[i] ? bpf_object__find_program_by_name(objs[i], name)
						: NULL;

		if (p && bpf_program__fd(p) >= 0)
			return prog_stats(p, ret_runs, ret_ns);
	}
	return -ENOENT;
}

/* ---- counters ------------------------------------------------------------------------ */

static int read_stats(struct bpfmon *m)
{
	__u32 zero = 0;

	if (!m->skel)
		return -ENODEV;
	return bpf_map__lookup_elem(m->skel->maps.cpu_stats, &zero, sizeof(zero), m->stats_buf,
				    sizeof(*m->stats_buf) * (size_t)m->ncpu, 0);
}

static void add_counters(struct bpfmon_counters *c, const struct pinning_cpu_stats *s)
{
	c->switches += s->switches;
	c->owner_switches += s->owner_switches;
	for (int k = 0; k < PINNING_KIND_MAX; k++) {
		c->violations[k] += s->violations[k];
		c->foreign_ns[k] += s->foreign_ns[k];
	}
	c->events_sent += s->events_sent;
	c->events_ratelimited += s->events_ratelimited;
	c->events_dropped += s->events_dropped;
	c->denials += s->denials;
}

int bpfmon_read_counters(struct bpfmon *m, int cpu, struct bpfmon_counters *ret)
{
	struct bpfmon_counters c = { 0 };
	int r;

	if (cpu < -1 || cpu >= m->ncpu)
		return -EINVAL;
	r = read_stats(m);
	if (r < 0)
		return r;
	for (int i = 0; i < m->ncpu; i++)
		if (cpu < 0 || i == cpu)
			add_counters(&c, &m->stats_buf[i]);
	*ret = c;
	return 0;
}

int bpfmon_read_runq(struct bpfmon *m, uint64_t slots[PINNING_HIST_SLOTS], uint64_t *ret_sum_ns)
{
	uint64_t sum = 0;
	__u32 zero = 0;
	int r;

	if (!m->skel || !m->contention)
		return -ENODEV;
	r = bpf_map__lookup_elem(m->skel->maps.runq_hist, &zero, sizeof(zero), m->hist_buf,
				 sizeof(*m->hist_buf) * (size_t)m->ncpu, 0);
	if (r < 0)
		return r;
	memset(slots, 0, sizeof(uint64_t) * PINNING_HIST_SLOTS);
	for (int i = 0; i < m->ncpu; i++) {
		for (int s = 0; s < PINNING_HIST_SLOTS; s++)
			slots[s] += m->hist_buf[i].slots[s];
		sum += m->hist_buf[i].sum_ns;
	}
	*ret_sum_ns = sum;
	return 0;
}

static int read_irq(struct bpfmon *m)
{
	__u32 zero = 0;

	if (!m->skel || !(m->features & BPFMON_FEAT_TP_BTF))
		return -ENODEV;
	return bpf_map__lookup_elem(m->skel->maps.irq_stats, &zero, sizeof(zero), m->irq_buf,
				    sizeof(*m->irq_buf) * (size_t)m->ncpu, 0);
}

int bpfmon_read_irq(struct bpfmon *m, int cpu, struct bpfmon_irq *ret)
{
	struct bpfmon_irq c = { 0 };
	int r;

	if (cpu < -1 || cpu >= m->ncpu)
		return -EINVAL;
	r = read_irq(m);
	if (r < 0)
		return r;
	for (int i = 0; i < m->ncpu; i++) {
		const struct pinning_irq_stats *s = &m->irq_buf[i];

		if (cpu >= 0 && i != cpu)
			continue;
		c.hardirqs += s->hardirqs;
		c.hardirq_ns += s->hardirq_ns;
		c.softirqs += s->softirqs;
		c.softirq_ns += s->softirq_ns;
	}
	*ret = c;
	return 0;
}

/* ---- metrics ------------------------------------------------------------------------- */

static void collect_schedstat(struct bpfmon *m)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(SCHEDSTAT_MAX);
	uint64_t pool_ns = 0;
	char cpu[16];

	if (fileio_read_at(AT_FDCWD, m->schedstat_path, FILEIO_FOLLOW, &b, NULL) < 0 ||
	    procfs_schedstat_parse(buf_str(&b), buf_len(&b), m->met.schedstat_ns, m->ncpu) < 0)
		return;
	for (int i = 0; i < m->ncpu; i++) {
		(void)snprintf(cpu, sizeof(cpu), "%d", i);
		metric_series_set(metric_with(m->met.schedstat_wait, cpu),
				  (double)m->met.schedstat_ns[i] / 1e9);
		if (cpuset_has(&m->shared, i))
			pool_ns += m->met.schedstat_ns[i];
	}
	/* Summed over the CPUs in the pool now: a CPU leaving the pool can make
	 * it step down; rate() treats that as a counter reset. */
	metric_set(m->met.pool_wait, (double)pool_ns / 1e9);
}

static void collect_program(struct bpfmon_metrics *mt, const struct bpf_program *p)
{
	const char *name = bpf_program__name(p);
	uint64_t runs, ns;

	if (prog_stats(p, &runs, &ns) < 0)
		return;
	metric_series_set(metric_with(mt->prog_runs, name), (double)runs);
	metric_series_set(metric_with(mt->prog_seconds, name), (double)ns / 1e9);
}

static void collect(struct metrics *reg, void *userdata)
{
	struct bpfmon *m = userdata;
	struct bpfmon_metrics *mt = &m->met;
	struct bpfmon_counters total = { 0 };
	char cpu[16];

	metric_set(mt->loaded_any, m->skel != NULL);
	for (int e = BPFMON_AUDIT; e <= BPFMON_DENY; e++)
		metric_series_set(metric_with(mt->mode, bpfmon_enforcement_name(e)),
				  e == (int)m->effective);
	metric_set(mt->remediations, (double)m->act.remediated);
	metric_series_set(metric_with(mt->loaded, "pinning"), m->skel != NULL);
	metric_series_set(metric_with(mt->loaded, "runqueue"), m->contention);
	metric_series_set(metric_with(mt->loaded, "enforce"), m->enforce != NULL);
	metric_reset(mt->enforcement);
	metric_series_set(metric_with(mt->enforcement, bpfmon_enforcement_name(m->effective),
				  bpfmon_enforcement_name(m->opts.enforcement)),
			  1);
	metric_series_set(metric_with(mt->denials, "audit"), (double)m->act.audited);
	metric_series_set(metric_with(mt->denials, "remediate"), (double)m->act.remediated);
	metric_set(mt->read_errors, (double)m->act.read_errors);
	if (mt->schedstat_wait)
		collect_schedstat(m);
	if (read_stats(m) < 0)
		return;

	for (int i = 0; i < m->ncpu; i++) {
		const struct pinning_cpu_stats *s = &m->stats_buf[i];

		add_counters(&total, s);
		/* Series for CPUs that are or were exclusive only. */
		if (!m->owners[i].id && !s->switches)
			continue;
		(void)snprintf(cpu, sizeof(cpu), "%d", i);
		metric_series_set(metric_with(mt->switches, cpu), (double)s->switches);
		for (int k = 0; k < PINNING_KIND_MAX; k++) {
			metric_series_set(metric_with(mt->violations, cpu, kind_names[k]),
					  (double)s->violations[k]);
			metric_series_set(metric_with(mt->violation_seconds, cpu, kind_names[k]),
					  (double)s->foreign_ns[k] / 1e9);
		}
	}
	if (read_irq(m) == 0)
		for (int i = 0; i < m->ncpu; i++) {
			const struct pinning_irq_stats *s = &m->irq_buf[i];

			if (!m->owners[i].id && !s->hardirqs && !s->softirqs)
				continue;
			(void)snprintf(cpu, sizeof(cpu), "%d", i);
			metric_series_set(metric_with(mt->irqs, cpu, "hard"), (double)s->hardirqs);
			metric_series_set(metric_with(mt->irqs, cpu, "soft"), (double)s->softirqs);
			metric_series_set(metric_with(mt->irq_seconds, cpu, "hard"),
					  (double)s->hardirq_ns / 1e9);
			metric_series_set(metric_with(mt->irq_seconds, cpu, "soft"),
					  (double)s->softirq_ns / 1e9);
		}
	metric_series_set(metric_with(mt->denials, "deny"), (double)total.denials);
	metric_set(mt->dropped, (double)total.events_dropped);
	metric_set(mt->ratelimited, (double)total.events_ratelimited);

	if (m->contention) {
		uint64_t slots[PINNING_HIST_SLOTS], sum_ns;
		unsigned long long counts[PINNING_HIST_SLOTS];

		if (bpfmon_read_runq(m, slots, &sum_ns) == 0) {
			for (int s = 0; s < PINNING_HIST_SLOTS; s++)
				counts[s] = slots[s];
			metric_series_set_histogram(metric_with(mt->runq, "shared"), counts,
						    (double)sum_ns / 1e9);
		}
	}
	if (mt->prog_runs) {
		struct bpf_object *objs[2] = { m->skel->obj, m->enforce ? m->enforce->obj : NULL };

		for (size_t i = 0; i < ARRAY_SIZE(objs) && objs[i]; i++)
			for (struct bpf_program *p = bpf_object__next_program(objs[i], NULL); p;
			     p = bpf_object__next_program(objs[i], p))
				collect_program(mt, p);
	}
}

int bpfmon_metrics_register(struct bpfmon *m, struct metrics *reg)
{
	struct bpfmon_metrics *mt = &m->met;

	mt->loaded_any = metrics_family(reg, MF_BPF_LOADED);
	mt->loaded = metrics_family(reg, MF_BPF_PROGRAM_LOADED);
	mt->mode = metrics_family(reg, MF_ENFORCEMENT_MODE);
	mt->remediations = metrics_family(reg, MF_REMEDIATIONS_TOTAL);
	mt->pool_wait = metrics_family(reg, MF_SHARED_POOL_WAIT_SECONDS_TOTAL);
	mt->enforcement = metrics_family(reg, MF_PINNING_ENFORCEMENT_INFO);
	mt->switches = metrics_family(reg, MF_PINNING_SWITCHES_TOTAL);
	mt->violations = metrics_family(reg, MF_PINNING_VIOLATIONS_TOTAL);
	mt->violation_seconds = metrics_family(reg, MF_PINNING_VIOLATION_SECONDS_TOTAL);
	mt->denials = metrics_family(reg, MF_AFFINITY_DENIALS_TOTAL);
	mt->dropped = metrics_family(reg, MF_BPF_EVENTS_DROPPED_TOTAL);
	mt->ratelimited = metrics_family(reg, MF_BPF_EVENTS_RATELIMITED_TOTAL);
	mt->read_errors = metrics_family(reg, MF_BPF_READ_ERRORS_TOTAL);
	mt->irqs = metrics_family(reg, MF_EXCLUSIVE_INTERRUPTS_TOTAL);
	mt->irq_seconds = metrics_family(reg, MF_EXCLUSIVE_INTERRUPT_SECONDS_TOTAL);
	mt->runq = metrics_family(reg, MF_RUNQUEUE_LATENCY_SECONDS);
	if (!mt->loaded_any || !mt->mode || !mt->remediations || !mt->pool_wait || !mt->loaded ||
	    !mt->enforcement || !mt->switches || !mt->violations ||
	    !mt->violation_seconds || !mt->denials || !mt->dropped || !mt->ratelimited ||
	    !mt->read_errors || !mt->runq || !mt->irqs || !mt->irq_seconds)
		return -ENOMEM;
	if (m->stats_fd >= 0) {
		mt->prog_runs = metrics_family(reg, MF_BPF_PROGRAM_RUNS_TOTAL);
		mt->prog_seconds = metrics_family(reg, MF_BPF_PROGRAM_RUN_SECONDS_TOTAL);
		if (!mt->prog_runs || !mt->prog_seconds)
			return -ENOMEM;
	}
	/* The kernel's own per-CPU wait time costs nothing: export it when the
	 * kernel has it (CONFIG_SCHEDSTATS). */
	if (access(m->schedstat_path, R_OK) == 0) {
		mt->schedstat_ns = calloc((size_t)m->ncpu, sizeof(*mt->schedstat_ns));
		mt->schedstat_wait = metrics_family(reg, MF_SCHEDSTAT_WAITING_SECONDS_TOTAL);
		if (!mt->schedstat_ns || !mt->schedstat_wait)
			return -ENOMEM;
	} else {
		log_info("schedstat_unavailable", "path=%s", m->schedstat_path);
	}
	return metrics_add_collector(reg, collect, m);
}
