/*  bench_store: typed record writes through shoal_store against raw RocksDB.

    Writes COUNT claim records (default 1,000,000) in batches of 1,000 with
    sync off, three ways, each into its own fresh database:

        store       shoal_batch_put_record + shoal_store_write: key building,
                    validation, protobuf encoding and the write
        raw         the RocksDB C API writing the same keys and the same
                    bytes, encoded before the clock starts: the ceiling
        raw+encode  the RocksDB C API, encoding each record as it goes: what
                    is left between this and store is the store's own cost

    The raw databases get the store's options (every column family, the same
    block cache). Why the paths take turns: this machine's speed drifts by
    tens of percent within seconds (other work, page cache writeback), so
    paths run one after the other compare different moments. Within a round
    the three databases are open together and written in turns of 50,000
    records, each turn timed on its own, so every path sees the same
    moments. Three rounds alternate which path goes first in a turn; medians
    are printed with the ratio store/raw (expected >= 0.80).

    Usage: bench_store [COUNT]. Data goes under $TMPDIR (or /tmp) and is
    removed afterwards.
*/
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "shoal_store.h"

#define BENCH_DEFAULT_COUNT 1000000
#define BENCH_BATCH 1000
//  Records per path per turn: a whole number of batches.
#define BENCH_TURN (50 * BENCH_BATCH)
#define BENCH_ROUNDS 3
//  Room for a claim id ("claim-00000001") and for paths.
#define BENCH_ID_MAX 32
#define BENCH_PATH_MAX 4096
//  Room for a codec's error message.
#define BENCH_ERROR_MAX 256
//  The ratio store/raw this bench expects to meet.
#define BENCH_EXPECTED_RATIO 0.80
#define BENCH_MB (1000.0 * 1000.0)
#define BENCH_NS_PER_S 1e9

typedef enum {
    PATH_STORE,
    PATH_RAW,
    PATH_RAW_ENCODE,
    PATH_COUNT
} bench_path_t;

static const char *s_path_names[PATH_COUNT] = { "store", "raw", "raw+encode" };

//  The workload, built once before any clock starts.
typedef struct {
    size_t count;                   //  records to write per path and round
    shoal_claim_record_t *records;  //  the records; ids point into id_pool
    char *id_pool;                  //  BENCH_ID_MAX bytes per id
    uint8_t *key_pool;              //  encoded keys, back to back
    size_t *key_offsets;            //  count + 1 offsets into key_pool
    uint8_t *value_pool;            //  encoded values, back to back
    size_t *value_offsets;          //  count + 1 offsets into value_pool
    size_t total_bytes;             //  keys plus values, for MB/s
    char base[BENCH_PATH_MAX];      //  the temporary directory of this run
} bench_t;

//  One path's database during a round.
typedef struct {
    bench_path_t path;              //  how it is written
    char dir[BENCH_PATH_MAX + 64];  //  where it lives
    shoal_store_t *store;           //  PATH_STORE: the store
    shoal_batch_t *batch;           //  PATH_STORE: its batch
    rocksdb_t *db;                  //  raw paths: the database
    rocksdb_options_t *options;     //  raw paths: the store's options, rebuilt
    rocksdb_block_based_table_options_t *table_options;  //  raw paths: holds the cache
    rocksdb_cache_t *cache;         //  raw paths: block cache of the store's size
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];  //  raw paths: every family
    rocksdb_writeoptions_t *write_options;  //  raw paths: no sync, as the store's
    rocksdb_writebatch_t *raw_batch;        //  raw paths: the batch
    double seconds;                 //  time spent writing in this round
} sink_t;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / BENCH_NS_PER_S;
}

static int
s_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void
s_remove_tree(const char *path)
{
    nftw(path, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

//  The claim a node would keep for the Nth guest; states cycle through the
//  live ones so that the encoding is not one constant value.
static void
s_record_fill(shoal_claim_record_t *record, char *id, size_t n)
{
    static const shoal_claim_state_t states[] = {
        SHOAL_CLAIM_CREATING, SHOAL_CLAIM_RUNNING, SHOAL_CLAIM_PAUSED, SHOAL_CLAIM_STOPPED
    };
    snprintf(id, BENCH_ID_MAX, "claim-%08zu", n);
    record->id = id;
    record->tenant = "acme/web";
    record->state = states[n % (sizeof states / sizeof states[0])];
    record->memory_bytes = (UINT64_C(256) << 20) + (uint64_t) n * 4096;
    record->driver = "proc";
    record->epoch = 1 + n % 7;
    record->created_ms = UINT64_C(1700000000000) + n;
    record->error = NULL;
}

static void
s_record_key(const shoal_claim_record_t *record, shoal_key_t *key)
{
    shoal_key_init(key);
    shoal_key_add_str(key, record->id);
}

static int
s_bench_prepare(bench_t *self)
{
    size_t count = self->count;
    self->records = calloc(count, sizeof(shoal_claim_record_t));
    self->id_pool = calloc(count, BENCH_ID_MAX);
    self->key_offsets = calloc(count + 1, sizeof(size_t));
    self->value_offsets = calloc(count + 1, sizeof(size_t));
    //  An id's key is the id plus a tag and a terminator; its value is well
    //  under four ids' worth.
    size_t key_capacity = count * BENCH_ID_MAX;
    size_t value_capacity = count * 4 * BENCH_ID_MAX;
    self->key_pool = malloc(key_capacity);
    self->value_pool = malloc(value_capacity);
    if (!self->records || !self->id_pool || !self->key_offsets || !self->value_offsets
    ||  !self->key_pool || !self->value_pool)
        return -1;

    for (size_t n = 0; n < count; n++) {
        shoal_claim_record_t *record = &self->records[n];
        s_record_fill(record, self->id_pool + n * BENCH_ID_MAX, n);
        shoal_key_t key;
        s_record_key(record, &key);
        uint8_t *value;
        size_t size;
        char error[BENCH_ERROR_MAX];
        if (shoal_claim_codec.encode(record, &value, &size, error, sizeof error)) {
            fprintf(stderr, "bench_store: record %zu does not encode: %s\n", n, error);
            return -1;
        }
        size_t key_at = self->key_offsets[n];
        size_t value_at = self->value_offsets[n];
        if (key_at + key.size > key_capacity || value_at + size > value_capacity) {
            free(value);
            fprintf(stderr, "bench_store: record %zu is larger than expected\n", n);
            return -1;
        }
        memcpy(self->key_pool + key_at, key.bytes, key.size);
        memcpy(self->value_pool + value_at, value, size);
        self->key_offsets[n + 1] = key_at + key.size;
        self->value_offsets[n + 1] = value_at + size;
        free(value);
    }
    self->total_bytes = self->key_offsets[count] + self->value_offsets[count];
    return 0;
}

static void
s_bench_release(bench_t *self)
{
    free(self->records);
    free(self->id_pool);
    free(self->key_pool);
    free(self->key_offsets);
    free(self->value_pool);
    free(self->value_offsets);
}

//  Opens a raw database with what shoal_store_new sets: create flags, every
//  column family, an LRU block cache of the default size.
static int
s_sink_open_raw(sink_t *sink)
{
    shoal_store_options_t defaults;
    shoal_store_options_default(&defaults);
    sink->options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(sink->options, 1);
    rocksdb_options_set_create_missing_column_families(sink->options, 1);
    sink->cache = rocksdb_cache_create_lru(defaults.cache_bytes);
    sink->table_options = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(sink->table_options, sink->cache);
    rocksdb_options_set_block_based_table_factory(sink->options, sink->table_options);
    sink->write_options = rocksdb_writeoptions_create();
    sink->raw_batch = rocksdb_writebatch_create();

    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        cf_options[cf] = sink->options;
    }
    char *error = NULL;
    sink->db = rocksdb_open_column_families(sink->options, sink->dir, SHOAL_CF_COUNT, names,
                                            cf_options, sink->cfs, &error);
    if (error) {
        fprintf(stderr, "bench_store: cannot open %s: %s\n", sink->dir, error);
        rocksdb_free(error);
        sink->db = NULL;
        return -1;
    }
    return 0;
}

static int
s_sink_open(sink_t *sink, bench_t *bench, bench_path_t path, int round)
{
    memset(sink, 0, sizeof *sink);
    sink->path = path;
    snprintf(sink->dir, sizeof sink->dir, "%s/%s-%d", bench->base,
             path == PATH_STORE ? "store" : path == PATH_RAW ? "raw" : "raw-encode", round);
    if (path != PATH_STORE)
        return s_sink_open_raw(sink);

    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    char *error = NULL;
    sink->store = shoal_store_new(sink->dir, &options, &error);
    if (!sink->store) {
        fprintf(stderr, "bench_store: %s\n", error);
        free(error);
        return -1;
    }
    sink->batch = shoal_batch_new(sink->store);
    return 0;
}

static void
s_sink_close(sink_t *sink)
{
    shoal_batch_destroy(&sink->batch);
    shoal_store_destroy(&sink->store);
    if (sink->db) {
        for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
            rocksdb_column_family_handle_destroy(sink->cfs[cf]);
        rocksdb_close(sink->db);
        sink->db = NULL;
    }
    if (sink->raw_batch)
        rocksdb_writebatch_destroy(sink->raw_batch);
    if (sink->write_options)
        rocksdb_writeoptions_destroy(sink->write_options);
    if (sink->options)
        rocksdb_options_destroy(sink->options);
    if (sink->table_options)
        rocksdb_block_based_options_destroy(sink->table_options);
    if (sink->cache)
        rocksdb_cache_destroy(sink->cache);
    sink->raw_batch = NULL;
    sink->write_options = NULL;
    sink->options = NULL;
    sink->table_options = NULL;
    sink->cache = NULL;
    s_remove_tree(sink->dir);
}

static int
s_write_store(bench_t *bench, sink_t *sink, size_t begin, size_t end)
{
    for (size_t n = begin; n < end; n++) {
        shoal_key_t key;
        s_record_key(&bench->records[n], &key);
        if (shoal_batch_put_record(sink->batch, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec,
                                   &bench->records[n]))
            return -1;
        if (shoal_batch_count(sink->batch) == BENCH_BATCH || n == end - 1) {
            if (shoal_store_write(sink->store, sink->batch, false))
                return -1;
            shoal_batch_clear(sink->batch);
        }
    }
    return 0;
}

static int
s_write_raw(bench_t *bench, sink_t *sink, size_t begin, size_t end)
{
    rocksdb_column_family_handle_t *claims = sink->cfs[SHOAL_CF_CLAIMS];
    for (size_t n = begin; n < end; n++) {
        if (sink->path == PATH_RAW_ENCODE) {
            shoal_key_t key;
            s_record_key(&bench->records[n], &key);
            uint8_t *value;
            size_t size;
            char error[BENCH_ERROR_MAX];
            if (shoal_claim_codec.encode(&bench->records[n], &value, &size, error, sizeof error)) {
                fprintf(stderr, "bench_store: record %zu does not encode: %s\n", n, error);
                return -1;
            }
            rocksdb_writebatch_put_cf(sink->raw_batch, claims, (const char *) key.bytes, key.size,
                                      (const char *) value, size);
            free(value);
        }
        else {
            size_t key_at = bench->key_offsets[n];
            size_t value_at = bench->value_offsets[n];
            rocksdb_writebatch_put_cf(sink->raw_batch, claims,
                                      (const char *) bench->key_pool + key_at,
                                      bench->key_offsets[n + 1] - key_at,
                                      (const char *) bench->value_pool + value_at,
                                      bench->value_offsets[n + 1] - value_at);
        }
        if (rocksdb_writebatch_count(sink->raw_batch) == BENCH_BATCH || n == end - 1) {
            char *error = NULL;
            rocksdb_write(sink->db, sink->write_options, sink->raw_batch, &error);
            rocksdb_writebatch_clear(sink->raw_batch);
            if (error) {
                fprintf(stderr, "bench_store: raw write failed: %s\n", error);
                rocksdb_free(error);
                return -1;
            }
        }
    }
    return 0;
}

//  Writes records [BEGIN, END) through SINK, adding the time to its total.
static int
s_sink_write(bench_t *bench, sink_t *sink, size_t begin, size_t end)
{
    double started = s_now();
    int rc = sink->path == PATH_STORE ? s_write_store(bench, sink, begin, end)
                                      : s_write_raw(bench, sink, begin, end);
    sink->seconds += s_now() - started;
    if (rc != 0 && sink->store)
        fprintf(stderr, "bench_store: %s\n", shoal_store_error(sink->store));
    return rc;
}

//  One round: every path writes every record, in turns. Fills SECONDS per path.
static int
s_round(bench_t *bench, int round, double seconds[PATH_COUNT])
{
    sink_t sinks[PATH_COUNT];
    int opened = 0;
    int rc = 0;
    for (; opened < PATH_COUNT && rc == 0; opened++)
        rc = s_sink_open(&sinks[opened], bench, (bench_path_t) opened, round);
    for (size_t begin = 0; begin < bench->count && rc == 0; begin += BENCH_TURN) {
        size_t end = begin + BENCH_TURN < bench->count ? begin + BENCH_TURN : bench->count;
        for (int turn = 0; turn < PATH_COUNT && rc == 0; turn++) {
            //  Even rounds start each turn with the store, odd rounds end with it.
            int path = round % 2 == 0 ? turn : PATH_COUNT - 1 - turn;
            rc = s_sink_write(bench, &sinks[path], begin, end);
        }
    }
    for (int path = 0; path < opened; path++) {
        seconds[path] = sinks[path].seconds;
        s_sink_close(&sinks[path]);
    }
    return rc;
}

static int
s_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double
s_median(const double *values, size_t count)
{
    double sorted[BENCH_ROUNDS];
    memcpy(sorted, values, count * sizeof(double));
    qsort(sorted, count, sizeof(double), s_compare_doubles);
    return sorted[count / 2];
}

int
main(int argc, char *argv[])
{
    bench_t bench = { .count = BENCH_DEFAULT_COUNT };
    if (argc > 1) {
        char *end;
        unsigned long long count = strtoull(argv[1], &end, 10);
        if (*end || count == 0) {
            fprintf(stderr, "usage: bench_store [COUNT]\n");
            return 2;
        }
        bench.count = (size_t) count;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(bench.base, sizeof bench.base, "%s/bench_store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(bench.base)) {
        fprintf(stderr, "bench_store: cannot create %s: %s\n", bench.base, strerror(errno));
        return 1;
    }
    int rc = s_bench_prepare(&bench);
    if (rc != 0)
        fprintf(stderr, "bench_store: cannot prepare %zu records\n", bench.count);
    else
        printf("bench_store: %zu claim records (%.1f MB of keys and values) per path, "
               "batches of %d, sync off, turns of %d, %d rounds\n", bench.count,
               (double) bench.total_bytes / BENCH_MB, BENCH_BATCH, BENCH_TURN, BENCH_ROUNDS);

    //  rates[path][round] in records per second.
    double rates[PATH_COUNT][BENCH_ROUNDS];
    double ratios[BENCH_ROUNDS];
    for (int round = 0; round < BENCH_ROUNDS && rc == 0; round++) {
        double seconds[PATH_COUNT];
        rc = s_round(&bench, round, seconds);
        if (rc != 0)
            break;
        printf("round %d:", round + 1);
        for (int path = 0; path < PATH_COUNT; path++) {
            rates[path][round] = (double) bench.count / seconds[path];
            printf("  %s %.0f records/s", s_path_names[path], rates[path][round]);
        }
        ratios[round] = rates[PATH_STORE][round] / rates[PATH_RAW][round];
        printf("  store/raw %.2f\n", ratios[round]);
        fflush(stdout);
    }

    if (rc == 0) {
        double bytes_per_record = (double) bench.total_bytes / (double) bench.count;
        printf("medians of %d rounds:\n", BENCH_ROUNDS);
        for (int path = 0; path < PATH_COUNT; path++) {
            double rate = s_median(rates[path], BENCH_ROUNDS);
            printf("  %-11s %9.0f records/s %7.1f MB/s\n", s_path_names[path], rate,
                   rate * bytes_per_record / BENCH_MB);
        }
        double ratio = s_median(ratios, BENCH_ROUNDS);
        printf("  store/raw %.2f (expected >= %.2f): %s\n", ratio, BENCH_EXPECTED_RATIO,
               ratio >= BENCH_EXPECTED_RATIO ? "ok" : "below");
        printf("  store/raw+encode %.2f (the store's own cost beyond encoding)\n",
               s_median(rates[PATH_STORE], BENCH_ROUNDS) / s_median(rates[PATH_RAW_ENCODE], BENCH_ROUNDS));
    }
    s_bench_release(&bench);
    s_remove_tree(bench.base);
    return rc == 0 ? 0 : 1;
}
