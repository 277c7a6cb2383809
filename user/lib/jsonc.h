/* Scope cleanup for json-c objects, the one copy every module uses.
 *
 * _cleanup_json_ struct json_object *o = NULL;    put at scope exit
 * _cleanup_(json_tokener_freep) struct json_tokener *t = NULL;
 *
 * json-c counts references: a put releases ours; objects we were only lent
 * (json_object_object_get_ex) must not be put. */
#pragma once

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
