/* irq: interrupt affinities moved off isolated CPUs and put back exactly,
 * with a record that survives the daemon (see irq.h). */
#include "host/irq.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/jsonc.h"
#include "lib/num.h"

#define RECORD_MAX (4u << 20)
#define AFFINITY_MAX 65536 /* bytes of one smp_affinity_list */
#define ROW_MAX 4096

/* ---- parsers ------------------------------------------------------------------------------ */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int irq_mask_parse(const char *s, size_t len, struct cpuset *ret)
{
	struct cpuset set;
	int bit = 0, digits = 0;

	if (len && s[len - 1] == '\n')
		len--;
	if (!len)
		return -EINVAL;
	cpuset_zero(&set);
	/* From the least significant end: 8 digits per comma-separated group. */
	for (size_t i = len; i-- > 0;) {
		int v;

		if (s[i] == ',') {
			if (digits == 0 || digits > 8 || i == 0)
				return -EINVAL;
			bit += (8 - digits) * 4;
			digits = 0;
			continue;
		}
		v = hexval(s[i]);
		if (v < 0 || ++digits > 8)
			return -EINVAL;
		for (int b = 0; b < 4; b++, bit++) {
			if (!(v & (1 << b)))
				continue;
			if (bit >= CPUSET_MAX)
				return -ERANGE;
			cpuset_set(&set, bit);
		}
	}
	*ret = set;
	return 0;
}

int irq_mask_format(const struct cpuset *s, char *buf, size_t size)
{
	int last = cpuset_last(s), groups = last < 0 ? 1 : last / 32 + 1;
	size_t o = 0;

	for (int g = groups - 1; g >= 0; g--) {
		uint32_t v = 0;
		int n;

		for (int b = 0; b < 32; b++)
			if (cpuset_has(s, g * 32 + b))
				v |= 1u << b;
		n = g == groups - 1 ? snprintf(buf + o, size - o, "%x", v)
				    : snprintf(buf + o, size - o, ",%08x", v);
		if (n < 0 || (size_t)n >= size - o)
			return -ENOSPC;
		o += (size_t)n;
	}
	return 0;
}

/* Column of CPU cpu in the header "           CPU0       CPU1 ...", or -1. */
static int header_column(const char *line, int cpu, int *ret_cols)
{
	int col = -1, n = 0;

	for (const char *p = line; *p;) {
		const char *end;
		int id;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (strncmp(p, "CPU", 3) != 0)
			return -EPROTO;
		if (num_parse_int(p + 3, &end, 0, INT_MAX, &id) < 0 ||
		    (*end && *end != ' ' && *end != '\t'))
			return -EPROTO;
		if (id == cpu)
			col = n;
		n++;
		p = end;
	}
	if (!n)
		return -EPROTO;
	*ret_cols = n;
	return col;
}

/* One row: "  36:   0  177811  PCI-MSIX-0000:00:02.0   1-edge  virtio1-req.0". */
static int parse_row(char *line, int col, int cols, struct irq_row *row)
{
	char *p = line, *colon, *w, *d;

	while (*p == ' ')
		p++;
	colon = strchr(p, ':');
	if (!colon || colon == p)
		return -EPROTO;
	*colon = 0;
	row->label = p;
	row->count = 0;
	p = colon + 1;
	/* counts, one per CPU; rows such as "ERR:" have fewer */
	for (int i = 0; i < cols; i++) {
		const char *end;
		unsigned long long v;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!isdigit((unsigned char)*p))
			break;
		if (num_parse_ull(p, &end, ULLONG_MAX, &v) < 0 ||
		    (*end && *end != ' ' && *end != '\t'))
			return -EPROTO;
		if (i == col)
			row->count = v;
		p += end - p; /* p is the writable line: the description is squeezed in place */
	}
	/* the description, blanks squeezed */
	while (*p == ' ' || *p == '\t')
		p++;
	for (w = d = p; *w; w++) {
		if ((*w == ' ' || *w == '\t') && (d == p || d[-1] == ' '))
			continue;
		*d++ = *w == '\t' ? ' ' : *w;
	}
	while (d > p && d[-1] == ' ')
		d--;
	*d = 0;
	row->desc = p;
	return 0;
}

int irq_interrupts_parse(const char *text, size_t len, int cpu,
			 int (*fn)(void *ud, const struct irq_row *row), void *ud)
{
	char line[ROW_MAX + 1];
	const char *p = text, *end = text + len;
	int col = -1, cols = 0, r = 0;
	bool header = true;

	while (p < end && r == 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		struct irq_row row;

		if (n > ROW_MAX || memchr(p, 0, n))
			return -EPROTO;
		memcpy(line, p, n);
		line[n] = 0;
		p = nl ? nl + 1 : end;
		if (header) {
			col = header_column(line, cpu, &cols);
			if (col == -EPROTO)
				return -EPROTO;
			header = false;
			continue;
		}
		if (!line[strspn(line, " \t")])
			continue;
		if (parse_row(line, col, cols, &row) < 0)
			return -EPROTO;
		r = fn(ud, &row);
	}
	return header ? -EPROTO : r;
}

/* ---- the guard ---------------------------------------------------------------------------- */

struct holder {
	char key[IRQ_KEY_MAX];
	char *cpus; /* list form */
};

struct moved {
	int irq; /* -1: default_smp_affinity */
	char *was, *set; /* list form */
};

struct irq_guard {
	char *procfs_root;
	char *state_dir;
	struct holder *holders;
	int n_holders;
	struct moved *moved;
	int n_moved;
};

static void moved_done(struct moved *m)
{
	free(m->was);
	free(m->set);
}

struct irq_guard *irq_guard_free(struct irq_guard *g)
{
	if (!g)
		return NULL;
	for (int i = 0; i < g->n_holders; i++)
		free(g->holders[i].cpus);
	for (int i = 0; i < g->n_moved; i++)
		moved_done(&g->moved[i]);
	free(g->holders);
	free(g->moved);
	free(g->procfs_root);
	free(g->state_dir);
	free(g);
	return NULL;
}

static bool is_valid_key(const char *key)
{
	size_t n = key ? strnlen(key, IRQ_KEY_MAX) : 0;

	return n > 0 && n < IRQ_KEY_MAX && strspn(key, "abcdefghijklmnopqrstuvwxyz"
						     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == n;
}

static int find_holder(const struct irq_guard *g, const char *key)
{
	for (int i = 0; i < g->n_holders; i++)
		if (!strcmp(g->holders[i].key, key))
			return i;
	return -1;
}

static struct moved *find_moved(struct irq_guard *g, int irq)
{
	for (int i = 0; i < g->n_moved; i++)
		if (g->moved[i].irq == irq)
			return &g->moved[i];
	return NULL;
}

static void drop_moved(struct irq_guard *g, struct moved *m)
{
	moved_done(m);
	*m = g->moved[--g->n_moved];
}

/* Records (or updates) that irq was was and is now set; both copied. */
static int put_moved(struct irq_guard *g, int irq, const char *was, const char *set)
{
	struct moved *m = find_moved(g, irq), *v;
	char *w = strdup(was), *s = strdup(set);

	if (!w || !s) {
		free(w);
		free(s);
		return -ENOMEM;
	}
	if (!m) {
		v = realloc(g->moved, sizeof(*v) * (size_t)(g->n_moved + 1));
		if (!v) {
			free(w);
			free(s);
			return -ENOMEM;
		}
		g->moved = v;
		m = &g->moved[g->n_moved++];
	} else {
		moved_done(m);
	}
	*m = (struct moved){ .irq = irq, .was = w, .set = s };
	return 0;
}

int irq_guard_hold(struct irq_guard *g, const char *key, const struct cpuset *cpus)
{
	int i = is_valid_key(key) ? find_holder(g, key) : -2;
	char *list;

	if (i == -2 || cpuset_is_empty(cpus))
		return -EINVAL;
	if (i < 0 && g->n_holders >= IRQ_HOLDERS_MAX)
		return -E2BIG;
	list = cpuset_to_string(cpus);
	if (!list)
		return -ENOMEM;
	if (i < 0) {
		struct holder *v = realloc(g->holders, sizeof(*v) * (size_t)(g->n_holders + 1));

		if (!v) {
			free(list);
			return -ENOMEM;
		}
		g->holders = v;
		i = g->n_holders++;
		memcpy(g->holders[i].key, key, strlen(key) + 1);
	} else {
		free(g->holders[i].cpus);
	}
	g->holders[i].cpus = list;
	return 0;
}

int irq_guard_release(struct irq_guard *g, const char *key)
{
	int i = key ? find_holder(g, key) : -1;

	if (i < 0)
		return -ENOENT;
	free(g->holders[i].cpus);
	g->holders[i] = g->holders[--g->n_holders];
	return 0;
}

int irq_guard_n_holders(const struct irq_guard *g)
{
	return g->n_holders;
}

const char *irq_guard_holder(const struct irq_guard *g, int i)
{
	return i >= 0 && i < g->n_holders ? g->holders[i].key : NULL;
}

bool irq_guard_is_idle(const struct irq_guard *g)
{
	return !g->n_holders && !g->n_moved;
}

void irq_guard_isolated(const struct irq_guard *g, struct cpuset *ret)
{
	struct cpuset s, c;

	cpuset_zero(&s);
	for (int i = 0; i < g->n_holders; i++)
		if (cpuset_parse(g->holders[i].cpus, &c, NULL) == 0)
			cpuset_or(&s, &s, &c);
	*ret = s;
}

/* ---- the record ---- */

static int record_load(struct irq_guard *g, struct json_object *o, struct errbuf *eb)
{
	struct json_object *hs, *ms, *def;
	struct cpuset tmp;

	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "holders", &hs) ||
	    !json_object_is_type(hs, json_type_array) ||
	    !json_object_object_get_ex(o, "irqs", &ms) || !json_object_is_type(ms, json_type_array))
		return errbuf_fail(eb, -EPROTO, "no holders or irqs array");
	for (size_t i = 0; i < json_object_array_length(hs); i++) {
		struct json_object *h = json_object_array_get_idx(hs, i);
		const char *key = jsonc_str(h, "key"), *cpus = jsonc_str(h, "cpus");
		int r;

		if (!key || !cpus || cpuset_parse(cpus, &tmp, NULL) < 0)
			return errbuf_fail(eb, -EPROTO, "holder %zu is malformed", i);
		r = irq_guard_hold(g, key, &tmp);
		if (r < 0)
			return errbuf_fail(eb, r == -ENOMEM ? r : -EPROTO, "holder %zu: %s", i,
					   strerror(-r));
	}
	for (size_t i = 0; i < json_object_array_length(ms); i++) {
		struct json_object *m = json_object_array_get_idx(ms, i), *n;
		const char *was = jsonc_str(m, "was"), *set = jsonc_str(m, "set");
		int64_t irq;

		if (!json_object_object_get_ex(m, "irq", &n) || !json_object_is_type(n, json_type_int))
			return errbuf_fail(eb, -EPROTO, "irq entry %zu has no irq number", i);
		irq = json_object_get_int64(n);
		if (irq < 0 || irq >= IRQ_MAX || !was || !set || cpuset_parse(was, &tmp, NULL) < 0 ||
		    cpuset_parse(set, &tmp, NULL) < 0 || find_moved(g, (int)irq))
			return errbuf_fail(eb, -EPROTO, "irq entry %zu is malformed", i);
		if (put_moved(g, (int)irq, was, set) < 0)
			return -ENOMEM;
	}
	if (json_object_object_get_ex(o, "default", &def)) {
		const char *was = jsonc_str(def, "was"), *set = jsonc_str(def, "set");

		if (!was || !set || cpuset_parse(was, &tmp, NULL) < 0 ||
		    cpuset_parse(set, &tmp, NULL) < 0)
			return errbuf_fail(eb, -EPROTO, "default entry is malformed");
		if (put_moved(g, -1, was, set) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int record_save(const struct irq_guard *g)
{
	_cleanup_json_ struct json_object *o = NULL;
	struct json_object *hs, *ms;
	const char *text;
	int r = 0;

	if (!g->state_dir)
		return 0;
	if (!g->n_holders && !g->n_moved)
		return fileio_remove(g->state_dir, IRQ_RECORD_FILE);
	o = json_object_new_object();
	hs = json_object_new_array();
	ms = json_object_new_array();
	r = o ? jsonc_add(o, "holders", hs) : -ENOMEM;
	r = r ?: jsonc_add(o, "irqs", ms);
	for (int i = 0; !r && i < g->n_holders; i++) {
		struct json_object *h = json_object_new_object();

		r = jsonc_push(hs, h);
		r = r ?: jsonc_add(h, "key", json_object_new_string(g->holders[i].key));
		r = r ?: jsonc_add(h, "cpus", json_object_new_string(g->holders[i].cpus));
	}
	for (int i = 0; !r && i < g->n_moved; i++) {
		const struct moved *m = &g->moved[i];
		struct json_object *e = json_object_new_object();

		if (m->irq < 0) {
			r = jsonc_add(o, "default", e);
		} else {
			r = jsonc_push(ms, e);
			r = r ?: jsonc_add(e, "irq", json_object_new_int(m->irq));
		}
		r = r ?: jsonc_add(e, "was", json_object_new_string(m->was));
		r = r ?: jsonc_add(e, "set", json_object_new_string(m->set));
	}
	if (r < 0)
		return r;
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	return fileio_write_atomic(g->state_dir, IRQ_RECORD_FILE, text, strlen(text), 0600);
}

int irq_guard_new(const struct irq_opts *o, struct irq_guard **ret, struct errbuf *eb)
{
	_cleanup_(irq_guard_freep) struct irq_guard *g = calloc(1, sizeof(*g));
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ struct json_object *rec = NULL;
	char path[PATH_MAX];
	int r;

	if (!g)
		return -ENOMEM;
	g->procfs_root = strdup(o->procfs_root ? o->procfs_root : "/proc");
	if (!g->procfs_root || (o->state_dir && !(g->state_dir = strdup(o->state_dir))))
		return -ENOMEM;
	if (g->state_dir) {
		(void)snprintf(path, sizeof(path), "%s/%s", g->state_dir, IRQ_RECORD_FILE);
		r = fileio_read(path, RECORD_MAX, &text, NULL, eb);
		if (r < 0 && r != -ENOENT)
			return r;
		if (r == 0) {
			rec = json_tokener_parse(text);
			r = record_load(g, rec, eb);
			if (r < 0)
				return r;
		}
	}
	*ret = TAKE_PTR(g);
	return 0;
}

/* ---- applying ---- */

static void note(int *n, int *list, int irq)
{
	if (*n < IRQ_REPORT_MAX)
		list[(*n)++] = irq;
}

/* Reads the affinity of irq (-1: the default) into *ret. */
static int read_affinity(int dfd, int irq, struct cpuset *ret)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(AFFINITY_MAX);
	char path[64];
	int r;

	if (irq < 0)
		(void)snprintf(path, sizeof(path), "default_smp_affinity");
	else
		(void)snprintf(path, sizeof(path), "%d/smp_affinity_list", irq);
	r = fileio_read_at(dfd, path, 0, &b, NULL);
	if (r < 0)
		return r;
	return irq < 0 ? irq_mask_parse(buf_str(&b), buf_len(&b), ret)
		       : cpuset_parse_n(buf_str(&b), buf_len(&b), ret, NULL);
}

static int write_affinity(int dfd, int irq, const struct cpuset *s)
{
	char path[64];
	_cleanup_free_ char *list = NULL;
	char mask[CPUSET_MAX / 4 + CPUSET_MAX / 32 + 2];

	if (irq < 0) {
		if (irq_mask_format(s, mask, sizeof(mask)) < 0)
			return -ENOSPC;
		return fileio_write_value(dfd, "default_smp_affinity", mask);
	}
	list = cpuset_to_string(s);
	if (!list)
		return -ENOMEM;
	(void)snprintf(path, sizeof(path), "%d/smp_affinity_list", irq);
	return fileio_write_value(dfd, path, list);
}

/* One interrupt (-1: the default) brought in line with iso. */
static int apply_one(struct irq_guard *g, int dfd, int irq, const struct cpuset *iso,
		     struct irq_report *rep)
{
	struct moved *m = find_moved(g, irq);
	struct cpuset cur, base, want, set;
	_cleanup_free_ char *cur_s = NULL, *base_s = NULL, *want_s = NULL;
	bool touches;
	int r;

	r = read_affinity(dfd, irq, &cur);
	if (r < 0) {
		if (m && r == -ENOENT) /* the interrupt went away, and what we did with it */
			drop_moved(g, m);
		rep->failed += r != -ENOENT;
		return r == -ENOMEM ? r : 0;
	}
	/* Someone else changed it since we did: theirs is what comes back. */
	if (m && (cpuset_parse(m->set, &set, NULL) < 0 || !cpuset_equal(&set, &cur))) {
		cur_s = cpuset_to_string(&cur);
		if (!cur_s)
			return -ENOMEM;
		free(m->was);
		m->was = TAKE_PTR(cur_s);
		free(m->set);
		m->set = strdup(m->was);
		if (!m->set)
			return -ENOMEM;
	}
	if (m)
		(void)cpuset_parse(m->was, &base, NULL);
	else
		base = cur;
	touches = cpuset_intersects(&base, iso);
	cpuset_andnot(&want, &base, iso);
	if (!touches) {
		want = base;
	} else if (cpuset_is_empty(&want)) {
		rep->empty++;
		note(&rep->n_empty_irqs, rep->empty_irqs, irq);
		want = base;
	}
	if (cpuset_equal(&want, &cur)) {
		if (m && cpuset_equal(&want, &base))
			drop_moved(g, m);
		if (touches && !cpuset_equal(&want, &base))
			rep->kept++;
		if (irq < 0)
			rep->default_set = !cpuset_intersects(&cur, iso);
		return 0;
	}
	r = write_affinity(dfd, irq, &want);
	if (r < 0) {
		if (r == -EIO || r == -EPERM || r == -EACCES || r == -EINVAL) {
			rep->refused++;
			note(&rep->n_refused_irqs, rep->refused_irqs, irq);
		} else {
			rep->failed++;
		}
		return r == -ENOMEM ? r : 0;
	}
	rep->moved++;
	if (irq < 0)
		rep->default_set = !cpuset_intersects(&want, iso);
	if (cpuset_equal(&want, &base)) {
		if (m)
			drop_moved(g, m);
		return 0;
	}
	base_s = cpuset_to_string(&base);
	want_s = cpuset_to_string(&want);
	if (!base_s || !want_s)
		return -ENOMEM;
	return put_moved(g, irq, base_s, want_s);
}

static int cmp_int(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* The interrupt numbers in <procfs>/irq, ascending, in a new array. */
static int list_irqs(int dfd, int **ret)
{
	_cleanup_free_ int *v = NULL;
	DIR *d;
	struct dirent *e;
	int n = 0, cap = 0, fd = dup(dfd);

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		(void)close(fd);
		return -errno;
	}
	while ((e = readdir(d)) && n < IRQ_MAX) {
		int irq;

		if (num_parse_int(e->d_name, NULL, 0, IRQ_MAX - 1, &irq) < 0)
			continue;
		if (n == cap) {
			int *nv = realloc(v, sizeof(*v) * (size_t)(cap = cap ? cap * 2 : 64));

			if (!nv) {
				(void)closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (int)irq;
	}
	(void)closedir(d);
	if (n)
		qsort(v, (size_t)n, sizeof(*v), cmp_int);
	*ret = TAKE_PTR(v);
	return n;
}

int irq_guard_apply(struct irq_guard *g, struct irq_report *rep)
{
	_cleanup_close_ int dfd = -1;
	_cleanup_free_ int *irqs = NULL;
	struct cpuset iso;
	char path[PATH_MAX];
	int n, r = 0;

	memset(rep, 0, sizeof(*rep));
	irq_guard_isolated(g, &iso);
	(void)snprintf(path, sizeof(path), "%s/irq", g->procfs_root);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	n = list_irqs(dfd, &irqs);
	if (n < 0)
		return n;
	for (int i = 0; i < n && r >= 0; i++)
		r = apply_one(g, dfd, irqs[i], &iso, rep);
	/* Interrupts recorded that are gone from the directory are gone. */
	for (int i = 0; r >= 0 && i < g->n_moved;) {
		struct moved *m = &g->moved[i];

		if (m->irq >= 0 && !(n && bsearch(&m->irq, irqs, (size_t)n, sizeof(int), cmp_int)))
			drop_moved(g, m);
		else
			i++;
	}
	r = r < 0 ? r : apply_one(g, dfd, -1, &iso, rep);
	if (r < 0)
		return r;
	return record_save(g);
}

/* ---- irqbalance ---- */

int irq_balancer_pid(const char *procfs_root)
{
	const char *root = procfs_root ? procfs_root : "/proc";
	DIR *d = opendir(root);
	struct dirent *e;
	int pid = 0;

	if (!d)
		return 0;
	while (!pid && (e = readdir(d))) {
		_cleanup_(buf_done) struct buf b = BUF_INIT(64);
		char path[PATH_MAX];

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		(void)snprintf(path, sizeof(path), "%s/%s/comm", root, e->d_name);
		if (fileio_read_at(AT_FDCWD, path, 0, &b, NULL) == 0 &&
		    !strcmp(buf_str(&b), "irqbalance\n"))
			(void)num_parse_int(e->d_name, NULL, 1, INT_MAX, &pid);
	}
	(void)closedir(d);
	return pid;
}
