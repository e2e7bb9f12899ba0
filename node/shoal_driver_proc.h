/*  shoal_driver_proc: guests as shoal-guest processes.

    Each guest lives in DATA/guests/ID (see shoal_image.h). Start forks and
    execs `shoal-guest run DIR` in a session of its own, so that the guest
    outlives a restart of the node; its output goes to DIR/guest.log. The
    guest's pid file (locked while it runs) says which process it is; alive
    checks that the pid runs and that /proc/PID/cmdline is shoal-guest for
    this very directory, so a recycled pid is never taken for the guest.
    Stop is SIGTERM then, after the stop timeout, SIGKILL; pause and resume
    are SIGSTOP and SIGCONT.
*/
#ifndef SHOAL_DRIVER_PROC_H_INCLUDED
#define SHOAL_DRIVER_PROC_H_INCLUDED

#include "shoal_driver.h"

//  A driver keeping guests under GUESTS_DIR (created if missing), their
//  memory files under MEMORY_DIR (created if missing; NULL or "": in the
//  guests' directories; see shoal_image_create_in), and running PROGRAM
//  (the shoal-guest executable); STOP_TIMEOUT_MS (borrowed, so a reload
//  takes effect) bounds a stop. Returns NULL with *ERROR_P on failure.
shoal_driver_t *shoal_driver_proc_new(const char *guests_dir, const char *memory_dir, const char *program,
                                      const int64_t *stop_timeout_ms, char **error_p);

//  The shoal-guest beside the running executable, for when none is
//  configured. A new string, the caller's.
char *shoal_driver_proc_default_program(void);

#endif
