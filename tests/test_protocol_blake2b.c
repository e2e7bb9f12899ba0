/*  test_protocol_blake2b: BLAKE2b-256 of many messages at once gives each
    message the hash libsodium gives it alone, whichever lanes this CPU
    runs: the published hashes of "" and "abc", every size around a block's
    edges, groups of mixed sizes and counts that leave lanes idle, and an
    empty message given as NULL. */
#include "shoal_test.h"
#include "shoal_blake2b.h"

#include <sodium.h>
#include <stdlib.h>

//  Sizes up to this many bytes are each hashed, in groups of one size.
#define S_SIZES_MAX 700
//  Messages of mixed sizes hashed in one call, and the longest of them.
#define S_MIXED 1000
#define S_MIXED_BYTES 3000
//  The ways a CPU may hash: one at a time (libsodium), four or eight lanes.
static const size_t s_lanes[] = { 1, 4, 8 };
#define S_WAYS (sizeof s_lanes / sizeof s_lanes[0])

static void
s_fill(uint8_t *bytes, size_t size, uint32_t seed)
{
    for (size_t i = 0; i < size; i++) {
        seed = seed * 1103515245u + 12345u;
        bytes[i] = (uint8_t) (seed >> 16);
    }
}

static void
s_hex(const uint8_t *hash, char *hex)
{
    sodium_bin2hex(hex, 2 * SHOAL_BLAKE2B_BYTES + 1, hash, SHOAL_BLAKE2B_BYTES);
}

//  RFC 7693's example and the empty message, as BLAKE2b-256 publishes them.
static void
test_known_hashes(void)
{
    const uint8_t *messages[] = { NULL, (const uint8_t *) "abc" };
    size_t sizes[] = { 0, 3 };
    const char *expected[] = {
        "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8",
        "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319",
    };
    for (size_t way = 0; way < S_WAYS; way++) {
        uint8_t hashes[2][SHOAL_BLAKE2B_BYTES];
        shoal_blake2b_many_lanes(s_lanes[way], messages, sizes, 2, hashes);
        for (size_t i = 0; i < 2; i++) {
            char hex[2 * SHOAL_BLAKE2B_BYTES + 1];
            s_hex(hashes[i], hex);
            CHECK_MSG(strcmp(hex, expected[i]) == 0, "%zu lanes, message %zu: %s, not %s", s_lanes[way], i,
                      hex, expected[i]);
        }
    }
}

//  Every size from 0 to S_SIZES_MAX bytes, nine messages of each (a group
//  of eight and one lane of the next), against libsodium one at a time.
static void
test_every_size(void)
{
    enum { COUNT = 9 };
    uint8_t *bytes = (uint8_t *) malloc(COUNT * S_SIZES_MAX + 1);
    CHECK(bytes);
    s_fill(bytes, COUNT * S_SIZES_MAX, 7);
    bool same = true;
    size_t bad_size = 0, bad_lanes = 0;
    for (size_t size = 0; size <= S_SIZES_MAX && same; size++) {
        const uint8_t *messages[COUNT];
        size_t sizes[COUNT];
        uint8_t expected[COUNT][SHOAL_BLAKE2B_BYTES];
        for (size_t i = 0; i < COUNT; i++) {
            messages[i] = bytes + i * size;
            sizes[i] = size;
            crypto_generichash(expected[i], SHOAL_BLAKE2B_BYTES, messages[i], size, NULL, 0);
        }
        for (size_t way = 0; way < S_WAYS && same; way++) {
            uint8_t hashes[COUNT][SHOAL_BLAKE2B_BYTES];
            shoal_blake2b_many_lanes(s_lanes[way], messages, sizes, COUNT, hashes);
            if (memcmp(hashes, expected, sizeof expected) != 0) {
                same = false;
                bad_size = size;
                bad_lanes = s_lanes[way];
            }
        }
    }
    free(bytes);
    CHECK_MSG(same, "messages of %zu bytes hashed on %zu lanes differ from libsodium's hashes", bad_size,
              bad_lanes);
}

//  Messages of mixed sizes (so a group's lanes end on different blocks),
//  some empty and given as NULL, in counts that leave lanes idle.
static void
test_mixed_sizes(void)
{
    uint8_t *bytes = (uint8_t *) malloc((size_t) S_MIXED * S_MIXED_BYTES);
    const uint8_t **messages = (const uint8_t **) malloc(S_MIXED * sizeof *messages);
    size_t *sizes = (size_t *) malloc(S_MIXED * sizeof *sizes);
    uint8_t (*expected)[SHOAL_BLAKE2B_BYTES] = malloc(S_MIXED * sizeof *expected);
    uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES] = malloc(S_MIXED * sizeof *hashes);
    bool allocated = bytes && messages && sizes && expected && hashes;
    size_t bad = SIZE_MAX, bad_lanes = 0, bad_count = 0;
    if (allocated) {
        s_fill(bytes, (size_t) S_MIXED * S_MIXED_BYTES, 11);
        uint32_t seed = 3;
        for (size_t i = 0; i < S_MIXED; i++) {
            seed = seed * 1103515245u + 12345u;
            //  A third short, a third of a few blocks, a third up to the most.
            size_t most = i % 3 == 0 ? 40 : i % 3 == 1 ? 600 : S_MIXED_BYTES;
            sizes[i] = (seed >> 8) % (most + 1);
            messages[i] = sizes[i] == 0 && i % 2 ? NULL : bytes + i * (size_t) S_MIXED_BYTES;
            crypto_generichash(expected[i], SHOAL_BLAKE2B_BYTES, messages[i], sizes[i], NULL, 0);
        }
        //  The whole set, then shorter calls that end partway into a group.
        size_t counts[] = { S_MIXED, 1, 3, 5, 7, 13 };
        for (size_t c = 0; c < sizeof counts / sizeof counts[0] && bad == SIZE_MAX; c++)
            for (size_t way = 0; way < S_WAYS && bad == SIZE_MAX; way++) {
                memset(hashes, 0, S_MIXED * sizeof *hashes);
                shoal_blake2b_many_lanes(s_lanes[way], messages, sizes, counts[c], hashes);
                for (size_t i = 0; i < counts[c] && bad == SIZE_MAX; i++)
                    if (memcmp(hashes[i], expected[i], SHOAL_BLAKE2B_BYTES) != 0) {
                        bad = i;
                        bad_lanes = s_lanes[way];
                        bad_count = counts[c];
                    }
            }
    }
    size_t bad_size = bad == SIZE_MAX ? 0 : sizes[bad];
    free(bytes);
    free(messages);
    free(sizes);
    free(expected);
    free(hashes);
    CHECK(allocated);
    CHECK_MSG(bad == SIZE_MAX, "message %zu (%zu bytes) of %zu hashed on %zu lanes differs from libsodium's hash",
              bad, bad_size, bad_count, bad_lanes);
}

//  The default call is the widest this CPU runs, and that is one of three.
static void
test_lanes(void)
{
    size_t lanes = shoal_blake2b_lanes();
    CHECK_MSG(lanes == 1 || lanes == 4 || lanes == 8, "%zu lanes", lanes);
    printf("    this CPU hashes %zu message(s) at once\n", lanes);
    const uint8_t *messages[] = { (const uint8_t *) "shoal" };
    size_t sizes[] = { 5 };
    uint8_t hash[1][SHOAL_BLAKE2B_BYTES], expected[SHOAL_BLAKE2B_BYTES];
    shoal_blake2b_many(messages, sizes, 1, hash);
    crypto_generichash(expected, SHOAL_BLAKE2B_BYTES, messages[0], sizes[0], NULL, 0);
    CHECK(memcmp(hash[0], expected, SHOAL_BLAKE2B_BYTES) == 0);
}

int
main(void)
{
    if (sodium_init() < 0) {
        fprintf(stderr, "libsodium does not start\n");
        return 1;
    }
    SHOAL_TEST(test_known_hashes);
    SHOAL_TEST(test_every_size);
    SHOAL_TEST(test_mixed_sizes);
    SHOAL_TEST(test_lanes);
    return shoal_test_finish();
}
