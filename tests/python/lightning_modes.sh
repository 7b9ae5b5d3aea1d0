#!/bin/bash
# dptrain.lightning in the Trainer's other modes, under srun --dp-train on
# the real test cluster with torch 2 and Lightning 2.6
# (tests/python/lightning_fit.py): gradient accumulation, manual
# optimization with two optimizers, bf16-mixed on the CPU and a script of
# pytorch_lightning (not lightning.pytorch), each stopped
# and resumed at the same world size and ending bitwise equal to an
# uninterrupted run, both ranks' replicas equal; a single-device strategy
# refused; Fabric with the environment and dptrain.torch; an
# exception in training_step (a clean exit, no step
# claimed, no process left); Trainer counts that contradict the job; the
# environment outside srun --dp-train.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
torch2_lightning
require_binding
fit=$top_srcdir/tests/python/lightning_fit.py
dptrain=$top_builddir/dptrain

cluster_up NODES=1 CPUS=4 GPUS=0
dpt_scratch_dir dir lightning-modes
plan 23

run() { # RUN TOTAL ARGS...: 2 ranks fit to TOTAL steps; output in $out
	local name=$1 total=$2
	shift 2
	out=$(DPT_TIMEOUT=240 srun_t -n 2 --dp-train="$name" --dp-ckpt="file://$dir/ckpt" \
		"$py" "$fit" "$total" "$@" 2>&1)
}
# The ranks' counts and final parameters, one line each (DDP's replicas
# agree, so one line when all is well).
sha() { grep -o 'batches=[0-9]* params_sha256=[0-9a-f]*' <<<"$out" | sort -u; }
ranks_agree() { # both ranks printed, the same
	[ "$(grep -c 'params_sha256=' <<<"$out")" = 2 ] && [ "$(sha | wc -l)" = 1 ]
}

# resumes MODE ARGS...: MODE to 20 in one run, and to 10 then 20 in two:
# the same final bits and the same count of a stateful callback, the
# second run starting at step 10.
resumes() {
	local mode=$1 ref
	shift
	run "$mode-ref" 20 "$@" && ranks_agree
	ok $? "$mode: 2 ranks fit to step 20, ending with the same parameters" || diag "$out"
	ref=$(sha)
	run "$mode" 10 "$@" && run "$mode" 20 "$@"
	grep -q "^start=10 end=20 stopped=False global_step=$want_gs .* handlers=kept " <<<"$out"
	ok $? "$mode: stopped at step 10, resumed there, trainer.global_step=$want_gs at step 20, the signal handlers after fit() those before it" ||
		diag "$out"
	is "$(sha)" "${ref:-none}" "$mode: the resumed fit ends bitwise equal to the uninterrupted one, a callback's state restored"
}
want_gs=20
resumes accumulate --accumulate 2
want_gs=40 # Lightning counts every optimizer's step under manual optimization
resumes manual --manual
want_gs=20
resumes bf16 cpu bf16-mixed
resumes pytorch_lightning --pl

# Lightning's strategy "auto" with one CPU a task is a single-device
# strategy: each task would train alone, and the callback says so.
run alone 5 --strategy auto
[ $? != 0 ] && grep -q "the Trainer's SingleDeviceStrategy runs 1 process, but srun --dp-train started 2 tasks: each would train alone.*strategy=.ddp." <<<"$out"
ok $? "strategy=auto (one device a task) under srun -n 2 is refused, naming strategy=ddp" ||
	diag "$out"

# Fabric (contrib/examples/fabric_dptrain.py): the environment and
# dptrain.torch, stopped at 10 and resumed, against one run to 20.
fabric() { # RUN STEPS
	out=$(DPT_TIMEOUT=240 srun_t -n 2 --dp-train="$1" --dp-ckpt="file://$dir/ckpt" \
		"$py" "$top_srcdir/contrib/examples/fabric_dptrain.py" --steps "$2" 2>&1)
}
fabric fabric-ref 20
ok $? "Fabric with DptrainEnvironment on 2 ranks trains to step 20" || diag "$out"
ref=$(grep -o 'params_sha256=.*' <<<"$out")
fabric fabric 10 && fabric fabric 20
grep -q "fabric: done at step 20 (from 10) on 2 ranks $ref" <<<"$out"
ok $? "Fabric: stopped at 10, resumed there, ends bitwise equal to the run to 20" || diag "$out"

# accumulate_grad_batches that does not divide the epoch (30 batches).
run badacc 20 --accumulate 4
[ $? != 0 ] && grep -q 'accumulate_grad_batches=4 does not divide the epoch.s 30 batches' <<<"$out"
ok $? "accumulate_grad_batches=4 with 30 batches an epoch is refused, saying why" || diag "$out"

# An exception at step 7 on every rank, after a save at step 5.
out=$(DPT_TIMEOUT=240 srun_t -n 2 --dp-train=boom --dp-ckpt="file://$dir/ckpt" --dp-ckpt-every=5steps \
	"$py" "$fit" 20 --raise-at 7 2>&1)
rc=$?
[ $rc != 0 ] && grep -q 'RuntimeError: lightning_fit: failing at step 7 as asked' <<<"$out"
ok $? "an exception in training_step at step 7 fails the step (exit $rc) with its traceback" ||
	diag "$out"
steps=$("$dptrain" ckpt ls "file://$dir/ckpt/boom" 2>&1 | awk '$2 ~ /^[0-9]+$/ && $3 == "committed" { print $2 }' | xargs)
is "$steps" "5" "the run's only committed step is 5, saved before the exception"
! grep -q -i 'committed step [6-9]' <<<"$out"
ok $? "no later step is claimed committed" || diag "$out"
! pgrep -f "$fit 20 --raise-at" >/dev/null
ok $? "no process of the failed step is left" || diag "$(pgrep -a -f "$fit")"

# Trainer counts that contradict the job, and the environment outside it.
run counts 5 --devices 3
[ $? != 0 ] && grep -q 'Trainer(devices=3, num_nodes=1) contradicts the job step: srun --dp-train started 2 tasks on this node and 1 node' <<<"$out"
ok $? "Trainer(devices=3) under srun -n 2 fails naming both counts" || diag "$out"
run counts 5 --devices 2 --num-nodes 1
ok $? "Trainer(devices=2, num_nodes=1) matching the job runs" || diag "$out"
out=$(env -u DPTRAIN_COORDINATOR "$py" -c '
from dptrain.lightning import DptrainEnvironment
print(DptrainEnvironment.detect())
DptrainEnvironment()' 2>&1)
[[ "$out" == False*"RuntimeError: DptrainEnvironment: not in a task of srun --dp-train ("*"unset)"* ]]
ok $? "outside srun --dp-train: detect() is False, and the plugin says what is unset" || diag "$out"
