/*  bench_txn: compare-and-set transactions on claims' keys and lock round
    trips through libshoal against one real shoald, beside the store's raw
    synced batch and a status round trip measured in the same run.

    Usage: bench_txn [CLAIMS]   (default 1,000 claims)
           BENCH_CALLS=N calls per series (default 1,000);
           shoald and shoal-guest are looked for in $SHOAL_BIN_DIR, else
           beside this program.

    In order:

      batch     BENCH_CALLS synced batches of shoal_store, each of a key
                record and the key space's record (what a transaction of one
                put writes), in a store of its own in the work directory.
      status    BENCH_CALLS shoal_client_status round trips to the node.
      one claim compare-and-sets of one claim's key: each compares the
                key's mod revision with the one the last answer gave and
                puts a new value; from 1 client, then from 8 (threads, each
                its own client and its own key of the same claim).
      claims    the same across CLAIMS claims of the node, round robin (made
                first, then stopped: a stopped claim's keys are served, and
                no guest runs), from 1 and from 8 clients.
      locks     BENCH_CALLS read lock acquires and releases of one claim.

    Printed: p50 and p99 of each call as its client saw it, and calls/s
    (all calls of a series over its wall time), and ratios against the
    batch and the batch plus a status round trip. Expected, from the issue:
    a transaction's median within 1.5 times a synced batch plus one round
    trip. Printed, not asserted: the machine is noisy (limits.md).
*/
#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shoal.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"
#include "shoal_store.h"
#include "shoal_alloc.h"

#define BENCH_DEFAULT_CLAIMS 1000
#define BENCH_DEFAULT_CALLS 1000
#define BENCH_CLIENTS 8
#define BENCH_MIB (1024ull * 1024)
#define BENCH_TENANT "bench/txn"
#define BENCH_CALL_TIMEOUT_MS 30000
#define BENCH_EXPECTED_RATIO 1.5
//  A value the size of seed 000's handle record.
#define BENCH_VALUE "{\"pid\":4242,\"vnc\":\"127.0.0.1:5901\",\"state\":\"running\"}"
#define BENCH_MEMORY_MB 16384

//  Latencies of one series, in ms.
typedef struct {
    double *values;
    size_t count;
    size_t capacity;
    double wall_ms;             //  the series' wall time, all its callers together
} s_series_t;

static double
s_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double) now.tv_sec * 1000.0 + (double) now.tv_nsec / 1e6;
}

static void
s_series_init(s_series_t *series, size_t capacity)
{
    series->values = (double *) calloc(capacity, sizeof *series->values);
    series->capacity = capacity;
    series->count = 0;
    series->wall_ms = 0;
}

static int
s_compare(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
s_percentile(s_series_t *series, double fraction)
{
    if (!series->count)
        return 0;
    qsort(series->values, series->count, sizeof *series->values, s_compare);
    size_t index = (size_t) (fraction * (double) (series->count - 1));
    return series->values[index];
}

static void
s_print(const char *label, s_series_t *series)
{
    printf("  %-36s p50 %7.3f ms  p99 %7.3f ms  %8.0f calls/s  (%zu calls)\n", label, s_percentile(series, 0.5),
           s_percentile(series, 0.99), series->wall_ms > 0 ? (double) series->count * 1000.0 / series->wall_ms : 0,
           series->count);
    fflush(stdout);
}

//  The store's raw synced batch: a key record and a key space record.
static int
s_batch_runs(size_t calls, s_series_t *series)
{
    char *dir = zsys_sprintf("%s/raw-store-%zu", shoal_test_dir, series->count);
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = true;
    shoal_store_t *store = shoal_store_new(dir, &options, NULL);
    free(dir);
    if (!store)
        return -1;
    char meta[48];
    memset(meta, 'm', sizeof meta);
    int rc = 0;
    double began = s_now_ms();
    for (size_t i = 0; i < calls && rc == 0; i++) {
        shoal_key_t key, meta_key;
        shoal_key_init(&key);
        shoal_key_add_str(&key, "key");
        shoal_key_add_str(&key, "bench/txn/hot");
        shoal_key_add_str(&key, "counter");
        shoal_key_init(&meta_key);
        shoal_key_add_str(&meta_key, "meta");
        shoal_key_add_str(&meta_key, "bench/txn/hot");
        double start = s_now_ms();
        shoal_batch_t *batch = shoal_batch_new(store);
        shoal_batch_put(batch, SHOAL_CF_CLAIM_KEYS, &key, BENCH_VALUE, strlen(BENCH_VALUE));
        shoal_batch_put(batch, SHOAL_CF_CLAIM_KEYS, &meta_key, meta, sizeof meta);
        rc = shoal_store_write(store, batch, true);
        shoal_batch_destroy(&batch);
        series->values[series->count++] = s_now_ms() - start;
    }
    series->wall_ms = s_now_ms() - began;
    shoal_store_destroy(&store);
    return rc;
}

static int
s_status_runs(shoal_client_t *client, size_t calls, s_series_t *series)
{
    double began = s_now_ms();
    for (size_t i = 0; i < calls; i++) {
        shoal_status_t status;
        double start = s_now_ms();
        if (shoal_client_status(client, &status) != 200)
            return -1;
        series->values[series->count++] = s_now_ms() - start;
        shoal_status_clear(&status);
    }
    series->wall_ms = s_now_ms() - began;
    return 0;
}

//  One client's share of a compare-and-set series.
typedef struct {
    shoal_client_t *client;
    char **claims;              //  the claims it writes, round robin
    size_t claim_count;
    char key[80];               //  its key in each claim
    size_t calls;
    double *latencies;          //  CALLS of them
    uint64_t *revisions;        //  the key's mod revision in each claim, as the last answer gave it
    int failed;                 //  a call that did not succeed (0: none)
    char failure[256];
} s_worker_t;

static void *
s_worker_run(void *arg)
{
    s_worker_t *worker = (s_worker_t *) arg;
    for (size_t i = 0; i < worker->calls && !worker->failed; i++) {
        size_t which = i % worker->claim_count;
        shoal_compare_t compare = { .key = worker->key, .target = SHOAL_CMP_MOD, .result = SHOAL_CMP_EQUAL,
                                    .number = worker->revisions[which] };
        shoal_op_t put = { .type = SHOAL_OP_PUT, .key = worker->key, .value = BENCH_VALUE,
                           .value_size = strlen(BENCH_VALUE) };
        shoal_txn_result_t result;
        double start = s_now_ms();
        int rc = shoal_client_claim_txn(worker->client, worker->claims[which], &compare, 1, &put, 1, NULL, 0,
                                        &result);
        worker->latencies[i] = s_now_ms() - start;
        if (rc != 200 || !result.succeeded) {
            snprintf(worker->failure, sizeof worker->failure, "txn on %s: %d %s%s", worker->claims[which], rc,
                     shoal_client_error(worker->client), rc == 200 ? " (compare failed)" : "");
            worker->failed = rc == 200 ? 409 : rc;
        }
        if (rc == 200) {
            worker->revisions[which] = result.revision;
            shoal_txn_result_clear(&result);
        }
    }
    return NULL;
}

//  CLIENTS clients each doing CALLS compare-and-sets over CLAIMS.
static int
s_txn_runs(shoal_cluster_t *cluster, char **claims, size_t claim_count, size_t clients, size_t calls,
           s_series_t *series)
{
    s_worker_t workers[BENCH_CLIENTS];
    pthread_t threads[BENCH_CLIENTS];
    memset(workers, 0, sizeof workers);
    for (size_t w = 0; w < clients; w++) {
        s_worker_t *worker = &workers[w];
        worker->client = shoal_cluster_client_new(cluster, 1);
        shoal_client_set_timeout(worker->client, BENCH_CALL_TIMEOUT_MS);
        worker->claims = claims;
        worker->claim_count = claim_count;
        snprintf(worker->key, sizeof worker->key, "counter-%zu-%zu-%zu", claim_count, clients, w);
        worker->calls = calls / clients;
        worker->latencies = (double *) calloc(worker->calls + 1, sizeof *worker->latencies);
        worker->revisions = (uint64_t *) calloc(claim_count, sizeof *worker->revisions);
    }
    double began = s_now_ms();
    for (size_t w = 0; w < clients; w++)
        pthread_create(&threads[w], NULL, s_worker_run, &workers[w]);
    for (size_t w = 0; w < clients; w++)
        pthread_join(threads[w], NULL);
    series->wall_ms = s_now_ms() - began;
    int rc = 0;
    for (size_t w = 0; w < clients; w++) {
        s_worker_t *worker = &workers[w];
        if (worker->failed) {
            fprintf(stderr, "bench_txn: %s\n", worker->failure);
            rc = -1;
        }
        for (size_t i = 0; i < worker->calls && series->count < series->capacity; i++)
            series->values[series->count++] = worker->latencies[i];
        free(worker->latencies);
        free(worker->revisions);
        shoal_client_destroy(&worker->client);
    }
    return rc;
}

static int
s_lock_runs(shoal_client_t *client, const char *claim, size_t calls, s_series_t *acquire, s_series_t *release)
{
    double began = s_now_ms();
    for (size_t i = 0; i < calls; i++) {
        double start = s_now_ms();
        if (shoal_client_lock_acquire(client, claim, "bench", "read", false, 0, NULL) != 200)
            return -1;
        double middle = s_now_ms();
        if (shoal_client_lock_release(client, claim, "bench", NULL) != 200)
            return -1;
        acquire->values[acquire->count++] = middle - start;
        release->values[release->count++] = s_now_ms() - middle;
    }
    acquire->wall_ms = release->wall_ms = (s_now_ms() - began) / 2;
    return 0;
}

//  Makes COUNT claims named bench/txn/cN and stops them. Returns their ids.
static char **
s_claims_make(shoal_client_t *client, size_t count)
{
    char **ids = (char **) calloc(count, sizeof *ids);
    for (size_t i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "c%zu", i);
        shoal_claim_spec_t spec = { .tenant = BENCH_TENANT, .memory_bytes = BENCH_MIB, .id = name };
        shoal_claim_info_t info;
        if (shoal_client_claim_create(client, &spec, &info) != 200
        ||  shoal_client_claim_stop(client, name, NULL) != 200) {
            fprintf(stderr, "bench_txn: claim %s: %s\n", name, shoal_client_error(client));
            return NULL;
        }
        ids[i] = shoal_strdup(info.id);
        shoal_claim_info_clear(&info);
        if (zsys_interrupted)
            return NULL;
    }
    return ids;
}

int
main(int argc, char *argv[])
{
    size_t claim_count = BENCH_DEFAULT_CLAIMS;
    if (argc > 2 || (argc == 2 && (claim_count = strtoull(argv[1], NULL, 10)) == 0)) {
        fprintf(stderr, "usage: %s [CLAIMS]   (default %d; BENCH_CALLS=N, default %d)\n", argv[0],
                BENCH_DEFAULT_CLAIMS, BENCH_DEFAULT_CALLS);
        return EXIT_FAILURE;
    }
    size_t calls = getenv("BENCH_CALLS") ? strtoull(getenv("BENCH_CALLS"), NULL, 10) : BENCH_DEFAULT_CALLS;
    if (calls < BENCH_CLIENTS)
        calls = BENCH_CLIENTS;
    if (shoal_test_find_programs())
        return EXIT_FAILURE;
    zsys_init();
    if (shoal_test_dir_make("bench-txn"))
        return EXIT_FAILURE;
    printf("bench_txn: %zu calls per series, %zu claims; one shoald on loopback, store sync on\n", calls,
           claim_count);
    s_series_t batch, status, one1, one8, many1, many8, acquire, release;
    s_series_t *all[] = { &batch, &status, &one1, &one8, &many1, &many8, &acquire, &release };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        s_series_init(all[i], calls);
    //  The raw batch is measured in two halves, before the node starts and
    //  after its series, so that neither end of the run alone sets it.
    int rc = s_batch_runs(calls / 2, &batch);

    shoal_cluster_t *cluster = rc == 0 ? shoal_cluster_new(1, NULL) : NULL;
    char limit[32], memory[32];
    snprintf(limit, sizeof limit, "%zu", claim_count + 1);
    snprintf(memory, sizeof memory, "%d", BENCH_MEMORY_MB);
    if (!cluster || shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_MAX_CLAIMS", limit)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_TENANT_MAX_CLAIMS", limit)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_MEMORY_MB", memory)
    ||  shoal_cluster_start(cluster)) {
        fprintf(stderr, "bench_txn: %s\n", cluster ? shoal_cluster_error(cluster) : "no node");
        rc = -1;
    }
    shoal_client_t *client = rc == 0 ? shoal_cluster_client_new(cluster, 1) : NULL;
    if (client)
        shoal_client_set_timeout(client, BENCH_CALL_TIMEOUT_MS);
    if (rc == 0 && (rc = s_status_runs(client, calls, &status)) == 0)
        s_print("status round trip (floor)", &status);
    char **claims = NULL;
    if (rc == 0) {
        printf("making %zu claims (created, then stopped)\n", claim_count);
        fflush(stdout);
        claims = s_claims_make(client, claim_count);
        rc = claims ? 0 : -1;
    }
    if (rc == 0 && (rc = s_txn_runs(cluster, claims, 1, 1, calls, &one1)) == 0)
        s_print("txn, one claim, 1 client", &one1);
    if (rc == 0 && (rc = s_txn_runs(cluster, claims, 1, BENCH_CLIENTS, calls, &one8)) == 0)
        s_print("txn, one claim, 8 clients", &one8);
    if (rc == 0 && (rc = s_txn_runs(cluster, claims, claim_count, 1, calls, &many1)) == 0)
        s_print("txn, across the claims, 1 client", &many1);
    if (rc == 0 && (rc = s_txn_runs(cluster, claims, claim_count, BENCH_CLIENTS, calls, &many8)) == 0)
        s_print("txn, across the claims, 8 clients", &many8);
    if (rc == 0 && (rc = s_lock_runs(client, claims[0], calls, &acquire, &release)) == 0) {
        s_print("lock acquire (read)", &acquire);
        s_print("lock release", &release);
    }
    if (rc == 0) {
        double first_wall = batch.wall_ms;
        rc = s_batch_runs(calls - calls / 2, &batch);
        batch.wall_ms += first_wall;
    }
    if (rc == 0)
        s_print("store: synced batch (raw limit)", &batch);
    if (rc == 0) {
        double batch_p50 = s_percentile(&batch, 0.5), status_p50 = s_percentile(&status, 0.5);
        double floor = batch_p50 + status_p50;
        double txn_p50 = s_percentile(&one1, 0.5), lock_p50 = s_percentile(&acquire, 0.5);
        printf("\nratios (medians)\n");
        printf("  txn / synced batch                    %.2f\n", txn_p50 / batch_p50);
        printf("  txn / (synced batch + status)         %.2f\n", txn_p50 / floor);
        printf("  lock acquire / (synced batch + status) %.2f\n", lock_p50 / floor);
        printf("  lock acquire / status                 %.2f\n", lock_p50 / status_p50);
        printf("  8 clients / 1 client, one claim, calls/s  %.2f\n",
               (one8.count / one8.wall_ms) / (one1.count / one1.wall_ms));
        printf("  across claims / one claim, 1 client, calls/s  %.2f\n",
               (many1.count / many1.wall_ms) / (one1.count / one1.wall_ms));
        printf("expected: a transaction within %.1f times a synced batch plus one round trip "
               "(txn p50 %.3f ms, bound %.1f x (%.3f + %.3f) = %.3f ms): %s\n", BENCH_EXPECTED_RATIO, txn_p50,
               BENCH_EXPECTED_RATIO, batch_p50, status_p50, BENCH_EXPECTED_RATIO * floor,
               txn_p50 <= BENCH_EXPECTED_RATIO * floor ? "met" : "NOT met");
    }
    shoal_client_destroy(&client);
    for (size_t i = 0; claims && i < claim_count; i++)
        free(claims[i]);
    free(claims);
    shoal_move_check_cleanup();
    shoal_cluster_destroy_all();
    shoal_move_check_cleanup();
    shoal_test_rmrf(shoal_test_dir);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->values);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
