/*  shoal_command: runs a program to its end within a time limit.

    The exec driver asks an external manager for everything it does, from
    a worker of the guest actor, which must not hang on it. A command runs
    in a process group of its own with stdin from /dev/null; its stdout and
    stderr are read through pipes, each kept up to SHOAL_COMMAND_OUTPUT_MAX
    bytes. Past the time limit the whole group is killed (SIGKILL) and
    reaped, so a manager stuck in a child of its own ends too.

    A command has ended when its own process exits, not when its pipes
    close: a manager may leave a daemon behind (the VMM it started) that
    still holds them.
*/
#ifndef SHOAL_COMMAND_H_INCLUDED
#define SHOAL_COMMAND_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  Most bytes of each of stdout and stderr kept; the rest is read and dropped.
#define SHOAL_COMMAND_OUTPUT_MAX (1024 * 1024)

//  How a command ended. Strings are owned; shoal_command_result_clear frees them.
typedef struct {
    int exit_code;              //  its exit status, or 128 + the signal that ended it
    char *out;                  //  its stdout, NUL-terminated (never NULL once run)
    char *err;                  //  its stderr, NUL-terminated (never NULL once run)
    bool truncated;             //  one of them passed SHOAL_COMMAND_OUTPUT_MAX
} shoal_command_result_t;

//  How much less CPU a command may take than the node that runs it.
typedef struct {
    int nice;                   //  steps of niceness below the calling thread (0: none; at most 19)
    bool idle;                  //  SCHED_IDLE: it runs only on a core nothing else wants
} shoal_command_priority_t;

//  Runs ARGV (NULL-terminated; ARGV[0] is a path) with the node's signals
//  unblocked, its process group at PRIORITY (a change the system refuses
//  is logged and the command runs all the same), and waits for it at most
//  TIMEOUT_MS. Returns 0 once it exited, whatever its exit code, with
//  RESULT filled; or -1 with *ERROR_P (the caller frees) when it could not
//  be started or did not end in time (it is killed then, and the error
//  quotes what it wrote to stderr so far).
int shoal_command_run(char *const argv[], int64_t timeout_ms, shoal_command_priority_t priority,
                      shoal_command_result_t *result, char **error_p);

void shoal_command_result_clear(shoal_command_result_t *result);

//  TEXT with surrounding white space removed, at most MAX_BYTES of it (a
//  cut is marked with "..."): a command's output fit for one log line or
//  reply message. A new string, the caller's.
char *shoal_command_excerpt(const char *text, size_t max_bytes);

#endif
