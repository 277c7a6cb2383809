/* uevent: the parser takes the kernel's messages and nothing that only looks
 * like one; and on the real kernel, a synthetic "online" uevent of CPU 0
 * (written to its sysfs uevent file: no CPU changes state) arrives on the
 * socket and is recognised as CPU hotplug. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/uevent.h"

#define MSG(s) s, sizeof(s) /* with the final NUL, as the kernel sends them */

static void test_kernel_cpu_messages_are_hotplug(void **st)
{
	static const struct {
		const char *m;
		size_t len;
		bool hotplug;
	} ok[] = {
		{ MSG("online@/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=/devices/system/cpu/"
		      "cpu3\0SUBSYSTEM=cpu\0SEQNUM=4711"),
		  true },
		{ MSG("offline@/devices/system/cpu/cpu12\0ACTION=offline\0DEVPATH=/devices/system/"
		      "cpu/cpu12\0SUBSYSTEM=cpu\0SEQNUM=1"),
		  true },
		{ MSG("add@/devices/system/cpu/cpu64\0ACTION=add\0DEVPATH=/devices/system/cpu/cpu64\0"
		      "SUBSYSTEM=cpu\0SEQNUM=2"),
		  true },
		{ MSG("change@/devices/system/cpu/cpu3\0ACTION=change\0DEVPATH=/devices/system/cpu/"
		      "cpu3\0SUBSYSTEM=cpu\0SEQNUM=3"),
		  false },
		{ MSG("online@/devices/system/memory/memory7\0ACTION=online\0DEVPATH=/devices/system/"
		      "memory/memory7\0SUBSYSTEM=memory\0SEQNUM=5"),
		  false },
		{ MSG("online@/devices/system/cpu/cpufreq\0ACTION=online\0DEVPATH=/devices/system/cpu/"
		      "cpufreq\0SUBSYSTEM=cpu\0SEQNUM=6"),
		  false },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct uevent u;

		if (uevent_parse(ok[i].m, ok[i].len, &u) != 0)
			fail_msg("case %zu: not parsed", i);
		if (uevent_is_cpu_hotplug(&u) != ok[i].hotplug)
			fail_msg("case %zu: hotplug should be %d", i, ok[i].hotplug);
	}
}

static void test_what_is_not_the_kernels_is_refused(void **st)
{
	static const struct {
		const char *m;
		size_t len;
	} bad[] = {
		{ MSG("") },
		{ MSG("online/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=/devices/system/cpu/cpu3") },
		{ MSG("@/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=/devices/system/cpu/cpu3") },
		{ MSG("online@/devices/system/cpu/cpu3\0DEVPATH=/devices/system/cpu/cpu3") },
		{ MSG("online@/devices/system/cpu/cpu3\0ACTION=online") },
		/* the header and the fields disagree */
		{ MSG("online@/devices/system/cpu/cpu3\0ACTION=offline\0DEVPATH=/devices/system/cpu/cpu3") },
		{ MSG("online@/devices/system/cpu/cpu3\0ACTION=onlinex\0DEVPATH=/devices/system/cpu/cpu3") },
		{ MSG("online@/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=/devices/system/cpu/cpu4") },
		/* udevd's re-broadcast: a binary header, no "action@" */
		{ MSG("libudev\0\xfe\xed\xca\xfe") },
	};
	/* unterminated: the last byte is not a NUL */
	static const char cut[] = "online@/devices/system/cpu/cpu3\0ACTION=online\0DEVPATH=/dev";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct uevent u = { .action = "untouched" };

		if (uevent_parse(bad[i].m, bad[i].len, &u) != -EPROTO)
			fail_msg("case %zu: accepted", i);
		assert_string_equal(u.action, "untouched");
	}
	{
		struct uevent u;

		assert_int_equal(uevent_parse(cut, sizeof(cut) - 1, &u), -EPROTO);
		assert_int_equal(uevent_parse(cut, 0, &u), -EPROTO);
	}
}

static void test_a_synthetic_cpu_uevent_arrives_from_the_kernel(void **st)
{
	int fd = uevent_open(), w, r = 0;
	struct pollfd p;

	if (fd < 0)
		skip(); /* no netlink here (a seccomp profile): the daemon polls */
	w = open("/sys/devices/system/cpu/cpu0/uevent", O_WRONLY | O_CLOEXEC);
	if (w < 0) {
		close(fd);
		skip(); /* not root: cannot ask the kernel for one */
	}
	(void)uevent_drain_cpu(fd); /* what came before is not what this test asks for */
	/* "online" for a CPU that is online: the kernel sends the message and
	 * changes nothing. */
	assert_int_equal(write(w, "online", 6), 6);
	close(w);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (int i = 0; i < 50 && r == 0; i++) {
		assert_true(poll(&p, 1, 100) >= 0);
		r = uevent_drain_cpu(fd);
	}
	assert_int_equal(r, 1);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_cpu_messages_are_hotplug),
		cmocka_unit_test(test_what_is_not_the_kernels_is_refused),
		cmocka_unit_test(test_a_synthetic_cpu_uevent_arrives_from_the_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
