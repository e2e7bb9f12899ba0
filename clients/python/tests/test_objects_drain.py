"""The Python client's storage objects, hot drain and leases' homes against real nodes, with
libshoal's semantics: an object's bytes go up in chunks under a checksum and come back from any node
that holds an instance; a drain moves a node's claims off; a lease is answered by its home, asked of
any node, and holds keys of any node's claims."""
import hashlib
import time

import pytest

MB = 1024 * 1024
TENANT = "acme/web"
WAIT_S = 60


def _wait_catalog(shoal, client, name, instances):
    """Waits, bounded, until CLIENT's node has NAME in its catalog with INSTANCES instances: the
    catalog reaches a peer through the mesh's sync, not with the call that wrote it."""
    deadline = time.monotonic() + WAIT_S
    seen = "nothing"
    while time.monotonic() < deadline:
        try:
            got = len(client.object_get(TENANT, name).instances)
            if got >= instances:
                return
            seen = f"{got} instance(s)"
        except shoal.NotFound:
            pass  # the catalog has not reached that node yet
        time.sleep(0.1)
    pytest.fail(f"{name} not in the node's catalog with {instances} instance(s) after {WAIT_S} s: {seen}")


def test_objects(shoal, cluster):
    # More than one chunk, and not a whole number of them.
    data = bytes(range(256)) * (5 * 1024 + 3)
    assert len(data) > shoal.client.OBJECT_CHUNK_MAX
    with cluster.client(0) as n1, cluster.client(1) as n2, cluster.client(0, cert=cluster.tenant) as tenant:
        added = n1.object_add(TENANT, "py-image", data, comment="a test image")
        assert added.name == "py-image" and added.tenant == TENANT and added.size == len(data)
        assert added.checksum == hashlib.blake2b(data, digest_size=32).digest()
        assert shoal.client.checksum_algorithm(added.checksum) == "blake2b-256"
        assert added.storage_id and len(added.instances) == 1 and added.instances[0].node == "n1"
        got = n1.object_get(TENANT, "py-image")
        assert got.storage_id == added.storage_id and got.comment == "a test image"
        # A tenant names its own objects with "" and sees only them.
        assert [info.name for info in tenant.object_list("")] == ["py-image"]
        with pytest.raises(shoal.NotFound):
            n1.object_get(TENANT, "no-such-object")

        # Read under a read lock, in chunks, from the node that holds the instance.
        with n1.object_open(TENANT, "py-image") as opened:
            assert opened.node == "n1" and opened.size == len(data)
            assert opened.read() == data
            assert opened.read(offset=1000, size=10) == data[1000:1010]
            instance = n1.object_get(TENANT, "py-image").instances[0]
            assert instance.readers == 1
        assert n1.object_get(TENANT, "py-image").instances[0].readers == 0

        # Replicated to both nodes: n2 reads its own instance.
        assert n1.object_replicate(TENANT, "py-image", 2) == 2
        _wait_catalog(shoal, n2, "py-image", 2)
        opened = n2.object_open(TENANT, "py-image", holder="py-reader", verify=True)
        assert opened.node == "n2" and opened.holder == "py-reader"
        assert opened.read() == data
        n2.object_close(opened)

        # An update binds the name to new bytes; a removal takes it and every instance away.
        updated = n1.object_add(TENANT, "py-image", b"second", update=True)
        assert updated.storage_id != added.storage_id and updated.size == 6
        with pytest.raises(shoal.Conflict):
            n1.object_add(TENANT, "py-image", b"third")
        n1.object_remove(TENANT, "py-image")
        with pytest.raises(shoal.NotFound):
            n1.object_get(TENANT, "py-image")
        assert n1.object_list(TENANT) == []


def test_drain(shoal, cluster):
    with cluster.client(0) as n1, cluster.client(1) as n2:
        n1.claim_create(TENANT, 8 * MB, claim_id="py-drained")
        assert n1.drain_progress("n1").phase == "none"
        seen = []
        started = n1.drain("n1", max_downtime_ms=2000)
        assert started.draining and started.node_id == "n1"
        # A draining node admits no new claim.
        with pytest.raises(shoal.Unavailable):
            n1.claim_create(TENANT, 8 * MB, claim_id="py-refused")
        ended = n1.drain_wait("n1", progress=seen.append, timeout_s=WAIT_S * 2)
        assert ended.phase == "done" and seen
        assert [(claim.claim_id, claim.state, claim.to) for claim in ended.claims] == [("py-drained", "moved", "n2")]
        assert n2.lookup("py-drained").owner == "n2"
        assert n1.drain_progress("n1").draining
        undrained = n1.undrain("n1")
        assert not undrained.draining
        n1.claim_create(TENANT, 8 * MB, claim_id="py-admitted")
        n1.claim_release("py-admitted")
        n2.claim_release("py-drained")


def test_lease_home_from_any_node(shoal, cluster):
    with cluster.client(0) as n1, cluster.client(1) as n2:
        n2.claim_create(TENANT, 8 * MB, claim_id="py-remote")
        lease, _ = n1.lease_grant(60000)
        assert n2.lease_home(lease.id).node_id == "n1"
        # Asked of n2, which does not hold it: its home answers.
        assert n2.lease_ttl(lease.id).home == "n1"
        assert n2.lease_keepalive(lease.id).id == lease.id
        # n1's lease holds a key of n2's claim: n2 takes a copy from its home.
        n1.key_put("py-remote", "session", b"s", lease=lease.id)
        assert n2.key_get("py-remote", "session").lease == lease.id
        n2.lease_revoke(lease.id)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                n2.key_get("py-remote", "session")
                time.sleep(0.1)
            except shoal.NotFound:
                break
        with pytest.raises(shoal.NotFound):
            n2.key_get("py-remote", "session")
        with pytest.raises(shoal.NotFound):
            n2.lease_ttl(lease.id)
        # An id the client chose marks no node: n2 finds its home by asking its peers.
        chosen, _ = n1.lease_grant(60000, lease_id=777)
        assert chosen.id == 777
        assert n2.lease_home(777).node_id == "n1"
        assert n2.lease_ttl(777).home == "n1"
        n2.key_put("py-remote", "chosen", b"c", lease=777)
        n2.lease_revoke(777)
        with pytest.raises(shoal.NotFound):
            n2.lease_home(777)
        n2.claim_release("py-remote")


def test_checkpoint_and_restore(shoal, cluster):
    with cluster.client(0) as n1, cluster.client(1) as n2:
        n1.claim_create(TENANT, 8 * MB, claim_id="py-saved")
        n1.claim_put("py-saved", "kept", b"before the checkpoint")
        # A running guest is not saved: its memory would change under the copy.
        with pytest.raises(shoal.Conflict):
            n1.claim_checkpoint("py-saved", "py-ckpt")
        assert n1.claim_pause("py-saved").state == shoal.messages.CLAIM_PAUSED
        saved = n1.claim_checkpoint("py-saved", "py-ckpt", comment="paused")
        assert saved.name == "py-ckpt" and saved.tenant == TENANT and saved.memory_bytes == 8 * MB
        assert [instance.node for instance in saved.instances] == ["n1"]
        with pytest.raises(shoal.Conflict):
            n1.claim_checkpoint("py-saved", "py-ckpt")
        # Restored on n2, which holds no instance: it copies one first, and the guest has its keys.
        # n2 learns of the checkpoint through the catalog's sync, after the call that made it.
        _wait_catalog(shoal, n2, "py-ckpt", 1)
        restored = n2.claim_create(TENANT, 0, claim_id="py-restored", from_object="py-ckpt")
        assert restored.state == shoal.messages.CLAIM_RUNNING and restored.memory_bytes == 8 * MB
        assert n2.claim_get("py-restored", "kept") == b"before the checkpoint"
        with pytest.raises(shoal.NotFound):
            n2.claim_create(TENANT, 0, claim_id="py-nothing", from_object="py-no-such-object")
        n2.claim_release("py-restored")
        n1.claim_release("py-saved")
        n1.object_remove(TENANT, "py-ckpt")
