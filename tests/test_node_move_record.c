/*  The move records' steps, without a cluster: every pair of states of
    each role, written through shoal_move_record into a real store, is
    taken when the design allows it and refused (the stored record
    unchanged) when it does not.
*/
#include "shoal_test.h"
#include "shoal_move_record.h"

#include <czmq.h>

#define S_CLAIM "acme/web/c1"
#define S_STATES (SHOAL_MOVE_ADOPTED + 1)

//  The steps the design names (shoal_move_record.h), spelled out again
//  here so that a change of the table is a change of this test too.
static const char *s_source_steps[] = {
    "none>pending", "pending>final", "pending>aborted", "final>committed", "final>aborted",
    "committed>started", "committed>aborted", "started>started", "started>none",
    "aborted>aborted", "aborted>none",
};
static const char *s_target_steps[] = {
    "none>receiving", "receiving>received", "receiving>none", "received>adopted", "received>none",
    "adopted>adopted", "adopted>none",
};

static const char *
s_name(shoal_move_state_t state)
{
    return state == SHOAL_MOVE_NONE ? "none" : shoal_move_state_name(state);
}

static bool
s_expected(shoal_move_role_t role, shoal_move_state_t from, shoal_move_state_t to)
{
    char step[64];
    snprintf(step, sizeof step, "%s>%s", s_name(from), s_name(to));
    const char **steps = role == SHOAL_MOVE_SOURCE ? s_source_steps : s_target_steps;
    size_t count = role == SHOAL_MOVE_SOURCE ? sizeof s_source_steps / sizeof *s_source_steps
                                             : sizeof s_target_steps / sizeof *s_target_steps;
    for (size_t i = 0; i < count; i++)
        if (streq(steps[i], step))
            return true;
    return false;
}

static shoal_store_t *
s_store_open(void)
{
    char *db = zsys_sprintf("%s/db", shoal_test_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    shoal_store_t *store = shoal_store_new(db, &options, NULL);
    free(db);
    return store;
}

static shoal_move_t
s_move(shoal_move_role_t role, shoal_move_state_t state)
{
    shoal_move_t move = {
        .move_id = "m-1", .claim_id = S_CLAIM, .from = "n1", .to = "n2", .state = state, .role = role,
        .tenant = "acme/web", .driver = "proc", .memory_bytes = 1 << 20,
    };
    return move;
}

//  Puts ROLE's record in STATE (none: no record) behind the module's back.
static int
s_plant(shoal_claim_store_t *claims, shoal_move_role_t role, shoal_move_state_t state)
{
    if (state == SHOAL_MOVE_NONE)
        return shoal_claim_store_move_delete(claims, role, S_CLAIM);
    shoal_move_t move = s_move(role, state);
    return shoal_claim_store_change(claims, NULL, NULL, &move, false);
}

//  ROLE's stored state (none: no record), or -1 when it cannot be read.
static int
s_stored(shoal_claim_store_t *claims, shoal_move_role_t role)
{
    shoal_move_t move;
    bool found = false;
    memset(&move, 0, sizeof move);
    if (shoal_claim_store_move_get(claims, role, S_CLAIM, &move, &found))
        return -1;
    int state = found ? (int) move.state : SHOAL_MOVE_NONE;
    if (found)
        shoal_msg_move_codec.clear(&move);
    return state;
}

//  Every pair of states of both roles: legal steps are taken, the others
//  refused with the record as it was.
static void
test_every_step(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    shoal_claim_store_t *claims = shoal_claim_store_new(store, false);
    shoal_move_role_t roles[] = { SHOAL_MOVE_SOURCE, SHOAL_MOVE_TARGET };
    int taken = 0, refused = 0, wrong = 0;
    for (size_t r = 0; r < 2; r++) {
        shoal_move_role_t role = roles[r];
        for (int from = 0; from < S_STATES; from++)
            for (int to = 0; to < S_STATES; to++) {
                bool expected = s_expected(role, (shoal_move_state_t) from, (shoal_move_state_t) to);
                bool table = shoal_move_step_legal(role, (shoal_move_state_t) from, (shoal_move_state_t) to);
                if (s_plant(claims, role, (shoal_move_state_t) from)) {
                    wrong++;
                    continue;
                }
                int rc;
                if (to == SHOAL_MOVE_NONE)
                    rc = shoal_move_record_delete(claims, role, S_CLAIM);
                else {
                    shoal_move_t move = s_move(role, (shoal_move_state_t) to);
                    rc = shoal_move_record_write(claims, &move, NULL, NULL, true);
                }
                int stored = s_stored(claims, role);
                //  From none to none there is nothing to delete: no step,
                //  no error, and the table has no such step.
                bool nothing = from == SHOAL_MOVE_NONE && to == SHOAL_MOVE_NONE;
                bool ok = table == expected
                       && (nothing ? rc == 0 && stored == SHOAL_MOVE_NONE
                                   : expected ? rc == 0 && stored == to : rc == -1 && stored == from);
                if (!ok) {
                    fprintf(stderr, "%s %s -> %s: table says %s, expected %s, write answered %d, stored %s\n",
                            role == SHOAL_MOVE_SOURCE ? "source" : "target", s_name((shoal_move_state_t) from),
                            s_name((shoal_move_state_t) to), table ? "legal" : "illegal",
                            expected ? "legal" : "illegal", rc,
                            stored < 0 ? "unreadable" : s_name((shoal_move_state_t) stored));
                    wrong++;
                }
                else
                if (expected)
                    taken++;
                else
                if (!nothing)
                    refused++;
            }
    }
    shoal_claim_store_destroy(&claims);
    shoal_store_destroy(&store);
    CHECK_INT(wrong, 0);
    //  Each step the design names was taken once; every other pair refused.
    CHECK_INT(taken, (int) (sizeof s_source_steps / sizeof *s_source_steps
                            + sizeof s_target_steps / sizeof *s_target_steps));
    CHECK_INT(refused, 2 * S_STATES * S_STATES - 2 - taken);
}

//  A role that is neither side has no step at all, and states out of
//  range are no states.
static void
test_no_role_no_state(void)
{
    CHECK(!shoal_move_step_legal(SHOAL_MOVE_ROLE_NONE, SHOAL_MOVE_NONE, SHOAL_MOVE_PENDING));
    CHECK(!shoal_move_step_legal(SHOAL_MOVE_SOURCE, SHOAL_MOVE_PENDING, (shoal_move_state_t) S_STATES));
    CHECK(!shoal_move_step_legal(SHOAL_MOVE_SOURCE, (shoal_move_state_t) -1, SHOAL_MOVE_PENDING));
}

int
main(void)
{
    SHOAL_TEST(test_every_step);
    SHOAL_TEST(test_no_role_no_state);
    return shoal_test_finish();
}
