/*  shoal_oplog_recount: a dataset's counts recounted a slice at a time.

    DESIGN. shoal_oplog_repair_counts walks a dataset's entries and keys in
    one call, which holds a caller on the reactor for as long as the
    dataset is large. The recount here walks the same keys in steps of a
    bounded number, between which the log goes on being written:

      1. At its start it takes a snapshot of the store: the walk counts
         what the snapshot holds, so that an append between two steps
         neither counts twice nor goes uncounted, and the counts kept at
         that point are read from the same snapshot.
      2. Its steps count the dataset's entries (oplog_by_hlc) and then its
         live keys (kv), up to BUDGET keys each, on iterators that stay
         open between steps.
      3. Its last step compares what it counted with the counts the
         snapshot kept. Every write since the snapshot added what it
         changed to the counts (shoal_oplog_counts_add), so the counts
         right now are the kept ones plus those changes: the recount's
         correction (counted minus kept) is added to them, under the
         log's guard, through its batch. Counts that did not read as a
         pair were taken as zero by those writes, and are here too.
*/
#include "shoal_oplog_private.h"
#include "shoal_alloc.h"

//  The phases of a recount, in order.
typedef enum {
    S_RECOUNT_ENTRIES,          //  the dataset's keys in oplog_by_hlc
    S_RECOUNT_LIVE,             //  its keys in kv that are no tombstone
    S_RECOUNT_WRITE,            //  the correction written
    S_RECOUNT_DONE
} s_recount_phase_t;

struct _shoal_oplog_recount_t {
    shoal_oplog_t *oplog;       //  the log whose counts are mended (borrowed)
    char *dataset;
    shoal_store_t *snapshot;    //  what is counted (DESIGN 1)
    shoal_iter_t *iter;         //  the walk of the phase at work, NULL before its first key
    s_recount_phase_t phase;
    shoal_oplog_counts_t counted;   //  so far
};

shoal_oplog_recount_t *
shoal_oplog_recount_new(shoal_oplog_t *oplog, const char *dataset)
{
    shoal_oplog_recount_t *self = (shoal_oplog_recount_t *) zmalloc(sizeof *self);
    self->oplog = oplog;
    self->dataset = shoal_strdup(dataset);
    self->snapshot = shoal_store_snapshot(oplog->store);
    self->phase = S_RECOUNT_ENTRIES;
    return self;
}

void
shoal_oplog_recount_destroy(shoal_oplog_recount_t **self_p)
{
    shoal_oplog_recount_t *self = *self_p;
    if (self) {
        shoal_iter_destroy(&self->iter);
        shoal_store_destroy(&self->snapshot);
        free(self->dataset);
        free(self);
        *self_p = NULL;
    }
}

//  Counts up to BUDGET keys of the phase's family (*OVER at its end).
//  Returns the keys visited, or -1.
static int64_t
s_recount_walk(shoal_oplog_recount_t *self, size_t budget, bool *over)
{
    bool live = self->phase == S_RECOUNT_LIVE;
    const char *what = live ? "recount: kv" : "recount: entries";
    bool on_key;
    if (!self->iter) {
        shoal_key_t prefix;
        shoal_oplog_key_dataset(&prefix, self->dataset);
        self->iter = shoal_iter_prefix(self->snapshot, live ? SHOAL_CF_KV : SHOAL_CF_OPLOG_BY_HLC, &prefix);
        if (!self->iter)
            return shoal_oplog_fail_store(self->oplog, what);
        on_key = shoal_iter_first(self->iter);
    }
    else
        on_key = shoal_iter_next(self->iter);
    int64_t visited = 0;
    while (on_key) {
        visited++;
        if (!live)
            self->counted.entries++;
        else {
            //  As shoal_oplog_walk_live reads them: the tombstone flag only,
            //  bytes that are no record decoded in full for the error.
            size_t size;
            const uint8_t *value = shoal_iter_value(self->iter, &size);
            bool deleted;
            shoal_kv_record_t record;
            if (shoal_kv_record_deleted(value, size, &deleted) == 0)
                self->counted.live += deleted ? 0 : 1;
            else
            if (shoal_iter_record(self->iter, &shoal_kv_codec, &record))
                return shoal_oplog_fail_store(self->oplog, what);
            else {
                self->counted.live += record.deleted ? 0 : 1;
                shoal_kv_codec.clear(&record);
            }
        }
        //  The iterator stays on the last key counted: the next step goes on after it.
        if ((size_t) visited >= budget)
            return visited;
        on_key = shoal_iter_next(self->iter);
    }
    if (shoal_oplog_iter_status(self->oplog, self->iter, what))
        return -1;
    shoal_iter_destroy(&self->iter);
    *over = true;
    return visited;
}

//  The correction added to the counts as they are now (DESIGN 3).
static int
s_recount_write(shoal_oplog_recount_t *self, bool *written)
{
    shoal_oplog_t *oplog = self->oplog;
    shoal_oplog_counts_t kept, now;
    int kept_rc = shoal_oplog_counts_read(self->snapshot, self->dataset, &kept);
    if (kept_rc < 0)
        return shoal_oplog_fail_store(oplog, "recount: counts");
    if (kept_rc == 0 && kept.entries == self->counted.entries && kept.live == self->counted.live)
        return 0;
    shoal_oplog_guard_lock(oplog);
    int rc = shoal_oplog_counts_read(oplog->store, self->dataset, &now) < 0
           ? shoal_oplog_fail_store(oplog, "recount: counts") : 0;
    if (rc == 0) {
        now.entries = shoal_count_add(now.entries, (int64_t) (self->counted.entries - kept.entries));
        now.live = shoal_count_add(now.live, (int64_t) (self->counted.live - kept.live));
        shoal_oplog_counts_put(oplog->batch, self->dataset, &now);
        size_t writes = 0;
        rc = shoal_oplog_flush(oplog, 0, &writes, "repair: counts");
        *written = rc == 0;
    }
    shoal_oplog_guard_unlock(oplog);
    shoal_batch_clear(oplog->batch);
    if (rc)
        return -1;
    zsys_info("oplog: counts of \"%s\" recounted: %" PRIu64 " entries and %" PRIu64 " live keys where %" PRIu64
              " and %" PRIu64 " were kept%s", self->dataset, self->counted.entries, self->counted.live, kept.entries,
              kept.live, kept_rc ? " (unreadable)" : "");
    return 0;
}

int64_t
shoal_oplog_recount_step(shoal_oplog_recount_t *self, size_t budget, bool *done, bool *written)
{
    *done = false;
    *written = false;
    if (budget == 0)
        budget = 1;
    int64_t visited = 0;
    if (self->phase == S_RECOUNT_ENTRIES || self->phase == S_RECOUNT_LIVE) {
        bool over = false;
        visited = s_recount_walk(self, budget, &over);
        if (visited < 0)
            return -1;
        if (over)
            self->phase++;
        //  A walk that ended on its first look still took a step.
        return visited ? visited : 1;
    }
    if (self->phase == S_RECOUNT_WRITE) {
        if (s_recount_write(self, written))
            return -1;
        self->phase = S_RECOUNT_DONE;
        visited = 1;
    }
    *done = true;
    return visited;
}
