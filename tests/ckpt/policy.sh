#!/bin/bash
# Policies of one process (no coordinator): a save while one is in flight
# is refused under DPT_CKPT_BUSY_REFUSE; a committed step is never
# overwritten; retention keeps the newest K steps and the multiples of N,
# and the next saves write over the files of the steps it deleted.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"
[ -x "$ckpt_tool" ] || bail_out "$ckpt_tool is not built"

plan 14
root=$ckpt_dir/root
run=$root/run

out=$("$ckpt_worker" --solo --refuse save "file://$root" 1 2>&1)
echo "$out" | grep -q '^second save: DPT_EBUSY$'
ok $? "a second save before wait is refused with DPT_EBUSY" || diag "$out"
echo "$out" | grep -q '^committed 1 rank=0$'
ok $? "the first save still commits" || diag "$out"

before=$(md5sum "$run"/step-0000000001/* | sort)
out=$("$ckpt_worker" --solo save "file://$root" 1 2>&1)
echo "$out" | grep -q '^FAIL wait: DPT_EEXIST'
ok $? "saving a committed step again fails with DPT_EEXIST" || diag "$out"
echo "$out" | grep -q "step 1 is already committed in 'file://$run'"
ok $? "the message names the step and the run" || diag "$out"
is "$(md5sum "$run"/step-0000000001/* | sort)" "$before" "the committed step is untouched"

out=$("$ckpt_worker" --solo --keep-last 2 --keep-every 4 save "file://$root" 2 3 4 5 6 7 8 9 2>&1)
ls_out=$("$ckpt_tool" ckpt ls "file://$root" 2>&1)
is "$(echo "$ls_out" | awk 'NR > 1 { print $2 ":" $3 }' | xargs)" "4:committed 8:committed 9:committed" \
	"keep-last 2, keep-every 4: steps 4, 8 and 9 remain" || diag "$out" "$ls_out"
"$ckpt_tool" ckpt gc "file://$run" --keep-last 1 >/dev/null 2>&1
is "$("$ckpt_tool" ckpt ls "file://$root" 2>&1 | awk 'NR > 1 { print $2 }' | xargs)" "9" \
	"dptrain ckpt gc --keep-last 1 keeps only the newest step"

out=$("$ckpt_worker" --solo --reregister load "file://$root" 2>&1)
echo "$out" | grep -q '^loaded step=9 .* ok$' && ! echo "$out" | grep -q FAIL
ok $? "tensors cleared and registered again load step 9" || diag "$out"

# Retention recycles the shards of the steps it deletes, and the next
# save writes over them: one process per save, so that each retention is
# over (dpt_ckpt_destroy waits for it) before the next save starts.
run2=$ckpt_dir/recycle/run
shard=rank-00000-of-00001.safetensors
"$ckpt_worker" --solo --keep-last 1 save "file://$ckpt_dir/recycle" 20 >/dev/null 2>&1
inode20=$(stat -c %i "$run2/step-0000000020/$shard")
"$ckpt_worker" --solo --keep-last 1 save "file://$ckpt_dir/recycle" 21 >/dev/null 2>&1
out=$("$ckpt_worker" --solo --keep-last 1 save "file://$ckpt_dir/recycle" 22 2>&1)
is "$(stat -c %i "$run2/step-0000000022/$shard" 2>&1)" "$inode20" \
	"the shard of a step retention deleted is written over by a later save" || diag "$out" "$(ls -laR "$run2")"
out=$("$ckpt_tool" ckpt verify "file://$run2" 2>&1)
ok $? "the step written over a recycled shard verifies" || diag "$out"

# srun --dp-keep=N reaches the library as DPTRAIN_KEEP.
out=$(DPTRAIN_KEEP=2 "$ckpt_worker" --solo save "file://$root" 10 11 12 2>&1)
is "$("$ckpt_tool" ckpt ls "file://$root" 2>&1 | awk 'NR > 1 { print $2 }' | xargs)" "11 12" \
	"DPTRAIN_KEEP=2 keeps the two newest steps" || diag "$out"
out=$(DPTRAIN_KEEP=0 "$ckpt_worker" --solo save "file://$root" 13 2>&1)
grep -q "DPTRAIN_KEEP='0': expected the number of committed steps to keep, at least 1 (srun --dp-keep=N)" <<<"$out" &&
	[ -z "$(ls -d "$run"/step-0000000013 2>/dev/null)" ]
ok $? "DPTRAIN_KEEP=0 is refused with a message that names it; nothing is written" || diag "$out"

# '.' and '..' never name a run, and a root with a '..' component is
# refused by the storage: nothing is written outside the root's text.
out=$("$ckpt_worker" --solo --run .. save "file://$root" 30 2>&1)
grep -q "run name '..' names a directory, not a run: give the run a name (srun --dp-train=NAME, DPTRAIN_RUN)" <<<"$out" &&
	[ -z "$(ls -d "$root"/step-0000000030 "$ckpt_dir"/step-0000000030 2>/dev/null)" ]
ok $? "the library refuses the run name '..', saying what to do; nothing is written" || diag "$out"
out=$("$ckpt_worker" --solo save "file://$root/x/%2e%2e" 31 2>&1)
grep -q "invalid storage URI 'file://$root/x/%2e%2e/run': .*without '.' or '..' components" <<<"$out" &&
	[ -z "$(ls -d "$run"/step-0000000031 2>/dev/null)" ]
ok $? "a root with '..' (written %2e%2e) is refused by the storage; nothing is written" || diag "$out"
