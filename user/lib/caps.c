/* Capability dropping with the raw capget/capset syscalls (no libcap). */
#include "lib/caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int get(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capget, &h, data) < 0 ? -errno : 0;
}

int caps_effective(uint64_t *ret)
{
	struct __user_cap_data_struct d[2];
	int r = get(d);

	if (r < 0)
		return r;
	*ret = (uint64_t)d[0].effective | (uint64_t)d[1].effective << 32;
	return 0;
}

int caps_drop_except(uint64_t keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	uint64_t perm;
	int dropped = 0, r;

	r = get(d);
	if (r < 0)
		return r;
	perm = (uint64_t)d[0].permitted | (uint64_t)d[1].permitted << 32;
	/* The bounding set first: it needs CAP_SETPCAP, which we drop below. */
	for (int cap = 0; cap < 64; cap++) {
		if (keep >> cap & 1)
			continue;
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1)
			continue; /* unknown to this kernel, or already gone */
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EPERM)
				break; /* no CAP_SETPCAP: not privileged, nothing to do */
			return -errno;
		}
		dropped++;
	}
	perm &= keep;
	for (int i = 0; i < 2; i++) {
		uint32_t v = (uint32_t)(perm >> (32 * i));

		d[i].permitted = v;
		d[i].effective = v;
		d[i].inheritable = 0;
	}
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	return dropped;
}
