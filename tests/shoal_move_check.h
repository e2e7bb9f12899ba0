/*  shoal_move_check: what must hold after a move, whatever happened during
    it, checked against real nodes of a shoal_cluster.

    Settled means: exactly one running node lists the claim, running (or
    paused, when asked so); its guest process runs (stopped, when
    paused); no other node has a guest directory for it; every running
    node's registry names the owner; every node's claim count equals its
    listing; no node holds a move record. Guest processes left
    by a test are ended by shoal_move_check_cleanup, found by the pid files
    under the test's directory or by a command line naming a directory
    under it (the test's own guests, no other process).
*/
#ifndef SHOAL_MOVE_CHECK_H_INCLUDED
#define SHOAL_MOVE_CHECK_H_INCLUDED

#include "shoal_cluster.h"

//  Waits up to TIMEOUT_MS until claim ID is settled on node OWNER (0: on
//  whichever one node holds it; *OWNER_P, when not NULL, receives it).
//  Returns 0, or -1 with shoal_move_check_error saying what was last seen.
int shoal_move_check_settled(shoal_cluster_t *cluster, const char *id, int owner, int timeout_ms);
int shoal_move_check_settled_any(shoal_cluster_t *cluster, const char *id, int timeout_ms, int *owner_p);
//  The same for a paused claim: listed paused, its guest's process stopped.
int shoal_move_check_settled_paused(shoal_cluster_t *cluster, const char *id, int owner, int timeout_ms);

//  Runs `shoal-guest verify` on claim ID's image on node INDEX (its guest
//  stopped). Returns 0, or -1 with the error.
int shoal_move_check_verify(shoal_cluster_t *cluster, int index, const char *id);

//  Writes every load page of claim ID's memory on node INDEX once, stamped
//  as the guest's load writes them, with its guest stopped, then starts it
//  again. A page still as the image was created (zeros) is skipped by a
//  move's baseline: a guest prefilled so moves all of its memory. Returns 0
//  or -1 with the error.
int shoal_move_check_prefill(shoal_cluster_t *cluster, int index, const char *id);

//  The throttle (percent of its writes held back) of claim ID's guest on
//  node INDEX, read from its image. Returns 0, or -1 with the error.
int shoal_move_check_throttle(shoal_cluster_t *cluster, int index, const char *id, uint32_t *percent);

//  Moves claim ID from node FROM to node TO with a downtime budget of
//  BUDGET_MS, through a client of its own, and waits up to TIMEOUT_MS for
//  the move to end. Returns 0 when it ended done, or -1 with
//  shoal_move_check_error saying how it ended (or what was refused).
int shoal_move_check_move(shoal_cluster_t *cluster, int from, const char *id, int to, int budget_ms,
                          int timeout_ms);

//  What claim ID's guest on node INDEX has done so far, read from its
//  image: the load's writes and its last tick (wall ms). A guest that does
//  not run changes neither. Returns 0, or -1 with the error.
int shoal_move_check_guest_clock(shoal_cluster_t *cluster, int index, const char *id, uint64_t *writes,
                                 uint64_t *tick_ms);

//  Waits up to TIMEOUT_MS until claim ID's guest on node INDEX has written
//  and ticked past WRITES and TICK_MS (it runs). Returns 0, or -1 with the error.
int shoal_move_check_guest_advances(shoal_cluster_t *cluster, int index, const char *id, uint64_t writes,
                                    uint64_t tick_ms, int timeout_ms);

const char *shoal_move_check_error(void);

//  Ends every guest process started under the test's directory.
void shoal_move_check_cleanup(void);

#endif
