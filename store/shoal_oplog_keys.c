/*  shoal_oplog_keys: the keys of the operation log's column families. */
#include "shoal_oplog_keys.h"

#include <stddef.h>
#include <stdint.h>

void
shoal_oplog_key_by_hash(shoal_key_t *key, const char *dataset, const uint8_t *hash)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
    shoal_key_add_bytes(key, hash, SHOAL_HASH_SIZE);
}

void
shoal_oplog_locator(shoal_key_t *value, const shoal_oplog_entry_t *entry)
{
    shoal_key_init(value);
    shoal_key_add_str(value, entry->node);
    shoal_key_add_u64(value, entry->wall_ms);
    shoal_key_add_u64(value, entry->logic);
}

int
shoal_oplog_key_located(shoal_key_t *key, const char *dataset, const uint8_t *hash,
                        const uint8_t *locator, size_t size)
{
    shoal_key_init(key);
    //  A locator is the middle of the key, (node, wall, logic): checked
    //  whole, then copied in as it is.
    char node[SHOAL_KEY_MAX];
    uint64_t wall, logic;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, locator, size);
    if (shoal_key_read_str(&reader, node, sizeof node)
    ||  shoal_key_read_u64(&reader, &wall)
    ||  shoal_key_read_u64(&reader, &logic)
    ||  !shoal_key_reader_done(&reader)
    ||  logic > UINT32_MAX)
        return -1;
    shoal_oplog_key_by_node_hlc_of(key, dataset, node, wall, logic, hash);
    return key->overflow ? -1 : 0;
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
    shoal_oplog_key_by_node_hlc_of(key, entry->dataset, entry->node, entry->wall_ms,
                                   entry->logic, entry->hash);
}

void
shoal_oplog_key_by_node_hlc_of(shoal_key_t *key, const char *dataset, const char *node,
                               uint64_t wall_ms, uint64_t logic, const uint8_t *hash)
{
    shoal_key_init(key);
    shoal_key_add_str(key, dataset);
    shoal_key_add_str(key, node);
    shoal_key_add_u64(key, wall_ms);
    shoal_key_add_u64(key, logic);
    shoal_key_add_bytes(key, hash, SHOAL_HASH_SIZE);
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

void
shoal_oplog_chain_keys(shoal_oplog_chain_keys_t *chain, const char *dataset, const char *node)
{
    shoal_oplog_key_dataset(&chain->dataset, dataset);
    shoal_key_init(&chain->node);
    shoal_key_add_str(&chain->node, node);
}

void
shoal_oplog_entry_keys(shoal_oplog_entry_keys_t *keys, const shoal_oplog_chain_keys_t *chain,
                       const shoal_oplog_entry_t *entry)
{
    //  The elements of this entry that several keys hold, each encoded once.
    shoal_key_t hash, stamp;
    shoal_key_init(&hash);
    shoal_key_add_bytes(&hash, entry->hash, SHOAL_HASH_SIZE);
    shoal_key_init(&stamp);
    shoal_key_add_u64(&stamp, entry->wall_ms);
    shoal_key_add_u64(&stamp, entry->logic);

    shoal_key_init(&keys->by_hash);
    shoal_key_add_key(&keys->by_hash, &chain->dataset);
    shoal_key_add_key(&keys->by_hash, &hash);

    shoal_key_init(&keys->locator);
    shoal_key_add_key(&keys->locator, &chain->node);
    shoal_key_add_key(&keys->locator, &stamp);

    shoal_key_init(&keys->by_hlc);
    shoal_key_add_key(&keys->by_hlc, &chain->dataset);
    shoal_key_add_key(&keys->by_hlc, &stamp);
    shoal_key_add_key(&keys->by_hlc, &chain->node);
    shoal_key_add_key(&keys->by_hlc, &hash);

    shoal_key_init(&keys->by_node_hlc);
    shoal_key_add_key(&keys->by_node_hlc, &chain->dataset);
    shoal_key_add_key(&keys->by_node_hlc, &chain->node);
    shoal_key_add_key(&keys->by_node_hlc, &stamp);
    shoal_key_add_key(&keys->by_node_hlc, &hash);

    shoal_key_init(&keys->kv);
    shoal_key_add_key(&keys->kv, &chain->dataset);
    shoal_key_add_str(&keys->kv, entry->key ? entry->key : "");
}
