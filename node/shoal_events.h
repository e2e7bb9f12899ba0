/*  shoal_events: the node's stream of claim, move and membership events.

    Each event gets the next number of the node's sequence, which outlives
    restarts and crashes: no number is given to two events, even when the
    process is killed (kill -9) or the machine loses power. Watchers
    (MSG_WATCH over the node's CURVE router, so only admitted keys watch)
    get each event that passes their filter as it happens, each with the
    number of the last event that watcher was sent (previous_seq), so a
    watcher knows it lost nothing even when its filter skips numbers (a
    tenant's key sees only its own tenant's claims and moves, and no
    membership). A watcher renews its watch every few seconds and is
    forgotten when it stops; one that comes back naming the last number it
    saw gets what it missed replayed, across a restart or a crash of the
    node too, from the last events/kept events the node keeps, and is told
    which numbers are no longer kept. See the DESIGN note in
    shoal_events.c for how the numbers survive a crash.
*/
#ifndef SHOAL_EVENTS_H_INCLUDED
#define SHOAL_EVENTS_H_INCLUDED

#include <czmq.h>

#include "shoal_auth.h"
#include "shoal_claim_store.h"
#include "shoal_mesh.h"
#include "shoal_proto.h"

//  Events kept for replay, unless events/kept says otherwise.
#define SHOAL_EVENTS_KEPT 4096
//  Numbers reserved ahead by one synced write of DATA_DIR/events.seq.
#define SHOAL_EVENTS_RESERVE 1024
//  A watcher not heard from for this long is forgotten.
#define SHOAL_WATCH_LEASE_MS 15000

typedef struct _shoal_events_t shoal_events_t;

//  The events of node NODE_ID, the last KEPT of them kept under DATA_DIR,
//  sent on ROUTER (borrowed). Returns NULL with *ERROR_P when the kept
//  events or the reserved numbers cannot be read or written.
shoal_events_t *shoal_events_new(const char *data_dir, const char *node_id, size_t kept, zsock_t *router,
                                 char **error_p);
void shoal_events_destroy(shoal_events_t **self_p);

//  The claim store's observer (see shoal_claim_store_observer_fn).
void shoal_events_store_changed(const shoal_claim_record_t *previous, const shoal_claim_record_t *record,
                                const shoal_move_t *move, shoal_move_role_t deleted_role,
                                const char *deleted_claim, void *arg);

//  A subscriber to the mesh's events.
void shoal_events_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg);

bool shoal_events_handles(shoal_msg_type_t type);

//  Answers a watch from CALLER at ROUTING_ID: the reply, then what it
//  missed, go out on the router from here; returns NULL then. Returns a
//  reply only for a request it refuses.
shoal_envelope_t *shoal_events_handle(shoal_events_t *self, const shoal_envelope_t *request,
                                      const shoal_caller_t *caller, zframe_t *routing_id);

//  Forgets watchers whose lease ran out. Call it from the node's tick.
void shoal_events_tick(shoal_events_t *self);

//  The last sequence number given out (0: none yet).
uint64_t shoal_events_last_seq(shoal_events_t *self);

#endif
