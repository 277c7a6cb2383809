/* gRPC framing helpers: the 5-byte message prefix, grpc-message percent
 * encoding, request path and grpc-timeout parsing, status names and the
 * default limits. See grpc.h.
 *
 * Apart from grpc.c because none of it touches a connection, a session or
 * the loop: each reads bytes and returns a value, which is how the unit
 * tests and the fuzz targets drive them.
 */
#include "kubelet/grpc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int grpc_prefix_parse(const uint8_t p[GRPC_PREFIX_LEN], bool *ret_compressed, uint32_t *ret_len)
{
	if (p[0] > 1)
		return -EPROTO;
	*ret_compressed = p[0] == 1;
	*ret_len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	return 0;
}

void grpc_prefix_write(uint8_t p[GRPC_PREFIX_LEN], uint32_t len)
{
	p[0] = 0;
	p[1] = (uint8_t)(len >> 24);
	p[2] = (uint8_t)(len >> 16);
	p[3] = (uint8_t)(len >> 8);
	p[4] = (uint8_t)len;
}

size_t grpc_percent_encode(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t need = 0, w = 0;
	bool full = size == 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		bool plain = ch >= 0x20 && ch <= 0x7e && ch != '%';
		size_t n = plain ? 1 : 3;

		need += n;
		if (full)
			continue;
		if (w + n >= size) { /* never write half an escape */
			full = true;
			continue;
		}
		if (plain) {
			buf[w++] = (char)ch;
		} else {
			buf[w++] = '%';
			buf[w++] = hex[ch >> 4];
			buf[w++] = hex[ch & 15];
		}
	}
	if (size)
		buf[w] = 0;
	return need;
}

bool grpc_path_is_valid(const char *path, size_t len)
{
	size_t slash = 0;

	if (len < 4 || len >= GRPC_PATH_MAX || path[0] != '/')
		return false;
	for (size_t i = 1; i < len; i++) {
		if (path[i] <= 0x20 || path[i] > 0x7e)
			return false;
		if (path[i] != '/')
			continue;
		if (slash || i == 1 || i == len - 1)
			return false;
		slash = i;
	}
	return slash != 0;
}

int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ns)
{
	uint64_t v = 0, unit;

	if (len < 2 || len > 9)
		return -EINVAL;
	for (size_t i = 0; i < len - 1; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H': unit = 3600ULL * 1000000000ULL; break;
	case 'M': unit = 60ULL * 1000000000ULL; break;
	case 'S': unit = 1000000000ULL; break;
	case 'm': unit = 1000000ULL; break;
	case 'u': unit = 1000ULL; break;
	case 'n': unit = 1; break;
	default: return -EINVAL;
	}
	*ret_ns = v > UINT64_MAX / unit ? UINT64_MAX : v * unit;
	return 0;
}

const char *grpc_status_name(enum grpc_status code)
{
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
		"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	};

	if ((unsigned)code >= ARRAY_SIZE(names))
		return "UNKNOWN_CODE";
	return names[code];
}

void grpc_limits_default(struct grpc_limits *l)
{
	*l = (struct grpc_limits){
		.max_message = 4 << 20,
		.max_conn_buffered = 16 << 20,
		.max_conn_queued = 16 << 20,
		.max_conn_output = 256 << 10,
		.max_streams = 100,
		.max_connections = 64,
		.max_conn_watches = 4,
		.handshake_timeout_ms = 10000,
		.first_request_timeout_ms = 10000,
		.idle_timeout_ms = 120000,
		.write_timeout_ms = 30000,
	};
}
