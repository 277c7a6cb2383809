/* Which container runtimes apply NRI's LinuxScheduler adjustment
 * themselves (NRI v0.11: containerd 2.2.1, CRI-O 1.35.0), from what they
 * say of themselves in NRI's Configure. See rtctl.h. */
#include "pinning/rtctl.h"

#include <limits.h>
#include <string.h>

#include "lib/num.h"

static int version_at_least(const char *v, int ma, int mi, int pa)
{
	int a = 0, b = 0, c = 0;

	if (!v)
		return 0;
	if (*v == 'v')
		v++;
	/* "v1.7.2", "2.0.0-rc.1": major.minor required, the patch if present. */
	if (num_parse_int(v, &v, 0, INT_MAX, &a) < 0 || *v != '.' ||
	    num_parse_int(v + 1, &v, 0, INT_MAX, &b) < 0)
		return 0;
	if (*v == '.')
		(void)num_parse_int(v + 1, &v, 0, INT_MAX, &c);
	return a != ma ? a > ma : b != mi ? b > mi : c >= pa;
}

bool rtctl_runtime_applies_scheduler(const char *name, const char *version,
				     const char *nri_version)
{
	if (nri_version && *nri_version)
		return version_at_least(nri_version, 0, 11, 0);
	if (!name)
		return false;
	if (!strcmp(name, "containerd"))
		return version_at_least(version, 2, 2, 1);
	if (!strcmp(name, "cri-o") || !strcmp(name, "crio"))
		return version_at_least(version, 1, 35, 0);
	return false;
}
