/* Scope cleanup for json-c objects, reading a string member, and the strict
 * parse of a whole document: the one copy every module uses.
 *
 * _cleanup_json_ struct json_object *o = NULL;    put at scope exit
 * _cleanup_(json_tokener_freep) struct json_tokener *t = NULL;
 *
 * json-c counts references: a put releases ours; objects we were only lent
 * (json_object_object_get_ex) must not be put. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/cleanup.h"

static inline void json_object_putp(struct json_object **o)
{
	if (*o)
		(void)json_object_put(*o);
}

static inline void json_tokener_freep(struct json_tokener **t)
{
	if (*t)
		json_tokener_free(*t);
}

#define _cleanup_json_ _cleanup_(json_object_putp)

/* The string member key of o, or NULL when absent or not a string; borrowed
 * from o. */
static inline const char *jsonc_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Copies the string member key of o into buf (size bytes): -EPROTO when it
 * is absent, not a string or does not fit (buf is then unchanged). */
static inline int jsonc_str_copy(struct json_object *o, const char *key, char *buf, size_t size)
{
	const char *s = jsonc_str(o, key);
	size_t n = s ? strlen(s) : 0;

	if (!s || n >= size)
		return -EPROTO;
	memcpy(buf, s, n + 1);
	return 0;
}

/* Adds val under key, taking it even on failure; val NULL (a failed
 * json_object_new_*) or a failed add is -ENOMEM, which is all json-c can
 * fail with here. Chains: r = r ?: jsonc_add(o, "k", json_object_new_int(1)). */
static inline int jsonc_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val) < 0) {
		(void)json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

/* jsonc_add() for an array element. */
static inline int jsonc_push(struct json_object *arr, struct json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_array_add(arr, val) < 0) {
		(void)json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

struct errbuf;

/* Parses len bytes as exactly one JSON value, strictly (RFC 8259: no
 * comments, no trailing commas, valid UTF-8), nested at most depth levels
 * below the top. A NUL byte anywhere, trailing data after the value, or a
 * value cut short is refused. Errors: -EINVAL (eb names the offset and
 * json-c's reason), -E2BIG when nested deeper than depth, -ENOMEM.
 * *ret (put it) is written only on success. */
int jsonc_parse(const char *buf, size_t len, int depth, struct json_object **ret,
		struct errbuf *eb);
