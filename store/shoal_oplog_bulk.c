/*  shoal_oplog_bulk: the bulk load that shoal_oplog_bulk.h describes.

    Memory. A load keeps each entry's encoded bytes in one growing arena
    (the values of oplog_by_node_hlc, where each entry is stored; oplog_by_hash
    holds its locator), and what ordering
    needs of it (stamp, epoch, hash, chain) in a small item. As an entry is
    added, its key in each of the three log families and its kv key are
    laid out in the family's rows: the thread that adds (checking hashes)
    has time to spare, the one that writes has not. A kv row's value is
    the entry's value, in the arena: the kv record around it is made as
    its table is, for the rows that win only. Copied at add time, the
    records were a fifth of a load's memory, all of it fresh pages for the
    first batches, at a fault per 4 KiB on a virtual machine: made at write
    time instead, adding took 16% less CPU time and writing 5% less (a
    million entries in batches of 131072, three runs each). Everything is
    addressed by offset, since the arenas move as they grow, and kept
    between writes: a load reuses its memory instead of faulting in fresh
    pages for every batch.

    Every growing array is a private mapping of its own, grown by mremap:
    the kernel moves its pages instead of realloc copying them, and, past
    2 MiB, asks for transparent huge pages (one fault per 2 MiB). A load
    writes a few hundred MB into fresh memory before its first batch is
    full; on a virtual machine where each 4 KiB fault traps to the
    hypervisor, realloc's copies and faults were a third of a catch-up
    (bench_sync: 4.2 s against 3.4 s). shoal_oplog_bulk_release gives the
    memory back when loads stop.

    Huge pages only cover 2 MiB windows aligned inside a mapping, so past
    2 MiB an array moves into a mapping aligned to one (shoal_map_huge).
    And a large load (its options say so: the loader's) starts each array
    as a whole huge page: the first 2 MiB of each array, in 4 KiB pages,
    were 11,400 of the loader's faults in a catch-up of 1,000,000
    entries, and a fault costs about 11 us here against a third of that
    per 4 KiB of a huge page. Starting huge, the loader's thread took 160
    faults and 1.07 s of CPU instead of 11,400 and 1.41 s (medians of 3),
    and the whole of n2 26,000 faults instead of 43,000 (bench_sync,
    medians of 6).

    Sorting. At write time each family's rows are sorted: a family whose
    keys already arrive in order is only checked. Rows come in the order
    their entries were added, a run per chain, and in oplog_by_hlc and
    oplog_by_node_hlc (and in kv, when a chain writes its keys in order)
    each run is in key order already: the runs are merged, a run whose rest
    comes before every other run's next row going whole (runs of different
    datasets or origins never interleave), which costs a few comparisons
    per chain instead of a sort of every row. Families whose runs are not
    in order (oplog_by_hash, keyed by hash) are sorted by a radix sort on
    the eight key bytes after the prefix every key shares, which decide
    nearly every comparison. The sorts' scratch space is kept between
    writes, as the rows are: fresh memory for it cost a table maker as
    much in page faults as the sort itself (perf, bench_sync 200000).
*/
#include "shoal_oplog_bulk.h"
#include "shoal_oplog_keys.h"
#include "shoal_oplog_private.h"
#include "shoal_alloc.h"
#include "shoal_blake2b.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/mman.h>
#include <unistd.h>

//  Table files are named so, in the load's directory.
#define BULK_FILE_PREFIX "load-"
#define BULK_FILE_SUFFIX ".table"
//  Room for a table file's path.
#define BULK_PATH_MAX 4352
//  Room for a hash in hex with its terminator.
#define BULK_HEX_SIZE (SHOAL_HASH_SIZE * 2 + 1)
//  Room for a codec's error message.
#define BULK_CODEC_ERROR_MAX 512
//  Room for an entry's dataset, key and node, read in place: more than the
//  protocol lets them be together.
#define BULK_STRINGS_MAX 4096
//  Entries read and hashed together (shoal_oplog_entry_hash_many).
#define BULK_HASH_GROUP SHOAL_BLAKE2B_LANES_MAX
//  Smallest capacity a growing array starts with.
#define BULK_ARRAY_MIN 256
//  An array's mapping is a whole number of these once it is one at least,
//  aligned to one, so that the kernel can back it with huge pages.
#define BULK_HUGE_PAGE SHOAL_HUGE_PAGE
//  Times the kv state is read without the guard before the last attempt,
//  which holds the guard throughout: a dataset written to all the time
//  cannot keep a load from finishing.
#define BULK_KV_ATTEMPTS 3
//  Bits in a byte, for the sort prefix.
#define BULK_BYTE_BITS 8
//  The sort's digits: the eight bytes of a 64-bit prefix, a pass each.
#define BULK_RADIX_DIGITS 8
#define BULK_RADIX_BUCKETS 256u
//  Most runs (chains) a sort merges; a load of more chains is radix sorted.
#define BULK_MERGE_RUNS_MAX 64

//  The families a load writes besides kv, in the order they are ingested:
//  oplog_by_node_hlc last (see shoal_oplog_bulk.h).
#define BULK_FAMILIES 3
static const shoal_cf_t s_families[BULK_FAMILIES] = {
    SHOAL_CF_OPLOG_BY_HASH, SHOAL_CF_OPLOG_BY_HLC, SHOAL_CF_OPLOG_BY_NODE_HLC
};

//  The family of maker M: the log families in s_families order, then kv
//  (M == BULK_FAMILIES). Every family a load writes, for 0 <= M <= BULK_FAMILIES.
static shoal_cf_t
s_family(size_t m)
{
    return m < BULK_FAMILIES ? s_families[m] : SHOAL_CF_KV;
}

//  One entry added.
typedef struct {
    size_t chain;                       //  its chain, in the load's chains
    shoal_hlc_stamp_t stamp;            //  its stamp
    uint64_t epoch;                     //  its ordering epoch; 0 in other datasets
    bool deleted;                       //  a delete: its key's state would be a tombstone
    uint8_t hash[SHOAL_HASH_SIZE];      //  its hash
    size_t offset;                      //  of its encoded bytes in the arena
    size_t size;                        //  their length
} bulk_item_t;

//  One chain the load holds entries of.
typedef struct {
    char *dataset;                      //  the dataset
    char *node;                         //  the origin
    shoal_oplog_tip_t tip;              //  its last entry added
    int64_t entries;                    //  entries added, for the dataset's counts
    int64_t live;                       //  live keys the kv table adds (removes: below zero)
} bulk_chain_t;

//  One key and value of a family, as a table file takes them.
typedef struct {
    size_t key;                         //  offset of the key in the key arena
    size_t key_size;                    //  its length
    size_t value;                       //  offset of the value in its arena
    size_t value_size;                  //  its length
    uint64_t order;                     //  while sorting: key bytes the sort orders by
    size_t item;                        //  the entry it comes from
} bulk_row_t;

//  A row's place in the sort: its ORDER and where it is.
typedef struct {
    uint64_t order;                     //  the row's order
    size_t row;                         //  its index among the unsorted rows
} bulk_rank_t;

//  The rows of one family.
typedef struct {
    bulk_row_t *rows;                   //  COUNT rows
    size_t count;                       //  rows in use
    size_t capacity;                    //  rows allocated
    uint8_t *keys;                      //  the key arena
    size_t keys_size;                   //  bytes in use
    size_t keys_capacity;               //  bytes allocated
    uint8_t *values;                    //  values the family holds itself
    size_t values_size;                 //  bytes in use
    size_t values_capacity;             //  bytes allocated
    bool borrowed;                      //  values are in the load's arena: entries (kv: their values)
    bulk_row_t *spare;                  //  sorting: as many rows again, kept between writes
    size_t spare_capacity;              //  rows allocated
    bulk_rank_t *ranks;                 //  sorting: the radix sort's pairs, twice the rows
    size_t ranks_capacity;              //  pairs allocated
} bulk_rows_t;

//  One table file, made on a thread of its own beside the others: their
//  fsyncs overlap each other and the work of the others. A maker reads
//  the load's entries and writes only its own family's rows.
typedef struct {
    struct _shoal_oplog_bulk_t *load;   //  the load
    shoal_store_t *store;               //  this maker's handle on the store
    shoal_cf_t cf;                      //  its family
    bulk_rows_t *rows;                  //  the family's rows, sorted here
    char path[BULK_PATH_MAX];           //  the table file
    size_t *winners;                    //  kv: the winning row of each key, in key order
    size_t winner_count;                //  kv: keys
    size_t *picked;                     //  kv: the winners that beat the store
    size_t picked_count;                //  kv: how many
    shoal_table_t *table;               //  the finished table
    char *error;                        //  what failed; NULL when all went well
    pthread_t thread;                   //  the thread
    bool running;                       //  THREAD was started and is not joined yet
} bulk_maker_t;

struct _shoal_oplog_bulk_t {
    shoal_oplog_t *oplog;               //  for its guard and epochs only (borrowed)
    shoal_store_t *store;               //  this load's handle on the store (borrowed)
    char *dir;                          //  where table files are written
    shoal_oplog_bulk_options_t options; //  clock bound, ingest hook
    bulk_item_t *items;                 //  COUNT entries added
    size_t count;                       //  entries in use
    size_t capacity;                    //  entries allocated
    uint8_t *arena;                     //  their encoded bytes
    size_t arena_size;                  //  bytes in use
    size_t arena_capacity;              //  bytes allocated
    bulk_chain_t *chains;               //  CHAIN_COUNT chains added to
    size_t chain_count;                 //  chains in use
    size_t chain_capacity;              //  chains allocated
    bulk_rows_t log[BULK_FAMILIES];     //  rows of s_families
    bulk_rows_t kv;                     //  a kv row per entry: its key and its value in the arena
    size_t files;                       //  table files made, for their names
    //  The makers of the write under way: the log families', in s_families
    //  order, then kv's. The log families' may start before the write does
    //  (shoal_oplog_bulk_prepare), kv's only once the write has begun.
    bulk_maker_t makers[BULK_FAMILIES + 1];
    uint64_t *generations;              //  the kv generations the kv maker read under, a chain each
    bool made;                          //  every table file of the write under way is made
    bool may_repeat;                    //  an entry may have been added twice (see s_table_make)
    char *error;                        //  text of the last failure; NULL before any
};

// ---------------------------------------------------------------------------
//  Errors and memory

static int
s_bulk_fail(shoal_oplog_bulk_t *self, const char *format, ...) CHECK_PRINTF(2);
static void s_makers_clear(shoal_oplog_bulk_t *self);

//  Keeps a printf-style message as the last error and logs it. Returns -1.
static int
s_bulk_fail(shoal_oplog_bulk_t *self, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (text) {
        zsys_warning("bulk load: %s", text);
        zstr_free(&self->error);
        self->error = text;
    }
    return -1;
}

//  Keeps the store handle's last error after WHAT. Returns -1.
static int
s_bulk_fail_store(shoal_oplog_bulk_t *self, const char *what)
{
    return s_bulk_fail(self, "%s: %s", what, shoal_store_error(self->store));
}

static void
s_hex(const uint8_t *hash, char *hex)
{
    sodium_bin2hex(hex, BULK_HEX_SIZE, hash, SHOAL_HASH_SIZE);
}

//  The bytes mapped for CAPACITY elements of ITEM_SIZE: whole pages, and
//  whole huge pages from one huge page up.
static size_t
s_mapped_size(size_t capacity, size_t item_size)
{
    size_t bytes = capacity * item_size;
    size_t unit = bytes >= BULK_HUGE_PAGE ? BULK_HUGE_PAGE : (size_t) sysconf(_SC_PAGESIZE);
    return (bytes + unit - 1) / unit * unit;
}

//  Grows an array of ITEM_SIZE elements (a mapping of its own, NULL while
//  it has no capacity) to hold NEEDED; a LARGE one starts as a whole huge
//  page. Returns 0, or -1 when memory ran out (the array is then unchanged).
static int
s_grow(void **items, size_t *capacity, size_t needed, size_t item_size, bool large)
{
    if (needed <= *capacity)
        return 0;
    //  As many elements as fill a huge page: they map exactly one (see
    //  s_mapped_size).
    size_t first = large && BULK_HUGE_PAGE / item_size > BULK_ARRAY_MIN ? BULK_HUGE_PAGE / item_size : BULK_ARRAY_MIN;
    size_t grown = *capacity ? *capacity : first;
    while (grown < needed)
        grown *= 2;
    size_t old_size = *items ? s_mapped_size(*capacity, item_size) : 0;
    size_t new_size = s_mapped_size(grown, item_size);
    void *bigger = *items;
    if (new_size >= BULK_HUGE_PAGE && new_size > old_size) {
        //  A new mapping aligned to a huge page, the pages held so far
        //  moved to its start: mremap would choose an address aligned to
        //  4 KiB only, and the huge pages of such a mapping cover only the
        //  2 MiB windows aligned inside it.
        bigger = shoal_map_huge(new_size);
        if (!bigger)
            return -1;
        if (*items && mremap(*items, old_size, old_size, MREMAP_MAYMOVE | MREMAP_FIXED, bigger) == MAP_FAILED) {
            munmap(bigger, new_size);
            return -1;
        }
        //  Advice only: a kernel without huge pages maps small ones. The
        //  pages moved in came without it when they were fewer.
        madvise(bigger, new_size, MADV_HUGEPAGE);
    }
    else
    if (!bigger)
        bigger = mmap(NULL, new_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    else
    if (new_size > old_size)
        bigger = mremap(bigger, old_size, new_size, MREMAP_MAYMOVE);
    if (bigger == MAP_FAILED)
        return -1;
    *items = bigger;
    *capacity = grown;
    return 0;
}

//  Unmaps an array that s_grow made, and sets it empty.
static void
s_array_free(void **items, size_t *capacity, size_t item_size)
{
    if (*items)
        munmap(*items, s_mapped_size(*capacity, item_size));
    *items = NULL;
    *capacity = 0;
}

//  Frees ROWS' arrays; whether they borrow their values stays.
static void
s_rows_free(bulk_rows_t *rows)
{
    s_array_free((void **) &rows->rows, &rows->capacity, sizeof(bulk_row_t));
    s_array_free((void **) &rows->keys, &rows->keys_capacity, 1);
    s_array_free((void **) &rows->values, &rows->values_capacity, 1);
    s_array_free((void **) &rows->spare, &rows->spare_capacity, sizeof(bulk_row_t));
    s_array_free((void **) &rows->ranks, &rows->ranks_capacity, sizeof(bulk_rank_t));
    rows->count = rows->keys_size = rows->values_size = 0;
}

//  Empties ROWS, keeping their memory.
static void
s_rows_empty(bulk_rows_t *rows)
{
    rows->count = rows->keys_size = rows->values_size = 0;
}

//  The value of ROW, in ROWS of load SELF.
static const uint8_t *
s_row_value(const shoal_oplog_bulk_t *self, const bulk_rows_t *rows, const bulk_row_t *row)
{
    return (rows->borrowed ? self->arena : rows->values) + row->value;
}

//  Adds a row for KEY from entry ITEM whose value is VALUE (SIZE bytes,
//  copied), or, in borrowing rows, the SIZE bytes at OFFSET of the arena;
//  the arrays of a LARGE load grow as s_grow says. Returns 0 or -1.
static int
s_rows_add(bulk_rows_t *rows, bool large, const shoal_key_t *key, const void *value, size_t offset,
           size_t size, size_t item)
{
    if (key->overflow
    ||  s_grow((void **) &rows->rows, &rows->capacity, rows->count + 1, sizeof(bulk_row_t), large)
    ||  s_grow((void **) &rows->keys, &rows->keys_capacity, rows->keys_size + key->size, 1, large)
    ||  (!rows->borrowed
         && s_grow((void **) &rows->values, &rows->values_capacity, rows->values_size + size, 1, large)))
        return -1;
    bulk_row_t *row = &rows->rows[rows->count++];
    row->key = rows->keys_size;
    row->key_size = key->size;
    memcpy(rows->keys + rows->keys_size, key->bytes, key->size);
    rows->keys_size += key->size;
    if (rows->borrowed)
        row->value = offset;
    else {
        row->value = rows->values_size;
        if (size)
            memcpy(rows->values + rows->values_size, value, size);
        rows->values_size += size;
    }
    row->value_size = size;
    row->order = 0;
    row->item = item;
    return 0;
}

//  Orders two rows by key, as the store does.
static int
s_row_compare(const void *a_in, const void *b_in, void *keys_in)
{
    const bulk_row_t *a = a_in, *b = b_in;
    const uint8_t *keys = keys_in;
    size_t common = a->key_size < b->key_size ? a->key_size : b->key_size;
    int order = memcmp(keys + a->key, keys + b->key, common);
    if (order)
        return order;
    return a->key_size < b->key_size ? -1 : a->key_size > b->key_size;
}

//  Below this many rows, a range is sorted by comparing whole keys.
#define BULK_SORT_SMALL 32

//  Sorts ROWS[FROM, TO), whose keys all share their first DEPTH bytes, by
//  radix on the eight key bytes after the longest prefix they all share,
//  then each run of rows equal in those bytes the same way, one level
//  deeper; a run whose keys have no byte left to order by (equal keys) is
//  sorted by comparison. RANKS (TO - FROM twice over) and COUNTS are
//  scratch space; GATHER holds TO - FROM rows.
static void
s_rows_sort_range(bulk_rows_t *rows, size_t from, size_t to, size_t depth, bulk_rank_t *ranks,
                  size_t *counts, bulk_row_t *gather)
{
    size_t count = to - from;
    bulk_row_t *range = rows->rows + from;
    if (count <= BULK_SORT_SMALL) {
        qsort_r(range, count, sizeof(bulk_row_t), s_row_compare, rows->keys);
        return;
    }
    //  The prefix every key of the range shares orders nothing.
    size_t shared = range[0].key_size;
    const uint8_t *first = rows->keys + range[0].key;
    for (size_t i = 1; i < count && shared > depth; i++) {
        const uint8_t *key = rows->keys + range[i].key;
        size_t limit = range[i].key_size < shared ? range[i].key_size : shared;
        size_t same = depth;
        while (same < limit && key[same] == first[same])
            same++;
        shared = same;
    }
    bool exhausted = true;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *key = rows->keys + range[i].key;
        uint64_t order = 0;
        for (size_t j = 0; j < sizeof order; j++) {
            size_t at = shared + j;
            order = (order << BULK_BYTE_BITS) | (at < range[i].key_size ? key[at] : 0);
        }
        range[i].order = order;
        exhausted = exhausted && range[i].key_size <= shared + sizeof order;
    }
    //  A radix sort on ORDER, a byte a pass, of (order, row) pairs, a third
    //  of a row's size; then the rows are gathered in order. One read
    //  counts every byte's values; a byte all rows share needs no pass
    //  (in a run one level down, most of them).
    bulk_rank_t *source = ranks, *target = ranks + count;
    memset(counts, 0, BULK_RADIX_DIGITS * (BULK_RADIX_BUCKETS + 1) * sizeof(size_t));
    for (size_t i = 0; i < count; i++) {
        source[i].order = range[i].order;
        source[i].row = i;
        for (unsigned d = 0; d < BULK_RADIX_DIGITS; d++)
            counts[d * (BULK_RADIX_BUCKETS + 1) + ((range[i].order >> (d * BULK_BYTE_BITS)) & 0xff) + 1]++;
    }
    for (unsigned d = 0; d < BULK_RADIX_DIGITS; d++) {
        size_t *digit = counts + d * (BULK_RADIX_BUCKETS + 1);
        bool shared_digit = false;
        for (size_t b = 1; b <= BULK_RADIX_BUCKETS && !shared_digit; b++)
            shared_digit = digit[b] == count;
        if (shared_digit)
            continue;
        for (size_t b = 1; b <= BULK_RADIX_BUCKETS; b++)
            digit[b] += digit[b - 1];
        unsigned shift = d * BULK_BYTE_BITS;
        for (size_t i = 0; i < count; i++)
            target[digit[(source[i].order >> shift) & 0xff]++] = source[i];
        bulk_rank_t *swap = source;
        source = target;
        target = swap;
    }
    for (size_t i = 0; i < count; i++)
        gather[i] = range[source[i].row];
    memcpy(range, gather, count * sizeof(bulk_row_t));
    //  Runs of equal ORDER: one level deeper, or by whole keys once the
    //  keys have no byte left to order by.
    size_t start = 0;
    while (start < count) {
        size_t end = start + 1;
        while (end < count && range[end].order == range[start].order)
            end++;
        if (end - start > 1) {
            if (exhausted)
                qsort_r(range + start, end - start, sizeof(bulk_row_t), s_row_compare, rows->keys);
            else
                s_rows_sort_range(rows, from + start, from + end, shared + sizeof(uint64_t), ranks,
                                  counts, gather);
        }
        start = end;
    }
}

//  The chain of ROW's entry.
static size_t
s_row_chain(const shoal_oplog_bulk_t *self, const bulk_row_t *row)
{
    return self->items[row->item].chain;
}

//  Sorts ROWS of load SELF by merging the runs its chains make: each
//  chain's rows, in the order they were added, when every run is in key
//  order already (see DESIGN at the top of this file). Returns 0, or -1
//  with ROWS untouched when a run is out of order, there are too many to
//  merge, or memory ran out.
static int
s_rows_merge_runs(const shoal_oplog_bulk_t *self, bulk_rows_t *rows)
{
    size_t runs = self->chain_count;
    if (runs == 0 || runs > BULK_MERGE_RUNS_MAX)
        return -1;
    size_t start[BULK_MERGE_RUNS_MAX], end[BULK_MERGE_RUNS_MAX], last[BULK_MERGE_RUNS_MAX];
    for (size_t r = 0; r < runs; r++) {
        end[r] = 0;
        last[r] = SIZE_MAX;
    }
    //  Each run in order, and its length.
    for (size_t i = 0; i < rows->count; i++) {
        size_t r = s_row_chain(self, &rows->rows[i]);
        if (last[r] != SIZE_MAX && s_row_compare(&rows->rows[last[r]], &rows->rows[i], rows->keys) > 0)
            return -1;
        last[r] = i;
        end[r]++;
    }
    if (s_grow((void **) &rows->spare, &rows->spare_capacity, rows->count, sizeof(bulk_row_t), self->options.large))
        return -1;
    //  The runs laid out one after another in SPARE, then merged back.
    size_t at = 0;
    for (size_t r = 0; r < runs; r++) {
        start[r] = at;
        at += end[r];
        end[r] = start[r];
    }
    for (size_t i = 0; i < rows->count; i++)
        rows->spare[end[s_row_chain(self, &rows->rows[i])]++] = rows->rows[i];
    const bulk_row_t *spare = rows->spare;
    size_t out = 0;
    while (out < rows->count) {
        //  The run with the least head (M), and the one after it (S).
        size_t m = SIZE_MAX, s = SIZE_MAX;
        for (size_t r = 0; r < runs; r++) {
            if (start[r] == end[r])
                continue;
            if (m == SIZE_MAX || s_row_compare(&spare[start[r]], &spare[start[m]], rows->keys) < 0) {
                s = m;
                m = r;
            }
            else
            if (s == SIZE_MAX || s_row_compare(&spare[start[r]], &spare[start[s]], rows->keys) < 0)
                s = r;
        }
        //  A run whose rest comes before every other head goes whole: runs
        //  of different datasets or origins do not interleave.
        if (s == SIZE_MAX || s_row_compare(&spare[end[m] - 1], &spare[start[s]], rows->keys) <= 0) {
            memcpy(rows->rows + out, spare + start[m], (end[m] - start[m]) * sizeof(bulk_row_t));
            out += end[m] - start[m];
            start[m] = end[m];
            continue;
        }
        do
            rows->rows[out++] = spare[start[m]++];
        while (s_row_compare(&spare[start[m]], &spare[start[s]], rows->keys) <= 0);
    }
    return 0;
}

//  Puts ROWS of load SELF in key order (see DESIGN at the top of this file).
static void
s_rows_sort(const shoal_oplog_bulk_t *self, bulk_rows_t *rows)
{
    bool sorted = true;
    for (size_t i = 1; i < rows->count && sorted; i++)
        sorted = s_row_compare(&rows->rows[i - 1], &rows->rows[i], rows->keys) <= 0;
    if (sorted || s_rows_merge_runs(self, rows) == 0)
        return;
    size_t counts[BULK_RADIX_DIGITS * (BULK_RADIX_BUCKETS + 1)];
    bool large = self->options.large;
    if (s_grow((void **) &rows->ranks, &rows->ranks_capacity, 2 * rows->count, sizeof(bulk_rank_t), large) == 0
    &&  s_grow((void **) &rows->spare, &rows->spare_capacity, rows->count, sizeof(bulk_row_t), large) == 0)
        s_rows_sort_range(rows, 0, rows->count, 0, rows->ranks, counts, rows->spare);
    else
        //  Out of memory for the radix sort: the slow one needs none.
        qsort_r(rows->rows, rows->count, sizeof(bulk_row_t), s_row_compare, rows->keys);
}

// ---------------------------------------------------------------------------
//  Construction

shoal_oplog_bulk_t *
shoal_oplog_bulk_new(shoal_oplog_t *oplog, shoal_store_t *store, const char *dir,
                     const shoal_oplog_bulk_options_t *options)
{
    assert(oplog && store && dir && options);
    if (zsys_dir_create("%s", dir) != 0) {
        zsys_error("bulk load: cannot create %s: %s", dir, strerror(errno));
        return NULL;
    }
    shoal_oplog_bulk_t *self = (shoal_oplog_bulk_t *) zmalloc(sizeof(shoal_oplog_bulk_t));
    self->oplog = oplog;
    self->store = store;
    self->dir = strdup(dir);
    self->options = *options;
    self->log[BULK_FAMILIES - 1].borrowed = true;
    self->kv.borrowed = true;
    if (!self->dir)
        shoal_oplog_bulk_destroy(&self);
    return self;
}

//  Forgets every entry and chain added.
static void
s_bulk_empty(shoal_oplog_bulk_t *self)
{
    self->count = 0;
    self->arena_size = 0;
    self->may_repeat = false;
    for (size_t f = 0; f < BULK_FAMILIES; f++)
        s_rows_empty(&self->log[f]);
    s_rows_empty(&self->kv);
    for (size_t i = 0; i < self->chain_count; i++) {
        free(self->chains[i].dataset);
        free(self->chains[i].node);
    }
    self->chain_count = 0;
}

void
shoal_oplog_bulk_destroy(shoal_oplog_bulk_t **self_p)
{
    assert(self_p);
    shoal_oplog_bulk_t *self = *self_p;
    if (!self)
        return;
    shoal_oplog_bulk_release(self);
    free(self->dir);
    zstr_free(&self->error);
    free(self);
    *self_p = NULL;
}

const char *
shoal_oplog_bulk_error(shoal_oplog_bulk_t *self)
{
    return self->error ? self->error : "";
}

void
shoal_oplog_bulk_clear(shoal_oplog_bulk_t *self)
{
    s_makers_clear(self);
    s_bulk_empty(self);
}

void
shoal_oplog_bulk_release(shoal_oplog_bulk_t *self)
{
    s_makers_clear(self);
    s_bulk_empty(self);
    for (size_t f = 0; f < BULK_FAMILIES; f++)
        s_rows_free(&self->log[f]);
    s_rows_free(&self->kv);
    s_array_free((void **) &self->items, &self->capacity, sizeof(bulk_item_t));
    s_array_free((void **) &self->arena, &self->arena_capacity, 1);
    s_array_free((void **) &self->chains, &self->chain_capacity, sizeof(bulk_chain_t));
}

size_t
shoal_oplog_bulk_count(shoal_oplog_bulk_t *self)
{
    return self->count;
}

size_t
shoal_oplog_bulk_bytes(shoal_oplog_bulk_t *self)
{
    return self->arena_size;
}

// ---------------------------------------------------------------------------
//  Adding

//  The chain of NODE in DATASET, added when new. NULL when memory ran out.
static bulk_chain_t *
s_bulk_chain(shoal_oplog_bulk_t *self, const char *dataset, const char *node)
{
    for (size_t i = 0; i < self->chain_count; i++)
        if (streq(self->chains[i].dataset, dataset) && streq(self->chains[i].node, node))
            return &self->chains[i];
    if (s_grow((void **) &self->chains, &self->chain_capacity, self->chain_count + 1,
               sizeof(bulk_chain_t), false))
        return NULL;
    bulk_chain_t *chain = &self->chains[self->chain_count];
    memset(chain, 0, sizeof *chain);
    chain->dataset = strdup(dataset);
    chain->node = strdup(node);
    if (!chain->dataset || !chain->node) {
        free(chain->dataset);
        free(chain->node);
        return NULL;
    }
    self->chain_count++;
    return chain;
}

//  Checks ENTRY, number INDEX of COUNT in a page of DATASET's NODE chain,
//  whose fields hash to HASHED, against the tip it must follow, at
//  physical time NOW, by the rules of every append (shoal_oplog_check).
//  Sets *EPOCH. Returns 0, or -1 naming it.
static int
s_bulk_check(shoal_oplog_bulk_t *self, const shoal_oplog_entry_t *entry, const uint8_t *hashed,
             const char *dataset, const char *node, const shoal_oplog_tip_t *tip, size_t index,
             size_t count, uint64_t now, uint64_t *epoch)
{
    shoal_oplog_rules_t rules = {
        .dataset = dataset,
        .node = node,
        .tip = tip,
        .hashed = hashed,
        .now_ms = now,
        .max_ahead_ms = self->options.max_clock_ahead_ms,
    };
    char why[BULK_CODEC_ERROR_MAX];
    if (shoal_oplog_check(self->oplog, entry, &rules, epoch, why, sizeof why) == 0)
        return 0;
    char hex[BULK_HEX_SIZE];
    s_hex(entry->hash, hex);
    return s_bulk_fail(self, "entry %zu of %zu in a page of \"%s\" from node \"%s\" (x'%s', "
                       "%" PRIu64 ".%" PRIu32 ") refused: %s", index + 1, count, dataset, node,
                       hex, entry->wall_ms, entry->logic, why);
}

//  Lays out ENTRY, read in place from BYTES, of the chain whose keys'
//  shared elements CHAIN holds, added as ITEM with its encoded bytes at
//  OFFSET of the arena (SIZE bytes), in the rows of the three log families
//  and of kv. Returns 0, or -1 with the rows as they were.
static int
s_bulk_lay_out(shoal_oplog_bulk_t *self, const shoal_oplog_chain_keys_t *chain,
               const shoal_oplog_entry_t *entry, const uint8_t *bytes, size_t item, size_t offset,
               size_t size)
{
    bulk_rows_t saved[BULK_FAMILIES + 1];
    for (size_t f = 0; f < BULK_FAMILIES; f++)
        saved[f] = self->log[f];
    saved[BULK_FAMILIES] = self->kv;
    shoal_oplog_entry_keys_t keys;
    shoal_oplog_entry_keys(&keys, chain, entry);
    bool large = self->options.large;
    int rc = s_rows_add(&self->log[0], large, &keys.by_hash, keys.locator.bytes, 0, keys.locator.size, item);
    if (rc == 0)
        rc = s_rows_add(&self->log[1], large, &keys.by_hlc, NULL, 0, 0, item);
    if (rc == 0)
        rc = s_rows_add(&self->log[2], large, &keys.by_node_hlc, NULL, offset, size, item);
    //  The entry's value, in its bytes (read in place): the record it would
    //  make the state of its key is made if it wins (s_kv_table_value).
    bool valued = entry->op != SHOAL_OPLOG_DELETE && entry->value && entry->value_size;
    size_t value_at = valued ? (size_t) (entry->value - bytes) : 0;
    assert(!valued || value_at + entry->value_size <= size);
    if (rc == 0)
        rc = s_rows_add(&self->kv, large, &keys.kv, NULL, offset + value_at, valued ? entry->value_size : 0,
                        item);
    if (rc) {
        //  The arrays may have moved; only the counts go back.
        for (size_t f = 0; f < BULK_FAMILIES; f++) {
            self->log[f].count = saved[f].count;
            self->log[f].keys_size = saved[f].keys_size;
            self->log[f].values_size = saved[f].values_size;
        }
        self->kv.count = saved[BULK_FAMILIES].count;
        self->kv.keys_size = saved[BULK_FAMILIES].keys_size;
        self->kv.values_size = saved[BULK_FAMILIES].values_size;
    }
    return rc;
}

//  An entry of a page, read in place, as a load takes it.
typedef struct {
    const shoal_oplog_entry_t *entry;   //  read in place from BYTES
    const uint8_t *hashed;              //  what its fields hash to
    const uint8_t *bytes;               //  its encoded bytes in the page
    size_t size;                        //  their length
    size_t index;                       //  its place in the page
    size_t count;                       //  the page's entries
} s_page_entry_t;

//  Checks ENTRY of a page of CHAIN (whose keys' shared elements CHAIN_KEYS
//  holds) against TIP at physical time NOW, then adds it: its bytes to the
//  arena, its rows, its item. TIP then names it. Returns 0, or -1 naming
//  what was wrong, with the load as it was.
static int
s_bulk_take(shoal_oplog_bulk_t *self, bulk_chain_t *chain, const shoal_oplog_chain_keys_t *chain_keys,
            const s_page_entry_t *page_entry, shoal_oplog_tip_t *tip, uint64_t now)
{
    const shoal_oplog_entry_t *entry = page_entry->entry;
    size_t size = page_entry->size;
    bulk_item_t *item = &self->items[self->count];
    if (s_bulk_check(self, entry, page_entry->hashed, chain->dataset, chain->node, tip, page_entry->index,
                     page_entry->count, now, &item->epoch))
        return -1;
    if (s_grow((void **) &self->arena, &self->arena_capacity, self->arena_size + size, 1,
               self->options.large))
        return s_bulk_fail(self, "out of memory for %zu bytes", self->arena_size + size);
    if (s_bulk_lay_out(self, chain_keys, entry, page_entry->bytes, self->count, self->arena_size, size))
        return s_bulk_fail(self, "out of memory laying out entry %zu of %zu", page_entry->index + 1,
                           page_entry->count);
    chain->entries++;
    item->chain = (size_t) (chain - self->chains);
    item->deleted = entry->op == SHOAL_OPLOG_DELETE;
    item->stamp.wall_ms = entry->wall_ms;
    item->stamp.logic = entry->logic;
    memcpy(item->hash, entry->hash, SHOAL_HASH_SIZE);
    item->offset = self->arena_size;
    item->size = size;
    memcpy(self->arena + self->arena_size, page_entry->bytes, size);
    self->arena_size += size;
    self->count++;
    tip->has_tip = true;
    memcpy(tip->hash, entry->hash, SHOAL_HASH_SIZE);
    tip->stamp = item->stamp;
    return 0;
}

int
shoal_oplog_bulk_add(shoal_oplog_bulk_t *self, const char *dataset, const char *node,
                     shoal_oplog_tip_t *tip, const uint8_t *const *entries, const size_t *sizes,
                     size_t count, size_t *accepted_p)
{
    size_t accepted = 0;
    if (accepted_p)
        *accepted_p = 0;
    bulk_chain_t *chain = s_bulk_chain(self, dataset, node);
    if (!chain
    ||  s_grow((void **) &self->items, &self->capacity, self->count + count, sizeof(bulk_item_t),
               self->options.large))
        return s_bulk_fail(self, "out of memory for %zu entries", self->count + count);
    //  Entries that follow the chain's last one added are stamped after
    //  every entry of it here: only a page that starts elsewhere (a second
    //  stream of the chain) may bring one again.
    if (chain->tip.has_tip
    &&  (!tip->has_tip || memcmp(tip->hash, chain->tip.hash, SHOAL_HASH_SIZE) != 0))
        self->may_repeat = true;
    uint64_t now = self->options.clock ? self->options.clock(self->options.clock_arg)
                                       : (uint64_t) zclock_time();
    //  Every entry is checked to be of this chain before it is laid out.
    shoal_oplog_chain_keys_t chain_keys;
    shoal_oplog_chain_keys(&chain_keys, dataset, node);
    //  Entries are read in place a group at a time (their values stay in
    //  the page, their strings go to STRINGS; nothing is allocated, and
    //  they are never cleared), hashed together, then each checked and
    //  laid out in order. An entry that does not decode ends the page
    //  once the entries before it are taken.
    shoal_oplog_entry_t group[BULK_HASH_GROUP];
    char strings[BULK_HASH_GROUP][BULK_STRINGS_MAX];
    uint8_t hashes[BULK_HASH_GROUP][SHOAL_HASH_SIZE];
    int rc = 0;
    for (size_t first = 0; first < count && rc == 0; ) {
        size_t wanted = count - first < BULK_HASH_GROUP ? count - first : BULK_HASH_GROUP, read = 0;
        char error[BULK_CODEC_ERROR_MAX] = "";
        while (read < wanted
           &&  shoal_oplog_entry_read(entries[first + read], sizes[first + read], &group[read],
                                      strings[read], sizeof strings[read], error, sizeof error) == 0)
            read++;
        shoal_oplog_entry_hash_many(group, read, hashes);
        for (size_t g = 0; g < read && rc == 0; g++) {
            size_t i = first + g;
            s_page_entry_t page_entry = { &group[g], hashes[g], entries[i], sizes[i], i, count };
            rc = s_bulk_take(self, chain, &chain_keys, &page_entry, tip, now);
            if (rc == 0)
                accepted++;
        }
        if (rc == 0 && read < wanted)
            rc = s_bulk_fail(self, "entry %zu of %zu in a page of \"%s\" from node \"%s\" "
                             "refused: it does not decode: %s", first + read + 1, count, dataset, node,
                             error);
        first += read;
    }
    if (accepted)
        chain->tip = *tip;
    if (accepted_p)
        *accepted_p = accepted;
    return rc;
}

// ---------------------------------------------------------------------------
//  Writing

//  Sets PATH (BULK_PATH_MAX bytes) to a new table file's path for CF.
static void
s_bulk_path(shoal_oplog_bulk_t *self, shoal_cf_t cf, char *path)
{
    //  Two loads of one process may make table files at once (one is being
    //  ingested while the next one's are made): the load's address tells
    //  their names apart.
    snprintf(path, BULK_PATH_MAX, "%s/" BULK_FILE_PREFIX "%zu-%" PRIxPTR "-%s-%zu" BULK_FILE_SUFFIX, self->dir,
             (size_t) getpid(), (uintptr_t) self, shoal_cf_name(cf), self->files++);
}

//  The kv record ROW of the kv rows makes the state of its key: its
//  entry's value (in the arena), stamp, origin, hash and epoch. Sets
//  *BYTES_P (the caller frees it) and *SIZE_P. Returns 0, or -1 with the
//  codec's reason in WHY.
static int
s_kv_record(const shoal_oplog_bulk_t *self, const bulk_row_t *row, uint8_t **bytes_p, size_t *size_p,
            char *why, size_t why_size)
{
    const bulk_item_t *item = &self->items[row->item];
    shoal_kv_record_t record = {
        .value = row->value_size ? self->arena + row->value : NULL,
        .value_size = row->value_size,
        .deleted = item->deleted,
        .wall_ms = item->stamp.wall_ms,
        .logic = item->stamp.logic,
        .node = self->chains[item->chain].node,
        .epoch = item->epoch,
    };
    memcpy(record.hash, item->hash, SHOAL_HASH_SIZE);
    return shoal_kv_codec.encode(&record, bytes_p, size_p, why, why_size);
}

//  Writes rows of ROWS (sorted) to the table file PATH for CF through
//  STORE (a handle of the calling thread, which holds the error): those
//  PICKED names (COUNT of them, in order), or all when PICKED is NULL.
//  The kv family's rows go in as their kv records (s_kv_record).
//  *TABLE_P receives it, finished, or NULL on failure; *WHY_P a reason
//  the store's error does not hold (the caller frees it), or NULL.
static int
s_table_make(const shoal_oplog_bulk_t *self, shoal_store_t *store, shoal_cf_t cf,
             const bulk_rows_t *rows, const size_t *picked, size_t count, const char *path,
             shoal_table_t **table_p, char **why_p)
{
    *table_p = NULL;
    *why_p = NULL;
    shoal_table_t *table = shoal_table_new(store, cf, path);
    if (!table)
        return -1;
    int rc = 0;
    const bulk_row_t *last = NULL;
    //  Two rows with one key are one entry added twice: one is enough. The
    //  kv rows PICKED have one key each already, and a load whose chains
    //  each grew from their last entry holds no entry twice: their rows
    //  need no comparison (that comparison was 6% of the table makers'
    //  time: perf, bench_sync 300000).
    bool repeats = self->may_repeat && !picked;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const bulk_row_t *row = &rows->rows[picked ? picked[i] : i];
        if (repeats && last && s_row_compare(last, row, rows->keys) == 0)
            continue;
        if (cf == SHOAL_CF_KV) {
            uint8_t *record = NULL;
            size_t size = 0;
            char why[BULK_CODEC_ERROR_MAX];
            if (s_kv_record(self, row, &record, &size, why, sizeof why)) {
                char hex[BULK_HEX_SIZE];
                s_hex(self->items[row->item].hash, hex);
                *why_p = zsys_sprintf("the kv record of entry x'%s': %s", hex, why);
                rc = -1;
            }
            else
                rc = shoal_table_put(table, rows->keys + row->key, row->key_size, record, size);
            free(record);
        }
        else
            rc = shoal_table_put(table, rows->keys + row->key, row->key_size,
                                 s_row_value(self, rows, row), row->value_size);
        last = row;
    }
    if (rc == 0)
        rc = shoal_table_finish(table);
    if (rc) {
        shoal_table_destroy(&table);
        return -1;
    }
    *table_p = table;
    return 0;
}

static shoal_oplog_version_t
s_item_version(const shoal_oplog_bulk_t *self, const bulk_item_t *item)
{
    shoal_oplog_version_t version = {
        item->epoch, item->stamp, self->chains[item->chain].node, item->hash
    };
    return version;
}

//  The kv rows that win among the load's entries, one per key, in key
//  order, as indexes into the kv rows (the caller frees them). NULL when
//  memory ran out.
static size_t *
s_bulk_kv_winners(shoal_oplog_bulk_t *self, size_t *count)
{
    *count = 0;
    bulk_rows_t *rows = &self->kv;
    s_rows_sort(self, rows);
    size_t *winners = (size_t *) malloc((rows->count + 1) * sizeof(size_t));
    if (!winners)
        return NULL;
    //  Equal keys are neighbours now: keep the greatest version of each.
    for (size_t i = 0; i < rows->count; i++) {
        const bulk_row_t *row = &rows->rows[i];
        if (*count > 0 && s_row_compare(&rows->rows[winners[*count - 1]], row, rows->keys) == 0) {
            shoal_oplog_version_t held = s_item_version(self, &self->items[rows->rows[winners[*count - 1]].item]);
            shoal_oplog_version_t other = s_item_version(self, &self->items[row->item]);
            if (shoal_oplog_version_compare(&other, &held) > 0)
                winners[*count - 1] = i;
        }
        else
            winners[(*count)++] = i;
    }
    return winners;
}

//  Sets GENERATIONS to the kv generations of the chains' datasets, now.
static void
s_bulk_generations(shoal_oplog_bulk_t *self, uint64_t *generations)
{
    shoal_oplog_guard_lock(self->oplog);
    for (size_t i = 0; i < self->chain_count; i++)
        generations[i] = shoal_oplog_kv_generation(self->oplog, self->chains[i].dataset);
    shoal_oplog_guard_unlock(self->oplog);
}

//  Whether the kv generations still are GENERATIONS. Called holding the guard.
static bool
s_bulk_generations_hold(shoal_oplog_bulk_t *self, const uint64_t *generations)
{
    for (size_t i = 0; i < self->chain_count; i++)
        if (shoal_oplog_kv_generation(self->oplog, self->chains[i].dataset) != generations[i])
            return false;
    return true;
}

//  Compares two keys as the store orders them.
static int
s_key_compare(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size)
{
    int order = memcmp(a, b, a_size < b_size ? a_size : b_size);
    if (order)
        return order;
    return a_size < b_size ? -1 : a_size > b_size;
}

//  Picks, of the WINNERS (COUNT kv rows, in key order), those that beat
//  what the store holds, into PICKED; *PICKED_COUNT counts them. The
//  store's kv is walked once beside the winners, which are in the same
//  order, seeking only where it lags behind them: a load whose keys the
//  store does not hold (a new node's) costs one seek, not a read per key.
static int
s_kv_pick(shoal_oplog_bulk_t *self, shoal_store_t *store, const size_t *winners, size_t count,
          size_t *picked, size_t *picked_count)
{
    *picked_count = 0;
    const bulk_rows_t *rows = &self->kv;
    for (size_t c = 0; c < self->chain_count; c++)
        self->chains[c].live = 0;
    shoal_iter_t *iter = shoal_iter_new(store, SHOAL_CF_KV, NULL, NULL);
    if (!iter)
        return -1;
    bool positioned = false, on_key = false;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        const bulk_row_t *row = &rows->rows[winners[i]];
        const uint8_t *wanted = rows->keys + row->key;
        size_t held_size = 0;
        const uint8_t *held = on_key ? shoal_iter_key(iter, &held_size) : NULL;
        if (!positioned || (held && s_key_compare(held, held_size, wanted, row->key_size) < 0)) {
            shoal_key_t key;
            shoal_key_init(&key);
            memcpy(key.bytes, wanted, row->key_size);
            key.size = row->key_size;
            on_key = shoal_iter_seek(iter, &key);
            positioned = true;
            held = on_key ? shoal_iter_key(iter, &held_size) : NULL;
        }
        bool wins = true, was_live = false;
        if (held && s_key_compare(held, held_size, wanted, row->key_size) == 0) {
            shoal_kv_record_t stored;
            if (shoal_iter_record(iter, &shoal_kv_codec, &stored)) {
                rc = -1;
                break;
            }
            was_live = !stored.deleted;
            shoal_oplog_version_t holds = {
                stored.epoch, { stored.wall_ms, stored.logic }, stored.node, stored.hash
            };
            shoal_oplog_version_t incoming = s_item_version(self, &self->items[row->item]);
            wins = shoal_oplog_version_compare(&incoming, &holds) > 0;
            shoal_kv_codec.clear(&stored);
        }
        if (wins) {
            const bulk_item_t *item = &self->items[row->item];
            picked[(*picked_count)++] = winners[i];
            self->chains[item->chain].live += (int64_t) !item->deleted - (int64_t) was_live;
        }
    }
    if (rc == 0 && shoal_iter_status(iter))
        rc = -1;
    shoal_iter_destroy(&iter);
    return rc;
}


//  Picks the kv rows that beat the store and makes their table: the kv
//  maker's work, and the kv retry's. On failure MAKER's error says why.
static int
s_kv_make(bulk_maker_t *maker)
{
    shoal_table_destroy(&maker->table);
    zstr_free(&maker->error);
    char *why = NULL;
    if (s_kv_pick(maker->load, maker->store, maker->winners, maker->winner_count, maker->picked,
                  &maker->picked_count) == 0
    &&  s_table_make(maker->load, maker->store, maker->cf, maker->rows, maker->picked,
                     maker->picked_count, maker->path, &maker->table, &why) == 0)
        return 0;
    maker->error = why ? why : shoal_strdup(shoal_store_error(maker->store));
    return -1;
}

static void *
s_maker_run(void *arg)
{
    bulk_maker_t *maker = (bulk_maker_t *) arg;
    int rc;
    if (maker->cf == SHOAL_CF_KV) {
        maker->winners = s_bulk_kv_winners(maker->load, &maker->winner_count);
        maker->picked = (size_t *) malloc((maker->winner_count + 1) * sizeof(size_t));
        if (!maker->winners || !maker->picked) {
            maker->error = shoal_strdup("out of memory");
            return NULL;
        }
        s_kv_make(maker);
        return NULL;
    }
    s_rows_sort(maker->load, maker->rows);
    char *why = NULL;
    rc = s_table_make(maker->load, maker->store, maker->cf, maker->rows, NULL,
                      maker->rows->count, maker->path, &maker->table, &why);
    free(why);
    if (rc)
        maker->error = shoal_strdup(shoal_store_error(maker->store));
    return NULL;
}

//  Tells the options' hook that a table file of CF is about to go in.
static void
s_bulk_ingesting(const shoal_oplog_bulk_t *self, shoal_cf_t cf)
{
    if (self->options.ingesting)
        self->options.ingesting(cf, self->options.ingesting_arg);
}

//  Ingests the kv table MAKER made, if the kv it read still holds (see the
//  top of shoal_oplog_bulk.h); else reads and makes it again, at last
//  holding the guard throughout. *KEYS counts the keys written.
static int
s_bulk_ingest_kv(shoal_oplog_bulk_t *self, bulk_maker_t *maker, uint64_t *generations, size_t *keys)
{
    *keys = 0;
    for (int attempt = 1; ; attempt++) {
        bool last = attempt == BULK_KV_ATTEMPTS;
        if (attempt > 1) {
            if (last)
                shoal_oplog_guard_lock(self->oplog);
            else
                s_bulk_generations(self, generations);
            if (s_kv_make(maker)) {
                if (last)
                    shoal_oplog_guard_unlock(self->oplog);
                return s_bulk_fail(self, "kv: %s", maker->error);
            }
        }
        if (!last)
            shoal_oplog_guard_lock(self->oplog);
        if (last || s_bulk_generations_hold(self, generations)) {
            s_bulk_ingesting(self, SHOAL_CF_KV);
            int rc = shoal_store_ingest(maker->store, maker->table);
            //  A kv write like any other: its datasets' generations rise.
            for (size_t c = 0; c < self->chain_count && rc == 0 && maker->picked_count; c++)
                shoal_oplog_kv_touch(self->oplog, self->chains[c].dataset);
            shoal_oplog_guard_unlock(self->oplog);
            if (rc)
                return s_bulk_fail(self, "kv: %s", shoal_store_error(maker->store));
            *keys = maker->picked_count;
            return 0;
        }
        shoal_oplog_guard_unlock(self->oplog);
    }
}

//  Orders stamps, for qsort.
static int
s_stamp_order(const void *a, const void *b)
{
    return shoal_hlc_compare((const shoal_hlc_stamp_t *) a, (const shoal_hlc_stamp_t *) b);
}

//  Counts, as chain C's entries for its dataset's counts, only those
//  stamped after STAMP (NULL: every one), its head in the store: the log
//  may have taken the ones before (live, while the load was being
//  written), and counted them. An entry the load took twice (a second
//  stream of the chain) counts once: a chain's entries have a stamp each.
//  Returns 0, or -1 out of memory.
static int
s_chain_count_after(shoal_oplog_bulk_t *self, size_t c, const shoal_hlc_stamp_t *stamp)
{
    shoal_hlc_stamp_t *stamps = NULL;
    if (self->may_repeat && !(stamps = (shoal_hlc_stamp_t *) malloc((self->count + 1) * sizeof *stamps)))
        return -1;
    int64_t after = 0;
    size_t taken = 0;
    for (size_t i = 0; i < self->count; i++)
        if (self->items[i].chain == c && (!stamp || shoal_hlc_compare(&self->items[i].stamp, stamp) > 0)) {
            if (stamps)
                stamps[taken++] = self->items[i].stamp;
            else
                after++;
        }
    if (stamps) {
        qsort(stamps, taken, sizeof *stamps, s_stamp_order);
        for (size_t i = 0; i < taken; i++)
            after += i == 0 || shoal_hlc_compare(&stamps[i], &stamps[i - 1]) != 0;
        free(stamps);
    }
    self->chains[c].entries = after;
    return 0;
}

//  Moves each chain's head to its last entry, unless it is there or
//  further already, and adds what the load adds to its datasets' counts,
//  in one write, which unmarks the load too: a synced write fewer per
//  batch than an unmark of its own. *MOVED counts the heads moved.
static int
s_bulk_write_heads(shoal_oplog_bulk_t *self, size_t *moved)
{
    *moved = 0;
    shoal_batch_t *batch = shoal_batch_new(self->store);
    int rc = 0;
    shoal_oplog_guard_lock(self->oplog);
    for (size_t i = 0; i < self->chain_count && rc == 0; i++) {
        bulk_chain_t *chain = &self->chains[i];
        if (!chain->tip.has_tip)
            continue;
        shoal_key_t key;
        shoal_oplog_key_head(&key, chain->dataset, chain->node);
        shoal_head_record_t head;
        bool found;
        if (shoal_store_get_record(self->store, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec,
                                   &head, &found)) {
            rc = s_bulk_fail_store(self, "head read");
            break;
        }
        shoal_hlc_stamp_t stamp = { head.wall_ms, head.logic };
        if ((found || self->may_repeat) && s_chain_count_after(self, i, found ? &stamp : NULL)) {
            rc = s_bulk_fail(self, "out of memory counting the entries of a chain");
            break;
        }
        if (found && shoal_hlc_compare(&chain->tip.stamp, &stamp) <= 0)
            continue;
        head.wall_ms = chain->tip.stamp.wall_ms;
        head.logic = chain->tip.stamp.logic;
        memcpy(head.hash, chain->tip.hash, SHOAL_HASH_SIZE);
        if (shoal_batch_put_record(batch, SHOAL_CF_OPLOG_NODE_HEAD, &key, &shoal_head_codec, &head))
            rc = s_bulk_fail_store(self, "head write");
        else
            (*moved)++;
    }
    //  The datasets' counts: a dataset's chains together, at its first.
    for (size_t i = 0; i < self->chain_count && rc == 0; i++) {
        const char *dataset = self->chains[i].dataset;
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(self->chains[j].dataset, dataset) != 0;
        if (!first)
            continue;
        int64_t entries = 0, live = 0;
        for (size_t j = i; j < self->chain_count; j++)
            if (strcmp(self->chains[j].dataset, dataset) == 0) {
                entries += self->chains[j].entries;
                live += self->chains[j].live;
            }
        if (shoal_oplog_counts_add(self->oplog, self->store, batch, dataset, entries, live))
            rc = s_bulk_fail_store(self, "counts read");
    }
    if (rc == 0 && shoal_oplog_write_unmarking(self->oplog, self->store, batch))
        rc = s_bulk_fail_store(self, "head write");
    shoal_oplog_guard_unlock(self->oplog);
    shoal_batch_destroy(&batch);
    return rc;
}

//  Starts maker M of the write under way on a thread of its own.
static int
s_maker_start(shoal_oplog_bulk_t *self, size_t m)
{
    bulk_maker_t *maker = &self->makers[m];
    assert(!maker->running && !maker->store);
    maker->load = self;
    maker->cf = s_family(m);
    maker->rows = m < BULK_FAMILIES ? &self->log[m] : &self->kv;
    maker->store = shoal_store_share(self->store);
    s_bulk_path(self, maker->cf, maker->path);
    if (!maker->store || pthread_create(&maker->thread, NULL, s_maker_run, maker) != 0) {
        shoal_store_destroy(&maker->store);
        return s_bulk_fail(self, "cannot start a thread for %s", shoal_cf_name(maker->cf));
    }
    maker->running = true;
    return 0;
}

//  Waits for every maker started, then forgets them and their table files
//  (a file not ingested is removed).
static void
s_makers_clear(shoal_oplog_bulk_t *self)
{
    for (size_t m = 0; m <= BULK_FAMILIES; m++) {
        bulk_maker_t *maker = &self->makers[m];
        if (maker->running)
            pthread_join(maker->thread, NULL);
        shoal_table_destroy(&maker->table);
        shoal_store_destroy(&maker->store);
        free(maker->winners);
        free(maker->picked);
        free(maker->error);
        memset(maker, 0, sizeof *maker);
    }
    free(self->generations);
    self->generations = NULL;
    self->made = false;
}

int
shoal_oplog_bulk_prepare(shoal_oplog_bulk_t *self)
{
    if (self->count == 0)
        return 0;
    for (size_t m = 0; m < BULK_FAMILIES; m++)
        if (!self->makers[m].store && s_maker_start(self, m))
            return -1;
    return 0;
}

int
shoal_oplog_bulk_make(shoal_oplog_bulk_t *self)
{
    if (self->count == 0 || self->made)
        return 0;
    free(self->generations);
    self->generations = (uint64_t *) calloc(self->chain_count + 1, sizeof(uint64_t));
    if (!self->generations)
        return s_bulk_fail(self, "out of memory");
    //  The kv state is read after the generations: see s_bulk_ingest_kv.
    s_bulk_generations(self, self->generations);
    int rc = shoal_oplog_bulk_prepare(self);
    if (rc == 0)
        rc = s_maker_start(self, BULK_FAMILIES);
    for (size_t m = 0; m <= BULK_FAMILIES; m++)
        if (self->makers[m].running) {
            pthread_join(self->makers[m].thread, NULL);
            self->makers[m].running = false;
        }
    for (size_t m = 0; m <= BULK_FAMILIES && rc == 0; m++)
        if (self->makers[m].error)
            rc = s_bulk_fail(self, "%s table: %s", shoal_cf_name(self->makers[m].cf), self->makers[m].error);
    if (rc)
        s_makers_clear(self);
    else
        self->made = true;
    return rc;
}

int
shoal_oplog_bulk_ingest(shoal_oplog_bulk_t *self, shoal_oplog_bulk_result_t *result)
{
    shoal_oplog_bulk_result_t done = { 0 };
    if (result)
        *result = done;
    if (self->count == 0)
        return 0;
    int rc = shoal_oplog_bulk_make(self);
    bulk_maker_t *makers = self->makers;
    //  kv first, the log families in s_families order (see the top of
    //  shoal_oplog_bulk.h), then the heads; marked as loading throughout,
    //  so that a crash among them is reconciled at the next start.
    if (rc == 0 && shoal_oplog_mark_loading(self->oplog, self->store, true))
        rc = s_bulk_fail_store(self, "marking a load");
    if (rc == 0)
        rc = s_bulk_ingest_kv(self, &makers[BULK_FAMILIES], self->generations, &done.keys);
    for (size_t m = 0; m < BULK_FAMILIES && rc == 0; m++) {
        s_bulk_ingesting(self, makers[m].cf);
        if (shoal_store_ingest(makers[m].store, makers[m].table))
            rc = s_bulk_fail(self, "%s: %s", shoal_cf_name(makers[m].cf),
                             shoal_store_error(makers[m].store));
    }
    if (rc == 0)
        rc = s_bulk_write_heads(self, &done.heads);
    s_makers_clear(self);
    if (rc)
        return rc;
    done.entries = self->count;
    s_bulk_empty(self);
    if (result)
        *result = done;
    return 0;
}

int
shoal_oplog_bulk_write(shoal_oplog_bulk_t *self, shoal_oplog_bulk_result_t *result)
{
    return shoal_oplog_bulk_ingest(self, result);
}

int
shoal_oplog_bulk_pause_compaction(shoal_store_t *store, bool paused)
{
    int rc = 0;
    for (size_t m = 0; m <= BULK_FAMILIES; m++)
        rc |= shoal_store_pause_compaction(store, s_family(m), paused);
    return rc ? -1 : 0;
}

int
shoal_oplog_bulk_level0_files(shoal_store_t *store, uint64_t *most)
{
    *most = 0;
    for (size_t m = 0; m <= BULK_FAMILIES; m++) {
        uint64_t files;
        if (shoal_store_level0_files(store, s_family(m), &files))
            return -1;
        if (files > *most)
            *most = files;
    }
    return 0;
}

size_t
shoal_oplog_bulk_sweep(const char *dir)
{
    DIR *handle = opendir(dir);
    if (!handle)
        return 0;
    size_t removed = 0;
    size_t prefix = strlen(BULK_FILE_PREFIX), suffix = strlen(BULK_FILE_SUFFIX);
    for (struct dirent *file = readdir(handle); file; file = readdir(handle)) {
        size_t length = strlen(file->d_name);
        if (length <= prefix + suffix || strncmp(file->d_name, BULK_FILE_PREFIX, prefix) != 0
        ||  strcmp(file->d_name + length - suffix, BULK_FILE_SUFFIX) != 0)
            continue;
        char path[BULK_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, file->d_name);
        if (unlink(path) == 0)
            removed++;
    }
    closedir(handle);
    return removed;
}
