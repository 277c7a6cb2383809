#!/bin/bash
# Runs dra-cpu's tests and ends with one line: "N passed, N failed[, N skipped]".
#   test/run.sh unit   cmocka unit tests + fuzz corpus replay
#   test/run.sh all    unit + integration (pytest, the real binaries) + kernel tests
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

run_unit() {
	local t name
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
		tally_tap "$name" "$log/$name.tap"
		if [ $rc -ne 0 ] && ! grep -q '^not ok ' "$log/$name.tap"; then
			failed=$((failed + 1))
			failures+=("$name: exit $rc: $(tail -3 "$log/$name.err" | tr '\n' ' ')")
		fi
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

run_unit
if [ "$what" != unit ]; then
	run_cross
	run_pytest
fi

for f in "${skips[@]+"${skips[@]}"}"; do echo "SKIP $f"; done
for f in "${failures[@]+"${failures[@]}"}"; do echo "FAIL $f"; done
[ "$failed" -eq 0 ] && rm -rf "$log" || echo "logs: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
