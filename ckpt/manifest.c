/*
 * The manifest (doc/checkpoint-format.md, "Manifest"): its JSON codec
 * through jansson and the rules a reader checks before trusting it.
 */
#include "config.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ckpt_int.h"
#include "parse.h"
#include "wire.h"

/*
 * Manifest names and safetensors names, indexed by enum dpt_dtype. The
 * safetensors names are those of the safetensors specification;
 * safetensors has no complex128, so a complex128 chunk is described in a
 * shard's header as float64 with a trailing dimension of 2 (its real and
 * imaginary parts), which tools read as they read a complex64 saved
 * through torch.view_as_real (dpt__dtype_safetensors_parts).
 */
static const struct {
	const char *name, *st;
	int parts;
} dtypes[] = {
	[DPT_FLOAT32] = {"float32", "F32", 1},
	[DPT_FLOAT64] = {"float64", "F64", 1},
	[DPT_BFLOAT16] = {"bfloat16", "BF16", 1},
	[DPT_FLOAT16] = {"float16", "F16", 1},
	[DPT_INT32] = {"int32", "I32", 1},
	[DPT_INT64] = {"int64", "I64", 1},
	[DPT_UINT8] = {"uint8", "U8", 1},
	[DPT_BOOL] = {"bool", "BOOL", 1},
	[DPT_INT8] = {"int8", "I8", 1},
	[DPT_INT16] = {"int16", "I16", 1},
	[DPT_UINT16] = {"uint16", "U16", 1},
	[DPT_UINT32] = {"uint32", "U32", 1},
	[DPT_UINT64] = {"uint64", "U64", 1},
	[DPT_COMPLEX64] = {"complex64", "C64", 1},
	[DPT_COMPLEX128] = {"complex128", "F64", 2},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

const char *dpt__dtype_name(enum dpt_dtype dt)
{
	return (unsigned)dt < NDTYPES ? dtypes[dt].name : NULL;
}

const char *dpt__dtype_safetensors(enum dpt_dtype dt)
{
	return (unsigned)dt < NDTYPES ? dtypes[dt].st : NULL;
}

int dpt__dtype_safetensors_parts(enum dpt_dtype dt)
{
	return (unsigned)dt < NDTYPES ? dtypes[dt].parts : 0;
}

int dpt__dtype_parse(const char *name, enum dpt_dtype *out)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if (dtypes[i].name && strcmp(name, dtypes[i].name) == 0) {
			*out = (enum dpt_dtype)i;
			return 0;
		}
	return DPT_EINVAL;
}

/* ------------------------------------------------------------ building */

void dpt__manifest_release(struct dpt__manifest *m)
{
	for (size_t i = 0; i < m->ntensors; i++) {
		struct dpt__tensor_desc *t = &m->tensors[i];
		for (size_t j = 0; j < t->nchunks; j++)
			free(t->chunks[j].xxh3);
		free(t->chunks);
		free(t->name);
	}
	for (size_t i = 0; i < m->nfiles; i++)
		free(m->files[i].name);
	free(m->tensors);
	free(m->files);
	free(m->rng);
	free(m->user);
	memset(m, 0, sizeof(*m));
}

/* Grows *ARR (of N elements of SIZE bytes, from malloc) by one zeroed
 * element. The allocation doubles when full, whoever made it (its usable
 * size says how full): a manifest's 65536 chunks are not copied 65536
 * times over (which a sanitizer's realloc, never in place, made take
 * minutes). */
static void *grow(void *arr_p, size_t *n, size_t size)
{
	void **arr = arr_p;
	char *p = *arr;

	if (!p || malloc_usable_size(p) < (*n + 1) * size) {
		p = realloc(p, 2 * (*n + 1) * size);
		if (!p)
			return NULL;
	}
	memset(p + *n * size, 0, size);
	*arr = p;
	return p + (*n)++ * size;
}

struct dpt__tensor_desc *
dpt__manifest_add_tensor(struct dpt__manifest *m, const char *name,
			 enum dpt_dtype dtype, enum dpt_ckpt_kind kind,
			 int ndim, const uint64_t *shape)
{
	char *copy = strdup(name);
	struct dpt__tensor_desc *t;

	if (!copy)
		return NULL;
	t = grow(&m->tensors, &m->ntensors, sizeof(*t));
	if (!t) {
		free(copy);
		return NULL;
	}
	t->name = copy;
	t->dtype = dtype;
	t->kind = kind;
	t->ndim = ndim;
	for (int d = 0; d < ndim; d++)
		t->shape[d] = shape[d];
	return t;
}

struct dpt__chunk *dpt__tensor_add_chunk(struct dpt__tensor_desc *t)
{
	return grow(&t->chunks, &t->nchunks, sizeof(struct dpt__chunk));
}

struct dpt__tensor_desc *dpt__manifest_find(const struct dpt__manifest *m,
					    const char *name)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	return NULL;
}

/* ------------------------------------------------------------ encoding */

static json_t *hex_string(const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char *s = malloc(2 * n + 1);
	json_t *j;

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	s[2 * n] = '\0';
	j = json_string(s);
	free(s);
	return j;
}

static json_t *u64_array(const uint64_t *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_integer((json_int_t)v[i]))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *encode_chunk(const struct dpt__chunk *c, int ndim)
{
	json_t *sums = json_array();
	char hex[17];

	for (size_t b = 0; sums && b < c->nblocks; b++) {
		snprintf(hex, sizeof(hex), "%016" PRIx64, c->xxh3[b]);
		if (json_array_append_new(sums, json_string(hex))) {
			json_decref(sums);
			sums = NULL;
		}
	}
	if (!sums)
		return NULL;
	return json_pack("{s:o, s:o, s:I, s:I, s:I, s:o}", "offset",
			 u64_array(c->box.off, ndim), "shape",
			 u64_array(c->box.len, ndim), "file",
			 (json_int_t)c->file, "begin", (json_int_t)c->begin,
			 "length", (json_int_t)c->length, "xxh3", sums);
}

static json_t *encode_tensor(const struct dpt__tensor_desc *t)
{
	json_t *chunks = json_array();

	for (size_t i = 0; chunks && i < t->nchunks; i++)
		if (json_array_append_new(
			    chunks, encode_chunk(&t->chunks[i], t->ndim))) {
			json_decref(chunks);
			chunks = NULL;
		}
	if (!chunks)
		return NULL;
	return json_pack("{s:s, s:s, s:o, s:s, s:o}", "name", t->name, "dtype",
			 dpt__dtype_name(t->dtype), "shape",
			 u64_array(t->shape, t->ndim), "kind",
			 t->kind == DPT_CKPT_SHARDED ? "sharded" : "replicated",
			 "chunks", chunks);
}

int dpt__manifest_encode(const struct dpt__manifest *m, char **out, size_t *len)
{
	json_t *files = json_array(), *tensors = json_array(), *root = NULL;
	int rc = DPT_ENOMEM;

	*out = NULL;
	for (size_t i = 0; files && i < m->nfiles; i++)
		if (json_array_append_new(
			    files,
			    json_pack("{s:s, s:I, s:I}", "name",
				      m->files[i].name, "rank",
				      (json_int_t)m->files[i].rank, "size",
				      (json_int_t)m->files[i].size)))
			goto out;
	for (size_t i = 0; tensors && i < m->ntensors; i++)
		if (json_array_append_new(tensors,
					  encode_tensor(&m->tensors[i])))
			goto out;
	if (!files || !tensors)
		goto out;
	root = json_pack(
		"{s:s, s:i, s:I, s:I, s:I, s:o, s:o, s:{s:s, s:I}, "
		"s:O, s:O}",
		"format", DPT__CKPT_FORMAT, "version", m->version, "step",
		(json_int_t)m->step, "world_size", (json_int_t)m->world_size,
		"sample_cursor", (json_int_t)m->sample_cursor, "rng",
		hex_string(m->rng, m->rng_len), "user",
		hex_string(m->user, m->user_len), "checksum", "algorithm",
		"xxh3-64", "block_size", (json_int_t)m->block_size, "files",
		files, "tensors", tensors);
	if (!root)
		goto out;
	*out = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
	if (*out) {
		*len = strlen(*out);
		rc = 0;
	}
out:
	json_decref(root);
	json_decref(files);
	json_decref(tensors);
	return rc;
}

/* ------------------------------------------------------------ decoding */

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errlen,
						     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return DPT_ECORRUPT;
}

static int get_u64(json_t *obj, const char *key, uint64_t *out, char *err,
		   size_t errlen)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(err, errlen,
			   "field '%s' is not a non-negative integer", key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_dims(json_t *obj, const char *key, int want, uint64_t *out,
		    int *ndim, char *err, size_t errlen)
{
	json_t *a = json_object_get(obj, key), *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) > DPT__CKPT_MAXDIM ||
	    (want >= 0 && (int)json_array_size(a) != want))
		return bad(err, errlen,
			   "field '%s' is not an array of %s dimensions", key,
			   want >= 0 ? "the tensor's" : "at most 8");
	json_array_foreach(a, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return bad(err, errlen, "field '%s' holds a bad extent",
				   key);
		out[i] = (uint64_t)json_integer_value(v);
	}
	if (ndim)
		*ndim = (int)json_array_size(a);
	return 0;
}

static int get_blob(json_t *obj, const char *key, unsigned char **out,
		    size_t *len, char *err, size_t errlen)
{
	const char *s = json_string_value(json_object_get(obj, key));
	size_t n;

	if (!s || (n = strlen(s)) % 2)
		return bad(err, errlen, "field '%s' is not a hex string", key);
	*out = malloc(n / 2 + 1);
	if (!*out)
		return DPT_ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = dpt__hex_value(s[2 * i]),
		    lo = dpt__hex_value(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return bad(err, errlen,
				   "field '%s' is not a hex string", key);
		(*out)[i] = (unsigned char)(hi << 4 | lo);
	}
	*len = n / 2;
	return 0;
}

static int decode_chunk(json_t *j, struct dpt__tensor_desc *t, char *err,
			size_t errlen)
{
	struct dpt__chunk *c = dpt__tensor_add_chunk(t);
	json_t *sums, *v;
	uint64_t file;
	size_t i;
	int rc;

	if (!c)
		return DPT_ENOMEM;
	if (!json_is_object(j))
		return bad(err, errlen, "a chunk of '%s' is not an object",
			   t->name);
	c->box.ndim = t->ndim;
	rc = get_dims(j, "offset", t->ndim, c->box.off, NULL, err, errlen);
	if (!rc)
		rc = get_dims(j, "shape", t->ndim, c->box.len, NULL, err,
			      errlen);
	if (!rc)
		rc = get_u64(j, "file", &file, err, errlen);
	if (!rc)
		rc = get_u64(j, "begin", &c->begin, err, errlen);
	if (!rc)
		rc = get_u64(j, "length", &c->length, err, errlen);
	if (rc)
		return rc;
	if (file > UINT32_MAX)
		return bad(err, errlen, "a chunk of '%s' names file %" PRIu64,
			   t->name, file);
	c->file = (uint32_t)file;
	sums = json_object_get(j, "xxh3");
	if (!json_is_array(sums))
		return bad(err, errlen, "a chunk of '%s' has no checksums",
			   t->name);
	c->nblocks = json_array_size(sums);
	c->xxh3 = calloc(c->nblocks + 1, sizeof(uint64_t));
	if (!c->xxh3)
		return DPT_ENOMEM;
	json_array_foreach(sums, i, v)
	{
		const char *s = json_string_value(v);
		uint64_t x = 0;

		if (!s || strlen(s) != 16)
			return bad(err, errlen,
				   "a checksum of '%s' is not 16 hex "
				   "digits",
				   t->name);
		for (int k = 0; k < 16; k++) {
			int d = dpt__hex_value(s[k]);
			if (d < 0)
				return bad(err, errlen,
					   "a checksum of '%s' is "
					   "not hex",
					   t->name);
			x = x << 4 | (uint64_t)d;
		}
		c->xxh3[i] = x;
	}
	return 0;
}

static int decode_tensor(json_t *j, struct dpt__manifest *m, char *err,
			 size_t errlen)
{
	const char *name = json_string_value(json_object_get(j, "name"));
	const char *dtype = json_string_value(json_object_get(j, "dtype"));
	const char *kind = json_string_value(json_object_get(j, "kind"));
	json_t *chunks = json_object_get(j, "chunks"), *v;
	uint64_t shape[DPT__CKPT_MAXDIM];
	struct dpt__tensor_desc *t;
	enum dpt_dtype dt;
	int ndim, rc;
	size_t i;

	if (!name || !dtype || !kind || !json_is_array(chunks))
		return bad(err, errlen,
			   "a tensor lacks name, dtype, kind or "
			   "chunks");
	if (dpt__dtype_parse(dtype, &dt))
		return bad(err, errlen, "tensor '%s' has unknown dtype '%s'",
			   name, dtype);
	if (strcmp(kind, "sharded") && strcmp(kind, "replicated"))
		return bad(err, errlen, "tensor '%s' has unknown kind '%s'",
			   name, kind);
	rc = get_dims(j, "shape", -1, shape, &ndim, err, errlen);
	if (rc)
		return rc;
	t = dpt__manifest_add_tensor(m, name, dt,
				     strcmp(kind, "sharded")
					     ? DPT_CKPT_REPLICATED
					     : DPT_CKPT_SHARDED,
				     ndim, shape);
	if (!t)
		return DPT_ENOMEM;
	json_array_foreach(chunks, i, v)
	{
		rc = decode_chunk(v, t, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* The manifest's "files" (FILES, an array) into M. */
static int decode_files(json_t *files, struct dpt__manifest *m, char *err,
			size_t errlen)
{
	json_t *v;
	size_t i;
	int rc;

	json_array_foreach(files, i, v)
	{
		struct dpt__shard_file *f =
			grow(&m->files, &m->nfiles, sizeof(*f));
		const char *name =
			json_string_value(json_object_get(v, "name"));
		uint64_t rank;

		if (!f)
			return DPT_ENOMEM;
		if (!name)
			return bad(err, errlen, "file %zu has no name", i);
		/* A shard is a file of the step's directory, and its name a
		 * key of the storage: no '/', no "..". */
		if (dpt__storage_key_check(name, false) || strchr(name, '/'))
			return bad(err, errlen,
				   "file %zu has a bad name '%.200s'", i, name);
		f->name = strdup(name);
		rc = f->name ? 0 : DPT_ENOMEM;
		if (!rc)
			rc = get_u64(v, "rank", &rank, err, errlen);
		if (!rc)
			rc = get_u64(v, "size", &f->size, err, errlen);
		if (rc)
			return rc;
		/* As a chunk's file: a rank that does not fit is refused, not
		 * truncated into another rank. */
		if (rank > UINT32_MAX)
			return bad(err, errlen, "file %zu has rank %" PRIu64, i,
				   rank);
		f->rank = (uint32_t)rank;
	}
	return 0;
}

int dpt__manifest_decode(const char *buf, size_t len, struct dpt__manifest *m,
			 char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *files, *tensors, *cks, *v;
	const char *format, *alg;
	uint64_t version, world;
	size_t i;
	int rc;

	memset(m, 0, sizeof(*m));
	if (!root) {
		rc = bad(err, errlen, "not JSON: %s at line %d", jerr.text,
			 jerr.line);
		goto out;
	}
	format = json_string_value(json_object_get(root, "format"));
	if (!format || strcmp(format, DPT__CKPT_FORMAT)) {
		rc = bad(err, errlen, "not a dptrain manifest (format '%s')",
			 format ? format : "");
		goto out;
	}
	rc = get_u64(root, "version", &version, err, errlen);
	if (rc)
		goto out;
	if (version > DPT__CKPT_VERSION || version == 0) {
		snprintf(err, errlen,
			 "format version %" PRIu64 " is not supported (this "
			 "reader knows 1 to %d): use a newer dptrain",
			 version, DPT__CKPT_VERSION);
		rc = DPT_EVERSION;
		goto out;
	}
	m->version = (int)version;
	rc = get_u64(root, "step", &m->step, err, errlen);
	if (!rc)
		rc = get_u64(root, "world_size", &world, err, errlen);
	if (!rc)
		rc = get_u64(root, "sample_cursor", &m->sample_cursor, err,
			     errlen);
	if (!rc)
		rc = get_blob(root, "rng", &m->rng, &m->rng_len, err, errlen);
	if (!rc)
		rc = get_blob(root, "user", &m->user, &m->user_len, err,
			      errlen);
	if (rc)
		goto out;
	/* No coordinator forms a larger world; the world caps the chunks of
	 * a tensor (dpt__manifest_check). */
	if (world == 0 || world > DPT_WIRE_WORLD_MAX) {
		rc = bad(err, errlen,
			 "world_size %" PRIu64 " is out of range (1 to %d)",
			 world, DPT_WIRE_WORLD_MAX);
		goto out;
	}
	m->world_size = (uint32_t)world;
	cks = json_object_get(root, "checksum");
	alg = json_string_value(json_object_get(cks, "algorithm"));
	if (!alg || strcmp(alg, "xxh3-64")) {
		rc = bad(err, errlen, "checksum algorithm '%s' is unknown",
			 alg ? alg : "");
		goto out;
	}
	rc = get_u64(cks, "block_size", &m->block_size, err, errlen);
	if (rc)
		goto out;
	/* Every reader stages a block whole: a block_size that another
	 * user wrote must not decide what it allocates. */
	if (m->block_size == 0 || m->block_size > DPT__CKPT_READ_MAX) {
		rc = bad(err, errlen,
			 "checksum block_size %" PRIu64
			 " is not from 1 to %u bytes",
			 m->block_size, DPT__CKPT_READ_MAX);
		goto out;
	}
	files = json_object_get(root, "files");
	tensors = json_object_get(root, "tensors");
	if (!json_is_array(files) || !json_is_array(tensors)) {
		rc = bad(err, errlen, "'files' or 'tensors' is not an array");
		goto out;
	}
	rc = decode_files(files, m, err, errlen);
	if (rc)
		goto out;
	json_array_foreach(tensors, i, v)
	{
		rc = decode_tensor(v, m, err, errlen);
		if (rc)
			goto out;
	}
out:
	json_decref(root);
	return rc;
}

/* ------------------------------------------------------------ rules */

/* Whether T's size in bytes (ESZ per element) exceeds 2^64 - 1. */
static bool tensor_bytes_overflow(const struct dpt__tensor_desc *t, size_t esz)
{
	uint64_t n = esz;

	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] == 0)
			return false;
	for (int d = 0; d < t->ndim; d++)
		if (__builtin_mul_overflow(n, t->shape[d], &n))
			return true;
	return false;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name that NAMES[0..N) holds twice, or NULL; sorts NAMES. */
static const char *twice(const char **names, size_t n)
{
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 1; i < n; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			return names[i];
	return NULL;
}

/* No tensor and no file is named twice: sorted, O(n log n) comparisons
 * (each of at most the length of a name) where comparing every pair took
 * O(n^2). */
static int check_names(const struct dpt__manifest *m, char *err, size_t errlen)
{
	size_t n = m->ntensors > m->nfiles ? m->ntensors : m->nfiles;
	const char **names = malloc((n + 1) * sizeof(*names)), *dup;
	int rc = 0;

	if (!names)
		return DPT_ENOMEM;
	for (size_t i = 0; i < m->ntensors; i++)
		names[i] = m->tensors[i].name;
	dup = twice(names, m->ntensors);
	if (dup) {
		rc = bad(err, errlen, "tensor '%.200s' appears twice", dup);
		goto out;
	}
	/* A shard counts once: the bytes of a step are its files' sizes. */
	for (size_t i = 0; i < m->nfiles; i++)
		names[i] = m->files[i].name;
	dup = twice(names, m->nfiles);
	if (dup)
		rc = bad(err, errlen, "file '%.200s' appears twice", dup);
out:
	free(names);
	return rc;
}

/* The rules of one chunk C of T: inside T and its file, of the length of
 * its box and with one checksum per block. */
static int check_chunk(const struct dpt__manifest *m,
		       const struct dpt__tensor_desc *t,
		       const struct dpt__chunk *c, bool partial, char *err,
		       size_t errlen)
{
	size_t esz = dpt_dtype_size(t->dtype);
	uint64_t vol = dpt__box_volume(&c->box);
	char label[256];

	dpt__chunk_label(t, c, label, sizeof(label));
	for (int d = 0; d < t->ndim; d++)
		if (c->box.off[d] > t->shape[d] ||
		    c->box.len[d] > t->shape[d] - c->box.off[d])
			return bad(err, errlen,
				   "chunk '%s' lies outside its tensor", label);
	if (vol == 0 || c->length / esz != vol || c->length % esz)
		return bad(err, errlen,
			   "chunk '%s' has length %" PRIu64
			   ", its box holds %" PRIu64 " elements",
			   label, c->length, vol);
	if (c->nblocks != (c->length + m->block_size - 1) / m->block_size)
		return bad(err, errlen,
			   "chunk '%s' has %zu checksums for %" PRIu64 " bytes",
			   label, c->nblocks, c->length);
	if (c->file >= m->nfiles)
		return bad(err, errlen, "chunk '%s' names file %u of %zu",
			   label, c->file, m->nfiles);
	if (!partial && (c->begin > m->files[c->file].size ||
			 c->length > m->files[c->file].size - c->begin))
		return bad(err, errlen, "chunk '%s' lies past the end of '%s'",
			   label, m->files[c->file].name);
	return 0;
}

/* The chunks of T are disjoint and cover it: their volumes add up to T's,
 * and they tile it (dpt__chunks_cover: equal volumes with an element in
 * two chunks leave another in none). */
static int check_cover(const struct dpt__tensor_desc *t, char *err,
		       size_t errlen)
{
	struct dpt__box whole = {.ndim = t->ndim};
	uint64_t covered = 0, vol;
	bool over = false, exact;
	int rc;

	for (int d = 0; d < t->ndim; d++)
		whole.len[d] = t->shape[d];
	vol = dpt__box_volume(&whole);
	for (size_t j = 0; j < t->nchunks && !over; j++)
		over = __builtin_add_overflow(
			covered, dpt__box_volume(&t->chunks[j].box), &covered);
	if (over || covered > vol)
		return bad(err, errlen,
			   "chunks of '%s' overlap: they hold more than its "
			   "%" PRIu64 " elements",
			   t->name, vol);
	if (covered < vol)
		return bad(err, errlen,
			   "the chunks of '%s' cover %" PRIu64
			   " of its %" PRIu64 " elements",
			   t->name, covered, vol);
	rc = dpt__chunks_cover(t, &exact);
	if (!rc && !exact)
		rc = bad(err, errlen, "chunks of '%s' overlap", t->name);
	return rc;
}

int dpt__manifest_check(const struct dpt__manifest *m, bool partial, char *err,
			size_t errlen)
{
	int rc = check_names(m, err, errlen);

	for (size_t i = 0; !rc && i < m->ntensors; i++) {
		const struct dpt__tensor_desc *t = &m->tensors[i];

		/* Volumes below are computed modulo 2^64: a tensor whose size
		 * in bytes does not fit could pass every rule with chunks
		 * whose volumes wrap around (shape [2^32+1, 2^32+1] holds
		 * 2^33+1 elements mod 2^64). A chunk's box lies inside the
		 * tensor, so its volume fits when the tensor's does. */
		if (tensor_bytes_overflow(t, dpt_dtype_size(t->dtype)))
			return bad(err, errlen,
				   "tensor '%s' is larger than 2^64 bytes",
				   t->name);
		/* A rank writes one chunk of a tensor (ckpt/save.c,
		 * build_fragment): a cap that also bounds the work below. */
		if (partial && t->nchunks > 1)
			return bad(err, errlen,
				   "a rank's part holds %zu chunks of '%s', "
				   "not one",
				   t->nchunks, t->name);
		if (t->nchunks > m->world_size)
			return bad(err, errlen,
				   "tensor '%s' has %zu chunks, more than "
				   "the %" PRIu32 " ranks that wrote it",
				   t->name, t->nchunks, m->world_size);
		for (size_t j = 0; !rc && j < t->nchunks; j++)
			rc = check_chunk(m, t, &t->chunks[j], partial, err,
					 errlen);
		if (!rc && !partial)
			rc = check_cover(t, err, errlen);
	}
	if (rc == DPT_ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}
