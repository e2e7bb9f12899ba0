/*  test_cluster_damage: a node whose store lost replicated writes takes
    them again from its peers, says so, and serves them again.

    n1 writes a dataset that n2 replicates. With n1 stopped, one byte of its
    write-ahead log is flipped. Started with store/salvage, n1 records what
    the damaged records held, takes the dataset again from n2 and serves it
    again: every write it acknowledged reads back from it, and its status
    says where the dataset came back from.
*/
#include "shoal_test.h"
#include "shoal_cluster.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_WRITES 120
#define S_DAMAGED 60
#define S_VALUE_BYTES 3000
#define S_TEXT_MAX 64
#define S_WAIT_MS 60000

static void
s_value(char *value, int i)
{
    memset(value, 'a' + i % 26, S_VALUE_BYTES);
    snprintf(value, S_TEXT_MAX, "value-%03d;", i);
}

//  Flips one byte in the value of write I, in whichever log of DB_DIR holds it.
static int
s_flip(const char *db_dir, int i)
{
    char marker[S_TEXT_MAX];
    snprintf(marker, sizeof marker, "value-%03d;", i);
    return shoal_test_flip_in_log(db_dir, marker, NULL);
}

//  True when node 1 serves every write with its value.
static bool
s_all_served(shoal_cluster_t *cluster, void *arg, char *why, size_t why_size)
{
    (void) arg;
    char value[S_VALUE_BYTES];
    for (int i = 0; i < S_WRITES; i++) {
        char key[S_TEXT_MAX];
        snprintf(key, sizeof key, "k%03d", i);
        s_value(value, i);
        shoal_kv_value_t got;
        int status = shoal_client_kv_get(shoal_cluster_client(cluster, 1), "app", key, &got);
        bool same = status == 200 && got.size == S_VALUE_BYTES && memcmp(got.value, value, S_VALUE_BYTES) == 0;
        if (status == 200)
            shoal_kv_value_clear(&got);
        if (!same) {
            snprintf(why, why_size, "%s answers %d: %s", key, status,
                     shoal_client_error(shoal_cluster_client(cluster, 1)));
            return false;
        }
    }
    return true;
}

static void
test_lost_writes_come_back_from_peers(void)
{
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    CHECK(cluster);
    CHECK_MSG(shoal_cluster_up(cluster, S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    char value[S_VALUE_BYTES];
    for (int i = 0; i < S_WRITES; i++) {
        char key[S_TEXT_MAX];
        snprintf(key, sizeof key, "k%03d", i);
        s_value(value, i);
        CHECK_INT(shoal_client_kv_put(shoal_cluster_client(cluster, 1), "app", key, value, sizeof value, NULL), 200);
    }
    CHECK_MSG(shoal_cluster_wait_converged(cluster, "app", S_WAIT_MS) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_INT(shoal_cluster_node_kill(cluster, 1, SIGTERM), 0);
    char db_dir[4096];
    snprintf(db_dir, sizeof db_dir, "%s/db", shoal_cluster_data_dir(cluster, 1));
    CHECK(s_flip(db_dir, S_DAMAGED) == 0);

    shoal_cluster_node_setenv(cluster, 1, "SHOAL_STORE_SALVAGE", "1");
    CHECK_MSG(shoal_cluster_node_start(cluster, 1) == 0, "%s", shoal_cluster_error(cluster));
    CHECK_MSG(shoal_cluster_wait_until(cluster, s_all_served, NULL, S_WAIT_MS,
                                       "n1 to serve every write again") == 0, "%s", shoal_cluster_error(cluster));
    //  It says what was lost and where it came back from.
    shoal_status_t status;
    CHECK_INT(shoal_client_status(shoal_cluster_client(cluster, 1), &status), 200);
    bool said = false;
    for (size_t i = 0; i < status.damage_count; i++)
        said |= shoal_test_contains(status.damage[i].keys, "\"k060\"")
             && shoal_test_contains(status.damage[i].action, "taken again from n2");
    shoal_status_clear(&status);
    CHECK_MSG(said, "n1's status does not say the lost write came back from n2");
    char *log = shoal_test_slurp(shoal_cluster_log_path(cluster, 1));
    bool logged = shoal_test_contains(log, "dataset 'app' repaired: taken again from n2");
    free(log);
    CHECK_MSG(logged, "n1's log does not say the dataset was repaired");
    shoal_cluster_destroy(&cluster);
}

int
main(void)
{
    SHOAL_TEST(test_lost_writes_come_back_from_peers);
    shoal_cluster_destroy_all();
    return shoal_test_finish();
}
