/*  shoal_wal: RocksDB's write-ahead log read on its own. See shoal_wal.h.

    DESIGN: how RocksDB writes a log, and what this reader takes from it.
    1. A log file is a sequence of 32 KiB blocks. A block holds records; a
       record never crosses a block, and fewer than a header's bytes left at
       the end of a block are padding.
    2. A record is a header (masked CRC32C: 4 bytes, length: 2, type: 1;
       the recyclable types add the log number: 4) and its payload. The CRC
       covers the type byte, the log number when there is one, and the
       payload.
    3. A write batch is one record (full) or fragments (first, middle...,
       last). Its payload is a sequence number (8 bytes), a count (4), then
       one tagged operation after another (key, value, family id varints).
    4. On a bad checksum RocksDB's reader drops the rest of the block, since
       the length itself may be what was damaged: so this reader reports
       every record after it in that block as lost with it, reading them by
       their lengths where these still hold. A damaged first fragment whose
       length still fits its block is gathered with the fragments that
       follow it, which RocksDB then drops as orphans: the whole batch
       names the damaged record's keys (as "at least": the damaged byte may
       be in one of them).
    5. A zero header (type 0, length 0) is preallocated space: the rest of
       the block is skipped, as RocksDB does.
*/
#include "shoal_wal.h"
#include "shoal_key.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

//  Layout of a log (RocksDB's db/log_format.h).
#define WAL_BLOCK_SIZE 32768
#define WAL_HEADER_SIZE 7
#define WAL_RECYCLABLE_HEADER_SIZE 11
#define WAL_CRC_MASK_DELTA 0xa282ead8u
//  Where the header fields sit.
#define WAL_LENGTH_AT 4
#define WAL_TYPE_AT 6
//  Record types.
#define WAL_TYPE_ZERO 0
#define WAL_TYPE_FULL 1
#define WAL_TYPE_FIRST 2
#define WAL_TYPE_MIDDLE 3
#define WAL_TYPE_LAST 4
#define WAL_TYPE_RECYCLABLE_FULL 5
#define WAL_TYPE_RECYCLABLE_LAST 8
//  The distance from a recyclable type to its plain one.
#define WAL_RECYCLABLE_SHIFT 4
//  A write batch's header: sequence number and count.
#define WAL_BATCH_HEADER_SIZE 12
//  Write batch operation tags (RocksDB's db/dbformat.h ValueType).
#define WAL_OP_DELETION 0x0
#define WAL_OP_VALUE 0x1
#define WAL_OP_MERGE 0x2
#define WAL_OP_LOG_DATA 0x3
#define WAL_OP_CF_DELETION 0x4
#define WAL_OP_CF_VALUE 0x5
#define WAL_OP_CF_MERGE 0x6
#define WAL_OP_SINGLE_DELETION 0x7
#define WAL_OP_CF_SINGLE_DELETION 0x8
#define WAL_OP_NOOP 0xD
#define WAL_OP_CF_RANGE_DELETION 0xE
#define WAL_OP_RANGE_DELETION 0xF
//  A varint32 takes at most this many bytes.
#define WAL_VARINT32_MAX 5
//  CRC32C's reflected polynomial.
#define WAL_CRC32C_POLY 0x82f63b78u

//  A cursor over a payload being parsed.
typedef struct {
    const uint8_t *data;                //  the payload
    size_t size;                        //  its length
    size_t at;                          //  the next byte to read
} s_cursor_t;

//  A batch being gathered from its fragments.
typedef struct {
    uint8_t *payload;                   //  the fragments so far
    size_t size;
    uint64_t offset;                    //  where its first fragment starts
    bool open;                          //  a first fragment was read, not yet its last
    char *lost;                         //  why it is lost already (dropped with a damaged record), or NULL
    size_t damaged;                     //  1 + the report's index of its first fragment, damaged; 0: intact
} s_batch_t;

uint32_t
shoal_wal_crc32c(uint32_t crc, const void *data, size_t size)
{
    const uint8_t *bytes = (const uint8_t *) data;
    crc = ~crc;
    for (size_t i = 0; i < size; i++) {
        crc ^= bytes[i];
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (WAL_CRC32C_POLY & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t
s_crc_unmask(uint32_t masked)
{
    uint32_t rot = masked - WAL_CRC_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

static uint32_t
s_fixed32(const uint8_t *bytes)
{
    return (uint32_t) bytes[0] | (uint32_t) bytes[1] << 8 | (uint32_t) bytes[2] << 16
         | (uint32_t) bytes[3] << 24;
}

static int
s_varint32(s_cursor_t *cursor, uint32_t *value)
{
    *value = 0;
    for (int i = 0; i < WAL_VARINT32_MAX && cursor->at < cursor->size; i++) {
        uint8_t byte = cursor->data[cursor->at++];
        *value |= (uint32_t) (byte & 0x7f) << (7 * i);
        if (!(byte & 0x80))
            return 0;
    }
    return -1;
}

//  A length-prefixed slice: *BYTES points into the payload.
static int
s_slice(s_cursor_t *cursor, const uint8_t **bytes, size_t *size)
{
    uint32_t length;
    if (s_varint32(cursor, &length) || length > cursor->size - cursor->at)
        return -1;
    *bytes = cursor->data + cursor->at;
    *size = length;
    cursor->at += length;
    return 0;
}

static void
s_bad_add_key(shoal_wal_bad_t *bad, uint32_t cf, const uint8_t *bytes, size_t size)
{
    bad->keys = (shoal_wal_key_t *) shoal_realloc(bad->keys, (bad->key_count + 1) * sizeof *bad->keys);
    shoal_wal_key_t *key = &bad->keys[bad->key_count++];
    key->cf = cf;
    key->bytes = (uint8_t *) shoal_malloc(size);
    memcpy(key->bytes, bytes, size);
    key->size = size;
}

//  Parses PAYLOAD as a write batch and adds the keys it writes to BAD.
//  Leaves BAD->keys_known false when it does not parse.
static void
s_batch_keys(shoal_wal_bad_t *bad, const uint8_t *payload, size_t size)
{
    if (size < WAL_BATCH_HEADER_SIZE)
        return;
    s_cursor_t cursor = { payload, size, WAL_BATCH_HEADER_SIZE };
    while (cursor.at < cursor.size) {
        uint8_t tag = cursor.data[cursor.at++];
        uint32_t cf = 0;
        const uint8_t *key, *other;
        size_t key_size, other_size;
        bool has_cf = tag == WAL_OP_CF_DELETION || tag == WAL_OP_CF_VALUE || tag == WAL_OP_CF_MERGE
                   || tag == WAL_OP_CF_SINGLE_DELETION || tag == WAL_OP_CF_RANGE_DELETION;
        if (has_cf && s_varint32(&cursor, &cf))
            return;
        switch (tag) {
            case WAL_OP_VALUE: case WAL_OP_CF_VALUE:
            case WAL_OP_MERGE: case WAL_OP_CF_MERGE:
            case WAL_OP_RANGE_DELETION: case WAL_OP_CF_RANGE_DELETION:
                if (s_slice(&cursor, &key, &key_size) || s_slice(&cursor, &other, &other_size))
                    return;
                s_bad_add_key(bad, cf, key, key_size);
                break;
            case WAL_OP_DELETION: case WAL_OP_CF_DELETION:
            case WAL_OP_SINGLE_DELETION: case WAL_OP_CF_SINGLE_DELETION:
                if (s_slice(&cursor, &key, &key_size))
                    return;
                s_bad_add_key(bad, cf, key, key_size);
                break;
            case WAL_OP_LOG_DATA:
                if (s_slice(&cursor, &other, &other_size))
                    return;
                break;
            case WAL_OP_NOOP:
                break;
            default:
                //  Transactions' markers and blob indexes: shoal writes none.
                return;
        }
    }
    bad->keys_known = true;
}

static shoal_wal_bad_t *
s_report_add(shoal_wal_report_t *report, const char *file, uint64_t offset, const char *why)
{
    report->bad = (shoal_wal_bad_t *) shoal_realloc(report->bad, (report->count + 1) * sizeof *report->bad);
    shoal_wal_bad_t *bad = &report->bad[report->count++];
    memset(bad, 0, sizeof *bad);
    bad->file = shoal_strdup(file);
    bad->offset = offset;
    bad->why = shoal_strdup(why);
    return bad;
}

//  Reports the batch gathered so far as lost (its end never came).
static void
s_batch_append(s_batch_t *batch, const uint8_t *bytes, size_t size);

//  Names the keys of a batch whose first fragment was damaged, gathered up
//  to its last fragment or as far as it went, in that fragment's finding.
static void
s_batch_name_damaged(s_batch_t *batch, shoal_wal_report_t *report)
{
    shoal_wal_bad_t *bad = &report->bad[batch->damaged - 1];
    s_batch_keys(bad, batch->payload, batch->size);
    bad->keys_known = false;
    batch->damaged = 0;
}

static void
s_batch_lose(s_batch_t *batch, shoal_wal_report_t *report, const char *file, const char *why)
{
    if (!batch->open)
        return;
    if (batch->damaged)
        s_batch_name_damaged(batch, report);
    else {
        shoal_wal_bad_t *bad = s_report_add(report, file, batch->offset, why);
        s_batch_keys(bad, batch->payload, batch->size);
        //  A batch cut short parses only partly: its keys are a lower bound.
        bad->keys_known = false;
    }
    batch->open = false;
    batch->size = 0;
    free(batch->lost);
    batch->lost = NULL;
}

static void
s_batch_append(s_batch_t *batch, const uint8_t *bytes, size_t size)
{
    batch->payload = (uint8_t *) shoal_realloc(batch->payload, batch->size + size + 1);
    memcpy(batch->payload + batch->size, bytes, size);
    batch->size += size;
}

static bool
s_all_zero(const uint8_t *bytes, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (bytes[i])
            return false;
    return true;
}

//  Reports the records after a bad checksum, up to the end of the block
//  that ends at BLOCK_END, as lost with the one at DAMAGED_AT.
static void
s_block_lose(shoal_wal_report_t *report, s_batch_t *batch, const char *file, const uint8_t *data,
             size_t pos, size_t block_end, uint64_t damaged_at)
{
    char why[128];
    snprintf(why, sizeof why, "dropped with the damaged record at byte %" PRIu64 " (same block)", damaged_at);
    while (pos + WAL_HEADER_SIZE <= block_end) {
        uint32_t length = (uint32_t) data[pos + WAL_LENGTH_AT] | (uint32_t) data[pos + WAL_LENGTH_AT + 1] << 8;
        uint8_t type = data[pos + WAL_TYPE_AT];
        if (type == WAL_TYPE_ZERO)
            return;
        size_t header = type >= WAL_TYPE_RECYCLABLE_FULL && type <= WAL_TYPE_RECYCLABLE_LAST
                      ? WAL_RECYCLABLE_HEADER_SIZE : WAL_HEADER_SIZE;
        if (pos + header + length > block_end)
            return;
        uint8_t plain = type >= WAL_TYPE_RECYCLABLE_FULL ? (uint8_t) (type - WAL_RECYCLABLE_SHIFT) : type;
        if (plain == WAL_TYPE_FULL) {
            shoal_wal_bad_t *bad = s_report_add(report, file, pos, why);
            bad->dropped = true;
            s_batch_keys(bad, data + pos + header, length);
        }
        else
        if (plain == WAL_TYPE_FIRST) {
            //  A batch that goes on in the next block: its later fragments
            //  are intact, but RocksDB drops them too. Gathered to name it.
            if (batch->damaged)
                s_batch_name_damaged(batch, report);
            batch->open = true;
            batch->offset = pos;
            batch->size = 0;
            free(batch->lost);
            batch->lost = shoal_strdup(why);
            s_batch_append(batch, data + pos + header, length);
        }
        pos += header + length;
    }
}

//  Walks one log file's bytes, adding what is damaged to REPORT.
static void
s_check_file(const char *file, const uint8_t *data, size_t size, shoal_wal_report_t *report)
{
    s_batch_t batch = { 0 };
    size_t pos = 0;
    while (pos < size) {
        size_t block_end = (pos / WAL_BLOCK_SIZE + 1) * WAL_BLOCK_SIZE;
        if (block_end > size)
            block_end = size;
        if (block_end - pos < WAL_HEADER_SIZE) {
            //  Padding at a block's end, or a torn header at the file's end.
            if (block_end == size && !s_all_zero(data + pos, size - pos)) {
                s_batch_lose(&batch, report, file, "its last fragment is missing (the log ends)");
                s_report_add(report, file, pos, "a record header cut short at the end of the log");
            }
            pos = block_end;
            continue;
        }
        uint32_t masked = s_fixed32(data + pos);
        uint32_t length = (uint32_t) data[pos + WAL_LENGTH_AT] | (uint32_t) data[pos + WAL_LENGTH_AT + 1] << 8;
        uint8_t type = data[pos + WAL_TYPE_AT];
        if (type == WAL_TYPE_ZERO && length == 0) {
            //  Preallocated space, or the end of what was written.
            pos = block_end;
            continue;
        }
        bool recyclable = type >= WAL_TYPE_RECYCLABLE_FULL && type <= WAL_TYPE_RECYCLABLE_LAST;
        size_t header = recyclable ? WAL_RECYCLABLE_HEADER_SIZE : WAL_HEADER_SIZE;
        if (pos + header + length > block_end) {
            s_batch_lose(&batch, report, file, "a later fragment of it is damaged");
            s_report_add(report, file, pos, block_end == size
                         ? "a record cut short at the end of the log"
                         : "a record whose length runs past its block");
            pos = block_end;
            continue;
        }
        uint32_t crc = shoal_wal_crc32c(0, data + pos + WAL_TYPE_AT, header - WAL_TYPE_AT + length);
        const uint8_t *payload = data + pos + header;
        if (crc != s_crc_unmask(masked)) {
            s_batch_lose(&batch, report, file, "a later fragment of it is damaged");
            shoal_wal_bad_t *bad = s_report_add(report, file, pos, "checksum mismatch");
            uint8_t plain = recyclable ? (uint8_t) (type - WAL_RECYCLABLE_SHIFT) : type;
            if (plain == WAL_TYPE_FULL)
                s_batch_keys(bad, payload, length);
            else
            if (plain == WAL_TYPE_FIRST) {
                batch.open = true;
                batch.offset = pos;
                batch.size = 0;
                batch.damaged = report->count;
                s_batch_append(&batch, payload, length);
            }
            s_block_lose(report, &batch, file, data, pos + header + length, block_end, pos);
            pos = block_end;
            continue;
        }
        uint8_t plain = recyclable ? (uint8_t) (type - WAL_RECYCLABLE_SHIFT) : type;
        if (plain == WAL_TYPE_FIRST) {
            s_batch_lose(&batch, report, file, "its last fragment never came");
            batch.open = true;
            batch.offset = pos;
            batch.size = 0;
            s_batch_append(&batch, payload, length);
        }
        else
        if (plain == WAL_TYPE_MIDDLE || plain == WAL_TYPE_LAST) {
            if (!batch.open)
                s_report_add(report, file, pos, "a fragment whose first part is missing");
            else {
                s_batch_append(&batch, payload, length);
                if (plain == WAL_TYPE_LAST && batch.damaged)
                    s_batch_name_damaged(&batch, report);
                if (plain == WAL_TYPE_LAST && batch.lost) {
                    shoal_wal_bad_t *bad = s_report_add(report, file, batch.offset, batch.lost);
                    bad->dropped = true;
                    s_batch_keys(bad, batch.payload, batch.size);
                    free(batch.lost);
                    batch.lost = NULL;
                }
                if (plain == WAL_TYPE_LAST) {
                    batch.open = false;
                    batch.size = 0;
                }
            }
        }
        else
        if (plain == WAL_TYPE_FULL)
            s_batch_lose(&batch, report, file, "its last fragment never came");
        //  Other types (compression settings) carry no batch.
        pos += header + length;
    }
    s_batch_lose(&batch, report, file, "its last fragment is missing (the log ends)");
    free(batch.payload);
    free(batch.lost);
}

static int
s_name_compare(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

int
shoal_wal_check(const char *dir, shoal_wal_report_t *report, char **error_p)
{
    shoal_wal_report_clear(report);
    if (error_p)
        *error_p = NULL;
    DIR *handle = opendir(dir);
    if (!handle) {
        if (error_p)
            *error_p = zsys_sprintf("cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(handle))) {
        size_t length = strlen(entry->d_name);
        if (length > 4 && streq(entry->d_name + length - 4, ".log")) {
            names = (char **) shoal_realloc(names, (count + 1) * sizeof *names);
            names[count++] = shoal_strdup(entry->d_name);
        }
    }
    closedir(handle);
    //  RocksDB numbers its logs with leading zeros: name order is log order.
    qsort(names, count, sizeof *names, s_name_compare);
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        char *path = zsys_sprintf("%s/%s", dir, names[i]);
        FILE *file = fopen(path, "rb");
        uint8_t *data = NULL;
        long size = -1;
        if (file && fseek(file, 0, SEEK_END) == 0 && (size = ftell(file)) >= 0 && fseek(file, 0, SEEK_SET) == 0) {
            data = (uint8_t *) malloc((size_t) size + 1);
            if (!data || fread(data, 1, (size_t) size, file) != (size_t) size)
                size = -1;
        }
        if (size < 0) {
            if (error_p && rc == 0)
                *error_p = zsys_sprintf("cannot read %s: %s", path, strerror(errno));
            rc = -1;
        }
        else
            s_check_file(names[i], data, (size_t) size, report);
        if (file)
            fclose(file);
        free(data);
        free(path);
        free(names[i]);
    }
    free(names);
    return rc;
}

void
shoal_wal_report_clear(shoal_wal_report_t *report)
{
    for (size_t i = 0; i < report->count; i++) {
        shoal_wal_bad_t *bad = &report->bad[i];
        for (size_t k = 0; k < bad->key_count; k++)
            free(bad->keys[k].bytes);
        free(bad->keys);
        free(bad->file);
        free(bad->why);
    }
    free(report->bad);
    report->bad = NULL;
    report->count = 0;
}

char *
shoal_wal_report_describe(const shoal_wal_report_t *report,
                          const char *(*name_cf)(uint32_t cf), size_t max_keys)
{
    char *text = strdup("");
    size_t named = 0;
    for (size_t i = 0; i < report->count && text; i++) {
        const shoal_wal_bad_t *bad = &report->bad[i];
        char *line = bad->dropped
                   ? zsys_sprintf("%s(dropped with it, at byte %" PRIu64 ")", text, bad->offset)
                   : zsys_sprintf("%s%s at byte %" PRIu64 ": %s", text, bad->file, bad->offset, bad->why);
        free(text);
        text = line;
        if (!text)
            break;
        if (bad->key_count == 0 && !bad->keys_known) {
            line = zsys_sprintf("%s (its keys cannot be read)", text);
            free(text);
            text = line;
        }
        for (size_t k = 0; k < bad->key_count && text; k++) {
            const char *sep = k == 0 ? (bad->keys_known ? "; it wrote " : "; it wrote at least ") : ", ";
            if (named == max_keys) {
                line = zsys_sprintf("%s%s...", text, sep);
                free(text);
                text = line;
                break;
            }
            const char *cf = name_cf ? name_cf(bad->keys[k].cf) : NULL;
            char *key = shoal_key_format(bad->keys[k].bytes, bad->keys[k].size);
            char cf_text[32];
            if (!cf) {
                snprintf(cf_text, sizeof cf_text, "family #%u", bad->keys[k].cf);
                cf = cf_text;
            }
            line = zsys_sprintf("%s%s%s %s", text, sep, cf, key ? key : "(?)");
            free(key);
            free(text);
            text = line;
            named++;
        }
        if (text && i + 1 < report->count) {
            line = zsys_sprintf("%s; ", text);
            free(text);
            text = line;
        }
    }
    return text;
}
