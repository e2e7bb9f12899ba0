/*  shoal_damage: the node's accounts of damage to its store.

    Damage is never silent. What a salvage open dropped from the write-ahead
    log is written into the store as accounts (one per damaged record, with
    the file, byte offset and keys it held), so that they outlive restarts;
    move records that do not read are found again at every start by move
    recovery and listed beside them. Every account is logged at start,
    listed in `status` (admins) and stays until an operator forgets it
    (MSG_DAMAGE_FORGET). A replicated dataset an account names answers 503
    until the node took it again from a peer (a snapshot through the sync);
    the account then says from whom, and the dataset is served again. Forgetting an unreadable move record deletes it:
    the operator has settled its claim by hand.

        default   ("damage", id)   -> DamageRecord (shoal_msg_damage_t)
*/
#ifndef SHOAL_DAMAGE_H_INCLUDED
#define SHOAL_DAMAGE_H_INCLUDED

#include "shoal_auth.h"
#include "shoal_moves.h"
#include "shoal_proto.h"
#include "shoal_store.h"
#include "shoal_sync.h"

typedef struct _shoal_damage_t shoal_damage_t;

//  Damage accounts of STORE (borrowed), with the unreadable move records
//  MOVES (borrowed) found. Records what a salvage open of STORE dropped and
//  logs every account. Never NULL.
shoal_damage_t *shoal_damage_new(shoal_store_t *store, shoal_claim_store_t *claim_store, shoal_moves_t *moves,
                                 shoal_sync_t *sync);

//  A damaged replicated dataset is taken again from a peer (one snapshot
//  at a time, retried while none is alive); once it is, the node says so
//  and serves it again.
void shoal_damage_tick(shoal_damage_t *self);
void shoal_damage_destroy(shoal_damage_t **self_p);

//  Fills BODY's damage accounts and store space (for admins and nodes).
void shoal_damage_status(shoal_damage_t *self, shoal_msg_status_reply_t *body);

//  The 503 for a data request whose dataset has an open damage account
//  (it lost writes it had acknowledged), or NULL when it may be served.
shoal_envelope_t *shoal_damage_refuse_data(shoal_damage_t *self, const shoal_envelope_t *request);

bool shoal_damage_handles(shoal_msg_type_t type);
shoal_envelope_t *shoal_damage_handle(shoal_damage_t *self, const shoal_envelope_t *request,
                                      const shoal_caller_t *caller);

#endif
