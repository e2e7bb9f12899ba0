/*  shoal_oplog_keys: the keys of the operation log's column families. */
#include "shoal_oplog_keys.h"

#include <stddef.h>

void
shoal_oplog_key_by_hash(shoal_key_t *key, const char *dataset, const uint8_t *hash)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
    shoal_key_add_bytes(key, hash, SHOAL_HASH_SIZE);
}

void
shoal_oplog_key_by_hlc(shoal_key_t *key, const shoal_oplog_entry_t *entry)
{
    shoal_key_init(key);
    shoal_key_add_str(key, entry->dataset);
    shoal_key_add_u64(key, entry->wall_ms);
    shoal_key_add_u64(key, entry->logic);
    shoal_key_add_str(key, entry->node);
    shoal_key_add_bytes(key, entry->hash, SHOAL_HASH_SIZE);
}

void
shoal_oplog_key_by_node_hlc(shoal_key_t *key, const shoal_oplog_entry_t *entry)
{
    shoal_key_init(key);
    shoal_key_add_str(key, entry->dataset);
    shoal_key_add_str(key, entry->node);
    shoal_key_add_u64(key, entry->wall_ms);
    shoal_key_add_u64(key, entry->logic);
    shoal_key_add_bytes(key, entry->hash, SHOAL_HASH_SIZE);
}

void
shoal_oplog_key_head(shoal_key_t *key, const char *dataset, const char *node)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
    shoal_key_add_str(key, node);
}

void
shoal_oplog_key_kv(shoal_key_t *key, const char *dataset, const char *name)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
    shoal_key_add_str(key, name);
}

void
shoal_oplog_key_dataset(shoal_key_t *key, const char *dataset)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
}
