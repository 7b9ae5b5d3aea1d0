#!/bin/bash
# Configure (warnings are errors) and build the tree in place. Used by the
# README's two commands; idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
[ -f Makefile ] && grep -q -- '--enable-werror' config.status 2>/dev/null ||
	./configure --enable-werror
make -j"$(nproc)"
