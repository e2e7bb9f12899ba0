/*  shoal_oplog_kv: the materialised state of the oplog's datasets (kv),
    for the oplog that shoal_oplog.h describes (design note:
    shoal_oplog.c).

    A key's state is its winning entry: the greatest by (epoch, stamp,
    node, hash), a delete leaving a tombstone so that an older put arriving
    later loses. Appends decide it here (shoal_oplog_kv_apply), a snapshot's
    records merge by the same order, and every change raises the dataset's
    kv generation, by which a bulk load on another thread knows whether
    what it read still holds.

    Tombstones are collected (shoal_oplog_kv_collect) below a cutoff the
    caller vouches for: sync passes the stamp every tracked peer has
    confirmed, a step of bounded length at a time.
*/
#include "shoal_oplog_private.h"

// ---------------------------------------------------------------------------
//  Materialised state

int
shoal_oplog_kv_get(shoal_oplog_t *self, const char *dataset, const char *name,
                   shoal_kv_record_t *record, bool *found)
{
    shoal_key_t key;
    shoal_oplog_key_kv(&key, dataset, name);
    if (shoal_store_get_record(self->store, SHOAL_CF_KV, &key, &shoal_kv_codec, record, found))
        return shoal_oplog_fail_store(self, "kv read");
    if (*found && record->deleted) {
        shoal_kv_codec.clear(record);
        *found = false;
    }
    return 0;
}

//  The scan behind kv_scan and kv_records: TOMBSTONES says whether deleted
//  keys are listed too.
static int
s_oplog_kv_scan(shoal_oplog_t *self, const char *dataset, const char *prefix,
                const char *start_after, size_t limit, bool tombstones, shoal_kv_list_t *list)
{
    shoal_kv_list_clear(list);
    shoal_key_t key_prefix;
    shoal_oplog_key_dataset(&key_prefix, dataset);
    shoal_key_add_str_prefix(&key_prefix, prefix);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_KV, &key_prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "kv scan");
    int rc = 0;
    bool on_key = shoal_iter_first(iter);
    if (start_after && *start_after) {
        //  Resume past START_AFTER: seek to it and step over it if present.
        shoal_key_t resume;
        shoal_oplog_key_dataset(&resume, dataset);
        shoal_key_add_str(&resume, start_after);
        on_key = shoal_iter_seek(iter, &resume);
        size_t size;
        const uint8_t *bytes = on_key ? shoal_iter_key(iter, &size) : NULL;
        if (bytes && size == resume.size && memcmp(bytes, resume.bytes, size) == 0)
            on_key = shoal_iter_next(iter);
    }
    while (on_key && rc == 0 && (limit == 0 || list->count < limit)) {
        shoal_kv_record_t record;
        if (shoal_iter_record(iter, &shoal_kv_codec, &record)) {
            rc = shoal_oplog_fail_store(self, "kv scan");
            break;
        }
        if (record.deleted && !tombstones) {
            shoal_kv_codec.clear(&record);
            on_key = shoal_iter_next(iter);
            continue;
        }
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE], key[OPLOG_NAME_SIZE];
        if (shoal_oplog_parse_pair(bytes, size, name, key)) {
            shoal_kv_codec.clear(&record);
            rc = shoal_oplog_fail_key(self, SHOAL_CF_KV, bytes, size);
            break;
        }
        shoal_kv_item_t *item = (shoal_kv_item_t *) shoal_oplog_array_push(
            (void **) &list->items, &list->count, &list->capacity, sizeof(shoal_kv_item_t));
        if (item)
            item->key = strdup(key);
        if (!item || !item->key) {
            if (item)
                list->count--;
            shoal_kv_codec.clear(&record);
            rc = shoal_oplog_fail(self, "out of memory");
            break;
        }
        item->record = record;
        on_key = shoal_iter_next(iter);
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "kv scan");
    shoal_iter_destroy(&iter);
    if (rc)
        shoal_kv_list_clear(list);
    return rc;
}

int
shoal_oplog_kv_scan(shoal_oplog_t *self, const char *dataset, const char *prefix,
                    const char *start_after, size_t limit, shoal_kv_list_t *list)
{
    return s_oplog_kv_scan(self, dataset, prefix, start_after, limit, false, list);
}

int
shoal_oplog_kv_records(shoal_oplog_t *self, const char *dataset, const char *start_after,
                       size_t limit, shoal_kv_list_t *list)
{
    return s_oplog_kv_scan(self, dataset, "", start_after, limit, true, list);
}

static int
s_oplog_kv_merge(shoal_oplog_t *self, const char *dataset, const char *name,
                 const shoal_kv_record_t *incoming, bool *applied)
{
    *applied = false;
    shoal_key_t key;
    shoal_oplog_key_kv(&key, dataset, name);
    shoal_kv_record_t record;
    bool found;
    if (shoal_store_get_record(self->store, SHOAL_CF_KV, &key, &shoal_kv_codec, &record, &found))
        return shoal_oplog_fail_store(self, "kv merge: read");
    bool was_live = found && !record.deleted;
    if (found) {
        shoal_oplog_version_t stored = {
            record.epoch, { record.wall_ms, record.logic }, record.node, record.hash
        };
        shoal_oplog_version_t offered = {
            incoming->epoch, { incoming->wall_ms, incoming->logic }, incoming->node, incoming->hash
        };
        bool wins = shoal_oplog_version_compare(&offered, &stored) > 0;
        shoal_kv_codec.clear(&record);
        if (!wins)
            return 0;
    }
    shoal_oplog_kv_touch(self, dataset);
    if (shoal_oplog_counts_add(self, self->store, self->batch, dataset, 0,
                               (int64_t) !incoming->deleted - (int64_t) was_live))
        return shoal_oplog_fail_store(self, "kv merge: counts read");
    int rc = shoal_batch_put_record(self->batch, SHOAL_CF_KV, &key, &shoal_kv_codec, incoming);
    if (rc == 0 && shoal_store_write(self->store, self->batch, self->sync))
        rc = -1;
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "kv merge");
    *applied = true;
    return 0;
}

int
shoal_oplog_kv_merge(shoal_oplog_t *self, const char *dataset, const char *name,
                     const shoal_kv_record_t *incoming, bool *applied)
{
    shoal_oplog_guard_lock(self);
    int rc = s_oplog_kv_merge(self, dataset, name, incoming, applied);
    shoal_oplog_guard_unlock(self);
    return rc;
}

int
shoal_oplog_kv_apply(shoal_oplog_t *self, const shoal_oplog_entry_t *entry, uint64_t epoch)
{
    shoal_key_t key;
    shoal_oplog_key_kv(&key, entry->dataset, entry->key ? entry->key : "");
    shoal_kv_record_t record;
    bool found;
    if (shoal_store_get_record(self->store, SHOAL_CF_KV, &key, &shoal_kv_codec, &record, &found))
        return shoal_oplog_fail_store(self, "append: kv read");
    bool wins = true, was_live = found && !record.deleted;
    if (found) {
        shoal_oplog_version_t stored = {
            record.epoch, { record.wall_ms, record.logic }, record.node, record.hash
        };
        shoal_oplog_version_t incoming = {
            epoch, { entry->wall_ms, entry->logic }, entry->node, entry->hash
        };
        wins = shoal_oplog_version_compare(&incoming, &stored) > 0;
        shoal_kv_codec.clear(&record);
    }
    if (!wins)
        return 0;
    //  The record borrows the entry's fields for the encode; it is not cleared.
    bool deleted = entry->op == SHOAL_OPLOG_DELETE;
    if (shoal_oplog_deltas_add(self, entry->dataset, 0, (int64_t) !deleted - (int64_t) was_live))
        return -1;
    shoal_kv_record_t winner = {
        .value = deleted ? NULL : entry->value,
        .value_size = deleted ? 0 : entry->value_size,
        .deleted = deleted,
        .wall_ms = entry->wall_ms,
        .logic = entry->logic,
        .node = entry->node,
        .epoch = epoch,
    };
    memcpy(winner.hash, entry->hash, SHOAL_HASH_SIZE);
    if (shoal_batch_put_record(self->batch, SHOAL_CF_KV, &key, &shoal_kv_codec, &winner))
        return shoal_oplog_fail_store(self, "append");
    shoal_oplog_kv_touch(self, entry->dataset);
    return 0;
}

//  Live keys of DATASET, walked.
int64_t
shoal_oplog_walk_live(shoal_oplog_t *self, const char *dataset)
{
    shoal_key_t prefix;
    shoal_oplog_key_dataset(&prefix, dataset);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_KV, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "kv count");
    int64_t live = 0;
    int rc = 0;
    for (bool on_key = shoal_iter_first(iter); on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        //  Only the tombstone flag is read; bytes that are no record at all
        //  are decoded in full, for the error that names their key.
        size_t size;
        const uint8_t *value = shoal_iter_value(iter, &size);
        bool deleted;
        shoal_kv_record_t record;
        if (shoal_kv_record_deleted(value, size, &deleted) == 0)
            live += deleted ? 0 : 1;
        else
        if (shoal_iter_record(iter, &shoal_kv_codec, &record))
            rc = shoal_oplog_fail_store(self, "kv count");
        else {
            live += record.deleted ? 0 : 1;
            shoal_kv_codec.clear(&record);
        }
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "kv count");
    shoal_iter_destroy(&iter);
    return rc ? -1 : live;
}


int
shoal_oplog_kv_collect(shoal_oplog_t *self, const char *dataset, const shoal_hlc_stamp_t *cutoff,
                       const char *start_after, size_t limit, char **next, size_t *collected_p,
                       size_t *kept_p)
{
    *next = NULL;
    if (collected_p)
        *collected_p = 0;
    if (kept_p)
        *kept_p = 0;
    shoal_oplog_epoch_fn *extract;
    void *arg;
    if (shoal_oplog_epoch(self, dataset, &extract, &arg))
        return 0;
    shoal_key_t prefix;
    shoal_oplog_key_dataset(&prefix, dataset);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_KV, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "kv collect");
    bool on_key;
    if (start_after && *start_after) {
        shoal_key_t resume, past;
        shoal_oplog_key_kv(&resume, dataset, start_after);
        shoal_key_prefix_end(&resume, &past);
        on_key = shoal_iter_seek(iter, &past);
    }
    else
        on_key = shoal_iter_first(iter);
    size_t walked = 0, collected = 0, kept = 0;
    char last[OPLOG_NAME_SIZE] = "";
    int rc = 0;
    for (; on_key && rc == 0 && walked < limit; on_key = shoal_iter_next(iter)) {
        walked++;
        size_t size, value_size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE];
        if (shoal_oplog_parse_pair(bytes, size, name, last)) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_KV, bytes, size);
            break;
        }
        //  Only tombstones are decoded, for their stamp.
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        bool deleted;
        if (shoal_kv_record_deleted(value, value_size, &deleted) || !deleted)
            continue;
        shoal_kv_record_t record;
        if (shoal_iter_record(iter, &shoal_kv_codec, &record)) {
            rc = shoal_oplog_fail_store(self, "kv collect");
            break;
        }
        shoal_hlc_stamp_t stamp = { record.wall_ms, record.logic };
        shoal_kv_codec.clear(&record);
        if (shoal_hlc_compare(&stamp, cutoff) > 0) {
            kept++;
            continue;
        }
        shoal_key_t key;
        shoal_oplog_key_raw(&key, bytes, size);
        shoal_batch_delete(self->batch, SHOAL_CF_KV, &key);
        collected++;
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "kv collect");
    shoal_iter_destroy(&iter);
    if (rc == 0 && collected) {
        //  Under the guard: a bulk load reading kv learns of the change.
        shoal_oplog_guard_lock(self);
        shoal_oplog_kv_touch(self, dataset);
        if (shoal_store_write(self->store, self->batch, self->sync))
            rc = shoal_oplog_fail_store(self, "kv collect");
        shoal_oplog_guard_unlock(self);
    }
    shoal_batch_clear(self->batch);
    if (rc)
        return rc;
    if (on_key && walked == limit) {
        *next = strdup(last);
        if (!*next)
            return shoal_oplog_fail(self, "out of memory");
    }
    if (collected_p)
        *collected_p = collected;
    if (kept_p)
        *kept_p = kept;
    return 0;
}
