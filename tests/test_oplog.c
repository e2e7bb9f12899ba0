/*  test_oplog: the operation log, its indexes, heads, prune, chain ranges,
    materialised datasets, and startup reconciliation.

    Entries from other nodes are built here by hand (s_entry_init), linked
    into per-node chains and hashed with shoal_oplog_entry_hash, exactly as a
    peer would send them. Stamps start at BASE_MS, in the past, so that the
    clock accepts them. Tests that damage the store do it through the store
    API, the way a bug or a torn upgrade would, and then reopen.

    The apply-order test shuffles with a seeded PRNG; the seed is printed and
    SHOAL_TEST_SEED repeats a run.
*/
#include <stdlib.h>
#include <time.h>

#include "shoal_oplog.h"
#include "shoal_oplog_chain.h"
#include "shoal_oplog_keys.h"
#include "shoal_store.h"
#include "shoal_test.h"
#include "shoal_alloc.h"

//  A wall time in the past (2023-11-14), where hand-made stamps start.
#define BASE_MS UINT64_C(1700000000000)
#define DATASET "app"
//  Room for a store path under the test directory.
#define PATH_MAX_TEST 4200
//  Capacity of the entry arrays the tests build.
#define ENTRIES_MAX 256
//  The remote-clock bound of the clock test.
#define MAX_AHEAD_MS 5000
//  Permutations applied in the order-independence tests.
#define PERMUTATIONS 6
//  Nodes, keys and entries per node in the order-independence test.
#define ORDER_NODES 3
#define ORDER_KEYS 5
#define ORDER_PER_NODE 20
//  Largest batch the order-independence test applies at once.
#define ORDER_BATCH_MAX 7

#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

//  A store and the oplog on it.
typedef struct {
    shoal_store_t *store;
    shoal_oplog_t *oplog;
} fixture_t;


//  The hand-moved physical clock.
typedef struct {
    uint64_t now_ms;
} fake_clock_t;

static uint64_t
s_fake_clock(void *arg)
{
    return ((fake_clock_t *) arg)->now_ms;
}

//  Opens the store in the test directory's NAME with an oplog for NODE
//  (may be NULL), with OPTIONS (NULL: defaults without fsync).
static int
s_open_with(fixture_t *fixture, const char *name, const char *node,
            shoal_oplog_options_t *options)
{
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "%s/%s", shoal_test_dir, name);
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    fixture->store = shoal_store_new(path, &store_options, NULL);
    if (!fixture->store)
        return -1;
    shoal_oplog_options_t defaults;
    if (!options) {
        shoal_oplog_options_default(&defaults);
        defaults.sync = false;
        options = &defaults;
    }
    options->node = node;
    fixture->oplog = shoal_oplog_new(fixture->store, options);
    return fixture->oplog ? 0 : -1;
}

static int
s_open(fixture_t *fixture, const char *name, const char *node)
{
    return s_open_with(fixture, name, node, NULL);
}

static void
s_close(fixture_t *fixture)
{
    shoal_oplog_destroy(&fixture->oplog);
    shoal_store_destroy(&fixture->store);
}


static bool
s_same_hash(const uint8_t *a, const uint8_t *b)
{
    return memcmp(a, b, SHOAL_HASH_SIZE) == 0;
}

static int64_t
s_count(fixture_t *fixture, shoal_cf_t cf, const char *dataset)
{
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, dataset);
    return shoal_store_count(fixture->store, cf, &prefix);
}

static bool
s_has_entry(fixture_t *fixture, const char *dataset, const uint8_t *hash)
{
    shoal_oplog_entry_t entry;
    bool found = false;
    if (shoal_oplog_get(fixture->oplog, dataset, hash, &entry, &found) == 0 && found)
        shoal_oplog_entry_codec.clear(&entry);
    return found;
}

//  Every key and value of CF under DATASET (NULL: the whole family),
//  length-prefixed, as one buffer the caller frees.
static char *
s_dump(fixture_t *fixture, shoal_cf_t cf, const char *dataset, size_t *size)
{
    return s_family_dump(fixture->store, cf, dataset, size);
}

//  True when two dumps are byte for byte the same.
static bool
s_same_dump(const char *a, size_t a_size, const char *b, size_t b_size)
{
    return a && b && a_size == b_size && memcmp(a, b, a_size) == 0;
}

static void
s_shuffle(size_t *order, size_t count, uint64_t *state)
{
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t) (shoal_test_random(state) % i);
        size_t swap = order[i - 1];
        order[i - 1] = order[j];
        order[j] = swap;
    }
}

static int s_epoch_extract(const uint8_t *value, size_t size, uint64_t *epoch, void *arg);

// ---------------------------------------------------------------------------

//  One append writes the entry and a key in every index, the head and the
//  kv state; pruning it removes every index key again.
static void
test_index_consistency(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entry;
    s_entry_init(&entry, &chain, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS, 1);
    bool added;
    CHECK_INT(shoal_oplog_append(fixture.oplog, &entry, &added), 0);
    CHECK(added);

    //  Each family holds exactly the key the layout says.
    shoal_key_t key;
    bool found;
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, entry.hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_exists(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, &found), 0);
    CHECK(found);
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_u64(&key, BASE_MS);
    shoal_key_add_u64(&key, 1);
    shoal_key_add_str(&key, "n1");
    shoal_key_add_bytes(&key, entry.hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_exists(fixture.store, SHOAL_CF_OPLOG_BY_HLC, &key, &found), 0);
    CHECK(found);
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "n1");
    shoal_key_add_u64(&key, BASE_MS);
    shoal_key_add_u64(&key, 1);
    shoal_key_add_bytes(&key, entry.hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_exists(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, &found), 0);
    CHECK(found);
    const shoal_cf_t families[] = {
        SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
        SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
    };
    for (size_t i = 0; i < COUNT_OF(families); i++)
        CHECK_MSG(s_count(&fixture, families[i], DATASET) == 1, "%s",
                  shoal_cf_name(families[i]));
    //  The retired successor index stays empty.
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_PREV_TO_HASH, DATASET), 0);

    shoal_oplog_head_t head;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "n1", &head, &found), 0);
    CHECK(found);
    CHECK(s_same_hash(head.hash, entry.hash));
    CHECK_INT(head.stamp.wall_ms, BASE_MS);
    CHECK_INT(head.stamp.logic, 1);
    free(head.node);
    shoal_oplog_entry_t read;
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entry.hash, &read, &found), 0);
    CHECK(found);
    CHECK_STR(read.key, "k");
    CHECK_STR(read.node, "n1");
    CHECK_INT(read.value_size, 1);
    CHECK(memcmp(read.value, "v", 1) == 0);
    CHECK(!read.has_prev);
    CHECK(s_same_hash(read.hash, entry.hash));
    shoal_oplog_entry_codec.clear(&read);

    shoal_hlc_stamp_t cutoff = { BASE_MS, 1 };
    size_t pruned;
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &cutoff, &pruned), 0);
    CHECK_INT(pruned, 1);
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(s_count(&fixture, families[i], DATASET) == 0, "%s",
                  shoal_cf_name(families[i]));
    //  The head stays on the pruned entry (see shoal_oplog_head), and the
    //  materialised key stays.
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_NODE_HEAD, DATASET), 1);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 1);
    shoal_oplog_entry_codec.clear(&entry);
    s_close(&fixture);
}

//  Prune removes exactly the entries stamped at or before the cutoff, from
//  interleaved nodes, including one that arrived late with an old stamp,
//  in several bounded writes.
static void
test_prune_cutoff(void)
{
    fixture_t fixture;
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.prune_batch = 4;
    CHECK_INT(s_open_with(&fixture, "db", "self", &options), 0);

    chain_t chains[] = { { "a", false, { 0 } }, { "b", false, { 0 } }, { "c", false, { 0 } } };
    shoal_oplog_entry_t entries[ENTRIES_MAX];
    size_t count = 0;
    //  a at 0, 3, 6...; b at 1, 4, 7...; c at 2, 5, 8... (ms after BASE_MS).
    for (int step = 0; step < 10; step++)
        for (size_t n = 0; n < COUNT_OF(chains); n++) {
            char key[32];
            snprintf(key, sizeof key, "k%d", step);
            s_entry_init(&entries[count++], &chains[n], DATASET, key, SHOAL_OPLOG_PUT, "v",
                         BASE_MS + (uint64_t) step * 3 + n, 0);
        }
    //  Just after the cutoff in the same millisecond: it stays.
    chain_t late_chain = { "d", false, { 0 } };
    s_entry_init(&entries[count++], &late_chain, DATASET, "late", SHOAL_OPLOG_PUT, "v",
                 BASE_MS + 14, 1);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, count, NULL), 0);
    //  Arrives last, stamped early: it goes although it is the newest arrival.
    chain_t old_chain = { "e", false, { 0 } };
    s_entry_init(&entries[count], &old_chain, DATASET, "old", SHOAL_OPLOG_PUT, "v",
                 BASE_MS + 5, 0);
    bool added;
    CHECK_INT(shoal_oplog_append(fixture.oplog, &entries[count++], &added), 0);
    CHECK(added);
    //  One index key has lost its prev hash: prune reads that entry instead.
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_u64(&key, entries[3].wall_ms);
    shoal_key_add_u64(&key, entries[3].logic);
    shoal_key_add_str(&key, entries[3].node);
    shoal_key_add_bytes(&key, entries[3].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_HLC, &key, "bad", 3, false), 0);

    shoal_hlc_stamp_t cutoff = { BASE_MS + 14, 0 };
    size_t pruned;
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &cutoff, &pruned), 0);
    //  a, b and c have five entries each at or before +14, plus the late one.
    CHECK_INT(pruned, 16);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        shoal_hlc_stamp_t stamp = { entries[i].wall_ms, entries[i].logic };
        bool expected = shoal_hlc_compare(&stamp, &cutoff) > 0;
        CHECK_MSG(s_has_entry(&fixture, DATASET, entries[i].hash) == expected,
                  "entry %zu at +%" PRIu64 ".%u", i, entries[i].wall_ms - BASE_MS,
                  entries[i].logic);
        kept += expected;
    }
    CHECK_INT(kept, count - 16);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), (int64_t) kept);
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_BY_HASH, DATASET), (int64_t) kept);
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_BY_NODE_HLC, DATASET), (int64_t) kept);
    //  What is left reads back in stamp order, starting after the cutoff.
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_export(fixture.oplog, DATASET, &list), 0);
    CHECK_INT(list.count, kept);
    for (size_t i = 0; i < list.count; i++) {
        shoal_hlc_stamp_t stamp = { list.entries[i].wall_ms, list.entries[i].logic };
        CHECK(shoal_hlc_compare(&stamp, &cutoff) > 0);
        if (i > 0) {
            shoal_hlc_stamp_t previous = { list.entries[i - 1].wall_ms, list.entries[i - 1].logic };
            CHECK(shoal_hlc_compare(&previous, &stamp) <= 0);
        }
    }
    shoal_oplog_list_clear(&list);
    //  Materialised state is not the log's to prune.
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 12);
    s_entries_clear(entries, count);
    s_close(&fixture);
}

//  A head advances only to a newer entry; after a prune it names the
//  node's latest remaining entry, or the last pruned one when none is left,
//  which the node's next write then links to.
static void
test_node_heads(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    chain_t a = { "a", false, { 0 } }, b = { "b", false, { 0 } };
    shoal_oplog_entry_t a1, a2, b1, b2;
    s_entry_init(&a1, &a, DATASET, "x", SHOAL_OPLOG_PUT, "1", BASE_MS + 10, 0);
    s_entry_init(&a2, &a, DATASET, "x", SHOAL_OPLOG_PUT, "2", BASE_MS + 20, 0);
    s_entry_init(&b1, &b, DATASET, "y", SHOAL_OPLOG_PUT, "1", BASE_MS + 5, 0);
    s_entry_init(&b2, &b, DATASET, "y", SHOAL_OPLOG_PUT, "2", BASE_MS + 30, 0);

    shoal_oplog_head_t head;
    bool found;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "a", &head, &found), 0);
    CHECK(!found);
    //  a2 arrives before a1: the head stays on a2.
    CHECK_INT(shoal_oplog_append(fixture.oplog, &a2, NULL), 0);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &a1, NULL), 0);
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "a", &head, &found), 0);
    CHECK(found);
    CHECK(s_same_hash(head.hash, a2.hash));
    free(head.node);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &b1, NULL), 0);
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "b", &head, &found), 0);
    CHECK(s_same_hash(head.hash, b1.hash));
    free(head.node);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &b2, NULL), 0);
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "b", &head, &found), 0);
    CHECK(s_same_hash(head.hash, b2.hash));
    CHECK_INT(head.stamp.wall_ms, BASE_MS + 30);
    free(head.node);

    shoal_hlc_stamp_t cutoff = { BASE_MS + 20, 0 };
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &cutoff, NULL), 0);
    shoal_oplog_heads_t heads = { 0 };
    CHECK_INT(shoal_oplog_heads(fixture.oplog, DATASET, &heads), 0);
    CHECK_INT(heads.count, 2);
    CHECK_STR(heads.heads[0].node, "a");
    CHECK(s_same_hash(heads.heads[0].hash, a2.hash));
    CHECK_STR(heads.heads[1].node, "b");
    CHECK(s_same_hash(heads.heads[1].hash, b2.hash));
    shoal_oplog_heads_clear(&heads);

    //  a's chain goes on from its pruned head, and a peer that knew a2 can
    //  still follow it.
    shoal_oplog_entry_t a3;
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "x", SHOAL_OPLOG_PUT, "3", 1, &a3), 0);
    CHECK(a3.has_prev);
    CHECK(s_same_hash(a3.prev_hash, a2.hash));
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, a2.hash, a3.hash, &list), 0);
    CHECK_INT(list.count, 1);
    CHECK(s_same_hash(list.entries[0].hash, a3.hash));
    shoal_oplog_list_clear(&list);

    shoal_oplog_entry_codec.clear(&a1);
    shoal_oplog_entry_codec.clear(&a2);
    shoal_oplog_entry_codec.clear(&a3);
    shoal_oplog_entry_codec.clear(&b1);
    shoal_oplog_entry_codec.clear(&b2);
    s_close(&fixture);
}

//  Heads, scans, kv state and the watermark read the same after a reopen,
//  and the node's chain goes on where it stopped.
static void
test_restart_durability(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    for (int i = 0; i < 20; i++) {
        char key[32], value[32];
        snprintf(key, sizeof key, "k%d", i % 7);
        snprintf(value, sizeof value, "v%d", i);
        CHECK_INT(shoal_oplog_write(fixture.oplog, i % 2 ? DATASET : "other", key,
                                    i % 5 == 4 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                                    value, strlen(value), NULL), 0);
    }
    chain_t peer = { "peer", false, { 0 } };
    shoal_oplog_entry_t entries[10];
    for (int i = 0; i < 10; i++)
        s_entry_init(&entries[i], &peer, DATASET, "p", SHOAL_OPLOG_PUT, "x", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 10, NULL), 0);
    shoal_hlc_stamp_t cutoff = { BASE_MS + 4, 0 };
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &cutoff, NULL), 0);

    const char *datasets[] = { DATASET, "other" };
    const shoal_cf_t families[] = {
        SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
    };
    char *before[COUNT_OF(datasets)][COUNT_OF(families)];
    size_t before_size[COUNT_OF(datasets)][COUNT_OF(families)];
    shoal_oplog_list_t exports[COUNT_OF(datasets)];
    memset(exports, 0, sizeof exports);
    for (size_t d = 0; d < COUNT_OF(datasets); d++) {
        for (size_t f = 0; f < COUNT_OF(families); f++)
            before[d][f] = s_dump(&fixture, families[f], datasets[d], &before_size[d][f]);
        CHECK_INT(shoal_oplog_export(fixture.oplog, datasets[d], &exports[d]), 0);
    }
    shoal_oplog_head_t head;
    bool found;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "self", &head, &found), 0);
    CHECK(found);
    s_close(&fixture);

    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    for (size_t d = 0; d < COUNT_OF(datasets); d++) {
        for (size_t f = 0; f < COUNT_OF(families); f++) {
            size_t size;
            char *after = s_dump(&fixture, families[f], datasets[d], &size);
            CHECK_MSG(s_same_dump(before[d][f], before_size[d][f], after, size), "%s %s",
                      datasets[d], shoal_cf_name(families[f]));
            free(after);
            free(before[d][f]);
        }
        shoal_oplog_list_t list = { 0 };
        CHECK_INT(shoal_oplog_export(fixture.oplog, datasets[d], &list), 0);
        CHECK_INT(list.count, exports[d].count);
        for (size_t i = 0; i < list.count; i++)
            CHECK(s_same_hash(list.entries[i].hash, exports[d].entries[i].hash));
        shoal_oplog_list_clear(&list);
        shoal_oplog_list_clear(&exports[d]);
    }
    shoal_hlc_stamp_t watermark;
    CHECK_INT(shoal_oplog_watermark(fixture.oplog, DATASET, &watermark, &found), 0);
    CHECK(found);
    CHECK_INT(shoal_hlc_compare(&watermark, &cutoff), 0);
    shoal_oplog_entry_t next;
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "z", 1, &next), 0);
    CHECK(s_same_hash(next.prev_hash, head.hash));
    free(head.node);
    shoal_oplog_entry_codec.clear(&next);
    s_entries_clear(entries, 10);
    s_close(&fixture);
}

//  Appending an entry that is there already changes nothing and says so,
//  alone or in a batch, whether the copy is in the store or in the batch.
static void
test_dedupe(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t e, f, g;
    s_entry_init(&e, &chain, DATASET, "k", SHOAL_OPLOG_PUT, "1", BASE_MS + 1, 0);
    s_entry_init(&f, &chain, DATASET, "k", SHOAL_OPLOG_PUT, "2", BASE_MS + 2, 0);
    s_entry_init(&g, &chain, DATASET, "k", SHOAL_OPLOG_DELETE, NULL, BASE_MS + 3, 0);
    bool added;
    CHECK_INT(shoal_oplog_append(fixture.oplog, &e, &added), 0);
    CHECK(added);
    size_t kv_size;
    char *kv = s_dump(&fixture, SHOAL_CF_KV, NULL, &kv_size);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &e, &added), 0);
    CHECK(!added);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 1);
    size_t again_size;
    char *again = s_dump(&fixture, SHOAL_CF_KV, NULL, &again_size);
    CHECK(s_same_dump(kv, kv_size, again, again_size));
    free(kv);
    free(again);

    shoal_oplog_entry_t batch[] = { e, f, g, f, e, g };
    size_t count;
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, batch, COUNT_OF(batch), &count), 0);
    CHECK_INT(count, 2);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 3);
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_BY_HLC, DATASET), 3);
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_BY_NODE_HLC, DATASET), 3);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, batch, COUNT_OF(batch), &count), 0);
    CHECK_INT(count, 0);
    size_t merged;
    CHECK_INT(shoal_oplog_merge(fixture.oplog, batch, COUNT_OF(batch), &merged), 0);
    CHECK_INT(merged, 0);
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "k", &record, &found), 0);
    CHECK(!found);

    shoal_oplog_entry_codec.clear(&e);
    shoal_oplog_entry_codec.clear(&f);
    shoal_oplog_entry_codec.clear(&g);
    s_close(&fixture);
}

//  Entries that break the rules are refused with a message saying which and
//  why, and a batch holding one is refused whole.
static void
test_refused_entries(void)
{
    fixture_t fixture;
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.max_clock_ahead_ms = MAX_AHEAD_MS;
    fake_clock_t clock = { BASE_MS + 1000000 };
    options.clock = s_fake_clock;
    options.clock_arg = &clock;
    CHECK_INT(s_open_with(&fixture, "db", "self", &options), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entries[5];
    for (int i = 0; i < 5; i++)
        s_entry_init(&entries[i], &chain, DATASET, "k", SHOAL_OPLOG_PUT, "value", BASE_MS + i, 0);

    //  A changed value no longer matches the hash.
    entries[2].value[0] = 'V';
    CHECK_INT(shoal_oplog_append(fixture.oplog, &entries[2], NULL), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "does not match"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 5, NULL), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "entry 3 of 5"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 0);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 0);
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_NODE_HEAD, DATASET), 0);
    entries[2].value[0] = 'v';
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 5, NULL), 0);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 5);
    //  Hashes are checked several at a time: one changed past the first
    //  group is named all the same.
    chain_t longer = { "n4", false, { 0 } };
    shoal_oplog_entry_t many[12];
    for (int i = 0; i < 12; i++)
        s_entry_init(&many[i], &longer, DATASET, "m", SHOAL_OPLOG_PUT, "value", BASE_MS + i, 0);
    many[10].value[0] = 'V';
    int refused = shoal_oplog_append_batch(fixture.oplog, many, 12, NULL);
    bool named = shoal_test_contains(shoal_oplog_error(fixture.oplog), "entry 11 of 12")
              && shoal_test_contains(shoal_oplog_error(fixture.oplog), "does not match");
    s_entries_clear(many, 12);
    CHECK_INT(refused, -1);
    CHECK_MSG(named, "%s", shoal_oplog_error(fixture.oplog));
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 5);

    //  A clock too far ahead is refused; within the bound it is accepted.
    chain_t fast = { "fast", false, { 0 } };
    shoal_oplog_entry_t ahead, near;
    s_entry_init(&ahead, &fast, DATASET, "k", SHOAL_OPLOG_PUT, "x",
                 clock.now_ms + MAX_AHEAD_MS + 1, 0);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &ahead, NULL), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "ahead"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK(!s_has_entry(&fixture, DATASET, ahead.hash));
    fast.has_prev = false;
    s_entry_init(&near, &fast, DATASET, "k", SHOAL_OPLOG_PUT, "x",
                 clock.now_ms + MAX_AHEAD_MS - 1, 0);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &near, NULL), 0);
    //  The clock absorbed it: the next local stamp sorts after it.
    shoal_oplog_entry_t mine;
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "m", 1, &mine), 0);
    CHECK(mine.wall_ms > near.wall_ms || (mine.wall_ms == near.wall_ms && mine.logic > 0));

    //  Missing fields.
    shoal_oplog_entry_t blank;
    chain_t nameless = { "", false, { 0 } };
    s_entry_init(&blank, &nameless, DATASET, "k", SHOAL_OPLOG_PUT, "x", BASE_MS, 0);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &blank, NULL), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "node is empty"));

    s_entries_clear(entries, 5);
    shoal_oplog_entry_codec.clear(&ahead);
    shoal_oplog_entry_codec.clear(&near);
    shoal_oplog_entry_codec.clear(&mine);
    shoal_oplog_entry_codec.clear(&blank);
    s_close(&fixture);
}

//  Datasets whose names prefix one another share nothing: entries, chains,
//  heads, kv keys, prune and drop.
static void
test_dataset_isolation(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    const char *names[] = { "ap", "app", "app2" };
    for (size_t d = 0; d < COUNT_OF(names); d++)
        for (size_t i = 0; i <= d; i++) {
            char value[32];
            snprintf(value, sizeof value, "%s-%zu", names[d], i);
            shoal_oplog_entry_t entry;
            CHECK_INT(shoal_oplog_write(fixture.oplog, names[d], "k", SHOAL_OPLOG_PUT, value,
                                        strlen(value), &entry), 0);
            //  Each dataset's chain starts afresh.
            CHECK(entry.has_prev == (i > 0));
            shoal_oplog_entry_codec.clear(&entry);
        }
    for (size_t d = 0; d < COUNT_OF(names); d++) {
        CHECK_INT(shoal_oplog_count(fixture.oplog, names[d]), (int64_t) d + 1);
        shoal_oplog_list_t list = { 0 };
        CHECK_INT(shoal_oplog_export(fixture.oplog, names[d], &list), 0);
        CHECK_INT(list.count, d + 1);
        for (size_t i = 0; i < list.count; i++)
            CHECK_STR(list.entries[i].dataset, names[d]);
        shoal_oplog_list_clear(&list);
        shoal_kv_record_t record;
        bool found;
        CHECK_INT(shoal_oplog_kv_get(fixture.oplog, names[d], "k", &record, &found), 0);
        CHECK(found);
        char value[32];
        snprintf(value, sizeof value, "%s-%zu", names[d], d);
        CHECK_INT(record.value_size, strlen(value));
        CHECK(memcmp(record.value, value, record.value_size) == 0);
        shoal_kv_codec.clear(&record);
        shoal_kv_list_t scan = { 0 };
        CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, names[d], "", NULL, 0, &scan), 0);
        CHECK_INT(scan.count, 1);
        shoal_kv_list_clear(&scan);
    }
    shoal_hlc_stamp_t cutoff = { UINT64_MAX, UINT32_MAX };
    size_t pruned;
    CHECK_INT(shoal_oplog_prune(fixture.oplog, "app", &cutoff, &pruned), 0);
    CHECK_INT(pruned, 2);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "ap"), 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "app"), 0);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "app2"), 3);
    CHECK_INT(shoal_oplog_drop(fixture.oplog, "app2"), 0);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "ap"), 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "app2"), 0);
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, "app", "k", &record, &found), 0);
    CHECK(found);
    shoal_kv_codec.clear(&record);
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, "app2", "k", &record, &found), 0);
    CHECK(!found);
    s_close(&fixture);
}

//  A chain range follows one node's chain from a start (exclusive) to an end
//  (inclusive), past other nodes' entries, and says so when it is broken.
static void
test_chain_range(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_entry_t mine[10], theirs[10];
    chain_t b = { "b", false, { 0 } };
    for (int i = 0; i < 10; i++) {
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "a", 1,
                                    &mine[i]), 0);
        s_entry_init(&theirs[i], &b, DATASET, "k", SHOAL_OPLOG_PUT, "b", BASE_MS + i, 0);
        CHECK_INT(shoal_oplog_append(fixture.oplog, &theirs[i], NULL), 0);
    }
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[2].hash, mine[7].hash,
                                      &list), 0);
    CHECK_INT(list.count, 5);
    for (int i = 0; i < 5; i++)
        CHECK(s_same_hash(list.entries[i].hash, mine[3 + i].hash));
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, NULL, theirs[3].hash, &list), 0);
    CHECK_INT(list.count, 4);
    for (int i = 0; i < 4; i++)
        CHECK(s_same_hash(list.entries[i].hash, theirs[i].hash));
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[4].hash, mine[4].hash,
                                      &list), 0);
    CHECK_INT(list.count, 0);

    //  An end that is not there, and a start on another node's chain.
    uint8_t absent[SHOAL_HASH_SIZE];
    memset(absent, 0xAB, sizeof absent);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[1].hash, absent, &list), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "not in the log"));
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, theirs[1].hash, mine[5].hash,
                                      &list), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "broken"));

    //  A second entry of a's after mine[3], stamped as mine[4]: a fork,
    //  named as one whichever of the two the walk meets first. Removed
    //  again after (both index keys) for what follows.
    chain_t forked = { "a", true, { 0 } };
    memcpy(forked.prev, mine[3].hash, SHOAL_HASH_SIZE);
    shoal_oplog_entry_t sibling;
    s_entry_init(&sibling, &forked, DATASET, "k", SHOAL_OPLOG_PUT, "fork", mine[4].wall_ms, mine[4].logic);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &sibling, NULL), 0);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[2].hash, mine[7].hash, &list), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "forks after"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK_INT(list.count, 0);
    shoal_key_t key;
    shoal_oplog_key_by_node_hlc(&key, &sibling);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, false), 0);
    shoal_oplog_key_by_hash(&key, DATASET, sibling.hash);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, false), 0);
    shoal_oplog_entry_codec.clear(&sibling);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[2].hash, mine[7].hash, &list), 0);
    CHECK_INT(list.count, 5);

    //  A start that is gone (as prune leaves it) is found by the entry
    //  that names it.
    shoal_oplog_key_by_hash(&key, DATASET, mine[0].hash);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, false), 0);
    shoal_oplog_key_by_node_hlc(&key, &mine[0]);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, false), 0);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[0].hash, mine[3].hash,
                                      &list), 0);
    CHECK_INT(list.count, 3);
    for (int i = 0; i < 3; i++)
        CHECK(s_same_hash(list.entries[i].hash, mine[1 + i].hash));

    //  mine[5] leaves its node's chain (the entry and its locator go): the
    //  chain breaks there, and a range from it starts at the entry that
    //  names it.
    shoal_oplog_key_by_node_hlc(&key, &mine[5]);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, false), 0);
    shoal_oplog_key_by_hash(&key, DATASET, mine[5].hash);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, false), 0);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[2].hash, mine[7].hash,
                                      &list), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "broken"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK_INT(list.count, 0);
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[5].hash, mine[7].hash,
                                      &list), 0);
    CHECK_INT(list.count, 2);
    shoal_oplog_list_clear(&list);

    s_entries_clear(mine, 10);
    s_entries_clear(theirs, 10);
    s_close(&fixture);
}

//  The chain rules, decided by append_chain alone: a run that links to our
//  head is appended, entries held are skipped, a run that does not link is
//  a gap with nothing written, and a run that breaks inside is refused.
static void
test_append_chain(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t b = { "b", false, { 0 } };
    shoal_oplog_entry_t run[10];
    for (int i = 0; i < 10; i++)
        s_entry_init(&run[i], &b, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS + i, 0);
    size_t added = 99;
    bool gap = true;

    //  Nothing held: a run from the chain's first entry goes in whole.
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, run, 3, &added, &gap), 0);
    CHECK_INT(added, 3);
    CHECK(!gap);
    shoal_oplog_head_t head;
    bool found;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "b", &head, &found), 0);
    CHECK(found && s_same_hash(head.hash, run[2].hash));
    free(head.node);

    //  A run past our head that does not link to it: a gap, nothing written.
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, &run[5], 2, &added, &gap), 0);
    CHECK(gap);
    CHECK_INT(added, 0);
    CHECK(!s_has_entry(&fixture, DATASET, run[5].hash));
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 3);

    //  A run that starts with entries held: they are skipped, the rest
    //  links to the head and goes in.
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, &run[1], 4, &added, &gap), 0);
    CHECK(!gap);
    CHECK_INT(added, 2);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 5);

    //  Everything held: nothing to do, and no gap.
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, run, 5, &added, &gap), 0);
    CHECK(!gap);
    CHECK_INT(added, 0);

    //  A run that breaks inside (run[7] does not follow run[5]) is refused
    //  whole, naming the entry.
    shoal_oplog_entry_t broken[2] = { run[5], run[7] };
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, broken, 2, &added, &gap), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "entry 2 of 2")
              && shoal_test_contains(shoal_oplog_error(fixture.oplog), "does not link"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK(!s_has_entry(&fixture, DATASET, run[5].hash));

    //  A run that mixes in another node's entry is refused too.
    chain_t c = { "c", false, { 0 } };
    shoal_oplog_entry_t other;
    s_entry_init(&other, &c, DATASET, "k", SHOAL_OPLOG_PUT, "c", BASE_MS + 6, 0);
    shoal_oplog_entry_t mixed[2] = { run[5], other };
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, mixed, 2, &added, &gap), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "another node's chain"));

    //  An entry stamped before our head that is not held (a fork of b's
    //  chain) is a gap, not held and not appended.
    chain_t forked = { "b", true, { 0 } };
    memcpy(forked.prev, run[1].hash, SHOAL_HASH_SIZE);
    shoal_oplog_entry_t fork;
    s_entry_init(&fork, &forked, DATASET, "k", SHOAL_OPLOG_PUT, "fork", BASE_MS + 2, 1);
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, &fork, 1, &added, &gap), 0);
    CHECK(gap);
    CHECK(!s_has_entry(&fixture, DATASET, fork.hash));

    //  A chain we have no head of must start at its first entry.
    chain_t d = { "d", false, { 0 } };
    shoal_oplog_entry_t d_entries[2];
    for (int i = 0; i < 2; i++)
        s_entry_init(&d_entries[i], &d, DATASET, "k", SHOAL_OPLOG_PUT, "d", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, &d_entries[1], 1, &added, &gap), 0);
    CHECK(gap);
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, d_entries, 2, &added, &gap), 0);
    CHECK(!gap);
    CHECK_INT(added, 2);

    //  The gap repaired: the rest of b's chain goes in after the head.
    CHECK_INT(shoal_oplog_append_chain(fixture.oplog, &run[5], 5, &added, &gap), 0);
    CHECK(!gap);
    CHECK_INT(added, 5);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 12);

    s_entries_clear(run, 10);
    s_entries_clear(d_entries, 2);
    shoal_oplog_entry_codec.clear(&other);
    shoal_oplog_entry_codec.clear(&fork);
    s_close(&fixture);
}

//  Tombstones go only at or before the cutoff they are collected to, in
//  bounded steps; live keys and later tombstones stay, counts do not move,
//  and an epoch-ordered dataset keeps its tombstones. A tombstone kept
//  still makes an older put that arrives late lose.
static void
test_kv_collect(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t x = { "x", false, { 0 } };
    shoal_oplog_entry_t entries[6];
    //  a and b put then deleted, c put: two tombstones, one live key.
    s_entry_init(&entries[0], &x, DATASET, "a", SHOAL_OPLOG_PUT, "1", BASE_MS + 1, 0);
    s_entry_init(&entries[1], &x, DATASET, "b", SHOAL_OPLOG_PUT, "1", BASE_MS + 2, 0);
    s_entry_init(&entries[2], &x, DATASET, "c", SHOAL_OPLOG_PUT, "1", BASE_MS + 3, 0);
    s_entry_init(&entries[3], &x, DATASET, "a", SHOAL_OPLOG_DELETE, NULL, BASE_MS + 10, 0);
    s_entry_init(&entries[4], &x, DATASET, "b", SHOAL_OPLOG_DELETE, NULL, BASE_MS + 20, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 5, NULL), 0);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 3);
    shoal_oplog_counts_t before;
    CHECK_INT(shoal_oplog_counts(fixture.oplog, DATASET, &before), 0);
    CHECK_INT(before.live, 1);

    //  A cutoff before both deletes collects nothing, and says it kept both.
    shoal_hlc_stamp_t cutoff = { BASE_MS + 9, 0 };
    char *next = NULL;
    size_t collected = 99, kept = 99;
    CHECK_INT(shoal_oplog_kv_collect(fixture.oplog, DATASET, &cutoff, NULL, 100, &next, &collected, &kept), 0);
    CHECK_INT(collected, 0);
    CHECK_INT(kept, 2);
    CHECK(next == NULL);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 3);

    //  A cutoff between them collects a's alone, one key a step.
    cutoff.wall_ms = BASE_MS + 15;
    size_t total = 0, total_kept = 0, steps = 0;
    do {
        char *after = next;
        CHECK_INT(shoal_oplog_kv_collect(fixture.oplog, DATASET, &cutoff, after, 1, &next,
                                         &collected, &kept), 0);
        free(after);
        total += collected;
        total_kept += kept;
        steps++;
    } while (next && steps < 10);
    CHECK_INT(total, 1);
    CHECK_INT(total_kept, 1);
    CHECK(steps >= 3);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 2);
    shoal_kv_list_t records = { 0 };
    CHECK_INT(shoal_oplog_kv_records(fixture.oplog, DATASET, NULL, 0, &records), 0);
    CHECK_INT(records.count, 2);
    CHECK_STR(records.items[0].key, "b");
    CHECK(records.items[0].record.deleted);
    CHECK_STR(records.items[1].key, "c");
    shoal_kv_list_clear(&records);
    shoal_oplog_counts_t after;
    CHECK_INT(shoal_oplog_counts(fixture.oplog, DATASET, &after), 0);
    CHECK(after.live == before.live && after.entries == before.entries);

    //  b's tombstone, kept, still beats a put older than it that arrives late.
    chain_t y = { "y", false, { 0 } };
    s_entry_init(&entries[5], &y, DATASET, "b", SHOAL_OPLOG_PUT, "late", BASE_MS + 19, 0);
    CHECK_INT(shoal_oplog_append(fixture.oplog, &entries[5], NULL), 0);
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "b", &record, &found), 0);
    CHECK(!found);

    //  An epoch-ordered dataset keeps its tombstones whatever the cutoff.
    CHECK_INT(shoal_oplog_set_epoch(fixture.oplog, "registry", s_epoch_extract, NULL), 0);
    chain_t z = { "z", false, { 0 } };
    shoal_oplog_entry_t registry[2];
    s_entry_init(&registry[0], &z, "registry", "claim", SHOAL_OPLOG_PUT, "1:n1", BASE_MS + 1, 0);
    s_entry_init(&registry[1], &z, "registry", "claim", SHOAL_OPLOG_DELETE, NULL, BASE_MS + 2, 0);
    //  A delete's value holds no epoch: it is refused in an epoch dataset,
    //  so the tombstone is made the way a node makes one, with an epoch.
    shoal_oplog_entry_codec.clear(&registry[1]);
    z.has_prev = true;
    memcpy(z.prev, registry[0].hash, SHOAL_HASH_SIZE);
    s_entry_init(&registry[1], &z, "registry", "claim", SHOAL_OPLOG_DELETE, "2:", BASE_MS + 2, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, registry, 2, NULL), 0);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, "registry"), 1);
    cutoff.wall_ms = UINT64_MAX;
    CHECK_INT(shoal_oplog_kv_collect(fixture.oplog, "registry", &cutoff, NULL, 100, &next, &collected, NULL), 0);
    CHECK_INT(collected, 0);
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, "registry"), 1);

    s_entries_clear(entries, 6);
    s_entries_clear(registry, 2);
    s_close(&fixture);
}

//  Local stamps keep growing across a restart even when the physical clock
//  went back an hour meanwhile.
static void
test_clock_across_restart(void)
{
    fixture_t fixture;
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    fake_clock_t clock = { BASE_MS };
    options.clock = s_fake_clock;
    options.clock_arg = &clock;
    CHECK_INT(s_open_with(&fixture, "db", "a", &options), 0);
    shoal_oplog_entry_t last;
    memset(&last, 0, sizeof last);
    for (int i = 0; i < 5; i++) {
        shoal_oplog_entry_codec.clear(&last);
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1,
                                    &last), 0);
    }
    CHECK_INT(last.wall_ms, BASE_MS);
    CHECK_INT(last.logic, 4);
    s_close(&fixture);

    clock.now_ms = BASE_MS - 60 * 60 * 1000;
    CHECK_INT(s_open_with(&fixture, "db", "a", &options), 0);
    shoal_oplog_entry_t next;
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "w", 1, &next), 0);
    shoal_hlc_stamp_t before = { last.wall_ms, last.logic }, after = { next.wall_ms, next.logic };
    CHECK(shoal_hlc_compare(&before, &after) < 0);
    CHECK(s_same_hash(next.prev_hash, last.hash));
    //  And the later write wins the key, as it must.
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "k", &record, &found), 0);
    CHECK(found);
    CHECK(memcmp(record.value, "w", 1) == 0);
    shoal_kv_codec.clear(&record);
    shoal_oplog_entry_codec.clear(&last);
    shoal_oplog_entry_codec.clear(&next);
    s_close(&fixture);
}

//  The entries of the order-independence test: ORDER_NODES chains whose
//  stamps collide across nodes, on few keys, with deletes. Returns the count.
static size_t
s_order_entries(shoal_oplog_entry_t *entries, uint64_t *state, const char *dataset,
                bool with_epochs)
{
    static const char *nodes[ORDER_NODES] = { "n1", "n2", "n3" };
    size_t count = 0;
    for (size_t n = 0; n < ORDER_NODES; n++) {
        chain_t chain = { nodes[n], false, { 0 } };
        for (size_t i = 0; i < ORDER_PER_NODE; i++) {
            char key[16], value[32];
            snprintf(key, sizeof key, "k%d", (int) (shoal_test_random(state) % ORDER_KEYS));
            bool delete = shoal_test_random(state) % 10 < 3;
            //  Epochs run against the stamps, so that the two orders differ.
            if (with_epochs)
                snprintf(value, sizeof value, "%d:%s-%zu", (int) (shoal_test_random(state) % 4),
                         nodes[n], i);
            else
                snprintf(value, sizeof value, "%s-%zu", nodes[n], i);
            //  Every node writes at the same few stamps.
            s_entry_init(&entries[count++], &chain, dataset, key,
                         delete ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                         delete && !with_epochs ? NULL : value, BASE_MS + i / 2, (uint32_t) (i % 2));
        }
    }
    return count;
}

//  Applies ENTRIES in ORDER to FIXTURE in random batches, some of them
//  twice. Returns 0 or -1.
static int
s_apply_in_order(fixture_t *fixture, const shoal_oplog_entry_t *entries, const size_t *order,
                 size_t count, uint64_t *state)
{
    shoal_oplog_entry_t batch[ORDER_BATCH_MAX];
    size_t at = 0;
    while (at < count) {
        size_t size = 1 + (size_t) (shoal_test_random(state) % ORDER_BATCH_MAX);
        if (size > count - at)
            size = count - at;
        for (size_t i = 0; i < size; i++)
            batch[i] = entries[order[at + i]];
        int rc = size == 1 ? shoal_oplog_append(fixture->oplog, &batch[0], NULL)
                           : shoal_oplog_append_batch(fixture->oplog, batch, size, NULL);
        if (rc)
            return -1;
        //  A sync that delivers some of it again.
        if (shoal_test_random(state) % 4 == 0
        &&  shoal_oplog_append_batch(fixture->oplog, batch, size, NULL))
            return -1;
        at += size;
    }
    return 0;
}

//  The expected winner of KEY: the greatest entry by (stamp, node, hash).
static const shoal_oplog_entry_t *
s_expected_winner(const shoal_oplog_entry_t *entries, size_t count, const char *key)
{
    const shoal_oplog_entry_t *winner = NULL;
    for (size_t i = 0; i < count; i++) {
        const shoal_oplog_entry_t *entry = &entries[i];
        if (strcmp(entry->key, key) != 0)
            continue;
        int order = 1;
        if (winner) {
            shoal_hlc_stamp_t a = { entry->wall_ms, entry->logic };
            shoal_hlc_stamp_t b = { winner->wall_ms, winner->logic };
            order = shoal_hlc_compare(&a, &b);
            if (order == 0)
                order = strcmp(entry->node, winner->node);
            if (order == 0)
                order = memcmp(entry->hash, winner->hash, SHOAL_HASH_SIZE);
        }
        if (order > 0)
            winner = entry;
    }
    return winner;
}

//  The same entries, puts, deletes and same-key collisions from different
//  nodes at the same stamps, applied in several random orders and batchings
//  to fresh stores, leave byte-identical kv state and heads, and that state
//  is the one last-writer-wins gives.
static void
test_apply_order_independence(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t entries[ORDER_NODES * ORDER_PER_NODE];
    size_t count = s_order_entries(entries, &state, DATASET, false);
    size_t order[COUNT_OF(entries)];
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    char *first_kv = NULL, *first_heads = NULL;
    size_t first_kv_size = 0, first_heads_size = 0;
    for (int p = 0; p < PERMUTATIONS; p++) {
        s_shuffle(order, count, &state);
        char name[32];
        snprintf(name, sizeof name, "p%d", p);
        fixture_t fixture;
        CHECK_INT(s_open(&fixture, name, "self"), 0);
        CHECK_MSG(s_apply_in_order(&fixture, entries, order, count, &state) == 0, "%s",
                  shoal_oplog_error(fixture.oplog));
        size_t kv_size, heads_size;
        char *kv = s_dump(&fixture, SHOAL_CF_KV, NULL, &kv_size);
        char *heads = s_dump(&fixture, SHOAL_CF_OPLOG_NODE_HEAD, NULL, &heads_size);
        if (p == 0) {
            first_kv = kv, first_kv_size = kv_size;
            first_heads = heads, first_heads_size = heads_size;
            //  The first store also holds exactly the state LWW predicts.
            for (int k = 0; k < ORDER_KEYS; k++) {
                char key[16];
                snprintf(key, sizeof key, "k%d", k);
                const shoal_oplog_entry_t *winner = s_expected_winner(entries, count, key);
                shoal_kv_record_t record;
                bool found;
                CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, key, &record, &found), 0);
                CHECK_MSG(found == (winner && winner->op == SHOAL_OPLOG_PUT), "%s", key);
                if (found) {
                    CHECK(s_same_hash(record.hash, winner->hash));
                    CHECK_INT(record.value_size, winner->value_size);
                    CHECK(memcmp(record.value, winner->value, winner->value_size) == 0);
                    shoal_kv_codec.clear(&record);
                }
            }
        }
        else {
            CHECK_MSG(s_same_dump(first_kv, first_kv_size, kv, kv_size),
                      "kv differs in permutation %d", p);
            CHECK_MSG(s_same_dump(first_heads, first_heads_size, heads, heads_size),
                      "heads differ in permutation %d", p);
            free(kv);
            free(heads);
        }
        CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), (int64_t) count);
        s_close(&fixture);
    }
    free(first_kv);
    free(first_heads);
    s_entries_clear(entries, count);
}

//  Reads "EPOCH:rest" values, the way the registry dataset carries them.
static int
s_epoch_extract(const uint8_t *value, size_t size, uint64_t *epoch, void *arg)
{
    char text[64];
    if (size == 0 || size >= sizeof text)
        return -1;
    memcpy(text, value, size);
    text[size] = 0;
    char *end;
    *epoch = strtoull(text, &end, 10);
    return end != text && *end == ':' ? 0 : -1;
}

//  In an epoch-ordered dataset the higher epoch wins whatever the stamps say,
//  ties go by stamp, in any order; a value without an epoch is refused. The
//  same entries elsewhere are ordered by stamp.
static void
test_epoch_dataset(void)
{
    chain_t n1 = { "n1", false, { 0 } }, n2 = { "n2", false, { 0 } }, n3 = { "n3", false, { 0 } };
    shoal_oplog_entry_t registry[3], plain[3];
    s_entry_init(&registry[0], &n1, "registry", "claim-1", SHOAL_OPLOG_PUT, "2:n1", BASE_MS + 10, 0);
    s_entry_init(&registry[1], &n2, "registry", "claim-1", SHOAL_OPLOG_PUT, "3:n2", BASE_MS + 5, 0);
    s_entry_init(&registry[2], &n3, "registry", "claim-1", SHOAL_OPLOG_PUT, "3:n3", BASE_MS + 7, 0);
    n1.has_prev = n2.has_prev = n3.has_prev = false;
    s_entry_init(&plain[0], &n1, DATASET, "claim-1", SHOAL_OPLOG_PUT, "2:n1", BASE_MS + 10, 0);
    s_entry_init(&plain[1], &n2, DATASET, "claim-1", SHOAL_OPLOG_PUT, "3:n2", BASE_MS + 5, 0);
    s_entry_init(&plain[2], &n3, DATASET, "claim-1", SHOAL_OPLOG_PUT, "3:n3", BASE_MS + 7, 0);
    static const size_t orders[][3] = {
        { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 }
    };
    for (size_t p = 0; p < COUNT_OF(orders); p++) {
        char name[32];
        snprintf(name, sizeof name, "p%zu", p);
        fixture_t fixture;
        CHECK_INT(s_open(&fixture, name, "self"), 0);
        CHECK_INT(shoal_oplog_set_epoch(fixture.oplog, "registry", s_epoch_extract, NULL), 0);
        for (size_t i = 0; i < 3; i++) {
            CHECK_INT(shoal_oplog_append(fixture.oplog, &registry[orders[p][i]], NULL), 0);
            CHECK_INT(shoal_oplog_append(fixture.oplog, &plain[orders[p][i]], NULL), 0);
        }
        shoal_kv_record_t record;
        bool found;
        CHECK_INT(shoal_oplog_kv_get(fixture.oplog, "registry", "claim-1", &record, &found), 0);
        CHECK(found);
        CHECK_INT(record.epoch, 3);
        CHECK_INT(record.value_size, 4);
        CHECK_MSG(memcmp(record.value, "3:n3", 4) == 0, "order %zu", p);
        shoal_kv_codec.clear(&record);
        CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "claim-1", &record, &found), 0);
        CHECK(found);
        CHECK_INT(record.epoch, 0);
        CHECK_MSG(memcmp(record.value, "2:n1", 4) == 0, "order %zu", p);
        shoal_kv_codec.clear(&record);

        if (p == 0) {
            //  A release at a higher epoch deletes; a value without an epoch
            //  is refused.
            shoal_oplog_entry_t release, junk;
            CHECK_INT(shoal_oplog_write(fixture.oplog, "registry", "claim-1",
                                        SHOAL_OPLOG_DELETE, "4:", 2, &release), 0);
            CHECK_INT(shoal_oplog_kv_get(fixture.oplog, "registry", "claim-1", &record,
                                         &found), 0);
            CHECK(!found);
            CHECK_INT(shoal_oplog_write(fixture.oplog, "registry", "claim-2", SHOAL_OPLOG_PUT,
                                        "junk", 4, &junk), -1);
            CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "epoch"), "%s",
                      shoal_oplog_error(fixture.oplog));
            CHECK_INT(shoal_oplog_count(fixture.oplog, "registry"), 4);
            shoal_oplog_entry_codec.clear(&release);
        }
        s_close(&fixture);
    }
    s_entries_clear(registry, 3);
    s_entries_clear(plain, 3);
}

//  An epoch-ordered dataset is order-independent too, deletes included.
static void
test_epoch_order_independence(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t entries[ORDER_NODES * ORDER_PER_NODE];
    size_t count = s_order_entries(entries, &state, "registry", true);
    size_t order[COUNT_OF(entries)];
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    char *first = NULL;
    size_t first_size = 0;
    for (int p = 0; p < PERMUTATIONS; p++) {
        s_shuffle(order, count, &state);
        char name[32];
        snprintf(name, sizeof name, "p%d", p);
        fixture_t fixture;
        CHECK_INT(s_open(&fixture, name, "self"), 0);
        CHECK_INT(shoal_oplog_set_epoch(fixture.oplog, "registry", s_epoch_extract, NULL), 0);
        CHECK_MSG(s_apply_in_order(&fixture, entries, order, count, &state) == 0, "%s",
                  shoal_oplog_error(fixture.oplog));
        size_t size;
        char *kv = s_dump(&fixture, SHOAL_CF_KV, NULL, &size);
        if (p == 0)
            first = kv, first_size = size;
        else {
            CHECK_MSG(s_same_dump(first, first_size, kv, size), "permutation %d", p);
            free(kv);
        }
        s_close(&fixture);
    }
    free(first);
    s_entries_clear(entries, count);
}

//  Export gives every entry in stamp order; import into an empty store gives
//  the same log and state; merge counts what was new; drop leaves nothing.
static void
test_export_import_merge_drop(void)
{
    fixture_t source;
    CHECK_INT(s_open(&source, "source", "a"), 0);
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 9);
        CHECK_INT(shoal_oplog_write(source.oplog, DATASET, key,
                                    i % 4 == 3 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                                    key, strlen(key), NULL), 0);
    }
    for (int i = 0; i < 5; i++)
        CHECK_INT(shoal_oplog_write(source.oplog, "other", "k", SHOAL_OPLOG_PUT, "o", 1, NULL), 0);
    chain_t b = { "b", false, { 0 } };
    shoal_oplog_entry_t theirs[6];
    for (int i = 0; i < 6; i++)
        s_entry_init(&theirs[i], &b, DATASET, "k1", SHOAL_OPLOG_PUT, "b", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, theirs, 6, NULL), 0);
    shoal_hlc_stamp_t cutoff = { BASE_MS + 1, 0 };
    CHECK_INT(shoal_oplog_prune(source.oplog, DATASET, &cutoff, NULL), 0);

    shoal_oplog_list_t exported = { 0 };
    CHECK_INT(shoal_oplog_export(source.oplog, DATASET, &exported), 0);
    CHECK_INT(exported.count, 34);
    for (size_t i = 1; i < exported.count; i++) {
        shoal_hlc_stamp_t a = { exported.entries[i - 1].wall_ms, exported.entries[i - 1].logic };
        shoal_hlc_stamp_t z = { exported.entries[i].wall_ms, exported.entries[i].logic };
        CHECK(shoal_hlc_compare(&a, &z) < 0);
    }

    fixture_t copy;
    CHECK_INT(s_open(&copy, "copy", "c"), 0);
    CHECK_INT(shoal_oplog_import(copy.oplog, exported.entries, exported.count), 0);
    shoal_oplog_list_t imported = { 0 };
    CHECK_INT(shoal_oplog_export(copy.oplog, DATASET, &imported), 0);
    CHECK_INT(imported.count, exported.count);
    for (size_t i = 0; i < imported.count; i++)
        CHECK(s_same_hash(imported.entries[i].hash, exported.entries[i].hash));
    shoal_oplog_list_clear(&imported);
    const shoal_cf_t families[] = { SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
                                    SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV };
    for (size_t f = 0; f < COUNT_OF(families); f++) {
        size_t a_size, b_size;
        char *a = s_dump(&source, families[f], DATASET, &a_size);
        char *z = s_dump(&copy, families[f], DATASET, &b_size);
        CHECK_MSG(s_same_dump(a, a_size, z, b_size), "%s", shoal_cf_name(families[f]));
        free(a);
        free(z);
    }

    fixture_t partial;
    CHECK_INT(s_open(&partial, "partial", "p"), 0);
    CHECK_INT(shoal_oplog_import(partial.oplog, exported.entries, 15), 0);
    size_t added;
    CHECK_INT(shoal_oplog_merge(partial.oplog, exported.entries, exported.count, &added), 0);
    CHECK_INT(added, exported.count - 15);
    CHECK_INT(shoal_oplog_merge(partial.oplog, exported.entries, exported.count, &added), 0);
    CHECK_INT(added, 0);
    CHECK_INT(shoal_oplog_count(partial.oplog, DATASET), (int64_t) exported.count);
    s_close(&partial);
    s_close(&copy);

    //  Drop takes the dataset whole and nothing else.
    CHECK_INT(shoal_oplog_drop(source.oplog, DATASET), 0);
    const shoal_cf_t all[] = { SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC,
                               SHOAL_CF_OPLOG_BY_NODE_HLC, SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV };
    for (size_t f = 0; f < COUNT_OF(all); f++) {
        CHECK_MSG(s_count(&source, all[f], DATASET) == 0, "%s", shoal_cf_name(all[f]));
        CHECK_MSG(s_count(&source, all[f], "other") > 0, "%s", shoal_cf_name(all[f]));
    }
    shoal_hlc_stamp_t watermark;
    bool found;
    CHECK_INT(shoal_oplog_watermark(source.oplog, DATASET, &watermark, &found), 0);
    CHECK(!found);
    zlistx_t *names = shoal_oplog_datasets(source.oplog);
    CHECK(names);
    CHECK_INT(zlistx_size(names), 1);
    CHECK_STR((const char *) zlistx_first(names), "other");
    zlistx_destroy(&names);
    shoal_oplog_list_clear(&exported);
    s_entries_clear(theirs, 6);
    s_close(&source);
}

//  The rebuild a slice at a time (the sweep's repair on the reactor):
//  each step visits at most the keys it is given, entries appended between
//  steps keep their own indexes and head, and at the end the log is as a
//  whole reconcile leaves it: a reconcile after it finds nothing to do.

//  KEY: DATASET's oplog_by_hlc key of the entry stamped WALL.LOGIC by NODE
//  with HASH, as the store lays it out.
static void
s_hlc_key(shoal_key_t *key, uint64_t wall, uint64_t logic, const char *node, const uint8_t *hash)
{
    shoal_key_init(key);
    shoal_key_add_str(key, DATASET);
    shoal_key_add_u64(key, wall);
    shoal_key_add_u64(key, logic);
    shoal_key_add_str(key, node);
    shoal_key_add_bytes(key, hash, SHOAL_HASH_SIZE);
}
static void
test_rebuild_in_slices(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_entry_t mine[20];
    for (int i = 0; i < 20; i++)
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1, &mine[i]), 0);
    s_close(&fixture);

    //  An index key lost, one that names nothing, and the head gone.
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "%s/db", shoal_test_dir);
    shoal_store_t *store = shoal_store_new(path, NULL, NULL);
    CHECK(store);
    shoal_key_t key;
    s_hlc_key(&key, mine[3].wall_ms, mine[3].logic, "a", mine[3].hash);
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_OPLOG_BY_HLC, &key, false), 0);
    uint8_t ghost[SHOAL_HASH_SIZE];
    memset(ghost, 0x6E, sizeof ghost);
    s_hlc_key(&key, BASE_MS, 0, "ghost", ghost);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_BY_HLC, &key, "", 0, false), 0);
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "a");
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_OPLOG_NODE_HEAD, &key, false), 0);
    shoal_store_destroy(&store);

    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_rebuild_t *rebuild = shoal_oplog_rebuild_new(fixture.oplog);
    shoal_oplog_repair_t repair = { 0 };
    bool done = false;
    int steps = 0;
    while (!done && steps < 1000) {
        int64_t visited = shoal_oplog_rebuild_step(rebuild, 1, &done, &repair);
        CHECK(visited >= 0 && visited <= 1);
        //  A writer between two steps, in the middle of the first walk.
        if (++steps == 5) {
            shoal_oplog_entry_t more;
            CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k2", SHOAL_OPLOG_PUT, "w", 1, &more), 0);
            shoal_oplog_entry_codec.clear(&more);
        }
    }
    shoal_oplog_rebuild_destroy(&rebuild);
    CHECK(done);
    //  Every entry, key and head took a step of its own.
    CHECK(steps > 40);
    //  (The head lost is written again by the append between the steps,
    //  or else by the rebuild.)
    CHECK_INT(repair.index_written, 1);
    CHECK_INT(repair.index_removed, 1);
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.entries, 21);
    CHECK_INT(repair.index_written + repair.index_removed + repair.heads_written
              + repair.heads_removed + repair.corrupt, 0);
    for (int i = 0; i < 20; i++)
        shoal_oplog_entry_codec.clear(&mine[i]);
    s_close(&fixture);
}

//  The sweep's recount of a dataset's counts goes a bounded number of keys
//  a step, while the log is written between the steps: the counts it
//  leaves agree with a walk of the dataset, the write between its steps
//  counted once.
static void
test_recount_in_slices(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 7);
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, key, i % 5 == 4 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                                    "v", 1, NULL), 0);
    }
    shoal_oplog_counts_t walked, counts;
    CHECK_INT(shoal_oplog_recount(fixture.oplog, DATASET, &walked), 0);
    CHECK_INT(walked.entries, 20);

    //  Counts lost, as a store from before counts holds none.
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "count");
    shoal_key_add_str(&key, DATASET);
    CHECK_INT(shoal_store_delete(fixture.store, SHOAL_CF_OPLOG_META, &key, false), 0);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 0);

    shoal_oplog_recount_t *recount = shoal_oplog_recount_new(fixture.oplog, DATASET);
    bool done = false, written = false, wrote = false;
    int steps = 0;
    while (!done && steps < 1000) {
        int64_t visited = shoal_oplog_recount_step(recount, 1, &done, &written);
        CHECK(visited >= 0 && visited <= 1);
        wrote = wrote || written;
        //  A writer between two steps, in the middle of the walk: a new
        //  key, counted by the write itself (on counts of nothing yet).
        if (++steps == 5) {
            CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "fresh", SHOAL_OPLOG_PUT, "w", 1, NULL), 0);
            CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 1);
        }
    }
    shoal_oplog_recount_destroy(&recount);
    CHECK(done);
    CHECK(wrote);
    //  Every entry and key took a step of its own.
    CHECK(steps > 20 + (int) walked.live);
    CHECK_INT(shoal_oplog_recount(fixture.oplog, DATASET, &walked), 0);
    CHECK_INT(walked.entries, 21);
    CHECK_INT(shoal_oplog_counts(fixture.oplog, DATASET, &counts), 0);
    CHECK_INT(counts.entries, walked.entries);
    CHECK_INT(counts.live, walked.live);

    //  Counts that agree are left as they are.
    recount = shoal_oplog_recount_new(fixture.oplog, DATASET);
    done = wrote = false;
    while (!done) {
        CHECK(shoal_oplog_recount_step(recount, 3, &done, &written) >= 0);
        wrote = wrote || written;
    }
    shoal_oplog_recount_destroy(&recount);
    CHECK(!wrote);
    s_close(&fixture);
}

//  Reconcile finds and repairs damage done behind the oplog's back: index
//  keys deleted, one with a wrong value, a dangling one added, a head
//  deleted and one set back. It
//  reports what it did, and a second run finds nothing.
static void
test_reconcile_repairs(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_entry_t mine[20], theirs[10];
    chain_t b = { "b", false, { 0 } };
    for (int i = 0; i < 20; i++)
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1,
                                    &mine[i]), 0);
    for (int i = 0; i < 10; i++)
        s_entry_init(&theirs[i], &b, DATASET, "j", SHOAL_OPLOG_PUT, "w", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, theirs, 10, NULL), 0);
    shoal_oplog_repair_t repair;
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.entries, 30);
    CHECK_INT(repair.index_written + repair.index_removed + repair.heads_written
              + repair.heads_removed + repair.corrupt, 0);
    const shoal_cf_t families[] = { SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
                                    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_NODE_HEAD };
    char *before[COUNT_OF(families)];
    size_t before_size[COUNT_OF(families)];
    for (size_t f = 0; f < COUNT_OF(families); f++)
        before[f] = s_dump(&fixture, families[f], NULL, &before_size[f]);
    s_close(&fixture);

    //  The damage, through the store alone.
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "%s/db", shoal_test_dir);
    shoal_store_t *store = shoal_store_new(path, NULL, NULL);
    CHECK(store);
    shoal_key_t key;
    s_hlc_key(&key, mine[3].wall_ms, mine[3].logic, "a", mine[3].hash);
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_OPLOG_BY_HLC, &key, false), 0);
    //  A locator that locates nothing, and one that is missing.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, mine[6].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_BY_HASH, &key, "xx", 2, false), 0);
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, theirs[4].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_OPLOG_BY_HASH, &key, false), 0);
    //  A successor key as an earlier version wrote them: reconcile empties
    //  the retired index.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, mine[4].hash, SHOAL_HASH_SIZE);
    shoal_key_add_bytes(&key, mine[5].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_PREV_TO_HASH, &key, "", 0, false), 0);
    //  An index key naming an entry that was never there.
    uint8_t ghost[SHOAL_HASH_SIZE];
    memset(ghost, 0x6E, sizeof ghost);
    s_hlc_key(&key, BASE_MS, 0, "ghost", ghost);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_BY_HLC, &key, "", 0, false), 0);
    //  And a locator of it.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, ghost, SHOAL_HASH_SIZE);
    shoal_key_t ghost_locator;
    shoal_key_init(&ghost_locator);
    shoal_key_add_str(&ghost_locator, "ghost");
    shoal_key_add_u64(&ghost_locator, BASE_MS);
    shoal_key_add_u64(&ghost_locator, 0);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_BY_HASH, &key, ghost_locator.bytes,
                              ghost_locator.size, false), 0);
    //  b's head goes; a's is set back to an old entry.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "b");
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_OPLOG_NODE_HEAD, &key, false), 0);
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "a");
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_head_record_t stale = { mine[2].wall_ms, mine[2].logic, { 0 } };
    memcpy(stale.hash, mine[2].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                                     &stale), 0);
    CHECK_INT(shoal_store_write(store, batch, false), 0);
    shoal_batch_destroy(&batch);
    shoal_store_destroy(&store);

    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.entries, 30);
    CHECK_INT(repair.corrupt, 0);
    CHECK_INT(repair.index_written, 3);
    CHECK_INT(repair.index_removed, 2);
    CHECK_INT(repair.heads_written, 2);
    CHECK_INT(repair.heads_removed, 0);
    for (size_t f = 0; f < COUNT_OF(families); f++) {
        size_t size;
        char *after = s_dump(&fixture, families[f], NULL, &size);
        CHECK_MSG(s_same_dump(before[f], before_size[f], after, size), "%s",
                  shoal_cf_name(families[f]));
        free(after);
        free(before[f]);
    }
    CHECK_INT(s_count(&fixture, SHOAL_CF_OPLOG_PREV_TO_HASH, DATASET), 0);
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_chain_range(fixture.oplog, DATASET, mine[0].hash, mine[19].hash,
                                      &list), 0);
    CHECK_INT(list.count, 19);
    shoal_oplog_list_clear(&list);
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.index_written + repair.index_removed + repair.heads_written
              + repair.heads_removed + repair.corrupt, 0);

    //  An earlier version kept the prev hash as oplog_by_hlc's value: such
    //  a store is sound as it is, and reconcile leaves the value alone.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_u64(&key, mine[8].wall_ms);
    shoal_key_add_u64(&key, mine[8].logic);
    shoal_key_add_str(&key, "a");
    shoal_key_add_bytes(&key, mine[8].hash, SHOAL_HASH_SIZE);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_HLC, &key, mine[7].hash, SHOAL_HASH_SIZE,
                              false), 0);
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.index_written + repair.index_removed + repair.corrupt, 0);
    uint8_t *kept;
    size_t kept_size;
    CHECK_INT(shoal_store_get(fixture.store, SHOAL_CF_OPLOG_BY_HLC, &key, &kept, &kept_size), 0);
    CHECK(kept && kept_size == SHOAL_HASH_SIZE && s_same_hash(kept, mine[7].hash));
    free(kept);
    s_entries_clear(mine, 20);
    s_entries_clear(theirs, 10);
    s_close(&fixture);
}

//  A value that does not decode, in any of the oplog's families, is an error
//  naming the family, the record type and the key; nothing crashes, and
//  reconcile counts the entry as corrupt and goes on.
static void
test_corrupt_values(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_entry_t entries[3];
    for (int i = 0; i < 3; i++)
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1,
                                    &entries[i]), 0);
    static const char garbage[] = "\xff\xff\x01 not an entry";
    shoal_key_t key;
    shoal_oplog_key_by_node_hlc(&key, &entries[1]);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, garbage,
                              sizeof garbage - 1, false), 0);

    shoal_oplog_entry_t entry;
    bool found;
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[1].hash, &entry, &found), -1);
    CHECK(!found);
    const char *error = shoal_oplog_error(fixture.oplog);
    CHECK_MSG(shoal_test_contains(error, "oplog_by_node_hlc (\"app\", \"a\", ")
           && shoal_test_contains(error, "OplogEntry"), "%s", error);
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_export(fixture.oplog, DATASET, &list), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "OplogEntry"));
    CHECK_INT(list.count, 0);
    //  The others still read.
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[2].hash, &entry, &found), 0);
    CHECK(found);
    shoal_oplog_entry_codec.clear(&entry);
    shoal_oplog_repair_t repair;
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.entries, 3);
    CHECK_INT(repair.corrupt, 1);
    CHECK_INT(repair.index_removed, 0);

    //  A head and a kv record that do not decode.
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "a");
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_NODE_HEAD, &key, garbage,
                              sizeof garbage - 1, false), 0);
    shoal_oplog_head_t head;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "a", &head, &found), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "HeadRecord"), "%s",
              shoal_oplog_error(fixture.oplog));
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1, NULL), -1);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_KV, &key, garbage, sizeof garbage - 1,
                              false), 0);
    shoal_kv_record_t record;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "a", &record, &found), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "kv (\"app\", \"a\")"),
              "%s", shoal_oplog_error(fixture.oplog));
    s_entries_clear(entries, 3);
    s_close(&fixture);
}

//  The kv read API: get, prefix scans with a limit, tombstones hidden.
static void
test_kv_api(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    const char *puts[] = { "a/1", "a/2", "a/3", "b/1", "ab" };
    for (size_t i = 0; i < COUNT_OF(puts); i++)
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, puts[i], SHOAL_OPLOG_PUT, puts[i],
                                    strlen(puts[i]), NULL), 0);
    shoal_oplog_entry_t deleted;
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "a/2", SHOAL_OPLOG_DELETE, NULL, 0,
                                &deleted), 0);
    shoal_kv_record_t record;
    bool found;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "a/1", &record, &found), 0);
    CHECK(found);
    CHECK_INT(record.value_size, 3);
    CHECK(memcmp(record.value, "a/1", 3) == 0);
    CHECK_STR(record.node, "a");
    CHECK(!record.deleted);
    shoal_kv_codec.clear(&record);
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "a/2", &record, &found), 0);
    CHECK(!found);
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, DATASET, "none", &record, &found), 0);
    CHECK(!found);
    //  The tombstone is there, holding the delete's version.
    CHECK_INT(s_count(&fixture, SHOAL_CF_KV, DATASET), 5);

    shoal_kv_list_t list = { 0 };
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "a/", NULL, 0, &list), 0);
    CHECK_INT(list.count, 2);
    CHECK_STR(list.items[0].key, "a/1");
    CHECK_STR(list.items[1].key, "a/3");
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "a", NULL, 0, &list), 0);
    CHECK_INT(list.count, 3);
    CHECK_STR(list.items[2].key, "ab");
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "", NULL, 2, &list), 0);
    CHECK_INT(list.count, 2);
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "", NULL, 0, &list), 0);
    CHECK_INT(list.count, 4);
    //  Paging resumes after the last key of the previous page, present or not.
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "a", "a/1", 0, &list), 0);
    CHECK_INT(list.count, 2);
    CHECK_STR(list.items[0].key, "a/3");
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "a", "a/2", 1, &list), 0);
    CHECK_INT(list.count, 1);
    CHECK_STR(list.items[0].key, "a/3");
    CHECK_INT(shoal_oplog_kv_count(fixture.oplog, DATASET), 4);
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "c", NULL, 0, &list), 0);
    CHECK_INT(list.count, 0);
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "a/2", SHOAL_OPLOG_PUT, "again", 5,
                                NULL), 0);
    CHECK_INT(shoal_oplog_kv_scan(fixture.oplog, DATASET, "a/", NULL, 0, &list), 0);
    CHECK_INT(list.count, 3);
    CHECK_STR(list.items[1].key, "a/2");
    CHECK_INT(list.items[1].record.value_size, 5);
    shoal_kv_list_clear(&list);
    shoal_oplog_entry_codec.clear(&deleted);
    s_close(&fixture);
}

//  A local write is stamped, linked to the node's previous entry, hashed over
//  its fields, and reads back the same. An oplog without a node id writes
//  nothing.
static void
test_local_write(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "a"), 0);
    shoal_oplog_entry_t entries[3];
    for (int i = 0; i < 3; i++) {
        CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1,
                                    &entries[i]), 0);
        CHECK_STR(entries[i].node, "a");
        uint8_t hash[SHOAL_HASH_SIZE];
        shoal_oplog_entry_hash(&entries[i], hash);
        CHECK(s_same_hash(hash, entries[i].hash));
        CHECK(entries[i].has_prev == (i > 0));
        if (i > 0) {
            CHECK(s_same_hash(entries[i].prev_hash, entries[i - 1].hash));
            shoal_hlc_stamp_t a = { entries[i - 1].wall_ms, entries[i - 1].logic };
            shoal_hlc_stamp_t b = { entries[i].wall_ms, entries[i].logic };
            CHECK(shoal_hlc_compare(&a, &b) < 0);
        }
        shoal_oplog_entry_t read;
        bool found;
        CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[i].hash, &read, &found), 0);
        CHECK(found);
        CHECK_INT(read.wall_ms, entries[i].wall_ms);
        CHECK(s_same_hash(read.prev_hash, entries[i].prev_hash));
        shoal_oplog_entry_codec.clear(&read);
        //  oplog_by_hlc holds the key alone, as the design has it.
        shoal_key_t key;
        shoal_key_init(&key);
        shoal_key_add_str(&key, DATASET);
        shoal_key_add_u64(&key, entries[i].wall_ms);
        shoal_key_add_u64(&key, entries[i].logic);
        shoal_key_add_str(&key, "a");
        shoal_key_add_bytes(&key, entries[i].hash, SHOAL_HASH_SIZE);
        uint8_t *value;
        size_t size;
        CHECK_INT(shoal_store_get(fixture.store, SHOAL_CF_OPLOG_BY_HLC, &key, &value, &size), 0);
        CHECK(value);
        CHECK_INT(size, 0);
        free(value);
    }
    s_entries_clear(entries, 3);
    s_close(&fixture);

    CHECK_INT(s_open(&fixture, "db", NULL), 0);
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1, NULL), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "node id"));
    s_close(&fixture);
}

//  Paging through the log by its last entry visits every entry once, in
//  order, even when nodes share stamps; node scans see one node's entries.
static void
test_after_paging(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    const char *nodes[] = { "n1", "n2", "n3", "n4" };
    shoal_oplog_entry_t entries[20];
    size_t count = 0;
    for (size_t n = 0; n < COUNT_OF(nodes); n++) {
        chain_t chain = { nodes[n], false, { 0 } };
        for (int i = 0; i < 5; i++)
            s_entry_init(&entries[count++], &chain, DATASET, "k", SHOAL_OPLOG_PUT, "v",
                         BASE_MS + i, 0);
    }
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, count, NULL), 0);
    shoal_oplog_list_t all = { 0 }, page = { 0 };
    CHECK_INT(shoal_oplog_export(fixture.oplog, DATASET, &all), 0);
    CHECK_INT(all.count, 20);
    size_t seen = 0;
    shoal_hlc_stamp_t after;
    char after_node[16] = "";
    bool first = true;
    do {
        CHECK_INT(shoal_oplog_after(fixture.oplog, DATASET, first ? NULL : &after, after_node,
                                    3, &page), 0);
        for (size_t i = 0; i < page.count; i++, seen++) {
            CHECK(seen < all.count);
            CHECK(s_same_hash(page.entries[i].hash, all.entries[seen].hash));
        }
        if (page.count) {
            shoal_oplog_entry_t *last = &page.entries[page.count - 1];
            after.wall_ms = last->wall_ms;
            after.logic = last->logic;
            snprintf(after_node, sizeof after_node, "%s", last->node);
        }
        first = false;
    } while (page.count == 3);
    CHECK_INT(seen, 20);
    //  Without a node, a stamp skips every node's entries at that stamp.
    after.wall_ms = BASE_MS + 2;
    after.logic = 0;
    CHECK_INT(shoal_oplog_after(fixture.oplog, DATASET, &after, NULL, 0, &page), 0);
    CHECK_INT(page.count, 8);
    CHECK_INT(shoal_oplog_node_after(fixture.oplog, DATASET, "n2", &after, 0, &page), 0);
    CHECK_INT(page.count, 2);
    CHECK_STR(page.entries[0].node, "n2");
    CHECK_INT(page.entries[0].wall_ms, BASE_MS + 3);
    CHECK_INT(shoal_oplog_node_after(fixture.oplog, DATASET, "n2", NULL, 4, &page), 0);
    CHECK_INT(page.count, 4);
    CHECK_INT(shoal_oplog_node_after(fixture.oplog, DATASET, "n", NULL, 0, &page), 0);
    CHECK_INT(page.count, 0);
    //  Counting from the index agrees with the scans it stands in for.
    CHECK_INT(shoal_oplog_node_after(fixture.oplog, DATASET, "n2", NULL, 0, &page), 0);
    CHECK_INT(shoal_oplog_node_count_after(fixture.oplog, DATASET, "n2", NULL, 0), page.count);
    CHECK_INT(shoal_oplog_node_count_after(fixture.oplog, DATASET, "n2", &after, 0), 2);
    CHECK_INT(shoal_oplog_node_count_after(fixture.oplog, DATASET, "n2", NULL, 3), 3);
    CHECK_INT(shoal_oplog_node_count_after(fixture.oplog, DATASET, "n", NULL, 0), 0);
    shoal_oplog_list_clear(&page);
    shoal_oplog_list_clear(&all);
    s_entries_clear(entries, count);
    s_close(&fixture);
}

//  Each entry is stored once: in oplog_by_node_hlc, so that a node's chain
//  reads in order without a point read per entry, while oplog_by_hash holds
//  its locator (node, wall, logic) and oplog_by_hlc its key alone. A lookup
//  by hash goes through the locator; a key of oplog_by_node_hlc holding
//  another entry is an error naming it, and a locator that reconcile finds
//  wrong is written again.
static void
test_entry_stored_once(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entries[4];
    for (int i = 0; i < 4; i++)
        s_entry_init(&entries[i], &chain, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 4, NULL), 0);
    uint8_t *bytes;
    size_t size;
    char error[256];
    for (int i = 0; i < 4; i++) {
        shoal_key_t key;
        shoal_oplog_key_by_node_hlc(&key, &entries[i]);
        uint8_t *stored;
        size_t stored_size;
        CHECK_INT(shoal_store_get(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, &stored,
                                  &stored_size), 0);
        CHECK_INT(shoal_oplog_entry_codec.encode(&entries[i], &bytes, &size, error, sizeof error), 0);
        CHECK(stored && stored_size == size && memcmp(stored, bytes, size) == 0);
        free(stored);
        //  The locator, and nothing of the entry's bytes.
        shoal_oplog_key_by_hash(&key, DATASET, entries[i].hash);
        CHECK_INT(shoal_store_get(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, &stored,
                                  &stored_size), 0);
        shoal_key_t locator;
        shoal_key_init(&locator);
        shoal_key_add_str(&locator, "n1");
        shoal_key_add_u64(&locator, entries[i].wall_ms);
        shoal_key_add_u64(&locator, entries[i].logic);
        CHECK(stored && stored_size == locator.size
              && memcmp(stored, locator.bytes, locator.size) == 0);
        CHECK(stored_size < size);
        free(stored);
        free(bytes);
        shoal_oplog_entry_t read;
        bool found;
        CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[i].hash, &read, &found), 0);
        CHECK(found && s_same_hash(read.hash, entries[i].hash) && read.wall_ms == entries[i].wall_ms);
        shoal_oplog_entry_codec.clear(&read);
    }

    //  A locator set wrong: the lookup names it, reconcile writes it again.
    shoal_key_t key;
    shoal_oplog_key_by_hash(&key, DATASET, entries[1].hash);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, "xx", 2, false), 0);
    shoal_oplog_entry_t read;
    bool found;
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[1].hash, &read, &found), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "is not a locator"), "%s",
              shoal_oplog_error(fixture.oplog));
    shoal_oplog_repair_t repair;
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.index_written, 1);
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entries[1].hash, &read, &found), 0);
    CHECK(found && s_same_hash(read.hash, entries[1].hash));
    shoal_oplog_entry_codec.clear(&read);

    //  Another entry at entries[1]'s key: an error naming the key.
    shoal_oplog_key_by_node_hlc(&key, &entries[1]);
    CHECK_INT(shoal_oplog_entry_codec.encode(&entries[2], &bytes, &size, error, sizeof error), 0);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, bytes, size, false), 0);
    free(bytes);
    shoal_oplog_list_t list = { 0 };
    CHECK_INT(shoal_oplog_node_after(fixture.oplog, DATASET, "n1", NULL, 0, &list), -1);
    CHECK_INT(list.count, 0);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "holds another entry"), "%s",
              shoal_oplog_error(fixture.oplog));
    shoal_oplog_list_clear(&list);
    s_entries_clear(entries, 4);
    s_close(&fixture);
}

//  A page for a peer catching up in bulk holds a node's entries as stored,
//  in chain order, after a stamp, up to its limits (one entry at least),
//  says whether more follow and where it ended; a key that holds no entry
//  is an error naming it.
static void
test_node_pages(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t one = { "n1", false, { 0 } }, two = { "n2", false, { 0 } };
    shoal_oplog_entry_t entries[12], others[3];
    for (int i = 0; i < 12; i++)
        s_entry_init(&entries[i], &one, DATASET, "k", SHOAL_OPLOG_PUT, "value", BASE_MS + i, 0);
    for (int i = 0; i < 3; i++)
        s_entry_init(&others[i], &two, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS + i, 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, 12, NULL), 0);
    CHECK_INT(shoal_oplog_append_batch(fixture.oplog, others, 3, NULL), 0);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "n1");
    shoal_key_add_u64(&key, entries[6].wall_ms);
    shoal_key_add_u64(&key, entries[6].logic);
    shoal_key_add_bytes(&key, entries[6].hash, SHOAL_HASH_SIZE);

    shoal_oplog_page_t page = { 0 };
    size_t seen = 0;
    shoal_hlc_stamp_t after;
    bool first = true;
    do {
        CHECK_INT(shoal_oplog_node_page(fixture.oplog, DATASET, "n1", first ? NULL : &after, 5,
                                        1 << 20, &page), 0);
        size_t offset = 0;
        for (size_t i = 0; i < page.count; offset += page.sizes[i++], seen++) {
            shoal_oplog_entry_t entry;
            char error[256];
            CHECK_INT(shoal_oplog_entry_codec.decode(page.bytes + offset, page.sizes[i], &entry,
                                                     error, sizeof error), 0);
            CHECK(seen < 12 && s_same_hash(entry.hash, entries[seen].hash));
            shoal_oplog_entry_codec.clear(&entry);
        }
        CHECK(page.count > 0);
        CHECK_INT(page.last.wall_ms, entries[seen - 1].wall_ms);
        after = page.last;
        first = false;
    } while (page.more);
    CHECK_INT(seen, 12);
    //  A byte limit below one entry still gives one; the last page is empty.
    CHECK_INT(shoal_oplog_node_page(fixture.oplog, DATASET, "n1", NULL, 100, 1, &page), 0);
    CHECK_INT(page.count, 1);
    CHECK(page.more);
    CHECK_INT(shoal_oplog_node_page(fixture.oplog, DATASET, "n1", &after, 100, 1 << 20, &page), 0);
    CHECK_INT(page.count, 0);
    CHECK(!page.more);
    CHECK_INT(shoal_oplog_node_page(fixture.oplog, DATASET, "n2", NULL, 100, 1 << 20, &page), 0);
    CHECK_INT(page.count, 3);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, "", 0, false), 0);
    CHECK_INT(shoal_oplog_node_page(fixture.oplog, DATASET, "n1", NULL, 100, 1 << 20, &page), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "holds no entry"), "%s",
              shoal_oplog_error(fixture.oplog));
    shoal_oplog_page_clear(&page);
    s_entries_clear(entries, 12);
    s_entries_clear(others, 3);
    s_close(&fixture);
}

//  The clean-stop mark is found once: taking it removes it, so a crash
//  after the next open is noticed at the one after.
static void
test_clean_mark(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    bool clean = true;
    CHECK_INT(shoal_oplog_take_clean_mark(fixture.oplog, &clean), 0);
    CHECK(!clean);
    CHECK_INT(shoal_oplog_write(fixture.oplog, DATASET, "k", SHOAL_OPLOG_PUT, "v", 1, NULL), 0);
    CHECK_INT(shoal_oplog_mark_clean(fixture.oplog), 0);
    s_close(&fixture);

    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    CHECK_INT(shoal_oplog_take_clean_mark(fixture.oplog, &clean), 0);
    CHECK(clean);
    CHECK_INT(shoal_oplog_take_clean_mark(fixture.oplog, &clean), 0);
    CHECK(!clean);
    s_close(&fixture);

    //  Closed without the mark, as a crash leaves it.
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    CHECK_INT(shoal_oplog_take_clean_mark(fixture.oplog, &clean), 0);
    CHECK(!clean);
    CHECK_INT(shoal_oplog_count(fixture.oplog, DATASET), 1);
    s_close(&fixture);
}

//  The watermark only rises, survives a reopen, and is per dataset.
static void
test_watermark(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    shoal_hlc_stamp_t watermark;
    bool found;
    CHECK_INT(shoal_oplog_watermark(fixture.oplog, DATASET, &watermark, &found), 0);
    CHECK(!found);
    shoal_hlc_stamp_t high = { BASE_MS + 10, 3 }, low = { BASE_MS + 5, 0 };
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &high, NULL), 0);
    CHECK_INT(shoal_oplog_prune(fixture.oplog, DATASET, &low, NULL), 0);
    s_close(&fixture);
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    CHECK_INT(shoal_oplog_watermark(fixture.oplog, DATASET, &watermark, &found), 0);
    CHECK(found);
    CHECK_INT(shoal_hlc_compare(&watermark, &high), 0);
    CHECK_INT(shoal_oplog_watermark(fixture.oplog, "other", &watermark, &found), 0);
    CHECK(!found);
    s_close(&fixture);
}

//  Stats: datasets, sorted, and their entry counts.
static void
test_stats(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    zlistx_t *names = shoal_oplog_datasets(fixture.oplog);
    CHECK(names);
    CHECK_INT(zlistx_size(names), 0);
    zlistx_destroy(&names);
    const char *datasets[] = { "zeta", "alpha", "mid" };
    for (size_t d = 0; d < COUNT_OF(datasets); d++)
        for (size_t i = 0; i <= d; i++)
            CHECK_INT(shoal_oplog_write(fixture.oplog, datasets[d], "k", SHOAL_OPLOG_PUT, "v",
                                        1, NULL), 0);
    names = shoal_oplog_datasets(fixture.oplog);
    CHECK(names);
    CHECK_INT(zlistx_size(names), 3);
    CHECK_STR((const char *) zlistx_first(names), "alpha");
    CHECK_STR((const char *) zlistx_next(names), "mid");
    CHECK_STR((const char *) zlistx_next(names), "zeta");
    zlistx_destroy(&names);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "zeta"), 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "alpha"), 2);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "mid"), 3);
    s_close(&fixture);
}

//  Checks that every dataset of NAMES has the counts a walk finds.
static bool
s_counts_hold(shoal_oplog_t *oplog, const char *const *names, size_t count, const char *after)
{
    bool hold = true;
    for (size_t d = 0; d < count; d++) {
        shoal_oplog_counts_t kept, walked;
        if (shoal_oplog_counts(oplog, names[d], &kept) || shoal_oplog_recount(oplog, names[d], &walked)) {
            fprintf(stderr, "after %s: %s: %s\n", after, names[d], shoal_oplog_error(oplog));
            return false;
        }
        if (kept.entries != walked.entries || kept.live != walked.live) {
            fprintf(stderr, "after %s: %s keeps %" PRIu64 " entries, %" PRIu64 " live; a walk finds %"
                    PRIu64 ", %" PRIu64 "\n", after, names[d], kept.entries, kept.live,
                    walked.entries, walked.live);
            hold = false;
        }
    }
    return hold;
}

//  The counts kept beside every write equal what a walk counts, whatever
//  the mix of writes: local puts and deletes, a peer's entries (some of
//  them twice), a snapshot's keys merged, prunes and a drop. Counts that
//  went wrong are put right by reconcile.
static void
test_counts_kept(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    const char *names[] = { "a", "b" };
    uint64_t state = shoal_test_seed();
    chain_t chain = { "peer", false, { 0 } };
    uint64_t wall = BASE_MS;
    int64_t recount_before = -1;
    for (int round = 0; round < 400; round++) {
        const char *dataset = names[shoal_test_random(&state) % COUNT_OF(names)];
        char key[16], value[32];
        snprintf(key, sizeof key, "k%d", (int) (shoal_test_random(&state) % 12));
        snprintf(value, sizeof value, "v%d", round);
        const char *what = "?";
        int step = (int) (shoal_test_random(&state) % 20);
        if (step < 8) {
            what = "a local write";
            shoal_oplog_op_t op = shoal_test_random(&state) % 3 ? SHOAL_OPLOG_PUT : SHOAL_OPLOG_DELETE;
            CHECK_INT(shoal_oplog_write(fixture.oplog, dataset, key, op, value, strlen(value), NULL), 0);
        }
        else
        if (step < 15) {
            what = "a peer's entries";
            shoal_oplog_entry_t entries[4];
            size_t count = 1 + (size_t) (shoal_test_random(&state) % COUNT_OF(entries));
            for (size_t i = 0; i < count; i++) {
                snprintf(key, sizeof key, "k%d", (int) (shoal_test_random(&state) % 12));
                s_entry_init(&entries[i], &chain, "a", key,
                             shoal_test_random(&state) % 3 ? SHOAL_OPLOG_PUT : SHOAL_OPLOG_DELETE, value, ++wall, 0);
            }
            CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, count, NULL), 0);
            //  The same again: nothing new.
            CHECK_INT(shoal_oplog_append_batch(fixture.oplog, entries, count, NULL), 0);
            s_entries_clear(entries, count);
        }
        else
        if (step < 18) {
            what = "a snapshot's key";
            uint8_t hash[SHOAL_HASH_SIZE];
            for (size_t i = 0; i < sizeof hash; i++)
                hash[i] = (uint8_t) shoal_test_random(&state);
            shoal_kv_record_t record = {
                .value = (uint8_t *) value, .value_size = strlen(value),
                .deleted = shoal_test_random(&state) % 2 == 0, .wall_ms = ++wall + 100000, .logic = 0,
                .node = (char *) "far", .epoch = 0
            };
            memcpy(record.hash, hash, sizeof hash);
            if (record.deleted) {
                record.value = NULL;
                record.value_size = 0;
            }
            bool applied;
            CHECK_INT(shoal_oplog_kv_merge(fixture.oplog, dataset, key, &record, &applied), 0);
        }
        else
        if (step < 19) {
            what = "a prune";
            shoal_hlc_stamp_t cutoff = { wall - shoal_test_random(&state) % 20, UINT32_MAX };
            CHECK_INT(shoal_oplog_prune(fixture.oplog, dataset, &cutoff, NULL), 0);
        }
        else {
            what = "a drop";
            CHECK_INT(shoal_oplog_drop(fixture.oplog, "b"), 0);
        }
        CHECK_MSG(s_counts_hold(fixture.oplog, names, COUNT_OF(names), what), "round %d", round);
    }
    shoal_oplog_counts_t counts;
    CHECK_INT(shoal_oplog_counts(fixture.oplog, "a", &counts), 0);
    CHECK(counts.entries > 0);
    recount_before = (int64_t) counts.entries;

    //  Wrong counts (as a store from before counts would hold: none).
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "count");
    shoal_key_add_str(&key, "a");
    shoal_batch_t *batch = shoal_batch_new(fixture.store);
    shoal_batch_delete(batch, SHOAL_CF_OPLOG_META, &key);
    CHECK_INT(shoal_store_write(fixture.store, batch, true), 0);
    shoal_batch_destroy(&batch);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "a"), 0);
    shoal_oplog_repair_t repair;
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.counts_written, 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "a"), recount_before);
    CHECK(s_counts_hold(fixture.oplog, names, COUNT_OF(names), "reconcile"));

    //  A value that is no pair of counts is an error naming it, until
    //  reconcile writes the counts again.
    batch = shoal_batch_new(fixture.store);
    shoal_batch_put(batch, SHOAL_CF_OPLOG_META, &key, "junk", 4);
    CHECK_INT(shoal_store_write(fixture.store, batch, true), 0);
    shoal_batch_destroy(&batch);
    CHECK_INT(shoal_oplog_counts(fixture.oplog, "a", &counts), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "(\"count\", \"a\")")
              && shoal_test_contains(shoal_oplog_error(fixture.oplog), "not a pair of counts"),
              "%s", shoal_oplog_error(fixture.oplog));
    CHECK_INT(shoal_oplog_count(fixture.oplog, "a"), -1);
    CHECK_INT(shoal_oplog_reconcile(fixture.oplog, &repair), 0);
    CHECK_INT(repair.counts_written, 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "a"), recount_before);
    s_close(&fixture);
}

//  A store written with another schema version is refused, not misread.
static void
test_schema_version(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    shoal_key_t key, value;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "schema");
    shoal_key_init(&value);
    shoal_key_add_u64(&value, SHOAL_OPLOG_SCHEMA_VERSION + 1);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size,
                              false), 0);
    shoal_oplog_destroy(&fixture.oplog);
    fixture.oplog = shoal_oplog_new(fixture.store, NULL);
    CHECK(fixture.oplog == NULL);
    s_close(&fixture);
}

static void
s_hex(const uint8_t *hash, char *hex)
{
    for (size_t i = 0; i < SHOAL_HASH_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", hash[i]);
}

//  The hash is BLAKE2b-256 over the canonical encoding shoal_oplog.c
//  documents. The expected values were computed apart from this code (with
//  Python's hashlib over that encoding), so a change to the encoding, which
//  would split the mesh, fails here. Every field takes part, and moving bytes
//  between neighbouring fields changes the hash.
static void
test_entry_hash(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entry;
    s_entry_init(&entry, &chain, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS, 1);
    char hex[2 * SHOAL_HASH_SIZE + 1];
    s_hex(entry.hash, hex);
    CHECK_STR(hex, "8aae92086a651b16d7c7c47a90bfefabc1dadd58c97692dae0505bbad94bec6e");
    shoal_oplog_entry_t linked;
    memset(chain.prev, 0x11, SHOAL_HASH_SIZE);
    s_entry_init(&linked, &chain, DATASET, "k", SHOAL_OPLOG_DELETE, NULL, BASE_MS, 2);
    s_hex(linked.hash, hex);
    CHECK_STR(hex, "779409361abdde4020a4f6c907872e2df9499aa1c137e4bdd17a2e4b67653bdb");

    //  Each change of one field gives another hash.
    uint8_t original[SHOAL_HASH_SIZE], changed[SHOAL_HASH_SIZE];
    shoal_oplog_entry_hash(&linked, original);
    linked.has_prev = false;
    shoal_oplog_entry_hash(&linked, changed);
    CHECK(!s_same_hash(original, changed));
    linked.has_prev = true;
    linked.prev_hash[31] ^= 1;
    shoal_oplog_entry_hash(&linked, changed);
    CHECK(!s_same_hash(original, changed));
    linked.prev_hash[31] ^= 1;
    shoal_oplog_entry_hash(&entry, original);
    entry.wall_ms++;
    shoal_oplog_entry_hash(&entry, changed);
    CHECK(!s_same_hash(original, changed));
    entry.wall_ms--;
    entry.logic++;
    shoal_oplog_entry_hash(&entry, changed);
    CHECK(!s_same_hash(original, changed));
    entry.logic--;
    entry.op = SHOAL_OPLOG_DELETE;
    shoal_oplog_entry_hash(&entry, changed);
    CHECK(!s_same_hash(original, changed));
    entry.op = SHOAL_OPLOG_PUT;
    entry.node[1] = '2';
    shoal_oplog_entry_hash(&entry, changed);
    CHECK(!s_same_hash(original, changed));
    entry.node[1] = '1';
    shoal_oplog_entry_hash(&entry, changed);
    CHECK(s_same_hash(original, changed));

    //  ("ab", "c") and ("a", "bc") hold the same bytes in another split.
    chain_t other = { "n1", false, { 0 } };
    shoal_oplog_entry_t left, right;
    s_entry_init(&left, &other, "ab", "c", SHOAL_OPLOG_PUT, "", BASE_MS, 0);
    other.has_prev = false;
    s_entry_init(&right, &other, "a", "bc", SHOAL_OPLOG_PUT, "", BASE_MS, 0);
    CHECK(!s_same_hash(left.hash, right.hash));
    shoal_oplog_entry_codec.clear(&entry);
    shoal_oplog_entry_codec.clear(&linked);
    shoal_oplog_entry_codec.clear(&left);
    shoal_oplog_entry_codec.clear(&right);
    s_close(&fixture);
}

//  The codecs refuse what a record must not hold, on write and on read.
static void
test_codec_validation(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db", "self"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entry;
    s_entry_init(&entry, &chain, DATASET, "k", SHOAL_OPLOG_PUT, "v", BASE_MS, 0);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_bytes(&key, entry.hash, SHOAL_HASH_SIZE);
    shoal_batch_t *batch = shoal_batch_new(fixture.store);
    entry.op = (shoal_oplog_op_t) 7;
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_OPLOG_BY_HASH, &key,
                                     &shoal_oplog_entry_codec, &entry), -1);
    CHECK_MSG(shoal_test_contains(shoal_store_error(fixture.store), "op 7"), "%s",
              shoal_store_error(fixture.store));
    entry.op = SHOAL_OPLOG_PUT;
    free(entry.dataset);
    entry.dataset = shoal_strdup("");
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_OPLOG_BY_HASH, &key,
                                     &shoal_oplog_entry_codec, &entry), -1);
    CHECK(shoal_test_contains(shoal_store_error(fixture.store), "dataset is empty"));
    CHECK_INT(shoal_batch_count(batch), 0);
    shoal_batch_destroy(&batch);

    //  OplogEntry { dataset "app", op 1, node "n1", prev_hash 5 bytes, hash 32 bytes }
    uint8_t wire[64];
    size_t size = 0;
    const uint8_t head[] = { 0x0A, 3, 'a', 'p', 'p', 0x18, 1, 0x3A, 2, 'n', '1',
                             0x42, 5, 1, 2, 3, 4, 5, 0x4A, SHOAL_HASH_SIZE };
    memcpy(wire, head, sizeof head);
    size = sizeof head;
    memcpy(wire + size, entry.hash, SHOAL_HASH_SIZE);
    size += SHOAL_HASH_SIZE;
    //  The entry is stored at its key in oplog_by_node_hlc (stamp 0.0 here,
    //  none on the wire), which its locator in oplog_by_hash names.
    shoal_key_t home, locator;
    shoal_oplog_key_by_node_hlc_of(&home, DATASET, "n1", 0, 0, entry.hash);
    shoal_key_init(&locator);
    shoal_key_add_str(&locator, "n1");
    shoal_key_add_u64(&locator, 0);
    shoal_key_add_u64(&locator, 0);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_HASH, &key, locator.bytes,
                              locator.size, false), 0);
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, wire, size, false), 0);
    shoal_oplog_entry_t read;
    bool found;
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entry.hash, &read, &found), -1);
    CHECK_MSG(shoal_test_contains(shoal_oplog_error(fixture.oplog), "prev_hash has 5 bytes"),
              "%s", shoal_oplog_error(fixture.oplog));
    //  The same without prev_hash decodes.
    memmove(wire + 11, wire + 18, size - 18);
    size -= 7;
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, wire, size, false), 0);
    CHECK_INT(shoal_oplog_get(fixture.oplog, DATASET, entry.hash, &read, &found), 0);
    CHECK(found);
    CHECK(!read.has_prev);
    CHECK_STR(read.node, "n1");
    shoal_oplog_entry_codec.clear(&read);
    //  HeadRecord { hash 3 bytes }
    const uint8_t short_head[] = { 0x1A, 3, 1, 2, 3 };
    shoal_key_init(&key);
    shoal_key_add_str(&key, DATASET);
    shoal_key_add_str(&key, "n1");
    CHECK_INT(shoal_store_put(fixture.store, SHOAL_CF_OPLOG_NODE_HEAD, &key, short_head,
                              sizeof short_head, false), 0);
    shoal_oplog_head_t node_head;
    CHECK_INT(shoal_oplog_head(fixture.oplog, DATASET, "n1", &node_head, &found), -1);
    CHECK(shoal_test_contains(shoal_oplog_error(fixture.oplog), "hash has 3 bytes"));
    shoal_oplog_entry_codec.clear(&entry);
    s_close(&fixture);
}

//  KvRecord's deleted field (shoal.proto) and a tag for each wire type.
#define KV_DELETED_VARINT 0x10
#define KV_DELETED_FIXED64 0x11
#define KV_DELETED_LENGTH 0x12
#define KV_DELETED_FIXED32 0x15
#define KV_WALL_MS_LENGTH 0x1A
//  A room for one hand-made record.
#define KV_BYTES_MAX 256

//  The quick reader of the tombstone flag says what the full decode says,
//  on every way of writing the flag protobuf-c accepts and on bytes it
//  refuses: a bool read from a fixed or a length-delimited field, a ten
//  byte varint whose only set bit lies past 64 bits, a length prefix longer
//  than protobuf-c reads, a known field of the wrong wire type.
static void
test_kv_deleted_reader_agrees_with_the_codec(void)
{
    shoal_kv_record_t record = { .node = "n1", .wall_ms = 7 };
    memset(record.hash, 0xAB, sizeof record.hash);
    uint8_t *good;
    size_t good_size;
    char error[256];
    CHECK(shoal_kv_codec.encode(&record, &good, &good_size, error, sizeof error) == 0);
    CHECK(good_size + 16 <= KV_BYTES_MAX);
    static const struct {
        uint8_t tail[16];           //  bytes appended to a good live record
        size_t size;                //  how many
        int rc;                     //  what both readers answer
        bool deleted;               //  and the flag, when they accept
    } cases[] = {
        { { KV_DELETED_FIXED64, 1, 0, 0, 0, 0, 0, 0, 0 }, 9, 0, true },
        { { KV_DELETED_FIXED64, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 9, 0, false },
        { { KV_DELETED_FIXED32, 0, 0, 0, 2 }, 5, 0, true },
        { { KV_DELETED_LENGTH, 1, 0 }, 3, 0, true },
        { { KV_DELETED_LENGTH, 0 }, 2, 0, false },
        { { KV_DELETED_VARINT, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02 }, 11, 0, true },
        { { KV_DELETED_VARINT, 0x80, 0x00 }, 3, 0, false },
        { { KV_DELETED_VARINT, 1 }, 2, 0, true },
        { { KV_DELETED_LENGTH, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 7, -1, false },
        { { KV_WALL_MS_LENGTH, 0 }, 2, -1, false },
        { { 0x03 }, 1, -1, false },
    };
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        uint8_t bytes[KV_BYTES_MAX];
        memcpy(bytes, good, good_size);
        memcpy(bytes + good_size, cases[i].tail, cases[i].size);
        size_t size = good_size + cases[i].size;
        shoal_kv_record_t decoded;
        int full = shoal_kv_codec.decode(bytes, size, &decoded, error, sizeof error);
        bool full_deleted = full == 0 && decoded.deleted;
        if (full == 0)
            shoal_kv_codec.clear(&decoded);
        bool deleted;
        int quick = shoal_kv_record_deleted(bytes, size, &deleted);
        CHECK_MSG(full == cases[i].rc && full_deleted == cases[i].deleted,
                  "case %zu: the codec answers %d, deleted %d", i, full, full_deleted);
        CHECK_MSG(quick == full && (quick != 0 || deleted == full_deleted),
                  "case %zu: the quick reader answers %d, deleted %d", i, quick, deleted);
    }
    //  An empty record may come as no buffer at all: refused as the codec
    //  refuses it, with no offset taken from a NULL pointer (UBSan's
    //  null+0 finding).
    shoal_kv_record_t none;
    bool none_deleted;
    CHECK_INT(shoal_kv_record_deleted(NULL, 0, &none_deleted), shoal_kv_codec.decode(NULL, 0, &none, error,
                                                                                      sizeof error));
    free(good);
}

int
main(void)
{
    SHOAL_TEST(test_entry_hash);
    SHOAL_TEST(test_codec_validation);
    SHOAL_TEST(test_index_consistency);
    SHOAL_TEST(test_prune_cutoff);
    SHOAL_TEST(test_node_heads);
    SHOAL_TEST(test_restart_durability);
    SHOAL_TEST(test_dedupe);
    SHOAL_TEST(test_refused_entries);
    SHOAL_TEST(test_dataset_isolation);
    SHOAL_TEST(test_chain_range);
    SHOAL_TEST(test_append_chain);
    SHOAL_TEST(test_kv_collect);
    SHOAL_TEST(test_clock_across_restart);
    SHOAL_TEST(test_apply_order_independence);
    SHOAL_TEST(test_epoch_dataset);
    SHOAL_TEST(test_epoch_order_independence);
    SHOAL_TEST(test_export_import_merge_drop);
    SHOAL_TEST(test_reconcile_repairs);
    SHOAL_TEST(test_rebuild_in_slices);
    SHOAL_TEST(test_recount_in_slices);
    SHOAL_TEST(test_corrupt_values);
    SHOAL_TEST(test_kv_api);
    SHOAL_TEST(test_local_write);
    SHOAL_TEST(test_after_paging);
    SHOAL_TEST(test_watermark);
    SHOAL_TEST(test_stats);
    SHOAL_TEST(test_schema_version);
    SHOAL_TEST(test_entry_stored_once);
    SHOAL_TEST(test_node_pages);
    SHOAL_TEST(test_clean_mark);
    SHOAL_TEST(test_counts_kept);
    SHOAL_TEST(test_kv_deleted_reader_agrees_with_the_codec);
    return shoal_test_finish();
}
