/*  shoal_oplog_chain: entries built the way a node builds them, for the
    oplog tests. Header only: each test that includes it gets its own copy.
*/
#ifndef SHOAL_OPLOG_CHAIN_H_INCLUDED
#define SHOAL_OPLOG_CHAIN_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal_oplog.h"
#include "shoal_store.h"
#include "shoal_alloc.h"

//  A node's chain while a test builds its entries: the hash to link to.
typedef struct {
    const char *node;               //  the node writing
    bool has_prev;                  //  false until its first entry
    uint8_t prev[SHOAL_HASH_SIZE];  //  its last entry
} chain_t;

//  Builds an entry the way a node does, owned by ENTRY, linked to CHAIN's
//  last entry and hashed; CHAIN then ends at it.
static inline void
s_entry_init(shoal_oplog_entry_t *entry, chain_t *chain, const char *dataset, const char *key,
             shoal_oplog_op_t op, const char *value, uint64_t wall_ms, uint32_t logic)
{
    memset(entry, 0, sizeof *entry);
    entry->dataset = shoal_strdup(dataset);
    entry->key = shoal_strdup(key);
    entry->op = op;
    if (value) {
        entry->value_size = strlen(value);
        entry->value = (uint8_t *) shoal_strdup(value);
    }
    entry->wall_ms = wall_ms;
    entry->logic = logic;
    entry->node = shoal_strdup(chain->node);
    entry->has_prev = chain->has_prev;
    memcpy(entry->prev_hash, chain->prev, SHOAL_HASH_SIZE);
    shoal_oplog_entry_hash(entry, entry->hash);
    chain->has_prev = true;
    memcpy(chain->prev, entry->hash, SHOAL_HASH_SIZE);
}

static inline void
s_entries_clear(shoal_oplog_entry_t *entries, size_t count)
{
    for (size_t i = 0; i < count; i++)
        shoal_oplog_entry_codec.clear(&entries[i]);
}

//  Every key and value of CF in STORE under DATASET (NULL: the whole
//  family), length-prefixed, as one buffer the caller frees; *SIZE its size.
//  Two stores hold the same in a family when their dumps are equal.
static inline char *
s_family_dump(shoal_store_t *store, shoal_cf_t cf, const char *dataset, size_t *size)
{
    char *text = NULL;
    FILE *out = open_memstream(&text, size);
    if (!out)
        return NULL;
    shoal_key_t prefix;
    shoal_key_init(&prefix);
    if (dataset)
        shoal_key_add_str(&prefix, dataset);
    shoal_iter_t *iter = dataset ? shoal_iter_prefix(store, cf, &prefix) : shoal_iter_new(store, cf, NULL, NULL);
    for (bool on = shoal_iter_first(iter); on; on = shoal_iter_next(iter)) {
        size_t key_size, value_size;
        const uint8_t *key = shoal_iter_key(iter, &key_size);
        const uint8_t *value = shoal_iter_value(iter, &value_size);
        fwrite(&key_size, sizeof key_size, 1, out);
        fwrite(key, 1, key_size, out);
        fwrite(&value_size, sizeof value_size, 1, out);
        fwrite(value, 1, value_size, out);
    }
    shoal_iter_destroy(&iter);
    fclose(out);
    return text;
}

#endif
