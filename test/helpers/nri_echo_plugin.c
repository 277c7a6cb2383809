/* nri_echo_plugin: the smallest daemon around user/nri/nri.c, for the NRI
 * integration tests (test/integration/test_nri_proto.py) against the runtime
 * simulator (test/sim/nrisim.py). Its policy reads the container's env:
 *
 *   PIN=<cpus>             CreateContainer adjusts the container to <cpus>;
 *                          Synchronize re-pins it to <cpus>
 *   FAIL=<message>         CreateContainer fails with <message>
 *   UPDATE=<id>:<cpus>     CreateContainer also updates container <id>
 *
 * SIGUSR1 pushes the updates listed in --push-file ("<id> <cpus>" per line)
 * with UpdateContainers; SIGTERM/SIGINT end it. Every handler logs one
 * logfmt line (mod=echo) the tests wait for.
 */
#define LOG_MOD "echo"
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "nri/nri.h"

struct echo {
	struct event_base *base;
	struct nri *nri;
	const char *push_file;
};

static void on_connected(void *ud)
{
	log_info("connected", NULL);
}

static void on_disconnected(void *ud, int r)
{
	log_info("disconnected", "r=%d", r);
}

static int on_sync(void *ud, const struct nri_pod *pods, size_t n_pods,
		   const struct nri_container *ctrs, size_t n_ctrs, struct nri_updates *upd,
		   struct errbuf *err)
{
	size_t pinned = 0;

	for (size_t i = 0; i < n_ctrs; i++) {
		const char *pin = nri_container_getenv(&ctrs[i], "PIN");
		int r;

		if (!pin)
			continue;
		r = nri_updates_add(upd, ctrs[i].id, pin);
		if (r < 0)
			return errbuf_fail(err, r, "bad PIN %s of %s", pin, ctrs[i].name);
		pinned++;
	}
	log_info("sync", "pods=%zu containers=%zu pinned=%zu", n_pods, n_ctrs, pinned);
	return 0;
}

static int on_create(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     struct nri_adjust *adj, struct nri_updates *upd, struct errbuf *err)
{
	const char *pin = nri_container_getenv(c, "PIN");
	const char *fail = nri_container_getenv(c, "FAIL");
	const char *update = nri_container_getenv(c, "UPDATE");
	int r;

	log_info("create", "pod=%s/%s uid=%s container=%s id=%s cgroup=%s pin=%s", pod->namespace,
		 pod->name, pod->uid, c->name, c->id, log_quote(c->cgroups_path), pin ? pin : "");
	if (fail)
		return errbuf_fail(err, -EPERM, "%s", fail);
	if (pin) {
		r = nri_adjust_set_cpus(adj, pin);
		if (r < 0)
			return errbuf_fail(err, r, "bad PIN %s", pin);
	}
	if (update) {
		_cleanup_free_ char *id = strdup(update);
		char *colon = id ? strchr(id, ':') : NULL;

		if (!colon)
			return errbuf_fail(err, -EINVAL, "bad UPDATE %s", update);
		*colon = 0;
		r = nri_updates_add(upd, id, colon + 1);
		if (r < 0)
			return errbuf_fail(err, r, "bad UPDATE %s", update);
	}
	return 0;
}

static int on_update(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     const char *cpus, struct nri_updates *upd, struct errbuf *err)
{
	log_info("update", "container=%s cpus=%s", c->name, cpus);
	return 0;
}

static int on_stop(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		   struct nri_updates *upd, struct errbuf *err)
{
	log_info("stop", "container=%s", c->name);
	return 0;
}

static int on_post_create(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	log_info("post_create", "container=%s", c->name);
	return 0;
}

static int on_start(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	log_info("start", "container=%s pid=%u", c->name, c->pid);
	return 0;
}

static int on_remove(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	log_info("remove", "container=%s", c->name);
	return 0;
}

static void on_shutdown(void *ud)
{
	log_info("shutdown", NULL);
}

static void on_push_done(void *ud, int r, const char *const *failed, size_t n_failed)
{
	log_info("push_done", "r=%d failed=%zu first_failed=%s", r, n_failed,
		 n_failed ? failed[0] : "");
}

/* SIGUSR1: push what the file lists. */
static void on_usr1(evutil_socket_t sig, short what, void *arg)
{
	struct echo *e = arg;
	_cleanup_fclose_ FILE *f = NULL;
	struct nri_update u[64];
	char ids[64][128], cpus[64][64];
	size_t n = 0;
	int r;

	f = e->push_file ? fopen(e->push_file, "re") : NULL;
	if (!f) {
		log_error("push_file_unreadable", "file=%s", e->push_file ? e->push_file : "");
		return;
	}
	while (n < 64 && fscanf(f, "%127s %63s", ids[n], cpus[n]) == 2) {
		u[n] = (struct nri_update){ ids[n], cpus[n] };
		n++;
	}
	r = nri_push_updates(e->nri, u, n);
	log_info("push", "n=%zu r=%d", n, r);
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopexit(((struct echo *)arg)->base, NULL);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nri-socket", required_argument, NULL, 's' },
		{ "name", required_argument, NULL, 'n' },
		{ "idx", required_argument, NULL, 'i' },
		{ "backoff-min-ms", required_argument, NULL, 'b' },
		{ "backoff-max-ms", required_argument, NULL, 'B' },
		{ "push-file", required_argument, NULL, 'p' },
		{ "with-start", no_argument, NULL, 'S' },
		{ "with-update", no_argument, NULL, 'U' },
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 },
	};
	struct nri_handlers h = {
		.connected = on_connected,
		.disconnected = on_disconnected,
		.synchronize = on_sync,
		.create_container = on_create,
		.stop_container = on_stop,
		.remove_container = on_remove,
		.shutdown = on_shutdown,
		.push_done = on_push_done,
	};
	struct nri_config cfg = { 0 };
	struct echo e = { 0 };
	struct event *sigs[4] = { 0 };
	int c, r;

	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			cfg.socket_path = optarg;
			break;
		case 'n':
			cfg.plugin_name = optarg;
			break;
		case 'i':
			cfg.plugin_idx = optarg;
			break;
		case 'b':
			cfg.backoff_min_ms = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'B':
			cfg.backoff_max_ms = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			e.push_file = optarg;
			break;
		case 'S':
			h.start_container = on_start;
			h.post_create_container = on_post_create;
			break;
		case 'U':
			h.update_container = on_update;
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		default:
			fprintf(stderr,
				"usage: %s [--nri-socket PATH] [--name N] [--idx NN]\n"
				"  [--backoff-min-ms MS] [--backoff-max-ms MS] [--push-file F]\n"
				"  [--with-start] [--with-update] [-v]\n",
				argv[0]);
			return 2;
		}
	}
	/* nri.h: a runtime closing under a write is EPIPE, not a signal. */
	(void)signal(SIGPIPE, SIG_IGN);
	e.base = event_base_new();
	if (!e.base)
		return 1;
	r = nri_new(e.base, &cfg, &h, &e, &e.nri);
	if (r < 0) {
		log_error_errno(r, "nri_new_failed", "name=%s idx=%s",
				log_quote(cfg.plugin_name ? cfg.plugin_name : NRI_PLUGIN_NAME),
				cfg.plugin_idx ? cfg.plugin_idx : NRI_PLUGIN_IDX);
		event_base_free(e.base);
		return 2;
	}
	sigs[0] = evsignal_new(e.base, SIGTERM, on_term, &e);
	sigs[1] = evsignal_new(e.base, SIGINT, on_term, &e);
	sigs[2] = evsignal_new(e.base, SIGUSR1, on_usr1, &e);
	for (int i = 0; i < 3; i++)
		if (sigs[i])
			(void)event_add(sigs[i], NULL);
	r = nri_start(e.nri);
	if (r >= 0) {
		log_info("started", "pid=%d", (int)getpid());
		r = event_base_dispatch(e.base) < 0 ? -EIO : 0;
	}
	e.nri = nri_free(e.nri);
	for (int i = 0; i < 3; i++)
		if (sigs[i])
			event_free(sigs[i]);
	event_base_free(e.base);
	log_info("exited", "r=%d", r);
	return r < 0 ? 1 : 0;
}
