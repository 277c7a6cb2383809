/* uevent: the kernel's device events (NETLINK_KOBJECT_UEVENT), for CPU
 * hotplug without polling.
 *
 * The kernel multicasts a message on group 1 whenever a device changes:
 * "online@/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=...\0SUBSYSTEM=cpu\0
 * SEQNUM=...\0". Every network namespace owned by the initial user namespace
 * receives the ones of devices that are not network devices, so a pod without
 * a user namespace gets them without hostNetwork and without privilege.
 *
 * A message is only a hint to read sysfs again: the online list is the truth,
 * so a forged or lost message costs a read or a delay, never a wrong view.
 * Messages not from the kernel (sender port 0) are dropped unread; udevd's
 * re-broadcasts ("libudev" header) never match the parser either.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define UEVENT_MSG_MAX 8192 /* the kernel's messages are at most 2 KiB */
#define UEVENT_DRAIN_MAX 256 /* messages read per call; the rest on the next */

struct uevent {
	const char *action;    /* "online", "offline", "add", "remove", "change", ... */
	const char *devpath;   /* "/devices/system/cpu/cpu3" */
	const char *subsystem; /* "cpu", or NULL when the message has none */
};

/* Parses one message of len bytes (pointers into buf, which must hold a NUL
 * at buf[len - 1] or be NUL-terminated past len). -EPROTO when it is not a
 * kernel uevent: no "action@devpath" header, ACTION/DEVPATH missing or
 * different from the header, an unterminated field. */
int uevent_parse(const char *buf, size_t len, struct uevent *ret);

/* A CPU came or went: subsystem cpu, devpath /devices/system/cpu/cpuN, action
 * online, offline, add or remove. */
bool uevent_is_cpu_hotplug(const struct uevent *u);

/* A non-blocking netlink socket on the kernel's uevent group: the fd, or
 * -errno (EPROTONOSUPPORT, EPERM under a seccomp profile: poll instead). */
int uevent_open(void);

/* Reads what the socket holds, at most UEVENT_DRAIN_MAX messages (the
 * descriptor stays readable for the rest): 1 when one says a CPU came or went,
 * 0 when none did, -errno when the socket failed (ENOBUFS: messages were
 * lost, so read sysfs again all the same). */
int uevent_drain_cpu(int fd);
