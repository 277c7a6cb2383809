/* Releasing the pages of libraries the process never calls. See coldlibs.h.
 *
 * Two passes over /proc/self/maps: the mappings holding a used address name
 * the files to keep, then every read-only mapping of any other shared
 * library is advised MADV_PAGEOUT. One read of the file serves both, so
 * both see the same mappings.
 */
#include "host/coldlibs.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOG_MOD "coldlibs"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/log.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21 /* Linux 5.4 */
#endif

#define MAPS_MAX (4u << 20) /* a few hundred lines: KiBs */
#define KEEP_MAX 64	    /* used symbols, libc, the loader, the executable */

/* Every process calls these: the C library (glibc names itself with the
 * first), whatever provides malloc, which is not always the C library (a
 * sanitizer's runtime, another allocator), and in a sanitizer build the
 * runtimes its instrumentation calls (absent otherwise: they keep nothing). */
static const char *const always_used[] = { "gnu_get_libc_version", "malloc", "__asan_init",
					   "__ubsan_handle_add_overflow", NULL };

static bool same_file(const struct procfs_map *m, const struct coldlibs_file *f)
{
	return m->inode == f->inode && m->major == f->major && m->minor == f->minor;
}

/* The file name of a path field has ".so" in it. */
static bool names_a_library(struct procfs_field path)
{
	const char *base = path.s, *end = path.s + path.len;

	for (const char *p = path.s; p < end; p++)
		if (*p == '/')
			base = p + 1;
	return memmem(base, (size_t)(end - base), ".so", 3) != NULL;
}

static bool kept(const struct procfs_map *m, const struct coldlibs_file *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (same_file(m, &keep[i]))
			return true;
	return false;
}

bool coldlibs_is_cold(const struct procfs_map *m, const struct coldlibs_file *keep, size_t n)
{
	return m->inode && !m->write && !m->shared && m->path.len && m->path.s[0] == '/' &&
	       names_a_library(m->path) && !kept(m, keep, n);
}

static long rss_kib(void)
{
	_cleanup_free_ char *text = NULL;
	long size, pages;

	if (fileio_read("/proc/self/statm", 4096, &text, NULL, NULL) < 0 ||
	    sscanf(text, "%ld %ld", &size, &pages) != 2)
		return -1;
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The files mapped at addrs[0..n_addrs) into keep[*n], each once. */
static int keep_files_at(const char *maps, size_t len, const uintptr_t *addrs, size_t n_addrs,
			 struct coldlibs_file *keep, size_t *n)
{
	const char *p = maps, *end = maps + len;
	struct procfs_map m;
	int r;

	while ((r = procfs_maps_next(&p, end, &m)) != 0) {
		bool holds = false;

		if (r < 0)
			return r;
		for (size_t i = 0; i < n_addrs && !holds; i++)
			holds = addrs[i] >= m.start && addrs[i] < m.end;
		if (!holds || !m.inode || kept(&m, keep, *n))
			continue;
		if (*n == KEEP_MAX)
			return -E2BIG;
		keep[(*n)++] = (struct coldlibs_file){ m.major, m.minor, m.inode };
	}
	return 0;
}

int coldlibs_release(const char *const *used_symbols, struct coldlibs_result *ret)
{
	struct coldlibs_file keep[KEEP_MAX];
	uintptr_t addrs[KEEP_MAX];
	size_t n_addrs = 0;
	_cleanup_free_ char *maps = NULL;
	uint64_t last_inode = 0;
	struct errbuf eb;
	size_t len, n = 0;
	const char *p, *end;
	struct procfs_map m;
	int r;

	*ret = (struct coldlibs_result){ .rss_before_kib = rss_kib() };
	r = fileio_read("/proc/self/maps", MAPS_MAX, &maps, &len, &eb);
	if (r < 0) {
		log_warn("maps_unreadable", "error=\"%s\"", eb.s);
		return r;
	}
	/* The executable (this function is in it), the loader (the start of its
	 * first mapping is AT_BASE), then what every process and the caller use.
	 * A symbol not found keeps nothing. */
	addrs[n_addrs++] = (uintptr_t)coldlibs_release;
	addrs[n_addrs++] = (uintptr_t)getauxval(AT_BASE);
	for (int k = 0; k < 2; k++)
		for (const char *const *s = k ? used_symbols : always_used; *s; s++) {
			void *a = dlsym(RTLD_DEFAULT, *s);

			if (!a)
				log_debug("used_symbol_missing", "symbol=%s", *s);
			else if (n_addrs < KEEP_MAX)
				addrs[n_addrs++] = (uintptr_t)a;
			else
				return -E2BIG;
		}
	r = keep_files_at(maps, len, addrs, n_addrs, keep, &n);
	if (r < 0)
		return r;

	p = maps;
	end = maps + len;
	while ((r = procfs_maps_next(&p, end, &m)) != 0) {
		if (r < 0)
			return r;
		if (!coldlibs_is_cold(&m, keep, n))
			continue;
		if (madvise((void *)(uintptr_t)m.start, m.end - m.start, MADV_PAGEOUT) < 0) {
			/* EINVAL: a kernel before 5.4; the first mapping says so */
			if (errno == EINVAL && !ret->mapped_bytes)
				return -ENOSYS;
			log_debug("pageout_failed", "path=\"%.*s\" errno=%d", (int)m.path.len, m.path.s,
				  errno);
			continue;
		}
		/* a library's mappings are adjacent lines: count it once */
		if (m.inode != last_inode)
			ret->libraries++;
		last_inode = m.inode;
		ret->mapped_bytes += m.end - m.start;
		log_debug("library_released", "path=\"%.*s\" kib=%llu", (int)m.path.len, m.path.s,
			  (unsigned long long)((m.end - m.start) / 1024));
	}
	ret->rss_after_kib = rss_kib();
	return 0;
}
