/*  shoal_oplog_migrate: brings a store written by an earlier layout of the
    oplog to the current one, at open, for the oplog that shoal_oplog.h
    describes.

    Layout 1 stored each entry twice: in oplog_by_hash and again as the
    value of its oplog_by_node_hlc key. Layout 2 stores it once, in
    oplog_by_hash, as the design has it; oplog_by_node_hlc holds keys
    alone. The migration walks oplog_by_node_hlc in key order and writes
    each key that still holds a value again, empty, in writes of
    migrate_batch keys (bounded: a million entries are a hundred writes,
    none of them large). Each write also records, in oplog_meta
    ("migrating"), the last key it covered, so a migration cut by a crash
    resumes after it; a cut write is lost whole, with its record, and is
    made again. The last write sets the schema version and removes the
    record. Readers of layout 2 never read oplog_by_node_hlc's values, so
    keys not migrated yet read right meanwhile; the whole runs before the
    oplog serves anything.
*/
#include "shoal_oplog_private.h"

//  Writes the batch with the progress record naming LAST, the last key it
//  covers; COVERED counts keys so far, for the log, *WRITES the writes.
static int
s_migrate_flush(shoal_oplog_t *self, const shoal_key_t *last, size_t covered, size_t *writes)
{
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MIGRATING);
    shoal_key_t value;
    shoal_key_init(&value);
    shoal_key_add_bytes(&value, last->bytes, last->size);
    shoal_batch_put(self->batch, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size);
    int rc = shoal_store_write(self->store, self->batch, self->sync);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "migrating oplog_by_node_hlc");
    (*writes)++;
    if (*writes % 10 == 0)
        zsys_info("oplog: migrating: %zu keys of oplog_by_node_hlc covered so far", covered);
    return 0;
}

//  Reads where a cut migration stopped into RESUME (*FOUND false: it did not
//  start).
static int
s_migrate_resume(shoal_oplog_t *self, shoal_key_t *resume, bool *found)
{
    *found = false;
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MIGRATING);
    uint8_t *value;
    size_t size;
    if (shoal_store_get(self->store, SHOAL_CF_OPLOG_META, &key, &value, &size))
        return shoal_oplog_fail_store(self, "reading the migration's progress");
    if (!value)
        return 0;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    shoal_key_init(resume);
    size_t read;
    int rc = shoal_key_read_bytes(&reader, resume->bytes, SHOAL_KEY_MAX, &read)
          || !shoal_key_reader_done(&reader) ? -1 : 0;
    free(value);
    if (rc)
        return shoal_oplog_fail(self, "oplog_meta (\"%s\"): not a key of oplog_by_node_hlc",
                                OPLOG_META_MIGRATING);
    resume->size = read;
    *found = true;
    return 0;
}

int
shoal_oplog_migrate(shoal_oplog_t *self)
{
    int64_t started = zclock_mono();
    shoal_key_t resume;
    bool resuming;
    if (s_migrate_resume(self, &resume, &resuming))
        return -1;
    if (resuming) {
        char *text = shoal_key_format(resume.bytes, resume.size);
        zsys_info("oplog: resuming the migration of this store to layout %d after %s",
                    SHOAL_OPLOG_SCHEMA_VERSION, text ? text : "(?)");
        free(text);
    }
    else
        zsys_info("oplog: this store has layout %d (oplog_by_node_hlc carries each entry a "
                    "second time); migrating it to layout %d, each entry stored once, %zu keys "
                    "a write", SHOAL_OPLOG_SCHEMA_CARRIED, SHOAL_OPLOG_SCHEMA_VERSION,
                    self->migrate_batch);
    shoal_iter_t *iter = shoal_iter_new(self->store, SHOAL_CF_OPLOG_BY_NODE_HLC, NULL, NULL);
    if (!iter)
        return shoal_oplog_fail_store(self, "migrating oplog_by_node_hlc");
    bool on_key;
    if (resuming) {
        //  Past the last key covered.
        shoal_key_t next = resume;
        if (next.size < SHOAL_KEY_MAX)
            next.bytes[next.size++] = 0;
        on_key = shoal_iter_seek(iter, &next);
    }
    else
        on_key = shoal_iter_first(iter);
    size_t covered = 0, emptied = 0, in_batch = 0, writes = 0;
    shoal_key_t last;
    shoal_key_init(&last);
    int rc = 0;
    for (; on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        size_t size, value_size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        shoal_iter_value(iter, &value_size);
        shoal_oplog_key_raw(&last, bytes, size);
        if (last.overflow) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_NODE_HLC, bytes, size);
            break;
        }
        covered++;
        if (value_size) {
            shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_NODE_HLC, &last, NULL, 0);
            emptied++;
        }
        if (++in_batch == self->migrate_batch) {
            rc = s_migrate_flush(self, &last, covered, &writes);
            in_batch = 0;
        }
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "migrating oplog_by_node_hlc");
    shoal_iter_destroy(&iter);
    if (rc) {
        shoal_batch_clear(self->batch);
        return rc;
    }
    //  The last keys, the version and the end of the record, in one write.
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MIGRATING);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    shoal_oplog_key_meta(&key, OPLOG_META_SCHEMA);
    uint64_t version = SHOAL_OPLOG_SCHEMA_VERSION;
    shoal_oplog_meta_put(self->batch, &key, &version, 1);
    rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "finishing the migration");
    writes++;
    zsys_info("oplog: migrated this store to layout %d: %zu keys of oplog_by_node_hlc covered, "
                "%zu values removed, in %zu writes, %" PRId64 " ms", SHOAL_OPLOG_SCHEMA_VERSION,
                covered, emptied, writes, zclock_mono() - started);
    return 0;
}
