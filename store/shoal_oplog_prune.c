/*  shoal_oplog_prune: prune and watermarks, and the head rule, for the
    oplog that shoal_oplog.h describes (design note: shoal_oplog.c).

    Prune removes every entry of a dataset stamped at or before a cutoff,
    found in oplog_by_hlc, in writes of prune_batch entries, after raising
    the dataset's watermark; the heads of the nodes it touched are then
    recomputed by the head rule below, which reconcile uses too. A head
    from a peer's snapshot moves forward only, even to an entry pruned
    there: the watermark explains it.
*/
#include "shoal_oplog_private.h"

// ---------------------------------------------------------------------------
//  Heads, as prune and reconcile recompute them

//  Puts a head naming the index entry (STAMP, HASH).
static int
s_oplog_head_put(shoal_oplog_t *self, const shoal_key_t *key, shoal_hlc_stamp_t stamp,
                 const uint8_t *hash)
{
    shoal_head_record_t record = { stamp.wall_ms, stamp.logic, { 0 } };
    memcpy(record.hash, hash, SHOAL_HASH_SIZE);
    if (shoal_batch_put_record(self->batch, SHOAL_CF_OPLOG_NODE_HEAD, key, &shoal_head_codec,
                               &record))
        return shoal_oplog_fail_store(self, "head write");
    return 0;
}

//  Finds NODE's latest entry in DATASET in oplog_by_node_hlc.
static int
s_oplog_latest(shoal_oplog_t *self, const char *dataset, const char *node,
               shoal_hlc_stamp_t *stamp, uint8_t *hash, bool *found)
{
    *found = false;
    shoal_key_t prefix;
    shoal_oplog_key_head(&prefix, dataset, node);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, &prefix);
    if (!iter)
        return shoal_oplog_fail_store(self, "latest entry");
    int rc = 0;
    if (shoal_iter_last(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE], other[OPLOG_NAME_SIZE];
        if (shoal_oplog_parse_by_node_hlc(bytes, size, name, other, stamp, hash))
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_NODE_HLC, bytes, size);
        else
            *found = true;
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "latest entry");
    shoal_iter_destroy(&iter);
    return rc;
}

//  Recomputes NODE's head in DATASET into the batch. The rule: a head names
//  the node's latest entry; it may name a newer one only if that entry is
//  gone and the watermark says it was pruned (see DESIGN). A head that
//  names nothing that can be explained is rewritten to the latest entry, or
//  removed when the node has none.
int
shoal_oplog_head_repair(shoal_oplog_t *self, const char *dataset, const char *node,
                    oplog_head_change_t *change)
{
    *change = OPLOG_HEAD_KEPT;
    shoal_hlc_stamp_t latest;
    uint8_t latest_hash[SHOAL_HASH_SIZE];
    bool has_latest;
    if (s_oplog_latest(self, dataset, node, &latest, latest_hash, &has_latest))
        return -1;
    shoal_key_t key;
    shoal_oplog_key_head(&key, dataset, node);
    shoal_head_record_t head = { 0 };
    bool has_head;
    //  A head that does not decode is repaired like a missing one.
    if (shoal_store_get_record(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                               &head, &has_head))
        has_head = false;
    shoal_hlc_stamp_t head_stamp = { head.wall_ms, head.logic };
    bool keep = false;
    if (has_head && (!has_latest || shoal_hlc_compare(&latest, &head_stamp) <= 0)) {
        shoal_key_t entry_key;
        shoal_oplog_key_by_hash(&entry_key, dataset, head.hash);
        bool head_exists;
        if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_BY_HASH, &entry_key, &head_exists))
            return shoal_oplog_fail_store(self, "head check");
        shoal_hlc_stamp_t watermark;
        bool has_watermark = false;
        if (!head_exists && shoal_oplog_watermark(self, dataset, &watermark, &has_watermark))
            return -1;
        keep = head_exists
            || (has_watermark && shoal_hlc_compare(&head_stamp, &watermark) <= 0);
    }
    if (keep)
        return 0;
    if (has_latest) {
        if (s_oplog_head_put(self, &key, latest, latest_hash))
            return -1;
        *change = OPLOG_HEAD_WRITTEN;
    }
    else {
        //  Also reached with neither head nor entries: nothing to remove then.
        if (shoal_store_exists(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &has_head))
            return shoal_oplog_fail_store(self, "head check");
        if (has_head) {
            shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_NODE_HEAD, &key);
            *change = OPLOG_HEAD_REMOVED;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
//  Prune

//  Writes the batch when it holds LIMIT operations or more (0: whatever it
//  holds). *WRITES counts the writes.
int
shoal_oplog_flush(shoal_oplog_t *self, size_t limit, size_t *writes, const char *what)
{
    size_t count = shoal_batch_count(self->batch);
    if (count == 0 || count < limit)
        return 0;
    int rc = shoal_store_write(self->store, self->batch, self->sync);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, what);
    (*writes)++;
    return 0;
}

//  Adds the deletes of an entry whose oplog_by_hlc key holds STAMP, NODE
//  and HASH (INDEX_KEY and VALUE as read): its value is empty, or in stores
//  of an earlier version the entry's prev hash, which no key needs now.
//  Every key is built from those, so prune reads no entry: on a log larger
//  than the block cache, a point read per pruned entry would cost more than
//  all its deletes. A value that is neither falls back to reading the
//  entry.
static int
s_oplog_prune_entry(shoal_oplog_t *self, const char *dataset, shoal_hlc_stamp_t stamp,
                    const char *node, const uint8_t *hash, const uint8_t *index_key,
                    size_t index_size, const uint8_t *value, size_t value_size)
{
    shoal_oplog_entry_t entry;
    bool from_store = value_size != 0 && value_size != SHOAL_HASH_SIZE;
    if (from_store) {
        char *text = shoal_key_format(index_key, index_size);
        zsys_warning("oplog: prune: oplog_by_hlc %s holds a %zu byte value, not a prev hash; "
                     "reading its entry", text ? text : "(?)", value_size);
        free(text);
        bool found;
        if (shoal_oplog_get(self, dataset, hash, &entry, &found))
            return -1;
        if (!found) {
            //  Only the index key is left of this entry; it goes.
            shoal_key_t key;
            shoal_oplog_key_raw(&key, index_key, index_size);
            shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_BY_HLC, &key);
            return 0;
        }
    }
    else {
        //  A view of the entry holding the fields its keys are made of. It
        //  borrows the strings and is not cleared.
        memset(&entry, 0, sizeof entry);
        entry.dataset = (char *) dataset;
        entry.node = (char *) node;
        entry.wall_ms = stamp.wall_ms;
        entry.logic = stamp.logic;
        entry.has_prev = value_size == SHOAL_HASH_SIZE;
        if (entry.has_prev)
            memcpy(entry.prev_hash, value, SHOAL_HASH_SIZE);
        memcpy(entry.hash, hash, SHOAL_HASH_SIZE);
    }
    shoal_key_t key;
    shoal_oplog_key_by_hash(&key, dataset, entry.hash);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_BY_HASH, &key);
    shoal_oplog_key_raw(&key, index_key, index_size);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_BY_HLC, &key);
    shoal_oplog_key_by_node_hlc(&key, &entry);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_BY_NODE_HLC, &key);
    if (from_store)
        shoal_oplog_entry_codec.clear(&entry);
    return 0;
}

//  Writes a prune's batch, which deletes COUNT entries of DATASET, with
//  the dataset's counts; *WRITES counts the writes.
static int
s_oplog_prune_flush(shoal_oplog_t *self, const char *dataset, size_t count, size_t *writes)
{
    shoal_oplog_guard_lock(self);
    int rc = shoal_oplog_counts_add(self, self->store, self->batch, dataset, -(int64_t) count, 0)
           ? shoal_oplog_fail_store(self, "prune: counts read") : 0;
    if (rc == 0)
        rc = shoal_oplog_flush(self, 0, writes, "prune");
    shoal_oplog_guard_unlock(self);
    return rc;
}

//  Recomputes the heads of the TOUCHED nodes of DATASET.
static int
s_oplog_prune_heads(shoal_oplog_t *self, const char *dataset, zhashx_t *touched,
                    size_t *changed)
{
    *changed = 0;
    int rc = 0;
    shoal_oplog_guard_lock(self);
    for (void *item = zhashx_first(touched); item && rc == 0; item = zhashx_next(touched)) {
        const char *node = (const char *) zhashx_cursor(touched);
        oplog_head_change_t change;
        rc = shoal_oplog_head_repair(self, dataset, node, &change);
        if (change != OPLOG_HEAD_KEPT)
            (*changed)++;
    }
    size_t writes = 0;
    if (rc == 0)
        rc = shoal_oplog_flush(self, 0, &writes, "prune: head write");
    shoal_oplog_guard_unlock(self);
    shoal_batch_clear(self->batch);
    return rc;
}

int
shoal_oplog_prune(shoal_oplog_t *self, const char *dataset, const shoal_hlc_stamp_t *cutoff,
                  size_t *pruned_p)
{
    if (pruned_p)
        *pruned_p = 0;
    shoal_hlc_stamp_t watermark;
    bool has_watermark;
    if (shoal_oplog_watermark(self, dataset, &watermark, &has_watermark))
        return -1;
    if (!has_watermark || shoal_hlc_compare(cutoff, &watermark) > 0) {
        shoal_key_t key;
        shoal_oplog_key_watermark(&key, dataset);
        uint64_t values[2] = { cutoff->wall_ms, cutoff->logic };
        shoal_oplog_meta_put(self->batch, &key, values, 2);
    }
    //  Every key of DATASET up to and including every key stamped CUTOFF.
    shoal_key_t lower, upper;
    shoal_oplog_key_dataset(&lower, dataset);
    shoal_oplog_key_dataset(&upper, dataset);
    shoal_key_add_u64(&upper, cutoff->wall_ms);
    shoal_key_add_u64(&upper, cutoff->logic);
    shoal_key_prefix_end(&upper, &upper);
    shoal_iter_t *iter = shoal_iter_new(self->store, SHOAL_CF_OPLOG_BY_HLC, &lower, &upper);
    if (!iter) {
        shoal_batch_clear(self->batch);
        return shoal_oplog_fail_store(self, "prune");
    }
    //  The nodes whose entries went; the items are unused.
    zhashx_t *touched = zhashx_new();
    size_t pruned = 0, writes = 0, in_batch = 0;
    int rc = 0;
    for (bool on_key = shoal_iter_first(iter); on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        size_t size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        char name[OPLOG_NAME_SIZE], node[OPLOG_NAME_SIZE];
        shoal_hlc_stamp_t stamp;
        uint8_t hash[SHOAL_HASH_SIZE];
        if (shoal_oplog_parse_by_hlc(bytes, size, name, &stamp, node, hash)) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_HLC, bytes, size);
            break;
        }
        size_t value_size;
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        rc = s_oplog_prune_entry(self, dataset, stamp, node, hash, bytes, size, value,
                                 value_size);
        if (rc == 0 && !zhashx_lookup(touched, node))
            zhashx_insert(touched, node, self);
        pruned++;
        if (rc == 0 && ++in_batch == self->prune_batch) {
            rc = s_oplog_prune_flush(self, dataset, in_batch, &writes);
            in_batch = 0;
        }
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "prune");
    shoal_iter_destroy(&iter);
    if (rc == 0)
        rc = s_oplog_prune_flush(self, dataset, in_batch, &writes);
    shoal_batch_clear(self->batch);
    size_t heads_changed = 0;
    if (rc == 0)
        rc = s_oplog_prune_heads(self, dataset, touched, &heads_changed);
    if (rc == 0) {
        zsys_info("oplog: pruned %zu entries of \"%s\" up to %" PRIu64 ".%" PRIu32
                  " in %zu writes; %zu nodes touched, %zu heads changed", pruned, dataset,
                  cutoff->wall_ms, cutoff->logic, writes, zhashx_size(touched), heads_changed);
        if (pruned_p)
            *pruned_p = pruned;
    }
    zhashx_destroy(&touched);
    return rc;
}

static int
s_oplog_head_merge(shoal_oplog_t *self, const char *dataset, const shoal_oplog_head_t *head,
                   bool *moved)
{
    *moved = false;
    shoal_key_t key;
    shoal_oplog_key_head(&key, dataset, head->node);
    shoal_head_record_t record;
    bool found;
    if (shoal_store_get_record(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                               &record, &found))
        return shoal_oplog_fail_store(self, "head merge: read");
    shoal_hlc_stamp_t stored = { record.wall_ms, record.logic };
    if (found && shoal_hlc_compare(&head->stamp, &stored) <= 0)
        return 0;
    int rc = s_oplog_head_put(self, &key, head->stamp, head->hash);
    if (rc == 0 && shoal_store_write(self->store, self->batch, self->sync))
        rc = shoal_oplog_fail_store(self, "head merge");
    shoal_batch_clear(self->batch);
    if (rc == 0)
        *moved = true;
    return rc;
}

int
shoal_oplog_head_merge(shoal_oplog_t *self, const char *dataset, const shoal_oplog_head_t *head,
                       bool *moved)
{
    shoal_oplog_guard_lock(self);
    int rc = s_oplog_head_merge(self, dataset, head, moved);
    shoal_oplog_guard_unlock(self);
    return rc;
}

