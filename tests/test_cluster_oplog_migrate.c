/*  test_cluster_oplog_migrate: a node whose store is of oplog layout 1
    (each entry stored twice; schema version 1) serves while its migration
    runs, and answers in the mixed state as it would migrated.

    The store is made in n1's data directory before n1 first starts: a
    dataset of entries from three origins appended through the oplog, then
    turned into layout 1 through the store's own calls (each oplog_by_hash
    value its entry, every EMPTY_EVERY-th oplog_by_node_hlc value empty, as
    stores older still hold them, schema version 1). n1 starts with
    SHOAL_FAULT=oplog:migrate:hold=PATH, which holds the migration after its
    first write for as long as PATH exists, so the test looks at the mixed
    state as long as it needs, never racing it:

      - status answers, and says the migration runs and how far it came;
      - killed (SIGKILL) and started again, it resumes the migration;
      - every key reads (get, and a scan of them all) as the store held it
        before, heads and counts too;
      - n2, empty, catches up from n1 in bulk (its pages are read from the
        mixed store) and converges with it; a write on each side reaches
        the other.

    Then the hold is lifted: status says the migration ended; stopped, n1's
    store is of layout 2 with no progress record, and the dataset's rows in
    every log family and kv equal n2's, byte for byte (n2 appended the same
    entries in layout 2).
*/
#include "shoal_cluster.h"
#include "shoal_key.h"
#include "shoal_oplog.h"
#include "shoal_oplog_chain.h"
#include "shoal_oplog_keys.h"
#include "shoal_store.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define DATASET "app"
//  Wall time in the past where the entries' stamps start.
#define BASE_MS UINT64_C(1700000000000)
//  Origins and entries of each in the old store: several steps of the
//  node's migration (S_MIGRATE_STEP_ENTRIES, 1,000, in shoal_node.c).
#define ORIGINS 3
#define PER_ORIGIN 3000
#define KEYS_PER_ORIGIN 300
//  Every this many oplog_by_node_hlc values of the old store is empty.
#define EMPTY_EVERY 7
#define PATH_MAX_TEST 4200
#define START_TIMEOUT_MS 30000
#define CONVERGE_TIMEOUT_MS 120000
#define MIGRATE_TIMEOUT_MS 120000
//  A catch-up of this many entries or more goes in bulk.
#define BULK_MIN "100"

#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

static const shoal_cf_t s_compared[] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
    SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
};

static shoal_store_t *
s_store_open(const char *data_dir)
{
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "%s/db", data_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    return shoal_store_new(path, &options, NULL);
}

//  Appends ORIGINS chains of PER_ORIGIN puts to DATASET in the store at
//  DATA_DIR, through the oplog (layout 2), then turns the store into layout 1.
static void
s_old_store_make(const char *data_dir)
{
    zsys_dir_create("%s/db", data_dir);
    shoal_store_t *store = s_store_open(data_dir);
    CHECK(store);
    shoal_oplog_t *oplog = shoal_oplog_new(store, NULL);
    CHECK(oplog);
    shoal_oplog_entry_t *entries = calloc(PER_ORIGIN, sizeof *entries);
    for (int o = 0; o < ORIGINS; o++) {
        char origin[16];
        snprintf(origin, sizeof origin, "o%d", o + 1);
        chain_t chain = { origin, false, { 0 } };
        for (size_t i = 0; i < PER_ORIGIN; i++) {
            char key[32], value[32];
            snprintf(key, sizeof key, "%s/%03zu", origin, i % KEYS_PER_ORIGIN);
            snprintf(value, sizeof value, "%s:%zu", origin, i);
            s_entry_init(&entries[i], &chain, DATASET, key, SHOAL_OPLOG_PUT, value,
                         BASE_MS + i * ORIGINS + (size_t) o, 0);
        }
        CHECK_INT(shoal_oplog_append_batch(oplog, entries, PER_ORIGIN, NULL), 0);
        s_entries_clear(entries, PER_ORIGIN);
    }
    free(entries);
    shoal_oplog_destroy(&oplog);
    //  Layout 1: each oplog_by_hash value the entry itself.
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_OPLOG_BY_HASH, NULL, NULL);
    size_t twice = 0;
    for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
        size_t key_size, size;
        const uint8_t *key = shoal_iter_key(iter, &key_size);
        const uint8_t *locator = shoal_iter_value(iter, &size);
        char dataset[SHOAL_KEY_MAX];
        uint8_t hash[SHOAL_HASH_SIZE];
        size_t hash_size;
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, key, key_size);
        CHECK(shoal_key_read_str(&reader, dataset, sizeof dataset) == 0
           && shoal_key_read_bytes(&reader, hash, sizeof hash, &hash_size) == 0);
        shoal_key_t home, index;
        CHECK_INT(shoal_oplog_key_located(&home, dataset, hash, locator, size), 0);
        uint8_t *entry = NULL;
        CHECK(shoal_store_get(store, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, &entry, &size) == 0 && entry);
        shoal_key_init(&index);
        memcpy(index.bytes, key, key_size);
        index.size = key_size;
        shoal_batch_put(batch, SHOAL_CF_OPLOG_BY_HASH, &index, entry, size);
        if (++twice % EMPTY_EVERY == 0)
            shoal_batch_put(batch, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, NULL, 0);
        free(entry);
    }
    shoal_iter_destroy(&iter);
    CHECK(twice >= (size_t) ORIGINS * PER_ORIGIN);
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    shoal_key_init(&value);
    shoal_key_add_u64(&value, SHOAL_OPLOG_SCHEMA_TWICE);
    shoal_batch_put(batch, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size);
    CHECK_INT(shoal_store_write(store, batch, true), 0);
    shoal_batch_destroy(&batch);
    shoal_store_destroy(&store);
}

//  The keys of the old store, in key order.
typedef struct {
    char keys[ORIGINS * KEYS_PER_ORIGIN][32];
    size_t count;
} expected_t;

static void
s_expected(expected_t *expected)
{
    expected->count = 0;
    for (int o = 0; o < ORIGINS; o++)
        for (size_t k = 0; k < KEYS_PER_ORIGIN; k++) {
            size_t count = expected->count++;
            snprintf(expected->keys[count], sizeof expected->keys[count], "o%d/%03zu", o + 1, k);
        }
}

typedef struct {
    int index;
    bool migrating;         //  wait for the migration running (true) or ended (false)
} migration_wait_t;

static bool
s_migration_is(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    migration_wait_t *wait = (migration_wait_t *) arg;
    shoal_status_t status;
    int rc = shoal_client_status(shoal_cluster_client(cluster, wait->index), &status);
    if (rc != 200) {
        snprintf(why, why_size, "status answered %d", rc);
        return false;
    }
    snprintf(why, why_size, "migrating %d, %" PRIu64 " entries moved", status.oplog_migrating,
             status.oplog_migrated);
    bool met = wait->migrating ? status.oplog_migrating && status.oplog_migrated > 0
                               : !status.oplog_migrating;
    shoal_status_clear(&status);
    return met;
}

//  Every key of EXPECTED reads at node INDEX with the value of its last put,
//  and a scan of the dataset lists exactly them.
static void
s_check_reads(shoal_cluster_t *cluster, int index, const expected_t *expected)
{
    shoal_client_t *client = shoal_cluster_client(cluster, index);
    for (size_t i = 0; i < expected->count; i++) {
        shoal_kv_value_t value;
        CHECK_INT(shoal_client_kv_get(client, DATASET, expected->keys[i], &value), 200);
        //  The last put of key k of origin o is entry i = the greatest
        //  below PER_ORIGIN with i % KEYS_PER_ORIGIN == k.
        size_t k = i % KEYS_PER_ORIGIN;
        size_t last = PER_ORIGIN - KEYS_PER_ORIGIN + k;
        char want[32];
        snprintf(want, sizeof want, "o%zu:%zu", i / KEYS_PER_ORIGIN + 1, last);
        CHECK_MSG(value.size == strlen(want) && memcmp(value.value, want, value.size) == 0,
                  "%s reads %s, not %s", expected->keys[i], (char *) value.value, want);
        CHECK_INT(value.wall_ms, BASE_MS + last * ORIGINS + i / KEYS_PER_ORIGIN);
        shoal_kv_value_clear(&value);
    }
    size_t scanned = 0;
    char after[64] = "";
    bool more = true;
    while (more) {
        shoal_kv_page_t page;
        CHECK_INT(shoal_client_kv_scan(client, DATASET, "o", *after ? after : NULL, 0, &page), 200);
        for (size_t i = 0; i < page.count; i++)
            CHECK(streq(page.items[i].key, expected->keys[scanned + i]));
        scanned += page.count;
        more = page.more && page.count > 0;
        if (page.count)
            snprintf(after, sizeof after, "%s", page.items[page.count - 1].key);
        shoal_kv_page_clear(&page);
    }
    CHECK_INT(scanned, expected->count);
}

//  The heads of node INDEX in DATASET: one per origin, at its last stamp;
//  and the counts.
static void
s_check_heads(shoal_cluster_t *cluster, int index, size_t extra_entries)
{
    shoal_client_t *client = shoal_cluster_client(cluster, index);
    shoal_head_list_t heads;
    CHECK_INT(shoal_client_oplog_heads(client, DATASET, &heads), 200);
    size_t origins = 0;
    for (size_t h = 0; h < heads.count; h++) {
        const shoal_head_info_t *head = &heads.heads[h];
        if (head->node[0] != 'o')
            continue;
        int o = atoi(head->node + 1) - 1;
        CHECK_INT(head->wall_ms, BASE_MS + (PER_ORIGIN - 1) * ORIGINS + (uint64_t) o);
        origins++;
    }
    shoal_head_list_clear(&heads);
    CHECK_INT(origins, ORIGINS);
    shoal_dataset_list_t stats;
    CHECK_INT(shoal_client_oplog_stats(client, DATASET, &stats), 200);
    CHECK_INT(stats.count, 1);
    CHECK_INT(stats.datasets[0].entries, (uint64_t) ORIGINS * PER_ORIGIN + extra_entries);
    shoal_dataset_list_clear(&stats);
}

static void
test_serves_while_migrating(void)
{
    shoal_cluster_options_t options = { .no_store_sync = true };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    s_old_store_make(shoal_cluster_data_dir(cluster, 1));
    expected_t *expected = malloc(sizeof *expected);
    s_expected(expected);
    char hold[PATH_MAX_TEST], fault[PATH_MAX_TEST + 32];
    snprintf(hold, sizeof hold, "%s/hold-migration", shoal_test_dir);
    FILE *file = fopen(hold, "w");
    CHECK(file);
    fclose(file);
    snprintf(fault, sizeof fault, "oplog:migrate:hold=%s", hold);
    CHECK(shoal_cluster_node_setenv(cluster, 1, "SHOAL_FAULT", fault) == 0);
    for (int i = 1; i <= 2; i++)
        CHECK(shoal_cluster_node_setenv(cluster, i, "SHOAL_MESH_SYNC_BULK_MIN", BULK_MIN) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));

    //  Status answers, and says the migration runs (held after its first write).
    migration_wait_t running = { 1, true };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_migration_is, &running, START_TIMEOUT_MS,
                                       "n1's migration under way") == 0, "%s",
              shoal_cluster_error(cluster));
    shoal_status_t status;
    CHECK_INT(shoal_client_status(shoal_cluster_client(cluster, 1), &status), 200);
    CHECK(status.oplog_migrating);
    CHECK(status.oplog_migrated > 0 && status.oplog_migrated < (uint64_t) ORIGINS * PER_ORIGIN);
    printf("     held after %" PRIu64 " of %d entries\n", status.oplog_migrated, ORIGINS * PER_ORIGIN);
    shoal_status_clear(&status);

    //  Mixed state: every answer as before.
    s_check_reads(cluster, 1, expected);
    s_check_heads(cluster, 1, 0);
    //  Killed in the mixed state, it starts again, resumes the migration
    //  (a step, then the hold) and answers alike.
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_migration_is, &running, START_TIMEOUT_MS,
                                       "n1's migration under way again") == 0, "%s",
              shoal_cluster_error(cluster));
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    CHECK_MSG(shoal_test_contains(log, "resuming the migration of this store"),
              "n1's log does not say it resumed the migration");
    free(log);
    s_check_reads(cluster, 1, expected);
    s_check_heads(cluster, 1, 0);
    //  A peer catches up from it, and writes reach both ways.
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, START_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, DATASET, CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    s_check_reads(cluster, 2, expected);
    s_check_heads(cluster, 2, 0);
    CHECK_INT(shoal_client_kv_put(shoal_cluster_client(cluster, 1), DATASET, "w/1", "one", 3, NULL), 200);
    CHECK_INT(shoal_client_kv_put(shoal_cluster_client(cluster, 2), DATASET, "w/2", "two", 3, NULL), 200);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, DATASET, CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    //  Still mixed: nothing of the above waited for the migration.
    CHECK_INT(shoal_client_status(shoal_cluster_client(cluster, 1), &status), 200);
    CHECK(status.oplog_migrating);
    shoal_status_clear(&status);
    s_check_heads(cluster, 1, 2);
    //  A consistency sweep meanwhile, with repair: the log is reported not
    //  checked (its old-layout half is no finding), nothing else is found,
    //  and the repair does not run the migration to its end.
    shoal_fsck_report_t report;
    CHECK_INT(shoal_client_fsck(shoal_cluster_client(cluster, 1), true, 100, NULL, NULL, &report), 200);
    bool not_checked = report.count == 1 && streq(report.findings[0].where, "oplog_by_hash")
                    && shoal_test_contains(report.findings[0].problem, "being migrated from layout 1")
                    && !report.findings[0].repairable;
    CHECK_MSG(report.done && not_checked && report.finding_count == 1 && streq(report.error, ""),
              "fsck during the migration: %zu finding(s), the first %s: %s; error %s", report.count,
              report.count ? report.findings[0].where : "-", report.count ? report.findings[0].problem : "-",
              report.error);
    shoal_fsck_report_clear(&report);
    CHECK_INT(shoal_client_status(shoal_cluster_client(cluster, 1), &status), 200);
    CHECK(status.oplog_migrating);
    shoal_status_clear(&status);

    //  The hold lifted, the migration ends.
    CHECK_INT(unlink(hold), 0);
    migration_wait_t ended = { 1, false };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_migration_is, &ended, MIGRATE_TIMEOUT_MS,
                                       "n1's migration ended") == 0, "%s", shoal_cluster_error(cluster));
    s_check_reads(cluster, 1, expected);
    s_check_heads(cluster, 1, 2);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, DATASET, CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    //  Migrated, the store is consistent to the sweep.
    CHECK_INT(shoal_client_fsck(shoal_cluster_client(cluster, 1), false, 100, NULL, NULL, &report), 200);
    CHECK_MSG(report.done && report.finding_count == 0 && streq(report.error, ""),
              "fsck after the migration: %" PRIu64 " finding(s), the first %s %s: %s", report.finding_count,
              report.count ? report.findings[0].where : "-", report.count ? report.findings[0].key : "-",
              report.count ? report.findings[0].problem : "-");
    shoal_fsck_report_clear(&report);
    //  Byte for byte: n1 migrated holds the dataset as n2, which appended
    //  it in layout 2, does.
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGTERM), 0);
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGTERM), 0);
    shoal_store_t *one = s_store_open(shoal_cluster_data_dir(cluster, 1));
    shoal_store_t *two = s_store_open(shoal_cluster_data_dir(cluster, 2));
    CHECK(one && two);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "migrating");
    bool found = true;
    CHECK_INT(shoal_store_exists(one, SHOAL_CF_OPLOG_META, &key, &found), 0);
    CHECK(!found);
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    uint8_t *value = NULL;
    size_t size = 0;
    uint64_t version = 0;
    CHECK(shoal_store_get(one, SHOAL_CF_OPLOG_META, &key, &value, &size) == 0 && value);
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    CHECK_INT(shoal_key_read_u64(&reader, &version), 0);
    free(value);
    CHECK_INT(version, SHOAL_OPLOG_SCHEMA_VERSION);
    for (size_t f = 0; f < COUNT_OF(s_compared); f++) {
        size_t a_size, b_size;
        char *a = s_family_dump(one, s_compared[f], DATASET, &a_size);
        char *b = s_family_dump(two, s_compared[f], DATASET, &b_size);
        bool same = a && b && a_size == b_size && memcmp(a, b, a_size) == 0;
        free(a);
        free(b);
        CHECK_MSG(same, "%s of %s differs between n1 and n2 (%zu and %zu bytes)",
                  shoal_cf_name(s_compared[f]), DATASET, a_size, b_size);
    }
    shoal_store_destroy(&one);
    shoal_store_destroy(&two);
    free(expected);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); } while (0)

int
main(void)
{
    zsys_init();
    S_TEST(test_serves_while_migrating);
    return shoal_test_finish();
}
