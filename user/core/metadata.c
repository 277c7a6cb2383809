/* Device metadata files and their CDI specs. See metadata.h. */
#include "core/metadata.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/cdi.h"
#include "core/claim.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/jsonc.h"

#define SPEC_PREFIX "dra.cpu_metadata_"
#define SPEC_SUFFIX ".json"
#define DATA_SUBDIR "dra-device-metadata"
#define FILE_NAME "metadata.json"

size_t metadata_base_len(const char *request)
{
	return strcspn(request, "/");
}

void metadata_cdi_id(const char *uid, const char *request, char *buf, size_t size)
{
	(void)snprintf(buf, size, "%s=%s_%.*s", METADATA_CDI_KIND, uid,
		       (int)metadata_base_len(request), request);
}

static struct json_object *device_json(const struct metadata_opts *o,
				       const struct metadata_device *d)
{
	_cleanup_json_ struct json_object *dev = json_object_new_object();
	struct json_object *attrs = NULL;
	int r;

	if (!dev)
		return NULL;
	r = jsonc_add(dev, "driver", json_object_new_string(o->driver));
	r = r ?: jsonc_add(dev, "pool", json_object_new_string(o->pool));
	r = r ?: jsonc_add(dev, "name", json_object_new_string(d->name));
	if (r < 0)
		return NULL;
	if (d->attributes && json_object_deep_copy(d->attributes, &attrs, NULL) < 0)
		return NULL;
	if (!attrs && !(attrs = json_object_new_object()))
		return NULL;
	if (jsonc_add(dev, "attributes", attrs) < 0)
		return NULL;
	if (d->allocated_cpus >= 0) {
		struct json_object *v = json_object_new_object();

		if (!v || jsonc_add(v, "int", json_object_new_int64(d->allocated_cpus)) < 0 ||
		    jsonc_add(attrs, "dra.cpu/allocatedNumCPUs", v) < 0) {
			(void)json_object_put(v);
			return NULL;
		}
	}
	return TAKE_PTR(dev);
}

int metadata_build(const struct metadata_opts *o, const struct metadata_claim *c,
		   const struct metadata_request *r, struct json_object **ret)
{
	_cleanup_json_ struct json_object *m = json_object_new_object();
	struct json_object *meta = json_object_new_object(), *reqs, *req, *devs;
	int rc;

	if (!m || jsonc_add(m, "kind", json_object_new_string("DeviceMetadata")) < 0 ||
	    jsonc_add(m, "apiVersion", json_object_new_string(METADATA_API_VERSION)) < 0 ||
	    jsonc_add(m, "metadata", meta) < 0)
		return -ENOMEM;
	rc = jsonc_add(meta, "name", json_object_new_string(c->name));
	rc = rc ?: jsonc_add(meta, "namespace", json_object_new_string(c->ns));
	rc = rc ?: jsonc_add(meta, "uid", json_object_new_string(c->uid));
	/* written once per Prepare and never updated in place */
	rc = rc ?: jsonc_add(meta, "generation", json_object_new_int64(1));
	if (!rc && c->pod_claim_name && *c->pod_claim_name)
		rc = jsonc_add(m, "podClaimName", json_object_new_string(c->pod_claim_name));
	if (rc < 0 || jsonc_add(m, "requests", reqs = json_object_new_array()) < 0 ||
	    jsonc_push(reqs, req = json_object_new_object()) < 0 ||
	    jsonc_add(req, "name", json_object_new_string(r->name)) < 0 ||
	    jsonc_add(req, "devices", devs = json_object_new_array()) < 0)
		return -ENOMEM;
	for (int i = 0; i < r->n; i++)
		if (jsonc_push(devs, device_json(o, &r->devices[i])) < 0)
			return -ENOMEM;
	*ret = TAKE_PTR(m);
	return 0;
}

/* <data_dir>/dra-device-metadata/<uid>[/<base>] into buf. */
static int data_path(const struct metadata_opts *o, const char *uid, const char *request,
		     char *buf, size_t size)
{
	int n = request ? snprintf(buf, size, "%s/" DATA_SUBDIR "/%s/%.*s", o->data_dir, uid,
				   (int)metadata_base_len(request), request)
			: snprintf(buf, size, "%s/" DATA_SUBDIR "/%s", o->data_dir, uid);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int spec_name(const char *uid, const char *request, char *buf, size_t size)
{
	int n = snprintf(buf, size, SPEC_PREFIX "%s_%.*s" SPEC_SUFFIX, uid,
			 (int)metadata_base_len(request), request);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int spec_json(const struct metadata_claim *c, const char *request, const char *host,
		     char **ret)
{
	_cleanup_json_ struct json_object *s = json_object_new_object();
	struct json_object *devs, *dev, *edits, *mounts;
	const char *forms[2][2] = { { "resourceclaims", c->name },
				    { "resourceclaimtemplates", c->pod_claim_name } };
	char name[256];
	int base = (int)metadata_base_len(request);

	(void)snprintf(name, sizeof(name), "%s_%.*s", c->uid, base, request);
	if (!s || jsonc_add(s, "cdiVersion", json_object_new_string(METADATA_CDI_VERSION)) < 0 ||
	    jsonc_add(s, "kind", json_object_new_string(METADATA_CDI_KIND)) < 0 ||
	    jsonc_add(s, "devices", devs = json_object_new_array()) < 0 ||
	    jsonc_push(devs, dev = json_object_new_object()) < 0 ||
	    jsonc_add(dev, "name", json_object_new_string(name)) < 0 ||
	    jsonc_add(dev, "containerEdits", edits = json_object_new_object()) < 0 ||
	    jsonc_add(edits, "mounts", mounts = json_object_new_array()) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < 2; i++) {
		struct json_object *m, *opts;
		char path[1024];

		if (!forms[i][1] || !*forms[i][1])
			continue;
		(void)snprintf(path, sizeof(path), METADATA_CONTAINER_DIR "/%s/%s/%.*s/%s-metadata.json",
			       forms[i][0], forms[i][1], base, request, "dra.cpu");
		if (jsonc_push(mounts, m = json_object_new_object()) < 0 ||
		    jsonc_add(m, "hostPath", json_object_new_string(host)) < 0 ||
		    jsonc_add(m, "containerPath", json_object_new_string(path)) < 0 ||
		    jsonc_add(m, "options", opts = json_object_new_array()) < 0 ||
		    jsonc_push(opts, json_object_new_string("ro")) < 0 ||
		    jsonc_push(opts, json_object_new_string("bind")) < 0)
			return -ENOMEM;
	}
	*ret = strdup(json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN |
							     JSON_C_TO_STRING_NOSLASHESCAPE));
	return *ret ? 0 : -ENOMEM;
}

static int write_request(const struct metadata_opts *o, const struct metadata_claim *c,
			 const struct metadata_request *r, struct errbuf *eb)
{
	_cleanup_json_ struct json_object *m = NULL;
	_cleanup_free_ char *text = NULL, *spec = NULL;
	char dir[4096], host[4200], name[256];
	int rc;

	rc = data_path(o, c->uid, r->name, dir, sizeof(dir));
	rc = rc ?: spec_name(c->uid, r->name, name, sizeof(name));
	if (rc < 0)
		return errbuf_fail(eb, rc, "metadata path of request %s too long", r->name);
	rc = metadata_build(o, c, r, &m);
	if (rc < 0)
		return rc;
	if (asprintf(&text, "%s\n",
		     json_object_to_json_string_ext(m, JSON_C_TO_STRING_PRETTY |
							   JSON_C_TO_STRING_SPACED |
							   JSON_C_TO_STRING_NOSLASHESCAPE)) < 0) {
		text = NULL;
		return -ENOMEM;
	}
	rc = fileio_mkdir_p(dir, 0755);
	if (rc < 0)
		return errbuf_fail(eb, rc, "%s: %s", dir, strerror(-rc));
	rc = fileio_write_atomic(dir, FILE_NAME, text, strlen(text), 0644);
	if (rc < 0)
		return errbuf_fail(eb, rc, "%s/%s: %s", dir, FILE_NAME, strerror(-rc));
	(void)snprintf(host, sizeof(host), "%s/%s", dir, FILE_NAME);
	rc = spec_json(c, r->name, host, &spec);
	if (rc < 0)
		return rc;
	rc = fileio_mkdir_p(o->cdi_dir, 0755);
	rc = rc ?: fileio_write_atomic(o->cdi_dir, name, spec, strlen(spec), 0644);
	if (rc < 0)
		return errbuf_fail(eb, rc, "%s/%s: %s", o->cdi_dir, name, strerror(-rc));
	return 0;
}

int metadata_write(const struct metadata_opts *o, const struct metadata_claim *c,
		   struct errbuf *eb)
{
	int rc = 0;

	if (cdi_uid_valid(c->uid) < 0)
		return errbuf_fail(eb, -EINVAL, "claim uid is not usable in a path");
	/* Names end up in paths, on the host and in the container. */
	if (claim_name_check(c->name) < 0 || strchr(c->name, '/'))
		return errbuf_fail(eb, -EINVAL, "claim name is not a Kubernetes object name");
	if (c->pod_claim_name && *c->pod_claim_name &&
	    claim_namespace_check(c->pod_claim_name) < 0)
		return errbuf_fail(eb, -EINVAL,
				   "annotation resource.kubernetes.io/pod-claim-name is not a DNS "
				   "label");
	for (int i = 0; i < c->n; i++) {
		char base[64];
		size_t n = metadata_base_len(c->requests[i].name);

		if (n >= sizeof(base))
			return errbuf_fail(eb, -EINVAL, "request name too long");
		memcpy(base, c->requests[i].name, n);
		base[n] = 0;
		if (claim_namespace_check(base) < 0)
			return errbuf_fail(eb, -EINVAL, "request %.64s is not a DNS label",
					   c->requests[i].name);
	}
	for (int i = 0; i < c->n && rc >= 0; i++)
		rc = write_request(o, c, &c->requests[i], eb);
	if (rc < 0)
		(void)metadata_remove(o, c->uid, NULL);
	return rc;
}

/* Removes dir/<sub>/metadata.json (and a temp file a crash left), each sub,
 * then dir, never following a link planted there (fileio_remove_tree). 1
 * when there was a dir, 0 when not, -errno. */
static int remove_tree(const char *dir)
{
	char parent[4096];
	const char *slash = strrchr(dir, '/');

	if (!slash || slash == dir || (size_t)(slash - dir) >= sizeof(parent))
		return -EINVAL;
	memcpy(parent, dir, (size_t)(slash - dir));
	parent[slash - dir] = 0;
	return fileio_remove_tree(parent, slash + 1, 2);
}

int metadata_remove(const struct metadata_opts *o, const char *uid, struct errbuf *eb)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char prefix[128], dir[4096];
	struct dirent *e;
	int r, found = 0;

	if (cdi_uid_valid(uid) < 0)
		return 0; /* never one of ours */
	(void)snprintf(prefix, sizeof(prefix), SPEC_PREFIX "%s_", uid);
	d = opendir(o->cdi_dir);
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
		    len < strlen(SPEC_SUFFIX) ||
		    strcmp(e->d_name + len - strlen(SPEC_SUFFIX), SPEC_SUFFIX) != 0)
			continue;
		r = fileio_remove(o->cdi_dir, e->d_name);
		if (r < 0)
			return errbuf_fail(eb, r, "%s/%s: %s", o->cdi_dir, e->d_name, strerror(-r));
		found = 1;
	}
	r = data_path(o, uid, NULL, dir, sizeof(dir));
	r = r ?: remove_tree(dir);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", dir, strerror(-r));
	return found | r;
}

/* Calls fn(uid) for every claim uid that has metadata (a spec or a data
 * directory); the same uid may come twice. */
static void each_uid(const struct metadata_opts *o, void (*fn)(void *ud, const char *uid),
		     void *ud)
{
	_cleanup_(closedirp) DIR *specs = opendir(o->cdi_dir);
	_cleanup_(closedirp) DIR *data = NULL;
	char dir[4096];
	struct dirent *e;

	while (specs && (e = readdir(specs))) {
		char uid[CDI_UID_MAX];
		const char *p = e->d_name + strlen(SPEC_PREFIX);
		size_t n;

		if (strncmp(e->d_name, SPEC_PREFIX, strlen(SPEC_PREFIX)) != 0)
			continue;
		n = strcspn(p, "_");
		if (!p[n] || n >= sizeof(uid))
			continue;
		memcpy(uid, p, n);
		uid[n] = 0;
		fn(ud, uid);
	}
	if (data_path(o, "x", NULL, dir, sizeof(dir)) < 0)
		return;
	dir[strlen(dir) - 2] = 0; /* the parent of <uid> */
	data = opendir(dir);
	while (data && (e = readdir(data)))
		if (e->d_name[0] != '.')
			fn(ud, e->d_name);
}

struct sweep {
	const struct metadata_opts *o;
	bool (*is_prepared)(void *ud, const char *uid);
	void *ud;
	int removed;
};

static void sweep_one(void *ud, const char *uid)
{
	struct sweep *s = ud;

	if (cdi_uid_valid(uid) < 0 || s->is_prepared(s->ud, uid))
		return;
	if (metadata_remove(s->o, uid, NULL) > 0)
		s->removed++;
}

int metadata_sweep(const struct metadata_opts *o, bool (*is_prepared)(void *ud, const char *uid),
		   void *ud)
{
	struct sweep s = { .o = o, .is_prepared = is_prepared, .ud = ud };

	/* Removing while listing: a name readdir still returns after it went is
	 * removed again harmlessly (a missing file is success). */
	each_uid(o, sweep_one, &s);
	return s.removed;
}
