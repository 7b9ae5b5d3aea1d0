#!/bin/bash
# Install, as root on Debian 12, everything dptrain needs to build, to run
# its tests on a real local Slurm cluster and S3 server, and to run its
# benchmarks. Idempotent: packages already present are left alone.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "install-deps: run as root (apt-get needs it)" >&2; exit 1; }

PACKAGES=(
	# build
	autoconf automake libtool pkg-config make gcc libc6-dev clang clang-format libclang-rt-14-dev
	# libraries
	libslurm-dev libzmq3-dev libcurl4-openssl-dev libssl-dev libjansson-dev libxxhash-dev
	# tests: a real Slurm cluster, cmocka, curl as an S3 client, PyTorch (CPU)
	slurmctld slurmd slurm-client munge libcmocka-dev curl iproute2 util-linux procps
	# tests/man/man.sh: man --warnings renders the pages through groff
	man-db groff-base
	python3 python3-torch python3-numpy
	# tests/python/venv.sh: pip install into a venv (Debian's python3 needs this)
	python3-venv
	# real training data for the PyTorch examples, tests and the demo; its plots
	dataset-fashion-mnist gnuplot-nox
	# benchmark peers
	openmpi-bin libopenmpi-dev iperf3 fio
	# packaging: the .deb packages and their test (tests/packaging/deb.sh)
	dpkg-dev debhelper dh-python fakeroot lintian
)

# s3rver (below) runs on Node.js: Debian's nodejs and npm unless the
# machine already has a node and an npm of its own.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Installing slurmctld, slurmd and munge must not start system services: the
# tests run their own daemons with their own configuration. A policy-rc.d
# that exits 101 tells invoke-rc.d to start nothing.
made_policy=0
trap '[ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PACKAGES[@]} packages present"
else
	echo "install-deps: installing ${missing[*]}"
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		made_policy=1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=600 update -qq
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi

# An S3 server that keeps its objects on disk across a restart, for the
# fault campaign's restart_s3 trials (tests/s3/up SERVER=s3rver): moto
# loses everything when it restarts. @20minutes/s3rver, the maintained
# fork of s3rver, because it verifies SigV4 signatures (s3rver 3.7.1
# accepts any); 4.0.4 is the last release that runs on Node.js 20 (5.x
# wants 24). Installed with npm into its own directory, where
# tests/s3/up looks for it (DPTRAIN_S3RVER_DIR to look elsewhere).
S3RVER_PKG=@20minutes/s3rver S3RVER_VERSION=4.0.4
S3RVER_DIR=${DPTRAIN_S3RVER_DIR:-/opt/dptrain-s3rver}
s3rver_install() {
	local have node_major
	have=$(node -p "require('$S3RVER_DIR/node_modules/$S3RVER_PKG/package.json').version" 2>/dev/null || true)
	node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
	if [ "$have" = "$S3RVER_VERSION" ]; then
		echo "install-deps: $S3RVER_PKG $have present in $S3RVER_DIR"
	elif [ "$node_major" -lt 20 ]; then
		# Not fatal: the restart_s3 trials then skip, saying why.
		echo "install-deps: not installing $S3RVER_PKG: it needs Node.js >= 20, this is $(node --version 2>/dev/null || echo none)" >&2
	else
		echo "install-deps: installing $S3RVER_PKG@$S3RVER_VERSION in $S3RVER_DIR"
		mkdir -p "$S3RVER_DIR"
		npm install --prefix "$S3RVER_DIR" --no-audit --no-fund --omit=dev --save-exact --loglevel=error \
			"$S3RVER_PKG@$S3RVER_VERSION"
	fi
}
# Python environments of Debian's python3, each installed from a
# requirements file of the repository in which every package is pinned, with
# one pip command: torch 2 and Lightning for the tests on torch 2, the demo
# and the benchmarks (the Debian packages' own tests stay on Debian's
# python3-torch); the S3 peer (moto_server) and the AWS CLI for the S3
# tests; NCCL's wheel where the CUDA toolkit has no NCCL (below). Each is
# rebuilt only when its requirements file changed (a copy of the file that
# installed it lies in the environment).
pyenv_install() { # DIR REQUIREMENTS
	local dir=$1 req=$top/contrib/setup/$2
	if cmp -s "$req" "$dir/dptrain-requirements.txt" && [ -x "$dir/bin/python" ]; then
		echo "install-deps: $dir is as $2 says"
		return
	fi
	echo "install-deps: installing $2 into $dir"
	rm -rf "$dir"
	/usr/bin/python3 -m venv "$dir"
	"$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req" ||
		{ echo "install-deps: pip install -r $req into $dir failed" >&2; exit 1; }
	cp "$req" "$dir/dptrain-requirements.txt"
}
top=$(cd "$(dirname "$0")/../.." && pwd)

# The GPU bundle (tests/gpu/bundle) is the --with-cuda --with-nccl build.
# The CUDA toolkit is no Debian package: it is looked for, not installed.
# Where it comes without NCCL, NVIDIA's NCCL wheel is the source of nccl.h
# and libnccl.so.2, laid out in DPTRAIN_NCCL as configure's --with-nccl=DIR
# wants: DIR/include and DIR/lib/libnccl.so (-lnccl needs that name, and the
# wheel has only libnccl.so.2). tests/gpu/bundle looks there.
nccl_install() {
	local cuda=/usr/local/cuda nccl=${DPTRAIN_NCCL:-/opt/dptrain-nccl} wheel
	if [ ! -f "$cuda/include/cuda_runtime_api.h" ]; then
		echo "install-deps: no CUDA toolkit in $cuda: the GPU bundle (tests/gpu/bundle) cannot be built here;" \
			"install NVIDIA's CUDA toolkit there to build it" >&2
		return
	elif [ -f "$cuda/include/nccl.h" ] && [ -e "$cuda/lib64/libnccl.so" ]; then
		echo "install-deps: NCCL present in $cuda"
		return
	fi
	pyenv_install "$nccl/venv" requirements-nccl.txt
	wheel=$(compgen -G "$nccl/venv/lib/python3*/site-packages/nvidia/nccl" | head -n 1) || true
	[ -n "$wheel" ] && [ -f "$wheel/include/nccl.h" ] && [ -f "$wheel/lib/libnccl.so.2" ] ||
		{ echo "install-deps: no include/nccl.h and lib/libnccl.so.2 in $nccl/venv's nvidia/nccl: remove $nccl and run again" >&2; exit 1; }
	wheel=${wheel#"$nccl/"}
	mkdir -p "$nccl/lib"
	ln -sfn "$wheel/include" "$nccl/include"
	ln -sfn "../$wheel/lib/libnccl.so.2" "$nccl/lib/libnccl.so.2"
	ln -sfn libnccl.so.2 "$nccl/lib/libnccl.so"
	echo "install-deps: NCCL of requirements-nccl.txt in $nccl (include/, lib/)"
}

# The four installs wait on the network and the disk as much as on a core:
# side by side, each in a process of its own that says its own failure.
pids=()
s3rver_install & pids+=($!)
pyenv_install "${DPTRAIN_TORCH2:-/opt/dptrain-torch2}" requirements-torch2.txt & pids+=($!)
pyenv_install "${DPTRAIN_S3_PY:-/opt/dptrain-s3}" requirements-s3.txt & pids+=($!)
nccl_install & pids+=($!)
failed=0
for pid in "${pids[@]}"; do
	wait "$pid" || failed=1
done
[ "$failed" = 0 ] || { echo "install-deps: an install failed (above)" >&2; exit 1; }
echo "install-deps: done"
