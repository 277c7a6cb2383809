build-clang/obj/kube/claimstatus.o: user/kube/claimstatus.c \
  user/core/claim.h user/core/rt.h user/core/state.h user/core/cdi.h \
  user/lib/cpuset.h user/lib/cleanup.h user/host/topo.h \
  user/kube/claimstatus.h user/kube/kube.h user/kube/writer.h \
  user/lib/jsonc.h user/lib/log.h user/obs/metrics.h

user/core/claim.h:

user/core/rt.h:

user/core/state.h:

user/core/cdi.h:

user/lib/cpuset.h:

user/lib/cleanup.h:

user/host/topo.h:

user/kube/claimstatus.h:

user/kube/kube.h:

user/kube/writer.h:

user/lib/jsonc.h:

user/lib/log.h:

user/obs/metrics.h:
