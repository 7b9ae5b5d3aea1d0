/*
 * Operations on a run's storage that need no collectives: listing the
 * committed steps, reading a manifest, reading and verifying chunks,
 * retention and garbage collection. Used by the dpt_ckpt_* API (from rank
 * 0, or from every rank for reads) and by `dptrain ckpt`.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "ckpt_int.h"
#include "log.h"

void dpt__step_dir(uint64_t step, char *buf, size_t size)
{
	snprintf(buf, size, "step-%010" PRIu64, step);
}

void dpt__shard_name(uint32_t rank, uint32_t world, char *buf, size_t size)
{
	snprintf(buf, size, "rank-%05" PRIu32 "-of-%05" PRIu32 ".safetensors",
		 rank, world);
}

void dpt__ckpt_checksum(const void *buf, uint64_t len, uint64_t block,
			uint64_t *out)
{
	const unsigned char *p = buf;

	for (uint64_t off = 0, b = 0; off < len; off += block, b++)
		out[b] = XXH3_64bits(p + off,
				     len - off < block ? len - off : block);
}

/* ------------------------------------------------------------ listing */

struct u64_set {
	uint64_t *v;
	size_t n, cap;
};

static int set_add(struct u64_set *s, uint64_t x)
{
	if (s->n > 0 && s->v[s->n - 1] == x)
		return 0; /* keys come in order: a step's objects are together
			   */
	if (dpt__array_room(&s->v, s->n, &s->cap, sizeof(*s->v)))
		return DPT_ENOMEM;
	s->v[s->n++] = x;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void set_sort_unique(struct u64_set *s)
{
	size_t n = 0;

	if (s->n) /* qsort's array may not be NULL, even empty */
		qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
	for (size_t i = 0; i < s->n; i++)
		if (n == 0 || s->v[n - 1] != s->v[i])
			s->v[n++] = s->v[i];
	s->n = n;
}

struct list_ctx {
	size_t skip; /* length of the prefix */
	struct u64_set all, committed, damaged;
};

/* "step-0000000012/REST": 0 and the step, or -1 for other names. */
static int parse_step_key(const char *key, uint64_t *step, const char **rest)
{
	char *end, canon[32];
	unsigned long long v;

	if (strncmp(key, "step-", 5) || key[5] < '0' || key[5] > '9')
		return -1;
	v = strtoull(key + 5, &end, 10);
	if (*end != '/')
		return -1;
	dpt__step_dir(v, canon, sizeof(canon));
	if ((size_t)(end - key) != strlen(canon) ||
	    strncmp(key, canon, strlen(canon)))
		return -1;
	*step = v;
	*rest = end + 1;
	return 0;
}

static int list_one(void *ctx_p, const char *key, uint64_t size)
{
	struct list_ctx *ctx = ctx_p;
	const char *rest;
	uint64_t step;
	int rc;

	(void)size;
	if (parse_step_key(key + ctx->skip, &step, &rest))
		return 0;
	rc = set_add(&ctx->all, step);
	if (!rc && strcmp(rest, DPT__CKPT_MANIFEST) == 0)
		rc = set_add(&ctx->committed, step);
	if (!rc && strcmp(rest, DPT__CKPT_DAMAGED) == 0)
		rc = set_add(&ctx->damaged, step);
	return rc;
}

void dpt__step_list_release(struct dpt__step_list *l)
{
	free(l->committed);
	free(l->uncommitted);
	free(l->damaged);
	memset(l, 0, sizeof(*l));
}

int dpt__ckpt_list(struct dpt__storage *s, const char *prefix,
		   struct dpt__step_list *out)
{
	struct list_ctx ctx = {.skip = strlen(prefix)};
	char full[DPT__STORAGE_KEY_MAX];
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(full, sizeof(full), "%sstep-", prefix);
	rc = dpt__storage_list(s, full, list_one, &ctx);
	if (rc)
		goto out;
	set_sort_unique(&ctx.all);
	set_sort_unique(&ctx.committed);
	set_sort_unique(&ctx.damaged);
	/* uncommitted = all - committed - damaged, all sorted */
	for (size_t i = 0, j = 0, k = 0; i < ctx.all.n; i++) {
		while (j < ctx.committed.n && ctx.committed.v[j] < ctx.all.v[i])
			j++;
		while (k < ctx.damaged.n && ctx.damaged.v[k] < ctx.all.v[i])
			k++;
		if (j < ctx.committed.n && ctx.committed.v[j] == ctx.all.v[i])
			continue;
		if (k < ctx.damaged.n && ctx.damaged.v[k] == ctx.all.v[i])
			continue;
		ctx.all.v[n++] = ctx.all.v[i];
	}
	out->committed = ctx.committed.v;
	out->ncommitted = ctx.committed.n;
	out->uncommitted = ctx.all.v;
	out->nuncommitted = n;
	out->damaged = ctx.damaged.v;
	out->ndamaged = ctx.damaged.n;
	return 0;
out:
	free(ctx.all.v);
	free(ctx.committed.v);
	free(ctx.damaged.v);
	return rc;
}

/* ------------------------------------------------------------ reading */

/* dpt__ckpt_read_manifest, with why a manifest is refused into WHY (may
 * be NULL; "" when it is not refused). */
static int read_manifest(struct dpt__storage *s, uint64_t step,
			 struct dpt__manifest *m, char *why, size_t whylen)
{
	char key[DPT__STORAGE_KEY_MAX], dir[32], err[512];
	uint64_t size;
	char *buf = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	if (why && whylen)
		why[0] = '\0';
	dpt__step_dir(step, dir, sizeof(dir));
	snprintf(key, sizeof(key), "%s/%s", dir, DPT__CKPT_MANIFEST);
	rc = dpt__storage_stat(s, key, &size);
	if (rc)
		return rc;
	if (size > DPT__CKPT_MANIFEST_MAX) {
		dpt__error("manifest '%s/%s' is %" PRIu64 " bytes, more than "
			   "the %u of any manifest: not read",
			   dpt__storage_uri(s), key, size,
			   DPT__CKPT_MANIFEST_MAX);
		if (why)
			snprintf(why, whylen,
				 "manifest is %" PRIu64 " bytes, more than "
				 "the %u of any manifest",
				 size, DPT__CKPT_MANIFEST_MAX);
		return DPT_ECORRUPT;
	}
	buf = malloc(size + 1);
	if (!buf)
		return DPT_ENOMEM;
	rc = dpt__storage_read(s, key, 0, size, buf);
	if (rc) {
		if (rc == DPT_ENOENT)
			dpt__error("manifest '%s/%s' vanished while being read",
				   dpt__storage_uri(s), key);
		goto out;
	}
	rc = dpt__manifest_decode(buf, size, m, err, sizeof(err));
	if (!rc)
		rc = dpt__manifest_check(m, false, err, sizeof(err));
	if (!rc && m->step != step) {
		snprintf(err, sizeof(err), "it says step %" PRIu64, m->step);
		rc = DPT_ECORRUPT;
	}
	if (rc && rc != DPT_ENOMEM) {
		dpt__error("step %" PRIu64 ": manifest '%s/%s' is unusable: %s",
			   step, dpt__storage_uri(s), key, err);
		if (why)
			snprintf(why, whylen, "manifest is unusable: %s", err);
	}
out:
	free(buf);
	if (rc)
		dpt__manifest_release(m);
	return rc;
}

struct stored {
	const char **names; /* the manifest's file names, sorted */
	size_t n;
	size_t skip; /* the length of "step-N/" */
	uint64_t bytes;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int add_stored(void *arg, const char *key, uint64_t size)
{
	struct stored *st = arg;
	const char *name = key + st->skip;

	/* Names are unique (dpt__manifest_check): a file counts once. */
	if (bsearch(&name, st->names, st->n, sizeof(*st->names), by_name) &&
	    __builtin_add_overflow(st->bytes, size, &st->bytes))
		st->bytes = UINT64_MAX;
	return 0;
}

int dpt__ckpt_stored_bytes(struct dpt__storage *s,
			   const struct dpt__manifest *m, uint64_t *bytes)
{
	struct stored st = {.n = m->nfiles};
	char dir[32], prefix[40];
	int rc;

	dpt__step_dir(m->step, dir, sizeof(dir));
	snprintf(prefix, sizeof(prefix), "%s/", dir);
	st.skip = strlen(prefix);
	st.names = malloc((m->nfiles + 1) * sizeof(*st.names));
	if (!st.names)
		return DPT_ENOMEM;
	for (size_t i = 0; i < m->nfiles; i++)
		st.names[i] = m->files[i].name;
	qsort(st.names, st.n, sizeof(*st.names), by_name);
	rc = dpt__storage_list(s, prefix, add_stored, &st);
	free(st.names);
	*bytes = st.bytes;
	return rc;
}

int dpt__ckpt_read_manifest(struct dpt__storage *s, uint64_t step,
			    struct dpt__manifest *m)
{
	return read_manifest(s, step, m, NULL, 0);
}

int dpt__ckpt_read_blocks(struct dpt__storage *s, const struct dpt__manifest *m,
			  const struct dpt__tensor_desc *t,
			  const struct dpt__chunk *c, uint64_t b0, uint64_t b1,
			  void *buf)
{
	const uint64_t bs = m->block_size;
	uint64_t lo = b0 * bs, hi = b1 * bs < c->length ? b1 * bs : c->length;
	char key[DPT__STORAGE_KEY_MAX], dir[32], label[512];
	const char *file = m->files[c->file].name;
	int rc;

	dpt__step_dir(m->step, dir, sizeof(dir));
	snprintf(key, sizeof(key), "%s/%s", dir, file);
	dpt__chunk_label(t, c, label, sizeof(label));
	rc = dpt__storage_read(s, key, c->begin + lo, hi - lo, buf);
	if (rc == DPT_ENOENT) {
		dpt__error("step %" PRIu64 ": shard '%s/%s' is missing (chunk "
			   "'%s')",
			   m->step, dpt__storage_uri(s), key, label);
		return rc;
	}
	if (rc == DPT_ERANGE) {
		dpt__error("step %" PRIu64
			   ": shard '%s/%s' is shorter than its "
			   "manifest says (chunk '%s')",
			   m->step, dpt__storage_uri(s), key, label);
		return DPT_ECORRUPT;
	}
	if (rc) {
		dpt__error("step %" PRIu64 ": cannot read shard '%s/%s' (chunk "
			   "'%s'): %s",
			   m->step, dpt__storage_uri(s), key, label,
			   dpt_strerror(rc));
		return rc;
	}
	for (uint64_t b = b0; b < b1; b++) {
		uint64_t off = b * bs - lo;
		uint64_t len = hi - b * bs < bs ? hi - b * bs : bs;

		if (XXH3_64bits((char *)buf + off, len) != c->xxh3[b]) {
			dpt__error("step %" PRIu64 ": shard '%s/%s' chunk '%s' "
				   "block %" PRIu64 " (bytes %" PRIu64
				   "..%" PRIu64 "): checksum mismatch",
				   m->step, dpt__storage_uri(s), key, label, b,
				   c->begin + b * bs, c->begin + b * bs + len);
			return DPT_ECORRUPT;
		}
	}
	return 0;
}

int dpt__ckpt_verify(struct dpt__storage *s, uint64_t step, size_t *bad,
		     char *why, size_t whylen)
{
	struct dpt__manifest m;
	uint64_t per_read;
	size_t nbad = 0;
	void *buf = NULL;
	int *file_bad = NULL;
	int rc, first = 0;

	if (bad)
		*bad = 0;
	rc = read_manifest(s, step, &m, why, whylen);
	if (rc)
		return rc;
	per_read = DPT__CKPT_READ_MAX / m.block_size;
	if (per_read == 0)
		per_read = 1;
	buf = malloc(per_read * m.block_size);
	file_bad = calloc(m.nfiles + 1, sizeof(*file_bad));
	if (!buf || !file_bad) {
		rc = DPT_ENOMEM;
		goto out;
	}
	/* A missing or cut shard is one message, not one per chunk. */
	for (size_t f = 0; f < m.nfiles; f++) {
		char dir[32], key[DPT__STORAGE_KEY_MAX];
		uint64_t size;

		dpt__step_dir(step, dir, sizeof(dir));
		snprintf(key, sizeof(key), "%s/%s", dir, m.files[f].name);
		rc = dpt__storage_stat(s, key, &size);
		if (rc == DPT_ENOENT)
			dpt__error("step %" PRIu64 ": shard '%s/%s' is missing",
				   step, dpt__storage_uri(s), key);
		else if (!rc && size != m.files[f].size)
			dpt__error("step %" PRIu64
				   ": shard '%s/%s' has %" PRIu64
				   " bytes, its manifest says %" PRIu64,
				   step, dpt__storage_uri(s), key, size,
				   m.files[f].size);
		if (rc || size != m.files[f].size) {
			file_bad[f] = rc ? rc : DPT_ECORRUPT;
			if (!first)
				first = file_bad[f];
		}
	}
	for (size_t i = 0; i < m.ntensors; i++) {
		const struct dpt__tensor_desc *t = &m.tensors[i];
		for (size_t j = 0; j < t->nchunks; j++) {
			const struct dpt__chunk *c = &t->chunks[j];
			if (file_bad[c->file]) {
				nbad++;
				continue;
			}
			for (uint64_t b = 0; b < c->nblocks; b += per_read) {
				uint64_t e = b + per_read < c->nblocks
						     ? b + per_read
						     : c->nblocks;
				rc = dpt__ckpt_read_blocks(s, &m, t, c, b, e,
							   buf);
				if (rc) {
					nbad++;
					if (!first)
						first = rc;
					break; /* one message per chunk */
				}
			}
		}
	}
	rc = first;
	if (bad)
		*bad = nbad;
out:
	free(file_bad);
	free(buf);
	dpt__manifest_release(&m);
	return rc;
}

/* ------------------------------------------------------------ retention */

struct key_list {
	char **keys;
	size_t n, cap;
};

static int collect_key(void *ctx_p, const char *key, uint64_t size)
{
	struct key_list *l = ctx_p;

	(void)size;
	if (dpt__array_room(&l->keys, l->n, &l->cap, sizeof(*l->keys)))
		return DPT_ENOMEM;
	l->keys[l->n] = strdup(key);
	if (!l->keys[l->n])
		return DPT_ENOMEM;
	l->n++;
	return 0;
}

/* Deletes (or recycles) every object whose key starts with PREFIX. */
static int remove_prefix(struct dpt__storage *s, const char *prefix,
			 bool recycle)
{
	struct key_list l = {0};
	int rc = dpt__storage_list(s, prefix, collect_key, &l);

	if (!rc && l.n)
		rc = (recycle ? dpt__storage_recycle : dpt__storage_delete)(
			s, (const char *const *)l.keys, l.n);
	for (size_t i = 0; i < l.n; i++)
		free(l.keys[i]);
	free(l.keys);
	return rc;
}

int dpt__ckpt_delete_prefix(struct dpt__storage *s, const char *prefix)
{
	return remove_prefix(s, prefix, false);
}

/* Deletes every object of STEP, its manifest first when COMMITTED: the
 * step stops being committed before any of its shards goes. RECYCLE: the
 * shards of a committed step are recycled (dpt__storage_recycle), which
 * is safe once its manifest is gone. */
static int delete_step(struct dpt__storage *s, uint64_t step, bool committed,
		       bool recycle)
{
	char dir[32], prefix[40], manifest[64];
	const char *mkey = manifest;
	int rc;

	dpt__step_dir(step, dir, sizeof(dir));
	snprintf(prefix, sizeof(prefix), "%s/", dir);
	snprintf(manifest, sizeof(manifest), "%s/%s", dir, DPT__CKPT_MANIFEST);
	if (committed) {
		rc = dpt__storage_delete(s, &mkey, 1);
		if (rc)
			return rc;
	}
	return remove_prefix(s, prefix, committed && recycle);
}

/* Collects the keys of a step other than its quarantined manifest. */
static int collect_not_damaged(void *ctx_p, const char *key, uint64_t size)
{
	const char *slash = strrchr(key, '/');

	if (slash && strcmp(slash + 1, DPT__CKPT_DAMAGED) == 0)
		return 0;
	return collect_key(ctx_p, key, size);
}

int dpt__ckpt_quarantine(struct dpt__storage *s, uint64_t step, bool recycle)
{
	char dir[32], prefix[40], mkey[64], dkey[64];
	const char *mk = mkey;
	struct key_list l = {0};
	uint64_t size;
	char *buf = NULL;
	int rc;

	dpt__step_dir(step, dir, sizeof(dir));
	snprintf(prefix, sizeof(prefix), "%s/", dir);
	snprintf(mkey, sizeof(mkey), "%s/%s", dir, DPT__CKPT_MANIFEST);
	snprintf(dkey, sizeof(dkey), "%s/%s", dir, DPT__CKPT_DAMAGED);
	rc = dpt__storage_stat(s, mkey, &size);
	if (rc == DPT_ENOENT) {
		rc = 0; /* quarantined meanwhile, or deleted: nothing to do */
		goto out;
	}
	if (rc)
		goto out;
	/* The manifest's bytes are kept for whoever investigates; one too
	 * large to be a manifest is not copied (an empty record is enough
	 * to mark the step). */
	if (size > DPT__CKPT_MANIFEST_MAX)
		size = 0;
	buf = malloc(size + 1);
	if (!buf) {
		rc = DPT_ENOMEM;
		goto out;
	}
	rc = size ? dpt__storage_read(s, mkey, 0, size, buf) : 0;
	if (rc)
		goto out;
	/* Record first, then uncommit: a crash in between leaves the step
	 * committed, and the next load finds it damaged again. A record
	 * already there is an earlier, interrupted quarantine of it. */
	rc = dpt__storage_put_if_absent(s, dkey, buf, size);
	if (rc == DPT_EEXIST)
		rc = 0;
	if (rc)
		goto out;
	rc = dpt__storage_delete(s, &mk, 1);
	if (rc)
		goto out;
	dpt__warn("step %" PRIu64 " of '%s' is damaged: it is no longer "
		  "committed, and its step number is saved again when the run "
		  "gets there; its manifest is kept as '%s/%s' until gc "
		  "removes it",
		  step, dpt__storage_uri(s), dpt__storage_uri(s), dkey);
	/* Its shards go now, not at gc: a save of the same step number
	 * writes into the same directory, and a gc that removed the whole
	 * directory could take that save's files. A failure here leaves
	 * files that gc removes like those of a save that died. */
	rc = dpt__storage_list(s, prefix, collect_not_damaged, &l);
	if (!rc && l.n)
		rc = (recycle ? dpt__storage_recycle : dpt__storage_delete)(
			s, (const char *const *)l.keys, l.n);
	if (rc) {
		dpt__warn("step %" PRIu64 " of '%s': its damaged shards are "
			  "left for `dptrain ckpt gc`: %s",
			  step, dpt__storage_uri(s), dpt_strerror(rc));
		rc = 0;
	}
out:
	if (rc && rc != DPT_ENOMEM)
		dpt__error("cannot quarantine damaged step %" PRIu64 " of '%s' "
			   "(it still counts as committed, so a save of that "
			   "step is refused; the next load tries again): %s",
			   step, dpt__storage_uri(s), dpt_strerror(rc));
	for (size_t i = 0; i < l.n; i++)
		free(l.keys[i]);
	free(l.keys);
	free(buf);
	return rc;
}

int dpt__ckpt_retain(struct dpt__storage *s, int keep_last, uint64_t keep_every,
		     long gc_age_s, bool recycle, size_t *deleted)
{
	struct dpt__step_list l;
	size_t n = 0;
	uint64_t newest;
	int rc, first = 0;

	if (deleted)
		*deleted = 0;
	if (keep_last < 1)
		keep_last = 1; /* the newest committed step is never deleted */
	rc = dpt__ckpt_list(s, "", &l);
	if (rc)
		return rc;
	if (l.ncommitted == 0)
		goto damaged; /* nothing committed: only the damaged are garbage
			       */
	newest = l.committed[l.ncommitted - 1];
	for (size_t i = 0; i + (size_t)keep_last < l.ncommitted; i++) {
		uint64_t st = l.committed[i];
		if (keep_every && st % keep_every == 0)
			continue;
		rc = delete_step(s, st, true, recycle);
		if (rc && !first)
			first = rc;
		if (!rc) {
			dpt__info("retention: deleted step %" PRIu64 " of '%s'",
				  st, dpt__storage_uri(s));
			n++;
		}
	}
	for (size_t i = 0; i < l.nuncommitted; i++) {
		uint64_t st = l.uncommitted[i];
		if (st >= newest)
			continue; /* may be a save in progress */
		rc = delete_step(s, st, false, false);
		if (rc && !first)
			first = rc;
		if (!rc) {
			dpt__info("gc: deleted uncommitted step %" PRIu64
				  " of '%s'",
				  st, dpt__storage_uri(s));
			n++;
		}
	}
damaged:
	/* A damaged step holds only its quarantined manifest (its shards
	 * went at the quarantine) and, when the run is saving that step
	 * number again, the new save's files: only the record is removed
	 * here, whatever the step's number. What else is left follows the
	 * rules above at the next gc. */
	for (size_t i = 0; i < l.ndamaged; i++) {
		char dir[32], key[64];
		const char *k = key;

		dpt__step_dir(l.damaged[i], dir, sizeof(dir));
		snprintf(key, sizeof(key), "%s/%s", dir, DPT__CKPT_DAMAGED);
		rc = dpt__storage_delete(s, &k, 1);
		if (rc && !first)
			first = rc;
		if (rc)
			continue;
		if (!bsearch(&l.damaged[i], l.committed, l.ncommitted,
			     sizeof(*l.committed), cmp_u64)) {
			dpt__info("gc: deleted damaged step %" PRIu64
				  " of '%s'",
				  l.damaged[i], dpt__storage_uri(s));
			n++;
		}
	}
	rc = dpt__storage_gc(s, "", gc_age_s, NULL);
	if (rc && !first)
		first = rc;
	dpt__step_list_release(&l);
	if (deleted)
		*deleted = n;
	return first;
}
