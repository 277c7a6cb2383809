/* PCIe root complexes from sysfs. See pcie.h. */
#include "host/pcie.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MOD "pcie"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"

/* cpulistaffinity is one line; 8192 CPUs as a list fit in far less. */
#define AFFINITY_MAX (64 * 1024)

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool pcie_is_root_name(const char *name)
{
	if (strlen(name) != PCIE_NAME_LEN || strncmp(name, "pci", 3) != 0 || name[7] != ':')
		return false;
	for (int i = 3; i < PCIE_NAME_LEN; i++)
		if (i != 7 && !is_lower_hex(name[i]))
			return false;
	return true;
}

struct pcie *pcie_free(struct pcie *p)
{
	if (!p)
		return NULL;
	free(p->v);
	free(p);
	return NULL;
}

static void skip(struct pcie *p, const char *name, const char *why)
{
	/* a cut reason is still a reason: truncation is fine here */
	if (!p->n_skipped++ &&
	    snprintf(p->skipped, sizeof(p->skipped), "%.10s: %.140s", name, why) < 0)
		p->skipped[0] = 0;
}

int pcie_add_root(struct pcie *p, const char *name, const char *affinity, size_t len)
{
	struct pcie_root r;
	struct errbuf ceb = {};
	struct pcie_root *nv;

	if (!pcie_is_root_name(name))
		return -EINVAL;
	for (int i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].name, name))
			return -EEXIST;
	if (!affinity) {
		skip(p, name, "cpulistaffinity is missing or unreadable");
		return 0;
	}
	if (cpuset_parse_n(affinity, len, &r.cpus, &ceb) < 0) {
		(void)errbuf_wrap(&ceb, -EINVAL, "cpulistaffinity");
		skip(p, name, ceb.s);
		return 0;
	}
	if (cpuset_is_empty(&r.cpus)) {
		skip(p, name, "cpulistaffinity is empty");
		return 0;
	}
	if (p->n == PCIE_MAX_ROOTS)
		return -E2BIG;
	nv = realloc(p->v, sizeof(*nv) * (size_t)(p->n + 1));
	if (!nv)
		return -ENOMEM;
	p->v = nv;
	memcpy(r.name, name, PCIE_NAME_LEN + 1);
	/* keep the roots sorted: insertion, as roots come a few at a time */
	{
		int i = p->n;

		while (i > 0 && strcmp(p->v[i - 1].name, name) > 0) {
			p->v[i] = p->v[i - 1];
			i--;
		}
		p->v[i] = r;
	}
	p->n++;
	return 1;
}

int pcie_load(const char *sysfs_root, struct pcie **ret, struct errbuf *eb)
{
	_cleanup_(pcie_freep) struct pcie *p = calloc(1, sizeof(*p));
	char devs[4096];
	struct dirent *e;
	DIR *dir;
	int r = 0;

	if (!p)
		return -ENOMEM;
	if (snprintf(devs, sizeof(devs), "%s/sys/devices", sysfs_root ? sysfs_root : "") >=
	    (int)sizeof(devs))
		return errbuf_fail(eb, -ENAMETOOLONG, "sysfs root path too long");
	dir = opendir(devs);
	if (!dir) {
		if (errno != ENOENT)
			return errbuf_fail(eb, -errno, "%s: %s", devs, strerror(errno));
		*ret = TAKE_PTR(p); /* no sys/devices: no roots */
		return 0;
	}
	while ((e = readdir(dir))) {
		_cleanup_free_ char *text = NULL;
		char path[4096];
		size_t len = 0;

		if (!pcie_is_root_name(e->d_name))
			continue;
		/* pciDDDD:BB/pci_bus/DDDD:BB: the root's own bus */
		if (snprintf(path, sizeof(path), "%s/%s/pci_bus/%s/cpulistaffinity", devs,
			     e->d_name, e->d_name + 3) >= (int)sizeof(path)) {
			skip(p, e->d_name, "path too long");
			continue;
		}
		r = fileio_read(path, AFFINITY_MAX, &text, &len, NULL);
		r = pcie_add_root(p, e->d_name, r < 0 ? NULL : text, len);
		if (r == -E2BIG) {
			r = errbuf_fail(eb, -E2BIG, "%s: more than %d PCIe root complexes", devs,
					PCIE_MAX_ROOTS);
			break;
		}
		if (r < 0)
			break;
	}
	(void)closedir(dir);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int pcie_roots_of(const struct pcie *p, const struct cpuset *cpus, int *idx)
{
	int n = 0;

	for (int i = 0; p && i < p->n; i++) {
		struct cpuset both;

		cpuset_and(&both, &p->v[i].cpus, cpus);
		if (!cpuset_is_empty(&both))
			idx[n++] = i;
	}
	return n;
}

int pcie_load_logged(const char *root, bool no_tree, const struct cpuset *online,
		     struct pcie **ret)
{
	_cleanup_(pcie_freep) struct pcie *p = NULL;
	struct errbuf eb = {};
	struct cpuset none;
	char list[256];
	int r;

	if (no_tree) {
		log_warn("pcie_roots_unknown", "reason=\"a topology file has no PCI tree\" "
					       "action=publishing_without_pcieRoot");
		*ret = NULL;
		return 0;
	}
	r = pcie_load(root, &p, &eb);
	if (r < 0)
		return log_error_errno(r, "pcie_scan_failed", "error=%s", log_quote(errbuf_text(&eb, r)));
	if (p->n_skipped)
		log_warn("pcie_roots_skipped", "count=%d first=%s", p->n_skipped,
			 log_quote(p->skipped));
	none = *online;
	for (int i = 0; i < p->n; i++)
		cpuset_andnot(&none, &none, &p->v[i].cpus);
	(void)cpuset_format(&none, list, sizeof(list));
	if (p->n == 0)
		log_warn("pcie_roots_none", "sysfs=%s action=publishing_without_pcieRoot",
			 root ? log_quote(root) : "/sys");
	else
		log_info("pcie_roots", "roots=%d cpus_without_root=%s", p->n, list[0] ? list : "none");
	*ret = TAKE_PTR(p);
	return 0;
}
