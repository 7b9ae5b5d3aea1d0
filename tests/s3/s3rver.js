// tests/s3/s3rver.js: run @20minutes/s3rver for tests/s3/up (SERVER=s3rver).
//
//   node tests/s3/s3rver.js MODULE_DIR PORT DATA_DIR BUCKET
//
// Serves 127.0.0.1:PORT from DATA_DIR, which holds the objects as files:
// a server started again on the same DATA_DIR has every object the last
// one stored (the fault campaign's restart_s3 relies on it). BUCKET is
// created if it is not there yet. The server checks SigV4 signatures
// against its one built-in key pair, S3RVER / S3RVER. Prints
// "ready PORT" once it listens; every request is logged on stdout.
'use strict';

const [moduleDir, port, dataDir, bucket] = process.argv.slice(2);
if (!bucket) {
  console.error('usage: s3rver.js MODULE_DIR PORT DATA_DIR BUCKET');
  process.exit(2);
}
const S3rver = require(moduleDir);
new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory: dataDir,
  silent: false,
  configureBuckets: [{ name: bucket }],
})
  .run()
  .then(
    (addr) => console.log(`ready ${addr.port}`),
    (err) => {
      console.error(`s3rver.js: cannot start: ${err.message}`);
      process.exit(1);
    },
  );
