/*  shoal_drain: empties this node of its claims, live, before maintenance.

    `shoalctl drain NODE` asks NODE itself: it marks itself draining (new
    claims and incoming moves are refused with 503 naming the drain) and
    moves every running or paused claim off to the peers with room for it,
    a few at a time (a slot that frees takes the next claim at once), each
    move the live move of shoal_moves with its budget and its guarantees
    (a paused claim stays paused). A claim that cannot move (no peer has
    room, or its move aborted twice) stays as it was, and the drain says
    why. The mark and the
    drain's record outlive a restart (shoal_drain_store): a drain a crash
    interrupted resumes from it. See the DESIGN note in shoal_drain.c.
*/
#ifndef SHOAL_DRAIN_H_INCLUDED
#define SHOAL_DRAIN_H_INCLUDED

#include <czmq.h>

#include "shoal_auth.h"
#include "shoal_claims.h"
#include "shoal_config.h"
#include "shoal_mesh.h"
#include "shoal_moves.h"
#include "shoal_proto.h"
#include "shoal_store.h"

typedef struct _shoal_drain_t shoal_drain_t;

//  The drain of this node (the live SETTINGS; STORE keeps its record;
//  CLAIMS, MOVES and MESH are how it lists, moves and asks peers; all
//  borrowed). Reads the record: a node marked draining refuses new claims
//  from now on. Returns NULL with *ERROR_P when the record cannot be read.
shoal_drain_t *shoal_drain_new(const shoal_settings_t *settings, shoal_store_t *store, shoal_claims_t *claims,
                               shoal_moves_t *moves, shoal_mesh_t *mesh, char **error_p);
void shoal_drain_destroy(shoal_drain_t **self_p);

//  The node is stopping: what the moves tell from now on is not recorded
//  (the record stays as it was, and a restart resumes from it).
void shoal_drain_stop(shoal_drain_t *self);

//  Time-driven work: settles a drain a restart interrupted, asks the peers
//  for their capacity when a move slot is free, starts moves, ends the
//  drain. Call it from the node's tick.
void shoal_drain_tick(shoal_drain_t *self);

bool shoal_drain_handles(shoal_msg_type_t type);

//  Answers REQUEST from CALLER (drain, undrain and drain status are for
//  operators; capacity for nodes and operators).
shoal_envelope_t *shoal_drain_handle(shoal_drain_t *self, const shoal_envelope_t *request,
                                     const shoal_caller_t *caller);

#endif
