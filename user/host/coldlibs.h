/* coldlibs: hands the kernel back the pages of shared libraries this process
 * maps but never calls.
 *
 * libcurl as distributions build it links a dozen libraries for protocols
 * and authentication the daemon never uses (LDAP, RTMP, SSH, Kerberos and
 * GnuTLS with nettle, gmp and p11-kit behind them, IDN, PSL). The dynamic
 * loader maps each, relocates it and runs its constructors, which leaves its
 * symbol tables and some code resident: about 2.5 MiB in all, private to the
 * daemon on a node where no other process maps those files, as much as its
 * whole heap with a thousand claims. None of it is read again.
 * coldlibs_release() asks the kernel to reclaim those pages
 * (madvise MADV_PAGEOUT, Linux 5.4): file pages only this process maps leave
 * memory, pages another process maps stay where they are, and so do pages the
 * loader wrote (relocated data), which are anonymous and need swap to go.
 * Nothing depends on the choice being right: a released library that is
 * called after all reads its pages from the file again (a slower first call,
 * nothing else), a library kept by mistake only costs the memory it did.
 *
 * Which libraries are in use is said by symbols, not by file names: the
 * caller names one function per library its code paths call (its own
 * dependencies and what they call on its behalf, OpenSSL under libcurl,
 * say). A library defining one of them is kept, whatever it is called and
 * wherever it lives; so are the C library, whatever provides malloc, the
 * dynamic loader and the executable. Libraries are told apart by device and inode, the identity
 * /proc/self/maps gives and a symlinked path would not.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/procfs.h"

/* A mapped file, as /proc/<pid>/maps names it. */
struct coldlibs_file {
	unsigned major, minor;
	uint64_t inode;
};

struct coldlibs_result {
	int libraries;		/* shared libraries whose pages were handed back */
	uint64_t mapped_bytes;	/* the size of their read-only mappings */
	long rss_before_kib;	/* the process's resident set before and after */
	long rss_after_kib;
};

/* Whether m is a mapping of a cold library: a private mapping of a file
 * whose name has ".so" in it (libfoo.so.1.2), not writable (a library's data
 * stays: it is the process's own), and a file other than keep[0..n). Pure. */
bool coldlibs_is_cold(const struct procfs_map *m, const struct coldlibs_file *keep, size_t n);

/* Releases the pages of every shared library that defines none of
 * used_symbols (NULL-terminated, looked up in the global scope) and is not
 * the C library, malloc's, the loader or the executable. 0 with *ret filled;
 * -ENOSYS when the kernel has no MADV_PAGEOUT (nothing was released);
 * -EPROTO when /proc/self/maps could not be read as such; -errno otherwise.
 * A used symbol that is not found is no error: it keeps nothing. */
int coldlibs_release(const char *const *used_symbols, struct coldlibs_result *ret);
