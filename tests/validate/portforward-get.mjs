// portforward-get.mjs - one HTTP request through a pod port-forward made by the Kubernetes JavaScript
// client (@kubernetes/client-node's PortForward, WebSocket v4.channel.k8s.io), the real client that
// tests/integration/fleet_portfwd.sh holds the API server stand-in (kube_portfwd.py) to.
//   node portforward-get.mjs SERVER CA-FILE TOKEN-FILE NS POD PORT PATH AGENT-TOKEN
// The raw HTTP answer on stdout, the port's error channel on stderr; exit 0 when the WebSocket
// closed, 3 on a 20 s timeout, 1 when the client failed.
import { readFileSync } from 'node:fs';
import { PassThrough, Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';

const [server, caFile, tokenFile, ns, pod, port, path, agentToken] = process.argv.slice(2);
if (!agentToken) {
  console.error('usage: portforward-get.mjs SERVER CA-FILE TOKEN-FILE NS POD PORT PATH AGENT-TOKEN');
  process.exit(2);
}
const kc = new k8s.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'fake', server, caFile }],
  users: [{ name: 'u', token: readFileSync(tokenFile, 'utf8').trim() }],
  contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
  currentContext: 'c',
});
const sink = (chunks) => new Writable({ write(c, _e, cb) { chunks.push(Buffer.from(c)); cb(); } });
const out = [], err = [];
const input = new PassThrough(); // never ended: the client closes the WebSocket when its input ends
setTimeout(() => { console.error('timeout'); process.exit(3); }, 20000).unref();
try {
  const ws = await new k8s.PortForward(kc).portForward(ns, pod, [Number(port)], sink(out), sink(err), input);
  const closed = new Promise((resolve) => ws.on('close', resolve));
  input.write(`GET ${path} HTTP/1.1\r\nHost: ${ns}.${pod}:${port}\r\nAuthorization: Bearer ${agentToken}\r\n` +
    'Connection: close\r\n\r\n');
  await closed;
} catch (e) {
  console.error(`client-node: ${e.message || e}`);
  process.exit(1);
}
process.stdout.write(Buffer.concat(out));
process.stderr.write(Buffer.concat(err));
process.exit(0);
