/*  test_oplog_bulk: loading entries in bulk, as a node far behind does.

    The property users rely on: a store that took a peer's log in bulk holds
    exactly what a store that appended the same entries one by one holds,
    in every family, byte for byte (entries, indexes, heads, kv state); an
    entry that does not check out is refused and named, and nothing before
    it is lost; and a load running beside ordinary appends on another thread
    converges to the same state as appending everything. Entries are built
    by hand (s_entry_init) exactly as a peer would send them; stamps start
    at BASE_MS, in the past.
*/
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "shoal_oplog.h"
#include "shoal_oplog_chain.h"
#include "shoal_oplog_bulk.h"
#include "shoal_oplog_keys.h"
#include "shoal_store.h"
#include "shoal_test.h"

#define BASE_MS UINT64_C(1700000000000)
#define PATH_MAX_TEST 4200
#define NODES 3
#define DATASETS 2
#define PER_CHAIN 1200
#define KEYS 40
#define ENTRIES_MAX (NODES * DATASETS * PER_CHAIN)
//  Largest page the equivalence test hands a load at once, and how many
//  pages go into one write at most.
#define PAGE_MAX 170
#define PAGES_PER_WRITE 3
#define THREAD_ENTRIES 3000
#define THREAD_NEAR_MAX 100000
#define THREAD_PAGE 100
#define MAX_AHEAD_MS 60000
#define COUNT_OF(array) (sizeof (array) / sizeof (array)[0])

typedef struct {
    shoal_store_t *store;       //  the store, owned by the test's thread
    shoal_oplog_t *oplog;       //  its log
    shoal_store_t *shared;      //  the load's handle on the store
    shoal_oplog_bulk_t *bulk;   //  the load
} fixture_t;


static const shoal_cf_t s_families[] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC,
    SHOAL_CF_OPLOG_PREV_TO_HASH, SHOAL_CF_OPLOG_NODE_HEAD, SHOAL_CF_KV
};

//  What cuts a load's write short, in the torn-write test: the table files
//  in DIR are removed just before the file of CF goes in, so that its
//  ingest fails as a crash there would leave the store.
typedef struct {
    shoal_cf_t cf;              //  the family to cut at
    bool armed;                 //  cut at the next file of CF
    char dir[PATH_MAX_TEST];    //  the load's directory
} cut_t;

static void
s_cut(shoal_cf_t cf, void *arg)
{
    cut_t *cut = (cut_t *) arg;
    if (!cut || !cut->armed || cf != cut->cf)
        return;
    cut->armed = false;
    shoal_oplog_bulk_sweep(cut->dir);
}

//  Opens store NAME with its log and a load, whose ingests CUT (may be
//  NULL) watches.
static int
s_open_cut(fixture_t *fixture, const char *name, cut_t *cut)
{
    memset(fixture, 0, sizeof *fixture);
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "%s/%s", shoal_test_dir, name);
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    fixture->store = shoal_store_new(path, &store_options, NULL);
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.node = "self";
    fixture->oplog = fixture->store ? shoal_oplog_new(fixture->store, &options) : NULL;
    if (!fixture->oplog)
        return -1;
    fixture->shared = shoal_store_share(fixture->store);
    snprintf(path, sizeof path, "%s/%s-load", shoal_test_dir, name);
    if (cut)
        snprintf(cut->dir, sizeof cut->dir, "%s", path);
    //  Large, as the loader's: the second load of test_bulk_prepared_beside_ingest is not.
    shoal_oplog_bulk_options_t bulk_options = { MAX_AHEAD_MS, NULL, NULL, s_cut, cut, true };
    fixture->bulk = shoal_oplog_bulk_new(fixture->oplog, fixture->shared, path, &bulk_options);
    return fixture->bulk ? 0 : -1;
}

static int
s_open(fixture_t *fixture, const char *name)
{
    return s_open_cut(fixture, name, NULL);
}

static void
s_close(fixture_t *fixture)
{
    shoal_oplog_bulk_destroy(&fixture->bulk);
    shoal_store_destroy(&fixture->shared);
    shoal_oplog_destroy(&fixture->oplog);
    shoal_store_destroy(&fixture->store);
}


//  Whether stores A and B hold the same bytes in every oplog family.
static bool
s_same_stores(shoal_store_t *a, shoal_store_t *b)
{
    bool same = true;
    for (size_t f = 0; f < COUNT_OF(s_families); f++) {
        size_t a_size, b_size;
        char *a_dump = s_family_dump(a, s_families[f], NULL, &a_size);
        char *b_dump = s_family_dump(b, s_families[f], NULL, &b_size);
        bool equal = a_size == b_size && memcmp(a_dump, b_dump, a_size) == 0;
        if (!equal)
            fprintf(stderr, "%s differs (%zu bytes against %zu)\n", shoal_cf_name(s_families[f]),
                    a_size, b_size);
        same = same && equal;
        free(a_dump);
        free(b_dump);
    }
    return same;
}

//  NODES chains in each of DATASETS datasets, PER_CHAIN entries each, laid
//  out chain after chain: puts and some deletes of KEYS shared keys, with
//  stamps that collide across nodes. Returns the count.
static size_t
s_make_entries(shoal_oplog_entry_t *entries, uint64_t *state)
{
    size_t count = 0;
    for (int d = 0; d < DATASETS; d++)
        for (int n = 0; n < NODES; n++) {
            static const char *nodes[] = { "n1", "n2", "n3" };
            chain_t chain = { nodes[n], false, { 0 } };
            char dataset[16];
            snprintf(dataset, sizeof dataset, "set%d", d);
            uint64_t wall = BASE_MS;
            for (int i = 0; i < PER_CHAIN; i++) {
                char key[16], value[32];
                snprintf(key, sizeof key, "k%02d", (int) (shoal_test_random(state) % KEYS));
                snprintf(value, sizeof value, "%s:%d", nodes[n], i);
                wall += shoal_test_random(state) % 3 + 1;
                bool gone = shoal_test_random(state) % 7 == 0;
                s_entry_init(&entries[count++], &chain, dataset, key,
                             gone ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT, gone ? NULL : value,
                             wall, (uint32_t) (shoal_test_random(state) % 2));
            }
        }
    return count;
}

//  Encodes ENTRIES[0..COUNT) as a page: BYTES[i], SIZES[i] (owned).
static void
s_page(const shoal_oplog_entry_t *entries, size_t count, uint8_t **bytes, size_t *sizes)
{
    char error[256];
    for (size_t i = 0; i < count; i++)
        if (shoal_oplog_entry_codec.encode(&entries[i], &bytes[i], &sizes[i], error, sizeof error))
            bytes[i] = NULL;
}

static void
s_page_clear(uint8_t **bytes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(bytes[i]);
}

//  Loads the chain ENTRIES[0..COUNT) (one dataset and node) into FIXTURE
//  after TIP, in pages of random sizes, writing every few pages. Returns 0
//  or -1.
static int
s_load_chain(fixture_t *fixture, const shoal_oplog_entry_t *entries, size_t count,
             shoal_oplog_tip_t *tip, uint64_t *state)
{
    size_t done = 0, pages = 0;
    while (done < count) {
        size_t size = 1 + (size_t) (shoal_test_random(state) % PAGE_MAX);
        if (size > count - done)
            size = count - done;
        uint8_t *bytes[PAGE_MAX];
        size_t sizes[PAGE_MAX], accepted;
        s_page(entries + done, size, bytes, sizes);
        int rc = shoal_oplog_bulk_add(fixture->bulk, entries[done].dataset, entries[done].node, tip,
                                      (const uint8_t *const *) bytes, sizes, size, &accepted);
        s_page_clear(bytes, size);
        if (rc || accepted != size)
            return -1;
        done += size;
        if (++pages % PAGES_PER_WRITE == 0 && shoal_oplog_bulk_write(fixture->bulk, NULL))
            return -1;
    }
    return 0;
}

//  Checks that DATASET's counts in TESTED are those kept in REFERENCE and
//  those a walk of TESTED finds.
static bool
s_same_counts(shoal_oplog_t *reference, shoal_oplog_t *tested, const char *dataset)
{
    shoal_oplog_counts_t expected, kept, walked;
    if (shoal_oplog_counts(reference, dataset, &expected) || shoal_oplog_counts(tested, dataset, &kept)
    ||  shoal_oplog_recount(tested, dataset, &walked))
        return false;
    if (kept.entries == expected.entries && kept.live == expected.live
    &&  walked.entries == expected.entries && walked.live == expected.live)
        return true;
    fprintf(stderr, "%s: expected %" PRIu64 " entries, %" PRIu64 " live; kept %" PRIu64 ", %" PRIu64
            "; walked %" PRIu64 ", %" PRIu64 "\n", dataset, expected.entries, expected.live,
            kept.entries, kept.live, walked.entries, walked.live);
    return false;
}

static bool
s_same_counts_all(shoal_oplog_t *reference, shoal_oplog_t *tested)
{
    bool same = true;
    for (int d = 0; d < DATASETS; d++) {
        char dataset[16];
        snprintf(dataset, sizeof dataset, "set%d", d);
        same = s_same_counts(reference, tested, dataset) && same;
    }
    return same;
}

// ---------------------------------------------------------------------------

//  A store that loads every chain in bulk (pages of random sizes, written
//  now and then, chains interleaved across writes) ends byte for byte equal
//  to one that appended the same entries; so does one that appended some
//  chains and some of a chain first, then took the rest in bulk (releasing
//  its memory half way).
static void
test_bulk_equals_append(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *entries = calloc(ENTRIES_MAX, sizeof *entries);
    size_t count = s_make_entries(entries, &state);
    fixture_t source, loaded, partial;
    CHECK_INT(s_open(&source, "source"), 0);
    CHECK_INT(s_open(&loaded, "loaded"), 0);
    CHECK_INT(s_open(&partial, "partial"), 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, entries, count, NULL), 0);
    uint64_t generation = shoal_oplog_kv_generation_now(loaded.oplog, "set0");

    for (size_t c = 0; c < count; c += PER_CHAIN) {
        shoal_oplog_tip_t tip = { 0 };
        CHECK_MSG(s_load_chain(&loaded, entries + c, PER_CHAIN, &tip, &state) == 0, "%s",
                  shoal_oplog_bulk_error(loaded.bulk));
        CHECK(tip.has_tip);
        CHECK(memcmp(tip.hash, entries[c + PER_CHAIN - 1].hash, SHOAL_HASH_SIZE) == 0);
    }
    shoal_oplog_bulk_result_t result;
    CHECK_INT(shoal_oplog_bulk_write(loaded.bulk, &result), 0);
    CHECK_INT(shoal_oplog_bulk_count(loaded.bulk), 0);
    CHECK_MSG(s_same_stores(source.store, loaded.store), "a bulk load differs from appending");
    CHECK_MSG(s_same_counts_all(source.oplog, loaded.oplog), "a bulk load counts otherwise");
    //  Its kv writes raised the dataset's kv generation, as every kv write
    //  does: a tombstone collection resting on it wakes.
    uint64_t written = shoal_oplog_kv_generation_now(loaded.oplog, "set0");
    CHECK_MSG(written > generation, "a bulk load left set0's kv generation at %" PRIu64, written);

    //  The first chain appended whole, a third of the second, the rest in bulk.
    CHECK_INT(shoal_oplog_append_batch(partial.oplog, entries, PER_CHAIN + PER_CHAIN / 3, NULL), 0);
    shoal_oplog_head_t head;
    bool found;
    CHECK_INT(shoal_oplog_head(partial.oplog, entries[PER_CHAIN].dataset, entries[PER_CHAIN].node,
                               &head, &found), 0);
    CHECK(found);
    shoal_oplog_tip_t tip = { true, { 0 }, head.stamp };
    memcpy(tip.hash, head.hash, SHOAL_HASH_SIZE);
    free(head.node);
    size_t from = PER_CHAIN + PER_CHAIN / 3;
    CHECK_MSG(s_load_chain(&partial, entries + from, 2 * PER_CHAIN - from, &tip, &state) == 0, "%s",
              shoal_oplog_bulk_error(partial.bulk));
    //  A load that gave its memory back takes the rest as well.
    CHECK_INT(shoal_oplog_bulk_write(partial.bulk, NULL), 0);
    shoal_oplog_bulk_release(partial.bulk);
    for (size_t c = 2 * PER_CHAIN; c < count; c += PER_CHAIN) {
        shoal_oplog_tip_t fresh = { 0 };
        CHECK_MSG(s_load_chain(&partial, entries + c, PER_CHAIN, &fresh, &state) == 0, "%s",
                  shoal_oplog_bulk_error(partial.bulk));
    }
    CHECK_INT(shoal_oplog_bulk_write(partial.bulk, NULL), 0);
    CHECK_MSG(s_same_stores(source.store, partial.store), "a partial bulk load differs from appending");
    CHECK_MSG(s_same_counts_all(source.oplog, partial.oplog), "a partial bulk load counts otherwise");
    //  And its log reads back as the source's, chain by chain.
    shoal_oplog_list_t ours = { 0 }, theirs = { 0 };
    CHECK_INT(shoal_oplog_node_after(partial.oplog, "set1", "n2", NULL, 0, &ours), 0);
    CHECK_INT(shoal_oplog_node_after(source.oplog, "set1", "n2", NULL, 0, &theirs), 0);
    CHECK_INT(ours.count, PER_CHAIN);
    CHECK_INT(theirs.count, PER_CHAIN);
    for (size_t i = 0; i < ours.count; i++)
        CHECK(memcmp(ours.entries[i].hash, theirs.entries[i].hash, SHOAL_HASH_SIZE) == 0);
    shoal_oplog_list_clear(&ours);
    shoal_oplog_list_clear(&theirs);
    s_close(&source);
    s_close(&loaded);
    s_close(&partial);
    s_entries_clear(entries, count);
    free(entries);
}

//  An entry that does not check out is refused, named by its place in the
//  page, its hash and what is wrong with it; the entries before it stay,
//  and a write keeps exactly those, with the head on the last of them.
static void
test_bulk_refuses_and_names(void)
{
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entries[10];
    for (int i = 0; i < 10; i++) {
        char value[16];
        snprintf(value, sizeof value, "v%d", i);
        s_entry_init(&entries[i], &chain, "app", "k", SHOAL_OPLOG_PUT, value, BASE_MS + i, 0);
    }
    uint8_t *bytes[10];
    size_t sizes[10], accepted;
    s_page(entries, 10, bytes, sizes);
    //  Entry 5's value is changed in transit: its hash no longer matches.
    uint8_t *value = memmem(bytes[4], sizes[4], "v4", 2);
    CHECK(value);
    value[1] = '9';
    shoal_oplog_tip_t tip = { 0 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &tip, (const uint8_t *const *) bytes,
                                   sizes, 10, &accepted), -1);
    CHECK_INT(accepted, 4);
    const char *error = shoal_oplog_bulk_error(fixture.bulk);
    char hex[2 * SHOAL_HASH_SIZE + 1];
    for (size_t i = 0; i < SHOAL_HASH_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", entries[4].hash[i]);
    CHECK_MSG(shoal_test_contains(error, "entry 5 of 10") && shoal_test_contains(error, hex)
           && shoal_test_contains(error, "does not match its fields"), "%s", error);
    CHECK(tip.has_tip && memcmp(tip.hash, entries[3].hash, SHOAL_HASH_SIZE) == 0);

    //  The rest of the page, the bad entry left out: it does not link.
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &tip,
                                   (const uint8_t *const *) bytes + 5, sizes + 5, 5, &accepted), -1);
    CHECK_INT(accepted, 0);
    CHECK_MSG(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "does not link"), "%s",
              shoal_oplog_bulk_error(fixture.bulk));
    //  Another node's chain, another dataset, bytes that are no entry.
    shoal_oplog_tip_t none = { 0 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n2", &none, (const uint8_t *const *) bytes,
                                   sizes, 1, &accepted), -1);
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "another node's chain"));
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "other", "n1", &none, (const uint8_t *const *) bytes,
                                   sizes, 1, &accepted), -1);
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "another dataset"));
    const uint8_t *garbage[] = { (const uint8_t *) "\xff\xff\x01 not an entry" };
    size_t garbage_size[] = { 17 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &tip, garbage, garbage_size, 1,
                                   &accepted), -1);
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "entry 1 of 1"));
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "does not decode"));
    //  A chain that starts in the middle: its first entry links to one not here.
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &none, (const uint8_t *const *) bytes + 5,
                                   sizes + 5, 1, &accepted), -1);
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "not here"));
    s_page_clear(bytes, 10);

    //  A clock too far ahead.
    chain_t ahead = { "n3", false, { 0 } };
    shoal_oplog_entry_t future;
    s_entry_init(&future, &ahead, "app", "k", SHOAL_OPLOG_PUT, "f",
                 (uint64_t) zclock_time() + 10 * MAX_AHEAD_MS, 0);
    s_page(&future, 1, bytes, sizes);
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n3", &none, (const uint8_t *const *) bytes,
                                   sizes, 1, &accepted), -1);
    CHECK(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "ms ahead of ours"));
    s_page_clear(bytes, 1);
    shoal_oplog_entry_codec.clear(&future);

    //  What was accepted is written, and nothing else.
    CHECK_INT(shoal_oplog_bulk_count(fixture.bulk), 4);
    shoal_oplog_bulk_result_t result;
    CHECK_INT(shoal_oplog_bulk_write(fixture.bulk, &result), 0);
    CHECK_INT(result.entries, 4);
    CHECK_INT(result.keys, 1);
    CHECK_INT(result.heads, 1);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "app"), 4);
    shoal_oplog_head_t head;
    bool found;
    CHECK_INT(shoal_oplog_head(fixture.oplog, "app", "n1", &head, &found), 0);
    CHECK(found && memcmp(head.hash, entries[3].hash, SHOAL_HASH_SIZE) == 0);
    free(head.node);
    shoal_kv_record_t record;
    CHECK_INT(shoal_oplog_kv_get(fixture.oplog, "app", "k", &record, &found), 0);
    CHECK(found && record.value_size == 2 && memcmp(record.value, "v3", 2) == 0);
    shoal_kv_codec.clear(&record);
    //  The oplog appends from there on as from any head.
    bool added;
    CHECK_INT(shoal_oplog_append(fixture.oplog, &entries[4], &added), 0);
    CHECK(added);
    s_entries_clear(entries, 10);
    s_close(&fixture);
}

//  Entries are hashed a group at a time: a page of 20, one of them with a
//  value too long to be hashed with the others, is taken whole; in
//  another, an entry changed in transit in the second group and one that
//  does not decode in the third are each named, with exactly the entries
//  before them taken.
static void
test_bulk_checks_past_a_group(void)
{
    enum { COUNT = 20, LONG_VALUE = 5000 };
    fixture_t fixture;
    CHECK_INT(s_open(&fixture, "db"), 0);
    chain_t chain = { "n1", false, { 0 } };
    shoal_oplog_entry_t entries[COUNT];
    char *long_value = (char *) malloc(LONG_VALUE + 1);
    CHECK(long_value);
    memset(long_value, 'x', LONG_VALUE);
    long_value[LONG_VALUE] = '\0';
    for (int i = 0; i < COUNT; i++) {
        char key[16], value[16];
        snprintf(key, sizeof key, "k%d", i);
        snprintf(value, sizeof value, "v%d", i);
        s_entry_init(&entries[i], &chain, "app", key, SHOAL_OPLOG_PUT, i == 10 ? long_value : value,
                     BASE_MS + (uint64_t) i, 0);
    }
    free(long_value);
    uint8_t *bytes[COUNT];
    size_t sizes[COUNT], accepted;
    s_page(entries, COUNT, bytes, sizes);
    shoal_oplog_tip_t tip = { 0 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &tip, (const uint8_t *const *) bytes,
                                   sizes, COUNT, &accepted), 0);
    CHECK_INT(accepted, COUNT);
    CHECK(tip.has_tip && memcmp(tip.hash, entries[COUNT - 1].hash, SHOAL_HASH_SIZE) == 0);
    shoal_oplog_bulk_clear(fixture.bulk);

    //  Entry 12's value changed in transit.
    uint8_t *value = memmem(bytes[11], sizes[11], "v11", 3);
    CHECK(value);
    value[2] = '7';
    shoal_oplog_tip_t from_start = { 0 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &from_start, (const uint8_t *const *) bytes,
                                   sizes, COUNT, &accepted), -1);
    CHECK_INT(accepted, 11);
    CHECK_MSG(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "entry 12 of 20")
           && shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "does not match its fields"),
              "%s", shoal_oplog_bulk_error(fixture.bulk));
    CHECK(memcmp(from_start.hash, entries[10].hash, SHOAL_HASH_SIZE) == 0);
    shoal_oplog_bulk_clear(fixture.bulk);
    value[2] = '1';

    //  Entry 18 is no entry at all.
    uint8_t *kept = bytes[17];
    size_t kept_size = sizes[17];
    bytes[17] = (uint8_t *) "\xff\xff\x01 not an entry";
    sizes[17] = 17;
    shoal_oplog_tip_t again = { 0 };
    CHECK_INT(shoal_oplog_bulk_add(fixture.bulk, "app", "n1", &again, (const uint8_t *const *) bytes,
                                   sizes, COUNT, &accepted), -1);
    bytes[17] = kept;
    sizes[17] = kept_size;
    CHECK_INT(accepted, 17);
    CHECK_MSG(shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "entry 18 of 20")
           && shoal_test_contains(shoal_oplog_bulk_error(fixture.bulk), "does not decode"),
              "%s", shoal_oplog_bulk_error(fixture.bulk));
    CHECK(memcmp(again.hash, entries[16].hash, SHOAL_HASH_SIZE) == 0);
    //  What was taken is written.
    shoal_oplog_bulk_result_t result;
    CHECK_INT(shoal_oplog_bulk_write(fixture.bulk, &result), 0);
    CHECK_INT(result.entries, 17);
    CHECK_INT(shoal_oplog_count(fixture.oplog, "app"), 17);
    s_page_clear(bytes, COUNT);
    s_entries_clear(entries, COUNT);
    s_close(&fixture);
}

//  What the load thread of the concurrency test works on.
typedef struct {
    fixture_t *fixture;
    const shoal_oplog_entry_t *entries;
    size_t count;
    int rc;
    atomic_bool done;           //  set when the load thread has finished
} s_loader_t;

static void *
s_loader_run(void *arg)
{
    s_loader_t *loader = (s_loader_t *) arg;
    shoal_oplog_tip_t tip = { 0 };
    loader->rc = 0;
    for (size_t done = 0; done < loader->count && loader->rc == 0; done += THREAD_PAGE) {
        uint8_t *bytes[THREAD_PAGE];
        size_t sizes[THREAD_PAGE], accepted;
        s_page(loader->entries + done, THREAD_PAGE, bytes, sizes);
        loader->rc = shoal_oplog_bulk_add(loader->fixture->bulk, "app", "far", &tip,
                                          (const uint8_t *const *) bytes, sizes, THREAD_PAGE,
                                          &accepted);
        s_page_clear(bytes, THREAD_PAGE);
        if (loader->rc == 0)
            loader->rc = shoal_oplog_bulk_write(loader->fixture->bulk, NULL);
    }
    atomic_store(&loader->done, true);
    return NULL;
}

//  A load on its own thread while the oplog keeps appending newer entries
//  to the same keys on this one, for as long as the load runs: each kv
//  state the load read may be overtaken before its table goes in, and the
//  newer entry must still win. Whatever the interleaving, the state is the
//  one appending everything gives.
static void
test_bulk_beside_appends(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *far = calloc(THREAD_ENTRIES, sizeof *far);
    shoal_oplog_entry_t *near = calloc(THREAD_NEAR_MAX, sizeof *near);
    chain_t far_chain = { "far", false, { 0 } }, near_chain = { "near", false, { 0 } };
    //  Each far entry writes a key of its own; near entries write them at
    //  random, so that a key's first near entry may come at any time.
    for (size_t i = 0; i < THREAD_ENTRIES; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%04zu", i);
        s_entry_init(&far[i], &far_chain, "app", key, SHOAL_OPLOG_PUT, "far", BASE_MS + i, 0);
    }
    for (size_t i = 0; i < THREAD_NEAR_MAX; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%04d", (int) (shoal_test_random(&state) % THREAD_ENTRIES));
        s_entry_init(&near[i], &near_chain, "app", key, SHOAL_OPLOG_PUT, "near",
                     BASE_MS + THREAD_ENTRIES + i, 0);
    }
    fixture_t reference, fixture;
    CHECK_INT(s_open(&reference, "reference"), 0);
    CHECK_INT(s_open(&fixture, "db"), 0);

    s_loader_t loader = { &fixture, far, THREAD_ENTRIES, -1, false };
    pthread_t thread;
    pthread_create(&thread, NULL, s_loader_run, &loader);
    size_t appended = 0;
    while (!atomic_load(&loader.done) && appended < THREAD_NEAR_MAX) {
        bool added;
        CHECK_INT(shoal_oplog_append(fixture.oplog, &near[appended++], &added), 0);
    }
    pthread_join(thread, NULL);
    printf("     %zu entries appended while the load ran\n", appended);
    CHECK_MSG(loader.rc == 0, "%s", shoal_oplog_bulk_error(fixture.bulk));
    CHECK_INT(shoal_oplog_append_batch(reference.oplog, far, THREAD_ENTRIES, NULL), 0);
    CHECK_INT(shoal_oplog_append_batch(reference.oplog, near, appended, NULL), 0);
    CHECK_MSG(s_same_stores(reference.store, fixture.store), "a load beside appends differs");
    CHECK_MSG(s_same_counts(reference.oplog, fixture.oplog, "app"), "a load beside appends counts otherwise");
    s_close(&reference);
    s_close(&fixture);
    s_entries_clear(far, THREAD_ENTRIES);
    s_entries_clear(near, THREAD_NEAR_MAX);
    free(far);
    free(near);
}

//  Table files a dead process left behind are swept; nothing else is.
static void
test_bulk_sweep(void)
{
    char dir[PATH_MAX_TEST], path[PATH_MAX_TEST + 64];
    snprintf(dir, sizeof dir, "%s/load", shoal_test_dir);
    CHECK(zsys_dir_create("%s", dir) == 0);
    const char *names[] = { "load-1-kv-0.table", "load-2-oplog_by_hash-3.table", "keep.txt" };
    for (size_t i = 0; i < COUNT_OF(names); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *file = fopen(path, "w");
        CHECK(file);
        fclose(file);
    }
    CHECK_INT(shoal_oplog_bulk_sweep(dir), 2);
    snprintf(path, sizeof path, "%s/keep.txt", dir);
    CHECK_INT(access(path, F_OK), 0);
    CHECK_INT(shoal_oplog_bulk_sweep(dir), 0);
}

//  Adds ENTRIES[0..COUNT), which continue their chain after *TIP, to BULK
//  in pages, without writing. Returns 0 or -1.
static int
s_add_after(shoal_oplog_bulk_t *bulk, const shoal_oplog_entry_t *entries, size_t count,
            shoal_oplog_tip_t *tip)
{
    for (size_t done = 0; done < count; ) {
        size_t size = count - done < PAGE_MAX ? count - done : PAGE_MAX;
        uint8_t *bytes[PAGE_MAX];
        size_t sizes[PAGE_MAX], accepted;
        s_page(entries + done, size, bytes, sizes);
        int rc = shoal_oplog_bulk_add(bulk, entries[done].dataset, entries[done].node, tip,
                                      (const uint8_t *const *) bytes, sizes, size, &accepted);
        s_page_clear(bytes, size);
        if (rc || accepted != size)
            return -1;
        done += size;
    }
    return 0;
}

//  Adds the chain ENTRIES[0..COUNT) to FIXTURE's load from its start, in
//  pages, without writing. Returns 0 or -1.
static int
s_add_chain(fixture_t *fixture, const shoal_oplog_entry_t *entries, size_t count)
{
    shoal_oplog_tip_t tip = { 0 };
    return s_add_after(fixture->bulk, entries, count, &tip);
}

//  Two loads written as the loader writes them: the second one's log
//  families' table files are made (prepared) before the first one is
//  ingested, its kv file only after, and then it goes in. The store ends
//  byte for byte equal to one that appended every entry: the keys the
//  second load writes again hold its newer versions, not the first's. A
//  load prepared and then cleared leaves no table file behind.
static void
test_bulk_prepared_beside_ingest(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *entries = calloc(ENTRIES_MAX, sizeof *entries);
    size_t count = s_make_entries(entries, &state);
    fixture_t source, loaded;
    CHECK_INT(s_open(&source, "source"), 0);
    CHECK_INT(s_open(&loaded, "loaded"), 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, entries, count, NULL), 0);
    char dir[PATH_MAX_TEST];
    snprintf(dir, sizeof dir, "%s/loaded-load", shoal_test_dir);
    shoal_oplog_bulk_options_t options = { MAX_AHEAD_MS, NULL, NULL, NULL, NULL, false };
    shoal_oplog_bulk_t *second = shoal_oplog_bulk_new(loaded.oplog, loaded.shared, dir, &options);
    CHECK(second);

    //  Each chain's first part in the first load, the rest in the second.
    size_t split = PER_CHAIN / 3;
    for (size_t c = 0; c < count; c += PER_CHAIN) {
        shoal_oplog_tip_t tip = { 0 };
        CHECK_INT(s_add_after(loaded.bulk, entries + c, split, &tip), 0);
        CHECK_INT(s_add_after(second, entries + c + split, PER_CHAIN - split, &tip), 0);
    }
    CHECK_INT(shoal_oplog_bulk_make(loaded.bulk), 0);
    CHECK_INT(shoal_oplog_bulk_prepare(second), 0);
    CHECK_INT(shoal_oplog_bulk_ingest(loaded.bulk, NULL), 0);
    CHECK_INT(shoal_oplog_bulk_make(second), 0);
    CHECK_INT(shoal_oplog_bulk_ingest(second, NULL), 0);
    CHECK_MSG(s_same_stores(source.store, loaded.store), "loads written in steps differ from appending");
    CHECK_MSG(s_same_counts_all(source.oplog, loaded.oplog), "loads written in steps count otherwise");

    //  Prepared, then cleared: its table files go.
    shoal_oplog_tip_t tip = { 0 };
    CHECK_INT(s_add_after(second, entries, PER_CHAIN, &tip), 0);
    CHECK_INT(shoal_oplog_bulk_prepare(second), 0);
    shoal_oplog_bulk_clear(second);
    CHECK_INT(shoal_oplog_bulk_sweep(dir), 0);

    shoal_oplog_bulk_destroy(&second);
    s_close(&source);
    s_close(&loaded);
    s_entries_clear(entries, count);
    free(entries);
}

//  A write cut between its table files (kv and oplog_by_hash in, the rest
//  not) leaves the log marked torn, as a crash there would; a write that
//  succeeds after it in the same process keeps the mark; reconcile repairs
//  the log (the cut chain's locators go: its entries, in oplog_by_node_hlc
//  last, never went in, and its head did not move, so a peer sends them
//  again) and removes the mark. Loaded again, the log equals one that
//  appended every entry. A new store is whole; one made by a build that does not mark its
//  loads counts as torn until reconciled.
static void
test_bulk_cut_is_reconciled(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *entries = calloc(ENTRIES_MAX, sizeof *entries);
    size_t count = s_make_entries(entries, &state);
    fixture_t source, cut_store;
    cut_t cut = { SHOAL_CF_OPLOG_BY_HLC, false, "" };
    CHECK_INT(s_open(&source, "source"), 0);
    CHECK_INT(s_open_cut(&cut_store, "cut", &cut), 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, entries, count, NULL), 0);

    bool torn = true, found;
    const char *why = NULL;
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(!torn && strstr(why, "new"), "a new store: %s", why);
    //  A store a build that does not mark loads made, opened again.
    s_close(&cut_store);
    CHECK_INT(s_open_cut(&cut_store, "cut", &cut), 0);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "marked");
    shoal_batch_t *batch = shoal_batch_new(cut_store.store);
    shoal_batch_delete(batch, SHOAL_CF_OPLOG_META, &key);
    CHECK_INT(shoal_store_write(cut_store.store, batch, true), 0);
    shoal_batch_destroy(&batch);
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(torn && strstr(why, "predates"), "a store never marked: %s", why);
    CHECK_INT(shoal_oplog_reconcile(cut_store.oplog, NULL), 0);
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(!torn && strstr(why, "no write was torn"), "just reconciled: %s", why);

    //  The first chain: cut as its oplog_by_hlc file goes in.
    CHECK_INT(s_add_chain(&cut_store, entries, PER_CHAIN), 0);
    cut.armed = true;
    CHECK_INT(shoal_oplog_bulk_write(cut_store.bulk, NULL), -1);
    CHECK(!cut.armed);
    const char *error = shoal_oplog_bulk_error(cut_store.bulk);
    CHECK_MSG(error && strstr(error, "oplog_by_hlc"), "the failure names the family: %s", error);
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(torn && strstr(why, "cut"), "after the cut: %s", why);
    //  Half in: its locators are in oplog_by_hash, its entries not in its
    //  chain's family (where they are stored), and its head did not move.
    shoal_oplog_key_by_hash(&key, entries[PER_CHAIN - 1].dataset, entries[PER_CHAIN - 1].hash);
    found = false;
    CHECK_INT(shoal_store_exists(cut_store.store, SHOAL_CF_OPLOG_BY_HASH, &key, &found), 0);
    CHECK(found);
    CHECK_INT(shoal_oplog_count(cut_store.oplog, entries[0].dataset), 0);
    shoal_oplog_head_t head;
    found = true;
    CHECK_INT(shoal_oplog_head(cut_store.oplog, entries[0].dataset, entries[0].node, &head, &found), 0);
    CHECK(!found);

    //  A new load for the other chains writes, and the mark stays.
    shoal_oplog_bulk_destroy(&cut_store.bulk);
    shoal_oplog_bulk_options_t bulk_options = { MAX_AHEAD_MS, NULL, NULL, s_cut, &cut, false };
    cut_store.bulk = shoal_oplog_bulk_new(cut_store.oplog, cut_store.shared, cut.dir, &bulk_options);
    CHECK(cut_store.bulk);
    for (size_t c = PER_CHAIN; c < count; c += PER_CHAIN)
        CHECK_INT(s_add_chain(&cut_store, entries + c, PER_CHAIN), 0);
    CHECK_MSG(shoal_oplog_bulk_write(cut_store.bulk, NULL) == 0, "%s", shoal_oplog_bulk_error(cut_store.bulk));
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(torn, "a later load unmarked an earlier cut: %s", why);

    shoal_oplog_repair_t repair;
    CHECK_INT(shoal_oplog_reconcile(cut_store.oplog, &repair), 0);
    CHECK_INT(repair.corrupt, 0);
    //  The cut chain's locators, which locate nothing.
    CHECK_INT(repair.index_written, 0);
    CHECK_INT(repair.index_removed, PER_CHAIN);
    CHECK_INT(repair.heads_written, 0);
    CHECK_INT(shoal_oplog_torn(cut_store.oplog, &torn, &why), 0);
    CHECK_MSG(!torn, "after reconcile: %s", why);
    //  The cut chain again, as the peer would send it.
    shoal_oplog_bulk_destroy(&cut_store.bulk);
    cut_store.bulk = shoal_oplog_bulk_new(cut_store.oplog, cut_store.shared, cut.dir, &bulk_options);
    CHECK(cut_store.bulk);
    CHECK_INT(s_add_chain(&cut_store, entries, PER_CHAIN), 0);
    CHECK_MSG(shoal_oplog_bulk_write(cut_store.bulk, NULL) == 0, "%s", shoal_oplog_bulk_error(cut_store.bulk));
    CHECK_MSG(s_same_stores(source.store, cut_store.store), "a reconciled cut load differs from appending");
    CHECK_MSG(s_same_counts_all(source.oplog, cut_store.oplog), "a reconciled cut load counts otherwise");
    s_close(&source);
    s_close(&cut_store);
    s_entries_clear(entries, count);
    free(entries);
}

//  Entries of a chain the log took live while a load held them too (the
//  load writes them again, changing nothing) are counted once.
static void
test_bulk_overlapping_append(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *entries = calloc(ENTRIES_MAX, sizeof *entries);
    size_t count = s_make_entries(entries, &state);
    fixture_t source, overlapped;
    CHECK_INT(s_open(&source, "source"), 0);
    CHECK_INT(s_open(&overlapped, "overlapped"), 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, entries, PER_CHAIN, NULL), 0);
    CHECK_INT(s_add_chain(&overlapped, entries, PER_CHAIN), 0);
    CHECK_INT(shoal_oplog_append_batch(overlapped.oplog, entries, PER_CHAIN / 2, NULL), 0);
    CHECK_MSG(shoal_oplog_bulk_write(overlapped.bulk, NULL) == 0, "%s", shoal_oplog_bulk_error(overlapped.bulk));
    CHECK_MSG(s_same_stores(source.store, overlapped.store), "an overlapped load differs from appending");
    CHECK_MSG(s_same_counts(source.oplog, overlapped.oplog, entries[0].dataset),
              "an overlapped load counts otherwise");
    s_close(&source);
    s_close(&overlapped);
    s_entries_clear(entries, count);
    free(entries);
}

//  One load that takes a chain's entries twice over, as two streams of the
//  same chain would bring them (the whole chain from its start, then its
//  second half again from the middle), writes each entry once: the store's
//  families end byte for byte equal to one that appended the chain once,
//  and the dataset's counts count each entry once. (Sync never gives a
//  load two streams of one chain, see shoal_sync.c.)
static void
test_bulk_chain_added_twice(void)
{
    uint64_t state = shoal_test_seed();
    shoal_oplog_entry_t *entries = calloc(ENTRIES_MAX, sizeof *entries);
    size_t count = s_make_entries(entries, &state);
    fixture_t source, twice;
    CHECK_INT(s_open(&source, "source"), 0);
    CHECK_INT(s_open(&twice, "twice"), 0);
    CHECK_INT(shoal_oplog_append_batch(source.oplog, entries, PER_CHAIN, NULL), 0);
    CHECK_INT(s_add_chain(&twice, entries, PER_CHAIN), 0);
    size_t half = PER_CHAIN / 2;
    shoal_oplog_tip_t middle = { .has_tip = true, .stamp = { entries[half - 1].wall_ms, entries[half - 1].logic } };
    memcpy(middle.hash, entries[half - 1].hash, SHOAL_HASH_SIZE);
    CHECK_INT(s_add_after(twice.bulk, entries + half, PER_CHAIN - half, &middle), 0);
    CHECK_MSG(shoal_oplog_bulk_write(twice.bulk, NULL) == 0, "%s", shoal_oplog_bulk_error(twice.bulk));
    CHECK_MSG(s_same_stores(source.store, twice.store), "a chain loaded twice differs from appending it once");
    CHECK_MSG(s_same_counts(source.oplog, twice.oplog, entries[0].dataset),
              "a chain loaded twice counts otherwise than appending it once");
    s_close(&source);
    s_close(&twice);
    s_entries_clear(entries, count);
    free(entries);
}

//  Reading an entry in place, as a load does, gives what decoding it gives,
//  field by field; and whatever the decode refuses (every truncation, every
//  flipped byte of a few entries) the reading refuses too, and the other
//  way round.
static void
test_read_in_place_equals_decode(void)
{
    uint64_t state = shoal_test_seed();
    chain_t chain = { "node-7", false, { 0 } };
    size_t compared = 0, refused = 0;
    for (int n = 0; n < 40; n++) {
        char key[64], value[64];
        snprintf(key, sizeof key, "key/%d/%" PRIu64, n, shoal_test_random(&state));
        snprintf(value, sizeof value, "%" PRIu64, shoal_test_random(&state));
        shoal_oplog_entry_t entry;
        s_entry_init(&entry, &chain, "set", key, n % 5 ? SHOAL_OPLOG_PUT : SHOAL_OPLOG_DELETE,
                     n % 5 ? value : NULL, BASE_MS + shoal_test_random(&state) % 100000, (uint32_t) (n % 3));
        uint8_t *bytes;
        size_t size;
        char error[256];
        CHECK_INT(shoal_oplog_entry_codec.encode(&entry, &bytes, &size, error, sizeof error), 0);
        //  Whole, each truncation, and with each of its bytes flipped.
        for (size_t variant = 0; variant <= 2 * size; variant++) {
            uint8_t *copy = malloc(size);
            memcpy(copy, bytes, size);
            size_t length = variant < size ? variant : size;
            if (variant > size)
                copy[variant - size - 1] ^= (uint8_t) (1 + shoal_test_random(&state) % 255);
            shoal_oplog_entry_t decoded, read;
            char strings[4096], other[256];
            int decode = shoal_oplog_entry_codec.decode(copy, length, &decoded, error, sizeof error);
            int reading = shoal_oplog_entry_read(copy, length, &read, strings, sizeof strings, other,
                                                 sizeof other);
            CHECK_MSG(decode == reading, "entry %d, variant %zu: decode %d (%s), read %d (%s)", n, variant,
                      decode, decode ? error : "", reading, reading ? other : "");
            if (decode == 0 && reading == 0) {
                bool same = streq(decoded.dataset, read.dataset) && streq(decoded.key, read.key)
                         && streq(decoded.node, read.node) && decoded.op == read.op
                         && decoded.value_size == read.value_size
                         && (decoded.value_size == 0
                             || memcmp(decoded.value, read.value, read.value_size) == 0)
                         && decoded.wall_ms == read.wall_ms && decoded.logic == read.logic
                         && decoded.has_prev == read.has_prev
                         && memcmp(decoded.prev_hash, read.prev_hash, SHOAL_HASH_SIZE) == 0
                         && memcmp(decoded.hash, read.hash, SHOAL_HASH_SIZE) == 0;
                CHECK_MSG(same, "entry %d, variant %zu reads otherwise than it decodes", n, variant);
                shoal_oplog_entry_codec.clear(&decoded);
                compared++;
            }
            else
                refused++;
            free(copy);
        }
        free(bytes);
        shoal_oplog_entry_codec.clear(&entry);
    }
    printf("     %zu read as decoded, %zu refused by both\n", compared, refused);
    CHECK(compared > 0 && refused > 0);
    //  No entry at all, as (NULL, 0): refused by both, with no offset taken
    //  from a NULL pointer.
    shoal_oplog_entry_t none;
    char strings[64], error[256], other[256];
    CHECK_INT(shoal_oplog_entry_read(NULL, 0, &none, strings, sizeof strings, other, sizeof other),
              shoal_oplog_entry_codec.decode(NULL, 0, &none, error, sizeof error));
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_bulk_equals_append);
    SHOAL_TEST(test_bulk_refuses_and_names);
    SHOAL_TEST(test_bulk_checks_past_a_group);
    SHOAL_TEST(test_bulk_beside_appends);
    SHOAL_TEST(test_bulk_sweep);
    SHOAL_TEST(test_bulk_prepared_beside_ingest);
    SHOAL_TEST(test_bulk_cut_is_reconciled);
    SHOAL_TEST(test_bulk_overlapping_append);
    SHOAL_TEST(test_bulk_chain_added_twice);
    SHOAL_TEST(test_read_in_place_equals_decode);
    return shoal_test_finish();
}
