/*  test_node_connections: what connections that never authenticate can do
    to a node: a flood of half-open connections, handshakes refused by the
    thousand, a clients directory holding a stray file.
*/
#include "shoal_test.h"
#include "shoal_auth.h"
#include "shoal_node_fixture.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

//  Half-open connections of the flood, and the addresses they come from
//  (loopback has them all): the admitted client comes from 127.0.0.1.
#define FLOOD_CONNECTIONS 1100
static const char *s_flood_sources[] = { "127.0.0.2", "127.0.0.3" };
#define FLOOD_SOURCES (sizeof s_flood_sources / sizeof s_flood_sources[0])
//  The node's caps in the flood test: below the flood, so both bite.
#define FLOOD_MAX_HANDSHAKES 100
#define FLOOD_MAX_PER_ADDRESS 64
//  The open files limit the node is started with: low, like the common
//  soft default (1024), so that the flood reaches it on loopback (where
//  the kernel hands the node a few hundred connections at a time) unless
//  the node raises it and closes what does not authenticate.
#define FLOOD_NOFILE 512
//  The longest wait for the node to take up the flood, and how often to
//  look; a node "at its limit" holds at least its limit less the slack.
#define FLOOD_SETTLE_MS 30000
#define FLOOD_POLL_MS 100
#define FLOOD_NOFILE_SLACK 16
//  How long a status call of the admitted client may wait.
#define CLIENT_TIMEOUT_MS 10000
//  Half-open connections to the move receiver: more than one address may
//  hold (security/max_handshakes_per_address, 64 by default).
#define RECEIVER_FLOOD 100
//  Handshakes refused in the throttle test.
#define REFUSED_CLIENTS 20
//  Reloads of a clients directory holding a file that is no certificate,
//  and the heap growth they may cost (the leak was ~100 bytes each).
#define RELOADS 3000
#define RELOAD_GROWTH_MAX (64 * 1024)
#define PATH_MAX_TEST 4400

static void
s_config_write(shoal_node_fixture_t *node, const char *text)
{
    FILE *file = fopen(node->config_path, "w");
    if (file) {
        fputs(text, file);
        fclose(file);
    }
}

//  A TCP connection from SOURCE to PORT on 127.0.0.1 that never sends a
//  byte. Returns its descriptor, or -1.
static int
s_half_open(const char *source, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in from = { .sin_family = AF_INET };
    inet_pton(AF_INET, source, &from.sin_addr);
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *) &from, sizeof from) != 0
    ||  (connect(fd, (struct sockaddr *) &to, sizeof to) != 0 && errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

//  Descriptors PID holds open, or -1.
static int
s_open_files(pid_t pid)
{
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "/proc/%d/fd", (int) pid);
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    int count = 0;
    for (struct dirent *entry = readdir(dir); entry; entry = readdir(dir))
        count += entry->d_name[0] != '.';
    closedir(dir);
    return count;
}

//  Waits up to FLOOD_SETTLE_MS until the node NODE has taken up the flood:
//  it says it closed some of it, or it holds nearly as many descriptors
//  as its limit allows (as a node without a gate does). Returns whether
//  it said so.
static bool
s_flood_taken_up(const shoal_node_fixture_t *node)
{
    int64_t deadline = shoal_test_now_ms() + FLOOD_SETTLE_MS;
    while (shoal_test_now_ms() < deadline) {
        char *log = shoal_test_slurp(node->log_path);
        bool said = shoal_test_contains(log, "gate (node): closed");
        free(log);
        if (said)
            return true;
        if (s_open_files(node->pid) >= FLOOD_NOFILE - FLOOD_NOFILE_SLACK)
            return false;
        usleep(FLOOD_POLL_MS * 1000);
    }
    return false;
}

//  PID's soft and hard limits of open files, from /proc.
static void
s_file_limits(pid_t pid, long long *soft, long long *hard)
{
    char path[PATH_MAX_TEST];
    snprintf(path, sizeof path, "/proc/%d/limits", (int) pid);
    char *limits = shoal_test_slurp(path);
    const char *line = limits ? strstr(limits, "Max open files") : NULL;
    *soft = *hard = -1;
    if (line)
        sscanf(line, "Max open files %lld %lld", soft, hard);
    free(limits);
}

static void
test_half_open_flood_leaves_room(void)
{
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, "flood", 0);
    char config[PATH_MAX_TEST];
    snprintf(config, sizeof config,
             "security\n    max_handshakes = %d\n    max_handshakes_per_address = %d\n",
             FLOOD_MAX_HANDSHAKES, FLOOD_MAX_PER_ADDRESS);
    s_config_write(&node, config);
    //  The node starts with the soft limit most systems give; the test
    //  itself needs more for the flood.
    struct rlimit mine;
    CHECK(getrlimit(RLIMIT_NOFILE, &mine) == 0);
    CHECK_MSG(mine.rlim_max > FLOOD_CONNECTIONS + FLOOD_NOFILE, "the hard limit %ju is too low for the test",
              (uintmax_t) mine.rlim_max);
    struct rlimit low = { FLOOD_NOFILE, mine.rlim_max };
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    bool started = shoal_node_fixture_start(&node, NULL);
    struct rlimit high = { mine.rlim_max, mine.rlim_max };
    CHECK(setrlimit(RLIMIT_NOFILE, &high) == 0);
    CHECK(started);
    long long soft, hard;
    s_file_limits(node.pid, &soft, &hard);

    const char *port = strrchr(node.endpoint, ':') + 1;
    static int flood[FLOOD_CONNECTIONS];
    int opened = 0;
    for (int i = 0; i < FLOOD_CONNECTIONS; i++) {
        flood[i] = s_half_open(s_flood_sources[i % FLOOD_SOURCES], atoi(port));
        opened += flood[i] >= 0;
    }
    bool logged = s_flood_taken_up(&node);
    //  The flood holds on while an admitted client asks for the status.
    char *error = NULL;
    shoal_client_t *client = shoal_node_fixture_client(&node, node.admin_cert, CLIENT_TIMEOUT_MS);
    shoal_status_t status;
    int rc = client ? shoal_client_status(client, &status) : -1;
    char message[512];
    snprintf(message, sizeof message, "%s", client ? shoal_client_error(client) : "no client");
    if (client)
        shoal_status_clear(&status);
    shoal_client_destroy(&client);
    //  The gate closes what goes over the caps as it reads the monitor's
    //  events, which a busy machine may read late: the count is judged
    //  once the gate had FLOOD_SETTLE_MS to catch up, the flood still open.
    int files = s_open_files(node.pid);
    int64_t settle = shoal_test_now_ms() + FLOOD_SETTLE_MS;
    while ((files < 0 || files >= FLOOD_NOFILE) && shoal_test_now_ms() < settle) {
        usleep(FLOOD_POLL_MS * 1000);
        files = s_open_files(node.pid);
    }
    for (int i = 0; i < FLOOD_CONNECTIONS; i++)
        if (flood[i] >= 0)
            close(flood[i]);
    free(error);
    int stopped = shoal_test_stop(node.pid, SIGTERM);
    CHECK_INT(opened, FLOOD_CONNECTIONS);
    CHECK_MSG(rc == 200, "status during the flood: %d: %s", rc, message);
    CHECK_MSG(soft == hard && hard > FLOOD_NOFILE, "the node's open files limit: soft %lld, hard %lld", soft,
              hard);
    //  The gate closed what went over the caps: the node holds far fewer
    //  descriptors than the flood opened, while the flood holds on.
    CHECK_MSG(files >= 0 && files < FLOOD_NOFILE, "the node held %d descriptors during the flood", files);
    CHECK_MSG(logged, "no line about closed connections in %s", node.log_path);
    CHECK_INT(stopped, 0);
}

//  Waits up to FLOOD_SETTLE_MS for NEEDLE in the log of NODE.
static bool
s_log_wait(const shoal_node_fixture_t *node, const char *needle)
{
    int64_t deadline = shoal_test_now_ms() + FLOOD_SETTLE_MS;
    bool found = false;
    while (!found && shoal_test_now_ms() < deadline) {
        char *log = shoal_test_slurp(node->log_path);
        found = shoal_test_contains(log, needle);
        free(log);
        if (!found)
            usleep(FLOOD_POLL_MS * 1000);
    }
    return found;
}

//  The move receiver's port is as open as the node's, and gated the same.
static void
test_move_receiver_gated(void)
{
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, "mover", 0);
    int port = shoal_test_free_port();
    char config[PATH_MAX_TEST];
    snprintf(config, sizeof config, "move\n    bind = tcp://127.0.0.1:%d\n", port);
    s_config_write(&node, config);
    CHECK(shoal_node_fixture_start(&node, NULL));
    static int flood[RECEIVER_FLOOD];
    for (int i = 0; i < RECEIVER_FLOOD; i++)
        flood[i] = s_half_open(s_flood_sources[0], port);
    bool logged = s_log_wait(&node, "gate (move receiver): closed");
    for (int i = 0; i < RECEIVER_FLOOD; i++)
        if (flood[i] >= 0)
            close(flood[i]);
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_MSG(logged, "no line about closed connections in %s", node.log_path);
}

static void
test_refused_handshakes_throttled(void)
{
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, "throttle", 0);
    s_config_write(&node, "log\n    throttle_ms = 600000\n");
    CHECK(shoal_node_fixture_start(&node, NULL));
    char stranger[PATH_MAX_TEST];
    snprintf(stranger, sizeof stranger, "%s/stranger.cert", shoal_test_dir);
    char *error = NULL;
    CHECK(shoal_keygen_client(stranger, "stranger", "admin", NULL, &error) == 0);
    int refused = 0;
    for (int i = 0; i < REFUSED_CLIENTS; i++) {
        shoal_client_t *client = shoal_node_fixture_client(&node, stranger, CLIENT_TIMEOUT_MS);
        shoal_status_t status;
        refused += client && shoal_client_status(client, &status) == SHOAL_E_REFUSED;
        if (client)
            shoal_status_clear(&status);
        shoal_client_destroy(&client);
    }
    int stopped = shoal_test_stop(node.pid, SIGTERM);
    char *log = shoal_test_slurp(node.log_path);
    int lines = 0;
    for (const char *at = log ? strstr(log, "auth: refused") : NULL; at; at = strstr(at + 1, "auth: refused"))
        lines++;
    free(log);
    CHECK_INT(refused, REFUSED_CLIENTS);
    //  One line at once, then one per interval: none more in this test.
    CHECK_INT(lines, 1);
    CHECK_INT(stopped, 0);
}

//  Heap bytes in use, as glibc counts them (0 under a sanitizer's
//  allocator, where LeakSanitizer judges instead).
static size_t
s_heap_used(void)
{
    return mallinfo2().uordblks;
}

static void
test_stray_file_in_clients_dir_costs_nothing(void)
{
    char clients[PATH_MAX_TEST], stray[PATH_MAX_TEST + 16], admin[PATH_MAX_TEST + 16];
    snprintf(clients, sizeof clients, "%s/clients", shoal_test_dir);
    snprintf(stray, sizeof stray, "%s/README", clients);
    snprintf(admin, sizeof admin, "%s/admin.cert", clients);
    CHECK(zsys_dir_create("%s", clients) == 0);
    char *error = NULL;
    CHECK(shoal_keygen_client(admin, "admin", "admin", NULL, &error) == 0);
    zcert_t *cluster = zcert_new();
    zactor_t *auth = shoal_auth_new(zcert_public_txt(cluster), clients, false, 0);
    CHECK(auth);
    size_t before = 0;
    int admitted = -1;
    for (int i = 0; i < RELOADS; i++) {
        //  A different size each time: the directory changed, so the
        //  handler reads it again.
        FILE *file = fopen(stray, "w");
        if (file) {
            fprintf(file, "%s\n", i % 2 ? "notes" : "notes, longer");
            fclose(file);
        }
        zstr_send(auth, "COUNT");
        char *count = zstr_recv(auth);
        admitted = count ? atoi(count) : -1;
        free(count);
        if (i == RELOADS / 10)
            before = s_heap_used();
    }
    size_t after = s_heap_used();
    zactor_destroy(&auth);
    zcert_destroy(&cluster);
    free(error);
    CHECK_INT(admitted, 1);
    CHECK_MSG(after < before + RELOAD_GROWTH_MAX, "the heap grew by %zu bytes over %d reloads", after - before,
              RELOADS);
}

int
main(void)
{
    SHOAL_TEST(test_half_open_flood_leaves_room);
    SHOAL_TEST(test_move_receiver_gated);
    SHOAL_TEST(test_refused_handshakes_throttled);
    SHOAL_TEST(test_stray_file_in_clients_dir_costs_nothing);
    return shoal_test_finish();
}
