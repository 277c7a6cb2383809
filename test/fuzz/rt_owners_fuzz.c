/* The real-time owners file (rt-owners.json) over arbitrary bytes: never
 * crashes, explains every refusal, and what it accepts writes back to text
 * that parses to the same owners. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "pinning/rtreport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_owners o = { 0 }, back = { 0 };
	struct errbuf eb = { "" };
	char *text = NULL;

	if (rt_owners_parse((const char *)data, size, &o, &eb) < 0) {
		assert(eb.s[0]);
		return 0;
	}
	for (int i = 0; i < o.n; i++)
		assert(cpuset_has(&o.cpus, o.v[i].cpu) && o.v[i].cgroup_id &&
		       o.v[i].runtime_ns <= o.v[i].period_ns);
	assert(rt_owners_json(&o, &text) == 0);
	assert(rt_owners_parse(text, strlen(text), &back, &eb) == 0);
	assert(back.n == o.n && cpuset_equal(&back.cpus, &o.cpus));
	for (int i = 0; i < o.n; i++)
		assert(!memcmp(&back.v[i], &o.v[i], sizeof(o.v[i])) ||
		       (back.v[i].cgroup_id == o.v[i].cgroup_id && back.v[i].cpu == o.v[i].cpu &&
			!strcmp(back.v[i].claim, o.v[i].claim)));
	free(text);
	rt_owners_done(&o);
	rt_owners_done(&back);
	return 0;
}
