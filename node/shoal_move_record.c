/*  shoal_move_record: the move records and their steps. See the header.
*/
#include "shoal_move_record.h"

#include <czmq.h>

#define RECORD_MESSAGE_MAX 512
#define RECORD_STATES (SHOAL_MOVE_ADOPTED + 1)

//  Legal steps, by role: s_source[from][to], s_target[from][to].
static const bool s_source[RECORD_STATES][RECORD_STATES] = {
    [SHOAL_MOVE_NONE] = { [SHOAL_MOVE_PENDING] = true },
    [SHOAL_MOVE_PENDING] = { [SHOAL_MOVE_FINAL] = true, [SHOAL_MOVE_ABORTED] = true },
    [SHOAL_MOVE_FINAL] = { [SHOAL_MOVE_COMMITTED] = true, [SHOAL_MOVE_ABORTED] = true },
    [SHOAL_MOVE_COMMITTED] = { [SHOAL_MOVE_STARTED] = true, [SHOAL_MOVE_ABORTED] = true },
    [SHOAL_MOVE_STARTED] = { [SHOAL_MOVE_STARTED] = true, [SHOAL_MOVE_NONE] = true },
    [SHOAL_MOVE_ABORTED] = { [SHOAL_MOVE_ABORTED] = true, [SHOAL_MOVE_NONE] = true },
};

static const bool s_target[RECORD_STATES][RECORD_STATES] = {
    [SHOAL_MOVE_NONE] = { [SHOAL_MOVE_RECEIVING] = true },
    [SHOAL_MOVE_RECEIVING] = { [SHOAL_MOVE_RECEIVED] = true, [SHOAL_MOVE_NONE] = true },
    [SHOAL_MOVE_RECEIVED] = { [SHOAL_MOVE_ADOPTED] = true, [SHOAL_MOVE_NONE] = true },
    [SHOAL_MOVE_ADOPTED] = { [SHOAL_MOVE_ADOPTED] = true, [SHOAL_MOVE_NONE] = true },
};

bool
shoal_move_step_legal(shoal_move_role_t role, shoal_move_state_t from, shoal_move_state_t to)
{
    if ((int) from < 0 || from >= RECORD_STATES || (int) to < 0 || to >= RECORD_STATES)
        return false;
    if (role == SHOAL_MOVE_SOURCE)
        return s_source[from][to];
    if (role == SHOAL_MOVE_TARGET)
        return s_target[from][to];
    return false;
}

static const char *
s_role_name(shoal_move_role_t role)
{
    return role == SHOAL_MOVE_SOURCE ? "source" : role == SHOAL_MOVE_TARGET ? "target" : "unknown";
}

static const char *
s_state_name(shoal_move_state_t state)
{
    return state == SHOAL_MOVE_NONE ? "none" : shoal_move_state_name(state);
}

//  The state of ROLE's stored record of CLAIM_ID (SHOAL_MOVE_NONE: none)
//  into *STATE. Returns 0 or -1 (logged).
static int
s_stored_state(shoal_claim_store_t *store, shoal_move_role_t role, const char *claim_id, shoal_move_state_t *state)
{
    shoal_move_t stored;
    bool found = false;
    memset(&stored, 0, sizeof stored);
    if (shoal_claim_store_move_get(store, role, claim_id, &stored, &found)) {
        zsys_error("moves: %s: cannot read its %s record: %s", claim_id, s_role_name(role),
                   shoal_claim_store_error(store));
        return -1;
    }
    *state = found ? stored.state : SHOAL_MOVE_NONE;
    if (found)
        shoal_msg_move_codec.clear(&stored);
    return 0;
}

//  Checks ROLE's step FROM -> TO of CLAIM_ID. Returns 0 or -1 (logged).
static int
s_step_check(shoal_move_role_t role, const char *claim_id, shoal_move_state_t from, shoal_move_state_t to)
{
    if (shoal_move_step_legal(role, from, to))
        return 0;
    zsys_error("moves: %s: its %s record cannot go from %s to %s: not written", claim_id, s_role_name(role),
               s_state_name(from), s_state_name(to));
    return -1;
}

int
shoal_move_record_write(shoal_claim_store_t *store, shoal_move_t *move, const shoal_claim_record_t *previous,
                        const shoal_claim_record_t *record, bool lazy)
{
    shoal_move_state_t from;
    if (s_stored_state(store, move->role, move->claim_id, &from)
    ||  s_step_check(move->role, move->claim_id, from, move->state))
        return -1;
    move->updated_ms = (uint64_t) zclock_time();
    if (shoal_claim_store_change(store, previous, record, move, !lazy)) {
        zsys_error("moves: %s: cannot write its %s record as %s: %s", move->claim_id, s_role_name(move->role),
                   shoal_move_state_name(move->state), shoal_claim_store_error(store));
        return -1;
    }
    return 0;
}

int
shoal_move_record_delete(shoal_claim_store_t *store, shoal_move_role_t role, const char *claim_id)
{
    shoal_move_state_t from;
    if (s_stored_state(store, role, claim_id, &from))
        return -1;
    if (from == SHOAL_MOVE_NONE)
        return 0;
    if (s_step_check(role, claim_id, from, SHOAL_MOVE_NONE))
        return -1;
    if (shoal_claim_store_move_delete(store, role, claim_id)) {
        zsys_error("moves: %s: cannot delete its %s record: %s", claim_id, s_role_name(role),
                   shoal_claim_store_error(store));
        return -1;
    }
    return 0;
}

void
shoal_move_copy(shoal_move_t *copy, const shoal_move_t *move)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[RECORD_MESSAGE_MAX];
    memset(copy, 0, sizeof *copy);
    if (shoal_msg_move_codec.encode(move, &bytes, &size, error, sizeof error) == 0)
        shoal_msg_move_codec.decode(bytes, size, copy, error, sizeof error);
    free(bytes);
}
