/*  test_protocol: the envelope codec and the body codecs, on good messages
    and on every kind of bad one a peer could send.

    The bad messages are written here byte by byte in protobuf's wire format,
    because shoal's own encoder refuses to produce them: that is the point of
    the codecs, and tests/ does not include protobuf-c.
*/
#include "shoal_test.h"
#include "shoal_key.h"
#include "shoal_proto.h"
#include "shoal_round_trip.h"
#include "shoal_names.h"
#include "shoal_record.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <stdlib.h>

//  Field numbers of protocol/shoal.proto.
#define ENVELOPE_VERSION 1
#define ENVELOPE_TYPE 2
#define ENVELOPE_REQUEST_ID 3
#define ENVELOPE_STATUS 4
#define ENVELOPE_MESSAGE 5
#define ENVELOPE_PAYLOAD 7
#define STATUS_REPLY_NODE_ID 1
#define STATUS_REPLY_VERSION 2
#define KV_PUT_DATASET 1
#define KV_PUT_KEY 2
#define KV_ITEM_DATASET 1
#define KV_ITEM_KEY 2
#define KV_ITEM_VALUE 3
#define KV_ITEM_DELETED 4
#define KV_ITEM_NODE 7
#define KV_ITEM_HASH 8
#define KV_SCAN_DATASET 1
#define KV_SCAN_LIMIT 4
#define KV_ITEMS_ITEMS 1
#define HEADS_HEADS 1
#define HEAD_DATASET 1
#define HEAD_NODE 2
#define HEAD_HASH 5
#define OPLOG_STATS_DATASETS 1
#define DATASET_STATS_DATASET 1
#define DATASET_STATS_ENTRIES 2

//  Protobuf's wire format: a tag is the field number shifted past the wire
//  type; a varint carries seven bits a byte, the high bit saying "more".
#define WIRE_VARINT 0
#define WIRE_LENGTH 2
#define WIRE_TYPE_BITS 3
#define VARINT_MORE 0x80
#define VARINT_BITS 7

//  Room for every hand-written envelope below, the longest being one with a
//  key of 2000 bytes.
#define WIRE_MAX 4096
#define ERROR_MAX 512

//  The request id the test messages carry.
#define TEST_REQUEST_ID 7

//  The first and last message types, and the statuses that give a message
//  each of its directions: a request, a 200 reply, any other reply.
#define TYPE_FIRST SHOAL_MSG_ERROR
#define TYPE_LAST SHOAL_MSG_OPLOG_PRUNE
static const uint32_t s_statuses[] = { 0, SHOAL_STATUS_OK, SHOAL_STATUS_NOT_FOUND };
#define STATUS_COUNT (sizeof s_statuses / sizeof s_statuses[0])

//  Values the filled bodies carry. The value holds a NUL: it is bytes, not a
//  string.
#define TEST_DATASET "acme/web/config"
#define TEST_NODE "node-a"
#define TEST_WALL_MS 1700000000123ULL
#define TEST_VALUE "v\0lue"
#define TEST_VALUE_SIZE 5
//  How many elements a full array body holds.
#define TEST_ARRAY_COUNT 3

//  How many random byte strings, and how many damaged valid encodings, the
//  fuzz tests feed to decode; and how long a random string may be.
#define FUZZ_ROUNDS 10000
#define FUZZ_LENGTH_MAX 128
//  Per message type and direction: random payloads under a valid header, and
//  damaged encodings of a full message.
#define FUZZ_PAYLOAD_ROUNDS 1000
#define FUZZ_DAMAGE_ROUNDS 1000
//  How many bytes of a valid encoding one damage round overwrites, at most.
#define FUZZ_DAMAGE_MAX 3
//  Random payloads made of fields: how many fields a message has at most,
//  the field numbers used (1 to this: every body field and a few unknown
//  ones), how long a text is at most, and how deep messages nest.
#define FUZZ_FIELDS_MAX 6
#define FUZZ_FIELD_NUMBER_MAX 10
#define FUZZ_TEXT_MAX 40
#define FUZZ_NESTING 1
//  A random varint is shifted right by up to this many bits, so that every
//  magnitude turns up.
#define FUZZ_VARINT_BITS 64
//  Random texts are made of this many lower-case letters.
#define FUZZ_LETTERS 26
//  One random payload in this many is raw bytes rather than fields.
#define FUZZ_RAW_ONE_IN 3
//  A fixed seed, so that a failure is reproduced by running the test again.
#define FUZZ_SEED 0x5eed5a0a1ULL

//  Bigger than SHOAL_ENVELOPE_MAX by a margin no rounding could hide.
#define OVERSIZE_FRAME 2000000

//  The body each type carries in a request and in a 200 reply (NULL: none),
//  as shoal_msg.h's table has it. Written out here again so that a change to
//  the codec's table must be a deliberate change to this one.
static const struct {
    shoal_msg_type_t type;
    const char *request;
    const char *reply;
} s_bodies[] = {
    { SHOAL_MSG_ERROR, NULL, NULL },
    { SHOAL_MSG_STATUS, NULL, "status_reply" },
    { SHOAL_MSG_KV_PUT, "kv_put", "kv_item" },
    { SHOAL_MSG_KV_GET, "kv_key", "kv_item" },
    { SHOAL_MSG_KV_DEL, "kv_key", "kv_item" },
    { SHOAL_MSG_KV_SCAN, "kv_scan", "kv_items" },
    { SHOAL_MSG_OPLOG_HEADS, "dataset_or_all", "heads" },
    { SHOAL_MSG_OPLOG_STATS, "dataset_or_all", "oplog_stats" },
    { SHOAL_MSG_OPLOG_PRUNE, "prune", "prune_reply" },
};

#define BODIES_COUNT (sizeof s_bodies / sizeof s_bodies[0])

typedef struct {
    uint8_t data[WIRE_MAX];     //  the bytes written so far
    size_t size;                //  how many there are
} wire_t;

static void
s_wire_append(wire_t *wire, const void *data, size_t size)
{
    assert(wire->size + size <= WIRE_MAX);
    if (size)
        memcpy(wire->data + wire->size, data, size);
    wire->size += size;
}

static void
s_wire_varint(wire_t *wire, uint64_t value)
{
    while (value >= VARINT_MORE) {
        uint8_t byte = (uint8_t) (value | VARINT_MORE);
        s_wire_append(wire, &byte, 1);
        value >>= VARINT_BITS;
    }
    uint8_t byte = (uint8_t) value;
    s_wire_append(wire, &byte, 1);
}

static void
s_wire_number(wire_t *wire, int field, uint64_t value)
{
    s_wire_varint(wire, (uint64_t) field << WIRE_TYPE_BITS | WIRE_VARINT);
    s_wire_varint(wire, value);
}

static void
s_wire_bytes(wire_t *wire, int field, const void *data, size_t size)
{
    s_wire_varint(wire, (uint64_t) field << WIRE_TYPE_BITS | WIRE_LENGTH);
    s_wire_varint(wire, size);
    s_wire_append(wire, data, size);
}

static void
s_wire_text(wire_t *wire, int field, const char *text)
{
    s_wire_bytes(wire, field, text, strlen(text));
}

//  A message (a body, an array element) as a length-delimited field.
static void
s_wire_message(wire_t *wire, int field, const wire_t *message)
{
    s_wire_bytes(wire, field, message->data, message->size);
}

//  The fields every envelope starts with. A zero status is written out
//  although protobuf would omit it: decode must read both the same.
static void
s_wire_head(wire_t *wire, uint64_t version, uint64_t type, uint64_t status)
{
    s_wire_number(wire, ENVELOPE_VERSION, version);
    s_wire_number(wire, ENVELOPE_TYPE, type);
    s_wire_number(wire, ENVELOPE_REQUEST_ID, TEST_REQUEST_ID);
    s_wire_number(wire, ENVELOPE_STATUS, status);
}

//  A whole envelope of TYPE with STATUS whose payload is PAYLOAD (none when
//  it is empty).
static void
s_wire_envelope(wire_t *wire, uint64_t type, uint64_t status, const wire_t *payload)
{
    wire->size = 0;
    s_wire_head(wire, SHOAL_PROTOCOL_VERSION, type, status);
    if (payload->size)
        s_wire_message(wire, ENVELOPE_PAYLOAD, payload);
}

//  A StatusReply whose node id is NODE_ID (none when NULL).
static void
s_wire_status_reply(wire_t *body, const char *node_id)
{
    body->size = 0;
    if (node_id)
        s_wire_text(body, STATUS_REPLY_NODE_ID, node_id);
    s_wire_text(body, STATUS_REPLY_VERSION, "0.1.0");
}

//  A KvItem that is valid except for what NODE and HASH_SIZE make it: a node
//  of "" is left out, and the hash has HASH_SIZE bytes.
static void
s_wire_kv_item(wire_t *item, const char *node, size_t hash_size)
{
    uint8_t hash[SHOAL_HASH_SIZE + 1] = { 0 };
    assert(hash_size <= sizeof hash);
    item->size = 0;
    s_wire_text(item, KV_ITEM_DATASET, TEST_DATASET);
    s_wire_text(item, KV_ITEM_KEY, "k");
    if (*node)
        s_wire_text(item, KV_ITEM_NODE, node);
    s_wire_bytes(item, KV_ITEM_HASH, hash, hash_size);
}

static zmsg_t *
s_msg_of(const void *data, size_t size)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addmem(msg, data, size);
    return msg;
}

//  Decodes *MSG_P and destroys it.
static shoal_envelope_t *
s_decode_taken(zmsg_t **msg_p, char *error, size_t error_size)
{
    shoal_envelope_t *envelope = shoal_envelope_decode(*msg_p, error, error_size);
    zmsg_destroy(msg_p);
    return envelope;
}

static shoal_envelope_t *
s_decode_wire(const wire_t *wire, char *error, size_t error_size)
{
    zmsg_t *msg = s_msg_of(wire->data, wire->size);
    return s_decode_taken(&msg, error, error_size);
}

//  Checks that decoding MSG (taken) is refused with an error naming WORDS.
#define CHECK_REFUSED_MSG(msg, words) do { \
    zmsg_t *msg_ = (msg); \
    char error_[ERROR_MAX] = ""; \
    shoal_envelope_t *envelope_ = s_decode_taken(&msg_, error_, sizeof error_); \
    bool refused_ = envelope_ == NULL; \
    shoal_envelope_destroy(&envelope_); \
    CHECK_MSG(refused_, "decode accepted what should fail with \"%s\"", (words)); \
    CHECK_MSG(shoal_test_contains(error_, (words)), "error \"%s\" does not say \"%s\"", error_, (words)); \
} while (0)

#define CHECK_REFUSED(wire, words) CHECK_REFUSED_MSG(s_msg_of((wire)->data, (wire)->size), words)

//  Checks that an envelope of TYPE with STATUS and PAYLOAD is refused with an
//  error naming WORDS.
#define CHECK_PAYLOAD_REFUSED(type, status, payload, words) do { \
    wire_t envelope_wire_; \
    s_wire_envelope(&envelope_wire_, (type), (status), (payload)); \
    CHECK_REFUSED(&envelope_wire_, words); \
} while (0)

//  Checks that encoding ENVELOPE is refused with an error naming WORDS.
#define CHECK_ENCODE_REFUSED(envelope, words) do { \
    char error_[ERROR_MAX] = ""; \
    zmsg_t *msg_ = shoal_envelope_encode((envelope), error_, sizeof error_); \
    bool refused_ = msg_ == NULL; \
    zmsg_destroy(&msg_); \
    CHECK_MSG(refused_, "encode accepted what should fail with \"%s\"", (words)); \
    CHECK_MSG(shoal_test_contains(error_, (words)), "error \"%s\" does not say \"%s\"", error_, (words)); \
} while (0)

//  A string of COUNT copies of C (the caller frees it).
static char *
s_repeat(char c, size_t count)
{
    char *text = (char *) zmalloc(count + 1);
    memset(text, c, count);
    return text;
}

//  A copy of TEST_VALUE, the way a body owns its value.
static uint8_t *
s_value(size_t *size_p)
{
    uint8_t *value = (uint8_t *) zmalloc(TEST_VALUE_SIZE);
    memcpy(value, TEST_VALUE, TEST_VALUE_SIZE);
    *size_p = TEST_VALUE_SIZE;
    return value;
}

//  A hash that differs with SEED.
static void
s_fill_hash(uint8_t *hash, size_t seed)
{
    for (size_t i = 0; i < SHOAL_HASH_SIZE; i++)
        hash[i] = (uint8_t) (seed + i + 1);
}

//  How a test message fills its body. FILL_FULL sets every field to a value a
//  default would not be, and arrays to several elements; FILL_EDGE sets each
//  field to an edge of what is allowed: empty (often NULL) where empty is
//  allowed, the longest text where a value is required, no elements.
typedef enum {
    FILL_FULL,
    FILL_EDGE,
} fill_t;

#define FILL_LAST FILL_EDGE

static char *
s_dataset(fill_t fill)
{
    return fill == FILL_FULL ? shoal_strdup(TEST_DATASET) : s_repeat('d', SHOAL_DATASET_MAX);
}

static char *
s_key(fill_t fill, size_t index)
{
    return fill == FILL_FULL ? zsys_sprintf("key-%zu", index) : s_repeat('k', SHOAL_KV_KEY_MAX);
}

static void
s_fill_kv_item(shoal_msg_kv_item_t *item, fill_t fill, size_t index)
{
    item->dataset = s_dataset(fill);
    item->key = s_key(fill, index);
    item->node = shoal_strdup(TEST_NODE);
    s_fill_hash(item->hash, index);
    if (fill == FILL_EDGE)
        return;
    //  Of every three items one holds a value, one is a tombstone and one an
    //  empty put, so that an array holds every kind of item.
    item->deleted = index % TEST_ARRAY_COUNT == 1;
    if (index % TEST_ARRAY_COUNT == 0)
        item->value = s_value(&item->value_size);
    item->wall_ms = TEST_WALL_MS + index;
    item->logic = (uint32_t) index + 1;
}

static void
s_fill_head(shoal_msg_head_t *head, size_t index)
{
    head->dataset = zsys_sprintf("%s/%zu", TEST_DATASET, index);
    head->node = zsys_sprintf("node-%zu", index);
    head->wall_ms = TEST_WALL_MS - index;
    head->logic = UINT32_MAX - (uint32_t) index;
    s_fill_hash(head->hash, index);
}

static void
s_fill_dataset_stats(shoal_msg_dataset_stats_t *stats, size_t index)
{
    stats->dataset = zsys_sprintf("%s/%zu", TEST_DATASET, index);
    stats->entries = index + 1;
    stats->nodes = index + 2;
    //  The first dataset was never pruned: a watermark of 0 is allowed.
    stats->watermark_ms = index ? TEST_WALL_MS + index : 0;
    stats->keys = UINT64_MAX - index;
}

//  Gives ENVELOPE the body its type and status call for, filled as FILL
//  says; nothing when they call for none.
static void
s_fill_body(shoal_envelope_t *envelope, fill_t fill)
{
    void *body = shoal_envelope_new_body(envelope);
    const shoal_codec_t *codec = envelope->body_codec;
    bool full = fill == FILL_FULL;
    size_t count = full ? TEST_ARRAY_COUNT : 0;
    if (codec == &shoal_msg_status_reply_codec) {
        shoal_msg_status_reply_t *status = body;
        status->node_id = shoal_strdup(TEST_NODE);
        if (full) {
            status->version = shoal_strdup("0.1.0");
            status->uptime_ms = 123456789012ULL;
            status->endpoint = shoal_strdup("tcp://127.0.0.1:7400");
            status->data_dir = shoal_strdup("/var/lib/shoal");
            status->claims = 3;
            status->peers = 4;
            status->clients = UINT64_MAX;
            status->role = shoal_strdup("tenant");
            status->tenant = shoal_strdup("acme/web");
        }
    }
    else
    if (codec == &shoal_msg_kv_put_codec) {
        shoal_msg_kv_put_t *put = body;
        put->dataset = s_dataset(fill);
        put->key = s_key(fill, 0);
        if (full)
            put->value = s_value(&put->value_size);
    }
    else
    if (codec == &shoal_msg_kv_key_codec) {
        shoal_msg_kv_key_t *key = body;
        key->dataset = s_dataset(fill);
        key->key = s_key(fill, 0);
    }
    else
    if (codec == &shoal_msg_kv_item_codec)
        s_fill_kv_item(body, fill, 0);
    else
    if (codec == &shoal_msg_kv_scan_codec) {
        shoal_msg_kv_scan_t *scan = body;
        scan->dataset = s_dataset(fill);
        scan->prefix = full ? shoal_strdup("key-") : NULL;
        scan->start_after = full ? shoal_strdup("key-0") : NULL;
        scan->limit = full ? SHOAL_SCAN_LIMIT_DEFAULT : SHOAL_SCAN_LIMIT_MAX;
    }
    else
    if (codec == &shoal_msg_kv_items_codec) {
        shoal_msg_kv_items_t *page = body;
        page->items = count ? zmalloc(count * sizeof *page->items) : NULL;
        page->count = count;
        for (size_t i = 0; i < count; i++)
            s_fill_kv_item(&page->items[i], FILL_FULL, i);
        page->more = full;
    }
    else
    if (codec == &shoal_msg_dataset_codec)
        ((shoal_msg_dataset_t *) body)->dataset = s_dataset(fill);
    else
    if (codec == &shoal_msg_dataset_or_all_codec)
        ((shoal_msg_dataset_t *) body)->dataset = full ? shoal_strdup(TEST_DATASET) : NULL;
    else
    if (codec == &shoal_msg_heads_codec) {
        shoal_msg_heads_t *heads = body;
        heads->heads = count ? zmalloc(count * sizeof *heads->heads) : NULL;
        heads->count = count;
        for (size_t i = 0; i < count; i++)
            s_fill_head(&heads->heads[i], i);
    }
    else
    if (codec == &shoal_msg_oplog_stats_codec) {
        shoal_msg_oplog_stats_t *stats = body;
        stats->datasets = count ? zmalloc(count * sizeof *stats->datasets) : NULL;
        stats->count = count;
        for (size_t i = 0; i < count; i++)
            s_fill_dataset_stats(&stats->datasets[i], i);
    }
    else
    if (codec == &shoal_msg_prune_codec) {
        shoal_msg_prune_t *prune = body;
        prune->dataset = full ? shoal_strdup(TEST_DATASET) : NULL;
        //  1 is the earliest time a prune may name.
        prune->before_ms = full ? TEST_WALL_MS : 1;
    }
    else
    if (codec == &shoal_msg_prune_reply_codec)
        ((shoal_msg_prune_reply_t *) body)->pruned = full ? UINT64_MAX : 0;
    else
        assert(codec == NULL);
}

//  A message of TYPE with STATUS, its body (when it has one) filled as FILL
//  says.
static shoal_envelope_t *
s_message(int type, uint32_t status, fill_t fill)
{
    shoal_envelope_t *message = shoal_envelope_new((shoal_msg_type_t) type, TEST_REQUEST_ID);
    message->status = status;
    if (status)
        message->message = shoal_strdup(shoal_status_text(status));
    s_fill_body(message, fill);
    return message;
}

//  True when the decoded text holds EXPECTED (NULL reads as empty). Decode
//  never gives NULL, so that readers may print a body's strings as they are.
static bool
s_same_text(const char *decoded, const char *expected)
{
    return decoded && streq(decoded, expected ? expected : "");
}

//  True when the decoded bytes are EXPECTED's; an empty value decodes as NULL.
static bool
s_same_bytes(const uint8_t *decoded, size_t decoded_size, const uint8_t *expected, size_t expected_size)
{
    if (decoded_size != expected_size)
        return false;
    return decoded_size == 0 ? decoded == NULL : memcmp(decoded, expected, decoded_size) == 0;
}

static bool
s_same_hash(const uint8_t *decoded, const uint8_t *expected)
{
    return memcmp(decoded, expected, SHOAL_HASH_SIZE) == 0;
}

static bool
s_same_status_reply(const shoal_msg_status_reply_t *got, const shoal_msg_status_reply_t *expected)
{
    return s_same_text(got->node_id, expected->node_id) && s_same_text(got->version, expected->version)
        && got->uptime_ms == expected->uptime_ms && s_same_text(got->endpoint, expected->endpoint)
        && s_same_text(got->data_dir, expected->data_dir) && got->claims == expected->claims
        && got->peers == expected->peers && got->clients == expected->clients
        && s_same_text(got->role, expected->role) && s_same_text(got->tenant, expected->tenant);
}

static bool
s_same_kv_item(const shoal_msg_kv_item_t *got, const shoal_msg_kv_item_t *expected)
{
    return s_same_text(got->dataset, expected->dataset) && s_same_text(got->key, expected->key)
        && s_same_bytes(got->value, got->value_size, expected->value, expected->value_size)
        && got->deleted == expected->deleted && got->wall_ms == expected->wall_ms
        && got->logic == expected->logic && s_same_text(got->node, expected->node)
        && s_same_hash(got->hash, expected->hash);
}

static bool
s_same_kv_items(const shoal_msg_kv_items_t *got, const shoal_msg_kv_items_t *expected)
{
    if (got->count != expected->count || got->more != expected->more)
        return false;
    for (size_t i = 0; i < got->count; i++)
        if (!s_same_kv_item(&got->items[i], &expected->items[i]))
            return false;
    return true;
}

static bool
s_same_heads(const shoal_msg_heads_t *got, const shoal_msg_heads_t *expected)
{
    if (got->count != expected->count)
        return false;
    for (size_t i = 0; i < got->count; i++) {
        const shoal_msg_head_t *a = &got->heads[i], *b = &expected->heads[i];
        if (!s_same_text(a->dataset, b->dataset) || !s_same_text(a->node, b->node)
        ||  a->wall_ms != b->wall_ms || a->logic != b->logic || !s_same_hash(a->hash, b->hash))
            return false;
    }
    return true;
}

static bool
s_same_oplog_stats(const shoal_msg_oplog_stats_t *got, const shoal_msg_oplog_stats_t *expected)
{
    if (got->count != expected->count)
        return false;
    for (size_t i = 0; i < got->count; i++) {
        const shoal_msg_dataset_stats_t *a = &got->datasets[i], *b = &expected->datasets[i];
        if (!s_same_text(a->dataset, b->dataset) || a->entries != b->entries || a->nodes != b->nodes
        ||  a->watermark_ms != b->watermark_ms || a->keys != b->keys)
            return false;
    }
    return true;
}

//  True when the decoded envelope's body is of the same kind as EXPECTED's
//  and holds the same values, field by field.
static bool
s_same_body(const shoal_envelope_t *decoded, const shoal_envelope_t *expected)
{
    const shoal_codec_t *codec = expected->body_codec;
    const void *got = decoded->body, *want = expected->body;
    if (decoded->body_codec != codec)
        return false;
    if (!codec)
        return got == NULL;
    if (codec == &shoal_msg_status_reply_codec)
        return s_same_status_reply(got, want);
    if (codec == &shoal_msg_kv_put_codec) {
        const shoal_msg_kv_put_t *a = got, *b = want;
        return s_same_text(a->dataset, b->dataset) && s_same_text(a->key, b->key)
            && s_same_bytes(a->value, a->value_size, b->value, b->value_size);
    }
    if (codec == &shoal_msg_kv_key_codec) {
        const shoal_msg_kv_key_t *a = got, *b = want;
        return s_same_text(a->dataset, b->dataset) && s_same_text(a->key, b->key);
    }
    if (codec == &shoal_msg_kv_item_codec)
        return s_same_kv_item(got, want);
    if (codec == &shoal_msg_kv_scan_codec) {
        const shoal_msg_kv_scan_t *a = got, *b = want;
        return s_same_text(a->dataset, b->dataset) && s_same_text(a->prefix, b->prefix)
            && s_same_text(a->start_after, b->start_after) && a->limit == b->limit;
    }
    if (codec == &shoal_msg_kv_items_codec)
        return s_same_kv_items(got, want);
    if (codec == &shoal_msg_dataset_codec || codec == &shoal_msg_dataset_or_all_codec)
        return s_same_text(((const shoal_msg_dataset_t *) got)->dataset,
                           ((const shoal_msg_dataset_t *) want)->dataset);
    if (codec == &shoal_msg_heads_codec)
        return s_same_heads(got, want);
    if (codec == &shoal_msg_oplog_stats_codec)
        return s_same_oplog_stats(got, want);
    if (codec == &shoal_msg_prune_codec) {
        const shoal_msg_prune_t *a = got, *b = want;
        return s_same_text(a->dataset, b->dataset) && a->before_ms == b->before_ms;
    }
    if (codec == &shoal_msg_prune_reply_codec)
        return ((const shoal_msg_prune_reply_t *) got)->pruned
            == ((const shoal_msg_prune_reply_t *) want)->pruned;
    return false;
}

//  A status reply with every field set to something a default would not be.
static shoal_envelope_t *
s_full_status_reply(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, UINT64_MAX - 1);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_envelope_destroy(&request);
    reply->retry_after_ms = 1500;
    s_fill_body(reply, FILL_FULL);
    return reply;
}


//  True when ENVELOPE survives shoal_round_trip.
static bool
s_reencodes(const shoal_envelope_t *envelope, char *error, size_t error_size)
{
    shoal_envelope_t *decoded = shoal_round_trip(envelope, error, error_size);
    bool reencodes = decoded != NULL;
    shoal_envelope_destroy(&decoded);
    return reencodes;
}

//  xorshift64*: reproducible random numbers with no shared state.
static uint64_t
s_random_next(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1DULL;
}

static void
test_status_request_round_trip(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, 42);
    CHECK_INT(request->version, SHOAL_PROTOCOL_VERSION);
    CHECK_INT(request->status, 0);
    CHECK(request->body == NULL);
    char error[ERROR_MAX] = "";
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    shoal_envelope_destroy(&request);
    CHECK_MSG(msg, "%s", error);
    CHECK_INT(zmsg_size(msg), 1);

    shoal_envelope_t *decoded = s_decode_taken(&msg, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    CHECK_INT(decoded->version, SHOAL_PROTOCOL_VERSION);
    CHECK_INT(decoded->type, SHOAL_MSG_STATUS);
    CHECK_INT(decoded->request_id, 42);
    CHECK_INT(decoded->status, 0);
    CHECK(decoded->message == NULL);
    CHECK_INT(decoded->retry_after_ms, 0);
    CHECK(decoded->body == NULL);
    shoal_envelope_destroy(&decoded);
    shoal_envelope_destroy(&decoded);
    CHECK(decoded == NULL);
}

static void
test_status_reply_round_trip(void)
{
    shoal_envelope_t *reply = s_full_status_reply();
    char error[ERROR_MAX] = "";
    zmsg_t *msg = shoal_envelope_encode(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(msg, "%s", error);

    shoal_envelope_t *decoded = s_decode_taken(&msg, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    CHECK_INT(decoded->version, SHOAL_PROTOCOL_VERSION);
    CHECK_INT(decoded->type, SHOAL_MSG_STATUS);
    CHECK(decoded->request_id == UINT64_MAX - 1);
    CHECK_INT(decoded->status, SHOAL_STATUS_OK);
    CHECK_STR(decoded->message, "OK");
    CHECK_INT(decoded->retry_after_ms, 1500);
    CHECK(decoded->body_codec == &shoal_msg_status_reply_codec);
    shoal_msg_status_reply_t *body = decoded->body;
    CHECK_STR(body->node_id, TEST_NODE);
    CHECK_STR(body->version, "0.1.0");
    CHECK(body->uptime_ms == 123456789012ULL);
    CHECK_STR(body->endpoint, "tcp://127.0.0.1:7400");
    CHECK_STR(body->data_dir, "/var/lib/shoal");
    CHECK_INT(body->claims, 3);
    CHECK_INT(body->peers, 4);
    CHECK(body->clients == UINT64_MAX);
    CHECK_STR(body->role, "tenant");
    CHECK_STR(body->tenant, "acme/web");
    shoal_envelope_destroy(&decoded);
}

static void
test_empty_body_strings_decode_as_empty(void)
{
    //  A tenant's status reply leaves data_dir empty; readers print the body
    //  without checking each string for NULL.
    shoal_envelope_t *reply = s_full_status_reply();
    shoal_msg_status_reply_t *body = reply->body;
    free(body->data_dir);
    body->data_dir = NULL;
    free(reply->message);
    reply->message = NULL;
    char error[ERROR_MAX] = "";
    zmsg_t *msg = shoal_envelope_encode(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(msg, "%s", error);
    shoal_envelope_t *decoded = s_decode_taken(&msg, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    CHECK_STR(((shoal_msg_status_reply_t *) decoded->body)->data_dir, "");
    CHECK(decoded->message == NULL);
    shoal_envelope_destroy(&decoded);
}

static void
test_reply_echoes_the_request(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, 42);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND,
                                                   "claim %s is not here", "c1");
    shoal_envelope_destroy(&request);
    CHECK_INT(reply->version, SHOAL_PROTOCOL_VERSION);
    CHECK_INT(reply->type, SHOAL_MSG_STATUS);
    CHECK_INT(reply->request_id, 42);
    CHECK_INT(reply->status, SHOAL_STATUS_NOT_FOUND);
    CHECK_STR(reply->message, "claim c1 is not here");
    CHECK(reply->body == NULL);
    char error[ERROR_MAX] = "";
    bool reencodes = s_reencodes(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(reencodes, "%s", error);

    //  With no request to echo, the reply is an error with request id 0.
    reply = shoal_envelope_reply(NULL, SHOAL_STATUS_BAD_REQUEST, "%s", "envelope: type 99 is unknown");
    CHECK_INT(reply->type, SHOAL_MSG_ERROR);
    CHECK_INT(reply->request_id, 0);
    CHECK_INT(reply->status, SHOAL_STATUS_BAD_REQUEST);
    CHECK_STR(reply->message, "envelope: type 99 is unknown");
    reencodes = s_reencodes(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(reencodes, "%s", error);
}

static void
test_new_body_replaces_the_previous_body(void)
{
    //  Under AddressSanitizer this also proves the first body's strings freed.
    shoal_envelope_t *reply = s_full_status_reply();
    shoal_msg_status_reply_t *body = shoal_envelope_new_body(reply);
    CHECK(body && body == reply->body);
    CHECK(reply->body_codec == &shoal_msg_status_reply_codec);
    CHECK(body->node_id == NULL);
    CHECK_INT(body->claims, 0);
    body->node_id = shoal_strdup("node-b");

    //  A reply that turns out to fail carries no body: asking for one again
    //  drops the one it had.
    reply->status = SHOAL_STATUS_INTERNAL;
    CHECK(shoal_envelope_new_body(reply) == NULL);
    CHECK(reply->body == NULL);
    CHECK(reply->body_codec == NULL);
    shoal_envelope_destroy(&reply);
}

static void
test_each_type_carries_its_body(void)
{
    CHECK_INT(BODIES_COUNT, TYPE_LAST - TYPE_FIRST + 1);
    for (size_t i = 0; i < BODIES_COUNT; i++)
        for (size_t j = 0; j < STATUS_COUNT; j++) {
            uint32_t status = s_statuses[j];
            const char *expected = status == 0 ? s_bodies[i].request
                                 : status == SHOAL_STATUS_OK ? s_bodies[i].reply : NULL;
            shoal_envelope_t *envelope = shoal_envelope_new(s_bodies[i].type, 1);
            envelope->status = status;
            const uint8_t *body = shoal_envelope_new_body(envelope);
            const char *got = envelope->body_codec ? envelope->body_codec->name : NULL;
            bool agrees = expected ? body && got && streq(got, expected) : !body && !got;
            bool zeroed = true;
            for (size_t k = 0; body && k < envelope->body_codec->record_size; k++)
                zeroed = zeroed && body[k] == 0;
            shoal_envelope_destroy(&envelope);
            CHECK_MSG(agrees, "%s with status %u: body %s, expected %s",
                      shoal_msg_type_name(s_bodies[i].type), status, got ? got : "none",
                      expected ? expected : "none");
            CHECK_MSG(zeroed, "%s with status %u: a new body is not zeroed",
                      shoal_msg_type_name(s_bodies[i].type), status);
        }
}

static void
test_names(void)
{
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_STATUS), "status");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_ERROR), "error");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_KV_PUT), "kv_put");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_KV_GET), "kv_get");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_KV_DEL), "kv_del");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_KV_SCAN), "kv_scan");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_OPLOG_HEADS), "oplog_heads");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_OPLOG_STATS), "oplog_stats");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_OPLOG_PRUNE), "oplog_prune");
    CHECK_STR(shoal_msg_type_name((shoal_msg_type_t) 0), "unknown");
    CHECK_STR(shoal_msg_type_name((shoal_msg_type_t) (SHOAL_MSG_TYPE_LAST + 1)), "unknown");
    CHECK_STR(shoal_msg_type_name((shoal_msg_type_t) 99), "unknown");
    CHECK_STR(shoal_status_text(SHOAL_STATUS_OK), "OK");
    CHECK_STR(shoal_status_text(SHOAL_STATUS_NOT_FOUND), "Not Found");
    CHECK_STR(shoal_status_text(SHOAL_STATUS_TOO_MANY), "Too Many Requests");
    CHECK_STR(shoal_status_text(SHOAL_STATUS_UNAVAILABLE), "Service Unavailable");
    CHECK_STR(shoal_status_text(SHOAL_STATUS_NO_SPACE), "Insufficient Storage");
    CHECK_STR(shoal_status_text(42), "Unknown");
}

static void
test_kv_put_request_and_reply(void)
{
    //  A client fills the request's body; the node reads it and answers with
    //  the entry it wrote, without the value the client already has.
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_KV_PUT, 42);
    shoal_msg_kv_put_t *put = shoal_envelope_new_body(request);
    CHECK(put);
    put->dataset = shoal_strdup(TEST_DATASET);
    put->key = shoal_strdup("config/port");
    put->value = s_value(&put->value_size);
    char error[ERROR_MAX] = "";
    shoal_envelope_t *received = shoal_round_trip(request, error, sizeof error);
    shoal_envelope_destroy(&request);
    CHECK_MSG(received, "%s", error);
    const shoal_msg_kv_put_t *asked = received->body;
    CHECK_STR(asked->dataset, TEST_DATASET);
    CHECK_STR(asked->key, "config/port");
    CHECK_INT(asked->value_size, TEST_VALUE_SIZE);
    CHECK(memcmp(asked->value, TEST_VALUE, TEST_VALUE_SIZE) == 0);

    shoal_envelope_t *reply = shoal_envelope_reply(received, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_kv_item_t *item = shoal_envelope_new_body(reply);
    CHECK(item);
    item->dataset = shoal_strdup(asked->dataset);
    item->key = shoal_strdup(asked->key);
    item->wall_ms = TEST_WALL_MS;
    item->logic = 2;
    item->node = shoal_strdup(TEST_NODE);
    s_fill_hash(item->hash, 0);
    shoal_envelope_destroy(&received);
    shoal_envelope_t *answer = shoal_round_trip(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(answer, "%s", error);
    CHECK_INT(answer->request_id, 42);
    const shoal_msg_kv_item_t *written = answer->body;
    CHECK_STR(written->dataset, TEST_DATASET);
    CHECK_STR(written->key, "config/port");
    CHECK(written->value == NULL);
    CHECK_INT(written->value_size, 0);
    CHECK(!written->deleted);
    CHECK(written->wall_ms == TEST_WALL_MS);
    CHECK_INT(written->logic, 2);
    CHECK_STR(written->node, TEST_NODE);
    uint8_t hash[SHOAL_HASH_SIZE];
    s_fill_hash(hash, 0);
    CHECK(memcmp(written->hash, hash, SHOAL_HASH_SIZE) == 0);
    shoal_envelope_destroy(&answer);
}

//  The fuzz harnesses' seed corpus (fuzz/corpus/) is written from the
//  messages these tests build, when SHOAL_FUZZ_SEEDS names where:
//  SHOAL_FUZZ_SEEDS=fuzz/corpus build/test_protocol. Each harness reads its
//  input's first byte as a choice (fuzz/fuzz_*.c say which); the seeds
//  carry the choice that makes the rest of them decode.
#define SEED_BODY_REPLY 0x80
#define SEED_PATH_MAX 4200
//  fuzz_record's codecs, in its order.
enum { SEED_CLAIM, SEED_COUNTER, SEED_ENTRY, SEED_KV, SEED_HEAD, SEED_REGISTRY, SEED_MOVE };
//  fuzz_key's choices: an encoded key to read, or a script of elements.
#define SEED_KEY_READ 0
#define SEED_KEY_SCRIPT 1

static void
s_seed_write(const char *harness, const char *name, uint8_t choice, const uint8_t *bytes, size_t size)
{
    const char *dir = getenv("SHOAL_FUZZ_SEEDS");
    char path[SEED_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, harness);
    zsys_dir_create("%s", path);
    snprintf(path, sizeof path, "%s/%s/%s", dir, harness, name);
    FILE *file = fopen(path, "wb");
    if (file) {
        fputc(choice, file);
        fwrite(bytes, 1, size, file);
        fclose(file);
    }
}

//  Writes RECORD encoded by CODEC as a seed of HARNESS.
static void
s_seed_record(const char *harness, const char *name, uint8_t choice, const shoal_codec_t *codec,
              const void *record)
{
    uint8_t *bytes;
    size_t size;
    char error[ERROR_MAX];
    if (codec->encode(record, &bytes, &size, error, sizeof error) == 0) {
        s_seed_write(harness, name, choice, bytes, size);
        free(bytes);
    }
}

//  Fills the fields this file's tests leave empty in the bodies of
//  MESSAGE, where its codec needs them, so that its seed encodes.
static void
s_seed_fill(shoal_envelope_t *message)
{
    const shoal_codec_t *codec = message->body_codec;
    void *body = message->body;
    if (codec == &shoal_msg_member_codec) {
        shoal_msg_member_t *member = body;
        member->node_id = shoal_strdup(TEST_NODE);
        member->endpoint = shoal_strdup("tcp://127.0.0.1:7400");
        member->state = SHOAL_MEMBER_ALIVE;
    }
    else
    if (codec == &shoal_msg_ping_codec) {
        shoal_msg_ping_t *ping = body;
        ping->from = shoal_strdup(TEST_NODE);
        ping->target = shoal_strdup("node-b");
    }
    else
    if (codec == &shoal_msg_pull_codec) {
        shoal_msg_pull_t *pull = body;
        pull->dataset = shoal_strdup(TEST_DATASET);
        pull->node = shoal_strdup(TEST_NODE);
        pull->after_wall_ms = TEST_WALL_MS;
    }
    else
    if (codec == &shoal_msg_chain_codec) {
        shoal_msg_chain_t *chain = body;
        chain->dataset = shoal_strdup(TEST_DATASET);
        chain->has_start = true;
        memset(chain->start, 0x11, sizeof chain->start);
        memset(chain->end, 0x22, sizeof chain->end);
    }
    else
    if (codec == &shoal_msg_snapshot_request_codec) {
        shoal_msg_snapshot_request_t *request = body;
        request->dataset = shoal_strdup(TEST_DATASET);
        request->after_key = shoal_strdup("k");
    }
    else
    if (codec == &shoal_msg_node_ref_codec)
        ((shoal_msg_node_ref_t *) body)->node_id = shoal_strdup(TEST_NODE);
    else
    if (codec == &shoal_msg_claim_create_codec) {
        shoal_msg_claim_create_t *create = body;
        create->tenant = shoal_strdup("acme/web");
        create->memory_bytes = 1 << 20;
        create->driver = shoal_strdup("proc");
        create->id = shoal_strdup("c1");
    }
    else
    if (codec == &shoal_msg_claim_ref_codec)
        ((shoal_msg_claim_ref_t *) body)->id = shoal_strdup("c1");
    else
    if (codec == &shoal_msg_claim_info_codec) {
        shoal_msg_claim_info_t *info = body;
        info->id = shoal_strdup("c1");
        info->tenant = shoal_strdup("acme/web");
        info->state = SHOAL_CLAIM_RUNNING;
        info->memory_bytes = 1 << 20;
        info->driver = shoal_strdup("proc");
        info->owner = shoal_strdup(TEST_NODE);
    }
    else
    if (codec == &shoal_msg_claim_call_codec) {
        shoal_msg_claim_call_t *call = body;
        call->id = shoal_strdup("c1");
        call->op = shoal_strdup("put");
        call->key = shoal_strdup("k");
        call->value = (uint8_t *) shoal_strdup("v");
        call->value_size = 1;
    }
    else
    if (codec == &shoal_msg_registry_record_codec) {
        shoal_registry_record_t *record = body;
        record->claim_id = shoal_strdup("c1");
        record->owner = shoal_strdup(TEST_NODE);
        record->endpoint = shoal_strdup("tcp://127.0.0.1:7400");
        record->epoch = 2;
        record->tenant = shoal_strdup("acme/web");
    }
    else
    if (codec == &shoal_msg_move_codec) {
        shoal_move_t *move = body;
        move->move_id = shoal_strdup("m1");
        move->claim_id = shoal_strdup("c1");
        move->from = shoal_strdup(TEST_NODE);
        move->to = shoal_strdup("node-b");
        move->state = SHOAL_MOVE_PENDING;
        move->role = SHOAL_MOVE_SOURCE;
        move->tenant = shoal_strdup("acme/web");
        move->memory_bytes = 1 << 20;
        move->driver = shoal_strdup("proc");
        move->phase = shoal_strdup("rounds");
    }
}

//  Seeds of MESSAGE: the envelope, its body, and the store records it holds.
static void
s_seeds_of_message(const shoal_envelope_t *message)
{
    char name[SEED_PATH_MAX];
    snprintf(name, sizeof name, "%s-%u", shoal_msg_type_name(message->type), message->status);
    char error[ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(message, error, sizeof error);
    if (msg) {
        zframe_t *frame = zmsg_first(msg);
        s_seed_write("envelope", name, 0, zframe_data(frame), zframe_size(frame));
        zmsg_destroy(&msg);
    }
    if (message->body) {
        uint8_t choice = (uint8_t) (message->type | (message->status ? SEED_BODY_REPLY : 0));
        s_seed_record("body", name, choice, message->body_codec, message->body);
    }
    if (message->body_codec == &shoal_msg_entries_codec) {
        const shoal_msg_entries_t *entries = message->body;
        for (size_t i = 0; i < entries->count; i++) {
            snprintf(name, sizeof name, "entry-%s-%zu", shoal_msg_type_name(message->type), i);
            s_seed_record("record", name, SEED_ENTRY, &shoal_oplog_entry_codec, &entries->entries[i]);
        }
    }
    if (message->body_codec == &shoal_msg_registry_record_codec)
        s_seed_record("record", "registry", SEED_REGISTRY, message->body_codec, message->body);
    if (message->body_codec == &shoal_msg_move_codec && message->type == SHOAL_MSG_MOVE && message->status)
        s_seed_record("record", "move", SEED_MOVE, message->body_codec, message->body);
}

//  Seeds of the records no message carries, and of keys.
static void
s_seeds_of_records(void)
{
    shoal_claim_record_t claim = {
        .id = "c1", .tenant = "acme/web", .state = SHOAL_CLAIM_RUNNING, .memory_bytes = 1 << 20,
        .driver = "proc", .epoch = 2, .created_ms = TEST_WALL_MS
    };
    s_seed_record("record", "claim", SEED_CLAIM, &shoal_claim_codec, &claim);
    claim.state = SHOAL_CLAIM_ERROR;
    claim.error = "the guest did not start";
    s_seed_record("record", "claim-error", SEED_CLAIM, &shoal_claim_codec, &claim);
    shoal_counter_record_t counter = { .claims = 3, .running = 2, .memory_bytes = 3 << 20 };
    s_seed_record("record", "counter", SEED_COUNTER, &shoal_counter_codec, &counter);
    shoal_kv_record_t kv = { .value = (uint8_t *) TEST_VALUE, .value_size = TEST_VALUE_SIZE,
                             .wall_ms = TEST_WALL_MS, .logic = 3, .node = TEST_NODE, .epoch = 4 };
    memset(kv.hash, 0xA5, sizeof kv.hash);
    s_seed_record("record", "kv", SEED_KV, &shoal_kv_codec, &kv);
    uint8_t *bytes;
    size_t size;
    char error[ERROR_MAX];
    //  fuzz_kv_deleted reads its whole input as a record.
    if (shoal_kv_codec.encode(&kv, &bytes, &size, error, sizeof error) == 0) {
        s_seed_write("kv_deleted", "live", bytes[0], bytes + 1, size - 1);
        free(bytes);
    }
    kv.value = NULL;
    kv.value_size = 0;
    kv.deleted = true;
    s_seed_record("record", "kv-tombstone", SEED_KV, &shoal_kv_codec, &kv);
    if (shoal_kv_codec.encode(&kv, &bytes, &size, error, sizeof error) == 0) {
        s_seed_write("kv_deleted", "tombstone", bytes[0], bytes + 1, size - 1);
        free(bytes);
    }
    shoal_oplog_entry_t entry = {
        .dataset = TEST_DATASET, .key = "k", .op = SHOAL_OPLOG_PUT, .value = (uint8_t *) TEST_VALUE,
        .value_size = TEST_VALUE_SIZE, .wall_ms = TEST_WALL_MS, .logic = 2, .node = TEST_NODE,
        .has_prev = true
    };
    memset(entry.prev_hash, 0x3C, sizeof entry.prev_hash);
    memset(entry.hash, 0xC3, sizeof entry.hash);
    s_seed_record("record", "entry", SEED_ENTRY, &shoal_oplog_entry_codec, &entry);
    entry.op = SHOAL_OPLOG_DELETE;
    entry.value = NULL;
    entry.value_size = 0;
    entry.has_prev = false;
    s_seed_record("record", "entry-delete", SEED_ENTRY, &shoal_oplog_entry_codec, &entry);
    shoal_head_record_t head = { .wall_ms = TEST_WALL_MS, .logic = 1 };
    memset(head.hash, 0x5A, sizeof head.hash);
    s_seed_record("record", "head", SEED_HEAD, &shoal_head_codec, &head);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, TEST_DATASET);
    shoal_key_add_bytes(&key, TEST_VALUE, TEST_VALUE_SIZE);
    shoal_key_add_u64(&key, TEST_WALL_MS);
    s_seed_write("key", "read", SEED_KEY_READ, key.bytes, key.size);
    //  A script: a string, bytes with a NUL, a u64 (type byte, length, bytes).
    static const uint8_t script[] = { 1, 3, 'a', 'p', 'p', 2, 2, 0, 1, 0, 2, 1, 7 };
    s_seed_write("key", "script", SEED_KEY_SCRIPT, script, sizeof script);
}

static void
test_every_body_round_trips(void)
{
    //  Every type in every direction, once with every field set and arrays
    //  of several elements, once with every field at an edge of its limits.
    if (getenv("SHOAL_FUZZ_SEEDS")) {
        s_seeds_of_records();
        for (int type = SHOAL_MSG_TYPE_FIRST; type <= SHOAL_MSG_TYPE_LAST; type++)
            for (size_t i = 0; i < STATUS_COUNT; i++) {
                shoal_envelope_t *message = s_message(type, s_statuses[i], FILL_FULL);
                char error[ERROR_MAX];
                zmsg_t *msg = shoal_envelope_encode(message, error, sizeof error);
                if (!msg)
                    s_seed_fill(message);
                zmsg_destroy(&msg);
                s_seeds_of_message(message);
                shoal_envelope_destroy(&message);
            }
    }
    for (int type = TYPE_FIRST; type <= TYPE_LAST; type++)
        for (size_t i = 0; i < STATUS_COUNT; i++)
            for (int fill = FILL_FULL; fill <= FILL_LAST; fill++) {
                shoal_envelope_t *message = s_message(type, s_statuses[i], (fill_t) fill);
                char error[ERROR_MAX] = "the decoded body differs";
                shoal_envelope_t *decoded = shoal_round_trip(message, error, sizeof error);
                bool same = decoded && decoded->type == message->type
                         && decoded->status == message->status
                         && decoded->request_id == message->request_id
                         && s_same_body(decoded, message);
                shoal_envelope_destroy(&decoded);
                shoal_envelope_destroy(&message);
                CHECK_MSG(same, "%s with status %u, %s fill: %s", shoal_msg_type_name((shoal_msg_type_t) type),
                          s_statuses[i], fill == FILL_FULL ? "full" : "edge", error);
            }
}

static void
test_hand_written_envelopes_decode(void)
{
    //  The malformed envelopes below each differ from one of these in one
    //  thing, so each refusal is caused by that thing alone.
    wire_t wire = { .size = 0 };
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_STATUS, 0);
    char error[ERROR_MAX] = "";
    shoal_envelope_t *envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    CHECK_INT(envelope->type, SHOAL_MSG_STATUS);
    CHECK_INT(envelope->request_id, TEST_REQUEST_ID);
    shoal_envelope_destroy(&envelope);

    wire_t payload;
    s_wire_status_reply(&payload, TEST_NODE);
    s_wire_envelope(&wire, SHOAL_MSG_STATUS, SHOAL_STATUS_OK, &payload);
    envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    CHECK(envelope->body_codec == &shoal_msg_status_reply_codec);
    CHECK_STR(((shoal_msg_status_reply_t *) envelope->body)->node_id, TEST_NODE);
    CHECK_STR(((shoal_msg_status_reply_t *) envelope->body)->version, "0.1.0");
    shoal_envelope_destroy(&envelope);

    wire.size = 0;
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_ERROR, SHOAL_STATUS_BAD_REQUEST);
    s_wire_text(&wire, ENVELOPE_MESSAGE, "bad");
    envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    CHECK_INT(envelope->type, SHOAL_MSG_ERROR);
    CHECK_STR(envelope->message, "bad");
    shoal_envelope_destroy(&envelope);

    //  A scan reply of two items, the second a tombstone.
    wire_t item, page = { .size = 0 };
    s_wire_kv_item(&item, TEST_NODE, SHOAL_HASH_SIZE);
    s_wire_message(&page, KV_ITEMS_ITEMS, &item);
    s_wire_number(&item, KV_ITEM_DELETED, 1);
    s_wire_message(&page, KV_ITEMS_ITEMS, &item);
    s_wire_envelope(&wire, SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, &page);
    envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    const shoal_msg_kv_items_t *items = envelope->body;
    CHECK_INT(items->count, 2);
    CHECK_STR(items->items[1].key, "k");
    CHECK(!items->items[0].deleted && items->items[1].deleted);
    CHECK(!items->more);
    shoal_envelope_destroy(&envelope);
}

static void
test_empty_payload_decodes_as_defaults(void)
{
    //  protobuf writes nothing for a body of defaults, so an absent payload
    //  is such a body, valid wherever the defaults are.
    wire_t wire, nothing = { .size = 0 };
    char error[ERROR_MAX] = "";
    s_wire_envelope(&wire, SHOAL_MSG_OPLOG_STATS, 0, &nothing);
    shoal_envelope_t *envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    CHECK(envelope->body_codec == &shoal_msg_dataset_or_all_codec);
    CHECK_STR(((shoal_msg_dataset_t *) envelope->body)->dataset, "");
    shoal_envelope_destroy(&envelope);

    s_wire_envelope(&wire, SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, &nothing);
    envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    const shoal_msg_kv_items_t *items = envelope->body;
    CHECK(items && items->count == 0 && items->items == NULL && !items->more);
    shoal_envelope_destroy(&envelope);

    s_wire_envelope(&wire, SHOAL_MSG_OPLOG_PRUNE, SHOAL_STATUS_OK, &nothing);
    envelope = s_decode_wire(&wire, error, sizeof error);
    CHECK_MSG(envelope, "%s", error);
    CHECK(envelope->body && ((shoal_msg_prune_reply_t *) envelope->body)->pruned == 0);
    shoal_envelope_destroy(&envelope);
}

static void
test_decode_refuses_empty_message(void)
{
    CHECK_REFUSED_MSG(zmsg_new(), "message has no frames");
}

static void
test_decode_refuses_empty_frame(void)
{
    CHECK_REFUSED_MSG(s_msg_of("", 0), "first frame is empty");
}

static void
test_decode_refuses_oversize_frame(void)
{
    //  Checked before unpacking, so what the bytes are does not matter.
    uint8_t *bytes = calloc(1, OVERSIZE_FRAME);
    CHECK(bytes);
    zmsg_t *msg = s_msg_of(bytes, OVERSIZE_FRAME);
    zmsg_t *just_over = s_msg_of(bytes, SHOAL_ENVELOPE_MAX + 1);
    free(bytes);
    CHECK_REFUSED_MSG(msg, "frame of 2000000 bytes exceeds the 1048576-byte limit");
    CHECK_REFUSED_MSG(just_over, "frame of 1048577 bytes exceeds the 1048576-byte limit");
}

static void
test_decode_accepts_a_bulk_frame_but_refuses_three(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, 1);
    char error[ERROR_MAX] = "";
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    shoal_envelope_destroy(&request);
    CHECK_MSG(msg, "%s", error);

    //  The second frame is bulk bytes that are not part of the envelope.
    zmsg_addstr(msg, "chunk bytes");
    shoal_envelope_t *decoded = shoal_envelope_decode(msg, error, sizeof error);
    bool accepted = decoded != NULL;
    shoal_envelope_destroy(&decoded);
    CHECK_MSG(accepted, "%s", error);

    zmsg_addstr(msg, "one frame too many");
    CHECK_REFUSED_MSG(msg, "message has 3 frames, more than the 2 allowed");
}

static void
test_decode_refuses_every_truncation(void)
{
    shoal_envelope_t *reply = s_full_status_reply();
    char error[ERROR_MAX] = "";
    zmsg_t *msg = shoal_envelope_encode(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(msg, "%s", error);
    zframe_t *frame = zmsg_first(msg);
    size_t size = zframe_size(frame);
    uint8_t *bytes = malloc(size);
    CHECK(bytes);
    memcpy(bytes, zframe_data(frame), size);
    zmsg_destroy(&msg);

    //  protobuf-c writes fields in number order, status before the payload.
    //  A prefix that stops before the status is a complete status request
    //  and decodes as one; every longer prefix is either cut inside a field
    //  or a status 200 reply whose body is all defaults, which lacks the
    //  node id, and is refused.
    size_t requests = 0, cut_in_field = 0, lacking_body = 0;
    for (size_t length = 0; length < size; length++) {
        zmsg_t *prefix = s_msg_of(bytes, length);
        error[0] = '\0';
        shoal_envelope_t *decoded = s_decode_taken(&prefix, error, sizeof error);
        if (decoded) {
            bool is_request = decoded->status == 0 && decoded->body == NULL;
            bool reencodes = s_reencodes(decoded, error, sizeof error);
            shoal_envelope_destroy(&decoded);
            CHECK_MSG(is_request, "a prefix of %zu of %zu bytes decoded as a reply", length, size);
            CHECK_MSG(reencodes, "a prefix of %zu bytes decoded but does not re-encode: %s", length, error);
            requests++;
            continue;
        }
        CHECK_MSG(shoal_test_contains(error, "envelope: "), "prefix of %zu bytes: \"%s\"", length, error);
        if (shoal_test_contains(error, "are not a protobuf Envelope"))
            cut_in_field++;
        else
        if (shoal_test_contains(error, "status_reply body: node_id is empty"))
            lacking_body++;
    }
    free(bytes);
    CHECK(requests > 0);
    CHECK(cut_in_field > 0);
    CHECK(lacking_body > 0);
}

static void
test_decode_survives_random_bytes(void)
{
    uint64_t state = FUZZ_SEED;
    uint8_t bytes[FUZZ_LENGTH_MAX];
    char error[ERROR_MAX];
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        size_t length = (size_t) (s_random_next(&state) % (FUZZ_LENGTH_MAX + 1));
        for (size_t i = 0; i < length; i++)
            bytes[i] = (uint8_t) s_random_next(&state);
        zmsg_t *msg = s_msg_of(bytes, length);
        error[0] = '\0';
        shoal_envelope_t *decoded = s_decode_taken(&msg, error, sizeof error);
        if (!decoded) {
            CHECK_MSG(shoal_test_contains(error, "envelope: "), "round %d: \"%s\"", round, error);
            continue;
        }
        bool reencodes = s_reencodes(decoded, error, sizeof error);
        shoal_envelope_destroy(&decoded);
        CHECK_MSG(reencodes, "round %d decoded but does not re-encode: %s", round, error);
    }
}

//  Appends up to FUZZ_FIELDS_MAX random fields to WIRE: the numbers bodies
//  use and a few they do not, as varints of every size, hash-sized byte
//  strings, short texts, and messages of such fields (the elements of
//  repeated fields). Random bytes rarely unpack; these often do, and so
//  reach the bodies' checks.
static void
s_wire_random_fields(wire_t *wire, uint64_t *state, int depth)
{
    enum { FIELD_NUMBER, FIELD_HASH, FIELD_TEXT, FIELD_MESSAGE, FIELD_KINDS };
    size_t fields = (size_t) (s_random_next(state) % (FUZZ_FIELDS_MAX + 1));
    for (size_t i = 0; i < fields; i++) {
        int field = 1 + (int) (s_random_next(state) % FUZZ_FIELD_NUMBER_MAX);
        int kind = (int) (s_random_next(state) % FIELD_KINDS);
        if (kind == FIELD_MESSAGE && depth < FUZZ_NESTING) {
            wire_t inner = { .size = 0 };
            s_wire_random_fields(&inner, state, depth + 1);
            s_wire_message(wire, field, &inner);
        }
        else
        if (kind == FIELD_HASH) {
            uint8_t hash[SHOAL_HASH_SIZE];
            for (size_t j = 0; j < SHOAL_HASH_SIZE; j++)
                hash[j] = (uint8_t) s_random_next(state);
            s_wire_bytes(wire, field, hash, SHOAL_HASH_SIZE);
        }
        else
        if (kind == FIELD_TEXT) {
            char text[FUZZ_TEXT_MAX];
            size_t length = (size_t) (s_random_next(state) % (FUZZ_TEXT_MAX + 1));
            for (size_t j = 0; j < length; j++)
                text[j] = (char) ('a' + s_random_next(state) % FUZZ_LETTERS);
            s_wire_bytes(wire, field, text, length);
        }
        else
            s_wire_number(wire, field, s_random_next(state) >> (s_random_next(state) % FUZZ_VARINT_BITS));
    }
}

static void
test_decode_survives_random_payloads(void)
{
    //  Valid headers of every type and direction, so that the payload is
    //  what decode has to judge.
    uint64_t state = FUZZ_SEED;
    int decoded_count = 0, body_refusals = 0;
    char error[ERROR_MAX];
    for (int type = TYPE_FIRST; type <= TYPE_LAST; type++)
        for (size_t i = 0; i < STATUS_COUNT; i++)
            for (int round = 0; round < FUZZ_PAYLOAD_ROUNDS; round++) {
                wire_t payload = { .size = 0 }, wire;
                if (s_random_next(&state) % FUZZ_RAW_ONE_IN == 0) {
                    size_t length = (size_t) (s_random_next(&state) % (FUZZ_LENGTH_MAX + 1));
                    for (size_t j = 0; j < length; j++) {
                        uint8_t byte = (uint8_t) s_random_next(&state);
                        s_wire_append(&payload, &byte, 1);
                    }
                }
                else
                    s_wire_random_fields(&payload, &state, 0);
                s_wire_envelope(&wire, (uint64_t) type, s_statuses[i], &payload);
                error[0] = '\0';
                shoal_envelope_t *decoded = s_decode_wire(&wire, error, sizeof error);
                if (!decoded) {
                    CHECK_MSG(shoal_test_contains(error, "envelope: "), "%s round %d: \"%s\"",
                              shoal_msg_type_name((shoal_msg_type_t) type), round, error);
                    if (shoal_test_contains(error, " body: "))
                        body_refusals++;
                    continue;
                }
                decoded_count++;
                bool reencodes = s_reencodes(decoded, error, sizeof error);
                shoal_envelope_destroy(&decoded);
                CHECK_MSG(reencodes, "%s round %d decoded but does not re-encode: %s",
                          shoal_msg_type_name((shoal_msg_type_t) type), round, error);
            }
    CHECK(decoded_count > 0);
    CHECK(body_refusals > 0);
}

static void
test_decode_survives_damaged_envelopes(void)
{
    //  Random bytes rarely get past the version check; damaging a valid
    //  encoding of every type and direction exercises the checks after it
    //  and the re-encoding of whatever still decodes.
    uint64_t state = FUZZ_SEED;
    int decoded_count = 0;
    char error[ERROR_MAX] = "";
    for (int type = TYPE_FIRST; type <= TYPE_LAST; type++)
        for (size_t i = 0; i < STATUS_COUNT; i++) {
            shoal_envelope_t *message = s_message(type, s_statuses[i], FILL_FULL);
            zmsg_t *msg = shoal_envelope_encode(message, error, sizeof error);
            shoal_envelope_destroy(&message);
            CHECK_MSG(msg, "%s", error);
            zframe_t *frame = zmsg_first(msg);
            size_t size = zframe_size(frame);
            uint8_t valid[WIRE_MAX], bytes[WIRE_MAX];
            CHECK(size <= WIRE_MAX);
            memcpy(valid, zframe_data(frame), size);
            zmsg_destroy(&msg);

            for (int round = 0; round < FUZZ_DAMAGE_ROUNDS; round++) {
                memcpy(bytes, valid, size);
                int damage = 1 + (int) (s_random_next(&state) % FUZZ_DAMAGE_MAX);
                for (int j = 0; j < damage; j++)
                    bytes[s_random_next(&state) % size] = (uint8_t) s_random_next(&state);
                zmsg_t *damaged = s_msg_of(bytes, size);
                error[0] = '\0';
                shoal_envelope_t *decoded = s_decode_taken(&damaged, error, sizeof error);
                if (!decoded) {
                    CHECK_MSG(shoal_test_contains(error, "envelope: "), "round %d: \"%s\"", round, error);
                    continue;
                }
                decoded_count++;
                bool reencodes = s_reencodes(decoded, error, sizeof error);
                shoal_envelope_destroy(&decoded);
                CHECK_MSG(reencodes, "round %d decoded but does not re-encode: %s", round, error);
            }
        }
    //  Damage inside the strings leaves a valid envelope, so some must decode.
    CHECK(decoded_count > 0);
}

static void
test_decode_refuses_wrong_version(void)
{
    wire_t wire = { .size = 0 };
    s_wire_head(&wire, 7, SHOAL_MSG_STATUS, 0);
    CHECK_REFUSED(&wire, "envelope: version 7 is not spoken here (this node speaks 1)");

    wire.size = 0;
    s_wire_number(&wire, ENVELOPE_TYPE, SHOAL_MSG_STATUS);
    CHECK_REFUSED(&wire, "version 0 is not spoken here");
}

static void
test_decode_refuses_unknown_type(void)
{
    wire_t wire = { .size = 0 };
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, 99, 0);
    CHECK_REFUSED(&wire, "envelope: type 99 is unknown");

    wire.size = 0;
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, 0, 0);
    CHECK_REFUSED(&wire, "type 0 is unknown");

    wire.size = 0;
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_TYPE_LAST + 1, 0);
    char past_last[64];
    snprintf(past_last, sizeof past_last, "type %d is unknown", SHOAL_MSG_TYPE_LAST + 1);
    CHECK_REFUSED(&wire, past_last);

    //  A negative enum value is a ten-byte varint on the wire.
    wire.size = 0;
    s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, UINT64_MAX, 0);
    CHECK_REFUSED(&wire, "type -1 is unknown");
}

static void
test_decode_refuses_payload_where_none_belongs(void)
{
    wire_t payload;
    s_wire_status_reply(&payload, TEST_NODE);
    char words[ERROR_MAX];
    snprintf(words, sizeof words,
             "envelope: a request of type status carries no body, but this one has %zu bytes", payload.size);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_STATUS, 0, &payload, words);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_ERROR, SHOAL_STATUS_BAD_REQUEST, &payload,
                          "a reply of type error with status 400 carries no body");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_STATUS, SHOAL_STATUS_NOT_FOUND, &payload,
                          "a reply of type status with status 404 carries no body");

    //  What the bytes are does not matter: a failed reply has none.
    wire_t junk = { .size = 0 };
    s_wire_append(&junk, "\xff\xff", 2);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_GET, SHOAL_STATUS_NOT_FOUND, &junk,
                          "a reply of type kv_get with status 404 carries no body, but this one has 2 bytes");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_OPLOG_PRUNE, SHOAL_STATUS_UNAVAILABLE, &junk,
                          "a reply of type oplog_prune with status 503 carries no body");
}

static void
test_decode_refuses_reply_missing_body_field(void)
{
    wire_t payload = { .size = 0 };
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_STATUS, SHOAL_STATUS_OK, &payload,
                          "envelope: status_reply body: node_id is empty");
    s_wire_status_reply(&payload, NULL);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_STATUS, SHOAL_STATUS_OK, &payload, "status_reply body: node_id is empty");
    s_wire_status_reply(&payload, "");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_STATUS, SHOAL_STATUS_OK, &payload, "status_reply body: node_id is empty");
}

static void
test_decode_refuses_bad_bodies(void)
{
    //  Hashes can only be of the wrong length on the wire; the error names
    //  the element.
    wire_t item, payload = { .size = 0 };
    for (int i = 0; i < 4; i++) {
        s_wire_kv_item(&item, TEST_NODE, i == 3 ? 5 : SHOAL_HASH_SIZE);
        s_wire_message(&payload, KV_ITEMS_ITEMS, &item);
    }
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, &payload,
                          "envelope: kv_items body: items[3]: hash is 5 bytes, not 32");
    s_wire_kv_item(&item, TEST_NODE, 0);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_GET, SHOAL_STATUS_OK, &item,
                          "envelope: kv_item body: hash is 0 bytes, not 32");
    wire_t head = { .size = 0 };
    uint8_t long_hash[SHOAL_HASH_SIZE + 1] = { 0 };
    s_wire_text(&head, HEAD_DATASET, TEST_DATASET);
    s_wire_text(&head, HEAD_NODE, TEST_NODE);
    s_wire_bytes(&head, HEAD_HASH, long_hash, sizeof long_hash);
    payload.size = 0;
    s_wire_message(&payload, HEADS_HEADS, &head);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_OPLOG_HEADS, SHOAL_STATUS_OK, &payload,
                          "envelope: heads body: heads[0]: hash is 33 bytes, not 32");

    //  The rules the C struct is checked against on encode hold on decode.
    payload.size = 0;
    s_wire_kv_item(&item, TEST_NODE, SHOAL_HASH_SIZE);
    s_wire_message(&payload, KV_ITEMS_ITEMS, &item);
    s_wire_kv_item(&item, "", SHOAL_HASH_SIZE);
    s_wire_message(&payload, KV_ITEMS_ITEMS, &item);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, &payload,
                          "envelope: kv_items body: items[1]: node is empty");
    s_wire_kv_item(&item, TEST_NODE, SHOAL_HASH_SIZE);
    s_wire_number(&item, KV_ITEM_DELETED, 1);
    s_wire_text(&item, KV_ITEM_VALUE, "old");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_DEL, SHOAL_STATUS_OK, &item,
                          "envelope: kv_item body: a tombstone holds a 3-byte value");

    wire_t nothing = { .size = 0 };
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_PUT, 0, &nothing, "envelope: kv_put body: dataset is empty");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_OPLOG_PRUNE, 0, &nothing, "envelope: prune body: before_ms is 0");

    char *long_key = s_repeat('k', 2000);
    payload.size = 0;
    s_wire_text(&payload, KV_PUT_DATASET, TEST_DATASET);
    s_wire_text(&payload, KV_PUT_KEY, long_key);
    free(long_key);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_PUT, 0, &payload, "envelope: kv_put body: key of 2000 bytes exceeds 1024");

    payload.size = 0;
    s_wire_text(&payload, KV_SCAN_DATASET, TEST_DATASET);
    s_wire_number(&payload, KV_SCAN_LIMIT, SHOAL_SCAN_LIMIT_MAX + 1);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_SCAN, 0, &payload, "envelope: kv_scan body: limit 10001 exceeds 10000");

    wire_t stats = { .size = 0 };
    payload.size = 0;
    s_wire_text(&stats, DATASET_STATS_DATASET, TEST_DATASET);
    s_wire_message(&payload, OPLOG_STATS_DATASETS, &stats);
    stats.size = 0;
    s_wire_number(&stats, DATASET_STATS_ENTRIES, 1);
    s_wire_message(&payload, OPLOG_STATS_DATASETS, &stats);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_OPLOG_STATS, SHOAL_STATUS_OK, &payload,
                          "envelope: oplog_stats body: datasets[1]: dataset is empty");

    //  A payload that is not the body's message at all.
    wire_t junk = { .size = 0 };
    s_wire_append(&junk, "\xff", 1);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_PUT, 0, &junk, "envelope: kv_put body: 1 bytes are not a protobuf KvPut");
}

//  Counters: a tenant is org/project or empty, in the request and in each
//  scope, checked both ways; every number comes back as it went.
static void
test_counters_bodies(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_COUNTERS, 9);
    shoal_msg_counters_request_t *asked = shoal_envelope_new_body(request);
    CHECK(asked);
    asked->tenant = shoal_strdup("acme/web");
    char error[ERROR_MAX] = "";
    shoal_envelope_t *received = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(received, "%s", error);
    CHECK_STR(((shoal_msg_counters_request_t *) received->body)->tenant, "acme/web");
    free(asked->tenant);
    asked->tenant = shoal_strdup("acme");
    CHECK_ENCODE_REFUSED(request, "counters_request body: tenant 'acme' is not org/project");
    free(asked->tenant);
    asked->tenant = shoal_strdup("");
    CHECK(s_reencodes(request, error, sizeof error));
    shoal_envelope_destroy(&request);

    shoal_envelope_t *reply = shoal_envelope_reply(received, SHOAL_STATUS_OK, "%s", "OK");
    shoal_envelope_destroy(&received);
    shoal_msg_counters_t *counters = shoal_envelope_new_body(reply);
    CHECK(counters);
    counters->scopes = calloc(2, sizeof *counters->scopes);
    counters->count = 2;
    counters->more = true;
    counters->scopes[0].tenant = shoal_strdup("");
    counters->scopes[0].used = (shoal_counter_record_t) { 3, 2, UINT64_MAX };
    counters->scopes[0].reserved = (shoal_counter_record_t) { 1, 1, 4096 };
    counters->scopes[1].tenant = shoal_strdup("acme/web");
    counters->scopes[1].used = (shoal_counter_record_t) { 2, 1, 1024 };
    shoal_envelope_t *answer = shoal_round_trip(reply, error, sizeof error);
    CHECK_MSG(answer, "%s", error);
    const shoal_msg_counters_t *got = answer->body;
    CHECK_INT(got->count, 2);
    CHECK(got->more);
    CHECK_STR(got->scopes[0].tenant, "");
    CHECK(got->scopes[0].used.memory_bytes == UINT64_MAX);
    CHECK_INT(got->scopes[0].used.claims, 3);
    CHECK_INT(got->scopes[0].used.running, 2);
    CHECK_INT(got->scopes[0].reserved.claims, 1);
    CHECK_INT(got->scopes[0].reserved.running, 1);
    CHECK_INT(got->scopes[0].reserved.memory_bytes, 4096);
    CHECK_STR(got->scopes[1].tenant, "acme/web");
    CHECK_INT(got->scopes[1].used.memory_bytes, 1024);
    CHECK_INT(got->scopes[1].reserved.claims, 0);
    shoal_envelope_destroy(&answer);
    free(counters->scopes[1].tenant);
    counters->scopes[1].tenant = shoal_strdup("web");
    CHECK_ENCODE_REFUSED(reply, "counters body: scopes[1]: tenant 'web' is not org/project");
    shoal_envelope_destroy(&reply);

    wire_t payload = { .size = 0 };
    s_wire_text(&payload, 1, "no-slash");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_COUNTERS, 0, &payload,
                          "envelope: counters_request body: tenant 'no-slash' is not org/project");
}

static void
test_decode_refuses_bad_status(void)
{
    uint64_t bad[] = { 1, 42, 99, 600, 1000, UINT32_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wire_t wire = { .size = 0 };
        s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_ERROR, bad[i]);
        char words[ERROR_MAX];
        snprintf(words, sizeof words, "status %" PRIu64 " is neither 0 (a request) nor a code from 100 to 599",
                 bad[i]);
        CHECK_REFUSED(&wire, words);
    }
    //  The edges of the range are codes.
    uint64_t good[] = { 100, 599 };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        wire_t wire = { .size = 0 };
        s_wire_head(&wire, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_ERROR, good[i]);
        char error[ERROR_MAX] = "";
        shoal_envelope_t *envelope = s_decode_wire(&wire, error, sizeof error);
        bool accepted = envelope != NULL;
        shoal_envelope_destroy(&envelope);
        CHECK_MSG(accepted, "status %" PRIu64 ": %s", good[i], error);
    }
}

static void
test_encode_refuses_invalid_envelopes(void)
{
    shoal_envelope_t *reply = s_full_status_reply();
    char error[ERROR_MAX] = "";
    CHECK_MSG(s_reencodes(reply, error, sizeof error), "%s", error);

    reply->version = 7;
    CHECK_ENCODE_REFUSED(reply, "envelope: version 7 is not spoken here (this node speaks 1)");
    reply->version = SHOAL_PROTOCOL_VERSION;

    reply->type = (shoal_msg_type_t) 99;
    CHECK_ENCODE_REFUSED(reply, "envelope: type 99 is unknown");
    reply->type = (shoal_msg_type_t) 0;
    CHECK_ENCODE_REFUSED(reply, "type 0 is unknown");
    reply->type = SHOAL_MSG_ERROR;
    CHECK_ENCODE_REFUSED(reply,
                         "a reply of type error with status 200 carries no body, but this one has a status_reply body");
    reply->type = SHOAL_MSG_STATUS;

    reply->status = 42;
    CHECK_ENCODE_REFUSED(reply, "status 42 is neither 0 (a request) nor a code from 100 to 599");
    reply->status = 0;
    CHECK_ENCODE_REFUSED(reply, "a request of type status carries no body, but this one has a status_reply body");
    reply->status = SHOAL_STATUS_UNAVAILABLE;
    CHECK_ENCODE_REFUSED(reply, "a reply of type status with status 503 carries no body");
    reply->status = SHOAL_STATUS_OK;

    shoal_msg_status_reply_t *body = reply->body;
    char *node_id = body->node_id;
    body->node_id = NULL;
    CHECK_ENCODE_REFUSED(reply, "envelope: status_reply body: node_id is empty");
    body->node_id = "";
    CHECK_ENCODE_REFUSED(reply, "status_reply body: node_id is empty");
    body->node_id = node_id;

    //  Nothing was left changed: the envelope still encodes.
    CHECK_MSG(s_reencodes(reply, error, sizeof error), "%s", error);
    reply->status = SHOAL_STATUS_INTERNAL;
    shoal_envelope_new_body(reply);
    reply->status = SHOAL_STATUS_OK;
    CHECK_ENCODE_REFUSED(reply,
                         "a reply of type status with status 200 needs a status_reply body, but this one has none");
    shoal_envelope_destroy(&reply);
}

static void
test_encode_refuses_missing_or_foreign_body(void)
{
    //  Every message that needs a body is refused without one.
    for (size_t i = 0; i < BODIES_COUNT; i++)
        for (size_t j = 0; j < STATUS_COUNT; j++) {
            uint32_t status = s_statuses[j];
            const char *needed = status == 0 ? s_bodies[i].request
                               : status == SHOAL_STATUS_OK ? s_bodies[i].reply : NULL;
            if (!needed)
                continue;
            shoal_envelope_t *bare = shoal_envelope_new(s_bodies[i].type, 1);
            bare->status = status;
            char words[ERROR_MAX];
            snprintf(words, sizeof words, "needs a %s body, but this one has none", needed);
            CHECK_ENCODE_REFUSED(bare, words);
            shoal_envelope_destroy(&bare);
        }

    //  A body made for one type or direction is another struct than the one
    //  the envelope's type or direction calls for once they change.
    shoal_envelope_t *envelope = s_message(SHOAL_MSG_KV_GET, 0, FILL_FULL);
    envelope->type = SHOAL_MSG_KV_PUT;
    CHECK_ENCODE_REFUSED(envelope,
                         "envelope: a request of type kv_put needs a kv_put body, but this one has a kv_key body");
    envelope->type = SHOAL_MSG_KV_DEL;
    char error[ERROR_MAX] = "";
    CHECK_MSG(s_reencodes(envelope, error, sizeof error), "kv_get and kv_del requests share a body: %s", error);
    envelope->status = SHOAL_STATUS_OK;
    CHECK_ENCODE_REFUSED(envelope,
                         "a reply of type kv_del with status 200 needs a kv_item body, but this one has a kv_key body");
    envelope->status = SHOAL_STATUS_NOT_FOUND;
    CHECK_ENCODE_REFUSED(envelope,
                         "a reply of type kv_del with status 404 carries no body, but this one has a kv_key body");
    shoal_envelope_destroy(&envelope);
}

static void
test_encode_refuses_bad_bodies(void)
{
    //  Each rule of each body, broken one at a time and put right again, so
    //  that each refusal is caused by that rule alone.
    char *too_long_dataset = s_repeat('d', SHOAL_DATASET_MAX + 1);
    char *too_long_key = s_repeat('k', SHOAL_KV_KEY_MAX + 1);
    char *long_key = s_repeat('k', 2000);
    char *saved;

    shoal_envelope_t *put = s_message(SHOAL_MSG_KV_PUT, 0, FILL_FULL);
    shoal_msg_kv_put_t *put_body = put->body;
    saved = put_body->dataset;
    put_body->dataset = NULL;
    CHECK_ENCODE_REFUSED(put, "envelope: kv_put body: dataset is empty");
    put_body->dataset = too_long_dataset;
    CHECK_ENCODE_REFUSED(put, "envelope: kv_put body: dataset of 257 bytes exceeds 256");
    put_body->dataset = saved;
    saved = put_body->key;
    put_body->key = "";
    CHECK_ENCODE_REFUSED(put, "envelope: kv_put body: key is empty");
    put_body->key = long_key;
    CHECK_ENCODE_REFUSED(put, "envelope: kv_put body: key of 2000 bytes exceeds 1024");
    put_body->key = saved;
    uint8_t *value = put_body->value;
    put_body->value = NULL;
    CHECK_ENCODE_REFUSED(put, "envelope: kv_put body: value is NULL but its size is 5");
    put_body->value = value;
    shoal_envelope_destroy(&put);

    shoal_envelope_t *get = s_message(SHOAL_MSG_KV_GET, 0, FILL_FULL);
    shoal_msg_kv_key_t *key_body = get->body;
    saved = key_body->key;
    key_body->key = too_long_key;
    CHECK_ENCODE_REFUSED(get, "envelope: kv_key body: key of 1025 bytes exceeds 1024");
    key_body->key = NULL;
    CHECK_ENCODE_REFUSED(get, "envelope: kv_key body: key is empty");
    key_body->key = saved;
    shoal_envelope_destroy(&get);

    shoal_envelope_t *item = s_message(SHOAL_MSG_KV_GET, SHOAL_STATUS_OK, FILL_FULL);
    shoal_msg_kv_item_t *item_body = item->body;
    saved = item_body->node;
    item_body->node = "";
    CHECK_ENCODE_REFUSED(item, "envelope: kv_item body: node is empty");
    item_body->node = saved;
    item_body->deleted = true;
    CHECK_ENCODE_REFUSED(item, "envelope: kv_item body: a tombstone holds a 5-byte value");
    item_body->deleted = false;
    shoal_envelope_destroy(&item);

    shoal_envelope_t *scan = s_message(SHOAL_MSG_KV_SCAN, 0, FILL_FULL);
    shoal_msg_kv_scan_t *scan_body = scan->body;
    saved = scan_body->dataset;
    scan_body->dataset = "";
    CHECK_ENCODE_REFUSED(scan, "envelope: kv_scan body: dataset is empty");
    scan_body->dataset = saved;
    saved = scan_body->prefix;
    scan_body->prefix = too_long_key;
    CHECK_ENCODE_REFUSED(scan, "envelope: kv_scan body: prefix of 1025 bytes exceeds 1024");
    scan_body->prefix = saved;
    saved = scan_body->start_after;
    scan_body->start_after = too_long_key;
    CHECK_ENCODE_REFUSED(scan, "envelope: kv_scan body: start_after of 1025 bytes exceeds 1024");
    scan_body->start_after = saved;
    scan_body->limit = SHOAL_SCAN_LIMIT_MAX + 1;
    CHECK_ENCODE_REFUSED(scan, "envelope: kv_scan body: limit 10001 exceeds 10000");
    scan_body->limit = 0;
    char error[ERROR_MAX] = "";
    CHECK_MSG(s_reencodes(scan, error, sizeof error), "a scan of limit 0 (the default): %s", error);
    shoal_envelope_destroy(&scan);

    shoal_envelope_t *page = s_message(SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, FILL_FULL);
    shoal_msg_kv_items_t *page_body = page->body;
    saved = page_body->items[1].node;
    page_body->items[1].node = "";
    CHECK_ENCODE_REFUSED(page, "envelope: kv_items body: items[1]: node is empty");
    page_body->items[1].node = saved;
    saved = page_body->items[2].key;
    page_body->items[2].key = NULL;
    CHECK_ENCODE_REFUSED(page, "envelope: kv_items body: items[2]: key is empty");
    page_body->items[2].key = saved;
    shoal_msg_kv_item_t *items = page_body->items;
    page_body->items = NULL;
    CHECK_ENCODE_REFUSED(page, "envelope: kv_items body: items is NULL but its count is 3");
    page_body->items = zmalloc((SHOAL_SCAN_LIMIT_MAX + 1) * sizeof *items);
    page_body->count = SHOAL_SCAN_LIMIT_MAX + 1;
    CHECK_ENCODE_REFUSED(page, "envelope: kv_items body: 10001 items exceed 10000");
    free(page_body->items);
    page_body->items = items;
    page_body->count = TEST_ARRAY_COUNT;
    shoal_envelope_destroy(&page);

    //  A heads request may name no dataset (all of them), but not an oversize one.
    shoal_envelope_t *heads_request = s_message(SHOAL_MSG_OPLOG_HEADS, 0, FILL_FULL);
    shoal_msg_dataset_t *dataset_body = heads_request->body;
    saved = dataset_body->dataset;
    dataset_body->dataset = s_repeat('d', SHOAL_DATASET_MAX + 1);
    CHECK_ENCODE_REFUSED(heads_request, "envelope: dataset_or_all body: dataset of 257 bytes");
    free(dataset_body->dataset);
    dataset_body->dataset = saved;
    shoal_envelope_destroy(&heads_request);

    shoal_envelope_t *heads = s_message(SHOAL_MSG_OPLOG_HEADS, SHOAL_STATUS_OK, FILL_FULL);
    shoal_msg_heads_t *heads_body = heads->body;
    saved = heads_body->heads[2].node;
    heads_body->heads[2].node = NULL;
    CHECK_ENCODE_REFUSED(heads, "envelope: heads body: heads[2]: node is empty");
    heads_body->heads[2].node = saved;
    saved = heads_body->heads[0].dataset;
    heads_body->heads[0].dataset = too_long_dataset;
    CHECK_ENCODE_REFUSED(heads, "envelope: heads body: heads[0]: dataset of 257 bytes exceeds 256");
    heads_body->heads[0].dataset = saved;
    shoal_envelope_destroy(&heads);

    shoal_envelope_t *stats_request = s_message(SHOAL_MSG_OPLOG_STATS, 0, FILL_FULL);
    dataset_body = stats_request->body;
    saved = dataset_body->dataset;
    dataset_body->dataset = too_long_dataset;
    CHECK_ENCODE_REFUSED(stats_request, "envelope: dataset_or_all body: dataset of 257 bytes exceeds 256");
    dataset_body->dataset = saved;
    shoal_envelope_destroy(&stats_request);

    shoal_envelope_t *stats = s_message(SHOAL_MSG_OPLOG_STATS, SHOAL_STATUS_OK, FILL_FULL);
    shoal_msg_oplog_stats_t *stats_body = stats->body;
    saved = stats_body->datasets[1].dataset;
    stats_body->datasets[1].dataset = "";
    CHECK_ENCODE_REFUSED(stats, "envelope: oplog_stats body: datasets[1]: dataset is empty");
    stats_body->datasets[1].dataset = saved;
    shoal_envelope_destroy(&stats);

    shoal_envelope_t *prune = s_message(SHOAL_MSG_OPLOG_PRUNE, 0, FILL_FULL);
    shoal_msg_prune_t *prune_body = prune->body;
    prune_body->before_ms = 0;
    CHECK_ENCODE_REFUSED(prune, "envelope: prune body: before_ms is 0");
    prune_body->before_ms = TEST_WALL_MS;
    saved = prune_body->dataset;
    prune_body->dataset = too_long_dataset;
    CHECK_ENCODE_REFUSED(prune, "envelope: prune body: dataset of 257 bytes exceeds 256");
    prune_body->dataset = saved;
    shoal_envelope_destroy(&prune);

    free(too_long_dataset);
    free(too_long_key);
    free(long_key);
}

static void
test_encode_refuses_oversize_envelope(void)
{
    //  A message just under the limit fits; one of the limit's whole size,
    //  with the other fields around it, does not.
    size_t fits = SHOAL_ENVELOPE_MAX / 2;
    char *text = malloc(SHOAL_ENVELOPE_MAX + 1);
    CHECK(text);
    memset(text, 'x', SHOAL_ENVELOPE_MAX);
    text[fits] = '\0';
    shoal_envelope_t *reply = shoal_envelope_reply(NULL, SHOAL_STATUS_BAD_REQUEST, "%s", text);
    char error[ERROR_MAX] = "";
    bool reencodes = s_reencodes(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    text[fits] = 'x';
    text[SHOAL_ENVELOPE_MAX] = '\0';
    reply = shoal_envelope_reply(NULL, SHOAL_STATUS_BAD_REQUEST, "%s", text);
    CHECK_MSG(reencodes, "%s", error);
    CHECK_ENCODE_REFUSED(reply, "exceeds the 1048576-byte limit");
    shoal_envelope_destroy(&reply);

    //  The same holds for a body: a value of the limit's size does not fit.
    shoal_envelope_t *put = s_message(SHOAL_MSG_KV_PUT, 0, FILL_FULL);
    shoal_msg_kv_put_t *body = put->body;
    free(body->value);
    body->value = (uint8_t *) text;
    body->value_size = SHOAL_ENVELOPE_MAX;
    CHECK_ENCODE_REFUSED(put, "exceeds the 1032192-byte value limit");
    shoal_envelope_destroy(&put);
}

//  A bulk page carries each entry as stored bytes: they come back byte for
//  byte, with the page's flags and last stamp; an empty entry is refused
//  both ways. Its request is a pull's.
//  A kv record is packed by hand: its bytes are protobuf's, fields in
//  number order and each left out while it holds its default, and they
//  decode to the record again.
static void
test_kv_record_bytes(void)
{
    uint8_t value[300];
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = (uint8_t) (i * 7);
    shoal_kv_record_t live = { .value = value, .value_size = sizeof value, .wall_ms = TEST_WALL_MS,
                               .logic = 300, .node = TEST_NODE, .epoch = UINT64_MAX };
    memset(live.hash, 0xA5, sizeof live.hash);
    shoal_kv_record_t tombstone = { .deleted = true, .wall_ms = 1, .node = TEST_NODE };
    memset(tombstone.hash, 0x00, sizeof tombstone.hash);
    wire_t expected[2] = { { .size = 0 }, { .size = 0 } };
    s_wire_bytes(&expected[0], 1, value, sizeof value);
    s_wire_number(&expected[0], 3, TEST_WALL_MS);
    s_wire_number(&expected[0], 4, 300);
    s_wire_text(&expected[0], 5, TEST_NODE);
    s_wire_bytes(&expected[0], 6, live.hash, SHOAL_HASH_SIZE);
    s_wire_number(&expected[0], 7, UINT64_MAX);
    s_wire_number(&expected[1], 2, 1);
    s_wire_number(&expected[1], 3, 1);
    s_wire_text(&expected[1], 5, TEST_NODE);
    s_wire_bytes(&expected[1], 6, tombstone.hash, SHOAL_HASH_SIZE);
    const shoal_kv_record_t *records[2] = { &live, &tombstone };
    for (size_t r = 0; r < 2; r++) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        char error[ERROR_MAX] = "";
        CHECK_MSG(shoal_kv_codec.encode(records[r], &bytes, &size, error, sizeof error) == 0, "%s", error);
        CHECK_MSG(bytes && size == expected[r].size && memcmp(bytes, expected[r].data, size) == 0,
                  "record %zu packs to %zu bytes, not the %zu protobuf lays out", r, size, expected[r].size);
        shoal_kv_record_t decoded;
        CHECK_MSG(bytes && shoal_kv_codec.decode(bytes, size, &decoded, error, sizeof error) == 0, "%s", error);
        if (bytes) {
            CHECK(decoded.deleted == records[r]->deleted && decoded.value_size == records[r]->value_size
               && decoded.wall_ms == records[r]->wall_ms && decoded.logic == records[r]->logic
               && decoded.epoch == records[r]->epoch && streq(decoded.node, TEST_NODE)
               && memcmp(decoded.hash, records[r]->hash, SHOAL_HASH_SIZE) == 0
               && (decoded.value_size == 0 || memcmp(decoded.value, value, sizeof value) == 0));
            shoal_kv_codec.clear(&decoded);
        }
        free(bytes);
    }
}

//  A bulk page is coded by hand, not by protobuf-c: it packs to protobuf's
//  bytes, and it reads what protobuf-c reads (fields in any order, a scalar given twice taking its
//  last value, unknown fields of every wire type skipped) and refuses what
//  it refuses (a known field of another wire type, a group, a length past
//  the end, a field numbered 0).
static void
test_sync_bulk_page_by_hand(void)
{
    wire_t body = { .size = 0 };
    s_wire_number(&body, 5, 3);
    s_wire_bytes(&body, 1, "one", 3);
    s_wire_number(&body, 2, 1);
    s_wire_number(&body, 40, UINT64_MAX);
    s_wire_bytes(&body, 41, "unknown", 7);
    s_wire_varint(&body, 42 << WIRE_TYPE_BITS | 1);
    s_wire_append(&body, "12345678", 8);
    s_wire_varint(&body, 43 << WIRE_TYPE_BITS | 5);
    s_wire_append(&body, "1234", 4);
    s_wire_bytes(&body, 1, "\x00two", 4);
    s_wire_number(&body, 4, TEST_WALL_MS);
    s_wire_number(&body, 5, 7);
    s_wire_number(&body, 3, 0);
    wire_t envelope;
    s_wire_envelope(&envelope, SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body);
    char error[ERROR_MAX] = "";
    shoal_envelope_t *decoded = s_decode_wire(&envelope, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    const shoal_msg_bulk_t *page = decoded ? decoded->body : NULL;
    CHECK(page && page->count == 2 && page->sizes[0] == 3 && page->sizes[1] == 4
       && memcmp(page->bytes, "one\x00two", 7) == 0);
    CHECK(page && page->more && !page->pruned && page->last_wall_ms == TEST_WALL_MS
       && page->last_logic == 7);
    shoal_envelope_destroy(&decoded);

    //  Packed, a page is the entries in order, then the other fields in
    //  number order, each left out while it holds its default.
    shoal_msg_bulk_t packed = { .count = 2, .bytes = (uint8_t *) "one\x00two",
                                .sizes = (size_t[]) { 3, 4 }, .more = true, .last_logic = 7 };
    wire_t expected = { .size = 0 };
    s_wire_bytes(&expected, 1, "one", 3);
    s_wire_bytes(&expected, 1, "\x00two", 4);
    s_wire_number(&expected, 2, 1);
    s_wire_number(&expected, 5, 7);
    uint8_t *bytes = NULL;
    size_t size = 0;
    CHECK_MSG(shoal_msg_bulk_codec.encode(&packed, &bytes, &size, error, sizeof error) == 0, "%s", error);
    CHECK_MSG(bytes && size == expected.size && memcmp(bytes, expected.data, size) == 0,
              "a page packs to %zu bytes, not the %zu protobuf lays out", size, expected.size);
    free(bytes);

    body.size = 0;
    s_wire_number(&body, 1, 5);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "field 1 has wire type 0");
    body.size = 0;
    s_wire_bytes(&body, 2, "x", 1);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "field 2 has wire type 2");
    body.size = 0;
    s_wire_bytes(&body, 1, "entry", 5);
    body.size--;
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "field 1 is cut");
    body.size = 0;
    s_wire_varint(&body, 44 << WIRE_TYPE_BITS | 3);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "field 44 is cut or of wire type 3");
    body.size = 0;
    s_wire_number(&body, 0, 1);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "a bad tag");
}

static void
test_sync_bulk_page(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_SYNC_BULK, 3);
    shoal_msg_pull_t *pull = shoal_envelope_new_body(request);
    pull->dataset = shoal_strdup(TEST_DATASET);
    pull->node = shoal_strdup(TEST_NODE);
    pull->after_wall_ms = TEST_WALL_MS;
    pull->after_logic = 4;
    char error[ERROR_MAX] = "";
    shoal_envelope_t *decoded = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    const shoal_msg_pull_t *asked = decoded ? decoded->body : NULL;
    CHECK(asked && streq(asked->node, TEST_NODE) && asked->after_wall_ms == TEST_WALL_MS
       && asked->after_logic == 4 && !asked->from_start);
    shoal_envelope_destroy(&decoded);

    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    shoal_msg_bulk_t *page = shoal_envelope_new_body(reply);
    const char *blobs[] = { "\x0a\x03app", "\x00\x01\x02 binary \xff", "z" };
    page->count = 3;
    page->bytes = zmalloc(64);
    page->sizes = zmalloc(3 * sizeof *page->sizes);
    size_t offset = 0;
    for (size_t i = 0; i < 3; i++) {
        size_t size = i == 1 ? 12 : strlen(blobs[i]);
        memcpy(page->bytes + offset, blobs[i], size);
        page->sizes[i] = size;
        offset += size;
    }
    page->more = true;
    page->last_wall_ms = TEST_WALL_MS;
    page->last_logic = 9;
    decoded = shoal_round_trip(reply, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    const shoal_msg_bulk_t *got = decoded ? decoded->body : NULL;
    CHECK(got && got->count == 3 && got->more && !got->pruned && got->last_wall_ms == TEST_WALL_MS
       && got->last_logic == 9);
    CHECK(got && memcmp(got->sizes, page->sizes, 3 * sizeof *page->sizes) == 0
       && memcmp(got->bytes, page->bytes, offset) == 0);
    shoal_envelope_destroy(&decoded);

    page->sizes[2] = 0;
    CHECK_ENCODE_REFUSED(reply, "entries[2] is empty");
    //  Written by hand: a page whose second entry is empty.
    wire_t body = { .size = 0 };
    s_wire_bytes(&body, 1, "x", 1);
    s_wire_bytes(&body, 1, "", 0);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_SYNC_BULK, SHOAL_STATUS_OK, &body, "entries[1] is empty");
    shoal_envelope_destroy(&reply);
    shoal_envelope_destroy(&request);
}

//  Text fields are checked on the wire before protobuf-c reads them: a NUL
//  inside would be cut silently, and text that is not UTF-8 would travel on
//  to logs and JSON. Each is refused naming the field, nested ones too; an
//  empty body (no buffer at all) is no text to check.
static void
test_wire_text_is_checked(void)
{
    wire_t put = { .size = 0 };
    s_wire_bytes(&put, KV_PUT_DATASET, "nulds\0evil", 10);
    s_wire_text(&put, KV_PUT_KEY, "k");
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_PUT, 0, &put, "dataset holds a NUL byte");

    const char *not_utf8[] = { "k\xff", "k\xc0\x80", "k\xed\xa0\x80", "k\xf4\x90\x80\x80", "k\xe2\x82" };
    for (size_t i = 0; i < sizeof not_utf8 / sizeof not_utf8[0]; i++) {
        put.size = 0;
        s_wire_text(&put, KV_PUT_DATASET, "app");
        s_wire_text(&put, KV_PUT_KEY, not_utf8[i]);
        CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_PUT, 0, &put, "key is not valid UTF-8");
    }
    //  Valid multi-byte text is a key like any other.
    put.size = 0;
    s_wire_text(&put, KV_PUT_DATASET, "app");
    s_wire_text(&put, KV_PUT_KEY, "cl\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x90\x9f");
    wire_t envelope;
    s_wire_envelope(&envelope, SHOAL_MSG_KV_PUT, 0, &put);
    char error[ERROR_MAX] = "";
    shoal_envelope_t *decoded = s_decode_wire(&envelope, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    shoal_envelope_destroy(&decoded);

    //  A NUL in an item of a reply's list names the list too.
    wire_t item = { .size = 0 };
    s_wire_text(&item, KV_ITEM_DATASET, "app");
    s_wire_bytes(&item, KV_ITEM_KEY, "a\0b", 3);
    wire_t items = { .size = 0 };
    s_wire_message(&items, KV_ITEMS_ITEMS, &item);
    CHECK_PAYLOAD_REFUSED(SHOAL_MSG_KV_SCAN, SHOAL_STATUS_OK, &items, "items.key holds a NUL byte");

    //  The envelope's own message.
    envelope.size = 0;
    s_wire_head(&envelope, SHOAL_PROTOCOL_VERSION, SHOAL_MSG_STATUS, SHOAL_STATUS_NOT_FOUND);
    s_wire_bytes(&envelope, ENVELOPE_MESSAGE, "gone\0", 5);
    CHECK_REFUSED(&envelope, "message holds a NUL byte");

    //  No bytes at all: the body's defaults, checked as such.
    shoal_msg_kv_put_t body;
    char detail[ERROR_MAX] = "";
    CHECK(shoal_msg_kv_put_codec.decode(NULL, 0, &body, detail, sizeof detail) == -1);
    CHECK_MSG(shoal_test_contains(detail, "dataset is empty"), "%s", detail);
}

//  A reply's message is made valid UTF-8 when it is made, so that a message
//  quoting a client's bytes, or cut inside a character, never makes the
//  reply itself undecodable.
static void
test_reply_message_is_utf8(void)
{
    shoal_envelope_t *reply = shoal_envelope_reply(NULL, SHOAL_STATUS_BAD_REQUEST, "no key '%s', cut \xe2\x82",
                                                   "k\xff\xc3\xa9");
    CHECK(streq(reply->message, "no key 'k?\xc3\xa9', cut ??"));
    char error[ERROR_MAX] = "";
    bool reencodes = s_reencodes(reply, error, sizeof error);
    shoal_envelope_destroy(&reply);
    CHECK_MSG(reencodes, "%s", error);
}

//  The largest value fits, one byte more is refused naming the limit; both
//  follow from the frame limit.
static void
test_value_limit(void)
{
    CHECK(SHOAL_KV_VALUE_MAX < SHOAL_ENVELOPE_MAX);
    shoal_envelope_t *put = shoal_envelope_new(SHOAL_MSG_KV_PUT, 1);
    shoal_msg_kv_put_t *body = shoal_envelope_new_body(put);
    body->dataset = s_repeat('d', SHOAL_DATASET_MAX);
    body->key = s_repeat('k', SHOAL_KV_KEY_MAX);
    body->value = zmalloc(SHOAL_KV_VALUE_MAX + 1);
    body->value_size = SHOAL_KV_VALUE_MAX;
    char error[ERROR_MAX] = "";
    bool fits = s_reencodes(put, error, sizeof error);
    CHECK_MSG(fits, "%s", error);
    body->value_size = SHOAL_KV_VALUE_MAX + 1;
    CHECK_ENCODE_REFUSED(put, "exceeds the 1032192-byte value limit");
    shoal_envelope_destroy(&put);
}

//  The name rules, case by case.
static void
test_name_rules(void)
{
    CHECK(shoal_dataset_valid("app"));
    CHECK(shoal_dataset_valid("acme/web/config"));
    CHECK(shoal_dataset_valid("a.b_c-d/e"));
    CHECK(!shoal_dataset_valid(""));
    CHECK(!shoal_dataset_valid("bad name"));
    CHECK(!shoal_dataset_valid("acme//web"));
    CHECK(!shoal_dataset_valid("acme/web/"));
    CHECK(!shoal_dataset_valid("/acme"));
    CHECK(!shoal_dataset_valid("acme/.hidden"));
    CHECK(!shoal_dataset_valid("caf\xc3\xa9"));
    char *longest = s_repeat('d', SHOAL_DATASET_MAX);
    longest[63] = longest[127] = longest[191] = '/';
    CHECK(shoal_dataset_valid(longest));
    free(longest);
    char *too_long = s_repeat('d', SHOAL_DATASET_MAX + 1);
    too_long[63] = too_long[127] = too_long[191] = '/';
    CHECK(!shoal_dataset_valid(too_long));
    free(too_long);

    CHECK(shoal_claim_id_valid("web-1"));
    CHECK(shoal_claim_id_valid("acme/web/db"));
    CHECK(shoal_claim_id_scoped("acme/web/db"));
    CHECK(!shoal_claim_id_scoped("web-1"));
    CHECK(!shoal_claim_id_valid("acme/web"));
    CHECK(!shoal_claim_id_valid("acme/web/db/x"));
    CHECK(!shoal_claim_id_valid("acme//db"));
    CHECK(!shoal_claim_id_valid(""));
    char *file = shoal_claim_id_file_name("acme/web/db");
    CHECK(streq(file, "acme+web+db"));
    free(file);

    CHECK(shoal_utf8_valid(NULL, 0));
    CHECK(shoal_utf8_valid("plain", 5));
    CHECK(shoal_utf8_valid("\xf0\x9f\x90\x9f", 4));
    CHECK(!shoal_utf8_valid("\xf0\x9f\x90", 3));
    CHECK(!shoal_utf8_valid("\xc1\xbf", 2));
    CHECK(!shoal_utf8_valid("\xf8\x88\x80\x80\x80", 5));
}

int
main(void)
{
    SHOAL_TEST(test_status_request_round_trip);
    SHOAL_TEST(test_wire_text_is_checked);
    SHOAL_TEST(test_reply_message_is_utf8);
    SHOAL_TEST(test_value_limit);
    SHOAL_TEST(test_name_rules);
    SHOAL_TEST(test_status_reply_round_trip);
    SHOAL_TEST(test_empty_body_strings_decode_as_empty);
    SHOAL_TEST(test_reply_echoes_the_request);
    SHOAL_TEST(test_new_body_replaces_the_previous_body);
    SHOAL_TEST(test_each_type_carries_its_body);
    SHOAL_TEST(test_names);
    SHOAL_TEST(test_sync_bulk_page);
    SHOAL_TEST(test_sync_bulk_page_by_hand);
    SHOAL_TEST(test_kv_record_bytes);
    SHOAL_TEST(test_kv_put_request_and_reply);
    SHOAL_TEST(test_every_body_round_trips);
    SHOAL_TEST(test_hand_written_envelopes_decode);
    SHOAL_TEST(test_empty_payload_decodes_as_defaults);
    SHOAL_TEST(test_decode_refuses_empty_message);
    SHOAL_TEST(test_decode_refuses_empty_frame);
    SHOAL_TEST(test_decode_refuses_oversize_frame);
    SHOAL_TEST(test_decode_accepts_a_bulk_frame_but_refuses_three);
    SHOAL_TEST(test_decode_refuses_every_truncation);
    SHOAL_TEST(test_decode_survives_random_bytes);
    SHOAL_TEST(test_decode_survives_random_payloads);
    SHOAL_TEST(test_decode_survives_damaged_envelopes);
    SHOAL_TEST(test_decode_refuses_wrong_version);
    SHOAL_TEST(test_decode_refuses_unknown_type);
    SHOAL_TEST(test_decode_refuses_payload_where_none_belongs);
    SHOAL_TEST(test_decode_refuses_reply_missing_body_field);
    SHOAL_TEST(test_decode_refuses_bad_bodies);
    SHOAL_TEST(test_counters_bodies);
    SHOAL_TEST(test_decode_refuses_bad_status);
    SHOAL_TEST(test_encode_refuses_invalid_envelopes);
    SHOAL_TEST(test_encode_refuses_missing_or_foreign_body);
    SHOAL_TEST(test_encode_refuses_bad_bodies);
    SHOAL_TEST(test_encode_refuses_oversize_envelope);
    return shoal_test_finish();
}
