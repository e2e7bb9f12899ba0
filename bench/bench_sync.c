/*  bench_sync: a joining peer catching up, against a raw CURVE transfer of
    the same bytes.

    Usage: bench_sync [COUNT]   (default 1,000,000 entries)
           shoald is looked for in $SHOAL_BIN_DIR, else beside this program;
           BENCH_KEEP=1 keeps the work directory (node logs) of a failed run;
           SHOAL_MESH_SYNC_INTERVAL_MS (and any other SHOAL_* setting the
           bench does not fix) passes through to both nodes.

    Node n1's data directory is written offline: COUNT entries of n1 with
    200-byte values, spread over BENCH_DATASETS datasets, appended in chain
    order through shoal_oplog_append_batch with fsync off. Both nodes serve
    with one cluster key and admit one admin client key. n1 starts (store
    sync on, its default) and is waited for until it answers status. Then,
    BENCH_REPS times, a fresh n2 (empty data directory, store sync on) joins
    n1 and catches up by sync's pull: heads exchange, then pages of
    SHOAL_SYNC_PAGE_ENTRIES entries or SHOAL_SYNC_PAGE_BYTES, one page in
    flight per (dataset, origin), so BENCH_DATASETS pages in flight here.
    Catch-up is timed from n2's spawn (and, printed beside it, from its first
    status answer) until its heads equal n1's for every dataset, polled every
    BENCH_POLL_MS; its entry counts are checked afterwards, untimed.

    The bytes of catch-up are the protobuf-encoded size of every entry (what
    oplog_by_hash stores and what a page carries, without the page's few
    bytes of framing). In the same repetition, two forked processes move the
    same number of bytes over CURVE on tcp loopback with plain libzmq:
      paged   DEALER asks, ROUTER answers with one page-sized message
              (ordinary zmq_send), BENCH_DATASETS requests in flight: the
              shape of sync's pull, so the fair limit. The expectation
              (catch-up at BENCH_EXPECTED_RATIO of raw or more) is judged
              against this one.
      stream  PUSH to PULL, 1 MiB messages sent zero-copy
              (zmq_msg_init_data), no pacing: the ceiling limits.md quotes.
    Both raw sides take the same mallopt settings as shoald. The machine is
    noisy (limits.md): compare ratios within one repetition, read medians.
*/
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal.h"
#include "shoal_oplog.h"
#include "shoal_store.h"
#include "shoal_sync.h"

#define BENCH_DEFAULT_COUNT 1000000
#define BENCH_DATASETS 4
#define BENCH_VALUE_SIZE 200
#define BENCH_KEY_SIZE 32
#define BENCH_BATCH 1000
#define BENCH_REPS 3
#define BENCH_EXPECTED_RATIO 0.30
//  The mesh's sync interval: how soon a missed pull is retried, and how long
//  a pull waits for its page. The environment may override it.
#define BENCH_SYNC_INTERVAL_MS "200"
//  How often n2's heads are compared with n1's while it catches up.
#define BENCH_POLL_MS 50
//  How often a starting node is asked for its status.
#define BENCH_STATUS_POLL_MS 20
#define BENCH_STATUS_TIMEOUT_MS 500
#define BENCH_HEADS_TIMEOUT_MS 2000
//  Counting a million entries takes a while: the untimed check waits longer.
#define BENCH_STATS_TIMEOUT_MS 120000
//  n1 reconciles its whole log before it serves.
#define BENCH_START_TIMEOUT_MS 600000
#define BENCH_CATCHUP_TIMEOUT_MS 900000
//  Catch-up is given up when n2 gains no entry for this long.
#define BENCH_STALL_MS 60000
#define BENCH_STOP_TIMEOUT_MS 10000
#define BENCH_RAW_TIMEOUT_MS 300000
//  A progress line at most this often during catch-up.
#define BENCH_PROGRESS_MS 5000
#define BENCH_STREAM_MESSAGE (1024 * 1024)
//  The work directory's path, and room for any path under it.
#define BENCH_ROOT_MAX 4000
#define BENCH_PATH_MAX 4200
#define BENCH_LOG_TAIL 1500
//  As shoald sets them (node/shoald.c).
#define BENCH_MMAP_THRESHOLD (64 * 1024 * 1024)
#define BENCH_TRIM_THRESHOLD (256 * 1024 * 1024)
#define BENCH_Z85_SIZE 41
#define BENCH_ENDPOINT_MAX 256
#define MS_PER_S 1000
#define NS_PER_S 1e9
#define BYTES_PER_MB 1e6

//  The raw requests of the paged transfer.
#define BENCH_RAW_PING 'p'
#define BENCH_RAW_PAGE 'g'
#define BENCH_RAW_BYE 'b'

//  What the offline writer produced, for the checks and the raw transfers.
typedef struct {
    size_t count;                       //  entries written
    size_t per_dataset[BENCH_DATASETS]; //  of which in each dataset
    uint64_t start_ms;                  //  stamp of entry 0; entry i is stamped start_ms + i
    uint64_t bytes;                     //  sum of the protobuf-encoded entry sizes
    size_t page_bytes;                  //  bytes of a full sync page of these entries
} bench_data_t;

//  One shoald the bench started.
typedef struct {
    const char *id;                     //  node id
    char dir[BENCH_PATH_MAX];           //  its data directory
    char clients_dir[BENCH_PATH_MAX];   //  its admitted client keys
    char log_path[BENCH_PATH_MAX];      //  its stdout and stderr
    char endpoint[64];                  //  where it binds
    pid_t pid;                          //  running process, 0 when stopped
} bench_node_t;

//  Paths and processes of one run.
typedef struct {
    char root[BENCH_ROOT_MAX];          //  the temporary directory everything lives in
    char shoald[BENCH_PATH_MAX];        //  the node program
    char cluster_cert[BENCH_PATH_MAX];  //  the cluster key both nodes serve with
    char admin_cert[BENCH_PATH_MAX];    //  the admin client both nodes admit
    bench_node_t n1;                    //  the node holding the log
    bench_node_t n2;                    //  the joining node, fresh each repetition
} bench_t;

//  One repetition's figures; seconds are -1 when not measured.
typedef struct {
    double raw_paged;                   //  seconds of the paged raw transfer
    double raw_stream;                  //  seconds of the zero-copy stream
    double to_status;                   //  n2's spawn to its first status answer
    double to_first;                    //  n2's spawn to its first entry seen
    double catchup;                     //  n2's spawn to heads equal
} bench_rep_t;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / NS_PER_S;
}

static void
s_sleep_ms(int ms)
{
    struct timespec ts = { ms / MS_PER_S, (long) (ms % MS_PER_S) * 1000000L };
    nanosleep(&ts, NULL);
}

static uint64_t
s_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int
s_compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
s_median(const double *values, size_t count)
{
    double sorted[BENCH_REPS];
    memcpy(sorted, values, count * sizeof *values);
    qsort(sorted, count, sizeof *sorted, s_compare_double);
    return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
}

static int
s_free_port(void)
{
    zsock_t *probe = zsock_new(ZMQ_PAIR);
    int port = probe ? zsock_bind(probe, "tcp://127.0.0.1:*") : -1;
    zsock_destroy(&probe);
    return port;
}

static void
s_remove_tree(const char *dir)
{
    char command[BENCH_PATH_MAX + 16];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

// ---------------------------------------------------------------------------
//  n1's log, written offline

static void
s_dataset_name(size_t dataset, char *name, size_t size)
{
    snprintf(name, size, "sync%zu", dataset);
}

//  Appends COUNT entries of node n1 to the store in DB_DIR, entry I in
//  dataset I % BENCH_DATASETS, each dataset one chain; fills DATA.
static int
s_write_log(const char *db_dir, size_t count, bench_data_t *data)
{
    memset(data, 0, sizeof *data);
    data->count = count;
    //  Stamps end well before now, so any clock accepts them.
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    data->start_ms = (uint64_t) ts.tv_sec * MS_PER_S - count - MS_PER_S * 60;

    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    shoal_store_t *store = shoal_store_new(db_dir, &store_options, NULL);
    shoal_oplog_options_t oplog_options;
    shoal_oplog_options_default(&oplog_options);
    oplog_options.sync = false;
    oplog_options.node = "n1";
    shoal_oplog_t *oplog = store ? shoal_oplog_new(store, &oplog_options) : NULL;
    if (!oplog) {
        shoal_store_destroy(&store);
        return -1;
    }
    char names[BENCH_DATASETS][16];
    bool has_prev[BENCH_DATASETS] = { false };
    uint8_t prev[BENCH_DATASETS][SHOAL_HASH_SIZE];
    for (size_t d = 0; d < BENCH_DATASETS; d++)
        s_dataset_name(d, names[d], sizeof names[d]);
    shoal_oplog_entry_t *batch = calloc(BENCH_BATCH, sizeof *batch);
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        batch[i].key = malloc(BENCH_KEY_SIZE);
        batch[i].value = malloc(BENCH_VALUE_SIZE);
    }
    int rc = 0;
    double started = s_now(), reported = started;
    for (size_t done = 0; done < count && rc == 0; ) {
        size_t used = count - done < BENCH_BATCH ? count - done : BENCH_BATCH;
        for (size_t b = 0; b < used; b++) {
            size_t index = done + b, d = index % BENCH_DATASETS;
            shoal_oplog_entry_t *entry = &batch[b];
            uint64_t state = index;
            for (size_t j = 0; j < BENCH_VALUE_SIZE; j += sizeof(uint64_t)) {
                uint64_t word = s_random(&state);
                memcpy(entry->value + j, &word, sizeof word);
            }
            entry->dataset = names[d];
            entry->value_size = BENCH_VALUE_SIZE;
            snprintf(entry->key, BENCH_KEY_SIZE, "key/%010zu", index);
            entry->op = SHOAL_OPLOG_PUT;
            entry->wall_ms = data->start_ms + index;
            entry->logic = 0;
            entry->node = "n1";
            entry->has_prev = has_prev[d];
            memcpy(entry->prev_hash, prev[d], SHOAL_HASH_SIZE);
            shoal_oplog_entry_hash(entry, entry->hash);
            has_prev[d] = true;
            memcpy(prev[d], entry->hash, SHOAL_HASH_SIZE);
            data->per_dataset[d]++;
            uint8_t *encoded = NULL;
            size_t size = 0;
            char error[256];
            if (shoal_oplog_entry_codec.encode(entry, &encoded, &size, error, sizeof error)) {
                fprintf(stderr, "encode entry %zu: %s\n", index, error);
                rc = -1;
            }
            free(encoded);
            data->bytes += size;
        }
        size_t added = 0;
        if (rc == 0 && (shoal_oplog_append_batch(oplog, batch, used, &added) || added != used)) {
            fprintf(stderr, "append at entry %zu: %s\n", done, shoal_oplog_error(oplog));
            rc = -1;
        }
        done += used;
        if (s_now() - reported >= (double) BENCH_PROGRESS_MS / MS_PER_S) {
            reported = s_now();
            printf("  written %zu of %zu entries (%.0f entries/s)\n", done, count,
                   (double) done / (reported - started));
            fflush(stdout);
        }
    }
    for (size_t i = 0; i < BENCH_BATCH; i++) {
        free(batch[i].key);
        free(batch[i].value);
    }
    free(batch);
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    //  A page holds SHOAL_SYNC_PAGE_ENTRIES entries unless they pass SHOAL_SYNC_PAGE_BYTES.
    double mean = (double) data->bytes / (double) count;
    double page = mean * SHOAL_SYNC_PAGE_ENTRIES;
    data->page_bytes = (size_t) (page < SHOAL_SYNC_PAGE_BYTES ? page : SHOAL_SYNC_PAGE_BYTES);
    if (rc == 0)
        printf("  wrote %zu entries in %.1f s, %.1f MB encoded (%.0f bytes each), sync page %zu bytes\n",
               count, s_now() - started, (double) data->bytes / BYTES_PER_MB, mean, data->page_bytes);
    return rc;
}

// ---------------------------------------------------------------------------
//  shoald processes

//  Forks a child that dies with the bench (so an interrupted run leaves no
//  node behind). Returns the pid in the parent, 0 in the child, -1.
static pid_t
s_fork_bound(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

static int
s_node_spawn(bench_t *bench, bench_node_t *node, const char *join)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = s_fork_bound();
    if (pid < 0) {
        fprintf(stderr, "cannot fork %s: %s\n", node->id, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(node->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        char data_dir[BENCH_PATH_MAX + 8];
        snprintf(data_dir, sizeof data_dir, "%s/data", node->dir);
        setenv("SHOAL_NODE_ID", node->id, 1);
        setenv("SHOAL_NODE_BIND", node->endpoint, 1);
        setenv("SHOAL_NODE_ADVERTISE", node->endpoint, 1);
        setenv("SHOAL_NODE_DATA_DIR", data_dir, 1);
        setenv("SHOAL_SECURITY_CLUSTER_CERT", bench->cluster_cert, 1);
        setenv("SHOAL_SECURITY_CLIENTS_DIR", node->clients_dir, 1);
        setenv("SHOAL_SECURITY_GENERATE_KEYS", "0", 1);
        setenv("SHOAL_MESH_JOIN", join, 1);
        setenv("SHOAL_MESH_SYNC_INTERVAL_MS", BENCH_SYNC_INTERVAL_MS, 0);
        setenv("SHOAL_STORE_SYNC", "1", 0);
        char *argv[] = { bench->shoald, NULL };
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    node->pid = pid;
    return 0;
}

//  Waits up to TIMEOUT_MS for PID; returns its exit status text's code or -1.
static int
s_wait_pid(pid_t pid, int timeout_ms)
{
    double deadline = s_now() + (double) timeout_ms / MS_PER_S;
    while (true) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (done < 0 || s_now() >= deadline)
            return -1;
        s_sleep_ms(BENCH_STATUS_POLL_MS);
    }
}

//  SIGTERM, then SIGKILL after BENCH_STOP_TIMEOUT_MS.
static void
s_stop(pid_t *pid_p, const char *what)
{
    if (*pid_p <= 0)
        return;
    kill(*pid_p, SIGTERM);
    if (s_wait_pid(*pid_p, BENCH_STOP_TIMEOUT_MS) == -1) {
        fprintf(stderr, "%s did not stop within %d ms: killing it\n", what, BENCH_STOP_TIMEOUT_MS);
        kill(*pid_p, SIGKILL);
        s_wait_pid(*pid_p, BENCH_STOP_TIMEOUT_MS);
    }
    *pid_p = 0;
}

static void
s_log_tail(const bench_node_t *node)
{
    FILE *file = fopen(node->log_path, "rb");
    if (!file)
        return;
    char tail[BENCH_LOG_TAIL + 1];
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, size > BENCH_LOG_TAIL ? size - BENCH_LOG_TAIL : 0, SEEK_SET);
    size_t got = fread(tail, 1, BENCH_LOG_TAIL, file);
    tail[got] = 0;
    fclose(file);
    fprintf(stderr, "---- %s's log ends:\n%s\n----\n", node->id, tail);
}

static shoal_client_t *
s_client_new(bench_t *bench, const bench_node_t *node, int timeout_ms)
{
    char *error = NULL;
    shoal_client_t *client = shoal_client_new(node->endpoint, bench->admin_cert, bench->cluster_cert, &error);
    if (!client) {
        fprintf(stderr, "client of %s: %s\n", node->id, error ? error : "?");
        free(error);
        return NULL;
    }
    shoal_client_set_timeout(client, timeout_ms);
    return client;
}

//  Waits until NODE answers status. Returns 0, or -1 when it exited or the
//  time ran out.
static int
s_wait_status(bench_t *bench, bench_node_t *node, int timeout_ms)
{
    shoal_client_t *client = s_client_new(bench, node, BENCH_STATUS_TIMEOUT_MS);
    double deadline = s_now() + (double) timeout_ms / MS_PER_S;
    int rc = -1;
    while (client && s_now() < deadline) {
        int status;
        if (waitpid(node->pid, &status, WNOHANG) == node->pid) {
            fprintf(stderr, "%s exited while starting\n", node->id);
            node->pid = 0;
            s_log_tail(node);
            break;
        }
        shoal_status_t answer;
        if (shoal_client_status(client, &answer) == 200) {
            shoal_status_clear(&answer);
            rc = 0;
            break;
        }
        s_sleep_ms(BENCH_STATUS_POLL_MS);
    }
    if (rc && node->pid > 0) {
        fprintf(stderr, "%s did not answer status within %d ms\n", node->id, timeout_ms);
        s_log_tail(node);
    }
    shoal_client_destroy(&client);
    return rc;
}

static int
s_node_prepare(bench_t *bench, bench_node_t *node, const char *id)
{
    node->id = id;
    snprintf(node->dir, sizeof node->dir, "%s/%s", bench->root, id);
    snprintf(node->clients_dir, sizeof node->clients_dir, "%s/%s/clients", bench->root, id);
    snprintf(node->log_path, sizeof node->log_path, "%s/%s.log", bench->root, id);
    int port = s_free_port();
    snprintf(node->endpoint, sizeof node->endpoint, "tcp://127.0.0.1:%d", port);
    char published[BENCH_PATH_MAX + 16];
    snprintf(published, sizeof published, "%s/admin.cert", node->clients_dir);
    zcert_t *admin = zcert_load(bench->admin_cert);
    int rc = port > 0 && admin && zsys_dir_create("%s", node->clients_dir) == 0
          && zcert_save_public(admin, published) == 0 ? 0 : -1;
    if (rc)
        fprintf(stderr, "cannot prepare %s (port %d, %s)\n", id, port, published);
    zcert_destroy(&admin);
    return rc;
}

// ---------------------------------------------------------------------------
//  The raw transfers: two forked processes, plain libzmq, CURVE

typedef struct {
    char server_public[BENCH_Z85_SIZE];
    char server_secret[BENCH_Z85_SIZE];
    char client_public[BENCH_Z85_SIZE];
    char client_secret[BENCH_Z85_SIZE];
} bench_keys_t;

static void
s_raw_child_init(void)
{
    mallopt(M_MMAP_THRESHOLD, BENCH_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, BENCH_TRIM_THRESHOLD);
}

static void *
s_raw_server_socket(void *ctx, int type, const bench_keys_t *keys, char *endpoint, size_t size)
{
    void *socket = zmq_socket(ctx, type);
    int on = 1;
    zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &on, sizeof on);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->server_secret, BENCH_Z85_SIZE - 1);
    if (zmq_bind(socket, "tcp://127.0.0.1:*") != 0)
        return NULL;
    zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, endpoint, &size);
    return socket;
}

static void *
s_raw_client_socket(void *ctx, int type, const bench_keys_t *keys, const char *endpoint)
{
    void *socket = zmq_socket(ctx, type);
    zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys->server_public, BENCH_Z85_SIZE - 1);
    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys->client_public, BENCH_Z85_SIZE - 1);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->client_secret, BENCH_Z85_SIZE - 1);
    return zmq_connect(socket, endpoint) == 0 ? socket : NULL;
}

static uint8_t *
s_raw_buffer(size_t size)
{
    uint8_t *buffer = malloc(size);
    uint64_t state = size;
    for (size_t i = 0; i + sizeof(uint64_t) <= size; i += sizeof(uint64_t)) {
        uint64_t word = s_random(&state);
        memcpy(buffer + i, &word, sizeof word);
    }
    return buffer;
}

//  Paged, server side: answers each page request with a page of the size
//  asked for, copied by zmq_send as the node's frames are.
static int
s_raw_paged_server(const bench_keys_t *keys, int endpoint_fd, size_t page_bytes)
{
    void *ctx = zmq_ctx_new();
    char endpoint[BENCH_ENDPOINT_MAX] = "";
    void *router = s_raw_server_socket(ctx, ZMQ_ROUTER, keys, endpoint, sizeof endpoint);
    if (!router || write(endpoint_fd, endpoint, sizeof endpoint) != sizeof endpoint)
        return -1;
    uint8_t *page = s_raw_buffer(page_bytes);
    int rc = 0;
    while (true) {
        uint8_t id[256], request[1 + sizeof(uint64_t)];
        int id_size = zmq_recv(router, id, sizeof id, 0);
        int size = zmq_recv(router, request, sizeof request, 0);
        if (id_size < 0 || size < 1) {
            rc = -1;
            break;
        }
        if (request[0] == BENCH_RAW_BYE)
            break;
        uint64_t bytes = 1;
        if (request[0] == BENCH_RAW_PAGE && size == (int) sizeof request)
            memcpy(&bytes, request + 1, sizeof bytes);
        if (zmq_send(router, id, (size_t) id_size, ZMQ_SNDMORE) < 0
        ||  zmq_send(router, page, (size_t) bytes, 0) < 0) {
            rc = -1;
            break;
        }
    }
    free(page);
    zmq_close(router);
    zmq_ctx_term(ctx);
    return rc;
}

static int
s_raw_ask(void *dealer, uint64_t bytes)
{
    uint8_t request[1 + sizeof(uint64_t)] = { BENCH_RAW_PAGE };
    memcpy(request + 1, &bytes, sizeof bytes);
    return zmq_send(dealer, request, sizeof request, 0) < 0 ? -1 : 0;
}

//  Paged, client side: WINDOW requests in flight until TOTAL bytes came in
//  pages of PAGE_BYTES. Returns the seconds from the first request on.
static double
s_raw_paged_client(const bench_keys_t *keys, const char *endpoint, uint64_t total, size_t page_bytes,
                   size_t window)
{
    void *ctx = zmq_ctx_new();
    void *dealer = s_raw_client_socket(ctx, ZMQ_DEALER, keys, endpoint);
    uint8_t ping = BENCH_RAW_PING;
    zmq_msg_t reply;
    zmq_msg_init(&reply);
    //  The handshake is done before the clock starts.
    if (!dealer || zmq_send(dealer, &ping, 1, 0) < 0 || zmq_msg_recv(&reply, dealer, 0) < 0)
        return -1;
    double started = s_now();
    uint64_t asked = 0, received = 0;
    for (size_t i = 0; i < window && asked < total; i++) {
        uint64_t bytes = total - asked < page_bytes ? total - asked : page_bytes;
        if (s_raw_ask(dealer, bytes))
            return -1;
        asked += bytes;
    }
    while (received < total) {
        if (zmq_msg_recv(&reply, dealer, 0) < 0)
            return -1;
        received += zmq_msg_size(&reply);
        if (asked < total) {
            uint64_t bytes = total - asked < page_bytes ? total - asked : page_bytes;
            if (s_raw_ask(dealer, bytes))
                return -1;
            asked += bytes;
        }
    }
    double seconds = s_now() - started;
    zmq_msg_close(&reply);
    uint8_t bye = BENCH_RAW_BYE;
    zmq_send(dealer, &bye, 1, 0);
    int linger = -1;
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    return seconds;
}

//  Stream, receiving side: the clock starts at the sender's first message
//  (the handshake is then done) and stops at the last byte.
static double
s_raw_stream_server(const bench_keys_t *keys, int endpoint_fd, uint64_t total)
{
    void *ctx = zmq_ctx_new();
    char endpoint[BENCH_ENDPOINT_MAX] = "";
    void *pull = s_raw_server_socket(ctx, ZMQ_PULL, keys, endpoint, sizeof endpoint);
    if (!pull || write(endpoint_fd, endpoint, sizeof endpoint) != sizeof endpoint)
        return -1;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, pull, 0) < 0)
        return -1;
    double started = s_now();
    uint64_t received = 0;
    while (received < total) {
        if (zmq_msg_recv(&msg, pull, 0) < 0)
            return -1;
        received += zmq_msg_size(&msg);
    }
    double seconds = s_now() - started;
    zmq_msg_close(&msg);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    return seconds;
}

//  Stream, sending side: TOTAL bytes in messages of BENCH_STREAM_MESSAGE,
//  every one pointing at the same buffer, which libzmq never copies.
static int
s_raw_stream_client(const bench_keys_t *keys, const char *endpoint, uint64_t total)
{
    void *ctx = zmq_ctx_new();
    void *push = s_raw_client_socket(ctx, ZMQ_PUSH, keys, endpoint);
    uint8_t *buffer = s_raw_buffer(BENCH_STREAM_MESSAGE);
    uint8_t start = BENCH_RAW_PING;
    int rc = push && zmq_send(push, &start, 1, 0) == 1 ? 0 : -1;
    for (uint64_t sent = 0; rc == 0 && sent < total; ) {
        size_t bytes = total - sent < BENCH_STREAM_MESSAGE ? (size_t) (total - sent) : BENCH_STREAM_MESSAGE;
        zmq_msg_t msg;
        zmq_msg_init_data(&msg, buffer, bytes, NULL, NULL);
        if (zmq_msg_send(&msg, push, 0) < 0) {
            zmq_msg_close(&msg);
            rc = -1;
        }
        sent += bytes;
    }
    int linger = -1;
    if (push) {
        zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(push);
    }
    zmq_ctx_term(ctx);
    free(buffer);
    return rc;
}

//  Reads exactly SIZE bytes from FD within TIMEOUT_MS. Returns 0 or -1.
static int
s_read_within(int fd, void *buffer, size_t size, int timeout_ms)
{
    size_t got = 0;
    double deadline = s_now() + (double) timeout_ms / MS_PER_S;
    while (got < size) {
        int left = (int) ((deadline - s_now()) * MS_PER_S);
        struct pollfd item = { fd, POLLIN, 0 };
        if (left <= 0 || poll(&item, 1, left) <= 0)
            return -1;
        ssize_t n = read(fd, (char *) buffer + got, size - got);
        if (n <= 0)
            return -1;
        got += (size_t) n;
    }
    return 0;
}

//  Runs one raw transfer of TOTAL bytes: STREAM for the zero-copy PUSH to
//  PULL, else paged with WINDOW requests in flight. Returns its seconds, or -1.
static double
s_raw_run(bool stream, uint64_t total, size_t page_bytes, size_t window)
{
    bench_keys_t keys;
    if (zmq_curve_keypair(keys.server_public, keys.server_secret)
    ||  zmq_curve_keypair(keys.client_public, keys.client_secret))
        return -1;
    int endpoint_pipe[2], result_pipe[2];
    if (pipe(endpoint_pipe) || pipe(result_pipe))
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t server = s_fork_bound();
    if (server == 0) {
        s_raw_child_init();
        double seconds = stream ? s_raw_stream_server(&keys, endpoint_pipe[1], total)
                                : s_raw_paged_server(&keys, endpoint_pipe[1], page_bytes);
        if (stream && write(result_pipe[1], &seconds, sizeof seconds) != sizeof seconds)
            _exit(1);
        _exit(seconds < 0 ? 1 : 0);
    }
    char endpoint[BENCH_ENDPOINT_MAX];
    pid_t client = -1;
    double seconds = -1;
    if (server > 0 && s_read_within(endpoint_pipe[0], endpoint, sizeof endpoint, BENCH_RAW_TIMEOUT_MS) == 0) {
        client = s_fork_bound();
        if (client == 0) {
            s_raw_child_init();
            double taken = stream ? s_raw_stream_client(&keys, endpoint, total)
                                  : s_raw_paged_client(&keys, endpoint, total, page_bytes, window);
            if (!stream && write(result_pipe[1], &taken, sizeof taken) != sizeof taken)
                _exit(1);
            _exit(taken < 0 ? 1 : 0);
        }
        if (client > 0 && s_read_within(result_pipe[0], &seconds, sizeof seconds, BENCH_RAW_TIMEOUT_MS))
            seconds = -1;
    }
    //  Both exit by themselves once done; a stuck one is stopped.
    if (client > 0 && s_wait_pid(client, BENCH_STOP_TIMEOUT_MS) != 0)
        s_stop(&client, "raw client");
    if (server > 0 && s_wait_pid(server, BENCH_STOP_TIMEOUT_MS) != 0)
        s_stop(&server, "raw server");
    close(endpoint_pipe[0]);
    close(endpoint_pipe[1]);
    close(result_pipe[0]);
    close(result_pipe[1]);
    if (seconds < 0)
        fprintf(stderr, "raw %s transfer failed\n", stream ? "stream" : "paged");
    return seconds;
}

// ---------------------------------------------------------------------------
//  Catch-up

//  Whether every head of THEIRS is in OURS, and how many entries OURS holds
//  of the bench datasets, as told by their heads' stamps (entry i of dataset
//  d is stamped start_ms + i with i % BENCH_DATASETS == d).
static bool
s_heads_match(const shoal_head_list_t *theirs, const shoal_head_list_t *ours, const bench_data_t *data,
              size_t *held)
{
    *held = 0;
    for (size_t i = 0; i < ours->count; i++)
        for (size_t d = 0; d < BENCH_DATASETS; d++) {
            char name[16];
            s_dataset_name(d, name, sizeof name);
            if (streq(ours->heads[i].dataset, name) && streq(ours->heads[i].node, "n1"))
                *held += (size_t) (ours->heads[i].wall_ms - data->start_ms - d) / BENCH_DATASETS + 1;
        }
    for (size_t i = 0; i < theirs->count; i++) {
        bool found = false;
        for (size_t j = 0; j < ours->count && !found; j++)
            found = streq(theirs->heads[i].dataset, ours->heads[j].dataset)
                 && streq(theirs->heads[i].node, ours->heads[j].node)
                 && streq(theirs->heads[i].hash, ours->heads[j].hash);
        if (!found)
            return false;
    }
    return true;
}

//  Checks that n2 holds as many entries of each bench dataset as written.
static int
s_check_counts(shoal_client_t *client, const bench_data_t *data)
{
    shoal_client_set_timeout(client, BENCH_STATS_TIMEOUT_MS);
    shoal_dataset_list_t stats;
    int answer = shoal_client_oplog_stats(client, NULL, &stats);
    if (answer != 200) {
        fprintf(stderr, "oplog stats of n2: %d %s\n", answer, shoal_client_error(client));
        return -1;
    }
    int rc = 0;
    for (size_t d = 0; d < BENCH_DATASETS; d++) {
        char name[16];
        s_dataset_name(d, name, sizeof name);
        uint64_t entries = 0;
        for (size_t i = 0; i < stats.count; i++)
            if (streq(stats.datasets[i].dataset, name))
                entries = stats.datasets[i].entries;
        if (entries != data->per_dataset[d]) {
            fprintf(stderr, "n2 holds %" PRIu64 " entries of %s, n1 %zu\n", entries, name, data->per_dataset[d]);
            rc = -1;
        }
    }
    shoal_dataset_list_clear(&stats);
    return rc;
}

//  Starts a fresh n2 joining n1 and times its catch-up into REP.
static int
s_catch_up(bench_t *bench, const bench_data_t *data, const shoal_head_list_t *n1_heads, bench_rep_t *rep)
{
    s_remove_tree(bench->n2.dir);
    if (s_node_prepare(bench, &bench->n2, "n2"))
        return -1;
    FILE *log = fopen(bench->n2.log_path, "a");
    if (log) {
        fprintf(log, "---- bench_sync: starting n2 at %s\n", bench->n2.endpoint);
        fclose(log);
    }
    double started = s_now();
    if (s_node_spawn(bench, &bench->n2, bench->n1.endpoint)
    ||  s_wait_status(bench, &bench->n2, BENCH_START_TIMEOUT_MS))
        return -1;
    rep->to_status = s_now() - started;
    shoal_client_t *client = s_client_new(bench, &bench->n2, BENCH_HEADS_TIMEOUT_MS);
    if (!client)
        return -1;
    int rc = -1;
    double deadline = started + (double) BENCH_CATCHUP_TIMEOUT_MS / MS_PER_S;
    double reported = s_now();
    size_t held = 0, timeouts = 0, held_before = 0;
    double moved = s_now();
    while (s_now() < deadline) {
        shoal_head_list_t heads;
        int answer = shoal_client_oplog_heads(client, NULL, &heads);
        double now = s_now();
        if (answer == 200) {
            bool match = s_heads_match(n1_heads, &heads, data, &held);
            shoal_head_list_clear(&heads);
            if (held && rep->to_first < 0)
                rep->to_first = now - started;
            if (match) {
                rep->catchup = now - started;
                rc = 0;
                break;
            }
        }
        else
        if (answer == SHOAL_E_TIMEOUT)
            timeouts++;
        else
        if (answer != 404) {
            fprintf(stderr, "oplog heads of n2: %d %s\n", answer, shoal_client_error(client));
            break;
        }
        if (held != held_before) {
            held_before = held;
            moved = now;
        }
        if (now - moved >= (double) BENCH_STALL_MS / MS_PER_S) {
            fprintf(stderr, "catch-up stalled: n2 gained no entry in %d ms\n", BENCH_STALL_MS);
            break;
        }
        if (now - reported >= (double) BENCH_PROGRESS_MS / MS_PER_S) {
            reported = now;
            printf("    n2 holds ~%zu of %zu entries after %.1f s (%.0f entries/s so far)%s\n", held, data->count,
                   now - started, (double) held / (now - started), timeouts ? ", heads polls timing out" : "");
            fflush(stdout);
            timeouts = 0;
        }
        s_sleep_ms(BENCH_POLL_MS);
    }
    if (rc)
        fprintf(stderr, "n2 did not catch up (holds ~%zu of %zu after %.1f s)\n", held, data->count,
                s_now() - started);
    else
        rc = s_check_counts(client, data);
    shoal_client_destroy(&client);
    if (rc)
        s_log_tail(&bench->n2);
    return rc;
}

// ---------------------------------------------------------------------------
//  Report

static double
s_mb_per_s(uint64_t bytes, double seconds)
{
    return (double) bytes / BYTES_PER_MB / seconds;
}

static void
s_print_rep(const char *label, const bench_data_t *data, const bench_rep_t *rep)
{
    double catchup_mb = s_mb_per_s(data->bytes, rep->catchup);
    double paged_mb = s_mb_per_s(data->bytes, rep->raw_paged);
    double stream_mb = s_mb_per_s(data->bytes, rep->raw_stream);
    printf("%-7s raw paged   %7.2f s  %8.1f MB/s\n", label, rep->raw_paged, paged_mb);
    printf("%-7s raw stream  %7.2f s  %8.1f MB/s   (1 MiB zero-copy)\n", label, rep->raw_stream, stream_mb);
    printf("%-7s n2 status   %7.2f s after spawn; first entry at %.2f s\n", label, rep->to_status, rep->to_first);
    printf("%-7s catch-up    %7.2f s  %8.1f MB/s  %9.0f entries/s   (from spawn)\n", label, rep->catchup,
           catchup_mb, (double) data->count / rep->catchup);
    double from_status = rep->catchup - rep->to_status;
    printf("%-7s catch-up    %7.2f s  %8.1f MB/s  %9.0f entries/s   (from first status answer)\n", label,
           from_status, s_mb_per_s(data->bytes, from_status), (double) data->count / from_status);
    printf("%-7s ratio       %7.3f of raw paged, %.3f of raw stream\n", label, catchup_mb / paged_mb,
           catchup_mb / stream_mb);
    fflush(stdout);
}

static void
s_print_medians(const bench_data_t *data, const bench_rep_t *reps, size_t count)
{
    double paged[BENCH_REPS], stream[BENCH_REPS], catchup[BENCH_REPS], from_status[BENCH_REPS];
    double to_status[BENCH_REPS], to_first[BENCH_REPS], ratio_paged[BENCH_REPS], ratio_stream[BENCH_REPS];
    for (size_t i = 0; i < count; i++) {
        paged[i] = reps[i].raw_paged;
        stream[i] = reps[i].raw_stream;
        catchup[i] = reps[i].catchup;
        from_status[i] = reps[i].catchup - reps[i].to_status;
        to_status[i] = reps[i].to_status;
        to_first[i] = reps[i].to_first;
        ratio_paged[i] = reps[i].raw_paged / reps[i].catchup;
        ratio_stream[i] = reps[i].raw_stream / reps[i].catchup;
    }
    bench_rep_t median = {
        .raw_paged = s_median(paged, count), .raw_stream = s_median(stream, count),
        .to_status = s_median(to_status, count), .to_first = s_median(to_first, count),
        .catchup = s_median(catchup, count),
    };
    printf("\nmedians of %zu (each column on its own):\n", count);
    s_print_rep("median", data, &median);
    double from = s_median(from_status, count);
    printf("median  catch-up from first status answer %.2f s, %.1f MB/s\n", from, s_mb_per_s(data->bytes, from));
    double judged = s_median(ratio_paged, count);
    printf("median  ratio of each repetition: %.3f of raw paged, %.3f of raw stream\n", judged,
           s_median(ratio_stream, count));
    printf("expected: catch-up at %.0f%% of raw paged (the same-shaped transfer) or more: %s\n",
           BENCH_EXPECTED_RATIO * 100, judged >= BENCH_EXPECTED_RATIO ? "met" : "NOT met");
}

// ---------------------------------------------------------------------------

static int
s_find_shoald(bench_t *bench)
{
    const char *dir = getenv("SHOAL_BIN_DIR");
    char self_path[BENCH_PATH_MAX] = "";
    if (!dir) {
        ssize_t size = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
        if (size > 0) {
            self_path[size] = 0;
            char *slash = strrchr(self_path, '/');
            if (slash)
                *slash = 0;
        }
        dir = self_path;
    }
    int written = snprintf(bench->shoald, sizeof bench->shoald, "%s/shoald", dir);
    if (written < 0 || (size_t) written >= sizeof bench->shoald || access(bench->shoald, X_OK) != 0) {
        fprintf(stderr, "no shoald at %s (set SHOAL_BIN_DIR)\n", bench->shoald);
        return -1;
    }
    return 0;
}

static int
s_keys_make(bench_t *bench)
{
    snprintf(bench->cluster_cert, sizeof bench->cluster_cert, "%s/cluster.cert", bench->root);
    snprintf(bench->admin_cert, sizeof bench->admin_cert, "%s/admin.cert", bench->root);
    char *error = NULL;
    if (shoal_keygen_cluster(bench->cluster_cert, &error)
    ||  shoal_keygen_client(bench->admin_cert, "bench", "admin", NULL, &error)) {
        fprintf(stderr, "keygen: %s\n", error ? error : "failed");
        free(error);
        return -1;
    }
    return 0;
}

int
main(int argc, char *argv[])
{
    size_t count = BENCH_DEFAULT_COUNT;
    if (argc > 1) {
        char *end;
        count = strtoull(argv[1], &end, 10);
        if (*end || count < BENCH_DATASETS) {
            fprintf(stderr, "usage: %s [COUNT]   (COUNT >= %d, default %d)\n", argv[0], BENCH_DATASETS,
                    BENCH_DEFAULT_COUNT);
            return EXIT_FAILURE;
        }
    }
    bench_t bench = { 0 };
    if (s_find_shoald(&bench))
        return EXIT_FAILURE;
    const char *base = getenv("TMPDIR");
    snprintf(bench.root, sizeof bench.root, "%s/shoal-bench-sync-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(bench.root)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    //  No czmq signal handler: SIGINT and SIGTERM end the bench, and the
    //  nodes and raw processes then end with it (PR_SET_PDEATHSIG).
    zsys_handler_set(NULL);
    zsys_init();
    printf("bench_sync: %zu entries of n1 in %d datasets, %d-byte values; %d repetitions; sync interval %s ms;"
           " store sync on\n", count, BENCH_DATASETS, BENCH_VALUE_SIZE, BENCH_REPS,
           getenv("SHOAL_MESH_SYNC_INTERVAL_MS") ? getenv("SHOAL_MESH_SYNC_INTERVAL_MS") : BENCH_SYNC_INTERVAL_MS);
    printf("work directory %s\n", bench.root);
    bench_data_t data;
    shoal_head_list_t n1_heads = { 0 };
    shoal_client_t *n1_client = NULL;
    bench_rep_t reps[BENCH_REPS];
    size_t done = 0;
    int rc = s_keys_make(&bench) || s_node_prepare(&bench, &bench.n1, "n1") ? -1 : 0;
    if (rc == 0) {
        printf("writing n1's log offline\n");
        fflush(stdout);
        char db_dir[BENCH_PATH_MAX + 16];
        snprintf(db_dir, sizeof db_dir, "%s/data/db", bench.n1.dir);
        rc = zsys_dir_create("%s/data", bench.n1.dir) == 0 ? s_write_log(db_dir, count, &data) : -1;
    }
    if (rc == 0) {
        printf("starting n1 (it reconciles its log before serving)\n");
        double started = s_now();
        rc = s_node_spawn(&bench, &bench.n1, "") || s_wait_status(&bench, &bench.n1, BENCH_START_TIMEOUT_MS) ? -1 : 0;
        if (rc == 0)
            printf("  n1 answers status after %.1f s\n", s_now() - started);
    }
    if (rc == 0) {
        n1_client = s_client_new(&bench, &bench.n1, BENCH_HEADS_TIMEOUT_MS);
        int answer = n1_client ? shoal_client_oplog_heads(n1_client, NULL, &n1_heads) : -1;
        if (answer != 200) {
            fprintf(stderr, "oplog heads of n1: %d %s\n", answer, n1_client ? shoal_client_error(n1_client) : "");
            rc = -1;
        }
    }
    for (size_t r = 0; r < BENCH_REPS && rc == 0; r++) {
        bench_rep_t *rep = &reps[r];
        rep->to_first = -1;
        printf("repetition %zu of %d\n", r + 1, BENCH_REPS);
        printf("  raw paged: %.1f MB in %zu-byte pages, %d in flight\n", (double) data.bytes / BYTES_PER_MB,
               data.page_bytes, BENCH_DATASETS);
        fflush(stdout);
        rep->raw_paged = s_raw_run(false, data.bytes, data.page_bytes, BENCH_DATASETS);
        printf("  raw stream: %.1f MB in %d-byte zero-copy messages\n", (double) data.bytes / BYTES_PER_MB,
               BENCH_STREAM_MESSAGE);
        fflush(stdout);
        rep->raw_stream = rep->raw_paged < 0 ? -1 : s_raw_run(true, data.bytes, data.page_bytes, 1);
        if (rep->raw_stream < 0) {
            rc = -1;
            break;
        }
        printf("  catch-up: fresh n2 joins n1\n");
        fflush(stdout);
        rc = s_catch_up(&bench, &data, &n1_heads, rep);
        s_stop(&bench.n2.pid, "n2");
        if (rc == 0) {
            char label[16];
            snprintf(label, sizeof label, "rep %zu", r + 1);
            s_print_rep(label, &data, rep);
            done++;
        }
    }
    if (rc == 0) {
        //  n1's heads must not have moved under the comparison.
        shoal_head_list_t after = { 0 };
        size_t held;
        if (shoal_client_oplog_heads(n1_client, NULL, &after) != 200 || !s_heads_match(&n1_heads, &after, &data, &held)
        ||  after.count != n1_heads.count) {
            fprintf(stderr, "n1's heads changed during the run\n");
            rc = -1;
        }
        shoal_head_list_clear(&after);
    }
    if (rc == 0)
        s_print_medians(&data, reps, done);
    shoal_head_list_clear(&n1_heads);
    shoal_client_destroy(&n1_client);
    s_stop(&bench.n2.pid, "n2");
    s_stop(&bench.n1.pid, "n1");
    if (rc == 0 || !getenv("BENCH_KEEP"))
        s_remove_tree(bench.root);
    else
        fprintf(stderr, "kept %s (BENCH_KEEP)\n", bench.root);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
