/* Isolated and tickless CPUs from sysfs and the kernel command line. See isol.h. */
#include "host/isol.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MOD "isol"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"

/* The kernel prints its lists in one line; a command line is at most a few KiB. */
#define ISOL_FILE_MAX (64 * 1024)

/* One isolcpus= value: [flag,]...cpu-list. */
static int parse_isolcpus(const char *v, struct cpuset *domain, struct cpuset *nohz,
			  struct cpuset *managed, struct errbuf *eb)
{
	bool f_domain = false, f_nohz = false, f_managed = false, any = false;
	struct errbuf why = { "" };
	struct cpuset cpus;
	int r;

	/* Flags are words of letters and '_' each followed by ','. */
	while (isalpha((unsigned char)*v)) {
		size_t n = strcspn(v, ",");
		bool word = true;

		for (size_t i = 0; i < n; i++)
			word &= isalpha((unsigned char)v[i]) || v[i] == '_';
		if (!word || v[n] != ',')
			break;
		if (n == 4 && !strncmp(v, "nohz", 4))
			f_nohz = any = true;
		else if (n == 6 && !strncmp(v, "domain", 6))
			f_domain = any = true;
		else if (n == 11 && !strncmp(v, "managed_irq", 11))
			f_managed = any = true;
		v += n + 1;
	}
	if (!*v)
		return errbuf_fail(eb, -EINVAL, "isolcpus=: no CPU list after the flags");
	r = cpuset_parse(v, &cpus, &why);
	if (r < 0)
		return errbuf_fail(eb, r, "isolcpus=%.64s: %s", v, why.s);
	if (!any)
		f_domain = true; /* the kernel's default */
	if (f_domain)
		cpuset_or(domain, domain, &cpus);
	if (f_nohz)
		cpuset_or(nohz, nohz, &cpus);
	if (f_managed)
		cpuset_or(managed, managed, &cpus);
	return 0;
}

int isol_parse_cmdline(const char *cmdline, struct cpuset *ret_domain, struct cpuset *ret_nohz,
		       struct cpuset *ret_managed_irq, struct errbuf *eb)
{
	struct cpuset domain, nohz, managed, cpus;
	struct errbuf why = { "" };
	const char *p = cmdline;
	int r = 0;

	cpuset_zero(&domain);
	cpuset_zero(&nohz);
	cpuset_zero(&managed);
	while (*p && r == 0) {
		char tok[4096];
		size_t n = 0;
		bool quoted = false;

		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		/* One parameter; double quotes may hold spaces and are dropped. */
		for (; *p && (quoted || !isspace((unsigned char)*p)); p++) {
			if (*p == '"')
				quoted = !quoted;
			else if (n + 1 < sizeof(tok))
				tok[n++] = *p;
		}
		tok[n] = 0;
		if (!strcmp(tok, "--"))
			break;
		if (!strncmp(tok, "isolcpus=", 9)) {
			r = parse_isolcpus(tok + 9, &domain, &nohz, &managed, eb);
		} else if (!strncmp(tok, "nohz_full=", 10)) {
			r = cpuset_parse(tok + 10, &cpus, &why);
			if (r < 0)
				r = errbuf_fail(eb, r, "nohz_full=%.64s: %s", tok + 10, why.s);
			else
				cpuset_or(&nohz, &nohz, &cpus);
		}
	}
	if (r < 0)
		return r;
	*ret_domain = domain;
	*ret_nohz = nohz;
	*ret_managed_irq = managed;
	return 0;
}

/* A kernel CPU list file under root: 1 and the set, 0 when the file is not
 * there, -EINVAL when it is not a list. "(null)" is the empty set: what
 * nohz_full prints on kernels that have the option but no tickless CPU. */
static int read_list(const char *root, const char *rel, struct cpuset *ret, struct errbuf *eb)
{
	_cleanup_free_ char *text = NULL;
	struct errbuf why = { "" };
	char path[4096];
	size_t len = 0;
	int r;

	(void)snprintf(path, sizeof(path), "%s%s", root, rel);
	r = fileio_read(path, ISOL_FILE_MAX, &text, &len, eb);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	/* No CPU: an empty line, "(null)" (nohz_full on kernels with the
	 * option but no tickless CPU), or a NUL before the newline (seen in a
	 * RHEL 7 capture). */
	if (!strcmp(text, "") || !strcmp(text, "\n") || !strcmp(text, "(null)") ||
	    !strcmp(text, "(null)\n")) {
		cpuset_zero(ret);
		return 1;
	}
	r = cpuset_parse_n(text, len, ret, &why);
	if (r < 0)
		return errbuf_fail(eb, -EINVAL, "%s: %s", path, why.s);
	return 1;
}

int isol_read(const char *root, struct isol *ret, struct errbuf *eb)
{
	struct isol s = { .domain_source = "none" };
	struct cpuset c_domain, c_nohz, c_managed;
	_cleanup_free_ char *cmdline = NULL;
	struct errbuf why = { "" };
	char path[4096];
	int r, have_domain;

	if (!root)
		root = "";
	cpuset_zero(&s.domain);
	cpuset_zero(&s.nohz_full);
	cpuset_zero(&s.managed_irq);
	cpuset_zero(&s.partition);
	have_domain = read_list(root, "/sys/devices/system/cpu/isolated", &s.domain, eb);
	if (have_domain < 0)
		return have_domain;
	if (have_domain)
		s.domain_source = "sysfs";
	/* cgroup v2 isolated partitions (cpuset.cpus.partition = isolated):
	 * not load-balanced either, made and undone at run time. Kernels that
	 * keep the isolated file to the boot options show them only here. */
	r = read_list(root, "/sys/fs/cgroup/cpuset.cpus.isolated", &s.partition, eb);
	if (r < 0)
		return r;
	r = read_list(root, "/sys/devices/system/cpu/nohz_full", &s.nohz_full, eb);
	if (r < 0)
		return r;

	(void)snprintf(path, sizeof(path), "%s/proc/cmdline", root);
	r = fileio_read(path, ISOL_FILE_MAX, &cmdline, NULL, &why);
	if (r == 0) {
		r = isol_parse_cmdline(cmdline, &c_domain, &c_nohz, &c_managed, &why);
		if (r < 0) {
			(void)snprintf(s.note, sizeof(s.note), "%s/proc/cmdline: %s", root, why.s);
		} else {
			s.managed_irq = c_managed;
			if (!have_domain && !cpuset_is_empty(&c_domain)) {
				s.domain = c_domain;
				s.domain_source = "cmdline";
			}
		}
	} else if (r != -ENOENT) {
		(void)snprintf(s.note, sizeof(s.note), "%s", why.s);
	}
	cpuset_or(&s.domain, &s.domain, &s.partition);
	cpuset_or(&s.isolated, &s.domain, &s.nohz_full);
	*ret = s;
	return 0;
}

bool isol_same(const struct isol *a, const struct isol *b)
{
	return cpuset_equal(&a->domain, &b->domain) && cpuset_equal(&a->nohz_full, &b->nohz_full) &&
	       cpuset_equal(&a->managed_irq, &b->managed_irq) &&
	       cpuset_equal(&a->isolated, &b->isolated);
}

int isol_read_logged(const char *sysfs_root, bool no_kernel, struct isol *ret)
{
	struct errbuf eb = {};
	char a[256], b[256], n[256], m[256];
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->domain_source = "none";
	if (no_kernel)
		return 0;
	r = isol_read(sysfs_root, ret, &eb);
	if (r < 0)
		return log_error_errno(r, "isolation_unreadable", "error=%s",
				       log_quote(errbuf_text(&eb, r)));
	if (ret->note[0])
		log_warn("isolation_option_ignored", "reason=%s action=\"left out, as the kernel "
			 "does\"", log_quote(ret->note));
	if (cpuset_is_empty(&ret->isolated) && cpuset_is_empty(&ret->managed_irq))
		return 0;
	(void)cpuset_format(&ret->isolated, a, sizeof(a));
	(void)cpuset_format(&ret->domain, b, sizeof(b));
	(void)cpuset_format(&ret->nohz_full, n, sizeof(n));
	(void)cpuset_format(&ret->managed_irq, m, sizeof(m));
	log_info("isolated_cpus", "isolated=%s domain=%s domain_source=%s nohz_full=%s "
		 "managed_irq=%s", a[0] ? a : "none", b[0] ? b : "none", ret->domain_source,
		 n[0] ? n : "none", m[0] ? m : "none");
	return 0;
}
