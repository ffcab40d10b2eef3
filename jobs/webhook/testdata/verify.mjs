// Verifies one webhook delivery with the reference Standard Webhooks library, as an
// independent check of sheetq's signatures.
//
//   node verify.mjs SECRET WEBHOOK_ID WEBHOOK_TIMESTAMP WEBHOOK_SIGNATURE < body
//
// Exits 0 when new Webhook(secret).verify(body, headers) passes, 1 with the reason when
// it does not, 2 on bad usage. The library is loaded from $SHEETQ_NODE_MODULES/node_modules
// or, without it, from the node_modules folder beside this script.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [secret, id, timestamp, signature] = process.argv.slice(2);
if (!secret || !id || !timestamp || !signature) {
  console.error("usage: node verify.mjs SECRET WEBHOOK_ID WEBHOOK_TIMESTAMP WEBHOOK_SIGNATURE < body");
  process.exit(2);
}
const base = process.env.SHEETQ_NODE_MODULES || dirname(fileURLToPath(import.meta.url));
const { Webhook } = createRequire(join(base, "verify.cjs"))("standardwebhooks");

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const body = Buffer.concat(chunks).toString("utf8");

try {
  new Webhook(secret).verify(body, {
    "webhook-id": id,
    "webhook-timestamp": timestamp,
    "webhook-signature": signature,
  });
} catch (err) {
  console.error(`verification failed: ${err.message}`);
  process.exit(1);
}
