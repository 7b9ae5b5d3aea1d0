#!/bin/bash
# The s3 backend's retries, through a fault-injecting proxy
# (tests/storage/s3_faults.py) in front of the real S3 test server: 503
# SlowDown and 500 InternalError are retried with exponential backoff and
# jitter until the server's own answer comes; lost answers of a conditional
# PUT and of CompleteMultipartUpload (the server acted, the client never
# heard) end in success, not in a false DPT_EEXIST or a failed upload;
# exhausted retries fail with the cause; a session token is sent, signed,
# and its refusal by the server is reported as such; virtual-hosted
# addressing works (the proxy as http_proxy stands in for DNS).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

tool=$top_builddir/tests/storage/storage_tool
[ -x "$tool" ] || skip_all "$tool is not built (make check builds it)"
[ -x /usr/bin/python3 ] || skip_all "/usr/bin/python3 not found (it runs the proxy)"
require_prog curl cmp head
s3_up
dir=$DPTRAIN_S3_DIR
upstream=${DPTRAIN_S3_ENDPOINT##*:}
plan 25

work=$dir/data
mkdir -p "$work" || bail_out "cannot create $work"
uri=s3://$DPTRAIN_S3_BUCKET/run
mib=$((1024 * 1024))
part=$((5 * mib))
head -c $((13 * mib + 777)) /dev/urandom >"$work/big"

proxy_up() { # RULE...: a new proxy with these rules; its faults in $work/faults
	s3_proxy_up "$work/faults" "$@"
	proxy=$s3_proxy
}
via() { DPTRAIN_S3_ENDPOINT=$proxy timed "$tool" "$@"; }  # through the proxy
direct() { timed "$tool" "$@"; }                        # to the server
faults() { grep -c -- "$1" "$work/faults"; }

# 1-5. A multipart upload through 500 on CreateMultipartUpload, 503 twice on
# part 2, 503 on CompleteMultipartUpload.
proxy_up 'POST:?uploads:500:1' 'PUT:partNumber=2&:503:2' 'POST:?uploadId=:503:1'
via --part-size $part --threads 2 --piece 999999 "$uri" put big "$work/big" 2>"$work/err"
ok $? "a 13 MiB multipart upload succeeds through 4 injected 5xx" || diag "$(cat "$work/err")"
is "$(faults '^500 ') $(faults '^503 ')" "1 3" "the proxy injected one 500 and three 503"
grep -q 'InternalError' "$work/err" && grep -q 'SlowDown' "$work/err"
ok $? "each retry is logged with its cause (InternalError, SlowDown)" || diag "$(cat "$work/err")"
# Backoff: attempt 2 waits in [100, 200] ms, attempt 3 in [200, 400] ms
# (retry_base_ms 200, doubled, jitter in [d/2, d]).
w2=$(sed -n 's/.*retrying in \([0-9]*\) ms (attempt 2 of 6).*/\1/p' "$work/err" | sort -n | tr '\n' ' ')
w3=$(sed -n 's/.*retrying in \([0-9]*\) ms (attempt 3 of 6).*/\1/p' "$work/err")
in_range() { # LOW HIGH N...: every N in [LOW, HIGH], at least one
	local lo=$1 hi=$2 n seen=1
	shift 2
	for n; do
		[ "$n" -ge "$lo" ] && [ "$n" -le "$hi" ] || return 1
		seen=0
	done
	return $seen
}
in_range 100 200 $w2 && in_range 200 400 $w3
ok $? "exponential backoff with jitter: first retries after ${w2}ms, the second after $w3 ms" || diag "$(cat "$work/err")"
direct "$uri" get big "$work/big.back" && cmp -s "$work/big" "$work/big.back"
ok $? "the object on the server is byte-exact"

# 6-8. The answer of CompleteMultipartUpload is lost, and its retry gets
# NoSuchUpload (the upload is complete, so gone; moto itself would answer
# 200 again, AWS may not): the object's ETag, the MD5 of the parts' MD5s,
# shows that the object is this upload's.
proxy_up 'POST:?uploadId=:drop:1' 'POST:?uploadId=:404:1'
via --part-size $part "$uri" put lost-complete "$work/big" 2>"$work/err"
ok $? "a lost CompleteMultipartUpload answer, then NoSuchUpload: the upload still succeeds" ||
	diag "$(cat "$work/err")"
is "$(faults '^drop POST') $(faults '^404 POST')" "1 1" "the proxy dropped the answer, then said NoSuchUpload"
direct "$uri" get lost-complete "$work/big.back" && cmp -s "$work/big" "$work/big.back"
ok $? "the object is byte-exact"

# 9-11. The answer of the conditional commit is lost: the retry gets 412,
# reads the object back, finds its own bytes: success, not DPT_EEXIST.
echo '{"step": 7}' >"$work/m1"
echo '{"step": 7, "by": "another writer"}' >"$work/m2"
proxy_up 'PUT:manifest.json:drop:1'
via "$uri" put-if-absent step-7/manifest.json "$work/m1" 2>"$work/err"
ok $? "a lost answer of put-if-absent: success after the retry's 412" || diag "$(cat "$work/err")"
direct "$uri" get step-7/manifest.json "$work/m.back" && cmp -s "$work/m1" "$work/m.back" &&
	[ "$(faults '^drop PUT')" = 1 ] &&
	grep -q 'PUT /ckpt/run/step-7/manifest.json HTTP/1.1" 412' "$dir/moto.log"
ok $? "the manifest holds the bytes sent; the answer was dropped, the retry got 412"
out=$(direct "$uri" put-if-absent step-7/manifest.json "$work/m2" 2>&1)
[[ $out == *DPT_EEXIST* ]]
ok $? "another writer's commit of the same step: DPT_EEXIST" || diag "$out"

# 12-14. A part that keeps failing: the upload is aborted on the server,
# nothing is committed, no multipart upload is left.
proxy_up 'PUT:partNumber=2&:503:10'
out=$(via --part-size $part --retries 1 --retry-base-ms 50 "$uri" put failed "$work/big" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_ES3* && $out == *"gave up after 2 attempts"* ]]
ok $? "a part refused twice with 503: the put fails with DPT_ES3" || diag "rc $rc: $out"
grep -q 'DELETE /ckpt/run/failed?uploadId=.* HTTP/1.1" 204' "$dir/moto.log"
ok $? "the multipart upload was aborted (AbortMultipartUpload: 204)" || diag "$(grep failed "$dir/moto.log")"
out=$(direct "$uri" stat failed 2>&1)
[[ $out == *DPT_ENOENT* ]] && direct "$uri" gc "" 0 | grep -qx 0
ok $? "no object, and no upload left for gc" || diag "$out"

# 15-16. A read through a 503: retried, right bytes.
proxy_up 'GET:/run/big:503:1'
via --part-size $part "$uri" get big "$work/range" 6000000 5000000 2>"$work/err" &&
	dd if="$work/big" bs=1M iflag=skip_bytes,count_bytes skip=6000000 count=5000000 status=none |
	cmp -s - "$work/range"
ok $? "a ranged read through a 503: the right bytes" || diag "$(cat "$work/err")"
is "$(faults '^503 GET')" 1 "the proxy injected the 503"

# 17-18. Retries exhausted: the error says why and how often it tried.
proxy_up 'GET:list-type=2:503:10'
out=$(via --retries 2 --retry-base-ms 50 "$uri" list "" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_ES3* && $out == *"HTTP 503 SlowDown"* && $out == *"gave up after 3 attempts"* ]]
ok $? "503 for ever: DPT_ES3, SlowDown, gave up after 3 attempts" || diag "rc $rc: $out"
is "$(faults '^503 GET')" 3 "three attempts reached the proxy"

# 19-20. A server without ListMultipartUploads (501 NotImplemented): gc asks once,
# warns that it cannot collect uploads, and succeeds (a retention after
# every commit must not fail, nor wait through retries, for it).
proxy_up 'GET:?uploads:501:10'
out=$(via "$uri" gc "" 0 2>&1)
rc=$?
[ $rc = 0 ] && [[ $out == *"does not implement ListMultipartUploads"* ]] && [ "$(echo "$out" | tail -n 1)" = 0 ]
ok $? "gc on a server without ListMultipartUploads: a warning, nothing removed, success" || diag "rc $rc: $out"
is "$(faults '^501 GET')" 1 "501 is final: one request, no retry"

# 21-22. A session token is sent and signed; the server refuses one it did
# not issue, and the error says so.
proxy_up
out=$(AWS_SESSION_TOKEN=token-of-test via "$uri" stat big 2>&1)
rc=$?
grep -q '^token token-of-test signed$' "$work/faults"
ok $? "x-amz-security-token is sent and signed" || diag "$(cat "$work/faults")"
out=$(AWS_SESSION_TOKEN=token-of-test via "$uri" get big "$work/x" 0 10 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *DPT_EAUTH* && $out == *InvalidToken* && $out == *"session token is refused"* ]]
ok $? "a token the server did not issue: DPT_EAUTH naming the session token" || diag "rc $rc: $out"

# 23-24. Virtual-hosted addressing (bucket.localhost:PORT/key), sent through
# the proxy as an HTTP proxy: no DNS is needed for ckpt.localhost.
proxy_up
echo 'virtual host' >"$work/vh"
http_proxy=$proxy DPTRAIN_S3_ENDPOINT=http://localhost:$upstream DPTRAIN_S3_PATH_STYLE=0 \
	timed "$tool" "$uri" put-if-absent vh/object "$work/vh" 2>"$work/err" &&
	grep -q "PUT http://$DPTRAIN_S3_BUCKET.localhost:$upstream/run/vh/object HTTP/1.1\" 200" "$dir/moto.log"
ok $? "DPTRAIN_S3_PATH_STYLE=0: PUT to http://$DPTRAIN_S3_BUCKET.localhost:$upstream/run/vh/object" ||
	diag "$(cat "$work/err")" "$(tail -n 3 "$dir/moto.log")"
direct "$uri" get vh/object "$work/vh.back" && cmp -s "$work/vh" "$work/vh.back" &&
	[ "$(http_proxy=$proxy DPTRAIN_S3_ENDPOINT=http://localhost:$upstream DPTRAIN_S3_PATH_STYLE=0 \
		timed "$tool" --page 1 "$uri" list vh/)" = "vh/object 13" ]
ok $? "the object is in the bucket, and listed through virtual-hosted requests"

# 25. A server whose listing never ends (IsTruncated with the same token
# each time): the list fails, saying so, after the second page.
proxy_up 'GET:list-type=2:loop:1000'
out=$(via --page 1 "$uri" list 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *"repeats its continuation token"* ]] && [ "$(faults loop)" = 2 ]
ok $? "a listing that never ends fails after 2 pages, saying why" || diag "rc $rc, $(faults loop) pages: $out"
