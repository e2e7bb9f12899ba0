/*  shoal_move_source: the source's side of a live move. See
    shoal_moves.h for the steps and shoal_moves_internal.h for the layout.
*/
#include "shoal_moves_internal.h"
#include "shoal_alloc.h"

#include <ctype.h>


void
shoal_moves_out_destroy(void **item_p)
{
    shoal_move_out_t *out = (shoal_move_out_t *) *item_p;
    if (out) {
        if (out->sender) {
            zloop_reader_end(out->owner->loop, zactor_sock(out->sender));
            zactor_destroy(&out->sender);
        }
        zframe_destroy(&out->client);
        shoal_msg_move_codec.clear(&out->move);
        free(out);
        *item_p = NULL;
    }
}

//  Answers the caller still waiting for the admission, if any.
static void
s_out_answer(shoal_moves_t *self, shoal_move_out_t *out, uint32_t status, const char *message)
{
    if (!out->client)
        return;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE, out->client_request_id);
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", message);
    if (status == SHOAL_STATUS_OK)
        shoal_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &out->move);
    shoal_moves_reply_later(self, out->client, &reply);
    shoal_envelope_destroy(&request);
    zframe_destroy(&out->client);
}

//  Tells OUT's inside caller (shoal_moves_begin), if any, how it ended.
static void
s_out_ended(shoal_move_out_t *out, uint32_t status, const char *message)
{
    shoal_moves_ended_fn *ended = out->ended;
    out->ended = NULL;
    if (ended)
        ended(out->ended_arg, out->move.claim_id, status, message, &out->move);
}

//  Writes claim RECORD running again (paused, when MOVE moved a paused one)
//  with MOVE (aborted) in one batch, then has its guest resumed (or kept
//  paused). Returns 0 or -1.
int
shoal_moves_source_restore(shoal_moves_t *self, shoal_move_t *move)
{
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, move->claim_id, &claim, &found))
        return -1;
    if (found && claim.state == SHOAL_CLAIM_MOVING) {
        shoal_claim_record_t next = claim;
        //  A paused claim's move leaves it as it found it: paused.
        next.state = move->paused ? SHOAL_CLAIM_PAUSED : SHOAL_CLAIM_RUNNING;
        int rc = shoal_moves_record_write(self, move, &claim, &next);
        shoal_moves_guest_resume(self, &claim, move);
        shoal_claim_codec.clear(&claim);
        return rc;
    }
    if (found)
        shoal_claim_codec.clear(&claim);
    return shoal_moves_record_write(self, move, NULL, NULL);
}

static shoal_move_out_t *
s_out_for(shoal_moves_t *self, shoal_move_ask_t *ask)
{
    return (shoal_move_out_t *) shoal_moves_move_for(self, self->outgoing, ask);
}

//  How long the guest ran throttled, once it no longer runs so here (it
//  paused for the final round, or the move aborted).
static void
s_throttled_time(shoal_move_out_t *out)
{
    if (out->throttled_at && !out->move.throttled_ms)
        out->move.throttled_ms = (uint64_t) (zclock_mono() - out->throttled_at);
}

//  Auto-converge: the guest actor set the guest's throttle; the sender
//  goes on with its rounds, or fails the move with the reason.
static void
s_throttled(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = answer->cancelled ? NULL : s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_PENDING || !out->sender)
        return;
    shoal_move_t *move = &out->move;
    if (answer->rc) {
        shoal_sender_throttled(out->sender, move->throttle_percent, answer->error);
        return;
    }
    if (!out->throttled_at)
        out->throttled_at = zclock_mono();
    move->throttle_steps++;
    move->throttle_percent = request->throttle;
    zsys_info("moves: %s to %s does not converge (the guest dirties %.1f MB/s, the link moves %.1f MB/s): "
              "step %u holds back %u%% of the guest's writes", move->claim_id, move->to,
              (double) move->dirty_rate / 1e6, (double) move->rate / 1e6, move->throttle_steps, request->throttle);
    shoal_sender_throttled(out->sender, request->throttle, NULL);
}

//  Auto-converge: the sender asks for the guest's next throttle step.
static void
s_throttle(shoal_moves_t *self, shoal_move_out_t *out, uint32_t percent)
{
    shoal_guest_request_t request = { .op = SHOAL_GUEST_THROTTLE, .claim_id = out->move.claim_id,
                                      .driver = out->move.driver, .throttle = percent };
    shoal_guests_submit(self->guests, &request, false, s_throttled, shoal_moves_ask_new(self, &out->move));
}


//  Ends OUT before the point of no return: the record says aborted before
//  the guest resumes, the target is told to drop its copy, the caller
//  hears why. Returns nothing: OUT stays until the target confirms.
void
shoal_moves_out_abort(shoal_moves_t *self, shoal_move_out_t *out, uint32_t status, const char *reason)
{
    shoal_move_t *move = &out->move;
    if (move->state != SHOAL_MOVE_PENDING && move->state != SHOAL_MOVE_FINAL) {
        zsys_error("moves: %s: cannot abort a move that is %s", move->claim_id, shoal_move_state_name(move->state));
        return;
    }
    zsys_warning("moves: %s to %s aborted: %s", move->claim_id, move->to, reason);
    if (out->sender) {
        zloop_reader_end(self->loop, zactor_sock(out->sender));
        zactor_destroy(&out->sender);
    }
    move->state = SHOAL_MOVE_ABORTED;
    shoal_moves_text_set(&move->phase, "aborted");
    shoal_moves_text_set(&move->error, reason);
    move->total_ms = (uint64_t) (zclock_mono() - out->started);
    s_throttled_time(out);
    if (shoal_moves_source_restore(self, move))
        zsys_error("moves: %s: the abort is not journaled; a restart will finish it", move->claim_id);
    //  How long the move kept the guest paused: it runs here again.
    if (out->paused_at)
        move->node_downtime_ms = (uint64_t) (shoal_moves_wall() - out->paused_at);
    out->paused_at = 0;
    out->deadline = 0;
    out->next_try = zclock_mono();
    s_out_answer(self, out, status, reason);
    shoal_metrics_move_ended(self->metrics, move, status);
    shoal_moves_result_keep(self, move);
    s_out_ended(out, status, reason);
    if (!self->stopping && shoal_moves_send(self, move->to, SHOAL_MSG_MOVE_ABORT, move, shoal_moves_abort_done) == 0)
        out->next_try = zclock_mono() + self->settings->move_step_ms;
}

void
shoal_moves_out_finish(shoal_moves_t *self, shoal_move_out_t *out)
{
    shoal_moves_forget(self, SHOAL_MOVE_SOURCE, out->move.claim_id);
}

void
shoal_moves_abort_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_move_out_t *out = s_out_for(ask->self, ask);
    if (out && out->move.state == SHOAL_MOVE_ABORTED && reply && reply->status == SHOAL_STATUS_OK)
        shoal_moves_out_finish(ask->self, out);
    free(ask);
}

//  The claim is gone from here: OUT's result is kept and its record goes.
static void
s_out_done(shoal_moves_t *self, shoal_move_out_t *out)
{
    shoal_move_t *move = &out->move;
    shoal_moves_text_set(&move->phase, "done");
    if (out->paused_at && out->target_started_ms >= (uint64_t) out->paused_at)
        move->node_downtime_ms = out->target_started_ms - (uint64_t) out->paused_at;
    move->guest_downtime_ms = out->target_guest_downtime_ms;
    move->guest_switch_gap_ms = out->target_guest_switch_gap_ms;
    zsys_info("moves: %s moved to %s in %" PRIu64 " ms, %u rounds, %" PRIu64 " bytes, downtime %" PRIu64
              " ms (node) / %" PRIu64 " ms (the guest's across the switch), the guest's longest gap %" PRIu64
              " ms", move->claim_id, move->to, move->total_ms, move->round, move->bytes_sent,
              move->node_downtime_ms, move->guest_switch_gap_ms, move->guest_downtime_ms);
    zsys_info("moves: %s: downtime steps (ms): pause %.1f, to the final round %.1f, final round %.1f "
              "(%" PRIu64 " bytes, target sync %.1f), commit asked at %.1f, commit %.1f, start %.1f",
              move->claim_id, move->pause_us / 1e3, move->final_wait_us / 1e3, move->final_us / 1e3,
              move->final_bytes, move->target_sync_us / 1e3, move->commit_asked_us / 1e3, move->commit_us / 1e3,
              move->start_us / 1e3);
    shoal_metrics_move_ended(self->metrics, move, SHOAL_STATUS_OK);
    shoal_moves_result_keep(self, move);
    s_out_ended(out, SHOAL_STATUS_OK, "moved");
    shoal_moves_out_finish(self, out);
}

//  The guest actor removed the moved guest here: the claim goes with the
//  record's last write.
static void
s_dropped(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = answer->cancelled ? NULL : s_out_for(self, ask);
    free(ask);
    if (!out)
        return;
    out->dropping = false;
    if (answer->rc)
        zsys_error("moves: %s: cannot remove its guest here: %s", request->claim_id, answer->error);
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, request->claim_id, &claim, &found))
        return;
    int rc = found ? shoal_moves_record_write(self, &out->move, &claim, NULL) : 0;
    if (found)
        shoal_claim_codec.clear(&claim);
    if (rc == 0)
        s_out_done(self, out);
}

//  The claim moved: the source drops it, its guest and files (through the
//  guest actor), then its record. TOLD: the target's move, or NULL.
void
shoal_moves_out_drop(shoal_moves_t *self, shoal_move_out_t *out, const shoal_move_t *told)
{
    shoal_move_t *move = &out->move;
    if (out->dropping)
        return;
    if (move->state != SHOAL_MOVE_STARTED) {
        move->state = SHOAL_MOVE_STARTED;
        if (shoal_moves_record_write(self, move, NULL, NULL))
            return;
    }
    //  The move is done when the guest runs on the target: removing the
    //  copy here is not part of it.
    if (!move->total_ms)
        move->total_ms = out->started ? (uint64_t) (zclock_mono() - out->started) : 0;
    if (told && told->updated_ms)
        out->target_started_ms = told->updated_ms;
    if (told && told->guest_downtime_ms)
        out->target_guest_downtime_ms = told->guest_downtime_ms;
    if (told && told->guest_switch_gap_ms)
        out->target_guest_switch_gap_ms = told->guest_switch_gap_ms;
    shoal_fault_point("source", "drop", 0);
    if (out->sender) {
        zloop_reader_end(self->loop, zactor_sock(out->sender));
        zactor_destroy(&out->sender);
    }
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, move->claim_id, &claim, &found))
        return;
    if (!found) {
        s_out_done(self, out);
        return;
    }
    out->dropping = true;
    char *dir = shoal_moves_files_dir(self, move);
    shoal_guest_request_t request = { .op = SHOAL_GUEST_DESTROY, .claim_id = claim.id, .driver = claim.driver,
                                      .dir = dir };
    shoal_guests_submit(self->guests, &request, true, s_dropped, shoal_moves_ask_new(self, move));
    free(dir);
    shoal_claim_codec.clear(&claim);
}

static void s_prepare_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);
static void s_paused_done(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg);
static void s_keys_send(shoal_moves_t *self, shoal_move_out_t *out);

//  The guest actor ran the manager's capture of a round: its files go to
//  the sender, or the move aborts.
static void
s_captured(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = answer->cancelled ? NULL : s_out_for(self, ask);
    free(ask);
    shoal_move_state_t expected = request->final ? SHOAL_MOVE_FINAL : SHOAL_MOVE_PENDING;
    if (!out || out->move.state != expected || !out->sender)
        return;
    if (answer->rc) {
        char reason[MOVES_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "the manager's capture of round %u failed: %s", request->round,
                 answer->error);
        shoal_moves_out_abort(self, out, SHOAL_STATUS_INTERNAL, reason);
        return;
    }
    shoal_sender_files(out->sender, request->round, request->final, answer->files);
}

//  Has the guest actor capture ROUND of OUT's guest (FINAL: the last one,
//  the guest paused) into the move's directory.
static void
s_capture(shoal_moves_t *self, shoal_move_out_t *out, uint32_t round, bool final)
{
    char *dir = shoal_moves_files_dir(self, &out->move);
    shoal_guest_request_t request = { .op = SHOAL_GUEST_MIGRATE_CAPTURE, .claim_id = out->move.claim_id,
                                      .driver = out->move.driver, .dir = dir, .round = round, .final = final };
    shoal_guests_submit(self->guests, &request, true, s_captured, shoal_moves_ask_new(self, &out->move));
    free(dir);
}

//  An event of OUT's sender.
static int
s_sender_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_move_out_t *out = (shoal_move_out_t *) arg;
    shoal_moves_t *self = out->owner;
    shoal_sender_event_t event;
    if (shoal_sender_event(out->sender, &event))
        return 0;
    shoal_move_t *move = &out->move;
    if (event.what == SHOAL_SENDER_CAPTURE) {
        //  The sender wants the next round of a guest its manager moves.
        if (move->state == SHOAL_MOVE_PENDING)
            s_capture(self, out, event.round, false);
        return 0;
    }
    move->round = event.round;
    move->bytes_sent = event.bytes;
    //  A failure carries no figures: the last round's stay, as its reason names them.
    if (event.what != SHOAL_SENDER_FAILED) {
        move->rate = event.rate;
        move->dirty_rate = event.dirty_rate;
        move->estimate_ms = event.estimate_ms;
    }
    switch (event.what) {
        case SHOAL_SENDER_PROGRESS:
            break;
        case SHOAL_SENDER_THROTTLE:
            if (move->state == SHOAL_MOVE_PENDING)
                s_throttle(self, out, event.throttle);
            break;
        case SHOAL_SENDER_READY:
            //  The target rechecks memory before anything pauses.
            shoal_moves_text_set(&move->phase, "final");
            if (shoal_moves_send(self, move->to, SHOAL_MSG_MOVE_PREPARE, move, s_prepare_done))
                shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the target is no longer a peer");
            break;
        case SHOAL_SENDER_DONE:
            move->final_bytes = event.final_bytes;
            move->final_us = event.final_us;
            //  The target holds a durable copy: it asks to commit next.
            shoal_moves_text_set(&move->phase, "committing");
            out->deadline = zclock_mono() + self->settings->move_final_ms;
            break;
        case SHOAL_SENDER_FAILED:
            shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, event.error);
            break;
        case SHOAL_SENDER_CAPTURE:
            break;
    }
    return 0;
}

static void
s_prepare_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_PENDING || !out->sender)
        return;
    char reason[MOVES_MESSAGE_MAX];
    if (!reply || reply->status != SHOAL_STATUS_OK) {
        snprintf(reason, sizeof reason, "the target refused the final round: %s",
                 reply ? reply->message : "no answer");
        shoal_moves_out_abort(self, out, reply ? reply->status : SHOAL_STATUS_UNAVAILABLE, reason);
        return;
    }
    s_keys_send(self, out);
}

//  Has the guest actor pause OUT's guest for the final round.
static void
s_pause(shoal_moves_t *self, shoal_move_out_t *out)
{
    shoal_guest_request_t pause = { .op = SHOAL_GUEST_PAUSE, .claim_id = out->move.claim_id,
                                    .driver = out->move.driver };
    out->pause_asked_us = zclock_usecs();
    shoal_guests_submit(self->guests, &pause, true, s_paused_done, shoal_moves_ask_new(self, &out->move));
}

//  Key hook: the claim's keys reach the target before the guest pauses
//  for the last round (shoal_txn.h, steps 1-2); the pause follows once the
//  target holds them. Both sides write them synced, and a synced write
//  waits behind the disk's writeback: done before the pause, they are no
//  part of the guest's downtime (they were 2-430 ms of it), and the key
//  space is frozen from here as it was from the pause.
static void
s_keys_sent(const char *error, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_PENDING || !out->sender)
        return;
    if (error)
        shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, error);
    else
        s_pause(self, out);
}

static void
s_keys_send(shoal_moves_t *self, shoal_move_out_t *out)
{
    if (!self->txn) {
        s_pause(self, out);
        return;
    }
    shoal_move_ask_t *ask = shoal_moves_ask_new(self, &out->move);
    if (shoal_txn_move_send(self->txn, &out->move, s_keys_sent, ask)) {
        free(ask);
        shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "cannot send the claim's keys to the target");
    }
}

//  The last round goes: the sender harvests it, or, for a guest its manager
//  moves, the guest actor captures it first.
static void
s_final_go(shoal_moves_t *self, shoal_move_out_t *out)
{
    out->move.final_wait_us = (uint64_t) (zclock_usecs() - out->paused_us);
    if (shoal_guests_migrates(self->guests, out->move.driver))
        s_capture(self, out, out->move.round + 1, true);
    else
        zstr_send(out->sender, "FINAL");
}

//  The guest is paused for the final round: journal it, then the rest goes.
static void
s_paused_done(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = answer->cancelled ? NULL : s_out_for(self, ask);
    free(ask);
    //  An abort meanwhile queued the resume behind this pause.
    if (!out || out->move.state != SHOAL_MOVE_PENDING || !out->sender)
        return;
    char reason[MOVES_MESSAGE_MAX];
    shoal_move_t *move = &out->move;
    if (answer->rc) {
        snprintf(reason, sizeof reason, "cannot pause the guest: %s", answer->error);
        shoal_moves_out_abort(self, out, SHOAL_STATUS_INTERNAL, reason);
        return;
    }
    out->paused_at = shoal_moves_wall();
    out->paused_us = zclock_usecs();
    move->pause_us = (uint64_t) (out->paused_us - out->pause_asked_us);
    s_throttled_time(out);
    move->state = SHOAL_MOVE_FINAL;
    if (shoal_moves_record_write_lazy(self, move, NULL, NULL)) {
        move->state = SHOAL_MOVE_PENDING;
        shoal_moves_out_abort(self, out, SHOAL_STATUS_INTERNAL, "cannot journal the final round");
        return;
    }
    s_final_go(self, out);
}

static void s_admit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  Asks OUT's target for admission. A request lost on a connection that
//  went down as it was sent is asked again; the target answers a repeated
//  admission of the same move as it answers the first.
static int
s_admit_ask(shoal_moves_t *self, shoal_move_out_t *out)
{
    return shoal_moves_send_within(self, out->move.to, SHOAL_MSG_MOVE_ADMIT, &out->move, s_admit_done, MOVES_RETRY_MS);
}

static void
s_admit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_PENDING || out->sender)
        return;
    shoal_move_t *move = &out->move;
    char reason[MOVES_MESSAGE_MAX];
    if (!reply && zclock_mono() - out->started < self->settings->move_step_ms && s_admit_ask(self, out) == 0)
        return;
    if (!reply) {
        snprintf(reason, sizeof reason, "node %s did not answer the admission within %" PRId64 " ms", move->to,
                 self->settings->move_step_ms);
        shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, reason);
        return;
    }
    if (reply->status != SHOAL_STATUS_OK) {
        //  A refusal leaves nothing on the target to drop.
        snprintf(reason, sizeof reason, "node %s refused the move: %s", move->to, reply->message);
        shoal_moves_out_abort(self, out, reply->status, reason);
        shoal_moves_out_finish(self, out);
        return;
    }
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    shoal_moves_text_set(&move->stream, answer->stream);
    shoal_moves_text_set(&move->phase, "round");
    char *files = shoal_moves_files_dir(self, move);
    char *dir = files ? NULL : shoal_guests_image_dir(self->guests, move->driver, move->claim_id);
    if (!dir && !files) {
        shoal_moves_out_abort(self, out, SHOAL_STATUS_INTERNAL, "the guest's image is gone");
        return;
    }
    shoal_sender_args_t args = {
        .move_id = move->move_id, .endpoint = move->stream, .cluster = self->cluster,
        .server_key = zcert_public_txt(self->cluster), .image_dir = dir, .files_dir = files,
        .max_downtime_ms = move->max_downtime_ms, .step_timeout_ms = self->settings->move_step_ms,
        .final_timeout_ms = self->settings->move_final_ms,
        .converge = !move->no_converge && shoal_guests_throttles(self->guests, move->driver),
    };
    out->sender = shoal_sender_new(&args);
    free(dir);
    free(files);
    zloop_reader(self->loop, zactor_sock(out->sender), s_sender_readable, out);
    s_out_answer(self, out, SHOAL_STATUS_OK, "admitted");
    zsys_info("moves: %s to %s admitted, streaming to %s", move->claim_id, move->to, move->stream);
}

//  MOVE: from an operator, to this node as the source.
//  A move asked of this node, waiting for the guest actor's read of the
//  guest's image before anything is journaled.
typedef struct {
    shoal_moves_t *self;
    zframe_t *client;                   //  the caller
    uint64_t request_id;                //  its request
    char *to;                           //  the target node
    uint32_t max_downtime_ms;           //  the caller's budget, 0: the node's
    bool no_converge;                   //  abort rather than throttle a guest that outruns the link
    char *claim_id;                     //  the claim
    shoal_moves_ended_fn *ended;        //  an inside caller (no CLIENT), told how it ended
    void *ended_arg;
} s_asked_t;

static void
s_asked_destroy(s_asked_t **asked_p)
{
    if (*asked_p) {
        zframe_destroy(&(*asked_p)->client);
        free((*asked_p)->to);
        free((*asked_p)->claim_id);
        free(*asked_p);
        *asked_p = NULL;
    }
}

//  Why claim CLAIM cannot move to TO now (a reply to REQUEST), or NULL.
static shoal_envelope_t *
s_move_check(shoal_moves_t *self, const shoal_envelope_t *request, const shoal_claim_record_t *claim,
             const char *to)
{
    const char *me = self->settings->node_id;
    //  An aborted move that waits for its target's confirmation does not
    //  hold the claim back: the target asks about it and drops its copy.
    shoal_move_out_t *busy = (shoal_move_out_t *) zhashx_lookup(self->outgoing, claim->id);
    if (busy && busy->move.state == SHOAL_MOVE_ABORTED)
        busy = NULL;
    const char *operation = shoal_guests_busy(self->guests, claim->id);
    shoal_member_state_t state;
    char *dir = shoal_guests_migrates(self->guests, claim->driver) ? shoal_strdup("")
              : shoal_guests_image_dir(self->guests, claim->driver, claim->id);
    shoal_envelope_t *reply = NULL;
    if (busy)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is moving to %s already", claim->id,
                         busy->move.to);
    else
    if (claim->state != SHOAL_CLAIM_RUNNING && claim->state != SHOAL_CLAIM_PAUSED)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is %s: only a running or paused claim "
                                   "moves", claim->id, shoal_claim_state_name(claim->state));
    else
    if (operation)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is busy: its guest's %s is in flight; retry "
                         "when it is done", claim->id, operation);
    else
    if (!dir)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' runs on driver %s, which cannot move it live",
                         claim->id, claim->driver);
    else
    if ((int64_t) shoal_moves_in_flight(self) >= self->settings->move_concurrency) {
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MOVE_CONCURRENCY);
        reply = shoal_moves_refuse(request, SHOAL_STATUS_TOO_MANY, "%zu move(s) in flight on %s, move/concurrency is %" PRId64,
                         shoal_moves_in_flight(self), me, self->settings->move_concurrency);
        reply->retry_after_ms = MOVES_RETRY_MS;
    }
    else
    if (!shoal_mesh_peer_state(self->mesh, to, &state))
        reply = shoal_moves_refuse(request, SHOAL_STATUS_NOT_FOUND, "node '%s' is not a peer of %s", to, me);
    else
    if (state != SHOAL_MEMBER_ALIVE && state != SHOAL_MEMBER_SUSPECT)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_UNAVAILABLE, "peer %s is %s: a move needs it alive", to,
                         shoal_member_state_name(state));
    else {
        //  A peer held back for its lock sweep takes no claim until it ran.
        char why[MOVES_MESSAGE_MAX];
        if (!shoal_mesh_peer_ready(self->mesh, to, NULL, why, sizeof why)) {
            reply = shoal_moves_refuse(request, SHOAL_STATUS_UNAVAILABLE, "%s: retry", why);
            reply->retry_after_ms = MOVES_RETRY_MS;
        }
    }
    free(dir);
    return reply;
}

//  Sends REPLY (taken) to ASKED's caller.
static void
s_asked_answer(s_asked_t *asked, shoal_envelope_t **reply_p)
{
    if (asked->ended) {
        shoal_envelope_t *reply = *reply_p;
        asked->ended(asked->ended_arg, asked->claim_id, reply->status, reply->message ? reply->message : "", NULL);
        asked->ended = NULL;
        shoal_envelope_destroy(reply_p);
    }
    else
        shoal_moves_reply_later(asked->self, asked->client, reply_p);
}

//  The guest actor read the guest's image (its size, and the guest's
//  downtime measure starts again): the move is journaled and begins.
static void
s_move_begin(const shoal_guest_request_t *guest, const shoal_guest_answer_t *answer, void *arg)
{
    s_asked_t *asked = (s_asked_t *) arg;
    shoal_moves_t *self = asked->self;
    if (answer->cancelled || self->stopping) {
        s_asked_destroy(&asked);
        return;
    }
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE, asked->request_id);
    shoal_envelope_t *reply = NULL;
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, guest->claim_id, &claim, &found))
        reply = shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    else
    if (!found || claim.state == SHOAL_CLAIM_RELEASED)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' is not on node %s", guest->claim_id,
                         self->settings->node_id);
    else
    if (answer->rc)
        reply = shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "cannot read the guest's image: %s", answer->error);
    else
        reply = s_move_check(self, request, &claim, asked->to);
    if (reply) {
        if (found)
            shoal_claim_codec.clear(&claim);
        s_asked_answer(asked, &reply);
        shoal_envelope_destroy(&request);
        s_asked_destroy(&asked);
        return;
    }
    shoal_move_out_t *out = (shoal_move_out_t *) zmalloc(sizeof *out);
    out->owner = self;
    out->started = zclock_mono();
    shoal_move_t *move = &out->move;
    zuuid_t *uuid = zuuid_new();
    move->move_id = shoal_strdup(zuuid_str(uuid));
    for (char *c = move->move_id; *c; c++)
        *c = (char) tolower((unsigned char) *c);
    zuuid_destroy(&uuid);
    move->claim_id = shoal_strdup(claim.id);
    move->from = shoal_strdup(self->settings->node_id);
    move->to = shoal_strdup(asked->to);
    move->state = SHOAL_MOVE_PENDING;
    move->role = SHOAL_MOVE_SOURCE;
    move->epoch = claim.epoch;
    move->tenant = shoal_strdup(claim.tenant);
    move->memory_bytes = claim.memory_bytes;
    move->driver = shoal_strdup(claim.driver);
    move->memory_pages = answer->memory_pages;
    move->disk_blocks = answer->disk_blocks;
    move->max_downtime_ms = asked->max_downtime_ms ? asked->max_downtime_ms
                                                   : (uint32_t) self->settings->move_downtime_ms;
    move->started_ms = (uint64_t) shoal_moves_wall();
    move->no_converge = asked->no_converge;
    //  A paused guest moves as one whose rounds find nothing dirty, and
    //  stays paused where it lands (or here, when the move aborts).
    move->paused = claim.state == SHOAL_CLAIM_PAUSED;
    move->phase = shoal_strdup("admitting");
    //  Journaled before anything is sent: the claim is moving from now on.
    shoal_claim_record_t next = claim;
    next.state = SHOAL_CLAIM_MOVING;
    if (shoal_moves_record_write(self, move, &claim, &next)) {
        shoal_claim_codec.clear(&claim);
        shoal_moves_out_destroy((void **) &out);
        reply = shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the move: %s",
                         shoal_claim_store_error(self->store));
        s_asked_answer(asked, &reply);
        shoal_envelope_destroy(&request);
        s_asked_destroy(&asked);
        return;
    }
    shoal_claim_codec.clear(&claim);
    zhashx_update(self->outgoing, move->claim_id, out);
    zsys_info("moves: %s to %s: asking for admission (budget %u ms)", move->claim_id, move->to,
              move->max_downtime_ms);
    shoal_fault_point("source", "admit", 0);
    out->client = asked->client;
    asked->client = NULL;
    out->ended = asked->ended;
    out->ended_arg = asked->ended_arg;
    asked->ended = NULL;
    out->client_request_id = asked->request_id;
    shoal_envelope_destroy(&request);
    s_asked_destroy(&asked);
    if (s_admit_ask(self, out))
        //  The peer went between the checks and the send.
        shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the target is no longer a peer");
}

//  A move asked by ROUTING_ID's caller, or (ENDED set) from inside the node.
static shoal_envelope_t *
s_move_request(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id,
               shoal_moves_ended_fn *ended, void *ended_arg);

//  MOVE: an operator asks this node to move one of its claims. The checks
//  are made here and again once the guest actor has read the image.
shoal_envelope_t *
shoal_moves_move(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    return s_move_request(self, request, routing_id, NULL, NULL);
}

void
shoal_moves_begin(shoal_moves_t *self, const char *claim_id, const char *to, uint32_t max_downtime_ms,
                  shoal_moves_ended_fn *ended, void *arg)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE, 0);
    shoal_move_t *body = (shoal_move_t *) shoal_envelope_new_body(request);
    body->claim_id = shoal_strdup(claim_id);
    body->to = shoal_strdup(to);
    body->max_downtime_ms = max_downtime_ms;
    shoal_envelope_t *reply = s_move_request(self, request, NULL, ended, arg);
    if (reply) {
        ended(arg, claim_id, reply->status, reply->message ? reply->message : "", NULL);
        shoal_envelope_destroy(&reply);
    }
    shoal_envelope_destroy(&request);
}

static shoal_envelope_t *
s_move_request(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id,
               shoal_moves_ended_fn *ended, void *ended_arg)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    const char *me = self->settings->node_id;
    const char *to = body->to ? body->to : "";
    if (!*to)
        return shoal_moves_refuse(request, SHOAL_STATUS_BAD_REQUEST, "a move names its target node");
    if (streq(to, me))
        return shoal_moves_refuse(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s' is on %s already", body->claim_id, me);
    shoal_claim_record_t claim;
    bool found = false;
    if (shoal_moves_claim_get(self, body->claim_id, &claim, &found))
        return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    if (!found || claim.state == SHOAL_CLAIM_RELEASED) {
        if (found)
            shoal_claim_codec.clear(&claim);
        return shoal_moves_refuse(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' is not on node %s", body->claim_id, me);
    }
    shoal_envelope_t *reply = s_move_check(self, request, &claim, to);
    if (reply) {
        shoal_claim_codec.clear(&claim);
        return reply;
    }
    s_asked_t *asked = (s_asked_t *) zmalloc(sizeof *asked);
    asked->self = self;
    asked->client = routing_id ? zframe_dup(routing_id) : NULL;
    asked->claim_id = shoal_strdup(claim.id);
    asked->ended = ended;
    asked->ended_arg = ended_arg;
    asked->request_id = request->request_id;
    asked->to = shoal_strdup(to);
    asked->max_downtime_ms = body->max_downtime_ms;
    asked->no_converge = body->no_converge;
    shoal_guest_request_t guest = { .op = SHOAL_GUEST_IMAGE_INFO, .claim_id = claim.id, .driver = claim.driver };
    shoal_guests_submit(self->guests, &guest, true, s_move_begin, asked);
    shoal_claim_codec.clear(&claim);
    return NULL;
}

//  MOVE_COMMIT: the target's copy is durable; may it start?
shoal_envelope_t *
shoal_moves_commit(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_fault_point("source", "commit-request", 0);
    shoal_move_out_t *out = (shoal_move_out_t *) shoal_moves_move_find(self->outgoing, body->claim_id, body->move_id);
    if (!out)
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "no move %s of claim '%s' on %s: it was aborted",
                        body->move_id, body->claim_id, self->settings->node_id);
    shoal_move_t *move = &out->move;
    if (move->state == SHOAL_MOVE_FINAL) {
        int64_t asked_us = zclock_usecs();
        move->commit_asked_us = out->paused_us ? (uint64_t) (asked_us - out->paused_us) : 0;
        move->target_sync_us = body->target_sync_us;
        move->state = SHOAL_MOVE_COMMITTED;
        if (shoal_moves_record_write(self, move, NULL, NULL)) {
            move->state = SHOAL_MOVE_FINAL;
            return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the commit");
        }
        move->commit_us = (uint64_t) (zclock_usecs() - asked_us);
        shoal_fault_point("source", "commit", 0);
        shoal_moves_text_set(&move->phase, "starting");
        out->deadline = 0;
        out->next_try = zclock_mono() + self->settings->move_step_ms;
    }
    if (move->state != SHOAL_MOVE_COMMITTED && move->state != SHOAL_MOVE_STARTED)
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "move %s of claim '%s' is %s: %s", move->move_id,
                        move->claim_id, shoal_move_state_name(move->state),
                        move->error && *move->error ? move->error : "it cannot commit");
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "committed");
    shoal_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), move);
    return reply;
}

//  MOVE_STARTED: the target runs the guest.
shoal_envelope_t *
shoal_moves_started(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_fault_point("source", "start", 0);
    shoal_move_out_t *out = (shoal_move_out_t *) shoal_moves_move_find(self->outgoing, body->claim_id, body->move_id);
    if (out) {
        if (out->move.state != SHOAL_MOVE_COMMITTED && out->move.state != SHOAL_MOVE_STARTED)
            return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "move %s is %s", out->move.move_id,
                            shoal_move_state_name(out->move.state));
        if (body->start_us)
            out->move.start_us = body->start_us;
        shoal_moves_out_drop(self, out, body);
    }
    //  Unknown: dropped already (a repeated notice).
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "dropped");
}

void
shoal_moves_query_target_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    shoal_move_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || !reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    //  The target adopted the claim: it is the owner, whatever notice got lost.
    if (out->move.state == SHOAL_MOVE_COMMITTED || out->move.state == SHOAL_MOVE_STARTED) {
        if (answer->state == SHOAL_MOVE_ADOPTED)
            shoal_moves_out_drop(self, out, answer);
    }
}

//  MOVE_RESUME: an operator resumes a committed move's guest here.
shoal_envelope_t *
shoal_moves_resume(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, body->claim_id);
    if (!out)
        return shoal_moves_refuse(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' has no move on %s", body->claim_id,
                        self->settings->node_id);
    shoal_move_t *move = &out->move;
    if (move->state == SHOAL_MOVE_PENDING || move->state == SHOAL_MOVE_FINAL) {
        shoal_moves_out_abort(self, out, SHOAL_STATUS_CONFLICT, "aborted by an operator");
        return shoal_envelope_reply(request, SHOAL_STATUS_OK, "the move was aborted; the guest runs on %s",
                                    self->settings->node_id);
    }
    if (move->state != SHOAL_MOVE_COMMITTED)
        return shoal_moves_refuse(request, SHOAL_STATUS_CONFLICT, "move of claim '%s' is %s", move->claim_id,
                        shoal_move_state_name(move->state));
    zsys_warning("moves: %s: an operator resumes it on %s after the commit to %s", move->claim_id,
                 self->settings->node_id, move->to);
    //  Forced: the one path from committed back to aborted.
    move->state = SHOAL_MOVE_FINAL;
    shoal_moves_out_abort(self, out, SHOAL_STATUS_CONFLICT, "resumed on the source by an operator after the commit");
    shoal_envelope_t *reply = shoal_envelope_reply(
        request, SHOAL_STATUS_OK, "the guest runs on %s again; %s will be told the move was aborted when it "
        "returns. If %s started the guest before it was lost, the claim now runs twice until one is released",
        self->settings->node_id, move->to, move->to);
    shoal_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), move);
    return reply;
}
