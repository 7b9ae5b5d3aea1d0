# Integration tests on the S3 test bed: moto_server on 127.0.0.1 with SigV4
# enforced (tests/s3/up, tests/s3/down; s3rver for the fault campaign's
# server restarts, through tests/s3/s3rver.js). Without it they SKIP.
TESTS += tests/s3/auth.sh
EXTRA_DIST += tests/s3/auth.sh tests/s3/up tests/s3/down tests/s3/s3rver.js
