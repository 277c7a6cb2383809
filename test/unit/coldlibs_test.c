/* coldlibs: which mappings are a cold library's (a table of /proc/<pid>/maps
 * lines), and a release on this very process: the pages of a library it was
 * not told it uses leave, and the library still works when called after. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "host/coldlibs.h"
#include "host/procfs.h"

static const struct coldlibs_file keep[] = {
	{ 0xfe, 1, 1312330 }, /* the executable */
	{ 0xfe, 1, 262735 },  /* libcrypto */
};

static const struct {
	const char *line;
	bool cold;
} cases[] = {
	/* a library nobody uses, its header and its code */
	{ "7f3a2130b000-7f3a2136d000 r--p 00000000 fe:01 263107 /usr/lib/libgnutls.so.30.34.3",
	  true },
	{ "7f3a2136d000-7f3a214e1000 r-xp 00062000 fe:01 263107 /usr/lib/libgnutls.so.30.34.3",
	  true },
	/* its data: written by the loader, the process's own */
	{ "7f3a214e1000-7f3a214f0000 rw-p 001d6000 fe:01 263107 /usr/lib/libgnutls.so.30.34.3",
	  false },
	/* a kept library, by device and inode, whatever its path says */
	{ "7f3a20e00000-7f3a20e7c000 r--p 00000000 fe:01 262735 /lib/x86_64-linux-gnu/libcrypto.so.3",
	  false },
	/* the same inode on another device is another file */
	{ "7f3a20e00000-7f3a20e7c000 r--p 00000000 fe:02 262735 /mnt/libcrypto.so.3", true },
	/* the executable is no library, kept or not */
	{ "55d0c8a1e000-55d0c8a6d000 r-xp 0001e000 fe:01 1312330 /usr/local/bin/dra-cpu-driver",
	  false },
	{ "55d0c8a1e000-55d0c8a6d000 r-xp 0001e000 fe:01 99 /usr/local/bin/other", false },
	/* ".so" in a directory name does not make a library */
	{ "7f00-7f01 r-xp 00000000 fe:01 5 /opt/x.so.d/bin/tool", false },
	/* a library deleted from disk while mapped is still one */
	{ "7f00-7f01 r--p 00000000 fe:01 6 /usr/lib/libold.so.1 (deleted)", true },
	/* shared mappings, anonymous memory, special files */
	{ "7f00-7f01 r--s 00000000 fe:01 7 /usr/lib/libshm.so", false },
	{ "7f00-7f01 rw-p 00000000 00:00 0 [heap]", false },
	{ "7f00-7f01 r--p 00000000 00:00 0 ", false },
	{ "7f00-7f01 rw-s 00000000 00:0e 18 anon_inode:[perf_event]", false },
	{ "7f00-7f01 r-xp 00000000 00:00 0 [vdso]", false },
};

static void test_coldlibs_picks_read_only_mappings_of_unused_libraries(void **st)
{
	(void)st;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *p = cases[i].line, *end = p + strlen(p);
		struct procfs_map m;

		assert_int_equal(procfs_maps_next(&p, end, &m), 1);
		if (coldlibs_is_cold(&m, keep, 2) != cases[i].cold)
			fail_msg("%s: want %s", cases[i].line, cases[i].cold ? "cold" : "kept");
	}
}

/* The KiB a field of /proc/self/smaps ("Rss:", "Private_Clean:") sums to
 * over the mappings of the file that holds addr. */
static long smaps_kib(const void *addr, const char *field)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], path[400] = "", cur[400] = "";
	size_t flen = strlen(field);
	uintptr_t a = (uintptr_t)addr;
	long kib = 0;

	assert_non_null(f);
	/* the path of the mapping holding addr */
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %399s", &s, &e, cur) == 3 && a >= s &&
		    a < e)
			strcpy(path, cur);
	}
	assert_true(path[0] == '/');
	rewind(f);
	cur[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char name[400] = "";

		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %399s", &s, &e, name) >= 2) {
			strcpy(cur, name);
			continue;
		}
		if (!strcmp(cur, path) && !strncmp(line, field, flen))
			kib += atol(line + flen);
	}
	fclose(f);
	return kib;
}

static void test_coldlibs_releases_unused_libraries_and_they_still_work(void **st)
{
	static const char *const used[] = { "cmocka_set_message_output", NULL };
	static const char *const uses_curl[] = { "curl_version", NULL };
	const void *curl = (const void *)curl_version;
	long before;
	struct coldlibs_result res;
	const char *v;
	int r;

	(void)st;
	/* libcurl is linked and not called yet: what is resident of it is what
	 * the loader read (its symbol tables) and its constructor ran. Pages
	 * another process maps as well are shared, not ours: none may be left
	 * to measure when something else on the machine uses libcurl too. */
	if (smaps_kib(curl, "Private_Clean:") == 0)
		skip();
	r = coldlibs_release(used, &res);
	if (r == -ENOSYS)
		skip(); /* a kernel before 5.4 */
	assert_int_equal(r, 0);
	/* libcurl, and what it links, is nothing this test said it uses */
	assert_true(res.libraries >= 1);
	assert_true(res.mapped_bytes > 0);
	assert_true(res.rss_before_kib > 0 && res.rss_after_kib > 0);
	assert_true(res.rss_after_kib < res.rss_before_kib);
	/* no page of it is this process's alone any more... */
	assert_int_equal(smaps_kib(curl, "Private_Clean:"), 0);
	/* ...and it works: the code is read from the file again */
	v = curl_version();
	assert_true(v && !strncmp(v, "libcurl/", 8));
	assert_true(smaps_kib(curl, "Rss:") > 0);
	/* told that the process uses it, a release leaves every page of it */
	before = smaps_kib(curl, "Rss:");
	r = coldlibs_release(uses_curl, &res);
	assert_int_equal(r, 0);
	assert_int_equal(smaps_kib(curl, "Rss:"), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coldlibs_picks_read_only_mappings_of_unused_libraries),
		cmocka_unit_test(test_coldlibs_releases_unused_libraries_and_they_still_work),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
