/*  shoal_loader: a peer's entries taken in bulk, beside the node's reactor.

    A node far behind a peer catches up by streams: one per (dataset,
    origin), each a run of pages of the origin's chain that the sync asks
    for one after another and hands here as they arrive. Checking a page
    (decoding and hashing every entry, following the chain) and writing a
    batch of them (sorted table files, a synced ingest per family) take far
    longer than a probe may wait, so the reactor only passes pages on and
    reads events back; two threads do the work:

      - the loader's actor checks each page into the batch being filled
        (shoal_oplog_bulk_add) and says how the page went (taken, or
        refused naming the entry);
      - a writer actor writes a full batch (shoal_oplog_bulk_write) while
        the next one fills: checking and writing overlap, one core each.

    A batch is written when it is full, when a stream ends (so that its
    last entries do not wait for others: at once, or as soon as the writer
    is free, the loader checking other streams' pages meanwhile), or when
    the reactor asks. Once a batch is written, each stream in it is told
    where it now stands (its head moved there). A stream ends after its
    last page: what it took is written, then it is told it has ended.

    Memory is bounded by the batch size (two batches at most) and by the
    pages the sync lets wait in the pipe (its own limit).
*/
#ifndef SHOAL_LOADER_H_INCLUDED
#define SHOAL_LOADER_H_INCLUDED

#include <czmq.h>

#include "shoal_oplog.h"
#include "shoal_oplog_bulk.h"
#include "shoal_proto.h"

//  A batch is written as soon as the writer is free and it holds this many
//  entries, and at the latest once it holds the most entries or encoded
//  bytes below: batches grow to what the writer takes in the time it
//  writes one, and the last one, written after the last page, is small.
//  The two batches the loader keeps are most of what a catch-up holds in
//  memory, all of it touched for the first time: at half the size of
//  before (131072 entries, 48 MiB), n2 of bench_sync reached 246 MB
//  instead of 400 and took 8% less CPU time (medians of 6 repetitions
//  each, 3.30 s against 3.60 s), in 19 batches instead of 13.
#define SHOAL_LOADER_BATCH_MIN_ENTRIES 16384
#define SHOAL_LOADER_BATCH_ENTRIES 65536
#define SHOAL_LOADER_BATCH_BYTES (24 * 1024 * 1024)

typedef enum {
    SHOAL_LOADER_TAKEN,         //  a page was checked; ENTRIES of it were taken
    SHOAL_LOADER_REFUSED,       //  a page was refused at an entry: ERROR names it (ENTRIES before it were taken)
    SHOAL_LOADER_WRITTEN,       //  a batch holding ENTRIES of the stream was written; TIP is its head now
    SHOAL_LOADER_ENDED,         //  the stream ended and all it took is written
    SHOAL_LOADER_FAILED,        //  a batch could not be written: ERROR says why; its streams end
} shoal_loader_event_type_t;

typedef struct {
    shoal_loader_event_type_t type;     //  what happened
    char *stream;                       //  the stream it happened to (owned)
    size_t entries;                     //  entries it counts
    shoal_oplog_tip_t tip;              //  WRITTEN: the stream's last entry written
    char *error;                        //  REFUSED, FAILED: why (owned); else NULL
} shoal_loader_event_t;

typedef struct _shoal_loader_t shoal_loader_t;

//  A loader into OPLOG (borrowed; it and its store must outlive the
//  loader), writing its table files in DIR, refusing entries whose clock
//  leads ours by more than MAX_CLOCK_AHEAD_MS. Table files a dead process
//  left in DIR are removed. Returns NULL after logging why.
shoal_loader_t *shoal_loader_new(shoal_oplog_t *oplog, const char *dir, uint64_t max_clock_ahead_ms);

//  Stops the threads: a batch being written is finished, one being filled
//  is dropped (its streams' heads never moved, so nothing is lost). Safe
//  twice.
void shoal_loader_destroy(shoal_loader_t **self_p);

//  The socket events arrive on, for the reactor to read with
//  shoal_loader_event.
zsock_t *shoal_loader_sock(shoal_loader_t *self);

//  Hands over the entries of PAGE (copied) for STREAM, the chain of NODE in
//  DATASET. BASE, given with a stream's first page only, is the entry the
//  page must link to (has_tip false: the chain's first). An event (taken or
//  refused) follows. After a refusal the stream takes no more pages.
void shoal_loader_page(shoal_loader_t *self, const char *stream, const char *dataset,
                       const char *node, const shoal_oplog_tip_t *base,
                       const shoal_msg_bulk_t *page);

//  Ends STREAM: what it took is written, then an ended event follows.
void shoal_loader_end(shoal_loader_t *self, const char *stream);

//  Reads the next event into EVENT (cleared with shoal_loader_event_clear).
//  Returns 0, or -1 when there is none to read.
int shoal_loader_event(shoal_loader_t *self, shoal_loader_event_t *event);

void shoal_loader_event_clear(shoal_loader_event_t *event);

#endif
