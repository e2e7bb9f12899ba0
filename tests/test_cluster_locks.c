/*  test_cluster_locks: the lock sweep. A node holding locks on another
    node's claim is killed: once declared dead its locks are rolled back,
    and started again it is seen alive only with its locks already gone. */
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
    CHECK_MSG(shoal_cluster_start(cluster) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
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

int
main(void)
{
    SHOAL_TEST(test_sweep_after_death);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
