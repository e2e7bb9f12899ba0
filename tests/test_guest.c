/*  test_guest: the reference guest, its image and its dirty log, with real
    shoal-guest processes. */
#include "shoal_test.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shoal_image.h"

//  The load of the dirty-log test: the 200 MB/s the issue asks for.
#define TEST_LOAD_RATE (200ULL * 1000 * 1000)
//  The load whose pacing is measured.
#define TEST_PACED_RATE (20ULL * 1000 * 1000)
#define TEST_MEMORY (64ULL << 20)
#define TEST_DISK (16ULL << 20)
//  How long a started guest may take to tick for the first time.
#define TEST_START_MS 5000
#define TEST_PATH_MAX 4400
//  Guests a test may leave running when a check fails.
#define TEST_GUESTS_MAX 8
//  The concurrent removal: how many times, of a directory of how many files.
#define TEST_REMOVE_ATTEMPTS 200
#define TEST_REMOVE_FILES 64

static pid_t s_guests[TEST_GUESTS_MAX];
static size_t s_guest_count;

static void
s_sleep_ms(int ms)
{
    struct timespec pause = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (nanosleep(&pause, &pause) != 0)
        ;
}

static uint64_t
s_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void
s_path(char *path, const char *name)
{
    snprintf(path, TEST_PATH_MAX, "%s/%s", shoal_test_dir, name);
}

//  Starts `shoal-guest run DIR` and waits for its first tick. Returns the pid.
static pid_t
s_guest_start(const char *dir, shoal_image_t *image)
{
    char log[TEST_PATH_MAX];
    snprintf(log, sizeof log, "%s.log", dir);
    char *argv[] = { (char *) shoal_test_program("shoal-guest"), "run", (char *) dir, NULL };
    uint64_t before = shoal_image_tick_ms(image);
    pid_t pid = shoal_test_spawn(argv, NULL, log);
    if (pid > 0 && s_guest_count < TEST_GUESTS_MAX)
        s_guests[s_guest_count++] = pid;
    int64_t deadline = shoal_test_now_ms() + TEST_START_MS;
    while (pid > 0 && shoal_image_tick_ms(image) == before && shoal_test_now_ms() < deadline)
        s_sleep_ms(1);
    return shoal_image_tick_ms(image) == before ? -1 : pid;
}

//  Waits until PID is stopped (SIGSTOP is delivered asynchronously).
static bool
s_wait_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    int64_t deadline = shoal_test_now_ms() + TEST_START_MS;
    while (shoal_test_now_ms() < deadline) {
        char *stat = shoal_test_slurp(path);
        char *end = stat ? strrchr(stat, ')') : NULL;
        bool stopped = end && (end[2] == 'T' || end[2] == 't');
        free(stat);
        if (stopped)
            return true;
        s_sleep_ms(1);
    }
    return false;
}

//  Takes OBJECT's dirty pages from SOURCE and copies them into COPY, as a
//  move's round does. Returns the number of pages copied.
static size_t
s_round(shoal_image_t *source, shoal_image_t *copy, shoal_image_object_t object)
{
    size_t pages = shoal_image_pages(source, object);
    size_t words = (pages + 63) / 64;
    uint64_t *bits = calloc(words ? words : 1, sizeof (uint64_t));
    shoal_image_harvest(source, object, bits, words);
    size_t copied = 0;
    for (size_t index = 0; index < pages; index++) {
        if (bits[index / 64] & (1ULL << (index % 64))) {
            memcpy(shoal_image_page(copy, object, index), shoal_image_page(source, object, index),
                   SHOAL_IMAGE_PAGE);
            copied++;
        }
    }
    free(bits);
    return copied;
}

//  The first page where A and B differ, or -1.
static long
s_first_difference(shoal_image_t *a, shoal_image_t *b, shoal_image_object_t object)
{
    for (size_t index = 0; index < shoal_image_pages(a, object); index++)
        if (memcmp(shoal_image_page(a, object, index), shoal_image_page(b, object, index),
                   SHOAL_IMAGE_PAGE) != 0)
            return (long) index;
    return -1;
}

static void
test_guest_create_open(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    char *error = NULL;
    CHECK_INT(shoal_image_create(dir, 10000, 5000, 123, &error), 0);
    CHECK(error == NULL);

    shoal_image_t *image = shoal_image_open(dir, &error);
    CHECK_MSG(image, "%s", error);
    size_t first = shoal_image_load_first(image);
    CHECK(first >= 2);      //  The header, then at least one kv page.
    CHECK_INT(shoal_image_pages(image, SHOAL_IMAGE_MEMORY), first + 3);
    CHECK_INT(shoal_image_pages(image, SHOAL_IMAGE_DISK), 2);
    CHECK(shoal_image_page(image, SHOAL_IMAGE_MEMORY, first + 2) != NULL);
    CHECK(shoal_image_page(image, SHOAL_IMAGE_MEMORY, first + 3) == NULL);
    CHECK(shoal_image_page(image, SHOAL_IMAGE_DISK, 2) == NULL);
    CHECK_INT(shoal_image_rate(image), 123);
    CHECK_INT(shoal_image_writes(image), 0);
    CHECK_INT(shoal_image_tick_ms(image), 0);
    CHECK_INT(shoal_image_verify(image, &error), 0);
    CHECK_INT(shoal_image_running(dir), 0);
    shoal_image_destroy(&image);
    shoal_image_destroy(&image);
    CHECK(image == NULL);

    //  An image is never created over another one.
    CHECK_INT(shoal_image_create(dir, 4096, 0, 0, &error), -1);
    CHECK_MSG(shoal_test_contains(error, "image"), "%s", error);
    free(error);

    //  No disk: zero blocks, and the image still opens and verifies.
    char diskless[TEST_PATH_MAX];
    s_path(diskless, "diskless");
    CHECK_INT(shoal_image_create(diskless, 1, 0, 0, NULL), 0);
    image = shoal_image_open(diskless, NULL);
    CHECK(image);
    CHECK_INT(shoal_image_pages(image, SHOAL_IMAGE_DISK), 0);
    CHECK_INT(shoal_image_pages(image, SHOAL_IMAGE_MEMORY), first + 1);
    CHECK_INT(shoal_image_verify(image, NULL), 0);
    shoal_image_destroy(&image);

    CHECK_INT(shoal_image_create(diskless, 0, 0, 0, &error), -1);
    CHECK(shoal_test_contains(error, "memory"));
    free(error);

    char missing[TEST_PATH_MAX];
    s_path(missing, "missing");
    CHECK(shoal_image_open(missing, &error) == NULL);
    CHECK_MSG(shoal_test_contains(error, "missing"), "%s", error);
    free(error);

    //  A file that is not an image is refused by name.
    char bogus[TEST_PATH_MAX], bogus_image[TEST_PATH_MAX + 8];
    s_path(bogus, "bogus");
    mkdir(bogus, 0755);
    snprintf(bogus_image, sizeof bogus_image, "%s/image", bogus);
    FILE *file = fopen(bogus_image, "w");
    CHECK(file);
    for (int i = 0; i < SHOAL_IMAGE_PAGE; i++)
        fputc('x', file);
    fclose(file);
    CHECK(shoal_image_open(bogus, &error) == NULL);
    CHECK_MSG(shoal_test_contains(error, "magic"), "%s", error);
    free(error);

    CHECK_INT(shoal_image_remove(dir), 0);
    CHECK(access(dir, F_OK) != 0);
    CHECK_INT(shoal_image_remove(dir), 0);
}

static void
test_guest_kv(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, 1 << 20, 0, 0, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    char *error = NULL;
    uint8_t value[SHOAL_IMAGE_KV_VALUE_MAX + 1];
    size_t size;
    bool found;

    CHECK_INT(shoal_image_kv_put(image, "color", "blue", 4, &error), 0);
    CHECK_INT(shoal_image_kv_get(image, "color", value, sizeof value, &size, &found), 0);
    CHECK(found);
    CHECK_INT(size, 4);
    CHECK(memcmp(value, "blue", 4) == 0);
    CHECK_INT(shoal_image_kv_put(image, "color", "green", 5, NULL), 0);
    CHECK_INT(shoal_image_kv_get(image, "color", value, sizeof value, &size, &found), 0);
    CHECK_INT(size, 5);
    CHECK(memcmp(value, "green", 5) == 0);
    CHECK_INT(shoal_image_kv_get(image, "absent", value, sizeof value, &size, &found), -1);
    CHECK(!found);

    //  Binary values of the largest size round-trip.
    uint8_t big[SHOAL_IMAGE_KV_VALUE_MAX];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t) (i * 7);
    CHECK_INT(shoal_image_kv_put(image, "big", big, sizeof big, NULL), 0);
    CHECK_INT(shoal_image_kv_get(image, "big", value, sizeof value, &size, &found), 0);
    CHECK_INT(size, sizeof big);
    CHECK(memcmp(value, big, sizeof big) == 0);

    char long_key[SHOAL_IMAGE_KV_KEY_MAX + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    CHECK_INT(shoal_image_kv_put(image, long_key, "v", 1, &error), -1);
    CHECK_MSG(shoal_test_contains(error, "key"), "%s", error);
    free(error);
    CHECK_INT(shoal_image_kv_put(image, "too-big", value, SHOAL_IMAGE_KV_VALUE_MAX + 1, &error), -1);
    CHECK_MSG(shoal_test_contains(error, "too-big"), "%s", error);
    free(error);

    //  A put marks the kv page it wrote, so a move carries it.
    size_t words = (shoal_image_pages(image, SHOAL_IMAGE_MEMORY) + 63) / 64;
    uint64_t *bits = calloc(words, sizeof (uint64_t));
    shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words);
    memset(bits, 0, words * sizeof (uint64_t));
    CHECK_INT(shoal_image_kv_put(image, "color", "red", 3, NULL), 0);
    CHECK(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words) >= 1);
    CHECK(bits[0] & 2);     //  Page 1, the first kv page, holds slot 0.
    free(bits);

    //  Fill the area: two keys are in, so SLOTS - 2 more fit, then it is full,
    //  and an existing key can still be rewritten.
    for (int i = 0; i < SHOAL_IMAGE_KV_SLOTS - 2; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", i);
        CHECK_INT(shoal_image_kv_put(image, key, key, strlen(key), NULL), 0);
    }
    CHECK_INT(shoal_image_kv_put(image, "one-more", "x", 1, &error), -1);
    CHECK_MSG(shoal_test_contains(error, "full"), "%s", error);
    free(error);
    CHECK_INT(shoal_image_kv_put(image, "key-7", "seven", 5, NULL), 0);

    //  Everything lives in the image: a reopen sees it.
    shoal_image_destroy(&image);
    image = shoal_image_open(dir, NULL);
    CHECK(image);
    CHECK_INT(shoal_image_kv_get(image, "key-7", value, sizeof value, &size, &found), 0);
    CHECK_INT(size, 5);
    CHECK(memcmp(value, "seven", 5) == 0);
    CHECK_INT(shoal_image_kv_get(image, "color", value, sizeof value, &size, &found), 0);
    CHECK(memcmp(value, "red", 3) == 0);
    CHECK_INT(shoal_image_verify(image, NULL), 0);
    shoal_image_destroy(&image);
}

static void
test_guest_harvest(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, 100 * SHOAL_IMAGE_PAGE, 70 * SHOAL_IMAGE_PAGE, 0, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    size_t pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY);
    size_t words = (pages + 63) / 64;
    uint64_t bits[8] = { 0 };
    CHECK(words <= 8);
    //  Page 0, the header, is in every memory harvest.
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words), 1);
    CHECK(bits[0] == 1);

    shoal_image_mark_all(image, SHOAL_IMAGE_MEMORY);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words), pages);
    size_t set = 0;
    for (size_t i = 0; i < 8; i++)
        set += (size_t) __builtin_popcountll(bits[i]);
    CHECK_INT(set, pages);      //  No bit beyond the last page.
    memset(bits, 0, sizeof bits);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words), 1);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_DISK, bits, 2), 0);

    //  A harvest into too few words leaves the rest for later.
    shoal_image_mark_all(image, SHOAL_IMAGE_DISK);
    uint64_t disk_bits[2] = { 0 };
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_DISK, disk_bits, 1), 64);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_DISK, disk_bits, 2), 6);
    CHECK(disk_bits[1] == 0x3f);

    //  A header change (here the rate) marks page 0; a stamped write marks its page.
    memset(bits, 0, sizeof bits);
    shoal_image_set_rate(image, 1000);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words), 1);
    CHECK(bits[0] == 1);
    memset(bits, 0, sizeof bits);
    size_t page = shoal_image_load_first(image) + 60;
    shoal_image_write(image, SHOAL_IMAGE_MEMORY, page, shoal_image_reserve(image, 1));
    shoal_image_add_writes(image, 1, 0);
    CHECK_INT(shoal_image_harvest(image, SHOAL_IMAGE_MEMORY, bits, words), 2);
    CHECK(bits[page / 64] & (1ULL << (page % 64)));
    CHECK_INT(shoal_image_verify(image, NULL), 0);
    shoal_image_destroy(&image);
}

//  The dirty log loses nothing: rounds under a live 200 MB/s load, then a
//  final round with the guest stopped, leave a byte-identical copy.
static void
test_guest_dirty_log_complete(void)
{
    char dir[TEST_PATH_MAX], copy_dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    s_path(copy_dir, "copy");
    CHECK_INT(shoal_image_create(dir, TEST_MEMORY, TEST_DISK, TEST_LOAD_RATE, NULL), 0);
    CHECK_INT(shoal_image_create(copy_dir, TEST_MEMORY, TEST_DISK, 0, NULL), 0);
    shoal_image_t *source = shoal_image_open(dir, NULL);
    shoal_image_t *copy = shoal_image_open(copy_dir, NULL);
    CHECK(source && copy);
    pid_t pid = s_guest_start(dir, source);
    CHECK(pid > 0);

    shoal_image_mark_all(source, SHOAL_IMAGE_MEMORY);
    shoal_image_mark_all(source, SHOAL_IMAGE_DISK);
    size_t baseline = s_round(source, copy, SHOAL_IMAGE_MEMORY);
    CHECK(baseline >= shoal_image_pages(source, SHOAL_IMAGE_MEMORY));
    CHECK(s_round(source, copy, SHOAL_IMAGE_DISK) >= shoal_image_pages(source, SHOAL_IMAGE_DISK));
    uint64_t writes_before = shoal_image_writes(source);
    for (int round = 1; round <= 5; round++) {
        s_sleep_ms(40);
        if (round == 3)
            CHECK_INT(shoal_image_kv_put(source, "round", "three", 5, NULL), 0);
        size_t memory = s_round(source, copy, SHOAL_IMAGE_MEMORY);
        size_t disk = s_round(source, copy, SHOAL_IMAGE_DISK);
        CHECK_MSG(memory > 0 && disk > 0, "round %d copied %zu pages and %zu blocks", round,
                  memory, disk);
    }
    CHECK(shoal_image_writes(source) > writes_before);

    CHECK_INT(kill(pid, SIGSTOP), 0);
    CHECK(s_wait_stopped(pid));
    s_round(source, copy, SHOAL_IMAGE_MEMORY);
    s_round(source, copy, SHOAL_IMAGE_DISK);
    long memory_diff = s_first_difference(source, copy, SHOAL_IMAGE_MEMORY);
    long disk_diff = s_first_difference(source, copy, SHOAL_IMAGE_DISK);
    uint64_t writes = shoal_image_writes(source);
    kill(pid, SIGCONT);
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK_MSG(memory_diff < 0, "memory page %ld differs", memory_diff);
    CHECK_MSG(disk_diff < 0, "disk block %ld differs", disk_diff);

    //  The copy is a guest in its own right: it verifies, and carries the
    //  writes, the kv area and the header.
    char *error = NULL;
    CHECK_MSG(shoal_image_verify(copy, &error) == 0, "%s", error);
    CHECK_INT(shoal_image_writes(copy), writes);
    CHECK(shoal_image_disk_writes(copy) > 0);
    char value[16];
    size_t size;
    bool found;
    CHECK_INT(shoal_image_kv_get(copy, "round", value, sizeof value, &size, &found), 0);
    CHECK(size == 5 && memcmp(value, "three", 5) == 0);

    //  And it runs: a guest started on the copy carries on, its clock shows
    //  the pause it lived through, and once it has finished the write its
    //  predecessor was stopped in, every page verifies strictly.
    uint64_t last_tick = shoal_image_tick_ms(copy);
    shoal_image_reset_gap(copy);
    uint64_t restarted = s_wall_ms();
    pid_t resumed = s_guest_start(copy_dir, copy);
    CHECK(resumed > 0);
    s_sleep_ms(50);
    CHECK_INT(shoal_test_stop(resumed, SIGTERM), 0);
    CHECK(shoal_image_writes(copy) > writes);
    CHECK_MSG(shoal_image_max_gap_ms(copy) >= restarted - last_tick, "gap %" PRIu64 " ms, down "
              "%" PRIu64 " ms", shoal_image_max_gap_ms(copy), restarted - last_tick);
    CHECK_MSG(shoal_image_verify(copy, &error) == 0, "%s", error);
    shoal_image_destroy(&source);
    shoal_image_destroy(&copy);
}

//  The load writes at its rate, never faster: measured over one-second
//  windows. Never above the rate (plus the credit's cap) in any window is a
//  property of the pacing; reaching the rate needs the guest to be scheduled,
//  which a machine busy with other work (or a disk whose writeback throttles
//  the guest's page faults) may not do for a whole second: the credit owed
//  past LOAD_CREDIT_MAX_MS is dropped by design. So windows are measured
//  until one reaches the rate (a pacing that never does fails after
//  TEST_RATE_WINDOWS_MOST of them), and every one of them must stay under it.
//  The rate is one a guest keeps up with on a busy machine: at 200 MB/s the
//  load needs most of a core.
#define TEST_RATE_WINDOWS_MOST 30
static void
test_guest_rate_accuracy(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, TEST_MEMORY, TEST_DISK, TEST_PACED_RATE, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    s_sleep_ms(100);
    double best = 0;
    for (int window = 0; window < TEST_RATE_WINDOWS_MOST && best <= TEST_PACED_RATE * 0.9; window++) {
        uint64_t writes = shoal_image_writes(image);
        int64_t started = shoal_test_now_ms();
        s_sleep_ms(1000);
        uint64_t written = (shoal_image_writes(image) - writes) * SHOAL_IMAGE_PAGE;
        int64_t took = shoal_test_now_ms() - started;
        double rate = (double) written * 1000.0 / (double) took;
        printf("     load at %.1f MB/s for %.1f MB/s asked (%+.1f%%)\n", rate / 1e6,
               TEST_PACED_RATE / 1e6, (rate / TEST_PACED_RATE - 1) * 100);
        CHECK_MSG(rate < TEST_PACED_RATE * 1.1, "%.0f bytes/s in window %d", rate, window);
        if (rate > best)
            best = rate;
    }
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK_MSG(best > TEST_PACED_RATE * 0.9, "best of %d windows %.0f bytes/s", TEST_RATE_WINDOWS_MOST, best);
    shoal_image_destroy(&image);
}

static void
test_guest_verify(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, 4 << 20, 1 << 20, 50 * 1000 * 1000, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    s_sleep_ms(200);
    //  A live image verifies, from the command line and in-process.
    char *argv[] = { (char *) shoal_test_program("shoal-guest"), "verify", dir, NULL };
    char *output = NULL;
    int code = shoal_test_capture(argv, NULL, 30000, &output);
    CHECK_MSG(code == 0, "verify exited %d: %s", code, output);
    free(output);
    char *error = NULL;
    CHECK_MSG(shoal_image_verify(image, &error) == 0, "%s", error);
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK(shoal_image_writes(image) > 0);

    //  One flipped byte is caught, and the page is named.
    //  A load page written, and the next one too (pages never written are
    //  zeros, and a zero page copied elsewhere is still a valid page).
    size_t page = shoal_image_load_first(image) + 77;
    while (page + 1 < shoal_image_pages(image, SHOAL_IMAGE_MEMORY)
       && (shoal_image_page_pristine(image, SHOAL_IMAGE_MEMORY, page)
       ||  shoal_image_page_pristine(image, SHOAL_IMAGE_MEMORY, page + 1)))
        page++;
    CHECK(page + 1 < shoal_image_pages(image, SHOAL_IMAGE_MEMORY));
    shoal_image_page(image, SHOAL_IMAGE_MEMORY, page)[1000] ^= 0x10;
    code = shoal_test_capture(argv, NULL, 30000, &output);
    char expected[64];
    snprintf(expected, sizeof expected, "memory page %zu: checksum mismatch", page);
    CHECK_MSG(code == 1 && shoal_test_contains(output, expected), "exit %d: %s", code, output);
    free(output);
    shoal_image_page(image, SHOAL_IMAGE_MEMORY, page)[1000] ^= 0x10;

    //  In a block the load wrote, and in one never written (all zeros).
    size_t written = 0, pristine = 0;
    size_t blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK);
    while (written < blocks && shoal_image_page_pristine(image, SHOAL_IMAGE_DISK, written))
        written++;
    while (pristine < blocks && !shoal_image_page_pristine(image, SHOAL_IMAGE_DISK, pristine))
        pristine++;
    CHECK(written < blocks && pristine < blocks);
    shoal_image_page(image, SHOAL_IMAGE_DISK, written)[4000] ^= 1;
    CHECK_INT(shoal_image_verify(image, &error), -1);
    snprintf(expected, sizeof expected, "disk block %zu: checksum mismatch", written);
    CHECK_STR(error, expected);
    free(error);
    shoal_image_page(image, SHOAL_IMAGE_DISK, written)[4000] ^= 1;
    shoal_image_page(image, SHOAL_IMAGE_DISK, pristine)[4000] ^= 1;
    CHECK_INT(shoal_image_verify(image, &error), -1);
    snprintf(expected, sizeof expected, "disk block %zu: no disk block stamp", pristine);
    CHECK_STR(error, expected);
    free(error);
    shoal_image_page(image, SHOAL_IMAGE_DISK, pristine)[4000] ^= 1;

    //  A page copied to the wrong place names the page it claims to be.
    memcpy(shoal_image_page(image, SHOAL_IMAGE_MEMORY, page),
           shoal_image_page(image, SHOAL_IMAGE_MEMORY, page + 1), SHOAL_IMAGE_PAGE);
    CHECK_INT(shoal_image_verify(image, &error), -1);
    snprintf(expected, sizeof expected, "memory page %zu: stamp says page %zu", page, page + 1);
    CHECK_STR(error, expected);
    free(error);
    shoal_image_destroy(&image);
}

//  Waits until the guest's tick reaches the wall time WALL_MS (a clock that
//  stood still, or ran behind, never does); false if it has not within
//  TEST_TICK_WAIT_MS.
#define TEST_TICK_WAIT_MS 30000
static bool
s_tick_reaches(shoal_image_t *image, uint64_t wall_ms)
{
    int64_t deadline = shoal_test_now_ms() + TEST_TICK_WAIT_MS;
    while (shoal_image_tick_ms(image) < wall_ms && shoal_test_now_ms() < deadline)
        s_sleep_ms(5);
    return shoal_image_tick_ms(image) >= wall_ms;
}

//  The tick clock follows wall time, and the longest gap shows a pause. The
//  guest is stopped for TEST_TICK_STOP_MS, far longer than the gaps a busy
//  machine gives a running guest, so that the stop is the longest gap.
#define TEST_TICK_STOP_MS 1000
static void
test_guest_tick(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, 8 << 20, 0, 20 * 1000 * 1000, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    //  The tick reaches a wall time ahead of now, and is never ahead of it.
    uint64_t ahead = s_wall_ms() + 100;
    CHECK(s_tick_reaches(image, ahead));
    uint64_t tick = shoal_image_tick_ms(image);
    uint64_t wall = s_wall_ms();
    CHECK_MSG(tick <= wall, "tick %" PRIu64 " ms ahead of wall time", tick - wall);

    uint64_t reset = s_wall_ms();
    shoal_image_reset_gap(image);
    CHECK(s_tick_reaches(image, reset + 1));
    CHECK_INT(kill(pid, SIGSTOP), 0);
    CHECK(s_wait_stopped(pid));
    uint64_t stopped = s_wall_ms();
    s_sleep_ms(TEST_TICK_STOP_MS);
    uint64_t continued = s_wall_ms();
    kill(pid, SIGCONT);
    //  The gap is counted at the first tick after the stop.
    CHECK(s_tick_reaches(image, continued));
    uint64_t gap = shoal_image_max_gap_ms(image);
    uint64_t gap_at = shoal_image_max_gap_at_ms(image);
    CHECK_MSG(gap >= continued - stopped, "max gap %" PRIu64 " ms across a stop of %" PRIu64 " ms", gap,
              continued - stopped);
    //  The image says when that gap began: at the last tick before the
    //  stop, and it lasted past the resume.
    CHECK_MSG(gap_at >= reset && gap_at <= stopped, "gap from %" PRIu64 ", reset at %" PRIu64 ", stopped at %"
              PRIu64, gap_at, reset, stopped);
    CHECK_MSG(gap_at + gap >= continued, "gap from %" PRIu64 " for %" PRIu64 " ms, resumed at %" PRIu64,
              gap_at, gap, continued);

    //  A reset forgets it: the longest gap since is shorter than the stop.
    shoal_image_reset_gap(image);
    CHECK(s_tick_reaches(image, s_wall_ms() + 100));
    CHECK_MSG(shoal_image_max_gap_ms(image) < continued - stopped, "max gap %" PRIu64 " ms after the reset",
              shoal_image_max_gap_ms(image));
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    shoal_image_destroy(&image);
}

//  A guest's clock across a restart of it, as a move's target reads it: the
//  last tick before the restart is read first, the guest is started, and the
//  reader looks only once the clock has moved on past the new run's first
//  tick (a reader late by a scheduling delay, as an adopt on a loaded
//  machine is). The gap across the restart is the one the first tick
//  counted, so it is never above the longest gap; measured to the tick the
//  reader sees, it was above it by however late the reader looked.
#define TEST_RESTART_LATE_MS 50
static void
test_guest_restart_gap(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    CHECK_INT(shoal_image_create(dir, 8 << 20, 0, 1000 * 1000, NULL), 0);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    CHECK(s_tick_reaches(image, s_wall_ms() + TEST_RESTART_LATE_MS));
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    uint64_t tick_before = shoal_image_tick_ms(image);
    //  The run that ticked last is no new run: no gap across a restart yet.
    CHECK_INT(shoal_image_start_gap_ms(image, tick_before), 0);
    //  A move's start: the longest gap is counted from here.
    shoal_image_reset_gap(image);
    uint64_t restarted = s_wall_ms();
    pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    //  The first tick was at or before now: the clock passes it.
    CHECK(s_tick_reaches(image, s_wall_ms() + TEST_RESTART_LATE_MS));
    uint64_t seen = shoal_image_tick_ms(image);
    uint64_t gap = shoal_image_start_gap_ms(image, tick_before);
    uint64_t longest = shoal_image_max_gap_ms(image);
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK_MSG(gap >= restarted - tick_before, "gap %" PRIu64 " ms across a restart %" PRIu64 " ms after the last "
              "tick", gap, restarted - tick_before);
    CHECK_MSG(gap <= longest, "gap %" PRIu64 " ms across the restart, the longest %" PRIu64 " ms", gap, longest);
    CHECK_MSG(gap < seen - tick_before, "gap %" PRIu64 " ms across the restart, the tick seen %" PRIu64 " ms after "
              "the last before it", gap, seen - tick_before);
    shoal_image_destroy(&image);
}

//  Waits until the image counts more than COUNT writes; false if it has
//  not within TEST_WRITES_WAIT_MS.
#define TEST_WRITES_WAIT_MS 30000
static bool
s_writes_beyond(shoal_image_t *image, uint64_t count)
{
    int64_t deadline = shoal_test_now_ms() + TEST_WRITES_WAIT_MS;
    while (shoal_image_writes(image) <= count && shoal_test_now_ms() < deadline)
        s_sleep_ms(10);
    return shoal_image_writes(image) > count;
}

//  Waits until the image's write count holds still for 100 ms and gives it;
//  false if it has not within TEST_WRITES_WAIT_MS.
static bool
s_writes_settle(shoal_image_t *image, uint64_t *count_p)
{
    int64_t deadline = shoal_test_now_ms() + TEST_WRITES_WAIT_MS;
    uint64_t last = shoal_image_writes(image);
    while (shoal_test_now_ms() < deadline) {
        s_sleep_ms(100);
        uint64_t now = shoal_image_writes(image);
        if (now == last) {
            *count_p = now;
            return true;
        }
        last = now;
    }
    return false;
}

//  The rate changes live; run refuses a second guest; SIGTERM stops the
//  guest cleanly and the image stays.
static void
test_guest_rate_live(void)
{
    char dir[TEST_PATH_MAX];
    s_path(dir, "guest");
    char *create[] = { (char *) shoal_test_program("shoal-guest"), "create", dir,
                       "--memory", "8M", "--disk", "1M", "--rate", "20M", NULL };
    char *output = NULL;
    int code = shoal_test_capture(create, NULL, 30000, &output);
    CHECK_MSG(code == 0, "create exited %d: %s", code, output);
    free(output);
    shoal_image_t *image = shoal_image_open(dir, NULL);
    CHECK(image);
    CHECK_INT(shoal_image_rate(image), 20 << 20);
    CHECK_INT(shoal_image_pages(image, SHOAL_IMAGE_DISK), 256);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    CHECK_INT(shoal_image_running(dir), pid);

    char *run[] = { (char *) shoal_test_program("shoal-guest"), "run", dir, NULL };
    code = shoal_test_capture(run, NULL, 10000, &output);
    CHECK_MSG(code == 1 && shoal_test_contains(output, "running already"), "%d: %s", code, output);
    free(output);

    CHECK(s_writes_beyond(image, 0));
    //  At rate 0 the load stops: once a slice it had begun is written, the
    //  count holds still (a load that went on would never settle).
    shoal_image_set_rate(image, 0);
    uint64_t idle = 0;
    CHECK(s_writes_settle(image, &idle));
    s_sleep_ms(300);
    CHECK_INT(shoal_image_writes(image), idle);

    //  The rate raised while it runs is taken: thousands of pages follow
    //  (a stopped load writes none).
    shoal_image_set_rate(image, 100 * 1000 * 1000);
    CHECK_MSG(s_writes_beyond(image, idle + 3600), "%" PRIu64 " writes after the rate went up",
              shoal_image_writes(image) - idle);

    char *info[] = { (char *) shoal_test_program("shoal-guest"), "info", dir, "--json", NULL };
    code = shoal_test_capture(info, NULL, 10000, &output);
    CHECK_MSG(code == 0 && shoal_test_contains(output, "\"rate\": 100000000"), "%s", output);
    char expected[64];
    snprintf(expected, sizeof expected, "\"pid\": %d", (int) pid);
    CHECK_MSG(shoal_test_contains(output, expected), "%s", output);
    free(output);

    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK_INT(shoal_image_running(dir), 0);
    char pid_path[TEST_PATH_MAX + 8];
    snprintf(pid_path, sizeof pid_path, "%s/pid", dir);
    CHECK(access(pid_path, F_OK) != 0);
    CHECK_INT(shoal_image_verify(image, NULL), 0);
    shoal_image_destroy(&image);
    CHECK_INT(shoal_image_remove(dir), 0);
}

//  Ends the guests a failed test left behind (a passed test stopped its
//  own: kill then finds no such process, since the test reaped it).
static void
s_guests_reap(void)
{
    for (size_t i = 0; i < s_guest_count; i++) {
        if (shoal_test_wait(s_guests[i], 0) == -1) {
            kill(s_guests[i], SIGCONT);
            shoal_test_stop(s_guests[i], SIGKILL);
        }
    }
    s_guest_count = 0;
}

//  A move's target image: sparse, written by pwrite; pages never written
//  are pristine (read as zeros, found in holes without being read) and
//  verify; a page the source sent equals it byte for byte.
static void
test_guest_sparse_copy(void)
{
    char source_dir[TEST_PATH_MAX], target_dir[TEST_PATH_MAX];
    s_path(source_dir, "source");
    s_path(target_dir, "target");
    char *error = NULL;
    CHECK_INT(shoal_image_create(source_dir, 64 * 4096, 4 * 4096, 0, &error), 0);
    shoal_image_t *source = shoal_image_open(source_dir, &error);
    CHECK_MSG(source, "%s", error);
    size_t first = shoal_image_load_first(source);
    size_t pages = shoal_image_pages(source, SHOAL_IMAGE_MEMORY);
    //  A fresh image: every load page and disk block is pristine.
    for (size_t index = first; index < pages; index++)
        CHECK(shoal_image_page_pristine(source, SHOAL_IMAGE_MEMORY, index));
    CHECK(!shoal_image_page_pristine(source, SHOAL_IMAGE_MEMORY, 0));
    CHECK(shoal_image_page_pristine(source, SHOAL_IMAGE_DISK, 3));
    //  Three pages written the guest's way: they are not.
    size_t written[] = { first, first + 7, pages - 1 };
    for (size_t i = 0; i < 3; i++)
        shoal_image_write(source, SHOAL_IMAGE_MEMORY, written[i], shoal_image_reserve(source, 1));
    shoal_image_write(source, SHOAL_IMAGE_DISK, 2, shoal_image_reserve(source, 1));
    shoal_image_add_writes(source, 3, 1);
    //  Holes are remembered per handle (see shoal_image_page_pristine).
    shoal_image_destroy(&source);
    source = shoal_image_open(source_dir, &error);
    CHECK_MSG(source, "%s", error);
    for (size_t i = 0; i < 3; i++)
        CHECK(!shoal_image_page_pristine(source, SHOAL_IMAGE_MEMORY, written[i]));
    CHECK(shoal_image_page_pristine(source, SHOAL_IMAGE_MEMORY, first + 8));
    CHECK_INT(shoal_image_verify(source, &error), 0);

    //  The copy: every page that is not pristine, by pwrite.
    CHECK_INT(shoal_image_create_sparse(target_dir, 64 * 4096, 4 * 4096, &error), 0);
    shoal_image_t *target = shoal_image_open(target_dir, &error);
    CHECK_MSG(target, "%s", error);
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++)
        for (size_t index = 0; index < shoal_image_pages(source, (shoal_image_object_t) object); index++)
            if (!shoal_image_page_pristine(source, (shoal_image_object_t) object, index))
                CHECK_MSG(shoal_image_write_pages(target, (shoal_image_object_t) object, index, 1,
                                                  shoal_image_page(source, (shoal_image_object_t) object, index),
                                                  &error) == 0, "%s", error);
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++)
        for (size_t index = 0; index < shoal_image_pages(source, (shoal_image_object_t) object); index++)
            CHECK(memcmp(shoal_image_page(source, (shoal_image_object_t) object, index),
                         shoal_image_page(target, (shoal_image_object_t) object, index), 4096) == 0);
    CHECK_INT(shoal_image_verify(target, &error), 0);
    CHECK(shoal_image_page_pristine(target, SHOAL_IMAGE_MEMORY, first + 8));
    //  Past the end is refused, and says so.
    CHECK_INT(shoal_image_write_pages(target, SHOAL_IMAGE_MEMORY, pages - 1, 2,
                                      shoal_image_page(source, SHOAL_IMAGE_MEMORY, 0), &error), -1);
    CHECK_MSG(shoal_test_contains(error, "past"), "%s", error);
    free(error);
    error = NULL;
    //  One flipped byte in a page never written is caught too.
    shoal_image_page(target, SHOAL_IMAGE_MEMORY, first + 8)[100] ^= 1;
    CHECK_INT(shoal_image_verify(target, &error), -1);
    char expected[64];
    snprintf(expected, sizeof expected, "memory page %zu: no memory page stamp", first + 8);
    CHECK_STR(error, expected);
    free(error);
    shoal_image_destroy(&target);
    shoal_image_destroy(&source);
}

//  Memory in a memory directory of its own: the image file and the dirty
//  log lie there, linked from the guest directory, the disk stays in it;
//  a guest runs on it and its pages verify; two guests of the same name in
//  two guest directories (two nodes on one machine) never meet there; a
//  create over an existing image leaves it alone; a remove takes the
//  memory files too.
static void
test_guest_memory_dir(void)
{
    char memory[TEST_PATH_MAX], dir[TEST_PATH_MAX], twin_parent[TEST_PATH_MAX], twin[TEST_PATH_MAX + 16];
    char path[TEST_PATH_MAX + 32], target[TEST_PATH_MAX];
    s_path(memory, "memory");
    s_path(dir, "guest");
    s_path(twin_parent, "other");
    snprintf(twin, sizeof twin, "%s/guest", twin_parent);
    CHECK_INT(mkdir(memory, 0755), 0);
    CHECK_INT(mkdir(twin_parent, 0755), 0);
    char *error = NULL;
    CHECK_MSG(shoal_image_create_in(dir, memory, TEST_MEMORY, TEST_DISK, TEST_PACED_RATE, &error) == 0, "%s", error);
    CHECK_MSG(shoal_image_create_sparse_in(twin, memory, TEST_MEMORY, TEST_DISK, &error) == 0, "%s", error);
    CHECK_INT(shoal_test_dir_entries(memory), 2);
    const char *linked[] = { "image", "dirty" };
    for (size_t i = 0; i < 2; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, linked[i]);
        CHECK_INT(lstat(path, &st), 0);
        CHECK_MSG(S_ISLNK(st.st_mode), "%s is not a link", path);
        ssize_t size = readlink(path, target, sizeof target - 1);
        CHECK(size > 0);
        target[size] = 0;
        CHECK_MSG(strstr(target, "/memory/guest-") != NULL, "%s links to %s", path, target);
        CHECK_INT(stat(target, &st), 0);
        CHECK(S_ISREG(st.st_mode));
    }
    struct stat st;
    snprintf(path, sizeof path, "%s/disk", dir);
    CHECK_INT(lstat(path, &st), 0);
    CHECK(S_ISREG(st.st_mode) && (uint64_t) st.st_size == TEST_DISK);

    shoal_image_t *image = shoal_image_open(dir, &error);
    CHECK_MSG(image, "%s", error);
    pid_t pid = s_guest_start(dir, image);
    CHECK(pid > 0);
    int64_t deadline = shoal_test_now_ms() + TEST_START_MS;
    while (shoal_image_writes(image) < 100 && shoal_test_now_ms() < deadline)
        s_sleep_ms(5);
    CHECK(shoal_image_writes(image) >= 100);
    CHECK_INT(shoal_test_stop(pid, SIGTERM), 0);
    CHECK_MSG(shoal_image_verify(image, &error) == 0, "%s", error);
    uint64_t writes = shoal_image_writes(image);
    shoal_image_destroy(&image);

    //  A second create finds the image there and leaves it as it was.
    CHECK_INT(shoal_image_create_in(dir, memory, TEST_MEMORY, 0, 0, &error), -1);
    free(error);
    error = NULL;
    CHECK_INT(shoal_test_dir_entries(memory), 2);
    image = shoal_image_open(dir, &error);
    CHECK_MSG(image, "%s", error);
    CHECK(shoal_image_writes(image) == writes);
    CHECK_INT(shoal_image_verify(image, &error), 0);
    shoal_image_destroy(&image);

    CHECK_INT(shoal_image_remove(dir), 0);
    CHECK(access(dir, F_OK) != 0);
    CHECK_INT(shoal_test_dir_entries(memory), 1);
    CHECK_INT(shoal_image_remove(twin), 0);
    CHECK_INT(shoal_test_dir_entries(memory), 0);
}

static void *
s_remove_run(void *dir)
{
    return (void *) (intptr_t) shoal_image_remove((const char *) dir);
}

//  Two hands remove one image at once (a move's receiver and its driver,
//  when a reception is dropped): both see it gone, neither an error.
static void
test_guest_remove_concurrent(void)
{
    char dir[TEST_PATH_MAX], file[TEST_PATH_MAX + 16];
    s_path(dir, "removed");
    for (int attempt = 0; attempt < TEST_REMOVE_ATTEMPTS; attempt++) {
        CHECK_INT(mkdir(dir, 0755), 0);
        for (int i = 0; i < TEST_REMOVE_FILES; i++) {
            snprintf(file, sizeof file, "%s/f%d", dir, i);
            FILE *handle = fopen(file, "w");
            CHECK(handle);
            fclose(handle);
        }
        pthread_t threads[2];
        for (int i = 0; i < 2; i++)
            CHECK(pthread_create(&threads[i], NULL, s_remove_run, dir) == 0);
        for (int i = 0; i < 2; i++) {
            void *rc = NULL;
            pthread_join(threads[i], &rc);
            CHECK_MSG((intptr_t) rc == 0, "attempt %d: a remove answered -1", attempt);
        }
        CHECK(access(dir, F_OK) != 0);
    }
}

#define GUEST_TEST(fn) do { SHOAL_TEST(fn); s_guests_reap(); } while (0)

int
main(void)
{
    GUEST_TEST(test_guest_create_open);
    GUEST_TEST(test_guest_kv);
    GUEST_TEST(test_guest_harvest);
    GUEST_TEST(test_guest_dirty_log_complete);
    GUEST_TEST(test_guest_rate_accuracy);
    GUEST_TEST(test_guest_verify);
    GUEST_TEST(test_guest_sparse_copy);
    GUEST_TEST(test_guest_tick);
    GUEST_TEST(test_guest_restart_gap);
    GUEST_TEST(test_guest_rate_live);
    GUEST_TEST(test_guest_remove_concurrent);
    GUEST_TEST(test_guest_memory_dir);
    return shoal_test_finish();
}
