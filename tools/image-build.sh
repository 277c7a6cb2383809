#!/bin/sh
# The build stage of the image (Dockerfile), one step per subcommand so that each
# is its own cached layer:
#
#   image-build.sh deps     the packages building needs, for the target architecture
#   image-build.sh curl     libcurl from Debian's source, HTTP and HTTPS only
#   image-build.sh make     the driver and bpf-verify, stamped with $VERSION
#   image-build.sh rootfs   /rootfs: the binaries, their library closure, the CA bundle
#
# TARGETARCH (a Debian architecture: amd64, arm64) selects the target; when it is
# not the build machine's own, Debian's cross compiler and the target's multiarch
# -dev packages build it (the build stage always runs natively, so no emulator).
# Only Debian 12 packages and Debian sources: the image builds from the mirror alone.
set -eu

TARGETARCH=${TARGETARCH:-$(dpkg --print-architecture)}
case "$TARGETARCH" in
amd64) MULTIARCH=x86_64-linux-gnu KARCH=x86 ;;
arm64) MULTIARCH=aarch64-linux-gnu KARCH=arm64 ;;
*) echo "image-build: unsupported TARGETARCH=$TARGETARCH (amd64, arm64)" >&2; exit 1 ;;
esac
NATIVE=$(dpkg --print-architecture)
if [ "$TARGETARCH" = "$NATIVE" ]; then CC=gcc; else CC=$MULTIARCH-gcc; fi
export DEBIAN_FRONTEND=noninteractive
# pkg-config sees the target's .pc files only (native builds too: same result).
export PKG_CONFIG_LIBDIR=/usr/lib/$MULTIARCH/pkgconfig:/usr/share/pkgconfig

# Tools that run on the build machine: compilers, the BPF toolchain, protoc-c,
# dpkg-dev (apt-get source). clang alone compiles BPF; bpftool links and makes
# skeletons. Not the test toolchain of tools/deps.sh (cmocka, Python, valgrind...).
BUILD_TOOLS="make gcc libc6-dev pkg-config clang bpftool protobuf-c-compiler dpkg-dev
ca-certificates"
# Libraries the binaries link, for the target: the driver's (Makefile PKGS, less
# cmocka) and what the libcurl built here needs (OpenSSL, nghttp2, zlib).
TARGET_DEVS="libbpf-dev libelf-dev zlib1g-dev libhwloc-dev libjson-c-dev libyaml-dev
libprotobuf-c-dev libnghttp2-dev libevent-dev libssl-dev"
MAKE_PKGS="libbpf libelf zlib hwloc json-c yaml-0.1 libprotobuf-c libnghttp2 libevent libcurl"

apt_clean() {
	apt-get clean
	rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old
}

deps() {
	pkgs=$BUILD_TOOLS
	if [ "$TARGETARCH" != "$NATIVE" ]; then
		dpkg --add-architecture "$TARGETARCH"
		pkgs="$pkgs gcc-$MULTIARCH libc6-dev:$TARGETARCH"
	fi
	for p in $TARGET_DEVS; do pkgs="$pkgs $p:$TARGETARCH"; done
	# deb-src for `apt-get source curl`, from the same mirror as the packages.
	sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/src.list
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
	apt_clean
}

# Debian's libcurl4 speaks some twenty protocols and brings GnuTLS, Kerberos,
# LDAP, SASL, SSH, RTMP, libidn2, libpsl, brotli and zstd into the image. The
# driver speaks HTTP/1.1 and HTTP/2, over TLS or not, to the API server, maybe
# through a proxy: Debian's own curl source (its patches applied) built with
# only that keeps OpenSSL, nghttp2 and zlib. Installed in place of libcurl4 (same
# soname), so the rootfs step finds it where the loader will.
curl() {
	mkdir -p /tmp/curl && cd /tmp/curl
	apt-get update -qq
	apt-get source -qq curl >/dev/null 2>&1
	apt_clean
	cd curl-*/
	host=""
	[ "$TARGETARCH" = "$NATIVE" ] || host="--host=$MULTIARCH"
	# shellcheck disable=SC2086
	CC=$CC ./configure -q $host --prefix=/usr --libdir=/usr/lib/$MULTIARCH \
		--disable-static --enable-shared \
		--with-openssl --with-nghttp2 --with-zlib \
		--without-brotli --without-zstd --without-libpsl --without-libidn2 \
		--without-librtmp --without-libssh2 --without-libssh --without-gssapi \
		--disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
		--disable-tftp --disable-pop3 --disable-imap --disable-smtp --disable-gopher \
		--disable-mqtt --disable-smb --disable-ftp --disable-file \
		--disable-manual --disable-ntlm --disable-ntlm-wb --disable-doh \
		--disable-alt-svc --disable-hsts --disable-netrc --disable-progress-meter \
		--disable-cookies --disable-mime \
		--without-ca-path --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt
	make -s -j"$(nproc)" -C lib >/dev/null
	make -s -C lib install >/dev/null
	make -s -C include install >/dev/null
	install -D -m644 libcurl.pc /usr/lib/$MULTIARCH/pkgconfig/libcurl.pc
	grep '^supported_protocols' libcurl.pc
	cd / && rm -rf /tmp/curl
}

build() {
	: "${VERSION:?image-build make: VERSION unset (the build context has no .git)}"
	make -j"$(nproc)" B=build/image CC="$CC" ARCH="$KARCH" PKGS="$MAKE_PKGS" VERSION="$VERSION" \
		build/image/dra-cpu-driver build/image/bpf-verify
}

# Copy NEEDED entries, recursively, from the multiarch library directory (where
# the loader looks without an ld.so.cache): readelf reads any architecture's ELF,
# so this works for a cross build, where ldd cannot run the target's loader.
needed() {
	readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}

rootfs() {
	root=/rootfs libdir=/usr/lib/$MULTIARCH
	rm -rf $root
	mkdir -p $root/usr/local/bin $root$libdir $root/etc/ssl/certs
	ln -s usr/lib $root/lib
	cp build/image/dra-cpu-driver build/image/bpf-verify $root/usr/local/bin/
	todo="$root/usr/local/bin/dra-cpu-driver $root/usr/local/bin/bpf-verify"
	while [ -n "$todo" ]; do
		next=""
		for f in $todo; do
			for so in $(needed "$f"); do
				[ -e "$root$libdir/$so" ] && continue
				[ -e "$libdir/$so" ] || { echo "image-build: $f needs $so, not in $libdir" >&2; exit 1; }
				cp -L "$libdir/$so" "$root$libdir/$so"
				next="$next $root$libdir/$so"
			done
		done
		todo=$next
	done
	interp=$(readelf -lW build/image/dra-cpu-driver | sed -n 's/.*interpreter: \(.*\)\]$/\1/p')
	mkdir -p "$root$(dirname "$interp")"
	# libc needs the loader by soname too: one copy, the PT_INTERP path a link.
	if [ -e "$root$libdir/$(basename "$interp")" ] && [ ! -e "$root$interp" ]; then
		ln -s "$libdir/$(basename "$interp")" "$root$interp"
	elif [ ! -e "$root$interp" ]; then
		cp -L "$interp" "$root$interp"
	fi
	# The trust anchor when a kubeconfig names no CA (in-cluster always has one).
	cp -L /etc/ssl/certs/ca-certificates.crt $root/etc/ssl/certs/
	(cd $root && find . ! -type d | sort)
}

case "${1:-}" in
deps) deps ;;
curl) curl ;;
make) build ;;
rootfs) rootfs ;;
*) echo "usage: image-build.sh deps|curl|make|rootfs" >&2; exit 2 ;;
esac
