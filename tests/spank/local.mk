# Integration tests of the SPANK plugin on the real test cluster.
SPANK_TESTS = \
	tests/spank/plugin_link.sh \
	tests/spank/options.sh \
	tests/spank/coordinator.sh \
	tests/spank/env.sh \
	tests/spank/gpus.sh \
	tests/spank/torchrun.sh \
	tests/spank/torch.sh \
	tests/spank/workers.sh \
	tests/spank/status.sh \
	tests/spank/status_hostile.sh \
	tests/spank/metrics.sh \
	tests/spank/plot.sh \
	tests/spank/netns.sh \
	tests/spank/private.sh \
	tests/spank/shared_root.sh \
	tests/spank/secret.sh
TESTS += $(SPANK_TESTS)
# Run among the LONG_TESTS, in the order tests/local.mk gives them, as
# they mostly wait for Slurm: shapes.sh and shapes_refused.sh (one-minute
# jobs requeued), grow.sh, grow_gpus.sh, grow_fallback.sh and
# shapes_churn.sh (jobs that shrink and grow), the walltime's
# walltime.sh, walltime-change.sh, requeue-guard.sh and elastic.sh
# (one-minute time limits).
SPANK_WAITING = tests/spank/shapes.sh tests/spank/shapes_refused.sh \
	tests/spank/grow.sh tests/spank/grow_gpus.sh \
	tests/spank/grow_fallback.sh tests/spank/shapes_churn.sh \
	tests/spank/walltime.sh tests/spank/walltime-change.sh \
	tests/spank/requeue-guard.sh tests/spank/elastic.sh
EXTRA_DIST += $(SPANK_TESTS) $(SPANK_WAITING) tests/spank/lib.sh \
	tests/spank/ddp.py tests/spank/site_submit.lua
