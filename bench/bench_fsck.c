/*  bench_fsck: the consistency sweep of a node's store beside a raw scan.

    A store is built directly (no node): BENCH_ENTRIES oplog entries
    (1,000,000 by default, four nodes' chains, 64-byte values, appended in
    batches) and BENCH_CLAIMS claims (100,000, with their counters), and
    compacted so that no compaction runs beside the scans. Then,
    in the same run, alternately, five times each:

      raw    a RocksDB iterator over every column family of the store, each
             key and value touched, nothing decoded (the read options the
             sweep uses: no block cache fill);
      fsck   a whole sweep of the built-in checks (shoal_fsck_run, slices
             of fsck/slice_keys' default one after another), report only.

    Both read the same families of the same store; the figure compared is
    the medians' ratio of time (equivalently of keys per second). The sweep
    must find nothing in the store it is given.

    Ends with: expected: fsck scans at 50% or more of a raw scan (X%): met|NOT met
*/
#include "bench_stats.h"
#include "shoal_store.h"
#include "shoal_oplog.h"
#include "shoal_claim_store.h"
#include "shoal_key_space.h"
#include "shoal_fsck.h"
#include "shoal_fsck_checks.h"

#include <czmq.h>
#include <rocksdb/c.h>
#include <time.h>

#define BENCH_DEFAULT_ENTRIES 1000000
#define BENCH_DEFAULT_CLAIMS 100000
#define BENCH_NODES 4
#define BENCH_BATCH 1000
#define BENCH_VALUE_SIZE 64
#define BENCH_KEY_SIZE 32
#define BENCH_ROUNDS 5
#define BENCH_DATASET "bench"
#define BENCH_TENANTS 10
#define BENCH_MB (1024 * 1024)
//  The sweep must scan at least this fraction of a raw scan's speed.
#define BENCH_EXPECTED_RATIO 0.5
#define NS_PER_S 1e9

static const char *s_nodes[BENCH_NODES] = { "node-a", "node-b", "node-c", "node-d" };

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / NS_PER_S;
}

static size_t
s_env_count(const char *name, size_t fallback)
{
    const char *value = getenv(name);
    return value && *value ? (size_t) strtoull(value, NULL, 10) : fallback;
}

static uint64_t
s_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

//  Appends COUNT entries: each node's chain, stamps in append order.
static int
s_build_oplog(shoal_oplog_t *oplog, size_t count)
{
    shoal_oplog_entry_t *batch = calloc(BENCH_BATCH, sizeof *batch);
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        batch[i].dataset = BENCH_DATASET;
        batch[i].key = malloc(BENCH_KEY_SIZE);
        batch[i].value = malloc(BENCH_VALUE_SIZE);
    }
    bool has_prev[BENCH_NODES] = { false };
    uint8_t prev[BENCH_NODES][SHOAL_HASH_SIZE];
    uint64_t start_ms = (uint64_t) zclock_time() - count;
    int rc = 0;
    for (size_t first = 0; first < count && rc == 0; first += BENCH_BATCH) {
        size_t size = count - first < BENCH_BATCH ? count - first : BENCH_BATCH;
        for (size_t i = 0; i < size; i++) {
            size_t index = first + i, node = index % BENCH_NODES;
            shoal_oplog_entry_t *entry = &batch[i];
            uint64_t state = index;
            for (size_t b = 0; b < BENCH_VALUE_SIZE; b += sizeof(uint64_t)) {
                uint64_t word = s_random(&state);
                memcpy(entry->value + b, &word, sizeof word);
            }
            entry->value_size = BENCH_VALUE_SIZE;
            snprintf(entry->key, BENCH_KEY_SIZE, "key/%010zu", index);
            entry->op = SHOAL_OPLOG_PUT;
            entry->wall_ms = start_ms + index;
            entry->logic = 0;
            entry->node = (char *) s_nodes[node];
            entry->has_prev = has_prev[node];
            memcpy(entry->prev_hash, prev[node], SHOAL_HASH_SIZE);
            shoal_oplog_entry_hash(entry, entry->hash);
            has_prev[node] = true;
            memcpy(prev[node], entry->hash, SHOAL_HASH_SIZE);
        }
        size_t added;
        if (shoal_oplog_append_batch(oplog, batch, size, &added) || added != size) {
            fprintf(stderr, "bench_fsck: append: %s\n", shoal_oplog_error(oplog));
            rc = -1;
        }
    }
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        free(batch[i].key);
        free(batch[i].value);
    }
    free(batch);
    return rc;
}

static int
s_build_claims(shoal_claim_store_t *claims, size_t count)
{
    static const shoal_claim_state_t states[] = { SHOAL_CLAIM_RUNNING, SHOAL_CLAIM_STOPPED, SHOAL_CLAIM_PAUSED,
                                                  SHOAL_CLAIM_RELEASED };
    for (size_t i = 0; i < count; i++) {
        char id[BENCH_KEY_SIZE], tenant[BENCH_KEY_SIZE];
        snprintf(id, sizeof id, "c-%08zu", i);
        snprintf(tenant, sizeof tenant, "org%zu/web", i % BENCH_TENANTS);
        shoal_claim_record_t record = {
            .id = id, .tenant = tenant, .state = states[i % (sizeof states / sizeof states[0])],
            .memory_bytes = BENCH_MB, .driver = "proc", .epoch = 1, .created_ms = 1,
        };
        if (shoal_claim_store_put(claims, NULL, &record)) {
            fprintf(stderr, "bench_fsck: claim: %s\n", shoal_claim_store_error(claims));
            return -1;
        }
    }
    return 0;
}

//  Compacts every family, so that the scans compared read a settled store
//  rather than race the compactions a million writes leave behind.
static int
s_compact(const char *db_dir)
{
    rocksdb_options_t *options = rocksdb_options_create();
    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        cf_options[cf] = options;
    }
    char *error = NULL;
    rocksdb_t *db = rocksdb_open_column_families(options, db_dir, SHOAL_CF_COUNT, names, cf_options, cfs, &error);
    if (error) {
        fprintf(stderr, "bench_fsck: open %s to compact: %s\n", db_dir, error);
        rocksdb_free(error);
        rocksdb_options_destroy(options);
        return -1;
    }
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        rocksdb_compact_range_cf(db, cfs[cf], NULL, 0, NULL, 0);
        rocksdb_column_family_handle_destroy(cfs[cf]);
    }
    rocksdb_close(db);
    rocksdb_options_destroy(options);
    return 0;
}

//  A raw scan of every family: keys and values touched. Returns seconds, or
//  -1; *KEYS counts the keys.
static double
s_raw_scan(const char *db_dir, uint64_t *keys)
{
    rocksdb_options_t *options = rocksdb_options_create();
    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        cf_options[cf] = options;
    }
    char *error = NULL;
    rocksdb_t *db = rocksdb_open_for_read_only_column_families(options, db_dir, SHOAL_CF_COUNT, names, cf_options,
                                                               cfs, 0, &error);
    if (error) {
        fprintf(stderr, "bench_fsck: raw open %s: %s\n", db_dir, error);
        rocksdb_free(error);
        rocksdb_options_destroy(options);
        return -1;
    }
    rocksdb_readoptions_t *read = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(read, 0);
    *keys = 0;
    uint64_t bytes = 0;
    double started = s_now();
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        rocksdb_iterator_t *iter = rocksdb_create_iterator_cf(db, read, cfs[cf]);
        for (rocksdb_iter_seek_to_first(iter); rocksdb_iter_valid(iter); rocksdb_iter_next(iter)) {
            size_t size, value_size;
            const char *key = rocksdb_iter_key(iter, &size);
            const char *value = rocksdb_iter_value(iter, &value_size);
            bytes += (uint8_t) key[0] + (value_size ? (uint8_t) value[0] : 0);
            (*keys)++;
        }
        rocksdb_iter_destroy(iter);
    }
    double spent = s_now() - started;
    if (bytes == 1)
        printf(" ");    //  keeps the reads from being optimised away
    rocksdb_readoptions_destroy(read);
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        rocksdb_column_family_handle_destroy(cfs[cf]);
    rocksdb_close(db);
    rocksdb_options_destroy(options);
    return spent;
}

//  The store of DIR and the modules the sweep reads.
typedef struct {
    shoal_store_t *store;
    shoal_oplog_t *oplog;
    shoal_claim_store_t *claims;
    shoal_key_space_t *space;
} s_stack_t;

static int
s_stack_open(s_stack_t *stack, const char *db_dir)
{
    memset(stack, 0, sizeof *stack);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    stack->store = shoal_store_new(db_dir, &options, NULL);
    if (!stack->store)
        return -1;
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.node = s_nodes[0];
    oplog_options.sync = false;
    stack->oplog = shoal_oplog_new(stack->store, &oplog_options);
    stack->claims = shoal_claim_store_new(stack->store, false);
    stack->space = shoal_key_space_new(stack->store, false);
    return stack->oplog ? 0 : -1;
}

static void
s_stack_close(s_stack_t *stack)
{
    shoal_key_space_destroy(&stack->space);
    shoal_claim_store_destroy(&stack->claims);
    if (stack->oplog)
        shoal_oplog_mark_clean(stack->oplog);
    shoal_oplog_destroy(&stack->oplog);
    shoal_store_destroy(&stack->store);
}

//  A whole sweep. Returns seconds, or -1; *KEYS counts what it looked at,
//  *FINDINGS what it found.
static double
s_fsck(const char *dir, const char *db_dir, uint64_t *keys, uint64_t *findings)
{
    s_stack_t stack;
    if (s_stack_open(&stack, db_dir)) {
        s_stack_close(&stack);
        return -1;
    }
    char *guests = zsys_sprintf("%s/guests", dir);
    shoal_fsck_node_t node = {
        .node_id = s_nodes[0], .data_dir = dir, .guest_dir = guests, .oplog = stack.oplog,
        .claims = stack.claims, .space = stack.space, .moves = NULL,
    };
    shoal_fsck_t *fsck = shoal_fsck_new(NULL, s_nodes[0], stack.store);
    shoal_fsck_checks_register(fsck, &node);
    shoal_msg_fsck_report_t report;
    double started = s_now();
    int rc = shoal_fsck_run(fsck, false, &report);
    double spent = s_now() - started;
    if (rc == 0) {
        *keys = report.keys;
        *findings = report.finding_count;
        for (size_t i = 0; i < report.count && i < 10; i++)
            fprintf(stderr, "bench_fsck: finding: %s %s: %s\n", report.findings[i].where, report.findings[i].key,
                    report.findings[i].problem);
        if (*report.error)
            fprintf(stderr, "bench_fsck: %s\n", report.error);
        shoal_msg_fsck_report_codec.clear(&report);
    }
    shoal_fsck_destroy(&fsck);
    free(guests);
    s_stack_close(&stack);
    return rc ? -1 : spent;
}

int
main(void)
{
    size_t entries = s_env_count("BENCH_ENTRIES", BENCH_DEFAULT_ENTRIES);
    size_t claim_count = s_env_count("BENCH_CLAIMS", BENCH_DEFAULT_CLAIMS);
    const char *base = getenv("TMPDIR");
    char *dir = zsys_sprintf("%s/bench_fsck-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_fsck: mkdtemp");
        return 1;
    }
    char *db_dir = zsys_sprintf("%s/db", dir);
    zsys_set_logstream(NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("bench_fsck: building a store of %zu oplog entries and %zu claims in %s\n", entries, claim_count, dir);
    s_stack_t stack;
    double started = s_now();
    int rc = s_stack_open(&stack, db_dir);
    if (rc == 0)
        rc = s_build_oplog(stack.oplog, entries);
    if (rc == 0)
        rc = s_build_claims(stack.claims, claim_count);
    s_stack_close(&stack);
    if (rc == 0)
        rc = s_compact(db_dir);
    if (rc) {
        fprintf(stderr, "bench_fsck: cannot build the store\n");
        return 1;
    }
    printf("built and compacted in %.1f s\n", s_now() - started);

    double raw[BENCH_ROUNDS], swept[BENCH_ROUNDS];
    uint64_t raw_keys = 0, fsck_keys = 0, findings = 0;
    for (int round = 0; round < BENCH_ROUNDS && rc == 0; round++) {
        raw[round] = s_raw_scan(db_dir, &raw_keys);
        swept[round] = s_fsck(dir, db_dir, &fsck_keys, &findings);
        if (raw[round] < 0 || swept[round] < 0)
            rc = -1;
        else
            printf("round %d: raw scan %" PRIu64 " keys in %.3f s (%.0f keys/s); fsck %" PRIu64 " keys in %.3f s "
                   "(%.0f keys/s, %.0f oplog entries/s), %" PRIu64 " finding(s)\n", round + 1, raw_keys, raw[round],
                   (double) raw_keys / raw[round], fsck_keys, swept[round], (double) fsck_keys / swept[round],
                   (double) entries / swept[round], findings);
    }
    char *command = zsys_sprintf("rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "bench_fsck: cannot remove %s\n", dir);
    free(command);
    free(db_dir);
    free(dir);
    if (rc) {
        fprintf(stderr, "bench_fsck: a scan failed\n");
        return 1;
    }
    double raw_s = bench_median(raw, BENCH_ROUNDS), fsck_s = bench_median(swept, BENCH_ROUNDS);
    double ratio = raw_s / fsck_s;
    printf("raw scan (median): %.3f s, %.0f keys/s\n", raw_s, (double) raw_keys / raw_s);
    printf("fsck (median):     %.3f s, %.0f keys/s, %.0f oplog entries/s and %.0f claims/s\n", fsck_s,
           (double) fsck_keys / fsck_s, (double) entries / fsck_s, (double) claim_count / fsck_s);
    printf("expected: the sweep finds nothing in a sound store (%" PRIu64 " finding(s)): %s\n", findings,
           findings == 0 ? "met" : "NOT met");
    printf("expected: fsck scans at 50%% or more of a raw scan (%.0f%%): %s\n", 100 * ratio,
           ratio >= BENCH_EXPECTED_RATIO ? "met" : "NOT met");
    return 0;
}
