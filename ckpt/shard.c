/*
 * The safetensors header of a shard file (doc/checkpoint-format.md,
 * "Shard files"): what makes a shard readable by tools that know nothing
 * of dptrain.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ckpt_int.h"

void dpt__chunk_label(const struct dpt__tensor_desc *t,
		      const struct dpt__chunk *c, char *buf, size_t size)
{
	bool whole = true;
	size_t n;
	int w;

	for (int d = 0; d < t->ndim; d++)
		if (c->box.off[d] != 0 || c->box.len[d] != t->shape[d])
			whole = false;
	w = snprintf(buf, size, "%s", t->name);
	if (whole || w < 0 || (size_t)w >= size)
		return;
	n = (size_t)w;
	for (int d = 0; d < t->ndim && n < size; d++) {
		w = snprintf(buf + n, size - n, "%c%" PRIu64, d ? ',' : '@',
			     c->box.off[d]);
		if (w < 0)
			return;
		n += (size_t)w;
	}
}

static json_t *entry(const struct dpt__tensor_desc *t,
		     const struct dpt__chunk *c)
{
	int parts = dpt__dtype_safetensors_parts(t->dtype);
	/* A type that safetensors lacks gets a trailing dimension: its
	 * parts (complex128 as pairs of float64). */
	int ndim = parts > 1 ? t->ndim + 1 : t->ndim;
	json_t *shape = json_array();

	for (int d = 0; shape && d < ndim; d++) {
		json_int_t len =
			d < t->ndim ? (json_int_t)c->box.len[d] : parts;
		if (json_array_append_new(shape, json_integer(len))) {
			json_decref(shape);
			shape = NULL;
		}
	}
	if (!shape)
		return NULL;
	return json_pack("{s:s, s:o, s:[I, I]}", "dtype",
			 dpt__dtype_safetensors(t->dtype), "shape", shape,
			 "data_offsets", (json_int_t)c->begin,
			 (json_int_t)(c->begin + c->length));
}

int dpt__shard_header(const struct dpt__manifest *m, uint32_t file, char **out,
		      uint64_t *data_start)
{
	json_t *root = json_object();
	char step[24], rank[16], world[16], label[512];
	char *text = NULL, *hdr;
	uint64_t n, total;
	int rc = DPT_ENOMEM;

	*out = NULL;
	if (!root)
		return rc;
	snprintf(step, sizeof(step), "%" PRIu64, m->step);
	snprintf(rank, sizeof(rank), "%" PRIu32, m->files[file].rank);
	snprintf(world, sizeof(world), "%" PRIu32, m->world_size);
	if (json_object_set_new(root, "__metadata__",
				json_pack("{s:s, s:s, s:s, s:s, s:s}", "format",
					  DPT__CKPT_FORMAT, "version", "1",
					  "step", step, "rank", rank,
					  "world_size", world)))
		goto out;
	for (size_t i = 0; i < m->ntensors; i++) {
		const struct dpt__tensor_desc *t = &m->tensors[i];
		for (size_t j = 0; j < t->nchunks; j++) {
			if (t->chunks[j].file != file)
				continue;
			dpt__chunk_label(t, &t->chunks[j], label,
					 sizeof(label));
			if (json_object_set_new(root, label,
						entry(t, &t->chunks[j])))
				goto out;
		}
	}
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		goto out;
	n = strlen(text);
	total = (8 + n + DPT__CKPT_HEADER_ALIGN - 1) / DPT__CKPT_HEADER_ALIGN *
		DPT__CKPT_HEADER_ALIGN;
	hdr = malloc(total);
	if (!hdr)
		goto out;
	for (int b = 0; b < 8; b++)
		hdr[b] = (char)(((total - 8) >> (8 * b)) & 0xff);
	memcpy(hdr + 8, text, n);
	memset(hdr + 8 + n, ' ', total - 8 - n);
	*out = hdr;
	*data_start = total;
	rc = 0;
out:
	free(text);
	json_decref(root);
	return rc;
}
