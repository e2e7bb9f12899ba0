/*  test_cluster_move_faults: a move fails at each of its steps, on either
    side, by kill -9 or by a cut link; afterwards exactly one node owns the
    claim and runs its guest, the registry names it, counters equal the
    listings, and no stray guest, image or move record is left.

    Node n1 is the source, n2 the target. The failing node is given
    SHOAL_FAULT before it starts:
      crash   SIDE:STEP:crash. The node kills itself at the step; the test
              waits for it to exit and starts it again without the fault.
      cut     SIDE:STEP:stall=S_STALL_MS, in namespace mode. When the node
              logs the stall, the test cuts it off, keeps it cut for
              S_CUT_MS (past the step timeout, so the other side gives up
              or retries in the dark), then heals the link.
    A key/value stamp written into the guest before the move must read back
    from whichever node owns it afterwards.

    SHOAL_TEST_ONLY=source-commit runs the cases whose names contain it.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_CLAIM "faulty"
#define S_STAMP "written-before-the-move"
//  How long the failing node takes to reach its step, to die, to settle.
#define S_FAULT_WAIT_MS 20000
#define S_SETTLE_MS 40000
#define S_STALL_MS 2500
#define S_CUT_MS 3500
//  The step timeout both nodes run with: short, so a lost side is given up
//  on within the cut.
#define S_STEP_TIMEOUT_MS "1500"

typedef struct {
    const char *side;           //  source | target
    const char *step;           //  as SHOAL_FAULT names it
    const char *round;          //  "@1" for a round fault, "" otherwise
} s_point_t;

//  Every step each side passes through, in the order a move reaches them.
static const s_point_t s_points[] = {
    { "source", "admit", "" },          { "target", "admit", "" },
    { "source", "round", "@1" },        { "target", "round", "@1" },
    { "source", "final", "" },          { "target", "final", "" },
    { "target", "receive", "" },        { "target", "commit-request", "" },
    { "source", "commit-request", "" }, { "source", "commit", "" },
    { "target", "commit", "" },         { "target", "start", "" },
    { "source", "start", "" },          { "source", "drop", "" },
};

//  The case the runner is at (shoal_test_run takes no argument).
static const s_point_t *s_point;
static bool s_cut;

//  The move, asked from a thread of its own: a stalled source holds its
//  answer back while the test cuts the link.
typedef struct {
    shoal_client_t *client;
    int status;
    char error[256];            //  the last answer's text
} s_mover_t;

//  A refusal to be retried (503 with a retry-after: the target not ready
//  for claims yet, as after a suspicion it refuted on a loaded machine) is
//  retried, as a user would, until the fault wait is over: the move has
//  not begun.
static void *
s_mover_run(void *arg)
{
    s_mover_t *mover = (s_mover_t *) arg;
    int64_t deadline = shoal_test_now_ms() + S_FAULT_WAIT_MS;
    while (true) {
        shoal_move_info_t info;
        mover->status = shoal_client_move(mover->client, S_CLAIM, "n2", 1000, &info);
        snprintf(mover->error, sizeof mover->error, "%s", shoal_client_error(mover->client));
        if (mover->status == 200)
            shoal_move_info_clear(&info);
        uint32_t retry_after = shoal_client_retry_after_ms(mover->client);
        if (mover->status != 503 || retry_after == 0 || shoal_test_now_ms() + retry_after >= deadline)
            break;
        usleep(retry_after * 1000);
    }
    return NULL;
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

static void
s_case_run(void)
{
    const s_point_t *point = s_point;
    int faulty = streq(point->side, "source") ? 1 : 2;
    shoal_cluster_options_t options = { .namespaces = s_cut };
    if (s_cut)
        SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    char fault[128];
    if (s_cut)
        snprintf(fault, sizeof fault, "%s:%s%s:stall=%d", point->side, point->step, point->round, S_STALL_MS);
    else
        snprintf(fault, sizeof fault, "%s:%s%s:crash", point->side, point->step, point->round);
    for (int i = 1; i <= 2; i++)
        shoal_cluster_node_setenv(cluster, i, "SHOAL_MOVE_STEP_TIMEOUT_MS", S_STEP_TIMEOUT_MS);
    shoal_cluster_node_setenv(cluster, faulty, "SHOAL_FAULT", fault);
    CHECK_MSG(shoal_cluster_up(cluster, S_FAULT_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));

    //  A guest with a load, so that its rounds after the baseline carry
    //  something; a light one, so that a move on a busy machine (9 MB/s
    //  seen, sanitized, beside other work) still converges and reaches the
    //  steps after the final round.
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 32 * S_MB, .id = S_CLAIM,
                                .rate = 2 * 1000 * 1000, .disk_bytes = 4 * S_MB };
    shoal_client_t *admin = shoal_cluster_client(cluster, 1);
    CHECK_INT(shoal_client_claim_create(admin, &spec, NULL), 200);
    CHECK_INT(shoal_client_claim_put(admin, S_CLAIM, "stamp", S_STAMP, strlen(S_STAMP)), 200);

    s_mover_t mover = { .client = shoal_cluster_client_new(cluster, 1) };
    CHECK(mover.client);
    shoal_client_set_timeout(mover.client, S_STALL_MS + 2000);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_mover_run, &mover) == 0);
    char hit[128];
    snprintf(hit, sizeof hit, "fault: %s at %s:%s", s_cut ? "stall" : "crash", point->side, point->step);
    bool reached = s_log_wait(cluster, faulty, hit, S_FAULT_WAIT_MS);
    if (reached && s_cut) {
        //  The node sleeps at its step: it wakes up cut off.
        CHECK_MSG(shoal_cluster_cut(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
        usleep(S_CUT_MS * 1000);
        CHECK_MSG(shoal_cluster_heal(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
    }
    if (reached && !s_cut) {
        int64_t deadline = shoal_test_now_ms() + S_FAULT_WAIT_MS;
        pid_t pid = shoal_cluster_node_pid(cluster, faulty);
        while (!s_exited(pid) && shoal_test_now_ms() < deadline)
            usleep(20000);
        CHECK_MSG(s_exited(pid), "n%d logged its crash and still runs", faulty);
        //  Reaped by the harness: it was killed by its own SIGKILL.
        CHECK_INT(shoal_cluster_node_kill(cluster, faulty, SIGKILL), 128 + SIGKILL);
        shoal_cluster_node_setenv(cluster, faulty, "SHOAL_FAULT", "");
        CHECK_MSG(shoal_cluster_node_start(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
    }
    pthread_join(thread, NULL);
    shoal_client_destroy(&mover.client);
    CHECK_MSG(reached, "n%d never logged \"%s\" (the move answered %d: %s)", faulty, hit, mover.status, mover.error);

    int owner = 0;
    CHECK_MSG(shoal_move_check_settled_any(cluster, S_CLAIM, S_SETTLE_MS, &owner) == 0, "%s",
              shoal_move_check_error());
    shoal_client_t *client = shoal_cluster_client(cluster, owner);
    uint8_t *value = NULL;
    size_t size = 0;
    CHECK_INT(shoal_client_claim_get(client, S_CLAIM, "stamp", &value, &size), 200);
    bool same = size == strlen(S_STAMP) && memcmp(value, S_STAMP, size) == 0;
    free(value);
    CHECK_MSG(same, "the stamp read back from n%d differs", owner);
    printf("     %s: n%d owns the claim\n", fault, owner);
    //  A release waits for the guest to exit, slow on a busy sanitized build.
    shoal_client_t *patient = shoal_cluster_client_new(cluster, owner);
    CHECK(patient);
    shoal_client_set_timeout(patient, 15000);
    int released = shoal_client_claim_release(patient, S_CLAIM, NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(released, 200);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    for (int cut = 0; cut <= 1; cut++) {
        s_cut = cut == 1;
        for (size_t i = 0; i < sizeof s_points / sizeof s_points[0]; i++) {
            s_point = &s_points[i];
            char name[96];
            snprintf(name, sizeof name, "%s-%s-%s", s_point->side, s_point->step, s_cut ? "cut" : "crash");
            shoal_test_run(name, s_case_run);
            shoal_cluster_destroy_all();
            shoal_move_check_cleanup();
        }
    }
    return shoal_test_finish();
}
