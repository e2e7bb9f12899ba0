/*  shoal_fuzz_codec: the round trip the body and record harnesses check.

    What a codec decodes it must encode again (its encode checks what its
    decode checks), and that encoding must decode again.
*/
#ifndef SHOAL_FUZZ_CODEC_H_INCLUDED
#define SHOAL_FUZZ_CODEC_H_INCLUDED

#include "shoal_fuzz.h"
#include "shoal_record.h"

//  Room for one decoded record of any codec.
#define SHOAL_FUZZ_RECORD_MAX 512

//  Decodes DATA with CODEC and checks the round trip. Returns the decode's
//  result (0 or -1).
static inline int
shoal_fuzz_codec_round_trip(const shoal_codec_t *codec, const uint8_t *data, size_t size)
{
    SHOAL_FUZZ_ASSERT(codec->record_size <= SHOAL_FUZZ_RECORD_MAX, "%s records are %zu bytes",
                      codec->name, codec->record_size);
    _Alignas(max_align_t) uint8_t record[SHOAL_FUZZ_RECORD_MAX];
    _Alignas(max_align_t) uint8_t copy[SHOAL_FUZZ_RECORD_MAX];
    char error[SHOAL_FUZZ_ERROR_MAX];
    if (codec->decode(data, size, record, error, sizeof error))
        return -1;
    uint8_t *bytes = NULL;
    size_t bytes_size = 0;
    SHOAL_FUZZ_ASSERT(codec->encode(record, &bytes, &bytes_size, error, sizeof error) == 0,
                      "a decoded %s does not encode: %s", codec->name, error);
    SHOAL_FUZZ_ASSERT(codec->decode(bytes, bytes_size, copy, error, sizeof error) == 0,
                      "a re-encoded %s does not decode: %s", codec->name, error);
    codec->clear(copy);
    codec->clear(record);
    free(bytes);
    return 0;
}

#endif
