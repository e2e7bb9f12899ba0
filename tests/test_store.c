/*  test_store: the node's RocksDB store, its typed records and its lock.

    What users of the store rely on: every column family is there and stays
    there, a batch across families is all or nothing, records are checked on
    the way in and on the way out (a corrupt value is an error naming its key,
    never a default), one process owns a directory, and a write acknowledged
    with sync survives kill -9.
*/
#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shoal_store.h"
#include "shoal_test.h"
#include "shoal_alloc.h"

//  Synced writes the parent waits to see acknowledged before it kills the writer.
#define CRASH_ACKS 300
//  The writer's limit, far beyond what it reaches before the kill.
#define CRASH_WRITES_MAX 1000000
//  Room for test keys, values and ids rendered as text.
#define TEXT_MAX 256
//  Protobuf wire types used to hand-craft stored values.
#define PB_VARINT 0
#define PB_LENGTH 2
//  Room for one hand-crafted ClaimRecord.
#define PB_MAX 256

//  The column family names design.md lists, in shoal_cf_t order.
static const char *s_expected_cf_names[SHOAL_CF_COUNT] = {
    "default", "oplog_by_hash", "oplog_by_hlc", "oplog_by_node_hlc", "oplog_prev_to_hash",
    "oplog_node_head", "oplog_meta", "kv", "claims", "counters", "moves", "locks",
    "objects", "instances", "claim_keys"
};

static shoal_store_t *
s_store_open(const char *dir, bool sync)
{
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = sync;
    return shoal_store_new(dir, &options, NULL);
}

static void
s_key_str(shoal_key_t *key, const char *text)
{
    shoal_key_init(key);
    shoal_key_add_str(key, text);
}

//  A valid claim whose fields are borrowed literals: never pass it to clear.
static shoal_claim_record_t
s_claim(const char *id)
{
    shoal_claim_record_t record = {
        .id = (char *) id,
        .tenant = "acme/web",
        .state = SHOAL_CLAIM_RUNNING,
        .memory_bytes = UINT64_C(512) << 20,
        .driver = "proc",
        .epoch = 3,
        .created_ms = UINT64_C(1700000000000),
    };
    return record;
}

//  True when the string value at KEY in CF is EXPECTED (NULL: absent).
static bool
s_value_is(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *key, const char *expected)
{
    uint8_t *value;
    size_t size;
    if (shoal_store_get(store, cf, key, &value, &size))
        return false;
    bool same = expected ? value && size == strlen(expected) && memcmp(value, expected, size) == 0
                         : value == NULL;
    free(value);
    return same;
}

static void
test_store_column_families(void)
{
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        CHECK_STR(shoal_cf_name((shoal_cf_t) cf), s_expected_cf_names[cf]);
    CHECK_STR(shoal_cf_name(SHOAL_CF_COUNT), "unknown");

    //  Each family holds a key named after itself, the same key in every one.
    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    CHECK(store);
    shoal_key_t key;
    s_key_str(&key, "whoami");
    bool written = true;
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        const char *name = shoal_cf_name((shoal_cf_t) cf);
        written = written && shoal_store_put(store, (shoal_cf_t) cf, &key, name, strlen(name), true) == 0;
    }
    shoal_store_destroy(&store);
    CHECK(written);

    //  A reopen without create finds every family with its own value.
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.create = false;
    store = shoal_store_new(shoal_test_dir, &options, NULL);
    CHECK(store);
    int wrong = -1;
    for (int cf = 0; cf < SHOAL_CF_COUNT && wrong < 0; cf++)
        if (!s_value_is(store, (shoal_cf_t) cf, &key, shoal_cf_name((shoal_cf_t) cf)))
            wrong = cf;
    shoal_store_destroy(&store);
    CHECK_MSG(wrong < 0, "column family %s lost its value", shoal_cf_name((shoal_cf_t) wrong));
}

static void
test_store_open_options(void)
{
    //  Without create, a missing directory is an error and stays missing.
    char missing[TEXT_MAX];
    snprintf(missing, sizeof missing, "%s/missing", shoal_test_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.create = false;
    char *error = NULL;
    shoal_store_t *store = shoal_store_new(missing, &options, &error);
    CHECK(!store);
    char expected[TEXT_MAX * 2];
    snprintf(expected, sizeof expected, "data directory %s does not exist", missing);
    CHECK_STR(error, expected);
    free(error);
    CHECK(access(missing, F_OK) != 0);

    //  Without create, an existing directory without a database is an error
    //  from RocksDB, and the failed open leaves the directory unlocked.
    error = NULL;
    store = shoal_store_new(shoal_test_dir, &options, &error);
    CHECK(!store);
    CHECK_MSG(shoal_test_contains(error, "cannot open RocksDB"), "%s", error);
    free(error);

    //  With create, every missing parent is made.
    char nested[TEXT_MAX];
    snprintf(nested, sizeof nested, "%s/a/b/c", shoal_test_dir);
    store = s_store_open(nested, false);
    CHECK(store);
    CHECK_STR(shoal_store_dir(store), nested);
    CHECK_STR(shoal_store_error(store), "");
    shoal_store_destroy(&store);
    shoal_store_destroy(&store);
    CHECK(!store);

    store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    shoal_store_destroy(&store);
}

static void
test_store_get_put_delete(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    CHECK(store);
    shoal_key_t key, empty_key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "registry");
    shoal_key_add_u64(&key, 7);
    s_key_str(&empty_key, "empty");

    //  An empty value is present, and told from an absent one.
    uint8_t *value = (uint8_t *) "not touched";
    size_t size = 1;
    CHECK_INT(shoal_store_get(store, SHOAL_CF_KV, &key, &value, &size), 0);
    CHECK(value == NULL);
    CHECK_INT(size, 0);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_KV, &empty_key, "", 0, false), 0);
    CHECK_INT(shoal_store_get(store, SHOAL_CF_KV, &empty_key, &value, &size), 0);
    CHECK(value != NULL);
    CHECK_INT(size, 0);
    free(value);

    //  A value is binary-safe and may be large.
    size_t big_size = 1 << 20;
    uint8_t *big = malloc(big_size);
    CHECK(big);
    for (size_t i = 0; i < big_size; i++)
        big[i] = (uint8_t) (i * 7);
    int put_rc = shoal_store_put(store, SHOAL_CF_KV, &key, big, big_size, true);
    int get_rc = shoal_store_get(store, SHOAL_CF_KV, &key, &value, &size);
    bool same = value && size == big_size && memcmp(value, big, big_size) == 0;
    free(big);
    free(value);
    CHECK_INT(put_rc, 0);
    CHECK_INT(get_rc, 0);
    CHECK(same);

    //  The same key in another family is another record.
    CHECK(s_value_is(store, SHOAL_CF_CLAIMS, &key, NULL));

    CHECK_INT(shoal_store_delete(store, SHOAL_CF_KV, &key, true), 0);
    CHECK(s_value_is(store, SHOAL_CF_KV, &key, NULL));
    //  Deleting what is absent is not an error.
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_KV, &key, false), 0);
    shoal_store_destroy(&store);
}

static void
test_store_claim_states(void)
{
    const char *names[] = { "creating", "running", "paused", "moving", "stopped", "error", "released" };
    for (int state = SHOAL_CLAIM_CREATING; state <= SHOAL_CLAIM_RELEASED; state++) {
        CHECK_STR(shoal_claim_state_name((shoal_claim_state_t) state), names[state - 1]);
        shoal_claim_state_t parsed = 0;
        CHECK_INT(shoal_claim_state_parse(names[state - 1], &parsed), 0);
        CHECK_INT(parsed, state);
    }
    CHECK(shoal_claim_state_name(0) == NULL);
    CHECK(shoal_claim_state_name(SHOAL_CLAIM_RELEASED + 1) == NULL);
    CHECK(shoal_claim_state_name((shoal_claim_state_t) -1) == NULL);
    shoal_claim_state_t parsed = SHOAL_CLAIM_PAUSED;
    CHECK_INT(shoal_claim_state_parse("Running", &parsed), -1);
    CHECK_INT(shoal_claim_state_parse("", &parsed), -1);
    CHECK_INT(parsed, SHOAL_CLAIM_PAUSED);
}

static void
test_store_record_round_trip(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    CHECK(store);
    shoal_claim_record_t failed = s_claim("c-1");
    failed.state = SHOAL_CLAIM_ERROR;
    failed.error = "guest exited with status 3";
    failed.memory_bytes = UINT64_MAX;
    failed.epoch = UINT64_MAX;
    shoal_claim_record_t moving = s_claim("c-2");
    moving.state = SHOAL_CLAIM_MOVING;
    moving.driver = "exec";

    shoal_key_t key1, key2, key3;
    s_key_str(&key1, "c-1");
    s_key_str(&key2, "c-2");
    s_key_str(&key3, "c-3");
    shoal_batch_t *batch = shoal_batch_new(store);
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &key1, &shoal_claim_codec, &failed), 0);
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &key2, &shoal_claim_codec, &moving), 0);
    CHECK_INT(shoal_batch_count(batch), 2);
    int write_rc = shoal_store_write(store, batch, true);
    shoal_batch_destroy(&batch);
    shoal_batch_destroy(&batch);
    CHECK_INT(write_rc, 0);

    shoal_claim_record_t record = { 0 };
    bool found = false;
    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &key1, &shoal_claim_codec, &record, &found), 0);
    CHECK(found);
    bool same = strcmp(record.id, "c-1") == 0 && strcmp(record.tenant, "acme/web") == 0
             && record.state == SHOAL_CLAIM_ERROR && record.memory_bytes == UINT64_MAX
             && strcmp(record.driver, "proc") == 0 && record.epoch == UINT64_MAX
             && record.created_ms == failed.created_ms
             && record.error && strcmp(record.error, failed.error) == 0;
    shoal_claim_codec.clear(&record);
    CHECK(same);

    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &key2, &shoal_claim_codec, &record, &found), 0);
    same = found && record.state == SHOAL_CLAIM_MOVING && strcmp(record.driver, "exec") == 0
        && record.error == NULL;
    shoal_claim_codec.clear(&record);
    shoal_claim_codec.clear(&record);
    CHECK(same);

    //  Absent is found = false, not an error.
    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &key3, &shoal_claim_codec, &record, &found), 0);
    CHECK(!found);
    shoal_store_destroy(&store);
}

static void
test_store_record_refused_on_write(void)
{
    struct {
        const char *field;
        const char *value;
        const char *error;
    } cases[] = {
        { "id", "", "id is empty" },
        { "id", NULL, "id is empty" },
        { "tenant", "", "tenant is empty" },
        { "tenant", "acme", "tenant \"acme\" is not org/project" },
        { "tenant", "acme/", "tenant \"acme/\" is not org/project" },
        { "tenant", "/web", "tenant \"/web\" is not org/project" },
        { "tenant", "acme/web/x", "tenant \"acme/web/x\" is not org/project" },
        { "state", "0", "state 0 is not a claim state" },
        { "state", "8", "state 8 is not a claim state" },
        { "driver", "kvm", "driver \"kvm\" is not proc or exec" },
        { "driver", NULL, "driver \"\" is not proc or exec" },
    };
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_key_t key;
    s_key_str(&key, "c-1");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shoal_claim_record_t record = s_claim("c-1");
        if (strcmp(cases[i].field, "id") == 0)
            record.id = (char *) cases[i].value;
        else
        if (strcmp(cases[i].field, "tenant") == 0)
            record.tenant = (char *) cases[i].value;
        else
        if (strcmp(cases[i].field, "state") == 0)
            record.state = (shoal_claim_state_t) atoi(cases[i].value);
        else
            record.driver = (char *) cases[i].value;

        //  The codec says what is wrong...
        uint8_t *bytes = (uint8_t *) "untouched";
        size_t size = 1;
        char error[TEXT_MAX] = "";
        CHECK_INT(shoal_claim_codec.encode(&record, &bytes, &size, error, sizeof error), -1);
        CHECK(bytes == NULL);
        CHECK_STR(error, cases[i].error);

        //  ...and the store adds where, leaving the batch as it was.
        char expected[TEXT_MAX * 2];
        snprintf(expected, sizeof expected,
                 "claims (\"c-1\"): record does not encode as ClaimRecord: %s", cases[i].error);
        CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec, &record), -1);
        CHECK_STR(shoal_store_error(store), expected);
        CHECK_INT(shoal_batch_count(batch), 0);
    }
    shoal_batch_destroy(&batch);
    shoal_store_destroy(&store);
}

//  Appends a protobuf varint to BUFFER at *SIZE.
static void
s_pb_varint(uint8_t *buffer, size_t *size, uint64_t value)
{
    do {
        uint8_t byte = value & 0x7F;
        value >>= 7;
        buffer[(*size)++] = byte | (value ? 0x80 : 0);
    } while (value);
}

static void
s_pb_field_varint(uint8_t *buffer, size_t *size, int field, uint64_t value)
{
    s_pb_varint(buffer, size, (uint64_t) (field << 3 | PB_VARINT));
    s_pb_varint(buffer, size, value);
}

static void
s_pb_field_string(uint8_t *buffer, size_t *size, int field, const char *value)
{
    s_pb_varint(buffer, size, (uint64_t) (field << 3 | PB_LENGTH));
    s_pb_varint(buffer, size, strlen(value));
    memcpy(buffer + *size, value, strlen(value));
    *size += strlen(value);
}

//  A ClaimRecord written by hand, as another writer (or a corruption) might
//  leave it, so that decode checks are tested without the encoder's checks.
//  STATE 0 leaves the field out, as protobuf does for a zero.
static size_t
s_pb_claim(uint8_t *buffer, const char *id, const char *tenant, int state, const char *driver)
{
    size_t size = 0;
    s_pb_field_string(buffer, &size, 1, id);
    s_pb_field_string(buffer, &size, 2, tenant);
    if (state)
        s_pb_field_varint(buffer, &size, 3, (uint64_t) state);
    s_pb_field_varint(buffer, &size, 4, 4096);
    s_pb_field_string(buffer, &size, 5, driver);
    return size;
}

static void
test_store_record_refused_on_read(void)
{
    struct {
        const char *id;
        const char *tenant;
        int state;
        const char *driver;
        const char *error;              //  NULL: decodes
    } cases[] = {
        { "c-9", "acme/web", 2, "proc", NULL },
        { "c-9", "acme/web", 9, "proc", "state 9 is not a claim state" },
        { "c-9", "acme/web", 0, "proc", "state 0 is not a claim state" },
        { "", "acme/web", 2, "proc", "id is empty" },
        { "c-9", "acme", 2, "proc", "tenant \"acme\" is not org/project" },
        { "c-9", "acme/web", 2, "kvm", "driver \"kvm\" is not proc or exec" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t bytes[PB_MAX];
        size_t size = s_pb_claim(bytes, cases[i].id, cases[i].tenant, cases[i].state, cases[i].driver);
        shoal_claim_record_t record;
        memset(&record, 0xA5, sizeof record);
        char error[TEXT_MAX] = "";
        int rc = shoal_claim_codec.decode(bytes, size, &record, error, sizeof error);
        bool decoded = rc == 0 && record.state == (shoal_claim_state_t) cases[i].state
                    && record.memory_bytes == 4096;
        if (rc == 0)
            shoal_claim_codec.clear(&record);
        if (!cases[i].error) {
            CHECK_MSG(decoded, "%s", error);
            continue;
        }
        CHECK_INT(rc, -1);
        CHECK_STR(error, cases[i].error);
        //  A refused value leaves the record empty.
        CHECK(record.id == NULL && record.tenant == NULL && record.driver == NULL);
    }
    char error[TEXT_MAX] = "";
    shoal_claim_record_t record;
    CHECK_INT(shoal_claim_codec.decode((const uint8_t *) "not a protobuf", 14, &record, error, sizeof error), -1);
    CHECK_STR(error, "14 bytes are not a protobuf ClaimRecord");
}

static void
test_store_corrupt_values(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    shoal_key_t garbage_key, state_key, good_key;
    s_key_str(&garbage_key, "c-bad");
    s_key_str(&state_key, "c-9");
    s_key_str(&good_key, "c-good");
    uint8_t bytes[PB_MAX];
    size_t size = s_pb_claim(bytes, "c-9", "acme/web", 9, "proc");
    CHECK_INT(shoal_store_put(store, SHOAL_CF_CLAIMS, &garbage_key, "not a protobuf", 14, false), 0);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_CLAIMS, &state_key, bytes, size, false), 0);
    size = s_pb_claim(bytes, "c-good", "acme/web", 2, "exec");
    CHECK_INT(shoal_store_put(store, SHOAL_CF_CLAIMS, &good_key, bytes, size, false), 0);

    shoal_claim_record_t record = { 0 };
    bool found = true;
    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &garbage_key, &shoal_claim_codec, &record, &found), -1);
    CHECK(!found);
    CHECK(record.id == NULL);
    CHECK_STR(shoal_store_error(store),
              "claims (\"c-bad\"): value does not decode as ClaimRecord: "
              "14 bytes are not a protobuf ClaimRecord");
    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &state_key, &shoal_claim_codec, &record, &found), -1);
    CHECK(!found);
    CHECK_STR(shoal_store_error(store),
              "claims (\"c-9\"): value does not decode as ClaimRecord: state 9 is not a claim state");

    //  Walking the family meets the same errors, in key order, and the
    //  good record between them still decodes.
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_CLAIMS, NULL, NULL);
    CHECK(iter);
    int rc_9 = shoal_iter_first(iter) ? shoal_iter_record(iter, &shoal_claim_codec, &record) : 0;
    char *error_9 = shoal_strdup(shoal_store_error(store));
    int rc_bad = shoal_iter_next(iter) ? shoal_iter_record(iter, &shoal_claim_codec, &record) : 0;
    char *error_bad = shoal_strdup(shoal_store_error(store));
    int rc_good = shoal_iter_next(iter) ? shoal_iter_record(iter, &shoal_claim_codec, &record) : -1;
    bool good = rc_good == 0 && record.id && strcmp(record.id, "c-good") == 0;
    shoal_claim_codec.clear(&record);
    bool ended = !shoal_iter_next(iter) && shoal_iter_record(iter, &shoal_claim_codec, &record) == -1;
    shoal_iter_destroy(&iter);
    shoal_iter_destroy(&iter);
    shoal_store_destroy(&store);
    bool errors_named = shoal_test_contains(error_9, "claims (\"c-9\"): value does not decode")
                     && shoal_test_contains(error_bad, "claims (\"c-bad\"): value does not decode");
    free(error_9);
    free(error_bad);
    CHECK_INT(rc_9, -1);
    CHECK_INT(rc_bad, -1);
    CHECK(errors_named);
    CHECK(good);
    CHECK(ended);
}

static void
test_store_batch_atomic(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    CHECK(store);
    shoal_key_t claim_key, node_key, move_key, kv_old, kv_new, lock_keys[5];
    s_key_str(&claim_key, "c-1");
    s_key_str(&node_key, "node");
    s_key_str(&move_key, "m-1");
    s_key_str(&kv_old, "old");
    s_key_str(&kv_new, "new");
    for (int i = 0; i < 5; i++) {
        shoal_key_init(&lock_keys[i]);
        shoal_key_add_str(&lock_keys[i], "resource");
        shoal_key_add_u64(&lock_keys[i], (uint64_t) i);
        CHECK_INT(shoal_store_put(store, SHOAL_CF_LOCKS, &lock_keys[i], "held", 4, false), 0);
    }
    CHECK_INT(shoal_store_put(store, SHOAL_CF_KV, &kv_old, "old", 3, false), 0);

    //  One change across five families.
    shoal_claim_record_t claim = s_claim("c-1");
    shoal_batch_t *batch = shoal_batch_new(store);
    CHECK_INT(shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &claim_key, &shoal_claim_codec, &claim), 0);
    shoal_batch_put(batch, SHOAL_CF_COUNTERS, &node_key, "1", 1);
    shoal_batch_put(batch, SHOAL_CF_MOVES, &move_key, "pending", 7);
    shoal_batch_put(batch, SHOAL_CF_KV, &kv_new, "new", 3);
    shoal_batch_delete(batch, SHOAL_CF_KV, &kv_old);
    shoal_batch_delete_range(batch, SHOAL_CF_LOCKS, &lock_keys[1], &lock_keys[3]);
    CHECK_INT(shoal_batch_count(batch), 6);
    //  Nothing shows before the write.
    CHECK(s_value_is(store, SHOAL_CF_COUNTERS, &node_key, NULL));
    CHECK_INT(shoal_store_write(store, batch, true), 0);

    shoal_claim_record_t record = { 0 };
    bool found = false;
    CHECK_INT(shoal_store_get_record(store, SHOAL_CF_CLAIMS, &claim_key, &shoal_claim_codec, &record, &found), 0);
    shoal_claim_codec.clear(&record);
    CHECK(found);
    CHECK(s_value_is(store, SHOAL_CF_COUNTERS, &node_key, "1"));
    CHECK(s_value_is(store, SHOAL_CF_MOVES, &move_key, "pending"));
    CHECK(s_value_is(store, SHOAL_CF_KV, &kv_new, "new"));
    CHECK(s_value_is(store, SHOAL_CF_KV, &kv_old, NULL));
    CHECK(s_value_is(store, SHOAL_CF_LOCKS, &lock_keys[0], "held"));
    CHECK(s_value_is(store, SHOAL_CF_LOCKS, &lock_keys[1], NULL));
    CHECK(s_value_is(store, SHOAL_CF_LOCKS, &lock_keys[2], NULL));
    CHECK(s_value_is(store, SHOAL_CF_LOCKS, &lock_keys[3], "held"));
    CHECK(s_value_is(store, SHOAL_CF_LOCKS, &lock_keys[4], "held"));

    //  A batch holding one overflowed key writes none of its operations.
    shoal_batch_clear(batch);
    CHECK_INT(shoal_batch_count(batch), 0);
    shoal_key_t too_long, second;
    shoal_key_init(&too_long);
    shoal_key_add_str(&too_long, "m-2");
    uint8_t filler[SHOAL_KEY_MAX] = { 0 };
    shoal_key_add_bytes(&too_long, filler, sizeof filler);
    CHECK(too_long.overflow);
    s_key_str(&second, "c-2");
    shoal_batch_put(batch, SHOAL_CF_COUNTERS, &node_key, "2", 1);
    shoal_batch_put(batch, SHOAL_CF_CLAIMS, &second, "x", 1);
    shoal_batch_put(batch, SHOAL_CF_MOVES, &too_long, "pending", 7);
    shoal_batch_delete(batch, SHOAL_CF_KV, &kv_new);
    CHECK_INT(shoal_store_write(store, batch, true), -1);
    CHECK_STR(shoal_store_error(store),
              "batch refused, nothing written: moves: refused a key longer than 2048 bytes "
              "(it starts (\"m-2\"))");
    CHECK(s_value_is(store, SHOAL_CF_COUNTERS, &node_key, "1"));
    CHECK(s_value_is(store, SHOAL_CF_CLAIMS, &second, NULL));
    CHECK(s_value_is(store, SHOAL_CF_KV, &kv_new, "new"));

    //  Cleared, the batch is usable again.
    shoal_batch_clear(batch);
    shoal_batch_put(batch, SHOAL_CF_COUNTERS, &node_key, "2", 1);
    CHECK_INT(shoal_store_write(store, batch, false), 0);
    CHECK(s_value_is(store, SHOAL_CF_COUNTERS, &node_key, "2"));
    shoal_batch_destroy(&batch);
    shoal_store_destroy(&store);
}

//  The program name the kernel shows for this process (a forked child
//  shares it).
static void
s_own_comm(char *comm, size_t size)
{
    char *text = shoal_test_slurp("/proc/self/comm");
    snprintf(comm, size, "%s", text ? text : "");
    comm[strcspn(comm, "\n")] = 0;
    free(text);
}

static void
test_store_second_open_refused(void)
{
    char comm[TEXT_MAX];
    s_own_comm(comm, sizeof comm);
    char expected[TEXT_MAX * 2];

    //  The same process, twice.
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    char *error = NULL;
    shoal_store_t *again = shoal_store_new(shoal_test_dir, NULL, &error);
    snprintf(expected, sizeof expected, "data directory %s is in use by pid %d (%s)",
             shoal_test_dir, (int) getpid(), comm);
    bool refused = again == NULL && error && strcmp(error, expected) == 0;
    shoal_store_destroy(&again);
    shoal_store_destroy(&store);
    CHECK_MSG(refused, "%s", error ? error : "the second open succeeded");
    free(error);

    //  Another process holds it: the error names that process.
    int ready[2], release[2];
    CHECK(pipe(ready) == 0 && pipe(release) == 0);
    pid_t holder = fork();
    CHECK(holder >= 0);
    if (holder == 0) {
        //  Only the parent keeps these ends, so that its close is our signal.
        close(ready[0]);
        close(release[1]);
        shoal_store_t *held = s_store_open(shoal_test_dir, false);
        char state = held ? 'y' : 'n';
        char go;
        if (write(ready[1], &state, 1) != 1 || read(release[0], &go, 1) < 0)
            _exit(1);
        shoal_store_destroy(&held);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    char state = 0;
    bool holding = read(ready[0], &state, 1) == 1 && state == 'y';
    error = NULL;
    store = holding ? shoal_store_new(shoal_test_dir, NULL, &error) : NULL;
    snprintf(expected, sizeof expected, "data directory %s is in use by pid %d (%s)",
             shoal_test_dir, (int) holder, comm);
    refused = store == NULL && error && strcmp(error, expected) == 0;
    shoal_store_destroy(&store);
    //  Once the holder is gone, the directory opens again.
    close(release[1]);
    int status = 0;
    waitpid(holder, &status, 0);
    close(ready[0]);
    store = s_store_open(shoal_test_dir, false);
    bool reopened = store != NULL;
    shoal_store_destroy(&store);
    CHECK(holding);
    CHECK_MSG(refused, "%s", error ? error : "the second open succeeded");
    free(error);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(reopened);
}

static void
s_crash_key(shoal_key_t *key, uint64_t seq, char *id, size_t id_size)
{
    snprintf(id, id_size, "c-%" PRIu64, seq);
    s_key_str(key, id);
}

//  The child of the crash test: writes synced records until it is killed,
//  reporting each acknowledged sequence number on FD.
static void
s_crash_writer(int fd)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    if (!store)
        _exit(1);
    shoal_batch_t *batch = shoal_batch_new(store);
    for (uint64_t seq = 1; seq <= CRASH_WRITES_MAX; seq++) {
        char id[TEXT_MAX];
        shoal_key_t key, counter_key;
        s_crash_key(&key, seq, id, sizeof id);
        shoal_claim_record_t record = s_claim(id);
        record.epoch = seq;
        record.memory_bytes = seq * 4096;
        //  Each write also moves a counter in another family, in the same batch.
        s_key_str(&counter_key, "writes");
        shoal_batch_clear(batch);
        if (shoal_batch_put_record(batch, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec, &record))
            _exit(2);
        shoal_batch_put(batch, SHOAL_CF_COUNTERS, &counter_key, &seq, sizeof seq);
        if (shoal_store_write(store, batch, true))
            _exit(3);
        if (write(fd, &seq, sizeof seq) != sizeof seq)
            _exit(4);
    }
    _exit(0);
}

static void
test_store_crash_keeps_synced_writes(void)
{
    int acks[2];
    CHECK(pipe(acks) == 0);
    pid_t writer = fork();
    CHECK(writer >= 0);
    if (writer == 0) {
        close(acks[0]);
        s_crash_writer(acks[1]);
    }
    close(acks[1]);

    //  Kill the writer mid-stream after CRASH_ACKS acknowledgements, then keep
    //  reading: what it acknowledged before dying counts too.
    uint64_t acked = 0, seq;
    bool in_order = true;
    while (read(acks[0], &seq, sizeof seq) == sizeof seq) {
        in_order = in_order && seq == acked + 1;
        acked = seq;
        if (acked == CRASH_ACKS)
            kill(writer, SIGKILL);
    }
    close(acks[0]);
    int status = 0;
    waitpid(writer, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the writer was not killed mid-stream (status %d)", status);
    CHECK(in_order);
    CHECK(acked >= CRASH_ACKS);
    printf("%" PRIu64 " synced writes acknowledged before the kill\n", acked);

    shoal_store_t *store = s_store_open(shoal_test_dir, true);
    CHECK(store);
    uint64_t missing = 0;
    for (seq = 1; seq <= acked && !missing; seq++) {
        char id[TEXT_MAX];
        shoal_key_t key;
        s_crash_key(&key, seq, id, sizeof id);
        shoal_claim_record_t record = { 0 };
        bool found = false;
        bool intact = shoal_store_get_record(store, SHOAL_CF_CLAIMS, &key, &shoal_claim_codec, &record, &found) == 0
                   && found && strcmp(record.id, id) == 0 && record.epoch == seq
                   && record.memory_bytes == seq * 4096 && record.state == SHOAL_CLAIM_RUNNING;
        shoal_claim_codec.clear(&record);
        if (!intact)
            missing = seq;
    }
    //  The write in flight at the kill may or may not have landed; the
    //  counter agrees with the claims either way, since both were one batch.
    int64_t claims = shoal_store_count(store, SHOAL_CF_CLAIMS, NULL);
    shoal_key_t counter_key;
    s_key_str(&counter_key, "writes");
    uint8_t *value = NULL;
    size_t size = 0;
    int get_rc = shoal_store_get(store, SHOAL_CF_COUNTERS, &counter_key, &value, &size);
    uint64_t counter = 0;
    if (value && size == sizeof counter)
        memcpy(&counter, value, sizeof counter);
    free(value);
    shoal_store_destroy(&store);
    CHECK_MSG(missing == 0, "acknowledged write %" PRIu64 " of %" PRIu64 " is lost or damaged",
              missing, acked);
    CHECK_MSG(claims == (int64_t) acked || claims == (int64_t) acked + 1,
              "%" PRId64 " claims after %" PRIu64 " acknowledged writes", claims, acked);
    CHECK_INT(get_rc, 0);
    CHECK_INT(counter, claims);
}

//  Fills CF kv with ("a", 0..9) and ("b", 0..9) and ("c"), each valued with
//  its own rendering.
static bool
s_fill_letters(shoal_store_t *store)
{
    shoal_batch_t *batch = shoal_batch_new(store);
    for (int letter = 'a'; letter <= 'b'; letter++)
        for (uint64_t n = 0; n < 10; n++) {
            char name[2] = { (char) letter, 0 };
            char value[TEXT_MAX];
            shoal_key_t key;
            shoal_key_init(&key);
            shoal_key_add_str(&key, name);
            shoal_key_add_u64(&key, n);
            snprintf(value, sizeof value, "%s-%" PRIu64, name, n);
            shoal_batch_put(batch, SHOAL_CF_KV, &key, value, strlen(value));
        }
    shoal_key_t key;
    s_key_str(&key, "c");
    shoal_batch_put(batch, SHOAL_CF_KV, &key, "c", 1);
    bool written = shoal_store_write(store, batch, false) == 0;
    shoal_batch_destroy(&batch);
    return written;
}

static void
s_letter_key(shoal_key_t *key, const char *letter, uint64_t n)
{
    shoal_key_init(key);
    shoal_key_add_str(key, letter);
    shoal_key_add_u64(key, n);
}

//  The number in the ("x", n) key under ITER, or -1.
static int
s_iter_number(shoal_iter_t *iter)
{
    size_t size;
    const uint8_t *bytes = shoal_iter_key(iter, &size);
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, bytes, size);
    char letter[TEXT_MAX];
    uint64_t n;
    if (!bytes || shoal_key_read_str(&reader, letter, sizeof letter)
    ||  shoal_key_read_u64(&reader, &n) || !shoal_key_reader_done(&reader))
        return -1;
    return (int) n;
}

static void
test_store_iter_bounds(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK(s_fill_letters(store));
    shoal_key_t lower, upper;
    s_letter_key(&lower, "a", 3);
    s_letter_key(&upper, "a", 7);
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_KV, &lower, &upper);
    CHECK(iter);

    //  Forward: 3, 4, 5, 6; the upper bound is exclusive.
    char seen[TEXT_MAX] = "";
    for (bool on_key = shoal_iter_first(iter); on_key; on_key = shoal_iter_next(iter))
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%d ", s_iter_number(iter));
    CHECK_STR(seen, "3 4 5 6 ");
    CHECK(!shoal_iter_valid(iter));
    CHECK(!shoal_iter_next(iter));

    //  Backward from the last.
    seen[0] = 0;
    for (bool on_key = shoal_iter_last(iter); on_key; on_key = shoal_iter_prev(iter))
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%d ", s_iter_number(iter));
    CHECK_STR(seen, "6 5 4 3 ");
    CHECK(!shoal_iter_prev(iter));

    //  The value comes with the key.
    CHECK(shoal_iter_first(iter));
    size_t size;
    const uint8_t *value = shoal_iter_value(iter, &size);
    CHECK(value && size == 3 && memcmp(value, "a-3", 3) == 0);
    CHECK_INT(shoal_iter_status(iter), 0);
    shoal_iter_destroy(&iter);

    //  Open bounds reach both ends of the family.
    iter = shoal_iter_new(store, SHOAL_CF_KV, NULL, NULL);
    CHECK(iter);
    CHECK(shoal_iter_first(iter));
    CHECK_INT(s_iter_number(iter), 0);
    CHECK(shoal_iter_last(iter));
    value = shoal_iter_value(iter, &size);
    CHECK(value && size == 1 && value[0] == 'c');
    shoal_iter_destroy(&iter);
    shoal_store_destroy(&store);
}

static void
test_store_iter_seek(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK(s_fill_letters(store));
    shoal_key_t lower, upper, target;
    s_letter_key(&lower, "a", 3);
    s_letter_key(&upper, "a", 7);
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_KV, &lower, &upper);
    CHECK(iter);

    s_letter_key(&target, "a", 5);
    CHECK(shoal_iter_seek(iter, &target));
    CHECK_INT(s_iter_number(iter), 5);
    CHECK(shoal_iter_seek_prev(iter, &target));
    CHECK_INT(s_iter_number(iter), 5);

    //  Between 5 and 6: seek goes up, seek_prev down.
    shoal_key_add_str(&target, "between");
    CHECK(shoal_iter_seek(iter, &target));
    CHECK_INT(s_iter_number(iter), 6);
    CHECK(shoal_iter_seek_prev(iter, &target));
    CHECK_INT(s_iter_number(iter), 5);
    CHECK(shoal_iter_prev(iter));
    CHECK_INT(s_iter_number(iter), 4);

    //  Outside the bounds, seeks stop at them.
    s_letter_key(&target, "a", 1);
    CHECK(shoal_iter_seek(iter, &target));
    CHECK_INT(s_iter_number(iter), 3);
    CHECK(!shoal_iter_seek_prev(iter, &target));
    s_letter_key(&target, "a", 9);
    CHECK(!shoal_iter_seek(iter, &target));
    CHECK(shoal_iter_seek_prev(iter, &target));
    CHECK_INT(s_iter_number(iter), 6);
    CHECK_INT(shoal_iter_status(iter), 0);
    shoal_iter_destroy(&iter);
    shoal_store_destroy(&store);
}

static void
test_store_iter_prefix(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK(s_fill_letters(store));
    shoal_key_t prefix;
    s_key_str(&prefix, "a");
    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_KV, &prefix);
    CHECK(iter);
    int expected = 0;
    for (bool on_key = shoal_iter_first(iter); on_key; on_key = shoal_iter_next(iter)) {
        if (s_iter_number(iter) != expected)
            break;
        expected++;
    }
    CHECK_INT(expected, 10);
    CHECK(shoal_iter_last(iter));
    CHECK_INT(s_iter_number(iter), 9);
    shoal_iter_destroy(&iter);

    //  A whole key as a prefix matches itself; no match is no key, not an error.
    s_letter_key(&prefix, "b", 3);
    iter = shoal_iter_prefix(store, SHOAL_CF_KV, &prefix);
    CHECK(iter);
    CHECK(shoal_iter_first(iter));
    CHECK_INT(s_iter_number(iter), 3);
    CHECK(!shoal_iter_next(iter));
    shoal_iter_destroy(&iter);
    s_key_str(&prefix, "z");
    iter = shoal_iter_prefix(store, SHOAL_CF_KV, &prefix);
    CHECK(iter);
    CHECK(!shoal_iter_first(iter));
    CHECK(!shoal_iter_last(iter));
    CHECK_INT(shoal_iter_status(iter), 0);
    shoal_iter_destroy(&iter);
    shoal_store_destroy(&store);
}

static void
test_store_iter_snapshot(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK(s_fill_letters(store));
    shoal_key_t prefix, added, removed;
    s_key_str(&prefix, "a");
    s_letter_key(&added, "a", 100);
    s_letter_key(&removed, "a", 0);
    shoal_iter_t *before = shoal_iter_prefix(store, SHOAL_CF_KV, &prefix);
    CHECK(before);
    CHECK_INT(shoal_store_put(store, SHOAL_CF_KV, &added, "new", 3, false), 0);
    CHECK_INT(shoal_store_delete(store, SHOAL_CF_KV, &removed, false), 0);

    //  The iterator made before the writes sees none of them.
    CHECK(shoal_iter_first(before));
    CHECK_INT(s_iter_number(before), 0);
    CHECK(shoal_iter_last(before));
    CHECK_INT(s_iter_number(before), 9);
    shoal_iter_destroy(&before);

    shoal_iter_t *after = shoal_iter_prefix(store, SHOAL_CF_KV, &prefix);
    CHECK(after);
    CHECK(shoal_iter_first(after));
    CHECK_INT(s_iter_number(after), 1);
    CHECK(shoal_iter_last(after));
    CHECK_INT(s_iter_number(after), 100);
    shoal_iter_destroy(&after);
    shoal_store_destroy(&store);
}

static void
test_store_count(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, NULL), 0);
    CHECK(s_fill_letters(store));
    shoal_key_t prefix;
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, NULL), 21);
    s_key_str(&prefix, "a");
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, &prefix), 10);
    s_key_str(&prefix, "c");
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, &prefix), 1);
    s_key_str(&prefix, "z");
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, &prefix), 0);
    //  A string prefix counts every string that starts with it.
    shoal_key_init(&prefix);
    shoal_key_add_str_prefix(&prefix, "");
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, &prefix), 21);
    CHECK_INT(shoal_store_count(store, SHOAL_CF_CLAIMS, NULL), 0);
    shoal_store_destroy(&store);
}

//  A table file goes into its family whole: its keys are then read like any
//  others, newer than what the family held; keys out of order are refused.
//  A shared handle reads the same data and keeps its own error.
static void
test_store_table_files(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    shoal_key_t key;
    s_key_str(&key, "b");
    CHECK_INT(shoal_store_put(store, SHOAL_CF_KV, &key, "old", 3, false), 0);

    shoal_store_t *shared = shoal_store_share(store);
    CHECK(shared);
    char path[4200];
    snprintf(path, sizeof path, "%s/kv.table", shoal_test_dir);
    shoal_table_t *table = shoal_table_new(shared, SHOAL_CF_KV, path);
    CHECK(table);
    const char *names[] = { "a", "b", "c" };
    for (size_t i = 0; i < 3; i++) {
        s_key_str(&key, names[i]);
        CHECK_INT(shoal_table_put(table, key.bytes, key.size, names[i], 1), 0);
    }
    CHECK_INT(shoal_table_count(table), 3);
    CHECK_INT(shoal_table_finish(table), 0);
    CHECK_INT(access(path, F_OK), 0);
    CHECK_INT(shoal_store_ingest(shared, table), 0);
    shoal_table_destroy(&table);
    shoal_table_destroy(&table);
    CHECK(access(path, F_OK) != 0);
    for (size_t i = 0; i < 3; i++) {
        s_key_str(&key, names[i]);
        uint8_t *value;
        size_t size;
        CHECK_INT(shoal_store_get(store, SHOAL_CF_KV, &key, &value, &size), 0);
        CHECK(value && size == 1 && value[0] == names[i][0]);
        free(value);
    }

    //  Out of order: refused, named, and nothing reaches the family.
    table = shoal_table_new(shared, SHOAL_CF_KV, path);
    CHECK(table);
    s_key_str(&key, "y");
    CHECK_INT(shoal_table_put(table, key.bytes, key.size, "", 0), 0);
    s_key_str(&key, "x");
    CHECK_INT(shoal_table_put(table, key.bytes, key.size, "", 0), -1);
    CHECK_MSG(shoal_test_contains(shoal_store_error(shared), "\"x\""), "%s", shoal_store_error(shared));
    CHECK_STR(shoal_store_error(store), "");
    CHECK_INT(shoal_table_finish(table), -1);
    CHECK_INT(shoal_store_ingest(shared, table), -1);
    shoal_table_destroy(&table);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, NULL), 3);

    //  An empty table is done at once.
    table = shoal_table_new(shared, SHOAL_CF_CLAIMS, path);
    CHECK_INT(shoal_table_finish(table), 0);
    CHECK_INT(shoal_store_ingest(shared, table), 0);
    shoal_table_destroy(&table);
    CHECK_INT(shoal_store_count(shared, SHOAL_CF_CLAIMS, NULL), 0);
    shoal_store_destroy(&shared);
    shoal_store_destroy(&shared);
    shoal_store_destroy(&store);

    //  And what was ingested is there after a reopen.
    store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    CHECK_INT(shoal_store_count(store, SHOAL_CF_KV, NULL), 3);
    shoal_store_destroy(&store);
}

//  Compaction held back leaves table files that overlap in level 0, however
//  many; let go, it brings level 0 back under its trigger (4 files).
static void
test_store_compaction_pause(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    uint64_t files = 99;
    CHECK_INT(shoal_store_level0_files(store, SHOAL_CF_KV, &files), 0);
    CHECK_INT(files, 0);
    CHECK_INT(shoal_store_pause_compaction(store, SHOAL_CF_KV, true), 0);
    //  Each file overlaps every other: the first ones go to the levels
    //  below, one a level, and the rest stay in level 0.
    enum { FILES = 12, LEVELS_BELOW = 6 };
    char path[4200];
    snprintf(path, sizeof path, "%s/kv.table", shoal_test_dir);
    for (int i = 0; i < FILES; i++) {
        shoal_table_t *table = shoal_table_new(store, SHOAL_CF_KV, path);
        CHECK(table);
        const char *names[] = { "a", "z" };
        for (size_t k = 0; k < 2; k++) {
            shoal_key_t key;
            s_key_str(&key, names[k]);
            char value[16];
            snprintf(value, sizeof value, "%d", i);
            CHECK_INT(shoal_table_put(table, key.bytes, key.size, value, strlen(value)), 0);
        }
        CHECK_INT(shoal_table_finish(table), 0);
        CHECK_INT(shoal_store_ingest(store, table), 0);
        shoal_table_destroy(&table);
    }
    CHECK_INT(shoal_store_level0_files(store, SHOAL_CF_KV, &files), 0);
    CHECK_INT(files, FILES - LEVELS_BELOW);
    //  Held: nothing compacts them, however long it is left.
    zclock_sleep(500);
    CHECK_INT(shoal_store_level0_files(store, SHOAL_CF_KV, &files), 0);
    CHECK_INT(files, FILES - LEVELS_BELOW);
    //  Let go: compaction runs by itself, and the newest value wins.
    CHECK_INT(shoal_store_pause_compaction(store, SHOAL_CF_KV, false), 0);
    int64_t deadline = zclock_mono() + 60000;
    while (shoal_store_level0_files(store, SHOAL_CF_KV, &files) == 0 && files >= 4 && zclock_mono() < deadline)
        zclock_sleep(20);
    CHECK_MSG(files < 4, "level 0 still holds %" PRIu64 " table files", files);
    shoal_key_t key;
    s_key_str(&key, "z");
    uint8_t *value;
    size_t size;
    CHECK_INT(shoal_store_get(store, SHOAL_CF_KV, &key, &value, &size), 0);
    CHECK(value && size == 2 && memcmp(value, "11", 2) == 0);
    free(value);
    shoal_store_destroy(&store);
}

//  The block size the store gives family NAME, read from the options file
//  RocksDB keeps in DIR (its sections name each family, then its table
//  options). 0 when not found.
static long
s_block_size(const char *dir, const char *name)
{
    DIR *listing = opendir(dir);
    char newest[256] = "";
    for (struct dirent *item; listing && (item = readdir(listing));)
        if (strncmp(item->d_name, "OPTIONS-", 8) == 0 && strcmp(item->d_name, newest) > 0)
            snprintf(newest, sizeof newest, "%s", item->d_name);
    if (listing)
        closedir(listing);
    char path[4400], section[128];
    snprintf(path, sizeof path, "%s/%s", dir, newest);
    snprintf(section, sizeof section, "\"%s\"]", name);
    char *text = *newest ? shoal_test_slurp(path) : NULL;
    char *at = text ? strstr(text, section) : NULL;
    at = at ? strstr(at, "\n  block_size=") : NULL;
    long size = at ? strtol(at + strlen("\n  block_size="), NULL, 10) : 0;
    free(text);
    return size;
}

//  oplog_by_node_hlc, read in long walks, is written in larger blocks than
//  the families read a key at a time.
static void
test_store_entry_block_size(void)
{
    shoal_store_t *store = s_store_open(shoal_test_dir, false);
    CHECK(store);
    shoal_store_destroy(&store);
    CHECK_INT(s_block_size(shoal_test_dir, "oplog_by_node_hlc"), SHOAL_STORE_ENTRY_BLOCK_BYTES);
    CHECK_INT(s_block_size(shoal_test_dir, "kv"), 4096);
    CHECK_INT(s_block_size(shoal_test_dir, "oplog_by_hash"), 4096);
}

int
main(void)
{
    SHOAL_TEST(test_store_column_families);
    SHOAL_TEST(test_store_open_options);
    SHOAL_TEST(test_store_get_put_delete);
    SHOAL_TEST(test_store_claim_states);
    SHOAL_TEST(test_store_record_round_trip);
    SHOAL_TEST(test_store_record_refused_on_write);
    SHOAL_TEST(test_store_record_refused_on_read);
    SHOAL_TEST(test_store_corrupt_values);
    SHOAL_TEST(test_store_batch_atomic);
    SHOAL_TEST(test_store_second_open_refused);
    SHOAL_TEST(test_store_crash_keeps_synced_writes);
    SHOAL_TEST(test_store_iter_bounds);
    SHOAL_TEST(test_store_iter_seek);
    SHOAL_TEST(test_store_iter_prefix);
    SHOAL_TEST(test_store_iter_snapshot);
    SHOAL_TEST(test_store_count);
    SHOAL_TEST(test_store_table_files);
    SHOAL_TEST(test_store_compaction_pause);
    SHOAL_TEST(test_store_entry_block_size);
    return shoal_test_finish();
}
