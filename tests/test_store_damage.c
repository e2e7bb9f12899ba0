/*  test_store_damage: a damaged write-ahead log is never opened in silence.

    What users of the store rely on: a store whose log lost an acknowledged
    write refuses to open, naming the log file, the byte offset and the
    keys of the damaged record; a salvage open serves every intact write and
    reports exactly what it dropped (every key it names is gone, every key it
    does not name is there); the log reader agrees with RocksDB's checksum.
*/
#include <czmq.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shoal_store.h"
#include "shoal_test.h"

//  Writes before the damage, and the one whose value is flipped. The values
//  are large enough that a log block holds only a few records, so that the
//  rest of the damaged block is a small part of the log.
#define WRITES 200
#define DAMAGED 100
#define VALUE_BYTES 3000
//  Values larger than a log block (32 KiB): each write's record is cut into
//  fragments, its value starting in the first.
#define LARGE_WRITES 12
#define LARGE_DAMAGED 6
#define LARGE_VALUE_BYTES 40000
#define TEXT_MAX 64

static void
s_key(shoal_key_t *key, int i)
{
    char text[TEXT_MAX];
    snprintf(text, sizeof text, "k%03d", i);
    shoal_key_init(key);
    shoal_key_add_str(key, text);
}

//  The value of write I: a marker that names it, then filler.
static void
s_value(char *value, size_t bytes, int i)
{
    memset(value, 'a' + i % 26, bytes);
    snprintf(value, TEXT_MAX, "value-%03d;", i);
}

static shoal_store_t *
s_open(const char *dir, bool salvage, char **error_p)
{
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.salvage = salvage;
    return shoal_store_new(dir, &options, error_p);
}

//  Writes COUNT keys with values of BYTES synced and closes the store,
//  leaving them in its log.
static int
s_fill_with(const char *dir, int count, size_t bytes)
{
    shoal_store_t *store = s_open(dir, false, NULL);
    if (!store)
        return -1;
    char *value = (char *) malloc(bytes);
    int rc = value ? 0 : -1;
    for (int i = 0; i < count && rc == 0; i++) {
        shoal_key_t key;
        s_key(&key, i);
        s_value(value, bytes, i);
        rc = shoal_store_put(store, SHOAL_CF_KV, &key, value, bytes, true);
    }
    free(value);
    shoal_store_destroy(&store);
    return rc;
}

static int
s_fill(const char *dir)
{
    return s_fill_with(dir, WRITES, VALUE_BYTES);
}

//  Flips one byte inside the value of write I in whichever log holds it.
//  Returns 0 with *FILE_P the log's name (caller frees), or -1.
static int
s_flip(const char *dir, int i, char **file_p)
{
    char marker[TEXT_MAX];
    snprintf(marker, sizeof marker, "value-%03d;", i);
    return shoal_test_flip_in_log(dir, marker, file_p);
}

static bool
s_present(shoal_store_t *store, int i)
{
    shoal_key_t key;
    s_key(&key, i);
    bool found = false;
    shoal_store_exists(store, SHOAL_CF_KV, &key, &found);
    return found;
}

//  True when REPORT names write I among the keys it lost.
static bool
s_reported(const shoal_wal_report_t *report, int i)
{
    shoal_key_t key;
    s_key(&key, i);
    for (size_t b = 0; b < report->count; b++)
        for (size_t k = 0; k < report->bad[b].key_count; k++)
            if (report->bad[b].keys[k].size == key.size
            &&  memcmp(report->bad[b].keys[k].bytes, key.bytes, key.size) == 0)
                return true;
    return false;
}

static void
test_damage_intact_log_reads_clean(void)
{
    CHECK(s_fill(shoal_test_dir) == 0);
    shoal_wal_report_t report = { 0 };
    CHECK(shoal_wal_check(shoal_test_dir, &report, NULL) == 0);
    CHECK_INT(report.count, 0);
    shoal_store_t *store = s_open(shoal_test_dir, false, NULL);
    CHECK(store);
    CHECK(s_present(store, 0) && s_present(store, WRITES - 1));
    shoal_store_destroy(&store);
}

static void
test_damage_refused_with_its_place(void)
{
    CHECK(s_fill(shoal_test_dir) == 0);
    char *file = NULL;
    CHECK(s_flip(shoal_test_dir, DAMAGED, &file) == 0);
    char *error = NULL;
    shoal_store_t *store = s_open(shoal_test_dir, false, &error);
    bool opened = store != NULL;
    shoal_store_destroy(&store);
    CHECK_MSG(!opened, "a store whose log lost write %d opened without a word", DAMAGED);
    printf("     %s\n", error);
    char *bad = zsys_sprintf("%s at byte ", file);
    bool named = shoal_test_contains(error, SHOAL_STORE_DAMAGED) && shoal_test_contains(error, bad)
              && shoal_test_contains(error, "\"k100\"");
    free(bad);
    free(file);
    free(error);
    CHECK_MSG(named, "the error does not name the damage, its file, byte and key");
}

//  A flipped byte in the first fragment of a record that goes on in the next
//  block: RocksDB drops its later fragments as orphans; the report still
//  names the write, from the fragments together.
static void
test_damage_first_fragment_named(void)
{
    CHECK(s_fill_with(shoal_test_dir, LARGE_WRITES, LARGE_VALUE_BYTES) == 0);
    char *file = NULL;
    CHECK(s_flip(shoal_test_dir, LARGE_DAMAGED, &file) == 0);
    free(file);
    char *error = NULL;
    shoal_store_t *store = s_open(shoal_test_dir, false, &error);
    CHECK_MSG(!store, "a store whose log lost write %d opened without a word", LARGE_DAMAGED);
    printf("     %s\n", error);
    char key[TEXT_MAX];
    snprintf(key, sizeof key, "\"k%03d\"", LARGE_DAMAGED);
    CHECK_MSG(shoal_test_contains(error, "checksum mismatch") && shoal_test_contains(error, key),
              "the error does not name the damaged write's key %s", key);
    free(error);
    store = s_open(shoal_test_dir, true, NULL);
    CHECK(store);
    const shoal_wal_report_t *report = shoal_store_salvaged(store);
    for (int i = 0; i < LARGE_WRITES; i++)
        CHECK_MSG(s_present(store, i) != s_reported(report, i), "write %d is %s but %s", i,
                  s_present(store, i) ? "there" : "gone", s_reported(report, i) ? "reported lost" : "not reported");
    shoal_store_destroy(&store);
}

static void
test_damage_salvage_keeps_the_rest(void)
{
    CHECK(s_fill(shoal_test_dir) == 0);
    char *file = NULL;
    CHECK(s_flip(shoal_test_dir, DAMAGED, &file) == 0);
    free(file);
    shoal_store_t *store = s_open(shoal_test_dir, true, NULL);
    CHECK(store);
    const shoal_wal_report_t *report = shoal_store_salvaged(store);
    CHECK(report->count >= 1);
    CHECK(s_reported(report, DAMAGED));
    int lost = 0;
    for (int i = 0; i < WRITES; i++) {
        bool reported = s_reported(report, i);
        lost += reported;
        CHECK_MSG(s_present(store, i) != reported, "write %d is %s but %s", i,
                  s_present(store, i) ? "there" : "gone", reported ? "reported lost" : "not reported");
    }
    //  The rest of one block, no more.
    CHECK_MSG(lost < WRITES / 10, "%d writes lost to one flipped byte", lost);
    printf("     salvage dropped %d of %d writes\n", lost, WRITES);
    shoal_store_destroy(&store);
    //  A salvaged store opens strictly again: the damage was left behind.
    store = s_open(shoal_test_dir, false, NULL);
    CHECK(store);
    CHECK(s_present(store, WRITES - 1));
    shoal_store_destroy(&store);
}

//  The path of the log holding the most bytes in DIR (caller frees), or NULL.
static char *
s_largest_log(const char *dir)
{
    DIR *handle = opendir(dir);
    if (!handle)
        return NULL;
    char *best = NULL;
    off_t best_size = -1;
    struct dirent *entry;
    while ((entry = readdir(handle))) {
        size_t length = strlen(entry->d_name);
        if (length < 4 || !streq(entry->d_name + length - 4, ".log"))
            continue;
        char *path = zsys_sprintf("%s/%s", dir, entry->d_name);
        struct stat info;
        if (stat(path, &info) == 0 && info.st_size > best_size) {
            best_size = info.st_size;
            free(best);
            best = path;
        }
        else
            free(path);
    }
    closedir(handle);
    return best;
}

static void
test_damage_torn_tail_opens(void)
{
    //  A crash or a full disk in the middle of the last write leaves its
    //  record cut short: never acknowledged, so not damage. The store opens
    //  with every write before it.
    CHECK(s_fill(shoal_test_dir) == 0);
    char *log = s_largest_log(shoal_test_dir);
    CHECK(log);
    char marker[TEXT_MAX];
    snprintf(marker, sizeof marker, "value-%03d;", WRITES - 1);
    zchunk_t *chunk = zchunk_slurp(log, 0);
    CHECK(chunk);
    uint8_t *at = (uint8_t *) memmem(zchunk_data(chunk), zchunk_size(chunk), marker, strlen(marker));
    long cut = at ? (long) (at - zchunk_data(chunk)) + VALUE_BYTES / 2 : -1;
    zchunk_destroy(&chunk);
    CHECK(cut > 0);
    CHECK(truncate(log, cut) == 0);
    free(log);
    shoal_store_t *store = s_open(shoal_test_dir, false, NULL);
    CHECK_MSG(store, "a log whose last record is cut short does not open");
    bool first = s_present(store, 0), before_last = s_present(store, WRITES - 2), last = s_present(store, WRITES - 1);
    shoal_store_destroy(&store);
    CHECK(first && before_last && !last);
}

static void
test_damage_crc32c(void)
{
    //  The check value of CRC-32C (RFC 3720) and an empty input.
    CHECK_INT(shoal_wal_crc32c(0, "123456789", 9), 0xe3069283u);
    CHECK_INT(shoal_wal_crc32c(0, "", 0), 0);
    //  Continuing a CRC is the CRC of the whole.
    CHECK_INT(shoal_wal_crc32c(shoal_wal_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
}

int
main(void)
{
    SHOAL_TEST(test_damage_crc32c);
    SHOAL_TEST(test_damage_intact_log_reads_clean);
    SHOAL_TEST(test_damage_refused_with_its_place);
    SHOAL_TEST(test_damage_salvage_keeps_the_rest);
    SHOAL_TEST(test_damage_first_fragment_named);
    SHOAL_TEST(test_damage_torn_tail_opens);
    return shoal_test_finish();
}
