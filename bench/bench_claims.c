/*  bench_claims: claims created and released over the protocol through
    libshoal against one real shoald, beside the floor of a status round
    trip and the start of a bare guest process, measured in the same run.

    Usage: bench_claims [COUNT]   (default 10,000 claims)
           BENCH_ALIVE=N keeps at most N claims alive at once (default 100);
           BENCH_KEEP=1 keeps the work directory (node log) of a failed run;
           shoald and shoal-guest are looked for in $SHOAL_BIN_DIR, else
           beside this program; any SHOAL_* setting neither the harness
           nor the bench fixes passes through to the node.

    One shoald on loopback (the tests' cluster harness with one node, store
    sync on, shoal's own mesh timeouts), its limits raised through the
    environment so that none refuses: SHOAL_LIMITS_MAX_CLAIMS,
    SHOAL_LIMITS_TENANT_MAX_CLAIMS and SHOAL_LIMITS_MAX_RUNNING to COUNT,
    SHOAL_LIMITS_MEMORY_MB to COUNT MiB at least (defaults 100, 50, 100 and
    16384). In order:

      guest     BENCH_GUEST_RUNS times, outside the node: a 1 MiB image
                made with shoal_image_create (what a create makes), then
                `shoal-guest run DIR` forked in a session of its own and
                exec'd, as the proc driver does, timed until the guest holds
                its pid file (polled every BENCH_GUEST_POLL_US: what the
                driver waits for before a claim runs); then SIGTERM, timed
                until the process is gone (what a release waits for).
      status    BENCH_STATUS_CALLS shoal_client_status round trips: the
                floor under every call.
      claims    COUNT claims of 1 MiB, idle, no disk, proc driver, created
                one after the other by one admin client with ids of the
                bench's. Guests are processes, each waking every millisecond
                for its tick: 10,000 at once would swamp two cores (and
                count against `ulimit -u` and pid_max, printed at the
                start), so the claims roll: once BENCH_ALIVE are alive, the
                oldest is released before the next create, and the last
                ones are released at the end. Every create and every release
                is timed on its own, as the client sees it.

      paced     then BENCH_STATUS_CALLS status round trips again, paced as
                the busy phase paces them (BENCH_STATUS_PAUSE_US apart): the
                idle reference of the busy phase. Calls back to back keep
                the node's and the client's threads running, while calls
                with a pause between them wait each time for threads to be
                woken and scheduled: the summary prints both p99s, and
                their ratio, from the same run.

      busy      then a VM manager (tests/fake-vm-manager) that answers every
                call after BENCH_SLOW_S s: BENCH_BUSY_CLAIMS exec claims are
                created, stopped and released at once, each from a client
                of its own, while one more client times status round trips
                until the last of them ends. A node that waited on a guest
                would answer those late by a whole manager call; the node
                runs guest operations in its guest actor, off its reactor.

      outside   then the same manager calls (the busy phase's calls.log)
                run again from the bench, by as many threads as the guest
                actor has workers, at the niceness and policy shoald gives
                its manager (drivers/exec_nice, drivers/exec_sched, from the
                environment as for the node), against a VM directory of their own,
                while status is timed as before: what the manager's
                processes alone cost status on this machine's two cores,
                the limit the busy phase is compared with
                (BENCH_OUTSIDE_FACTOR).

      scraped   then the metrics endpoint (metrics/bind, on a free port):
                2 x BENCH_SCRAPE_CLAIMS claims (at most COUNT each) created
                and released as above, in blocks of BENCH_SCRAPE_BLOCK,
                every other block while a thread GETs /metrics
                BENCH_SCRAPE_HZ times a second: interleaved, so that what
                else the machine does falls on both halves alike. The
                scraped blocks' create p99 is compared with the others'
                (BENCH_SCRAPE_FACTOR).

    BENCH_STORE_SYNC=0 runs the node with store/sync off, to measure what
    the node's synced writes cost the figures (a synced write holds the
    reactor until the disk has it); the expectations hold for sync on.

    What a busy status waits on (perf trace of shoald during the phase,
    2026-12-05, the machine shared with other work): not the guests (their
    manager calls run on the guest actor's workers) but the reactor's own
    synced writes of the claims' states and registry entries, which the
    twenty creates, stops and releases make in bursts (the creates arrive
    together). One phase at load 5-6 had 85 fdatasync calls on the reactor
    thread, 0.19-11.6 ms each, 174 ms in all; one at load 9-10, with the
    disk busy writing back others' files, had 61 that took 20 ms or more
    (up to 494 ms), 5.7 s in all. A status queued behind one waits for it: that, and the
    machine's load, make the busy p99 and max. The paced idle phase makes
    no synced write.

    Printed: p50, p99 and max of each, and calls/s (calls over the time
    spent in them, one call at a time); for the claims also per slice of
    BENCH_SLICE calls, to show whether a node holding more claim records
    gets slower. The expectation (create p99 under BENCH_EXPECTED_CREATE_MS
    plus the guest start median; status while guests are busy within
    BENCH_BUSY_FACTOR times the paced idle status p99 of the same run, and within
    BENCH_OUTSIDE_FACTOR times its p99 with the manager calls run outside
    shoald) is printed
    beside the figures, not asserted: the machine is noisy (limits.md).
*/
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal.h"
#include "shoal_cluster.h"
#include "shoal_image.h"
#include "shoal_move_check.h"
#include "shoal_alloc.h"

#define BENCH_DEFAULT_COUNT 10000
#define BENCH_DEFAULT_ALIVE 100
#define BENCH_ALIVE_MAX 2000
#define BENCH_GUEST_RUNS 50
#define BENCH_GUEST_POLL_US 100
#define BENCH_GUEST_TIMEOUT_MS 10000
#define BENCH_STATUS_CALLS 2000
#define BENCH_SLICE 1000
#define BENCH_MIB (1024ull * 1024)
#define BENCH_GUEST_MEMORY BENCH_MIB
#define BENCH_TENANT "bench/claims"
#define BENCH_ID_MAX 32
#define BENCH_CALL_TIMEOUT_MS 30000
#define BENCH_EXPECTED_CREATE_MS 5.0
//  The node's default memory limit (limits/memory_mb), kept when it suffices.
#define BENCH_MEMORY_MB_DEFAULT 16384
//  shoal's own mesh timeouts (node/shoal_config.c), not the tests' short ones.
#define BENCH_PROBE_INTERVAL_MS 1000
#define BENCH_PROBE_TIMEOUT_MS 500
#define BENCH_SUSPECT_TIMEOUT_MS 5000
#define BENCH_SYNC_INTERVAL_MS 2000
#define BENCH_PATH_MAX 4096
//  A started guest keeps none of the bench's descriptors below this.
#define BENCH_FD_MAX 1024
//  The busy phase: exec claims whose manager answers every call late.
#define BENCH_BUSY_CLAIMS 20
#define BENCH_SLOW_S "1"
#define BENCH_BUSY_FACTOR 3.0
//  How much worse status may be while shoald drives the guests than while
//  the same manager calls load the machine from outside it.
#define BENCH_OUTSIDE_FACTOR 1.5
//  The scraped phase: claims per half, scrapes a second, and how much worse
//  a scraped create p99 may be than an unscraped one.
#define BENCH_SCRAPE_CLAIMS 1000
#define BENCH_SCRAPE_HZ 100
#define BENCH_SCRAPE_FACTOR 1.10
#define BENCH_SCRAPE_BUFFER 65536
#define BENCH_SCRAPE_BLOCK 50
#define BENCH_BUSY_TENANT "bench/busy"
#define BENCH_STATUS_PAUSE_US 2000
#define BENCH_BUSY_CALLS_MAX 100000
#define MS_PER_S 1000.0
#define NS_PER_S 1e9
#define US_PER_MS 1000

//  Latencies of one kind of call, in ms.
typedef struct {
    const char *name;
    double *values;
    size_t count;
    size_t capacity;
} bench_series_t;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / NS_PER_S;
}

static int
s_series_init(bench_series_t *series, const char *name, size_t capacity)
{
    series->name = name;
    series->values = (double *) malloc(capacity * sizeof *series->values);
    series->count = 0;
    series->capacity = capacity;
    return series->values ? 0 : -1;
}

static void
s_series_add(bench_series_t *series, double ms)
{
    if (series->count < series->capacity)
        series->values[series->count++] = ms;
}

static int
s_compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  The Qth quantile (0..1) of COUNT sorted VALUES.
static double
s_quantile(const double *sorted, size_t count, double q)
{
    if (count == 0)
        return 0;
    size_t rank = (size_t) (q * (double) count + 0.999999);
    return sorted[rank == 0 ? 0 : (rank > count ? count - 1 : rank - 1)];
}

//  p50, p99 and max of VALUES[FIRST..FIRST+COUNT), and calls/s.
typedef struct {
    double p50, p99, max, per_s;
} bench_stats_t;

static bench_stats_t
s_stats(const bench_series_t *series, size_t first, size_t count)
{
    bench_stats_t stats = { 0, 0, 0, 0 };
    if (count == 0)
        return stats;
    double *sorted = (double *) malloc(count * sizeof *sorted);
    memcpy(sorted, series->values + first, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, s_compare_double);
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += sorted[i];
    stats.p50 = s_quantile(sorted, count, 0.50);
    stats.p99 = s_quantile(sorted, count, 0.99);
    stats.max = sorted[count - 1];
    stats.per_s = sum > 0 ? (double) count * MS_PER_S / sum : 0;
    free(sorted);
    return stats;
}

static void
s_stats_print(const char *label, const bench_series_t *series, size_t first, size_t count)
{
    bench_stats_t stats = s_stats(series, first, count);
    printf("  %-22s %6zu calls  p50 %7.3f ms  p99 %7.3f ms  max %8.3f ms  %8.0f /s\n", label, count, stats.p50,
           stats.p99, stats.max, stats.per_s);
}

// ---------------------------------------------------------------------------
//  A bare guest, as the proc driver starts and stops one

//  Starts `shoal-guest run DIR` as the proc driver does. Returns its pid or -1.
static pid_t
s_guest_spawn(const char *program, const char *dir)
{
    char log[BENCH_PATH_MAX + 64];
    snprintf(log, sizeof log, "%s/guest.log", dir);
    char *argv[] = { (char *) program, (char *) "run", (char *) dir, NULL };
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        for (int other = STDERR_FILENO + 1; other < BENCH_FD_MAX; other++)
            close(other);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

//  Times BENCH_GUEST_RUNS image creations, guest starts and stops into the
//  three series. Returns 0 or -1.
static int
s_guest_runs(bench_series_t *create, bench_series_t *start, bench_series_t *stop)
{
    char program[BENCH_PATH_MAX];
    snprintf(program, sizeof program, "%s", shoal_test_program("shoal-guest"));
    for (int run = 0; run < BENCH_GUEST_RUNS && !zsys_interrupted; run++) {
        char dir[BENCH_PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/guest-%d", shoal_test_dir, run);
        char *error = NULL;
        double started = s_now();
        if (shoal_image_create(dir, BENCH_GUEST_MEMORY, 0, 0, &error)) {
            fprintf(stderr, "cannot create the image %s: %s\n", dir, error ? error : "?");
            free(error);
            return -1;
        }
        s_series_add(create, (s_now() - started) * MS_PER_S);
        started = s_now();
        pid_t pid = s_guest_spawn(program, dir);
        double deadline = started + BENCH_GUEST_TIMEOUT_MS / MS_PER_S;
        int status = 0;
        pid_t ended = 0;
        while (pid > 0 && shoal_image_running(dir) != pid && s_now() < deadline
           &&  (ended = waitpid(pid, &status, WNOHANG)) == 0)
            usleep(BENCH_GUEST_POLL_US);
        if (pid <= 0 || shoal_image_running(dir) != pid) {
            fprintf(stderr, "shoal-guest run %s did not start: %s (see its guest.log)\n", dir,
                    pid <= 0 ? "cannot fork"
                    : ended == pid ? (WIFEXITED(status) ? "it exited" : "a signal ended it")
                    : ended < 0 ? strerror(errno) : "no pid file in time");
            if (ended == pid)
                pid = 0;
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
            }
            return -1;
        }
        s_series_add(start, (s_now() - started) * MS_PER_S);
        started = s_now();
        deadline = started + BENCH_GUEST_TIMEOUT_MS / MS_PER_S;
        kill(pid, SIGTERM);
        while (waitpid(pid, NULL, WNOHANG) == 0 && s_now() < deadline)
            usleep(BENCH_GUEST_POLL_US);
        if (s_now() >= deadline) {
            fprintf(stderr, "shoal-guest run %s did not end within %d ms of SIGTERM\n", dir, BENCH_GUEST_TIMEOUT_MS);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        s_series_add(stop, (s_now() - started) * MS_PER_S);
        shoal_image_remove(dir);
    }
    return zsys_interrupted ? -1 : 0;
}

// ---------------------------------------------------------------------------
//  Calls through libshoal

static int
s_status_runs(shoal_client_t *client, bench_series_t *status)
{
    for (int i = 0; i < BENCH_STATUS_CALLS && !zsys_interrupted; i++) {
        shoal_status_t answer;
        double started = s_now();
        int rc = shoal_client_status(client, &answer);
        double ms = (s_now() - started) * MS_PER_S;
        if (rc != 200) {
            fprintf(stderr, "status: %d %s\n", rc, shoal_client_error(client));
            return -1;
        }
        shoal_status_clear(&answer);
        s_series_add(status, ms);
    }
    return zsys_interrupted ? -1 : 0;
}

static void
s_claim_id(size_t index, char *id, size_t size)
{
    snprintf(id, size, "bench-%06zu", index);
}

static int
s_release(shoal_client_t *client, size_t index, bench_series_t *release)
{
    char id[BENCH_ID_MAX];
    s_claim_id(index, id, sizeof id);
    double started = s_now();
    int rc = shoal_client_claim_release(client, id, NULL);
    double ms = (s_now() - started) * MS_PER_S;
    if (rc != 200) {
        fprintf(stderr, "release %s: %d %s\n", id, rc, shoal_client_error(client));
        return -1;
    }
    s_series_add(release, ms);
    return 0;
}

//  Creates COUNT claims, ALIVE at most at once, releasing the oldest first;
//  their ids are numbered from BASE (an id is never used twice).
static int
s_claim_runs_from(shoal_client_t *client, size_t base, size_t count, size_t alive, bench_series_t *create,
                  bench_series_t *release)
{
    size_t oldest = base, created = base;
    count += base;
    //  CREATE may hold earlier runs' calls: this run's begin here.
    size_t series_base = create->count;
    double started = s_now();
    int rc = 0;
    while (created < count && rc == 0 && !zsys_interrupted) {
        if (created - oldest == alive)
            rc = s_release(client, oldest++, release);
        if (rc)
            break;
        char id[BENCH_ID_MAX];
        s_claim_id(created, id, sizeof id);
        shoal_claim_spec_t spec = { .tenant = BENCH_TENANT, .memory_bytes = BENCH_GUEST_MEMORY, .id = id };
        double call = s_now();
        int answer = shoal_client_claim_create(client, &spec, NULL);
        double ms = (s_now() - call) * MS_PER_S;
        if (answer != 200) {
            fprintf(stderr, "create %s: %d %s\n", id, answer, shoal_client_error(client));
            rc = -1;
            break;
        }
        s_series_add(create, ms);
        created++;
        if ((created - base) % BENCH_SLICE == 0 || created == count) {
            size_t first = (created - base) - 1 - ((created - base) - 1) % BENCH_SLICE;
            bench_stats_t made = s_stats(create, series_base + first, created - base - first);
            printf("    %6zu created after %6.1f s: this slice's create p50 %.2f ms, p99 %.2f ms\n", created - base,
                   s_now() - started, made.p50, made.p99);
            fflush(stdout);
        }
    }
    //  The ones still alive go too: every guest the bench made ends.
    while (oldest < created && !zsys_interrupted)
        if (s_release(client, oldest++, release))
            rc = -1;
    return rc || zsys_interrupted ? -1 : 0;
}

static int
s_claim_runs(shoal_client_t *client, size_t count, size_t alive, bench_series_t *create, bench_series_t *release)
{
    return s_claim_runs_from(client, 0, count, alive, create, release);
}

//  The scraper of the scraped phase: GETs /metrics from PORT
//  BENCH_SCRAPE_HZ times a second until told to stop.
typedef struct {
    int port;
    volatile bool stop;
    volatile bool active;       //  scraping now (else it waits)
    size_t scrapes;             //  answered with a body
    size_t failures;            //  no connection or no body
    double seconds;             //  how long it ran
} bench_scraper_t;

static void *
s_scraper(void *arg)
{
    bench_scraper_t *self = (bench_scraper_t *) arg;
    char *buffer = (char *) malloc(BENCH_SCRAPE_BUFFER);
    double started = s_now();
    double next = started;
    while (!self->stop && !zsys_interrupted) {
        if (!self->active) {
            usleep(1000);
            next = s_now();
            continue;
        }
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t) self->port) };
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        size_t got = 0;
        const char *request = "GET /metrics HTTP/1.0\r\n\r\n";
        if (fd >= 0 && connect(fd, (struct sockaddr *) &address, sizeof address) == 0
            && write(fd, request, strlen(request)) == (ssize_t) strlen(request)) {
            ssize_t n;
            while ((n = read(fd, buffer, BENCH_SCRAPE_BUFFER)) > 0)
                got += (size_t) n;
        }
        if (fd >= 0)
            close(fd);
        if (got > 0)
            self->scrapes++;
        else
            self->failures++;
        next += 1.0 / BENCH_SCRAPE_HZ;
        double wait = next - s_now();
        if (wait > 0)
            usleep((useconds_t) (wait * 1e6));
    }
    (void) started;
    free(buffer);
    return NULL;
}

//  The scraped phase: 2 x COUNT claims, ids from BASE on, in blocks that
//  go unscraped (into QUIET) and scraped (into LOUD) by turns.
static int
s_scrape_runs(shoal_client_t *client, int port, size_t base, size_t count, size_t alive, bench_series_t *quiet,
              bench_series_t *loud, bench_series_t *release, bench_scraper_t *scraper)
{
    scraper->port = port;
    pthread_t thread;
    if (pthread_create(&thread, NULL, s_scraper, scraper))
        return -1;
    int rc = 0;
    double scraping = 0;
    for (size_t done = 0; done < 2 * count && rc == 0; done += BENCH_SCRAPE_BLOCK) {
        size_t block = 2 * count - done < BENCH_SCRAPE_BLOCK ? 2 * count - done : BENCH_SCRAPE_BLOCK;
        bool loudly = (done / BENCH_SCRAPE_BLOCK) % 2 == 1;
        if ((loudly ? loud : quiet)->count + block > count)
            loudly = !loudly;
        scraper->active = loudly;
        double started = s_now();
        rc = s_claim_runs_from(client, base + done, block, alive, loudly ? loud : quiet, release);
        scraper->active = false;
        if (loudly)
            scraping += s_now() - started;
    }
    scraper->stop = true;
    pthread_join(thread, NULL);
    scraper->seconds = scraping;
    printf("    %zu scrapes in %.1f s of scraped blocks (%.0f /s), %zu failed\n", scraper->scrapes, scraping,
           scraping > 0 ? scraper->scrapes / scraping : 0, scraper->failures);
    return rc;
}

// ---------------------------------------------------------------------------

//  Times status round trips of CLIENT into STATUS, a pause between them,
//  until DONE(ARG) is true. Returns 0, or -1 when one failed.
static int
s_status_until(shoal_client_t *client, bench_series_t *status, bool (*done)(void *), void *arg)
{
    while (!done(arg)) {
        shoal_status_t answer;
        double call = s_now();
        int code = shoal_client_status(client, &answer);
        double ms = (s_now() - call) * MS_PER_S;
        if (code != 200) {
            fprintf(stderr, "status: %d %s\n", code, shoal_client_error(client));
            return -1;
        }
        shoal_status_clear(&answer);
        s_series_add(status, ms);
        usleep(BENCH_STATUS_PAUSE_US);
    }
    return 0;
}

//  One exec claim of the busy phase, from a client of its own: connected,
//  its handshake done, before the phase is timed, so that what status waits
//  on is the claims' work and not twenty CURVE handshakes.
typedef struct {
    shoal_client_t *client;
    size_t index;
    int created, stopped, released;     //  the answers
    volatile bool done;
} bench_busy_t;

static void *
s_busy_claim(void *arg)
{
    bench_busy_t *busy = (bench_busy_t *) arg;
    char id[BENCH_ID_MAX];
    snprintf(id, sizeof id, "busy-%02zu", busy->index);
    shoal_claim_spec_t spec = { .tenant = BENCH_BUSY_TENANT, .memory_bytes = BENCH_GUEST_MEMORY, .driver = "exec",
                                .id = id };
    busy->created = shoal_client_claim_create(busy->client, &spec, NULL);
    busy->stopped = shoal_client_claim_stop(busy->client, id, NULL);
    busy->released = shoal_client_claim_release(busy->client, id, NULL);
    busy->done = true;
    return NULL;
}

//  Whether every claim of the busy phase (an array of BENCH_BUSY_CLAIMS) ended.
static bool
s_busy_done(void *arg)
{
    bench_busy_t *busy = (bench_busy_t *) arg;
    for (size_t i = 0; i < BENCH_BUSY_CLAIMS; i++)
        if (!busy[i].done)
            return false;
    return true;
}

//  Whether STATUS (a bench_series_t) is full: the paced idle phase's end.
static bool
s_count_reached(void *arg)
{
    const bench_series_t *status = (const bench_series_t *) arg;
    return status->count >= status->capacity;
}

//  BENCH_BUSY_CLAIMS exec claims created, stopped and released at once
//  while CLIENT times status round trips into STATUS. Returns 0 or -1.
static int
s_busy_runs(shoal_cluster_t *cluster, shoal_client_t *client, const char *manager_dir, bench_series_t *status)
{
    bench_busy_t busy[BENCH_BUSY_CLAIMS];
    for (size_t i = 0; i < BENCH_BUSY_CLAIMS; i++) {
        busy[i] = (bench_busy_t) { .client = shoal_cluster_client_new(cluster, 1), .index = i };
        shoal_status_t answer;
        if (!busy[i].client) {
            fprintf(stderr, "busy-%02zu: no client\n", i);
            for (size_t j = 0; j < i; j++)
                shoal_client_destroy(&busy[j].client);
            return -1;
        }
        shoal_client_set_timeout(busy[i].client, BENCH_CALL_TIMEOUT_MS);
        if (shoal_client_status(busy[i].client, &answer) == 200)
            shoal_status_clear(&answer);
    }
    char *slow = zsys_sprintf("%s/slow", manager_dir);
    FILE *file = fopen(slow, "w");
    if (!file) {
        fprintf(stderr, "cannot write %s\n", slow);
        free(slow);
        for (size_t i = 0; i < BENCH_BUSY_CLAIMS; i++)
            shoal_client_destroy(&busy[i].client);
        return -1;
    }
    fputs(BENCH_SLOW_S, file);
    fclose(file);
    pthread_t threads[BENCH_BUSY_CLAIMS];
    for (size_t i = 0; i < BENCH_BUSY_CLAIMS; i++)
        pthread_create(&threads[i], NULL, s_busy_claim, &busy[i]);
    double started = s_now();
    int rc = s_status_until(client, status, s_busy_done, busy);
    for (size_t i = 0; i < BENCH_BUSY_CLAIMS; i++) {
        pthread_join(threads[i], NULL);
        shoal_client_destroy(&busy[i].client);
        if (busy[i].created != 200 || busy[i].stopped != 200 || busy[i].released != 200) {
            fprintf(stderr, "busy-%02zu: create %d, stop %d, release %d\n", i, busy[i].created, busy[i].stopped,
                    busy[i].released);
            rc = -1;
        }
    }
    printf("    %d exec claims created, stopped and released in %.1f s (each manager call %s s)\n",
           BENCH_BUSY_CLAIMS, s_now() - started, BENCH_SLOW_S);
    unlink(slow);
    free(slow);
    return rc;
}

//  The busy phase's CPU without shoald: the manager calls it made (its
//  calls.log), replayed by BENCH_REPLAY_WORKERS threads (the guest actor's
//  worker count) against a VM directory of their own, each claim's calls in
//  order, while the bench times status as in the busy phase. Status then
//  waits only on the machine: its two cores shared with the same processes.
#define BENCH_REPLAY_WORKERS 4
#define BENCH_MANAGER_NICE 10
#define BENCH_REPLAY_ARGS 16
#define BENCH_REPLAY_LINE 512

static const char *s_manager_path(void);

typedef struct {
    char **lines;               //  calls of the busy claims, in the log's order
    size_t count;
    size_t worker;              //  this thread's claims: index % workers
    const char *manager;
    char *const *env;
    int failed;                 //  calls that did not exit 0
    volatile bool done;
} bench_replay_t;

//  The claim index of a busy claim's call line (-1: not one).
static int
s_replay_claim(const char *line)
{
    const char *id = strstr(line, "busy-");
    return id ? atoi(id + strlen("busy-")) : -1;
}

static void *
s_replay_run(void *arg)
{
    bench_replay_t *self = (bench_replay_t *) arg;
    //  At the niceness the node runs its manager at (drivers/exec_nice, its
    //  default unless the environment sets it for the node too): this
    //  thread's, which the managers it starts inherit.
    const char *setting = getenv("SHOAL_DRIVERS_EXEC_NICE");
    int nice = setting ? atoi(setting) : BENCH_MANAGER_NICE;
    errno = 0;
    int own = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && nice > 0)
        setpriority(PRIO_PROCESS, (id_t) gettid(), own + nice);
    //  And under the node's policy for it (drivers/exec_sched).
    const char *policy = getenv("SHOAL_DRIVERS_EXEC_SCHED");
    struct sched_param param = { .sched_priority = 0 };
    if (policy && streq(policy, "idle") && sched_setscheduler(0, SCHED_IDLE, &param) != 0)
        fprintf(stderr, "the replay runs without SCHED_IDLE: %s\n", strerror(errno));
    for (size_t i = 0; i < self->count; i++) {
        int claim = s_replay_claim(self->lines[i]);
        if (claim < 0 || (size_t) claim % BENCH_REPLAY_WORKERS != self->worker)
            continue;
        char copy[BENCH_REPLAY_LINE];
        snprintf(copy, sizeof copy, "%s", self->lines[i]);
        char *argv[BENCH_REPLAY_ARGS + 2] = { (char *) self->manager };
        size_t argc = 1;
        char *save = NULL;
        for (char *word = strtok_r(copy, " \n", &save); word && argc <= BENCH_REPLAY_ARGS;
             word = strtok_r(NULL, " \n", &save))
            argv[argc++] = word;
        argv[argc] = NULL;
        pid_t pid;
        int status = 0;
        if (posix_spawn(&pid, self->manager, NULL, NULL, argv, self->env) != 0
        ||  waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            self->failed++;
    }
    self->done = true;
    return NULL;
}

//  Whether every replay thread (an array of BENCH_REPLAY_WORKERS) ended.
static bool
s_replays_done(void *arg)
{
    bench_replay_t *replays = (bench_replay_t *) arg;
    for (size_t i = 0; i < BENCH_REPLAY_WORKERS; i++)
        if (!replays[i].done)
            return false;
    return true;
}

//  Replays MANAGER_DIR's calls.log of the busy claims into MANAGER_DIR/replay
//  while CLIENT times status into STATUS. Returns 0 or -1.
static int
s_replay_runs(shoal_client_t *client, const char *manager_dir, bench_series_t *status)
{
    char *log_path = zsys_sprintf("%s/calls.log", manager_dir);
    char *replay_dir = zsys_sprintf("%s/replay", manager_dir);
    char *slow_path = zsys_sprintf("%s/slow", replay_dir);
    char *dir_env = zsys_sprintf("FAKE_VM_DIR=%s", replay_dir);
    char *env[] = { dir_env, (char *) "PATH=/usr/bin:/bin", NULL };
    zsys_dir_create("%s", replay_dir);
    FILE *log = fopen(log_path, "r");
    FILE *slow = fopen(slow_path, "w");
    char **lines = NULL;
    size_t count = 0;
    int rc = log && slow ? 0 : -1;
    if (slow) {
        fputs(BENCH_SLOW_S, slow);
        fclose(slow);
    }
    char line[BENCH_REPLAY_LINE];
    while (rc == 0 && fgets(line, sizeof line, log)) {
        if (s_replay_claim(line) < 0)
            continue;
        char **grown = realloc(lines, (count + 1) * sizeof *lines);
        if (!grown) {
            rc = -1;
            break;
        }
        lines = grown;
        lines[count++] = shoal_strdup(line);
    }
    if (log)
        fclose(log);
    if (rc == 0 && count == 0) {
        fprintf(stderr, "%s holds no call of the busy claims\n", log_path);
        rc = -1;
    }
    bench_replay_t replays[BENCH_REPLAY_WORKERS];
    pthread_t threads[BENCH_REPLAY_WORKERS];
    size_t started = 0;
    double began = s_now();
    for (size_t i = 0; rc == 0 && i < BENCH_REPLAY_WORKERS; i++) {
        replays[i] = (bench_replay_t) { .lines = lines, .count = count, .worker = i,
                                        .manager = s_manager_path(), .env = env };
        if (pthread_create(&threads[i], NULL, s_replay_run, &replays[i]) != 0)
            rc = -1;
        else
            started++;
    }
    if (rc == 0)
        rc = s_status_until(client, status, s_replays_done, replays);
    int failed = 0;
    for (size_t i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
        failed += replays[i].failed;
    }
    printf("    %zu manager calls replayed by %d threads in %.1f s (%d did not exit 0)\n", count,
           BENCH_REPLAY_WORKERS, s_now() - began, failed);
    for (size_t i = 0; i < count; i++)
        free(lines[i]);
    free(lines);
    free(dir_env);
    free(slow_path);
    free(replay_dir);
    free(log_path);
    return rc;
}

// ---------------------------------------------------------------------------

static void
s_limits_print(void)
{
    struct rlimit processes;
    long pid_max = 0;
    FILE *file = fopen("/proc/sys/kernel/pid_max", "r");
    if (file) {
        if (fscanf(file, "%ld", &pid_max) != 1)
            pid_max = 0;
        fclose(file);
    }
    getrlimit(RLIMIT_NPROC, &processes);
    if (processes.rlim_cur == RLIM_INFINITY)
        printf("processes: ulimit -u unlimited, pid_max %ld\n", pid_max);
    else
        printf("processes: ulimit -u %llu, pid_max %ld\n", (unsigned long long) processes.rlim_cur, pid_max);
}

//  Ends every guest and the node, and removes the files unless KEEP.
static void
s_teardown(bool keep)
{
    shoal_move_check_cleanup();
    shoal_cluster_destroy_all();
    //  Guests run in sessions of their own: a node's stop leaves them.
    shoal_move_check_cleanup();
    if (keep)
        fprintf(stderr, "kept %s (BENCH_KEEP)\n", shoal_test_dir);
    else
        shoal_test_rmrf(shoal_test_dir);
}

//  The fake VM manager the busy phase drives.
static const char *
s_manager_path(void)
{
    static char path[BENCH_PATH_MAX];
    const char *source = getenv("SHOAL_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fake-vm-manager", source ? source : "..");
    return path;
}

//  Starts the node with limits for COUNT claims (and the busy phase's), its
//  exec driver on the fake manager keeping its VMs in MANAGER_DIR. Returns
//  the cluster or NULL.
//  The metrics port of the bench's node.
static int s_metrics_port;

static shoal_cluster_t *
s_node_start(size_t count, const char *manager_dir)
{
    shoal_cluster_options_t options = {
        .probe_interval_ms = BENCH_PROBE_INTERVAL_MS, .probe_timeout_ms = BENCH_PROBE_TIMEOUT_MS,
        .suspect_timeout_ms = BENCH_SUSPECT_TIMEOUT_MS, .sync_interval_ms = BENCH_SYNC_INTERVAL_MS,
        .no_store_sync = getenv("BENCH_STORE_SYNC") && streq(getenv("BENCH_STORE_SYNC"), "0"),
    };
    shoal_cluster_t *cluster = shoal_cluster_new(1, &options);
    if (!cluster)
        return NULL;
    char claims[32], memory[32];
    snprintf(claims, sizeof claims, "%zu", count + BENCH_BUSY_CLAIMS);
    char bind[64];
    s_metrics_port = shoal_test_free_port();
    snprintf(bind, sizeof bind, "127.0.0.1:%d", s_metrics_port);
    size_t memory_mb = (count + BENCH_BUSY_CLAIMS) * BENCH_GUEST_MEMORY / BENCH_MIB;
    snprintf(memory, sizeof memory, "%zu", memory_mb > BENCH_MEMORY_MB_DEFAULT ? memory_mb : BENCH_MEMORY_MB_DEFAULT);
    if (shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_MAX_CLAIMS", claims)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_TENANT_MAX_CLAIMS", claims)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_MAX_RUNNING", claims)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_LIMITS_MEMORY_MB", memory)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_DRIVERS_EXEC_MANAGER", s_manager_path())
    ||  shoal_cluster_node_setenv(cluster, 1, "FAKE_VM_DIR", manager_dir)
    ||  shoal_cluster_node_setenv(cluster, 1, "SHOAL_METRICS_BIND", bind)
    ||  shoal_cluster_start(cluster)) {
        fprintf(stderr, "%s\n", shoal_cluster_error(cluster));
        return NULL;
    }
    return cluster;
}

int
main(int argc, char *argv[])
{
    size_t count = BENCH_DEFAULT_COUNT;
    if (argc > 2 || (argc == 2 && (count = strtoull(argv[1], NULL, 10)) == 0)) {
        fprintf(stderr, "usage: %s [COUNT]   (default %d; BENCH_ALIVE=N, default %d)\n", argv[0],
                BENCH_DEFAULT_COUNT, BENCH_DEFAULT_ALIVE);
        return EXIT_FAILURE;
    }
    size_t alive = BENCH_DEFAULT_ALIVE;
    if (getenv("BENCH_ALIVE")) {
        alive = strtoull(getenv("BENCH_ALIVE"), NULL, 10);
        if (alive < 1 || alive > BENCH_ALIVE_MAX) {
            fprintf(stderr, "BENCH_ALIVE must be 1 to %d\n", BENCH_ALIVE_MAX);
            return EXIT_FAILURE;
        }
    }
    if (shoal_test_find_programs())
        return EXIT_FAILURE;
    //  czmq's handler stays: SIGINT sets zsys_interrupted, and the run
    //  tears down, so no node or guest outlives it.
    zsys_init();
    if (shoal_test_dir_make("bench-claims"))
        return EXIT_FAILURE;
    printf("bench_claims: %zu claims of %.0f MiB, idle, at most %zu alive; one shoald on loopback, store sync on\n",
           count, (double) BENCH_GUEST_MEMORY / BENCH_MIB, alive);
    printf("work directory %s\n", shoal_test_dir);
    s_limits_print();
    fflush(stdout);
    bench_series_t image = { 0 }, start = { 0 }, stop = { 0 }, status = { 0 }, create = { 0 }, release = { 0 };
    bench_series_t busy = { 0 }, outside = { 0 }, quiet = { 0 }, loud = { 0 }, paced = { 0 };
    size_t scraped = count < BENCH_SCRAPE_CLAIMS ? count : BENCH_SCRAPE_CLAIMS;
    bench_scraper_t scraper = { 0 };
    int rc = s_series_init(&image, "image", BENCH_GUEST_RUNS) || s_series_init(&start, "start", BENCH_GUEST_RUNS)
          || s_series_init(&stop, "stop", BENCH_GUEST_RUNS) || s_series_init(&status, "status", BENCH_STATUS_CALLS)
          || s_series_init(&create, "create", count)
          || s_series_init(&busy, "busy", BENCH_BUSY_CALLS_MAX) || s_series_init(&paced, "paced", BENCH_STATUS_CALLS)
          || s_series_init(&outside, "outside", BENCH_BUSY_CALLS_MAX) || s_series_init(&quiet, "quiet", scraped)
          || s_series_init(&loud, "loud", scraped) || s_series_init(&release, "release", count + 2 * scraped)
          ? -1 : 0;
    char *manager_dir = zsys_sprintf("%s/vm-state", shoal_test_dir);
    zsys_dir_create("%s", manager_dir);

    if (rc == 0) {
        printf("bare guest, %d runs\n", BENCH_GUEST_RUNS);
        rc = s_guest_runs(&image, &start, &stop);
    }
    if (rc == 0) {
        s_stats_print("1 MiB image create", &image, 0, image.count);
        s_stats_print("guest start", &start, 0, start.count);
        s_stats_print("guest stop (SIGTERM)", &stop, 0, stop.count);
        fflush(stdout);
    }
    shoal_cluster_t *cluster = rc == 0 ? s_node_start(count, manager_dir) : NULL;
    shoal_client_t *client = cluster ? shoal_cluster_client_new(cluster, 1) : NULL;
    if (rc == 0 && !client)
        rc = -1;
    if (rc == 0) {
        shoal_client_set_timeout(client, BENCH_CALL_TIMEOUT_MS);
        printf("status round trips\n");
        rc = s_status_runs(client, &status);
        if (rc == 0)
            s_stats_print("status", &status, 0, status.count);
    }
    if (rc == 0) {
        printf("claims: create, and release once %zu are alive\n", alive);
        fflush(stdout);
        rc = s_claim_runs(client, count, alive, &create, &release);
    }
    if (rc == 0) {
        printf("status round trips paced as in the busy phase (%d us apart)\n", BENCH_STATUS_PAUSE_US);
        fflush(stdout);
        rc = s_status_until(client, &paced, s_count_reached, &paced);
        if (rc == 0)
            s_stats_print("status, paced", &paced, 0, paced.count);
    }
    if (rc == 0) {
        printf("busy guests: status while %d exec claims wait on a manager that answers after %s s\n",
               BENCH_BUSY_CLAIMS, BENCH_SLOW_S);
        fflush(stdout);
        rc = s_busy_runs(cluster, client, manager_dir, &busy);
    }
    if (rc == 0) {
        printf("manager calls outside shoald: status while the busy phase's manager calls run again from the bench\n");
        fflush(stdout);
        rc = s_replay_runs(client, manager_dir, &outside);
    }
    if (rc == 0) {
        printf("scraped: %zu claims in blocks of %d, every other block while /metrics is scraped %d times a second\n",
               2 * scraped, BENCH_SCRAPE_BLOCK, BENCH_SCRAPE_HZ);
        fflush(stdout);
        rc = s_scrape_runs(client, s_metrics_port, count, scraped, alive, &quiet, &loud, &release, &scraper);
    }
    if (rc == 0) {
        printf("\nsummary (each call timed by the client, one at a time)\n");
        s_stats_print("status (floor)", &status, 0, status.count);
        s_stats_print("guest start", &start, 0, start.count);
        s_stats_print("claim create", &create, 0, create.count);
        s_stats_print("claim release", &release, 0, release.count);
        s_stats_print("status, paced", &paced, 0, paced.count);
        s_stats_print("status, guests busy", &busy, 0, busy.count);
        s_stats_print("status, their calls outside", &outside, 0, outside.count);
        s_stats_print("create, not scraped", &quiet, 0, quiet.count);
        s_stats_print("create, scraped", &loud, 0, loud.count);
        for (size_t first = 0; first < create.count; first += BENCH_SLICE) {
            size_t slice = create.count - first < BENCH_SLICE ? create.count - first : BENCH_SLICE;
            char label[64];
            snprintf(label, sizeof label, "create %zu-%zu", first + 1, first + slice);
            s_stats_print(label, &create, first, slice);
        }
        for (size_t first = 0; first < release.count; first += BENCH_SLICE) {
            size_t slice = release.count - first < BENCH_SLICE ? release.count - first : BENCH_SLICE;
            char label[64];
            snprintf(label, sizeof label, "release %zu-%zu", first + 1, first + slice);
            s_stats_print(label, &release, first, slice);
        }
        bench_stats_t floor = s_stats(&status, 0, status.count);
        bench_stats_t calm_status = s_stats(&paced, 0, paced.count);
        printf("status p99 back to back %.3f ms, paced %d us apart %.3f ms (%.1f x): the busy phase is paced, "
               "so its idle reference is too\n", floor.p99, BENCH_STATUS_PAUSE_US, calm_status.p99,
               floor.p99 > 0 ? calm_status.p99 / floor.p99 : 0);
        bench_stats_t made = s_stats(&create, 0, create.count);
        bench_stats_t started = s_stats(&start, 0, start.count);
        double bound = BENCH_EXPECTED_CREATE_MS + started.p50;
        printf("expected: create p99 < %.1f ms + guest start median %.2f ms = %.2f ms (p99 %.2f ms): %s\n",
               BENCH_EXPECTED_CREATE_MS, started.p50, bound, made.p99, made.p99 < bound ? "met" : "NOT met");
        bench_stats_t idle = s_stats(&paced, 0, paced.count);
        bench_stats_t loaded = s_stats(&busy, 0, busy.count);
        printf("expected: status p99 while guests are busy within %.0f x idle status p99 (paced alike, %d us apart) "
               "%.3f ms = %.3f ms (p99 %.3f ms, max %.3f ms): %s\n", BENCH_BUSY_FACTOR, BENCH_STATUS_PAUSE_US,
               idle.p99, BENCH_BUSY_FACTOR * idle.p99, loaded.p99, loaded.max,
               loaded.p99 <= BENCH_BUSY_FACTOR * idle.p99 ? "met" : "NOT met");
        bench_stats_t contended = s_stats(&outside, 0, outside.count);
        printf("expected: status p99 while guests are busy within %.1f x status p99 while the same manager calls "
               "run outside shoald %.3f ms = %.3f ms (p99 %.3f ms, ratio %.2f): %s\n", BENCH_OUTSIDE_FACTOR,
               contended.p99, BENCH_OUTSIDE_FACTOR * contended.p99, loaded.p99,
               contended.p99 > 0 ? loaded.p99 / contended.p99 : 0,
               loaded.p99 <= BENCH_OUTSIDE_FACTOR * contended.p99 ? "met" : "NOT met");
        bench_stats_t calm = s_stats(&quiet, 0, quiet.count);
        bench_stats_t scrapedp = s_stats(&loud, 0, loud.count);
        printf("expected: create p99 while /metrics is scraped %d/s (%.0f /s reached) within %.0f%% of the same "
               "bench unscraped, %.3f ms x %.2f = %.3f ms (p99 %.3f ms, ratio %.3f): %s\n", BENCH_SCRAPE_HZ,
               scraper.seconds > 0 ? scraper.scrapes / scraper.seconds : 0, (BENCH_SCRAPE_FACTOR - 1) * 100,
               calm.p99, BENCH_SCRAPE_FACTOR, calm.p99 * BENCH_SCRAPE_FACTOR, scrapedp.p99,
               calm.p99 > 0 ? scrapedp.p99 / calm.p99 : 0,
               scrapedp.p99 <= calm.p99 * BENCH_SCRAPE_FACTOR ? "met" : "NOT met");
    }
    if (zsys_interrupted)
        fprintf(stderr, "interrupted\n");
    shoal_client_destroy(&client);
    s_teardown(rc != 0 && getenv("BENCH_KEEP"));
    free(image.values);
    free(start.values);
    free(stop.values);
    free(status.values);
    free(create.values);
    free(release.values);
    free(busy.values);
    free(paced.values);
    free(outside.values);
    free(quiet.values);
    free(loud.values);
    free(manager_dir);
    return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
