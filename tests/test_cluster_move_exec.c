/*  test_cluster_move_exec: live moves of exec claims, through the VM
    manager's capture, receive and abort, with real guests.

    Every node runs tests/fake-vm-manager in guest mode: its VMs are
    shoal-guest images under the node's guest directory, run in the
    background, so the checks of proc moves apply to them unchanged (one
    owner, its guest running, the registry, counters equal to a recount, no
    move record or guest directory left over) and a stopped guest's image
    verifies page by page (every page the load wrote carries its stamp).
    Exec guests take no guest calls: the stamps of the load stand for the
    key/value stamp of the proc tests.

      move and back   under the guest's write load, n1 -> n2 -> n1
      crash           SIDE:STEP:crash at the baseline, the final round, the
                      reception, the commit, the start and the drop: the
                      node kills itself, restarts without the fault, and
                      one owner is left
      cut             SIDE:final:stall, in namespace mode: the stalled node is
                      cut off past the step timeout, then healed

    SHOAL_TEST_ONLY=source-final runs the cases whose names contain it.
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
#define S_CLAIM "vm"
//  A guest small enough that a whole capture of it (the fake manager copies
//  the image whole each round) fits the budget on a busy machine, with a
//  load that changes it all the time.
#define S_MEMORY (16 * S_MB)
#define S_DISK (2 * S_MB)
#define S_RATE "2000000"
//  The final round's budget: a whole image, copied, sent and synced.
#define S_BUDGET_MS 3000
#define S_WAIT_MS 30000
#define S_MOVE_WAIT_MS 120000
#define S_FAULT_WAIT_MS 30000
#define S_SETTLE_MS 40000
#define S_STALL_MS 2500
#define S_CUT_MS 3500
#define S_STEP_TIMEOUT_MS "1500"
//  A stop or release waits for the guest to exit, slow on a busy sanitized build.
#define S_PATIENT_MS 30000

static const char *
s_manager_path(void)
{
    static char path[4096];
    const char *source = getenv("SHOAL_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fake-vm-manager", source ? source : "..");
    return path;
}

//  Points every node of CLUSTER at the fake manager in guest mode, its
//  guests where the move checks look for them.
static void
s_managers_set(shoal_cluster_t *cluster)
{
    static char program[4096];
    snprintf(program, sizeof program, "%s", shoal_test_program("shoal-guest"));
    for (int index = 1; index <= shoal_cluster_size(cluster); index++) {
        char state[4096], guests[4096];
        snprintf(state, sizeof state, "%s/vm-state-%d", shoal_test_dir, index);
        snprintf(guests, sizeof guests, "%s/guests", shoal_cluster_data_dir(cluster, index));
        zsys_dir_create("%s", state);
        shoal_cluster_node_setenv(cluster, index, "SHOAL_DRIVERS_EXEC_MANAGER", s_manager_path());
        shoal_cluster_node_setenv(cluster, index, "FAKE_VM_DIR", state);
        shoal_cluster_node_setenv(cluster, index, "FAKE_VM_GUEST_DIR", guests);
        shoal_cluster_node_setenv(cluster, index, "FAKE_VM_GUEST_PROGRAM", program);
        shoal_cluster_node_setenv(cluster, index, "FAKE_VM_GUEST_RATE", S_RATE);
    }
}

static int
s_create(shoal_cluster_t *cluster, int index, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MEMORY, .id = id, .driver = "exec",
                                .disk_bytes = S_DISK };
    shoal_client_t *client = shoal_cluster_client_new(cluster, index);
    shoal_client_set_timeout(client, S_PATIENT_MS);
    int rc = shoal_client_claim_create(client, &spec, NULL);
    if (rc != 200)
        fprintf(stderr, "create %s on n%d: %d %s\n", id, index, rc, shoal_client_error(client));
    shoal_client_destroy(&client);
    return rc;
}

//  Moves ID from node FROM to node TO and follows it to its end, into
//  *INFO (the caller clears it).
static int
s_move(shoal_cluster_t *cluster, int from, int to, const char *id, shoal_move_info_t *info)
{
    shoal_client_t *client = shoal_cluster_client_new(cluster, from);
    shoal_client_set_timeout(client, 10000);
    int rc = shoal_client_move(client, id, shoal_cluster_node_id(cluster, to), S_BUDGET_MS, info);
    int64_t deadline = shoal_test_now_ms() + S_MOVE_WAIT_MS;
    while (rc == 200 && !info->done && shoal_test_now_ms() < deadline) {
        usleep(20000);
        shoal_move_info_clear(info);
        rc = shoal_client_move_status(client, id, info);
    }
    if (rc != 200)
        fprintf(stderr, "move %s n%d -> n%d: %d %s\n", id, from, to, rc, shoal_client_error(client));
    shoal_client_destroy(&client);
    return rc;
}

//  Stops ID on node INDEX, verifies its image page by page, and releases it.
static void
s_verify_and_release(shoal_cluster_t *cluster, int index, const char *id)
{
    shoal_client_t *patient = shoal_cluster_client_new(cluster, index);
    CHECK(patient);
    shoal_client_set_timeout(patient, S_PATIENT_MS);
    int stopped = shoal_client_claim_stop(patient, id, NULL);
    if (stopped != 200)
        fprintf(stderr, "stop %s on n%d: %s\n", id, index, shoal_client_error(patient));
    CHECK_INT(stopped, 200);
    CHECK_MSG(shoal_move_check_verify(cluster, index, id) == 0, "%s", shoal_move_check_error());
    int released = shoal_client_claim_release(patient, id, NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(released, 200);
}

//  The round files of node INDEX's moves.
static size_t
s_round_files(shoal_cluster_t *cluster, int index, char *path, size_t size)
{
    snprintf(path, size, "%s/moves", shoal_cluster_data_dir(cluster, index));
    zdir_t *dir = zdir_new(path, NULL);
    size_t count = dir ? zdir_count(dir) : 0;
    zdir_destroy(&dir);
    return count;
}

//  The files a move through the manager leaves nowhere once it ended: its
//  round directory on either node. An abort's removal comes after the
//  claim runs again (the guest actor runs the manager's abort, then
//  removes them), so this waits for it.
static void
s_no_round_files(shoal_cluster_t *cluster)
{
    for (int index = 1; index <= shoal_cluster_size(cluster); index++) {
        char path[4096];
        int64_t deadline = shoal_test_now_ms() + S_SETTLE_MS;
        size_t count;
        while ((count = s_round_files(cluster, index, path, sizeof path)) && shoal_test_now_ms() < deadline)
            usleep(50000);
        CHECK_MSG(count == 0, "n%d holds %zu round file(s) under %s", index, count, path);
    }
}

static void
test_move_and_back_under_load(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    s_managers_set(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_create(cluster, 1, S_CLAIM), 200);
    CHECK_MSG(shoal_move_check_settled(cluster, S_CLAIM, 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());

    shoal_move_info_t there;
    CHECK_INT(s_move(cluster, 1, 2, S_CLAIM, &there), 200);
    printf("     there: %s, %u rounds, %" PRIu64 " bytes, %" PRIu64 " ms, downtime %" PRIu64 " ms%s%s\n",
           there.phase, there.round, there.bytes_sent, there.total_ms, there.node_downtime_ms,
           *there.error ? ": " : "", there.error);
    CHECK_MSG(streq(there.phase, "done"), "the move ended %s: %s", there.phase, there.error);
    //  A baseline and at least one round while the guest ran, then the final.
    CHECK(there.round >= 3);
    CHECK(there.bytes_sent >= 3 * S_MEMORY);
    CHECK(there.node_downtime_ms > 0);
    shoal_move_info_clear(&there);
    shoal_claim_info_t info;
    CHECK_INT(shoal_client_claim_show(shoal_cluster_client(cluster, 2), S_CLAIM, &info), 200);
    CHECK_STR(info.owner, "n2");
    CHECK_STR(info.driver, "exec");
    CHECK_INT(info.epoch, 2);
    shoal_claim_info_clear(&info);
    CHECK_MSG(shoal_move_check_settled(cluster, S_CLAIM, 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());

    shoal_move_info_t back;
    CHECK_INT(s_move(cluster, 2, 1, S_CLAIM, &back), 200);
    CHECK_MSG(streq(back.phase, "done"), "the move back ended %s: %s", back.phase, back.error);
    shoal_move_info_clear(&back);
    CHECK_MSG(shoal_move_check_settled(cluster, S_CLAIM, 1, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_INT(shoal_client_claim_show(shoal_cluster_client(cluster, 1), S_CLAIM, &info), 200);
    CHECK_INT(info.epoch, 3);
    shoal_claim_info_clear(&info);
    s_no_round_files(cluster);
    s_verify_and_release(cluster, 1, S_CLAIM);
    shoal_cluster_destroy(&cluster);
}

// ---------------------------------------------------------------------------
//  Faults, as test_cluster_move_faults runs them for proc claims.

typedef struct {
    const char *side;           //  source | target
    const char *step;           //  as SHOAL_FAULT names it
    const char *round;          //  "@1" for a round fault, "" otherwise
    bool cut;                   //  a cut link (namespace mode), else kill -9
} s_point_t;

//  Every step each side passes through, in the order a move reaches them,
//  each crashed and each cut off, as for proc claims.
#define S_STEPS(cut) \
    { "source", "admit", "", cut },           { "target", "admit", "", cut }, \
    { "source", "round", "@1", cut },         { "target", "round", "@1", cut }, \
    { "source", "final", "", cut },           { "target", "final", "", cut }, \
    { "target", "receive", "", cut },         { "target", "commit-request", "", cut }, \
    { "source", "commit-request", "", cut },  { "source", "commit", "", cut }, \
    { "target", "commit", "", cut },          { "target", "start", "", cut }, \
    { "source", "start", "", cut },           { "source", "drop", "", cut }
static const s_point_t s_points[] = { S_STEPS(false), S_STEPS(true) };

//  The case the runner is at (shoal_test_run takes no argument).
static const s_point_t *s_point;

typedef struct {
    shoal_client_t *client;
    int status;
} s_mover_t;

static void *
s_mover_run(void *arg)
{
    s_mover_t *mover = (s_mover_t *) arg;
    shoal_move_info_t info;
    mover->status = shoal_client_move(mover->client, S_CLAIM, "n2", S_BUDGET_MS, &info);
    if (mover->status == 200)
        shoal_move_info_clear(&info);
    return NULL;
}

//  Waits up to TIMEOUT_MS for node INDEX's log to contain TEXT.
static bool
s_log_wait(shoal_cluster_t *cluster, int index, const char *text, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    do {
        char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, index));
        bool seen = log && strstr(log, text);
        free(log);
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
    shoal_cluster_options_t options = { .namespaces = point->cut };
    if (point->cut)
        SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    s_managers_set(cluster);
    char fault[128];
    if (point->cut)
        snprintf(fault, sizeof fault, "%s:%s%s:stall=%d", point->side, point->step, point->round, S_STALL_MS);
    else
        snprintf(fault, sizeof fault, "%s:%s%s:crash", point->side, point->step, point->round);
    for (int i = 1; i <= 2; i++)
        shoal_cluster_node_setenv(cluster, i, "SHOAL_MOVE_STEP_TIMEOUT_MS", S_STEP_TIMEOUT_MS);
    shoal_cluster_node_setenv(cluster, faulty, "SHOAL_FAULT", fault);
    CHECK_MSG(shoal_cluster_up(cluster, S_FAULT_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_create(cluster, 1, S_CLAIM), 200);

    s_mover_t mover = { .client = shoal_cluster_client_new(cluster, 1) };
    CHECK(mover.client);
    shoal_client_set_timeout(mover.client, S_STALL_MS + 2000);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_mover_run, &mover) == 0);
    char hit[128];
    snprintf(hit, sizeof hit, "fault: %s at %s:%s", point->cut ? "stall" : "crash", point->side, point->step);
    bool reached = s_log_wait(cluster, faulty, hit, S_FAULT_WAIT_MS);
    if (reached && point->cut) {
        CHECK_MSG(shoal_cluster_cut(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
        usleep(S_CUT_MS * 1000);
        CHECK_MSG(shoal_cluster_heal(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
    }
    if (reached && !point->cut) {
        int64_t deadline = shoal_test_now_ms() + S_FAULT_WAIT_MS;
        pid_t pid = shoal_cluster_node_pid(cluster, faulty);
        while (!s_exited(pid) && shoal_test_now_ms() < deadline)
            usleep(20000);
        CHECK_MSG(s_exited(pid), "n%d logged its crash and still runs", faulty);
        CHECK_INT(shoal_cluster_node_kill(cluster, faulty, SIGKILL), 128 + SIGKILL);
        shoal_cluster_node_setenv(cluster, faulty, "SHOAL_FAULT", "");
        CHECK_MSG(shoal_cluster_node_start(cluster, faulty) == 0, "%s", shoal_cluster_error(cluster));
    }
    pthread_join(thread, NULL);
    shoal_client_destroy(&mover.client);
    CHECK_MSG(reached, "n%d never logged \"%s\" (the move answered %d)", faulty, hit, mover.status);

    int owner = 0;
    CHECK_MSG(shoal_move_check_settled_any(cluster, S_CLAIM, S_SETTLE_MS, &owner) == 0, "%s",
              shoal_move_check_error());
    printf("     %s: n%d owns the claim\n", fault, owner);
    s_no_round_files(cluster);
    s_verify_and_release(cluster, owner, S_CLAIM);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    shoal_test_run("move_and_back_under_load", test_move_and_back_under_load);
    shoal_cluster_destroy_all();
    shoal_move_check_cleanup();
    for (size_t i = 0; i < sizeof s_points / sizeof s_points[0]; i++) {
        s_point = &s_points[i];
        char name[96];
        snprintf(name, sizeof name, "%s-%s-%s", s_point->side, s_point->step, s_point->cut ? "cut" : "crash");
        shoal_test_run(name, s_case_run);
        shoal_cluster_destroy_all();
        shoal_move_check_cleanup();
    }
    return shoal_test_finish();
}
