/*  shoal_hlc: the hybrid logical clock that shoal_hlc.h describes.

    The high-water mark is the key ("hlc") in oplog_meta, its value the tuple
    (u64 wall_ms), encoded with shoal_key like every other meta value. The
    invariant is: every stamp issued has wall_ms below the stored mark. A
    stamp that would reach the mark first raises it by SHOAL_HLC_RESERVE_MS
    with a synced write, so a crash right after cannot lose it; the clock only
    moves once that write has succeeded. On open the clock starts at (mark, 0),
    which every earlier stamp is below.

    The logical counter is 32 bits (as in OplogEntry). Should it ever run out
    within one millisecond, the clock moves to the next millisecond instead:
    stamps then run slightly ahead of physical time, which is what the clock
    does anyway while the physical clock lags.
*/
#include "shoal_hlc.h"

#include <czmq.h>
#include <inttypes.h>
#include <time.h>

//  The oplog_meta key that holds the high-water mark.
#define HLC_META_NAME "hlc"
//  Milliseconds in a second, nanoseconds in a millisecond.
#define HLC_MS_PER_S 1000
#define HLC_NS_PER_MS 1000000

struct _shoal_hlc_t {
    shoal_store_t *store;           //  where the high-water mark lives (borrowed)
    uint64_t max_ahead_ms;          //  bound on a remote clock's lead over ours
    shoal_hlc_clock_fn *clock;      //  physical time source
    void *clock_arg;                //  its argument
    shoal_hlc_stamp_t last;         //  the last stamp issued or observed
    uint64_t high_water;            //  every issued wall_ms is below this (stored)
    char *error;                    //  text of the last failure; NULL before any
};

//  The system's real-time clock in milliseconds.
static uint64_t
s_clock_real(void *arg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t) ts.tv_sec * HLC_MS_PER_S + (uint64_t) ts.tv_nsec / HLC_NS_PER_MS;
}

static int
s_hlc_fail(shoal_hlc_t *self, const char *format, ...) CHECK_PRINTF(2);

//  Keeps a printf-style message as the clock's last error. Returns -1.
static int
s_hlc_fail(shoal_hlc_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (text) {
        zstr_free(&self->error);
        self->error = text;
    }
    return -1;
}

static void
s_meta_key(shoal_key_t *key)
{
    shoal_key_init(key);
    shoal_key_add_str(key, HLC_META_NAME);
}

//  Reads the stored high-water mark into self->high_water (0 when none).
static int
s_hlc_load(shoal_hlc_t *self)
{
    shoal_key_t key;
    s_meta_key(&key);
    uint8_t *value;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_META, &key, &value, &size))
        return s_hlc_fail(self, "cannot read the clock's high-water mark: %s",
                          shoal_store_error(self->store));
    self->high_water = 0;
    if (!value)
        return 0;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    int rc = 0;
    if (shoal_key_read_u64(&reader, &self->high_water) || !shoal_key_reader_done(&reader)) {
        char *text = shoal_key_format(value, size);
        rc = s_hlc_fail(self, "oplog_meta (\"%s\"): value %s is not a (wall_ms) tuple",
                        HLC_META_NAME, text ? text : "(?)");
        free(text);
    }
    free(value);
    return rc;
}

//  Makes sure WALL_MS lies below the stored high-water mark, raising the mark
//  (one synced write) when it does not.
static int
s_hlc_reserve(shoal_hlc_t *self, uint64_t wall_ms)
{
    if (wall_ms < self->high_water)
        return 0;
    uint64_t high_water = wall_ms + SHOAL_HLC_RESERVE_MS;
    shoal_key_t key, value;
    s_meta_key(&key);
    shoal_key_init(&value);
    shoal_key_add_u64(&value, high_water);
    if (shoal_store_put(self->store, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size, true))
        return s_hlc_fail(self, "cannot raise the clock's high-water mark: %s",
                          shoal_store_error(self->store));
    self->high_water = high_water;
    return 0;
}

shoal_hlc_t *
shoal_hlc_new(shoal_store_t *store, uint64_t max_ahead_ms,
              shoal_hlc_clock_fn *clock, void *clock_arg)
{
    assert(store);
    shoal_hlc_t *self = (shoal_hlc_t *) zmalloc(sizeof(shoal_hlc_t));
    self->store = store;
    self->max_ahead_ms = max_ahead_ms;
    self->clock = clock ? clock : s_clock_real;
    self->clock_arg = clock_arg;
    if (s_hlc_load(self)) {
        zsys_error("hlc: %s", self->error);
        shoal_hlc_destroy(&self);
        return NULL;
    }
    self->last.wall_ms = self->high_water;
    self->last.logic = 0;
    return self;
}

void
shoal_hlc_destroy(shoal_hlc_t **self_p)
{
    assert(self_p);
    shoal_hlc_t *self = *self_p;
    if (!self)
        return;
    zstr_free(&self->error);
    free(self);
    *self_p = NULL;
}

//  The stamp right after STAMP within its millisecond, or the first of the
//  next one when the counter is spent.
static shoal_hlc_stamp_t
s_stamp_next(shoal_hlc_stamp_t stamp)
{
    if (stamp.logic == UINT32_MAX) {
        stamp.wall_ms++;
        stamp.logic = 0;
    }
    else
        stamp.logic++;
    return stamp;
}

//  Adopts NEXT as the last stamp once the high-water mark covers it.
static int
s_hlc_advance(shoal_hlc_t *self, shoal_hlc_stamp_t next)
{
    if (s_hlc_reserve(self, next.wall_ms))
        return -1;
    self->last = next;
    return 0;
}

int
shoal_hlc_now(shoal_hlc_t *self, shoal_hlc_stamp_t *stamp)
{
    uint64_t physical = self->clock(self->clock_arg);
    shoal_hlc_stamp_t next;
    if (physical > self->last.wall_ms) {
        next.wall_ms = physical;
        next.logic = 0;
    }
    else
        next = s_stamp_next(self->last);
    if (s_hlc_advance(self, next))
        return -1;
    *stamp = next;
    return 0;
}

int
shoal_hlc_observe(shoal_hlc_t *self, const shoal_hlc_stamp_t *remote)
{
    uint64_t physical = self->clock(self->clock_arg);
    if (remote->wall_ms > physical && remote->wall_ms - physical > self->max_ahead_ms)
        return s_hlc_fail(self, "remote clock %" PRIu64 ".%" PRIu32 " is %" PRIu64
                          " ms ahead of ours, more than the %" PRIu64 " ms allowed",
                          remote->wall_ms, remote->logic, remote->wall_ms - physical,
                          self->max_ahead_ms);
    //  The textbook HLC receive rule: the largest of the three wall times,
    //  with the counter one past the largest counter seen at that wall time.
    shoal_hlc_stamp_t next;
    uint64_t wall = physical;
    if (self->last.wall_ms > wall)
        wall = self->last.wall_ms;
    if (remote->wall_ms > wall)
        wall = remote->wall_ms;
    if (wall == self->last.wall_ms && wall == remote->wall_ms) {
        shoal_hlc_stamp_t larger = self->last.logic >= remote->logic ? self->last : *remote;
        next = s_stamp_next(larger);
    }
    else
    if (wall == self->last.wall_ms)
        next = s_stamp_next(self->last);
    else
    if (wall == remote->wall_ms)
        next = s_stamp_next(*remote);
    else {
        next.wall_ms = wall;
        next.logic = 0;
    }
    return s_hlc_advance(self, next);
}

shoal_hlc_stamp_t
shoal_hlc_last(shoal_hlc_t *self)
{
    return self->last;
}

uint64_t
shoal_hlc_high_water(shoal_hlc_t *self)
{
    return self->high_water;
}

uint64_t
shoal_hlc_physical(shoal_hlc_t *self)
{
    return self->clock(self->clock_arg);
}

const char *
shoal_hlc_error(shoal_hlc_t *self)
{
    return self->error ? self->error : "";
}

int
shoal_hlc_compare(const shoal_hlc_stamp_t *a, const shoal_hlc_stamp_t *b)
{
    if (a->wall_ms != b->wall_ms)
        return a->wall_ms < b->wall_ms ? -1 : 1;
    if (a->logic != b->logic)
        return a->logic < b->logic ? -1 : 1;
    return 0;
}
