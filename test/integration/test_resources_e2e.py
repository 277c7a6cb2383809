"""Resource hygiene of the running driver: no file descriptor leaks across
1000 prepare/unprepare cycles, and a whole scenario (slices, kubelet, NRI,
shutdown) under valgrind memcheck with no errors and no leaks."""

import os
import re
import shutil
import subprocess

import pytest

from claims import claim, ref
from driver import wait_for


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_no_fd_leak_across_1000_prepare_unprepare(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import Runtime
    sock = os.path.join(driver_dir, "nri.sock")
    rt = Runtime(sock).start()
    try:
        d = make_driver(args=["--nri-socket", sock, "--no-bpf"]).start()
        rt.wait_plugin(timeout=5)
        c = apiserver.put_claim(claim("warm", [("cpu", "cpudevnuma000", "2")]))
        for _ in range(3):  # warm up: connections, caches
            kubelet.prepare(d.dra_sock, [ref(c)])
            kubelet.unprepare(d.dra_sock, [ref(c)])
        before = fds(d.proc.pid)
        for i in range(1000):
            r = kubelet.prepare(d.dra_sock, [ref(c)])
            assert r.claims[c["metadata"]["uid"]].error == "", r
            assert kubelet.unprepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""
        after = fds(d.proc.pid)
        assert after <= before, "fds %d -> %d" % (before, after)
        assert d.cdi_specs() == []
        m = d.metrics()
        assert m['dra_cpu_prepare_claims_total{result="success"}'] == 1003
    finally:
        rt.close()


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
@pytest.mark.skipif("san" in os.path.basename(os.environ.get("B", "build")),
                    reason="valgrind cannot run a sanitizer build (ASan covers it there)")
def test_scenario_under_valgrind_is_clean(apiserver, make_driver, kubelet, driver_dir):
    from sim.nrisim import Runtime
    sock = os.path.join(driver_dir, "nri.sock")
    vlog = os.path.join(driver_dir, "valgrind.log")
    rt = Runtime(sock, request_timeout=10.0).start()
    try:
        d = make_driver(args=["--nri-socket", sock, "--no-bpf"])
        d.argv_prefix = ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                         "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99",
                         "--log-file=" + vlog]
        orig = d.argv
        d.argv = lambda: d.argv_prefix + orig()
        d.start(wait=None)
        wait_for(lambda: d.http("/readyz")[0] == 200, timeout=60, what="driver under valgrind")
        rt.wait_plugin(timeout=30)
        db = rt.add_pod("db")
        a = apiserver.put_claim(claim("a", [("cpu", "cpudevnuma000", "4")], reserved_for=[db]))
        b = apiserver.put_claim(claim("b", [("cpu", "cpudevnuma001", "0.5")]))
        r = kubelet.prepare(d.dra_sock, [ref(a), ref(b)])
        assert r.claims[a["metadata"]["uid"]].error == ""
        assert "whole number" in r.claims[b["metadata"]["uid"]].error
        shared = rt.create_container(rt.add_pod("web"), "s")
        import json
        with open(os.path.join(d.cdi_dir, d.cdi_specs()[0])) as f:
            k, v = json.load(f)["devices"][0]["containerEdits"]["env"][0].split("=", 1)
        ex = rt.create_container(db, "app", env={k: v})
        assert ex.cpus
        rt.remove_container(ex)
        kubelet.unprepare(d.dra_sock, [ref(a)])
        wait_for(lambda: len(shared.cpus) > 0, what="pool update")
        assert d.http("/metrics")[0] == 200
        apiserver.wipe_node("node-1")  # watch events, a resync
        wait_for(lambda: any(s["spec"].get("nodeName") == "node-1" for s in apiserver.slices()),
                 timeout=30, what="slices back")
        rc = d.stop(timeout=60)
    finally:
        rt.close()
    with open(vlog) as f:
        text = f.read()
    assert "Memcheck" in text, "the driver did not run under valgrind"
    assert rc == 0, text[-3000:]
    assert re.search(r"ERROR SUMMARY: 0 errors", text), text[-3000:]
    assert "definitely lost: 0 bytes" in text or "All heap blocks were freed" in text, text[-3000:]
