// s3-read.mjs ENDPOINT BUCKET KEY - an object read back with the AWS SDK's own S3 client
// (@aws-sdk/client-s3), for tests/integration/s3.sh: prints one JSON line with HeadObject's size,
// content type and user metadata, and the SHA-256 of GetObject's bytes; {"error": NAME} when the
// SDK reports one (NoSuchKey, NotFound, ...). Credentials: s3rver's S3RVER/S3RVER, path style.
import { createHash } from 'node:crypto';
import { S3Client, HeadObjectCommand, GetObjectCommand } from '@aws-sdk/client-s3';

const [endpoint, Bucket, Key] = process.argv.slice(2);
const s3 = new S3Client({
  endpoint, region: 'us-east-1', forcePathStyle: true,
  credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
});
try {
  const head = await s3.send(new HeadObjectCommand({ Bucket, Key }));
  const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
  const h = createHash('sha256');
  for await (const chunk of got.Body) h.update(chunk);
  console.log(JSON.stringify({
    size: head.ContentLength, type: head.ContentType, metadata: head.Metadata, sha256: h.digest('hex'),
  }));
} catch (e) {
  console.log(JSON.stringify({ error: e.name, status: e.$metadata?.httpStatusCode }));
}
