/*  bench_drain: a node of many claims drained onto two peers, against the
    same moves done one by one in the same run.

    Usage: bench_drain [MEMORY_MIB [CLAIMS]]   (default 20 claims of 256 MiB;
                                                smaller ones for development)
           BENCH_PARALLEL=K the drain's --parallel (default 2);
           BENCH_KEEP=1 keeps the work directory (node logs) of a failed run;
           shoald and shoal-guest are looked for in $SHOAL_BIN_DIR, else
           beside this program; any SHOAL_* setting the harness does not
           fix passes through to the nodes.

    Three shoald on loopback (the tests' cluster harness, shoal's own mesh
    timeouts, store sync on, every limit at its default: move/concurrency
    2). n1 gets CLAIMS claims of MEMORY_MIB, idle, proc driver, each
    prefilled (stopped, every load page of its image written once, started
    again: a page as created is skipped by a move's baseline, so an untouched
    guest would measure nothing). Then, in order:

      one by one  every claim moves from n1 to n2 and n3 in turn, one move
                  at a time (shoal_client_move, then its status every
                  BENCH_POLL_MS until it is done), each with a final-round
                  budget of BENCH_BUDGET_MS; each move is timed as the
                  bench sees it, from the call to its end. Then, untimed,
                  each claim moves back to n1 the same way.
      drain       shoal_client_drain of n1 with --parallel BENCH_PARALLEL
                  and the same budget, its status every BENCH_POLL_MS until
                  it ended, timed as the bench sees it from the call to the
                  end. Every claim must have moved, and be settled on the
                  peer the drain names (one owner, counters equal to the
                  listing, no move record left: shoal_move_check_settled).

    Printed: the sum of the moves one by one beside the drain's time, their
    ratio, and the medians of the moves' downtimes both ways. The
    expectations are printed beside the figures, never asserted: the
    machine is noisy (limits.md). Two cores encrypt a move at full speed
    (limits.md): the drain gains by overlapping what a move does not spend
    on the link (admission, the image's preparation, the commit, the start
    and the drop on each side, the choice of targets).
*/
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "shoal.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_test.h"

#define BENCH_MIB (1024ull * 1024)
#define BENCH_DEFAULT_MEMORY_MIB 256
#define BENCH_DEFAULT_CLAIMS 20
#define BENCH_CLAIMS_MAX 100
#define BENCH_DEFAULT_PARALLEL 2
#define BENCH_PARALLEL_MAX 16
#define BENCH_BUDGET_MS 100
#define BENCH_TENANT "bench/drain"
#define BENCH_POLL_MS 10
#define BENCH_CALL_TIMEOUT_MS 120000
#define BENCH_MOVE_TIMEOUT_MS 600000
#define BENCH_SETTLE_TIMEOUT_MS 60000
#define BENCH_ALIVE_TIMEOUT_MS 60000
//  shoal's own mesh timeouts (node/shoal_config.c), not the tests' short ones.
#define BENCH_PROBE_INTERVAL_MS 1000
#define BENCH_PROBE_TIMEOUT_MS 500
#define BENCH_SUSPECT_TIMEOUT_MS 5000
#define BENCH_SYNC_INTERVAL_MS 2000
//  The expectation: the drain takes no longer than the same moves one by
//  one.
#define BENCH_EXPECTED_RATIO 1.0
#define BENCH_NODES 3
#define BENCH_ERROR_MAX 512
#define MS_PER_S 1000

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
s_sleep_ms(int ms)
{
    struct timespec ts = { ms / MS_PER_S, (long) (ms % MS_PER_S) * 1000000L };
    nanosleep(&ts, NULL);
}

//  The machine's load average (its moves share two cores with whatever
//  else runs), printed WHEN.
static void
s_load_print(const char *when)
{
    char line[128] = "";
    FILE *file = fopen("/proc/loadavg", "r");
    if (file) {
        if (!fgets(line, sizeof line, file))
            *line = '\0';
        fclose(file);
    }
    line[strcspn(line, "\n")] = '\0';
    printf("load average %s: %s\n", when, *line ? line : "unknown");
    fflush(stdout);
}

static void
s_expect(const char *what, bool met)
{
    printf("  %-70s %s\n", what, met ? "met" : "NOT met");
}

//  Moves ID from the node of CLIENT to node TO and follows it to its end.
//  Returns 0 with *SECONDS (the call to its end, as the bench saw it) and
//  *DOWNTIME_MS, or -1 (said why) when it was refused, aborted or not
//  followed.
static int
s_move(shoal_client_t *client, const char *id, const char *to, double *seconds, uint64_t *downtime_ms)
{
    shoal_move_info_t info;
    double started = s_now();
    int rc = shoal_client_move(client, id, to, BENCH_BUDGET_MS, &info);
    if (rc != 200) {
        fprintf(stderr, "move of %s to %s: %d %s\n", id, to, rc, shoal_client_error(client));
        return -1;
    }
    while (!info.done && !zsys_interrupted) {
        if (s_now() - started > (double) BENCH_MOVE_TIMEOUT_MS / MS_PER_S) {
            fprintf(stderr, "move of %s to %s not done within %d ms (phase %s)\n", id, to, BENCH_MOVE_TIMEOUT_MS,
                    info.phase);
            shoal_move_info_clear(&info);
            return -1;
        }
        s_sleep_ms(BENCH_POLL_MS);
        shoal_move_info_clear(&info);
        rc = shoal_client_move_status(client, id, &info);
        if (rc != 200) {
            fprintf(stderr, "status of the move of %s: %d %s\n", id, rc, shoal_client_error(client));
            return -1;
        }
    }
    *seconds = s_now() - started;
    bool done = info.done && streq(info.phase, "done");
    if (!done)
        fprintf(stderr, "move of %s to %s ended %s: %s\n", id, to, info.phase, info.error);
    *downtime_ms = info.node_downtime_ms;
    shoal_move_info_clear(&info);
    return done ? 0 : -1;
}

//  Follows node n1's drain until it ended, into *INFO. Returns 0 or -1.
static int
s_drain_wait(shoal_client_t *client, shoal_drain_info_t *info)
{
    double started = s_now();
    while (!zsys_interrupted) {
        int rc = shoal_client_drain_status(client, "n1", info);
        if (rc != 200) {
            fprintf(stderr, "drain status of n1: %d %s\n", rc, shoal_client_error(client));
            return -1;
        }
        if (!streq(info->phase, "running"))
            return 0;
        shoal_drain_info_clear(info);
        if (s_now() - started > (double) BENCH_MOVE_TIMEOUT_MS / MS_PER_S) {
            fprintf(stderr, "the drain of n1 did not end within %d ms\n", BENCH_MOVE_TIMEOUT_MS);
            return -1;
        }
        s_sleep_ms(BENCH_POLL_MS);
    }
    return -1;
}

//  A positive integer argument no larger than MAX, or 0 (said why).
static long
s_count_arg(const char *text, const char *what, long max)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || !end || *end || value < 1 || value > max) {
        fprintf(stderr, "bench_drain: %s '%s' is not a whole number from 1 to %ld\n", what, text, max);
        return 0;
    }
    return value;
}

int
main(int argc, char *argv[])
{
    if (argc > 3 || (argc > 1 && (streq(argv[1], "-h") || streq(argv[1], "--help")))) {
        fprintf(stderr, "usage: %s [MEMORY_MIB [CLAIMS]]   (default %d claims of %d MiB; BENCH_PARALLEL=K, "
                "default %d)\n", argv[0], BENCH_DEFAULT_CLAIMS, BENCH_DEFAULT_MEMORY_MIB, BENCH_DEFAULT_PARALLEL);
        return EXIT_FAILURE;
    }
    long memory_mib = argc > 1 ? s_count_arg(argv[1], "MEMORY_MIB", 65536) : BENCH_DEFAULT_MEMORY_MIB;
    long claims = argc > 2 ? s_count_arg(argv[2], "CLAIMS", BENCH_CLAIMS_MAX) : BENCH_DEFAULT_CLAIMS;
    long parallel = getenv("BENCH_PARALLEL") ? s_count_arg(getenv("BENCH_PARALLEL"), "BENCH_PARALLEL",
                                                           BENCH_PARALLEL_MAX)
                                             : BENCH_DEFAULT_PARALLEL;
    if (!memory_mib || !claims || !parallel)
        return EXIT_FAILURE;
    if (shoal_test_find_programs())
        return EXIT_FAILURE;
    //  czmq's handler stays: SIGINT sets zsys_interrupted, and the run
    //  ends what it does and tears down, so no node or guest outlives it.
    zsys_init();
    if (shoal_test_dir_make("bench-drain"))
        return EXIT_FAILURE;
    printf("bench_drain: %ld claims of %ld MiB on n1, drained to n2 and n3 (--parallel %ld), budget %d ms\n",
           claims, memory_mib, parallel, BENCH_BUDGET_MS);
    printf("work directory %s\n", shoal_test_dir);
    s_load_print("at the start");

    int rc = 0;
    shoal_client_t *clients[BENCH_NODES + 1] = { NULL };
    shoal_cluster_options_t options = {
        .probe_interval_ms = BENCH_PROBE_INTERVAL_MS, .probe_timeout_ms = BENCH_PROBE_TIMEOUT_MS,
        .suspect_timeout_ms = BENCH_SUSPECT_TIMEOUT_MS, .sync_interval_ms = BENCH_SYNC_INTERVAL_MS,
    };
    shoal_cluster_t *cluster = shoal_cluster_new(BENCH_NODES, &options);
    if (!cluster || shoal_cluster_start(cluster) || shoal_cluster_wait_all_alive(cluster, BENCH_ALIVE_TIMEOUT_MS)) {
        fprintf(stderr, "%s\n", cluster ? shoal_cluster_error(cluster) : "no cluster");
        rc = -1;
    }
    for (int index = 1; index <= BENCH_NODES && rc == 0; index++) {
        clients[index] = shoal_cluster_client_new(cluster, index);
        if (!clients[index])
            rc = -1;
        else
            shoal_client_set_timeout(clients[index], BENCH_CALL_TIMEOUT_MS);
    }
    char ids[BENCH_CLAIMS_MAX][32];
    int owner[BENCH_CLAIMS_MAX] = { 0 };
    double prepared = s_now();
    for (long i = 0; i < claims && rc == 0 && !zsys_interrupted; i++) {
        snprintf(ids[i], sizeof ids[i], "drain-%02ld", i + 1);
        shoal_claim_spec_t spec = { .tenant = BENCH_TENANT, .memory_bytes = (uint64_t) memory_mib * BENCH_MIB,
                                    .id = ids[i] };
        int created = shoal_client_claim_create(clients[1], &spec, NULL);
        if (created != 200) {
            fprintf(stderr, "create %s on n1: %d %s\n", ids[i], created, shoal_client_error(clients[1]));
            rc = -1;
            break;
        }
        owner[i] = 1;
        if (shoal_move_check_prefill(cluster, 1, ids[i])) {
            fprintf(stderr, "%s\n", shoal_move_check_error());
            rc = -1;
        }
    }
    if (rc == 0) {
        printf("claims: %ld created on n1 and prefilled in %.1f s\n", claims, s_now() - prepared);
        fflush(stdout);
    }
    //  Creating big guests keeps n1's reactor busy: the mesh must be whole
    //  again before a move is asked.
    if (rc == 0 && shoal_cluster_wait_all_alive(cluster, BENCH_ALIVE_TIMEOUT_MS)) {
        fprintf(stderr, "%s\n", shoal_cluster_error(cluster));
        rc = -1;
    }

    //  One by one, then back (untimed).
    double one_sum = 0;
    double one_down[BENCH_CLAIMS_MAX];
    for (long i = 0; i < claims && rc == 0 && !zsys_interrupted; i++) {
        int to = 2 + (int) (i % 2);
        double seconds = 0;
        uint64_t downtime = 0;
        rc = s_move(clients[1], ids[i], shoal_cluster_node_id(cluster, to), &seconds, &downtime);
        if (rc == 0) {
            owner[i] = to;
            one_sum += seconds;
            one_down[i] = (double) downtime;
            printf("  one by one %s n1->n%d  %5.2f s  downtime %3" PRIu64 " ms\n", ids[i], to, seconds, downtime);
            fflush(stdout);
        }
    }
    for (long i = 0; i < claims && rc == 0 && !zsys_interrupted; i++) {
        double seconds = 0;
        uint64_t downtime = 0;
        if (shoal_move_check_settled(cluster, ids[i], owner[i], BENCH_SETTLE_TIMEOUT_MS)) {
            fprintf(stderr, "%s\n", shoal_move_check_error());
            rc = -1;
            break;
        }
        rc = s_move(clients[owner[i]], ids[i], "n1", &seconds, &downtime);
        if (rc == 0)
            owner[i] = 1;
    }
    for (long i = 0; i < claims && rc == 0; i++)
        if (shoal_move_check_settled(cluster, ids[i], 1, BENCH_SETTLE_TIMEOUT_MS)) {
            fprintf(stderr, "%s\n", shoal_move_check_error());
            rc = -1;
        }
    if (rc == 0) {
        printf("one by one: %ld moves in %.2f s (sum of the moves), all moved back to n1\n", claims, one_sum);
        fflush(stdout);
    }

    //  The drain.
    shoal_drain_info_t info = { 0 };
    bool drained = false;
    double drain_s = 0;
    if (rc == 0 && !zsys_interrupted) {
        double started = s_now();
        int asked = shoal_client_drain(clients[1], "n1", BENCH_BUDGET_MS, (uint32_t) parallel, &info);
        if (asked != 200) {
            fprintf(stderr, "drain of n1: %d %s\n", asked, shoal_client_error(clients[1]));
            rc = -1;
        }
        else {
            shoal_drain_info_clear(&info);
            rc = s_drain_wait(clients[1], &info);
            drain_s = s_now() - started;
            drained = rc == 0;
        }
    }
    size_t moved = 0;
    double drain_down[BENCH_CLAIMS_MAX];
    if (drained) {
        for (size_t i = 0; i < info.count; i++) {
            const shoal_drain_claim_t *claim = &info.claims[i];
            printf("  drained %s %s %s  %5.2f s  downtime %3" PRIu64 " ms%s%s\n", claim->claim_id, claim->state,
                   claim->to, (double) claim->total_ms / MS_PER_S, claim->node_downtime_ms,
                   *claim->reason ? ": " : "", claim->reason);
            for (long c = 0; c < claims; c++)
                if (streq(ids[c], claim->claim_id) && streq(claim->state, "moved")) {
                    int to = atoi(claim->to + 1);
                    if (shoal_move_check_settled(cluster, ids[c], to, BENCH_SETTLE_TIMEOUT_MS)) {
                        fprintf(stderr, "%s\n", shoal_move_check_error());
                        rc = -1;
                    }
                    else {
                        owner[c] = to;
                        drain_down[moved++] = (double) claim->node_downtime_ms;
                    }
                }
        }
        printf("drain: %s in %.2f s as the bench saw it (%.2f s as n1 counts it), %zu of %ld moved\n", info.phase,
               drain_s, (double) info.total_ms / MS_PER_S, moved, claims);
        shoal_drain_info_clear(&info);
        if (shoal_client_undrain(clients[1], "n1", NULL) != 200)
            fprintf(stderr, "undrain of n1: %s\n", shoal_client_error(clients[1]));
    }
    if (rc == 0 && drained) {
        double ratio = one_sum > 0 ? drain_s / one_sum : 0;
        double one_median = bench_median(one_down, (size_t) claims);
        double drain_median = bench_median(drain_down, moved);
        printf("\nsummary: %ld claims of %ld MiB, --parallel %ld\n", claims, memory_mib, parallel);
        printf("  one by one (sum)  %7.2f s   downtime median %4.0f ms\n", one_sum, one_median);
        printf("  drain             %7.2f s   downtime median %4.0f ms\n", drain_s, drain_median);
        printf("  drain / one by one: %.2f\n", ratio);
        s_load_print("at the end");
        printf("expected:\n");
        char what[256];
        snprintf(what, sizeof what, "drain: every claim moved, each settled where it says (%zu of %ld)", moved,
                 claims);
        s_expect(what, (long) moved == claims);
        snprintf(what, sizeof what, "drain: total <= %.1fx the moves one by one (%.2f s / %.2f s = %.2f)",
                 BENCH_EXPECTED_RATIO, drain_s, one_sum, ratio);
        s_expect(what, ratio > 0 && ratio <= BENCH_EXPECTED_RATIO);
    }
    //  Every claim is released where it is.
    for (long i = 0; i < claims && cluster; i++)
        if (owner[i] && clients[owner[i]] && shoal_client_claim_release(clients[owner[i]], ids[i], NULL) != 200)
            fprintf(stderr, "release %s on n%d: %s\n", ids[i], owner[i], shoal_client_error(clients[owner[i]]));
    for (int index = 1; index <= BENCH_NODES; index++)
        shoal_client_destroy(&clients[index]);
    shoal_move_check_cleanup();
    shoal_cluster_destroy_all();
    shoal_move_check_cleanup();
    if (rc != 0 && getenv("BENCH_KEEP"))
        fprintf(stderr, "kept %s (BENCH_KEEP)\n", shoal_test_dir);
    else
        shoal_test_rmrf(shoal_test_dir);
    if (zsys_interrupted) {
        fprintf(stderr, "interrupted\n");
        rc = -1;
    }
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
