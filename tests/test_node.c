/*  test_node: a real shoald on a loopback port, reached as users reach it. */
#include "shoal_test.h"
#include "shoal_node_fixture.h"
#include "shoal_proto.h"

#include <czmq.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_GARBAGE_MESSAGES 1000

typedef shoal_node_fixture_t s_node_t;

//  Starts shoald as node NAME on a free port, with one more environment
//  variable EXTRA ("K=V", or NULL) and the config file CONFIG (or none).
static bool
s_node_start(s_node_t *node, const char *name, const char *extra, const char *config)
{
    shoal_node_fixture_init(node, name, 0);
    if (config)
        snprintf(node->config_path, sizeof node->config_path, "%s", config);
    char *env[] = { (char *) extra, NULL };
    return shoal_node_fixture_start(node, env);
}

//  Runs shoalctl against NODE as the holder of CERT, with up to two more arguments.
static int
s_shoalctl(s_node_t *node, const char *cert, char **output_p, const char *arg0, const char *arg1)
{
    char *argv[] = { (char *) shoal_test_program("shoalctl"), "--endpoint", node->endpoint,
                     "--cert", (char *) cert, "--cluster-key", node->cluster_cert, "--timeout", "3000",
                     (char *) arg0, (char *) arg1, NULL };
    return shoal_test_capture(argv, NULL, 20000, output_p);
}

static void
test_status_with_admin_key(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "alpha", NULL, NULL));
    char *output = NULL;
    int code = s_shoalctl(&node, node.admin_cert, &output, "status", NULL);
    bool human = code == 0 && shoal_test_contains(output, "alpha") && shoal_test_contains(output, node.endpoint)
              && shoal_test_contains(output, "admin");
    free(output);
    code = s_shoalctl(&node, node.admin_cert, &output, "--json", "status");
    bool json = code == 0 && shoal_test_contains(output, "\"node_id\":\"alpha\"")
             && shoal_test_contains(output, "\"role\":\"admin\"") && shoal_test_contains(output, "\"ok\":true");
    free(output);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(human);
    CHECK(json);
}

static void
test_unknown_key_refused(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "beta", NULL, NULL));
    char stranger[4300];
    snprintf(stranger, sizeof stranger, "%s/stranger.cert", shoal_test_dir);
    char *error = NULL;
    CHECK(shoal_keygen_client(stranger, "stranger", "admin", NULL, &error) == 0);
    shoal_client_t *client = shoal_client_new(node.endpoint, stranger, node.cluster_cert, &error);
    CHECK(client);
    shoal_status_t status;
    int64_t started = shoal_test_now_ms();
    int rc = shoal_client_status(client, &status);
    int64_t took = shoal_test_now_ms() - started;
    char message[512];
    snprintf(message, sizeof message, "%s", shoal_client_error(client));
    shoal_status_clear(&status);
    shoal_client_destroy(&client);

    //  The same key admitted once its public half is in the clients directory.
    char admitted[4400];
    snprintf(admitted, sizeof admitted, "%s/clients/stranger.cert", node.data_dir);
    zcert_t *cert = zcert_load(stranger);
    CHECK(cert && zcert_save_public(cert, admitted) == 0);
    zcert_destroy(&cert);
    client = shoal_client_new(node.endpoint, stranger, node.cluster_cert, &error);
    int later = shoal_client_status(client, &status);
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    char *log = shoal_test_slurp(node.log_path);
    bool logged = shoal_test_contains(log, "refused CURVE");
    free(log);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_MSG(rc == SHOAL_E_REFUSED, "rc %d: %s", rc, message);
    CHECK_MSG(shoal_test_contains(message, "refused our key"), "%s", message);
    CHECK_MSG(took < SHOAL_DEFAULT_TIMEOUT_MS, "a refusal took %" PRId64 " ms", took);
    CHECK(logged);
    CHECK_INT(later, 200);
}

static void
test_wrong_cluster_key_refused(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "gamma", NULL, NULL));
    char other[4300];
    snprintf(other, sizeof other, "%s/other/cluster.cert", shoal_test_dir);
    char *error = NULL;
    CHECK(shoal_keygen_cluster(other, &error) == 0);
    shoal_client_t *client = shoal_client_new(node.endpoint, node.admin_cert, other, &error);
    CHECK(client);
    shoal_client_set_timeout(client, 2000);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_MSG(rc == SHOAL_E_REFUSED || rc == SHOAL_E_UNREACHABLE, "rc %d", rc);
}

static void
test_plain_client_refused(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "delta", NULL, NULL));
    //  A client without CURVE: the handshake fails, no request reaches the node.
    zsock_t *plain = zsock_new(ZMQ_DEALER);
    zsock_set_linger(plain, 0);
    zsock_connect(plain, "%s", node.endpoint);
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_STATUS, 7);
    char error[256];
    zmsg_t *msg = shoal_envelope_encode(request, error, sizeof error);
    shoal_envelope_destroy(&request);
    zmsg_send(&msg, plain);
    zsock_set_rcvtimeo(plain, 1500);
    zmsg_t *reply = zmsg_recv(plain);
    bool answered = reply != NULL;
    zmsg_destroy(&reply);
    zsock_destroy(&plain);
    //  The node still serves admitted clients.
    shoal_client_t *client = shoal_client_new(node.endpoint, node.admin_cert, node.cluster_cert, NULL);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(!answered);
    CHECK_INT(rc, 200);
}

static void
test_garbage_frames(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "epsilon", NULL, NULL));
    //  An admitted client that sends garbage: each gets a 400, the node lives.
    zcert_t *mine = zcert_load(node.admin_cert);
    zcert_t *cluster = zcert_load(node.cluster_cert);
    CHECK(mine && cluster);
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    zsock_set_linger(dealer, 0);
    zcert_apply(mine, dealer);
    zsock_set_curve_serverkey(dealer, zcert_public_txt(cluster));
    zsock_connect(dealer, "%s", node.endpoint);
    zcert_destroy(&mine);
    zcert_destroy(&cluster);
    for (int i = 0; i < S_GARBAGE_MESSAGES; i++) {
        zmsg_t *msg = zmsg_new();
        int frames = 1 + randof(3);
        for (int f = 0; f < frames; f++) {
            size_t size = (size_t) randof(i % 10 == 0 ? 4096 : 64);
            uint8_t *bytes = malloc(size + 1);
            for (size_t b = 0; b < size; b++)
                bytes[b] = (uint8_t) randof(256);
            zmsg_addmem(msg, bytes, size);
            free(bytes);
        }
        zmsg_send(&msg, dealer);
    }
    int bad_requests = 0, other = 0;
    zsock_set_rcvtimeo(dealer, 5000);
    for (int i = 0; i < S_GARBAGE_MESSAGES; i++) {
        zmsg_t *reply = zmsg_recv(dealer);
        if (!reply)
            break;
        char error[256];
        shoal_envelope_t *envelope = shoal_envelope_decode(reply, error, sizeof error);
        if (envelope && envelope->status == SHOAL_STATUS_BAD_REQUEST && envelope->message && *envelope->message)
            bad_requests++;
        else
            other++;
        shoal_envelope_destroy(&envelope);
        zmsg_destroy(&reply);
    }
    zsock_destroy(&dealer);
    shoal_client_t *client = shoal_client_new(node.endpoint, node.admin_cert, node.cluster_cert, NULL);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    //  A random message might by chance decode as a valid status request and
    //  be answered 200; at 1,000 short random inputs that is vanishingly rare
    //  but allowed for.
    CHECK_MSG(bad_requests + other == S_GARBAGE_MESSAGES, "%d replies of %d", bad_requests + other,
              S_GARBAGE_MESSAGES);
    CHECK_MSG(bad_requests >= S_GARBAGE_MESSAGES - 5, "only %d of the replies were 400", bad_requests);
    CHECK_INT(rc, 200);
}

static void
test_second_node_on_same_data_dir(void)
{
    s_node_t first;
    CHECK(s_node_start(&first, "zeta", NULL, NULL));
    int port = shoal_test_free_port();
    char bind[128], data[4300], pid_text[32];
    snprintf(bind, sizeof bind, "SHOAL_NODE_BIND=tcp://127.0.0.1:%d", port);
    snprintf(data, sizeof data, "SHOAL_NODE_DATA_DIR=%s", first.data_dir);
    snprintf(pid_text, sizeof pid_text, "%d", (int) first.pid);
    char *env[] = { bind, data, NULL };
    char *argv[] = { (char *) shoal_test_program("shoald"), NULL };
    char *output = NULL;
    int64_t started = shoal_test_now_ms();
    int code = shoal_test_capture(argv, env, 10000, &output);
    int64_t took = shoal_test_now_ms() - started;
    bool names_dir = shoal_test_contains(output, first.data_dir);
    bool names_holder = shoal_test_contains(output, pid_text);
    char shown[512];
    snprintf(shown, sizeof shown, "%s", output ? output : "");
    free(output);
    CHECK_INT(shoal_test_stop(first.pid, SIGTERM), 0);
    CHECK_INT(code, 1);
    CHECK_MSG(names_dir && names_holder, "output: %s", shown);
    CHECK_MSG(took < 5000, "refusal took %" PRId64 " ms", took);
}

static void
test_bad_config_value(void)
{
    char *output = NULL;
    char *env[] = { "SHOAL_STORE_CACHE_MB=lots", NULL };
    char *argv[] = { (char *) shoal_test_program("shoald"), "--print-config", NULL };
    int code = shoal_test_capture(argv, env, 10000, &output);
    bool named = shoal_test_contains(output, "store/cache_mb") && shoal_test_contains(output, "lots")
              && shoal_test_contains(output, "from 1 to 65536");
    free(output);
    CHECK_INT(code, 2);
    CHECK(named);

    //  In a file: an out-of-range value and an unknown key, each exit 2.
    char path[4300];
    snprintf(path, sizeof path, "%s/bad.cfg", shoal_test_dir);
    FILE *file = fopen(path, "w");
    CHECK(file);
    fprintf(file, "node\n    bind = \"tcp://127.0.0.1:99999\"\n");
    fclose(file);
    char *file_argv[] = { (char *) shoal_test_program("shoald"), "-c", path, NULL };
    code = shoal_test_capture(file_argv, NULL, 10000, &output);
    named = shoal_test_contains(output, "node/bind") && shoal_test_contains(output, "99999");
    free(output);
    CHECK_INT(code, 2);
    CHECK(named);

    file = fopen(path, "w");
    CHECK(file);
    fprintf(file, "store\n    cache_size = 5\n");
    fclose(file);
    code = shoal_test_capture(file_argv, NULL, 10000, &output);
    named = shoal_test_contains(output, "unknown key 'store/cache_size'");
    free(output);
    CHECK_INT(code, 2);
    CHECK(named);
}

static void
test_reload_and_clean_stop(void)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/node.cfg", shoal_test_dir);
    FILE *file = fopen(path, "w");
    CHECK(file);
    fprintf(file, "log\n    verbose = 0\n");
    fclose(file);
    s_node_t node;
    CHECK(s_node_start(&node, "eta", "SHOAL_STORE_SYNC=1", path));
    file = fopen(path, "w");
    CHECK(file);
    fprintf(file, "log\n    verbose = 1\nstore\n    cache_mb = 128\n");
    fclose(file);
    kill(node.pid, SIGHUP);
    bool reloaded = false;
    for (int i = 0; i < 100 && !reloaded; i++) {
        usleep(50000);
        char *log = shoal_test_slurp(node.log_path);
        reloaded = shoal_test_contains(log, "log/verbose changed from '0' to '1'")
                && shoal_test_contains(log, "store/cache_mb changed from '64' to '128'; it takes effect at the next start");
        free(log);
    }
    //  Verbose now: a request is logged.
    shoal_client_t *client = shoal_client_new(node.endpoint, node.admin_cert, node.cluster_cert, NULL);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    int code = shoal_test_stop(node.pid, SIGTERM);
    char *log = shoal_test_slurp(node.log_path);
    //  The generated admin key is named after its node.
    char expected[128];
    snprintf(expected, sizeof expected, "node: status from admin-%s (admin): 200", node.name);
    bool logged = shoal_test_contains(log, expected);
    bool stopped = shoal_test_contains(log, "stopping after");
    free(log);
    CHECK(reloaded);
    CHECK_INT(rc, 200);
    CHECK(logged);
    CHECK_INT(code, 0);
    CHECK(stopped);

    //  It starts again on the same data directory with the same keys.
    CHECK(s_node_start(&node, "eta", NULL, path));
    CHECK_INT(shoal_test_stop(node.pid, SIGINT), 0);
}

static void
test_tenant_sees_no_data_dir(void)
{
    s_node_t node;
    CHECK(s_node_start(&node, "theta", NULL, NULL));
    char cert[4400];
    snprintf(cert, sizeof cert, "%s/clients/acme.cert", node.data_dir);
    char *error = NULL;
    CHECK(shoal_keygen_client(cert, "acme", "tenant", "acme/web", &error) == 0);
    shoal_client_t *client = shoal_client_new(node.endpoint, cert, node.cluster_cert, &error);
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    bool role = status.role && strcmp(status.role, "tenant") == 0 && strcmp(status.tenant, "acme/web") == 0;
    bool hidden = status.data_dir && *status.data_dir == 0;
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_INT(rc, 200);
    CHECK(role);
    CHECK(hidden);
}

int
main(void)
{
    zsys_init();
    SHOAL_TEST(test_status_with_admin_key);
    SHOAL_TEST(test_unknown_key_refused);
    SHOAL_TEST(test_wrong_cluster_key_refused);
    SHOAL_TEST(test_plain_client_refused);
    SHOAL_TEST(test_garbage_frames);
    SHOAL_TEST(test_second_node_on_same_data_dir);
    SHOAL_TEST(test_bad_config_value);
    SHOAL_TEST(test_reload_and_clean_stop);
    SHOAL_TEST(test_tenant_sees_no_data_dir);
    return shoal_test_finish();
}
