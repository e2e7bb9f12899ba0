/*  shoal_oplog: the core of the operation log that shoal_oplog.h describes.

    DESIGN

    The oplog is one module in several files, one per section below (see
    shoal_oplog_private.h): this one holds the core log, the others prune
    and watermarks, the materialised kv state, reconcile with the start-up
    marks, and the migration of a store of the layout before.

    Layout (the table is in shoal_oplog.h). Each entry is stored once, in
    oplog_by_node_hlc, whose order is each node's chain: catch-up pages and
    chain ranges, the hot reads, are ordered walks there that read each
    entry where the walk stands. oplog_by_hash holds the entry's locator,
    (node, wall, logic), the rest of its oplog_by_node_hlc key: held or not
    (dedupe) reads it alone, an entry by hash reads it and then the entry.
    oplog_by_hlc holds keys alone; each names every element of the entry's
    oplog_by_node_hlc key.

    Core log: appending. Every append, single or batched, local or remote,
    goes through s_oplog_apply, which turns a set of entries into one
    shoal_batch_t:
      1. check each entry with shoal_oplog_check, the one validator every
         way into the log shares (bulk loads too): fields, hash, clock
         bound, epoch, and for a chain run its link to the entry before,
         in the caller's order, so that a refusal names the entry's
         position;
      2. sort by (dataset, hash) and drop duplicates within the set, then ask
         the store whether each remaining hash is already there. Sorting
         makes those reads walk the key space in order, which is what
         RocksDB reads fastest;
      3. put each new entry in oplog_by_node_hlc, its locator in
         oplog_by_hash and its key in oplog_by_hlc, each family's keys in
         that family's key order (limits.md: ordered keys are 4-8x cheaper
         to insert than shuffled ones);
      4. sort by (dataset, node, stamp): one head read per node in the set,
         and the head moves only if the set's newest entry is newer;
      5. sort by (dataset, key, version): one kv read per key in the set, and
         the key changes only if the set's winner beats the stored one
         (shoal_oplog_kv.c);
      6. put the datasets' counts and write the batch.
    Writing an entry twice would leave the same bytes behind (every step is
    idempotent); the dedupe read exists so that append can say whether the
    entry was new, which sync and merge report.

    Core log: chains. The rules of a node's chain live here and nowhere
    else (sync asks): shoal_oplog_links says whether an entry links to a
    tip, and shoal_oplog_append_chain takes a run of one chain from a
    peer, skips what is held (stamped at or before our head, and present),
    reports a gap when the rest does not link to our head, and appends it
    otherwise, each entry linking to the one before. A chain range (gap
    repair, served to a peer) is an ordered walk of the node's keys in
    oplog_by_node_hlc that checks each link and names a fork.

    Prune and watermarks (shoal_oplog_prune.c). A head moves only forward
    in stamp order. Prune does not remove a head whose entries all went: it
    keeps naming the last pruned entry, so that the node's next entry links
    to it and a peer that knew that entry can still ask for the chain after
    it. The one head rule (shoal_oplog_head_repair) serves prune and
    reconcile alike: a head names the node's latest entry, or a newer one
    that is gone because it was pruned. The entries to remove are found in
    oplog_by_hlc, by stamp, so an entry that arrived late with an old stamp
    goes with its peers; every key of an entry is built from its
    oplog_by_hlc key, so prune is an ordered walk plus deletes, with no
    point reads. The watermark is raised in the first write, before any
    entry goes: a prune cut short then leaves heads of pruned entries still
    explained by it.

    Materialised state (shoal_oplog_kv.c). The state of a kv key is a
    function of the set of entries applied to it: the greatest by (epoch,
    stamp, node, hash) wins, deletes leave tombstones, and the record holds
    only fields of the winner. Any order of the same entries therefore
    leaves the same bytes. A snapshot's records merge by the same order.

    Reconcile and start-up marks (shoal_oplog_reconcile.c). Every write
    above is one batch, which a crash cannot tear. A bulk load is not: it
    marks itself in oplog_meta from its first table file to its heads, and
    a start that finds the mark (or a store older than the marks, or
    oplog/reconcile_always) reconciles: the indexes and heads are checked
    against the entries in oplog_by_node_hlc and repaired, and the counts
    recomputed. A clean stop leaves a mark of its own, taken at the next
    open.

    Migration (shoal_oplog_migrate.c). A store of layout 1, which stored
    each entry in oplog_by_hash and again in oplog_by_node_hlc, is brought
    to this layout in bounded writes that each record how far they came,
    so that a migration cut by a crash resumes; at open, or a step at a
    time while the log serves. Until it ends every read accepts both
    forms: a value of oplog_by_hash is a locator or the entry itself, and
    an empty (or missing) oplog_by_node_hlc value is read from there.
    Reconcile, which derives everything from oplog_by_node_hlc, waits for
    its end.

    Keys in messages are shown with shoal_key_format, hashes in hex.
*/
#include "shoal_oplog_private.h"
#include "shoal_alloc.h"
#include "shoal_blake2b.h"

#include <sodium.h>

//  One entry of a set being applied.
typedef struct {
    const shoal_oplog_entry_t *entry;   //  the caller's entry (borrowed)
    uint64_t epoch;                     //  its ordering epoch; 0 in other datasets
    bool skip;                          //  a duplicate in the set, or already stored
    uint8_t *encoded;                   //  the entry as stored, once it is new (owned)
    size_t encoded_size;                //  its length
} oplog_slot_t;


// ---------------------------------------------------------------------------
//  Errors

//  Keeps a printf-style message as the last error and logs it. Returns -1.
int
shoal_oplog_fail(shoal_oplog_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (text) {
        zsys_warning("oplog: %s", text);
        zstr_free(&self->error);
        self->error = text;
    }
    return -1;
}

//  Keeps the store's last error, after WHAT was being done. The store has
//  logged it already. Returns -1.
int
shoal_oplog_fail_store(shoal_oplog_t *self, const char *what)
{
    char *text = zsys_sprintf("%s: %s", what, shoal_store_error(self->store));
    if (text) {
        zstr_free(&self->error);
        self->error = text;
    }
    return -1;
}

static void
s_hex(const uint8_t *hash, char *hex)
{
    sodium_bin2hex(hex, OPLOG_HEX_SIZE, hash, SHOAL_HASH_SIZE);
}

// ---------------------------------------------------------------------------
//  Keys of oplog_meta, and raw keys (the families' own are in shoal_oplog_keys)

void
shoal_oplog_key_watermark(shoal_key_t *key, const char *dataset)
{
    shoal_key_init(key);
    shoal_key_add_str(key, OPLOG_META_PRUNE);
    shoal_key_add_str(key, dataset);
}

//  A key holding BYTES as read from an iterator, to delete it by.
void
shoal_oplog_key_raw(shoal_key_t *key, const uint8_t *bytes, size_t size)
{
    shoal_key_init(key);
    if (size > SHOAL_KEY_MAX) {
        key->overflow = true;
        return;
    }
    memcpy(key->bytes, bytes, size);
    key->size = size;
}

//  Reads a hash element, which must be exactly SHOAL_HASH_SIZE bytes.
static int
s_read_hash(shoal_key_reader_t *reader, uint8_t *hash)
{
    size_t size;
    if (shoal_key_read_bytes(reader, hash, SHOAL_HASH_SIZE, &size) || size != SHOAL_HASH_SIZE)
        return -1;
    return 0;
}

//  Reads a stamp written as (u64 wall, u64 logic).
static int
s_read_stamp(shoal_key_reader_t *reader, shoal_hlc_stamp_t *stamp)
{
    uint64_t logic;
    if (shoal_key_read_u64(reader, &stamp->wall_ms)
    ||  shoal_key_read_u64(reader, &logic)
    ||  logic > UINT32_MAX)
        return -1;
    stamp->logic = (uint32_t) logic;
    return 0;
}

//  Parsers of the index keys. Each returns 0, or -1 when BYTES is not a
//  whole key of its family. DATASET and NODE have room for OPLOG_NAME_SIZE.
int
shoal_oplog_parse_by_hlc(const uint8_t *bytes, size_t size, char *dataset, shoal_hlc_stamp_t *stamp,
               char *node, uint8_t *hash)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, size);
    if (shoal_key_read_str(&reader, dataset, OPLOG_NAME_SIZE)
    ||  s_read_stamp(&reader, stamp)
    ||  shoal_key_read_str(&reader, node, OPLOG_NAME_SIZE)
    ||  s_read_hash(&reader, hash)
    ||  !shoal_key_reader_done(&reader))
        return -1;
    return 0;
}

int
shoal_oplog_parse_by_node_hlc(const uint8_t *bytes, size_t size, char *dataset, char *node,
                    shoal_hlc_stamp_t *stamp, uint8_t *hash)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, size);
    if (shoal_key_read_str(&reader, dataset, OPLOG_NAME_SIZE)
    ||  shoal_key_read_str(&reader, node, OPLOG_NAME_SIZE)
    ||  s_read_stamp(&reader, stamp)
    ||  s_read_hash(&reader, hash)
    ||  !shoal_key_reader_done(&reader))
        return -1;
    return 0;
}

//  A key of two strings: (dataset, node) in oplog_node_head, (dataset, key)
//  in kv.
int
shoal_oplog_parse_pair(const uint8_t *bytes, size_t size, char *dataset, char *node)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, size);
    if (shoal_key_read_str(&reader, dataset, OPLOG_NAME_SIZE)
    ||  shoal_key_read_str(&reader, node, OPLOG_NAME_SIZE)
    ||  !shoal_key_reader_done(&reader))
        return -1;
    return 0;
}

//  Fails naming a key of CF that is not laid out as its family's keys are.
int
shoal_oplog_fail_key(shoal_oplog_t *self, shoal_cf_t cf, const uint8_t *bytes, size_t size)
{
    char *text = shoal_key_format(bytes, size);
    shoal_oplog_fail(self, "%s %s: not a key of this family", shoal_cf_name(cf), text ? text : "(?)");
    free(text);
    return -1;
}

// ---------------------------------------------------------------------------
//  Meta values: tuples of u64, encoded as keys are

//  The key of meta value NAME.
void
shoal_oplog_key_meta(shoal_key_t *key, const char *name)
{
    shoal_key_init(key);
    shoal_key_add_str(key, name);
}

//  Reads the meta value KEY through STORE into VALUES (COUNT of them).
//  Returns 0 with *FOUND set, -1 when the store fails (its error says why),
//  or 1 when the value is no tuple of COUNT integers; *SHOWN (may be NULL)
//  then receives it as text, which the caller frees.
static int
s_meta_read(shoal_store_t *store, const shoal_key_t *key, uint64_t *values, size_t count,
            bool *found, char **shown)
{
    *found = false;
    uint8_t *value;
    size_t size;
    if (shoal_store_get(store, SHOAL_CF_OPLOG_META, key, &value, &size))
        return -1;
    if (!value)
        return 0;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = shoal_key_read_u64(&reader, &values[i]) ? 1 : 0;
    if (rc == 0 && !shoal_key_reader_done(&reader))
        rc = 1;
    if (rc && shown)
        *shown = shoal_key_format(value, size);
    *found = rc == 0;
    free(value);
    return rc;
}

int
shoal_oplog_meta_get(shoal_oplog_t *self, const shoal_key_t *key, uint64_t *values, size_t count,
           bool *found)
{
    char *what = NULL;
    int rc = s_meta_read(self->store, key, values, count, found, &what);
    if (rc < 0)
        return shoal_oplog_fail_store(self, "oplog_meta read");
    if (rc > 0) {
        char *where = shoal_key_format(key->bytes, key->size);
        shoal_oplog_fail(self, "oplog_meta %s: value %s is not a tuple of %zu integers",
                     where ? where : "(?)", what ? what : "(?)", count);
        free(where);
        free(what);
        return -1;
    }
    return 0;
}

void
shoal_oplog_meta_put(shoal_batch_t *batch, const shoal_key_t *key, const uint64_t *values, size_t count)
{
    shoal_key_t value;
    shoal_key_init(&value);
    for (size_t i = 0; i < count; i++)
        shoal_key_add_u64(&value, values[i]);
    shoal_batch_put(batch, SHOAL_CF_OPLOG_META, key, value.bytes, value.size);
}

// ---------------------------------------------------------------------------
//  Counts

//  The key of DATASET's counts in oplog_meta.
static void
s_key_count(shoal_key_t *key, const char *dataset)
{
    shoal_oplog_key_meta(key, OPLOG_META_COUNT);
    shoal_key_add_str(key, dataset);
}

//  Reads DATASET's counts through STORE into COUNTS (zero when none are
//  kept: a dataset with nothing in it). Returns 0, or -1 with the store's
//  error, or 1 when the value is no pair of counts.
int
shoal_oplog_counts_read(shoal_store_t *store, const char *dataset, shoal_oplog_counts_t *counts)
{
    memset(counts, 0, sizeof *counts);
    shoal_key_t key;
    s_key_count(&key, dataset);
    uint64_t values[2];
    bool found;
    int rc = s_meta_read(store, &key, values, 2, &found, NULL);
    if (rc == 0 && found) {
        counts->entries = values[0];
        counts->live = values[1];
    }
    return rc;
}

//  Puts COUNTS as DATASET's in BATCH.
void
shoal_oplog_counts_put(shoal_batch_t *batch, const char *dataset, const shoal_oplog_counts_t *counts)
{
    shoal_key_t key;
    s_key_count(&key, dataset);
    uint64_t values[2] = { counts->entries, counts->live };
    shoal_oplog_meta_put(batch, &key, values, 2);
}

int
shoal_oplog_counts_add(shoal_oplog_t *self, shoal_store_t *store, shoal_batch_t *batch,
                       const char *dataset, int64_t entries, int64_t live)
{
    (void) self;
    if (entries == 0 && live == 0)
        return 0;
    shoal_oplog_counts_t counts;
    if (shoal_oplog_counts_read(store, dataset, &counts) < 0)
        return -1;
    counts.entries = shoal_count_add(counts.entries, entries);
    counts.live = shoal_count_add(counts.live, live);
    shoal_oplog_counts_put(batch, dataset, &counts);
    return 0;
}

//  Adds ENTRIES and LIVE to what the write being made changes in DATASET.
int
shoal_oplog_deltas_add(shoal_oplog_t *self, const char *dataset, int64_t entries, int64_t live)
{
    oplog_delta_t *delta = (oplog_delta_t *) zhashx_lookup(self->deltas, dataset);
    if (!delta) {
        delta = (oplog_delta_t *) calloc(1, sizeof *delta);
        if (!delta)
            return shoal_oplog_fail(self, "out of memory");
        zhashx_insert(self->deltas, dataset, delta);
    }
    delta->entries += entries;
    delta->live += live;
    return 0;
}

//  Puts the counts the deltas gathered for the write being made into its
//  batch, and forgets the deltas. The caller holds the guard.
static int
s_deltas_put(shoal_oplog_t *self)
{
    int rc = 0;
    for (oplog_delta_t *delta = (oplog_delta_t *) zhashx_first(self->deltas);
         delta && rc == 0; delta = (oplog_delta_t *) zhashx_next(self->deltas)) {
        const char *dataset = (const char *) zhashx_cursor(self->deltas);
        if (shoal_oplog_counts_add(self, self->store, self->batch, dataset, delta->entries,
                                   delta->live))
            rc = shoal_oplog_fail_store(self, "counts read");
    }
    zhashx_purge(self->deltas);
    return rc;
}

int
shoal_oplog_counts(shoal_oplog_t *self, const char *dataset, shoal_oplog_counts_t *counts)
{
    int rc = shoal_oplog_counts_read(self->store, dataset, counts);
    if (rc < 0)
        return shoal_oplog_fail_store(self, "counts read");
    if (rc > 0)
        return shoal_oplog_fail(self, "oplog_meta (\"count\", \"%s\"): value is not a pair of counts", dataset);
    return 0;
}

// ---------------------------------------------------------------------------
//  Schema

//  Writes the schema version into a new store, refuses another version,
//  migrates layout 1 (now, or IN_STEPS later: see shoal_oplog_migrate.c).
static int
s_oplog_check_schema(shoal_oplog_t *self, bool in_steps)
{
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_SCHEMA);
    uint64_t version;
    bool found;
    if (shoal_oplog_meta_get(self, &key, &version, 1, &found))
        return -1;
    if (found && version == SHOAL_OPLOG_SCHEMA_TWICE) {
        self->migration.migrating = true;
        return in_steps ? 0 : shoal_oplog_migrate(self);
    }
    if (found && version != SHOAL_OPLOG_SCHEMA_VERSION)
        return shoal_oplog_fail(self, "the store holds oplog schema version %" PRIu64
                            ", this build reads version %d (and migrates version %d)", version,
                            SHOAL_OPLOG_SCHEMA_VERSION, SHOAL_OPLOG_SCHEMA_TWICE);
    if (found)
        return 0;
    version = SHOAL_OPLOG_SCHEMA_VERSION;
    shoal_oplog_meta_put(self->batch, &key, &version, 1);
    //  A new store: its bulk loads are marked from the start.
    uint64_t wall = (uint64_t) zclock_time();
    shoal_oplog_key_meta(&key, OPLOG_META_MARKED);
    shoal_oplog_meta_put(self->batch, &key, &wall, 1);
    self->created = true;
    int rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    return rc ? shoal_oplog_fail_store(self, "writing the schema version") : 0;
}

int
shoal_oplog_watermark(shoal_oplog_t *self, const char *dataset, shoal_hlc_stamp_t *watermark,
                      bool *found)
{
    shoal_key_t key;
    shoal_oplog_key_watermark(&key, dataset);
    uint64_t values[2];
    if (shoal_oplog_meta_get(self, &key, values, 2, found))
        return -1;
    if (*found && values[1] > UINT32_MAX)
        return shoal_oplog_fail(self, "oplog_meta (\"%s\", \"%s\"): logic %" PRIu64 " is out of range",
                            OPLOG_META_PRUNE, dataset, values[1]);
    if (*found) {
        watermark->wall_ms = values[0];
        watermark->logic = (uint32_t) values[1];
    }
    return 0;
}

// ---------------------------------------------------------------------------
//  Lists

void
shoal_oplog_list_clear(shoal_oplog_list_t *list)
{
    for (size_t i = 0; i < list->count; i++)
        shoal_oplog_entry_codec.clear(&list->entries[i]);
    free(list->entries);
    memset(list, 0, sizeof *list);
}

void
shoal_oplog_page_clear(shoal_oplog_page_t *page)
{
    free(page->bytes);
    free(page->sizes);
    memset(page, 0, sizeof *page);
}

void
shoal_oplog_heads_clear(shoal_oplog_heads_t *heads)
{
    for (size_t i = 0; i < heads->count; i++)
        free(heads->heads[i].node);
    free(heads->heads);
    memset(heads, 0, sizeof *heads);
}

void
shoal_kv_list_clear(shoal_kv_list_t *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].key);
        shoal_kv_codec.clear(&list->items[i].record);
    }
    free(list->items);
    memset(list, 0, sizeof *list);
}

//  Makes room for one more element in an array of ITEM_SIZE elements.
//  Returns the new (zeroed) element, or NULL when memory ran out.
void *
shoal_oplog_array_push(void **items, size_t *count, size_t *capacity, size_t item_size)
{
    if (*count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : OPLOG_LIST_MIN;
        void *bigger = realloc(*items, grown * item_size);
        if (!bigger)
            return NULL;
        *items = bigger;
        *capacity = grown;
    }
    void *item = (uint8_t *) *items + *count * item_size;
    memset(item, 0, item_size);
    (*count)++;
    return item;
}

// ---------------------------------------------------------------------------
//  Construction

void
shoal_oplog_options_default(shoal_oplog_options_t *options)
{
    memset(options, 0, sizeof *options);
    options->sync = true;
    options->max_clock_ahead_ms = SHOAL_HLC_MAX_AHEAD_MS_DEFAULT;
    options->prune_batch = SHOAL_OPLOG_PRUNE_BATCH_DEFAULT;
}

shoal_oplog_t *
shoal_oplog_new(shoal_store_t *store, const shoal_oplog_options_t *options)
{
    assert(store);
    shoal_oplog_options_t defaults;
    if (!options) {
        shoal_oplog_options_default(&defaults);
        options = &defaults;
    }
    //  BLAKE2b works without it, but slower: sodium_init picks the fastest
    //  implementation this CPU has. It is safe to call more than once.
    if (sodium_init() < 0) {
        zsys_error("oplog: libsodium does not initialise");
        return NULL;
    }
    shoal_oplog_t *self = (shoal_oplog_t *) zmalloc(sizeof(shoal_oplog_t));
    self->store = store;
    self->sync = options->sync;
    self->max_ahead_ms = options->max_clock_ahead_ms;
    self->prune_batch = options->prune_batch ? options->prune_batch
                                             : SHOAL_OPLOG_PRUNE_BATCH_DEFAULT;
    self->migrate_batch = options->migrate_batch ? options->migrate_batch
                                                 : SHOAL_OPLOG_MIGRATE_BATCH_DEFAULT;
    self->migrated = options->migrated;
    self->migrated_arg = options->migrated_arg;
    self->node = options->node ? strdup(options->node) : NULL;
    self->epochs = zhashx_new();
    zhashx_set_destructor(self->epochs, shoal_free_item);
    pthread_mutex_init(&self->guard, NULL);
    self->generations = zhashx_new();
    zhashx_set_destructor(self->generations, shoal_free_item);
    self->deltas = zhashx_new();
    zhashx_set_destructor(self->deltas, shoal_free_item);
    self->batch = shoal_batch_new(store);
    self->hlc = shoal_hlc_new(store, options->max_clock_ahead_ms, options->clock,
                              options->clock_arg);
    if ((options->node && !self->node) || !self->hlc || s_oplog_check_schema(self, options->migrate_in_steps)) {
        if (self->error)
            zsys_error("oplog: cannot open: %s", self->error);
        shoal_oplog_destroy(&self);
    }
    return self;
}

void
shoal_oplog_destroy(shoal_oplog_t **self_p)
{
    assert(self_p);
    shoal_oplog_t *self = *self_p;
    if (!self)
        return;
    shoal_hlc_destroy(&self->hlc);
    shoal_batch_destroy(&self->batch);
    zhashx_destroy(&self->epochs);
    zhashx_destroy(&self->generations);
    zhashx_destroy(&self->deltas);
    pthread_mutex_destroy(&self->guard);
    free(self->node);
    zstr_free(&self->error);
    free(self);
    *self_p = NULL;
}

const char *
shoal_oplog_error(shoal_oplog_t *self)
{
    return self->error ? self->error : "";
}

shoal_store_t *
shoal_oplog_store(shoal_oplog_t *self)
{
    return self->store;
}

const char *
shoal_oplog_node(shoal_oplog_t *self)
{
    return self->node;
}

shoal_hlc_t *
shoal_oplog_hlc(shoal_oplog_t *self)
{
    return self->hlc;
}

void
shoal_oplog_guard_lock(shoal_oplog_t *self)
{
    pthread_mutex_lock(&self->guard);
}

void
shoal_oplog_guard_unlock(shoal_oplog_t *self)
{
    pthread_mutex_unlock(&self->guard);
}

uint64_t
shoal_oplog_kv_generation(shoal_oplog_t *self, const char *dataset)
{
    uint64_t *generation = (uint64_t *) zhashx_lookup(self->generations, dataset);
    return generation ? *generation : 0;
}

uint64_t
shoal_oplog_kv_generation_now(shoal_oplog_t *self, const char *dataset)
{
    shoal_oplog_guard_lock(self);
    uint64_t generation = shoal_oplog_kv_generation(self, dataset);
    shoal_oplog_guard_unlock(self);
    return generation;
}

//  Raises DATASET's kv generation: its kv is about to change. Called
//  holding the guard.
void
shoal_oplog_kv_touch(shoal_oplog_t *self, const char *dataset)
{
    uint64_t *generation = (uint64_t *) zhashx_lookup(self->generations, dataset);
    if (!generation) {
        generation = (uint64_t *) zmalloc(sizeof *generation);
        zhashx_insert(self->generations, dataset, generation);
    }
    (*generation)++;
}

bool
shoal_oplog_epoch(shoal_oplog_t *self, const char *dataset, shoal_oplog_epoch_fn **extract,
                  void **arg)
{
    oplog_epoch_t *epoch = (oplog_epoch_t *) zhashx_lookup(self->epochs, dataset);
    if (epoch) {
        *extract = epoch->extract;
        *arg = epoch->arg;
    }
    return epoch != NULL;
}

int
shoal_oplog_set_epoch(shoal_oplog_t *self, const char *dataset,
                      shoal_oplog_epoch_fn *extract, void *arg)
{
    assert(extract);
    oplog_epoch_t *epoch = (oplog_epoch_t *) malloc(sizeof(oplog_epoch_t));
    if (!epoch)
        return shoal_oplog_fail(self, "out of memory");
    epoch->extract = extract;
    epoch->arg = arg;
    zhashx_update(self->epochs, dataset, epoch);
    return 0;
}

// ---------------------------------------------------------------------------
//  Hashing: BLAKE2b-256 over a canonical encoding of the fields. Variable
//  fields are length-prefixed and integers are fixed-width big-endian, so no
//  two different entries encode alike (which the protobuf bytes do not
//  promise: field order and default values are the encoder's choice).

static void
s_hash_u64(crypto_generichash_state *state, uint64_t value)
{
    uint8_t bytes[sizeof(uint64_t)];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t) (value >> (OPLOG_BYTE_BITS * (sizeof bytes - 1 - i)));
    crypto_generichash_update(state, bytes, sizeof bytes);
}

static void
s_hash_bytes(crypto_generichash_state *state, const void *data, size_t size)
{
    s_hash_u64(state, size);
    if (size)
        crypto_generichash_update(state, data, size);
}

static void
s_hash_str(crypto_generichash_state *state, const char *text)
{
    s_hash_bytes(state, text, text ? strlen(text) : 0);
}

//  Writes VALUE big-endian at OUT; returns the byte after it.
static uint8_t *
s_put_u64(uint8_t *out, uint64_t value)
{
    for (size_t i = 0; i < sizeof(uint64_t); i++)
        out[i] = (uint8_t) (value >> (OPLOG_BYTE_BITS * (sizeof(uint64_t) - 1 - i)));
    return out + sizeof(uint64_t);
}

//  Writes SIZE bytes of DATA with their length before them at OUT; returns
//  the byte after them.
static uint8_t *
s_put_bytes(uint8_t *out, const void *data, size_t size)
{
    out = s_put_u64(out, size);
    if (size)
        memcpy(out, data, size);
    return out + size;
}

//  Lays out the hashed encoding of ENTRY (see shoal_oplog.h) in FLAT
//  (OPLOG_HASH_FLAT_MAX bytes) and returns its length, or 0 when it does
//  not fit: an entry of ordinary size is hashed in one call, and a dozen
//  small updates cost as much as the compressions.
static size_t
s_hash_flat(const shoal_oplog_entry_t *entry, uint8_t *flat)
{
    size_t domain = strlen(OPLOG_HASH_DOMAIN);
    size_t dataset = entry->dataset ? strlen(entry->dataset) : 0;
    size_t key = entry->key ? strlen(entry->key) : 0;
    size_t value = entry->value ? entry->value_size : 0;
    size_t node = entry->node ? strlen(entry->node) : 0;
    size_t prev = entry->has_prev ? SHOAL_HASH_SIZE : 0;
    size_t total = 9 * sizeof(uint64_t) + domain + dataset + key + value + node + prev;
    if (total > OPLOG_HASH_FLAT_MAX)
        return 0;
    uint8_t *out = s_put_bytes(flat, OPLOG_HASH_DOMAIN, domain);
    out = s_put_bytes(out, entry->dataset, dataset);
    out = s_put_bytes(out, entry->key, key);
    out = s_put_u64(out, (uint64_t) entry->op);
    out = s_put_bytes(out, entry->value, value);
    out = s_put_u64(out, entry->wall_ms);
    out = s_put_u64(out, entry->logic);
    out = s_put_bytes(out, entry->node, node);
    out = s_put_bytes(out, entry->prev_hash, prev);
    assert((size_t) (out - flat) == total);
    return total;
}

void
shoal_oplog_entry_hash(const shoal_oplog_entry_t *entry, uint8_t hash[SHOAL_HASH_SIZE])
{
    uint8_t flat[OPLOG_HASH_FLAT_MAX];
    size_t total = s_hash_flat(entry, flat);
    if (total) {
        crypto_generichash(hash, SHOAL_HASH_SIZE, flat, total, NULL, 0);
        return;
    }
    crypto_generichash_state state;
    crypto_generichash_init(&state, NULL, 0, SHOAL_HASH_SIZE);
    s_hash_str(&state, OPLOG_HASH_DOMAIN);
    s_hash_str(&state, entry->dataset);
    s_hash_str(&state, entry->key);
    s_hash_u64(&state, (uint64_t) entry->op);
    s_hash_bytes(&state, entry->value, entry->value ? entry->value_size : 0);
    s_hash_u64(&state, entry->wall_ms);
    s_hash_u64(&state, entry->logic);
    s_hash_str(&state, entry->node);
    //  A missing predecessor is the empty string, a present one its 32 bytes:
    //  the length prefix tells them apart.
    s_hash_bytes(&state, entry->prev_hash, entry->has_prev ? SHOAL_HASH_SIZE : 0);
    crypto_generichash_final(&state, hash, SHOAL_HASH_SIZE);
}

void
shoal_oplog_entry_hash_many(const shoal_oplog_entry_t *entries, size_t count,
                            uint8_t (*hashes)[SHOAL_HASH_SIZE])
{
    //  A group of encodings at a time, laid out side by side; one too long
    //  for its room is hashed alone.
    uint8_t flat[SHOAL_BLAKE2B_LANES_MAX][OPLOG_HASH_FLAT_MAX];
    const uint8_t *messages[SHOAL_BLAKE2B_LANES_MAX];
    size_t sizes[SHOAL_BLAKE2B_LANES_MAX], at[SHOAL_BLAKE2B_LANES_MAX];
    uint8_t grouped[SHOAL_BLAKE2B_LANES_MAX][SHOAL_HASH_SIZE];
    for (size_t first = 0; first < count; first += SHOAL_BLAKE2B_LANES_MAX) {
        size_t n = 0;
        for (size_t i = first; i < count && i < first + SHOAL_BLAKE2B_LANES_MAX; i++) {
            size_t size = s_hash_flat(&entries[i], flat[n]);
            if (size == 0) {
                shoal_oplog_entry_hash(&entries[i], hashes[i]);
                continue;
            }
            messages[n] = flat[n];
            sizes[n] = size;
            at[n++] = i;
        }
        shoal_blake2b_many(messages, sizes, n, grouped);
        for (size_t g = 0; g < n; g++)
            memcpy(hashes[at[g]], grouped[g], SHOAL_HASH_SIZE);
    }
}

// ---------------------------------------------------------------------------
//  Applying a set of entries (see DESIGN)

static shoal_hlc_stamp_t
s_entry_stamp(const shoal_oplog_entry_t *entry)
{
    shoal_hlc_stamp_t stamp = { entry->wall_ms, entry->logic };
    return stamp;
}

int
shoal_oplog_version_compare(const shoal_oplog_version_t *a, const shoal_oplog_version_t *b)
{
    if (a->epoch != b->epoch)
        return a->epoch < b->epoch ? -1 : 1;
    int order = shoal_hlc_compare(&a->stamp, &b->stamp);
    if (order == 0)
        order = strcmp(a->node, b->node);
    if (order == 0)
        order = memcmp(a->hash, b->hash, SHOAL_HASH_SIZE);
    return order;
}

static shoal_oplog_version_t
s_slot_version(const oplog_slot_t *slot)
{
    shoal_oplog_version_t version = {
        slot->epoch, s_entry_stamp(slot->entry), slot->entry->node, slot->entry->hash
    };
    return version;
}

static int
s_slot_compare_hash(const void *a_in, const void *b_in)
{
    const shoal_oplog_entry_t *a = ((const oplog_slot_t *) a_in)->entry;
    const shoal_oplog_entry_t *b = ((const oplog_slot_t *) b_in)->entry;
    int order = strcmp(a->dataset, b->dataset);
    return order ? order : memcmp(a->hash, b->hash, SHOAL_HASH_SIZE);
}

//  The order of oplog_by_hlc: (dataset, stamp, node, hash).
static int
s_slot_compare_hlc(const void *a_in, const void *b_in)
{
    const shoal_oplog_entry_t *a = ((const oplog_slot_t *) a_in)->entry;
    const shoal_oplog_entry_t *b = ((const oplog_slot_t *) b_in)->entry;
    int order = strcmp(a->dataset, b->dataset);
    if (order == 0) {
        shoal_hlc_stamp_t a_stamp = s_entry_stamp(a), b_stamp = s_entry_stamp(b);
        order = shoal_hlc_compare(&a_stamp, &b_stamp);
    }
    if (order == 0)
        order = strcmp(a->node, b->node);
    return order ? order : memcmp(a->hash, b->hash, SHOAL_HASH_SIZE);
}

static bool
s_slot_same_node(const oplog_slot_t *a, const oplog_slot_t *b)
{
    return strcmp(a->entry->dataset, b->entry->dataset) == 0
        && strcmp(a->entry->node, b->entry->node) == 0;
}

//  The order of oplog_by_node_hlc: (dataset, node, stamp, hash).
static int
s_slot_compare_node(const void *a_in, const void *b_in)
{
    const shoal_oplog_entry_t *a = ((const oplog_slot_t *) a_in)->entry;
    const shoal_oplog_entry_t *b = ((const oplog_slot_t *) b_in)->entry;
    int order = strcmp(a->dataset, b->dataset);
    if (order == 0)
        order = strcmp(a->node, b->node);
    if (order == 0) {
        shoal_hlc_stamp_t a_stamp = s_entry_stamp(a), b_stamp = s_entry_stamp(b);
        order = shoal_hlc_compare(&a_stamp, &b_stamp);
    }
    return order ? order : memcmp(a->hash, b->hash, SHOAL_HASH_SIZE);
}

static const char *
s_entry_key(const shoal_oplog_entry_t *entry)
{
    return entry->key ? entry->key : "";
}

static bool
s_slot_same_key(const oplog_slot_t *a, const oplog_slot_t *b)
{
    return strcmp(a->entry->dataset, b->entry->dataset) == 0
        && strcmp(s_entry_key(a->entry), s_entry_key(b->entry)) == 0;
}

static int
s_slot_compare_key(const void *a_in, const void *b_in)
{
    const oplog_slot_t *a = a_in, *b = b_in;
    int order = strcmp(a->entry->dataset, b->entry->dataset);
    if (order == 0)
        order = strcmp(s_entry_key(a->entry), s_entry_key(b->entry));
    if (order == 0) {
        shoal_oplog_version_t a_version = s_slot_version(a), b_version = s_slot_version(b);
        order = shoal_oplog_version_compare(&a_version, &b_version);
    }
    return order;
}

bool
shoal_oplog_links(const shoal_oplog_entry_t *entry, const shoal_oplog_tip_t *tip)
{
    if (!tip->has_tip)
        return !entry->has_prev;
    return entry->has_prev && memcmp(entry->prev_hash, tip->hash, SHOAL_HASH_SIZE) == 0;
}

int
shoal_oplog_check(shoal_oplog_t *self, const shoal_oplog_entry_t *entry,
                  const shoal_oplog_rules_t *rules, uint64_t *epoch, char *why, size_t why_size)
{
    const char *what = NULL;
    char detail[2 * OPLOG_HEX_SIZE + 128];
    shoal_hlc_stamp_t stamp = s_entry_stamp(entry);
    *epoch = 0;
    if (!entry->dataset || !*entry->dataset)
        what = "dataset is empty";
    else
    if (!entry->node || !*entry->node)
        what = "node is empty";
    else
    if (!shoal_oplog_op_name(entry->op)) {
        snprintf(detail, sizeof detail, "op %d is not put or delete", (int) entry->op);
        what = detail;
    }
    else
    if (rules->dataset && !streq(entry->dataset, rules->dataset))
        what = "it belongs to another dataset";
    else
    if (rules->node && !streq(entry->node, rules->node))
        what = "it belongs to another node's chain";
    if (!what && !rules->trusted) {
        uint8_t computed[SHOAL_HASH_SIZE];
        const uint8_t *hash = rules->hashed;
        if (!hash) {
            shoal_oplog_entry_hash(entry, computed);
            hash = computed;
        }
        if (memcmp(hash, entry->hash, SHOAL_HASH_SIZE) != 0) {
            char actual[OPLOG_HEX_SIZE];
            s_hex(hash, actual);
            snprintf(detail, sizeof detail, "its hash does not match its fields, which hash to "
                     "x'%s'", actual);
            what = detail;
        }
    }
    if (!what && rules->tip && !shoal_oplog_links(entry, rules->tip)) {
        if (rules->tip->has_tip) {
            char expected[OPLOG_HEX_SIZE];
            s_hex(rules->tip->hash, expected);
            snprintf(detail, sizeof detail, "it does not link to x'%s', the entry before it",
                     expected);
            what = detail;
        }
        else
            what = "it links to an entry that is not here (the chain must start at its first)";
    }
    if (!what && rules->tip && rules->tip->has_tip
    &&  shoal_hlc_compare(&stamp, &rules->tip->stamp) <= 0)
        what = "it is not stamped after the entry before it";
    if (!what && !rules->trusted && entry->wall_ms > rules->now_ms
    &&  entry->wall_ms - rules->now_ms > rules->max_ahead_ms) {
        snprintf(detail, sizeof detail, "its clock is %" PRIu64 " ms ahead of ours, more than "
                 "the %" PRIu64 " ms allowed", entry->wall_ms - rules->now_ms,
                 rules->max_ahead_ms);
        what = detail;
    }
    shoal_oplog_epoch_fn *extract;
    void *arg;
    if (!what && shoal_oplog_epoch(self, entry->dataset, &extract, &arg)
    &&  extract(entry->value, entry->value ? entry->value_size : 0, epoch, arg))
        what = "its value holds no epoch, which its dataset is ordered by";
    if (!what)
        return 0;
    snprintf(why, why_size, "%s", what);
    return -1;
}

//  Checks the entry in SLOT, number INDEX of COUNT, by RULES (see
//  shoal_oplog_check), and absorbs the stamp of an entry from elsewhere
//  into the clock.
static int
s_oplog_check_entry(shoal_oplog_t *self, oplog_slot_t *slot, size_t index, size_t count,
                    const shoal_oplog_rules_t *rules)
{
    const shoal_oplog_entry_t *entry = slot->entry;
    char why[OPLOG_CODEC_ERROR_MAX];
    if (shoal_oplog_check(self, entry, rules, &slot->epoch, why, sizeof why)) {
        char hex[OPLOG_HEX_SIZE];
        s_hex(entry->hash, hex);
        return shoal_oplog_fail(self, "entry %zu of %zu (x'%s', dataset \"%s\", node \"%s\", "
                            "%" PRIu64 ".%" PRIu32 ") refused: %s", index + 1, count, hex,
                            entry->dataset ? entry->dataset : "", entry->node ? entry->node : "",
                            entry->wall_ms, entry->logic, why);
    }
    shoal_hlc_stamp_t stamp = s_entry_stamp(entry);
    if (!rules->trusted && shoal_hlc_observe(self->hlc, &stamp)) {
        char hex[OPLOG_HEX_SIZE];
        s_hex(entry->hash, hex);
        return shoal_oplog_fail(self, "entry %zu of %zu (x'%s', node \"%s\"): %s", index + 1,
                            count, hex, entry->node, shoal_hlc_error(self->hlc));
    }
    return 0;
}

//  Marks the entries to skip: duplicates within the set and entries the
//  store already holds.
static int
s_oplog_apply_dedupe(shoal_oplog_t *self, oplog_slot_t *slots, size_t count)
{
    qsort(slots, count, sizeof *slots, s_slot_compare_hash);
    for (size_t i = 0; i < count; i++) {
        if (i > 0 && s_slot_compare_hash(&slots[i - 1], &slots[i]) == 0) {
            slots[i].skip = true;
            continue;
        }
        shoal_key_t key;
        shoal_oplog_key_by_hash(&key, slots[i].entry->dataset, slots[i].entry->hash);
        if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_HASH, &key, &slots[i].skip))
            return shoal_oplog_fail_store(self, "append: dedupe read");
    }
    return 0;
}

//  Adds each new entry, its locator and its index key to the batch; *ADDED
//  counts them. Each family's keys go in that family's key order (SLOTS
//  arrive sorted by hash, the order of oplog_by_hash): RocksDB inserts a
//  run of ascending keys into a memtable far faster than the same keys
//  shuffled, since each insert starts its search where the last one ended.
static int
s_oplog_apply_indexes(shoal_oplog_t *self, oplog_slot_t *slots, size_t count, size_t *added)
{
    *added = 0;
    shoal_key_t key;
    for (size_t i = 0; i < count; i++) {
        if (slots[i].skip)
            continue;
        //  Encoded here, written below in oplog_by_node_hlc's order.
        char error[OPLOG_CODEC_ERROR_MAX];
        if (shoal_oplog_entry_codec.encode(slots[i].entry, &slots[i].encoded,
                                           &slots[i].encoded_size, error, sizeof error)) {
            char hex[OPLOG_HEX_SIZE];
            s_hex(slots[i].entry->hash, hex);
            return shoal_oplog_fail(self, "append: entry x'%s' does not encode: %s", hex, error);
        }
        shoal_key_t locator;
        shoal_oplog_locator(&locator, slots[i].entry);
        shoal_oplog_key_by_hash(&key, slots[i].entry->dataset, slots[i].entry->hash);
        shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_HASH, &key, locator.bytes, locator.size);
        if (shoal_oplog_deltas_add(self, slots[i].entry->dataset, 1, 0))
            return -1;
        (*added)++;
    }
    if (*added == 0)
        return 0;
    qsort(slots, count, sizeof *slots, s_slot_compare_hlc);
    for (size_t i = 0; i < count; i++)
        if (!slots[i].skip) {
            shoal_oplog_key_by_hlc(&key, slots[i].entry);
            shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_HLC, &key, NULL, 0);
        }
    //  The heads step sorts the same way and finds the slots sorted already.
    qsort(slots, count, sizeof *slots, s_slot_compare_node);
    for (size_t i = 0; i < count; i++)
        if (!slots[i].skip) {
            shoal_oplog_key_by_node_hlc(&key, slots[i].entry);
            shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, slots[i].encoded,
                            slots[i].encoded_size);
        }
    return 0;
}

//  Moves the head of ENTRY's node to ENTRY if ENTRY is newer.
static int
s_oplog_head_advance(shoal_oplog_t *self, const shoal_oplog_entry_t *entry)
{
    shoal_key_t key;
    shoal_oplog_key_head(&key, entry->dataset, entry->node);
    shoal_head_record_t head;
    bool found;
    if (shoal_store_get_record(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                               &head, &found))
        return shoal_oplog_fail_store(self, "append: head read");
    shoal_hlc_stamp_t stamp = s_entry_stamp(entry);
    shoal_hlc_stamp_t head_stamp = { head.wall_ms, head.logic };
    if (found && shoal_hlc_compare(&stamp, &head_stamp) <= 0)
        return 0;
    head.wall_ms = entry->wall_ms;
    head.logic = entry->logic;
    memcpy(head.hash, entry->hash, SHOAL_HASH_SIZE);
    if (shoal_batch_put_record(self->batch, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                               &head))
        return shoal_oplog_fail_store(self, "append");
    return 0;
}

//  Calls APPLY for the last entry not skipped of every group of SLOTS (sorted
//  by COMPARE) in which SAME holds between neighbours: the newest entry of a
//  node, the winner for a key.
static int
s_oplog_apply_groups(shoal_oplog_t *self, oplog_slot_t *slots, size_t count,
                     int (*compare) (const void *, const void *),
                     bool (*same) (const oplog_slot_t *, const oplog_slot_t *),
                     int (*apply) (shoal_oplog_t *, const oplog_slot_t *))
{
    qsort(slots, count, sizeof *slots, compare);
    size_t start = 0;
    while (start < count) {
        size_t end = start + 1;
        while (end < count && same(&slots[start], &slots[end]))
            end++;
        const oplog_slot_t *last = NULL;
        for (size_t i = start; i < end; i++)
            if (!slots[i].skip)
                last = &slots[i];
        if (last && apply(self, last))
            return -1;
        start = end;
    }
    return 0;
}

static int
s_oplog_apply_head(shoal_oplog_t *self, const oplog_slot_t *slot)
{
    return s_oplog_head_advance(self, slot->entry);
}

//  Makes SLOT's entry the state of its key if it wins (shoal_oplog_kv.c).
static int
s_oplog_apply_kv(shoal_oplog_t *self, const oplog_slot_t *slot)
{
    return shoal_oplog_kv_apply(self, slot->entry, slot->epoch);
}

//  Applies COUNT entries in one write (see DESIGN). LOCAL entries were made
//  by this node a moment ago: their hash and clock need no check. With a
//  TIP, the entries are a run of one chain that must follow it, each
//  linking to the one before. *ADDED (may be NULL) counts the entries that
//  were new.
static int
s_oplog_apply(shoal_oplog_t *self, const shoal_oplog_entry_t *entries, size_t count,
              bool local, const shoal_oplog_tip_t *tip, size_t *added_p)
{
    if (added_p)
        *added_p = 0;
    if (count == 0)
        return 0;
    oplog_slot_t *slots = (oplog_slot_t *) calloc(count, sizeof(oplog_slot_t));
    if (!slots)
        return shoal_oplog_fail(self, "out of memory for %zu entries", count);
    shoal_oplog_tip_t link = { 0 };
    shoal_oplog_rules_t rules = {
        .dataset = tip ? entries[0].dataset : NULL,
        .node = tip ? entries[0].node : NULL,
        .tip = tip ? &link : NULL,
        .trusted = local,
        .now_ms = shoal_hlc_physical(self->hlc),
        .max_ahead_ms = self->max_ahead_ms,
    };
    if (tip)
        link = *tip;
    //  Entries from elsewhere have their hashes checked, computed together
    //  (shoal_oplog_entry_hash_many).
    uint8_t (*hashes)[SHOAL_HASH_SIZE] = NULL;
    if (!local) {
        hashes = (uint8_t (*)[SHOAL_HASH_SIZE]) malloc(count * sizeof *hashes);
        if (!hashes) {
            free(slots);
            return shoal_oplog_fail(self, "out of memory for %zu entries", count);
        }
        shoal_oplog_entry_hash_many(entries, count, hashes);
    }
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        slots[i].entry = &entries[i];
        rules.hashed = hashes ? hashes[i] : NULL;
        rc = s_oplog_check_entry(self, &slots[i], i, count, &rules);
        if (rc == 0 && tip) {
            link.has_tip = true;
            memcpy(link.hash, entries[i].hash, SHOAL_HASH_SIZE);
            link.stamp = s_entry_stamp(&entries[i]);
        }
    }
    size_t added = 0;
    if (rc == 0)
        rc = s_oplog_apply_dedupe(self, slots, count);
    if (rc == 0)
        rc = s_oplog_apply_indexes(self, slots, count, &added);
    //  Heads and kv are read and written under the guard: a bulk load may
    //  be moving them at the same time.
    if (rc == 0 && added) {
        shoal_oplog_guard_lock(self);
        rc = s_oplog_apply_groups(self, slots, count, s_slot_compare_node, s_slot_same_node,
                                  s_oplog_apply_head);
        if (rc == 0)
            rc = s_oplog_apply_groups(self, slots, count, s_slot_compare_key, s_slot_same_key,
                                      s_oplog_apply_kv);
        if (rc == 0)
            rc = s_deltas_put(self);
        if (rc == 0 && shoal_store_write(self->store, self->batch, self->sync))
            rc = shoal_oplog_fail_store(self, "append");
        shoal_oplog_guard_unlock(self);
    }
    zhashx_purge(self->deltas);
    shoal_batch_clear(self->batch);
    for (size_t i = 0; i < count; i++)
        free(slots[i].encoded);
    free(slots);
    free(hashes);
    if (rc == 0 && added_p)
        *added_p = added;
    return rc;
}

int
shoal_oplog_append(shoal_oplog_t *self, const shoal_oplog_entry_t *entry, bool *added)
{
    size_t count;
    int rc = s_oplog_apply(self, entry, 1, false, NULL, &count);
    if (added)
        *added = rc == 0 && count == 1;
    return rc;
}

int
shoal_oplog_append_batch(shoal_oplog_t *self, const shoal_oplog_entry_t *entries,
                         size_t count, size_t *added)
{
    return s_oplog_apply(self, entries, count, false, NULL, added);
}

int
shoal_oplog_append_chain(shoal_oplog_t *self, const shoal_oplog_entry_t *entries,
                         size_t count, size_t *added, bool *gap)
{
    *added = 0;
    *gap = false;
    if (count == 0)
        return 0;
    const shoal_oplog_entry_t *first = &entries[0];
    if (!first->dataset || !first->node)
        return shoal_oplog_fail(self, "a chain of %zu entries: its first has no dataset or node",
                            count);
    shoal_oplog_head_t head;
    bool has_head;
    if (shoal_oplog_head(self, first->dataset, first->node, &head, &has_head))
        return -1;
    shoal_oplog_tip_t tip = { .has_tip = has_head };
    if (has_head) {
        memcpy(tip.hash, head.hash, SHOAL_HASH_SIZE);
        tip.stamp = head.stamp;
        free(head.node);
    }
    //  Held: stamped at or before our head, and here. Only a run that does
    //  not link to the head is looked up: one that does holds nothing.
    size_t skip = 0;
    while (skip < count && has_head && !shoal_oplog_links(&entries[skip], &tip)) {
        shoal_hlc_stamp_t stamp = s_entry_stamp(&entries[skip]);
        if (shoal_hlc_compare(&stamp, &tip.stamp) > 0 || !entries[skip].dataset
        ||  !streq(entries[skip].dataset, first->dataset))
            break;
        shoal_key_t key;
        shoal_oplog_key_by_hash(&key, first->dataset, entries[skip].hash);
        bool held;
        if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_HASH, &key, &held))
            return shoal_oplog_fail_store(self, "append chain: held read");
        if (!held)
            break;
        skip++;
    }
    if (skip == count)
        return 0;
    if (!shoal_oplog_links(&entries[skip], &tip)) {
        *gap = true;
        return 0;
    }
    return s_oplog_apply(self, entries + skip, count - skip, false, &tip, added);
}

int
shoal_oplog_head(shoal_oplog_t *self, const char *dataset, const char *node,
                 shoal_oplog_head_t *head, bool *found)
{
    *found = false;
    memset(head, 0, sizeof *head);
    shoal_key_t key;
    shoal_oplog_key_head(&key, dataset, node);
    shoal_head_record_t record;
    if (shoal_store_get_record(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                               &record, found))
        return shoal_oplog_fail_store(self, "head read");
    if (!*found)
        return 0;
    head->node = strdup(node);
    if (!head->node) {
        *found = false;
        return shoal_oplog_fail(self, "out of memory");
    }
    head->stamp.wall_ms = record.wall_ms;
    head->stamp.logic = record.logic;
    memcpy(head->hash, record.hash, SHOAL_HASH_SIZE);
    return 0;
}

int
shoal_oplog_write(shoal_oplog_t *self, const char *dataset, const char *key,
                  shoal_oplog_op_t op, const void *value, size_t size,
                  shoal_oplog_entry_t *entry_out)
{
    if (entry_out)
        memset(entry_out, 0, sizeof *entry_out);
    if (!self->node || !*self->node)
        return shoal_oplog_fail(self, "write to \"%s\": this oplog was opened without a node id",
                            dataset);
    shoal_hlc_stamp_t stamp;
    if (shoal_hlc_now(self->hlc, &stamp))
        return shoal_oplog_fail(self, "write to \"%s\": %s", dataset, shoal_hlc_error(self->hlc));
    shoal_oplog_head_t head;
    bool has_head;
    if (shoal_oplog_head(self, dataset, self->node, &head, &has_head))
        return -1;
    //  The entry borrows the caller's strings and value for the call: they
    //  are read, hashed and encoded, never written or freed.
    shoal_oplog_entry_t entry = {
        .dataset = (char *) dataset,
        .key = (char *) key,
        .op = op,
        .value = (uint8_t *) value,
        .value_size = value ? size : 0,
        .wall_ms = stamp.wall_ms,
        .logic = stamp.logic,
        .node = self->node,
        .has_prev = has_head,
    };
    if (has_head) {
        memcpy(entry.prev_hash, head.hash, SHOAL_HASH_SIZE);
        free(head.node);
    }
    shoal_oplog_entry_hash(&entry, entry.hash);
    if (s_oplog_apply(self, &entry, 1, true, NULL, NULL))
        return -1;
    if (entry_out && shoal_oplog_entry_copy(entry_out, &entry))
        return shoal_oplog_fail(self, "out of memory");
    return 0;
}

// ---------------------------------------------------------------------------
//  Reads

bool
shoal_oplog_is_locator(const uint8_t *value, size_t size)
{
    return size > 0 && value[0] == SHOAL_KEY_TAG_STRING;
}

//  Fails naming KEY of CF and WHAT is wrong with it. Returns -1.
static int
s_oplog_fail_at(shoal_oplog_t *self, shoal_cf_t cf, const uint8_t *key, size_t size, const char *what)
{
    char *text = shoal_key_format(key, size);
    shoal_oplog_fail(self, "%s %s %s", shoal_cf_name(cf), text ? text : "(?)", what);
    free(text);
    return -1;
}

//  The bytes of the entry HASH of DATASET whose oplog_by_node_hlc value is
//  empty, as a store of layout 1 may hold it: its oplog_by_hash value is
//  the entry (or, once migrated, locates it). Returns the bytes (the
//  caller frees them) in *BYTES, or -1 naming what is missing.
static int
s_oplog_read_twice_stored(shoal_oplog_t *self, const char *dataset, const uint8_t *hash,
                          uint8_t **bytes, size_t *size)
{
    *bytes = NULL;
    shoal_key_t key;
    shoal_oplog_key_by_hash(&key, dataset, hash);
    uint8_t *value;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_BY_HASH, &key, &value, size))
        return shoal_oplog_fail_store(self, "entry read");
    if (value && shoal_oplog_is_locator(value, *size)) {
        //  Migrated since the caller read the empty value.
        shoal_key_t located;
        int rc = shoal_oplog_key_located(&located, dataset, hash, value, *size);
        free(value);
        value = NULL;
        if (rc == 0 && shoal_store_get(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &located, &value, size))
            return shoal_oplog_fail_store(self, "entry read");
    }
    if (!value || *size == 0) {
        free(value);
        return s_oplog_fail_at(self, SHOAL_CF_OPLOG_BY_HASH, key.bytes, key.size,
                               "is missing or empty, where layout 1 stores the entry its empty "
                               "oplog_by_node_hlc value names");
    }
    *bytes = value;
    return 0;
}

//  Decodes the SIZE BYTES of the entry at KEY of CF into ENTRY, which
//  must be the entry HASH (NULL: not checked). Returns 0 or -1.
static int
s_oplog_decode_at(shoal_oplog_t *self, shoal_cf_t cf, const uint8_t *key, size_t key_size,
                  const uint8_t *bytes, size_t size, const uint8_t *hash, shoal_oplog_entry_t *entry)
{
    char why[OPLOG_CODEC_ERROR_MAX];
    if (shoal_oplog_entry_codec.decode(bytes, size, entry, why, sizeof why)) {
        char *text = shoal_key_format(key, key_size);
        shoal_oplog_fail(self, "%s %s: the value does not decode: %s", shoal_cf_name(cf),
                         text ? text : "(?)", why);
        free(text);
        return -1;
    }
    if (!hash || memcmp(entry->hash, hash, SHOAL_HASH_SIZE) == 0)
        return 0;
    shoal_oplog_entry_codec.clear(entry);
    return s_oplog_fail_at(self, cf, key, key_size, "holds another entry than its key names");
}

//  Decodes the entry HASH of DATASET whose oplog_by_node_hlc value at KEY
//  is the SIZE bytes VALUE, or empty (layout 1: read from oplog_by_hash).
static int
s_oplog_decode_stored(shoal_oplog_t *self, const char *dataset, const uint8_t *hash,
                      const uint8_t *key, size_t key_size, const uint8_t *value, size_t size,
                      shoal_oplog_entry_t *entry)
{
    if (size > 0 || !self->migration.migrating)
        return s_oplog_decode_at(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, value, size,
                                 hash, entry);
    uint8_t *bytes;
    if (s_oplog_read_twice_stored(self, dataset, hash, &bytes, &size))
        return -1;
    int rc = s_oplog_decode_at(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, bytes, size, hash,
                               entry);
    free(bytes);
    return rc;
}

//  Reads the entry HASH of DATASET at KEY of oplog_by_node_hlc, which the
//  index key WHERE of CF names (a locator or an oplog_by_hlc key), into
//  ENTRY. An index whose entry is gone is an error: reconcile repairs that.
static int
s_oplog_read_located(shoal_oplog_t *self, shoal_cf_t cf, const shoal_key_t *where,
                     const char *dataset, const uint8_t *hash, const shoal_key_t *key,
                     shoal_oplog_entry_t *entry)
{
    uint8_t *value;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, key, &value, &size))
        return shoal_oplog_fail_store(self, "entry read");
    //  Layout 1 may lack the key where a bulk load was cut: oplog_by_hash
    //  holds the entry then.
    if (!value)
        size = 0;
    if (value || self->migration.migrating) {
        int rc = s_oplog_decode_stored(self, dataset, hash, key->bytes, key->size, value, size,
                                       entry);
        free(value);
        return rc;
    }
    return s_oplog_fail_at(self, cf, where->bytes, where->size, "names an entry that is not in "
                           "oplog_by_node_hlc (reconcile repairs this)");
}

int
shoal_oplog_get(shoal_oplog_t *self, const char *dataset, const uint8_t *hash,
                shoal_oplog_entry_t *entry, bool *found)
{
    *found = false;
    shoal_key_t key;
    shoal_oplog_key_by_hash(&key, dataset, hash);
    uint8_t *locator;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_BY_HASH, &key, &locator, &size))
        return shoal_oplog_fail_store(self, "entry read");
    if (!locator)
        return 0;
    int rc;
    if (self->migration.migrating && !shoal_oplog_is_locator(locator, size)) {
        //  Layout 1, not migrated yet: the value is the entry.
        rc = s_oplog_decode_at(self, SHOAL_CF_OPLOG_BY_HASH, key.bytes, key.size, locator, size,
                               hash, entry);
        free(locator);
        *found = rc == 0;
        return rc;
    }
    shoal_key_t located;
    rc = shoal_oplog_key_located(&located, dataset, hash, locator, size);
    free(locator);
    if (rc)
        return s_oplog_fail_at(self, SHOAL_CF_OPLOG_BY_HASH, key.bytes, key.size,
                               "holds a value that is not a locator (node, wall, logic)");
    rc = s_oplog_read_located(self, SHOAL_CF_OPLOG_BY_HASH, &key, dataset, hash, &located, entry);
    *found = rc == 0;
    return rc;
}

//  Appends the entry that the oplog_by_hlc key WHERE names (DATASET, STAMP,
//  NODE, HASH, parsed) to LIST: one point read, since the key holds every
//  element of the entry's key in oplog_by_node_hlc.
static int
s_oplog_list_push(shoal_oplog_t *self, const char *dataset, const char *node,
                  shoal_hlc_stamp_t stamp, const uint8_t *hash, const shoal_key_t *where,
                  shoal_oplog_list_t *list)
{
    shoal_oplog_entry_t *entry = (shoal_oplog_entry_t *) shoal_oplog_array_push(
        (void **) &list->entries, &list->count, &list->capacity, sizeof(shoal_oplog_entry_t));
    if (!entry)
        return shoal_oplog_fail(self, "out of memory");
    shoal_key_t key;
    shoal_oplog_key_by_node_hlc_of(&key, dataset, node, stamp.wall_ms, stamp.logic, hash);
    if (s_oplog_read_located(self, SHOAL_CF_OPLOG_BY_HLC, where, dataset, hash, &key, entry) == 0)
        return 0;
    list->count--;
    return -1;
}

//  Appends the entry at ITER's key of oplog_by_node_hlc, which must be the
//  entry HASH of DATASET.
static int
s_oplog_list_push_stored(shoal_oplog_t *self, shoal_iter_t *iter, const char *dataset,
                         const uint8_t *hash, shoal_oplog_list_t *list)
{
    shoal_oplog_entry_t *entry = (shoal_oplog_entry_t *) shoal_oplog_array_push(
        (void **) &list->entries, &list->count, &list->capacity, sizeof(shoal_oplog_entry_t));
    if (!entry)
        return shoal_oplog_fail(self, "out of memory");
    size_t size, value_size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    const uint8_t *value = shoal_iter_value(iter, &value_size);
    if (s_oplog_decode_stored(self, dataset, hash, bytes, size, value, value_size, entry)) {
        list->count--;
        return -1;
    }
    return 0;
}

//  The error of an iteration that ended early, or 0.
int
shoal_oplog_iter_status(shoal_oplog_t *self, shoal_iter_t *iter, const char *what)
{
    return shoal_iter_status(iter) ? shoal_oplog_fail_store(self, what) : 0;
}

//  Walks CF (oplog_by_hlc, or oplog_by_node_hlc where the entries are) from
//  the first key above FROM (everything under it skipped; NULL: from the
//  start) to the end of PREFIX, and pushes each key's entry, at most LIMIT.
static int
s_oplog_scan(shoal_oplog_t *self, shoal_cf_t cf, const char *dataset, const shoal_key_t *prefix,
             const shoal_key_t *from, size_t limit, shoal_oplog_list_t *list)
{
    shoal_oplog_list_clear(list);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, cf, prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "scan");
    bool on_key;
    if (from) {
        shoal_key_t start;
        shoal_key_prefix_end(from, &start);
        on_key = shoal_iter_seek(iter, &start);
    }
    else
        on_key = shoal_iter_first(iter);
    int rc = 0;
    while (on_key && rc == 0 && (limit == 0 || list->count < limit)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE], other[OPLOG_NAME_SIZE];
        shoal_hlc_stamp_t stamp;
        uint8_t hash[SHOAL_HASH_SIZE];
        int parsed = cf == SHOAL_CF_OPLOG_BY_HLC
                   ? shoal_oplog_parse_by_hlc(bytes, size, name, &stamp, other, hash)
                   : shoal_oplog_parse_by_node_hlc(bytes, size, name, other, &stamp, hash);
        if (parsed)
            rc = shoal_oplog_fail_key(self, cf, bytes, size);
        else
        if (cf == SHOAL_CF_OPLOG_BY_NODE_HLC)
            rc = s_oplog_list_push_stored(self, iter, name, hash, list);
        else {
            shoal_key_t where;
            shoal_oplog_key_raw(&where, bytes, size);
            rc = s_oplog_list_push(self, name, other, stamp, hash, &where, list);
        }
        on_key = shoal_iter_next(iter);
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "scan");
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_oplog_list_clear(list);
    return rc;
}

int
shoal_oplog_after(shoal_oplog_t *self, const char *dataset,
                  const shoal_hlc_stamp_t *after, const char *after_node,
                  size_t limit, shoal_oplog_list_t *list)
{
    shoal_key_t prefix, from;
    shoal_oplog_key_dataset(&prefix, dataset);
    if (after) {
        shoal_oplog_key_dataset(&from, dataset);
        shoal_key_add_u64(&from, after->wall_ms);
        shoal_key_add_u64(&from, after->logic);
        if (after_node)
            shoal_key_add_str(&from, after_node);
    }
    return s_oplog_scan(self, SHOAL_CF_OPLOG_BY_HLC, dataset, &prefix, after ? &from : NULL,
                        limit, list);
}

int
shoal_oplog_node_after(shoal_oplog_t *self, const char *dataset, const char *node,
                       const shoal_hlc_stamp_t *after, size_t limit,
                       shoal_oplog_list_t *list)
{
    shoal_key_t prefix, from;
    shoal_oplog_key_head(&prefix, dataset, node);
    if (after) {
        shoal_oplog_key_head(&from, dataset, node);
        shoal_key_add_u64(&from, after->wall_ms);
        shoal_key_add_u64(&from, after->logic);
    }
    return s_oplog_scan(self, SHOAL_CF_OPLOG_BY_NODE_HLC, dataset, &prefix,
                        after ? &from : NULL, limit, list);
}

//  Seeks ITER (over NODE's keys in oplog_by_node_hlc) to the first entry
//  stamped after AFTER (NULL: the first). Returns whether it is on a key.
static bool
s_oplog_seek_after(shoal_iter_t *iter, const char *dataset, const char *node,
                   const shoal_hlc_stamp_t *after)
{
    if (!after)
        return shoal_iter_first(iter);
    //  The first key past every entry stamped AFTER: the next stamp.
    bool last_logic = after->logic == UINT32_MAX;
    shoal_key_t from;
    shoal_oplog_key_head(&from, dataset, node);
    shoal_key_add_u64(&from, last_logic ? after->wall_ms + 1 : after->wall_ms);
    shoal_key_add_u64(&from, last_logic ? 0 : (uint64_t) after->logic + 1);
    return shoal_iter_seek(iter, &from);
}

//  Reads the stamp out of KEY, a key of oplog_by_node_hlc under the
//  PREFIX_SIZE bytes of its (dataset, node) prefix: two u64 elements there.
static int
s_stamp_after_prefix(const uint8_t *key, size_t size, size_t prefix_size, shoal_hlc_stamp_t *stamp)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key + prefix_size, size - prefix_size);
    return s_read_stamp(&reader, stamp);
}

//  A page's buffers are first sized to its limits, up to these: pages are
//  most often filled to a limit (every page of a catch-up but its last), and
//  growing from small by doubling copied each page's bytes about once more.
//  Memory reserved and not used is never touched.
#define OPLOG_PAGE_FIRST_ENTRIES_MAX 16384
#define OPLOG_PAGE_FIRST_BYTES_MAX (4 * 1024 * 1024)

//  Makes room in PAGE for one more entry of SIZE bytes, within a page of
//  MAX_ENTRIES entries and MAX_BYTES bytes (one entry may pass it). Returns
//  0 or -1.
static int
s_page_reserve(shoal_oplog_page_t *page, size_t size, size_t max_entries, size_t max_bytes)
{
    if (page->count == page->capacity) {
        size_t first = max_entries < OPLOG_PAGE_FIRST_ENTRIES_MAX ? max_entries : OPLOG_PAGE_FIRST_ENTRIES_MAX;
        size_t grown = page->capacity ? page->capacity * 2 : first > 0 ? first : OPLOG_LIST_MIN;
        size_t *sizes = (size_t *) realloc(page->sizes, grown * sizeof(size_t));
        if (!sizes)
            return -1;
        page->sizes = sizes;
        page->capacity = grown;
    }
    if (page->used + size > page->allocated) {
        size_t first = max_bytes < OPLOG_PAGE_FIRST_BYTES_MAX ? max_bytes : OPLOG_PAGE_FIRST_BYTES_MAX;
        size_t grown = page->allocated ? page->allocated * 2 : first > 0 ? first : OPLOG_LIST_MIN * OPLOG_LIST_MIN;
        while (grown < page->used + size)
            grown *= 2;
        uint8_t *bytes = (uint8_t *) realloc(page->bytes, grown);
        if (!bytes)
            return -1;
        page->bytes = bytes;
        page->allocated = grown;
    }
    return 0;
}

int
shoal_oplog_node_page(shoal_oplog_t *self, const char *dataset, const char *node,
                      const shoal_hlc_stamp_t *after, size_t max_entries, size_t max_bytes,
                      shoal_oplog_page_t *page)
{
    shoal_oplog_page_clear(page);
    shoal_key_t prefix;
    shoal_oplog_key_head(&prefix, dataset, node);
    shoal_iter_t *iter = shoal_iter_prefix_walk(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "page");
    int rc = 0;
    bool on_key = s_oplog_seek_after(iter, dataset, node, after);
    for (; on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        size_t size, value_size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        //  Only the stamp is read out of the key, after the prefix it shares
        //  with every key of the walk. The entry is the value, as stored.
        shoal_hlc_stamp_t stamp;
        if (size < prefix.size || s_stamp_after_prefix(bytes, size, prefix.size, &stamp)) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_NODE_HLC, bytes, size);
            break;
        }
        uint8_t *twice = NULL;
        if (value_size == 0 && self->migration.migrating) {
            //  Layout 1, not migrated yet: oplog_by_hash holds the entry.
            char name[OPLOG_NAME_SIZE], origin[OPLOG_NAME_SIZE];
            shoal_hlc_stamp_t ignored;
            uint8_t hash[SHOAL_HASH_SIZE];
            rc = shoal_oplog_parse_by_node_hlc(bytes, size, name, origin, &ignored, hash)
               ? shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_NODE_HLC, bytes, size)
               : s_oplog_read_twice_stored(self, dataset, hash, &twice, &value_size);
            if (rc)
                break;
            value = twice;
        }
        if (value_size == 0) {
            char *text = shoal_key_format(bytes, size);
            rc = shoal_oplog_fail(self, "oplog_by_node_hlc %s holds no entry", text ? text : "(?)");
            free(text);
            break;
        }
        if (page->count >= max_entries || (page->count > 0 && page->used + value_size > max_bytes)) {
            free(twice);
            page->more = true;
            break;
        }
        if (s_page_reserve(page, value_size, max_entries, max_bytes)) {
            free(twice);
            rc = shoal_oplog_fail(self, "out of memory");
            break;
        }
        memcpy(page->bytes + page->used, value, value_size);
        free(twice);
        page->used += value_size;
        page->sizes[page->count++] = value_size;
        page->last = stamp;
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "page");
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_oplog_page_clear(page);
    return rc;
}

int64_t
shoal_oplog_node_count_after(shoal_oplog_t *self, const char *dataset, const char *node,
                             const shoal_hlc_stamp_t *after, size_t limit)
{
    //  No point read per entry: it runs on the reactor while a peer catches
    //  up. (The walk still reads the entries, which oplog_by_node_hlc holds;
    //  the caller bounds it.)
    shoal_key_t prefix;
    shoal_oplog_key_head(&prefix, dataset, node);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "count");
    bool on_key = s_oplog_seek_after(iter, dataset, node, after);
    int64_t count = 0;
    for (; on_key && (limit == 0 || (size_t) count < limit); on_key = shoal_iter_next(iter))
        count++;
    int rc = shoal_oplog_iter_status(self, iter, "count");
    shoal_iter_destroy(&iter);
    return rc ? -1 : count;
}

int
shoal_oplog_export(shoal_oplog_t *self, const char *dataset, shoal_oplog_list_t *list)
{
    return shoal_oplog_after(self, dataset, NULL, NULL, 0, list);
}

int
shoal_oplog_heads(shoal_oplog_t *self, const char *dataset, shoal_oplog_heads_t *heads)
{
    shoal_oplog_heads_clear(heads);
    shoal_key_t prefix;
    shoal_oplog_key_dataset(&prefix, dataset);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "heads");
    int rc = 0;
    for (bool on_key = shoal_iter_first(iter); on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
        shoal_head_record_t record;
        if (shoal_oplog_parse_pair(bytes, size, name, node))
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_NODE_HEAD, bytes, size);
        else
        if (shoal_iter_record(iter, &shoal_head_codec, &record))
            rc = shoal_oplog_fail_store(self, "heads");
        else {
            shoal_oplog_head_t *head = (shoal_oplog_head_t *) shoal_oplog_array_push(
                (void **) &heads->heads, &heads->count, &heads->capacity,
                sizeof(shoal_oplog_head_t));
            if (head)
                head->node = strdup(node);
            if (!head || !head->node) {
                if (head)
                    heads->count--;
                rc = shoal_oplog_fail(self, "out of memory");
            }
            else {
                head->stamp.wall_ms = record.wall_ms;
                head->stamp.logic = record.logic;
                memcpy(head->hash, record.hash, SHOAL_HASH_SIZE);
            }
        }
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "heads");
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_oplog_heads_clear(heads);
    return rc;
}

//  Whether ENTRY links to PREV (NULL: it is a chain's first).
static bool
s_links_to(const shoal_oplog_entry_t *entry, const uint8_t *prev)
{
    shoal_oplog_tip_t tip = { .has_tip = prev != NULL };
    if (prev)
        memcpy(tip.hash, prev, SHOAL_HASH_SIZE);
    return shoal_oplog_links(entry, &tip);
}

int
shoal_oplog_chain_range(shoal_oplog_t *self, const char *dataset, const uint8_t *start,
                        const uint8_t *end, shoal_oplog_list_t *list)
{
    shoal_oplog_list_clear(list);
    if (start && memcmp(start, end, SHOAL_HASH_SIZE) == 0)
        return 0;
    char end_hex[OPLOG_HEX_SIZE];
    s_hex(end, end_hex);
    shoal_oplog_entry_t last;
    bool found;
    if (shoal_oplog_get(self, dataset, end, &last, &found))
        return -1;
    if (!found)
        return shoal_oplog_fail(self, "chain range of \"%s\": end x'%s' is not in the log",
                            dataset, end_hex);
    shoal_hlc_stamp_t end_stamp = s_entry_stamp(&last);
    //  The walk goes through END's node's entries in stamp order (its
    //  chain, as oplog_by_node_hlc holds it), from START's stamp on when
    //  START is here, else from the node's first entry kept: a pruned
    //  START is found by the entry that names it. Each entry then links to
    //  the one before; past END's stamp the chain is broken.
    shoal_hlc_stamp_t after = { 0, 0 };
    bool has_after = false, skipping = false;
    int rc = 0;
    if (start) {
        shoal_oplog_entry_t first;
        rc = shoal_oplog_get(self, dataset, start, &first, &found);
        if (rc == 0 && found && strcmp(first.node, last.node) == 0) {
            after = s_entry_stamp(&first);
            has_after = true;
        }
        skipping = rc == 0 && !found;
        if (rc == 0 && found)
            shoal_oplog_entry_codec.clear(&first);
    }
    uint8_t prev[SHOAL_HASH_SIZE], before[SHOAL_HASH_SIZE];
    //  DONE: END reached. BROKEN: an entry past END's stamp, or one that
    //  does not link on, ends the walk short of it.
    bool has_prev = start != NULL, has_before = false, done = false, broken = false;
    if (start)
        memcpy(prev, start, SHOAL_HASH_SIZE);
    shoal_oplog_list_t page = { 0 };
    while (rc == 0 && !done && !broken) {
        rc = shoal_oplog_node_after(self, dataset, last.node, has_after ? &after : NULL,
                                    OPLOG_CHAIN_PAGE, &page);
        if (rc || page.count == 0)
            break;
        shoal_hlc_stamp_t page_last = s_entry_stamp(&page.entries[page.count - 1]);
        bool more = page.count == OPLOG_CHAIN_PAGE;
        for (size_t i = 0; i < page.count && rc == 0 && !done && !broken; i++) {
            shoal_oplog_entry_t *entry = &page.entries[i];
            shoal_hlc_stamp_t stamp = s_entry_stamp(entry);
            bool links = s_links_to(entry, has_prev ? prev : NULL);
            broken = shoal_hlc_compare(&stamp, &end_stamp) > 0 || (!links && !skipping);
            if (broken && has_before && s_links_to(entry, before)) {
                char hex[OPLOG_HEX_SIZE];
                s_hex(before, hex);
                rc = shoal_oplog_fail(self, "dataset \"%s\": the chain of node \"%s\" forks after "
                                  "x'%s'", dataset, last.node, hex);
            }
            if (broken || !links)
                continue;
            skipping = false;
            shoal_oplog_entry_t *slot = (shoal_oplog_entry_t *) shoal_oplog_array_push(
                (void **) &list->entries, &list->count, &list->capacity, sizeof(shoal_oplog_entry_t));
            if (!slot) {
                rc = shoal_oplog_fail(self, "out of memory");
                break;
            }
            //  The entry moves to LIST: PAGE keeps an empty one.
            *slot = *entry;
            memset(entry, 0, sizeof *entry);
            has_before = has_prev;
            if (has_prev)
                memcpy(before, prev, SHOAL_HASH_SIZE);
            memcpy(prev, slot->hash, SHOAL_HASH_SIZE);
            has_prev = true;
            done = memcmp(slot->hash, end, SHOAL_HASH_SIZE) == 0;
        }
        if (rc || done || broken || !more)
            break;
        after = page_last;
        has_after = true;
    }
    shoal_oplog_list_clear(&page);
    if (rc == 0 && !done) {
        char prev_hex[OPLOG_HEX_SIZE] = "";
        if (has_prev)
            s_hex(prev, prev_hex);
        rc = shoal_oplog_fail(self, "chain range of \"%s\" to x'%s' is broken: no entry of "
                          "node \"%s\" leads on from x'%s'", dataset, end_hex, last.node, prev_hex);
    }
    shoal_oplog_entry_codec.clear(&last);
    if (rc)
        shoal_oplog_list_clear(list);
    return rc;
}

// ---------------------------------------------------------------------------
//  Import, merge, drop

int
shoal_oplog_merge(shoal_oplog_t *self, const shoal_oplog_entry_t *entries, size_t count,
                  size_t *added_p)
{
    size_t added = 0;
    int rc = 0;
    for (size_t start = 0; start < count && rc == 0; start += SHOAL_OPLOG_IMPORT_BATCH) {
        size_t chunk = count - start < SHOAL_OPLOG_IMPORT_BATCH ? count - start
                                                                : SHOAL_OPLOG_IMPORT_BATCH;
        size_t chunk_added;
        rc = s_oplog_apply(self, entries + start, chunk, false, NULL, &chunk_added);
        added += rc == 0 ? chunk_added : 0;
    }
    if (added_p)
        *added_p = added;
    return rc;
}

int
shoal_oplog_import(shoal_oplog_t *self, const shoal_oplog_entry_t *entries, size_t count)
{
    return shoal_oplog_merge(self, entries, count, NULL);
}

int
shoal_oplog_drop(shoal_oplog_t *self, const char *dataset)
{
    static const shoal_cf_t families[] = {
        SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
        SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
    };
    shoal_key_t prefix, end;
    shoal_oplog_key_dataset(&prefix, dataset);
    shoal_key_prefix_end(&prefix, &end);
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        shoal_batch_delete_range(self->batch, families[i], &prefix, &end);
    shoal_key_t key;
    shoal_oplog_key_watermark(&key, dataset);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    s_key_count(&key, dataset);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    shoal_oplog_guard_lock(self);
    shoal_oplog_kv_touch(self, dataset);
    int rc = shoal_store_write(self->store, self->batch, self->sync);
    shoal_oplog_guard_unlock(self);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "drop");
    zsys_info("oplog: dropped dataset \"%s\"", dataset);
    return 0;
}

// ---------------------------------------------------------------------------
//  Stats

//  Entries of DATASET, walked.
static int64_t
s_oplog_walk_entries(shoal_oplog_t *self, const char *dataset)
{
    shoal_key_t prefix;
    shoal_oplog_key_dataset(&prefix, dataset);
    int64_t count = shoal_store_count(self->store, SHOAL_CF_OPLOG_BY_HLC, &prefix);
    if (count < 0)
        shoal_oplog_fail_store(self, "count");
    return count;
}

int
shoal_oplog_recount(shoal_oplog_t *self, const char *dataset, shoal_oplog_counts_t *counts)
{
    int64_t entries = s_oplog_walk_entries(self, dataset);
    int64_t live = entries < 0 ? -1 : shoal_oplog_walk_live(self, dataset);
    if (live < 0)
        return -1;
    counts->entries = (uint64_t) entries;
    counts->live = (uint64_t) live;
    return 0;
}

int64_t
shoal_oplog_count(shoal_oplog_t *self, const char *dataset)
{
    shoal_oplog_counts_t counts;
    return shoal_oplog_counts(self, dataset, &counts) ? -1 : (int64_t) counts.entries;
}

int64_t
shoal_oplog_kv_count(shoal_oplog_t *self, const char *dataset)
{
    shoal_oplog_counts_t counts;
    return shoal_oplog_counts(self, dataset, &counts) ? -1 : (int64_t) counts.live;
}

//  Adds to NAMES every dataset that has a key in CF, seeking past each one.
static int
s_oplog_datasets_in(shoal_oplog_t *self, shoal_cf_t cf, zlistx_t *names)
{
    shoal_iter_t *iter = shoal_iter_new(self->store, cf, NULL, NULL);
    if (!iter)
        return shoal_oplog_fail_store(self, "datasets");
    int rc = 0;
    bool on_key = shoal_iter_first(iter);
    while (on_key && rc == 0) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes, size);
        char name[OPLOG_NAME_SIZE];
        if (shoal_key_read_str(&reader, name, sizeof name)) {
            rc = shoal_oplog_fail_key(self, cf, bytes, size);
            break;
        }
        if (!zlistx_find(names, name))
            zlistx_add_end(names, name);
        shoal_key_t prefix, next;
        shoal_oplog_key_dataset(&prefix, name);
        shoal_key_prefix_end(&prefix, &next);
        on_key = shoal_iter_seek(iter, &next);
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "datasets");
    shoal_iter_destroy(&iter);
    return rc;
}

static int
s_string_compare(const void *a, const void *b)
{
    return strcmp((const char *) a, (const char *) b);
}

zlistx_t *
shoal_oplog_datasets(shoal_oplog_t *self)
{
    zlistx_t *names = zlistx_new();
    zlistx_set_duplicator(names, (zlistx_duplicator_fn *) shoal_strdup);
    zlistx_set_destructor(names, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator(names, s_string_compare);
    if (s_oplog_datasets_in(self, SHOAL_CF_OPLOG_BY_HASH, names)
    ||  s_oplog_datasets_in(self, SHOAL_CF_OPLOG_NODE_HEAD, names)) {
        zlistx_destroy(&names);
        return NULL;
    }
    zlistx_sort(names);
    return names;
}

