/*  Guests off the reactor: nothing a guest does makes a node look dead.

    Two nodes probe each other every 100 ms and suspect a peer that stays
    silent for 500 ms. On n1, guest operations are made to take seconds: a
    VM manager that sleeps 8 s on every call, and a proc guest that ignores
    SIGTERM for the whole stop timeout. While those run, neither node is
    ever suspected, a second client's status is answered in a small
    fraction of the blocked time, another claim's operation is served, and
    a second state change of the busy claim answers 409 naming what is in
    flight.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
//  What the slow manager sleeps on every call, in seconds, and as ms.
#define S_SLOW_S "8"
#define S_SLOW_MS 8000
//  The manager's calls may take this long (the node's exec time limit).
#define S_EXEC_TIMEOUT_MS 30000
#define S_PROBE_INTERVAL_MS 100
#define S_PROBE_TIMEOUT_MS 200
#define S_SUSPECT_TIMEOUT_MS 500
//  Exec claims whose create, then stop, wait on the slow manager at once.
#define S_SLOW_CLAIMS 3
//  A status answer this late could only have waited on a guest: a quarter
//  of one manager call. (A status is answered in milliseconds; the figure
//  printed is the measure, this bound only tells waiting from serving.)
#define S_STATUS_BOUND_MS (S_SLOW_MS / 4)
#define S_STATUS_PAUSE_US 20000
#define S_CLIENT_TIMEOUT_MS 60000
#define S_STUBBORN_STOP_MS 8000
#define S_ALIVE_TIMEOUT_MS 30000
#define S_WAIT_MS 60000

static const char *
s_manager_path(void)
{
    static char path[4096];
    const char *source = getenv("SHOAL_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fake-vm-manager", source ? source : "..");
    return path;
}

static shoal_cluster_t *
s_cluster_new(void)
{
    shoal_cluster_options_t options = {
        .probe_interval_ms = S_PROBE_INTERVAL_MS, .probe_timeout_ms = S_PROBE_TIMEOUT_MS,
        .suspect_timeout_ms = S_SUSPECT_TIMEOUT_MS,
    };
    return shoal_cluster_new(2, &options);
}

//  Lines of node INDEX's log saying that a peer turned suspect.
static int
s_suspicions(shoal_cluster_t *cluster, int index)
{
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, index));
    int count = 0;
    for (char *line = log ? strstr(log, "mesh: node ") : NULL; line; line = strstr(line + 1, "mesh: node ")) {
        char *end = strchr(line, '\n');
        char *suspect = strstr(line, ") suspect");
        if (suspect && (!end || suspect < end))
            count++;
    }
    free(log);
    return count;
}

//  Status latencies a second client saw.
typedef struct {
    int64_t *ms;
    size_t count;
    size_t room;
    int failures;               //  answers other than 200
} s_latencies_t;

static void
s_latency_add(s_latencies_t *latencies, int64_t ms)
{
    if (latencies->count == latencies->room) {
        latencies->room = latencies->room ? latencies->room * 2 : 256;
        latencies->ms = (int64_t *) realloc(latencies->ms, latencies->room * sizeof *latencies->ms);
    }
    latencies->ms[latencies->count++] = ms;
}

static int
s_compare(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

//  The latency at PERCENT (0-100) of LATENCIES, sorted in place.
static int64_t
s_percentile(s_latencies_t *latencies, int percent)
{
    if (!latencies->count)
        return -1;
    qsort(latencies->ms, latencies->count, sizeof *latencies->ms, s_compare);
    size_t index = (latencies->count - 1) * (size_t) percent / 100;
    return latencies->ms[index];
}

//  One status from CLIENT, timed.
static void
s_status_once(shoal_client_t *client, s_latencies_t *latencies)
{
    shoal_status_t status;
    int64_t before = shoal_test_now_ms();
    int rc = shoal_client_status(client, &status);
    s_latency_add(latencies, shoal_test_now_ms() - before);
    if (rc == 200)
        shoal_status_clear(&status);
    else
        latencies->failures++;
}

//  A worker that creates an exec claim on the slow manager and stops it.
typedef struct {
    shoal_cluster_t *cluster;
    char id[32];
    int created;
    int stopped;
    volatile bool done;
} s_slow_t;

static void *
s_slow_claim(void *arg)
{
    s_slow_t *slow = (s_slow_t *) arg;
    shoal_client_t *client = shoal_cluster_client_new(slow->cluster, 1);
    shoal_client_set_timeout(client, S_CLIENT_TIMEOUT_MS);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .driver = "exec", .id = slow->id };
    slow->created = shoal_client_claim_create(client, &spec, NULL);
    slow->stopped = shoal_client_claim_stop(client, slow->id, NULL);
    shoal_client_destroy(&client);
    slow->done = true;
    return NULL;
}

static bool
s_all_done(s_slow_t *slow, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!slow[i].done)
            return false;
    return true;
}

//  Asks CLIENT for claim ID's state until it is STATE or WAIT_MS pass.
static bool
s_wait_claim_state(shoal_client_t *client, const char *id, const char *state, int64_t wait_ms)
{
    int64_t deadline = shoal_test_now_ms() + wait_ms;
    while (shoal_test_now_ms() < deadline) {
        shoal_claim_info_t info;
        if (shoal_client_claim_show(client, id, &info) == 200) {
            bool is = streq(info.state, state);
            shoal_claim_info_clear(&info);
            if (is)
                return true;
        }
        usleep(S_STATUS_PAUSE_US);
    }
    return false;
}

//  A manager that sleeps 8 s on every call, with three claims' creates and
//  stops waiting on it at once: no node is suspected, status is served,
//  a proc claim is created and released meanwhile, and a second change of
//  a busy claim answers 409.
static void
test_slow_manager_holds_no_node(void)
{
    shoal_cluster_t *cluster = s_cluster_new();
    CHECK(cluster);
    char *state = zsys_sprintf("%s/vm-state", shoal_test_dir);
    zsys_dir_create("%s", state);
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", S_EXEC_TIMEOUT_MS);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_DRIVERS_EXEC_MANAGER", s_manager_path());
    shoal_cluster_node_setenv(cluster, 1, "FAKE_VM_DIR", state);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_DRIVERS_EXEC_TIMEOUT_MS", timeout);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    int suspected_before = s_suspicions(cluster, 1) + s_suspicions(cluster, 2);

    char *slow_path = zsys_sprintf("%s/slow", state);
    FILE *file = fopen(slow_path, "w");
    CHECK(file);
    fputs(S_SLOW_S, file);
    fclose(file);

    s_slow_t slow[S_SLOW_CLAIMS];
    pthread_t threads[S_SLOW_CLAIMS];
    for (size_t i = 0; i < S_SLOW_CLAIMS; i++) {
        memset(&slow[i], 0, sizeof slow[i]);
        slow[i].cluster = cluster;
        snprintf(slow[i].id, sizeof slow[i].id, "slow-%zu", i + 1);
        pthread_create(&threads[i], NULL, s_slow_claim, &slow[i]);
    }
    shoal_client_t *watcher = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(watcher, S_CLIENT_TIMEOUT_MS);
    s_latencies_t latencies = { 0 };

    //  The first claim's create is in flight: a release of it (legal from
    //  creating) is refused, naming what runs, instead of waiting behind it.
    bool creating = s_wait_claim_state(watcher, "slow-1", "creating", S_SLOW_MS / 2);
    shoal_claim_info_t info;
    char *message = NULL;
    int busy = shoal_client_claim_release(watcher, "slow-1", &info);
    if (busy == 200)
        shoal_claim_info_clear(&info);
    message = shoal_strdup(shoal_client_error(watcher));
    //  Another claim, of the proc driver, is created and released while
    //  the manager's calls are in flight.
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "beside" };
    int beside_created = shoal_client_claim_create(watcher, &spec, NULL);
    int beside_released = shoal_client_claim_release(watcher, "beside", NULL);
    bool beside_first = !s_all_done(slow, S_SLOW_CLAIMS);

    while (!s_all_done(slow, S_SLOW_CLAIMS)) {
        s_status_once(watcher, &latencies);
        usleep(S_STATUS_PAUSE_US);
    }
    for (size_t i = 0; i < S_SLOW_CLAIMS; i++)
        pthread_join(threads[i], NULL);
    unlink(slow_path);
    free(slow_path);
    //  Both still see each other alive, and neither ever suspected the other.
    char seen[32] = "", seen_back[32] = "";
    shoal_cluster_peer_state(cluster, 1, 2, seen, sizeof seen, NULL);
    shoal_cluster_peer_state(cluster, 2, 1, seen_back, sizeof seen_back, NULL);
    int suspected = s_suspicions(cluster, 1) + s_suspicions(cluster, 2) - suspected_before;
    size_t samples = latencies.count;
    int64_t p50 = s_percentile(&latencies, 50);
    int64_t p99 = s_percentile(&latencies, 99);
    int64_t max = s_percentile(&latencies, 100);
    printf("  status during the slow calls: %zu answers, p50 %" PRId64 " ms, p99 %" PRId64 " ms, max %" PRId64
           " ms (the manager sleeps %d ms per call)\n", samples, p50, p99, max, S_SLOW_MS);
    for (size_t i = 0; i < S_SLOW_CLAIMS; i++) {
        CHECK_MSG(slow[i].created == 200, "%s: create answered %d", slow[i].id, slow[i].created);
        CHECK_MSG(slow[i].stopped == 200, "%s: stop answered %d", slow[i].id, slow[i].stopped);
    }
    CHECK(creating);
    CHECK_INT(busy, 409);
    CHECK_MSG(strstr(message, "create") && strstr(message, "in flight"), "409 said: %s", message);
    CHECK_INT(beside_created, 200);
    CHECK_INT(beside_released, 200);
    CHECK_MSG(beside_first, "the proc claim was served only after the slow calls ended");
    CHECK_STR(seen, "alive");
    CHECK_STR(seen_back, "alive");
    CHECK_MSG(suspected == 0, "%d suspicion(s) while the manager was slow", suspected);
    CHECK(samples > 0);
    CHECK_INT(latencies.failures, 0);
    CHECK_MSG(max < S_STATUS_BOUND_MS, "a status waited %" PRId64 " ms", max);
    free(message);
    free(latencies.ms);
    free(state);
    shoal_client_destroy(&watcher);
    shoal_cluster_destroy(&cluster);
}

//  Stops a claim from its own client (the stop waits out the stop timeout).
typedef struct {
    shoal_cluster_t *cluster;
    int stopped;
    int64_t took_ms;
    volatile bool done;
} s_stop_t;

static void *
s_stop_claim(void *arg)
{
    s_stop_t *stop = (s_stop_t *) arg;
    shoal_client_t *client = shoal_cluster_client_new(stop->cluster, 1);
    shoal_client_set_timeout(client, S_CLIENT_TIMEOUT_MS);
    int64_t before = shoal_test_now_ms();
    stop->stopped = shoal_client_claim_stop(client, "stubborn", NULL);
    stop->took_ms = shoal_test_now_ms() - before;
    shoal_client_destroy(&client);
    stop->done = true;
    return NULL;
}

//  A proc guest that ignores SIGTERM, being stopped: the stop waits out
//  guest/stop_timeout_ms (8 s) and kills it, and meanwhile no node is
//  suspected and status is served.
static void
test_stubborn_guest_holds_no_node(void)
{
    shoal_cluster_t *cluster = s_cluster_new();
    CHECK(cluster);
    char stop_ms[32];
    snprintf(stop_ms, sizeof stop_ms, "%d", S_STUBBORN_STOP_MS);
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_GUEST_IGNORE_TERM", "1");
    shoal_cluster_node_setenv(cluster, 1, "SHOAL_GUEST_STOP_TIMEOUT_MS", stop_ms);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    int suspected_before = s_suspicions(cluster, 1) + s_suspicions(cluster, 2);
    shoal_client_t *watcher = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(watcher, S_CLIENT_TIMEOUT_MS);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = "stubborn" };
    int created = shoal_client_claim_create(watcher, &spec, NULL);

    s_stop_t stop = { .cluster = cluster };
    pthread_t thread;
    pthread_create(&thread, NULL, s_stop_claim, &stop);
    s_latencies_t latencies = { 0 };
    while (!stop.done) {
        s_status_once(watcher, &latencies);
        usleep(S_STATUS_PAUSE_US);
    }
    pthread_join(thread, NULL);
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    bool killed = shoal_test_contains(log, "stubborn") && shoal_test_contains(log, "of SIGTERM: killing it");
    free(log);
    int released = shoal_client_claim_release(watcher, "stubborn", NULL);
    char seen[32] = "", seen_back[32] = "";
    shoal_cluster_peer_state(cluster, 1, 2, seen, sizeof seen, NULL);
    shoal_cluster_peer_state(cluster, 2, 1, seen_back, sizeof seen_back, NULL);
    int suspected = s_suspicions(cluster, 1) + s_suspicions(cluster, 2) - suspected_before;
    size_t samples = latencies.count;
    int64_t p50 = s_percentile(&latencies, 50);
    int64_t p99 = s_percentile(&latencies, 99);
    int64_t max = s_percentile(&latencies, 100);
    printf("  status during the %" PRId64 " ms stop: %zu answers, p50 %" PRId64 " ms, p99 %" PRId64 " ms, max %"
           PRId64 " ms\n", stop.took_ms, samples, p50, p99, max);
    CHECK_INT(created, 200);
    CHECK_INT(stop.stopped, 200);
    CHECK_MSG(killed, "the guest was not killed after ignoring SIGTERM");
    CHECK_INT(released, 200);
    CHECK_STR(seen, "alive");
    CHECK_STR(seen_back, "alive");
    CHECK_MSG(suspected == 0, "%d suspicion(s) while the guest would not stop", suspected);
    CHECK(samples > 0);
    CHECK_INT(latencies.failures, 0);
    CHECK_MSG(max < S_STUBBORN_STOP_MS / 4, "a status waited %" PRId64 " ms", max);
    free(latencies.ms);
    shoal_client_destroy(&watcher);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); } while (0)

int
main(void)
{
    S_TEST(test_slow_manager_holds_no_node);
    S_TEST(test_stubborn_guest_holds_no_node);
    return shoal_test_finish();
}
