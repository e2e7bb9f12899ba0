/*  shoal_oplog_migrate: brings a store written by the layout before to the
    current one, at open, for the oplog that shoal_oplog.h describes.

    Layout 1 stored each entry twice: in oplog_by_hash, its home then, and
    again as the value of its oplog_by_node_hlc key (stores older still left
    that value empty). Layout 2 stores it once, in oplog_by_node_hlc, and
    oplog_by_hash holds its locator.

      1. Walk oplog_by_hash in key order, from the start or, when a cut
         migration left its progress record, from past the key it names.
         oplog_by_hash is walked (not oplog_by_node_hlc) because in layout
         1 it is where every entry is sure to be: a key of
         oplog_by_node_hlc may be empty or, after a bulk load cut by a
         crash, missing.
      2. For each entry, put its bytes, as they are, at its
         oplog_by_node_hlc key, and its locator in place of it in
         oplog_by_hash. Writing the bytes again where layout 1 had them
         already changes nothing; where it had not, it is what makes the
         entry stored.
      3. Every migrate_batch entries, write the batch together with the
         progress record ("migrating" in oplog_meta: the last oplog_by_hash
         key covered). One write is one batch: a crash leaves every entry
         up to the record migrated and every one after it untouched, never
         an entry whose bytes are gone from both families. The next open
         resumes after the record (step 1). Bounded: a million entries are
         a hundred writes of 10,000 by default, none of them large.
      4. The last write puts the schema version 2 and removes the record.

    A value of oplog_by_hash that does not decode is left as it is, named
    in the log: reconcile removes it later as an index value that locates
    nothing. Each step is logged: the start (or the resume), progress every
    OPLOG_MIGRATE_LOG_EVERY writes, and the end with what it did and how
    long it took. The whole runs in shoal_oplog_new, before the oplog serves
    anything, so no reader sees a half-migrated store.
*/
#include "shoal_oplog_private.h"

//  Writes between two progress lines in the log.
#define OPLOG_MIGRATE_LOG_EVERY 10

//  What a migration did so far.
typedef struct {
    size_t covered;             //  oplog_by_hash keys walked
    size_t moved;               //  entries now stored in oplog_by_node_hlc alone
    size_t corrupt;             //  values that did not decode, left as they were
    size_t writes;              //  writes made
} migrate_progress_t;

//  Writes the batch with the progress record naming LAST, the last
//  oplog_by_hash key it covers.
static int
s_migrate_flush(shoal_oplog_t *self, const shoal_key_t *last, migrate_progress_t *progress)
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
        return shoal_oplog_fail_store(self, "migrating oplog_by_hash");
    progress->writes++;
    if (progress->writes % OPLOG_MIGRATE_LOG_EVERY == 0)
        zsys_info("oplog: migrating to layout %d: %zu entries so far", SHOAL_OPLOG_SCHEMA_VERSION,
                  progress->covered);
    if (self->migrated)
        self->migrated(progress->writes, self->migrated_arg);
    return 0;
}

//  Reads where a cut migration stopped into RESUME; *FOUND false: none did.
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
    size_t read = 0;
    int rc = shoal_key_read_bytes(&reader, resume->bytes, SHOAL_KEY_MAX, &read)
          || !shoal_key_reader_done(&reader) ? -1 : 0;
    free(value);
    if (rc)
        return shoal_oplog_fail(self, "oplog_meta (\"%s\"): the value is not a key of "
                                "oplog_by_hash", OPLOG_META_MIGRATING);
    resume->size = read;
    *found = true;
    return 0;
}

//  Migrates the entry at oplog_by_hash KEY_BYTES, whose value is VALUE.
static void
s_migrate_entry(shoal_oplog_t *self, const shoal_key_t *key, const uint8_t *value, size_t size,
                migrate_progress_t *progress)
{
    shoal_oplog_entry_t entry;
    char why[OPLOG_CODEC_ERROR_MAX];
    if (shoal_oplog_entry_codec.decode(value, size, &entry, why, sizeof why)) {
        char *text = shoal_key_format(key->bytes, key->size);
        zsys_error("oplog: migrating: oplog_by_hash %s does not decode, left as it is (%s)",
                   text ? text : "(?)", why);
        free(text);
        progress->corrupt++;
        return;
    }
    shoal_key_t home, locator;
    shoal_oplog_key_by_node_hlc(&home, &entry);
    shoal_oplog_locator(&locator, &entry);
    shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_NODE_HLC, &home, value, size);
    shoal_batch_put(self->batch, SHOAL_CF_OPLOG_BY_HASH, key, locator.bytes, locator.size);
    shoal_oplog_entry_codec.clear(&entry);
    progress->moved++;
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
        zsys_info("oplog: resuming the migration of this store to layout %d after oplog_by_hash "
                  "%s", SHOAL_OPLOG_SCHEMA_VERSION, text ? text : "(?)");
        free(text);
    }
    else
        zsys_info("oplog: this store has layout %d (each entry stored twice); migrating it to "
                  "layout %d (each entry stored once, in oplog_by_node_hlc), %zu entries a write",
                  SHOAL_OPLOG_SCHEMA_TWICE, SHOAL_OPLOG_SCHEMA_VERSION, self->migrate_batch);
    shoal_iter_t *iter = shoal_iter_new(self->store, SHOAL_CF_OPLOG_BY_HASH, NULL, NULL);
    if (!iter)
        return shoal_oplog_fail_store(self, "migrating oplog_by_hash");
    bool on_key;
    if (resuming) {
        //  Past the last key covered: the smallest key after it.
        shoal_key_t next = resume;
        if (next.size < SHOAL_KEY_MAX)
            next.bytes[next.size++] = 0;
        on_key = shoal_iter_seek(iter, &next);
    }
    else
        on_key = shoal_iter_first(iter);
    migrate_progress_t progress = { 0 };
    size_t in_batch = 0;
    shoal_key_t last;
    shoal_key_init(&last);
    int rc = 0;
    for (; on_key && rc == 0; on_key = shoal_iter_next(iter)) {
        size_t size, value_size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        shoal_oplog_key_raw(&last, bytes, size);
        if (last.overflow) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_HASH, bytes, size);
            break;
        }
        progress.covered++;
        s_migrate_entry(self, &last, value, value_size, &progress);
        if (++in_batch == self->migrate_batch) {
            rc = s_migrate_flush(self, &last, &progress);
            in_batch = 0;
        }
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "migrating oplog_by_hash");
    shoal_iter_destroy(&iter);
    if (rc) {
        shoal_batch_clear(self->batch);
        return rc;
    }
    //  The last entries, the version and the end of the record, in one
    //  write.
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
    progress.writes++;
    zsys_info("oplog: migrated this store to layout %d: %zu entries %s, %zu stored once now, %zu "
              "that do not decode left as they were, in %zu writes, %" PRId64 " ms",
              SHOAL_OPLOG_SCHEMA_VERSION, progress.covered, resuming ? "walked since the resume"
              : "walked", progress.moved, progress.corrupt, progress.writes,
              zclock_mono() - started);
    return 0;
}
