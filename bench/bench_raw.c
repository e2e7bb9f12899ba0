/*  bench_raw: the raw limits of bench_raw.h: CURVE transfers, and a file
    copied on one disk. */
#include "bench_raw.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

//  How long one transfer may take before it counts as failed.
#define RAW_TIMEOUT_MS 300000
//  SIGTERM to SIGKILL.
#define RAW_STOP_TIMEOUT_MS 10000
//  How often a wait for a child looks again.
#define RAW_WAIT_POLL_MS 20
#define RAW_Z85_SIZE 41
#define RAW_ENDPOINT_MAX 256
#define RAW_ID_MAX 256
#define RAW_PATH_MAX 512
//  Where ip netns keeps its named namespaces.
#define RAW_NETNS_DIR "/run/netns"
#define RAW_LOOPBACK "127.0.0.1"
#define MS_PER_S 1000
#define NS_PER_MS 1000000L
#define NS_PER_S 1e9

//  The raw copy: blocks of this size (4 KiB-aligned, as direct I/O wants),
//  this many in flight between its reader and its writer.
#define RAW_COPY_BLOCK (4 * 1024 * 1024)
#define RAW_COPY_RING 4
#define RAW_COPY_ALIGN 4096

//  What the client sends the server: the first message (its clock starts
//  once the handshake is done), a page request, the end.
#define RAW_PING 'p'
#define RAW_PAGE 'g'
#define RAW_BYE 'b'

//  The keys of one transfer: both sides are forked from the parent that
//  made them.
typedef struct {
    char server_public[RAW_Z85_SIZE];
    char server_secret[RAW_Z85_SIZE];
    char client_public[RAW_Z85_SIZE];
    char client_secret[RAW_Z85_SIZE];
} raw_keys_t;

double
bench_raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / NS_PER_S;
}

static void
s_sleep_ms(int ms)
{
    struct timespec ts = { ms / MS_PER_S, (long) (ms % MS_PER_S) * NS_PER_MS };
    nanosleep(&ts, NULL);
}

pid_t
bench_raw_fork_bound(void)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

int
bench_raw_wait(pid_t pid, int timeout_ms)
{
    double deadline = bench_raw_now() + (double) timeout_ms / MS_PER_S;
    while (true) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (done < 0 || bench_raw_now() >= deadline)
            return -1;
        s_sleep_ms(RAW_WAIT_POLL_MS);
    }
}

void
bench_raw_stop(pid_t *pid_p, const char *what)
{
    if (*pid_p <= 0)
        return;
    kill(*pid_p, SIGTERM);
    if (bench_raw_wait(*pid_p, RAW_STOP_TIMEOUT_MS) == -1) {
        fprintf(stderr, "%s did not stop within %d ms: killing it\n", what, RAW_STOP_TIMEOUT_MS);
        kill(*pid_p, SIGKILL);
        bench_raw_wait(*pid_p, RAW_STOP_TIMEOUT_MS);
    }
    *pid_p = 0;
}

static uint64_t
s_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

//  SIZE bytes that do not compress, to send.
static uint8_t *
s_buffer_new(size_t size)
{
    uint8_t *buffer = malloc(size);
    uint64_t state = size;
    for (size_t i = 0; buffer && i + sizeof(uint64_t) <= size; i += sizeof(uint64_t)) {
        uint64_t word = s_random(&state);
        memcpy(buffer + i, &word, sizeof word);
    }
    return buffer;
}

//  Sets a forked side up: the allocator as shoald's, and the network
//  namespace NETNS when named. Exits the child when it cannot enter it.
static void
s_child_init(const char *netns)
{
    shoal_malloc_tune();
    if (netns && *netns) {
        char path[RAW_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", RAW_NETNS_DIR, netns);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            fprintf(stderr, "cannot enter network namespace %s: %s\n", netns, strerror(errno));
            _exit(1);
        }
        close(fd);
    }
}

static void *
s_server_socket(void *ctx, int type, const raw_keys_t *keys, const char *host, char *endpoint, size_t size)
{
    void *socket = zmq_socket(ctx, type);
    int on = 1;
    zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &on, sizeof on);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->server_secret, RAW_Z85_SIZE - 1);
    char bind[RAW_ENDPOINT_MAX];
    snprintf(bind, sizeof bind, "tcp://%s:*", host);
    if (zmq_bind(socket, bind) != 0)
        return NULL;
    zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, endpoint, &size);
    return socket;
}

static void *
s_client_socket(void *ctx, int type, const raw_keys_t *keys, const char *endpoint)
{
    void *socket = zmq_socket(ctx, type);
    zmq_setsockopt(socket, ZMQ_CURVE_SERVERKEY, keys->server_public, RAW_Z85_SIZE - 1);
    zmq_setsockopt(socket, ZMQ_CURVE_PUBLICKEY, keys->client_public, RAW_Z85_SIZE - 1);
    zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, keys->client_secret, RAW_Z85_SIZE - 1);
    return zmq_connect(socket, endpoint) == 0 ? socket : NULL;
}

//  Paged, server side: answers each page request with a page of the size
//  asked for, copied by zmq_send as a node's frames are.
static int
s_paged_server(const raw_keys_t *keys, int endpoint_fd, size_t page_bytes)
{
    void *ctx = zmq_ctx_new();
    char endpoint[RAW_ENDPOINT_MAX] = "";
    void *router = s_server_socket(ctx, ZMQ_ROUTER, keys, RAW_LOOPBACK, endpoint, sizeof endpoint);
    if (!router || write(endpoint_fd, endpoint, sizeof endpoint) != sizeof endpoint)
        return -1;
    uint8_t *page = s_buffer_new(page_bytes);
    int rc = page ? 0 : -1;
    while (rc == 0) {
        uint8_t id[RAW_ID_MAX], request[1 + sizeof(uint64_t)];
        int id_size = zmq_recv(router, id, sizeof id, 0);
        int size = zmq_recv(router, request, sizeof request, 0);
        if (id_size < 0 || size < 1) {
            rc = -1;
            break;
        }
        if (request[0] == RAW_BYE)
            break;
        uint64_t bytes = 1;
        if (request[0] == RAW_PAGE && size == (int) sizeof request)
            memcpy(&bytes, request + 1, sizeof bytes);
        if (zmq_send(router, id, (size_t) id_size, ZMQ_SNDMORE) < 0
        ||  zmq_send(router, page, (size_t) bytes, 0) < 0)
            rc = -1;
    }
    free(page);
    zmq_close(router);
    zmq_ctx_term(ctx);
    return rc;
}

static int
s_paged_ask(void *dealer, uint64_t bytes)
{
    uint8_t request[1 + sizeof(uint64_t)] = { RAW_PAGE };
    memcpy(request + 1, &bytes, sizeof bytes);
    return zmq_send(dealer, request, sizeof request, 0) < 0 ? -1 : 0;
}

//  Paged, client side: WINDOW requests in flight until TOTAL bytes came in
//  pages of PAGE_BYTES. Returns the seconds from the first request on.
static double
s_paged_client(const raw_keys_t *keys, const char *endpoint, uint64_t total, size_t page_bytes, size_t window)
{
    void *ctx = zmq_ctx_new();
    void *dealer = s_client_socket(ctx, ZMQ_DEALER, keys, endpoint);
    uint8_t ping = RAW_PING;
    zmq_msg_t reply;
    zmq_msg_init(&reply);
    if (!dealer || zmq_send(dealer, &ping, 1, 0) < 0 || zmq_msg_recv(&reply, dealer, 0) < 0)
        return -1;
    double started = bench_raw_now();
    uint64_t asked = 0, received = 0;
    for (size_t i = 0; i < window && asked < total; i++) {
        uint64_t bytes = total - asked < page_bytes ? total - asked : page_bytes;
        if (s_paged_ask(dealer, bytes))
            return -1;
        asked += bytes;
    }
    while (received < total) {
        if (zmq_msg_recv(&reply, dealer, 0) < 0)
            return -1;
        received += zmq_msg_size(&reply);
        if (asked < total) {
            uint64_t bytes = total - asked < page_bytes ? total - asked : page_bytes;
            if (s_paged_ask(dealer, bytes))
                return -1;
            asked += bytes;
        }
    }
    double seconds = bench_raw_now() - started;
    zmq_msg_close(&reply);
    uint8_t bye = RAW_BYE;
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
s_stream_server(const raw_keys_t *keys, int endpoint_fd, const char *host, uint64_t total)
{
    void *ctx = zmq_ctx_new();
    char endpoint[RAW_ENDPOINT_MAX] = "";
    void *pull = s_server_socket(ctx, ZMQ_PULL, keys, host, endpoint, sizeof endpoint);
    if (!pull || write(endpoint_fd, endpoint, sizeof endpoint) != sizeof endpoint)
        return -1;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, pull, 0) < 0)
        return -1;
    double started = bench_raw_now();
    uint64_t received = 0;
    while (received < total) {
        if (zmq_msg_recv(&msg, pull, 0) < 0)
            return -1;
        received += zmq_msg_size(&msg);
    }
    double seconds = bench_raw_now() - started;
    zmq_msg_close(&msg);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    return seconds;
}

//  Stream, sending side: TOTAL bytes in messages of BENCH_RAW_STREAM_MESSAGE,
//  every one pointing at the same buffer, which libzmq never copies.
static int
s_stream_client(const raw_keys_t *keys, const char *endpoint, uint64_t total)
{
    void *ctx = zmq_ctx_new();
    void *push = s_client_socket(ctx, ZMQ_PUSH, keys, endpoint);
    uint8_t *buffer = s_buffer_new(BENCH_RAW_STREAM_MESSAGE);
    uint8_t start = RAW_PING;
    int rc = push && buffer && zmq_send(push, &start, 1, 0) == 1 ? 0 : -1;
    for (uint64_t sent = 0; rc == 0 && sent < total; ) {
        size_t bytes = total - sent < BENCH_RAW_STREAM_MESSAGE ? (size_t) (total - sent) : BENCH_RAW_STREAM_MESSAGE;
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
    double deadline = bench_raw_now() + (double) timeout_ms / MS_PER_S;
    while (got < size) {
        int left = (int) ((deadline - bench_raw_now()) * MS_PER_S);
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

//  Runs one transfer of TOTAL bytes: STREAM for the zero-copy PUSH to PULL,
//  else paged with WINDOW requests in flight, on PATH (NULL: loopback).
//  Returns its seconds, or -1.
static double
s_run(bool stream, uint64_t total, size_t page_bytes, size_t window, const bench_raw_path_t *path)
{
    const char *host = path && path->server_host ? path->server_host : RAW_LOOPBACK;
    raw_keys_t keys;
    if (zmq_curve_keypair(keys.server_public, keys.server_secret)
    ||  zmq_curve_keypair(keys.client_public, keys.client_secret))
        return -1;
    int endpoint_pipe[2], result_pipe[2];
    if (pipe(endpoint_pipe))
        return -1;
    if (pipe(result_pipe)) {
        close(endpoint_pipe[0]);
        close(endpoint_pipe[1]);
        return -1;
    }
    //  The side that knows when the last byte came reports the seconds:
    //  the receiver of the stream, the asking client of the paged transfer.
    pid_t server = bench_raw_fork_bound();
    if (server == 0) {
        s_child_init(path ? path->server_netns : NULL);
        double seconds = stream ? s_stream_server(&keys, endpoint_pipe[1], host, total)
                                : s_paged_server(&keys, endpoint_pipe[1], page_bytes);
        if (stream && write(result_pipe[1], &seconds, sizeof seconds) != sizeof seconds)
            _exit(1);
        _exit(seconds < 0 ? 1 : 0);
    }
    char endpoint[RAW_ENDPOINT_MAX];
    pid_t client = -1;
    double seconds = -1;
    if (server > 0 && s_read_within(endpoint_pipe[0], endpoint, sizeof endpoint, RAW_TIMEOUT_MS) == 0) {
        client = bench_raw_fork_bound();
        if (client == 0) {
            s_child_init(path ? path->client_netns : NULL);
            double taken = stream ? s_stream_client(&keys, endpoint, total)
                                  : s_paged_client(&keys, endpoint, total, page_bytes, window);
            if (!stream && write(result_pipe[1], &taken, sizeof taken) != sizeof taken)
                _exit(1);
            _exit(taken < 0 ? 1 : 0);
        }
        if (client > 0 && s_read_within(result_pipe[0], &seconds, sizeof seconds, RAW_TIMEOUT_MS))
            seconds = -1;
    }
    //  Both exit by themselves once done; a stuck one is stopped.
    if (client > 0 && bench_raw_wait(client, RAW_STOP_TIMEOUT_MS) == -1)
        bench_raw_stop(&client, "raw client");
    if (server > 0 && bench_raw_wait(server, RAW_STOP_TIMEOUT_MS) == -1)
        bench_raw_stop(&server, "raw server");
    close(endpoint_pipe[0]);
    close(endpoint_pipe[1]);
    close(result_pipe[0]);
    close(result_pipe[1]);
    if (seconds < 0)
        fprintf(stderr, "raw %s transfer failed\n", stream ? "stream" : "paged");
    return seconds;
}

double
bench_raw_stream(uint64_t total)
{
    return s_run(true, total, 0, 1, NULL);
}

double
bench_raw_stream_on(uint64_t total, const bench_raw_path_t *path)
{
    return s_run(true, total, 0, 1, path);
}

double
bench_raw_paged(uint64_t total, size_t page_bytes, size_t window)
{
    return s_run(false, total, page_bytes, window, NULL);
}

// ---------------------------------------------------------------------------
//  The raw copy

typedef struct {
    int in, out;
    uint64_t size;
    uint64_t blocks;
    uint8_t *ring;                          //  RAW_COPY_RING blocks, aligned
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t read;                          //  blocks read
    uint64_t written;                       //  blocks written
    bool failed;
} raw_copy_t;

//  The length of block INDEX, rounded up to the alignment (the file is cut
//  back after).
static size_t
s_copy_length(const raw_copy_t *copy, uint64_t index, bool aligned)
{
    uint64_t left = copy->size - index * RAW_COPY_BLOCK;
    size_t length = left < RAW_COPY_BLOCK ? (size_t) left : RAW_COPY_BLOCK;
    return aligned ? (length + RAW_COPY_ALIGN - 1) / RAW_COPY_ALIGN * RAW_COPY_ALIGN : length;
}

//  Block INDEX's turn on READING's side: the reader keeps RAW_COPY_RING
//  blocks ahead of the writer at most, the writer behind the reader.
//  Returns false once the copy failed.
static bool
s_copy_turn(raw_copy_t *copy, uint64_t index, bool reading)
{
    pthread_mutex_lock(&copy->lock);
    while (!copy->failed && (reading ? index - copy->written >= RAW_COPY_RING : index >= copy->read))
        pthread_cond_wait(&copy->changed, &copy->lock);
    bool failed = copy->failed;
    pthread_mutex_unlock(&copy->lock);
    return !failed;
}

//  The reader (READING) or the writer: each block in turn, read into the
//  ring or written from it.
static void
s_copy_side(raw_copy_t *copy, bool reading)
{
    for (uint64_t index = 0; index < copy->blocks && s_copy_turn(copy, index, reading); index++) {
        size_t length = s_copy_length(copy, index, true);
        //  A read of the file's last block comes back short of the padding.
        size_t need = reading ? s_copy_length(copy, index, false) : length;
        uint8_t *block = copy->ring + (index % RAW_COPY_RING) * RAW_COPY_BLOCK;
        off_t offset = (off_t) (index * RAW_COPY_BLOCK);
        ssize_t done = reading ? pread(copy->in, block, length, offset) : pwrite(copy->out, block, length, offset);
        pthread_mutex_lock(&copy->lock);
        if (done < 0 || (size_t) done < need) {
            fprintf(stderr, "bench_raw: copy: %s of block %" PRIu64 ": %s\n", reading ? "read" : "write", index,
                    done < 0 ? strerror(errno) : "short");
            copy->failed = true;
        }
        else
        if (reading)
            copy->read = index + 1;
        else
            copy->written = index + 1;
        pthread_cond_broadcast(&copy->changed);
        pthread_mutex_unlock(&copy->lock);
    }
}

static void *
s_copy_reader(void *arg)
{
    s_copy_side((raw_copy_t *) arg, true);
    return NULL;
}

static void *
s_copy_writer(void *arg)
{
    s_copy_side((raw_copy_t *) arg, false);
    return NULL;
}

double
bench_raw_copy(const char *from, const char *to)
{
    raw_copy_t copy = { .in = open(from, O_RDONLY | O_DIRECT | O_CLOEXEC) };
    struct stat info;
    if (copy.in < 0 || fstat(copy.in, &info) != 0) {
        fprintf(stderr, "bench_raw: copy: cannot open %s: %s\n", from, strerror(errno));
        if (copy.in >= 0)
            close(copy.in);
        return -1;
    }
    copy.size = (uint64_t) info.st_size;
    copy.blocks = (copy.size + RAW_COPY_BLOCK - 1) / RAW_COPY_BLOCK;
    copy.ring = mmap(NULL, (size_t) RAW_COPY_RING * RAW_COPY_BLOCK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy.ring == MAP_FAILED) {
        close(copy.in);
        return -1;
    }
    //  Touched before the clock starts: the copy's buffers are warm, as
    //  the nodes' pooled ones are.
    memset(copy.ring, 0, (size_t) RAW_COPY_RING * RAW_COPY_BLOCK);
    pthread_mutex_init(&copy.lock, NULL);
    pthread_cond_init(&copy.changed, NULL);
    double started = bench_raw_now();
    copy.out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    double seconds = -1;
    pthread_t reader, writer;
    if (copy.out < 0)
        fprintf(stderr, "bench_raw: copy: cannot make %s: %s\n", to, strerror(errno));
    else
    if (pthread_create(&reader, NULL, s_copy_reader, &copy) == 0) {
        //  A writer that did not start wrote nothing: the copy failed.
        if (pthread_create(&writer, NULL, s_copy_writer, &copy) == 0)
            pthread_join(writer, NULL);
        pthread_mutex_lock(&copy.lock);
        copy.failed |= copy.written < copy.blocks;
        pthread_cond_broadcast(&copy.changed);
        pthread_mutex_unlock(&copy.lock);
        pthread_join(reader, NULL);
        if (!copy.failed && ftruncate(copy.out, (off_t) copy.size) == 0 && fdatasync(copy.out) == 0)
            seconds = bench_raw_now() - started;
    }
    if (copy.out >= 0)
        close(copy.out);
    close(copy.in);
    pthread_cond_destroy(&copy.changed);
    pthread_mutex_destroy(&copy.lock);
    munmap(copy.ring, (size_t) RAW_COPY_RING * RAW_COPY_BLOCK);
    return seconds;
}
