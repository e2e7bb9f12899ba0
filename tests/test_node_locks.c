/*  test_node_locks: a claim's read/write lock through a real shoald: the
    seed's rules with wait, lock records, a lock held by a lease, shoalctl,
    a randomized run checked step by step against a model, and libshoal
    resolving a refused reader again by itself. */
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_image.h"

#include <czmq.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024 * 1024)
#define S_TENANT "acme/web"
#define S_CALL_TIMEOUT_MS 10000
//  The randomized run: operations, holders, and the clients they share.
#define S_RANDOM_OPS 10000
#define S_HOLDERS 6
#define S_CLIENTS 3

typedef shoal_node_fixture_t s_node_t;

static bool
s_node_start(s_node_t *node)
{
    shoal_node_fixture_init(node, "n1", 0);
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", NULL };
    return shoal_node_fixture_start(node, env);
}

//  A client that answers a refused reader at once (the node's own rules,
//  step by step): test_refused_reader_resolves checks libshoal's retries.
static shoal_client_t *
s_client(s_node_t *node)
{
    shoal_client_t *client = shoal_node_fixture_client(node, node->admin_cert, S_CALL_TIMEOUT_MS);
    if (client)
        shoal_client_set_read_resolves(client, 0);
    return client;
}

static int
s_create(shoal_client_t *client, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = id };
    return shoal_client_claim_create(client, &spec, NULL);
}

//  Acquires for HOLDER; returns the status, *GRANTED_P whether granted.
static int
s_acquire(shoal_client_t *client, const char *holder, const char *mode, bool wait, bool *granted_p)
{
    shoal_lock_state_t state;
    int rc = shoal_client_lock_acquire(client, "c1", holder, mode, wait, 0, &state);
    *granted_p = rc == 200 && state.granted;
    if (rc == 200)
        shoal_lock_state_clear(&state);
    return rc;
}

static void
test_rules_records_and_wait(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *a = s_client(&node), *b = s_client(&node), *c = s_client(&node);
    CHECK_INT(s_create(a, "c1"), 200);
    bool granted = false;
    CHECK_INT(s_acquire(a, "r1", "read", false, &granted), 200);
    CHECK(granted);
    CHECK_INT(s_acquire(b, "r2", "read", false, &granted), 200);
    CHECK(granted);
    //  A writer finding readers: refused, or with wait it waits.
    CHECK_INT(s_acquire(c, "w1", "write", false, &granted), 409);
    CHECK_INT(s_acquire(c, "w1", "write", true, &granted), 200);
    CHECK(!granted);
    //  Waiting stops new readers, who are told to resolve again.
    CHECK_INT(s_acquire(a, "r3", "read", false, &granted), 409);
    CHECK(shoal_test_contains(shoal_client_error(a), "resolve the claim again"));
    CHECK_INT(s_acquire(b, "w2", "write", true, &granted), 409);
    //  The records say who holds what, from where, since when.
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_list(a, "c1", &state), 200);
    CHECK(state.readers == 2 && streq(state.writer, "") && streq(state.waiter, "w1") && state.count == 3);
    for (size_t i = 0; i < state.count; i++)
        CHECK(streq(state.records[i].holder_node, "n1") && state.records[i].time_ms > 0
              && streq(state.records[i].mode, streq(state.records[i].holder, "w1") ? "wait" : "read"));
    shoal_lock_state_clear(&state);
    //  The writer asks again until the readers left.
    CHECK_INT(s_acquire(c, "w1", "write", true, &granted), 200);
    CHECK(!granted);
    CHECK_INT(shoal_client_lock_release(a, "c1", "r1", NULL), 200);
    CHECK_INT(shoal_client_lock_release(a, "c1", "r1", NULL), 404);
    CHECK_INT(s_acquire(c, "w1", "write", true, &granted), 200);
    CHECK(!granted);
    CHECK_INT(shoal_client_lock_release(b, "c1", "r2", NULL), 200);
    CHECK_INT(s_acquire(c, "w1", "write", false, &granted), 200);
    CHECK(granted);
    CHECK_INT(shoal_client_lock_list(a, "c1", &state), 200);
    CHECK(state.readers == 0 && streq(state.writer, "w1") && streq(state.waiter, "") && state.count == 1
          && streq(state.records[0].mode, "write"));
    shoal_lock_state_clear(&state);
    CHECK_INT(s_acquire(a, "r3", "read", false, &granted), 409);
    CHECK_INT(s_acquire(b, "w2", "write", false, &granted), 409);
    CHECK_INT(shoal_client_lock_release(c, "c1", "w1", NULL), 200);
    CHECK_INT(s_acquire(a, "r3", "read", false, &granted), 200);
    CHECK(granted);

    //  A lock held by a lease goes with it.
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(a, 60000, 0, &lease, NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(b, "c1", "leased", "read", false, lease.id, NULL), 200);
    CHECK_INT(shoal_client_lease_revoke(a, lease.id), 200);
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lock_list(a, "c1", &state), 200);
    CHECK(state.readers == 1 && state.count == 1 && streq(state.records[0].holder, "r3"));
    shoal_lock_state_clear(&state);

    //  A writer that waited with a lease keeps it when it takes the lock,
    //  and goes with it.
    CHECK_INT(shoal_client_lease_grant(a, 60000, 0, &lease, NULL), 200);
    uint64_t waited = lease.id;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lock_acquire(c, "c1", "w3", "write", true, waited, &state), 200);
    CHECK(!state.granted && streq(state.waiter, "w3"));
    shoal_lock_state_clear(&state);
    CHECK_INT(shoal_client_lock_release(a, "c1", "r3", NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(c, "c1", "w3", "write", false, 0, &state), 200);
    CHECK(state.granted && state.count == 1 && state.records[0].lease == waited);
    shoal_lock_state_clear(&state);
    CHECK_INT(shoal_client_lease_revoke(a, waited), 200);
    CHECK_INT(shoal_client_lock_list(a, "c1", &state), 200);
    CHECK(streq(state.writer, "") && state.count == 0);
    shoal_lock_state_clear(&state);
    CHECK_INT(s_acquire(a, "r3", "read", false, &granted), 200);

    //  shoalctl shows the same.
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "-e", node.endpoint, "-c", node.admin_cert, "-k",
                     node.cluster_cert, "lock", "acquire", "c1", "write", "--wait", "--holder", "ctl", "--json", NULL };
    char *output = NULL;
    CHECK_INT(shoal_test_capture(argv, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    CHECK(output && shoal_test_contains(output, "\"granted\":false") && shoal_test_contains(output, "\"waiter\":\"ctl\""));
    free(output);
    char *ls[] = { (char *) shoal_test_program("shoalctl"), "-e", node.endpoint, "-c", node.admin_cert, "-k",
                   node.cluster_cert, "lock", "ls", "c1", NULL };
    CHECK_INT(shoal_test_capture(ls, NULL, S_CALL_TIMEOUT_MS, &output), 0);
    CHECK(output && shoal_test_contains(output, "1 reader(s), writer -, waiting writer ctl"));
    free(output);

    shoal_client_destroy(&a);
    shoal_client_destroy(&b);
    shoal_client_destroy(&c);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

//  The model: seed 001's rules as the test reads them.
typedef enum { S_NONE, S_READ, S_WRITE, S_WAIT } s_held_t;

typedef struct {
    s_held_t held[S_HOLDERS];
    int readers;
    int writer;                 //  -1: none
    int waiter;                 //  -1: none
} s_model_t;

//  Applies an acquire (MODE S_READ or S_WRITE, with WAIT) by H to MODEL.
//  Returns the status the node must answer, and *GRANTED_P.
static int
s_model_acquire(s_model_t *model, int h, s_held_t mode, bool wait, bool *granted_p)
{
    *granted_p = false;
    if (model->held[h] == mode) {
        *granted_p = true;
        return 200;
    }
    if (mode == S_READ) {
        if (model->held[h] != S_NONE || model->writer >= 0 || model->waiter >= 0)
            return 409;
        model->held[h] = S_READ;
        model->readers++;
        *granted_p = true;
        return 200;
    }
    if (model->held[h] == S_READ)
        return 409;
    if (model->held[h] == S_WAIT) {
        if (model->readers)
            return 200;
        model->waiter = -1;
    }
    else
    if (model->writer >= 0 || model->waiter >= 0)
        return 409;
    else
    if (model->readers) {
        if (!wait)
            return 409;
        model->waiter = h;
        model->held[h] = S_WAIT;
        return 200;
    }
    model->writer = h;
    model->held[h] = S_WRITE;
    *granted_p = true;
    return 200;
}

static int
s_model_release(s_model_t *model, int h)
{
    switch (model->held[h]) {
        case S_NONE: return 404;
        case S_READ: model->readers--; break;
        case S_WRITE: model->writer = -1; break;
        case S_WAIT: model->waiter = -1; break;
    }
    model->held[h] = S_NONE;
    return 200;
}

static void
test_randomized_against_model(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *clients[S_CLIENTS];
    for (int i = 0; i < S_CLIENTS; i++)
        clients[i] = s_client(&node);
    CHECK_INT(s_create(clients[0], "c1"), 200);
    s_model_t model = { .writer = -1, .waiter = -1 };
    char holders[S_HOLDERS][16];
    for (int h = 0; h < S_HOLDERS; h++)
        snprintf(holders[h], sizeof holders[h], "h%d", h);
    unsigned seed = (unsigned) zclock_time();
    fprintf(stderr, "  seed %u\n", seed);
    srand(seed);
    int mismatches = 0, together = 0, granted_reads = 0, granted_writes = 0, waits = 0;
    for (int step = 0; step < S_RANDOM_OPS && mismatches == 0; step++) {
        int h = rand() % S_HOLDERS;
        int what = rand() % 4;
        shoal_client_t *client = clients[rand() % S_CLIENTS];
        shoal_lock_state_t state;
        int expected, rc;
        bool model_granted = false;
        if (what == 3) {
            expected = s_model_release(&model, h);
            rc = shoal_client_lock_release(client, "c1", holders[h], &state);
        }
        else {
            s_held_t mode = what == 0 ? S_READ : S_WRITE;
            bool wait = what == 2;
            expected = s_model_acquire(&model, h, mode, wait, &model_granted);
            rc = shoal_client_lock_acquire(client, "c1", holders[h], mode == S_READ ? "read" : "write", wait, 0,
                                           &state);
            granted_reads += model_granted && mode == S_READ;
            granted_writes += model_granted && mode == S_WRITE;
            waits += model.waiter == h;
        }
        bool same = rc == expected;
        if (rc == 200) {
            int writer = *state.writer ? atoi(state.writer + 1) : -1;
            int waiter = *state.waiter ? atoi(state.waiter + 1) : -1;
            //  What users rely on, whatever the model says: never a reader
            //  beside a writer, and one record per holder counted.
            together += state.readers && *state.writer;
            same = same && (int) state.readers == model.readers && writer == model.writer && waiter == model.waiter
                && (what == 3 || state.granted == model_granted)
                && (int) state.count == model.readers + (model.writer >= 0) + (model.waiter >= 0);
            shoal_lock_state_clear(&state);
        }
        if (!same) {
            fprintf(stderr, "  step %d: %s by h%d: node %d, model %d (%s)\n", step,
                    what == 3 ? "release" : what == 0 ? "read" : what == 1 ? "write" : "write with wait", h, rc, expected,
                    shoal_client_error(client));
            mismatches++;
        }
    }
    fprintf(stderr, "  %d reads and %d writes granted, %d steps with a waiter\n", granted_reads, granted_writes, waits);
    CHECK_INT(mismatches, 0);
    CHECK_INT(together, 0);
    CHECK(granted_reads > 0 && granted_writes > 0 && waits > 0);
    for (int i = 0; i < S_CLIENTS; i++)
        shoal_client_destroy(&clients[i]);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

typedef struct {
    shoal_client_t *client;
    int64_t asked_ms;           //  wall clock the acquire began
    int rc;
    shoal_lock_state_t state;
} s_reader_t;

static void *
s_reader_run(void *arg)
{
    s_reader_t *reader = (s_reader_t *) arg;
    reader->asked_ms = zclock_time();
    reader->rc = shoal_client_lock_acquire(reader->client, "c1", "patient", "read", false, 0, &reader->state);
    return NULL;
}

//  libshoal resolves a refused reader again by itself, a bounded number of
//  times: while a writer holds on it is refused after every resolution;
//  once the writer's lease ended, one of its retries is granted.
static void
test_refused_reader_resolves(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *writer = s_client(&node);
    CHECK_INT(s_create(writer, "c1"), 200);
    bool granted = false;
    CHECK_INT(s_acquire(writer, "w", "write", false, &granted), 200);
    CHECK(granted);
    shoal_client_t *patient = shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS);
    shoal_client_set_read_resolves(patient, 3);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(patient, "c1", "patient", "read", false, 0, &state), 409);
    CHECK_INT(state.resolved, 3);
    CHECK(shoal_test_contains(shoal_client_error(patient), "resolve the claim again")
          && shoal_test_contains(shoal_client_error(patient), "after resolving the claim 3 time(s)"));
    //  A refusal that is not a reader's is the answer at once.
    CHECK_INT(shoal_client_lock_acquire(patient, "c1", "w", "read", false, 0, &state), 409);
    CHECK_INT(state.resolved, 0);
    CHECK_INT(shoal_client_lock_release(writer, "c1", "w", NULL), 200);

    //  A writer whose lease ends: the reader, with libshoal's own bound,
    //  is refused while it holds and granted after.
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(writer, 1500, 0, &lease, NULL), 200);
    uint64_t ends_ms = lease.expires_ms;
    CHECK_INT(shoal_client_lock_acquire(writer, "c1", "w", "write", false, lease.id, &state), 200);
    CHECK(state.granted);
    shoal_lock_state_clear(&state);
    shoal_lease_clear(&lease);
    s_reader_t reader = { .client = shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS) };
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, s_reader_run, &reader) == 0);
    pthread_join(thread, NULL);
    CHECK_INT(reader.rc, 200);
    CHECK(reader.rc == 200 && reader.state.granted && reader.state.readers == 1 && streq(reader.state.writer, ""));
    //  Asked before the lease could end, its first ask met the writer.
    if (reader.asked_ms < (int64_t) ends_ms)
        CHECK(reader.state.resolved >= 1);
    fprintf(stderr, "  the reader resolved the claim %u time(s) before it was granted\n", reader.state.resolved);
    if (reader.rc == 200)
        shoal_lock_state_clear(&reader.state);
    shoal_client_destroy(&reader.client);
    shoal_client_destroy(&patient);
    shoal_client_destroy(&writer);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

int
main(void)
{
    SHOAL_TEST(test_refused_reader_resolves);
    SHOAL_TEST(test_rules_records_and_wait);
    SHOAL_TEST(test_randomized_against_model);
    return shoal_test_finish();
}
