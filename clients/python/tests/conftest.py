"""Fixtures: the package installed with pip from this tree, and real shoald nodes on loopback.

SHOAL_BIN_DIR names the build directory (shoald, shoalctl, shoal-guest), SHOAL_SOURCE_DIR the
source tree; ctest sets both.
"""
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("SHOAL_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ.get("SHOAL_BIN_DIR") or os.path.join(SOURCE, "build")
START_WAIT_S = 30
MESH_WAIT_S = 30
# A call's limit in the tests: above what a node may take on a loaded machine (a release waits for
# its guest to end, up to guest/stop_timeout_ms and a kill).
CALL_TIMEOUT_MS = 30000


# Node ports, as the C tests pick them (tests/shoal_test.c): outside the ephemeral range, where the
# kernel never hands a port to an outgoing connection, and reserved by an exclusive flock on a file
# of PORTS_DIR held while this process lives, so that tests running at once never pick the same.
PORTS_DIR = "/tmp/shoal-test-ports"
PORTS_FLOOR = 16384
PORTS_CEILING = 49151
_reserved = []


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            low, high = (int(word) for word in ranges.read().split()[:2])
            if 0 < low <= high:
                return low, high
    except (OSError, ValueError):
        pass
    return 32768, 60999


def _free_port():
    if not os.path.isdir(PORTS_DIR):
        try:
            os.mkdir(PORTS_DIR, 0o1777)
            os.chmod(PORTS_DIR, 0o1777)
        except FileExistsError:
            pass
    low, high = _ephemeral_range()
    ports = [port for port in range(PORTS_FLOOR, PORTS_CEILING + 1) if not low <= port <= high]
    start = random.randrange(len(ports))
    for port in ports[start:] + ports[:start]:
        try:
            reservation = os.open(os.path.join(PORTS_DIR, str(port)), os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError:
            continue
        try:
            fcntl.flock(reservation, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port))
        except OSError:
            os.close(reservation)
            continue
        _reserved.append(reservation)
        return port
    raise RuntimeError("every port from %d to %d outside the ephemeral range %d-%d is reserved or bound "
                       "(reservations in %s)" % (PORTS_FLOOR, PORTS_CEILING, low, high, PORTS_DIR))


@pytest.fixture(scope="session")
def shoal(tmp_path_factory):
    """The shoal package, as `pip install clients/python` makes it (into a directory of its own)."""
    work = tmp_path_factory.mktemp("package")
    tree = work / "python"
    shutil.copytree(os.path.join(SOURCE, "clients", "python"), tree,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "shoal_pb2.py"))
    site = work / "site"
    env = dict(os.environ, SHOAL_PROTO=os.path.join(SOURCE, "protocol", "shoal.proto"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(tree)], check=True, env=env)
    sys.path.insert(0, str(site))
    import shoal as package
    assert package.__file__.startswith(str(site))
    return package


class Cluster:
    """NODES shoald processes sharing a cluster key, each admitting an admin and a tenant key."""

    def __init__(self, base, count):
        self.base = base
        self.ctl = os.path.join(BIN, "shoalctl")
        keys = base / "keys"
        subprocess.run([self.ctl, "keygen", "cluster", str(keys)], check=True, capture_output=True)
        subprocess.run([self.ctl, "keygen", "client", "admin", "--role", "admin", str(keys)], check=True,
                       capture_output=True)
        subprocess.run([self.ctl, "keygen", "client", "tenant", "--role", "tenant", "--tenant", "acme/web",
                        str(keys)], check=True, capture_output=True)
        subprocess.run([self.ctl, "keygen", "client", "stranger", "--role", "admin", str(keys / "strangers")],
                       check=True, capture_output=True)
        self.cluster_key = str(keys / "cluster.cert")
        self.admin = str(keys / "admin.cert")
        self.tenant = str(keys / "tenant.cert")
        self.stranger = str(keys / "strangers" / "stranger.cert")
        self.nodes = []
        for index in range(1, count + 1):
            node_dir = base / ("n%d" % index)
            clients = node_dir / "clients"
            clients.mkdir(parents=True)
            shutil.copy(self.admin, clients / "admin.cert")
            shutil.copy(self.tenant, clients / "tenant.cert")
            endpoint = "tcp://127.0.0.1:%d" % _free_port()
            env = dict(os.environ, SHOAL_NODE_ID="n%d" % index, SHOAL_NODE_BIND=endpoint,
                       SHOAL_NODE_ADVERTISE=endpoint, SHOAL_NODE_DATA_DIR=str(node_dir / "data"),
                       SHOAL_SECURITY_CLUSTER_CERT=str(keys / "cluster.cert"),
                       SHOAL_SECURITY_CLIENTS_DIR=str(clients), SHOAL_SECURITY_GENERATE_KEYS="0",
                       SHOAL_MESH_JOIN=self.nodes[0]["endpoint"] if self.nodes else "",
                       SHOAL_MESH_PROBE_INTERVAL_MS="200", SHOAL_MESH_SUSPECT_TIMEOUT_MS="3000",
                       SHOAL_LIMITS_MEMORY_MB="1024")
            self.nodes.append({"id": "n%d" % index, "endpoint": endpoint, "env": env, "process": None,
                               "log": str(base / ("n%d.log" % index))})
        for index in range(len(self.nodes)):
            self.start(index)

    def start(self, index):
        node = self.nodes[index]
        log = open(node["log"], "a")
        node["process"] = subprocess.Popen([os.path.join(BIN, "shoald")], env=node["env"], stdout=log,
                                           stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            assert node["process"].poll() is None, "n%d exited: %s" % (index + 1, open(node["log"]).read()[-2000:])
            try:
                with self.client(index, timeout_ms=500) as client:
                    client.status()
                    return
            except Exception:
                time.sleep(0.1)
        raise AssertionError("n%d did not answer within %d s" % (index + 1, START_WAIT_S))

    def client(self, index, cert=None, timeout_ms=CALL_TIMEOUT_MS):
        import shoal
        return shoal.Client(self.nodes[index]["endpoint"], cert or self.admin, self.cluster_key, timeout_ms)

    def wait_mesh(self):
        deadline = time.monotonic() + MESH_WAIT_S
        while time.monotonic() < deadline:
            # Alive, and no longer held back for a lock sweep (moves and locks answer 503 until then).
            alive = 0
            for index in range(len(self.nodes)):
                with self.client(index) as client:
                    held = {member.node_id for member in client.peers_sweeping()}
                    alive += sum(1 for peer in client.peers()
                                 if not peer.self and peer.state == 1 and peer.node_id not in held)
            if alive == len(self.nodes) * (len(self.nodes) - 1):
                return
            time.sleep(0.2)
        raise AssertionError("the mesh did not form within %d s" % MESH_WAIT_S)

    def stop(self):
        # Guests outlive their node: every claim still held goes first (a test that failed midway
        # leaves no guest behind).
        for index, node in enumerate(self.nodes):
            if node["process"] and node["process"].poll() is None:
                try:
                    with self.client(index) as client:
                        for claim in client.claim_list():
                            if claim.state != 7:  # CLAIM_RELEASED
                                client.claim_release(claim.id)
                except Exception as error:  # the node may be stopped or stuck: what the test was about
                    print("n%d: claims not released at the end: %s" % (index + 1, error))
        for node in self.nodes:
            process = node["process"]
            if process and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture
def cluster(shoal, tmp_path):
    made = Cluster(tmp_path, 2)
    made.wait_mesh()
    yield made
    made.stop()
