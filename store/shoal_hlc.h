/*  shoal_hlc: the node's hybrid logical clock.

    A stamp is (wall_ms, logic): the physical clock in milliseconds, and a
    counter that orders events within one millisecond or while the physical
    clock lags behind what the node has already seen. Stamps this clock issues
    only ever grow, whatever the physical clock does, and they stay close to
    physical time: now() takes the larger of the physical clock and the last
    stamp, observe() absorbs a peer's stamp so that the node's next events
    sort after what it has heard of. A peer whose clock is further ahead of
    ours than the configured bound is refused and not absorbed: adopting it
    would drag every later stamp of this node into the future with it.

    The order across nodes is (wall_ms, logic, node id); the node id is not
    part of the stamp, the caller pairs them.

    Restarts: the clock keeps a high-water mark in oplog_meta, a wall time
    every stamp it has issued lies below. It reserves ahead in steps of
    SHOAL_HLC_RESERVE_MS, so that one write covers a second of stamps, and a
    clock that reopens starts at the mark: it never issues a stamp again that
    it may have issued before, even if the physical clock was set back.

    The clock is not thread-safe: it belongs to the thread that owns the store.
*/
#ifndef SHOAL_HLC_H_INCLUDED
#define SHOAL_HLC_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>

#include "shoal_store.h"

//  How far past the current stamp's wall time one high-water write reaches.
#define SHOAL_HLC_RESERVE_MS 1000
//  Default bound on how far a peer's clock may run ahead of ours.
#define SHOAL_HLC_MAX_AHEAD_MS_DEFAULT 60000

typedef struct {
    uint64_t wall_ms;           //  physical part: milliseconds since the epoch
    uint32_t logic;             //  logical counter within wall_ms
} shoal_hlc_stamp_t;

//  A physical clock: milliseconds since the epoch. Tests substitute one that
//  they move by hand.
typedef uint64_t (shoal_hlc_clock_fn) (void *arg);

typedef struct _shoal_hlc_t shoal_hlc_t;

//  Opens the clock kept in STORE's oplog_meta. MAX_AHEAD_MS bounds a remote
//  clock's lead; CLOCK (with CLOCK_ARG) reads physical time, NULL for the
//  system's real-time clock. Returns NULL (after logging why) when the
//  high-water mark cannot be read or is corrupt.
shoal_hlc_t *shoal_hlc_new(shoal_store_t *store, uint64_t max_ahead_ms,
                           shoal_hlc_clock_fn *clock, void *clock_arg);

void shoal_hlc_destroy(shoal_hlc_t **self_p);

//  Stamps a local event: sets *STAMP to a stamp greater than every stamp
//  issued or observed before. Returns 0, or -1 when the high-water mark could
//  not be raised (the clock is then unchanged).
int shoal_hlc_now(shoal_hlc_t *self, shoal_hlc_stamp_t *stamp);

//  Absorbs a stamp received from a peer, so that later local stamps sort
//  after it. Returns 0, or -1 when REMOTE is more than the bound ahead of the
//  physical clock (it is not absorbed; shoal_hlc_error says by how much) or
//  the high-water mark could not be raised.
int shoal_hlc_observe(shoal_hlc_t *self, const shoal_hlc_stamp_t *remote);

//  The last stamp issued or observed.
shoal_hlc_stamp_t shoal_hlc_last(shoal_hlc_t *self);

//  The high-water mark: every stamp issued so far has a smaller wall time.
uint64_t shoal_hlc_high_water(shoal_hlc_t *self);

//  The physical clock's reading, as the clock sees it.
uint64_t shoal_hlc_physical(shoal_hlc_t *self);

//  The text of the last failure.
const char *shoal_hlc_error(shoal_hlc_t *self);

//  Orders two stamps: negative, zero or positive as A is before, equal to or
//  after B.
int shoal_hlc_compare(const shoal_hlc_stamp_t *a, const shoal_hlc_stamp_t *b);

#endif
