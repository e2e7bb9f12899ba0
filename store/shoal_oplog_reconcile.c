/*  shoal_oplog_reconcile: clean stops, the marks of torn writes, and
    reconcile, for the oplog that shoal_oplog.h describes (design note:
    shoal_oplog.c).

    Every write of the log is one batch except a bulk load, which ingests
    a table file per family: the one write a crash can tear. It is marked
    (shoal_oplog_mark_loading) from its first table file to its heads; a
    start that finds the mark reconciles. Reconcile walks the entries (in
    oplog_by_node_hlc, where each is stored) and writes what oplog_by_hlc
    and oplog_by_hash lack, removes keys of those two that name no entry,
    recomputes heads by the head rule (shoal_oplog_prune.c) and the counts
    from walks.

    The indexes' and heads' passes are one rebuild that goes a slice at a
    time (shoal_oplog_rebuild_step): a start runs it to its end at once,
    the sweep's repair a slice per tick of the reactor, whose appends share
    the log's batch. Each slice writes what it found before it returns, and
    the next goes on after the last key it visited.
*/
#include "shoal_oplog_private.h"

// ---------------------------------------------------------------------------
//  Clean stops

static void
s_key_clean(shoal_key_t *key)
{
    shoal_key_init(key);
    shoal_key_add_str(key, OPLOG_META_CLEAN);
}

int
shoal_oplog_mark_clean(shoal_oplog_t *self)
{
    shoal_key_t key;
    s_key_clean(&key);
    uint64_t wall = (uint64_t) zclock_time();
    shoal_oplog_meta_put(self->batch, &key, &wall, 1);
    int rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    //  The log is synced even in a store without sync: the mark vouches for
    //  every write before it.
    if (rc == 0)
        rc = shoal_store_sync_log(self->store);
    return rc ? shoal_oplog_fail_store(self, "marking a clean stop") : 0;
}

int
shoal_oplog_take_clean_mark(shoal_oplog_t *self, bool *clean)
{
    *clean = false;
    shoal_key_t key;
    s_key_clean(&key);
    uint64_t wall;
    if (shoal_oplog_meta_get(self, &key, &wall, 1, clean))
        return -1;
    if (!*clean)
        return 0;
    //  Durable before anything else is written: a table file ingested later
    //  is durable at once, and must never sit behind a mark that survived a
    //  crash.
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    int rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    if (rc == 0)
        rc = shoal_store_sync_log(self->store);
    return rc ? shoal_oplog_fail_store(self, "removing the clean stop mark") : 0;
}

// ---------------------------------------------------------------------------
//  Torn writes

int
shoal_oplog_mark_loading(shoal_oplog_t *self, shoal_store_t *store, bool loading)
{
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_LOADING);
    shoal_batch_t *batch = shoal_batch_new(store);
    //  A load that failed after its mark never unmarks: the mark stays
    //  until reconcile, whatever loads succeed after it.
    shoal_oplog_guard_lock(self);
    if (loading) {
        uint64_t wall = (uint64_t) zclock_time();
        shoal_oplog_meta_put(batch, &key, &wall, 1);
        self->loads_open++;
    }
    else {
        if (self->loads_open)
            self->loads_open--;
        if (self->loads_open == 0)
            shoal_batch_delete(batch, SHOAL_CF_OPLOG_META, &key);
    }
    int rc = shoal_batch_count(batch) ? shoal_store_write(store, batch, true) : 0;
    shoal_oplog_guard_unlock(self);
    shoal_batch_destroy(&batch);
    return rc;
}

int
shoal_oplog_write_unmarking(shoal_oplog_t *self, shoal_store_t *store, shoal_batch_t *batch)
{
    if (self->loads_open == 1) {
        shoal_key_t key;
        shoal_oplog_key_meta(&key, OPLOG_META_LOADING);
        shoal_batch_delete(batch, SHOAL_CF_OPLOG_META, &key);
    }
    if (shoal_batch_count(batch) && shoal_store_write(store, batch, true))
        return -1;
    if (self->loads_open)
        self->loads_open--;
    return 0;
}

int
shoal_oplog_torn(shoal_oplog_t *self, bool *torn, const char **why)
{
    *torn = false;
    *why = "a new store";
    if (self->created)
        return 0;
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MARKED);
    uint64_t wall;
    bool marked, loading;
    if (shoal_oplog_meta_get(self, &key, &wall, 1, &marked))
        return -1;
    shoal_oplog_key_meta(&key, OPLOG_META_LOADING);
    if (shoal_oplog_meta_get(self, &key, &wall, 1, &loading))
        return -1;
    *torn = loading || !marked;
    *why = loading ? "a bulk load was cut between its table files"
         : !marked ? "the store predates the marks of bulk loads and the counts kept beside them"
         : "no write was torn: no bulk load was in progress, and every other write is one batch";
    return 0;
}

//  Once reconcile has run, every write that can be torn is marked: the
//  loading mark goes, and the store says that it is marked from now on.
static int
s_oplog_reconciled(shoal_oplog_t *self)
{
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_LOADING);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    shoal_oplog_key_meta(&key, OPLOG_META_MARKED);
    uint64_t wall = (uint64_t) zclock_time();
    shoal_oplog_meta_put(self->batch, &key, &wall, 1);
    int rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    return rc ? shoal_oplog_fail_store(self, "recording the reconcile") : 0;
}

// ---------------------------------------------------------------------------
//  Reconcile

//  Checks that ENTRY, read at KEY_BYTES in oplog_by_node_hlc, sits at its
//  own key and hashes to its own hash.
static bool
s_entry_is_sound(const shoal_oplog_entry_t *entry, const uint8_t *key_bytes, size_t key_size)
{
    shoal_key_t key;
    shoal_oplog_key_by_node_hlc(&key, entry);
    if (key.overflow || key.size != key_size || memcmp(key.bytes, key_bytes, key_size) != 0)
        return false;
    uint8_t hash[SHOAL_HASH_SIZE];
    shoal_oplog_entry_hash(entry, hash);
    return memcmp(hash, entry->hash, SHOAL_HASH_SIZE) == 0;
}

//  Writes KEY with VALUE into CF when it is missing or holds another value.
//  A NULL VALUE is an index whose values nobody reads: the key being there
//  is enough, whatever it holds (oplog_by_hlc held the prev hash in stores
//  of an earlier version), and a missing key is written empty.
static int
s_oplog_index_ensure(shoal_oplog_t *self, shoal_cf_t cf, const shoal_key_t *key,
                     const void *value, size_t size, shoal_oplog_repair_t *repair)
{
    bool right = false;
    if (!value) {
        if (shoal_store_exists(self->store, cf, key, &right))
            return shoal_oplog_fail_store(self, "reconcile");
    }
    else {
        uint8_t *stored;
        size_t stored_size;
        if (shoal_store_get(self->store, cf, key, &stored, &stored_size))
            return shoal_oplog_fail_store(self, "reconcile");
        right = stored && stored_size == size && (size == 0 || memcmp(stored, value, size) == 0);
        free(stored);
    }
    if (!right) {
        shoal_batch_put(self->batch, cf, key, value, size);
        repair->index_written++;
    }
    return 0;
}

//  First pass, one key: a sound entry of oplog_by_node_hlc at ITER has
//  its oplog_by_hlc key and its locator in oplog_by_hash.
static int
s_entry_visit(shoal_oplog_t *self, shoal_iter_t *iter, shoal_oplog_repair_t *repair)
{
    repair->entries++;
    shoal_oplog_entry_t entry;
    size_t key_size;
    const uint8_t *key_bytes = shoal_iter_key(iter, &key_size);
    if (shoal_iter_record(iter, &shoal_oplog_entry_codec, &entry)) {
        //  The store has logged the key and why it does not decode.
        repair->corrupt++;
        return 0;
    }
    if (!s_entry_is_sound(&entry, key_bytes, key_size)) {
        char *text = shoal_key_format(key_bytes, key_size);
        zsys_error("oplog: reconcile: oplog_by_node_hlc %s holds an entry whose fields or "
                   "hash do not match its key", text ? text : "(?)");
        free(text);
        repair->corrupt++;
        shoal_oplog_entry_codec.clear(&entry);
        return 0;
    }
    shoal_key_t key, locator;
    shoal_oplog_key_by_hlc(&key, &entry);
    int rc = s_oplog_index_ensure(self, SHOAL_CF_OPLOG_BY_HLC, &key, NULL, 0, repair);
    shoal_oplog_key_by_hash(&key, entry.dataset, entry.hash);
    shoal_oplog_locator(&locator, &entry);
    if (rc == 0)
        rc = s_oplog_index_ensure(self, SHOAL_CF_OPLOG_BY_HASH, &key, locator.bytes, locator.size, repair);
    shoal_oplog_entry_codec.clear(&entry);
    return rc;
}

//  Decides whether the key BYTES of index CF (oplog_by_hlc, or
//  oplog_by_hash with its locator VALUE) names an entry of oplog_by_node_hlc
//  that has exactly this key. *KEEP is false for a key that does not parse
//  or names no entry. The entry's key in oplog_by_node_hlc is built from the
//  index key alone (its hash included), so being there is enough; a corrupt
//  entry keeps its keys: they cannot be judged, and the entry is reported
//  already.
static int
s_oplog_index_check(shoal_oplog_t *self, shoal_cf_t cf, const uint8_t *bytes, size_t size,
                    const uint8_t *value, size_t value_size, bool *keep)
{
    *keep = false;
    char dataset[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
    shoal_hlc_stamp_t stamp;
    uint8_t hash[SHOAL_HASH_SIZE];
    shoal_key_t key;
    if (cf == SHOAL_CF_OPLOG_BY_HLC) {
        if (shoal_oplog_parse_by_hlc(bytes, size, dataset, &stamp, node, hash))
            return 0;
        shoal_oplog_key_by_node_hlc_of(&key, dataset, node, stamp.wall_ms, stamp.logic, hash);
    }
    else {
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes, size);
        size_t hash_size;
        if (shoal_key_read_str(&reader, dataset, sizeof dataset)
        ||  shoal_key_read_bytes(&reader, hash, SHOAL_HASH_SIZE, &hash_size)
        ||  hash_size != SHOAL_HASH_SIZE || !shoal_key_reader_done(&reader)
        ||  shoal_oplog_key_located(&key, dataset, hash, value, value_size))
            return 0;
    }
    if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, keep))
        return shoal_oplog_fail_store(self, "reconcile");
    return 0;
}

//  Second pass, one key: the key of index CF at ITER names an entry that
//  has that key, or goes.
static int
s_index_visit(shoal_oplog_t *self, shoal_cf_t cf, shoal_iter_t *iter, shoal_oplog_repair_t *repair)
{
    size_t size, value_size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    const uint8_t *value = shoal_iter_value(iter, &value_size);
    bool keep;
    int rc = s_oplog_index_check(self, cf, bytes, size, value, value_size, &keep);
    if (rc == 0 && !keep) {
        char *text = shoal_key_format(bytes, size);
        zsys_warning("oplog: reconcile: removing %s %s, which names no entry", shoal_cf_name(cf), text ? text : "(?)");
        free(text);
        shoal_key_t key;
        shoal_oplog_key_raw(&key, bytes, size);
        shoal_batch_delete(self->batch, cf, &key);
        repair->index_removed++;
    }
    return rc;
}

static void
s_repair_count(shoal_oplog_repair_t *repair, oplog_head_change_t change)
{
    if (change == OPLOG_HEAD_WRITTEN)
        repair->heads_written++;
    else
    if (change == OPLOG_HEAD_REMOVED)
        repair->heads_removed++;
}

//  Third pass, one key: the head at ITER follows the head rule.
static int
s_head_visit(shoal_oplog_t *self, shoal_iter_t *iter, shoal_oplog_repair_t *repair)
{
    size_t size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    char dataset[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
    oplog_head_change_t change;
    int rc = 0;
    if (shoal_oplog_parse_pair(bytes, size, dataset, node)) {
        shoal_key_t key;
        shoal_oplog_key_raw(&key, bytes, size);
        shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_NODE_HEAD, &key);
        change = OPLOG_HEAD_REMOVED;
    }
    else
        rc = shoal_oplog_head_repair(self, dataset, node, &change);
    s_repair_count(repair, change);
    return rc;
}

//  Third pass's end, one (dataset, node): the node of the entry at ITER has
//  a head. *NEXT is where its next (dataset, node) may start.
static int
s_headless_visit(shoal_oplog_t *self, shoal_iter_t *iter, shoal_oplog_repair_t *repair, shoal_key_t *next)
{
    size_t size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    char dataset[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
    shoal_hlc_stamp_t stamp;
    uint8_t hash[SHOAL_HASH_SIZE];
    if (shoal_oplog_parse_by_node_hlc(bytes, size, dataset, node, &stamp, hash))
        return shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_NODE_HLC, bytes, size);
    shoal_key_t key;
    shoal_oplog_key_head(&key, dataset, node);
    bool has_head;
    if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &has_head))
        return shoal_oplog_fail_store(self, "reconcile");
    oplog_head_change_t change = OPLOG_HEAD_KEPT;
    int rc = has_head ? 0 : shoal_oplog_head_repair(self, dataset, node, &change);
    s_repair_count(repair, change);
    shoal_key_prefix_end(&key, next);
    return rc;
}

//  Empties oplog_prev_to_hash, which stores of an earlier version filled:
//  a chain range walks oplog_by_node_hlc instead (shoal_oplog.h).
static int
s_oplog_retire_prev(shoal_oplog_t *self)
{
    shoal_key_t first, last;
    shoal_key_init(&first);
    uint8_t end = 0xFF;
    shoal_oplog_key_raw(&last, &end, 1);
    shoal_batch_delete_range(self->batch, SHOAL_CF_OPLOG_PREV_TO_HASH, &first, &last);
    int rc = shoal_store_write(self->store, self->batch, self->sync);
    shoal_batch_clear(self->batch);
    return rc ? shoal_oplog_fail_store(self, "reconcile: emptying oplog_prev_to_hash") : 0;
}

//  Last pass: every dataset's counts are what a walk counts.
static int
s_oplog_reconcile_counts(shoal_oplog_t *self, shoal_oplog_repair_t *repair)
{
    zlistx_t *datasets = shoal_oplog_datasets(self);
    if (!datasets)
        return -1;
    int rc = 0;
    shoal_oplog_guard_lock(self);
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset && rc == 0;
         dataset = (const char *) zlistx_next(datasets)) {
        shoal_oplog_counts_t walked, kept;
        rc = shoal_oplog_recount(self, dataset, &walked);
        if (rc == 0 && shoal_oplog_counts_read(self->store, dataset, &kept) == 0
        &&  kept.entries == walked.entries && kept.live == walked.live)
            continue;
        if (rc == 0) {
            shoal_oplog_counts_put(self->batch, dataset, &walked);
            repair->counts_written++;
            size_t writes = 0;
            rc = shoal_oplog_flush(self, 0, &writes, "reconcile: counts");
        }
    }
    shoal_oplog_guard_unlock(self);
    shoal_batch_clear(self->batch);
    zlistx_destroy(&datasets);
    return rc;
}

// ---------------------------------------------------------------------------
//  The rebuild of the indexes and heads, a slice at a time

//  Its passes, in order.
typedef enum {
    S_REBUILD_MIGRATE,          //  a store of layout 1 migrated first, a step a slice
    S_REBUILD_RETIRE,           //  oplog_prev_to_hash emptied
    S_REBUILD_ENTRIES,          //  each entry's index keys written (first pass)
    S_REBUILD_BY_HLC,           //  oplog_by_hlc's keys that name no entry removed (second pass)
    S_REBUILD_BY_HASH,          //  oplog_by_hash's, alike
    S_REBUILD_HEADS,            //  each head follows the head rule (third pass)
    S_REBUILD_HEADLESS,         //  each node with entries has a head
    S_REBUILD_DONE
} s_rebuild_pass_t;

struct _shoal_oplog_rebuild_t {
    shoal_oplog_t *oplog;
    s_rebuild_pass_t pass;
    shoal_key_t from;           //  where the pass goes on (its first key at or after)
    bool resumed;               //  FROM is set (else the pass starts at its first key)
};

shoal_oplog_rebuild_t *
shoal_oplog_rebuild_new(shoal_oplog_t *oplog)
{
    shoal_oplog_rebuild_t *self = (shoal_oplog_rebuild_t *) zmalloc(sizeof *self);
    self->oplog = oplog;
    self->pass = S_REBUILD_MIGRATE;
    return self;
}

void
shoal_oplog_rebuild_destroy(shoal_oplog_rebuild_t **self_p)
{
    if (*self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

static shoal_cf_t
s_rebuild_cf(s_rebuild_pass_t pass)
{
    switch (pass) {
        case S_REBUILD_BY_HLC: return SHOAL_CF_OPLOG_BY_HLC;
        case S_REBUILD_BY_HASH: return SHOAL_CF_OPLOG_BY_HASH;
        case S_REBUILD_HEADS: return SHOAL_CF_OPLOG_NODE_HEAD;
        default: return SHOAL_CF_OPLOG_BY_NODE_HLC;
    }
}

//  The smallest key after BYTES (SIZE bytes): where a walk goes on.
static void
s_key_after(shoal_key_t *key, const uint8_t *bytes, size_t size)
{
    uint8_t after[SHOAL_KEY_MAX];
    size_t length = size < SHOAL_KEY_MAX - 1 ? size : SHOAL_KEY_MAX - 1;
    memcpy(after, bytes, length);
    after[length] = 0x00;
    shoal_oplog_key_raw(key, after, length + 1);
}

//  Up to BUDGET keys of the walk of the current pass, from where it was;
//  what they need is written before it returns. Returns the keys visited,
//  or -1.
static int64_t
s_rebuild_walk(shoal_oplog_rebuild_t *self, size_t budget, shoal_oplog_repair_t *repair)
{
    shoal_oplog_t *oplog = self->oplog;
    shoal_iter_t *iter = shoal_iter_new(oplog->store, s_rebuild_cf(self->pass), NULL, NULL);
    if (!iter)
        return shoal_oplog_fail_store(oplog, "reconcile");
    bool heads = self->pass == S_REBUILD_HEADS || self->pass == S_REBUILD_HEADLESS;
    //  Heads follow the rule the writers of the log follow: under its guard.
    if (heads)
        shoal_oplog_guard_lock(oplog);
    size_t writes = 0, visited = 0;
    int rc = 0;
    bool on_key = self->resumed ? shoal_iter_seek(iter, &self->from) : shoal_iter_first(iter);
    while (on_key && rc == 0 && visited < budget) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        visited++;
        if (self->pass == S_REBUILD_HEADLESS) {
            rc = s_headless_visit(oplog, iter, repair, &self->from);
            self->resumed = true;
            on_key = rc == 0 && shoal_iter_seek(iter, &self->from);
            continue;
        }
        s_key_after(&self->from, bytes, size);
        self->resumed = true;
        rc = self->pass == S_REBUILD_ENTRIES ? s_entry_visit(oplog, iter, repair)
           : self->pass == S_REBUILD_HEADS ? s_head_visit(oplog, iter, repair)
           : s_index_visit(oplog, s_rebuild_cf(self->pass), iter, repair);
        if (rc == 0)
            rc = shoal_oplog_flush(oplog, OPLOG_REPAIR_BATCH, &writes, "reconcile");
        if (rc == 0)
            on_key = shoal_iter_next(iter);
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(oplog, iter, "reconcile");
    shoal_iter_destroy(&iter);
    if (rc == 0)
        rc = shoal_oplog_flush(oplog, 0, &writes, "reconcile");
    if (heads)
        shoal_oplog_guard_unlock(oplog);
    shoal_batch_clear(oplog->batch);
    if (rc)
        return -1;
    if (!on_key) {
        self->pass++;
        self->resumed = false;
    }
    return (int64_t) visited;
}

int64_t
shoal_oplog_rebuild_step(shoal_oplog_rebuild_t *self, size_t budget, bool *done, shoal_oplog_repair_t *repair)
{
    *done = false;
    int64_t visited = 0;
    if (self->pass == S_REBUILD_MIGRATE) {
        //  The walks trust oplog_by_node_hlc alone, which layout 1 may leave
        //  empty where oplog_by_hash holds the entry: the migration goes
        //  first, to its end.
        bool migrated = true;
        if (self->oplog->migration.migrating && shoal_oplog_migrate_step(self->oplog, &migrated))
            return -1;
        if (migrated)
            self->pass++;
        visited = 1;
    }
    else
    if (self->pass == S_REBUILD_RETIRE) {
        if (s_oplog_retire_prev(self->oplog))
            return -1;
        self->pass++;
        visited = 1;
    }
    else
    if (self->pass < S_REBUILD_DONE)
        visited = s_rebuild_walk(self, budget ? budget : 1, repair);
    *done = self->pass == S_REBUILD_DONE;
    return visited;
}

int
shoal_oplog_repair_indexes(shoal_oplog_t *self, shoal_oplog_repair_t *repair)
{
    if (self->migration.migrating)
        zsys_info("oplog: the store is of layout %d still; migrating the rest of it before the "
                  "repair", SHOAL_OPLOG_SCHEMA_TWICE);
    shoal_oplog_rebuild_t *rebuild = shoal_oplog_rebuild_new(self);
    bool done = false;
    int rc = 0;
    while (!done && rc == 0)
        rc = shoal_oplog_rebuild_step(rebuild, SIZE_MAX, &done, repair) < 0 ? -1 : 0;
    shoal_oplog_rebuild_destroy(&rebuild);
    return rc;
}

int
shoal_oplog_repair_counts(shoal_oplog_t *self, const char *dataset, bool *written)
{
    *written = false;
    shoal_oplog_counts_t walked, kept;
    shoal_oplog_guard_lock(self);
    int rc = shoal_oplog_recount(self, dataset, &walked);
    if (rc == 0 && (shoal_oplog_counts_read(self->store, dataset, &kept) != 0
    ||  kept.entries != walked.entries || kept.live != walked.live)) {
        shoal_oplog_counts_put(self->batch, dataset, &walked);
        size_t writes = 0;
        rc = shoal_oplog_flush(self, 0, &writes, "repair: counts");
        *written = rc == 0;
    }
    shoal_oplog_guard_unlock(self);
    shoal_batch_clear(self->batch);
    return rc;
}

int
shoal_oplog_reconcile(shoal_oplog_t *self, shoal_oplog_repair_t *repair_p)
{
    shoal_oplog_repair_t repair = { 0 };
    int rc = shoal_oplog_repair_indexes(self, &repair);
    if (rc == 0)
        rc = s_oplog_reconcile_counts(self, &repair);
    if (rc == 0)
        rc = s_oplog_reconciled(self);
    if (rc == 0)
        zsys_info("oplog: reconcile checked %zu entries: %zu corrupt, %zu index keys written, "
                  "%zu removed, %zu heads written, %zu removed, %zu datasets' counts written",
                  repair.entries, repair.corrupt, repair.index_written, repair.index_removed,
                  repair.heads_written, repair.heads_removed, repair.counts_written);
    if (repair_p)
        *repair_p = repair;
    return rc;
}

