/*
 * Prints the layout of every public struct as the C compiler lays it out,
 * for tests/python/layout_check.py to compare with the Python binding's
 * ctypes Structures:
 *
 *   struct NAME SIZE
 *   field NAME FIELD OFFSET SIZE
 *
 * The checker also reads the fields' names from the headers, so a field
 * missing from the lists below is found as well.
 */
#include <stddef.h>
#include <stdio.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#define STRUCT(s) printf("struct %s %zu\n", #s, sizeof(struct s))
#define FIELD(s, f)                                                            \
	printf("field %s %s %zu %zu\n", #s, #f, offsetof(struct s, f),         \
	       sizeof(((struct s *)0)->f))

int main(void)
{
	STRUCT(dpt_init_opts);
	FIELD(dpt_init_opts, coordinator);
	FIELD(dpt_init_opts, secret);
	FIELD(dpt_init_opts, backend);
	FIELD(dpt_init_opts, node);
	FIELD(dpt_init_opts, local_rank);
	FIELD(dpt_init_opts, task_id);
	FIELD(dpt_init_opts, data_host);
	FIELD(dpt_init_opts, connect_timeout_ms);
	FIELD(dpt_init_opts, timeout_ms);
	FIELD(dpt_init_opts, comm_timeout_ms);

	STRUCT(dpt_ckpt_opts);
	FIELD(dpt_ckpt_opts, uri);
	FIELD(dpt_ckpt_opts, run);
	FIELD(dpt_ckpt_opts, keep_last);
	FIELD(dpt_ckpt_opts, keep_every);
	FIELD(dpt_ckpt_opts, busy);
	FIELD(dpt_ckpt_opts, block_size);
	FIELD(dpt_ckpt_opts, part_size);
	FIELD(dpt_ckpt_opts, max_inflight);
	FIELD(dpt_ckpt_opts, buffered_io);
	FIELD(dpt_ckpt_opts, cuda_stream);

	STRUCT(dpt_ckpt_tensor);
	FIELD(dpt_ckpt_tensor, name);
	FIELD(dpt_ckpt_tensor, dtype);
	FIELD(dpt_ckpt_tensor, kind);
	FIELD(dpt_ckpt_tensor, ndim);
	FIELD(dpt_ckpt_tensor, shape);
	FIELD(dpt_ckpt_tensor, offset);
	FIELD(dpt_ckpt_tensor, count);
	FIELD(dpt_ckpt_tensor, data);
	FIELD(dpt_ckpt_tensor, memory);

	STRUCT(dpt_ckpt_meta);
	FIELD(dpt_ckpt_meta, step);
	FIELD(dpt_ckpt_meta, sample_cursor);
	FIELD(dpt_ckpt_meta, rng);
	FIELD(dpt_ckpt_meta, rng_len);
	FIELD(dpt_ckpt_meta, user);
	FIELD(dpt_ckpt_meta, user_len);

	STRUCT(dpt_ckpt_entry);
	FIELD(dpt_ckpt_entry, name);
	FIELD(dpt_ckpt_entry, dtype);
	FIELD(dpt_ckpt_entry, ndim);
	FIELD(dpt_ckpt_entry, shape);

	STRUCT(dpt_ckpt_contents);
	FIELD(dpt_ckpt_contents, step);
	FIELD(dpt_ckpt_contents, sample_cursor);
	FIELD(dpt_ckpt_contents, world_size);
	FIELD(dpt_ckpt_contents, ntensors);
	FIELD(dpt_ckpt_contents, tensors);
	FIELD(dpt_ckpt_contents, rng);
	FIELD(dpt_ckpt_contents, rng_len);
	FIELD(dpt_ckpt_contents, user);
	FIELD(dpt_ckpt_contents, user_len);
	FIELD(dpt_ckpt_contents, stored_bytes);

	STRUCT(dpt_ckpt_info);
	FIELD(dpt_ckpt_info, step);
	FIELD(dpt_ckpt_info, sample_cursor);
	FIELD(dpt_ckpt_info, world_size);
	FIELD(dpt_ckpt_info, rng);
	FIELD(dpt_ckpt_info, rng_len);
	FIELD(dpt_ckpt_info, user);
	FIELD(dpt_ckpt_info, user_len);

	STRUCT(dpt_ckpt_stats);
	FIELD(dpt_ckpt_stats, saves);
	FIELD(dpt_ckpt_stats, loads);
	FIELD(dpt_ckpt_stats, bytes_written);
	FIELD(dpt_ckpt_stats, stall_ns);
	FIELD(dpt_ckpt_stats, bytes_needed);
	FIELD(dpt_ckpt_stats, bytes_read);
	return 0;
}
