/* Flag parser: argv made of NUL-separated fuzz input never crashes or leaks,
 * and a failure always explains itself. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cfg.h"
#include "lib/log.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[34] = { "dra-cpu-driver" }, *buf;
	struct errbuf err = { "" };
	int argc = 1;
	struct cfg c;

	if (size > 4096)
		return 0;
	log_set_level(LOG_ERROR);
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	for (char *p = buf; p < buf + size && argc < 33; p += strlen(p) + 1)
		argv[argc++] = p;
	if (cfg_parse(&c, argc, argv, &err) < 0)
		assert(err.s[0]);
	cfg_done(&c);
	free(buf);
	return 0;
}
