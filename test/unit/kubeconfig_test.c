/* kubeconfig: parsing the current context, every refusal with its message,
 * base64, relative paths, insecure gating, file checks, in-cluster config. */
#include <errno.h>
#include <fcntl.h>
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

#include "kube/kubeconfig.h"
#include "lib/errbuf.h"

#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define KEY_B64                                                                                   \
	"LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlCZmFrZQotLS0tLUVORCBSU0EgUFJJVkFURSBLRVktLS" \
	"0tLQo="

/* One cluster "c", one user "u", one context "x": tests splice in the lines
 * they care about. */
static char *kc_text(const char *cluster_extra, const char *user_extra)
{
	char *s = NULL;

	assert_true(asprintf(&s,
			     "apiVersion: v1\n"
			     "kind: Config\n"
			     "current-context: x\n"
			     "contexts:\n"
			     "- name: x\n"
			     "  context: {cluster: c, user: u}\n"
			     "clusters:\n"
			     "- name: c\n"
			     "  cluster:\n"
			     "%s"
			     "users:\n"
			     "- name: u\n"
			     "  user:\n"
			     "%s",
			     cluster_extra, user_extra) > 0);
	return s;
}

static struct kubeconfig *parse_ok(const char *text, const char *base, unsigned flags)
{
	struct kubeconfig *c = NULL;
	struct errbuf err = { "" };
	int r = kubeconfig_parse(text, strlen(text), base, "test", flags, &c, &err);

	if (r < 0)
		fail_msg("parse failed (%d): %s\n%s", r, err.s, text);
	assert_non_null(c);
	return c;
}

static void assert_parse_fails(const char *text, unsigned flags, int want, const char *msg_part)
{
	struct kubeconfig *c = (struct kubeconfig *)0x1;
	struct errbuf err = { "" };
	int r = kubeconfig_parse(text, strlen(text), "/base", "test", flags, &c, &err);

	if (r != want)
		fail_msg("want %d got %d (%s) for:\n%s", want, r, err.s, text);
	if (!strstr(err.s, msg_part))
		fail_msg("error '%s' lacks '%s'", err.s, msg_part);
	assert_ptr_equal(c, (void *)0x1); /* *ret untouched */
}

static void assert_kc_fails(const char *cl, const char *us, unsigned flags, int want,
			    const char *msg_part)
{
	char *t = kc_text(cl, us);

	assert_parse_fails(t, flags, want, msg_part);
	free(t);
}

static void test_kubeconfig_parse_token_and_ca_data(void **st)
{
	char *t = kc_text("    server: https://api.example:6443\n"
			  "    certificate-authority-data: " CA_B64 "\n",
			  "    token: abc.def\n");
	struct kubeconfig *c = parse_ok(t, "/base", 0);

	assert_string_equal(c->server, "https://api.example:6443");
	assert_non_null(c->ca_pem);
	assert_true(c->ca_pem_len > 20);
	assert_memory_equal(c->ca_pem, "-----BEGIN CERTIFICATE-----\nMIIBfake\n", 37);
	assert_null(c->ca_file);
	assert_string_equal(c->token, "abc.def");
	assert_null(c->token_file);
	assert_false(c->insecure);
	assert_string_equal(c->namespace, "default");
	assert_string_equal(c->source, "test");
	kubeconfig_free(c);
	free(t);
}

static void test_kubeconfig_load_fixture_picks_current_context_and_resolves_paths(void **st)
{
	struct kubeconfig *c = NULL;
	struct errbuf err = { "" };

	assert_int_equal(kubeconfig_load("test/data/kube/kind.kubeconfig", 0, &c, &err), 0);
	assert_string_equal(c->server, "https://10.0.0.1:6443");
	assert_string_equal(c->ca_file, "test/data/kube/certs/ca.crt");
	assert_string_equal(c->token_file, "test/data/kube/secrets/token");
	assert_string_equal(c->namespace, "dra-system");
	assert_null(c->token);
	assert_null(c->cert_pem);
	assert_string_equal(c->source, "test/data/kube/kind.kubeconfig");
	kubeconfig_free(c);
}

static void test_kubeconfig_parse_client_cert_data_and_trailing_slash(void **st)
{
	const char *t = "current-context: kind-kind\n"
			"contexts: [{name: kind-kind, context: {cluster: k, user: k}}]\n"
			"clusters: [{name: k, cluster: {server: 'HTTPS://h:1///'}}]\n"
			"users: [{name: k, user: {client-certificate-data: " CA_B64
			", client-key-data: " KEY_B64 ", client-certificate: ignored.crt}}]\n";
	struct kubeconfig *c = parse_ok(t, "/etc", 0);

	assert_string_equal(c->server, "https://h:1");
	assert_non_null(c->cert_pem);
	assert_null(c->cert_file); /* data wins */
	assert_non_null(c->key_pem);
	assert_non_null(strstr(c->key_pem, "RSA PRIVATE KEY"));
	assert_null(c->token);
	kubeconfig_free(c);
}

static void test_kubeconfig_parse_relative_and_absolute_paths(void **st)
{
	char *t = kc_text("    server: https://h\n"
			  "    certificate-authority: ca/ca.pem\n",
			  "    tokenFile: /abs/token\n"
			  "    client-certificate: c.crt\n"
			  "    client-key: ../k.key\n");
	struct kubeconfig *c = parse_ok(t, "/home/me/.kube", 0);

	assert_string_equal(c->ca_file, "/home/me/.kube/ca/ca.pem");
	assert_string_equal(c->token_file, "/abs/token");
	assert_string_equal(c->cert_file, "/home/me/.kube/c.crt");
	assert_string_equal(c->key_file, "/home/me/.kube/../k.key");
	kubeconfig_free(c);
	c = parse_ok(t, NULL, 0);
	assert_string_equal(c->ca_file, "ca/ca.pem");
	kubeconfig_free(c);
	free(t);
}

static void test_kubeconfig_parse_anonymous_user_and_aliases(void **st)
{
	const char *t = "current-context: x\n"
			"srv: &s https://h:443\n"
			"contexts: [{name: x, context: {cluster: c, namespace: ns1}}]\n"
			"clusters: [{name: c, cluster: {server: *s}}]\n";
	struct kubeconfig *c = parse_ok(t, NULL, 0);

	assert_string_equal(c->server, "https://h:443");
	assert_string_equal(c->namespace, "ns1");
	assert_null(c->token);
	assert_null(c->token_file);
	kubeconfig_free(c);
}

static void test_kubeconfig_rejects_missing_keys_naming_them(void **st)
{
	assert_parse_fails("", 0, -EINVAL, "kubeconfig is empty");
	assert_parse_fails("- a\n- b\n", 0, -EINVAL, "top level is not a mapping");
	assert_parse_fails("kind: Config\n", 0, -EINVAL, "current-context is not set");
	assert_parse_fails("current-context: ''\n", 0, -EINVAL, "current-context is not set");
	assert_parse_fails("current-context: x\n", 0, -ENOENT,
			   "context \"x\" not found in contexts");
	assert_parse_fails("current-context: x\ncontexts: [{name: x}]\n", 0, -EINVAL,
			   "contexts[x].context is not set");
	assert_parse_fails("current-context: x\ncontexts: [{name: x, context: {user: u}}]\n", 0,
			   -EINVAL, "contexts[x].context.cluster is not set");
	assert_parse_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n", 0,
			   -ENOENT, "cluster \"c\" not found in clusters");
	assert_parse_fails("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
			   "clusters: [{name: c, cluster: {}}]\n",
			   0, -EINVAL, "clusters[c].cluster.server is not set");
	assert_parse_fails("current-context: x\n"
			   "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			   "clusters: [{name: c, cluster: {server: 'https://h'}}]\n",
			   0, -ENOENT, "user \"u\" not found in users");
	assert_parse_fails("current-context: x\ncontexts: {x: 1}\n", 0, -EINVAL,
			   "contexts: expected a list");
	assert_parse_fails("current-context: [a]\n", 0, -EINVAL,
			   "kubeconfig.current-context: expected a string");
}

static void test_kubeconfig_rejects_bad_server(void **st)
{
	assert_kc_fails("    server: ftp://h\n", "    token: t\n", 0, -EINVAL,
			"clusters[c].cluster.server: must start with https://");
	assert_kc_fails("    server: h:6443\n", "    token: t\n", 0, -EINVAL,
			"must start with https://");
	assert_kc_fails("    server: https://\n", "    token: t\n", 0, -EINVAL,
			"server: not a valid URL");
	assert_kc_fails("    server: https://user:pw@h\n", "    token: t\n", 0, -EINVAL,
			"not a valid URL");
	assert_kc_fails("    server: https://h/a?b=c\n", "    token: t\n", 0, -EINVAL,
			"not a valid URL");
	assert_kc_fails("    server: \"https://h\\nX-Evil: 1\"\n", "    token: t\n", 0, -EINVAL,
			"not a valid URL");
}

static void test_kubeconfig_insecure_refused_unless_allowed(void **st)
{
	char *t = kc_text("    server: https://h\n    insecure-skip-tls-verify: true\n",
			  "    token: t\n");
	char *h = kc_text("    server: http://h:8080\n", "    token: t\n");
	struct kubeconfig *c;

	assert_parse_fails(t, 0, -EPERM,
			   "clusters[c].cluster.insecure-skip-tls-verify is true: refused without "
			   "--allow-insecure-kubeconfig");
	assert_parse_fails(h, 0, -EPERM, "server is http:// (plain text): refused without");
	c = parse_ok(t, NULL, KUBECONFIG_ALLOW_INSECURE);
	assert_true(c->insecure);
	kubeconfig_free(c);
	c = parse_ok(h, NULL, KUBECONFIG_ALLOW_INSECURE);
	assert_true(c->insecure);
	assert_string_equal(c->server, "http://h:8080");
	kubeconfig_free(c);
	free(t);
	free(h);

	/* false stays verified without any flag */
	t = kc_text("    server: https://h\n    insecure-skip-tls-verify: false\n", "    token: t\n");
	c = parse_ok(t, NULL, 0);
	assert_false(c->insecure);
	kubeconfig_free(c);
	free(t);
}

static void test_kubeconfig_rejects_ca_with_insecure_and_bad_bools(void **st)
{
	assert_kc_fails("    server: https://h\n    insecure-skip-tls-verify: true\n"
			"    certificate-authority: ca.crt\n",
			"    token: t\n", KUBECONFIG_ALLOW_INSECURE, -EINVAL,
			"together with insecure-skip-tls-verify is not allowed");
	assert_kc_fails("    server: https://h\n    insecure-skip-tls-verify: yes\n",
			"    token: t\n", KUBECONFIG_ALLOW_INSECURE, -EINVAL,
			"insecure-skip-tls-verify: expected true or false");
	assert_kc_fails("    server: https://h\n    insecure-skip-tls-verify: \"true\"\n",
			"    token: t\n", KUBECONFIG_ALLOW_INSECURE, -EINVAL,
			"expected true or false");
}

static void test_kubeconfig_rejects_bad_base64_with_offset(void **st)
{
	assert_kc_fails("    server: https://h\n    certificate-authority-data: LS0t*S1C\n",
			"    token: t\n", 0, -EBADMSG,
			"clusters[c].cluster.certificate-authority-data: invalid base64 at byte 4");
	assert_kc_fails("    server: https://h\n    certificate-authority-data: LS0tL\n",
			"    token: t\n", 0, -EBADMSG, "invalid base64 at byte 5");
	assert_kc_fails("    server: https://h\n    certificate-authority-data: LS0=LS0t\n",
			"    token: t\n", 0, -EBADMSG, "invalid base64 at byte 4");
	assert_kc_fails("    server: https://h\n    certificate-authority-data: L===\n",
			"    token: t\n", 0, -EBADMSG, "invalid base64 at byte 1");
	assert_kc_fails("    server: https://h\n    certificate-authority-data: LS0\n",
			"    token: t\n", 0, -EBADMSG, "invalid base64 at byte 3");
	assert_kc_fails("    server: https://h\n", "    client-key-data: aGVsbG8=\n", 0, -EINVAL,
			"users[u].user.client-key-data: decoded data is not PEM");
	assert_kc_fails("    server: https://h\n    certificate-authority-data: aGVsbG8=\n",
			"    token: t\n", 0, -EINVAL, "not PEM (no \"-----BEGIN CERTIFICATE-----\")");
}

static void test_kubeconfig_base64_accepts_line_breaks_and_padding(void **st)
{
	/* "QUJD" = ABC, "QUI=" = AB, "QQ==" = A; wrapped lines like `base64` emits */
	char *t = kc_text("    server: https://h\n"
			  "    certificate-authority-data: \"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\\n"
			  "Cg==\"\n",
			  "    token: t\n");
	struct kubeconfig *c = parse_ok(t, NULL, 0);

	assert_int_equal(c->ca_pem_len, 28);
	assert_memory_equal(c->ca_pem, "-----BEGIN CERTIFICATE-----\n", 28);
	kubeconfig_free(c);
	free(t);
}

static void test_kubeconfig_rejects_half_client_cert(void **st)
{
	assert_kc_fails("    server: https://h\n", "    client-certificate: c.crt\n", 0, -EINVAL,
			"users[u].user: client-certificate(-data) is set but client-key(-data) is "
			"not");
	assert_kc_fails("    server: https://h\n", "    client-key-data: " KEY_B64 "\n", 0, -EINVAL,
			"client-key(-data) is set but client-certificate(-data) is not");
}

static void test_kubeconfig_rejects_unsupported_auth(void **st)
{
	assert_kc_fails("    server: https://h\n",
			"    exec:\n      command: aws\n      apiVersion: "
			"client.authentication.k8s.io/v1\n",
			0, -EOPNOTSUPP, "users[u].user.exec is not supported");
	assert_kc_fails("    server: https://h\n", "    auth-provider: {name: gcp}\n", 0,
			-EOPNOTSUPP, "users[u].user.auth-provider is not supported");
	assert_kc_fails("    server: https://h\n", "    username: a\n    password: b\n", 0,
			-EOPNOTSUPP, "users[u].user.username is not supported");
	assert_kc_fails("    server: https://h\n    tls-server-name: api\n", "    token: t\n", 0,
			-EOPNOTSUPP, "clusters[c].cluster.tls-server-name is not supported");
}

static void test_kubeconfig_proxy_url_accepted_and_checked(void **st)
{
	char *t = kc_text("    server: https://h\n    proxy-url: HTTP://u:pw@proxy.corp:3128\n",
			  "    token: t\n");
	struct kubeconfig *c = parse_ok(t, NULL, 0), *d = NULL;

	assert_string_equal(c->proxy_url, "http://u:pw@proxy.corp:3128"); /* scheme lower-cased */
	assert_int_equal(kubeconfig_dup(c, &d), 0);
	assert_string_equal(d->proxy_url, c->proxy_url);
	kubeconfig_free(d);
	kubeconfig_free(c);
	free(t);
	t = kc_text("    server: https://h\n    proxy-url: socks5://[::1]:1080\n", "    token: t\n");
	c = parse_ok(t, NULL, 0);
	assert_string_equal(c->proxy_url, "socks5://[::1]:1080");
	kubeconfig_free(c);
	free(t);
	t = kc_text("    server: https://h\n", "    token: t\n");
	c = parse_ok(t, NULL, 0);
	assert_null(c->proxy_url); /* none: the environment decides */
	kubeconfig_free(c);
	free(t);

	/* client-go's schemes only; the URL (it may hold a password) is never echoed */
	assert_kc_fails("    server: https://h\n    proxy-url: ftp://u:s3cret@p:21\n",
			"    token: t\n", 0, -EINVAL,
			"clusters[c].cluster.proxy-url: unsupported scheme, must be http, https or "
			"socks5");
	assert_kc_fails("    server: https://h\n    proxy-url: p.corp:3128\n", "    token: t\n", 0,
			-EINVAL, "proxy-url: unsupported scheme");
	assert_kc_fails("    server: https://h\n    proxy-url: http://u:s3cret@\n", "    token: t\n",
			0, -EINVAL, "proxy-url: not a valid URL");
	assert_kc_fails("    server: https://h\n    proxy-url: \"http://p\\r\\nX: 1\"\n",
			"    token: t\n", 0, -EINVAL, "proxy-url: not a valid URL");
	assert_kc_fails("    server: https://h\n    proxy-url: http://:3128\n", "    token: t\n", 0,
			-EINVAL, "proxy-url: not a valid URL");
	assert_kc_fails("    server: https://h\n    proxy-url: [a]\n", "    token: t\n", 0, -EINVAL,
			"proxy-url: expected a string");
}

static void test_kubeconfig_rejects_duplicates(void **st)
{
	assert_kc_fails("    server: https://h\n    server: https://evil\n", "    token: t\n", 0,
			-EINVAL, "clusters[c].cluster: duplicate key \"server\"");
	assert_parse_fails("current-context: x\ncurrent-context: y\n", 0, -EINVAL,
			   "duplicate key \"current-context\"");
	assert_parse_fails("current-context: x\n"
			   "contexts: [{name: x, context: {cluster: c}}, {name: x, context: {}}]\n",
			   0, -EINVAL, "contexts: two entries named \"x\"");
}

static void test_kubeconfig_token_control_char_rejected_without_echo(void **st)
{
	struct kubeconfig *c = NULL;
	struct errbuf err = { "" };
	char *t = kc_text("    server: https://h\n", "    token: \"s3cr3t\\r\\nX: y\"\n");

	assert_int_equal(kubeconfig_parse(t, strlen(t), NULL, NULL, 0, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "users[u].user.token: contains a control character"));
	assert_null(strstr(err.s, "s3cr3t"));
	free(t);
	t = kc_text("    server: https://h\n", "    token: \"a\\0b\"\n");
	assert_int_equal(kubeconfig_parse(t, strlen(t), NULL, NULL, 0, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "token: contains a NUL byte"));
	free(t);
}

static void test_kubeconfig_yaml_syntax_error_names_line(void **st)
{
	assert_parse_fails("current-context: x\ncontexts: [\n  a: b: c\n", 0, -EINVAL,
			   "YAML error at line");
	assert_parse_fails("a: \"unterminated\n", 0, -EINVAL, "YAML error at line");
	assert_parse_fails("x: *nope\n", 0, -EINVAL, "YAML error");
}

static void test_kubeconfig_size_cap(void **st)
{
	size_t n = KUBECONFIG_MAX_SIZE + 1;
	char *big = malloc(n);
	struct kubeconfig *c = NULL;
	struct errbuf err = { "" };

	memset(big, '#', n);
	assert_int_equal(kubeconfig_parse(big, n, NULL, NULL, 0, &c, &err), -E2BIG);
	assert_non_null(strstr(err.s, "larger than 4194304 bytes"));
	free(big);
}

/* ---- files: load, token, in-cluster --------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *name, const char *content)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int setup_tmp(void **st)
{
	strcpy(tmpdir, "/tmp/kubeconfig_test.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **st)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_kubeconfig_load_checks_named_files(void **st)
{
	char path[256];
	struct errbuf err = { "" };
	struct kubeconfig *c = NULL;
	char *t;

	snprintf(path, sizeof(path), "%s/config", tmpdir);
	t = kc_text("    server: https://h\n    certificate-authority: ca.crt\n",
		    "    tokenFile: tok\n");
	write_file("config", t);
	free(t);
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -ENOENT);
	assert_non_null(strstr(err.s, "certificate-authority "));
	assert_non_null(strstr(err.s, "/ca.crt: No such file or directory"));

	write_file("ca.crt", "-----BEGIN CERTIFICATE-----\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -ENOENT);
	assert_non_null(strstr(err.s, "tokenFile "));

	write_file("tok", " \n\t\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -ENODATA);
	assert_non_null(strstr(err.s, "/tok: empty"));

	write_file("tok", "tok-1\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), 0);
	assert_non_null(strstr(c->ca_file, tmpdir));
	kubeconfig_free(c);

	assert_int_equal(kubeconfig_load("/nonexistent/kubeconfig", 0, &c, &err), -ENOENT);
	assert_string_equal(err.s, "kubeconfig /nonexistent/kubeconfig: No such file or directory");
	assert_int_equal(kubeconfig_load(tmpdir, 0, &c, &err), -EISDIR);
}

static void test_kubeconfig_load_checks_client_cert_files(void **st)
{
	char path[256];
	struct errbuf err = { "" };
	struct kubeconfig *c = NULL;
	char *t;

	snprintf(path, sizeof(path), "%s/config", tmpdir);
	t = kc_text("    server: https://h\n",
		    "    client-certificate: c.pem\n    client-key: k.pem\n");
	write_file("config", t);
	free(t);
	write_file("c.pem", "not a certificate\n");
	write_file("k.pem", "-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -EBADMSG);
	assert_non_null(strstr(err.s, "client-certificate "));
	assert_non_null(strstr(err.s, "c.pem: no PEM \"CERTIFICATE\" block"));
	write_file("c.pem", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), 0);
	assert_non_null(strstr(c->cert_file, "/c.pem"));
	assert_non_null(strstr(c->key_file, "/k.pem"));
	kubeconfig_free(c);
	write_file("k.pem", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -EBADMSG);
	assert_non_null(strstr(err.s, "client-key "));
}

static void test_kubeconfig_read_pem_checks_marker_and_size(void **st)
{
	char path[256], link[256], *pem = NULL, *big;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/p", tmpdir);
	write_file("p", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
	assert_int_equal(kubeconfig_read_pem(path, "CERTIFICATE", &pem, &len), 0);
	assert_int_equal(len, strlen(pem));
	assert_non_null(strstr(pem, "MIIB"));
	pem = kubeconfig_pem_free(pem, len);
	assert_null(pem);
	/* followed through a symlink, as the kubelet's kubelet-client-current.pem */
	snprintf(link, sizeof(link), "%s/current.pem", tmpdir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(kubeconfig_read_pem(link, "CERTIFICATE", &pem, &len), 0);
	assert_non_null(strstr(pem, "MIIB"));
	pem = kubeconfig_pem_free(pem, len);
	/* a file caught half-written: the end without the start */
	write_file("p", "MIIB\n-----END CERTIFICATE-----\n");
	assert_int_equal(kubeconfig_read_pem(path, "CERTIFICATE", &pem, &len), -EBADMSG);
	assert_int_equal(kubeconfig_read_pem(path, "PRIVATE KEY", &pem, &len), -EBADMSG);
	write_file("p", "");
	assert_int_equal(kubeconfig_read_pem(path, "CERTIFICATE", &pem, &len), -EBADMSG);
	big = malloc(KUBECONFIG_PEM_MAX + 2);
	memset(big, 'A', KUBECONFIG_PEM_MAX + 1);
	big[KUBECONFIG_PEM_MAX + 1] = 0;
	write_file("p", big);
	free(big);
	assert_int_equal(kubeconfig_read_pem(path, "CERTIFICATE", &pem, &len), -E2BIG);
	assert_int_equal(kubeconfig_read_pem("/nonexistent/p", "CERTIFICATE", &pem, &len), -ENOENT);
	assert_int_equal(kubeconfig_read_pem(tmpdir, "CERTIFICATE", &pem, &len), -EISDIR);
	assert_null(pem);
	assert_null(kubeconfig_pem_free(NULL, 0));
}

static void test_kubeconfig_load_refuses_oversized_file(void **st)
{
	char path[256];
	struct errbuf err = { "" };
	struct kubeconfig *c = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/big", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fseek(f, KUBECONFIG_MAX_SIZE, SEEK_SET), 0);
	fputc('x', f);
	fclose(f);
	assert_int_equal(kubeconfig_load(path, 0, &c, &err), -E2BIG);
	assert_non_null(strstr(err.s, "larger than"));
}

static void test_kubeconfig_read_token_trims_and_validates(void **st)
{
	char path[256], *tok = NULL;
	char *big;

	snprintf(path, sizeof(path), "%s/t", tmpdir);
	write_file("t", "\n  eyJhbGciOi.x-y_z  \r\n");
	assert_int_equal(kubeconfig_read_token(path, &tok), 0);
	assert_string_equal(tok, "eyJhbGciOi.x-y_z");
	tok = kubeconfig_token_free(tok);
	assert_null(tok);

	write_file("t", "ab\ncd\n");
	assert_int_equal(kubeconfig_read_token(path, &tok), -EBADMSG);
	write_file("t", "");
	assert_int_equal(kubeconfig_read_token(path, &tok), -ENODATA);
	big = malloc(KUBECONFIG_TOKEN_MAX + 2);
	memset(big, 'a', KUBECONFIG_TOKEN_MAX + 1);
	big[KUBECONFIG_TOKEN_MAX + 1] = 0;
	write_file("t", big);
	free(big);
	assert_int_equal(kubeconfig_read_token(path, &tok), -E2BIG);
	assert_null(tok);

	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(kubeconfig_read_token(path, &tok), -EINVAL); /* and did not block */
	assert_int_equal(kubeconfig_read_token("/nonexistent", &tok), -ENOENT);
}

static void test_kubeconfig_in_cluster(void **st)
{
	char sa[128];
	struct errbuf err = { "" };
	struct kubeconfig *c = NULL;

	snprintf(sa, sizeof(sa), "%s/sa", tmpdir);
	assert_int_equal(mkdir(sa, 0700), 0);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("POD_NAMESPACE");
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), -ENOENT);
	assert_non_null(strstr(err.s, "not running in a cluster"));

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), -ENOENT);
	setenv("KUBERNETES_SERVICE_PORT", "443x", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "KUBERNETES_SERVICE_PORT: not a port"));
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), -ENOENT);
	assert_non_null(strstr(err.s, "service account token "));

	write_file("sa/token", "sa-token\n");
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), 0);
	assert_string_equal(c->server, "https://10.96.0.1:443");
	assert_null(c->ca_file); /* unreadable: system roots, warned */
	assert_string_equal(c->namespace, "default");
	assert_string_equal(c->source, "in-cluster");
	assert_non_null(strstr(c->token_file, "/sa/token"));
	assert_false(c->insecure);
	c = kubeconfig_free(c);

	write_file("sa/ca.crt", "-----BEGIN CERTIFICATE-----\n");
	write_file("sa/namespace", "dra-system\n");
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), 0);
	assert_string_equal(c->server, "https://[fd00:10:96::1]:443");
	assert_non_null(strstr(c->ca_file, "/sa/ca.crt"));
	assert_string_equal(c->namespace, "dra-system");
	c = kubeconfig_free(c);

	setenv("POD_NAMESPACE", "from-env", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), 0);
	assert_string_equal(c->namespace, "from-env");
	c = kubeconfig_free(c);

	setenv("KUBERNETES_SERVICE_HOST", "evil/path@x", 1);
	assert_int_equal(kubeconfig_in_cluster(sa, 0, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "KUBERNETES_SERVICE_HOST"));
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	unsetenv("POD_NAMESPACE");
}

static void test_kubeconfig_dup_is_deep(void **st)
{
	char *t = kc_text("    server: https://h\n    certificate-authority-data: " CA_B64 "\n",
			  "    token: t0k\n    tokenFile: /f\n");
	struct kubeconfig *c = parse_ok(t, NULL, 0), *d = NULL;

	assert_int_equal(kubeconfig_dup(c, &d), 0);
	assert_ptr_not_equal(d->server, c->server);
	assert_string_equal(d->server, c->server);
	assert_int_equal(d->ca_pem_len, c->ca_pem_len);
	assert_memory_equal(d->ca_pem, c->ca_pem, c->ca_pem_len);
	assert_string_equal(d->token, "t0k");
	assert_string_equal(d->token_file, "/f");
	assert_null(d->key_pem);
	kubeconfig_free(c);
	kubeconfig_free(d);
	assert_null(kubeconfig_free(NULL));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kubeconfig_parse_token_and_ca_data),
		cmocka_unit_test(test_kubeconfig_load_fixture_picks_current_context_and_resolves_paths),
		cmocka_unit_test(test_kubeconfig_parse_client_cert_data_and_trailing_slash),
		cmocka_unit_test(test_kubeconfig_parse_relative_and_absolute_paths),
		cmocka_unit_test(test_kubeconfig_parse_anonymous_user_and_aliases),
		cmocka_unit_test(test_kubeconfig_rejects_missing_keys_naming_them),
		cmocka_unit_test(test_kubeconfig_rejects_bad_server),
		cmocka_unit_test(test_kubeconfig_insecure_refused_unless_allowed),
		cmocka_unit_test(test_kubeconfig_rejects_ca_with_insecure_and_bad_bools),
		cmocka_unit_test(test_kubeconfig_rejects_bad_base64_with_offset),
		cmocka_unit_test(test_kubeconfig_base64_accepts_line_breaks_and_padding),
		cmocka_unit_test(test_kubeconfig_rejects_half_client_cert),
		cmocka_unit_test(test_kubeconfig_rejects_unsupported_auth),
		cmocka_unit_test(test_kubeconfig_proxy_url_accepted_and_checked),
		cmocka_unit_test(test_kubeconfig_rejects_duplicates),
		cmocka_unit_test(test_kubeconfig_token_control_char_rejected_without_echo),
		cmocka_unit_test(test_kubeconfig_yaml_syntax_error_names_line),
		cmocka_unit_test(test_kubeconfig_size_cap),
		cmocka_unit_test_setup_teardown(test_kubeconfig_load_checks_named_files, setup_tmp,
						teardown_tmp),
		cmocka_unit_test_setup_teardown(test_kubeconfig_load_checks_client_cert_files,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_kubeconfig_read_pem_checks_marker_and_size,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_kubeconfig_load_refuses_oversized_file,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_kubeconfig_read_token_trims_and_validates,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(test_kubeconfig_in_cluster, setup_tmp, teardown_tmp),
		cmocka_unit_test(test_kubeconfig_dup_is_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
