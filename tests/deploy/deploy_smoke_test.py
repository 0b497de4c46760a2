#!/usr/bin/env python3
"""Runs the real syncopated the way deploy/ ships it, so the shipped files cannot drift from the
binary: the systemd unit (its ExecStart, Environment and the shipped syncopated.conf) and the
Kubernetes DaemonSet (its args, env with downward-API fields, volume mounts, the image's ENV from
the Dockerfile, and its gRPC probes).

Paths under /run/syncopate, /var/cache/syncopate and /etc/syncopate move into a temporary root,
and the TCP listener binds an ephemeral loopback port (flags override the config, as documented);
everything else is taken from the files as shipped. Each daemon must come up, answer health on
its Unix socket and on TCP without a token (what probes and load balancers send), refuse an
unauthenticated TCP call and accept one with the token, name itself as configured, and exit 0 on
SIGTERM within the stop timeout the unit or the pod gives it.

usage: deploy_smoke_test.py <syncopated> <deploy_dir>
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

try:
    import grpc
    import yaml
except ImportError as missing:
    sys.exit("FAIL: %s (python3-grpcio and python3-yaml: run scripts/install-deps.sh)" % missing)

RAW = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
TOKEN = "deploy-smoke-token"
SERVING = b"\x08\x01"  # HealthCheckResponse{status: SERVING}


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


class Remap:
    """Moves the deployment's host paths into a scratch root."""

    def __init__(self, root):
        self.prefixes = {p: os.path.join(root, p.strip("/").replace("/", "_"))
                         for p in ("/run/syncopate", "/var/cache/syncopate", "/etc/syncopate")}
        for d in self.prefixes.values():
            os.makedirs(d, exist_ok=True)

    def __call__(self, text):
        for old, new in self.prefixes.items():
            text = text.replace(old, new)
        return text


def read_unit(path):
    """The [Service] section of a systemd unit: key -> list of values."""
    section, service = None, {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            key, value = line.split("=", 1)
            service.setdefault(key, []).append(value)
    return service


def read_conf(path):
    conf = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            key, value = (part.strip() for part in line.split("=", 1))
            conf[key] = value
    return conf


def read_dockerfile_env(path):
    """ENV key=value pairs of the final stage (continuation lines joined)."""
    text = open(path).read().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("FROM "):
            env = {}  # a new stage starts clean
        elif line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, value = pair.split("=", 1)
                env[key] = value
    return env


def health(target):
    channel = grpc.insecure_channel(target)
    try:
        return channel.unary_unary("/grpc.health.v1.Health/Check", **RAW)(b"", timeout=10)
    finally:
        channel.close()


def stats(target, token=None):
    """Daemon.Stats; returns (status code, daemon name)."""
    channel = grpc.insecure_channel(target)
    metadata = [("x-syncopate-token", token)] if token else None
    try:
        reply = channel.unary_unary("/syncopate.v1.Daemon/Stats", **RAW)(
            b"", timeout=10, metadata=metadata)
    except grpc.RpcError as error:
        return error.code(), None
    finally:
        channel.close()
    check(reply[:1] == b"\x0a", "Stats reply does not start with field 1 (daemon): %r" % reply[:8])
    return grpc.StatusCode.OK, reply[2:2 + reply[1]].decode()


class Daemon:
    def __init__(self, argv, env, scratch, label):
        self.label = label
        self.log = os.path.join(scratch, label + ".log")
        self.port_file = os.path.join(scratch, label + ".port")
        argv = argv + ["--listen=127.0.0.1:0", "--port_file=" + self.port_file]
        print("%s: %s" % (label, " ".join(argv)))
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=log)

    def wait_ready(self, socket_path):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.fail("exited with %d before serving" % self.process.returncode)
            if os.path.exists(socket_path) and os.path.exists(self.port_file) and \
                    os.path.getsize(self.port_file) > 0:
                return "127.0.0.1:" + open(self.port_file).read().strip()
            time.sleep(0.05)
        self.fail("not serving after 30 s")

    def stop(self, grace_seconds):
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.fail("still running %s s after SIGTERM" % grace_seconds)
        if code != 0:
            self.fail("exited with %d after SIGTERM" % code)

    def fail(self, message):
        if self.process.poll() is None:
            self.process.kill()
        fail("%s: %s\n--- daemon log ---\n%s" % (self.label, message, open(self.log).read()))


def exercise(daemon, socket_path, name_pattern, grace_seconds):
    """What every deployment must give: health locally and to token-less probes, token-gated
    TCP, its name (node@address, as peers see it), and a clean drain. The daemon never outlives
    this call, whichever check fails."""
    try:
        checks(daemon, socket_path, name_pattern, grace_seconds)
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()


def checks(daemon, socket_path, name_pattern, grace_seconds):
    tcp = daemon.wait_ready(socket_path)
    check(health("unix:" + socket_path) == SERVING, daemon.label + ": health on the Unix socket")
    check(health(tcp) == SERVING, daemon.label + ": health over TCP without a token (probes)")
    code, _ = stats(tcp)
    check(code == grpc.StatusCode.UNAUTHENTICATED,
          "%s: Stats over TCP without the token answered %s" % (daemon.label, code))
    code, got = stats(tcp, TOKEN)
    check(code == grpc.StatusCode.OK, "%s: Stats over TCP with the token: %s" % (daemon.label, code))
    check(re.fullmatch(name_pattern, got) is not None,
          "%s: daemon calls itself %r, deployment says %r" % (daemon.label, got, name_pattern))
    code, got = stats("unix:" + socket_path)
    check(code == grpc.StatusCode.OK, daemon.label + ": Stats on the Unix socket needs no token")
    daemon.stop(grace_seconds)


def systemd_unit(syncopated, deploy, scratch):
    unit = read_unit(os.path.join(deploy, "syncopated.service"))
    conf_text = open(os.path.join(deploy, "syncopated.conf")).read()
    conf = read_conf(os.path.join(deploy, "syncopated.conf"))
    # Static: ProtectSystem=strict leaves only ReadWritePaths writable; the daemon writes its
    # socket and its cache, so both must lie there.
    writable = " ".join(unit.get("ReadWritePaths", [])).split()
    for key in ("unix_socket", "cache_dir"):
        check(any(conf[key].startswith(w.rstrip("/") + "/") or conf[key] == w for w in writable),
              "syncopated.conf %s=%s is outside ReadWritePaths %s" % (key, conf[key], writable))
    check(os.path.dirname(conf["unix_socket"]) == "/run/" + unit["RuntimeDirectory"][0],
          "unix_socket is not in the unit's RuntimeDirectory")

    remap = Remap(scratch)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCOPATE_")}
    for assignment in unit.get("Environment", []):
        key, value = assignment.split("=", 1)
        env[key] = remap(value)
    check(env.get("SYNCOPATE_CONFIG") == remap("/etc/syncopate/syncopated.conf"),
          "the unit does not point SYNCOPATE_CONFIG at /etc/syncopate/syncopated.conf")
    with open(env["SYNCOPATE_CONFIG"], "w") as f:
        f.write(remap(conf_text))
    with open(remap(conf["token_file"]), "w") as f:
        f.write(TOKEN + "\n")
    argv = shlex.split(remap(unit["ExecStart"][0]))
    check(argv[0] == "/usr/local/bin/syncopated", "ExecStart runs %s" % argv[0])
    argv[0] = syncopated
    daemon = Daemon(argv, env, scratch, "systemd")
    stop_timeout = int(unit["TimeoutStopSec"][0])
    check(int(conf["shutdown_grace_ms"]) / 1000 < stop_timeout,
          "shutdown_grace_ms does not fit in TimeoutStopSec")
    # No advertise_address in the shipped config: the node name and the bound address.
    exercise(daemon, remap(conf["unix_socket"]), re.escape(os.uname().nodename) + r"@.+",
             stop_timeout)


def substitute(text, env):
    """Kubernetes $(VAR) expansion."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def daemonset(syncopated, deploy, scratch):
    docs = yaml.safe_load(open(os.path.join(deploy, "daemonset.yaml")))
    pod = docs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    image_env = read_dockerfile_env(os.path.join(deploy, "Dockerfile"))

    # Static: probes and hostPort agree with the port the image listens on.
    listen_port = int(image_env["SYNCOPATE_LISTEN"].rsplit(":", 1)[1])
    ports = {p["name"]: p for p in container["ports"]}
    check(ports["peers"]["containerPort"] == listen_port == ports["peers"]["hostPort"],
          "container port %s vs image SYNCOPATE_LISTEN port %d" % (ports["peers"], listen_port))
    for probe in ("readinessProbe", "livenessProbe"):
        check(container[probe]["grpc"]["port"] == listen_port, probe + " probes another port")
    check(container["securityContext"]["runAsUser"] == 10001 and
          "--uid 10001" in open(os.path.join(deploy, "Dockerfile")).read(),
          "runAsUser and the image's syncopate uid differ")

    # Volumes: every mount is a host directory or the token secret; map both into scratch.
    volumes = {v["name"]: v for v in pod["volumes"]}
    remap = Remap(scratch)
    for mount in container["volumeMounts"]:
        check(mount["name"] in volumes, "mount %s has no volume" % mount["name"])
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            check(volume["hostPath"]["path"] == mount["mountPath"],
                  "%s: host and container paths differ; host clients look for the socket at "
                  "the host path" % mount["name"])
        if "secret" in volume:
            os.makedirs(remap(mount["mountPath"]), exist_ok=True)
            with open(os.path.join(remap(mount["mountPath"]), "token"), "w") as f:
                f.write(TOKEN)

    # Environment: the image's ENV, then the container's, downward-API fields filled in.
    node_name, node_ip = "gpu-node-7", "127.0.0.1"
    fields = {"spec.nodeName": node_name, "status.hostIP": node_ip}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCOPATE_")}
    env.update({k: remap(v) for k, v in image_env.items()})
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = remap(substitute(str(var["value"]), env))
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    check(os.path.exists(env["SYNCOPATE_TOKEN_FILE"]),
          "SYNCOPATE_TOKEN_FILE %s is not the mounted secret's key" % env["SYNCOPATE_TOKEN_FILE"])
    argv = [syncopated] + [substitute(arg, env) for arg in container.get("args", [])]
    daemon = Daemon(argv, env, scratch, "daemonset")
    # The pod's node name and the address peers reach it at (host IP, hostPort).
    exercise(daemon, env["SYNCOPATE_UNIX_SOCKET"], re.escape("%s@%s:%d" % (node_name, node_ip,
                                                                           listen_port)),
             int(pod["terminationGracePeriodSeconds"]))


def main():
    if len(sys.argv) != 3:
        fail(__doc__)
    syncopated, deploy = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for name, run in (("systemd", systemd_unit), ("daemonset", daemonset)):
        with tempfile.TemporaryDirectory(prefix="deploy-" + name + "-") as scratch:
            run(syncopated, deploy, scratch)
        print("%s: OK" % name)


if __name__ == "__main__":
    main()
