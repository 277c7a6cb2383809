/* NRI plugin: dra-cpu as an external plugin of containerd/CRI-O, so that the
 * runtime applies our cpusets to containers (wire-protocols.md section 4).
 *
 *            connect (non-blocking)          RegisterPlugin ok
 *   IDLE ─────────────────────> SESSION ─────────────────────> connected()
 *    ▲  backoff (min..max,       │ serves Configure, Synchronize (all parts),
 *    │  reset once synchronized) │ container events; UpdateContainers pushes
 *    └───── EOF, error, timeout, ┘ protocol error, Shutdown ──> disconnected()
 *
 * Two layers, both here:
 *  - struct nri_session: the protocol core without I/O (one connection's
 *    life: registration, Plugin service, Runtime calls). Tests and fuzzers
 *    drive it with bytes.
 *  - struct nri: the session on a libevent loop: the socket, reconnection
 *    with exponential backoff (backoff.h: doubling, equal jitter) when the
 *    runtime is absent or goes away, and timers (registration, setup, call
 *    deadlines). The rest of the daemon keeps serving whatever NRI does.
 *
 * Policy is not here. The daemon fills struct nri_handlers; each gets plain C
 * views of what the runtime sent (borrowed for the call only) and fills
 * outputs nri owns. A handler returning -errno with a message in eb (left
 * empty: strerror) makes nri answer the runtime with an error, which fails a
 * CreateContainer. nri logs handler errors (once), so handlers need not.
 * Handlers must not call nri_free().
 *
 * The process must ignore SIGPIPE: libevent writes the socket with writev(),
 * so a runtime that goes away in the middle of a write would otherwise kill
 * us instead of ending the connection with EPIPE.
 *
 * Subscribed events follow the non-NULL handlers: create 4, post_create 5,
 * start 6, update 8, stop 10, remove 11. Methods of other events, and unknown
 * methods, are answered UNIMPLEMENTED (12), so a runtime falls back to
 * StateChange where it can.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct errbuf;
struct event_base;

#define NRI_SOCKET_DEFAULT "/var/run/nri/nri.sock"
#define NRI_PLUGIN_NAME "dra.cpu"
#define NRI_PLUGIN_IDX "00"
#define NRI_UPDATES_MAX 65536u		/* updates in one response or push */
#define NRI_CPUS_MAX 65536u		/* length of a cpuset string we send */
#define NRI_SYNC_MAX (32u << 20)	/* wire bytes of all parts of a Synchronize */
#define NRI_SYNC_DECODE_BUDGET (256u << 20) /* heap for those parts, decoded */
#define NRI_DECODE_BUDGET (64u << 20)	/* heap for one decoded request */
#define NRI_OUTBUF_MAX (16u << 20)	/* bytes queued for a runtime that does not read */
#define NRI_CREATE_WAIT_MS 1500u	/* longest a CreateContainer waits (nri_adjust_defer()) */
#define NRI_WAITING_MAX 256u		/* CreateContainers waiting at once, per connection */

/* NRI's Event enum; the subscription mask bit is NRI_EVENT_BIT(e). */
enum nri_event {
	NRI_EVENT_RUN_POD_SANDBOX = 1,
	NRI_EVENT_STOP_POD_SANDBOX = 2,
	NRI_EVENT_REMOVE_POD_SANDBOX = 3,
	NRI_EVENT_CREATE_CONTAINER = 4,
	NRI_EVENT_POST_CREATE_CONTAINER = 5,
	NRI_EVENT_START_CONTAINER = 6,
	NRI_EVENT_POST_START_CONTAINER = 7,
	NRI_EVENT_UPDATE_CONTAINER = 8,
	NRI_EVENT_POST_UPDATE_CONTAINER = 9,
	NRI_EVENT_STOP_CONTAINER = 10,
	NRI_EVENT_REMOVE_CONTAINER = 11,
	NRI_EVENT_UPDATE_POD_SANDBOX = 12,
	NRI_EVENT_POST_UPDATE_POD_SANDBOX = 13,
	NRI_EVENT_VALIDATE_CONTAINER_ADJUSTMENT = 14,
};
#define NRI_EVENT_BIT(e) (1u << ((e) - 1))

/* NRI ContainerState. */
enum nri_container_state {
	NRI_CONTAINER_UNKNOWN = 0,
	NRI_CONTAINER_CREATED = 1,
	NRI_CONTAINER_PAUSED = 2,
	NRI_CONTAINER_RUNNING = 3,
	NRI_CONTAINER_STOPPED = 4,
};

/* Views of what the runtime sent: strings are never NULL ("" when absent) and
 * are borrowed until the handler returns. */
struct nri_pod {
	const char *id;		/* sandbox id */
	const char *uid;	/* Kubernetes pod UID */
	const char *name;
	const char *namespace;
	const char *cgroup_parent; /* linux.cgroup_parent */
};

struct nri_container {
	const char *id;
	const char *pod_sandbox_id;
	const char *name;
	int state;			/* enum nri_container_state */
	const char *const *env;		/* n_env entries "KEY=VALUE" */
	size_t n_env;
	const char *cgroups_path;	/* linux.cgroups_path */
	const char *cpus;		/* linux.resources.cpu.cpus, "" = unset */
	const char *mems;		/* linux.resources.cpu.mems */
	uint32_t pid;
	const struct nri_pod *pod;	/* its pod; in Synchronize NULL if not listed */
};

/* Value of KEY in the container's env (first match), or NULL. */
const char *nri_container_getenv(const struct nri_container *c, const char *key);

/* Outputs, owned by nri during a handler call. */
struct nri_adjust;
struct nri_updates;

/* Set the cpuset of the container being created (copied). cpus must be a
 * non-empty valid CPU list ("" would mean "no change" to the runtime):
 * -EINVAL otherwise, -E2BIG over NRI_CPUS_MAX. */
int nri_adjust_set_cpus(struct nri_adjust *a, const char *cpus);
/* Set the memory nodes of the container being created (cpuset.mems; a
 * node list, same rules as cpus; copied). Not called: the runtime's
 * default, every node. */
int nri_adjust_set_mems(struct nri_adjust *a, const char *mems);
/* Set the CFS quota of the container being created, in microseconds per
 * period (LinuxCPU.quota); -1 is the OCI spelling of "no quota", which runc
 * and crun write as cpu.cfs_quota_us -1 (v1) or cpu.max "max" (v2). Not
 * called: the quota the runtime derived from the CPU limit. -EINVAL for 0 or
 * below -1. */
int nri_adjust_set_cpu_quota(struct nri_adjust *a, int64_t quota);
/* The OCI process.scheduler (runtime-spec v1.1.0) as the LinuxScheduler
 * adjustment of NRI v0.11.0 carries it: times in nanoseconds, deadline
 * relative. Runtimes with an older NRI drop the field without a word, so a
 * plugin must check in the kernel that it took effect. */
enum {
	NRI_SCHED_NONE = 0,
	NRI_SCHED_OTHER = 1,
	NRI_SCHED_FIFO = 2,
	NRI_SCHED_RR = 3,
	NRI_SCHED_DEADLINE = 7,
};
/* nri_scheduler.flags: bit (1 << NRI_SCHED_FLAG_*) per LinuxSchedulerFlag. */
enum { NRI_SCHED_FLAG_RESET_ON_FORK = 0, NRI_SCHED_FLAG_DL_OVERRUN = 2 };
struct nri_scheduler {
	int policy; /* NRI_SCHED_* */
	int32_t nice, priority;
	uint32_t flags;
	uint64_t runtime, deadline, period;
};
/* Sets the scheduler adjustment of the container being created (copied).
 * -EINVAL for an unknown policy. */
int nri_adjust_set_scheduler(struct nri_adjust *a, const struct nri_scheduler *sched);

/* Ask the runtime to set another existing container's cpuset (copied, same
 * rules as above; container_id non-empty and at most 1024 bytes, -EINVAL
 * otherwise). -E2BIG after NRI_UPDATES_MAX updates. */
int nri_updates_add(struct nri_updates *u, const char *container_id, const char *cpus);

/* A CreateContainer the handler cannot decide at once (it needs a read from
 * the API server) may wait, so that the runtime's worker is not answered
 * "no" for want of a fact that is a moment away:
 *
 *   handler: nri_adjust_defer(adj, &resume) -> keeps resume, returns -EINPROGRESS
 *   later:   nri_resume_run(&resume)        -> the handler runs again, same request
 *   at the end of the wait                  -> a last run, nri_adjust_is_final() true
 *
 * nri keeps the request (the views a handler gets are as valid on every run)
 * and answers the runtime from whichever run decides. The wait ends at
 * create_wait_ms after the request came, or at 3/4 of the timeout the runtime
 * sent with it if that is sooner (containerd's default is 2 s: the answer
 * must get there before the runtime gives up on the plugin). The final run
 * must decide: -EINPROGRESS then is answered as an error. A resume of a
 * request already answered, or of a connection that ended, does nothing
 * (-ENOENT). Never call nri_resume_run() from inside a handler. */
struct nri_resume {
	int (*fn)(void *ctx, uint64_t token);
	void *ctx;
	uint64_t token; /* unique among all requests of the process */
};
/* Makes this CreateContainer wait (the handler then returns -EINPROGRESS);
 * *ret wakes it. -EBUSY when NRI_WAITING_MAX already wait, -ETIMEDOUT on the
 * final run. A request may wait several times within its one wait. */
int nri_adjust_defer(struct nri_adjust *a, struct nri_resume *ret);
/* 0 on the first run of a request, then 1, 2, ... on the runs after it waited. */
int nri_adjust_attempt(const struct nri_adjust *a);
/* The last run: the wait is over. */
bool nri_adjust_is_final(const struct nri_adjust *a);
/* Milliseconds the request may still wait (0 on the final run). */
int64_t nri_adjust_wait_left_ms(const struct nri_adjust *a);
/* Runs the handler of the waiting request again (see above). */
int nri_resume_run(const struct nri_resume *r);

/* One cpuset update for nri_push_updates(); borrowed for the call. */
struct nri_update {
	const char *container_id;
	const char *cpus;
};

struct nri_handlers {
	/* The runtime accepted our registration; disconnected() follows once for
	 * each connected(), with why the connection ended. */
	void (*connected)(void *ud);
	/* Configure: who the runtime is ("containerd", "2.2.1"; nri_version ""
	 * when it does not say). Before Synchronize. */
	void (*configured)(void *ud, const char *runtime_name, const char *runtime_version,
			   const char *nri_version);
	void (*disconnected)(void *ud, int r);
	/* The whole runtime state after (re)connecting: every part of a split
	 * Synchronize together. Updates go into upd. NULL: nothing to do. */
	int (*synchronize)(void *ud, const struct nri_pod *pods, size_t n_pods,
			   const struct nri_container *ctrs, size_t n_ctrs, struct nri_updates *upd,
			   struct errbuf *eb);
	/* A container is being created: set its cpuset in adj, others' in upd. An
	 * error fails the creation; -EINPROGRESS after nri_adjust_defer() waits
	 * (see struct nri_resume). */
	int (*create_container)(void *ud, const struct nri_pod *pod, const struct nri_container *c,
				struct nri_adjust *adj, struct nri_updates *upd, struct errbuf *eb);
	/* The container's resources are being updated to the given cpus ("" when
	 * the update leaves them); upd may re-pin it or others. */
	int (*update_container)(void *ud, const struct nri_pod *pod, const struct nri_container *c,
				const char *cpus, struct nri_updates *upd, struct errbuf *eb);
	int (*stop_container)(void *ud, const struct nri_pod *pod, const struct nri_container *c,
			      struct nri_updates *upd, struct errbuf *eb);
	/* Notifications: an error is logged, the runtime is answered ok. */
	int (*post_create_container)(void *ud, const struct nri_pod *pod,
				     const struct nri_container *c);
	int (*start_container)(void *ud, const struct nri_pod *pod, const struct nri_container *c);
	int (*remove_container)(void *ud, const struct nri_pod *pod, const struct nri_container *c);
	/* The runtime asked us to shut down; nri then reconnects with backoff. */
	void (*shutdown)(void *ud);
	/* Outcome of one nri_push_updates() call: r < 0 when the runtime did not
	 * answer (or refused); else the ids it could not update. */
	void (*push_done)(void *ud, int r, const char *const *failed_ids, size_t n_failed);
};

/* Counters for /metrics (the daemon's collector reads them). */
struct nri_stats {
	uint64_t connects;		/* socket connections made */
	uint64_t connect_failures;	/* attempts that found no runtime */
	uint64_t registrations;		/* accepted by the runtime */
	uint64_t disconnects;
	uint64_t protocol_errors;	/* connections dropped for bad peer data */
	uint64_t oversized;		/* ... of which for a size over a cap */
	uint64_t timeouts;		/* connections dropped for a missed deadline */
	uint64_t requests;		/* Plugin-service requests answered */
	uint64_t unimplemented;		/* ... with UNIMPLEMENTED */
	uint64_t handler_errors;	/* ... with a handler's error */
	uint64_t sync_parts;		/* Synchronize messages, all parts */
	uint64_t updates_pushed;	/* updates sent with UpdateContainers */
	uint64_t updates_failed;	/* ... that the runtime reported failed */
	uint64_t create_waits;		/* CreateContainers that waited */
	uint64_t create_wait_timeouts;	/* ... until the end of their wait */
};

struct nri_config {
	const char *socket_path;	/* NULL: NRI_SOCKET_DEFAULT */
	const char *plugin_name;	/* NULL: NRI_PLUGIN_NAME; [A-Za-z0-9_.+-]+ */
	const char *plugin_idx;		/* NULL: NRI_PLUGIN_IDX; two digits */
	unsigned backoff_min_ms;	/* 0: 250, first retry delay (jittered) */
	unsigned backoff_max_ms;	/* 0: 10000, the longest */
	unsigned register_timeout_ms;	/* 0: 5000, RegisterPlugin reply */
	unsigned setup_timeout_ms;	/* 0: 15000, connect to end of Synchronize */
	unsigned call_timeout_ms;	/* 0: 5000, UpdateContainers reply */
	unsigned create_wait_ms;	/* 0: NRI_CREATE_WAIT_MS (see struct nri_resume) */
};

/* ---- the protocol core (no I/O) ----------------------------------------------------------- */

struct nri_session;

/* write(wud, buf, len) queues bytes for the runtime (>= 0 or -errno). cfg, h
 * and the strings in cfg are copied. -EINVAL for a bad name or index. */
int nri_session_new(const struct nri_config *cfg, const struct nri_handlers *h, void *ud,
		    int (*write)(void *wud, const void *buf, size_t len), void *wud,
		    struct nri_session **ret);
/* Calls disconnected() if connected() was called, fails pending calls. */
struct nri_session *nri_session_free(struct nri_session *s);
DEFINE_FREEP(nri_session, nri_session_free)

/* Sends RegisterPlugin; call once, right after connecting. */
int nri_session_start(struct nri_session *s);
/* Bytes from the runtime. 0, or -errno and the session is over: -EPROTO /
 * -E2BIG (bad peer data, nri_session_why() says what), -ECONNREFUSED
 * (registration refused), -ESHUTDOWN (the runtime asked; our reply is
 * queued), -ENOMEM, or a write error. */
int nri_session_feed(struct nri_session *s, const void *buf, size_t len);
/* Earliest call or wait deadline (ttrpc_now_ms() clock) or -1; expire at or
 * after it: calls past their deadline fail, waiting CreateContainers have
 * their final run. Returns 0, or -ETIMEDOUT when registration went unanswered
 * (session over), or the error of writing an answer. */
int64_t nri_session_next_deadline(const struct nri_session *s);
int nri_session_expire(struct nri_session *s, int64_t now_ms);
/* UpdateContainers with these updates (split in several calls when large);
 * push_done() runs once per call. -ENOTCONN before registration; each update
 * is checked as by nri_updates_add() before any call goes out. */
int nri_session_push_updates(struct nri_session *s, const struct nri_update *u, size_t n);
/* UpdateContainers evicting one container (see nri_push_evict()). */
int nri_session_push_evict(struct nri_session *s, const char *container_id, const char *reason);

/* A waiting CreateContainer's handler runs again (what nri_resume_run() does
 * for a session not on a loop). -ENOENT when token is not waiting here. */
int nri_session_resume(struct nri_session *s, uint64_t token);

bool nri_session_is_registered(const struct nri_session *s);
bool nri_session_is_synchronized(const struct nri_session *s);
/* Why the session ended badly, borrowed (empty when it did not). */
const char *nri_session_why(const struct nri_session *s);
const struct nri_stats *nri_session_stats(const struct nri_session *s);
/* The event mask Configure answers with (from the handlers). */
uint32_t nri_session_events(const struct nri_session *s);

/* ---- the plugin on the loop --------------------------------------------------------------- */

struct nri;

/* cfg (and its strings) and h are copied; base is borrowed and must outlive
 * the nri. Nothing happens until nri_start(). */
int nri_new(struct event_base *base, const struct nri_config *cfg, const struct nri_handlers *h,
	    void *ud, struct nri **ret);
/* Closes the connection (disconnected() runs if connected) and frees. */
struct nri *nri_free(struct nri *n);
DEFINE_FREEP(nri, nri_free)

/* Begin connecting (on the loop, right away) and keep a connection up. */
int nri_start(struct nri *n);
/* Push cpuset updates to the runtime outside of any event (after Unprepare).
 * -ENOTCONN when not registered: the next Synchronize brings the runtime up to
 * date anyway. Results arrive in push_done(). */
int nri_push_updates(struct nri *n, const struct nri_update *u, size_t count);
bool nri_is_synchronized(const struct nri *n);
/* Asks the runtime to evict a container (UpdateContainers with an eviction:
 * the runtime stops it), with reason for its events. -ENOTCONN when not
 * registered. The outcome arrives in push_done(). */
int nri_push_evict(struct nri *n, const char *container_id, const char *reason);
/* Totals over all connections so far. */
struct nri_stats nri_get_stats(const struct nri *n);
