/* Device metadata in the container (KEP-5304, beta in Kubernetes 1.37): for
 * every base request of a prepared claim, a file describing the devices it
 * got, and a CDI spec that bind-mounts the file read-only where the
 * workload looks for it.
 *
 *   host file  <data_dir>/dra-device-metadata/<claim uid>/<request>/metadata.json
 *   CDI spec   <cdi_dir>/dra.cpu_metadata_<claim uid>_<request>.json
 *              cdiVersion 0.5.0, kind dra.cpu/metadata, device <uid>_<request>,
 *              containerEdits.mounts: the file at
 *   /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/dra.cpu-metadata.json
 *   and, for a claim made from a ResourceClaimTemplate (its
 *   resource.kubernetes.io/pod-claim-name annotation), also at
 *   /var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<pod claim>/<request>/dra.cpu-metadata.json
 *   CDI id     dra.cpu/metadata=<uid>_<request>  (returned with the request's devices)
 *
 * The file holds one DeviceMetadata object (metadata.resource.k8s.io/v1beta1,
 * pretty-printed, then a newline): the claim's name, namespace, uid and
 * generation 1, and per request its devices with every attribute their slice
 * carries. <request> is the base request ("req" of "req/sub"; the full name
 * is inside the file).
 *
 * Crash safety, like the claim's own CDI spec: every file is written
 * atomically (temp, fsync, rename, fsync of the directory); Prepare writes
 * the metadata before it commits the claim, so a committed claim always has
 * its metadata; Unprepare removes the metadata first. A crash in between
 * leaves metadata of a claim that is not prepared: metadata_sweep() at start
 * removes it. The host path is keyed by uid (not namespace and name, which a
 * claim restored from its CDI spec alone does not know) so that removal needs
 * the uid only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct errbuf;
struct json_object;

#define METADATA_API_VERSION "metadata.resource.k8s.io/v1beta1"
#define METADATA_CDI_KIND "dra.cpu/metadata"
#define METADATA_CDI_VERSION "0.5.0"
#define METADATA_CONTAINER_DIR "/var/run/kubernetes.io/dra-device-attributes"
/* Requests per claim and devices per request we write (AllocationResultsMaxSize). */
#define METADATA_MAX 32

struct metadata_opts {
	const char *data_dir; /* <kubelet root>/plugins/dra.cpu */
	const char *cdi_dir;
	const char *driver;   /* dra.cpu */
	const char *pool;     /* the node */
};

struct metadata_device {
	const char *name;		/* device name */
	struct json_object *attributes; /* its slice attributes (borrowed, may be NULL) */
	int64_t allocated_cpus;		/* grouped: the CPUs the result holds; < 0: none */
};

struct metadata_request {
	const char *name; /* "req" or "req/sub" */
	int n;
	struct metadata_device devices[METADATA_MAX];
};

struct metadata_claim {
	const char *ns, *name, *uid;
	const char *pod_claim_name; /* NULL or "": not from a template */
	int n;
	struct metadata_request requests[METADATA_MAX]; /* one per base request */
};

/* The base request of a request name: its length before any '/'. */
size_t metadata_base_len(const char *request);

/* "dra.cpu/metadata=<uid>_<base request>" into buf. */
void metadata_cdi_id(const char *uid, const char *request, char *buf, size_t size);

/* The DeviceMetadata object of one request (a new object; caller puts it). */
int metadata_build(const struct metadata_opts *o, const struct metadata_claim *c,
		   const struct metadata_request *r, struct json_object **ret);

/* Writes the file and the CDI spec of every request of c (replacing what is
 * there: Prepare is idempotent). Names that would not make a safe path
 * (not DNS labels) are -EINVAL with eb saying which. On failure what was
 * written is removed again. */
int metadata_write(const struct metadata_opts *o, const struct metadata_claim *c,
		   struct errbuf *eb);

/* Removes the CDI specs and files of the claim uid: 1 when there were
 * some, 0 when there was nothing, -errno (eb says what) when a spec stays:
 * its claim must then stay prepared too. */
int metadata_remove(const struct metadata_opts *o, const char *uid, struct errbuf *eb);

/* Removes the metadata of every claim for which is_prepared() is false;
 * returns how many claims' metadata went. */
int metadata_sweep(const struct metadata_opts *o, bool (*is_prepared)(void *ud, const char *uid),
		   void *ud);
