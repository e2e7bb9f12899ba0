/*  shoal_test: the harness behind tests/shoal_test.h. */
#include "shoal_test.h"
#include "shoal_alloc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char shoal_test_dir[4096];
bool shoal_test_failed;
static int s_passed;
static int s_failed;

bool
shoal_test_contains(const char *haystack, const char *needle)
{
    return haystack && needle && strstr(haystack, needle) != NULL;
}

int
shoal_test_dir_make(const char *name)
{
    const char *base = getenv("TMPDIR");
    snprintf(shoal_test_dir, sizeof shoal_test_dir, "%s/shoal-%s-XXXXXX", base ? base : "/tmp", name);
    if (!mkdtemp(shoal_test_dir)) {
        fprintf(stderr, "%s: cannot create a temporary directory: %s\n", name, strerror(errno));
        return -1;
    }
    return 0;
}

//  The processes the current test started, so that those a failed test
//  leaves running are ended with it (a failed CHECK returns at once).
#define S_SPAWNED_MAX 1024
static pid_t s_spawned[S_SPAWNED_MAX];
static size_t s_spawned_count;

//  Ends every process the test started that still runs (a child of ours
//  not yet waited for: a pid reaped already is never signalled).
static void
s_end_spawned(const char *name)
{
    for (size_t i = 0; i < s_spawned_count; i++) {
        int status;
        if (waitpid(s_spawned[i], &status, WNOHANG) != 0)
            continue;
        kill(s_spawned[i], SIGKILL);
        waitpid(s_spawned[i], &status, 0);
        printf("     %s left process %d running: ended\n", name, (int) s_spawned[i]);
    }
    s_spawned_count = 0;
}

void
shoal_test_run(const char *name, void (*fn)(void))
{
    //  SHOAL_TEST_ONLY=NAME runs the tests whose names contain NAME.
    const char *only = getenv("SHOAL_TEST_ONLY");
    if (only && *only && !strstr(name, only))
        return;
    if (shoal_test_dir_make(name)) {
        s_failed++;
        return;
    }
    shoal_test_failed = false;
    s_spawned_count = 0;
    int64_t started = shoal_test_now_ms();
    fn();
    int64_t took = shoal_test_now_ms() - started;
    if (shoal_test_failed) {
        s_end_spawned(name);
        s_failed++;
        printf("FAIL %s (%" PRId64 " ms, files kept in %s)\n", name, took, shoal_test_dir);
    }
    else {
        s_passed++;
        printf("ok   %s (%" PRId64 " ms)\n", name, took);
        shoal_test_rmrf(shoal_test_dir);
    }
    fflush(stdout);
}

int
shoal_test_finish(void)
{
    printf("%d passed, %d failed\n", s_passed, s_failed);
    return s_failed == 0 && s_passed > 0 ? 0 : 1;
}

static int
s_remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

void
shoal_test_rmrf(const char *path)
{
    nftw(path, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *
shoal_test_program(const char *name)
{
    static char path[4096];
    const char *dir = getenv("SHOAL_BIN_DIR");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", name);
    return path;
}

int
shoal_test_find_programs(void)
{
    if (!getenv("SHOAL_BIN_DIR")) {
        char self[4096];
        ssize_t size = readlink("/proc/self/exe", self, sizeof self - 1);
        if (size <= 0)
            return -1;
        self[size] = 0;
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = 0;
        setenv("SHOAL_BIN_DIR", self, 1);
    }
    const char *names[] = { "shoald", "shoal-guest" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (access(shoal_test_program(names[i]), X_OK) != 0) {
            fprintf(stderr, "no %s at %s (set SHOAL_BIN_DIR)\n", names[i], shoal_test_program(names[i]));
            return -1;
        }
    return 0;
}

/*  Ports for test nodes. A port found free is bound by the shoald a test
    spawns a while later, and again after each restart of that node, so the
    port must stay the test's meanwhile. Two things could take it:

    1. Any process's bind to port 0, and any connect(), is handed a port of
       the kernel's ephemeral range (net.ipv4.ip_local_port_range). A port
       found free by a bind to port 0 is one of those: another test process
       on the machine (ctest -j, another checkout's suite) finding a free
       port the same way can be handed it while its node is not up yet or
       is down for a restart, and start its own node there; the node's own
       start then fails, "Address already in use". So ports are picked
       outside that range, where the kernel hands out none, and below the
       dynamic ports czmq scans for a bind to port "*".
    2. Another test process picking ports the same way. Each port picked is
       reserved by an exclusive flock on S_PORTS_DIR/PORT, held by this
       process until it ends (the kernel drops it then, whatever the end),
       and a port is picked only with its lock taken: no two test processes
       on the machine, and no two picks of one process, hold the same port.

    A picked port is bound once more before it is handed out, so one that a
    process outside the tests holds is skipped. */

//  Where the reservations live: one directory for the machine, as ports are.
#define S_PORTS_DIR "/tmp/shoal-test-ports"
//  The lowest port picked: the well-known services' ports stay clear.
#define S_PORTS_FLOOR 16384
//  The highest port: the dynamic ports above it (49152 up) are where czmq
//  binds a port "*", as a node's move and object receivers do.
#define S_PORTS_CEILING 49151
//  The ephemeral range when /proc cannot say (Linux's default).
#define S_EPHEMERAL_LOW 32768
#define S_EPHEMERAL_HIGH 60999

//  The kernel's ephemeral port range into *LOW_P and *HIGH_P.
static void
s_ephemeral_range(int *low_p, int *high_p)
{
    *low_p = S_EPHEMERAL_LOW;
    *high_p = S_EPHEMERAL_HIGH;
    FILE *file = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (!file)
        return;
    int low = 0, high = 0;
    if (fscanf(file, "%d %d", &low, &high) == 2 && low > 0 && low <= high) {
        *low_p = low;
        *high_p = high;
    }
    fclose(file);
}

//  True when PORT on 127.0.0.1 can be bound now.
static bool
s_port_bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool bound = bind(fd, (struct sockaddr *) &addr, sizeof addr) == 0;
    close(fd);
    return bound;
}

//  Takes the reservation of PORT (2 above): returns the descriptor that
//  holds it, or -1 when another holds it or it cannot be taken.
static int
s_port_reserve(int port)
{
    char path[64];
    snprintf(path, sizeof path, "%s/%d", S_PORTS_DIR, port);
    //  Read-only: a reservation file another user made is readable, and a
    //  lock needs no more.
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int
shoal_test_free_port(void)
{
    //  Every test user on the machine shares the directory, as the ports.
    if (mkdir(S_PORTS_DIR, 01777) == 0)
        chmod(S_PORTS_DIR, 01777);
    int low = 0, high = 0;
    s_ephemeral_range(&low, &high);
    //  The ports from the floor to the ceiling that are outside the
    //  ephemeral range, numbered from 0 to COUNT - 1: those below it, then
    //  those above it.
    int below_top = low - 1 < S_PORTS_CEILING ? low - 1 : S_PORTS_CEILING;
    int below = below_top >= S_PORTS_FLOOR ? below_top - S_PORTS_FLOOR + 1 : 0;
    int above_bottom = high + 1 > S_PORTS_FLOOR ? high + 1 : S_PORTS_FLOOR;
    int above = above_bottom <= S_PORTS_CEILING ? S_PORTS_CEILING - above_bottom + 1 : 0;
    int count = below + above;
    if (count <= 0) {
        fprintf(stderr, "shoal_test_free_port: no port from %d to %d is outside the ephemeral range %d-%d\n",
                S_PORTS_FLOOR, S_PORTS_CEILING, low, high);
        return -1;
    }
    //  A start of its own for each process and call, so that processes
    //  picking at once seldom meet at the same lock.
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t state = ((uint64_t) getpid() << 32) ^ (uint64_t) now.tv_nsec ^ (uint64_t) now.tv_sec;
    int start = (int) (shoal_test_random(&state) % (uint64_t) count);
    for (int i = 0; i < count; i++) {
        int index = (start + i) % count;
        int port = index < below ? S_PORTS_FLOOR + index : above_bottom + (index - below);
        int fd = s_port_reserve(port);
        if (fd < 0)
            continue;
        if (s_port_bindable(port))
            return port;            //  fd stays open: the reservation lasts as this process
        close(fd);
    }
    fprintf(stderr, "shoal_test_free_port: every port from %d to %d outside the ephemeral range %d-%d is "
            "reserved or bound (reservations in %s)\n", S_PORTS_FLOOR, S_PORTS_CEILING, low, high, S_PORTS_DIR);
    return -1;
}

pid_t
shoal_test_spawn(char *const argv[], char *const env[], const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0 && s_spawned_count < S_SPAWNED_MAX)
        s_spawned[s_spawned_count++] = pid;
    if (pid == 0) {
        if (log_path) {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, STDOUT_FILENO);
                dup2(fd, STDERR_FILENO);
                close(fd);
            }
        }
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            dup2(null_fd, STDIN_FILENO);
            close(null_fd);
        }
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

static int
s_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

int
shoal_test_wait(pid_t pid, int timeout_ms)
{
    int64_t deadline = shoal_test_now_ms() + timeout_ms;
    while (true) {
        int status;
        pid_t rc = waitpid(pid, &status, WNOHANG);
        if (rc == pid)
            return s_exit_code(status);
        if (rc < 0)
            return -1;
        if (shoal_test_now_ms() >= deadline)
            return -1;
        usleep(5000);
    }
}

int
shoal_test_stop(pid_t pid, int signal)
{
    kill(pid, signal);
    int code = shoal_test_wait(pid, 10000);
    if (code == -1) {
        kill(pid, SIGKILL);
        code = shoal_test_wait(pid, 10000);
    }
    return code;
}

int
shoal_test_capture(char *const argv[], char *const env[], int timeout_ms, char **output_p)
{
    char log_path[4200];
    static int serial;
    snprintf(log_path, sizeof log_path, "%s/capture-%d.log", shoal_test_dir, ++serial);
    pid_t pid = shoal_test_spawn(argv, env, log_path);
    if (pid < 0)
        return -1;
    int code = shoal_test_wait(pid, timeout_ms);
    if (code == -1) {
        kill(pid, SIGKILL);
        shoal_test_wait(pid, 10000);
    }
    char *output = shoal_test_slurp(log_path);
    if (output_p)
        *output_p = output ? output : shoal_strdup("");
    else
        free(output);
    return code;
}

//  Flips the byte one past MARKER in the file at PATH, if it holds MARKER.
//  Returns 0 when flipped, 1 when the file does not hold MARKER, or -1.
static int
s_flip_in_file(const char *path, const char *marker)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return -1;
    struct stat info;
    int rc = fstat(fd, &info) == 0 ? 1 : -1;
    uint8_t *data = rc == 1 && info.st_size > 0 ? malloc((size_t) info.st_size) : NULL;
    if (data && pread(fd, data, (size_t) info.st_size, 0) == info.st_size) {
        size_t length = strlen(marker);
        uint8_t *at = memmem(data, (size_t) info.st_size, marker, length);
        if (at && at + length + 1 < data + info.st_size) {
            off_t offset = (off_t) (at - data) + (off_t) length + 1;
            uint8_t flipped = data[offset] ^ 0x20;
            rc = pwrite(fd, &flipped, 1, offset) == 1 ? 0 : -1;
        }
    }
    free(data);
    close(fd);
    return rc;
}

int
shoal_test_dir_entries(const char *dir)
{
    DIR *handle = opendir(dir);
    if (!handle)
        return -1;
    int count = 0;
    for (struct dirent *entry = readdir(handle); entry; entry = readdir(handle))
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(handle);
    return count;
}

int
shoal_test_flip_in_log(const char *db_dir, const char *marker, char **file_p)
{
    DIR *handle = opendir(db_dir);
    if (!handle)
        return -1;
    int rc = 1;
    struct dirent *entry;
    while (rc == 1 && (entry = readdir(handle))) {
        size_t length = strlen(entry->d_name);
        if (length < 4 || strcmp(entry->d_name + length - 4, ".log") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", db_dir, entry->d_name);
        rc = s_flip_in_file(path, marker);
        if (rc == 0 && file_p)
            *file_p = shoal_strdup(entry->d_name);
    }
    closedir(handle);
    return rc == 0 ? 0 : -1;
}

char *
shoal_test_slurp(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    size_t capacity = 4096, size = 0;
    char *data = malloc(capacity);
    size_t got;
    while (data && (got = fread(data + size, 1, capacity - size - 1, file)) > 0) {
        size += got;
        if (capacity - size < 2) {
            capacity *= 2;
            char *grown = realloc(data, capacity);
            if (!grown) {
                free(data);
                data = NULL;
            }
            data = grown;
        }
    }
    fclose(file);
    if (data)
        data[size] = 0;
    return data;
}

int64_t
shoal_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
shoal_test_seed(void)
{
    const char *text = getenv("SHOAL_TEST_SEED");
    uint64_t seed = text ? strtoull(text, NULL, 10) : (uint64_t) time(NULL);
    printf("     seed %" PRIu64 " (SHOAL_TEST_SEED repeats it)\n", seed);
    return seed;
}

uint64_t
shoal_test_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
