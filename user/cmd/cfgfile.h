/* The driver's configuration file (--config): one flat YAML map of scalars.
 *
 *     apiVersion: v1alpha1
 *     cpuDeviceMode: grouped
 *     groupBy: numanode
 *     reservedCPUs: "0,32"
 *
 * This module only reads the file into typed key/value pairs, each with its
 * line; cfg.c decides what the keys mean. It is strict, because a typo in a
 * config file must fail at start, never be ignored: the top level is a map (an
 * empty file is an empty map), values are scalars, a key appears once, and
 * anchors, aliases, tags and further documents are refused. Plain scalars are
 * typed the way YAML 1.2's core schema types them (true/false, null, integers),
 * quoted ones are strings, so `nri: "false"` is a string and not a boolean.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct errbuf;

/* Caps on what a file may make us hold. */
#define CFGFILE_SIZE_MAX (64 * 1024)
#define CFGFILE_KEYS_MAX 64
#define CFGFILE_VALUE_MAX 4096

enum cfgfile_kind { CFGFILE_STRING, CFGFILE_BOOL, CFGFILE_INT, CFGFILE_NULL };

struct cfgfile_entry {
	char *key;
	char *value; /* the scalar's text ("true", "42", "" for null) */
	enum cfgfile_kind kind;
	int line;    /* 1-based */
};

struct cfgfile {
	uint64_t digest; /* of the bytes read (cfgfile_load), for filewatch.h */
	int n;
	struct cfgfile_entry v[CFGFILE_KEYS_MAX];
};

/* Parses len bytes of YAML. Returns 0 and a new cfgfile in *ret (free with
 * cfgfile_free()), or -EINVAL with "line N: ..." in err, -E2BIG over a cap,
 * -ENOMEM. */
int cfgfile_parse(const char *data, size_t len, struct cfgfile **ret, struct errbuf *err);

/* Reads and parses path: a regular file of at most CFGFILE_SIZE_MAX bytes,
 * or links to one, as the kubelet mounts a ConfigMap key. */
int cfgfile_load(const char *path, struct cfgfile **ret, struct errbuf *err);

struct cfgfile *cfgfile_free(struct cfgfile *f);
DEFINE_FREEP(cfgfile, cfgfile_free)

/* Human name of a kind ("a string", "a boolean", ...), for error text. */
const char *cfgfile_kind_name(enum cfgfile_kind k);
