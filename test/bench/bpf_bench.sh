#!/bin/sh
# Builds and runs test/bench/bpf_bench.c against the current build (run `make`
# first). B selects the build dir as in test/run.sh; extra arguments go to the
# bench (-c cpu -n round_trips -p pairs). Meant to be called from
# test/bench/run.sh once `make bench` wires it in.
set -eu
B=${B:-build}
CC=${CC:-cc}
# shellcheck disable=SC2046 # pkg-config output is a word list
$CC -O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iuser -Iinclude -I"$B" \
	test/bench/bpf_bench.c "$B"/libdracpu.a \
	$(pkg-config --cflags --libs libbpf libevent) -lpthread -lm -o "$B"/bpf_bench
exec "$B"/bpf_bench "$@"
