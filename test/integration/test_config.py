"""--config: the real driver reads a configuration file, flags and the
environment win over it, and a bad file stops it with status 2 and one line
naming the file, the line and the key (docs/config.md). Every file is laid
out as the kubelet mounts a ConfigMap volume (test/sim/volume.py)."""
import json
import os
import subprocess

import pytest

from driver import wait_for
from sim import volume

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, os.environ.get("B", "build"), "dra-cpu-driver")
TOPO = os.path.join(ROOT, "test", "data", "topo", "synthetic-384.json")


def run(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DRA_CPU_")}
    e.update(env or {})
    return subprocess.run([DRIVER, "--topology-file", TOPO, "--hostname-override", "node-x",
                           *args], capture_output=True, text=True, env=e, timeout=60)


def device_list(p):
    assert p.returncode == 0, p.stderr
    return [d for s in json.loads(p.stdout)["items"] for d in s["spec"]["devices"]]


def devices(p):
    return [d["name"] for d in device_list(p)]


@pytest.fixture
def conf(tmp_path):
    """Writes config.yaml into a ConfigMap volume (each call an update in
    place) and returns the path the container reads: a link."""
    def write(text):
        volume.write(str(tmp_path / "configmap"), {"config.yaml": text})
        return volume.path(str(tmp_path / "configmap"), "config.yaml")
    return write


def test_file_sets_the_mode(conf):
    path = conf("apiVersion: v1alpha1\ncpuDeviceMode: individual\nreservedCPUs: \"0-1\"\n")
    devs = device_list(run("--config", path, "--dry-run"))
    assert devs[0]["name"] == "cpudev000" and len(devs) == 382
    cpus = {d["attributes"]["dra.cpu/cpuID"]["int"] for d in devs}
    assert 0 not in cpus and 1 not in cpus and 2 in cpus


def test_environment_and_flag_win_over_the_file(conf):
    path = conf("cpuDeviceMode: individual\ngroupBy: socket\n")
    assert devices(run("--config", path, "--dry-run",
                       env={"DRA_CPU_CPU_DEVICE_MODE": "grouped"}))[0] == "cpudevsocket000"
    assert devices(run("--config", path, "--dry-run", "--group-by", "machine",
                       env={"DRA_CPU_CPU_DEVICE_MODE": "grouped"})) == ["cpudevmachine"]
    assert devices(run("--dry-run", env={"DRA_CPU_CONFIG": path}))[0] == "cpudev000"


@pytest.mark.parametrize("text,line,want", [
    ("cpuDeviceMode: grouped\nfoo: 1\n", 2, "unknown key foo"),
    ("groupBy: numanode\ncpuDeviceMode: single\n", 2,
     "cpuDeviceMode: unknown value 'single' (one of grouped|individual)"),
    ("cpuDeviceMode: grouped\ncpuDeviceMode: individual\n", 2,
     "key cpuDeviceMode repeated (first on line 1)"),
    ("bpf: yes\n", 1, "bpf: must be a boolean, not a string"),
    ("kubeletRootDir: /k\n", 1, "key kubeletRootDir is not configurable in the file"),
    ("apiVersion: v1\n", 1, "unsupported apiVersion 'v1'"),
    ("nri:\n  enabled: true\n", 2, "key nri: the value must be a plain value, not a map"),
])
def test_bad_file_exits_2_naming_file_line_and_key(conf, text, line, want):
    path = conf(text)
    p = run("--config", path, "--dry-run")
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith("dra-cpu-driver: config file %s line %d: " % (path, line)), p.stderr
    assert want in p.stderr
    assert p.stderr.count("\n") == 1


def test_unreadable_file_exits_2(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path in (str(tmp_path / "absent.yaml"), str(tmp_path), str(tmp_path / "fifo")):
        p = run("--config", path, "--dry-run")
        assert p.returncode == 2, path
        assert p.stderr.startswith("dra-cpu-driver: config file %s: " % path), p.stderr


def test_help_states_precedence_and_file_keys():
    p = run("--help")
    assert p.returncode == 0
    assert "a flag wins over its environment variable, which wins over the\nconfiguration file" \
        in p.stdout.replace("Precedence: a", "a")
    assert "file: cpuDeviceMode" in p.stdout and "file: reservedCPUs" in p.stdout


def test_expose_pcie_roots_from_file_env_and_flag(conf, tmp_path):
    """exposePCIeRoots is a key of the file (dra-cpu takes it there, where
    the reference driver wants a flag), the flag and the environment too."""
    def on(p):
        assert p.returncode == 0, p.stderr
        return "event=pcie_roots_unknown" in p.stderr  # a topology file has no PCI tree

    assert not on(run("--dry-run"))
    assert on(run("--config", conf("exposePCIeRoots: true\n"), "--dry-run"))
    assert on(run("--dry-run", "--expose-pcie-roots"))
    assert on(run("--dry-run", env={"DRA_CPU_EXPOSE_PCIE_ROOTS": "true"}))
    assert not on(run("--config", conf("exposePCIeRoots: true\n"), "--dry-run",
                      "--no-expose-pcie-roots"))
    p = run("--config", conf("exposePCIeRoots: \"on\"\n"), "--dry-run")
    assert p.returncode == 2 and "exposePCIeRoots: must be a boolean" in p.stderr


def test_configmap_volume_is_read_through_its_links(conf, tmp_path):
    """config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>/: the
    DaemonSet's layout. Refusing the links made every pod exit 2."""
    path = conf("cpuDeviceMode: individual\n")
    assert os.path.islink(path) and os.path.islink(os.path.join(os.path.dirname(path), "..data"))
    assert devices(run("--config", path, "--dry-run"))[0] == "cpudev000"
    path = conf("cpuDeviceMode: grouped\n")  # updated in place: the same path, a new ..data
    assert devices(run("--config", path, "--dry-run"))[0] == "cpudevnuma000"


def test_links_must_still_end_in_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.mkdir(tmp_path / "dir")
    for end, what in (("fifo", "is a FIFO"), ("dir", "is a directory")):
        link = tmp_path / ("to-" + end)
        os.symlink(tmp_path / end, link)
        p = run("--config", str(link), "--dry-run")
        assert p.returncode == 2 and what + ", not a regular file" in p.stderr, p.stderr


def test_a_changed_configmap_asks_for_a_restart(make_driver, conf):
    """The kubelet swaps ..data under the running driver: it keeps the
    configuration it started with, says once that a restart applies the new
    one, and says so again when the file is back (docs/config.md)."""
    path = conf("cpuDeviceMode: grouped\n")
    d = make_driver(args=["--config", path]).start()
    assert d.metrics()["dra_cpu_config_restart_required"] == 0
    conf("cpuDeviceMode: individual\n")
    wait_for(lambda: d.metrics()["dra_cpu_config_restart_required"] == 1, what="stale config")
    assert d.log().count("event=config_file_changed") == 1, d.log()
    assert "restart the driver's pod to apply it" in d.log()
    conf("cpuDeviceMode: grouped\n")
    wait_for(lambda: d.metrics()["dra_cpu_config_restart_required"] == 0, what="restored")
    assert "event=config_file_restored" in d.log()
    assert d.log().count("event=config_file_changed") == 1
