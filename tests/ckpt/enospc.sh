#!/bin/bash
# A full file system: on a small tmpfs that this test mounts, a save that
# does not fit fails on every rank with a clear error (naming the file and
# the cause), nothing is committed, and the previous step is intact and
# loads. A training loop (dpt_ckpt_step) survives a periodic save that
# fails for lack of space: rank 0 says so once, training goes on, and a
# later save commits once space is freed; the save at a stop that fails
# still fails the step. Needs root (mount).
. "$top_srcdir/tests/lib.sh"
require_root
require_prog mount umount
. "$top_srcdir/tests/ckpt/lib.sh"

mnt=$ckpt_dir/mnt
mkdir -p "$mnt"
mount -t tmpfs -o size=6m tmpfs "$mnt" 2>/dev/null || skip_all "cannot mount a tmpfs on $mnt"
# The processes first (a coordinator holds its events file there open),
# then the file system, then the state directory that holds its mount point.
trap 'ckpt_kill; umount "$mnt" 2>/dev/null; ckpt_cleanup; dpt_teardown' EXIT

plan 24
root=$mnt/root
run=$root/run

ckpt_job 2 "$out.s1" save "file://$root" 1
ok $? "2 ranks commit step 1 (about 60 KiB)" || diag "$(cat "$out".s1.[0-9]*)"

# --scale 200: about 9 MiB, more than what is left.
ckpt_job 2 "$out.s2" --scale 200 save "file://$root" 2
is $? 2 "both ranks fail to save step 2"
is "$(ckpt_grep "$out.s2" '^FAIL wait' | wc -l)" 2 "the error comes from the commit (dpt_ckpt_wait)"
grep -hq "rank-0000[01]-of-00002.safetensors.*[Nn]o space left" "$out".s2.[0-9]*
ok $? "the message names the shard and the cause" || diag "$(cat "$out".s2.[0-9]*)"
grep -q "vote [0-9]* of generation 1: [12] of 2 members failed (first: no space left on storage)" "$out.s2.coord"
ok $? "the coordinator counted the failed votes and names the cause" || diag "$(cat "$out.s2.coord")"
test ! -e "$run/step-0000000002/manifest.json"
ok $? "step 2 is not committed"
is "$(find "$mnt" -name '*dpt-tmp*' | wc -l)" 0 "no temporary file is left on the full file system"
run_ok "step 1 verifies" "$ckpt_tool" ckpt verify "file://$run"
ckpt_job 2 "$out.l" load "file://$root"
is "$(ckpt_grep "$out.l" '^loaded' | grep -c 'step=1 .* ok$')" 2 "step 1 loads, byte-exact"

# A training loop saving every 5 steps: a first job commits step 5.
loop=$mnt/loop
train_loop=$top_builddir/tests/ckpt/train_loop
[ -x "$train_loop" ] || bail_out "$train_loop is not built"
export DPTRAIN_CKPT_URI=file://$loop DPTRAIN_RUN=run DPTRAIN_CKPT_EVERY=5steps
ckpt_program=$train_loop ckpt_job 2 "$out.t1" --auto --steps 5 --step-ms 10
ok $? "a training loop commits step 5" || diag "$(cat "$out".t1.[0-9]*)"

# Then the file system is full: the resumed job's save of step 10 fails on
# both ranks, and training goes on. Space is freed once rank 0 has said
# so, and a later save commits.
fill() { dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null; sync; }
# Once rank 0 of the job OUT has said what became of a save (or SECONDS
# have passed), frees the space and waits for the job: ckpt_job_wait's
# status.
free_and_wait() { # OUT SECONDS
	wait_output "$1.0" "checkpoint of step" "$2"
	rm -f "$mnt/filler"
	ckpt_job_wait
}
fill
ckpt_program=$train_loop ckpt_job_start 2 "$out.t2" --auto --steps 40 --step-ms 150 --trace
free_and_wait "$out.t2" 30
ok $? "training survives the failed periodic save and finishes" || diag "$(cat "$out".t2.[0-9]*)"
summary=$(grep "checkpoint of step" "$out.t2.0")
grep -q "warning: checkpoint of step 10 failed on 2 of 2 ranks: cannot write .*No space left on device; the last committed step 5 is intact; training goes on and the next save is tried at the next interval" <<<"$summary"
ok $? "rank 0 warns: the step, the cause, the step intact, training goes on" || diag "$(cat "$out".t2.[0-9]*)"
is "$(cat "$out".t2.[0-9]* | grep -c "checkpoint of step")" 1 "the warning comes once, from rank 0"
is "$(cat "$out".t2.[0-9]* | grep -c "error: cannot write .*step-0000000010/rank-0000[01]-of-00002.safetensors.*No space left")" 2 \
	"each rank's own failure is logged once" || diag "$(cat "$out".t2.[0-9]*)"
is "$(ckpt_grep "$out.t2" '^step 40$' | wc -l)" 2 "both ranks trained on to step 40"
is "$(ckpt_grep "$out.t2" '^finished step=40 rank=[01] committed$' | wc -l)" 2 "and committed it"
ls_out=$("$ckpt_tool" ckpt ls "file://$loop" 2>&1)
is "$(find "$loop/run/step-0000000010" -type f 2>/dev/null | wc -l)" 0 "no file of the failed step 10 is left"
echo "$ls_out" | awk '$3 == "committed" { print $2 }' | grep -qx 40
ok $? "a later save committed (step 40 among the committed steps)" || diag "$ls_out"
run_ok "the newest step verifies" "$ckpt_tool" ckpt verify "file://$loop/run"

# The same with PyTorch: dptrain.torch's Checkpoint.step() goes on after
# a failed periodic save, and a later one commits.
py=/usr/bin/python3
if [ -n "${DPT_SANITIZED:-}" ]; then
	for i in 1 2 3; do skip "dptrain.torch after a failed save" "python3 is not built with the sanitizers (make check-sanitized)"; done
elif python_has $py torch; then
	fill
	DPTRAIN_RUN=torch PYTHONPATH=$top_srcdir/worker/python \
		DPTRAIN_LIBRARY=$top_builddir/worker/.libs/libdptrain.so \
		ckpt_program=$py ckpt_join_ms=180000 DPT_TIMEOUT=240 ckpt_job_start 2 "$out.py" "$top_srcdir/tests/ckpt/torch_loop.py" 30 0.15
	free_and_wait "$out.py" 240
	ok $? "dptrain.torch: training survives the failed periodic save" || diag "$(cat "$out".py.[0-9]*)"
	grep -q "warning: checkpoint of step 5 failed on 2 of 2 ranks: .*No space left on device; what was committed before is intact" "$out.py.0"
	ok $? "dptrain.torch: rank 0 warns once" || diag "$(cat "$out".py.[0-9]*)"
	is "$(ckpt_grep "$out.py" '^finished step=30 rank=[01] committed$' | wc -l)" 2 \
		"dptrain.torch: both ranks finish and commit step 30" || diag "$(cat "$out".py.[0-9]*)"
else
	for i in 1 2 3; do skip "dptrain.torch after a failed save" "$python_missing"; done
fi

# A stop (SIGUSR1, as at the walltime) while the file system is full: the
# save of the stop fails, and with it the step: the program fails.
fill
ckpt_program=$train_loop DPTRAIN_CKPT_EVERY=1000steps ckpt_job_start 2 "$out.t3" \
	--auto --steps 1000 --step-ms 100 --trace --stop-signals
for _ in $(seq 300); do
	grep -q "^step 45$" "$out.t3.0" "$out.t3.1" 2>/dev/null && break
	sleep 0.1
done
for p in "${ckpt_pids[@]}"; do
	kill -USR1 $(pgrep -P "$p") 2>/dev/null
done
ckpt_job_wait
is $? 2 "the stop's failed save fails both ranks"
is "$(ckpt_grep "$out.t3" '^FAIL dpt_ckpt_step' | sort -u)" "FAIL dpt_ckpt_step: no space left on storage" \
	"dpt_ckpt_step returns the save's error at the stop" || diag "$(cat "$out".t3.[0-9]*)"
rm -f "$mnt/filler"
