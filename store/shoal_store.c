/*  shoal_store: the node's one RocksDB, as shoal_store.h describes it.

    Why it is shaped so:
    - Every RocksDB handle a call needs (options, write and read options, the
      column family handles) is made once at open and reused: making options
      per call would cost more than a small put.
    - Every failure goes through s_store_fail, which logs one line and keeps
      the text, so that whatever returned -1 has left shoal_store_error
      accurate, RocksDB's errors and the store's own refusals alike.
    - The directory lock is flock(2), not a POSIX record lock. A record lock
      belongs to the process, so a second open in the same process would get
      it again, and closing either descriptor would drop it for both. An flock
      belongs to the open file, so a second open fails wherever it comes from.
    - A batch that was handed an overflowed key remembers why and is refused
      whole at write time: the put calls return nothing, and a batch that
      silently lost one of its writes would break the atomicity it exists for.
    - A shared handle (shoal_store_share) borrows every RocksDB object of its
      owner and has only its error text of its own: the error is the one
      piece of store state that calls write, so it is the one a second
      thread must not share.
    - Table files are written without compression: a bulk load is bounded
      by the CPU here, and compaction compresses the data later, when it
      rewrites it anyway.
*/
#include "shoal_store.h"
#include "shoal_wal.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <rocksdb/c.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

//  The lock file inside the data directory; it holds the holder's pid.
#define STORE_LOCK_NAME "shoald.lock"
//  Room for a pid in decimal with its newline.
#define STORE_PID_TEXT_MAX 32
//  Room for a program name from /proc/PID/comm (the kernel keeps 16 bytes).
#define STORE_COMM_MAX 64
//  Room for a codec's error message.
#define STORE_CODEC_ERROR_MAX 512
//  Room for why a batch is refused (a longer reason is cut).
#define STORE_REFUSAL_MAX 512
//  Defaults for shoal_store_options_default.
#define STORE_DEFAULT_CACHE_BYTES (64 * 1024 * 1024)
//  Bloom filter bits per key in every table file (about 1% false positives).
#define STORE_BLOOM_BITS_PER_KEY 10
//  Bytes a walk (shoal_iter_prefix_walk) reads ahead of where it stands. A
//  catch-up's page walks a fresh iterator, and each table file it touches
//  reads this much at its first block: 768 KiB of entries with their keys
//  and block trailers fit in one read. 2 MiB read more than twice what a
//  page used, all of it copied out of the page cache and dropped with the
//  iterator.
#define STORE_WALK_READAHEAD (1024 * 1024)
//  Share of a memtable spent on its own bloom filter, in the families below.
#define STORE_MEMTABLE_BLOOM_RATIO 0.02
//  RocksDB's WALRecoveryMode values: refuse any damage in the log but a
//  record cut short at its very end, or skip the damaged records and keep
//  every intact one.
#define STORE_WAL_TOLERATE_TORN_TAIL 0
#define STORE_WAL_SKIP_CORRUPTED 3
//  RocksDB's own info log: warnings only, in a few small files. It lives
//  in the data directory and must not be what fills a small disk.
#define STORE_INFO_LOG_LEVEL_WARN 2
//  The write-ahead log kept at most (then RocksDB flushes the families that
//  hold its oldest file). Its default, four times every family's memtables,
//  let a family written seldom hold every log file since its last flush: a
//  start after a crash then replayed the whole history (a million oplog
//  entries: 21 s). Bounded, a start replays at most about this much.
#define STORE_MAX_WAL_BYTES (32 * 1024 * 1024)
#define STORE_INFO_LOG_FILE_BYTES (256 * 1024)
#define STORE_INFO_LOG_FILES 2
//  How many lost keys an open failure names before it says "...".
#define STORE_DAMAGE_KEYS_NAMED 32

//  RocksDB's names for shoal_cf_t, in the same order.
static const char *s_cf_names[SHOAL_CF_COUNT] = {
    [SHOAL_CF_DEFAULT] = "default",
    [SHOAL_CF_OPLOG_BY_HASH] = "oplog_by_hash",
    [SHOAL_CF_OPLOG_BY_HLC] = "oplog_by_hlc",
    [SHOAL_CF_OPLOG_BY_NODE_HLC] = "oplog_by_node_hlc",
    [SHOAL_CF_OPLOG_PREV_TO_HASH] = "oplog_prev_to_hash",
    [SHOAL_CF_OPLOG_NODE_HEAD] = "oplog_node_head",
    [SHOAL_CF_OPLOG_META] = "oplog_meta",
    [SHOAL_CF_KV] = "kv",
    [SHOAL_CF_CLAIMS] = "claims",
    [SHOAL_CF_COUNTERS] = "counters",
    [SHOAL_CF_MOVES] = "moves",
    [SHOAL_CF_LOCKS] = "locks",
    [SHOAL_CF_OBJECTS] = "objects",
    [SHOAL_CF_INSTANCES] = "instances",
    [SHOAL_CF_CLAIM_KEYS] = "claim_keys",
};

//  Families read by key where the key is often absent (the oplog's dedupe
//  read, head and kv reads before an append). Their memtables get a bloom
//  filter as well, so that a miss costs no skiplist search; other families
//  do without its memory.
static const bool s_cf_point_reads[SHOAL_CF_COUNT] = {
    [SHOAL_CF_OPLOG_BY_HASH] = true,
    [SHOAL_CF_OPLOG_NODE_HEAD] = true,
    [SHOAL_CF_KV] = true,
};

struct _shoal_store_t {
    char *dir;                          //  the data directory, as given
    shoal_store_t *owner;               //  the handle that opened the database; NULL in that one
    int lock_fd;                        //  DIR/shoald.lock, flocked while open; -1 before
    bool sync;                          //  writes that ask for an fsync get one
    rocksdb_t *db;                      //  the database
    rocksdb_options_t *options;         //  database and column family options
    rocksdb_options_t *point_options;   //  the same plus a memtable bloom filter
    rocksdb_options_t *entry_options;   //  the same in blocks of SHOAL_STORE_ENTRY_BLOCK_BYTES
    rocksdb_block_based_table_options_t *table_options;  //  carries the block cache
    rocksdb_block_based_table_options_t *entry_table_options;    //  the same in larger blocks
    rocksdb_cache_t *cache;             //  block cache shared by every column family
    rocksdb_column_family_handle_t *cfs[SHOAL_CF_COUNT];  //  indexed by shoal_cf_t
    rocksdb_writeoptions_t *write_plain;    //  the WAL is written, not fsynced
    rocksdb_writeoptions_t *write_sync;     //  the WAL is fsynced before a write returns
    rocksdb_readoptions_t *read_options;    //  for point reads
    rocksdb_ingestexternalfileoptions_t *ingest_options;    //  table files are moved in, not copied
    char *error;                        //  text of the last failure; NULL before any
    shoal_wal_report_t salvaged;        //  what a salvage open dropped from the log
    uint64_t reserve_bytes;             //  writes are refused while less is free (0: never)
    bool no_space;                      //  the last error was a lack of space
    const rocksdb_snapshot_t *snapshot; //  a snapshot handle's point in time (reads only); NULL otherwise
};

struct _shoal_batch_t {
    shoal_store_t *store;               //  the store it will be written to (borrowed)
    rocksdb_writebatch_t *handle;       //  the operations so far
    char refusal[STORE_REFUSAL_MAX];    //  why the batch must not be written; "" when it may
};

struct _shoal_table_t {
    shoal_store_t *store;               //  the store it is for (borrowed)
    shoal_cf_t cf;                      //  the column family it goes into
    char *path;                         //  the file
    rocksdb_options_t *options;         //  the family's options, uncompressed
    rocksdb_envoptions_t *env_options;  //  how the file is written
    rocksdb_sstfilewriter_t *writer;    //  open until finished
    size_t count;                       //  keys added
    bool finished;                      //  complete and durable (or empty)
    bool ingested;                      //  moved into the database
    bool failed;                        //  a call failed; the table is unusable
};

struct _shoal_iter_t {
    shoal_store_t *store;               //  the store read (borrowed)
    shoal_cf_t cf;                      //  the column family walked
    rocksdb_readoptions_t *options;     //  points at the bounds below
    rocksdb_iterator_t *handle;         //  RocksDB's iterator
    shoal_key_t lower;                  //  inclusive lower bound, RocksDB reads it in place
    shoal_key_t upper;                  //  exclusive upper bound, likewise
    bool refused;                       //  a call was handed an overflowed key
};

const char *
shoal_cf_name(shoal_cf_t cf)
{
    if ((int) cf < 0 || cf >= SHOAL_CF_COUNT)
        return "unknown";
    return s_cf_names[cf];
}

void
shoal_store_options_default(shoal_store_options_t *options)
{
    options->sync = true;
    options->cache_bytes = STORE_DEFAULT_CACHE_BYTES;
    options->create = true;
    options->salvage = false;
    options->reserve_bytes = SHOAL_STORE_DEFAULT_RESERVE_BYTES;
}

//  Keeps a printf-style message as the store's last error and logs it.
//  Returns -1 so that a failing path can end with `return s_store_fail(...)`.
static int
s_store_fail(shoal_store_t *self, const char *format, ...) CHECK_PRINTF(2);

static int
s_store_fail(shoal_store_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (text) {
        zsys_error("store: %s", text);
        zstr_free(&self->error);
        self->error = text;
    }
    self->no_space = false;
    return -1;
}

//  Keeps a RocksDB error, after a printf-style account of what was being
//  done, and frees it.
static int
s_store_fail_rocksdb(shoal_store_t *self, char *rocksdb_error, const char *format, ...)
    CHECK_PRINTF(3);

static int
s_store_fail_rocksdb(shoal_store_t *self, char *rocksdb_error, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = zsys_vprintf(format, args);
    va_end(args);
    s_store_fail(self, "%s: %s", what ? what : format, rocksdb_error);
    self->no_space = strstr(rocksdb_error, "No space left") || strstr(rocksdb_error, "NoSpace");
    zstr_free(&what);
    rocksdb_free(rocksdb_error);
    return -1;
}

//  Refuses a write while the file system holds less than the reserve. The
//  reserve is what RocksDB needs to finish what it started (a memtable's
//  flush, its own files): a write it cannot finish would leave the log
//  with a torn record and, in RocksDB's own checks, abort the process. So
//  the writes stop before the disk is full, and go on as soon as space is
//  back: nothing inside RocksDB ever saw the lack of it.
static int
s_store_check_space(shoal_store_t *self)
{
    //  Every write asks here first: a snapshot handle takes none.
    if (self->snapshot)
        return s_store_fail(self, "a snapshot of the store is read-only: nothing written");
    if (!self->reserve_bytes)
        return 0;
    struct statvfs fs;
    if (statvfs(self->dir, &fs) != 0)
        return 0;
    uint64_t free_bytes = (uint64_t) fs.f_bavail * fs.f_frsize;
    if (free_bytes >= self->reserve_bytes)
        return 0;
    s_store_fail(self, "no space: the data directory %s has %" PRIu64 " bytes free, less than the %" PRIu64
                 " kept in reserve; writes wait for space", self->dir, free_bytes, self->reserve_bytes);
    self->no_space = true;
    return -1;
}

//  "claims ("c-1")": how messages name a key. The caller frees it.
static char *
s_key_describe(shoal_cf_t cf, const void *bytes, size_t size)
{
    char *key_text = shoal_key_format(bytes, size);
    char *text = zsys_sprintf("%s %s", shoal_cf_name(cf), key_text ? key_text : "(?)");
    free(key_text);
    return text;
}

//  Refuses a key that overflowed while it was built: it is not the key its
//  builder meant, so reading or writing it would touch some other record.
static int
s_store_check_key(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key)
{
    assert((int) cf >= 0 && cf < SHOAL_CF_COUNT);
    if (!key->overflow)
        return 0;
    char *start = shoal_key_format(key->bytes, key->size);
    s_store_fail(self, "%s: refused a key longer than %d bytes (it starts %s)",
                 shoal_cf_name(cf), SHOAL_KEY_MAX, start ? start : "(?)");
    free(start);
    return -1;
}

//  Decodes VALUE, read at KEY in CF, with CODEC. Returns 0, or -1 with the
//  store's error naming the column family and the key.
static int
s_store_decode(shoal_store_t *self, shoal_cf_t cf, const void *key, size_t key_size,
               const void *value, size_t value_size, const shoal_codec_t *codec, void *record)
{
    char error[STORE_CODEC_ERROR_MAX];
    if (codec->decode(value, value_size, record, error, sizeof error) == 0)
        return 0;
    char *where = s_key_describe(cf, key, key_size);
    s_store_fail(self, "%s: value does not decode as %s: %s", where, codec->name, error);
    zstr_free(&where);
    return -1;
}

static rocksdb_writeoptions_t *
s_store_write_options(shoal_store_t *self, bool sync)
{
    return self->sync && sync ? self->write_sync : self->write_plain;
}

//  The options column family CF was opened with.
static rocksdb_options_t *
s_store_cf_options(shoal_store_t *self, shoal_cf_t cf)
{
    return cf == SHOAL_CF_OPLOG_BY_NODE_HLC ? self->entry_options
         : s_cf_point_reads[cf] ? self->point_options : self->options;
}

//  Names the process that holds the lock on FD: its pid as written in the
//  lock file and, when /proc shows it, its program name.
static void
s_store_fail_locked(shoal_store_t *self, int fd)
{
    char pid_text[STORE_PID_TEXT_MAX] = "";
    ssize_t got = pread(fd, pid_text, sizeof pid_text - 1, 0);
    pid_text[got > 0 ? got : 0] = 0;
    long pid = strtol(pid_text, NULL, 10);
    if (pid <= 0) {
        //  The holder has the lock but has not written its pid yet.
        s_store_fail(self, "data directory %s is in use by another process", self->dir);
        return;
    }
    char comm[STORE_COMM_MAX] = "";
    char comm_path[STORE_COMM_MAX];
    snprintf(comm_path, sizeof comm_path, "/proc/%ld/comm", pid);
    FILE *file = fopen(comm_path, "r");
    if (file) {
        if (!fgets(comm, sizeof comm, file))
            comm[0] = 0;
        comm[strcspn(comm, "\n")] = 0;
        fclose(file);
    }
    if (*comm)
        s_store_fail(self, "data directory %s is in use by pid %ld (%s)", self->dir, pid, comm);
    else
        s_store_fail(self, "data directory %s is in use by pid %ld", self->dir, pid);
}

//  Takes the exclusive lock on DIR/shoald.lock and writes our pid into it.
static int
s_store_lock(shoal_store_t *self)
{
    char *path = zsys_sprintf("%s/%s", self->dir, STORE_LOCK_NAME);
    if (!path)
        return s_store_fail(self, "out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int open_errno = errno;
    zstr_free(&path);
    if (fd < 0) {
        if (open_errno == ENOENT)
            return s_store_fail(self, "data directory %s does not exist", self->dir);
        return s_store_fail(self, "data directory %s: cannot open %s: %s",
                            self->dir, STORE_LOCK_NAME, strerror(open_errno));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            s_store_fail_locked(self, fd);
        else
            s_store_fail(self, "data directory %s: cannot lock %s: %s",
                         self->dir, STORE_LOCK_NAME, strerror(errno));
        close(fd);
        return -1;
    }
    //  The pid is written over the old one and the file cut after it, so a
    //  reader never finds it empty, only ever some holder's pid.
    char pid_text[STORE_PID_TEXT_MAX];
    int length = snprintf(pid_text, sizeof pid_text, "%ld\n", (long) getpid());
    if (pwrite(fd, pid_text, (size_t) length, 0) != length || ftruncate(fd, length) != 0) {
        s_store_fail(self, "data directory %s: cannot write %s: %s",
                     self->dir, STORE_LOCK_NAME, strerror(errno));
        close(fd);
        return -1;
    }
    self->lock_fd = fd;
    return 0;
}

static const char *
s_wal_cf_name(uint32_t cf)
{
    return cf < SHOAL_CF_COUNT ? s_cf_names[cf] : NULL;
}

//  Fails an open that RocksDB refused as corrupt, naming what its log lost
//  (file, byte offset, keys) when the log is where the damage is.
static int
s_store_fail_damaged(shoal_store_t *self, char *rocksdb_error)
{
    shoal_wal_report_t report = { 0 };
    char *scan_error = NULL;
    char *where = NULL;
    if (shoal_wal_check(self->dir, &report, &scan_error) == 0 && report.count)
        where = shoal_wal_report_describe(&report, s_wal_cf_name, STORE_DAMAGE_KEYS_NAMED);
    s_store_fail_rocksdb(self, rocksdb_error, "data directory %s: " SHOAL_STORE_DAMAGED "%s%s "
                         "(start with --salvage to serve what is intact and record what was lost)",
                         self->dir, where ? ": the write-ahead log " : "", where ? where : "");
    shoal_wal_report_clear(&report);
    free(scan_error);
    free(where);
    return -1;
}

//  The table format of the store's families: blocks cached in CACHE, a
//  bloom filter, blocks of BLOCK_BYTES (0: RocksDB's 4 KiB).
static rocksdb_block_based_table_options_t *
s_store_table_options(rocksdb_cache_t *cache, size_t block_bytes)
{
    rocksdb_block_based_table_options_t *table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(table, cache);
    //  A read of an absent key then skips every table file but ~1% of them
    //  unread: without it, the oplog's dedupe read costs more than the
    //  append's writes once the log outgrows the block cache. The options
    //  take the policy over.
    rocksdb_block_based_options_set_filter_policy(table,
        rocksdb_filterpolicy_create_bloom_full(STORE_BLOOM_BITS_PER_KEY));
    if (block_bytes)
        rocksdb_block_based_options_set_block_size(table, block_bytes);
    return table;
}

//  Opens RocksDB in DIR with every column family of shoal_cf_t.
static int
s_store_open_db(shoal_store_t *self, const shoal_store_options_t *options)
{
    self->options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(self->options, options->create);
    rocksdb_options_set_create_missing_column_families(self->options, 1);
    //  A log record that does not check out is damage, never the end of the
    //  log: RocksDB's default would stop there and open without a word,
    //  losing every acknowledged write after it. Only a record cut short at
    //  the very end of the log is taken as the end: that is a write torn by
    //  a crash or a full disk, never acknowledged (a write is acknowledged
    //  once its whole record is in the log). A salvage open skips the
    //  damaged records (they were read and reported before) and keeps the
    //  rest.
    rocksdb_options_set_paranoid_checks(self->options, 1);
    rocksdb_options_set_wal_recovery_mode(self->options, options->salvage
                                          ? STORE_WAL_SKIP_CORRUPTED : STORE_WAL_TOLERATE_TORN_TAIL);
    rocksdb_options_set_info_log_level(self->options, STORE_INFO_LOG_LEVEL_WARN);
    rocksdb_options_set_max_log_file_size(self->options, STORE_INFO_LOG_FILE_BYTES);
    rocksdb_options_set_keep_log_file_num(self->options, STORE_INFO_LOG_FILES);
    rocksdb_options_set_max_total_wal_size(self->options, STORE_MAX_WAL_BYTES);
    rocksdb_options_set_skip_stats_update_on_db_open(self->options, 1);
    self->cache = rocksdb_cache_create_lru(options->cache_bytes);
    self->table_options = s_store_table_options(self->cache, 0);
    rocksdb_options_set_block_based_table_factory(self->options, self->table_options);
    self->point_options = rocksdb_options_create_copy(self->options);
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(self->point_options,
                                                         STORE_MEMTABLE_BLOOM_RATIO);
    rocksdb_options_set_memtable_whole_key_filtering(self->point_options, 1);
    //  The entries (see SHOAL_STORE_ENTRY_BLOCK_BYTES).
    self->entry_table_options = s_store_table_options(self->cache, SHOAL_STORE_ENTRY_BLOCK_BYTES);
    self->entry_options = rocksdb_options_create_copy(self->options);
    rocksdb_options_set_block_based_table_factory(self->entry_options, self->entry_table_options);

    const rocksdb_options_t *cf_options[SHOAL_CF_COUNT];
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
        cf_options[cf] = s_store_cf_options(self, (shoal_cf_t) cf);
    char *error = NULL;
    self->db = rocksdb_open_column_families(self->options, self->dir, SHOAL_CF_COUNT,
                                            s_cf_names, cf_options, self->cfs, &error);
    if (error) {
        self->db = NULL;
        if (strstr(error, "Corruption"))
            return s_store_fail_damaged(self, error);
        return s_store_fail_rocksdb(self, error, "data directory %s: cannot open RocksDB",
                                    self->dir);
    }
    self->write_plain = rocksdb_writeoptions_create();
    self->write_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(self->write_sync, 1);
    self->read_options = rocksdb_readoptions_create();
    self->ingest_options = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(self->ingest_options, 1);
    return 0;
}

shoal_store_t *
shoal_store_new(const char *dir, const shoal_store_options_t *options, char **error_p)
{
    if (error_p)
        *error_p = NULL;
    shoal_store_options_t defaults;
    if (!options) {
        shoal_store_options_default(&defaults);
        options = &defaults;
    }
    shoal_store_t *self = (shoal_store_t *) zmalloc(sizeof(shoal_store_t));
    self->dir = strdup(dir);
    self->lock_fd = -1;
    self->sync = options->sync;
    self->reserve_bytes = options->reserve_bytes;

    int rc = 0;
    if (!self->dir)
        rc = s_store_fail(self, "out of memory");
    if (rc == 0 && options->create && zsys_dir_create("%s", dir) != 0)
        rc = s_store_fail(self, "cannot create data directory %s: %s", dir, strerror(errno));
    if (rc == 0)
        rc = s_store_lock(self);
    //  The logs are read before a salvage open consumes them: afterwards
    //  nothing would say what the skipped records held.
    char *scan_error = NULL;
    if (rc == 0 && options->salvage && shoal_wal_check(self->dir, &self->salvaged, &scan_error))
        rc = s_store_fail(self, "data directory %s: cannot read the write-ahead log to salvage it: %s",
                          self->dir, scan_error);
    free(scan_error);
    if (rc == 0)
        rc = s_store_open_db(self, options);
    if (rc != 0) {
        if (error_p && self->error)
            *error_p = shoal_strdup(self->error);
        shoal_store_destroy(&self);
    }
    return self;
}

shoal_store_t *
shoal_store_share(shoal_store_t *store)
{
    assert(store);
    shoal_store_t *owner = store->owner ? store->owner : store;
    shoal_store_t *self = (shoal_store_t *) zmalloc(sizeof(shoal_store_t));
    *self = *owner;
    self->owner = owner;
    self->dir = shoal_strdup(owner->dir);
    self->lock_fd = -1;
    self->error = NULL;
    self->snapshot = NULL;
    memset(&self->salvaged, 0, sizeof self->salvaged);
    return self;
}

shoal_store_t *
shoal_store_snapshot(shoal_store_t *store)
{
    shoal_store_t *self = shoal_store_share(store);
    self->snapshot = rocksdb_create_snapshot(self->db);
    self->read_options = rocksdb_readoptions_create();
    rocksdb_readoptions_set_snapshot(self->read_options, self->snapshot);
    //  A sweep reads everything once: it must not push out what the node reads often.
    rocksdb_readoptions_set_fill_cache(self->read_options, 0);
    return self;
}

void
shoal_store_destroy(shoal_store_t **self_p)
{
    assert(self_p);
    shoal_store_t *self = *self_p;
    if (!self)
        return;
    if (self->owner) {
        if (self->snapshot) {
            rocksdb_readoptions_destroy(self->read_options);
            rocksdb_release_snapshot(self->db, self->snapshot);
        }
        //  Everything but these is the owner's.
        free(self->dir);
        zstr_free(&self->error);
        free(self);
        *self_p = NULL;
        return;
    }
    if (self->db) {
        for (int cf = 0; cf < SHOAL_CF_COUNT; cf++)
            rocksdb_column_family_handle_destroy(self->cfs[cf]);
        rocksdb_close(self->db);
    }
    if (self->read_options)
        rocksdb_readoptions_destroy(self->read_options);
    if (self->ingest_options)
        rocksdb_ingestexternalfileoptions_destroy(self->ingest_options);
    if (self->write_sync)
        rocksdb_writeoptions_destroy(self->write_sync);
    if (self->write_plain)
        rocksdb_writeoptions_destroy(self->write_plain);
    if (self->options)
        rocksdb_options_destroy(self->options);
    if (self->point_options)
        rocksdb_options_destroy(self->point_options);
    if (self->entry_options)
        rocksdb_options_destroy(self->entry_options);
    if (self->table_options)
        rocksdb_block_based_options_destroy(self->table_options);
    if (self->entry_table_options)
        rocksdb_block_based_options_destroy(self->entry_table_options);
    if (self->cache)
        rocksdb_cache_destroy(self->cache);
    //  The lock goes last: until RocksDB is closed the directory is still ours.
    if (self->lock_fd >= 0)
        close(self->lock_fd);
    shoal_wal_report_clear(&self->salvaged);
    free(self->dir);
    zstr_free(&self->error);
    free(self);
    *self_p = NULL;
}

const shoal_wal_report_t *
shoal_store_salvaged(shoal_store_t *self)
{
    shoal_store_t *owner = self->owner ? self->owner : self;
    return &owner->salvaged;
}

const char *
shoal_store_cf_name_by_id(uint32_t cf)
{
    return s_wal_cf_name(cf);
}

const char *
shoal_store_dir(shoal_store_t *self)
{
    return self->dir;
}

const char *
shoal_store_error(shoal_store_t *self)
{
    return self->error ? self->error : "";
}

bool
shoal_store_error_no_space(shoal_store_t *self)
{
    return self->error && self->no_space;
}

int
shoal_store_space(shoal_store_t *self, uint64_t *free_bytes, uint64_t *reserve_bytes)
{
    struct statvfs fs;
    *reserve_bytes = self->reserve_bytes;
    *free_bytes = 0;
    if (statvfs(self->dir, &fs) != 0)
        return s_store_fail(self, "cannot measure the space of %s: %s", self->dir, strerror(errno));
    *free_bytes = (uint64_t) fs.f_bavail * fs.f_frsize;
    return 0;
}

int
shoal_store_stats(shoal_store_t *self, shoal_store_stats_t *stats)
{
    memset(stats, 0, sizeof *stats);
    rocksdb_t *db = self->owner ? self->owner->db : self->db;
    for (int cf = 0; cf < SHOAL_CF_COUNT; cf++) {
        rocksdb_column_family_handle_t *handle = self->owner ? self->owner->cfs[cf] : self->cfs[cf];
        uint64_t sst = 0, memtable = 0;
        if (rocksdb_property_int_cf(db, handle, "rocksdb.total-sst-files-size", &sst)
         || rocksdb_property_int_cf(db, handle, "rocksdb.cur-size-all-mem-tables", &memtable))
            return s_store_fail(self, "cannot read the size of column family %s", shoal_cf_name((shoal_cf_t) cf));
        stats->sst_bytes += sst;
        stats->memtable_bytes += memtable;
    }
    uint64_t rate = 0, stopped = 0;
    if (rocksdb_property_int(db, "rocksdb.actual-delayed-write-rate", &rate)
     || rocksdb_property_int(db, "rocksdb.is-write-stopped", &stopped))
        return s_store_fail(self, "%s", "cannot read the store's write stall state");
    stats->delayed_write_rate = rate;
    stats->write_stopped = stopped != 0;
    return 0;
}

//  Reads KEY in CF into a pinned slice (*SLICE_P stays NULL when the key is
//  absent), which saves RocksDB one copy of the value.
static int
s_store_read(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
             rocksdb_pinnableslice_t **slice_p)
{
    *slice_p = NULL;
    if (s_store_check_key(self, cf, key))
        return -1;
    char *error = NULL;
    *slice_p = rocksdb_get_pinned_cf(self->db, self->read_options, self->cfs[cf],
                                     (const char *) key->bytes, key->size, &error);
    if (error) {
        char *where = s_key_describe(cf, key->bytes, key->size);
        s_store_fail_rocksdb(self, error, "%s: read failed", where);
        zstr_free(&where);
        return -1;
    }
    return 0;
}

int
shoal_store_get(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                uint8_t **value_p, size_t *size_p)
{
    *value_p = NULL;
    *size_p = 0;
    rocksdb_pinnableslice_t *slice;
    if (s_store_read(self, cf, key, &slice))
        return -1;
    if (!slice)
        return 0;
    size_t size;
    const char *value = rocksdb_pinnableslice_value(slice, &size);
    //  One byte at least, so that an empty value is told from an absent one.
    uint8_t *copy = malloc(size ? size : 1);
    if (copy) {
        memcpy(copy, value, size);
        *value_p = copy;
        *size_p = size;
    }
    rocksdb_pinnableslice_destroy(slice);
    if (!copy)
        return s_store_fail(self, "out of memory for a %zu byte value", size);
    return 0;
}

int
shoal_store_get_record(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                       const shoal_codec_t *codec, void *record, bool *found)
{
    *found = false;
    rocksdb_pinnableslice_t *slice;
    if (s_store_read(self, cf, key, &slice))
        return -1;
    if (!slice)
        return 0;
    size_t size;
    const char *value = rocksdb_pinnableslice_value(slice, &size);
    int rc = s_store_decode(self, cf, key->bytes, key->size, value, size, codec, record);
    rocksdb_pinnableslice_destroy(slice);
    *found = rc == 0;
    return rc;
}

int
shoal_store_exists(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key, bool *found)
{
    *found = false;
    rocksdb_pinnableslice_t *slice;
    if (s_store_read(self, cf, key, &slice))
        return -1;
    *found = slice != NULL;
    if (slice)
        rocksdb_pinnableslice_destroy(slice);
    return 0;
}

//  Reports a failed write of KEY in CF.
static int
s_store_fail_write(shoal_store_t *self, char *rocksdb_error, shoal_cf_t cf, const shoal_key_t *key)
{
    char *where = s_key_describe(cf, key->bytes, key->size);
    s_store_fail_rocksdb(self, rocksdb_error, "%s: write failed", where);
    zstr_free(&where);
    return -1;
}

int
shoal_store_put(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key,
                const void *value, size_t size, bool sync)
{
    if (s_store_check_key(self, cf, key) || s_store_check_space(self))
        return -1;
    char *error = NULL;
    rocksdb_put_cf(self->db, s_store_write_options(self, sync), self->cfs[cf],
                   (const char *) key->bytes, key->size, value, size, &error);
    return error ? s_store_fail_write(self, error, cf, key) : 0;
}

int
shoal_store_delete(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *key, bool sync)
{
    if (s_store_check_key(self, cf, key) || s_store_check_space(self))
        return -1;
    char *error = NULL;
    rocksdb_delete_cf(self->db, s_store_write_options(self, sync), self->cfs[cf],
                      (const char *) key->bytes, key->size, &error);
    return error ? s_store_fail_write(self, error, cf, key) : 0;
}

shoal_batch_t *
shoal_batch_new(shoal_store_t *store)
{
    assert(store);
    shoal_batch_t *self = (shoal_batch_t *) zmalloc(sizeof(shoal_batch_t));
    self->store = store;
    self->handle = rocksdb_writebatch_create();
    return self;
}

void
shoal_batch_destroy(shoal_batch_t **self_p)
{
    assert(self_p);
    shoal_batch_t *self = *self_p;
    if (!self)
        return;
    rocksdb_writebatch_destroy(self->handle);
    free(self);
    *self_p = NULL;
}

//  Checks KEY for a batch operation. An overflowed key sets the store's error
//  and, the first time, the batch's refusal. Returns 0 or -1.
static int
s_batch_check_key(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key)
{
    if (s_store_check_key(self->store, cf, key) == 0)
        return 0;
    if (!*self->refusal)
        snprintf(self->refusal, sizeof self->refusal, "%s", shoal_store_error(self->store));
    return -1;
}

void
shoal_batch_put(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key,
                const void *value, size_t size)
{
    if (s_batch_check_key(self, cf, key) == 0)
        rocksdb_writebatch_put_cf(self->handle, self->store->cfs[cf],
                                  (const char *) key->bytes, key->size, value, size);
}

int
shoal_batch_put_record(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key,
                       const shoal_codec_t *codec, const void *record)
{
    if (s_batch_check_key(self, cf, key))
        return -1;
    uint8_t *bytes;
    size_t size;
    char error[STORE_CODEC_ERROR_MAX];
    if (codec->encode(record, &bytes, &size, error, sizeof error)) {
        char *where = s_key_describe(cf, key->bytes, key->size);
        s_store_fail(self->store, "%s: record does not encode as %s: %s", where, codec->name, error);
        zstr_free(&where);
        return -1;
    }
    rocksdb_writebatch_put_cf(self->handle, self->store->cfs[cf],
                              (const char *) key->bytes, key->size, (const char *) bytes, size);
    free(bytes);
    return 0;
}

void
shoal_batch_delete(shoal_batch_t *self, shoal_cf_t cf, const shoal_key_t *key)
{
    if (s_batch_check_key(self, cf, key) == 0)
        rocksdb_writebatch_delete_cf(self->handle, self->store->cfs[cf],
                                     (const char *) key->bytes, key->size);
}

void
shoal_batch_delete_range(shoal_batch_t *self, shoal_cf_t cf,
                         const shoal_key_t *begin, const shoal_key_t *end)
{
    if (s_batch_check_key(self, cf, begin) == 0 && s_batch_check_key(self, cf, end) == 0)
        rocksdb_writebatch_delete_range_cf(self->handle, self->store->cfs[cf],
                                           (const char *) begin->bytes, begin->size,
                                           (const char *) end->bytes, end->size);
}

uint64_t
shoal_count_add(uint64_t count, int64_t delta)
{
    if (delta < 0 && (uint64_t) -delta > count)
        return 0;
    return count + (uint64_t) delta;
}

size_t
shoal_batch_count(shoal_batch_t *self)
{
    return (size_t) rocksdb_writebatch_count(self->handle);
}

void
shoal_batch_clear(shoal_batch_t *self)
{
    rocksdb_writebatch_clear(self->handle);
    self->refusal[0] = 0;
}

int
shoal_store_write(shoal_store_t *self, shoal_batch_t *batch, bool sync)
{
    assert(batch->store == self);
    if (*batch->refusal)
        return s_store_fail(self, "batch refused, nothing written: %s", batch->refusal);
    if (s_store_check_space(self))
        return -1;
    char *error = NULL;
    rocksdb_write(self->db, s_store_write_options(self, sync), batch->handle, &error);
    return error ? s_store_fail_rocksdb(self, error, "batch write failed") : 0;
}

int
shoal_store_sync_log(shoal_store_t *self)
{
    char *error = NULL;
    rocksdb_flush_wal(self->db, 1, &error);
    return error ? s_store_fail_rocksdb(self, error, "cannot sync the write-ahead log") : 0;
}

static shoal_iter_t *
s_iter_new(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *lower, const shoal_key_t *upper,
           bool walk)
{
    if ((lower && s_store_check_key(store, cf, lower))
    ||  (upper && s_store_check_key(store, cf, upper)))
        return NULL;
    shoal_iter_t *self = (shoal_iter_t *) zmalloc(sizeof(shoal_iter_t));
    self->store = store;
    self->cf = cf;
    self->options = rocksdb_readoptions_create();
    //  RocksDB keeps pointers to the bounds, so they are copied into the
    //  iterator, which outlives the caller's keys.
    if (lower) {
        self->lower = *lower;
        rocksdb_readoptions_set_iterate_lower_bound(self->options,
            (const char *) self->lower.bytes, self->lower.size);
    }
    if (upper) {
        self->upper = *upper;
        rocksdb_readoptions_set_iterate_upper_bound(self->options,
            (const char *) self->upper.bytes, self->upper.size);
    }
    if (store->snapshot || walk)
        rocksdb_readoptions_set_fill_cache(self->options, 0);
    if (store->snapshot)
        rocksdb_readoptions_set_snapshot(self->options, store->snapshot);
    if (walk)
        rocksdb_readoptions_set_readahead_size(self->options, STORE_WALK_READAHEAD);
    self->handle = rocksdb_create_iterator_cf(store->db, self->options, store->cfs[cf]);
    return self;
}

shoal_iter_t *
shoal_iter_new(shoal_store_t *store, shoal_cf_t cf,
               const shoal_key_t *lower, const shoal_key_t *upper)
{
    return s_iter_new(store, cf, lower, upper, false);
}

static shoal_iter_t *
s_iter_prefix(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *prefix, bool walk)
{
    if (s_store_check_key(store, cf, prefix))
        return NULL;
    shoal_key_t upper;
    bool bounded = shoal_key_prefix_end(prefix, &upper) == 0;
    return s_iter_new(store, cf, prefix, bounded ? &upper : NULL, walk);
}

shoal_iter_t *
shoal_iter_prefix(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *prefix)
{
    return s_iter_prefix(store, cf, prefix, false);
}

shoal_iter_t *
shoal_iter_prefix_walk(shoal_store_t *store, shoal_cf_t cf, const shoal_key_t *prefix)
{
    return s_iter_prefix(store, cf, prefix, true);
}

void
shoal_iter_destroy(shoal_iter_t **self_p)
{
    assert(self_p);
    shoal_iter_t *self = *self_p;
    if (!self)
        return;
    rocksdb_iter_destroy(self->handle);
    rocksdb_readoptions_destroy(self->options);
    free(self);
    *self_p = NULL;
}

bool
shoal_iter_valid(shoal_iter_t *self)
{
    return !self->refused && rocksdb_iter_valid(self->handle);
}

bool
shoal_iter_first(shoal_iter_t *self)
{
    rocksdb_iter_seek_to_first(self->handle);
    return shoal_iter_valid(self);
}

bool
shoal_iter_last(shoal_iter_t *self)
{
    rocksdb_iter_seek_to_last(self->handle);
    return shoal_iter_valid(self);
}

//  An iterator handed an overflowed key stays refused: where it would have
//  landed is unknowable, and shoal_iter_status then reports the error.
static bool
s_iter_check_key(shoal_iter_t *self, const shoal_key_t *key)
{
    if (s_store_check_key(self->store, self->cf, key))
        self->refused = true;
    return !self->refused;
}

bool
shoal_iter_seek(shoal_iter_t *self, const shoal_key_t *key)
{
    if (!s_iter_check_key(self, key))
        return false;
    rocksdb_iter_seek(self->handle, (const char *) key->bytes, key->size);
    return shoal_iter_valid(self);
}

bool
shoal_iter_seek_prev(shoal_iter_t *self, const shoal_key_t *key)
{
    if (!s_iter_check_key(self, key))
        return false;
    rocksdb_iter_seek_for_prev(self->handle, (const char *) key->bytes, key->size);
    return shoal_iter_valid(self);
}

//  RocksDB requires a valid iterator to step, so stepping off either end
//  stays off it instead.
bool
shoal_iter_next(shoal_iter_t *self)
{
    if (!shoal_iter_valid(self))
        return false;
    rocksdb_iter_next(self->handle);
    return shoal_iter_valid(self);
}

bool
shoal_iter_prev(shoal_iter_t *self)
{
    if (!shoal_iter_valid(self))
        return false;
    rocksdb_iter_prev(self->handle);
    return shoal_iter_valid(self);
}

const uint8_t *
shoal_iter_key(shoal_iter_t *self, size_t *size)
{
    *size = 0;
    if (!shoal_iter_valid(self))
        return NULL;
    return (const uint8_t *) rocksdb_iter_key(self->handle, size);
}

const uint8_t *
shoal_iter_value(shoal_iter_t *self, size_t *size)
{
    *size = 0;
    if (!shoal_iter_valid(self))
        return NULL;
    return (const uint8_t *) rocksdb_iter_value(self->handle, size);
}

int
shoal_iter_record(shoal_iter_t *self, const shoal_codec_t *codec, void *record)
{
    if (!shoal_iter_valid(self))
        return s_store_fail(self->store, "%s: no record to decode: the iterator is not on a key",
                            shoal_cf_name(self->cf));
    size_t key_size, value_size;
    const char *key = rocksdb_iter_key(self->handle, &key_size);
    const char *value = rocksdb_iter_value(self->handle, &value_size);
    return s_store_decode(self->store, self->cf, key, key_size, value, value_size, codec, record);
}

int
shoal_iter_status(shoal_iter_t *self)
{
    if (self->refused)
        return -1;
    char *error = NULL;
    rocksdb_iter_get_error(self->handle, &error);
    if (!error)
        return 0;
    return s_store_fail_rocksdb(self->store, error, "%s: iteration failed",
                                shoal_cf_name(self->cf));
}

int64_t
shoal_store_count(shoal_store_t *self, shoal_cf_t cf, const shoal_key_t *prefix)
{
    shoal_iter_t *iter = prefix ? shoal_iter_prefix(self, cf, prefix)
                                : shoal_iter_new(self, cf, NULL, NULL);
    if (!iter)
        return -1;
    int64_t count = 0;
    for (bool on_key = shoal_iter_first(iter); on_key; on_key = shoal_iter_next(iter))
        count++;
    if (shoal_iter_status(iter))
        count = -1;
    shoal_iter_destroy(&iter);
    return count;
}

// ---------------------------------------------------------------------------
//  Table files

shoal_table_t *
shoal_table_new(shoal_store_t *store, shoal_cf_t cf, const char *path)
{
    assert(store && path);
    assert((int) cf >= 0 && cf < SHOAL_CF_COUNT);
    shoal_table_t *self = (shoal_table_t *) zmalloc(sizeof(shoal_table_t));
    self->store = store;
    self->cf = cf;
    self->path = strdup(path);
    self->options = rocksdb_options_create_copy(s_store_cf_options(store, cf));
    rocksdb_options_set_compression(self->options, rocksdb_no_compression);
    self->env_options = rocksdb_envoptions_create();
    self->writer = rocksdb_sstfilewriter_create(self->env_options, self->options);
    char *error = NULL;
    if (self->path)
        rocksdb_sstfilewriter_open(self->writer, self->path, &error);
    if (!self->path || error) {
        if (error)
            s_store_fail_rocksdb(store, error, "%s: cannot create table file %s",
                                 shoal_cf_name(cf), path);
        else
            s_store_fail(store, "out of memory");
        shoal_table_destroy(&self);
    }
    return self;
}

void
shoal_table_destroy(shoal_table_t **self_p)
{
    assert(self_p);
    shoal_table_t *self = *self_p;
    if (!self)
        return;
    if (self->writer)
        rocksdb_sstfilewriter_destroy(self->writer);
    if (self->path && !self->ingested)
        unlink(self->path);
    if (self->env_options)
        rocksdb_envoptions_destroy(self->env_options);
    if (self->options)
        rocksdb_options_destroy(self->options);
    free(self->path);
    free(self);
    *self_p = NULL;
}

int
shoal_table_put(shoal_table_t *self, const void *key, size_t key_size, const void *value,
                size_t size)
{
    if (self->failed || self->finished)
        return s_store_fail(self->store, "%s: table file %s takes no more keys",
                            shoal_cf_name(self->cf), self->path);
    if (key_size > SHOAL_KEY_MAX) {
        self->failed = true;
        char *start = shoal_key_format(key, SHOAL_KEY_MAX);
        s_store_fail(self->store, "%s: refused a key longer than %d bytes (it starts %s)",
                     shoal_cf_name(self->cf), SHOAL_KEY_MAX, start ? start : "(?)");
        free(start);
        return -1;
    }
    char *error = NULL;
    rocksdb_sstfilewriter_put(self->writer, (const char *) key, key_size, (const char *) value,
                              size, &error);
    if (error) {
        self->failed = true;
        char *where = s_key_describe(self->cf, key, key_size);
        s_store_fail_rocksdb(self->store, error, "%s: table file %s refused it", where,
                             self->path);
        zstr_free(&where);
        return -1;
    }
    self->count++;
    return 0;
}

size_t
shoal_table_count(shoal_table_t *self)
{
    return self->count;
}

int
shoal_table_finish(shoal_table_t *self)
{
    if (self->failed)
        return s_store_fail(self->store, "%s: table file %s failed earlier",
                            shoal_cf_name(self->cf), self->path);
    if (self->finished)
        return 0;
    self->finished = true;
    //  RocksDB refuses to finish a file with no key; there is nothing to write.
    if (self->count == 0)
        return 0;
    char *error = NULL;
    rocksdb_sstfilewriter_finish(self->writer, &error);
    if (error) {
        self->failed = true;
        return s_store_fail_rocksdb(self->store, error, "%s: cannot complete table file %s",
                                    shoal_cf_name(self->cf), self->path);
    }
    return 0;
}

int
shoal_store_ingest(shoal_store_t *self, shoal_table_t *table)
{
    assert(table->store == self);
    if (!table->finished || table->failed)
        return s_store_fail(self, "%s: table file %s is not finished", shoal_cf_name(table->cf),
                            table->path);
    if (table->count == 0 || table->ingested)
        return 0;
    if (s_store_check_space(self))
        return -1;
    char *error = NULL;
    const char *files[] = { table->path };
    rocksdb_ingest_external_file_cf(self->db, self->cfs[table->cf], files, 1,
                                    self->ingest_options, &error);
    if (error)
        return s_store_fail_rocksdb(self, error, "%s: cannot ingest table file %s",
                                    shoal_cf_name(table->cf), table->path);
    table->ingested = true;
    return 0;
}

int
shoal_store_pause_compaction(shoal_store_t *self, shoal_cf_t cf, bool paused)
{
    assert((int) cf >= 0 && cf < SHOAL_CF_COUNT);
    const char *keys[] = { "disable_auto_compactions" };
    const char *values[] = { paused ? "true" : "false" };
    char *error = NULL;
    rocksdb_set_options_cf(self->db, self->cfs[cf], 1, keys, values, &error);
    if (error)
        return s_store_fail_rocksdb(self, error, "%s: cannot %s automatic compaction", shoal_cf_name(cf),
                                    paused ? "pause" : "resume");
    return 0;
}

int
shoal_store_level0_files(shoal_store_t *self, shoal_cf_t cf, uint64_t *files)
{
    assert((int) cf >= 0 && cf < SHOAL_CF_COUNT);
    *files = 0;
    //  A property of a level is text: RocksDB has no number for it.
    char *text = rocksdb_property_value_cf(self->db, self->cfs[cf], "rocksdb.num-files-at-level0");
    char *end = NULL;
    errno = 0;
    unsigned long long value = text ? strtoull(text, &end, 10) : 0;
    bool read = text && end != text && *end == '\0' && errno == 0;
    rocksdb_free(text);
    if (!read)
        return s_store_fail(self, "%s: cannot read how many table files are in level 0", shoal_cf_name(cf));
    *files = (uint64_t) value;
    return 0;
}
