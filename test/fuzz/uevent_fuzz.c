/* uevent message parser: never crashes or reads past the message, and what
 * it accepts has an action and a devpath inside the message. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/uevent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	struct uevent u;

	assert(buf);
	memcpy(buf, data, size);
	if (uevent_parse(buf, size, &u) == 0) {
		assert(u.action >= buf && u.action < buf + size);
		assert(u.devpath >= buf && u.devpath < buf + size);
		(void)uevent_is_cpu_hotplug(&u);
	}
	free(buf);
	return 0;
}
