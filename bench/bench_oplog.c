/*  bench_oplog: the oplog against raw RocksDB writing the same bytes.

    Usage: bench_oplog [COUNT]   (default 1,000,000 entries)

    In one run, each phase on a fresh database in a temporary directory:
      append   COUNT entries from a few nodes, 200-byte values, through
               shoal_oplog_append_batch in batches of BENCH_BATCH, fsync off;
               then raw RocksDB writing the very same keys and values (every
               family the oplog writes: the entry, stored once in its
               node's chain (oplog_by_node_hlc), its locator in
               oplog_by_hash, its oplog_by_hlc key, the node heads and the
               kv state), encoded and sorted beforehand,
               with no reads. Then a tenth of the entries delivered again,
               all already present: the dedupe hit path.
      prune    the oldest half through shoal_oplog_prune, against a raw
               batched delete of the same keys (10,000 deletes per write).
      scan     every remaining entry, node by node, through
               shoal_oplog_node_after in pages; against a raw walk of
               oplog_by_node_hlc, where the entries are stored.
      restart  a child process appends COUNT entries to a fresh store (as
               append does, store sync on as shoald has it) and is killed
               with SIGKILL right after its last acknowledged batch; then
               the store is opened as shoald opens it at start (store,
               oplog, the clean-stop mark, whether a write was torn, and a
               reconcile only if one was), timed; then once more with the
               full walk oplog/reconcile_always asks for.
    BENCH_RESTART_ONLY=1 runs the restart phase alone.
    The ratios are oplog / raw: what the oplog's reads (dedupe, head, kv),
    checks, hashing and encoding cost over the writes themselves. The
    machine is noisy (see limits.md): compare ratios within one run.
*/
#include <czmq.h>
#include <inttypes.h>
#include <rocksdb/c.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal_oplog.h"
#include "shoal_oplog_keys.h"
#include "shoal_store.h"

#define BENCH_DEFAULT_COUNT 1000000
#define BENCH_NODES 4
#define BENCH_VALUE_SIZE 200
//  Entries per append batch.
#define BENCH_BATCH 1000
//  Deletes per raw prune write, as the oplog's default prune batch.
#define BENCH_PRUNE_DELETES 10000
//  One entry in this many is delivered a second time (the "again" phase).
#define BENCH_REDELIVER_SHARE 10
//  Entries per node_after page.
#define BENCH_SCAN_PAGE 1000
//  The raw database is opened as shoal_store opens its own: the default
//  block cache, bloom filters in table files, memtable bloom filters in the
//  families read by key, and the write-ahead log's bound.
#define BENCH_CACHE_BYTES (64 * 1024 * 1024)
#define BENCH_BLOOM_BITS_PER_KEY 10
#define BENCH_MEMTABLE_BLOOM_RATIO 0.02
#define BENCH_MAX_WAL_BYTES (32 * 1024 * 1024)
#define BENCH_DATASET "bench"
#define BENCH_PATH_MAX 4200
//  The oplog must be at least this fraction of raw speed (the expectation).
#define BENCH_EXPECTED_RATIO 0.5
//  A node started after a crash answers within this long (issue 19: a
//  million entries, 2 s); the store's open is the part measured here.
#define BENCH_EXPECTED_RESTART_S 2.0
#define MS_PER_S 1000
#define NS_PER_S 1e9

static const char *s_nodes[BENCH_NODES] = { "node-a", "node-b", "node-c", "node-d" };

//  What the raw phases need to know of each entry, kept from generation.
typedef struct {
    uint8_t hash[SHOAL_HASH_SIZE];
} bench_entry_t;

//  Generates the same entries on every pass: chains per node, stamps in
//  append order, values from a seeded PRNG.
typedef struct {
    uint64_t start_ms;                          //  stamp of entry 0
    bench_entry_t *entries;                     //  what each entry hashed to
    size_t next;                                //  index of the next entry
    bool has_prev[BENCH_NODES];                 //  per node: chain started
    uint8_t prev[BENCH_NODES][SHOAL_HASH_SIZE]; //  per node: last hash
} generator_t;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / NS_PER_S;
}

static uint64_t
s_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void
s_generator_reset(generator_t *generator)
{
    generator->next = 0;
    memset(generator->has_prev, 0, sizeof generator->has_prev);
}

//  Fills ENTRY (whose buffers are preallocated) with the next entry.
static void
s_generate(generator_t *generator, shoal_oplog_entry_t *entry)
{
    size_t index = generator->next++;
    size_t node = index % BENCH_NODES;
    uint64_t state = index;
    for (size_t i = 0; i < BENCH_VALUE_SIZE; i += sizeof(uint64_t)) {
        uint64_t word = s_random(&state);
        memcpy(entry->value + i, &word, sizeof word);
    }
    entry->value_size = BENCH_VALUE_SIZE;
    snprintf(entry->key, 32, "key/%010zu", index);
    entry->op = SHOAL_OPLOG_PUT;
    entry->wall_ms = generator->start_ms + index;
    entry->logic = 0;
    entry->node = (char *) s_nodes[node];
    entry->has_prev = generator->has_prev[node];
    memcpy(entry->prev_hash, generator->prev[node], SHOAL_HASH_SIZE);
    shoal_oplog_entry_hash(entry, entry->hash);
    generator->has_prev[node] = true;
    memcpy(generator->prev[node], entry->hash, SHOAL_HASH_SIZE);
    bench_entry_t *kept = &generator->entries[index];
    memcpy(kept->hash, entry->hash, SHOAL_HASH_SIZE);
}

//  A batch of entries with buffers that generation reuses.
static shoal_oplog_entry_t *
s_batch_new(void)
{
    shoal_oplog_entry_t *batch = calloc(BENCH_BATCH, sizeof *batch);
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        batch[i].dataset = BENCH_DATASET;
        batch[i].key = malloc(32);
        batch[i].value = malloc(BENCH_VALUE_SIZE);
    }
    return batch;
}

static void
s_batch_free(shoal_oplog_entry_t *batch)
{
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        free(batch[i].key);
        free(batch[i].value);
    }
    free(batch);
}

//  Keys of entry INDEX, as the oplog lays them out (see shoal_oplog.h).
static void
s_key_by_hash(shoal_key_t *key, const bench_entry_t *entry)
{
    shoal_key_init(key);
    shoal_key_add_str(key, BENCH_DATASET);
    shoal_key_add_bytes(key, entry->hash, SHOAL_HASH_SIZE);
}

static void
s_key_by_hlc(shoal_key_t *key, const generator_t *generator, size_t index)
{
    shoal_key_init(key);
    shoal_key_add_str(key, BENCH_DATASET);
    shoal_key_add_u64(key, generator->start_ms + index);
    shoal_key_add_u64(key, 0);
    shoal_key_add_str(key, s_nodes[index % BENCH_NODES]);
    shoal_key_add_bytes(key, generator->entries[index].hash, SHOAL_HASH_SIZE);
}

static void
s_key_by_node_hlc(shoal_key_t *key, const generator_t *generator, size_t index)
{
    shoal_key_init(key);
    shoal_key_add_str(key, BENCH_DATASET);
    shoal_key_add_str(key, s_nodes[index % BENCH_NODES]);
    shoal_key_add_u64(key, generator->start_ms + index);
    shoal_key_add_u64(key, 0);
    shoal_key_add_bytes(key, generator->entries[index].hash, SHOAL_HASH_SIZE);
}

// ---------------------------------------------------------------------------
//  The raw database, opened as the store opens its own

typedef struct {
    rocksdb_t *db;
    rocksdb_options_t *options;
    rocksdb_options_t *point_options;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];
    rocksdb_writeoptions_t *write;
    rocksdb_readoptions_t *read;
} raw_t;

static int
s_raw_open(raw_t *raw, const char *dir)
{
    memset(raw, 0, sizeof *raw);
    raw->options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(raw->options, 1);
    rocksdb_options_set_create_missing_column_families(raw->options, 1);
    rocksdb_options_set_max_total_wal_size(raw->options, BENCH_MAX_WAL_BYTES);
    raw->cache = rocksdb_cache_create_lru(BENCH_CACHE_BYTES);
    raw->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(raw->table, raw->cache);
    rocksdb_block_based_options_set_filter_policy(raw->table,
        rocksdb_filterpolicy_create_bloom_full(BENCH_BLOOM_BITS_PER_KEY));
    rocksdb_options_set_block_based_table_factory(raw->options, raw->table);
    raw->point_options = rocksdb_options_create_copy(raw->options);
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(raw->point_options,
                                                         BENCH_MEMTABLE_BLOOM_RATIO);
    rocksdb_options_set_memtable_whole_key_filtering(raw->point_options, 1);
    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        bool point = cf == SHOAL_CF_OPLOG_BY_HASH || cf == SHOAL_CF_OPLOG_NODE_HEAD
                  || cf == SHOAL_CF_KV;
        cf_options[cf] = point ? raw->point_options : raw->options;
    }
    char *error = NULL;
    raw->db = rocksdb_open_column_families(raw->options, dir, SHOAL_CF_COUNT, names, cf_options,
                                           raw->cfs, &error);
    if (error) {
        fprintf(stderr, "raw open %s: %s\n", dir, error);
        rocksdb_free(error);
        return -1;
    }
    raw->write = rocksdb_writeoptions_create();
    raw->read = rocksdb_readoptions_create();
    return 0;
}

static void
s_raw_close(raw_t *raw)
{
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        if (raw->cfs[cf])
            rocksdb_column_family_handle_destroy(raw->cfs[cf]);
    if (raw->db)
        rocksdb_close(raw->db);
    if (raw->write)
        rocksdb_writeoptions_destroy(raw->write);
    if (raw->read)
        rocksdb_readoptions_destroy(raw->read);
    rocksdb_options_destroy(raw->options);
    rocksdb_options_destroy(raw->point_options);
    rocksdb_block_based_options_destroy(raw->table);
    rocksdb_cache_destroy(raw->cache);
}

static int
s_raw_write(raw_t *raw, rocksdb_writebatch_t *batch)
{
    char *error = NULL;
    rocksdb_write(raw->db, raw->write, batch, &error);
    if (error) {
        fprintf(stderr, "raw write: %s\n", error);
        rocksdb_free(error);
        return -1;
    }
    return 0;
}

//  One pre-encoded write: family, key, value.
typedef struct {
    shoal_cf_t cf;
    shoal_key_t key;
    uint8_t *value;
    size_t size;
} raw_put_t;

//  Encodes RECORD with CODEC into PUT, exiting on failure (bench input is
//  always valid).
static void
s_encode(raw_put_t *put, const shoal_codec_t *codec, const void *record)
{
    char error[256];
    if (codec->encode(record, &put->value, &put->size, error, sizeof error)) {
        fprintf(stderr, "encode %s: %s\n", codec->name, error);
        exit(EXIT_FAILURE);
    }
}

//  Pre-encodes what the oplog writes for BATCH (COUNT entries from FIRST):
//  the entry (in oplog_by_node_hlc), its locator and index key and the kv
//  state per entry, one head per node. Returns the number of puts in PUTS.
static size_t
s_raw_encode(generator_t *generator, const shoal_oplog_entry_t *batch, size_t count,
             size_t first, raw_put_t *puts)
{
    size_t n = 0;
    const shoal_oplog_entry_t *latest[BENCH_NODES] = { NULL };
    for (size_t i = 0; i < count; i++) {
        const shoal_oplog_entry_t *entry = &batch[i];
        const bench_entry_t *kept = &generator->entries[first + i];
        puts[n].cf = SHOAL_CF_OPLOG_BY_HASH;
        s_key_by_hash(&puts[n].key, kept);
        shoal_key_t locator;
        shoal_oplog_locator(&locator, entry);
        puts[n].size = locator.size;
        puts[n].value = malloc(locator.size);
        memcpy(puts[n++].value, locator.bytes, locator.size);
        //  The key alone, as the oplog writes it.
        puts[n].cf = SHOAL_CF_OPLOG_BY_HLC;
        s_key_by_hlc(&puts[n].key, generator, first + i);
        puts[n].size = 0;
        puts[n++].value = NULL;
        puts[n].cf = SHOAL_CF_OPLOG_BY_NODE_HLC;
        s_key_by_node_hlc(&puts[n].key, generator, first + i);
        s_encode(&puts[n++], &shoal_oplog_entry_codec, entry);
        shoal_kv_record_t record = {
            .value = entry->value, .value_size = entry->value_size, .wall_ms = entry->wall_ms,
            .logic = entry->logic, .node = entry->node
        };
        memcpy(record.hash, entry->hash, SHOAL_HASH_SIZE);
        puts[n].cf = SHOAL_CF_KV;
        shoal_key_init(&puts[n].key);
        shoal_key_add_str(&puts[n].key, BENCH_DATASET);
        shoal_key_add_str(&puts[n].key, entry->key);
        s_encode(&puts[n++], &shoal_kv_codec, &record);
        latest[(first + i) % BENCH_NODES] = entry;
    }
    for (size_t node = 0; node < BENCH_NODES; node++) {
        if (!latest[node])
            continue;
        shoal_head_record_t head = { latest[node]->wall_ms, latest[node]->logic, { 0 } };
        memcpy(head.hash, latest[node]->hash, SHOAL_HASH_SIZE);
        puts[n].cf = SHOAL_CF_OPLOG_NODE_HEAD;
        shoal_key_init(&puts[n].key);
        shoal_key_add_str(&puts[n].key, BENCH_DATASET);
        shoal_key_add_str(&puts[n].key, s_nodes[node]);
        s_encode(&puts[n++], &shoal_head_codec, &head);
    }
    return n;
}

//  Orders puts by family, then key: the order the oplog writes them in (see
//  s_oplog_apply_indexes), and the fastest order for RocksDB.
static int
s_put_compare(const void *a_in, const void *b_in)
{
    const raw_put_t *a = a_in, *b = b_in;
    if (a->cf != b->cf)
        return a->cf < b->cf ? -1 : 1;
    size_t common = a->key.size < b->key.size ? a->key.size : b->key.size;
    int order = memcmp(a->key.bytes, b->key.bytes, common);
    if (order == 0 && a->key.size != b->key.size)
        order = a->key.size < b->key.size ? -1 : 1;
    return order;
}

// ---------------------------------------------------------------------------
//  Phases. Each returns seconds spent in the part measured, or < 0.

//  Appends the first COUNT entries through the oplog. With EXPECT_NEW false
//  they are there already (a sync delivering them again): every one is a
//  dedupe hit and nothing is written.
static double
s_oplog_append(shoal_oplog_t *oplog, generator_t *generator, size_t count, bool expect_new)
{
    shoal_oplog_entry_t *batch = s_batch_new();
    s_generator_reset(generator);
    double spent = 0;
    for (size_t first = 0; first < count; first += BENCH_BATCH) {
        size_t size = count - first < BENCH_BATCH ? count - first : BENCH_BATCH;
        for (size_t i = 0; i < size; i++)
            s_generate(generator, &batch[i]);
        size_t added;
        double started = s_now();
        if (shoal_oplog_append_batch(oplog, batch, size, &added)
        ||  added != (expect_new ? size : 0)) {
            fprintf(stderr, "append: %s\n", shoal_oplog_error(oplog));
            spent = -1;
            break;
        }
        spent += s_now() - started;
    }
    s_batch_free(batch);
    return spent;
}

static double
s_raw_append(raw_t *raw, generator_t *generator, size_t count)
{
    shoal_oplog_entry_t *batch = s_batch_new();
    //  Four puts per entry and one head per node.
    raw_put_t *puts = calloc(BENCH_BATCH * 4 + BENCH_NODES, sizeof *puts);
    rocksdb_writebatch_t *writes = rocksdb_writebatch_create();
    s_generator_reset(generator);
    double spent = 0;
    for (size_t first = 0; first < count && spent >= 0; first += BENCH_BATCH) {
        size_t size = count - first < BENCH_BATCH ? count - first : BENCH_BATCH;
        for (size_t i = 0; i < size; i++)
            s_generate(generator, &batch[i]);
        size_t n = s_raw_encode(generator, batch, size, first, puts);
        qsort(puts, n, sizeof *puts, s_put_compare);
        double started = s_now();
        for (size_t i = 0; i < n; i++)
            rocksdb_writebatch_put_cf(writes, raw->cfs[puts[i].cf],
                                      (const char *) puts[i].key.bytes, puts[i].key.size,
                                      (const char *) puts[i].value, puts[i].size);
        if (s_raw_write(raw, writes))
            spent = -1;
        else
            spent += s_now() - started;
        rocksdb_writebatch_clear(writes);
        for (size_t i = 0; i < n; i++)
            free(puts[i].value);
    }
    rocksdb_writebatch_destroy(writes);
    free(puts);
    s_batch_free(batch);
    return spent;
}

static double
s_raw_prune(raw_t *raw, generator_t *generator, size_t count)
{
    rocksdb_writebatch_t *writes = rocksdb_writebatch_create();
    double started = s_now();
    shoal_key_t key;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const bench_entry_t *entry = &generator->entries[i];
        s_key_by_hash(&key, entry);
        rocksdb_writebatch_delete_cf(writes, raw->cfs[SHOAL_CF_OPLOG_BY_HASH],
                                     (const char *) key.bytes, key.size);
        s_key_by_hlc(&key, generator, i);
        rocksdb_writebatch_delete_cf(writes, raw->cfs[SHOAL_CF_OPLOG_BY_HLC],
                                     (const char *) key.bytes, key.size);
        s_key_by_node_hlc(&key, generator, i);
        rocksdb_writebatch_delete_cf(writes, raw->cfs[SHOAL_CF_OPLOG_BY_NODE_HLC],
                                     (const char *) key.bytes, key.size);
        if (rocksdb_writebatch_count(writes) >= BENCH_PRUNE_DELETES || i + 1 == count) {
            rc = s_raw_write(raw, writes);
            rocksdb_writebatch_clear(writes);
        }
    }
    double spent = s_now() - started;
    rocksdb_writebatch_destroy(writes);
    return rc ? -1 : spent;
}

//  Reads every remaining entry node by node; *ENTRIES counts them.
static double
s_oplog_scan(shoal_oplog_t *oplog, size_t *entries)
{
    *entries = 0;
    shoal_oplog_list_t page = { 0 };
    double started = s_now();
    for (size_t node = 0; node < BENCH_NODES; node++) {
        shoal_hlc_stamp_t after;
        bool first = true;
        do {
            if (shoal_oplog_node_after(oplog, BENCH_DATASET, s_nodes[node], first ? NULL : &after,
                                       BENCH_SCAN_PAGE, &page)) {
                fprintf(stderr, "scan: %s\n", shoal_oplog_error(oplog));
                shoal_oplog_list_clear(&page);
                return -1;
            }
            *entries += page.count;
            if (page.count) {
                after.wall_ms = page.entries[page.count - 1].wall_ms;
                after.logic = page.entries[page.count - 1].logic;
            }
            first = false;
        } while (page.count == BENCH_SCAN_PAGE);
    }
    double spent = s_now() - started;
    shoal_oplog_list_clear(&page);
    return spent;
}

//  The same walk, raw: each oplog_by_node_hlc key and the entry stored
//  there (not copied, not decoded).
static double
s_raw_scan(raw_t *raw, size_t *entries)
{
    *entries = 0;
    double started = s_now();
    rocksdb_iterator_t *iter = rocksdb_create_iterator_cf(raw->db, raw->read,
                                                          raw->cfs[SHOAL_CF_OPLOG_BY_NODE_HLC]);
    for (rocksdb_iter_seek_to_first(iter); rocksdb_iter_valid(iter); rocksdb_iter_next(iter)) {
        size_t size, value_size;
        rocksdb_iter_key(iter, &size);
        rocksdb_iter_value(iter, &value_size);
        if (size && value_size)
            (*entries)++;
    }
    rocksdb_iter_destroy(iter);
    return s_now() - started;
}

//  Opens the store in DIR as shoald does at start, reconciling when a write
//  may be torn or when ALWAYS asks (oplog/reconcile_always). *RECONCILED
//  says whether it did, *STORE_OPEN how long RocksDB's open took (its
//  write-ahead log replayed). Returns the seconds it took, or -1.
static double
s_restart(const char *dir, bool always, bool *reconciled, double *store_open)
{
    double started = s_now();
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    shoal_store_t *store = shoal_store_new(dir, &store_options, NULL);
    *store_open = s_now() - started;
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.node = "bench";
    shoal_oplog_t *oplog = store ? shoal_oplog_new(store, &oplog_options) : NULL;
    bool clean = false, torn = always;
    const char *why = "";
    int rc = oplog ? shoal_oplog_take_clean_mark(oplog, &clean) : -1;
    if (rc == 0 && !always)
        rc = shoal_oplog_torn(oplog, &torn, &why);
    if (rc == 0 && torn)
        rc = shoal_oplog_reconcile(oplog, NULL);
    double spent = s_now() - started;
    *reconciled = torn;
    if (rc)
        fprintf(stderr, "restart: %s\n", oplog ? shoal_oplog_error(oplog) : "the store does not open");
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    return rc ? -1 : spent;
}

//  A child appends COUNT entries to a fresh store in DIR, store sync on,
//  and is killed with SIGKILL after its last acknowledged batch. Returns 0
//  once it died so, or -1.
static int
s_crash_after_appends(const char *dir, generator_t *generator, size_t count)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        shoal_store_options_t store_options;
        shoal_store_options_default(&store_options);
        shoal_store_t *store = shoal_store_new(dir, &store_options, NULL);
        shoal_oplog_options_t oplog_options;
        shoal_oplog_options_default(&oplog_options);
        oplog_options.sync = false;
        oplog_options.node = "bench";
        shoal_oplog_t *oplog = store ? shoal_oplog_new(store, &oplog_options) : NULL;
        if (!oplog || s_oplog_append(oplog, generator, count, true) < 0)
            _exit(EXIT_FAILURE);
        raise(SIGKILL);
        _exit(EXIT_FAILURE);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        fprintf(stderr, "restart: the appending child did not die by SIGKILL (status %d)\n", status);
        return -1;
    }
    return 0;
}

static void
s_report(const char *what, const char *who, size_t count, double seconds)
{
    printf("%-8s %-6s %10.0f entries/s  (%zu in %.2f s)\n", what, who,
           seconds > 0 ? (double) count / seconds : 0, count, seconds);
}

static void
s_ratio(const char *what, double oplog_seconds, double raw_seconds, bool judged)
{
    double ratio = oplog_seconds > 0 ? raw_seconds / oplog_seconds : 0;
    if (judged)
        printf("%-8s ratio  %10.2f             (oplog/raw; expected >= %.2f: %s)\n", what, ratio,
               BENCH_EXPECTED_RATIO, ratio >= BENCH_EXPECTED_RATIO ? "met" : "NOT MET");
    else
        printf("%-8s ratio  %10.2f             (oplog/raw)\n", what, ratio);
}

static void
s_remove_tree(const char *dir)
{
    char command[BENCH_PATH_MAX + 16];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int
main(int argc, char *argv[])
{
    size_t count = BENCH_DEFAULT_COUNT;
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 10);
        if (*end || count < 2 * BENCH_NODES) {
            fprintf(stderr, "usage: %s [COUNT]   (COUNT >= %d, default %d)\n", argv[0],
                    2 * BENCH_NODES, BENCH_DEFAULT_COUNT);
            return EXIT_FAILURE;
        }
    }
    const char *base = getenv("TMPDIR");
    char root[BENCH_PATH_MAX];
    snprintf(root, sizeof root, "%s/shoal-bench-oplog-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    char oplog_dir[BENCH_PATH_MAX + 8], raw_dir[BENCH_PATH_MAX + 8];
    snprintf(oplog_dir, sizeof oplog_dir, "%s/oplog", root);
    snprintf(raw_dir, sizeof raw_dir, "%s/raw", root);

    generator_t generator = { 0 };
    generator.entries = calloc(count, sizeof(bench_entry_t));
    //  Stamps end well before now, so the clock accepts them all.
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    generator.start_ms = (uint64_t) ts.tv_sec * MS_PER_S - count - MS_PER_S * 60;

    printf("bench_oplog: %zu entries, %d nodes, %d-byte values, %d per batch, fsync off\n",
           count, BENCH_NODES, BENCH_VALUE_SIZE, BENCH_BATCH);
    //  First, before this process touches RocksDB: a child forked after
    //  RocksDB started its background threads has none of them (fork keeps
    //  one thread), and its writes stall for good once a flush is due.
    double restart = -1, restart_always = -1;
    bool reconciled = false, always_reconciled = false;
    double store_open = 0, store_open_always = 0;
    {
        char crash_dir[BENCH_PATH_MAX + 8];
        snprintf(crash_dir, sizeof crash_dir, "%s/crash", root);
        if (s_crash_after_appends(crash_dir, &generator, count) == 0)
            restart = s_restart(crash_dir, false, &reconciled, &store_open);
        if (restart >= 0)
            restart_always = s_restart(crash_dir, true, &always_reconciled, &store_open_always);
        s_remove_tree(crash_dir);
    }
    //  BENCH_RESTART_ONLY=1: the restart phase alone.
    bool restart_only = getenv("BENCH_RESTART_ONLY") && streq(getenv("BENCH_RESTART_ONLY"), "1");
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    shoal_store_t *store = restart_only ? NULL : shoal_store_new(oplog_dir, &store_options, NULL);
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.sync = false;
    oplog_options.node = "bench";
    shoal_oplog_t *oplog = store ? shoal_oplog_new(store, &oplog_options) : NULL;
    raw_t raw = { 0 };
    int rc = restart_only || (oplog && s_raw_open(&raw, raw_dir) == 0) ? 0 : -1;

    double oplog_append = -1, raw_append = -1, oplog_prune = -1, raw_prune = -1, append_ratio = 0;
    if (rc == 0 && !restart_only) {
        oplog_append = s_oplog_append(oplog, &generator, count, true);
        raw_append = s_raw_append(&raw, &generator, count);
        rc = oplog_append < 0 || raw_append < 0 ? -1 : 0;
    }
    if (rc == 0 && !restart_only) {
        s_report("append", "oplog", count, oplog_append);
        s_report("append", "raw", count, raw_append);
        s_ratio("append", oplog_append, raw_append, true);
        append_ratio = raw_append / oplog_append;
        size_t again = count / BENCH_REDELIVER_SHARE;
        double redeliver = s_oplog_append(oplog, &generator, again, false);
        if (redeliver < 0)
            rc = -1;
        else
            s_report("again", "oplog", again, redeliver);
    }
    size_t half = count / 2;
    if (rc == 0 && !restart_only) {
        //  The stamp of the last entry of the older half.
        shoal_hlc_stamp_t cutoff = { generator.start_ms + half - 1, 0 };
        size_t pruned = 0;
        double started = s_now();
        rc = shoal_oplog_prune(oplog, BENCH_DATASET, &cutoff, &pruned);
        oplog_prune = s_now() - started;
        if (rc || pruned != half) {
            fprintf(stderr, "prune: %zu of %zu: %s\n", pruned, half, shoal_oplog_error(oplog));
            rc = -1;
        }
        raw_prune = rc ? -1 : s_raw_prune(&raw, &generator, half);
        rc = rc || raw_prune < 0 ? -1 : 0;
    }
    if (rc == 0 && !restart_only) {
        s_report("prune", "oplog", half, oplog_prune);
        s_report("prune", "raw", half, raw_prune);
        s_ratio("prune", oplog_prune, raw_prune, true);
    }
    if (rc == 0 && !restart_only) {
        size_t oplog_read, raw_read;
        double oplog_scan = s_oplog_scan(oplog, &oplog_read);
        double raw_scan = s_raw_scan(&raw, &raw_read);
        if (oplog_scan < 0 || oplog_read != count - half || raw_read != count - half) {
            fprintf(stderr, "scan read %zu (raw %zu), expected %zu\n", oplog_read, raw_read,
                    count - half);
            rc = -1;
        }
        else {
            s_report("scan", "oplog", oplog_read, oplog_scan);
            s_report("scan", "raw", raw_read, raw_scan);
            s_ratio("scan", oplog_scan, raw_scan, false);
        }
    }
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    if (restart >= 0 && restart_always >= 0) {
        printf("restart  oplog  %10.2f s after a kill -9 with %zu entries (%s; the store's open %.2f s)\n",
               restart, count, reconciled ? "reconciled" : "no reconcile needed", store_open);
        printf("restart  always %10.2f s with oplog/reconcile_always (the full walk)\n", restart_always);
    }
    else
        rc = -1;
    if (rc == 0 && !restart_only)
        printf("expected: append at %.2f of raw or more: %s\n", BENCH_EXPECTED_RATIO,
               append_ratio >= BENCH_EXPECTED_RATIO ? "met" : "NOT met");
    if (rc == 0) {
        printf("expected: start after a crash with %zu entries within %.0f s (%.2f s): %s\n", count,
               BENCH_EXPECTED_RESTART_S, restart, restart <= BENCH_EXPECTED_RESTART_S ? "met" : "NOT met");
    }
    if (raw.options)
        s_raw_close(&raw);
    free(generator.entries);
    if (getenv("BENCH_KEEP"))
        printf("kept %s\n", root);
    else
        s_remove_tree(root);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
