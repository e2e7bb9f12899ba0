/*  libshoal: the C client of shoal.

    A client holds one CurveZMQ connection to one node. It presents its own
    certificate (made by `shoalctl keygen client`) and checks the node against
    the cluster's public key (`shoalctl keygen cluster`). Each call sends one
    request and waits for its reply.

    Every call returns the reply's status code (200, 400, 404, 429, ... with
    HTTP's meaning) when the node answered, or one of the negative
    SHOAL_E_* codes when it did not; shoal_client_error then says what
    happened, naming the endpoint or the refusal.

    Link with `pkg-config --cflags --libs libshoal`.
*/
#ifndef SHOAL_H_INCLUDED
#define SHOAL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHOAL_EXPORT __attribute__((visibility("default")))

//  Failures where no reply was had.
typedef enum {
    SHOAL_E_UNREACHABLE = -1,   //  no connection to the endpoint could be made
    SHOAL_E_REFUSED = -2,       //  the node refused our key at the handshake
    SHOAL_E_TIMEOUT = -3,       //  connected, but no reply within the timeout
    SHOAL_E_BAD_REPLY = -4,     //  a reply came that could not be decoded
    SHOAL_E_INVALID = -5,       //  bad arguments or unreadable key files
} shoal_error_t;

#define SHOAL_DEFAULT_TIMEOUT_MS 5000

typedef struct _shoal_client_t shoal_client_t;

//  Connects to ENDPOINT (tcp://host:port) with the client certificate at
//  CLIENT_CERT (its secret file is CLIENT_CERT_secret, or CLIENT_CERT itself)
//  and the cluster public certificate at CLUSTER_CERT. The connection is made
//  in the background; the first call reports whether it worked. Returns NULL
//  when a certificate cannot be read, with *ERROR_P (caller frees) saying why.
SHOAL_EXPORT shoal_client_t *
    shoal_client_new(const char *endpoint, const char *client_cert, const char *cluster_cert,
                     char **error_p);

SHOAL_EXPORT void
    shoal_client_destroy(shoal_client_t **self_p);

//  How long a call waits for its reply (default SHOAL_DEFAULT_TIMEOUT_MS).
SHOAL_EXPORT void
    shoal_client_set_timeout(shoal_client_t *self, int timeout_ms);

//  The message of the last call: the node's text with its status, or what
//  went wrong when there was no reply. Borrowed until the next call.
SHOAL_EXPORT const char *
    shoal_client_error(shoal_client_t *self);

//  Seconds the node asked us to wait before retrying (with 429 and 503).
SHOAL_EXPORT uint32_t
    shoal_client_retry_after_ms(shoal_client_t *self);

//  An account of damage to a node's store: what it lost or cannot read.
typedef struct {
    char *id;                   //  for shoal_client_damage_forget
    char *kind;                 //  "log" (lost from the write-ahead log) or "move" (an unreadable move record)
    char *what;                 //  the damaged record: file and byte offset, or key
    char *keys;                 //  the keys it held, as far as they read
    char *claim_id;             //  the claim it concerns ("" when none)
    uint64_t found_ms;          //  wall time it was found
    char *action;               //  what the node does about it, or waits for
} shoal_damage_info_t;

//  A node's status. Strings are owned by the struct; shoal_status_clear frees them.
typedef struct {
    char *node_id;
    char *version;
    uint64_t uptime_ms;
    char *endpoint;
    char *data_dir;
    uint64_t claims;
    uint64_t peers;
    uint64_t clients;
    char *role;                 //  our role as the node sees it
    char *tenant;               //  our tenant, for role tenant
    shoal_damage_info_t *damage;    //  DAMAGE_COUNT accounts of damage to its store (admins)
    size_t damage_count;
    uint64_t space_free_bytes;  //  its store's free space (admins)
    uint64_t space_reserve_bytes;   //  writes answer 507 while less is free
    bool oplog_migrating;       //  its store is being migrated from oplog layout 1 (it answers meanwhile)
    uint64_t oplog_migrated;    //  entries that migration moved since the node started
} shoal_status_t;

SHOAL_EXPORT int
    shoal_client_status(shoal_client_t *self, shoal_status_t *status);

SHOAL_EXPORT void
    shoal_status_clear(shoal_status_t *status);

//  Forgets the damage account ID (admin): the operator dealt with it. For an
//  unreadable move record this deletes the record.
SHOAL_EXPORT int
    shoal_client_damage_forget(shoal_client_t *self, const char *id);

//  Replicated datasets: keys and values that every node of the mesh
//  converges on; the last writer wins. A tenant reaches only datasets named
//  "ORG/PROJECT/..." after its own tenant; others answer 404.

//  One key's value and the entry that wrote it.
typedef struct {
    char *dataset;
    char *key;
    uint8_t *value;             //  NUL-terminated for convenience; SIZE excludes it
    size_t size;
    bool deleted;               //  the entry was a delete (put/del results only)
    uint64_t wall_ms;           //  the entry's hybrid logical clock
    uint32_t logic;
    char *node;                 //  the node that wrote it
    char hash[65];              //  the entry's hash, hex
} shoal_kv_value_t;

//  One page of a scan.
typedef struct {
    shoal_kv_value_t *items;
    size_t count;
    bool more;                  //  more keys follow: scan again after the last key
} shoal_kv_page_t;

//  Writes KEY = VALUE (SIZE bytes). WRITTEN (may be NULL) receives the entry.
SHOAL_EXPORT int
    shoal_client_kv_put(shoal_client_t *self, const char *dataset, const char *key,
                        const void *value, size_t size, shoal_kv_value_t *written);

//  Reads KEY; 404 when it is absent or deleted.
SHOAL_EXPORT int
    shoal_client_kv_get(shoal_client_t *self, const char *dataset, const char *key,
                        shoal_kv_value_t *value);

//  Deletes KEY (a tombstone that replicates like a put).
SHOAL_EXPORT int
    shoal_client_kv_del(shoal_client_t *self, const char *dataset, const char *key,
                        shoal_kv_value_t *written);

//  Up to LIMIT (0: the node's default) live keys starting with PREFIX ("" or
//  NULL: all), after START_AFTER (NULL: from the first), in key order.
SHOAL_EXPORT int
    shoal_client_kv_scan(shoal_client_t *self, const char *dataset, const char *prefix,
                         const char *start_after, uint32_t limit, shoal_kv_page_t *page);

SHOAL_EXPORT void
    shoal_kv_value_clear(shoal_kv_value_t *value);

SHOAL_EXPORT void
    shoal_kv_page_clear(shoal_kv_page_t *page);

//  The operation log: each node's last entry per dataset, counts, pruning.
typedef struct {
    char *dataset;
    char *node;
    uint64_t wall_ms;
    uint32_t logic;
    char hash[65];
} shoal_head_info_t;

typedef struct {
    shoal_head_info_t *heads;
    size_t count;
} shoal_head_list_t;

typedef struct {
    char *dataset;
    uint64_t entries;           //  entries in the log
    uint64_t keys;              //  live keys
    uint64_t nodes;             //  nodes that wrote to it
    uint64_t watermark_ms;      //  pruned up to here; 0: never
} shoal_dataset_info_t;

typedef struct {
    shoal_dataset_info_t *datasets;
    size_t count;
} shoal_dataset_list_t;

//  Heads of DATASET (NULL or "": of every dataset the caller may read).
SHOAL_EXPORT int
    shoal_client_oplog_heads(shoal_client_t *self, const char *dataset, shoal_head_list_t *heads);

SHOAL_EXPORT int
    shoal_client_oplog_stats(shoal_client_t *self, const char *dataset, shoal_dataset_list_t *stats);

//  Removes entries stamped at or before BEFORE_MS (wall clock, ms since the
//  epoch) from DATASET (NULL or "": every dataset). Admins only.
SHOAL_EXPORT int
    shoal_client_oplog_prune(shoal_client_t *self, const char *dataset, uint64_t before_ms,
                             uint64_t *pruned);

SHOAL_EXPORT void
    shoal_head_list_clear(shoal_head_list_t *heads);

SHOAL_EXPORT void
    shoal_dataset_list_clear(shoal_dataset_list_t *stats);

//  The mesh as one node sees it.
typedef struct {
    char *node_id;
    char *endpoint;
    char *state;                //  "alive", "suspect", "dead" or "left"; "sweeping": alive, held
                                //  back until the locks of its earlier runs were rolled back here
    uint64_t incarnation;       //  raised by the node itself to refute suspicion
    uint64_t last_heard_ms;     //  ms since the node last heard from it (0: never)
    uint64_t lag;               //  oplog entries this node holds that the peer lacks, as last measured
    bool self;                  //  the answering node itself
} shoal_peer_info_t;

typedef struct {
    shoal_peer_info_t *peers;
    size_t count;
} shoal_peer_list_t;

//  Every member the node knows, itself included, by node id.
SHOAL_EXPORT int
    shoal_client_peers(shoal_client_t *self, shoal_peer_list_t *peers);

//  Retires NODE_ID for good: it is no longer tracked, so prune stops waiting
//  for its confirmation; if it ever comes back it joins as a new member.
//  Admins only.
SHOAL_EXPORT int
    shoal_client_peers_forget(shoal_client_t *self, const char *node_id);

SHOAL_EXPORT void
    shoal_peer_list_clear(shoal_peer_list_t *peers);

//  Claims: a tenant's guest on one node, its owner. Calls about one claim
//  go to the node the client is connected to; when that node answers 404
//  the client looks the claim up in the registry and asks its owner again,
//  connecting to it with the same keys, so a claim is reached from any node.
//  A tenant sees only its own claims; another tenant's answer 404.
typedef struct {
    char *id;
    char *tenant;               //  org/project
    char *state;                //  creating, running, paused, moving, stopped, error, released
    uint64_t memory_bytes;
    char *driver;               //  proc or exec
    uint64_t epoch;             //  raised by every move
    uint64_t created_ms;        //  wall clock, ms since the epoch
    char *error;                //  why, in state error ("" otherwise)
    char *owner;                //  the node that answered
} shoal_claim_info_t;

typedef struct {
    shoal_claim_info_t *claims;
    size_t count;
} shoal_claim_list_t;

//  What a claim is created with.
typedef struct {
    const char *tenant;         //  org/project (a tenant key: its own)
    uint64_t memory_bytes;      //  more than 0
    const char *driver;         //  NULL or "": proc
    const char *id;             //  NULL or "": the node makes one
    uint64_t disk_bytes;        //  the guest's disk (may be 0)
    uint64_t rate;              //  the guest's load, bytes/s (0: idle)
    //  NULL or "": a new guest. Else the name of an object of the tenant
    //  that holds a guest's image (shoal_client_claim_checkpoint): the
    //  guest starts from it, copied to the node first if it holds none;
    //  memory (0, or the image's), disk and rate (0) are the image's.
    const char *from_object;
} shoal_claim_spec_t;

//  Who owns a claim, from the registry.
typedef struct {
    char *claim_id;
    char *owner;                //  the owning node's id
    char *endpoint;             //  where it serves
    uint64_t epoch;
    char *tenant;
} shoal_lookup_t;

//  Creates a claim on the connected node: 429 or 507 name the limit that
//  refused it. INFO (may be NULL) receives the claim.
SHOAL_EXPORT int
    shoal_client_claim_create(shoal_client_t *self, const shoal_claim_spec_t *spec, shoal_claim_info_t *info);

//  The caller's claims on the connected node (released ones are not listed).
SHOAL_EXPORT int
    shoal_client_claim_list(shoal_client_t *self, shoal_claim_list_t *list);

//  One claim, and the state changes: 409 when the claim's state does not
//  allow it (the message names the state). INFO (may be NULL) receives the
//  claim as it is afterwards.
SHOAL_EXPORT int
    shoal_client_claim_show(shoal_client_t *self, const char *id, shoal_claim_info_t *info);
SHOAL_EXPORT int
    shoal_client_claim_stop(shoal_client_t *self, const char *id, shoal_claim_info_t *info);
SHOAL_EXPORT int
    shoal_client_claim_start(shoal_client_t *self, const char *id, shoal_claim_info_t *info);
SHOAL_EXPORT int
    shoal_client_claim_pause(shoal_client_t *self, const char *id, shoal_claim_info_t *info);
SHOAL_EXPORT int
    shoal_client_claim_resume(shoal_client_t *self, const char *id, shoal_claim_info_t *info);
SHOAL_EXPORT int
    shoal_client_claim_release(shoal_client_t *self, const char *id, shoal_claim_info_t *info);

//  Guest calls: the guest's key/value area. A paused or moving guest
//  answers 503 (see shoal_client_retry_after_ms); get answers 404 for a key
//  the guest does not hold. VALUE (may be NULL) receives the value,
//  NUL-terminated, SIZE (may be NULL) its length; the caller frees it.
SHOAL_EXPORT int
    shoal_client_claim_put(shoal_client_t *self, const char *id, const char *key, const void *value,
                           size_t size);
SHOAL_EXPORT int
    shoal_client_claim_get(shoal_client_t *self, const char *id, const char *key, uint8_t **value,
                           size_t *size);

//  Who owns claim ID, as the connected node's registry says.
SHOAL_EXPORT int
    shoal_client_lookup(shoal_client_t *self, const char *id, shoal_lookup_t *lookup);

SHOAL_EXPORT void
    shoal_claim_info_clear(shoal_claim_info_t *info);
SHOAL_EXPORT void
    shoal_claim_list_clear(shoal_claim_list_t *list);
SHOAL_EXPORT void
    shoal_lookup_clear(shoal_lookup_t *lookup);

//  Each claim's own keys (seed 000's metadata, handle and lock keys of a
//  resource), served by the claim's owner: a 404 from another node is
//  followed by a lookup and the same call at the owner, a moving claim's
//  keys answer 503 while they travel (see shoal_client_retry_after_ms).
//  A tenant reaches only its own claims' keys.
//
//  Every change takes the claim's next revision; revisions count per claim
//  and only grow, across moves too. A key carries the revision that created
//  it, the one that last wrote it, how often it was written since it was
//  created (its version) and the lease it is attached to (0: none).
typedef struct {
    char *key;
    uint8_t *value;             //  NUL-terminated beyond value_size, for printing
    size_t value_size;
    uint64_t version;
    uint64_t create_revision;
    uint64_t mod_revision;
    uint64_t lease;
} shoal_key_value_t;

//  What a compare looks at, and how: the key's field against the compare's
//  value (SHOAL_CMP_VALUE) or number (the others). An absent key reads as
//  version, revisions and lease 0 and an empty value.
#define SHOAL_CMP_VALUE 1
#define SHOAL_CMP_VERSION 2
#define SHOAL_CMP_CREATE 3
#define SHOAL_CMP_MOD 4
#define SHOAL_CMP_LEASE 5
#define SHOAL_CMP_EQUAL 1
#define SHOAL_CMP_NOT_EQUAL 2
#define SHOAL_CMP_GREATER 3
#define SHOAL_CMP_LESS 4

typedef struct {
    const char *key;
    int target;                 //  SHOAL_CMP_VALUE .. SHOAL_CMP_LEASE
    int result;                 //  SHOAL_CMP_EQUAL .. SHOAL_CMP_LESS
    const void *value;          //  with SHOAL_CMP_VALUE
    size_t value_size;
    uint64_t number;            //  with the other targets
} shoal_compare_t;

#define SHOAL_OP_PUT 1
#define SHOAL_OP_DELETE 2
#define SHOAL_OP_GET 3

//  One operation: a put of KEY (with VALUE, attached to LEASE when not 0),
//  a delete or a get of KEY, or with PREFIX of every key starting with KEY.
typedef struct {
    int type;                   //  SHOAL_OP_PUT, SHOAL_OP_DELETE, SHOAL_OP_GET
    const char *key;
    const void *value;
    size_t value_size;
    uint64_t lease;
    bool prefix;
} shoal_op_t;

typedef struct {
    int type;                   //  the operation's
    shoal_key_value_t *kvs;     //  get: COUNT keys, in key order
    size_t count;
    uint64_t deleted;           //  delete: keys removed
} shoal_op_result_t;

typedef struct {
    bool succeeded;             //  every compare held: the success branch ran
    uint64_t revision;          //  the claim's revision after it
    shoal_op_result_t *results; //  COUNT: one per operation of the branch that ran
    size_t count;
    char *owner;                //  the node that answered
} shoal_txn_result_t;

//  A transaction on claim ID's keys: when all COMPARES hold the SUCCESS
//  operations run, else the FAILURE ones, in order (each sees those before
//  it), written in one synced batch before the answer. RESULT (may be NULL)
//  says which branch ran and carries the gets.
SHOAL_EXPORT int
    shoal_client_claim_txn(shoal_client_t *self, const char *id, const shoal_compare_t *compares,
                           size_t compare_count, const shoal_op_t *success, size_t success_count,
                           const shoal_op_t *failure, size_t failure_count, shoal_txn_result_t *result);
SHOAL_EXPORT void
    shoal_txn_result_clear(shoal_txn_result_t *result);

//  One-operation transactions. A put (LEASE 0: none) says the revision it
//  took (REVISION may be NULL); get answers 404 when the claim has no key
//  KEY (KV is then empty); a delete says how many keys it removed (PREFIX:
//  every key starting with KEY); a list gives every key starting with
//  PREFIX ("": all), in key order (free them with shoal_key_values_clear).
SHOAL_EXPORT int
    shoal_client_key_put(shoal_client_t *self, const char *id, const char *key, const void *value,
                         size_t size, uint64_t lease, uint64_t *revision);
SHOAL_EXPORT int
    shoal_client_key_get(shoal_client_t *self, const char *id, const char *key, shoal_key_value_t *kv);
SHOAL_EXPORT int
    shoal_client_key_delete(shoal_client_t *self, const char *id, const char *key, bool prefix,
                            uint64_t *deleted);
SHOAL_EXPORT int
    shoal_client_key_list(shoal_client_t *self, const char *id, const char *prefix, shoal_key_value_t **kvs,
                          size_t *count);
SHOAL_EXPORT void
    shoal_key_value_clear(shoal_key_value_t *kv);
SHOAL_EXPORT void
    shoal_key_values_clear(shoal_key_value_t **kvs, size_t count);

//  Leases, held by the node that granted them, their home: keys and locks
//  attached to a lease (shoal_client_key_put, shoal_client_lock_acquire
//  with its id) go when it is revoked or its TTL passes without a
//  keepalive. A claim that moves takes a copy of its leases along; the copy
//  lives as long as the home keeps the lease alive. Keepalive, revoke and
//  ttl work from any node the client talks to: libshoal asks it first and
//  follows a 404 to the lease's home (which that node names), each call
//  anew. A grant is the connected node's.
typedef struct {
    uint64_t id;
    uint64_t ttl_ms;            //  as granted
    uint64_t remaining_ms;      //  what is left of it
    uint64_t expires_ms;        //  wall clock it ends at unless kept alive
    uint64_t granted_ms;
    uint64_t attached;          //  keys attached to it
    char *holder;               //  the client key that took it
    char *tenant;
    char *home;                 //  the node that granted it, which answers for it
} shoal_lease_t;

//  Takes a lease of TTL_MS (ID 0: the node picks its id). The node grants
//  at most an hour: *SHORTENED (may be NULL) says when it granted less than
//  asked. LEASE (may be NULL) receives it.
SHOAL_EXPORT int
    shoal_client_lease_grant(shoal_client_t *self, uint64_t ttl_ms, uint64_t id, shoal_lease_t *lease,
                             bool *shortened);
//  Starts lease ID's TTL again; 404 once it ended. Call it well within the
//  TTL (a third of it, as `shoalctl lease keepalive` does).
SHOAL_EXPORT int
    shoal_client_lease_keepalive(shoal_client_t *self, uint64_t id, shoal_lease_t *lease);
//  Ends lease ID now, with the keys attached to it.
SHOAL_EXPORT int
    shoal_client_lease_revoke(shoal_client_t *self, uint64_t id);
//  What is left of lease ID.
SHOAL_EXPORT int
    shoal_client_lease_ttl(shoal_client_t *self, uint64_t id, shoal_lease_t *lease);
//  The leases of the connected node the caller may see.
SHOAL_EXPORT int
    shoal_client_lease_list(shoal_client_t *self, shoal_lease_t **leases, size_t *count);
SHOAL_EXPORT void
    shoal_lease_clear(shoal_lease_t *lease);
SHOAL_EXPORT void
    shoal_leases_clear(shoal_lease_t **leases, size_t count);

//  Read/write locks on a claim, at its owner (404 -> lookup -> retry as
//  for keys). Many readers or one writer, each holder with a lock record.
//  A read is refused (409) while a writer holds the lock or waits for it:
//  the refusal says to resolve the claim again, not to spin on it, and
//  libshoal does so itself: it waits what the refusal says (doubling each
//  time, at most SHOAL_LOCK_READ_WAIT_MAX_MS), resolves the claim's owner
//  again (the claim may have moved) and asks again, at most
//  SHOAL_LOCK_READ_RESOLVES times (shoal_client_set_read_resolves), then
//  answers the last 409. A write
//  finding readers is refused, or with WAIT answered 200 not granted: it
//  waits, new readers are refused, and asking again is granted once the
//  last reader left. A lock with a LEASE (0: none) goes when the lease ends.
typedef struct {
    char *holder;
    char *holder_node;          //  the node the holder runs on
    char *mode;                 //  "read", "write" or "wait"
    uint64_t lease;
    uint64_t time_ms;           //  wall clock it was taken
} shoal_lock_record_t;

#define SHOAL_LOCK_READ_RESOLVES 8
#define SHOAL_LOCK_READ_WAIT_MAX_MS 2000

typedef struct {
    bool granted;               //  acquire: the caller holds the lock now
    unsigned resolved;          //  acquire read: refusals libshoal resolved the claim again after (also on 409)
    uint64_t readers;
    char *writer;               //  "" when none
    char *waiter;               //  "" when none
    shoal_lock_record_t *records;
    size_t count;
} shoal_lock_state_t;

//  How often a refused reader resolves the claim again and asks again
//  before its acquire answers 409 (SHOAL_LOCK_READ_RESOLVES unless set; 0:
//  the first refusal is the answer).
SHOAL_EXPORT void
    shoal_client_set_read_resolves(shoal_client_t *self, unsigned resolves);

//  MODE is "read" or "write"; HOLDER NULL or "" is the client key's name.
//  STATE (may be NULL) receives the lock after the request.
SHOAL_EXPORT int
    shoal_client_lock_acquire(shoal_client_t *self, const char *id, const char *holder, const char *mode, bool wait,
                              uint64_t lease, shoal_lock_state_t *state);
SHOAL_EXPORT int
    shoal_client_lock_release(shoal_client_t *self, const char *id, const char *holder, shoal_lock_state_t *state);
SHOAL_EXPORT int
    shoal_client_lock_list(shoal_client_t *self, const char *id, shoal_lock_state_t *state);
SHOAL_EXPORT void
    shoal_lock_state_clear(shoal_lock_state_t *state);

//  Live moves (role admin): a running (or paused: it stays paused) claim to
//  a named peer, asked of the node that owns it. shoal_client_move answers
//  once the target admitted the move (or refused it: its status and
//  message say why, and nothing paused); the move then runs on its own,
//  and shoal_client_move_status (asked of the same node) shows its
//  progress and, once DONE, its result.
typedef struct {
    char *move_id;
    char *claim_id;
    char *from;                 //  source node
    char *to;                   //  target node
    char *state;                //  pending, final, committed, started, aborted (source's record)
    char *phase;                //  admitting, round, final, committing, starting, done, aborted
    char *error;                //  why it aborted ("" otherwise)
    uint32_t round;             //  rounds sent (the baseline is round 1)
    uint32_t max_downtime_ms;   //  the final round's budget
    uint64_t memory_bytes;
    uint64_t bytes_sent;
    uint64_t rate;              //  bytes/s of the transfer
    uint64_t dirty_rate;        //  bytes/s the guest dirtied in the last round
    uint64_t estimate_ms;       //  of the final round
    uint64_t total_ms;          //  from the request to the guest running on the target
    uint64_t node_downtime_ms;  //  guest paused on the source to started on the target (aborted:
                                //  to running on the source again; 0 when it never paused)
    uint64_t guest_downtime_ms; //  the longest gap the guest's own tick clock saw over the whole move (a
                                //  stall while it still ran on the source included)
    uint64_t guest_switch_gap_ms;   //  the guest's own clock across the switch: its last tick on the
                                //  source to its first tick on the target (0: paused, or not known)
    bool done;
    //  Auto-converge: a guest dirtying faster than the rounds shrink is
    //  throttled step by step until the final round fits.
    uint32_t throttle_steps;    //  throttle steps taken (0: it converged on its own)
    uint32_t throttle_percent;  //  the guest's writes held back at the end, in percent
    uint64_t throttled_ms;      //  how long the guest ran throttled
    //  Where the node downtime of a completed move went, in microseconds.
    uint64_t pause_us;          //  the guest's pause (just before the downtime)
    uint64_t final_wait_us;     //  paused to the final round's start
    uint64_t final_bytes;       //  what the final round carried
    uint64_t final_us;          //  the final round: sent, synced on the target, acknowledged
    uint64_t target_sync_us;    //  of which the target's sync
    uint64_t commit_asked_us;   //  paused to the target's commit request at the source
    uint64_t commit_us;         //  the source's synced write of the commit
    uint64_t start_us;          //  the target: the commit answered to the guest started (ms resolution)
} shoal_move_info_t;

typedef struct {
    shoal_move_info_t *moves;
    size_t count;
} shoal_move_list_t;

//  Moves claim ID to node TO, with a final-round budget of MAX_DOWNTIME_MS
//  (0: the node's default). 404 unknown claim or peer, 409 a claim that is
//  not running or moving already, 429 move/concurrency, 503 a dead peer;
//  the target's own refusal (429, 507) comes back as it said it.
SHOAL_EXPORT int
    shoal_client_move(shoal_client_t *self, const char *id, const char *to, uint32_t max_downtime_ms,
                      shoal_move_info_t *info);
//  What a move may be asked beyond its target.
typedef struct {
    uint32_t max_downtime_ms;   //  the final round's budget (0: the node's default)
    bool no_converge;           //  abort, naming the dirty rate, rather than throttle a guest that
                                //  dirties faster than the rounds shrink
} shoal_move_options_t;

//  As shoal_client_move, with OPTIONS (NULL: the defaults).
SHOAL_EXPORT int
    shoal_client_move_with(shoal_client_t *self, const char *id, const char *to,
                           const shoal_move_options_t *options, shoal_move_info_t *info);
SHOAL_EXPORT int
    shoal_client_move_status(shoal_client_t *self, const char *id, shoal_move_info_t *info);
//  Resumes on the source the guest of a move whose target was lost after
//  the commit: the one way back, at the risk the reply names.
SHOAL_EXPORT int
    shoal_client_move_resume(shoal_client_t *self, const char *id, shoal_move_info_t *info);
//  The move records the node holds (both sides).
SHOAL_EXPORT int
    shoal_client_move_list(shoal_client_t *self, shoal_move_list_t *list);
SHOAL_EXPORT void
    shoal_move_info_clear(shoal_move_info_t *info);
SHOAL_EXPORT void
    shoal_move_list_clear(shoal_move_list_t *list);

//  Hot drain (role admin), asked of the node to drain: it is marked
//  draining (new claims and incoming moves answer 503 naming the drain) and
//  moves every running or paused claim off live to the peers with room for
//  it, PARALLEL at a time (a move that ends makes room for the next at
//  once), each within MAX_DOWNTIME_MS (0: the node's default). A claim that
//  cannot move stays as it was, with the reason. The mark and
//  the drain's record outlive a restart of the node.
typedef struct {
    char *claim_id;
    char *state;                //  pending, moving, moved, stayed
    char *to;                   //  the target (moving, moved), or the last one tried
    char *reason;               //  stayed: why; otherwise the last abort's reason, if any
    char *phase;                //  moving: the move's phase
    uint32_t attempts;          //  moves of it that aborted
    uint64_t memory_bytes;
    uint64_t bytes_sent;        //  moving: the move's progress
    uint64_t total_ms;          //  moved: the move's time
    uint64_t node_downtime_ms;  //  moved: its downtime as the nodes saw it
} shoal_drain_claim_t;

typedef struct {
    char *node_id;
    bool draining;              //  the mark: no new claim, no incoming move
    char *phase;                //  none, running, done, stopped
    char *note;                 //  e.g. that it resumed after a restart
    uint32_t max_downtime_ms;
    uint32_t parallel;
    uint64_t started_ms;        //  wall clock
    uint64_t total_ms;          //  so far, or in all once it ended
    shoal_drain_claim_t *claims;
    size_t count;
} shoal_drain_info_t;

//  Starts a drain of NODE_ID (the connected node; NULL or "": whichever it
//  is). 409 when one is under way.
SHOAL_EXPORT int
    shoal_client_drain(shoal_client_t *self, const char *node_id, uint32_t max_downtime_ms, uint32_t parallel,
                       shoal_drain_info_t *info);
//  The drain's progress, or its result.
SHOAL_EXPORT int
    shoal_client_drain_status(shoal_client_t *self, const char *node_id, shoal_drain_info_t *info);
//  Ends the mark: the node takes claims and moves again; a drain under way
//  starts no new move.
SHOAL_EXPORT int
    shoal_client_undrain(shoal_client_t *self, const char *node_id, shoal_drain_info_t *info);
SHOAL_EXPORT void
    shoal_drain_info_clear(shoal_drain_info_t *info);

//  Admission counters of the connected node: per scope (the node, or one
//  tenant), what its claims use and what incoming moves hold in
//  reservation; admission counts both against the limits.
typedef struct {
    char *tenant;               //  org/project; "" for the whole node
    uint64_t claims;            //  claims not released
    uint64_t running;           //  claims holding a guest
    uint64_t memory_bytes;      //  memory of the claims holding a guest
    uint64_t reserved_claims;   //  reservations of incoming moves
    uint64_t reserved_running;
    uint64_t reserved_memory_bytes;
} shoal_counter_scope_t;

typedef struct {
    shoal_counter_scope_t *scopes;  //  the node's first when asked for, then tenants by name
    size_t count;
    bool more;                  //  more tenants than one reply holds: ask for each by name
} shoal_counters_t;

//  The counters of TENANT, or (NULL or "") of the node and of every tenant
//  that counts something. A tenant key reads only its own tenant's (NULL:
//  its own); another's answers 403.
SHOAL_EXPORT int
    shoal_client_counters(shoal_client_t *self, const char *tenant, shoal_counters_t *counters);
SHOAL_EXPORT void
    shoal_counters_clear(shoal_counters_t *counters);

//  The consistency sweep (fsck) of the connected node (operators only): a
//  run looks at every store and module of the node a slice at a time and
//  reports each inconsistency (its key, what is wrong); one that repairs
//  then mends what is safe and says what it did.
typedef struct {
    char *check;                //  the check that found it: oplog, claims, moves, locks, values, ...
    char *where;                //  a column family, or "files"
    char *key;                  //  the key as the store renders it, or a path
    char *problem;              //  what is wrong
    bool repairable;            //  a repair mends it
    char *repaired;             //  what the repair did ("" when nothing)
} shoal_fsck_finding_t;

typedef struct {
    uint64_t run;               //  the run's number on the node (0: none ever ran)
    bool done;                  //  the run is over, its repair too
    bool repair;                //  the run repairs
    char *trigger;              //  operator | periodic
    char *check;                //  the check at work while it runs
    uint64_t keys;              //  keys and files looked at
    uint64_t started_ms;        //  wall clock
    uint64_t finished_ms;       //  wall clock, 0 while running
    shoal_fsck_finding_t *findings;     //  COUNT findings, in the order found
    size_t count;
    uint64_t finding_count;     //  all of the run's (more than COUNT when a reply could not hold them)
    uint64_t remaining;         //  findings no repair mended: for an operator
    char *error;                //  a check or repair that failed ("" when none)
    char *node_id;              //  the node that ran it
} shoal_fsck_report_t;

//  Starts a run (REPAIR: mend what is safe once the look is over), or joins
//  the one in progress when it repairs alike; 409 when another is. Answers
//  at once with the run as it stands.
SHOAL_EXPORT int
    shoal_client_fsck_start(shoal_client_t *self, bool repair, shoal_fsck_report_t *report);
//  The run in progress, or else the last one (run 0: none ever ran).
SHOAL_EXPORT int
    shoal_client_fsck_status(shoal_client_t *self, shoal_fsck_report_t *report);
//  Told of a run's progress while shoal_client_fsck waits for it.
typedef void (shoal_fsck_progress_fn) (const shoal_fsck_report_t *report, void *arg);
//  Starts a run and asks for its state every POLL_MS (0: 100) until it is
//  done, telling PROGRESS (may be NULL) each time; REPORT receives the
//  last. Returns 200, or the status that stopped it.
SHOAL_EXPORT int
    shoal_client_fsck(shoal_client_t *self, bool repair, int poll_ms, shoal_fsck_progress_fn *progress, void *arg,
                      shoal_fsck_report_t *report);
SHOAL_EXPORT void
    shoal_fsck_report_clear(shoal_fsck_report_t *report);

//  Key generation, as `shoalctl keygen` does it. Neither overwrites an
//  existing file. Each returns 0, or -1 with *ERROR_P (caller frees).
//
//  A new cluster keypair: CERT_PATH (public, for clients) and
//  CERT_PATH_secret (for member nodes only, mode 0600).
SHOAL_EXPORT int
    shoal_keygen_cluster(const char *cert_path, char **error_p);

//  A new client keypair: CERT_PATH (public, with name, role and tenant as
//  metadata: copy it into a node's clients directory) and CERT_PATH_secret
//  (the client's own, mode 0600). ROLE is "admin" or "tenant"; TENANT
//  ("org/project") is required for a tenant and refused otherwise.
SHOAL_EXPORT int
    shoal_keygen_client(const char *cert_path, const char *name, const char *role,
                        const char *tenant, char **error_p);

//  The event stream of the connected node: claims, moves and members as
//  they change, each numbered in the node's sequence.
typedef struct {
    uint64_t seq;               //  the node's sequence number
    uint64_t previous_seq;      //  the one before it in this watch (equal to the last seen: no gap)
    const char *kind;           //  claim | move | member
    const char *what;           //  claim: its state, or "left"; move: its record's state; member: the event
    const char *node_id;        //  the node that made it
    uint64_t time_ms;           //  wall clock
    const char *claim_id;       //  claim and move events ("" otherwise)
    const char *tenant;         //  claim and move events
    const char *peer;           //  move: the other node; member: the member
    const char *detail;         //  why, when there is a why
    uint32_t round;             //  move: rounds sent
    uint64_t bytes_sent;        //  move: bytes sent
    uint64_t epoch;             //  the claim's epoch
} shoal_event_t;

//  What the node said to a watch (at its start, and at each renewal).
typedef struct {
    const char *node_id;
    uint64_t last_seq;          //  the node's last event
    uint64_t first_kept_seq;    //  the oldest it could replay
    uint64_t missed_from;       //  events missed and no longer kept: from ...
    uint64_t missed_to;         //  ... to (0: none missed)
    uint64_t replayed;          //  events missed that follow, replayed
    const char *message;        //  the node's words: why events are missed, when they are
} shoal_watch_info_t;

//  Called with one EVENT, or with INFO when the node answered a watch, or
//  with both NULL when the node stayed silent for a renewal (it may be
//  restarting; the watch goes on). All borrowed. Nonzero ends the watch.
typedef int (shoal_watch_fn) (const shoal_event_t *event, const shoal_watch_info_t *info, void *arg);

//  Watches KINDS ("claims,moves,members", comma-separated; NULL or "":
//  all) after event AFTER_SEQ (0: from now on), calling FN until it
//  returns nonzero. A tenant's key sees its own claims and moves only. A
//  gap in the numbers, and a node that restarted, are answered by asking
//  again after the last event seen: the node replays what it kept and says
//  what it no longer keeps. Returns 0 when FN ended it; the status when the
//  node refused the watch (400, 403); or a negative shoal_error_t when the
//  first answer never came (refused key, unreachable, timeout).
SHOAL_EXPORT int
    shoal_client_watch(shoal_client_t *self, const char *kinds, uint64_t after_seq, shoal_watch_fn *fn,
                       void *arg);

//  Storage objects (seed 001): a tenant's named bytes, kept in instances
//  (one copy each, on one node) and cataloged across the mesh. TENANT is
//  "org/project": an admin names it, a tenant's key passes NULL or its own.
//  A checksum names its algorithm: "xxh3-128:" and hex for XXH3-128 (what
//  libshoal adds and nodes checkpoint), plain hex for BLAKE2b-256 (objects
//  added by older clients).
typedef struct {
    uint64_t instance_id;
    uint64_t storage_id;
    char *node;                 //  the node that holds it
    char *uri;                  //  file:objects/SID/IID under that node's data directory
    char *endpoint;             //  where that node serves ("" when unknown)
    char checksum[65];          //  "" while it is written (as shoal_object_t's)
    uint64_t size;
    char *state;                //  "writing", "complete" or "corrupt"
    uint64_t modified_ms;       //  wall clock of its last change
    uint64_t readers;           //  its lock, as its node holds it (filled by that node only)
    char *writer;
    char *waiter;
} shoal_object_instance_t;

typedef struct {
    char *tenant;
    char *name;
    uint64_t storage_id;
    uint64_t size;
    char checksum[65];          //  hex of BLAKE2b-256 (objects added before XXH3), or
                                //  "xxh3-128:" and hex of XXH3-128
    uint64_t created_ms;
    char *comment;
    shoal_object_instance_t *instances;
    size_t count;
    uint64_t memory_bytes;      //  a guest's image (a checkpoint): its memory; 0: plain bytes
    uint64_t disk_bytes;        //  and its disk
} shoal_object_t;

//  Fills BUFFER with the SIZE bytes at OFFSET of what an add sends.
//  Returns 0 or -1 (the add is then given up).
typedef int (shoal_object_source_fn) (void *buffer, size_t size, uint64_t offset, void *arg);

//  Adds object NAME of SIZE bytes, read from SOURCE, to the node: its
//  instance is written under a write lock and the name is bound once every
//  byte arrived and the checksum matched. With UPDATE, a bound name moves
//  to the new object in one step (readers of the old one read it whole
//  until they close); without, a bound name answers 409. OBJECT (may be
//  NULL) receives what was committed.
SHOAL_EXPORT int
    shoal_client_object_add(shoal_client_t *self, const char *tenant, const char *name, uint64_t size,
                            shoal_object_source_fn *source, void *arg, bool update, const char *comment,
                            shoal_object_t *object);
//  The same with the bytes of the file at PATH.
SHOAL_EXPORT int
    shoal_client_object_add_file(shoal_client_t *self, const char *tenant, const char *name, const char *path,
                                 bool update, const char *comment, shoal_object_t *object);
SHOAL_EXPORT int
    shoal_client_object_get(shoal_client_t *self, const char *tenant, const char *name, shoal_object_t *object);
//  Saves claim ID's guest, stopped or paused, as a new object NAME of the
//  claim's tenant (its memory and disk, checksummed): 409 when the claim
//  runs or NAME is bound. OBJECT (may be NULL) receives the object. Asked
//  of the claim's owner (found through the registry, as claim calls are).
SHOAL_EXPORT int
    shoal_client_claim_checkpoint(shoal_client_t *self, const char *id, const char *name, const char *comment,
                                  shoal_object_t *object);
//  The objects of TENANT (an admin's NULL: every tenant's).
SHOAL_EXPORT int
    shoal_client_object_list(shoal_client_t *self, const char *tenant, shoal_object_t **objects, size_t *count);
//  Removes NAME: every instance write-locked, its bytes removed, then the
//  instances, then the object (an instance held open goes when its last
//  reader closes). shoal_client_error says what was done.
SHOAL_EXPORT int
    shoal_client_object_remove(shoal_client_t *self, const char *tenant, const char *name);
//  Makes instances on other nodes until COPIES nodes hold one, asked of a
//  node that holds a complete one; answers once they arrived checksummed.
//  *HELD_P (may be NULL) receives how many nodes hold one.
SHOAL_EXPORT int
    shoal_client_object_replicate(shoal_client_t *self, const char *tenant, const char *name, uint32_t copies,
                                  uint32_t *held_p);

//  An open object: a read lock on one instance, at its node.
typedef struct {
    uint64_t storage_id;
    uint64_t instance_id;
    uint64_t size;
    char checksum[65];
    char *holder;               //  the lock's holder
    char *node;                 //  the instance's node
    char *endpoint;             //  where it serves: reads and the close go there
} shoal_object_open_t;

//  Opens NAME: a read lock on one good instance, at the node asked first,
//  else at a node that holds one. An instance being removed or replaced is
//  not waited for: the name is resolved again (a few times, with a growing
//  pause) instead. HOLDER NULL: the node names one. VERIFY checksums the
//  instance first whatever its size and age.
SHOAL_EXPORT int
    shoal_client_object_open(shoal_client_t *self, const char *tenant, const char *name, const char *holder,
                             bool verify, shoal_object_open_t *open);
//  Reads up to SIZE bytes at OFFSET of OPEN into BUFFER; *GOT_P gets how many.
SHOAL_EXPORT int
    shoal_client_object_read(shoal_client_t *self, const shoal_object_open_t *open, uint64_t offset, void *buffer,
                             size_t size, size_t *got_p);
//  Releases OPEN's read lock, and clears OPEN when it did.
SHOAL_EXPORT int
    shoal_client_object_close(shoal_client_t *self, shoal_object_open_t *open);
//  Closes the instance a lock HOLDER holds at the node at ENDPOINT (NULL:
//  this client's), from another process than the one that opened it.
SHOAL_EXPORT int
    shoal_client_object_close_instance(shoal_client_t *self, const char *endpoint, uint64_t instance_id,
                                       const char *holder);
//  COUNT (at most 10000) new ids of KIND ("storage" or "instance") into IDS.
SHOAL_EXPORT int
    shoal_client_object_ids(shoal_client_t *self, const char *kind, size_t count, uint64_t *ids);
//  One finding of a check of a node's objects.
typedef struct {
    char *key;                  //  the catalog key, lock, record or file
    char *what;                 //  what is wrong, and what was done about it
    bool repaired;
} shoal_object_finding_t;

//  The consistency sweep's part for objects on the node (admins): every
//  object has an instance and every instance an object, the node's
//  instances have their bytes with their checksum, its locks equal their
//  records, no file is left that no instance names. REPAIR mends what is
//  safe. *FINDINGS (COUNT) the caller frees with shoal_object_findings_clear.
SHOAL_EXPORT int
    shoal_client_object_check(shoal_client_t *self, bool repair, shoal_object_finding_t **findings,
                              size_t *count);
SHOAL_EXPORT void
    shoal_object_findings_clear(shoal_object_finding_t **findings, size_t count);
SHOAL_EXPORT void
    shoal_object_clear(shoal_object_t *object);
SHOAL_EXPORT void
    shoal_objects_clear(shoal_object_t **objects, size_t count);
SHOAL_EXPORT void
    shoal_object_open_clear(shoal_object_open_t *open);

#ifdef __cplusplus
}
#endif

#endif
