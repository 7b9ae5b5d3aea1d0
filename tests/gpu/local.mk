# The GPU path run for real (tests/gpu/README): tests/gpu/bundle builds a
# self-contained bundle of the CUDA and NCCL build, its test programs and
# the runtime libraries a bare GPU machine lacks; bundle/run runs every
# GPU test there. tests/gpu/no_gpu.sh builds and runs it here, where every
# GPU test SKIPs with the reason, so that the bundle cannot rot.
if HAVE_CUDA
# The NCCL backend on device and host buffers (tests/gpu/nccl.sh) and the
# device-checkpoint stall (tests/gpu/run's figure).
check_PROGRAMS += tests/gpu/gpu_coll tests/gpu/gpu_stall
tests_gpu_gpu_coll_SOURCES = tests/gpu/gpu_coll.c
tests_gpu_gpu_coll_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_gpu_gpu_coll_LDADD = worker/libdptrain.la $(CUDA_LIBS) -lm
tests_gpu_gpu_stall_SOURCES = tests/gpu/gpu_stall.c
tests_gpu_gpu_stall_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_gpu_gpu_stall_LDADD = worker/libdptrain.la $(CUDA_LIBS)
endif
# tests/gpu/no_gpu.sh runs among the LONG_TESTS (tests/local.mk).
EXTRA_DIST += tests/gpu/no_gpu.sh tests/gpu/bundle tests/gpu/run \
	tests/gpu/nccl.sh tests/gpu/torch.sh tests/gpu/torch_cuda.py \
	tests/gpu/README
# What tests/gpu/no_gpu.sh leaves in the build tree: its own CUDA build,
# the bundle, the build's output and the runs' results.
clean-local: clean-local-gpu
clean-local-gpu:
	-rm -rf tests/gpu/no_gpu.build tests/gpu/no_gpu.bundle \
		tests/gpu/no_gpu.bundle.new tests/gpu/no_gpu.res tests/gpu/no_gpu.out
.PHONY: clean-local-gpu
