/* The configuration file reader. See cfgfile.h for the rules.
 *
 * libyaml builds the document; this file walks its one mapping. Marks in
 * libyaml are 0-based, errors here are 1-based as an editor shows them. */
#include "cmd/cfgfile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "host/filewatch.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

static void document_deletep(yaml_document_t **d)
{
	if (*d)
		yaml_document_delete(*d);
}

static bool is_one_of(const char *s, const char *const *v)
{
	for (; *v; v++)
		if (!strcmp(s, *v))
			return true;
	return false;
}

/* YAML 1.2 core schema, for plain scalars only. */
static enum cfgfile_kind plain_kind(const char *s)
{
	static const char *const bools[] = { "true", "True", "TRUE", "false", "False", "FALSE",
					     NULL };
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	const char *p = s;

	if (is_one_of(s, bools))
		return CFGFILE_BOOL;
	if (is_one_of(s, nulls))
		return CFGFILE_NULL;
	if (*p == '-' || *p == '+')
		p++;
	if (*p && strspn(p, "0123456789") == strlen(p))
		return CFGFILE_INT;
	return CFGFILE_STRING;
}

/* Normalises a boolean's spelling to "true"/"false" for cfg's parser. */
static const char *bool_text(const char *s)
{
	return s[0] == 't' || s[0] == 'T' ? "true" : "false";
}

static int line_of(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

/* A key (key == NULL) or the value of key. Errors start "line N: ". */
static int take_scalar(const yaml_node_t *n, const char *key, struct errbuf *err, char **ret_text,
		       enum cfgfile_kind *ret_kind)
{
	bool is_key = !key;
	const char *what = is_key ? "a key" : "the value";
	char where[CFGFILE_VALUE_MAX + 64];
	const char *text;
	enum cfgfile_kind kind;
	size_t len;

	if (is_key)
		(void)snprintf(where, sizeof(where), "line %d:", line_of(n));
	else
		(void)snprintf(where, sizeof(where), "line %d: key %s:", line_of(n), key);
	if (n->type != YAML_SCALAR_NODE)
		return errbuf_fail(err, -EINVAL, "%s %s must be a plain value, not a %s", where,
				   what, n->type == YAML_MAPPING_NODE ? "map" : "list");
	/* An explicit tag (!!str, !custom) changes the type behind the reader's
	 * back; libyaml reports the resolved default tag for untagged scalars. */
	if (n->tag && strcmp((const char *)n->tag, YAML_STR_TAG) != 0)
		return errbuf_fail(err, -EINVAL, "%s tags are not supported (%s)", where,
				   (const char *)n->tag);
	text = (const char *)n->data.scalar.value;
	len = n->data.scalar.length;
	if (len > CFGFILE_VALUE_MAX)
		return errbuf_fail(err, -E2BIG, "%s %s is longer than %d bytes", where, what,
				   CFGFILE_VALUE_MAX);
	if (strlen(text) != len)
		return errbuf_fail(err, -EINVAL, "%s %s holds a NUL byte", where, what);
	kind = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain_kind(text) : CFGFILE_STRING;
	if (is_key && (kind != CFGFILE_STRING || !len))
		return errbuf_fail(err, -EINVAL, "line %d: key '%s' is not a name", line_of(n),
				   text);
	*ret_text = strdup(kind == CFGFILE_BOOL ? bool_text(text)
				  : kind == CFGFILE_NULL ? ""
							 : text);
	if (!*ret_text)
		return -ENOMEM;
	*ret_kind = kind;
	return 0;
}

/* libyaml resolves an alias to the node it names, so a repeated node id in
 * the mapping means an alias was used. */
static bool node_seen(const yaml_document_t *doc, const yaml_node_pair_t *upto, int id)
{
	for (const yaml_node_pair_t *p = doc->nodes.start[0].data.mapping.pairs.start; p < upto;
	     p++)
		if (p->key == id || p->value == id)
			return true;
	return false;
}

int cfgfile_parse(const char *data, size_t len, struct cfgfile **ret, struct errbuf *err)
{
	_cleanup_(cfgfile_freep) struct cfgfile *f = calloc(1, sizeof(*f));
	yaml_document_t doc_storage;
	_cleanup_(document_deletep) yaml_document_t *doc = NULL;
	yaml_parser_t parser;
	yaml_node_t *root;
	int r = 0;

	if (!f)
		return -ENOMEM;
	if (len > CFGFILE_SIZE_MAX)
		return errbuf_fail(err, -E2BIG, "larger than %d bytes", CFGFILE_SIZE_MAX);
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	if (!yaml_parser_load(&parser, &doc_storage)) {
		r = errbuf_fail(err, -EINVAL, "line %zu: %s", parser.problem_mark.line + 1,
				parser.problem ? parser.problem : "not YAML");
		yaml_parser_delete(&parser);
		return r;
	}
	doc = &doc_storage;
	root = yaml_document_get_root_node(doc);
	if (root) {
		/* One document only: a second one would be silently ignored. */
		yaml_document_t next;

		if (!yaml_parser_load(&parser, &next)) {
			r = errbuf_fail(err, -EINVAL, "line %zu: %s", parser.problem_mark.line + 1,
					parser.problem ? parser.problem : "not YAML");
		} else {
			if (yaml_document_get_root_node(&next))
				r = errbuf_fail(err, -EINVAL,
						"line %d: a second YAML document; the file holds "
						"one map",
						(int)next.start_mark.line + 1);
			yaml_document_delete(&next);
		}
	}
	yaml_parser_delete(&parser);
	if (r < 0)
		return r;
	if (root && root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0 &&
	    root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
		root = NULL; /* "---" alone: an empty document */
	if (!root) { /* an empty file: nothing set */
		*ret = TAKE_PTR(f);
		return 0;
	}
	if (root->type != YAML_MAPPING_NODE)
		return errbuf_fail(err, -EINVAL, "line %d: the file must be a map of keys to values",
				   line_of(root));
	if (root->tag && strcmp((const char *)root->tag, YAML_MAP_TAG) != 0)
		return errbuf_fail(err, -EINVAL, "line %d: tags are not supported (%s)",
				   line_of(root), (const char *)root->tag);
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		yaml_node_t *v = yaml_document_get_node(doc, p->value);
		struct cfgfile_entry *e;
		enum cfgfile_kind kk;

		if (!k || !v)
			return errbuf_fail(err, -EINVAL, "malformed mapping");
		if (node_seen(doc, p, p->key) || node_seen(doc, p, p->value))
			return errbuf_fail(err, -EINVAL, "line %d: aliases (*name) are not "
							 "supported",
					   line_of(k));
		if (f->n == CFGFILE_KEYS_MAX)
			return errbuf_fail(err, -E2BIG, "line %d: more than %d keys", line_of(k),
					   CFGFILE_KEYS_MAX);
		e = &f->v[f->n];
		r = take_scalar(k, NULL, err, &e->key, &kk);
		if (r < 0)
			return r;
		e->line = line_of(k);
		f->n++; /* owned from here on, freed with f */
		for (int i = 0; i < f->n - 1; i++)
			if (!strcmp(f->v[i].key, e->key))
				return errbuf_fail(err, -EINVAL, "line %d: key %s repeated (first on "
								 "line %d)",
						   e->line, e->key, f->v[i].line);
		r = take_scalar(v, e->key, err, &e->value, &e->kind);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(f);
	return 0;
}

int cfgfile_load(const char *path, struct cfgfile **ret, struct errbuf *err)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r;

	r = fileio_read_mounted(path, CFGFILE_SIZE_MAX, &data, &len, err);
	if (r < 0)
		return errbuf_wrap(err, r, "cannot read it");
	r = cfgfile_parse(data, len, ret, err);
	if (r < 0)
		return r;
	(*ret)->digest = filewatch_digest(data, len);
	return 0;
}

struct cfgfile *cfgfile_free(struct cfgfile *f)
{
	if (!f)
		return NULL;
	for (int i = 0; i < f->n; i++) {
		free(f->v[i].key);
		free(f->v[i].value);
	}
	free(f);
	return NULL;
}

const char *cfgfile_kind_name(enum cfgfile_kind k)
{
	switch (k) {
	case CFGFILE_STRING:
		return "a string";
	case CFGFILE_BOOL:
		return "a boolean";
	case CFGFILE_INT:
		return "an integer";
	case CFGFILE_NULL:
		return "null";
	}
	return "?";
}
