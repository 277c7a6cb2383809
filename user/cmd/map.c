/* `dra-cpu-driver map`: draws the node as the running driver sees it.
 *
 *   dra-cpu-driver map [--url URL] [--file FILE] [--json] [--color auto|always|never]
 *
 * The picture comes from the driver's own /nodemap document (core/nodemap.h),
 * fetched over HTTP from --url (default: the driver on this host, at
 * $DRA_CPU_BIND_ADDRESS's port or 8080), or read from --file (a saved
 * document). --json prints the document as fetched, after checking it. In a
 * cluster: kubectl -n dra-cpu exec ds/dra-cpu -- dra-cpu-driver map.
 *
 * Exit codes: 0 drawn, 1 the driver could not be reached or answered badly,
 * 2 bad arguments.
 */
#include "cmd/map.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "core/nodemap.h"
#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

#define MAP_TIMEOUT_MS 5000L

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;

	/* Over the cap: a short count makes curl stop with an error. */
	return buf_add(b, data, size * n) < 0 ? 0 : size * n;
}

/* GET url into *ret (NUL-terminated). A local request to the driver's own
 * port: blocking is fine in a CLI. */
static int fetch(const char *url, char **ret, size_t *ret_len, struct errbuf *eb)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(NODEMAP_MAX_BYTES);
	CURL *c = curl_easy_init();
	char curl_err[CURL_ERROR_SIZE] = "";
	long code = 0;
	CURLcode cr;
	char *p;

	if (!c)
		return -ENOMEM;
	(void)curl_easy_setopt(c, CURLOPT_URL, url);
	(void)curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	(void)curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, MAP_TIMEOUT_MS);
	(void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	(void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	(void)curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	cr = curl_easy_perform(c);
	if (cr == CURLE_OK)
		(void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (cr != CURLE_OK)
		return errbuf_fail(eb, -EIO, "%s: %s", url,
				   *curl_err ? curl_err : curl_easy_strerror(cr));
	if (code != 200)
		return errbuf_fail(eb, -EIO, "%s: HTTP %ld (a driver older than the node map "
					     "answers 404)",
				   url, code);
	p = buf_take(&b, ret_len);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/* The driver on this host: its --bind-address port when the environment
 * says it, else the default 8080. */
static void default_url(char *buf, size_t size)
{
	const char *bind = getenv("DRA_CPU_BIND_ADDRESS");
	const char *colon = bind ? strrchr(bind, ':') : NULL;
	const char *port = colon && colon[1] ? colon + 1 : "8080";

	(void)snprintf(buf, size, "http://127.0.0.1:%s/nodemap", port);
}

static void usage(FILE *f)
{
	(void)fputs("usage: dra-cpu-driver map [--url URL] [--file FILE] [--json] "
		    "[--color auto|always|never]\n"
		    "Draws the node's CPUs as the running driver sees them: sockets, NUMA "
		    "nodes,\nL3 groups, cores and threads, each CPU marked by the claim and pod "
		    "that hold it\nor by what it is (shared, reserved, real-time, offline).\n"
		    "  --url URL     the driver's /nodemap (default http://127.0.0.1:<port>/nodemap,\n"
		    "                the port from $DRA_CPU_BIND_ADDRESS or 8080)\n"
		    "  --file FILE   a saved document instead (e.g. from --json)\n"
		    "  --json        print the document instead of the picture\n"
		    "  --color WHEN  auto (a terminal), always or never\n",
		    f);
}

struct map_args {
	const char *url, *file;
	bool json;
	int colour; /* -1 auto, 0 never, 1 always */
};

static int parse_args(int argc, char **argv, struct map_args *a)
{
	static const struct option opts[] = { { "url", required_argument, NULL, 'u' },
					      { "file", required_argument, NULL, 'f' },
					      { "json", no_argument, NULL, 'j' },
					      { "color", required_argument, NULL, 'c' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	int o;

	*a = (struct map_args){ .colour = -1 };
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'u':
			a->url = optarg;
			break;
		case 'f':
			a->file = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'c':
			if (!strcmp(optarg, "auto"))
				a->colour = -1;
			else if (!strcmp(optarg, "always"))
				a->colour = 1;
			else if (!strcmp(optarg, "never"))
				a->colour = 0;
			else
				return -EINVAL;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc || (a->url && a->file))
		return -EINVAL;
	return 0;
}

int map_main(int argc, char **argv)
{
	_cleanup_(nodemap_freep) struct nodemap *m = NULL;
	_cleanup_free_ char *text = NULL;
	struct errbuf eb = {};
	struct map_args a;
	char url[128];
	size_t len = 0;
	int r;

	r = parse_args(argc, argv, &a);
	if (r != 0) {
		if (r < 0)
			usage(stderr);
		return r < 0 ? 2 : 0;
	}
	if (a.file) {
		r = fileio_read(a.file, NODEMAP_MAX_BYTES, &text, &len, &eb);
	} else {
		if (!a.url)
			default_url(url, sizeof(url));
		r = fetch(a.url ? a.url : url, &text, &len, &eb);
	}
	if (r == 0)
		r = nodemap_parse(text, len, &m, &eb);
	if (r < 0) {
		fprintf(stderr, "dra-cpu-driver map: %s\n", errbuf_text(&eb, r));
		return 1;
	}
	if (a.json) {
		(void)fwrite(text, 1, len, stdout);
		(void)fputs("\n", stdout);
		return 0;
	}
	r = nodemap_draw(m, a.colour < 0 ? isatty(STDOUT_FILENO) : a.colour, stdout);
	return r < 0 ? 1 : 0;
}
