#!/bin/bash
# Damaged checkpoints: a flipped byte in a shard and a missing shard are
# found by `dptrain ckpt verify` (exit status 1, naming the shard and the
# chunk) and by a load, which says which shard is damaged and uses the
# previous committed step, byte-exact, on every rank.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"
[ -x "$ckpt_tool" ] || bail_out "$ckpt_tool is not built"

plan 14
root=$ckpt_dir/root
run=$root/run
out=$ckpt_dir/job

ckpt_job 4 "$out.save" --block 4096 save "file://$root" 1 2 3
ok $? "4 ranks save steps 1, 2 and 3" || diag "$(cat "$out".save.*)"
run_ok "dptrain ckpt verify passes on intact steps" "$ckpt_tool" ckpt verify "file://$run"

# Flip one byte in the data section of rank 1's shard of step 3.
shard3=$run/step-0000000003/rank-00001-of-00004.safetensors
hdr=$(od -An -tu8 -N8 "$shard3" | tr -d ' ')
pos=$((8 + hdr + 1000))
byte=$(od -An -tu1 -j "$pos" -N1 "$shard3" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 0xff)))" |
	dd of="$shard3" bs=1 seek="$pos" conv=notrunc status=none
isnt_byte=$(od -An -tu1 -j "$pos" -N1 "$shard3" | tr -d ' ')
ok $([ "$isnt_byte" != "$byte" ]; echo $?) "byte $pos of $shard3 flipped ($byte -> $isnt_byte)"

verify_out=$("$ckpt_tool" ckpt verify "file://$run" 2>&1)
vrc=$?
is "$vrc" 1 "dptrain ckpt verify exits 1 on a damaged step"
echo "$verify_out" | grep -q "step-0000000003/rank-00001-of-00004.safetensors' chunk '.*' block [0-9]* .*checksum mismatch"
ok $? "verify names the shard, the chunk and the block" || diag "$verify_out"
echo "$verify_out" | grep -q "^step 2: ok"
ok $? "verify finds step 2 intact" || diag "$verify_out"

ckpt_job 3 "$out.load3" --block 4096 load "file://$root"
ok $? "3 ranks load despite the damage" || diag "$(cat "$out".load3.*)"
is "$(ckpt_grep "$out.load3" '^loaded' | grep -c 'step=2 written_by=4 .* ok$')" 3 \
	"every rank fell back to step 2, byte-exact"
grep -hq "step 3: shard '.*/step-0000000003/rank-00001-of-00004.safetensors' chunk .*checksum mismatch" "$out".load3.[0-9]*
ok $? "the load names the damaged shard" || diag "$(cat "$out".load3.*)"

# Now step 2 loses a shard too: the load goes back to step 1.
rm "$run/step-0000000002/rank-00002-of-00004.safetensors"
ckpt_job 4 "$out.load4" --block 4096 load "file://$root"
ok $? "4 ranks load with step 3 damaged and step 2 incomplete" || diag "$(cat "$out".load4.*)"
is "$(ckpt_grep "$out.load4" '^loaded' | grep -c 'step=1 written_by=4 .* ok$')" 4 \
	"every rank fell back to step 1, byte-exact"
grep -hq "step 2: shard '.*/step-0000000002/rank-00002-of-00004.safetensors' is missing" "$out".load4.[0-9]*
ok $? "the load names the missing shard" || diag "$(cat "$out".load4.*)"

# Asking for step 3 explicitly: the damage is reported, the step below is used.
ckpt_job 2 "$out.load2" --block 4096 load "file://$root" 3
is "$(ckpt_grep "$out.load2" '^loaded' | grep -c 'step=1 .* ok$')" 2 \
	"a load of step 3 falls back to step 1 as well"
"$ckpt_tool" ckpt verify "file://$run" --step 1 >/dev/null 2>&1
ok $? "step 1 verifies"
