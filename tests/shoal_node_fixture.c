/*  shoal_node_fixture: one real shoald for a test. */
#include "shoal_node_fixture.h"
#include "shoal_test.h"
#include "shoal_image.h"

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define S_START_TIMEOUT_MS 15000
#define S_POLL_US 50000
#define S_POLL_TIMEOUT_MS 500
#define S_ENV_MAX 16
//  A first start whose free port another process took meanwhile (the
//  machine is shared) tries this many other ports.
#define S_PORT_ATTEMPTS 3
#define S_PORT_TAKEN "Address already in use"

void
shoal_node_fixture_init(shoal_node_fixture_t *node, const char *name, int port)
{
    memset(node, 0, sizeof *node);
    snprintf(node->name, sizeof node->name, "%s", name);
    snprintf(node->endpoint, sizeof node->endpoint, "tcp://127.0.0.1:%d", port ? port : shoal_test_free_port());
    snprintf(node->data_dir, sizeof node->data_dir, "%s/%s", shoal_test_dir, name);
    snprintf(node->log_path, sizeof node->log_path, "%s/%s.log", shoal_test_dir, name);
    snprintf(node->config_path, sizeof node->config_path, "%s/%s.cfg", shoal_test_dir, name);
    snprintf(node->admin_cert, sizeof node->admin_cert, "%s/keys/admin-%s.cert", node->data_dir, name);
    snprintf(node->cluster_cert, sizeof node->cluster_cert, "%s/keys/cluster.cert", node->data_dir);
}

shoal_client_t *
shoal_node_fixture_client(const shoal_node_fixture_t *node, const char *cert, int timeout_ms)
{
    shoal_client_t *client = shoal_client_new(node->endpoint, cert, node->cluster_cert, NULL);
    if (client)
        shoal_client_set_timeout(client, timeout_ms);
    return client;
}

//  True when NODE answers status to CERT.
static bool
s_answers_to(const shoal_node_fixture_t *node, const char *cert)
{
    if (access(cert, R_OK) != 0)
        return false;
    shoal_client_t *client = shoal_node_fixture_client(node, cert, S_POLL_TIMEOUT_MS);
    shoal_status_t status;
    int rc = client ? shoal_client_status(client, &status) : -1;
    if (rc == 200)
        shoal_status_clear(&status);
    shoal_client_destroy(&client);
    return rc == 200;
}

static bool s_start_once(shoal_node_fixture_t *node, char *const extra[]);

//  The size of FILE (0 when missing).
static size_t
s_log_size(const char *path)
{
    char *text = shoal_test_slurp(path);
    size_t size = text ? strlen(text) : 0;
    free(text);
    return size;
}

bool
shoal_node_fixture_start(shoal_node_fixture_t *node, char *const extra[])
{
    //  A port reserved for this process may still be held by a process
    //  outside the tests when shoald binds it: a node that never ran moves
    //  to another free port then.
    bool first = node->pid == 0;
    for (int attempt = 0; attempt < S_PORT_ATTEMPTS; attempt++) {
        size_t logged = s_log_size(node->log_path);
        if (s_start_once(node, extra))
            return true;
        char *log = shoal_test_slurp(node->log_path);
        bool taken = log && strlen(log) > logged && strstr(log + logged, S_PORT_TAKEN);
        free(log);
        if (!first || !taken)
            return false;
        snprintf(node->endpoint, sizeof node->endpoint, "tcp://127.0.0.1:%d", shoal_test_free_port());
    }
    return false;
}

static bool
s_start_once(shoal_node_fixture_t *node, char *const extra[])
{
    //  putenv keeps the strings: they live in static storage until the next start.
    static char env_store[3][SHOAL_FIXTURE_PATH_MAX + 32];
    snprintf(env_store[0], sizeof env_store[0], "SHOAL_NODE_BIND=%s", node->endpoint);
    snprintf(env_store[1], sizeof env_store[1], "SHOAL_NODE_DATA_DIR=%s", node->data_dir);
    snprintf(env_store[2], sizeof env_store[2], "SHOAL_NODE_ID=%s", node->name);
    char *env[S_ENV_MAX] = { env_store[0], env_store[1], env_store[2] };
    size_t used = 3;
    for (size_t i = 0; extra && extra[i] && used + 1 < S_ENV_MAX; i++)
        env[used++] = extra[i];
    env[used] = NULL;
    char *argv[] = { (char *) shoal_test_program("shoald"), "-c", node->config_path, NULL };
    if (access(node->config_path, R_OK) != 0)
        argv[1] = NULL;
    node->pid = shoal_test_spawn(argv, env, node->log_path);
    int64_t deadline = shoal_test_now_ms() + S_START_TIMEOUT_MS;
    while (node->pid > 0 && shoal_test_now_ms() < deadline) {
        if (shoal_test_wait(node->pid, 0) != -1)
            return false;
        if (s_answers_to(node, node->admin_cert))
            return true;
        usleep(S_POLL_US);
    }
    return false;
}

char *
shoal_node_fixture_tenant_key(const shoal_node_fixture_t *node, const char *name, const char *tenant)
{
    char *mine = zsys_sprintf("%s/%s.cert", shoal_test_dir, name);
    char *published = zsys_sprintf("%s/clients/%s.cert", node->data_dir, name);
    zcert_t *cert = shoal_keygen_client(mine, name, "tenant", tenant, NULL) == 0 ? zcert_load(mine) : NULL;
    bool saved = cert && zcert_save_public(cert, published) == 0;
    zcert_destroy(&cert);
    free(published);
    int64_t deadline = shoal_test_now_ms() + S_START_TIMEOUT_MS;
    bool admitted = false;
    while (saved && !admitted && shoal_test_now_ms() < deadline) {
        admitted = s_answers_to(node, mine);
        if (!admitted)
            usleep(S_POLL_US);
    }
    if (!admitted)
        zstr_free(&mine);
    return mine;
}

void
shoal_node_fixture_guests_kill(const shoal_node_fixture_t *node)
{
    char *guests = zsys_sprintf("%s/guests", node->data_dir);
    DIR *dir = opendir(guests);
    for (struct dirent *entry = dir ? readdir(dir) : NULL; entry; entry = readdir(dir)) {
        if (entry->d_name[0] == '.')
            continue;
        char *guest = zsys_sprintf("%s/%s", guests, entry->d_name);
        int pid = shoal_image_running(guest);
        if (pid > 0)
            kill(pid, SIGKILL);
        free(guest);
    }
    if (dir)
        closedir(dir);
    free(guests);
}
