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

# The bash completion of the dptrain tool (configure: --with-bash-completion-dir).
dist_bashcompletion_DATA = contrib/bash-completion/dptrain
# make distcheck installs under its own prefix, never into the system's
# completionsdir that pkg-config names.
AM_DISTCHECK_CONFIGURE_FLAGS = \
	--with-bash-completion-dir='$${dc_install_base}/share/bash-completion/completions'
