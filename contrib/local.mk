# Admin and user material, and the scripts behind the README's commands.
EXTRA_DIST += \
	contrib/setup/install-deps.sh \
	contrib/setup/build.sh \
	contrib/setup/demo.sh \
	contrib/setup/check.sh \
	contrib/plugstack.conf.d/dptrain.conf \
	contrib/examples/train_ddp.py \
	contrib/examples/fmnist_ddp.py \
	contrib/examples/fmnist_dptrain.py \
	contrib/examples/train_walltime.py \
	.ci/run
