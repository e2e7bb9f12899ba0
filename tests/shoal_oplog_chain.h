/*  shoal_oplog_chain: entries built the way a node builds them, for the
    oplog tests. Header only: each test that includes it gets its own copy.
*/
#ifndef SHOAL_OPLOG_CHAIN_H_INCLUDED
#define SHOAL_OPLOG_CHAIN_H_INCLUDED

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shoal_oplog.h"

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
    entry->dataset = strdup(dataset);
    entry->key = strdup(key);
    entry->op = op;
    if (value) {
        entry->value_size = strlen(value);
        entry->value = (uint8_t *) strdup(value);
    }
    entry->wall_ms = wall_ms;
    entry->logic = logic;
    entry->node = strdup(chain->node);
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

#endif
