/* Scope-bound cleanup, the one page every module uses.
 *
 * _cleanup_free_ char *s = NULL;     freed at scope exit
 * _cleanup_close_ int fd = -1;       closed at scope exit (if >= 0)
 * _cleanup_(closedirp) DIR *d = NULL; closedir()d at scope exit
 * DEFINE_FREEP(topo, topo_free)      makes topo_freep() for _cleanup_(topo_freep)
 * return TAKE_PTR(p);                hand ownership out, leaving NULL behind
 */
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}

static inline void closedirp(DIR **d)
{
	if (*d)
		(void)closedir(*d);
}

static inline void fclosep(FILE **f)
{
	if (*f)
		(void)fclose(*f);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Derive `<name>p(struct x **)` from a NULL-safe `<fn>(struct x *)`. */
#define DEFINE_FREEP(type, fn)                                  \
	static inline void fn##p(struct type **p)               \
	{                                                       \
		if (*p)                                         \
			(void)fn(*p);                           \
	}

#define TAKE_PTR(p)                              \
	({                                       \
		__typeof__(p) _p_ = (p);         \
		(p) = NULL;                      \
		_p_;                             \
	})

#define TAKE_FD(fd)                  \
	({                           \
		int _fd_ = (fd);     \
		(fd) = -1;           \
		_fd_;                \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
