#!/bin/bash
# Damaged checkpoints: a flipped byte in a shard and a missing shard are
# found by `dptrain ckpt verify` (exit status 1, naming the shard and the
# chunk) and by a load, which says which shard is damaged and uses the
# previous committed step, byte-exact, on every rank. The step with the
# flipped byte is quarantined by that load: `ls` shows it as damaged, the
# run saves that step number again and commits it, and `gc` removes a
# quarantined step; the step with a missing shard (which may be an I/O
# problem) stays committed. A training loop whose newest step is damaged
# resumes from the one before and saves past it. Manifests refused for a
# bad shard name or a step that is not their directory's are named as
# such by verify.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"

plan 36

ckpt_job 4 "$out.save" --block 4096 save "file://$root" 1 2 3
ok $? "4 ranks save steps 1, 2 and 3" || diag "$(cat "$out".save.*)"
run_ok "dptrain ckpt verify passes on intact steps" "$ckpt_tool" ckpt verify "file://$run"

# Flips one byte in the data section of rank 1's shard of step 3.
shard3=$run/step-0000000003/rank-00001-of-00004.safetensors
flip_byte() {
	local hdr pos byte isnt_byte
	hdr=$(od -An -tu8 -N8 "$shard3" | tr -d ' ')
	pos=$((8 + hdr + 1000))
	byte=$(od -An -tu1 -j "$pos" -N1 "$shard3" | tr -d ' ')
	printf "$(printf '\\%03o' $((byte ^ 0xff)))" |
		dd of="$shard3" bs=1 seek="$pos" conv=notrunc status=none
	isnt_byte=$(od -An -tu1 -j "$pos" -N1 "$shard3" | tr -d ' ')
	ok $([ "$isnt_byte" != "$byte" ]; echo $?) "byte $pos of $shard3 flipped ($byte -> $isnt_byte)"
}
# "STEP:STATE ..." of `dptrain ckpt ls` on ROOT (default: $root).
ls_states() { # [ROOT]
	"$ckpt_tool" ckpt ls "file://${1:-$root}" 2>&1 | awk 'NR > 1 { print $2 ":" $3 }' | xargs
}
# N ranks load the newest step of $root into OUT.*: each falls back to
# STEP (saved by 4 ranks), byte-exact, and a rank's output says why,
# matching WHY. LOADS and NAMES: the descriptions of the load's status and
# of WHY.
load_falls_back() { # OUT N STEP WHY LOADS NAMES
	ckpt_job "$2" "$1" --block 4096 load "file://$root"
	ok $? "$5" || diag "$(cat "$1".*)"
	is "$(ckpt_grep "$1" '^loaded' | grep -c "step=$3 written_by=4 .* ok\$")" "$2" \
		"every rank fell back to step $3, byte-exact"
	grep -hq "$4" "$1".[0-9]*
	ok $? "$6" || diag "$(cat "$1".*)"
}
flip_byte

verify_out=$("$ckpt_tool" ckpt verify "file://$run" 2>&1)
vrc=$?
is "$vrc" 1 "dptrain ckpt verify exits 1 on a damaged step"
echo "$verify_out" | grep -q "step-0000000003/rank-00001-of-00004.safetensors' chunk '.*' block [0-9]* .*checksum mismatch"
ok $? "verify names the shard, the chunk and the block" || diag "$verify_out"
echo "$verify_out" | grep -q "^step 2: ok"
ok $? "verify finds step 2 intact" || diag "$verify_out"

load_falls_back "$out.load3" 3 2 \
	"step 3: shard '.*/step-0000000003/rank-00001-of-00004.safetensors' chunk .*checksum mismatch" \
	"3 ranks load despite the damage" "the load names the damaged shard"

# The damaged step stops counting as committed: rank 0 quarantines it once
# the fall-back has loaded step 2, and the run can save step 3 again.
is "$(ls_states)" "1:committed 2:committed 3:damaged" \
	"ls shows the step found damaged as damaged, the others committed"
is "$(cat "$out".load3.[0-9]* | grep -c "step 3 of '.*' is damaged: it is no longer committed")" 1 \
	"one rank quarantines it, once, and says so" || diag "$(cat "$out".load3.*)"
is "$(cd "$run/step-0000000003" && echo *)" "manifest.damaged.json" \
	"its manifest is kept under the quarantine name, its shards are gone"
ckpt_job 4 "$out.resave" --block 4096 save "file://$root" 3
ok $? "a save of step 3 after the fall-back commits" || diag "$(cat "$out".resave.*)"
is "$(ckpt_grep "$out.resave" '^committed 3 ' | wc -l)" 4 "every rank commits step 3"
is "$(ls_states)" "1:committed 2:committed 3:committed" "ls shows step 3 committed again"
run_ok "the step saved again verifies" "$ckpt_tool" ckpt verify "file://$run" --step 3

# Damaged again: this time gc removes the quarantined step.
flip_byte
ckpt_job 2 "$out.load2q" --block 4096 load "file://$root"
is "$(ckpt_grep "$out.load2q" '^loaded' | grep -c 'step=2 .* ok$')" 2 \
	"the load falls back to step 2 again" || diag "$(cat "$out".load2q.*)"
is "$(ls_states)" "1:committed 2:committed 3:damaged" "step 3 is damaged again"
gc_out=$("$ckpt_tool" ckpt gc "file://$run" 2>"$out.gc.err")
is "$gc_out" "1 step(s) deleted" "gc deletes the damaged step" || diag "$(cat "$out.gc.err")"
is "$(ls_states)" "1:committed 2:committed" "after gc, only the good steps remain"
[ ! -e "$run/step-0000000003" ]
ok $? "nothing of step 3 is left"

# Now step 2 loses a shard too: the load goes back to step 1.
rm "$run/step-0000000002/rank-00002-of-00004.safetensors"
load_falls_back "$out.load4" 4 1 \
	"step 2: shard '.*/step-0000000002/rank-00002-of-00004.safetensors' is missing" \
	"4 ranks load with step 3 gone and step 2 incomplete" "the load names the missing shard"
is "$(ls_states)" "1:committed 2:committed" \
	"a missing shard does not quarantine the step: it may come back"

# Asking for step 3 explicitly: the step below the missing one is used.
ckpt_job 2 "$out.load2" --block 4096 load "file://$root" 3
is "$(ckpt_grep "$out.load2" '^loaded' | grep -c 'step=1 .* ok$')" 2 \
	"a load of step 3 falls back to step 1 as well"
"$ckpt_tool" ckpt verify "file://$run" --step 1 >/dev/null 2>&1
ok $? "step 1 verifies"

# What users hit (issue 14): a training loop saving every 4 steps, step 8
# damaged; the next run resumes from step 4, trains on, and its save of
# step 8 commits like any other, in the same process as the load.
train_loop=$top_builddir/tests/ckpt/train_loop
tl_root=$ckpt_dir/tl
tl_job() { # OUT ARGS...
	DPTRAIN_CKPT_URI=file://$tl_root DPTRAIN_RUN=run ckpt_worker=$train_loop ckpt_job 2 "$@"
}
tl_job "$out.tl1" --steps 8 --every 4 --step-ms 0
ok $? "a training loop of 2 ranks saves steps 4 and 8" || diag "$(cat "$out".tl1.[0-9]*)"
shard8=$tl_root/run/step-0000000008/rank-00001-of-00002.safetensors
hdr=$(od -An -tu8 -N8 "$shard8" | tr -d ' ')
printf '\377' | dd of="$shard8" bs=1 seek=$((8 + hdr + 100)) conv=notrunc status=none
tl_job "$out.tl2" --steps 12 --every 4 --step-ms 0
ok $? "the next run falls back to step 4 and trains past step 8" || diag "$(cat "$out".tl2.[0-9]*)"
is "$(ckpt_grep "$out.tl2" '^(resumed|finished)' | cut -d' ' -f1,2 | uniq -c | xargs)" \
	"2 finished step=12 2 resumed step=4" "both ranks resumed from step 4 and committed step 12" ||
	diag "$(cat "$out".tl2.[0-9]*)"
is "$(ls_states "$tl_root")" "4:committed 8:committed 12:committed" \
	"steps 4, 8 (saved again) and 12 are committed"
run_ok "every step of the run verifies" "$ckpt_tool" ckpt verify "file://$tl_root/run"

# Manifests refused before any chunk is read: verify says why on stdout,
# not "checksum mismatch". Step 9 holds step 1's manifest; step 10 a
# manifest whose shard name leaves the step's directory.
mkdir "$run/step-0000000009" "$run/step-0000000010"
cp "$run/step-0000000001/manifest.json" "$run/step-0000000009/"
sed -e 's/"step":1,/"step":10,/' \
	-e 's/"name":"rank-00000-of-00004/"name":"..\/rank-00000-of-00004/' \
	"$run/step-0000000001/manifest.json" >"$run/step-0000000010/manifest.json"
v9=$("$ckpt_tool" ckpt verify "file://$run" --step 9 2>/dev/null)
is "$?:$(head -1 <<<"$v9")" "1:step 9: DAMAGED: manifest is unusable: it says step 1" \
	"verify names a manifest that disagrees with its directory"
v10=$("$ckpt_tool" ckpt verify "file://$run" --step 10 2>/dev/null)
is "$?:$(head -1 <<<"$v10")" \
	"1:step 10: DAMAGED: manifest is unusable: file 0 has a bad name '../rank-00000-of-00004.safetensors'" \
	"verify names a manifest with a bad shard name"
vall=$("$ckpt_tool" ckpt verify "file://$run" 2>/dev/null)
is "$(echo "$vall" | grep -c 'checksum mismatch')" 0 \
	"neither is reported as a checksum mismatch" || diag "$vall"
