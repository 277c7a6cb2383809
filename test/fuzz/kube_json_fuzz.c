/* Watch stream decoding: the line splitter fed in arbitrary chunks, each line
 * decoded as a watch event (and its object as a Status), the whole input also
 * parsed as a response body. Never crashes or leaks; chunking never changes
 * the lines produced; a decoded event always has a known type and an object.
 * Input: byte 0 picks max_line, byte 1 seeds the chunk sizes, the rest is the
 * stream. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct collected {
	char *buf;
	size_t len;
	int lines;
};

static void take_lines(struct kube_lines *l, struct collected *c)
{
	char *line;
	size_t n;

	while (kube_lines_next(l, &line, &n) == 1) {
		struct kube_watch_event ev;
		struct kube_status st;
		char *nb;

		assert(n > 0 && n <= l->max_line && line[n] == 0);
		nb = realloc(c->buf, c->len + n + 1);
		assert(nb);
		c->buf = nb;
		memcpy(c->buf + c->len, line, n);
		c->buf[c->len + n] = '\n';
		c->len += n + 1;
		c->lines++;
		if (kube_watch_event_parse(line, n, &ev) == 0) {
			assert(ev.root && ev.object);
			assert(json_object_is_type(ev.object, json_type_object));
			assert(ev.type <= KUBE_EVENT_ERROR);
			if (kube_status_parse(ev.object, &st) == 0) {
				assert(st.code >= 0 && st.code <= 999);
				(void)kube_errno_from_http(st.code, st.reason);
			}
			kube_watch_event_done(&ev);
			assert(!ev.root);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct collected whole = { 0 }, chunked = { 0 };
	struct kube_lines a, b;
	struct json_object *o = NULL;
	uint32_t seed;
	size_t max_line, off = 0;
	int ra, rb = 0;

	if (size < 2)
		return 0;
	max_line = (size_t)data[0] * 4 + 1;
	seed = data[1] | 1u;
	data += 2;
	size -= 2;

	kube_lines_init(&a, max_line);
	ra = kube_lines_feed(&a, (const char *)data, size);
	take_lines(&a, &whole);

	kube_lines_init(&b, max_line);
	while (off < size && rb == 0) {
		size_t n;

		seed = seed * 1103515245u + 12345u;
		n = 1 + (seed >> 16) % 97;
		if (n > size - off)
			n = size - off;
		rb = kube_lines_feed(&b, (const char *)data + off, n);
		if (rb == 0)
			off += n;
		take_lines(&b, &chunked);
	}
	/* One feed fails as a whole, chunks only from the bad line on. */
	assert((ra == 0) == (rb == 0));
	if (ra == 0) {
		assert(whole.lines == chunked.lines && whole.len == chunked.len);
		assert(whole.len == 0 || memcmp(whole.buf, chunked.buf, whole.len) == 0);
		assert(kube_lines_pending(&a) == kube_lines_pending(&b));
	} else {
		assert(ra == -E2BIG && rb == -E2BIG);
		assert(chunked.lines >= whole.lines);
	}
	kube_lines_done(&a);
	kube_lines_done(&b);
	free(whole.buf);
	free(chunked.buf);

	if (kube_json_parse((const char *)data, size, &o) == 0) {
		struct kube_status st;

		assert(o);
		(void)kube_status_parse(o, &st);
		json_object_put(o);
	}
	return 0;
}
