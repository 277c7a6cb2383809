#!/usr/bin/python3
"""Writes the seed corpus of test/fuzz/grpc_h2_fuzz.c into
test/fuzz/corpus/grpc_h2/: client byte streams, each starting like a real
gRPC client (preface + SETTINGS), built with test/helpers/h2raw.py.
The files are committed; rerun after changing this script."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
import h2raw as h  # noqa: E402

OUT = os.path.join(HERE, "corpus", "grpc_h2")


def claims_request():
    """v1 NodePrepareResourcesRequest of wire-protocols.md 2.2."""
    def s(tag, v):
        return bytes([tag, len(v)]) + v
    c1 = s(0x0A, b"default") + s(0x12, b"uid-1") + s(0x1A, b"c1")
    c2 = s(0x0A, b"default") + s(0x12, b"uid-2") + s(0x1A, b"fail-x")
    return s(0x0A, c1) + s(0x0A, c2)


def seeds():
    start = h.client_start(initial_window_size=4194303, max_frame_size=4194303,
                           max_header_list_size=8192)
    msg = h.grpc_message(b"hello")
    hdr = h.grpc_headers("/f.S/Echo", [("grpc-timeout", "44999951u")])
    yield "unary", start + h.grpc_request(1, "/f.S/Echo", b"hello")
    yield "unary_pb", start + h.grpc_request(1, "/f.S/Prepare", claims_request())
    yield "empty_message", start + h.grpc_request(1, "/f.S/Prepare", b"")
    yield "two_calls", start + h.grpc_request(1, "/f.S/Echo", b"a") + \
        h.grpc_request(3, "/f.S/Stream", b"b")
    yield "interleaved", start + \
        h.frame(h.HEADERS, h.END_HEADERS, 1, hdr) + \
        h.frame(h.HEADERS, h.END_HEADERS, 3, h.grpc_headers("/f.S/Hold")) + \
        h.frame(h.DATA, 0, 1, msg[:3]) + \
        h.frame(h.DATA, h.END_STREAM, 3, h.grpc_message(b"")) + \
        h.frame(h.DATA, h.END_STREAM, 1, msg[3:])
    yield "continuation", start + \
        h.frame(h.HEADERS, 0, 1, hdr[:20]) + h.frame(h.CONTINUATION, 0, 1, hdr[20:40]) + \
        h.frame(h.CONTINUATION, h.END_HEADERS, 1, hdr[40:]) + \
        h.frame(h.DATA, h.END_STREAM, 1, msg)
    yield "padded_priority", start + \
        h.frame(h.HEADERS, h.END_HEADERS | h.PADDED | h.PRIORITY_FLAG, 1,
                b"\x03" + b"\x00\x00\x00\x00\x10" + hdr + b"\x00" * 3) + \
        h.frame(h.DATA, h.END_STREAM | h.PADDED, 1, b"\x02" + msg + b"\x00\x00")
    yield "client_trailers", start + h.frame(h.HEADERS, h.END_HEADERS, 1, hdr) + \
        h.frame(h.DATA, 0, 1, msg) + \
        h.frame(h.HEADERS, h.END_HEADERS | h.END_STREAM, 1, h.hpack_literal("x-t", "1"))
    yield "unknown_method", start + h.grpc_request(1, "/f.S/Nope", b"x") + \
        h.grpc_request(3, "/g.T/Nope", b"x") + h.grpc_request(5, "bad", b"x")
    yield "too_big", start + h.frame(h.HEADERS, h.END_HEADERS, 1, hdr) + \
        h.frame(h.DATA, 0, 1, b"\x00" + struct.pack(">I", 1 << 20) + b"x" * 100) + \
        h.frame(h.DATA, h.END_STREAM, 1, b"y" * 100)
    yield "compressed", start + h.frame(h.HEADERS, h.END_HEADERS, 1, hdr) + \
        h.frame(h.DATA, h.END_STREAM, 1, h.grpc_message(b"z", compressed=True))
    yield "gzip", start + h.grpc_request(1, "/f.S/Echo", b"x", [("grpc-encoding", "gzip")])
    yield "hold_then_rst", start + h.grpc_request(1, "/f.S/Hold", b"x") + \
        h.frame(h.RST_STREAM, 0, 1, struct.pack(">I", 8))
    yield "hold_cb_then_rst", start + h.grpc_request(1, "/f.S/HoldCb", b"x") + \
        h.grpc_request(3, "/f.S/HoldCb", b"y") + h.grpc_request(5, "/f.S/Hold", b"z") + \
        h.frame(h.RST_STREAM, 0, 3, struct.pack(">I", 8)) + \
        h.frame(h.RST_STREAM, 0, 1, struct.pack(">I", 8))
    yield "hold_many", start + b"".join(h.grpc_request(2 * i + 1, "/f.S/Hold", b"%d" % i)
                                        for i in range(10))
    yield "fail", start + h.grpc_request(1, "/f.S/Fail", "déjà\n100%".encode())
    yield "zero_window_stream", h.client_start(initial_window_size=0) + \
        h.grpc_request(1, "/f.S/Stream", b"x" * 1000) + \
        h.frame(h.WINDOW_UPDATE, 0, 1, struct.pack(">I", 10))
    yield "control", start + h.frame(h.PING, 0, 0, b"12345678") + \
        h.frame(h.SETTINGS, h.ACK, 0) + h.frame(h.WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000)) + \
        h.frame(h.PRIORITY, 0, 1, b"\x00\x00\x00\x00\x10") + \
        h.grpc_request(3, "/f.S/Echo", b"x") + \
        h.frame(h.GOAWAY, 0, 0, struct.pack(">II", 3, 0))
    yield "get_method", start + h.frame(
        h.HEADERS, h.END_HEADERS | h.END_STREAM, 1,
        b"".join(h.hpack_literal(k, v) for k, v in
                 [(":method", "GET"), (":scheme", "http"), (":path", "/f.S/Echo")]))
    yield "garbage_after_preface", start + b"\xff" * 40
    yield "data_on_stream0", start + h.frame(h.DATA, 0, 0, b"x")
    yield "bad_preface", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    yield "truncated", (start + h.grpc_request(1, "/f.S/Echo", b"hello"))[:-3]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(list(seeds())), OUT))


if __name__ == "__main__":
    main()
