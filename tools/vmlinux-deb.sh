#!/bin/sh
# vmlinux/<arch>/ for an architecture this machine does not run, from Debian's
# own kernel package: the kernel's BTF (CONFIG_DEBUG_INFO_BTF=y) is read out of
# the packaged image and dumped as C by bpftool, as `make vmlinux` does from the
# running kernel's /sys/kernel/btf/vmlinux. CO-RE relocates field offsets at load
# time, so one header per architecture serves every kernel of it that has BTF.
#
#   tools/vmlinux-deb.sh arm64 [linux-image package]   (default: linux-image-arm64's)
#
# Needs the target architecture known to apt (dpkg --add-architecture arm64),
# bpftool and python3. Writes vmlinux/<karch>/vmlinux_<kernel>.h, the vmlinux.h
# link, and PROVENANCE (package, version, SHA-256 of the .deb).
set -eu
arch=${1:?usage: tools/vmlinux-deb.sh arm64 [linux-image package]}
case "$arch" in
arm64) karch=arm64 ;;
*) echo "vmlinux-deb: $arch: only arm64 is known" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
pkg=${2:-$(apt-cache depends "linux-image-$arch:$arch" | sed -n 's/.*Depends: \(linux-image-[0-9][^:]*\).*/\1/p' | head -1)}
[ -n "$pkg" ] || { echo "vmlinux-deb: no linux-image package for $arch" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q "$pkg:$arch" >/dev/null 2>&1)
deb=$(ls "$tmp"/*.deb)
dpkg-deb -x "$deb" "$tmp/x"
kver=${pkg#linux-image-}
img=$tmp/x/boot/vmlinuz-$kver
# The .BTF section is in the image as loaded: find its header (magic 0xeb9f,
# version 1, 24-byte header) followed by the largest type and string sections.
/usr/bin/python3 - "$img" "$tmp/vmlinux.btf" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
best, i = None, 0
while (i := d.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", i)) >= 0:
    _, _, _, hl, to, tl, so, sl = struct.unpack_from("<HBBIIIII", d, i)
    end = i + hl + max(to + tl, so + sl)
    if end <= len(d) and (best is None or tl > best[1]):
        best = (i, tl, end)
    i += 1
if not best:
    sys.exit("no BTF in %s (kernel without CONFIG_DEBUG_INFO_BTF?)" % sys.argv[1])
open(sys.argv[2], "wb").write(d[best[0]:best[2]])
PY
mkdir -p "vmlinux/$karch"
bpftool btf dump file "$tmp/vmlinux.btf" format c > "vmlinux/$karch/vmlinux_$kver.h"
ln -sf "vmlinux_$kver.h" "vmlinux/$karch/vmlinux.h"
ver=$(dpkg-deb -f "$deb" Version)
cat > "vmlinux/$karch/PROVENANCE" <<EOT
vmlinux_$kver.h: the BTF of Debian's $pkg $ver ($arch), dumped as C with
$(bpftool version | head -1), by tools/vmlinux-deb.sh $arch $pkg.
$(sha256sum "$deb" | cut -d' ' -f1)  $(basename "$deb")
EOT
echo "vmlinux-deb: vmlinux/$karch/vmlinux_$kver.h from $pkg $ver"
