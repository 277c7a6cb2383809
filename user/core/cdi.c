/* CDI spec files. See cdi.h for the format and the durability contract. */
#include "core/cdi.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "lib/jsonc.h"
#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

#define FILE_PREFIX "dra.k8s.io-cpu_claim-"
#define FILE_SUFFIX ".json"

int cdi_uid_valid(const char *uid)
{
	size_t n = strlen(uid);

	if (n == 0 || n >= CDI_UID_MAX || uid[0] == '-')
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = uid[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return -EINVAL;
	}
	return 0;
}

void cdi_device_id(const char *uid, char *buf, size_t size)
{
	(void)snprintf(buf, size, "%s=claim-%s", CDI_KIND, uid);
}

int cdi_spec_path(const char *dir, const char *uid, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s%s%s", dir, FILE_PREFIX, uid, FILE_SUFFIX);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The file name of uid's spec (without the directory). */
static int spec_name(const char *uid, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s%s%s", FILE_PREFIX, uid, FILE_SUFFIX);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int cdi_spec_write(const char *dir, const char *uid, const struct cpuset *cpus)
{
	_cleanup_free_ char *list = NULL, *json = NULL;
	char name[256];
	int n, r;

	if (cdi_uid_valid(uid) < 0)
		return -EINVAL;
	r = spec_name(uid, name, sizeof(name));
	if (r < 0)
		return r;
	list = cpuset_to_string(cpus);
	if (!list)
		return -ENOMEM;
	n = asprintf(&json,
		     "{\"cdiVersion\":\"%s\",\"kind\":\"%s\",\"devices\":[{\"name\":\"claim-%s\","
		     "\"containerEdits\":{\"env\":[\"%s%s=%s\"]}}]}\n",
		     CDI_VERSION, CDI_KIND, uid, CDI_ENV_PREFIX, uid, list);
	if (n < 0) {
		json = NULL;
		return -ENOMEM;
	}
	r = fileio_mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	/* The temp file is dot-named: CDI scanners only read *.json. */
	return fileio_write_atomic(dir, name, json, (size_t)n, 0644);
}

int cdi_spec_remove(const char *dir, const char *uid)
{
	char name[256];
	int r;

	if (cdi_uid_valid(uid) < 0)
		return -EINVAL;
	r = spec_name(uid, name, sizeof(name));
	return r < 0 ? r : fileio_remove(dir, name);
}

int cdi_remove_stale_temps(const char *dir)
{
	return fileio_remove_stale_temps(dir, FILE_PREFIX);
}

int cdi_spec_parse(const char *buf, size_t len, char *uid_out, struct cpuset *cpus,
		   struct errbuf *eb)
{
	_cleanup_(json_object_putp) struct json_object *root = NULL;
	struct json_tokener *tok;
	struct json_object *devs, *dev, *edits, *env, *e;
	const char *s, *name, *uid, *eq;
	size_t uid_len;
	int r;

	if (len > CDI_FILE_MAX)
		return errbuf_fail(eb, -EPROTO, "larger than %d bytes", CDI_FILE_MAX);
	tok = json_tokener_new_ex(16);
	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, buf, (int)len);
	r = json_tokener_get_error(tok) == json_tokener_success ? 0 : -EPROTO;
	if (r == 0 && tok->char_offset < (int)len) {
		/* trailing bytes other than whitespace are junk */
		for (size_t i = (size_t)tok->char_offset; i < len; i++)
			if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\t' && buf[i] != '\r')
				r = -EPROTO;
	}
	json_tokener_free(tok);
	if (r < 0 || !json_object_is_type(root, json_type_object))
		return errbuf_fail(eb, -EPROTO, "not a JSON object");
	s = jsonc_str(root, "kind");
	if (!s || strcmp(s, CDI_KIND) != 0)
		return errbuf_fail(eb, -EPROTO, "kind is not %s", CDI_KIND);
	s = jsonc_str(root, "cdiVersion");
	if (!s || strcmp(s, CDI_VERSION) != 0)
		return errbuf_fail(eb, -EPROTO, "cdiVersion is not %s", CDI_VERSION);
	if (!json_object_object_get_ex(root, "devices", &devs) ||
	    !json_object_is_type(devs, json_type_array) || json_object_array_length(devs) != 1)
		return errbuf_fail(eb, -EPROTO, "not exactly one device");
	dev = json_object_array_get_idx(devs, 0);
	name = json_object_is_type(dev, json_type_object) ? jsonc_str(dev, "name") : NULL;
	if (!name || strncmp(name, "claim-", 6) != 0)
		return errbuf_fail(eb, -EPROTO, "device name is not claim-<uid>");
	uid = name + 6;
	if (cdi_uid_valid(uid) < 0)
		return errbuf_fail(eb, -EPROTO, "device name holds an invalid uid");
	uid_len = strlen(uid);
	if (!json_object_object_get_ex(dev, "containerEdits", &edits) ||
	    !json_object_object_get_ex(edits, "env", &env) ||
	    !json_object_is_type(env, json_type_array) || json_object_array_length(env) != 1)
		return errbuf_fail(eb, -EPROTO, "not exactly one env entry");
	e = json_object_array_get_idx(env, 0);
	s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
	if (!s || strncmp(s, CDI_ENV_PREFIX, strlen(CDI_ENV_PREFIX)) != 0 ||
	    strncmp(s + strlen(CDI_ENV_PREFIX), uid, uid_len) != 0 ||
	    s[strlen(CDI_ENV_PREFIX) + uid_len] != '=')
		return errbuf_fail(eb, -EPROTO, "env entry is not %s<uid>=<cpus>", CDI_ENV_PREFIX);
	eq = s + strlen(CDI_ENV_PREFIX) + uid_len;
	if (cpuset_parse(eq + 1, cpus, eb) < 0)
		return errbuf_wrap(eb, -EPROTO, "env cpuset");
	memcpy(uid_out, uid, uid_len + 1);
	return 0;
}

int cdi_scan(const char *dir, cdi_spec_fn fn, cdi_bad_fn bad, void *ud)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (r >= 0 && (de = readdir(d))) {
		size_t n = strlen(de->d_name), pl = strlen(FILE_PREFIX), sl = strlen(FILE_SUFFIX);
		_cleanup_(buf_done) struct buf text = BUF_INIT(CDI_FILE_MAX);
		struct errbuf why = { "" };
		char path[4096], uid[CDI_UID_MAX];
		struct cpuset cpus;

		if (n <= pl + sl || strncmp(de->d_name, FILE_PREFIX, pl) != 0 ||
		    strcmp(de->d_name + n - sl, FILE_SUFFIX) != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		/* Through the directory's fd: the text names the file, bad() the path. */
		if (fileio_read_at(dirfd(d), de->d_name, 0, &text, &why) < 0 ||
		    cdi_spec_parse(buf_str(&text), buf_len(&text), uid, &cpus, &why) < 0) {
			if (bad)
				bad(ud, path, why.s);
			continue;
		}
		if (n - pl - sl != strlen(uid) || strncmp(de->d_name + pl, uid, strlen(uid)) != 0) {
			if (bad)
				bad(ud, path, "file name and device name disagree");
			continue;
		}
		r = fn(ud, uid, &cpus);
	}
	closedir(d);
	return r < 0 ? r : 0;
}
