"""dra-cpu-alloc: the allocator from the command line.

Replays kubelet's takeByTopology cases (test/data/allocator/kubelet_cases.json)
through the real binary, with each fixture's kubelet header passed as --header,
and checks flags, exit codes and messages.
"""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, os.environ.get("B", "build"), "dra-cpu-alloc")
CASES = os.path.join(ROOT, "test", "data", "allocator", "kubelet_cases.json")


def run(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def write_topology(path, rows, l3_key="l3"):
    """rows: [cpu, core, socket, numa, l3] as in the fixture file."""
    cpus = [{"cpu": c, "socket": s, "numa": n, "core": k, l3_key: l} for c, k, s, n, l in rows]
    with open(path, "w") as f:
        json.dump({"cpus": cpus, "offline": ""}, f)
    return str(path)


with open(CASES) as f:
    FIXTURES = json.load(f)

# kubelet's topoDualSocketHT: 2 sockets, 6 cores, SMT-2, siblings N and N+6
DSHT = FIXTURES["topologies"]["topoDualSocketHT"]["cpus"]


@pytest.fixture
def dsht(tmp_path):
    return write_topology(tmp_path / "dsht.json", DSHT)


def take_cases():
    for c in FIXTURES["take"]:
        yield pytest.param(c, id=c["test"].split("/", 1)[1][:90])


def test_take_cases_are_there():
    """An empty table would parametrize into a skip, not a failure."""
    assert len(list(take_cases())) >= 50


@pytest.mark.parametrize("case", take_cases())
def test_replays_kubelet_take_case(tmp_path, case):
    topo = FIXTURES["topologies"][case["topo"]]
    h = topo["header"]
    args = ["--topology", write_topology(tmp_path / "t.json", topo["cpus"]),
            "--available", case["available"], "--count", str(case["count"]),
            "--policy", case["policy"],
            "--header", "%d,%d,%d,%d,%d" % (h["cpus"], h["cores"], h["sockets"], h["numa"], h["uncore"])]
    if case["align_l3"]:
        args.append("--align-l3")
    if case["policy"] == "distributed":
        args += ["--group-size", str(case["group_size"])]
    rc, out, err = run(*args)
    if "error" in case:
        assert (rc, out) == (1, "")
        assert err == "dra-cpu-alloc: %s\n" % case["error"]
    else:
        assert (rc, err) == (0, "")
        assert out == case["expect"] + "\n"


def test_prints_a_cpu_list_and_exits_0(dsht):
    assert run("--topology", dsht, "--available", "0-11", "--count", "8") == (0, "0-2,4,6-8,10\n", "")
    assert run("--topology", dsht, "--available", "0-11", "--count", "0") == (0, "\n", "")


def test_accepts_uncore_for_l3(tmp_path):
    t = write_topology(tmp_path / "u.json", FIXTURES["topologies"]["topoUncoreSingleSocketNoSMT"]["cpus"],
                       l3_key="uncore")
    assert run("--topology", t, "--available", "1-15", "--count", "10", "--align-l3",
               "--header", "16,16,1,0,4") == (0, "1-2,4-11\n", "")


def test_full_cores_checks_and_reserved_siblings(dsht):
    rc, out, err = run("--topology", dsht, "--available", "0-11", "--count", "3", "--full-cores")
    assert (rc, out) == (1, "")
    assert err == "dra-cpu-alloc: SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2\n"
    # kubelet's ExpectDoNotAllocPartialCPU: reserved 1 and 6 take cores 0 and 1 away
    rc, out, err = run("--topology", dsht, "--available", "0,2-5,7-11", "--count", "10", "--full-cores",
                       "--reserved", "1,6")
    assert (rc, out) == (1, "")
    assert err == ("dra-cpu-alloc: SMT Alignment Error: not enough free physical CPUs: "
                   "available physical CPUs = 8, requested CPUs = 10, CPUs per core = 2\n")


def test_mixed_cores_takes_whole_cores_only_and_spares_them(dsht):
    # topoDualSocketHT: core c is CPUs c and c + 6. 0 and 1 are free, their
    # siblings 6 and 7 busy; core 2 (2, 8) is wholly free
    base = ("--topology", dsht, "--available", "0-2,8", "--count", "2")
    assert run(*base, "--full-cores", "--mixed-cores") == (0, "2,8\n", "")
    # kubelet's check counts 4 free CPUs and hands out the half cores 0 and 1
    assert run("--topology", dsht, "--available", "0-2,8", "--count", "4",
               "--full-cores") == (0, "0-2,8\n", "")
    # one CPU, 7 busy: kubelet's L3 rule breaks core 0, the driver takes 1
    one = ("--topology", dsht, "--available", "0-6,8-11", "--count", "1", "--align-l3")
    assert run(*one) == (0, "0\n", "")
    assert run(*one, "--mixed-cores") == (0, "1\n", "")
    rc, out, err = run("--topology", dsht, "--available", "0-2,8", "--count", "4", "--full-cores",
                       "--mixed-cores")
    assert (rc, out) == (1, "")
    assert err == ("dra-cpu-alloc: SMT Alignment Error: not enough free physical CPUs: "
                   "available physical CPUs = 2, requested CPUs = 4, CPUs per core = 2\n")


def test_prefer_takes_the_hinted_cpus_first(dsht):
    # kubelet's "Request 8 CPUs, BitMask on Socket 1": all of NUMA 1, then core 0
    assert run("--topology", dsht, "--available", "0-11", "--count", "8",
               "--prefer", "1,3,5,7,9,11") == (0, "0-1,3,5-7,9,11\n", "")


def test_help_lists_every_option_and_exits_0():
    rc, out, err = run("--help")
    assert (rc, err) == (0, "")
    for opt in ("--topology", "--available", "--count", "--policy", "--align-l3", "--full-cores",
                "--mixed-cores", "--group-size", "--reserved", "--prefer", "--header", "--help"):
        assert opt in out


@pytest.mark.parametrize("args,message", [
    ([], "--topology FILE is required"),
    (["--topology", "T"], "--available LIST is required"),
    (["--topology", "T", "--available", "0-3"], "--count N is required"),
    (["--topology", "T", "--available", "0-3", "--count", "two"], '--count: "two" is not a number in 0-8192'),
    (["--topology", "T", "--available", "0-3", "--count", "-1"], "is not a number in 0-8192"),
    (["--topology", "T", "--available", "3-0", "--count", "1"], '--available: "3-0" is not a CPU list'),
    (["--topology", "T", "--available", "0-3", "--count", "1", "--policy", "tight"],
     '--policy: "tight" is not one of packed, distributed, spread-cores'),
    (["--topology", "T", "--available", "0-3", "--count", "2", "--policy", "spread-cores",
      "--full-cores"], "--policy spread-cores cannot be combined with --full-cores"),
    (["--topology", "T", "--available", "0-3", "--count", "2", "--policy", "spread-cores",
      "--align-l3"], "--policy spread-cores cannot be combined with --align-l3"),
    (["--topology", "T", "--available", "0-3", "--count", "2", "--policy", "distributed",
      "--align-l3"], "--policy distributed cannot be combined with --align-l3"),
    (["--topology", "T", "--available", "0-3", "--count", "2", "--group-size", "2"],
     "--group-size applies to --policy distributed only"),
    (["--topology", "T", "--available", "0-3", "--count", "2", "--policy", "distributed",
      "--group-size", "0"], '--group-size: "0" is not a number in 1-8192'),
    (["--topology", "T", "--available", "0-3", "--count", "1", "--header", "8,4,1"],
     '--header: "8,4,1" is not five counts'),
    (["--topology", "T", "--available", "0-3", "--count", "1", "--bogus"], 'unknown option "--bogus"'),
    (["--topology", "T", "--available", "0-3", "--count", "1", "extra"], 'unexpected argument "extra"'),
    (["--topology", "T", "--available", "0-3", "--count"], "--count needs a value"),
])
def test_bad_flags_exit_2_naming_the_flag(args, message):
    rc, out, err = run(*args)
    assert (rc, out) == (2, "")
    assert err.startswith("dra-cpu-alloc: ") and message in err, err


def test_unreadable_topology_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cpus": []}')
    rc, out, err = run("--topology", str(bad), "--available", "0", "--count", "1")
    assert (rc, out) == (2, "")
    assert err == 'dra-cpu-alloc: %s: "cpus" is empty\n' % bad
    rc, out, err = run("--topology", str(tmp_path / "none.json"), "--available", "0", "--count", "1")
    assert (rc, out) == (2, "")
    assert "No such file or directory" in err


def test_not_enough_cpus_exits_1_with_kubelets_text(dsht):
    rc, out, err = run("--topology", dsht, "--available", "0,2,4,6", "--count", "5")
    assert (rc, out) == (1, "")
    assert err == "dra-cpu-alloc: not enough cpus available to satisfy request: requested=5, available=4\n"
