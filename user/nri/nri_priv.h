/* nri_priv: what the files of the NRI plugin share and nothing outside it
 * sees: the session, its settings, the handler outputs and the protobuf
 * field numbers they are encoded with, and the steps one file does for
 * another. The plugin is one module in several files (nri.c the session
 * and its Runtime calls, nri_plugin.c the Plugin service, nri_msg.c the
 * message adapters, nri_loop.c the plugin on the loop); outside it these
 * structs stay opaque (nri.h). Not a public header: only user/nri/nri*.c
 * include it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/ratelimit.h"
#include "nri_api.pb-c.h"
#include "nri/nri.h"
#include "nri/ttrpc.h"

/* The caller's struct nri_config, copied, with the defaults filled in. */
struct nri_settings {
	char *socket_path;
	char *name;
	char *idx;
	unsigned backoff_min_ms;
	unsigned backoff_max_ms;
	unsigned register_timeout_ms;
	unsigned setup_timeout_ms;
	unsigned call_timeout_ms;
	unsigned create_wait_ms;
};

struct create_call;

struct nri_adjust {
	char *cpus;
	char *mems;
	bool has_quota;
	int64_t quota;
	bool has_sched;
	struct nri_scheduler sched;
	struct nri_session *s;
	struct create_call *call;
	bool final;
	bool defer; /* the handler asked to wait */
};

/* Updates are kept encoded, as the bytes of the repeated ContainerUpdate field of the message
 * that carries them (key, length, ContainerUpdate, per update), exactly what protobuf-c would
 * pack. A claim holder's CreateContainer answers 500 shared containers with one cpu list:
 * building, sizing and packing 500 four-level protobuf-c trees, plus two strdup()s per
 * update, was most of the daemon's time for it. Here the linux_ part of an update
 * (LinuxContainerUpdate > LinuxResources > LinuxCPU.cpus), the same for every update with
 * the same list, is encoded once per list and copied; an update costs its key, length, id
 * and that copy, and no allocation of its own. The reply's other fields are packed into
 * room kept before the updates, so the message is built in place (copying 45 KB of
 * updates behind them was a third of what remained). */
struct nri_updates {
	uint8_t key;		/* of the repeated field in the message carrying it */
	struct buf b;		/* empty, or UPDATES_ROOM bytes of room and then the field */
	size_t n;
	uint8_t *linux_;	/* ContainerUpdate.linux_ (key, length, value) for cpus */
	size_t linux_len;
	const char *cpus;	/* the list linux_ sets: its last cpus_len bytes */
	size_t cpus_len;
};

/* Protobuf wire format (protobuf.dev/programming-guides/encoding): a length-delimited field
 * is its key (field number << 3 | wire type 2), the length as a varint, then the bytes.
 * Field numbers are proto/nri_api.proto's, upstream NRI's. */
#define PB_KEY_LEN(field) ((uint8_t)((field) << 3 | 2))
#define PB_CONTAINER_UPDATE_CONTAINER_ID 1
#define PB_CONTAINER_UPDATE_LINUX 2
#define PB_LINUX_CONTAINER_UPDATE_RESOURCES 1
#define PB_LINUX_RESOURCES_CPU 2
#define PB_LINUX_CPU_CPUS 6
#define PB_CREATE_CONTAINER_RESPONSE_UPDATE 2
/* UpdateContainerResponse, StopContainerResponse, SynchronizeResponse, UpdateContainersRequest */
#define PB_UPDATE 1
#define ID_MAX 1024 /* bytes of a container id we send */

/* Room for the fields a reply puts before its updates: CreateContainer's adjustment
 * takes 10 bytes and its cpu list. */
#define UPDATES_ROOM 128
/* No updates yet, for the repeated field numbered field (< 16: a one-byte key). Updates
 * beyond what could ever be queued for the runtime are refused (-E2BIG). */
#define UPDATES_INIT(field)                                                            \
	{                                                                              \
		.key = PB_KEY_LEN(field), .b = {.max = UPDATES_ROOM + NRI_OUTBUF_MAX } \
	}

struct nri_session {
	struct nri_settings conf;
	struct nri_handlers h;
	void *ud;
	int (*write)(void *wud, const void *buf, size_t len);
	void *wud;
	struct ttrpc_mux *mux;
	uint32_t handled;	/* event bits with a handler */
	uint32_t events;	/* what Configure answers */
	bool registered;
	bool synchronized;
	bool connected_called;
	int fatal;		/* set by a call's outcome; ends the session */
	int end;		/* why the session ended, for disconnected() */
	/* parts of a split Synchronize, until the last one */
	struct ttrpc_pb_alloc sync_alloc;
	Nri__SynchronizeRequest **parts;
	size_t n_parts;
	size_t sync_bytes;
	struct nri_stats st;
	struct errbuf why; /* why the session ended */
	/* CreateContainers waiting for their handler, and how to wake one
	 * (the session itself, or the loop side that owns it). */
	struct create_call *waiting;
	unsigned n_waiting;
	int (*resume_fn)(void *ctx, uint64_t token);
	void *resume_ctx;
	struct ratelimit fail_rl; /* handler error lines */
};

/* A CreateContainer from decoding to its answer: the request stays decoded
 * while the handler waits (struct nri_resume). */
struct create_call {
	struct create_call *next; /* in waiting */
	struct ttrpc_pb_alloc a;
	Nri__ContainerRequest *req;
	uint64_t token;
	uint32_t sid;
	int attempt;
	bool waiting, running;
	int64_t deadline_ms;
};

/* nri_msg.c: the message adapters. */
size_t nri_updates_len(const struct nri_updates *u);
uint8_t *nri_updates_bytes(const struct nri_updates *u);
void nri_updates_done(struct nri_updates *u);
bool nri_is_valid_id(const char *id);
const char *nri_str(const char *s);
void nri_pod_view(struct nri_pod *v, const Nri__PodSandbox *p);
void nri_container_view(struct nri_container *v, const Nri__Container *c,
			const struct nri_pod *pod);

/* nri.c: the caller's configuration, copied with the defaults filled in. */
int nri_settings_init(struct nri_settings *c, const struct nri_config *in);
void nri_settings_done(struct nri_settings *c);

/* nri.c: the session's parts of a split Synchronize, a CreateContainer's end. */
void nri_sync_reset(struct nri_session *s);
void nri_create_call_free(struct create_call *cc);

/* nri_plugin.c: the Plugin service. nri_run_create() runs (or runs again)
 * a CreateContainer's handler; final: the last time, it must answer. */
int nri_on_request(void *ud, const struct ttrpc_request *rq);
int nri_run_create(struct nri_session *s, struct create_call *cc, bool final);
