"""Hand-made HTTP/2 frames for tests that must misbehave on purpose (partial
frames, garbage, peers that never read) and for the gRPC fuzz seed corpus.

Only what those need: frame encoding, HPACK literal header fields (no
Huffman, no indexing, so any decoder accepts them), a gRPC request, and a
frame reader that does not decode HPACK (responses are checked with grpcio).
"""
import select
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
SETTINGS_INITIAL_WINDOW_SIZE = 4


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream & 0x7FFFFFFF) + payload


def settings(**kv):
    """settings(initial_window_size=0) etc., by RFC 9113 names."""
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3,
           "initial_window_size": 4, "max_frame_size": 5, "max_header_list_size": 6}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in kv.items()))


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """Literal header field without indexing, new name (RFC 7541 6.2.2)."""
    name = name.encode() if isinstance(name, str) else name
    value = value.encode() if isinstance(value, str) else value
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def grpc_headers(path, extra=()):
    fields = [(":method", "POST"), (":scheme", "http"), (":path", path),
              (":authority", "localhost"), ("content-type", "application/grpc"),
              ("te", "trailers")] + list(extra)
    return b"".join(hpack_literal(k, v) for k, v in fields)


def grpc_message(payload, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(payload)) + payload


def grpc_request(stream, path, payload=b"", extra=()):
    """HEADERS + one DATA frame with END_STREAM: a whole unary call."""
    return frame(HEADERS, END_HEADERS, stream, grpc_headers(path, extra)) + \
        frame(DATA, END_STREAM, stream, grpc_message(payload))


def client_start(**kv):
    """Preface and our SETTINGS: what every connection begins with."""
    return PREFACE + settings(**kv)


def connect(path, timeout=5.0):
    """A connected unix socket; waits (up to timeout) while the server's
    listen backlog is full, as a blocking connect would."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            if time.monotonic() > deadline:
                s.close()
                raise
            time.sleep(0.005)


def read_frames(sock, timeout=2.0, until=None):
    """Frames from sock until EOF, timeout, or until(frame) is true.

    Returns (frames, eof); a frame is (type, flags, stream, payload)."""
    buf = b""
    frames = []
    deadline = time.monotonic() + timeout
    eof = False
    while True:
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            f = (buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n])
            buf = buf[9 + n:]
            frames.append(f)
            if until and until(f):
                return frames, False
        left = deadline - time.monotonic()
        if left <= 0:
            return frames, False
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            continue
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            eof = True
            return frames, eof
        buf += chunk


def wait_closed(sock, timeout=2.0):
    """True if the peer closed the connection within timeout (drains input)."""
    _, eof = read_frames(sock, timeout)
    return eof
