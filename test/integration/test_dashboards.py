"""dashboards/: the Grafana dashboard and the Prometheus alert rules.

- the dashboard is Grafana schema 39 JSON with a Prometheus datasource
  variable every panel uses, a sane grid, and the panels the issue asks for;
- every PromQL expression (dashboard queries and alert rules) parses
  (promtool check rules; dashboard queries are wrapped as recording rules
  with the Grafana variables substituted);
- every metric name they use is a family of the table the driver registers
  from (user/obs/metric_families.def, read by tools/metric_families.py), with
  labels and a type that fit the query (rate() only on counters and histogram
  series, `by (...)` only on labels the family has or the scrape adds);
- the input series of the alert rules' unit tests are series the driver can
  serve: a family of the table with exactly its labels (plus scrape labels);
- the alert rules pass `promtool test rules dashboards/alerts_test.yaml`.

That the real driver serves exactly the table's families (so every family
queried here) is test_metrics_table.py's.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import metric_families as mf  # noqa: E402

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


def registered_families():
    """{name: tools/metric_families.Family} for every family of the table."""
    fams = mf.load(ROOT).families
    # An empty answer (table moved, parser stale) would pass every check below.
    assert len(fams) >= 20, "only %d metric families in the table" % len(fams)
    return fams


family_of = mf.family_of


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
    for label, e in all_exprs():
        names = METRIC_RE.findall(e)
        assert names, "%s: queries no dra_cpu_ metric" % label
        resolved = {}
        for n in names:
            f = family_of(n, fams)
            assert f, "%s: %s is not a family of the table" % (label, n)
            resolved[n] = f
            if fams[f].type == "histogram":
                assert n != f, "%s: histogram %s needs a _bucket/_sum/_count suffix" % (label, n)
        known = set(SCRAPE_LABELS)
        for n, f in resolved.items():
            known |= set(fams[f].labels) | ({"le"} if n.endswith("_bucket") else set())
        for n, matchers in re.findall(r"\b(dra_cpu_\w+)\{([^}]*)\}", e):
            own = set(fams[resolved[n]].labels) | SCRAPE_LABELS | ({"le"} if n.endswith("_bucket")
                                                         else set())
            for lbl in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers):
                assert lbl in own, "%s: %s has no label %s" % (label, n, lbl)
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e):
            for lbl in filter(None, (x.strip() for x in group.split(","))):
                assert lbl in known, "%s: groups by %s, which none of %s has" % (
                    label, lbl, sorted(set(resolved.values())))
        for fn, n in re.findall(r"\b(rate|irate|increase)\(\s*(dra_cpu_\w+)", e):
            typ = fams[resolved[n]].type
            assert typ == "counter" or (typ == "histogram" and n != resolved[n]), \
                "%s: %s() of %s %s" % (label, fn, typ, n)
        for n in re.findall(r"histogram_quantile\([^,]+,.*?\b(dra_cpu_\w+)", e):
            assert n.endswith("_bucket"), "%s: histogram_quantile over %s" % (label, n)


def alert_test_series():
    """(series name, {label: value}) of every input series of the alert rules' tests."""
    with open(ALERTS_TEST) as f:
        doc = yaml.safe_load(f)
    out = []
    for case in doc["tests"]:
        for s in case.get("input_series", []):
            m = re.fullmatch(r"(\w+)(?:\{(.*)\})?", s["series"].strip())
            assert m, s["series"]
            out.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))))
    assert out, "no input series in %s" % ALERTS_TEST
    return out


def test_alert_tests_feed_series_the_driver_can_serve():
    """An input series with a label its family lacks, or without one it has,
    tests an alert on a series that never exists."""
    fams = registered_families()
    for name, labels in alert_test_series():
        f = family_of(name, fams)
        assert f, "alerts_test.yaml: %s is not a family of the table" % name
        want = set(fams[f].labels) | ({"le"} if name.endswith("_bucket") else set())
        got = set(labels) - SCRAPE_LABELS
        assert got == want, "alerts_test.yaml: %s{%s}: the driver labels it by %s" % (
            name, ",".join(sorted(labels)), sorted(want))
