/*  bench_sync: a joining peer catching up, against a raw CURVE transfer of
    the same bytes.

    Usage: bench_sync [COUNT]   (default 1,000,000 entries)
           BENCH_REPS=N sets the repetitions (default 3, at most 20);
           shoald is looked for in $SHOAL_BIN_DIR, else beside this program;
           BENCH_KEEP=1 keeps the work directory (node logs) of a failed run
           or of one whose nodes logged a suspicion;
           SHOAL_MESH_SYNC_INTERVAL_MS (and any other SHOAL_* setting the
           bench does not fix) passes through to both nodes.

    Node n1's data directory is written offline: COUNT entries of n1 with
    200-byte values, spread over BENCH_DATASETS datasets, appended in chain
    order through shoal_oplog_append_batch with fsync off, and closed with a
    clean-stop mark (so n1 starts without reconciling). Both nodes serve
    with one cluster key and admit one admin client key. n1 starts (store
    sync on, its default) and is waited for until it answers status, and
    then until it is idle (less than BENCH_IDLE_CPU_S of CPU in a
    BENCH_IDLE_WINDOW_MS): it compacts the log written offline first, which
    took 1 to 2 s of CPU from the first repetition's catch-up. Then,
    BENCH_REPS times, a fresh n2 (empty data directory, store sync on) joins
    n1 and catches up in bulk: heads exchange, then pages of
    SHOAL_SYNC_BULK_PAGE_ENTRIES entries or SHOAL_SYNC_BULK_PAGE_BYTES, one
    page in flight per (dataset, origin), so BENCH_DATASETS pages in flight
    here, checked and written by n2's loader threads beside its reactor.
    Catch-up is timed from n2's spawn (and, printed beside it, from its first
    status answer) until its heads equal n1's for every dataset, polled every
    BENCH_POLL_MS; its entry counts are checked afterwards, untimed. The
    mesh must stay quiet meanwhile: each repetition counts the suspect and
    dead events n1 and n2 logged while n2 caught up (a false suspicion, a
    reactor starved by bulk work, is a bug).

    The bytes of catch-up are the protobuf-encoded size of every entry (what
    oplog_by_node_hlc stores and what a page carries, without the page's few
    bytes of framing). In the same repetition, two forked processes move the
    same number of bytes over CURVE on tcp loopback with plain libzmq
    (bench_raw.h):
      paged   DEALER asks, ROUTER answers with one page-sized message
              (ordinary zmq_send), BENCH_DATASETS requests in flight: the
              shape of a catch-up's pages, so the fair limit.
      stream  PUSH to PULL, 1 MiB messages sent zero-copy
              (zmq_msg_init_data), no pacing: the ceiling limits.md quotes.
    Both raw sides take the same malloc settings as shoald
    (shoal_malloc_tune).

    Also in the same repetition, RocksDB alone writes what a catch-up makes
    n2 write: every key and value of n1's oplog_by_hash (locators),
    oplog_by_hlc (keys), oplog_by_node_hlc (the entries, each stored once
    there) and kv (read from n1's store before it starts, held in
    memory, already in key order), one thread per family making a table
    file (no compression, a full bloom filter and the store's block size
    for the family, as the store's own), then
    the four ingested into a fresh database: "raw tables". A catch-up has
    to move the bytes and to write those tables, on the same two cores,
    besides checking every entry's hash and sorting what arrives: raw
    paged + raw tables is a floor under its time, printed with the ratio
    to raw paged that floor would make. The expectation: catch-up within
    BENCH_EXPECTED_FLOOR_TIMES of that floor (median of each repetition's
    ratio), and no suspicion in any repetition. Bytes per entry are printed
    beside layout 1's (each entry stored twice): the table rows a catch-up
    writes (and how many of them are the entry, in oplog_by_node_hlc, and
    its locator, in oplog_by_hash), and what n2 wrote
    to disk by the end of its catch-up (/proc/PID/io write_bytes: WAL,
    table files, flushes). The machine is
    noisy (limits.md): compare ratios within one repetition, read medians.
    A line of CPU seconds says what each side cost whatever else ran: n2's
    from its spawn to heads equal (with the page faults it took: fresh
    memory is dear on a virtual machine), n1's meanwhile, and the floor's
    (both raw paged processes, and this process while it made the raw
    tables). Both nodes run on this machine's cores, as the raw paged ends
    do: the "cpu budget" line sets the catch-up's CPU seconds (both nodes)
    against what all the cores give in BENCH_EXPECTED_FLOOR_TIMES times the
    floor. Near 100%, the expectation holds only with every core busy from
    n2's spawn to its last write; past it, only with less CPU.
*/
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_raw.h"
#include "shoal.h"
#include "shoal_oplog.h"
#include "shoal_store.h"
#include "shoal_sync.h"

#define BENCH_DEFAULT_COUNT 1000000
#define BENCH_DATASETS 4
#define BENCH_VALUE_SIZE 200
#define BENCH_KEY_SIZE 32
#define BENCH_BATCH 1000
#define BENCH_DEFAULT_REPS 3
#define BENCH_REPS_MAX 20
//  The expectation: catch-up within this many times the floor (raw paged
//  plus raw tables, measured in the same repetition).
#define BENCH_EXPECTED_FLOOR_TIMES 1.5
//  Bytes of table rows a catch-up wrote per entry in layout 1 (1,052 MB for
//  1,000,000 entries, each entry stored twice), printed beside this run's
//  figure.
#define BENCH_LAYOUT1_BYTES_PER_ENTRY 1100
//  The families a catch-up writes table files for, and the bloom filter
//  the store gives its tables.
#define BENCH_TABLE_FAMILIES 4
#define BENCH_BLOOM_BITS_PER_KEY 10
//  RocksDB's block size, the store's for every family but
//  oplog_by_node_hlc (SHOAL_STORE_ENTRY_BLOCK_BYTES).
#define BENCH_BLOCK_BYTES 4096
//  The mesh's sync interval: how soon a missed pull is retried, and how long
//  a pull waits for its page. The environment may override it.
#define BENCH_SYNC_INTERVAL_MS "200"
//  How often n2's heads are compared with n1's while it catches up.
#define BENCH_POLL_MS 50
//  n1 is idle once it uses less CPU than this in a window, waited for at
//  most BENCH_IDLE_TIMEOUT_MS.
#define BENCH_IDLE_CPU_S 0.05
#define BENCH_IDLE_WINDOW_MS 1000
#define BENCH_IDLE_TIMEOUT_MS 120000
//  How often a starting node is asked for its status.
#define BENCH_STATUS_POLL_MS 20
#define BENCH_STATUS_TIMEOUT_MS 500
#define BENCH_HEADS_TIMEOUT_MS 2000
//  Times n2 is started again when it exits at once (its port was taken).
#define BENCH_SPAWN_RETRIES 3
//  A node that finds no clean-stop mark reconciles its whole log first.
#define BENCH_START_TIMEOUT_MS 600000
#define BENCH_CATCHUP_TIMEOUT_MS 900000
//  Catch-up is given up when n2 gains no entry for this long.
#define BENCH_STALL_MS 60000
//  A progress line at most this often during catch-up.
#define BENCH_PROGRESS_MS 5000
//  The work directory's path, and room for any path under it.
#define BENCH_ROOT_MAX 4000
#define BENCH_PATH_MAX 4200
#define BENCH_LOG_TAIL 1500
#define MS_PER_S 1000
#define BYTES_PER_MB 1e6

//  What the offline writer produced, for the checks and the raw transfers.
typedef struct {
    size_t count;                       //  entries written
    size_t per_dataset[BENCH_DATASETS]; //  of which in each dataset
    uint64_t start_ms;                  //  stamp of entry 0; entry i is stamped start_ms + i
    uint64_t bytes;                     //  sum of the protobuf-encoded entry sizes
    size_t page_bytes;                  //  bytes of a full catch-up page of these entries
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

//  One family's rows, in key order: each a 32-bit key length, the key, a
//  32-bit value length and the value.
typedef struct {
    shoal_cf_t cf;                      //  the family
    uint8_t *bytes;                     //  the rows
    size_t size;                        //  bytes in use
    size_t capacity;                    //  bytes allocated
    size_t rows;                        //  rows held
    uint64_t value_bytes;               //  bytes of the values alone
} bench_rows_t;

//  What n1's store holds in the families a catch-up writes.
typedef struct {
    bench_rows_t families[BENCH_TABLE_FAMILIES];
    uint64_t bytes;                     //  keys and values, all families
} bench_tables_t;

//  One repetition's figures; seconds are -1 when not measured.
typedef struct {
    double raw_paged;                   //  seconds of the paged raw transfer
    double raw_stream;                  //  seconds of the zero-copy stream
    double raw_tables;                  //  seconds of RocksDB writing the same tables alone
    double to_status;                   //  n2's spawn to its first status answer
    double to_first;                    //  n2's spawn to its first entry seen
    double catchup;                     //  n2's spawn to heads equal
    int suspicions;                     //  suspect and dead events logged meanwhile
    double n2_written;                  //  bytes n2 wrote to disk by catch-up's end; -1 unknown
    double paged_cpu;                   //  CPU seconds of both raw paged processes
    double tables_cpu;                  //  CPU seconds of raw tables (this process)
    double n2_cpu;                      //  CPU seconds of n2 from spawn to heads equal; -1 unknown
    double n1_cpu;                      //  CPU seconds of n1 meanwhile; -1 unknown
    double n2_faults;                   //  page faults n2 took meanwhile (minor and major); -1 unknown
} bench_rep_t;

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
    double sorted[BENCH_REPS_MAX];
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
    double started = bench_raw_now(), reported = started;
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
        if (bench_raw_now() - reported >= (double) BENCH_PROGRESS_MS / MS_PER_S) {
            reported = bench_raw_now();
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
    //  Closed as a node closes after a clean stop: n1 need not reconcile.
    if (rc == 0 && shoal_oplog_mark_clean(oplog)) {
        fprintf(stderr, "mark clean: %s\n", shoal_oplog_error(oplog));
        rc = -1;
    }
    shoal_oplog_destroy(&oplog);
    shoal_store_destroy(&store);
    //  A page holds SHOAL_SYNC_BULK_PAGE_ENTRIES entries unless they pass
    //  SHOAL_SYNC_BULK_PAGE_BYTES.
    double mean = (double) data->bytes / (double) count;
    double page = mean * SHOAL_SYNC_BULK_PAGE_ENTRIES;
    data->page_bytes = (size_t) (page < SHOAL_SYNC_BULK_PAGE_BYTES ? page : SHOAL_SYNC_BULK_PAGE_BYTES);
    if (rc == 0)
        printf("  wrote %zu entries in %.1f s, %.1f MB encoded (%.0f bytes each), catch-up page %zu bytes\n",
               count, bench_raw_now() - started, (double) data->bytes / BYTES_PER_MB, mean, data->page_bytes);
    return rc;
}

// ---------------------------------------------------------------------------
//  shoald processes

static int
s_node_spawn(bench_t *bench, bench_node_t *node, const char *join)
{
    pid_t pid = bench_raw_fork_bound();
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
    double deadline = bench_raw_now() + (double) timeout_ms / MS_PER_S;
    int rc = -1;
    while (client && bench_raw_now() < deadline) {
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
        //  A connection tried before the node listened may not recover:
        //  the next attempt starts afresh.
        shoal_client_destroy(&client);
        s_sleep_ms(BENCH_STATUS_POLL_MS);
        client = s_client_new(bench, node, BENCH_STATUS_TIMEOUT_MS);
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

//  Starts NODE (prepared) joining JOIN and waits until it answers status;
//  *STARTED is when the process that answered was spawned. A node that
//  exits at once has found its port, free when chosen, taken by some other
//  process on this shared machine before it bound: it is started again on
//  another one. Its data directory is left as it is. Returns 0 or -1.
static int
s_node_start(bench_t *bench, bench_node_t *node, const char *join, double *started)
{
    for (int attempt = 0; attempt <= BENCH_SPAWN_RETRIES; attempt++) {
        if (attempt) {
            fprintf(stderr, "%s did not start: trying again on another port\n", node->id);
            if (s_node_prepare(bench, node, node->id))
                return -1;
        }
        *started = bench_raw_now();
        if (s_node_spawn(bench, node, join))
            return -1;
        if (s_wait_status(bench, node, BENCH_START_TIMEOUT_MS) == 0)
            return 0;
        if (node->pid > 0)
            return -1;
    }
    return -1;
}

// ---------------------------------------------------------------------------
//  Raw tables

static const shoal_cf_t s_table_families[BENCH_TABLE_FAMILIES] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC, SHOAL_CF_KV
};

static int
s_rows_append(bench_rows_t *rows, const char *key, size_t key_size, const char *value, size_t value_size)
{
    size_t needed = rows->size + 2 * sizeof(uint32_t) + key_size + value_size;
    if (needed > rows->capacity) {
        size_t grown = rows->capacity ? rows->capacity : 1024 * 1024;
        while (grown < needed)
            grown *= 2;
        uint8_t *bigger = (uint8_t *) realloc(rows->bytes, grown);
        if (!bigger)
            return -1;
        rows->bytes = bigger;
        rows->capacity = grown;
    }
    uint32_t sizes[2] = { (uint32_t) key_size, (uint32_t) value_size };
    memcpy(rows->bytes + rows->size, &sizes[0], sizeof(uint32_t));
    memcpy(rows->bytes + rows->size + sizeof(uint32_t), key, key_size);
    rows->size += sizeof(uint32_t) + key_size;
    memcpy(rows->bytes + rows->size, &sizes[1], sizeof(uint32_t));
    memcpy(rows->bytes + rows->size + sizeof(uint32_t), value, value_size);
    rows->size += sizeof(uint32_t) + value_size;
    rows->value_bytes += value_size;
    rows->rows++;
    return 0;
}

static void
s_tables_clear(bench_tables_t *tables)
{
    for (size_t f = 0; f < BENCH_TABLE_FAMILIES; f++)
        free(tables->families[f].bytes);
    memset(tables, 0, sizeof *tables);
}

//  Options for a raw database and its table files: the store's table
//  format (block-based, full bloom filter, blocks of BLOCK_BYTES), no
//  compression.
static rocksdb_options_t *
s_tables_options(size_t block_bytes)
{
    rocksdb_options_t *options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(options, 1);
    rocksdb_options_set_create_missing_column_families(options, 1);
    rocksdb_options_set_compression(options, rocksdb_no_compression);
    rocksdb_block_based_table_options_t *table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_filter_policy(table,
        rocksdb_filterpolicy_create_bloom_full(BENCH_BLOOM_BITS_PER_KEY));
    rocksdb_block_based_options_set_block_size(table, block_bytes);
    rocksdb_options_set_block_based_table_factory(options, table);
    rocksdb_block_based_options_destroy(table);
    return options;
}

//  A raw database with every family of the store.
typedef struct {
    rocksdb_options_t *options;         //  the store's table format, for its files too
    rocksdb_options_t *entry_options;   //  the same for oplog_by_node_hlc (larger blocks)
    rocksdb_t *db;                      //  NULL when it did not open
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];
} bench_db_t;

//  The options of family CF in DB: the store's block size for it.
static const rocksdb_options_t *
s_db_options(const bench_db_t *db, shoal_cf_t cf)
{
    return cf == SHOAL_CF_OPLOG_BY_NODE_HLC ? db->entry_options : db->options;
}

//  Opens the database in DIR into DB: read-only, or created when missing.
//  Returns 0, or -1 after saying why.
static int
s_db_open(bench_db_t *db, const char *dir, bool read_only)
{
    memset(db, 0, sizeof *db);
    db->options = s_tables_options(BENCH_BLOCK_BYTES);
    db->entry_options = s_tables_options(SHOAL_STORE_ENTRY_BLOCK_BYTES);
    const char *names[SHOAL_CF_COUNT];
    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        names[cf] = shoal_cf_name((shoal_cf_t) cf);
        cf_options[cf] = s_db_options(db, (shoal_cf_t) cf);
    }
    char *error = NULL;
    db->db = read_only
           ? rocksdb_open_for_read_only_column_families(db->options, dir, SHOAL_CF_COUNT, names, cf_options,
                                                        db->cfs, 0, &error)
           : rocksdb_open_column_families(db->options, dir, SHOAL_CF_COUNT, names, cf_options, db->cfs, &error);
    if (!error)
        return 0;
    fprintf(stderr, "raw tables: cannot open %s: %s\n", dir, error);
    rocksdb_free(error);
    return -1;
}

static void
s_db_close(bench_db_t *db)
{
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        if (db->cfs[cf])
            rocksdb_column_family_handle_destroy(db->cfs[cf]);
    if (db->db)
        rocksdb_close(db->db);
    if (db->options)
        rocksdb_options_destroy(db->options);
    if (db->entry_options)
        rocksdb_options_destroy(db->entry_options);
    memset(db, 0, sizeof *db);
}

//  Reads every row of the catch-up's families from the closed store in
//  DB_DIR into TABLES. Returns 0 or -1.
static int
s_tables_read(const char *db_dir, bench_tables_t *tables)
{
    memset(tables, 0, sizeof *tables);
    bench_db_t db;
    int rc = s_db_open(&db, db_dir, true);
    rocksdb_readoptions_t *read = rocksdb_readoptions_create();
    for (size_t f = 0; f < BENCH_TABLE_FAMILIES && rc == 0; f++) {
        bench_rows_t *rows = &tables->families[f];
        rows->cf = s_table_families[f];
        rocksdb_iterator_t *it = rocksdb_create_iterator_cf(db.db, read, db.cfs[rows->cf]);
        for (rocksdb_iter_seek_to_first(it); rc == 0 && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
            size_t key_size, value_size;
            const char *key = rocksdb_iter_key(it, &key_size);
            const char *value = rocksdb_iter_value(it, &value_size);
            rc = s_rows_append(rows, key, key_size, value, value_size);
            tables->bytes += key_size + value_size;
        }
        rocksdb_iter_destroy(it);
        if (rc)
            fprintf(stderr, "raw tables: out of memory reading %s\n", shoal_cf_name(rows->cf));
    }
    rocksdb_readoptions_destroy(read);
    s_db_close(&db);
    if (rc)
        s_tables_clear(tables);
    return rc;
}

//  One family's table file, made by a thread of its own.
typedef struct {
    const bench_rows_t *rows;           //  what it holds
    const rocksdb_options_t *options;   //  the table format
    char path[BENCH_PATH_MAX + 64];     //  where it is written
    char *error;                        //  RocksDB's error, NULL when made
} bench_table_job_t;

static void *
s_table_make(void *arg)
{
    bench_table_job_t *job = (bench_table_job_t *) arg;
    rocksdb_envoptions_t *env = rocksdb_envoptions_create();
    rocksdb_sstfilewriter_t *writer = rocksdb_sstfilewriter_create(env, job->options);
    rocksdb_sstfilewriter_open(writer, job->path, &job->error);
    size_t at = 0;
    for (size_t r = 0; r < job->rows->rows && !job->error; r++) {
        uint32_t key_size, value_size;
        memcpy(&key_size, job->rows->bytes + at, sizeof key_size);
        const char *key = (const char *) job->rows->bytes + at + sizeof key_size;
        at += sizeof key_size + key_size;
        memcpy(&value_size, job->rows->bytes + at, sizeof value_size);
        const char *value = (const char *) job->rows->bytes + at + sizeof value_size;
        at += sizeof value_size + value_size;
        rocksdb_sstfilewriter_put(writer, key, key_size, value, value_size, &job->error);
    }
    if (!job->error)
        rocksdb_sstfilewriter_finish(writer, &job->error);
    rocksdb_sstfilewriter_destroy(writer);
    rocksdb_envoptions_destroy(env);
    return NULL;
}

//  Seconds RocksDB alone takes to write TABLES into a fresh database in
//  DIR (removed after), a thread per family making its table file, then
//  ingesting the files. -1 on failure.
static double
s_tables_write(const bench_tables_t *tables, const char *dir)
{
    char db_dir[BENCH_PATH_MAX + 8];
    snprintf(db_dir, sizeof db_dir, "%s/db", dir);
    bench_db_t db = { 0 };
    double seconds = -1;
    if (zsys_dir_create("%s", dir))
        fprintf(stderr, "raw tables: cannot create %s\n", dir);
    else
    if (s_db_open(&db, db_dir, false) == 0) {
        bench_table_job_t jobs[BENCH_TABLE_FAMILIES];
        pthread_t threads[BENCH_TABLE_FAMILIES];
        bool started[BENCH_TABLE_FAMILIES] = { false };
        double begun = bench_raw_now();
        for (size_t f = 0; f < BENCH_TABLE_FAMILIES; f++) {
            jobs[f] = (bench_table_job_t) { .rows = &tables->families[f],
                                            .options = s_db_options(&db, tables->families[f].cf) };
            snprintf(jobs[f].path, sizeof jobs[f].path, "%s/%s.sst", dir, shoal_cf_name(tables->families[f].cf));
            started[f] = pthread_create(&threads[f], NULL, s_table_make, &jobs[f]) == 0;
        }
        bool made = true;
        for (size_t f = 0; f < BENCH_TABLE_FAMILIES; f++) {
            if (started[f])
                pthread_join(threads[f], NULL);
            if (!started[f] || jobs[f].error) {
                fprintf(stderr, "raw tables: %s: %s\n", jobs[f].path, jobs[f].error ? jobs[f].error : "no thread");
                made = false;
            }
            rocksdb_free(jobs[f].error);
        }
        rocksdb_ingestexternalfileoptions_t *ingest = rocksdb_ingestexternalfileoptions_create();
        rocksdb_ingestexternalfileoptions_set_move_files(ingest, 1);
        for (size_t f = 0; f < BENCH_TABLE_FAMILIES && made; f++) {
            const char *files[1] = { jobs[f].path };
            char *error = NULL;
            rocksdb_ingest_external_file_cf(db.db, db.cfs[tables->families[f].cf], files, 1, ingest, &error);
            if (error) {
                fprintf(stderr, "raw tables: ingest %s: %s\n", jobs[f].path, error);
                rocksdb_free(error);
                made = false;
            }
        }
        rocksdb_ingestexternalfileoptions_destroy(ingest);
        if (made)
            seconds = bench_raw_now() - begun;
    }
    s_db_close(&db);
    s_remove_tree(dir);
    return seconds;
}

// ---------------------------------------------------------------------------
//  Catch-up

//  The size of the file at PATH, 0 when there is none.
static long
s_file_size(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return 0;
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fclose(file);
    return size;
}

//  Suspect and dead events in the log at PATH past its first FROM bytes:
//  the mesh's lines "mesh: node N (...) suspect" and "... dead", each
//  printed as it is found so that a run says who suspected whom, and when.
static int
s_suspicions(const char *path, long from)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return 0;
    fseek(file, from, SEEK_SET);
    int events = 0;
    char line[BENCH_PATH_MAX];
    while (fgets(line, sizeof line, file))
        if (strstr(line, "mesh: node ") && (strstr(line, ") suspect") || strstr(line, ") dead"))) {
            printf("  event in %s: %s", path, line);
            events++;
        }
    fclose(file);
    return events;
}

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

//  Checks that n2 holds as many entries of each bench dataset as written
//  (read from the counts n2 keeps beside its writes).
static int
s_check_counts(shoal_client_t *client, const bench_data_t *data)
{
    int rc = 0;
    for (size_t d = 0; d < BENCH_DATASETS; d++) {
        char name[16];
        s_dataset_name(d, name, sizeof name);
        shoal_dataset_list_t stats;
        int answer = shoal_client_oplog_stats(client, name, &stats);
        if (answer != 200) {
            fprintf(stderr, "oplog stats of %s on n2: %d %s\n", name, answer, shoal_client_error(client));
            return -1;
        }
        uint64_t entries = stats.count == 1 ? stats.datasets[0].entries : 0;
        shoal_dataset_list_clear(&stats);
        if (entries != data->per_dataset[d]) {
            fprintf(stderr, "n2 holds %" PRIu64 " entries of %s, n1 %zu\n", entries, name, data->per_dataset[d]);
            rc = -1;
        }
    }
    return rc;
}

//  Starts a fresh n2 joining n1 and times its catch-up into REP.
//  Bytes process PID has caused to be written to disk so far, or -1.
static double
s_written(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/io", (int) pid);
    FILE *file = fopen(path, "r");
    double written = -1;
    while (file && fgets(line, sizeof line, file))
        if (strncmp(line, "write_bytes:", 12) == 0)
            written = strtod(line + 12, NULL);
    if (file)
        fclose(file);
    return written;
}

//  CPU seconds process PID has used so far, and into *FAULTS (may be NULL)
//  the page faults it has taken; -1 when unknown.
static double
s_process_cpu(pid_t pid, double *faults)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *file = fopen(path, "r");
    bool read = file && fgets(line, sizeof line, file);
    if (file)
        fclose(file);
    if (faults)
        *faults = -1;
    //  The fields after the command, which may hold spaces, closed by ')':
    //  state (3), ..., minflt (10), majflt (12), utime (14), stime (15).
    char *fields = read ? strrchr(line, ')') : NULL;
    unsigned long minflt, majflt, utime, stime;
    if (!fields || sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %lu %*u %lu %*u %lu %lu", &minflt, &majflt,
                          &utime, &stime) != 4)
        return -1;
    if (faults)
        *faults = (double) (minflt + majflt);
    return (double) (utime + stime) / (double) sysconf(_SC_CLK_TCK);
}

//  Waits until process PID is idle (see BENCH_IDLE_CPU_S). Returns the
//  seconds waited, or -1 when it was still busy at the timeout or is gone.
static double
s_wait_idle(pid_t pid)
{
    double started = bench_raw_now();
    double before = s_process_cpu(pid, NULL);
    while (before >= 0 && bench_raw_now() - started < (double) BENCH_IDLE_TIMEOUT_MS / MS_PER_S) {
        s_sleep_ms(BENCH_IDLE_WINDOW_MS);
        double after = s_process_cpu(pid, NULL);
        if (after >= 0 && after - before < BENCH_IDLE_CPU_S)
            return bench_raw_now() - started;
        before = after;
    }
    return -1;
}

//  CPU seconds that WHO (RUSAGE_SELF, RUSAGE_CHILDREN) has used so far.
static double
s_rusage_cpu(int who)
{
    struct rusage usage;
    getrusage(who, &usage);
    return (double) usage.ru_utime.tv_sec + (double) usage.ru_utime.tv_usec / 1e6
         + (double) usage.ru_stime.tv_sec + (double) usage.ru_stime.tv_usec / 1e6;
}

static int
s_catch_up(bench_t *bench, const bench_data_t *data, const shoal_head_list_t *n1_heads, bench_rep_t *rep)
{
    s_remove_tree(bench->n2.dir);
    if (s_node_prepare(bench, &bench->n2, "n2"))
        return -1;
    long n1_from = s_file_size(bench->n1.log_path), n2_from = s_file_size(bench->n2.log_path);
    FILE *log = fopen(bench->n2.log_path, "a");
    if (log) {
        fprintf(log, "---- bench_sync: starting n2 at %s\n", bench->n2.endpoint);
        fclose(log);
    }
    double started;
    double n1_cpu_from = s_process_cpu(bench->n1.pid, NULL);
    if (s_node_start(bench, &bench->n2, bench->n1.endpoint, &started))
        return -1;
    rep->to_status = bench_raw_now() - started;
    shoal_client_t *client = s_client_new(bench, &bench->n2, BENCH_HEADS_TIMEOUT_MS);
    if (!client)
        return -1;
    int rc = -1;
    double deadline = started + (double) BENCH_CATCHUP_TIMEOUT_MS / MS_PER_S;
    double reported = bench_raw_now();
    size_t held = 0, timeouts = 0, held_before = 0;
    double moved = bench_raw_now();
    while (bench_raw_now() < deadline) {
        shoal_head_list_t heads;
        int answer = shoal_client_oplog_heads(client, NULL, &heads);
        double now = bench_raw_now();
        if (answer == 200) {
            bool match = s_heads_match(n1_heads, &heads, data, &held);
            shoal_head_list_clear(&heads);
            if (held && rep->to_first < 0)
                rep->to_first = now - started;
            if (match) {
                rep->catchup = now - started;
                rep->n2_written = s_written(bench->n2.pid);
                rep->n2_cpu = s_process_cpu(bench->n2.pid, &rep->n2_faults);
                double n1_cpu = s_process_cpu(bench->n1.pid, NULL);
                rep->n1_cpu = n1_cpu >= 0 && n1_cpu_from >= 0 ? n1_cpu - n1_cpu_from : -1;
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
                bench_raw_now() - started);
    else {
        rc = s_check_counts(client, data);
        //  Counted after the checks too: they run on the nodes' reactors.
        rep->suspicions = s_suspicions(bench->n1.log_path, n1_from) + s_suspicions(bench->n2.log_path, n2_from);
    }
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
    printf("%-7s raw tables  %7.2f s  %8.1f MB/s of entries   (RocksDB alone: the four families' table files"
           " made and ingested)\n", label, rep->raw_tables, s_mb_per_s(data->bytes, rep->raw_tables));
    printf("%-7s n2 status   %7.2f s after spawn; first entry at %.2f s\n", label, rep->to_status, rep->to_first);
    printf("%-7s catch-up    %7.2f s  %8.1f MB/s  %9.0f entries/s   (from spawn)\n", label, rep->catchup,
           catchup_mb, (double) data->count / rep->catchup);
    double from_status = rep->catchup - rep->to_status;
    printf("%-7s catch-up    %7.2f s  %8.1f MB/s  %9.0f entries/s   (from first status answer)\n", label,
           from_status, s_mb_per_s(data->bytes, from_status), (double) data->count / from_status);
    printf("%-7s ratio       %7.3f of raw paged, %.3f of raw stream\n", label, catchup_mb / paged_mb,
           catchup_mb / stream_mb);
    double floor = rep->raw_paged + rep->raw_tables;
    printf("%-7s floor       %7.2f s  (raw paged + raw tables): catch-up %.2f times it; at the floor, %.3f of"
           " raw paged\n", label, floor, rep->catchup / floor, rep->raw_paged / floor);
    if (rep->n2_cpu >= 0 && rep->n1_cpu >= 0)
        printf("%-7s cpu         catch-up %.2f s (n2 %.2f s, %.0f page faults; n1 %.2f s); floor %.2f s (raw paged"
               " %.2f s, both ends; raw tables %.2f s)\n", label, rep->n2_cpu + rep->n1_cpu, rep->n2_cpu,
               rep->n2_faults, rep->n1_cpu, rep->paged_cpu + rep->tables_cpu, rep->paged_cpu, rep->tables_cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rep->n2_cpu >= 0 && rep->n1_cpu >= 0 && cores > 0) {
        //  Both nodes share this machine's cores (see the top).
        double budget = (double) cores * BENCH_EXPECTED_FLOOR_TIMES * floor;
        printf("%-7s cpu budget  catch-up used %.2f of the %.2f CPU seconds %ld cores give in %.1f times the floor"
               " (%.0f%%)\n", label, rep->n2_cpu + rep->n1_cpu, budget, cores, BENCH_EXPECTED_FLOOR_TIMES,
               100.0 * (rep->n2_cpu + rep->n1_cpu) / budget);
    }
    if (rep->n2_written >= 0)
        printf("%-7s n2 wrote    %7.0f bytes per entry to disk by catch-up's end\n", label,
               rep->n2_written / (double) data->count);
    if (rep->suspicions >= 0)
        printf("%-7s mesh        %d suspect or dead event(s) in n1's and n2's logs, catch-up and checks%s\n", label,
               rep->suspicions, rep->suspicions ? "" : ": none");
    fflush(stdout);
}

static void
s_print_medians(const bench_data_t *data, const bench_tables_t *table_rows, const bench_rep_t *reps,
                size_t count)
{
    double paged[BENCH_REPS_MAX], stream[BENCH_REPS_MAX], tables[BENCH_REPS_MAX], catchup[BENCH_REPS_MAX];
    double from_status[BENCH_REPS_MAX], to_status[BENCH_REPS_MAX], to_first[BENCH_REPS_MAX];
    double ratio_paged[BENCH_REPS_MAX], ratio_stream[BENCH_REPS_MAX], floor_times[BENCH_REPS_MAX];
    double written[BENCH_REPS_MAX], paged_cpu[BENCH_REPS_MAX], tables_cpu[BENCH_REPS_MAX];
    double n2_cpu[BENCH_REPS_MAX], n1_cpu[BENCH_REPS_MAX], n2_faults[BENCH_REPS_MAX];
    size_t written_count = 0, cpu_count = 0;
    for (size_t i = 0; i < count; i++) {
        paged[i] = reps[i].raw_paged;
        stream[i] = reps[i].raw_stream;
        tables[i] = reps[i].raw_tables;
        catchup[i] = reps[i].catchup;
        from_status[i] = reps[i].catchup - reps[i].to_status;
        to_status[i] = reps[i].to_status;
        to_first[i] = reps[i].to_first;
        ratio_paged[i] = reps[i].raw_paged / reps[i].catchup;
        ratio_stream[i] = reps[i].raw_stream / reps[i].catchup;
        floor_times[i] = reps[i].catchup / (reps[i].raw_paged + reps[i].raw_tables);
        if (reps[i].n2_written >= 0)
            written[written_count++] = reps[i].n2_written;
        if (reps[i].n2_cpu >= 0 && reps[i].n1_cpu >= 0) {
            paged_cpu[cpu_count] = reps[i].paged_cpu;
            tables_cpu[cpu_count] = reps[i].tables_cpu;
            n2_cpu[cpu_count] = reps[i].n2_cpu;
            n1_cpu[cpu_count] = reps[i].n1_cpu;
            n2_faults[cpu_count++] = reps[i].n2_faults;
        }
    }
    //  Suspicions are not a median: every one counts, so the line says all.
    int suspicions = 0;
    for (size_t i = 0; i < count; i++)
        suspicions += reps[i].suspicions;
    bench_rep_t median = {
        .raw_paged = s_median(paged, count), .raw_stream = s_median(stream, count),
        .raw_tables = s_median(tables, count),
        .to_status = s_median(to_status, count), .to_first = s_median(to_first, count),
        .catchup = s_median(catchup, count), .suspicions = -1,
        .n2_written = written_count ? s_median(written, written_count) : -1,
        .paged_cpu = cpu_count ? s_median(paged_cpu, cpu_count) : -1,
        .tables_cpu = cpu_count ? s_median(tables_cpu, cpu_count) : -1,
        .n2_cpu = cpu_count ? s_median(n2_cpu, cpu_count) : -1,
        .n1_cpu = cpu_count ? s_median(n1_cpu, cpu_count) : -1,
        .n2_faults = cpu_count ? s_median(n2_faults, cpu_count) : -1,
    };
    printf("\nmedians of %zu (each column on its own):\n", count);
    s_print_rep("median", data, &median);
    double from = s_median(from_status, count);
    printf("median  catch-up from first status answer %.2f s, %.1f MB/s\n", from, s_mb_per_s(data->bytes, from));
    printf("median  ratio of each repetition: %.3f of raw paged, %.3f of raw stream\n",
           s_median(ratio_paged, count), s_median(ratio_stream, count));
    double times = s_median(floor_times, count);
    printf("median  catch-up over the floor of each repetition: %.2f times\n", times);
    //  The entry's bytes (stored once, in oplog_by_node_hlc) and its
    //  locator's (oplog_by_hash).
    uint64_t entry_bytes = 0, locator_bytes = 0;
    for (size_t f = 0; f < BENCH_TABLE_FAMILIES; f++) {
        if (table_rows->families[f].cf == SHOAL_CF_OPLOG_BY_NODE_HLC)
            entry_bytes = table_rows->families[f].value_bytes;
        if (table_rows->families[f].cf == SHOAL_CF_OPLOG_BY_HASH)
            locator_bytes = table_rows->families[f].value_bytes;
    }
    double rows_per_entry = (double) table_rows->bytes / (double) data->count;
    printf("bytes per entry: table rows %.0f, of which %.0f the entry in oplog_by_node_hlc and %.0f "
           "its locator in oplog_by_hash; ~%d in layout 1 (each entry stored twice)", rows_per_entry,
           (double) entry_bytes / (double) data->count, (double) locator_bytes / (double) data->count,
           BENCH_LAYOUT1_BYTES_PER_ENTRY);
    if (median.n2_written >= 0)
        printf("; n2 wrote %.0f to disk by catch-up's end", median.n2_written / (double) data->count);
    printf("\n");
    printf("expected: catch-up within %.1f times the floor (%.2f times): %s\n", BENCH_EXPECTED_FLOOR_TIMES,
           times, times <= BENCH_EXPECTED_FLOOR_TIMES ? "met" : "NOT met");
    printf("expected: no suspect or dead event in any repetition (%d in %zu catch-ups and their checks): %s\n",
           suspicions, count, suspicions == 0 ? "met" : "NOT met");
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
    const char *reps_setting = getenv("BENCH_REPS");
    char *reps_end = "";
    long rep_count = reps_setting && *reps_setting ? strtol(reps_setting, &reps_end, 10) : BENCH_DEFAULT_REPS;
    if (*reps_end || rep_count < 1 || rep_count > BENCH_REPS_MAX) {
        fprintf(stderr, "bench_sync: BENCH_REPS is 1 to %d, not '%s'\n", BENCH_REPS_MAX, reps_setting);
        return EXIT_FAILURE;
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
           " store sync on\n", count, BENCH_DATASETS, BENCH_VALUE_SIZE, (int) rep_count,
           getenv("SHOAL_MESH_SYNC_INTERVAL_MS") ? getenv("SHOAL_MESH_SYNC_INTERVAL_MS") : BENCH_SYNC_INTERVAL_MS);
    printf("work directory %s\n", bench.root);
    bench_data_t data;
    bench_tables_t tables = { 0 };
    shoal_head_list_t n1_heads = { 0 };
    shoal_client_t *n1_client = NULL;
    bench_rep_t reps[BENCH_REPS_MAX];
    size_t done = 0;
    int rc = s_keys_make(&bench) || s_node_prepare(&bench, &bench.n1, "n1") ? -1 : 0;
    if (rc == 0) {
        printf("writing n1's log offline\n");
        fflush(stdout);
        char db_dir[BENCH_PATH_MAX + 16];
        snprintf(db_dir, sizeof db_dir, "%s/data/db", bench.n1.dir);
        rc = zsys_dir_create("%s/data", bench.n1.dir) == 0 ? s_write_log(db_dir, count, &data) : -1;
        if (rc == 0) {
            rc = s_tables_read(db_dir, &tables);
            if (rc == 0)
                printf("  read n1's tables for raw tables: %.1f MB of keys and values in %zu + %zu + %zu + %zu rows\n",
                       (double) tables.bytes / BYTES_PER_MB, tables.families[0].rows, tables.families[1].rows,
                       tables.families[2].rows, tables.families[3].rows);
        }
    }
    if (rc == 0) {
        printf("starting n1\n");
        double started = bench_raw_now();
        //  Its port is chosen again now: writing the log takes long enough
        //  for another process to take the first one.
        double spawned;
        rc = s_node_prepare(&bench, &bench.n1, "n1") || s_node_start(&bench, &bench.n1, "", &spawned) ? -1 : 0;
        if (rc == 0) {
            printf("  n1 answers status after %.1f s\n", bench_raw_now() - started);
            fflush(stdout);
            double waited = s_wait_idle(bench.n1.pid);
            if (waited >= 0)
                printf("  n1 idle %.1f s later\n", waited);
            else
                printf("  n1 still busy after %d s: the first repetition shares the machine with it\n",
                       BENCH_IDLE_TIMEOUT_MS / MS_PER_S);
        }
    }
    if (rc == 0) {
        n1_client = s_client_new(&bench, &bench.n1, BENCH_HEADS_TIMEOUT_MS);
        int answer = n1_client ? shoal_client_oplog_heads(n1_client, NULL, &n1_heads) : -1;
        if (answer != 200) {
            fprintf(stderr, "oplog heads of n1: %d %s\n", answer, n1_client ? shoal_client_error(n1_client) : "");
            rc = -1;
        }
    }
    for (size_t r = 0; r < (size_t) rep_count && rc == 0; r++) {
        bench_rep_t *rep = &reps[r];
        memset(rep, 0, sizeof *rep);
        rep->to_first = -1;
        rep->n2_written = rep->n2_cpu = rep->n1_cpu = rep->n2_faults = -1;
        printf("repetition %zu of %ld\n", r + 1, rep_count);
        printf("  raw paged: %.1f MB in %zu-byte pages, %d in flight\n", (double) data.bytes / BYTES_PER_MB,
               data.page_bytes, BENCH_DATASETS);
        fflush(stdout);
        double children_cpu = s_rusage_cpu(RUSAGE_CHILDREN);
        rep->raw_paged = bench_raw_paged(data.bytes, data.page_bytes, BENCH_DATASETS);
        rep->paged_cpu = s_rusage_cpu(RUSAGE_CHILDREN) - children_cpu;
        printf("  raw stream: %.1f MB in %d-byte zero-copy messages\n", (double) data.bytes / BYTES_PER_MB,
               BENCH_RAW_STREAM_MESSAGE);
        fflush(stdout);
        rep->raw_stream = rep->raw_paged < 0 ? -1 : bench_raw_stream(data.bytes);
        printf("  raw tables: %.1f MB in %d table files\n", (double) tables.bytes / BYTES_PER_MB,
               BENCH_TABLE_FAMILIES);
        fflush(stdout);
        char tables_dir[BENCH_PATH_MAX];
        snprintf(tables_dir, sizeof tables_dir, "%s/raw-tables", bench.root);
        double self_cpu = s_rusage_cpu(RUSAGE_SELF);
        rep->raw_tables = rep->raw_stream < 0 ? -1 : s_tables_write(&tables, tables_dir);
        rep->tables_cpu = s_rusage_cpu(RUSAGE_SELF) - self_cpu;
        if (rep->raw_tables < 0) {
            rc = -1;
            break;
        }
        printf("  catch-up: fresh n2 joins n1\n");
        fflush(stdout);
        rc = s_catch_up(&bench, &data, &n1_heads, rep);
        bench_raw_stop(&bench.n2.pid, "n2");
        if (rc == 0) {
            char label[32];
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
        s_print_medians(&data, &tables, reps, done);
    shoal_head_list_clear(&n1_heads);
    s_tables_clear(&tables);
    shoal_client_destroy(&n1_client);
    bench_raw_stop(&bench.n2.pid, "n2");
    bench_raw_stop(&bench.n1.pid, "n1");
    int suspicions = 0;
    for (size_t r = 0; r < done; r++)
        suspicions += reps[r].suspicions;
    if ((rc == 0 && suspicions == 0) || !getenv("BENCH_KEEP"))
        s_remove_tree(bench.root);
    else
        fprintf(stderr, "kept %s (BENCH_KEEP)\n", bench.root);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
