/*  shoal_store: the node's one RocksDB, its column families and typed records.

    store/ is the only code that includes rocksdb/c.h. Every RocksDB error
    becomes -1 here plus one log line, and the last error's text is kept for
    the caller (shoal_store_error) so that a reply or a test can name it.

    Keys are shoal_key_t tuples. Values are opaque bytes or typed records
    encoded by a shoal_codec_t, validated on write and on read: a value that
    does not decode is an error that names the column family and the key.

    Only one process opens a data directory: open takes an exclusive lock on
    DIR/shoald.lock (holding the holder's pid) before RocksDB, and a second
    opener fails at once with a message naming the directory and the holder.

    A store handle belongs to one thread (its last error is the handle's).
    Another thread that needs the same database takes a handle of its own
    with shoal_store_share. Bulk loads bypass the write-ahead log and the
    memtable: they write sorted table files (shoal_table_t) and ingest them.
*/
#ifndef SHOAL_STORE_H_INCLUDED
#define SHOAL_STORE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_key.h"
#include "shoal_record.h"
#include "shoal_wal.h"

//  The words an open failure starts its account with when the data is
//  damaged (the write-ahead log or a table file does not check out), as
//  opposed to a directory that cannot be opened at all.
#define SHOAL_STORE_DAMAGED "the store is damaged"

//  oplog_by_node_hlc, which holds the entries and is read in long ordered
//  walks (a catch-up's pages, reconcile, a migration), is written in blocks
//  of this many bytes; the other families in RocksDB's 4 KiB. A walk then
//  looks up, checks and steps into a quarter as many blocks, and an entry
//  read alone reads 16 KiB where it read 4. bench_sync 1000000, six
//  repetitions of each alternated: the node serving a catch-up took 0.82 s
//  of CPU instead of 1.01, and the catch-up 2.41 s instead of 2.60
//  (medians).
#define SHOAL_STORE_ENTRY_BLOCK_BYTES (16 * 1024)

//  The column families, in design order. SHOAL_CF_DEFAULT is RocksDB's own.
typedef enum {
    SHOAL_CF_DEFAULT = 0,
    SHOAL_CF_OPLOG_BY_HASH,
    SHOAL_CF_OPLOG_BY_HLC,
    SHOAL_CF_OPLOG_BY_NODE_HLC,
    SHOAL_CF_OPLOG_PREV_TO_HASH,        //  retired: kept so that older stores open (see shoal_oplog.h)
    SHOAL_CF_OPLOG_NODE_HEAD,
    SHOAL_CF_OPLOG_META,
    SHOAL_CF_KV,
    SHOAL_CF_CLAIMS,
    SHOAL_CF_COUNTERS,
    SHOAL_CF_MOVES,
    SHOAL_CF_LOCKS,
    SHOAL_CF_OBJECTS,
    SHOAL_CF_INSTANCES,
    SHOAL_CF_CLAIM_KEYS,                //  each claim's own key space (shoal_key_space.h)
    SHOAL_CF_COUNT
} shoal_cf_t;

//  The RocksDB name of CF ("oplog_by_hash").
const char *shoal_cf_name(shoal_cf_t cf);

typedef struct {
    bool sync;                  //  fsync the WAL on every write that asks for it
    size_t cache_bytes;         //  block cache size
    bool create;                //  create the directory and database if missing
    bool salvage;               //  open past damaged log records, keeping what they lost in a report
    uint64_t reserve_bytes;     //  writes are refused while the file system has less free (0: never)
} shoal_store_options_t;

//  The free space writes stop at by default: a memtable's flush at RocksDB's
//  default size, so that what RocksDB started always finishes.
#define SHOAL_STORE_DEFAULT_RESERVE_BYTES (UINT64_C(64) * 1024 * 1024)

typedef struct _shoal_store_t shoal_store_t;
typedef struct _shoal_batch_t shoal_batch_t;
typedef struct _shoal_iter_t shoal_iter_t;

//  Fills OPTIONS with the defaults (sync on, 64 MiB cache, create on, no
//  salvage, SHOAL_STORE_DEFAULT_RESERVE_BYTES).
void shoal_store_options_default(shoal_store_options_t *options);

//  Opens the store in DIR with every column family, creating missing ones.
//  A write-ahead log that does not check out fails the open (unless
//  OPTIONS->salvage): the error starts with SHOAL_STORE_DAMAGED and names
//  the file, byte offset and keys of the damaged records.
//  Returns NULL on failure after logging why (and *ERROR_P, when not NULL,
//  receives the message; the caller frees it).
shoal_store_t *shoal_store_new(const char *dir, const shoal_store_options_t *options,
                               char **error_p);

//  What a salvage open dropped from the write-ahead log (empty otherwise,
//  or when nothing was damaged). Borrowed.
const shoal_wal_report_t *shoal_store_salvaged(shoal_store_t *self);

//  The name of the column family RocksDB numbers CF (the order the store
//  creates them in), or NULL when there is none.
const char *shoal_store_cf_name_by_id(uint32_t cf);

//  A second handle on STORE's database, for one other thread: the same data
//  and column families, but a last error of its own, so that the threads
//  share nothing mutable here (RocksDB itself is thread-safe). Destroying it
//  closes nothing; it must be destroyed before STORE. Never NULL.
shoal_store_t *shoal_store_share(shoal_store_t *store);

//  A read-only handle on STORE's database as it is now: every read and
//  iterator through it sees that one point in time, whatever is written
//  after, and every write through it is refused. For a sweep that reads
//  several families a slice at a time and must see them agree. Like a
//  shared handle it belongs to one thread, closes nothing and must be
//  destroyed before STORE; it holds the data of its point in time until
//  then. Never NULL.
shoal_store_t *shoal_store_snapshot(shoal_store_t *store);

//  Closes the database (flushing nothing that sync did not already make
//  durable) and releases the directory lock. Safe twice.
void shoal_store_destroy(shoal_store_t **self_p);

//  The directory the store lives in.
const char *shoal_store_dir(shoal_store_t *self);

//  The text of the last error any call on this store returned -1 for.
const char *shoal_store_error(shoal_store_t *self);

//  True when that last error was a lack of space: a write refused because
//  the file system holds less than the reserve (its text starts "no
//  space"), or RocksDB's own no-space error. Such a write can be retried
//  once space returns; the store takes writes again by itself.
bool shoal_store_error_no_space(shoal_store_t *self);

//  The file system's free bytes for the store and the reserve writes stop
//  at. Returns 0 or -1.
int shoal_store_space(shoal_store_t *self, uint64_t *free_bytes, uint64_t *reserve_bytes);

//  What RocksDB says of its size and of its writes, for the node's metrics.
//  Each figure is one of RocksDB's properties summed over the column
//  families: reading them takes no lock a write waits on.
typedef struct {
    uint64_t sst_bytes;             //  rocksdb.total-sst-files-size: the table files
    uint64_t memtable_bytes;        //  rocksdb.cur-size-all-mem-tables: not yet flushed
    uint64_t delayed_write_rate;    //  rocksdb.actual-delayed-write-rate: bytes/s while writes are slowed, else 0
    bool write_stopped;             //  rocksdb.is-write-stopped: writes wait for compaction
} shoal_store_stats_t;

//  Fills STATS. Returns 0, or -1 when a property cannot be read.
int shoal_store_stats(shoal_store_t *self, shoal_store_stats_t *stats);

//  Reads KEY in CF. Returns 0 with *VALUE_P a new buffer (caller frees) and
//  *SIZE_P its length, or 0 with *VALUE_P NULL when the key is absent, or -1.
int shoal_store_get(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                    uint8_t **value_p, size_t *size_p);

//  Reads and decodes a typed record. Returns 0 with *FOUND set, or -1 when the
//  read fails or the value does not decode (the error names CF and KEY).
int shoal_store_get_record(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                           const shoal_codec_t *codec, void *record, bool *found);

//  Sets *FOUND to whether KEY is in CF, without copying its value. Returns 0
//  or -1.
int shoal_store_exists(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key, bool *found);

//  Single writes, each its own atomic batch. SYNC asks for an fsync (honoured
//  only when the store was opened with sync on).
int shoal_store_put(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                    const void *value, size_t size, bool sync);
int shoal_store_delete(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key, bool sync);

//  A batch of writes across column families, applied atomically by
//  shoal_store_write. The batch borrows STORE.
shoal_batch_t *shoal_batch_new(shoal_store_t *store);
void shoal_batch_destroy(shoal_batch_t **self_p);
void shoal_batch_put(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key,
                     const void *value, size_t size);
//  Encodes RECORD with CODEC and adds it. Returns -1 (the batch unchanged, the
//  store's error set naming CF and KEY) when the record is not valid.
int shoal_batch_put_record(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key,
                           const shoal_codec_t *codec, const void *record);
void shoal_batch_delete(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key);
//  Deletes every key in [BEGIN, END) of CF.
void shoal_batch_delete_range(shoal_batch_t *self, shoal_cf_t cf,
                              const shoal_key_t *begin, const shoal_key_t *end);
//  Number of operations in the batch.
size_t shoal_batch_count(shoal_batch_t *self);
void shoal_batch_clear(shoal_batch_t *self);

//  COUNT plus DELTA for a count kept beside writes, stopping at zero: a
//  count that would go below it was wrong already (a damaged store), and
//  the owner's repair recounts it.
uint64_t shoal_count_add(uint64_t count, int64_t delta);

//  Applies BATCH atomically. Returns 0 or -1; a batch holding an overflowed
//  key is refused whole.
int shoal_store_write(shoal_store_t *self, shoal_batch_t *batch, bool sync);

//  Makes every write so far durable (fsyncs the write-ahead log), even in a
//  store opened without sync. Returns 0 or -1.
int shoal_store_sync_log(shoal_store_t *self);

//  An iterator over the keys of CF in [LOWER, UPPER); either bound may be NULL
//  for open. It reads a consistent snapshot taken at creation.
shoal_iter_t *shoal_iter_new(shoal_store_t *store, shoal_cf_t cf,
                             const shoal_key_t *lower, const shoal_key_t *upper);
//  An iterator over the keys of CF that start with PREFIX.
shoal_iter_t *shoal_iter_prefix(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *prefix);
//  The same, for a long walk in order that reads each block once (a page of
//  a catch-up): it reads ahead, and leaves the block cache to the reads
//  that come back to their blocks.
shoal_iter_t *shoal_iter_prefix_walk(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *prefix);
void shoal_iter_destroy(shoal_iter_t **self_p);

//  Positioning. Each returns true when the iterator is then on a key.
bool shoal_iter_first(shoal_iter_t *self);
bool shoal_iter_last(shoal_iter_t *self);
//  Positions on the first key >= KEY (seek) or the last key <= KEY (seek_prev).
bool shoal_iter_seek(shoal_iter_t *self, const shoal_key_t *key);
bool shoal_iter_seek_prev(shoal_iter_t *self, const shoal_key_t *key);
bool shoal_iter_next(shoal_iter_t *self);
bool shoal_iter_prev(shoal_iter_t *self);
bool shoal_iter_valid(shoal_iter_t *self);

//  The current key and value, borrowed until the iterator moves.
const uint8_t *shoal_iter_key(shoal_iter_t *self, size_t *size);
const uint8_t *shoal_iter_value(shoal_iter_t *self, size_t *size);
//  Decodes the current value as a typed record. Returns 0, or -1 with the
//  store's error naming CF and the key.
int shoal_iter_record(shoal_iter_t *self, const shoal_codec_t *codec, void *record);

//  0, or -1 when iteration stopped on an error rather than at the end (the
//  store's error says which).
int shoal_iter_status(shoal_iter_t *self);

//  Counts keys of CF under PREFIX (NULL: all). Returns the count or -1.
int64_t shoal_store_count(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *prefix);

//  A sorted table file for one column family, written outside the database
//  and then ingested whole. Its keys must come in strictly ascending byte
//  order (a key out of order is refused). The file is written uncompressed
//  and made durable by shoal_table_finish; ingesting it moves it into the
//  database, where its keys are newer than everything the family held. A
//  key costs a third of a memtable insert, and nothing goes through the
//  write-ahead log: this is how a large number of entries is loaded at once.
typedef struct _shoal_table_t shoal_table_t;

//  A new table file at PATH (an existing file there is replaced) for CF of
//  STORE (borrowed). Returns NULL, with the store's error set, on failure.
shoal_table_t *shoal_table_new(shoal_store_t *store, shoal_cf_t cf, const char *path);

//  Removes the file unless it was ingested. Safe twice.
void shoal_table_destroy(shoal_table_t **self_p);

//  Adds KEY (SIZE bytes, at most SHOAL_KEY_MAX) with VALUE. Returns 0, or -1
//  with the store's error naming the key (out of order, too long, a failed
//  write); the table is then unusable.
int shoal_table_put(shoal_table_t *self, const void *key, size_t key_size, const void *value,
                    size_t size);

//  Keys added so far.
size_t shoal_table_count(shoal_table_t *self);

//  Completes the file and makes it durable. Returns 0 or -1. A table with
//  no key writes no file.
int shoal_table_finish(shoal_table_t *self);

//  Moves the finished TABLE into its column family, atomically: readers see
//  all of its keys or none. Writes to the database wait while it goes in.
//  A table with no key is done at once. Returns 0 or -1.
int shoal_store_ingest(shoal_store_t *self, shoal_table_t *table);

//  Holds back (PAUSED true) or lets go the automatic compaction of CF. While
//  held back, table files ingested or flushed into CF that overlap what it
//  holds stay in level 0, where every read looks at each of them: a bulk
//  load holds compaction back while its batches go in, so as not to rewrite
//  them while it is still making more, and bounds the files it leaves so
//  (shoal_store_level0_files). A compaction under way goes on. A store
//  opens with compaction let go. Returns 0 or -1.
int shoal_store_pause_compaction(shoal_store_t *self, shoal_cf_t cf, bool paused);

//  Sets *FILES to the number of table files in level 0 of CF. Returns 0 or -1.
int shoal_store_level0_files(shoal_store_t *self, shoal_cf_t cf, uint64_t *files);

#endif
