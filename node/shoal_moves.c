/*  shoal_moves: the live moves of a node, both sides. See shoal_moves.h,
    and shoal_moves_internal.h for how the module is laid out.

    All of it runs on the node's reactor; the bytes go through the sender
    and receiver actors of shoal_transfer, and every guest operation through
    the guest actor (shoal_guests). An outgoing move is a shoal_move_out_t
    (source), an incoming one a shoal_move_in_t (target), each keyed by
    claim id and holding its record as stored. Requests to the other side
    go through the mesh; their answers come back to callbacks that find the
    move again by claim and move id, so an answer for a move that ended
    meanwhile is dropped.
*/
#include "shoal_moves_internal.h"
#include "shoal_alloc.h"

#include <ctype.h>

int64_t
shoal_moves_wall(void)
{
    return zclock_time();
}

void
shoal_moves_text_set(char **field, const char *text)
{
    free(*field);
    *field = shoal_strdup(text ? text : "");
}

shoal_move_ask_t *
shoal_moves_ask_new(shoal_moves_t *self, const shoal_move_t *move)
{
    shoal_move_ask_t *ask = (shoal_move_ask_t *) zmalloc(sizeof *ask);
    ask->self = self;
    snprintf(ask->claim_id, sizeof ask->claim_id, "%s", move->claim_id);
    snprintf(ask->move_id, sizeof ask->move_id, "%s", move->move_id ? move->move_id : "");
    return ask;
}

bool
shoal_moves_same_move(const shoal_move_t *move, const char *move_id)
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
    //  A claim's state changes along the claims' table, moves' changes too
    //  (a claim arriving or leaving with its move is no change of state).
    if (previous && record && previous->state != record->state
    &&  !shoal_claims_step_legal(previous->state, record->state)) {
        zsys_error("moves: %s: the claim cannot go from %s to %s: not written", previous->id,
                   shoal_claim_state_name(previous->state), shoal_claim_state_name(record->state));
        return -1;
    }
    return shoal_move_record_write(self->store, move, previous, record, lazy);
}

int
shoal_moves_record_write(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
               const shoal_claim_record_t *record)
{
    return s_record_store(self, move, previous, record, false);
}

//  The same, not synced: for the steps inside the downtime that a machine
//  crash losing them leaves recoverable as before. A synced commit waits
//  behind the file system's writeback, up to 0.9 s here while the images
//  of a 2 GiB move were written back; the one that must be synced inside
//  the downtime is the source's commit, and it carries these with it (the
//  target writes the image back during the rounds, shoal_transfer's
//  s_image_round_sync, so that little is left for it to wait behind).
//    - final: a source that restarts pending aborts and resumes its guest,
//      as it does from final.
//    - received, adopted: a target that restarts receiving asks the source
//      and adopts the copy if the source committed, as it does from these.
int
shoal_moves_record_write_lazy(shoal_moves_t *self, shoal_move_t *move, const shoal_claim_record_t *previous,
                    const shoal_claim_record_t *record)
{
    return s_record_store(self, move, previous, record, true);
}

//  Reads claim ID. Returns 0 with *FOUND, or -1 (logged).
int
shoal_moves_claim_get(shoal_moves_t *self, const char *id, shoal_claim_record_t *record, bool *found)
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
int
shoal_moves_send_within(shoal_moves_t *self, const char *node, shoal_msg_type_t type, const shoal_move_t *move,
              shoal_mesh_reply_fn *fn, int64_t timeout_ms)
{
    shoal_envelope_t *request = shoal_envelope_new(type, 0);
    shoal_move_t *body = (shoal_move_t *) shoal_envelope_new_body(request);
    shoal_move_copy(body, move);
    shoal_move_ask_t *ask = fn ? shoal_moves_ask_new(self, move) : NULL;
    if (shoal_mesh_send(self->mesh, node, &request, timeout_ms, fn, ask)) {
        shoal_envelope_destroy(&request);
        free(ask);
        return -1;
    }
    return 0;
}

int
shoal_moves_send(shoal_moves_t *self, const char *node, shoal_msg_type_t type, const shoal_move_t *move,
       shoal_mesh_reply_fn *fn)
{
    return shoal_moves_send_within(self, node, type, move, fn, self->settings->move_step_ms);
}

//  Sends REPLY (taken) to the caller at ROUTING_ID.
void
shoal_moves_reply_later(shoal_moves_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p)
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
size_t
shoal_moves_in_flight(shoal_moves_t *self)
{
    size_t count = zhashx_size(self->incoming);
    for (const shoal_move_out_t *out = (const shoal_move_out_t *) zhashx_first(self->outgoing); out;
         out = (const shoal_move_out_t *) zhashx_next(self->outgoing))
        if (out->move.state != SHOAL_MOVE_ABORTED)
            count++;
    return count;
}

//  Keeps a finished move's record for `move status`.
void
shoal_moves_result_keep(shoal_moves_t *self, const shoal_move_t *move)
{
    shoal_move_t *copy = (shoal_move_t *) zmalloc(sizeof *copy);
    shoal_move_copy(copy, move);
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

//  A resume the guest actor did for a move that ended here.
static void
s_resumed(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    if (!answer->cancelled && answer->rc)
        zsys_error("moves: %s: cannot resume its guest: %s", request->claim_id, answer->error);
}

//  Asks the guest actor to resume the guest of CLAIM if it runs (SIGCONT
//  to a guest that runs is harmless: an abort resumes whatever its record
//  says, so a crash between pause and journal leaves none paused). Not
//  exclusive: the claim's record says running already, the resume only
//  brings the guest in line, and what the claim is asked next queues
//  behind it.
//  A move's throttle taken off a guest that runs on here.
static void
s_unthrottled(const shoal_guest_request_t *request, const shoal_guest_answer_t *answer, void *arg)
{
    if (!answer->cancelled && answer->rc)
        zsys_error("moves: %s: cannot take the move's throttle off its guest: %s", request->claim_id,
                   answer->error);
}

void
shoal_moves_guest_resume(shoal_moves_t *self, const shoal_claim_record_t *claim, const shoal_move_t *move)
{
    //  A move that did not converge may have throttled the guest (and a
    //  restart does not know whether it had): it runs at its full rate again.
    if (shoal_guests_throttles(self->guests, claim->driver)) {
        shoal_guest_request_t unthrottle = { .op = SHOAL_GUEST_THROTTLE, .claim_id = claim->id,
                                             .driver = claim->driver, .throttle = 0 };
        shoal_guests_submit(self->guests, &unthrottle, false, s_unthrottled, NULL);
    }
    char *dir = move ? shoal_moves_files_dir(self, move) : NULL;
    bool paused = move && move->paused;
    //  A paused guest the final round paused again stays so; one whose
    //  manager's abort ran it again is paused once more.
    if (!paused || dir) {
        shoal_guest_request_t request = {
            .op = dir ? SHOAL_GUEST_MIGRATE_ABORT : SHOAL_GUEST_RESUME, .claim_id = claim->id,
            .driver = claim->driver, .if_alive = true, .dir = dir,
        };
        shoal_guests_submit(self->guests, &request, false, s_resumed, NULL);
    }
    if (paused) {
        shoal_guest_request_t pause = { .op = SHOAL_GUEST_PAUSE, .claim_id = claim->id, .driver = claim->driver };
        shoal_guests_submit(self->guests, &pause, false, s_resumed, NULL);
    }
    free(dir);
}

//  The round files of a move live under the node's data directory, named
//  after the move, so that a restart finds them from the record alone.
char *
shoal_moves_files_dir(shoal_moves_t *self, const shoal_move_t *move)
{
    if (!move->driver || !shoal_guests_migrates(self->guests, move->driver) || !move->move_id || !*move->move_id)
        return NULL;
    return zsys_sprintf("%s/%s/%s", self->settings->data_dir, MOVES_FILES_DIR, move->move_id);
}

//  The move ASK is about in MOVES (outgoing or incoming; both hold items
//  that start with their record), or NULL when it ended meanwhile.
void *
shoal_moves_move_find(zhashx_t *moves, const char *claim_id, const char *move_id)
{
    void *item = zhashx_lookup(moves, claim_id);
    return item && shoal_moves_same_move((const shoal_move_t *) item, move_id ? move_id : "") ? item : NULL;
}

void *
shoal_moves_move_for(shoal_moves_t *self, zhashx_t *moves, shoal_move_ask_t *ask)
{
    return self->stopping ? NULL : shoal_moves_move_find(moves, ask->claim_id, ask->move_id);
}

//  Deletes ROLE's record of a move of CLAIM_ID and forgets the move (each
//  side deletes its own record only).
void
shoal_moves_forget(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id)
{
    shoal_move_record_delete(self->store, role, claim_id);
    zhashx_delete(role == SHOAL_MOVE_SOURCE ? self->outgoing : self->incoming, claim_id);
}

shoal_envelope_t *
shoal_moves_refuse(const shoal_envelope_t *request, uint32_t status, const char *format, ...) CHECK_PRINTF(3);

shoal_envelope_t *
shoal_moves_refuse(const shoal_envelope_t *request, uint32_t status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = zsys_vprintf(format, args);
    va_end(args);
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", message);
    free(message);
    return reply;
}

//  MOVE_QUERY: this node's record of a move, for the other side.
static shoal_envelope_t *
s_query(shoal_moves_t *self, const shoal_envelope_t *request)
{
    const shoal_move_t *body = (const shoal_move_t *) request->body;
    shoal_move_t answer = { 0 };
    bool found = false;
    shoal_claim_store_move_get(self->store, body->role, body->claim_id, &answer, &found);
    if (found && !shoal_moves_same_move(&answer, body->move_id ? body->move_id : "")) {
        shoal_msg_move_codec.clear(&answer);
        found = false;
    }
    if (!found) {
        answer.claim_id = shoal_strdup(body->claim_id);
        answer.move_id = shoal_strdup(body->move_id ? body->move_id : "");
        answer.state = SHOAL_MOVE_NONE;
        //  A target that deleted its record after adoption still owns the claim.
        shoal_claim_record_t claim;
        bool held = false;
        if (body->role == SHOAL_MOVE_TARGET && shoal_moves_claim_get(self, body->claim_id, &claim, &held) == 0 && held) {
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
    shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, body->claim_id);
    shoal_move_in_t *in = (shoal_move_in_t *) zhashx_lookup(self->incoming, body->claim_id);
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
        return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "the %s record of the move of claim '%s' on %s is "
                        "damaged and waits for an operator: %s", s_role_name(damaged->role), body->claim_id,
                        self->settings->node_id, damaged->error);
    if (!move)
        return shoal_moves_refuse(request, SHOAL_STATUS_NOT_FOUND, "no move of claim '%s' on %s", body->claim_id,
                        self->settings->node_id);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", move->phase ? move->phase : "");
    shoal_move_t *answer = (shoal_move_t *) shoal_envelope_new_body(reply);
    shoal_move_copy(answer, move);
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
        return shoal_moves_refuse(request, SHOAL_STATUS_INTERNAL, "%s", shoal_claim_store_error(self->store));
    //  The intact records are listed; the message names the others.
    char *message = shoal_strdup("OK");
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

//  Whether a reception of move MOVE_ID of CLAIM_ID is under way here.
static bool
s_receiving(const char *claim_id, const char *move_id, void *arg)
{
    shoal_moves_t *self = (shoal_moves_t *) arg;
    return shoal_moves_move_find(self->incoming, claim_id, move_id) != NULL;
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
            shoal_move_out_t *out = (shoal_move_out_t *) zmalloc(sizeof *out);
            out->owner = self;
            shoal_move_copy(&out->move, record);
            out->next_try = zclock_mono();
            zhashx_update(self->outgoing, record->claim_id, out);
            if (record->state == SHOAL_MOVE_PENDING || record->state == SHOAL_MOVE_FINAL)
                shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the source restarted during the move");
            else
            if (record->state == SHOAL_MOVE_ABORTED)
                shoal_moves_source_restore(self, &out->move);
            else
            if (record->state == SHOAL_MOVE_STARTED)
                shoal_moves_out_drop(self, out, NULL);
            //  committed: the guest stays paused until the target answers.
        }
        else {
            shoal_move_in_t *in = (shoal_move_in_t *) zmalloc(sizeof *in);
            shoal_move_copy(&in->move, record);
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
            shoal_moves_guest_resume(self, claim, NULL);
            shoal_claim_record_t next = *claim;
            next.state = SHOAL_CLAIM_RUNNING;
            if (shoal_claims_step_legal(claim->state, next.state)
            &&  shoal_claim_store_put(self->store, claim, &next) == 0)
                zsys_info("moves: %s was moving with no record: it runs here", claim->id);
        }
    shoal_claim_records_clear(&claims);
    //  Keys staged by a move that has no reception here any more went
    //  with it (shoal_txn.h, step 4).
    if (self->txn)
        shoal_txn_unstage_orphans(self->txn, s_receiving, self);
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

bool
shoal_moves_holds(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id)
{
    return zhashx_lookup(role == SHOAL_MOVE_SOURCE ? self->outgoing : self->incoming, claim_id) != NULL;
}

int
shoal_moves_forget_finished(shoal_moves_t *self, shoal_move_role_t role, const char *claim_id, char *why,
                            size_t why_size)
{
    shoal_move_t record;
    bool found = false;
    if (shoal_claim_store_move_get(self->store, role, claim_id, &record, &found)) {
        snprintf(why, why_size, "%s", shoal_claim_store_error(self->store));
        return -1;
    }
    if (!found) {
        snprintf(why, why_size, "the record is gone already");
        return -1;
    }
    shoal_move_state_t state = record.state;
    shoal_msg_move_codec.clear(&record);
    bool over = role == SHOAL_MOVE_SOURCE ? state == SHOAL_MOVE_ABORTED || state == SHOAL_MOVE_STARTED
                                          : state == SHOAL_MOVE_ADOPTED;
    if (!over) {
        snprintf(why, why_size, "its move is not over (%s)", shoal_move_state_name(state));
        return -1;
    }
    shoal_claim_record_t claim;
    if (shoal_moves_claim_get(self, claim_id, &claim, &found)) {
        snprintf(why, why_size, "%s", shoal_claim_store_error(self->store));
        return -1;
    }
    bool held = found && claim.state != SHOAL_CLAIM_RELEASED;
    if (found)
        shoal_claim_codec.clear(&claim);
    if (held) {
        snprintf(why, why_size, "claim '%s' is held here: its move's end is the moves' to see to", claim_id);
        return -1;
    }
    shoal_move_out_t *out = role == SHOAL_MOVE_SOURCE ? (shoal_move_out_t *) zhashx_lookup(self->outgoing, claim_id)
                                                      : NULL;
    shoal_move_in_t *in = role == SHOAL_MOVE_TARGET ? (shoal_move_in_t *) zhashx_lookup(self->incoming, claim_id)
                                                    : NULL;
    if ((out && (out->sender || out->dropping)) || (in && (in->dropping || in->asking))) {
        snprintf(why, why_size, "work of its move is in flight");
        return -1;
    }
    shoal_moves_forget(self, role, claim_id);
    return 0;
}

void
shoal_moves_tick(shoal_moves_t *self)
{
    int64_t now = zclock_mono();
    uint64_t wall = (uint64_t) shoal_moves_wall();
    uint64_t ttl = (uint64_t) self->settings->move_record_ttl_ms;
    zlistx_t *ids = zhashx_keys(self->outgoing);
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, id);
        if (!out || out->dropping)
            continue;
        shoal_move_t *move = &out->move;
        if (move->state == SHOAL_MOVE_FINAL && out->deadline && now > out->deadline) {
            char reason[MOVES_MESSAGE_MAX];
            snprintf(reason, sizeof reason, "node %s did not ask to commit within %" PRId64 " ms of the final "
                     "round's end (move/final_timeout_ms)", move->to, self->settings->move_final_ms);
            shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, reason);
        }
        else
        if (move->state == SHOAL_MOVE_ABORTED && now >= out->next_try) {
            out->next_try = now + MOVES_RETRY_MS;
            if (wall > move->updated_ms + ttl)
                shoal_moves_out_finish(self, out);
            else
                shoal_moves_send(self, move->to, SHOAL_MSG_MOVE_ABORT, move, shoal_moves_abort_done);
        }
        else
        if ((move->state == SHOAL_MOVE_COMMITTED || move->state == SHOAL_MOVE_STARTED) && now >= out->next_try) {
            out->next_try = now + MOVES_RETRY_MS;
            shoal_move_t query;
            shoal_move_copy(&query, move);
            query.role = SHOAL_MOVE_TARGET;
            shoal_moves_send(self, move->to, SHOAL_MSG_MOVE_QUERY, &query, shoal_moves_query_target_done);
            shoal_msg_move_codec.clear(&query);
        }
    }
    zlistx_destroy(&ids);
    ids = zhashx_keys(self->incoming);
    for (const char *id = (const char *) zlistx_first(ids); id; id = (const char *) zlistx_next(ids)) {
        shoal_move_in_t *in = (shoal_move_in_t *) zhashx_lookup(self->incoming, id);
        if (!in || in->dropping)
            continue;
        shoal_move_t *move = &in->move;
        if (move->state == SHOAL_MOVE_RECEIVING && in->expecting && now > in->deadline) {
            shoal_moves_in_drop(self, in, "the source went quiet");
            continue;
        }
        if (in->asking || now < in->next_try)
            continue;
        if (wall > move->updated_ms + ttl && move->state != SHOAL_MOVE_ADOPTED) {
            shoal_moves_in_drop(self, in, "the record outlived move/record_ttl_ms");
            continue;
        }
        in->next_try = now + MOVES_RETRY_MS;
        if (move->state == SHOAL_MOVE_ADOPTED)
            shoal_moves_in_adopt(self, in);
        else
        if (move->state == SHOAL_MOVE_RECEIVED || !in->expecting) {
            //  Ask the source what became of the move.
            shoal_move_t query;
            shoal_move_copy(&query, move);
            query.role = SHOAL_MOVE_SOURCE;
            in->asking = shoal_moves_send(self, move->from, SHOAL_MSG_MOVE_QUERY, &query, shoal_moves_query_source_done) == 0;
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

//  Whether the guest of moving claim ID is paused: for the final round, or
//  since before its move (a paused claim moves paused).
static bool
s_paused(const char *id, void *arg)
{
    shoal_moves_t *self = (shoal_moves_t *) arg;
    shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, id);
    return !out || out->move.paused || out->paused_at != 0 || out->move.state != SHOAL_MOVE_PENDING;
}

shoal_moves_t *
shoal_moves_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster, shoal_claims_t *claims,
                shoal_guests_t *guests, shoal_mesh_t *mesh, char **error_p)
{
    char *bind = *settings->move_bind ? shoal_strdup(settings->move_bind) : NULL;
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
    self->guests = guests;
    self->store = shoal_claims_store(claims);
    self->mesh = mesh;
    self->cluster = zcert_dup(cluster);
    self->receiver = receiver;
    self->outgoing = zhashx_new();
    zhashx_set_destructor(self->outgoing, shoal_moves_out_destroy);
    self->incoming = zhashx_new();
    zhashx_set_destructor(self->incoming, shoal_moves_in_destroy);
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
        shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, id);
        if (out && (out->move.state == SHOAL_MOVE_PENDING || out->move.state == SHOAL_MOVE_FINAL))
            shoal_moves_out_abort(self, out, SHOAL_STATUS_UNAVAILABLE, "the source is stopping");
    }
    zlistx_destroy(&ids);
}

void
shoal_moves_set_txn(shoal_moves_t *self, shoal_txn_t *txn)
{
    self->txn = txn;
}

void
shoal_moves_set_metrics(shoal_moves_t *self, shoal_metrics_t *metrics)
{
    self->metrics = metrics;
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
    zloop_reader(loop, shoal_receiver_sock(self->receiver), shoal_moves_receiver_readable, self);
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
                return shoal_moves_refuse(request, SHOAL_STATUS_FORBIDDEN, "moves are for operators (role %s)", caller->role);
            break;
        default:
            if (!node)
                return shoal_moves_refuse(request, SHOAL_STATUS_FORBIDDEN, "%s is between nodes only",
                                shoal_msg_type_name(request->type));
            break;
    }
    switch (request->type) {
        case SHOAL_MSG_MOVE: return shoal_moves_move(self, request, routing_id);
        case SHOAL_MSG_MOVE_STATUS: return s_status(self, request);
        case SHOAL_MSG_MOVE_RESUME: return shoal_moves_resume(self, request);
        case SHOAL_MSG_MOVE_LIST: return s_list(self, request);
        case SHOAL_MSG_MOVE_ADMIT: return shoal_moves_admit(self, request, routing_id);
        case SHOAL_MSG_MOVE_PREPARE: return shoal_moves_prepare(self, request);
        case SHOAL_MSG_MOVE_COMMIT: return shoal_moves_commit(self, request);
        case SHOAL_MSG_MOVE_STARTED: return shoal_moves_started(self, request);
        case SHOAL_MSG_MOVE_ABORT: return shoal_moves_abort(self, request);
        case SHOAL_MSG_MOVE_QUERY: return s_query(self, request);
        default:
            return shoal_moves_refuse(request, SHOAL_STATUS_BAD_REQUEST, "%s is not a move request",
                            shoal_msg_type_name(request->type));
    }
}

size_t
shoal_moves_active(shoal_moves_t *self)
{
    return shoal_moves_in_flight(self);
}

bool
shoal_moves_progress(shoal_moves_t *self, const char *claim_id, uint64_t *bytes_sent, const char **phase)
{
    shoal_move_out_t *out = (shoal_move_out_t *) zhashx_lookup(self->outgoing, claim_id);
    if (!out || out->move.state == SHOAL_MOVE_ABORTED)
        return false;
    *bytes_sent = out->move.bytes_sent;
    *phase = out->move.phase ? out->move.phase : "";
    return true;
}
