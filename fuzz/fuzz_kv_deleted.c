/*  fuzz_kv_deleted: the quick reader of a KvRecord's tombstone flag against
    the full decode. Both must refuse the same inputs and read the same flag
    from the others.
*/
#include "shoal_fuzz.h"
#include "shoal_oplog_codec.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char error[SHOAL_FUZZ_ERROR_MAX];
    shoal_kv_record_t record;
    int full = shoal_kv_codec.decode(data, size, &record, error, sizeof error);
    bool deleted = false;
    int quick = shoal_kv_record_deleted(data, size, &deleted);
    SHOAL_FUZZ_ASSERT(quick == full, "the quick reader answers %d, the decode %d (%s)", quick, full,
                      full ? error : "");
    if (full == 0) {
        SHOAL_FUZZ_ASSERT(deleted == record.deleted, "the quick reader reads deleted %d, the decode %d",
                          deleted, record.deleted);
        shoal_kv_codec.clear(&record);
    }
    return 0;
}
