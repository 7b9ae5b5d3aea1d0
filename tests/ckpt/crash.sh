#!/bin/bash
# kill -9 of a writer in the middle of a save: the other ranks' wait fails,
# nothing is committed, the newest committed step is the one before and
# verifies; a later job loads it and its next commit collects what the
# dead save left behind.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/ckpt/lib.sh"

plan 9
scale=4000 # about 30 MiB per rank: the shards take a while to write

ckpt_job 4 "$out.s1" --scale $scale save "file://$root" 1
ok $? "4 ranks commit step 1" || diag "$(cat "$out".s1.*)"

# Rank 2 saves step 2 and is killed while its shard is being written; the
# others wait for the commit.
ckpt_job_start 4 "$out.s2" --scale $scale --hang-rank 2 save "file://$root" 2
victim=
for _ in $(seq 200); do
	for i in 0 1 2 3; do
		if grep -q '^saving 2 rank=2' "$out.s2.$i" 2>/dev/null; then
			victim=${ckpt_pids[$i]}
			break 2
		fi
	done
	sleep 0.02
done
[ -n "$victim" ] || bail_out "rank 2 never started saving: $(cat "$out".s2.*)"
# The worker runs under timeout(1): kill the worker itself, its child.
kill -9 "$(pgrep -P "$victim")"
left=$(find "$run/step-0000000002" -name '*dpt-tmp*' 2>/dev/null | wc -l)
diag "temporary files of step 2 when the writer died: $left"
ckpt_job_wait
is $? 4 "every worker of the broken job fails (the victim by its signal)"
is "$(ckpt_grep "$out.s2" '^FAIL wait' | wc -l)" 3 "the three others report that the commit failed"

ls_out=$("$ckpt_tool" ckpt ls "file://$root" 2>&1)
is "$(echo "$ls_out" | awk '$3 == "committed" { print $2 }' | tail -n 1)" 1 \
	"the newest committed step is still 1" || diag "$ls_out"
test ! -e "$run/step-0000000002/manifest.json"
ok $? "step 2 has no manifest"
run_ok "step 1 verifies" "$ckpt_tool" ckpt verify "file://$run"

ckpt_job 3 "$out.l" --scale $scale load "file://$root"
is "$(ckpt_grep "$out.l" '^loaded' | grep -c 'step=1 written_by=4 .* ok$')" 3 \
	"3 ranks resume from step 1, byte-exact"

ckpt_job 3 "$out.s3" --scale $scale save "file://$root" 3
ok $? "3 ranks commit step 3" || diag "$(cat "$out".s3.*)"
ls_out=$("$ckpt_tool" ckpt ls "file://$root" 2>&1)
is "$(echo "$ls_out" | awk 'NR > 1 { print $2 ":" $3 }' | xargs)" "1:committed 3:committed" \
	"the leftovers of step 2 are collected after the next commit"
