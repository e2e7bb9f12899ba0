/*  test_node_txn: each claim's own keys and their transactions, through a
    real shoald: every compare target, both branches, revisions, tenants,
    durability across a kill, and clients racing on one key. */
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
#define S_OTHER_TENANT "rival/app"
#define S_CALL_TIMEOUT_MS 10000
//  Rounds of each race; each round is two transactions on one key.
#define S_RACE_ROUNDS 100

typedef shoal_node_fixture_t s_node_t;

static bool
s_node_start(s_node_t *node)
{
    shoal_node_fixture_init(node, "n1", 0);
    char *env[] = { "SHOAL_GUEST_STOP_TIMEOUT_MS=2000", NULL };
    return shoal_node_fixture_start(node, env);
}

static shoal_client_t *
s_client(s_node_t *node, const char *cert)
{
    return shoal_node_fixture_client(node, cert, S_CALL_TIMEOUT_MS);
}

static int
s_create(shoal_client_t *client, const char *tenant, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = tenant, .memory_bytes = S_MB, .id = id };
    return shoal_client_claim_create(client, &spec, NULL);
}

//  A compare of KEY's TARGET against NUMBER.
static shoal_compare_t
s_cmp(const char *key, int target, int result, uint64_t number)
{
    shoal_compare_t compare = { .key = key, .target = target, .result = result, .number = number };
    return compare;
}

static shoal_compare_t
s_cmp_value(const char *key, int result, const char *value)
{
    shoal_compare_t compare = { .key = key, .target = SHOAL_CMP_VALUE, .result = result, .value = value,
                                .value_size = strlen(value) };
    return compare;
}

//  Runs one compare against claim ID with a put of "ok" on success and a
//  get of KEY on failure. Returns 1 when the success branch ran, 0 when
//  the failure branch ran (and its get answered), -1 otherwise.
static int
s_holds(shoal_client_t *client, const char *id, shoal_compare_t compare)
{
    shoal_op_t success = { .type = SHOAL_OP_PUT, .key = "ran", .value = "ok", .value_size = 2 };
    shoal_op_t failure = { .type = SHOAL_OP_GET, .key = compare.key };
    shoal_txn_result_t result;
    int rc = shoal_client_claim_txn(client, id, &compare, 1, &success, 1, &failure, 1, &result);
    if (rc != 200)
        return -1;
    int holds = result.succeeded ? 1 : 0;
    bool shaped = result.count == 1 && result.results[0].type == (result.succeeded ? SHOAL_OP_PUT : SHOAL_OP_GET);
    shoal_txn_result_clear(&result);
    return shaped ? holds : -1;
}

static void
test_compares_and_branches(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, S_TENANT, "c1"), 200);
    uint64_t r1 = 0, r2 = 0, r3 = 0;
    CHECK_INT(shoal_client_key_put(client, "c1", "a", "1", 1, 0, &r1), 200);
    CHECK_INT(shoal_client_key_put(client, "c1", "a", "2", 1, 0, &r2), 200);
    CHECK_INT(shoal_client_key_put(client, "c1", "b", "x", 1, 0, &r3), 200);
    CHECK(r1 == 1 && r2 == 2 && r3 == 3);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(client, "c1", "a", &kv), 200);
    CHECK(kv.value_size == 1 && kv.value[0] == '2' && kv.version == 2 && kv.create_revision == 1
          && kv.mod_revision == 2 && kv.lease == 0);
    shoal_key_value_clear(&kv);
    CHECK_INT(shoal_client_key_get(client, "c1", "absent", &kv), 404);

    //  Each target, each result, holding and not.
    CHECK_INT(s_holds(client, "c1", s_cmp_value("a", SHOAL_CMP_EQUAL, "2")), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp_value("a", SHOAL_CMP_EQUAL, "1")), 0);
    CHECK_INT(s_holds(client, "c1", s_cmp_value("a", SHOAL_CMP_NOT_EQUAL, "1")), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp_value("a", SHOAL_CMP_GREATER, "1")), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp_value("a", SHOAL_CMP_LESS, "10")), 0);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_VERSION, SHOAL_CMP_EQUAL, 2)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_VERSION, SHOAL_CMP_EQUAL, 1)), 0);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_VERSION, SHOAL_CMP_GREATER, 1)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_CREATE, SHOAL_CMP_EQUAL, 1)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_CREATE, SHOAL_CMP_NOT_EQUAL, 1)), 0);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_MOD, SHOAL_CMP_EQUAL, 2)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_MOD, SHOAL_CMP_LESS, 2)), 0);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_LEASE, SHOAL_CMP_EQUAL, 0)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("a", SHOAL_CMP_LEASE, SHOAL_CMP_GREATER, 0)), 0);
    //  Seed 000's lock: a key that does not exist has version 0.
    CHECK_INT(s_holds(client, "c1", s_cmp("lock", SHOAL_CMP_VERSION, SHOAL_CMP_EQUAL, 0)), 1);
    CHECK_INT(s_holds(client, "c1", s_cmp("lock", SHOAL_CMP_CREATE, SHOAL_CMP_GREATER, 0)), 0);

    //  The seed's transaction: metadata, handle and lock written together
    //  when the lock is free, once; the second finds it taken and reads it.
    shoal_compare_t free_lock = s_cmp("lock", SHOAL_CMP_VERSION, SHOAL_CMP_EQUAL, 0);
    shoal_op_t writes[] = {
        { .type = SHOAL_OP_PUT, .key = "vms/acme/web/vm1", .value = "{\"state\":\"running\"}", .value_size = 19 },
        { .type = SHOAL_OP_PUT, .key = "handles/acme/web/vm1", .value = "{\"pid\":42}", .value_size = 10 },
        { .type = SHOAL_OP_PUT, .key = "lock", .value = "n1", .value_size = 2 },
        { .type = SHOAL_OP_GET, .key = "", .prefix = true },
    };
    shoal_op_t read_lock = { .type = SHOAL_OP_GET, .key = "lock" };
    shoal_txn_result_t first, second;
    CHECK_INT(shoal_client_claim_txn(client, "c1", &free_lock, 1, writes, 4, &read_lock, 1, &first), 200);
    CHECK_INT(shoal_client_claim_txn(client, "c1", &free_lock, 1, writes, 4, &read_lock, 1, &second), 200);
    //  The get after the puts in the same branch sees them, in key order;
    //  all three puts took one revision.
    CHECK(first.succeeded && first.count == 4 && first.results[3].count == 6);
    if (first.succeeded && first.count == 4 && first.results[3].count == 6) {
        const shoal_key_value_t *kvs = first.results[3].kvs;
        CHECK_STR(kvs[0].key, "a");
        CHECK_STR(kvs[2].key, "handles/acme/web/vm1");
        CHECK_STR(kvs[3].key, "lock");
        CHECK(kvs[2].mod_revision == first.revision && kvs[3].mod_revision == first.revision
              && kvs[5].mod_revision == first.revision && kvs[3].create_revision == first.revision);
    }
    CHECK(!second.succeeded && second.count == 1 && second.results[0].count == 1
          && second.results[0].kvs[0].mod_revision == first.revision);
    //  A transaction that only read took no revision.
    CHECK(second.revision == first.revision);
    CHECK_STR(first.owner, "n1");
    shoal_txn_result_clear(&first);
    shoal_txn_result_clear(&second);

    //  Deletes: one key, then a prefix; a delete of nothing takes no revision.
    uint64_t deleted = 0;
    CHECK_INT(shoal_client_key_delete(client, "c1", "lock", false, &deleted), 200);
    CHECK(deleted == 1);
    CHECK_INT(shoal_client_key_delete(client, "c1", "lock", false, &deleted), 200);
    CHECK(deleted == 0);
    CHECK_INT(shoal_client_key_delete(client, "c1", "vms/", true, &deleted), 200);
    CHECK(deleted == 1);
    shoal_key_value_t *kvs = NULL;
    size_t count = 0;
    CHECK_INT(shoal_client_key_list(client, "c1", "", &kvs, &count), 200);
    CHECK(count == 4 && streq(kvs[0].key, "a") && streq(kvs[1].key, "b") && streq(kvs[2].key, "handles/acme/web/vm1")
          && streq(kvs[3].key, "ran"));
    shoal_key_values_clear(&kvs, count);
    //  A re-created key starts at version 1 with a new create revision.
    uint64_t again = 0;
    CHECK_INT(shoal_client_key_put(client, "c1", "lock", "n2", 2, 0, &again), 200);
    CHECK_INT(shoal_client_key_get(client, "c1", "lock", &kv), 200);
    CHECK(kv.version == 1 && kv.create_revision == again && again > r3);
    shoal_key_value_clear(&kv);

    //  Bad requests are refused whole, naming what was wrong.
    shoal_op_t bad = { .type = 9, .key = "k" };
    CHECK_INT(shoal_client_claim_txn(client, "c1", NULL, 0, &bad, 1, NULL, 0, NULL), SHOAL_E_INVALID);
    //  Keys of a claim this node does not hold: 404.
    CHECK_INT(shoal_client_key_put(client, "nosuch", "k", "v", 1, 0, NULL), 404);

    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

static void
test_tenants_restart_and_release(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(admin, S_OTHER_TENANT, "theirs"), 200);
    CHECK_INT(shoal_client_key_put(admin, "theirs", "k", "secret", 6, 0, NULL), 200);
    //  The key of a tenant is admitted once the node read it: wait for that.
    shoal_client_t *tenant = NULL;
    int own = 0;
    for (int64_t deadline = shoal_test_now_ms() + 15000; own != 200 && shoal_test_now_ms() < deadline;) {
        shoal_client_destroy(&tenant);
        tenant = s_client(&node, mine);
        own = tenant ? s_create(tenant, S_TENANT, "own") : -1;
        if (own != 200)
            usleep(100000);
    }
    CHECK_INT(own, 200);
    //  Another tenant's claim's keys do not exist for this one.
    CHECK_INT(shoal_client_key_put(tenant, "theirs", "k", "mine", 4, 0, NULL), 404);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(tenant, "theirs", "k", &kv), 404);
    //  Its own, by name or by whole id.
    uint64_t revision = 0;
    CHECK_INT(shoal_client_key_put(tenant, "own", "k", "v", 1, 0, &revision), 200);
    CHECK_INT(shoal_client_key_get(tenant, S_TENANT "/own", "k", &kv), 200);
    shoal_key_value_clear(&kv);
    CHECK(revision == 1);
    shoal_client_destroy(&tenant);

    //  Acknowledged writes outlive a kill of the node; revisions go on.
    CHECK_INT(shoal_test_stop(node.pid, SIGKILL), 128 + SIGKILL);
    CHECK(shoal_node_fixture_start(&node, NULL));
    shoal_client_destroy(&admin);
    admin = s_client(&node, node.admin_cert);
    CHECK_INT(shoal_client_key_get(admin, "theirs", "k", &kv), 200);
    CHECK(kv.value_size == 6 && memcmp(kv.value, "secret", 6) == 0 && kv.mod_revision == 1);
    shoal_key_value_clear(&kv);
    CHECK_INT(shoal_client_key_put(admin, "theirs", "k2", "v", 1, 0, &revision), 200);
    CHECK(revision == 2);

    //  A released claim's keys go with it.
    CHECK_INT(shoal_client_claim_release(admin, "theirs", NULL), 200);
    CHECK_INT(shoal_client_key_get(admin, "theirs", "k", &kv), 404);
    shoal_client_destroy(&admin);
    free(mine);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

//  One side of a race: RACER's client runs its transaction when told to go.
typedef struct {
    shoal_client_t *client;
    zsock_t *go;                //  PAIR: "GO" starts a round, the answer is the status
    bool plain;                 //  a plain put, not a compare-and-set
    uint64_t expected;          //  the compare-and-set's mod revision of the key
    const char *value;          //  what it writes
    shoal_txn_result_t result;  //  the last round's answer
    int rc;
} s_racer_t;

static void *
s_racer_run(void *arg)
{
    s_racer_t *racer = (s_racer_t *) arg;
    while (true) {
        char *command = zstr_recv(racer->go);
        bool go = command && streq(command, "GO");
        free(command);
        if (!go)
            break;
        shoal_compare_t compare = s_cmp("k", SHOAL_CMP_MOD, SHOAL_CMP_EQUAL, racer->expected);
        shoal_op_t put = { .type = SHOAL_OP_PUT, .key = "k", .value = racer->value, .value_size = strlen(racer->value) };
        shoal_op_t get = { .type = SHOAL_OP_GET, .key = "k" };
        racer->rc = shoal_client_claim_txn(racer->client, "c1", &compare, racer->plain ? 0 : 1, &put, 1, &get, 1,
                                           &racer->result);
        zstr_send(racer->go, "DONE");
    }
    return NULL;
}

static void
test_races(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, S_TENANT, "c1"), 200);
    uint64_t revision = 0;
    CHECK_INT(shoal_client_key_put(client, "c1", "k", "start", 5, 0, &revision), 200);

    s_racer_t racers[2] = { { .value = "a" }, { .value = "b" } };
    zsock_t *control[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        char bind[64], connect[64];
        snprintf(bind, sizeof bind, "@inproc://racer-%d", i);
        snprintf(connect, sizeof connect, ">inproc://racer-%d", i);
        control[i] = zsock_new_pair(bind);
        racers[i].go = zsock_new_pair(connect);
        racers[i].client = s_client(&node, node.admin_cert);
        pthread_create(&threads[i], NULL, s_racer_run, &racers[i]);
    }
    //  Two compare-and-sets of the same revision: exactly one wins, the
    //  other's failure branch reads the winner's write.
    int a_won = 0, b_won = 0, wrong = 0;
    for (int round = 0; round < S_RACE_ROUNDS; round++) {
        for (int i = 0; i < 2; i++) {
            racers[i].expected = revision;
            racers[i].plain = false;
            zstr_send(control[i], "GO");
        }
        for (int i = 0; i < 2; i++)
            free(zstr_recv(control[i]));
        bool ok = racers[0].rc == 200 && racers[1].rc == 200
               && racers[0].result.succeeded != racers[1].result.succeeded;
        if (ok) {
            s_racer_t *winner = racers[0].result.succeeded ? &racers[0] : &racers[1];
            s_racer_t *loser = racers[0].result.succeeded ? &racers[1] : &racers[0];
            const shoal_key_value_t *seen = &loser->result.results[0].kvs[0];
            ok = winner->result.revision == revision + 1 && seen->mod_revision == winner->result.revision
              && seen->value[0] == winner->value[0];
            revision = winner->result.revision;
            a_won += winner == &racers[0];
            b_won += winner == &racers[1];
        }
        wrong += !ok;
        for (int i = 0; i < 2; i++)
            shoal_txn_result_clear(&racers[i].result);
    }
    CHECK_INT(wrong, 0);
    CHECK_INT(a_won + b_won, S_RACE_ROUNDS);
    //  A compare-and-set racing a plain put: the plain put always writes;
    //  the compare-and-set wins only if it came first, and then the put's
    //  revision follows its own. Never both lost, never a write unseen.
    wrong = 0;
    for (int round = 0; round < S_RACE_ROUNDS; round++) {
        racers[0].expected = revision;
        racers[0].plain = false;
        racers[1].plain = true;
        for (int i = 0; i < 2; i++)
            zstr_send(control[i], "GO");
        for (int i = 0; i < 2; i++)
            free(zstr_recv(control[i]));
        bool ok = racers[0].rc == 200 && racers[1].rc == 200 && racers[1].result.succeeded;
        uint64_t put_revision = racers[1].result.revision;
        if (ok && racers[0].result.succeeded)
            ok = racers[0].result.revision == revision + 1 && put_revision == revision + 2;
        else
        if (ok) {
            const shoal_key_value_t *seen = &racers[0].result.results[0].kvs[0];
            ok = put_revision == revision + 1 && seen->mod_revision == put_revision && seen->value[0] == 'b';
        }
        revision = put_revision;
        wrong += !ok;
        for (int i = 0; i < 2; i++)
            shoal_txn_result_clear(&racers[i].result);
    }
    CHECK_INT(wrong, 0);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(client, "c1", "k", &kv), 200);
    CHECK(kv.mod_revision == revision);
    shoal_key_value_clear(&kv);
    for (int i = 0; i < 2; i++) {
        zstr_send(control[i], "STOP");
        pthread_join(threads[i], NULL);
        zsock_destroy(&control[i]);
        zsock_destroy(&racers[i].go);
        shoal_client_destroy(&racers[i].client);
    }
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

//  Runs shoalctl against NODE with its admin key. Returns the exit code
//  and *OUTPUT_P.
static int
s_ctl(const s_node_t *node, char **output_p, const char *const args[])
{
    char *argv[32] = { (char *) shoal_test_program("shoalctl"), "-e", (char *) node->endpoint, "-c",
                       (char *) node->admin_cert, "-k", (char *) node->cluster_cert };
    int used = 7;
    for (int i = 0; args[i] && used < 31; i++)
        argv[used++] = (char *) args[i];
    argv[used] = NULL;
    return shoal_test_capture(argv, NULL, S_CALL_TIMEOUT_MS, output_p);
}

#define S_CTL(node, output_p, ...) s_ctl(node, output_p, (const char *const[]) { __VA_ARGS__, NULL })

static void
test_shoalctl(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, S_TENANT, "c1"), 200);
    shoal_client_destroy(&client);
    char *put = NULL, *get = NULL, *ls = NULL, *txn = NULL, *lost = NULL, *file_txn = NULL, *del = NULL;
    char *usage = NULL;
    CHECK_INT(S_CTL(&node, &put, "claim", "key", "put", "c1", "vms/vm1", "{\"state\":\"running\"}"), 0);
    CHECK_INT(S_CTL(&node, &get, "claim", "key", "get", "c1", "vms/vm1", "--json"), 0);
    CHECK_INT(S_CTL(&node, &ls, "claim", "key", "ls", "c1", "vms/"), 0);
    //  The seed's compare-and-set: the lock is free, so the branch writes it.
    CHECK_INT(S_CTL(&node, &txn, "claim", "txn", "c1", "--if", "lock version = 0", "--then", "put lock n1",
                    "--then", "put handles/vm1 h", "--else", "get lock", "--json"), 0);
    CHECK_INT(S_CTL(&node, &lost, "claim", "txn", "c1", "--if", "lock version = 0", "--then", "put lock n2",
                    "--else", "get lock"), 0);
    char *path = zsys_sprintf("%s/txn.json", shoal_test_dir);
    FILE *file = fopen(path, "w");
    if (file) {
        fputs("{\"compare\": [{\"key\": \"lock\", \"target\": \"value\", \"result\": \"equal\", "
              "\"value\": \"n1\"}], \"success\": [{\"op\": \"del\", \"key\": \"lock\"}, "
              "{\"op\": \"get\", \"key\": \"\", \"prefix\": true}]}", file);
        fclose(file);
    }
    CHECK_INT(S_CTL(&node, &file_txn, "claim", "txn", "c1", "--file", path, "--json"), 0);
    CHECK_INT(S_CTL(&node, &del, "claim", "key", "del", "c1", "vms/", "--prefix"), 0);
    CHECK_INT(S_CTL(&node, &usage, "claim", "txn", "c1", "--if", "lock sideways = 0"), 2);
    CHECK(put && shoal_test_contains(put, "at revision 1"));
    CHECK(get && shoal_test_contains(get, "\"value\":\"{\\\"state\\\":\\\"running\\\"}\"")
          && shoal_test_contains(get, "\"mod_revision\":1"));
    CHECK(ls && shoal_test_contains(ls, "vms/vm1"));
    CHECK(txn && shoal_test_contains(txn, "\"succeeded\":true") && shoal_test_contains(txn, "\"revision\":2"));
    CHECK(lost && shoal_test_contains(lost, "failed: the failure branch ran") && shoal_test_contains(lost, "n1"));
    CHECK(file_txn && shoal_test_contains(file_txn, "\"succeeded\":true")
          && shoal_test_contains(file_txn, "\"deleted\":1") && !shoal_test_contains(file_txn, "\"lock\""));
    CHECK(del && shoal_test_contains(del, "deleted 1 key(s)"));
    CHECK(usage && shoal_test_contains(usage, "TARGET is value"));
    free(put);
    free(get);
    free(ls);
    free(txn);
    free(lost);
    free(file_txn);
    free(del);
    free(usage);
    free(path);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

int
main(void)
{
    SHOAL_TEST(test_compares_and_branches);
    SHOAL_TEST(test_tenants_restart_and_release);
    SHOAL_TEST(test_races);
    SHOAL_TEST(test_shoalctl);
    return shoal_test_finish();
}
