/*  shoal-guest: the reference guest, a process whose whole state is the image
    it maps (see shoal_image.h), so that a node can pause it, copy it away
    and resume it elsewhere.

        shoal-guest create DIR --memory BYTES [--disk BYTES] [--rate BYTES_PER_S]
        shoal-guest run DIR [--paused]
        shoal-guest verify DIR
        shoal-guest info DIR [--json]

    Sizes take K, M, G or T suffixes (powers of 1024). Exit codes: 0 done,
    1 the command failed (verify: a bad page, named on stderr), 2 usage.

    run stays in the foreground: the caller decides where its output goes
    and whether to wait for it. It starts its own session (setsid) so that
    a node's restart, or a signal to the node's process group, does not end
    it; a node that already called setsid between fork and exec is left as
    it is. It holds a lock on DIR/pid with its pid inside while it runs, and
    removes the file when SIGTERM (or SIGINT) ends the load; the image
    stays. SIGSTOP and SIGCONT pause and resume it and need nothing from it.
    With --paused it stops itself (SIGSTOP) once it holds the pid file and
    before its load writes anything, not even a tick, so a paused guest
    that moved (or is restored) never runs until SIGCONT resumes it: a
    stop sent by its starter would land a few milliseconds of load too late.
    With SHOAL_GUEST_IGNORE_TERM=1 in its environment it ignores SIGTERM,
    as a guest that will not stop when asked does: only SIGKILL ends it.
*/
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "shoal_image.h"
#include "shoal_load.h"

//  How long a starting guest waits for a lock that a node's look at it
//  holds: PID_LOCK_TRIES times PID_LOCK_PAUSE_NS (100 ms).
#define PID_LOCK_TRIES 1000
#define PID_LOCK_PAUSE_NS 100000L

#define GUEST_EXIT_OK 0
#define GUEST_EXIT_FAILED 1
#define GUEST_EXIT_USAGE 2
//  Room for a path inside the guest directory.
#define GUEST_PATH_MAX 4096
//  Size suffixes are powers of this.
#define GUEST_SIZE_STEP 1024
#define MS_PER_S 1000
#define NS_PER_MS 1000000
#define GUEST_IGNORE_TERM_VARIABLE "SHOAL_GUEST_IGNORE_TERM"

//  Set by the SIGTERM/SIGINT handler. A signal handler can reach nothing
//  else, so this one flag is global; it is only ever read by the load loop.
static volatile sig_atomic_t s_stop;

static void
s_handle_stop(int signal_number)
{
    s_stop = 1;
}

static int
s_usage(void)
{
    fprintf(stderr,
        "usage: shoal-guest create DIR --memory BYTES [--disk BYTES] [--rate BYTES_PER_S]\n"
        "       shoal-guest run DIR [--paused]\n"
        "       shoal-guest verify DIR\n"
        "       shoal-guest info DIR [--json]\n"
        "sizes accept K, M, G and T suffixes (powers of 1024)\n");
    return GUEST_EXIT_USAGE;
}

//  Parses a size such as 4096, 64K, 200M or 1G into *VALUE_P. Returns 0 or -1.
static int
s_parse_size(const char *text, uint64_t *value_p)
{
    if (!text || *text < '0' || *text > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno)
        return -1;
    const char *suffixes = "KMGT";
    const char *suffix = *end ? strchr(suffixes, (*end & ~0x20)) : NULL;
    if (*end && !suffix)
        return -1;
    if (suffix) {
        for (const char *step = suffixes; step <= suffix; step++) {
            if (value > UINT64_MAX / GUEST_SIZE_STEP)
                return -1;
            value *= GUEST_SIZE_STEP;
        }
        end++;
        //  "64KiB" and "64KB" read as "64K".
        if (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end)
        return -1;
    *value_p = value;
    return 0;
}

static int
s_guest_create(int argc, char *argv[])
{
    const char *dir = argv[0];
    uint64_t memory = 0, disk = 0, rate = 0;
    bool have_memory = false;
    for (int i = 1; i < argc; i++) {
        uint64_t *target = strcmp(argv[i], "--memory") == 0 ? &memory
                         : strcmp(argv[i], "--disk") == 0 ? &disk
                         : strcmp(argv[i], "--rate") == 0 ? &rate : NULL;
        if (!target || i + 1 >= argc) {
            fprintf(stderr, "shoal-guest: create: unexpected '%s'\n", argv[i]);
            return s_usage();
        }
        if (s_parse_size(argv[i + 1], target) != 0) {
            fprintf(stderr, "shoal-guest: create: %s '%s' is not a size\n", argv[i], argv[i + 1]);
            return GUEST_EXIT_USAGE;
        }
        if (target == &memory)
            have_memory = true;
        i++;
    }
    if (!have_memory) {
        fprintf(stderr, "shoal-guest: create: --memory is required\n");
        return s_usage();
    }
    char *error = NULL;
    if (shoal_image_create(dir, memory, disk, rate, &error) != 0) {
        fprintf(stderr, "shoal-guest: create: %s\n", error ? error : dir);
        free(error);
        return GUEST_EXIT_FAILED;
    }
    return GUEST_EXIT_OK;
}

//  Takes DIR/pid for this process: locked (so that a second guest on the
//  same image refuses to start) and holding our pid. Returns the open file,
//  which must stay open while the guest runs, or -1.
static int
s_pid_file_take(const char *dir, const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "shoal-guest: run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    //  A node asking whether a guest runs holds a shared lock for a few
    //  microseconds (shoal_image_running): the lock is asked again for a
    //  while before a guest holding it for good is believed.
    int tries = 0;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK || ++tries >= PID_LOCK_TRIES) {
            fprintf(stderr, "shoal-guest: run: %s: a guest is running already (pid %d)\n", dir,
                    shoal_image_running(dir));
            close(fd);
            return -1;
        }
        struct timespec pause = { 0, PID_LOCK_PAUSE_NS };
        nanosleep(&pause, NULL);
    }
    char text[32];
    int size = snprintf(text, sizeof text, "%d\n", (int) getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, text, (size_t) size) != size) {
        fprintf(stderr, "shoal-guest: run: %s: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int
s_guest_run(const char *dir, bool paused)
{
    char *error = NULL;
    shoal_image_t *image = shoal_image_open(dir, &error);
    if (!image) {
        fprintf(stderr, "shoal-guest: run: %s\n", error ? error : dir);
        free(error);
        return GUEST_EXIT_FAILED;
    }
    //  EPERM: already a session (or group) leader, as a node makes it.
    if (setsid() < 0 && errno != EPERM)
        fprintf(stderr, "shoal-guest: run: setsid: %s\n", strerror(errno));

    int rc = GUEST_EXIT_FAILED;
    char path[GUEST_PATH_MAX];
    snprintf(path, sizeof path, "%s/pid", dir);
    int pid_fd = s_pid_file_take(dir, path);
    shoal_load_t *load = NULL;
    if (pid_fd < 0)
        goto cleanup;

    struct sigaction action = { .sa_handler = s_handle_stop };
    sigemptyset(&action.sa_mask);
    const char *ignore = getenv(GUEST_IGNORE_TERM_VARIABLE);
    if (ignore && strcmp(ignore, "1") == 0)
        signal(SIGTERM, SIG_IGN);
    else
        sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);

    //  Paused from the start: the starter sees the pid file, then this
    //  process stopped, and resumes it with SIGCONT (a SIGTERM meanwhile
    //  ends it, as its handler runs on the SIGCONT that follows).
    if (paused)
        raise(SIGSTOP);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    load = shoal_load_new(image, (uint64_t) getpid() * NS_PER_MS ^ (uint64_t) now.tv_nsec);
    if (!load) {
        fprintf(stderr, "shoal-guest: run: out of memory\n");
        goto cleanup;
    }
    fprintf(stderr, "shoal-guest: running %s (pid %d, %" PRIu64 " bytes/s)\n", dir,
            (int) getpid(), shoal_image_rate(image));
    shoal_load_run(load, &s_stop);
    fprintf(stderr, "shoal-guest: stopped %s after %" PRIu64 " writes\n", dir,
            shoal_image_writes(image));
    rc = GUEST_EXIT_OK;

cleanup:
    shoal_load_destroy(&load);
    if (pid_fd >= 0) {
        unlink(path);
        close(pid_fd);
    }
    shoal_image_destroy(&image);
    return rc;
}

static int
s_guest_verify(const char *dir)
{
    char *error = NULL;
    shoal_image_t *image = shoal_image_open(dir, &error);
    if (!image) {
        fprintf(stderr, "shoal-guest: verify: %s\n", error ? error : dir);
        free(error);
        return GUEST_EXIT_FAILED;
    }
    int rc = GUEST_EXIT_OK;
    if (shoal_image_verify(image, &error) != 0) {
        fprintf(stderr, "shoal-guest: verify: %s: %s\n", dir, error ? error : "failed");
        free(error);
        rc = GUEST_EXIT_FAILED;
    }
    else
        printf("%s: ok (%zu memory pages, %zu disk blocks)\n", dir,
               shoal_image_pages(image, SHOAL_IMAGE_MEMORY),
               shoal_image_pages(image, SHOAL_IMAGE_DISK));
    shoal_image_destroy(&image);
    return rc;
}

//  Prints TEXT as a JSON string.
static void
s_print_json_string(const char *text)
{
    putchar('"');
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else
        if ((unsigned char) *c < ' ')
            printf("\\u%04x", (unsigned char) *c);
        else
            putchar(*c);
    }
    putchar('"');
}

static int
s_guest_info(const char *dir, bool json)
{
    char *error = NULL;
    shoal_image_t *image = shoal_image_open(dir, &error);
    if (!image) {
        fprintf(stderr, "shoal-guest: info: %s\n", error ? error : dir);
        free(error);
        return GUEST_EXIT_FAILED;
    }
    size_t memory_pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY);
    size_t load_pages = memory_pages - shoal_image_load_first(image);
    size_t disk_blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ms = (uint64_t) now.tv_sec * MS_PER_S + (uint64_t) now.tv_nsec / NS_PER_MS;
    uint64_t tick = shoal_image_tick_ms(image);
    int pid = shoal_image_running(dir);
    if (json) {
        printf("{\"dir\": ");
        s_print_json_string(dir);
        printf(", \"memory_bytes\": %zu, \"memory_pages\": %zu, \"load_pages\": %zu"
               ", \"disk_bytes\": %zu, \"disk_blocks\": %zu, \"rate\": %" PRIu64 ", \"throttle\": %u"
               ", \"writes\": %" PRIu64 ", \"disk_writes\": %" PRIu64 ", \"sequence\": %" PRIu64
               ", \"tick_ms\": %" PRIu64 ", \"max_gap_ms\": %" PRIu64 ", \"max_gap_at_ms\": %" PRIu64
               ", \"pid\": %d}\n",
               memory_pages * SHOAL_IMAGE_PAGE, memory_pages, load_pages,
               disk_blocks * SHOAL_IMAGE_PAGE, disk_blocks, shoal_image_rate(image), shoal_image_throttle(image),
               shoal_image_writes(image), shoal_image_disk_writes(image),
               shoal_image_sequence(image), tick, shoal_image_max_gap_ms(image),
               shoal_image_max_gap_at_ms(image), pid);
    }
    else {
        printf("dir:      %s\n", dir);
        printf("memory:   %zu bytes (%zu pages, %zu written by the load)\n",
               memory_pages * SHOAL_IMAGE_PAGE, memory_pages, load_pages);
        printf("disk:     %zu bytes (%zu blocks)\n", disk_blocks * SHOAL_IMAGE_PAGE, disk_blocks);
        printf("rate:     %" PRIu64 " bytes/s\n", shoal_image_rate(image));
        if (shoal_image_throttle(image))
            printf("throttle: %u%% of the rate held back (a move's auto-converge)\n", shoal_image_throttle(image));
        printf("writes:   %" PRIu64 " (%" PRIu64 " disk blocks), sequence %" PRIu64 "\n",
               shoal_image_writes(image), shoal_image_disk_writes(image),
               shoal_image_sequence(image));
        if (tick)
            printf("tick:     %" PRIu64 " ms (%" PRId64 " ms ago)\n", tick,
                   (int64_t) (now_ms - tick));
        else
            printf("tick:     never\n");
        uint64_t gap_at = shoal_image_max_gap_at_ms(image);
        if (gap_at)
            printf("max gap:  %" PRIu64 " ms, from %" PRIu64 " ms (%" PRId64 " ms ago)\n",
                   shoal_image_max_gap_ms(image), gap_at, (int64_t) (now_ms - gap_at));
        else
            printf("max gap:  %" PRIu64 " ms\n", shoal_image_max_gap_ms(image));
        if (pid)
            printf("running:  pid %d\n", pid);
        else
            printf("running:  no\n");
    }
    shoal_image_destroy(&image);
    return GUEST_EXIT_OK;
}

int
main(int argc, char *argv[])
{
    if (argc < 3)
        return s_usage();
    const char *command = argv[1];
    const char *dir = argv[2];
    if (strcmp(command, "create") == 0)
        return s_guest_create(argc - 2, argv + 2);
    if (strcmp(command, "run") == 0 && argc == 3)
        return s_guest_run(dir, false);
    if (strcmp(command, "run") == 0 && argc == 4 && strcmp(argv[3], "--paused") == 0)
        return s_guest_run(dir, true);
    if (strcmp(command, "verify") == 0 && argc == 3)
        return s_guest_verify(dir);
    if (strcmp(command, "info") == 0 && argc <= 4) {
        bool json = argc == 4 && strcmp(argv[3], "--json") == 0;
        if (argc == 4 && !json)
            return s_usage();
        return s_guest_info(dir, json);
    }
    return s_usage();
}
