/*  test_cluster_locks: the lock sweep. A node holding locks on another
    node's claim is killed: once declared dead its locks are rolled back,
    and started again it is seen alive only with its locks already gone.
    Killed and started again before it could be declared dead, its new run
    is held back ("sweeping") until the old run's locks were rolled back,
    and the new run's locks outlive later sweeps of the same run. The
    owner itself killed and started again rolls back the locks of holders
    that ran on it (their connections went with its run), and keeps those
    of holders on its peers. A node restarted is alive again on no node
    before every node that held its locks swept them: one peer's sweep held
    by a fault while a file exists keeps it "sweeping" on the other, whose
    own sweep is done. */
#include "shoal_test.h"
#include "shoal_cluster.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_WAIT_MS 30000
#define S_TENANT "acme/web"

//  How many lock records of claim c1 on n1 name HOLDER_NODE; -1 when n1
//  does not answer.
static int
s_held_from(shoal_cluster_t *cluster, const char *holder_node)
{
    shoal_lock_state_t state;
    if (shoal_client_lock_list(shoal_cluster_client(cluster, 1), "c1", &state) != 200)
        return -1;
    int count = 0;
    for (size_t i = 0; i < state.count; i++)
        count += streq(state.records[i].holder_node, holder_node);
    shoal_lock_state_clear(&state);
    return count;
}

static bool
s_swept(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    int held = s_held_from(cluster, "n2");
    snprintf(why, why_size, "%d lock record(s) from n2 on n1", held);
    return held == 0;
}

static void
test_sweep_after_death(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "c1" };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);
    //  One reader on n1 itself, which no sweep of n2 touches; holders on
    //  n2 lock n1's claim too: a reader, and a writer waiting.
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "reader-on-n1", "read", false, 0,
                                        NULL), 200);
    shoal_client_t *n2 = shoal_cluster_client_new(cluster, 2);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "reader-on-n2", "read", false, 0, &state), 200);
    CHECK(state.granted && state.count == 2);
    shoal_lock_state_clear(&state);
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "writer-on-n2", "write", true, 0, &state), 200);
    CHECK(!state.granted && streq(state.waiter, "writer-on-n2"));
    shoal_lock_state_clear(&state);
    shoal_client_destroy(&n2);
    CHECK_INT(s_held_from(cluster, "n2"), 2);

    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 2, "dead", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    //  Declared dead: the sweep ran inside that event.
    CHECK_INT(s_held_from(cluster, "n2"), 0);
    CHECK_INT(shoal_client_lock_list(shoal_cluster_client(cluster, 1), "c1", &state), 200);
    CHECK(state.readers == 1 && streq(state.waiter, "") && state.count == 1
          && streq(state.records[0].holder, "reader-on-n1"));
    shoal_lock_state_clear(&state);
    //  Readers are let in again: the waiting writer's wait went too.
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "reader-2", "read", false, 0, NULL),
              200);

    //  Back: it takes a lock again, dies, and is started again. Whenever
    //  n1 sees it alive again, its old locks are gone already.
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 2, "alive", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    n2 = shoal_cluster_client_new(cluster, 2);
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "reader-on-n2", "read", false, 0, NULL), 200);
    shoal_client_destroy(&n2);
    CHECK_INT(s_held_from(cluster, "n2"), 1);
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 2, "dead", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    char seen[32] = "";
    int sweeps_late = 0;
    for (int64_t deadline = shoal_test_now_ms() + S_WAIT_MS; !streq(seen, "alive") && shoal_test_now_ms() < deadline;) {
        shoal_cluster_peer_state(cluster, 1, 2, seen, sizeof seen, NULL);
        //  Read after the state: alive seen means the sweep came first.
        if (streq(seen, "alive"))
            sweeps_late += s_held_from(cluster, "n2") != 0;
        else
            usleep(10000);
    }
    CHECK_STR(seen, "alive");
    CHECK_INT(sweeps_late, 0);
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_swept, NULL, S_WAIT_MS, "n2's locks swept") == 0, "%s",
              shoal_cluster_error(cluster));
    //  Its guest runs in a session of its own: the node's stop would leave it.
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "c1", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

//  Waits up to TIMEOUT_MS for node INDEX's log to contain TEXT.
static bool
s_log_has(shoal_cluster_t *cluster, int index, const char *text, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    do {
        char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, index));
        bool seen = shoal_test_contains(log, text);
        free(log);
        if (seen)
            return true;
        usleep(50000);
    } while (shoal_test_now_ms() < deadline);
    return false;
}

//  A suspect timeout no restart on a loaded machine outlasts: n2 is killed
//  and back long before n1 could declare it dead.
#define S_SLOW_SUSPECT_MS 60000

static void
test_sweep_after_quick_restart(void)
{
    shoal_cluster_options_t options = { .suspect_timeout_ms = S_SLOW_SUSPECT_MS };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "c1" };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);
    //  Holders on n2 lock n1's claim: a reader, and a writer waiting.
    shoal_client_t *n2 = shoal_cluster_client_new(cluster, 2);
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "reader-on-n2", "read", false, 0, NULL), 200);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "writer-on-n2", "write", true, 0, &state), 200);
    CHECK(!state.granted && streq(state.waiter, "writer-on-n2"));
    shoal_lock_state_clear(&state);
    shoal_client_destroy(&n2);
    CHECK_INT(s_held_from(cluster, "n2"), 2);
    char seen[32] = "";
    uint64_t before = 0;
    CHECK_INT(shoal_cluster_peer_state(cluster, 1, 2, seen, sizeof seen, &before), 0);
    CHECK_STR(seen, "alive");

    //  Killed and started again at once: a new incarnation, never dead.
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    //  Whenever n1 shows the new run alive, the old run's locks are gone;
    //  until then it is the old incarnation (alive or suspect) or the new
    //  one held back (sweeping). It is never declared dead.
    uint64_t now = 0;
    int sweeps_late = 0, dead = 0, sweeping = 0;
    for (int64_t deadline = shoal_test_now_ms() + S_WAIT_MS; shoal_test_now_ms() < deadline;) {
        if (shoal_cluster_peer_state(cluster, 1, 2, seen, sizeof seen, &now))
            continue;
        //  Read after the state: alive at the new run seen means the sweep came first.
        if (streq(seen, "alive") && now > before) {
            sweeps_late += s_held_from(cluster, "n2") != 0;
            break;
        }
        dead += streq(seen, "dead");
        sweeping += streq(seen, "sweeping");
        usleep(2000);
    }
    CHECK_STR(seen, "alive");
    CHECK(now > before);
    CHECK_INT(sweeps_late, 0);
    CHECK_INT(dead, 0);
    CHECK_INT(s_held_from(cluster, "n2"), 0);
    CHECK(s_log_has(cluster, 1, "swept 2 lock(s) held from n2 under an earlier run", 0));
    printf("     n1 showed n2 sweeping in %d of its answers before alive\n", sweeping);
    //  The waiting writer's wait went with it: readers are let in again.
    CHECK_INT(shoal_client_lock_list(shoal_cluster_client(cluster, 1), "c1", &state), 200);
    CHECK(state.readers == 0 && streq(state.waiter, "") && state.count == 0);
    shoal_lock_state_clear(&state);

    //  The new run's holders lock again, and a later sweep of the same run
    //  (n1 restarted: n2 tells it again) leaves their locks alone.
    n2 = shoal_cluster_client_new(cluster, 2);
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "reader-on-n2", "read", false, 0, NULL), 200);
    shoal_client_destroy(&n2);
    CHECK_INT(s_held_from(cluster, "n2"), 1);
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_held_from(cluster, "n2"), 1);

    //  shoalctl peers shows the states it is given; n2 is alive on n1.
    char *output = NULL;
    CHECK_INT(shoal_cluster_ctl(cluster, 1, &output, "peers", NULL), 0);
    CHECK(output && strstr(output, "n2") && strstr(output, "alive"));
    free(output);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "c1", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

static void
test_owner_restart(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "c1" };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);
    //  Holders on n1, the owner: a reader and a writer waiting; a reader on n2.
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "reader-on-n1", "read", false, 0,
                                        NULL), 200);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "writer-on-n1", "write", true, 0,
                                        &state), 200);
    CHECK(!state.granted && streq(state.waiter, "writer-on-n1"));
    shoal_lock_state_clear(&state);
    shoal_client_t *n2 = shoal_cluster_client_new(cluster, 2);
    //  The waiter stops new readers: n2's reader comes before it.
    CHECK_INT(shoal_client_lock_release(shoal_cluster_client(cluster, 1), "c1", "writer-on-n1", NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(n2, "c1", "reader-on-n2", "read", false, 0, NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "writer-on-n1", "write", true, 0,
                                        &state), 200);
    CHECK(!state.granted && state.readers == 2);
    shoal_lock_state_clear(&state);
    shoal_client_destroy(&n2);
    CHECK_INT(s_held_from(cluster, "n1"), 2);
    CHECK_INT(s_held_from(cluster, "n2"), 1);

    //  kill -9, started again: n1's own holders went with its run.
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_held_from(cluster, "n1"), 0);
    CHECK_INT(s_held_from(cluster, "n2"), 1);
    CHECK_INT(shoal_client_lock_list(shoal_cluster_client(cluster, 1), "c1", &state), 200);
    CHECK(state.readers == 1 && streq(state.waiter, "") && streq(state.writer, "") && state.count == 1);
    shoal_lock_state_clear(&state);
    CHECK(s_log_has(cluster, 1, "swept 2 lock(s) held from this node under an earlier run", 0));
    //  Readers are let in again, and a holder of the new run keeps its lock.
    CHECK_INT(shoal_client_lock_acquire(shoal_cluster_client(cluster, 1), "c1", "reader-2", "read", false, 0, NULL),
              200);
    CHECK_INT(s_held_from(cluster, "n1"), 1);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "c1", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

//  How many lock records of claim CLAIM on node INDEX name HOLDER_NODE; -1
//  when it does not answer.
static int
s_held_on(shoal_cluster_t *cluster, int index, const char *claim, const char *holder_node)
{
    shoal_lock_state_t state;
    if (shoal_client_lock_list(shoal_cluster_client(cluster, index), claim, &state) != 200)
        return -1;
    int count = 0;
    for (size_t i = 0; i < state.count; i++)
        count += streq(state.records[i].holder_node, holder_node);
    shoal_lock_state_clear(&state);
    return count;
}

static void
test_sweep_on_every_peer(void)
{
    shoal_cluster_options_t options = { .suspect_timeout_ms = S_SLOW_SUSPECT_MS };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    //  n2's sweeps of restarted peers wait while this file exists.
    char hold[512];
    snprintf(hold, sizeof hold, "%s.sweep-hold", shoal_cluster_log_path(cluster, 2));
    char fault[600];
    snprintf(fault, sizeof fault, "locks:sweep:hold=%s", hold);
    CHECK_INT(shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", fault), 0);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "c1" };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);
    spec.id = "c2";
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 2), &spec, NULL), 200);
    //  A holder on n3 reads both claims: n1's and n2's.
    shoal_client_t *n3 = shoal_cluster_client_new(cluster, 3);
    CHECK_INT(shoal_client_lock_acquire(n3, "c1", "reader-on-n3", "read", false, 0, NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(n3, "c2", "reader-on-n3", "read", false, 0, NULL), 200);
    shoal_client_destroy(&n3);
    CHECK_INT(s_held_on(cluster, 1, "c1", "n3"), 1);
    CHECK_INT(s_held_on(cluster, 2, "c2", "n3"), 1);

    //  n2 holds its sweeps; n3 is killed and started again at once.
    FILE *file = fopen(hold, "w");
    CHECK(file);
    if (file)
        fclose(file);
    CHECK_INT(shoal_cluster_node_kill(cluster, 3, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    //  n1 swept its part, and n2 was asked for its own and holds it.
    CHECK(s_log_has(cluster, 1, "swept 1 lock(s) held from n3 under an earlier run", S_WAIT_MS));
    CHECK(s_log_has(cluster, 2, "fault: hold at locks:sweep holds", S_WAIT_MS));
    //  So n3 is sweeping on both: n1's sweep is not enough.
    char seen[32] = "";
    CHECK_INT(shoal_cluster_peer_state(cluster, 1, 3, seen, sizeof seen, NULL), 0);
    CHECK_STR(seen, "sweeping");
    CHECK_INT(shoal_cluster_peer_state(cluster, 2, 3, seen, sizeof seen, NULL), 0);
    CHECK_STR(seen, "sweeping");
    CHECK_INT(s_held_on(cluster, 1, "c1", "n3"), 0);
    CHECK_INT(s_held_on(cluster, 2, "c2", "n3"), 1);
    //  No lock is taken for its holders meanwhile, on n1 either.
    n3 = shoal_cluster_client_new(cluster, 3);
    CHECK_INT(shoal_client_lock_acquire(n3, "c1", "reader-on-n3", "read", false, 0, NULL), 503);
    char *output = NULL;
    CHECK_INT(shoal_cluster_ctl(cluster, 1, &output, "peers", NULL), 0);
    CHECK_MSG(output && strstr(output, "sweeping"), "%s", output ? output : "(none)");
    free(output);

    //  The hold ends: n2 sweeps, and only then is n3 alive again, on both.
    CHECK_INT(unlink(hold), 0);
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 3, "alive", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_held_on(cluster, 2, "c2", "n3"), 0);
    CHECK_MSG(shoal_cluster_wait_state(cluster, 2, 3, "alive", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_client_lock_acquire(n3, "c1", "reader-on-n3", "read", false, 0, NULL), 200);
    shoal_client_destroy(&n3);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "c1", NULL), 200);
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 2), "c2", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    SHOAL_TEST(test_sweep_after_death);
    shoal_cluster_destroy_all();
    SHOAL_TEST(test_sweep_after_quick_restart);
    shoal_cluster_destroy_all();
    SHOAL_TEST(test_owner_restart);
    shoal_cluster_destroy_all();
    SHOAL_TEST(test_sweep_on_every_peer);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
