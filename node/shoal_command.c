/*  shoal_command: a program run to its end, or killed at its time limit.

    A guest actor's worker calls this and waits, so the wait is a loop of short
    polls on the output pipes and looks at the process between them: the
    wait never outlasts the time limit by more than one poll.
*/
#include "shoal_command.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <limits.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

//  How often a wait without a pidfd (an older kernel) looks for the exit.
#define COMMAND_POLL_MS 5
//  The lowest priority a process can have (the highest niceness).
#define COMMAND_NICE_MAX 19
//  How much of a pipe one read takes.
#define COMMAND_READ_SIZE 16384
//  How much of stderr a timeout's error quotes.
#define COMMAND_QUOTE_MAX 512
#define COMMAND_CUT_MARK "..."

//  One output pipe of the command.
typedef struct {
    int fd;                     //  the read end, -1 once closed
    char *data;                 //  what was kept, NUL-terminated
    size_t size;                //  bytes kept
    bool truncated;             //  bytes past SHOAL_COMMAND_OUTPUT_MAX were dropped
} s_pipe_t;

static void
s_pipe_close(s_pipe_t *pipe)
{
    if (pipe->fd >= 0)
        close(pipe->fd);
    pipe->fd = -1;
}

//  Reads what PIPE holds now, without waiting; closes it at its end.
static void
s_pipe_read(s_pipe_t *pipe)
{
    char buffer[COMMAND_READ_SIZE];
    while (pipe->fd >= 0) {
        ssize_t got = read(pipe->fd, buffer, sizeof buffer);
        if (got > 0) {
            size_t room = SHOAL_COMMAND_OUTPUT_MAX - pipe->size;
            size_t keep = (size_t) got < room ? (size_t) got : room;
            if (keep) {
                pipe->data = (char *) shoal_realloc(pipe->data, pipe->size + keep + 1);
                memcpy(pipe->data + pipe->size, buffer, keep);
                pipe->size += keep;
                pipe->data[pipe->size] = 0;
            }
            if (keep < (size_t) got)
                pipe->truncated = true;
        }
        else
        if (got < 0 && errno == EINTR)
            continue;
        else
        if (got < 0 && errno == EAGAIN)
            return;
        else
            s_pipe_close(pipe);
    }
}

//  The text kept from PIPE, taken from it: never NULL.
static char *
s_pipe_text(s_pipe_t *pipe)
{
    char *text = pipe->data ? pipe->data : shoal_strdup("");
    pipe->data = NULL;
    pipe->size = 0;
    return text;
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

//  Starts ARGV with stdin from /dev/null, stdout on OUT and stderr on ERR,
//  in a process group of its own, with no signal blocked (shoald blocks
//  the signals it reads through a signalfd, and the command must hear
//  SIGTERM). posix_spawn, not fork: a fork copies the node's page tables
//  while holding its memory map, and the reactor's page faults wait on
//  that; posix_spawn shares the memory until the exec. Returns the pid, or
//  -1 with errno.
static pid_t
s_spawn(char *const argv[], int out, int err)
{
    sigset_t unblocked;
    sigemptyset(&unblocked);
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &unblocked);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    pid_t pid = -1;
    int spawned = posix_spawn(&pid, argv[0], &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (spawned != 0) {
        errno = spawned;
        return -1;
    }
    return pid;
}

int
shoal_command_run(char *const argv[], int64_t timeout_ms, shoal_command_priority_t priority,
                  shoal_command_result_t *result, char **error_p)
{
    memset(result, 0, sizeof *result);
    int out[2] = { -1, -1 };
    int err[2] = { -1, -1 };
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
        *error_p = zsys_sprintf("cannot run %s: no pipe: %s", argv[0], strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (err[i] >= 0)
                close(err[i]);
        }
        return -1;
    }
    pid_t pid = s_spawn(argv, out[1], err[1]);
    int spawn_errno = errno;
    close(out[1]);
    close(err[1]);
    s_pipe_t pipes[2] = { { .fd = out[0] }, { .fd = err[0] } };
    if (pid < 0) {
        s_pipe_close(&pipes[0]);
        s_pipe_close(&pipes[1]);
        *error_p = zsys_sprintf("cannot run %s: %s", argv[0], strerror(spawn_errno));
        return -1;
    }
    //  The group exists before posix_spawn returns: a kill of it cannot
    //  come first, nor can a child of the command escape the niceness (it
    //  is in the group when the group's is set, or inherits it).
    //  SCHED_IDLE is a thread's, not a group's: the command's children
    //  inherit it, but one it started before this line runs (a few
    //  microseconds after its exec) keeps the niceness alone. glibc's
    //  posix_spawn, which could set it before the exec, takes no policy
    //  but FIFO, RR and OTHER.
    struct sched_param param = { .sched_priority = 0 };
    if (priority.idle && sched_setscheduler(pid, SCHED_IDLE, &param) != 0)
        zsys_warning("%s runs without SCHED_IDLE: %s", argv[0], strerror(errno));
    if (priority.nice > 0) {
        errno = 0;
        int own = getpriority(PRIO_PROCESS, 0);
        int lower = errno == 0 && own + priority.nice < COMMAND_NICE_MAX ? own + priority.nice : COMMAND_NICE_MAX;
        if (setpriority(PRIO_PGRP, (id_t) pid, lower) != 0)
            zsys_warning("%s runs at the node's priority: niceness %d refused: %s", argv[0], lower,
                         strerror(errno));
    }
    for (int i = 0; i < 2; i++)
        fcntl(pipes[i].fd, F_SETFL, fcntl(pipes[i].fd, F_GETFL) | O_NONBLOCK);

    //  The wait wakes on output and on the exit itself (a pidfd turns
    //  readable then); without a pidfd it looks every COMMAND_POLL_MS.
    int exit_fd = (int) pidfd_open(pid, 0);
    int64_t deadline = zclock_mono() + timeout_ms;
    int status = 0;
    bool exited = false;
    while (!exited) {
        int64_t left = deadline - zclock_mono();
        if (left <= 0)
            break;
        struct pollfd fds[3];
        nfds_t count = 0;
        for (int i = 0; i < 2; i++)
            if (pipes[i].fd >= 0)
                fds[count++] = (struct pollfd) { .fd = pipes[i].fd, .events = POLLIN };
        if (exit_fd >= 0)
            fds[count++] = (struct pollfd) { .fd = exit_fd, .events = POLLIN };
        int wait_ms = exit_fd >= 0 || left < COMMAND_POLL_MS ? (int) (left < INT_MAX ? left : INT_MAX)
                                                             : COMMAND_POLL_MS;
        poll(fds, count, wait_ms);
        s_pipe_read(&pipes[0]);
        s_pipe_read(&pipes[1]);
        exited = waitpid(pid, &status, WNOHANG) == pid;
    }
    if (exit_fd >= 0)
        close(exit_fd);
    int rc = 0;
    if (!exited) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        s_pipe_read(&pipes[1]);
        char *quote = shoal_command_excerpt(pipes[1].data ? pipes[1].data : "", COMMAND_QUOTE_MAX);
        *error_p = zsys_sprintf("%s did not end within %" PRId64 " ms and was killed%s%s", argv[0], timeout_ms,
                                *quote ? "; its stderr: " : "", quote);
        free(quote);
        rc = -1;
    }
    else {
        //  What is left in the pipes came before the exit; a daemon the
        //  command left behind may keep them open, so nothing waits for
        //  their end.
        s_pipe_read(&pipes[0]);
        s_pipe_read(&pipes[1]);
        result->exit_code = s_exit_code(status);
        result->truncated = pipes[0].truncated || pipes[1].truncated;
        result->out = s_pipe_text(&pipes[0]);
        result->err = s_pipe_text(&pipes[1]);
    }
    for (int i = 0; i < 2; i++) {
        s_pipe_close(&pipes[i]);
        free(pipes[i].data);
    }
    return rc;
}

void
shoal_command_result_clear(shoal_command_result_t *result)
{
    free(result->out);
    free(result->err);
    memset(result, 0, sizeof *result);
}

char *
shoal_command_excerpt(const char *text, size_t max_bytes)
{
    while (*text && isspace((unsigned char) *text))
        text++;
    size_t length = strlen(text);
    while (length && isspace((unsigned char) text[length - 1]))
        length--;
    bool cut = length > max_bytes;
    size_t keep = cut ? max_bytes - (max_bytes < strlen(COMMAND_CUT_MARK) ? max_bytes : strlen(COMMAND_CUT_MARK))
                      : length;
    char *excerpt = (char *) zmalloc(keep + strlen(COMMAND_CUT_MARK) + 1);
    memcpy(excerpt, text, keep);
    //  One line: a log line or a reply message holds no line breaks.
    for (size_t i = 0; i < keep; i++)
        if (excerpt[i] == '\n' || excerpt[i] == '\r' || excerpt[i] == '\t')
            excerpt[i] = ' ';
    if (cut)
        strcpy(excerpt + keep, COMMAND_CUT_MARK);
    return excerpt;
}
