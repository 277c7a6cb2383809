"""Real-time policy failures as Events on the pod, on this machine's kernel
(the set-up of test_rt_kernel.py): a deadline budget the kernel refuses
evicts the container (onFailure: evict) or keeps it running without
guarantees (onFailure: warn), and the pod says which."""

from driver import wait_for
from test_events import checked
from test_rt_kernel import (DL_3MS, busy_on_rt_cpu, cdi_env, pod_of, prepare,  # noqa: F401
                            pytestmark, rt_env, sched_setattr)


def test_a_real_time_policy_not_applied_warns_on_the_pod(rt_env):  # noqa: F811
    apiserver, d, kubelet, rt, extra = rt_env
    first, err = prepare(rt_env, "first", q="100m",
                         budget={"policy": "deadline", "runtimeNs": 1000000,
                                 "periodNs": 10000000})
    assert err == ""
    hog = busy_on_rt_cpu()
    extra.append(hog)
    assert wait_for(lambda: sched_setattr(hog.pid, 7000000, 10000000) == 0, what="hog admitted")
    evict, err = prepare(rt_env, "evicted")
    assert err == ""
    rt.create_container(pod_of(evict), "loop", env=cdi_env(d, evict))
    warn, err = prepare(rt_env, "warned", budget={**DL_3MS, "onFailure": "warn"})
    assert err == ""
    rt.create_container(pod_of(warn), "loop", env=cdi_env(d, warn))
    evs = wait_for(lambda: len(checked(apiserver)) == 2 and checked(apiserver),
                   what="two events")
    by_pod = {e["regarding"]["name"]: e for e in evs}
    for name, c, action, words in (("evicted", evict, "Evict", "was evicted"),
                                   ("warned", warn, "RunWithoutGuarantees",
                                    "without real-time guarantees")):
        e = by_pod[name]
        assert e["type"] == "Warning" and e["reason"] == "RealtimeNotApplied"
        assert e["action"] == action and words in e["note"] and "EBUSY" in e["note"]
        assert e["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "default",
                                  "name": name, "uid": pod_of(c).uid}
        assert e["related"]["kind"] == "ResourceClaim" and e["related"]["name"] == name
