/* HTTP/1.1 response parsing: never crashes, leaks or reads outside the input;
 * every event stays inside the bytes given; how the bytes are cut never
 * changes the outcome (status, body, where the message ends, the error).
 * Input: byte 0 seeds the cut sizes (bit 7: the request was HEAD), the rest
 * is what the server sent. The first line is also tried as a server URL. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/httpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int err;
	int status;
	bool done;
	size_t used;
	unsigned char *body;
	size_t body_len;
};

static void run(const char *s, size_t n, unsigned seed, bool head_req, struct outcome *o)
{
	struct http1_parser p;
	size_t off = 0;

	memset(o, 0, sizeof(*o));
	o->body = malloc(n + 1);
	assert(o->body);
	http1_parser_init(&p, head_req);
	while (!o->done && !o->err) {
		/* cut sizes 1..16 from the seed, or everything when seed is 0 */
		size_t step = seed ? 1 + (seed + off * 7) % 16 : n;
		size_t lim = n - off > step ? off + step : n;

		for (;;) {
			enum http1_event ev;
			const char *d = NULL;
			size_t len = 0;
			ssize_t used = http1_parse(&p, s + off, lim - off, &ev, &d, &len);

			if (used < 0) {
				assert(used == -EPROTO || used == -E2BIG || used == -ENOMEM);
				o->err = (int)used;
				break;
			}
			assert((size_t)used <= lim - off);
			off += (size_t)used;
			if (ev == HTTP1_NEED_MORE) {
				assert(off == lim);
				break;
			}
			if (ev == HTTP1_HEAD) {
				assert(p.status >= 200 && p.status <= 599);
				assert(strlen(p.warning) < HTTPC_WARNING_MAX);
				o->status = p.status;
			} else if (ev == HTTP1_BODY) {
				assert(len > 0 && d >= s && d + len <= s + off);
				memcpy(o->body + o->body_len, d, len);
				o->body_len += len;
				assert(o->body_len <= n);
			} else {
				o->done = true;
				break;
			}
		}
		if (off == n && !o->done && !o->err) {
			if (http1_parse_eof(&p) == 0)
				o->done = true;
			else
				o->err = -ECONNRESET;
		}
	}
	o->used = off;
	http1_parser_done(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, cut;
	struct httpc_url u;
	const char *s;
	char url[600];
	size_t n, ul;

	if (size < 1)
		return 0;
	s = (const char *)data + 1;
	n = size - 1;
	run(s, n, 0, data[0] & 0x80, &whole);
	run(s, n, data[0] & 0x7f ? data[0] & 0x7f : 1, data[0] & 0x80, &cut);
	assert(whole.err == cut.err && whole.status == cut.status && whole.done == cut.done);
	if (!whole.err) {
		assert(whole.used == cut.used);
		assert(whole.body_len == cut.body_len);
		assert(memcmp(whole.body, cut.body, whole.body_len) == 0);
	}
	free(whole.body);
	free(cut.body);

	ul = memchr(s, '\n', n) ? (size_t)((const char *)memchr(s, '\n', n) - s) : n;
	if (ul < sizeof(url) && !memchr(s, 0, ul)) {
		memcpy(url, s, ul);
		url[ul] = 0;
		if (httpc_url_parse(url, &u) == 0) {
			assert(u.host[0] && atoi(u.port) >= 1 && atoi(u.port) <= 65535);
			assert(!u.prefix[0] || (u.prefix[0] == '/' &&
						u.prefix[strlen(u.prefix) - 1] != '/'));
		}
	}
	return 0;
}
