/*  shoal_fault: parsed once at start, read by every thread after. */
#include "shoal_fault.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <signal.h>

#define FAULT_MAX 8
#define FAULT_NAME_MAX 32

typedef struct {
    char side[FAULT_NAME_MAX];
    char step[FAULT_NAME_MAX];
    uint32_t round;             //  0: any round
    bool crash;                 //  else a stall, or a hold
    int64_t stall_ms;
    char hold[256];             //  a hold: the file whose existence holds the step ("": none)
    bool holding;               //  the hold held at its last look (logged on change)
    int fired;                  //  set once, atomically
} s_fault_t;

static const char *s_steps[] = {
    "admit", "round", "final", "receive", "commit-request", "commit", "start", "drop",
};
//  The loader's steps: a batch of a catch-up in bulk about to be written,
//  and a table file of one about to be ingested.
#define FAULT_LOADER_WRITE "write"
#define FAULT_LOADER_INGEST "ingest"
//  The locks' step: a peer's lock_sweep about to run.
#define FAULT_LOCKS_SWEEP "sweep"
//  The oplog's step: a step of the migration of a store of layout 1.
#define FAULT_OPLOG_MIGRATE "migrate"
//  The objects' step: file work (an add's chunk or commit, a read) about
//  to run on their worker.
#define FAULT_OBJECTS_IO "io"

static s_fault_t s_faults[FAULT_MAX];
static size_t s_fault_count;

static bool
s_step_known(const char *step)
{
    for (size_t i = 0; i < sizeof s_steps / sizeof s_steps[0]; i++)
        if (streq(step, s_steps[i]))
            return true;
    return false;
}

//  Parses one SIDE:STEP[@ROUND]:ACTION into FAULT. Returns 0 or -1.
static int
s_parse_one(char *text, s_fault_t *fault, char **error_p)
{
    char *side = strtok(text, ":");
    char *step = strtok(NULL, ":");
    char *action = strtok(NULL, ":");
    if (!side || !step || !action) {
        *error_p = zsys_sprintf("SHOAL_FAULT: '%s' is not SIDE:STEP[@ROUND]:ACTION", text);
        return -1;
    }
    char *at = strchr(step, '@');
    if (at) {
        *at = '\0';
        fault->round = (uint32_t) strtoul(at + 1, NULL, 10);
    }
    if (!streq(side, "source") && !streq(side, "target") && !streq(side, "loader") && !streq(side, "locks")
    &&  !streq(side, "oplog") && !streq(side, "objects")) {
        *error_p = zsys_sprintf("SHOAL_FAULT: side '%s' is not source, target, loader, locks, oplog or objects",
                                side);
        return -1;
    }
    if (streq(side, "locks") || streq(side, "oplog") || streq(side, "objects")) {
        const char *hold_step = streq(side, "locks") ? FAULT_LOCKS_SWEEP
                              : streq(side, "oplog") ? FAULT_OPLOG_MIGRATE : FAULT_OBJECTS_IO;
        if (!streq(step, hold_step) || strncmp(action, "hold=", 5) != 0 || !action[5]
        ||  strlen(action + 5) >= sizeof fault->hold) {
            *error_p = zsys_sprintf("SHOAL_FAULT: the %s fault is %s:%s:hold=PATH, not %s:%s", side, side,
                                    hold_step, step, action);
            return -1;
        }
        snprintf(fault->hold, sizeof fault->hold, "%s", action + 5);
        snprintf(fault->side, sizeof fault->side, "%s", side);
        snprintf(fault->step, sizeof fault->step, "%s", step);
        return 0;
    }
    if (streq(side, "loader") && !streq(step, FAULT_LOADER_WRITE) && !streq(step, FAULT_LOADER_INGEST)) {
        *error_p = zsys_sprintf("SHOAL_FAULT: '%s' is not a loader step (%s, %s)", step,
                                FAULT_LOADER_WRITE, FAULT_LOADER_INGEST);
        return -1;
    }
    if (!streq(side, "loader") && !s_step_known(step)) {
        *error_p = zsys_sprintf("SHOAL_FAULT: '%s' is not a move step (admit, round, final, receive, "
                                "commit-request, commit, start, drop)", step);
        return -1;
    }
    if (streq(action, "crash"))
        fault->crash = true;
    else
    if (strncmp(action, "stall=", 6) == 0 && atoll(action + 6) > 0)
        fault->stall_ms = atoll(action + 6);
    else {
        *error_p = zsys_sprintf("SHOAL_FAULT: action '%s' is not crash or stall=MS", action);
        return -1;
    }
    snprintf(fault->side, sizeof fault->side, "%s", side);
    snprintf(fault->step, sizeof fault->step, "%s", step);
    return 0;
}

int
shoal_fault_init(char **error_p)
{
    s_fault_count = 0;
    const char *spec = getenv("SHOAL_FAULT");
    if (!spec || !*spec)
        return 0;
    char *copy = shoal_strdup(spec);
    char *save = NULL;
    int rc = 0;
    for (char *item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
        if (s_fault_count == FAULT_MAX) {
            *error_p = zsys_sprintf("SHOAL_FAULT: more than %d faults", FAULT_MAX);
            rc = -1;
            break;
        }
        s_fault_t *fault = &s_faults[s_fault_count];
        memset(fault, 0, sizeof *fault);
        rc = s_parse_one(item, fault, error_p);
        if (rc == 0) {
            zsys_warning("fault: armed %s:%s%s%s", fault->side, fault->step,
                         fault->crash ? " crash" : *fault->hold ? " hold" : " stall", fault->round ? " (one round)" : "");
            s_fault_count++;
        }
    }
    free(copy);
    return rc;
}

void
shoal_fault_point(const char *side, const char *step, uint32_t round)
{
    for (size_t i = 0; i < s_fault_count; i++) {
        s_fault_t *fault = &s_faults[i];
        if (!streq(fault->side, side) || !streq(fault->step, step) || (fault->round && fault->round != round)
        ||  *fault->hold)
            continue;
        if (__atomic_exchange_n(&fault->fired, 1, __ATOMIC_ACQ_REL))
            continue;
        if (fault->crash) {
            zsys_warning("fault: crash at %s:%s (round %u)", side, step, round);
            fflush(NULL);
            raise(SIGKILL);
        }
        zsys_warning("fault: stall at %s:%s (round %u) for %" PRId64 " ms", side, step, round,
                     fault->stall_ms);
        zclock_sleep((int) fault->stall_ms);
        zsys_warning("fault: stall at %s:%s ends", side, step);
        return;     //  one fault per hit: a second of the same step waits for the next
    }
}

bool
shoal_fault_held(const char *side, const char *step)
{
    for (size_t i = 0; i < s_fault_count; i++) {
        s_fault_t *fault = &s_faults[i];
        if (!*fault->hold || !streq(fault->side, side) || !streq(fault->step, step))
            continue;
        bool holds = zsys_file_exists(fault->hold);
        if (holds != fault->holding)
            zsys_warning("fault: hold at %s:%s %s (%s)", side, step, holds ? "holds" : "ends", fault->hold);
        fault->holding = holds;
        return holds;
    }
    return false;
}
