"""dashboards/: the Grafana dashboard and the Prometheus alert rules.

- the dashboard is Grafana schema 39 JSON with a Prometheus datasource
  variable every panel uses, a sane grid, and the panels the issue asks for;
- every PromQL expression (dashboard queries and alert rules) parses
  (promtool check rules; dashboard queries are wrapped as recording rules
  with the Grafana variables substituted);
- every metric name they use is registered in user/*/*.c, with labels and a
  type that fit the query (rate() only on counters and histogram series,
  `by (...)` only on labels the family has or the scrape adds);
- the real driver, started against the API-server simulator, serves every
  one of those families on /metrics. Families registered by user/pinning/bpfmon.c
  are only required when `dra_cpu_bpf_loaded 1` shows the
  BPF check loaded (not without CAP_BPF/CAP_PERFMON), and the kernel's
  schedstat family only where /proc/schedstat is readable;
- the alert rules pass `promtool test rules dashboards/alerts_test.yaml`.
"""

import glob
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT

DASH_DIR = os.path.join(ROOT, "dashboards")
DASHBOARD = os.path.join(DASH_DIR, "dra-cpu.json")
ALERTS = os.path.join(DASH_DIR, "alerts.yaml")
ALERTS_TEST = os.path.join(DASH_DIR, "alerts_test.yaml")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None,
                                    reason="promtool not installed (Debian: prometheus)")

# Labels Prometheus attaches at scrape time (pod-annotation discovery or a
# PodMonitor), which queries may group by although the driver does not set them.
SCRAPE_LABELS = {"instance", "job", "namespace", "pod", "node", "container"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")
METRIC_RE = re.compile(r"\bdra_cpu_[a-zA-Z0-9_]+")


# ---------------------------------------------------------------- sources

def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_panels(d=None):
    d = d or load_dashboard()
    out = []
    for p in d["panels"]:
        out.append(p)
        out += p.get("panels", [])  # collapsed rows keep theirs inside
    return out


def exprs_of(panels):
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def dashboard_exprs():
    """(label, expr) of every query, the variable queries included."""
    d = load_dashboard()
    out = []
    for p in dashboard_panels(d):
        for t in p.get("targets", []):
            out.append(("panel %r %s" % (p["title"], t["refId"]), t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            out.append(("variable $%s" % v["name"], v["definition"]))
    return out


def alert_rules():
    with open(ALERTS) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] for r in g["rules"]]


def alert_exprs():
    return [("alert %s" % r["alert"], r["expr"]) for r in alert_rules()]


def all_exprs():
    return dashboard_exprs() + alert_exprs()


_REGISTER = re.compile(
    r'metrics_(counter|gauge|histogram)\(\s*[\w>.-]+\s*,\s*"(dra_cpu_\w+)"\s*,'
    r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+),\s*(NULL|"[^"]*")', re.S)


def registered_families():
    """{name: (type, labels, source file)} for every family user/*/*.c registers."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "user", "*", "*.c"))):
        with open(path) as f:
            src = f.read()
        for typ, name, _, labels in _REGISTER.findall(src):
            lbl = set() if labels == "NULL" else set(labels.strip('"').split(","))
            out[name] = (typ, lbl, os.path.basename(path))
    # An empty answer (sources moved, pattern stale) would pass every check below.
    assert len(out) >= 20, "only %d metric families found under user/" % len(out)
    return out


def family_of(name, families):
    """The family a series name belongs to (histogram suffixes stripped), or None."""
    if name in families:
        return name
    for s in HIST_SUFFIXES:
        if name.endswith(s) and families.get(name[:-len(s)], ("",))[0] == "histogram":
            return name[:-len(s)]
    return None


def used_families():
    fams = registered_families()
    return {family_of(n, fams) or n for _, e in all_exprs() for n in METRIC_RE.findall(e)}


# ---------------------------------------------------------------- dashboard

def test_dashboard_is_schema_39_with_a_datasource_variable():
    d = load_dashboard()
    assert d["schemaVersion"] == 39
    assert d["uid"] == "dra-cpu" and d["title"]
    vars_ = {v["name"]: v for v in d["templating"]["list"]}
    ds = vars_["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    for p in dashboard_panels(d):
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p.get("description"), "panel %r has no description" % p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
    # Every $variable a query uses is defined (or a Grafana built-in).
    for label, e in dashboard_exprs():
        for v in re.findall(r"\$\{?(\w+)", e):
            assert v in vars_ or v.startswith("__"), "%s uses undefined $%s" % (label, v)


def test_dashboard_grid_has_unique_ids_and_no_overlaps():
    panels = dashboard_panels()
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    cells = {}
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (p["title"], g)
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "%r overlaps %r" % (p["title"], cells[(x, y)])
                cells[(x, y)] = p["title"]


def test_dashboard_covers_what_operators_need():
    """The panels operators need, by the metrics they must query."""
    used = {family_of(n, registered_families()) or n
            for _, e in dashboard_exprs() for n in METRIC_RE.findall(e)}
    for name in ["dra_cpu_allocated_cpus", "dra_cpu_available_cpus", "dra_cpu_reserved_cpus",
                 "dra_cpu_resource_claims_active", "dra_cpu_shared_pool_cpus",
                 "dra_cpu_prepare_claims_total", "dra_cpu_prepare_claim_duration_seconds",
                 "dra_cpu_slice_writes_total", "dra_cpu_slice_errors_total",
                 "dra_cpu_nri_containers_exclusive", "dra_cpu_nri_containers_shared",
                 "dra_cpu_nri_rejected_containers_total", "dra_cpu_pinning_violations_total",
                 "dra_cpu_pinning_violation_seconds_total", "dra_cpu_runqueue_latency_seconds",
                 "dra_cpu_bpf_loaded", "dra_cpu_bpf_program_loaded",
                 "dra_cpu_pinning_enforcement_info",
                 # trust and CPU health
                 "dra_cpu_nri_binding_refused_total", "dra_cpu_claims_on_offline_cpus",
                 "dra_cpu_online_cpus",
                 # real-time CPUs: the kernel's view (BPF monitor) and the driver's
                 "dra_cpu_rt_bandwidth_used", "dra_cpu_rt_bandwidth_capacity",
                 "dra_cpu_rt_tasks", "dra_cpu_rt_runtime_seconds",
                 "dra_cpu_rt_deadline_misses_total", "dra_cpu_rt_overruns_total",
                 "dra_cpu_rt_throttled_total", "dra_cpu_rt_foreign_switches_total",
                 "dra_cpu_rt_policy_applied_total", "dra_cpu_rt_policy_failures_total",
                 "dra_cpu_rt_apply_retries_total", "dra_cpu_rt_cpus_isolated"]:
        assert name in used, "no panel queries %s" % name
    # Real-time panels sit in their own row, and bandwidth is drawn against capacity.
    d = load_dashboard()
    rows = [p for p in d["panels"] if p["type"] == "row"]
    rt_row = [r for r in rows if "real-time" in r["title"].lower()]
    assert len(rt_row) == 1, [r["title"] for r in rows]
    y0 = rt_row[0]["gridPos"]["y"]
    y1 = min([r["gridPos"]["y"] for r in rows if r["gridPos"]["y"] > y0] or [1 << 30])
    in_row = [p for p in dashboard_panels(d)
              if p["type"] != "row" and y0 < p["gridPos"]["y"] < y1]
    rt_queried = {n for p in in_row for t in p["targets"] for n in METRIC_RE.findall(t["expr"])}
    assert {n for n in used if n.startswith("dra_cpu_rt_")} <= \
        {family_of(n, registered_families()) or n for n in rt_queried}, \
        "real-time families queried outside the real-time row"
    assert any(any("rt_bandwidth_used" in t["expr"] for t in p["targets"]) and
               any("rt_bandwidth_capacity" in t["expr"] for t in p["targets"]) for p in in_row)
    assert any("by (instance, cpu, kind)" in t["expr"] and "rt_foreign_switches" in t["expr"]
               for p in in_row for t in p["targets"])
    assert any("histogram_quantile(0.99," in e and "dra_cpu_rt_runtime_seconds_bucket" in e
               for e in exprs_of(in_row))
    assert any("by (reason)" in e and "binding_refused" in e for e in dict(dashboard_exprs()).values())
    exprs = dict(dashboard_exprs())
    assert any("histogram_quantile(0.5," in e and "prepare_claim_duration" in e
               for e in exprs.values())
    assert any("histogram_quantile(0.99," in e and "prepare_claim_duration" in e
               for e in exprs.values())
    heat = [p for p in dashboard_panels() if p["type"] == "heatmap"]
    assert heat and any("dra_cpu_runqueue_latency_seconds_bucket" in t["expr"] and
                        t.get("format") == "heatmap" for p in heat for t in p["targets"])
    pinning = [p for p in dashboard_panels()
               if any("pinning_violations_total" in t["expr"] for t in p.get("targets", []))]
    assert any("by (instance, cpu, kind)" in t["expr"] for p in pinning for t in p["targets"])


# ------------------------------------------------------------------ PromQL

def grafana_to_promql(expr):
    """Grafana variables replaced by values Prometheus accepts."""
    e = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    e = e.replace("${instance}", ".*").replace("$instance", ".*")
    return e


@needs_promtool
def test_every_dashboard_query_parses(tmp_path):
    rules = []
    for i, (label, e) in enumerate(dashboard_exprs()):
        if label.startswith("variable"):
            m = re.fullmatch(r"label_values\((dra_cpu_\w+),\s*(\w+)\)", e)
            assert m, "%s: unexpected variable query %s" % (label, e)
            e = m.group(1)  # a Grafana function; its metric must parse
        rules.append({"record": "dashboard:query_%02d:check" % i,
                      "expr": grafana_to_promql(e)})
    f = tmp_path / "dashboard-rules.yaml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    p = subprocess.run([PROMTOOL, "check", "rules", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@needs_promtool
def test_alert_rules_pass_promtool_check():
    p = subprocess.run([PROMTOOL, "check", "rules", ALERTS], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: %d rules found" % len(alert_rules()) in p.stdout


@needs_promtool
def test_alert_rules_pass_their_unit_tests():
    p = subprocess.run([PROMTOOL, "test", "rules", ALERTS_TEST], capture_output=True,
                       text=True, timeout=120, cwd=DASH_DIR)
    assert p.returncode == 0, p.stdout + p.stderr


def test_alert_rules_cover_the_failure_modes():
    rules = {r["alert"]: r for r in alert_rules()}
    for r in rules.values():
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
    def uses(alert, metric):
        return metric in rules[alert]["expr"]
    assert uses("DraCpuPinningViolations", "dra_cpu_pinning_violations_total")
    assert 'kind=~"user|kthread_unbound"' in rules["DraCpuPinningViolations"]["expr"]
    assert uses("DraCpuBpfNotLoaded", "dra_cpu_bpf_loaded")
    assert rules["DraCpuBpfNotLoaded"]["for"] == "10m"
    assert uses("DraCpuPrepareErrors", 'dra_cpu_prepare_claims_total{result="error"}')
    assert uses("DraCpuSharedPoolExhausted", "dra_cpu_shared_pool_cpus")
    assert uses("DraCpuSharedPoolLow", "dra_cpu_shared_pool_cpus")
    assert uses("DraCpuSlicesNotInSync", "dra_cpu_slice_errors_total")
    assert uses("DraCpuSlicesNotPublished", "dra_cpu_slices_published")
    # A pod naming a claim it does not consume is a security signal; a claim
    # that could not be read again to check is not.
    assert uses("DraCpuBindingRefused", "dra_cpu_nri_binding_refused_total")
    refused = rules["DraCpuBindingRefused"]
    assert 'reason=~"not_consumer|synchronize"' in refused["expr"]
    assert refused["labels"].get("category") == "security" and "for" not in refused
    assert uses("DraCpuClaimsOnOfflineCpus", "dra_cpu_claims_on_offline_cpus")
    assert uses("DraCpuRtDeadlineMissed", "dra_cpu_rt_deadline_misses_total")
    assert rules["DraCpuRtDeadlineMissed"]["labels"]["severity"] == "critical"
    assert "for" not in rules["DraCpuRtDeadlineMissed"]
    assert uses("DraCpuRtOverruns", "dra_cpu_rt_overruns_total")
    assert "for" in rules["DraCpuRtOverruns"]  # tick-granularity overruns are routine
    assert uses("DraCpuRtForeignTask", 'dra_cpu_rt_foreign_switches_total{kind="pinned"}')
    assert uses("DraCpuRtPolicyFailures", "dra_cpu_rt_policy_failures_total")
    # Every alert says where to look: a log event, a command or a check to make.
    for r in rules.values():
        if r["alert"].startswith(("DraCpuRt", "DraCpuBinding", "DraCpuClaimsOn")):
            assert re.search(r"event=\w+|`[^`]+`", r["annotations"]["description"]), r["alert"]
    # Every alert is exercised by the promtool unit tests.
    with open(ALERTS_TEST) as f:
        tested = {t["alertname"] for case in yaml.safe_load(f)["tests"]
                  for t in case.get("alert_rule_test", [])}
    assert tested == set(rules), set(rules) ^ tested


def test_queries_use_registered_metrics_labels_and_types():
    fams = registered_families()
    assert len(fams) >= 25, sorted(fams)
    for label, e in all_exprs():
        names = METRIC_RE.findall(e)
        assert names, "%s: queries no dra_cpu_ metric" % label
        resolved = {}
        for n in names:
            f = family_of(n, fams)
            assert f, "%s: %s is not registered by any user/*/*.c" % (label, n)
            resolved[n] = f
            if fams[f][0] == "histogram":
                assert n != f, "%s: histogram %s needs a _bucket/_sum/_count suffix" % (label, n)
        known = set(SCRAPE_LABELS)
        for n, f in resolved.items():
            known |= fams[f][1] | ({"le"} if n.endswith("_bucket") else set())
        for n, matchers in re.findall(r"\b(dra_cpu_\w+)\{([^}]*)\}", e):
            own = fams[resolved[n]][1] | SCRAPE_LABELS | ({"le"} if n.endswith("_bucket")
                                                         else set())
            for lbl in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers):
                assert lbl in own, "%s: %s has no label %s" % (label, n, lbl)
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e):
            for lbl in filter(None, (x.strip() for x in group.split(","))):
                assert lbl in known, "%s: groups by %s, which none of %s has" % (
                    label, lbl, sorted(set(resolved.values())))
        for fn, n in re.findall(r"\b(rate|irate|increase)\(\s*(dra_cpu_\w+)", e):
            typ = fams[resolved[n]][0]
            assert typ == "counter" or (typ == "histogram" and n != resolved[n]), \
                "%s: %s() of %s %s" % (label, fn, typ, n)
        for n in re.findall(r"histogram_quantile\([^,]+,.*?\b(dra_cpu_\w+)", e):
            assert n.endswith("_bucket"), "%s: histogram_quantile over %s" % (label, n)


# --------------------------------------------------------------- live driver

def parse_families(text):
    """{family: type} from the # TYPE lines, and the sample lines."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples = [l for l in text.splitlines() if l and not l.startswith("#")]
    return types, samples


def rtctl_monitor_families():
    """The families rtctl.c registers only with the BPF monitor (register_monitor())."""
    with open(os.path.join(ROOT, "user", "pinning", "rtctl.c")) as f:
        src = f.read()
    m = re.search(r"^static int register_monitor\(.*?^}", src, re.M | re.S)
    assert m, "register_monitor() not found in user/pinning/rtctl.c"
    names = set(re.findall(r'"(dra_cpu_rt_\w+)"', m.group(0)))
    assert len(names) >= 5, names
    return names


NCPU = os.cpu_count() or 1
RT_CPU = NCPU - 1
# --rt-cpus takes a CPU away from the ordinary ones; it needs another one left.
# The driver's real-time control writes cpusets: root and a cpuset hierarchy.
RT_SKIP = ("fewer than two CPUs" if NCPU < 2 else
           "not root (real-time CPUs need cpuset writes)" if os.geteuid() != 0 else
           "no cpuset cgroup hierarchy" if not (
               os.path.exists("/sys/fs/cgroup/cpuset/cpuset.cpus") or
               os.path.exists("/sys/fs/cgroup/cpuset.cpus.effective")) else None)


def test_every_queried_family_is_served_by_the_driver(make_driver):
    d = make_driver(args=["--no-nri"]).start()
    code, text = d.http("/metrics")
    assert code == 200, d.log()
    live, samples = parse_families(text)
    fams = registered_families()
    bpf_loaded = "dra_cpu_bpf_loaded 1" in samples
    schedstat = os.access("/proc/schedstat", os.R_OK)
    # rtctl.c's families exist only with --rt-cpus: a second driver on this
    # machine's own topology makes its last CPU a real-time one (no claim, so
    # no cpuset is written) and serves them; the monitor's need its BPF loaded.
    rt_live, rt_log, rt_monitor = {}, "", False
    if RT_SKIP is None:
        rd = make_driver(topology=None, args=["--no-nri", "--rt-cpus", str(RT_CPU)]).start()
        code, rt_text = rd.http("/metrics")
        assert code == 200, rd.log()
        rt_live, rt_samples = parse_families(rt_text)
        rt_log = rd.log()
        rt_monitor = "event=rt_monitor_loaded" in rt_log
        assert rt_monitor or "event=rt_monitor_not_loaded" in rt_log, rt_log
        # The capacity the bandwidth panel draws is the kernel's, not a guess.
        from test_rt_slices import kernel_capacity_milli
        cap = [float(l.split()[1]) for l in rt_samples
               if l.startswith("dra_cpu_rt_bandwidth_capacity ")]
        assert cap == [kernel_capacity_milli() / 1000], (cap, rt_log)
    monitor = rtctl_monitor_families()
    missing, not_checked = [], []
    for name in sorted(used_families()):
        src = fams[name][2]
        if src == "rtctl.c":
            # Excused only where this machine cannot run real-time CPUs, or
            # the monitor did not load (its log line says why).
            why = RT_SKIP or ("rt monitor not loaded: " + re.search(
                r"event=rt_monitor_not_loaded reason=(\S+|\"[^\"]*\")", rt_log).group(1)
                if name in monitor and not rt_monitor else None)
            served = rt_live
        else:
            # bpfmon.c's families exist only once the BPF check is loaded; its
            # schedstat family only where the kernel exports /proc/schedstat.
            why = ("BPF pinning check not loaded" if src == "bpfmon.c" and not bpf_loaded
                   else "no /proc/schedstat"
                   if name == "dra_cpu_schedstat_waiting_seconds_total" and not schedstat
                   else None)
            served = live
        if name not in served:
            (not_checked if why else missing).append("%s (%s)" % (name, why) if why else name)
        else:
            assert served[name] == fams[name][0], "%s served as %s, registered as %s" % (
                name, served[name], fams[name][0])
    assert not missing, "queried but not on /metrics: %s\n%s\n%s" % (missing, d.log(), rt_log)
    if not_checked:
        print("not served here, checked against the source only: %s" % ", ".join(not_checked))
