/*  test_node_mesh: real shoald processes on loopback forming a mesh, with
    real CURVE: joining through a seed, failure detection, rejoining,
    oplog convergence, a duplicate id refused, a wrong cluster key kept out. */
#include "shoal_test.h"
#include "shoal.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_NODES_MAX 5
#define S_START_TIMEOUT_MS 15000
#define S_WAIT_MS 15000
#define S_POLL_MS 50
#define S_ENV_COUNT 12
#define S_ENV_SIZE 4400
#define S_CALL_TIMEOUT_MS 1000

//  One shoald under test.
typedef struct {
    char name[16];              //  its node id
    pid_t pid;                  //  its process, 0 when stopped
    int port;                   //  its loopback port
    char endpoint[64];          //  tcp://127.0.0.1:port
    char data_dir[4200];        //  its store
    char log_path[4200];        //  its output, across restarts
    char env[S_ENV_COUNT][S_ENV_SIZE];  //  its environment
} s_node_t;

//  The keys every node of a test shares.
static char s_cluster_cert[4300];
static char s_admin_cert[4300];
static char s_clients_dir[4300];

static bool
s_keys_make(const char *cluster_dir)
{
    char *error = NULL;
    snprintf(s_cluster_cert, sizeof s_cluster_cert, "%s/cluster.cert", cluster_dir);
    snprintf(s_admin_cert, sizeof s_admin_cert, "%s/admin.cert", shoal_test_dir);
    snprintf(s_clients_dir, sizeof s_clients_dir, "%s/clients", shoal_test_dir);
    zsys_dir_create("%s", s_clients_dir);
    if (shoal_keygen_cluster(s_cluster_cert, &error)
    ||  shoal_keygen_client(s_admin_cert, "admin", "admin", NULL, &error)) {
        fprintf(stderr, "keygen: %s\n", error);
        free(error);
        return false;
    }
    char published[4400];
    snprintf(published, sizeof published, "%s/admin.cert", s_clients_dir);
    zcert_t *cert = zcert_load(s_admin_cert);
    bool ok = cert && zcert_save_public(cert, published) == 0;
    zcert_destroy(&cert);
    return ok;
}

static shoal_client_t *
s_client(const s_node_t *node)
{
    shoal_client_t *client = shoal_client_new(node->endpoint, s_admin_cert, s_cluster_cert, NULL);
    if (client)
        shoal_client_set_timeout(client, S_CALL_TIMEOUT_MS);
    return client;
}

//  Prepares NODE (named NAME) joining through JOIN ("" for none), with
//  CLUSTER_CERT as its cluster key.
static void
s_node_init(s_node_t *node, const char *name, const char *join, const char *cluster_cert)
{
    memset(node, 0, sizeof *node);
    snprintf(node->name, sizeof node->name, "%s", name);
    node->port = shoal_test_free_port();
    snprintf(node->endpoint, sizeof node->endpoint, "tcp://127.0.0.1:%d", node->port);
    snprintf(node->data_dir, sizeof node->data_dir, "%s/%s", shoal_test_dir, name);
    snprintf(node->log_path, sizeof node->log_path, "%s/%s.log", shoal_test_dir, name);
    int i = 0;
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_NODE_ID=%s", name);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_NODE_BIND=%s", node->endpoint);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_NODE_DATA_DIR=%s", node->data_dir);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_SECURITY_CLUSTER_CERT=%s", cluster_cert);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_SECURITY_CLIENTS_DIR=%s", s_clients_dir);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_SECURITY_GENERATE_KEYS=0");
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_MESH_JOIN=%s", join);
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_MESH_PROBE_INTERVAL_MS=100");
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_MESH_PROBE_TIMEOUT_MS=100");
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_MESH_SUSPECT_TIMEOUT_MS=1000");
    snprintf(node->env[i++], S_ENV_SIZE, "SHOAL_MESH_SYNC_INTERVAL_MS=200");
}

//  A hosts file the nodes see as /etc/hosts (in a mount namespace of
//  their own), or "" for the machine's.
static char s_hosts[4300];

//  Starts NODE and waits until it answers status (or exits: false).
static bool
s_node_start(s_node_t *node)
{
    char *env[S_ENV_COUNT + 1] = { 0 };
    for (int i = 0; i < S_ENV_COUNT && node->env[i][0]; i++)
        env[i] = node->env[i];
    char *argv[] = { (char *) shoal_test_program("shoald"), NULL };
    char *script = zsys_sprintf("mount --bind '%s' /etc/hosts && exec '%s'", s_hosts, argv[0]);
    char *wrapped[] = { "/usr/bin/unshare", "--mount", "/bin/sh", "-c", script, NULL };
    node->pid = shoal_test_spawn(*s_hosts ? wrapped : argv, env, node->log_path);
    free(script);
    int64_t deadline = shoal_test_now_ms() + S_START_TIMEOUT_MS;
    while (node->pid > 0 && shoal_test_now_ms() < deadline) {
        if (shoal_test_wait(node->pid, 0) != -1) {
            node->pid = 0;
            return false;
        }
        shoal_client_t *client = s_client(node);
        shoal_status_t status;
        int rc = client ? shoal_client_status(client, &status) : -1;
        if (rc == 200)
            shoal_status_clear(&status);
        shoal_client_destroy(&client);
        if (rc == 200)
            return true;
        usleep(S_POLL_MS * 1000);
    }
    return false;
}

static int
s_node_stop(s_node_t *node, int signal)
{
    int code = node->pid > 0 ? shoal_test_stop(node->pid, signal) : 0;
    node->pid = 0;
    return code;
}

//  The state NODE has for PEER ("alive", ...), or "" when it does not know it.
static void
s_peer_state(const s_node_t *node, const char *peer, char *state, size_t size)
{
    state[0] = 0;
    shoal_client_t *client = s_client(node);
    shoal_peer_list_t peers;
    if (client && shoal_client_peers(client, &peers) == 200) {
        for (size_t i = 0; i < peers.count; i++)
            if (streq(peers.peers[i].node_id, peer))
                snprintf(state, size, "%s", peers.peers[i].state);
        shoal_peer_list_clear(&peers);
    }
    shoal_client_destroy(&client);
}

//  Waits until NODE sees PEER in STATE.
static bool
s_wait_state(const s_node_t *node, const char *peer, const char *wanted)
{
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    char state[32];
    while (shoal_test_now_ms() < deadline) {
        s_peer_state(node, peer, state, sizeof state);
        if (streq(state, wanted))
            return true;
        usleep(S_POLL_MS * 1000);
    }
    fprintf(stderr, "%s sees %s as '%s', not '%s'\n", node->name, peer, state, wanted);
    return false;
}

//  Every node's heads of DATASET as one string, or NULL.
static char *
s_heads_text(const s_node_t *node, const char *dataset)
{
    shoal_client_t *client = s_client(node);
    shoal_head_list_t heads;
    char *text = NULL;
    if (client && shoal_client_oplog_heads(client, dataset, &heads) == 200) {
        text = shoal_strdup("");
        for (size_t i = 0; i < heads.count; i++) {
            char *longer = zsys_sprintf("%s%s=%s;", text, heads.heads[i].node, heads.heads[i].hash);
            free(text);
            text = longer;
        }
        shoal_head_list_clear(&heads);
    }
    shoal_client_destroy(&client);
    return text;
}

//  Waits until NODES (COUNT) hold identical heads of DATASET naming WRITERS origins.
static bool
s_wait_converged(s_node_t *nodes, size_t count, const char *dataset, size_t writers)
{
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (shoal_test_now_ms() < deadline) {
        char *first = s_heads_text(&nodes[0], dataset);
        bool same = first != NULL;
        size_t origins = 0;
        for (const char *c = first; c && *c; c++)
            origins += *c == ';';
        for (size_t i = 1; i < count && same; i++) {
            char *other = s_heads_text(&nodes[i], dataset);
            same = other && streq(other, first);
            free(other);
        }
        free(first);
        if (same && origins == writers)
            return true;
        usleep(S_POLL_MS * 1000);
    }
    return false;
}

static bool
s_put(const s_node_t *node, const char *dataset, const char *key, const char *value)
{
    shoal_client_t *client = s_client(node);
    int rc = client ? shoal_client_kv_put(client, dataset, key, value, strlen(value), NULL) : -1;
    shoal_client_destroy(&client);
    return rc == 200;
}

static bool
s_log_has(const s_node_t *node, const char *text)
{
    char *log = shoal_test_slurp(node->log_path);
    bool has = shoal_test_contains(log, text);
    free(log);
    return has;
}

static void
s_stop_all(s_node_t *nodes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        s_node_stop(&nodes[i], SIGTERM);
}

//  A join name that resolves to several addresses (a Compose service's
//  name: one per replica) is joined at every one of them, never at the
//  node's own: three nodes started one after the other, each given only
//  the name, form one mesh. The name lives in a hosts file the nodes see
//  in a mount namespace of their own (root only).
static void
test_join_name_with_several_addresses(void)
{
    if (geteuid() != 0 || access("/usr/bin/unshare", X_OK) != 0) {
        printf("    (needs root and unshare for a hosts file of its own: not run)\n");
        return;
    }
    CHECK(s_keys_make(shoal_test_dir));
    int port = shoal_test_free_port();
    snprintf(s_hosts, sizeof s_hosts, "%s/hosts", shoal_test_dir);
    FILE *file = fopen(s_hosts, "w");
    CHECK(file != NULL);
    fprintf(file, "127.0.0.1 localhost\n");
    for (int i = 0; i < 3; i++)
        fprintf(file, "127.0.0.%d seeds.test\n", i + 2);
    fclose(file);
    char join[64];
    snprintf(join, sizeof join, "tcp://seeds.test:%d", port);
    s_node_t nodes[3];
    bool started = true;
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i + 1);
        s_node_init(&nodes[i], name, join, s_cluster_cert);
        snprintf(nodes[i].endpoint, sizeof nodes[i].endpoint, "tcp://127.0.0.%d:%d", i + 2, port);
        snprintf(nodes[i].env[1], S_ENV_SIZE, "SHOAL_NODE_BIND=%s", nodes[i].endpoint);
        started = started && s_node_start(&nodes[i]);
    }
    bool all_alive = started;
    for (size_t i = 0; i < 3 && all_alive; i++)
        for (size_t j = 0; j < 3 && all_alive; j++)
            if (i != j)
                all_alive = s_wait_state(&nodes[i], nodes[j].name, "alive");
    bool none_refused = true;
    for (size_t i = 0; i < 3; i++)
        none_refused = none_refused && !s_log_has(&nodes[i], "refused");
    int codes[3];
    for (size_t i = 0; i < 3; i++)
        codes[i] = s_node_stop(&nodes[i], SIGTERM);
    s_hosts[0] = 0;
    CHECK(started);
    CHECK(all_alive);
    CHECK(none_refused);
    for (size_t i = 0; i < 3; i++)
        CHECK_INT(codes[i], 0);
}

static void
test_three_nodes_join_through_one_seed(void)
{
    CHECK(s_keys_make(shoal_test_dir));
    s_node_t nodes[3];
    s_node_init(&nodes[0], "n1", "", s_cluster_cert);
    CHECK(s_node_start(&nodes[0]));
    s_node_init(&nodes[1], "n2", nodes[0].endpoint, s_cluster_cert);
    s_node_init(&nodes[2], "n3", nodes[0].endpoint, s_cluster_cert);
    bool started = s_node_start(&nodes[1]) && s_node_start(&nodes[2]);
    //  n2 and n3 only ever named n1: they learn of each other by gossip.
    bool all_alive = started;
    for (size_t i = 0; i < 3 && all_alive; i++)
        for (size_t j = 0; j < 3 && all_alive; j++)
            if (i != j)
                all_alive = s_wait_state(&nodes[i], nodes[j].name, "alive");
    shoal_client_t *client = s_client(&nodes[1]);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    uint64_t peers = rc == 200 ? status.peers : 0;
    if (rc == 200)
        shoal_status_clear(&status);
    shoal_client_destroy(&client);

    char *output = NULL;
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "--endpoint", nodes[2].endpoint, "--cert",
                     s_admin_cert, "--cluster-key", s_cluster_cert, "--json", "peers", NULL };
    int code = shoal_test_capture(argv, NULL, 20000, &output);
    bool listed = code == 0 && shoal_test_contains(output, "\"node_id\":\"n1\"")
               && shoal_test_contains(output, "\"state\":\"alive\"") && shoal_test_contains(output, "\"self\":true");
    free(output);
    bool joined_logged = s_log_has(&nodes[0], "mesh: node n2 (") && s_log_has(&nodes[0], ") joined");
    int codes[3];
    for (size_t i = 0; i < 3; i++)
        codes[i] = s_node_stop(&nodes[i], SIGTERM);
    CHECK(started);
    CHECK(all_alive);
    CHECK_INT(peers, 2);
    CHECK(listed);
    CHECK(joined_logged);
    //  A clean stop says so: the last one stopped saw the others leave.
    CHECK(s_log_has(&nodes[2], "mesh: node n1 (") && s_log_has(&nodes[2], ") left"));
    for (size_t i = 0; i < 3; i++)
        CHECK_INT(codes[i], 0);
}

static void
test_writes_converge_and_a_dead_node_catches_up(void)
{
    CHECK(s_keys_make(shoal_test_dir));
    s_node_t nodes[3];
    s_node_init(&nodes[0], "n1", "", s_cluster_cert);
    CHECK(s_node_start(&nodes[0]));
    s_node_init(&nodes[1], "n2", nodes[0].endpoint, s_cluster_cert);
    s_node_init(&nodes[2], "n3", nodes[0].endpoint, s_cluster_cert);
    bool ok = s_node_start(&nodes[1]) && s_node_start(&nodes[2])
           && s_wait_state(&nodes[1], "n3", "alive") && s_wait_state(&nodes[2], "n2", "alive");
    if (!ok) {
        s_stop_all(nodes, 3);
        CHECK(ok);
    }
    //  Writes on every node end up everywhere, with identical heads.
    bool written = s_put(&nodes[0], "app", "a", "1") && s_put(&nodes[1], "app", "b", "2")
                && s_put(&nodes[2], "app", "c", "3");
    bool converged = written && s_wait_converged(nodes, 3, "app", 3);

    //  kill -9: suspect, then dead.
    s_node_stop(&nodes[2], SIGKILL);
    bool suspect = s_wait_state(&nodes[0], "n3", "dead") && s_log_has(&nodes[0], "mesh: node n3 (")
                && s_log_has(&nodes[0], ") suspect") && s_log_has(&nodes[0], ") dead");
    //  Writes it misses while down reach it when it comes back.
    bool missed = s_put(&nodes[0], "app", "d", "4") && s_put(&nodes[1], "app", "e", "5");
    bool back = s_node_start(&nodes[2]) && s_wait_state(&nodes[0], "n3", "alive");
    bool rejoined = back && s_log_has(&nodes[0], ") rejoined");
    bool caught_up = back && s_wait_converged(nodes, 3, "app", 3);
    s_stop_all(nodes, 3);
    CHECK(written);
    CHECK(converged);
    CHECK(suspect);
    CHECK(missed);
    CHECK(back);
    CHECK(rejoined);
    CHECK(caught_up);
}

static void
test_duplicate_id_refused(void)
{
    CHECK(s_keys_make(shoal_test_dir));
    s_node_t seed, first, impostor;
    s_node_init(&seed, "n1", "", s_cluster_cert);
    CHECK(s_node_start(&seed));
    s_node_init(&first, "n2", seed.endpoint, s_cluster_cert);
    bool ok = s_node_start(&first) && s_wait_state(&seed, "n2", "alive");
    s_node_init(&impostor, "n2", seed.endpoint, s_cluster_cert);
    snprintf(impostor.data_dir, sizeof impostor.data_dir, "%s/n2-again", shoal_test_dir);
    snprintf(impostor.env[2], S_ENV_SIZE, "SHOAL_NODE_DATA_DIR=%s", impostor.data_dir);
    snprintf(impostor.log_path, sizeof impostor.log_path, "%s/n2-again.log", shoal_test_dir);
    char *env[S_ENV_COUNT + 1] = { 0 };
    for (int i = 0; i < S_ENV_COUNT && impostor.env[i][0]; i++)
        env[i] = impostor.env[i];
    char *argv[] = { (char *) shoal_test_program("shoald"), NULL };
    char *output = NULL;
    int code = shoal_test_capture(argv, env, S_WAIT_MS, &output);
    bool said = shoal_test_contains(output, "node id n2 is already alive at");
    bool seed_said = s_log_has(&seed, "refused node n2");
    char state[32];
    s_peer_state(&seed, "n2", state, sizeof state);
    free(output);
    int seed_code = s_node_stop(&seed, SIGTERM);
    int first_code = s_node_stop(&first, SIGTERM);
    CHECK(ok);
    CHECK_INT(code, 1);
    CHECK(said);
    CHECK(seed_said);
    CHECK_STR(state, "alive");
    CHECK_INT(seed_code, 0);
    CHECK_INT(first_code, 0);
}

static void
test_wrong_cluster_key_never_joins(void)
{
    CHECK(s_keys_make(shoal_test_dir));
    char other_dir[4300], other_cert[4400];
    snprintf(other_dir, sizeof other_dir, "%s/other", shoal_test_dir);
    snprintf(other_cert, sizeof other_cert, "%s/cluster.cert", other_dir);
    char *error = NULL;
    CHECK(shoal_keygen_cluster(other_cert, &error) == 0);
    s_node_t seed, stranger;
    s_node_init(&seed, "n1", "", s_cluster_cert);
    CHECK(s_node_start(&seed));
    s_node_init(&stranger, "n9", seed.endpoint, other_cert);
    //  It serves (to clients of its own cluster key), but never gets in.
    char *env[S_ENV_COUNT + 1] = { 0 };
    for (int i = 0; i < S_ENV_COUNT && stranger.env[i][0]; i++)
        env[i] = stranger.env[i];
    char *argv[] = { (char *) shoal_test_program("shoald"), NULL };
    stranger.pid = shoal_test_spawn(argv, env, stranger.log_path);
    usleep(2000 * 1000);
    char state[32];
    s_peer_state(&seed, "n9", state, sizeof state);
    bool running = shoal_test_wait(stranger.pid, 0) == -1;
    int stranger_code = s_node_stop(&stranger, SIGTERM);
    int seed_code = s_node_stop(&seed, SIGTERM);
    CHECK_STR(state, "");
    CHECK(running);
    CHECK_INT(stranger_code, 0);
    CHECK_INT(seed_code, 0);
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_three_nodes_join_through_one_seed);
    SHOAL_TEST(test_join_name_with_several_addresses);
    SHOAL_TEST(test_writes_converge_and_a_dead_node_catches_up);
    SHOAL_TEST(test_duplicate_id_refused);
    SHOAL_TEST(test_wrong_cluster_key_never_joins);
    return shoal_test_finish();
}
