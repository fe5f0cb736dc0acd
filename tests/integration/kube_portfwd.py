"""kube_portfwd.py - the server side of a pod's port-forward over WebSocket, for
kubeapi_fake.py (GET /api/v1/namespaces/NS/pods/NAME/portforward?ports=P).

It follows what the API server relays from the kubelet's streaming server:
k8s.io/kubernetes pkg/kubelet/cri/streaming/portforward/websocket.go on
k8s.io/apiserver's wsstream (conn.go), with RFC 6455 framing:

- Subprotocols: the client's first offer among "v4.channel.k8s.io" (binary),
  "v4.base64.channel.k8s.io" (text frames: the channel as the digit '0'+n, then
  base64), or none offered: binary with no Sec-WebSocket-Protocol. Offers of
  only other protocols: "HTTP/1.1 403 Forbidden" with no body, as
  golang.org/x/net/websocket answers a failed handshake.
- ports: each value comma-separated, each 1..65535, else 400 with the
  kubelet's words; port i has data channel 2i and error channel 2i+1.
- The first message on each channel is the port, 2 bytes little-endian, and
  nothing else; both are sent before the pod's port is dialled (as
  handleWebSocketStreams writes them before run()).
- The pod's port is what POST /__fake/forward said (kubeapi_fake.py); none, or
  a refused connection, is containerd's failure wrapped in the kubelet's
  words, sent as one message on the error channel, then the pair ends:
    error forwarding port P to pod SANDBOX, uid : failed to execute portforward
    in network namespace "/var/run/netns/cni-...": failed to connect to
    localhost:P inside namespace "SANDBOX", IPv4: dial tcp4 127.0.0.1:P:
    connect: connection refused IPv6 dial tcp6 [::1]:P: connect: connection refused
  (containerd's sandbox_portforward_linux.go; the kubelet's "pod" is the sandbox
  ID and its uid empty, as the CRI streaming server calls it).
- Client frames must be masked (else close 1002); fragmented messages are
  joined (at most 1 MiB); a message on channel 2i goes to port i, on others
  is dropped (wsstream logs and ignores it); ping gets pong. When every pair
  has ended (the pod's side reached EOF or failed) the server closes the
  WebSocket (close 1000); when the client closes (a close frame or EOF), the
  pod connections are closed and a close frame answers.

One thread per WebSocket (the request handler's), one select loop over the TLS
socket and the pod connections, so TLS reads and writes never run in two
threads at once. Each end is logged: "WS NS/POD closed by the client",
"WS NS/POD closed by the server".

Test knobs, per forward: "oversize": N sends one data message of N bytes
before relaying (to try a client's cap on a frame); "tee": PATH writes every
byte the pod's port sent into PATH (what the client should have received);
"coalesce": true sends the 101's head and the port prefix messages in ONE
write (one TLS record), as an upgrading proxy that buffers may deliver them,
so a client's first read holds the head and binary frames together.
"""
import base64
import hashlib
import os
import select
import socket
import ssl
import struct
import time
import urllib.parse

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
BINARY, BASE64 = "v4.channel.k8s.io", "v4.base64.channel.k8s.io"
MAX_MESSAGE = 1 << 20
CHUNK = 32 * 1024  # what io.Copy moves at a time, hence the kubelet's frame size


def sandbox_id(ns, pod):
    return hashlib.sha256(f"{ns}/{pod}".encode()).hexdigest()


def refused_text(ns, pod, port):
    sid = sandbox_id(ns, pod)
    netns = "cni-" + sid[:8] + "-" + sid[8:12] + "-" + sid[12:16] + "-" + sid[16:20] + "-" + sid[20:32]
    return (f"error forwarding port {port} to pod {sid}, uid : failed to execute portforward in network namespace "
            f"\"/var/run/netns/{netns}\": failed to connect to localhost:{port} inside namespace \"{sid}\", "
            f"IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused "
            f"IPv6 dial tcp6 [::1]:{port}: connect: connection refused ")


def frame(opcode, payload):
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def parse_ports(query):
    values = urllib.parse.parse_qs(query, keep_blank_values=True).get("ports")
    if not values:
        return None, 'query parameter "ports" is required'
    ports = []
    for v in values:
        if v == "":
            return None, 'query parameter "ports" cannot be empty'
        for p in v.split(","):
            if not p.isdigit() or int(p) > 65535:
                return None, f'unable to parse "{v}" as a port: strconv.ParseUint: parsing "{p}": invalid syntax'
            if int(p) < 1:
                return None, f'port "{v}" must be > 0'
            ports.append(int(p))
    return ports, None


def offered(headers):
    out = []
    for v in headers.get_all("Sec-WebSocket-Protocol") or []:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


class Tunnel:
    def __init__(self, conn, proto, ns, pod, ports, lookup, log):
        self.conn, self.b64, self.ns, self.pod = conn, proto == BASE64, ns, pod
        self.ports, self.lookup, self.log = ports, lookup, log
        self.out = bytearray()     # frames to the client
        self.inbuf = bytearray()   # bytes from the client
        self.msg, self.msg_op = None, 0
        self.pods = {}             # port index -> socket to the pod's port
        self.tees = {}             # port index -> file ("tee")
        self.to_pod = {}           # port index -> bytes waiting for it
        self.closed_by = None
        self.sent_close = self.got_close = self.client_eof = False
        self.deadline = None
        self.prefixed = False      # the port prefixes already went out with the 101 ("coalesce")

    def send_msg(self, chan, data):
        if self.b64:
            self.out += frame(0x1, bytes([ord("0") + chan]) + base64.b64encode(data))
        else:
            self.out += frame(0x2, bytes([chan]) + data)

    def prefixes(self):
        for i, port in enumerate(self.ports):
            prefix = struct.pack("<H", port)
            self.send_msg(2 * i, prefix)
            self.send_msg(2 * i + 1, prefix)

    def start(self):
        if not self.prefixed:
            self.prefixes()
        for i, port in enumerate(self.ports):
            fwd = self.lookup(self.ns, self.pod, port)
            try:
                if not fwd:
                    raise ConnectionRefusedError
                host, p = fwd["to"].rsplit(":", 1)
                s = socket.create_connection((host, int(p)), timeout=5)
                s.setblocking(False)
            except OSError:
                self.send_msg(2 * i + 1, refused_text(self.ns, self.pod, port).encode())
                continue
            if fwd.get("oversize"):
                self.send_msg(2 * i, b"x" * int(fwd["oversize"]))
            self.pods[i], self.to_pod[i] = s, bytearray()
            if fwd.get("tee"):
                self.tees[i] = open(fwd["tee"], "wb")

    def on_message(self, op, data):
        if not data:
            return
        if self.b64:
            chan, data = data[0] - ord("0"), base64.b64decode(data[1:])
        else:
            chan, data = data[0], data[1:]
        if chan % 2 == 0 and chan // 2 in self.pods:
            self.to_pod[chan // 2] += data

    def parse(self):
        """Frames from the client; False once it sent its close or broke the protocol."""
        b = self.inbuf
        while len(b) >= 2:
            fin, op, masked, n = b[0] >> 7, b[0] & 0xF, b[1] >> 7, b[1] & 0x7F
            at = 2
            if n == 126:
                if len(b) < 4:
                    return True
                n, at = struct.unpack("!H", b[2:4])[0], 4
            elif n == 127:
                if len(b) < 10:
                    return True
                n, at = struct.unpack("!Q", b[2:10])[0], 10
            if not masked or n > MAX_MESSAGE:
                self.close(1002 if not masked else 1009)
                return False
            if len(b) < at + 4 + n:
                return True
            mask = bytes(b[at:at + 4])
            body = bytes(b[at + 4:at + 4 + n])
            payload = (int.from_bytes(body, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
            del b[:at + 4 + n]
            if op == 0x8:
                self.got_close = True
                self.close(struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None)
                return False
            if op == 0x9:
                self.out += frame(0xA, payload)
            elif op in (0x1, 0x2):
                self.msg, self.msg_op = bytearray(payload), op
            elif op == 0x0 and self.msg is not None:
                self.msg += payload
                if len(self.msg) > MAX_MESSAGE:
                    self.close(1009)
                    return False
            if fin and op in (0x0, 0x1, 0x2) and self.msg is not None:
                self.on_message(self.msg_op, bytes(self.msg))
                self.msg = None
        return True

    def close(self, code):
        """Our close frame (once), and the pod connections end."""
        if not self.sent_close:
            self.out += frame(0x8, struct.pack("!H", code) if code else b"")
            self.sent_close = True
            self.closed_by = self.closed_by or ("client" if self.got_close else "server")
            self.deadline = time.monotonic() + 2
        for i in list(self.pods):
            self.end_pod(i)

    def flush_client(self):
        while self.out:
            try:
                n = self.conn.send(self.out[:65536])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                return
            del self.out[:n]

    def client_read(self):
        try:
            data = self.conn.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return
        except OSError:
            data = b""
        if data == b"":
            self.client_eof = True
            self.closed_by = self.closed_by or "client"
            self.close(None)
            self.out.clear()
        elif not self.got_close:
            self.inbuf += data
            self.parse()

    def pod_io(self, i, s, r, w):
        if s in w and self.to_pod[i]:
            try:
                del self.to_pod[i][:s.send(self.to_pod[i])]
            except BlockingIOError:
                pass
            except OSError:
                self.end_pod(i)
                return
        if s in r:
            try:
                data = s.recv(CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                self.send_msg(2 * i, data)
                if i in self.tees:
                    self.tees[i].write(data)
            else:
                self.end_pod(i)  # the pod's side ended: PortForward returns, the pair closes

    def run(self):
        self.start()
        if self.inbuf:
            self.parse()
        while True:
            if not self.pods and not self.sent_close:
                self.close(1000)  # every pair has ended: handleWebSocketStreams returns, conn.Close()
            self.flush_client()
            if self.client_eof or (self.got_close and not self.out):
                break
            if self.deadline and time.monotonic() > self.deadline:
                break
            rl = [self.conn] if len(self.inbuf) < (1 << 21) else []
            wl = [self.conn] if self.out else []
            for i, s in self.pods.items():
                if len(self.out) < (1 << 20):
                    rl.append(s)
                if self.to_pod[i]:
                    wl.append(s)
            if self.conn.pending():
                r, w = [self.conn], []
            else:
                r, w, _ = select.select(rl, wl, [], 0.5)
            if self.conn in r:
                self.client_read()
            for i, s in list(self.pods.items()):
                self.pod_io(i, s, r, w)
        self.close(None)
        self.log(f"WS {self.ns}/{self.pod} closed by the {self.closed_by or 'server'}")

    def end_pod(self, i):
        s = self.pods.pop(i, None)
        if s:
            s.close()
        t = self.tees.pop(i, None)
        if t:
            t.close()


def serve(handler, ns, pod, lookup, log):
    """Upgrade handler's request (already authenticated) and relay until either side ends.
    lookup(ns, pod, port) gives the forward ({"to": "HOST:PORT", ...}) or None."""
    h = handler.headers
    query = handler.path.split("?", 1)[1] if "?" in handler.path else ""
    ports, bad = parse_ports(query)
    key = h.get("Sec-WebSocket-Key")
    if (h.get("Upgrade") or "").lower() != "websocket" or not key:
        return handler.reply(400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "Upgrade request required", "reason": "BadRequest", "code": 400})
    if bad:
        return handler.reply(400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": bad, "reason": "BadRequest", "code": 400})
    offers = offered(h)
    proto = next((p for p in offers if p in (BINARY, BASE64)), None)
    if proto is None and offers:
        handler.connection.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
        handler.close_connection = True
        return None
    accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    head = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n" + (f"Sec-WebSocket-Protocol: {proto}\r\n" if proto else "") + "\r\n")
    t = Tunnel(handler.connection, proto or BINARY, ns, pod, ports, lookup, log)
    first = lookup(ns, pod, ports[0]) or {}
    if first.get("coalesce"):  # the head and the first frames in one write
        t.prefixes()
        handler.connection.sendall(head.encode() + bytes(t.out))
        t.out.clear()
        t.prefixed = True
    else:
        handler.connection.sendall(head.encode())
    handler.close_connection = True
    log(f"WS {ns}/{pod} open {proto or '(binary, no subprotocol)'} ports={','.join(map(str, ports))}"
        + (" coalesced" if t.prefixed else ""))
    handler.connection.setblocking(False)
    try:  # a client that sent frames before reading the 101: what the request's reader took in already
        t.inbuf += handler.rfile.read1(65536) or b""
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, ValueError):
        pass
    try:
        t.run()
    except OSError as e:
        log(f"WS {ns}/{pod} failed: {e}")
    return None
