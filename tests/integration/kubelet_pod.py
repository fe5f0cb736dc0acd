#!/usr/bin/python3
"""kubelet_pod.py - a stand-in for the kubelet that runs one pod in real containers with podman,
for tests/integration/job_pod.sh.

No kubelet or API server can run on the test machine, so this plays the kubelet's part for one
pod, following the published contract, not the kubelet's code:

  - Sidecar containers (KEP-753, "Sidecar containers" in the Kubernetes docs, 1.29+): init
    containers start one at a time, in order. An init container with restartPolicy Always (a
    sidecar) is started, and the next one starts once it has *started*: its startupProbe, if it
    has one, succeeded, else its process is running; it is not waited for. A regular init
    container must exit 0 before the next starts. Then the app containers start. A sidecar that
    exits while the pod runs is started again. When every regular container has exited, the
    sidecars get SIGTERM one at a time in the reverse of their order, within the pod's one
    terminationGracePeriodSeconds (default 30), and SIGKILL at its end. The pod is Succeeded
    when every regular container exited 0; sidecars' exit codes do not count.
  - Pod sandbox: one pause container (catatonit -P, as podman's and CRI runtimes' infra
    containers) owns the network, IPC and UTS namespaces (hostname = pod name) and every
    container joins them, as containers of one `podman pod` do. It is built by hand rather than
    with `podman pod create` because that builds podman's pause image through containers/image,
    which writes root's blob cache in /var/lib/containers whatever --root says; nothing here
    touches state outside DIR (but the pod's cgroup, removed by `cleanup`).
  - Images: none can be pulled. Each image reference in the spec must be mapped with
    --image REF=DIR to a directory that is that image's file system (copied per container and
    run with --rootfs); --entrypoint REF=JSON gives its ENTRYPOINT; --bind HOST:PATH mounts a host
    directory read-only into every container (the base layers: /usr, /lib, the .NET install).
    command replaces the ENTRYPOINT and args follow it, as in the pod API.
  - Per container: env (value only), emptyDir volumes (host directories, mode 0777 as the
    kubelet makes them; subPath, readOnly), securityContext (pod level, then container level:
    runAsUser/runAsGroup, runAsNonRoot checked against the uid as the kubelet checks it, an
    image without USER counting as root; capabilities add/drop; readOnlyRootFilesystem, without
    podman's extra tmpfs mounts; allowPrivilegeEscalation false as no_new_privs; privileged;
    seccompProfile RuntimeDefault as podman's default profile, unset or Unconfined as none, the
    kubelet's default), resources (limits.memory, limits.cpu, requests.cpu as cpu shares),
    workingDir, exec probes (startupProbe; livenessProbe, whose failures are recorded).
  - Departures: no restarts for restartPolicy OnFailure (a failed container fails the pod), no
    restart of a container whose liveness probe reaches its failure threshold (recorded as an
    event), no $(VAR) expansion, no valueFrom/envFrom, no other volume types, httpGet/tcpSocket
    probes, lifecycle hooks, fsGroup or supplementalGroups (all refused, exit 2, rather than run
    differently from a kubelet), no image pull, no readiness.

Usage (the caller sets nothing else; CONTAINERS_CONF defaults to tests/containers/containers.conf):
  kubelet_pod.py run --dir DIR --manifest FILE [--image REF=ROOTFS]... [--entrypoint REF=JSON]...
                     [--bind HOST:PATH]... [--timeout SECS] [--name POD]
      Runs the pod of FILE's first document (a Pod, or a workload's pod template: Job, CronJob,
      Deployment, ...). Writes DIR/events.jsonl (one JSON object a line: t (Unix time), event,
      container, ...), DIR/logs/CONTAINER.log (its output, stdout and stderr) and DIR/status.json
      (phase, reason, runningAtEnd: containers other than the pause container still running when
      the pod ended, and per container: exitCode, startedAt, finishedAt, sigterm, sigkill as Unix
      times). Leaves the stopped containers for inspection. Exit 0 when the pod is Succeeded, 1
      when it Failed (or exceeded --timeout, default 120: everything is killed), 2 when the spec
      asks for something this stand-in does not do.
  kubelet_pod.py podman --dir DIR ARGS...   podman with DIR's storage (for checks)
  kubelet_pod.py cleanup --dir DIR          removes every container of DIR and the pod's cgroup
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAUSE = "pause"


class Unsupported(Exception):
    """The spec asks for something this stand-in does not do (exit 2)."""


def podman_argv(d):
    d = os.path.abspath(d)
    return ["podman", "--root", f"{d}/storage", "--runroot", f"{d}/run", "--tmpdir", f"{d}/tmp",
            "--storage-driver", "vfs", "--network-config-dir", f"{d}/net",
            "--volumepath", f"{d}/volumes-podman", "--events-backend", "file"]


def podman_env():
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", os.path.join(ROOT, "tests/containers/containers.conf"))
    return env


class Pod:
    def __init__(self, args):
        self.dir = os.path.abspath(args.dir)
        self.timeout = args.timeout
        self.images = dict(kv.split("=", 1) for kv in args.image)
        self.entrypoints = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.entrypoint)}
        self.binds = args.bind
        with open(args.manifest) as f:
            doc = next(d for d in yaml.safe_load_all(f) if d)
        self.meta, self.spec = pod_of(doc)
        self.name = args.name or self.meta.get("name") or doc.get("metadata", {}).get("name", "pod")
        self.cgroup = f"/diagport-test-pod-{os.getpid()}"
        self.pm = podman_argv(self.dir)
        self.env = podman_env()
        self.deadline = time.monotonic() + self.timeout
        self.status = {"phase": "Pending", "reason": "", "cgroup": self.cgroup, "containers": {}}
        self.run_args, self.sidecars = {}, []
        for sub in ("logs", "rootfs", "volumes", "run", "tmp", "net"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        with open(os.path.join(self.dir, "pod.json"), "w") as f:
            json.dump({"name": self.name, "cgroup": self.cgroup}, f)
        self.events = open(os.path.join(self.dir, "events.jsonl"), "a", buffering=1)

    # --- podman
    def podman(self, *a, check=True, timeout=60):
        p = subprocess.run(self.pm + list(a), env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"podman {' '.join(a[:3])}: {p.stderr.strip()}")
        return p

    def cname(self, c):
        return f"{self.name}-{c}"

    def state(self, c):
        p = self.podman("inspect", "--format", "{{json .State}}", self.cname(c), check=False)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def event(self, event, container=None, **kw):
        rec = {"t": round(time.time(), 3), "event": event}
        if container:
            rec["container"] = container
        rec.update(kw)
        self.events.write(json.dumps(rec) + "\n")

    # --- the pod
    def run(self):
        spec = self.spec
        self.grace = spec.get("terminationGracePeriodSeconds", 30)
        self.restart = spec.get("restartPolicy", "Always")
        inits = spec.get("initContainers") or []
        regular = spec.get("containers") or []
        self.sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
        self.volumes = self.make_volumes(spec.get("volumes") or [])
        # every container's arguments first: nothing starts for a spec that cannot run
        self.run_args = {c["name"]: self.container_args(c) for c in inits + regular}
        self.start_pause()
        for c in inits:
            if not self.start_init(c):
                return self.finish("Failed")
        for c in regular:
            self.start(c)
        failed = self.wait_regular(regular)
        self.stop_sidecars()
        return self.finish("Failed" if failed else "Succeeded")

    def start_pause(self):
        root = os.path.join(self.dir, "rootfs", PAUSE)
        os.makedirs(root, exist_ok=True)
        a = ["run", "-d", "--name", self.cname(PAUSE), "--hostname", self.name,
             "--network", "none", "--ipc", "shareable", "--cgroup-parent", self.cgroup]
        for b in self.binds:
            a += ["-v", f"{b}:ro"]
        self.podman(*a, "--rootfs", root, "/usr/bin/catatonit", "-P")
        self.event("sandbox-ready")

    def start(self, c):
        self.podman(*self.run_args[c["name"]])
        self.event("started", c["name"])

    def start_init(self, c):
        n = c["name"]
        self.start(c)
        if c.get("restartPolicy") == "Always":
            if "startupProbe" in c:
                ok = self.probe_until(c, c["startupProbe"], "startup")
            else:
                ok = self.running_or_exited(n) == "running"
            if not ok:
                self.status["reason"] = f"sidecar {n} did not start"
                return False
            self.event("sidecar-started", n)
            self.next_liveness = {s["name"]: time.monotonic() for s in self.sidecars}
            return True
        while True:
            st = self.state(n)
            if st and st["Status"] == "exited":
                self.event("exited", n, exitCode=st["ExitCode"])
                if st["ExitCode"] != 0:
                    self.status["reason"] = f"init container {n} exited {st['ExitCode']}"
                    return False
                return True
            if self.past_deadline():
                return False
            time.sleep(0.1)

    def running_or_exited(self, n):
        while not self.past_deadline():
            st = self.state(n)
            if st and st["Status"] in ("running", "exited"):
                return st["Status"]
            time.sleep(0.05)
        return "timeout"

    def exec_probe(self, c, probe):
        cmd = (probe.get("exec") or {}).get("command")
        t = probe.get("timeoutSeconds", 1)
        try:
            p = self.podman("exec", self.cname(c["name"]), *cmd, check=False, timeout=t + 5)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0

    def probe_until(self, c, probe, kind):
        """A startup probe: every periodSeconds until success, or failureThreshold failures."""
        time.sleep(probe.get("initialDelaySeconds", 0))
        period = probe.get("periodSeconds", 10)
        for i in range(probe.get("failureThreshold", 3)):
            if self.past_deadline():
                return False
            st = self.state(c["name"])
            if not st or st["Status"] != "running":
                self.event(f"{kind}-probe-container-not-running", c["name"])
                return False
            if self.exec_probe(c, probe):
                self.event(f"{kind}-probe-succeeded", c["name"], attempt=i + 1)
                return True
            self.event(f"{kind}-probe-failed", c["name"], attempt=i + 1)
            time.sleep(period)
        return False

    def liveness(self):
        now = time.monotonic()
        for s in self.sidecars:
            probe = s.get("livenessProbe")
            if not probe or now < self.next_liveness[s["name"]]:
                continue
            self.next_liveness[s["name"]] = now + probe.get("periodSeconds", 10)
            if not self.exec_probe(s, probe):
                self.event("liveness-probe-failed", s["name"])

    def wait_regular(self, regular):
        """Until every regular container has exited; True when one failed or time ran out."""
        left = {c["name"] for c in regular}
        failed = False
        while left:
            if self.past_deadline():
                return True
            for n in sorted(left):
                st = self.state(n)
                if st and st["Status"] == "exited":
                    left.discard(n)
                    self.event("exited", n, exitCode=st["ExitCode"])
                    if st["ExitCode"] != 0:
                        failed = True
                        self.status["reason"] = f"container {n} exited {st['ExitCode']}"
            for s in self.sidecars:
                st = self.state(s["name"])
                if left and st and st["Status"] == "exited":
                    self.event("sidecar-exited-early", s["name"], exitCode=st["ExitCode"])
                    self.podman("start", self.cname(s["name"]))
                    self.event("restarted", s["name"])
            if left:
                self.liveness()
                time.sleep(0.1)
        return failed

    def stop_sidecars(self):
        end = time.monotonic() + self.grace
        for s in reversed(self.sidecars):
            n = s["name"]
            rec = self.status["containers"].setdefault(n, {})
            st = self.state(n)
            if not st or st["Status"] != "running":
                continue
            rec["sigterm"] = time.time()
            self.podman("kill", "--signal", "TERM", self.cname(n), check=False)
            self.event("sigterm", n)
            while time.monotonic() < end:
                st = self.state(n)
                if st and st["Status"] == "exited":
                    break
                time.sleep(0.05)
            else:
                rec["sigkill"] = time.time()
                self.podman("kill", "--signal", "KILL", self.cname(n), check=False)
                self.event("sigkill", n)
                self.podman("wait", self.cname(n), check=False)
            st = self.state(n)
            self.event("exited", n, exitCode=st["ExitCode"] if st else None)

    def past_deadline(self):
        if time.monotonic() < self.deadline:
            return False
        if self.status["reason"] != "DeadlineExceeded":
            self.status["reason"] = "DeadlineExceeded"
            self.event("deadline-exceeded", seconds=self.timeout)
        return True

    def finish(self, phase):
        if self.status["reason"] == "DeadlineExceeded":
            phase = "Failed"
        names = [n for n in self.run_args]
        running = []
        for n in names:
            st = self.state(n)
            if st and st["Status"] == "running":
                running.append(n)
        self.status["runningAtEnd"] = running
        if running:  # only a failed pod gets here with containers running: kill them, as the kubelet would
            for n in running:
                self.podman("kill", "--signal", "KILL", self.cname(n), check=False)
        self.podman("stop", "-t", "0", self.cname(PAUSE), check=False)
        for n in names:
            st = self.state(n)
            rec = self.status["containers"].setdefault(n, {})
            if st:
                rec.update(exitCode=st["ExitCode"], state=st["Status"],
                           startedAt=unix_time(st.get("StartedAt")),
                           finishedAt=unix_time(st.get("FinishedAt")))
            p = self.podman("logs", self.cname(n), check=False)
            with open(os.path.join(self.dir, "logs", f"{n}.log"), "w") as f:
                f.write(p.stdout + p.stderr)
        self.status["phase"] = phase
        self.event("pod-" + phase.lower(), reason=self.status["reason"])
        with open(os.path.join(self.dir, "status.json"), "w") as f:
            json.dump(self.status, f, indent=1)
        return 0 if phase == "Succeeded" else 1

    # --- translation of the spec
    def make_volumes(self, vols):
        out = {}
        for v in vols:
            if set(v) - {"name", "emptyDir"}:
                raise Unsupported(f"volume {v['name']}: only emptyDir volumes")
            p = os.path.join(self.dir, "volumes", v["name"])
            os.makedirs(p, exist_ok=True)
            os.chmod(p, 0o777)
            out[v["name"]] = p
        return out

    def container_args(self, c):
        n = c["name"]
        for k in ("envFrom", "lifecycle", "readinessProbe"):
            if k in c:
                raise Unsupported(f"container {n}: {k}")
        for k in ("startupProbe", "livenessProbe"):
            if k in c and set(c[k]) & {"httpGet", "tcpSocket", "grpc"}:
                raise Unsupported(f"container {n}: {k} other than exec")
        image = c.get("image")
        if image not in self.images:
            raise Unsupported(f"container {n}: image {image} has no --image mapping (nothing can be pulled)")
        root = os.path.join(self.dir, "rootfs", n)
        shutil.copytree(self.images[image], root, symlinks=True)
        sandbox = self.cname(PAUSE)
        a = ["run", "-d", "--name", self.cname(n), "--network", f"container:{sandbox}",
             "--ipc", f"container:{sandbox}", "--uts", f"container:{sandbox}",
             "--cgroup-parent", self.cgroup, "--log-driver", "k8s-file"]
        for e in c.get("env") or []:
            if "valueFrom" in e:
                raise Unsupported(f"container {n}: env {e['name']} valueFrom")
            a += ["-e", f"{e['name']}={e.get('value', '')}"]
        for m in c.get("volumeMounts") or []:
            if m["name"] not in self.volumes:
                raise Unsupported(f"container {n}: mount of unknown volume {m['name']}")
            host = self.volumes[m["name"]]
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
                os.makedirs(host, exist_ok=True)
            a += ["-v", f"{host}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
        for b in self.binds:
            a += ["-v", f"{b}:ro"]
        a += self.security_args(c)
        a += resource_args(c.get("resources") or {})
        if c.get("workingDir"):
            a += ["--workdir", c["workingDir"]]
        argv = list(c.get("command") or self.entrypoints.get(image) or []) + list(c.get("args") or [])
        if not argv:
            raise Unsupported(f"container {n}: no command and no --entrypoint for {image}")
        for s in argv + [e.get("value", "") for e in c.get("env") or []]:
            if re.search(r"\$\([A-Za-z_][A-Za-z0-9_]*\)", str(s)):
                raise Unsupported(f"container {n}: $(VAR) references")
        return a + ["--entrypoint", json.dumps([str(x) for x in argv]), "--rootfs", root]

    def security_args(self, c):
        pod_sc = self.spec.get("securityContext") or {}
        for k in ("fsGroup", "supplementalGroups", "sysctls"):
            if k in pod_sc:
                raise Unsupported(f"pod securityContext.{k}")
        sc = dict((k, v) for k, v in pod_sc.items() if k in (
            "runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile"))
        sc.update(c.get("securityContext") or {})
        a = []
        uid = sc.get("runAsUser")
        if sc.get("runAsNonRoot") and not uid:
            # the kubelet's check: an image without USER runs as root, which runAsNonRoot refuses
            raise Unsupported(f"container {c['name']}: runAsNonRoot with uid {uid or 0} (CreateContainerConfigError)")
        if uid is not None:
            a += ["--user", f"{uid}:{sc['runAsGroup']}" if "runAsGroup" in sc else str(uid)]
        caps = sc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            a += ["--cap-drop", cap]
        for cap in caps.get("add") or []:
            a += ["--cap-add", cap]
        if sc.get("readOnlyRootFilesystem"):
            a += ["--read-only", "--read-only-tmpfs=false"]
        if sc.get("allowPrivilegeEscalation") is False:
            a += ["--security-opt", "no-new-privileges"]
        if sc.get("privileged"):
            a += ["--privileged"]
        seccomp = (sc.get("seccompProfile") or {}).get("type", "Unconfined")
        if seccomp == "Unconfined":
            a += ["--security-opt", "seccomp=unconfined"]
        elif seccomp != "RuntimeDefault":
            raise Unsupported(f"container {c['name']}: seccompProfile {seccomp}")
        return a


def resource_args(res):
    a = []
    lim, req = res.get("limits") or {}, res.get("requests") or {}
    if "memory" in lim:
        a += ["--memory", str(quantity(lim["memory"]))]
    if "cpu" in lim:
        a += ["--cpus", str(quantity(lim["cpu"]))]
    if "cpu" in req:  # the kubelet's shares: milli-CPUs * 1024 / 1000, at least 2
        a += ["--cpu-shares", str(max(2, int(quantity(req["cpu"]) * 1024)))]
    return a


def quantity(q):
    m = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(q))
    if not m:
        raise Unsupported(f"quantity {q}")
    mult = {None: 1, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
            "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[m.group(2)]
    v = float(m.group(1)) * mult
    return int(v) if mult >= 1 else v


def pod_of(doc):
    """(template metadata, pod spec) of a Pod or of a workload's pod template."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return doc.get("metadata") or {}, spec
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    t = spec.get("template") or {}
    if "spec" not in t:
        raise Unsupported(f"no pod spec in a {kind}")
    return t.get("metadata") or {}, t["spec"]


def unix_time(s):
    """podman's RFC 3339 time ('2026-11-25T15:21:40.400829103Z', nanoseconds) as Unix time, None
    for its zero time."""
    if not s or s.startswith("0001-"):
        return None
    m = re.fullmatch(r"(\d+-\d+-\d+T\d+:\d+:\d+)(\.\d+)?(Z|[+-]\d\d:\d\d)", s)
    t = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return round(t.timestamp() + float(m.group(2) or 0), 6)


def cleanup(d):
    pm, env = podman_argv(d), podman_env()
    subprocess.run(pm + ["rm", "-a", "-f", "-t", "0"], env=env, capture_output=True)
    try:
        with open(os.path.join(d, "pod.json")) as f:
            cg = json.load(f)["cgroup"]
    except (OSError, ValueError, KeyError):
        return 0
    for top in os.listdir("/sys/fs/cgroup"):
        base = os.path.join("/sys/fs/cgroup", top) + cg
        for dirpath, _, _ in sorted(os.walk(base), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
    return 0


def main():
    ap = argparse.ArgumentParser(prog="kubelet_pod.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--dir", required=True)
    r.add_argument("--manifest", required=True)
    r.add_argument("--image", action="append", default=[])
    r.add_argument("--entrypoint", action="append", default=[])
    r.add_argument("--bind", action="append", default=[])
    r.add_argument("--timeout", type=float, default=120)
    r.add_argument("--name")
    for name in ("podman", "cleanup"):
        s = sub.add_parser(name)
        s.add_argument("--dir", required=True)
        if name == "podman":
            s.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.cmd == "podman":
        os.execvpe("podman", podman_argv(a.dir) + a.rest, podman_env())
    if a.cmd == "cleanup":
        return cleanup(a.dir)
    try:
        pod = Pod(a)
        try:
            return pod.run()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"kubelet_pod.py: {e}", file=sys.stderr)
            pod.status["reason"] = f"stand-in error: {e}"
            return pod.finish("Failed")
    except Unsupported as e:
        print(f"kubelet_pod.py: unsupported: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
