/*  shoal_moves: both sides of a live move. See shoal_moves.h.

    All of it runs on the node's reactor; the bytes go through the sender
    and receiver actors of shoal_transfer. An outgoing move is an s_out_t
    (source), an incoming one an s_in_t (target), each keyed by claim id and
    holding its record as stored. Requests to the other side go through the
    mesh; their answers come back to callbacks that find the move again by
    claim and move id, so an answer for a move that ended meanwhile is
    dropped.
*/
#include "shoal_moves.h"
#include "shoal_claim_store.h"
#include "shoal_fault.h"
#include "shoal_metrics.h"
#include "shoal_image.h"
#include "shoal_transfer.h"

#include <ctype.h>

#define MOVES_MESSAGE_MAX 512
//  How often a side retries a request the other side did not answer.
#define MOVES_RETRY_MS 1000
//  How long a finished move's result stays for `move status`.
#define MOVES_RESULT_TTL_MS (3600 * 1000)
//  How long the target waits for a started guest's first tick.
#define MOVES_TICK_WAIT_MS 500

struct _shoal_moves_t {
    const shoal_settings_t *settings;   //  live settings (borrowed)
    shoal_claims_t *claims;             //  borrowed
    shoal_claim_store_t *store;         //  the claims' store (borrowed)
    shoal_mesh_t *mesh;                 //  borrowed
    zcert_t *cluster;                   //  presented by senders
    shoal_receiver_t *receiver;         //  this node's move receiver
    zloop_t *loop;                      //  the node's reactor (borrowed)
    zsock_t *router;                    //  for late replies (borrowed)
    zhashx_t *outgoing;                 //  claim id -> s_out_t
    zhashx_t *incoming;                 //  claim id -> s_in_t
    zhashx_t *results;                  //  claim id -> shoal_move_t of the last finished move
    shoal_move_unreadables_t unreadable;    //  move records recovery could not read: they wait for an operator
    bool stopping;                      //  the node is stopping: answers are dropped
    shoal_metrics_t *metrics;           //  counts moves and refusals (borrowed; may be NULL)
    shoal_txn_t *txn;                   //  the claims' keys, sent in the final step (borrowed; NULL: none)
};

//  An outgoing move (this node is the source).
typedef struct {
    shoal_move_t move;                  //  the record, with its progress (first: s_move_for)
    shoal_moves_t *owner;
    zactor_t *sender;                   //  NULL once the transfer ended, or after a restart
    zframe_t *client;                   //  the caller waiting for the admission, or NULL
    uint64_t client_request_id;
    int64_t deadline;                   //  monotonic ms the current step must end by (0: none)
    int64_t next_try;                   //  monotonic ms of the next retry towards the target
    int64_t paused_at;                  //  wall ms the guest paused at (0: it runs)
    int64_t started;                    //  monotonic ms the move started at
    bool target_dropped;                //  an aborted move's target said it dropped its copy
} s_out_t;

//  An incoming move (this node is the target).
typedef struct {
    shoal_move_t move;                  //  the reception record (first: s_move_for)
    bool reserved;                      //  a reservation is held for it
    bool expecting;                     //  the receiver writes its chunks
    int64_t deadline;                   //  monotonic ms by which the source must show progress
    int64_t next_try;                   //  monotonic ms of the next request to the source
    bool asking;                        //  a request to the source is in flight
    zframe_t *admitting;                //  the source waiting for the admission, or NULL
    uint64_t admit_request_id;
} s_in_t;

//  What a callback needs to find its move again.
typedef struct {
    shoal_moves_t *self;
    char claim_id[SHOAL_KV_KEY_MAX + 1];
    char move_id[64];
} s_ask_t;

static int64_t
s_wall(void)
{
    return zclock_time();
}

//  A deep copy of MOVE into COPY, through its codec.
static void
s_move_copy(shoal_move_t *copy, const shoal_move_t *move)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[MOVES_MESSAGE_MAX];
    memset(copy, 0, sizeof *copy);
    if (shoal_msg_move_codec.encode(move, &bytes, &size, error, sizeof error) == 0)
        shoal_msg_move_codec.decode(bytes, size, copy, error, sizeof error);
    free(bytes);
}

static void
s_text_set(char **field, const char *text)
{
    free(*field);
    *field = strdup(text ? text : "");
}

static s_ask_t *
s_ask_new(shoal_moves_t *self, const shoal_move_t *move)
{
    s_ask_t *ask = (s_ask_t *) zmalloc(sizeof *ask);
    ask->self = self;
    snprintf(ask->claim_id, sizeof ask->claim_id, "%s", move->claim_id);
    snprintf(ask->move_id, sizeof ask->move_id, "%s", move->move_id ? move->move_id : "");
    return ask;
}

static bool
s_same_move(const shoal_move_t *move, const char *move_id)
{
    return move->move_id && streq(move->move_id, move_id);
}

//  Writes MOVE as its role's record, with the claim change PREVIOUS ->
//  RECORD in the same batch (both may be NULL), synced unless LAZY.
//  Returns 0 or -1 (logged).
static int
s_record_store(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
               const shoal_claim_record_t *record, bool lazy)
{
    move->updated_ms = (uint64_t) s_wall();
    if (shoal_claim_store_change(self->store, previous, record, move, !lazy)) {
        zsys_error("moves: %s: cannot write its %s record as %s: %s", move->claim_id,
                   move->role == SHOAL_MOVE_SOURCE ? "source" : "target", shoal_move_state_name(move->state),
                   shoal_claim_store_error(self->store));
        return -1;
    }
    return 0;
}

static int
s_record_write(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
               const shoal_claim_record_t *record)
{
    return s_record_store(self, move, previous, record, false);
}

//  The same, not synced: for the steps inside the downtime that a machine
//  crash losing them leaves recoverable as before. A synced commit waits
//  behind the file system's writeback, up to 0.9 s here while the images
//  of a 2 GiB move were written back; the one that must be synced inside
//  the downtime is the source's commit, and it carries these with it.
//    - final: a source that restarts pending aborts and resumes its guest,
//      as it does from final.
//    - received, adopted: a target that restarts receiving asks the source
//      and adopts the copy if the source committed, as it does from these.
static int
s_record_write_lazy(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
                    const shoal_claim_record_t *record)
{
    return s_record_store(self, move, previous, record, true);
}

//  Reads claim ID. Returns 0 with *FOUND, or -1 (logged).
static int
s_claim_get(shoal_moves_t *self, const char *id, shoal_claim_record_t *record, bool *found)
{
    memset(record, 0, sizeof *record);
    if (shoal_claim_store_get(self->store, id, record, found)) {
        zsys_error("moves: cannot read claim %s: %s", id, shoal_claim_store_error(self->store));
        return -1;
    }
    return 0;
}

//  Sends a move request of TYPE about MOVE to NODE; FN gets the answer, or
//  NULL after TIMEOUT_MS. Returns 0, or -1 when NODE is no peer (FN is not
//  called).
static int
s_send_within(shoal_moves_t *self, const char *node, shoal_msg_type_t type, const shoal_move_t *move,
              shoal_mesh_reply_fn *fn, int64_t timeout_ms)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_move_t *body = (shoal_move_t *) shoal_envelope_new_body(request);
    s_move_copy(body, move);
    s_ask_t *ask = fn ? s_ask_new(self, move) : NULL;
    if (shoal_mesh_send(self->mesh, node, &request, timeout_ms, fn, ask)) {
        shoal_envelope_destroy(&request);
        free(ask);
        return -1;
    }
    return 0;
}

static int
s_send(shoal_moves_t *self, const char *node, shoal_msg_type_t type, const shoal_move_t *move,
       shoal_mesh_reply_fn *fn)
{
    return s_send_within(self, node, type, move, fn, self->settings->move_step_ms);
}

//  Sends REPLY (taken) to the caller at ROUTING_ID.
static void
s_reply_later(shoal_moves_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p)
{
    char error[MOVES_MESSAGE_MAX];
    zmsg_t *msg = shoal_envelope_encode(*reply_p, error, sizeof error);
    if (msg) {
        zframe_t *to = zframe_dup(routing_id);
        zmsg_prepend(msg, &to);
        zmsg_send(&msg, self->router);
    }
    else
        zsys_error("moves: cannot encode a late reply: %s", error);
    shoal_envelope_destroy(reply_p);
}

//  Moves that count against move/concurrency: an aborted one only waits
//  for its target to confirm, and does not.
static size_t
s_in_flight(shoal_moves_t *self)
{
    size_t count = zhashx_size(self->incoming);
    for (const s_out_t *out = (const s_out_t *) zhashx_first(self->outgoing); out;
         out = (const s_out_t *) zhashx_next(self->outgoing))
        if (out->move.state != SHOAL_MOVE_ABORTED)
            count++;
    return count;
}

//  Keeps a finished move's record for `move status`.
static void
s_result_keep(shoal_moves_t *self, const shoal_move_t *move)
{
    shoal_move_t *copy = (shoal_move_t *) zmalloc(sizeof *copy);
    s_move_copy(copy, move);
    copy->done = true;
    zhashx_update(self->results, move->claim_id, copy);
}

static void
s_result_destroy(void **item_p)
{
    if (*item_p) {
        shoal_msg_move_codec.clear(*item_p);
        free(*item_p);
        *item_p = NULL;
    }
}

// ---------------------------------------------------------------------------
//  Source

static void
s_out_destroy(void **item_p)
{
    s_out_t *out = (s_out_t *) *item_p;
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
s_out_answer(shoal_moves_t *self, s_out_t *out, uint32_t status, const char *message)
{
    if (!out->client)
        return;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE, out->client_request_id);
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", message);
    if (status == SHOAL_STATUS_OK)
        s_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &out->move);
    s_reply_later(self, out->client, &reply);
    shoal_envelope_destroy(&request);
    zframe_destroy(&out->client);
}

//  Resumes the guest of claim RECORD if it is paused, and writes the claim
//  running again with MOVE (aborted) in one batch. Returns 0 or -1.
static int
s_source_restore(shoal_moves_t *self, shoal_move_t *move)
{
    shoal_claim_record_t claim;
    bool found = false;
    if (s_claim_get(self, move->claim_id, &claim, &found))
        return -1;
    if (found && claim.state == SHOAL_CLAIM_MOVING) {
        char *error = NULL;
        shoal_driver_t *driver = shoal_claims_driver(self->claims, claim.driver, &error);
        //  SIGCONT to a guest that runs is harmless: resume whatever the
        //  record says, so a crash between pause and journal leaves none paused.
        if (driver && driver->ops->alive(driver, claim.id, NULL) && driver->ops->resume(driver, claim.id, &error))
            zsys_error("moves: %s: cannot resume its guest: %s", claim.id, error);
        free(error);
        shoal_claim_record_t next = claim;
        next.state = SHOAL_CLAIM_RUNNING;
        int rc = s_record_write(self, move, &claim, &next);
        shoal_claim_codec.clear(&claim);
        return rc;
    }
    if (found)
        shoal_claim_codec.clear(&claim);
    return s_record_write(self, move, NULL, NULL);
}

//  The move ASK is about in MOVES (outgoing or incoming; both hold items
//  that start with their record), or NULL when it ended meanwhile.
static void *
s_move_find(zhashx_t *moves, const char *claim_id, const char *move_id)
{
    void *item = zhashx_lookup(moves, claim_id);
    return item && s_same_move((const shoal_move_t *) item, move_id ? move_id : "") ? item : NULL;
}

static void *
s_move_for(shoal_moves_t *self, zhashx_t *moves, s_ask_t *ask)
{
    return self->stopping ? NULL : s_move_find(moves, ask->claim_id, ask->move_id);
}

static s_out_t *
s_out_for(shoal_moves_t *self, s_ask_t *ask)
{
    return (s_out_t *) s_move_for(self, self->outgoing, ask);
}

static void s_abort_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  Ends OUT before the point of no return: the record says aborted before
//  the guest resumes, the target is told to drop its copy, the caller
//  hears why. Returns nothing: OUT stays until the target confirms.
static void
s_out_abort(shoal_moves_t *self, s_out_t *out, uint32_t status, const char *reason)
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
    s_text_set(&move->phase, "aborted");
    s_text_set(&move->error, reason);
    move->total_ms = (uint64_t) (zclock_mono() - out->started);
    if (s_source_restore(self, move))
        zsys_error("moves: %s: the abort is not journaled; a restart will finish it", move->claim_id);
    //  How long the move kept the guest paused: it runs here again.
    if (out->paused_at)
        move->node_downtime_ms = (uint64_t) (s_wall() - out->paused_at);
    out->paused_at = 0;
    out->deadline = 0;
    out->next_try = zclock_mono();
    s_out_answer(self, out, status, reason);
    shoal_metrics_move_ended(self->metrics, move, status);
    s_result_keep(self, move);
    if (!self->stopping && s_send(self, move->to, SHOAL_MSG_MOVE_ABORT, move, s_abort_done) == 0)
        out->next_try = zclock_mono() + self->settings->move_step_ms;
}

//  Deletes ROLE's record of a move of CLAIM_ID and forgets the move (each
//  side deletes its own record only).
static void
s_forget(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id)
{
    if (shoal_claim_store_move_delete(self->store, role, claim_id))
        zsys_error("moves: %s: cannot delete its %s record: %s", claim_id,
                   role == SHOAL_MOVE_SOURCE ? "source" : "target", shoal_claim_store_error(self->store));
    zhashx_delete(role == SHOAL_MOVE_SOURCE ? self->outgoing : self->incoming, claim_id);
}

static void
s_out_finish(shoal_moves_t *self, s_out_t *out)
{
    s_forget(self, SHOAL_MOVE_SOURCE, out->move.claim_id);
}

static void
s_abort_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    s_out_t *out = s_out_for(ask->self, ask);
    if (out && out->move.state == SHOAL_MOVE_ABORTED && reply && reply->status == SHOAL_STATUS_OK)
        s_out_finish(ask->self, out);
    free(ask);
}

//  The claim moved: the source drops it, its guest and files, then its
//  record. TARGET_STARTED_MS and GUEST_DOWNTIME_MS come from the target.
static void
s_out_drop(shoal_moves_t *self, s_out_t *out, uint64_t target_started_ms, uint64_t guest_downtime_ms)
{
    shoal_move_t *move = &out->move;
    if (move->state != SHOAL_MOVE_STARTED) {
        move->state = SHOAL_MOVE_STARTED;
        if (s_record_write(self, move, NULL, NULL))
            return;
    }
    //  The move is done when the guest runs on the target: removing the
    //  copy here is not part of it.
    if (!move->total_ms)
        move->total_ms = out->started ? (uint64_t) (zclock_mono() - out->started) : 0;
    shoal_fault_point("source", "drop", 0);
    if (out->sender) {
        zloop_reader_end(self->loop, zactor_sock(out->sender));
        zactor_destroy(&out->sender);
    }
    shoal_claim_record_t claim;
    bool found = false;
    if (s_claim_get(self, move->claim_id, &claim, &found))
        return;
    if (found) {
        char *error = NULL;
        shoal_driver_t *driver = shoal_claims_driver(self->claims, claim.driver, &error);
        if (driver && driver->ops->destroy(driver, claim.id, &error))
            zsys_error("moves: %s: cannot remove its guest here: %s", claim.id, error);
        free(error);
        if (s_record_write(self, move, &claim, NULL)) {
            shoal_claim_codec.clear(&claim);
            return;
        }
        shoal_claim_codec.clear(&claim);
    }
    s_text_set(&move->phase, "done");
    if (out->paused_at && target_started_ms >= (uint64_t) out->paused_at)
        move->node_downtime_ms = target_started_ms - (uint64_t) out->paused_at;
    move->guest_downtime_ms = guest_downtime_ms;
    zsys_info("moves: %s moved to %s in %" PRIu64 " ms, %u rounds, %" PRIu64 " bytes, downtime %" PRIu64
              " ms (node) / %" PRIu64 " ms (guest)", move->claim_id, move->to, move->total_ms, move->round,
              move->bytes_sent, move->node_downtime_ms, move->guest_downtime_ms);
    shoal_metrics_move_ended(self->metrics, move, SHOAL_STATUS_OK);
    s_result_keep(self, move);
    s_out_finish(self, out);
}

static void s_prepare_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  An event of OUT's sender.
static int
s_sender_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    s_out_t *out = (s_out_t *) arg;
    shoal_moves_t *self = out->owner;
    shoal_sender_event_t event;
    if (shoal_sender_event(out->sender, &event))
        return 0;
    shoal_move_t *move = &out->move;
    move->round = event.round;
    move->bytes_sent = event.bytes;
    move->rate = event.rate;
    move->dirty_rate = event.dirty_rate;
    move->estimate_ms = event.estimate_ms;
    switch (event.what) {
        case SHOAL_SENDER_PROGRESS:
            break;
        case SHOAL_SENDER_READY:
            //  The target rechecks memory before anything pauses.
            s_text_set(&move->phase, "final");
            if (s_send(self, move->to, SHOAL_MSG_MOVE_PREPARE, move, s_prepare_done))
                s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the target is no longer a peer");
            break;
        case SHOAL_SENDER_DONE:
            //  The target holds a durable copy: it asks to commit next.
            s_text_set(&move->phase, "committing");
            out->deadline = zclock_mono() + self->settings->move_final_ms;
            break;
        case SHOAL_SENDER_FAILED:
            s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, event.error);
            break;
    }
    return 0;
}

//  Key hook: the claim's keys reach the target before the last round
//  (shoal_txn.h, steps 1-2); the round follows once the target holds them.
static void
s_final_keys_sent(const char *error, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_FINAL || !out->sender)
        return;
    if (error)
        s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, error);
    else
        zstr_send(out->sender, "FINAL");
}

static void
s_final_send(shoal_moves_t *self, s_out_t *out)
{
    if (!self->txn) {
        zstr_send(out->sender, "FINAL");
        return;
    }
    s_ask_t *ask = s_ask_new(self, &out->move);
    if (shoal_txn_move_send(self->txn, &out->move, s_final_keys_sent, ask)) {
        free(ask);
        s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "cannot send the claim's keys to the target");
    }
}

static void
s_prepare_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || out->move.state != SHOAL_MOVE_PENDING || !out->sender)
        return;
    char reason[MOVES_MESSAGE_MAX];
    if (!reply || reply->status != SHOAL_STATUS_OK) {
        snprintf(reason, sizeof reason, "the target refused the final round: %s",
                 reply ? reply->message : "no answer");
        s_out_abort(self, out, reply ? reply->status : SHOAL_STATUS_UNAVAILABLE, reason);
        return;
    }
    shoal_move_t *move = &out->move;
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, move->driver, &error);
    if (!driver || driver->ops->pause(driver, move->claim_id, &error)) {
        snprintf(reason, sizeof reason, "cannot pause the guest: %s", error ? error : "no driver");
        free(error);
        s_out_abort(self, out, SHOAL_STATUS_INTERNAL, reason);
        return;
    }
    out->paused_at = s_wall();
    move->state = SHOAL_MOVE_FINAL;
    if (s_record_write_lazy(self, move, NULL, NULL)) {
        move->state = SHOAL_MOVE_PENDING;
        s_out_abort(self, out, SHOAL_STATUS_INTERNAL, "cannot journal the final round");
        return;
    }
    s_final_send(self, out);
}

static void s_admit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  Asks OUT's target for admission. A request lost on a connection that
//  went down as it was sent is asked again; the target answers a repeated
//  admission of the same move as it answers the first.
static int
s_admit_ask(shoal_moves_t *self, s_out_t *out)
{
    return s_send_within(self, out->move.to, SHOAL_MSG_MOVE_ADMIT, &out->move, s_admit_done, MOVES_RETRY_MS);
}

static void
s_admit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_out_t *out = s_out_for(self, ask);
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
        s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, reason);
        return;
    }
    if (reply->status != SHOAL_STATUS_OK) {
        //  A refusal leaves nothing on the target to drop.
        snprintf(reason, sizeof reason, "node %s refused the move: %s", move->to, reply->message);
        s_out_abort(self, out, reply->status, reason);
        s_out_finish(self, out);
        return;
    }
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    s_text_set(&move->stream, answer->stream);
    s_text_set(&move->phase, "round");
    char *dir = NULL;
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, move->driver, &error);
    dir = driver && driver->ops->image_dir ? driver->ops->image_dir(driver, move->claim_id) : NULL;
    free(error);
    if (!dir) {
        s_out_abort(self, out, SHOAL_STATUS_INTERNAL, "the guest's image is gone");
        return;
    }
    shoal_sender_args_t args = {
        .move_id = move->move_id, .endpoint = move->stream, .cluster = self->cluster,
        .server_key = zcert_public_txt(self->cluster), .image_dir = dir,
        .max_downtime_ms = move->max_downtime_ms, .step_timeout_ms = self->settings->move_step_ms,
        .final_timeout_ms = self->settings->move_final_ms,
    };
    out->sender = shoal_sender_new(&args);
    free(dir);
    zloop_reader(self->loop, zactor_sock(out->sender), s_sender_readable, out);
    s_out_answer(self, out, SHOAL_STATUS_OK, "admitted");
    zsys_info("moves: %s to %s admitted, streaming to %s", move->claim_id, move->to, move->stream);
}

static shoal_envelope_t *
s_refuse(const shoal_envelope_t *request, uint32_t status, const char *format, ...) CHECK_PRINTF(3);

static shoal_envelope_t *
s_refuse(const shoal_envelope_t *request, uint32_t status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = zsys_vprintf(format, args);
    va_end(args);
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", message);
    free(message);
    return reply;
}

//  MOVE: from an operator, to this node as the source.
static shoal_envelope_t *
s_move(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    const char *me = self->settings->node_id;
    const char *to = body->to ? body->to : "";
    if (!*to)
        return s_refuse(request, SHOAL_STATUS_BAD_REQUEST, "a move names its target node");
    if (streq(to, me))
        return s_refuse(request, SHOAL_STATUS_BAD_REQUEST, "claim '%s' is on %s already", body->claim_id, me);
    shoal_claim_record_t claim;
    bool found = false;
    if (s_claim_get(self, body->claim_id, &claim, &found))
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    if (!found || claim.state == SHOAL_CLAIM_RELEASED) {
        if (found)
            shoal_claim_codec.clear(&claim);
        return s_refuse(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' is not on node %s", body->claim_id, me);
    }
    shoal_envelope_t *reply = NULL;
    //  An aborted move that waits for its target's confirmation does not
    //  hold the claim back: the target asks about it and drops its copy.
    s_out_t *busy = (s_out_t *) zhashx_lookup(self->outgoing, claim.id);
    if (busy && busy->move.state == SHOAL_MOVE_ABORTED)
        busy = NULL;
    shoal_member_state_t state;
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, claim.driver, &error);
    char *dir = driver && driver->ops->image_dir ? driver->ops->image_dir(driver, claim.id) : NULL;
    if (busy)
        reply = s_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is moving to %s already", claim.id,
                         busy->move.to);
    else
    if (claim.state != SHOAL_CLAIM_RUNNING)
        reply = s_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is %s: only a running claim moves", claim.id,
                         shoal_claim_state_name(claim.state));
    else
    if (!dir)
        reply = s_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' runs on driver %s, which cannot move it live",
                         claim.id, claim.driver);
    else
    if ((int64_t) s_in_flight(self) >= self->settings->move_concurrency) {
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MOVE_CONCURRENCY);
        reply = s_refuse(request, SHOAL_STATUS_TOO_MANY, "%zu move(s) in flight on %s, move/concurrency is %" PRId64,
                         s_in_flight(self), me, self->settings->move_concurrency);
        reply->retry_after_ms = MOVES_RETRY_MS;
    }
    else
    if (!shoal_mesh_peer_state(self->mesh, to, &state))
        reply = s_refuse(request, SHOAL_STATUS_NOT_FOUND, "node '%s' is not a peer of %s", to, me);
    else
    if (state != SHOAL_MEMBER_ALIVE && state != SHOAL_MEMBER_SUSPECT)
        reply = s_refuse(request, SHOAL_STATUS_UNAVAILABLE, "peer %s is %s: a move needs it alive", to,
                         shoal_member_state_name(state));
    shoal_image_t *image = NULL;
    if (!reply) {
        image = shoal_image_open(dir, &error);
        if (!image)
            reply = s_refuse(request, SHOAL_STATUS_INTERNAL, "cannot read the guest's image: %s", error);
    }
    free(error);
    free(dir);
    if (reply) {
        shoal_claim_codec.clear(&claim);
        return reply;
    }
    s_out_t *out = (s_out_t *) zmalloc(sizeof *out);
    out->owner = self;
    out->started = zclock_mono();
    shoal_move_t *move = &out->move;
    zuuid_t *uuid = zuuid_new();
    move->move_id = strdup(zuuid_str(uuid));
    for (char *c = move->move_id; *c; c++)
        *c = (char) tolower((unsigned char) *c);
    zuuid_destroy(&uuid);
    move->claim_id = strdup(claim.id);
    move->from = strdup(me);
    move->to = strdup(to);
    move->state = SHOAL_MOVE_PENDING;
    move->role = SHOAL_MOVE_SOURCE;
    move->epoch = claim.epoch;
    move->tenant = strdup(claim.tenant);
    move->memory_bytes = claim.memory_bytes;
    move->driver = strdup(claim.driver);
    move->memory_pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY);
    move->disk_blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK);
    move->max_downtime_ms = body->max_downtime_ms ? body->max_downtime_ms
                                                  : (uint32_t) self->settings->move_downtime_ms;
    move->started_ms = (uint64_t) s_wall();
    move->phase = strdup("admitting");
    //  The guest's own measure of the downtime starts from here.
    shoal_image_reset_gap(image);
    shoal_image_destroy(&image);
    //  Journaled before anything is sent: the claim is moving from now on.
    shoal_claim_record_t next = claim;
    next.state = SHOAL_CLAIM_MOVING;
    if (s_record_write(self, move, &claim, &next)) {
        shoal_claim_codec.clear(&claim);
        s_out_destroy((void **) &out);
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the move: %s",
                        shoal_claim_store_error(self->store));
    }
    shoal_claim_codec.clear(&claim);
    zhashx_update(self->outgoing, move->claim_id, out);
    zsys_info("moves: %s to %s: asking for admission (budget %u ms)", move->claim_id, to, move->max_downtime_ms);
    shoal_fault_point("source", "admit", 0);
    out->client = zframe_dup(routing_id);
    out->client_request_id = request->request_id;
    if (s_admit_ask(self, out)) {
        //  The peer went between the checks and the send.
        s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the target is no longer a peer");
        return NULL;
    }
    return NULL;
}

//  MOVE_COMMIT: the target's copy is durable; may it start?
static shoal_envelope_t *
s_commit(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_fault_point("source", "commit-request", 0);
    s_out_t *out = (s_out_t *) s_move_find(self->outgoing, body->claim_id, body->move_id);
    if (!out)
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "no move %s of claim '%s' on %s: it was aborted",
                        body->move_id, body->claim_id, self->settings->node_id);
    shoal_move_t *move = &out->move;
    if (move->state == SHOAL_MOVE_FINAL) {
        move->state = SHOAL_MOVE_COMMITTED;
        if (s_record_write(self, move, NULL, NULL)) {
            move->state = SHOAL_MOVE_FINAL;
            return s_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the commit");
        }
        shoal_fault_point("source", "commit", 0);
        s_text_set(&move->phase, "starting");
        out->deadline = 0;
        out->next_try = zclock_mono() + self->settings->move_step_ms;
    }
    if (move->state != SHOAL_MOVE_COMMITTED && move->state != SHOAL_MOVE_STARTED)
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "move %s of claim '%s' is %s: %s", move->move_id,
                        move->claim_id, shoal_move_state_name(move->state),
                        move->error && *move->error ? move->error : "it cannot commit");
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "committed");
    s_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), move);
    return reply;
}

//  MOVE_STARTED: the target runs the guest.
static shoal_envelope_t *
s_started(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_fault_point("source", "start", 0);
    s_out_t *out = (s_out_t *) s_move_find(self->outgoing, body->claim_id, body->move_id);
    if (out) {
        if (out->move.state != SHOAL_MOVE_COMMITTED && out->move.state != SHOAL_MOVE_STARTED)
            return s_refuse(request, SHOAL_STATUS_CONFLICT, "move %s is %s", out->move.move_id,
                            shoal_move_state_name(out->move.state));
        s_out_drop(self, out, body->updated_ms, body->guest_downtime_ms);
    }
    //  Unknown: dropped already (a repeated notice).
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "dropped");
}

static void
s_query_target_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_out_t *out = s_out_for(self, ask);
    free(ask);
    if (!out || !reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    //  The target adopted the claim: it is the owner, whatever notice got lost.
    if (out->move.state == SHOAL_MOVE_COMMITTED || out->move.state == SHOAL_MOVE_STARTED) {
        if (answer->state == SHOAL_MOVE_ADOPTED)
            s_out_drop(self, out, answer->updated_ms, answer->guest_downtime_ms);
    }
}

//  MOVE_RESUME: an operator resumes a committed move's guest here.
static shoal_envelope_t *
s_resume(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    s_out_t *out = (s_out_t *) zhashx_lookup(self->outgoing, body->claim_id);
    if (!out)
        return s_refuse(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' has no move on %s", body->claim_id,
                        self->settings->node_id);
    shoal_move_t *move = &out->move;
    if (move->state == SHOAL_MOVE_PENDING || move->state == SHOAL_MOVE_FINAL) {
        s_out_abort(self, out, SHOAL_STATUS_CONFLICT, "aborted by an operator");
        return shoal_envelope_reply(request, SHOAL_STATUS_OK, "the move was aborted; the guest runs on %s",
                                    self->settings->node_id);
    }
    if (move->state != SHOAL_MOVE_COMMITTED)
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "move of claim '%s' is %s", move->claim_id,
                        shoal_move_state_name(move->state));
    zsys_warning("moves: %s: an operator resumes it on %s after the commit to %s", move->claim_id,
                 self->settings->node_id, move->to);
    //  Forced: the one path from committed back to aborted.
    move->state = SHOAL_MOVE_FINAL;
    s_out_abort(self, out, SHOAL_STATUS_CONFLICT, "resumed on the source by an operator after the commit");
    shoal_envelope_t *reply = shoal_envelope_reply(
        request, SHOAL_STATUS_OK, "the guest runs on %s again; %s will be told the move was aborted when it "
        "returns. If %s started the guest before it was lost, the claim now runs twice until one is released",
        self->settings->node_id, move->to, move->to);
    s_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), move);
    return reply;
}

// ---------------------------------------------------------------------------
//  Target

static void
s_in_destroy(void **item_p)
{
    s_in_t *in = (s_in_t *) *item_p;
    if (in) {
        zframe_destroy(&in->admitting);
        shoal_msg_move_codec.clear(&in->move);
        free(in);
        *item_p = NULL;
    }
}

//  Drops what IN received: its files, its reservation, its record.
static void
s_in_drop(shoal_moves_t *self, s_in_t *in, const char *reason)
{
    shoal_move_t *move = &in->move;
    zsys_warning("moves: %s from %s: dropping what was received: %s", move->claim_id, move->from, reason);
    //  The receiver removes the image it writes, the driver whatever is
    //  left of it (after a restart, or a prepare that failed half way):
    //  both may get there, and whichever comes second finds nothing.
    if (in->expecting)
        shoal_receiver_forget(self->receiver, move->move_id, true);
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, move->driver, &error);
    if (driver && driver->ops->destroy(driver, move->claim_id, &error))
        zsys_error("moves: %s: cannot remove the received guest: %s", move->claim_id, error);
    free(error);
    if (in->reserved)
        shoal_admission_unreserve(shoal_claims_admission(self->claims), move->tenant, move->memory_bytes);
    s_forget(self, SHOAL_MOVE_TARGET, move->claim_id);
}

static s_in_t *
s_in_for(shoal_moves_t *self, s_ask_t *ask)
{
    return (s_in_t *) s_move_for(self, self->incoming, ask);
}

static void s_started_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg);

//  The longest tick gap the guest of claim ID saw, once it ticked again
//  after STARTED_AT (its tick clock before the start).
static uint64_t
s_guest_downtime(shoal_moves_t *self, shoal_driver_t *driver, const char *id, uint64_t tick_before)
{
    char *dir = driver->ops->image_dir ? driver->ops->image_dir(driver, id) : NULL;
    shoal_image_t *image = dir ? shoal_image_open(dir, NULL) : NULL;
    free(dir);
    if (!image)
        return 0;
    int64_t deadline = zclock_mono() + MOVES_TICK_WAIT_MS;
    while (shoal_image_tick_ms(image) == tick_before && zclock_mono() < deadline)
        zclock_sleep(1);
    uint64_t gap = shoal_image_max_gap_ms(image);
    shoal_image_destroy(&image);
    return gap;
}

//  The claim is this node's now: the reservation becomes the claim (one
//  batch with the record), the guest starts, the registry names this node.
static void
s_in_adopt(shoal_moves_t *self, s_in_t *in)
{
    shoal_move_t *move = &in->move;
    shoal_fault_point("target", "commit", 0);
    shoal_claim_record_t existing;
    bool found = false;
    if (s_claim_get(self, move->claim_id, &existing, &found))
        return;
    shoal_claim_record_t claim = { 0 };
    if (found)
        claim = existing;
    else {
        claim.id = strdup(move->claim_id);
        claim.tenant = strdup(move->tenant);
        claim.state = SHOAL_CLAIM_MOVING;
        claim.memory_bytes = move->memory_bytes;
        claim.driver = strdup(move->driver);
        claim.epoch = move->epoch + 1;
        claim.created_ms = move->started_ms;
        move->state = SHOAL_MOVE_ADOPTED;
        if (s_record_write_lazy(self, move, NULL, &claim)) {
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
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, claim.driver, &error);
    if (claim.state == SHOAL_CLAIM_MOVING && driver) {
        uint64_t tick_before = 0;
        char *dir = driver->ops->image_dir ? driver->ops->image_dir(driver, claim.id) : NULL;
        shoal_image_t *image = dir ? shoal_image_open(dir, NULL) : NULL;
        if (image)
            tick_before = shoal_image_tick_ms(image);
        shoal_image_destroy(&image);
        free(dir);
        bool running = driver->ops->alive(driver, claim.id, NULL);
        shoal_fault_point("target", "start", 0);
        if (!running && driver->ops->start(driver, claim.id, &error))
            zsys_error("moves: %s: the received guest does not start: %s", claim.id, error);
        move->updated_ms = (uint64_t) s_wall();
        uint64_t started_ms = move->updated_ms;
        shoal_claim_record_t next = claim;
        next.state = error ? SHOAL_CLAIM_ERROR : SHOAL_CLAIM_RUNNING;
        next.error = error;
        move->guest_downtime_ms = error ? 0 : s_guest_downtime(self, driver, claim.id, tick_before);
        if (s_record_write(self, move, &claim, &next) == 0) {
            claim.state = next.state;
            if (shoal_claims_register(self->claims, &claim))
                zsys_error("moves: %s: cannot register this node as its owner", claim.id);
        }
        move->updated_ms = started_ms;
        zsys_info("moves: %s from %s runs here (epoch %" PRIu64 ")", claim.id, move->from, claim.epoch);
    }
    free(error);
    shoal_claim_codec.clear(&claim);
    in->next_try = zclock_mono() + MOVES_RETRY_MS;
    in->asking = true;
    if (s_send(self, move->from, SHOAL_MSG_MOVE_STARTED, move, s_started_done))
        in->asking = false;
}

static void
s_started_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in)
        return;
    in->asking = false;
    if (reply && reply->status == SHOAL_STATUS_OK)
        s_forget(self, SHOAL_MOVE_TARGET, in->move.claim_id);
}

static void
s_commit_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in || in->move.state != SHOAL_MOVE_RECEIVED)
        return;
    in->asking = false;
    if (!reply)
        return;     //  asked again from the tick: a commit is answered the same way twice
    if (reply->status == SHOAL_STATUS_OK)
        s_in_adopt(self, in);
    else
    if (reply->status == SHOAL_STATUS_CONFLICT)
        s_in_drop(self, in, reply->message);
}

//  Asks the source to commit IN.
static void
s_in_ask_commit(shoal_moves_t *self, s_in_t *in)
{
    in->next_try = zclock_mono() + MOVES_RETRY_MS;
    in->asking = true;
    shoal_fault_point("target", "commit-request", 0);
    if (s_send(self, in->move.from, SHOAL_MSG_MOVE_COMMIT, &in->move, s_commit_done))
        in->asking = false;
}

static void s_in_prepared(shoal_moves_t *self, s_in_t *in, const char *error);

//  An event of the receiver.
static int
s_receiver_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_moves_t *self = (shoal_moves_t *) arg;
    shoal_receiver_event_t event;
    if (shoal_receiver_event(self->receiver, &event))
        return 0;
    s_in_t *in = NULL;
    for (s_in_t *each = (s_in_t *) zhashx_first(self->incoming); each; each = (s_in_t *) zhashx_next(self->incoming))
        if (s_same_move(&each->move, event.move_id))
            in = each;
    if (!in || in->move.state != SHOAL_MOVE_RECEIVING)
        return 0;
    if (event.prepared) {
        if (in->admitting)
            s_in_prepared(self, in, event.error);
        return 0;
    }
    if (*event.error) {
        s_in_drop(self, in, event.error);
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
    if (s_record_write_lazy(self, &in->move, NULL, NULL)) {
        s_in_drop(self, in, "cannot journal the reception");
        return 0;
    }
    s_in_ask_commit(self, in);
    return 0;
}

//  MOVE_ADMIT: a source asks this node to take a claim.
static shoal_envelope_t *
s_admit(shoal_moves_t *self, const shoal_envelope_t *request, zframe_t *routing_id)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    const char *id = body->claim_id;
    const char *tenant = body->tenant ? body->tenant : "";
    if (!*tenant || !body->move_id || !*body->move_id || !body->from || !*body->from)
        return s_refuse(request, SHOAL_STATUS_BAD_REQUEST, "an admission names the move, its source and tenant");
    shoal_claim_record_t claim;
    bool found = false;
    if (s_claim_get(self, id, &claim, &found))
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    if (found) {
        shoal_claim_codec.clear(&claim);
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "claim id '%s' is taken on %s", id, self->settings->node_id);
    }
    s_in_t *again = (s_in_t *) zhashx_lookup(self->incoming, id);
    if (again && s_same_move(&again->move, body->move_id) && again->admitting) {
        //  Asked again while the image is being made: the answer goes to
        //  the latest request.
        zframe_destroy(&again->admitting);
        again->admitting = zframe_dup(routing_id);
        again->admit_request_id = request->request_id;
        return NULL;
    }
    if (again && s_same_move(&again->move, body->move_id) && again->move.state == SHOAL_MOVE_RECEIVING) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "admitted");
        s_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &again->move);
        return reply;
    }
    if (again || zhashx_lookup(self->outgoing, id))
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' is moving already", id);
    if ((int64_t) s_in_flight(self) >= self->settings->move_concurrency) {
        shoal_metrics_refused(self->metrics, SHOAL_REFUSED_MOVE_CONCURRENCY);
        shoal_envelope_t *reply = s_refuse(request, SHOAL_STATUS_TOO_MANY,
                                           "%zu move(s) in flight on %s, move/concurrency is %" PRId64,
                                           s_in_flight(self), self->settings->node_id,
                                           self->settings->move_concurrency);
        reply->retry_after_ms = MOVES_RETRY_MS;
        return reply;
    }
    char *error = NULL;
    shoal_driver_t *driver = shoal_claims_driver(self->claims, body->driver ? body->driver : "", &error);
    if (!driver || !driver->ops->image_dir) {
        shoal_envelope_t *reply = s_refuse(request, SHOAL_STATUS_UNAVAILABLE, "%s",
                                           error ? error : "this driver cannot receive a live move");
        free(error);
        return reply;
    }
    char message[MOVES_MESSAGE_MAX];
    shoal_admission_t *admission = shoal_claims_admission(self->claims);
    uint32_t status = shoal_admission_reserve(admission, tenant, body->memory_bytes, message, sizeof message);
    if (status != SHOAL_STATUS_OK)
        return s_refuse(request, status, "%s", message);
    s_in_t *in = (s_in_t *) zmalloc(sizeof *in);
    s_move_copy(&in->move, body);
    in->move.role = SHOAL_MOVE_TARGET;
    in->move.state = SHOAL_MOVE_RECEIVING;
    s_text_set(&in->move.to, self->settings->node_id);
    s_text_set(&in->move.stream, shoal_receiver_endpoint(self->receiver));
    in->reserved = true;
    in->deadline = zclock_mono() + self->settings->move_step_ms;
    //  Journaled before any file is made: a restart finds what to remove.
    if (s_record_write(self, &in->move, NULL, NULL)) {
        shoal_admission_unreserve(admission, tenant, body->memory_bytes);
        s_in_destroy((void **) &in);
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "cannot journal the reception: %s",
                        shoal_claim_store_error(self->store));
    }
    //  The image is made (sparse, checked to fit) by the receiver, which
    //  owns the file from then on: the answer goes out when it is ready.
    char *dir = driver->ops->image_dir(driver, id);
    shoal_receiver_prepare(self->receiver, in->move.move_id, dir, body->memory_bytes,
                           body->disk_blocks * SHOAL_IMAGE_PAGE, body->memory_pages, body->disk_blocks);
    free(dir);
    in->expecting = true;
    in->admitting = zframe_dup(routing_id);
    in->admit_request_id = request->request_id;
    zhashx_insert(self->incoming, id, in);
    return NULL;
}

//  The receiver made IN's image: the admission is answered.
static void
s_in_prepared(shoal_moves_t *self, s_in_t *in, const char *error)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_MOVE_ADMIT, in->admit_request_id);
    shoal_envelope_t *reply = NULL;
    zframe_t *source = in->admitting;
    in->admitting = NULL;
    if (*error) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", error);
        s_in_drop(self, in, error);
    }
    else {
        zsys_info("moves: %s from %s admitted (%" PRIu64 " bytes)", in->move.claim_id, in->move.from,
                  in->move.memory_bytes);
        shoal_fault_point("target", "admit", 0);
        in->deadline = zclock_mono() + self->settings->move_step_ms;
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "admitted");
        s_move_copy((shoal_move_t *) shoal_envelope_new_body(reply), &in->move);
    }
    s_reply_later(self, source, &reply);
    zframe_destroy(&source);
    shoal_envelope_destroy(&request);
}

//  MOVE_PREPARE: memory again, before the source pauses the guest.
static shoal_envelope_t *
s_prepare(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    s_in_t *in = (s_in_t *) s_move_find(self->incoming, body->claim_id, body->move_id);
    if (!in || in->move.state != SHOAL_MOVE_RECEIVING)
        return s_refuse(request, SHOAL_STATUS_CONFLICT, "no reception of move %s here", body->move_id);
    char message[MOVES_MESSAGE_MAX];
    uint32_t status = shoal_admission_recheck_memory(shoal_claims_admission(self->claims), in->move.tenant,
                                                     in->move.memory_bytes, message, sizeof message);
    if (status != SHOAL_STATUS_OK)
        return s_refuse(request, status, "%s", message);
    in->deadline = zclock_mono() + self->settings->move_step_ms;
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "ready");
}

//  MOVE_ABORT: the source gave up; drop what was received.
static shoal_envelope_t *
s_abort(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    s_in_t *in = (s_in_t *) s_move_find(self->incoming, body->claim_id, body->move_id);
    if (in) {
        if (in->move.state == SHOAL_MOVE_ADOPTED)
            return s_refuse(request, SHOAL_STATUS_CONFLICT, "claim '%s' runs on %s already", body->claim_id,
                            self->settings->node_id);
        s_in_drop(self, in, body->error && *body->error ? body->error : "the source aborted the move");
    }
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "dropped");
}

//  MOVE_QUERY: this node's record of a move, for the other side.
static shoal_envelope_t *
s_query(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_move_t answer = { 0 };
    bool found = false;
    shoal_claim_store_move_get(self->store, body->role, body->claim_id, &answer, &found);
    if (found && !s_same_move(&answer, body->move_id ? body->move_id : "")) {
        shoal_msg_move_codec.clear(&answer);
        found = false;
    }
    if (!found) {
        answer.claim_id = strdup(body->claim_id);
        answer.move_id = strdup(body->move_id ? body->move_id : "");
        answer.state = SHOAL_MOVE_NONE;
        //  A target that deleted its record after adoption still owns the claim.
        shoal_claim_record_t claim;
        bool held = false;
        if (body->role == SHOAL_MOVE_TARGET && s_claim_get(self, body->claim_id, &claim, &held) == 0 && held) {
            if (claim.epoch > body->epoch)
                answer.state = SHOAL_MOVE_ADOPTED;
            shoal_claim_codec.clear(&claim);
        }
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", shoal_move_state_name(answer.state));
    shoal_move_t *out = (shoal_move_t *) shoal_envelope_new_body(reply);
    *out = answer;
    return reply;
}

static void
s_query_source_done(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_ask_t *ask = (s_ask_t *) arg;
    shoal_moves_t *self = ask->self;
    s_in_t *in = s_in_for(self, ask);
    free(ask);
    if (!in)
        return;
    in->asking = false;
    if (!reply || reply->status != SHOAL_STATUS_OK)
        return;
    const shoal_move_t *answer = (const shoal_move_t *) reply->body;
    if (answer->state == SHOAL_MOVE_COMMITTED || answer->state == SHOAL_MOVE_STARTED)
        s_in_adopt(self, in);
    else
    if (answer->state == SHOAL_MOVE_FINAL && in->move.state == SHOAL_MOVE_RECEIVED)
        s_in_ask_commit(self, in);
    else {
        char reason[MOVES_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "the source says the move is %s", shoal_move_state_name(answer->state));
        s_in_drop(self, in, reason);
    }
}

// ---------------------------------------------------------------------------
//  Status, list, recovery, tick

static const char *
s_role_name(shoal_move_role_t role)
{
    return role == SHOAL_MOVE_SOURCE ? "source" : role == SHOAL_MOVE_TARGET ? "target" : "unknown";
}

//  The unreadable move record of CLAIM_ID recovery found, or NULL.
static const shoal_move_unreadable_t *
s_unreadable_of(shoal_moves_t *self, const char *claim_id)
{
    for (size_t i = 0; i < self->unreadable.count; i++)
        if (streq(self->unreadable.items[i].claim_id, claim_id))
            return &self->unreadable.items[i];
    return NULL;
}

static shoal_envelope_t *
s_status(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    const shoal_move_t *move = NULL;
    s_out_t *out = (s_out_t *) zhashx_lookup(self->outgoing, body->claim_id);
    s_in_t *in = (s_in_t *) zhashx_lookup(self->incoming, body->claim_id);
    if (out && !out->move.done && out->move.state != SHOAL_MOVE_ABORTED)
        move = &out->move;
    else
    if (zhashx_lookup(self->results, body->claim_id))
        move = (const shoal_move_t *) zhashx_lookup(self->results, body->claim_id);
    else
    if (in)
        move = &in->move;
    const shoal_move_unreadable_t *damaged = s_unreadable_of(self, body->claim_id);
    if (!move && damaged)
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "the %s record of the move of claim '%s' on %s is "
                        "damaged and waits for an operator: %s", s_role_name(damaged->role), body->claim_id,
                        self->settings->node_id, damaged->error);
    if (!move)
        return s_refuse(request, SHOAL_STATUS_NOT_FOUND, "no move of claim '%s' on %s", body->claim_id,
                        self->settings->node_id);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", move->phase ? move->phase : "");
    shoal_move_t *answer = (shoal_move_t *) shoal_envelope_new_body(reply);
    s_move_copy(answer, move);
    if (out && move == &out->move && out->started)
        answer->total_ms = (uint64_t) (zclock_mono() - out->started);
    return reply;
}

static shoal_envelope_t *
s_list(shoal_moves_t *self, const shoal_envelope_t *request)
{
    shoal_msg_moves_t list = { 0 };
    shoal_move_unreadables_t unreadable = { 0 };
    if (shoal_claim_store_move_scan(self->store, &list, &unreadable))
        return s_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    //  The intact records are listed; the message names the others.
    char *message = strdup("OK");
    for (size_t i = 0; i < unreadable.count && message; i++) {
        char *next = zsys_sprintf("%s; unreadable move record %s (claim '%s')", message,
                                  unreadable.items[i].key, unreadable.items[i].claim_id);
        free(message);
        message = next;
    }
    shoal_move_unreadables_clear(&unreadable);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message ? message : "OK");
    free(message);
    *(shoal_msg_moves_t *) shoal_envelope_new_body(reply) = list;
    return reply;
}

//  Resolves the records a previous run left. A record that does not read
//  is named and left for an operator (its claim stays as it is: which side
//  owns it is what the record would have said); every other record is
//  resolved as usual.
static int
s_recover(shoal_moves_t *self)
{
    shoal_msg_moves_t list = { 0 };
    if (shoal_claim_store_move_scan(self->store, &list, &self->unreadable)) {
        zsys_error("moves: cannot read the move records: %s", shoal_claim_store_error(self->store));
        return -1;
    }
    for (size_t i = 0; i < self->unreadable.count; i++) {
        const shoal_move_unreadable_t *bad = &self->unreadable.items[i];
        zsys_error("moves: damage: the move record %s cannot be read, the %s side of the move of claim '%s' "
                   "waits for an operator: %s", bad->key, s_role_name(bad->role), bad->claim_id, bad->error);
    }
    for (size_t i = 0; i < list.count; i++) {
        shoal_move_t *record = &list.moves[i];
        zsys_info("moves: %s: found its %s record %s from a previous run", record->claim_id,
                  record->role == SHOAL_MOVE_SOURCE ? "source" : "target", shoal_move_state_name(record->state));
        if (record->role == SHOAL_MOVE_SOURCE) {
            s_out_t *out = (s_out_t *) zmalloc(sizeof *out);
            out->owner = self;
            s_move_copy(&out->move, record);
            out->next_try = zclock_mono();
            zhashx_update(self->outgoing, record->claim_id, out);
            if (record->state == SHOAL_MOVE_PENDING || record->state == SHOAL_MOVE_FINAL)
                s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the source restarted during the move");
            else
            if (record->state == SHOAL_MOVE_ABORTED)
                s_source_restore(self, &out->move);
            else
            if (record->state == SHOAL_MOVE_STARTED)
                s_out_drop(self, out, 0, 0);
            //  committed: the guest stays paused until the target answers.
        }
        else {
            s_in_t *in = (s_in_t *) zmalloc(sizeof *in);
            s_move_copy(&in->move, record);
            in->next_try = zclock_mono();
            zhashx_update(self->incoming, record->claim_id, in);
            if (record->state != SHOAL_MOVE_ADOPTED) {
                shoal_admission_hold(shoal_claims_admission(self->claims), record->tenant, record->memory_bytes);
                in->reserved = true;
            }
        }
    }
    shoal_msg_moves_codec.clear(&list);
    //  A claim left moving without a record (a crash before the journal
    //  landed) was never in flight: it runs here.
    shoal_claim_records_t claims = { 0 };
    if (shoal_claim_store_list(self->store, &claims) == 0)
        for (size_t i = 0; i < claims.count; i++) {
            shoal_claim_record_t *claim = &claims.items[i];
            if (claim->state != SHOAL_CLAIM_MOVING || zhashx_lookup(self->outgoing, claim->id)
            ||  zhashx_lookup(self->incoming, claim->id) || s_unreadable_of(self, claim->id))
                continue;
            char *error = NULL;
            shoal_driver_t *driver = shoal_claims_driver(self->claims, claim->driver, &error);
            if (driver && driver->ops->alive(driver, claim->id, NULL))
                driver->ops->resume(driver, claim->id, NULL);
            free(error);
            shoal_claim_record_t next = *claim;
            next.state = SHOAL_CLAIM_RUNNING;
            if (shoal_claim_store_put(self->store, claim, &next) == 0)
                zsys_info("moves: %s was moving with no record: it runs here", claim->id);
        }
    shoal_claim_records_clear(&claims);
    return 0;
}

const shoal_move_unreadables_t *
shoal_moves_unreadable(shoal_moves_t *self)
{
    return &self->unreadable;
}

int
shoal_moves_forget_unreadable(shoal_moves_t *self, size_t index)
{
    assert(index < self->unreadable.count);
    shoal_move_unreadable_t *bad = &self->unreadable.items[index];
    if (shoal_claim_store_move_delete(self->store, bad->role, bad->claim_id))
        return -1;
    free(bad->claim_id);
    free(bad->key);
    free(bad->error);
    memmove(bad, bad + 1, (self->unreadable.count - index - 1) * sizeof *bad);
    self->unreadable.count--;
    return 0;
}

void
shoal_moves_tick(shoal_moves_t *self)
{
    int64_t now = zclock_mono();
    uint64_t wall = (uint64_t) s_wall();
    uint64_t ttl = (uint64_t) self->settings->move_record_ttl_ms;
    zlistx_t *ids = zhashx_keys(self->outgoing);
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        s_out_t *out = (s_out_t *) zhashx_lookup(self->outgoing, id);
        if (!out)
            continue;
        shoal_move_t *move = &out->move;
        if (move->state == SHOAL_MOVE_FINAL && out->deadline && now > out->deadline) {
            char reason[MOVES_MESSAGE_MAX];
            snprintf(reason, sizeof reason, "node %s did not ask to commit within %" PRId64 " ms of the final "
                     "round's end (move/final_timeout_ms)", move->to, self->settings->move_final_ms);
            s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, reason);
        }
        else
        if (move->state == SHOAL_MOVE_ABORTED && now >= out->next_try) {
            out->next_try = now + MOVES_RETRY_MS;
            if (wall > move->updated_ms + ttl)
                s_out_finish(self, out);
            else
                s_send(self, move->to, SHOAL_MSG_MOVE_ABORT, move, s_abort_done);
        }
        else
        if ((move->state == SHOAL_MOVE_COMMITTED || move->state == SHOAL_MOVE_STARTED) && now >= out->next_try) {
            out->next_try = now + MOVES_RETRY_MS;
            shoal_move_t query;
            s_move_copy(&query, move);
            query.role = SHOAL_MOVE_TARGET;
            s_send(self, move->to, SHOAL_MSG_MOVE_QUERY, &query, s_query_target_done);
            shoal_msg_move_codec.clear(&query);
        }
    }
    zlistx_destroy(&ids);
    ids = zhashx_keys(self->incoming);
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        s_in_t *in = (s_in_t *) zhashx_lookup(self->incoming, id);
        if (!in)
            continue;
        shoal_move_t *move = &in->move;
        if (move->state == SHOAL_MOVE_RECEIVING && in->expecting && now > in->deadline) {
            s_in_drop(self, in, "the source went quiet");
            continue;
        }
        if (in->asking || now < in->next_try)
            continue;
        if (wall > move->updated_ms + ttl && move->state != SHOAL_MOVE_ADOPTED) {
            s_in_drop(self, in, "the record outlived move/record_ttl_ms");
            continue;
        }
        in->next_try = now + MOVES_RETRY_MS;
        if (move->state == SHOAL_MOVE_ADOPTED)
            s_in_adopt(self, in);
        else
        if (move->state == SHOAL_MOVE_RECEIVED || !in->expecting) {
            //  Ask the source what became of the move.
            shoal_move_t query;
            s_move_copy(&query, move);
            query.role = SHOAL_MOVE_SOURCE;
            in->asking = s_send(self, move->from, SHOAL_MSG_MOVE_QUERY, &query, s_query_source_done) == 0;
            shoal_msg_move_codec.clear(&query);
        }
    }
    zlistx_destroy(&ids);
    //  Results are kept for a while, for `move status`.
    ids = zhashx_keys(self->results);
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        shoal_move_t *result = (shoal_move_t *) zhashx_lookup(self->results, id);
        if (result && wall > result->updated_ms + MOVES_RESULT_TTL_MS)
            zhashx_delete(self->results, id);
    }
    zlistx_destroy(&ids);
}

// ---------------------------------------------------------------------------

//  Whether the guest of moving claim ID is paused for the final round.
static bool
s_paused(const char *id, void *arg)
{
    shoal_moves_t *self = (shoal_moves_t *) arg;
    s_out_t *out = (s_out_t *) zhashx_lookup(self->outgoing, id);
    return !out || out->paused_at != 0 || out->move.state != SHOAL_MOVE_PENDING;
}

shoal_moves_t *
shoal_moves_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster, shoal_claims_t *claims,
                shoal_mesh_t *mesh, char **error_p)
{
    char *bind = *settings->move_bind ? strdup(settings->move_bind) : NULL;
    if (!bind) {
        const char *colon = strrchr(settings->bind, ':');
        bind = zsys_sprintf("%.*s:*", (int) (colon - settings->bind), settings->bind);
    }
    shoal_gate_options_t gate = shoal_gate_options(settings);
    shoal_receiver_t *receiver = shoal_receiver_new(bind, endpoint, cluster, &gate, error_p);
    free(bind);
    if (!receiver)
        return NULL;
    shoal_moves_t *self = (shoal_moves_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->claims = claims;
    self->store = shoal_claims_store(claims);
    self->mesh = mesh;
    self->cluster = zcert_dup(cluster);
    self->receiver = receiver;
    self->outgoing = zhashx_new();
    zhashx_set_destructor(self->outgoing, s_out_destroy);
    self->incoming = zhashx_new();
    zhashx_set_destructor(self->incoming, s_in_destroy);
    self->results = zhashx_new();
    zhashx_set_destructor(self->results, s_result_destroy);
    shoal_claims_set_paused(claims, s_paused, self);
    return self;
}

void
shoal_moves_stop(shoal_moves_t *self)
{
    //  An orderly stop aborts what can still be aborted: no guest stays
    //  paused while the node is down.
    zlistx_t *ids = zhashx_keys(self->outgoing);
    self->stopping = true;
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        s_out_t *out = (s_out_t *) zhashx_lookup(self->outgoing, id);
        if (out && (out->move.state == SHOAL_MOVE_PENDING || out->move.state == SHOAL_MOVE_FINAL))
            s_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the source is stopping");
    }
    zlistx_destroy(&ids);
}

void
shoal_moves_set_txn(shoal_moves_t *self, shoal_txn_t *txn)
{
    self->txn = txn;
}

void
shoal_moves_destroy(shoal_moves_t **self_p)
{
    if (*self_p) {
        shoal_moves_t *self = *self_p;
        self->stopping = true;
        shoal_claims_set_paused(self->claims, NULL, NULL);
        zhashx_destroy(&self->outgoing);
        zhashx_destroy(&self->incoming);
        zhashx_destroy(&self->results);
        shoal_move_unreadables_clear(&self->unreadable);
        shoal_receiver_destroy(&self->receiver);
        zcert_destroy(&self->cluster);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_moves_start(shoal_moves_t *self, zloop_t *loop, zsock_t *router)
{
    self->loop = loop;
    self->router = router;
    zloop_reader(loop, shoal_receiver_sock(self->receiver), s_receiver_readable, self);
    return s_recover(self);
}

bool
shoal_moves_handles(shoal_msg_type_t type)
{
    return type >= SHOAL_MSG_MOVE && type <= SHOAL_MSG_MOVE_QUERY;
}

shoal_envelope_t *
shoal_moves_handle(shoal_moves_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                   zframe_t *routing_id)
{
    bool node = streq(caller->role, SHOAL_ROLE_NODE);
    bool admin = streq(caller->role, SHOAL_ROLE_ADMIN);
    switch (request->type) {
        case SHOAL_MSG_MOVE:
        case SHOAL_MSG_MOVE_STATUS:
        case SHOAL_MSG_MOVE_RESUME:
        case SHOAL_MSG_MOVE_LIST:
            if (!node && !admin)
                return s_refuse(request, SHOAL_STATUS_FORBIDDEN, "moves are for operators (role %s)", caller->role);
            break;
        default:
            if (!node)
                return s_refuse(request, SHOAL_STATUS_FORBIDDEN, "%s is between nodes only",
                                shoal_msg_type_name(request->type));
            break;
    }
    switch (request->type) {
        case SHOAL_MSG_MOVE: return s_move(self, request, routing_id);
        case SHOAL_MSG_MOVE_STATUS: return s_status(self, request);
        case SHOAL_MSG_MOVE_RESUME: return s_resume(self, request);
        case SHOAL_MSG_MOVE_LIST: return s_list(self, request);
        case SHOAL_MSG_MOVE_ADMIT: return s_admit(self, request, routing_id);
        case SHOAL_MSG_MOVE_PREPARE: return s_prepare(self, request);
        case SHOAL_MSG_MOVE_COMMIT: return s_commit(self, request);
        case SHOAL_MSG_MOVE_STARTED: return s_started(self, request);
        case SHOAL_MSG_MOVE_ABORT: return s_abort(self, request);
        case SHOAL_MSG_MOVE_QUERY: return s_query(self, request);
        default:
            return s_refuse(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a move request",
                            shoal_msg_type_name(request->type));
    }
}

void
shoal_moves_set_metrics(shoal_moves_t *self, shoal_metrics_t *metrics)
{
    self->metrics = metrics;
}
