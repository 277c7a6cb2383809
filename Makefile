# dra-cpu: one non-recursive build. Every output lands in build/ (or build/san/ with SAN=1).
#
#   make            driver, CLIs, BPF objects           make test    deps + everything + all tests
#   make check      unit tests + fuzz corpus replay     make demo    end-to-end run on this machine
#   make bench      benchmarks (figures and ratios)     make fuzz    libFuzzer, FUZZ_SECONDS each
#   make vmlinux    regenerate vmlinux/<arch>/ from the running kernel's BTF
#   make lint       layering, sizes, include order, banned calls, cppcheck (.ci/run runs it)
#   SAN=1           ASan+UBSan build            V=1  show commands        CC=clang  also builds

CC      ?= cc
CLANG   ?= clang
BPFTOOL ?= bpftool
PROTOC_C ?= protoc-c
PYTHON  := /usr/bin/python3

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/')
# Each build flavour has its own directory so objects never mix.
ifeq ($(SAN),1)
B := build/san$(if $(findstring clang,$(CC)),-clang)
else ifneq ($(findstring clang,$(CC)),)
B := build/clang
else
B := build
endif

PKGS := libbpf libelf zlib hwloc json-c yaml-0.1 libprotobuf-c libnghttp2 libevent libcurl cmocka
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Wformat=2 -Wshadow -Wmissing-prototypes -Wno-unused-parameter \
	-Wstrict-prototypes -Wpointer-arith -Wvla -Wno-format-zero-length
ifneq ($(NOWERROR),1)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -D_GNU_SOURCE -fno-strict-aliasing $(WARN) -MMD -MP \
	-Iuser -Iinclude -I$(B) -I$(B)/gen $(PKG_CFLAGS)
# Tests, fuzz targets and bench programs find the test helpers by name.
TEST_CFLAGS := -Itest/helpers
LDLIBS := $(PKG_LIBS) -lm
# Full RELRO (hardening): every symbol is bound at start and the GOT is made
# read-only after, so a stray write cannot redirect a library call.
LDFLAGS += -Wl,-z,relro -Wl,-z,now
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' '$(1)' '$(2)';
endif

.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:
.PHONY: all deps check test demo bench fuzz vmlinux clean format lint lint-calls

# ---- sources -------------------------------------------------------------------------------
# user/<layer>/<module>.c: every file is a module of the core library except the files with
# a main(). tools/check-layers.py states which layer may include which.
MAINS    := user/cmd/main.c user/cmd/alloc_main.c user/cmd/bpf_verify.c
LIB_SRCS := $(filter-out $(MAINS),$(wildcard user/*/*.c))
PROTOS   := $(wildcard proto/*.proto)
PB_SRCS  := $(patsubst proto/%.proto,$(B)/gen/%.pb-c.c,$(PROTOS))
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(B)/bpf/%.bpf.o,$(BPF_SRCS))
SKELS    := $(patsubst bpf/%.bpf.c,$(B)/%.skel.h,$(BPF_SRCS))
GEN_HDRS := $(SKELS) $(PB_SRCS:.c=.h)

LIB_OBJS := $(patsubst user/%.c,$(B)/obj/%.o,$(LIB_SRCS)) $(PB_SRCS:.c=.o)
LIB      := $(B)/libdracpu.a

BINS := $(B)/dra-cpu-driver $(if $(wildcard user/cmd/alloc_main.c),$(B)/dra-cpu-alloc) \
	$(if $(wildcard user/cmd/bpf_verify.c),$(B)/bpf-verify)

TEST_SRCS  := $(wildcard test/unit/*_test.c)
TEST_BINS  := $(patsubst test/unit/%_test.c,$(B)/test/%_test,$(TEST_SRCS))
FUZZ_SRCS  := $(wildcard test/fuzz/*_fuzz.c)
FUZZ_REPLAY := $(patsubst test/fuzz/%_fuzz.c,$(B)/fuzz/%_replay,$(FUZZ_SRCS))
FUZZ_LIBF  := $(patsubst test/fuzz/%_fuzz.c,build/fuzz-lf/%_fuzz,$(FUZZ_SRCS))

all: $(BINS) $(BPF_OBJS)

deps:
	$(Q)sh tools/deps.sh

# ---- BPF: .bpf.c -> .bpf.o -> skeleton ----------------------------------------------------
VMLINUX_DIR := vmlinux/$(ARCH)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(VMLINUX_DIR) -Iinclude -Ibpf \
	-Wall -Werror -Wno-unused-function

$(B)/bpf/%.bpf.o: bpf/%.bpf.c | $(B)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -MT $@ -MF $(@:.o=.d) -c $< -o $@.tmp && \
		$(BPFTOOL) gen object $@ $@.tmp && rm -f $@.tmp

$(B)/%.skel.h: $(B)/bpf/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

vmlinux:
	$(Q)mkdir -p $(VMLINUX_DIR)
	$(Q)kver=$$(uname -r); \
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $(VMLINUX_DIR)/vmlinux_$$kver.h && \
	ln -sf vmlinux_$$kver.h $(VMLINUX_DIR)/vmlinux.h && echo "vmlinux: $(VMLINUX_DIR)/vmlinux_$$kver.h"

# ---- protobuf-c ---------------------------------------------------------------------------
$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: proto/%.proto | $(B)/gen
	$(call msg,PROTOC,$<)
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(B)/gen $<

$(B)/gen/%.pb-c.o: $(B)/gen/%.pb-c.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Wno-missing-prototypes -c $< -o $@

# ---- C ------------------------------------------------------------------------------------
$(B)/obj/%.o: user/%.c | $(GEN_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(B)/obj/cmd/main.o: CFLAGS += -DDRA_CPU_VERSION='"$(VERSION)"'
$(B)/obj/cmd/bpf_verify.o: CFLAGS += -DDRA_CPU_VERSION='"$(VERSION)"'
# --version names the commit built: the objects that print it are rebuilt
# when it changes. The stamp is rewritten (when it differs) as the Makefile is
# read, not by a rule: every target here is .SECONDARY, and make does not
# remake a prerequisite of that kind that is missing.
$(shell mkdir -p $(B) && (echo '$(VERSION)' | cmp -s - $(B)/version.stamp || \
	echo '$(VERSION)' > $(B)/version.stamp))
$(B)/obj/cmd/main.o $(B)/obj/cmd/bpf_verify.o: $(B)/version.stamp

$(B)/dra-cpu-driver: $(B)/obj/cmd/main.o $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/dra-cpu-alloc: $(B)/obj/cmd/alloc_main.o $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/bpf-verify: $(B)/obj/cmd/bpf_verify.o $(LIB)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Unit tests: test/unit/<module>_test.c, cmocka, linked against the library. A test may name
# functions to wrap in a first-line comment: /* wrap: open read */
$(B)/test/%_test: test/unit/%_test.c $(LIB) | $(B)/test $(GEN_HDRS)
	$(call msg,TEST,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -Wno-missing-prototypes -MF $@.d $(LDFLAGS) $< $(LIB) $(LDLIBS) \
		$(patsubst %,-Wl$(comma)--wrap=%,$(shell sed -n '1s|^/\* wrap: \(.*\) \*/|\1|p' $<)) -o $@

comma := ,

# Fuzz targets: a replay main (any compiler) and libFuzzer binaries (clang only).
$(B)/fuzz/%_replay: test/fuzz/%_fuzz.c test/fuzz/replay_main.c $(LIB) | $(B)/fuzz $(GEN_HDRS)
	$(call msg,FUZZ,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -Wno-missing-prototypes -MF $@.d $(LDFLAGS) $< test/fuzz/replay_main.c \
		$(LIB) $(LDLIBS) -o $@

FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer
build/fuzz-lf/lib/%.o: user/%.c | build/fuzz-lf/lib $(SKELS) $(PB_SRCS:.c=.h)
	$(Q)mkdir -p $(@D) && $(CLANG) $(filter-out -O2,$(CFLAGS)) -O1 -g -fsanitize=fuzzer-no-link,address,undefined -MF $@.d -c $< -o $@
build/fuzz-lf/lib/%.pb-c.o: $(B)/gen/%.pb-c.c | build/fuzz-lf/lib
	$(Q)$(CLANG) $(filter-out -O2,$(CFLAGS)) -Wno-missing-prototypes -O1 -g -fsanitize=fuzzer-no-link,address,undefined -MF $@.d -c $< -o $@
FUZZ_LIB_OBJS := $(patsubst user/%.c,build/fuzz-lf/lib/%.o,$(LIB_SRCS)) \
	$(patsubst $(B)/gen/%.pb-c.c,build/fuzz-lf/lib/%.pb-c.o,$(PB_SRCS))
build/fuzz-lf/%_fuzz: test/fuzz/%_fuzz.c $(FUZZ_LIB_OBJS) | build/fuzz-lf
	$(call msg,LIBFUZZ,$@)
	$(Q)$(CLANG) $(filter-out -O2,$(CFLAGS)) $(TEST_CFLAGS) -Wno-missing-prototypes $(FUZZ_CFLAGS) -MF $@.d \
		$< $(FUZZ_LIB_OBJS) $(LDLIBS) -o $@

FUZZ_SECONDS ?= 60
# Each target runs FUZZ_SECONDS with its committed corpus as seed; new inputs go
# to build/fuzz-lf/corpus-<name> (first directory), never into test/fuzz/corpus.
fuzz: $(FUZZ_LIBF)
	$(Q)fail=0; for f in $(FUZZ_LIBF); do \
		n=$$(basename $$f _fuzz); mkdir -p build/fuzz-lf/corpus-$$n; \
		if $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=build/fuzz-lf/$$n- \
			build/fuzz-lf/corpus-$$n test/fuzz/corpus/$$n > build/fuzz-lf/$$n.log 2>&1; \
		then echo "fuzz: $$n ok, $$(sed -n 's/^stat::number_of_executed_units: *//p' build/fuzz-lf/$$n.log) runs in $(FUZZ_SECONDS) s"; \
		else echo "fuzz: $$n FAILED: see build/fuzz-lf/$$n.log"; fail=1; fi; \
	done; exit $$fail

$(B)/bpf $(B)/gen $(B)/test $(B)/fuzz build/fuzz-lf build/fuzz-lf/lib:
	$(Q)mkdir -p $@

# ---- tests, demo, bench -------------------------------------------------------------------
# check: unit tests and fuzz corpus replay. test: check + integration + kernel tests.
# With SAN=1 the integration tests run too: the real binaries under ASan+UBSan.
check: $(TEST_BINS) $(FUZZ_REPLAY) all
	$(Q)B=$(B) PYTHON=$(PYTHON) VM= bash test/run.sh $(if $(filter 1,$(SAN)),all,unit)

# make test on amd64 also cross-builds for arm64 and runs that build's unit tests and
# replays under qemu-user, when Debian's arm64 packages can be installed here (else one
# skip says why); test_image.py builds and runs the arm64 image. CROSS= leaves it out.
# The BPF unit tests also run on Debian 12's kernel of architecture VM (the machine's
# own), booted in qemu-system by tools/vm.sh. VM= leaves that out.
CROSS ?= $(if $(filter x86,$(ARCH)),arm64)
VM ?= $(shell dpkg --print-architecture 2>/dev/null)
test: deps
	$(Q)$(MAKE) --no-print-directory all $(TEST_BINS) $(FUZZ_REPLAY)
	$(Q)$(if $(CROSS),sh tools/cross.sh $(CROSS) test)
	$(Q)B=$(B) PYTHON=$(PYTHON) CROSS=$(CROSS) VM=$(VM) bash test/run.sh all

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)B=$(B) sh tools/demo.sh
	$(Q)B=$(B) $(PYTHON) tools/demo.py

bench:
	$(Q)sh tools/deps.sh bench
	$(Q)$(MAKE) --no-print-directory all $(BENCH_BINS)
	$(Q)B=$(B) PYTHON=$(PYTHON) sh test/bench/run.sh

format:
	$(Q)clang-format -i user/*/*.[ch] test/unit/*.c test/helpers/*.[ch] test/fuzz/*.c bpf/*.c include/*.h

# Calls with a safer helper here (as curl's checksrc bans them): strcpy and sprintf
# (snprintf, lib/buf), strtok (strtok_r or a parser of one's own), and the integer
# readers that take blanks, signs, trailing junk or clamp out-of-range values
# unless errno is cleared and read back: the atoi and strtol families and sscanf
# (lib/num.h: full-input and range checks).
BANNED := strcpy sprintf strtok atoi atol atoll strtol strtoll strtoul strtoull sscanf
empty :=
space := $(empty) $(empty)

# lint: layering and include order, sizes, banned calls, cppcheck. .ci/run runs it.
lint: lint-calls
	$(Q)$(PYTHON) tools/check-layers.py
	$(Q)$(PYTHON) tools/check-sizes.py
	@# memleak, resourceLeak: cppcheck does not model __attribute__((cleanup)); leaks are
	@# checked for real by ASan (make check SAN=1) and valgrind instead.
	$(Q)cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=memleak --suppress=resourceLeak -Iuser -Iinclude user/

lint-calls:
	$(Q)if grep -nE '\b($(subst $(space),|,$(BANNED)))\s*\(' user/*/*.c user/*/*.h; then \
		echo "lint: banned calls above; use snprintf, lib/buf, strtok_r or lib/num.h"; exit 1; \
	else echo "lint: no banned calls ($(BANNED))"; fi

clean:
	rm -rf build

-include $(wildcard $(B)/obj/*/*.d $(B)/bpf/*.d $(B)/test/*.d $(B)/fuzz/*.d build/fuzz-lf/*.d build/fuzz-lf/lib/*/*.d)

# ---- grpc: echo/stand-in plugin server for test/integration/test_grpc.py -----------------
GRPC_ECHO := $(B)/test/grpc_echo
$(GRPC_ECHO): test/helpers/grpc_echo.c $(LIB) | $(B)/test $(GEN_HDRS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -Wno-missing-prototypes -MF $@.d $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@
all: $(GRPC_ECHO)

# ---- NRI test plugin: user/nri.c with a trivial env-driven policy, run by
# test/integration/test_nri_proto.py against the runtime simulator test/sim/nrisim.py.
$(B)/test/nri_echo_plugin: test/helpers/nri_echo_plugin.c $(LIB) | $(B)/test $(GEN_HDRS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -MF $@.d $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@
all: $(B)/test/nri_echo_plugin

# ---- bench: the C benchmarks test/bench/run.sh calls (methods in test/bench/README.md) ------
BENCH_BINS := $(B)/alloc_bench $(B)/cores_bench $(B)/bpf_bench
$(B)/alloc_bench $(B)/cores_bench: $(B)/%: test/bench/%.c $(LIB) | $(GEN_HDRS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -Wno-missing-prototypes -MF $@.d $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@
$(B)/bpf_bench: test/bench/bpf_bench.c $(LIB) | $(GEN_HDRS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(TEST_CFLAGS) -Wno-missing-prototypes -MF $@.d $(LDFLAGS) $< $(LIB) $(LDLIBS) \
		-lpthread -o $@
-include $(wildcard $(B)/*_bench.d)

# ---- image: the container image, with docker or podman, without a registry ---------------
# tools/image.sh makes the Debian 12 base from Debian's mirror when the engine lacks it,
# then builds the Dockerfile for IMAGE_ARCH (ARCH=arm64 cross-builds). The image is tagged
# with VERSION and with the Helm chart's appVersion (what the chart runs by default); its
# --version and OCI labels carry VERSION (test/integration/test_image.py checks they agree).
IMAGE      ?= dra-cpu
IMAGE_ARCH := $(patsubst x86,amd64,$(ARCH))
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_SOURCE   ?= $(or $(shell git config --get remote.origin.url),unknown)
IMAGE_LICENSES ?= $(shell sed -n '1s|.*SPDX-License-Identifier: *||p' bpf/pinning.bpf.c)
IMAGE_ENV   = IMAGE=$(IMAGE) IMAGE_ARCH=$(IMAGE_ARCH) VERSION=$(VERSION) \
	TAGS="$(VERSION) $(shell sed -n 's/^appVersion: *//p' deploy/helm/dra-cpu/Chart.yaml)" \
	REVISION=$(IMAGE_REVISION) SOURCE="$(IMAGE_SOURCE)" LICENSES="$(IMAGE_LICENSES)"
.PHONY: image image-base image-size
image:
	$(Q)$(IMAGE_ENV) sh tools/image.sh build
	$(Q)$(IMAGE_ENV) sh tools/image.sh size
image-base:
	$(Q)sh tools/image.sh base
image-size:
	$(Q)$(IMAGE_ENV) sh tools/image.sh size

# ---- cross: another architecture's build and its tests under qemu-user --------------------
# make cross ARCH=arm64 builds into build/arm64 (tools/cross.sh says what it needs);
# make cross-check ARCH=arm64 runs its unit tests and fuzz replays under qemu-aarch64-static.
.PHONY: cross cross-check
cross:
	$(Q)sh tools/cross.sh $(IMAGE_ARCH) build
cross-check: cross
	$(Q)sh tools/cross.sh $(IMAGE_ARCH) check
