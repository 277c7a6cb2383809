/* Dropping what the daemon no longer needs once it is running.
 *
 * Start-up needs a lot (load and attach BPF programs, create sockets under
 * the kubelet's root, read every cgroup); the loop afterwards needs little:
 * writing its own files (CDI specs, checkpoint), moving host tasks' affinity
 * (remediate), reading cgroups and /proc. caps_drop_except() removes every
 * other capability from the bounding, effective, permitted and inheritable
 * sets, so a compromise of the loop cannot load a kernel module, trace other
 * processes or load new BPF programs.
 */
#pragma once

#include <stdint.h>

/* Capabilities the running daemon keeps (linux/capability.h numbers). */
#define CAPS_KEEP_DAEMON                                                                   \
	((UINT64_C(1) << 1) /* DAC_OVERRIDE: CDI dir owned by someone else */ |            \
	 (UINT64_C(1) << 2) /* DAC_READ_SEARCH: cgroup and /proc reads */ |                \
	 (UINT64_C(1) << 3) /* FOWNER: chmod of our state dir */ |                         \
	 (UINT64_C(1) << 23) /* SYS_NICE: remediate moves host tasks' affinity */)

/* ... and with real-time CPUs (--rt-cpus): end the tasks of an unprepared
 * real-time claim (SYS_NICE, kept anyway, sets their policy). */
#define CAPS_KEEP_RT (UINT64_C(1) << 5) /* KILL */

/* Keeps exactly the capabilities in keep (a bit mask by capability number)
 * and drops the rest from every set, bounding set included. Returns the
 * number of capabilities dropped, 0 when there was nothing to drop (not
 * root), or -errno. */
int caps_drop_except(uint64_t keep);

/* The effective set, as a bit mask (for logs and tests). */
int caps_effective(uint64_t *ret);
