build-clang/obj/kube/events.o: user/kube/events.c user/kube/events.h \
  user/lib/cleanup.h user/kube/kube.h user/kube/writer.h \
  user/lib/clock.h user/lib/jsonc.h user/lib/log.h user/obs/metrics.h

user/kube/events.h:

user/lib/cleanup.h:

user/kube/kube.h:

user/kube/writer.h:

user/lib/clock.h:

user/lib/jsonc.h:

user/lib/log.h:

user/obs/metrics.h:
