/*  shoal_driver_exec: guests run by an external VM manager.

    The manager is a program (drivers/exec_manager) that keeps its VMs
    itself, named by claim id, as cocoon does. The node runs it once per
    operation and reads its exit code: 0 is success, anything else a
    failure whose stderr is the reason. The contract:

        MANAGER vm create ID --memory BYTES --disk BYTES
        MANAGER vm start ID
        MANAGER vm pause ID
        MANAGER vm resume ID
        MANAGER vm stop ID
        MANAGER vm rm --force ID
        MANAGER vm inspect ID --output json
            prints an object whose "state" is the VM's state: "running"
            and "paused" are alive, anything else is not; an inspect that
            fails says the VM is gone, one that does not end in time (or
            prints no state) says nothing, and the death watch waits
        MANAGER vm migrate capture ID --dir DIR --round N [--final] --output json
            writes round N (1: the baseline) into DIR and lists its files;
            --final: the last round, the guest paused
        MANAGER vm migrate receive ID --dir DIR --output json
            makes VM ID, paused, from the rounds in DIR and lists the files
            it read
        MANAGER vm migrate abort ID
            ends the series: its files are gone, a paused VM runs again

    A list of files is a JSON object {"files": [...]} (or the bare array),
    each file a path relative to DIR, as a string or as an object
    {"path": "...", "size": BYTES}. The files are the manager's: the node
    reads none of them, it only checks that a capture's files are in DIR
    with the sizes listed, and moves them.

    Where a VM's memory lives is the manager's own choice: guest/memory_dir
    (the proc driver's memory directory) is not passed to it.

    Every call is bounded by drivers/exec_timeout_ms (capture and receive by
    drivers/exec_migrate_timeout_ms); a manager that does not end by then is
    killed with its children and the operation fails, saying so.

    The manager runs at a lower CPU priority than the node (drivers/exec_nice
    steps of niceness below it, 10 by default; its children inherit it): a manager is
    a shell or a program doing the slow half of a VM's life, while the node's
    reactor answers probes and status in a fraction of a millisecond. On two
    cores, twenty managers at the node's own priority put its status p99
    several times above idle (bench_claims, busy phase).
    drivers/exec_sched = idle puts it under SCHED_IDLE as well: it then runs
    only on a core that nothing else of the machine wants, so a node's
    thread that wakes takes the core from it at once, but a machine kept
    busy by anything else (its own guests among them) can starve it past
    drivers/exec_timeout_ms. The policy is set on the manager's process
    right after it started (shoal_command.h): a child it starts within those
    microseconds runs at the niceness alone.
*/
#ifndef SHOAL_DRIVER_EXEC_H_INCLUDED
#define SHOAL_DRIVER_EXEC_H_INCLUDED

#include "shoal_driver.h"

//  A driver running MANAGER (an executable path). TIMEOUT_MS,
//  MIGRATE_TIMEOUT_MS, NICE and IDLE are borrowed, so that a reload takes
//  effect: the limits of lifecycle calls and of capture and receive, the
//  manager's niceness, and whether it runs under SCHED_IDLE (nonzero).
//  Returns NULL with *ERROR_P (the caller frees) when MANAGER cannot be run.
shoal_driver_t *shoal_driver_exec_new(const char *manager, const int64_t *timeout_ms,
                                      const int64_t *migrate_timeout_ms, const int64_t *nice,
                                      const int64_t *idle, char **error_p);

//  Reads the list of files in TEXT (a manager's JSON output) into *FILES.
//  When DIR is not NULL, each file must be a regular file under DIR with the
//  size listed (a size left out is taken from the file). Returns 0, or -1
//  with *ERROR_P naming what was wrong (FILES is then empty).
int shoal_driver_exec_files_parse(const char *text, const char *dir, shoal_driver_files_t *files,
                                  char **error_p);

#endif
