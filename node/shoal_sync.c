/*  shoal_sync: oplog replication and peer-confirmed prune.

    DESIGN

    The invariant everything here keeps: a node's entries of one origin in
    one dataset form an unbroken chain from its first entry (or from its
    prune watermark) to its head. The store decides the chain rules
    (shoal_oplog_append_chain): an entry is only appended when it links to
    the head (its prev hash is the head's hash, or it is the origin's first
    entry and there is no head), entries held already are skipped, and
    anything else is a gap, which sync repairs by asking for the chain
    range from our head to that entry. So a head is always a
    true statement of what a node holds, and heads can serve as
    confirmations: a peer whose head for origin O is at stamp S holds every
    entry O wrote up to S.

    Three ways entries travel, all as oplog entries:

      push        every local write goes to every alive peer at once
                  (SYNC_PUSH). A peer that was unreachable misses it; the
                  next push to it shows a gap, which it repairs by asking
                  the origin for the chain range (SYNC_CHAIN).
      pull        each sync interval one alive peer is asked for its heads
                  (SYNC_HEADS, carrying ours); for each origin where it is
                  ahead, its entries after our head are pulled, a page at a
                  time (SYNC_PULL), and appended in one batch per page.
      snapshot    a peer that was asked for entries below its prune
                  watermark says so ("pruned"); the asker then takes the
                  dataset's snapshot (SYNC_SNAPSHOT): first every
                  materialised key, tombstones included, merged by the same
                  order entries are; then the entries left in the peer's
                  log; then its heads and watermark. After that the asker
                  holds what the peer holds, and converges as any other node.
      bulk        a pull goes out as SYNC_BULK: the answer carries the
                  entries as the peer stores them (oplog_by_node_hlc, read
                  in one ordered walk). A short answer is appended here as
                  a pull's page is. One that fills a page, or holds
                  mesh/sync_bulk_min entries or more, starts a stream: its
                  pages go to the loader's threads (shoal_loader), which
                  check each entry against the chain and write batches as
                  sorted table files, while the reactor asks for the next
                  page as soon as one arrives, as long as fewer than
                  S_BULK_QUEUE_PAGES wait to be checked. The stream holds
                  the origin's in-flight mark until the loader says all it
                  took is written: no pull or chain repair of that origin
                  runs beside it. A page refused (a hash that does not
                  match, a broken link) ends the stream after the entries
                  before it, which are written; the next round starts from
                  there and meets the bad entry again, refused by name:
                  nothing past it gets in. Heads say whether their sender
                  serves SYNC_BULK: a peer of an older version says nothing,
                  and is pulled from as before.

    Prune: the answer to SYNC_HEADS is recorded as the peer's confirmation
    (store/shoal_members). For a dataset, each tracked peer P and each
    origin O with a head here at stamp H: if P confirmed O up to C >= H, P
    is not behind on O; else entries after C may be missing at P, so the
    cutoff may not pass C (a peer with no confirmation at all holds it at
    0). The effective cutoff is the older of that and the retention cutoff.
    A forgotten peer is no longer tracked, and holds nothing back.

    Tombstones: a deleted key's tombstone makes an older put that arrives
    later lose. It may go once every tracked peer has confirmed past it
    (the same confirmed cutoff as prune's, without retention): each then
    holds the delete, and no put older than it can still arrive. A peer
    that was away during the delete confirms nothing past it until it has
    it, so the tombstone stays until then: a snapshot it may need still
    carries it. Collection walks each dataset's kv S_COLLECT_KEYS keys a
    sync interval (shoal_oplog_kv_collect), one dataset after another. A
    dataset whose last whole walk met no tombstone, and whose kv has not
    changed since that walk began (shoal_oplog_kv_generation), rests:
    nothing there could be collected. It is walked again once its kv
    changes. Without the rest, a node walked every key it holds, round and
    round, for nothing: an idle node holding 200,000 keys with no
    tombstone, at a 200 ms sync interval, used 22 ms of CPU a second, and
    14 once its collection rested. Nothing is collected while a catch-up
    in bulk runs (see s_collect).

    Every handler does a bounded amount of work (a page), so that probes
    never wait behind a sync.
*/
#include "shoal_sync.h"
#include "shoal_metrics.h"
#include "shoal_data.h"
#include "shoal_loader.h"
#include "shoal_alloc.h"

#include <inttypes.h>

//  The lag of a peer is counted up to this many entries per origin; beyond,
//  it reads as this many. Counting walks oplog_by_node_hlc, which carries
//  the entries, at every heads exchange with a peer behind: with 100,000 a
//  node serving a far-behind peer spent most of a core counting, and still
//  a fifth of one with 10,000.
#define S_LAG_COUNT_MAX 1000
//  How long a page of a pull, chain or snapshot may take to answer. Not the
//  sync interval: a short interval must not make a busy peer's pages time
//  out and be asked for again.
#define S_TRANSFER_TIMEOUT_MS 10000
//  Pages of catch-ups in bulk handed to the loader and not checked yet,
//  across streams: past it no page is asked for (SHOAL_SYNC_BULK_PAGE_BYTES
//  each, so this bounds what waits in memory).
#define S_BULK_QUEUE_PAGES 24
//  Where the loader writes its table files, under the data directory.
#define S_BULK_DIR "bulk"
//  kv keys a tombstone collection step walks, one step a sync interval: a
//  bounded piece of work on the reactor.
#define S_COLLECT_KEYS 4096

//  A snapshot being taken of one dataset.
typedef struct {
    char *dataset;              //  the dataset
    char *peer;                 //  from whom
    size_t keys;                //  keys merged so far
    size_t entries;             //  entries appended so far
    bool entries_phase;         //  the keys are done; entries are being asked for
} s_snapshot_t;

//  What a pull or chain request was for, handed to its reply.
typedef struct {
    shoal_sync_t *sync;         //  the sync that asked
    char *dataset;              //  the dataset
    char *node;                 //  the origin whose entries were asked for
    char *flight;               //  its key in the in-flight set
    shoal_oplog_tip_t head;     //  our head of the origin when asked (a bulk pull's base)
} s_ask_t;

//  A catch-up in bulk of one origin in one dataset, from one peer.
typedef struct {
    shoal_sync_t *sync;         //  the sync it belongs to
    char *key;                  //  its in-flight key, also its key among the streams
    char *dataset;              //  the dataset
    char *node;                 //  the origin
    char *peer;                 //  where the pages come from
    shoal_hlc_stamp_t after;    //  the last entry received: the next page follows it
    size_t queued;              //  its pages with the loader, not checked yet
    bool asking;                //  a page request is out
    bool more;                  //  the peer has more after AFTER
    bool ending;                //  no more pages: waiting for the loader to write what it took
    size_t received;            //  entries received
    size_t taken;               //  entries the loader took
    size_t written;             //  entries written
    int64_t started_ms;         //  when it started, for the log
} s_stream_t;

struct _shoal_sync_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_oplog_t *oplog;       //  the log (borrowed)
    shoal_mesh_t *mesh;         //  peers (borrowed)
    shoal_members_t *members;   //  tracked peers and confirmations (borrowed)
    zhashx_t *in_flight;        //  "dataset\nnode" -> "" : a pull or chain is out
    zhashx_t *snapshots;        //  dataset -> s_snapshot_t being taken
    zlistx_t *due;              //  peers to exchange heads with at the next tick
    size_t cursor;              //  round-robin position among alive peers
    int64_t next_round_ms;      //  when the next anti-entropy round starts
    char *prune_waiting;        //  the peer prune waited for last interval, for the log
    char *collect_dataset;      //  the dataset whose tombstones are being collected; NULL between
    char *collect_after;        //  the kv key its collection resumes after; NULL: from the first
    size_t collect_next;        //  the dataset to collect next, by its place in the sorted list
    uint64_t collect_generation;    //  the collected dataset's kv generation when its walk began
    bool collect_met;           //  the walk met a tombstone, or a step could not look
    zhashx_t *resting;          //  dataset -> uint64_t*: the kv generation its last walk that met no
                                //  tombstone ended at; its collection rests while that is still it
    shoal_loader_t *loader;     //  threads of catch-ups in bulk; NULL until one starts
    zloop_t *loop;              //  the reactor, which reads the loader's events
    zhashx_t *streams;          //  in-flight key -> s_stream_t: catch-ups in bulk
    zhashx_t *bulk_peers;       //  peers whose last heads said they serve SYNC_BULK (items unused)
    size_t queued;              //  pages with the loader, not checked yet, all streams
    shoal_sync_taken_fn *taken; //  told when a snapshot was taken in full, or NULL
    void *taken_arg;
    shoal_metrics_t *metrics;   //  counts catch-up bytes (borrowed; may be NULL)
};

static void s_pull(shoal_sync_t *self, const char *peer, const char *dataset, const char *node);
static void s_snapshot_ask(shoal_sync_t *self, const char *peer, const char *dataset, bool entries,
                           const char *after_key, const shoal_hlc_stamp_t *after, const char *after_node);

// ---------------------------------------------------------------------------
//  Helpers

static char *
s_flight_key(const char *dataset, const char *node)
{
    return zsys_sprintf("%s\n%s", dataset, node);
}

static s_ask_t *
s_ask_new(shoal_sync_t *self, const char *dataset, const char *node)
{
    char *flight = s_flight_key(dataset, node);
    if (zhashx_lookup(self->in_flight, flight)) {
        free(flight);
        return NULL;
    }
    zhashx_insert(self->in_flight, flight, "");
    s_ask_t *ask = (s_ask_t *) zmalloc(sizeof *ask);
    ask->sync = self;
    ask->dataset = shoal_strdup(dataset);
    ask->node = shoal_strdup(node);
    ask->flight = flight;
    return ask;
}

static void
s_ask_destroy(s_ask_t **self_p)
{
    if (*self_p) {
        s_ask_t *self = *self_p;
        //  A stream may have taken the mark over (then FLIGHT is NULL).
        if (self->flight)
            zhashx_delete(self->sync->in_flight, self->flight);
        free(self->dataset);
        free(self->node);
        free(self->flight);
        free(self);
        *self_p = NULL;
    }
}

//  Bytes ENTRY takes in a page: exactly its encoding and its framing, so
//  that a page sized by it always encodes.
static size_t
s_entry_cost(const shoal_oplog_entry_t *entry)
{
    return shoal_oplog_entry_size(entry) + SHOAL_PAGE_ELEMENT_OVERHEAD;
}

//  Moves LIST's entries, up to a page, into BODY. Returns whether some were
//  left out.
static bool
s_page_fill(shoal_msg_entries_t *body, shoal_oplog_list_t *list)
{
    size_t bytes = 0, count = 0;
    while (count < list->count && count < SHOAL_SYNC_PAGE_ENTRIES) {
        bytes += s_entry_cost(&list->entries[count]);
        if (count && bytes > SHOAL_SYNC_PAGE_BYTES)
            break;
        count++;
    }
    body->entries = (shoal_oplog_entry_t *) zmalloc((count + 1) * sizeof *body->entries);
    if (count)
        memcpy(body->entries, list->entries, count * sizeof *body->entries);
    body->count = count;
    //  The entries moved are now the body's; the rest stay the list's.
    for (size_t i = count; i < list->count; i++)
        shoal_oplog_entry_codec.clear(&list->entries[i]);
    bool more = count < list->count;
    list->count = 0;
    return more;
}

//  Appends ENTRIES (one origin, chain order) as the log's chain rules
//  decide (shoal_oplog_append_chain): returns 1 for a gap, 0 when appended
//  (or every entry was held), -1 when refused or the write failed.
static int
s_append_chain(shoal_sync_t *self, const shoal_oplog_entry_t *entries, size_t count, size_t *added)
{
    bool gap = false;
    if (shoal_oplog_append_chain(self->oplog, entries, count, added, &gap)) {
        zsys_warning("sync: refused %zu entries of %s from %s: %s", count, entries[0].dataset,
                     entries[0].node, shoal_oplog_error(self->oplog));
        return -1;
    }
    return gap ? 1 : 0;
}

// ---------------------------------------------------------------------------
//  Asking peers: chain, pull, snapshot

static void
s_chain_done(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_sync_t *self = ask->sync;
    if (reply && reply->status == SHOAL_STATUS_OK) {
        const shoal_msg_entries_t *body = (const shoal_msg_entries_t *) reply->body;
        size_t added = 0;
        int rc = s_append_chain(self, body->entries, body->count, &added);
        if (rc == 0 && added)
            zsys_info("sync: repaired a gap in %s/%s with %zu entries from %s", ask->dataset, ask->node,
                      added, peer);
        if (rc == 0 && body->more) {
            s_ask_destroy(&ask);
            //  The rest of the range comes by pull, from where we now are:
            //  at once from a peer known to serve it in bulk (a wide gap is
            //  a catch-up), else after a heads exchange with it, which says
            //  whether it does (a node that just joined heard a push before
            //  that answer) and pulls what we lack.
            if (self->settings->sync_bulk_min == 0 || zhashx_lookup(self->bulk_peers, peer))
                s_pull(self, peer, body->entries[0].dataset, body->entries[0].node);
            else
                zlistx_add_end(self->due, (void *) peer);
            return;
        }
    }
    s_ask_destroy(&ask);
}

//  Asks PEER for the chain of ENTRY's origin from our head to ENTRY.
static void
s_chain(shoal_sync_t *self, const char *peer, const shoal_oplog_entry_t *entry)
{
    s_ask_t *ask = s_ask_new(self, entry->dataset, entry->node);
    if (!ask)
        return;
    shoal_oplog_head_t head = { 0 };
    bool has_head = false;
    if (shoal_oplog_head(self->oplog, entry->dataset, entry->node, &head, &has_head)) {
        s_ask_destroy(&ask);
        return;
    }
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_CHAIN, 0);
    shoal_msg_chain_t *body = (shoal_msg_chain_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(entry->dataset);
    body->has_start = has_head;
    if (has_head)
        memcpy(body->start, head.hash, SHOAL_HASH_SIZE);
    memcpy(body->end, entry->hash, SHOAL_HASH_SIZE);
    free(head.node);
    if (shoal_mesh_send(self->mesh, peer, &request, S_TRANSFER_TIMEOUT_MS, s_chain_done, ask))
        s_ask_destroy(&ask);
}

static void
s_pull_done(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_sync_t *self = ask->sync;
    char *dataset = shoal_strdup(ask->dataset), *node = shoal_strdup(ask->node);
    s_ask_destroy(&ask);
    if (reply && reply->status == SHOAL_STATUS_OK) {
        const shoal_msg_entries_t *body = (const shoal_msg_entries_t *) reply->body;
        if (body->pruned)
            s_snapshot_ask(self, peer, dataset, false, "", NULL, "");
        else {
            size_t added = 0;
            int rc = s_append_chain(self, body->entries, body->count, &added);
            if (rc == 1)
                s_chain(self, peer, &body->entries[body->count - 1]);
            else
            if (rc == 0 && body->more)
                s_pull(self, peer, dataset, node);
        }
    }
    free(dataset);
    free(node);
}

// ---------------------------------------------------------------------------
//  Catch-ups in bulk (see DESIGN)

static void s_stream_ask(s_stream_t *stream);
static int s_loader_readable(zloop_t *loop, zsock_t *sock, void *arg);

//  What a page request of a stream hands its reply.
typedef struct {
    shoal_sync_t *sync;         //  the sync that asked
    char *key;                  //  the stream's key
} s_stream_ref_t;

static void
s_stream_destroy(s_stream_t **self_p)
{
    if (*self_p) {
        s_stream_t *self = *self_p;
        free(self->key);
        free(self->dataset);
        free(self->node);
        free(self->peer);
        free(self);
        *self_p = NULL;
    }
}

//  Asks the loader to write what STREAM took and to say when it has: no
//  page is asked for it any more.
static void
s_stream_end(s_stream_t *stream)
{
    if (stream->ending)
        return;
    stream->ending = true;
    //  After a stop the loader is gone, and the stream with the sync.
    if (stream->sync->loader)
        shoal_loader_end(stream->sync->loader, stream->key);
}

//  Asks for the next page of every stream that may have one.
static void
s_streams_ask(shoal_sync_t *self)
{
    for (s_stream_t *stream = (s_stream_t *) zhashx_first(self->streams);
         stream && self->queued < S_BULK_QUEUE_PAGES; stream = (s_stream_t *) zhashx_next(self->streams))
        if (!stream->ending && stream->more && !stream->asking)
            s_stream_ask(stream);
}

//  Takes in a page of STREAM: its last stamp is absorbed into our clock, the
//  page goes to the loader (after BASE, given with the first page only),
//  and the next one is asked for.
static void
s_stream_page(s_stream_t *stream, const shoal_msg_bulk_t *page, const shoal_oplog_tip_t *base)
{
    shoal_sync_t *self = stream->sync;
    stream->asking = false;
    stream->more = page->more;
    if (page->count) {
        shoal_hlc_stamp_t last = { page->last_wall_ms, page->last_logic };
        shoal_hlc_t *clock = shoal_oplog_hlc(self->oplog);
        if (shoal_hlc_observe(clock, &last)) {
            zsys_warning("sync: catch-up of %s/%s from %s stopped: %s", stream->dataset, stream->node,
                         stream->peer, shoal_hlc_error(clock));
            s_stream_end(stream);
            return;
        }
        stream->after = last;
        stream->received += page->count;
        shoal_metrics_catchup_page(self->metrics, page);
        shoal_loader_page(self->loader, stream->key, stream->dataset, stream->node, base, page);
        stream->queued++;
        self->queued++;
    }
    if (!stream->more)
        s_stream_end(stream);
    else
    if (self->queued < S_BULK_QUEUE_PAGES)
        s_stream_ask(stream);
}

static void
s_stream_reply(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    s_stream_ref_t *ref = (s_stream_ref_t *) arg;
    s_stream_t *stream = (s_stream_t *) zhashx_lookup(ref->sync->streams, ref->key);
    free(ref->key);
    free(ref);
    if (!stream)
        return;
    stream->asking = false;
    //  A stream that ended meanwhile (refused, or stopped) takes no page:
    //  the loader has been told it is over.
    if (stream->ending)
        return;
    if (reply && reply->status == SHOAL_STATUS_OK && !((const shoal_msg_bulk_t *) reply->body)->pruned)
        s_stream_page(stream, (const shoal_msg_bulk_t *) reply->body, NULL);
    else {
        //  No answer, or one that ends it (the next round starts afresh).
        zsys_warning("sync: catch-up of %s/%s from %s stopped: %s", stream->dataset, stream->node, peer,
                     reply ? (reply->message ? reply->message : "refused") : "no answer in time");
        s_stream_end(stream);
    }
}

//  Asks STREAM's peer for the page after the last one.
static void
s_stream_ask(s_stream_t *stream)
{
    shoal_sync_t *self = stream->sync;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_BULK, 0);
    shoal_msg_pull_t *body = (shoal_msg_pull_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(stream->dataset);
    body->node = shoal_strdup(stream->node);
    body->after_wall_ms = stream->after.wall_ms;
    body->after_logic = stream->after.logic;
    //  The reply finds the stream by its key: it may have ended meanwhile.
    s_stream_ref_t *ref = (s_stream_ref_t *) zmalloc(sizeof *ref);
    ref->sync = self;
    ref->key = shoal_strdup(stream->key);
    stream->asking = true;
    if (shoal_mesh_send(self->mesh, stream->peer, &request, S_TRANSFER_TIMEOUT_MS, s_stream_reply, ref)) {
        free(ref->key);
        free(ref);
        stream->asking = false;
        s_stream_end(stream);
    }
}

//  Starts a catch-up in bulk of ASK's origin from PEER with its first PAGE.
//  The stream takes over ASK's in-flight mark. Returns -1 (ASK untouched)
//  when the loader cannot start.
static int
s_stream_start(shoal_sync_t *self, const char *peer, s_ask_t *ask, const shoal_msg_bulk_t *page)
{
    if (!self->loader) {
        char *dir = zsys_sprintf("%s/%s", self->settings->data_dir, S_BULK_DIR);
        self->loader = shoal_loader_new(self->oplog, dir, (uint64_t) self->settings->max_clock_ahead_ms);
        free(dir);
        if (!self->loader || !self->loop
        ||  zloop_reader(self->loop, shoal_loader_sock(self->loader), s_loader_readable, self)) {
            shoal_loader_destroy(&self->loader);
            return -1;
        }
    }
    s_stream_t *stream = (s_stream_t *) zmalloc(sizeof *stream);
    stream->sync = self;
    stream->key = shoal_strdup(ask->flight);
    stream->dataset = shoal_strdup(ask->dataset);
    stream->node = shoal_strdup(ask->node);
    stream->peer = shoal_strdup(peer);
    stream->started_ms = zclock_mono();
    zhashx_insert(self->streams, stream->key, stream);
    zsys_info("sync: catching up %s/%s from %s in bulk", stream->dataset, stream->node, peer);
    //  The in-flight mark is the stream's now: forget the ask without it.
    free(ask->flight);
    ask->flight = NULL;
    s_stream_page(stream, page, &ask->head);
    return 0;
}

//  An event of the loader (see shoal_loader.h).
static int
s_loader_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_sync_t *self = (shoal_sync_t *) arg;
    shoal_loader_event_t event;
    if (shoal_loader_event(self->loader, &event))
        return 0;
    s_stream_t *stream = (s_stream_t *) zhashx_lookup(self->streams, event.stream);
    if (stream && (event.type == SHOAL_LOADER_TAKEN || event.type == SHOAL_LOADER_REFUSED)) {
        stream->queued--;
        self->queued--;
        stream->taken += event.entries;
    }
    if (stream && event.type == SHOAL_LOADER_REFUSED) {
        zsys_warning("sync: catch-up of %s/%s from %s stopped after %zu entries: %s", stream->dataset,
                     stream->node, stream->peer, stream->taken, event.error);
        s_stream_end(stream);
    }
    if (stream && event.type == SHOAL_LOADER_FAILED) {
        zsys_warning("sync: catch-up of %s/%s from %s stopped: %s", stream->dataset, stream->node,
                     stream->peer, event.error);
        s_stream_end(stream);
    }
    if (stream && event.type == SHOAL_LOADER_WRITTEN)
        stream->written += event.entries;
    if (stream && event.type == SHOAL_LOADER_ENDED) {
        double seconds = (double) (zclock_mono() - stream->started_ms) / 1000.0;
        zsys_info("sync: caught up %zu entries of %s/%s from %s in bulk in %.2f s", stream->written,
                  stream->dataset, stream->node, stream->peer, seconds);
        zhashx_delete(self->in_flight, stream->key);
        zhashx_delete(self->streams, event.stream);
    }
    shoal_loader_event_clear(&event);
    s_streams_ask(self);
    return 0;
}

//  Appends a short answer to a bulk pull as a pull's page is appended, and
//  follows up the same way.
static void
s_bulk_append(shoal_sync_t *self, const char *peer, const shoal_msg_bulk_t *page)
{
    shoal_oplog_entry_t *entries = (shoal_oplog_entry_t *) zmalloc((page->count + 1) * sizeof *entries);
    size_t count = 0, offset = 0;
    for (; count < page->count; offset += page->sizes[count++]) {
        char error[256];
        if (shoal_oplog_entry_codec.decode(page->bytes + offset, page->sizes[count], &entries[count], error,
                                           sizeof error)) {
            zsys_warning("sync: entry %zu of %zu from %s does not decode: %s", count + 1, page->count,
                         peer, error);
            break;
        }
    }
    size_t added = 0;
    int rc = s_append_chain(self, entries, count, &added);
    if (rc == 1)
        s_chain(self, peer, &entries[count - 1]);
    for (size_t i = 0; i < count; i++)
        shoal_oplog_entry_codec.clear(&entries[i]);
    free(entries);
}

static void
s_bulk_done(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_sync_t *self = ask->sync;
    if (!reply || reply->status != SHOAL_STATUS_OK) {
        s_ask_destroy(&ask);
        return;
    }
    const shoal_msg_bulk_t *page = (const shoal_msg_bulk_t *) reply->body;
    char *dataset = shoal_strdup(ask->dataset), *node = shoal_strdup(ask->node);
    int64_t least = self->settings->sync_bulk_min;
    bool far = page->more || (least > 0 && (int64_t) page->count >= least);
    if (!page->pruned && far && s_stream_start(self, peer, ask, page) == 0)
        s_ask_destroy(&ask);
    else {
        //  The in-flight mark goes first: what follows may ask again.
        s_ask_destroy(&ask);
        if (page->pruned)
            s_snapshot_ask(self, peer, dataset, false, "", NULL, "");
        else {
            s_bulk_append(self, peer, page);
            if (page->more)
                s_pull(self, peer, dataset, node);
        }
    }
    free(dataset);
    free(node);
}

//  Asks PEER for NODE's entries of DATASET after our head, one page: in
//  bulk when the peer serves it and bulk is on (see DESIGN).
static void
s_pull(shoal_sync_t *self, const char *peer, const char *dataset, const char *node)
{
    s_ask_t *ask = s_ask_new(self, dataset, node);
    if (!ask)
        return;
    shoal_oplog_head_t head = { 0 };
    bool has_head = false;
    if (shoal_oplog_head(self->oplog, dataset, node, &head, &has_head)) {
        s_ask_destroy(&ask);
        return;
    }
    bool bulk = self->settings->sync_bulk_min > 0 && zhashx_lookup(self->bulk_peers, peer);
    shoal_envelope_t *request = shoal_envelope_new(bulk ? SHOAL_MSG_SYNC_BULK : SHOAL_MSG_SYNC_PULL, 0);
    shoal_msg_pull_t *body = (shoal_msg_pull_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset);
    body->node = shoal_strdup(node);
    body->from_start = !has_head;
    body->after_wall_ms = head.stamp.wall_ms;
    body->after_logic = head.stamp.logic;
    ask->head.has_tip = has_head;
    ask->head.stamp = head.stamp;
    memcpy(ask->head.hash, head.hash, SHOAL_HASH_SIZE);
    free(head.node);
    if (shoal_mesh_send(self->mesh, peer, &request, S_TRANSFER_TIMEOUT_MS, bulk ? s_bulk_done : s_pull_done, ask))
        s_ask_destroy(&ask);
}

static void
s_snapshot_destroy(s_snapshot_t **self_p)
{
    if (*self_p) {
        free((*self_p)->dataset);
        free((*self_p)->peer);
        free(*self_p);
        *self_p = NULL;
    }
}

//  Takes in the end of a snapshot: the peer's watermark and heads.
static void
s_snapshot_finish(shoal_sync_t *self, s_snapshot_t *snapshot, const shoal_msg_snapshot_t *body)
{
    if (body->watermark_wall_ms) {
        shoal_hlc_stamp_t watermark = { body->watermark_wall_ms, body->watermark_logic };
        if (shoal_oplog_prune(self->oplog, snapshot->dataset, &watermark, NULL))
            zsys_warning("sync: cannot raise the watermark of %s: %s", snapshot->dataset,
                         shoal_oplog_error(self->oplog));
    }
    for (size_t i = 0; i < body->head_count; i++) {
        shoal_oplog_head_t head = { body->heads[i].node, { body->heads[i].wall_ms, body->heads[i].logic }, { 0 } };
        memcpy(head.hash, body->heads[i].hash, SHOAL_HASH_SIZE);
        bool moved;
        if (shoal_oplog_head_merge(self->oplog, snapshot->dataset, &head, &moved))
            zsys_warning("sync: cannot take head %s of %s: %s", head.node, snapshot->dataset,
                         shoal_oplog_error(self->oplog));
    }
    zsys_info("sync: took a snapshot of %s from %s (%zu key(s), %zu entries)", snapshot->dataset,
              snapshot->peer, snapshot->keys, snapshot->entries);
    if (self->taken)
        self->taken(snapshot->dataset, snapshot->peer, self->taken_arg);
}

static void
s_snapshot_done(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    shoal_sync_t *self = (shoal_sync_t *) arg;
    //  The request's dataset is not in the reply: the one snapshot from
    //  this peer is found by its peer.
    s_snapshot_t *snapshot = NULL;
    for (s_snapshot_t *item = (s_snapshot_t *) zhashx_first(self->snapshots); item;
         item = (s_snapshot_t *) zhashx_next(self->snapshots))
        if (streq(item->peer, peer))
            snapshot = item;
    if (!snapshot)
        return;
    char *dataset = shoal_strdup(snapshot->dataset);
    bool ok = reply && reply->status == SHOAL_STATUS_OK;
    const shoal_msg_snapshot_t *body = ok ? (const shoal_msg_snapshot_t *) reply->body : NULL;
    for (size_t i = 0; ok && i < body->record_count; i++) {
        const shoal_msg_kv_item_t *item = &body->records[i];
        shoal_kv_record_t record = {
            .value = item->value, .value_size = item->value_size, .deleted = item->deleted,
            .wall_ms = item->wall_ms, .logic = item->logic, .node = item->node, .epoch = item->epoch,
        };
        memcpy(record.hash, item->hash, SHOAL_HASH_SIZE);
        bool applied;
        ok = shoal_oplog_kv_merge(self->oplog, dataset, item->key, &record, &applied) == 0;
        snapshot->keys += applied;
    }
    size_t added = 0;
    if (ok && body->entry_count)
        ok = shoal_oplog_append_batch(self->oplog, body->entries, body->entry_count, &added) == 0;
    snapshot->entries += added;
    if (!ok) {
        zsys_warning("sync: snapshot of %s from %s failed: %s", dataset, peer,
                     reply ? shoal_oplog_error(self->oplog) : "no reply");
        zhashx_delete(self->snapshots, dataset);
    }
    else
    if (!snapshot->entries_phase && body->more && body->record_count)
        s_snapshot_ask(self, peer, dataset, false, body->records[body->record_count - 1].key, NULL, "");
    else
    if (!snapshot->entries_phase)
        s_snapshot_ask(self, peer, dataset, true, "", NULL, "");
    else
    if (body->more && body->entry_count) {
        const shoal_oplog_entry_t *last = &body->entries[body->entry_count - 1];
        shoal_hlc_stamp_t after = { last->wall_ms, last->logic };
        s_snapshot_ask(self, peer, dataset, true, "", &after, last->node);
    }
    else {
        s_snapshot_finish(self, snapshot, body);
        zhashx_delete(self->snapshots, dataset);
    }
    free(dataset);
}

//  Asks PEER for a page of DATASET's snapshot, starting the snapshot when
//  this is its first page.
static void
s_snapshot_ask(shoal_sync_t *self, const char *peer, const char *dataset, bool entries,
               const char *after_key, const shoal_hlc_stamp_t *after, const char *after_node)
{
    s_snapshot_t *snapshot = (s_snapshot_t *) zhashx_lookup(self->snapshots, dataset);
    if (!snapshot) {
        //  One snapshot per peer at a time: its replies are told apart by peer.
        for (s_snapshot_t *item = (s_snapshot_t *) zhashx_first(self->snapshots); item;
             item = (s_snapshot_t *) zhashx_next(self->snapshots))
            if (streq(item->peer, peer))
                return;
        snapshot = (s_snapshot_t *) zmalloc(sizeof *snapshot);
        snapshot->dataset = shoal_strdup(dataset);
        snapshot->peer = shoal_strdup(peer);
        zhashx_insert(self->snapshots, dataset, snapshot);
        zsys_info("sync: %s needs entries %s has pruned: taking a snapshot", dataset, peer);
    }
    else
    if (!streq(snapshot->peer, peer))
        return;
    snapshot->entries_phase = entries;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_SNAPSHOT, 0);
    shoal_msg_snapshot_request_t *body = (shoal_msg_snapshot_request_t *) shoal_envelope_new_body(request);
    body->dataset = shoal_strdup(dataset);
    body->entries = entries;
    body->after_key = shoal_strdup(after_key);
    body->after_wall_ms = after ? after->wall_ms : 0;
    body->after_logic = after ? after->logic : 0;
    body->after_node = shoal_strdup(after_node);
    if (shoal_mesh_send(self->mesh, peer, &request, S_TRANSFER_TIMEOUT_MS, s_snapshot_done, self))
        zhashx_delete(self->snapshots, dataset);
}

void
shoal_sync_set_taken(shoal_sync_t *self, shoal_sync_taken_fn *taken, void *arg)
{
    self->taken = taken;
    self->taken_arg = arg;
}

int
shoal_sync_repair(shoal_sync_t *self, const char *dataset)
{
    if (zhashx_lookup(self->snapshots, dataset))
        return 0;
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    int rc = -1;
    for (const char *peer = (const char *) zlistx_first(alive); peer && rc; peer = (const char *) zlistx_next(alive)) {
        bool busy = false;
        for (s_snapshot_t *item = (s_snapshot_t *) zhashx_first(self->snapshots); item;
             item = (s_snapshot_t *) zhashx_next(self->snapshots))
            busy |= streq(item->peer, peer);
        if (busy)
            continue;
        zsys_info("sync: %s lost entries in this node's store: taking it again from %s", dataset, peer);
        s_snapshot_ask(self, peer, dataset, false, "", NULL, "");
        rc = zhashx_lookup(self->snapshots, dataset) ? 0 : -1;
    }
    zlistx_destroy(&alive);
    return rc;
}

// ---------------------------------------------------------------------------
//  Anti-entropy: heads for heads

//  Every head of every dataset, into BODY.
static int
s_heads_fill(shoal_sync_t *self, shoal_msg_heads_t *body)
{
    zlistx_t *datasets = shoal_oplog_datasets(self->oplog);
    if (!datasets)
        return -1;
    int rc = shoal_data_heads_fill(self->oplog, datasets, body);
    zlistx_destroy(&datasets);
    body->serves_bulk = true;
    return rc;
}

//  The entries we hold of ORIGIN in DATASET after AFTER (NULL: all), counted
//  up to S_LAG_COUNT_MAX.
static uint64_t
s_count_after(shoal_sync_t *self, const char *dataset, const char *origin, const shoal_hlc_stamp_t *after)
{
    int64_t count = shoal_oplog_node_count_after(self->oplog, dataset, origin, after, S_LAG_COUNT_MAX);
    return count > 0 ? (uint64_t) count : 0;
}

static const shoal_msg_head_t *
s_head_find(const shoal_msg_heads_t *heads, const char *dataset, const char *node)
{
    for (size_t i = 0; i < heads->count; i++)
        if (streq(heads->heads[i].dataset, dataset) && streq(heads->heads[i].node, node))
            return &heads->heads[i];
    return NULL;
}

static void
s_heads_done(shoal_mesh_t *mesh, const char *peer, const shoal_envelope_t *reply, void *arg)
{
    shoal_sync_t *self = (shoal_sync_t *) arg;
    if (!reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_msg_heads_t *theirs = (const shoal_msg_heads_t *) reply->body;
    //  What they serve: a peer of an older version is pulled from as before.
    if (theirs->serves_bulk)
        zhashx_insert(self->bulk_peers, peer, "");
    else
        zhashx_delete(self->bulk_peers, peer);
    //  Their heads are what they hold (see DESIGN): their confirmation.
    for (size_t i = 0; i < theirs->count; i++) {
        shoal_hlc_stamp_t stamp = { theirs->heads[i].wall_ms, theirs->heads[i].logic };
        if (shoal_members_confirm(self->members, peer, theirs->heads[i].dataset, theirs->heads[i].node, &stamp))
            zsys_warning("sync: cannot record the confirmation of %s", peer);
    }
    //  What they lack of ours is their lag.
    shoal_msg_heads_t ours = { 0 };
    if (s_heads_fill(self, &ours) == 0) {
        uint64_t lag = 0;
        for (size_t i = 0; i < ours.count; i++) {
            const shoal_msg_head_t *mine = &ours.heads[i];
            const shoal_msg_head_t *their = s_head_find(theirs, mine->dataset, mine->node);
            shoal_hlc_stamp_t after = { their ? their->wall_ms : 0, their ? their->logic : 0 };
            shoal_hlc_stamp_t head = { mine->wall_ms, mine->logic };
            if (!their || shoal_hlc_compare(&after, &head) < 0)
                lag += s_count_after(self, mine->dataset, mine->node, their ? &after : NULL);
        }
        shoal_mesh_set_lag(self->mesh, peer, lag);
    }
    //  What we lack of theirs, we pull.
    for (size_t i = 0; i < theirs->count; i++) {
        const shoal_msg_head_t *their = &theirs->heads[i];
        const shoal_msg_head_t *mine = s_head_find(&ours, their->dataset, their->node);
        shoal_hlc_stamp_t stamp = { their->wall_ms, their->logic };
        shoal_hlc_stamp_t have = { mine ? mine->wall_ms : 0, mine ? mine->logic : 0 };
        if (!mine || shoal_hlc_compare(&have, &stamp) < 0)
            s_pull(self, peer, their->dataset, their->node);
    }
    shoal_msg_heads_codec.clear(&ours);
}

static void
s_exchange(shoal_sync_t *self, const char *peer)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_HEADS, 0);
    shoal_msg_heads_t *body = (shoal_msg_heads_t *) shoal_envelope_new_body(request);
    if (s_heads_fill(self, body)) {
        shoal_envelope_destroy(&request);
        return;
    }
    shoal_mesh_send(self->mesh, peer, &request, self->settings->sync_interval_ms, s_heads_done, self);
}

//  A peer that (re)joined hears from us at once rather than in its turn.
static void
s_on_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg)
{
    shoal_sync_t *self = (shoal_sync_t *) arg;
    if (event == SHOAL_MESH_JOINED || event == SHOAL_MESH_REJOINED || event == SHOAL_MESH_ALIVE)
        zlistx_add_end(self->due, (void *) node_id);
}

// ---------------------------------------------------------------------------
//  Prune

//  The newest stamp DATASET may be pruned to without removing what a
//  tracked peer has not confirmed; *LAGGING_P (may be NULL) names that peer
//  (borrowed from a list freed here, so copied; the caller frees it), or
//  NULL when no peer holds it back. BEHIND (may be NULL) is set to the
//  oldest of our own heads of the origins of DATASET that some tracked peer
//  holds more of than we do (the greatest stamp when there is none):
//  entries of those origins older than a tombstone may still come here.
//  Returns 0 or -1.
static int
s_confirmed_cutoff(shoal_sync_t *self, const char *dataset, shoal_hlc_stamp_t *cutoff, char **lagging_p,
                   shoal_hlc_stamp_t *behind)
{
    cutoff->wall_ms = UINT64_MAX;
    cutoff->logic = UINT32_MAX;
    if (behind)
        *behind = *cutoff;
    *lagging_p = NULL;
    shoal_member_list_t members = { 0 };
    shoal_oplog_heads_t heads = { 0 };
    int rc = shoal_members_list(self->members, &members) || shoal_oplog_heads(self->oplog, dataset, &heads) ? -1 : 0;
    const char *self_id = shoal_oplog_node(self->oplog);
    for (size_t i = 0; rc == 0 && i < members.count; i++) {
        const shoal_member_record_t *member = &members.items[i];
        if (member->forgotten || (self_id && streq(member->node, self_id)))
            continue;
        for (size_t j = 0; rc == 0 && j < heads.count; j++) {
            shoal_hlc_stamp_t confirmed = { 0, 0 };
            bool found;
            rc = shoal_members_confirmed(self->members, member->node, dataset, heads.heads[j].node,
                                         &confirmed, &found);
            if (rc == 0 && behind && found && shoal_hlc_compare(&confirmed, &heads.heads[j].stamp) > 0
            &&  shoal_hlc_compare(&heads.heads[j].stamp, behind) < 0)
                *behind = heads.heads[j].stamp;
            if (rc || (found && shoal_hlc_compare(&confirmed, &heads.heads[j].stamp) >= 0))
                continue;
            if (shoal_hlc_compare(&confirmed, cutoff) < 0) {
                *cutoff = confirmed;
                free(*lagging_p);
                *lagging_p = shoal_strdup(member->node);
            }
        }
    }
    shoal_member_list_clear(&members);
    shoal_oplog_heads_clear(&heads);
    return rc;
}

//  Prunes every dataset to the older of the retention cutoff and what every
//  tracked peer confirmed.
static void
s_prune(shoal_sync_t *self)
{
    if (self->settings->retention_ms <= 0)
        return;
    zlistx_t *datasets = shoal_oplog_datasets(self->oplog);
    if (!datasets)
        return;
    uint64_t now = (uint64_t) zclock_time();
    shoal_hlc_stamp_t retention = { now - (uint64_t) self->settings->retention_ms, UINT32_MAX };
    char *waiting = NULL;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset;
         dataset = (const char *) zlistx_next(datasets)) {
        shoal_hlc_stamp_t confirmed;
        char *lagging = NULL;
        if (s_confirmed_cutoff(self, dataset, &confirmed, &lagging, NULL))
            continue;
        shoal_hlc_stamp_t cutoff = shoal_hlc_compare(&confirmed, &retention) < 0 ? confirmed : retention;
        if (lagging && confirmed.wall_ms == 0) {
            //  Logged once per peer until it confirms: each interval would
            //  say the same thing again.
            if (!waiting)
                waiting = zsys_sprintf("%s (dataset %s)", lagging, dataset);
            free(lagging);
            continue;
        }
        free(lagging);
        shoal_hlc_stamp_t watermark;
        bool pruned_before;
        if (shoal_oplog_watermark(self->oplog, dataset, &watermark, &pruned_before)
        ||  (pruned_before && shoal_hlc_compare(&cutoff, &watermark) <= 0))
            continue;
        size_t pruned = 0;
        if (shoal_oplog_prune(self->oplog, dataset, &cutoff, &pruned) == 0 && pruned)
            zsys_info("sync: pruned %zu entries of %s stamped at or before %" PRIu64, pruned, dataset,
                      cutoff.wall_ms);
    }
    zlistx_destroy(&datasets);
    if (waiting && (!self->prune_waiting || !streq(waiting, self->prune_waiting)))
        zsys_info("sync: prune skipped: waiting for peer %s to confirm", waiting);
    free(self->prune_waiting);
    self->prune_waiting = waiting;
}

//  Whether a pull, chain repair or catch-up of DATASET is out: entries of
//  it are on their way here.
static bool
s_dataset_in_flight(shoal_sync_t *self, const char *dataset)
{
    size_t length = strlen(dataset);
    for (void *item = zhashx_first(self->in_flight); item; item = zhashx_next(self->in_flight)) {
        const char *key = (const char *) zhashx_cursor(self->in_flight);
        if (strncmp(key, dataset, length) == 0 && key[length] == '\n')
            return true;
    }
    return false;
}

//  Chooses the next dataset to collect, passing over those that rest (see
//  DESIGN) and those with entries on their way here, and starts its walk.
//  False when none is left, or there is none. Called while no catch-up in
//  bulk runs: the generations are read under the oplog's guard.
static bool
s_collect_choose(shoal_sync_t *self)
{
    zlistx_t *datasets = shoal_oplog_datasets(self->oplog);
    size_t count = datasets ? zlistx_size(datasets) : 0;
    if (count == 0) {
        zlistx_destroy(&datasets);
        return false;
    }
    const char *name = (const char *) zlistx_first(datasets);
    for (size_t i = 0; i < self->collect_next % count; i++)
        name = (const char *) zlistx_next(datasets);
    for (size_t tried = 0; tried < count && !self->collect_dataset; tried++) {
        self->collect_next++;
        //  One with entries on their way here waits (see s_collect).
        bool waits = s_dataset_in_flight(self, name);
        uint64_t generation = waits ? 0 : shoal_oplog_kv_generation_now(self->oplog, name);
        const uint64_t *resting = (const uint64_t *) zhashx_lookup(self->resting, name);
        if (!waits && (!resting || *resting != generation)) {
            self->collect_dataset = shoal_strdup(name);
            self->collect_generation = generation;
            self->collect_met = false;
        }
        name = (const char *) zlistx_next(datasets);
        if (!name)
            name = (const char *) zlistx_first(datasets);
    }
    zlistx_destroy(&datasets);
    return self->collect_dataset != NULL;
}

//  The walk of the dataset being collected is over: it rests if the walk
//  met no tombstone and its kv did not change meanwhile.
static void
s_collect_done(shoal_sync_t *self)
{
    const char *dataset = self->collect_dataset;
    if (!self->collect_met && shoal_oplog_kv_generation_now(self->oplog, dataset) == self->collect_generation) {
        uint64_t *resting = (uint64_t *) zhashx_lookup(self->resting, dataset);
        //  Said the first time only: after that, resting is routine.
        if (!resting) {
            resting = (uint64_t *) shoal_malloc(sizeof *resting);
            zhashx_insert(self->resting, dataset, resting);
            zsys_info("sync: tombstone collection of %s rests until its state changes: nothing in it can "
                      "be collected", dataset);
        }
        *resting = self->collect_generation;
    }
    zstr_free(&self->collect_dataset);
}

//  One step of tombstone collection (see DESIGN): the next S_COLLECT_KEYS
//  kv keys of the dataset being collected, below what every tracked peer
//  confirmed and what we hold of every origin a peer holds more of; none
//  while entries of the dataset are on their way here (a catch-up that
//  loads a batch of deletes before the older puts of another origin would
//  otherwise collect the tombstones those puts must meet). None at all
//  while a catch-up in bulk runs: its writer holds the oplog's guard while
//  each batch goes in (tens of milliseconds, a synced write among them),
//  and the reactor would wait for it to read a kv generation.
static void
s_collect(shoal_sync_t *self)
{
    if (zhashx_size(self->streams) > 0)
        return;
    if (!self->collect_dataset && !s_collect_choose(self))
        return;
    if (s_dataset_in_flight(self, self->collect_dataset))
        return;
    shoal_hlc_stamp_t confirmed, behind;
    char *lagging = NULL;
    int rc = s_confirmed_cutoff(self, self->collect_dataset, &confirmed, &lagging, &behind);
    free(lagging);
    if (rc == 0 && shoal_hlc_compare(&behind, &confirmed) < 0)
        confirmed = behind;
    char *next = NULL;
    size_t collected = 0, kept = 0;
    bool looked = rc == 0 && confirmed.wall_ms > 0;
    if (looked)
        rc = shoal_oplog_kv_collect(self->oplog, self->collect_dataset, &confirmed, self->collect_after,
                                    S_COLLECT_KEYS, &next, &collected, &kept);
    if (rc == 0 && collected)
        zsys_info("sync: collected %zu tombstones of %s, every tracked peer having confirmed past them",
                  collected, self->collect_dataset);
    if (rc)
        zsys_warning("sync: cannot collect tombstones of %s: %s", self->collect_dataset,
                     shoal_oplog_error(self->oplog));
    //  The walk finds nothing to collect only if every step looked and met no tombstone.
    self->collect_met = self->collect_met || !looked || rc || collected || kept;
    zstr_free(&self->collect_after);
    self->collect_after = next;
    if (!next)
        s_collect_done(self);
}

shoal_envelope_t *
shoal_sync_check_prune(shoal_sync_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_prune_t *body = (const shoal_msg_prune_t *) request->body;
    //  A tenant is refused by shoal_data itself.
    if (shoal_caller_is_tenant(caller))
        return NULL;
    zlistx_t *datasets = shoal_oplog_datasets(self->oplog);
    if (!datasets)
        return NULL;
    shoal_hlc_stamp_t wanted = { body->before_ms, UINT32_MAX };
    shoal_envelope_t *refusal = NULL;
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset && !refusal;
         dataset = (const char *) zlistx_next(datasets)) {
        if (*body->dataset && !streq(body->dataset, dataset))
            continue;
        shoal_hlc_stamp_t confirmed;
        char *lagging = NULL;
        if (s_confirmed_cutoff(self, dataset, &confirmed, &lagging, NULL) == 0 && lagging
        &&  shoal_hlc_compare(&confirmed, &wanted) < 0)
            refusal = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT,
                                           "peer %s has not confirmed the entries of %s up to %" PRIu64
                                           " (confirmed up to %" PRIu64 "); `shoalctl peers forget %s` "
                                           "retires it", lagging, dataset, body->before_ms,
                                           confirmed.wall_ms, lagging);
        free(lagging);
    }
    zlistx_destroy(&datasets);
    return refusal;
}

// ---------------------------------------------------------------------------
//  Requests from peers

//  A pushed entry: appended when it links to our head, else a gap to repair.
static void
s_accept_push(shoal_sync_t *self, const shoal_oplog_entry_t *entry)
{
    size_t added = 0;
    int rc = s_append_chain(self, entry, 1, &added);
    //  The origin surely holds its own chain: the gap is repaired from it.
    if (rc == 1)
        s_chain(self, entry->node, entry);
}

static shoal_envelope_t *
s_handle_push(shoal_sync_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_entries_t *body = (const shoal_msg_entries_t *) request->body;
    for (size_t i = 0; i < body->count; i++)
        s_accept_push(self, &body->entries[i]);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}

static shoal_envelope_t *
s_handle_heads(shoal_sync_t *self, const shoal_envelope_t *request)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    if (s_heads_fill(self, (shoal_msg_heads_t *) shoal_envelope_new_body(reply))) {
        shoal_envelope_destroy(&reply);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_oplog_error(self->oplog));
    }
    return reply;
}

//  Whether entries after AFTER (NULL: from the start) of DATASET may be
//  gone: the dataset was pruned past that point.
static int
s_below_watermark(shoal_sync_t *self, const char *dataset, const shoal_hlc_stamp_t *after, bool *below)
{
    shoal_hlc_stamp_t watermark;
    bool found;
    if (shoal_oplog_watermark(self->oplog, dataset, &watermark, &found))
        return -1;
    *below = found && (!after || shoal_hlc_compare(after, &watermark) < 0);
    return 0;
}

static shoal_envelope_t *
s_handle_pull(shoal_sync_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_pull_t *body = (const shoal_msg_pull_t *) request->body;
    shoal_hlc_stamp_t after = { body->after_wall_ms, body->after_logic };
    bool below;
    shoal_oplog_list_t list = { 0 };
    if (s_below_watermark(self, body->dataset, body->from_start ? NULL : &after, &below)
    ||  (!below && shoal_oplog_node_after(self->oplog, body->dataset, body->node,
                                          body->from_start ? NULL : &after, SHOAL_SYNC_PAGE_ENTRIES + 1, &list)))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_oplog_error(self->oplog));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_entries_t *entries = (shoal_msg_entries_t *) shoal_envelope_new_body(reply);
    entries->pruned = below;
    entries->more = s_page_fill(entries, &list);
    shoal_oplog_list_clear(&list);
    return reply;
}

//  A page of a catch-up in bulk: entries as stored, in one ordered walk,
//  moved into the reply without decoding or copying them again.
static shoal_envelope_t *
s_handle_bulk(shoal_sync_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_pull_t *body = (const shoal_msg_pull_t *) request->body;
    shoal_hlc_stamp_t after = { body->after_wall_ms, body->after_logic };
    bool below;
    shoal_oplog_page_t page = { 0 };
    if (s_below_watermark(self, body->dataset, body->from_start ? NULL : &after, &below)
    ||  (!below && shoal_oplog_node_page(self->oplog, body->dataset, body->node, body->from_start ? NULL : &after,
                                         SHOAL_SYNC_BULK_PAGE_ENTRIES, SHOAL_SYNC_BULK_PAGE_BYTES, &page)))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_oplog_error(self->oplog));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_bulk_t *bulk = (shoal_msg_bulk_t *) shoal_envelope_new_body(reply);
    bulk->pruned = below;
    bulk->more = page.more;
    //  The entries are the reply's now.
    bulk->count = page.count;
    bulk->bytes = page.bytes;
    bulk->sizes = page.sizes;
    bulk->last_wall_ms = page.count ? page.last.wall_ms : 0;
    bulk->last_logic = page.count ? page.last.logic : 0;
    return reply;
}

static shoal_envelope_t *
s_handle_chain(shoal_sync_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_chain_t *body = (const shoal_msg_chain_t *) request->body;
    shoal_oplog_list_t list = { 0 };
    if (shoal_oplog_chain_range(self->oplog, body->dataset, body->has_start ? body->start : NULL,
                                body->end, &list))
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no chain range here: %s",
                                    shoal_oplog_error(self->oplog));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_entries_t *entries = (shoal_msg_entries_t *) shoal_envelope_new_body(reply);
    entries->more = s_page_fill(entries, &list);
    shoal_oplog_list_clear(&list);
    return reply;
}

static shoal_envelope_t *
s_handle_snapshot(shoal_sync_t *self, const shoal_envelope_t *request)
{
    const shoal_msg_snapshot_request_t *body = (const shoal_msg_snapshot_request_t *) request->body;
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_snapshot_t *snapshot = (shoal_msg_snapshot_t *) shoal_envelope_new_body(reply);
    int rc = 0;
    if (!body->entries) {
        shoal_kv_list_t keys = { 0 };
        rc = shoal_oplog_kv_records(self->oplog, body->dataset, body->after_key, SHOAL_SYNC_PAGE_ENTRIES + 1, &keys);
        size_t count = 0, bytes = 0;
        snapshot->records = (shoal_msg_kv_item_t *) zmalloc((keys.count + 1) * sizeof *snapshot->records);
        //  The first record always goes in, whatever its size (it fits a
        //  frame: shoal_limits.h); the others while the page has room.
        while (rc == 0 && count < keys.count && count < SHOAL_SYNC_PAGE_ENTRIES) {
            const shoal_kv_record_t *record = &keys.items[count].record;
            shoal_msg_kv_item_t *item = &snapshot->records[count++];
            item->dataset = shoal_strdup(body->dataset);
            item->key = shoal_strdup(keys.items[count - 1].key);
            if (record->value_size && !record->deleted) {
                item->value = (uint8_t *) zmalloc(record->value_size);
                memcpy(item->value, record->value, record->value_size);
                item->value_size = record->value_size;
            }
            item->deleted = record->deleted;
            item->wall_ms = record->wall_ms;
            item->logic = record->logic;
            item->node = shoal_strdup(record->node);
            memcpy(item->hash, record->hash, SHOAL_HASH_SIZE);
            item->epoch = record->epoch;
            bytes += shoal_data_item_size(item);
            if (count > 1 && bytes > SHOAL_SYNC_PAGE_BYTES) {
                shoal_msg_kv_item_codec.clear(item);
                count--;
                break;
            }
        }
        snapshot->record_count = count;
        snapshot->more = count < keys.count;
        shoal_kv_list_clear(&keys);
    }
    else {
        shoal_oplog_list_t list = { 0 };
        shoal_hlc_stamp_t after = { body->after_wall_ms, body->after_logic };
        bool first = !*body->after_node;
        rc = shoal_oplog_after(self->oplog, body->dataset, first ? NULL : &after, first ? NULL : body->after_node,
                               SHOAL_SYNC_PAGE_ENTRIES + 1, &list);
        shoal_msg_entries_t page = { 0 };
        snapshot->more = s_page_fill(&page, &list);
        snapshot->entries = page.entries;
        snapshot->entry_count = page.count;
        shoal_oplog_list_clear(&list);
    }
    shoal_hlc_stamp_t watermark = { 0, 0 };
    bool pruned = false;
    shoal_oplog_heads_t heads = { 0 };
    if (rc == 0)
        rc = shoal_oplog_watermark(self->oplog, body->dataset, &watermark, &pruned)
          || shoal_oplog_heads(self->oplog, body->dataset, &heads) ? -1 : 0;
    snapshot->watermark_wall_ms = pruned ? watermark.wall_ms : 0;
    snapshot->watermark_logic = pruned ? watermark.logic : 0;
    snapshot->heads = (shoal_msg_head_t *) zmalloc((heads.count + 1) * sizeof *snapshot->heads);
    for (size_t i = 0; rc == 0 && i < heads.count; i++) {
        shoal_msg_head_t *head = &snapshot->heads[snapshot->head_count++];
        head->dataset = shoal_strdup(body->dataset);
        head->node = shoal_strdup(heads.heads[i].node);
        head->wall_ms = heads.heads[i].stamp.wall_ms;
        head->logic = heads.heads[i].stamp.logic;
        memcpy(head->hash, heads.heads[i].hash, SHOAL_HASH_SIZE);
    }
    shoal_oplog_heads_clear(&heads);
    if (rc) {
        shoal_envelope_destroy(&reply);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_oplog_error(self->oplog));
    }
    return reply;
}

bool
shoal_sync_handles(shoal_msg_type_t type)
{
    return (type >= SHOAL_MSG_SYNC_PUSH && type <= SHOAL_MSG_SYNC_SNAPSHOT) || type == SHOAL_MSG_SYNC_BULK;
}

shoal_envelope_t *
shoal_sync_handle(shoal_sync_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "%s is for mesh nodes only",
                                    shoal_msg_type_name(request->type));
    switch (request->type) {
        case SHOAL_MSG_SYNC_PUSH:
            return s_handle_push(self, request);
        case SHOAL_MSG_SYNC_HEADS:
            return s_handle_heads(self, request);
        case SHOAL_MSG_SYNC_PULL:
            return s_handle_pull(self, request);
        case SHOAL_MSG_SYNC_CHAIN:
            return s_handle_chain(self, request);
        case SHOAL_MSG_SYNC_SNAPSHOT:
            return s_handle_snapshot(self, request);
        case SHOAL_MSG_SYNC_BULK:
            return s_handle_bulk(self, request);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a sync request",
                                        shoal_msg_type_name(request->type));
    }
}

// ---------------------------------------------------------------------------
//  Life cycle and time

void
shoal_sync_written(shoal_sync_t *self, const shoal_oplog_entry_t *entry)
{
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    for (const char *peer = (const char *) zlistx_first(alive); peer;
         peer = (const char *) zlistx_next(alive)) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_PUSH, 0);
        shoal_msg_entries_t *body = (shoal_msg_entries_t *) shoal_envelope_new_body(request);
        body->entries = (shoal_oplog_entry_t *) zmalloc(sizeof *body->entries);
        if (shoal_oplog_entry_copy(&body->entries[0], entry) == 0)
            body->count = 1;
        //  Fire and forget: a push that is lost is a gap the peer repairs.
        shoal_mesh_send(self->mesh, peer, &request, self->settings->sync_interval_ms, NULL, NULL);
    }
    zlistx_destroy(&alive);
}

void
shoal_sync_tick(shoal_sync_t *self)
{
    char *peer;
    while ((peer = (char *) zlistx_detach(self->due, NULL))) {
        s_exchange(self, peer);
        free(peer);
    }
    int64_t now = zclock_mono();
    if (now < self->next_round_ms)
        return;
    self->next_round_ms = now + self->settings->sync_interval_ms;
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    size_t count = zlistx_size(alive);
    if (count) {
        size_t index = self->cursor++ % count;
        const char *next = (const char *) zlistx_first(alive);
        for (size_t i = 0; i < index; i++)
            next = (const char *) zlistx_next(alive);
        s_exchange(self, next);
    }
    zlistx_destroy(&alive);
    s_prune(self);
    s_collect(self);
}

shoal_sync_t *
shoal_sync_new(const shoal_settings_t *settings, shoal_oplog_t *oplog, shoal_mesh_t *mesh,
               shoal_members_t *members)
{
    shoal_sync_t *self = (shoal_sync_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->oplog = oplog;
    self->mesh = mesh;
    self->members = members;
    self->in_flight = zhashx_new();
    //  The values are a constant marker, never freed.
    zhashx_set_destructor(self->in_flight, NULL);
    zhashx_set_duplicator(self->in_flight, NULL);
    self->snapshots = zhashx_new();
    zhashx_set_destructor(self->snapshots, (zhashx_destructor_fn *) s_snapshot_destroy);
    self->due = zlistx_new();
    zlistx_set_destructor(self->due, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_duplicator(self->due, (zlistx_duplicator_fn *) shoal_strdup);
    self->streams = zhashx_new();
    zhashx_set_destructor(self->streams, (zhashx_destructor_fn *) s_stream_destroy);
    self->bulk_peers = zhashx_new();
    zhashx_set_destructor(self->bulk_peers, NULL);
    zhashx_set_duplicator(self->bulk_peers, NULL);
    self->resting = zhashx_new();
    zhashx_set_destructor(self->resting, shoal_free_item);
    shoal_mesh_subscribe(mesh, s_on_event, self);
    return self;
}

int
shoal_sync_start(shoal_sync_t *self, zloop_t *loop)
{
    self->loop = loop;
    return 0;
}

void
shoal_sync_stop(shoal_sync_t *self)
{
    //  The loader finishes a batch it is writing; what it had not written
    //  is fetched again after the next start (no head moved past it).
    if (self->loader && self->loop)
        zloop_reader_end(self->loop, shoal_loader_sock(self->loader));
    shoal_loader_destroy(&self->loader);
    self->loop = NULL;
}

void
shoal_sync_destroy(shoal_sync_t **self_p)
{
    if (*self_p) {
        shoal_sync_t *self = *self_p;
        shoal_sync_stop(self);
        zhashx_destroy(&self->streams);
        zhashx_destroy(&self->bulk_peers);
        zhashx_destroy(&self->resting);
        zhashx_destroy(&self->in_flight);
        zhashx_destroy(&self->snapshots);
        zlistx_destroy(&self->due);
        free(self->prune_waiting);
        free(self->collect_dataset);
        free(self->collect_after);
        free(self);
        *self_p = NULL;
    }
}

void
shoal_sync_set_metrics(shoal_sync_t *self, shoal_metrics_t *metrics)
{
    self->metrics = metrics;
}
