/*  shoal_move_target: the target's side of a live move. See
    shoal_moves.h for the steps and shoal_moves_internal.h for the layout.
*/
#include "shoal_moves_internal.h"
#include "shoal_alloc.h"


void
shoal_moves_in_destroy(void **item_p)
{
    shoal_move_in_t *in = (shoal_move_in_t *) *item_p;
    if (in) {
        zframe_destroy(&in->admitting);
        shoal_msg_move_codec.clear(&in->move);
        free(in);
        *item_p = NULL;
    }
}

//  The guest actor removed what a reception left: the reservation and the
//  record go.
static void
s_in_dropped(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_in_t *in = answer->cancelled ? NULL : (shoal_move_in_t *) shoal_moves_move_for(self, self->incoming, ask);
    free(ask);
    if (!in)
        return;
    if (answer->rc)
        zsys_error("moves: %s: cannot remove the received guest: %s", request->claim_id, answer->error);
    if (in->reserved)
        shoal_admission_unreserve(shoal_claims_admission(self->claims), in->move.tenant, in->move.memory_bytes);
    in->reserved = false;
    //  Key hook: the keys it staged go before its record does
    //  (shoal_txn.h, step 4); a failure leaves them to the next start.
    if (self->txn)
        shoal_txn_move_unstage(self->txn, in->move.claim_id, in->move.move_id);
    shoal_moves_forget(self, SHOAL_MOVE_TARGET, in->move.claim_id);
}

//  Drops what IN received: its files, its reservation, its record.
void
shoal_moves_in_drop(shoal_moves_t *self, shoal_move_in_t *in, const char *reason)
{
    shoal_move_t *move = &in->move;
    if (in->dropping)
        return;
    zsys_warning("moves: %s from %s: dropping what was received: %s", move->claim_id, move->from, reason);
    //  The receiver removes the image it writes, the guest actor whatever
    //  is left of it (after a restart, or a prepare that failed half way):
    //  both may get there, and whichever comes second finds nothing.
    if (in->expecting)
        shoal_receiver_forget(self->receiver, move->move_id, true);
    in->expecting = false;
    in->dropping = true;
    char *dir = shoal_moves_files_dir(self, move);
    shoal_guest_request_t request = { .op = SHOAL_GUEST_DESTROY, .claim_id = move->claim_id, .driver = move->driver,
                                      .dir = dir };
    shoal_guests_submit(self->guests, &request, true, s_in_dropped, shoal_moves_ask_new(self, move));
    free(dir);
}

static shoal_move_in_t *
s_in_for(shoal_moves_t *self, shoal_move_ask_t *ask)
{
    return (shoal_move_in_t *) shoal_moves_move_for(self, self->incoming, ask);
}

static void s_started_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  Tells the source that IN's guest runs here.
static void
s_in_tell_started(shoal_moves_t *self, shoal_move_in_t *in)
{
    in->next_try = zclock_mono() + MOVES_RETRY_MS;
    in->asking = true;
    if (shoal_moves_send(self, in->move.from, SHOAL_MSG_MOVE_STARTED, &in->move, s_started_done))
        in->asking = false;
}

//  The guest actor started the received guest (or found it running): the
//  claim runs here, the registry names this node, the source is told.
static void
s_in_guest_started(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_in_t *in = answer->cancelled ? NULL : (shoal_move_in_t *) shoal_moves_move_for(self, self->incoming, ask);
    free(ask);
    if (!in)
        return;
    in->asking = false;
    shoal_move_t *move = &in->move;
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, move->claim_id, &claim, &found) || !found)
        return;
    if (claim.state == SHOAL_CLAIM_MOVING) {
        if (answer->rc)
            zsys_error("moves: %s: the received guest does not start: %s", claim.id, answer->error);
        shoal_claim_record_t next = claim;
        next.state = answer->rc ? SHOAL_CLAIM_ERROR : move->paused ? SHOAL_CLAIM_PAUSED : SHOAL_CLAIM_RUNNING;
        next.error = answer->rc ? (char *) answer->error : NULL;
        move->guest_downtime_ms = answer->rc ? 0 : answer->guest_downtime_ms;
        move->guest_switch_gap_ms = answer->rc ? 0 : answer->guest_switch_gap_ms;
        if (shoal_moves_record_write(self, move, &claim, &next) == 0) {
            claim.state = next.state;
            if (shoal_claims_register(self->claims, &claim))
                zsys_error("moves: %s: cannot register this node as its owner", claim.id);
        }
        zsys_info("moves: %s from %s %s here (epoch %" PRIu64 ")", claim.id, move->from,
                  move->paused ? "is paused" : "runs", claim.epoch);
    }
    //  The source reads the node's downtime from when the guest started.
    if (answer->started_ms)
        move->updated_ms = (uint64_t) answer->started_ms;
    //  To the guest started, not to the first tick the adoption waits for
    //  (in ms: the start's time is the guest actor's wall clock).
    if (answer->started_ms && in->committed_ms && answer->started_ms >= in->committed_ms)
        move->start_us = (uint64_t) (answer->started_ms - in->committed_ms) * 1000;
    shoal_claim_codec.clear(&claim);
    s_in_tell_started(self, in);
}

//  The claim is this node's now: the reservation becomes the claim (one
//  batch with the record), the guest actor starts the guest, the registry
//  names this node.
void
shoal_moves_in_adopt(shoal_moves_t *self, shoal_move_in_t *in)
{
    shoal_move_t *move = &in->move;
    shoal_fault_point("target", "commit", 0);
    shoal_claim_record_t existing;
    bool found = false;
    if (shoal_moves_claim_get(self, move->claim_id, &existing, &found))
        return;
    shoal_claim_record_t claim = { 0 };
    if (found)
        claim = existing;
    else {
        claim.id = shoal_strdup(move->claim_id);
        claim.tenant = shoal_strdup(move->tenant);
        claim.state = SHOAL_CLAIM_MOVING;
        claim.memory_bytes = move->memory_bytes;
        claim.driver = shoal_strdup(move->driver);
        claim.epoch = move->epoch + 1;
        claim.created_ms = move->started_ms;
        move->state = SHOAL_MOVE_ADOPTED;
        if (shoal_moves_record_write_lazy(self, move, NULL, &claim)) {
            move->state = SHOAL_MOVE_RECEIVED;
            shoal_claim_codec.clear(&claim);
            return;
        }
        if (in->reserved)
            shoal_admission_unreserve(shoal_claims_admission(self->claims), move->tenant, move->memory_bytes);
        in->reserved = false;
    }
    //  Key hook: the keys the move brought are the claim's before it serves
    //  (shoal_txn.h, step 3); a failure is retried with the adoption.
    if (self->txn && shoal_txn_move_install(self->txn, move->claim_id)) {
        shoal_claim_codec.clear(&claim);
        return;
    }
    if (in->expecting) {
        shoal_receiver_forget(self->receiver, move->move_id, false);
        in->expecting = false;
    }
    if (claim.state == SHOAL_CLAIM_MOVING) {
        shoal_fault_point("target", "start", 0);
        //  Asking: the tick does not adopt again while the guest starts.
        in->asking = true;
        //  A guest its manager moves is made from the round files, then runs.
        char *dir = shoal_moves_files_dir(self, move);
        //  A paused claim's guest is made and stays paused.
        shoal_guest_request_t request = { .op = dir ? SHOAL_GUEST_MIGRATE_RECEIVE : SHOAL_GUEST_ADOPT,
                                          .claim_id = claim.id, .driver = claim.driver, .dir = dir,
                                          .paused = move->paused };
        shoal_guests_submit(self->guests, &request, true, s_in_guest_started, shoal_moves_ask_new(self, move));
        free(dir);
    }
    else
        s_in_tell_started(self, in);
    shoal_claim_codec.clear(&claim);
}

static void
s_started_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in)
        return;
    in->asking = false;
    if (reply && reply->status == SHOAL_STATUS_OK)
        shoal_moves_forget(self, SHOAL_MOVE_TARGET, in->move.claim_id);
}

static void
s_commit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in || in->move.state != SHOAL_MOVE_RECEIVED)
        return;
    in->asking = false;
    if (!reply)
        return;     //  asked again from the tick: a commit is answered the same way twice
    if (reply->status == SHOAL_STATUS_OK) {
        in->committed_ms = shoal_moves_wall();
        shoal_moves_in_adopt(self, in);
    }
    else
    if (reply->status == SHOAL_STATUS_CONFLICT)
        shoal_moves_in_drop(self, in, reply->message);
}

//  Asks the source to commit IN.
static void
s_in_ask_commit(shoal_moves_t *self, shoal_move_in_t *in)
{
    in->next_try = zclock_mono() + MOVES_RETRY_MS;
    in->asking = true;
    shoal_fault_point("target", "commit-request", 0);
    if (shoal_moves_send(self, in->move.from, SHOAL_MSG_MOVE_COMMIT, &in->move, s_commit_done))
        in->asking = false;
}

static void s_in_prepared(shoal_moves_t *self, shoal_move_in_t *in, const char *error);

//  An event of the receiver.
int
shoal_moves_receiver_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_moves_t *self = (shoal_moves_t *) arg;
    shoal_receiver_event_t event;
    if (shoal_receiver_event(self->receiver, &event))
        return 0;
    shoal_move_in_t *in = NULL;
    for (shoal_move_in_t *each = (shoal_move_in_t *) zhashx_first(self->incoming); each; each = (shoal_move_in_t *) zhashx_next(self->incoming))
        if (shoal_moves_same_move(&each->move, event.move_id))
            in = each;
    if (!in || in->move.state != SHOAL_MOVE_RECEIVING)
        return 0;
    if (event.prepared) {
        if (in->admitting)
            s_in_prepared(self, in, event.error);
        return 0;
    }
    if (*event.error) {
        shoal_moves_in_drop(self, in, event.error);
        return 0;
    }
    //  Chunks arriving are progress: the source is given up on only once
    //  it sent nothing for the step timeout, however long its round.
    in->deadline = zclock_mono() + self->settings->move_step_ms;
    if (event.progress || !event.final)
        return 0;
    shoal_fault_point("target", "receive", event.round);
    in->move.state = SHOAL_MOVE_RECEIVED;
    in->move.round = event.round;
    in->move.target_sync_us = event.sync_us;
    if (shoal_moves_record_write_lazy(self, &in->move, NULL, NULL)) {
        shoal_moves_in_drop(self, in, "cannot journal the reception");
        return 0;
    }
    s_in_ask_commit(self, in);
    return 0;
}

//  MOVE_ADMIT: a source asks this node to take a claim.
shoal_envelope_t *
shoal_moves_admit(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    const char *id = body->claim_id;
    const char *tenant = body->tenant ? body->tenant : "";
    if (!*tenant || !body->move_id || !*body->move_id || !body->from || !*body->from)
        return shoal_moves_refuse(request, SHOAL_STATUS_BAD_REQUEST, "an admission names the move, its source and tenant");
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, id, &claim, &found))
        return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    if (found) {
        shoal_claim_codec.clear(&claim);
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim id '%s' is taken on %s", id, self->settings->node_id);
    }
    shoal_move_in_t *again = (shoal_move_in_t *) zhashx_lookup(self->incoming, id);
    if (again && shoal_moves_same_move(&again->move, body->move_id) && again->admitting) {
        //  Asked again while the image is being made: the answer goes to
        //  the latest request.
        zframe_destroy(&again->admitting);
        again->admitting = zframe_dup(routing_id);
        again->admit_request_id = request->request_id;
        return NULL;
    }
    if (again && shoal_moves_same_move(&again->move, body->move_id) && again->move.state == SHOAL_MOVE_RECEIVING) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "admitted");
        shoal_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &again->move);
        return reply;
    }
    if (again || zhashx_lookup(self->outgoing, id))
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is moving already", id);
    if ((int64_t) shoal_moves_in_flight(self) >= self->settings->move_concurrency) {
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MOVE_CONCURRENCY);
        shoal_envelope_t *reply = shoal_moves_refuse(request, SHOAL_STATUS_TOO_MANY,
                                           "%zu move(s) in flight on %s, move/concurrency is %" PRId64,
                                           shoal_moves_in_flight(self), self->settings->node_id,
                                           self->settings->move_concurrency);
        reply->retry_after_ms = MOVES_RETRY_MS;
        return reply;
    }
    const char *driver = body->driver ? body->driver : "";
    char *missing = shoal_guests_driver_missing(self->guests, driver);
    char *files = missing ? NULL : shoal_moves_files_dir(self, body);
    char *dir = missing || files ? files : shoal_guests_image_dir(self->guests, driver, id);
    if (!dir) {
        shoal_envelope_t *reply = shoal_moves_refuse(request, SHOAL_STATUS_UNAVAILABLE, "%s",
                                           missing ? missing : "this driver cannot receive a live move");
        free(missing);
        return reply;
    }
    char message[MOVES_MESSAGE_MAX];
    shoal_admission_t *admission = shoal_claims_admission(self->claims);
    uint32_t status = shoal_admission_reserve(admission, tenant, body->memory_bytes, message, sizeof message);
    if (status != SHOAL_STATUS_OK) {
        free(dir);
        return shoal_moves_refuse(request, status, "%s", message);
    }
    shoal_move_in_t *in = (shoal_move_in_t *) zmalloc(sizeof *in);
    shoal_move_copy(&in->move, body);
    in->move.role = SHOAL_MOVE_TARGET;
    in->move.state = SHOAL_MOVE_RECEIVING;
    shoal_moves_text_set(&in->move.to, self->settings->node_id);
    shoal_moves_text_set(&in->move.stream, shoal_receiver_endpoint(self->receiver));
    in->reserved = true;
    in->deadline = zclock_mono() + self->settings->move_step_ms;
    //  Journaled before any file is made: a restart finds what to remove.
    if (shoal_moves_record_write(self, &in->move, NULL, NULL)) {
        shoal_admission_unreserve(admission, tenant, body->memory_bytes);
        shoal_moves_in_destroy((void **) &in);
        free(dir);
        return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the reception: %s",
                        shoal_claim_store_error(self->store));
    }
    //  The image is made (sparse, checked to fit) by the receiver, which
    //  owns the file from then on: the answer goes out when it is ready.
    if (files)
        shoal_receiver_prepare_files(self->receiver, in->move.move_id, dir);
    else
        shoal_receiver_prepare(self->receiver, in->move.move_id, dir, self->settings->guest_memory_dir,
                               body->memory_bytes,
                               body->disk_blocks * SHOAL_GUESTS_PAGE_BYTES, body->memory_pages, body->disk_blocks);
    free(dir);
    in->expecting = true;
    in->admitting = zframe_dup(routing_id);
    in->admit_request_id = request->request_id;
    zhashx_insert(self->incoming, id, in);
    return NULL;
}

//  The receiver made IN's image: the admission is answered.
static void
s_in_prepared(shoal_moves_t *self, shoal_move_in_t *in, const char *error)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE_ADMIT, in->admit_request_id);
    shoal_envelope_t *reply = NULL;
    zframe_t *source = in->admitting;
    in->admitting = NULL;
    if (*error) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", error);
        shoal_moves_in_drop(self, in, error);
    }
    else {
        zsys_info("moves: %s from %s admitted (%" PRIu64 " bytes)", in->move.claim_id, in->move.from,
                  in->move.memory_bytes);
        shoal_fault_point("target", "admit", 0);
        in->deadline = zclock_mono() + self->settings->move_step_ms;
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "admitted");
        shoal_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &in->move);
    }
    shoal_moves_reply_later(self, source, &reply);
    zframe_destroy(&source);
    shoal_envelope_destroy(&request);
}

//  MOVE_PREPARE: memory again, before the source pauses the guest.
shoal_envelope_t *
shoal_moves_prepare(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_move_in_t *in = (shoal_move_in_t *) shoal_moves_move_find(self->incoming, body->claim_id, body->move_id);
    if (!in || in->move.state != SHOAL_MOVE_RECEIVING)
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "no reception of move %s here", body->move_id);
    char message[MOVES_MESSAGE_MAX];
    uint32_t status = shoal_admission_recheck_memory(shoal_claims_admission(self->claims), in->move.tenant,
                                                     in->move.memory_bytes, message, sizeof message);
    if (status != SHOAL_STATUS_OK)
        return shoal_moves_refuse(request, status, "%s", message);
    in->deadline = zclock_mono() + self->settings->move_step_ms;
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "ready");
}

//  MOVE_ABORT: the source gave up; drop what was received.
shoal_envelope_t *
shoal_moves_abort(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_move_in_t *in = (shoal_move_in_t *) shoal_moves_move_find(self->incoming, body->claim_id, body->move_id);
    if (in) {
        if (in->move.state == SHOAL_MOVE_ADOPTED)
            return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' runs on %s already", body->claim_id,
                            self->settings->node_id);
        shoal_moves_in_drop(self, in, body->error && *body->error ? body->error : "the source aborted the move");
    }
    else
    if (self->txn && body->move_id && *body->move_id)
        //  Keys that arrived after the reception was dropped.
        shoal_txn_move_unstage(self->txn, body->claim_id, body->move_id);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "dropped");
}

void
shoal_moves_query_source_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in)
        return;
    in->asking = false;
    if (!reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    if (answer->state == SHOAL_MOVE_COMMITTED || answer->state == SHOAL_MOVE_STARTED)
        shoal_moves_in_adopt(self, in);
    else
    if (answer->state == SHOAL_MOVE_FINAL && in->move.state == SHOAL_MOVE_RECEIVED)
        s_in_ask_commit(self, in);
    else {
        char reason[MOVES_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "the source says the move is %s", shoal_move_state_name(answer->state));
        shoal_moves_in_drop(self, in, reason);
    }
}
