/*  shoal_proto: the envelope codec.

    The C envelope and the protobuf Envelope are kept apart so that only
    protocol/ sees protobuf-c. One check of the header, s_envelope_check, runs
    on encode and on decode over the same plain values, and each body's codec
    (shoal_msg.c) checks the body in both directions too, so what a node
    refuses to send is exactly what every node refuses to receive, and
    whatever decodes encodes again.

    protobuf-c keeps an enum number it does not know in the field (proto3
    enums are open) and accepts any payload with any type, so neither the
    type nor the payload is trusted here: both are checked against one table,
    s_msg_types, which names every type and the codec of the body its request
    and its 200 reply carry. Adding a message type is adding a row there (and
    its number in shoal_msg_type_t and shoal.proto).
*/
#include "shoal_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.pb-c.h"
#include "shoal_names.h"
#include "shoal_wire.h"

//  The C types are the message's numbers: encode and decode copy them across
//  unchanged.
_Static_assert((int) SHOAL_MSG_ERROR == (int) SHOAL__MSG_TYPE__MSG_ERROR
            && (int) SHOAL_MSG_STATUS == (int) SHOAL__MSG_TYPE__MSG_STATUS
            && (int) SHOAL_MSG_KV_PUT == (int) SHOAL__MSG_TYPE__MSG_KV_PUT
            && (int) SHOAL_MSG_KV_GET == (int) SHOAL__MSG_TYPE__MSG_KV_GET
            && (int) SHOAL_MSG_KV_DEL == (int) SHOAL__MSG_TYPE__MSG_KV_DEL
            && (int) SHOAL_MSG_KV_SCAN == (int) SHOAL__MSG_TYPE__MSG_KV_SCAN
            && (int) SHOAL_MSG_OPLOG_HEADS == (int) SHOAL__MSG_TYPE__MSG_OPLOG_HEADS
            && (int) SHOAL_MSG_OPLOG_STATS == (int) SHOAL__MSG_TYPE__MSG_OPLOG_STATS
            && (int) SHOAL_MSG_OPLOG_PRUNE == (int) SHOAL__MSG_TYPE__MSG_OPLOG_PRUNE
            && (int) SHOAL_MSG_MESH_JOIN == (int) SHOAL__MSG_TYPE__MSG_MESH_JOIN
            && (int) SHOAL_MSG_MESH_PING == (int) SHOAL__MSG_TYPE__MSG_MESH_PING
            && (int) SHOAL_MSG_MESH_PING_REQ == (int) SHOAL__MSG_TYPE__MSG_MESH_PING_REQ
            && (int) SHOAL_MSG_MESH_LEAVE == (int) SHOAL__MSG_TYPE__MSG_MESH_LEAVE
            && (int) SHOAL_MSG_SYNC_PUSH == (int) SHOAL__MSG_TYPE__MSG_SYNC_PUSH
            && (int) SHOAL_MSG_SYNC_HEADS == (int) SHOAL__MSG_TYPE__MSG_SYNC_HEADS
            && (int) SHOAL_MSG_SYNC_PULL == (int) SHOAL__MSG_TYPE__MSG_SYNC_PULL
            && (int) SHOAL_MSG_SYNC_CHAIN == (int) SHOAL__MSG_TYPE__MSG_SYNC_CHAIN
            && (int) SHOAL_MSG_SYNC_SNAPSHOT == (int) SHOAL__MSG_TYPE__MSG_SYNC_SNAPSHOT
            && (int) SHOAL_MSG_PEERS == (int) SHOAL__MSG_TYPE__MSG_PEERS
            && (int) SHOAL_MSG_PEERS_FORGET == (int) SHOAL__MSG_TYPE__MSG_PEERS_FORGET
            && (int) SHOAL_MSG_CLAIM_CREATE == (int) SHOAL__MSG_TYPE__MSG_CLAIM_CREATE
            && (int) SHOAL_MSG_CLAIM_SHOW == (int) SHOAL__MSG_TYPE__MSG_CLAIM_SHOW
            && (int) SHOAL_MSG_CLAIM_LIST == (int) SHOAL__MSG_TYPE__MSG_CLAIM_LIST
            && (int) SHOAL_MSG_CLAIM_STOP == (int) SHOAL__MSG_TYPE__MSG_CLAIM_STOP
            && (int) SHOAL_MSG_CLAIM_START == (int) SHOAL__MSG_TYPE__MSG_CLAIM_START
            && (int) SHOAL_MSG_CLAIM_PAUSE == (int) SHOAL__MSG_TYPE__MSG_CLAIM_PAUSE
            && (int) SHOAL_MSG_CLAIM_RESUME == (int) SHOAL__MSG_TYPE__MSG_CLAIM_RESUME
            && (int) SHOAL_MSG_CLAIM_RELEASE == (int) SHOAL__MSG_TYPE__MSG_CLAIM_RELEASE
            && (int) SHOAL_MSG_CLAIM_CALL == (int) SHOAL__MSG_TYPE__MSG_CLAIM_CALL
            && (int) SHOAL_MSG_LOOKUP == (int) SHOAL__MSG_TYPE__MSG_LOOKUP
            && (int) SHOAL_MSG_MOVE == (int) SHOAL__MSG_TYPE__MSG_MOVE
            && (int) SHOAL_MSG_MOVE_STATUS == (int) SHOAL__MSG_TYPE__MSG_MOVE_STATUS
            && (int) SHOAL_MSG_MOVE_RESUME == (int) SHOAL__MSG_TYPE__MSG_MOVE_RESUME
            && (int) SHOAL_MSG_MOVE_LIST == (int) SHOAL__MSG_TYPE__MSG_MOVE_LIST
            && (int) SHOAL_MSG_MOVE_ADMIT == (int) SHOAL__MSG_TYPE__MSG_MOVE_ADMIT
            && (int) SHOAL_MSG_MOVE_PREPARE == (int) SHOAL__MSG_TYPE__MSG_MOVE_PREPARE
            && (int) SHOAL_MSG_MOVE_COMMIT == (int) SHOAL__MSG_TYPE__MSG_MOVE_COMMIT
            && (int) SHOAL_MSG_MOVE_STARTED == (int) SHOAL__MSG_TYPE__MSG_MOVE_STARTED
            && (int) SHOAL_MSG_MOVE_ABORT == (int) SHOAL__MSG_TYPE__MSG_MOVE_ABORT
            && (int) SHOAL_MSG_MOVE_QUERY == (int) SHOAL__MSG_TYPE__MSG_MOVE_QUERY
            && (int) SHOAL_MSG_COUNTERS == (int) SHOAL__MSG_TYPE__MSG_COUNTERS
            && (int) SHOAL_MSG_SYNC_BULK == (int) SHOAL__MSG_TYPE__MSG_SYNC_BULK
            && (int) SHOAL_MSG_CLAIM_TXN == (int) SHOAL__MSG_TYPE__MSG_CLAIM_TXN
            && (int) SHOAL_MSG_MOVE_KEYS == (int) SHOAL__MSG_TYPE__MSG_MOVE_KEYS
            && (int) SHOAL_MSG_LEASE == (int) SHOAL__MSG_TYPE__MSG_LEASE
            && (int) SHOAL_MSG_LOCK == (int) SHOAL__MSG_TYPE__MSG_LOCK
            && (int) SHOAL_MSG_LOCK_SWEEP == (int) SHOAL__MSG_TYPE__MSG_LOCK_SWEEP
            && (int) SHOAL_MSG_PEERS_SWEEPING == (int) SHOAL__MSG_TYPE__MSG_PEERS_SWEEPING
            && (int) SHOAL_MSG_LEASE_ENDED == (int) SHOAL__MSG_TYPE__MSG_LEASE_ENDED
            && (int) SHOAL_MSG_LEASE_LOOKUP == (int) SHOAL__MSG_TYPE__MSG_LEASE_LOOKUP
            && (int) SHOAL_MSG_SWEEP_DONE == (int) SHOAL__MSG_TYPE__MSG_SWEEP_DONE
            && (int) SHOAL_MSG_WATCH == (int) SHOAL__MSG_TYPE__MSG_WATCH
            && (int) SHOAL_MSG_EVENT == (int) SHOAL__MSG_TYPE__MSG_EVENT
            && (int) SHOAL_MSG_OBJECT == (int) SHOAL__MSG_TYPE__MSG_OBJECT
            && (int) SHOAL_MSG_OBJECT_WRITE == (int) SHOAL__MSG_TYPE__MSG_OBJECT_WRITE
            && (int) SHOAL_MSG_OBJECT_READ == (int) SHOAL__MSG_TYPE__MSG_OBJECT_READ
            && (int) SHOAL_MSG_OBJECT_RECEIVE == (int) SHOAL__MSG_TYPE__MSG_OBJECT_RECEIVE
            && (int) SHOAL_MSG_OBJECT_IDS == (int) SHOAL__MSG_TYPE__MSG_OBJECT_IDS
            && (int) SHOAL_MSG_CLAIM_CHECKPOINT == (int) SHOAL__MSG_TYPE__MSG_CLAIM_CHECKPOINT
            && (int) SHOAL_MSG_FSCK == (int) SHOAL__MSG_TYPE__MSG_FSCK
            && (int) SHOAL_MSG_DRAIN == (int) SHOAL__MSG_TYPE__MSG_DRAIN
            && (int) SHOAL_MSG_UNDRAIN == (int) SHOAL__MSG_TYPE__MSG_UNDRAIN
            && (int) SHOAL_MSG_DRAIN_STATUS == (int) SHOAL__MSG_TYPE__MSG_DRAIN_STATUS
            && (int) SHOAL_MSG_CAPACITY == (int) SHOAL__MSG_TYPE__MSG_CAPACITY,
               "shoal_msg_type_t must match MsgType in shoal.proto");

//  A reply's status is an HTTP code; a request's is 0. Anything else is
//  refused, so a reader can always hand a status to shoal_status_text.
#define STATUS_CODE_MIN 100
#define STATUS_CODE_MAX 599

//  Large enough for "a reply of type oplog_stats with status 503".
#define DESCRIPTION_MAX 96
//  Room for a body codec's error before "envelope: NAME body: " goes in
//  front of it.
#define BODY_ERROR_MAX 256

//  Every message type, indexed by shoal_msg_type_t: its name, and the codec
//  of the body a request carries and of the body a 200 reply carries (NULL:
//  none). Replies other than 200, and errors, say all they have to say in
//  their status and message. Slot 0 is the protobuf default, never valid.
static const struct {
    const char *name;                   //  as shoal_msg_type_name gives it
    const shoal_codec_t *request;       //  the request's body
    const shoal_codec_t *reply;         //  the 200 reply's body
} s_msg_types[] = {
    [SHOAL_MSG_ERROR] = { "error", NULL, NULL },
    [SHOAL_MSG_STATUS] = { "status", NULL, &shoal_msg_status_reply_codec },
    [SHOAL_MSG_KV_PUT] = { "kv_put", &shoal_msg_kv_put_codec, &shoal_msg_kv_item_codec },
    [SHOAL_MSG_KV_GET] = { "kv_get", &shoal_msg_kv_key_codec, &shoal_msg_kv_item_codec },
    [SHOAL_MSG_KV_DEL] = { "kv_del", &shoal_msg_kv_key_codec, &shoal_msg_kv_item_codec },
    [SHOAL_MSG_KV_SCAN] = { "kv_scan", &shoal_msg_kv_scan_codec, &shoal_msg_kv_items_codec },
    [SHOAL_MSG_OPLOG_HEADS] = { "oplog_heads", &shoal_msg_dataset_or_all_codec, &shoal_msg_heads_codec },
    [SHOAL_MSG_OPLOG_STATS] = { "oplog_stats", &shoal_msg_dataset_or_all_codec,
                                &shoal_msg_oplog_stats_codec },
    [SHOAL_MSG_OPLOG_PRUNE] = { "oplog_prune", &shoal_msg_prune_codec, &shoal_msg_prune_reply_codec },
    [SHOAL_MSG_MESH_JOIN] = { "mesh_join", &shoal_msg_member_codec, &shoal_msg_members_codec },
    [SHOAL_MSG_MESH_PING] = { "mesh_ping", &shoal_msg_ping_codec, &shoal_msg_members_codec },
    [SHOAL_MSG_MESH_PING_REQ] = { "mesh_ping_req", &shoal_msg_ping_codec, &shoal_msg_members_codec },
    [SHOAL_MSG_MESH_LEAVE] = { "mesh_leave", &shoal_msg_member_codec, NULL },
    [SHOAL_MSG_SYNC_PUSH] = { "sync_push", &shoal_msg_entries_codec, NULL },
    [SHOAL_MSG_SYNC_HEADS] = { "sync_heads", &shoal_msg_heads_codec, &shoal_msg_heads_codec },
    [SHOAL_MSG_SYNC_PULL] = { "sync_pull", &shoal_msg_pull_codec, &shoal_msg_entries_codec },
    [SHOAL_MSG_SYNC_CHAIN] = { "sync_chain", &shoal_msg_chain_codec, &shoal_msg_entries_codec },
    [SHOAL_MSG_SYNC_SNAPSHOT] = { "sync_snapshot", &shoal_msg_snapshot_request_codec,
                                  &shoal_msg_snapshot_codec },
    [SHOAL_MSG_PEERS] = { "peers", NULL, &shoal_msg_peers_codec },
    [SHOAL_MSG_PEERS_FORGET] = { "peers_forget", &shoal_msg_node_ref_codec, NULL },
    [SHOAL_MSG_CLAIM_CREATE] = { "claim_create", &shoal_msg_claim_create_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_SHOW] = { "claim_show", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_LIST] = { "claim_list", NULL, &shoal_msg_claim_list_codec },
    [SHOAL_MSG_CLAIM_STOP] = { "claim_stop", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_START] = { "claim_start", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_PAUSE] = { "claim_pause", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_RESUME] = { "claim_resume", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_RELEASE] = { "claim_release", &shoal_msg_claim_ref_codec, &shoal_msg_claim_info_codec },
    [SHOAL_MSG_CLAIM_CALL] = { "claim_call", &shoal_msg_claim_call_codec, &shoal_msg_claim_call_reply_codec },
    [SHOAL_MSG_LOOKUP] = { "lookup", &shoal_msg_claim_ref_codec, &shoal_msg_registry_record_codec },
    [SHOAL_MSG_MOVE] = { "move", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_MOVE_STATUS] = { "move_status", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_MOVE_RESUME] = { "move_resume", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_MOVE_LIST] = { "move_list", NULL, &shoal_msg_moves_codec },
    [SHOAL_MSG_MOVE_ADMIT] = { "move_admit", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_MOVE_PREPARE] = { "move_prepare", &shoal_msg_move_codec, NULL },
    [SHOAL_MSG_MOVE_COMMIT] = { "move_commit", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_MOVE_STARTED] = { "move_started", &shoal_msg_move_codec, NULL },
    [SHOAL_MSG_MOVE_ABORT] = { "move_abort", &shoal_msg_move_codec, NULL },
    [SHOAL_MSG_MOVE_QUERY] = { "move_query", &shoal_msg_move_codec, &shoal_msg_move_codec },
    [SHOAL_MSG_COUNTERS] = { "counters", &shoal_msg_counters_request_codec, &shoal_msg_counters_codec },
    [SHOAL_MSG_SYNC_BULK] = { "sync_bulk", &shoal_msg_pull_codec, &shoal_msg_bulk_codec },
    [SHOAL_MSG_DAMAGE_FORGET] = { "damage_forget", &shoal_msg_damage_ref_codec, NULL },
    [SHOAL_MSG_CLAIM_TXN] = { "claim_txn", &shoal_msg_claim_txn_codec, &shoal_msg_claim_txn_reply_codec },
    [SHOAL_MSG_MOVE_KEYS] = { "move_keys", &shoal_msg_claim_keys_codec, NULL },
    [SHOAL_MSG_LEASE] = { "lease", &shoal_msg_lease_request_codec, &shoal_msg_leases_codec },
    [SHOAL_MSG_LOCK] = { "lock", &shoal_msg_lock_request_codec, &shoal_msg_locks_codec },
    [SHOAL_MSG_LOCK_SWEEP] = { "lock_sweep", &shoal_msg_lock_request_codec, NULL },
    [SHOAL_MSG_PEERS_SWEEPING] = { "peers_sweeping", NULL, &shoal_msg_members_codec },
    [SHOAL_MSG_LEASE_ENDED] = { "lease_ended", &shoal_msg_lease_request_codec, NULL },
    [SHOAL_MSG_LEASE_LOOKUP] = { "lease_lookup", &shoal_msg_lease_request_codec, &shoal_msg_member_codec },
    [SHOAL_MSG_SWEEP_DONE] = { "sweep_done", &shoal_msg_lock_request_codec, NULL },
    [SHOAL_MSG_WATCH] = { "watch", &shoal_msg_watch_codec, &shoal_msg_watch_reply_codec },
    [SHOAL_MSG_EVENT] = { "event", NULL, &shoal_msg_event_codec },
    [SHOAL_MSG_FSCK] = { "fsck", &shoal_msg_fsck_request_codec, &shoal_msg_fsck_report_codec },
    [SHOAL_MSG_OBJECT] = { "object", &shoal_msg_object_request_codec, &shoal_msg_object_reply_codec },
    [SHOAL_MSG_OBJECT_WRITE] = { "object_write", &shoal_msg_object_chunk_codec, &shoal_msg_object_chunk_codec },
    [SHOAL_MSG_OBJECT_READ] = { "object_read", &shoal_msg_object_chunk_codec, &shoal_msg_object_chunk_codec },
    [SHOAL_MSG_OBJECT_RECEIVE] = { "object_receive", &shoal_msg_object_request_codec,
                                   &shoal_msg_object_reply_codec },
    [SHOAL_MSG_OBJECT_IDS] = { "object_ids", &shoal_msg_object_ids_codec, &shoal_msg_object_ids_codec },
    [SHOAL_MSG_CLAIM_CHECKPOINT] = { "claim_checkpoint", &shoal_msg_claim_checkpoint_codec,
                                     &shoal_msg_object_reply_codec },
    [SHOAL_MSG_DRAIN] = { "drain", &shoal_msg_drain_request_codec, &shoal_msg_drain_codec },
    [SHOAL_MSG_UNDRAIN] = { "undrain", &shoal_msg_drain_request_codec, &shoal_msg_drain_codec },
    [SHOAL_MSG_DRAIN_STATUS] = { "drain_status", &shoal_msg_drain_request_codec, &shoal_msg_drain_codec },
    [SHOAL_MSG_CAPACITY] = { "capacity", NULL, &shoal_msg_capacity_codec },
};

#define MSG_TYPE_FIRST SHOAL_MSG_TYPE_FIRST
#define MSG_TYPE_LAST SHOAL_MSG_TYPE_LAST
_Static_assert(sizeof s_msg_types / sizeof s_msg_types[0] == MSG_TYPE_LAST + 1,
               "s_msg_types must have a row for every message type");

static const struct {
    uint32_t status;
    const char *text;
} s_status_texts[] = {
    { SHOAL_STATUS_OK, "OK" },
    { SHOAL_STATUS_BAD_REQUEST, "Bad Request" },
    { SHOAL_STATUS_UNAUTHORIZED, "Unauthorized" },
    { SHOAL_STATUS_FORBIDDEN, "Forbidden" },
    { SHOAL_STATUS_NOT_FOUND, "Not Found" },
    { SHOAL_STATUS_CONFLICT, "Conflict" },
    { SHOAL_STATUS_TOO_MANY, "Too Many Requests" },
    { SHOAL_STATUS_INTERNAL, "Internal Server Error" },
    { SHOAL_STATUS_UNAVAILABLE, "Service Unavailable" },
    { SHOAL_STATUS_NO_SPACE, "Insufficient Storage" },
};

#define STATUS_TEXT_COUNT (sizeof s_status_texts / sizeof s_status_texts[0])

//  Fills ERROR with "envelope: " and the formatted detail, so that whoever
//  logs or relays the error can tell which layer refused the message.
static void CHECK_PRINTF(3)
s_set_error(char *error, size_t error_size, const char *format, ...)
{
    if (!error || error_size == 0)
        return;
    int prefix = snprintf(error, error_size, "envelope: ");
    if (prefix < 0 || (size_t) prefix >= error_size)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(error + prefix, error_size - (size_t) prefix, format, args);
    va_end(args);
}

//  A copy of TEXT (NULL reads as empty). Out of memory aborts, as zmalloc
//  does, so that a decoded envelope is never half-filled.
static char *
s_copy_text(const char *text)
{
    if (!text)
        text = "";
    size_t size = strlen(text) + 1;
    char *copy = (char *) zmalloc(size);
    memcpy(copy, text, size);
    return copy;
}

//  The protobuf fields are not const, but packing only reads them: the cast
//  lets a const envelope be encoded without copying its strings.
static char *
s_wire_text(const char *text)
{
    return (char *) (text ? text : "");
}

//  Makes TEXT valid UTF-8 in place: a byte that starts no valid sequence
//  becomes '?'. A reply's message may quote what a client sent, or be cut
//  inside a character by a bounded buffer; either would make every peer
//  refuse the whole reply (text fields must be UTF-8 on the wire).
static void
s_text_scrub(char *text)
{
    size_t size = strlen(text);
    size_t at = 0;
    while (at < size) {
        size_t step = 1;
        if ((unsigned char) text[at] >= 0x80) {
            //  The longest valid sequence is 4 bytes: try each length.
            step = 0;
            for (size_t length = 2; length <= 4 && at + length <= size && !step; length++)
                if (shoal_utf8_valid(text + at, length))
                    step = length;
            if (!step) {
                text[at] = '?';
                step = 1;
            }
        }
        at += step;
    }
}

//  A number between the first and the last that has no row names no type.
static bool
s_msg_type_is_known(int type)
{
    return type >= MSG_TYPE_FIRST && type <= MSG_TYPE_LAST && s_msg_types[type].name;
}

//  The codec of the body a message of TYPE with STATUS carries, or NULL when
//  it carries none.
static const shoal_codec_t *
s_body_codec(int type, uint32_t status)
{
    if (!s_msg_type_is_known(type))
        return NULL;
    if (status == 0)
        return s_msg_types[type].request;
    if (status == SHOAL_STATUS_OK)
        return s_msg_types[type].reply;
    return NULL;
}

//  Writes "a request of type status" or "a reply of type status with status
//  404" into DESCRIPTION, for error messages about the body.
static void
s_describe_message(int type, uint32_t status, char *description, size_t size)
{
    const char *name = shoal_msg_type_name((shoal_msg_type_t) type);
    if (status == 0)
        snprintf(description, size, "a request of type %s", name);
    else
        snprintf(description, size, "a reply of type %s with status %u", name, status);
}

//  Checks what every envelope's header must satisfy, on the plain values
//  both encode and decode have. Returns 0, or -1 with ERROR naming what was
//  wrong.
static int
s_envelope_check(uint32_t version, int type, uint32_t status, char *error, size_t error_size)
{
    //  The version comes first: a newer peer may follow other rules, and
    //  "wrong version" is what its operator needs to hear.
    if (version != SHOAL_PROTOCOL_VERSION) {
        s_set_error(error, error_size, "version %u is not spoken here (this node speaks %d)",
                    version, SHOAL_PROTOCOL_VERSION);
        return -1;
    }
    if (!s_msg_type_is_known(type)) {
        s_set_error(error, error_size, "type %d is unknown", type);
        return -1;
    }
    if (status != 0 && (status < STATUS_CODE_MIN || status > STATUS_CODE_MAX)) {
        s_set_error(error, error_size, "status %u is neither 0 (a request) nor a code from %d to %d",
                    status, STATUS_CODE_MIN, STATUS_CODE_MAX);
        return -1;
    }
    return 0;
}

//  Frees the body and leaves the envelope without one.
static void
s_body_free(shoal_envelope_t *self)
{
    if (self->body && self->body_codec)
        self->body_codec->clear(self->body);
    free(self->body);
    self->body = NULL;
    self->body_codec = NULL;
}

shoal_envelope_t *
shoal_envelope_new(shoal_msg_type_t type, uint64_t request_id)
{
    shoal_envelope_t *self = (shoal_envelope_t *) zmalloc(sizeof(shoal_envelope_t));
    self->version = SHOAL_PROTOCOL_VERSION;
    self->type = type;
    self->request_id = request_id;
    return self;
}

shoal_envelope_t *
shoal_envelope_reply(const shoal_envelope_t *request, uint32_t status, const char *format, ...)
{
    assert(format);
    shoal_envelope_t *self = request
        ? shoal_envelope_new(request->type, request->request_id)
        : shoal_envelope_new(SHOAL_MSG_ERROR, 0);
    self->status = status;
    va_list args;
    va_start(args, format);
    self->message = zsys_vprintf(format, args);
    va_end(args);
    s_text_scrub(self->message);
    return self;
}

void
shoal_envelope_destroy(shoal_envelope_t **self_p)
{
    assert(self_p);
    shoal_envelope_t *self = *self_p;
    if (!self)
        return;
    s_body_free(self);
    free(self->message);
    free(self);
    *self_p = NULL;
}

void *
shoal_envelope_new_body(shoal_envelope_t *self)
{
    assert(self);
    s_body_free(self);
    const shoal_codec_t *codec = s_body_codec((int) self->type, self->status);
    if (codec) {
        self->body = zmalloc(codec->record_size);
        self->body_codec = codec;
    }
    return self->body;
}

//  Encodes SELF's body, which must be the one its type and status call for,
//  into *BYTES_P (the caller frees it; NULL when the message carries no
//  body). Returns 0, or -1 with ERROR naming what was wrong.
static int
s_body_encode(const shoal_envelope_t *self, uint8_t **bytes_p, size_t *size_p,
              char *error, size_t error_size)
{
    *bytes_p = NULL;
    *size_p = 0;
    const shoal_codec_t *expected = s_body_codec((int) self->type, self->status);
    if (!expected && !self->body)
        return 0;
    char description[DESCRIPTION_MAX];
    s_describe_message((int) self->type, self->status, description, sizeof description);
    //  A body made for another type or direction is another struct: encoding
    //  it with this codec would read fields it does not have.
    const char *held = self->body_codec ? self->body_codec->name : "unknown";
    if (!expected)
        s_set_error(error, error_size, "%s carries no body, but this one has a %s body",
                    description, held);
    else
    if (!self->body)
        s_set_error(error, error_size, "%s needs a %s body, but this one has none",
                    description, expected->name);
    else
    if (self->body_codec != expected)
        s_set_error(error, error_size, "%s needs a %s body, but this one has a %s body",
                    description, expected->name, held);
    else {
        char detail[BODY_ERROR_MAX] = "";
        if (expected->encode(self->body, bytes_p, size_p, detail, sizeof detail) == 0)
            return 0;
        s_set_error(error, error_size, "%s body: %s", expected->name, detail);
    }
    return -1;
}

zmsg_t *
shoal_envelope_encode(const shoal_envelope_t *self, char *error, size_t error_size)
{
    assert(self);
    uint8_t *payload;
    size_t payload_size;
    if (s_envelope_check(self->version, (int) self->type, self->status, error, error_size)
    ||  s_body_encode(self, &payload, &payload_size, error, error_size))
        return NULL;

    Shoal__Envelope message = SHOAL__ENVELOPE__INIT;
    message.version = self->version;
    message.type = (Shoal__MsgType) self->type;
    message.request_id = self->request_id;
    message.status = self->status;
    message.message = s_wire_text(self->message);
    message.retry_after_ms = self->retry_after_ms;
    message.payload.data = payload;
    message.payload.len = payload_size;

    //  The receiver refuses an oversize envelope, so sending one would only
    //  turn this node's mistake into the peer's error.
    zmsg_t *msg = NULL;
    size_t size = shoal__envelope__get_packed_size(&message);
    zframe_t *frame = size > SHOAL_ENVELOPE_MAX ? NULL : zframe_new(NULL, size);
    if (size > SHOAL_ENVELOPE_MAX)
        s_set_error(error, error_size, "frame of %zu bytes exceeds the %d-byte limit",
                    size, SHOAL_ENVELOPE_MAX);
    else
    if (!frame)
        s_set_error(error, error_size, "out of memory for a frame of %zu bytes", size);
    else {
        shoal__envelope__pack(&message, zframe_data(frame));
        msg = zmsg_new();
        zmsg_append(msg, &frame);
    }
    free(payload);
    return msg;
}

//  A new envelope holding copies of MESSAGE's header; MESSAGE has passed
//  s_envelope_check. An empty message reads as NULL, "no detail".
static shoal_envelope_t *
s_envelope_from_message(const Shoal__Envelope *message)
{
    shoal_envelope_t *self = shoal_envelope_new((shoal_msg_type_t) message->type, message->request_id);
    self->version = message->version;
    self->status = message->status;
    if (message->message && *message->message)
        self->message = s_copy_text(message->message);
    self->retry_after_ms = message->retry_after_ms;
    return self;
}

//  Decodes PAYLOAD into SELF's body with the codec SELF's type and status
//  call for. An empty payload is the body's protobuf defaults, which the
//  codec checks like any other. Returns 0, or -1 with ERROR naming what was
//  wrong.
static int
s_body_decode(shoal_envelope_t *self, const ProtobufCBinaryData *payload,
              char *error, size_t error_size)
{
    const shoal_codec_t *codec = s_body_codec((int) self->type, self->status);
    if (!codec) {
        if (payload->len == 0)
            return 0;
        char description[DESCRIPTION_MAX];
        s_describe_message((int) self->type, self->status, description, sizeof description);
        s_set_error(error, error_size, "%s carries no body, but this one has %zu bytes",
                    description, payload->len);
        return -1;
    }
    void *body = zmalloc(codec->record_size);
    char detail[BODY_ERROR_MAX] = "";
    if (codec->decode(payload->data, payload->len, body, detail, sizeof detail)) {
        free(body);
        s_set_error(error, error_size, "%s body: %s", codec->name, detail);
        return -1;
    }
    self->body = body;
    self->body_codec = codec;
    return 0;
}

shoal_envelope_t *
shoal_envelope_decode(zmsg_t *msg, char *error, size_t error_size)
{
    assert(msg);
    //  The frame checks come before protobuf-c sees a byte: an oversize frame
    //  is refused without the cost of unpacking it.
    size_t frames = zmsg_size(msg);
    if (frames == 0) {
        s_set_error(error, error_size, "message has no frames");
        return NULL;
    }
    if (frames > SHOAL_FRAMES_MAX) {
        s_set_error(error, error_size, "message has %zu frames, more than the %d allowed",
                    frames, SHOAL_FRAMES_MAX);
        return NULL;
    }
    zframe_t *frame = zmsg_first(msg);
    size_t size = zframe_size(frame);
    if (size == 0) {
        s_set_error(error, error_size, "first frame is empty");
        return NULL;
    }
    if (size > SHOAL_ENVELOPE_MAX) {
        s_set_error(error, error_size, "frame of %zu bytes exceeds the %d-byte limit",
                    size, SHOAL_ENVELOPE_MAX);
        return NULL;
    }
    char detail[BODY_ERROR_MAX] = "";
    if (shoal_wire_check(&shoal__envelope__descriptor, zframe_data(frame), size, detail, sizeof detail)) {
        s_set_error(error, error_size, "%s", detail);
        return NULL;
    }
    Shoal__Envelope *message = shoal__envelope__unpack(NULL, size, zframe_data(frame));
    if (!message) {
        s_set_error(error, error_size, "%zu bytes are not a protobuf Envelope", size);
        return NULL;
    }
    shoal_envelope_t *self = NULL;
    if (s_envelope_check(message->version, (int) message->type, message->status,
                         error, error_size) == 0) {
        self = s_envelope_from_message(message);
        if (s_body_decode(self, &message->payload, error, error_size))
            shoal_envelope_destroy(&self);
    }
    shoal__envelope__free_unpacked(message, NULL);
    return self;
}

const char *
shoal_msg_type_name(shoal_msg_type_t type)
{
    //  Compared as int: a value read from outside may be any number, and the
    //  enum's own type may be unsigned.
    int value = (int) type;
    return s_msg_type_is_known(value) ? s_msg_types[value].name : "unknown";
}

const shoal_codec_t *
shoal_msg_body_codec(shoal_msg_type_t type, bool reply)
{
    int value = (int) type;
    if (!s_msg_type_is_known(value))
        return NULL;
    return reply ? s_msg_types[value].reply : s_msg_types[value].request;
}

const char *
shoal_status_text(uint32_t status)
{
    for (size_t i = 0; i < STATUS_TEXT_COUNT; i++)
        if (s_status_texts[i].status == status)
            return s_status_texts[i].text;
    return "Unknown";
}
