/*  shoal_fsck: the consistency sweep of one node (seed 001's "fsck").

    A sweep is a run of checks, one per store or module that keeps data
    here: each looks at what it owns and reports findings (shoal_finding.h),
    each naming a key or a path and what is wrong with it. Modules plug
    their own check in with shoal_fsck_register; the node registers the
    built-in ones (shoal_fsck_checks.h).

    DESIGN

    1. One point in time. A run reads a snapshot of the store
       (shoal_store_snapshot), taken when it starts: the families it walks
       a slice at a time, across many ticks, agree with each other as one
       batch left them, whatever the node writes meanwhile. What lives
       outside the store (files, moves in flight) is compared against the
       live node before it is named, so that what changed since the
       snapshot is not called wrong.
    2. Slices. The reactor runs a run a slice at a time from its tick: a
       slice looks at fsck/slice_keys keys. A periodic run takes one slice
       per tick; a run an operator waits for takes slices for up to
       FSCK_OPERATOR_MS of each tick. No slice waits on anything but the
       store's reads, so requests and peers are served between them.
    3. Look, then mend. No check changes anything while it looks. Once
       every check is over, a run that repairs asks each check to mend its
       repairable findings, on the reactor, through the live modules (never
       the snapshot): each repair checks again that what it mends is still
       wrong, and says what it did; a finding no repair mended stays for
       an operator, and makes shoalctl fsck exit non-zero. A repair that
       walks the live store (the oplog's rebuild of its indexes) decides in
       its repair and walks in its repair_step, a slice per tick as a look
       does, so that no slice holds the reactor long. A repair whose
       work blocks on files (removing a guest directory and its images)
       decides on the reactor and hands the work to the sweep's worker
       thread (shoal_fsck_defer); its result comes back as an event the
       tick reads, and the run is over once every such work is done.
    4. One run at a time. An operator's start joins a run in progress
       that repairs alike; a repair takes the place of a periodic run
       (which only reports); otherwise a start is refused with 409 until
       the run in progress is over.
*/
#ifndef SHOAL_FSCK_H_INCLUDED
#define SHOAL_FSCK_H_INCLUDED

#include "shoal_auth.h"
#include "shoal_config.h"
#include "shoal_finding.h"
#include "shoal_proto.h"
#include "shoal_store.h"

//  Told by a check's repair of what it did for the finding at (WHERE, KEY).
typedef void (shoal_fsck_repaired_fn) (const char *where, const char *key, const char *action, void *arg);

//  One finding of a run, as a check's repair sees it.
typedef struct {
    const char *where;
    const char *key;
    const char *problem;
    bool repairable;
} shoal_fsck_item_t;

//  One check of the sweep.
typedef struct {
    const char *name;           //  names its findings ("oplog", "claims", ...)
    //  Starts a look at SNAPSHOT (borrowed until end). ARG is the one given
    //  at registration; REPAIR says whether the run mends (a check whose
    //  look and mend are one walk of live data mends as it looks). Returns
    //  the check's state, or NULL with *ERROR_P (the caller frees it) when
    //  it cannot start.
    void *(*begin) (void *arg, shoal_store_t *snapshot, bool repair, char **error_p);
    //  Looks at up to BUDGET keys or files, telling FN of each finding;
    //  sets *DONE when it has seen all. Returns how many it looked at, or
    //  -1 with *ERROR_P set (the caller frees it): the check is then over.
    int64_t (*step) (void *state, size_t budget, bool *done, shoal_finding_fn *fn, void *fn_arg, char **error_p);
    //  Mends what is safe among ITEMS (COUNT, this check's findings), once
    //  every check has looked, on the reactor, through the live node (STATE
    //  is the look's: what it kept of each finding, and the snapshot is
    //  still there); it looks again, live, before it mends, and tells
    //  REPAIRED of each finding it mended. May be NULL (nothing this check
    //  finds is safe to mend). Returns 0, or -1 with *ERROR_P set when a
    //  repair failed.
    int (*repair) (void *state, const shoal_fsck_item_t *items, size_t count, shoal_fsck_repaired_fn *repaired,
                   void *repaired_arg, char **error_p);
    //  Frees the state (at the run's end, or when it is dropped).
    void (*end) (void **state_p);
    //  A repair too long for one slice (a rebuild from a walk of the live
    //  store) does its work here, after every check's repair ran: up to
    //  BUDGET keys a call, one call a slice, until it sets *DONE, telling
    //  REPAIRED of what it mended as repair does. May be NULL. Returns the
    //  keys it visited, or -1 with *ERROR_P set.
    int64_t (*repair_step) (void *state, size_t budget, bool *done, shoal_fsck_repaired_fn *repaired,
                            void *repaired_arg, char **error_p);
} shoal_fsck_check_t;

typedef struct _shoal_fsck_t shoal_fsck_t;

//  Blocking work of a repair, run on the sweep's worker thread: touches
//  files under PATH, nothing any other thread holds. Returns 0, or -1 with
//  *ERROR_P (the caller frees it).
typedef int (shoal_fsck_work_fn) (const char *path, char **error_p);

//  From a check's repair, with the REPAIRED_ARG it was given: runs FN on
//  PATH on the sweep's worker; once it is done, on the reactor, the finding
//  at (WHERE, KEY) is told ACTION, or the run's error names what failed.
//  Every string is copied.
void shoal_fsck_defer(void *repaired_arg, const char *where, const char *key, const char *action,
                      shoal_fsck_work_fn *fn, const char *path);

//  The sweep of the node NODE_ID whose store is STORE, with the node's live
//  SETTINGS (all borrowed).
shoal_fsck_t *shoal_fsck_new(const shoal_settings_t *settings, const char *node_id, shoal_store_t *store);
void shoal_fsck_destroy(shoal_fsck_t **self_p);

//  Adds CHECK (borrowed, static) with ARG to every run from now on, after
//  those registered before it.
void shoal_fsck_register(shoal_fsck_t *self, const shoal_fsck_check_t *check, void *arg);

bool shoal_fsck_handles(shoal_msg_type_t type);

//  Answers an fsck REQUEST of CALLER (operators only).
shoal_envelope_t *shoal_fsck_handle(shoal_fsck_t *self, const shoal_envelope_t *request,
                                    const shoal_caller_t *caller);

//  The reactor's tick: a slice of the run in progress, or a periodic run's
//  start when fsck/interval_s has passed since the last.
void shoal_fsck_tick(shoal_fsck_t *self);

//  Runs a whole sweep at once, REPAIR as asked, slice after slice, without
//  a reactor (a program that holds the store, a benchmark). REPORT receives
//  what it found (cleared with shoal_msg_fsck_report_codec.clear). Returns
//  0, or -1 when a run is in progress.
int shoal_fsck_run(shoal_fsck_t *self, bool repair, shoal_msg_fsck_report_t *report);

#endif
