build-clang/bpf/pinning.bpf.o: bpf/pinning.bpf.c vmlinux/x86/vmlinux.h \
  include/pinning.h bpf/pinning.bpf.h bpf/pinning_maps.bpf.h

vmlinux/x86/vmlinux.h:

include/pinning.h:

bpf/pinning.bpf.h:

bpf/pinning_maps.bpf.h:
