/*  test_cluster_move_leases: a lease is held by its home, the node that granted
    it, and works from any node a client talks to; a claim that moves takes
    a copy of its leases along, which lives as long as the home keeps the
    lease alive.

    n1 grants two leases; a lock and a key of claim "mover" (on n1) hang on
    the first, a key on the second. A client of n2 reaches both (libshoal
    follows n2's 404 to their home). The claim moves to n2. Kept alive
    through n2 past the time the copy came with, the first lease's lock and
    key stay on n2; left alone, they go, not before the home's time. The
    second, revoked through n2, takes its key on n2 along.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"
#include "shoal_move_check.h"

#include <czmq.h>
#include <unistd.h>

#define S_MB (1024ull * 1024)
#define S_TENANT "acme/web"
#define S_CLAIM "mover"
//  Bounds for a busy machine, not figures.
#define S_WAIT_MS 60000
//  The kept lease: its keepalives go every third of it.
#define S_TTL_MS 6000
#define S_KEEPALIVE_MS (S_TTL_MS / 3)
//  The revoked lease lasts long: only its revoke ends it within the test.
#define S_LONG_TTL_MS 600000

//  Whether node INDEX's lock of the claim is held by "vm-manager"; -1 when
//  it does not answer.
static int
s_locked(shoal_cluster_t *cluster, int index)
{
    shoal_lock_state_t state;
    if (shoal_client_lock_list(shoal_cluster_client(cluster, index), S_CLAIM, &state) != 200)
        return -1;
    int held = streq(state.writer, "vm-manager");
    shoal_lock_state_clear(&state);
    return held;
}

//  The status of KEY of the claim on node INDEX.
static int
s_key_status(shoal_cluster_t *cluster, int index, const char *key)
{
    shoal_key_value_t kv;
    int rc = shoal_client_key_get(shoal_cluster_client(cluster, index), S_CLAIM, key, &kv);
    if (rc == 200)
        shoal_key_value_clear(&kv);
    return rc;
}

typedef struct {
    const char *key;
} s_gone_t;

static bool
s_key_gone(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    s_gone_t *gone = (s_gone_t *) arg;
    int rc = s_key_status(cluster, 2, gone->key);
    snprintf(why, why_size, "n2 answers %d for key %s", rc, gone->key);
    return rc == 404;
}

static void
test_lease_home_and_copies(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_claim_spec_t spec = { .tenant = S_TENANT, .memory_bytes = 8 * S_MB, .id = S_CLAIM };
    CHECK_INT(shoal_client_claim_create(n1, &spec, NULL), 200);

    shoal_lease_t lease;
    CHECK_INT(shoal_client_lease_grant(n1, S_TTL_MS, 0, &lease, NULL), 200);
    uint64_t kept = lease.id;
    CHECK_STR(lease.home, "n1");
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_grant(n1, S_LONG_TTL_MS, 0, &lease, NULL), 200);
    uint64_t revoked = lease.id;
    shoal_lease_clear(&lease);
    shoal_lock_state_t state;
    CHECK_INT(shoal_client_lock_acquire(n1, S_CLAIM, "vm-manager", "write", false, kept, &state), 200);
    CHECK(state.granted);
    shoal_lock_state_clear(&state);
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "handle", "vm-manager", 10, kept, NULL), 200);
    CHECK_INT(shoal_client_key_put(n1, S_CLAIM, "session", "s1", 2, revoked, NULL), 200);

    //  A client of n2 reaches n1's leases: n2 holds neither, the id names
    //  the home.
    shoal_client_t *n2 = shoal_cluster_client_new(cluster, 2);
    shoal_client_set_timeout(n2, 10000);
    CHECK_INT(shoal_client_lease_ttl(n2, kept, &lease), 200);
    CHECK(streq(lease.home, "n1") && lease.attached == 2);
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_keepalive(n2, kept, &lease), 200);
    shoal_lease_clear(&lease);
    CHECK_INT(shoal_client_lease_ttl(n2, 12345, &lease), 404);

    //  The claim moves to n2 with its keys, lock and copies of both leases.
    CHECK_MSG(shoal_move_check_move(cluster, 1, S_CLAIM, 2, 300, S_WAIT_MS) == 0, "%s", shoal_move_check_error());
    CHECK_INT(s_locked(cluster, 2), 1);

    //  Kept alive through n2 (its copy answers 404, libshoal goes to the
    //  home) well past the time the copy came with: the copy asks its home
    //  when its time comes, and lives on.
    CHECK_INT(shoal_client_lease_keepalive(n2, kept, &lease), 200);
    uint64_t copied_ends = lease.expires_ms;
    shoal_lease_clear(&lease);
    int keepalives = 0, lost = 0;
    while ((uint64_t) zclock_time() < copied_ends + 2 * S_TTL_MS) {
        usleep(S_KEEPALIVE_MS * 1000);
        int rc = shoal_client_lease_keepalive(n2, kept, &lease);
        CHECK_MSG(rc == 200, "keepalive through n2: %d %s", rc, shoal_client_error(n2));
        if (rc != 200)
            break;
        CHECK_STR(lease.home, "n1");
        shoal_lease_clear(&lease);
        keepalives++;
        lost += s_locked(cluster, 2) != 1 || s_key_status(cluster, 2, "handle") != 200;
    }
    CHECK_INT(lost, 0);
    CHECK(keepalives >= 3);

    //  Left alone, the lock and the key go on n2, not before the home's
    //  time came.
    CHECK_INT(shoal_client_lease_ttl(n2, kept, &lease), 200);
    uint64_t home_ends = lease.expires_ms;
    shoal_lease_clear(&lease);
    s_gone_t handle = { "handle" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_key_gone, &handle, S_WAIT_MS, "the kept lease's key to go") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK((uint64_t) zclock_time() >= home_ends);
    CHECK_INT(s_locked(cluster, 2), 0);
    CHECK_INT(shoal_client_lease_ttl(n2, kept, &lease), 404);

    //  Revoked through n2: the home ends it and its copy on n2 ends with it.
    CHECK_INT(s_key_status(cluster, 2, "session"), 200);
    CHECK_INT(shoal_client_lease_revoke(n2, revoked), 200);
    s_gone_t session = { "session" };
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_key_gone, &session, S_WAIT_MS, "the revoked lease's key to go") == 0,
              "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_client_lease_ttl(n2, revoked, &lease), 404);
    fprintf(stderr, "  %d keepalives through n2 kept the moved lock\n", keepalives);

    shoal_client_destroy(&n2);
    shoal_client_t *patient = shoal_cluster_client_new(cluster, 2);
    shoal_client_set_timeout(patient, 15000);
    int released = shoal_client_claim_release(patient, S_CLAIM, NULL);
    shoal_client_destroy(&patient);
    CHECK_INT(released, 200);
    shoal_cluster_destroy(&cluster);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); shoal_move_check_cleanup(); } while (0)

int
main(void)
{
    S_TEST(test_lease_home_and_copies);
    return shoal_test_finish();
}
