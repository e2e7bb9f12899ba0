/*  shoal_sync: the oplog's replication between nodes, and prune held back
    by what peers have confirmed.

    New local entries are pushed to every alive peer as they are written.
    Every sync interval the node exchanges heads with one alive peer, round
    robin (anti-entropy), pulls what it lacks a page at a time, repairs a
    gap by chain range, and takes a snapshot of a dataset whose entries it
    needs were already pruned. A node far behind on an origin catches up in
    bulk: pages of entries as stored, checked and written beside the
    reactor (shoal_loader). The heads a peer answers with are also its
    confirmation: what it holds, per dataset and origin node. Prune (by
    oplog/retention_ms, or asked for by an operator) never goes past what
    every tracked peer has confirmed. See the DESIGN note in shoal_sync.c.
*/
#ifndef SHOAL_SYNC_H_INCLUDED
#define SHOAL_SYNC_H_INCLUDED

#include "shoal_auth.h"
#include "shoal_config.h"
#include "shoal_members.h"
#include "shoal_mesh.h"
#include "shoal_oplog.h"
#include "shoal_proto.h"

//  Most entries in one page of a pull, a chain or a snapshot, and most bytes
//  (a page stops at whichever comes first).
#define SHOAL_SYNC_PAGE_ENTRIES 1000
#define SHOAL_SYNC_PAGE_BYTES (512 * 1024)
//  Most entries and bytes in one page of a catch-up in bulk: more than a
//  pull's (fewer round trips), well under SHOAL_ENVELOPE_MAX with framing.
#define SHOAL_SYNC_BULK_PAGE_ENTRIES 4096
#define SHOAL_SYNC_BULK_PAGE_BYTES (768 * 1024)

//  A page's first entry goes in whatever its size, and fits a frame by
//  itself (shoal_limits.h); these keep the pages of many entries in one too.
_Static_assert(SHOAL_SYNC_PAGE_BYTES <= SHOAL_PAGE_BYTES_MAX, "a pull page must fit a frame");
_Static_assert(SHOAL_SYNC_BULK_PAGE_BYTES + SHOAL_SYNC_BULK_PAGE_ENTRIES * SHOAL_PAGE_ELEMENT_OVERHEAD
               <= SHOAL_PAGE_BYTES_MAX, "a bulk page must fit a frame");

typedef struct _shoal_sync_t shoal_sync_t;

//  A sync over OPLOG with peers reached through MESH (it subscribes to its
//  events), confirmations kept in MEMBERS; SETTINGS are the node's live
//  settings. All borrowed.
shoal_sync_t *shoal_sync_new(const shoal_settings_t *settings, shoal_oplog_t *oplog,
                             shoal_mesh_t *mesh, shoal_members_t *members);
void shoal_sync_destroy(shoal_sync_t **self_p);

//  Counts the bytes of catch-ups in bulk in METRICS (borrowed; NULL: none).
typedef struct _shoal_metrics_t shoal_metrics_t;
void shoal_sync_set_metrics(shoal_sync_t *self, shoal_metrics_t *metrics);

//  Reads the events of catch-ups in bulk on LOOP (borrowed). Returns 0 or -1.
int shoal_sync_start(shoal_sync_t *self, zloop_t *loop);

//  Stops catch-ups in bulk before LOOP goes: a batch being written is
//  finished, the rest is dropped (and fetched again later).
void shoal_sync_stop(shoal_sync_t *self);

//  A local write succeeded: ENTRY (borrowed) is pushed to the alive peers.
void shoal_sync_written(shoal_sync_t *self, const shoal_oplog_entry_t *entry);

//  Time-driven work: one anti-entropy exchange and one prune per sync
//  interval. Call it from the node's tick.
void shoal_sync_tick(shoal_sync_t *self);

//  Called when a snapshot of DATASET from PEER was taken in full.
typedef void (shoal_sync_taken_fn)(const char *dataset, const char *peer, void *arg);
void shoal_sync_set_taken(shoal_sync_t *self, shoal_sync_taken_fn *taken, void *arg);

//  Takes DATASET again from an alive peer, as a snapshot (its keys and its
//  entries merged into ours): the repair of a dataset this node's store
//  lost entries of. Returns 0 when a snapshot of it is under way, -1 when
//  no peer is alive and free to ask.
int shoal_sync_repair(shoal_sync_t *self, const char *dataset);

bool shoal_sync_handles(shoal_msg_type_t type);

//  Answers a sync request from a peer (role node only). Returns the reply.
shoal_envelope_t *shoal_sync_handle(shoal_sync_t *self, const shoal_envelope_t *request,
                                    const shoal_caller_t *caller);

//  Checks an oplog_prune REQUEST against the peers' confirmations. Returns
//  NULL when it may go ahead, or a 409 reply naming the peer that has not
//  confirmed what it would remove.
shoal_envelope_t *shoal_sync_check_prune(shoal_sync_t *self, const shoal_envelope_t *request,
                                         const shoal_caller_t *caller);

#endif
