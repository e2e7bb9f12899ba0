/*  shoal_blake2b: BLAKE2b-256 of many messages at once. See shoal_blake2b.h.

    BLAKE2b (RFC 7693) in brief, as each lane runs it: the state is eight
    64-bit words, the IV with the parameter block (digest length 32, no
    key, fanout and depth 1) folded into the first; each 128-byte block is
    compressed into it with a count of the bytes hashed so far, the last
    block (zero-padded; an empty message has one) flagged as last; the
    hash is the state's first four words, little-endian.

    A group of lanes is compressed block by block: block K of every
    message in the group is loaded word-major (a vector holds word W of
    every lane), with each lane's own byte count and last flag, and a lane
    whose message has no block K is computed with the others but keeps its
    state. The round function is written once, over the vector operations
    each instruction set defines before it.
*/
#include "shoal_blake2b.h"

#include <assert.h>
#include <sodium.h>
#include <stdalign.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define S_VECTORS 1
#endif

#define S_BLOCK_BYTES 128
#define S_WORD_BYTES 8
#define S_BLOCK_WORDS (S_BLOCK_BYTES / S_WORD_BYTES)
#define S_STATE_WORDS 8
#define S_ROUNDS 12
#define S_HASH_WORDS (SHOAL_BLAKE2B_BYTES / S_WORD_BYTES)
//  The parameter block's first word: the digest's length, no key, fanout
//  1 and depth 1.
#define S_PARAMETERS (UINT64_C(0x01010000) | SHOAL_BLAKE2B_BYTES)
//  Lanes of each vector width.
#define S_LANES_AVX512 8
#define S_LANES_AVX2 4
//  What vector loads and stores are aligned to.
#define S_VECTOR_ALIGN 64

#ifdef S_VECTORS

//  The initial state, before the parameters are folded in.
static const uint64_t s_iv[S_STATE_WORDS] = {
    UINT64_C(0x6a09e667f3bcc908), UINT64_C(0xbb67ae8584caa73b), UINT64_C(0x3c6ef372fe94f82b),
    UINT64_C(0xa54ff53a5f1d36f1), UINT64_C(0x510e527fade682d1), UINT64_C(0x9b05688c2b3e6c1f),
    UINT64_C(0x1f83d9abfb41bd6b), UINT64_C(0x5be0cd19137e2179)
};

//  The message schedule: which word each step of round R mixes in is row
//  R of it, the last two rounds taking the first two rows again.
#define S_SCHEDULES 10
static const uint8_t s_sigma[S_SCHEDULES][S_BLOCK_WORDS] = {
    {  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15 },
    { 14, 10,  4,  8,  9, 15, 13,  6,  1, 12,  0,  2, 11,  7,  5,  3 },
    { 11,  8, 12,  0,  5,  2, 15, 13, 10, 14,  3,  6,  7,  1,  9,  4 },
    {  7,  9,  3,  1, 13, 12, 11, 14,  2,  6,  5, 10,  4,  0, 15,  8 },
    {  9,  0,  5,  7,  2,  4, 10, 15, 14,  1, 11, 12,  6,  8,  3, 13 },
    {  2, 12,  6, 10,  0, 11,  8,  3,  4, 13,  7,  5, 15, 14,  1,  9 },
    { 12,  5,  1, 15, 14, 13,  4, 10,  0,  7,  6,  3,  9,  2,  8, 11 },
    { 13, 11,  7, 14, 12,  1,  3,  9,  5,  0, 15,  4,  8,  6,  2, 10 },
    {  6, 15, 14,  9, 11,  3,  0,  8, 12,  2, 13,  7,  1,  4, 10,  5 },
    { 10,  2,  8,  4,  7,  6,  1,  5, 15, 11,  9, 14,  3, 12, 13,  0 },
};

//  A group of messages hashed together, a lane each, and the block of
//  theirs being compressed. Word-major arrays are what a vector loads.
typedef struct {
    const uint8_t *const *messages;     //  the group's messages
    const size_t *sizes;                //  their sizes
    size_t count;                       //  messages (lanes past them idle)
    size_t blocks[SHOAL_BLAKE2B_LANES_MAX];     //  each message's blocks
    size_t most;                        //  the most of them: the group's
    alignas(S_VECTOR_ALIGN) uint64_t words[S_BLOCK_WORDS][SHOAL_BLAKE2B_LANES_MAX];    //  the block's
    alignas(S_VECTOR_ALIGN) uint64_t counter[SHOAL_BLAKE2B_LANES_MAX];    //  bytes hashed with it
    alignas(S_VECTOR_ALIGN) uint64_t last[SHOAL_BLAKE2B_LANES_MAX];       //  all ones: a lane's last
    alignas(S_VECTOR_ALIGN) uint64_t active[SHOAL_BLAKE2B_LANES_MAX];     //  all ones: a lane has it
    alignas(S_VECTOR_ALIGN) uint64_t state[S_HASH_WORDS][SHOAL_BLAKE2B_LANES_MAX];    //  at the end
    uint8_t padded[S_BLOCK_BYTES];      //  a last block, zero-padded
} s_group_t;

static void
s_group_start(s_group_t *group, const uint8_t *const *messages, const size_t *sizes, size_t count)
{
    group->messages = messages;
    group->sizes = sizes;
    group->count = count;
    group->most = 0;
    for (size_t lane = 0; lane < count; lane++) {
        group->blocks[lane] = sizes[lane] ? (sizes[lane] + S_BLOCK_BYTES - 1) / S_BLOCK_BYTES : 1;
        if (group->blocks[lane] > group->most)
            group->most = group->blocks[lane];
    }
}

//  Loads block K of each of the group's messages into LANES lanes.
static void
s_group_load(s_group_t *group, size_t k, size_t lanes)
{
    for (size_t lane = 0; lane < lanes; lane++) {
        const uint8_t *block = NULL;
        bool has = lane < group->count && k < group->blocks[lane];
        bool last = has && k + 1 == group->blocks[lane];
        group->active[lane] = has ? UINT64_MAX : 0;
        group->last[lane] = last ? UINT64_MAX : 0;
        group->counter[lane] = 0;
        if (last) {
            size_t rest = group->sizes[lane] - k * S_BLOCK_BYTES;
            memset(group->padded, 0, sizeof group->padded);
            if (rest)
                memcpy(group->padded, group->messages[lane] + k * S_BLOCK_BYTES, rest);
            block = group->padded;
            group->counter[lane] = group->sizes[lane];
        }
        else
        if (has) {
            block = group->messages[lane] + k * S_BLOCK_BYTES;
            group->counter[lane] = (uint64_t) (k + 1) * S_BLOCK_BYTES;
        }
        for (size_t w = 0; w < S_BLOCK_WORDS; w++) {
            uint64_t word = 0;
            if (block)
                memcpy(&word, block + w * S_WORD_BYTES, S_WORD_BYTES);
            group->words[w][lane] = word;
        }
    }
}

//  Writes each message's hash from the group's final state.
static void
s_group_finish(const s_group_t *group, uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES])
{
    for (size_t lane = 0; lane < group->count; lane++)
        for (size_t w = 0; w < S_HASH_WORDS; w++)
            memcpy(hashes[lane] + w * S_WORD_BYTES, &group->state[w][lane], S_WORD_BYTES);
}

//  One step of a round (the G function) on lanes of state words A, B, C,
//  D, mixing in message words X and Y; S_ADD, S_XOR and S_ROR are the
//  vector operations of the instruction set it is compiled for.
#define S_G(a, b, c, d, x, y) do {                                          \
        a = S_ADD(S_ADD(a, b), x); d = S_ROR(S_XOR(d, a), 32);              \
        c = S_ADD(c, d);           b = S_ROR(S_XOR(b, c), 24);              \
        a = S_ADD(S_ADD(a, b), y); d = S_ROR(S_XOR(d, a), 16);              \
        c = S_ADD(c, d);           b = S_ROR(S_XOR(b, c), 63);              \
    } while (0)

//  Round R on the sixteen working vectors V with message vectors M:
//  columns, then diagonals.
#define S_ROUND(v, m, r) do {                                               \
        const uint8_t *s = s_sigma[(r) % S_SCHEDULES];                      \
        S_G(v[0], v[4], v[8],  v[12], m[s[0]],  m[s[1]]);                   \
        S_G(v[1], v[5], v[9],  v[13], m[s[2]],  m[s[3]]);                   \
        S_G(v[2], v[6], v[10], v[14], m[s[4]],  m[s[5]]);                   \
        S_G(v[3], v[7], v[11], v[15], m[s[6]],  m[s[7]]);                   \
        S_G(v[0], v[5], v[10], v[15], m[s[8]],  m[s[9]]);                   \
        S_G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);                  \
        S_G(v[2], v[7], v[8],  v[13], m[s[12]], m[s[13]]);                  \
        S_G(v[3], v[4], v[9],  v[14], m[s[14]], m[s[15]]);                  \
    } while (0)

//  A group's compression, block by block, on vectors of type T with
//  LOAD, STORE, SPLAT and BLEND (keep the new state where the mask is
//  set) of the instruction set; the state ends in GROUP->state.
#define S_GROUP_HASH(group, lanes, T, LOAD, STORE, SPLAT, BLEND) do {       \
        T h[S_STATE_WORDS];                                                 \
        for (size_t i = 0; i < S_STATE_WORDS; i++)                          \
            h[i] = SPLAT(s_iv[i] ^ (i == 0 ? S_PARAMETERS : 0));            \
        for (size_t k = 0; k < (group)->most; k++) {                        \
            s_group_load((group), k, (lanes));                              \
            T m[S_BLOCK_WORDS], v[2 * S_STATE_WORDS];                       \
            for (size_t w = 0; w < S_BLOCK_WORDS; w++)                      \
                m[w] = LOAD((group)->words[w]);                             \
            for (size_t i = 0; i < S_STATE_WORDS; i++) {                    \
                v[i] = h[i];                                                \
                v[i + S_STATE_WORDS] = SPLAT(s_iv[i]);                      \
            }                                                               \
            v[12] = S_XOR(v[12], LOAD((group)->counter));                   \
            v[14] = S_XOR(v[14], LOAD((group)->last));                      \
            for (size_t r = 0; r < S_ROUNDS; r++)                           \
                S_ROUND(v, m, r);                                           \
            T keep = LOAD((group)->active);                                 \
            for (size_t i = 0; i < S_STATE_WORDS; i++)                      \
                h[i] = BLEND(h[i], S_XOR(h[i], S_XOR(v[i], v[i + S_STATE_WORDS])), keep);   \
        }                                                                   \
        for (size_t w = 0; w < S_HASH_WORDS; w++)                           \
            STORE((group)->state[w], h[w]);                                 \
    } while (0)

//  AVX-512: eight lanes, rotations in one instruction.
#define S_ADD(a, b) _mm512_add_epi64((a), (b))
#define S_XOR(a, b) _mm512_xor_si512((a), (b))
#define S_ROR(x, n) _mm512_ror_epi64((x), (n))
#define S_LOAD512(p) _mm512_load_si512((const void *) (p))
#define S_STORE512(p, x) _mm512_store_si512((void *) (p), (x))
#define S_SPLAT512(w) _mm512_set1_epi64((long long) (w))
#define S_BLEND512(old, new, mask) \
    _mm512_mask_blend_epi64(_mm512_test_epi64_mask((mask), (mask)), (old), (new))

__attribute__((target("avx512f")))
static void
s_group_avx512(s_group_t *group)
{
    S_GROUP_HASH(group, S_LANES_AVX512, __m512i, S_LOAD512, S_STORE512, S_SPLAT512, S_BLEND512);
}

#undef S_ADD
#undef S_XOR
#undef S_ROR

//  AVX2: four lanes; a rotation by whole bytes is a shuffle of each
//  word's bytes, by 63 a shift each way.
#define S_ADD(a, b) _mm256_add_epi64((a), (b))
#define S_XOR(a, b) _mm256_xor_si256((a), (b))
#define S_ROR(x, n) ((n) == 32 ? _mm256_shuffle_epi32((x), _MM_SHUFFLE(2, 3, 0, 1))   \
                   : (n) == 24 ? _mm256_shuffle_epi8((x), ror24)                      \
                   : (n) == 16 ? _mm256_shuffle_epi8((x), ror16)                      \
                   : _mm256_or_si256(_mm256_srli_epi64((x), 63), _mm256_add_epi64((x), (x))))
#define S_LOAD256(p) _mm256_load_si256((const __m256i *) (p))
#define S_STORE256(p, x) _mm256_store_si256((__m256i *) (p), (x))
#define S_SPLAT256(w) _mm256_set1_epi64x((long long) (w))
#define S_BLEND256(old, new, mask) _mm256_blendv_epi8((old), (new), (mask))

__attribute__((target("avx2")))
static void
s_group_avx2(s_group_t *group)
{
    //  Each word's bytes moved down by three and by two places.
    const __m256i ror24 = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10,
                                           3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10);
    const __m256i ror16 = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9,
                                           2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9);
    S_GROUP_HASH(group, S_LANES_AVX2, __m256i, S_LOAD256, S_STORE256, S_SPLAT256, S_BLEND256);
}

#undef S_ADD
#undef S_XOR
#undef S_ROR

//  Hashes the messages a group of LANES at a time with HASH_GROUP.
static void
s_many_groups(size_t lanes, void (*hash_group)(s_group_t *), const uint8_t *const *messages,
              const size_t *sizes, size_t count, uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES])
{
    s_group_t group;
    for (size_t at = 0; at < count; at += lanes) {
        s_group_start(&group, messages + at, sizes + at, count - at < lanes ? count - at : lanes);
        hash_group(&group);
        s_group_finish(&group, hashes + at);
    }
}

#endif

size_t
shoal_blake2b_lanes(void)
{
#ifdef S_VECTORS
    //  libgcc's answer counts only what the kernel saves and restores too.
    if (__builtin_cpu_supports("avx512f"))
        return S_LANES_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return S_LANES_AVX2;
#endif
    return 1;
}

void
shoal_blake2b_many_lanes(size_t lanes, const uint8_t *const *messages, const size_t *sizes,
                         size_t count, uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES])
{
    size_t most = shoal_blake2b_lanes();
    if (lanes > most)
        lanes = most;
#ifdef S_VECTORS
    if (lanes >= S_LANES_AVX512) {
        s_many_groups(S_LANES_AVX512, s_group_avx512, messages, sizes, count, hashes);
        return;
    }
    if (lanes >= S_LANES_AVX2) {
        s_many_groups(S_LANES_AVX2, s_group_avx2, messages, sizes, count, hashes);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++)
        crypto_generichash(hashes[i], SHOAL_BLAKE2B_BYTES, messages[i], sizes[i], NULL, 0);
}

void
shoal_blake2b_many(const uint8_t *const *messages, const size_t *sizes, size_t count,
                   uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES])
{
    shoal_blake2b_many_lanes(SHOAL_BLAKE2B_LANES_MAX, messages, sizes, count, hashes);
}
