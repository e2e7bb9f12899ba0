/*  shoal_oplog_migrate: brings a store written by the layout before to the
    current one, for the oplog that shoal_oplog.h describes, while the log
    serves.

    Layout 1 stored each entry twice: in oplog_by_hash, its home then, and
    again as the value of its oplog_by_node_hlc key (stores older still left
    that value empty). Layout 2 stores it once, in oplog_by_node_hlc, and
    oplog_by_hash holds its locator.

      1. Every read of the log accepts both forms for as long as the store
         is of layout 1 (shoal_oplog.c, "Reads"): a value of oplog_by_hash
         is a locator or an entry (a locator starts with a key's string tag,
         which no encoded entry does), and an empty oplog_by_node_hlc value
         is read from oplog_by_hash. Appends write layout 2 throughout. So
         the store answers alike in any mixed state, and the node serves
         from its first tick while the migration runs beside it.
      2. A step walks oplog_by_hash in key order from past the key the
         progress record names ("migrating" in oplog_meta; none: from the
         start), for up to migrate_batch entries. Each step opens its own
         iterator: one kept across steps would read a snapshot, and write
         back an entry that a prune between two steps removed.
      3. For each entry, it puts its bytes, as they are, at its
         oplog_by_node_hlc key, and its locator in place of it in
         oplog_by_hash. Writing the bytes again where layout 1 had them
         already changes nothing; where it had not, it is what makes the
         entry stored. A value that is a locator already (an append of
         layout 2 since the open) is passed.
      4. The step writes its batch together with the progress record (the
         last oplog_by_hash key covered), unsynced. One write is one batch: a crash
         leaves every entry up to the record migrated and every one after
         it untouched, never an entry whose bytes are gone from both
         families. The next open resumes after the record.
      5. The step that finds the walk's end puts the schema version 2 and
         removes the record, in one synced write.

    A step is bounded (migrate_batch entries, 10,000 by default), which is
    what lets the node run one a reactor turn (shoal_node.c): it runs them
    on the reactor, not on a worker, because the reactor is where every
    other writer of these keys runs (appends, prune): a step is then never
    interleaved with them, and step 2's fresh read sees their writes. Bulk
    loads, on the loader's threads, add only entries the store does not
    hold. shoal_oplog_migrate runs the steps one after another, for a
    caller that needs layout 2 before it goes on (reconcile, which reads
    the entries in oplog_by_node_hlc alone, and tests).

    A value of oplog_by_hash that does not decode is left as it is, named
    in the log: reconcile removes it later as an index value that locates
    nothing. Each step is logged: the start (or the resume), progress every
    OPLOG_MIGRATE_LOG_EVERY writes, and the end with what it did and how
    long it took.
*/
#include "shoal_oplog_private.h"

//  Writes between two progress lines in the log.
#define OPLOG_MIGRATE_LOG_EVERY 10

//  Writes the batch with the progress record naming LAST, the last
//  oplog_by_hash key it covers.
static int
s_migrate_flush(shoal_oplog_t *self, const shoal_key_t *last)
{
    shoal_oplog_migration_t *progress = &self->migration;
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MIGRATING);
    shoal_key_t value;
    shoal_key_init(&value);
    shoal_key_add_bytes(&value, last->bytes, last->size);
    shoal_batch_put(self->batch, SHOAL_CF_OPLOG_META, &key, value.bytes, value.size);
    //  Not synced: a step lost to a power cut is only done again (its
    //  progress record goes with it), and an fsync would hold the reactor
    //  that runs the step. The last write is synced (s_migrate_end).
    int rc = shoal_store_write(self->store, self->batch, false);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "migrating oplog_by_hash");
    progress->writes++;
    if (progress->writes % OPLOG_MIGRATE_LOG_EVERY == 0)
        zsys_info("oplog: migrating to layout %d: %" PRIu64 " entries so far",
                  SHOAL_OPLOG_SCHEMA_VERSION, progress->covered);
    if (self->migrated)
        self->migrated((size_t) progress->writes, self->migrated_arg);
    return 0;
}

//  Reads where the migration stopped into RESUME; *FOUND false: it did not
//  start.
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

//  Migrates the entry at oplog_by_hash KEY, whose value is VALUE.
static void
s_migrate_entry(shoal_oplog_t *self, const shoal_key_t *key, const uint8_t *value, size_t size)
{
    shoal_oplog_migration_t *progress = &self->migration;
    if (shoal_oplog_is_locator(value, size)) {
        progress->current++;
        return;
    }
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

//  Logs the start or the resume, once per open.
static void
s_migrate_begin(shoal_oplog_t *self, const shoal_key_t *resume, bool resuming)
{
    shoal_oplog_migration_t *progress = &self->migration;
    progress->started_ms = zclock_mono();
    progress->begun = true;
    if (resuming) {
        char *text = shoal_key_format(resume->bytes, resume->size);
        zsys_info("oplog: resuming the migration of this store to layout %d after oplog_by_hash "
                  "%s", SHOAL_OPLOG_SCHEMA_VERSION, text ? text : "(?)");
        free(text);
    }
    else
        zsys_info("oplog: this store has layout %d (each entry stored twice); migrating it to "
                  "layout %d (each entry stored once, in oplog_by_node_hlc), %zu entries a write",
                  SHOAL_OPLOG_SCHEMA_TWICE, SHOAL_OPLOG_SCHEMA_VERSION, self->migrate_batch);
}

//  The last write: the version, and the end of the progress record.
static int
s_migrate_end(shoal_oplog_t *self)
{
    shoal_oplog_migration_t *progress = &self->migration;
    shoal_key_t key;
    shoal_oplog_key_meta(&key, OPLOG_META_MIGRATING);
    shoal_batch_delete(self->batch, SHOAL_CF_OPLOG_META, &key);
    shoal_oplog_key_meta(&key, OPLOG_META_SCHEMA);
    uint64_t version = SHOAL_OPLOG_SCHEMA_VERSION;
    shoal_oplog_meta_put(self->batch, &key, &version, 1);
    int rc = shoal_store_write(self->store, self->batch, true);
    shoal_batch_clear(self->batch);
    if (rc)
        return shoal_oplog_fail_store(self, "finishing the migration");
    progress->writes++;
    progress->migrating = false;
    zsys_info("oplog: migrated this store to layout %d: %" PRIu64 " entries walked since this "
              "open, %" PRIu64 " stored once now, %" PRIu64 " stored once already, %" PRIu64
              " that do not decode left as they were, in %" PRIu64 " writes, %" PRId64 " ms",
              SHOAL_OPLOG_SCHEMA_VERSION, progress->covered, progress->moved, progress->current,
              progress->corrupt, progress->writes, zclock_mono() - progress->started_ms);
    return 0;
}

int
shoal_oplog_migrate_step(shoal_oplog_t *self, bool *done)
{
    *done = !self->migration.migrating;
    if (*done)
        return 0;
    shoal_key_t resume;
    bool resuming;
    if (s_migrate_resume(self, &resume, &resuming))
        return -1;
    if (!self->migration.begun)
        s_migrate_begin(self, &resume, resuming);
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
    size_t in_batch = 0;
    shoal_key_t last;
    shoal_key_init(&last);
    int rc = 0;
    for (; on_key && in_batch < self->migrate_batch; on_key = shoal_iter_next(iter)) {
        size_t size, value_size;
        const uint8_t *bytes = shoal_iter_key(iter, &size);
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        shoal_oplog_key_raw(&last, bytes, size);
        if (last.overflow) {
            rc = shoal_oplog_fail_key(self, SHOAL_CF_OPLOG_BY_HASH, bytes, size);
            break;
        }
        self->migration.covered++;
        s_migrate_entry(self, &last, value, value_size);
        in_batch++;
    }
    if (rc == 0)
        rc = shoal_oplog_iter_status(self, iter, "migrating oplog_by_hash");
    shoal_iter_destroy(&iter);
    if (rc == 0 && in_batch > 0)
        rc = s_migrate_flush(self, &last);
    if (rc == 0 && !on_key) {
        rc = s_migrate_end(self);
        *done = rc == 0;
    }
    shoal_batch_clear(self->batch);
    return rc;
}

int
shoal_oplog_migrate(shoal_oplog_t *self)
{
    bool done = !self->migration.migrating;
    int rc = 0;
    while (rc == 0 && !done)
        rc = shoal_oplog_migrate_step(self, &done);
    return rc;
}

bool
shoal_oplog_migrating(shoal_oplog_t *self)
{
    return self->migration.migrating;
}

void
shoal_oplog_migration(shoal_oplog_t *self, shoal_oplog_migration_t *migration)
{
    *migration = self->migration;
}
