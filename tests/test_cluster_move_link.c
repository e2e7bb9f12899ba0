/*  test_cluster_move_link: live moves over the links people have, not only
    loopback: a slow one, and one that fails while the guest is paused.

    Both run in namespace mode (each node in its own network namespace,
    tc shaping or nft cutting its link) with the mesh's own default
    timeouts, as a user's nodes would, so that a probe waiting behind a
    full link is not taken for a dead peer.

      slow link     a 512 MiB guest, every page written, moves over a link of
                    S_SLOW_MBIT each way on default move settings: its
                    baseline alone lasts longer than the step timeout, and
                    the move must complete, its stamps verified.
      final cut     the target stalls on the final round's end and is cut
                    off: the source, which hears nothing while its guest is
                    paused, aborts within move/final_timeout_ms and runs the
                    guest again, long before the step timeout (set to
                    S_LONG_STEP_MS here) would have; once the link heals the
                    target drops its copy and one owner is left.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <inttypes.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_STAMP "written-before-the-move"
//  The slow link, and the guest that crosses it: every page written, so the
//  baseline carries all 512 MiB (about 21 s at 200 Mbit/s, twice the
//  default step timeout), and a load that a round at that rate outruns.
#define S_SLOW_MBIT 200
#define S_SLOW_MEMORY (512 * S_MB)
#define S_SLOW_RATE (4 * 1000 * 1000)
#define S_SLOW_WAIT_MS 600000
//  The final cut: a step timeout that cannot be what ends the pause.
#define S_LONG_STEP_MS 60000
#define S_LONG_STEP_TEXT "60000"
#define S_CUT_STALL_MS 6000
#define S_CUT_MS 4000
#define S_CUT_BUDGET_MS 300
#define S_WAIT_MS 60000
//  shoal's own mesh timeouts (node/shoal_config.c), not the tests' short ones.
#define S_PROBE_INTERVAL_MS 1000
#define S_PROBE_TIMEOUT_MS 500
#define S_SUSPECT_TIMEOUT_MS 5000
#define S_SYNC_INTERVAL_MS 2000

static shoal_cluster_t *
s_cluster_new(void)
{
    shoal_cluster_options_t options = {
        .namespaces = true, .probe_interval_ms = S_PROBE_INTERVAL_MS, .probe_timeout_ms = S_PROBE_TIMEOUT_MS,
        .suspect_timeout_ms = S_SUSPECT_TIMEOUT_MS, .sync_interval_ms = S_SYNC_INTERVAL_MS,
    };
    return shoal_cluster_new(2, &options);
}

//  Asks node FROM to move ID to node TO with BUDGET ms (0: the node's
//  default) and follows it to its end, into *INFO (the caller clears it).
static int
s_move(shoal_cluster_t *cluster, int from, int to, const char *id, uint32_t budget, int timeout_ms,
       shoal_move_info_t *info)
{
    shoal_client_t *client = shoal_cluster_client_new(cluster, from);
    shoal_client_set_timeout(client, S_WAIT_MS);
    int rc = shoal_client_move(client, id, shoal_cluster_node_id(cluster, to), budget, info);
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    while (rc == 200 && !info->done && shoal_test_now_ms() < deadline) {
        usleep(100000);
        shoal_move_info_clear(info);
        rc = shoal_client_move_status(client, id, info);
    }
    if (rc != 200)
        fprintf(stderr, "move %s n%d -> n%d: %d %s\n", id, from, to, rc, shoal_client_error(client));
    shoal_client_destroy(&client);
    return rc;
}

//  Waits up to TIMEOUT_MS for node INDEX's log to contain TEXT.
static bool
s_log_wait(shoal_cluster_t *cluster, int index, const char *text, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    do {
        FILE *file = fopen(shoal_cluster_log_path(cluster, index), "r");
        bool seen = false;
        if (file) {
            char line[1024];
            while (!seen && fgets(line, sizeof line, file))
                seen = strstr(line, text) != NULL;
            fclose(file);
        }
        if (seen)
            return true;
        usleep(20000);
    } while (shoal_test_now_ms() < deadline);
    return false;
}

//  Neither node logged an error: a normal abort's clean-up is no error.
static void
s_no_error_logged(shoal_cluster_t *cluster)
{
    for (int index = 1; index <= 2; index++)
        CHECK_MSG(!s_log_wait(cluster, index, "E: (", 0), "n%d logged an error: see %s", index,
                  shoal_cluster_log_path(cluster, index));
}

static void
s_stamp_check(shoal_cluster_t *cluster, int index, const char *id)
{
    uint8_t *value = NULL;
    size_t size = 0;
    CHECK_INT(shoal_client_claim_get(shoal_cluster_client(cluster, index), id, "stamp", &value, &size), 200);
    bool same = size == strlen(S_STAMP) && memcmp(value, S_STAMP, size) == 0;
    free(value);
    CHECK_MSG(same, "the stamp read back from n%d differs", index);
}

static void
test_slow_link(void)
{
    SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_t *cluster = s_cluster_new();
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *admin = shoal_cluster_client_new(cluster, 1);
    CHECK(admin);
    shoal_client_set_timeout(admin, S_WAIT_MS);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_SLOW_MEMORY, .id = "far",
                                .rate = S_SLOW_RATE, .disk_bytes = 4 * S_MB };
    int created = shoal_client_claim_create(admin, &spec, NULL);
    CHECK_MSG(created == 200, "create: %d %s", created, shoal_client_error(admin));
    shoal_client_destroy(&admin);
    CHECK_MSG(shoal_move_check_prefill(cluster, 1, "far") == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_put(shoal_cluster_client(cluster, 1), "far", "stamp", S_STAMP, strlen(S_STAMP)),
              200);
    CHECK_MSG(shoal_cluster_limit_rate(cluster, 1, S_SLOW_MBIT) == 0, "%s", shoal_cluster_error(cluster));

    shoal_move_info_t info;
    CHECK_INT(s_move(cluster, 1, 2, "far", 0, S_SLOW_WAIT_MS, &info), 200);
    printf("     %s after %.1f s: %u rounds, %.0f MB at %.1f MB/s, downtime %" PRIu64 " ms%s%s\n", info.phase,
           (double) info.total_ms / 1000, info.round, (double) info.bytes_sent / 1e6, (double) info.rate / 1e6,
           info.node_downtime_ms, *info.error ? ": " : "", info.error);
    //  The memory crossed the link whole, slower than a step timeout.
    CHECK_STR(info.phase, "done");
    CHECK(info.bytes_sent >= S_SLOW_MEMORY);
    shoal_move_info_clear(&info);
    CHECK_MSG(shoal_move_check_settled(cluster, "far", 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    s_stamp_check(cluster, 2, "far");

    shoal_client_t *patient = shoal_cluster_client_new(cluster, 2);
    CHECK(patient);
    shoal_client_set_timeout(patient, S_WAIT_MS);
    int stopped = shoal_client_claim_stop(patient, "far", NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(stopped, 200);
    CHECK_MSG(shoal_move_check_verify(cluster, 2, "far") == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 2), "far", NULL), 200);
    s_no_error_logged(cluster);
    shoal_cluster_destroy(&cluster);
}

//  The move, asked from a thread of its own while the test cuts the link.
typedef struct {
    shoal_cluster_t *cluster;
    shoal_move_info_t info;
    int status;
} s_mover_t;

static void *
s_mover_run(void *arg)
{
    s_mover_t *mover = (s_mover_t *) arg;
    mover->status = s_move(mover->cluster, 1, 2, "cut", S_CUT_BUDGET_MS, S_WAIT_MS, &mover->info);
    return NULL;
}

static void
test_final_round_cut(void)
{
    SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_t *cluster = s_cluster_new();
    CHECK(cluster);
    for (int i = 1; i <= 2; i++)
        shoal_cluster_node_setenv(cluster, i, "SHOAL_MOVE_STEP_TIMEOUT_MS", S_LONG_STEP_TEXT);
    char fault[64];
    snprintf(fault, sizeof fault, "target:final:stall=%d", S_CUT_STALL_MS);
    shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", fault);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 64 * S_MB, .id = "cut",
                                .rate = 1000 * 1000, .disk_bytes = 4 * S_MB };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);
    CHECK_INT(shoal_client_claim_put(shoal_cluster_client(cluster, 1), "cut", "stamp", S_STAMP, strlen(S_STAMP)),
              200);

    //  The final round's end reaches the target, which sleeps on it: the
    //  test cuts it off meanwhile, so its acknowledgement never comes.
    s_mover_t mover = { .cluster = cluster };
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_mover_run, &mover) == 0);
    bool reached = s_log_wait(cluster, 2, "fault: stall at target:final", S_WAIT_MS);
    if (reached) {
        CHECK_MSG(shoal_cluster_cut(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
        usleep(S_CUT_MS * 1000);
        CHECK_MSG(shoal_cluster_heal(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    }
    pthread_join(thread, NULL);
    CHECK_MSG(reached, "n2 never stalled on the final round (the move answered %d)", mover.status);
    CHECK_INT(mover.status, 200);
    shoal_move_info_t *info = &mover.info;
    printf("     %s: guest paused %" PRIu64 " ms (budget %d ms, move/final_timeout_ms 1000): %s\n", info->phase,
           info->node_downtime_ms, S_CUT_BUDGET_MS, info->error);
    CHECK_STR(info->phase, "aborted");
    CHECK_MSG(strstr(info->error, "move/final_timeout_ms"), "aborted for another reason: %s", info->error);
    //  It paused, and what ended the pause was the final round's bound,
    //  not the step timeout.
    CHECK(info->node_downtime_ms > 0);
    CHECK_MSG(info->node_downtime_ms < S_LONG_STEP_MS, "paused %" PRIu64 " ms", info->node_downtime_ms);
    shoal_move_info_clear(info);
    CHECK_MSG(shoal_move_check_settled(cluster, "cut", 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    s_stamp_check(cluster, 1, "cut");
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, 1), "cut", NULL), 200);
    s_no_error_logged(cluster);
    shoal_cluster_destroy(&cluster);
}

//  The nodes go first: a node still running could start a guest after the
//  cleanup looked.
#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_slow_link);
    S_TEST(test_final_round_cut);
    return shoal_test_finish();
}
