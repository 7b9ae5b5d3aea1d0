/*
 * The checkpoint manifest (doc/checkpoint-format.md): JSON round trip,
 * what a reader refuses (newer versions, broken fields), the cross-field
 * rules, and the safetensors header of a shard file.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "ckpt/ckpt_int.h"
#include "buf.h"
#include "log.h"

/* What the library logged since the last dpt__buf_reset. */
static struct dpt__buf logged;

/* A manifest of two ranks: a replicated [10, 3] float32 split in rows
 * 0..5 and 5..10, a sharded int64 scalar held by rank 1, block 64. */
static void sample(struct dpt__manifest *m)
{
	static const uint64_t shape[] = {10, 3};
	struct dpt__tensor_desc *t;
	struct dpt__chunk *c;

	memset(m, 0, sizeof(*m));
	m->version = 1;
	m->step = 1200;
	m->world_size = 2;
	m->sample_cursor = (uint64_t)1 << 40;
	m->block_size = 64;
	m->rng = malloc(3);
	memcpy(m->rng, "\x00\xff\x10", 3);
	m->rng_len = 3;
	m->user = malloc(1);
	m->user_len = 0;
	m->files = calloc(2, sizeof(*m->files));
	m->nfiles = 2;
	for (int f = 0; f < 2; f++) {
		char name[64];
		dpt__shard_name((uint32_t)f, 2, name, sizeof(name));
		m->files[f].name = strdup(name);
		m->files[f].rank = (uint32_t)f;
		m->files[f].size = 4096 + 60 + 8;
	}
	t = dpt__manifest_add_tensor(m, "w", DPT_FLOAT32, DPT_CKPT_REPLICATED,
				     2, shape);
	for (int r = 0; r < 2; r++) {
		c = dpt__tensor_add_chunk(t);
		c->box.ndim = 2;
		c->box.off[0] = 5 * (uint64_t)r;
		c->box.len[0] = 5;
		c->box.len[1] = 3;
		c->file = (uint32_t)r;
		c->begin = 4096;
		c->length = 60;
		c->nblocks = 1;
		c->xxh3 = calloc(1, sizeof(uint64_t));
		c->xxh3[0] = r ? 0xffffffffffffffffull : 0x0123456789abcdefull;
	}
	t = dpt__manifest_add_tensor(m, "count", DPT_INT64, DPT_CKPT_SHARDED, 0,
				     NULL);
	c = dpt__tensor_add_chunk(t);
	c->box.ndim = 0;
	c->file = 1;
	c->begin = 4096 + 60;
	c->length = 8;
	c->nblocks = 1;
	c->xxh3 = calloc(1, sizeof(uint64_t));
	c->xxh3[0] = 42;
}

static void round_trip(void **state)
{
	struct dpt__manifest m, d;
	char *json, *again, err[256];
	size_t len, len2;
	(void)state;

	sample(&m);
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)), 0);
	assert_int_equal(dpt__manifest_encode(&m, &json, &len), 0);
	assert_int_equal(dpt__manifest_decode(json, len, &d, err, sizeof(err)),
			 0);
	assert_int_equal(dpt__manifest_check(&d, false, err, sizeof(err)), 0);
	assert_int_equal(d.version, 1);
	assert_int_equal(d.step, 1200);
	assert_int_equal(d.world_size, 2);
	assert_int_equal(d.sample_cursor, (uint64_t)1 << 40);
	assert_int_equal(d.rng_len, 3);
	assert_memory_equal(d.rng, "\x00\xff\x10", 3);
	assert_int_equal(d.user_len, 0);
	assert_int_equal(d.block_size, 64);
	assert_int_equal(d.nfiles, 2);
	assert_string_equal(d.files[1].name, "rank-00001-of-00002.safetensors");
	assert_int_equal(d.ntensors, 2);
	assert_string_equal(d.tensors[0].name, "w");
	assert_int_equal(d.tensors[0].dtype, DPT_FLOAT32);
	assert_int_equal(d.tensors[0].kind, DPT_CKPT_REPLICATED);
	assert_int_equal(d.tensors[0].nchunks, 2);
	assert_int_equal(d.tensors[0].chunks[1].box.off[0], 5);
	assert_int_equal(d.tensors[0].chunks[1].xxh3[0], 0xffffffffffffffffull);
	assert_int_equal(d.tensors[0].chunks[0].xxh3[0], 0x0123456789abcdefull);
	assert_int_equal(d.tensors[1].ndim, 0);
	assert_int_equal(d.tensors[1].kind, DPT_CKPT_SHARDED);
	assert_int_equal(d.tensors[1].chunks[0].begin, 4096 + 60);
	/* Deterministic: the same manifest encodes to the same bytes. */
	assert_int_equal(dpt__manifest_encode(&d, &again, &len2), 0);
	assert_int_equal(len, len2);
	assert_memory_equal(json, again, len);
	free(json);
	free(again);
	dpt__manifest_release(&m);
	dpt__manifest_release(&d);
}

/* Decodes JSON after replacing FROM by TO in the sample's encoding. */
static int decode_edited(const char *from, const char *to, char *err,
			 size_t errlen)
{
	struct dpt__manifest m, d;
	char *json, *p, *edited;
	size_t len;
	int rc;

	sample(&m);
	assert_int_equal(dpt__manifest_encode(&m, &json, &len), 0);
	p = strstr(json, from);
	assert_non_null(p);
	edited = malloc(len + strlen(to) + 1);
	memcpy(edited, json, (size_t)(p - json));
	snprintf(edited + (p - json), len + strlen(to) + 1 - (size_t)(p - json),
		 "%s%s", to, p + strlen(from));
	rc = dpt__manifest_decode(edited, strlen(edited), &d, err, errlen);
	if (rc == 0)
		rc = dpt__manifest_check(&d, false, err, errlen);
	free(edited);
	free(json);
	dpt__manifest_release(&m);
	dpt__manifest_release(&d);
	return rc;
}

static void refuses(void **state)
{
	struct dpt__manifest d;
	char err[256];
	(void)state;

	assert_int_equal(decode_edited("\"version\":1", "\"version\":2", err,
				       sizeof(err)),
			 DPT_EVERSION);
	assert_non_null(strstr(err, "version 2"));
	assert_int_equal(
		decode_edited("dptrain-ckpt", "other", err, sizeof(err)),
		DPT_ECORRUPT);
	assert_int_equal(
		decode_edited("\"float32\"", "\"float128\"", err, sizeof(err)),
		DPT_ECORRUPT);
	assert_non_null(strstr(err, "float128"));
	assert_int_equal(decode_edited("0123456789abcdef", "0123456789abcdeg",
				       err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_int_equal(
		decode_edited("\"step\":1200", "\"step\":-1", err, sizeof(err)),
		DPT_ECORRUPT);
	assert_int_equal(decode_edited("\"rng\":\"00ff10\"",
				       "\"rng\":\"0ff10\"", err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_int_equal(decode_edited("\"sample_cursor\"",
				       "\"sample_cursor\":1,\"sample_cursor\"",
				       err, sizeof(err)),
			 DPT_ECORRUPT); /* duplicate keys */
	assert_int_equal(decode_edited("rank-00001-of-00002.safetensors",
				       "../x", err, sizeof(err)),
			 DPT_ECORRUPT);
	/* A rank that does not fit in 32 bits is refused, not truncated
	 * into rank 1 (found by tests/fuzz/fuzz_manifest). */
	assert_int_equal(decode_edited("\"rank\":1,", "\"rank\":4294967297,",
				       err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "rank 4294967297"));
	/* A block that no reader should stage (each loader thread allocates
	 * one). */
	assert_int_equal(decode_edited("\"block_size\":64",
				       "\"block_size\":1099511627776", err,
				       sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "block_size 1099511627776"));
	assert_int_equal(
		dpt__manifest_decode("{\"format\":", 11, &d, err, sizeof(err)),
		DPT_ECORRUPT);
	dpt__manifest_release(&d);
}

static void rules(void **state)
{
	struct dpt__manifest m;
	char err[256];
	(void)state;

	/* Overlapping rows. */
	sample(&m);
	m.tensors[0].chunks[1].box.off[0] = 4;
	m.tensors[0].chunks[1].box.len[0] = 5;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "overlap"));
	dpt__manifest_release(&m);
	/* A gap: rows 0..5 and 6..10 (length adjusted). */
	sample(&m);
	m.tensors[0].chunks[1].box.off[0] = 6;
	m.tensors[0].chunks[1].box.len[0] = 4;
	m.tensors[0].chunks[1].length = 48;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "cover"));
	/* ...which a rank's fragment, one chunk of each tensor, may have. */
	free(m.tensors[0].chunks[0].xxh3);
	m.tensors[0].chunks[0] = m.tensors[0].chunks[1];
	m.tensors[0].nchunks = 1;
	assert_int_equal(dpt__manifest_check(&m, true, err, sizeof(err)), 0);
	dpt__manifest_release(&m);
	/* Outside the tensor. */
	sample(&m);
	m.tensors[0].chunks[1].box.off[0] = 6;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "outside"));
	dpt__manifest_release(&m);
	/* Length unlike the box, too few checksums, past the file's end. */
	sample(&m);
	m.tensors[0].chunks[0].length = 64;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	dpt__manifest_release(&m);
	sample(&m);
	m.block_size = 32;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "checksums"));
	dpt__manifest_release(&m);
	sample(&m);
	m.files[1].size = 4096 + 60;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "past the end"));
	dpt__manifest_release(&m);
	sample(&m);
	m.tensors[1].chunks[0].file = 2;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	dpt__manifest_release(&m);
	/* A tensor of more than 2^64 bytes, [2^32 + 1, 2^32 + 1] uint8 in
	 * one chunk: every volume is 2^33 + 1 modulo 2^64, which the length
	 * and the coverage matched (found by tests/fuzz/fuzz_manifest). */
	sample(&m);
	m.block_size = (uint64_t)1 << 40;
	m.files[0].size = (uint64_t)1 << 34;
	m.tensors[0].dtype = DPT_UINT8;
	m.tensors[0].shape[0] = m.tensors[0].shape[1] = ((uint64_t)1 << 32) + 1;
	m.tensors[0].chunks[0].box.len[0] = m.tensors[0].shape[0];
	m.tensors[0].chunks[0].box.len[1] = m.tensors[0].shape[1];
	m.tensors[0].chunks[0].length = ((uint64_t)1 << 33) + 1;
	free(m.tensors[0].chunks[1].xxh3);
	m.tensors[0].nchunks = 1;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "2^64"));
	dpt__manifest_release(&m);
	/* The same name twice. */
	sample(&m);
	free(m.tensors[1].name);
	m.tensors[1].name = strdup("w");
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "twice"));
	dpt__manifest_release(&m);
}

/* A manifest of WORLD ranks with one file of SIZE bytes and no tensor. */
static void bare(struct dpt__manifest *m, uint32_t world, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->version = 1;
	m->world_size = world;
	m->block_size = 1 << 20;
	m->rng = malloc(1);
	m->user = malloc(1);
	m->files = calloc(1, sizeof(*m->files));
	m->files[0].name = strdup("rank-00000-of-00001.safetensors");
	m->files[0].size = size;
	m->nfiles = 1;
}

/* Adds to T a uint8 chunk of box OFF..OFF+LEN, at BEGIN of file 0. */
static void add_box(struct dpt__tensor_desc *t, const uint64_t *off,
		    const uint64_t *len, uint64_t begin)
{
	struct dpt__chunk *c = dpt__tensor_add_chunk(t);

	assert_non_null(c);
	c->box.ndim = t->ndim;
	for (int d = 0; d < t->ndim; d++) {
		c->box.off[d] = off[d];
		c->box.len[d] = len[d];
	}
	c->begin = begin;
	c->length = dpt__box_volume(&c->box);
	c->nblocks = 1;
	c->xxh3 = calloc(1, sizeof(uint64_t));
}

/* A uint8 tensor of shape SHAPE (NDIM dimensions) made of the N boxes of
 * BOXES (offsets then lengths, NDIM each), checked in full. */
static int check_boxes(int ndim, const uint64_t *shape, const uint64_t *boxes,
		       size_t n, char *err, size_t errlen)
{
	struct dpt__manifest m;
	struct dpt__tensor_desc *t;
	uint64_t begin = 0;
	int rc;

	bare(&m, 64, 1 << 20);
	t = dpt__manifest_add_tensor(&m, "t", DPT_UINT8, DPT_CKPT_SHARDED, ndim,
				     shape);
	for (size_t i = 0; i < n; i++) {
		add_box(t, boxes + 2 * ndim * i, boxes + 2 * ndim * i + ndim,
			begin);
		begin += t->chunks[i].length;
	}
	rc = dpt__manifest_check(&m, false, err, errlen);
	dpt__manifest_release(&m);
	return rc;
}

/* Overlaps that chunks next to each other in the order of their offsets
 * do not show, with volumes that add up to the tensor's (a sweep that
 * compares neighbours only would pass them); tilings that no straight cut
 * divides, accepted. */
static void every_overlap(void **state)
{
	static const uint64_t two[] = {2, 2}, three[] = {3, 3};
	static const uint64_t cube[] = {2, 2, 2};
	/* [0,2)x[0,1), [0,1)x[1,2), [1,2)x[0,1): the first and the last
	 * share (1, 0); (1, 1) is in none. */
	static const uint64_t apart[] = {0, 0, 2, 1, 0, 1, 1, 1, 1, 0, 1, 1};
	/* The pinwheel: four 2x1 boxes around the centre of a 3x3. */
	static const uint64_t pinwheel[] = {0, 0, 1, 2, 1, 0, 2, 1, 2, 1,
					    1, 2, 0, 2, 2, 1, 1, 1, 1, 1};
	/* A 2x2x2 cube: a 2x2x1 slab, then two 1x2x1 bars; moving the
	 * second bar down to the slab's layer keeps every volume. */
	uint64_t cubes[] = {0, 0, 0, 2, 2, 1, 0, 0, 1,
			    1, 2, 1, 1, 0, 1, 1, 2, 1};
	char err[256];
	(void)state;

	assert_int_equal(check_boxes(2, two, apart, 3, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "chunks of 't' overlap"));
	assert_int_equal(check_boxes(2, three, pinwheel, 5, err, sizeof(err)),
			 0);
	assert_int_equal(check_boxes(3, cube, cubes, 3, err, sizeof(err)), 0);
	cubes[2 * 3 * 2 + 2] = 0;
	assert_int_equal(check_boxes(3, cube, cubes, 3, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "overlap"));
}

static uint64_t next_random(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Whether the boxes of T are disjoint and cover it, pair by pair. */
static bool pairwise(const struct dpt__tensor_desc *t)
{
	struct dpt__box whole = {.ndim = t->ndim}, x;
	uint64_t sum = 0;

	for (int d = 0; d < t->ndim; d++)
		whole.len[d] = t->shape[d];
	for (size_t i = 0; i < t->nchunks; i++) {
		sum += dpt__box_volume(&t->chunks[i].box);
		for (size_t k = 0; k < i; k++)
			if (dpt__box_intersect(&t->chunks[i].box,
					       &t->chunks[k].box, &x))
				return false;
	}
	return sum == dpt__box_volume(&whole);
}

/* Cuts T (no chunk yet) into about N boxes, each cut across one box. */
static void random_tiling(struct dpt__tensor_desc *t, size_t n, uint64_t *x)
{
	uint64_t zero[DPT__CKPT_MAXDIM] = {0};

	add_box(t, zero, t->shape, 0);
	for (int tries = 0; t->nchunks < n && tries < 1000; tries++) {
		struct dpt__box *b =
			&t->chunks[next_random(x) % t->nchunks].box;
		int d = (int)(next_random(x) % (uint64_t)t->ndim);
		struct dpt__box rest = *b;
		uint64_t cut;

		if (b->len[d] < 2)
			continue;
		cut = 1 + next_random(x) % (b->len[d] - 1);
		b->len[d] = cut;
		rest.off[d] += cut;
		rest.len[d] -= cut;
		add_box(t, rest.off, rest.len, 0);
	}
}

/* dpt__chunks_cover says what comparing every pair says, on tilings of
 * up to 4 dimensions, the same with one box moved by one (equal volumes,
 * an overlap), and boxes drawn at random. */
static void cover_agrees_with_pairs(void **state)
{
	uint64_t x = 88172645463325252ull;
	int exact = 0;
	(void)state;

	for (int i = 0; i < 3000; i++) {
		struct dpt__tensor_desc t = {.name = "t", .dtype = DPT_UINT8};
		uint64_t v = 1;
		bool fast;

		t.ndim = 1 + (int)(next_random(&x) % 4);
		for (int d = 0; d < t.ndim; d++)
			v *= t.shape[d] = 1 + next_random(&x) % 5;
		random_tiling(&t, 1 + next_random(&x) % (v < 12 ? v : 12), &x);
		for (size_t j = 0; i % 3 == 2 && j < t.nchunks; j++)
			for (int d = 0; d < t.ndim; d++) {
				struct dpt__box *b = &t.chunks[j].box;
				b->off[d] = next_random(&x) % t.shape[d];
				b->len[d] = 1 + next_random(&x) % (t.shape[d] -
								   b->off[d]);
			}
		if (i % 3 == 1) {
			struct dpt__box *b =
				&t.chunks[next_random(&x) % t.nchunks].box;
			int d = (int)(next_random(&x) % (uint64_t)t.ndim);

			if (b->off[d] > 0)
				b->off[d]--;
			else if (b->off[d] + b->len[d] < t.shape[d])
				b->off[d]++;
		}
		assert_int_equal(dpt__chunks_cover(&t, &fast), 0);
		assert_int_equal(fast, pairwise(&t));
		exact += fast;
		for (size_t j = 0; j < t.nchunks; j++)
			free(t.chunks[j].xxh3);
		free(t.chunks);
	}
	/* Both answers were seen, often. */
	assert_true(exact > 1000 && exact < 2500);
}

static double cpu_seconds(void)
{
	return (double)clock() / CLOCKS_PER_SEC;
}

/* The checks of a manifest that another user may have written take time
 * in O(n log n): a tensor of 65536 chunks (the largest world, 2^31 pairs)
 * and 65536 tensors (2^31 pairs of names) take well under a second each;
 * comparing every pair took 10 s and more each. */
static void many_chunks_and_tensors(void **state)
{
	struct dpt__manifest m;
	struct dpt__tensor_desc *t;
	uint64_t shape[] = {65536, 3}, len[] = {1, 3}, off[] = {0, 0};
	char err[256], name[32];
	double t0;
	(void)state;

	bare(&m, 65536, 3 * 65536);
	t = dpt__manifest_add_tensor(&m, "w", DPT_UINT8, DPT_CKPT_REPLICATED, 2,
				     shape);
	for (off[0] = 0; off[0] < 65536; off[0]++)
		add_box(t, off, len, 3 * off[0]);
	t0 = cpu_seconds();
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)), 0);
	assert_true(cpu_seconds() - t0 < 2.0);
	/* One row twice, in place of the last. */
	t->chunks[65535].box.off[0] = 0;
	t0 = cpu_seconds();
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_true(cpu_seconds() - t0 < 2.0);
	assert_non_null(strstr(err, "chunks of 'w' overlap"));
	dpt__manifest_release(&m);

	bare(&m, 1, 1);
	off[0] = 0;
	for (uint64_t i = 0; i < 65536; i++) {
		snprintf(name, sizeof(name), "layer.%05" PRIu64 ".bias", i);
		t = dpt__manifest_add_tensor(&m, name, DPT_UINT8,
					     DPT_CKPT_REPLICATED, 1, len);
		add_box(t, off, len, 0);
	}
	t0 = cpu_seconds();
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)), 0);
	assert_true(cpu_seconds() - t0 < 2.0);
	free(m.tensors[65535].name);
	m.tensors[65535].name = strdup("layer.00000.bias");
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "tensor 'layer.00000.bias' appears twice"));
	dpt__manifest_release(&m);
}

/* What caps a manifest: a world no coordinator forms, more chunks of a
 * tensor than ranks, a rank's part with two chunks of a tensor, a file
 * named twice. */
static void caps(void **state)
{
	struct dpt__manifest m;
	char err[256];
	(void)state;

	assert_int_equal(decode_edited("\"world_size\":2",
				       "\"world_size\":65537", err,
				       sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "world_size 65537 is out of range"));
	sample(&m);
	m.world_size = 1;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "'w' has 2 chunks, more than the 1 ranks"));
	assert_int_equal(dpt__manifest_check(&m, true, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err, "a rank's part holds 2 chunks of 'w'"));
	dpt__manifest_release(&m);
	sample(&m);
	free(m.files[1].name);
	m.files[1].name = strdup(m.files[0].name);
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	assert_non_null(strstr(err,
			       "file 'rank-00000-of-00002.safetensors' appears "
			       "twice"));
	dpt__manifest_release(&m);
}

static void safetensors_header(void **state)
{
	struct dpt__manifest m;
	uint64_t start, n = 0;
	json_error_t jerr;
	json_t *h, *e;
	char *hdr;
	(void)state;

	sample(&m);
	/* Offsets relative to the data section, as the writer has them. */
	m.tensors[0].chunks[1].begin = 0;
	m.tensors[1].chunks[0].begin = 60;
	assert_int_equal(dpt__shard_header(&m, 1, &hdr, &start), 0);
	assert_int_equal(start % 4096, 0);
	for (int b = 7; b >= 0; b--)
		n = n << 8 | (unsigned char)hdr[b];
	assert_int_equal(n, start - 8);
	assert_int_equal(hdr[start - 1], ' ');
	h = json_loadb(hdr + 8, n, 0, &jerr);
	assert_non_null(h);
	e = json_object_get(h, "w@5,0");
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "dtype")),
			    "F32");
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(e, "data_offsets"), 1)),
			 60);
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(e, "shape"), 0)),
			 5);
	e = json_object_get(h, "count");
	assert_string_equal(json_string_value(json_object_get(e, "dtype")),
			    "I64");
	assert_int_equal(json_array_size(json_object_get(e, "shape")), 0);
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(h, "__metadata__"), "step")),
		"1200");
	assert_null(json_object_get(h, "w@0,0")); /* rank 0's chunk */
	json_decref(h);
	free(hdr);
	dpt__manifest_release(&m);
}

/* Every dtype has a manifest name that parses back to it, a safetensors
 * name and a size; the numbers are those of the format's table. */
static void every_dtype_named(void **state)
{
	static const struct {
		enum dpt_dtype dt;
		int number;
		const char *name, *st;
		size_t size;
	} table[] = {
		{DPT_FLOAT32, 0, "float32", "F32", 4},
		{DPT_FLOAT64, 1, "float64", "F64", 8},
		{DPT_BFLOAT16, 2, "bfloat16", "BF16", 2},
		{DPT_FLOAT16, 3, "float16", "F16", 2},
		{DPT_INT32, 4, "int32", "I32", 4},
		{DPT_INT64, 5, "int64", "I64", 8},
		{DPT_UINT8, 6, "uint8", "U8", 1},
		{DPT_BOOL, 7, "bool", "BOOL", 1},
		{DPT_INT8, 8, "int8", "I8", 1},
		{DPT_INT16, 9, "int16", "I16", 2},
		{DPT_UINT16, 10, "uint16", "U16", 2},
		{DPT_UINT32, 11, "uint32", "U32", 4},
		{DPT_UINT64, 12, "uint64", "U64", 8},
		{DPT_COMPLEX64, 13, "complex64", "C64", 8},
		{DPT_COMPLEX128, 14, "complex128", "F64", 16},
	};
	enum dpt_dtype dt;
	(void)state;

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		assert_int_equal((int)table[i].dt, table[i].number);
		assert_string_equal(dpt__dtype_name(table[i].dt),
				    table[i].name);
		assert_string_equal(dpt__dtype_safetensors(table[i].dt),
				    table[i].st);
		assert_int_equal(dpt_dtype_size(table[i].dt), table[i].size);
		assert_int_equal(dpt__dtype_parse(table[i].name, &dt), 0);
		assert_int_equal(dt, table[i].dt);
		assert_int_equal(dpt__dtype_safetensors_parts(table[i].dt),
				 table[i].dt == DPT_COMPLEX128 ? 2 : 1);
	}
	assert_null(dpt__dtype_name((enum dpt_dtype)15));
	assert_int_equal(dpt_dtype_size((enum dpt_dtype)15), 0);
	assert_int_equal(dpt__dtype_parse("complex32", &dt), DPT_EINVAL);
}

/* The new dtypes go through the manifest's JSON and its rules (the
 * chunk lengths of the sample fit 4- and 8-byte types). */
static void new_dtypes_round_trip(void **state)
{
	static const enum dpt_dtype four[] = {DPT_UINT32, DPT_INT32};
	static const enum dpt_dtype eight[] = {DPT_UINT64, DPT_COMPLEX64};
	struct dpt__manifest m, d;
	char *json, err[256];
	size_t len;
	(void)state;

	for (int i = 0; i < 2; i++) {
		sample(&m);
		m.tensors[0].dtype = four[i];
		m.tensors[1].dtype = eight[i];
		assert_int_equal(dpt__manifest_encode(&m, &json, &len), 0);
		assert_non_null(strstr(json, dpt__dtype_name(eight[i])));
		assert_int_equal(
			dpt__manifest_decode(json, len, &d, err, sizeof(err)),
			0);
		assert_int_equal(
			dpt__manifest_check(&d, false, err, sizeof(err)), 0);
		assert_int_equal(d.tensors[0].dtype, four[i]);
		assert_int_equal(d.tensors[1].dtype, eight[i]);
		free(json);
		dpt__manifest_release(&m);
		dpt__manifest_release(&d);
	}
	/* A complex64 chunk of the length of a float32 one breaks the
	 * length rule: the element size comes from the dtype. */
	sample(&m);
	m.tensors[0].dtype = DPT_COMPLEX64;
	assert_int_equal(dpt__manifest_check(&m, false, err, sizeof(err)),
			 DPT_ECORRUPT);
	dpt__manifest_release(&m);
}

/* safetensors has BOOL; it has no complex128, which a shard's header
 * describes as float64 pairs: one more dimension of 2. */
static void safetensors_header_new_dtypes(void **state)
{
	struct dpt__manifest m;
	uint64_t start, n = 0;
	json_error_t jerr;
	json_t *h, *e, *shape;
	char *hdr;
	(void)state;

	sample(&m);
	m.tensors[0].dtype = DPT_BOOL;
	m.tensors[1].dtype = DPT_COMPLEX128;
	m.tensors[0].chunks[1].begin = 0;
	m.tensors[1].chunks[0].begin = 60;
	assert_int_equal(dpt__shard_header(&m, 1, &hdr, &start), 0);
	for (int b = 7; b >= 0; b--)
		n = n << 8 | (unsigned char)hdr[b];
	h = json_loadb(hdr + 8, n, 0, &jerr);
	assert_non_null(h);
	e = json_object_get(h, "w@5,0");
	assert_string_equal(json_string_value(json_object_get(e, "dtype")),
			    "BOOL");
	assert_int_equal(json_array_size(json_object_get(e, "shape")), 2);
	e = json_object_get(h, "count");
	assert_string_equal(json_string_value(json_object_get(e, "dtype")),
			    "F64");
	shape = json_object_get(e, "shape");
	assert_int_equal(json_array_size(shape), 1);
	assert_int_equal(json_integer_value(json_array_get(shape, 0)), 2);
	json_decref(h);
	free(hdr);
	dpt__manifest_release(&m);
}

static void quiet(enum dpt__log_level level, const char *msg)
{
	(void)level;
	(void)dpt__buf_printf(&logged, "%s\n", msg);
}

/* Writes the sample's manifest as step 1200's in DIR, padded with spaces
 * (which JSON allows) to SIZE bytes. */
static void write_padded(const char *dir, size_t size)
{
	struct dpt__manifest m;
	char path[512], *json;
	size_t len;
	FILE *f;

	sample(&m);
	assert_int_equal(dpt__manifest_encode(&m, &json, &len), 0);
	assert_true(len <= size);
	snprintf(path, sizeof(path), "%s/step-0000001200", dir);
	(void)mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/step-0000001200/manifest.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(json, 1, len, f), len);
	for (size_t i = len; i < size; i++)
		assert_int_not_equal(putc(' ', f), EOF);
	assert_int_equal(fclose(f), 0);
	free(json);
	dpt__manifest_release(&m);
}

/* A manifest of DPT__CKPT_MANIFEST_MAX bytes is read; one byte more and
 * it is refused before it is read, saying why (the bound was 256 MiB). */
static void size_bound(void **state)
{
	char dir[] = "/tmp/dpt-manifest-XXXXXX", uri[64], path[512], want[128];
	struct dpt__storage *s;
	struct dpt__manifest m;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(uri, sizeof(uri), "file://%s", dir);
	assert_int_equal(dpt__storage_open(uri, NULL, &s), 0);
	write_padded(dir, DPT__CKPT_MANIFEST_MAX);
	assert_int_equal(dpt__ckpt_read_manifest(s, 1200, &m), 0);
	assert_int_equal(m.step, 1200);
	dpt__manifest_release(&m);
	write_padded(dir, DPT__CKPT_MANIFEST_MAX + 1);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__ckpt_read_manifest(s, 1200, &m), DPT_ECORRUPT);
	snprintf(want, sizeof(want), "is %u bytes, more than the %u of any",
		 DPT__CKPT_MANIFEST_MAX + 1, DPT__CKPT_MANIFEST_MAX);
	assert_non_null(logged.data);
	assert_non_null(strstr(logged.data, want));
	dpt__storage_destroy(&s);
	snprintf(path, sizeof(path), "%s/step-0000001200/manifest.json", dir);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/step-0000001200", dir);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(refuses),
		cmocka_unit_test(rules),
		cmocka_unit_test(safetensors_header),
		cmocka_unit_test(every_dtype_named),
		cmocka_unit_test(new_dtypes_round_trip),
		cmocka_unit_test(safetensors_header_new_dtypes),
		cmocka_unit_test(size_bound),
		cmocka_unit_test(every_overlap),
		cmocka_unit_test(cover_agrees_with_pairs),
		cmocka_unit_test(many_chunks_and_tensors),
		cmocka_unit_test(caps),
	};
	int failed;

	dpt__buf_init(&logged, 1 << 16);
	dpt__log_set_sink(quiet);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	dpt__buf_release(&logged);
	return failed;
}
