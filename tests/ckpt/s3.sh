#!/bin/bash
# Checkpoints on the real S3 test server (moto, SigV4 enforced): 4 ranks
# save (shards above the 5 MiB multipart minimum), 3 ranks load byte-exact,
# `dptrain ckpt` lists and verifies, a shard fetched with curl is a
# safetensors file, a shard damaged through a plain PUT is found by verify
# and the load falls back to the previous step, quarantining the damaged
# one: `ls` shows it as damaged, gc removes it, and it can be saved again;
# a step whose reads fail with server errors is not quarantined; with a
# wrong secret, a save fails and a load says the credentials were refused
# (what S3 answered and what to fix), not that no step is usable.
. "$top_srcdir/tests/lib.sh"
require_prog curl
s3_up
. "$top_srcdir/tests/ckpt/lib.sh"
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || skip_all "python3 not found"

plan 26
root=s3://$DPTRAIN_S3_BUCKET/runs
run=$root/run
scale=1000 # about 12 MiB per rank: multipart uploads of 8 MiB parts

ckpt_job 4 "$out.save" --scale $scale save "$root" 1 2
ok $? "4 ranks save steps 1 and 2 to $root" || diag "$(cat "$out".save.[0-9]*)"
ckpt_job 3 "$out.load" --scale $scale load "$root"
ok $? "3 ranks load from S3" || diag "$(cat "$out".load.[0-9]*)"
is "$(ckpt_grep "$out.load" '^loaded' | grep -c 'step=2 written_by=4 .* ok$')" 3 \
	"every rank got step 2, byte-exact, with ranged reads of what it needs"

ls_out=$("$ckpt_tool" ckpt ls "$root" 2>&1)
is "$(echo "$ls_out" | awk 'NR > 1 { print $1 ":" $2 ":" $3 }' | xargs)" "run:1:committed run:2:committed" \
	"dptrain ckpt ls lists the committed steps" || diag "$ls_out"
run_ok "dptrain ckpt verify passes" "$ckpt_tool" ckpt verify "$run"

# The run's events (doc/checkpoint-format.md, "Events"): on S3 each
# coordinator owns one object under RUN/events/, rewritten whole; dptrain
# status reads them.
s3ls() { timed curl -sS -f --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	"$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET?list-type=2&prefix=$1"; }
objs=$(s3ls runs/run/events/ | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g')
[ "$(wc -l <<<"$objs")" -ge 2 ] && ! grep -qv '^runs/run/events/[0-9]\{13\}-[0-9]*-[0-9]*\.jsonl$' <<<"$objs"
ok $? "each job's coordinator wrote its events as an object of its own under run/events/" || diag "$objs"
st=$("$ckpt_tool" status --json "$run" 2>&1)
"$python" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"]=="events" and d["committed"]==2, d' "$st"
ok $? "dptrain status of the S3 run reads them: step 2 committed" || diag "$st"

# A standard client reads a shard: curl with SigV4, then the safetensors
# header with nothing but Python's json.
key=runs/run/step-0000000002/rank-00001-of-00004.safetensors
url=$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET/$key
s3curl() {
	timed curl -sS -f --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
s3curl -o "$ckpt_dir/shard" "$url"
ok $? "curl fetches $key"
names=$("$python" - "$ckpt_dir/shard" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__")
end = max(v["data_offsets"][1] for v in h.values())
assert 8 + n + end == len(b), "data section size"
print(meta["format"], meta["step"], meta["rank"], " ".join(sorted(h)))
PY
)
is "$(echo "$names" | cut -d' ' -f1-4)" "dptrain-ckpt 2 1 adam.m@1024750" \
	"the shard is a safetensors file: metadata and chunk names" || diag "$names"

# Damage it through a plain PUT of the same size with one byte changed.
"$python" -c "
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-100] ^= 0xff
open(p, 'wb').write(b)" "$ckpt_dir/shard"
s3curl -T "$ckpt_dir/shard" "$url" -o /dev/null
verify_out=$("$ckpt_tool" ckpt verify "$run" 2>&1)
is "$?" 1 "verify exits 1 after the damage"
echo "$verify_out" | grep -q "step-0000000002/rank-00001-of-00004.safetensors' chunk .* checksum mismatch"
ok $? "verify names the damaged shard and chunk" || diag "$verify_out"
ckpt_job 2 "$out.load2" --scale $scale load "$root"
is "$(ckpt_grep "$out.load2" '^loaded' | grep -c 'step=1 .* ok$')" 2 \
	"the load falls back to step 1"

# The fall-back quarantined step 2 on S3 too: shown as damaged, removed by
# gc, and saved again by the run.
ls_states() {
	"$ckpt_tool" ckpt ls "$root" 2>&1 | awk 'NR > 1 { print $2 ":" $3 }' | xargs
}
is "$(ls_states)" "1:committed 2:damaged" "ls shows step 2 as damaged"
gc_out=$("$ckpt_tool" ckpt gc "$run" 2>"$out.gc.err")
is "$gc_out" "1 step(s) deleted" "gc deletes the damaged step" || diag "$(cat "$out.gc.err")"
is "$(ls_states)" "1:committed" "after gc, step 2 is gone"
ckpt_job 4 "$out.resave" --scale $scale save "$root" 2
ok $? "a save of step 2 after the fall-back commits" || diag "$(cat "$out".resave.[0-9]*)"
run_ok "the step saved again verifies" "$ckpt_tool" ckpt verify "$run" --step 2

# A server error is not damage: every read of step 2's shards answers 500
# until the retries give up, the load falls back to step 1, and step 2
# stays committed.
s3_proxy_up "$ckpt_dir/faults" 'GET:step-0000000002/rank-:500:100000'
DPTRAIN_S3_ENDPOINT=$s3_proxy ckpt_job 2 "$out.s5xx" --scale $scale load "$root"
is "$(ckpt_grep "$out.s5xx" '^loaded' | grep -c 'step=1 .* ok$')" 2 \
	"with step 2's reads failing (500, retries exhausted) the load falls back to step 1" ||
	diag "$(cat "$out".s5xx.[0-9]*)"
s3_proxy_down
is "$(ls_states)" "1:committed 2:committed" "step 2 is not quarantined for a server error"

# Wrong credentials: the save fails on every rank with a clear error, and
# nothing changes.
AWS_SECRET_ACCESS_KEY=wrong-$AWS_SECRET_ACCESS_KEY ckpt_job 2 "$out.auth" --scale 10 save "$root" 3
is $? 2 "a save with a wrong secret key fails on both ranks"
grep -hiq "signature\|credentials\|authenti\|403" "$out".auth.[0-9]*
ok $? "the message says the credentials were refused" || diag "$(cat "$out".auth.[0-9]*)"
ls_out=$("$ckpt_tool" ckpt ls "$root" 2>&1)
is "$(echo "$ls_out" | awk '$3 == "committed" { print $2 }' | xargs)" "1 2" \
	"no step 3 was committed" || diag "$ls_out"

AWS_SECRET_ACCESS_KEY=wrong-$AWS_SECRET_ACCESS_KEY ckpt_job 2 "$out.authl" --scale 10 load "$root"
is $? 2 "a load with a wrong secret key fails on both ranks"
is "$(ckpt_grep "$out.authl" '^FAIL load' | sort -u)" "FAIL load: DPT_EAUTH (authentication failed)" \
	"both ranks' load returns DPT_EAUTH" || diag "$(cat "$out".authl.[0-9]*)"
grep -q "SignatureDoesNotMatch.*AWS_SECRET_ACCESS_KEY" "$out.authl.0"
ok $? "rank 0 says what S3 answered and which credentials to fix" || diag "$(cat "$out".authl.[0-9]*)"
! grep -q "no usable committed step" "$out".authl.[0-9]*
ok $? "no rank calls the run's steps unusable" || diag "$(cat "$out".authl.[0-9]*)"
