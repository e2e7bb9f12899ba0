/*  shoal_oplog_fsck: the oplog's part of the consistency sweep. See
    shoal_oplog_fsck.h for the steps and why the indexes are summed rather
    than looked up key by key.
*/
#include "shoal_oplog_fsck.h"
#include "shoal_oplog_private.h"
#include "shoal_drain_store.h"
#include "shoal_alloc.h"

//  Room for a finding's sentence.
#define FSCK_PROBLEM_MAX 1024
//  Room for the strings of an entry read in place (dataset, key, node).
#define FSCK_STRINGS_MAX (3 * SHOAL_KEY_MAX + 16)
//  Constants of the digest's mixing (splitmix64 and the golden ratio).
#define FSCK_MIX_A UINT64_C(0xff51afd7ed558ccd)
#define FSCK_MIX_B UINT64_C(0xc4ceb9fe1a85ec53)
#define FSCK_MIX_C UINT64_C(0x9e3779b97f4a7c15)
#define FSCK_WORD 8

typedef enum {
    STEP_CHAINS,            //  oplog_by_node_hlc: entries, chains, expected digests
    STEP_BY_HASH,           //  oplog_by_hash: digest
    STEP_BY_HLC,            //  oplog_by_hlc: digest
    STEP_HEADS,             //  oplog_node_head: the head rule
    STEP_KV,                //  kv: decodes, live keys
    STEP_META,              //  oplog_meta: tuples, counts
    STEP_PREV,              //  oplog_prev_to_hash: empty
    STEP_COMPARE,           //  digests compared, datasets to walk again chosen
    STEP_PIN,               //  the chosen datasets, key by key
    STEP_DONE
} s_step_t;

//  What the check counts of one dataset.
typedef struct {
    uint64_t entries;           //  entries in its chains (oplog_by_node_hlc)
    uint64_t hash_expect;       //  digest its entries' oplog_by_hash keys and locators should sum to
    uint64_t hash_seen;         //  digest of what oplog_by_hash holds
    uint64_t hash_keys;         //  keys in oplog_by_hash
    uint64_t hlc_expect;        //  likewise for oplog_by_hlc (keys only: nothing reads its values)
    uint64_t hlc_seen;
    uint64_t hlc_keys;
    uint64_t live;              //  kv keys that are not tombstones
    bool has_count;             //  oplog_meta holds its counts
    bool has_watermark;         //  it was pruned
    shoal_hlc_stamp_t watermark;    //  up to where
} s_dataset_t;

//  A chain's last entry, and whether a head names it.
typedef struct {
    shoal_hlc_stamp_t stamp;
    uint8_t hash[SHOAL_HASH_SIZE];
    bool headed;
} s_tip_t;

//  A dataset to walk again, and which index.
typedef struct {
    char *dataset;
    shoal_cf_t cf;              //  oplog_by_node_hlc (the entries' side), or an index
} s_pin_t;

struct _shoal_oplog_fsck_t {
    shoal_oplog_t *oplog;       //  the validator and epochs (borrowed)
    shoal_store_t *store;       //  the snapshot read (borrowed)
    s_step_t step;              //  what is being looked at
    shoal_iter_t *iter;         //  the walk of the step; NULL before its first key
    bool failed;                //  the snapshot could not be read
    zhashx_t *datasets;         //  name -> s_dataset_t
    zhashx_t *tips;             //  "dataset\nnode" -> s_tip_t
    char run[2 * OPLOG_NAME_SIZE];  //  the chain being walked, "dataset\nnode" ("": none yet)
    s_dataset_t *run_dataset;   //  its dataset
    shoal_oplog_tip_t run_tip;  //  its entry so far
    bool run_started;           //  an entry of it was seen
    uint8_t last_prefix[OPLOG_NAME_SIZE + 2];   //  the dataset element of the last key, encoded
    size_t last_prefix_size;
    s_dataset_t *last_dataset;  //  its dataset
    zlistx_t *pins;             //  s_pin_t to walk
    s_pin_t *pin;               //  the one being walked
    uint64_t prev_keys;         //  keys found in oplog_prev_to_hash
    bool indexes_wrong;         //  an index key, a head or the retired index was named repairable
    zlistx_t *miscounted;       //  datasets whose counts were named
    shoal_oplog_rebuild_t *rebuild;     //  the repair's rebuild of the indexes, once begun
    bool rebuilt;               //  and over
    const char *recount;        //  the repair's dataset of MISCOUNTED being recounted (NULL: none yet)
    shoal_oplog_recount_t *counting;    //  its recount, a slice a step
    bool recounted;             //  every one is
    shoal_finding_fn *fn;       //  the caller's, for this step
    void *arg;
    char strings[FSCK_STRINGS_MAX]; //  an entry read in place
};

// ---------------------------------------------------------------------------
//  Digests: order-independent sums of 64-bit hashes

static uint64_t
s_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= FSCK_MIX_A;
    x ^= x >> 33;
    x *= FSCK_MIX_B;
    x ^= x >> 33;
    return x;
}

static uint64_t
s_digest(const uint8_t *bytes, size_t size, uint64_t seed)
{
    uint64_t h = seed ^ (size * FSCK_MIX_C);
    size_t i = 0;
    for (; i + FSCK_WORD <= size; i += FSCK_WORD) {
        uint64_t word;
        memcpy(&word, bytes + i, FSCK_WORD);
        h = (h ^ s_mix(word)) * FSCK_MIX_C;
    }
    uint64_t tail = 0;
    memcpy(&tail, bytes + i, size - i);
    h = (h ^ s_mix(tail ^ (uint64_t) (size - i))) * FSCK_MIX_C;
    return s_mix(h);
}

//  What one oplog_by_hash key with its locator adds to a digest.
static uint64_t
s_digest_pair(const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size)
{
    return s_digest(key, key_size, 1) + s_mix(s_digest(value, value_size, 2));
}

// ---------------------------------------------------------------------------
//  Findings

static void CHECK_PRINTF(6)
s_found(shoal_oplog_fsck_t *self, shoal_cf_t cf, const uint8_t *key, size_t key_size, bool repairable,
        const char *format, ...)
{
    char problem[FSCK_PROBLEM_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(problem, sizeof problem, format, args);
    va_end(args);
    char *text = key ? shoal_key_format(key, key_size) : NULL;
    shoal_finding_t finding = { shoal_cf_name(cf), text ? text : "()", problem, repairable };
    if (repairable && cf != SHOAL_CF_OPLOG_META)
        self->indexes_wrong = true;
    self->fn(&finding, self->arg);
    free(text);
}

static void
s_hex(const uint8_t *hash, char *hex)
{
    for (size_t i = 0; i < SHOAL_HASH_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", hash[i]);
}

// ---------------------------------------------------------------------------
//  Datasets

//  The figures of DATASET, made (with its watermark read) when first named.
static s_dataset_t *
s_dataset(shoal_oplog_fsck_t *self, const char *name)
{
    s_dataset_t *dataset = (s_dataset_t *) zhashx_lookup(self->datasets, name);
    if (dataset)
        return dataset;
    dataset = (s_dataset_t *) zmalloc(sizeof *dataset);
    shoal_key_t key;
    shoal_oplog_key_watermark(&key, name);
    uint8_t *value;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_META, &key, &value, &size) == 0 && value) {
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, value, size);
        uint64_t logic;
        if (shoal_key_read_u64(&reader, &dataset->watermark.wall_ms) == 0
        &&  shoal_key_read_u64(&reader, &logic) == 0 && logic <= UINT32_MAX) {
            dataset->watermark.logic = (uint32_t) logic;
            dataset->has_watermark = true;
        }
        //  A watermark that does not read is named in the meta step.
        free(value);
    }
    zhashx_insert(self->datasets, name, dataset);
    return dataset;
}

//  The length of a key's first element when it is a string (0 otherwise):
//  keys of one dataset share it, so the walks compare bytes instead of
//  decoding each key's dataset.
static size_t
s_first_string(const uint8_t *bytes, size_t size)
{
    if (size < 2 || bytes[0] != SHOAL_KEY_TAG_STRING)
        return 0;
    for (size_t i = 1; i < size; i++)
        if (bytes[i] == 0 && (i + 1 == size || bytes[i + 1] != 0xFF))
            return i + 1;
        else
        if (bytes[i] == 0)
            i++;
    return 0;
}

//  The dataset a key of the walk starts with, or NULL (the key's first
//  element is no dataset).
static s_dataset_t *
s_dataset_of_key(shoal_oplog_fsck_t *self, const uint8_t *bytes, size_t size)
{
    size_t prefix = s_first_string(bytes, size);
    if (!prefix || prefix > sizeof self->last_prefix)
        return NULL;
    if (self->last_dataset && prefix == self->last_prefix_size && memcmp(bytes, self->last_prefix, prefix) == 0)
        return self->last_dataset;
    char name[OPLOG_NAME_SIZE];
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, prefix);
    if (shoal_key_read_str(&reader, name, sizeof name))
        return NULL;
    memcpy(self->last_prefix, bytes, prefix);
    self->last_prefix_size = prefix;
    self->last_dataset = s_dataset(self, name);
    return self->last_dataset;
}

// ---------------------------------------------------------------------------
//  Step 1: the chains

//  Ends the chain being walked: its tip is kept for the heads.
static void
s_run_end(shoal_oplog_fsck_t *self)
{
    if (!self->run_started)
        return;
    s_tip_t *tip = (s_tip_t *) zmalloc(sizeof *tip);
    tip->stamp = self->run_tip.stamp;
    memcpy(tip->hash, self->run_tip.hash, SHOAL_HASH_SIZE);
    zhashx_update(self->tips, self->run, tip);
    self->run_started = false;
    self->run[0] = 0;
}

//  Starts the chain of (DATASET, NODE) when the walk comes to it.
static void
s_run_at(shoal_oplog_fsck_t *self, const char *dataset, const char *node)
{
    size_t dataset_size = strlen(dataset);
    if (strncmp(self->run, dataset, dataset_size) == 0 && self->run[dataset_size] == '\n'
    &&  streq(self->run + dataset_size + 1, node))
        return;
    s_run_end(self);
    snprintf(self->run, sizeof self->run, "%s\n%s", dataset, node);
    self->run_dataset = s_dataset(self, dataset);
}

//  A key of oplog_by_node_hlc and the entry stored there. The entry is read
//  first: when it sits at its own key, the key needs no parsing of its own.
static int
s_check_chain_key(shoal_oplog_fsck_t *self, const uint8_t *key, size_t key_size, const uint8_t *value,
                  size_t value_size)
{
    shoal_key_t entry_key;
    if (value_size == 0) {
        s_found(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, false, "holds no entry");
        return 0;
    }
    shoal_oplog_entry_t entry;
    char why[FSCK_PROBLEM_MAX / 2];
    if (shoal_oplog_entry_read(value, value_size, &entry, self->strings, sizeof self->strings, why, sizeof why)) {
        s_found(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, false, "the value does not decode: %s", why);
        return 0;
    }
    shoal_key_t expected;
    shoal_oplog_key_by_node_hlc(&expected, &entry);
    if (expected.overflow || expected.size != key_size || memcmp(expected.bytes, key, key_size) != 0) {
        char *text = shoal_key_format(expected.bytes, expected.size);
        s_found(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, false, "holds an entry that belongs at %s",
                text ? text : "(?)");
        free(text);
        return 0;
    }
    s_run_at(self, entry.dataset, entry.node);
    s_dataset_t *figures = self->run_dataset;
    //  The chain's first entry here links to nothing, unless the entries
    //  before it were pruned: then its link cannot be checked.
    shoal_oplog_tip_t first = { false, { 0 }, { 0, 0 } };
    const shoal_oplog_tip_t *tip = self->run_started ? &self->run_tip : figures->has_watermark ? NULL : &first;
    shoal_oplog_rules_t rules = {
        .dataset = NULL, .node = NULL, .tip = tip, .trusted = false, .now_ms = 0, .max_ahead_ms = UINT64_MAX,
    };
    uint64_t epoch;
    if (shoal_oplog_check(self->oplog, &entry, &rules, &epoch, why, sizeof why))
        s_found(self, SHOAL_CF_OPLOG_BY_NODE_HLC, key, key_size, false, "entry of node %s in dataset %s: %s",
                entry.node, entry.dataset, why);
    //  The chain goes on from this entry, whatever was wrong with its link.
    self->run_started = true;
    self->run_tip.has_tip = true;
    self->run_tip.stamp.wall_ms = entry.wall_ms;
    self->run_tip.stamp.logic = entry.logic;
    memcpy(self->run_tip.hash, entry.hash, SHOAL_HASH_SIZE);
    figures->entries++;
    shoal_key_t locator;
    shoal_oplog_key_by_hash(&entry_key, entry.dataset, entry.hash);
    shoal_oplog_locator(&locator, &entry);
    figures->hash_expect += s_digest_pair(entry_key.bytes, entry_key.size, locator.bytes, locator.size);
    shoal_key_t index;
    shoal_oplog_key_by_hlc(&index, &entry);
    figures->hlc_expect += s_digest(index.bytes, index.size, 1);
    return 0;
}

// ---------------------------------------------------------------------------
//  Step 2: the indexes summed

static void
s_sum_key(shoal_oplog_fsck_t *self, shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
          size_t value_size)
{
    s_dataset_t *figures = s_dataset_of_key(self, key, key_size);
    if (!figures) {
        //  Reconcile removes an index key that does not parse; an entry's
        //  key it cannot judge.
        s_found(self, cf, key, key_size, true, "not a key of this family: no dataset");
        return;
    }
    if (cf == SHOAL_CF_OPLOG_BY_HASH) {
        figures->hash_seen += s_digest_pair(key, key_size, value, value_size);
        figures->hash_keys++;
    }
    else {
        figures->hlc_seen += s_digest(key, key_size, 1);
        figures->hlc_keys++;
    }
}

// ---------------------------------------------------------------------------
//  Step 3: heads

static int
s_check_head(shoal_oplog_fsck_t *self, const uint8_t *key, size_t key_size, const uint8_t *value,
             size_t value_size)
{
    char dataset[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
    if (shoal_oplog_parse_pair(key, key_size, dataset, node)) {
        s_found(self, SHOAL_CF_OPLOG_NODE_HEAD, key, key_size, true, "not a key of this family (dataset, node)");
        return 0;
    }
    char run[sizeof self->run];
    snprintf(run, sizeof run, "%s\n%s", dataset, node);
    s_tip_t *tip = (s_tip_t *) zhashx_lookup(self->tips, run);
    if (tip)
        tip->headed = true;
    shoal_head_record_t head;
    char why[FSCK_PROBLEM_MAX / 2];
    if (shoal_head_codec.decode(value, value_size, &head, why, sizeof why)) {
        s_found(self, SHOAL_CF_OPLOG_NODE_HEAD, key, key_size, true, "the value does not decode: %s", why);
        return 0;
    }
    shoal_hlc_stamp_t stamp = { head.wall_ms, head.logic };
    char named[OPLOG_HEX_SIZE];
    s_hex(head.hash, named);
    if (tip && memcmp(tip->hash, head.hash, SHOAL_HASH_SIZE) == 0)
        return 0;
    if (tip && shoal_hlc_compare(&tip->stamp, &stamp) > 0) {
        char latest[OPLOG_HEX_SIZE];
        s_hex(tip->hash, latest);
        s_found(self, SHOAL_CF_OPLOG_NODE_HEAD, key, key_size, true,
                "names x'%s' at %" PRIu64 ".%u, older than the chain's latest entry x'%s' at %" PRIu64 ".%u", named,
                stamp.wall_ms, stamp.logic, latest, tip->stamp.wall_ms, tip->stamp.logic);
        return 0;
    }
    //  A newer head is right only when its entry is here, or was pruned.
    shoal_key_t entry_key;
    shoal_oplog_key_by_hash(&entry_key, dataset, head.hash);
    bool exists;
    if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_HASH, &entry_key, &exists))
        return -1;
    s_dataset_t *figures = s_dataset(self, dataset);
    if (!exists && !(figures->has_watermark && shoal_hlc_compare(&stamp, &figures->watermark) <= 0))
        s_found(self, SHOAL_CF_OPLOG_NODE_HEAD, key, key_size, true,
                "names x'%s' at %" PRIu64 ".%u, which is not here and was not pruned", named, stamp.wall_ms,
                stamp.logic);
    return 0;
}

//  Every chain has a head.
static void
s_check_headless(shoal_oplog_fsck_t *self)
{
    for (s_tip_t *tip = (s_tip_t *) zhashx_first(self->tips); tip; tip = (s_tip_t *) zhashx_next(self->tips)) {
        if (tip->headed)
            continue;
        const char *run = (const char *) zhashx_cursor(self->tips);
        const char *newline = strchr(run, '\n');
        char dataset[OPLOG_NAME_SIZE];
        snprintf(dataset, sizeof dataset, "%.*s", (int) (newline - run), run);
        shoal_key_t key;
        shoal_oplog_key_head(&key, dataset, newline + 1);
        s_found(self, SHOAL_CF_OPLOG_NODE_HEAD, key.bytes, key.size, true,
                "missing: node %s has entries in dataset %s but no head", newline + 1, dataset);
    }
}

// ---------------------------------------------------------------------------
//  Step 4: kv; step 5: oplog_meta

static void
s_check_kv(shoal_oplog_fsck_t *self, const uint8_t *key, size_t key_size, const uint8_t *value,
           size_t value_size)
{
    char dataset[OPLOG_NAME_SIZE], name[OPLOG_NAME_SIZE];
    if (shoal_oplog_parse_pair(key, key_size, dataset, name)) {
        s_found(self, SHOAL_CF_KV, key, key_size, false, "not a key of this family (dataset, key)");
        return;
    }
    bool deleted;
    if (shoal_kv_record_deleted(value, value_size, &deleted)) {
        shoal_kv_record_t record;
        char why[FSCK_PROBLEM_MAX / 2];
        if (shoal_kv_codec.decode(value, value_size, &record, why, sizeof why) == 0) {
            shoal_kv_codec.clear(&record);
            snprintf(why, sizeof why, "its deleted flag cannot be read");
        }
        s_found(self, SHOAL_CF_KV, key, key_size, false, "the value does not decode: %s", why);
        return;
    }
    s_dataset_t *figures = s_dataset_of_key(self, key, key_size);
    if (!deleted && figures)
        figures->live++;
}

//  Reads COUNT u64 and then STRINGS strings from a value; 0 or -1.
static int
s_read_tuple(const uint8_t *value, size_t size, size_t count, size_t strings, uint64_t *values)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    for (size_t i = 0; i < count; i++)
        if (shoal_key_read_u64(&reader, &values[i]))
            return -1;
    char text[OPLOG_NAME_SIZE];
    for (size_t i = 0; i < strings; i++)
        if (shoal_key_read_str(&reader, text, sizeof text))
            return -1;
    return shoal_key_reader_done(&reader) ? 0 : -1;
}

//  The meta keys and their values' shapes: a name, how many strings
//  follow it in the key, and how many integers and strings its value holds.
static const struct {
    const char *name;
    size_t key_strings;
    size_t integers;
    size_t strings;
} s_meta_shapes[] = {
    { OPLOG_META_SCHEMA, 0, 1, 0 },
    { OPLOG_META_PRUNE, 1, 2, 0 },
    { OPLOG_META_CLEAN, 0, 1, 0 },
    { OPLOG_META_LOADING, 0, 1, 0 },
    { OPLOG_META_COUNT, 1, 2, 0 },
    { OPLOG_META_MARKED, 0, 1, 0 },
    { "hlc", 0, 1, 0 },             //  shoal_hlc.h: the clock's high-water mark
    { "member", 1, 2, 1 },          //  shoal_members.h: forgotten, incarnation, endpoint
    { "confirm", 3, 2, 0 },         //  shoal_members.h: (peer, dataset, origin) -> stamp
};

static void
s_check_meta(shoal_oplog_fsck_t *self, const uint8_t *key, size_t key_size, const uint8_t *value,
             size_t value_size)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key, key_size);
    char name[OPLOG_NAME_SIZE] = "", strings[3][OPLOG_NAME_SIZE];
    size_t shape = SIZE_MAX;
    if (shoal_key_read_str(&reader, name, sizeof name) == 0)
        for (size_t i = 0; i < sizeof s_meta_shapes / sizeof s_meta_shapes[0]; i++)
            if (streq(name, s_meta_shapes[i].name))
                shape = i;
    if (shape == SIZE_MAX && streq(name, SHOAL_DRAIN_STORE_KEY) && shoal_key_reader_done(&reader)) {
        //  The node's drain record (shoal_drain_store.h): a record, not a tuple.
        char error[OPLOG_NAME_SIZE * 2];
        if (shoal_drain_store_check(value, value_size, error, sizeof error))
            s_found(self, SHOAL_CF_OPLOG_META, key, key_size, false, "the drain record does not decode: %s",
                    error);
        return;
    }
    bool parsed = shape != SIZE_MAX;
    for (size_t i = 0; parsed && i < s_meta_shapes[shape].key_strings; i++)
        parsed = shoal_key_read_str(&reader, strings[i], sizeof strings[i]) == 0;
    if (!parsed || !shoal_key_reader_done(&reader)) {
        s_found(self, SHOAL_CF_OPLOG_META, key, key_size, false, "not a key of this family");
        return;
    }
    uint64_t values[2] = { 0, 0 };
    if (s_read_tuple(value, value_size, s_meta_shapes[shape].integers, s_meta_shapes[shape].strings, values)) {
        char *text = shoal_key_format(value, value_size);
        s_found(self, SHOAL_CF_OPLOG_META, key, key_size, streq(name, OPLOG_META_COUNT),
                "the value %s is not a tuple of %zu integer(s) and %zu string(s)", text ? text : "(?)",
                s_meta_shapes[shape].integers, s_meta_shapes[shape].strings);
        free(text);
        if (streq(name, OPLOG_META_COUNT)) {
            s_dataset(self, strings[0])->has_count = true;
            zlistx_add_end(self->miscounted, strings[0]);
        }
        return;
    }
    if (streq(name, OPLOG_META_COUNT)) {
        s_dataset_t *figures = s_dataset(self, strings[0]);
        figures->has_count = true;
        if (values[0] != figures->hash_keys || values[1] != figures->live)
            zlistx_add_end(self->miscounted, strings[0]);
        if (values[0] != figures->hash_keys || values[1] != figures->live)
            s_found(self, SHOAL_CF_OPLOG_META, key, key_size, true,
                    "dataset %s is counted %" PRIu64 " entries and %" PRIu64 " live keys; it holds %" PRIu64
                    " and %" PRIu64, strings[0], values[0], values[1], figures->hash_keys, figures->live);
    }
}

//  Datasets with something in them have counts.
static void
s_check_uncounted(shoal_oplog_fsck_t *self)
{
    for (s_dataset_t *figures = (s_dataset_t *) zhashx_first(self->datasets); figures;
         figures = (s_dataset_t *) zhashx_next(self->datasets)) {
        if (figures->has_count || (!figures->hash_keys && !figures->live))
            continue;
        const char *name = (const char *) zhashx_cursor(self->datasets);
        zlistx_add_end(self->miscounted, (void *) name);
        shoal_key_t key;
        shoal_oplog_key_meta(&key, OPLOG_META_COUNT);
        shoal_key_add_str(&key, name);
        s_found(self, SHOAL_CF_OPLOG_META, key.bytes, key.size, true,
                "missing: dataset %s holds %" PRIu64 " entries and %" PRIu64 " live keys but no counts", name,
                figures->hash_keys, figures->live);
    }
}

// ---------------------------------------------------------------------------
//  Step 6: a dataset key by key

static void
s_pin_add(shoal_oplog_fsck_t *self, const char *dataset, shoal_cf_t cf)
{
    s_pin_t *pin = (s_pin_t *) zmalloc(sizeof *pin);
    pin->dataset = shoal_strdup(dataset);
    pin->cf = cf;
    zlistx_add_end(self->pins, pin);
}

static void
s_pin_destroy(void **item_p)
{
    s_pin_t *pin = (s_pin_t *) *item_p;
    if (pin) {
        free(pin->dataset);
        free(pin);
        *item_p = NULL;
    }
}

//  Chooses the datasets whose figures differ.
static void
s_compare(shoal_oplog_fsck_t *self)
{
    for (s_dataset_t *figures = (s_dataset_t *) zhashx_first(self->datasets); figures;
         figures = (s_dataset_t *) zhashx_next(self->datasets)) {
        const char *name = (const char *) zhashx_cursor(self->datasets);
        bool entries = figures->hash_keys != figures->entries || figures->hash_seen != figures->hash_expect;
        bool hlc = figures->hlc_keys != figures->entries || figures->hlc_seen != figures->hlc_expect;
        if (entries || hlc) {
            zsys_info("fsck: oplog: dataset %s: %" PRIu64 " entries in its chains, %" PRIu64 " keys in oplog_by_hash, "
                      "%" PRIu64 " in oplog_by_hlc, or their digests differ: walking it key by key", name,
                      figures->entries, figures->hash_keys, figures->hlc_keys);
            s_pin_add(self, name, SHOAL_CF_OPLOG_BY_NODE_HLC);
        }
        if (entries)
            s_pin_add(self, name, SHOAL_CF_OPLOG_BY_HASH);
        if (hlc)
            s_pin_add(self, name, SHOAL_CF_OPLOG_BY_HLC);
    }
}

//  An entry of oplog_by_node_hlc: sound, with its locator in oplog_by_hash
//  and its key in oplog_by_hlc.
static int
s_pin_entry(shoal_oplog_fsck_t *self, const uint8_t *key, size_t key_size, const uint8_t *value, size_t value_size)
{
    shoal_oplog_entry_t entry;
    char why[FSCK_PROBLEM_MAX / 2];
    //  An entry that does not decode, or sits at another key, was named by
    //  the walk of the chains.
    if (value_size == 0
    ||  shoal_oplog_entry_read(value, value_size, &entry, self->strings, sizeof self->strings, why, sizeof why))
        return 0;
    shoal_key_t expected;
    shoal_oplog_key_by_node_hlc(&expected, &entry);
    if (expected.size != key_size || memcmp(expected.bytes, key, key_size) != 0)
        return 0;
    shoal_key_t index, locator;
    shoal_oplog_key_by_hash(&index, entry.dataset, entry.hash);
    shoal_oplog_locator(&locator, &entry);
    uint8_t *stored;
    size_t stored_size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_BY_HASH, &index, &stored, &stored_size))
        return -1;
    if (!stored)
        s_found(self, SHOAL_CF_OPLOG_BY_HASH, index.bytes, index.size, true,
                "missing: the locator of an entry of oplog_by_node_hlc");
    else
    if (stored_size != locator.size || memcmp(stored, locator.bytes, locator.size) != 0)
        s_found(self, SHOAL_CF_OPLOG_BY_HASH, index.bytes, index.size, true,
                "holds another value than the locator of its entry in oplog_by_node_hlc");
    free(stored);
    shoal_oplog_key_by_hlc(&index, &entry);
    bool exists;
    if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_HLC, &index, &exists))
        return -1;
    if (!exists)
        s_found(self, SHOAL_CF_OPLOG_BY_HLC, index.bytes, index.size, true,
                "missing: the index key of an entry of oplog_by_node_hlc");
    return 0;
}

//  A key of index CF (oplog_by_hlc, or oplog_by_hash with its locator
//  VALUE): it names an entry of oplog_by_node_hlc that has exactly this
//  key. The entry's key there is built from the index key alone, its hash
//  included, so being there is enough.
static int
s_pin_index(shoal_oplog_fsck_t *self, shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
            size_t value_size)
{
    char dataset[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
    shoal_hlc_stamp_t stamp;
    uint8_t hash[SHOAL_HASH_SIZE];
    shoal_key_t located;
    if (cf == SHOAL_CF_OPLOG_BY_HLC) {
        if (shoal_oplog_parse_by_hlc(key, key_size, dataset, &stamp, node, hash)) {
            s_found(self, cf, key, key_size, true, "not a key of this family");
            return 0;
        }
        shoal_oplog_key_by_node_hlc_of(&located, dataset, node, stamp.wall_ms, stamp.logic, hash);
    }
    else {
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, key, key_size);
        size_t hash_size;
        if (shoal_key_read_str(&reader, dataset, sizeof dataset)
        ||  shoal_key_read_bytes(&reader, hash, SHOAL_HASH_SIZE, &hash_size)
        ||  hash_size != SHOAL_HASH_SIZE || !shoal_key_reader_done(&reader)) {
            s_found(self, cf, key, key_size, true, "not a key of this family");
            return 0;
        }
        if (shoal_oplog_key_located(&located, dataset, hash, value, value_size)) {
            s_found(self, cf, key, key_size, true, "the value is not a locator (node, wall, logic)");
            return 0;
        }
    }
    bool exists;
    if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &located, &exists))
        return -1;
    if (!exists)
        s_found(self, cf, key, key_size, true, "names no entry of oplog_by_node_hlc");
    return 0;
}

// ---------------------------------------------------------------------------
//  The walk

shoal_oplog_fsck_t *
shoal_oplog_fsck_new(shoal_oplog_t *oplog, shoal_store_t *snapshot)
{
    shoal_oplog_fsck_t *self = (shoal_oplog_fsck_t *) zmalloc(sizeof *self);
    self->oplog = oplog;
    self->store = snapshot;
    self->datasets = zhashx_new();
    zhashx_set_destructor(self->datasets, shoal_free_item);
    self->tips = zhashx_new();
    zhashx_set_destructor(self->tips, shoal_free_item);
    self->pins = zlistx_new();
    zlistx_set_destructor(self->pins, s_pin_destroy);
    self->miscounted = zlistx_new();
    zlistx_set_duplicator(self->miscounted, (zlistx_duplicator_fn *) shoal_strdup);
    zlistx_set_destructor(self->miscounted, (zlistx_destructor_fn *) zstr_free);
    return self;
}

void
shoal_oplog_fsck_destroy(shoal_oplog_fsck_t **self_p)
{
    if (*self_p) {
        shoal_oplog_fsck_t *self = *self_p;
        shoal_iter_destroy(&self->iter);
        shoal_oplog_rebuild_destroy(&self->rebuild);
        shoal_oplog_recount_destroy(&self->counting);
        zhashx_destroy(&self->datasets);
        zhashx_destroy(&self->tips);
        zlistx_destroy(&self->pins);
        zlistx_destroy(&self->miscounted);
        free(self);
        *self_p = NULL;
    }
}

int64_t
shoal_oplog_fsck_repair_step(shoal_oplog_fsck_t *self, shoal_oplog_t *oplog, size_t budget, bool *done,
                             shoal_oplog_repair_t *repair)
{
    *done = false;
    if (self->indexes_wrong && !self->rebuilt) {
        if (!self->rebuild)
            self->rebuild = shoal_oplog_rebuild_new(oplog);
        int64_t visited = shoal_oplog_rebuild_step(self->rebuild, budget, &self->rebuilt, repair);
        if (self->rebuilt)
            shoal_oplog_rebuild_destroy(&self->rebuild);
        return visited;
    }
    //  A dataset's recount walks it up to BUDGET keys a step.
    if (!self->recounted && !self->counting) {
        const char *dataset = self->recount ? (const char *) zlistx_next(self->miscounted)
                                            : (const char *) zlistx_first(self->miscounted);
        self->recount = dataset;
        if (dataset)
            self->counting = shoal_oplog_recount_new(oplog, dataset);
        else
            self->recounted = true;
    }
    if (self->counting) {
        bool counted = false, written = false;
        int64_t visited = shoal_oplog_recount_step(self->counting, budget, &counted, &written);
        if (visited < 0)
            return -1;
        if (counted) {
            repair->counts_written += written;
            shoal_oplog_recount_destroy(&self->counting);
        }
        return visited;
    }
    *done = true;
    return 0;
}

int
shoal_oplog_fsck_repair(shoal_oplog_fsck_t *self, shoal_oplog_t *oplog, shoal_oplog_repair_t *repair)
{
    memset(repair, 0, sizeof *repair);
    bool done = false;
    while (!done)
        if (shoal_oplog_fsck_repair_step(self, oplog, SIZE_MAX, &done, repair) < 0)
            return -1;
    return 0;
}

uint64_t
shoal_oplog_fsck_entries(shoal_oplog_fsck_t *self)
{
    uint64_t entries = 0;
    for (s_dataset_t *figures = (s_dataset_t *) zhashx_first(self->datasets); figures;
         figures = (s_dataset_t *) zhashx_next(self->datasets))
        entries += figures->entries;
    return entries;
}

//  The family a step walks.
static shoal_cf_t
s_step_cf(shoal_oplog_fsck_t *self)
{
    switch (self->step) {
        case STEP_CHAINS: return SHOAL_CF_OPLOG_BY_NODE_HLC;
        case STEP_BY_HASH: return SHOAL_CF_OPLOG_BY_HASH;
        case STEP_BY_HLC: return SHOAL_CF_OPLOG_BY_HLC;
        case STEP_HEADS: return SHOAL_CF_OPLOG_NODE_HEAD;
        case STEP_KV: return SHOAL_CF_KV;
        case STEP_META: return SHOAL_CF_OPLOG_META;
        case STEP_PREV: return SHOAL_CF_OPLOG_PREV_TO_HASH;
        default: return self->pin ? self->pin->cf : SHOAL_CF_DEFAULT;
    }
}

//  What a step does once its walk is over; then the next step.
static void
s_step_end(shoal_oplog_fsck_t *self)
{
    shoal_iter_destroy(&self->iter);
    self->last_dataset = NULL;
    if (self->step == STEP_CHAINS)
        s_run_end(self);
    else
    if (self->step == STEP_HEADS)
        s_check_headless(self);
    else
    if (self->step == STEP_META)
        s_check_uncounted(self);
    else
    if (self->step == STEP_PREV && self->prev_keys)
        s_found(self, SHOAL_CF_OPLOG_PREV_TO_HASH, NULL, 0, true,
                "%" PRIu64 " key(s) in an index no longer written (reconcile empties it)", self->prev_keys);
    if (self->step == STEP_PIN) {
        s_pin_t *pin = (s_pin_t *) zlistx_first(self->pins);
        zlistx_delete(self->pins, zlistx_cursor(self->pins));
        (void) pin;
        self->pin = NULL;
        if (zlistx_size(self->pins))
            return;     //  the next pin, same step
    }
    self->step++;
}

//  Visits the key the walk is on.
static int
s_visit(shoal_oplog_fsck_t *self, shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
        size_t value_size)
{
    switch (self->step) {
        case STEP_CHAINS:
            return s_check_chain_key(self, key, key_size, value, value_size);
        case STEP_BY_HASH:
        case STEP_BY_HLC:
            s_sum_key(self, cf, key, key_size, value, value_size);
            return 0;
        case STEP_HEADS:
            return s_check_head(self, key, key_size, value, value_size);
        case STEP_KV:
            s_check_kv(self, key, key_size, value, value_size);
            return 0;
        case STEP_META:
            s_check_meta(self, key, key_size, value, value_size);
            return 0;
        case STEP_PREV:
            self->prev_keys++;
            return 0;
        default:
            return cf == SHOAL_CF_OPLOG_BY_NODE_HLC ? s_pin_entry(self, key, key_size, value, value_size)
                                                    : s_pin_index(self, cf, key, key_size, value, value_size);
    }
}

int64_t
shoal_oplog_fsck_step(shoal_oplog_fsck_t *self, size_t budget, bool *done, shoal_finding_fn *fn, void *arg)
{
    self->fn = fn;
    self->arg = arg;
    size_t looked = 0;
    while (!self->failed && self->step != STEP_DONE && looked < budget) {
        if (self->step == STEP_COMPARE) {
            s_compare(self);
            self->step = zlistx_size(self->pins) ? STEP_PIN : STEP_DONE;
            continue;
        }
        bool on_key;
        if (!self->iter) {
            if (self->step == STEP_PIN) {
                self->pin = (s_pin_t *) zlistx_first(self->pins);
                shoal_key_t prefix;
                shoal_oplog_key_dataset(&prefix, self->pin->dataset);
                self->iter = shoal_iter_prefix(self->store, self->pin->cf, &prefix);
            }
            else
                self->iter = shoal_iter_new(self->store, s_step_cf(self), NULL, NULL);
            if (!self->iter) {
                self->failed = true;
                break;
            }
            on_key = shoal_iter_first(self->iter);
        }
        else
            on_key = shoal_iter_next(self->iter);
        if (!on_key) {
            if (shoal_iter_status(self->iter)) {
                self->failed = true;
                break;
            }
            s_step_end(self);
            continue;
        }
        size_t key_size, value_size;
        const uint8_t *key = shoal_iter_key(self->iter, &key_size);
        const uint8_t *value = shoal_iter_value(self->iter, &value_size);
        if (s_visit(self, s_step_cf(self), key, key_size, value, value_size)) {
            self->failed = true;
            break;
        }
        looked++;
    }
    *done = self->failed || self->step == STEP_DONE;
    return self->failed ? -1 : (int64_t) looked;
}
