/*  test_oplog_migrate: a store of layout 1 (each entry stored twice, in
    oplog_by_hash and again in oplog_by_node_hlc; schema version 1) is
    migrated at open to layout 2 (each entry stored once, in
    oplog_by_node_hlc; oplog_by_hash its locator), once, in bounded writes,
    and a migration cut by kill -9 is finished by the next open.

    The old store is written here with raw RocksDB calls (rocksdb/c.h), as
    layout 1 laid it out: the rows of a reference store that appended the
    same entries through the oplog (its answers are the answers before),
    each oplog_by_hash key given its entry as value, each oplog_by_node_hlc
    key its entry too but for every EMPTY_EVERY-th, left empty as stores
    older still hold them, and the schema version set back to 1. After the
    migration every family of the log equals the reference's byte for byte,
    and the log answers as the reference does: heads, every entry by hash,
    each node's entries by stamp, the whole dataset by stamp, pages, kv
    state and counts.

    The kill test runs this program again (exec, never a fork) as a
    migrating child with small migration writes and a fault point: the
    child kills itself with SIGKILL right after its N-th write, N from a
    seeded PRNG (SHOAL_TEST_SEED repeats a run). Each cut leaves the store
    at layout 1 with its progress record; the next child resumes, and so on
    until one open finishes.

    Migrated in steps (as a node does, while it serves), the store answers
    as the reference before the first step, between steps and after the
    last; appends made between steps are written in layout 2 and the
    migration passes them.
*/
#include <czmq.h>
#include <rocksdb/c.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
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
#define PATH_MAX_TEST 4200
//  Nodes and entries per node of the stores.
#define NODES 3
#define PER_NODE 400
#define KILL_PER_NODE 4000
//  Keys the entries write to, so that kv holds winners and tombstones.
#define KEYS 40
//  Every this many oplog_by_node_hlc keys of the old store is left empty.
#define EMPTY_EVERY 7
//  Migration writes of the tests: small, so that there are many.
#define SMALL_BATCH 7
#define KILL_BATCH 100
//  Cuts the kill test makes before it lets a migration finish.
#define KILL_CUTS 4
//  A child's fault point falls after this many writes, or up to
//  KILL_AFTER_SPAN more.
#define KILL_AFTER_MIN 1
#define KILL_AFTER_SPAN 20

#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

//  The families the migration must leave as the reference has them.
static const shoal_cf_t s_compared[] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
    SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
};
static const char *s_datasets[] = { DATASET, OTHER };

static void
s_path(char *path, const char *dir, const char *name)
{
    snprintf(path, PATH_MAX_TEST, "%s/%s", dir, name);
}

static shoal_store_t *
s_store_open(const char *dir, const char *name, bool sync)
{
    char path[PATH_MAX_TEST];
    s_path(path, dir, name);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = sync;
    return shoal_store_new(path, &options, NULL);
}

//  The fault point of a migrating child: SIGKILL after write *ARG.
static void
s_kill_after(size_t writes, void *arg)
{
    if (writes == *(size_t *) arg)
        kill(getpid(), SIGKILL);
}

static shoal_oplog_t *
s_oplog_open(shoal_store_t *store, size_t migrate_batch, bool sync, size_t *kill_after)
{
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = sync;
    options.node = "self";
    options.migrate_batch = migrate_batch;
    if (kill_after) {
        options.migrated = s_kill_after;
        options.migrated_arg = kill_after;
    }
    return shoal_oplog_new(store, &options);
}

//  Builds the reference store NAME in the current layout: NODES chains of
//  PER_NODE entries in two datasets, puts and deletes over KEYS keys, some
//  local writes, and a prune of the oldest tenth of DATASET.
static void
s_reference_make(const char *name, size_t per_node)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, name, false);
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open(store, 0, false, NULL);
    CHECK(oplog);
    shoal_oplog_entry_t *entries = calloc(per_node, sizeof *entries);
    for (int n = 0; n < NODES; n++) {
        char node[16];
        snprintf(node, sizeof node, "n%d", n + 1);
        //  One chain per (dataset, node).
        chain_t chains[2] = { { node, false, { 0 } }, { node, false, { 0 } } };
        for (size_t i = 0; i < per_node; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%zu", (i * 7 + (size_t) n) % KEYS);
            shoal_oplog_op_t op = i % 5 == 4 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT;
            bool other = i % 4 == 3;
            s_entry_init(&entries[i], &chains[other ? 1 : 0], other ? OTHER : DATASET, key, op,
                         op == SHOAL_OPLOG_PUT ? node : NULL, BASE_MS + i * NODES + (size_t) n, 0);
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

//  Reads the entry that the locator of oplog_by_hash KEY (as the reference
//  FROM holds it) locates, as stored. Returns the bytes (the caller frees
//  them), or NULL.
static uint8_t *
s_located(shoal_store_t *from, const uint8_t *key, size_t key_size, const uint8_t *locator,
          size_t locator_size, size_t *size)
{
    char dataset[SHOAL_KEY_MAX];
    uint8_t hash[SHOAL_HASH_SIZE];
    size_t hash_size;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key, key_size);
    if (shoal_key_read_str(&reader, dataset, sizeof dataset)
    ||  shoal_key_read_bytes(&reader, hash, sizeof hash, &hash_size))
        return NULL;
    shoal_key_t home;
    if (shoal_oplog_key_located(&home, dataset, hash, locator, locator_size))
        return NULL;
    uint8_t *value = NULL;
    if (shoal_store_get(from, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, &value, size))
        return NULL;
    return value;
}

//  Writes store NAME in layout 1 with raw RocksDB calls, from the reference
//  REF: every row of REF, each oplog_by_hash key holding its entry, each
//  oplog_by_node_hlc key its entry too (empty for every EMPTY_EVERY-th),
//  and schema version 1.
static void
s_old_make(const char *ref, const char *name)
{
    shoal_store_t *from = s_store_open(shoal_test_dir, ref, false);
    CHECK(from);
    char path[PATH_MAX_TEST];
    s_path(path, shoal_test_dir, name);
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
    size_t empties = 0;
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        shoal_iter_t *iter = shoal_iter_new(from, (shoal_cf_t) cf, NULL, NULL);
        for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
            size_t key_size, value_size;
            const uint8_t *key = shoal_iter_key(iter, &key_size);
            const uint8_t *value = shoal_iter_value(iter, &value_size);
            uint8_t *entry = NULL;
            if (cf == SHOAL_CF_OPLOG_BY_HASH) {
                entry = s_located(from, key, key_size, value, value_size, &value_size);
                CHECK(entry);
                value = entry;
            }
            else
            if (cf == SHOAL_CF_OPLOG_BY_NODE_HLC && ++empties % EMPTY_EVERY == 0)
                value_size = 0;
            rocksdb_put_cf(db, write, cfs[cf], (const char *) key, key_size,
                           (const char *) value, value_size, &error);
            free(entry);
            CHECK_MSG(!error, "%s", error ? error : "");
        }
        shoal_iter_destroy(&iter);
    }
    //  The schema version of layout 1, encoded as the oplog encodes it.
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    shoal_key_init(&value);
    shoal_key_add_u64(&value, SHOAL_OPLOG_SCHEMA_TWICE);
    rocksdb_put_cf(db, write, cfs[SHOAL_CF_OPLOG_META], (const char *) key.bytes, key.size,
                   (const char *) value.bytes, value.size, &error);
    CHECK(!error);
    rocksdb_writeoptions_destroy(write);
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        rocksdb_column_family_handle_destroy(cfs[cf]);
    rocksdb_close(db);
    rocksdb_options_destroy(options);
    shoal_store_destroy(&from);
}

//  The schema version the store holds (0: none).
static uint64_t
s_schema(shoal_store_t *store)
{
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    uint8_t *value = NULL;
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

//  Whether a migration's progress record is in the store.
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

//  Writes ENTRY, encoded, to OUT, or "-" when it is missing.
static void
s_put_entry(FILE *out, const shoal_oplog_entry_t *entry)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[256];
    if (!entry || shoal_oplog_entry_codec.encode(entry, &bytes, &size, error, sizeof error)) {
        fputs("-", out);
        return;
    }
    fwrite(&size, sizeof size, 1, out);
    fwrite(bytes, 1, size, out);
    free(bytes);
}

//  Everything OPLOG answers about its log, as one buffer the caller frees:
//  per dataset its heads, each node's entries by stamp, every entry looked
//  up by hash, the whole dataset by stamp, each node's pages, the state of
//  every key and the counts. NULL with a message when a read fails.
static char *
s_answers(shoal_oplog_t *oplog, size_t *size)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, size);
    bool failed = false;
    for (size_t d = 0; d < COUNT_OF(s_datasets) && !failed; d++) {
        const char *dataset = s_datasets[d];
        fprintf(out, "dataset %s\n", dataset);
        shoal_oplog_heads_t heads = { 0 };
        failed = shoal_oplog_heads(oplog, dataset, &heads) != 0 || heads.count == 0;
        for (size_t h = 0; h < heads.count && !failed; h++) {
            const shoal_oplog_head_t *head = &heads.heads[h];
            fprintf(out, "head %s %" PRIu64 ".%u ", head->node, head->stamp.wall_ms, head->stamp.logic);
            fwrite(head->hash, 1, SHOAL_HASH_SIZE, out);
            shoal_oplog_list_t list = { 0 };
            failed = shoal_oplog_node_after(oplog, dataset, head->node, NULL, 0, &list) != 0;
            for (size_t i = 0; i < list.count && !failed; i++) {
                s_put_entry(out, &list.entries[i]);
                shoal_oplog_entry_t entry;
                bool found;
                failed = shoal_oplog_get(oplog, dataset, list.entries[i].hash, &entry, &found) != 0
                      || !found;
                if (!failed) {
                    s_put_entry(out, &entry);
                    shoal_oplog_entry_codec.clear(&entry);
                }
            }
            shoal_oplog_list_clear(&list);
            shoal_oplog_page_t page = { 0 };
            if (!failed)
                failed = shoal_oplog_node_page(oplog, dataset, head->node, NULL, 100000, 1 << 30,
                                               &page) != 0;
            if (!failed)
                fwrite(page.bytes, 1, page.used, out);
            shoal_oplog_page_clear(&page);
        }
        shoal_oplog_heads_clear(&heads);
        shoal_oplog_list_t all = { 0 };
        if (!failed)
            failed = shoal_oplog_after(oplog, dataset, NULL, NULL, 0, &all) != 0 || all.count == 0;
        for (size_t i = 0; i < all.count && !failed; i++)
            s_put_entry(out, &all.entries[i]);
        shoal_oplog_list_clear(&all);
        for (int k = 0; k <= KEYS && !failed; k++) {
            char key[16];
            snprintf(key, sizeof key, k == KEYS ? "local" : "k%d", k);
            shoal_kv_record_t record;
            bool found;
            failed = shoal_oplog_kv_get(oplog, dataset, key, &record, &found) != 0;
            if (!failed && found) {
                uint8_t *bytes = NULL;
                size_t record_size = 0;
                char error[256];
                if (shoal_kv_codec.encode(&record, &bytes, &record_size, error, sizeof error) == 0)
                    fwrite(bytes, 1, record_size, out);
                free(bytes);
                shoal_kv_codec.clear(&record);
            }
            fprintf(out, "key %s %d\n", key, !failed && found);
        }
        shoal_oplog_counts_t counts;
        if (!failed)
            failed = shoal_oplog_counts(oplog, dataset, &counts) != 0;
        if (!failed)
            fprintf(out, "counts %" PRIu64 " %" PRIu64 "\n", counts.entries, counts.live);
    }
    fclose(out);
    if (failed) {
        fprintf(stderr, "answers: %s\n", shoal_oplog_error(oplog));
        free(text);
        return NULL;
    }
    return text;
}

//  The reference's answers, as one buffer the caller frees.
static char *
s_reference_answers(const char *ref, size_t *size)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, ref, false);
    shoal_oplog_t *oplog = store ? s_oplog_open(store, 0, false, NULL) : NULL;
    char *answers = oplog ? s_answers(oplog, size) : NULL;
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    return answers;
}

//  Checks that STORE, opened with OPLOG after its migration, is of layout 2,
//  holds what the reference REF holds, and answers BEFORE (REF's answers).
static void
s_check_migrated(shoal_store_t *store, shoal_oplog_t *oplog, const char *ref, const char *before,
                 size_t before_size)
{
    CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_VERSION);
    CHECK(!s_migrating(store));
    shoal_store_t *ref_store = s_store_open(shoal_test_dir, ref, false);
    CHECK(ref_store);
    for (size_t f = 0; f < COUNT_OF(s_compared); f++) {
        size_t a_size, b_size;
        char *a = s_family_dump(store, s_compared[f], NULL, &a_size);
        char *b = s_family_dump(ref_store, s_compared[f], NULL, &b_size);
        bool same = a && b && a_size == b_size && memcmp(a, b, a_size) == 0;
        free(a);
        free(b);
        CHECK_MSG(same, "%s differs from the reference (%zu and %zu bytes)",
                  shoal_cf_name(s_compared[f]), a_size, b_size);
    }
    shoal_store_destroy(&ref_store);
    size_t size;
    char *after = s_answers(oplog, &size);
    CHECK(after);
    bool same = size == before_size && memcmp(after, before, size) == 0;
    free(after);
    CHECK_MSG(same, "the migrated store answers otherwise than the reference (%zu and %zu bytes)",
              size, before_size);
}

//  Counts the oplog_by_hash values of STORE that are entries (layout 1)
//  and those that are locators (layout 2).
static void
s_by_hash_values(shoal_store_t *store, size_t *entries, size_t *locators)
{
    *entries = *locators = 0;
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_OPLOG_BY_HASH, NULL, NULL);
    for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
        size_t key_size, size;
        const uint8_t *key = shoal_iter_key(iter, &key_size);
        const uint8_t *value = shoal_iter_value(iter, &size);
        char dataset[SHOAL_KEY_MAX];
        uint8_t hash[SHOAL_HASH_SIZE];
        size_t hash_size;
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, key, key_size);
        shoal_key_t home;
        if (shoal_key_read_str(&reader, dataset, sizeof dataset) == 0
        &&  shoal_key_read_bytes(&reader, hash, sizeof hash, &hash_size) == 0
        &&  shoal_oplog_key_located(&home, dataset, hash, value, size) == 0)
            (*locators)++;
        else
            (*entries)++;
    }
    shoal_iter_destroy(&iter);
}

// ---------------------------------------------------------------------------

//  A store of layout 1 is migrated once, at open, in bounded writes, and
//  then holds and answers what the same entries appended in layout 2 do.
static void
test_migrate_layout_1(void)
{
    s_reference_make("ref", PER_NODE);
    size_t before_size;
    char *before = s_reference_answers("ref", &before_size);
    CHECK(before);
    s_old_make("ref", "old");
    shoal_store_t *store = s_store_open(shoal_test_dir, "old", false);
    CHECK(store);
    //  Layout 1: every oplog_by_hash value is an entry.
    CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_TWICE);
    size_t entries, locators;
    s_by_hash_values(store, &entries, &locators);
    CHECK(entries > (size_t) NODES * PER_NODE / 2);
    CHECK_INT(locators, 0);
    shoal_oplog_t *oplog = s_oplog_open(store, SMALL_BATCH, false, NULL);
    CHECK(oplog);
    s_check_migrated(store, oplog, "ref", before, before_size);
    s_by_hash_values(store, &entries, &locators);
    CHECK_INT(entries, 0);
    //  Once: a second open finds nothing to migrate and changes nothing.
    shoal_oplog_destroy(&oplog);
    oplog = s_oplog_open(store, SMALL_BATCH, false, NULL);
    CHECK(oplog);
    s_check_migrated(store, oplog, "ref", before, before_size);
    //  It goes on as a store of layout 2: a write, read back by hash.
    shoal_oplog_entry_t written;
    CHECK_INT(shoal_oplog_write(oplog, DATASET, "after", SHOAL_OPLOG_PUT, "x", 1, &written), 0);
    shoal_oplog_entry_t read;
    bool found;
    CHECK_INT(shoal_oplog_get(oplog, DATASET, written.hash, &read, &found), 0);
    CHECK(found && read.value_size == 1);
    shoal_oplog_entry_codec.clear(&read);
    shoal_oplog_entry_codec.clear(&written);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    free(before);
}

//  Opens STORE with the migration left to the caller's steps.
static shoal_oplog_t *
s_oplog_open_in_steps(shoal_store_t *store, size_t migrate_batch)
{
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.node = "self";
    options.migrate_batch = migrate_batch;
    options.migrate_in_steps = true;
    return shoal_oplog_new(store, &options);
}

//  Appends the same COUNT entries of a new chain (node "late") to OPLOG,
//  stamped after everything the stores hold.
static void
s_append_late(shoal_oplog_t *oplog, size_t count)
{
    chain_t chain = { "late", false, { 0 } };
    shoal_oplog_entry_t *entries = calloc(count, sizeof *entries);
    for (size_t i = 0; i < count; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%zu", i % KEYS);
        s_entry_init(&entries[i], &chain, DATASET, key, SHOAL_OPLOG_PUT, "late",
                     BASE_MS + (size_t) KILL_PER_NODE * NODES * 2 + i, 0);
    }
    size_t added = 0;
    CHECK_INT(shoal_oplog_append_batch(oplog, entries, count, &added), 0);
    CHECK_INT(added, count);
    s_entries_clear(entries, count);
    free(entries);
}

//  Checks that OPLOG answers BEFORE, and that every chain of OTHER (which
//  is not pruned) reads as a chain range from its first entry to its head.
static void
s_check_answers(shoal_oplog_t *oplog, const char *before, size_t before_size, const char *when)
{
    size_t size;
    char *now = s_answers(oplog, &size);
    CHECK_MSG(now, "%s: a read failed: %s", when, shoal_oplog_error(oplog));
    bool same = size == before_size && memcmp(now, before, size) == 0;
    free(now);
    CHECK_MSG(same, "%s: the store answers otherwise than the reference (%zu and %zu bytes)", when,
              size, before_size);
    shoal_oplog_heads_t heads = { 0 };
    CHECK_INT(shoal_oplog_heads(oplog, OTHER, &heads), 0);
    CHECK(heads.count == NODES);
    for (size_t h = 0; h < heads.count; h++) {
        shoal_oplog_list_t range = { 0 }, chain = { 0 };
        CHECK_MSG(shoal_oplog_chain_range(oplog, OTHER, NULL, heads.heads[h].hash, &range) == 0,
                  "%s: chain range of %s: %s", when, heads.heads[h].node, shoal_oplog_error(oplog));
        CHECK_INT(shoal_oplog_node_after(oplog, OTHER, heads.heads[h].node, NULL, 0, &chain), 0);
        CHECK_INT(range.count, chain.count);
        shoal_oplog_list_clear(&range);
        shoal_oplog_list_clear(&chain);
    }
    shoal_oplog_heads_clear(&heads);
}

//  A store of layout 1 migrated a step at a time answers as the reference
//  does before the first step, between any two and after the last, takes
//  appends meanwhile (written in layout 2), and ends holding what the
//  reference holds, byte for byte.
static void
test_migrate_in_steps(void)
{
    s_reference_make("ref", PER_NODE);
    size_t before_size;
    char *before = s_reference_answers("ref", &before_size);
    CHECK(before);
    s_old_make("ref", "old");
    shoal_store_t *store = s_store_open(shoal_test_dir, "old", false);
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open_in_steps(store, SMALL_BATCH * 10);
    CHECK(oplog);
    //  Nothing migrated at open: the store is all layout 1, and answers.
    CHECK(shoal_oplog_migrating(oplog));
    CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_TWICE);
    size_t entries, locators;
    s_by_hash_values(store, &entries, &locators);
    CHECK_INT(locators, 0);
    s_check_answers(oplog, before, before_size, "before the first step");
    bool done = false;
    size_t steps = 0;
    while (!done) {
        CHECK_INT(shoal_oplog_migrate_step(oplog, &done), 0);
        steps++;
        if (done)
            break;
        CHECK(shoal_oplog_migrating(oplog));
        CHECK(s_migrating(store));
        //  Mixed: some entries moved, some not.
        s_by_hash_values(store, &entries, &locators);
        CHECK(entries > 0 && locators > 0);
        if (steps % 5 == 1) {
            char when[64];
            snprintf(when, sizeof when, "after step %zu", steps);
            s_check_answers(oplog, before, before_size, when);
        }
    }
    CHECK(steps > 5);
    CHECK(!shoal_oplog_migrating(oplog));
    shoal_oplog_migration_t migration;
    shoal_oplog_migration(oplog, &migration);
    CHECK(migration.moved > 0 && migration.writes >= steps);
    s_check_migrated(store, oplog, "ref", before, before_size);
    //  A step after the end does nothing.
    CHECK_INT(shoal_oplog_migrate_step(oplog, &done), 0);
    CHECK(done);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    free(before);
}

//  Appends made while a store is half migrated are written in layout 2
//  and passed by the rest of the migration; the store ends as the
//  reference given the same appends.
static void
test_migrate_with_appends(void)
{
    s_reference_make("ref", PER_NODE);
    s_old_make("ref", "old");
    shoal_store_t *store = s_store_open(shoal_test_dir, "old", false);
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open_in_steps(store, SMALL_BATCH * 10);
    CHECK(oplog);
    bool done = false;
    CHECK_INT(shoal_oplog_migrate_step(oplog, &done), 0);
    CHECK(!done);
    s_append_late(oplog, 50);
    //  And the same entries in the reference.
    shoal_store_t *ref_store = s_store_open(shoal_test_dir, "ref", false);
    shoal_oplog_t *ref = s_oplog_open(ref_store, 0, false, NULL);
    CHECK(ref);
    s_append_late(ref, 50);
    shoal_oplog_destroy(&ref);
    shoal_store_destroy(&ref_store);
    size_t before_size;
    char *before = s_reference_answers("ref", &before_size);
    CHECK(before);
    s_check_answers(oplog, before, before_size, "after appends in the mixed state");
    CHECK_INT(shoal_oplog_migrate(oplog), 0);
    shoal_oplog_migration_t migration;
    shoal_oplog_migration(oplog, &migration);
    CHECK(migration.current > 0);
    CHECK_INT(migration.corrupt, 0);
    s_check_migrated(store, oplog, "ref", before, before_size);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    free(before);
}

//  Runs this program as a migrating child of the store NAME that kills
//  itself after its KILL_AFTER-th migration write (0: never). Returns the
//  child's wait status, or -1.
static int
s_child_migrate(const char *name, size_t kill_after)
{
    char self[PATH_MAX_TEST];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0)
        return -1;
    self[length] = 0;
    char batch[32], after[32];
    snprintf(batch, sizeof batch, "%d", KILL_BATCH);
    snprintf(after, sizeof after, "%zu", kill_after);
    char *argv[] = { self, (char *) "--migrate", shoal_test_dir, (char *) name, batch, after, NULL };
    pid_t pid;
    extern char **environ;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ))
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return status;
}

//  The migrating child: opens the store NAME in DIR as a node does (store
//  sync on, synced oplog writes), migrating BATCH entries a write, killed
//  after write KILL_AFTER (0: never). Exits 0 once the oplog is open.
static int
s_migrate_child(const char *dir, const char *name, size_t batch, size_t kill_after)
{
    shoal_store_t *store = s_store_open(dir, name, true);
    shoal_oplog_t *oplog = store ? s_oplog_open(store, batch, true, kill_after ? &kill_after : NULL)
                                 : NULL;
    int code = oplog ? 0 : 1;
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    return code;
}

//  kill -9 in the middle of a migration, again and again: each cut leaves
//  layout 1 with the migration's progress record and part of the entries
//  migrated, and the next open resumes; the store then equals the
//  reference and answers as it does.
static void
test_migrate_survives_kill(void)
{
    uint64_t state = shoal_test_seed();
    s_reference_make("ref", KILL_PER_NODE);
    size_t before_size;
    char *before = s_reference_answers("ref", &before_size);
    CHECK(before);
    s_old_make("ref", "old");
    size_t last_locators = 0;
    for (int cut = 0; cut < KILL_CUTS; cut++) {
        size_t kill_after = KILL_AFTER_MIN + shoal_test_random(&state) % KILL_AFTER_SPAN;
        int status = s_child_migrate("old", kill_after);
        CHECK_MSG(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "cut %d after write %zu: the child was not killed (status %d)", cut, kill_after,
                  status);
        shoal_store_t *store = s_store_open(shoal_test_dir, "old", false);
        CHECK(store);
        CHECK_INT(s_schema(store), SHOAL_OPLOG_SCHEMA_TWICE);
        CHECK(s_migrating(store));
        size_t entries, locators;
        s_by_hash_values(store, &entries, &locators);
        shoal_store_destroy(&store);
        //  Each cut came further than the one before, and not to the end.
        printf("     cut %d after write %zu: %zu entries migrated, %zu not yet\n", cut, kill_after,
               locators, entries);
        CHECK(locators > last_locators);
        CHECK(entries > 0);
        last_locators = locators;
    }
    int status = s_child_migrate("old", 0);
    CHECK_MSG(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the last child did not finish (status %d)", status);
    shoal_store_t *store = s_store_open(shoal_test_dir, "old", false);
    CHECK(store);
    shoal_oplog_t *oplog = s_oplog_open(store, KILL_BATCH, false, NULL);
    CHECK(oplog);
    s_check_migrated(store, oplog, "ref", before, before_size);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    free(before);
}

//  A store of a version this build neither reads nor migrates is refused,
//  and says which versions it takes.
static void
test_unknown_version_refused(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, "db", false);
    CHECK(store);
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    shoal_key_init(&value);
    shoal_key_add_u64(&value, 0);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size, false), 0);
    shoal_oplog_t *oplog = s_oplog_open(store, 0, false, NULL);
    CHECK(!oplog);
    shoal_store_destroy(&store);
}

int
main(int argc, char *argv[])
{
    if (argc == 6 && streq(argv[1], "--migrate"))
        return s_migrate_child(argv[2], argv[3], strtoull(argv[4], NULL, 10),
                               strtoull(argv[5], NULL, 10));
    SHOAL_TEST(test_migrate_layout_1);
    SHOAL_TEST(test_migrate_in_steps);
    SHOAL_TEST(test_migrate_with_appends);
    SHOAL_TEST(test_migrate_survives_kill);
    SHOAL_TEST(test_unknown_version_refused);
    return shoal_test_finish();
}
