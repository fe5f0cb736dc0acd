// azblob-read.mjs - the Azure SDK's own blob client (@azure/storage-blob) reading back what egress
// wrote to azurite, so that the tests judge our uploads by the official client, not by our reading.
//   node azblob-read.mjs ACCOUNT_URL mkcontainer CONTAINER
//   node azblob-read.mjs ACCOUNT_URL sas CONTAINER           a container SAS (racwd, 1 hour), printed
//   node azblob-read.mjs ACCOUNT_URL get CONTAINER BLOB      {"size", "sha256", "metadata", "contentType"}
//   node azblob-read.mjs ACCOUNT_URL blocks CONTAINER BLOB   {"exists", "committed", "uncommitted"}: the
//                                                            blob's block list (Get Block List, type all)
//   node azblob-read.mjs ACCOUNT_URL put CONTAINER BLOB TEXT a blob that exists before an upload
//   node azblob-read.mjs ACCOUNT_URL upload CONTAINER BLOB FILE  the SDK's uploadFile (bench/azblob.sh)
// ACCOUNT_URL is azurite's http(s)://127.0.0.1:PORT/devstoreaccount1; the SDK signs with azurite's
// published development account key (devstoreaccount1). NODE_EXTRA_CA_CERTS for https.
import { createHash } from "node:crypto";
import {
  BlobServiceClient, StorageSharedKeyCredential, ContainerSASPermissions, generateBlobSASQueryParameters,
} from "@azure/storage-blob";

const ACCOUNT = "devstoreaccount1";
const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const [url, cmd, container, blob, text] = process.argv.slice(2);
const cred = new StorageSharedKeyCredential(ACCOUNT, KEY);
const svc = new BlobServiceClient(url, cred);
const cc = svc.getContainerClient(container);

async function main() {
  if (cmd === "mkcontainer") {
    await cc.createIfNotExists();
    return "created";
  }
  if (cmd === "sas") {
    const now = new Date(Date.now() - 60_000);
    return generateBlobSASQueryParameters({
      containerName: container, permissions: ContainerSASPermissions.parse("racwd"),
      startsOn: now, expiresOn: new Date(now.getTime() + 3600_000),
    }, cred).toString();
  }
  const bc = cc.getBlockBlobClient(blob);
  if (cmd === "put") {
    await bc.upload(text, Buffer.byteLength(text));
    return "put";
  }
  if (cmd === "upload") {
    await bc.uploadFile(text);
    return "uploaded";
  }
  if (cmd === "get") {
    const props = await bc.getProperties();
    const h = createHash("sha256");
    const r = await bc.download();
    for await (const chunk of r.readableStreamBody) h.update(chunk);
    return JSON.stringify({ size: props.contentLength, sha256: h.digest("hex"), metadata: props.metadata,
      contentType: props.contentType });
  }
  if (cmd === "blocks") {
    try {
      const l = await bc.getBlockList("all");
      return JSON.stringify({ exists: true, committed: (l.committedBlocks || []).length,
        uncommitted: (l.uncommittedBlocks || []).length });
    } catch (e) {
      if (e.statusCode === 404) return JSON.stringify({ exists: false, committed: 0, uncommitted: 0 });
      throw e;
    }
  }
  throw new Error(`unknown command ${cmd}`);
}

main().then((out) => console.log(out), (e) => {
  console.error(`azblob-read ${cmd}: ${e.statusCode || ""} ${e.code || ""} ${e.message}`);
  process.exit(1);
});
