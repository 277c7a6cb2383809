#!/bin/sh
# make demo: show what dra-cpu does on this machine.
# Prints the discovered topology and the ResourceSlices this node would publish
# in each device mode. Later steps of the demo run the daemon end to end.
set -eu
B=${B:-build}
drv="$B/dra-cpu-driver"

step() { printf '\n=== %s\n' "$*"; }

step "Topology of this machine ($drv --print-topology)"
"$drv" --print-topology | /usr/bin/python3 -c '
import json, sys
t = json.load(sys.stdin)
print(json.dumps({k: v for k, v in t.items() if k != "cpus"}))
for c in t["cpus"]:
    print("  cpu %(cpu)3d  socket %(socket)d  numa %(numa)d  core %(core)d  l3 %(l3)d  %(coreType)s" % c)
'

step "ResourceSlices in grouped mode (default: one device per NUMA node)"
"$drv" --dry-run --hostname-override demo-node

step "ResourceSlices in individual mode (one device per CPU), CPU 0 reserved"
reserved=0
[ "$("$drv" --print-topology | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["cpus"]))')" -gt 1 ] || reserved=""
"$drv" --dry-run --hostname-override demo-node --cpu-device-mode individual \
	${reserved:+--reserved-cpus "$reserved"} | /usr/bin/python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
for s in items:
    for d in s["spec"]["devices"]:
        a = d["attributes"]
        print("  %-10s cpu %s" % (d["name"], a["dra.cpu/cpuID"]["int"]))
print("  %d slice(s), %d device(s)" % (len(items), sum(len(s["spec"]["devices"]) for s in items)))
'
