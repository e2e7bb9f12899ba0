/*  shoal_claim_store: the owner-local claims and their admission counters.

    Two column families, both written only by the claim's owner:

        claims     ("claim", id)        -> ClaimRecord
        counters   ("node")             -> CounterRecord of the whole node
                   ("tenant", tenant)   -> CounterRecord of one tenant

    A claim's change and the counter change it implies are one batch, so a
    crash leaves either both or neither: the counters always equal a count
    of the claims. The counters say how many claims are not released, how
    many hold a guest (creating, running, paused, moving) and how much memory
    those guests have. A released claim stays on record with state released,
    so that its id is never given out again.

    The moves column family holds each side's record of a move of a claim:

        moves      ("move", role, id)   -> Move (shoal_move_t)

    A claim change and the move record that journals it may go in one
    batch (shoal_claim_store_change): a target adopting a moved claim, or a
    source dropping one, leaves both or neither.
*/
#ifndef SHOAL_CLAIM_STORE_H_INCLUDED
#define SHOAL_CLAIM_STORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <czmq.h>

#include "shoal_store.h"
#include "shoal_msg.h"

//  Every claim of a listing, in id order.
typedef struct {
    shoal_claim_record_t *items;    //  COUNT records, owned
    size_t count;                   //  records in use
    size_t capacity;                //  records allocated
} shoal_claim_records_t;

void shoal_claim_records_clear(shoal_claim_records_t *list);

//  True when a claim in STATE holds a guest and so counts as running.
bool shoal_claim_holds_guest(shoal_claim_state_t state);

typedef struct _shoal_claim_store_t shoal_claim_store_t;

//  Claims in STORE (borrowed; it must outlive them). SYNC asks every write
//  to be durable before it returns.
shoal_claim_store_t *shoal_claim_store_new(shoal_store_t *store, bool sync);
void shoal_claim_store_destroy(shoal_claim_store_t **self_p);

//  Told after each write that changed a claim or a move record, on the
//  thread that wrote it: PREVIOUS -> RECORD as in shoal_claim_store_change
//  (both NULL when only a move record changed), MOVE the move record
//  written (or NULL); a deleted move record comes as DELETED_ROLE with
//  DELETED_CLAIM (SHOAL_MOVE_ROLE_NONE and NULL otherwise). All borrowed.
//  Metrics and the event stream follow claims and moves through it.
typedef void (shoal_claim_store_observer_fn) (const shoal_claim_record_t *previous,
                                              const shoal_claim_record_t *record, const shoal_move_t *move,
                                              shoal_move_role_t deleted_role, const char *deleted_claim,
                                              void *arg);

//  Sets the one observer (FN NULL: none).
void shoal_claim_store_set_observer(shoal_claim_store_t *self, shoal_claim_store_observer_fn *fn, void *arg);

//  Reads claim ID. Returns 0 with *FOUND set (RECORD filled when found; the
//  caller clears it with shoal_claim_codec.clear), or -1.
int shoal_claim_store_get(shoal_claim_store_t *self, const char *id, shoal_claim_record_t *record,
                          bool *found);

//  Writes RECORD, which replaces PREVIOUS (NULL for a new claim), and
//  changes the node's and the tenant's counters by the difference, in one
//  batch. Returns 0 or -1 (nothing written).
int shoal_claim_store_put(shoal_claim_store_t *self, const shoal_claim_record_t *previous,
                          const shoal_claim_record_t *record);

//  One batch: the claim change PREVIOUS -> RECORD with its counters
//  (PREVIOUS NULL: a new claim; RECORD NULL: the claim leaves this node;
//  both NULL: no claim change), and MOVE (may be NULL) written as its role's
//  record of its claim. Without SYNC the batch is not fsynced: it outlives
//  a crash of the process, not of the machine (for a step that a restart
//  having lost it recovers from the same way). Returns 0 or -1 (nothing
//  written).
int shoal_claim_store_change(shoal_claim_store_t *self, const shoal_claim_record_t *previous,
                             const shoal_claim_record_t *record, const shoal_move_t *move, bool sync);

//  ROLE's move record of CLAIM_ID. Returns 0 with *FOUND set (MOVE filled
//  when found; the caller clears it), or -1.
int shoal_claim_store_move_get(shoal_claim_store_t *self, shoal_move_role_t role, const char *claim_id,
                               shoal_move_t *move, bool *found);

//  Deletes ROLE's move record of CLAIM_ID. Returns 0 or -1.
int shoal_claim_store_move_delete(shoal_claim_store_t *self, shoal_move_role_t role, const char *claim_id);

//  Every move record (LIST cleared first, then filled). Returns 0 or -1.
int shoal_claim_store_move_list(shoal_claim_store_t *self, shoal_msg_moves_t *list);

//  A move record that does not decode: whose it is, as far as its key
//  says, and why it cannot be read.
typedef struct {
    shoal_move_role_t role;     //  the role its key names (SHOAL_MOVE_ROLE_NONE when it does not read)
    char *claim_id;             //  the claim its key names ("" when it does not read)
    char *key;                  //  the key, rendered for messages
    char *error;                //  why the value cannot be read
} shoal_move_unreadable_t;

typedef struct {
    shoal_move_unreadable_t *items;
    size_t count;
} shoal_move_unreadables_t;

//  Every move record that reads into LIST, every one that does not into
//  UNREADABLE (both cleared first): one damaged record never hides the
//  others. Returns 0, or -1 when the family itself cannot be read.
int shoal_claim_store_move_scan(shoal_claim_store_t *self, shoal_msg_moves_t *list,
                                shoal_move_unreadables_t *unreadable);

void shoal_move_unreadables_clear(shoal_move_unreadables_t *list);

//  Every claim, released ones included. LIST is cleared first. Returns 0 or -1.
int shoal_claim_store_list(shoal_claim_store_t *self, shoal_claim_records_t *list);

//  Up to LIMIT claims whose ids come after AFTER ("": from the first), in
//  id order, released ones included: a walk over every claim a page at a
//  time. LIST is cleared first. Returns 0 or -1.
int shoal_claim_store_list_after(shoal_claim_store_t *self, const char *after, size_t limit,
                                 shoal_claim_records_t *list);

//  The stored counters of TENANT (NULL: of the node). A scope never written
//  reads as zero. Returns 0 or -1.
int shoal_claim_store_counters(shoal_claim_store_t *self, const char *tenant,
                               shoal_counter_record_t *counters);

//  The tenants that have stored counters, in name order: a new list of
//  strings (the caller destroys it), or NULL when the store cannot be read.
zlistx_t *shoal_claim_store_tenants(shoal_claim_store_t *self);

//  Counts the claims of TENANT (NULL: of the node) afresh. Returns 0 or -1.
int shoal_claim_store_recount(shoal_claim_store_t *self, const char *tenant,
                              shoal_counter_record_t *counters);

//  Rewrites every stored counter that differs from a recount (a damaged
//  store, or counters from before they were kept), in one batch. *FIXED (may
//  be NULL) receives how many scopes were rewritten. Returns 0 or -1.
int shoal_claim_store_repair(shoal_claim_store_t *self, size_t *fixed);

//  What one stored key of the claims, counters or moves family is, for a
//  walk that reads the families itself (the consistency sweep).
typedef enum {
    SHOAL_CLAIM_ITEM_CLAIM,         //  claims ("claim", id): CLAIM
    SHOAL_CLAIM_ITEM_NODE_COUNTERS, //  counters ("node"): COUNTERS
    SHOAL_CLAIM_ITEM_TENANT_COUNTERS,   //  counters ("tenant", tenant): COUNTERS, TENANT
    SHOAL_CLAIM_ITEM_MOVE,          //  moves ("move", role, id): MOVE, ROLE, ID
} shoal_claim_item_kind_t;

typedef struct {
    shoal_claim_item_kind_t kind;
    shoal_claim_record_t claim;     //  a claim, as stored
    shoal_counter_record_t counters;    //  counters, as stored
    shoal_move_t move;              //  a move record, as stored
    shoal_move_role_t role;         //  the role its key names
    char name[SHOAL_KEY_MAX];       //  the claim id or tenant its key names
} shoal_claim_item_t;

//  Reads KEY (KEY_SIZE bytes) with VALUE of CF (claims, counters or moves)
//  into ITEM: the key must be one of CF's, its value must decode, and a
//  claim or move record must name the claim its key names. Returns 0 (the
//  caller clears ITEM with shoal_claim_item_clear), or -1 with WHY saying
//  what is wrong (ITEM then holds nothing).
int shoal_claim_store_read_item(shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
                                size_t size, shoal_claim_item_t *item, char *why, size_t why_size);
void shoal_claim_item_clear(shoal_claim_item_t *item);

//  The last error, as the store keeps it.
const char *shoal_claim_store_error(shoal_claim_store_t *self);

#endif
