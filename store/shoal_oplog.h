/*  shoal_oplog: the replicated operation log, its indexes and the datasets
    it materialises.

    Every replicated change is an entry: (dataset, key, put or delete, value,
    hybrid logical clock stamp, node, the node's previous hash in that
    dataset, hash). The hash is BLAKE2b-256 over a canonical encoding of all
    the other fields, so an entry is its own identity: appending one that is
    already there changes nothing and says so, and an entry whose hash does
    not match its fields is refused.

    The log lives in five column families, every key a shoal_key tuple.
    Each entry is stored once, in oplog_by_node_hlc; the other families
    hold keys, and oplog_by_hash a locator (layout 2,
    SHOAL_OPLOG_SCHEMA_VERSION):

        oplog_by_node_hlc   (dataset, node, wall, logic, hash)     -> OplogEntry
        oplog_by_hash       (dataset, hash)                        -> (node, wall, logic)
        oplog_by_hlc        (dataset, wall, logic, node, hash)     -> x''
        oplog_node_head     (dataset, node)                        -> HeadRecord
        oplog_meta          ("schema") -> (version)
                            ("prune", dataset) -> (wall, logic)    the prune watermark
                            ("clean") -> (wall)                    closed cleanly, at wall
                            ("loading") -> (wall)                  a bulk load is ingesting
                            ("count", dataset) -> (entries, live)  see shoal_oplog_counts
                            ("marked") -> (wall)                   bulk loads are marked and
                                                                   counts kept here (made or
                                                                   reconciled by a build that
                                                                   does both)
                            ("migrating") -> (key)                 a migration from layout 1
                                                                   covered oplog_by_hash up
                                                                   to key
                            ("hlc") -> (wall)                      see shoal_hlc.h

    Why the entry lives in oplog_by_node_hlc: it is each node's chain in
    order, and the hot reads walk it so (a peer catching up reads pages of
    it, a chain range walks it). Served by a point read per entry (hashes
    are random, so each read lands in another block) a page cost ten times
    the walk. A lookup by hash is rarer (an entry by name, the end of a
    chain range): it reads the locator, which is the rest of the entry's
    oplog_by_node_hlc key, and then the entry, two point reads. Whether an
    entry is held (dedupe, a chain's held run) reads oplog_by_hash alone,
    whose small values keep it cheap. oplog_by_hlc's key holds every
    element of the oplog_by_node_hlc key, so a walk in stamp order reads
    each entry with one point read.

    Layout 1 stored each entry twice, in oplog_by_hash and again in
    oplog_by_node_hlc; such a store is migrated (shoal_oplog_migrate.c),
    at open or, when the caller asks, a bounded step at a time while the
    log serves: every read accepts both forms until it ends.

    Prune walks oplog_by_hlc and reads no entry: every key of an entry is
    built from its oplog_by_hlc key. Its value is empty, as the design has
    it; stores of an earlier version hold the entry's prev hash there (what
    prune needed for oplog_prev_to_hash), which nothing reads and reconcile
    leaves as it is.

    oplog_prev_to_hash, an entry's successor by its prev hash, is no longer
    written: each node's chain is its run of keys in oplog_by_node_hlc, in
    order, so a chain range is a walk there that checks each link. The index
    cost every append a random-order key and every bulk load a fifth table
    file; reconcile empties it in stores of an earlier version.

    Every change to the log writes all of these in one batch, together with
    the datasets' materialised state in kv:

        kv                  (dataset, key)                         -> KvRecord

    A key's state is decided by its entries alone, whatever order they came
    in: the greatest entry wins, ordered by (stamp, node, hash), or, in a
    dataset registered with an epoch extractor, by (epoch, stamp, node, hash).
    A delete leaves a tombstone so that an older put arriving later loses.

    The oplog is not thread-safe: it belongs to the thread that owns the store
    (the node's reactor). The one other writer is a bulk load
    (shoal_oplog_bulk) on a thread of its own, with a store handle of its
    own; the two share the guard below, and nothing else.
*/
#ifndef SHOAL_OPLOG_H_INCLUDED
#define SHOAL_OPLOG_H_INCLUDED

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_hlc.h"
#include "shoal_oplog_codec.h"
#include "shoal_store.h"

//  The layout of the column families above. A store of the layout before
//  (SHOAL_OPLOG_SCHEMA_TWICE: each entry stored in oplog_by_hash and again
//  in oplog_by_node_hlc) is migrated; any other version is refused.
#define SHOAL_OPLOG_SCHEMA_VERSION 2
#define SHOAL_OPLOG_SCHEMA_TWICE 1
//  Entries migrated per write (and per step) from a store of layout 1.
#define SHOAL_OPLOG_MIGRATE_BATCH_DEFAULT 10000
//  Entries deleted per prune write: four keys each, so 10,000 deletes.
#define SHOAL_OPLOG_PRUNE_BATCH_DEFAULT 2500
//  Entries written per batch by import and merge.
#define SHOAL_OPLOG_IMPORT_BATCH 1000

typedef struct {
    const char *node;           //  this node's id (copied), stamped on local writes
    bool sync;                  //  fsync every oplog write (needs a store opened with sync)
    uint64_t max_clock_ahead_ms;    //  refuse entries whose clock leads ours by more
    size_t prune_batch;         //  entries deleted per prune write
    size_t migrate_batch;       //  entries migrated per write from layout 1 (0: the default)
    //  Called after each write of a migration, with the writes so far
    //  (tests cut a migration there); NULL for none.
    void (*migrated)(size_t writes, void *arg);
    void *migrated_arg;         //  its argument
    //  A store of layout 1 is migrated by the caller's shoal_oplog_migrate_step
    //  calls, while the log serves, instead of at open.
    bool migrate_in_steps;
    shoal_hlc_clock_fn *clock;  //  physical clock; NULL for the real one
    void *clock_arg;            //  its argument
} shoal_oplog_options_t;

//  How far the migration of a store of layout 1 came since the open.
typedef struct {
    bool migrating;                     //  the store is of layout 1 still
    bool begun;                         //  a step ran since the open (its start was logged)
    uint64_t covered;                   //  oplog_by_hash keys walked
    uint64_t moved;                     //  entries stored once now
    uint64_t current;                   //  entries of layout 2 already (appended since the open)
    uint64_t corrupt;                   //  values that do not decode, left as they were
    uint64_t writes;                    //  writes made
    int64_t started_ms;                 //  monotonic time of the first step
} shoal_oplog_migration_t;

//  A node's last entry in a dataset.
typedef struct {
    char *node;                         //  the node (owned)
    shoal_hlc_stamp_t stamp;            //  the entry's clock
    uint8_t hash[SHOAL_HASH_SIZE];      //  the entry
} shoal_oplog_head_t;

//  Growable arrays that the read calls fill. Each is cleared (emptied and
//  freed) by its clear call; a zeroed list is an empty one.
typedef struct {
    shoal_oplog_entry_t *entries;       //  COUNT entries, owned
    size_t count;                       //  entries in use
    size_t capacity;                    //  entries allocated
} shoal_oplog_list_t;

typedef struct {
    shoal_oplog_head_t *heads;          //  COUNT heads, owned
    size_t count;                       //  heads in use
    size_t capacity;                    //  heads allocated
} shoal_oplog_heads_t;

//  One live key of a dataset, as kv_scan returns it.
typedef struct {
    char *key;                          //  the key (owned)
    shoal_kv_record_t record;           //  its value and version
} shoal_kv_item_t;

typedef struct {
    shoal_kv_item_t *items;             //  COUNT items, owned
    size_t count;                       //  items in use
    size_t capacity;                    //  items allocated
} shoal_kv_list_t;

//  Entries as stored (encoded), one after another, for a peer catching up
//  in bulk: entry i is SIZES[i] bytes, following entry i - 1.
typedef struct {
    uint8_t *bytes;                     //  the entries (owned)
    size_t used;                        //  bytes in use
    size_t allocated;                   //  bytes allocated
    size_t *sizes;                      //  COUNT sizes (owned)
    size_t count;                       //  entries
    size_t capacity;                    //  sizes allocated
    shoal_hlc_stamp_t last;             //  the last entry's stamp
    bool more;                          //  a limit stopped the page before the chain's end
} shoal_oplog_page_t;

void shoal_oplog_list_clear(shoal_oplog_list_t *list);
void shoal_oplog_page_clear(shoal_oplog_page_t *page);
void shoal_oplog_heads_clear(shoal_oplog_heads_t *heads);
void shoal_kv_list_clear(shoal_kv_list_t *list);

//  Where a chain ends so far: the entry the next one must link to.
typedef struct {
    bool has_tip;                       //  false: the chain's first entry comes next
    uint8_t hash[SHOAL_HASH_SIZE];      //  the chain's last entry, when has_tip
    shoal_hlc_stamp_t stamp;            //  its stamp
} shoal_oplog_tip_t;

//  What an entry is checked against (shoal_oplog_check): every entry must
//  have a dataset, a node and a known op; these say what else the caller
//  knows of where it goes.
typedef struct {
    const char *dataset;                //  the dataset it must be of; NULL: any
    const char *node;                   //  the chain it must be of; NULL: any
    const shoal_oplog_tip_t *tip;       //  what it must link to and be stamped after; NULL: no link checked
    bool trusted;                       //  made here a moment ago: hash and clock are not checked
    const uint8_t *hashed;              //  the hash of its fields, computed already
                                        //  (shoal_oplog_entry_hash_many); NULL: the check computes it
    uint64_t now_ms;                    //  physical time, for the clock bound
    uint64_t max_ahead_ms;              //  how far its clock may lead NOW_MS
} shoal_oplog_rules_t;

//  What reconcile found and repaired.
typedef struct {
    size_t entries;             //  entries checked in oplog_by_node_hlc
    size_t corrupt;             //  entries that do not decode (left in place, logged)
    size_t index_written;       //  index keys that were missing or held a wrong value, written
    size_t index_removed;       //  index keys naming no entry (or the wrong one), removed
    size_t heads_written;       //  heads that were missing or wrong, written
    size_t heads_removed;       //  heads naming an entry that is gone and was not pruned
    size_t counts_written;      //  datasets whose counts were missing or wrong
} shoal_oplog_repair_t;

//  What a dataset holds, kept beside every write that changes it.
typedef struct {
    uint64_t entries;           //  entries in its log
    uint64_t live;              //  keys of its state that are not deleted
} shoal_oplog_counts_t;

//  What orders the entries of one kv key: the greatest wins.
typedef struct {
    uint64_t epoch;                     //  0 unless the dataset is epoch-ordered
    shoal_hlc_stamp_t stamp;            //  the entry's clock
    const char *node;                   //  the entry's node (borrowed)
    const uint8_t *hash;                //  the entry, the last tie-breaker (borrowed)
} shoal_oplog_version_t;

//  Orders two versions by epoch, stamp, node, then hash: negative, zero or
//  positive as A is before, equal to or after B.
int shoal_oplog_version_compare(const shoal_oplog_version_t *a, const shoal_oplog_version_t *b);

//  Reads a dataset's ordering epoch out of an entry's value. Returns 0, or
//  -1 when VALUE does not hold one (the entry is then refused).
typedef int (shoal_oplog_epoch_fn) (const uint8_t *value, size_t size, uint64_t *epoch,
                                    void *arg);

typedef struct _shoal_oplog_t shoal_oplog_t;

//  Fills OPTIONS with the defaults: no node, sync on, the default clock bound
//  and prune batch, the real clock.
void shoal_oplog_options_default(shoal_oplog_options_t *options);

//  Opens the oplog in STORE (borrowed; it must outlive the oplog). Writes the
//  schema version into a new store and refuses another one. Returns NULL on
//  failure after logging why.
shoal_oplog_t *shoal_oplog_new(shoal_store_t *store, const shoal_oplog_options_t *options);

void shoal_oplog_destroy(shoal_oplog_t **self_p);

//  The text of the last failure: what was refused and why, naming the entry
//  or key, or the store's error.
const char *shoal_oplog_error(shoal_oplog_t *self);

//  The store the log lives in (borrowed).
shoal_store_t *shoal_oplog_store(shoal_oplog_t *self);

//  Whether the store is of layout 1 still: a migration is to run, in
//  steps (options.migrate_in_steps) or by shoal_oplog_migrate.
bool shoal_oplog_migrating(shoal_oplog_t *self);

//  Migrates up to migrate_batch more entries of a store of layout 1, in
//  one write that records how far it came (shoal_oplog_migrate.c); the
//  step that reaches the end makes the store layout 2 and sets *DONE
//  (also set when there was nothing to migrate). Returns 0 or -1.
int shoal_oplog_migrate_step(shoal_oplog_t *self, bool *done);

//  Runs the migration's steps to the end. Returns 0 or -1.
int shoal_oplog_migrate(shoal_oplog_t *self);

//  How far the migration came since the open.
void shoal_oplog_migration(shoal_oplog_t *self, shoal_oplog_migration_t *migration);

//  This node's id and its clock (borrowed).
const char *shoal_oplog_node(shoal_oplog_t *self);
shoal_hlc_t *shoal_oplog_hlc(shoal_oplog_t *self);

//  Orders DATASET's keys by an epoch carried in their values: higher epoch
//  wins, ties by stamp, then node, then hash. Register before any entry of
//  the dataset is applied (the node does it right after open): the kv state
//  already written is not re-ordered. Returns 0 or -1.
int shoal_oplog_set_epoch(shoal_oplog_t *self, const char *dataset,
                          shoal_oplog_epoch_fn *extract, void *arg);

//  Materialised keys (kv) and heads are read, compared and written by this
//  oplog and by a bulk load on another thread, each holding the oplog's
//  guard meanwhile. Every kv write of this oplog raises its dataset's
//  generation, so that a load that read kv without the guard can tell,
//  once it holds it, whether what it read still holds. These calls and
//  shoal_oplog_epoch are the only ones another thread may make.
void shoal_oplog_guard_lock(shoal_oplog_t *self);
void shoal_oplog_guard_unlock(shoal_oplog_t *self);

//  DATASET's kv generation. Call it holding the guard.
uint64_t shoal_oplog_kv_generation(shoal_oplog_t *self, const char *dataset);

//  The same, for a caller that does not hold the guard: taken for the read.
uint64_t shoal_oplog_kv_generation_now(shoal_oplog_t *self, const char *dataset);

//  The epoch extractor of DATASET: true with *EXTRACT and *ARG set, false
//  when the dataset is not epoch-ordered. Safe from any thread once the
//  registrations (at open) are over.
bool shoal_oplog_epoch(shoal_oplog_t *self, const char *dataset, shoal_oplog_epoch_fn **extract,
                       void **arg);

//  Sets HASH to the hash of ENTRY's fields (ENTRY's own hash is not read):
//  BLAKE2b-256 of the string "shoal.oplog.entry.v1", dataset, key, op,
//  value, wall_ms, logic, node and prev_hash, in that order, where every
//  string or byte string is written as its length (u64) and its bytes, every
//  number as a u64, all big-endian, and a missing prev_hash is empty. Peers
//  must agree on it to the bit: it is the entry's identity.
void shoal_oplog_entry_hash(const shoal_oplog_entry_t *entry, uint8_t hash[SHOAL_HASH_SIZE]);

//  Sets HASHES[i] to the hash of ENTRIES[i]'s fields, for each i below
//  COUNT, as shoal_oplog_entry_hash would one by one, several at once on a
//  CPU that can (shoal_blake2b.h): what checking a page of entries costs.
void shoal_oplog_entry_hash_many(const shoal_oplog_entry_t *entries, size_t count,
                                 uint8_t (*hashes)[SHOAL_HASH_SIZE]);

//  The one validator of entries, which every way into the log uses (append,
//  a chain, a bulk load): ENTRY has a dataset, a node and a known op, and,
//  as RULES ask, the expected dataset and node, a hash that matches its
//  fields, a link to RULES->tip and a stamp after it (shoal_oplog_links),
//  a clock within the bound, and in an epoch-ordered dataset an epoch in
//  its value, which *EPOCH receives (0 in other datasets). Returns 0, or -1
//  with WHY (WHY_SIZE bytes) saying what was wrong, for the caller to name
//  the entry. Touches nothing of the oplog but its epochs: any thread may
//  call it.
int shoal_oplog_check(shoal_oplog_t *self, const shoal_oplog_entry_t *entry,
                      const shoal_oplog_rules_t *rules, uint64_t *epoch, char *why,
                      size_t why_size);

//  Whether ENTRY links to TIP: it names TIP's entry as its predecessor, or,
//  when TIP has none, it is its chain's first entry. The chain rule that
//  appends, chain ranges and bulk loads share.
bool shoal_oplog_links(const shoal_oplog_entry_t *entry, const shoal_oplog_tip_t *tip);

//  Appends COUNT entries that are a run of one node's chain in one dataset,
//  in chain order, from a peer: what sync receives. The rules of chains
//  are decided here:
//    - entries at the run's start that the log already holds (stamped at
//      or before our head of their node, and present) are skipped;
//    - the first entry not held must link to our head (or start the
//      chain when we have none); if it does not, that is a gap: nothing
//      is written and *GAP is set, for the caller to repair by asking for
//      the chain range from our head to it;
//    - every later entry must link to the one before and be stamped after
//      it, or the run is refused, naming it.
//  Otherwise the rest is appended in one batch, as append_batch does;
//  *ADDED counts the entries that were new. Returns 0, or -1 when an
//  entry is refused (nothing is written) or the write fails.
int shoal_oplog_append_chain(shoal_oplog_t *self, const shoal_oplog_entry_t *entries,
                             size_t count, size_t *added, bool *gap);

//  Appends an entry from elsewhere (a peer, an import): checks its fields and
//  hash, absorbs its stamp into the clock, and writes it with its indexes, its
//  node's head (when its stamp is newer) and its key's state (when it wins) in
//  one batch. An entry already present changes nothing: *ADDED says which.
//  Returns 0, or -1 when the entry is refused (bad field, hash mismatch, clock
//  too far ahead, no epoch in an epoch dataset) or the write fails.
int shoal_oplog_append(shoal_oplog_t *self, const shoal_oplog_entry_t *entry, bool *added);

//  Appends COUNT entries in one batch, as append does one. Duplicates, in the
//  store or within ENTRIES, are skipped; *ADDED (may be NULL) counts the new
//  ones. One refused entry refuses the whole batch and nothing is written.
int shoal_oplog_append_batch(shoal_oplog_t *self, const shoal_oplog_entry_t *entries,
                             size_t count, size_t *added);

//  A local change: stamps it with the clock, links it to this node's head in
//  DATASET, hashes it, and appends and materialises it in one batch. ENTRY
//  (may be NULL) receives the entry written; the caller clears it with
//  shoal_oplog_entry_codec.clear. Returns 0 or -1.
int shoal_oplog_write(shoal_oplog_t *self, const char *dataset, const char *key,
                      shoal_oplog_op_t op, const void *value, size_t size,
                      shoal_oplog_entry_t *entry);

//  Reads the entry HASH of DATASET into ENTRY (the caller clears it): its
//  locator in oplog_by_hash, then the entry in oplog_by_node_hlc. Returns 0
//  with *FOUND set, or -1 (a locator or entry that does not decode, or a
//  locator whose entry is gone, is an error naming its key).
int shoal_oplog_get(shoal_oplog_t *self, const char *dataset, const uint8_t *hash,
                    shoal_oplog_entry_t *entry, bool *found);

//  NODE's last entry in DATASET, from the head table (one read). A node whose
//  entries were all pruned keeps its last pruned entry as head, so that its
//  next entry still links to it. Returns 0 with *FOUND set, or -1. When
//  found, HEAD->node is a copy of NODE that the caller frees.
int shoal_oplog_head(shoal_oplog_t *self, const char *dataset, const char *node,
                     shoal_oplog_head_t *head, bool *found);

//  Every node's head in DATASET, by node id. HEADS is cleared first.
int shoal_oplog_heads(shoal_oplog_t *self, const char *dataset, shoal_oplog_heads_t *heads);

//  Entries of DATASET after a point, in (stamp, node, hash) order, at most
//  LIMIT (0: all). The point is AFTER (NULL: from the start) and AFTER_NODE:
//  NULL skips every entry stamped AFTER or earlier; a node skips those
//  ordered at or before (AFTER, AFTER_NODE), which pages through the log
//  with the last entry of the previous page. LIST is cleared first.
int shoal_oplog_after(shoal_oplog_t *self, const char *dataset,
                      const shoal_hlc_stamp_t *after, const char *after_node,
                      size_t limit, shoal_oplog_list_t *list);

//  NODE's entries in DATASET stamped after AFTER (NULL: all), in stamp
//  order, at most LIMIT (0: all). LIST is cleared first.
int shoal_oplog_node_after(shoal_oplog_t *self, const char *dataset, const char *node,
                           const shoal_hlc_stamp_t *after, size_t limit,
                           shoal_oplog_list_t *list);

//  NODE's entries in DATASET stamped after AFTER (NULL: all), in chain
//  order, as stored, for a peer catching up in bulk: at most MAX_ENTRIES,
//  and no more bytes than MAX_BYTES unless one entry alone is larger. One
//  ordered walk of oplog_by_node_hlc, where the entries are stored. PAGE is
//  cleared first. Returns 0 or -1.
int shoal_oplog_node_page(shoal_oplog_t *self, const char *dataset, const char *node,
                          const shoal_hlc_stamp_t *after, size_t max_entries, size_t max_bytes,
                          shoal_oplog_page_t *page);

//  The number of NODE's entries in DATASET stamped after AFTER (NULL: all),
//  counted up to LIMIT (0: all) in oplog_by_node_hlc, whose every step reads
//  an entry's bytes too (the entries are stored there): keep LIMIT small
//  where it runs often. -1 on failure.
int64_t shoal_oplog_node_count_after(shoal_oplog_t *self, const char *dataset, const char *node,
                                     const shoal_hlc_stamp_t *after, size_t limit);

//  The entries that lead from START (exclusive; it may be pruned) to END
//  (inclusive), following each entry's successor in END's node's chain.
//  START NULL starts at the chain's first entry; START equal to END gives
//  an empty list. Returns -1 when END is absent or
//  the chain is broken (no successor before END is reached, or it forks).
//  LIST is cleared first.
int shoal_oplog_chain_range(shoal_oplog_t *self, const char *dataset,
                            const uint8_t *start, const uint8_t *end,
                            shoal_oplog_list_t *list);

//  Removes every entry of DATASET stamped at or before CUTOFF, with its
//  index keys, in writes of prune_batch entries, and raises the dataset's
//  prune watermark to CUTOFF. Entries are chosen by stamp, not by arrival,
//  so a late entry with an old stamp goes too. The heads of the nodes it
//  touched are then recomputed. *PRUNED (may be NULL) counts the entries
//  removed. Materialised keys (kv) stay as they are. Returns 0 or -1; a
//  prune that fails half way leaves a consistent log and can be repeated.
//  The log keeps no record of a pruned hash: an entry delivered again after
//  its prune is appended again (and goes at the next prune); sync must not
//  send entries below a watermark its peer has confirmed.
int shoal_oplog_prune(shoal_oplog_t *self, const char *dataset,
                      const shoal_hlc_stamp_t *cutoff, size_t *pruned);

//  DATASET's prune watermark: every entry at or before it has been pruned.
//  Returns 0 with *FOUND set (false: never pruned), or -1.
int shoal_oplog_watermark(shoal_oplog_t *self, const char *dataset,
                          shoal_hlc_stamp_t *watermark, bool *found);

//  Every entry of DATASET in stamp order. LIST is cleared first.
int shoal_oplog_export(shoal_oplog_t *self, const char *dataset, shoal_oplog_list_t *list);

//  Appends ENTRIES (an export, a snapshot) in batches of
//  SHOAL_OPLOG_IMPORT_BATCH, skipping those already present. Each batch is
//  atomic; a refused entry stops the import at its batch.
int shoal_oplog_import(shoal_oplog_t *self, const shoal_oplog_entry_t *entries, size_t count);

//  Import that counts the entries that were new in *ADDED.
int shoal_oplog_merge(shoal_oplog_t *self, const shoal_oplog_entry_t *entries, size_t count,
                      size_t *added);

//  Removes DATASET: its entries, index keys, heads, watermark and
//  materialised keys, in one batch.
int shoal_oplog_drop(shoal_oplog_t *self, const char *dataset);

//  Reads KEY of DATASET's materialised state. A key never written or deleted
//  is not found. Returns 0 with *FOUND set, or -1. The caller clears RECORD
//  with shoal_kv_codec.clear.
int shoal_oplog_kv_get(shoal_oplog_t *self, const char *dataset, const char *key,
                       shoal_kv_record_t *record, bool *found);

//  The live keys of DATASET that start with PREFIX ("" for all), in key
//  order, after START_AFTER (NULL or "": from the first), at most LIMIT (0:
//  all), tombstones skipped. LIST is cleared first.
int shoal_oplog_kv_scan(shoal_oplog_t *self, const char *dataset, const char *prefix,
                        const char *start_after, size_t limit, shoal_kv_list_t *list);

//  Every materialised key of DATASET, tombstones included, in key order,
//  after START_AFTER (NULL or "": from the first), at most LIMIT (0: all):
//  what a snapshot carries. LIST is cleared first.
int shoal_oplog_kv_records(shoal_oplog_t *self, const char *dataset, const char *start_after,
                           size_t limit, shoal_kv_list_t *list);

//  Takes in a materialised key from a peer's snapshot: RECORD becomes the
//  state of KEY when it beats the stored one, ordered as entries are (epoch,
//  stamp, node, hash). *APPLIED says whether it did. Returns 0 or -1.
int shoal_oplog_kv_merge(shoal_oplog_t *self, const char *dataset, const char *key,
                         const shoal_kv_record_t *record, bool *applied);

//  Collects tombstones: removes the deleted keys of DATASET's state whose
//  delete is stamped at or before CUTOFF, walking at most LIMIT keys after
//  START_AFTER (NULL or "": from the first), so that a caller bounds each
//  step. A tombstone is what makes an older put that arrives later lose:
//  the caller passes a CUTOFF that every tracked peer has confirmed (each
//  holds every entry up to it), so that no put older than a collected
//  tombstone can still arrive, here or at a peer that missed the delete.
//  An epoch-ordered dataset keeps its tombstones (a put of a lower epoch
//  stamped later must still lose). *NEXT receives the key to resume after
//  (the caller frees it), or NULL when the walk reached the end;
//  *COLLECTED (may be NULL) counts the keys removed, *KEPT (may be NULL)
//  the tombstones walked past and kept, stamped after CUTOFF. Returns 0
//  or -1.
int shoal_oplog_kv_collect(shoal_oplog_t *self, const char *dataset, const shoal_hlc_stamp_t *cutoff,
                           const char *start_after, size_t limit, char **next, size_t *collected,
                           size_t *kept);

//  Takes in a peer's head from a snapshot: HEAD becomes HEAD->node's head in
//  DATASET when it is newer than the stored one, even when its entry is not
//  here (it was pruned at the peer; the watermark explains it). *MOVED says
//  whether it did. Returns 0 or -1.
int shoal_oplog_head_merge(shoal_oplog_t *self, const char *dataset, const shoal_oplog_head_t *head,
                           bool *moved);

//  Number of live (not deleted) keys of DATASET, or -1. Read from its
//  counts: no walk.
int64_t shoal_oplog_kv_count(shoal_oplog_t *self, const char *dataset);

//  DATASET's counts: every write that adds or removes entries or live keys
//  (appends, bulk loads, snapshot merges, prunes, drops) changes them in
//  the same batch, so reading them costs one point read, however large the
//  dataset. Zero for a dataset with nothing. Returns 0 or -1.
int shoal_oplog_counts(shoal_oplog_t *self, const char *dataset, shoal_oplog_counts_t *counts);

//  DATASET's counts as a walk of its log and state finds them (a walk
//  of the whole dataset; reconcile writes them so). Returns 0 or -1.
int shoal_oplog_recount(shoal_oplog_t *self, const char *dataset, shoal_oplog_counts_t *counts);

//  Adds ENTRIES and LIVE (below zero: removes) to DATASET's counts, as read
//  through STORE, in BATCH, for a writer other than the oplog's own (a bulk
//  load) that holds the guard until BATCH is written. Returns 0, or -1 with
//  the store's error.
int shoal_oplog_counts_add(shoal_oplog_t *self, shoal_store_t *store, shoal_batch_t *batch,
                           const char *dataset, int64_t entries, int64_t live);

//  Checks the indexes and heads against the entries (oplog_by_node_hlc) and
//  repairs them: missing index keys and locators are written, index keys
//  naming no entry are removed,
//  heads are recomputed; then a bulk load's mark is removed. The node runs
//  it at start when the log may be torn (shoal_oplog_torn). REPAIR (may be
//  NULL) receives the counts, which are also logged. Returns 0 or -1.
int shoal_oplog_reconcile(shoal_oplog_t *self, shoal_oplog_repair_t *repair);

//  The parts of reconcile, for a repair that needs one and not the rest
//  (the consistency sweep's): the indexes and heads made to agree with
//  the entries, the retired index emptied (REPAIR counts what was done);
//  and DATASET's counts rewritten from a walk when they differ (*WRITTEN
//  says whether). Neither marks the log reconciled. Each returns 0 or -1.
int shoal_oplog_repair_indexes(shoal_oplog_t *self, shoal_oplog_repair_t *repair);
int shoal_oplog_repair_counts(shoal_oplog_t *self, const char *dataset, bool *written);

//  The rebuild of shoal_oplog_repair_indexes a slice at a time, for a
//  caller that must not be held for a walk of the whole log (the sweep's
//  repair, on the reactor): each step visits up to BUDGET keys of one
//  pass (a store of layout 1 migrates first, a migration step at a time)
//  and writes what they need before it returns, through the log's batch,
//  so that appends between steps are never mixed into its writes. A walk
//  goes on after the last key it visited: what appends meanwhile write
//  their indexes and heads themselves. REPAIR counts what was done.
typedef struct _shoal_oplog_rebuild_t shoal_oplog_rebuild_t;

shoal_oplog_rebuild_t *shoal_oplog_rebuild_new(shoal_oplog_t *self);
void shoal_oplog_rebuild_destroy(shoal_oplog_rebuild_t **rebuild_p);

//  Returns the keys visited (*DONE once every pass is over), or -1.
int64_t shoal_oplog_rebuild_step(shoal_oplog_rebuild_t *rebuild, size_t budget, bool *done,
                                 shoal_oplog_repair_t *repair);

//  The recount of shoal_oplog_repair_counts a slice at a time, for the same
//  callers as the rebuild's: DATASET's entries and live keys counted as a
//  snapshot taken at its start holds them, up to BUDGET keys a step, and
//  the difference from the counts that snapshot kept added to the counts
//  at its last step (appends between the steps keep adding their own).
//  DESIGN in shoal_oplog_recount.c.
typedef struct _shoal_oplog_recount_t shoal_oplog_recount_t;

shoal_oplog_recount_t *shoal_oplog_recount_new(shoal_oplog_t *self, const char *dataset);
void shoal_oplog_recount_destroy(shoal_oplog_recount_t **recount_p);

//  Returns the keys visited (*DONE once the counts are mended, *WRITTEN
//  when they had to be), or -1 with shoal_oplog_error saying what failed.
int64_t shoal_oplog_recount_step(shoal_oplog_recount_t *recount, size_t budget, bool *done, bool *written);

//  A bulk load ingests a table file per family, one after another
//  (shoal_oplog_bulk.h): the one write of the log that a crash can tear.
//  It marks (LOADING true) that it is between its first table file and its
//  heads, and unmarks once they are written, durably each time, through
//  STORE (the loader's handle). Returns 0, or -1 with the store's error.
int shoal_oplog_mark_loading(shoal_oplog_t *self, shoal_store_t *store, bool loading);

//  A load's last write and its unmark in one: writes BATCH (its heads)
//  durably through STORE with the removal of the mark when no other load
//  holds it, and counts the load unmarked once that write succeeded (a
//  write that fails leaves the mark, as a load that fails does). Called
//  holding the guard. Returns 0, or -1 with the store's error.
int shoal_oplog_write_unmarking(shoal_oplog_t *self, shoal_store_t *store, shoal_batch_t *batch);

//  Sets *TORN to whether the log needs reconcile: a bulk load's mark
//  survived (a crash cut the load, or it failed), or the store was made,
//  and never reconciled since, by a build that neither marks loads nor
//  keeps counts. *WHY (static text) says which, or why not (a new store,
//  or no load was cut). Call it at open. Returns 0 or -1.
int shoal_oplog_torn(shoal_oplog_t *self, bool *torn, const char **why);

//  Records that the log is closing cleanly: every write before this one is
//  durable with it, and none comes after (the caller stops every writer
//  first). The next open can then skip reconcile. Returns 0 or -1.
int shoal_oplog_mark_clean(shoal_oplog_t *self);

//  Sets *CLEAN to whether the log was last closed with mark_clean, and
//  removes the mark, durably, so that a crash from now on is noticed at the
//  next open. Call it once, at open, before any write. Returns 0 or -1.
int shoal_oplog_take_clean_mark(shoal_oplog_t *self, bool *clean);

//  Number of entries in DATASET, or -1. Read from its counts: no walk.
int64_t shoal_oplog_count(shoal_oplog_t *self, const char *dataset);

//  The datasets that have entries or heads, sorted; a new list of strings
//  the caller destroys, or NULL on failure.
zlistx_t *shoal_oplog_datasets(shoal_oplog_t *self);

#endif
