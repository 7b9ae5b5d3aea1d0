#!/bin/bash
# What the built plugin (spank/.libs/dptrain.so) holds, as srun and
# slurmstepd load it: it exports only Slurm's entry points and the plugin's
# identification (spank/dptrain.lds), and none of its code calls
# dpt__assert_failed, which aborts: the plugin links common/ built with
# NDEBUG (common/libdptcommon_spank.la; common/assertion.h).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_prog nm objdump
so=$top_builddir/spank/.libs/dptrain.so
[ -f "$so" ] || bail_out "$so is not built"
plan 2

exported=$(nm -D --defined-only "$so" | awk '{ print $3 }' | grep -v -E '^(slurm_spank_[a-z_]+|plugin_(name|type|version)|spank_plugin_version)$')
is "$exported" "" "the plugin exports only slurm_spank_* and plugin_* symbols"
calls=$(objdump -d --no-show-raw-insn "$so" | grep -c 'call.*<dpt__assert_failed')
is "$calls" 0 "no code of the plugin calls dpt__assert_failed (an abort inside srun or slurmstepd)"
