"""External allocators (--allocator external, the reference driver's
`allocator: external`): every group publishes dra.cpu/cpuIDs and
dra.cpu/smtLayout under the reference driver's names and encoding, within
the API's limits on every topology capture and the 1024-CPU machine; a claim
that names no cpuset is refused and the driver's own choice never runs; a
claim that names one gets exactly those CPUs."""

import json
import os

import pytest

from claims import claim, cpuset_override, parse_list, ref
from driver import wait_for
from test_cli import DATA, captures, run, validate  # noqa: F401

ONE_K = os.path.join(DATA, "synthetic-1024.json")
GROUPS = [[], ["--group-by", "socket"], ["--group-by", "machine"]]


def decode_layout(s):
    """dra.cpu/smtLayout (v1) back into {cpu: sibling or None}."""
    out = {}
    for entry in s.split(";"):
        lst, _, stride = entry.partition(">")
        cpus = sorted(parse_list(lst))
        if not stride:
            out.update({c: None for c in cpus})
            continue
        left = set(cpus)
        for c in cpus:
            if c in left:
                left -= {c, c + int(stride)}
                assert c + int(stride) in cpus, (s, c)
                out[c], out[c + int(stride)] = c + int(stride), c
    return out


def siblings(topo):
    by_core = {}
    for c in topo["cpus"]:
        by_core.setdefault(c["core"], []).append(c["cpu"])
    out = {}
    for cpus in by_core.values():
        out.update({c: (next((x for x in cpus if x != c), None)) for c in cpus})
    return out


def groups(items):
    return [d for s in items for d in s["spec"]["devices"]]


def check(topo_args, mode, tmp_path, reserved=()):
    r = run(*topo_args, "--dry-run", "--hostname-override", "n1", "--allocator", "external",
            *mode, *(["--reserved-cpus", ",".join(map(str, reserved))] if reserved else []))
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)["items"]
    t = json.loads(run(*topo_args, "--print-topology").stdout)
    want = siblings(t)
    for dev in groups(items):
        a = dev["attributes"]
        ids, layout = a["dra.cpu/cpuIDs"]["string"], a["dra.cpu/smtLayout"]["string"]
        assert len(ids) <= 64 and len(layout) <= 64
        assert len(parse_list(ids)) == a["dra.cpu/numCPUs"]["int"]
        assert not parse_list(ids) & set(reserved)
        # node-wide, reserved CPUs included: every CPU's sibling, as the topology says
        assert decode_layout(layout) == want
    return items


@pytest.mark.parametrize("mode", GROUPS)
def test_groups_carry_cpu_ids_and_the_smt_layout_on_1024_cpus(mode, tmp_path):
    items = check(["--topology-file", ONE_K], mode, tmp_path, reserved=(0, 512))
    validate(items, tmp_path)
    a = groups(items)[0]["attributes"]
    if not mode:
        assert a["dra.cpu/cpuIDs"]["string"] == "1-63,513-575"
    assert a["dra.cpu/smtLayout"]["string"] == "0-1023>512"


def test_every_capture_fits_and_decodes(captures, tmp_path):  # noqa: F811
    items = []
    for f, root in captures.items():
        r = run("--sysfs-root", root, "--print-topology")
        t = json.loads(r.stdout)
        if any(len([c for c in t["cpus"] if c["core"] == k["core"]]) > 2 for k in t["cpus"]):
            # three threads a core: the encoding cannot say it; the driver refuses
            r = run("--sysfs-root", root, "--dry-run", "--allocator", "external")
            assert r.returncode != 0 and "three or more" in r.stderr, f
            continue
        items += check(["--sysfs-root", root], [], tmp_path)
    validate(items, tmp_path)


def test_off_by_default_and_grouped_only():
    r = run("--topology-file", ONE_K, "--dry-run", "--hostname-override", "n1")
    assert "dra.cpu/cpuIDs" not in r.stdout and "smtLayout" not in r.stdout
    r = run("--topology-file", ONE_K, "--dry-run", "--allocator", "external",
            "--cpu-device-mode", "individual")
    assert r.returncode == 2 and "allocator external needs cpu-device-mode grouped" in r.stderr


def test_a_claim_without_a_cpuset_is_refused_and_one_with_gets_exactly_it(apiserver,
                                                                          make_driver, kubelet):
    d = make_driver(args=["--no-nri", "--no-bpf", "--allocator", "external",
                          "--reserved-cpus", "0"]).start()
    d.wait_ready()
    dev = next(x for s in apiserver.slices() for x in s["spec"]["devices"]
               if x["name"] == "cpudevnuma000")
    assert "dra.cpu/cpuIDs" in dev["attributes"]
    c = apiserver.put_claim(claim("auto", [("cpus", "cpudevnuma000", "4")]))
    err = kubelet.prepare(d.dra_sock, [ref(c)]).claims[c["metadata"]["uid"]].error
    assert "names no cpuset" in err and "external allocator" in err
    assert d.cdi_specs() == []  # nothing was chosen or written
    ev = wait_for(lambda: apiserver.events(), what="the refusal event")
    assert ev[0]["reason"] == "PrepareRefused" and "names no cpuset" in ev[0]["note"]
    ids = sorted(parse_list(dev["attributes"]["dra.cpu/cpuIDs"]["string"]))
    pick = "%d-%d" % (ids[2], ids[5])
    c2 = apiserver.put_claim(claim("exact", [("cpus", "cpudevnuma000", "4")],
                                   configs=[cpuset_override(pick, ["cpus"])]))
    r = kubelet.prepare(d.dra_sock, [ref(c2)]).claims[c2["metadata"]["uid"]]
    assert r.error == ""
    with open(os.path.join(d.cdi_dir, d.cdi_specs()[0])) as f:
        env = json.load(f)["devices"][0]["containerEdits"]["env"][0]
    assert parse_list(env.split("=", 1)[1]) == parse_list(pick)
