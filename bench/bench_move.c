/*  bench_move: live moves of idle and loaded guests between two real nodes,
    against the raw CURVE limit measured in the same run.

    Usage: bench_move [CASE...]   (default: every case but the large ones, in this order)
             idle-512m   a 512 MiB guest that writes nothing
             idle-2g     a 2 GiB guest that writes nothing
             write-50    a 512 MiB guest writing 50 MB/s
             write-100   the same at 100 MB/s
             write-200   the same at 200 MB/s
             write-300   the same at 300 MB/s, faster than its rounds
                         shrink on their own: it moves with auto-converge
                         (the default), and its throttle steps and the
                         time it ran throttled are printed
             link-200    a 512 MiB guest writing 4 MB/s, the nodes in
                         network namespaces, n1's link limited to 200
                         Mbit/s each way (tc; needs root, else skipped)
             proc-64m    a 64 MiB guest that writes nothing (beside the
                         exec cases)
             exec-idle-64m   an exec claim: a 64 MiB guest that writes
                         nothing, moved through the VM manager's capture
                         and receive (tests/fake-vm-manager in guest mode)
             exec-write-5    the same writing 5 MB/s
           and, only when named (each takes minutes; 8 GiB on each side,
           run them on a calm machine with the memory for it):
             idle-8g     an 8 GiB guest that writes nothing
             write-50-8g an 8 GiB guest writing 50 MB/s
           whose total time is set beside the raw CURVE stream's time for
           the bytes the move sent, at the raw limit of the same run, and
           whose moved guest's longest gap is set beside a still guest's:
           a 64 MiB shoal-guest at the case's rate, outside the nodes, its
           memory where theirs is, its longest gap taken across each move
           (what the machine alone did to a guest's clock meanwhile).
           BENCH_REPS=N moves per case (default 5);
           BENCH_KEEP=1 keeps the work directory (node logs) of a failed run;
           BENCH_GUEST_DIR=DIR keeps the nodes' guests in DIR/n1 and DIR/n2;
           BENCH_MEMORY_DIR=DIR keeps their memory (guest/memory_dir) in a
           directory of the run's under DIR, removed at its end;
           shoald and shoal-guest are looked for in $SHOAL_BIN_DIR, else
           beside this program; any SHOAL_* setting the harness does not
           fix (SHOAL_MOVE_STEP_TIMEOUT_MS...) passes through to both nodes.

    First the raw limit: BENCH_RAW_RUNS zero-copy CURVE streams of 1 GiB in
    1 MiB messages between two forked processes (bench_raw.h), median.
    Then two shoald on loopback (the tests' cluster harness, shoal's own
    mesh timeouts, store sync on). Each case creates one claim on n1
    through libshoal (proc driver, no disk, the case's load rate set at
    create), then prefills it: the claim is stopped, every load page of its
    image is written once through shoal_image_write (stamped, as the
    guest's load writes them), and it is started again. A page still as
    the image was created (all zeros) is skipped by the baseline, so an
    untouched guest would measure nothing; the load's random writes would need several
    times the memory's size to reach nearly every page. The claim then
    moves BENCH_REPS times, n1->n2, n2->n1 and so on, each with a final-round
    budget (max_downtime_ms) of BENCH_BUDGET_MS: shoal_client_move, which
    answers once the target admitted the move (its sparse image made),
    then shoal_client_move_status every BENCH_POLL_MS until the move is
    done. Afterwards, untimed, the claim must be settled on its new owner
    (or, after an abort, on the old one: shoal_move_check_settled).

    A case over a limited link runs on two nodes of its own, in network
    namespaces, and after its moves measures the link's own time: the raw
    stream (bench_raw_stream_on) of the median bytes a move sent, from n1's
    namespace to n2's address, BENCH_RAW_RUNS times, median. A move can
    only come near it: its rounds carry what the guest dirtied, and each
    ends with an acknowledgement.

    An exec case runs the same on an exec claim: both nodes have
    tests/fake-vm-manager (beside the build directory, or under
    $SHOAL_SOURCE_DIR) as their VM manager, in guest mode, so its VM is a
    shoal-guest image in the node's guest directory, prefilled as above.
    That manager captures the image whole in every round, as the simplest
    manager does, so a round never shrinks and the final round carries the
    whole image (copied, sent and synced while the guest is paused): its
    cases are small, with a budget of BENCH_EXEC_BUDGET_MS, and are set
    beside the proc case of the same memory (proc-64m, run with them) for
    the ratio of their downtimes and totals.

    What is printed, per move and as medians of the moves that completed:
      admit     the shoal_client_move call, as the bench timed it
      baseline  the rate of round 1, as ratio of the raw limit.
                shoal_move_info_t has no per-round figures: its rate is
                the bytes sent since round 1 began over the time since,
                told every 200 ms within a round and at each round's
                acknowledgement; the final round leaves it as it was.
                Read while round 1 is the round under way or the last one
                done, it is round 1's alone, and so is the rate an idle
                guest's move ends with (its one pre-copy round is the
                baseline). When a poll missed that moment in a move of
                several pre-copy rounds, the rate of the rounds done when
                it was read is shown, marked '*'.
      total     total_ms: from the request on the source to the guest
                running on the target (admission included)
      rounds    rounds sent, the final one included
      sent      bytes_sent, every round
      downtime  node_downtime_ms: guest paused on the source to started on
                the target; guest_switch_gap_ms: the guest's own millisecond
                tick across the switch, its last tick on the source to its
                first on the target. The two are the downtime the move
                caused, and the expectations judge them.
      longest   guest_downtime_ms: the longest gap the guest's own tick saw
                over the whole move, pre-copy rounds included: on a loaded
                machine a guest starved of the CPU while it still ran on the
                source shows it, which the switch did not cause. Printed as
                information, beside the still guest's of the same moves.
      steps     where the node downtime went (shoal_move_info_t): the
                guest's pause (before it), then from the pause on: to the
                final round's start, the final round (its bytes, and the
                target's sync inside it), when the commit request reached
                the source and how long its synced write took, and the
                target's commit-answered-to-guest-started
    and how many moves aborted, with the reason the node gave. The
    expectations are printed beside the figures, never asserted: the
    machine is noisy (limits.md), the figures are for sanity.
*/
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "bench_raw.h"
#include "shoal.h"
#include "shoal_cluster.h"
#include "shoal_image.h"
#include "shoal_move_check.h"

#define BENCH_MIB (1024ull * 1024)
#define BENCH_MB 1e6
#define BENCH_RAW_BYTES (1024 * BENCH_MIB)
#define BENCH_RAW_RUNS 3
#define BENCH_DEFAULT_REPS 5
#define BENCH_REPS_MAX 100
#define BENCH_BUDGET_MS 100
#define BENCH_TENANT "bench/move"
//  The still guest beside the large cases' moves (see s_still_start).
#define BENCH_STILL_MIB 64
#define BENCH_STILL_START_S 10.0
//  How often a move's status is asked for while it runs.
#define BENCH_POLL_MS 10
//  Calls that create or move gigabytes wait long for their answer.
#define BENCH_CALL_TIMEOUT_MS 120000
#define BENCH_MOVE_TIMEOUT_MS 600000
#define BENCH_SETTLE_TIMEOUT_MS 60000
#define BENCH_ALIVE_TIMEOUT_MS 60000
//  shoal's own mesh timeouts (node/shoal_config.c), not the tests' short ones.
#define BENCH_PROBE_INTERVAL_MS 1000
#define BENCH_PROBE_TIMEOUT_MS 500
#define BENCH_SUSPECT_TIMEOUT_MS 5000
#define BENCH_SYNC_INTERVAL_MS 2000
//  The expectations.
#define BENCH_EXPECTED_BASELINE 0.70
#define BENCH_EXPECTED_IDLE_TOTAL_S 1.5
#define BENCH_EXPECTED_IDLE_DOWN_MS 30
//  A large guest's move against the raw CURVE stream of its bytes: at most
//  this many times its time.
#define BENCH_EXPECTED_LARGE_RATIO 2.0
//  Over a limited link: the link's own time for a move's bytes, as a share
//  of the move's total.
#define BENCH_EXPECTED_LINK_SHARE 0.80
//  Exec cases: the final round is a whole image, copied, sent and synced.
#define BENCH_EXEC_BUDGET_MS 2000
#define BENCH_EXEC_DRIVER "exec"
//  An exec move's downtime against a proc move's of the same guest: at
//  most this many times.
#define BENCH_EXPECTED_EXEC_DOWN_RATIO 20.0
#define BENCH_PATH_MAX 4096
#define BENCH_ERROR_MAX 512
#define MS_PER_S 1000

//  One case: a guest and its load.
typedef struct {
    const char *name;           //  as named on the command line
    uint64_t memory_bytes;      //  the guest's memory
    uint64_t rate;              //  bytes/s its load writes (0: idle)
    int link_mbit;              //  the nodes' link, Mbit/s each way (0: loopback, unlimited)
    const char *driver;         //  NULL: proc; "exec": through the VM manager
    const char *beside;         //  an exec case: the proc case of the same guest, for the ratios
    bool large;                 //  run only when named; its total beside the raw stream of its bytes
} bench_case_t;

static const bench_case_t s_cases[] = {
    { "idle-512m", 512 * BENCH_MIB, 0, 0, NULL, NULL, false },
    { "idle-2g", 2048 * BENCH_MIB, 0, 0, NULL, NULL, false },
    { "write-50", 512 * BENCH_MIB, 50 * 1000 * 1000, 0, NULL, NULL, false },
    { "write-100", 512 * BENCH_MIB, 100 * 1000 * 1000, 0, NULL, NULL, false },
    { "write-200", 512 * BENCH_MIB, 200 * 1000 * 1000, 0, NULL, NULL, false },
    { "write-300", 512 * BENCH_MIB, 300 * 1000 * 1000, 0, NULL, NULL, false },
    { "link-200", 512 * BENCH_MIB, 4 * 1000 * 1000, 200, NULL, NULL, false },
    { "proc-64m", 64 * BENCH_MIB, 0, 0, NULL, NULL, false },
    { "exec-idle-64m", 64 * BENCH_MIB, 0, 0, BENCH_EXEC_DRIVER, "proc-64m", false },
    { "exec-write-5", 64 * BENCH_MIB, 5 * 1000 * 1000, 0, BENCH_EXEC_DRIVER, "proc-64m", false },
    { "idle-8g", 8192 * BENCH_MIB, 0, 0, NULL, NULL, true },
    { "write-50-8g", 8192 * BENCH_MIB, 50 * 1000 * 1000, 0, NULL, NULL, true },
};
#define BENCH_CASES (sizeof s_cases / sizeof s_cases[0])

//  One move's figures.
typedef struct {
    int from, to;               //  node indexes
    bool done;                  //  completed (else aborted)
    char error[BENCH_ERROR_MAX];//  why it aborted
    double admit_s;             //  the shoal_client_move call
    double baseline;            //  bytes/s of round 1 (0: never seen)
    uint32_t baseline_round;    //  the last round done when it was read
    bool baseline_exact;        //  it is round 1's alone
    uint32_t rounds;
    uint64_t bytes;
    uint64_t total_ms;
    uint64_t node_down_ms;
    uint64_t switch_gap_ms;     //  the guest's own clock across the switch (guest_switch_gap_ms)
    uint64_t guest_down_ms;     //  its longest gap over the whole move (guest_downtime_ms)
    uint64_t still_gap_ms;      //  the still guest's longest gap across the same move (0: none ran)
    //  Auto-converge: throttle steps taken, the share of writes held back at
    //  the end (percent), and how long the guest ran throttled.
    uint32_t throttle_steps, throttle_percent;
    uint64_t throttled_ms;
    //  Where the node downtime went (shoal_move_info_t's steps, µs).
    uint64_t pause_us, final_wait_us, final_bytes, final_us, target_sync_us, commit_asked_us, commit_us, start_us;
} bench_move_t;

//  A case's medians, over the moves that completed.
typedef struct {
    const bench_case_t *spec;
    bool ran;                   //  it ran to the end
    int reps;
    int done;
    int aborted;
    char abort_reason[BENCH_ERROR_MAX];  //  the first abort's reason
    double baseline;            //  median bytes/s of round 1
    double total_s;
    double rounds;
    double node_down_ms;
    double switch_gap_ms;       //  median of the guest's gaps across the switch
    double guest_down_ms;       //  median of its longest gaps over the moves
    double still_gap_ms;        //  median of the still guest's longest gaps, moves done (0: none ran)
    int quick;                  //  moves done with a node downtime under BENCH_EXPECTED_IDLE_DOWN_MS
    int throttled;              //  moves done that auto-converge throttled
    double throttle_steps;      //  medians of the moves done
    double throttled_ms;
    double bytes;               //  median bytes sent
    double link_s;              //  a link case: the raw stream of BYTES over the same link
} bench_result_t;

static void
s_sleep_ms(int ms)
{
    struct timespec ts = { ms / MS_PER_S, (long) (ms % MS_PER_S) * 1000000L };
    nanosleep(&ts, NULL);
}

//  The raw limit: the median of BENCH_RAW_RUNS streams, in bytes/s.
static double
s_raw_limit(void)
{
    double rates[BENCH_RAW_RUNS];
    printf("raw limit: %d CURVE streams of %.0f MiB between two processes, %d-byte zero-copy messages\n",
           BENCH_RAW_RUNS, (double) BENCH_RAW_BYTES / BENCH_MIB, BENCH_RAW_STREAM_MESSAGE);
    for (int run = 0; run < BENCH_RAW_RUNS; run++) {
        double seconds = bench_raw_stream(BENCH_RAW_BYTES);
        if (seconds <= 0)
            return -1;
        rates[run] = (double) BENCH_RAW_BYTES / seconds;
        printf("  raw %d   %6.2f s  %7.1f MB/s\n", run + 1, seconds, rates[run] / BENCH_MB);
        fflush(stdout);
    }
    double median = bench_median(rates, BENCH_RAW_RUNS);
    printf("  raw median          %7.1f MB/s\n", median / BENCH_MB);
    return median;
}

//  The final round's budget of CASE's moves.
static uint32_t
s_budget(const bench_case_t *spec)
{
    return spec->driver ? BENCH_EXEC_BUDGET_MS : BENCH_BUDGET_MS;
}

//  The fake VM manager's state directory of node INDEX.
static void
s_manager_dir(int index, char *dir, size_t size)
{
    snprintf(dir, size, "%s/vm-state-%d", shoal_test_dir, index);
}

//  The fake VM manager, or NULL when it is not found.
static const char *
s_manager_path(void)
{
    static char path[BENCH_PATH_MAX];
    const char *source = getenv("SHOAL_SOURCE_DIR");
    if (source)
        snprintf(path, sizeof path, "%s/tests/fake-vm-manager", source);
    else
        snprintf(path, sizeof path, "%s/../tests/fake-vm-manager", getenv("SHOAL_BIN_DIR"));
    return access(path, X_OK) == 0 ? path : NULL;
}

//  Creates claim ID on n1 for CASE and prefills its memory.
static int
s_claim_prepare(shoal_cluster_t *cluster, shoal_client_t *client, const bench_case_t *spec, const char *id)
{
    shoal_claim_spec_t claim = { .tenant = BENCH_TENANT, .memory_bytes = spec->memory_bytes, .id = id,
                                 .rate = spec->rate, .driver = spec->driver };
    //  The fake manager's guest takes its load's rate from its state
    //  directory: the exec driver does not pass one.
    for (int index = 1; spec->driver && index <= 2; index++) {
        char dir[BENCH_PATH_MAX], path[BENCH_PATH_MAX + 32];
        s_manager_dir(index, dir, sizeof dir);
        snprintf(path, sizeof path, "%s/guest-rate", dir);
        FILE *file = fopen(path, "w");
        if (!file) {
            fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
            return -1;
        }
        fprintf(file, "%" PRIu64 "\n", spec->rate);
        fclose(file);
    }
    double started = bench_raw_now();
    int rc = shoal_client_claim_create(client, &claim, NULL);
    if (rc != 200) {
        fprintf(stderr, "create %s on n1: %d %s\n", id, rc, shoal_client_error(client));
        return -1;
    }
    double created = bench_raw_now() - started;
    started = bench_raw_now();
    if (shoal_move_check_prefill(cluster, 1, id)) {
        fprintf(stderr, "%s\n", shoal_move_check_error());
        return -1;
    }
    double filled = bench_raw_now() - started;
    printf("  claim %s on n1: created in %.2f s, stopped, every page written and started again in %.2f s\n", id, created, filled);
    return 0;
}

//  Moves ID from node FROM to node TO and follows it to its end, into MOVE.
//  Returns 0 when the move ran to an end (done or aborted), -1 when it could
//  not be asked or followed.
static int
s_move(shoal_cluster_t *cluster, shoal_client_t *client, const char *id, uint32_t budget, bench_move_t *move)
{
    shoal_move_info_t info;
    const char *to = shoal_cluster_node_id(cluster, move->to);
    double started = bench_raw_now();
    int rc = shoal_client_move(client, id, to, budget, &info);
    move->admit_s = bench_raw_now() - started;
    if (rc != 200) {
        //  Refused before anything started: counted as an abort, with why.
        snprintf(move->error, sizeof move->error, "refused %d: %s", rc, shoal_client_error(client));
        return rc < 0 ? -1 : 0;
    }
    double deadline = started + (double) BENCH_MOVE_TIMEOUT_MS / MS_PER_S;
    while (!info.done && !zsys_interrupted) {
        //  The last rate seen within round 1 (told every 200 ms and when
        //  the round is acknowledged), else the first seen after it.
        if (info.round >= 1 && info.rate > 0 && (info.round == 1 || move->baseline == 0)) {
            move->baseline = (double) info.rate;
            move->baseline_round = info.round;
        }
        if (bench_raw_now() > deadline) {
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
    if (!info.done) {
        shoal_move_info_clear(&info);
        return -1;
    }
    move->done = streq(info.phase, "done");
    if (move->baseline == 0 && info.rate > 0) {
        move->baseline = (double) info.rate;
        move->baseline_round = info.round;
    }
    //  The rate changes with each pre-copy round only (not with the final
    //  one): it is round 1's when read after round 1, or when round 1 was
    //  the only pre-copy round, as an idle guest's is.
    uint32_t precopy = move->done && info.round > 0 ? info.round - 1 : info.round;
    if (precopy == 1 && info.rate > 0) {
        move->baseline = (double) info.rate;
        move->baseline_round = 1;
    }
    move->baseline_exact = move->baseline_round == 1;
    if (!move->done)
        snprintf(move->error, sizeof move->error, "%s", *info.error ? info.error : info.phase);
    move->rounds = info.round;
    move->bytes = info.bytes_sent;
    move->total_ms = info.total_ms;
    move->node_down_ms = info.node_downtime_ms;
    move->switch_gap_ms = info.guest_switch_gap_ms;
    move->throttle_steps = info.throttle_steps;
    move->throttle_percent = info.throttle_percent;
    move->throttled_ms = info.throttled_ms;
    move->guest_down_ms = info.guest_downtime_ms;
    move->pause_us = info.pause_us;
    move->final_wait_us = info.final_wait_us;
    move->final_bytes = info.final_bytes;
    move->final_us = info.final_us;
    move->target_sync_us = info.target_sync_us;
    move->commit_asked_us = info.commit_asked_us;
    move->commit_us = info.commit_us;
    move->start_us = info.start_us;
    shoal_move_info_clear(&info);
    return 0;
}

static void
s_move_print(int rep, const bench_move_t *move, double raw)
{
    printf("  rep %-2d n%d->n%d  admit %5.2f s  ", rep, move->from, move->to, move->admit_s);
    if (move->baseline > 0)
        printf("baseline %6.1f MB/s%s (%.2f of raw)  ", move->baseline / BENCH_MB, move->baseline_exact ? " " : "*",
               move->baseline / raw);
    if (move->done) {
        printf("total %5.2f s  rounds %2u  sent %6.1f MB  downtime %3" PRIu64 " ms node / %3" PRIu64
               " ms switch  (longest gap %3" PRIu64 " ms)\n", (double) move->total_ms / MS_PER_S, move->rounds,
               (double) move->bytes / BENCH_MB, move->node_down_ms, move->switch_gap_ms, move->guest_down_ms);
        if (move->still_gap_ms)
            printf("         the still guest's longest gap meanwhile: %" PRIu64 " ms\n", move->still_gap_ms);
        if (move->throttle_steps)
            printf("         auto-converge: %u throttle step(s), %u%% of its writes held back at the end, "
                   "throttled %.2f s\n", move->throttle_steps, move->throttle_percent,
                   (double) move->throttled_ms / MS_PER_S);
        printf("         steps (ms): pause %.1f | paused: to final %.1f, final %.1f (%.1f MB, target sync %.1f), "
               "commit asked at %.1f, commit %.1f, start %.0f\n",
               move->pause_us / 1e3, move->final_wait_us / 1e3, move->final_us / 1e3, move->final_bytes / BENCH_MB,
               move->target_sync_us / 1e3, move->commit_asked_us / 1e3, move->commit_us / 1e3, move->start_us / 1e3);
    }
    else
        printf("ABORTED after %.2f s, %u rounds: %s\n", (double) move->total_ms / MS_PER_S, move->rounds,
               move->error);
    fflush(stdout);
}

//  Fills RESULT's medians from the REPS moves in MOVES.
static void
s_result_fill(bench_result_t *result, const bench_move_t *moves, int reps)
{
    double baseline[BENCH_REPS_MAX], total[BENCH_REPS_MAX], rounds[BENCH_REPS_MAX];
    double node[BENCH_REPS_MAX], switch_gap[BENCH_REPS_MAX], guest[BENCH_REPS_MAX], still[BENCH_REPS_MAX];
    double bytes[BENCH_REPS_MAX], steps[BENCH_REPS_MAX], throttled[BENCH_REPS_MAX];
    size_t done = 0, rated = 0;
    result->reps = reps;
    for (int i = 0; i < reps; i++) {
        const bench_move_t *move = &moves[i];
        if (move->baseline > 0)
            baseline[rated++] = move->baseline;
        if (!move->done) {
            if (!result->aborted++)
                snprintf(result->abort_reason, sizeof result->abort_reason, "%s", move->error);
            continue;
        }
        total[done] = (double) move->total_ms / MS_PER_S;
        rounds[done] = move->rounds;
        node[done] = (double) move->node_down_ms;
        switch_gap[done] = (double) move->switch_gap_ms;
        guest[done] = (double) move->guest_down_ms;
        still[done] = (double) move->still_gap_ms;
        bytes[done] = (double) move->bytes;
        steps[done] = move->throttle_steps;
        throttled[done] = (double) move->throttled_ms;
        result->throttled += move->throttle_steps > 0;
        result->quick += move->node_down_ms < BENCH_EXPECTED_IDLE_DOWN_MS;
        done++;
    }
    result->done = (int) done;
    result->baseline = bench_median(baseline, rated);
    result->total_s = bench_median(total, done);
    result->rounds = bench_median(rounds, done);
    result->node_down_ms = bench_median(node, done);
    result->switch_gap_ms = bench_median(switch_gap, done);
    result->guest_down_ms = bench_median(guest, done);
    result->still_gap_ms = bench_median(still, done);
    result->bytes = bench_median(bytes, done);
    result->throttle_steps = bench_median(steps, done);
    result->throttled_ms = bench_median(throttled, done);
}

static void
s_result_print(const bench_result_t *result, double raw)
{
    printf("  median of %d done (%d aborted): baseline %.1f MB/s (%.2f of raw)", result->done, result->aborted,
           result->baseline / BENCH_MB, result->baseline / raw);
    if (result->done)
        printf(", total %.2f s, rounds %.0f, downtime %.0f ms node / %.0f ms switch (longest gap %.0f ms)",
               result->total_s, result->rounds, result->node_down_ms, result->switch_gap_ms, result->guest_down_ms);
    if (result->done && result->still_gap_ms > 0)
        printf(" (a still guest's longest gap %.0f ms)", result->still_gap_ms);
    printf("\n");
    if (result->aborted)
        printf("  aborted: %d of %d, first because %s\n", result->aborted, result->reps, result->abort_reason);
    fflush(stdout);
}

//  The run's own directory under BENCH_MEMORY_DIR, into PATH: false when
//  it is not set (the guests' memory lies in their directories).
static bool
s_memory_root(char *path, size_t size)
{
    const char *root = getenv("BENCH_MEMORY_DIR");
    if (!root || !*root)
        return false;
    const char *run = strrchr(shoal_test_dir, '/');
    snprintf(path, size, "%s/%s", root, run ? run + 1 : shoal_test_dir);
    return true;
}

//  The still guest: a guest of BENCH_STILL_MIB writing at the case's rate
//  beside the moves, outside the nodes and never moved, its memory where
//  the nodes keep theirs. Its longest gap across a move says what the
//  machine alone (other work, its disk) does to a guest's clock meanwhile,
//  beside the moved guest's. Returns its pid (its image in *IMAGE_P), or
//  -1 when it could not be started (said why).
static pid_t
s_still_start(const bench_case_t *spec, shoal_image_t **image_p)
{
    char dir[BENCH_PATH_MAX + 16], log[BENCH_PATH_MAX + 32], memory[BENCH_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/still-guest", shoal_test_dir);
    snprintf(log, sizeof log, "%s/still-guest.log", shoal_test_dir);
    bool in_memory = s_memory_root(memory, sizeof memory);
    char *error = NULL;
    if ((in_memory && zsys_dir_create("%s", memory))
    ||  shoal_image_create_in(dir, in_memory ? memory : NULL, BENCH_STILL_MIB * BENCH_MIB, 0, spec->rate, &error)
    ||  !(*image_p = shoal_image_open(dir, &error))) {
        fprintf(stderr, "the still guest: %s\n", error ? error : strerror(errno));
        free(error);
        return -1;
    }
    char *argv[] = { (char *) shoal_test_program("shoal-guest"), "run", dir, NULL };
    uint64_t before = shoal_image_tick_ms(*image_p);
    pid_t pid = shoal_test_spawn(argv, NULL, log);
    double deadline = bench_raw_now() + BENCH_STILL_START_S;
    while (pid > 0 && shoal_image_tick_ms(*image_p) == before && bench_raw_now() < deadline)
        s_sleep_ms(1);
    if (pid > 0 && shoal_image_tick_ms(*image_p) == before) {
        fprintf(stderr, "the still guest did not start (%s)\n", log);
        shoal_test_stop(pid, SIGKILL);
        pid = -1;
    }
    if (pid < 0)
        shoal_image_destroy(image_p);
    return pid;
}

static void
s_still_stop(pid_t pid, shoal_image_t **image_p)
{
    if (pid > 0)
        shoal_test_stop(pid, SIGTERM);
    shoal_image_destroy(image_p);
    char dir[BENCH_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/still-guest", shoal_test_dir);
    shoal_image_remove(dir);
}

//  Runs one case: a claim on n1, REPS moves, the claim released.
static int
s_case_run(shoal_cluster_t *cluster, shoal_client_t **clients, const bench_case_t *spec, int reps, double raw,
           bench_result_t *result)
{
    char id[64];
    snprintf(id, sizeof id, "bench-%s", spec->name);
    printf("case %s: %.0f MiB guest, %s, driver %s; %d moves, budget %u ms\n", spec->name,
           (double) spec->memory_bytes / BENCH_MIB, spec->rate ? "writing" : "idle",
           spec->driver ? spec->driver : "proc", reps, s_budget(spec));
    if (spec->rate)
        printf("  load %.0f MB/s, set at create\n", (double) spec->rate / BENCH_MB);
    fflush(stdout);
    result->spec = spec;
    if (s_claim_prepare(cluster, clients[1], spec, id))
        return -1;
    //  Creating a big guest keeps the node's reactor busy: the mesh must
    //  be whole again before a move is asked.
    if (shoal_cluster_wait_all_alive(cluster, BENCH_ALIVE_TIMEOUT_MS)) {
        fprintf(stderr, "%s\n", shoal_cluster_error(cluster));
        return -1;
    }
    shoal_image_t *still = NULL;
    pid_t still_pid = spec->large ? s_still_start(spec, &still) : -1;
    bench_move_t moves[BENCH_REPS_MAX];
    memset(moves, 0, sizeof moves);
    int owner = 1, rc = 0, ran = 0;
    for (int rep = 0; rep < reps && rc == 0 && !zsys_interrupted; rep++) {
        bench_move_t *move = &moves[rep];
        move->from = owner;
        move->to = owner == 1 ? 2 : 1;
        if (still)
            shoal_image_reset_gap(still);
        rc = s_move(cluster, clients[owner], id, s_budget(spec), move);
        if (rc)
            break;
        if (still)
            move->still_gap_ms = shoal_image_max_gap_ms(still);
        s_move_print(rep + 1, move, raw);
        ran++;
        int holder = move->done ? move->to : move->from;
        if (shoal_move_check_settled(cluster, id, holder, BENCH_SETTLE_TIMEOUT_MS)) {
            fprintf(stderr, "%s\n", shoal_move_check_error());
            rc = -1;
        }
        owner = holder;
    }
    s_still_stop(still_pid, &still);
    if (rc == 0 && !zsys_interrupted) {
        s_result_fill(result, moves, ran);
        result->ran = true;
        s_result_print(result, raw);
    }
    int released = shoal_client_claim_release(clients[owner], id, NULL);
    if (released != 200) {
        fprintf(stderr, "release %s on n%d: %d %s\n", id, owner, released, shoal_client_error(clients[owner]));
        rc = -1;
    }
    return rc;
}

static void s_cluster_down(shoal_cluster_t **cluster_p, shoal_client_t **clients);

//  Starts two nodes and a client to each into CLIENTS[1..2]: on loopback,
//  or, with LINK_MBIT, in network namespaces with n1's link limited to
//  LINK_MBIT each way. Returns NULL when they do not come up (said why).
static shoal_cluster_t *
s_cluster_up(int link_mbit, shoal_client_t **clients)
{
    shoal_cluster_options_t options = {
        .namespaces = link_mbit > 0, .probe_interval_ms = BENCH_PROBE_INTERVAL_MS,
        .probe_timeout_ms = BENCH_PROBE_TIMEOUT_MS, .suspect_timeout_ms = BENCH_SUSPECT_TIMEOUT_MS,
        .sync_interval_ms = BENCH_SYNC_INTERVAL_MS,
    };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    if (!cluster)
        return NULL;
    int rc = 0;
    //  Every node has the fake VM manager in guest mode, its VMs in the
    //  node's guest directory, for the exec cases.
    const char *manager = s_manager_path();
    for (int node = 1; manager && node <= 2; node++) {
        char dir[BENCH_PATH_MAX], guests[BENCH_PATH_MAX + 16];
        s_manager_dir(node, dir, sizeof dir);
        snprintf(guests, sizeof guests, "%s/guests", shoal_cluster_data_dir(cluster, node));
        zsys_dir_create("%s", dir);
        shoal_cluster_node_setenv(cluster, node, "SHOAL_DRIVERS_EXEC_MANAGER", manager);
        shoal_cluster_node_setenv(cluster, node, "FAKE_VM_DIR", dir);
        shoal_cluster_node_setenv(cluster, node, "FAKE_VM_GUEST_DIR", guests);
        shoal_cluster_node_setenv(cluster, node, "FAKE_VM_GUEST_PROGRAM", shoal_test_program("shoal-guest"));
    }
    //  BENCH_MEMORY_DIR=DIR puts each node's guest memory (guest/memory_dir)
    //  in a directory of the run's under DIR (a tmpfs: /dev/shm), n1 and n2,
    //  their guest directories staying in the data directories.
    char memory_root[BENCH_PATH_MAX];
    for (int node = 1; s_memory_root(memory_root, sizeof memory_root) && node <= 2; node++) {
        char *dir = zsys_sprintf("%s/%s", memory_root, shoal_cluster_node_id(cluster, node));
        shoal_cluster_node_setenv(cluster, node, "SHOAL_GUEST_MEMORY_DIR", dir);
        zstr_free(&dir);
    }
    //  BENCH_GUEST_DIR=DIR puts each node's guests in DIR/n1, DIR/n2 (a
    //  tmpfs, say, to see the moves without the images' writeback): the
    //  data directory's guests/ links there, where the checks look.
    const char *guest_dir = getenv("BENCH_GUEST_DIR");
    for (int node = 1; guest_dir && *guest_dir && node <= 2; node++) {
        char *dir = zsys_sprintf("%s/%s", guest_dir, shoal_cluster_node_id(cluster, node));
        char *link = zsys_sprintf("%s/guests", shoal_cluster_data_dir(cluster, node));
        if (zsys_dir_create("%s", dir) || zsys_dir_create("%s", shoal_cluster_data_dir(cluster, node))
        ||  symlink(dir, link)) {
            fprintf(stderr, "cannot keep n%d's guests in %s: %s\n", node, dir, strerror(errno));
            rc = -1;
        }
        zstr_free(&dir);
        zstr_free(&link);
    }
    if (rc == 0 && (shoal_cluster_start(cluster) || shoal_cluster_wait_all_alive(cluster, BENCH_ALIVE_TIMEOUT_MS)
                ||  (link_mbit && shoal_cluster_limit_rate(cluster, 1, link_mbit)))) {
        fprintf(stderr, "%s\n", shoal_cluster_error(cluster));
        rc = -1;
    }
    for (int index = 1; index <= 2 && rc == 0; index++) {
        clients[index] = shoal_cluster_client_new(cluster, index);
        if (!clients[index])
            rc = -1;
        else
            shoal_client_set_timeout(clients[index], BENCH_CALL_TIMEOUT_MS);
    }
    if (rc)
        s_cluster_down(&cluster, clients);
    return cluster;
}

static void
s_cluster_down(shoal_cluster_t **cluster_p, shoal_client_t **clients)
{
    for (int index = 1; index <= 2; index++)
        shoal_client_destroy(&clients[index]);
    shoal_cluster_destroy(cluster_p);
}

//  Runs a case over a limited link: its moves, then the raw stream of the
//  bytes a move sent, over the same link, for the link's own time.
static int
s_link_case_run(const bench_case_t *spec, int reps, double raw, bench_result_t *result)
{
    char why[BENCH_ERROR_MAX];
    if (!shoal_cluster_namespaces_available(why, sizeof why)) {
        printf("case %s skipped: %s\n", spec->name, why);
        return 0;
    }
    printf("case %s: n1's link limited to %d Mbit/s each way (tc, in network namespaces)\n", spec->name,
           spec->link_mbit);
    shoal_client_t *clients[3] = { NULL };
    shoal_cluster_t *cluster = s_cluster_up(spec->link_mbit, clients);
    if (!cluster)
        return -1;
    int rc = s_case_run(cluster, clients, spec, reps, raw, result);
    if (rc == 0 && result->done) {
        //  The receiving end where a move's target is, bound to its address.
        char host[BENCH_PATH_MAX];
        const char *endpoint = shoal_cluster_endpoint(cluster, 2);
        const char *colon = strrchr(endpoint, ':');
        snprintf(host, sizeof host, "%.*s", (int) (colon - endpoint - 6), endpoint + 6);
        bench_raw_path_t path = { .server_netns = shoal_cluster_netns(cluster, 2), .server_host = host,
                                  .client_netns = shoal_cluster_netns(cluster, 1) };
        double seconds[BENCH_RAW_RUNS];
        for (int run = 0; run < BENCH_RAW_RUNS && rc == 0; run++) {
            seconds[run] = bench_raw_stream_on((uint64_t) result->bytes, &path);
            rc = seconds[run] > 0 ? 0 : -1;
            if (rc == 0)
                printf("  link raw %d   %.1f MB in %6.2f s  %7.1f MB/s\n", run + 1, result->bytes / BENCH_MB,
                       seconds[run], result->bytes / seconds[run] / BENCH_MB);
        }
        if (rc == 0) {
            result->link_s = bench_median(seconds, BENCH_RAW_RUNS);
            printf("  the link's own time for %.1f MB: %.2f s, a move's total %.2f s (%.0f%%)\n",
                   result->bytes / BENCH_MB, result->link_s, result->total_s, result->link_s / result->total_s * 100);
        }
    }
    s_cluster_down(&cluster, clients);
    return rc;
}

static void
s_expect(const char *what, bool met)
{
    printf("  %-66s %s\n", what, met ? "met" : "NOT met");
}

static void
s_summary(const bench_result_t *results, size_t count, double raw)
{
    printf("\nsummary: medians of the moves done; raw limit %.1f MB/s; budget %d ms (exec cases %d ms)\n",
           raw / BENCH_MB, BENCH_BUDGET_MS, BENCH_EXEC_BUDGET_MS);
    printf("  %-11s %4s %7s %12s %8s %6s %8s %9s %8s\n", "case", "done", "aborted", "baseline/raw", "total s",
           "rounds", "node ms", "switch ms", "guest ms");
    for (size_t i = 0; i < count; i++) {
        const bench_result_t *r = &results[i];
        if (!r->ran)
            continue;
        printf("  %-11s %4d %7d %12.2f", r->spec->name, r->done, r->aborted, r->baseline / raw);
        if (r->done)
            printf(" %8.2f %6.0f %8.0f %9.0f %8.0f\n", r->total_s, r->rounds, r->node_down_ms, r->switch_gap_ms,
                   r->guest_down_ms);
        else
            printf(" %8s %6s %8s %9s %8s\n", "-", "-", "-", "-", "-");
    }
    printf("expected:\n");
    char what[256];
    for (size_t i = 0; i < count; i++) {
        const bench_result_t *r = &results[i];
        if (!r->ran)
            continue;
        if (r->spec->link_mbit) {
            double share = r->total_s > 0 ? r->link_s / r->total_s : 0;
            snprintf(what, sizeof what, "%s: the link's own time >= %.0f%% of a move's total (%.0f%%, %d of %d done)",
                     r->spec->name, BENCH_EXPECTED_LINK_SHARE * 100, share * 100, r->done, r->reps);
            s_expect(what, r->aborted == 0 && r->done > 0 && share >= BENCH_EXPECTED_LINK_SHARE);
            continue;
        }
        snprintf(what, sizeof what, "%s: baseline >= %.0f%% of raw (%.0f%%)", r->spec->name,
                 BENCH_EXPECTED_BASELINE * 100, r->baseline / raw * 100);
        s_expect(what, r->baseline / raw >= BENCH_EXPECTED_BASELINE);
        if (streq(r->spec->name, "idle-512m")) {
            snprintf(what, sizeof what, "idle-512m: total < %.1f s (%.2f s)", BENCH_EXPECTED_IDLE_TOTAL_S, r->total_s);
            s_expect(what, r->done > 0 && r->total_s < BENCH_EXPECTED_IDLE_TOTAL_S);
            if (r->done)
                printf("  idle-512m: the moved guest's longest gap %.0f ms (median)\n", r->guest_down_ms);
            snprintf(what, sizeof what, "idle-512m: downtime < %d ms (%.0f ms node, %.0f ms switch)",
                     BENCH_EXPECTED_IDLE_DOWN_MS, r->node_down_ms, r->switch_gap_ms);
            s_expect(what, r->done > 0 && r->node_down_ms < BENCH_EXPECTED_IDLE_DOWN_MS
                        && r->switch_gap_ms < BENCH_EXPECTED_IDLE_DOWN_MS);
        }
        if (r->spec->driver) {
            //  Beside the proc case of the same guest, when it ran.
            const bench_result_t *proc = NULL;
            for (size_t j = 0; j < count; j++)
                if (results[j].ran && results[j].done && streq(results[j].spec->name, r->spec->beside))
                    proc = &results[j];
            snprintf(what, sizeof what, "%s: converges inside %d ms (%d of %d done, %.0f ms node)", r->spec->name,
                     BENCH_EXEC_BUDGET_MS, r->done, r->reps, r->node_down_ms);
            s_expect(what, r->aborted == 0 && r->done > 0 && r->node_down_ms <= BENCH_EXEC_BUDGET_MS);
            if (proc && r->done) {
                double ratio = proc->node_down_ms > 0 ? r->node_down_ms / proc->node_down_ms : 0;
                printf("  %s against %s: downtime %.1fx (%.0f / %.0f ms), total %.1fx (%.2f / %.2f s)\n",
                       r->spec->name, proc->spec->name, ratio, r->node_down_ms, proc->node_down_ms,
                       proc->total_s > 0 ? r->total_s / proc->total_s : 0, r->total_s, proc->total_s);
                snprintf(what, sizeof what, "%s: downtime <= %.0fx %s's (%.1fx)", r->spec->name,
                         BENCH_EXPECTED_EXEC_DOWN_RATIO, proc->spec->name, ratio);
                s_expect(what, ratio > 0 && ratio <= BENCH_EXPECTED_EXEC_DOWN_RATIO);
            }
        }
        if (streq(r->spec->name, "idle-2g") || streq(r->spec->name, "idle-8g")) {
            //  A large idle guest moves with the downtime of a small one.
            snprintf(what, sizeof what, "%s: node downtime < %d ms, every move (%d of %d; median %.0f ms)",
                     r->spec->name, BENCH_EXPECTED_IDLE_DOWN_MS, r->quick, r->reps, r->node_down_ms);
            s_expect(what, r->done == r->reps && r->quick == r->reps);
        }
        if (r->spec->large && r->done) {
            //  The raw stream of the same bytes at the run's raw limit.
            double raw_s = r->bytes / raw;
            double ratio = raw_s > 0 ? r->total_s / raw_s : 0;
            printf("  %s: total %.2f s for %.1f MB; raw CURVE for the same bytes %.2f s: %.2fx\n", r->spec->name,
                   r->total_s, r->bytes / BENCH_MB, raw_s, ratio);
            snprintf(what, sizeof what, "%s: total <= %.1fx raw CURVE of its bytes (%.2fx)", r->spec->name,
                     BENCH_EXPECTED_LARGE_RATIO, ratio);
            s_expect(what, ratio > 0 && ratio <= BENCH_EXPECTED_LARGE_RATIO);
        }
        if (streq(r->spec->name, "write-300")) {
            //  Faster than its rounds shrink: auto-converge throttles it
            //  until the final round fits the budget, and it moves.
            printf("  write-300: %d of %d moves done throttled; median %.0f throttle step(s), throttled %.2f s\n",
                   r->throttled, r->done, r->throttle_steps, r->throttled_ms / MS_PER_S);
            snprintf(what, sizeof what, "write-300: converges with auto-converge inside %d ms (%d of %d done, "
                     "%.0f ms node / %.0f ms switch)", BENCH_BUDGET_MS, r->done, r->reps, r->node_down_ms,
                     r->switch_gap_ms);
            s_expect(what, r->aborted == 0 && r->done > 0 && r->node_down_ms <= BENCH_BUDGET_MS
                        && r->switch_gap_ms <= BENCH_BUDGET_MS);
        }
        if (streq(r->spec->name, "write-100") || streq(r->spec->name, "write-50-8g")) {
            //  The longest gap is information: a stall while the guest still
            //  ran on the source is the machine's, not the move's downtime.
            if (r->done && r->still_gap_ms > 0)
                printf("  %s: the moved guest's longest gap %.0f ms, a still guest's beside it %.0f ms (medians)\n",
                       r->spec->name, r->guest_down_ms, r->still_gap_ms);
            else
            if (r->done)
                printf("  %s: the moved guest's longest gap %.0f ms (median)\n", r->spec->name, r->guest_down_ms);
            snprintf(what, sizeof what, "%s: converges inside %d ms (%d of %d done, %.0f ms node / %.0f ms switch)",
                     r->spec->name, BENCH_BUDGET_MS, r->done, r->reps, r->node_down_ms, r->switch_gap_ms);
            s_expect(what, r->aborted == 0 && r->done > 0 && r->node_down_ms <= BENCH_BUDGET_MS
                        && r->switch_gap_ms <= BENCH_BUDGET_MS);
        }
    }
}

//  Ends every guest and node of the run, and removes its files unless KEEP
//  (its guests' memory under BENCH_MEMORY_DIR always: it holds the RAM).
static void
s_teardown(bool keep)
{
    shoal_move_check_cleanup();
    shoal_cluster_destroy_all();
    //  Guests run in sessions of their own: a node's stop leaves them.
    shoal_move_check_cleanup();
    char memory_root[BENCH_PATH_MAX];
    if (s_memory_root(memory_root, sizeof memory_root))
        shoal_test_rmrf(memory_root);
    if (keep)
        fprintf(stderr, "kept %s (BENCH_KEEP)\n", shoal_test_dir);
    else
        shoal_test_rmrf(shoal_test_dir);
}

static int
s_usage(const char *program)
{
    fprintf(stderr, "usage: %s [CASE...]   (BENCH_REPS=N, default %d)\ncases:", program, BENCH_DEFAULT_REPS);
    for (size_t i = 0; i < BENCH_CASES; i++)
        fprintf(stderr, " %s", s_cases[i].name);
    fprintf(stderr, "\n");
    return EXIT_FAILURE;
}

int
main(int argc, char *argv[])
{
    bool chosen[BENCH_CASES] = { false };
    for (int i = 1; i < argc; i++) {
        size_t c = 0;
        while (c < BENCH_CASES && !streq(argv[i], s_cases[c].name))
            c++;
        if (c == BENCH_CASES)
            return s_usage(argv[0]);
        chosen[c] = true;
    }
    if (argc == 1)
        for (size_t c = 0; c < BENCH_CASES; c++)
            chosen[c] = !s_cases[c].large;
    int reps = BENCH_DEFAULT_REPS;
    if (getenv("BENCH_REPS")) {
        reps = atoi(getenv("BENCH_REPS"));
        if (reps < 1 || reps > BENCH_REPS_MAX) {
            fprintf(stderr, "BENCH_REPS must be 1 to %d\n", BENCH_REPS_MAX);
            return EXIT_FAILURE;
        }
    }
    if (shoal_test_find_programs())
        return EXIT_FAILURE;
    //  write-300's load is above the nodes' default cap on a guest's rate
    //  (limits/guest_rate_mb, 256 MiB/s): the nodes of this run allow 512,
    //  unless the caller set it.
    setenv("SHOAL_LIMITS_GUEST_RATE_MB", "512", 0);
    //  czmq's handler stays: SIGINT sets zsys_interrupted, and the run
    //  ends its move and tears down, so no node or guest outlives it.
    zsys_init();
    if (shoal_test_dir_make("bench-move"))
        return EXIT_FAILURE;
    printf("bench_move: live moves between two shoald, %d per case, budget %d ms\n", reps, BENCH_BUDGET_MS);
    printf("work directory %s\n", shoal_test_dir);
    fflush(stdout);
    double raw = s_raw_limit();
    int rc = raw > 0 ? 0 : -1;
    bench_result_t results[BENCH_CASES];
    memset(results, 0, sizeof results);
    //  The loopback cases share one cluster; a case over a limited link
    //  has a cluster of its own, in network namespaces.
    shoal_client_t *clients[3] = { NULL };
    shoal_cluster_t *loopback = NULL;
    for (size_t c = 0; c < BENCH_CASES && rc == 0 && !zsys_interrupted; c++) {
        if (!chosen[c])
            continue;
        const bench_case_t *spec = &s_cases[c];
        if (spec->driver && !s_manager_path()) {
            printf("case %s skipped: tests/fake-vm-manager not found (set SHOAL_SOURCE_DIR)\n", spec->name);
            continue;
        }
        if (spec->link_mbit) {
            rc = s_link_case_run(spec, reps, raw, &results[c]);
            continue;
        }
        if (!loopback)
            loopback = s_cluster_up(0, clients);
        rc = loopback ? s_case_run(loopback, clients, spec, reps, raw, &results[c]) : -1;
    }
    s_cluster_down(&loopback, clients);
    if (zsys_interrupted) {
        fprintf(stderr, "interrupted\n");
        rc = -1;
    }
    if (rc == 0)
        s_summary(results, BENCH_CASES, raw);
    s_teardown(rc != 0 && getenv("BENCH_KEEP"));
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
