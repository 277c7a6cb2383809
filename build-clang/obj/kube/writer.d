build-clang/obj/kube/writer.o: user/kube/writer.c user/kube/writer.h \
  user/lib/cleanup.h user/kube/kube.h user/lib/backoff.h \
  user/lib/clock.h

user/kube/writer.h:

user/lib/cleanup.h:

user/kube/kube.h:

user/lib/backoff.h:

user/lib/clock.h:
