/*  shoal_drain_store: the drain record (see shoal_drain_store.h). */
#include "shoal_drain_store.h"


static void
s_key(shoal_key_t *key)
{
    shoal_key_init(key);
    shoal_key_add_str(key, SHOAL_DRAIN_STORE_KEY);
}

int
shoal_drain_store_get(shoal_store_t *store, shoal_msg_drain_t *drain, bool *found)
{
    shoal_key_t key;
    s_key(&key);
    return shoal_store_get_record(store, SHOAL_CF_OPLOG_META, &key, &shoal_msg_drain_codec, drain, found);
}

int
shoal_drain_store_put(shoal_store_t *store, const shoal_msg_drain_t *drain)
{
    shoal_key_t key;
    s_key(&key);
    shoal_batch_t *batch = shoal_batch_new(store);
    int rc = shoal_batch_put_record(batch, SHOAL_CF_OPLOG_META, &key, &shoal_msg_drain_codec, drain);
    if (rc == 0)
        rc = shoal_store_write(store, batch, true);
    shoal_batch_destroy(&batch);
    return rc;
}

int
shoal_drain_store_check(const uint8_t *value, size_t size, char *error, size_t error_size)
{
    shoal_msg_drain_t drain = { 0 };
    int rc = shoal_msg_drain_codec.decode(value, size, &drain, error, error_size);
    shoal_msg_drain_codec.clear(&drain);
    return rc;
}
