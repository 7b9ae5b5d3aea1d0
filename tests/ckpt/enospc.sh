#!/bin/bash
# A full file system: on a small tmpfs that this test mounts, a save that
# does not fit fails on every rank with a clear error (naming the file and
# the cause), nothing is committed, and the previous step is intact and
# loads. Needs root (mount).
. "$top_srcdir/tests/lib.sh"
require_root
require_prog mount umount
. "$top_srcdir/tests/ckpt/lib.sh"
[ -x "$ckpt_tool" ] || bail_out "$ckpt_tool is not built"

mnt=$ckpt_dir/mnt
mkdir -p "$mnt"
mount -t tmpfs -o size=6m tmpfs "$mnt" 2>/dev/null || skip_all "cannot mount a tmpfs on $mnt"
trap 'umount "$mnt" 2>/dev/null; ckpt_cleanup; dpt_teardown' EXIT

plan 9
root=$mnt/root
run=$root/run
out=$ckpt_dir/job

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
