/*  shoal_mesh: who is in the mesh, who is alive, and a connection to each.

    A node starts with seed endpoints (mesh/join) and the members it
    remembers (shoal_members); it asks them to let it in (MESH_JOIN) until
    one answers, and learns the rest of the mesh from the member list that
    comes back and from the gossip every probe carries. Each peer gets one
    DEALER, a CURVE client presenting the cluster key, for control and sync.

    Failure detection is SWIM's: each probe interval one peer is pinged; no
    ack within the probe timeout, and up to three other peers are asked to
    ping it for us (MESH_PING_REQ); no ack through them either, and it is
    suspect. A suspect not refuted within the suspect timeout is dead. Only
    a member raises its own incarnation, which it does when it hears itself
    suspected: the newer incarnation wins everywhere it spreads. A node that
    stops cleanly says so (MESH_LEAVE, state left); a node that returns
    starts with a newer incarnation (its start time) and rejoins.

    A node restarted faster than it could be declared dead has its locks
    swept too: each run tells its peers its boot, and a peer holds a member
    back (not used for placing locks or claims; "sweeping" in peers) until
    the sweep of its new incarnation ran there (see shoal_mesh.c, THE LOCK
    SWEEP OF A RUN).

    Events (joined, suspect, dead, left, rejoined) are logged as one line
    each and handed to subscribers; the sync subscribes. Requests to peers
    go out through shoal_mesh_send, and their replies come back to a
    callback, matched by request id, on the node's one zloop.
*/
#ifndef SHOAL_MESH_H_INCLUDED
#define SHOAL_MESH_H_INCLUDED

#include <czmq.h>

#include "shoal_auth.h"
#include "shoal_config.h"
#include "shoal_members.h"
#include "shoal_proto.h"

//  Most peers a ping-req goes through.
#define SHOAL_MESH_INDIRECT_PROBES 3

typedef enum {
    SHOAL_MESH_JOINED,          //  a member seen for the first time
    SHOAL_MESH_ALIVE,           //  a suspect refuted its suspicion
    SHOAL_MESH_SUSPECT,         //  missed its probes
    SHOAL_MESH_DEAD,            //  suspect for too long
    SHOAL_MESH_LEFT,            //  said it was leaving
    SHOAL_MESH_REJOINED,        //  dead or gone, and back with a newer incarnation
} shoal_mesh_event_t;

//  "joined", "alive", "suspect", ...
const char *shoal_mesh_event_name(shoal_mesh_event_t event);

typedef struct _shoal_mesh_t shoal_mesh_t;

//  Told of each membership event; NODE_ID and ENDPOINT are borrowed.
typedef void (shoal_mesh_event_fn) (shoal_mesh_event_t event, const char *node_id,
                                    const char *endpoint, void *arg);

//  Told of the reply to a request sent with shoal_mesh_send: REPLY
//  (borrowed) is NULL when none came in time or the mesh is stopping.
typedef void (shoal_mesh_reply_fn) (shoal_mesh_t *mesh, const char *node_id,
                                    const shoal_envelope_t *reply, void *arg);

//  A mesh for the node NODE_ID serving at ENDPOINT, with the node's live
//  SETTINGS (borrowed: reloaded values take effect), the cluster certificate
//  (copied) its DEALERs present, and MEMBERS (borrowed) to remember peers in.
shoal_mesh_t *shoal_mesh_new(const shoal_settings_t *settings, const char *endpoint,
                             zcert_t *cluster, shoal_members_t *members);
void shoal_mesh_destroy(shoal_mesh_t **self_p);

//  Connects to the remembered members and starts joining, with peer readers
//  on LOOP; deferred replies go out on ROUTER (both borrowed). Returns 0 or -1.
int shoal_mesh_start(shoal_mesh_t *self, zloop_t *loop, zsock_t *router);

//  Tells every live peer that this node is leaving (a clean stop).
void shoal_mesh_leave(shoal_mesh_t *self);

//  Time-driven work: join retries, one probe per probe interval, indirect
//  probes, suspect -> dead, request timeouts. Call it from the node's tick.
void shoal_mesh_tick(shoal_mesh_t *self);

//  The reason this node must stop (its id is taken by a live node), or NULL.
const char *shoal_mesh_failure(shoal_mesh_t *self);

bool shoal_mesh_handles(shoal_msg_type_t type);

//  Answers REQUEST. Returns the reply, or NULL when the answer comes later
//  (a ping-req waits for its target): the mesh keeps a copy of ROUTING_ID
//  and sends the reply on the router itself.
shoal_envelope_t *shoal_mesh_handle(shoal_mesh_t *self, const shoal_envelope_t *request,
                                    const shoal_caller_t *caller, zframe_t *routing_id);

//  Adds a subscriber to the events. Returns 0 or -1.
int shoal_mesh_subscribe(shoal_mesh_t *self, shoal_mesh_event_fn *fn, void *arg);

//  Sends REQUEST (taken; its request id is set here) to NODE_ID. FN is called
//  once, with the reply or with NULL after TIMEOUT_MS. Returns 0, or -1 when
//  NODE_ID is no peer (FN is then not called).
int shoal_mesh_send(shoal_mesh_t *self, const char *node_id, shoal_envelope_t **request_p,
                    int64_t timeout_ms, shoal_mesh_reply_fn *fn, void *arg);

//  Ids of the peers currently alive: a new list of strings the caller destroys.
zlistx_t *shoal_mesh_alive(shoal_mesh_t *self);

//  Records how many entries NODE_ID lacked at the last head exchange.
void shoal_mesh_set_lag(shoal_mesh_t *self, const char *node_id, uint64_t lag);

//  The state of peer NODE_ID as this node sees it; false when it is no peer.
bool shoal_mesh_peer_state(shoal_mesh_t *self, const char *node_id, shoal_member_state_t *state);

//  The incarnation this run of the node started with: tells its runs
//  apart (refutations raise the incarnation, not the boot).
uint64_t shoal_mesh_boot(shoal_mesh_t *self);

//  Whether peer NODE_ID may be used for placing (a lock for its holders, a
//  claim moved to it): live and not held back for its lock sweep. True
//  with *BOOT_P (may be NULL) its run's boot; false with WHY saying why not.
bool shoal_mesh_peer_ready(shoal_mesh_t *self, const char *node_id, uint64_t *boot_p, char *why,
                           size_t why_size);

//  The lock sweep of NODE_ID's run BOOT ran here for its INCARNATION: it
//  is no longer held back for it. Returns 0, or -1 when NODE_ID is no peer
//  yet (the sweep is told again).
int shoal_mesh_confirm(shoal_mesh_t *self, const char *node_id, uint64_t incarnation, uint64_t boot);

//  Where this node serves, and where peer NODE_ID does (NULL: no peer).
//  Borrowed.
const char *shoal_mesh_endpoint(shoal_mesh_t *self);
const char *shoal_mesh_peer_endpoint(shoal_mesh_t *self, const char *node_id);

//  Whether the mesh is being destroyed: a reply callback told of no reply
//  now learns nothing about the peer.
bool shoal_mesh_stopping(shoal_mesh_t *self);

//  Number of peers known, this node not included.
size_t shoal_mesh_size(shoal_mesh_t *self);

#endif
