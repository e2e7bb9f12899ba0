/*  fuzz_record: every codec of a value the store keeps (claims, counters,
    log entries, materialised keys, heads, registry values, move records),
    the input's first byte choosing which, on the rest of the input. What
    decodes must encode and decode again (shoal_fuzz_codec.h); the in-place
    entry reader (shoal_oplog_entry_read) must accept exactly what the
    entry codec accepts, and read the same entry.
*/
#include "shoal_fuzz_codec.h"
#include "shoal_msg.h"

#include <string.h>

//  Room for an entry's strings in the in-place reader; the codec's strings
//  are bounded by the input, which libFuzzer keeps below this.
#define S_STRINGS_MAX (1024 * 1024)

static const shoal_codec_t *s_codecs[] = {
    &shoal_claim_codec, &shoal_counter_codec, &shoal_oplog_entry_codec, &shoal_kv_codec,
    &shoal_head_codec, &shoal_msg_registry_record_codec, &shoal_msg_move_codec,
};

//  The in-place reader and the codec agree on BYTES.
static void
s_entry_readers_agree(const uint8_t *bytes, size_t size)
{
    static char strings[S_STRINGS_MAX];
    char error[SHOAL_FUZZ_ERROR_MAX];
    shoal_oplog_entry_t read, decoded;
    int read_rc = shoal_oplog_entry_read(bytes, size, &read, strings, sizeof strings,
                                         error, sizeof error);
    int decode_rc = shoal_oplog_entry_codec.decode(bytes, size, &decoded, error, sizeof error);
    SHOAL_FUZZ_ASSERT(read_rc == decode_rc, "the entry reader answers %d, the codec %d", read_rc,
                      decode_rc);
    if (decode_rc == 0) {
        SHOAL_FUZZ_ASSERT(strcmp(read.dataset, decoded.dataset) == 0
                          && strcmp(read.key, decoded.key) == 0
                          && strcmp(read.node, decoded.node) == 0 && read.op == decoded.op
                          && read.wall_ms == decoded.wall_ms && read.logic == decoded.logic
                          && read.has_prev == decoded.has_prev
                          && (!read.has_prev
                              || memcmp(read.prev_hash, decoded.prev_hash, sizeof read.prev_hash) == 0)
                          && read.value_size == decoded.value_size
                          && (read.value_size == 0
                              || memcmp(read.value, decoded.value, read.value_size) == 0)
                          && memcmp(read.hash, decoded.hash, sizeof read.hash) == 0,
                          "the entry reader and the codec read different entries");
        shoal_oplog_entry_codec.clear(&decoded);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const shoal_codec_t *codec = s_codecs[data[0] % SHOAL_FUZZ_COUNT(s_codecs)];
    shoal_fuzz_codec_round_trip(codec, data + 1, size - 1);
    if (codec == &shoal_oplog_entry_codec)
        s_entry_readers_agree(data + 1, size - 1);
    return 0;
}
