/* topo_json: the topology as JSON, in and out (the --print-topology format).
 * See topo_json.c.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

struct errbuf;
struct topo;

/* Parses the topology JSON, the --print-topology format:
 *
 *   {"cpus": [{"cpu": 0, "socket": 0, "numa": 0, "core": 0, "coreId": 0, "l3": 0,
 *              "coreType": "standard"}, ...], "offline": "2,5", "sockets": 2,
 *    "numaNodes": 2, "cores": 16, "l3Caches": 2, "smtEnabled": true}
 *
 * Per CPU, coreId (default: core) and coreType (default: standard) are optional
 * and "uncore" is accepted for "l3". The summary fields after "cpus" are
 * optional and recomputed; given ones must match. Strict: unknown keys, wrong
 * types, non-integers, out-of-range ids and duplicate CPUs are -EINVAL; more
 * than 16 MiB, 8192 CPUs or 4 levels of nesting is -E2BIG. eb names the CPU
 * entry and the field. (json-c keeps the last of duplicate keys.) */
int topo_parse_json(const char *buf, size_t len, struct topo **ret, struct errbuf *eb);
/* Same from a file (symlinks followed: a mounted ConfigMap is one); eb
 * starts with the path. */
int topo_load_json_file(const char *path, struct topo **ret, struct errbuf *eb);

/* Writes the --print-topology JSON above (keys in that order, CPUs ascending,
 * "offline" a CPU list, "" when none) as one newline-terminated line to f.
 * Parsing the output gives back the same topology. -EIO if f reports an error.
 * The one JSON the project writes from a template instead of json-c: every
 * value is an integer, a CPU list or a fixed core-type name (nothing to
 * escape), and its layout ({"cpu": 0, "socket": 0, ...}, a space after each
 * colon and comma) is what users diff and the README shows; json-c prints
 * either no spaces or spaces inside the brackets too. */
int topo_write_json(const struct topo *t, FILE *f);
