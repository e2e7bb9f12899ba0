/*  shoal_key_space: each claim's own small key space, kept by its owner.

    One column family, written only by the claim's owner:

        claim_keys  ("meta", claim)         -> ClaimKeys without keys: the
                                               claim's revision, its size, and
                                               the move that froze it
                    ("key", claim, key)     -> KeyValue
                    ("staged", claim)       -> ClaimKeys whole: a key space a
                                               move brought, until the claim
                                               is adopted here or the move's
                                               reception is dropped
                    ("lease", id)           -> LeaseInfo: a lease this node holds
                    ("leased", id, kind, claim, name)
                                            -> empty: what is attached to lease
                                               id (kind "key": a claim's key)

    and a second family for the claims' read/write locks (seed 001):

        locks       ("state", claim)        -> Locks without records: readers,
                                               writer, waiter
                    ("lock", claim, holder) -> LockRecord

    with what a lock's lease holds indexed as ("leased", id, "lock", claim,
    holder) in claim_keys.

    A transaction's writes and the claim's new revision are one batch,
    synced when the store is: an acknowledged transaction outlives a crash
    of the machine. A claim's keys are a key range of their own, so moving
    or dropping them is one range operation.
*/
#ifndef SHOAL_KEY_SPACE_H_INCLUDED
#define SHOAL_KEY_SPACE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <czmq.h>

#include "shoal_store.h"
#include "shoal_msg.h"

typedef struct _shoal_key_space_t shoal_key_space_t;

//  Key spaces in STORE (borrowed; it must outlive them). SYNC asks every
//  write to be durable before it returns.
shoal_key_space_t *shoal_key_space_new(shoal_store_t *store, bool sync);
void shoal_key_space_destroy(shoal_key_space_t **self_p);

const char *shoal_key_space_error(shoal_key_space_t *self);

//  Reads the record of CLAIM_ID's key space into META (cleared with
//  shoal_msg_claim_keys_codec.clear): revision 0 and no move when the claim
//  never had a key. Returns 0 or -1.
int shoal_key_space_meta(shoal_key_space_t *self, const char *claim_id, shoal_msg_claim_keys_t *meta);

//  Reads KEY of CLAIM_ID. Returns 0 with *FOUND set (KV filled when found;
//  cleared with shoal_msg_key_value_codec.clear), or -1.
int shoal_key_space_get(shoal_key_space_t *self, const char *claim_id, const char *key,
                        shoal_msg_key_value_t *kv, bool *found);

//  Appends to *KVS_P (growing it, *COUNT_P its length) every key of
//  CLAIM_ID that starts with PREFIX ("": every key), in key order.
//  Returns 0 or -1.
int shoal_key_space_range(shoal_key_space_t *self, const char *claim_id, const char *prefix,
                          shoal_msg_key_value_t **kvs_p, size_t *count_p);

//  One key a change writes: KV as it is written, or NULL when the key
//  goes; PRIOR_LEASE the lease it was attached to (0: none, or it did not
//  exist), so that the lease's index follows.
typedef struct {
    const char *key;
    const shoal_msg_key_value_t *kv;
    uint64_t prior_lease;
} shoal_key_write_t;

//  One claim's part of a batch: the key space's record after it, and the
//  keys written.
typedef struct {
    const shoal_msg_claim_keys_t *meta;
    const shoal_key_write_t *writes;
    size_t count;
} shoal_key_change_t;

//  One batch: every change of CHANGES, LEASE (may be NULL) written as a
//  lease's record, and the lease GONE (0: none) removed with its index.
//  Returns 0 or -1 (nothing written).
int shoal_key_space_apply(shoal_key_space_t *self, const shoal_key_change_t *changes, size_t change_count,
                          const shoal_msg_lease_t *lease, uint64_t gone);

//  One batch: PUTS written, the keys DELETES (DELETE_COUNT names) removed,
//  and META as the key space's record; keys attached to leases are not.
//  Returns 0 or -1 (nothing written).
int shoal_key_space_write(shoal_key_space_t *self, const shoal_msg_claim_keys_t *meta,
                          const shoal_msg_key_value_t *puts, size_t put_count,
                          char *const *deletes, size_t delete_count);

//  Reads lease ID. Returns 0 with *FOUND set (LEASE filled when found,
//  cleared with shoal_msg_lease_codec.clear), or -1.
int shoal_key_space_lease(shoal_key_space_t *self, uint64_t id, shoal_msg_lease_t *lease, bool *found);

//  Every lease held here, in id order, into *LEASES_P and *COUNT_P (freed
//  with shoal_leases_free). Returns 0 or -1.
int shoal_key_space_leases(shoal_key_space_t *self, shoal_msg_lease_t **leases_p, size_t *count_p);
void shoal_leases_free(shoal_msg_lease_t **leases_p, size_t count);

//  What is attached to a lease: KIND ("key"), the claim and the name.
typedef struct {
    char *kind;
    char *claim_id;
    char *name;
} shoal_leased_t;

//  Everything attached to lease ID into *ITEMS_P and *COUNT_P (freed with
//  shoal_leased_free). Returns 0 or -1.
int shoal_key_space_leased(shoal_key_space_t *self, uint64_t id, shoal_leased_t **items_p, size_t *count_p);
void shoal_leased_free(shoal_leased_t **items_p, size_t count);

//  Writes META alone (freezing or thawing the space). Returns 0 or -1.
int shoal_key_space_set_meta(shoal_key_space_t *self, const shoal_msg_claim_keys_t *meta);

//  Fills SPACE with CLAIM_ID's record and every key. Returns 0 or -1.
int shoal_key_space_export(shoal_key_space_t *self, const char *claim_id, shoal_msg_claim_keys_t *space);

//  Keeps SPACE, brought by a move, apart from the live keys until the
//  claim is adopted here. Returns 0 or -1.
int shoal_key_space_stage(shoal_key_space_t *self, const shoal_msg_claim_keys_t *space);

//  Removes the key space staged for CLAIM_ID if the move MOVE_ID brought
//  it (NULL: whichever move did), nothing else. *REMOVED_P (may be NULL)
//  says whether one went. Returns 0 (also when none was staged) or -1.
int shoal_key_space_unstage(shoal_key_space_t *self, const char *claim_id, const char *move_id, bool *removed_p);

//  A key space staged here: its claim and the move that brought it.
typedef struct {
    char *claim_id;
    char *move_id;
    size_t count;               //  how many keys it holds
} shoal_staged_t;

//  Every staged key space, in claim order, into *STAGED_P and *COUNT_P
//  (freed with shoal_staged_free). A staged record that does not decode is
//  an error naming its claim. Returns 0 or -1.
int shoal_key_space_staged(shoal_key_space_t *self, shoal_staged_t **staged_p, size_t *count_p);
void shoal_staged_free(shoal_staged_t **staged_p, size_t count);

//  Makes the key space staged for CLAIM_ID the claim's, in one batch: its
//  keys replace whatever the claim had here, its record (thawed) becomes
//  the claim's, the staged copy goes. *FOUND says whether one was staged.
//  LAZY: the batch is not synced, whatever the space's setting (a crash
//  that loses it finds the staged copy as it was). Returns 0 or -1.
int shoal_key_space_install(shoal_key_space_t *self, const char *claim_id, bool lazy, bool *found);

//  Removes every key and the record of CLAIM_ID, and anything staged for
//  it, in one batch. Returns 0 or -1.
int shoal_key_space_drop(shoal_key_space_t *self, const char *claim_id);

//  Claim ids that have a key space record here, in order, after AFTER
//  ("": from the first), at most LIMIT of them (a new list of strings, the
//  caller's), or NULL when the store cannot be read.
zlistx_t *shoal_key_space_claims(shoal_key_space_t *self, const char *after, size_t limit);

//  Reads the lock state of CLAIM_ID into STATE (cleared with
//  shoal_msg_locks_codec.clear): no readers, writer or waiter when none
//  was kept. Returns 0 or -1.
int shoal_key_space_lock_state(shoal_key_space_t *self, const char *claim_id, shoal_msg_locks_t *state);

//  Reads HOLDER's lock record of CLAIM_ID. Returns 0 with *FOUND set
//  (RECORD filled when found), or -1.
int shoal_key_space_lock_get(shoal_key_space_t *self, const char *claim_id, const char *holder,
                             shoal_msg_lock_record_t *record, bool *found);

//  Every lock record of CLAIM_ID into STATE's records. Returns 0 or -1.
int shoal_key_space_lock_records(shoal_key_space_t *self, const char *claim_id, shoal_msg_locks_t *state);

//  Every lock record of every claim here into STATE's records (its claim
//  id unused). Returns 0 or -1.
int shoal_key_space_lock_all(shoal_key_space_t *self, shoal_msg_locks_t *state);

//  One batch: STATE written as the claim's lock state (removed when it
//  holds nothing), RECORD (may be NULL) written with its lease's index,
//  and the record of DROP (may be NULL), attached to DROP_LEASE, removed
//  with its index. Returns 0 or -1 (nothing written).
int shoal_key_space_lock_write(shoal_key_space_t *self, const shoal_msg_locks_t *state,
                               const shoal_msg_lock_record_t *record, const char *drop, uint64_t drop_lease);

void shoal_key_values_free(shoal_msg_key_value_t **kvs_p, size_t count);

//  What one stored key of claim_keys or locks is, for a walk that reads the
//  families itself (the consistency sweep).
typedef enum {
    SHOAL_SPACE_ITEM_META,          //  claim_keys ("meta", claim): SPACE (no keys)
    SHOAL_SPACE_ITEM_KEY,           //  claim_keys ("key", claim, key): KV
    SHOAL_SPACE_ITEM_STAGED,        //  claim_keys ("staged", claim): SPACE
    SHOAL_SPACE_ITEM_LEASE,         //  claim_keys ("lease", id): LEASE
    SHOAL_SPACE_ITEM_LEASED,        //  claim_keys ("leased", id, kind, claim, name): empty
    SHOAL_SPACE_ITEM_LOCK_STATE,    //  locks ("state", claim): LOCKS
    SHOAL_SPACE_ITEM_LOCK_RECORD,   //  locks ("lock", claim, holder): RECORD
} shoal_space_item_kind_t;

typedef struct {
    shoal_space_item_kind_t kind;
    char claim_id[SHOAL_KEY_MAX];   //  the claim its key names ("" for a lease)
    char name[SHOAL_KEY_MAX];       //  the key, holder or attached name its key names
    uint64_t lease;                 //  the lease its key names (lease, leased)
    shoal_msg_claim_keys_t space;   //  meta, staged
    shoal_msg_key_value_t kv;       //  key
    shoal_msg_lease_t lease_record; //  lease
    shoal_msg_locks_t locks;        //  lock state
    shoal_msg_lock_record_t record; //  lock record
} shoal_space_item_t;

//  Reads KEY (KEY_SIZE bytes) with VALUE of CF (claim_keys or locks) into
//  ITEM: the key must be one of CF's and its value must decode and name
//  what its key names. Returns 0 (the caller clears ITEM with
//  shoal_space_item_clear), or -1 with WHY saying what is wrong.
int shoal_key_space_read_item(shoal_cf_t cf, const uint8_t *key, size_t key_size, const uint8_t *value,
                              size_t size, shoal_space_item_t *item, char *why, size_t why_size);
void shoal_space_item_clear(shoal_space_item_t *item);

#endif
