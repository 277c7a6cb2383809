#!/bin/sh
# Cross build for another architecture with Debian's cross toolchain and
# multiarch libraries, and its tests under qemu-user (make cross ARCH=arm64).
#
#   tools/cross.sh arm64 build [make targets]   default: the binaries, the BPF
#                                               objects, unit tests, fuzz replays
#   tools/cross.sh arm64 check                  unit tests + fuzz replays under
#                                               qemu-aarch64-static (no binfmt needed)
#   tools/cross.sh arm64 test                   what make test runs: build where the
#                                               packages can be had, else write why
#                                               to build/arm64/NOT-BUILT; exit 0
#
# Outputs in build/<arch>/. What it needs (gcc-aarch64-linux-gnu, qemu-user-static,
# the -dev:arm64 libraries) tools/deps.sh cross arm64 installs, as root, after
# `dpkg --add-architecture arm64`. libevent-dev is not co-installable across
# architectures (event-config.h is not multiarch): its arm64 files are unpacked
# under build/arm64/extra and searched first (CPATH, -L); only the runtime
# library libevent-2.1-7:arm64 is installed.
set -eu
arch=${1:?usage: tools/cross.sh arm64 build|check|test [targets]}
what=${2:-build}
shift 2 || shift $#
case "$arch" in
arm64) triplet=aarch64-linux-gnu karch=arm64 qemu=qemu-aarch64-static ;;
*) echo "cross: $arch: only arm64 is known" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
B=build/$arch
extra=$PWD/$B/extra

if [ "$what" = test ]; then
	mkdir -p "$B"
	rm -f "$B/NOT-BUILT"
	if [ "$(dpkg --print-architecture)" = "$arch" ]; then
		echo "the machine is $arch itself: make test is its native run" > "$B/NOT-BUILT"
		exit 0
	fi
	rc=0
	out=$(sh tools/deps.sh cross "$arch" 2>&1) || rc=$?
	if [ $rc -ne 0 ]; then
		echo "$arch packages not installable here: $(echo "$out" | tail -1)" > "$B/NOT-BUILT"
		exit 0
	fi
	sh "$0" "$arch" build >"$B/build.log" 2>&1 || {
		echo "cross: the $arch build failed: $B/build.log" >&2
		tail -20 "$B/build.log" >&2
		exit 1
	}
	exit 0
fi

sh tools/deps.sh cross "$arch" || {
	echo "cross: missing packages (as root: tools/deps.sh cross $arch)" >&2
	exit 1
}

if [ ! -e "$extra/usr/include/event2/event-config.h" ]; then
	mkdir -p "$extra"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -q "libevent-dev:$arch" >/dev/null 2>&1)
	dpkg-deb -x "$tmp"/libevent-dev_*.deb "$extra"
	rm -rf "$tmp"
	# libevent.so -> the runtime library installed for the target
	for l in "$extra/usr/lib/$triplet"/libevent*.so; do
		ln -sf "/usr/lib/$triplet/$(readlink "$l")" "$l"
	done
fi

case "$what" in
build)
	[ $# -gt 0 ] || set -- all \
		$(ls test/unit/*_test.c | sed "s|test/unit/\(.*\)_test.c|$B/test/\1_test|") \
		$(ls test/fuzz/*_fuzz.c | sed "s|test/fuzz/\(.*\)_fuzz.c|$B/fuzz/\1_replay|")
	CPATH=$extra/usr/include \
	PKG_CONFIG_LIBDIR=$extra/usr/lib/$triplet/pkgconfig:/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig \
		make -j"$(nproc)" CC="$triplet-gcc -L$extra/usr/lib/$triplet" ARCH="$karch" B="$B" "$@"
	;;
check)
	# -L /: the target's loader and libraries are the multiarch ones installed here.
	# Emulated code runs 5-50 times slower: the tests' wall-clock guards
	# stretch by DRA_CPU_TEST_TIME_SCALE (testutil_time_scale()), native runs
	# keep theirs. qemu-user passes no bpf() on: the tests that need it run
	# again on the target's own kernel in qemu-system (tools/vm.sh), when that
	# can be had here; else they stay skipped, and this says why.
	kernel_runner=
	if kernel=$(sh tools/vm.sh "$arch" prepare); then
		kernel_runner="sh tools/vm.sh $arch run"
		echo "cross: the tests that need bpf() run on $kernel in qemu-system"
	else
		echo "cross: the tests that need bpf() stay skipped: $kernel"
	fi
	B=$B RUNNER="$qemu -L /" KERNEL_RUNNER=$kernel_runner \
		DRA_CPU_TEST_TIME_SCALE=${DRA_CPU_TEST_TIME_SCALE:-20} bash test/run.sh unit
	;;
*) echo "cross: $what: build, check or test" >&2; exit 2 ;;
esac
