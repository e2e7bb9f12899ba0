/*  test_cluster_move_converge: a guest that writes faster than the link
    moves anyway, because the source throttles its writes (auto-converge),
    and only when the caller allows it.

    Namespace mode: node n1's link is limited to S_LINK_MBIT each way (tc),
    and its guests write S_RATE bytes/s, more than the link carries, so no
    round shrinks on its own.

      converge      the move throttles the guest step by step until the
                    final round fits the budget, and completes: the result
                    reports the steps and the time the guest ran
                    throttled, the claim is settled on the target with one
                    owner, its guest runs unthrottled there, and its stamps
                    verify.
      no-converge   the same guest, moved with no_converge, aborts as moves
                    did before auto-converge, naming the dirty rate; it
                    runs on the source, never throttled.
      floor         a budget no final round can fit (below the final
                    round's fixed overhead): the throttle climbs to its
                    floor, the move aborts naming the rate and the
                    throttle, and the guest runs on the source at its full
                    rate again.
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
//  The link and a guest that outruns it: 40 Mbit/s is 5 MB/s, the guest
//  writes 12 MB/s over 8 MiB of memory.
#define S_LINK_MBIT 40
#define S_MEMORY (8 * S_MB)
#define S_RATE (12 * 1000 * 1000)
#define S_BUDGET_MS 300
//  Below the final round's fixed overhead (shoal_transfer.c): never fits.
#define S_IMPOSSIBLE_MS 2
#define S_MOVE_WAIT_MS 300000
#define S_WAIT_MS 60000
//  shoal's own mesh timeouts (node/shoal_config.c), not the tests' short
//  ones: a probe may wait behind a full link.
#define S_PROBE_INTERVAL_MS 1000
#define S_PROBE_TIMEOUT_MS 500
#define S_SUSPECT_TIMEOUT_MS 5000
#define S_SYNC_INTERVAL_MS 2000

//  Asks node FROM to move ID to node TO with OPTIONS and follows it to its
//  end, into *INFO (the caller clears it).
static int
s_move(shoal_cluster_t *cluster, int from, int to, const char *id, const shoal_move_options_t *options,
       shoal_move_info_t *info)
{
    shoal_client_t *client = shoal_cluster_client_new(cluster, from);
    shoal_client_set_timeout(client, S_WAIT_MS);
    int rc = shoal_client_move_with(client, id, shoal_cluster_node_id(cluster, to), options, info);
    int64_t deadline = shoal_test_now_ms() + S_MOVE_WAIT_MS;
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

static void
s_print(const char *what, const shoal_move_info_t *info)
{
    printf("     %s: %s after %.1f s, %u rounds, dirty %.1f MB/s, link %.1f MB/s, final ~%" PRIu64
           " ms, downtime %" PRIu64 " ms, %u throttle step(s) to %u%% for %" PRIu64 " ms%s%s\n",
           what, info->phase, (double) info->total_ms / 1000, info->round, (double) info->dirty_rate / 1e6,
           (double) info->rate / 1e6, info->estimate_ms, info->node_downtime_ms, info->throttle_steps,
           info->throttle_percent, info->throttled_ms, *info->error ? ": " : "", info->error);
}

static int
s_create(shoal_cluster_t *cluster, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MEMORY, .id = id, .rate = S_RATE };
    int rc = shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL);
    if (rc != 200)
        return rc;
    //  Every page written: the baseline carries all of the memory, and
    //  measures the link.
    if (shoal_move_check_prefill(cluster, 1, id)) {
        fprintf(stderr, "%s\n", shoal_move_check_error());
        return -1;
    }
    return shoal_client_claim_put(shoal_cluster_client(cluster, 1), id, "stamp", S_STAMP, strlen(S_STAMP));
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

//  Claim ID's guest on node INDEX runs at its full rate (soon: the node
//  takes the throttle off as the guest runs on).
static void
s_unthrottled_check(shoal_cluster_t *cluster, int index, const char *id)
{
    uint32_t percent = 100;
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    do {
        CHECK_MSG(shoal_move_check_throttle(cluster, index, id, &percent) == 0, "%s", shoal_move_check_error());
        if (percent)
            usleep(100000);
    } while (percent && shoal_test_now_ms() < deadline);
    CHECK_MSG(percent == 0, "the guest of %s on n%d still has %u%% of its writes held back", id, index, percent);
}

//  Stops claim ID on node INDEX, verifies every stamp of its image, and
//  releases it.
static void
s_verify_release(shoal_cluster_t *cluster, int index, const char *id)
{
    shoal_client_t *patient = shoal_cluster_client_new(cluster, index);
    CHECK(patient);
    shoal_client_set_timeout(patient, S_WAIT_MS);
    int stopped = shoal_client_claim_stop(patient, id, NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(stopped, 200);
    CHECK_MSG(shoal_move_check_verify(cluster, index, id) == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_release(shoal_cluster_client(cluster, index), id, NULL), 200);
}

static void
test_converge(void)
{
    SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_options_t options = {
        .namespaces = true, .probe_interval_ms = S_PROBE_INTERVAL_MS, .probe_timeout_ms = S_PROBE_TIMEOUT_MS,
        .suspect_timeout_ms = S_SUSPECT_TIMEOUT_MS, .sync_interval_ms = S_SYNC_INTERVAL_MS,
    };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_limit_rate(cluster, 1, S_LINK_MBIT) == 0, "%s", shoal_cluster_error(cluster));

    //  no-converge: today's abort, naming the rate; the guest never throttled.
    CHECK_INT(s_create(cluster, "plain"), 200);
    shoal_move_info_t info;
    shoal_move_options_t plain = { .max_downtime_ms = S_BUDGET_MS, .no_converge = true };
    CHECK_INT(s_move(cluster, 1, 2, "plain", &plain, &info), 200);
    s_print("no-converge", &info);
    CHECK_STR(info.phase, "aborted");
    CHECK_MSG(strstr(info.error, "the guest dirties") && strstr(info.error, "MB/s"),
              "the abort does not name the dirty rate: %s", info.error);
    CHECK(info.throttle_steps == 0);
    CHECK(info.throttled_ms == 0);
    CHECK(info.dirty_rate > 0);
    shoal_move_info_clear(&info);
    CHECK_MSG(shoal_move_check_settled(cluster, "plain", 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    s_unthrottled_check(cluster, 1, "plain");
    s_stamp_check(cluster, 1, "plain");
    s_verify_release(cluster, 1, "plain");

    //  converge: the same guest moves, throttled until its final round fits.
    CHECK_INT(s_create(cluster, "fast"), 200);
    shoal_move_options_t converge = { .max_downtime_ms = S_BUDGET_MS };
    CHECK_INT(s_move(cluster, 1, 2, "fast", &converge, &info), 200);
    s_print("converge", &info);
    CHECK_STR(info.phase, "done");
    CHECK_MSG(info.throttle_steps >= 1, "the move completed without throttling: the guest did not outrun the link");
    CHECK(info.throttle_percent > 0 && info.throttle_percent < 100);
    CHECK(info.throttled_ms > 0);
    //  The final round began because its estimate fitted the budget.
    CHECK_MSG(info.estimate_ms <= S_BUDGET_MS, "final round estimated at %" PRIu64 " ms", info.estimate_ms);
    shoal_move_info_clear(&info);
    CHECK_MSG(shoal_move_check_settled(cluster, "fast", 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    s_unthrottled_check(cluster, 2, "fast");
    s_stamp_check(cluster, 2, "fast");
    s_verify_release(cluster, 2, "fast");

    //  floor: no budget fits; the throttle reaches its floor, the move
    //  aborts naming both, and the guest runs on the source unthrottled.
    CHECK_INT(s_create(cluster, "floor"), 200);
    shoal_move_options_t impossible = { .max_downtime_ms = S_IMPOSSIBLE_MS };
    CHECK_INT(s_move(cluster, 1, 2, "floor", &impossible, &info), 200);
    s_print("floor", &info);
    CHECK_STR(info.phase, "aborted");
    CHECK_INT(info.throttle_percent, 99);
    CHECK(info.throttled_ms > 0);
    CHECK_MSG(strstr(info.error, "the guest dirties") && strstr(info.error, "99% of its writes held back"),
              "the abort does not name the rate and the throttle: %s", info.error);
    shoal_move_info_clear(&info);
    CHECK_MSG(shoal_move_check_settled(cluster, "floor", 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    s_unthrottled_check(cluster, 1, "floor");
    s_stamp_check(cluster, 1, "floor");
    s_verify_release(cluster, 1, "floor");
    shoal_cluster_destroy(&cluster);
}

//  The nodes go first: a node still running could start a guest after the
//  cleanup looked.
#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_converge);
    return shoal_test_finish();
}
