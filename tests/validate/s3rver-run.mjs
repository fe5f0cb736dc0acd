// s3rver-run.mjs DIR PORTFILE [ACCESS_KEY:SECRET...] - the S3 emulator s3rver (npm) for tests/integration/s3.sh:
// listening on 127.0.0.1 at a free port (written to PORTFILE once it listens), its store in DIR, the bucket
// "diag" made, SigV4 verification on (allowMismatchedSignatures false: a wrong secret is refused). Besides
// s3rver's own key pair (S3RVER/S3RVER) it knows the pairs given, which the credential stand-ins hand out.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const S3rver = require('s3rver');
const AWSAccount = require('s3rver/lib/models/account');

const [dir, portFile, ...pairs] = process.argv.slice(2);
for (const p of pairs) {
  const i = p.indexOf(':');
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(p.slice(0, i), p.slice(i + 1));
}
const server = new S3rver({
  address: '127.0.0.1', port: 0, directory: dir, silent: false, allowMismatchedSignatures: false,
  configureBuckets: [{ name: 'diag' }],
});
const { port } = await server.run();
writeFileSync(portFile, `${port}\n`);
process.on('SIGTERM', async () => { await server.close(); process.exit(0); });
