/* Quantity parser: never crashes; whole counts reformat to a value that parses
 * back to the same count. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[64], buf[32];
	int64_t v, back, m;
	bool exact;

	if (size >= sizeof(s))
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	(void)quantity_parse_milli(s, &m, &exact);
	if (quantity_parse_count(s, INT64_MAX / 1000, &v, NULL) == 0) {
		assert(v >= 1);
		quantity_format_int(v, buf, sizeof(buf));
		assert(quantity_parse_count(buf, INT64_MAX / 1000, &back, NULL) == 0);
		assert(back == v);
	}
	return 0;
}
