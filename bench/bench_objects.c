/*  bench_objects: replicating a storage object to a peer, against the raw
    CURVE limit measured in the same run.

    Usage: bench_objects     BENCH_OBJECT_MB=N sets the object's size
                             (default 1024); BENCH_REPS=N replicates
                             (default 3); shoald is looked for in
                             $SHOAL_BIN_DIR, else beside this program;
                             the work directory (both nodes' data and
                             the raw copy) goes under $TMPDIR, else
                             /tmp: TMPDIR=/dev/shm leaves the disk out.

    Two shoald on loopback (the tests' cluster harness, store sync on). An
    object of BENCH_OBJECT_MB MiB of pseudo-random bytes is added on n1
    through libshoal (its upload timed, for information). Then each
    repetition: the raw stream of the same number of bytes (bench_raw.h:
    zero-copy CURVE PUSH to PULL between two forked processes, 1 MiB
    messages), then shoal_client_object_replicate to 2 copies, which
    answers once n2's receiver has every byte, checksummed (XXH3-128) and
    made durable (fdatasync), and the instance is complete; then the
    object's n2 instance is dropped (rm, add again would re-upload: instead
    the replicate of the next repetition goes to a fresh object name added
    beforehand, untimed). Medians of the repetitions.

    The replicate does more than the raw stream: it reads the file from
    the disk, hashes every byte on the receiver, writes it to disk and
    syncs it (both sides around the page cache: shoal_sink.h). The ratio
    says what that costs. Here both nodes' data share one disk, so each
    repetition also times a raw copy (bench_raw.h): a file of the same
    size, made once in the work directory beside the nodes' data, copied
    there around the page cache and made durable, with nothing of shoal,
    no network and no cipher. That is a floor under the replicate's time
    on this disk, printed with the share of raw CURVE it leaves a
    replicate at most, and the replicate's time against it. Beside the times, each repetition prints where
    the CPU went (bench_cpu.h): the machine's busy share, the raw stream's
    two processes' CPU seconds, and the CPU seconds of each node thread
    during the add and the replicate. On two cores, once both are busy, a
    replicate's time follows its CPU seconds against the raw stream's, and
    those figures hold on a loaded machine where the times do not.
*/
#include "bench_stats.h"
#include "bench_raw.h"
#include "bench_cpu.h"
#include "shoal_cluster.h"
#include "shoal_test.h"
#include "shoal_io.h"

#include <czmq.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define S_TENANT "bench/objects"
#define S_MB ((uint64_t) 1024 * 1024)
#define S_DEFAULT_MB 1024
#define S_DEFAULT_REPS 3
#define S_REPS_MAX 20
#define S_EXPECTED_RATIO 0.70
//  The replicate against the raw copy on the same disk.
#define S_EXPECTED_COPY_RATIO 0.90
#define S_PATH_MAX 4352

static long
s_env_long(const char *name, long fallback)
{
    const char *value = getenv(name);
    return value && *value ? strtol(value, NULL, 10) : fallback;
}

//  Bytes that do not compress and cost little to make: xorshift.
static int
s_source(void *buffer, size_t size, uint64_t offset, void *arg)
{
    uint64_t state = offset * 0x9E3779B97F4A7C15ull + 1;
    uint8_t *bytes = (uint8_t *) buffer;
    for (size_t i = 0; i < size; i += 8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        size_t left = size - i < 8 ? size - i : 8;
        memcpy(bytes + i, &state, left);
    }
    return 0;
}

//  Writes SIZE bytes of s_source to PATH, durable and out of the page
//  cache (the copy reads around it anyway). Returns 0, or -1.
static int
s_copy_source_make(const char *path, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    uint8_t *block = (uint8_t *) malloc(S_MB);
    int rc = block ? 0 : -1;
    for (uint64_t at = 0; at < size && rc == 0; at += S_MB) {
        size_t take = size - at < S_MB ? (size_t) (size - at) : S_MB;
        s_source(block, take, at, NULL);
        rc = shoal_pwrite_all(fd, block, take, at);
    }
    if (rc == 0)
        rc = fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    free(block);
    return rc;
}

static double
s_rusage_seconds(const struct rusage *usage)
{
    return (double) usage->ru_utime.tv_sec + (double) usage->ru_utime.tv_usec / 1e6 + (double) usage->ru_stime.tv_sec
           + (double) usage->ru_stime.tv_usec / 1e6;
}

int
main(void)
{
    uint64_t size = (uint64_t) s_env_long("BENCH_OBJECT_MB", S_DEFAULT_MB) * S_MB;
    int reps = (int) s_env_long("BENCH_REPS", S_DEFAULT_REPS);
    if (reps < 1 || reps > S_REPS_MAX || size == 0) {
        fprintf(stderr, "bench_objects: BENCH_REPS is 1 to %d, BENCH_OBJECT_MB at least 1\n", S_REPS_MAX);
        return 2;
    }
    if (shoal_test_find_programs() || shoal_test_dir_make("bench_objects")) {
        fprintf(stderr, "bench_objects: cannot find shoald or make a work directory\n");
        return 1;
    }
    shoal_cluster_t *cluster = shoal_cluster_new(2, NULL);
    if (!cluster || shoal_cluster_start(cluster) || shoal_cluster_wait_all_alive(cluster, 30000)) {
        fprintf(stderr, "bench_objects: the nodes did not start: %s\n", cluster ? shoal_cluster_error(cluster) : "");
        shoal_cluster_destroy_all();
        return 1;
    }
    shoal_client_t *client = shoal_cluster_client_new(cluster, 1);
    shoal_client_set_timeout(client, 600000);
    printf("bench_objects: %" PRIu64 " MiB object, %d repetition(s), n1 -> n2 on loopback\n", size / S_MB, reps);
    char copy_from[S_PATH_MAX], copy_to[S_PATH_MAX];
    snprintf(copy_from, sizeof copy_from, "%s/copy-source.bin", shoal_test_dir);
    snprintf(copy_to, sizeof copy_to, "%s/copy-target.bin", shoal_test_dir);
    if (s_copy_source_make(copy_from, size)) {
        fprintf(stderr, "bench_objects: cannot write %s: %s\n", copy_from, strerror(errno));
        shoal_client_destroy(&client);
        shoal_cluster_destroy(&cluster);
        shoal_cluster_destroy_all();
        return 1;
    }
    double raw[S_REPS_MAX], replicate[S_REPS_MAX], copy[S_REPS_MAX];
    int done = 0, rc = 0;
    for (int rep = 0; rep < reps && rc == 0; rep++) {
        char name[64];
        snprintf(name, sizeof name, "image-%d", rep);
        bench_cpu_process_t adder_before, adder_after;
        bench_cpu_process_sample(shoal_cluster_node_pid(cluster, 1), &adder_before);
        struct rusage self_before, self_after;
        getrusage(RUSAGE_SELF, &self_before);
        double started = bench_raw_now();
        rc = shoal_client_object_add(client, S_TENANT, name, size, s_source, NULL, false, NULL, NULL) == 200 ? 0 : -1;
        double upload = bench_raw_now() - started;
        getrusage(RUSAGE_SELF, &self_after);
        bench_cpu_process_sample(shoal_cluster_node_pid(cluster, 1), &adder_after);
        if (rc) {
            fprintf(stderr, "bench_objects: add: %s\n", shoal_client_error(client));
            break;
        }
        bench_cpu_machine_t machine_before, machine_after;
        double raw_system_before, raw_system_after;
        double raw_cpu_before = bench_cpu_children(&raw_system_before);
        bench_cpu_machine_sample(&machine_before);
        raw[rep] = bench_raw_stream(size);
        bench_cpu_machine_sample(&machine_after);
        double raw_cpu = bench_cpu_children(&raw_system_after) - raw_cpu_before;
        double raw_busy = bench_cpu_machine_busy(&machine_before, &machine_after);
        copy[rep] = bench_raw_copy(copy_from, copy_to);
        unlink(copy_to);
        if (raw[rep] <= 0 || copy[rep] <= 0) {
            rc = -1;
            break;
        }
        uint32_t held = 0;
        static bench_cpu_process_t nodes_before[2], nodes_after[2];
        for (int node = 0; node < 2; node++)
            bench_cpu_process_sample(shoal_cluster_node_pid(cluster, node + 1), &nodes_before[node]);
        bench_cpu_machine_sample(&machine_before);
        started = bench_raw_now();
        int status = shoal_client_object_replicate(client, S_TENANT, name, 2, &held);
        replicate[rep] = bench_raw_now() - started;
        bench_cpu_machine_sample(&machine_after);
        for (int node = 0; node < 2; node++)
            bench_cpu_process_sample(shoal_cluster_node_pid(cluster, node + 1), &nodes_after[node]);
        if (status != 200 || held != 2) {
            fprintf(stderr, "bench_objects: replicate: %d %s\n", status, shoal_client_error(client));
            rc = -1;
            break;
        }
        printf("  rep %d: upload %.2f s (%.0f MB/s); raw CURVE %.2f s (%.0f MB/s); replicate %.2f s (%.0f MB/s), "
               "%.0f%% of raw\n", rep + 1, upload, (double) size / upload / 1e6, raw[rep],
               (double) size / raw[rep] / 1e6, replicate[rep], (double) size / replicate[rep] / 1e6,
               100.0 * raw[rep] / replicate[rep]);
        printf("    raw copy on the nodes' disk %.2f s (%.0f MB/s): a replicate here at most %.0f%% of raw CURVE; "
               "the replicate at %.0f%% of the copy\n", copy[rep], (double) size / copy[rep] / 1e6,
               100.0 * raw[rep] / copy[rep], 100.0 * copy[rep] / replicate[rep]);
        printf("    upload: this process (the client, making the bytes) %.2f s of CPU\n",
               s_rusage_seconds(&self_after) - s_rusage_seconds(&self_before));
        bench_cpu_process_print("n1 (adds)", &adder_before, &adder_after);
        printf("    machine busy: %.0f%% during raw CURVE, %.0f%% during replicate\n", 100.0 * raw_busy,
               100.0 * bench_cpu_machine_busy(&machine_before, &machine_after));
        printf("    raw CURVE's two processes: %.2f s of CPU, system %.2f\n", raw_cpu,
               raw_system_after - raw_system_before);
        bench_cpu_process_print("n1 (sends)", &nodes_before[0], &nodes_after[0]);
        bench_cpu_process_print("n2 (receives)", &nodes_before[1], &nodes_after[1]);
        fflush(stdout);
        done++;
        //  Its two instances go, so the disk holds one object at a time.
        shoal_client_object_remove(client, S_TENANT, name);
    }
    shoal_client_destroy(&client);
    shoal_cluster_destroy(&cluster);
    shoal_cluster_destroy_all();
    unlink(copy_from);
    //  The work directory holds the nodes' logs: kept when a run failed.
    if (done && rc == 0)
        shoal_test_rmrf(shoal_test_dir);
    if (!done) {
        printf("expected: replicate at 70%% or more of raw CURVE (no run completed): NOT met\n");
        printf("expected: replicate at 90%% or more of the raw copy (no run completed): NOT met\n");
        return 1;
    }
    double raw_median = bench_median(raw, (size_t) done), replicate_median = bench_median(replicate, (size_t) done);
    double copy_median = bench_median(copy, (size_t) done);
    double ratio = raw_median / replicate_median, copy_ratio = copy_median / replicate_median;
    printf("median: raw CURVE %.2f s (%.0f MB/s), raw copy %.2f s (%.0f MB/s), replicate %.2f s (%.0f MB/s)\n",
           raw_median, (double) size / raw_median / 1e6, copy_median, (double) size / copy_median / 1e6,
           replicate_median, (double) size / replicate_median / 1e6);
    printf("the raw copy leaves a replicate on this disk at most %.0f%% of raw CURVE\n",
           100.0 * raw_median / copy_median);
    printf("expected: replicate at 70%% or more of raw CURVE (%.0f%%): %s\n", 100.0 * ratio,
           ratio >= S_EXPECTED_RATIO ? "met" : "NOT met");
    printf("expected: replicate at 90%% or more of the raw copy (%.0f%%): %s\n", 100.0 * copy_ratio,
           copy_ratio >= S_EXPECTED_COPY_RATIO ? "met" : "NOT met");
    return rc ? 1 : 0;
}
