#!/bin/bash
# dptrain.torch's step() follows the library's rule for a failed save
# (dpt_ckpt_step_error, include/dptrain/ckpt.h), which Python no longer
# copies: a periodic save whose snapshot fails (no address space left)
# stays pending as failed and training goes on, the next step gives it up
# and saves; the same failure at a stop raises; an error with no save
# pending is the step's error. Without a cluster: a coordinator and one
# Python rank on loopback (tests/ckpt/lib.sh).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python torch
require_binding
. "$top_srcdir/tests/ckpt/lib.sh"
export DPTRAIN_CKPT_URI=file://$ckpt_dir/root DPTRAIN_RUN=step-error \
	DPTRAIN_CKPT_EVERY=1steps
plan 7

ckpt_python_job 1 "$ckpt_dir/job" "$top_srcdir/tests/python/step_error.py"
ok $? "the rank exits 0" || diag "$(cat "$ckpt_dir/job".0)"
out=$(cat "$ckpt_dir/job".0)
grep -q "checkpoint of step 1 failed" <<<"$out"
ok $? "rank 0 says that the save of step 1 was given up" || diag "$out"
for check in pending rule given-up not-pending stop; do
	grep -q "^ok $check\$" <<<"$out"
	ok $? "$check" || diag "$(grep -- "$check" <<<"$out")"
done
