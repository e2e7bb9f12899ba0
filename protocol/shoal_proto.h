/*  shoal_proto: the envelope every shoal message starts with, and its codec.

    This module and shoal_record are the only code that includes protobuf-c
    headers. Everything else sees the plain C structs below: a decoded message
    is validated here once (version, type, body, sizes), so the node and the
    client never meet a half-valid message.

    The body is the struct of shoal_msg.h that the message's type and
    direction call for (shoal_msg.h lists which); on the wire it is the
    Envelope's payload, encoded by that body's codec.

    A message on the wire is a zmsg_t whose first frame is the encoded
    Envelope. A second frame, when present, carries bulk bytes (move chunks)
    and is not part of the envelope.
*/
#ifndef SHOAL_PROTO_H_INCLUDED
#define SHOAL_PROTO_H_INCLUDED

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "shoal_limits.h"
#include "shoal_msg.h"

#define SHOAL_PROTOCOL_VERSION 1
//  Largest encoded envelope (frame 1) that decode accepts.
#define SHOAL_ENVELOPE_MAX SHOAL_FRAME_MAX
//  Largest number of frames in one message: envelope plus one bulk frame.
#define SHOAL_FRAMES_MAX 2

//  Reply status codes; their meaning is HTTP's.
#define SHOAL_STATUS_OK 200
#define SHOAL_STATUS_BAD_REQUEST 400
#define SHOAL_STATUS_UNAUTHORIZED 401
#define SHOAL_STATUS_FORBIDDEN 403
#define SHOAL_STATUS_NOT_FOUND 404
#define SHOAL_STATUS_CONFLICT 409
#define SHOAL_STATUS_TOO_MANY 429
#define SHOAL_STATUS_INTERNAL 500
#define SHOAL_STATUS_UNAVAILABLE 503
#define SHOAL_STATUS_NO_SPACE 507

//  The numbers are MsgType's in shoal.proto.
typedef enum {
    SHOAL_MSG_ERROR = 1,        //  reply to a request that could not be decoded
    SHOAL_MSG_STATUS = 2,       //  node status
    SHOAL_MSG_KV_PUT = 3,       //  write a key of a replicated dataset
    SHOAL_MSG_KV_GET = 4,       //  read a key
    SHOAL_MSG_KV_DEL = 5,       //  delete a key (write its tombstone)
    SHOAL_MSG_KV_SCAN = 6,      //  list a dataset's keys, a page at a time
    SHOAL_MSG_OPLOG_HEADS = 7,  //  every node's last entry in a dataset
    SHOAL_MSG_OPLOG_STATS = 8,  //  counts of one dataset's log, or of all
    SHOAL_MSG_OPLOG_PRUNE = 9,  //  drop old entries
    SHOAL_MSG_MESH_JOIN = 10,   //  a node asks a seed to let it in
    SHOAL_MSG_MESH_PING = 11,   //  a direct probe, carrying gossip
    SHOAL_MSG_MESH_PING_REQ = 12,   //  probe a target on the sender's behalf
    SHOAL_MSG_MESH_LEAVE = 13,  //  a node says it is going away
    SHOAL_MSG_SYNC_PUSH = 14,   //  new local entries, as they are written
    SHOAL_MSG_SYNC_HEADS = 15,  //  anti-entropy: heads for heads (a confirmation too)
    SHOAL_MSG_SYNC_PULL = 16,   //  one node's entries after a stamp, a page
    SHOAL_MSG_SYNC_CHAIN = 17,  //  a chain range, to repair a gap
    SHOAL_MSG_SYNC_SNAPSHOT = 18,   //  a page of a dataset's snapshot
    SHOAL_MSG_PEERS = 19,       //  the mesh as the node sees it
    SHOAL_MSG_PEERS_FORGET = 20,    //  retire a peer for good
    SHOAL_MSG_CLAIM_CREATE = 21,    //  admit and start a claim
    SHOAL_MSG_CLAIM_SHOW = 22,  //  one claim, from its owner
    SHOAL_MSG_CLAIM_LIST = 23,  //  the caller's claims on the node
    SHOAL_MSG_CLAIM_STOP = 24,  //  stop a claim's guest, keep its state
    SHOAL_MSG_CLAIM_START = 25, //  start a stopped claim's guest again
    SHOAL_MSG_CLAIM_PAUSE = 26, //  freeze a claim's guest
    SHOAL_MSG_CLAIM_RESUME = 27,    //  thaw it
    SHOAL_MSG_CLAIM_RELEASE = 28,   //  end a claim and remove its guest
    SHOAL_MSG_CLAIM_CALL = 29,  //  a guest call (its key/value area)
    SHOAL_MSG_LOOKUP = 30,      //  who owns a claim, from the registry
    SHOAL_MSG_MOVE = 31,        //  move a running claim to a named peer
    SHOAL_MSG_MOVE_STATUS = 32, //  a move's progress, or its result
    SHOAL_MSG_MOVE_RESUME = 33, //  resume a committed move's guest on its source (risky)
    SHOAL_MSG_MOVE_LIST = 34,   //  the move records a node holds
    SHOAL_MSG_MOVE_ADMIT = 35,  //  source -> target: admit and reserve
    SHOAL_MSG_MOVE_PREPARE = 36,    //  source -> target: recheck before the final round
    SHOAL_MSG_MOVE_COMMIT = 37, //  target -> source: the copy is durable, may it start?
    SHOAL_MSG_MOVE_STARTED = 38,    //  target -> source: the guest runs on the target
    SHOAL_MSG_MOVE_ABORT = 39,  //  source -> target: drop what was received
    SHOAL_MSG_MOVE_QUERY = 40,  //  either way: the other side's record of a move
    SHOAL_MSG_COUNTERS = 41,    //  admission counters: the node's, a tenant's
    SHOAL_MSG_SYNC_BULK = 42,   //  a page of a catch-up in bulk: entries as stored
    SHOAL_MSG_DAMAGE_FORGET = 43,   //  forget an account of damage to the store
    //  Resource-scoped keys (50-69; the numbers between are no type).
    SHOAL_MSG_CLAIM_TXN = 50,   //  a transaction on a claim's keys, at its owner
    SHOAL_MSG_MOVE_KEYS = 51,   //  source -> target: the claim's keys, frozen for the final round
    SHOAL_MSG_LEASE = 52,       //  grant, keep alive, revoke, read or list leases
    SHOAL_MSG_LOCK = 53,        //  acquire, release or list a claim's read/write lock
    SHOAL_MSG_LOCK_SWEEP = 54,  //  node -> node: sweep the locks of my earlier runs
    SHOAL_MSG_PEERS_SWEEPING = 55,  //  the peers held back until their lock sweep is done
    SHOAL_MSG_LEASE_ENDED = 56, //  node -> node: a lease ended at its home; copies end
    SHOAL_MSG_LEASE_LOOKUP = 57,    //  which node is a lease's home
    SHOAL_MSG_SWEEP_DONE = 58,  //  node -> node: my run's locks were swept on all my peers
    //  Operators and programs (70-89).
    SHOAL_MSG_WATCH = 70,       //  become (or stay) a watcher of the event stream
    SHOAL_MSG_EVENT = 71,       //  one event, sent to a watcher
    //  Storage objects (80-89).
    SHOAL_MSG_OBJECT = 80,      //  a storage object operation (add, commit, get, ls, rm, open, close, replicate)
    SHOAL_MSG_OBJECT_WRITE = 81, //  a chunk of an instance being added
    SHOAL_MSG_OBJECT_READ = 82, //  a chunk of an instance held open
    SHOAL_MSG_OBJECT_RECEIVE = 83, //  between nodes: make an instance and receive its bytes
    SHOAL_MSG_OBJECT_IDS = 84,  //  allocate storage or instance ids
    SHOAL_MSG_CLAIM_CHECKPOINT = 85,    //  save a stopped or paused claim's guest as an object
    //  Operators: the consistency sweep (90-94).
    SHOAL_MSG_FSCK = 90,        //  start or read a node's consistency sweep
    //  Hot drain (95-99).
    SHOAL_MSG_DRAIN = 95,       //  mark a node draining and move its claims off it live
    SHOAL_MSG_UNDRAIN = 96,     //  end the mark (and a drain under way)
    SHOAL_MSG_DRAIN_STATUS = 97,    //  a drain's progress or result
    SHOAL_MSG_CAPACITY = 98,    //  a node's limits and counters, for a drain choosing targets
} shoal_msg_type_t;

//  The first and last message types. A number between that names no type
//  (shoal_msg_type_name says "unknown") is refused as an unknown type.
#define SHOAL_MSG_TYPE_FIRST SHOAL_MSG_ERROR
#define SHOAL_MSG_TYPE_LAST SHOAL_MSG_CAPACITY

//  A decoded or to-be-encoded message. Strings and the body are owned by the
//  envelope and freed by shoal_envelope_destroy; set strings with strdup.
typedef struct {
    uint32_t version;           //  sender's protocol version
    shoal_msg_type_t type;      //  what the message is about
    uint64_t request_id;        //  echoed from request to reply
    uint32_t status;            //  0 in a request, SHOAL_STATUS_* in a reply
    char *message;              //  human detail of the status, may be NULL
    uint32_t retry_after_ms;    //  with 429 and 503
    //  The shoal_msg_*_t that the type and direction carry, or NULL when they
    //  carry none. Made only by shoal_envelope_new_body and decode.
    void *body;
    //  The codec BODY was made for: it frees BODY, and encode refuses a body
    //  made for another type or direction than the envelope now has.
    const shoal_codec_t *body_codec;
} shoal_envelope_t;

//  A new request of TYPE with no body. Never NULL (aborts on out-of-memory,
//  as czmq does).
shoal_envelope_t *shoal_envelope_new(shoal_msg_type_t type, uint64_t request_id);

//  A reply to REQUEST (same type and request id) with STATUS and a printf-style
//  message. REQUEST may be NULL when the request could not be decoded: the
//  reply is then of type SHOAL_MSG_ERROR with request id 0.
shoal_envelope_t *shoal_envelope_reply(const shoal_envelope_t *request, uint32_t status,
                                       const char *format, ...) CHECK_PRINTF(3);

void shoal_envelope_destroy(shoal_envelope_t **self_p);

//  Frees the previous body, if any, and gives the envelope a new zeroed body
//  of the struct its type and direction call for (a request's when status is
//  0, a reply's when status is 200). Returns it (the envelope keeps it) for
//  the caller to fill, or NULL when such a message carries no body. Set the
//  type and status first.
void *shoal_envelope_new_body(shoal_envelope_t *self);

//  Encodes to a new one-frame message (the caller owns it). Returns NULL and
//  fills ERROR when the envelope is not valid (a missing body, a body that
//  does not belong to its type, a body field out of its limits): encode
//  checks what decode checks.
zmsg_t *shoal_envelope_encode(const shoal_envelope_t *self, char *error, size_t error_size);

//  Decodes the first frame of MSG (borrowed). Returns NULL and fills ERROR with
//  what was wrong: empty or oversize frame, too many frames, bytes that are not
//  an Envelope, wrong version, unknown type, a payload where the type carries
//  no body, a body that does not decode or breaks its limits. An empty
//  payload where a body belongs decodes as the body's defaults, which its
//  codec then checks.
shoal_envelope_t *shoal_envelope_decode(zmsg_t *msg, char *error, size_t error_size);

//  The lower-case name of a message type ("status"), or "unknown".
const char *shoal_msg_type_name(shoal_msg_type_t type);

//  The codec of the body a request of TYPE carries, or with REPLY a 200
//  reply's; NULL when that message carries none or TYPE is unknown.
const shoal_codec_t *shoal_msg_body_codec(shoal_msg_type_t type, bool reply);

//  The short reason phrase of a status code ("Not Found"), or "Unknown".
const char *shoal_status_text(uint32_t status);

#endif
