#!/bin/bash
# The S3 test bed is a real peer that checks signatures: what is written
# with the right key reads back byte for byte, and a request signed with a
# wrong secret is refused with 403 and changes nothing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_prog curl cmp head
s3_up
dir=$DPTRAIN_S3_DIR
pid=$(cat "$dir/pid")
plan 7

work=$dir/data # goes with the state directory
mkdir -p "$work" || bail_out "cannot create $work"
url=$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET/auth/object.bin
head -c 300000 /dev/urandom >"$work/object"
head -c 1000 /dev/urandom >"$work/other"

# METHOD SECRET [curl args]: the HTTP status; the body goes to $work/body.
# curl 7.88 does not send x-amz-content-sha256 itself, and S3 needs it.
# Uploads use -T: with --data-binary curl labels the body as a form, and
# moto then stores an empty object.
s3() {
	local method=$1 secret=$2
	shift 2
	timed curl -sS -o "$work/body" -w '%{http_code}' -X "$method" \
		--aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$secret" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@" "$url"
}

# 1-2. The right key: the bytes written are the bytes read.
is "$(s3 PUT "$AWS_SECRET_ACCESS_KEY" -T "$work/object")" 200 "signed PUT: 200"
code=$(s3 GET "$AWS_SECRET_ACCESS_KEY")
[ "$code" = 200 ] && cmp -s "$work/object" "$work/body"
ok $? "signed GET returns the 300000 bytes written" || diag "HTTP $code, $(wc -c <"$work/body") bytes"

# 3-5. A wrong secret: 403 with S3's error code, and the object unchanged.
code=$(s3 PUT "x$AWS_SECRET_ACCESS_KEY" -T "$work/other")
is "$code" 403 "PUT signed with a wrong secret: 403"
grep -q '<Code>SignatureDoesNotMatch</Code>' "$work/body"
ok $? "the 403 says SignatureDoesNotMatch" || diag "$(cat "$work/body")"
code=$(s3 GET "$AWS_SECRET_ACCESS_KEY")
[ "$code" = 200 ] && cmp -s "$work/object" "$work/body"
ok $? "the object still holds the bytes of the signed PUT" || diag "HTTP $code"

# 6. Reading with a wrong secret or with no signature gives nothing.
code=$(s3 GET "x$AWS_SECRET_ACCESS_KEY")
unsigned=$(timed curl -sS -o /dev/null -w '%{http_code}' "$url")
[ "$code" = 403 ] && [ "$unsigned" = 403 ]
ok $? "GET with a wrong secret or unsigned: 403" || diag "wrong secret: HTTP $code, unsigned: HTTP $unsigned"

# 7. down stops the server.
s3_down
[ ! -e "/proc/$pid" ] && ! grep -lzxF "DPTRAIN_S3_DAEMON=$dir" /proc/[0-9]*/environ >/dev/null 2>&1
ok $? "down stops moto_server (PID $pid)"
