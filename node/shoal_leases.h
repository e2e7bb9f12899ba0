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
*/
#ifndef SHOAL_LEASES_H_INCLUDED
#define SHOAL_LEASES_H_INCLUDED

#include "shoal_txn.h"

typedef struct _shoal_leases_t shoal_leases_t;

//  Leases of the node with the live SETTINGS, whose keys TXN keeps (both
//  borrowed). Returns NULL with *ERROR_P when the leases cannot be read.
shoal_leases_t *shoal_leases_new(const shoal_settings_t *settings, shoal_txn_t *txn, char **error_p);
void shoal_leases_destroy(shoal_leases_t **self_p);

bool shoal_leases_handles(shoal_msg_type_t type);

//  Answers a lease REQUEST from CALLER. Returns the reply.
shoal_envelope_t *shoal_leases_handle(shoal_leases_t *self, const shoal_envelope_t *request,
                                      const shoal_caller_t *caller);

//  Ends the leases whose time has come, with what is attached to them.
//  Called from the node's tick.
void shoal_leases_tick(shoal_leases_t *self);

//  Whether CALLER may attach to lease ID now: NULL when it may, else a
//  reply to REQUEST that says why not (404: no such lease here, or not
//  the caller's).
shoal_envelope_t *shoal_leases_check(shoal_leases_t *self, uint64_t id, const shoal_envelope_t *request,
                                     const shoal_caller_t *caller);

#endif
