#!/bin/sh
# Install the Debian 12 packages dra-cpu builds and tests with (DESIGN.md section 6).
# Idempotent: asks dpkg what is missing, runs apt-get update only when something is,
# and says what it installs. Run as root; as another user it only reports.
#   tools/deps.sh          build and test
#   tools/deps.sh bench    also what make bench runs (rt-tests: cyclictest, figure 7)
#   tools/deps.sh cross A  what tools/cross.sh needs for Debian architecture A (arm64):
#                          the cross compiler, qemu-user-static, qemu-system (tools/vm.sh)
#                          and the target's multiarch libraries, after
#                          dpkg --add-architecture A. Exit 3
#                          (nothing changed) when the apt sources carry no A packages.
set -eu

PKGS="make gcc pkg-config libbpf-dev bpftool clang llvm libelf-dev zlib1g-dev
libhwloc-dev hwloc libcurl4-openssl-dev libjson-c-dev libyaml-dev
libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libnghttp2-dev libevent-dev libcmocka-dev
libclang-rt-14-dev python3 python3-pytest python3-grpcio python3-protobuf
python3-jsonschema python3-yaml prometheus openssl curl nghttp2-proxy bzip2 iproute2
valgrind podman runc mmdebstrap cppcheck cpio"
# podman, runc, mmdebstrap: make image and test/integration/test_image.py (no registry:
# the base image is made from Debian's mirror). cppcheck: make lint. cpio: tools/vm.sh.
# kubectl renders deploy/ with kustomize; any installed kubectl will do (some images
# ship a non-Debian one that conflicts with Debian's kubernetes-client).
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
[ "${1:-}" = bench ] && PKGS="$PKGS rt-tests"
native=$(dpkg --print-architecture)
# qemu-system and cpio: tools/vm.sh boots Debian's own kernel for the BPF unit tests
case "$native" in
amd64) PKGS="$PKGS qemu-system-x86" ;;
arm64) PKGS="$PKGS qemu-system-arm" ;;
esac

# Cross: the libraries of tools/image-build.sh TARGET_DEVS (less libssl-dev: the
# image's own libcurl needs it, the cross build links Debian's) plus cmocka for
# the tests. libevent-dev is not co-installable across architectures
# (event-config.h differs and is not multiarch): never its :A package, only the
# runtime library; tools/cross.sh unpacks the headers beside the build.
if [ "${1:-}" = cross ]; then
	arch=${2:?usage: tools/deps.sh cross arm64}
	case "$arch" in
	arm64) triplet=aarch64-linux-gnu ;;
	*) echo "deps: cross: $arch: only arm64 is known" >&2; exit 2 ;;
	esac
	# qemu-system-arm and cpio: tools/vm.sh, the tests that need bpf() on the
	# target's own kernel
	PKGS="gcc-$triplet qemu-user-static qemu-system-arm cpio"
	for p in libbpf-dev libelf-dev zlib1g-dev libhwloc-dev libcurl4-openssl-dev libjson-c-dev \
		libyaml-dev libprotobuf-c-dev libnghttp2-dev libcmocka-dev libevent-2.1-7; do
		PKGS="$PKGS $p:$arch"
	done
fi

# With a foreign architecture added (make cross), a package may be known for two
# architectures: what counts is the one named (pkg:arch), else the machine's own
# (or "all").
missing=""
for p in $PKGS; do
	a=${p#*:}
	[ "$a" != "$p" ] || a=$native
	dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$p" 2>/dev/null |
		grep -Eq "^($a|all) installed$" || missing="$missing $p"
done

if [ -z "$missing" ]; then
	echo "deps: all $(echo $PKGS | wc -w) packages present"
	exit 0
fi
echo "deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: not root; install them with: apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
added=""
if [ "${1:-}" = cross ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
	dpkg --add-architecture "$arch"
	added=1
fi
apt-get update -qq
# The sources may serve the machine's architecture only (a mirror of amd64 alone):
# then cross-building here cannot be, and the machine is left as it was.
if [ "${1:-}" = cross ] && [ -z "$(apt-cache madison "libc6:$arch" 2>/dev/null)" ]; then
	echo "deps: cross: the apt sources have no $arch packages (libc6:$arch)" >&2
	[ -z "$added" ] || { dpkg --remove-architecture "$arch"; apt-get update -qq; }
	exit 3
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
