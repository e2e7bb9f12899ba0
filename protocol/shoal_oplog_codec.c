/*  shoal_oplog_codec: OplogEntry, KvRecord and HeadRecord codecs.

    As in shoal_record.c, one check per record runs on encode and on decode,
    so what is refused on write is exactly what is refused on read. The C
    records hold hashes in fixed arrays, so on encode a hash cannot have the
    wrong length; on decode the wire can, and that is checked. protobuf-c
    keeps an enum number it does not know (proto3 enums are open), so the op
    is checked against the enumeration here, never trusted.
*/
#include "shoal_oplog_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.pb-c.h"
#include "shoal_names.h"
#include "shoal_wire.h"
#include "shoal_alloc.h"

_Static_assert((int) SHOAL_OPLOG_PUT == (int) SHOAL__OPLOG_OP__OPLOG_PUT
            && (int) SHOAL_OPLOG_DELETE == (int) SHOAL__OPLOG_OP__OPLOG_DELETE,
               "shoal_oplog_op_t must match OplogOp in shoal.proto");

const char *
shoal_oplog_op_name(shoal_oplog_op_t op)
{
    //  Compared as int: a value read from outside may be any number.
    switch ((int) op) {
        case SHOAL_OPLOG_PUT:
            return "put";
        case SHOAL_OPLOG_DELETE:
            return "delete";
        default:
            return NULL;
    }
}

//  A new copy of SIZE bytes at DATA; never NULL (out of memory aborts).
static uint8_t *
s_bytes_dup(const uint8_t *data, size_t size)
{
    uint8_t *copy = (uint8_t *) shoal_malloc(size);
    if (size)
        memcpy(copy, data, size);
    return copy;
}

//  Packs MESSAGE (any protobuf-c message) into a new buffer.
static int
s_message_pack(const ProtobufCMessage *message, uint8_t **bytes_p, size_t *size_p,
               char *error, size_t error_size)
{
    size_t size = protobuf_c_message_get_packed_size(message);
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) {
        snprintf(error, error_size, "out of memory for %zu bytes", size);
        return -1;
    }
    protobuf_c_message_pack(message, bytes);
    *bytes_p = bytes;
    *size_p = size;
    return 0;
}

//  Checks the fields an entry must have; sizes are those of the hash fields
//  as they are (or would be) on the wire. Returns 0, or -1 with ERROR naming
//  the field.
static int
s_entry_check(const char *dataset, const char *node, int op, size_t hash_size,
              size_t prev_hash_size, char *error, size_t error_size)
{
    if (!dataset || !*dataset)
        snprintf(error, error_size, "dataset is empty");
    else
    if (!node || !*node)
        snprintf(error, error_size, "node is empty");
    else
    if (!shoal_oplog_op_name((shoal_oplog_op_t) op))
        snprintf(error, error_size, "op %d is not put or delete", op);
    else
    if (hash_size != SHOAL_HASH_SIZE)
        snprintf(error, error_size, "hash has %zu bytes, not %d", hash_size, SHOAL_HASH_SIZE);
    else
    if (prev_hash_size != 0 && prev_hash_size != SHOAL_HASH_SIZE)
        snprintf(error, error_size, "prev_hash has %zu bytes, not 0 or %d",
                 prev_hash_size, SHOAL_HASH_SIZE);
    else
        return 0;
    return -1;
}

//  Points MESSAGE (initialised) at RECORD's fields.
static void
s_entry_to_message(const shoal_oplog_entry_t *record, Shoal__OplogEntry *message_out)
{
    Shoal__OplogEntry message = SHOAL__OPLOG_ENTRY__INIT;
    message.dataset = record->dataset;
    if (record->key)
        message.key = record->key;
    message.op = (Shoal__OplogOp) record->op;
    message.value.data = record->value;
    message.value.len = record->value ? record->value_size : 0;
    message.wall_ms = record->wall_ms;
    message.logic = record->logic;
    message.node = record->node;
    //  protobuf-c only reads through these pointers; the casts drop the const
    //  the record was handed in with.
    if (record->has_prev) {
        message.prev_hash.data = (uint8_t *) record->prev_hash;
        message.prev_hash.len = SHOAL_HASH_SIZE;
    }
    message.hash.data = (uint8_t *) record->hash;
    message.hash.len = SHOAL_HASH_SIZE;
    *message_out = message;
}

static int
s_entry_encode(const void *record_in, uint8_t **bytes_p, size_t *size_p,
               char *error, size_t error_size)
{
    const shoal_oplog_entry_t *record = record_in;
    *bytes_p = NULL;
    *size_p = 0;
    if (s_entry_check(record->dataset, record->node, (int) record->op, SHOAL_HASH_SIZE,
                      record->has_prev ? SHOAL_HASH_SIZE : 0, error, error_size))
        return -1;
    Shoal__OplogEntry message;
    s_entry_to_message(record, &message);
    return s_message_pack(&message.base, bytes_p, size_p, error, error_size);
}

size_t
shoal_oplog_entry_size(const shoal_oplog_entry_t *entry)
{
    Shoal__OplogEntry message;
    s_entry_to_message(entry, &message);
    return shoal__oplog_entry__get_packed_size(&message);
}

static void
s_entry_clear(void *record_in)
{
    shoal_oplog_entry_t *record = record_in;
    free(record->dataset);
    free(record->key);
    free(record->value);
    free(record->node);
    memset(record, 0, sizeof *record);
}

static int
s_entry_decode(const uint8_t *bytes, size_t size, void *record_out,
               char *error, size_t error_size)
{
    shoal_oplog_entry_t *record = record_out;
    memset(record, 0, sizeof *record);
    if (shoal_wire_check(&shoal__oplog_entry__descriptor, bytes, size, error, error_size))
        return -1;
    Shoal__OplogEntry *message = shoal__oplog_entry__unpack(NULL, size, bytes);
    if (!message) {
        snprintf(error, error_size, "%zu bytes are not a protobuf OplogEntry", size);
        return -1;
    }
    int rc = s_entry_check(message->dataset, message->node, (int) message->op,
                           message->hash.len, message->prev_hash.len, error, error_size);
    if (rc == 0) {
        record->dataset = strdup(message->dataset);
        record->key = strdup(message->key);
        record->op = (shoal_oplog_op_t) message->op;
        record->value_size = message->value.len;
        record->value = message->value.len ? s_bytes_dup(message->value.data, message->value.len)
                                           : NULL;
        record->wall_ms = message->wall_ms;
        record->logic = message->logic;
        record->node = strdup(message->node);
        record->has_prev = message->prev_hash.len == SHOAL_HASH_SIZE;
        if (record->has_prev)
            memcpy(record->prev_hash, message->prev_hash.data, SHOAL_HASH_SIZE);
        memcpy(record->hash, message->hash.data, SHOAL_HASH_SIZE);
        if (!record->dataset || !record->key || !record->node
        ||  (record->value_size && !record->value)) {
            s_entry_clear(record);
            snprintf(error, error_size, "out of memory");
            rc = -1;
        }
    }
    shoal__oplog_entry__free_unpacked(message, NULL);
    return rc;
}

const shoal_codec_t shoal_oplog_entry_codec = {
    .name = "OplogEntry",
    .record_size = sizeof(shoal_oplog_entry_t),
    .encode = s_entry_encode,
    .decode = s_entry_decode,
    .clear = s_entry_clear,
};

int
shoal_oplog_entry_copy(shoal_oplog_entry_t *dest, const shoal_oplog_entry_t *source)
{
    *dest = *source;
    dest->dataset = source->dataset ? strdup(source->dataset) : NULL;
    dest->key = source->key ? strdup(source->key) : NULL;
    dest->node = source->node ? strdup(source->node) : NULL;
    dest->value = source->value ? s_bytes_dup(source->value, source->value_size) : NULL;
    if ((source->dataset && !dest->dataset) || (source->key && !dest->key)
    ||  (source->node && !dest->node) || (source->value && !dest->value)) {
        s_entry_clear(dest);
        return -1;
    }
    return 0;
}

//  Protobuf's wire format, as the scan below reads it.
#define WIRE_VARINT 0
#define WIRE_FIXED64 1
#define WIRE_LENGTH 2
#define WIRE_FIXED32 5
#define WIRE_TYPE_BITS 3
#define WIRE_TYPE_MASK 0x07
#define WIRE_VARINT_MORE 0x80
#define WIRE_VARINT_BITS 7
#define WIRE_VARINT_MAX_SHIFT 63
#define WIRE_FIXED64_SIZE 8
#define WIRE_FIXED32_SIZE 4
//  The field number's bits in a tag's first byte, and a tag's longest
//  encoding, as protobuf-c reads them.
#define WIRE_TAG_FIELD_BITS 0xF8
#define WIRE_TAG_SIZE_MAX 5
//  KvRecord's deleted field (shoal.proto).
#define KV_RECORD_DELETED 2

//  Reads a varint at *AT, below END. Returns 0, or -1 when it runs past END.
static int
s_wire_varint(const uint8_t **at, const uint8_t *end, uint64_t *value)
{
    *value = 0;
    for (unsigned shift = 0; *at < end && shift <= WIRE_VARINT_MAX_SHIFT; shift += WIRE_VARINT_BITS) {
        uint8_t byte = *(*at)++;
        *value |= (uint64_t) (byte & ~WIRE_VARINT_MORE) << shift;
        if (!(byte & WIRE_VARINT_MORE))
            return 0;
    }
    return -1;
}

//  OplogEntry's fields (shoal.proto).
#define ENTRY_DATASET 1
#define ENTRY_KEY 2
#define ENTRY_OP 3
#define ENTRY_VALUE 4
#define ENTRY_WALL_MS 5
#define ENTRY_LOGIC 6
#define ENTRY_NODE 7
#define ENTRY_PREV_HASH 8
#define ENTRY_HASH 9

//  What s_string_put refuses.
#define STRING_TOO_LONG -1
#define STRING_NOT_TEXT -2

//  Copies the SIZE bytes at DATA, terminated, to *AT in STRINGS (below
//  END) and points *TEXT at them. Returns 0, STRING_TOO_LONG when they do
//  not fit, or STRING_NOT_TEXT when they hold a NUL or are not UTF-8 (the
//  codec's decode refuses those too: shoal_wire.h).
static int
s_string_put(const uint8_t *data, size_t size, char **at, const char *end, char **text)
{
    if (size && (memchr(data, 0, size) || !shoal_utf8_valid((const char *) data, size)))
        return STRING_NOT_TEXT;
    if (size + 1 > (size_t) (end - *at))
        return STRING_TOO_LONG;
    memcpy(*at, data, size);
    (*at)[size] = 0;
    *text = *at;
    *at += size + 1;
    return 0;
}

int
shoal_oplog_entry_read(const uint8_t *bytes, size_t size, shoal_oplog_entry_t *entry,
                       char *strings, size_t strings_size, char *error, size_t error_size)
{
    memset(entry, 0, sizeof *entry);
    char *free_at = strings, *end = strings + strings_size;
    //  Absent strings read as empty, as protobuf-c gives them.
    static char empty[] = "";
    entry->dataset = entry->key = entry->node = empty;
    const uint8_t *hash = NULL, *prev = NULL;
    size_t hash_size = 0, prev_size = 0;
    uint64_t op = 0;
    //  No offset on a NULL buffer: an empty entry may come as (NULL, 0).
    const uint8_t *at = bytes, *stop = size ? bytes + size : bytes;
    bool bad = false, long_strings = false, not_text = false;
    while (at < stop && !bad) {
        uint64_t tag, value;
        //  As protobuf-c reads a tag: field 0 is none, and a tag takes five
        //  bytes at most.
        const uint8_t *tag_at = at;
        if ((*at & WIRE_TAG_FIELD_BITS) == 0 || s_wire_varint(&at, stop, &tag)
        ||  at - tag_at > WIRE_TAG_SIZE_MAX) {
            bad = true;
            break;
        }
        unsigned type = (unsigned) (tag & WIRE_TYPE_MASK);
        uint64_t field = tag >> WIRE_TYPE_BITS;
        if (type == WIRE_VARINT) {
            bad = s_wire_varint(&at, stop, &value) != 0;
            if (field == ENTRY_OP)
                op = value;
            else
            if (field == ENTRY_WALL_MS)
                entry->wall_ms = value;
            else
            if (field == ENTRY_LOGIC)
                entry->logic = (uint32_t) value;
        }
        else
        if (type == WIRE_LENGTH) {
            if (s_wire_varint(&at, stop, &value) || value > (uint64_t) (stop - at)) {
                bad = true;
                break;
            }
            const uint8_t *data = at;
            at += value;
            int rc = 0;
            if (field == ENTRY_DATASET)
                rc = s_string_put(data, value, &free_at, end, &entry->dataset);
            else
            if (field == ENTRY_KEY)
                rc = s_string_put(data, value, &free_at, end, &entry->key);
            else
            if (field == ENTRY_NODE)
                rc = s_string_put(data, value, &free_at, end, &entry->node);
            else
            if (field == ENTRY_VALUE) {
                entry->value = value ? (uint8_t *) data : NULL;
                entry->value_size = value;
            }
            else
            if (field == ENTRY_PREV_HASH) {
                prev = data;
                prev_size = value;
            }
            else
            if (field == ENTRY_HASH) {
                hash = data;
                hash_size = value;
            }
            long_strings |= rc == STRING_TOO_LONG;
            not_text |= rc == STRING_NOT_TEXT;
        }
        else
        if (type == WIRE_FIXED64 && (size_t) (stop - at) >= WIRE_FIXED64_SIZE)
            at += WIRE_FIXED64_SIZE;
        else
        if (type == WIRE_FIXED32 && (size_t) (stop - at) >= WIRE_FIXED32_SIZE)
            at += WIRE_FIXED32_SIZE;
        else
            bad = true;
        //  A known field with another wire type is no OplogEntry either.
        if (field >= ENTRY_DATASET && field <= ENTRY_HASH
        &&  type != (field == ENTRY_OP || field == ENTRY_WALL_MS || field == ENTRY_LOGIC
                     ? WIRE_VARINT : WIRE_LENGTH))
            bad = true;
    }
    if (bad) {
        snprintf(error, error_size, "%zu bytes are not a protobuf OplogEntry", size);
        return -1;
    }
    if (not_text) {
        snprintf(error, error_size, "a text field holds a NUL byte or is not valid UTF-8");
        return -1;
    }
    if (long_strings) {
        snprintf(error, error_size, "its strings are longer than %zu bytes together", strings_size);
        return -1;
    }
    //  protobuf-c keeps an enum's number as an int.
    if (s_entry_check(entry->dataset, entry->node, (int) (int32_t) op, hash_size, prev_size, error,
                      error_size))
        return -1;
    entry->op = (shoal_oplog_op_t) (int32_t) op;
    entry->has_prev = prev_size == SHOAL_HASH_SIZE;
    if (entry->has_prev)
        memcpy(entry->prev_hash, prev, SHOAL_HASH_SIZE);
    memcpy(entry->hash, hash, SHOAL_HASH_SIZE);
    return 0;
}

//  KvRecord's fields (shoal.proto) and what protobuf-c checks of each: a
//  field of another wire type than its own fails the unpack, but for the
//  bool, which protobuf-c reads from whatever bytes the field has.
#define KV_RECORD_VALUE 1
#define KV_RECORD_WALL_MS 3
#define KV_RECORD_LOGIC 4
#define KV_RECORD_NODE 5
#define KV_RECORD_HASH 6
#define KV_RECORD_EPOCH 7
//  The longest length prefix protobuf-c reads.
#define WIRE_LENGTH_SIZE_MAX 5

//  The wire type KvRecord's field FIELD must have, or -1 when any will do
//  (the bool, and fields KvRecord does not know).
static int
s_kv_wire_type(uint64_t field)
{
    switch (field) {
        case KV_RECORD_VALUE:
        case KV_RECORD_NODE:
        case KV_RECORD_HASH:
            return WIRE_LENGTH;
        case KV_RECORD_WALL_MS:
        case KV_RECORD_LOGIC:
        case KV_RECORD_EPOCH:
            return WIRE_VARINT;
        default:
            return -1;
    }
}

//  protobuf-c reads a bool as true when any byte of its field, tag aside,
//  has a bit set below the varint continuation bit: the value's bytes for a
//  varint or a fixed field, the length prefix and the bytes for a
//  length-delimited one.
static bool
s_wire_bool(const uint8_t *at, const uint8_t *end)
{
    for (; at < end; at++)
        if (*at & ~WIRE_VARINT_MORE)
            return true;
    return false;
}

int
shoal_kv_record_deleted(const uint8_t *bytes, size_t size, bool *deleted)
{
    //  Whatever protobuf-c and the codec's checks would refuse is refused
    //  here too, so that the count agrees with a full decode of every
    //  record: the last of each field is the one that counts, as in
    //  protobuf-c.
    *deleted = false;
    bool tombstone = false, node_set = false;
    size_t value_size = 0, hash_size = 0;
    const uint8_t *at = bytes, *end = size ? bytes + size : bytes;
    while (at < end) {
        uint64_t tag, value;
        const uint8_t *tag_at = at;
        if ((*at & WIRE_TAG_FIELD_BITS) == 0 || s_wire_varint(&at, end, &tag)
        ||  at - tag_at > WIRE_TAG_SIZE_MAX)
            return -1;
        uint64_t field = tag >> WIRE_TYPE_BITS;
        int type = (int) (tag & WIRE_TYPE_MASK);
        int expected = s_kv_wire_type(field);
        if (expected >= 0 && type != expected)
            return -1;
        const uint8_t *field_at = at;
        switch (type) {
            case WIRE_VARINT:
                if (s_wire_varint(&at, end, &value))
                    return -1;
                break;
            case WIRE_FIXED64:
                if ((size_t) (end - at) < WIRE_FIXED64_SIZE)
                    return -1;
                at += WIRE_FIXED64_SIZE;
                break;
            case WIRE_LENGTH:
                if (s_wire_varint(&at, end, &value) || at - field_at > WIRE_LENGTH_SIZE_MAX
                ||  value > (uint64_t) (end - at))
                    return -1;
                at += value;
                if (field == KV_RECORD_VALUE)
                    value_size = (size_t) value;
                else
                if (field == KV_RECORD_HASH)
                    hash_size = (size_t) value;
                else
                if (field == KV_RECORD_NODE) {
                    //  A text field holding a NUL or not UTF-8 is refused
                    //  before the decode unpacks it (shoal_wire.h).
                    const char *text = (const char *) (at - value);
                    if (value && (memchr(text, 0, (size_t) value) || !shoal_utf8_valid(text, (size_t) value)))
                        return -1;
                    node_set = value > 0;
                }
                break;
            case WIRE_FIXED32:
                if ((size_t) (end - at) < WIRE_FIXED32_SIZE)
                    return -1;
                at += WIRE_FIXED32_SIZE;
                break;
            default:
                return -1;
        }
        if (field == KV_RECORD_DELETED)
            tombstone = s_wire_bool(field_at, at);
    }
    //  The checks the codec makes after protobuf-c (s_kv_check).
    if (!node_set || hash_size != SHOAL_HASH_SIZE || (tombstone && value_size != 0))
        return -1;
    *deleted = tombstone;
    return 0;
}

//  Checks the fields a materialised key must have. Returns 0, or -1 with
//  ERROR naming the field.
static int
s_kv_check(const char *node, size_t hash_size, bool deleted, size_t value_size,
           char *error, size_t error_size)
{
    if (!node || !*node)
        snprintf(error, error_size, "node is empty");
    else
    if (hash_size != SHOAL_HASH_SIZE)
        snprintf(error, error_size, "hash has %zu bytes, not %d", hash_size, SHOAL_HASH_SIZE);
    else
    if (deleted && value_size != 0)
        snprintf(error, error_size, "a tombstone holds a %zu byte value", value_size);
    else
        return 0;
    return -1;
}

//  KvRecord's fields (shoal.proto).
#define KV_VALUE 1
#define KV_DELETED 2
#define KV_WALL_MS 3
#define KV_LOGIC 4
#define KV_NODE 5
#define KV_HASH 6
#define KV_EPOCH 7
//  Most bytes a varint takes.
#define WIRE_VARINT_SIZE_MAX 10

//  Writes VALUE as a varint at OUT; returns the byte after it.
static uint8_t *
s_put_varint(uint8_t *out, uint64_t value)
{
    while (value >= WIRE_VARINT_MORE) {
        *out++ = (uint8_t) (value | WIRE_VARINT_MORE);
        value >>= WIRE_VARINT_BITS;
    }
    *out++ = (uint8_t) value;
    return out;
}

//  Writes field FIELD as a varint, unless VALUE is its default (proto3).
static uint8_t *
s_put_varint_field(uint8_t *out, unsigned field, uint64_t value)
{
    if (value == 0)
        return out;
    out = s_put_varint(out, (uint64_t) field << WIRE_TYPE_BITS | WIRE_VARINT);
    return s_put_varint(out, value);
}

//  Writes field FIELD's SIZE bytes with their length, unless SIZE is 0.
static uint8_t *
s_put_length_field(uint8_t *out, unsigned field, const void *data, size_t size)
{
    if (size == 0)
        return out;
    out = s_put_varint(out, (uint64_t) field << WIRE_TYPE_BITS | WIRE_LENGTH);
    out = s_put_varint(out, size);
    memcpy(out, data, size);
    return out + size;
}

//  A KvRecord is packed here, not by protobuf-c's generic pack: a bulk load
//  encodes one for every entry it takes, and the generic size walk and pack
//  cost 1,090 instructions of it (callgrind). The bytes are protobuf-c's
//  exactly (fields in number order, each left out while it holds its
//  default, as proto3 has it); test_protocol's kv record test checks them
//  against a record written field by field.
static int
s_kv_encode(const void *record_in, uint8_t **bytes_p, size_t *size_p,
            char *error, size_t error_size)
{
    const shoal_kv_record_t *record = record_in;
    *bytes_p = NULL;
    *size_p = 0;
    size_t value_size = record->value ? record->value_size : 0;
    if (s_kv_check(record->node, SHOAL_HASH_SIZE, record->deleted, value_size,
                   error, error_size))
        return -1;
    size_t node_size = strlen(record->node);
    //  Each field's tag takes one byte; a varint and a length at most ten.
    size_t most = 7 * (1 + WIRE_VARINT_SIZE_MAX) + value_size + node_size + SHOAL_HASH_SIZE;
    uint8_t *bytes = malloc(most);
    if (!bytes) {
        snprintf(error, error_size, "out of memory for %zu bytes", most);
        return -1;
    }
    uint8_t *out = s_put_length_field(bytes, KV_VALUE, record->value, value_size);
    out = s_put_varint_field(out, KV_DELETED, record->deleted ? 1 : 0);
    out = s_put_varint_field(out, KV_WALL_MS, record->wall_ms);
    out = s_put_varint_field(out, KV_LOGIC, record->logic);
    out = s_put_length_field(out, KV_NODE, record->node, node_size);
    out = s_put_length_field(out, KV_HASH, record->hash, SHOAL_HASH_SIZE);
    out = s_put_varint_field(out, KV_EPOCH, record->epoch);
    *bytes_p = bytes;
    *size_p = (size_t) (out - bytes);
    return 0;
}

static void
s_kv_clear(void *record_in)
{
    shoal_kv_record_t *record = record_in;
    free(record->value);
    free(record->node);
    memset(record, 0, sizeof *record);
}

static int
s_kv_decode(const uint8_t *bytes, size_t size, void *record_out,
            char *error, size_t error_size)
{
    shoal_kv_record_t *record = record_out;
    memset(record, 0, sizeof *record);
    if (shoal_wire_check(&shoal__kv_record__descriptor, bytes, size, error, error_size))
        return -1;
    Shoal__KvRecord *message = shoal__kv_record__unpack(NULL, size, bytes);
    if (!message) {
        snprintf(error, error_size, "%zu bytes are not a protobuf KvRecord", size);
        return -1;
    }
    int rc = s_kv_check(message->node, message->hash.len, message->deleted,
                        message->value.len, error, error_size);
    if (rc == 0) {
        record->value_size = message->value.len;
        record->value = message->value.len ? s_bytes_dup(message->value.data, message->value.len)
                                           : NULL;
        record->deleted = message->deleted;
        record->wall_ms = message->wall_ms;
        record->logic = message->logic;
        record->node = strdup(message->node);
        memcpy(record->hash, message->hash.data, SHOAL_HASH_SIZE);
        record->epoch = message->epoch;
        if (!record->node || (record->value_size && !record->value)) {
            s_kv_clear(record);
            snprintf(error, error_size, "out of memory");
            rc = -1;
        }
    }
    shoal__kv_record__free_unpacked(message, NULL);
    return rc;
}

const shoal_codec_t shoal_kv_codec = {
    .name = "KvRecord",
    .record_size = sizeof(shoal_kv_record_t),
    .encode = s_kv_encode,
    .decode = s_kv_decode,
    .clear = s_kv_clear,
};

static int
s_head_encode(const void *record_in, uint8_t **bytes_p, size_t *size_p,
              char *error, size_t error_size)
{
    const shoal_head_record_t *record = record_in;
    Shoal__HeadRecord message = SHOAL__HEAD_RECORD__INIT;
    message.wall_ms = record->wall_ms;
    message.logic = record->logic;
    message.hash.data = (uint8_t *) record->hash;
    message.hash.len = SHOAL_HASH_SIZE;
    return s_message_pack(&message.base, bytes_p, size_p, error, error_size);
}

//  A head owns nothing, so clearing it is zeroing it.
static void
s_head_clear(void *record_in)
{
    memset(record_in, 0, sizeof(shoal_head_record_t));
}

static int
s_head_decode(const uint8_t *bytes, size_t size, void *record_out,
              char *error, size_t error_size)
{
    shoal_head_record_t *record = record_out;
    memset(record, 0, sizeof *record);
    if (shoal_wire_check(&shoal__head_record__descriptor, bytes, size, error, error_size))
        return -1;
    Shoal__HeadRecord *message = shoal__head_record__unpack(NULL, size, bytes);
    if (!message) {
        snprintf(error, error_size, "%zu bytes are not a protobuf HeadRecord", size);
        return -1;
    }
    int rc = 0;
    if (message->hash.len != SHOAL_HASH_SIZE) {
        snprintf(error, error_size, "hash has %zu bytes, not %d",
                 message->hash.len, SHOAL_HASH_SIZE);
        rc = -1;
    }
    else {
        record->wall_ms = message->wall_ms;
        record->logic = message->logic;
        memcpy(record->hash, message->hash.data, SHOAL_HASH_SIZE);
    }
    shoal__head_record__free_unpacked(message, NULL);
    return rc;
}

const shoal_codec_t shoal_head_codec = {
    .name = "HeadRecord",
    .record_size = sizeof(shoal_head_record_t),
    .encode = s_head_encode,
    .decode = s_head_decode,
    .clear = s_head_clear,
};
