/*  shoal_fault: crashes and stalls at named steps of a move or of a bulk
    catch-up, for tests.

    SHOAL_FAULT (environment, read once) lists faults separated by commas,
    each SIDE:STEP[@ROUND]:ACTION, where SIDE is source or target (a move's
    sides) and STEP one of the move's steps (admit, round, final, receive,
    commit-request, commit, start, drop), or SIDE is loader and STEP write
    (a batch of a catch-up in bulk about to be written; ROUND counts the
    batches from 1) or ingest (a table file of a batch about to be
    ingested; ROUND counts the files from 1, four a batch: kv, then the
    log's families), ROUND limits a fault to that round, and
    ACTION is crash (the process kills itself with SIGKILL, as kill -9
    would) or stall=MS (the thread that reached the step sleeps MS ms, time
    for a test to cut a link). Each fault fires once. Every hit is logged
    first ("fault: crash at target:commit"), so that a test can wait for it.

    SIDE locks, STEP sweep, ACTION hold=PATH: while the file PATH exists,
    this node answers each peer's lock_sweep "not yet" (its sweep of a
    restarted peer's locks waits), so that a test opens and closes the
    window in which that peer is still sweeping by creating and removing a
    file, not by timing. It holds as often as it is reached; the first hit
    of each hold and its end are logged ("fault: hold at locks:sweep").
    SIDE oplog, STEP migrate, ACTION hold=PATH: while the file PATH exists,
    the migration of a store of layout 1 makes no step after its first, so
    that a test looks at the node in the mixed state as long as it needs.

    SIDE objects, STEP io, ACTION hold=PATH: while PATH exists, the
    objects' workers hold each piece of file work (an add's chunk or commit,
    a read, the hash of an instance an open or a replicate takes) before it
    starts, so that a test sees what the reactor answers
    while file work is under way, by a file, not by timing.

    A node without SHOAL_FAULT pays one branch per step.
*/
#ifndef SHOAL_FAULT_H_INCLUDED
#define SHOAL_FAULT_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

//  Parses SHOAL_FAULT. Returns 0, or -1 with *ERROR_P (the caller frees)
//  naming what is wrong with it. Call once, before any thread reaches a step.
int shoal_fault_init(char **error_p);

//  Fires the fault set for SIDE ("source" or "target") at STEP in ROUND (0
//  outside the rounds), if any.
void shoal_fault_point(const char *side, const char *step, uint32_t round);

//  Whether a hold=PATH fault set for SIDE at STEP holds now (PATH exists).
bool shoal_fault_held(const char *side, const char *step);

#endif
