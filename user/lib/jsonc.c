/* The strict whole-document JSON parse. See jsonc.h. */
#include "lib/jsonc.h"

#include <stdint.h>

#include "lib/errbuf.h"

int jsonc_parse(const char *buf, size_t len, int depth, struct json_object **ret,
		struct errbuf *eb)
{
	_cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
	_cleanup_json_ struct json_object *top = NULL;
	enum json_tokener_error jerr;
	const char *nul;
	size_t end;

	/* json-c stops at a NUL inside a string; nothing valid holds one. */
	nul = memchr(buf, '\0', len);
	if (nul)
		return errbuf_fail(eb, -EINVAL, "NUL byte at offset %zu", (size_t)(nul - buf));
	if (len > INT32_MAX)
		return errbuf_fail(eb, -E2BIG, "JSON of %zu bytes", len);
	tok = json_tokener_new_ex(depth + 1); /* json-c counts the top level too */
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	top = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (jerr == json_tokener_error_depth)
		return errbuf_fail(eb, -E2BIG, "JSON nested deeper than %d levels at offset %zu",
				   depth, end);
	if (jerr == json_tokener_continue)
		return errbuf_fail(eb, -EINVAL, "JSON ends early at offset %zu", len);
	if (jerr != json_tokener_success || !top)
		return errbuf_fail(eb, -EINVAL, "JSON syntax error at offset %zu: %s", end,
				   json_tokener_error_desc(jerr));
	for (; end < len; end++)
		if (!strchr(" \t\r\n", buf[end]))
			return errbuf_fail(eb, -EINVAL, "trailing data at offset %zu", end);
	*ret = TAKE_PTR(top);
	return 0;
}
