/* The NRI plugin's message adapters: what a handler's answer becomes on the
 * wire (struct nri_adjust, and the container updates kept encoded as the
 * bytes of their repeated field, struct nri_updates), and the views a
 * handler reads of the runtime's pods and containers. See nri.h.
 *
 * Apart from nri.c because these translate between messages and our types
 * and touch no session state: nri.c and nri_plugin.c build and send them.
 */
#include "nri/nri.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/cpuset.h"
#include "nri_api.pb-c.h"
#include "nri/nri_priv.h"

/* ---- handler outputs ---------------------------------------------------------------------- */

/* The encoded update field and its length (0 and NULL before the first update). */
size_t nri_updates_len(const struct nri_updates *u)
{
	return u->b.len ? u->b.len - UPDATES_ROOM : 0;
}

uint8_t *nri_updates_bytes(const struct nri_updates *u)
{
	return u->b.len ? (uint8_t *)u->b.ptr + UPDATES_ROOM : NULL;
}

static size_t varint_len(size_t v)
{
	size_t n = 1;

	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}

/* Bytes of a length-delimited field with a value of len bytes. */
static size_t len_field_size(size_t len)
{
	return 1 + varint_len(len) + len;
}

/* Writes the key and length of a field; its value goes at the returned pointer. */
static uint8_t *put_len_field(uint8_t *p, uint8_t key, size_t len)
{
	*p++ = key;
	for (; len >= 0x80; len >>= 7)
		*p++ = (uint8_t)(len | 0x80);
	*p++ = (uint8_t)len;
	return p;
}

/* A cpuset string we may send: a valid, non-empty CPU list of sane length,
 * nothing but the list (the parser would also take sysfs's trailing newline,
 * which must not reach the runtime). */
static int check_cpus(const char *cpus)
{
	struct cpuset set;
	size_t len;

	if (!cpus)
		return -EINVAL;
	len = strnlen(cpus, NRI_CPUS_MAX + 1);
	if (len > NRI_CPUS_MAX)
		return -E2BIG;
	if (strspn(cpus, "0123456789,-") != len || cpuset_parse_n(cpus, len, &set, NULL) < 0 ||
	    cpuset_is_empty(&set))
		return -EINVAL;
	return 0;
}

bool nri_is_valid_id(const char *id)
{
	return id && *id && strnlen(id, ID_MAX + 1) <= ID_MAX;
}

int nri_adjust_set_cpus(struct nri_adjust *a, const char *cpus)
{
	char *dup;
	int r = check_cpus(cpus);

	if (r < 0)
		return r;
	dup = strdup(cpus);
	if (!dup)
		return -ENOMEM;
	free(a->cpus);
	a->cpus = dup;
	return 0;
}

int nri_adjust_set_mems(struct nri_adjust *a, const char *mems)
{
	char *dup;
	int r = check_cpus(mems); /* a node list has the CPU list's syntax */

	if (r < 0)
		return r;
	dup = strdup(mems);
	if (!dup)
		return -ENOMEM;
	free(a->mems);
	a->mems = dup;
	return 0;
}

int nri_adjust_set_cpu_quota(struct nri_adjust *a, int64_t quota)
{
	if (quota < -1 || quota == 0)
		return -EINVAL;
	a->quota = quota;
	a->has_quota = true;
	return 0;
}

int nri_adjust_set_scheduler(struct nri_adjust *a, const struct nri_scheduler *sched)
{
	switch (sched->policy) {
	case NRI_SCHED_NONE:
	case NRI_SCHED_OTHER:
	case NRI_SCHED_FIFO:
	case NRI_SCHED_RR:
	case NRI_SCHED_DEADLINE:
		break;
	default:
		return -EINVAL;
	}
	if (sched->flags >> (NRI__LINUX_SCHEDULER_FLAG__SCHED_FLAG_UTIL_CLAMP_MAX + 1))
		return -EINVAL;
	a->sched = *sched;
	a->has_sched = true;
	return 0;
}

void nri_updates_done(struct nri_updates *u)
{
	buf_done(&u->b);
	free(u->linux_);
	*u = (struct nri_updates){ 0 };
}

static bool is_cached(const struct nri_updates *u, const char *cpus)
{
	return u->cpus && strncmp(cpus, u->cpus, u->cpus_len) == 0 && !cpus[u->cpus_len];
}

/* Validates cpus and encodes the linux_ field that sets it. */
static int updates_set_cpus(struct nri_updates *u, const char *cpus)
{
	size_t n, cpu, res, lin, total;
	uint8_t *b, *p;
	int r = check_cpus(cpus);

	if (r < 0)
		return r;
	n = strlen(cpus);
	cpu = len_field_size(n);	/* LinuxCPU{cpus} */
	res = len_field_size(cpu);	/* LinuxResources{cpu} */
	lin = len_field_size(res);	/* LinuxContainerUpdate{resources} */
	total = len_field_size(lin);	/* ContainerUpdate.linux_ */
	b = malloc(total);
	if (!b)
		return -ENOMEM;
	p = put_len_field(b, PB_KEY_LEN(PB_CONTAINER_UPDATE_LINUX), lin);
	p = put_len_field(p, PB_KEY_LEN(PB_LINUX_CONTAINER_UPDATE_RESOURCES), res);
	p = put_len_field(p, PB_KEY_LEN(PB_LINUX_RESOURCES_CPU), cpu);
	p = put_len_field(p, PB_KEY_LEN(PB_LINUX_CPU_CPUS), n);
	memcpy(p, cpus, n);
	free(u->linux_);
	u->linux_ = b;
	u->linux_len = total;
	u->cpus = (const char *)p;
	u->cpus_len = n;
	return 0;
}

int nri_updates_add(struct nri_updates *u, const char *container_id, const char *cpus)
{
	size_t id_len, body;
	void *room;
	uint8_t *p;
	int r;

	if (!nri_is_valid_id(container_id))
		return -EINVAL;
	/* A pool change sends one list to hundreds of containers: validate and
	 * encode a list only when it differs from the previous update's. */
	if (!cpus || !is_cached(u, cpus)) {
		r = updates_set_cpus(u, cpus);
		if (r < 0)
			return r;
	}
	if (u->n >= NRI_UPDATES_MAX)
		return -E2BIG;
	id_len = strlen(container_id);
	body = len_field_size(id_len) + u->linux_len;
	r = 0;
	if (!u->b.len) { /* the first update makes the room, and space for more */
		r = buf_reserve(&u->b, UPDATES_ROOM + 4096);
		r = r ?: buf_append(&u->b, UPDATES_ROOM, &room);
	}
	r = r ?: buf_append(&u->b, len_field_size(body), (void **)&p);
	if (r < 0) {
		u->n = 0; /* the buffer dropped every update with it */
		return r;
	}
	p = put_len_field(p, u->key, body);
	p = put_len_field(p, PB_KEY_LEN(PB_CONTAINER_UPDATE_CONTAINER_ID), id_len);
	memcpy(p, container_id, id_len);
	memcpy(p + id_len, u->linux_, u->linux_len);
	u->n++;
	return 0;
}

/* ---- views -------------------------------------------------------------------------------- */

const char *nri_str(const char *s)
{
	return s ? s : "";
}

void nri_pod_view(struct nri_pod *v, const Nri__PodSandbox *p)
{
	if (!p) {
		*v = (struct nri_pod){ "", "", "", "", "" };
		return;
	}
	*v = (struct nri_pod){
		.id = nri_str(p->id),
		.uid = nri_str(p->uid),
		.name = nri_str(p->name),
		.namespace = nri_str(p->namespace_),
		.cgroup_parent = p->linux_ ? nri_str(p->linux_->cgroup_parent) : "",
	};
}

void nri_container_view(struct nri_container *v, const Nri__Container *c,
			const struct nri_pod *pod)
{
	const Nri__LinuxContainer *l = c->linux_;
	const Nri__LinuxCPU *cpu = l && l->resources ? l->resources->cpu : NULL;

	*v = (struct nri_container){
		.id = nri_str(c->id),
		.pod_sandbox_id = nri_str(c->pod_sandbox_id),
		.name = nri_str(c->name),
		.state = (int)c->state,
		.env = (const char *const *)c->env,
		.n_env = c->n_env,
		.cgroups_path = l ? nri_str(l->cgroups_path) : "",
		.cpus = cpu ? nri_str(cpu->cpus) : "",
		.mems = cpu ? nri_str(cpu->mems) : "",
		.pid = c->pid,
		.pod = pod,
	};
}

const char *nri_container_getenv(const struct nri_container *c, const char *key)
{
	size_t k = strlen(key);

	for (size_t i = 0; i < c->n_env; i++) {
		const char *e = c->env[i];

		if (e && strncmp(e, key, k) == 0 && e[k] == '=')
			return e + k + 1;
	}
	return NULL;
}
