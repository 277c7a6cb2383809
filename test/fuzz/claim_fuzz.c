/* ResourceClaim parser over arbitrary JSON: never crashes, never reports more
 * results (or reservedFor pods) than the cap, always explains a failure, and
 * a pod it accepts has a uid and a name that are safe in a log line. The same bytes go through
 * the namespace and name checks (what the kubelet sends): an accepted name is
 * bounded and holds no byte a URL or a log line would have to escape. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/cdi.h"
#include "core/claim.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"

#define LABEL_BYTES "abcdefghijklmnopqrstuvwxyz0123456789-"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return;
	memcpy(s, data, size);
	s[size] = 0;
	if (claim_namespace_check(s) == 0)
		assert(strlen(s) <= CLAIM_NAMESPACE_MAX && strspn(s, LABEL_BYTES) == strlen(s));
	if (claim_name_check(s) == 0)
		assert(strlen(s) <= CLAIM_NAME_MAX && strspn(s, LABEL_BYTES ".") == strlen(s));
	free(s);
}

static void check_consumers(struct json_object *o, const char *uid)
{
	struct claim_consumer *v = NULL;
	struct errbuf err = { "" };
	int n = claim_consumers_parse(o, uid, &v, &err);

	if (n < 0) {
		assert(n == -ENOMEM || err.s[0]);
		assert(!v);
		return;
	}
	assert(n <= CLAIM_MAX_CONSUMERS && (n == 0) == !v);
	for (int i = 0; i < n; i++) {
		assert(cdi_uid_valid(v[i].uid) == 0);
		assert(claim_name_check(v[i].name) == 0);
	}
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_tokener *tok;
	struct json_object *o;
	struct claim_alloc a;
	struct errbuf err = { "" };

	check_names(data, size);
	tok = json_tokener_new_ex(32);
	if (!tok)
		return 0;
	o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	json_tokener_free(tok);
	if (!o)
		return 0;
	if (claim_parse(o, "uid-1", "dra.cpu", "node-1", &a, &err) < 0)
		assert(err.s[0]);
	else {
		assert(a.n >= 1 && a.n <= CLAIM_MAX_RESULTS);
		/* an accepted override is a CPU list within bounds */
		for (int i = 0; i < a.n; i++) {
			struct cpuset cpus;

			assert(strlen(a.results[i].cpuset) < CLAIM_CPUSET_MAX);
			assert(!a.results[i].cpuset[0] ||
			       cpuset_parse(a.results[i].cpuset, &cpus, NULL) == 0);
		}
	}
	check_consumers(o, NULL);
	check_consumers(o, "uid-1");
	json_object_put(o);
	return 0;
}
