/*  fuzz_body: the body codec of every message type, in both directions.
    The input's first byte chooses: its low bits the type, its high bit the
    reply's body rather than the request's; the rest is the body. What
    decodes must encode and decode again (shoal_fuzz_codec.h).
*/
#include "shoal_fuzz_codec.h"
#include "shoal_proto.h"

//  The first byte's bit that chooses the 200 reply's body.
#define S_REPLY_BIT 0x80

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    shoal_msg_type_t type = (shoal_msg_type_t) (data[0] & ~S_REPLY_BIT);
    const shoal_codec_t *codec = shoal_msg_body_codec(type, (data[0] & S_REPLY_BIT) != 0);
    if (codec)
        shoal_fuzz_codec_round_trip(codec, data + 1, size - 1);
    return 0;
}
