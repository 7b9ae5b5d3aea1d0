/*
 * libFuzzer target for the manifest (ckpt/manifest.c): its decoder, the
 * checks a reader makes before trusting it, its encoder, and the shard
 * headers a writer derives from it (ckpt/shard.c). Besides ASan/UBSan:
 * - what decodes encodes to JSON that says nothing the input did not
 *   (every field of the encoding is in the input with the same value: a
 *   value the decoder cannot hold must be refused, not changed), and
 *   decoding that encoding and encoding again gives the same bytes;
 * - what passes the full checks passes them again after the round trip,
 *   passes the partial ones when no tensor has two chunks (a rank's
 *   part), and describes tensors whose sizes fit in 64 bits (elements
 *   times element size), whose chunks' lengths add up to the tensor's
 *   size, inside their files, no two chunks of a tensor sharing an
 *   element (compared pair by pair: the checks do not); every shard
 *   header builds.
 */
#include "config.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include <dptrain/dptrain.h>
#include <dptrain/error.h>

#include "ckpt_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool hex_string(const char *s)
{
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s))
			return false;
	return true;
}

/* Every member of SUB is in FULL with an equal value; arrays have the same
 * length. Hex strings may differ in case (the encoder writes lower case). */
static bool subset(json_t *sub, json_t *full)
{
	const char *key;
	json_t *v;
	size_t i;

	if (json_typeof(sub) != json_typeof(full))
		return false;
	switch (json_typeof(sub)) {
	case JSON_OBJECT:
		json_object_foreach(sub, key, v)
		{
			if (!subset(v, json_object_get(full, key)))
				return false;
		}
		return true;
	case JSON_ARRAY:
		if (json_array_size(sub) != json_array_size(full))
			return false;
		json_array_foreach(sub, i, v)
		{
			if (!subset(v, json_array_get(full, i)))
				return false;
		}
		return true;
	case JSON_STRING: {
		const char *a = json_string_value(sub);
		const char *b = json_string_value(full);
		if (json_string_length(sub) != json_string_length(full))
			return false;
		if (strcmp(a, b) == 0)
			return true;
		return hex_string(a) && hex_string(b) && strcasecmp(a, b) == 0;
	}
	default:
		return json_equal(sub, full);
	}
}

/* Whether no tensor of M has two chunks. */
static bool one_chunk_each(const struct dpt__manifest *m)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (m->tensors[i].nchunks > 1)
			return false;
	return true;
}

static void check_disjoint(const struct dpt__tensor_desc *t)
{
	struct dpt__box x;

	for (size_t j = 0; j < t->nchunks; j++)
		for (size_t k = 0; k < j; k++)
			if (dpt__box_intersect(&t->chunks[j].box,
					       &t->chunks[k].box, &x))
				abort();
}

static void check_sizes(const struct dpt__manifest *m)
{
	for (size_t i = 0; i < m->ntensors; i++) {
		const struct dpt__tensor_desc *t = &m->tensors[i];
		uint64_t elems = 1, bytes, sum = 0;

		check_disjoint(t);

		for (int d = 0; d < t->ndim; d++)
			if (__builtin_mul_overflow(elems, t->shape[d], &elems))
				abort();
		if (__builtin_mul_overflow(elems, dpt_dtype_size(t->dtype),
					   &bytes))
			abort();
		for (size_t j = 0; j < t->nchunks; j++) {
			const struct dpt__chunk *c = &t->chunks[j];
			const struct dpt__shard_file *f = &m->files[c->file];
			if (__builtin_add_overflow(sum, c->length, &sum) ||
			    c->begin + c->length > f->size)
				abort();
		}
		if (sum != bytes)
			abort();
	}
	for (size_t f = 0; f < m->nfiles; f++) {
		char *hdr = NULL;
		uint64_t start = 0;
		if (dpt__shard_header(m, (uint32_t)f, &hdr, &start) ||
		    start < 8 || start % DPT__CKPT_HEADER_ALIGN)
			abort();
		free(hdr);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpt__manifest m, again;
	char err[512], *enc = NULL, *enc2 = NULL;
	size_t len, len2;
	json_t *in, *out;
	int rc;

	rc = dpt__manifest_decode((const char *)data, size, &m, err,
				  sizeof(err));
	if (rc != 0 && rc != DPT_ECORRUPT && rc != DPT_EVERSION &&
	    rc != DPT_ENOMEM)
		abort();
	if (rc) {
		if (!err[0])
			abort(); /* a refusal says why */
		dpt__manifest_release(&m);
		return 0;
	}
	if (dpt__manifest_encode(&m, &enc, &len))
		abort();
	in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	out = json_loads(enc, 0, NULL);
	if (!in || !out || !subset(out, in))
		abort();
	json_decref(in);
	json_decref(out);
	if (dpt__manifest_decode(enc, len, &again, err, sizeof(err)) ||
	    dpt__manifest_encode(&again, &enc2, &len2) || len2 != len ||
	    memcmp(enc, enc2, len) != 0)
		abort();

	if (dpt__manifest_check(&m, false, err, sizeof(err)) == 0) {
		if ((one_chunk_each(&m) &&
		     dpt__manifest_check(&m, true, err, sizeof(err))) ||
		    dpt__manifest_check(&again, false, err, sizeof(err)))
			abort();
		check_sizes(&m);
	} else {
		dpt__manifest_check(&m, true, err, sizeof(err));
	}
	free(enc);
	free(enc2);
	dpt__manifest_release(&again);
	dpt__manifest_release(&m);
	return 0;
}
