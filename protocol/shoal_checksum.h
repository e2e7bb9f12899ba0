/*  shoal_checksum: the checksum of a storage object's bytes, and the hash
    that makes it.

    A checksum carries its algorithm, so that bytes checksummed by a node
    of any age are checked with the algorithm that checksummed them:

        32 bytes                 BLAKE2b-256 (libsodium's generichash), what
                                 nodes and clients wrote before XXH3
        0x01, then 16 bytes      XXH3-128, its canonical (big-endian) form

    XXH3-128 is what new checksums use. The checksum guards against
    corruption (a disk, a bug, a file changed behind the node), not against
    an adversary: the bytes travel CURVE-authenticated and sit in the
    node's own data directory. XXH3 costs a small fraction of what the
    transfer's encryption does per byte, where BLAKE2b costs half as much
    again, on the one core a receiver has.

    Its text form (libshoal, shoalctl, logs) is lowercase hex for BLAKE2b,
    as it always was, and "xxh3-128:" then hex for XXH3-128.
*/
#ifndef SHOAL_CHECKSUM_H_INCLUDED
#define SHOAL_CHECKSUM_H_INCLUDED

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

//  The longest checksum, in bytes.
#define SHOAL_CHECKSUM_MAX 32
//  The longest text form, with its terminating NUL.
#define SHOAL_CHECKSUM_TEXT_MAX (2 * SHOAL_CHECKSUM_MAX + 1)

typedef enum {
    SHOAL_CHECKSUM_NONE = 0,        //  no checksum (an instance still written)
    SHOAL_CHECKSUM_BLAKE2B = 1,     //  BLAKE2b-256, untagged
    SHOAL_CHECKSUM_XXH3 = 2,        //  XXH3-128, tagged 0x01
} shoal_checksum_algorithm_t;

//  The algorithm new checksums use.
#define SHOAL_CHECKSUM_DEFAULT SHOAL_CHECKSUM_XXH3

//  A checksum as it is stored and sent: SIZE bytes (0: none).
typedef struct {
    uint8_t bytes[SHOAL_CHECKSUM_MAX];
    size_t size;
} shoal_checksum_t;

//  The hash of bytes on their way to a checksum. Init it before use; it
//  holds no memory of its own, and must not be copied while in use.
typedef struct {
    shoal_checksum_algorithm_t algorithm;
    //  The algorithm's state, opaque here: BLAKE2b's (384 bytes) or XXH3's
    //  (576), each aligned to the 64 bytes it wants inside this room, so
    //  that a hasher may sit in memory malloc aligns to 16 only.
    alignas(16) unsigned char state[704];
} shoal_hasher_t;

//  The algorithm of the checksum BYTES (SIZE bytes), or SHOAL_CHECKSUM_NONE
//  when SIZE is 0; -1 when it is of no algorithm shoal knows.
int shoal_checksum_algorithm(const uint8_t *bytes, size_t size);

//  "blake2b-256", "xxh3-128"; NULL for any other.
const char *shoal_checksum_algorithm_name(shoal_checksum_algorithm_t algorithm);

//  Sets CHECKSUM from BYTES (SIZE bytes). Returns 0, or -1 when they are
//  no checksum shoal knows (CHECKSUM is then empty).
int shoal_checksum_set(shoal_checksum_t *checksum, const uint8_t *bytes, size_t size);

//  Whether A and B are the same checksum (same algorithm, same bytes).
bool shoal_checksum_equal(const shoal_checksum_t *a, const shoal_checksum_t *b);

//  Writes CHECKSUM's text form into TEXT (SHOAL_CHECKSUM_TEXT_MAX bytes):
//  "" for none.
void shoal_checksum_text(const uint8_t *bytes, size_t size, char *text);

//  Starts HASHER on ALGORITHM (BLAKE2B or XXH3).
void shoal_hasher_init(shoal_hasher_t *hasher, shoal_checksum_algorithm_t algorithm);
void shoal_hasher_update(shoal_hasher_t *hasher, const void *data, size_t size);
//  The checksum of every byte given to HASHER since its init.
void shoal_hasher_final(shoal_hasher_t *hasher, shoal_checksum_t *checksum);

//  The checksum of DATA (SIZE bytes) with ALGORITHM, at once.
void shoal_checksum_of(shoal_checksum_algorithm_t algorithm, const void *data, size_t size,
                       shoal_checksum_t *checksum);

#endif
