/*  test_node_leases: leases through a real shoald: grant (shortened and
    said so), keepalive, revoke, expiry taking attached keys along, a
    restart that neither extends nor loses a lease, tenants, and shoalctl's
    keepalive loop. */
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_image.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#define S_MB (1024 * 1024)
#define S_TENANT "acme/web"
#define S_CALL_TIMEOUT_MS 10000
//  The TTL the tests use: long enough for a loaded machine to keep a lease
//  alive a third of it apart, short enough to wait for.
#define S_TTL_MS 1500
//  A bound for a loaded machine to notice an end, not a figure.
#define S_GONE_WAIT_MS 15000
//  The most a lease may end after its time, as the node reports it: one
//  tick, and what a loaded machine adds to it.
#define S_END_LAG_MAX_MS 1000

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
s_create(shoal_client_t *client, const char *id)
{
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = S_MB, .id = id };
    return shoal_client_claim_create(client, &spec, NULL);
}

//  Reads KEY of claim C1 until it is gone or the wait ends. Every read
//  answered before the wall-clock time ENDS_MS must have found the key: a
//  lease never ends early. Returns true once gone, with *EARLY_P counting
//  reads that broke that rule.
static bool
s_wait_gone(shoal_client_t *client, const char *key, uint64_t ends_ms, int *early_p)
{
    *early_p = 0;
    int64_t deadline = shoal_test_now_ms() + S_GONE_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        shoal_key_value_t kv;
        int rc = shoal_client_key_get(client, "c1", key, &kv);
        int64_t answered = zclock_time();
        if (rc == 200)
            shoal_key_value_clear(&kv);
        if (rc == 404 && answered < (int64_t) ends_ms)
            (*early_p)++;
        if (rc == 404)
            return true;
        usleep(10000);
    }
    return false;
}

//  The lag of the last end the node logged for lease ID ("ended N ms after
//  its time"), or -1.
static int64_t
s_end_lag(s_node_t *node, uint64_t id)
{
    char *log = shoal_test_slurp(node->log_path);
    char needle[64];
    snprintf(needle, sizeof needle, "leases: %" PRIu64 " of ", id);
    const char *at = log ? strstr(log, needle) : NULL;
    const char *ended = at ? strstr(at, " ended ") : NULL;
    int64_t lag = ended ? strtoll(ended + 7, NULL, 10) : -1;
    free(log);
    return lag;
}

static void
test_grant_keepalive_and_expiry(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, "c1"), 200);

    //  Asked for more than a node grants: shortened, and said so.
    shoal_lease_t lease;
    bool shortened = false;
    CHECK_INT(shoal_client_lease_grant(client, UINT64_C(36000000), 0, &lease, &shortened), 200);
    CHECK(shortened && lease.ttl_ms == 3600000 && lease.id);
    uint64_t long_one = lease.id;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_grant(client, 10, 0, &lease, &shortened), SHOAL_E_INVALID);

    CHECK_INT(shoal_client_lease_grant(client, S_TTL_MS, 0, &lease, &shortened), 200);
    CHECK(!shortened && lease.ttl_ms == S_TTL_MS && lease.remaining_ms <= S_TTL_MS);
    uint64_t id = lease.id;
    shoal_lease_clear(&lease);
    //  The seed's lock key, held by the lease; a plain key beside it.
    uint64_t revision = 0;
    CHECK_INT(shoal_client_key_put(client, "c1", "lock", "n1", 2, id, &revision), 200);
    CHECK_INT(shoal_client_key_put(client, "c1", "vm", "{}", 2, 0, NULL), 200);
    CHECK_INT(shoal_client_key_put(client, "c1", "other", "x", 1, 424242, NULL), 404);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(client, "c1", "lock", &kv), 200);
    CHECK(kv.lease == id);
    shoal_key_value_clear(&kv);

    //  Kept alive for three TTLs, the key stays.
    int64_t until = shoal_test_now_ms() + 3 * S_TTL_MS;
    int kept = 0, present = 0;
    uint64_t ends_ms = 0;
    while (shoal_test_now_ms() < until) {
        kept += shoal_client_lease_keepalive(client, id, &lease) == 200;
        ends_ms = lease.expires_ms;
        CHECK(lease.attached == 1);
        shoal_lease_clear(&lease);
        present += shoal_client_key_get(client, "c1", "lock", &kv) == 200;
        shoal_key_value_clear(&kv);
        usleep(S_TTL_MS / 3 * 1000);
    }
    CHECK(kept > 0 && kept == present);
    //  Then left alone, it ends, and the lock with it; never early.
    int early = 0;
    CHECK(s_wait_gone(client, "lock", ends_ms, &early));
    CHECK_INT(early, 0);
    int64_t lag = -1;
    for (int64_t deadline = shoal_test_now_ms() + S_GONE_WAIT_MS; lag < 0 && shoal_test_now_ms() < deadline;)
        if ((lag = s_end_lag(&node, id)) < 0)
            usleep(20000);
    fprintf(stderr, "  lease ended %" PRId64 " ms after its time\n", lag);
    CHECK(lag >= 0 && lag <= S_END_LAG_MAX_MS);
    CHECK_INT(shoal_client_lease_keepalive(client, id, &lease), 404);
    CHECK_INT(shoal_client_lease_ttl(client, id, &lease), 404);
    //  The key it held went by a deletion like any other: a new revision.
    uint64_t after = 0;
    CHECK_INT(shoal_client_key_put(client, "c1", "probe", "p", 1, 0, &after), 200);
    CHECK(after == revision + 3);
    CHECK_INT(shoal_client_key_get(client, "c1", "vm", &kv), 200);
    shoal_key_value_clear(&kv);

    //  Revoke removes at once.
    CHECK_INT(shoal_client_key_put(client, "c1", "held", "h", 1, long_one, NULL), 200);
    shoal_lease_t *leases = NULL;
    size_t count = 0;
    CHECK_INT(shoal_client_lease_list(client, &leases, &count), 200);
    CHECK(count == 1 && leases[0].id == long_one && leases[0].attached == 1);
    shoal_leases_clear(&leases, count);
    CHECK_INT(shoal_client_lease_revoke(client, long_one), 200);
    CHECK_INT(shoal_client_key_get(client, "c1", "held", &kv), 404);
    CHECK_INT(shoal_client_lease_revoke(client, long_one), 404);
    CHECK_INT(shoal_client_lease_list(client, &leases, &count), 200);
    CHECK(count == 0);
    shoal_leases_clear(&leases, count);

    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

static void
test_restart_neither_extends_nor_loses(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, "c1"), 200);
    shoal_lease_t lease;
    //  Long enough that the node is back before it ends on any machine.
    uint64_t ttl = 8000;
    CHECK_INT(shoal_client_lease_grant(client, ttl, 0, &lease, NULL), 200);
    uint64_t id = lease.id;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_key_put(client, "c1", "lock", "n1", 2, id, NULL), 200);
    CHECK_INT(shoal_client_lease_keepalive(client, id, &lease), 200);
    uint64_t ends_ms = lease.expires_ms;
    shoal_lease_clear(&lease);
    shoal_client_destroy(&client);

    //  Killed and started again at once.
    CHECK_INT(shoal_test_stop(node.pid, SIGKILL), 128 + SIGKILL);
    CHECK(shoal_node_fixture_start(&node, NULL));
    client = s_client(&node, node.admin_cert);
    //  It ends when the last keepalive said: not later (extended), not
    //  sooner (lost); the key it holds is still there meanwhile.
    int ttl_rc = shoal_client_lease_ttl(client, id, &lease);
    bool back_in_time = zclock_time() < (int64_t) ends_ms;
    CHECK(back_in_time);
    CHECK_INT(ttl_rc, 200);
    CHECK(lease.expires_ms == ends_ms && lease.attached == 1);
    shoal_lease_clear(&lease);
    int early = 0;
    CHECK(s_wait_gone(client, "lock", ends_ms, &early));
    CHECK_INT(early, 0);
    int64_t lag = s_end_lag(&node, id);
    CHECK(lag >= 0 && lag <= S_END_LAG_MAX_MS);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

static void
test_tenant_leases_are_its_own(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    char *mine = shoal_node_fixture_tenant_key(&node, "web", S_TENANT);
    CHECK(mine);
    shoal_client_t *admin = s_client(&node, node.admin_cert);
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(admin, 60000, 0, &lease, NULL), 200);
    uint64_t admins = lease.id;
    shoal_lease_clear(&lease);
    shoal_client_t *tenant = s_client(&node, mine);
    CHECK_INT(shoal_client_lease_grant(tenant, 60000, 0, &lease, NULL), 200);
    uint64_t theirs = lease.id;
    CHECK_STR(lease.tenant, S_TENANT);
    CHECK_STR(lease.holder, "web");
    shoal_lease_clear(&lease);
    CHECK_INT(s_create(tenant, "own"), 200);
    CHECK_INT(shoal_client_lease_ttl(tenant, admins, &lease), 404);
    CHECK_INT(shoal_client_lease_revoke(tenant, admins), 404);
    CHECK_INT(shoal_client_key_put(tenant, "own", "k", "v", 1, admins, NULL), 404);
    CHECK_INT(shoal_client_key_put(tenant, "own", "k", "v", 1, theirs, NULL), 200);
    shoal_lease_t *leases = NULL;
    size_t count = 0;
    CHECK_INT(shoal_client_lease_list(tenant, &leases, &count), 200);
    CHECK(count == 1 && leases[0].id == theirs);
    shoal_leases_clear(&leases, count);
    CHECK_INT(shoal_client_lease_list(admin, &leases, &count), 200);
    CHECK(count == 2);
    shoal_leases_clear(&leases, count);
    shoal_client_destroy(&tenant);
    shoal_client_destroy(&admin);
    free(mine);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

static void
test_shoalctl_keepalive(void)
{
    s_node_t node;
    CHECK(s_node_start(&node));
    shoal_client_t *client = s_client(&node, node.admin_cert);
    CHECK_INT(s_create(client, "c1"), 200);
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(client, S_TTL_MS, 0, &lease, NULL), 200);
    uint64_t id = lease.id;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_key_put(client, "c1", "lock", "n1", 2, id, NULL), 200);
    char number[32];
    snprintf(number, sizeof number, "%" PRIu64, id);
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "-e", node.endpoint, "-c", node.admin_cert,
                     "-k", node.cluster_cert, "lease", "keepalive", number, NULL };
    char *log = zsys_sprintf("%s/keepalive.log", shoal_test_dir);
    pid_t keeper = shoal_test_spawn(argv, NULL, log);
    CHECK(keeper > 0);
    //  Three TTLs on, the lease and its key are there.
    usleep(3 * S_TTL_MS * 1000);
    shoal_key_value_t kv;
    CHECK_INT(shoal_client_key_get(client, "c1", "lock", &kv), 200);
    shoal_key_value_clear(&kv);
    CHECK_INT(shoal_client_lease_ttl(client, id, &lease), 200);
    uint64_t ends_ms = lease.expires_ms;
    shoal_lease_clear(&lease);
    //  Interrupted, it stops, and the lease ends with its key.
    CHECK_INT(shoal_test_stop(keeper, SIGINT), 0);
    int early = 0;
    CHECK(s_wait_gone(client, "lock", ends_ms - S_TTL_MS, &early));
    char *output = shoal_test_slurp(log);
    CHECK(output && shoal_test_contains(output, "kept alive"));
    free(output);
    free(log);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    shoal_node_fixture_guests_kill(&node);
}

int
main(void)
{
    SHOAL_TEST(test_grant_keepalive_and_expiry);
    SHOAL_TEST(test_restart_neither_extends_nor_loses);
    SHOAL_TEST(test_tenant_leases_are_its_own);
    SHOAL_TEST(test_shoalctl_keepalive);
    return shoal_test_finish();
}
