# dra-cpu image: the driver (and bpf-verify when the tree has it) on Debian 12.
#
#   docker build -t dra-cpu:dev --build-arg VERSION=$(git describe --always --dirty) .
#
# Two stages: the build stage installs the toolchain with `make deps` (the same
# script developers run) and builds with `make`; the runtime stage holds the
# shared libraries the binaries load, nothing else. The runtime package list is
# checked against `ldd` of the built binaries by test/integration/test_deploy.py.

FROM debian:12 AS build
ARG VERSION=unknown
ENV DEBIAN_FRONTEND=noninteractive
# make first: `make deps` runs tools/deps.sh, which installs the rest.
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make deps && rm -rf /var/lib/apt/lists/*
# VERSION on the command line: the build context has no .git (.dockerignore).
RUN make -j"$(nproc)" VERSION="$VERSION" \
    && mkdir -p /out \
    && cp build/dra-cpu-driver /out/ \
    && if [ -x build/bpf-verify ]; then cp build/bpf-verify /out/; fi

FROM debian:12-slim
# Runtime libraries only. libbpf1/libelf1/zlib1g: BPF loading; libhwloc15:
# topology; libmbedtls14, libmbedx509-1, libmbedcrypto7: TLS to the API server;
# libjson-c5, libyaml-0-2: JSON and kubeconfig; libprotobuf-c1, libnghttp2-14:
# kubelet gRPC and NRI messages; libevent-2.1-7: the event loop, DNS, /metrics.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libbpf1 libelf1 zlib1g libhwloc15 libmbedtls14 libmbedx509-1 libmbedcrypto7 libjson-c5 libyaml-0-2 libprotobuf-c1 libnghttp2-14 libevent-2.1-7 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
# No USER: the driver must run as root. It creates sockets and files in
# root-owned host directories (kubelet plugin dirs, /var/run/cdi,
# /var/run/dra-cpu), connects to the runtime's root-only NRI socket, and loads
# BPF programs; deploy/base/daemonset.yaml gives it only the capabilities it
# needs (BPF, PERFMON, SYS_RESOURCE, SYS_NICE), not privileged mode.
ENTRYPOINT ["/usr/local/bin/dra-cpu-driver"]
