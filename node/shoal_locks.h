/*  shoal_locks: read/write locks on claims, with lock records (seed 001).

    A claim's owner keeps its lock: how many readers hold it, which writer,
    and which writer waits, beside one lock record per holder (holder,
    holder node, mode, lease, time). Each acquire and release changes the
    record and the count in one synced batch. The rules, each answered at
    once (the owner never makes a request wait):

        read   granted when no writer holds it and none waits; refused
               (409) otherwise, and the refusal tells the reader to
               resolve the claim again rather than spin on it: the claim
               may be on its way elsewhere.
        write  granted when nobody holds it; when readers hold it and the
               request sets wait, the writer becomes the waiter, which
               stops new readers, and is answered 200 not granted; it asks
               again (spins) and is granted once the last reader left.
               Refused (409) while another writer holds or waits.
        again  a holder asking again for what it holds is granted; a waiter
               asking again is granted once no reader is left.
        release  of what the holder holds or waits for; 404 when nothing.

    A lock taken with a lease goes when the lease ends. The lock travels
    with its claim in the move's final step, beside its keys and with the
    leases it holds (shoal_txn.h); while the claim moves, acquires and
    releases answer 503, retry.
*/
#ifndef SHOAL_LOCKS_H_INCLUDED
#define SHOAL_LOCKS_H_INCLUDED

#include "shoal_txn.h"

typedef struct _shoal_locks_t shoal_locks_t;

//  Locks of the claims of CLAIMS, kept where TXN keeps their keys (both
//  borrowed), with the node's live SETTINGS. At start, the locks whose
//  holders ran on this node itself under an earlier run (a kill, then a
//  restart) are rolled back: their holders' connections are gone.
shoal_locks_t *shoal_locks_new(const shoal_settings_t *settings, shoal_txn_t *txn, shoal_claims_t *claims,
                               shoal_mesh_t *mesh);
void shoal_locks_destroy(shoal_locks_t **self_p);

bool shoal_locks_handles(shoal_msg_type_t type);

//  Answers a lock REQUEST from CALLER. Returns the reply.
shoal_envelope_t *shoal_locks_handle(shoal_locks_t *self, const shoal_envelope_t *request,
                                     const shoal_caller_t *caller);

//  The lock sweep (seed 001): told of membership events, it rolls back
//  every lock whose holder runs on a node declared dead, gone, or back
//  with a new incarnation (its holders did not survive). The sweep runs
//  whole inside the event, on the reactor, before anything else: no
//  request and no `peers` sees that node alive again before its locks
//  here were rolled back. Subscribe it with shoal_mesh_subscribe.
//
//  A node restarted before it was declared dead is swept when its new run
//  tells this node its boot (lock_sweep): every lock its holders took
//  under another run goes, and only then does the mesh count it alive
//  again (shoal_mesh.c, THE LOCK SWEEP OF A RUN). Each lock record keeps
//  the run of its holder's node it was taken under; a lock is taken only
//  for holders on nodes the mesh counts alive and swept (503 otherwise).
void shoal_locks_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg);

//  Rolls back HOLDER's lock of CLAIM_ID in SPACE (its node was swept, or
//  with LEASE not 0, that lease ended: only a lock still attached to it):
//  record and count in one batch. Returns 0 (also when there was none) or -1.
int shoal_locks_rollback(shoal_key_space_t *space, const char *claim_id, const char *holder, uint64_t lease);

#endif
