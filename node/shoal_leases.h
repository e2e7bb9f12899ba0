/*  shoal_leases: leases, held by the node that granted them.

    A client takes a lease with a TTL (the node grants at most
    SHOAL_LEASE_TTL_MAX_MS and says when it shortened one), keeps it alive
    by asking again within the TTL, and attaches keys of claims this node
    owns to it (a put with the lease's id). When the lease is revoked, or
    its TTL passes without a keepalive, it ends, and everything attached to
    it goes in the same batch: each claim that loses keys takes a new
    revision, as if a transaction had deleted them.

    A lease is kept in the store with the wall-clock time it ends at, and
    every grant and keepalive is written synced before it is answered. A
    node that restarts therefore neither extends a lease nor loses one
    early: it ends at the time its last acknowledged keepalive set, whether
    the node was down meanwhile or not (a lease whose time passed while the
    node was down ends at the first tick). The tick looks once per tick
    whether the earliest end has come, so a lease ends within its TTL and
    one tick.

    A tenant sees and uses only the leases it took; admins and nodes reach
    every lease.

    A lease's home is the node that granted it, and the home's record is
    the lease: keepalive, revoke and ttl are answered there alone. When a
    claim moves, the leases its keys and locks are attached to go with it
    (shoal_txn.h) and the target keeps a copy naming the home. A copy
    serves what is attached to it on that node (it may be attached to, and
    ends with what it holds there), but no client's keepalive: asked, it
    answers 404 naming its home. Keepalives reach it from the home, this
    way (the simplest design that keeps the home the one authority, with
    no list of copies to keep in step):

     1. When a copy's time comes, the node asks the home (ttl, node to
        node). Kept alive there, the copy takes the home's end time and
        waits for it; otherwise (404: the home ended it, or no answer in
        LEASES_HOME_TIMEOUT_MS) the copy ends, with what is attached to it.
        A copy with nothing attached any more ends without asking.
     2. When the home ends a lease (revoke, or its time passed) it tells
        every peer alive (lease_ended), once, without waiting: copies end
        at once instead of at their next question.

    So a copy ends at most one question's time after its home's lease did,
    and never while the home keeps the lease alive. Any node names a
    lease's home (lease_lookup): from its copy, or by asking its peers
    (the lookup waits for their answers): first the one whose mark the
    id's top bits carry (a node marks the ids it picks), then, when that
    one does not hold it, every other peer alive, so that an id a client
    chose is found too. libshoal asks the node it talks to first and
    follows a 404 to the home, as it does for claims.

    A client's lease from any node holds keys and locks of any node's
    claims. A transaction or lock request that names a lease the claim's
    owner neither holds nor keeps a copy of waits (the node parks it,
    shoal_leases_park) while the owner asks the lease's home for it, as
    step 1 asks: kept alive there, the lease becomes a copy here, exactly
    as a moving claim's would, and ends as a copy does (steps 1 and 2).
    Then the request is answered as if it came now: with the copy, or 404
    when no peer holds the lease. The peers' answers stand
    LEASES_FETCH_REST_MS: a request naming a lease nobody just held is
    answered 404 at once.
*/
#ifndef SHOAL_LEASES_H_INCLUDED
#define SHOAL_LEASES_H_INCLUDED

#include "shoal_txn.h"

typedef struct _shoal_leases_t shoal_leases_t;

//  Leases of the node with the live SETTINGS, whose keys TXN keeps, homes
//  and copies reached through MESH (all borrowed). Returns NULL with *ERROR_P when the leases cannot be read.
shoal_leases_t *shoal_leases_new(const shoal_settings_t *settings, shoal_txn_t *txn, shoal_mesh_t *mesh,
                                 char **error_p);
void shoal_leases_destroy(shoal_leases_t **self_p);

bool shoal_leases_handles(shoal_msg_type_t type);

//  Answers a lease REQUEST from CALLER. Returns the reply.
shoal_envelope_t *shoal_leases_handle(shoal_leases_t *self, const shoal_envelope_t *request,
                                      const shoal_caller_t *caller);

//  Ends the leases whose time has come, with what is attached to them.
//  Called from the node's tick.
void shoal_leases_tick(shoal_leases_t *self);

//  Answers a parked REQUEST (taken) from CALLER, whose reply goes to
//  ROUTING_ID (borrowed), now that the copy it waited for came or not.
typedef void (shoal_leases_resume_fn) (shoal_envelope_t **request_p, const shoal_caller_t *caller,
                                       zframe_t *routing_id, void *arg);
void shoal_leases_set_resume(shoal_leases_t *self, shoal_leases_resume_fn *fn, void *arg);

//  Called with the REPLY to each claim_txn, lock and lease REQUEST: when
//  the reply is a 404 because a lease the request names is neither held
//  nor copied here (or, for a lease_lookup, its home is not known yet),
//  asks the peers for its home (and a claim_txn or lock for a copy) and
//  parks the request (takes it, and keeps a copy of ROUTING_ID); the resume
//  function answers it later. Returns true when parked (REPLY is then not
//  to be sent), false otherwise (also when no peer is alive to ask).
bool shoal_leases_park(shoal_leases_t *self, const shoal_envelope_t *reply, shoal_envelope_t **request_p,
                       const shoal_caller_t *caller, zframe_t *routing_id);

//  Whether CALLER may attach to lease ID now: NULL when it may, else a
//  reply to REQUEST that says why not (404: no such lease here, or not
//  the caller's).
shoal_envelope_t *shoal_leases_check(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request,
                                     const shoal_caller_t *caller);

#endif
