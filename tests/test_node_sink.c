/*  test_node_sink: a file written front to back through shoal_sink reads
    back byte for byte at every length (around a staging buffer's and a
    block's edges), a long file written direct is made durable in steps
    while it is written, an exclusive sink refuses a file that exists, and
    a full disk is an error that names itself, on whichever path (direct
    or ordinary writes) the file system takes.
*/
#include "shoal_sink.h"
#include "shoal_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MB ((size_t) 1024 * 1024)
//  A chunk as the transfer sends one, and an odd piece beside it.
#define S_CHUNK S_MB
#define S_ODD_PIECE 1000
//  The small file system of the full-disk test, and what is written to it:
//  three stages, so that the failure is the writer thread's.
#define S_SMALL_FS "size=1m"
#define S_OVERFILL (12 * S_MB)
#define S_PATH_MAX 4352
//  A full stage of the sink (shoal_sink.c), and how long a test waits for
//  a writer to finish what it was handed (a bound, not a timing).
#define S_STAGE (4 * S_MB)
#define S_WAIT_MS 30000
//  The sink's flush step (shoal_sink.c), and a long file: three steps and
//  a piece.
#define S_FLUSH_STEP (64 * S_MB)
#define S_LONG (3 * S_FLUSH_STEP + S_CHUNK + S_ODD_PIECE)

//  NAME in the test's directory, in a buffer of its own per call site.
static const char *
s_path(char *buffer, const char *name)
{
    snprintf(buffer, S_PATH_MAX, "%s/%s", shoal_test_dir, name);
    return buffer;
}

//  Bytes that differ from offset to offset.
static void
s_fill(uint8_t *bytes, size_t size, size_t from)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = (uint8_t) ((from + i) * 131 + ((from + i) >> 12));
}

//  Writes SIZE bytes through a sink at PATH in pieces of PIECE bytes (the
//  last one shorter), syncs, and checks the file holds exactly them.
static void
s_round_trip(const char *path, size_t size, size_t piece, bool hinted)
{
    uint8_t *bytes = (uint8_t *) malloc(size ? size : 1);
    CHECK(bytes);
    s_fill(bytes, size, 0);
    //  Told the size, and not: a small file staged in a buffer its size.
    shoal_sink_t *sink = shoal_sink_new(path, false, hinted ? size : 0);
    CHECK_MSG(sink, "cannot make %s: %s", path, strerror(errno));
    for (size_t at = 0; at < size; at += piece) {
        size_t take = size - at < piece ? size - at : piece;
        CHECK_MSG(shoal_sink_write(sink, bytes + at, take) == 0, "write of %zu at %zu: %s", take, at, strerror(errno));
    }
    CHECK_MSG(shoal_sink_sync(sink) == 0, "sync of %zu bytes: %s", size, strerror(errno));
    CHECK(shoal_sink_size(sink) == size);
    shoal_sink_destroy(&sink);
    shoal_sink_destroy(&sink);
    CHECK(sink == NULL);

    struct stat info;
    CHECK(stat(path, &info) == 0);
    CHECK_MSG((size_t) info.st_size == size, "%zu bytes written in pieces of %zu, the file holds %lld", size,
              piece, (long long) info.st_size);
    uint8_t *back = (uint8_t *) malloc(size ? size : 1);
    CHECK(back);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    size_t got = 0;
    while (got < size) {
        ssize_t count = read(fd, back + got, size - got);
        CHECK(count > 0);
        got += (size_t) count;
    }
    close(fd);
    CHECK_MSG(memcmp(bytes, back, size) == 0, "%zu bytes written in pieces of %zu do not read back", size, piece);
    free(back);
    free(bytes);
}

static void
test_bytes_read_back_at_every_edge(void)
{
    //  Empty, a byte, a block and its neighbours, the staging buffer (4 MiB)
    //  and its neighbours, and more than two of them with a ragged end.
    const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 4 * S_MB - 1, 4 * S_MB, 4 * S_MB + 1, 9 * S_MB + 123 };
    char path[S_PATH_MAX];
    s_path(path, "sink.bin");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        s_round_trip(path, sizes[i], S_CHUNK, true);
        s_round_trip(path, sizes[i], S_ODD_PIECE, false);
    }
    //  One write larger than two stages.
    s_round_trip(path, 9 * S_MB + 7, 9 * S_MB + 7, true);
    shoal_sink_t *sink = shoal_sink_new(path, false, 0);
    CHECK(sink);
    printf("sink on this file system: %s\n", shoal_sink_direct(sink) ? "direct" : "ordinary writes");
    shoal_sink_destroy(&sink);
}

static void
test_new_file_replaces_or_refuses(void)
{
    char path[S_PATH_MAX], missing[S_PATH_MAX];
    s_path(path, "kept.bin");
    s_round_trip(path, 5 * S_MB, S_CHUNK, true);
    errno = 0;
    shoal_sink_t *sink = shoal_sink_new(path, true, 0);
    CHECK_MSG(!sink && errno == EEXIST, "an exclusive sink over a file that exists: %s",
              sink ? "made" : strerror(errno));
    //  Not exclusive: the file is replaced and holds only the new bytes.
    s_round_trip(path, 3, 3, false);
    CHECK(shoal_sink_new(s_path(missing, "no/such/file.bin"), false, 0) == NULL && errno == ENOENT);
}

//  A file of several flush steps: before its sync, a file written direct
//  is durable at least up to the first step (the flusher's); after it,
//  whole; and it reads back whole. Written and read a chunk at a time.
static void
test_long_file_made_durable_in_steps(void)
{
    char path[S_PATH_MAX];
    s_path(path, "long.bin");
    uint8_t *bytes = (uint8_t *) malloc(S_CHUNK);
    uint8_t *back = (uint8_t *) malloc(S_CHUNK);
    CHECK(bytes && back);
    shoal_sink_t *sink = shoal_sink_new(path, false, S_LONG);
    CHECK(sink);
    for (size_t at = 0; at < S_LONG; at += S_CHUNK) {
        size_t take = S_LONG - at < S_CHUNK ? S_LONG - at : S_CHUNK;
        s_fill(bytes, take, at);
        CHECK_MSG(shoal_sink_write(sink, bytes, take) == 0, "write at %zu: %s", at, strerror(errno));
    }
    if (shoal_sink_direct(sink)) {
        int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
        while (shoal_sink_durable(sink) < S_FLUSH_STEP && shoal_test_now_ms() < deadline)
            usleep(1000);
        uint64_t durable = shoal_sink_durable(sink);
        CHECK_MSG(durable >= S_FLUSH_STEP && durable <= S_LONG,
                  "before the sync, %llu of %zu bytes written direct are durable",
                  (unsigned long long) durable, S_LONG);
    }
    else
        printf("ordinary writes on this file system: no flush in steps to see\n");
    CHECK_MSG(shoal_sink_sync(sink) == 0, "sync: %s", strerror(errno));
    CHECK(shoal_sink_durable(sink) == S_LONG);
    shoal_sink_destroy(&sink);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    struct stat info;
    CHECK(fstat(fd, &info) == 0 && (size_t) info.st_size == S_LONG);
    for (size_t at = 0; at < S_LONG; at += S_CHUNK) {
        size_t take = S_LONG - at < S_CHUNK ? S_LONG - at : S_CHUNK;
        s_fill(bytes, take, at);
        CHECK(pread(fd, back, take, (off_t) at) == (ssize_t) take);
        CHECK_MSG(memcmp(bytes, back, take) == 0, "the bytes at %zu differ", at);
    }
    close(fd);
    free(bytes);
    free(back);
}

//  A sink destroyed while its writer holds a stage returns at once; the
//  writer finishes into the file it had, and a new sink at the same path
//  is a new file that it cannot write into.
static void
test_destroyed_while_writing(void)
{
    char path[S_PATH_MAX];
    s_path(path, "busy.bin");
    size_t size = 3 * S_STAGE;
    uint8_t *bytes = (uint8_t *) malloc(size);
    CHECK(bytes);
    s_fill(bytes, size, 0);
    shoal_sink_t *sink = shoal_sink_new(path, false, size);
    CHECK(sink);
    CHECK(shoal_sink_write(sink, bytes, size) == 0);
    int old = open(path, O_RDONLY);
    CHECK(old >= 0);
    shoal_sink_destroy(&sink);
    CHECK(sink == NULL);
    s_round_trip(path, 3, 3, true);
    //  The old file gets every stage handed over, the new one none of them.
    struct stat info = { .st_size = 0 };
    int64_t deadline = shoal_test_now_ms() + S_WAIT_MS;
    while (fstat(old, &info) == 0 && (size_t) info.st_size < size && shoal_test_now_ms() < deadline)
        usleep(1000);
    CHECK_MSG((size_t) info.st_size == size, "the destroyed sink's file holds %lld of %zu bytes",
              (long long) info.st_size, size);
    close(old);
    CHECK(stat(path, &info) == 0);
    CHECK_MSG(info.st_size == 3, "the new file at the same path holds %lld bytes, not 3", (long long) info.st_size);
    free(bytes);
}

static void
test_full_disk_is_an_error(void)
{
    if (geteuid() != 0) {
        printf("skipped: mounting a small file system needs root\n");
        return;
    }
    char small[S_PATH_MAX], path[S_PATH_MAX];
    s_path(small, "small");
    s_path(path, "small/full.bin");
    CHECK(mkdir(small, 0755) == 0);
    CHECK_MSG(mount("tmpfs", small, "tmpfs", 0, S_SMALL_FS) == 0, "cannot mount tmpfs: %s", strerror(errno));
    uint8_t *bytes = (uint8_t *) malloc(S_OVERFILL);
    CHECK(bytes);
    s_fill(bytes, S_OVERFILL, 0);
    shoal_sink_t *sink = shoal_sink_new(path, false, S_OVERFILL);
    CHECK(sink);
    int rc = 0;
    for (size_t at = 0; at < S_OVERFILL && rc == 0; at += S_CHUNK)
        rc = shoal_sink_write(sink, bytes + at, S_CHUNK);
    int error = errno;
    if (rc == 0) {
        rc = shoal_sink_sync(sink);
        error = errno;
    }
    CHECK_MSG(rc == -1 && error == ENOSPC, "12 MiB into a 1 MiB file system: rc %d, %s", rc, strerror(error));
    shoal_sink_destroy(&sink);
    free(bytes);
    CHECK(umount2(small, MNT_DETACH) == 0);
}

int
main(void)
{
    SHOAL_TEST(test_bytes_read_back_at_every_edge);
    SHOAL_TEST(test_long_file_made_durable_in_steps);
    SHOAL_TEST(test_new_file_replaces_or_refuses);
    SHOAL_TEST(test_destroyed_while_writing);
    SHOAL_TEST(test_full_disk_is_an_error);
    return shoal_test_finish();
}
