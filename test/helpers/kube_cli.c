/* kube_cli: drives the kube client from the command line for the integration
 * tests (test/integration/test_kube_client.py). One request or one watch on a
 * real libevent loop, with a ticker that measures how long the loop was ever
 * held (max_gap_ms). Output is JSON, one object per line:
 *
 *   {"ready":true}                              after kube_new(), before --delay-ms
 *   {"event":{"type":"ADDED","rv":"5"}}         per watch event
 *   {"result":{...}} or {"end":{...}}           the request's result / the watch's end
 *   {"loop":{"ticks":N,"max_gap_ms":M,"elapsed_ms":T},"stats":{...}}
 *
 * Exit 0 when the result had error 0, 1 otherwise, 2 on bad usage or config.
 *
 *   kube_cli [--kubeconfig F | --sa-dir D] [--allow-insecure] [--timeout-ms N]
 *            [--connect-timeout-ms N] [--attempts N] [--deadline-ms N] [--delay-ms N]
 *            [--tick-ms N] [--max-events N] [--max-line N] [--precondition-uid U]
 *            [--precondition-rv RV] [--trace] [--stdin] VERB PATH [BODY]
 *   VERB: get create update patch delete watch
 *
 * --stdin keeps the client running after VERB's result (or alongside the
 * watch) and takes commands, one per line, so a test can act between
 * requests (rotate a certificate, count connections):
 *   get PATH [N]   N (default 1) GETs of PATH at once; each prints {"result":...}
 *   quit           (or end of input) stop the watch, wait for the GETs, exit
 * Exit 0 then when every result had error 0.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/errbuf.h"
#include "lib/log.h"

struct cli {
	struct event_base *base;
	struct kube *k;
	struct kube_watch *w;
	enum kube_verb verb;
	const char *path, *body;
	bool watch;
	int max_events, events;
	int exit_code;
	bool finished;
	struct kube_req_opts ro;
	struct kube_watch_opts wo;
	/* --stdin */
	bool interactive, quitting;
	int inflight, failed;
	struct evbuffer *in;
	struct event *in_ev;
	/* loop health */
	struct timespec t0, last_tick;
	long ticks, max_gap_ms;
};

static long ms_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

static const char *errno_name(int e)
{
	static const struct {
		int e;
		const char *n;
	} t[] = {
		{ 0, "OK" },		 { EINVAL, "EINVAL" },	       { EACCES, "EACCES" },
		{ EPERM, "EPERM" },	 { ENOENT, "ENOENT" },	       { EOPNOTSUPP, "EOPNOTSUPP" },
		{ EEXIST, "EEXIST" },	 { EBUSY, "EBUSY" },	       { ESTALE, "ESTALE" },
		{ E2BIG, "E2BIG" },	 { EAGAIN, "EAGAIN" },	       { ETIMEDOUT, "ETIMEDOUT" },
		{ EPROTO, "EPROTO" },	 { EIO, "EIO" },	       { ECONNREFUSED, "ECONNREFUSED" },
		{ EHOSTUNREACH, "EHOSTUNREACH" }, { ECONNRESET, "ECONNRESET" },
		{ EKEYREJECTED, "EKEYREJECTED" }, { ENOKEY, "ENOKEY" },
		{ ECONNABORTED, "ECONNABORTED" }, { ENOMEM, "ENOMEM" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].e == -e || t[i].e == e)
			return t[i].n;
	return "OTHER";
}

static void add_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

static void print_result(struct cli *c, const char *key, const struct kube_result *r)
{
	struct json_object *top = json_object_new_object(), *o = json_object_new_object();
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	json_object_object_add(o, "error", json_object_new_int(r->error));
	add_str(o, "errno", errno_name(r->error));
	json_object_object_add(o, "http", json_object_new_int64(r->http_status));
	json_object_object_add(o, "code", json_object_new_int(r->status.code));
	add_str(o, "reason", r->status.reason);
	add_str(o, "message", r->status.message);
	json_object_object_add(o, "retry_after", json_object_new_int(r->retry_after_s));
	json_object_object_add(o, "attempts", json_object_new_int((int)r->attempts));
	add_str(o, "warning", r->warning);
	add_str(o, "error_text", r->error_text);
	json_object_object_add(o, "expired", json_object_new_boolean(kube_is_expired(r)));
	json_object_object_add(o, "elapsed_ms", json_object_new_int64(ms_between(&c->t0, &now)));
	json_object_object_add(o, "body", r->body ? json_object_get(r->body) : NULL);
	json_object_object_add(top, key, o);
	printf("%s\n", json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
	fflush(stdout);
	json_object_put(top);
	if (c->interactive) {
		c->failed += r->error != 0;
		return;
	}
	c->exit_code = r->error ? 1 : 0;
	c->finished = true;
}

static void maybe_quit(struct cli *c)
{
	if (!c->quitting || c->inflight)
		return;
	kube_watch_stop(c->w);
	c->w = NULL;
	c->exit_code = c->failed ? 1 : 0;
	c->finished = true;
}

static void on_done(void *ud, const struct kube_result *r)
{
	struct cli *c = ud;

	print_result(c, "result", r);
	c->inflight--;
	maybe_quit(c);
}

static void on_end(void *ud, const struct kube_result *r)
{
	struct cli *c = ud;

	c->w = NULL;
	print_result(c, "end", r);
}

/* One command line of --stdin. */
static void command(struct cli *c, char *line)
{
	char *save = NULL, *verb = strtok_r(line, " ", &save), *path = strtok_r(NULL, " ", &save);
	char *n = strtok_r(NULL, " ", &save);
	long count = n ? strtol(n, NULL, 10) : 1;

	if (verb && strcmp(verb, "quit") == 0) {
		c->quitting = true;
		maybe_quit(c);
		return;
	}
	if (!verb || strcmp(verb, "get") != 0 || !path || count < 1) {
		fprintf(stderr, "kube_cli: bad command (get PATH [N] | quit)\n");
		return;
	}
	for (long i = 0; i < count; i++) {
		int r = kube_request(c->k, KUBE_GET, path, NULL, &c->ro, on_done, c, NULL);

		if (r < 0) {
			fprintf(stderr, "kube_cli: cannot start: %s\n", strerror(-r));
			c->failed++;
			continue;
		}
		c->inflight++;
	}
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	struct cli *c = arg;
	char *line;
	int n = evbuffer_read(c->in, fd, 4096);

	while ((line = evbuffer_readln(c->in, NULL, EVBUFFER_EOL_LF))) {
		command(c, line);
		free(line);
	}
	if (n <= 0) { /* end of input: quit */
		event_del(c->in_ev);
		c->quitting = true;
		maybe_quit(c);
	}
}

static void on_event(void *ud, const struct kube_watch_event *ev)
{
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	struct cli *c = ud;

	printf("{\"event\":{\"type\":\"%s\",\"rv\":%s%s%s}}\n", names[ev->type],
	       ev->resource_version ? "\"" : "",
	       ev->resource_version ? ev->resource_version : "null",
	       ev->resource_version ? "\"" : "");
	fflush(stdout);
	if (c->max_events && ++c->events >= c->max_events) {
		kube_watch_stop(c->w);
		c->w = NULL;
		c->exit_code = 0;
		c->finished = true;
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct cli *c = arg;
	struct timespec now;
	long gap;

	clock_gettime(CLOCK_MONOTONIC, &now);
	gap = ms_between(&c->last_tick, &now);
	if (c->ticks && gap > c->max_gap_ms)
		c->max_gap_ms = gap;
	c->last_tick = now;
	c->ticks++;
	if (c->finished)
		event_base_loopbreak(c->base);
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct cli *c = arg;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &c->t0); /* elapsed_ms counts from here */
	if (c->watch)
		r = kube_watch(c->k, c->path, &c->wo, on_event, on_end, c, &c->w);
	else
		r = kube_request(c->k, c->verb, c->path, c->body, &c->ro, on_done, c, NULL);
	c->inflight += !c->watch && r >= 0;
	if (r >= 0 && c->interactive) {
		c->in = evbuffer_new();
		c->in_ev = event_new(c->base, 0, EV_READ | EV_PERSIST, on_stdin, c);
		if (!c->in || !c->in_ev || event_add(c->in_ev, NULL) < 0)
			r = -ENOMEM;
	}
	if (r < 0) {
		fprintf(stderr, "kube_cli: cannot start: %s\n", strerror(-r));
		c->exit_code = 2;
		c->finished = true;
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: kube_cli [--kubeconfig F | --sa-dir D] [--allow-insecure] "
			"[--timeout-ms N] [--connect-timeout-ms N] [--attempts N] [--deadline-ms N] "
			"[--delay-ms N] [--tick-ms N] [--max-events N] [--max-line N] "
			"[--precondition-uid U] [--precondition-rv RV] [--trace] [--stdin] "
			"get|create|update|patch|delete|watch PATH [BODY]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "sa-dir", required_argument, NULL, 's' },
		{ "allow-insecure", no_argument, NULL, 'i' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "connect-timeout-ms", required_argument, NULL, 'c' },
		{ "attempts", required_argument, NULL, 'a' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "tick-ms", required_argument, NULL, 'T' },
		{ "max-events", required_argument, NULL, 'm' },
		{ "max-line", required_argument, NULL, 'l' },
		{ "precondition-uid", required_argument, NULL, 'u' },
		{ "precondition-rv", required_argument, NULL, 'r' },
		{ "trace", no_argument, NULL, 'v' },
		{ "deadline-ms", required_argument, NULL, 'D' },
		{ "stdin", no_argument, NULL, 'I' },
		{ 0 },
	};
	static const char *const verbs[] = { "get", "create", "update", "patch", "delete" };
	struct cli c = { .exit_code = 1 };
	struct kube_opts ko = { 0 };
	struct kubeconfig *cfg = NULL;
	const char *kubeconfig = NULL, *sa_dir = NULL;
	struct errbuf err = { "" };
	unsigned flags = 0;
	long delay_ms = 0, tick_ms = 10;
	struct event *tick, *start;
	struct timeval tv;
	struct kube_stats st;
	int o, r;

	signal(SIGPIPE, SIG_IGN);
	while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
		switch (o) {
		case 'k': kubeconfig = optarg; break;
		case 's': sa_dir = optarg; break;
		case 'i': flags |= KUBECONFIG_ALLOW_INSECURE; break;
		case 't': c.ro.timeout_ms = c.wo.timeout_ms = (int)strtol(optarg, NULL, 10); break;
		case 'c': ko.connect_timeout_ms = (int)strtol(optarg, NULL, 10); break;
		case 'a': c.ro.max_attempts = (int)strtol(optarg, NULL, 10); break;
		case 'd': delay_ms = strtol(optarg, NULL, 10); break;
		case 'T': tick_ms = strtol(optarg, NULL, 10); break;
		case 'm': c.max_events = (int)strtol(optarg, NULL, 10); break;
		case 'l': c.wo.max_line = (size_t)strtoul(optarg, NULL, 10); break;
		case 'u': c.ro.precondition_uid = optarg; break;
		case 'r': c.ro.precondition_rv = optarg; break;
		case 'v': log_set_level(LOG_TRACE); break;
		case 'D': c.ro.deadline_ms = (int)strtol(optarg, NULL, 10); break;
		case 'I': c.interactive = true; break;
		default: return usage();
		}
	}
	if (argc - optind < 2 || argc - optind > 3)
		return usage();
	c.path = argv[optind + 1];
	c.body = argc - optind == 3 ? argv[optind + 2] : NULL;
	if (strcmp(argv[optind], "watch") == 0) {
		c.watch = true;
	} else {
		size_t i;

		for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
			if (strcmp(argv[optind], verbs[i]) == 0)
				break;
		if (i == sizeof(verbs) / sizeof(verbs[0]))
			return usage();
		c.verb = (enum kube_verb)i;
	}

	r = kubeconfig ? kubeconfig_load(kubeconfig, flags, &cfg, &err)
		       : kubeconfig_in_cluster(sa_dir, flags, &cfg, &err);
	if (r < 0) {
		fprintf(stderr, "kube_cli: %s\n", err.s);
		return 2;
	}
	c.base = event_base_new();
	r = kube_new(c.base, cfg, &ko, &c.k);
	kubeconfig_free(cfg);
	if (r < 0) {
		fprintf(stderr, "kube_cli: kube_new: %s\n", strerror(-r));
		event_base_free(c.base);
		return 2;
	}
	printf("{\"ready\":true}\n");
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &c.t0);
	c.last_tick = c.t0;
	tick = event_new(c.base, -1, EV_PERSIST, on_tick, &c);
	tv = (struct timeval){ tick_ms / 1000, (tick_ms % 1000) * 1000 };
	event_add(tick, &tv);
	start = evtimer_new(c.base, on_start, &c);
	tv = (struct timeval){ delay_ms / 1000, (delay_ms % 1000) * 1000 };
	evtimer_add(start, &tv);
	event_base_dispatch(c.base);

	kube_get_stats(c.k, &st);
	{
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		printf("{\"loop\":{\"ticks\":%ld,\"max_gap_ms\":%ld,\"elapsed_ms\":%ld},"
		       "\"stats\":{\"attempts\":%llu,\"retries\":%llu,\"failures\":%llu,"
		       "\"token_reloads\":%llu,\"too_big\":%llu,\"watch_events\":%llu,"
		       "\"connections\":%llu,\"http2\":%llu,\"cert_reloads\":%llu,"
		       "\"cert_read_errors\":%llu,\"watch_pauses\":%llu}}\n",
		       c.ticks, c.max_gap_ms, ms_between(&c.t0, &now),
		       (unsigned long long)st.attempts, (unsigned long long)st.retries,
		       (unsigned long long)st.failures, (unsigned long long)st.token_reloads,
		       (unsigned long long)st.too_big, (unsigned long long)st.watch_events,
		       (unsigned long long)st.connections, (unsigned long long)st.http2,
		       (unsigned long long)st.cert_reloads, (unsigned long long)st.cert_read_errors,
		       (unsigned long long)st.watch_pauses);
	}
	kube_free(c.k);
	if (c.in_ev)
		event_free(c.in_ev);
	if (c.in)
		evbuffer_free(c.in);
	event_free(tick);
	event_free(start);
	event_base_free(c.base);
	return c.exit_code;
}
