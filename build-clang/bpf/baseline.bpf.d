build-clang/bpf/baseline.bpf.o: bpf/baseline.bpf.c vmlinux/x86/vmlinux.h

vmlinux/x86/vmlinux.h:
