#!/bin/sh
# Install the Debian 12 packages dra-cpu builds and tests with (DESIGN.md section 6).
# Idempotent: asks dpkg what is missing, runs apt-get update only when something is,
# and says what it installs. Run as root; as another user it only reports.
#   tools/deps.sh          build and test
#   tools/deps.sh bench    also what make bench runs (rt-tests: cyclictest, figure 7)
set -eu

PKGS="make gcc pkg-config libbpf-dev bpftool clang llvm libelf-dev zlib1g-dev
libhwloc-dev hwloc libcurl4-openssl-dev libjson-c-dev libyaml-dev
libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libnghttp2-dev libevent-dev libcmocka-dev
libclang-rt-14-dev python3 python3-pytest python3-grpcio python3-protobuf
python3-jsonschema python3-yaml prometheus openssl curl nghttp2-proxy bzip2 iproute2
valgrind podman runc mmdebstrap cppcheck"
# podman, runc, mmdebstrap: make image and test/integration/test_image.py (no registry:
# the base image is made from Debian's mirror). cppcheck: make lint.
# kubectl renders deploy/ with kustomize; any installed kubectl will do (some images
# ship a non-Debian one that conflicts with Debian's kubernetes-client).
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
[ "${1:-}" = bench ] && PKGS="$PKGS rt-tests"

# With a foreign architecture added (make cross), a package may be known for two
# architectures: what counts is the machine's own (or "all").
native=$(dpkg --print-architecture)
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$p" 2>/dev/null |
		grep -Eq "^($native|all) installed$" || missing="$missing $p"
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
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
