/*  shoal_oplog_codec: the records of the operation log, and their codecs.

    Three records live in the oplog's column families: the entry itself
    (oplog_by_node_hlc), a materialised key of a dataset (kv) and a node's head
    (oplog_node_head). Each is a plain C struct here and a protobuf message in
    shoal.proto; the codecs below translate, and check on both sides what a
    record must hold, so a value that breaks the rules is refused when written
    and reported (naming its key) when read, never patched with a default.

    What the codecs do not check is the entry's hash against its fields: that
    takes libsodium, which protocol/ does not link, and it is the oplog's rule
    (store/shoal_oplog.c verifies every incoming entry).
*/
#ifndef SHOAL_OPLOG_CODEC_H_INCLUDED
#define SHOAL_OPLOG_CODEC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_record.h"

//  Size of an entry hash: BLAKE2b-256.
#define SHOAL_HASH_SIZE 32

//  What an entry does to its key. The numbers are OplogOp's in shoal.proto.
typedef enum {
    SHOAL_OPLOG_PUT = 1,
    SHOAL_OPLOG_DELETE = 2,
} shoal_oplog_op_t;

//  "put" or "delete"; NULL for a value outside the enumeration.
const char *shoal_oplog_op_name(shoal_oplog_op_t op);

//  One entry of the log. Strings and the value are owned by the record.
typedef struct {
    char *dataset;                      //  the dataset it belongs to, never empty
    char *key;                          //  the key it writes in that dataset
    shoal_oplog_op_t op;                //  put or delete
    uint8_t *value;                     //  the value put (may be NULL when empty)
    size_t value_size;                  //  its length
    uint64_t wall_ms;                   //  hybrid logical clock: wall part
    uint32_t logic;                     //  hybrid logical clock: logical counter
    char *node;                         //  the node that wrote it, never empty
    bool has_prev;                      //  false for the node's first entry in the dataset
    uint8_t prev_hash[SHOAL_HASH_SIZE]; //  the node's previous entry, when has_prev
    uint8_t hash[SHOAL_HASH_SIZE];      //  BLAKE2b-256 of every field above
} shoal_oplog_entry_t;

extern const shoal_codec_t shoal_oplog_entry_codec;

//  The exact size of ENTRY encoded, without encoding it (pages are sized
//  by it).
size_t shoal_oplog_entry_size(const shoal_oplog_entry_t *entry);

//  Reads the encoded entry BYTES (SIZE bytes) in place into ENTRY, checked
//  as the codec's decode checks it, without an allocation: its value
//  points into BYTES, and its dataset, key and node are copied, terminated,
//  into STRINGS (STRINGS_SIZE bytes). ENTRY borrows both and must not be
//  cleared. For loading many entries at once, where a decode's
//  allocations cost as much as the hash. Returns 0, or -1 with ERROR filled
//  (bytes that are no entry, a field out of its rules, strings longer than
//  STRINGS holds).
int shoal_oplog_entry_read(const uint8_t *bytes, size_t size, shoal_oplog_entry_t *entry,
                           char *strings, size_t strings_size, char *error, size_t error_size);

//  Copies SOURCE into DEST (which is overwritten, not cleared first).
//  Returns 0, or -1 with DEST empty when memory ran out.
int shoal_oplog_entry_copy(shoal_oplog_entry_t *dest, const shoal_oplog_entry_t *source);

//  A materialised key of a dataset: the winning entry's value, or a tombstone,
//  with what made it win. Owned fields as for the entry.
typedef struct {
    uint8_t *value;                     //  the value (NULL for a tombstone or an empty put)
    size_t value_size;                  //  its length
    bool deleted;                       //  a tombstone: keeps older puts from returning
    uint64_t wall_ms;                   //  the winning entry's clock, wall part
    uint32_t logic;                     //  the winning entry's clock, logical counter
    char *node;                         //  the winning entry's node, never empty
    uint8_t hash[SHOAL_HASH_SIZE];      //  the winning entry
    uint64_t epoch;                     //  its epoch, in datasets ordered by epoch; else 0
} shoal_kv_record_t;

extern const shoal_codec_t shoal_kv_codec;

//  Sets *DELETED to whether the encoded KvRecord BYTES (SIZE bytes) is a
//  tombstone, reading its fields' tags and lengths only: counting a
//  dataset's live keys reads every record, and a full decode of each cost
//  most of the count. Returns 0, or -1 exactly when the full decode
//  (shoal_kv_codec) fails, which then names what is wrong; *DELETED is what
//  that decode reads, whatever wire type the field arrives with.
int shoal_kv_record_deleted(const uint8_t *bytes, size_t size, bool *deleted);

//  A node's last entry in a dataset (the node is in the key).
typedef struct {
    uint64_t wall_ms;                   //  the entry's clock, wall part
    uint32_t logic;                     //  the entry's clock, logical counter
    uint8_t hash[SHOAL_HASH_SIZE];      //  the entry
} shoal_head_record_t;

extern const shoal_codec_t shoal_head_codec;

#endif
