/*  shoal_driver_proc: the proc driver, shoal-guest processes.

    The guest actor's workers call these (shoal_guests), never the node's
    reactor: most are quick (a fork, a signal, a file), but a stop waits up
    to the stop timeout for the guest to end. Several workers may call at
    once, for different guests: the driver keeps nothing that changes.

    A guest that ended stays a zombie until its parent reaps it. The node
    reaps the guests it started (waitpid on their pid whenever it looks at
    them); a guest adopted after a restart of the node is another
    process's child, and that parent may never reap it (a container's first
    process that is no init, a shell). kill(pid, 0) succeeds on a zombie, so
    every "is it still there" reads /proc/PID/stat too: state Z (or X) is
    gone, whoever is left to reap it.
*/
#include "shoal_driver_proc.h"
#include "shoal_names.h"
#include "shoal_image.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <spawn.h>
#include <unistd.h>

#define PROC_PROGRAM_NAME "shoal-guest"
#define PROC_LOG_NAME "guest.log"
//  How long a started guest has to take its pid file.
#define PROC_START_TIMEOUT_MS 5000
//  How often a wait for a guest (to start, to be gone) looks again: the
//  start is inside a move's downtime, and both are inside a client's call
//  (a guest takes about a millisecond to start here).
#define PROC_POLL_US 200
//  Most bytes of /proc/PID/cmdline read: the program and two arguments.
#define PROC_CMDLINE_MAX 8192

typedef struct {
    shoal_driver_t base;            //  the operations, first so the node can call them
    char *guests_dir;               //  DATA/guests: one directory per guest
    char *memory_dir;               //  where their memory files live; NULL: in those directories
    char *program;                  //  the shoal-guest to exec
    const int64_t *stop_timeout_ms; //  SIGTERM to SIGKILL (a cell the guest actor keeps up with the live setting)
} s_proc_t;

static char *
s_guest_dir(s_proc_t *self, const char *id)
{
    //  A tenant's claim id holds slashes; its directory is one name.
    char *name = shoal_claim_id_file_name(id);
    char *dir = zsys_sprintf("%s/%s", self->guests_dir, name);
    free(name);
    return dir;
}

char *
shoal_driver_proc_default_program(void)
{
    char path[PATH_MAX];
    ssize_t size = readlink("/proc/self/exe", path, sizeof path - 1);
    if (size <= 0)
        return shoal_strdup(PROC_PROGRAM_NAME);
    path[size] = 0;
    char *slash = strrchr(path, '/');
    if (slash)
        *slash = 0;
    return zsys_sprintf("%s/%s", path, PROC_PROGRAM_NAME);
}

//  True when /proc/PID/cmdline is shoal-guest run DIR.
static bool
s_is_guest(int pid, const char *dir)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char text[PROC_CMDLINE_MAX];
    ssize_t size = read(fd, text, sizeof text - 1);
    close(fd);
    if (size <= 0)
        return false;
    text[size] = 0;
    //  The arguments are NUL-separated: program, "run", DIR.
    const char *program = text;
    const char *command = program + strlen(program) + 1;
    if (command >= text + size)
        return false;
    const char *target = command + strlen(command) + 1;
    if (target >= text + size)
        return false;
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    return streq(base, PROC_PROGRAM_NAME) && streq(command, "run") && streq(target, dir);
}

//  The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z'...), or 0 when
//  PID does not exist.
static char
s_proc_state(int pid)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    size_t got = file ? fread(text, 1, sizeof text - 1, file) : 0;
    if (file)
        fclose(file);
    text[got] = '\0';
    //  "PID (COMM) STATE ...": COMM may hold anything, so read after its last ')'.
    const char *close = strrchr(text, ')');
    return close && close[1] == ' ' ? close[2] : 0;
}

//  True when PID no longer runs: reaped here if it is our child, gone, or
//  a zombie some other parent has not reaped yet.
static bool
s_is_gone(int pid)
{
    if (waitpid(pid, NULL, WNOHANG) == pid || kill(pid, 0) != 0)
        return true;
    char state = s_proc_state(pid);
    return state == 0 || state == 'Z' || state == 'X';
}

//  The pid of ID's guest when it runs (a zombie child of ours is reaped and
//  does not count), or 0 with *WHY_P saying why not.
static int
s_guest_pid(s_proc_t *self, const char *id, char **why_p)
{
    char *dir = s_guest_dir(self, id);
    int pid = shoal_image_running(dir);
    char *why = NULL;
    if (pid <= 0)
        why = zsys_sprintf("no guest holds %s/pid", dir);
    else {
        if (s_is_gone(pid))
            why = zsys_sprintf("guest pid %d named by %s/pid is gone", pid, dir);
        else
        if (!s_is_guest(pid, dir))
            why = zsys_sprintf("pid %d is not shoal-guest run %s", pid, dir);
    }
    free(dir);
    if (why) {
        if (why_p)
            *why_p = why;
        else
            free(why);
        return 0;
    }
    return pid;
}

static bool
s_proc_alive(shoal_driver_t *base, const char *id, char **why_p)
{
    return s_guest_pid((s_proc_t *) base, id, why_p) > 0;
}

static int
s_proc_create(shoal_driver_t *base, const char *id, const shoal_guest_spec_t *spec, char **error_p)
{
    s_proc_t *self = (s_proc_t *) base;
    char *dir = s_guest_dir(self, id);
    int rc = shoal_image_create_in(dir, self->memory_dir, spec->memory_bytes, spec->disk_bytes, spec->rate,
                                   error_p);
    free(dir);
    return rc;
}

static bool s_is_stopped(int pid);

//  Starts guest ID; PAUSED: it stops itself before its load writes
//  anything (shoal-guest run --paused), and this returns once it is
//  stopped. A guest that runs already is left as it is.
static int
s_proc_spawn(s_proc_t *self, const char *id, bool paused, char **error_p)
{
    if (s_guest_pid(self, id, NULL) > 0)
        return 0;
    char *dir = s_guest_dir(self, id);
    char *log = zsys_sprintf("%s/%s", dir, PROC_LOG_NAME);
    char *argv[] = { self->program, (char *) "run", dir, paused ? (char *) "--paused" : NULL, NULL };
    //  posix_spawn (vfork-like: the node's page tables are not copied, a
    //  fork of the node was a good part of a claim's create). The guest
    //  runs in a session of its own, hears SIGTERM (the node blocks the
    //  signals it reads through a signalfd, and a child inherits the mask),
    //  writes to its log, and holds none of the node's sockets or files.
    sigset_t unblocked;
    sigemptyset(&unblocked);
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setsigmask(&attr, &unblocked);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    pid_t pid = -1;
    int spawned = posix_spawn(&pid, argv[0], &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (spawned != 0) {
        errno = spawned;
        pid = -1;
    }
    int rc = 0;
    if (pid < 0) {
        *error_p = zsys_sprintf("cannot start %s: %s", self->program, strerror(errno));
        rc = -1;
    }
    else {
        //  Started means running: the guest holds its pid file. The pid in
        //  the file is not enough: one left by a guest that ended may name
        //  this very pid (a container's pids start again from 1 each time).
        int64_t deadline = zclock_mono() + PROC_START_TIMEOUT_MS;
        while (shoal_image_running(dir) != pid) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                *error_p = zsys_sprintf("%s run %s exited with %d at start (see %s)", self->program, dir,
                                        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log);
                rc = -1;
                break;
            }
            if (zclock_mono() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                *error_p = zsys_sprintf("%s run %s did not start within %d ms (see %s)", self->program, dir,
                                        PROC_START_TIMEOUT_MS, log);
                rc = -1;
                break;
            }
            usleep(PROC_POLL_US);
        }
        //  It took its pid file and stops itself next.
        while (rc == 0 && paused && !s_is_stopped(pid)) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                *error_p = zsys_sprintf("%s run %s --paused exited with %d at start (see %s)", self->program, dir,
                                        WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log);
                rc = -1;
            }
            else
            if (zclock_mono() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                *error_p = zsys_sprintf("%s run %s --paused did not stop within %d ms (see %s)", self->program,
                                        dir, PROC_START_TIMEOUT_MS, log);
                rc = -1;
            }
            else
                usleep(PROC_POLL_US);
        }
    }
    free(log);
    free(dir);
    return rc;
}

static int
s_proc_start(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_proc_spawn((s_proc_t *) base, id, false, error_p);
}

static int
s_proc_start_paused(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_proc_spawn((s_proc_t *) base, id, true, error_p);
}

static int
s_proc_signal(s_proc_t *self, const char *id, int signal_number, char **error_p)
{
    char *why = NULL;
    int pid = s_guest_pid(self, id, &why);
    if (pid <= 0 || kill(pid, signal_number) != 0) {
        *error_p = why ? why : zsys_sprintf("cannot signal guest %d: %s", pid, strerror(errno));
        return -1;
    }
    return 0;
}

//  True once /proc/PID/stat says the process is stopped.
static bool
s_is_stopped(int pid)
{
    char state = s_proc_state(pid);
    return state == 'T' || state == 't';
}

static int
s_proc_pause(shoal_driver_t *base, const char *id, char **error_p)
{
    s_proc_t *self = (s_proc_t *) base;
    char *why = NULL;
    int pid = s_guest_pid(self, id, &why);
    if (pid <= 0 || kill(pid, SIGSTOP) != 0) {
        *error_p = why ? why : zsys_sprintf("cannot signal guest %d: %s", pid, strerror(errno));
        return -1;
    }
    //  SIGSTOP is delivered asynchronously: the guest may still be writing
    //  on the other core for a moment.
    int64_t deadline = zclock_mono() + PROC_START_TIMEOUT_MS;
    while (!s_is_stopped(pid)) {
        if (zclock_mono() > deadline) {
            *error_p = zsys_sprintf("guest %s (pid %d) did not stop within %d ms of SIGSTOP", id, pid,
                                    PROC_START_TIMEOUT_MS);
            return -1;
        }
        sched_yield();
    }
    return 0;
}

static char *
s_proc_image_dir(shoal_driver_t *base, const char *id)
{
    return s_guest_dir((s_proc_t *) base, id);
}

static int
s_proc_resume(shoal_driver_t *base, const char *id, char **error_p)
{
    return s_proc_signal((s_proc_t *) base, id, SIGCONT, error_p);
}

//  Waits until PID is gone, up to TIMEOUT_MS. True when it is.
static bool
s_wait_gone(int pid, int64_t timeout_ms)
{
    int64_t deadline = zclock_mono() + timeout_ms;
    while (true) {
        //  Our own child is reaped; one adopted after a restart is not ours
        //  to reap, and may stay a zombie of a parent that never reaps.
        if (s_is_gone(pid))
            return true;
        if (zclock_mono() > deadline)
            return false;
        usleep(PROC_POLL_US);
    }
}

static int
s_proc_stop(shoal_driver_t *base, const char *id, char **error_p)
{
    s_proc_t *self = (s_proc_t *) base;
    int pid = s_guest_pid(self, id, NULL);
    if (pid <= 0)
        return 0;
    //  A paused guest handles SIGTERM only once it runs again.
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);
    if (s_wait_gone(pid, __atomic_load_n(self->stop_timeout_ms, __ATOMIC_RELAXED)))
        return 0;
    zsys_warning("guest: %s (pid %d) did not end within %" PRId64 " ms of SIGTERM: killing it",
                 id, pid, __atomic_load_n(self->stop_timeout_ms, __ATOMIC_RELAXED));
    kill(pid, SIGKILL);
    if (s_wait_gone(pid, PROC_START_TIMEOUT_MS))
        return 0;
    *error_p = zsys_sprintf("guest %s (pid %d) survived SIGKILL", id, pid);
    return -1;
}

static int
s_proc_destroy(shoal_driver_t *base, const char *id, char **error_p)
{
    s_proc_t *self = (s_proc_t *) base;
    if (s_proc_stop(base, id, error_p))
        return -1;
    char *dir = s_guest_dir(self, id);
    //  The image's files, then the log the node added beside them.
    char *log = zsys_sprintf("%s/%s", dir, PROC_LOG_NAME);
    unlink(log);
    free(log);
    int rc = 0;
    if (access(dir, F_OK) == 0 && shoal_image_remove(dir) != 0) {
        *error_p = zsys_sprintf("cannot remove %s: %s", dir, strerror(errno));
        rc = -1;
    }
    free(dir);
    return rc;
}

static shoal_image_t *
s_image_open(s_proc_t *self, const char *id, char **error_p)
{
    char *dir = s_guest_dir(self, id);
    shoal_image_t *image = shoal_image_open(dir, error_p);
    free(dir);
    return image;
}

static int
s_proc_kv_put(shoal_driver_t *base, const char *id, const char *key, const void *value, size_t size,
              char **error_p)
{
    shoal_image_t *image = s_image_open((s_proc_t *) base, id, error_p);
    if (!image)
        return -1;
    int rc = shoal_image_kv_put(image, key, value, size, error_p);
    shoal_image_destroy(&image);
    return rc;
}

static int
s_proc_kv_get(shoal_driver_t *base, const char *id, const char *key, void *value, size_t capacity,
              size_t *size, bool *found, char **error_p)
{
    shoal_image_t *image = s_image_open((s_proc_t *) base, id, error_p);
    if (!image)
        return -1;
    int rc = shoal_image_kv_get(image, key, value, capacity, size, found);
    if (rc)
        *error_p = zsys_sprintf("cannot read key '%s' of guest %s", key, id);
    shoal_image_destroy(&image);
    return rc;
}

//  The guest rereads its throttle from its image's header (its control
//  area), as it does its rate.
static int
s_proc_throttle(shoal_driver_t *base, const char *id, uint32_t percent, char **error_p)
{
    shoal_image_t *image = s_image_open((s_proc_t *) base, id, error_p);
    if (!image)
        return -1;
    shoal_image_set_throttle(image, percent);
    shoal_image_destroy(&image);
    return 0;
}

static void
s_proc_free(shoal_driver_t *base)
{
    s_proc_t *self = (s_proc_t *) base;
    free(self->guests_dir);
    free(self->memory_dir);
    free(self->program);
    free(self);
}

static const shoal_driver_ops_t s_proc_ops = {
    .name = "proc",
    .create = s_proc_create,
    .start = s_proc_start,
    .start_paused = s_proc_start_paused,
    .pause = s_proc_pause,
    .resume = s_proc_resume,
    .stop = s_proc_stop,
    .destroy = s_proc_destroy,
    .alive = s_proc_alive,
    .kv_put = s_proc_kv_put,
    .kv_get = s_proc_kv_get,
    .image_dir = s_proc_image_dir,
    .throttle = s_proc_throttle,
    .free = s_proc_free,
};

shoal_driver_t *
shoal_driver_proc_new(const char *guests_dir, const char *memory_dir, const char *program,
                      const int64_t *stop_timeout_ms, char **error_p)
{
    if (zsys_dir_create("%s", guests_dir) != 0) {
        *error_p = zsys_sprintf("cannot create the guests directory %s: %s", guests_dir, strerror(errno));
        return NULL;
    }
    if (memory_dir && *memory_dir && zsys_dir_create("%s", memory_dir) != 0) {
        *error_p = zsys_sprintf("cannot create the guests' memory directory %s: %s", memory_dir, strerror(errno));
        return NULL;
    }
    if (access(program, X_OK) != 0) {
        *error_p = zsys_sprintf("guest program %s: %s (set guest/program)", program, strerror(errno));
        return NULL;
    }
    s_proc_t *self = (s_proc_t *) zmalloc(sizeof *self);
    self->base.ops = &s_proc_ops;
    self->guests_dir = shoal_strdup(guests_dir);
    self->memory_dir = memory_dir && *memory_dir ? shoal_strdup(memory_dir) : NULL;
    self->program = shoal_strdup(program);
    self->stop_timeout_ms = stop_timeout_ms;
    return &self->base;
}
