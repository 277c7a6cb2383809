#!/bin/bash
# Runs dra-cpu's tests and ends with one line: "N passed, N failed[, N skipped]".
#   test/run.sh unit   cmocka unit tests + fuzz corpus replay
#   test/run.sh vm     the unit tests that meet the kernel, on Debian 12's kernel in
#                      qemu-system (run_vm below; VM=)
#   test/run.sh all    unit + vm + integration (pytest, the real binaries) + kernel tests
# B selects the build dir (build or build/san). Exit status 1 if anything failed.
# RUNNER prefixes each unit test and replay (a cross build under qemu-user:
# tools/cross.sh check). KERNEL_RUNNER, when set, runs again each unit test that
# skipped under RUNNER for want of the bpf() system call, and its result counts
# instead (tools/vm.sh: the target's own kernel in qemu-system). CROSS=arm64
# (make test) adds, to "all", that
# architecture's unit tests and replays under qemu-user (tools/cross.sh check),
# or one skip saying why build/arm64 was not built (build/arm64/NOT-BUILT).
set -u
B=${B:-build}
RUNNER=${RUNNER:-}
KERNEL_RUNNER=${KERNEL_RUNNER:-}
CROSS=${CROSS:-}
PYTHON=${PYTHON:-/usr/bin/python3}
what=${1:-all}
passed=0 failed=0 skipped=0
failures=()
skips=()
log=$(mktemp -d /tmp/dra-cpu-test.XXXXXX)

# Every file a test reads is in the tree (test/data/); the tests run from the
# project root.
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=test/helpers/all-cpus.sh
. test/helpers/all-cpus.sh

tally_tap() { # name file
	local p f s
	# cmocka 1.1.5 reports a skip as "not ok N - name # SKIP": a skip, not a failure.
	p=$(grep -c '^ok ' "$2")
	f=$(grep '^not ok ' "$2" | grep -vc '# SKIP')
	s=$(grep -c '^\(not \)\?ok .*# SKIP' "$2")
	passed=$((passed + p - $(grep -c '^ok .*# SKIP' "$2"))) failed=$((failed + f))
	skipped=$((skipped + s))
	[ "$f" -eq 0 ] || failures+=("$1: $(grep '^not ok ' "$2" | grep -v '# SKIP' | head -3 | tr '\n' ' ')")
	# A skipping test prints "skipped: <reason>" just before its result.
	local line
	while IFS= read -r line; do
		skips+=("$1: $line")
	done < <(awk '/^(not )?ok / {
			if (/# SKIP/) { n = $0; sub(/.*# SKIP */, "", n); print n ": " (why != "" ? why : "(no reason printed)") }
			why = ""; next }
		/^skipped: / { why = substr($0, 10) }' "$2")
}

# One test program's run: its TAP in $log/<file>.tap, its stderr in .err.
tally_run() { # name file exit-status
	tally_tap "$1" "$log/$2.tap"
	if [ "$3" -ne 0 ] && ! grep -q '^not ok ' "$log/$2.tap"; then
		failed=$((failed + 1))
		failures+=("$1: exit $3: $(tail -3 "$log/$2.err" | tr '\n' ' ')")
	fi
}

run_unit() {
	local t name rc
	for t in "$B"/test/*_test; do
		[ -x "$t" ] || continue
		name=$(basename "$t")
		CMOCKA_MESSAGE_OUTPUT=TAP $RUNNER "$t" >"$log/$name.tap" 2>"$log/$name.err"
		rc=$?
		# testutil_have_bpf_syscall()'s reason: the emulator passed no bpf() on
		if [ -n "$KERNEL_RUNNER" ] && grep -q '^skipped: bpf() system call: ' "$log/$name.tap"; then
			CMOCKA_MESSAGE_OUTPUT=TAP $KERNEL_RUNNER "$t" >"$log/$name.tap" 2>"$log/$name.err"
			rc=$?
		fi
		tally_run "$name" "$name" "$rc"
	done
	for t in "$B"/fuzz/*_replay; do
		[ -x "$t" ] || continue
		name=$(basename "$t" _replay)
		if $RUNNER "$t" test/fuzz/corpus/"$name" >"$log/fuzz-$name.out" 2>&1; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
			failures+=("fuzz replay $name: $(tail -2 "$log/fuzz-$name.out" | tr '\n' ' ')")
		fi
	done
}

run_pytest() {
	local junit=$log/pytest.xml
	[ -d test/integration ] || return 0
	B=$B "$PYTHON" -m pytest -q -rfEs -p no:cacheprovider --junitxml="$junit" test/integration \
		>"$log/pytest.out" 2>&1
	if [ ! -s "$junit" ]; then
		failed=$((failed + 1))
		failures+=("pytest did not run: $(tail -5 "$log/pytest.out" | tr '\n' ' ')")
		return
	fi
	read -r t f e s < <("$PYTHON" - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else list(r)
g = lambda k: sum(int(x.get(k, 0)) for x in suites)
print(g("tests"), g("failures"), g("errors"), g("skipped"))
PY
)
	passed=$((passed + t - f - e - s)) failed=$((failed + f + e)) skipped=$((skipped + s))
	local line
	while IFS= read -r line; do
		skips+=("pytest: ${line#SKIPPED }")
	done < <(grep '^SKIPPED ' "$log/pytest.out")
	[ $((f + e)) -eq 0 ] || failures+=("pytest: $(grep -E '^(FAILED|ERROR) ' "$log/pytest.out" | head -10 | tr '\n' ' ')")
}

# The unit tests that load BPF programs (those that look for bpf() first), once
# more on the kernel Debian 12 ships, booted in qemu-system (tools/vm.sh): the
# machine's own kernel is one verifier, and nodes run others. Then isol_test's
# running-kernel case on that kernel booted with CPU 1 isolated. Then the tests
# that read the running node's cgroups (its mounts, or /sys/fs/cgroup) on that
# kernel with cgroup v2 alone, as Debian 12 and most nodes mount them
# (tools/vm/init.c; this machine mounts a hybrid). VM=<arch> picks the kernel's
# architecture (the machine's own by default; another one wants B= a build for it,
# e.g. B=build/arm64 VM=arm64), VM= leaves it out.
run_vm() {
	local arch=${VM-$(dpkg --print-architecture)} kernel src name
	[ -n "$arch" ] || return 0
	if ! kernel=$(sh tools/vm.sh "$arch" prepare); then
		skipped=$((skipped + 1))
		skips+=("the BPF tests on Debian's kernel: $kernel")
		return
	fi
	for src in $(grep -l testutil_have_bpf_syscall test/unit/*_test.c); do
		name=$(basename "$src" .c)
		[ -x "$B/test/$name" ] || continue
		DRA_CPU_TEST_TIME_SCALE=${DRA_CPU_TEST_TIME_SCALE:-20} CMOCKA_MESSAGE_OUTPUT=TAP \
			sh tools/vm.sh "$arch" run "$B/test/$name" >"$log/vm-$name.tap" 2>"$log/vm-$name.err"
		tally_run "$kernel $name" "vm-$name" $?
	done
	# what the node reads of CPUs isolated at boot, from a kernel booted so
	if [ -x "$B/test/isol_test" ]; then
		VM_APPEND="isolcpus=managed_irq,domain,1 nohz_full=1" DRA_CPU_TEST_BOOT_ISOLATED=1 \
			DRA_CPU_TEST_FILTER=test_isol_read_the_running_kernel CMOCKA_MESSAGE_OUTPUT=TAP \
			sh tools/vm.sh "$arch" run "$B/test/isol_test" \
			>"$log/vm-isol_test.tap" 2>"$log/vm-isol_test.err"
		tally_run "$kernel isolcpus=1 isol_test" "vm-isol_test" $?
	fi
	# the node's cgroups as a unified node has them (the v1 cpuset cases are
	# this machine's; a unified node has no such hierarchy to find)
	for src in $(grep -l -e 'cgroup_mounts_read(' -e '/sys/fs/cgroup' test/unit/*_test.c); do
		name=$(basename "$src" .c)
		[ -x "$B/test/$name" ] || continue
		VM_APPEND="vm.cgroup=v2" DRA_CPU_TEST_SKIP='*_v1_cpuset*' \
			DRA_CPU_TEST_TIME_SCALE=${DRA_CPU_TEST_TIME_SCALE:-20} CMOCKA_MESSAGE_OUTPUT=TAP \
			sh tools/vm.sh "$arch" run "$B/test/$name" \
			>"$log/vm-v2-$name.tap" 2>"$log/vm-v2-$name.err"
		tally_run "$kernel cgroup v2 $name" "vm-v2-$name" $?
	done
}

# The other architecture's run, its tally added to this one, its lines prefixed.
run_cross() {
	local out p f s line
	[ -n "$CROSS" ] || return 0
	if [ -e "build/$CROSS/NOT-BUILT" ]; then
		skipped=$((skipped + 1))
		skips+=("$CROSS cross-check: $(cat "build/$CROSS/NOT-BUILT")")
		return
	fi
	out=$(sh tools/cross.sh "$CROSS" check 2>&1)
	printf '%s\n' "$out" >"$log/cross-$CROSS.out"
	read -r p f s < <(printf '%s\n' "$out" |
		sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' | tail -1)
	if [ -z "${p:-}" ]; then
		failed=$((failed + 1))
		failures+=("$CROSS cross-check did not run: $(printf '%s\n' "$out" | tail -3 | tr '\n' ' ')")
		return
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	while IFS= read -r line; do
		case "$line" in
		"SKIP "*) skips+=("$CROSS ${line#SKIP }") ;;
		"FAIL "*) failures+=("$CROSS ${line#FAIL }") ;;
		"logs: "*) failures+=("$CROSS ${line}") ;;
		esac
	done <<<"$out"
}

case "$what" in
unit) run_unit ;;
vm) run_vm ;;
all) run_unit; run_vm; run_cross; run_pytest ;;
*) echo "usage: test/run.sh [unit|vm|all]" >&2; exit 2 ;;
esac

for f in "${skips[@]+"${skips[@]}"}"; do echo "SKIP $f"; done
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAIL $f"; done
[ "$failed" -eq 0 ] && rm -rf "$log" || echo "logs: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
