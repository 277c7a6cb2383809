/* Drawing the node picture in a terminal. See nodemap.h.
 *
 *   node worker-1: 16 CPUs, 16 online · 2 claims · 10 shared · 3 held · 2 reserved
 *
 *   socket 0 · NUMA 0 · L3 0
 *     [  0r   8r] [  1a   9a] [  2.  10.] [  3b  11.]
 *
 *     a  default/db          pods db-0, container postgres, CPUs 1,9
 *     b  batch/job           pods job-x, CPUs 3
 *     .  shared   r reserved   ~ real-time   x offline   ! held but offline
 *
 * One bracket per physical core, its threads inside; each CPU its number and
 * a mark: a letter per claim (the legend names it), or what it is. On a
 * terminal every claim also gets its own colour.
 */
#include "core/nodemap.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cpuset.h"

#define LINE_WIDTH 96

/* ANSI: one background per claim, in turn; marks for the other uses. */
static const char *const claim_colours[] = { "\033[30;42m", "\033[30;43m", "\033[30;46m",
					     "\033[30;45m", "\033[30;44m", "\033[30;47m" };
#define DIM "\033[2m"
#define RED "\033[1;31m"
#define RESET "\033[0m"

static char claim_tag(int i)
{
	if (i < 26)
		return (char)('a' + i);
	if (i < 52)
		return (char)('A' + i - 26);
	return '+';
}

/* -1 (not known) sorts after every real place: CPUs offline since start last. */
static int place(int v)
{
	return v < 0 ? INT_MAX : v;
}

static int by_place(const void *a, const void *b)
{
	const struct nodemap_cpu *x = a, *y = b;
	int k[5][2] = { { place(x->socket), place(y->socket) },
			{ place(x->numa), place(y->numa) },
			{ place(x->l3), place(y->l3) },
			{ place(x->core), place(y->core) },
			{ x->cpu, y->cpu } };

	for (int i = 0; i < 5; i++)
		if (k[i][0] != k[i][1])
			return k[i][0] < k[i][1] ? -1 : 1;
	return 0;
}

/* The mark of c and, with colour, the escape that goes before it. */
static char mark_of(const struct nodemap_cpu *c, const char **esc)
{
	*esc = NULL;
	if (c->n_claims && !c->online) {
		*esc = RED;
		return '!';
	}
	if (c->n_claims) {
		*esc = claim_colours[c->claims[0] % (int)(sizeof(claim_colours) /
							  sizeof(claim_colours[0]))];
		return claim_tag(c->claims[0]);
	}
	switch (c->use) {
	case NODEMAP_RESERVED:
		*esc = DIM;
		return 'r';
	case NODEMAP_REALTIME:
		return '~';
	case NODEMAP_OFFLINE:
		*esc = RED;
		return 'x';
	case NODEMAP_ISOLATED:
		*esc = DIM;
		return 'i';
	default:
		return '.';
	}
}

static void draw_cpu(const struct nodemap_cpu *c, bool colour, FILE *out)
{
	const char *esc;
	char mark = mark_of(c, &esc);

	if (colour && esc)
		(void)fprintf(out, "%s%4d%c%s", esc, c->cpu, mark, RESET);
	else
		(void)fprintf(out, "%4d%c", c->cpu, mark);
}

static void draw_header(const struct nodemap *m, FILE *out)
{
	int n[NODEMAP_ISOLATED + 1] = { 0 }, online = 0;

	for (int i = 0; i < m->n_cpus; i++) {
		n[m->cpus[i].use]++;
		online += m->cpus[i].online;
	}
	(void)fprintf(out, "node %s: %d CPUs, %d online · %d claim%s · %d shared · %d held", m->node,
		      m->n_cpus, online, m->n_claims, m->n_claims == 1 ? "" : "s",
		      n[NODEMAP_SHARED], n[NODEMAP_CLAIMED]);
	if (n[NODEMAP_RESERVED])
		(void)fprintf(out, " · %d reserved", n[NODEMAP_RESERVED]);
	if (n[NODEMAP_REALTIME])
		(void)fprintf(out, " · %d real-time", n[NODEMAP_REALTIME]);
	if (n[NODEMAP_OFFLINE])
		(void)fprintf(out, " · %d offline", n[NODEMAP_OFFLINE]);
	if (n[NODEMAP_ISOLATED])
		(void)fprintf(out, " · %d isolated", n[NODEMAP_ISOLATED]);
	(void)fputs("\n", out);
}

static void draw_group_title(const struct nodemap_cpu *c, FILE *out)
{
	if (c->socket < 0 && c->numa < 0 && c->core < 0) {
		(void)fputs("\nno topology (offline since start)\n", out);
		return;
	}
	(void)fprintf(out, "\nsocket %d", c->socket);
	if (c->numa >= 0)
		(void)fprintf(out, " · NUMA %d", c->numa);
	if (c->l3 >= 0)
		(void)fprintf(out, " · L3 %d", c->l3);
	(void)fputs("\n", out);
}

static bool same_group(const struct nodemap_cpu *a, const struct nodemap_cpu *b)
{
	return a->socket == b->socket && a->numa == b->numa && a->l3 == b->l3;
}

/* Threads of one physical core sit together; a CPU without a core alone. */
static bool same_core(const struct nodemap_cpu *a, const struct nodemap_cpu *b)
{
	return same_group(a, b) && a->core >= 0 && a->core == b->core;
}

static void draw_cores(const struct nodemap_cpu *v, int n, bool colour, FILE *out)
{
	int col = 0;

	for (int i = 0; i < n;) {
		int j = i + 1;

		if (i == 0 || !same_group(&v[i], &v[i - 1])) {
			if (i)
				(void)fputs("\n", out);
			draw_group_title(&v[i], out);
			col = 0;
		}
		while (j < n && same_core(&v[j], &v[i]))
			j++;
		if (col && col + 3 + 5 * (j - i) > LINE_WIDTH) {
			(void)fputs("\n", out);
			col = 0;
		}
		(void)fputs(col ? " [" : "  [", out);
		for (int k = i; k < j; k++)
			draw_cpu(&v[k], colour, out);
		(void)fputs("]", out);
		col += 3 + 5 * (j - i);
		i = j;
	}
	(void)fputs("\n", out);
}

static bool has_isolated(const struct nodemap *m)
{
	for (int i = 0; i < m->n_cpus; i++)
		if (m->cpus[i].use == NODEMAP_ISOLATED)
			return true;
	return false;
}

static void draw_legend(const struct nodemap *m, bool colour, FILE *out)
{
	(void)fputs("\n", out);
	for (int i = 0; i < m->n_claims; i++) {
		const struct nodemap_claim *c = &m->claims[i];
		const char *esc = claim_colours[i % (int)(sizeof(claim_colours) /
							  sizeof(claim_colours[0]))];
		struct cpuset cpus;
		char list[256];

		cpuset_zero(&cpus);
		for (int k = 0; k < m->n_cpus; k++)
			for (int j = 0; j < m->cpus[k].n_claims && j < NODEMAP_CPU_CLAIMS; j++)
				if (m->cpus[k].claims[j] == i)
					cpuset_set(&cpus, m->cpus[k].cpu);
		if (cpuset_format(&cpus, list, sizeof(list)) < 0)
			(void)snprintf(list, sizeof(list), "%d CPUs", cpuset_count(&cpus));
		(void)fprintf(out, "  %s%c%s  %-32s", colour ? esc : "", claim_tag(i),
			      colour ? RESET : "", c->name);
		if (c->n_pods) {
			(void)fputs(c->n_pods > 1 ? " pods " : " pod ", out);
			for (int j = 0; j < c->n_pods; j++)
				(void)fprintf(out, "%s%s", j ? ", " : "", c->pods[j]);
			(void)fputs(",", out);
		}
		if (c->container)
			(void)fprintf(out, " container %s,", c->container);
		(void)fprintf(out, " CPUs %s%s\n", list, c->realtime ? " (real-time)" : "");
	}
	(void)fputs("  .  shared   r reserved   ~ real-time, unclaimed   x offline   ! held but "
		    "offline\n",
		    out);
	if (has_isolated(m))
		(void)fputs("  i  isolated, unclaimed (isolcpus/nohz_full)\n", out);
}

int nodemap_draw(const struct nodemap *m, bool colour, FILE *out)
{
	struct nodemap_cpu *v;

	v = malloc(sizeof(*v) * (size_t)(m->n_cpus ? m->n_cpus : 1));
	if (!v)
		return -ENOMEM;
	memcpy(v, m->cpus, sizeof(*v) * (size_t)m->n_cpus);
	qsort(v, (size_t)m->n_cpus, sizeof(*v), by_place);
	draw_header(m, out);
	draw_cores(v, m->n_cpus, colour, out);
	draw_legend(m, colour, out);
	free(v);
	return ferror(out) ? -EIO : 0;
}
