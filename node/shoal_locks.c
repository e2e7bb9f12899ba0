/*  shoal_locks: the rules of a claim's read/write lock. See shoal_locks.h. */
#include "shoal_locks.h"
#include "shoal_fault.h"
#include "shoal_alloc.h"

//  What a moving claim's lock request is told to wait before retrying.
#define LOCKS_RETRY_AFTER_MS 100
//  What a refused reader is told to wait before it resolves the claim
//  again and asks again (libshoal doubles it each time).
#define LOCKS_READER_RETRY_MS 100

struct _shoal_locks_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    shoal_txn_t *txn;                   //  where the locks are kept, and the leases' check (borrowed)
    shoal_claims_t *claims;             //  whose claims are locked (borrowed)
    shoal_mesh_t *mesh;                 //  which holder nodes may hold locks now, and their runs (borrowed)
};

static int s_sweep(shoal_locks_t *self, const char *node_id, uint64_t boot, size_t *failed_p);

//  At start: the locks whose holders ran on this node under an earlier run
//  go. Their holders' connections ended with that run, and no peer sweeps
//  them (a peer sweeps only the locks it keeps): this node keeps them.
static void
s_sweep_own(shoal_locks_t *self)
{
    size_t failed = 0;
    int swept = s_sweep(self, self->settings->node_id, shoal_mesh_boot(self->mesh), &failed);
    if (swept > 0 || failed)
        zsys_info("locks: swept %d lock(s) held from this node under an earlier run (%zu could not be rolled "
                  "back)", swept, failed);
}

shoal_locks_t *
shoal_locks_new(const shoal_settings_t *settings, shoal_txn_t *txn, shoal_claims_t *claims, shoal_mesh_t *mesh)
{
    shoal_locks_t *self = (shoal_locks_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->txn = txn;
    self->claims = claims;
    self->mesh = mesh;
    s_sweep_own(self);
    return self;
}

void
shoal_locks_destroy(shoal_locks_t **self_p)
{
    if (*self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

bool
shoal_locks_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_LOCK || type == SHOAL_MSG_LOCK_SWEEP;
}

static void
s_text_set(char **field, const char *text)
{
    free(*field);
    *field = shoal_strdup(text);
}

//  Takes what RECORD holds out of STATE.
static void
s_state_drop(shoal_msg_locks_t *state, const shoal_msg_lock_record_t *record)
{
    if (record->mode == SHOAL_LOCK_READ && state->readers)
        state->readers--;
    if (record->mode == SHOAL_LOCK_WRITE && streq(state->writer, record->holder))
        s_text_set(&state->writer, "");
    if (record->mode == SHOAL_LOCK_WAIT && streq(state->waiter, record->holder))
        s_text_set(&state->waiter, "");
}

int
shoal_locks_rollback(shoal_key_space_t *space, const char *claim_id, const char *holder, uint64_t lease)
{
    shoal_msg_lock_record_t record;
    bool found = false;
    if (shoal_key_space_lock_get(space, claim_id, holder, &record, &found))
        return -1;
    if (found && lease && record.lease != lease) {
        shoal_msg_lock_record_codec.clear(&record);
        return 0;
    }
    if (!found)
        return 0;
    shoal_msg_locks_t state;
    int rc = shoal_key_space_lock_state(space, claim_id, &state);
    if (rc == 0) {
        s_state_drop(&state, &record);
        rc = shoal_key_space_lock_write(space, &state, NULL, holder, record.lease);
        shoal_msg_locks_codec.clear(&state);
    }
    if (rc == 0)
        zsys_info("locks: %s's %s lock of %s rolled back", holder, shoal_lock_mode_name(record.mode), claim_id);
    shoal_msg_lock_record_codec.clear(&record);
    return rc;
}

//  The reply carrying STATE (taken) and its records.
static shoal_envelope_t *
s_state_reply(shoal_locks_t *self, const shoal_envelope_t *request, shoal_msg_locks_t *state, bool granted,
              const char *message)
{
    shoal_key_space_t *space = shoal_txn_space(self->txn);
    if (shoal_key_space_lock_records(space, state->claim_id, state)) {
        shoal_msg_locks_codec.clear(state);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(space));
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    shoal_msg_locks_t *body = (shoal_msg_locks_t *) shoal_envelope_new_body(reply);
    *body = *state;
    body->granted = granted;
    memset(state, 0, sizeof *state);
    return reply;
}

//  Decides an acquire by HOLDER in STATE, HELD its record (NULL: none).
//  Returns the record to write (NULL: none), or sets *REFUSAL_P (a status)
//  and MESSAGE. *GRANTED_P says whether the holder holds the lock after.
static shoal_msg_lock_record_t *
s_decide(const shoal_msg_lock_request_t *body, const char *holder, shoal_msg_locks_t *state,
         const shoal_msg_lock_record_t *held, bool *granted_p, uint32_t *refusal_p, char *message, size_t size)
{
    *granted_p = false;
    *refusal_p = 0;
    shoal_lock_mode_t next = 0;
    if (held && held->mode == body->mode) {
        *granted_p = true;
        snprintf(message, size, "%s already holds the %s lock", holder, shoal_lock_mode_name(held->mode));
        return NULL;
    }
    if (held && !(held->mode == SHOAL_LOCK_WAIT && body->mode == SHOAL_LOCK_WRITE)) {
        *refusal_p = SHOAL_STATUS_CONFLICT;
        snprintf(message, size, "%s holds the %s lock of claim '%s': release it first", holder,
                 shoal_lock_mode_name(held->mode), state->claim_id);
        return NULL;
    }
    if (body->mode == SHOAL_LOCK_READ) {
        if (*state->writer || *state->waiter) {
            *refusal_p = SHOAL_STATUS_CONFLICT;
            snprintf(message, size, "claim '%s' is %s %s: resolve the claim again (lookup) before asking again, "
                     "do not spin on it", state->claim_id, *state->writer ? "locked for writing by" : "awaited by writer",
                     *state->writer ? state->writer : state->waiter);
            return NULL;
        }
        state->readers++;
        next = SHOAL_LOCK_READ;
        *granted_p = true;
        snprintf(message, size, "read lock granted");
    }
    else
    if (*state->writer || (*state->waiter && !streq(state->waiter, holder))) {
        *refusal_p = SHOAL_STATUS_CONFLICT;
        snprintf(message, size, "claim '%s' is %s %s: ask again later, or give up", state->claim_id,
                 *state->writer ? "locked for writing by" : "awaited by another writer,",
                 *state->writer ? state->writer : state->waiter);
        return NULL;
    }
    else
    if (state->readers) {
        if (!body->wait && !held) {
            *refusal_p = SHOAL_STATUS_CONFLICT;
            snprintf(message, size, "claim '%s' has %" PRIu64 " reader(s): ask again later, or set wait to stop "
                     "new readers", state->claim_id, state->readers);
            return NULL;
        }
        snprintf(message, size, "waiting for %" PRIu64 " reader(s) to leave: new readers are refused meanwhile; "
                 "ask again", state->readers);
        if (held)
            return NULL;
        s_text_set(&state->waiter, holder);
        next = SHOAL_LOCK_WAIT;
    }
    else {
        s_text_set(&state->writer, holder);
        if (held)
            s_text_set(&state->waiter, "");
        next = SHOAL_LOCK_WRITE;
        *granted_p = true;
        snprintf(message, size, "write lock granted");
    }
    shoal_msg_lock_record_t *record = (shoal_msg_lock_record_t *) zmalloc(sizeof *record);
    record->mode = next;
    return record;
}

static shoal_envelope_t *
s_lock(shoal_locks_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, const char *claim_id,
       const shoal_claim_record_t *claim)
{
    const shoal_msg_lock_request_t *body = (const shoal_msg_lock_request_t *) request->body;
    shoal_key_space_t *space = shoal_txn_space(self->txn);
    const char *holder = *body->holder ? body->holder : caller->name;
    if (!*holder)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "name the lock's holder");
    shoal_msg_locks_t state;
    if (shoal_key_space_lock_state(space, claim_id, &state))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(space));
    if (body->op == SHOAL_LOCK_LIST)
        return s_state_reply(self, request, &state, false, "OK");
    shoal_msg_lock_record_t held;
    bool found = false;
    if (shoal_key_space_lock_get(space, claim_id, holder, &held, &found)) {
        shoal_msg_locks_codec.clear(&state);
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(space));
    }
    shoal_envelope_t *reply = NULL;
    //  The lock goes with the claim in its move's final step: it changes
    //  neither way while the claim moves.
    if (claim->state == SHOAL_CLAIM_MOVING) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "claim '%s' is moving: its lock goes with "
                                     "it, retry", claim_id);
        reply->retry_after_ms = LOCKS_RETRY_AFTER_MS;
    }
    else
    if (body->op == SHOAL_LOCK_RELEASE) {
        if (!found)
            reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "%s holds no lock of claim '%s'", holder,
                                         claim_id);
        else {
            s_state_drop(&state, &held);
            if (shoal_key_space_lock_write(space, &state, NULL, holder, held.lease))
                reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(space));
            else
                reply = s_state_reply(self, request, &state, false, "released");
        }
    }
    else {
        bool granted = false;
        uint32_t refusal = 0;
        char message[512];
        //  A lock is taken for a holder on a node this node counts alive
        //  and swept (shoal_mesh.h), under that node's run.
        const char *holder_node = *body->holder_node ? body->holder_node : self->settings->node_id;
        uint64_t holder_boot = shoal_mesh_boot(self->mesh);
        if (!streq(holder_node, self->settings->node_id)
        &&  !shoal_mesh_peer_ready(self->mesh, holder_node, &holder_boot, message, sizeof message)) {
            reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "no lock for a holder on node %s now: "
                                         "%s; retry", holder_node, message);
            reply->retry_after_ms = LOCKS_RETRY_AFTER_MS;
        }
        if (!reply && body->lease)
            reply = shoal_txn_lease_check(self->txn, body->lease, request, caller);
        shoal_msg_lock_record_t *record = reply ? NULL
            : s_decide(body, holder, &state, found ? &held : NULL, &granted, &refusal, message, sizeof message);
        if (!reply && refusal) {
            reply = shoal_envelope_reply(request, refusal, "%s", message);
            //  Only a refused reader is told to come back (resolved again).
            if (body->mode == SHOAL_LOCK_READ && !found)
                reply->retry_after_ms = LOCKS_READER_RETRY_MS;
        }
        else
        if (!reply && record) {
            record->claim_id = shoal_strdup(claim_id);
            record->holder = shoal_strdup(holder);
            record->holder_node = shoal_strdup(holder_node);
            record->holder_boot = holder_boot;
            //  A waiter taking the lock replaces its wait record, and keeps
            //  its lease unless it names another.
            record->lease = body->lease ? body->lease : found ? held.lease : 0;
            record->time_ms = (uint64_t) zclock_time();
            bool relinked = found && held.lease && held.lease != record->lease;
            if (shoal_key_space_lock_write(space, &state, record, relinked ? holder : NULL, found ? held.lease : 0))
                reply = shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_key_space_error(space));
        }
        if (!reply)
            reply = s_state_reply(self, request, &state, granted, message);
        if (record) {
            shoal_msg_lock_record_codec.clear(record);
            free(record);
        }
    }
    if (found)
        shoal_msg_lock_record_codec.clear(&held);
    shoal_msg_locks_codec.clear(&state);
    return reply;
}

//  Rolls back every lock whose holder runs on NODE_ID, or with BOOT not 0,
//  only those taken under another run of it. Returns how many went, and
//  *FAILED_P those that could not be rolled back, or -1 when the locks
//  cannot be read (logged).
static int
s_sweep(shoal_locks_t *self, const char *node_id, uint64_t boot, size_t *failed_p)
{
    shoal_key_space_t *space = shoal_txn_space(self->txn);
    shoal_msg_locks_t all = { 0 };
    *failed_p = 0;
    if (shoal_key_space_lock_all(space, &all)) {
        zsys_error("locks: the sweep for %s cannot read the locks: %s", node_id, shoal_key_space_error(space));
        return -1;
    }
    int swept = 0;
    for (size_t i = 0; i < all.count; i++) {
        const shoal_msg_lock_record_t *record = &all.records[i];
        if (!streq(record->holder_node, node_id) || (boot && record->holder_boot == boot))
            continue;
        if (shoal_locks_rollback(space, record->claim_id, record->holder, 0) == 0)
            swept++;
        else
            (*failed_p)++;
    }
    shoal_msg_locks_codec.clear(&all);
    return swept;
}

//  LOCK_SWEEP: a peer tells its run (shoal_mesh.c, THE LOCK SWEEP OF A RUN,
//  step 2): locks its holders took under earlier runs go, then the mesh
//  counts it alive again.
static shoal_envelope_t *
s_sweep_run(shoal_locks_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_lock_request_t *body = (const shoal_msg_lock_request_t *) request->body;
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "lock_sweep comes from nodes only, not from "
                                    "role %s", caller->role);
    if (body->op != SHOAL_LOCK_SWEEP)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "lock_sweep carries op sweep, not %s",
                                    shoal_lock_op_name(body->op));
    //  A test's fault holds the sweep while a file exists: the peer tells again.
    if (shoal_fault_held("locks", "sweep")) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "the sweep of %s's "
                                                       "earlier runs is held (fault): tell again", body->holder_node);
        reply->retry_after_ms = LOCKS_RETRY_AFTER_MS;
        return reply;
    }
    size_t failed = 0;
    int swept = s_sweep(self, body->holder_node, body->holder_boot, &failed);
    if (swept < 0 || failed)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "the locks of %s's earlier runs could not "
                                    "all be rolled back: tell again", body->holder_node);
    if (swept)
        zsys_info("locks: swept %d lock(s) held from %s under an earlier run (its run now started at %" PRIu64 ")",
                  swept, body->holder_node, body->holder_boot);
    if (shoal_mesh_confirm(self->mesh, body->holder_node, body->holder_incarnation, body->holder_boot)) {
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE, "node %s is not a "
                                                       "member here yet: tell again", body->holder_node);
        reply->retry_after_ms = LOCKS_RETRY_AFTER_MS;
        return reply;
    }
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "swept %d lock(s)", swept);
}

shoal_envelope_t *
shoal_locks_handle(shoal_locks_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (request->type == SHOAL_MSG_LOCK_SWEEP)
        return s_sweep_run(self, request, caller);
    const shoal_msg_lock_request_t *body = (const shoal_msg_lock_request_t *) request->body;
    if (body->op == SHOAL_LOCK_SWEEP)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a sweep is a lock_sweep request, "
                                    "between nodes");
    shoal_claim_record_t claim;
    shoal_envelope_t *reply = shoal_claims_find(self->claims, request, caller, body->claim_id, &claim);
    if (reply)
        return reply;
    if (claim.state == SHOAL_CLAIM_RELEASED)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "claim '%s' was released", claim.id);
    else
        reply = s_lock(self, request, caller, claim.id, &claim);
    shoal_claim_codec.clear(&claim);
    return reply;
}

void
shoal_locks_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg)
{
    shoal_locks_t *self = (shoal_locks_t *) arg;
    if (event != SHOAL_MESH_DEAD && event != SHOAL_MESH_LEFT && event != SHOAL_MESH_REJOINED)
        return;
    size_t failed = 0;
    int swept = s_sweep(self, node_id, 0, &failed);
    if (swept > 0 || failed)
        zsys_info("locks: swept %d lock(s) held from %s, %s (%zu could not be rolled back)", swept, node_id,
                  shoal_mesh_event_name(event), failed);
}
