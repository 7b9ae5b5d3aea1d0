#!/bin/bash
# kill -9 of a writer while its multipart upload to S3 is in flight (the
# real S3 test server, moto): the other ranks' wait fails, no manifest is
# written, the newest committed step is the one before and verifies, a
# fresh job loads it byte-exact, and `dptrain ckpt gc --age 0` aborts the
# multipart upload that the dead writer left open.
#
# The writer is caught mid-upload for certain, not by timing: its requests
# go through the fault-injecting proxy (tests/storage/s3_faults.py), which
# holds the first part of rank 2's shard (read, never forwarded, never
# answered) and logs it; the worker is killed once the log says so, while
# it waits for that part's answer.
. "$top_srcdir/tests/lib.sh"
require_prog curl
[ -x /usr/bin/python3 ] || skip_all "/usr/bin/python3 not found (it runs the proxy)"
s3_up
. "$top_srcdir/tests/ckpt/lib.sh"
[ -x "$ckpt_tool" ] || bail_out "$ckpt_tool is not built"

plan 14
root=s3://$DPTRAIN_S3_BUCKET/runs
run=$root/run
scale=1000 # about 12 MiB per rank: multipart uploads of two parts (8 MiB, the rest)
step2=runs/run/step-0000000002
victim_key=$step2/rank-00002-of-00004.safetensors

s3curl() { # ARGS...: a request signed with SigV4, straight to the server
	timed curl -sS --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
# The keys of the bucket's incomplete multipart uploads (ListMultipartUploads;
# curl 7.88 signs "?uploads" only when written "?uploads="). It runs in
# command substitutions: a failure is said on stderr (the test's log) and
# lists nothing, which fails the check that uses it.
uploads() {
	local xml
	xml=$(s3curl -f "$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET?uploads=") ||
		{ diag "ListMultipartUploads failed" >&2; return 1; }
	echo "$xml" | grep -q '<ListMultipartUploadsResult' ||
		{ diag "not a ListMultipartUploads answer: $xml" >&2; return 1; }
	echo "$xml" | tr -d '\n' | grep -o '<Upload>.*</Upload>' | sed 's|</Upload>|&\n|g' |
		sed -n 's|.*<Key>\([^<]*\)</Key>.*|\1|p'
}
status_of() { # KEY: the HTTP status of a HEAD of KEY
	s3curl -I -o /dev/null -w '%{http_code}' "$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET/$1"
}

ckpt_job 4 "$out.s1" --scale $scale save "$root" 1
ok $? "4 ranks commit step 1 to $root" || diag "$(cat "$out".s1.[0-9]*)"

# Step 2, every rank through the proxy; rank 2's first part is held.
s3_proxy_up "$ckpt_dir/faults" "PUT:$victim_key?partNumber=:hold:1"
DPTRAIN_S3_ENDPOINT=$s3_proxy ckpt_job_start 4 "$out.s2" --scale $scale save "$root" 2
held=
for _ in $(seq 1500); do
	held=$(grep "^hold PUT .*$victim_key" "$ckpt_dir/faults") && break
	kill -0 "${ckpt_pids[2]}" 2>/dev/null || break
	sleep 0.02
done
[ -n "$held" ] || bail_out "rank 2's part never reached the proxy: $(cat "$out".s2.[0-9]*)"
diag "held: $held"
is "$(uploads | grep -c "^$victim_key\$")" 1 \
	"the server has rank 2's multipart upload open while its part is in flight"
# The worker runs under timeout(1): kill the worker itself, its child.
kill -9 "$(pgrep -P "${ckpt_pids[2]}")"
ckpt_job_wait
is $? 4 "every worker of the broken job fails (the victim by its signal)"
is "$(ckpt_grep "$out.s2" '^FAIL wait' | wc -l)" 3 "the three others report that the commit failed"
s3_proxy_down

is "$(status_of "$step2/manifest.json")" 404 "step 2 has no manifest"
is "$(status_of "$victim_key")" 404 "the killed writer's shard was never completed"
is "$(uploads | grep -c "^$victim_key\$")" 1 "its multipart upload is left open on the server"
ls_out=$("$ckpt_tool" ckpt ls "$root" 2>&1)
is "$(echo "$ls_out" | awk '$3 == "committed" { print $2 }' | xargs)" 1 \
	"the newest committed step is still 1" || diag "$ls_out"
run_ok "step 1 verifies" "$ckpt_tool" ckpt verify "$run"

ckpt_job 3 "$out.l" --scale $scale load "$root"
is "$(ckpt_grep "$out.l" '^loaded' | grep -c 'step=1 written_by=4 .* ok$')" 3 \
	"a fresh job of 3 ranks resumes from step 1, byte-exact" || diag "$(cat "$out".l.[0-9]*)"

# At least the coordinator's timeout has passed since the upload started:
# it is older than --age 0 (whole seconds) by now. (moto 5.2.1 reports
# every upload as initiated on 2010-11-10, so against it any --age
# collects it: the ages themselves are not what this test shows.)
gc_out=$("$ckpt_tool" ckpt gc "$run" --age 0 2>&1)
ok $? "dptrain ckpt gc --age 0 succeeds" || diag "$gc_out"
left=$(uploads) && [ -z "$left" ]
ok $? "no multipart upload is left on the server" || diag "left: $left"
ls_out=$("$ckpt_tool" ckpt ls "$root" 2>&1)
is "$(echo "$ls_out" | awk '$3 == "committed" { print $2 }' | xargs)" 1 \
	"step 1 is still committed after the gc" || diag "$ls_out"
run_ok "step 1 still verifies after the gc" "$ckpt_tool" ckpt verify "$run"
