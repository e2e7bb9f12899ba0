/*  test_cluster_move_keys_abort: the keys a move staged on its target go
    when the move does not end there.

    A move sends the claim's keys (with its lock and leases) to the target
    before the last round, and the target keeps them staged until it adopts
    the claim. Two ways for a staged set to be left behind, each checked in
    the target's store with the node stopped:

      - the move aborts: n2, the target, kills itself when the final round
        arrives (its keys staged already, which the test sees in its store);
        started again, it drops the reception the source aborted, and the
        staged keys go with it. The claim runs on n1 with its keys and lock.
      - a staged set whose move has no reception record on the node (its
        move ended while the node was down): removed when the node starts.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_key_space.h"
#include "shoal_store.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_CLAIM "mover"
//  Bounds for a busy machine, not figures.
#define S_WAIT_MS 60000
//  Short, so that the source gives up on a dead target within the test.
#define S_STEP_TIMEOUT_MS "1500"

//  Waits up to TIMEOUT_MS for node INDEX's log to contain TEXT.
static bool
s_log_wait(shoal_cluster_t *cluster, int index, const char *text, int timeout_ms)
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

//  True when PID (a child not yet reaped) has exited.
static bool
s_exited(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen(path, "r");
    if (!file)
        return true;
    char state = 0;
    int fields = fscanf(file, "%*d (%*[^)]) %c", &state);
    fclose(file);
    return fields == 1 && state == 'Z';
}

//  The store of node INDEX (stopped), or NULL.
static shoal_store_t *
s_store_open(shoal_cluster_t *cluster, int index)
{
    char db_dir[4096];
    snprintf(db_dir, sizeof db_dir, "%s/db", shoal_cluster_data_dir(cluster, index));
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.create = false;
    return shoal_store_new(db_dir, &options, NULL);
}

//  How many key spaces node INDEX (stopped) holds staged for CLAIM_ID, and
//  the keys of the first into *KEYS_P; -1 when its store cannot be read.
static int
s_staged_count(shoal_cluster_t *cluster, int index, const char *claim_id, size_t *keys_p)
{
    shoal_store_t *store = s_store_open(cluster, index);
    if (!store)
        return -1;
    shoal_key_space_t *space = shoal_key_space_new(store, true);
    shoal_staged_t *staged = NULL;
    size_t count = 0;
    int found = 0;
    if (shoal_key_space_staged(space, &staged, &count))
        found = -1;
    for (size_t i = 0; i < count; i++)
        if (streq(staged[i].claim_id, claim_id)) {
            if (found == 0 && keys_p)
                *keys_p = staged[i].count;
            found++;
        }
    shoal_staged_free(&staged, count);
    shoal_key_space_destroy(&space);
    shoal_store_destroy(&store);
    return found;
}

//  True when node 2 holds no move record.
static bool
s_no_reception(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    shoal_move_list_t list;
    int rc = shoal_client_move_list(shoal_cluster_client(cluster, 2), &list);
    if (rc != 200) {
        snprintf(why, why_size, "n2 answers move list with %d", rc);
        return false;
    }
    size_t count = list.count;
    shoal_move_list_clear(&list);
    snprintf(why, why_size, "n2 holds %zu move record(s)", count);
    return count == 0;
}

static void
test_aborted_move_leaves_no_staged_keys(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    for (int i = 1; i <= 2; i++)
        shoal_cluster_node_setenv(cluster, i, "SHOAL_MOVE_STEP_TIMEOUT_MS", S_STEP_TIMEOUT_MS);
    shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", "target:final:crash");
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 16 * S_MB, .id = S_CLAIM,
                                .rate = 1000 * 1000 };
    CHECK_INT(shoal_client_claim_create(n1, &spec, NULL), 200);

    //  Keys, and a write lock held by a lease that also holds a key.
    char key[16], value[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "k%d", i);
        snprintf(value, sizeof value, "v%d", i);
        CHECK_INT(shoal_client_key_put(n1, S_CLAIM, key, value, strlen(value), 0, NULL), 200);
    }
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(n1, 60000, 0, &lease, NULL), 200);
    uint64_t lease_id = lease.id;
    shoal_lease_clear(&lease);
    shoal_lock_state_t lock;
    CHECK_INT(shoal_client_lock_acquire(n1, S_CLAIM, "vm-manager", "write", false, lease_id, &lock), 200);
    CHECK(lock.granted);
    shoal_lock_state_clear(&lock);
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "handle", "vm-manager", 10, lease_id, NULL), 200);

    //  The move reaches its final round; the target dies as it arrives.
    shoal_move_info_t info;
    shoal_client_t *mover = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(mover, 10000);
    int moved = shoal_client_move(mover, S_CLAIM, "n2", 1000, &info);
    if (moved == 200)
        shoal_move_info_clear(&info);
    shoal_client_destroy(&mover);
    CHECK_INT(moved, 200);
    CHECK_MSG(s_log_wait(cluster, 2, "fault: crash at target:final", S_WAIT_MS),
              "n2 never reached the final round");
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    pid_t pid = shoal_cluster_node_pid(cluster, 2);
    while (!s_exited(pid) && shoal_test_now_ms() < deadline)
        usleep(20000);
    CHECK_MSG(s_exited(pid), "n2 logged its crash and still runs");
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGKILL), 128 + SIGKILL);

    //  The keys were staged on n2 before the last round was sent.
    size_t keys = 0;
    CHECK_INT(s_staged_count(cluster, 2, S_CLAIM, &keys), 1);
    CHECK_MSG(keys == 6, "n2 staged %zu key(s), not the claim's 6", keys);

    //  Started again, n2 drops the reception the source aborted, keys too.
    shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", "");
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_move_check_settled(cluster, S_CLAIM, 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_no_reception, NULL, S_WAIT_MS, "n2 to drop the reception") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGTERM), 0);
    CHECK_INT(s_staged_count(cluster, 2, S_CLAIM, NULL), 0);
    CHECK(s_log_wait(cluster, 2, "staged here are removed", 0));

    //  On n1 the claim kept its keys and lock, and its keys thaw: a write
    //  goes through.
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(n1, S_CLAIM, "k4", &kv), 200);
    CHECK(kv.value_size == 2 && memcmp(kv.value, "v4", 2) == 0);
    shoal_key_value_clear(&kv);
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "after", "abort", 5, 0, NULL), 200);
    CHECK_INT(shoal_client_lock_list(n1, S_CLAIM, &lock), 200);
    CHECK(streq(lock.writer, "vm-manager") && lock.count == 1 && lock.records[0].lease == lease_id);
    shoal_lock_state_clear(&lock);

    //  Start: a staged set whose move has no reception record here goes,
    //  a claim's live keys stay. n2 is stopped: its store is the test's.
    shoal_store_t *store = s_store_open(cluster, 2);
    CHECK(store);
    shoal_key_space_t *space = shoal_key_space_new(store, true);
    shoal_msg_key_value_t orphan_kv = { .key = "left", .value = (uint8_t *) "behind", .value_size = 6,
                                        .version = 1, .create_revision = 3, .mod_revision = 3 };
    shoal_msg_claim_keys_t orphan = { .claim_id = "ghost", .move_id = "move-that-ended", .revision = 3,
                                      .kvs = &orphan_kv, .count = 1 };
    CHECK_INT(shoal_key_space_stage(space, &orphan), 0);
    shoal_key_space_destroy(&space);
    shoal_store_destroy(&store);
    CHECK_INT(s_staged_count(cluster, 2, "ghost", NULL), 1);
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK(s_log_wait(cluster, 2, "move move-that-ended staged here are removed", S_WAIT_MS));
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGTERM), 0);
    CHECK_INT(s_staged_count(cluster, 2, "ghost", NULL), 0);

    CHECK_INT(shoal_client_lease_revoke(n1, lease_id), 200);
    shoal_client_t *patient = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(patient, 15000);
    int released = shoal_client_claim_release(patient, S_CLAIM, NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(released, 200);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_aborted_move_leaves_no_staged_keys);
    return shoal_test_finish();
}
