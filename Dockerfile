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
# topology; libcurl4 (the OpenSSL flavour, with libssl3): the API client over
# HTTP/2 or HTTP/1.1, TLS 1.2/1.3; ca-certificates: the system bundle, the
# trust anchor when a kubeconfig names no CA (in-cluster always has one);
# libjson-c5, libyaml-0-2: JSON and kubeconfig; libprotobuf-c1, libnghttp2-14:
# kubelet gRPC and NRI messages (and curl's HTTP/2); libevent-2.1-7: the event
# loop, timers, /metrics.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libbpf1 libelf1 zlib1g libhwloc15 libcurl4 ca-certificates libjson-c5 libyaml-0-2 libprotobuf-c1 libnghttp2-14 libevent-2.1-7 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
# No USER: the driver must run as root. It creates sockets and files in
# root-owned host directories (kubelet plugin dirs, /var/run/cdi,
# /var/run/dra-cpu), connects to the runtime's root-only NRI socket, and loads
# BPF programs; deploy/base/daemonset.yaml gives it only the capabilities it
# needs (BPF, PERFMON, SYS_RESOURCE, SYS_NICE), not privileged mode.
ENTRYPOINT ["/usr/local/bin/dra-cpu-driver"]
