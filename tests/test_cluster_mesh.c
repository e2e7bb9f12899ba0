/*  test_cluster_mesh: membership, failure detection and oplog sync between
    real shoald processes, driven as an operator drives them: libshoal and
    shoalctl against each node, kill -9, restarts, and (in namespace mode) a
    real network partition.
*/
#include "shoal_cluster.h"
#include "shoal_key.h"
#include "shoal_oplog_codec.h"
#include "shoal_store.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define S_ALIVE_TIMEOUT_MS 15000
#define S_CONVERGE_TIMEOUT_MS 30000
#define S_BULK_CONVERGE_TIMEOUT_MS 90000
#define S_BULK_WRITES 10000
#define S_BULK_SHARED_EVERY 100
#define S_BULK_SHARED_KEYS 50
#define S_CATCHUP_WRITES 300
#define S_PARTITION_WRITES 200
#define S_PRUNE_WRITES 100
#define S_STRANGER_WATCH_MS 3000
//  The bulk tests: entries an origin wrote before the joiner came, and the
//  least a pull must find to catch up in bulk (low, so that a few thousand
//  entries take that path).
#define S_FAR_WRITES 3000
#define S_FAR_SHARED_KEYS 40
#define S_BULK_MIN "100"
//  The entry of n1's chain the corruption test damages (1-based), and how
//  many it writes.
#define S_DAMAGED_ENTRY 1000
#define S_DAMAGED_WRITES 2000
//  The interruption test: entries written, and how long the first batch
//  of a catch-up is held back (time to stop or kill the node meanwhile).
#define S_INTERRUPTED_WRITES 3000
#define S_LOADER_STALL "loader:write@1:stall=3000"
//  A crash before the third table file of the first batch (kv and
//  oplog_by_hash are in), held back a moment first so that the node is
//  seen started before it crashes.
#define S_LOADER_CUT "loader:write@1:stall=1000,loader:ingest@3:crash"
//  Failure detection is asserted against generous bounds: the point is that
//  it happens within the configured timeouts' order of magnitude, not to
//  time the scheduler of a loaded 2-core machine.
#define S_DETECT_SLACK_MS 4000

//  Writes COUNT keys PREFIX0000.. = their own name to DATASET through CLIENT.
//  Returns how many were acknowledged with 200.
static int
s_write_keys(shoal_client_t *client, const char *dataset, const char *prefix, int count)
{
    int written = 0;
    for (int i = 0; i < count; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s%04d", prefix, i);
        if (shoal_client_kv_put(client, dataset, key, key, strlen(key), NULL) == 200)
            written++;
    }
    return written;
}

//  Ms since the epoch, as prune takes it.
static uint64_t
s_wall_ms(void)
{
    return (uint64_t) zclock_time();
}

static void
test_join_through_seed(void)
{
    //  n2 and n3 know only the seed n1; each must learn of the other.
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));

    shoal_peer_list_t peers;
    CHECK_INT(shoal_client_peers(shoal_cluster_client(cluster, 2), &peers), 200);
    size_t selves = 0;
    bool knows_n3 = false, self_is_n2 = false;
    for (size_t i = 0; i < peers.count; i++) {
        shoal_peer_info_t *peer = &peers.peers[i];
        if (peer->self) {
            selves++;
            self_is_n2 = strcmp(peer->node_id, "n2") == 0;
        }
        if (strcmp(peer->node_id, "n3") == 0)
            knows_n3 = strcmp(peer->state, "alive") == 0
                    && strcmp(peer->endpoint, shoal_cluster_endpoint(cluster, 3)) == 0;
    }
    size_t listed = peers.count;
    shoal_peer_list_clear(&peers);
    CHECK_INT(listed, 3);
    CHECK_INT(selves, 1);
    CHECK(self_is_n2);
    CHECK_MSG(knows_n3, "n2 does not list n3 alive at %s", shoal_cluster_endpoint(cluster, 3));

    //  shoalctl shows the same mesh.
    char *output = NULL;
    int code = shoal_cluster_ctl(cluster, 3, &output, "peers", NULL);
    bool shown = code == 0 && shoal_test_contains(output, "n1") && shoal_test_contains(output, "n2")
              && shoal_test_contains(output, "alive");
    char copy[512];
    snprintf(copy, sizeof copy, "%s", output ? output : "");
    free(output);
    CHECK_MSG(shown, "shoalctl peers exited %d: %s", code, copy);
    shoal_cluster_destroy(&cluster);
}

typedef struct {
    int node;                   //  the node that went away
    uint64_t incarnation;       //  its incarnation as n1 saw it before
} s_rejoin_t;

//  Whether n1 sees the node back: alive, under a newer incarnation.
static bool
s_rejoined(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_rejoin_t *rejoin = (s_rejoin_t *) arg;
    char state[64];
    uint64_t incarnation = 0;
    shoal_cluster_peer_state(cluster, 1, rejoin->node, state, sizeof state, &incarnation);
    snprintf(why, why_size, "n1 sees n%d %s at incarnation %" PRIu64 " (was %" PRIu64 ")", rejoin->node, state,
             incarnation, rejoin->incarnation);
    return strcmp(state, "alive") == 0 && incarnation > rejoin->incarnation;
}

static void
test_kill_detect_restart_catch_up(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    char state[64];
    s_rejoin_t rejoin = { 3, 0 };
    CHECK(shoal_cluster_peer_state(cluster, 1, 3, state, sizeof state, &rejoin.incarnation) == 0);

    //  kill -9: no goodbye, so the others must notice on their own.
    int64_t killed = shoal_test_now_ms();
    CHECK_INT(shoal_cluster_node_kill(cluster, 3, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 3, "suspect", 10000) == 0, "%s", shoal_cluster_error(cluster));
    int64_t suspected = shoal_test_now_ms() - killed;
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 3, "dead", 15000) == 0, "%s", shoal_cluster_error(cluster));
    int64_t dead = shoal_test_now_ms() - killed;
    CHECK_MSG(shoal_cluster_wait_state(cluster, 2, 3, "dead", 5000) == 0, "%s", shoal_cluster_error(cluster));
    printf("  n1 saw n3 suspect after %" PRId64 " ms, dead after %" PRId64 " ms\n", suspected, dead);
    //  A probe round reaches every peer within (nodes x probe interval), and
    //  a missed probe is one probe timeout late; dead follows suspicion by
    //  the suspect timeout, never sooner.
    int64_t detect_bound = 3 * SHOAL_CLUSTER_PROBE_INTERVAL_MS + 2 * SHOAL_CLUSTER_PROBE_TIMEOUT_MS;
    CHECK_MSG(suspected <= detect_bound + S_DETECT_SLACK_MS, "suspect after %" PRId64 " ms", suspected);
    CHECK_MSG(dead >= SHOAL_CLUSTER_SUSPECT_TIMEOUT_MS, "dead after only %" PRId64 " ms", dead);
    CHECK_MSG(dead <= detect_bound + SHOAL_CLUSTER_SUSPECT_TIMEOUT_MS + S_DETECT_SLACK_MS,
              "dead after %" PRId64 " ms", dead);

    //  Writes on both survivors while n3 is down, a delete among them.
    CHECK_INT(s_write_keys(shoal_cluster_client(cluster, 1), "catchup", "from-n1/", S_CATCHUP_WRITES),
              S_CATCHUP_WRITES);
    CHECK_INT(s_write_keys(shoal_cluster_client(cluster, 2), "catchup", "from-n2/", S_CATCHUP_WRITES),
              S_CATCHUP_WRITES);
    CHECK_INT(shoal_client_kv_del(shoal_cluster_client(cluster, 2), "catchup", "from-n1/0007", NULL), 200);

    //  Back on its old data: alive again under a higher incarnation, and
    //  holding everything written meanwhile.
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_rejoined, &rejoin, S_ALIVE_TIMEOUT_MS, "n3 to rejoin") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "catchup", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    size_t count = 0;
    CHECK(shoal_cluster_kv_count(cluster, 3, "catchup", NULL, &count) == 0);
    CHECK_INT(count, 2 * S_CATCHUP_WRITES - 1);
    shoal_kv_value_t value;
    CHECK_INT(shoal_client_kv_get(shoal_cluster_client(cluster, 3), "catchup", "from-n1/0007", &value), 404);
    CHECK_INT(shoal_client_kv_get(shoal_cluster_client(cluster, 3), "catchup", "from-n2/0299", &value), 200);
    bool right = value.size == strlen("from-n2/0299") && strcmp(value.node, "n2") == 0;
    shoal_kv_value_clear(&value);
    CHECK(right);
    shoal_cluster_destroy(&cluster);
}

//  One writer thread: its own client, its own node.
typedef struct {
    shoal_client_t *client;     //  to the writer's node, used by its thread only
    int index;                  //  the node it writes to
    int acknowledged;           //  writes answered 200
} s_writer_t;

static void *
s_writer_run(void *arg)
{
    s_writer_t *writer = (s_writer_t *) arg;
    for (int i = 0; i < S_BULK_WRITES; i++) {
        char key[64], value[64];
        //  Every hundredth write goes to a key all writers share, so that
        //  concurrent writes to one key must resolve the same everywhere.
        if (i % S_BULK_SHARED_EVERY == 0)
            snprintf(key, sizeof key, "shared/%02d", (i / S_BULK_SHARED_EVERY) % S_BULK_SHARED_KEYS);
        else
            snprintf(key, sizeof key, "n%d/%05d", writer->index, i);
        snprintf(value, sizeof value, "n%d:%d", writer->index, i);
        if (shoal_client_kv_put(writer->client, "bulk", key, value, strlen(value), NULL) == 200)
            writer->acknowledged++;
    }
    return NULL;
}

static void
test_concurrent_writers_converge(void)
{
    //  Durability is not the subject here; without fsync per write the
    //  30,000 writes fit the time box.
    shoal_cluster_options_t options = { .no_store_sync = true };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    s_writer_t writers[3];
    pthread_t threads[3];
    int64_t started = shoal_test_now_ms();
    for (int i = 0; i < 3; i++) {
        writers[i] = (s_writer_t) { shoal_cluster_client_new(cluster, i + 1), i + 1, 0 };
        CHECK(writers[i].client);
    }
    for (int i = 0; i < 3; i++)
        pthread_create(&threads[i], NULL, s_writer_run, &writers[i]);
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        shoal_client_destroy(&writers[i].client);
    }
    int64_t wrote = shoal_test_now_ms() - started;
    for (int i = 0; i < 3; i++)
        CHECK_MSG(writers[i].acknowledged == S_BULK_WRITES, "n%d acknowledged %d of %d writes", i + 1,
                  writers[i].acknowledged, S_BULK_WRITES);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "bulk", S_BULK_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    printf("  3 x %d writes in %" PRId64 " ms, converged %" PRId64 " ms later\n", S_BULK_WRITES, wrote,
           shoal_test_now_ms() - started - wrote);
    size_t own = S_BULK_WRITES - S_BULK_WRITES / S_BULK_SHARED_EVERY;
    for (int i = 1; i <= 3; i++) {
        size_t count = 0;
        CHECK_MSG(shoal_cluster_kv_count(cluster, i, "bulk", NULL, &count) == 0, "%s", shoal_cluster_error(cluster));
        CHECK_INT(count, 3 * own + S_BULK_SHARED_KEYS);
    }
    shoal_cluster_destroy(&cluster);
}

static void
test_partition_heal_last_writer_wins(void)
{
    SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_options_t options = { .namespaces = true };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *majority = shoal_cluster_client(cluster, 1);
    shoal_client_t *minority = shoal_cluster_client(cluster, 3);
    CHECK_INT(shoal_client_kv_put(majority, "part", "before", "1", 1, NULL), 200);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "part", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));

    //  n3 alone on one side, n1 and n2 on the other; clients reach both.
    CHECK_MSG(shoal_cluster_cut(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 3, "dead", 15000) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_write_keys(minority, "part", "minority/", S_PARTITION_WRITES), S_PARTITION_WRITES);
    shoal_kv_value_t early, late;
    CHECK_INT(shoal_client_kv_put(minority, "part", "collide", "minority", 8, &early), 200);
    shoal_kv_value_clear(&early);
    //  The majority's write to the same key comes later on the clock.
    usleep(20000);
    CHECK_INT(shoal_client_kv_put(majority, "part", "collide", "majority", 8, &late), 200);
    char winner[65];
    snprintf(winner, sizeof winner, "%s", late.hash);
    shoal_kv_value_clear(&late);
    CHECK_INT(s_write_keys(majority, "part", "majority/", S_PARTITION_WRITES), S_PARTITION_WRITES);

    //  The cut is real: several sync rounds later neither side has the other's writes.
    usleep(5 * SHOAL_CLUSTER_SYNC_INTERVAL_MS * 1000);
    shoal_kv_value_t value;
    CHECK_INT(shoal_client_kv_get(shoal_cluster_client(cluster, 2), "part", "minority/0000", &value), 404);
    CHECK_INT(shoal_client_kv_get(minority, "part", "majority/0000", &value), 404);

    CHECK_MSG(shoal_cluster_heal(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "part", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    for (int i = 1; i <= 3; i++) {
        size_t count = 0;
        CHECK(shoal_cluster_kv_count(cluster, i, "part", NULL, &count) == 0);
        CHECK_MSG(count == 2 + 2 * S_PARTITION_WRITES, "n%d has %zu keys", i, count);
        CHECK_INT(shoal_client_kv_get(shoal_cluster_client(cluster, i), "part", "collide", &value), 200);
        bool later_won = strcmp((char *) value.value, "majority") == 0 && strcmp(value.hash, winner) == 0;
        char seen[64];
        snprintf(seen, sizeof seen, "%s", (char *) value.value);
        shoal_kv_value_clear(&value);
        CHECK_MSG(later_won, "n%d holds collide = '%s'", i, seen);
    }
    shoal_cluster_destroy(&cluster);
}

typedef struct {
    int index;                  //  the node to prune on
    const char *dataset;
    uint64_t pruned;            //  entries removed by the prune that succeeded
    char answer[512];           //  the last refusal
} s_prune_t;

//  Prunes everything up to now; true once the node agrees to.
static bool
s_pruned(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_prune_t *prune = (s_prune_t *) arg;
    shoal_client_t *client = shoal_cluster_client(cluster, prune->index);
    int rc = shoal_client_oplog_prune(client, prune->dataset, s_wall_ms(), &prune->pruned);
    snprintf(why, why_size, "prune answered %d: %s", rc, shoal_client_error(client));
    return rc == 200;
}

static void
test_prune_waits_for_lagging_peer(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    CHECK_INT(s_write_keys(n1, "pr", "first/", S_PRUNE_WRITES), S_PRUNE_WRITES);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "pr", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));

    //  n3 stops and misses the second batch.
    CHECK_INT(shoal_cluster_node_kill(cluster, 3, SIGTERM), 0);
    CHECK_INT(s_write_keys(n1, "pr", "second/", S_PRUNE_WRITES), S_PRUNE_WRITES);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "pr", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));

    //  n3 has not confirmed the second batch: prune refuses and says who it waits for.
    //  n2 confirms at its next heads exchange; until then the refusal may
    //  name n2 as well. Every answer must be a refusal, and once n2 has
    //  confirmed, the one it names is n3.
    uint64_t pruned = 0;
    int refused = 0;
    char message[512] = "";
    int64_t deadline = shoal_test_now_ms() + S_CONVERGE_TIMEOUT_MS;
    do {
        refused = shoal_client_oplog_prune(n1, "pr", s_wall_ms(), &pruned);
        snprintf(message, sizeof message, "%s", shoal_client_error(n1));
        CHECK_MSG(refused != 200, "prune went ahead with n3 stopped: %s", message);
        if (!shoal_test_contains(message, "n3"))
            usleep(50000);
    } while (!shoal_test_contains(message, "n3") && shoal_test_now_ms() < deadline);
    CHECK_MSG(shoal_test_contains(message, "n3"), "prune answered %d: %s", refused, message);
    shoal_dataset_list_t stats;
    CHECK_INT(shoal_client_oplog_stats(n1, "pr", &stats), 200);
    uint64_t entries = stats.count == 1 ? stats.datasets[0].entries : 0;
    shoal_dataset_list_clear(&stats);
    CHECK_INT(entries, 2 * S_PRUNE_WRITES);
    char *output = NULL;
    char before[32];
    snprintf(before, sizeof before, "%" PRIu64, s_wall_ms());
    int code = shoal_cluster_ctl(cluster, 1, &output, "oplog", "prune", "--before", before, "-d", "pr", NULL);
    bool named = code != 0 && shoal_test_contains(output, "n3");
    snprintf(message, sizeof message, "%s", output ? output : "");
    free(output);
    CHECK_MSG(named, "shoalctl oplog prune exited %d: %s", code, message);

    //  Once the operator retires n3, prune proceeds.
    code = shoal_cluster_ctl(cluster, 1, &output, "peers", "forget", "n3", NULL);
    snprintf(message, sizeof message, "%s", output ? output : "");
    free(output);
    CHECK_MSG(code == 0, "shoalctl peers forget n3 exited %d: %s", code, message);
    s_prune_t prune = { .index = 1, .dataset = "pr" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_pruned, &prune, S_CONVERGE_TIMEOUT_MS, "n1 to prune") == 0, "%s",
              shoal_cluster_error(cluster));
    CHECK_INT(prune.pruned, 2 * S_PRUNE_WRITES);

    //  n3 comes back behind the prune point with n1 its only source (n2 is
    //  stopped): the entries it lacks are gone, so it needs a snapshot.
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGTERM), 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "pr", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    size_t count = 0;
    CHECK(shoal_cluster_kv_count(cluster, 3, "pr", NULL, &count) == 0);
    CHECK_INT(count, 2 * S_PRUNE_WRITES);
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "pr", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    shoal_cluster_destroy(&cluster);
}

//  Whether FILE (a node's log) holds TEXT.
static bool
s_log_has(const char *file, const char *text)
{
    char *log = shoal_test_slurp(file);
    bool has = shoal_test_contains(log, text);
    free(log);
    return has;
}

//  Entries of DATASET node INDEX holds, or -1.
static int64_t
s_entry_count(shoal_cluster_t *cluster, int index, const char *dataset)
{
    shoal_dataset_list_t stats;
    if (shoal_client_oplog_stats(shoal_cluster_client(cluster, index), dataset, &stats) != 200)
        return -1;
    int64_t entries = stats.count == 1 ? (int64_t) stats.datasets[0].entries : 0;
    shoal_dataset_list_clear(&stats);
    return entries;
}

//  A node that joins with an empty store while two others hold thousands of
//  entries (puts, deletes, keys both wrote) catches up in bulk, and ends
//  holding what they hold: the same heads, the same keys from the same
//  entries, as many entries. Writes that come in meanwhile converge too.
static void
test_empty_joiner_catches_up_in_bulk(void)
{
    shoal_cluster_options_t options = { .no_store_sync = true };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    for (int i = 1; i <= 3; i++)
        CHECK(shoal_cluster_node_setenv(cluster, i, "SHOAL_MESH_SYNC_BULK_MIN", S_BULK_MIN) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1), *n2 = shoal_cluster_client(cluster, 2);
    int written = 0;
    for (int i = 0; i < S_FAR_WRITES; i++) {
        char key[64], value[64];
        snprintf(key, sizeof key, i % 10 == 0 ? "shared/%02d" : "n1/%05d",
                 i % 10 == 0 ? (i / 10) % S_FAR_SHARED_KEYS : i);
        snprintf(value, sizeof value, "n1:%d", i);
        written += shoal_client_kv_put(n1, "far", key, value, strlen(value), NULL) == 200;
        if (i % 3 == 0) {
            snprintf(key, sizeof key, i % 30 == 0 ? "shared/%02d" : "n2/%05d",
                     i % 30 == 0 ? (i / 30) % S_FAR_SHARED_KEYS : i);
            written += shoal_client_kv_put(n2, "far", key, "n2", 2, NULL) == 200;
        }
        if (i % 97 == 0)
            written += shoal_client_kv_del(n1, "far", key, NULL) == 200;
    }
    CHECK_INT(written, S_FAR_WRITES + S_FAR_WRITES / 3 + S_FAR_WRITES / 97 + 1);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "far", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));

    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    //  Writes while it catches up, on both sides of it.
    CHECK_INT(shoal_client_kv_put(n1, "far", "late/1", "x", 1, NULL), 200);
    CHECK_INT(shoal_client_kv_put(shoal_cluster_client(cluster, 3), "far", "late/3", "y", 1, NULL), 200);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "far", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    int64_t source = s_entry_count(cluster, 1, "far");
    CHECK(source > S_FAR_WRITES);
    CHECK_INT(s_entry_count(cluster, 3, "far"), source);
    size_t keys1 = 0, keys3 = 0;
    CHECK(shoal_cluster_kv_count(cluster, 1, "far", NULL, &keys1) == 0);
    CHECK(shoal_cluster_kv_count(cluster, 3, "far", NULL, &keys3) == 0);
    CHECK_INT(keys3, keys1);
    //  And it got there in bulk, from both origins.
    const char *log = shoal_cluster_log_path(cluster, 3);
    CHECK_MSG(s_log_has(log, "sync: catching up far/n1 from") && s_log_has(log, "sync: catching up far/n2 from")
              && s_log_has(log, "in bulk in"), "n3's log does not show a catch-up in bulk of both origins");
    //  Its loader held compaction back while batches came, and let it go
    //  once they stopped.
    CHECK_MSG(s_log_has(log, "loader: compaction of the log's families held while batches come in"),
              "n3's log does not show compaction held during the catch-up");
    int64_t deadline = zclock_mono() + S_CONVERGE_TIMEOUT_MS;
    while (!s_log_has(log, "loader: compaction of the log's families let go: no batch came")
           && zclock_mono() < deadline)
        zclock_sleep(50);
    CHECK_MSG(s_log_has(log, "loader: compaction of the log's families let go: no batch came"),
              "n3's loader did not let compaction go after its catch-up");
    shoal_cluster_destroy(&cluster);
}

//  Finds the NUMBER-th key (1-based) of NODE's chain of DATASET in
//  oplog_by_node_hlc of the store in DIR, changes one byte of its entry's
//  value there (so that it still decodes, but no longer hashes to its hash),
//  and gives the entry's hash in hex. Returns 0 or -1.
static int
s_damage_entry(const char *dir, const char *dataset, const char *node, int number, char *hex)
{
    shoal_store_t *store = shoal_store_new(dir, NULL, NULL);
    if (!store)
        return -1;
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, dataset);
    shoal_key_add_str(&prefix, node);
    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_OPLOG_BY_NODE_HLC, &prefix);
    int rc = -1, seen = 0;
    for (bool on = shoal_iter_first(iter); on && rc; on = shoal_iter_next(iter)) {
        if (++seen < number)
            continue;
        size_t key_size, size;
        const uint8_t *key_bytes = shoal_iter_key(iter, &key_size);
        const uint8_t *value = shoal_iter_value(iter, &size);
        shoal_oplog_entry_t entry;
        char error[256];
        if (size == 0 || shoal_oplog_entry_codec.decode(value, size, &entry, error, sizeof error))
            break;
        for (size_t i = 0; i < SHOAL_HASH_SIZE; i++)
            snprintf(hex + 2 * i, 3, "%02x", entry.hash[i]);
        //  The value field's bytes are the entry's own: the last byte of
        //  the value as it appears in the encoding is changed.
        uint8_t *copy = malloc(size);
        memcpy(copy, value, size);
        const uint8_t *at = memmem(copy, size, entry.value, entry.value_size);
        shoal_key_t key;
        shoal_key_init(&key);
        memcpy(key.bytes, key_bytes, key_size);
        key.size = key_size;
        if (at && entry.value_size) {
            copy[(at - copy) + entry.value_size - 1] ^= 0x01;
            rc = shoal_store_put(store, SHOAL_CF_OPLOG_BY_NODE_HLC, &key, copy, size, true);
        }
        free(copy);
        shoal_oplog_entry_codec.clear(&entry);
        break;
    }
    shoal_iter_destroy(&iter);
    shoal_store_destroy(&store);
    return rc;
}

//  A source whose store serves an entry that no longer matches its hash: a
//  joiner catching up in bulk refuses it, names it, and keeps every entry
//  before it; nothing after it gets in, then or at later rounds.
static void
test_bulk_refuses_a_damaged_entry(void)
{
    shoal_cluster_options_t options = { .no_store_sync = true };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    for (int i = 1; i <= 2; i++)
        CHECK(shoal_cluster_node_setenv(cluster, i, "SHOAL_MESH_SYNC_BULK_MIN", S_BULK_MIN) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_write_keys(shoal_cluster_client(cluster, 1), "bad", "k", S_DAMAGED_WRITES), S_DAMAGED_WRITES);
    //  Stopped cleanly, so that it does not reconcile at its next start: the
    //  damage is there to be served, as a disk's would be.
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGTERM), 0);
    char path[4400], hex[2 * SHOAL_HASH_SIZE + 1] = "";
    snprintf(path, sizeof path, "%s/db", shoal_cluster_data_dir(cluster, 1));
    CHECK(s_damage_entry(path, "bad", "n1", S_DAMAGED_ENTRY, hex) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));

    //  n2 holds the entries before the damaged one, and keeps refusing it.
    const char *log = shoal_cluster_log_path(cluster, 2);
    int64_t deadline = shoal_test_now_ms() + S_CONVERGE_TIMEOUT_MS;
    while (shoal_test_now_ms() < deadline && !s_log_has(log, hex))
        usleep(50000);
    usleep(5 * SHOAL_CLUSTER_SYNC_INTERVAL_MS * 1000);
    char *text = shoal_test_slurp(log);
    bool named = shoal_test_contains(text, hex) && shoal_test_contains(text, "does not match its fields");
    free(text);
    CHECK_MSG(named, "n2's log does not name entry x'%s' as refused", hex);
    CHECK_INT(s_entry_count(cluster, 2, "bad"), S_DAMAGED_ENTRY - 1);
    size_t count = 0;
    CHECK(shoal_cluster_kv_count(cluster, 2, "bad", NULL, &count) == 0);
    CHECK_INT(count, S_DAMAGED_ENTRY - 1);
    shoal_cluster_destroy(&cluster);
}

//  Waits until the log at FILE holds TEXT. Returns whether it did.
static bool
s_wait_log(const char *file, const char *text, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    while (!s_log_has(file, text)) {
        if (shoal_test_now_ms() >= deadline)
            return false;
        usleep(20000);
    }
    return true;
}

//  A joiner stopped while a batch of its catch-up in bulk is about to be
//  written stops cleanly (the batch is finished first) and starts again
//  without reconciling; one that crashes between two table files of a
//  batch starts again, finds the load's mark, reconciles, and catches up
//  all the same. Both end holding what the source holds.
static void
test_bulk_interrupted_stop_and_kill(void)
{
    shoal_cluster_options_t options = { .no_store_sync = true };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    for (int i = 1; i <= 3; i++)
        CHECK(shoal_cluster_node_setenv(cluster, i, "SHOAL_MESH_SYNC_BULK_MIN", S_BULK_MIN) == 0);
    CHECK(shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", S_LOADER_STALL) == 0);
    CHECK(shoal_cluster_node_setenv(cluster, 3, "SHOAL_FAULT", S_LOADER_CUT) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_write_keys(shoal_cluster_client(cluster, 1), "slow", "k", S_INTERRUPTED_WRITES),
              S_INTERRUPTED_WRITES);

    //  n2: stopped while its first batch waits to be written.
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    const char *log2 = shoal_cluster_log_path(cluster, 2);
    CHECK_MSG(s_wait_log(log2, "fault: stall at loader:write", S_CONVERGE_TIMEOUT_MS), "n2 never stalled");
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGTERM), 0);
    CHECK(shoal_cluster_node_setenv(cluster, 2, "SHOAL_FAULT", "") == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK(s_log_has(log2, "closed cleanly, no reconcile needed"));

    //  n3: crashes between two table files of its first batch (it kills
    //  itself; the harness reaps it).
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    const char *log3 = shoal_cluster_log_path(cluster, 3);
    CHECK_MSG(s_wait_log(log3, "fault: crash at loader:ingest", S_CONVERGE_TIMEOUT_MS), "n3 never crashed");
    CHECK_INT(shoal_cluster_node_kill(cluster, 3, SIGKILL), 128 + SIGKILL);
    CHECK(shoal_cluster_node_setenv(cluster, 3, "SHOAL_FAULT", "") == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK(s_log_has(log3, "a bulk load was cut between its table files"));

    CHECK_MSG(shoal_cluster_wait_converged(cluster, "slow", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    for (int i = 2; i <= 3; i++) {
        CHECK_INT(s_entry_count(cluster, i, "slow"), S_INTERRUPTED_WRITES);
        size_t count = 0;
        CHECK(shoal_cluster_kv_count(cluster, i, "slow", NULL, &count) == 0);
        CHECK_INT(count, S_INTERRUPTED_WRITES);
    }
    shoal_cluster_destroy(&cluster);
}

static void
test_wrong_cluster_key_never_joins(void)
{
    //  n3 serves with a key of its own and names n1 as its seed; n4, started
    //  after it with the right key, shows that joining works meanwhile.
    shoal_cluster_t *cluster = shoal_cluster_new(4, NULL);
    CHECK(cluster);
    char other[4300];
    snprintf(other, sizeof other, "%s/other/cluster.cert", shoal_test_dir);
    CHECK(shoal_keygen_cluster(other, NULL) == 0);
    CHECK(shoal_cluster_node_set_cluster_cert(cluster, 3, other) == 0);
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(s_write_keys(shoal_cluster_client(cluster, 1), "data", "k", 50), 50);
    CHECK_MSG(shoal_cluster_node_start(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_node_start(cluster, 4) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "data", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));

    //  For many probe and sync rounds: nobody lists n3 alive, n3 lists
    //  nobody alive but itself, and n3 receives no entry.
    int64_t deadline = shoal_test_now_ms() + S_STRANGER_WATCH_MS;
    while (shoal_test_now_ms() < deadline) {
        for (int observer = 1; observer <= 4; observer++) {
            if (observer == 3)
                continue;
            char state[64];
            CHECK(shoal_cluster_peer_state(cluster, observer, 3, state, sizeof state, NULL) == 0);
            CHECK_MSG(strcmp(state, "alive") != 0, "n%d lists the stranger n3 as alive", observer);
        }
        shoal_peer_list_t peers;
        CHECK_INT(shoal_client_peers(shoal_cluster_client(cluster, 3), &peers), 200);
        int others_alive = 0;
        for (size_t i = 0; i < peers.count; i++)
            if (!peers.peers[i].self && strcmp(peers.peers[i].state, "alive") == 0)
                others_alive++;
        shoal_peer_list_clear(&peers);
        CHECK_MSG(others_alive == 0, "the stranger n3 lists %d members alive", others_alive);
        size_t count = 0;
        CHECK(shoal_cluster_kv_count(cluster, 3, "data", NULL, &count) == 0);
        CHECK_MSG(count == 0, "the stranger n3 received %zu keys", count);
        usleep(100000);
    }
    shoal_cluster_destroy(&cluster);
}

//  Times n2 is stopped and started again at its endpoint, and how long n1
//  is then watched for a false suspicion (many probe periods).
#define S_RESTARTS 8
#define S_RESTART_WATCH_MS 600
//  The suspect timeout of that test: how long a probe waits for a new
//  connection to the restarted node, generous for a loaded machine.
#define S_RESTART_SUSPECT_TIMEOUT_MS 10000

//  Lines of n1's log holding FIRST and then, on the same line, SECOND.
static int
s_n1_lines(shoal_cluster_t *cluster, const char *first, const char *second)
{
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    int count = 0;
    for (char *line = log ? strstr(log, first) : NULL; line; line = strstr(line + 1, first)) {
        char *end = strchr(line, '\n');
        char *found = strstr(line, second);
        if (found && (!end || found < end))
            count++;
    }
    free(log);
    return count;
}

//  How n2 fared in n1's eyes so far.
typedef struct {
    int suspicions;             //  n2 turned suspect
    int unanswered;             //  a probe's ping to n2 left and was not answered in time
    int never_left;             //  a probe's ping to n2 never left: no connection took it
} s_suspicions_t;

static s_suspicions_t
s_n2_suspicions(shoal_cluster_t *cluster)
{
    s_suspicions_t seen = {
        s_n1_lines(cluster, "mesh: node n2 (", ") suspect"),
        s_n1_lines(cluster, "mesh: probe of n2 at", "its ping left and was not answered"),
        s_n1_lines(cluster, "mesh: probe of n2 at", "its ping never left")
    };
    return seen;
}

//  A node restarted at the endpoint it had is probed at once by the others,
//  whose connections to that endpoint come up again on their own a moment
//  later: a probe that no connection could carry yet is no missed probe,
//  so the restart raises no suspicion.
//
//  What the restart itself would cause is a probe that never left (n1's
//  log says so for each suspicion). A ping that left on a connection and
//  was not answered within the probe timeout is the failure detector doing
//  its work: on a loaded machine the restarted process may answer late,
//  and that is no fault of the restart. So the check is that every
//  suspicion rests on an unanswered ping, and none on a ping that never
//  left. The probe timeout stays short, so a connection that is not made
//  again at once still shows; the suspect timeout (how long a request waits
//  for a new connection) is generous, so a slow handshake is not one.
static void
test_restart_at_same_endpoint_not_suspected(void)
{
    shoal_cluster_options_t options = { .suspect_timeout_ms = S_RESTART_SUSPECT_TIMEOUT_MS };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    for (int round = 0; round < S_RESTARTS; round++) {
        char state[64];
        s_rejoin_t back = { 2, 0 };
        CHECK(shoal_cluster_peer_state(cluster, 1, 2, state, sizeof state, &back.incarnation) == 0);
        CHECK_MSG(shoal_cluster_node_restart(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
        CHECK_MSG(shoal_cluster_wait_until(cluster, s_rejoined, &back, S_ALIVE_TIMEOUT_MS, "n2 to come back") == 0,
                  "%s", shoal_cluster_error(cluster));
        usleep(S_RESTART_WATCH_MS * 1000);
        s_suspicions_t seen = s_n2_suspicions(cluster);
        CHECK_MSG(seen.never_left == 0, "n1 suspected n2 %d time(s) on a probe that never left, by restart %d of %d",
                  seen.never_left, round + 1, S_RESTARTS);
        CHECK_MSG(seen.suspicions <= seen.unanswered,
                  "n1 suspected n2 %d time(s), %d of them on an unanswered ping, by restart %d of %d",
                  seen.suspicions, seen.unanswered, round + 1, S_RESTARTS);
        if (round == S_RESTARTS - 1)
            printf("  n1 suspected n2 %d time(s) over %d restarts, each on a ping answered late\n",
                   seen.suspicions, S_RESTARTS);
    }
    shoal_cluster_destroy(&cluster);
}

//  The probe timeout of the next test: long enough that a node stopped
//  while a probe to it is out can be killed, started again and heard
//  rejoining before that probe's deadline, on a loaded machine too.
#define S_STALE_PROBE_TIMEOUT_MS 8000
//  How long the stopped node is left stopped: several probe intervals, so
//  that a probe surely went out to it and waits for its deadline.
#define S_STALE_PROBE_STOPPED_MS 500

//  Lines of n1's log saying that n2 turned suspect at INCARNATION.
static int
s_n2_suspicions_at(shoal_cluster_t *cluster, uint64_t incarnation)
{
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    char wanted[64];
    snprintf(wanted, sizeof wanted, ") suspect (incarnation %" PRIu64 ")", incarnation);
    int count = 0;
    for (char *line = log ? strstr(log, "mesh: node n2 (") : NULL; line; line = strstr(line + 1, "mesh: node n2 (")) {
        char *end = strchr(line, '\n');
        char *suspect = strstr(line, wanted);
        if (suspect && (!end || suspect < end))
            count++;
    }
    free(log);
    return count;
}

//  A probe is evidence about the incarnation it was sent to. n2 is frozen
//  while n1's probe to it is out, then killed and started again: the new
//  process joins and is alive before the old probe's deadline. That probe's
//  silence must not make n1 suspect the new incarnation, which never got it.
static void
test_stale_probe_does_not_suspect_new_incarnation(void)
{
    shoal_cluster_options_t options = { .probe_timeout_ms = S_STALE_PROBE_TIMEOUT_MS,
                                        .suspect_timeout_ms = 2 * S_STALE_PROBE_TIMEOUT_MS };
    shoal_cluster_t *cluster = shoal_cluster_new(2, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    char state[64];
    s_rejoin_t back = { 2, 0 };
    CHECK(shoal_cluster_peer_state(cluster, 1, 2, state, sizeof state, &back.incarnation) == 0);
    int64_t stopped = shoal_test_now_ms();
    CHECK(kill(shoal_cluster_node_pid(cluster, 2), SIGSTOP) == 0);
    usleep(S_STALE_PROBE_STOPPED_MS * 1000);
    CHECK_INT(shoal_cluster_node_kill(cluster, 2, SIGKILL), 128 + SIGKILL);
    CHECK_MSG(shoal_cluster_node_start(cluster, 2) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_rejoined, &back, S_ALIVE_TIMEOUT_MS, "n2 to come back") == 0,
              "%s", shoal_cluster_error(cluster));
    uint64_t incarnation = 0;
    CHECK(shoal_cluster_peer_state(cluster, 1, 2, state, sizeof state, &incarnation) == 0);
    int64_t rejoined = shoal_test_now_ms() - stopped;
    printf("  n2 rejoined %" PRId64 " ms after it was frozen (the stale probe's timeout: %d ms)\n", rejoined,
           S_STALE_PROBE_TIMEOUT_MS);
    //  Past the stale probe's deadline, whenever the rejoin came.
    int64_t watch_ms = S_STALE_PROBE_TIMEOUT_MS + S_STALE_PROBE_STOPPED_MS - rejoined;
    if (watch_ms > 0)
        usleep((useconds_t) watch_ms * 1000);
    usleep(S_RESTART_WATCH_MS * 1000);
    int suspicions = s_n2_suspicions_at(cluster, incarnation);
    CHECK_MSG(suspicions == 0, "n1 suspected n2's new incarnation %" PRIu64 " %d time(s)", incarnation, suspicions);
    CHECK(shoal_cluster_peer_state(cluster, 1, 2, state, sizeof state, NULL) == 0);
    CHECK_MSG(strcmp(state, "alive") == 0, "n1 sees n2 %s", state);
    shoal_cluster_destroy(&cluster);
}

//  What every node's log says once it has collected a tombstone of dataset
//  "tomb", and once its collection of "tomb" has come to rest.
static char s_tomb_collected[] = "tombstones of tomb,";
static char s_tomb_rests[] = "tombstone collection of tomb rests";

//  Every node's log holds the text ARG.
static bool
s_every_log_has(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    const char *text = (const char *) arg;
    for (int i = 1; i <= 3; i++)
        if (!s_log_has(shoal_cluster_log_path(cluster, i), text)) {
            snprintf(why, why_size, "n%d's log does not say \"%s\"", i, text);
            return false;
        }
    return true;
}

//  A dataset with no tombstone in it is not walked over and over: its
//  collection rests, and wakes when the dataset changes. A peer cut off
//  during a delete, which wrote an older put of the key while away: the
//  others keep their tombstone until it has confirmed past the delete, so
//  the older put loses everywhere once the cut heals. Then every node
//  collects the tombstone, and the key stays deleted.
static void
test_tombstone_collection_never_resurrects(void)
{
    SHOAL_CLUSTER_REQUIRE_NAMESPACES();
    shoal_cluster_options_t options = { .namespaces = true };
    shoal_cluster_t *cluster = shoal_cluster_new(3, &options);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_t *n3 = shoal_cluster_client(cluster, 3);
    CHECK_INT(shoal_client_kv_put(n1, "tomb", "k", "v0", 2, NULL), 200);
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "tomb", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    //  Nothing to collect yet: every node's collection of tomb rests, and
    //  must wake for the delete below to be collected at the end.
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_every_log_has, s_tomb_rests, S_CONVERGE_TIMEOUT_MS,
                                       "every node's collection of tomb to rest") == 0,
              "%s", shoal_cluster_error(cluster));

    //  n3 away: it writes the key first, n1 deletes it later on the clock.
    CHECK_MSG(shoal_cluster_cut(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_state(cluster, 1, 3, "dead", 15000) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_client_kv_put(n3, "tomb", "k", "stale", 5, NULL), 200);
    usleep(20000);
    CHECK_INT(shoal_client_kv_del(n1, "tomb", "k", NULL), 200);
    //  Sync rounds pass while n3 is away: a collection that did not wait
    //  for n3 to confirm would take the tombstone now.
    usleep(5 * SHOAL_CLUSTER_SYNC_INTERVAL_MS * 1000);
    for (int i = 1; i <= 2; i++)
        CHECK_MSG(!s_log_has(shoal_cluster_log_path(cluster, i), s_tomb_collected),
                  "n%d collected the tombstone while n3 had not confirmed the delete", i);

    CHECK_MSG(shoal_cluster_heal(cluster, 3) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "tomb", S_CONVERGE_TIMEOUT_MS) == 0, "%s",
              shoal_cluster_error(cluster));
    //  Once all have confirmed past it, every node collects the tombstone.
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_every_log_has, s_tomb_collected, S_CONVERGE_TIMEOUT_MS,
                                       "every node to collect the tombstone") == 0,
              "%s", shoal_cluster_error(cluster));
    //  And nothing brought the key back, then or a few rounds later.
    usleep(3 * SHOAL_CLUSTER_SYNC_INTERVAL_MS * 1000);
    for (int i = 1; i <= 3; i++) {
        shoal_kv_value_t value;
        int answer = shoal_client_kv_get(shoal_cluster_client(cluster, i), "tomb", "k", &value);
        if (answer == 200)
            shoal_kv_value_clear(&value);
        CHECK_MSG(answer == 404, "n%d answers %d for the deleted key", i, answer);
    }
    shoal_cluster_destroy(&cluster);
}

//  Every test's cluster is gone before the next test starts, even when a
//  CHECK returned early.
#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); } while (0)

int
main(void)
{
    zsys_init();
    S_TEST(test_join_through_seed);
    S_TEST(test_kill_detect_restart_catch_up);
    S_TEST(test_restart_at_same_endpoint_not_suspected);
    S_TEST(test_stale_probe_does_not_suspect_new_incarnation);
    S_TEST(test_concurrent_writers_converge);
    S_TEST(test_partition_heal_last_writer_wins);
    S_TEST(test_tombstone_collection_never_resurrects);
    S_TEST(test_prune_waits_for_lagging_peer);
    S_TEST(test_empty_joiner_catches_up_in_bulk);
    S_TEST(test_bulk_refuses_a_damaged_entry);
    S_TEST(test_bulk_interrupted_stop_and_kill);
    S_TEST(test_wrong_cluster_key_never_joins);
    return shoal_test_finish();
}
