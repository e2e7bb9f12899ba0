/*  shoal_claims: the node's claims, their guests and the claim requests.

    The owner of a claim is its only writer: claims and counters live in its
    store (shoal_claim_store), every change and its counter change one
    batch. Creating a claim appends its owner and epoch 1 to the replicated
    "registry" dataset, from which any node answers lookup. A request for a
    claim this node does not hold answers 404: the client looks the claim
    up and asks its owner.

    States and their legal moves (anything else answers 409 with the state
    the claim is in):

        creating -> running | error | released
        running  -> paused | stopped | moving | error | released
        paused   -> running | stopped | moving | error | released
        moving   -> running | error  (or gone: moved to another node)
        stopped  -> running | error | released
        error    -> running | stopped | released
        released -> (none: its id is never given out again)

    Guests and storage objects: a checkpoint saves a stopped or paused
    claim's guest as a new object of its tenant (the guest actor writes
    it; the object is bound to its name once complete and checksummed),
    and a create from an object makes the guest from one that holds a
    guest's image, copied here first when this node holds none; the guest
    actor checks its checksum as it reads it (shoal_objects.h).

    A tenant sees and touches only its own claims (another's answers 404,
    as if it did not exist) and creates claims only for itself; admins and
    nodes reach every claim.

    The admission counters (counters requests) are read here too: the
    node's and each tenant's stored counters with the reservations incoming
    moves hold. A tenant reads its own tenant's and no other scope (403).

    Guests are reached only through the guest actor (shoal_guests): a
    request that needs its guest is answered later, when the actor
    answers, and the reactor serves everything else meanwhile. While an
    operation that changes a claim's guest (create, start, stop, pause,
    resume, release, a move's steps) is in flight, another state change of
    that claim answers 409 naming the operation in flight, and so does a
    guest call (503 with retry-after when the claim is moving, as during a
    move's final round): the client retries; it never waits on a guest
    held up elsewhere.
    At start (shoal_claims_new) claims are reconciled with the guests that
    actually run, through the guest actor: a guest that died while the node
    was down puts its claim in error with the reason (or is started again,
    with guest/restart_at_start), one still alive is adopted again, and the
    counters are checked against a recount. A request for a claim whose
    guest is still being looked at waits its turn behind the look.
    While the node runs, the death watch (shoal_claims_tick) asks whether
    the guest of each running or paused claim is alive, one claim at a
    time, walking all of them and then resting for guest/watch_interval_ms;
    a dead guest puts its claim in error with the reason, its counters
    changed in the same batch. Moving claims are left to their move, which
    pauses and removes guests on purpose, and a claim with any guest
    operation in flight is looked at on the next walk.
*/
#ifndef SHOAL_CLAIMS_H_INCLUDED
#define SHOAL_CLAIMS_H_INCLUDED

#include "shoal_admission.h"
#include "shoal_auth.h"
#include "shoal_claim_store.h"
#include "shoal_config.h"
#include "shoal_data.h"
#include "shoal_guests.h"
#include "shoal_objects.h"
#include "shoal_oplog.h"
#include "shoal_proto.h"

//  The dataset of claim ownership, ordered by epoch.
#define SHOAL_REGISTRY_DATASET "registry"
//  What a call to a paused or moving guest is told to wait before retrying.
#define SHOAL_CLAIMS_RETRY_AFTER_MS 100

typedef struct _shoal_claims_t shoal_claims_t;

//  Claims of the node ENDPOINT with the live SETTINGS, kept in STORE, with
//  the registry in OPLOG and their guests behind GUESTS (all borrowed);
//  WRITTEN (with ARG) is told of each registry entry written. Asks the
//  guest actor about every claim's guest (the answers come once the
//  reactor runs) and checks the counters against a recount. Returns NULL
//  with *ERROR_P when the claims cannot be read.
shoal_claims_t *shoal_claims_new(const shoal_settings_t *settings, const char *endpoint,
                                 shoal_store_t *store, shoal_oplog_t *oplog, shoal_guests_t *guests,
                                 shoal_data_written_fn *written, void *arg, char **error_p);

//  Answers requests that waited on a guest through ROUTER (borrowed).
void shoal_claims_start(shoal_claims_t *self, zsock_t *router);

//  The storage objects (borrowed) claims start from and checkpoint into:
//  until they are set, a create from an object and a checkpoint answer 503.
void shoal_claims_set_objects(shoal_claims_t *self, shoal_objects_t *objects);
void shoal_claims_destroy(shoal_claims_t **self_p);

bool shoal_claims_handles(shoal_msg_type_t type);

//  The death watch's step: looks at the next few claims' guests when it is
//  time. Called from the node's tick.
void shoal_claims_tick(shoal_claims_t *self);

//  Answers REQUEST from CALLER at ROUTING_ID (borrowed). Returns the reply,
//  or NULL when the reply goes later (it waits on the guest actor).
shoal_envelope_t *shoal_claims_handle(shoal_claims_t *self, const shoal_envelope_t *request,
                                      const shoal_caller_t *caller, zframe_t *routing_id);

//  The admission of this node, for moves to hold reservations with.
shoal_admission_t *shoal_claims_admission(shoal_claims_t *self);

//  The store of claims, counters and move records, for moves.
shoal_claim_store_t *shoal_claims_store(shoal_claims_t *self);


//  Whether a claim may go FROM -> TO: the table above, the one moves check
//  their claim changes against too.
bool shoal_claims_step_legal(shoal_claim_state_t from, shoal_claim_state_t to);

//  Appends RECORD's owner (this node) and epoch to the registry. Returns 0
//  or -1.
int shoal_claims_register(shoal_claims_t *self, const shoal_claim_record_t *record);

//  Whether the guest of moving claim ID is paused (a move's final round):
//  its calls then answer 503, and are served otherwise.
typedef bool (shoal_claims_paused_fn) (const char *id, void *arg);
void shoal_claims_set_paused(shoal_claims_t *self, shoal_claims_paused_fn *fn, void *arg);

//  Reads claim ID as CALLER names it (a tenant's by its name alone too)
//  into RECORD (the caller clears it with shoal_claim_codec.clear).
//  Returns NULL, or the reply to REQUEST to send instead: 404 when this
//  node does not hold it or CALLER may not see it, 500 when it cannot be read.
shoal_envelope_t *shoal_claims_find(shoal_claims_t *self, const shoal_envelope_t *request,
                                    const shoal_caller_t *caller, const char *id,
                                    shoal_claim_record_t *record);

//  Claims the node holds (released ones not counted) of TENANT, or of every
//  tenant when TENANT is NULL; -1 when the counters cannot be read.
int64_t shoal_claims_count(shoal_claims_t *self, const char *tenant);

#endif
