/*  test_cluster_limits: what one node accepts, its peers receive. A value
    near the frame limit once stalled a dataset's replication for good; now
    it is refused at the put, or replicated, and later writes reach every
    peer either way.
*/
#include "shoal_cluster.h"

#include <czmq.h>

#define S_ALIVE_TIMEOUT_MS 15000
#define S_CONVERGE_TIMEOUT_MS 30000
#define S_MB (1024 * 1024)
//  A little under the frame limit: accepted once, never replicated.
#define S_NEAR_FRAME_VALUE (S_MB - 60)
//  The largest value replicated: a page of one entry.
#define S_LARGE_VALUE (S_MB - 16 * 1024)

//  A value near the frame limit written on n1 either is refused there or
//  reaches n2; a later write of the same dataset reaches n2, and so does
//  the largest value a node accepts.
static void
test_large_values_replicate(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK(shoal_cluster_start(cluster) == 0);
    CHECK_MSG(shoal_cluster_wait_all_alive(cluster, S_ALIVE_TIMEOUT_MS) == 0, "%s", shoal_cluster_error(cluster));
    shoal_client_t *n1 = shoal_cluster_client(cluster, 1);
    shoal_client_t *n2 = shoal_cluster_client(cluster, 2);
    uint8_t *value = calloc(1, S_NEAR_FRAME_VALUE);
    CHECK(value);
    int near = shoal_client_kv_put(n1, "app", "near", value, S_NEAR_FRAME_VALUE, NULL);
    int large = shoal_client_kv_put(n1, "app", "large", value, S_LARGE_VALUE, NULL);
    free(value);
    int later = shoal_client_kv_put(n1, "app", "later", "x", 1, NULL);
    int converged = shoal_cluster_wait_converged(cluster, "app", S_CONVERGE_TIMEOUT_MS);
    const char *why = converged ? shoal_cluster_error(cluster) : "";
    CHECK_MSG(converged == 0, "%s", why);
    shoal_kv_value_t read;
    int later_there = shoal_client_kv_get(n2, "app", "later", &read);
    shoal_kv_value_clear(&read);
    int large_there = shoal_client_kv_get(n2, "app", "large", &read);
    size_t large_size = read.size;
    shoal_kv_value_clear(&read);
    int near_there = shoal_client_kv_get(n2, "app", "near", &read);
    size_t near_size = read.size;
    shoal_kv_value_clear(&read);
    shoal_cluster_destroy(&cluster);
    CHECK_INT(large, 200);
    CHECK_INT(later, 200);
    CHECK_INT(later_there, 200);
    CHECK_INT(large_there, 200);
    CHECK_INT(large_size, S_LARGE_VALUE);
    if (near == 200) {
        CHECK_INT(near_there, 200);
        CHECK_INT(near_size, S_NEAR_FRAME_VALUE);
    }
    else
        CHECK_INT(near_there, 404);
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_large_values_replicate);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
