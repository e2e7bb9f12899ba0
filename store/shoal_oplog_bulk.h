/*  shoal_oplog_bulk: loading many entries of the operation log at once.

    A node far behind a peer (a new node, or one back from a long absence)
    receives the peer's entries a page after another, each page a run of
    one origin's chain in order. Appending them as the oplog appends (a
    dedupe read, a head read and a kv read per entry, then four memtable
    inserts and an fsync per page) makes the store the bottleneck many
    times over. A load instead:

      - checks each entry in memory as it is added, by the rules every
        append follows (shoal_oplog_check): it decodes, its hash matches
        its fields, it links to the entry before it (the first to the
        chain's tip) and is stamped after it, its clock is within the
        bound, and an epoch dataset finds its epoch. The first entry that
        fails is refused, named by its place in the page, its hash and what
        was wrong; the entries before it stay added. No entry is read from
        the store to do so: a chain that links to the tip cannot hold
        entries the store has already (and one it had would be written
        again with the same bytes, which changes nothing).
      - writes, when asked, one sorted table file per column family for
        everything added, each made durable once, and ingests them in an
        order that keeps a crash between two of them harmless: kv first,
        then the indexes, then oplog_by_node_hlc (where the entries are
        stored, what reconcile derives the rest from) last, then the heads
        in one synced write, which removes the load's mark. The load is
        marked from its first table file to its heads
        (shoal_oplog_mark_loading): a crash among them leaves entries in
        some families and not in others, which reconcile repairs at the
        next start (kv, ingested first, may then be ahead of the log: the
        entries, fetched again, confirm it).

    The kv state a load writes is the winner of its entries per key, kept
    only where it beats what the store holds. The store's kv is read
    without the oplog's guard; holding it, the load checks that no dataset
    it read changed meanwhile (shoal_oplog_kv_generation) before its kv
    table goes in, and reads again if one did. Heads move under the guard,
    forward only.

    A load belongs to one thread at a time (it may be filled on one and
    written on another) and uses a store handle of its own: it may run
    beside the node's reactor, which keeps writing through the oplog.
*/
#ifndef SHOAL_OPLOG_BULK_H_INCLUDED
#define SHOAL_OPLOG_BULK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_hlc.h"
#include "shoal_oplog.h"

typedef struct {
    uint64_t max_clock_ahead_ms;        //  refuse entries whose clock leads ours by more
    shoal_hlc_clock_fn *clock;          //  physical clock; NULL for the real one
    void *clock_arg;                    //  its argument
    //  Called before each table file is ingested, with the family it goes
    //  to (tests cut a write there); NULL for none.
    void (*ingesting)(shoal_cf_t cf, void *arg);
    void *ingesting_arg;                //  its argument
    //  Batches of many entries: each array starts as a whole huge page
    //  (2 MiB), which a batch of a few entries would mostly leave unused.
    bool large;
} shoal_oplog_bulk_options_t;

//  What a write did.
typedef struct {
    size_t entries;                     //  entries written
    size_t keys;                        //  materialised keys that changed
    size_t heads;                       //  heads that moved
} shoal_oplog_bulk_result_t;

typedef struct _shoal_oplog_bulk_t shoal_oplog_bulk_t;

//  An empty load into OPLOG's STORE (both borrowed; only the oplog's
//  thread-safe calls are made). Its table files are written in DIR, which
//  must be on the store's filesystem (the files are moved in, not copied)
//  and is created when missing. Returns NULL after logging why.
shoal_oplog_bulk_t *shoal_oplog_bulk_new(shoal_oplog_t *oplog, shoal_store_t *store,
                                         const char *dir,
                                         const shoal_oplog_bulk_options_t *options);

void shoal_oplog_bulk_destroy(shoal_oplog_bulk_t **self_p);

//  The text of the last failure, naming the entry or key.
const char *shoal_oplog_bulk_error(shoal_oplog_bulk_t *self);

//  Adds COUNT encoded entries (ENTRIES[i], SIZES[i] bytes each, as
//  oplog_by_node_hlc holds them) that continue NODE's chain in DATASET after
//  *TIP, checking each (see the top of this file). *TIP moves to the last
//  entry accepted; *ACCEPTED (may be NULL) counts them. Returns 0, or -1 at
//  the first entry refused, which the error names.
int shoal_oplog_bulk_add(shoal_oplog_bulk_t *self, const char *dataset, const char *node,
                         shoal_oplog_tip_t *tip, const uint8_t *const *entries,
                         const size_t *sizes, size_t count, size_t *accepted);

//  Forgets every entry added since the last write.
void shoal_oplog_bulk_clear(shoal_oplog_bulk_t *self);

//  Forgets every entry added and gives back the memory the load kept for
//  the next batch (it keeps it otherwise: see the top of the .c file).
void shoal_oplog_bulk_release(shoal_oplog_bulk_t *self);

//  Entries added since the last write, and their encoded bytes.
size_t shoal_oplog_bulk_count(shoal_oplog_bulk_t *self);
size_t shoal_oplog_bulk_bytes(shoal_oplog_bulk_t *self);

//  Writes everything added (see the top of this file) and empties the
//  load. RESULT (may be NULL) receives what changed. Returns 0, or -1 when
//  a step failed: the steps before it stay written, which leaves the store
//  consistent, and the load keeps its entries. The same as
//  shoal_oplog_bulk_make, then shoal_oplog_bulk_ingest.
int shoal_oplog_bulk_write(shoal_oplog_bulk_t *self, shoal_oplog_bulk_result_t *result);

//  A write in steps, so that one load's table files are made while
//  another's go in:
//
//  shoal_oplog_bulk_prepare starts making the table files of the log
//  families, on threads of their own, and returns. They read nothing of
//  the store, so they may be made while an earlier load is ingested.
//  Nothing may be added to the load until it is written or cleared.
//
//  shoal_oplog_bulk_make makes the rest (kv, which reads the store's kv
//  state: every earlier load must be ingested by then, or an older version
//  of a key could go in over a newer one) and waits for all of them.
//
//  shoal_oplog_bulk_ingest makes what is not made yet, then ingests the
//  files and moves the heads, as shoal_oplog_bulk_write says. Nothing is in
//  the store before it: a load prepared or made and then cleared (or a
//  process killed meanwhile) leaves only table files in the load's
//  directory, which shoal_oplog_bulk_clear or shoal_oplog_bulk_sweep
//  removes. Each returns 0, or -1 when a step failed.
int shoal_oplog_bulk_prepare(shoal_oplog_bulk_t *self);
int shoal_oplog_bulk_make(shoal_oplog_bulk_t *self);
int shoal_oplog_bulk_ingest(shoal_oplog_bulk_t *self, shoal_oplog_bulk_result_t *result);

//  Holds back (PAUSED true) or lets go the automatic compaction of every
//  family a load writes, in STORE (shoal_store_pause_compaction): loads
//  coming one after another then go in without compaction rewriting the
//  earlier ones meanwhile, which took a fifth of a catch-up's CPU time.
//  Whoever holds it back bounds the table files left in level 0
//  (shoal_oplog_bulk_level0_files) and lets it go when the loads pause.
//  Returns 0, or -1 with the store's error set.
int shoal_oplog_bulk_pause_compaction(shoal_store_t *store, bool paused);

//  Sets *MOST to the most table files in level 0 of any family a load
//  writes. Returns 0 or -1.
int shoal_oplog_bulk_level0_files(shoal_store_t *store, uint64_t *most);

//  Removes the table files a load left in DIR (a process that died while
//  writing one). Returns the number removed.
size_t shoal_oplog_bulk_sweep(const char *dir);

#endif
