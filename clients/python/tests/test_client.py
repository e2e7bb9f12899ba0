"""The Python client against real nodes: every request, a move with progress, the 404 retry after a
move, a refused key, a timeout against a stopped node, and events as an iterator."""
import os
import signal
import threading
import time

import pytest

MB = 1024 * 1024
TENANT = "acme/web"
# How long a test's watch waits for the events it expects.
WATCH_S = 120


def test_every_request(shoal, cluster):
    with cluster.client(0) as node:
        status = node.status()
        assert status.node_id == "n1" and status.role == "admin" and status.peers == 1
        assert {peer.node_id for peer in node.peers()} == {"n1", "n2"}
        with pytest.raises(shoal.NotFound):
            node.peers_forget("n9")
        with pytest.raises(shoal.NotFound):
            node.damage_forget("no-such-damage")

        written = node.kv_put("inventory", "k1", b"v1")
        assert written.key == "k1"
        assert node.kv_get("inventory", "k1").value == b"v1"
        items, more = node.kv_scan("inventory", prefix="k")
        assert [item.key for item in items] == ["k1"] and not more
        assert node.kv_del("inventory", "k1").deleted
        with pytest.raises(shoal.NotFound):
            node.kv_get("inventory", "k1")
        assert any(head.node == "n1" for head in node.oplog_heads("inventory"))
        assert any(stats.dataset == "inventory" for stats in node.oplog_stats())
        # A prune waits for every peer's confirmation: 409 until n2 confirmed, then nothing to prune.
        try:
            assert node.oplog_prune(1, "inventory") == 0
        except shoal.Conflict as waiting:
            assert "has not confirmed" in waiting.message

        info = node.claim_create(TENANT, 16 * MB, claim_id="py-1")
        assert info.id == "py-1" and info.owner == "n1"
        assert [claim.id for claim in node.claim_list()] == ["py-1"]
        assert node.claim_show("py-1").state == shoal.messages.CLAIM_RUNNING
        node.claim_put("py-1", "greeting", "hello")
        assert node.claim_get("py-1", "greeting") == b"hello"
        assert node.claim_pause("py-1").state == shoal.messages.CLAIM_PAUSED
        assert node.claim_resume("py-1").state == shoal.messages.CLAIM_RUNNING
        assert node.claim_stop("py-1").state == shoal.messages.CLAIM_STOPPED
        assert node.claim_start("py-1").state == shoal.messages.CLAIM_RUNNING
        assert node.lookup("py-1").owner == "n1"
        scopes = node.counters().scopes
        assert scopes[0].tenant == "" and scopes[0].claims == 1
        assert node.move_list() == []
        with pytest.raises(shoal.Conflict):
            node.claim_resume("py-1")
        with pytest.raises(shoal.InsufficientStorage) as full:
            node.claim_create(TENANT, 4096 * MB, claim_id="py-big")
        assert full.value.status == 507 and "limits/memory_mb" in full.value.message
        with pytest.raises(shoal.BadRequest):
            node.claim_create("no-slash", MB)
        assert node.claim_release("py-1").state == shoal.messages.CLAIM_RELEASED
        with pytest.raises(shoal.NotFound):
            node.claim_show("py-nothing")

    # A tenant sees its own claims only, and not the mesh.
    with cluster.client(0, cert=cluster.tenant) as tenant:
        assert tenant.status().role == "tenant"
        with pytest.raises(shoal.Forbidden):
            tenant.peers()


def test_move_with_progress_and_the_404_retry(shoal, cluster):
    with cluster.client(0, timeout_ms=10000) as n1:
        n1.claim_create(TENANT, 64 * MB, claim_id="py-mover", rate=1000 * 1000)
        n1.claim_put("py-mover", "before", "the move")
        steps = []
        result = n1.move("py-mover", "n2", max_downtime_ms=300, progress=steps.append)
        assert result.done and result.phase == "done", result.error
        assert steps[0].phase in ("admitting", "round") and steps[-1].phase == "done"
        assert result.round >= 1 and result.bytes_sent > 0
        # n1 no longer holds it: a 404 there, a lookup, and the call at n2.
        info = n1.claim_show("py-mover")
        assert info.owner == "n2" and info.epoch == 2
        assert n1.claim_get("py-mover", "before") == b"the move"
        assert n1.claim_release("py-mover").state == shoal.messages.CLAIM_RELEASED


def test_a_refused_key(shoal, cluster):
    with cluster.client(0, cert=cluster.stranger, timeout_ms=3000) as stranger:
        with pytest.raises(shoal.RefusedError) as refused:
            stranger.status()
        assert "refused our key" in str(refused.value)


def _for_at_most(seconds):
    """A watch's idle callback that ends it SECONDS from now: a watch whose events never come
    (their maker failed) ends, and the test's checks say what was missing."""
    deadline = time.monotonic() + seconds

    def idle():
        if time.monotonic() > deadline:
            raise StopIteration
    return idle


def _wait_stopped(pid, limit_s=30.0):
    """Waits until every thread of PID is stopped (state T in /proc)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as stat:
                    states.append(stat.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop within {limit_s} s")


def test_unreachable_and_a_timeout_against_a_stopped_node(shoal, cluster):
    import shoal as package
    with package.Client("tcp://127.0.0.1:1", cluster.admin, cluster.cluster_key, 500) as nobody:
        with pytest.raises(shoal.UnreachableError):
            nobody.status()
    with cluster.client(1, timeout_ms=1000) as n2:
        n2.status()
        process = cluster.nodes[1]["process"]
        process.send_signal(signal.SIGSTOP)
        try:
            # A stop reaches each of the node's threads in its own time: one
            # still running could answer. Asked once every thread is stopped.
            _wait_stopped(process.pid)
            with pytest.raises(shoal.TimeoutError) as late:
                n2.status()
            assert "no reply" in str(late.value)
        finally:
            process.send_signal(signal.SIGCONT)


def test_events_as_an_iterator(shoal, cluster):
    seen = []
    infos = []
    with cluster.client(0) as watcher, cluster.client(0) as maker:
        def make():
            maker.claim_create(TENANT, 16 * MB, claim_id="py-watched")
            maker.claim_release("py-watched")
        thread = threading.Thread(target=make)

        def answered(reply):
            # The watch stands: now the claim comes and goes.
            infos.append(reply)
            if not thread.ident:
                thread.start()
        for event in watcher.watch(["claims"], info=answered, idle=_for_at_most(WATCH_S)):
            seen.append(event)
            if event.what == "released" or len(seen) > 20:
                break
        thread.join()
    whats = [(event.kind, event.what, event.claim_id) for event in seen]
    assert whats == [("claim", "creating", "py-watched"), ("claim", "running", "py-watched"),
                     ("claim", "released", "py-watched")]
    for before, after in zip(seen, seen[1:]):
        assert after.previous_seq == before.seq and after.seq == before.seq + 1
    assert infos and infos[0].node_id == "n1"


def test_a_tenant_watcher_while_another_tenant_works(shoal, cluster):
    """A tenant's watcher is sent its own claims' events only: their numbers skip the other
    tenant's, and each names the last one this watcher was sent, so no gap goes unexplained."""
    seen = []
    with cluster.client(0, cert=cluster.tenant) as watcher, cluster.client(0) as maker:
        def work():
            for index in range(3):
                maker.claim_create("other/app", 16 * MB, claim_id="py-other-%d" % index)
                maker.claim_create(TENANT, 16 * MB, claim_id="py-own-%d" % index)
            for index in range(3):
                maker.claim_release("py-other-%d" % index)
                maker.claim_release("py-own-%d" % index)
        thread = threading.Thread(target=work)
        first = []

        def answered(reply):
            first.append(reply.last_seq)
            if not thread.ident:
                thread.start()
        for event in watcher.watch("", info=answered, idle=_for_at_most(WATCH_S)):
            seen.append(event)
            if (event.claim_id == "py-own-2" and event.what == "released") or len(seen) > 50:
                break
        thread.join()
    assert seen and all(event.tenant == TENANT for event in seen)
    assert seen[0].previous_seq == first[0]
    for before, after in zip(seen, seen[1:]):
        assert after.previous_seq == before.seq
    assert any(after.seq > before.seq + 1 for before, after in zip(seen, seen[1:])), \
        "no number was skipped: the other tenant's events reached the tenant"
    assert {event.claim_id for event in seen} == {"py-own-0", "py-own-1", "py-own-2"}


def test_a_watcher_away_too_long(shoal, cluster):
    """A watcher asking for events older than the node keeps (events/kept) is told which are lost,
    in numbers and words, and gets the kept ones; one naming a number the node never gave is
    refused."""
    node = cluster.nodes[0]
    node["process"].terminate()
    node["process"].wait(30)
    node["env"]["SHOAL_EVENTS_KEPT"] = "16"
    cluster.start(0)
    with cluster.client(0, timeout_ms=30000) as maker:
        infos = []

        def stop():
            raise StopIteration
        with cluster.client(0) as probe:
            for _ in probe.watch("", info=infos.append, idle=stop):
                pass
        start = infos[0].last_seq
        maker.claim_create(TENANT, 16 * MB, claim_id="py-busy")
        for _ in range(10):
            maker.claim_stop("py-busy")
            maker.claim_start("py-busy")
        infos = []
        seen = []
        with cluster.client(0) as watcher:
            for event in watcher.watch("", after_seq=start + 1, info=infos.append, idle=_for_at_most(WATCH_S)):
                seen.append(event)
                if len(seen) == 16:
                    break
        last = seen[-1].seq
        first_kept = infos[0].first_kept_seq
        assert infos[0].missed_from == start + 2 and infos[0].missed_to == first_kept - 1
        assert infos[0].replayed == 16 and first_kept == last - 15
        assert "events %d to %d are no longer kept" % (start + 2, first_kept - 1) in infos[0].message
        assert seen[0].seq == first_kept and seen[0].previous_seq == start + 1
        with cluster.client(0) as stranger:
            with pytest.raises(shoal.Conflict) as refused:
                next(stranger.watch("", after_seq=last + 100))
            assert "past node n1's last event" in refused.value.message
        maker.claim_release("py-busy")
