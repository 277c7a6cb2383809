/* metadata: the DeviceMetadata file, its CDI spec (both container paths),
 * removal, the sweep of what a crash left, names refused before they reach
 * a path. Files go to a temporary directory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/metadata.h"
#include "lib/errbuf.h"

#define UID "6f0c1c4e-0000-4000-8000-000000000001"

static char tmp[] = "/dev/shm/metadata-test.XXXXXX";
static char data_dir[128], cdi_dir[128];
static struct metadata_opts mo;

static struct json_object *load(const char *path)
{
	struct json_object *o = json_object_from_file(path);

	if (!o)
		fail_msg("%s does not parse", path);
	return o;
}

static const char *s(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(o, k, &v))
		fail_msg("no %s", k);
	return json_object_get_string(v);
}

static struct json_object *m(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;

	if (!json_object_object_get_ex(o, k, &v))
		fail_msg("no %s", k);
	return v;
}

static bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static bool exists(const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return access(path, F_OK) == 0;
}

/* A claim "db" in "shop" with requests cpus (2 grouped devices) and
 * extra/fast (1). */
static void claim(struct metadata_claim *c, struct json_object *attrs, const char *pcn)
{
	memset(c, 0, sizeof(*c));
	c->ns = "shop";
	c->name = "db";
	c->uid = UID;
	c->pod_claim_name = pcn;
	c->n = 2;
	c->requests[0].name = "cpus";
	c->requests[0].n = 2;
	c->requests[0].devices[0] = (struct metadata_device){ "cpudevnuma000", attrs, 4 };
	c->requests[0].devices[1] = (struct metadata_device){ "cpudevnuma001", NULL, 2 };
	c->requests[1].name = "extra/fast";
	c->requests[1].n = 1;
	c->requests[1].devices[0] = (struct metadata_device){ "cpudevnuma001", attrs, -1 };
}

static int setup(void **st)
{
	if (!mkdtemp(tmp))
		return -1;
	(void)snprintf(data_dir, sizeof(data_dir), "%s/plugins/dra.cpu", tmp);
	(void)snprintf(cdi_dir, sizeof(cdi_dir), "%s/cdi", tmp);
	mo = (struct metadata_opts){ data_dir, cdi_dir, "dra.cpu", "node-1" };
	return 0;
}

static int teardown(void **st)
{
	char cmd[200];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_metadata_file_holds_the_devices_and_their_attributes(void **st)
{
	struct json_object *attrs = json_tokener_parse(
		"{\"resource.kubernetes.io/numaNode\":{\"int\":0},\"dra.cpu/smtEnabled\":{\"bool\":true}}");
	struct metadata_claim c;
	struct errbuf eb = { "" };
	struct json_object *f, *dev, *a;
	char path[512], id[256];

	claim(&c, attrs, NULL);
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	(void)snprintf(path, sizeof(path), "%s/dra-device-metadata/%s/cpus/metadata.json", data_dir,
		       UID);
	f = load(path);
	assert_string_equal(s(f, "kind"), "DeviceMetadata");
	assert_string_equal(s(f, "apiVersion"), "metadata.resource.k8s.io/v1beta1");
	assert_string_equal(s(m(f, "metadata"), "name"), "db");
	assert_string_equal(s(m(f, "metadata"), "namespace"), "shop");
	assert_string_equal(s(m(f, "metadata"), "uid"), UID);
	assert_int_equal(json_object_get_int(m(m(f, "metadata"), "generation")), 1);
	assert_false(json_object_object_get_ex(f, "podClaimName", NULL));
	assert_int_equal(json_object_array_length(m(f, "requests")), 1);
	assert_string_equal(s(json_object_array_get_idx(m(f, "requests"), 0), "name"), "cpus");
	dev = json_object_array_get_idx(m(json_object_array_get_idx(m(f, "requests"), 0),
					  "devices"), 0);
	assert_string_equal(s(dev, "driver"), "dra.cpu");
	assert_string_equal(s(dev, "pool"), "node-1");
	assert_string_equal(s(dev, "name"), "cpudevnuma000");
	a = m(dev, "attributes");
	assert_int_equal(json_object_object_length(a), 3);
	assert_int_equal(json_object_get_int(m(m(a, "resource.kubernetes.io/numaNode"), "int")), 0);
	assert_int_equal(json_object_get_int(m(m(a, "dra.cpu/allocatedNumCPUs"), "int")), 4);
	/* the caller's attributes are not changed */
	assert_int_equal(json_object_object_length(attrs), 2);
	json_object_put(f);
	/* a request with a subrequest: its base request names the file, the
	 * full name is inside; no allocatedNumCPUs for an individual device */
	(void)snprintf(path, sizeof(path), "%s/dra-device-metadata/%s/extra/metadata.json",
		       data_dir, UID);
	f = load(path);
	assert_string_equal(s(json_object_array_get_idx(m(f, "requests"), 0), "name"),
			    "extra/fast");
	dev = json_object_array_get_idx(m(json_object_array_get_idx(m(f, "requests"), 0),
					  "devices"), 0);
	assert_false(json_object_object_get_ex(m(dev, "attributes"), "dra.cpu/allocatedNumCPUs",
					       NULL));
	json_object_put(f);
	metadata_cdi_id(UID, "extra/fast", id, sizeof(id));
	assert_string_equal(id, "dra.cpu/metadata=" UID "_extra");
	json_object_put(attrs);
}

static void test_metadata_cdi_spec_mounts_the_file_read_only(void **st)
{
	struct metadata_claim c;
	struct errbuf eb = { "" };
	struct json_object *spec, *dev, *mounts, *mt;
	char path[512], host[512];
	struct stat sb;

	claim(&c, NULL, "db-claim");
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	(void)snprintf(path, sizeof(path), "%s/dra.cpu_metadata_%s_cpus.json", cdi_dir, UID);
	spec = load(path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0644);
	assert_string_equal(s(spec, "cdiVersion"), "0.5.0");
	assert_string_equal(s(spec, "kind"), "dra.cpu/metadata");
	dev = json_object_array_get_idx(m(spec, "devices"), 0);
	assert_string_equal(s(dev, "name"), UID "_cpus");
	mounts = m(m(dev, "containerEdits"), "mounts");
	assert_int_equal(json_object_array_length(mounts), 2);
	(void)snprintf(host, sizeof(host), "%s/dra-device-metadata/%s/cpus/metadata.json",
		       data_dir, UID);
	mt = json_object_array_get_idx(mounts, 0);
	assert_string_equal(s(mt, "hostPath"), host);
	assert_string_equal(s(mt, "containerPath"), "/var/run/kubernetes.io/dra-device-attributes/"
						    "resourceclaims/db/cpus/dra.cpu-metadata.json");
	assert_string_equal(json_object_to_json_string(m(mt, "options")), "[ \"ro\", \"bind\" ]");
	mt = json_object_array_get_idx(mounts, 1);
	assert_string_equal(s(mt, "containerPath"),
			    "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/"
			    "db-claim/cpus/dra.cpu-metadata.json");
	assert_int_equal(stat(host, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0644);
	json_object_put(spec);
	/* the file says which pod claim too */
	spec = load(host);
	assert_string_equal(s(spec, "podClaimName"), "db-claim");
	json_object_put(spec);
	/* only the resourceclaims form without a template */
	claim(&c, NULL, "");
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	spec = load(path);
	dev = json_object_array_get_idx(m(spec, "devices"), 0);
	assert_int_equal(json_object_array_length(m(m(dev, "containerEdits"), "mounts")), 1);
	json_object_put(spec);
}

static void test_metadata_remove_and_sweep(void **st)
{
	static const char *const other = "6f0c1c4e-0000-4000-8000-0000000000ff";
	struct metadata_claim c;
	struct errbuf eb = { "" };
	char tmpfile[512];
	FILE *f;

	claim(&c, NULL, NULL);
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	c.uid = other;
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	assert_true(exists("%s/dra.cpu_metadata_%s_extra.json", cdi_dir, other));
	/* a crash left the temp file of a write: it goes too */
	(void)snprintf(tmpfile, sizeof(tmpfile), "%s/dra-device-metadata/%s/cpus/.metadata.json.tmp",
		       data_dir, UID);
	f = fopen(tmpfile, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(metadata_remove(&mo, UID, &eb), 1);
	assert_false(exists("%s/dra.cpu_metadata_%s_cpus.json", cdi_dir, UID));
	assert_false(exists("%s/dra-device-metadata/%s", data_dir, UID));
	assert_true(exists("%s/dra.cpu_metadata_%s_cpus.json", cdi_dir, other));
	assert_int_equal(metadata_remove(&mo, UID, &eb), 0); /* nothing left: fine */
	assert_int_equal(metadata_remove(&mo, "../../etc", &eb), 0); /* never ours */
}

static bool only_other(void *ud, const char *uid)
{
	return !strcmp(uid, ud);
}

static void test_metadata_sweep_keeps_prepared_claims_only(void **st)
{
	static const char *const kept = "6f0c1c4e-0000-4000-8000-0000000000aa";
	static const char *const gone[] = { "6f0c1c4e-0000-4000-8000-0000000000bb",
					    "6f0c1c4e-0000-4000-8000-0000000000cc" };
	struct metadata_claim c;
	struct errbuf eb = { "" };
	char path[512];

	(void)snprintf(path, sizeof(path), "rm -rf %s %s", data_dir, cdi_dir);
	assert_int_equal(system(path), 0);
	claim(&c, NULL, NULL);
	c.uid = kept;
	assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	for (int i = 0; i < 2; i++) {
		c.uid = gone[i];
		assert_int_equal(metadata_write(&mo, &c, &eb), 0);
	}
	/* a spec whose files went, and files whose spec went */
	(void)snprintf(path, sizeof(path), "rm -rf %s/dra-device-metadata/%s", data_dir, gone[0]);
	assert_int_equal(system(path), 0);
	(void)snprintf(path, sizeof(path), "%s/dra.cpu_metadata_%s_cpus.json", cdi_dir, gone[1]);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(metadata_sweep(&mo, only_other, (void *)kept), 2);
	assert_true(exists("%s/dra.cpu_metadata_%s_cpus.json", cdi_dir, kept));
	assert_true(exists("%s/dra-device-metadata/%s/cpus/metadata.json", data_dir, kept));
	for (int i = 0; i < 2; i++) {
		assert_false(exists("%s/dra.cpu_metadata_%s_extra.json", cdi_dir, gone[i]));
		assert_false(exists("%s/dra-device-metadata/%s", data_dir, gone[i]));
	}
	assert_int_equal(metadata_sweep(&mo, only_other, (void *)kept), 0);
}

/* A link planted below the metadata directory, as a claim's directory or
 * inside one: the sweep removes the link, never what it points to. */
static void test_metadata_sweep_never_follows_a_planted_link(void **st)
{
	static const char *const linked = "6f0c1c4e-0000-4000-8000-0000000000dd";
	static const char *const holder = "6f0c1c4e-0000-4000-8000-0000000000ee";
	char path[1200], victim[256], target[512];
	int r;

	(void)snprintf(path, sizeof(path), "rm -rf %s %s", data_dir, cdi_dir);
	assert_int_equal(system(path), 0);
	(void)snprintf(victim, sizeof(victim), "%s/victim", tmp);
	(void)snprintf(path, sizeof(path),
		       "mkdir -p %s/sub %s/dra-device-metadata/%s && echo x > %s/sub/file && "
		       "echo y > %s/top",
		       victim, data_dir, holder, victim, victim);
	assert_int_equal(system(path), 0);
	/* the claim's directory itself a link to the victim */
	(void)snprintf(path, sizeof(path), "%s/dra-device-metadata/%s", data_dir, linked);
	assert_int_equal(symlink(victim, path), 0);
	/* a request directory inside a real one a link to the victim's sub */
	(void)snprintf(path, sizeof(path), "%s/dra-device-metadata/%s/cpus", data_dir, holder);
	(void)snprintf(target, sizeof(target), "%s/sub", victim);
	assert_int_equal(symlink(target, path), 0);
	r = metadata_sweep(&mo, only_other, (void *)"none");
	assert_true(exists("%s/sub/file", victim));
	assert_true(exists("%s/top", victim));
	assert_int_equal(r, 2);
	assert_false(exists("%s/dra-device-metadata/%s", data_dir, linked));
	assert_false(exists("%s/dra-device-metadata/%s", data_dir, holder));
	(void)snprintf(path, sizeof(path), "rm -rf %s", victim);
	assert_int_equal(system(path), 0);
}

static void test_metadata_names_that_are_no_safe_path_are_refused(void **st)
{
	static const struct {
		const char *name, *pcn, *req, *uid, *want;
	} bad[] = {
		{ "../x", NULL, "cpus", UID, "claim name" },
		{ "db", "a/b", "cpus", UID, "pod-claim-name" },
		{ "db", "..", "cpus", UID, "pod-claim-name" },
		{ "db", NULL, "../cpus", UID, "request ../cpus" },
		{ "db", NULL, "Cpus", UID, "request Cpus" },
		{ "db", NULL, "cpus", "a/b", "uid" },
	};
	struct metadata_claim c;
	struct errbuf eb = { "" };
	char path[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		claim(&c, NULL, bad[i].pcn);
		c.name = bad[i].name;
		c.requests[0].name = bad[i].req;
		c.uid = bad[i].uid;
		eb.s[0] = 0;
		assert_int_equal(metadata_write(&mo, &c, &eb), -EINVAL);
		if (!strstr(eb.s, bad[i].want))
			fail_msg("case %zu: '%s' lacks '%s'", i, eb.s, bad[i].want);
	}
	/* a write that fails half way leaves nothing: the CDI dir is a file */
	(void)snprintf(path, sizeof(path), "%s/notadir", tmp);
	fclose(fopen(path, "w"));
	mo.cdi_dir = path;
	claim(&c, NULL, NULL);
	c.uid = "6f0c1c4e-0000-4000-8000-0000000000dd";
	assert_true(metadata_write(&mo, &c, &eb) < 0);
	mo.cdi_dir = cdi_dir;
	assert_false(exists("%s/dra-device-metadata/%s", data_dir, c.uid));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metadata_file_holds_the_devices_and_their_attributes),
		cmocka_unit_test(test_metadata_cdi_spec_mounts_the_file_read_only),
		cmocka_unit_test(test_metadata_remove_and_sweep),
		cmocka_unit_test(test_metadata_sweep_keeps_prepared_claims_only),
		cmocka_unit_test(test_metadata_sweep_never_follows_a_planted_link),
		cmocka_unit_test(test_metadata_names_that_are_no_safe_path_are_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
