/*
 * The ABI of the public structs (<dptrain/dptrain.h>, "the ABI"): the
 * size checks, and the plain names of the sized functions as exported
 * symbols, for programs and bindings that call them without the header's
 * inline wrappers (they pass structs of this header's size).
 */
#define DPT_NO_SIZED_WRAPPERS 1
#include <string.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "log.h"
#include "abi.h"

/* Check SIZE, a caller's struct NAME, against MIN and CUR (the first and
 * the library's version of it), then copy its SIZE bytes from SRC to DST
 * unless either is NULL. */
static int copy_checked(void *dst, const void *src, size_t size, size_t min,
			size_t cur, const char *name)
{
	if (size > cur) {
		dpt__error("struct %s of %zu bytes is larger than this "
			   "libdptrain %s knows (%zu): the program was built "
			   "against a newer <dptrain/*.h>; run it with that "
			   "library, or rebuild it against this one",
			   name, size, dpt_version(), cur);
		return DPT_EINVAL;
	}
	if (size < min) {
		dpt__error("struct %s of %zu bytes is smaller than its first "
			   "version (%zu): not a struct %s of any libdptrain",
			   name, size, min, name);
		return DPT_EINVAL;
	}
	if (dst && src)
		memcpy(dst, src, size);
	return 0;
}

int dpt__struct_in(void *dst, size_t cur, const void *src, size_t size,
		   size_t min, const char *name)
{
	return copy_checked(dst, src, size, min, cur, name);
}

int dpt__struct_out(void *dst, size_t size, const void *src, size_t cur,
		    size_t min, const char *name)
{
	return copy_checked(dst, src, size, min, cur, name);
}

/* The plain names, which the header turns into inline wrappers. */

void dpt_init_opts_default(struct dpt_init_opts *opts)
{
	(void)dpt_init_opts_default_sized(opts, sizeof(*opts));
}

int dpt_init(struct dpt_ctx **ctx, const struct dpt_init_opts *opts)
{
	return dpt_init_sized(ctx, opts, sizeof(*opts));
}

void dpt_ckpt_opts_default(struct dpt_ckpt_opts *opts)
{
	(void)dpt_ckpt_opts_default_sized(opts, sizeof(*opts));
}

int dpt_ckpt_new(struct dpt_ckpt **out, struct dpt_ctx *ctx,
		 const struct dpt_ckpt_opts *opts)
{
	return dpt_ckpt_new_sized(out, ctx, opts, sizeof(*opts));
}

int dpt_ckpt_register(struct dpt_ckpt *ck, const struct dpt_ckpt_tensor *t)
{
	return dpt_ckpt_register_sized(ck, t, sizeof(*t));
}

int dpt_ckpt_save(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta)
{
	return dpt_ckpt_save_sized(ck, meta, sizeof(*meta));
}

int dpt_ckpt_step(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta,
		  int *stop, int *saved)
{
	return dpt_ckpt_step_sized(ck, meta, sizeof(*meta), stop, saved);
}

int dpt_ckpt_inspect(struct dpt_ckpt *ck, uint64_t step,
		     struct dpt_ckpt_contents *out)
{
	return dpt_ckpt_inspect_sized(ck, step, out, sizeof(*out));
}

int dpt_ckpt_load(struct dpt_ckpt *ck, uint64_t step,
		  struct dpt_ckpt_info *info)
{
	return dpt_ckpt_load_sized(ck, step, info, sizeof(*info));
}

void dpt_ckpt_stats(const struct dpt_ckpt *ck, struct dpt_ckpt_stats *out)
{
	(void)dpt_ckpt_stats_sized(ck, out, sizeof(*out));
}
