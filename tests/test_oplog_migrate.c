/*  test_oplog_migrate: a store of the earlier layout (oplog_by_node_hlc
    carrying each entry a second time, schema version 1) is migrated at
    open, resumes where a cut migration stopped, and survives kill -9 at any
    moment of it.

    The old store is made here with raw RocksDB calls, as the earlier
    layout wrote it: the rows of a reference store that appended the same
    entries (the answers before), with each oplog_by_node_hlc key given its
    entry as value and the schema version set back to 1. After the
    migration every family of the log equals the reference byte for byte,
    and the log's answers (pages, chain ranges, counts, kv) are the same.

    The kill test forks a child that opens the old store with small
    migration writes and kills it with SIGKILL after a random delay, again
    and again until one run finishes; the seed is printed and
    SHOAL_TEST_SEED repeats a run.
*/
#include <rocksdb/c.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal_oplog.h"
#include "shoal_oplog_chain.h"
#include "shoal_oplog_keys.h"
#include "shoal_store.h"
#include "shoal_test.h"

//  A wall time in the past, where hand-made stamps start.
#define BASE_MS UINT64_C(1700000000000)
#define DATASET "app"
#define OTHER "registry"
//  Room for a store path under the test directory.
#define PATH_MAX_TEST 4200
//  Nodes and entries per node of the small and the large store.
#define NODES 3
#define SMALL_PER_NODE 300
#define LARGE_PER_NODE 8000
//  Keys the entries write to, so that kv holds winners and tombstones.
#define KEYS 40
//  Migration writes of the tests: small, so that there are many.
#define SMALL_BATCH 7
#define KILL_BATCH 10
//  Kill attempts before the migration is let finish in the test itself.
#define KILL_ROUNDS 60
//  Bounds of the random delay before a kill, in microseconds.
#define KILL_DELAY_START_US 20000
#define KILL_DELAY_MAX_US 5000000

#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

//  The families whose rows the migration must leave as the reference has them.
static const shoal_cf_t s_compared[] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
    SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
};

static void
s_path(char *path, const char *name)
{
    snprintf(path, PATH_MAX_TEST, "%s/%s", shoal_test_dir, name);
}

static shoal_store_t *
s_store_open_sync(const char *name, bool sync)
{
    char path[PATH_MAX_TEST];
    s_path(path, name);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = sync;
    return shoal_store_new(path, &options, NULL);
}

static shoal_store_t *
s_store_open(const char *name)
{
    return s_store_open_sync(name, false);
}

static shoal_oplog_t *
s_oplog_open(shoal_store_t *store, size_t migrate_batch, bool sync)
{
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = sync;
    options.node = "self";
    options.migrate_batch = migrate_batch;
    return shoal_oplog_new(store, &options);
}

//  A small PRNG (splitmix64): a run repeats from its seed.
static uint64_t
s_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t
s_seed(void)
{
    const char *text = getenv("SHOAL_TEST_SEED");
    uint64_t seed = text ? strtoull(text, NULL, 10) : (uint64_t) time(NULL);
    printf("     seed %" PRIu64 " (SHOAL_TEST_SEED repeats it)\n", seed);
    return seed;
}

//  Builds the reference store NAME in the current layout: NODES chains of
//  PER_NODE entries in two datasets, puts and deletes over KEYS keys, some
//  local writes, and a prune of the oldest tenth of DATASET.
static void
s_reference_make(const char *name, size_t per_node)
{
    shoal_store_t *store = s_store_open(name);
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open(store, 0, false);
    CHECK(oplog);
    char node[16];
    shoal_oplog_entry_t *entries = calloc(per_node, sizeof *entries);
    for (int n = 0; n < NODES; n++) {
        snprintf(node, sizeof node, "n%d", n + 1);
        chain_t chain = { node, false, { 0 } };
        for (size_t i = 0; i < per_node; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%zu", (i * 7 + (size_t) n) % KEYS);
            shoal_oplog_op_t op = i % 5 == 4 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT;
            s_entry_init(&entries[i], &chain, i % 4 == 3 ? OTHER : DATASET, key, op,
                         op == SHOAL_OPLOG_PUT ? node : NULL, BASE_MS + i * NODES + (size_t) n, 0);
        }
        //  One chain per (dataset, node): each dataset's entries link apart.
        chain_t chains[2] = { { node, false, { 0 } }, { node, false, { 0 } } };
        for (size_t i = 0; i < per_node; i++) {
            chain_t *own = &chains[streq(entries[i].dataset, OTHER) ? 1 : 0];
            entries[i].has_prev = own->has_prev;
            memcpy(entries[i].prev_hash, own->prev, SHOAL_HASH_SIZE);
            shoal_oplog_entry_hash(&entries[i], entries[i].hash);
            own->has_prev = true;
            memcpy(own->prev, entries[i].hash, SHOAL_HASH_SIZE);
        }
        for (size_t i = 0; i < per_node; i += 1000) {
            size_t count = per_node - i < 1000 ? per_node - i : 1000;
            CHECK_INT(shoal_oplog_append_batch(oplog, entries + i, count, NULL), 0);
        }
        s_entries_clear(entries, per_node);
    }
    free(entries);
    for (int i = 0; i < 5; i++)
        CHECK_INT(shoal_oplog_write(oplog, DATASET, "local", SHOAL_OPLOG_PUT, "mine", 4, NULL), 0);
    shoal_hlc_stamp_t cutoff = { BASE_MS + per_node * NODES / 10, 0 };
    CHECK_INT(shoal_oplog_prune(oplog, DATASET, &cutoff, NULL), 0);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
}

//  Makes store NAME in the earlier layout from the reference REF with raw
//  RocksDB calls: every row of REF, each oplog_by_node_hlc key with its
//  entry as value, and schema version 1.
static void
s_old_make(const char *ref, const char *name)
{
    shoal_store_t *from = s_store_open(ref);
    CHECK(from);
    char path[PATH_MAX_TEST];
    s_path(path, name);
    rocksdb_options_t *options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(options, 1);
    rocksdb_options_set_create_missing_column_families(options, 1);
    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        cf_options[cf] = options;
    }
    char *error = NULL;
    rocksdb_t *db = rocksdb_open_column_families(options, path, SHOAL_CF_COUNT, names,
                                                 cf_options, cfs, &error);
    CHECK_MSG(db && !error, "%s", error ? error : "");
    rocksdb_writeoptions_t *write = rocksdb_writeoptions_create();
    for (int cf = 0; db && cf < SHOAL_CF_COUNT; cf++) {
        shoal_iter_t *iter = shoal_iter_new(from, (shoal_cf_t) cf, NULL, NULL);
        for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
            size_t key_size, value_size;
            const uint8_t *key = shoal_iter_key(iter, &key_size);
            const uint8_t *value = shoal_iter_value(iter, &value_size);
            uint8_t *carried = NULL;
            if (cf == SHOAL_CF_OPLOG_BY_NODE_HLC) {
                //  (dataset, node, wall, logic, hash): the hash ends the key.
                char dataset[SHOAL_KEY_MAX], node[SHOAL_KEY_MAX];
                uint64_t wall, logic;
                uint8_t hash[SHOAL_HASH_SIZE];
                size_t hash_size;
                shoal_key_reader_t reader;
                shoal_key_reader_init(&reader, key, key_size);
                CHECK(shoal_key_read_str(&reader, dataset, sizeof dataset) == 0
                      && shoal_key_read_str(&reader, node, sizeof node) == 0
                      && shoal_key_read_u64(&reader, &wall) == 0
                      && shoal_key_read_u64(&reader, &logic) == 0
                      && shoal_key_read_bytes(&reader, hash, sizeof hash, &hash_size) == 0);
                shoal_key_t entry_key;
                shoal_oplog_key_by_hash(&entry_key, dataset, hash);
                CHECK_INT(shoal_store_get(from, SHOAL_CF_OPLOG_BY_HASH, &entry_key, &carried,
                                          &value_size), 0);
                CHECK(carried != NULL);
                value = carried;
            }
            rocksdb_put_cf(db, write, cfs[cf], (const char *) key, key_size,
                           (const char *) value, value_size, &error);
            CHECK_MSG(!error, "%s", error ? error : "");
            free(carried);
        }
        shoal_iter_destroy(&iter);
    }
    //  The schema version of the earlier layout, encoded as the oplog does.
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    shoal_key_init(&value);
    shoal_key_add_u64(&value, SHOAL_OPLOG_SCHEMA_CARRIED);
    rocksdb_put_cf(db, write, cfs[SHOAL_CF_OPLOG_META], (const char *) key.bytes, key.size,
                   (const char *) value.bytes, value.size, &error);
    CHECK(!error);
    rocksdb_writeoptions_destroy(write);
    for (int cf = 0; db && cf < SHOAL_CF_COUNT; cf++)
        rocksdb_column_family_handle_destroy(cfs[cf]);
    if (db)
        rocksdb_close(db);
    rocksdb_options_destroy(options);
    shoal_store_destroy(&from);
}

//  Every key and value of CF, length-prefixed, as one buffer the caller frees.
static char *
s_dump(shoal_store_t *store, shoal_cf_t cf, size_t *size)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, size);
    shoal_iter_t *iter = shoal_iter_new(store, cf, NULL, NULL);
    for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
        size_t key_size, value_size;
        const uint8_t *key = shoal_iter_key(iter, &key_size);
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        fwrite(&key_size, sizeof key_size, 1, out);
        fwrite(key, 1, key_size, out);
        fwrite(&value_size, sizeof value_size, 1, out);
        fwrite(value, 1, value_size, out);
    }
    shoal_iter_destroy(&iter);
    fclose(out);
    return text;
}

//  The number of oplog_by_node_hlc keys that still carry a value.
static size_t
s_carried(shoal_store_t *store)
{
    size_t carried = 0;
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_OPLOG_BY_NODE_HLC, NULL, NULL);
    for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
        size_t size;
        shoal_iter_value(iter, &size);
        carried += size ? 1 : 0;
    }
    shoal_iter_destroy(&iter);
    return carried;
}

//  The schema version the store holds (0: none).
static uint64_t
s_schema(shoal_store_t *store)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    uint8_t *value;
    size_t size;
    uint64_t version = 0;
    if (shoal_store_get(store, SHOAL_CF_OPLOG_META, &key, &value, &size) == 0 && value) {
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, value, size);
        if (shoal_key_read_u64(&reader, &version))
            version = 0;
    }
    free(value);
    return version;
}

//  Whether the migration's progress record is in the store.
static bool
s_migrating(shoal_store_t *store)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "migrating");
    bool found = false;
    shoal_store_exists(store, SHOAL_CF_OPLOG_META, &key, &found);
    return found;
}

//  A node's whole chain in DATASET as pages would serve it, as one buffer.
static char *
s_pages(shoal_oplog_t *oplog, const char *dataset, const char *node, size_t *size)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, size);
    shoal_hlc_stamp_t after = { 0, 0 };
    bool more = true, first = true;
    while (more) {
        shoal_oplog_page_t page = { 0 };
        if (shoal_oplog_node_page(oplog, dataset, node, first ? NULL : &after, 100, 1 << 20,
                                  &page)) {
            fputs("error", out);
            break;
        }
        fwrite(page.bytes, 1, page.used, out);
        more = page.more;
        after = page.last;
        first = false;
        shoal_oplog_page_clear(&page);
    }
    fclose(out);
    return text;
}

//  Checks that STORE, opened with OPLOG after its migration, holds what the
//  reference REF holds and answers as it does.
static void
s_check_equal(shoal_store_t *store, shoal_oplog_t *oplog, const char *ref)
{
    CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_VERSION);
    CHECK(!s_migrating(store));
    CHECK_INT(s_carried(store), 0);
    shoal_store_t *ref_store = s_store_open(ref);
    shoal_oplog_t *ref_oplog = s_oplog_open(ref_store, 0, false);
    CHECK(ref_oplog);
    for (size_t f = 0; f < COUNT_OF(s_compared); f++) {
        size_t a_size, b_size;
        char *a = s_dump(store, s_compared[f], &a_size);
        char *b = s_dump(ref_store, s_compared[f], &b_size);
        CHECK_MSG(a && b && a_size == b_size && memcmp(a, b, a_size) == 0,
                  "%s differs from the reference (%zu and %zu bytes)",
                  shoal_cf_name(s_compared[f]), a_size, b_size);
        free(a);
        free(b);
    }
    const char *datasets[] = { DATASET, OTHER };
    for (size_t d = 0; d < COUNT_OF(datasets); d++) {
        shoal_oplog_counts_t mine, theirs;
        CHECK_INT(shoal_oplog_counts(oplog, datasets[d], &mine), 0);
        CHECK_INT(shoal_oplog_counts(ref_oplog, datasets[d], &theirs), 0);
        CHECK(mine.entries == theirs.entries && mine.live == theirs.live);
        CHECK(mine.entries > 0);
        for (int n = 0; n < NODES; n++) {
            char node[16];
            snprintf(node, sizeof node, "n%d", n + 1);
            size_t a_size, b_size;
            char *a = s_pages(oplog, datasets[d], node, &a_size);
            char *b = s_pages(ref_oplog, datasets[d], node, &b_size);
            CHECK_MSG(a_size > 0 && a_size == b_size && memcmp(a, b, a_size) == 0,
                      "pages of %s/%s differ", datasets[d], node);
            free(a);
            free(b);
            //  A chain range to the head reads the same.
            shoal_oplog_head_t head;
            bool found;
            CHECK_INT(shoal_oplog_head(oplog, datasets[d], node, &head, &found), 0);
            CHECK(found);
            shoal_oplog_list_t mine_range = { 0 }, ref_range = { 0 };
            shoal_oplog_list_t all = { 0 };
            CHECK_INT(shoal_oplog_node_after(oplog, datasets[d], node, NULL, 0, &all), 0);
            CHECK(all.count > 2);
            const uint8_t *start = all.entries[all.count / 2].hash;
            CHECK_INT(shoal_oplog_chain_range(oplog, datasets[d], start, head.hash, &mine_range), 0);
            CHECK_INT(shoal_oplog_chain_range(ref_oplog, datasets[d], start, head.hash, &ref_range), 0);
            CHECK_INT(mine_range.count, ref_range.count);
            CHECK_INT(mine_range.count, all.count - all.count / 2 - 1);
            free(head.node);
            shoal_oplog_list_clear(&all);
            shoal_oplog_list_clear(&mine_range);
            shoal_oplog_list_clear(&ref_range);
        }
    }
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(oplog, DATASET, "local", &record, &found), 0);
    CHECK(found && record.value_size == 4 && memcmp(record.value, "mine", 4) == 0);
    shoal_kv_codec.clear(&record);
    shoal_oplog_destroy(&ref_oplog);
    shoal_store_destroy(&ref_store);
}

// ---------------------------------------------------------------------------

//  A store of the earlier layout is migrated once, at open, in bounded
//  writes, and then reads as a store written in the new layout.
static void
test_migrate_carried_layout(void)
{
    s_reference_make("ref", SMALL_PER_NODE);
    s_old_make("ref", "old");
    shoal_store_t *store = s_store_open("old");
    CHECK(store);
    //  The layout before: every key carries its entry.
    CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_CARRIED);
    size_t before = s_carried(store);
    CHECK(before > (size_t) NODES * SMALL_PER_NODE / 2);
    shoal_oplog_t *oplog = s_oplog_open(store, SMALL_BATCH, false);
    CHECK(oplog);
    if (oplog)
        s_check_equal(store, oplog, "ref");
    //  Once: a second open finds nothing to migrate and changes nothing.
    shoal_oplog_destroy(&oplog);
    oplog = s_oplog_open(store, SMALL_BATCH, false);
    CHECK(oplog);
    if (oplog)
        s_check_equal(store, oplog, "ref");
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
}

//  A migration cut after some of its writes (its progress record names the
//  last key it covered, and the keys up to there are migrated) resumes
//  after that key.
static void
test_migrate_resumes(void)
{
    s_reference_make("ref", SMALL_PER_NODE);
    s_old_make("ref", "old");
    shoal_store_t *store = s_store_open("old");
    CHECK(store);
    //  What a cut migration leaves: the first half migrated, the record
    //  naming the last of them.
    size_t total = 0, half = s_carried(store) / 2;
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_OPLOG_BY_NODE_HLC, NULL, NULL);
    shoal_key_t last;
    shoal_key_init(&last);
    for (bool on = shoal_iter_first(iter); on && total < half; on = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_key_init(&last);
        memcpy(last.bytes, bytes, size);
        last.size = size;
        CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_BY_NODE_HLC, &last, "", 0, false), 0);
        total++;
    }
    shoal_iter_destroy(&iter);
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "migrating");
    shoal_key_init(&value);
    shoal_key_add_bytes(&value, last.bytes, last.size);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size, false), 0);
    CHECK(s_carried(store) > 0);
    shoal_oplog_t *oplog = s_oplog_open(store, SMALL_BATCH, false);
    CHECK(oplog);
    if (oplog)
        s_check_equal(store, oplog, "ref");
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
}

//  kill -9 at random moments of a migration: whatever moment it comes, the
//  next open finishes the migration and the store equals the reference.
static void
test_migrate_survives_kill(void)
{
    uint64_t state = s_seed();
    s_reference_make("ref", LARGE_PER_NODE);
    s_old_make("ref", "old");
    size_t killed = 0, cut = 0;
    bool finished = false;
    //  The delays grow while kills come before the migration starts (the
    //  open itself takes a while on a busy machine).
    uint64_t delay_us = KILL_DELAY_START_US;
    for (int round = 0; round < KILL_ROUNDS && !finished; round++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            //  Synced writes, as a node makes them: each one a point a kill
            //  may fall after.
            shoal_store_t *store = s_store_open_sync("old", true);
            shoal_oplog_t *oplog = store ? s_oplog_open(store, KILL_BATCH, true) : NULL;
            _exit(oplog ? 0 : 1);
        }
        usleep((useconds_t) (s_random(&state) % delay_us));
        kill(pid, SIGKILL);
        int status;
        CHECK_INT(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status)) {
            killed++;
            shoal_store_t *store = s_store_open("old");
            CHECK(store);
            if (store && s_schema(store) == SHOAL_OPLOG_SCHEMA_CARRIED && s_migrating(store))
                cut++;
            else
            if (delay_us < KILL_DELAY_MAX_US)
                delay_us *= 2;
            shoal_store_destroy(&store);
        }
        else {
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: %d",
                      status);
            finished = true;
        }
    }
    printf("     %zu runs killed, %zu of them in the middle of the migration\n", killed, cut);
    shoal_store_t *store = s_store_open("old");
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open(store, KILL_BATCH, false);
    CHECK(oplog);
    if (oplog)
        s_check_equal(store, oplog, "ref");
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
}

int
main(void)
{
    SHOAL_TEST(test_migrate_carried_layout);
    SHOAL_TEST(test_migrate_resumes);
    SHOAL_TEST(test_migrate_survives_kill);
    return shoal_test_finish();
}
