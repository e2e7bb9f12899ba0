/*  test_node_damage: a node whose store lost acknowledged writes says so.

    One byte of the store's write-ahead log is flipped while the node is
    stopped. The node must not start as if nothing happened: it exits with
    code 3 and a message naming the log file, the byte offset and the keys
    of the damaged record. Started with --salvage it serves every write the
    log still holds and names, in its log, what it dropped.
*/
#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#include "shoal_node_fixture.h"
#include "shoal_test.h"

#define S_CALL_TIMEOUT_MS 5000
#define S_WRITES 120
#define S_DAMAGED 60
//  Large values, so that a log block holds a few writes only.
#define S_VALUE_BYTES 3000
#define S_TEXT_MAX 64
#define S_EXIT_DAMAGED 3
#define S_EXIT_TIMEOUT_MS 30000
#define S_START_TIMEOUT_MS 30000

static void
s_value(char *value, int i)
{
    memset(value, 'a' + i % 26, S_VALUE_BYTES);
    snprintf(value, S_TEXT_MAX, "value-%03d;", i);
}

//  Flips one byte in the value of write I, in whichever log of DB_DIR holds
//  it. Returns 0 with *FILE_P the log's name (caller frees), or -1.
static int
s_flip(const char *db_dir, int i, char **file_p)
{
    char marker[S_TEXT_MAX];
    snprintf(marker, sizeof marker, "value-%03d;", i);
    return shoal_test_flip_in_log(db_dir, marker, file_p);
}

static void
test_damaged_log_stops_the_node(void)
{
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, "n1", 0);
    CHECK(shoal_node_fixture_start(&node, NULL));
    shoal_client_t *client = shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS);
    CHECK(client);
    char value[S_VALUE_BYTES];
    for (int i = 0; i < S_WRITES; i++) {
        char key[S_TEXT_MAX];
        snprintf(key, sizeof key, "k%03d", i);
        s_value(value, i);
        CHECK_INT(shoal_client_kv_put(client, "app", key, value, sizeof value, NULL), 200);
    }
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);

    char db_dir[SHOAL_FIXTURE_PATH_MAX];
    snprintf(db_dir, sizeof db_dir, "%s/db", node.data_dir);
    char *file = NULL;
    CHECK(s_flip(db_dir, S_DAMAGED, &file) == 0);

    char env_bind[SHOAL_FIXTURE_PATH_MAX], env_dir[SHOAL_FIXTURE_PATH_MAX], env_id[SHOAL_FIXTURE_PATH_MAX];
    snprintf(env_bind, sizeof env_bind, "SHOAL_NODE_BIND=%s", node.endpoint);
    snprintf(env_dir, sizeof env_dir, "SHOAL_NODE_DATA_DIR=%s", node.data_dir);
    snprintf(env_id, sizeof env_id, "SHOAL_NODE_ID=%s", node.name);
    char *env[] = { env_bind, env_dir, env_id, NULL };
    //  Started as before: it refuses, naming the damage.
    char *plain[] = { (char *) shoal_test_program("shoald"), NULL };
    node.pid = shoal_test_spawn(plain, env, node.log_path);
    CHECK(node.pid > 0);
    int code = shoal_test_wait(node.pid, S_EXIT_TIMEOUT_MS);
    if (code == -1)
        shoal_test_stop(node.pid, SIGKILL);
    CHECK_MSG(code != -1, "the node serves a store whose log lost write %d", S_DAMAGED);
    CHECK_INT(code, S_EXIT_DAMAGED);
    char *log = shoal_test_slurp(node.log_path);
    char *place = zsys_sprintf("%s at byte ", file);
    bool named = shoal_test_contains(log, "the store is damaged") && shoal_test_contains(log, place)
              && shoal_test_contains(log, "\"k060\"");
    free(place);
    free(log);
    CHECK_MSG(named, "the node's log does not name the damaged file, byte and key (%s)", node.log_path);

    //  With --salvage it serves what is intact and names what it dropped.
    char *argv[] = { (char *) shoal_test_program("shoald"), "--salvage", NULL };
    node.pid = shoal_test_spawn(argv, env, node.log_path);
    CHECK(node.pid > 0);
    client = shoal_node_fixture_client(&node, node.admin_cert, S_CALL_TIMEOUT_MS);
    CHECK(client);
    //  The dataset that lost writes is refused, naming the damage.
    int64_t deadline = shoal_test_now_ms() + S_START_TIMEOUT_MS;
    shoal_kv_value_t got;
    int status = 0;
    while ((status = shoal_client_kv_get(client, "app", "k119", &got)) != 503
       &&  shoal_test_now_ms() < deadline)
        usleep(100000);
    if (status == 200)
        shoal_kv_value_clear(&got);
    CHECK_INT(status, 503);
    CHECK_MSG(shoal_test_contains(shoal_client_error(client), "damaged")
              && shoal_test_contains(shoal_client_error(client), file), "%s", shoal_client_error(client));
    //  status names what was lost, with its file and key, until forgotten.
    shoal_status_t node_status;
    CHECK_INT(shoal_client_status(client, &node_status), 200);
    bool listed = false;
    char forget_id[256] = "";
    for (size_t i = 0; i < node_status.damage_count; i++)
        if (streq(node_status.damage[i].kind, "log") && shoal_test_contains(node_status.damage[i].what, file)
        &&  shoal_test_contains(node_status.damage[i].keys, "\"k060\"")) {
            listed = true;
            snprintf(forget_id, sizeof forget_id, "%s", node_status.damage[i].id);
        }
    size_t accounts = node_status.damage_count;
    shoal_status_clear(&node_status);
    CHECK_MSG(listed, "status does not list the lost write as damage");
    CHECK_INT(shoal_client_damage_forget(client, forget_id), 200);
    CHECK_INT(shoal_client_status(client, &node_status), 200);
    CHECK_INT(node_status.damage_count, accounts - 1);
    shoal_status_clear(&node_status);
    //  Every account forgotten, the dataset is served again: every write the
    //  log still held reads back.
    for (size_t i = 1; i < accounts; i++) {
        CHECK_INT(shoal_client_status(client, &node_status), 200);
        char next[256];
        snprintf(next, sizeof next, "%s", node_status.damage_count ? node_status.damage[0].id : "");
        shoal_status_clear(&node_status);
        CHECK_INT(shoal_client_damage_forget(client, next), 200);
    }
    status = shoal_client_kv_get(client, "app", "k119", &got);
    if (status == 200)
        shoal_kv_value_clear(&got);
    CHECK_INT(status, 200);
    status = shoal_client_kv_get(client, "app", "k000", &got);
    if (status == 200)
        shoal_kv_value_clear(&got);
    CHECK_INT(status, 200);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    log = shoal_test_slurp(node.log_path);
    bool salvaged = shoal_test_contains(log, "salvage: the store lost") && shoal_test_contains(log, file);
    free(log);
    free(file);
    CHECK_MSG(salvaged, "the salvaged node does not say what it dropped");
}

int
main(void)
{
    if (shoal_test_find_programs())
        return 1;
    SHOAL_TEST(test_damaged_log_stops_the_node);
    return shoal_test_finish();
}
