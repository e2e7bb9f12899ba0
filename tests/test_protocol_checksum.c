/*  test_protocol_checksum: an object's checksum names its algorithm. One
    made by an older node (BLAKE2b-256, 32 bytes untagged) is told from a
    new one (XXH3-128, tagged), each is what its library computes, a hash
    fed in pieces equals one fed at once, and an object request carries
    either through the envelope while a checksum of no known algorithm is
    refused. */
#include "shoal_test.h"
#include "shoal_checksum.h"
#include "shoal_proto.h"
#include "shoal_round_trip.h"
#include "shoal_alloc.h"

#include <assert.h>
#include <czmq.h>
#include <sodium.h>
#include <xxhash.h>

#define ERROR_MAX 512
#define S_BYTES 100003

static void
s_fill(uint8_t *bytes, size_t size)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = (uint8_t) (i * 131 + (i >> 8));
}

static void
test_algorithms(void)
{
    static uint8_t bytes[S_BYTES];
    s_fill(bytes, sizeof bytes);

    //  BLAKE2b-256: 32 bytes, libsodium's generichash, plain hex.
    shoal_checksum_t blake2b;
    shoal_checksum_of(SHOAL_CHECKSUM_BLAKE2B, bytes, sizeof bytes, &blake2b);
    uint8_t expected[32];
    crypto_generichash(expected, sizeof expected, bytes, sizeof bytes, NULL, 0);
    CHECK_INT(blake2b.size, 32);
    CHECK(memcmp(blake2b.bytes, expected, 32) == 0);
    CHECK_INT(shoal_checksum_algorithm(blake2b.bytes, blake2b.size), SHOAL_CHECKSUM_BLAKE2B);
    char text[SHOAL_CHECKSUM_TEXT_MAX];
    shoal_checksum_text(blake2b.bytes, blake2b.size, text);
    CHECK_INT(strlen(text), 64);
    CHECK(strchr(text, ':') == NULL);

    //  XXH3-128: 0x01, then its canonical (big-endian) form, "xxh3-128:" hex.
    shoal_checksum_t xxh3;
    shoal_checksum_of(SHOAL_CHECKSUM_XXH3, bytes, sizeof bytes, &xxh3);
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, XXH3_128bits(bytes, sizeof bytes));
    CHECK_INT(xxh3.size, 17);
    CHECK_INT(xxh3.bytes[0], 0x01);
    CHECK(memcmp(xxh3.bytes + 1, canonical.digest, 16) == 0);
    CHECK_INT(shoal_checksum_algorithm(xxh3.bytes, xxh3.size), SHOAL_CHECKSUM_XXH3);
    shoal_checksum_text(xxh3.bytes, xxh3.size, text);
    CHECK(strncmp(text, "xxh3-128:", 9) == 0 && strlen(text) == 9 + 32);
    CHECK_STR(shoal_checksum_algorithm_name(SHOAL_CHECKSUM_XXH3), "xxh3-128");
    CHECK_STR(shoal_checksum_algorithm_name(SHOAL_CHECKSUM_BLAKE2B), "blake2b-256");

    //  The same bytes under two algorithms are two checksums.
    CHECK(!shoal_checksum_equal(&blake2b, &xxh3));

    //  Fed in uneven pieces, each hash comes out as fed at once.
    shoal_checksum_algorithm_t algorithms[] = { SHOAL_CHECKSUM_BLAKE2B, SHOAL_CHECKSUM_XXH3 };
    const shoal_checksum_t *whole[] = { &blake2b, &xxh3 };
    //  The hasher finds its state aligned wherever it lies itself (on any
    //  16-byte boundary, as malloc gives). aligned_alloc wants a multiple
    //  of its alignment.
    size_t room_size = (sizeof(shoal_hasher_t) + 64 + 63) / 64 * 64;
    uint8_t *room = (uint8_t *) aligned_alloc(64, room_size);
    assert(room);
    for (size_t a = 0; a < 2; a++)
        for (size_t shift = 0; shift < 64; shift += 16) {
            shoal_hasher_t *hasher = (shoal_hasher_t *) (room + shift);
            shoal_hasher_init(hasher, algorithms[a]);
            for (size_t at = 0, piece = 1; at < sizeof bytes; at += piece, piece = piece * 3 + 1) {
                size_t size = sizeof bytes - at < piece ? sizeof bytes - at : piece;
                shoal_hasher_update(hasher, bytes + at, size);
            }
            shoal_checksum_t pieces;
            shoal_hasher_final(hasher, &pieces);
            CHECK(shoal_checksum_equal(&pieces, whole[a]));
        }
    free(room);

    //  One changed byte changes each checksum.
    bytes[S_BYTES / 2] ^= 1;
    shoal_checksum_t changed;
    shoal_checksum_of(SHOAL_CHECKSUM_XXH3, bytes, sizeof bytes, &changed);
    CHECK(!shoal_checksum_equal(&changed, &xxh3));
    shoal_checksum_of(SHOAL_CHECKSUM_BLAKE2B, bytes, sizeof bytes, &changed);
    CHECK(!shoal_checksum_equal(&changed, &blake2b));

    //  Lengths and tags of no algorithm are none; no checksum is NONE.
    CHECK_INT(shoal_checksum_algorithm(xxh3.bytes, 16), -1);
    uint8_t wrong[17];
    memcpy(wrong, xxh3.bytes, sizeof wrong);
    wrong[0] = 0x02;
    CHECK_INT(shoal_checksum_algorithm(wrong, sizeof wrong), -1);
    shoal_checksum_t set;
    CHECK_INT(shoal_checksum_set(&set, wrong, sizeof wrong), -1);
    CHECK_INT(set.size, 0);
    CHECK_INT(shoal_checksum_algorithm(NULL, 0), SHOAL_CHECKSUM_NONE);
}


static void
test_requests(void)
{
    char error[ERROR_MAX];
    shoal_checksum_t checksums[2];
    shoal_checksum_of(SHOAL_CHECKSUM_BLAKE2B, "shoal", 5, &checksums[0]);
    shoal_checksum_of(SHOAL_CHECKSUM_XXH3, "shoal", 5, &checksums[1]);
    for (size_t i = 0; i < 2; i++) {
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 3);
        shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
        body->op = SHOAL_OBJECT_COMMIT;
        body->instance_id = 9;
        body->checksum = (uint8_t *) malloc(checksums[i].size);
        memcpy(body->checksum, checksums[i].bytes, checksums[i].size);
        body->checksum_size = checksums[i].size;
        shoal_envelope_t *decoded = shoal_round_trip(request, error, sizeof error);
        CHECK_MSG(decoded, "%s", error);
        if (decoded) {
            const shoal_msg_object_request_t *got = (const shoal_msg_object_request_t *) decoded->body;
            shoal_checksum_t carried;
            CHECK_INT(shoal_checksum_set(&carried, got->checksum, got->checksum_size), 0);
            CHECK(shoal_checksum_equal(&carried, &checksums[i]));
        }
        shoal_envelope_destroy(&decoded);
        //  A checksum cut short is of no algorithm: refused, named.
        body->checksum_size = 16;
        CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "no known algorithm"));
        shoal_envelope_destroy(&request);
    }
    //  An add names the algorithm its commit will use; one it does not know is refused.
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 4);
    shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
    body->op = SHOAL_OBJECT_ADD;
    body->name = shoal_strdup("images/base");
    body->algorithm = SHOAL_CHECKSUM_XXH3;
    shoal_envelope_t *decoded = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    if (decoded)
        CHECK_INT(((const shoal_msg_object_request_t *) decoded->body)->algorithm, SHOAL_CHECKSUM_XXH3);
    shoal_envelope_destroy(&decoded);
    body->algorithm = (shoal_checksum_algorithm_t) 7;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "checksum algorithm 7"));
    shoal_envelope_destroy(&request);
}

int
main(void)
{
    SHOAL_TEST(test_algorithms);
    SHOAL_TEST(test_requests);
    return shoal_test_finish();
}
