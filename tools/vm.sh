#!/bin/sh
# Runs one program on Debian 12's own kernel in qemu-system, with an initramfs of the
# program, the libraries it links and tools/vm/init.c:
#   arm64  a cross build's program on the arm64 kernel (software emulation): what
#          qemu-user cannot do (bpf()) runs for real
#   amd64  a native program on the amd64 kernel (emulated too: KVM need not work
#          where the tests run, often a VM): the BPF programs meet the kernel Debian 12
#          ships, not only the machine's own
#
#   tools/vm.sh ARCH prepare           fetch the kernel, build the init; prints the kernel
#                                      package, or why not and exits 1 when it cannot be
#                                      had here
#   tools/vm.sh ARCH run PROG [ARG..]  boot, run PROG as root in the VM, its stdout and
#                                      stderr here, its exit status as ours
#
# The kernel is the one Debian's linux-image-ARCH depends on now, from the apt
# sources (arm64's architecture is added by tools/deps.sh cross arm64); it lands in
# build/ARCH/vm with the init (build/vm for the machine's own architecture). PROG's environment in the VM is: CMOCKA_MESSAGE_OUTPUT,
# DRA_CPU_TEST_TIME_SCALE and every DRA_CPU_* variable set here. Its working directory
# is /project, which holds PROG at the same path relative to the project root and the
# project's test/data, so a unit test finds its fixtures as at home.
#
# VM_CPUS (2) and VM_MEM_MB (1024) size the machine; VM_APPEND adds to the kernel's
# command line (isolcpus=, nohz_full=); VM_TIMEOUT_S (300) bounds a run. A run that
# does not reach the end (kernel panic, timeout) exits 125 and shows the console's
# last VM_TAIL (20) lines.
#
# The vCPUs share one emulator thread (thread=single). With a thread per vCPU, the
# amd64 guest stopped making progress in about 1 boot of 4 here (soft lockups of the
# task loading BPF programs, or silence right after /init started), and the same
# hang cost a CI run twice its timeout; 20 boots in a row on one thread finished,
# in the same 30-40 s: the tests mostly wait, so the second thread bought nothing.
set -eu
usage="usage: tools/vm.sh arm64|amd64 prepare|run PROG [ARG...]"
arch=${1:?$usage}
what=${2:?$usage}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
native=$(dpkg --print-architecture)
case "$arch" in
arm64) triplet=aarch64-linux-gnu qemu_cpu=aarch64 qemu_pkg=qemu-system-arm console=ttyAMA0
	board="-M virt" cpu=cortex-a72 ;;
amd64) triplet=x86_64-linux-gnu qemu_cpu=x86_64 qemu_pkg=qemu-system-x86 console=ttyS0
	board="-M pc" cpu=max ;;
*) echo "vm: $arch: arm64 or amd64" >&2; exit 2 ;;
esac
qemu_sys=qemu-system-$qemu_cpu machine="$board -cpu $cpu"
if [ "$arch" = "$native" ]; then
	V=$root/build/vm cc=gcc loader=
else
	V=$root/build/$arch/vm cc=$triplet-gcc loader="qemu-$qemu_cpu-static -L /"
fi

prepare() {
	command -v "$qemu_sys" >/dev/null ||
		{ echo "vm: $qemu_sys is not installed (Debian package $qemu_pkg)"; return 1; }
	command -v "$cc" >/dev/null || { echo "vm: $cc is not installed"; return 1; }
	command -v cpio >/dev/null || { echo "vm: cpio is not installed"; return 1; }
	mkdir -p "$V"
	if [ ! -s "$V/Image" ]; then
		pkg=$(apt-cache depends "linux-image-$arch:$arch" 2>/dev/null |
			sed -n "s/^ *Depends: \(linux-image-[0-9][^:]*-$arch\)\(:$arch\)\?$/\1/p" | head -1)
		[ -n "$pkg" ] || { echo "vm: the apt sources name no linux-image-$arch:$arch"; return 1; }
		tmp=$(mktemp -d)
		if ! (cd "$tmp" && apt-get download -q "$pkg:$arch" >/dev/null 2>&1); then
			rm -rf "$tmp"
			echo "vm: apt-get download $pkg:$arch failed"
			return 1
		fi
		# (called after ||, where set -e does not hold: each step says so itself)
		if ! dpkg-deb --fsys-tarfile "$tmp"/*.deb |
			tar -x -C "$tmp" --wildcards './boot/vmlinuz-*' ||
			! mv "$tmp"/boot/vmlinuz-* "$V/Image.part"; then
			rm -rf "$tmp" "$V/Image.part"
			echo "vm: no kernel image in $pkg"
			return 1
		fi
		rm -rf "$tmp"
		echo "$pkg" >"$V/kernel"
		mv "$V/Image.part" "$V/Image"
	fi
	# (a second: built every time rather than trusted from an earlier checkout)
	"$cc" -static -O2 -Wall -Wextra -Werror -o "$V/init" "$root/tools/vm/init.c" ||
		{ echo "vm: tools/vm/init.c did not build"; return 1; }
}

# The shared objects PROG loads, as the target's loader resolves them here.
libs_of() {
	# shellcheck disable=SC2086 # $loader: a command and its options, or nothing
	LD_TRACE_LOADED_OBJECTS=1 $loader "$1" 2>/dev/null |
		sed -n 's/.*=> \(\/[^ ]*\) (0x.*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*/\1/p'
}

run() {
	prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
	shift
	case "$prog" in
	"$root"/*) rel=${prog#"$root"/} ;;
	*) rel=$(basename "$prog") ;;
	esac
	if [ ! -x "$V/init" ] || [ ! -s "$V/Image" ]; then
		echo "vm: not prepared: tools/vm.sh $arch prepare" >&2
		exit 125
	fi
	# an init older than its source is built again (a checkout changed it)
	if [ -n "$(find "$root/tools/vm/init.c" -newer "$V/init")" ]; then
		out=$(prepare 2>&1) || { echo "$out" | tail -1 >&2; exit 125; }
	fi
	# root/ is the VM's initramfs; its /project (init.c's working directory)
	# holds PROG and test/data from the clone
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/root/project/$(dirname "$rel")"
	cp "$V/init" "$work/root/init"
	cp "$prog" "$work/root/project/$rel"
	# the unit tests' fixtures, where the tests look for them (2.6 MB)
	if [ -d "$root/test/data" ]; then
		mkdir -p "$work/root/project/test"
		cp -R "$root/test/data" "$work/root/project/test/data"
	fi
	for l in $(libs_of "$prog"); do
		mkdir -p "$work/root$(dirname "$l")"
		cp -L "$l" "$work/root$l"
	done
	{
		echo "/project/$rel"
		for a in "$@"; do echo "$a"; done
	} >"$work/root/run.argv"
	env | grep -E '^(CMOCKA_MESSAGE_OUTPUT|DRA_CPU_[A-Z0-9_]*)=' >"$work/root/run.env" || true
	(cd "$work/root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initrd"
	rc=0
	# shellcheck disable=SC2086 # $machine: options
	timeout "${VM_TIMEOUT_S:-300}" "$qemu_sys" $machine -accel tcg,thread=single -smp "${VM_CPUS:-2}" \
		-m "${VM_MEM_MB:-1024}" -display none -monitor none -serial "file:$work/console" \
		-nic none -no-reboot -kernel "$V/Image" -initrd "$work/initrd" \
		-append "console=$console loglevel=1 panic=-1 rdinit=/init ${VM_APPEND:-}" \
		>"$work/qemu.out" 2>&1 || rc=$?
	tr -d '\r' <"$work/console" >"$work/out"
	exit_line=$(grep -E '^@@vm-exit [0-9]+@@$' "$work/out" | tail -1)
	if [ -z "$exit_line" ]; then
		echo "vm: $rel did not finish (qemu exit $rc; ${VM_TIMEOUT_S:-300} s limit); the console's end:" >&2
		tail -"${VM_TAIL:-20}" "$work/out" >&2
		cat "$work/qemu.out" >&2
		exit 125
	fi
	# The lines between the markers, less the empty line init put before each
	# marker (a stream that ended without a newline loses nothing).
	awk '/^@@vm-stdout@@$/ { on = 1; next } /^@@vm-stderr@@$/ { on = 0 } on' "$work/out" |
		sed '${/^$/d}'
	awk '/^@@vm-stderr@@$/ { on = 1; next } /^@@vm-exit [0-9]+@@$/ { on = 0 } on' "$work/out" |
		sed '${/^$/d}' >&2
	exit "$(echo "$exit_line" | sed 's/^@@vm-exit \([0-9]*\)@@$/\1/')"
}

case "$what" in
prepare)
	out=$(prepare 2>&1) || { echo "$out" | tail -1; exit 1; }
	cat "$V/kernel"
	;;
run) [ $# -ge 1 ] || { echo "usage: tools/vm.sh $arch run PROG [ARG...]" >&2; exit 2; }; run "$@" ;;
*) echo "vm: $what: prepare or run" >&2; exit 2 ;;
esac
