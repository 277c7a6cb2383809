/* CPUConfig.realtime parser over arbitrary JSON: never crashes, always
 * explains a refusal, and what it accepts obeys the kernel's static rules
 * and survives the checkpoint's round trip unchanged. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/rt.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	struct json_object *o, *back = NULL;
	struct rt_budget b, again;
	struct errbuf err = { "" };

	if (!tok)
		return 0;
	o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	json_tokener_free(tok);
	if (!o)
		return 0;
	if (rt_budget_parse(o, &b, &err) < 0) {
		assert(err.s[0]);
	} else {
		if (b.policy == RT_POLICY_DEADLINE) {
			assert(b.runtime_ns >= RT_MIN_RUNTIME_NS);
			assert(b.runtime_ns <= b.deadline_ns && b.deadline_ns <= b.period_ns);
			assert(rt_budget_milli(&b) >= 1 && rt_budget_milli(&b) <= 1000);
		} else {
			assert(b.policy == RT_POLICY_FIFO || b.policy == RT_POLICY_RR);
			assert(b.priority >= 1 && b.priority <= RT_PRIORITY_MAX);
		}
		assert(rt_budget_to_json(&b, &back) == 0);
		assert(rt_budget_parse(back, &again, &err) == 0);
		assert(rt_budget_equal(&b, &again));
		json_object_put(back);
	}
	json_object_put(o);
	return 0;
}
