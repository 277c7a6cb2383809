/* irq parsers: the kernel's hex CPU mask (default_smp_affinity) and the text of
 * /proc/interrupts. Never crash; a mask that parses formats back to a mask that
 * parses to the same set; every row handed out has a label. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/irq.h"
#include "lib/cpuset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_row(void *ud, const struct irq_row *row)
{
	assert(row->label && row->desc);
	++*(size_t *)ud;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[CPUSET_MAX / 4 + CPUSET_MAX / 32 + 2];
	struct cpuset a, b;
	size_t rows = 0;

	if (irq_mask_parse((const char *)data, size, &a) == 0) {
		assert(irq_mask_format(&a, buf, sizeof(buf)) == 0);
		assert(irq_mask_parse(buf, strlen(buf), &b) == 0);
		assert(cpuset_equal(&a, &b));
	}
	(void)irq_interrupts_parse((const char *)data, size, 1, on_row, &rows);
	return 0;
}
