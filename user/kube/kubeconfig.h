/* kubeconfig: where the API server is and how to authenticate to it, from a
 * kubeconfig file (--kubeconfig) or from the in-cluster service account.
 *
 * A struct kubeconfig is the resolved current context only: one server, its
 * trust anchor, one set of credentials. Paths are absolute or relative to the
 * process's cwd (a kubeconfig's relative paths are resolved against the
 * kubeconfig's directory at load time, as kubectl does). Decoded *-data blobs
 * are kept in memory; key material and tokens are wiped on free.
 *
 * Safety rules, enforced here so no caller can forget them:
 *   - TLS verification is on unless the kubeconfig says
 *     insecure-skip-tls-verify: true AND the caller passed KUBECONFIG_ALLOW_INSECURE
 *     (--allow-insecure-kubeconfig). The same flag is needed for an http:// server.
 *   - a CA together with insecure-skip-tls-verify is refused (client-go rule).
 *   - auth methods we cannot honour (exec, auth-provider, basic auth) are
 *     errors, never silently dropped.
 *   - proxy-url: http, https or socks5 only (client-go's rule); it may carry
 *     credentials, so it is never logged either.
 *   - a token is never logged, and never in an error message.
 *
 * Errors: -errno plus one line of text in a struct errbuf (lib/errbuf.h; NULL:
 * not wanted) naming the key that is missing or invalid
 * ("clusters[prod].cluster.server is not set").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/cleanup.h"

struct errbuf;

/* A kubeconfig larger than this is refused (-E2BIG); real ones are a few KiB. */
#define KUBECONFIG_MAX_SIZE (4u << 20)
/* A token file larger than this is refused; real tokens are about 1 KiB. */
#define KUBECONFIG_TOKEN_MAX (64u << 10)
/* A certificate or key file larger than this is refused; a chain is a few KiB. */
#define KUBECONFIG_PEM_MAX (1u << 20)
#define KUBECONFIG_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

enum {
	KUBECONFIG_ALLOW_INSECURE = 1 << 0, /* --allow-insecure-kubeconfig */
};

struct kubeconfig {
	char *server;	  /* "https://host[:port][/prefix]", no trailing '/' */
	char *ca_file;	  /* certificate-authority, or NULL */
	char *ca_pem;	  /* decoded certificate-authority-data (wins over ca_file), or NULL */
	size_t ca_pem_len;
	char *cert_file;  /* client-certificate, or NULL */
	char *cert_pem;	  /* decoded client-certificate-data, or NULL */
	size_t cert_pem_len;
	char *key_file;	  /* client-key, or NULL */
	char *key_pem;	  /* decoded client-key-data, or NULL; wiped on free */
	size_t key_pem_len;
	char *token;	  /* static bearer token, or NULL; wiped on free */
	char *token_file; /* re-read by kube every minute and after a 401; wins over token */
	char *proxy_url;  /* proxy-url: "http(s)://..." or "socks5://...", or NULL (then
			   * HTTPS_PROXY / NO_PROXY from the environment apply) */
	char *namespace;  /* the context's namespace, or the pod's; never NULL */
	bool insecure;	  /* skip TLS verification: only ever true when allowed */
	char *source;	  /* the kubeconfig path or "in-cluster", for messages */
};

/* Reads and parses the kubeconfig at path (at most KUBECONFIG_MAX_SIZE bytes),
 * resolves relative paths against its directory, and checks that the files it
 * names are readable and that a token file holds a token. Returns 0 and a new
 * config in *ret (caller frees with kubeconfig_free()), or -errno with eb set. */
int kubeconfig_load(const char *path, unsigned flags, struct kubeconfig **ret,
		    struct errbuf *eb);

/* The pure part of kubeconfig_load(): parses len bytes of YAML, touches no file.
 * base_dir: what relative paths are resolved against (NULL = leave them as is).
 * source: names the config in *ret (NULL = "kubeconfig"). */
int kubeconfig_parse(const char *data, size_t len, const char *base_dir, const char *source,
		     unsigned flags, struct kubeconfig **ret, struct errbuf *eb);

/* The in-cluster config, client-go's rules: KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT (an IPv6 host gets brackets), <sa_dir>/token (must be
 * readable now), <sa_dir>/ca.crt (if unreadable: warning, system roots),
 * namespace from POD_NAMESPACE, <sa_dir>/namespace or "default".
 * sa_dir: NULL = KUBECONFIG_SA_DIR (tests point it elsewhere).
 * Returns -ENOENT with eb set when not running in a cluster. */
int kubeconfig_in_cluster(const char *sa_dir, unsigned flags, struct kubeconfig **ret,
			  struct errbuf *eb);

/* Reads a token file: at most KUBECONFIG_TOKEN_MAX bytes, surrounding
 * whitespace trimmed. -ENODATA if empty, -EBADMSG if it holds a control
 * character (it goes into an HTTP header), -E2BIG, or the open/read -errno.
 * Caller frees *ret with kubeconfig_token_free(). A small bounded local read:
 * fine on the loop. */
int kubeconfig_read_token(const char *path, char **ret);
/* Wipes and frees a token; NULL-safe. Returns NULL. */
char *kubeconfig_token_free(char *token);

/* Reads a PEM file the kubeconfig names (client certificate or key, which the
 * kubelet rotates in place): a regular file (symlinks followed) of at most
 * KUBECONFIG_PEM_MAX bytes that holds a PEM block whose label ends in
 * pem_label ("CERTIFICATE", "PRIVATE KEY"). Returns 0 and the bytes in *ret
 * (NUL-terminated, *ret_len without it; caller frees with
 * kubeconfig_pem_free()), -EBADMSG when the PEM marker is missing (a file
 * caught half-written), -E2BIG or the open/read -errno. A small bounded
 * local read: fine on the loop. */
int kubeconfig_read_pem(const char *path, const char *pem_label, char **ret, size_t *ret_len);
/* Wipes len bytes and frees; NULL-safe. Returns NULL. */
char *kubeconfig_pem_free(char *pem, size_t len);

/* A deep copy. Returns 0 or -ENOMEM. */
int kubeconfig_dup(const struct kubeconfig *c, struct kubeconfig **ret);

/* NULL-safe; wipes secrets. Returns NULL. */
struct kubeconfig *kubeconfig_free(struct kubeconfig *c);
DEFINE_FREEP(kubeconfig, kubeconfig_free)
