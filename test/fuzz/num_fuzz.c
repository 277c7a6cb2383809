/* num (user/lib/num.c): never crashes or reads past the NUL; what it accepts
 * lies in the range asked for, prints back as the same digits (less leading
 * zeros), and a prefix parse ends inside the input. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/num.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), back[32];
	const char *end = NULL, *z;
	unsigned long long u;
	long long v;
	int i, r;

	assert(s);
	memcpy(s, data, size);
	s[size] = 0;
	r = num_parse_ll(s, NULL, LLONG_MIN, LLONG_MAX, &v);
	assert(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0) {
		(void)snprintf(back, sizeof(back), "%lld", v);
		z = s + (*s == '-');
		while (z[0] == '0' && z[1])
			z++;
		assert(!strcmp(back + (v < 0), z) || (v == 0 && !strcmp(z, "0")));
	}
	r = num_parse_int(s, &end, -1000, 1000, &i);
	assert(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0)
		assert(i >= -1000 && i <= 1000 && end > s && end <= s + strlen(s));
	r = num_parse_ull(s, NULL, 1000000, &u);
	assert(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r == 0)
		assert(u <= 1000000);
	free(s);
	return 0;
}
