/*  shoal_wal: reads RocksDB's write-ahead log files on their own, to say
    exactly what a damaged one lost.

    RocksDB, told to refuse any damage in its log (shoal_store does), says
    only that a log is corrupt. This reader walks every log file of a store
    directory the way RocksDB's does: 32 KiB blocks of records, each with a
    CRC32C over its type and payload, a write batch spread over one record
    or several fragments. It stops at nothing: every record that fails its
    check is reported with its file and byte offset and, when its payload
    still parses as a write batch, the keys that batch wrote. Records RocksDB
    would drop with it (the rest of the block after a bad checksum, the
    fragments of a batch cut in the middle) are reported as lost beside it.

    It reads files only, never the database: it runs on a store that does
    not open.
*/
#ifndef SHOAL_WAL_H_INCLUDED
#define SHOAL_WAL_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  One key a lost write batch held: its column family id (RocksDB's number,
//  the order shoal_store created its families in) and the encoded key.
typedef struct {
    uint32_t cf;                //  column family id
    uint8_t *bytes;             //  the key (owned)
    size_t size;                //  its length
} shoal_wal_key_t;

//  One damaged or lost record.
typedef struct {
    char *file;                 //  the log file's name ("000012.log")
    uint64_t offset;            //  byte offset of its first fragment in the file
    char *why;                  //  what is wrong ("checksum mismatch", ...)
    bool dropped;               //  intact, but lost with the damaged record before it
    bool keys_known;            //  its payload parsed: KEYS lists every key it wrote
    shoal_wal_key_t *keys;      //  the keys, KEY_COUNT of them
    size_t key_count;
} shoal_wal_bad_t;

typedef struct {
    shoal_wal_bad_t *bad;       //  every damaged or lost record, in log order
    size_t count;
} shoal_wal_report_t;

//  Reads every *.log file in DIR (a RocksDB directory) in number order and
//  fills REPORT (cleared first). Returns 0 (REPORT->count 0: no damage), or
//  -1 when a file cannot be read (*ERROR_P, when not NULL, says why; the
//  caller frees it).
int shoal_wal_check(const char *dir, shoal_wal_report_t *report, char **error_p);

//  Frees what REPORT holds. Safe twice.
void shoal_wal_report_clear(shoal_wal_report_t *report);

//  A text naming every damaged record of REPORT with file, offset and keys,
//  NAME_CF turning a family id into a name (may return NULL: the id is
//  shown). At most MAX_KEYS keys are named in all. The caller frees it.
char *shoal_wal_report_describe(const shoal_wal_report_t *report,
                                const char *(*name_cf)(uint32_t cf), size_t max_keys);

//  CRC32C (Castagnoli) of SIZE bytes at DATA, continuing from CRC (0 to
//  start), as RocksDB's log records use it before masking.
uint32_t shoal_wal_crc32c(uint32_t crc, const void *data, size_t size);

#endif
