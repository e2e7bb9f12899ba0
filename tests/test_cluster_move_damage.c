/*  test_cluster_move_damage: one unreadable move record never stops the
    recovery of the others.

    Node n1 moves two claims to n2: "big" (a prefilled guest whose rounds
    take a while) and then "small". n1 crashes at the source's start step
    of the small one, so both moves are in flight: small committed (its
    target runs the guest), big still in its rounds. With n1 stopped, the
    test garbles big's source record in n1's store. Started again, n1 must
    finish the small move (the claim is n2's alone, move status answers),
    and name the garbled record: in its log, and in `move status` of big,
    which waits for an operator instead of being guessed at.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_msg.h"
#include "shoal_store.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_BIG "big"
#define S_SMALL "small"
#define S_FAULT_WAIT_MS 60000
#define S_SETTLE_MS 60000
#define S_GARBAGE "\xff\xff\xff\xff not a move record"

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

//  Garbles the source record of CLAIM_ID in the store of DATA_DIR (its node
//  stopped). Returns 0, or -1 when there is no such record to garble.
static int
s_garble(const char *data_dir, const char *claim_id)
{
    char db_dir[4096];
    snprintf(db_dir, sizeof db_dir, "%s/db", data_dir);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.create = false;
    shoal_store_t *store = shoal_store_new(db_dir, &options, NULL);
    if (!store)
        return -1;
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "move");
    shoal_key_add_u64(&key, SHOAL_MOVE_SOURCE);
    shoal_key_add_str(&key, claim_id);
    bool found = false;
    int rc = shoal_store_exists(store, SHOAL_CF_MOVES, &key, &found);
    if (rc == 0 && found)
        rc = shoal_store_put(store, SHOAL_CF_MOVES, &key, S_GARBAGE, strlen(S_GARBAGE), true);
    shoal_store_destroy(&store);
    return rc == 0 && found ? 0 : -1;
}

//  True when claim ID runs on n2 and n1 no longer lists it.
static bool
s_small_moved(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    const char *id = (const char *) arg;
    shoal_claim_info_t info;
    int on_target = shoal_client_claim_show(shoal_cluster_client(cluster, 2), id, &info);
    bool running = on_target == 200 && info.state && streq(info.state, "running")
                && info.owner && streq(info.owner, "n2");
    if (on_target == 200)
        shoal_claim_info_clear(&info);
    shoal_claim_list_t list;
    bool listed = true;
    if (shoal_client_claim_list(shoal_cluster_client(cluster, 1), &list) == 200) {
        listed = false;
        for (size_t i = 0; i < list.count; i++)
            listed |= streq(list.claims[i].id, id);
        shoal_claim_list_clear(&list);
    }
    snprintf(why, why_size, "n2 answers %d (%s), n1 %s it", on_target, running ? "running" : "not running",
             listed ? "lists" : "does not list");
    return running && !listed;
}

static void
test_move_recovery_skips_a_garbled_record(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_FAULT", "source:start:crash");
    CHECK_MSG(shoal_cluster_up(cluster, S_FAULT_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *admin = shoal_cluster_client(cluster, 1);
    shoal_claim_spec_t big = { .tenant = S_TENANT, .memory_bytes = 256 * S_MB, .id = S_BIG };
    shoal_claim_spec_t small = { .tenant = S_TENANT, .memory_bytes = 8 * S_MB, .id = S_SMALL };
    CHECK_INT(shoal_client_claim_create(admin, &big, NULL), 200);
    CHECK_INT(shoal_client_claim_create(admin, &small, NULL), 200);
    //  Every page of big's memory is sent: its rounds outlast small's move.
    CHECK_MSG(shoal_move_check_prefill(cluster, 1, S_BIG) == 0, "%s", shoal_move_check_error());

    shoal_move_info_t info;
    CHECK_INT(shoal_client_move(admin, S_BIG, "n2", 0, &info), 200);
    shoal_move_info_clear(&info);
    CHECK_INT(shoal_client_move(admin, S_SMALL, "n2", 0, &info), 200);
    shoal_move_info_clear(&info);
    CHECK_MSG(s_log_wait(cluster, 1, "fault: crash at source:start", S_FAULT_WAIT_MS),
              "n1 never reached the start step of the small move");
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGKILL), 128 + SIGKILL);

    CHECK_MSG(s_garble(shoal_cluster_data_dir(cluster, 1), S_BIG) == 0,
              "n1 holds no source record of the big move to garble (it ended before the crash)");
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_FAULT", "");
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    //  The restart made a new client.
    admin = shoal_cluster_client(cluster, 1);

    //  The intact move finishes.
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_small_moved, (void *) S_SMALL, S_SETTLE_MS,
                                       "the small move to finish") == 0, "%s", shoal_cluster_error(cluster));
    int status = shoal_client_move_status(admin, S_SMALL, &info);
    bool done = status == 200 && info.done;
    if (status == 200)
        shoal_move_info_clear(&info);
    CHECK_MSG(done, "move status of the finished move answers %d: %s", status, shoal_client_error(admin));

    //  The garbled one is named and waits for an operator.
    status = shoal_client_move_status(admin, S_BIG, &info);
    if (status == 200)
        shoal_move_info_clear(&info);
    CHECK_INT(status, 500);
    CHECK_MSG(shoal_test_contains(shoal_client_error(admin), "damaged")
              && shoal_test_contains(shoal_client_error(admin), S_BIG), "%s", shoal_client_error(admin));
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    bool named = shoal_test_contains(log, "the move record") && shoal_test_contains(log, "\"big\"");
    free(log);
    CHECK_MSG(named, "n1's log does not name the garbled record");
    printf("     %s\n", shoal_client_error(admin));

    //  status lists it as damage, naming the claim; once the operator has
    //  settled the claim, forgetting it deletes the record.
    shoal_status_t node_status;
    CHECK_INT(shoal_client_status(admin, &node_status), 200);
    bool listed = false;
    for (size_t i = 0; i < node_status.damage_count; i++)
        listed |= streq(node_status.damage[i].kind, "move") && streq(node_status.damage[i].claim_id, S_BIG)
               && streq(node_status.damage[i].id, "move-source-big");
    shoal_status_clear(&node_status);
    CHECK_MSG(listed, "status does not list the garbled move record as damage");
    char *output = NULL;
    CHECK_INT(shoal_cluster_ctl(cluster, 1, &output, "damage", NULL), 0);
    bool shown = shoal_test_contains(output, "move-source-big") && shoal_test_contains(output, "operator");
    free(output);
    CHECK_MSG(shown, "shoalctl damage does not show it");
    CHECK_INT(shoal_cluster_ctl(cluster, 1, NULL, "damage", "forget", "move-source-big", NULL), 0);
    CHECK_INT(shoal_client_status(admin, &node_status), 200);
    size_t left = node_status.damage_count;
    shoal_status_clear(&node_status);
    CHECK_INT(left, 0);
    status = shoal_client_move_status(admin, S_BIG, &info);
    if (status == 200)
        shoal_move_info_clear(&info);
    CHECK_INT(status, 404);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    SHOAL_TEST(test_move_recovery_skips_a_garbled_record);
    shoal_cluster_destroy_all();
    shoal_move_check_cleanup();
    return shoal_test_finish();
}
