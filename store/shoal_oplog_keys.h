/*  shoal_oplog_keys: the keys of the operation log's column families.

    The layout shoal_oplog.h tables, built in one place for the two modules
    that write those families: shoal_oplog (one batch at a time) and
    shoal_oplog_bulk (table files). Store code only; the node never builds
    a key by hand.
*/
#ifndef SHOAL_OPLOG_KEYS_H_INCLUDED
#define SHOAL_OPLOG_KEYS_H_INCLUDED

#include <stdint.h>

#include "shoal_key.h"
#include "shoal_oplog_codec.h"

//  oplog_by_hash: (dataset, hash).
void shoal_oplog_key_by_hash(shoal_key_t *key, const char *dataset, const uint8_t *hash);

//  oplog_by_hash's value, the entry's locator: (node, wall, logic), what
//  its oplog_by_node_hlc key holds besides its oplog_by_hash key. Built
//  into VALUE, a tuple as keys are.
void shoal_oplog_locator(shoal_key_t *value, const shoal_oplog_entry_t *entry);

//  The oplog_by_node_hlc key of the entry HASH of DATASET, which LOCATOR
//  (SIZE bytes, as oplog_by_hash holds it) locates. Returns 0, or -1 when
//  LOCATOR is not one.
int shoal_oplog_key_located(shoal_key_t *key, const char *dataset, const uint8_t *hash,
                            const uint8_t *locator, size_t size);

//  oplog_by_hlc: (dataset, wall, logic, node, hash).
void shoal_oplog_key_by_hlc(shoal_key_t *key, const shoal_oplog_entry_t *entry);

//  oplog_by_node_hlc: (dataset, node, wall, logic, hash).
void shoal_oplog_key_by_node_hlc(shoal_key_t *key, const shoal_oplog_entry_t *entry);

//  The same key from its elements.
void shoal_oplog_key_by_node_hlc_of(shoal_key_t *key, const char *dataset, const char *node,
                                    uint64_t wall_ms, uint64_t logic, const uint8_t *hash);

//  oplog_node_head: (dataset, node); also the prefix of a node's keys in
//  oplog_by_node_hlc.
void shoal_oplog_key_head(shoal_key_t *key, const char *dataset, const char *node);

//  kv: (dataset, key).
void shoal_oplog_key_kv(shoal_key_t *key, const char *dataset, const char *name);

//  (dataset): the prefix of a dataset's keys in every family.
void shoal_oplog_key_dataset(shoal_key_t *key, const char *dataset);

//  The elements every key of one chain (NODE's entries in DATASET) starts
//  with or holds, encoded once for all its entries: a bulk load lays out
//  four keys and a locator for each entry it takes, and building each
//  element anew for each was a fifth of its work.
typedef struct {
    shoal_key_t dataset;        //  (dataset)
    shoal_key_t node;           //  (node)
} shoal_oplog_chain_keys_t;

void shoal_oplog_chain_keys(shoal_oplog_chain_keys_t *chain, const char *dataset, const char *node);

//  The keys of ENTRY, an entry of CHAIN's chain, exactly as the calls above
//  lay them out: its oplog_by_hash key and locator, its oplog_by_hlc and
//  oplog_by_node_hlc keys, and its kv key.
typedef struct {
    shoal_key_t by_hash;        //  (dataset, hash)
    shoal_key_t locator;        //  (node, wall, logic)
    shoal_key_t by_hlc;         //  (dataset, wall, logic, node, hash)
    shoal_key_t by_node_hlc;    //  (dataset, node, wall, logic, hash)
    shoal_key_t kv;             //  (dataset, key)
} shoal_oplog_entry_keys_t;

void shoal_oplog_entry_keys(shoal_oplog_entry_keys_t *keys, const shoal_oplog_chain_keys_t *chain,
                            const shoal_oplog_entry_t *entry);

#endif
