#!/bin/sh
# Build the dra-cpu image with whichever container engine works here, without a
# container registry (make image, make image-base, make image-size).
#
#   tools/image.sh engine   print the engine that works (docker, else podman) and
#                           the flags this machine needs for it
#   tools/image.sh base     make the Debian 12 base image from Debian's mirror
#                           (mmdebstrap) and tag it as the Dockerfile's FROM name
#   tools/image.sh build    the image, stamped with VERSION, never pulling
#   tools/image.sh size     its size, uncompressed and compressed (gzip -9)
#
# Environment: ENGINE (docker|podman: skip detection), IMAGE (dra-cpu), TAGS
# (space-separated; default VERSION), IMAGE_ARCH (a Debian architecture: amd64,
# arm64; default the machine's), VERSION, REVISION, SOURCE, LICENSES (stamped
# into --version and the OCI labels), MIRROR (http://deb.debian.org/debian).
set -eu

cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-dra-cpu}
NATIVE=$(dpkg --print-architecture 2>/dev/null || uname -m | sed -e 's/x86_64/amd64/' -e 's/aarch64/arm64/')
IMAGE_ARCH=${IMAGE_ARCH:-$NATIVE}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
BASE=docker.io/library/debian:12

die() { echo "image: $*" >&2; exit 1; }

# The engine, and for podman the OCI runtime: crun refuses a cgroup v1 host
# whose cgroup2 hierarchy has controllers ("hybrid"), runc runs there.
detect() {
	[ -n "${ENGINE:-}" ] && return 0
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		ENGINE=docker
	elif command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1; then
		ENGINE=podman
	else
		die "neither docker (with a running engine) nor podman works here; on Debian: apt-get install podman runc"
	fi
}

runtime_flags() {
	[ "$ENGINE" = podman ] || return 0
	if [ -n "${PODMAN_RUNTIME:-}" ]; then
		echo "--runtime $PODMAN_RUNTIME"
	elif grep -qs . /sys/fs/cgroup/unified/cgroup.controllers && command -v runc >/dev/null 2>&1; then
		echo "--runtime runc"
	fi
}

engine() {
	detect
	echo "$ENGINE $(runtime_flags)"
}

base() {
	detect
	if [ -z "${FORCE:-}" ] && $ENGINE image inspect $BASE >/dev/null 2>&1; then
		echo "image: $BASE present (FORCE=1 to remake it)"
		return 0
	fi
	command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap missing: apt-get install mmdebstrap"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# minbase: the essential set and apt. The build stage adds what it needs.
	mmdebstrap --quiet --variant=minbase --arch="$NATIVE" \
		--aptopt='Acquire::Languages "none"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		bookworm "$tmp/base.tar" \
		"deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
		"deb $SECURITY bookworm-security main"
	$ENGINE import --change 'CMD ["bash"]' "$tmp/base.tar" $BASE >/dev/null
	echo "image: $BASE made from $MIRROR ($NATIVE)"
}

build() {
	detect
	: "${VERSION:?VERSION unset: make image stamps it from git describe}"
	$ENGINE image inspect $BASE >/dev/null 2>&1 || base
	tags=""
	for t in ${TAGS:-$VERSION}; do
		[ "$IMAGE_ARCH" = "$NATIVE" ] && tags="$tags -t $IMAGE:$t"
		tags="$tags -t $IMAGE:$t-$IMAGE_ARCH"
	done
	flags="$(runtime_flags)"
	# Podman 4.3 does not set BUILDPLATFORM itself; docker's BuildKit does.
	[ "$ENGINE" = podman ] && flags="$flags --pull=never --build-arg BUILDPLATFORM=linux/$NATIVE"
	[ "$ENGINE" = docker ] && flags="$flags --pull=false"
	# Host network for the build's apt-get: it needs only Debian's mirror, and
	# podman's bridge needs iptables, which a build machine may lack.
	# shellcheck disable=SC2086
	$ENGINE build $flags --network host --platform "linux/$IMAGE_ARCH" \
		--build-arg TARGETARCH="$IMAGE_ARCH" --build-arg VERSION="$VERSION" \
		--build-arg REVISION="${REVISION:-unknown}" --build-arg SOURCE="${SOURCE:-unknown}" \
		--build-arg LICENSES="${LICENSES:-unknown}" $tags -f Dockerfile .
}

size() {
	detect
	ref=$IMAGE:${TAGS%% *}-$IMAGE_ARCH
	[ -n "${TAGS:-}" ] || ref=$IMAGE:$VERSION-$IMAGE_ARCH
	u=$($ENGINE image inspect --format '{{.Size}}' "$ref")
	c=$($ENGINE save "$ref" 2>/dev/null | gzip -9 | wc -c)
	echo "image: $ref $(( u / 1000 )) kB uncompressed, $(( c / 1000 )) kB compressed (gzip -9 of the saved image)"
}

case "${1:-}" in
engine) engine ;;
base) base ;;
build) build ;;
size) size ;;
*) echo "usage: tools/image.sh engine|base|build|size" >&2; exit 2 ;;
esac
