/*  shoal_checksum: object checksums that carry their algorithm. See
    shoal_checksum.h. */
#include "shoal_checksum.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define S_BLAKE2B_BYTES 32
#define S_XXH3_TAG 0x01
#define S_XXH3_BYTES 16
//  The alignment both states want (libsodium's and xxhash's headers).
#define S_STATE_ALIGN 64
#define S_XXH3_PREFIX "xxh3-128:"

_Static_assert(sizeof(XXH3_state_t) + S_STATE_ALIGN - 1 <= sizeof((shoal_hasher_t *) 0)->state,
               "shoal_hasher_t holds an aligned XXH3 state");
_Static_assert(sizeof(crypto_generichash_state) + S_STATE_ALIGN - 1 <= sizeof((shoal_hasher_t *) 0)->state,
               "shoal_hasher_t holds an aligned BLAKE2b state");
_Static_assert(1 + S_XXH3_BYTES <= SHOAL_CHECKSUM_MAX && S_BLAKE2B_BYTES <= SHOAL_CHECKSUM_MAX,
               "every checksum fits SHOAL_CHECKSUM_MAX");

//  The algorithm's state, aligned inside the hasher's room for it: found
//  again at every call, so the hasher needs no memory of its own.
static void *
s_state(shoal_hasher_t *hasher)
{
    uintptr_t at = (uintptr_t) hasher->state;
    at = (at + S_STATE_ALIGN - 1) & ~(uintptr_t) (S_STATE_ALIGN - 1);
    return (void *) at;
}

static XXH3_state_t *
s_xxh3(shoal_hasher_t *hasher)
{
    return (XXH3_state_t *) s_state(hasher);
}

static crypto_generichash_state *
s_blake2b(shoal_hasher_t *hasher)
{
    return (crypto_generichash_state *) s_state(hasher);
}

int
shoal_checksum_algorithm(const uint8_t *bytes, size_t size)
{
    if (size == 0)
        return SHOAL_CHECKSUM_NONE;
    if (size == S_BLAKE2B_BYTES)
        return SHOAL_CHECKSUM_BLAKE2B;
    if (size == 1 + S_XXH3_BYTES && bytes[0] == S_XXH3_TAG)
        return SHOAL_CHECKSUM_XXH3;
    return -1;
}

const char *
shoal_checksum_algorithm_name(shoal_checksum_algorithm_t algorithm)
{
    switch (algorithm) {
        case SHOAL_CHECKSUM_BLAKE2B: return "blake2b-256";
        case SHOAL_CHECKSUM_XXH3: return "xxh3-128";
        default: return NULL;
    }
}

int
shoal_checksum_set(shoal_checksum_t *checksum, const uint8_t *bytes, size_t size)
{
    memset(checksum, 0, sizeof *checksum);
    if (shoal_checksum_algorithm(bytes, size) < 0)
        return -1;
    if (size)
        memcpy(checksum->bytes, bytes, size);
    checksum->size = size;
    return 0;
}

bool
shoal_checksum_equal(const shoal_checksum_t *a, const shoal_checksum_t *b)
{
    return a->size == b->size && a->size > 0 && sodium_memcmp(a->bytes, b->bytes, a->size) == 0;
}

void
shoal_checksum_text(const uint8_t *bytes, size_t size, char *text)
{
    static const char digits[] = "0123456789abcdef";
    *text = '\0';
    int algorithm = shoal_checksum_algorithm(bytes, size);
    if (algorithm <= SHOAL_CHECKSUM_NONE)
        return;
    char *at = text;
    if (algorithm == SHOAL_CHECKSUM_XXH3) {
        at += sprintf(at, "%s", S_XXH3_PREFIX);
        bytes++;
        size--;
    }
    for (size_t i = 0; i < size; i++) {
        *at++ = digits[bytes[i] >> 4];
        *at++ = digits[bytes[i] & 15];
    }
    *at = '\0';
}

void
shoal_hasher_init(shoal_hasher_t *hasher, shoal_checksum_algorithm_t algorithm)
{
    assert(algorithm == SHOAL_CHECKSUM_BLAKE2B || algorithm == SHOAL_CHECKSUM_XXH3);
    hasher->algorithm = algorithm;
    if (algorithm == SHOAL_CHECKSUM_BLAKE2B)
        crypto_generichash_init(s_blake2b(hasher), NULL, 0, S_BLAKE2B_BYTES);
    else
        XXH3_128bits_reset(s_xxh3(hasher));
}

void
shoal_hasher_update(shoal_hasher_t *hasher, const void *data, size_t size)
{
    if (size == 0)
        return;
    if (hasher->algorithm == SHOAL_CHECKSUM_BLAKE2B)
        crypto_generichash_update(s_blake2b(hasher), (const unsigned char *) data, size);
    else
        XXH3_128bits_update(s_xxh3(hasher), data, size);
}

void
shoal_hasher_final(shoal_hasher_t *hasher, shoal_checksum_t *checksum)
{
    memset(checksum, 0, sizeof *checksum);
    if (hasher->algorithm == SHOAL_CHECKSUM_BLAKE2B) {
        crypto_generichash_final(s_blake2b(hasher), checksum->bytes, S_BLAKE2B_BYTES);
        checksum->size = S_BLAKE2B_BYTES;
    }
    else {
        XXH128_canonical_t canonical;
        XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(s_xxh3(hasher)));
        checksum->bytes[0] = S_XXH3_TAG;
        memcpy(checksum->bytes + 1, canonical.digest, S_XXH3_BYTES);
        checksum->size = 1 + S_XXH3_BYTES;
    }
}

void
shoal_checksum_of(shoal_checksum_algorithm_t algorithm, const void *data, size_t size, shoal_checksum_t *checksum)
{
    shoal_hasher_t hasher;
    shoal_hasher_init(&hasher, algorithm);
    shoal_hasher_update(&hasher, data, size);
    shoal_hasher_final(&hasher, checksum);
}
