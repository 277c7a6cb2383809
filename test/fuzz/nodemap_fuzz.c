/* node map document parser (what `dra-cpu-driver map` reads from a peer):
 * never crashes, every error has a reason, and whatever parses draws without
 * a control character the document did not come with (the picture's own
 * colours aside, which are off here). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nodemap.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nodemap *m = NULL;
	struct errbuf eb = { "" };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r = nodemap_parse((const char *)data, size, &m, &eb);

	if (r < 0) {
		assert(eb.s[0] || r == -ENOMEM);
		assert(!m);
		return 0;
	}
	f = open_memstream(&buf, &len);
	assert(f);
	assert(nodemap_draw(m, false, f) == 0);
	assert(fclose(f) == 0);
	for (size_t i = 0; i < len; i++)
		assert((unsigned char)buf[i] >= 0x20 || buf[i] == '\n');
	free(buf);
	nodemap_free(m);
	return 0;
}
