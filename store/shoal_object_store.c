/*  shoal_object_store: ids reservations and local instance locks. See the .h. */
#include "shoal_object_store.h"
#include "shoal_alloc.h"

#include <czmq.h>

static void
s_key_ids(shoal_key_t *key, shoal_object_id_kind_t kind)
{
    shoal_key_init(key);
    shoal_key_add_str(key, "ids");
    shoal_key_add_u64(key, (uint64_t) kind);
}

static void
s_key_lock(shoal_key_t *key, uint64_t iid)
{
    shoal_key_init(key);
    shoal_key_add_str(key, "lock");
    shoal_key_add_u64(key, iid);
}

//  HOLDER NULL: the prefix of every record of IID.
static void
s_key_record(shoal_key_t *key, uint64_t iid, const char *holder)
{
    shoal_key_init(key);
    shoal_key_add_str(key, "record");
    shoal_key_add_u64(key, iid);
    if (holder)
        shoal_key_add_str(key, holder);
}

int
shoal_object_store_ids_reserved(shoal_store_t *store, shoal_object_id_kind_t kind, uint64_t *reserved_p)
{
    shoal_key_t key;
    s_key_ids(&key, kind);
    uint8_t *value = NULL;
    size_t size = 0;
    *reserved_p = 0;
    if (shoal_store_get(store, SHOAL_CF_OBJECTS, &key, &value, &size))
        return -1;
    if (!value)
        return 0;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, value, size);
    int rc = shoal_key_read_u64(&reader, reserved_p) == 0 && shoal_key_reader_done(&reader) ? 0 : -1;
    free(value);
    if (rc)
        zsys_error("object store: the id reservation of kind %d holds %zu bytes that are no number", (int) kind, size);
    return rc;
}

int
shoal_object_store_ids_reserve(shoal_store_t *store, shoal_object_id_kind_t kind, uint64_t reserved)
{
    shoal_key_t key, value;
    s_key_ids(&key, kind);
    shoal_key_init(&value);
    shoal_key_add_u64(&value, reserved);
    return shoal_store_put(store, SHOAL_CF_OBJECTS, &key, value.bytes, value.size, true);
}

int
shoal_object_store_lock_get(shoal_store_t *store, uint64_t iid, shoal_msg_object_lock_t *lock, bool *found_p)
{
    shoal_key_t key;
    s_key_lock(&key, iid);
    return shoal_store_get_record(store, SHOAL_CF_INSTANCES, &key, &shoal_msg_object_lock_codec, lock, found_p);
}

int
shoal_object_store_record_get(shoal_store_t *store, uint64_t iid, const char *holder,
                              shoal_msg_object_lock_record_t *record, bool *found_p)
{
    shoal_key_t key;
    s_key_record(&key, iid, holder);
    return shoal_store_get_record(store, SHOAL_CF_INSTANCES, &key, &shoal_msg_object_lock_record_codec, record,
                                  found_p);
}

int
shoal_object_store_lock_write(shoal_store_t *store, const shoal_msg_object_lock_t *lock,
                              const shoal_msg_object_lock_record_t *record, const char *drop_holder)
{
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_key_t key;
    s_key_lock(&key, lock->instance_id);
    int rc = shoal_batch_put_record(batch, SHOAL_CF_INSTANCES, &key, &shoal_msg_object_lock_codec, lock);
    if (rc == 0 && drop_holder) {
        s_key_record(&key, lock->instance_id, drop_holder);
        shoal_batch_delete(batch, SHOAL_CF_INSTANCES, &key);
    }
    if (rc == 0 && record) {
        s_key_record(&key, record->instance_id, record->holder);
        rc = shoal_batch_put_record(batch, SHOAL_CF_INSTANCES, &key, &shoal_msg_object_lock_record_codec, record);
    }
    if (rc == 0)
        rc = shoal_store_write(store, batch, true);
    shoal_batch_destroy(&batch);
    return rc;
}

int
shoal_object_store_lock_remove(shoal_store_t *store, uint64_t iid)
{
    shoal_batch_t *batch = shoal_batch_new(store);
    shoal_key_t key, end;
    s_key_lock(&key, iid);
    shoal_batch_delete(batch, SHOAL_CF_INSTANCES, &key);
    s_key_record(&key, iid, NULL);
    int rc = shoal_key_prefix_end(&key, &end);
    if (rc == 0) {
        shoal_batch_delete_range(batch, SHOAL_CF_INSTANCES, &key, &end);
        rc = shoal_store_write(store, batch, true);
    }
    shoal_batch_destroy(&batch);
    return rc;
}

//  Reads the records of IID into a new array (*RECORDS_P, *COUNT_P).
static int
s_records_read(shoal_store_t *store, uint64_t iid, shoal_msg_object_lock_record_t **records_p, size_t *count_p)
{
    shoal_key_t prefix;
    s_key_record(&prefix, iid, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_INSTANCES, &prefix);
    *records_p = NULL;
    *count_p = 0;
    if (!iter)
        return -1;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        *records_p = (shoal_msg_object_lock_record_t *) shoal_realloc(*records_p, (*count_p + 1) * sizeof **records_p);
        rc = shoal_iter_record(iter, &shoal_msg_object_lock_record_codec, &(*records_p)[*count_p]);
        if (rc == 0)
            (*count_p)++;
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

static void
s_records_free(shoal_msg_object_lock_record_t *records, size_t count)
{
    for (size_t i = 0; i < count; i++)
        shoal_msg_object_lock_record_codec.clear(&records[i]);
    free(records);
}

int
shoal_object_store_lock_each(shoal_store_t *store, shoal_object_lock_fn *fn, void *arg)
{
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, "lock");
    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_INSTANCES, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        shoal_msg_object_lock_t lock;
        rc = shoal_iter_record(iter, &shoal_msg_object_lock_codec, &lock);
        if (rc)
            break;
        shoal_msg_object_lock_record_t *records = NULL;
        size_t count = 0;
        rc = s_records_read(store, lock.instance_id, &records, &count);
        if (rc == 0 && fn(&lock, records, count, arg))
            rc = 1;
        s_records_free(records, count);
        shoal_msg_object_lock_codec.clear(&lock);
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc < 0 ? -1 : 0;
}

int
shoal_object_store_orphan_records(shoal_store_t *store, shoal_object_lock_fn *fn, void *arg)
{
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    shoal_key_add_str(&prefix, "record");
    shoal_iter_t *iter = shoal_iter_prefix(store, SHOAL_CF_INSTANCES, &prefix);
    if (!iter)
        return -1;
    int rc = 0;
    for (bool valid = shoal_iter_first(iter); valid && rc == 0; valid = shoal_iter_next(iter)) {
        shoal_msg_object_lock_record_t record;
        rc = shoal_iter_record(iter, &shoal_msg_object_lock_record_codec, &record);
        if (rc)
            break;
        shoal_msg_object_lock_t lock = { 0 };
        bool found = false;
        rc = shoal_object_store_lock_get(store, record.instance_id, &lock, &found);
        if (rc == 0 && !found) {
            lock.instance_id = record.instance_id;
            if (fn(&lock, &record, 1, arg))
                rc = 1;
        }
        shoal_msg_object_lock_codec.clear(&lock);
        shoal_msg_object_lock_record_codec.clear(&record);
    }
    if (rc == 0)
        rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc < 0 ? -1 : 0;
}
