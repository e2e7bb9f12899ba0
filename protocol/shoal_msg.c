/*  shoal_msg: the codecs of the request and reply bodies.

    Every body goes through the same steps, written once in s_body_encode and
    s_body_decode: check the C struct, point its protobuf message at it, pack;
    or unpack, copy into the C struct, check. The check runs on the C struct
    in both directions, so what a node refuses to send is exactly what it
    refuses to receive, and whatever decodes encodes again. Only a hash's
    length cannot be wrong in a C struct (it is an array), so that one rule is
    checked while copying from the wire.

    A body is described by a shape: its size, its protobuf message and its
    functions. The elements of repeated fields (kv items, heads, dataset
    stats) are shapes too, so one set of array helpers serves every repeated
    field, and an element's error names its index ("items[3]: hash is 5
    bytes, not 32").
*/
#include "shoal_msg.h"
#include "shoal_names.h"
#include "shoal_wire.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.pb-c.h"

//  Room for an element's error before its index is put in front of it.
#define ELEMENT_ERROR_MAX 256

//  The length limit of a text field whose only limit is the envelope's size.
#define TEXT_ANY_LENGTH SIZE_MAX

//  How one body (or array element) maps to its protobuf message.
typedef struct {
    size_t size;                                    //  sizeof the C struct
    const ProtobufCMessageDescriptor *descriptor;   //  its protobuf message
    //  Returns 0, or -1 with ERROR naming the field that breaks a rule.
    int (*check) (const void *body, char *error, size_t error_size);
    //  Points WIRE (initialised) at BODY's fields; WIRE only borrows them.
    void (*to_wire) (const void *body, ProtobufCMessage *wire);
    //  Copies WIRE into BODY (zeroed). Returns 0, or -1 with ERROR when WIRE
    //  holds what BODY cannot; what was copied so far is left for clear.
    int (*from_wire) (const ProtobufCMessage *wire, void *body, char *error, size_t error_size);
    //  Frees what BODY owns (clear of a zeroed body does nothing).
    void (*clear) (void *body);
    //  Frees what to_wire allocated (element arrays); NULL when nothing.
    void (*release) (ProtobufCMessage *wire);
} s_shape_t;

//  The protobuf fields are not const, but packing only reads them: the cast
//  lets a const body be encoded without copying its strings. NULL reads as
//  empty.
static char *
s_wire_text(const char *text)
{
    return (char *) (text ? text : "");
}

static ProtobufCBinaryData
s_wire_bytes(const uint8_t *data, size_t size)
{
    ProtobufCBinaryData bytes = { data ? size : 0, (uint8_t *) data };
    return bytes;
}

//  A copy of TEXT. Decoded strings are never NULL, so that readers may print
//  a body's strings as they are; out of memory aborts, as zmalloc does, so a
//  decoded body is never half-filled.
static char *
s_text_copy(const char *text)
{
    if (!text)
        text = "";
    size_t size = strlen(text) + 1;
    char *copy = (char *) zmalloc(size);
    memcpy(copy, text, size);
    return copy;
}

//  Copies WIRE into *DATA_P and *SIZE_P; an empty value is NULL.
static void
s_bytes_copy(const ProtobufCBinaryData *wire, uint8_t **data_p, size_t *size_p)
{
    *data_p = NULL;
    *size_p = wire->len;
    if (wire->len) {
        *data_p = (uint8_t *) zmalloc(wire->len);
        memcpy(*data_p, wire->data, wire->len);
    }
}

//  Copies a wire hash into HASH (SHOAL_HASH_SIZE bytes). Returns 0, or -1
//  when the wire holds some other length.
static int
s_hash_copy(const ProtobufCBinaryData *wire, uint8_t *hash, char *error, size_t error_size)
{
    if (wire->len != SHOAL_HASH_SIZE) {
        snprintf(error, error_size, "hash is %zu bytes, not %d", wire->len, SHOAL_HASH_SIZE);
        return -1;
    }
    memcpy(hash, wire->data, SHOAL_HASH_SIZE);
    return 0;
}

//  Checks that TEXT (NULL reads as empty) holds at most MAX bytes, and at
//  least one when REQUIRED. Returns 0, or -1 with ERROR naming FIELD.
static int
s_text_check(const char *field, const char *text, bool required, size_t max,
             char *error, size_t error_size)
{
    size_t length = text ? strlen(text) : 0;
    if (required && length == 0)
        snprintf(error, error_size, "%s is empty", field);
    else
    if (length > max)
        snprintf(error, error_size, "%s of %zu bytes exceeds %zu", field, length, max);
    else
        return 0;
    return -1;
}

//  Checks that DATA can hold SIZE bytes: only an empty value may be NULL.
static int
s_bytes_check(const char *field, const uint8_t *data, size_t size, char *error, size_t error_size)
{
    if (!data && size) {
        snprintf(error, error_size, "%s is NULL but its size is %zu", field, size);
        return -1;
    }
    return 0;
}

//  Checks a dataset name a client gives (empty only when not REQUIRED).
static int
s_dataset_name_check(const char *dataset, bool required, char *error, size_t error_size)
{
    if (s_text_check("dataset", dataset, required, SHOAL_DATASET_MAX, error, error_size))
        return -1;
    if (dataset && *dataset && !shoal_dataset_valid(dataset)) {
        snprintf(error, error_size, "dataset '%s' is not %s", dataset, SHOAL_DATASET_RULE);
        return -1;
    }
    return 0;
}

//  The dataset and key every kv body names.
static int
s_kv_key_names_check(const char *dataset, const char *key, char *error, size_t error_size)
{
    if (s_dataset_name_check(dataset, true, error, error_size)
    ||  s_text_check("key", key, true, SHOAL_KV_KEY_MAX, error, error_size))
        return -1;
    return 0;
}

//  Element INDEX of an array of SHAPE at ELEMENTS.
static void *
s_element(const s_shape_t *shape, const void *elements, size_t index)
{
    return (char *) elements + index * shape->size;
}

//  A zeroed array of COUNT elements of SHAPE, or NULL when COUNT is 0.
static void *
s_array_new(const s_shape_t *shape, size_t count)
{
    return count ? zmalloc(count * shape->size) : NULL;
}

//  Checks COUNT elements; an error names the element as FIELD[index].
static int
s_array_check(const s_shape_t *shape, const char *field, const void *elements, size_t count,
              char *error, size_t error_size)
{
    if (count && !elements) {
        snprintf(error, error_size, "%s is NULL but its count is %zu", field, count);
        return -1;
    }
    char detail[ELEMENT_ERROR_MAX];
    for (size_t index = 0; index < count; index++)
        if (shape->check(s_element(shape, elements, index), detail, sizeof detail)) {
            snprintf(error, error_size, "%s[%zu]: %s", field, index, detail);
            return -1;
        }
    return 0;
}

//  Wire messages for COUNT elements, borrowing their fields: an array of
//  pointers into one block of messages, both freed by s_array_release.
static ProtobufCMessage **
s_array_to_wire(const s_shape_t *shape, const void *elements, size_t count)
{
    if (count == 0)
        return NULL;
    size_t wire_size = shape->descriptor->sizeof_message;
    ProtobufCMessage **wires = (ProtobufCMessage **) zmalloc(count * sizeof *wires);
    char *block = (char *) zmalloc(count * wire_size);
    for (size_t index = 0; index < count; index++) {
        wires[index] = (ProtobufCMessage *) (block + index * wire_size);
        shape->descriptor->message_init(wires[index]);
        shape->to_wire(s_element(shape, elements, index), wires[index]);
    }
    return wires;
}

static void
s_array_release(void *wires_in, size_t count)
{
    ProtobufCMessage **wires = (ProtobufCMessage **) wires_in;
    if (count)
        free(wires[0]);
    free(wires);
}

//  Copies COUNT wire messages into ELEMENTS (from s_array_new); an error
//  names the element as FIELD[index].
static int
s_array_from_wire(const s_shape_t *shape, const char *field, void *wires_in, size_t count,
                  void *elements, char *error, size_t error_size)
{
    ProtobufCMessage **wires = (ProtobufCMessage **) wires_in;
    char detail[ELEMENT_ERROR_MAX];
    for (size_t index = 0; index < count; index++)
        if (shape->from_wire(wires[index], s_element(shape, elements, index), detail, sizeof detail)) {
            snprintf(error, error_size, "%s[%zu]: %s", field, index, detail);
            return -1;
        }
    return 0;
}

static void
s_array_clear(const s_shape_t *shape, void *elements, size_t count)
{
    if (elements)
        for (size_t index = 0; index < count; index++)
            shape->clear(s_element(shape, elements, index));
    free(elements);
}

static int
s_body_encode(const s_shape_t *shape, const void *body, uint8_t **bytes_p, size_t *size_p,
              char *error, size_t error_size)
{
    *bytes_p = NULL;
    *size_p = 0;
    if (shape->check(body, error, error_size))
        return -1;
    ProtobufCMessage *wire = (ProtobufCMessage *) zmalloc(shape->descriptor->sizeof_message);
    shape->descriptor->message_init(wire);
    shape->to_wire(body, wire);
    size_t size = protobuf_c_message_get_packed_size(wire);
    //  One byte at least, so that an empty body is still a buffer to free.
    uint8_t *bytes = (uint8_t *) zmalloc(size ? size : 1);
    protobuf_c_message_pack(wire, bytes);
    if (shape->release)
        shape->release(wire);
    free(wire);
    *bytes_p = bytes;
    *size_p = size;
    return 0;
}

static void
s_body_clear(const s_shape_t *shape, void *body)
{
    shape->clear(body);
    memset(body, 0, shape->size);
}

static int
s_body_decode(const s_shape_t *shape, const uint8_t *bytes, size_t size, void *body,
              char *error, size_t error_size)
{
    memset(body, 0, shape->size);
    if (shoal_wire_check(shape->descriptor, bytes, size, error, error_size))
        return -1;
    ProtobufCMessage *wire = protobuf_c_message_unpack(shape->descriptor, NULL, size, bytes);
    if (!wire) {
        snprintf(error, error_size, "%zu bytes are not a protobuf %s", size,
                 shape->descriptor->short_name);
        return -1;
    }
    int rc = shape->from_wire(wire, body, error, error_size);
    if (rc == 0)
        rc = shape->check(body, error, error_size);
    protobuf_c_message_free_unpacked(wire, NULL);
    if (rc)
        s_body_clear(shape, body);
    return rc;
}

//  A shoal_codec_t named STEM for the C struct CTYPE, described by the shape
//  s_STEM_shape. A codec's functions get no context, so each body has three
//  of its own that only hand its shape to the shared ones.
#define S_DEFINE_CODEC(stem, ctype) \
    static int \
    s_##stem##_codec_encode(const void *body, uint8_t **bytes_p, size_t *size_p, \
                            char *error, size_t error_size) \
    { \
        return s_body_encode(&s_##stem##_shape, body, bytes_p, size_p, error, error_size); \
    } \
    static int \
    s_##stem##_codec_decode(const uint8_t *bytes, size_t size, void *body, \
                            char *error, size_t error_size) \
    { \
        return s_body_decode(&s_##stem##_shape, bytes, size, body, error, error_size); \
    } \
    static void \
    s_##stem##_codec_clear(void *body) \
    { \
        s_body_clear(&s_##stem##_shape, body); \
    } \
    const shoal_codec_t shoal_msg_##stem##_codec = { \
        .name = #stem, \
        .record_size = sizeof(ctype), \
        .encode = s_##stem##_codec_encode, \
        .decode = s_##stem##_codec_decode, \
        .clear = s_##stem##_codec_clear, \
    }

//  A body that is one array and nothing else (heads, members, peers, ...):
//  its five shape functions, its shape and its codec. CTYPE has FIELD and
//  count; WIRE_TYPE has FIELD and n_FIELD of ELEMENT_WIRE pointers; ELEMENT
//  is the shape of one element; MAX bounds count (0: only the envelope's
//  size does).
#define S_DEFINE_LIST(stem, ctype, wire_type, descriptor, field, element_wire, element, max) \
    static int \
    s_##stem##_check(const void *body_in, char *error, size_t error_size) \
    { \
        const ctype *body = (const ctype *) body_in; \
        if ((max) && body->count > (size_t) (max)) { \
            snprintf(error, error_size, "%zu " #field " exceed %zu", body->count, (size_t) (max)); \
            return -1; \
        } \
        return s_array_check(&(element), #field, body->field, body->count, error, error_size); \
    } \
    static void \
    s_##stem##_to_wire(const void *body_in, ProtobufCMessage *wire_in) \
    { \
        const ctype *body = (const ctype *) body_in; \
        wire_type *wire = (wire_type *) wire_in; \
        wire->n_##field = body->count; \
        wire->field = (element_wire **) s_array_to_wire(&(element), body->field, body->count); \
    } \
    static int \
    s_##stem##_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size) \
    { \
        const wire_type *wire = (const wire_type *) wire_in; \
        ctype *body = (ctype *) body_out; \
        body->field = s_array_new(&(element), wire->n_##field); \
        body->count = wire->n_##field; \
        return s_array_from_wire(&(element), #field, wire->field, wire->n_##field, body->field, \
                                 error, error_size); \
    } \
    static void \
    s_##stem##_clear(void *body_in) \
    { \
        ctype *body = (ctype *) body_in; \
        s_array_clear(&(element), body->field, body->count); \
    } \
    static void \
    s_##stem##_release(ProtobufCMessage *wire_in) \
    { \
        wire_type *wire = (wire_type *) wire_in; \
        s_array_release(wire->field, wire->n_##field); \
    } \
    static const s_shape_t s_##stem##_shape = { \
        sizeof(ctype), &(descriptor), s_##stem##_check, \
        s_##stem##_to_wire, s_##stem##_from_wire, s_##stem##_clear, s_##stem##_release \
    }; \
    S_DEFINE_CODEC(stem, ctype)

//  DamageRecord: an element of StatusReply, and how the node keeps it.

static int
s_damage_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_damage_t *body = body_in;
    if (body->dataset_count && !body->datasets) {
        snprintf(error, error_size, "datasets is NULL but its count is %zu", body->dataset_count);
        return -1;
    }
    for (size_t i = 0; i < body->dataset_count; i++)
        if (s_text_check("datasets[]", body->datasets[i], true, SHOAL_DATASET_MAX, error, error_size))
            return -1;
    return s_text_check("id", body->id, true, TEXT_ANY_LENGTH, error, error_size);
}

static void
s_damage_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_damage_t *body = body_in;
    Shoal__DamageRecord *wire = (Shoal__DamageRecord *) wire_in;
    wire->id = s_wire_text(body->id);
    wire->kind = s_wire_text(body->kind);
    wire->what = s_wire_text(body->what);
    wire->keys = s_wire_text(body->keys);
    wire->claim_id = s_wire_text(body->claim_id);
    wire->found_ms = body->found_ms;
    wire->action = s_wire_text(body->action);
    wire->n_datasets = body->dataset_count;
    wire->datasets = body->datasets;
}

static int
s_damage_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__DamageRecord *wire = (const Shoal__DamageRecord *) wire_in;
    shoal_msg_damage_t *body = body_out;
    body->id = s_text_copy(wire->id);
    body->kind = s_text_copy(wire->kind);
    body->what = s_text_copy(wire->what);
    body->keys = s_text_copy(wire->keys);
    body->claim_id = s_text_copy(wire->claim_id);
    body->found_ms = wire->found_ms;
    body->action = s_text_copy(wire->action);
    body->dataset_count = wire->n_datasets;
    body->datasets = (char **) zmalloc((wire->n_datasets + 1) * sizeof *body->datasets);
    for (size_t i = 0; i < wire->n_datasets; i++)
        body->datasets[i] = s_text_copy(wire->datasets[i]);
    return 0;
}

static void
s_damage_clear(void *body_in)
{
    shoal_msg_damage_t *body = body_in;
    free(body->id);
    free(body->kind);
    free(body->what);
    free(body->keys);
    free(body->claim_id);
    free(body->action);
    for (size_t i = 0; i < body->dataset_count; i++)
        free(body->datasets[i]);
    free(body->datasets);
}

static const s_shape_t s_damage_shape = {
    sizeof(shoal_msg_damage_t), &shoal__damage_record__descriptor, s_damage_check,
    s_damage_to_wire, s_damage_from_wire, s_damage_clear, NULL
};
S_DEFINE_CODEC(damage, shoal_msg_damage_t);

//  DamageRef

static int
s_damage_ref_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_damage_ref_t *body = body_in;
    return s_text_check("id", body->id, true, TEXT_ANY_LENGTH, error, error_size);
}

static void
s_damage_ref_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_damage_ref_t *body = body_in;
    ((Shoal__DamageRef *) wire_in)->id = s_wire_text(body->id);
}

static int
s_damage_ref_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    ((shoal_msg_damage_ref_t *) body_out)->id = s_text_copy(((const Shoal__DamageRef *) wire_in)->id);
    return 0;
}

static void
s_damage_ref_clear(void *body_in)
{
    free(((shoal_msg_damage_ref_t *) body_in)->id);
}

static const s_shape_t s_damage_ref_shape = {
    sizeof(shoal_msg_damage_ref_t), &shoal__damage_ref__descriptor, s_damage_ref_check,
    s_damage_ref_to_wire, s_damage_ref_from_wire, s_damage_ref_clear, NULL
};
S_DEFINE_CODEC(damage_ref, shoal_msg_damage_ref_t);

//  StatusReply

static int
s_status_reply_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_status_reply_t *body = body_in;
    //  A status reply names the node that sent it; a client that shows or
    //  compares nodes has nothing to go on without it.
    if (s_text_check("node_id", body->node_id, true, TEXT_ANY_LENGTH, error, error_size))
        return -1;
    return s_array_check(&s_damage_shape, "damage", body->damage, body->damage_count, error, error_size);
}

static void
s_status_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_status_reply_t *body = body_in;
    Shoal__StatusReply *wire = (Shoal__StatusReply *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->version = s_wire_text(body->version);
    wire->uptime_ms = body->uptime_ms;
    wire->endpoint = s_wire_text(body->endpoint);
    wire->data_dir = s_wire_text(body->data_dir);
    wire->claims = body->claims;
    wire->peers = body->peers;
    wire->clients = body->clients;
    wire->role = s_wire_text(body->role);
    wire->tenant = s_wire_text(body->tenant);
    wire->oplog_migrating = body->oplog_migrating;
    wire->oplog_migrated = body->oplog_migrated;
    wire->n_damage = body->damage_count;
    wire->damage = (Shoal__DamageRecord **) s_array_to_wire(&s_damage_shape, body->damage, body->damage_count);
    if (body->space_free_bytes || body->space_reserve_bytes) {
        wire->space = (Shoal__StoreSpace *) zmalloc(sizeof *wire->space);
        shoal__store_space__init(wire->space);
        wire->space->free_bytes = body->space_free_bytes;
        wire->space->reserve_bytes = body->space_reserve_bytes;
    }
}

static int
s_status_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__StatusReply *wire = (const Shoal__StatusReply *) wire_in;
    shoal_msg_status_reply_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->version = s_text_copy(wire->version);
    body->uptime_ms = wire->uptime_ms;
    body->endpoint = s_text_copy(wire->endpoint);
    body->data_dir = s_text_copy(wire->data_dir);
    body->claims = wire->claims;
    body->peers = wire->peers;
    body->clients = wire->clients;
    body->role = s_text_copy(wire->role);
    body->tenant = s_text_copy(wire->tenant);
    body->oplog_migrating = wire->oplog_migrating;
    body->oplog_migrated = wire->oplog_migrated;
    if (wire->space) {
        body->space_free_bytes = wire->space->free_bytes;
        body->space_reserve_bytes = wire->space->reserve_bytes;
    }
    body->damage = s_array_new(&s_damage_shape, wire->n_damage);
    body->damage_count = wire->n_damage;
    return s_array_from_wire(&s_damage_shape, "damage", wire->damage, wire->n_damage, body->damage,
                             error, error_size);
}

static void
s_status_reply_clear(void *body_in)
{
    shoal_msg_status_reply_t *body = body_in;
    free(body->node_id);
    free(body->version);
    free(body->endpoint);
    free(body->data_dir);
    free(body->role);
    free(body->tenant);
    s_array_clear(&s_damage_shape, body->damage, body->damage_count);
}

static void
s_status_reply_release(ProtobufCMessage *wire_in)
{
    Shoal__StatusReply *wire = (Shoal__StatusReply *) wire_in;
    s_array_release(wire->damage, wire->n_damage);
    free(wire->space);
}

static const s_shape_t s_status_reply_shape = {
    sizeof(shoal_msg_status_reply_t), &shoal__status_reply__descriptor, s_status_reply_check,
    s_status_reply_to_wire, s_status_reply_from_wire, s_status_reply_clear, s_status_reply_release
};
S_DEFINE_CODEC(status_reply, shoal_msg_status_reply_t);

//  KvPut

static int
s_kv_put_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_kv_put_t *body = body_in;
    if (s_kv_key_names_check(body->dataset, body->key, error, error_size)
    ||  s_bytes_check("value", body->value, body->value_size, error, error_size))
        return -1;
    //  A larger value would be accepted here and then fail to be read back
    //  or replicated: see shoal_limits.h.
    if (body->value_size > SHOAL_KV_VALUE_MAX) {
        snprintf(error, error_size, "value of %zu bytes exceeds the %d-byte value limit",
                 body->value_size, SHOAL_KV_VALUE_MAX);
        return -1;
    }
    return 0;
}

static void
s_kv_put_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_kv_put_t *body = body_in;
    Shoal__KvPut *wire = (Shoal__KvPut *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->key = s_wire_text(body->key);
    wire->value = s_wire_bytes(body->value, body->value_size);
}

static int
s_kv_put_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KvPut *wire = (const Shoal__KvPut *) wire_in;
    shoal_msg_kv_put_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->key = s_text_copy(wire->key);
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    return 0;
}

static void
s_kv_put_clear(void *body_in)
{
    shoal_msg_kv_put_t *body = body_in;
    free(body->dataset);
    free(body->key);
    free(body->value);
}

static const s_shape_t s_kv_put_shape = {
    sizeof(shoal_msg_kv_put_t), &shoal__kv_put__descriptor, s_kv_put_check,
    s_kv_put_to_wire, s_kv_put_from_wire, s_kv_put_clear, NULL
};
S_DEFINE_CODEC(kv_put, shoal_msg_kv_put_t);

//  KvKey

static int
s_kv_key_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_kv_key_t *body = body_in;
    return s_kv_key_names_check(body->dataset, body->key, error, error_size);
}

static void
s_kv_key_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_kv_key_t *body = body_in;
    Shoal__KvKey *wire = (Shoal__KvKey *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->key = s_wire_text(body->key);
}

static int
s_kv_key_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KvKey *wire = (const Shoal__KvKey *) wire_in;
    shoal_msg_kv_key_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->key = s_text_copy(wire->key);
    return 0;
}

static void
s_kv_key_clear(void *body_in)
{
    shoal_msg_kv_key_t *body = body_in;
    free(body->dataset);
    free(body->key);
}

static const s_shape_t s_kv_key_shape = {
    sizeof(shoal_msg_kv_key_t), &shoal__kv_key__descriptor, s_kv_key_check,
    s_kv_key_to_wire, s_kv_key_from_wire, s_kv_key_clear, NULL
};
S_DEFINE_CODEC(kv_key, shoal_msg_kv_key_t);

//  KvItem: the body of kv_put, kv_get and kv_del replies, and the element of
//  a scan's KvItems.

static int
s_kv_item_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_kv_item_t *body = body_in;
    if (s_kv_key_names_check(body->dataset, body->key, error, error_size)
    ||  s_bytes_check("value", body->value, body->value_size, error, error_size)
    ||  s_text_check("node", body->node, true, TEXT_ANY_LENGTH, error, error_size))
        return -1;
    //  A tombstone that held a value would read as a put to one client and
    //  as a delete to another.
    if (body->deleted && body->value_size) {
        snprintf(error, error_size, "a tombstone holds a %zu-byte value", body->value_size);
        return -1;
    }
    return 0;
}

static void
s_kv_item_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_kv_item_t *body = body_in;
    Shoal__KvItem *wire = (Shoal__KvItem *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->key = s_wire_text(body->key);
    wire->value = s_wire_bytes(body->value, body->value_size);
    wire->deleted = body->deleted;
    wire->wall_ms = body->wall_ms;
    wire->logic = body->logic;
    wire->node = s_wire_text(body->node);
    wire->hash = s_wire_bytes(body->hash, SHOAL_HASH_SIZE);
    wire->epoch = body->epoch;
}

static int
s_kv_item_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KvItem *wire = (const Shoal__KvItem *) wire_in;
    shoal_msg_kv_item_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->key = s_text_copy(wire->key);
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    body->deleted = wire->deleted;
    body->wall_ms = wire->wall_ms;
    body->logic = wire->logic;
    body->node = s_text_copy(wire->node);
    body->epoch = wire->epoch;
    return s_hash_copy(&wire->hash, body->hash, error, error_size);
}

static void
s_kv_item_clear(void *body_in)
{
    shoal_msg_kv_item_t *body = body_in;
    free(body->dataset);
    free(body->key);
    free(body->value);
    free(body->node);
}

static const s_shape_t s_kv_item_shape = {
    sizeof(shoal_msg_kv_item_t), &shoal__kv_item__descriptor, s_kv_item_check,
    s_kv_item_to_wire, s_kv_item_from_wire, s_kv_item_clear, NULL
};
S_DEFINE_CODEC(kv_item, shoal_msg_kv_item_t);

//  KvScan

static int
s_kv_scan_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_kv_scan_t *body = body_in;
    if (s_dataset_name_check(body->dataset, true, error, error_size)
    ||  s_text_check("prefix", body->prefix, false, SHOAL_KV_KEY_MAX, error, error_size)
    ||  s_text_check("start_after", body->start_after, false, SHOAL_KV_KEY_MAX, error, error_size))
        return -1;
    if (body->limit > SHOAL_SCAN_LIMIT_MAX) {
        snprintf(error, error_size, "limit %u exceeds %d", body->limit, SHOAL_SCAN_LIMIT_MAX);
        return -1;
    }
    return 0;
}

static void
s_kv_scan_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_kv_scan_t *body = body_in;
    Shoal__KvScan *wire = (Shoal__KvScan *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->prefix = s_wire_text(body->prefix);
    wire->start_after = s_wire_text(body->start_after);
    wire->limit = body->limit;
}

static int
s_kv_scan_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KvScan *wire = (const Shoal__KvScan *) wire_in;
    shoal_msg_kv_scan_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->prefix = s_text_copy(wire->prefix);
    body->start_after = s_text_copy(wire->start_after);
    body->limit = wire->limit;
    return 0;
}

static void
s_kv_scan_clear(void *body_in)
{
    shoal_msg_kv_scan_t *body = body_in;
    free(body->dataset);
    free(body->prefix);
    free(body->start_after);
}

static const s_shape_t s_kv_scan_shape = {
    sizeof(shoal_msg_kv_scan_t), &shoal__kv_scan__descriptor, s_kv_scan_check,
    s_kv_scan_to_wire, s_kv_scan_from_wire, s_kv_scan_clear, NULL
};
S_DEFINE_CODEC(kv_scan, shoal_msg_kv_scan_t);

//  KvItems

static int
s_kv_items_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_kv_items_t *body = body_in;
    //  A scan asks for at most SHOAL_SCAN_LIMIT_MAX items, so a reply with
    //  more answers some other question.
    if (body->count > SHOAL_SCAN_LIMIT_MAX) {
        snprintf(error, error_size, "%zu items exceed %d", body->count, SHOAL_SCAN_LIMIT_MAX);
        return -1;
    }
    return s_array_check(&s_kv_item_shape, "items", body->items, body->count, error, error_size);
}

static void
s_kv_items_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_kv_items_t *body = body_in;
    Shoal__KvItems *wire = (Shoal__KvItems *) wire_in;
    wire->n_items = body->count;
    wire->items = (Shoal__KvItem **) s_array_to_wire(&s_kv_item_shape, body->items, body->count);
    wire->more = body->more;
}

static int
s_kv_items_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KvItems *wire = (const Shoal__KvItems *) wire_in;
    shoal_msg_kv_items_t *body = body_out;
    body->items = s_array_new(&s_kv_item_shape, wire->n_items);
    body->count = wire->n_items;
    body->more = wire->more;
    return s_array_from_wire(&s_kv_item_shape, "items", wire->items, wire->n_items, body->items,
                             error, error_size);
}

static void
s_kv_items_clear(void *body_in)
{
    shoal_msg_kv_items_t *body = body_in;
    s_array_clear(&s_kv_item_shape, body->items, body->count);
}

static void
s_kv_items_release(ProtobufCMessage *wire_in)
{
    Shoal__KvItems *wire = (Shoal__KvItems *) wire_in;
    s_array_release(wire->items, wire->n_items);
}

static const s_shape_t s_kv_items_shape = {
    sizeof(shoal_msg_kv_items_t), &shoal__kv_items__descriptor, s_kv_items_check,
    s_kv_items_to_wire, s_kv_items_from_wire, s_kv_items_clear, s_kv_items_release
};
S_DEFINE_CODEC(kv_items, shoal_msg_kv_items_t);

//  DatasetRef: oplog_heads needs the dataset; oplog_stats reads an empty one
//  as "every dataset". Both codecs share everything but the check.

static int
s_dataset_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_dataset_t *body = body_in;
    return s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size);
}

static int
s_dataset_or_all_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_dataset_t *body = body_in;
    return s_dataset_name_check(body->dataset, false, error, error_size);
}

static void
s_dataset_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_dataset_t *body = body_in;
    Shoal__DatasetRef *wire = (Shoal__DatasetRef *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
}

static int
s_dataset_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__DatasetRef *wire = (const Shoal__DatasetRef *) wire_in;
    shoal_msg_dataset_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    return 0;
}

static void
s_dataset_clear(void *body_in)
{
    shoal_msg_dataset_t *body = body_in;
    free(body->dataset);
}

static const s_shape_t s_dataset_shape = {
    sizeof(shoal_msg_dataset_t), &shoal__dataset_ref__descriptor, s_dataset_check,
    s_dataset_to_wire, s_dataset_from_wire, s_dataset_clear, NULL
};
S_DEFINE_CODEC(dataset, shoal_msg_dataset_t);

static const s_shape_t s_dataset_or_all_shape = {
    sizeof(shoal_msg_dataset_t), &shoal__dataset_ref__descriptor, s_dataset_or_all_check,
    s_dataset_to_wire, s_dataset_from_wire, s_dataset_clear, NULL
};
S_DEFINE_CODEC(dataset_or_all, shoal_msg_dataset_t);

//  Head: the element of Heads.

static int
s_head_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_head_t *body = body_in;
    //  A head is one node's last entry in one dataset: without either it
    //  says nothing.
    if (s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size)
    ||  s_text_check("node", body->node, true, TEXT_ANY_LENGTH, error, error_size))
        return -1;
    return 0;
}

static void
s_head_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_head_t *body = body_in;
    Shoal__Head *wire = (Shoal__Head *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->node = s_wire_text(body->node);
    wire->wall_ms = body->wall_ms;
    wire->logic = body->logic;
    wire->hash = s_wire_bytes(body->hash, SHOAL_HASH_SIZE);
}

static int
s_head_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Head *wire = (const Shoal__Head *) wire_in;
    shoal_msg_head_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->node = s_text_copy(wire->node);
    body->wall_ms = wire->wall_ms;
    body->logic = wire->logic;
    return s_hash_copy(&wire->hash, body->hash, error, error_size);
}

static void
s_head_clear(void *body_in)
{
    shoal_msg_head_t *body = body_in;
    free(body->dataset);
    free(body->node);
}

static const s_shape_t s_head_shape = {
    sizeof(shoal_msg_head_t), &shoal__head__descriptor, s_head_check,
    s_head_to_wire, s_head_from_wire, s_head_clear, NULL
};

//  Heads: a list, and whether its sender serves catch-ups in bulk.

static int
s_heads_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_heads_t *body = body_in;
    return s_array_check(&s_head_shape, "heads", body->heads, body->count, error, error_size);
}

static void
s_heads_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_heads_t *body = body_in;
    Shoal__Heads *wire = (Shoal__Heads *) wire_in;
    wire->n_heads = body->count;
    wire->heads = (Shoal__Head **) s_array_to_wire(&s_head_shape, body->heads, body->count);
    wire->serves_bulk = body->serves_bulk;
}

static int
s_heads_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Heads *wire = (const Shoal__Heads *) wire_in;
    shoal_msg_heads_t *body = body_out;
    body->heads = s_array_new(&s_head_shape, wire->n_heads);
    body->count = wire->n_heads;
    body->serves_bulk = wire->serves_bulk;
    return s_array_from_wire(&s_head_shape, "heads", wire->heads, wire->n_heads, body->heads,
                             error, error_size);
}

static void
s_heads_clear(void *body_in)
{
    shoal_msg_heads_t *body = body_in;
    s_array_clear(&s_head_shape, body->heads, body->count);
}

static void
s_heads_release(ProtobufCMessage *wire_in)
{
    Shoal__Heads *wire = (Shoal__Heads *) wire_in;
    s_array_release(wire->heads, wire->n_heads);
}

static const s_shape_t s_heads_shape = {
    sizeof(shoal_msg_heads_t), &shoal__heads__descriptor, s_heads_check,
    s_heads_to_wire, s_heads_from_wire, s_heads_clear, s_heads_release
};
S_DEFINE_CODEC(heads, shoal_msg_heads_t);

//  DatasetStats: the element of OplogStats.

static int
s_dataset_stats_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_dataset_stats_t *body = body_in;
    return s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size);
}

static void
s_dataset_stats_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_dataset_stats_t *body = body_in;
    Shoal__DatasetStats *wire = (Shoal__DatasetStats *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->entries = body->entries;
    wire->nodes = body->nodes;
    wire->watermark_ms = body->watermark_ms;
    wire->keys = body->keys;
}

static int
s_dataset_stats_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__DatasetStats *wire = (const Shoal__DatasetStats *) wire_in;
    shoal_msg_dataset_stats_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->entries = wire->entries;
    body->nodes = wire->nodes;
    body->watermark_ms = wire->watermark_ms;
    body->keys = wire->keys;
    return 0;
}

static void
s_dataset_stats_clear(void *body_in)
{
    shoal_msg_dataset_stats_t *body = body_in;
    free(body->dataset);
}

static const s_shape_t s_dataset_stats_shape = {
    sizeof(shoal_msg_dataset_stats_t), &shoal__dataset_stats__descriptor, s_dataset_stats_check,
    s_dataset_stats_to_wire, s_dataset_stats_from_wire, s_dataset_stats_clear, NULL
};

//  OplogStats

S_DEFINE_LIST(oplog_stats, shoal_msg_oplog_stats_t, Shoal__OplogStats, shoal__oplog_stats__descriptor, datasets, Shoal__DatasetStats, s_dataset_stats_shape, 0);

//  PruneRequest

static int
s_prune_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_prune_t *body = body_in;
    if (s_text_check("dataset", body->dataset, false, SHOAL_DATASET_MAX, error, error_size))
        return -1;
    //  0 is what a request that forgot the field carries; pruning "before the
    //  epoch" would remove nothing and hide the mistake.
    if (body->before_ms == 0) {
        snprintf(error, error_size, "before_ms is 0");
        return -1;
    }
    return 0;
}

static void
s_prune_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_prune_t *body = body_in;
    Shoal__PruneRequest *wire = (Shoal__PruneRequest *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->before_ms = body->before_ms;
}

static int
s_prune_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__PruneRequest *wire = (const Shoal__PruneRequest *) wire_in;
    shoal_msg_prune_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->before_ms = wire->before_ms;
    return 0;
}

static void
s_prune_clear(void *body_in)
{
    shoal_msg_prune_t *body = body_in;
    free(body->dataset);
}

static const s_shape_t s_prune_shape = {
    sizeof(shoal_msg_prune_t), &shoal__prune_request__descriptor, s_prune_check,
    s_prune_to_wire, s_prune_from_wire, s_prune_clear, NULL
};
S_DEFINE_CODEC(prune, shoal_msg_prune_t);

//  PruneReply: every count is valid, and it owns nothing.

static int
s_prune_reply_check(const void *body, char *error, size_t error_size)
{
    return 0;
}

static void
s_prune_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_prune_reply_t *body = body_in;
    Shoal__PruneReply *wire = (Shoal__PruneReply *) wire_in;
    wire->pruned = body->pruned;
}

static int
s_prune_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__PruneReply *wire = (const Shoal__PruneReply *) wire_in;
    shoal_msg_prune_reply_t *body = body_out;
    body->pruned = wire->pruned;
    return 0;
}

static void
s_prune_reply_clear(void *body)
{
}

static const s_shape_t s_prune_reply_shape = {
    sizeof(shoal_msg_prune_reply_t), &shoal__prune_reply__descriptor, s_prune_reply_check,
    s_prune_reply_to_wire, s_prune_reply_from_wire, s_prune_reply_clear, NULL
};
S_DEFINE_CODEC(prune_reply, shoal_msg_prune_reply_t);

// ---------------------------------------------------------------------------
//  Mesh and sync bodies, exchanged between nodes.

const char *
shoal_member_state_name(shoal_member_state_t state)
{
    switch ((int) state) {
        case SHOAL_MEMBER_ALIVE: return "alive";
        case SHOAL_MEMBER_SUSPECT: return "suspect";
        case SHOAL_MEMBER_DEAD: return "dead";
        case SHOAL_MEMBER_LEFT: return "left";
        default: return NULL;
    }
}

_Static_assert((int) SHOAL_MEMBER_ALIVE == (int) SHOAL__MEMBER_STATE__MEMBER_ALIVE
            && (int) SHOAL_MEMBER_SUSPECT == (int) SHOAL__MEMBER_STATE__MEMBER_SUSPECT
            && (int) SHOAL_MEMBER_DEAD == (int) SHOAL__MEMBER_STATE__MEMBER_DEAD
            && (int) SHOAL_MEMBER_LEFT == (int) SHOAL__MEMBER_STATE__MEMBER_LEFT,
               "shoal_member_state_t must match MemberState in shoal.proto");

//  A node id as names are everywhere: the alphabet of shoal_names.h.
static int
s_node_id_check(const char *field, const char *node_id, char *error, size_t error_size)
{
    if (!node_id || !shoal_name_valid(node_id)) {
        snprintf(error, error_size, "%s '%s' is not a node name", field, node_id ? node_id : "");
        return -1;
    }
    return 0;
}

//  Member

static int
s_member_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_member_t *body = body_in;
    if (s_node_id_check("node_id", body->node_id, error, error_size)
    ||  s_text_check("endpoint", body->endpoint, true, SHOAL_DATASET_MAX, error, error_size))
        return -1;
    //  proto3 enums are open: a number outside the enumeration is refused.
    if (!shoal_member_state_name(body->state)) {
        snprintf(error, error_size, "state %d is not a member state", (int) body->state);
        return -1;
    }
    return 0;
}

static void
s_member_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_member_t *body = body_in;
    Shoal__Member *wire = (Shoal__Member *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->endpoint = s_wire_text(body->endpoint);
    wire->incarnation = body->incarnation;
    wire->state = (Shoal__MemberState) body->state;
}

static int
s_member_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Member *wire = (const Shoal__Member *) wire_in;
    shoal_msg_member_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->endpoint = s_text_copy(wire->endpoint);
    body->incarnation = wire->incarnation;
    body->state = (shoal_member_state_t) wire->state;
    return 0;
}

static void
s_member_clear(void *body_in)
{
    shoal_msg_member_t *body = body_in;
    free(body->node_id);
    free(body->endpoint);
}

static const s_shape_t s_member_shape = {
    sizeof(shoal_msg_member_t), &shoal__member__descriptor, s_member_check,
    s_member_to_wire, s_member_from_wire, s_member_clear, NULL
};
S_DEFINE_CODEC(member, shoal_msg_member_t);

//  Members

S_DEFINE_LIST(members, shoal_msg_members_t, Shoal__Members, shoal__members__descriptor, members, Shoal__Member, s_member_shape, 0);

//  MeshPing

static int
s_ping_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_ping_t *body = body_in;
    if (s_node_id_check("from", body->from, error, error_size)
    ||  s_node_id_check("target", body->target, error, error_size))
        return -1;
    return s_array_check(&s_member_shape, "members", body->members, body->count, error, error_size);
}

static void
s_ping_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_ping_t *body = body_in;
    Shoal__MeshPing *wire = (Shoal__MeshPing *) wire_in;
    wire->from = s_wire_text(body->from);
    wire->target = s_wire_text(body->target);
    wire->n_members = body->count;
    wire->members = (Shoal__Member **) s_array_to_wire(&s_member_shape, body->members, body->count);
}

static int
s_ping_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__MeshPing *wire = (const Shoal__MeshPing *) wire_in;
    shoal_msg_ping_t *body = body_out;
    body->from = s_text_copy(wire->from);
    body->target = s_text_copy(wire->target);
    body->members = s_array_new(&s_member_shape, wire->n_members);
    body->count = wire->n_members;
    return s_array_from_wire(&s_member_shape, "members", wire->members, wire->n_members,
                             body->members, error, error_size);
}

static void
s_ping_clear(void *body_in)
{
    shoal_msg_ping_t *body = body_in;
    free(body->from);
    free(body->target);
    s_array_clear(&s_member_shape, body->members, body->count);
}

static void
s_ping_release(ProtobufCMessage *wire_in)
{
    Shoal__MeshPing *wire = (Shoal__MeshPing *) wire_in;
    s_array_release(wire->members, wire->n_members);
}

static const s_shape_t s_ping_shape = {
    sizeof(shoal_msg_ping_t), &shoal__mesh_ping__descriptor, s_ping_check,
    s_ping_to_wire, s_ping_from_wire, s_ping_clear, s_ping_release
};
S_DEFINE_CODEC(ping, shoal_msg_ping_t);

//  OplogEntry as an element of sync bodies. The hash is not checked against
//  the fields here (that takes libsodium): the oplog checks it on append.

static int
s_entry_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_oplog_entry_t *body = body_in;
    if (s_kv_key_names_check(body->dataset, body->key, error, error_size)
    ||  s_bytes_check("value", body->value, body->value_size, error, error_size)
    ||  s_node_id_check("node", body->node, error, error_size))
        return -1;
    if (!shoal_oplog_op_name(body->op)) {
        snprintf(error, error_size, "op %d is not put or delete", (int) body->op);
        return -1;
    }
    return 0;
}

static void
s_entry_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_oplog_entry_t *body = body_in;
    Shoal__OplogEntry *wire = (Shoal__OplogEntry *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->key = s_wire_text(body->key);
    wire->op = (Shoal__OplogOp) body->op;
    wire->value = s_wire_bytes(body->value, body->value_size);
    wire->wall_ms = body->wall_ms;
    wire->logic = body->logic;
    wire->node = s_wire_text(body->node);
    if (body->has_prev)
        wire->prev_hash = s_wire_bytes(body->prev_hash, SHOAL_HASH_SIZE);
    wire->hash = s_wire_bytes(body->hash, SHOAL_HASH_SIZE);
}

static int
s_entry_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__OplogEntry *wire = (const Shoal__OplogEntry *) wire_in;
    shoal_oplog_entry_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->key = s_text_copy(wire->key);
    body->op = (shoal_oplog_op_t) wire->op;
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    body->wall_ms = wire->wall_ms;
    body->logic = wire->logic;
    body->node = s_text_copy(wire->node);
    if (wire->prev_hash.len) {
        body->has_prev = true;
        if (s_hash_copy(&wire->prev_hash, body->prev_hash, error, error_size))
            return -1;
    }
    return s_hash_copy(&wire->hash, body->hash, error, error_size);
}

static void
s_entry_clear(void *body_in)
{
    shoal_oplog_entry_t *body = body_in;
    free(body->dataset);
    free(body->key);
    free(body->value);
    free(body->node);
}

static const s_shape_t s_entry_shape = {
    sizeof(shoal_oplog_entry_t), &shoal__oplog_entry__descriptor, s_entry_check,
    s_entry_to_wire, s_entry_from_wire, s_entry_clear, NULL
};

//  SyncEntries

static int
s_entries_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_entries_t *body = body_in;
    return s_array_check(&s_entry_shape, "entries", body->entries, body->count, error, error_size);
}

static void
s_entries_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_entries_t *body = body_in;
    Shoal__SyncEntries *wire = (Shoal__SyncEntries *) wire_in;
    wire->n_entries = body->count;
    wire->entries = (Shoal__OplogEntry **) s_array_to_wire(&s_entry_shape, body->entries, body->count);
    wire->more = body->more;
    wire->pruned = body->pruned;
}

static int
s_entries_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__SyncEntries *wire = (const Shoal__SyncEntries *) wire_in;
    shoal_msg_entries_t *body = body_out;
    body->entries = s_array_new(&s_entry_shape, wire->n_entries);
    body->count = wire->n_entries;
    body->more = wire->more;
    body->pruned = wire->pruned;
    return s_array_from_wire(&s_entry_shape, "entries", wire->entries, wire->n_entries,
                             body->entries, error, error_size);
}

static void
s_entries_clear(void *body_in)
{
    shoal_msg_entries_t *body = body_in;
    s_array_clear(&s_entry_shape, body->entries, body->count);
}

static void
s_entries_release(ProtobufCMessage *wire_in)
{
    Shoal__SyncEntries *wire = (Shoal__SyncEntries *) wire_in;
    s_array_release(wire->entries, wire->n_entries);
}

static const s_shape_t s_entries_shape = {
    sizeof(shoal_msg_entries_t), &shoal__sync_entries__descriptor, s_entries_check,
    s_entries_to_wire, s_entries_from_wire, s_entries_clear, s_entries_release
};
S_DEFINE_CODEC(entries, shoal_msg_entries_t);

//  SyncBulk

static int
s_bulk_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_bulk_t *body = body_in;
    if (body->count && (!body->bytes || !body->sizes)) {
        snprintf(error, error_size, "entries are NULL but their count is %zu", body->count);
        return -1;
    }
    for (size_t i = 0; i < body->count; i++)
        if (body->sizes[i] == 0) {
            snprintf(error, error_size, "entries[%zu] is empty", i);
            return -1;
        }
    return 0;
}

static void
s_bulk_clear(void *body_in)
{
    shoal_msg_bulk_t *body = body_in;
    free(body->bytes);
    free(body->sizes);
    memset(body, 0, sizeof *body);
}

//  A page is coded by hand both ways, not by protobuf-c. It holds thousands
//  of entries, and protobuf-c's unpack allocated and copied each one, then
//  freed them after they had been copied again into one buffer (1,170
//  instructions per entry of a catch-up, on the receiver's reactor;
//  callgrind). The walk below reads the bytes as protobuf-c reads them and
//  refuses what it refuses (a field numbered 0, a tag or varint too long, a
//  length past the end, a known field of another wire type, a group), so
//  the codec decodes exactly what it did; the entries are copied once, in
//  two passes (count and size first). SyncBulk holds no string, so
//  shoal_wire_check has nothing to find in it.

//  SyncBulk's fields (shoal.proto), and the wire format's parts.
#define BULK_ENTRIES 1
#define BULK_MORE 2
#define BULK_PRUNED 3
#define BULK_LAST_WALL_MS 4
#define BULK_LAST_LOGIC 5
#define BULK_WIRE_VARINT 0
#define BULK_WIRE_FIXED64 1
#define BULK_WIRE_LENGTH 2
#define BULK_WIRE_FIXED32 5
#define BULK_WIRE_TYPE_BITS 3
#define BULK_WIRE_TYPE_MASK 7u
#define BULK_VARINT_MAX 10
#define BULK_TAG_MAX 5
#define BULK_FIELD_MAX ((UINT64_C(1) << 29) - 1)

//  Reads a varint at *AT (before END) into *VALUE, as protobuf-c reads one:
//  ten bytes at most. Returns 0, or -1 when it is cut or too long.
static int
s_bulk_varint(const uint8_t **at, const uint8_t *end, size_t max, uint64_t *value)
{
    *value = 0;
    for (size_t i = 0; i < max && *at < end; i++) {
        uint8_t byte = *(*at)++;
        //  The tenth byte's bits past the 64th fall off, as in protobuf-c.
        *value |= (uint64_t) (byte & 0x7f) << (7 * i);
        if (!(byte & 0x80))
            return 0;
    }
    return -1;
}

//  Walks a page's wire BYTES (SIZE), counting its entries in *COUNT and
//  their bytes in *TOTAL; fills BODY too when BODY->bytes is set (the
//  second pass). Returns 0, or -1 with ERROR saying what protobuf-c would
//  have refused.
static int
s_bulk_walk(const uint8_t *bytes, size_t size, shoal_msg_bulk_t *body, size_t *count,
            size_t *total, char *error, size_t error_size)
{
    const uint8_t *at = bytes, *end = size ? bytes + size : bytes;
    *count = *total = 0;
    while (at < end) {
        uint64_t tag, value = 0;
        if (s_bulk_varint(&at, end, BULK_TAG_MAX, &tag) || (tag >> BULK_WIRE_TYPE_BITS) == 0
        ||  (tag >> BULK_WIRE_TYPE_BITS) > BULK_FIELD_MAX) {
            snprintf(error, error_size, "a bad tag at byte %zu", (size_t) (at - bytes));
            return -1;
        }
        unsigned type = (unsigned) (tag & BULK_WIRE_TYPE_MASK);
        uint64_t field = tag >> BULK_WIRE_TYPE_BITS;
        bool known = field >= BULK_ENTRIES && field <= BULK_LAST_LOGIC;
        unsigned wanted = field == BULK_ENTRIES ? BULK_WIRE_LENGTH : BULK_WIRE_VARINT;
        if (known && type != wanted) {
            snprintf(error, error_size, "field %" PRIu64 " has wire type %u", field, type);
            return -1;
        }
        const uint8_t *data = at;
        size_t length = 0;
        if (type == BULK_WIRE_VARINT)
            length = s_bulk_varint(&at, end, BULK_VARINT_MAX, &value) ? SIZE_MAX : 0;
        else
        if (type == BULK_WIRE_FIXED64)
            length = (size_t) (end - at) >= sizeof(uint64_t) ? sizeof(uint64_t) : SIZE_MAX;
        else
        if (type == BULK_WIRE_FIXED32)
            length = (size_t) (end - at) >= sizeof(uint32_t) ? sizeof(uint32_t) : SIZE_MAX;
        else
        if (type == BULK_WIRE_LENGTH) {
            if (s_bulk_varint(&at, end, BULK_VARINT_MAX, &value) || value > (uint64_t) (end - at))
                length = SIZE_MAX;
            else {
                data = at;
                length = (size_t) value;
            }
        }
        else
            length = SIZE_MAX;
        if (length == SIZE_MAX) {
            snprintf(error, error_size, "field %" PRIu64 " is cut or of wire type %u", field, type);
            return -1;
        }
        if (type != BULK_WIRE_VARINT)
            at += length;
        if (field == BULK_ENTRIES) {
            if (body->bytes) {
                if (length)
                    memcpy(body->bytes + *total, data, length);
                body->sizes[*count] = length;
            }
            (*count)++;
            *total += length;
        }
        else
        if (field == BULK_MORE)
            body->more = value != 0;
        else
        if (field == BULK_PRUNED)
            body->pruned = value != 0;
        else
        if (field == BULK_LAST_WALL_MS)
            body->last_wall_ms = value;
        else
        if (field == BULK_LAST_LOGIC)
            body->last_logic = (uint32_t) value;
    }
    return 0;
}

//  Writes VALUE as a varint at OUT; returns the byte after it.
static uint8_t *
s_bulk_put_varint(uint8_t *out, uint64_t value)
{
    while (value >= 0x80) {
        *out++ = (uint8_t) (value | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t) value;
    return out;
}

//  Writes field FIELD as a varint, unless VALUE is its default (proto3).
static uint8_t *
s_bulk_put_number(uint8_t *out, unsigned field, uint64_t value)
{
    if (value == 0)
        return out;
    out = s_bulk_put_varint(out, (uint64_t) field << BULK_WIRE_TYPE_BITS | BULK_WIRE_VARINT);
    return s_bulk_put_varint(out, value);
}

//  A page is packed by hand too, into one buffer: protobuf-c's pack walked
//  a wire array of the entries built for it and copied each (490
//  instructions per entry on the sending node's reactor; callgrind). The
//  bytes are protobuf-c's: the entries in order, then the other fields in
//  number order, each left out while it holds its default.
static int
s_bulk_codec_encode(const void *body_in, uint8_t **bytes_p, size_t *size_p, char *error,
                    size_t error_size)
{
    const shoal_msg_bulk_t *body = body_in;
    *bytes_p = NULL;
    *size_p = 0;
    if (s_bulk_check(body, error, error_size))
        return -1;
    size_t total = 0;
    for (size_t i = 0; i < body->count; i++)
        total += body->sizes[i];
    //  A tag byte and a varint of ten bytes at most per field.
    size_t most = total + (body->count + 4) * (1 + BULK_VARINT_MAX);
    uint8_t *bytes = (uint8_t *) malloc(most);
    if (!bytes) {
        snprintf(error, error_size, "out of memory for %zu bytes", most);
        return -1;
    }
    uint8_t *out = bytes;
    const uint8_t *entry = body->bytes;
    for (size_t i = 0; i < body->count; i++) {
        out = s_bulk_put_varint(out, BULK_ENTRIES << BULK_WIRE_TYPE_BITS | BULK_WIRE_LENGTH);
        out = s_bulk_put_varint(out, body->sizes[i]);
        memcpy(out, entry, body->sizes[i]);
        out += body->sizes[i];
        entry += body->sizes[i];
    }
    out = s_bulk_put_number(out, BULK_MORE, body->more ? 1 : 0);
    out = s_bulk_put_number(out, BULK_PRUNED, body->pruned ? 1 : 0);
    out = s_bulk_put_number(out, BULK_LAST_WALL_MS, body->last_wall_ms);
    out = s_bulk_put_number(out, BULK_LAST_LOGIC, body->last_logic);
    *bytes_p = bytes;
    *size_p = (size_t) (out - bytes);
    return 0;
}

static int
s_bulk_codec_decode(const uint8_t *bytes, size_t size, void *body_out, char *error,
                    size_t error_size)
{
    shoal_msg_bulk_t *body = body_out;
    memset(body, 0, sizeof *body);
    size_t count, total;
    if (s_bulk_walk(bytes, size, body, &count, &total, error, error_size))
        return -1;
    memset(body, 0, sizeof *body);
    body->bytes = (uint8_t *) malloc(total ? total : 1);
    body->sizes = (size_t *) malloc((count + 1) * sizeof *body->sizes);
    if (!body->bytes || !body->sizes) {
        s_bulk_clear(body);
        snprintf(error, error_size, "out of memory for %zu entries", count);
        return -1;
    }
    if (s_bulk_walk(bytes, size, body, &body->count, &total, error, error_size)
    ||  s_bulk_check(body, error, error_size)) {
        s_bulk_clear(body);
        return -1;
    }
    return 0;
}

const shoal_codec_t shoal_msg_bulk_codec = {
    .name = "bulk",
    .record_size = sizeof(shoal_msg_bulk_t),
    .encode = s_bulk_codec_encode,
    .decode = s_bulk_codec_decode,
    .clear = s_bulk_clear,
};

//  SyncPull

static int
s_pull_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_pull_t *body = body_in;
    if (s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size)
    ||  s_node_id_check("node", body->node, error, error_size))
        return -1;
    return 0;
}

static void
s_pull_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_pull_t *body = body_in;
    Shoal__SyncPull *wire = (Shoal__SyncPull *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->node = s_wire_text(body->node);
    wire->from_start = body->from_start;
    wire->after_wall_ms = body->after_wall_ms;
    wire->after_logic = body->after_logic;
}

static int
s_pull_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__SyncPull *wire = (const Shoal__SyncPull *) wire_in;
    shoal_msg_pull_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->node = s_text_copy(wire->node);
    body->from_start = wire->from_start;
    body->after_wall_ms = wire->after_wall_ms;
    body->after_logic = wire->after_logic;
    return 0;
}

static void
s_pull_clear(void *body_in)
{
    shoal_msg_pull_t *body = body_in;
    free(body->dataset);
    free(body->node);
}

static const s_shape_t s_pull_shape = {
    sizeof(shoal_msg_pull_t), &shoal__sync_pull__descriptor, s_pull_check,
    s_pull_to_wire, s_pull_from_wire, s_pull_clear, NULL
};
S_DEFINE_CODEC(pull, shoal_msg_pull_t);

//  SyncChain

static int
s_chain_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_chain_t *body = body_in;
    return s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size);
}

static void
s_chain_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_chain_t *body = body_in;
    Shoal__SyncChain *wire = (Shoal__SyncChain *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    if (body->has_start)
        wire->start = s_wire_bytes(body->start, SHOAL_HASH_SIZE);
    wire->end = s_wire_bytes(body->end, SHOAL_HASH_SIZE);
}

static int
s_chain_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__SyncChain *wire = (const Shoal__SyncChain *) wire_in;
    shoal_msg_chain_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    if (wire->start.len) {
        body->has_start = true;
        if (s_hash_copy(&wire->start, body->start, error, error_size))
            return -1;
    }
    return s_hash_copy(&wire->end, body->end, error, error_size);
}

static void
s_chain_clear(void *body_in)
{
    shoal_msg_chain_t *body = body_in;
    free(body->dataset);
}

static const s_shape_t s_chain_shape = {
    sizeof(shoal_msg_chain_t), &shoal__sync_chain__descriptor, s_chain_check,
    s_chain_to_wire, s_chain_from_wire, s_chain_clear, NULL
};
S_DEFINE_CODEC(chain, shoal_msg_chain_t);

//  SnapshotRequest

static int
s_snapshot_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_snapshot_request_t *body = body_in;
    if (s_text_check("dataset", body->dataset, true, SHOAL_DATASET_MAX, error, error_size)
    ||  s_text_check("after_key", body->after_key, false, SHOAL_KV_KEY_MAX, error, error_size)
    ||  s_text_check("after_node", body->after_node, false, SHOAL_NAME_MAX, error, error_size))
        return -1;
    return 0;
}

static void
s_snapshot_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_snapshot_request_t *body = body_in;
    Shoal__SnapshotRequest *wire = (Shoal__SnapshotRequest *) wire_in;
    wire->dataset = s_wire_text(body->dataset);
    wire->entries = body->entries;
    wire->after_key = s_wire_text(body->after_key);
    wire->after_wall_ms = body->after_wall_ms;
    wire->after_logic = body->after_logic;
    wire->after_node = s_wire_text(body->after_node);
}

static int
s_snapshot_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error,
                             size_t error_size)
{
    const Shoal__SnapshotRequest *wire = (const Shoal__SnapshotRequest *) wire_in;
    shoal_msg_snapshot_request_t *body = body_out;
    body->dataset = s_text_copy(wire->dataset);
    body->entries = wire->entries;
    body->after_key = s_text_copy(wire->after_key);
    body->after_wall_ms = wire->after_wall_ms;
    body->after_logic = wire->after_logic;
    body->after_node = s_text_copy(wire->after_node);
    return 0;
}

static void
s_snapshot_request_clear(void *body_in)
{
    shoal_msg_snapshot_request_t *body = body_in;
    free(body->dataset);
    free(body->after_key);
    free(body->after_node);
}

static const s_shape_t s_snapshot_request_shape = {
    sizeof(shoal_msg_snapshot_request_t), &shoal__snapshot_request__descriptor,
    s_snapshot_request_check, s_snapshot_request_to_wire, s_snapshot_request_from_wire,
    s_snapshot_request_clear, NULL
};
S_DEFINE_CODEC(snapshot_request, shoal_msg_snapshot_request_t);

//  Snapshot

static int
s_snapshot_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_snapshot_t *body = body_in;
    if (s_array_check(&s_kv_item_shape, "records", body->records, body->record_count, error, error_size)
    ||  s_array_check(&s_entry_shape, "entries", body->entries, body->entry_count, error, error_size)
    ||  s_array_check(&s_head_shape, "heads", body->heads, body->head_count, error, error_size))
        return -1;
    return 0;
}

static void
s_snapshot_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_snapshot_t *body = body_in;
    Shoal__Snapshot *wire = (Shoal__Snapshot *) wire_in;
    wire->n_records = body->record_count;
    wire->records = (Shoal__KvItem **) s_array_to_wire(&s_kv_item_shape, body->records, body->record_count);
    wire->n_entries = body->entry_count;
    wire->entries = (Shoal__OplogEntry **) s_array_to_wire(&s_entry_shape, body->entries, body->entry_count);
    wire->n_heads = body->head_count;
    wire->heads = (Shoal__Head **) s_array_to_wire(&s_head_shape, body->heads, body->head_count);
    wire->watermark_wall_ms = body->watermark_wall_ms;
    wire->watermark_logic = body->watermark_logic;
    wire->more = body->more;
}

static int
s_snapshot_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Snapshot *wire = (const Shoal__Snapshot *) wire_in;
    shoal_msg_snapshot_t *body = body_out;
    body->records = s_array_new(&s_kv_item_shape, wire->n_records);
    body->record_count = wire->n_records;
    body->entries = s_array_new(&s_entry_shape, wire->n_entries);
    body->entry_count = wire->n_entries;
    body->heads = s_array_new(&s_head_shape, wire->n_heads);
    body->head_count = wire->n_heads;
    body->watermark_wall_ms = wire->watermark_wall_ms;
    body->watermark_logic = wire->watermark_logic;
    body->more = wire->more;
    if (s_array_from_wire(&s_kv_item_shape, "records", wire->records, wire->n_records,
                          body->records, error, error_size)
    ||  s_array_from_wire(&s_entry_shape, "entries", wire->entries, wire->n_entries,
                          body->entries, error, error_size))
        return -1;
    return s_array_from_wire(&s_head_shape, "heads", wire->heads, wire->n_heads, body->heads,
                             error, error_size);
}

static void
s_snapshot_clear(void *body_in)
{
    shoal_msg_snapshot_t *body = body_in;
    s_array_clear(&s_kv_item_shape, body->records, body->record_count);
    s_array_clear(&s_entry_shape, body->entries, body->entry_count);
    s_array_clear(&s_head_shape, body->heads, body->head_count);
}

static void
s_snapshot_release(ProtobufCMessage *wire_in)
{
    Shoal__Snapshot *wire = (Shoal__Snapshot *) wire_in;
    s_array_release(wire->records, wire->n_records);
    s_array_release(wire->entries, wire->n_entries);
    s_array_release(wire->heads, wire->n_heads);
}

static const s_shape_t s_snapshot_shape = {
    sizeof(shoal_msg_snapshot_t), &shoal__snapshot__descriptor, s_snapshot_check,
    s_snapshot_to_wire, s_snapshot_from_wire, s_snapshot_clear, s_snapshot_release
};
S_DEFINE_CODEC(snapshot, shoal_msg_snapshot_t);

//  PeerInfo: the element of Peers.

static int
s_peer_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_peer_t *body = body_in;
    if (s_node_id_check("node_id", body->node_id, error, error_size))
        return -1;
    if (!shoal_member_state_name(body->state)) {
        snprintf(error, error_size, "state %d is not a member state", (int) body->state);
        return -1;
    }
    return 0;
}

static void
s_peer_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_peer_t *body = body_in;
    Shoal__PeerInfo *wire = (Shoal__PeerInfo *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->endpoint = s_wire_text(body->endpoint);
    wire->state = (Shoal__MemberState) body->state;
    wire->incarnation = body->incarnation;
    wire->last_heard_ms = body->last_heard_ms;
    wire->lag = body->lag;
    wire->self = body->self;
}

static int
s_peer_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__PeerInfo *wire = (const Shoal__PeerInfo *) wire_in;
    shoal_msg_peer_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->endpoint = s_text_copy(wire->endpoint);
    body->state = (shoal_member_state_t) wire->state;
    body->incarnation = wire->incarnation;
    body->last_heard_ms = wire->last_heard_ms;
    body->lag = wire->lag;
    body->self = wire->self;
    return 0;
}

static void
s_peer_clear(void *body_in)
{
    shoal_msg_peer_t *body = body_in;
    free(body->node_id);
    free(body->endpoint);
}

static const s_shape_t s_peer_shape = {
    sizeof(shoal_msg_peer_t), &shoal__peer_info__descriptor, s_peer_check,
    s_peer_to_wire, s_peer_from_wire, s_peer_clear, NULL
};

//  Peers

S_DEFINE_LIST(peers, shoal_msg_peers_t, Shoal__Peers, shoal__peers__descriptor, peers, Shoal__PeerInfo, s_peer_shape, 0);

//  NodeRef

static int
s_node_ref_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_node_ref_t *body = body_in;
    return s_node_id_check("node_id", body->node_id, error, error_size);
}

static void
s_node_ref_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_node_ref_t *body = body_in;
    Shoal__NodeRef *wire = (Shoal__NodeRef *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
}

static int
s_node_ref_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__NodeRef *wire = (const Shoal__NodeRef *) wire_in;
    shoal_msg_node_ref_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    return 0;
}

static void
s_node_ref_clear(void *body_in)
{
    shoal_msg_node_ref_t *body = body_in;
    free(body->node_id);
}

static const s_shape_t s_node_ref_shape = {
    sizeof(shoal_msg_node_ref_t), &shoal__node_ref__descriptor, s_node_ref_check,
    s_node_ref_to_wire, s_node_ref_from_wire, s_node_ref_clear, NULL
};
S_DEFINE_CODEC(node_ref, shoal_msg_node_ref_t);

//  RegistryRecord: a value of the "registry" dataset, not a message body.

static int
s_registry_record_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_registry_record_t *body = body_in;
    if (s_text_check("claim_id", body->claim_id, true, SHOAL_KV_KEY_MAX, error, error_size)
    ||  s_node_id_check("owner", body->owner, error, error_size)
    ||  s_text_check("endpoint", body->endpoint, false, SHOAL_DATASET_MAX, error, error_size))
        return -1;
    if (body->tenant && *body->tenant && !shoal_tenant_valid(body->tenant)) {
        snprintf(error, error_size, "tenant '%s' is not org/project", body->tenant);
        return -1;
    }
    return 0;
}

static void
s_registry_record_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_registry_record_t *body = body_in;
    Shoal__RegistryRecord *wire = (Shoal__RegistryRecord *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->owner = s_wire_text(body->owner);
    wire->endpoint = s_wire_text(body->endpoint);
    wire->epoch = body->epoch;
    wire->tenant = s_wire_text(body->tenant);
    wire->released = body->released;
}

static int
s_registry_record_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error,
                            size_t error_size)
{
    const Shoal__RegistryRecord *wire = (const Shoal__RegistryRecord *) wire_in;
    shoal_registry_record_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->owner = s_text_copy(wire->owner);
    body->endpoint = s_text_copy(wire->endpoint);
    body->epoch = wire->epoch;
    body->tenant = s_text_copy(wire->tenant);
    body->released = wire->released;
    return 0;
}

static void
s_registry_record_clear(void *body_in)
{
    shoal_registry_record_t *body = body_in;
    free(body->claim_id);
    free(body->owner);
    free(body->endpoint);
    free(body->tenant);
}

static const s_shape_t s_registry_record_shape = {
    sizeof(shoal_registry_record_t), &shoal__registry_record__descriptor, s_registry_record_check,
    s_registry_record_to_wire, s_registry_record_from_wire, s_registry_record_clear, NULL
};
S_DEFINE_CODEC(registry_record, shoal_registry_record_t);

//  The claim bodies. A claim id is a name (it becomes a directory of the
//  guest), a tenant is org/project; the state is checked against its
//  enumeration in both directions, as the stored record's is.

static int
s_claim_id_check(const char *id, bool required, char *error, size_t error_size)
{
    if ((required || (id && *id)) && !shoal_claim_id_valid(id)) {
        snprintf(error, error_size, "claim id '%s' is not %s", id ? id : "", SHOAL_CLAIM_ID_RULE);
        return -1;
    }
    return 0;
}

static int
s_tenant_check(const char *tenant, char *error, size_t error_size)
{
    if (!shoal_tenant_valid(tenant)) {
        snprintf(error, error_size, "tenant '%s' is not org/project", tenant ? tenant : "");
        return -1;
    }
    return 0;
}

//  ClaimCreate

static int s_object_name_check(const char *name, bool required, char *error, size_t error_size);

static int
s_claim_create_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_create_t *body = body_in;
    if (s_tenant_check(body->tenant, error, error_size)
    ||  s_claim_id_check(body->id, false, error, error_size)
    ||  s_object_name_check(body->from_object, false, error, error_size))
        return -1;
    //  A guest made from an object takes its memory from the image.
    if (body->memory_bytes == 0 && !(body->from_object && *body->from_object)) {
        snprintf(error, error_size, "memory_bytes is 0");
        return -1;
    }
    if (body->driver && *body->driver && strcmp(body->driver, "proc") != 0 && strcmp(body->driver, "exec") != 0) {
        snprintf(error, error_size, "driver '%s' is not proc or exec", body->driver);
        return -1;
    }
    return 0;
}

static void
s_claim_create_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_create_t *body = body_in;
    Shoal__ClaimCreate *wire = (Shoal__ClaimCreate *) wire_in;
    wire->tenant = s_wire_text(body->tenant);
    wire->memory_bytes = body->memory_bytes;
    wire->driver = s_wire_text(body->driver);
    wire->id = s_wire_text(body->id);
    wire->disk_bytes = body->disk_bytes;
    wire->rate = body->rate;
    wire->from_object = s_wire_text(body->from_object);
}

static int
s_claim_create_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimCreate *wire = (const Shoal__ClaimCreate *) wire_in;
    shoal_msg_claim_create_t *body = body_out;
    body->tenant = s_text_copy(wire->tenant);
    body->memory_bytes = wire->memory_bytes;
    body->driver = s_text_copy(wire->driver);
    body->id = s_text_copy(wire->id);
    body->disk_bytes = wire->disk_bytes;
    body->rate = wire->rate;
    body->from_object = s_text_copy(wire->from_object);
    return 0;
}

static void
s_claim_create_clear(void *body_in)
{
    shoal_msg_claim_create_t *body = body_in;
    free(body->tenant);
    free(body->driver);
    free(body->id);
    free(body->from_object);
}

static const s_shape_t s_claim_create_shape = {
    sizeof(shoal_msg_claim_create_t), &shoal__claim_create__descriptor, s_claim_create_check,
    s_claim_create_to_wire, s_claim_create_from_wire, s_claim_create_clear, NULL
};
S_DEFINE_CODEC(claim_create, shoal_msg_claim_create_t);

//  ClaimRef

static int
s_claim_ref_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_ref_t *body = body_in;
    return s_claim_id_check(body->id, true, error, error_size);
}

static void
s_claim_ref_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_ref_t *body = body_in;
    ((Shoal__ClaimRef *) wire_in)->id = s_wire_text(body->id);
}

static int
s_claim_ref_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    ((shoal_msg_claim_ref_t *) body_out)->id = s_text_copy(((const Shoal__ClaimRef *) wire_in)->id);
    return 0;
}

static void
s_claim_ref_clear(void *body_in)
{
    free(((shoal_msg_claim_ref_t *) body_in)->id);
}

static const s_shape_t s_claim_ref_shape = {
    sizeof(shoal_msg_claim_ref_t), &shoal__claim_ref__descriptor, s_claim_ref_check,
    s_claim_ref_to_wire, s_claim_ref_from_wire, s_claim_ref_clear, NULL
};
S_DEFINE_CODEC(claim_ref, shoal_msg_claim_ref_t);

//  ClaimInfo: the body of most claim replies, and the element of a list.

static int
s_claim_info_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_info_t *body = body_in;
    if (s_claim_id_check(body->id, true, error, error_size)
    ||  s_tenant_check(body->tenant, error, error_size))
        return -1;
    if (!shoal_claim_state_name((shoal_claim_state_t) body->state)) {
        snprintf(error, error_size, "state %d is not a claim state", body->state);
        return -1;
    }
    return 0;
}

static void
s_claim_info_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_info_t *body = body_in;
    Shoal__ClaimInfo *wire = (Shoal__ClaimInfo *) wire_in;
    wire->id = s_wire_text(body->id);
    wire->tenant = s_wire_text(body->tenant);
    wire->state = (Shoal__ClaimState) body->state;
    wire->memory_bytes = body->memory_bytes;
    wire->driver = s_wire_text(body->driver);
    wire->epoch = body->epoch;
    wire->created_ms = body->created_ms;
    wire->error = s_wire_text(body->error);
    wire->owner = s_wire_text(body->owner);
}

static int
s_claim_info_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimInfo *wire = (const Shoal__ClaimInfo *) wire_in;
    shoal_msg_claim_info_t *body = body_out;
    body->id = s_text_copy(wire->id);
    body->tenant = s_text_copy(wire->tenant);
    body->state = (int) wire->state;
    body->memory_bytes = wire->memory_bytes;
    body->driver = s_text_copy(wire->driver);
    body->epoch = wire->epoch;
    body->created_ms = wire->created_ms;
    body->error = s_text_copy(wire->error);
    body->owner = s_text_copy(wire->owner);
    return 0;
}

static void
s_claim_info_clear(void *body_in)
{
    shoal_msg_claim_info_t *body = body_in;
    free(body->id);
    free(body->tenant);
    free(body->driver);
    free(body->error);
    free(body->owner);
}

static const s_shape_t s_claim_info_shape = {
    sizeof(shoal_msg_claim_info_t), &shoal__claim_info__descriptor, s_claim_info_check,
    s_claim_info_to_wire, s_claim_info_from_wire, s_claim_info_clear, NULL
};
S_DEFINE_CODEC(claim_info, shoal_msg_claim_info_t);

//  ClaimList

S_DEFINE_LIST(claim_list, shoal_msg_claim_list_t, Shoal__ClaimList, shoal__claim_list__descriptor, claims, Shoal__ClaimInfo, s_claim_info_shape, SHOAL_CLAIM_LIST_MAX);

//  ClaimCall

static int
s_claim_call_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_call_t *body = body_in;
    if (s_claim_id_check(body->id, true, error, error_size)
    ||  s_text_check("key", body->key, true, SHOAL_CALL_KEY_MAX, error, error_size)
    ||  s_bytes_check("value", body->value, body->value_size, error, error_size))
        return -1;
    bool put = body->op && strcmp(body->op, "put") == 0;
    bool get = body->op && strcmp(body->op, "get") == 0;
    if (!put && !get) {
        snprintf(error, error_size, "op '%s' is not put or get", body->op ? body->op : "");
        return -1;
    }
    if (body->value_size > SHOAL_CALL_VALUE_MAX || (get && body->value_size)) {
        snprintf(error, error_size, "a %s call with a %zu-byte value (at most %d, and none for get)",
                 body->op, body->value_size, SHOAL_CALL_VALUE_MAX);
        return -1;
    }
    return 0;
}

static void
s_claim_call_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_call_t *body = body_in;
    Shoal__ClaimCall *wire = (Shoal__ClaimCall *) wire_in;
    wire->id = s_wire_text(body->id);
    wire->op = s_wire_text(body->op);
    wire->key = s_wire_text(body->key);
    wire->value = s_wire_bytes(body->value, body->value_size);
}

static int
s_claim_call_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimCall *wire = (const Shoal__ClaimCall *) wire_in;
    shoal_msg_claim_call_t *body = body_out;
    body->id = s_text_copy(wire->id);
    body->op = s_text_copy(wire->op);
    body->key = s_text_copy(wire->key);
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    return 0;
}

static void
s_claim_call_clear(void *body_in)
{
    shoal_msg_claim_call_t *body = body_in;
    free(body->id);
    free(body->op);
    free(body->key);
    free(body->value);
}

static const s_shape_t s_claim_call_shape = {
    sizeof(shoal_msg_claim_call_t), &shoal__claim_call__descriptor, s_claim_call_check,
    s_claim_call_to_wire, s_claim_call_from_wire, s_claim_call_clear, NULL
};
S_DEFINE_CODEC(claim_call, shoal_msg_claim_call_t);

//  ClaimCallReply

static int
s_claim_call_reply_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_call_reply_t *body = body_in;
    if (s_bytes_check("value", body->value, body->value_size, error, error_size))
        return -1;
    if (body->value_size > SHOAL_CALL_VALUE_MAX) {
        snprintf(error, error_size, "value of %zu bytes exceeds %d", body->value_size, SHOAL_CALL_VALUE_MAX);
        return -1;
    }
    return 0;
}

static void
s_claim_call_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_call_reply_t *body = body_in;
    Shoal__ClaimCallReply *wire = (Shoal__ClaimCallReply *) wire_in;
    wire->found = body->found;
    wire->value = s_wire_bytes(body->value, body->value_size);
}

static int
s_claim_call_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimCallReply *wire = (const Shoal__ClaimCallReply *) wire_in;
    shoal_msg_claim_call_reply_t *body = body_out;
    body->found = wire->found;
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    return 0;
}

static void
s_claim_call_reply_clear(void *body_in)
{
    free(((shoal_msg_claim_call_reply_t *) body_in)->value);
}

static const s_shape_t s_claim_call_reply_shape = {
    sizeof(shoal_msg_claim_call_reply_t), &shoal__claim_call_reply__descriptor, s_claim_call_reply_check,
    s_claim_call_reply_to_wire, s_claim_call_reply_from_wire, s_claim_call_reply_clear, NULL
};
S_DEFINE_CODEC(claim_call_reply, shoal_msg_claim_call_reply_t);

//  Resource-scoped keys: claim_txn, its reply, and a claim's key space.
//  Every enumeration is checked in both directions, as a claim's state is.

static const char *s_key_target_names[] = {
    [SHOAL_KEY_TARGET_VALUE] = "value",
    [SHOAL_KEY_TARGET_VERSION] = "version",
    [SHOAL_KEY_TARGET_CREATE] = "create",
    [SHOAL_KEY_TARGET_MOD] = "mod",
    [SHOAL_KEY_TARGET_LEASE] = "lease",
};

static const char *s_key_result_names[] = {
    [SHOAL_KEY_EQUAL] = "equal",
    [SHOAL_KEY_NOT_EQUAL] = "not_equal",
    [SHOAL_KEY_GREATER] = "greater",
    [SHOAL_KEY_LESS] = "less",
};

static const char *s_key_op_names[] = {
    [SHOAL_KEY_PUT] = "put",
    [SHOAL_KEY_DELETE] = "delete",
    [SHOAL_KEY_GET] = "get",
};

const char *
shoal_key_target_name(shoal_key_target_t target)
{
    int value = (int) target;
    return value >= SHOAL_KEY_TARGET_VALUE && value <= SHOAL_KEY_TARGET_LEASE ? s_key_target_names[value] : NULL;
}

const char *
shoal_key_result_name(shoal_key_result_t result)
{
    int value = (int) result;
    return value >= SHOAL_KEY_EQUAL && value <= SHOAL_KEY_LESS ? s_key_result_names[value] : NULL;
}

const char *
shoal_key_op_name(shoal_key_op_type_t type)
{
    int value = (int) type;
    return value >= SHOAL_KEY_PUT && value <= SHOAL_KEY_GET ? s_key_op_names[value] : NULL;
}

//  A claim key: 1 to SHOAL_CLAIM_KEY_MAX bytes (empty only when EMPTY_OK).
static int
s_claim_key_check(const char *key, bool empty_ok, char *error, size_t error_size)
{
    return s_text_check("key", key, !empty_ok, SHOAL_CLAIM_KEY_MAX, error, error_size);
}

static int
s_claim_value_check(const uint8_t *value, size_t size, char *error, size_t error_size)
{
    if (s_bytes_check("value", value, size, error, error_size))
        return -1;
    if (size > SHOAL_CLAIM_VALUE_MAX) {
        snprintf(error, error_size, "value of %zu bytes exceeds %d", size, SHOAL_CLAIM_VALUE_MAX);
        return -1;
    }
    return 0;
}

//  KeyCompare

static int
s_key_compare_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_key_compare_t *body = body_in;
    if (s_claim_key_check(body->key, false, error, error_size)
    ||  s_claim_value_check(body->value, body->value_size, error, error_size))
        return -1;
    if (!shoal_key_target_name(body->target)) {
        snprintf(error, error_size, "target %d is not value, version, create, mod or lease", (int) body->target);
        return -1;
    }
    if (!shoal_key_result_name(body->result)) {
        snprintf(error, error_size, "result %d is not equal, not_equal, greater or less", (int) body->result);
        return -1;
    }
    if (body->target != SHOAL_KEY_TARGET_VALUE && body->value_size) {
        snprintf(error, error_size, "a %s compare carries a value", shoal_key_target_name(body->target));
        return -1;
    }
    return 0;
}

static void
s_key_compare_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_key_compare_t *body = body_in;
    Shoal__KeyCompare *wire = (Shoal__KeyCompare *) wire_in;
    wire->key = s_wire_text(body->key);
    wire->target = (Shoal__KeyCompareTarget) body->target;
    wire->result = (Shoal__KeyCompareResult) body->result;
    wire->value = s_wire_bytes(body->value, body->value_size);
    wire->number = body->number;
}

static int
s_key_compare_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KeyCompare *wire = (const Shoal__KeyCompare *) wire_in;
    shoal_msg_key_compare_t *body = body_out;
    body->key = s_text_copy(wire->key);
    body->target = (shoal_key_target_t) wire->target;
    body->result = (shoal_key_result_t) wire->result;
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    body->number = wire->number;
    return 0;
}

static void
s_key_compare_clear(void *body_in)
{
    shoal_msg_key_compare_t *body = body_in;
    free(body->key);
    free(body->value);
}

static const s_shape_t s_key_compare_shape = {
    sizeof(shoal_msg_key_compare_t), &shoal__key_compare__descriptor, s_key_compare_check,
    s_key_compare_to_wire, s_key_compare_from_wire, s_key_compare_clear, NULL
};

//  KeyOp

static int
s_key_op_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_key_op_t *body = body_in;
    if (!shoal_key_op_name(body->type)) {
        snprintf(error, error_size, "op %d is not put, delete or get", (int) body->type);
        return -1;
    }
    bool put = body->type == SHOAL_KEY_PUT;
    if (s_claim_key_check(body->key, body->prefix, error, error_size)
    ||  s_claim_value_check(body->value, body->value_size, error, error_size))
        return -1;
    if (put && body->prefix) {
        snprintf(error, error_size, "a put of '%s' asks for a prefix", body->key);
        return -1;
    }
    if (!put && (body->value_size || body->lease)) {
        snprintf(error, error_size, "a %s of '%s' carries a value or a lease", shoal_key_op_name(body->type),
                 body->key);
        return -1;
    }
    return 0;
}

static void
s_key_op_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_key_op_t *body = body_in;
    Shoal__KeyOp *wire = (Shoal__KeyOp *) wire_in;
    wire->type = (Shoal__KeyOpType) body->type;
    wire->key = s_wire_text(body->key);
    wire->value = s_wire_bytes(body->value, body->value_size);
    wire->lease = body->lease;
    wire->prefix = body->prefix;
}

static int
s_key_op_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KeyOp *wire = (const Shoal__KeyOp *) wire_in;
    shoal_msg_key_op_t *body = body_out;
    body->type = (shoal_key_op_type_t) wire->type;
    body->key = s_text_copy(wire->key);
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    body->lease = wire->lease;
    body->prefix = wire->prefix;
    return 0;
}

static void
s_key_op_clear(void *body_in)
{
    shoal_msg_key_op_t *body = body_in;
    free(body->key);
    free(body->value);
}

static const s_shape_t s_key_op_shape = {
    sizeof(shoal_msg_key_op_t), &shoal__key_op__descriptor, s_key_op_check,
    s_key_op_to_wire, s_key_op_from_wire, s_key_op_clear, NULL
};

//  ClaimTxn

//  Checks that COUNT elements of one part of a transaction are few enough.
static int
s_txn_part_check(const char *field, size_t count, char *error, size_t error_size)
{
    if (count > SHOAL_TXN_OPS_MAX) {
        snprintf(error, error_size, "%zu %s exceed %d", count, field, SHOAL_TXN_OPS_MAX);
        return -1;
    }
    return 0;
}

static int
s_claim_txn_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_txn_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size)
    ||  s_txn_part_check("compares", body->compare_count, error, error_size)
    ||  s_txn_part_check("success ops", body->success_count, error, error_size)
    ||  s_txn_part_check("failure ops", body->failure_count, error, error_size)
    ||  s_array_check(&s_key_compare_shape, "compares", body->compares, body->compare_count, error, error_size)
    ||  s_array_check(&s_key_op_shape, "success", body->success, body->success_count, error, error_size)
    ||  s_array_check(&s_key_op_shape, "failure", body->failure, body->failure_count, error, error_size))
        return -1;
    return 0;
}

static void
s_claim_txn_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_txn_t *body = body_in;
    Shoal__ClaimTxn *wire = (Shoal__ClaimTxn *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->n_compares = body->compare_count;
    wire->compares = (Shoal__KeyCompare **) s_array_to_wire(&s_key_compare_shape, body->compares,
                                                            body->compare_count);
    wire->n_success = body->success_count;
    wire->success = (Shoal__KeyOp **) s_array_to_wire(&s_key_op_shape, body->success, body->success_count);
    wire->n_failure = body->failure_count;
    wire->failure = (Shoal__KeyOp **) s_array_to_wire(&s_key_op_shape, body->failure, body->failure_count);
}

static int
s_claim_txn_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimTxn *wire = (const Shoal__ClaimTxn *) wire_in;
    shoal_msg_claim_txn_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->compares = s_array_new(&s_key_compare_shape, wire->n_compares);
    body->compare_count = wire->n_compares;
    body->success = s_array_new(&s_key_op_shape, wire->n_success);
    body->success_count = wire->n_success;
    body->failure = s_array_new(&s_key_op_shape, wire->n_failure);
    body->failure_count = wire->n_failure;
    if (s_array_from_wire(&s_key_compare_shape, "compares", wire->compares, wire->n_compares, body->compares,
                          error, error_size)
    ||  s_array_from_wire(&s_key_op_shape, "success", wire->success, wire->n_success, body->success,
                          error, error_size)
    ||  s_array_from_wire(&s_key_op_shape, "failure", wire->failure, wire->n_failure, body->failure,
                          error, error_size))
        return -1;
    return 0;
}

static void
s_claim_txn_clear(void *body_in)
{
    shoal_msg_claim_txn_t *body = body_in;
    free(body->claim_id);
    s_array_clear(&s_key_compare_shape, body->compares, body->compare_count);
    s_array_clear(&s_key_op_shape, body->success, body->success_count);
    s_array_clear(&s_key_op_shape, body->failure, body->failure_count);
}

static void
s_claim_txn_release(ProtobufCMessage *wire_in)
{
    Shoal__ClaimTxn *wire = (Shoal__ClaimTxn *) wire_in;
    s_array_release(wire->compares, wire->n_compares);
    s_array_release(wire->success, wire->n_success);
    s_array_release(wire->failure, wire->n_failure);
}

static const s_shape_t s_claim_txn_shape = {
    sizeof(shoal_msg_claim_txn_t), &shoal__claim_txn__descriptor, s_claim_txn_check,
    s_claim_txn_to_wire, s_claim_txn_from_wire, s_claim_txn_clear, s_claim_txn_release
};
S_DEFINE_CODEC(claim_txn, shoal_msg_claim_txn_t);

//  KeyValue: an element of replies and moves, and the record of a key.

static int
s_key_value_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_key_value_t *body = body_in;
    if (s_claim_key_check(body->key, false, error, error_size)
    ||  s_claim_value_check(body->value, body->value_size, error, error_size))
        return -1;
    if (!body->version || !body->create_revision || body->mod_revision < body->create_revision) {
        snprintf(error, error_size, "key '%s': version %" PRIu64 ", created at revision %" PRIu64 " and written "
                 "at %" PRIu64 " do not make a key", body->key, body->version, body->create_revision,
                 body->mod_revision);
        return -1;
    }
    return 0;
}

static void
s_key_value_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_key_value_t *body = body_in;
    Shoal__KeyValue *wire = (Shoal__KeyValue *) wire_in;
    wire->key = s_wire_text(body->key);
    wire->value = s_wire_bytes(body->value, body->value_size);
    wire->version = body->version;
    wire->create_revision = body->create_revision;
    wire->mod_revision = body->mod_revision;
    wire->lease = body->lease;
}

static int
s_key_value_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KeyValue *wire = (const Shoal__KeyValue *) wire_in;
    shoal_msg_key_value_t *body = body_out;
    body->key = s_text_copy(wire->key);
    s_bytes_copy(&wire->value, &body->value, &body->value_size);
    body->version = wire->version;
    body->create_revision = wire->create_revision;
    body->mod_revision = wire->mod_revision;
    body->lease = wire->lease;
    return 0;
}

static void
s_key_value_clear(void *body_in)
{
    shoal_msg_key_value_t *body = body_in;
    free(body->key);
    free(body->value);
}

static const s_shape_t s_key_value_shape = {
    sizeof(shoal_msg_key_value_t), &shoal__key_value__descriptor, s_key_value_check,
    s_key_value_to_wire, s_key_value_from_wire, s_key_value_clear, NULL
};
S_DEFINE_CODEC(key_value, shoal_msg_key_value_t);

//  KeyOpResult

static int
s_key_result_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_key_result_t *body = body_in;
    if (!shoal_key_op_name(body->type)) {
        snprintf(error, error_size, "op %d is not put, delete or get", (int) body->type);
        return -1;
    }
    return s_array_check(&s_key_value_shape, "kvs", body->kvs, body->count, error, error_size);
}

static void
s_key_result_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_key_result_t *body = body_in;
    Shoal__KeyOpResult *wire = (Shoal__KeyOpResult *) wire_in;
    wire->type = (Shoal__KeyOpType) body->type;
    wire->n_kvs = body->count;
    wire->kvs = (Shoal__KeyValue **) s_array_to_wire(&s_key_value_shape, body->kvs, body->count);
    wire->deleted = body->deleted;
}

static int
s_key_result_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__KeyOpResult *wire = (const Shoal__KeyOpResult *) wire_in;
    shoal_msg_key_result_t *body = body_out;
    body->type = (shoal_key_op_type_t) wire->type;
    body->kvs = s_array_new(&s_key_value_shape, wire->n_kvs);
    body->count = wire->n_kvs;
    body->deleted = wire->deleted;
    return s_array_from_wire(&s_key_value_shape, "kvs", wire->kvs, wire->n_kvs, body->kvs, error, error_size);
}

static void
s_key_result_clear(void *body_in)
{
    shoal_msg_key_result_t *body = body_in;
    s_array_clear(&s_key_value_shape, body->kvs, body->count);
}

static void
s_key_result_release(ProtobufCMessage *wire_in)
{
    Shoal__KeyOpResult *wire = (Shoal__KeyOpResult *) wire_in;
    s_array_release(wire->kvs, wire->n_kvs);
}

//  Its release frees the element's own array of keys: the reply's release
//  calls it for each result before the results' array goes.
static const s_shape_t s_key_result_shape = {
    sizeof(shoal_msg_key_result_t), &shoal__key_op_result__descriptor, s_key_result_check,
    s_key_result_to_wire, s_key_result_from_wire, s_key_result_clear, s_key_result_release
};

//  ClaimTxnReply

static int
s_claim_txn_reply_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_txn_reply_t *body = body_in;
    if (s_txn_part_check("results", body->count, error, error_size))
        return -1;
    return s_array_check(&s_key_result_shape, "results", body->results, body->count, error, error_size);
}

static void
s_claim_txn_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_txn_reply_t *body = body_in;
    Shoal__ClaimTxnReply *wire = (Shoal__ClaimTxnReply *) wire_in;
    wire->succeeded = body->succeeded;
    wire->revision = body->revision;
    wire->n_results = body->count;
    wire->results = (Shoal__KeyOpResult **) s_array_to_wire(&s_key_result_shape, body->results, body->count);
    wire->owner = s_wire_text(body->owner);
}

static int
s_claim_txn_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimTxnReply *wire = (const Shoal__ClaimTxnReply *) wire_in;
    shoal_msg_claim_txn_reply_t *body = body_out;
    body->succeeded = wire->succeeded;
    body->revision = wire->revision;
    body->owner = s_text_copy(wire->owner);
    body->results = s_array_new(&s_key_result_shape, wire->n_results);
    body->count = wire->n_results;
    return s_array_from_wire(&s_key_result_shape, "results", wire->results, wire->n_results, body->results,
                             error, error_size);
}

static void
s_claim_txn_reply_clear(void *body_in)
{
    shoal_msg_claim_txn_reply_t *body = body_in;
    s_array_clear(&s_key_result_shape, body->results, body->count);
    free(body->owner);
}

static void
s_claim_txn_reply_release(ProtobufCMessage *wire_in)
{
    Shoal__ClaimTxnReply *wire = (Shoal__ClaimTxnReply *) wire_in;
    for (size_t i = 0; i < wire->n_results; i++)
        s_key_result_release(&wire->results[i]->base);
    s_array_release(wire->results, wire->n_results);
}

static const s_shape_t s_claim_txn_reply_shape = {
    sizeof(shoal_msg_claim_txn_reply_t), &shoal__claim_txn_reply__descriptor, s_claim_txn_reply_check,
    s_claim_txn_reply_to_wire, s_claim_txn_reply_from_wire, s_claim_txn_reply_clear, s_claim_txn_reply_release
};
S_DEFINE_CODEC(claim_txn_reply, shoal_msg_claim_txn_reply_t);


//  Leases

static const char *s_lease_op_names[] = {
    [SHOAL_LEASE_GRANT] = "grant",
    [SHOAL_LEASE_KEEPALIVE] = "keepalive",
    [SHOAL_LEASE_REVOKE] = "revoke",
    [SHOAL_LEASE_TTL] = "ttl",
    [SHOAL_LEASE_LIST] = "list",
};

const char *
shoal_lease_op_name(shoal_lease_op_t op)
{
    int value = (int) op;
    return value >= SHOAL_LEASE_GRANT && value <= SHOAL_LEASE_LIST ? s_lease_op_names[value] : NULL;
}

static int
s_lease_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_lease_request_t *body = body_in;
    if (!shoal_lease_op_name(body->op)) {
        snprintf(error, error_size, "op %d is not grant, keepalive, revoke, ttl or list", (int) body->op);
        return -1;
    }
    bool names_one = body->op == SHOAL_LEASE_KEEPALIVE || body->op == SHOAL_LEASE_REVOKE || body->op == SHOAL_LEASE_TTL;
    if (names_one && !body->id) {
        snprintf(error, error_size, "a lease %s names no lease (id 0)", shoal_lease_op_name(body->op));
        return -1;
    }
    if (body->op == SHOAL_LEASE_GRANT && body->ttl_ms < SHOAL_LEASE_TTL_MIN_MS) {
        snprintf(error, error_size, "a TTL of %" PRIu64 " ms is below the %d ms a lease lasts at least", body->ttl_ms,
                 SHOAL_LEASE_TTL_MIN_MS);
        return -1;
    }
    return 0;
}

static void
s_lease_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_lease_request_t *body = body_in;
    Shoal__LeaseRequest *wire = (Shoal__LeaseRequest *) wire_in;
    wire->op = (Shoal__LeaseOp) body->op;
    wire->id = body->id;
    wire->ttl_ms = body->ttl_ms;
}

static int
s_lease_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__LeaseRequest *wire = (const Shoal__LeaseRequest *) wire_in;
    shoal_msg_lease_request_t *body = body_out;
    body->op = (shoal_lease_op_t) wire->op;
    body->id = wire->id;
    body->ttl_ms = wire->ttl_ms;
    return 0;
}

static void
s_lease_request_clear(void *body_in)
{
}

static const s_shape_t s_lease_request_shape = {
    sizeof(shoal_msg_lease_request_t), &shoal__lease_request__descriptor, s_lease_request_check,
    s_lease_request_to_wire, s_lease_request_from_wire, s_lease_request_clear, NULL
};
S_DEFINE_CODEC(lease_request, shoal_msg_lease_request_t);

static int
s_lease_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_lease_t *body = body_in;
    if (!body->id) {
        snprintf(error, error_size, "lease id is 0");
        return -1;
    }
    if (body->tenant && *body->tenant && s_tenant_check(body->tenant, error, error_size))
        return -1;
    if (body->home && *body->home && s_node_id_check("home", body->home, error, error_size))
        return -1;
    return 0;
}

static void
s_lease_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_lease_t *body = body_in;
    Shoal__LeaseInfo *wire = (Shoal__LeaseInfo *) wire_in;
    wire->id = body->id;
    wire->ttl_ms = body->ttl_ms;
    wire->expires_ms = body->expires_ms;
    wire->holder = s_wire_text(body->holder);
    wire->tenant = s_wire_text(body->tenant);
    wire->granted_ms = body->granted_ms;
    wire->remaining_ms = body->remaining_ms;
    wire->attached = body->attached;
    wire->home = s_wire_text(body->home);
}

static int
s_lease_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__LeaseInfo *wire = (const Shoal__LeaseInfo *) wire_in;
    shoal_msg_lease_t *body = body_out;
    body->id = wire->id;
    body->ttl_ms = wire->ttl_ms;
    body->expires_ms = wire->expires_ms;
    body->holder = s_text_copy(wire->holder);
    body->tenant = s_text_copy(wire->tenant);
    body->granted_ms = wire->granted_ms;
    body->remaining_ms = wire->remaining_ms;
    body->attached = wire->attached;
    body->home = s_text_copy(wire->home);
    return 0;
}

static void
s_lease_clear(void *body_in)
{
    shoal_msg_lease_t *body = body_in;
    free(body->holder);
    free(body->tenant);
    free(body->home);
}

static const s_shape_t s_lease_shape = {
    sizeof(shoal_msg_lease_t), &shoal__lease_info__descriptor, s_lease_check,
    s_lease_to_wire, s_lease_from_wire, s_lease_clear, NULL
};
S_DEFINE_CODEC(lease, shoal_msg_lease_t);

static int
s_leases_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_leases_t *body = body_in;
    if (body->count > SHOAL_LEASES_MAX) {
        snprintf(error, error_size, "%zu leases exceed %d", body->count, SHOAL_LEASES_MAX);
        return -1;
    }
    return s_array_check(&s_lease_shape, "leases", body->leases, body->count, error, error_size);
}

static void
s_leases_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_leases_t *body = body_in;
    Shoal__Leases *wire = (Shoal__Leases *) wire_in;
    wire->n_leases = body->count;
    wire->leases = (Shoal__LeaseInfo **) s_array_to_wire(&s_lease_shape, body->leases, body->count);
    wire->shortened = body->shortened;
}

static int
s_leases_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Leases *wire = (const Shoal__Leases *) wire_in;
    shoal_msg_leases_t *body = body_out;
    body->leases = s_array_new(&s_lease_shape, wire->n_leases);
    body->count = wire->n_leases;
    body->shortened = wire->shortened;
    return s_array_from_wire(&s_lease_shape, "leases", wire->leases, wire->n_leases, body->leases, error, error_size);
}

static void
s_leases_clear(void *body_in)
{
    shoal_msg_leases_t *body = body_in;
    s_array_clear(&s_lease_shape, body->leases, body->count);
}

static void
s_leases_release(ProtobufCMessage *wire_in)
{
    Shoal__Leases *wire = (Shoal__Leases *) wire_in;
    s_array_release(wire->leases, wire->n_leases);
}

static const s_shape_t s_leases_shape = {
    sizeof(shoal_msg_leases_t), &shoal__leases__descriptor, s_leases_check,
    s_leases_to_wire, s_leases_from_wire, s_leases_clear, s_leases_release
};
S_DEFINE_CODEC(leases, shoal_msg_leases_t);

//  Locks

static const char *s_lock_op_names[] = {
    [SHOAL_LOCK_ACQUIRE] = "acquire",
    [SHOAL_LOCK_RELEASE] = "release",
    [SHOAL_LOCK_LIST] = "list",
    [SHOAL_LOCK_SWEEP] = "sweep",
};

static const char *s_lock_mode_names[] = {
    [SHOAL_LOCK_READ] = "read",
    [SHOAL_LOCK_WRITE] = "write",
    [SHOAL_LOCK_WAIT] = "wait",
};

const char *
shoal_lock_op_name(shoal_lock_op_t op)
{
    int value = (int) op;
    return value >= SHOAL_LOCK_ACQUIRE && value <= SHOAL_LOCK_SWEEP ? s_lock_op_names[value] : NULL;
}

const char *
shoal_lock_mode_name(shoal_lock_mode_t mode)
{
    int value = (int) mode;
    return value >= SHOAL_LOCK_READ && value <= SHOAL_LOCK_WAIT ? s_lock_mode_names[value] : NULL;
}

static int
s_lock_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_lock_request_t *body = body_in;
    if (!shoal_lock_op_name(body->op)) {
        snprintf(error, error_size, "op %d is not acquire, release, list or sweep", (int) body->op);
        return -1;
    }
    //  A sweep names a node, not a claim.
    bool sweep = body->op == SHOAL_LOCK_SWEEP;
    if (sweep && (s_node_id_check("holder_node", body->holder_node, error, error_size)
               || s_claim_id_check(body->claim_id, false, error, error_size)))
        return -1;
    if (sweep && !body->holder_boot) {
        snprintf(error, error_size, "a sweep names the run it comes from (holder_boot)");
        return -1;
    }
    if (!sweep && s_claim_id_check(body->claim_id, true, error, error_size))
        return -1;
    if (s_text_check("holder", body->holder, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("holder", body->holder, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("holder_node", body->holder_node, false, SHOAL_NAME_MAX, error, error_size))
        return -1;
    if (body->op == SHOAL_LOCK_ACQUIRE && body->mode != SHOAL_LOCK_READ && body->mode != SHOAL_LOCK_WRITE) {
        snprintf(error, error_size, "an acquire asks for mode %d, not read or write", (int) body->mode);
        return -1;
    }
    if (body->wait && (body->op != SHOAL_LOCK_ACQUIRE || body->mode != SHOAL_LOCK_WRITE)) {
        snprintf(error, error_size, "only a writer's acquire may wait");
        return -1;
    }
    return 0;
}

static void
s_lock_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_lock_request_t *body = body_in;
    Shoal__LockRequest *wire = (Shoal__LockRequest *) wire_in;
    wire->op = (Shoal__LockOp) body->op;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->holder = s_wire_text(body->holder);
    wire->mode = (Shoal__LockMode) body->mode;
    wire->wait = body->wait;
    wire->lease = body->lease;
    wire->holder_node = s_wire_text(body->holder_node);
    wire->holder_boot = body->holder_boot;
    wire->holder_incarnation = body->holder_incarnation;
}

static int
s_lock_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__LockRequest *wire = (const Shoal__LockRequest *) wire_in;
    shoal_msg_lock_request_t *body = body_out;
    body->op = (shoal_lock_op_t) wire->op;
    body->claim_id = s_text_copy(wire->claim_id);
    body->holder = s_text_copy(wire->holder);
    body->mode = (shoal_lock_mode_t) wire->mode;
    body->wait = wire->wait;
    body->lease = wire->lease;
    body->holder_node = s_text_copy(wire->holder_node);
    body->holder_boot = wire->holder_boot;
    body->holder_incarnation = wire->holder_incarnation;
    return 0;
}

static void
s_lock_request_clear(void *body_in)
{
    shoal_msg_lock_request_t *body = body_in;
    free(body->claim_id);
    free(body->holder);
    free(body->holder_node);
}

static const s_shape_t s_lock_request_shape = {
    sizeof(shoal_msg_lock_request_t), &shoal__lock_request__descriptor, s_lock_request_check,
    s_lock_request_to_wire, s_lock_request_from_wire, s_lock_request_clear, NULL
};
S_DEFINE_CODEC(lock_request, shoal_msg_lock_request_t);

static int
s_lock_record_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_lock_record_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size)
    ||  s_text_check("holder", body->holder, true, SHOAL_LOCK_HOLDER_MAX, error, error_size))
        return -1;
    if (!shoal_lock_mode_name(body->mode)) {
        snprintf(error, error_size, "mode %d is not read, write or wait", (int) body->mode);
        return -1;
    }
    return 0;
}

static void
s_lock_record_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_lock_record_t *body = body_in;
    Shoal__LockRecord *wire = (Shoal__LockRecord *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->holder = s_wire_text(body->holder);
    wire->holder_node = s_wire_text(body->holder_node);
    wire->mode = (Shoal__LockMode) body->mode;
    wire->lease = body->lease;
    wire->time_ms = body->time_ms;
    wire->holder_boot = body->holder_boot;
}

static int
s_lock_record_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__LockRecord *wire = (const Shoal__LockRecord *) wire_in;
    shoal_msg_lock_record_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->holder = s_text_copy(wire->holder);
    body->holder_node = s_text_copy(wire->holder_node);
    body->mode = (shoal_lock_mode_t) wire->mode;
    body->lease = wire->lease;
    body->time_ms = wire->time_ms;
    body->holder_boot = wire->holder_boot;
    return 0;
}

static void
s_lock_record_clear(void *body_in)
{
    shoal_msg_lock_record_t *body = body_in;
    free(body->claim_id);
    free(body->holder);
    free(body->holder_node);
}

static const s_shape_t s_lock_record_shape = {
    sizeof(shoal_msg_lock_record_t), &shoal__lock_record__descriptor, s_lock_record_check,
    s_lock_record_to_wire, s_lock_record_from_wire, s_lock_record_clear, NULL
};
S_DEFINE_CODEC(lock_record, shoal_msg_lock_record_t);

static int
s_locks_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_locks_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size))
        return -1;
    if (body->count > SHOAL_LOCK_RECORDS_MAX) {
        snprintf(error, error_size, "%zu lock records exceed %d", body->count, SHOAL_LOCK_RECORDS_MAX);
        return -1;
    }
    //  The seed's rule, checked where the state is written and read:
    //  readers and a writer never together.
    if (body->readers && body->writer && *body->writer) {
        snprintf(error, error_size, "lock of '%s': %" PRIu64 " reader(s) beside writer '%s'", body->claim_id,
                 body->readers, body->writer);
        return -1;
    }
    return s_array_check(&s_lock_record_shape, "records", body->records, body->count, error, error_size);
}

static void
s_locks_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_locks_t *body = body_in;
    Shoal__Locks *wire = (Shoal__Locks *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->readers = body->readers;
    wire->writer = s_wire_text(body->writer);
    wire->waiter = s_wire_text(body->waiter);
    wire->n_records = body->count;
    wire->records = (Shoal__LockRecord **) s_array_to_wire(&s_lock_record_shape, body->records, body->count);
    wire->granted = body->granted;
}

static int
s_locks_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Locks *wire = (const Shoal__Locks *) wire_in;
    shoal_msg_locks_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->readers = wire->readers;
    body->writer = s_text_copy(wire->writer);
    body->waiter = s_text_copy(wire->waiter);
    body->granted = wire->granted;
    body->records = s_array_new(&s_lock_record_shape, wire->n_records);
    body->count = wire->n_records;
    return s_array_from_wire(&s_lock_record_shape, "records", wire->records, wire->n_records, body->records,
                             error, error_size);
}

static void
s_locks_clear(void *body_in)
{
    shoal_msg_locks_t *body = body_in;
    free(body->claim_id);
    free(body->writer);
    free(body->waiter);
    s_array_clear(&s_lock_record_shape, body->records, body->count);
}

static void
s_locks_release(ProtobufCMessage *wire_in)
{
    Shoal__Locks *wire = (Shoal__Locks *) wire_in;
    s_array_release(wire->records, wire->n_records);
}

static const s_shape_t s_locks_shape = {
    sizeof(shoal_msg_locks_t), &shoal__locks__descriptor, s_locks_check,
    s_locks_to_wire, s_locks_from_wire, s_locks_clear, s_locks_release
};
S_DEFINE_CODEC(locks, shoal_msg_locks_t);

//  ClaimKeys

static int
s_claim_keys_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_keys_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size))
        return -1;
    if (body->bytes > SHOAL_CLAIM_KEYS_BYTES_MAX) {
        snprintf(error, error_size, "a key space of %" PRIu64 " bytes exceeds %d", body->bytes,
                 SHOAL_CLAIM_KEYS_BYTES_MAX);
        return -1;
    }
    if (s_array_check(&s_key_value_shape, "kvs", body->kvs, body->count, error, error_size)
    ||  s_array_check(&s_lock_record_shape, "locks", body->locks, body->lock_count, error, error_size)
    ||  s_array_check(&s_lease_shape, "leases", body->leases, body->lease_count, error, error_size))
        return -1;
    for (size_t i = 0; i < body->count; i++)
        if (body->kvs[i].mod_revision > body->revision) {
            snprintf(error, error_size, "kvs[%zu]: key '%s' written at revision %" PRIu64 ", after the space's %"
                     PRIu64, i, body->kvs[i].key, body->kvs[i].mod_revision, body->revision);
            return -1;
        }
    return 0;
}

static void
s_claim_keys_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_keys_t *body = body_in;
    Shoal__ClaimKeys *wire = (Shoal__ClaimKeys *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->move_id = s_wire_text(body->move_id);
    wire->revision = body->revision;
    wire->bytes = body->bytes;
    wire->n_kvs = body->count;
    wire->kvs = (Shoal__KeyValue **) s_array_to_wire(&s_key_value_shape, body->kvs, body->count);
    wire->lock_readers = body->lock_readers;
    wire->lock_writer = s_wire_text(body->lock_writer);
    wire->lock_waiter = s_wire_text(body->lock_waiter);
    wire->n_locks = body->lock_count;
    wire->locks = (Shoal__LockRecord **) s_array_to_wire(&s_lock_record_shape, body->locks, body->lock_count);
    wire->n_leases = body->lease_count;
    wire->leases = (Shoal__LeaseInfo **) s_array_to_wire(&s_lease_shape, body->leases, body->lease_count);
}

static int
s_claim_keys_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimKeys *wire = (const Shoal__ClaimKeys *) wire_in;
    shoal_msg_claim_keys_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->move_id = s_text_copy(wire->move_id);
    body->revision = wire->revision;
    body->bytes = wire->bytes;
    body->kvs = s_array_new(&s_key_value_shape, wire->n_kvs);
    body->count = wire->n_kvs;
    body->lock_readers = wire->lock_readers;
    body->lock_writer = s_text_copy(wire->lock_writer);
    body->lock_waiter = s_text_copy(wire->lock_waiter);
    body->locks = s_array_new(&s_lock_record_shape, wire->n_locks);
    body->lock_count = wire->n_locks;
    body->leases = s_array_new(&s_lease_shape, wire->n_leases);
    body->lease_count = wire->n_leases;
    if (s_array_from_wire(&s_key_value_shape, "kvs", wire->kvs, wire->n_kvs, body->kvs, error, error_size)
    ||  s_array_from_wire(&s_lock_record_shape, "locks", wire->locks, wire->n_locks, body->locks, error, error_size)
    ||  s_array_from_wire(&s_lease_shape, "leases", wire->leases, wire->n_leases, body->leases, error, error_size))
        return -1;
    return 0;
}

static void
s_claim_keys_clear(void *body_in)
{
    shoal_msg_claim_keys_t *body = body_in;
    free(body->claim_id);
    free(body->move_id);
    s_array_clear(&s_key_value_shape, body->kvs, body->count);
    free(body->lock_writer);
    free(body->lock_waiter);
    s_array_clear(&s_lock_record_shape, body->locks, body->lock_count);
    s_array_clear(&s_lease_shape, body->leases, body->lease_count);
}

static void
s_claim_keys_release(ProtobufCMessage *wire_in)
{
    Shoal__ClaimKeys *wire = (Shoal__ClaimKeys *) wire_in;
    s_array_release(wire->kvs, wire->n_kvs);
    s_array_release(wire->locks, wire->n_locks);
    s_array_release(wire->leases, wire->n_leases);
}

static const s_shape_t s_claim_keys_shape = {
    sizeof(shoal_msg_claim_keys_t), &shoal__claim_keys__descriptor, s_claim_keys_check,
    s_claim_keys_to_wire, s_claim_keys_from_wire, s_claim_keys_clear, s_claim_keys_release
};
S_DEFINE_CODEC(claim_keys, shoal_msg_claim_keys_t);

//  Move: a move's record and the body of every move message.

static const char *s_move_state_names[] = {
    [SHOAL_MOVE_NONE] = "none",
    [SHOAL_MOVE_PENDING] = "pending",
    [SHOAL_MOVE_FINAL] = "final",
    [SHOAL_MOVE_COMMITTED] = "committed",
    [SHOAL_MOVE_STARTED] = "started",
    [SHOAL_MOVE_ABORTED] = "aborted",
    [SHOAL_MOVE_RECEIVING] = "receiving",
    [SHOAL_MOVE_RECEIVED] = "received",
    [SHOAL_MOVE_ADOPTED] = "adopted",
};

const char *
shoal_move_state_name(shoal_move_state_t state)
{
    int value = (int) state;
    if (value < SHOAL_MOVE_NONE || value > SHOAL_MOVE_STATE_LAST)
        return NULL;
    return s_move_state_names[value];
}

static int
s_move_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_move_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size))
        return -1;
    if (!shoal_move_state_name(body->state)) {
        snprintf(error, error_size, "state %d is not a move state", (int) body->state);
        return -1;
    }
    if ((int) body->role < SHOAL_MOVE_ROLE_NONE || (int) body->role > SHOAL_MOVE_TARGET) {
        snprintf(error, error_size, "role %d is not a move role", (int) body->role);
        return -1;
    }
    if (body->tenant && *body->tenant && s_tenant_check(body->tenant, error, error_size))
        return -1;
    return 0;
}

static void
s_move_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_move_t *body = body_in;
    Shoal__Move *wire = (Shoal__Move *) wire_in;
    wire->move_id = s_wire_text(body->move_id);
    wire->claim_id = s_wire_text(body->claim_id);
    wire->from = s_wire_text(body->from);
    wire->to = s_wire_text(body->to);
    wire->state = (Shoal__MoveState) body->state;
    wire->role = (Shoal__MoveRole) body->role;
    wire->epoch = body->epoch;
    wire->tenant = s_wire_text(body->tenant);
    wire->memory_bytes = body->memory_bytes;
    wire->driver = s_wire_text(body->driver);
    wire->memory_pages = body->memory_pages;
    wire->disk_blocks = body->disk_blocks;
    wire->max_downtime_ms = body->max_downtime_ms;
    wire->stream = s_wire_text(body->stream);
    wire->started_ms = body->started_ms;
    wire->updated_ms = body->updated_ms;
    wire->phase = s_wire_text(body->phase);
    wire->round = body->round;
    wire->bytes_sent = body->bytes_sent;
    wire->rate = body->rate;
    wire->dirty_rate = body->dirty_rate;
    wire->estimate_ms = body->estimate_ms;
    wire->total_ms = body->total_ms;
    wire->node_downtime_ms = body->node_downtime_ms;
    wire->guest_downtime_ms = body->guest_downtime_ms;
    wire->guest_switch_gap_ms = body->guest_switch_gap_ms;
    wire->error = s_wire_text(body->error);
    wire->done = body->done;
    wire->no_converge = body->no_converge;
    wire->throttle_steps = body->throttle_steps;
    wire->throttle_percent = body->throttle_percent;
    wire->throttled_ms = body->throttled_ms;
    wire->paused = body->paused;
    wire->pause_us = body->pause_us;
    wire->final_wait_us = body->final_wait_us;
    wire->final_bytes = body->final_bytes;
    wire->final_us = body->final_us;
    wire->target_sync_us = body->target_sync_us;
    wire->commit_asked_us = body->commit_asked_us;
    wire->commit_us = body->commit_us;
    wire->start_us = body->start_us;
}

static int
s_move_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Move *wire = (const Shoal__Move *) wire_in;
    shoal_move_t *body = body_out;
    body->move_id = s_text_copy(wire->move_id);
    body->claim_id = s_text_copy(wire->claim_id);
    body->from = s_text_copy(wire->from);
    body->to = s_text_copy(wire->to);
    body->state = (shoal_move_state_t) wire->state;
    body->role = (shoal_move_role_t) wire->role;
    body->epoch = wire->epoch;
    body->tenant = s_text_copy(wire->tenant);
    body->memory_bytes = wire->memory_bytes;
    body->driver = s_text_copy(wire->driver);
    body->memory_pages = wire->memory_pages;
    body->disk_blocks = wire->disk_blocks;
    body->max_downtime_ms = wire->max_downtime_ms;
    body->stream = s_text_copy(wire->stream);
    body->started_ms = wire->started_ms;
    body->updated_ms = wire->updated_ms;
    body->phase = s_text_copy(wire->phase);
    body->round = wire->round;
    body->bytes_sent = wire->bytes_sent;
    body->rate = wire->rate;
    body->dirty_rate = wire->dirty_rate;
    body->estimate_ms = wire->estimate_ms;
    body->total_ms = wire->total_ms;
    body->node_downtime_ms = wire->node_downtime_ms;
    body->guest_downtime_ms = wire->guest_downtime_ms;
    body->guest_switch_gap_ms = wire->guest_switch_gap_ms;
    body->error = s_text_copy(wire->error);
    body->done = wire->done;
    body->no_converge = wire->no_converge;
    body->throttle_steps = wire->throttle_steps;
    body->throttle_percent = wire->throttle_percent;
    body->throttled_ms = wire->throttled_ms;
    body->paused = wire->paused;
    body->pause_us = wire->pause_us;
    body->final_wait_us = wire->final_wait_us;
    body->final_bytes = wire->final_bytes;
    body->final_us = wire->final_us;
    body->target_sync_us = wire->target_sync_us;
    body->commit_asked_us = wire->commit_asked_us;
    body->commit_us = wire->commit_us;
    body->start_us = wire->start_us;
    return 0;
}

static void
s_move_clear(void *body_in)
{
    shoal_move_t *body = body_in;
    free(body->move_id);
    free(body->claim_id);
    free(body->from);
    free(body->to);
    free(body->tenant);
    free(body->driver);
    free(body->stream);
    free(body->phase);
    free(body->error);
}

static const s_shape_t s_move_shape = {
    sizeof(shoal_move_t), &shoal__move__descriptor, s_move_check,
    s_move_to_wire, s_move_from_wire, s_move_clear, NULL
};
S_DEFINE_CODEC(move, shoal_move_t);

//  Moves

S_DEFINE_LIST(moves, shoal_msg_moves_t, Shoal__Moves, shoal__moves__descriptor, moves, Shoal__Move, s_move_shape, 0);

//  CountersRequest and Counters. A tenant is org/project, or empty for
//  "every tenant" (a request) and "the whole node" (a scope).

static int
s_counters_tenant_check(const char *tenant, char *error, size_t error_size)
{
    return tenant && *tenant ? s_tenant_check(tenant, error, error_size) : 0;
}

static int
s_counters_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_counters_request_t *body = body_in;
    return s_counters_tenant_check(body->tenant, error, error_size);
}

static void
s_counters_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_counters_request_t *body = body_in;
    ((Shoal__CountersRequest *) wire_in)->tenant = s_wire_text(body->tenant);
}

static int
s_counters_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__CountersRequest *wire = (const Shoal__CountersRequest *) wire_in;
    ((shoal_msg_counters_request_t *) body_out)->tenant = s_text_copy(wire->tenant);
    return 0;
}

static void
s_counters_request_clear(void *body_in)
{
    free(((shoal_msg_counters_request_t *) body_in)->tenant);
}

static const s_shape_t s_counters_request_shape = {
    sizeof(shoal_msg_counters_request_t), &shoal__counters_request__descriptor, s_counters_request_check,
    s_counters_request_to_wire, s_counters_request_from_wire, s_counters_request_clear, NULL
};
S_DEFINE_CODEC(counters_request, shoal_msg_counters_request_t);

static int
s_counter_scope_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_counter_scope_t *body = body_in;
    return s_counters_tenant_check(body->tenant, error, error_size);
}

static void
s_counter_scope_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_counter_scope_t *body = body_in;
    Shoal__CounterScope *wire = (Shoal__CounterScope *) wire_in;
    wire->tenant = s_wire_text(body->tenant);
    wire->claims = body->used.claims;
    wire->running = body->used.running;
    wire->memory_bytes = body->used.memory_bytes;
    wire->reserved_claims = body->reserved.claims;
    wire->reserved_running = body->reserved.running;
    wire->reserved_memory_bytes = body->reserved.memory_bytes;
}

static int
s_counter_scope_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__CounterScope *wire = (const Shoal__CounterScope *) wire_in;
    shoal_msg_counter_scope_t *body = body_out;
    body->tenant = s_text_copy(wire->tenant);
    body->used.claims = wire->claims;
    body->used.running = wire->running;
    body->used.memory_bytes = wire->memory_bytes;
    body->reserved.claims = wire->reserved_claims;
    body->reserved.running = wire->reserved_running;
    body->reserved.memory_bytes = wire->reserved_memory_bytes;
    return 0;
}

static void
s_counter_scope_clear(void *body_in)
{
    free(((shoal_msg_counter_scope_t *) body_in)->tenant);
}

static const s_shape_t s_counter_scope_shape = {
    sizeof(shoal_msg_counter_scope_t), &shoal__counter_scope__descriptor, s_counter_scope_check,
    s_counter_scope_to_wire, s_counter_scope_from_wire, s_counter_scope_clear, NULL
};

static int
s_counters_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_counters_t *body = body_in;
    if (body->count > SHOAL_COUNTER_SCOPES_MAX) {
        snprintf(error, error_size, "%zu scopes exceed %d", body->count, SHOAL_COUNTER_SCOPES_MAX);
        return -1;
    }
    return s_array_check(&s_counter_scope_shape, "scopes", body->scopes, body->count, error, error_size);
}

static void
s_counters_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_counters_t *body = body_in;
    Shoal__Counters *wire = (Shoal__Counters *) wire_in;
    wire->n_scopes = body->count;
    wire->scopes = (Shoal__CounterScope **) s_array_to_wire(&s_counter_scope_shape, body->scopes, body->count);
    wire->more = body->more;
}

static int
s_counters_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Counters *wire = (const Shoal__Counters *) wire_in;
    shoal_msg_counters_t *body = body_out;
    body->scopes = s_array_new(&s_counter_scope_shape, wire->n_scopes);
    body->count = wire->n_scopes;
    body->more = wire->more;
    return s_array_from_wire(&s_counter_scope_shape, "scopes", wire->scopes, wire->n_scopes, body->scopes,
                             error, error_size);
}

static void
s_counters_clear(void *body_in)
{
    shoal_msg_counters_t *body = body_in;
    s_array_clear(&s_counter_scope_shape, body->scopes, body->count);
}

static void
s_counters_release(ProtobufCMessage *wire_in)
{
    Shoal__Counters *wire = (Shoal__Counters *) wire_in;
    s_array_release(wire->scopes, wire->n_scopes);
}

static const s_shape_t s_counters_shape = {
    sizeof(shoal_msg_counters_t), &shoal__counters__descriptor, s_counters_check,
    s_counters_to_wire, s_counters_from_wire, s_counters_clear, s_counters_release
};
S_DEFINE_CODEC(counters, shoal_msg_counters_t);

//  The event stream

static int
s_watch_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_watch_t *body = body_in;
    return s_text_check("kinds", body->kinds, false, SHOAL_WATCH_KINDS_MAX, error, error_size);
}

static void
s_watch_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_watch_t *body = body_in;
    Shoal__WatchRequest *wire = (Shoal__WatchRequest *) wire_in;
    wire->kinds = s_wire_text(body->kinds);
    wire->after_seq = body->after_seq;
}

static int
s_watch_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__WatchRequest *wire = (const Shoal__WatchRequest *) wire_in;
    shoal_msg_watch_t *body = body_out;
    body->kinds = s_text_copy(wire->kinds);
    body->after_seq = wire->after_seq;
    return 0;
}

static void
s_watch_clear(void *body_in)
{
    free(((shoal_msg_watch_t *) body_in)->kinds);
}

static const s_shape_t s_watch_shape = {
    sizeof(shoal_msg_watch_t), &shoal__watch_request__descriptor, s_watch_check,
    s_watch_to_wire, s_watch_from_wire, s_watch_clear, NULL
};
S_DEFINE_CODEC(watch, shoal_msg_watch_t);

static int
s_watch_reply_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_watch_reply_t *body = body_in;
    return s_text_check("node_id", body->node_id, true, SHOAL_NAME_MAX, error, error_size);
}

static void
s_watch_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_watch_reply_t *body = body_in;
    Shoal__WatchReply *wire = (Shoal__WatchReply *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->last_seq = body->last_seq;
    wire->first_kept_seq = body->first_kept_seq;
    wire->missed_from = body->missed_from;
    wire->missed_to = body->missed_to;
    wire->replayed = body->replayed;
}

static int
s_watch_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__WatchReply *wire = (const Shoal__WatchReply *) wire_in;
    shoal_msg_watch_reply_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->last_seq = wire->last_seq;
    body->first_kept_seq = wire->first_kept_seq;
    body->missed_from = wire->missed_from;
    body->missed_to = wire->missed_to;
    body->replayed = wire->replayed;
    return 0;
}

static void
s_watch_reply_clear(void *body_in)
{
    free(((shoal_msg_watch_reply_t *) body_in)->node_id);
}

static const s_shape_t s_watch_reply_shape = {
    sizeof(shoal_msg_watch_reply_t), &shoal__watch_reply__descriptor, s_watch_reply_check,
    s_watch_reply_to_wire, s_watch_reply_from_wire, s_watch_reply_clear, NULL
};
S_DEFINE_CODEC(watch_reply, shoal_msg_watch_reply_t);

static int
s_event_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_event_t *body = body_in;
    if (body->seq == 0) {
        snprintf(error, error_size, "%s", "seq is 0");
        return -1;
    }
    if (s_text_check("kind", body->kind, true, SHOAL_NAME_MAX, error, error_size)
        || s_text_check("what", body->what, true, SHOAL_NAME_MAX, error, error_size)
        || s_text_check("node_id", body->node_id, true, SHOAL_NAME_MAX, error, error_size)
        || s_text_check("claim_id", body->claim_id, false, SHOAL_KV_KEY_MAX, error, error_size)
        || s_text_check("tenant", body->tenant, false, SHOAL_KV_KEY_MAX, error, error_size)
        || s_text_check("peer", body->peer, false, SHOAL_NAME_MAX, error, error_size))
        return -1;
    return s_text_check("detail", body->detail, false, TEXT_ANY_LENGTH, error, error_size);
}

static void
s_event_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_event_t *body = body_in;
    Shoal__Event *wire = (Shoal__Event *) wire_in;
    wire->seq = body->seq;
    wire->previous_seq = body->previous_seq;
    wire->kind = s_wire_text(body->kind);
    wire->what = s_wire_text(body->what);
    wire->node_id = s_wire_text(body->node_id);
    wire->time_ms = body->time_ms;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->tenant = s_wire_text(body->tenant);
    wire->peer = s_wire_text(body->peer);
    wire->detail = s_wire_text(body->detail);
    wire->round = body->round;
    wire->bytes_sent = body->bytes_sent;
    wire->epoch = body->epoch;
}

static int
s_event_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Event *wire = (const Shoal__Event *) wire_in;
    shoal_msg_event_t *body = body_out;
    body->seq = wire->seq;
    body->previous_seq = wire->previous_seq;
    body->kind = s_text_copy(wire->kind);
    body->what = s_text_copy(wire->what);
    body->node_id = s_text_copy(wire->node_id);
    body->time_ms = wire->time_ms;
    body->claim_id = s_text_copy(wire->claim_id);
    body->tenant = s_text_copy(wire->tenant);
    body->peer = s_text_copy(wire->peer);
    body->detail = s_text_copy(wire->detail);
    body->round = wire->round;
    body->bytes_sent = wire->bytes_sent;
    body->epoch = wire->epoch;
    return 0;
}

static void
s_event_clear(void *body_in)
{
    shoal_msg_event_t *body = body_in;
    free(body->kind);
    free(body->what);
    free(body->node_id);
    free(body->claim_id);
    free(body->tenant);
    free(body->peer);
    free(body->detail);
}

static const s_shape_t s_event_shape = {
    sizeof(shoal_msg_event_t), &shoal__event__descriptor, s_event_check,
    s_event_to_wire, s_event_from_wire, s_event_clear, NULL
};
S_DEFINE_CODEC(event, shoal_msg_event_t);

//  FsckRequest and FsckReport: the consistency sweep.

static int
s_fsck_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_fsck_request_t *body = body_in;
    if (body->op != SHOAL_FSCK_START && body->op != SHOAL_FSCK_STATUS) {
        snprintf(error, error_size, "op %d is not start or status", (int) body->op);
        return -1;
    }
    return 0;
}

static void
s_fsck_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_fsck_request_t *body = body_in;
    Shoal__FsckRequest *wire = (Shoal__FsckRequest *) wire_in;
    wire->op = (Shoal__FsckOp) body->op;
    wire->repair = body->repair;
}

static int
s_fsck_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__FsckRequest *wire = (const Shoal__FsckRequest *) wire_in;
    shoal_msg_fsck_request_t *body = body_out;
    body->op = (shoal_fsck_op_t) wire->op;
    body->repair = wire->repair;
    return 0;
}

static void
s_fsck_request_clear(void *body_in)
{
    (void) body_in;
}

static const s_shape_t s_fsck_request_shape = {
    sizeof(shoal_msg_fsck_request_t), &shoal__fsck_request__descriptor, s_fsck_request_check,
    s_fsck_request_to_wire, s_fsck_request_from_wire, s_fsck_request_clear, NULL
};
S_DEFINE_CODEC(fsck_request, shoal_msg_fsck_request_t);

static int
s_fsck_finding_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_fsck_finding_t *body = body_in;
    if (s_text_check("check", body->check, true, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("where", body->where, true, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("key", body->key, false, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("problem", body->problem, true, TEXT_ANY_LENGTH, error, error_size))
        return -1;
    return s_text_check("repaired", body->repaired, false, TEXT_ANY_LENGTH, error, error_size);
}

static void
s_fsck_finding_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_fsck_finding_t *body = body_in;
    Shoal__FsckFinding *wire = (Shoal__FsckFinding *) wire_in;
    wire->check = s_wire_text(body->check);
    wire->where = s_wire_text(body->where);
    wire->key = s_wire_text(body->key);
    wire->problem = s_wire_text(body->problem);
    wire->repairable = body->repairable;
    wire->repaired = s_wire_text(body->repaired);
}

static int
s_fsck_finding_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__FsckFinding *wire = (const Shoal__FsckFinding *) wire_in;
    shoal_msg_fsck_finding_t *body = body_out;
    body->check = s_text_copy(wire->check);
    body->where = s_text_copy(wire->where);
    body->key = s_text_copy(wire->key);
    body->problem = s_text_copy(wire->problem);
    body->repairable = wire->repairable;
    body->repaired = s_text_copy(wire->repaired);
    return 0;
}

static void
s_fsck_finding_clear(void *body_in)
{
    shoal_msg_fsck_finding_t *body = body_in;
    free(body->check);
    free(body->where);
    free(body->key);
    free(body->problem);
    free(body->repaired);
}

static const s_shape_t s_fsck_finding_shape = {
    sizeof(shoal_msg_fsck_finding_t), &shoal__fsck_finding__descriptor, s_fsck_finding_check,
    s_fsck_finding_to_wire, s_fsck_finding_from_wire, s_fsck_finding_clear, NULL
};

static int
s_fsck_report_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_fsck_report_t *body = body_in;
    if (body->count > SHOAL_FSCK_FINDINGS_MAX) {
        snprintf(error, error_size, "%zu findings exceed %d", body->count, SHOAL_FSCK_FINDINGS_MAX);
        return -1;
    }
    if (s_text_check("trigger", body->trigger, false, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("check", body->check, false, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("error", body->error, false, TEXT_ANY_LENGTH, error, error_size)
    ||  s_text_check("node_id", body->node_id, false, TEXT_ANY_LENGTH, error, error_size))
        return -1;
    return s_array_check(&s_fsck_finding_shape, "findings", body->findings, body->count, error, error_size);
}

static void
s_fsck_report_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_fsck_report_t *body = body_in;
    Shoal__FsckReport *wire = (Shoal__FsckReport *) wire_in;
    wire->run = body->run;
    wire->done = body->done;
    wire->repair = body->repair;
    wire->trigger = s_wire_text(body->trigger);
    wire->check = s_wire_text(body->check);
    wire->keys = body->keys;
    wire->started_ms = body->started_ms;
    wire->finished_ms = body->finished_ms;
    wire->n_findings = body->count;
    wire->findings = (Shoal__FsckFinding **) s_array_to_wire(&s_fsck_finding_shape, body->findings, body->count);
    wire->finding_count = body->finding_count;
    wire->remaining = body->remaining;
    wire->error = s_wire_text(body->error);
    wire->node_id = s_wire_text(body->node_id);
}

static int
s_fsck_report_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__FsckReport *wire = (const Shoal__FsckReport *) wire_in;
    shoal_msg_fsck_report_t *body = body_out;
    body->run = wire->run;
    body->done = wire->done;
    body->repair = wire->repair;
    body->trigger = s_text_copy(wire->trigger);
    body->check = s_text_copy(wire->check);
    body->keys = wire->keys;
    body->started_ms = wire->started_ms;
    body->finished_ms = wire->finished_ms;
    body->finding_count = wire->finding_count;
    body->remaining = wire->remaining;
    body->error = s_text_copy(wire->error);
    body->node_id = s_text_copy(wire->node_id);
    body->findings = s_array_new(&s_fsck_finding_shape, wire->n_findings);
    body->count = wire->n_findings;
    return s_array_from_wire(&s_fsck_finding_shape, "findings", wire->findings, wire->n_findings, body->findings,
                             error, error_size);
}

static void
s_fsck_report_clear(void *body_in)
{
    shoal_msg_fsck_report_t *body = body_in;
    free(body->trigger);
    free(body->check);
    free(body->error);
    free(body->node_id);
    s_array_clear(&s_fsck_finding_shape, body->findings, body->count);
}

static void
s_fsck_report_release(ProtobufCMessage *wire_in)
{
    Shoal__FsckReport *wire = (Shoal__FsckReport *) wire_in;
    s_array_release(wire->findings, wire->n_findings);
}

static const s_shape_t s_fsck_report_shape = {
    sizeof(shoal_msg_fsck_report_t), &shoal__fsck_report__descriptor, s_fsck_report_check,
    s_fsck_report_to_wire, s_fsck_report_from_wire, s_fsck_report_clear, s_fsck_report_release
};
S_DEFINE_CODEC(fsck_report, shoal_msg_fsck_report_t);

//  Storage objects

static const char *s_object_op_names[] = {
    [SHOAL_OBJECT_ADD] = "add",
    [SHOAL_OBJECT_COMMIT] = "commit",
    [SHOAL_OBJECT_ABORT] = "abort",
    [SHOAL_OBJECT_GET] = "get",
    [SHOAL_OBJECT_LIST] = "ls",
    [SHOAL_OBJECT_REMOVE] = "rm",
    [SHOAL_OBJECT_OPEN] = "open",
    [SHOAL_OBJECT_CLOSE] = "close",
    [SHOAL_OBJECT_REPLICATE] = "replicate",
    [SHOAL_OBJECT_DROP] = "drop",
    [SHOAL_OBJECT_CHECK] = "check",
};

static const char *s_instance_state_names[] = {
    [SHOAL_INSTANCE_WRITING] = "writing",
    [SHOAL_INSTANCE_COMPLETE] = "complete",
    [SHOAL_INSTANCE_CORRUPT] = "corrupt",
};

const char *
shoal_object_op_name(shoal_object_op_t op)
{
    int value = (int) op;
    return value >= SHOAL_OBJECT_ADD && value <= SHOAL_OBJECT_CHECK ? s_object_op_names[value] : NULL;
}

const char *
shoal_instance_state_name(shoal_instance_state_t state)
{
    int value = (int) state;
    return value >= SHOAL_INSTANCE_WRITING && value <= SHOAL_INSTANCE_CORRUPT ? s_instance_state_names[value] : NULL;
}

_Static_assert((int) SHOAL__CHECKSUM_ALGORITHM__CHECKSUM_BLAKE2B_256 == SHOAL_CHECKSUM_BLAKE2B
               && (int) SHOAL__CHECKSUM_ALGORITHM__CHECKSUM_XXH3_128 == SHOAL_CHECKSUM_XXH3,
               "ChecksumAlgorithm and shoal_checksum_algorithm_t agree");

//  A checksum is absent or one of an algorithm shoal knows (shoal_checksum.h).
static int
s_checksum_check(const uint8_t *checksum, size_t size, char *error, size_t error_size)
{
    if (s_bytes_check("checksum", checksum, size, error, error_size))
        return -1;
    if (shoal_checksum_algorithm(checksum, size) < 0) {
        snprintf(error, error_size, "checksum of %zu bytes is of no known algorithm (BLAKE2b-256: 32 bytes, "
                 "XXH3-128: 0x01 then 16 bytes)", size);
        return -1;
    }
    return 0;
}

//  An object's name: printable, no leading '/', no NUL (a C string has none).
static int
s_object_name_check(const char *name, bool required, char *error, size_t error_size)
{
    if (s_text_check("name", name, required, SHOAL_OBJECT_NAME_MAX, error, error_size))
        return -1;
    for (const unsigned char *at = (const unsigned char *) (name ? name : ""); *at; at++)
        if (*at < 0x20 || *at == 0x7f) {
            snprintf(error, error_size, "name holds control character 0x%02x", *at);
            return -1;
        }
    return 0;
}

static int
s_object_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_request_t *body = body_in;
    if (!shoal_object_op_name(body->op)) {
        snprintf(error, error_size, "op %d is no object operation", (int) body->op);
        return -1;
    }
    if ((body->tenant && *body->tenant && s_tenant_check(body->tenant, error, error_size))
    ||  s_object_name_check(body->name, false, error, error_size)
    ||  s_text_check("holder", body->holder, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_checksum_check(body->checksum, body->checksum_size, error, error_size)
    ||  s_text_check("comment", body->comment, false, SHOAL_OBJECT_COMMENT_MAX, error, error_size)
    ||  s_object_name_check(body->start_after, false, error, error_size)
    ||  s_text_check("to", body->to, false, SHOAL_NAME_MAX, error, error_size))
        return -1;
    if (body->algorithm != SHOAL_CHECKSUM_NONE && !shoal_checksum_algorithm_name(body->algorithm)) {
        snprintf(error, error_size, "checksum algorithm %d is none shoal knows", (int) body->algorithm);
        return -1;
    }
    bool named = body->op == SHOAL_OBJECT_ADD || body->op == SHOAL_OBJECT_GET || body->op == SHOAL_OBJECT_REMOVE
              || body->op == SHOAL_OBJECT_OPEN || body->op == SHOAL_OBJECT_REPLICATE;
    if (named && !(body->name && *body->name) && !body->storage_id) {
        snprintf(error, error_size, "%s names no object", shoal_object_op_name(body->op));
        return -1;
    }
    if (body->limit > SHOAL_OBJECT_LIST_MAX) {
        snprintf(error, error_size, "limit %u exceeds %d", body->limit, SHOAL_OBJECT_LIST_MAX);
        return -1;
    }
    return 0;
}

static void
s_object_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_request_t *body = body_in;
    Shoal__ObjectRequest *wire = (Shoal__ObjectRequest *) wire_in;
    wire->op = (Shoal__ObjectOp) body->op;
    wire->tenant = s_wire_text(body->tenant);
    wire->name = s_wire_text(body->name);
    wire->storage_id = body->storage_id;
    wire->instance_id = body->instance_id;
    wire->holder = s_wire_text(body->holder);
    wire->size = body->size;
    wire->checksum = s_wire_bytes(body->checksum, body->checksum_size);
    wire->copies = body->copies;
    wire->update = body->update;
    wire->comment = s_wire_text(body->comment);
    wire->start_after = s_wire_text(body->start_after);
    wire->limit = body->limit;
    wire->verify = body->verify;
    wire->repair = body->repair;
    wire->to = s_wire_text(body->to);
    wire->checksum_algorithm = (Shoal__ChecksumAlgorithm) body->algorithm;
}

static int
s_object_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectRequest *wire = (const Shoal__ObjectRequest *) wire_in;
    shoal_msg_object_request_t *body = body_out;
    body->op = (shoal_object_op_t) wire->op;
    body->tenant = s_text_copy(wire->tenant);
    body->name = s_text_copy(wire->name);
    body->storage_id = wire->storage_id;
    body->instance_id = wire->instance_id;
    body->holder = s_text_copy(wire->holder);
    body->size = wire->size;
    s_bytes_copy(&wire->checksum, &body->checksum, &body->checksum_size);
    body->copies = wire->copies;
    body->update = wire->update;
    body->comment = s_text_copy(wire->comment);
    body->start_after = s_text_copy(wire->start_after);
    body->limit = wire->limit;
    body->verify = wire->verify;
    body->repair = wire->repair;
    body->to = s_text_copy(wire->to);
    body->algorithm = (shoal_checksum_algorithm_t) wire->checksum_algorithm;
    return 0;
}

static void
s_object_request_clear(void *body_in)
{
    shoal_msg_object_request_t *body = body_in;
    free(body->tenant);
    free(body->name);
    free(body->holder);
    free(body->checksum);
    free(body->comment);
    free(body->start_after);
    free(body->to);
}

static const s_shape_t s_object_request_shape = {
    sizeof(shoal_msg_object_request_t), &shoal__object_request__descriptor, s_object_request_check,
    s_object_request_to_wire, s_object_request_from_wire, s_object_request_clear, NULL
};
S_DEFINE_CODEC(object_request, shoal_msg_object_request_t);

static int
s_object_instance_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_instance_t *body = body_in;
    if (!body->instance_id || !body->storage_id) {
        snprintf(error, error_size, "instance %" PRIu64 " of object %" PRIu64 ": ids are never 0", body->instance_id,
                 body->storage_id);
        return -1;
    }
    if (!shoal_instance_state_name(body->state)) {
        snprintf(error, error_size, "instance %" PRIu64 ": state %d is not writing, complete or corrupt",
                 body->instance_id, (int) body->state);
        return -1;
    }
    if (s_text_check("node", body->node, true, SHOAL_NAME_MAX, error, error_size)
    ||  s_text_check("uri", body->uri, true, SHOAL_OBJECT_URI_MAX, error, error_size)
    ||  s_checksum_check(body->checksum, body->checksum_size, error, error_size)
    ||  s_text_check("writer", body->writer, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("waiter", body->waiter, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("endpoint", body->endpoint, false, SHOAL_OBJECT_URI_MAX, error, error_size))
        return -1;
    if (body->state == SHOAL_INSTANCE_COMPLETE && body->checksum_size == 0) {
        snprintf(error, error_size, "instance %" PRIu64 " is complete but has no checksum", body->instance_id);
        return -1;
    }
    return 0;
}

static void
s_object_instance_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_instance_t *body = body_in;
    Shoal__ObjectInstance *wire = (Shoal__ObjectInstance *) wire_in;
    wire->instance_id = body->instance_id;
    wire->storage_id = body->storage_id;
    wire->node = s_wire_text(body->node);
    wire->uri = s_wire_text(body->uri);
    wire->checksum = s_wire_bytes(body->checksum, body->checksum_size);
    wire->size = body->size;
    wire->state = (Shoal__InstanceState) body->state;
    wire->modified_ms = body->modified_ms;
    wire->readers = body->readers;
    wire->writer = s_wire_text(body->writer);
    wire->waiter = s_wire_text(body->waiter);
    wire->endpoint = s_wire_text(body->endpoint);
}

static int
s_object_instance_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectInstance *wire = (const Shoal__ObjectInstance *) wire_in;
    shoal_msg_object_instance_t *body = body_out;
    body->instance_id = wire->instance_id;
    body->storage_id = wire->storage_id;
    body->node = s_text_copy(wire->node);
    body->uri = s_text_copy(wire->uri);
    s_bytes_copy(&wire->checksum, &body->checksum, &body->checksum_size);
    body->size = wire->size;
    body->state = (shoal_instance_state_t) wire->state;
    body->modified_ms = wire->modified_ms;
    body->readers = wire->readers;
    body->writer = s_text_copy(wire->writer);
    body->waiter = s_text_copy(wire->waiter);
    body->endpoint = s_text_copy(wire->endpoint);
    return 0;
}

static void
s_object_instance_clear(void *body_in)
{
    shoal_msg_object_instance_t *body = body_in;
    free(body->node);
    free(body->uri);
    free(body->checksum);
    free(body->writer);
    free(body->waiter);
    free(body->endpoint);
}

static const s_shape_t s_object_instance_shape = {
    sizeof(shoal_msg_object_instance_t), &shoal__object_instance__descriptor, s_object_instance_check,
    s_object_instance_to_wire, s_object_instance_from_wire, s_object_instance_clear, NULL
};
S_DEFINE_CODEC(object_instance, shoal_msg_object_instance_t);

static int
s_object_info_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_info_t *body = body_in;
    if (!body->storage_id) {
        snprintf(error, error_size, "storage id is 0");
        return -1;
    }
    if (s_tenant_check(body->tenant, error, error_size)
    ||  s_object_name_check(body->name, false, error, error_size)
    ||  s_checksum_check(body->checksum, body->checksum_size, error, error_size)
    ||  s_text_check("comment", body->comment, false, SHOAL_OBJECT_COMMENT_MAX, error, error_size))
        return -1;
    if (body->count > SHOAL_OBJECT_INSTANCES_MAX) {
        snprintf(error, error_size, "%zu instances exceed %d", body->count, SHOAL_OBJECT_INSTANCES_MAX);
        return -1;
    }
    return s_array_check(&s_object_instance_shape, "instances", body->instances, body->count, error, error_size);
}

static void
s_object_info_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_info_t *body = body_in;
    Shoal__ObjectInfo *wire = (Shoal__ObjectInfo *) wire_in;
    wire->tenant = s_wire_text(body->tenant);
    wire->name = s_wire_text(body->name);
    wire->storage_id = body->storage_id;
    wire->size = body->size;
    wire->checksum = s_wire_bytes(body->checksum, body->checksum_size);
    wire->created_ms = body->created_ms;
    wire->comment = s_wire_text(body->comment);
    wire->n_instances = body->count;
    wire->instances = (Shoal__ObjectInstance **) s_array_to_wire(&s_object_instance_shape, body->instances,
                                                                 body->count);
    wire->memory_bytes = body->memory_bytes;
    wire->disk_bytes = body->disk_bytes;
}

static int
s_object_info_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectInfo *wire = (const Shoal__ObjectInfo *) wire_in;
    shoal_msg_object_info_t *body = body_out;
    body->tenant = s_text_copy(wire->tenant);
    body->name = s_text_copy(wire->name);
    body->storage_id = wire->storage_id;
    body->size = wire->size;
    s_bytes_copy(&wire->checksum, &body->checksum, &body->checksum_size);
    body->created_ms = wire->created_ms;
    body->comment = s_text_copy(wire->comment);
    body->memory_bytes = wire->memory_bytes;
    body->disk_bytes = wire->disk_bytes;
    body->instances = s_array_new(&s_object_instance_shape, wire->n_instances);
    body->count = wire->n_instances;
    return s_array_from_wire(&s_object_instance_shape, "instances", wire->instances, wire->n_instances,
                             body->instances, error, error_size);
}

static void
s_object_info_clear(void *body_in)
{
    shoal_msg_object_info_t *body = body_in;
    free(body->tenant);
    free(body->name);
    free(body->checksum);
    free(body->comment);
    s_array_clear(&s_object_instance_shape, body->instances, body->count);
}

static void
s_object_info_release(ProtobufCMessage *wire_in)
{
    Shoal__ObjectInfo *wire = (Shoal__ObjectInfo *) wire_in;
    s_array_release(wire->instances, wire->n_instances);
}

static const s_shape_t s_object_info_shape = {
    sizeof(shoal_msg_object_info_t), &shoal__object_info__descriptor, s_object_info_check,
    s_object_info_to_wire, s_object_info_from_wire, s_object_info_clear, s_object_info_release
};
S_DEFINE_CODEC(object_info, shoal_msg_object_info_t);

//  ClaimCheckpoint

static int
s_claim_checkpoint_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_claim_checkpoint_t *body = body_in;
    return s_claim_id_check(body->id, true, error, error_size)
        || s_object_name_check(body->name, true, error, error_size)
        || s_text_check("comment", body->comment, false, SHOAL_OBJECT_COMMENT_MAX, error, error_size) ? -1 : 0;
}

static void
s_claim_checkpoint_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_claim_checkpoint_t *body = body_in;
    Shoal__ClaimCheckpoint *wire = (Shoal__ClaimCheckpoint *) wire_in;
    wire->id = s_wire_text(body->id);
    wire->name = s_wire_text(body->name);
    wire->comment = s_wire_text(body->comment);
}

static int
s_claim_checkpoint_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ClaimCheckpoint *wire = (const Shoal__ClaimCheckpoint *) wire_in;
    shoal_msg_claim_checkpoint_t *body = body_out;
    body->id = s_text_copy(wire->id);
    body->name = s_text_copy(wire->name);
    body->comment = s_text_copy(wire->comment);
    return 0;
}

static void
s_claim_checkpoint_clear(void *body_in)
{
    shoal_msg_claim_checkpoint_t *body = body_in;
    free(body->id);
    free(body->name);
    free(body->comment);
}

static const s_shape_t s_claim_checkpoint_shape = {
    sizeof(shoal_msg_claim_checkpoint_t), &shoal__claim_checkpoint__descriptor, s_claim_checkpoint_check,
    s_claim_checkpoint_to_wire, s_claim_checkpoint_from_wire, s_claim_checkpoint_clear, NULL
};
S_DEFINE_CODEC(claim_checkpoint, shoal_msg_claim_checkpoint_t);

static int
s_object_finding_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_finding_t *body = body_in;
    if (s_text_check("key", body->key, true, SHOAL_KV_KEY_MAX + SHOAL_OBJECT_URI_MAX, error, error_size)
    ||  s_text_check("what", body->what, true, 2 * SHOAL_OBJECT_URI_MAX + SHOAL_OBJECT_NAME_MAX, error, error_size))
        return -1;
    return 0;
}

static void
s_object_finding_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_finding_t *body = body_in;
    Shoal__ObjectFinding *wire = (Shoal__ObjectFinding *) wire_in;
    wire->key = s_wire_text(body->key);
    wire->what = s_wire_text(body->what);
    wire->repaired = body->repaired;
}

static int
s_object_finding_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectFinding *wire = (const Shoal__ObjectFinding *) wire_in;
    shoal_msg_object_finding_t *body = body_out;
    body->key = s_text_copy(wire->key);
    body->what = s_text_copy(wire->what);
    body->repaired = wire->repaired;
    return 0;
}

static void
s_object_finding_clear(void *body_in)
{
    shoal_msg_object_finding_t *body = body_in;
    free(body->key);
    free(body->what);
}

static const s_shape_t s_object_finding_shape = {
    sizeof(shoal_msg_object_finding_t), &shoal__object_finding__descriptor, s_object_finding_check,
    s_object_finding_to_wire, s_object_finding_from_wire, s_object_finding_clear, NULL
};

static int
s_object_reply_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_reply_t *body = body_in;
    if (s_text_check("holder", body->holder, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("node", body->node, false, SHOAL_NAME_MAX, error, error_size)
    ||  s_text_check("endpoint", body->endpoint, false, SHOAL_OBJECT_URI_MAX, error, error_size))
        return -1;
    if (body->count > SHOAL_OBJECT_LIST_MAX) {
        snprintf(error, error_size, "%zu objects exceed %d", body->count, SHOAL_OBJECT_LIST_MAX);
        return -1;
    }
    if (body->findings_count > SHOAL_OBJECT_LIST_MAX) {
        snprintf(error, error_size, "%zu findings exceed %d", body->findings_count, SHOAL_OBJECT_LIST_MAX);
        return -1;
    }
    return s_array_check(&s_object_info_shape, "objects", body->objects, body->count, error, error_size)
        || s_array_check(&s_object_finding_shape, "findings", body->findings, body->findings_count, error,
                         error_size) ? -1 : 0;
}

static void
s_object_reply_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_reply_t *body = body_in;
    Shoal__ObjectReply *wire = (Shoal__ObjectReply *) wire_in;
    wire->n_objects = body->count;
    wire->objects = (Shoal__ObjectInfo **) s_array_to_wire(&s_object_info_shape, body->objects, body->count);
    wire->instance_id = body->instance_id;
    wire->holder = s_wire_text(body->holder);
    wire->node = s_wire_text(body->node);
    wire->endpoint = s_wire_text(body->endpoint);
    wire->granted = body->granted;
    wire->more = body->more;
    wire->storage_id = body->storage_id;
    wire->copies = body->copies;
    wire->n_findings = body->findings_count;
    wire->findings = (Shoal__ObjectFinding **) s_array_to_wire(&s_object_finding_shape, body->findings,
                                                               body->findings_count);
}

static int
s_object_reply_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectReply *wire = (const Shoal__ObjectReply *) wire_in;
    shoal_msg_object_reply_t *body = body_out;
    body->instance_id = wire->instance_id;
    body->holder = s_text_copy(wire->holder);
    body->node = s_text_copy(wire->node);
    body->endpoint = s_text_copy(wire->endpoint);
    body->granted = wire->granted;
    body->more = wire->more;
    body->storage_id = wire->storage_id;
    body->copies = wire->copies;
    body->objects = s_array_new(&s_object_info_shape, wire->n_objects);
    body->count = wire->n_objects;
    body->findings = s_array_new(&s_object_finding_shape, wire->n_findings);
    body->findings_count = wire->n_findings;
    if (s_array_from_wire(&s_object_finding_shape, "findings", wire->findings, wire->n_findings, body->findings,
                          error, error_size))
        return -1;
    return s_array_from_wire(&s_object_info_shape, "objects", wire->objects, wire->n_objects, body->objects,
                             error, error_size);
}

static void
s_object_reply_clear(void *body_in)
{
    shoal_msg_object_reply_t *body = body_in;
    free(body->holder);
    free(body->node);
    free(body->endpoint);
    s_array_clear(&s_object_info_shape, body->objects, body->count);
    s_array_clear(&s_object_finding_shape, body->findings, body->findings_count);
}

//  Each element's own arrays go before the block of elements does.
static void
s_object_reply_release(ProtobufCMessage *wire_in)
{
    Shoal__ObjectReply *wire = (Shoal__ObjectReply *) wire_in;
    for (size_t i = 0; i < wire->n_objects; i++)
        s_object_info_release(&wire->objects[i]->base);
    s_array_release(wire->objects, wire->n_objects);
    s_array_release(wire->findings, wire->n_findings);
}

static const s_shape_t s_object_reply_shape = {
    sizeof(shoal_msg_object_reply_t), &shoal__object_reply__descriptor, s_object_reply_check,
    s_object_reply_to_wire, s_object_reply_from_wire, s_object_reply_clear, s_object_reply_release
};
S_DEFINE_CODEC(object_reply, shoal_msg_object_reply_t);

static int
s_object_chunk_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_chunk_t *body = body_in;
    if (!body->instance_id) {
        snprintf(error, error_size, "instance id is 0");
        return -1;
    }
    if (s_text_check("holder", body->holder, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_bytes_check("data", body->data, body->data_size, error, error_size))
        return -1;
    if (body->data_size > SHOAL_OBJECT_CHUNK_MAX || body->length > SHOAL_OBJECT_CHUNK_MAX) {
        snprintf(error, error_size, "a chunk of %zu bytes (length %u) exceeds %d", body->data_size, body->length,
                 SHOAL_OBJECT_CHUNK_MAX);
        return -1;
    }
    return 0;
}

static void
s_object_chunk_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_chunk_t *body = body_in;
    Shoal__ObjectChunk *wire = (Shoal__ObjectChunk *) wire_in;
    wire->instance_id = body->instance_id;
    wire->holder = s_wire_text(body->holder);
    wire->offset = body->offset;
    wire->length = body->length;
    wire->data = s_wire_bytes(body->data, body->data_size);
    wire->last = body->last;
}

static int
s_object_chunk_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectChunk *wire = (const Shoal__ObjectChunk *) wire_in;
    shoal_msg_object_chunk_t *body = body_out;
    body->instance_id = wire->instance_id;
    body->holder = s_text_copy(wire->holder);
    body->offset = wire->offset;
    body->length = wire->length;
    s_bytes_copy(&wire->data, &body->data, &body->data_size);
    body->last = wire->last;
    return 0;
}

static void
s_object_chunk_clear(void *body_in)
{
    shoal_msg_object_chunk_t *body = body_in;
    free(body->holder);
    free(body->data);
}

static const s_shape_t s_object_chunk_shape = {
    sizeof(shoal_msg_object_chunk_t), &shoal__object_chunk__descriptor, s_object_chunk_check,
    s_object_chunk_to_wire, s_object_chunk_from_wire, s_object_chunk_clear, NULL
};
S_DEFINE_CODEC(object_chunk, shoal_msg_object_chunk_t);

static int
s_object_ids_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_ids_t *body = body_in;
    if (body->kind != SHOAL_OBJECT_ID_STORAGE && body->kind != SHOAL_OBJECT_ID_INSTANCE) {
        snprintf(error, error_size, "kind %d is neither storage (1) nor instance (2)", (int) body->kind);
        return -1;
    }
    if (body->count > SHOAL_OBJECT_IDS_MAX || body->ids_count > SHOAL_OBJECT_IDS_MAX) {
        snprintf(error, error_size, "%u ids asked (%zu given) exceed %d", body->count, body->ids_count,
                 SHOAL_OBJECT_IDS_MAX);
        return -1;
    }
    if (body->ids_count && !body->ids) {
        snprintf(error, error_size, "ids is NULL but its count is %zu", body->ids_count);
        return -1;
    }
    for (size_t i = 0; i < body->ids_count; i++)
        if (body->ids[i] == 0 || body->ids[i] > INT64_MAX) {
            snprintf(error, error_size, "ids[%zu] %" PRIu64 " is not a positive 64-bit id", i, body->ids[i]);
            return -1;
        }
    return 0;
}

static void
s_object_ids_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_ids_t *body = body_in;
    Shoal__ObjectIds *wire = (Shoal__ObjectIds *) wire_in;
    wire->kind = (uint32_t) body->kind;
    wire->count = body->count;
    wire->n_ids = body->ids_count;
    wire->ids = body->ids;
}

static int
s_object_ids_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectIds *wire = (const Shoal__ObjectIds *) wire_in;
    shoal_msg_object_ids_t *body = body_out;
    body->kind = (shoal_object_id_kind_t) wire->kind;
    body->count = wire->count;
    if (wire->n_ids > SHOAL_OBJECT_IDS_MAX) {
        snprintf(error, error_size, "%zu ids exceed %d", wire->n_ids, SHOAL_OBJECT_IDS_MAX);
        return -1;
    }
    body->ids_count = wire->n_ids;
    if (wire->n_ids) {
        body->ids = (uint64_t *) zmalloc(wire->n_ids * sizeof *body->ids);
        memcpy(body->ids, wire->ids, wire->n_ids * sizeof *body->ids);
    }
    return 0;
}

static void
s_object_ids_clear(void *body_in)
{
    shoal_msg_object_ids_t *body = body_in;
    free(body->ids);
}

static const s_shape_t s_object_ids_shape = {
    sizeof(shoal_msg_object_ids_t), &shoal__object_ids__descriptor, s_object_ids_check,
    s_object_ids_to_wire, s_object_ids_from_wire, s_object_ids_clear, NULL
};
S_DEFINE_CODEC(object_ids, shoal_msg_object_ids_t);

static int
s_object_lock_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_lock_t *body = body_in;
    if (!body->instance_id) {
        snprintf(error, error_size, "instance id is 0");
        return -1;
    }
    if (s_text_check("writer", body->writer, false, SHOAL_LOCK_HOLDER_MAX, error, error_size)
    ||  s_text_check("waiter", body->waiter, false, SHOAL_LOCK_HOLDER_MAX, error, error_size))
        return -1;
    //  The seed's rule, where the state is written and read: readers and a
    //  writer never together.
    if (body->readers && body->writer && *body->writer) {
        snprintf(error, error_size, "lock of instance %" PRIu64 ": %" PRIu64 " reader(s) beside writer '%s'",
                 body->instance_id, body->readers, body->writer);
        return -1;
    }
    return 0;
}

static void
s_object_lock_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_lock_t *body = body_in;
    Shoal__ObjectLock *wire = (Shoal__ObjectLock *) wire_in;
    wire->instance_id = body->instance_id;
    wire->storage_id = body->storage_id;
    wire->readers = body->readers;
    wire->writer = s_wire_text(body->writer);
    wire->waiter = s_wire_text(body->waiter);
}

static int
s_object_lock_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectLock *wire = (const Shoal__ObjectLock *) wire_in;
    shoal_msg_object_lock_t *body = body_out;
    body->instance_id = wire->instance_id;
    body->storage_id = wire->storage_id;
    body->readers = wire->readers;
    body->writer = s_text_copy(wire->writer);
    body->waiter = s_text_copy(wire->waiter);
    return 0;
}

static void
s_object_lock_clear(void *body_in)
{
    shoal_msg_object_lock_t *body = body_in;
    free(body->writer);
    free(body->waiter);
}

static const s_shape_t s_object_lock_shape = {
    sizeof(shoal_msg_object_lock_t), &shoal__object_lock__descriptor, s_object_lock_check,
    s_object_lock_to_wire, s_object_lock_from_wire, s_object_lock_clear, NULL
};
S_DEFINE_CODEC(object_lock, shoal_msg_object_lock_t);

static int
s_object_lock_record_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_object_lock_record_t *body = body_in;
    if (!body->instance_id) {
        snprintf(error, error_size, "instance id is 0");
        return -1;
    }
    if (s_text_check("holder", body->holder, true, SHOAL_LOCK_HOLDER_MAX, error, error_size))
        return -1;
    const char *mode = body->mode ? body->mode : "";
    if (!streq(mode, "read") && !streq(mode, "write") && !streq(mode, "wait")) {
        snprintf(error, error_size, "mode '%.32s' is not read, write or wait", mode);
        return -1;
    }
    return 0;
}

static void
s_object_lock_record_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_object_lock_record_t *body = body_in;
    Shoal__ObjectLockRecord *wire = (Shoal__ObjectLockRecord *) wire_in;
    wire->instance_id = body->instance_id;
    wire->holder = s_wire_text(body->holder);
    wire->mode = s_wire_text(body->mode);
    wire->time_ms = body->time_ms;
}

static int
s_object_lock_record_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__ObjectLockRecord *wire = (const Shoal__ObjectLockRecord *) wire_in;
    shoal_msg_object_lock_record_t *body = body_out;
    body->instance_id = wire->instance_id;
    body->holder = s_text_copy(wire->holder);
    body->mode = s_text_copy(wire->mode);
    body->time_ms = wire->time_ms;
    return 0;
}

static void
s_object_lock_record_clear(void *body_in)
{
    shoal_msg_object_lock_record_t *body = body_in;
    free(body->holder);
    free(body->mode);
}

static const s_shape_t s_object_lock_record_shape = {
    sizeof(shoal_msg_object_lock_record_t), &shoal__object_lock_record__descriptor, s_object_lock_record_check,
    s_object_lock_record_to_wire, s_object_lock_record_from_wire, s_object_lock_record_clear, NULL
};
S_DEFINE_CODEC(object_lock_record, shoal_msg_object_lock_record_t);

//  Hot drain: DrainRequest, DrainClaim, Drain, NodeCapacity.

#define S_DRAIN_TEXT_MAX 1024

static int
s_drain_request_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_drain_request_t *body = body_in;
    if (body->node_id && *body->node_id)
        return s_node_id_check("node_id", body->node_id, error, error_size);
    return 0;
}

static void
s_drain_request_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_drain_request_t *body = body_in;
    Shoal__DrainRequest *wire = (Shoal__DrainRequest *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->max_downtime_ms = body->max_downtime_ms;
    wire->parallel = body->parallel;
}

static int
s_drain_request_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__DrainRequest *wire = (const Shoal__DrainRequest *) wire_in;
    shoal_msg_drain_request_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->max_downtime_ms = wire->max_downtime_ms;
    body->parallel = wire->parallel;
    return 0;
}

static void
s_drain_request_clear(void *body_in)
{
    free(((shoal_msg_drain_request_t *) body_in)->node_id);
}

static const s_shape_t s_drain_request_shape = {
    sizeof(shoal_msg_drain_request_t), &shoal__drain_request__descriptor, s_drain_request_check,
    s_drain_request_to_wire, s_drain_request_from_wire, s_drain_request_clear, NULL
};
S_DEFINE_CODEC(drain_request, shoal_msg_drain_request_t);

static int
s_drain_claim_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_drain_claim_t *body = body_in;
    if (s_claim_id_check(body->claim_id, true, error, error_size))
        return -1;
    const char *state = body->state ? body->state : "";
    if (!streq(state, "pending") && !streq(state, "moving") && !streq(state, "moved") && !streq(state, "stayed")) {
        snprintf(error, error_size, "drain claim state '%.64s' is not pending, moving, moved or stayed", state);
        return -1;
    }
    return s_text_check("reason", body->reason, false, S_DRAIN_TEXT_MAX, error, error_size);
}

static void
s_drain_claim_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_drain_claim_t *body = body_in;
    Shoal__DrainClaim *wire = (Shoal__DrainClaim *) wire_in;
    wire->claim_id = s_wire_text(body->claim_id);
    wire->state = s_wire_text(body->state);
    wire->to = s_wire_text(body->to);
    wire->attempts = body->attempts;
    wire->reason = s_wire_text(body->reason);
    wire->memory_bytes = body->memory_bytes;
    wire->bytes_sent = body->bytes_sent;
    wire->phase = s_wire_text(body->phase);
    wire->total_ms = body->total_ms;
    wire->node_downtime_ms = body->node_downtime_ms;
}

static int
s_drain_claim_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__DrainClaim *wire = (const Shoal__DrainClaim *) wire_in;
    shoal_msg_drain_claim_t *body = body_out;
    body->claim_id = s_text_copy(wire->claim_id);
    body->state = s_text_copy(wire->state);
    body->to = s_text_copy(wire->to);
    body->attempts = wire->attempts;
    body->reason = s_text_copy(wire->reason);
    body->memory_bytes = wire->memory_bytes;
    body->bytes_sent = wire->bytes_sent;
    body->phase = s_text_copy(wire->phase);
    body->total_ms = wire->total_ms;
    body->node_downtime_ms = wire->node_downtime_ms;
    return 0;
}

static void
s_drain_claim_clear(void *body_in)
{
    shoal_msg_drain_claim_t *body = body_in;
    free(body->claim_id);
    free(body->state);
    free(body->to);
    free(body->reason);
    free(body->phase);
}

static const s_shape_t s_drain_claim_shape = {
    sizeof(shoal_msg_drain_claim_t), &shoal__drain_claim__descriptor, s_drain_claim_check,
    s_drain_claim_to_wire, s_drain_claim_from_wire, s_drain_claim_clear, NULL
};

static int
s_drain_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_drain_t *body = body_in;
    const char *phase = body->phase ? body->phase : "";
    if (!streq(phase, "none") && !streq(phase, "running") && !streq(phase, "done") && !streq(phase, "stopped")) {
        snprintf(error, error_size, "drain phase '%.64s' is not none, running, done or stopped", phase);
        return -1;
    }
    if (body->count > SHOAL_DRAIN_CLAIMS_MAX) {
        snprintf(error, error_size, "%zu drain claims exceed %d", body->count, SHOAL_DRAIN_CLAIMS_MAX);
        return -1;
    }
    if (s_text_check("note", body->note, false, S_DRAIN_TEXT_MAX, error, error_size))
        return -1;
    return s_array_check(&s_drain_claim_shape, "claims", body->claims, body->count, error, error_size);
}

static void
s_drain_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_drain_t *body = body_in;
    Shoal__Drain *wire = (Shoal__Drain *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->draining = body->draining;
    wire->phase = s_wire_text(body->phase);
    wire->max_downtime_ms = body->max_downtime_ms;
    wire->parallel = body->parallel;
    wire->started_ms = body->started_ms;
    wire->updated_ms = body->updated_ms;
    wire->total_ms = body->total_ms;
    wire->n_claims = body->count;
    wire->claims = (Shoal__DrainClaim **) s_array_to_wire(&s_drain_claim_shape, body->claims, body->count);
    wire->note = s_wire_text(body->note);
}

static int
s_drain_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__Drain *wire = (const Shoal__Drain *) wire_in;
    shoal_msg_drain_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->draining = wire->draining;
    body->phase = s_text_copy(wire->phase);
    body->max_downtime_ms = wire->max_downtime_ms;
    body->parallel = wire->parallel;
    body->started_ms = wire->started_ms;
    body->updated_ms = wire->updated_ms;
    body->total_ms = wire->total_ms;
    body->note = s_text_copy(wire->note);
    body->claims = s_array_new(&s_drain_claim_shape, wire->n_claims);
    body->count = wire->n_claims;
    return s_array_from_wire(&s_drain_claim_shape, "claims", wire->claims, wire->n_claims, body->claims,
                             error, error_size);
}

static void
s_drain_clear(void *body_in)
{
    shoal_msg_drain_t *body = body_in;
    free(body->node_id);
    free(body->phase);
    free(body->note);
    s_array_clear(&s_drain_claim_shape, body->claims, body->count);
}

static void
s_drain_release(ProtobufCMessage *wire_in)
{
    Shoal__Drain *wire = (Shoal__Drain *) wire_in;
    s_array_release(wire->claims, wire->n_claims);
}

static const s_shape_t s_drain_shape = {
    sizeof(shoal_msg_drain_t), &shoal__drain__descriptor, s_drain_check,
    s_drain_to_wire, s_drain_from_wire, s_drain_clear, s_drain_release
};
S_DEFINE_CODEC(drain, shoal_msg_drain_t);

static int
s_capacity_check(const void *body_in, char *error, size_t error_size)
{
    const shoal_msg_capacity_t *body = body_in;
    return s_node_id_check("node_id", body->node_id, error, error_size);
}

static void
s_capacity_to_wire(const void *body_in, ProtobufCMessage *wire_in)
{
    const shoal_msg_capacity_t *body = body_in;
    Shoal__NodeCapacity *wire = (Shoal__NodeCapacity *) wire_in;
    wire->node_id = s_wire_text(body->node_id);
    wire->draining = body->draining;
    wire->max_claims = body->max_claims;
    wire->max_running = body->max_running;
    wire->memory_limit_bytes = body->memory_limit_bytes;
    wire->claims = body->claims;
    wire->running = body->running;
    wire->memory_bytes = body->memory_bytes;
    wire->move_concurrency = body->move_concurrency;
    wire->moves_in_flight = body->moves_in_flight;
}

static int
s_capacity_from_wire(const ProtobufCMessage *wire_in, void *body_out, char *error, size_t error_size)
{
    const Shoal__NodeCapacity *wire = (const Shoal__NodeCapacity *) wire_in;
    shoal_msg_capacity_t *body = body_out;
    body->node_id = s_text_copy(wire->node_id);
    body->draining = wire->draining;
    body->max_claims = wire->max_claims;
    body->max_running = wire->max_running;
    body->memory_limit_bytes = wire->memory_limit_bytes;
    body->claims = wire->claims;
    body->running = wire->running;
    body->memory_bytes = wire->memory_bytes;
    body->move_concurrency = wire->move_concurrency;
    body->moves_in_flight = wire->moves_in_flight;
    return 0;
}

static void
s_capacity_clear(void *body_in)
{
    free(((shoal_msg_capacity_t *) body_in)->node_id);
}

static const s_shape_t s_capacity_shape = {
    sizeof(shoal_msg_capacity_t), &shoal__node_capacity__descriptor, s_capacity_check,
    s_capacity_to_wire, s_capacity_from_wire, s_capacity_clear, NULL
};
S_DEFINE_CODEC(capacity, shoal_msg_capacity_t);
