/*  shoal_msg: the bodies of shoal's requests and replies.

    Each message type carries at most one body in each direction: the
    request's, and the reply's when the status is 200 (other replies say all
    they have to say in their status and message). The table in shoal_proto.c
    maps (type, direction) to the codec of the body; shoal_envelope_decode
    decodes and validates the body with it, so a handler only ever sees a
    body that holds what its type promises. The structs own their strings,
    byte strings and arrays.

        type              request body            200 reply body
        status            -                       shoal_msg_status_reply_t
        kv_put            shoal_msg_kv_put_t      shoal_msg_kv_item_t (no value)
        kv_get            shoal_msg_kv_key_t      shoal_msg_kv_item_t
        kv_del            shoal_msg_kv_key_t      shoal_msg_kv_item_t (the tombstone)
        kv_scan           shoal_msg_kv_scan_t     shoal_msg_kv_items_t
        oplog_heads       shoal_msg_dataset_t     shoal_msg_heads_t
        oplog_stats       shoal_msg_dataset_t     shoal_msg_oplog_stats_t
        oplog_prune       shoal_msg_prune_t       shoal_msg_prune_reply_t
        mesh_join         shoal_msg_member_t      shoal_msg_members_t
        mesh_ping         shoal_msg_ping_t        shoal_msg_members_t
        mesh_ping_req     shoal_msg_ping_t        shoal_msg_members_t
        mesh_leave        shoal_msg_member_t      -
        sync_push         shoal_msg_entries_t     -
        sync_heads        shoal_msg_heads_t       shoal_msg_heads_t
        sync_pull         shoal_msg_pull_t        shoal_msg_entries_t
        sync_chain        shoal_msg_chain_t       shoal_msg_entries_t
        sync_snapshot     shoal_msg_snapshot_request_t  shoal_msg_snapshot_t
        sync_bulk         shoal_msg_pull_t        shoal_msg_bulk_t
        peers             -                       shoal_msg_peers_t
        peers_forget      shoal_msg_node_ref_t    -
        damage_forget     shoal_msg_damage_ref_t  -
        claim_create      shoal_msg_claim_create_t    shoal_msg_claim_info_t
        claim_checkpoint  shoal_msg_claim_checkpoint_t  shoal_msg_object_reply_t
        claim_show, claim_stop, claim_start, claim_pause, claim_resume,
        claim_release     shoal_msg_claim_ref_t   shoal_msg_claim_info_t
        claim_list        -                       shoal_msg_claim_list_t
        claim_call        shoal_msg_claim_call_t  shoal_msg_claim_call_reply_t
        lookup            shoal_msg_claim_ref_t   shoal_registry_record_t
        move, move_status, move_resume, move_admit, move_commit, move_query
                          shoal_move_t            shoal_move_t
        move_prepare, move_started, move_abort
                          shoal_move_t            -
        move_list         -                       shoal_msg_moves_t
        counters          shoal_msg_counters_request_t  shoal_msg_counters_t
        claim_txn         shoal_msg_claim_txn_t   shoal_msg_claim_txn_reply_t
        move_keys         shoal_msg_claim_keys_t  -
        lease             shoal_msg_lease_request_t  shoal_msg_leases_t
        lock              shoal_msg_lock_request_t   shoal_msg_locks_t
        lock_sweep        shoal_msg_lock_request_t   -
        peers_sweeping    -                       shoal_msg_members_t
        lease_ended       shoal_msg_lease_request_t  -
        lease_lookup      shoal_msg_lease_request_t  shoal_msg_member_t
        sweep_done        shoal_msg_lock_request_t   -

    shoal_registry_record_t is not a message body but the value of a key of
    the "registry" dataset; its codec lives here with the other protobuf
    shapes. shoal_move_t is both a body and the record each side of a move
    keeps in its "moves" column family.
*/
#ifndef SHOAL_MSG_H_INCLUDED
#define SHOAL_MSG_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_checksum.h"
#include "shoal_limits.h"
#include "shoal_oplog_codec.h"

//  SHOAL_DATASET_MAX, SHOAL_KV_KEY_MAX and SHOAL_KV_VALUE_MAX bound what a
//  message may carry (shoal_limits.h derives them).
//  Most items one scan reply holds, and the default when a scan asks for 0.
#define SHOAL_SCAN_LIMIT_MAX 10000
#define SHOAL_SCAN_LIMIT_DEFAULT 1000

//  An account of damage to the store (DamageRecord); also how the node
//  keeps it.
typedef struct {
    char *id;                   //  names it for damage_forget; never empty
    char *kind;                 //  "log" or "move"
    char *what;                 //  the damaged record: file and offset, or key
    char *keys;                 //  the keys it held, as far as they read
    char *claim_id;             //  the claim it concerns ("" when none)
    uint64_t found_ms;          //  wall time it was found
    char *action;               //  what the node does about it, or waits for
    char **datasets;            //  DATASET_COUNT replicated datasets it touched
    size_t dataset_count;
} shoal_msg_damage_t;

typedef struct {
    char *id;                   //  a damage account's id
} shoal_msg_damage_ref_t;

typedef struct {
    char *node_id;              //  never empty
    char *version;
    uint64_t uptime_ms;
    char *endpoint;
    char *data_dir;             //  empty for a tenant
    uint64_t claims;
    uint64_t peers;
    uint64_t clients;
    char *role;                 //  the caller's role as the node sees it
    char *tenant;               //  the caller's tenant, for role tenant
    shoal_msg_damage_t *damage; //  DAMAGE_COUNT accounts of damage (admins only)
    size_t damage_count;
    uint64_t space_free_bytes;  //  the store's free space (admins only; 0 with the reserve: unknown)
    uint64_t space_reserve_bytes;   //  writes answer 507 below it
    bool oplog_migrating;       //  the store is being migrated from oplog layout 1
    uint64_t oplog_migrated;    //  entries the migration moved since the start
} shoal_msg_status_reply_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    char *key;                  //  1 to SHOAL_KV_KEY_MAX bytes
    uint8_t *value;             //  may be NULL when value_size is 0
    size_t value_size;          //  at most SHOAL_KV_VALUE_MAX
} shoal_msg_kv_put_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    char *key;                  //  1 to SHOAL_KV_KEY_MAX bytes
} shoal_msg_kv_key_t;

typedef struct {
    char *dataset;
    char *key;
    uint8_t *value;             //  NULL when value_size is 0
    size_t value_size;
    bool deleted;               //  a tombstone
    uint64_t wall_ms;           //  the entry's clock
    uint32_t logic;
    char *node;                 //  the node that wrote the entry, never empty
    uint8_t hash[SHOAL_HASH_SIZE];  //  the entry
    uint64_t epoch;             //  in epoch-ordered datasets (snapshots carry it); else 0
} shoal_msg_kv_item_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    char *prefix;               //  may be empty: every key
    char *start_after;          //  may be empty: from the first key
    uint32_t limit;             //  0 (the default) to SHOAL_SCAN_LIMIT_MAX
} shoal_msg_kv_scan_t;

typedef struct {
    shoal_msg_kv_item_t *items; //  COUNT items
    size_t count;
    bool more;                  //  the limit stopped the scan
} shoal_msg_kv_items_t;

typedef struct {
    char *dataset;              //  may be empty where the type allows "all"
} shoal_msg_dataset_t;

typedef struct {
    char *dataset;
    char *node;
    uint64_t wall_ms;
    uint32_t logic;
    uint8_t hash[SHOAL_HASH_SIZE];
} shoal_msg_head_t;

typedef struct {
    shoal_msg_head_t *heads;    //  COUNT heads
    size_t count;
    bool serves_bulk;           //  sync_heads: the sender answers sync_bulk (older nodes say nothing)
} shoal_msg_heads_t;

typedef struct {
    char *dataset;
    uint64_t entries;
    uint64_t nodes;
    uint64_t watermark_ms;      //  0: never pruned
    uint64_t keys;              //  live materialised keys
} shoal_msg_dataset_stats_t;

typedef struct {
    shoal_msg_dataset_stats_t *datasets;    //  COUNT datasets
    size_t count;
} shoal_msg_oplog_stats_t;

typedef struct {
    char *dataset;              //  empty: every dataset
    uint64_t before_ms;         //  prune entries stamped at or before it; never 0
} shoal_msg_prune_t;

typedef struct {
    uint64_t pruned;
} shoal_msg_prune_reply_t;

//  A member's state as gossip carries it. The numbers are MemberState's.
typedef enum {
    SHOAL_MEMBER_ALIVE = 1,
    SHOAL_MEMBER_SUSPECT = 2,
    SHOAL_MEMBER_DEAD = 3,
    SHOAL_MEMBER_LEFT = 4,
} shoal_member_state_t;

//  "alive", "suspect", "dead", "left"; NULL outside the enumeration.
const char *shoal_member_state_name(shoal_member_state_t state);

typedef struct {
    char *node_id;              //  a valid node name
    char *endpoint;             //  where it serves, never empty
    uint64_t incarnation;       //  raised only by the member itself
    shoal_member_state_t state; //  one of shoal_member_state_t
} shoal_msg_member_t;

typedef struct {
    shoal_msg_member_t *members;    //  COUNT members
    size_t count;
} shoal_msg_members_t;

typedef struct {
    char *from;                 //  the sender's node id
    char *target;               //  the node meant to answer (ping) or to probe (ping_req)
    shoal_msg_member_t *members;    //  gossip, COUNT members
    size_t count;
} shoal_msg_ping_t;

typedef struct {
    shoal_oplog_entry_t *entries;   //  COUNT entries, in stamp order
    size_t count;
    bool more;                  //  a page limit stopped the reply
    bool pruned;                //  what was asked for was pruned: take a snapshot
} shoal_msg_entries_t;

//  A bulk page: entries encoded as their sender stores them, one after
//  another in BYTES (entry i is SIZES[i] bytes, never 0), in chain order.
typedef struct {
    uint8_t *bytes;             //  the entries
    size_t *sizes;              //  COUNT sizes
    size_t count;
    bool more;                  //  a page limit stopped the reply
    bool pruned;                //  what was asked for was pruned: take a snapshot
    uint64_t last_wall_ms;      //  the last entry's stamp (0 with no entry)
    uint32_t last_logic;
} shoal_msg_bulk_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    char *node;                 //  whose entries
    bool from_start;            //  from its first entry; else after the stamp below
    uint64_t after_wall_ms;
    uint32_t after_logic;
} shoal_msg_pull_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    bool has_start;             //  false: from the chain's first entry
    uint8_t start[SHOAL_HASH_SIZE]; //  exclusive
    uint8_t end[SHOAL_HASH_SIZE];   //  inclusive
} shoal_msg_chain_t;

typedef struct {
    char *dataset;              //  1 to SHOAL_DATASET_MAX bytes
    bool entries;               //  the entries phase; else the keys phase
    char *after_key;            //  keys phase: resume after this key ("" : first)
    uint64_t after_wall_ms;     //  entries phase: resume after this stamp and node
    uint32_t after_logic;
    char *after_node;           //  "" : from the first entry
} shoal_msg_snapshot_request_t;

typedef struct {
    shoal_msg_kv_item_t *records;   //  RECORD_COUNT materialised keys
    size_t record_count;
    shoal_oplog_entry_t *entries;   //  ENTRY_COUNT entries left in the log
    size_t entry_count;
    shoal_msg_head_t *heads;        //  HEAD_COUNT heads of the sender
    size_t head_count;
    uint64_t watermark_wall_ms;     //  the sender's prune watermark (0: never pruned)
    uint32_t watermark_logic;
    bool more;                      //  this phase has more pages
} shoal_msg_snapshot_t;

typedef struct {
    char *node_id;
    char *endpoint;
    shoal_member_state_t state;
    uint64_t incarnation;
    uint64_t last_heard_ms;     //  ms since last heard (0: never)
    uint64_t lag;               //  entries the answering node holds that it lacks
    bool self;                  //  the answering node
} shoal_msg_peer_t;

typedef struct {
    shoal_msg_peer_t *peers;    //  COUNT peers
    size_t count;
} shoal_msg_peers_t;

typedef struct {
    char *node_id;              //  a valid node name
} shoal_msg_node_ref_t;

//  The value of a "registry" key: who owns a claim, at which epoch.
typedef struct {
    char *claim_id;             //  never empty
    char *owner;                //  the owning node's id, never empty
    char *endpoint;             //  where the owner serves
    uint64_t epoch;             //  the higher wins
    char *tenant;               //  the claim's org/project; may be empty in old records
    bool released;              //  its owner released it: no one owns it any more
} shoal_registry_record_t;

//  Longest guest-call key and value a message may carry (the guest's own
//  limits are smaller; it names them when refusing).
#define SHOAL_CALL_KEY_MAX 1024
#define SHOAL_CALL_VALUE_MAX 65536
//  Most claims one list reply holds.
#define SHOAL_CLAIM_LIST_MAX 10000

typedef struct {
    char *tenant;               //  org/project
    uint64_t memory_bytes;      //  more than 0
    char *driver;               //  "proc" or "exec"; empty: proc
    char *id;                   //  a valid claim id (shoal_names.h), or empty for one the node makes
    uint64_t disk_bytes;        //  the guest's disk (may be 0)
    uint64_t rate;              //  the guest load's bytes/s (0: idle)
    char *from_object;          //  an object name of the tenant holding a guest's image ("": none)
} shoal_msg_claim_create_t;

typedef struct {
    char *id;                   //  a valid claim id (shoal_names.h)
    char *name;                 //  the new object's name (as an add names it)
    char *comment;              //  at most SHOAL_OBJECT_COMMENT_MAX bytes
} shoal_msg_claim_checkpoint_t;

typedef struct {
    char *id;                   //  a valid claim id (shoal_names.h)
} shoal_msg_claim_ref_t;

typedef struct {
    char *id;                   //  never empty
    char *tenant;               //  org/project
    int state;                  //  a shoal_claim_state_t
    uint64_t memory_bytes;
    char *driver;
    uint64_t epoch;
    uint64_t created_ms;
    char *error;                //  why, in state error; may be empty
    char *owner;                //  the node that answered
} shoal_msg_claim_info_t;

typedef struct {
    shoal_msg_claim_info_t *claims; //  COUNT claims
    size_t count;
} shoal_msg_claim_list_t;

typedef struct {
    char *id;                   //  a valid claim id (shoal_names.h)
    char *op;                   //  "put" or "get"
    char *key;                  //  1 to SHOAL_CALL_KEY_MAX bytes
    uint8_t *value;             //  put only; NULL when value_size is 0
    size_t value_size;          //  at most SHOAL_CALL_VALUE_MAX
} shoal_msg_claim_call_t;

typedef struct {
    bool found;                 //  get: the key was there
    uint8_t *value;             //  NULL when value_size is 0
    size_t value_size;
} shoal_msg_claim_call_reply_t;

//  Resource-scoped keys (claim_txn, move_keys): each claim's own key space.
//  Longest key and value, most operations in each part of a transaction,
//  and most bytes a claim's key space holds: every key counts its key, its
//  value and SHOAL_CLAIM_KEY_OVERHEAD, so that the whole space, with its
//  bookkeeping, fits the one frame a move carries it in.
#define SHOAL_CLAIM_KEY_MAX 512
#define SHOAL_CLAIM_VALUE_MAX (64 * 1024)
#define SHOAL_TXN_OPS_MAX 64
#define SHOAL_CLAIM_KEY_OVERHEAD 64
#define SHOAL_CLAIM_KEYS_BYTES_MAX (768 * 1024)

//  What a compare looks at (KeyCompareTarget).
typedef enum {
    SHOAL_KEY_TARGET_VALUE = 1,
    SHOAL_KEY_TARGET_VERSION = 2,
    SHOAL_KEY_TARGET_CREATE = 3,
    SHOAL_KEY_TARGET_MOD = 4,
    SHOAL_KEY_TARGET_LEASE = 5,
} shoal_key_target_t;

//  How it compares (KeyCompareResult): the key's field against the compare's.
typedef enum {
    SHOAL_KEY_EQUAL = 1,
    SHOAL_KEY_NOT_EQUAL = 2,
    SHOAL_KEY_GREATER = 3,
    SHOAL_KEY_LESS = 4,
} shoal_key_result_t;

typedef enum {
    SHOAL_KEY_PUT = 1,
    SHOAL_KEY_DELETE = 2,
    SHOAL_KEY_GET = 3,
} shoal_key_op_type_t;

//  "value", "version", "create", "mod", "lease"; "equal", "not_equal",
//  "greater", "less"; "put", "delete", "get". NULL outside the enumeration.
const char *shoal_key_target_name(shoal_key_target_t target);
const char *shoal_key_result_name(shoal_key_result_t result);
const char *shoal_key_op_name(shoal_key_op_type_t type);

typedef struct {
    char *key;                  //  1 to SHOAL_CLAIM_KEY_MAX bytes
    shoal_key_target_t target;
    shoal_key_result_t result;
    uint8_t *value;             //  with SHOAL_KEY_TARGET_VALUE; NULL when value_size is 0
    size_t value_size;          //  at most SHOAL_CLAIM_VALUE_MAX
    uint64_t number;            //  with the other targets
} shoal_msg_key_compare_t;

typedef struct {
    shoal_key_op_type_t type;
    char *key;                  //  1 to SHOAL_CLAIM_KEY_MAX bytes; may be empty with prefix
    uint8_t *value;             //  put; NULL when value_size is 0
    size_t value_size;          //  at most SHOAL_CLAIM_VALUE_MAX, none but for put
    uint64_t lease;             //  put: the lease the key is attached to (0: none)
    bool prefix;                //  get, delete: every key starting with key
} shoal_msg_key_op_t;

typedef struct {
    char *claim_id;             //  a valid claim id (shoal_names.h)
    shoal_msg_key_compare_t *compares;  //  COMPARE_COUNT, at most SHOAL_TXN_OPS_MAX
    size_t compare_count;
    shoal_msg_key_op_t *success;        //  SUCCESS_COUNT, at most SHOAL_TXN_OPS_MAX
    size_t success_count;
    shoal_msg_key_op_t *failure;        //  FAILURE_COUNT, at most SHOAL_TXN_OPS_MAX
    size_t failure_count;
} shoal_msg_claim_txn_t;

//  A key with its bookkeeping; also the record its owner keeps.
typedef struct {
    char *key;                  //  1 to SHOAL_CLAIM_KEY_MAX bytes
    uint8_t *value;             //  NULL when value_size is 0
    size_t value_size;          //  at most SHOAL_CLAIM_VALUE_MAX
    uint64_t version;           //  writes since it was created, from 1
    uint64_t create_revision;   //  the claim's revision that created it
    uint64_t mod_revision;      //  the claim's revision that last wrote it
    uint64_t lease;             //  the lease it is attached to (0: none)
} shoal_msg_key_value_t;

typedef struct {
    shoal_key_op_type_t type;
    shoal_msg_key_value_t *kvs; //  get: COUNT keys found, in key order
    size_t count;
    uint64_t deleted;           //  delete: keys removed
} shoal_msg_key_result_t;

typedef struct {
    bool succeeded;             //  the success branch ran
    uint64_t revision;          //  the claim's revision after the transaction
    shoal_msg_key_result_t *results;    //  COUNT, one per operation of the branch that ran
    size_t count;
    char *owner;                //  the node that answered
} shoal_msg_claim_txn_reply_t;

//  A claim's key space whole, or without keys its owner's record of it.
typedef struct {
    char *claim_id;             //  a valid claim id
    char *move_id;              //  the move that carries it or froze it; may be empty
    uint64_t revision;          //  the claim's last revision (0: never written)
    uint64_t bytes;             //  what its keys count against SHOAL_CLAIM_KEYS_BYTES_MAX
    shoal_msg_key_value_t *kvs; //  COUNT keys, in key order
    size_t count;
    //  A move's: the claim's lock, and the leases its keys and locks hold.
    uint64_t lock_readers;
    char *lock_writer;          //  may be NULL (none)
    char *lock_waiter;          //  may be NULL (none)
    struct _shoal_msg_lock_record_t *locks;     //  LOCK_COUNT records
    size_t lock_count;
    struct _shoal_msg_lease_t *leases;          //  LEASE_COUNT leases
    size_t lease_count;
} shoal_msg_claim_keys_t;

//  Leases (lease): most TTL a node grants (a longer one is shortened to
//  it), the shortest it takes, and most leases one reply lists.
#define SHOAL_LEASE_TTL_MAX_MS (3600 * 1000)
#define SHOAL_LEASE_TTL_MIN_MS 100
#define SHOAL_LEASES_MAX 10000

typedef enum {
    SHOAL_LEASE_GRANT = 1,
    SHOAL_LEASE_KEEPALIVE = 2,
    SHOAL_LEASE_REVOKE = 3,
    SHOAL_LEASE_TTL = 4,
    SHOAL_LEASE_LIST = 5,
} shoal_lease_op_t;

//  "grant", "keepalive", "revoke", "ttl", "list"; NULL outside the enumeration.
const char *shoal_lease_op_name(shoal_lease_op_t op);

typedef struct {
    shoal_lease_op_t op;
    uint64_t id;                //  the lease (grant: 0, the node picks)
    uint64_t ttl_ms;            //  grant: SHOAL_LEASE_TTL_MIN_MS at least
} shoal_msg_lease_request_t;

//  A lease as its node keeps it, and as a reply lists it.
typedef struct _shoal_msg_lease_t {
    uint64_t id;                //  never 0
    uint64_t ttl_ms;            //  as granted
    uint64_t expires_ms;        //  wall clock it ends at unless kept alive
    char *holder;               //  the client key that took it
    char *tenant;               //  its tenant ("" for an admin's)
    uint64_t granted_ms;
    uint64_t remaining_ms;      //  reply: what is left
    uint64_t attached;          //  reply: keys and locks attached to it
    char *home;                 //  the node that granted it ("": the node keeping this record)
} shoal_msg_lease_t;

typedef struct {
    shoal_msg_lease_t *leases;  //  COUNT, at most SHOAL_LEASES_MAX
    size_t count;
    bool shortened;             //  grant: less than was asked
} shoal_msg_leases_t;

//  Locks (lock): read/write locks on a claim, with lock records.
#define SHOAL_LOCK_HOLDER_MAX 256
#define SHOAL_LOCK_RECORDS_MAX 10000

typedef enum {
    SHOAL_LOCK_ACQUIRE = 1,
    SHOAL_LOCK_RELEASE = 2,
    SHOAL_LOCK_LIST = 3,
    SHOAL_LOCK_SWEEP = 4,       //  lock_sweep only
} shoal_lock_op_t;

typedef enum {
    SHOAL_LOCK_READ = 1,
    SHOAL_LOCK_WRITE = 2,
    SHOAL_LOCK_WAIT = 3,
} shoal_lock_mode_t;

//  "acquire", "release", "list"; "read", "write", "wait". NULL outside.
const char *shoal_lock_op_name(shoal_lock_op_t op);
const char *shoal_lock_mode_name(shoal_lock_mode_t mode);

typedef struct {
    shoal_lock_op_t op;
    char *claim_id;             //  a valid claim id
    char *holder;               //  at most SHOAL_LOCK_HOLDER_MAX bytes ("": the caller's key name)
    shoal_lock_mode_t mode;     //  acquire: read or write
    bool wait;                  //  acquire write: set wait when readers hold it
    uint64_t lease;             //  acquire: 0, or the lease it goes with
    char *holder_node;          //  "": the answering node (lock_sweep: the node swept, required)
    uint64_t holder_boot;       //  lock_sweep: the incarnation holder_node's run started with
    uint64_t holder_incarnation;    //  lock_sweep: holder_node's incarnation now
} shoal_msg_lock_request_t;

typedef struct _shoal_msg_lock_record_t {
    char *claim_id;
    char *holder;
    char *holder_node;
    shoal_lock_mode_t mode;
    uint64_t lease;
    uint64_t time_ms;
    uint64_t holder_boot;       //  the run of holder_node it was taken under (0: unknown)
} shoal_msg_lock_record_t;

typedef struct {
    char *claim_id;
    uint64_t readers;
    char *writer;               //  "" when none
    char *waiter;               //  "" when none
    shoal_msg_lock_record_t *records;   //  COUNT, at most SHOAL_LOCK_RECORDS_MAX
    size_t count;
    bool granted;
} shoal_msg_locks_t;

//  The states of a move record (see shoal_move.h): the source's, then the
//  target's. NONE only answers a query about a move the node has no record of.
typedef enum {
    SHOAL_MOVE_NONE = 0,
    SHOAL_MOVE_PENDING = 1,
    SHOAL_MOVE_FINAL = 2,
    SHOAL_MOVE_COMMITTED = 3,
    SHOAL_MOVE_STARTED = 4,
    SHOAL_MOVE_ABORTED = 5,
    SHOAL_MOVE_RECEIVING = 6,
    SHOAL_MOVE_RECEIVED = 7,
    SHOAL_MOVE_ADOPTED = 8,
} shoal_move_state_t;

#define SHOAL_MOVE_STATE_LAST SHOAL_MOVE_ADOPTED

typedef enum {
    SHOAL_MOVE_ROLE_NONE = 0,
    SHOAL_MOVE_SOURCE = 1,
    SHOAL_MOVE_TARGET = 2,
} shoal_move_role_t;

//  "pending", "final", ...; NULL for a value outside the enumeration.
const char *shoal_move_state_name(shoal_move_state_t state);

//  A move, as a record and as a body. Strings may be NULL (read as empty).
typedef struct {
    char *move_id;
    char *claim_id;             //  a valid claim id (every body names one)
    char *from;                 //  source node
    char *to;                   //  target node
    shoal_move_state_t state;
    shoal_move_role_t role;
    uint64_t epoch;             //  the claim's epoch on the source
    char *tenant;
    uint64_t memory_bytes;
    char *driver;
    uint64_t memory_pages;
    uint64_t disk_blocks;
    uint32_t max_downtime_ms;
    char *stream;               //  the target's transfer endpoint
    uint64_t started_ms;
    uint64_t updated_ms;
    char *phase;
    uint32_t round;
    uint64_t bytes_sent;
    uint64_t rate;
    uint64_t dirty_rate;
    uint64_t estimate_ms;
    uint64_t total_ms;
    uint64_t node_downtime_ms;
    uint64_t guest_downtime_ms;
    uint64_t guest_switch_gap_ms;   //  its last tick on the source to its first on the target
    char *error;
    bool done;
    bool no_converge;           //  abort a move that does not converge rather than throttle the guest
    uint32_t throttle_steps;    //  auto-converge: throttle steps taken
    uint32_t throttle_percent;  //  the guest's writes held back at the end, in percent
    uint64_t throttled_ms;      //  how long the guest ran throttled
    bool paused;                //  the claim was paused: it moves paused and stays paused (moved or aborted)
    //  Where the node downtime went (shoal.proto's Move tells each step).
    uint64_t pause_us;          //  the guest's pause
    uint64_t final_wait_us;     //  paused to the final round's start
    uint64_t final_bytes;       //  the final round's bytes
    uint64_t final_us;          //  the final round, acknowledged
    uint64_t target_sync_us;    //  of which the target's sync
    uint64_t commit_asked_us;   //  paused to the commit request
    uint64_t commit_us;         //  the source's synced commit
    uint64_t start_us;          //  the target: commit answered to guest started
} shoal_move_t;

typedef struct {
    shoal_move_t *moves;        //  COUNT moves
    size_t count;
} shoal_msg_moves_t;

//  Most scopes one counters reply holds.
#define SHOAL_COUNTER_SCOPES_MAX 10000

typedef struct {
    char *tenant;               //  org/project, or empty: the node's and every tenant's
} shoal_msg_counters_request_t;

//  One scope's admission counters.
typedef struct {
    char *tenant;                       //  org/project; empty: the whole node
    shoal_counter_record_t used;        //  what its claims use (the stored counters)
    shoal_counter_record_t reserved;    //  what incoming moves hold
} shoal_msg_counter_scope_t;

typedef struct {
    shoal_msg_counter_scope_t *scopes;  //  COUNT scopes, at most SHOAL_COUNTER_SCOPES_MAX
    size_t count;
    bool more;                  //  more tenants than one reply holds
} shoal_msg_counters_t;

//  The codecs of the bodies, each named as error messages name the body
//  ("kv_put body: key is empty"). Both directions check the limits above.
//  oplog_heads needs a dataset; oplog_stats reads an empty one as "all",
//  hence two codecs for shoal_msg_dataset_t.
extern const shoal_codec_t shoal_msg_status_reply_codec;
extern const shoal_codec_t shoal_msg_damage_codec;
extern const shoal_codec_t shoal_msg_damage_ref_codec;
extern const shoal_codec_t shoal_msg_kv_put_codec;
extern const shoal_codec_t shoal_msg_kv_key_codec;
extern const shoal_codec_t shoal_msg_kv_item_codec;
extern const shoal_codec_t shoal_msg_kv_scan_codec;
extern const shoal_codec_t shoal_msg_kv_items_codec;
extern const shoal_codec_t shoal_msg_dataset_codec;
extern const shoal_codec_t shoal_msg_dataset_or_all_codec;
extern const shoal_codec_t shoal_msg_heads_codec;
extern const shoal_codec_t shoal_msg_oplog_stats_codec;
extern const shoal_codec_t shoal_msg_prune_codec;
extern const shoal_codec_t shoal_msg_prune_reply_codec;
extern const shoal_codec_t shoal_msg_member_codec;
extern const shoal_codec_t shoal_msg_members_codec;
extern const shoal_codec_t shoal_msg_ping_codec;
extern const shoal_codec_t shoal_msg_entries_codec;
extern const shoal_codec_t shoal_msg_pull_codec;
extern const shoal_codec_t shoal_msg_bulk_codec;
extern const shoal_codec_t shoal_msg_chain_codec;
extern const shoal_codec_t shoal_msg_snapshot_request_codec;
extern const shoal_codec_t shoal_msg_snapshot_codec;
extern const shoal_codec_t shoal_msg_peers_codec;
extern const shoal_codec_t shoal_msg_node_ref_codec;
extern const shoal_codec_t shoal_msg_registry_record_codec;
extern const shoal_codec_t shoal_msg_claim_create_codec;
extern const shoal_codec_t shoal_msg_claim_checkpoint_codec;
extern const shoal_codec_t shoal_msg_claim_ref_codec;
extern const shoal_codec_t shoal_msg_claim_info_codec;
extern const shoal_codec_t shoal_msg_claim_list_codec;
extern const shoal_codec_t shoal_msg_claim_call_codec;
extern const shoal_codec_t shoal_msg_claim_call_reply_codec;
extern const shoal_codec_t shoal_msg_claim_txn_codec;
extern const shoal_codec_t shoal_msg_claim_txn_reply_codec;
extern const shoal_codec_t shoal_msg_key_value_codec;
extern const shoal_codec_t shoal_msg_claim_keys_codec;
extern const shoal_codec_t shoal_msg_lease_request_codec;
extern const shoal_codec_t shoal_msg_lease_codec;
extern const shoal_codec_t shoal_msg_leases_codec;
extern const shoal_codec_t shoal_msg_lock_request_codec;
extern const shoal_codec_t shoal_msg_lock_record_codec;
extern const shoal_codec_t shoal_msg_locks_codec;
extern const shoal_codec_t shoal_msg_move_codec;
extern const shoal_codec_t shoal_msg_moves_codec;
extern const shoal_codec_t shoal_msg_counters_request_codec;
extern const shoal_codec_t shoal_msg_counters_codec;

//  Hot drain (drain, undrain, drain_status -> drain; capacity).
//  Most claims one drain lists.
#define SHOAL_DRAIN_CLAIMS_MAX 100000

typedef struct {
    char *node_id;              //  the node asked ("" or NULL: the one answering)
    uint32_t max_downtime_ms;   //  each move's budget (0: the node's)
    uint32_t parallel;          //  moves at once (0: 1)
} shoal_msg_drain_request_t;

typedef struct {
    char *claim_id;
    char *state;                //  pending, moving, moved, stayed
    char *to;                   //  the target, or the last one tried
    uint32_t attempts;          //  moves that aborted
    char *reason;               //  stayed: why; else the last abort's reason
    uint64_t memory_bytes;
    uint64_t bytes_sent;        //  moving: progress
    char *phase;                //  moving: the move's phase
    uint64_t total_ms;          //  moved
    uint64_t node_downtime_ms;  //  moved
} shoal_msg_drain_claim_t;

typedef struct {
    char *node_id;
    bool draining;              //  admits no new claim, no incoming move
    char *phase;                //  none, running, done, stopped
    uint32_t max_downtime_ms;
    uint32_t parallel;
    uint64_t started_ms;
    uint64_t updated_ms;
    uint64_t total_ms;
    shoal_msg_drain_claim_t *claims;    //  COUNT claims
    size_t count;
    char *note;
} shoal_msg_drain_t;

typedef struct {
    char *node_id;
    bool draining;
    uint64_t max_claims;        //  0: no limit
    uint64_t max_running;
    uint64_t memory_limit_bytes;
    uint64_t claims;            //  with reservations
    uint64_t running;
    uint64_t memory_bytes;
    uint64_t move_concurrency;
    uint64_t moves_in_flight;
} shoal_msg_capacity_t;

extern const shoal_codec_t shoal_msg_drain_request_codec;
extern const shoal_codec_t shoal_msg_drain_codec;
extern const shoal_codec_t shoal_msg_capacity_codec;

//  The event stream (watch -> watch_reply, then events).
typedef struct {
    char *kinds;                //  claims,moves,members, comma-separated ("" or NULL: all)
    uint64_t after_seq;         //  replay what came after it (0: only new events)
} shoal_msg_watch_t;

typedef struct {
    char *node_id;              //  the answering node
    uint64_t last_seq;          //  its last event
    uint64_t first_kept_seq;    //  the oldest it can replay (0: none kept)
    uint64_t missed_from;       //  the watcher missed these, no longer kept ...
    uint64_t missed_to;         //  ... (0: none missed)
    uint64_t replayed;          //  events that follow the reply
} shoal_msg_watch_reply_t;

typedef struct {
    uint64_t seq;               //  the node's sequence number, never 0
    uint64_t previous_seq;      //  the last event this watcher was sent (0: none)
    char *kind;                 //  claim | move | member
    char *what;                 //  the new state, or the membership event
    char *node_id;              //  the node that made it
    uint64_t time_ms;           //  wall clock
    char *claim_id;             //  claim and move events
    char *tenant;               //  claim and move events
    char *peer;                 //  move: the other node; member: the member
    char *detail;               //  why, when there is a why
    uint32_t round;             //  move: rounds sent
    uint64_t bytes_sent;        //  move: bytes sent
    uint64_t epoch;             //  claim: its epoch
} shoal_msg_event_t;

extern const shoal_codec_t shoal_msg_watch_codec;
extern const shoal_codec_t shoal_msg_watch_reply_codec;
extern const shoal_codec_t shoal_msg_event_codec;

//  The consistency sweep (fsck): a request starts a run or reads one; the
//  report says what the run found and did. A reply holds at most
//  SHOAL_FSCK_FINDINGS_MAX findings (finding_count says how many there were).
#define SHOAL_FSCK_FINDINGS_MAX 1000

typedef enum {
    SHOAL_FSCK_START = 1,       //  begin a run, or join the one in progress
    SHOAL_FSCK_STATUS = 2,      //  the run in progress, or the last one
} shoal_fsck_op_t;

typedef struct {
    shoal_fsck_op_t op;
    bool repair;                //  start: mend what is safe once the look is over
} shoal_msg_fsck_request_t;

typedef struct {
    char *check;                //  the check that found it
    char *where;                //  a column family, or "files"
    char *key;                  //  the key as rendered, or a path
    char *problem;              //  what is wrong
    bool repairable;            //  --repair mends it
    char *repaired;             //  what --repair did ("" when nothing)
} shoal_msg_fsck_finding_t;

typedef struct {
    uint64_t run;               //  the run's number (0: none ever ran)
    bool done;                  //  over, repair included
    bool repair;                //  the run repairs
    char *trigger;              //  operator | periodic
    char *check;                //  the check at work
    uint64_t keys;              //  keys and files looked at
    uint64_t started_ms;        //  wall clock
    uint64_t finished_ms;       //  wall clock, 0 while running
    shoal_msg_fsck_finding_t *findings;     //  COUNT, at most SHOAL_FSCK_FINDINGS_MAX
    size_t count;
    uint64_t finding_count;     //  every finding of the run
    uint64_t remaining;         //  findings no repair mended
    char *error;                //  a check or repair that failed ("" when none)
    char *node_id;              //  the node that ran it
} shoal_msg_fsck_report_t;

extern const shoal_codec_t shoal_msg_fsck_request_codec;
extern const shoal_codec_t shoal_msg_fsck_report_codec;

//  Storage objects (object, object_write, object_read, object_receive,
//  object_ids): seed 001's objects and instances. Object names are
//  tenant-scoped; a chunk carries at most SHOAL_OBJECT_CHUNK_MAX bytes.
#define SHOAL_OBJECT_NAME_MAX 512
#define SHOAL_OBJECT_COMMENT_MAX 1024
#define SHOAL_OBJECT_URI_MAX 512
#define SHOAL_OBJECT_CHUNK_MAX (512 * 1024)
//  The longest checksum: it carries its algorithm (shoal_checksum.h).
#define SHOAL_OBJECT_CHECKSUM_SIZE SHOAL_CHECKSUM_MAX
#define SHOAL_OBJECT_IDS_MAX 10000
#define SHOAL_OBJECT_INSTANCES_MAX 256
#define SHOAL_OBJECT_LIST_MAX 10000

typedef enum {
    SHOAL_OBJECT_ADD = 1,
    SHOAL_OBJECT_COMMIT = 2,
    SHOAL_OBJECT_ABORT = 3,
    SHOAL_OBJECT_GET = 4,
    SHOAL_OBJECT_LIST = 5,
    SHOAL_OBJECT_REMOVE = 6,
    SHOAL_OBJECT_OPEN = 7,
    SHOAL_OBJECT_CLOSE = 8,
    SHOAL_OBJECT_REPLICATE = 9,
    SHOAL_OBJECT_DROP = 10,
    SHOAL_OBJECT_CHECK = 11,
} shoal_object_op_t;

typedef enum {
    SHOAL_INSTANCE_WRITING = 1,
    SHOAL_INSTANCE_COMPLETE = 2,
    SHOAL_INSTANCE_CORRUPT = 3,
} shoal_instance_state_t;

//  The kinds of ids (object_ids): storage ids and instance ids, each its
//  own namespace.
typedef enum {
    SHOAL_OBJECT_ID_STORAGE = 1,
    SHOAL_OBJECT_ID_INSTANCE = 2,
} shoal_object_id_kind_t;

//  "add", "commit", ...; "writing", "complete", "corrupt". NULL outside.
const char *shoal_object_op_name(shoal_object_op_t op);
const char *shoal_instance_state_name(shoal_instance_state_t state);

typedef struct {
    shoal_object_op_t op;
    char *tenant;               //  "org/project" or "" (a tenant's own)
    char *name;                 //  at most SHOAL_OBJECT_NAME_MAX bytes
    uint64_t storage_id;
    uint64_t instance_id;
    char *holder;               //  at most SHOAL_LOCK_HOLDER_MAX bytes
    uint64_t size;
    uint8_t *checksum;          //  CHECKSUM_SIZE bytes: none, or a checksum (shoal_checksum.h)
    size_t checksum_size;
    shoal_checksum_algorithm_t algorithm;   //  add: the commit's checksum's (NONE: BLAKE2b, as older clients)
    uint32_t copies;
    bool update;
    char *comment;
    char *start_after;
    uint32_t limit;
    bool verify;
    bool repair;
    char *to;                   //  replicate: a node among the copies ("": any); at most SHOAL_NAME_MAX bytes
} shoal_msg_object_request_t;

typedef struct {
    uint64_t instance_id;       //  never 0
    uint64_t storage_id;        //  never 0
    char *node;
    char *uri;
    uint8_t *checksum;          //  none, or a checksum (shoal_checksum.h)
    size_t checksum_size;
    uint64_t size;
    shoal_instance_state_t state;
    uint64_t modified_ms;
    uint64_t readers;
    char *writer;
    char *waiter;
    char *endpoint;             //  in replies: where its node serves
} shoal_msg_object_instance_t;

typedef struct {
    char *tenant;
    char *name;
    uint64_t storage_id;        //  never 0
    uint64_t size;
    uint8_t *checksum;          //  none, or a checksum (shoal_checksum.h)
    size_t checksum_size;
    uint64_t created_ms;
    char *comment;
    shoal_msg_object_instance_t *instances;     //  COUNT, at most SHOAL_OBJECT_INSTANCES_MAX
    size_t count;
    uint64_t memory_bytes;      //  a guest's image: its memory (0: plain bytes)
    uint64_t disk_bytes;        //  and its disk
} shoal_msg_object_info_t;

typedef struct {
    shoal_msg_object_info_t *objects;   //  COUNT, at most SHOAL_OBJECT_LIST_MAX
    size_t count;
    uint64_t instance_id;
    char *holder;
    char *node;
    char *endpoint;
    bool granted;
    bool more;
    uint64_t storage_id;
    uint32_t copies;
    struct _shoal_msg_object_finding_t *findings;   //  FINDINGS_COUNT, at most SHOAL_OBJECT_LIST_MAX
    size_t findings_count;
} shoal_msg_object_reply_t;

typedef struct _shoal_msg_object_finding_t {
    char *key;
    char *what;
    bool repaired;
} shoal_msg_object_finding_t;

typedef struct {
    uint64_t instance_id;
    char *holder;
    uint64_t offset;
    uint32_t length;            //  read: at most SHOAL_OBJECT_CHUNK_MAX
    uint8_t *data;              //  DATA_SIZE bytes, at most SHOAL_OBJECT_CHUNK_MAX
    size_t data_size;
    bool last;
} shoal_msg_object_chunk_t;

typedef struct {
    shoal_object_id_kind_t kind;
    uint32_t count;             //  asked for, at most SHOAL_OBJECT_IDS_MAX
    uint64_t *ids;              //  IDS_COUNT allocated ids
    size_t ids_count;
} shoal_msg_object_ids_t;

//  A local instance's lock and its records, as its node keeps them.
typedef struct {
    uint64_t instance_id;
    uint64_t storage_id;
    uint64_t readers;
    char *writer;
    char *waiter;
} shoal_msg_object_lock_t;

typedef struct {
    uint64_t instance_id;
    char *holder;
    char *mode;                 //  "read", "write" or "wait"
    uint64_t time_ms;
} shoal_msg_object_lock_record_t;

extern const shoal_codec_t shoal_msg_object_request_codec;
extern const shoal_codec_t shoal_msg_object_instance_codec;
extern const shoal_codec_t shoal_msg_object_info_codec;
extern const shoal_codec_t shoal_msg_object_reply_codec;
extern const shoal_codec_t shoal_msg_object_chunk_codec;
extern const shoal_codec_t shoal_msg_object_ids_codec;
extern const shoal_codec_t shoal_msg_object_lock_codec;
extern const shoal_codec_t shoal_msg_object_lock_record_codec;

#endif
