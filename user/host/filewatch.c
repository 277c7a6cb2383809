/* Mounted-file change notices with inotify on the holding directory. See
 * filewatch.h. */
#include "host/filewatch.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/hash.h"

struct filewatch {
	char *path;
	size_t max;
	uint64_t digest; /* of the last content reported (or acted on) */
	int last_r;      /* 0, or the error last reported */
	int fd;
	struct event *ev;
	filewatch_fn fn;
	void *ud;
};

uint64_t filewatch_digest(const void *data, size_t len)
{
	return hash_bytes(HASH_INIT, data, len);
}

static void check(struct filewatch *w)
{
	_cleanup_free_ char *data = NULL;
	struct errbuf eb = {};
	size_t len = 0;
	uint64_t d = 0;
	int r;

	r = fileio_read_mounted(w->path, w->max, &data, &len, &eb);
	if (r == 0)
		d = filewatch_digest(data, len);
	if (r == w->last_r && (r < 0 || d == w->digest))
		return;
	w->last_r = r;
	if (r == 0)
		w->digest = d;
	w->fn(w->ud, r, d, &eb);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct filewatch *w = arg;
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	ssize_t n;

	/* Drain what the kernel queued; which name changed does not matter. */
	while ((n = read(fd, ev, sizeof(ev))) > 0)
		any = true;
	if (any)
		check(w);
}

int filewatch_new(struct event_base *base, const char *path, size_t max, uint64_t digest,
		  filewatch_fn fn, void *ud, struct filewatch **ret)
{
	_cleanup_(filewatch_freep) struct filewatch *w = NULL;
	_cleanup_free_ char *copy = strdup(path);

	w = calloc(1, sizeof(*w));
	if (!w || !copy)
		return -ENOMEM;
	w->fd = -1;
	w->max = max;
	w->digest = digest;
	w->fn = fn;
	w->ud = ud;
	w->path = strdup(path);
	if (!w->path)
		return -ENOMEM;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return -errno;
	if (inotify_add_watch(w->fd, dirname(copy),
			      IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE |
				      IN_DELETE | IN_ATTRIB | IN_ONLYDIR) < 0)
		return -errno;
	w->ev = event_new(base, w->fd, EV_READ | EV_PERSIST, on_readable, w);
	if (!w->ev || event_add(w->ev, NULL) < 0)
		return -ENOMEM;
	check(w);
	*ret = TAKE_PTR(w);
	return 0;
}

struct filewatch *filewatch_free(struct filewatch *w)
{
	if (!w)
		return NULL;
	if (w->ev)
		event_free(w->ev);
	if (w->fd >= 0)
		(void)close(w->fd);
	free(w->path);
	free(w);
	return NULL;
}
