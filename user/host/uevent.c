/* Kernel uevents for CPU hotplug. See uevent.h. */
#include "host/uevent.h"

#include <errno.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int uevent_parse(const char *buf, size_t len, struct uevent *ret)
{
	const char *at, *end = buf + len, *hdr_path;
	struct uevent u = {};

	if (!len || buf[len - 1] != '\0')
		return -EPROTO;
	at = memchr(buf, '@', strlen(buf));
	if (!at || at == buf || at[1] != '/')
		return -EPROTO;
	hdr_path = at + 1;
	for (const char *p = buf + strlen(buf) + 1; p < end; p += strlen(p) + 1) {
		if (!strncmp(p, "ACTION=", 7))
			u.action = p + 7;
		else if (!strncmp(p, "DEVPATH=", 8))
			u.devpath = p + 8;
		else if (!strncmp(p, "SUBSYSTEM=", 10))
			u.subsystem = p + 10;
	}
	/* The header and the fields say the same, or it is not the kernel's. */
	if (!u.action || !u.devpath || strcmp(u.devpath, hdr_path) != 0 ||
	    strncmp(u.action, buf, (size_t)(at - buf)) != 0 || u.action[at - buf] != '\0')
		return -EPROTO;
	*ret = u;
	return 0;
}

bool uevent_is_cpu_hotplug(const struct uevent *u)
{
	static const char *const actions[] = { "online", "offline", "add", "remove" };
	const char *n;

	if (!u->subsystem || strcmp(u->subsystem, "cpu") != 0 ||
	    strncmp(u->devpath, "/devices/system/cpu/cpu", 23) != 0)
		return false;
	n = u->devpath + 23;
	if (!*n || strspn(n, "0123456789") != strlen(n))
		return false;
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (!strcmp(u->action, actions[i]))
			return true;
	return false;
}

int uevent_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int fd, r;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		(void)close(fd);
		return r;
	}
	return fd;
}

int uevent_drain_cpu(int fd)
{
	char buf[UEVENT_MSG_MAX + 1];
	int found = 0;

	/* Bounded work on the loop: what is left is read on the next turn. */
	for (int i = 0; i < UEVENT_DRAIN_MAX; i++) {
		struct sockaddr_nl from = {};
		socklen_t flen = sizeof(from);
		struct uevent u;
		ssize_t n = recvfrom(fd, buf, UEVENT_MSG_MAX, 0, (struct sockaddr *)&from, &flen);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return found;
		if (n < 0)
			return -errno;
		if (flen != sizeof(from) || from.nl_pid != 0)
			continue; /* not the kernel's */
		buf[n] = '\0';
		if (uevent_parse(buf, (size_t)n + (n == 0 || buf[n - 1] != '\0'), &u) == 0 &&
		    uevent_is_cpu_hotplug(&u))
			found = 1;
	}
	return found;
}
