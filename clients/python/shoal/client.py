"""A CurveZMQ connection to one shoal node, request by request, as libshoal.

Frame 1 of every message is a protobuf Envelope (version, type, request
id, status, message, payload: the type's body, encoded). The connection is
a DEALER presenting our client key to the node's cluster key; a socket
monitor tells a refused key and an endpoint nobody answers at apart from a
timeout. Calls about a claim that answer 404 look the claim up in the
registry and ask its owner, as libshoal does.
"""
import glob
import contextlib
import hashlib
import os
import time

import zmq
from zmq.utils import z85

from . import errors
from . import shoal_pb2 as pb

PROTOCOL_VERSION = 1
DEFAULT_ENDPOINT = "tcp://127.0.0.1:7400"
DEFAULT_KEYS_DIR = "./shoal-data/keys"
DEFAULT_CLUSTER_KEY = DEFAULT_KEYS_DIR + "/cluster.cert"
DEFAULT_TIMEOUT_MS = 5000
# How often a watch is renewed: well inside the node's lease.
WATCH_RENEW_MS = 1000
# How often a move's progress is asked for.
MOVE_POLL_MS = 200
# A refused reader resolves the claim again and asks again at most this many times (as libshoal's
# SHOAL_LOCK_READ_RESOLVES), waiting what the refusal says, doubled each time up to the most below.
LOCK_READ_RESOLVES = 8
LOCK_READ_WAIT_MAX_MS = 2000
# An object's bytes go up and come back in chunks of at most this many (SHOAL_OBJECT_CHUNK_MAX).
OBJECT_CHUNK_MAX = 512 * 1024
# A checksum carries its algorithm (shoal.proto's ChecksumAlgorithm): 32 bytes are BLAKE2b-256, 0x01
# then 16 bytes XXH3-128. libshoal checksums with XXH3-128; this client with BLAKE2b-256, which
# hashlib has (XXH3 is not in Python's standard library), and names it in each add: the node hashes
# the chunks as they arrive with the algorithm the add names, and checks every instance with the
# algorithm its checksum carries.
OBJECT_CHECKSUM_SIZE = 32
CHECKSUM_XXH3_TAG = 0x01
CHECKSUM_XXH3_SIZE = 17


def checksum_algorithm(checksum):
    """The algorithm of an object's checksum (bytes): "blake2b-256", "xxh3-128", or None (none, or
    one this client does not know)."""
    if len(checksum) == OBJECT_CHECKSUM_SIZE:
        return "blake2b-256"
    if len(checksum) == CHECKSUM_XXH3_SIZE and checksum[0] == CHECKSUM_XXH3_TAG:
        return "xxh3-128"
    return None
# An open whose instances were all write-locked resolves the name again this many times, pausing
# from the first figure up to the second (libshoal's).
OBJECT_RESOLVE_TRIES = 30
OBJECT_RESOLVE_PAUSE_MS = 5
OBJECT_RESOLVE_PAUSE_MAX_MS = 200
# A replicate's answer waits for the transfers: at least this long.
OBJECT_REPLICATE_TIMEOUT_MS = 10 * 60 * 1000

# What a transaction's compare looks at, and how (libshoal's SHOAL_CMP_*).
_TARGETS = {"value": 1, "version": 2, "create": 3, "mod": 4, "lease": 5}
_RESULTS = {"==": 1, "!=": 2, ">": 3, "<": 4}


def compare(key, target, result, value=b"", number=0):
    """A compare of a claim transaction: KEY's TARGET ("value", "version", "create", "mod" or "lease")
    RESULT ("==", "!=", ">" or "<") VALUE (target "value") or NUMBER (the others). An absent key reads
    as version, revisions and lease 0 and an empty value."""
    if target not in _TARGETS:
        raise ValueError("compare target '%s': expected one of %s" % (target, ", ".join(_TARGETS)))
    if result not in _RESULTS:
        raise ValueError("compare result '%s': expected one of %s" % (result, " ".join(_RESULTS)))
    return pb.KeyCompare(key=key, target=_TARGETS[target], result=_RESULTS[result], value=_bytes(value),
                         number=number)


def op_put(key, value, lease=0):
    """A put of KEY in a transaction, attached to LEASE when not 0."""
    return pb.KeyOp(type=pb.KEY_PUT, key=key, value=_bytes(value), lease=lease)


def op_get(key, prefix=False):
    """A get of KEY in a transaction (PREFIX: of every key starting with KEY)."""
    return pb.KeyOp(type=pb.KEY_GET, key=key, prefix=prefix)


def op_delete(key, prefix=False):
    """A delete of KEY in a transaction (PREFIX: of every key starting with KEY)."""
    return pb.KeyOp(type=pb.KEY_DELETE, key=key, prefix=prefix)

_MONITORED = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
              | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)


def _cert_keys(path):
    """The public and secret keys of a czmq certificate at PATH (secret: None when PATH_secret is absent)."""
    def read(file, name):
        try:
            with open(file) as text:
                for line in text:
                    line = line.strip()
                    if line.startswith(name + " ") or line.startswith(name + "="):
                        return line.split("=", 1)[1].strip().strip('"').encode()
        except OSError:
            return None
        return None
    public = read(path, "public-key")
    if public is None:
        raise errors.ShoalError("cannot read certificate %s" % path)
    return public, read(path + "_secret", "secret-key")


def default_cert():
    """The key shoalctl uses when none is named: SHOAL_CERT, else the one admin-*.cert the node made."""
    if os.environ.get("SHOAL_CERT"):
        return os.environ["SHOAL_CERT"]
    found = sorted(glob.glob(DEFAULT_KEYS_DIR + "/admin-*.cert"))
    if len(found) > 1:
        raise errors.ShoalError("%d admin keys in %s (%s): name yours" % (len(found), DEFAULT_KEYS_DIR, ", ".join(found)))
    return found[0] if found else DEFAULT_KEYS_DIR + "/admin.cert"


class WatchInfo:
    """What the node said to a watch: the fields of pb.WatchReply (node_id, last_seq, first_kept_seq,
    missed_from, missed_to, replayed) and message, the node's words on why events are missed."""

    def __init__(self, reply, message):
        self.reply = reply
        self.message = message

    def __getattr__(self, name):
        return getattr(self.reply, name)


class Client:
    """One connection to the node at ENDPOINT (SHOAL_ENDPOINT, default tcp://127.0.0.1:7400),
    with client certificate CERT (SHOAL_CERT, default as shoalctl's) and the cluster's public
    certificate CLUSTER_KEY (SHOAL_CLUSTER_KEY, default ./shoal-data/keys/cluster.cert)."""

    def __init__(self, endpoint=None, cert=None, cluster_key=None, timeout_ms=DEFAULT_TIMEOUT_MS, context=None):
        self.endpoint = endpoint or os.environ.get("SHOAL_ENDPOINT") or DEFAULT_ENDPOINT
        if not self.endpoint.startswith("tcp://"):
            raise errors.ShoalError("endpoint '%s' is not tcp://HOST:PORT" % self.endpoint)
        self.cert = cert or default_cert()
        self.cluster_key = cluster_key or os.environ.get("SHOAL_CLUSTER_KEY") or DEFAULT_CLUSTER_KEY
        self.timeout_ms = timeout_ms
        public, secret = _cert_keys(self.cert)
        if not secret:
            raise errors.ShoalError("certificate %s has no secret key (%s_secret is missing)" % (self.cert, self.cert))
        server, _ = _cert_keys(self.cluster_key)
        self._context = context or zmq.Context.instance()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.linger = 0
        self._socket.curve_publickey = public
        self._socket.curve_secretkey = secret
        self._socket.curve_serverkey = server
        self._monitor = self._socket.get_monitor_socket(_MONITORED)
        self._socket.connect(self.endpoint)
        self._next_id = 1
        self._handshake_ok = False
        self._handshake_refused = False
        self._handshake_failed = False
        self._owner = None
        self._node_id = None
        self.retry_after_ms = 0
        # How often a refused reader resolves the claim again before lock_acquire raises Conflict
        # (0: the first refusal is the answer); lock_resolved says how often the last acquire did.
        self.read_resolves = LOCK_READ_RESOLVES
        self.lock_resolved = 0

    def close(self):
        """Ends the connection (and that to a claim's owner)."""
        if self._owner:
            self._owner.close()
            self._owner = None
        if self._socket is not None:
            self._socket.disable_monitor()
            self._monitor.close(0)
            self._socket.close(0)
            self._socket = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # The connection

    def _monitor_event(self):
        from zmq.utils.monitor import recv_monitor_message
        event = recv_monitor_message(self._monitor)["event"]
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._handshake_ok = True
            self._handshake_refused = self._handshake_failed = False
        elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            self._handshake_refused = True
        else:
            self._handshake_failed = True

    def _no_reply(self, what):
        if self._handshake_refused:
            return errors.RefusedError("%s refused our key at the handshake (not an admitted client)" % self.endpoint)
        if self._handshake_failed and not self._handshake_ok:
            return errors.RefusedError("handshake with %s failed: is the cluster key right, and is it a shoal node?"
                                       % self.endpoint)
        if not self._handshake_ok:
            return errors.UnreachableError("%s is unreachable (no connection within %d ms)"
                                           % (self.endpoint, self.timeout_ms))
        return errors.TimeoutError("%s: no reply to %s within %d ms" % (self.endpoint, what, self.timeout_ms))

    def _send(self, msg_type, body=None):
        envelope = pb.Envelope(version=PROTOCOL_VERSION, type=msg_type, request_id=self._next_id)
        self._next_id += 1
        if body is not None:
            envelope.payload = body.SerializeToString()
        self._socket.send(envelope.SerializeToString(), copy=True)
        return envelope.request_id

    def _receive(self, timeout_ms):
        """The next envelope from the node, or None when none came in TIMEOUT_MS."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready = dict(poller.poll(int(left * 1000) + 1))
            if self._monitor in ready:
                self._monitor_event()
                if self._handshake_refused:
                    raise self._no_reply("the request")
                continue
            if self._socket in ready:
                frames = self._socket.recv_multipart()
                envelope = pb.Envelope()
                try:
                    envelope.ParseFromString(frames[0])
                except Exception as error:  # a reply that does not decode
                    raise errors.BadReplyError("bad reply from %s: %s" % (self.endpoint, error))
                return envelope

    def call(self, msg_type, body=None, reply_class=None):
        """Sends a request of MSG_TYPE with BODY and returns its reply's body (REPLY_CLASS), or raises."""
        name = pb.MsgType.Name(msg_type)
        request_id = self._send(msg_type, body)
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        while True:
            left_ms = (deadline - time.monotonic()) * 1000
            reply = self._receive(left_ms) if left_ms > 0 else None
            if reply is None:
                raise self._no_reply(name)
            # A stale reply to an earlier call is dropped; id 0 answers a request that did not decode.
            if reply.request_id not in (request_id, 0):
                continue
            self.retry_after_ms = reply.retry_after_ms
            if reply.status != 200:
                raise errors.status_error(reply.status, reply.message, reply.retry_after_ms)
            if reply_class is None:
                return None
            answer = reply_class()
            try:
                answer.ParseFromString(reply.payload)
            except Exception as error:
                raise errors.BadReplyError("bad reply from %s: %s" % (self.endpoint, error))
            return answer

    def _owner_at(self, endpoint):
        if endpoint == self.endpoint:
            return self
        if self._owner is None or self._owner.endpoint != endpoint:
            if self._owner:
                self._owner.close()
            self._owner = Client(endpoint, self.cert, self.cluster_key, self.timeout_ms, self._context)
        return self._owner

    def call_claim(self, claim_id, msg_type, body=None, reply_class=None):
        """As call, for a request about CLAIM_ID: a 404 is followed by a lookup and the same request at the
        claim's owner, when another node owns it."""
        try:
            return self.call(msg_type, body, reply_class)
        except errors.NotFound as first:
            try:
                record = self.lookup(claim_id)
            except errors.ShoalError:
                raise first
            owner = self._owner_at(record.endpoint)
            if owner is self:
                raise first
            return owner.call(msg_type, body, reply_class)

    def call_lease(self, lease_id, msg_type, body=None, reply_class=None):
        """As call, for a request about lease LEASE_ID: a 404 is followed by asking the node for the
        lease's home (lease_lookup) and the same request there, when it is another node."""
        try:
            return self.call(msg_type, body, reply_class)
        except errors.NotFound as first:
            try:
                home = self.call(pb.MSG_LEASE_LOOKUP, pb.LeaseRequest(op=pb.LEASE_TTL, id=lease_id), pb.Member)
            except errors.ShoalError:
                raise first
            owner = self._owner_at(home.endpoint)
            if owner is self:
                raise first
            return owner.call(msg_type, body, reply_class)

    # Node

    def status(self):
        return self.call(pb.MSG_STATUS, None, pb.StatusReply)

    def damage_forget(self, damage_id):
        self.call(pb.MSG_DAMAGE_FORGET, pb.DamageRef(id=damage_id))

    def peers(self):
        return list(self.call(pb.MSG_PEERS, None, pb.Peers).peers)

    def peers_sweeping(self):
        """The peers this node holds back until every node rolled back their locks of an earlier run
        (listed alive by peers(), but refusing moves and locks with 503 meanwhile): pb.Member each."""
        return list(self.call(pb.MSG_PEERS_SWEEPING, None, pb.Members).members)

    def peers_forget(self, node_id):
        self.call(pb.MSG_PEERS_FORGET, pb.NodeRef(node_id=node_id))

    def counters(self, tenant=""):
        """The admission counters of TENANT, or ("") of the node and of every tenant that counts
        something: pb.Counters, its scopes the node's first, then tenants by name; with more set,
        more tenants count than one reply holds: ask for each by name (a tenant key reads only its
        own, another's raises Forbidden)."""
        return self.call(pb.MSG_COUNTERS, pb.CountersRequest(tenant=tenant), pb.Counters)

    # Replicated key/value datasets and their log

    def kv_put(self, dataset, key, value):
        return self.call(pb.MSG_KV_PUT, pb.KvPut(dataset=dataset, key=key, value=_bytes(value)), pb.KvItem)

    def kv_get(self, dataset, key):
        return self.call(pb.MSG_KV_GET, pb.KvKey(dataset=dataset, key=key), pb.KvItem)

    def kv_del(self, dataset, key):
        return self.call(pb.MSG_KV_DEL, pb.KvKey(dataset=dataset, key=key), pb.KvItem)

    def kv_scan(self, dataset, prefix="", start_after="", limit=0):
        """One page: (items, more)."""
        page = self.call(pb.MSG_KV_SCAN, pb.KvScan(dataset=dataset, prefix=prefix, start_after=start_after,
                                                   limit=limit), pb.KvItems)
        return list(page.items), page.more

    def oplog_heads(self, dataset):
        return list(self.call(pb.MSG_OPLOG_HEADS, pb.DatasetRef(dataset=dataset), pb.Heads).heads)

    def oplog_stats(self, dataset=""):
        return list(self.call(pb.MSG_OPLOG_STATS, pb.DatasetRef(dataset=dataset), pb.OplogStats).datasets)

    def oplog_prune(self, before_ms, dataset=""):
        return self.call(pb.MSG_OPLOG_PRUNE, pb.PruneRequest(dataset=dataset, before_ms=before_ms),
                         pb.PruneReply).pruned

    # Claims

    def claim_create(self, tenant, memory_bytes, driver="", claim_id="", disk_bytes=0, rate=0, from_object=""):
        """A claim of TENANT. FROM_OBJECT: the name of an object holding a guest's image (a
        checkpoint): the guest starts from it (memory_bytes 0 or the image's), copied to this node
        first when it holds none; the answer then waits for the copy (OBJECT_REPLICATE_TIMEOUT_MS)."""
        body = pb.ClaimCreate(tenant=tenant, memory_bytes=memory_bytes, driver=driver, id=claim_id,
                              disk_bytes=disk_bytes, rate=rate, from_object=from_object)
        with self._waiting_on_bytes(bool(from_object)):
            return self.call(pb.MSG_CLAIM_CREATE, body, pb.ClaimInfo)

    def claim_checkpoint(self, claim_id, name, comment=""):
        """Saves the stopped or paused claim's memory and disk as a new object NAME of its tenant
        (pb.ObjectInfo); claim_create(from_object=NAME) starts a guest from it. A running claim
        raises Conflict, a name already bound Conflict. The answer waits for the image's bytes."""
        with self._waiting_on_bytes():
            return self.call_claim(claim_id, pb.MSG_CLAIM_CHECKPOINT,
                                   pb.ClaimCheckpoint(id=claim_id, name=name, comment=comment),
                                   pb.ObjectReply).objects[0]

    @contextlib.contextmanager
    def _waiting_on_bytes(self, longer=True):
        """A call whose answer waits on an object's bytes: at least OBJECT_REPLICATE_TIMEOUT_MS."""
        timeout = self.timeout_ms
        if longer:
            self.timeout_ms = max(timeout, OBJECT_REPLICATE_TIMEOUT_MS)
        try:
            yield
        finally:
            self.timeout_ms = timeout

    def claim_list(self):
        return list(self.call(pb.MSG_CLAIM_LIST, None, pb.ClaimList).claims)

    def _claim(self, msg_type, claim_id):
        return self.call_claim(claim_id, msg_type, pb.ClaimRef(id=claim_id), pb.ClaimInfo)

    def claim_show(self, claim_id):
        return self._claim(pb.MSG_CLAIM_SHOW, claim_id)

    def claim_stop(self, claim_id):
        return self._claim(pb.MSG_CLAIM_STOP, claim_id)

    def claim_start(self, claim_id):
        return self._claim(pb.MSG_CLAIM_START, claim_id)

    def claim_pause(self, claim_id):
        return self._claim(pb.MSG_CLAIM_PAUSE, claim_id)

    def claim_resume(self, claim_id):
        return self._claim(pb.MSG_CLAIM_RESUME, claim_id)

    def claim_release(self, claim_id):
        return self._claim(pb.MSG_CLAIM_RELEASE, claim_id)

    def claim_put(self, claim_id, key, value):
        """A guest call: writes KEY in the claim's guest."""
        self.call_claim(claim_id, pb.MSG_CLAIM_CALL, pb.ClaimCall(id=claim_id, op="put", key=key, value=_bytes(value)),
                        pb.ClaimCallReply)

    def claim_get(self, claim_id, key):
        """A guest call: KEY's value in the claim's guest, or None."""
        reply = self.call_claim(claim_id, pb.MSG_CLAIM_CALL, pb.ClaimCall(id=claim_id, op="get", key=key),
                                pb.ClaimCallReply)
        return reply.value if reply.found else None

    def lookup(self, claim_id):
        """Who owns CLAIM_ID, from the registry of the connected node."""
        return self.call(pb.MSG_LOOKUP, pb.ClaimRef(id=claim_id), pb.RegistryRecord)

    # A claim's own keys, served by its owner (a 404 from another node: lookup and retry there; a
    # moving claim's keys raise Unavailable while they travel). Every change takes the claim's
    # next revision.

    def claim_txn(self, claim_id, compares=(), success=(), failure=()):
        """A transaction on CLAIM_ID's keys: when all COMPARES (compare(...)) hold the SUCCESS
        operations (op_put, op_get, op_delete) run, else the FAILURE ones, in order, written in
        one synced batch before the answer. Returns pb.ClaimTxnReply: succeeded, the claim's
        revision after it, one result per operation of the branch that ran, the owner."""
        body = pb.ClaimTxn(claim_id=claim_id, compares=list(compares), success=list(success),
                           failure=list(failure))
        return self.call_claim(claim_id, pb.MSG_CLAIM_TXN, body, pb.ClaimTxnReply)

    def key_put(self, claim_id, key, value, lease=0):
        """Writes KEY (attached to LEASE when not 0); returns the revision it took."""
        return self.claim_txn(claim_id, success=[op_put(key, value, lease)]).revision

    def key_get(self, claim_id, key):
        """KEY with its bookkeeping (pb.KeyValue); NotFound when the claim has no such key."""
        reply = self.claim_txn(claim_id, success=[op_get(key)])
        if len(reply.results) != 1 or len(reply.results[0].kvs) != 1:
            raise errors.NotFound("claim '%s' has no key '%s'" % (claim_id, key))
        return reply.results[0].kvs[0]

    def key_delete(self, claim_id, key, prefix=False):
        """Deletes KEY (PREFIX: every key starting with KEY); returns how many keys went."""
        reply = self.claim_txn(claim_id, success=[op_delete(key, prefix)])
        return reply.results[0].deleted if reply.results else 0

    def key_list(self, claim_id, prefix=""):
        """Every key of the claim starting with PREFIX ("": all), in key order (pb.KeyValue)."""
        reply = self.claim_txn(claim_id, success=[op_get(prefix, True)])
        return list(reply.results[0].kvs) if reply.results else []

    # Leases, granted by the connected node (their home): keys and locks attached to one go when it
    # is revoked or its TTL passes without a keepalive. Keepalive, revoke and ttl reach the home from
    # any node; a lease from any node holds keys and locks of any node's claims.

    def _lease(self, op, lease_id=0, ttl_ms=0):
        body = pb.LeaseRequest(op=op, id=lease_id, ttl_ms=ttl_ms)
        # A lease's home answers for it: any node names it, as libshoal follows it.
        if op in (pb.LEASE_KEEPALIVE, pb.LEASE_REVOKE, pb.LEASE_TTL):
            return self.call_lease(lease_id, pb.MSG_LEASE, body, pb.Leases)
        return self.call(pb.MSG_LEASE, body, pb.Leases)

    def lease_home(self, lease_id):
        """The node that is the home of lease LEASE_ID: pb.Member (node_id, endpoint)."""
        return self.call(pb.MSG_LEASE_LOOKUP, pb.LeaseRequest(op=pb.LEASE_TTL, id=lease_id), pb.Member)

    def lease_grant(self, ttl_ms, lease_id=0):
        """Takes a lease of TTL_MS (LEASE_ID 0: the node picks its id). Returns (pb.LeaseInfo,
        shortened): the node grants at most an hour, and says when it granted less than asked."""
        reply = self._lease(pb.LEASE_GRANT, lease_id, ttl_ms)
        return reply.leases[0], reply.shortened

    def lease_keepalive(self, lease_id):
        """Starts the lease's TTL again (NotFound once it ended); returns it. Call it well within
        the TTL (a third of it, as `shoalctl lease keepalive` does)."""
        return self._lease(pb.LEASE_KEEPALIVE, lease_id).leases[0]

    def lease_revoke(self, lease_id):
        """Ends the lease now, with what is attached to it."""
        self._lease(pb.LEASE_REVOKE, lease_id)

    def lease_ttl(self, lease_id):
        """The lease with what is left of it (remaining_ms)."""
        return self._lease(pb.LEASE_TTL, lease_id).leases[0]

    def lease_list(self):
        """The leases of the connected node the caller may see."""
        return list(self._lease(pb.LEASE_LIST).leases)

    # The consistency sweep (fsck) of the connected node, operators only.

    def fsck_start(self, repair=False):
        """Starts a run (REPAIR: mend what is safe once the look is over), or joins the one in
        progress when it repairs alike (Conflict when another is). Returns pb.FsckReport, the run as
        it stands."""
        return self.call(pb.MSG_FSCK, pb.FsckRequest(op=pb.FSCK_START, repair=repair), pb.FsckReport)

    def fsck_status(self):
        """The run in progress, or else the last one (run 0: none ever ran): pb.FsckReport."""
        return self.call(pb.MSG_FSCK, pb.FsckRequest(op=pb.FSCK_STATUS), pb.FsckReport)

    def fsck(self, repair=False, poll_ms=100, progress=None):
        """Starts a run and asks for its state every POLL_MS until it is done, calling
        PROGRESS(report) each time; returns the last report (its findings, finding_count,
        remaining). A run that is gone (the node restarted, or another ended it) raises
        BadReplyError."""
        report = self.fsck_start(repair)
        run = report.run
        while not report.done:
            if progress:
                progress(report)
            time.sleep((poll_ms if poll_ms > 0 else 100) / 1000.0)
            report = self.fsck_status()
            if report.run != run:
                raise errors.BadReplyError("fsck run %d is gone: the node answers with run %d (it restarted, or "
                                           "another run ended ours)" % (run, report.run))
        return report

    # Read/write locks on a claim, at its owner (a 404: lookup and retry there, as for keys).

    def _connected_node(self):
        if self._node_id is None:
            self._node_id = self.status().node_id
        return self._node_id

    def _lock(self, op, claim_id, holder="", mode=0, wait=False, lease=0):
        # The holder runs where this client connects: its locks are swept when that node is
        # declared dead.
        node = self._connected_node() if op == pb.LOCK_ACQUIRE else ""
        body = pb.LockRequest(op=op, claim_id=claim_id, holder=holder, mode=mode, wait=wait, lease=lease,
                              holder_node=node)
        return self.call_claim(claim_id, pb.MSG_LOCK, body, pb.Locks)

    def lock_acquire(self, claim_id, mode, holder="", wait=False, lease=0):
        """Takes CLAIM_ID's lock in MODE "read" or "write" for HOLDER ("": the client key's name),
        going when LEASE ends (0: never). Returns pb.Locks (granted: the caller holds it now).
        A write finding readers raises Conflict, or with WAIT is answered not granted: it waits,
        and asking again is granted once the last reader left. A read refused while a writer holds
        or waits for the lock is asked again after resolving the claim again (it may have moved),
        waiting what the refusal says, doubled each time, at most read_resolves times, then raises
        the last Conflict; lock_resolved says how often it resolved."""
        modes = {"read": pb.LOCK_READ, "write": pb.LOCK_WRITE}
        if mode not in modes:
            raise ValueError("lock mode '%s': expected read or write" % mode)
        self.lock_resolved = 0
        resolved = 0
        pause_ms = 0
        while True:
            try:
                return self._lock(pb.LOCK_ACQUIRE, claim_id, holder, modes[mode], wait, lease)
            except errors.Conflict as refused:
                retry_ms = refused.retry_after_ms
                if mode != "read" or not retry_ms or resolved >= self.read_resolves:
                    if resolved:
                        refused.message = "%s (refused again after resolving the claim %d time(s))" % (
                            refused.message, resolved)
                        refused.args = ("%d %s: %s" % (refused.status, type(refused).__name__, refused.message),)
                    raise
                pause_ms = retry_ms if not resolved else min(pause_ms * 2, LOCK_READ_WAIT_MAX_MS)
                time.sleep(pause_ms / 1000.0)
                resolved += 1
                self.lock_resolved = resolved

    def lock_release(self, claim_id, holder=""):
        """Releases HOLDER's lock ("": the client key's name), or its wait. Returns pb.Locks."""
        return self._lock(pb.LOCK_RELEASE, claim_id, holder)

    def lock_list(self, claim_id):
        """The lock's state: readers, writer, waiter, and its records (pb.Locks)."""
        return self._lock(pb.LOCK_LIST, claim_id)

    # Storage objects: a tenant's named objects in the replicated catalog, each with instances (one
    # node's copy of its bytes each).

    def _object(self, op, tenant="", name="", client=None, **fields):
        body = pb.ObjectRequest(op=op, tenant=tenant, name=name, **fields)
        return (client or self).call(pb.MSG_OBJECT, body, pb.ObjectReply)

    def object_add(self, tenant, name, data, update=False, comment=""):
        """Adds an object named NAME for TENANT ("" for a tenant key: its own) with the bytes DATA
        (bytes, or a file open for binary reading), as an instance on the connected node. UPDATE:
        the name may be bound already, and moves to the new object. Returns pb.ObjectInfo. A step
        that fails gives the add up (the node removes what it received) and raises its error."""
        if hasattr(data, "read"):
            data = data.read()
        data = _bytes(data)
        added = self._object(pb.OBJECT_ADD, tenant, name, size=len(data), update=update, comment=comment,
                             checksum_algorithm=pb.CHECKSUM_BLAKE2B_256)
        instance_id = added.instance_id
        checksum = hashlib.blake2b(digest_size=OBJECT_CHECKSUM_SIZE)
        try:
            for offset in range(0, len(data), OBJECT_CHUNK_MAX):
                chunk = data[offset:offset + OBJECT_CHUNK_MAX]
                checksum.update(chunk)
                self.call(pb.MSG_OBJECT_WRITE, pb.ObjectChunk(instance_id=instance_id, offset=offset, data=chunk),
                          pb.ObjectChunk)
        except errors.ShoalError:
            try:
                self._object(pb.OBJECT_ABORT, tenant, name, instance_id=instance_id)
            except errors.ShoalError:
                pass
            raise
        committed = self._object(pb.OBJECT_COMMIT, tenant, name, instance_id=instance_id,
                                 checksum=checksum.digest())
        return committed.objects[0]

    def object_get(self, tenant, name):
        """The object NAME is bound to, with its instances: pb.ObjectInfo."""
        return self._object(pb.OBJECT_GET, tenant, name).objects[0]

    def object_list(self, tenant=""):
        """TENANT's objects, every page: a list of pb.ObjectInfo."""
        objects = []
        after = ""
        while True:
            page = self._object(pb.OBJECT_LIST, tenant, start_after=after)
            objects.extend(page.objects)
            if not page.more or not page.objects:
                return objects
            after = page.objects[-1].name

    def object_remove(self, tenant, name):
        """Removes the object NAME is bound to: every instance's bytes, then the object and its name."""
        self._object(pb.OBJECT_REMOVE, tenant, name)

    def object_replicate(self, tenant, name, copies):
        """Has COPIES nodes in all hold a complete instance of NAME; returns how many hold one now.
        The answer waits for the transfers (at least OBJECT_REPLICATE_TIMEOUT_MS)."""
        with self._waiting_on_bytes():
            return self._object(pb.OBJECT_REPLICATE, tenant, name, copies=copies).copies

    def object_open(self, tenant, name, holder="", verify=False):
        """Takes a read lock on a good instance of NAME for HOLDER ("": the client key's name), on the
        connected node or else on a node that holds one (VERIFY: its bytes are checksummed first).
        An instance being written is refused: the name is resolved again, a bounded number of times,
        then Conflict is raised. Returns an ObjectOpen to read and close."""
        pause_ms = OBJECT_RESOLVE_PAUSE_MS
        refused = None
        for attempt in range(OBJECT_RESOLVE_TRIES):
            if attempt:
                # Each try resolves the name again: a write-locked instance may be going, and the
                # name may be bound elsewhere now.
                time.sleep(pause_ms / 1000.0)
                pause_ms = min(pause_ms * 2, OBJECT_RESOLVE_PAUSE_MAX_MS)
            try:
                answer = self._object(pb.OBJECT_OPEN, tenant, name, holder=holder, verify=verify)
            except errors.Conflict as conflict:
                refused = conflict
                continue
            if answer.granted:
                return ObjectOpen(self, answer, self.endpoint)
            # No good instance on this node: the nodes that hold one.
            for instance in answer.objects[0].instances:
                if instance.state != pb.INSTANCE_COMPLETE or not instance.endpoint:
                    continue
                there = self._owner_at(instance.endpoint)
                try:
                    opened = self._object(pb.OBJECT_OPEN, tenant, name, client=there,
                                          instance_id=instance.instance_id, holder=holder, verify=verify)
                except errors.Conflict as conflict:
                    refused = conflict
                    continue
                if opened.granted:
                    return ObjectOpen(self, opened, instance.endpoint)
            refused = errors.Conflict("no instance of '%s' could be read-locked" % name)
        raise refused

    def object_close(self, opened):
        """Releases the read lock OPENED (an ObjectOpen) holds."""
        there = self._owner_at(opened.endpoint) if opened.endpoint else self
        self._object(pb.OBJECT_CLOSE, client=there, instance_id=opened.instance_id, holder=opened.holder)

    # Hot drain: a node marked draining admits no new claim and moves its running claims off live.

    def _drain(self, msg_type, node_id, max_downtime_ms=0, parallel=0):
        body = pb.DrainRequest(node_id=node_id, max_downtime_ms=max_downtime_ms, parallel=parallel)
        return self.call(msg_type, body, pb.Drain)

    def drain(self, node_id="", max_downtime_ms=0, parallel=0):
        """Marks NODE_ID ("": the connected node) draining and starts moving its claims off, PARALLEL
        at once (0: one), each within MAX_DOWNTIME_MS (0: the node's). Returns pb.Drain."""
        return self._drain(pb.MSG_DRAIN, node_id, max_downtime_ms, parallel)

    def undrain(self, node_id=""):
        """Takes the mark away: moves not started yet are not started. Returns pb.Drain."""
        return self._drain(pb.MSG_UNDRAIN, node_id)

    def drain_progress(self, node_id=""):
        """The drain's progress, or where it ended or stopped: pb.Drain (phase none, running, done or
        stopped; each claim's state, target and reason)."""
        return self._drain(pb.MSG_DRAIN_STATUS, node_id)

    def drain_wait(self, node_id="", progress=None, poll_ms=200, timeout_s=600):
        """Follows the drain to its end (phase done or stopped), calling PROGRESS(drain) at each look;
        returns the last pb.Drain."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.drain_progress(node_id)
            if progress:
                progress(state)
            if state.phase in ("done", "stopped", "none"):
                return state
            if time.monotonic() > deadline:
                raise errors.TimeoutError("the drain of %s did not end within %d s" % (node_id or self.endpoint,
                                                                                      timeout_s))
            time.sleep(poll_ms / 1000.0)

    # Moves

    def move(self, claim_id, to, max_downtime_ms=0, progress=None, wait=True, timeout_s=600, no_converge=False):
        """Moves CLAIM_ID live to node TO. With WAIT, follows it to its end, calling PROGRESS(move)
        at each step, and returns the result (its phase is "done" or "aborted"); else returns
        the admission. NO_CONVERGE: abort, naming the dirty rate, rather than throttle a guest
        that dirties faster than the rounds shrink."""
        admitted = self.call(pb.MSG_MOVE, pb.Move(claim_id=claim_id, to=to, max_downtime_ms=max_downtime_ms,
                                                  no_converge=no_converge), pb.Move)
        if progress:
            progress(admitted)
        if not wait:
            return admitted
        deadline = time.monotonic() + timeout_s
        state = admitted
        while not state.done:
            if time.monotonic() > deadline:
                raise errors.TimeoutError("move of %s to %s did not end within %d s" % (claim_id, to, timeout_s))
            time.sleep(MOVE_POLL_MS / 1000.0)
            state = self.move_status(claim_id)
            if progress:
                progress(state)
        return state

    def move_status(self, claim_id):
        return self.call(pb.MSG_MOVE_STATUS, pb.Move(claim_id=claim_id), pb.Move)

    def move_resume(self, claim_id):
        return self.call(pb.MSG_MOVE_RESUME, pb.Move(claim_id=claim_id), pb.Move)

    def move_list(self):
        return list(self.call(pb.MSG_MOVE_LIST, None, pb.Moves).moves)

    # Events

    def watch(self, kinds="", after_seq=0, info=None, idle=None):
        """The node's events (pb.Event) as an iterator, KINDS "claims,moves,members" (or a list;
        empty: all), after event AFTER_SEQ (0: from now on). INFO(reply) is called with each answer
        the node gives the watch (a WatchInfo: pb.WatchReply's fields, missed_from..missed_to are
        events no longer kept, replayed those that follow, and message, the node's words on what
        was missed). The watch is renewed every second; IDLE() is called
        then, and may raise StopIteration to end it. A lost event and a node that restarted
        are answered by asking again after the last event seen."""
        if not isinstance(kinds, str):
            kinds = ",".join(kinds)
        last_seen = after_seq
        answered = False
        started = time.monotonic()
        self._send(pb.MSG_WATCH, pb.WatchRequest(kinds=kinds, after_seq=after_seq))
        renew_at = started + WATCH_RENEW_MS / 1000.0
        while True:
            now = time.monotonic()
            if now >= renew_at:
                if not answered and (now - started) * 1000 >= self.timeout_ms:
                    raise self._no_reply("watch")
                if answered and idle:
                    try:
                        idle()
                    except StopIteration:
                        return
                self._send(pb.MSG_WATCH, pb.WatchRequest(kinds=kinds, after_seq=last_seen))
                renew_at = now + WATCH_RENEW_MS / 1000.0
                continue
            message = self._receive((renew_at - now) * 1000)
            if message is None:
                continue
            if message.type == pb.MSG_WATCH:
                if message.status != 200:
                    raise errors.status_error(message.status, message.message, message.retry_after_ms)
                reply = pb.WatchReply()
                reply.ParseFromString(message.payload)
                answered = True
                if not last_seen:
                    last_seen = reply.last_seq
                if info:
                    info(WatchInfo(reply, message.message))
            elif message.type == pb.MSG_EVENT and message.status == 200:
                event = pb.Event()
                event.ParseFromString(message.payload)
                if event.seq <= last_seen:
                    continue
                if last_seen and event.previous_seq != last_seen:
                    self._send(pb.MSG_WATCH, pb.WatchRequest(kinds=kinds, after_seq=last_seen))
                    renew_at = time.monotonic() + WATCH_RENEW_MS / 1000.0
                    continue
                last_seen = event.seq
                yield event


class ObjectOpen:
    """A read lock on one instance of an object (object_open): read its bytes, then close it."""

    def __init__(self, client, answer, endpoint):
        info = answer.objects[0]
        self._client = client
        self.storage_id = info.storage_id
        self.instance_id = answer.instance_id
        self.size = info.size
        self.checksum = info.checksum
        self.holder = answer.holder
        self.node = answer.node
        self.endpoint = endpoint or answer.endpoint

    def read(self, offset=0, size=None):
        """SIZE bytes from OFFSET (None: to the end); fewer at the end of the object."""
        if size is None:
            size = max(self.size - offset, 0)
        there = self._client._owner_at(self.endpoint) if self.endpoint else self._client
        data = bytearray()
        while len(data) < size:
            want = min(size - len(data), OBJECT_CHUNK_MAX)
            chunk = there.call(pb.MSG_OBJECT_READ, pb.ObjectChunk(instance_id=self.instance_id, holder=self.holder,
                                                                  offset=offset + len(data), length=want),
                               pb.ObjectChunk)
            data.extend(chunk.data)
            if chunk.last or not chunk.data:
                break
        return bytes(data)

    def close(self):
        self._client.object_close(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _bytes(value):
    return value.encode() if isinstance(value, str) else bytes(value)
