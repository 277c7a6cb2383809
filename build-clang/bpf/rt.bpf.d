build-clang/bpf/rt.bpf.o: bpf/rt.bpf.c vmlinux/x86/vmlinux.h include/rt.h \
  include/pinning.h bpf/pinning.bpf.h

vmlinux/x86/vmlinux.h:

include/rt.h:

include/pinning.h:

bpf/pinning.bpf.h:
