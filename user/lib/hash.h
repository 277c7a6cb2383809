/* hash: FNV-1a, the one non-cryptographic hash of the project (hash tables of
 * claims, containers and metric series; digests of published slices). Not for
 * anything a peer could use to flood a table: keys are ours or bounded. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define HASH_INIT 1469598103934665603ull /* FNV-1a 64-bit offset basis */

/* Folds n bytes of data into h. */
static inline uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* Folds the bytes of the string s (without its NUL) into h. */
static inline uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}
