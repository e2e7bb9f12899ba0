/*  fuzz_envelope: shoal_envelope_decode on any first frame, alone or with a
    bulk frame after it (the input's first byte says which). An envelope
    that decodes must encode again, and that encoding must decode to the
    same type, request id and status.
*/
#include "shoal_fuzz.h"
#include "shoal_proto.h"

//  A first byte with this bit set adds a bulk frame of the input's tail.
#define S_BULK_BIT 0x01
//  How many of the input's last bytes go to the bulk frame then.
#define S_BULK_SIZE_MAX 64

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool bulk = data[0] & S_BULK_BIT;
    data++, size--;
    size_t bulk_size = bulk ? (size < S_BULK_SIZE_MAX ? size : S_BULK_SIZE_MAX) : 0;
    zmsg_t *msg = zmsg_new();
    zmsg_addmem(msg, data, size - bulk_size);
    if (bulk)
        zmsg_addmem(msg, data + size - bulk_size, bulk_size);
    char error[SHOAL_FUZZ_ERROR_MAX];
    shoal_envelope_t *envelope = shoal_envelope_decode(msg, error, sizeof error);
    if (envelope) {
        zmsg_t *again = shoal_envelope_encode(envelope, error, sizeof error);
        SHOAL_FUZZ_ASSERT(again, "a decoded %s envelope does not encode: %s",
                          shoal_msg_type_name(envelope->type), error);
        shoal_envelope_t *copy = shoal_envelope_decode(again, error, sizeof error);
        SHOAL_FUZZ_ASSERT(copy, "a re-encoded %s envelope does not decode: %s",
                          shoal_msg_type_name(envelope->type), error);
        SHOAL_FUZZ_ASSERT(copy->type == envelope->type && copy->request_id == envelope->request_id
                          && copy->status == envelope->status && !copy->body == !envelope->body,
                          "a %s envelope changed in a round trip", shoal_msg_type_name(envelope->type));
        shoal_envelope_destroy(&copy);
        zmsg_destroy(&again);
        shoal_envelope_destroy(&envelope);
    }
    zmsg_destroy(&msg);
    return 0;
}
