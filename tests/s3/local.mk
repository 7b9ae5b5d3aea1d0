# integration tests on the S3 test bed (see tests/s3/)
