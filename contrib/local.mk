# Admin and user material, and the scripts behind the README's commands.
EXTRA_DIST += \
	contrib/setup/install-deps.sh \
	contrib/setup/build.sh \
	contrib/setup/demo.sh \
	contrib/setup/check.sh \
	contrib/setup/style.sh \
	contrib/setup/requirements-torch2.txt \
	contrib/setup/requirements-nccl.txt \
	contrib/setup/requirements-s3.txt \
	contrib/plugstack.conf.d/dptrain.conf.in \
	contrib/dptrain.spec \
	contrib/examples/train_ddp.py \
	contrib/examples/fmnist_common.py \
	contrib/examples/fmnist_ddp.py \
	contrib/examples/fmnist_dptrain.py \
	contrib/examples/fmnist_lightning.py \
	contrib/examples/fabric_dptrain.py \
	contrib/examples/train_walltime.py \
	contrib/demo/elastic.sh \
	contrib/demo/report.py \
	.ci/run

# The bash completion of the dptrain tool (configure: --with-bash-completion-dir).
dist_bashcompletion_DATA = contrib/bash-completion/dptrain
# make distcheck installs under its own prefix, never into the system's
# completionsdir that pkg-config names.
AM_DISTCHECK_CONFIGURE_FLAGS = \
	--with-bash-completion-dir='$${dc_install_base}/share/bash-completion/completions'

# The plugstack.conf snippet names the plugin by the directory it is
# installed in, so it is made by make (spankdir may be "${libdir}/...",
# which only make expands) and installed where plugstack.conf includes it.
plugstackdir = $(sysconfdir)/slurm/plugstack.conf.d
plugstack_DATA = contrib/plugstack.conf.d/dptrain.conf
contrib/plugstack.conf.d/dptrain.conf: $(srcdir)/contrib/plugstack.conf.d/dptrain.conf.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib/plugstack.conf.d && \
	sed -e 's|@spankdir[@]|$(spankdir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' \
		$(srcdir)/contrib/plugstack.conf.d/dptrain.conf.in >$@.tmp && mv $@.tmp $@

# /etc/slurm/dptrain.conf of the packages (debian/, contrib/dptrain.spec):
# the example with every setting commented out, so that installing a
# package changes nothing until the admin chooses values. make install
# leaves the system's configuration alone and installs only the example.
noinst_DATA = contrib/dptrain.conf
contrib/dptrain.conf: $(srcdir)/contrib/dptrain.conf.example Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib && { \
	echo '# Every setting below is commented out: the built-in defaults apply.'; \
	echo '# Uncomment and edit what this site needs.'; \
	echo '#'; \
	sed -e 's/^\([a-z_][a-z_]*[ 	]*=\)/# \1/' $(srcdir)/contrib/dptrain.conf.example; \
	} >$@.tmp && mv $@.tmp $@
examplesdir = $(docdir)/examples
dist_examples_DATA = contrib/dptrain.conf.example
CLEANFILES += contrib/plugstack.conf.d/dptrain.conf contrib/dptrain.conf
