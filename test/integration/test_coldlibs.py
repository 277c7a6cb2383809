"""The daemon hands back the pages of the libraries it loads and never calls
(host/coldlibs, docs/memory.md): once at start and again 10 s later; serving
the kubelet and the API server brings none of their pages back; the libraries
it calls stay resident; --no-release-unused-libraries keeps them all.

What stays resident after a release also depends on the rest of the machine:
a page another process maps stays (shared), and becomes the daemon's alone
when that process exits. So the serving check pages the released libraries
out of the daemon itself (process_madvise), notes which of their pages are
still in its page tables, serves, and asks which pages are there now that
were not: only the daemon's own accesses put them there. The driver is
linked with -z now, so no lazy symbol lookup of its own walks those
libraries later; one lazily bound library (nghttp2) does on a first call,
so a first claim is served before."""

import ctypes
import os
import re
import struct

from claims import claim, ref
from driver import wait_for

# Libraries the running daemon calls (cmd/daemon.c used_symbols): never released.
CALLED = ("libcurl.so", "libssl.so", "libcrypto.so", "libnghttp2.so", "libevent-",
          "libjson-c.so", "libprotobuf-c.so", "libbpf.so", "libc.so", "libm.so", "ld-linux")


def smaps(pid):
    """{path: {"Rss": KiB, "Private_Clean": KiB, ...}} over file-backed mappings."""
    out, cur = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                cur = head[5] if len(head) > 5 and head[5].startswith("/") else None
                continue
            if cur and head[0].endswith(":") and len(head) >= 2 and head[1].isdigit():
                d = out.setdefault(cur, {})
                d[head[0][:-1]] = d.get(head[0][:-1], 0) + int(head[1])
    return out


def released(d):
    """Paths the daemon logged as released (library_released, debug)."""
    return {m.group(1) for m in re.finditer(r'event=library_released path="([^"]+)"', d.log())}


SYS_PROCESS_MADVISE = 440  # the same number on every architecture
MADV_PAGEOUT = 21


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def page_out(pid, paths):
    """MADV_PAGEOUT on pid's read-only private mappings of paths, as the daemon does."""
    iov = [IoVec(a, b - a) for _, a, b in mappings(pid, paths)]
    assert iov
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.pidfd_open(pid)
    try:
        arr = (IoVec * len(iov))(*iov)
        r = libc.syscall(SYS_PROCESS_MADVISE, fd, arr, len(iov), MADV_PAGEOUT, 0)
        assert r >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)


def mappings(pid, paths):
    """[(path, start, end)] of pid's read-only private mappings of paths."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            head = line.split()
            if len(head) > 5 and head[5] in paths and head[1] in ("r--p", "r-xp"):
                a, b = (int(x, 16) for x in head[0].split("-"))
                out.append((head[5], a, b))
    return out


def present_pages(pid, paths):
    """{(path, address)} of those mappings' pages in pid's page tables
    (/proc/PID/pagemap bit 63)."""
    page = os.sysconf("SC_PAGE_SIZE")
    out = set()
    with open("/proc/%d/pagemap" % pid, "rb") as pm:
        for path, a, b in mappings(pid, paths):
            pm.seek(a // page * 8)
            data = pm.read((b - a) // page * 8)
            for i in range(len(data) // 8):
                if struct.unpack_from("<Q", data, i * 8)[0] >> 63:
                    out.add((path, a + i * page))
    return out


def serve_a_claim(apiserver, kubelet, d, name="db"):
    c = apiserver.put_claim(claim(name, [("cpu", "cpudevnuma001", "2")]))
    r = kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]]
    assert r.error == ""
    assert kubelet.unprepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""


def test_unused_libraries_leave_and_stay_gone(apiserver, make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start(wait="ready")
    m = re.search(r"event=libraries_released pass=1 libraries=(\d+) mapped_kib=(\d+) "
                  r"rss_before_kib=(\d+) rss_after_kib=(\d+)", d.log())
    assert m, d.log()
    n = int(m.group(1))
    paths = released(d)
    # libcurl's protocol chain (a dozen libraries on Debian) and start-up's own.
    # (What the resident set loses depends on what other processes map the
    # same files: their pages are shared and stay; the unit test measures it.)
    assert n >= 5 and len(paths) >= n, (n, paths)
    for p in paths:
        base = os.path.basename(p)
        assert not base.startswith(CALLED), "a library the daemon calls was released: " + p
    wait_for(lambda: "libraries_released pass=2" in d.log(), 20, "the second release")
    # A first call through a lazily bound symbol of a library (nghttp2 is one)
    # walks every library's symbol hash: serve once so that is done, then
    # again with their pages gone.
    serve_a_claim(apiserver, kubelet, d, "warm")
    page_out(d.proc.pid, paths)
    before = present_pages(d.proc.pid, paths)
    serve_a_claim(apiserver, kubelet, d, "db")
    mapped = smaps(d.proc.pid)
    # Serving touched none of them: no page of theirs came into the daemon's
    # page tables (what stayed in them, shared with another process or written
    # by the loader, is no new access).
    new = sorted(present_pages(d.proc.pid, paths) - before)
    assert new == [], new[:20]
    # The libraries it calls are resident.
    for lib in ("libcurl.so", "libssl.so", "libevent-"):
        rss = sum(v.get("Rss", 0) for p, v in mapped.items()
                  if os.path.basename(p).startswith(lib))
        assert rss > 0, lib


def test_the_release_can_be_turned_off(apiserver, make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf"]).start(wait="ready")
    paths = released(d)
    assert paths
    d.stop()
    off = make_driver(args=["--no-nri", "--no-bpf", "--no-release-unused-libraries"])
    off.start(wait="ready")
    assert "libraries_released" not in off.log()
    assert "release_unused_libraries=false" in off.log()
    serve_a_claim(apiserver, kubelet, off)
    mapped = smaps(off.proc.pid)
    # the same libraries now have clean pages resident in the daemon (its own,
    # or shared with whatever else maps them)
    clean = sum(mapped[p].get("Private_Clean", 0) + mapped[p].get("Shared_Clean", 0)
                for p in paths if p in mapped)
    assert clean > 0, {p: mapped.get(p) for p in paths}
