"""The Python client's claim keys and transactions, leases, locks and counters against real nodes,
each with libshoal's semantics: asked of any node (a 404 from a node that does not own the claim is
followed by a lookup and the same call at the owner), the same errors."""
import time

import pytest

MB = 1024 * 1024
TENANT = "acme/web"


def test_claim_keys_and_transactions(shoal, cluster):
    with cluster.client(0) as owner, cluster.client(1) as other:
        owner.claim_create(TENANT, 16 * MB, claim_id="py-keys")
        # Asked of n2, which does not own the claim: looked up and asked of n1.
        first = other.key_put("py-keys", "vm/spec", b"2 cpus")
        second = other.key_put("py-keys", "vm/handle", "h-1")
        assert second == first + 1
        spec = other.key_get("py-keys", "vm/spec")
        assert spec.key == "vm/spec" and spec.value == b"2 cpus" and spec.version == 1
        assert spec.create_revision == first and spec.mod_revision == first and spec.lease == 0
        third = owner.key_put("py-keys", "vm/spec", b"4 cpus")
        spec = owner.key_get("py-keys", "vm/spec")
        assert spec.value == b"4 cpus" and spec.version == 2 and spec.create_revision == first
        assert spec.mod_revision == third
        owner.key_put("py-keys", "other", b"x")
        assert [kv.key for kv in other.key_list("py-keys", "vm/")] == ["vm/handle", "vm/spec"]
        assert [kv.key for kv in other.key_list("py-keys")] == ["other", "vm/handle", "vm/spec"]
        with pytest.raises(shoal.NotFound) as absent:
            other.key_get("py-keys", "nothing")
        assert "has no key 'nothing'" in absent.value.message

        # A transaction: compare and set, both branches, the gets of the branch that ran.
        done = other.claim_txn("py-keys",
                               compares=[shoal.compare("vm/spec", "value", "==", b"4 cpus"),
                                         shoal.compare("vm/handle", "version", "==", number=1)],
                               success=[shoal.op_put("vm/spec", b"8 cpus"), shoal.op_get("vm/", prefix=True)],
                               failure=[shoal.op_get("vm/spec")])
        assert done.succeeded and done.owner == "n1" and len(done.results) == 2
        assert [(kv.key, kv.value) for kv in done.results[1].kvs] == [("vm/handle", b"h-1"), ("vm/spec", b"8 cpus")]
        stale = other.claim_txn("py-keys", compares=[shoal.compare("vm/spec", "value", "==", b"4 cpus")],
                                success=[shoal.op_put("vm/spec", b"lost")], failure=[shoal.op_get("vm/spec")])
        assert not stale.succeeded and stale.revision == done.revision
        assert stale.results[0].kvs[0].value == b"8 cpus"
        absent_key = owner.claim_txn("py-keys", compares=[shoal.compare("new", "create", "==", number=0)],
                                     success=[shoal.op_put("new", b"1")])
        assert absent_key.succeeded and owner.key_get("py-keys", "new").create_revision == absent_key.revision
        with pytest.raises(ValueError):
            shoal.compare("vm/spec", "colour", "==")
        with pytest.raises(ValueError):
            shoal.compare("vm/spec", "value", "~")

        assert other.key_delete("py-keys", "vm/", prefix=True) == 2
        assert owner.key_delete("py-keys", "nothing") == 0
        assert [kv.key for kv in owner.key_list("py-keys")] == ["new", "other"]
        with pytest.raises(shoal.NotFound):
            other.key_put("no-such-claim", "k", b"v")

        # A tenant reaches its own claims' keys only.
        owner.claim_create("other/app", 16 * MB, claim_id="py-theirs")
        with cluster.client(0, cert=cluster.tenant) as tenant:
            tenant.key_put("py-keys", "mine", b"1")
            assert tenant.key_get("py-keys", "mine").value == b"1"
            with pytest.raises((shoal.Forbidden, shoal.NotFound)):
                tenant.key_put("py-theirs", "k", b"v")
        owner.claim_release("py-theirs")
        owner.claim_release("py-keys")


def test_leases(shoal, cluster):
    with cluster.client(0) as node:
        node.claim_create(TENANT, 16 * MB, claim_id="py-lease")
        lease, shortened = node.lease_grant(60000)
        assert lease.id and lease.ttl_ms == 60000 and not shortened
        assert 0 < node.lease_ttl(lease.id).remaining_ms <= 60000
        assert node.lease_keepalive(lease.id).id == lease.id
        assert lease.id in [held.id for held in node.lease_list()]
        # Keys attached to a lease go with it.
        node.key_put("py-lease", "session", b"s", lease=lease.id)
        assert node.key_get("py-lease", "session").lease == lease.id
        assert node.lease_ttl(lease.id).attached == 1
        node.lease_revoke(lease.id)
        with pytest.raises(shoal.NotFound):
            node.key_get("py-lease", "session")
        with pytest.raises(shoal.NotFound):
            node.lease_ttl(lease.id)
        with pytest.raises(shoal.NotFound):
            node.lease_keepalive(lease.id)
        assert lease.id not in [held.id for held in node.lease_list()]
        # At most an hour is granted, and the grant says so; a lease ends when its TTL passes.
        long_lease, shortened = node.lease_grant(10 * 3600 * 1000)
        assert shortened and long_lease.ttl_ms == 3600 * 1000
        node.lease_revoke(long_lease.id)
        short, _ = node.lease_grant(1000)
        node.key_put("py-lease", "brief", b"b", lease=short.id)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                node.key_get("py-lease", "brief")
                time.sleep(0.1)
            except shoal.NotFound:
                break
        with pytest.raises(shoal.NotFound):
            node.lease_ttl(short.id)
        node.claim_release("py-lease")


def test_locks(shoal, cluster):
    with cluster.client(0) as owner, cluster.client(1) as other:
        owner.claim_create(TENANT, 16 * MB, claim_id="py-lock")
        # Readers share it, asked of either node.
        assert other.lock_acquire("py-lock", "read", holder="r1").granted
        assert owner.lock_acquire("py-lock", "read", holder="r2").granted
        state = other.lock_list("py-lock")
        assert state.readers == 2 and state.writer == ""
        assert sorted((record.holder, record.mode) for record in state.records) == [
            ("r1", shoal.messages.LOCK_READ), ("r2", shoal.messages.LOCK_READ)]
        assert {record.holder_node for record in state.records} == {"n1", "n2"}
        # A writer finding readers is refused, or waits.
        with pytest.raises(shoal.Conflict):
            owner.lock_acquire("py-lock", "write", holder="w")
        waiting = owner.lock_acquire("py-lock", "write", holder="w", wait=True)
        assert not waiting.granted and waiting.waiter == "w"
        # A reader is refused while a writer waits: with no resolving, at once...
        other.read_resolves = 0
        with pytest.raises(shoal.Conflict) as refused:
            other.lock_acquire("py-lock", "read", holder="r3")
        assert refused.value.retry_after_ms > 0 and other.lock_resolved == 0
        # ... else after resolving the claim again, as often as asked.
        other.read_resolves = 2
        with pytest.raises(shoal.Conflict) as refused:
            other.lock_acquire("py-lock", "read", holder="r3")
        assert other.lock_resolved == 2 and "resolving the claim 2 time(s)" in str(refused.value)
        # The last reader leaving lets the writer in.
        other.lock_release("py-lock", holder="r1")
        owner.lock_release("py-lock", holder="r2")
        taken = owner.lock_acquire("py-lock", "write", holder="w", wait=True)
        assert taken.granted and taken.writer == "w" and taken.readers == 0
        assert owner.lock_release("py-lock", holder="w").writer == ""
        # A lock with a lease goes when the lease ends.
        lease, _ = owner.lease_grant(60000)
        assert owner.lock_acquire("py-lock", "write", holder="leased", lease=lease.id).granted
        owner.lease_revoke(lease.id)
        assert owner.lock_list("py-lock").writer == ""
        with pytest.raises(ValueError):
            owner.lock_acquire("py-lock", "exclusive")
        with pytest.raises(shoal.NotFound):
            owner.lock_list("no-such-claim")
        owner.claim_release("py-lock")


def test_counters_by_tenant(shoal, cluster):
    with cluster.client(0) as node:
        node.claim_create(TENANT, 16 * MB, claim_id="py-count")
        every = node.counters()
        assert not every.more
        assert [scope.tenant for scope in every.scopes] == ["", TENANT]
        named = node.counters(TENANT)
        assert [scope.tenant for scope in named.scopes] == [TENANT]
        assert named.scopes[0].claims == 1 and named.scopes[0].memory_bytes == 16 * MB
        with cluster.client(0, cert=cluster.tenant) as tenant:
            assert [scope.tenant for scope in tenant.counters().scopes] == [TENANT]
            with pytest.raises(shoal.Forbidden):
                tenant.counters("other/app")
        node.claim_release("py-count")


def test_fsck(shoal, cluster):
    with cluster.client(0) as node:
        node.claim_create(TENANT, 16 * MB, claim_id="py-fsck")
        reports = []
        report = node.fsck(progress=reports.append)
        assert report.done and report.run >= 1 and report.node_id == "n1" and not report.repair
        assert report.keys > 0 and report.finding_count == 0 and report.remaining == 0 and report.error == ""
        assert all(step.run == report.run and not step.done for step in reports)
        last = node.fsck_status()
        assert last.run == report.run and last.done
        repaired = node.fsck(repair=True)
        assert repaired.done and repaired.repair and repaired.run == report.run + 1
        with cluster.client(0, cert=cluster.tenant) as tenant:
            with pytest.raises(shoal.Forbidden):
                tenant.fsck_status()
        node.claim_release("py-fsck")
