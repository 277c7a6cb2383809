#!/bin/sh
# make bench: builds nothing itself (the Makefile's bench rule builds the driver
# and $B/alloc_bench, $B/cores_bench, $B/bpf_bench first), runs every benchmark and prints one
# table; raw figures go to $B/bench/results.json. Exit 0 even when a target is
# missed; non-zero only when a benchmark could not run. Methods: test/bench/README.md.
#   B=build PYTHON=/usr/bin/python3 sh test/bench/run.sh [--only slices,nri] [--quick]
set -eu
B=${B:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/../.."
# shellcheck source=test/helpers/all-cpus.sh
. test/helpers/all-cpus.sh
for f in "$B/dra-cpu-driver" "$B/alloc_bench" "$B/cores_bench" "$B/bpf_bench"; do
	if [ ! -x "$f" ]; then
		echo "bench: $f missing: run make bench (or make all $B/alloc_bench $B/cores_bench $B/bpf_bench)" >&2
		exit 1
	fi
done
exec "$PYTHON" test/bench/bench.py --build "$B" "$@"
