/*  shoal_resolve: the addresses behind a join name, looked up without
    holding the reactor.

    A join endpoint may name a host that stands for several nodes: the
    service name of a Compose cluster resolves to one address per replica.
    Connecting to the name would reach one of them (possibly this node
    itself); a node joins through every address instead. The lookup runs in
    the resolver's own thread (getaddrinfo_a); the reactor starts it and,
    at a later tick, takes the result. This host's own addresses are left
    out: a join sent to oneself is refused as a duplicate id.
*/
#ifndef SHOAL_RESOLVE_H_INCLUDED
#define SHOAL_RESOLVE_H_INCLUDED

#include <czmq.h>

typedef struct _shoal_resolve_t shoal_resolve_t;

//  A resolver for ENDPOINT (tcp://HOST:PORT). NULL when HOST is an address
//  already, or '*', or the endpoint has no host and port: nothing to look up.
shoal_resolve_t *shoal_resolve_new(const char *endpoint);
void shoal_resolve_destroy(shoal_resolve_t **self_p);

//  The endpoint as configured.
const char *shoal_resolve_endpoint(shoal_resolve_t *self);

//  Starts a lookup unless one is in flight. Returns 0, or -1 when it could
//  not be started (logged).
int shoal_resolve_start(shoal_resolve_t *self);

//  The result of the last lookup once it has ended: a new list of
//  endpoints tcp://ADDRESS:PORT (strings; the caller destroys it), without
//  this host's own addresses, empty when the name has no other address (a
//  failure is logged). NULL while the lookup runs or when none was started.
zlistx_t *shoal_resolve_poll(shoal_resolve_t *self);

#endif
