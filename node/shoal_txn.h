/*  shoal_txn: each claim's own key space, and its transactions.

    Seed 000's metadata, handle and lock keys of a resource become a small
    key space that belongs to one claim. Its owner is its only writer, so a
    compare-and-set needs no consensus round: a transaction (claim_txn)
    reads what its compares name, picks its branch, applies the branch's
    operations in order (each sees the ones before it) and writes them with
    the claim's next revision in one synced batch before it answers. A
    transaction that changed nothing takes no revision. Revisions count per
    claim and only grow, across moves too.

    Requests name a claim as claim requests do and are answered by its
    owner alone: a node that does not hold it answers 404 (the client looks
    it up and asks the owner), a tenant reaches only its own claims' keys.

    The key space travels with its claim, inside the move's final step:

        1. Once the target agreed to the final round, and before the source
           pauses the guest for it, the source freezes the key space (its
           record names the move, synced) and sends it whole to the target
           (move_keys), with the claim's lock (counts and records) and the
           leases its keys and locks are attached to. The guest pauses once
           the target holds them: the synced writes of both sides are no
           part of the guest's downtime.
           From here on the source answers 503 "moving", retry, to every
           transaction on the claim: what the target gets is exactly what
           the source acknowledged.
        2. The target keeps it durably apart (staged), and acknowledges;
           only then does the source send the last round.
        3. When the target adopts the claim it installs the staged space
           as the claim's, one batch (synced by the adoption's next synced
           write, see shoal_txn_move_install), before it serves anything: keys,
           lock, and each lease it does not hold yet, ending when it ended
           on the source (a keepalive to the source does not reach this
           copy: keep a moved lease alive at the claim's new owner).
        4. A move that aborts leaves the claim running on the source: its
           first transaction finds the space frozen by a move that is over
           and thaws it. The target removes what it staged when it drops
           the reception (before its reception record goes, so that a crash
           in between finds the record and drops again), and when a
           source's abort names a move it holds no reception of (keys that
           arrived after the reception was dropped). At start, a staged
           space whose move has no reception record here is removed: its
           move aborted, or ended, while the node was down or before the
           removal was written.
        5. Once the claim has left the source, the tick's sweep removes the
           key spaces of claims this node no longer holds.
*/
#ifndef SHOAL_TXN_H_INCLUDED
#define SHOAL_TXN_H_INCLUDED

#include "shoal_claims.h"
#include "shoal_mesh.h"
#include "shoal_key_space.h"

typedef struct _shoal_txn_t shoal_txn_t;

//  Key spaces of the node with the live SETTINGS, kept in STORE, for the
//  claims of CLAIMS; move_keys go out through MESH (all borrowed).
shoal_txn_t *shoal_txn_new(const shoal_settings_t *settings, shoal_store_t *store, shoal_claims_t *claims,
                           shoal_mesh_t *mesh);
void shoal_txn_destroy(shoal_txn_t **self_p);

bool shoal_txn_handles(shoal_msg_type_t type);

//  Answers REQUEST (claim_txn, move_keys) from CALLER. Returns the reply.
shoal_envelope_t *shoal_txn_handle(shoal_txn_t *self, const shoal_envelope_t *request,
                                   const shoal_caller_t *caller);

//  The sweep: a few key spaces per tick, those of claims no longer held
//  here go. Called from the node's tick.
void shoal_txn_tick(shoal_txn_t *self);

//  Told once whether the target holds the key space: ERROR is NULL when it
//  does, else says why not (borrowed).
typedef void (shoal_txn_sent_fn) (const char *error, void *arg);

//  Move hook, source side, before the final round's pause (steps 1-2):
//  freezes the key space of MOVE's claim and sends it to MOVE's target;
//  FN (with ARG) is told once the target answered. Returns 0, or -1 when it could not be
//  sent (FN is then not called).
int shoal_txn_move_send(shoal_txn_t *self, const shoal_move_t *move, shoal_txn_sent_fn *fn, void *arg);

//  Move hook, target side, at the adoption (step 3): makes the key space
//  staged for CLAIM_ID the claim's. The write is not synced: it lies
//  inside the guest's downtime, where a synced write waits behind the
//  disk's writeback (up to 70 ms of it here), and the adoption's next
//  synced write (the claim running, before the source is told and drops
//  its copy), like any transaction acknowledged on the keys since, makes
//  it durable; a crash before that finds the staged copy and the
//  reception as they were, and adopts again. Returns 0 (also when none
//  was staged), or -1 when it could not be written.
int shoal_txn_move_install(shoal_txn_t *self, const char *claim_id);

//  Move hook, target side, when a reception is dropped (step 4): removes
//  the key space move MOVE_ID staged for CLAIM_ID, if that move staged
//  it. Returns 0 (also when there was none) or -1 (logged).
int shoal_txn_move_unstage(shoal_txn_t *self, const char *claim_id, const char *move_id);

//  Whether a reception of move MOVE_ID of CLAIM_ID is under way here (its
//  staged keys are kept).
typedef bool (shoal_txn_receiving_fn) (const char *claim_id, const char *move_id, void *arg);

//  At start (step 4): removes every staged key space RECEIVING (with ARG)
//  does not name as under way. Returns how many went, or -1 when the
//  store cannot be read (logged).
int shoal_txn_unstage_orphans(shoal_txn_t *self, shoal_txn_receiving_fn *receiving, void *arg);

//  The key spaces, for leases (borrowed).
shoal_key_space_t *shoal_txn_space(shoal_txn_t *self);

//  Asks CHECK (with ARG) whether CALLER may attach keys to lease ID: it
//  returns NULL, or the reply to send instead.
typedef shoal_envelope_t *(shoal_txn_lease_check_fn) (uint64_t id, const shoal_envelope_t *request,
                                                      const shoal_caller_t *caller, void *arg);
void shoal_txn_set_lease_check(shoal_txn_t *self, shoal_txn_lease_check_fn *check, void *arg);

//  Whether CALLER may attach to lease ID: NULL, or the reply to send instead.
shoal_envelope_t *shoal_txn_lease_check(shoal_txn_t *self, uint64_t id, const shoal_envelope_t *request,
                                        const shoal_caller_t *caller);

//  Ends lease ID: the locks attached to it are rolled back, the keys go, each claim that loses some
//  taking a new revision, and the lease's record and index with them, in
//  one batch. *REMOVED_P (may be NULL) counts the keys removed. Returns 0
//  or -1.
int shoal_txn_lease_end(shoal_txn_t *self, uint64_t id, size_t *removed_p);

//  The revision of CLAIM_ID's key space here (0: none), or -1 when the store
//  cannot be read. For tests and status.
int64_t shoal_txn_revision(shoal_txn_t *self, const char *claim_id);

#endif
