/* Kubernetes resource.Quantity, as far as CPU counts need it: strict parsing
 * of the whole grammar ([+-]digits[.digits] then a binary suffix Ki..Ei, a
 * decimal suffix n u m k M G T P E, or an exponent e<int>), and the canonical
 * DecimalSI text of an integer (the server stores "1000" as "1k"; publishing
 * the canonical form keeps a restart from looking like a change).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct errbuf;

/* Value in thousandths. *ret_exact is false when the value has digits below
 * 1/1000 (then *ret_milli is truncated toward zero). -EINVAL on bad syntax,
 * -ERANGE when |value| * 1000 does not fit in int64. */
int quantity_parse_milli(const char *s, int64_t *ret_milli, bool *ret_exact);

/* A count of whole things (CPUs): an integer in [1, max]. Errors (-EINVAL,
 * -ERANGE) explain in eb (may be NULL): "not a quantity", "not a whole
 * number", "must be at least 1", "exceeds N". */
int quantity_parse_count(const char *s, int64_t max, int64_t *ret, struct errbuf *eb);

/* Canonical DecimalSI form of an integer ("64", "1k", "1500", "2M"). */
void quantity_format_int(int64_t v, char *buf, size_t size);
