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

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PACKAGES[@]} packages present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
# Installing slurmctld, slurmd and munge must not start system services: the
# tests run their own daemons with their own configuration. A policy-rc.d
# that exits 101 tells invoke-rc.d to start nothing.
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	made_policy=1
fi
trap '[ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
