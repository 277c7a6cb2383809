#!/bin/bash
# Starts a busy "intruder" for demos and manual checks of the pinning check:
# a throwaway cgroup v2 (dra-cpu-intruder-<pid>) with a shell loop pinned to
# CPU N for S seconds. Prints "pid=<pid> cgroup=<path> cgroup_id=<id>", waits,
# then removes the cgroup (also on Ctrl-C). Needs root.
#   test/bpf/intruder.sh [cpu=1] [seconds=5] [comm=dra-intruder]
set -eu
cpu=${1:-1} secs=${2:-5} comm=${3:-dra-intruder}
mnt=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$mnt" ] || { echo "intruder: no cgroup2 mount" >&2; exit 1; }
cg=$mnt/dra-cpu-intruder-$$
mkdir "$cg"
pid=
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
# exec -a sets argv[0]; comm comes from the script name, so copy bash under
# the wanted name into a private temp dir.
tmp=$(mktemp -d)
cp "$(command -v bash)" "$tmp/$comm"
(echo $BASHPID > "$cg/cgroup.procs" && exec taskset -c "$cpu" "$tmp/$comm" -c \
	"end=\$((SECONDS + $secs)); while [ \$SECONDS -lt \$end ]; do :; done") &
pid=$!
sleep 0.2
rm -rf "$tmp"
echo "pid=$pid cgroup=${cg#"$mnt"} cgroup_id=$(stat -c %i "$cg") cpu=$cpu comm=$comm"
wait "$pid" || true
