"""/metrics of the running driver: every family the issues name is there and
`promtool check metrics` (Prometheus' own linter) finds nothing."""

import os
import shutil
import subprocess

import pytest

REQUIRED = [
    # the reference driver's families
    "dra_cpu_allocated_cpus", "dra_cpu_available_cpus", "dra_cpu_reserved_cpus",
    "dra_cpu_resource_claims_active", "dra_cpu_prepare_claims_total",
    "dra_cpu_unprepare_claims_total", "dra_cpu_prepare_claim_duration_seconds",
    "dra_cpu_claim_allocated_cpus",
    # pinning and contention
    "dra_cpu_pinning_violations_total", "dra_cpu_pinning_violation_seconds_total",
    "dra_cpu_runqueue_latency_seconds", "dra_cpu_shared_pool_wait_seconds_total",
    "dra_cpu_exclusive_cpus", "dra_cpu_shared_pool_cpus", "dra_cpu_cpu_owner_info",
    "dra_cpu_remediations_total", "dra_cpu_enforcement_mode", "dra_cpu_bpf_loaded",
    "dra_cpu_bpf_events_dropped_total",
]


def families(text):
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def test_metrics_families_and_promtool(make_driver):
    d = make_driver(topology=None, args=["--no-nri"]).start()
    d.wait_ready()
    code, text = d.http("/metrics")
    assert code == 200
    fams = families(text)
    loaded = "\ndra_cpu_bpf_loaded 1\n" in text
    for name in REQUIRED:
        if name in ("dra_cpu_pinning_violations_total", "dra_cpu_pinning_violation_seconds_total",
                    "dra_cpu_runqueue_latency_seconds") and not loaded:
            continue  # families of a loaded program only
        assert name in fams, name
    if loaded:
        # series appear once a CPU is exclusive; the families are declared
        assert 'dra_cpu_enforcement_mode{mode="audit"} 1' in text
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed")
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", \
        r.stdout + r.stderr
