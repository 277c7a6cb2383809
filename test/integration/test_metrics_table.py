"""The table of metric families, user/obs/metric_families.def, against
everything else that names a family:

- the table itself reads back whole and keeps its rules (tools/metric_families.py);
- the C sources register families by id only: no family name in a string
  literal, no metrics_counter()/gauge()/histogram() outside obs/metrics.c,
  and every family of the table is registered somewhere;
- docs/metrics.md is the table (tools/metric_families.py --write);
- every dra_cpu_ name that docs, README, manifests, Helm chart, dashboards and
  comments in user/ mention is a family of the table (or a prefix of some);
- the real driver renders exactly the table's families whose condition (the
  when column) holds in its run, with the table's type, help, labels and
  buckets: in the default run, with real-time CPUs, and with the optional
  families turned off by a configuration file.

The dashboards and alert rules are checked against the table in test_dashboards.py.
"""

import glob
import os
import re
import sys

import pytest

from conftest import ROOT
from driver import parse_metrics

sys.path.insert(0, os.path.join(ROOT, "tools"))
import metric_families as mf  # noqa: E402


def table():
    return mf.load(ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------------------ the table

def test_table_reads_back_whole():
    t = table()
    # An empty answer (file moved, parser stale) would pass every check below.
    assert len(t.families) >= 80, sorted(t.families)
    assert "ALWAYS" in t.when and t.buckets
    types = {f.type for f in t.families.values()}
    assert types == {"counter", "gauge", "histogram"}, types


@pytest.mark.parametrize("bad,why", [
    ('MF(X_TOTAL, COUNTER, "dra_cpu_y_total", NULL, ALWAYS, NONE, "Y.")', "id is not"),
    ('MF(X, COUNTER, "dra_cpu_x", NULL, ALWAYS, NONE, "X.")', "_total"),
    ('MF(X, GAUGE, "dra_cpu_x", NULL, SOMETIMES, NONE, "X.")', "when"),
    ('MF(X, HISTOGRAM, "dra_cpu_x", NULL, ALWAYS, NONE, "X.")', "bucket set"),
    ('MF(X, GAUGE, "dra_cpu_x", "a,a", ALWAYS, NONE, "X.")', "bad labels"),
    ('MF(X, GAUGE, "dra_cpu_x", NULL, ALWAYS, NONE, "no full stop")', "sentence"),
    ('MF(X, GAUGE, "dra_cpu_x", NULL, ALWAYS, NONE)', "7 arguments"),
    ('MB(B, 1, 2, 2)', "ascending"),
    ('MF(X, GAUGE, "dra_cpu_x", NULL, ALWAYS, NONE, "X.")\n'
     'MF(X, GAUGE, "dra_cpu_x", NULL, ALWAYS, NONE, "X.")', "twice"),
])
def test_table_refuses_what_breaks_its_rules(bad, why):
    with pytest.raises(mf.TableError, match=why):
        mf.parse('MW(ALWAYS, "always")\n' + bad + "\n")


def test_table_parses_strings_as_c_does():
    t = mf.parse('MW(ALWAYS, "always")\nMB(B, 0.5, 1)\n/* Things */\n'
                 'MF(X_SECONDS, HISTOGRAM, "dra_cpu_x_seconds", "a,b", ALWAYS, B,\n'
                 '   "One (a, b) \\"quoted\\" "\n   "and joined.")\n')
    f = t.families["dra_cpu_x_seconds"]
    assert f.help == 'One (a, b) "quoted" and joined.'
    assert f.labels == ("a", "b") and f.buckets == (0.5, 1.0) and f.section == "Things"


# ---------------------------------------------------------------- the sources

def user_sources():
    return sorted(glob.glob(os.path.join(ROOT, "user", "*", "*.[ch]")))


def strip_comments(src):
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", src, flags=re.S)


def test_sources_register_families_by_id_only():
    named, direct, used = [], [], set()
    for path in user_sources():
        rel = os.path.relpath(path, ROOT)
        code = strip_comments(read(path))
        if re.search(r'"[^"\n]*dra_cpu_', code):
            named.append(rel)
        if rel not in ("user/obs/metrics.c", "user/obs/metrics.h") and \
                re.search(r"\bmetrics_(counter|gauge|histogram)\s*\(", code):
            direct.append(rel)
        used |= set(re.findall(r"\bMF_([A-Z0-9_]+)\b", code))
    assert not named, "a family name in a string literal outside the table: %s" % named
    assert not direct, "families registered by name, not from the table: %s" % direct
    unused = sorted(f.name for f in table().families.values() if f.id not in used)
    assert not unused, "in the table, registered nowhere: %s" % unused


# -------------------------------------------------------------------- the docs

def test_docs_metrics_md_is_the_table():
    assert read(os.path.join(ROOT, mf.DOC)) == mf.markdown(table()), \
        "docs/metrics.md differs from the table: run tools/metric_families.py --write"


def mention_files():
    pats = ["docs/*.md", "README.md", "test/README.md", "dashboards/*", "deploy/**/*",
            "user/*/*.[ch]"]
    out = []
    for p in pats:
        out += [f for f in glob.glob(os.path.join(ROOT, p), recursive=True) if os.path.isfile(f)]
    return sorted(out)


def test_every_family_mentioned_exists():
    """Names, prefixes (dra_cpu_http_*) and the labels of name{a,b="x"} in
    prose (test_dashboards.py checks the labels of queries and alert tests)."""
    fams = table().families
    bad = []
    for path in mention_files():
        prose = not path.startswith(os.path.join(ROOT, "dashboards"))
        for m in re.finditer(r"\bdra_cpu_\w*(\*?)(\{[^}]*\})?", read(path)):
            n, labels = m.group(0).split("{")[0], m.group(2)
            if n.endswith(("*", "_")):  # a prefix of some
                ok = any(f.startswith(n.rstrip("*")) for f in fams)
            else:
                f = mf.family_of(n, fams)
                ok = f is not None
                if ok and labels and prose:
                    names = {x.split("=")[0].strip()
                             for x in re.sub(r'"[^"]*"', "", labels[1:-1]).split(",")}
                    ok = names <= set(fams[f].labels) | ({"le"} if n.endswith("_bucket")
                                                         else set())
            if not ok:
                bad.append("%s: %s" % (os.path.relpath(path, ROOT), m.group(0)))
    assert not bad, "not a family of the table (or not its labels): %s" % bad


# ------------------------------------------------------------ the live driver

def unescape_help(s):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def check_served(text, expected, label):
    """/metrics text renders exactly the families named in expected, as the table says."""
    fams = table().families
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert set(helps) == set(types), label
    unknown = sorted(set(types) - set(fams))
    assert not unknown, "%s: served, not in the table: %s" % (label, unknown)
    missing = sorted(set(expected) - set(types))
    extra = sorted(set(types) - set(expected))
    assert not missing and not extra, "%s: missing %s, not expected %s (when: %s)" % (
        label, missing, extra, {n: fams[n].when for n in missing + extra})
    for name, typ in types.items():
        f = fams[name]
        assert typ == f.type, "%s: %s served as %s, table says %s" % (label, name, typ, f.type)
        assert unescape_help(helps[name]) == f.help, (label, name, helps[name])
    for series in parse_metrics(text):
        name, _, labels = series.partition("{")
        fam = mf.family_of(name, fams)
        got = re.findall(r'(\w+)="(?:[^"\\]|\\.)*"', labels)
        want = list(fams[fam].labels) + (["le"] if name.endswith("_bucket") else [])
        assert got == want, "%s: %s has labels %s, table says %s" % (label, series, got, want)
        if name.endswith("_bucket"):
            le = re.search(r'le="([^"]+)"', labels).group(1)
            assert le == "+Inf" or float(le) in fams[fam].buckets, (label, series)


def expected_families(holds):
    return {n for n, f in table().families.items() if f.when in holds}


def test_driver_serves_exactly_the_tables_families(make_driver, tmp_path):
    # The default run: synthetic topology (no hotplug), no config file, no
    # --rt-cpus; events, claim status and the BPF check on by default.
    d = make_driver(args=["--no-nri"]).start()
    code, text = d.http("/metrics")
    assert code == 200, d.log()
    holds = {"ALWAYS", "EVENTS", "CLAIM_STATUS", "BPF"}
    if "event=schedstat_unavailable" not in d.log():
        holds.add("SCHEDSTAT")
    check_served(text, expected_families(holds), "default run")

    # A configuration file that turns the optional families off.
    conf = tmp_path / "config.yaml"
    conf.write_text("bpf: false\nevents: none\nclaimStatus: false\n")
    d = make_driver(args=["--no-nri", "--config", str(conf)]).start()
    code, text = d.http("/metrics")
    assert code == 200, d.log()
    check_served(text, expected_families({"ALWAYS", "CONFIG_FILE"}), "config file run")


NCPU = os.cpu_count() or 1
RT_CPU = NCPU - 1
# --rt-cpus takes a CPU away from the ordinary ones; it needs another one left.
# The driver's real-time control writes cpusets: root and a cpuset hierarchy.
RT_SKIP = ("fewer than two CPUs" if NCPU < 2 else
           "not root (real-time CPUs need cpuset writes)" if os.geteuid() != 0 else
           "no cpuset cgroup hierarchy" if not (
               os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus") or
               os.path.exists("/sys/fs/cgroup/cpuset.cpus.effective")) else None)


@pytest.mark.skipif(RT_SKIP is not None, reason=str(RT_SKIP))
def test_driver_with_rt_cpus_serves_the_rt_families(make_driver):
    # This machine's own topology, its last CPU a real-time one (no claim, so
    # no cpuset is written): CPU hotplug is followed, rtctl's families are
    # there, and the monitor's once its BPF program loads.
    d = make_driver(topology=None, args=["--no-nri", "--rt-cpus", str(RT_CPU)]).start()
    code, text = d.http("/metrics")
    assert code == 200, d.log()
    holds = {"ALWAYS", "EVENTS", "CLAIM_STATUS", "BPF", "HOTPLUG", "RT"}
    if "event=schedstat_unavailable" not in d.log():
        holds.add("SCHEDSTAT")
    if "event=rt_monitor_loaded" in d.log():
        holds.add("RT_MONITOR")
    else:
        assert "event=rt_monitor_not_loaded" in d.log(), d.log()
    check_served(text, expected_families(holds), "--rt-cpus run")
    # The capacity the dashboard draws bandwidth against is the kernel's, not a guess.
    from test_rt_slices import kernel_capacity_milli
    cap = [v for k, v in parse_metrics(text).items() if k == "dra_cpu_rt_bandwidth_capacity"]
    assert cap == [kernel_capacity_milli() / 1000], d.log()
