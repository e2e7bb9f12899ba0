/*  test_cluster_claims: claims seen from every node of a mesh. */
#include "shoal_test.h"
#include "shoal_cluster.h"

#include <czmq.h>
#include <unistd.h>

#define S_NODES 3
#define S_WAIT_MS 15000
#define S_MEMORY (1024 * 1024)

//  Polls node INDEX's registry until it names the owner of ID. Returns the
//  lookup's status.
static int
s_lookup_until(shoal_cluster_t *cluster, int index, const char *id, shoal_lookup_t *lookup)
{
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    int rc;
    do {
        rc = shoal_client_lookup(shoal_cluster_client(cluster, index), id, lookup);
        if (rc == 200)
            return rc;
        usleep(50000);
    } while (shoal_test_now_ms() < deadline);
    return rc;
}

static void
test_lookup_and_call_from_any_node(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(S_NODES, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_claim_spec_t spec = { .tenant = "acme/web", .memory_bytes = S_MEMORY, .id = "web-1" };
    shoal_claim_info_t info;
    int created = shoal_client_claim_create(n1, &spec, &info);
    CHECK_MSG(created == 200, "create answered %d: %s", created, shoal_client_error(n1));
    shoal_claim_info_clear(&info);

    //  Every node's registry names n1 as the owner, at epoch 1.
    bool every = true;
    for (int index = 1; index <= S_NODES && every; index++) {
        shoal_lookup_t lookup;
        int rc = s_lookup_until(cluster, index, "web-1", &lookup);
        every = rc == 200 && strcmp(lookup.owner, "n1") == 0 && lookup.epoch == 1
             && strcmp(lookup.endpoint, shoal_cluster_endpoint(cluster, 1)) == 0;
        if (rc == 200)
            shoal_lookup_clear(&lookup);
    }

    //  A client of n2 reaches the guest: n2 answers 404, the client finds n1.
    shoal_client_t *n2 = shoal_cluster_client(cluster, 2);
    int put = shoal_client_claim_put(n2, "web-1", "greeting", "hello", 5);
    char put_error[512];
    snprintf(put_error, sizeof put_error, "%s", shoal_client_error(n2));
    uint8_t *value = NULL;
    size_t size = 0;
    int got = shoal_client_claim_get(shoal_cluster_client(cluster, 3), "web-1", "greeting", &value, &size);
    bool same = got == 200 && size == 5 && memcmp(value, "hello", 5) == 0;
    free(value);
    int shown = shoal_client_claim_show(n2, "web-1", &info);
    bool owner = shown == 200 && strcmp(info.owner, "n1") == 0;
    if (shown == 200)
        shoal_claim_info_clear(&info);
    int missing = shoal_client_claim_show(n2, "web-2", &info);

    //  Released, the guest is gone before the cluster stops.
    int released = shoal_client_claim_release(n1, "web-1", NULL);
    shoal_cluster_destroy(&cluster);
    CHECK(every);
    CHECK_MSG(put == 200, "put through n2 answered %d: %s", put, put_error);
    CHECK(same);
    CHECK(owner);
    CHECK_INT(missing, 404);
    CHECK_INT(released, 200);
}

#define S_TEST(fn) do { SHOAL_TEST(fn); shoal_cluster_destroy_all(); } while (0)

int
main(void)
{
    zsys_init();
    S_TEST(test_lookup_and_call_from_any_node);
    return shoal_test_finish();
}
