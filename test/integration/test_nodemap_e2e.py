"""The node picture end to end: the running driver serves /nodemap, and
`dra-cpu-driver map` draws it, with the claims a real gRPC kubelet prepared,
the reserved CPUs and the shared pool (docs/node-map.md)."""

import json
import os
import re
import subprocess

from claims import claim, parse_list, ref
from driver import DRIVER
from test_cli import captures  # noqa: F401 (the fixture: every capture extracted)


def cpulist(cpus):
    """96-97,288-289 from [96, 97, 288, 289]."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(run)
            run = []
        run.append(c)
    out.append(run)
    return ",".join("%d-%d" % (r[0], r[-1]) if len(r) > 1 else str(r[0]) for r in out)


def draw(d, *args):
    p = subprocess.run([DRIVER, "map", "--url", "http://127.0.0.1:%d/nodemap" % d.port,
                        *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_map_shows_claims_pods_reserved_and_shared(apiserver, make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf", "--reserved-cpus", "0,192"]).start()
    c = apiserver.put_claim(claim("db", [("cpu", "cpudevnuma001", "4")],
                                  reserved_for=[("db-0", "5d1f0e6a-0000-4000-8000-000000000001")]))
    assert kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error == ""

    doc = json.loads(draw(d, "--json"))
    assert doc["kind"] == "NodeMap" and doc["node"] == "node-1"
    (cl,) = doc["claims"]
    assert cl["name"] == "default/db" and cl["pods"] == ["db-0"] and not cl["realtime"]
    held = sorted(x["cpu"] for x in doc["cpus"] if x["claims"] == [0])
    assert len(held) == 4 and all(x["use"] == "claimed" for x in doc["cpus"] if x["claims"])
    by_cpu = {x["cpu"]: x for x in doc["cpus"]}
    assert by_cpu[0]["use"] == by_cpu[192]["use"] == "reserved"
    assert sum(x["use"] == "shared" for x in doc["cpus"]) == 384 - 2 - 4

    text = draw(d, "--color", "never")
    lines = text.splitlines()
    assert lines[0] == ("node node-1: 384 CPUs, 384 online · 1 claim · 378 shared · 4 held"
                        " · 2 reserved")
    assert "socket 0 · NUMA 0 · L3 0" in lines and "socket 1 · NUMA 1 · L3 1" in lines
    cells = re.findall(r"\s*(\d+)(.)", "".join(re.findall(r"\[([^\]]*)\]", text)))
    mark = {int(cpu): m for cpu, m in cells}
    assert sorted(mark) == list(range(384))  # every CPU drawn once
    assert sorted(c for c, m in mark.items() if m == "a") == held
    assert mark[0] == mark[192] == "r"
    assert sum(m == "." for m in mark.values()) == 378
    # one bracket per physical core: on this topology CPU n and n+192 are siblings
    for cpu in range(192):
        assert re.search(r"\[\s*%d.\s+%d.\]" % (cpu, cpu + 192), text), cpu
    legend = [l for l in lines if l.startswith("  a  ")]
    assert legend == ["  a  default/db%s pod db-0, CPUs %s" % (
        " " * (32 - len("default/db")), cpulist(held))]
    assert "\033[" not in text  # --color never
    assert "\033[" in draw(d, "--color", "always")


def test_map_refuses_a_bad_document(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind":"NodeMap","node":"n\\u001b[2J","claims":[],"cpus":[]}')
    p = subprocess.run([DRIVER, "map", "--file", str(bad)], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1 and "control character" in p.stderr, p.stderr
    p = subprocess.run([DRIVER, "map", "--url", "http://127.0.0.1:1/nodemap"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "127.0.0.1" in p.stderr
    p = subprocess.run([DRIVER, "map", "--color", "sometimes"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "usage:" in p.stderr


# The captures whose kernel isolated CPUs (test/data/topologies/README.md).
ISOLATED = {"32intel64-2p8co2t+8ve-isolated.tar.bz2": "4-7,12-15,20-23,28-31"}


def test_map_draws_every_topology_capture(apiserver, make_driver, captures):
    """Every real-machine capture the project ships (test/data/topologies):
    each CPU the topology knows is drawn exactly once, in a bracket with its
    SMT siblings, under the socket/NUMA/L3 heading of its place."""
    from test_cli import run
    assert captures
    for name, root in captures.items():
        topo = json.loads(run("--sysfs-root", root, "--print-topology").stdout)
        d = make_driver(topology=None, args=["--no-nri", "--no-bpf", "--sysfs-root", root])
        d.start()
        text = draw(d, "--color", "never")
        d.stop()
        cells = re.findall(r"\s*(\d+)(.)", "".join(re.findall(r"\[([^\]]*)\]", text)))
        drawn = sorted(int(c) for c, _ in cells)
        online = [c["cpu"] for c in topo["cpus"]]
        offline = sorted(parse_list(topo["offline"])) if topo["offline"] else []
        assert drawn == sorted(online + offline), name
        # nothing claimed or reserved here; the kernel's isolated CPUs drawn as such
        isolated = sorted(parse_list(ISOLATED[name])) if name in ISOLATED else []
        assert all(m in ".xi" for _, m in cells), name
        assert sorted(int(c) for c, m in cells if m == "i") == isolated, name
        siblings = {}
        for c in topo["cpus"]:
            siblings.setdefault(c["core"], []).append(c["cpu"])
        brackets = [sorted(int(c) for c, _ in re.findall(r"\s*(\d+)(.)", b))
                    for b in re.findall(r"\[([^\]]*)\]", text)]
        for core in siblings.values():
            assert sorted(core) in brackets, (name, core)
        sockets = {c["socket"] for c in topo["cpus"]}
        for s in sockets:
            assert re.search(r"^socket %d\b" % s, text, re.M), (name, s)
