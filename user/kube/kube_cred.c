/* The Kubernetes client's credentials: the client certificate and key read
 * from their files and read again when they change, and the bearer token
 * file re-read on a timer and after a 401. See "Client credentials" in kube.c.
 *
 * Apart from kube.c because it is about files on this host, not about
 * calls: a call only takes the current pair and token (kube_cred_refresh(),
 * k->token) when an attempt starts.
 */
#include "kube/kube.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "kube/kube_priv.h"
#include "kube/kubeconfig.h"

#define LOG_MOD "kube"
#include "lib/log.h"

/* ---- client certificate ---------------------------------------------------------------- */

static bool stat_same(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

void kube_cred_file_done(struct cred_file *f)
{
	f->pem = kubeconfig_pem_free(f->pem, f->len);
	f->len = 0;
}

/* Reads the certificate and key files again when either changed since the last
 * read (or was never read). Both are read and swapped together, so a pair is
 * never mixed; a failed read keeps the old pair (a rotation caught half-way
 * is picked up by a later attempt), as client-go keeps its old certificate.
 * Small bounded local reads, two stat()s when nothing changed: fine on the
 * loop, once per attempt. Returns whether the pair is usable. */
bool kube_cred_refresh(struct kube *k, bool initial)
{
	struct cred_file *f[2] = { &k->cert, &k->key };
	struct stat st[2];
	char *pem[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	bool changed = false;
	int r = 0;

	if (!k->cert.path && !k->key.path)
		return true;
	for (int i = 0; i < 2; i++) {
		if (!f[i]->path)
			continue;
		if (stat(f[i]->path, &st[i]) < 0) {
			r = -errno;
			goto fail;
		}
		changed |= !f[i]->pem || !stat_same(&st[i], &f[i]->st);
	}
	if (!changed)
		return true;
	for (int i = 0; i < 2; i++) {
		if (!f[i]->path)
			continue;
		r = kubeconfig_read_pem(f[i]->path, f[i]->label, &pem[i], &len[i]);
		if (r < 0)
			goto fail;
	}
	for (int i = 0; i < 2; i++) {
		if (!f[i]->path)
			continue;
		kube_cred_file_done(f[i]);
		f[i]->pem = pem[i];
		f[i]->len = len[i];
		f[i]->st = st[i];
	}
	if (!initial) {
		k->st.cert_reloads++;
		log_info("client_cert_reloaded", "cert=%s key=%s",
			 k->cert.path ? k->cert.path : "inline", k->key.path ? k->key.path : "inline");
	}
	k->cert_failing = false;
	return true;
fail:
	for (int i = 0; i < 2; i++)
		(void)kubeconfig_pem_free(pem[i], len[i]);
	k->st.cert_read_errors++;
	if (!k->cert_failing)
		log_warn_errno(r, "client_cert_read_failed", "cert=%s key=%s action=%s",
			       k->cert.path ? k->cert.path : "inline",
			       k->key.path ? k->key.path : "inline",
			       k->cert.pem || !k->cert.path ? "keeping_old" : "none");
	k->cert_failing = true;
	return (!k->cert.path || k->cert.pem) && (!k->key.path || k->key.pem);
}

/* ---- token --------------------------------------------------------------------------- */

/* A small bounded local read (KUBECONFIG_TOKEN_MAX, regular file): fine on the loop.
 * Keeps the last good token when the read fails, as client-go does. */
void kube_token_reload(struct kube *k, const char *why)
{
	char *t = NULL;
	int r;

	if (!k->cfg->token_file)
		return;
	r = kubeconfig_read_token(k->cfg->token_file, &t);
	if (r < 0) {
		k->st.token_read_errors++;
		if (!k->token_failing)
			log_warn_errno(r, "token_read_failed", "path=%s reason=%s action=keeping_old",
				       k->cfg->token_file, why);
		k->token_failing = true;
		return;
	}
	if (k->token_failing)
		log_info("token_read_recovered", "path=%s", k->cfg->token_file);
	k->token_failing = false;
	if (k->token && strcmp(k->token, t) == 0) {
		(void)kubeconfig_token_free(t);
		return;
	}
	(void)kubeconfig_token_free(k->token);
	k->token = t;
	k->st.token_reloads++;
	log_info("token_reloaded", "path=%s reason=%s", k->cfg->token_file, why);
}

void kube_on_token_timer(evutil_socket_t fd, short what, void *arg)
{
	kube_token_reload(arg, "periodic");
}
