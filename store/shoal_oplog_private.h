/*  shoal_oplog_private: what the files of the oplog share. Nothing else
    includes it: the module's front door is shoal_oplog.h.

    The oplog is one module in several files, split along the sections of
    its design note (at the top of shoal_oplog.c):

      shoal_oplog.c             the core log: open and schema, hashing, the
                                one validator of entries and the chain
                                rules, appends, reads, chain ranges,
                                import and drop, counts
      shoal_oplog_prune.c       prune and watermarks, and the head rule
                                that prune and reconcile recompute heads by
      shoal_oplog_kv.c          the materialised kv state: which entry a
                                key's state is, reads, snapshot merges
      shoal_oplog_reconcile.c   clean stops, the marks of torn writes, and
                                reconcile at start
      shoal_oplog_migrate.c     a store of layout 1 brought to this one,
                                in bounded steps
      shoal_oplog_recount.c     a dataset's counts recounted in bounded
                                steps

    Helpers that more than one of them calls are declared here with the
    module's prefix; everything else stays static in its file.
*/
#ifndef SHOAL_OPLOG_PRIVATE_H_INCLUDED
#define SHOAL_OPLOG_PRIVATE_H_INCLUDED

#include "shoal_oplog.h"
#include "shoal_oplog_keys.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

//  oplog_meta keys owned here (shoal_hlc owns ("hlc")).
#define OPLOG_META_SCHEMA "schema"
#define OPLOG_META_PRUNE "prune"
#define OPLOG_META_CLEAN "clean"
#define OPLOG_META_LOADING "loading"
#define OPLOG_META_MARKED "marked"
#define OPLOG_META_COUNT "count"
#define OPLOG_META_MIGRATING "migrating"
//  Prefix of the canonical encoding that is hashed, naming what it encodes,
//  so that no other hashed message of shoal can collide with an entry.
#define OPLOG_HASH_DOMAIN "shoal.oplog.entry.v1"
//  Entries whose hashed encoding fits in this many bytes are hashed in one
//  call (shoal_oplog_entry_hash), or several together
//  (shoal_oplog_entry_hash_many).
#define OPLOG_HASH_FLAT_MAX 2048
//  Room for a hash in hex with its terminator.
#define OPLOG_HEX_SIZE (SHOAL_HASH_SIZE * 2 + 1)
//  Room for a string element read back from a key (it cannot be longer).
#define OPLOG_NAME_SIZE SHOAL_KEY_MAX
//  Room for a codec's error message.
#define OPLOG_CODEC_ERROR_MAX 512
//  Entries a chain range reads at a time.
#define OPLOG_CHAIN_PAGE 1024
//  Operations per write when reconcile repairs the indexes.
#define OPLOG_REPAIR_BATCH 10000
//  Smallest capacity a growing list starts with.
#define OPLOG_LIST_MIN 16
//  Bits in a byte, for big-endian encoding in the hash input.
#define OPLOG_BYTE_BITS 8

struct _shoal_oplog_t {
    shoal_store_t *store;           //  the node's store (borrowed)
    shoal_hlc_t *hlc;               //  the node's clock
    char *node;                     //  this node's id; NULL when it writes nothing itself
    bool sync;                      //  fsync every write
    uint64_t max_ahead_ms;          //  how far a remote entry's clock may lead ours
    size_t prune_batch;             //  entries deleted per prune write
    size_t migrate_batch;           //  entries migrated per write from layout 1
    void (*migrated)(size_t, void *);   //  told of each migration write; NULL: nobody
    void *migrated_arg;             //  its argument
    shoal_oplog_migration_t migration;  //  a store of layout 1: how far its migration came
    zhashx_t *epochs;               //  dataset name -> oplog_epoch_t, for epoch-ordered datasets
    shoal_batch_t *batch;           //  reused by every write, empty between calls
    char *error;                    //  text of the last failure; NULL before any
    pthread_mutex_t guard;          //  held around kv and head changes (see shoal_oplog.h)
    zhashx_t *generations;          //  dataset -> uint64_t: kv writes so far; under the guard
    size_t loads_open;              //  bulk loads marked and not unmarked; under the guard
    bool created;                   //  the store was new at open
    zhashx_t *deltas;               //  dataset -> oplog_counts_t: what the write being made changes
};

//  How an epoch-ordered dataset finds the epoch in a value.
typedef struct {
    shoal_oplog_epoch_fn *extract;  //  the dataset's extractor
    void *arg;                      //  its argument
} oplog_epoch_t;

//  What a write changes in one dataset's counts.
typedef struct {
    int64_t entries;                //  entries added (removed: below zero)
    int64_t live;                   //  live keys added (removed: below zero)
} oplog_delta_t;

//  What a head repair did.
typedef enum {
    OPLOG_HEAD_KEPT,
    OPLOG_HEAD_WRITTEN,
    OPLOG_HEAD_REMOVED,
} oplog_head_change_t;

//  shoal_oplog.c: failures, keys and meta values, counts, lists.
void *shoal_oplog_array_push(void **items, size_t *count, size_t *capacity, size_t item_size);
void shoal_oplog_counts_put(shoal_batch_t *batch, const char *dataset, const shoal_oplog_counts_t *counts);
int shoal_oplog_counts_read(shoal_store_t *store, const char *dataset, shoal_oplog_counts_t *counts);
int shoal_oplog_deltas_add(shoal_oplog_t *self, const char *dataset, int64_t entries, int64_t live);
void shoal_oplog_key_meta(shoal_key_t *key, const char *name);
void shoal_oplog_key_raw(shoal_key_t *key, const uint8_t *bytes, size_t size);
void shoal_oplog_key_watermark(shoal_key_t *key, const char *dataset);
int shoal_oplog_meta_get(shoal_oplog_t *self, const shoal_key_t *key, uint64_t *values, size_t count, bool *found);
void shoal_oplog_meta_put(shoal_batch_t *batch, const shoal_key_t *key, const uint64_t *values, size_t count);
int shoal_oplog_fail(shoal_oplog_t *self, const char *format, ...) CHECK_PRINTF(2);
int shoal_oplog_fail_key(shoal_oplog_t *self, shoal_cf_t cf, const uint8_t *bytes, size_t size);
int shoal_oplog_fail_store(shoal_oplog_t *self, const char *what);
int shoal_oplog_iter_status(shoal_oplog_t *self, shoal_iter_t *iter, const char *what);
void shoal_oplog_kv_touch(shoal_oplog_t *self, const char *dataset);
int shoal_oplog_parse_by_hlc(const uint8_t *bytes, size_t size, char *dataset, shoal_hlc_stamp_t *stamp, char *node, uint8_t *hash);
int shoal_oplog_parse_by_node_hlc(const uint8_t *bytes, size_t size, char *dataset, char *node, shoal_hlc_stamp_t *stamp, uint8_t *hash);
int shoal_oplog_parse_pair(const uint8_t *bytes, size_t size, char *dataset, char *node);

//  shoal_oplog_prune.c: batches written as they fill, the head rule.
int shoal_oplog_flush(shoal_oplog_t *self, size_t limit, size_t *writes, const char *what);
int shoal_oplog_head_repair(shoal_oplog_t *self, const char *dataset, const char *node, oplog_head_change_t *change);

//  shoal_oplog_kv.c: the state of keys.
int64_t shoal_oplog_walk_live(shoal_oplog_t *self, const char *dataset);

//  Whether VALUE, read from oplog_by_hash, is a locator (layout 2) rather
//  than an entry (layout 1): a locator starts with a key's string tag,
//  which no encoded entry does (protobuf has no field 0).
bool shoal_oplog_is_locator(const uint8_t *value, size_t size);

//  Makes ENTRY (of ordering EPOCH) the state of its key in the batch being
//  made when it beats the stored state, and counts the change. Called
//  holding the guard.
int shoal_oplog_kv_apply(shoal_oplog_t *self, const shoal_oplog_entry_t *entry, uint64_t epoch);

#endif
