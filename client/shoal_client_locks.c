/*  shoal_client_locks: read/write locks on claims. */
#include "shoal_client_internal.h"
#include "shoal_alloc.h"

static int
s_lock_call(shoal_client_t *self, shoal_lock_op_t op, const char *id, const char *holder, shoal_lock_mode_t mode,
            bool wait, uint64_t lease, shoal_lock_state_t *state)
{
    if (state)
        memset(state, 0, sizeof *state);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LOCK, 0);
    shoal_msg_lock_request_t *body = (shoal_msg_lock_request_t *) shoal_envelope_new_body(request);
    body->op = op;
    body->claim_id = shoal_strdup(id ? id : "");
    body->holder = shoal_strdup(holder ? holder : "");
    body->mode = mode;
    body->wait = wait;
    body->lease = lease;
    //  The holder runs where this client connects: its locks are swept
    //  when that node is declared dead.
    const char *node = op == SHOAL_LOCK_ACQUIRE ? shoal_client_node_id(self) : NULL;
    body->holder_node = shoal_strdup(node ? node : "");
    shoal_envelope_t *reply;
    int rc = shoal_client_call_claim(self, id ? id : "", &request, &reply);
    if (rc == SHOAL_STATUS_OK && state) {
        const shoal_msg_locks_t *answer = (const shoal_msg_locks_t *) reply->body;
        state->granted = answer->granted;
        state->readers = answer->readers;
        state->writer = shoal_strdup(answer->writer);
        state->waiter = shoal_strdup(answer->waiter);
        state->records = (shoal_lock_record_t *) zmalloc((answer->count + 1) * sizeof *state->records);
        state->count = answer->count;
        for (size_t i = 0; i < answer->count; i++) {
            const shoal_msg_lock_record_t *from = &answer->records[i];
            shoal_lock_record_t *to = &state->records[i];
            to->holder = shoal_strdup(from->holder);
            to->holder_node = shoal_strdup(from->holder_node);
            to->mode = shoal_strdup(shoal_lock_mode_name(from->mode));
            to->lease = from->lease;
            to->time_ms = from->time_ms;
        }
    }
    shoal_envelope_destroy(&reply);
    return rc;
}

int
shoal_client_lock_acquire(shoal_client_t *self, const char *id, const char *holder, const char *mode, bool wait,
                          uint64_t lease, shoal_lock_state_t *state)
{
    shoal_lock_mode_t wanted = mode && streq(mode, "read") ? SHOAL_LOCK_READ
                             : mode && streq(mode, "write") ? SHOAL_LOCK_WRITE : 0;
    int rc = s_lock_call(self, SHOAL_LOCK_ACQUIRE, id, holder, wanted, wait, lease, state);
    //  A refused reader is told to resolve the claim again (the refusal
    //  carries a retry-after; other refusals do not): each call resolves
    //  the owner anew (the node first, then a lookup on 404), so it waits
    //  and calls again, a bounded number of times.
    unsigned resolved = 0;
    uint32_t pause_ms = shoal_client_retry_after_ms(self);
    while (rc == SHOAL_STATUS_CONFLICT && wanted == SHOAL_LOCK_READ && pause_ms
       &&  resolved < shoal_client_read_resolves(self)) {
        zclock_sleep((int) pause_ms);
        resolved++;
        pause_ms = pause_ms * 2 < SHOAL_LOCK_READ_WAIT_MAX_MS ? pause_ms * 2 : SHOAL_LOCK_READ_WAIT_MAX_MS;
        if (state)
            shoal_lock_state_clear(state);
        rc = s_lock_call(self, SHOAL_LOCK_ACQUIRE, id, holder, wanted, wait, lease, state);
        if (rc == SHOAL_STATUS_CONFLICT && !shoal_client_retry_after_ms(self))
            break;
    }
    if (state)
        state->resolved = resolved;
    if (rc == SHOAL_STATUS_CONFLICT && resolved) {
        char last[512];
        snprintf(last, sizeof last, "%s", shoal_client_error(self));
        shoal_client_set_error(self, "%s (refused again after resolving the claim %u time(s))", last, resolved);
    }
    return rc;
}

int
shoal_client_lock_release(shoal_client_t *self, const char *id, const char *holder, shoal_lock_state_t *state)
{
    return s_lock_call(self, SHOAL_LOCK_RELEASE, id, holder, 0, false, 0, state);
}

int
shoal_client_lock_list(shoal_client_t *self, const char *id, shoal_lock_state_t *state)
{
    return s_lock_call(self, SHOAL_LOCK_LIST, id, NULL, 0, false, 0, state);
}

void
shoal_lock_state_clear(shoal_lock_state_t *state)
{
    for (size_t i = 0; state->records && i < state->count; i++) {
        free(state->records[i].holder);
        free(state->records[i].holder_node);
        free(state->records[i].mode);
    }
    free(state->records);
    free(state->writer);
    free(state->waiter);
    memset(state, 0, sizeof *state);
}
