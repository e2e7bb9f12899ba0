/*  shoal_cluster: the multi-node harness behind tests/shoal_cluster.h.

    DESIGN: the network of namespace mode. The host's firewall may drop
    bridged traffic (Docker sets the FORWARD policy to DROP, and br_netfilter
    hands bridged frames to that chain), so a bridge in the root namespace
    would make the tests depend on the host. Instead the bridge lives in a
    namespace of the cluster's own, the hub, whose firewall is empty:

        root namespace                 hub namespace            node namespaces
        shoal<tag> 198.18.X.254 ---- host -+- br0 -+- n1 ---- eth0 198.18.X.1 (shoald n1)
                                                   +- n2 ---- eth0 198.18.X.2 (shoald n2)

    The only thing the cluster adds to the root namespace is one end of the
    veth pair to the hub. X is a /24 of 198.18.0.0/15 (reserved for network
    benchmarks) that no interface uses yet, so test executables run side by
    side. A cut is an nftables set in the hub: frames between a cut node's
    port and any other node's port are dropped, frames between it and the
    host port pass. The partition is real for the mesh (established TCP
    connections stall, as they do when a link dies) while the test process
    still reaches both sides.

    Names carry the pid and a serial (tag), so concurrent runs never meet,
    and teardown deletes only the names this cluster recorded. Deleting a
    node's namespace deletes its veth pair; deleting the hub deletes the
    bridge and the pair to the root namespace.
*/
#include "shoal_cluster.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_DIR_MAX 4200
#define S_PATH_MAX 4300
#define S_FILE_MAX 4400
#define S_ERROR_MAX 4096
#define S_START_TIMEOUT_MS 15000
#define S_STOP_TIMEOUT_MS 10000
#define S_POLL_MS 20
#define S_CLIENT_TIMEOUT_MS 2000
#define S_PROBE_TIMEOUT_MS 500
#define S_SCAN_PAGE 1000
#define S_ENV_MAX 32
#define S_LIVE_MAX 64
#define S_ARGS_MAX 48
#define S_CTL_TIMEOUT_MS 30000
#define S_LOG_TAIL 600
#define S_SUBNET_BASE "198.18"
#define S_HOST_OCTET 254
//  A limited link's token bucket: its burst and its queue, in ms at its rate
//  (the burst at least a kernel tick's worth, 4 ms at 250 Hz).
#define S_SHAPE_BURST_MS 5
#define S_SHAPE_LATENCY_MS 50

//  One shoald of the cluster.
typedef struct {
    int index;                      //  1..N
    char id[16];                    //  node id, "n1"...
    char dir[S_PATH_MAX];           //  everything of this node lives here
    char data_dir[S_FILE_MAX];      //  node/data_dir
    char clients_dir[S_FILE_MAX];   //  security/clients_dir, holding the admin's public cert
    char log_path[S_FILE_MAX];      //  its stdout and stderr, across restarts
    char endpoint[64];              //  where it binds and what it advertises
    char cluster_cert[S_FILE_MAX];  //  the cluster key it serves with
    bool stranger;                  //  serves with another cluster key than the cluster's
    char *env[S_ENV_MAX];           //  extra "NAME=VALUE" from shoal_cluster_node_setenv
    int env_count;
    pid_t pid;                      //  running process, 0 when stopped
    bool cut;                       //  cut off from the other nodes
    char netns[64];                 //  its namespace, "" in loopback mode
    bool netns_made;                //  the namespace exists and is ours to delete
    shoal_client_t *client;         //  the cluster's admin client to it
} s_node_t;

struct _shoal_cluster_t {
    shoal_cluster_options_t options;    //  as given, with defaults filled in
    int size;                       //  number of nodes
    s_node_t *nodes;                //  nodes[0] is n1
    char dir[S_DIR_MAX];            //  the cluster's keys
    char cluster_cert[S_PATH_MAX];  //  public half of the cluster key
    char admin_cert[S_PATH_MAX];    //  the admin client certificate (secret beside it)
    char tag[11];                   //  unique part of every name: pid and serial in hex
    char hub[64];                   //  the hub namespace, "" in loopback mode
    bool hub_made;                  //  the hub exists and is ours to delete
    char host_link[16];             //  root-namespace end of the veth pair to the hub
    bool host_link_made;            //  that link exists and is ours to delete
    int subnet;                     //  which /24: 198.(18 + subnet / 255).(subnet % 255).0
    char error[S_ERROR_MAX];        //  what the last failure was about
};

//  Clusters not destroyed yet, for shoal_cluster_destroy_all and exit.
static shoal_cluster_t *s_live[S_LIVE_MAX];
static int s_serial;
static bool s_exit_hooked;
static char s_ip_path[64];
static char s_nft_path[64];

static void
s_set_error(shoal_cluster_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(self->error, sizeof self->error, format, args);
    va_end(args);
}

//  Copies SOURCE into TARGET, cut to fit.
static void
s_copy(char *target, size_t target_size, const char *source)
{
    size_t length = strlen(source);
    if (length >= target_size)
        length = target_size - 1;
    memcpy(target, source, length);
    target[length] = 0;
}

static s_node_t *
s_node(shoal_cluster_t *self, int index)
{
    if (!self || index < 1 || index > self->size)
        return NULL;
    return &self->nodes[index - 1];
}

//  The last few hundred bytes of a node's log, for messages about it.
static void
s_log_tail(s_node_t *node, char *tail, size_t tail_size)
{
    char *log = shoal_test_slurp(node->log_path);
    size_t length = log ? strlen(log) : 0;
    size_t from = length > S_LOG_TAIL ? length - S_LOG_TAIL : 0;
    snprintf(tail, tail_size, "%s", log ? log + from : "(no log)");
    free(log);
}

//  Finds NAME in the usual system directories.
static bool
s_find_program(const char *name, char *path, size_t path_size)
{
    static const char *dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, path_size, "%s/%s", dirs[i], name);
        if (access(path, X_OK) == 0)
            return true;
    }
    *path = 0;
    return false;
}

//  Runs ARGV to completion with stdout and stderr into OUTPUT (may be NULL).
//  Returns its exit code, or -1 when it could not run.
static int
s_run_argv(char *const argv[], char *output, size_t output_size)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    char chunk[512];
    ssize_t got;
    while ((got = read(fds[0], chunk, sizeof chunk)) > 0 || (got < 0 && errno == EINTR)) {
        for (ssize_t i = 0; i < got && output && used + 1 < output_size; i++)
            output[used++] = chunk[i];
    }
    if (output && output_size)
        output[used] = 0;
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

//  Runs a command given as one line of words separated by single spaces (no
//  quoting: every name the harness makes is a single word). On failure the
//  cluster's error names the command and what it printed.
static int
s_run(shoal_cluster_t *self, const char *format, ...)
{
    char line[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    char words[2048];
    snprintf(words, sizeof words, "%s", line);
    char *argv[S_ARGS_MAX];
    int argc = 0;
    char *rest = words;
    for (char *word = strsep(&rest, " "); word && argc < S_ARGS_MAX - 1; word = strsep(&rest, " "))
        if (*word)
            argv[argc++] = word;
    argv[argc] = NULL;
    char output[1024];
    int code = s_run_argv(argv, output, sizeof output);
    if (code != 0 && self)
        s_set_error(self, "`%s` exited %d: %s", line, code, output);
    return code == 0 ? 0 : -1;
}

bool
shoal_cluster_in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") != 0 && strcasecmp(ci, "false") != 0;
}

bool
shoal_cluster_namespaces_available(char *why, size_t why_size)
{
    //  Probed once per process: creating a namespace is the only real proof.
    static int known = -1;
    static char reason[512];
    if (known == -1) {
        known = 0;
        if (geteuid() != 0)
            snprintf(reason, sizeof reason, "namespace mode needs root (ip netns), running as uid %d",
                     (int) geteuid());
        else
        if (!s_find_program("ip", s_ip_path, sizeof s_ip_path))
            snprintf(reason, sizeof reason, "namespace mode needs the ip command (iproute2), not found");
        else
        if (!s_find_program("nft", s_nft_path, sizeof s_nft_path))
            snprintf(reason, sizeof reason, "namespace mode needs the nft command (nftables) for cuts, not found");
        else {
            char probe[64], output[256];
            snprintf(probe, sizeof probe, "shoal-%x-probe", (unsigned) getpid());
            char *add[] = { s_ip_path, "netns", "add", probe, NULL };
            char *nft[] = { s_ip_path, "netns", "exec", probe, s_nft_path, "add", "table", "bridge", "probe", NULL };
            char *del[] = { s_ip_path, "netns", "del", probe, NULL };
            if (s_run_argv(add, output, sizeof output) != 0)
                snprintf(reason, sizeof reason, "cannot create a network namespace: %s", output);
            else {
                if (s_run_argv(nft, output, sizeof output) != 0)
                    snprintf(reason, sizeof reason, "nft cannot make a bridge table in a namespace: %s", output);
                else
                    known = 1;
                s_run_argv(del, NULL, 0);
            }
        }
    }
    if (why && why_size)
        snprintf(why, why_size, "%s", known ? "" : reason);
    return known == 1;
}

//  Picks a /24 that no interface of the root namespace has an address in.
static int
s_subnet_pick(shoal_cluster_t *self)
{
    char *argv[] = { s_ip_path, "-4", "-o", "addr", "show", NULL };
    char *routes[] = { s_ip_path, "-4", "route", "show", "table", "all", NULL };
    static char used[65536];
    static char used_routes[65536];
    if (s_run_argv(argv, used, sizeof used) != 0 || s_run_argv(routes, used_routes, sizeof used_routes) != 0) {
        s_set_error(self, "cannot list the addresses and routes of the root namespace");
        return -1;
    }
    int start = (int) ((unsigned) getpid() * 7u + (unsigned) s_serial * 13u) % 510;
    for (int step = 0; step < 510; step++) {
        int candidate = (start + step) % 510;
        char prefix[32];
        snprintf(prefix, sizeof prefix, " 198.%d.%d.", 18 + candidate / 255, candidate % 255);
        if (!strstr(used, prefix) && !strstr(used_routes, prefix + 1))
            return candidate;
    }
    s_set_error(self, "no free /24 left in 198.18.0.0/15");
    return -1;
}

static void
s_address(shoal_cluster_t *self, int host, char *address, size_t address_size)
{
    snprintf(address, address_size, "198.%d.%d.%d", 18 + self->subnet / 255, self->subnet % 255, host);
}

//  Builds the hub, its bridge and the link to the root namespace, then one
//  namespace per node. Every name is recorded before it is made, so that
//  teardown after a failure halfway removes what exists.
static int
s_network_up(shoal_cluster_t *self)
{
    const char *ip = s_ip_path;
    self->subnet = s_subnet_pick(self);
    if (self->subnet < 0)
        return -1;
    snprintf(self->hub, sizeof self->hub, "shoal-%s-hub", self->tag);
    snprintf(self->host_link, sizeof self->host_link, "shoal%s", self->tag);
    char host_address[32];
    s_address(self, S_HOST_OCTET, host_address, sizeof host_address);
    self->hub_made = true;
    if (s_run(self, "%s netns add %s", ip, self->hub)) {
        self->hub_made = false;
        return -1;
    }
    self->host_link_made = true;
    if (s_run(self, "%s -n %s link set lo up", ip, self->hub)
    ||  s_run(self, "%s -n %s link add br0 type bridge", ip, self->hub)
    ||  s_run(self, "%s -n %s link set br0 up", ip, self->hub)
    ||  s_run(self, "%s link add %s type veth peer name host netns %s", ip, self->host_link, self->hub)
    ||  s_run(self, "%s addr add %s/24 dev %s", ip, host_address, self->host_link)
    ||  s_run(self, "%s link set %s up", ip, self->host_link)
    ||  s_run(self, "%s -n %s link set host master br0 up", ip, self->hub))
        return -1;
    //  The cut set and the two rules that drop a cut port's frames to and
    //  from every port but the host's.
    const char *nft = s_nft_path;
    if (s_run(self, "%s netns exec %s %s add table bridge shoal", ip, self->hub, nft)
    ||  s_run(self, "%s netns exec %s %s add set bridge shoal cut { type ifname ; }", ip, self->hub, nft)
    ||  s_run(self, "%s netns exec %s %s add chain bridge shoal forward "
                    "{ type filter hook forward priority 0 ; policy accept ; }", ip, self->hub, nft)
    ||  s_run(self, "%s netns exec %s %s add rule bridge shoal forward iifname @cut oifname != host drop",
              ip, self->hub, nft)
    ||  s_run(self, "%s netns exec %s %s add rule bridge shoal forward oifname @cut iifname != host drop",
              ip, self->hub, nft))
        return -1;
    for (int i = 1; i <= self->size; i++) {
        s_node_t *node = s_node(self, i);
        char address[32];
        s_address(self, i, address, sizeof address);
        snprintf(node->netns, sizeof node->netns, "shoal-%s-%s", self->tag, node->id);
        node->netns_made = true;
        if (s_run(self, "%s netns add %s", ip, node->netns)) {
            node->netns_made = false;
            return -1;
        }
        if (s_run(self, "%s -n %s link set lo up", ip, node->netns)
        ||  s_run(self, "%s -n %s link add %s type veth peer name eth0 netns %s", ip, self->hub, node->id,
                  node->netns)
        ||  s_run(self, "%s -n %s link set %s master br0 up", ip, self->hub, node->id)
        ||  s_run(self, "%s -n %s addr add %s/24 dev eth0", ip, node->netns, address)
        ||  s_run(self, "%s -n %s link set eth0 up", ip, node->netns))
            return -1;
        snprintf(node->endpoint, sizeof node->endpoint, "tcp://%s:%d", address, SHOAL_CLUSTER_NETNS_PORT);
    }
    return 0;
}

//  Removes what s_network_up made, node namespaces first (no process may
//  still run in them: the nodes are stopped before).
static void
s_network_down(shoal_cluster_t *self)
{
    for (int i = 1; i <= self->size; i++) {
        s_node_t *node = s_node(self, i);
        if (node->netns_made && s_run(self, "%s netns del %s", s_ip_path, node->netns) != 0)
            fprintf(stderr, "shoal_cluster: %s\n", self->error);
        node->netns_made = false;
    }
    if (self->host_link_made) {
        //  Gone already when the hub side went first; ask before deleting.
        char *show[] = { s_ip_path, "link", "show", self->host_link, NULL };
        if (s_run_argv(show, NULL, 0) == 0 && s_run(self, "%s link del %s", s_ip_path, self->host_link) != 0)
            fprintf(stderr, "shoal_cluster: %s\n", self->error);
        self->host_link_made = false;
    }
    if (self->hub_made && s_run(self, "%s netns del %s", s_ip_path, self->hub) != 0)
        fprintf(stderr, "shoal_cluster: %s\n", self->error);
    self->hub_made = false;
}

static void
s_at_exit(void)
{
    shoal_cluster_destroy_all();
}

//  A test killed by SIGINT or SIGTERM still removes its namespaces: exit
//  runs the atexit teardown.
static void
s_on_signal(int signal_number)
{
    signal(signal_number, SIG_DFL);
    exit(128 + signal_number);
}

//  Makes SIGINT, SIGTERM and SIGHUP run the teardown. czmq installs its own
//  handler when it initialises (again after a fork), so this is asserted
//  whenever a namespace cluster is made or a node of one started.
static void
s_signals_hook(void)
{
    int signals[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction current;
        if (sigaction(signals[i], NULL, &current) == 0 && current.sa_handler != s_on_signal) {
            struct sigaction action;
            memset(&action, 0, sizeof action);
            action.sa_handler = s_on_signal;
            sigemptyset(&action.sa_mask);
            sigaction(signals[i], &action, NULL);
        }
    }
}

static void
s_register(shoal_cluster_t *self)
{
    if (!s_exit_hooked) {
        s_exit_hooked = true;
        atexit(s_at_exit);
    }
    if (self->options.namespaces)
        s_signals_hook();
    for (int i = 0; i < S_LIVE_MAX; i++)
        if (!s_live[i]) {
            s_live[i] = self;
            return;
        }
}

static void
s_unregister(shoal_cluster_t *self)
{
    for (int i = 0; i < S_LIVE_MAX; i++)
        if (s_live[i] == self)
            s_live[i] = NULL;
}

static int
s_default(int value, int fallback)
{
    return value > 0 ? value : fallback;
}

shoal_cluster_t *
shoal_cluster_new(int nodes, const shoal_cluster_options_t *options)
{
    if (nodes < 1 || nodes > 250) {
        fprintf(stderr, "shoal_cluster_new: %d nodes (1 to 250)\n", nodes);
        return NULL;
    }
    shoal_cluster_t *self = (shoal_cluster_t *) calloc(1, sizeof *self);
    if (options)
        self->options = *options;
    shoal_cluster_options_t *o = &self->options;
    o->probe_interval_ms = s_default(o->probe_interval_ms, SHOAL_CLUSTER_PROBE_INTERVAL_MS);
    o->probe_timeout_ms = s_default(o->probe_timeout_ms, SHOAL_CLUSTER_PROBE_TIMEOUT_MS);
    o->suspect_timeout_ms = s_default(o->suspect_timeout_ms, SHOAL_CLUSTER_SUSPECT_TIMEOUT_MS);
    o->sync_interval_ms = s_default(o->sync_interval_ms, SHOAL_CLUSTER_SYNC_INTERVAL_MS);
    self->size = nodes;
    self->nodes = (s_node_t *) calloc((size_t) nodes, sizeof *self->nodes);
    snprintf(self->tag, sizeof self->tag, "%x%02x", (unsigned) getpid(), (unsigned) (s_serial++ & 0xff));
    s_register(self);

    //  The first cluster of a test lives in cluster/, a second in cluster2/...
    for (int k = 1; ; k++) {
        if (k == 1)
            snprintf(self->dir, sizeof self->dir, "%s/cluster", shoal_test_dir);
        else
            snprintf(self->dir, sizeof self->dir, "%s/cluster%d", shoal_test_dir, k);
        if (access(self->dir, F_OK) != 0)
            break;
    }
    snprintf(self->cluster_cert, sizeof self->cluster_cert, "%s/cluster.cert", self->dir);
    snprintf(self->admin_cert, sizeof self->admin_cert, "%s/admin.cert", self->dir);
    char *error = NULL;
    if (zsys_dir_create("%s", self->dir) != 0) {
        s_set_error(self, "cannot create %s: %s", self->dir, strerror(errno));
        goto failed;
    }
    if (shoal_keygen_cluster(self->cluster_cert, &error)
    ||  shoal_keygen_client(self->admin_cert, "admin", "admin", NULL, &error)) {
        s_set_error(self, "keygen: %s", error ? error : "failed");
        free(error);
        goto failed;
    }
    zcert_t *admin = zcert_load(self->admin_cert);
    if (!admin) {
        s_set_error(self, "cannot read %s", self->admin_cert);
        goto failed;
    }
    for (int i = 1; i <= nodes; i++) {
        s_node_t *node = s_node(self, i);
        node->index = i;
        snprintf(node->id, sizeof node->id, "n%d", i);
        snprintf(node->dir, sizeof node->dir, "%s/%s", self->dir, node->id);
        snprintf(node->data_dir, sizeof node->data_dir, "%s/data", node->dir);
        snprintf(node->clients_dir, sizeof node->clients_dir, "%s/clients", node->dir);
        snprintf(node->log_path, sizeof node->log_path, "%s/%s.log", self->dir, node->id);
        snprintf(node->cluster_cert, sizeof node->cluster_cert, "%s", self->cluster_cert);
        char published[S_FILE_MAX + 32];
        snprintf(published, sizeof published, "%s/admin.cert", node->clients_dir);
        if (zsys_dir_create("%s", node->clients_dir) != 0 || zcert_save_public(admin, published) != 0) {
            s_set_error(self, "cannot write %s: %s", published, strerror(errno));
            zcert_destroy(&admin);
            goto failed;
        }
        if (!o->namespaces) {
            //  The node's port for the cluster's life, its restarts included:
            //  reserved for this process, so no other node's, here or in
            //  another test process.
            int port = shoal_test_free_port();
            if (port <= 0) {
                s_set_error(self, "no free port for %s", node->id);
                zcert_destroy(&admin);
                goto failed;
            }
            snprintf(node->endpoint, sizeof node->endpoint, "tcp://127.0.0.1:%d", port);
        }
    }
    zcert_destroy(&admin);
    if (o->namespaces) {
        char why[512];
        if (!shoal_cluster_namespaces_available(why, sizeof why)) {
            s_set_error(self, "%s", why);
            goto failed;
        }
        if (s_network_up(self))
            goto failed;
    }
    return self;

failed:
    fprintf(stderr, "shoal_cluster_new: %s\n", self->error);
    shoal_cluster_destroy(&self);
    return NULL;
}

void
shoal_cluster_destroy(shoal_cluster_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    shoal_cluster_t *self = *self_p;
    for (int i = 1; i <= self->size; i++) {
        s_node_t *node = s_node(self, i);
        shoal_client_destroy(&node->client);
        if (node->pid > 0)
            shoal_test_stop(node->pid, SIGTERM);
        node->pid = 0;
    }
    if (self->options.namespaces)
        s_network_down(self);
    for (int i = 1; i <= self->size; i++) {
        s_node_t *node = s_node(self, i);
        for (int e = 0; e < node->env_count; e++)
            free(node->env[e]);
    }
    s_unregister(self);
    free(self->nodes);
    free(self);
    *self_p = NULL;
}

void
shoal_cluster_destroy_all(void)
{
    for (int i = 0; i < S_LIVE_MAX; i++)
        if (s_live[i]) {
            shoal_cluster_t *self = s_live[i];
            shoal_cluster_destroy(&self);
        }
}

const char *
shoal_cluster_error(shoal_cluster_t *self)
{
    return self ? self->error : "no cluster";
}

int
shoal_cluster_size(shoal_cluster_t *self)
{
    return self->size;
}

static bool
s_member(s_node_t *node)
{
    return node->pid > 0 && !node->stranger;
}

static shoal_client_t *
s_client_new(shoal_cluster_t *self, s_node_t *node, int timeout_ms)
{
    char *error = NULL;
    shoal_client_t *client = shoal_client_new(node->endpoint, self->admin_cert, node->cluster_cert, &error);
    if (client)
        shoal_client_set_timeout(client, timeout_ms);
    else {
        s_set_error(self, "cannot make a client of %s: %s", node->id, error ? error : "?");
        free(error);
    }
    return client;
}

//  Spawns node INDEX without waiting for it.
static int
s_spawn(shoal_cluster_t *self, s_node_t *node)
{
    shoal_cluster_options_t *o = &self->options;
    char env_text[S_ENV_MAX][S_FILE_MAX + 64];
    int count = 0;
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_NODE_ID=%s", node->id);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_NODE_BIND=%s", node->endpoint);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_NODE_ADVERTISE=%s", node->endpoint);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_NODE_DATA_DIR=%s", node->data_dir);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_SECURITY_CLUSTER_CERT=%s", node->cluster_cert);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_SECURITY_CLIENTS_DIR=%s", node->clients_dir);
    //  A node that cannot find its keys must fail, not make new ones.
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_SECURITY_GENERATE_KEYS=0");
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_MESH_JOIN=%s",
             node->index == 1 ? "" : self->nodes[0].endpoint);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_MESH_PROBE_INTERVAL_MS=%d", o->probe_interval_ms);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_MESH_PROBE_TIMEOUT_MS=%d", o->probe_timeout_ms);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_MESH_SUSPECT_TIMEOUT_MS=%d", o->suspect_timeout_ms);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_MESH_SYNC_INTERVAL_MS=%d", o->sync_interval_ms);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_OPLOG_RETENTION_MS=%" PRId64, o->retention_ms);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_STORE_SYNC=%d", o->no_store_sync ? 0 : 1);
    snprintf(env_text[count++], sizeof env_text[0], "SHOAL_LOG_VERBOSE=%d", o->verbose ? 1 : 0);
    char *env[S_ENV_MAX * 2 + 1];
    int used = 0;
    for (int i = 0; i < count; i++)
        env[used++] = env_text[i];
    for (int i = 0; i < node->env_count; i++)
        env[used++] = node->env[i];
    env[used] = NULL;

    char *shoald = shoal_strdup(shoal_test_program("shoald"));
    char *plain[] = { shoald, NULL };
    char *in_netns[] = { s_ip_path, "netns", "exec", node->netns, shoald, NULL };
    FILE *log = fopen(node->log_path, "a");
    if (log) {
        fprintf(log, "---- shoal_cluster: starting %s at %s%s%s\n", node->id, node->endpoint,
                self->options.namespaces ? " in namespace " : "", node->netns);
        fclose(log);
    }
    //  ip netns exec replaces itself with shoald, so the pid is shoald's.
    node->pid = shoal_test_spawn(self->options.namespaces ? in_netns : plain, env, node->log_path);
    free(shoald);
    if (node->pid < 0) {
        node->pid = 0;
        s_set_error(self, "cannot start %s: %s", node->id, strerror(errno));
        return -1;
    }
    return 0;
}

//  Waits until NODE answers status with 200.
static int
s_wait_ready(shoal_cluster_t *self, s_node_t *node)
{
    int64_t started = shoal_test_now_ms();
    int64_t deadline = started + S_START_TIMEOUT_MS;
    shoal_client_t *probe = s_client_new(self, node, S_PROBE_TIMEOUT_MS);
    char last[512] = "no answer yet";
    int rc = -1;
    while (probe && shoal_test_now_ms() < deadline) {
        int code = shoal_test_wait(node->pid, 0);
        if (code != -1) {
            char tail[S_LOG_TAIL + 1];
            s_log_tail(node, tail, sizeof tail);
            s_set_error(self, "%s exited with %d while starting; its log ends:\n%s", node->id, code, tail);
            node->pid = 0;
            break;
        }
        shoal_status_t status;
        int answer = shoal_client_status(probe, &status);
        if (answer == 200) {
            shoal_status_clear(&status);
            rc = 0;
            break;
        }
        snprintf(last, sizeof last, "%d: %s", answer, shoal_client_error(probe));
        usleep(S_POLL_MS * 1000);
    }
    shoal_client_destroy(&probe);
    if (self->options.namespaces)
        s_signals_hook();
    if (rc && node->pid > 0) {
        char tail[S_LOG_TAIL + 1];
        s_log_tail(node, tail, sizeof tail);
        s_set_error(self, "%s did not answer status within %d ms (last: %s); its log ends:\n%s", node->id,
                    S_START_TIMEOUT_MS, last, tail);
    }
    return rc;
}

int
shoal_cluster_node_start(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return -1;
    if (node->pid > 0) {
        s_set_error(self, "%s is already running (pid %d)", node->id, (int) node->pid);
        return -1;
    }
    shoal_client_destroy(&node->client);
    if (s_spawn(self, node) || s_wait_ready(self, node))
        return -1;
    return 0;
}

int
shoal_cluster_start(shoal_cluster_t *self)
{
    //  The seed first, since the others join through it; then the rest
    //  together, each waited for in turn.
    if (!shoal_cluster_node_running(self, 1) && shoal_cluster_node_start(self, 1))
        return -1;
    for (int i = 2; i <= self->size; i++)
        if (self->nodes[i - 1].pid <= 0 && s_spawn(self, &self->nodes[i - 1]))
            return -1;
    for (int i = 2; i <= self->size; i++)
        if (s_wait_ready(self, &self->nodes[i - 1]))
            return -1;
    return 0;
}

int
shoal_cluster_node_kill(shoal_cluster_t *self, int index, int signal_number)
{
    s_node_t *node = s_node(self, index);
    if (!node || node->pid <= 0) {
        s_set_error(self, "node %d is not running", index);
        return -1;
    }
    int code = shoal_test_stop(node->pid, signal_number);
    node->pid = 0;
    return code;
}

int
shoal_cluster_node_restart(shoal_cluster_t *self, int index)
{
    if (shoal_cluster_node_running(self, index))
        shoal_cluster_node_kill(self, index, SIGTERM);
    return shoal_cluster_node_start(self, index);
}

bool
shoal_cluster_node_running(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node && node->pid > 0;
}

int
shoal_cluster_node_setenv(shoal_cluster_t *self, int index, const char *name, const char *value)
{
    s_node_t *node = s_node(self, index);
    if (!node || node->env_count >= S_ENV_MAX) {
        s_set_error(self, "cannot set %s on node %d", name, index);
        return -1;
    }
    node->env[node->env_count++] = zsys_sprintf("%s=%s", name, value);
    return 0;
}

int
shoal_cluster_node_set_cluster_cert(shoal_cluster_t *self, int index, const char *cert_path)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return -1;
    snprintf(node->cluster_cert, sizeof node->cluster_cert, "%s", cert_path);
    node->stranger = strcmp(cert_path, self->cluster_cert) != 0;
    shoal_client_destroy(&node->client);
    return 0;
}

static int
s_cut_set(shoal_cluster_t *self, int index, bool cut)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return -1;
    if (!self->options.namespaces) {
        s_set_error(self, "cutting %s off needs namespace mode (options.namespaces)", node->id);
        return -1;
    }
    if (node->cut == cut)
        return 0;
    if (s_run(self, "%s netns exec %s %s %s element bridge shoal cut { %s }", s_ip_path, self->hub, s_nft_path,
              cut ? "add" : "delete", node->id))
        return -1;
    node->cut = cut;
    return 0;
}

int
shoal_cluster_cut(shoal_cluster_t *self, int index)
{
    return s_cut_set(self, index, true);
}

int
shoal_cluster_heal(shoal_cluster_t *self, int index)
{
    return s_cut_set(self, index, false);
}

int
shoal_cluster_limit_rate(shoal_cluster_t *self, int index, int rate_mbit)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return -1;
    if (!self->options.namespaces) {
        s_set_error(self, "limiting %s's link needs namespace mode (options.namespaces)", node->id);
        return -1;
    }
    static char tc[64];
    if (!*tc && !s_find_program("tc", tc, sizeof tc)) {
        s_set_error(self, "limiting a link needs the tc command (iproute2), not found");
        return -1;
    }
    //  A token bucket on each end of the node's veth pair: on eth0 in its
    //  namespace for what it sends, on its port of the hub for what it
    //  receives. The burst is what the rate carries in S_SHAPE_BURST_MS,
    //  the queue what it carries in S_SHAPE_LATENCY_MS: a link, not a wall.
    int burst_kbit = rate_mbit * S_SHAPE_BURST_MS;
    if (s_run(self, "%s -n %s qdisc replace dev eth0 root tbf rate %dmbit burst %dkbit latency %dms", tc,
              node->netns, rate_mbit, burst_kbit, S_SHAPE_LATENCY_MS)
    ||  s_run(self, "%s -n %s qdisc replace dev %s root tbf rate %dmbit burst %dkbit latency %dms", tc, self->hub,
              node->id, rate_mbit, burst_kbit, S_SHAPE_LATENCY_MS))
        return -1;
    return 0;
}

const char *
shoal_cluster_node_id(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->id : NULL;
}

const char *
shoal_cluster_endpoint(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->endpoint : NULL;
}

const char *
shoal_cluster_log_path(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->log_path : NULL;
}

const char *
shoal_cluster_data_dir(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->data_dir : NULL;
}

pid_t
shoal_cluster_node_pid(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->pid : 0;
}

const char *
shoal_cluster_netns(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? node->netns : NULL;
}

const char *
shoal_cluster_admin_cert(shoal_cluster_t *self)
{
    return self->admin_cert;
}

const char *
shoal_cluster_cluster_cert(shoal_cluster_t *self)
{
    return self->cluster_cert;
}

shoal_client_t *
shoal_cluster_client(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return NULL;
    if (!node->client)
        node->client = s_client_new(self, node, S_CLIENT_TIMEOUT_MS);
    return node->client;
}

shoal_client_t *
shoal_cluster_client_new(shoal_cluster_t *self, int index)
{
    s_node_t *node = s_node(self, index);
    return node ? s_client_new(self, node, SHOAL_DEFAULT_TIMEOUT_MS) : NULL;
}

int
shoal_cluster_ctl(shoal_cluster_t *self, int index, char **output_p, ...)
{
    s_node_t *node = s_node(self, index);
    if (!node)
        return -1;
    char *argv[S_ARGS_MAX];
    int argc = 0;
    argv[argc++] = shoal_strdup(shoal_test_program("shoalctl"));
    argv[argc++] = "--endpoint";
    argv[argc++] = node->endpoint;
    argv[argc++] = "--cert";
    argv[argc++] = self->admin_cert;
    argv[argc++] = "--cluster-key";
    argv[argc++] = node->cluster_cert;
    va_list args;
    va_start(args, output_p);
    for (char *arg = va_arg(args, char *); arg && argc < S_ARGS_MAX - 1; arg = va_arg(args, char *))
        argv[argc++] = arg;
    va_end(args);
    argv[argc] = NULL;
    int code = shoal_test_capture(argv, NULL, S_CTL_TIMEOUT_MS, output_p);
    free(argv[0]);
    return code;
}

//  Looks TARGET up in OBSERVER's peer list.
int
shoal_cluster_peer_state(shoal_cluster_t *self, int observer, int target, char *state, size_t state_size,
                         uint64_t *incarnation)
{
    s_node_t *from = s_node(self, observer);
    s_node_t *to = s_node(self, target);
    shoal_client_t *client = shoal_cluster_client(self, observer);
    if (!from || !to || !client)
        return -1;
    shoal_peer_list_t peers = { 0 };
    int rc = shoal_client_peers(client, &peers);
    if (rc != 200) {
        s_set_error(self, "peers of %s: %d %s", from->id, rc, shoal_client_error(client));
        snprintf(state, state_size, "unknown (%s did not answer)", from->id);
        return -1;
    }
    snprintf(state, state_size, "absent");
    if (incarnation)
        *incarnation = 0;
    for (size_t i = 0; i < peers.count; i++)
        if (peers.peers[i].node_id && strcmp(peers.peers[i].node_id, to->id) == 0) {
            snprintf(state, state_size, "%s", peers.peers[i].state ? peers.peers[i].state : "(none)");
            if (incarnation)
                *incarnation = peers.peers[i].incarnation;
        }
    shoal_peer_list_clear(&peers);
    return 0;
}

int
shoal_cluster_wait_until(shoal_cluster_t *self, shoal_cluster_predicate_fn *predicate, void *arg,
                         int timeout_ms, const char *what)
{
    int64_t started = shoal_test_now_ms();
    int64_t deadline = started + timeout_ms;
    char why[S_ERROR_MAX / 2] = "nothing yet";
    while (true) {
        why[0] = 0;
        if (predicate(self, arg, why, sizeof why))
            return 0;
        if (shoal_test_now_ms() >= deadline)
            break;
        usleep(S_POLL_MS * 1000);
    }
    s_set_error(self, "waited %" PRId64 " ms for %s; last seen: %s", shoal_test_now_ms() - started, what,
                *why ? why : "(no detail)");
    return -1;
}

//  Members the all-node waits look at: running, same cluster key, not cut.
static bool
s_in_view(s_node_t *node)
{
    return s_member(node) && !node->cut;
}

static bool
s_all_alive(shoal_cluster_t *self, void *arg, char *why, size_t why_size)
{
    for (int o = 1; o <= self->size; o++) {
        if (!s_in_view(s_node(self, o)))
            continue;
        for (int t = 1; t <= self->size; t++) {
            if (t == o || !s_in_view(s_node(self, t)))
                continue;
            char state[128];
            shoal_cluster_peer_state(self, o, t, state, sizeof state, NULL);
            if (strcmp(state, "alive") != 0) {
                snprintf(why, why_size, "%s sees %s as %s", self->nodes[o - 1].id, self->nodes[t - 1].id, state);
                return false;
            }
        }
    }
    return true;
}

int
shoal_cluster_wait_all_alive(shoal_cluster_t *self, int timeout_ms)
{
    return shoal_cluster_wait_until(self, s_all_alive, NULL, timeout_ms, "every node to list every other as alive");
}

int
shoal_cluster_up(shoal_cluster_t *self, int timeout_ms)
{
    return shoal_cluster_start(self) == 0 ? shoal_cluster_wait_all_alive(self, timeout_ms) : -1;
}

typedef struct {
    int observer;
    int target;
    const char *state;
} s_state_wait_t;

static bool
s_state_is(shoal_cluster_t *self, void *arg, char *why, size_t why_size)
{
    s_state_wait_t *wait = (s_state_wait_t *) arg;
    char state[128];
    uint64_t incarnation = 0;
    shoal_cluster_peer_state(self, wait->observer, wait->target, state, sizeof state, &incarnation);
    snprintf(why, why_size, "%s (incarnation %" PRIu64 ")", state, incarnation);
    return strcmp(state, wait->state) == 0;
}

int
shoal_cluster_wait_state(shoal_cluster_t *self, int observer, int target, const char *state, int timeout_ms)
{
    if (!s_node(self, observer) || !s_node(self, target))
        return -1;
    s_state_wait_t wait = { observer, target, state };
    char what[128];
    snprintf(what, sizeof what, "%s to see %s as %s", self->nodes[observer - 1].id, self->nodes[target - 1].id,
             state);
    return shoal_cluster_wait_until(self, s_state_is, &wait, timeout_ms, what);
}

static int
s_compare_lines(void *a, void *b)
{
    return strcmp((const char *) a, (const char *) b);
}

//  Node INDEX's heads of DATASET as sorted "node hash" lines (caller frees).
static int
s_heads_text(shoal_cluster_t *self, int index, const char *dataset, char **text_p)
{
    shoal_client_t *client = shoal_cluster_client(self, index);
    shoal_head_list_t heads = { 0 };
    int rc = client ? shoal_client_oplog_heads(client, dataset, &heads) : -1;
    //  A dataset nobody wrote to yet has no heads: 404 is an empty list.
    if (rc == 404) {
        *text_p = shoal_strdup("");
        return 0;
    }
    if (rc != 200) {
        s_set_error(self, "oplog heads of %s: %d %s", self->nodes[index - 1].id, rc,
                    client ? shoal_client_error(client) : "no client");
        return -1;
    }
    zlist_t *lines = zlist_new();
    zlist_autofree(lines);
    for (size_t i = 0; i < heads.count; i++) {
        char line[256];
        snprintf(line, sizeof line, "%s:%s ", heads.heads[i].node ? heads.heads[i].node : "?", heads.heads[i].hash);
        zlist_append(lines, line);
    }
    zlist_sort(lines, s_compare_lines);
    size_t size = 1;
    for (char *line = (char *) zlist_first(lines); line; line = (char *) zlist_next(lines))
        size += strlen(line);
    char *text = (char *) calloc(1, size);
    for (char *line = (char *) zlist_first(lines); line; line = (char *) zlist_next(lines))
        strcat(text, line);
    zlist_destroy(&lines);
    shoal_head_list_clear(&heads);
    *text_p = text;
    return 0;
}

//  Node INDEX's live keys of DATASET with PREFIX as "key hash" lines in key
//  order (caller frees); *COUNT_P gets their number.
static int
s_kv_text(shoal_cluster_t *self, int index, const char *dataset, const char *prefix, char **text_p,
          size_t *count_p)
{
    shoal_client_t *client = shoal_cluster_client(self, index);
    if (!client)
        return -1;
    size_t capacity = 4096, used = 0, count = 0;
    char *text = (char *) malloc(capacity);
    text[0] = 0;
    char *after = NULL;
    int rc = 0;
    while (true) {
        shoal_kv_page_t page = { 0 };
        int answer = shoal_client_kv_scan(client, dataset, prefix, after, S_SCAN_PAGE, &page);
        if (answer == 404 && !after)
            break;              //  no such dataset yet: no keys
        if (answer != 200) {
            s_set_error(self, "kv scan of %s on %s: %d %s", dataset, self->nodes[index - 1].id, answer,
                        shoal_client_error(client));
            rc = -1;
            break;
        }
        for (size_t i = 0; i < page.count; i++) {
            size_t need = strlen(page.items[i].key) + 64 + 8;
            if (used + need + 1 > capacity) {
                while (used + need + 1 > capacity)
                    capacity *= 2;
                text = (char *) realloc(text, capacity);
            }
            used += (size_t) snprintf(text + used, capacity - used, "%s %s\n", page.items[i].key, page.items[i].hash);
            count++;
        }
        bool more = page.more && page.count > 0;
        free(after);
        after = page.count ? shoal_strdup(page.items[page.count - 1].key) : NULL;
        shoal_kv_page_clear(&page);
        if (!more)
            break;
    }
    free(after);
    if (rc) {
        free(text);
        return -1;
    }
    *text_p = text;
    if (count_p)
        *count_p = count;
    return 0;
}

int
shoal_cluster_kv_count(shoal_cluster_t *self, int index, const char *dataset, const char *prefix, size_t *count)
{
    char *text = NULL;
    if (s_kv_text(self, index, dataset, prefix, &text, count))
        return -1;
    free(text);
    return 0;
}

//  The first line where A and B differ, for a message.
static void
s_first_difference(const char *a, const char *b, char *out, size_t out_size)
{
    size_t at = 0;
    while (a[at] && a[at] == b[at])
        at++;
    while (at > 0 && a[at - 1] != '\n')
        at--;
    int a_len = (int) (strchr(a + at, '\n') ? strchr(a + at, '\n') - (a + at) : (long) strlen(a + at));
    int b_len = (int) (strchr(b + at, '\n') ? strchr(b + at, '\n') - (b + at) : (long) strlen(b + at));
    snprintf(out, out_size, "'%.*s' vs '%.*s'", a_len > 120 ? 120 : a_len, a + at, b_len > 120 ? 120 : b_len,
             b + at);
}

static bool
s_converged(shoal_cluster_t *self, void *arg, char *why, size_t why_size)
{
    const char *dataset = (const char *) arg;
    int first = 0;
    char *first_heads = NULL;
    bool same = true;
    int *view = (int *) calloc((size_t) self->size, sizeof *view);
    int viewed = 0;
    for (int i = 1; i <= self->size; i++)
        if (s_in_view(s_node(self, i)))
            view[viewed++] = i;
    //  Heads first: cheap, and the keys can only match once they do.
    for (int v = 0; v < viewed && same; v++) {
        char *heads = NULL;
        if (s_heads_text(self, view[v], dataset, &heads)) {
            s_copy(why, why_size, self->error);
            same = false;
            break;
        }
        if (!first_heads) {
            first = view[v];
            first_heads = heads;
            continue;
        }
        if (strcmp(heads, first_heads) != 0) {
            snprintf(why, why_size, "heads differ: %s has [%.400s], %s has [%.400s]", self->nodes[first - 1].id,
                     first_heads, self->nodes[view[v] - 1].id, heads);
            same = false;
        }
        free(heads);
    }
    free(first_heads);
    char *first_keys = NULL;
    size_t first_count = 0;
    for (int v = 0; v < viewed && same; v++) {
        char *keys = NULL;
        size_t count = 0;
        if (s_kv_text(self, view[v], dataset, NULL, &keys, &count)) {
            s_copy(why, why_size, self->error);
            same = false;
            break;
        }
        if (!first_keys) {
            first = view[v];
            first_keys = keys;
            first_count = count;
            continue;
        }
        if (strcmp(keys, first_keys) != 0) {
            char difference[400];
            s_first_difference(first_keys, keys, difference, sizeof difference);
            snprintf(why, why_size, "heads agree but keys differ: %s has %zu keys, %s has %zu; first difference %s",
                     self->nodes[first - 1].id, first_count, self->nodes[view[v] - 1].id, count, difference);
            same = false;
        }
        free(keys);
    }
    free(first_keys);
    free(view);
    return same;
}

int
shoal_cluster_wait_converged(shoal_cluster_t *self, const char *dataset, int timeout_ms)
{
    char what[256];
    snprintf(what, sizeof what, "every node to hold the same heads and keys of dataset '%s'", dataset);
    return shoal_cluster_wait_until(self, s_converged, (void *) dataset, timeout_ms, what);
}
