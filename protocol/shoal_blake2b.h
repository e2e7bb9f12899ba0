/*  shoal_blake2b: BLAKE2b-256 of many messages at once.

    The oplog hashes every entry with BLAKE2b-256, as libsodium's
    crypto_generichash makes it (32 bytes, no key), and a node checks the
    hash of every entry it takes from a peer: a catch-up of a million
    entries hashes a million short messages. One message at a time, each
    of BLAKE2b's twelve rounds waits on the one before, and a vector unit
    holds only the four words of one of its column or diagonal steps.

    Here the rounds run on the blocks of several messages at once, one
    message per 64-bit lane: eight with AVX-512 (its rotations are one
    instruction), four with AVX2. The hashes are BLAKE2b's, bit for bit;
    only the work is laid out differently. Without either (another CPU, or
    a tool that emulates one without them), libsodium hashes the messages
    one by one.

    A group of lanes runs as many blocks as its longest message, so
    messages of about one size (the entries of a page) hash best together.
*/
#ifndef SHOAL_BLAKE2B_H_INCLUDED
#define SHOAL_BLAKE2B_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

//  A hash's size.
#define SHOAL_BLAKE2B_BYTES 32
//  The most messages hashed at once (AVX-512's lanes).
#define SHOAL_BLAKE2B_LANES_MAX 8

//  How many messages shoal_blake2b_many hashes at once on this CPU: 8, 4,
//  or 1 (libsodium, one by one).
size_t shoal_blake2b_lanes(void);

//  Sets HASHES[i] to the BLAKE2b-256 of MESSAGES[i] (SIZES[i] bytes; it may
//  be NULL when they are 0), for each i below COUNT.
void shoal_blake2b_many(const uint8_t *const *messages, const size_t *sizes, size_t count,
                        uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES]);

//  shoal_blake2b_many on LANES lanes (1, 4 or 8; more than this CPU has
//  is taken as its most): for tests and benchmarks comparing the ways.
void shoal_blake2b_many_lanes(size_t lanes, const uint8_t *const *messages, const size_t *sizes,
                              size_t count, uint8_t (*hashes)[SHOAL_BLAKE2B_BYTES]);

#endif
