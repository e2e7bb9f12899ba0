/*  test_cluster_move_keys: a claim's keys go with it in a live move. A
    writer keeps writing the claim's keys through the move; afterwards every
    write the old owner or the new one acknowledged reads back from the new
    owner as acknowledged, and revisions never went back. */
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <pthread.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_WAIT_MS 30000
//  A bound for a busy machine, not a figure.
#define S_MOVE_WAIT_MS 120000
#define S_TENANT "acme/web"
//  Most writes the writer keeps account of.
#define S_WRITES_MAX 100000
//  Writes acknowledged before the move starts, and after it ended.
#define S_WRITES_AROUND 20

//  One acknowledged write: key "k<index>" took REVISION on OWNER's side.
typedef struct {
    uint64_t revision;
    bool on_target;             //  the node that answered was the move's target
} s_ack_t;

typedef struct {
    shoal_client_t *client;
    s_ack_t *acks;              //  by index: acks[i] is key k<i>
    volatile size_t acked;      //  writes acknowledged so far
    volatile bool stop;         //  the test has seen enough
    volatile size_t unavailable;    //  503s met (the keys were on their way)
    volatile int failed;        //  a status other than 200, 404 and 503 (0: none)
    char failure[256];
} s_writer_t;

static void *
s_writer_run(void *arg)
{
    s_writer_t *writer = (s_writer_t *) arg;
    char key[32], value[32];
    while (!writer->stop && writer->acked < S_WRITES_MAX && !writer->failed) {
        size_t index = writer->acked;
        snprintf(key, sizeof key, "k%zu", index);
        snprintf(value, sizeof value, "v%zu", index);
        //  A compare-and-set on the counter: each write also proves it saw
        //  the one before it.
        shoal_compare_t compare = { .key = "counter", .target = SHOAL_CMP_VALUE, .result = SHOAL_CMP_EQUAL };
        char previous[32];
        if (index) {
            snprintf(previous, sizeof previous, "%zu", index - 1);
            compare.value = previous;
            compare.value_size = strlen(previous);
        }
        else
            compare = (shoal_compare_t) { .key = "counter", .target = SHOAL_CMP_VERSION, .result = SHOAL_CMP_EQUAL };
        char counter[32];
        snprintf(counter, sizeof counter, "%zu", index);
        shoal_op_t ops[] = {
            { .type = SHOAL_OP_PUT, .key = key, .value = value, .value_size = strlen(value) },
            { .type = SHOAL_OP_PUT, .key = "counter", .value = counter, .value_size = strlen(counter) },
        };
        shoal_op_t read = { .type = SHOAL_OP_GET, .key = "counter" };
        shoal_txn_result_t result;
        int rc = shoal_client_claim_txn(writer->client, "mover", &compare, 1, ops, 2, &read, 1, &result);
        if (rc == 200 && result.succeeded) {
            writer->acks[index].revision = result.revision;
            writer->acks[index].on_target = streq(result.owner, "n2");
            writer->acked = index + 1;
        }
        else
        if (rc == 200) {
            //  The counter is not what the last acknowledged write left.
            snprintf(writer->failure, sizeof writer->failure, "write %zu: the counter moved under it", index);
            writer->failed = 409;
        }
        else
        if (rc == 503 || rc == 404) {
            //  The keys are on their way, or the registry still names the
            //  old owner: both pass.
            writer->unavailable += rc == 503;
            usleep(5000);
        }
        else {
            snprintf(writer->failure, sizeof writer->failure, "write %zu: %d %s", index, rc,
                     shoal_client_error(writer->client));
            writer->failed = rc;
        }
        if (rc == 200)
            shoal_txn_result_clear(&result);
    }
    return NULL;
}

//  Waits until WRITER acknowledged COUNT writes or failed.
static bool
s_wait_acked(s_writer_t *writer, size_t count)
{
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (writer->acked < count && !writer->failed && shoal_test_now_ms() < deadline)
        usleep(5000);
    return writer->acked >= count;
}

static void
test_keys_move_with_the_claim(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 64 * S_MB, .id = "mover",
                                .rate = 2 * 1000 * 1000 };
    CHECK_INT(shoal_client_claim_create(shoal_cluster_client(cluster, 1), &spec, NULL), 200);

    //  A lease of n1 holds a write lock and a key of the claim.
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(n1, 60000, 0, &lease, NULL), 200);
    uint64_t lease_id = lease.id, lease_ends = lease.expires_ms;
    shoal_lease_clear(&lease);
    shoal_lock_state_t lock;
    CHECK_INT(shoal_client_lock_acquire(n1, "mover", "vm-manager", "write", false, lease_id, &lock), 200);
    CHECK(lock.granted);
    shoal_lock_state_clear(&lock);
    CHECK_INT(shoal_client_key_put(n1, "mover", "lock", "vm-manager", 10, lease_id, NULL), 200);

    s_writer_t writer = { .client = shoal_cluster_client_new(cluster, 1) };
    writer.acks = (s_ack_t *) calloc(S_WRITES_MAX, sizeof *writer.acks);
    shoal_client_set_timeout(writer.client, 10000);
    pthread_t thread;
    pthread_create(&thread, NULL, s_writer_run, &writer);
    CHECK(s_wait_acked(&writer, S_WRITES_AROUND));

    CHECK_MSG(shoal_move_check_move(cluster, 1, "mover", 2, 300, S_MOVE_WAIT_MS) == 0, "%s",
              shoal_move_check_error());
    //  Writes go on at the new owner.
    size_t at_move_end = writer.acked;
    CHECK(s_wait_acked(&writer, at_move_end + S_WRITES_AROUND));
    writer.stop = true;
    pthread_join(thread, NULL);
    CHECK_MSG(!writer.failed, "%s", writer.failure);

    //  Every acknowledged write reads back from the new owner as it was
    //  acknowledged, and each took a revision above the one before it.
    size_t acked = writer.acked, wrong = 0, backwards = 0, on_target = 0;
    shoal_client_t *n2 = shoal_cluster_client(cluster, 2);
    shoal_key_value_t *kvs = NULL;
    size_t count = 0;
    CHECK_INT(shoal_client_key_list(n2, "mover", "k", &kvs, &count), 200);
    zhashx_t *found = zhashx_new();
    for (size_t i = 0; i < count; i++)
        zhashx_insert(found, kvs[i].key, &kvs[i]);
    for (size_t i = 0; i < acked; i++) {
        char key[32], value[32];
        snprintf(key, sizeof key, "k%zu", i);
        snprintf(value, sizeof value, "v%zu", i);
        const shoal_key_value_t *kv = (const shoal_key_value_t *) zhashx_lookup(found, key);
        if (!kv || kv->mod_revision != writer.acks[i].revision || kv->value_size != strlen(value)
        ||  memcmp(kv->value, value, kv->value_size) != 0)
            wrong++;
        if (i && writer.acks[i].revision <= writer.acks[i - 1].revision)
            backwards++;
        on_target += writer.acks[i].on_target;
    }
    zhashx_destroy(&found);
    CHECK_MSG(wrong == 0, "%zu of %zu acknowledged writes do not read back from the new owner", wrong, acked);
    CHECK_INT(backwards, 0);
    //  No key was written that was not acknowledged (the writer writes one
    //  new key per acknowledged write, and the one it was at may have been
    //  written without its answer arriving: at most one more).
    CHECK_MSG(count == acked || count == acked + 1, "%zu keys for %zu acknowledged writes", count, acked);
    CHECK(on_target >= S_WRITES_AROUND && on_target < acked);
    shoal_key_values_clear(&kvs, count);
    fprintf(stderr, "  %zu writes acknowledged, %zu of them by the new owner, %zu answers of 503 meanwhile\n",
            acked, on_target, (size_t) writer.unavailable);

    //  The lock held through the move is held on the new owner, its record
    //  whole; its lease came along (a copy: n1, its home, answers for it)
    //  and counts down from where it was.
    CHECK_INT(shoal_client_lock_list(n2, "mover", &lock), 200);
    CHECK(streq(lock.writer, "vm-manager") && lock.readers == 0 && lock.count == 1
          && lock.records[0].lease == lease_id && streq(lock.records[0].mode, "write"));
    shoal_lock_state_clear(&lock);
    CHECK_INT(shoal_client_lease_ttl(n2, lease_id, &lease), 200);
    CHECK(lease.expires_ms == lease_ends && lease.remaining_ms < 60000 && streq(lease.home, "n1"));
    shoal_lease_clear(&lease);
    //  Revoked through n2, at its home: the copy on n2 ends with it, and
    //  takes the lock and its key along.
    CHECK_INT(shoal_client_lease_revoke(n2, lease_id), 200);
    int64_t gone_by = shoal_test_now_ms() + S_WAIT_MS;
    bool locked = true;
    while (locked && shoal_test_now_ms() < gone_by) {
        CHECK_INT(shoal_client_lock_list(n2, "mover", &lock), 200);
        locked = !(streq(lock.writer, "") && lock.count == 0);
        shoal_lock_state_clear(&lock);
        if (locked)
            usleep(10000);
    }
    CHECK(!locked);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(n2, "mover", "lock", &kv), 404);

    //  The old owner keeps no copy once the claim left it.
    CHECK_MSG(shoal_move_check_settled(cluster, "mover", 2, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    shoal_client_destroy(&writer.client);
    free(writer.acks);
    CHECK_INT(shoal_client_claim_release(n2, "mover", NULL), 200);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_keys_move_with_the_claim);
    return shoal_test_finish();
}
