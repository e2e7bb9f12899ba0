/*  test_cluster_leases: a client's lease from any node holds keys and locks
    of any node's claims. n1 grants the leases; claim "remote" lives on n2.
    A key put and a lock taken with n1's lease on n2's claim are granted
    (n2 takes a copy of the lease from its home, n1), and follow its end:
    revoked on n1, they go on n2; kept alive through n1 past the time the
    copy came with, they stay; left alone, they go, not before the home's
    time. A lease no node holds is refused on n2's claim (404). A lease
    whose id the client chose (no node's mark in it) is found from any
    node, and holds keys of another node's claims too.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"

#include <czmq.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_CLAIM "remote"
//  Bounds for a busy machine, not figures.
#define S_WAIT_MS 60000
//  The kept lease: its keepalives go every third of it.
#define S_TTL_MS 4000
#define S_KEEPALIVE_MS (S_TTL_MS / 3)
//  The revoked lease lasts long: only its revoke ends it within the test.
#define S_LONG_TTL_MS 600000

//  The status of KEY of the claim, read through node INDEX.
static int
s_key_status(shoal_cluster_t *cluster, int index, const char *key)
{
    shoal_key_value_t kv;
    int rc = shoal_client_key_get(shoal_cluster_client(cluster, index), S_CLAIM, key, &kv);
    if (rc == 200)
        shoal_key_value_clear(&kv);
    return rc;
}

//  Whether HOLDER holds a lock of the claim on n2; -1 when n2 does not answer.
static int
s_locked(shoal_cluster_t *cluster, const char *holder)
{
    shoal_lock_state_t state;
    if (shoal_client_lock_list(shoal_cluster_client(cluster, 2), S_CLAIM, &state) != 200)
        return -1;
    int held = 0;
    for (size_t i = 0; i < state.count; i++)
        held += streq(state.records[i].holder, holder);
    shoal_lock_state_clear(&state);
    return held;
}

typedef struct {
    const char *key;            //  the key that must go
    const char *holder;         //  the lock holder that must go
} s_gone_t;

static bool
s_gone(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_gone_t *gone = (s_gone_t *) arg;
    int key = s_key_status(cluster, 2, gone->key);
    int locked = s_locked(cluster, gone->holder);
    snprintf(why, why_size, "n2 answers %d for key %s, %s holds %d lock(s)", key, gone->key, gone->holder, locked);
    return key == 404 && locked == 0;
}

static bool
s_gone_on_n1(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_gone_t *gone = (s_gone_t *) arg;
    int key = s_key_status(cluster, 1, gone->key);
    snprintf(why, why_size, "n1 answers %d for key %s", key, gone->key);
    return key == 404;
}

static void
test_lease_of_another_node(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_t *n2 = shoal_cluster_client(cluster, 2);
    shoal_client_set_timeout(n1, 10000);
    shoal_client_set_timeout(n2, 10000);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 8 * S_MB, .id = S_CLAIM };
    CHECK_INT(shoal_client_claim_create(n2, &spec, NULL), 200);

    //  Revoked on its home: what hangs on it on n2 goes.
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(n1, S_LONG_TTL_MS, 0, &lease, NULL), 200);
    uint64_t revoked = lease.id;
    CHECK_STR(lease.home, "n1");
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_key_put(n2, S_CLAIM, "session", "s1", 2, revoked, NULL), 200);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(n2, S_CLAIM, "vm-manager", "write", false, revoked, &state), 200);
    CHECK(state.granted);
    shoal_lock_state_clear(&state);
    //  n2 keeps a copy: asked there, it names n1 as the home (libshoal
    //  follows to it), and n1 counts nothing attached (the key and the lock
    //  are n2's).
    CHECK_INT(shoal_client_lease_ttl(n2, revoked, &lease), 200);
    CHECK_STR(lease.home, "n1");
    shoal_lease_clear(&lease);
    CHECK_INT(s_key_status(cluster, 2, "session"), 200);
    CHECK_INT(s_locked(cluster, "vm-manager"), 1);
    CHECK_INT(shoal_client_lease_revoke(n1, revoked), 200);
    s_gone_t session = { "session", "vm-manager" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_gone, &session, S_WAIT_MS, "the revoked lease's key and lock "
                                       "to go on n2") == 0, "%s", shoal_cluster_error(cluster));

    //  A lease no node holds: refused on n2's claim, its home asked once.
    CHECK_INT(shoal_client_lease_grant(n1, S_LONG_TTL_MS, 0, &lease, NULL), 200);
    uint64_t ended = lease.id;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_revoke(n1, ended), 200);
    CHECK_INT(shoal_client_key_put(n2, S_CLAIM, "stale", "x", 1, ended, NULL), 404);
    CHECK_INT(shoal_client_lock_acquire(n2, S_CLAIM, "stale-holder", "read", false, ended, NULL), 404);
    CHECK_INT(s_key_status(cluster, 2, "stale"), 404);

    //  Kept alive on its home past the time the copy came with: the copy
    //  asks the home when its time comes, and the key and lock stay.
    CHECK_INT(shoal_client_lease_grant(n1, S_TTL_MS, 0, &lease, NULL), 200);
    uint64_t kept = lease.id;
    uint64_t first_ends = lease.expires_ms;
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_key_put(n2, S_CLAIM, "handle", "vm-manager", 10, kept, NULL), 200);
    CHECK_INT(shoal_client_lock_acquire(n2, S_CLAIM, "reader", "read", false, kept, &state), 200);
    CHECK(state.granted);
    shoal_lock_state_clear(&state);
    int keepalives = 0, lost = 0;
    uint64_t home_ends = first_ends;
    while ((uint64_t) zclock_time() < first_ends + 2 * S_TTL_MS) {
        usleep(S_KEEPALIVE_MS * 1000);
        int rc = shoal_client_lease_keepalive(n1, kept, &lease);
        CHECK_MSG(rc == 200, "keepalive on n1: %d %s", rc, shoal_client_error(n1));
        if (rc != 200)
            break;
        home_ends = lease.expires_ms;
        shoal_lease_clear(&lease);
        keepalives++;
        lost += s_key_status(cluster, 2, "handle") != 200 || s_locked(cluster, "reader") != 1;
    }
    CHECK_INT(lost, 0);
    CHECK(keepalives >= 3);

    //  Left alone: the key and the lock go on n2, not before the home's time.
    s_gone_t handle = { "handle", "reader" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_gone, &handle, S_WAIT_MS, "the kept lease's key and lock to go "
                                       "on n2") == 0, "%s", shoal_cluster_error(cluster));
    uint64_t gone_at = (uint64_t) zclock_time();
    CHECK(gone_at >= home_ends);
    fprintf(stderr, "  %d keepalives on n1 kept n2's key and lock; gone on n2 %" PRIu64 " ms after the home's "
            "time (TTL %d ms)\n", keepalives, gone_at - home_ends, S_TTL_MS);
    CHECK_INT(shoal_client_lease_ttl(n1, kept, &lease), 404);

    int released = shoal_client_claim_release(n2, S_CLAIM, NULL);
    CHECK_INT(released, 200);
    shoal_cluster_destroy(&cluster);
}

//  Ids a client picks: small numbers, whose top bits mark no node.
#define S_CHOSEN_ID 4242
#define S_UNKNOWN_ID 4343

static void
test_client_chosen_id(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(3, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_t *n3 = shoal_cluster_client(cluster, 3);
    shoal_client_set_timeout(n1, 10000);
    shoal_client_set_timeout(n3, 10000);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 8 * S_MB, .id = S_CLAIM };
    CHECK_INT(shoal_client_claim_create(n1, &spec, NULL), 200);

    //  Granted on n3 with the client's id: n1 finds its home by asking.
    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(n3, S_LONG_TTL_MS, S_CHOSEN_ID, &lease, NULL), 200);
    CHECK(lease.id == S_CHOSEN_ID);
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_grant(n3, S_LONG_TTL_MS, S_CHOSEN_ID, &lease, NULL), 409);
    CHECK_INT(shoal_client_lease_grant(n3, S_LONG_TTL_MS, UINT64_MAX, &lease, NULL), 400);
    CHECK_INT(shoal_client_lease_ttl(n1, S_CHOSEN_ID, &lease), 200);
    CHECK_STR(lease.home, "n3");
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_keepalive(n1, S_CHOSEN_ID, &lease), 200);
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_ttl(n1, S_UNKNOWN_ID, &lease), 404);
    //  shoalctl grants one with a chosen id too, and finds it from n1.
    char *output = NULL;
    CHECK_INT(shoal_cluster_ctl(cluster, 3, &output, "lease", "grant", "600000", "4545", NULL), 0);
    CHECK_MSG(output && strstr(output, "lease 4545 granted"), "%s", output ? output : "(none)");
    free(output);
    output = NULL;
    CHECK_INT(shoal_cluster_ctl(cluster, 1, &output, "lease", "ttl", "4545", NULL), 0);
    CHECK_MSG(output && strstr(output, "(home n3)"), "%s", output ? output : "(none)");
    free(output);

    //  It holds a key of n1's claim: n1 takes a copy from n3, and the key
    //  goes when n3 revokes it.
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "chosen", "c", 1, S_CHOSEN_ID, NULL), 200);
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "unknown", "u", 1, S_UNKNOWN_ID, NULL), 404);
    CHECK_INT(shoal_client_lease_revoke(n1, S_CHOSEN_ID), 200);
    s_gone_t chosen = { "chosen", "nobody" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_gone_on_n1, &chosen, S_WAIT_MS, "the chosen lease's key to go "
                                       "on n1") == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_client_lease_ttl(n1, S_CHOSEN_ID, &lease), 404);
    CHECK_INT(shoal_client_claim_release(n1, S_CLAIM, NULL), 200);
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    SHOAL_TEST(test_lease_of_another_node);
    shoal_cluster_destroy_all();
    SHOAL_TEST(test_client_chosen_id);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
