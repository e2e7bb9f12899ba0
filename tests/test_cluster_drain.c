/*  test_cluster_drain: a node emptied of its running and paused claims
    with one call, live, onto the peers with room for them.

      six onto five   n1 runs six claims; n2 has room for three and n3 for
                      two (limits/max_claims). The drain moves five, each
                      settled on its target with one owner, its counters
                      and registry in line; the sixth is reported with the
                      reason and still runs on n1. While it drains, a
                      client keeps calling every claim's guest: every call
                      answers, at worst 503 with a retry-after, and
                      libshoal follows each claim to its new owner. n1
                      refuses a new claim and an incoming move with 503
                      naming the drain, keeps the mark across a restart,
                      and takes claims again once undrained.
      paused          n1 runs two claims and holds a third paused; the
                      drain moves all three to n2, the paused one live as
                      well: on n2 it is paused, its guest stopped and never
                      run there (its writes and tick as the pause left
                      them), with one owner, the counters of both nodes
                      equal to a recount (the consistency sweep), and it
                      resumes there with what it held.
      crash           n1 kills itself (kill -9, as SHOAL_FAULT does) at the
                      commit of the drain's first move, and starts again:
                      the drain resumes from its record, every claim ends
                      with exactly one owner, and the record says it
                      resumed.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_STAMP "written-before-the-drain"
#define S_CLAIMS 6
#define S_MEMORY (4 * S_MB)
#define S_RATE (256 * 1024)
#define S_WAIT_MS 60000
#define S_DRAIN_WAIT_MS 180000
#define S_CRASH_CLAIMS 4

static const char *s_ids[S_CLAIMS] = { "d1", "d2", "d3", "d4", "d5", "d6" };

static int
s_create(shoal_cluster_t *cluster, int index, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MEMORY, .id = id, .rate = S_RATE };
    int rc = shoal_client_claim_create(shoal_cluster_client(cluster, index), &spec, NULL);
    if (rc != 200)
        return rc;
    return shoal_client_claim_put(shoal_cluster_client(cluster, index), id, "stamp", S_STAMP, strlen(S_STAMP));
}

//  Follows node INDEX's drain until it no longer runs, into *INFO.
static int
s_drain_wait(shoal_cluster_t *cluster, int index, shoal_drain_info_t *info)
{
    shoal_client_t *client = shoal_cluster_client_new(cluster, index);
    shoal_client_set_timeout(client, S_WAIT_MS);
    int64_t deadline = shoal_test_now_ms() + S_DRAIN_WAIT_MS;
    int rc;
    do {
        rc = shoal_client_drain_status(client, shoal_cluster_node_id(cluster, index), info);
        if (rc != 200 || !streq(info->phase, "running"))
            break;
        shoal_drain_info_clear(info);
        usleep(100000);
    } while (shoal_test_now_ms() < deadline);
    if (rc != 200)
        fprintf(stderr, "drain status of n%d: %d %s\n", index, rc, shoal_client_error(client));
    shoal_client_destroy(&client);
    return rc;
}

static void
s_drain_show(const shoal_drain_info_t *info)
{
    printf("     drain of %s %s in %.1f s%s%s\n", info->node_id, info->phase, (double) info->total_ms / 1000,
           *info->note ? ": " : "", info->note);
    for (size_t i = 0; i < info->count; i++)
        printf("       %s %s %s %s\n", info->claims[i].claim_id, info->claims[i].state, info->claims[i].to,
               info->claims[i].reason);
}

//  The node index of a node id "nK".
static int
s_index(const char *node_id)
{
    return node_id && node_id[0] == 'n' ? atoi(node_id + 1) : 0;
}

static void
s_stamp_check(shoal_cluster_t *cluster, int index, const char *id)
{
    uint8_t *value = NULL;
    size_t size = 0;
    CHECK_INT(shoal_client_claim_get(shoal_cluster_client(cluster, index), id, "stamp", &value, &size), 200);
    bool same = size == strlen(S_STAMP) && memcmp(value, S_STAMP, size) == 0;
    free(value);
    CHECK_MSG(same, "the stamp of %s read back from n%d differs", id, index);
}

//  A client that keeps calling every claim's guest through n1 while the
//  drain runs, and counts how each call answered.
typedef struct {
    shoal_cluster_t *cluster;
    volatile bool stop;
    size_t ok;                  //  200
    size_t unavailable;         //  503 with a retry-after
    size_t failed;              //  anything else
    char first_failure[512];
} s_caller_t;

static void *
s_caller_run(void *arg)
{
    s_caller_t *caller = (s_caller_t *) arg;
    shoal_client_t *client = shoal_cluster_client_new(caller->cluster, 1);
    shoal_client_set_timeout(client, S_WAIT_MS);
    while (!caller->stop) {
        for (int i = 0; i < S_CLAIMS && !caller->stop; i++) {
            uint8_t *value = NULL;
            size_t size = 0;
            int rc = shoal_client_claim_get(client, s_ids[i], "stamp", &value, &size);
            bool same = value && size == strlen(S_STAMP) && memcmp(value, S_STAMP, size) == 0;
            free(value);
            if (rc == 200 && same)
                caller->ok++;
            else
            if (rc == 503 && shoal_client_retry_after_ms(client) > 0)
                caller->unavailable++;
            else {
                if (!caller->failed)
                    snprintf(caller->first_failure, sizeof caller->first_failure, "%s: %d %s%s", s_ids[i], rc,
                             shoal_client_error(client), rc == 200 ? " (another value)" : "");
                caller->failed++;
            }
        }
        usleep(5000);
    }
    shoal_client_destroy(&client);
    return NULL;
}

static void
test_drain_six_onto_five(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    shoal_cluster_node_setenv(cluster, 2, "SHOAL_LIMITS_MAX_CLAIMS", "3");
    shoal_cluster_node_setenv(cluster, 3, "SHOAL_LIMITS_MAX_CLAIMS", "2");
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    for (int i = 0; i < S_CLAIMS; i++)
        CHECK_INT(s_create(cluster, 1, s_ids[i]), 200);

    s_caller_t caller = { .cluster = cluster };
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_caller_run, &caller) == 0);
    shoal_client_t *admin = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(admin, S_WAIT_MS);
    shoal_drain_info_t info;
    int rc = shoal_client_drain(admin, "n1", 0, 2, &info);
    if (rc == 200)
        shoal_drain_info_clear(&info);
    //  A second drain while one runs is refused.
    int again = shoal_client_drain(admin, "n1", 0, 2, NULL);
    //  A drain is asked of the node to drain.
    int elsewhere = shoal_client_drain(admin, "n2", 0, 2, NULL);
    shoal_client_destroy(&admin);
    int waited = rc == 200 ? s_drain_wait(cluster, 1, &info) : rc;
    caller.stop = true;
    pthread_join(thread, NULL);
    CHECK_INT(rc, 200);
    CHECK_INT(again, 409);
    CHECK_INT(elsewhere, 400);
    CHECK_INT(waited, 200);
    s_drain_show(&info);
    printf("     calls while draining: %zu answered, %zu 503 with retry-after, %zu otherwise%s%s\n", caller.ok,
           caller.unavailable, caller.failed, caller.failed ? ": " : "", caller.first_failure);
    CHECK_MSG(caller.failed == 0, "a call failed while draining: %s", caller.first_failure);
    CHECK(caller.ok > 0);

    CHECK_STR(info.phase, "done");
    CHECK(info.draining);
    CHECK_INT((int) info.count, S_CLAIMS);
    int moved = 0, stayed = 0;
    int on[4] = { 0 };
    for (size_t i = 0; i < info.count; i++) {
        const shoal_drain_claim_t *claim = &info.claims[i];
        if (streq(claim->state, "moved")) {
            moved++;
            int to = s_index(claim->to);
            CHECK_MSG(to == 2 || to == 3, "%s moved to '%s'", claim->claim_id, claim->to);
            on[to]++;
            CHECK_MSG(shoal_move_check_settled(cluster, claim->claim_id, to, S_WAIT_MS) == 0, "%s",
                      shoal_move_check_error());
            s_stamp_check(cluster, to, claim->claim_id);
        }
        else {
            CHECK_STR(claim->state, "stayed");
            stayed++;
            CHECK_MSG(strstr(claim->reason, "no peer has room"), "%s stayed for another reason: %s",
                      claim->claim_id, claim->reason);
            CHECK_MSG(shoal_move_check_settled(cluster, claim->claim_id, 1, S_WAIT_MS) == 0, "%s",
                      shoal_move_check_error());
            shoal_claim_info_t shown;
            CHECK_INT(shoal_client_claim_show(shoal_cluster_client(cluster, 1), claim->claim_id, &shown), 200);
            CHECK_STR(shown.state, "running");
            shoal_claim_info_clear(&shown);
            s_stamp_check(cluster, 1, claim->claim_id);
        }
    }
    CHECK_INT(moved, 5);
    CHECK_INT(stayed, 1);
    //  Never over a limit: each peer took what its limit allows.
    CHECK_INT(on[2], 3);
    CHECK_INT(on[3], 2);
    const char *moved_one = NULL;
    for (size_t i = 0; i < info.count && !moved_one; i++)
        if (streq(info.claims[i].state, "moved"))
            moved_one = shoal_strdup(info.claims[i].claim_id);
    int moved_at = 0;
    for (size_t i = 0; i < info.count; i++)
        if (streq(info.claims[i].claim_id, moved_one))
            moved_at = s_index(info.claims[i].to);
    shoal_drain_info_clear(&info);

    //  The draining node takes no new claim and no incoming move.
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MEMORY, .id = "late" };
    shoal_client_t *client = shoal_cluster_client(cluster, 1);
    CHECK_INT(shoal_client_claim_create(client, &spec, NULL), 503);
    CHECK_MSG(strstr(shoal_client_error(client), "draining"), "the refusal does not name the drain: %s",
              shoal_client_error(client));
    shoal_client_t *mover = shoal_cluster_client_new(cluster, moved_at);
    shoal_client_set_timeout(mover, S_WAIT_MS);
    shoal_move_info_t back;
    CHECK_INT(shoal_client_move(mover, moved_one, "n1", 0, &back), 503);
    CHECK_MSG(strstr(shoal_client_error(mover), "draining"), "the move's refusal does not name the drain: %s",
              shoal_client_error(mover));
    shoal_client_destroy(&mover);
    CHECK_MSG(shoal_move_check_settled(cluster, moved_one, moved_at, S_WAIT_MS) == 0, "%s",
              shoal_move_check_error());
    free((char *) moved_one);

    //  The mark outlives a restart.
    CHECK_MSG(shoal_cluster_node_restart(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    client = shoal_cluster_client(cluster, 1);
    CHECK_INT(shoal_client_drain_status(client, "n1", &info), 200);
    CHECK(info.draining);
    CHECK_STR(info.phase, "done");
    shoal_drain_info_clear(&info);
    CHECK_INT(shoal_client_claim_create(client, &spec, NULL), 503);

    //  The consistency sweep knows the drain record.
    shoal_fsck_report_t report;
    shoal_client_t *sweeper = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(sweeper, S_WAIT_MS);
    CHECK_INT(shoal_client_fsck(sweeper, false, 0, NULL, NULL, &report), 200);
    shoal_client_destroy(&sweeper);
    for (size_t i = 0; i < report.count; i++)
        printf("     fsck: %s %s %s: %s\n", report.findings[i].check, report.findings[i].where,
               report.findings[i].key, report.findings[i].problem);
    CHECK_MSG(report.finding_count == 0, "fsck found %" PRIu64 " inconsistencies on n1", report.finding_count);
    shoal_fsck_report_clear(&report);

    //  Undrained, it takes claims again.
    CHECK_INT(shoal_client_undrain(client, "n1", &info), 200);
    CHECK(!info.draining);
    shoal_drain_info_clear(&info);
    CHECK_INT(shoal_client_claim_create(client, &spec, NULL), 200);
    CHECK_INT(shoal_client_claim_release(client, "late", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

//  The consistency sweep of node INDEX finds nothing (its counters equal a
//  recount of its claims, among the rest).
static void
s_fsck_clean(shoal_cluster_t *cluster, int index)
{
    shoal_fsck_report_t report;
    shoal_client_t *sweeper = shoal_cluster_client_new(cluster, index);
    shoal_client_set_timeout(sweeper, S_WAIT_MS);
    CHECK_INT(shoal_client_fsck(sweeper, false, 0, NULL, NULL, &report), 200);
    shoal_client_destroy(&sweeper);
    for (size_t i = 0; i < report.count; i++)
        printf("     fsck n%d: %s %s %s: %s\n", index, report.findings[i].check, report.findings[i].where,
               report.findings[i].key, report.findings[i].problem);
    CHECK_MSG(report.finding_count == 0, "fsck found %" PRIu64 " inconsistencies on n%d", report.finding_count,
              index);
    shoal_fsck_report_clear(&report);
}

static void
test_drain_paused(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    for (int i = 0; i < 3; i++)
        CHECK_INT(s_create(cluster, 1, s_ids[i]), 200);
    const char *paused = s_ids[1];
    CHECK_INT(shoal_client_claim_pause(shoal_cluster_client(cluster, 1), paused, NULL), 200);
    CHECK_MSG(shoal_move_check_settled_paused(cluster, paused, 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    uint64_t writes = 0, tick = 0;
    CHECK_MSG(shoal_move_check_guest_clock(cluster, 1, paused, &writes, &tick) == 0, "%s", shoal_move_check_error());

    shoal_drain_info_t info;
    CHECK_INT(shoal_client_drain(shoal_cluster_client(cluster, 1), "n1", 0, 2, &info), 200);
    shoal_drain_info_clear(&info);
    CHECK_INT(s_drain_wait(cluster, 1, &info), 200);
    s_drain_show(&info);
    CHECK_STR(info.phase, "done");
    CHECK_INT((int) info.count, 3);
    for (size_t i = 0; i < info.count; i++) {
        const shoal_drain_claim_t *claim = &info.claims[i];
        CHECK_MSG(streq(claim->state, "moved"), "%s %s: %s", claim->claim_id, claim->state, claim->reason);
        CHECK_STR(claim->to, "n2");
        if (streq(claim->claim_id, paused))
            CHECK_MSG(shoal_move_check_settled_paused(cluster, paused, 2, S_WAIT_MS) == 0, "%s",
                      shoal_move_check_error());
        else {
            CHECK_MSG(shoal_move_check_settled(cluster, claim->claim_id, 2, S_WAIT_MS) == 0, "%s",
                      shoal_move_check_error());
            s_stamp_check(cluster, 2, claim->claim_id);
        }
    }
    shoal_drain_info_clear(&info);
    shoal_claim_info_t shown;
    CHECK_INT(shoal_client_claim_show(shoal_cluster_client(cluster, 2), paused, &shown), 200);
    CHECK_STR(shown.state, "paused");
    shoal_claim_info_clear(&shown);
    //  A paused guest takes no call, on its new owner as before.
    uint8_t *value = NULL;
    size_t size = 0;
    CHECK_INT(shoal_client_claim_get(shoal_cluster_client(cluster, 2), paused, "stamp", &value, &size), 503);
    free(value);
    //  Its guest never ran on n2: its writes and tick are as the pause left them.
    uint64_t writes_there = 0, tick_there = 0;
    CHECK_MSG(shoal_move_check_guest_clock(cluster, 2, paused, &writes_there, &tick_there) == 0, "%s",
              shoal_move_check_error());
    CHECK_MSG(writes_there == writes && tick_there == tick, "the paused guest ran on n2: %" PRIu64 " writes, tick %"
              PRIu64 ", paused at %" PRIu64 " writes, tick %" PRIu64, writes_there, tick_there, writes, tick);
    s_fsck_clean(cluster, 1);
    s_fsck_clean(cluster, 2);

    //  It resumes where it landed, with what it held.
    CHECK_INT(shoal_client_claim_resume(shoal_cluster_client(cluster, 2), paused, NULL), 200);
    CHECK_MSG(shoal_move_check_settled(cluster, paused, 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_MSG(shoal_move_check_guest_advances(cluster, 2, paused, writes, tick, S_WAIT_MS) == 0, "%s",
              shoal_move_check_error());
    s_stamp_check(cluster, 2, paused);
    shoal_cluster_destroy(&cluster);
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

static void
test_drain_crash(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_FAULT", "source:commit:crash");
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    for (int i = 0; i < S_CRASH_CLAIMS; i++)
        CHECK_INT(s_create(cluster, 1, s_ids[i]), 200);
    shoal_drain_info_t info;
    CHECK_INT(shoal_client_drain(shoal_cluster_client(cluster, 1), "n1", 0, 1, &info), 200);
    shoal_drain_info_clear(&info);
    //  The first move's commit kills n1 (the harness reaps it).
    CHECK_MSG(s_log_wait(cluster, 1, "fault: crash at source:commit", S_WAIT_MS), "n1 did not crash at its "
              "first commit");
    shoal_cluster_node_kill(cluster, 1, SIGKILL);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_FAULT", "");
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));

    CHECK_INT(s_drain_wait(cluster, 1, &info), 200);
    s_drain_show(&info);
    CHECK_STR(info.phase, "done");
    CHECK_MSG(strstr(info.note, "resumed after a restart"), "the drain does not say it resumed: %s", info.note);
    CHECK_INT((int) info.count, S_CRASH_CLAIMS);
    for (size_t i = 0; i < info.count; i++) {
        const shoal_drain_claim_t *claim = &info.claims[i];
        //  Every claim ends with one owner, the one the drain names.
        int owner = 0;
        CHECK_MSG(shoal_move_check_settled_any(cluster, claim->claim_id, S_WAIT_MS, &owner) == 0, "%s",
                  shoal_move_check_error());
        if (streq(claim->state, "moved"))
            CHECK_INT(owner, s_index(claim->to));
        else {
            CHECK_STR(claim->state, "stayed");
            CHECK_INT(owner, 1);
        }
        s_stamp_check(cluster, owner, claim->claim_id);
    }
    shoal_drain_info_clear(&info);
    shoal_cluster_destroy(&cluster);
}

//  The nodes go first: a node still running could start a guest after the
//  cleanup looked.
#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_drain_six_onto_five);
    S_TEST(test_drain_paused);
    S_TEST(test_drain_crash);
    return shoal_test_finish();
}
