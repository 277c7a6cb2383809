/* The restart: state_load() re-reserves every claim that has a CDI spec,
 * taking what else it knows from the checkpoint (state.h says why the spec
 * is the commit record), and quarantines what it cannot honour.
 */
#include "core/state.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MOD "state"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/hashtab.h"
#include "lib/log.h"
#include "core/state_priv.h"

/* ---- load ---------------------------------------------------------------------------- */

struct loader {
	struct state *s;
	struct hashtab ckpt; /* checkpoint entries (struct entry, no record) not yet
			      * matched to a spec, by uid */
	/* The specs are read twice: first those a checkpoint entry names, then
	 * the others, so that a spec planted (or left) without one never takes
	 * CPUs from a claim the checkpoint records: the checkpoint wins. */
	int pass;
	struct hashtab first; /* uids the first pass saw (value: 1) */
	int restored, quarantined, bad_specs;
};

static int collect_ckpt(void *ud, const struct state_claim *c)
{
	struct loader *l = ud;
	struct entry *n, *old = NULL;
	int r;

	r = state_entry_new(c, false, &n);
	if (r < 0)
		return r;
	r = hashtab_put_str(&l->ckpt, n->c.uid, n, (void **)&old);
	if (r < 0)
		state_entry_free(n);
	state_entry_free(old); /* a uid listed twice: the later entry wins */
	return r < 0 ? r : 0;
}

static void on_bad_spec(void *ud, const char *path, const char *why)
{
	struct loader *l = ud;

	l->bad_specs++;
	log_warn("cdi_spec_ignored", "path=%s reason=%s action=left_alone", path, log_quote(why));
}

static int restore_spec(struct loader *l, const char *uid, const struct cpuset *cpus);

static int on_spec(void *ud, const char *uid, const struct cpuset *cpus)
{
	struct loader *l = ud;

	if (l->pass == 1) {
		if (!hashtab_get_str(&l->ckpt, uid))
			return 0;
		if (hashtab_put_str(&l->first, uid, (void *)1, NULL) < 0)
			return -ENOMEM;
		return restore_spec(l, uid, cpus);
	}
	if (hashtab_get_str(&l->first, uid))
		return 0;
	return restore_spec(l, uid, cpus);
}

static int restore_spec(struct loader *l, const char *uid, const struct cpuset *cpus)
{
	struct state *s = l->s;
	struct entry *old, *e;
	struct state_claim c;
	struct cpuset busy, had;
	char list[128];
	int r;

	old = hashtab_del_str(&l->ckpt, uid);
	if (old) {
		c = old->c;
	} else {
		c = (struct state_claim){ 0 };
		memcpy(c.uid, uid, strlen(uid) + 1);
	}
	if (old && !cpuset_equal(cpuset_from_view(&old->c.cpus, &had), cpus)) {
		/* Nothing of the entry is trusted then: a binding waits for a read. */
		log_warn("checkpoint_disagrees", "claim=%s action=using_cdi_spec", uid);
		c.results = NULL;
		c.n_results = 0;
		c.consumers = NULL;
		c.n_consumers = 0;
		c.consumers_known = false;
	}
	c.cpus = cpuset_view(cpus);
	/* All real-time CPUs: a real-time claim, whatever the checkpoint says
	 * (without its record it holds the whole bandwidth of its CPUs). */
	if (!cpuset_is_empty(cpus) && cpuset_is_subset(cpus, &s->rt_cpus)) {
		if (!c.rt) {
			c.budget = (struct rt_budget){ .policy = RT_POLICY_NONE };
			c.results = NULL;
			c.n_results = 0;
		}
		c.rt = true;
	} else {
		c.rt = false;
	}
	cpuset_or(&busy, &s->prepared, &s->quarantine);
	if ((!c.rt && (!cpuset_is_subset(cpus, &s->allocatable) || cpuset_intersects(cpus, &busy))) ||
	    hashtab_count(&s->claims) >= STATE_MAX_CLAIMS) {
		(void)cpuset_format(cpus, list, sizeof(list));
		log_error("claim_quarantined", "claim=%s cpus=%s checkpointed=%s reason=%s", uid,
			  list, old ? "true" : "false",
			  !cpuset_is_subset(cpus, &s->allocatable)
				  ? "\"CPUs not allocatable (reserved or offline)\""
				  : "\"overlaps another prepared claim\"");
		cpuset_and(&busy, cpus, &s->allocatable);
		cpuset_or(&s->quarantine, &s->quarantine, &busy);
		l->quarantined++;
		state_entry_free(old);
		return 0;
	}
	/* The union of the results is the spec's CPUs (checked above), so the
	 * record's cpus come out the same either way. */
	r = state_entry_new(&c, true, &e);
	state_entry_free(old);
	if (r < 0)
		return r;
	if (hashtab_put_str(&s->claims, e->c.uid, e, NULL) < 0) {
		state_entry_free(e);
		return -ENOMEM;
	}
	if (!e->c.rt)
		cpuset_or(&s->prepared, &s->prepared, cpus);
	l->restored++;
	(void)cpuset_format(cpus, list, sizeof(list));
	log_info("claim_restored", "claim=%s ns=%s name=%s cpus=%s", uid,
		 e->c.ns[0] ? e->c.ns : "?", e->c.name[0] ? e->c.name : "?", list);
	return 0;
}

/* What a crash between create and rename left: ours alone (fileio.h). The
 * state dir holds only our files; in the CDI dir, only our names. */
static void remove_stale_temps(struct state *s)
{
	int n = fileio_remove_stale_temps(s->state_dir, "");
	int k = cdi_remove_stale_temps(s->cdi_dir);

	if (n > 0 || k > 0)
		log_info("stale_temps_removed", "state_dir=%d cdi_dir=%d", n > 0 ? n : 0,
			 k > 0 ? k : 0);
	if (n < 0 || k < 0)
		log_warn_errno(n < 0 ? n : k, "stale_temps_unreadable", "dir=%s action=continuing",
			       n < 0 ? s->state_dir : s->cdi_dir);
}

/* A directory where the checkpoint belongs (a hostPath mount of type
 * DirectoryOrCreate does that): an empty one is removed, nothing is lost;
 * anything else is the operator's, and every commit would fail, so the
 * start fails with a message saying what to do rather than serving claims
 * it cannot record. */
static int checkpoint_is_a_directory(struct state *s)
{
	if (rmdir(s->checkpoint) == 0) {
		log_warn("checkpoint_not_a_file", "path=%s kind=directory action=removed_empty_directory",
			 s->checkpoint);
		return 0;
	}
	return log_error_errno(-EISDIR, "checkpoint_not_a_file",
			       "path=%s kind=directory reason=%s hint=%s", s->checkpoint,
			       log_quote(strerror(errno)),
			       log_quote("the checkpoint must be a regular file: remove or move this "
					 "directory (or the mount that puts it there)"));
}

int state_load(struct state *s)
{
	struct loader l = { .s = s,
			    .ckpt = HASHTAB_INIT(STATE_MAX_CLAIMS),
			    .first = HASHTAB_INIT(STATE_MAX_CLAIMS) };
	_cleanup_free_ char *buf = NULL;
	struct errbuf why = { "" };
	struct entry *c, *e;
	struct stat st;
	size_t len = 0;
	int r;

	r = fileio_mkdir_p(s->state_dir, 0700);
	if (r < 0)
		return log_error_errno(r, "state_dir_failed", "path=%s", s->state_dir);
	if (stat(s->state_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return log_error_errno(-ENOTDIR, "state_dir_failed", "path=%s", s->state_dir);
	if ((st.st_mode & 0777) != 0700 && chmod(s->state_dir, 0700) < 0)
		return log_error_errno(-errno, "state_dir_failed", "path=%s", s->state_dir);

	remove_stale_temps(s);
	r = fileio_read(s->checkpoint, CHECKPOINT_MAX, &buf, &len, &why);
	if (r == 0) {
		r = state_checkpoint_parse(buf, len, collect_ckpt, &l, &why);
		if (r == -ENOMEM)
			goto out;
		if (r < 0)
			log_warn("checkpoint_ignored", "path=%s reason=%s action=using_cdi_specs",
				 s->checkpoint, log_quote(errbuf_text(&why, r)));
	} else if (r == -EISDIR) {
		r = checkpoint_is_a_directory(s);
		if (r < 0)
			goto out;
	} else if (r != -ENOENT) {
		/* A FIFO, socket, device node or symlink: never read, replaced
		 * by the write below (rename does not follow a link). */
		log_warn("checkpoint_unreadable", "path=%s reason=%s action=using_cdi_specs_replacing",
			 s->checkpoint, log_quote(errbuf_text(&why, r)));
	}

	l.pass = 1;
	r = cdi_scan(s->cdi_dir, on_spec, NULL, &l);
	if (r >= 0) {
		l.pass = 2;
		r = cdi_scan(s->cdi_dir, on_spec, on_bad_spec, &l);
	}
	if (r < 0) {
		log_error_errno(r, "cdi_scan_failed", "dir=%s", s->cdi_dir);
		goto out;
	}
	HASHTAB_FOREACH(c, &l.ckpt)
		log_info("checkpoint_entry_dropped", "claim=%s reason=\"no CDI spec\"", c->c.uid);
	r = state_write_checkpoint(s);
	if (r < 0)
		log_error_errno(r, "checkpoint_write_failed", "path=%s", s->checkpoint);
	log_info("state_loaded", "claims=%d quarantined=%d ignored_specs=%d", l.restored,
		 l.quarantined, l.bad_specs);
	HASHTAB_FOREACH(e, &s->claims)
		state_notify(s, STATE_CLAIM_ADDED, &e->c);
out:
	HASHTAB_FOREACH(c, &l.ckpt)
		state_entry_free(c);
	hashtab_done(&l.ckpt);
	hashtab_done(&l.first);
	return r;
}
