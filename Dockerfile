# dra-cpu image: the driver and bpf-verify, on nothing but what they load.
#
#   make image                 (tools/image.sh: docker or podman, no registry needed)
#   make image ARCH=arm64      (cross-built; the build stage runs natively)
#
# Two stages. The build stage (Debian 12, always the build machine's own
# architecture) installs only what building needs, builds a libcurl with HTTP
# and HTTPS only from Debian's source, then the binaries, for TARGETARCH, and
# gathers them with their shared-library closure and the CA bundle into /rootfs
# (tools/image-build.sh). The runtime stage is that /rootfs and nothing else: no
# shell, no package manager, no libraries the binaries do not load.
# test/integration/test_image.py builds it and runs it as the DaemonSet does.
#
# "debian:12" is whatever the engine has under that name: tools/image-base.sh
# makes it from Debian's mirror with mmdebstrap, so no registry is involved.

ARG BUILDPLATFORM=linux/amd64
FROM --platform=$BUILDPLATFORM debian:12 AS build
ARG TARGETARCH=amd64
WORKDIR /src
COPY tools/image-build.sh /usr/local/sbin/
RUN TARGETARCH=$TARGETARCH sh /usr/local/sbin/image-build.sh deps
RUN TARGETARCH=$TARGETARCH sh /usr/local/sbin/image-build.sh curl
COPY . .
# VERSION on the command line: the build context has no .git (.dockerignore).
ARG VERSION=unknown
RUN TARGETARCH=$TARGETARCH VERSION=$VERSION sh /usr/local/sbin/image-build.sh make \
    && TARGETARCH=$TARGETARCH sh /usr/local/sbin/image-build.sh rootfs

FROM scratch
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=unknown
ARG LICENSES=unknown
COPY --from=build /rootfs/ /
# OCI annotations; --version and the Helm chart's appVersion agree with
# "version" (test_image.py checks it).
LABEL org.opencontainers.image.title="dra-cpu" \
      org.opencontainers.image.description="Kubernetes DRA driver for CPUs" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.source="$SOURCE" \
      org.opencontainers.image.licenses="$LICENSES"
# No USER: the driver must run as root. It creates sockets and files in
# root-owned host directories (kubelet plugin dirs, /var/run/cdi,
# /var/run/dra-cpu), connects to the runtime's root-only NRI socket, and loads
# BPF programs; deploy/base/daemonset.yaml gives it only the capabilities it
# needs, not privileged mode.
ENTRYPOINT ["/usr/local/bin/dra-cpu-driver"]
