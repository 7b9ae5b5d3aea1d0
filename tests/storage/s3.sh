#!/bin/bash
# The s3 storage backend against a real S3 server (moto_server, SigV4
# enforced), driven through storage_tool: multipart uploads with parts above
# 5 MiB that a standard S3 client reads back byte for byte, ranged reads,
# listings over several pages, DeleteObjects, the conditional commit,
# garbage collection of multipart uploads, credentials from the shared
# credentials file, appends (each a rewrite of the object), wrong
# credentials, a server that stalls mid-upload (timeouts, retries,
# success) and a server restarted mid-upload (retries, then a clean
# failure that leaves nothing behind).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

tool=$top_builddir/tests/storage/storage_tool
[ -x "$tool" ] || skip_all "$tool is not built (make check builds it)"
require_prog curl cmp head dd
s3_up
dir=$DPTRAIN_S3_DIR
plan 34

work=$dir/data
mkdir -p "$work" || bail_out "cannot create $work"
uri=s3://$DPTRAIN_S3_BUCKET/run
st() { timed "$tool" "$@"; }

# The standard client that reads objects back: the AWS CLI when installed
# (contrib/setup/install-deps.sh puts it in /opt/dptrain-s3), else curl's
# own signer (one GET of the whole object).
aws_cli=${DPTRAIN_S3_PY:-/opt/dptrain-s3}/bin/aws
[ -x "$aws_cli" ] || aws_cli=$(command -v aws || true)
[ -n "$aws_cli" ] || { [ -x /root/.pyenv/shims/aws ] && aws_cli=/root/.pyenv/shims/aws; }
if [ -n "$aws_cli" ] && ! "$aws_cli" --version >/dev/null 2>&1; then aws_cli=; fi
std_get() { # FULL_KEY FILE: the object as a standard S3 client reads it
	if [ -n "$aws_cli" ]; then
		timed "$aws_cli" --endpoint-url "$DPTRAIN_S3_ENDPOINT" s3api get-object \
			--bucket "$DPTRAIN_S3_BUCKET" --key "$1" "$2" >/dev/null
	else
		[ "$(timed curl -sS -o "$2" -w '%{http_code}' \
			--aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
			--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
			"$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET/$1")" = 200 ]
	fi
}
std_name=${aws_cli:+aws s3api}
std_name=${std_name:-curl --aws-sigv4}
diag "objects are read back with $std_name"
# Requests of a kind the server logged so far.
logged() { grep -c -- "$1" "$dir/moto.log"; }
range_of() { # FILE OFFSET LENGTH: those bytes of FILE on stdout
	dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none
}

mib=$((1024 * 1024))
part=$((5 * mib))
head -c $((13 * mib + 12345)) /dev/urandom >"$work/big"

# 1-4. Multipart: three writer threads, pieces that straddle the parts.
parts0=$(logged 'partNumber=')
run_ok "13 MiB object written in 5 MiB parts by 3 threads" \
	st --part-size $part --inflight 3 --threads 3 --piece 1000003 "$uri" put shard/big "$work/big"
parts=$(($(logged 'partNumber=') - parts0))
[ "$parts" -ge 3 ] && [ "$(logged 'POST /ckpt/run/shard/big?uploadId=')" = 1 ]
ok $? "sent as a multipart upload: $parts parts, one CompleteMultipartUpload"
std_get run/shard/big "$work/big.std" && cmp -s "$work/big" "$work/big.std"
ok $? "$std_name reads back the 13 MiB byte for byte"
is "$(st "$uri" stat shard/big)" "$(stat -c %s "$work/big")" "stat gives the size"

# 5-8. Ranged reads, within a part, across parts, split over connections.
ranges0=$(logged 'GET /ckpt/run/shard/big ')
ranges_ok=0
for r in "0 1" "5242879 2" "1000 4096" "$((part - 100)) $((part + 200))" "0 $((11 * mib))" \
	"$((13 * mib)) 12345"; do
	set -- $r
	st --part-size $part "$uri" get shard/big "$work/range" "$1" "$2" &&
		range_of "$work/big" "$1" "$2" | cmp -s - "$work/range" ||
		{ diag "range $1+$2 differs"; ranges_ok=1; }
done
ok $ranges_ok "six ranged reads give the bytes of the file"
ranges=$(($(logged 'GET /ckpt/run/shard/big ') - ranges0))
[ "$ranges" -ge 9 ]
ok $? "ranged reads are GETs, the large ones split by part ($ranges GETs for 6 reads)"
out=$(st "$uri" get shard/big - $((13 * mib)) 20000 2>&1 >/dev/null)
[[ $out == *DPT_ERANGE* && $out == *"past its end"* ]]
ok $? "a range past the end: DPT_ERANGE" || diag "$out"
out=$(st "$uri" get shard/none "$work/x" 2>&1)
[[ $out == *DPT_ENOENT* ]]
ok $? "a missing object: DPT_ENOENT" || diag "$out"

# 9-10. An object smaller than a part: one PUT, readable by the standard client.
head -c 100000 /dev/urandom >"$work/small"
run_ok "a 100 kB object: one PUT" st "$uri" put shard/small "$work/small"
std_get run/shard/small "$work/small.std" && cmp -s "$work/small" "$work/small.std"
ok $? "$std_name reads back the 100 kB byte for byte"

# 11-13. Listing over pages of 3 keys (8 keys: three pages).
for i in 1 2 3 4 5 6 7 8; do
	printf 'object %s\n' "$i" >"$work/k$i"
	st "$uri" put "list/k$i" "$work/k$i" || diag "put list/k$i failed"
done
pages0=$(logged 'continuation-token=')
want=$(for i in 1 2 3 4 5 6 7 8; do echo "list/k$i 9"; done)
is "$(st --page 3 "$uri" list list/)" "$want" "list with pages of 3 gives the 8 keys in order"
pages=$(($(logged 'continuation-token=') - pages0))
is "$pages" 2 "the listing followed 2 continuation tokens"
is "$(st "$uri" list "" | wc -l)" 10 "list of everything: 10 objects"

# 14-16. DeleteObjects.
run_ok "delete 3 keys, one of them missing" st "$uri" delete list/k2 list/k5 list/none
is "$(st --page 2 "$uri" list list/ | cut -d' ' -f1 | tr '\n' ' ')" \
	"list/k1 list/k3 list/k4 list/k6 list/k7 list/k8 " "the deleted keys are gone from the listing"
[ "$(logged 'POST /ckpt?delete')" -ge 1 ]
ok $? "sent as DeleteObjects"

# 17-20. The conditional commit.
echo '{"step": 1}' >"$work/m1"
echo '{"step": 1, "other": true}' >"$work/m2"
run_ok "put-if-absent of a new manifest" st "$uri" put-if-absent step-1/manifest.json "$work/m1"
out=$(st "$uri" put-if-absent step-1/manifest.json "$work/m2" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_EEXIST* ]]
ok $? "a second put-if-absent fails with DPT_EEXIST" || diag "rc $rc: $out"
std_get run/step-1/manifest.json "$work/m.std" && cmp -s "$work/m1" "$work/m.std"
ok $? "the manifest still holds the first commit"
grep -q 'PUT /ckpt/run/step-1/manifest.json HTTP/1.1" 412' "$dir/moto.log"
ok $? "the server refused the second with 412 (If-None-Match: *)"

# Appends (the coordinator's events): S3 has no cheap append, so each
# append rewrites the appender's whole object with one PUT.
is "$(st "$uri" caps)" rewrite "s3 says an append rewrites the object"
puts0=$(logged 'PUT /ckpt/run/log/a.jsonl HTTP')
run_ok "three appends through one appender" st "$uri" append log/a.jsonl l1 l2 l3
std_get run/log/a.jsonl "$work/log.std" && [ "$(cat "$work/log.std")" = $'l1\nl2\nl3' ] &&
	[ "$(($(logged 'PUT /ckpt/run/log/a.jsonl HTTP') - puts0))" = 3 ]
ok $? "$std_name reads the three lines back, written by three whole PUTs" ||
	diag "$(cat "$work/log.std")"
st "$uri" append log/a.jsonl m1 && std_get run/log/a.jsonl "$work/log.std" &&
	[ "$(cat "$work/log.std")" = m1 ]
ok $? "another appender's object is its own: it replaces what was there" ||
	diag "$(cat "$work/log.std")"

# 21-22. gc aborts the multipart uploads under its prefix, not the others.
if [ -n "$aws_cli" ]; then
	for k in run/stale/a other/b; do
		timed "$aws_cli" --endpoint-url "$DPTRAIN_S3_ENDPOINT" s3api create-multipart-upload \
			--bucket "$DPTRAIN_S3_BUCKET" --key "$k" >/dev/null || diag "cannot create an upload of $k"
	done
	is "$(st "$uri" gc "" 0)" 1 "gc aborts the 1 upload under the root"
	left=$(timed "$aws_cli" --endpoint-url "$DPTRAIN_S3_ENDPOINT" s3api list-multipart-uploads \
		--bucket "$DPTRAIN_S3_BUCKET" --query 'Uploads[].Key' --output text)
	is "$left" "other/b" "the upload outside the root is left alone"
else
	skip "gc aborts the uploads under the root" "no aws CLI to create uploads"
	skip "the upload outside the root is left alone" "no aws CLI"
fi

# 23-25. Credentials: the shared file, then wrong ones.
printf '[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n[ckpt]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$work/credentials"
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$work/credentials" \
	AWS_PROFILE=ckpt "$tool" "$uri" stat shard/small 2>&1)
is "$out" 100000 "credentials from profile 'ckpt' of AWS_SHARED_CREDENTIALS_FILE"
out=$(AWS_SECRET_ACCESS_KEY="x$AWS_SECRET_ACCESS_KEY" st "$uri" get shard/small "$work/x" 0 10 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_EAUTH* && $out == *SignatureDoesNotMatch* &&
	$out == *"refuses the key '$AWS_ACCESS_KEY_ID' from AWS_ACCESS_KEY_ID"* ]]
ok $? "a wrong secret: DPT_EAUTH, SignatureDoesNotMatch, the key and its source named" || diag "rc $rc: $out"
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$work/credentials" \
	"$tool" "$uri" put shard/denied "$work/small" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_EAUTH* && $out == *InvalidAccessKeyId* &&
	$out == *"'nobody' from profile 'default' of $work/credentials"* ]]
ok $? "an unknown key from the credentials file: DPT_EAUTH naming the profile and file" || diag "rc $rc: $out"

# 26. No credentials at all.
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$work" "$tool" "$uri" list 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *"no S3 credentials"* && $out == *DPT_EAUTH* ]]
ok $? "no credentials anywhere: DPT_EAUTH, saying where they are looked for" || diag "rc $rc: $out"

# A put of FILE to KEY in the background, 1 MiB pieces every DELAY ms, with
# the progress in $work/progress and the messages in $work/stderr.
head -c $((24 * mib)) /dev/urandom >"$work/slow"
slow_put() { # KEY DELAY OPTIONS...
	local key=$1 delay=$2
	shift 2
	: >"$work/progress"
	# Not under `timed`: the checks below stop and continue this very
	# process (wait_put bounds it instead).
	"$tool" --part-size $part --inflight 2 --piece $mib --delay-ms "$delay" --progress "$@" \
		"$uri" put "$key" "$work/slow" >"$work/progress" 2>"$work/stderr" &
	put_pid=$!
}
wait_written() { # BYTES: until the put has written that much (10 s at most)
	for _ in $(seq 1 200); do
		[ "$(tail -n 1 "$work/progress" | cut -d' ' -f2)" -ge "$1" ] 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
wait_put() { # the put's exit status; killed after 60 s
	local i
	for i in $(seq 1 600); do
		kill -0 "$put_pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$put_pid" 2>/dev/null; then
		diag "the put is still running after 60 s: killing it"
		kill -CONT "$put_pid"
		kill -KILL "$put_pid"
	fi
	wait "$put_pid"
}
moto=$(cat "$dir/pid")

# 27-28. The server stalls for 3 s mid-upload: the transfers time out (1 s
# without progress), are retried, and the upload completes.
slow_put slow/stalled 50 --stall-ms 1000 --retries 10 --retry-base-ms 200 --retry-max-ms 1000
wait_written $((7 * mib)) || diag "the put did not start"
kill -STOP -- "-$moto"
sleep 3
kill -CONT -- "-$moto"
wait_put
rc=$?
[ $rc = 0 ] && grep -q 'retrying' "$work/stderr" && grep -qi 'timeout\|timed out' "$work/stderr"
ok $? "a server stalled mid-upload: timeouts, retries, then success" || diag "rc $rc" "$(cat "$work/stderr")"
std_get run/slow/stalled "$work/slow.std" && cmp -s "$work/slow" "$work/slow.std"
ok $? "the object uploaded across the stall reads back byte for byte"

# 29-30. The server restarts mid-upload (same port, its state lost). The
# writer is held while the new server sets itself up (its first requests
# must be the set-up's), and let run while the port is closed.
slow_put slow/restarted 50 --retries 30 --retry-base-ms 100 --retry-max-ms 500
wait_written $((7 * mib)) || diag "the put did not start"
kill -STOP "$put_pid"
s3_hold_port
s3_down
kill -CONT "$put_pid"
sleep 1.5 # the writer meets a closed port
kill -STOP "$put_pid"
s3_start_again 1 || { kill -CONT "$put_pid"; bail_out "tests/s3/up cannot restart the server"; }
kill -CONT "$put_pid"
wait_put
rc=$?
[ $rc = 1 ] && grep -q "Couldn't connect" "$work/stderr" && grep -q 'retrying' "$work/stderr" &&
	grep -q 'DPT_EAUTH' "$work/stderr"
ok $? "restart mid-upload: retries while the port is closed, then a clean failure (the new server knows neither the key nor the upload)" ||
	diag "rc $rc" "$(cat "$work/stderr")"
diag "how it ended:" "$(grep -v 'retrying' "$work/stderr" | tail -n 4)"
listing=$(st "s3://$DPTRAIN_S3_BUCKET" list "" 2>&1)
[ -z "$listing" ]
ok $? "nothing was committed on the restarted server" || diag "$listing"
