/*  shoal_key: an order-preserving codec for composite keys.

    A key is a tuple of elements (unsigned integers, strings, byte strings)
    encoded so that comparing the bytes with memcmp gives the tuple order, and
    so that the encoding of a tuple is a prefix of the encoding of every tuple
    that extends it. Range scans by dataset, node or time are then plain
    iterator ranges. The layout follows FoundationDB's tuple layer:

        byte string  0x01, bytes with 0x00 escaped as 0x00 0xFF, then 0x00
        string       0x02, UTF-8 bytes escaped the same way, then 0x00
        u64          0x15, 8 bytes big-endian

    shoal_key_t is a value type that lives on the stack: keys are built and
    dropped at a high rate (an oplog append builds five), so the builder does
    not allocate. A key that would exceed SHOAL_KEY_MAX is marked overflowed and
    every store call refuses it.
*/
#ifndef SHOAL_KEY_H_INCLUDED
#define SHOAL_KEY_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_limits.h"

//  Longest encoded key. Whatever the protocol admits (a dataset name and a
//  kv key of their longest, beside a node, a clock and a hash) must fit, or
//  an accepted write would fail in the store.
#define SHOAL_KEY_MAX 2048

_Static_assert(SHOAL_KEY_MAX >= SHOAL_STORE_KEY_NEEDED,
               "the store's key limit must hold the longest key the protocol admits");

#define SHOAL_KEY_TAG_BYTES 0x01
#define SHOAL_KEY_TAG_STRING 0x02
#define SHOAL_KEY_TAG_U64 0x15

typedef struct {
    uint8_t bytes[SHOAL_KEY_MAX];   //  the encoding so far
    size_t size;                    //  bytes used
    bool overflow;                  //  an element did not fit; the key is unusable
} shoal_key_t;

//  Empties KEY.
void shoal_key_init(shoal_key_t *key);

//  Appends one element.
void shoal_key_add_u64(shoal_key_t *key, uint64_t value);
void shoal_key_add_str(shoal_key_t *key, const char *value);
void shoal_key_add_bytes(shoal_key_t *key, const void *data, size_t size);

//  Appends the elements of ELEMENTS (a key built apart, whole elements),
//  as if they were added one by one: a prefix many keys share is encoded
//  once.
void shoal_key_add_key(shoal_key_t *key, const shoal_key_t *elements);

//  Appends the start of a string element without its terminator: as a scan
//  prefix it matches every key whose next element is a string starting with
//  VALUE ("app/" matches "app/1" and "app/2").
void shoal_key_add_str_prefix(shoal_key_t *key, const char *value);

//  Sets *UPPER to the exclusive end of a prefix scan under PREFIX. For a
//  prefix of whole elements that is PREFIX + 0xFF, which bounds every tuple
//  extending it (raising the last byte would not: ("\0") encodes as a byte
//  prefix of ("\0\0")); for a prefix ending in shoal_key_add_str_prefix it is
//  the prefix with its last byte raised. Returns -1 when there is no such key
//  (PREFIX empty, or full and all 0xFF).
int shoal_key_prefix_end(const shoal_key_t *prefix, shoal_key_t *upper);

//  Reads encoded keys back, one element at a time.
typedef struct {
    const uint8_t *bytes;       //  the encoded key (borrowed)
    size_t size;                //  its length
    size_t pos;                 //  offset of the next element
} shoal_key_reader_t;

void shoal_key_reader_init(shoal_key_reader_t *reader, const void *bytes, size_t size);

//  True when every element has been read.
bool shoal_key_reader_done(const shoal_key_reader_t *reader);

//  Each reads the next element, which must be of the named type. Returns 0, or
//  -1 when the next element is of another type, truncated or badly escaped.
int shoal_key_read_u64(shoal_key_reader_t *reader, uint64_t *value);
//  Unescapes into OUT (capacity OUT_SIZE, always NUL-terminated); -1 also when
//  it does not fit. The string must not contain NUL.
int shoal_key_read_str(shoal_key_reader_t *reader, char *out, size_t out_size);
//  Unescapes into OUT (capacity OUT_SIZE); *SIZE is the element's length.
int shoal_key_read_bytes(shoal_key_reader_t *reader, uint8_t *out, size_t out_size, size_t *size);

//  A readable rendering of an encoded key for messages: ("kv", "a/b", 42, x'0aff').
//  Bytes that do not decode are shown as hex after the readable part. The
//  caller frees the result.
char *shoal_key_format(const void *bytes, size_t size);

#endif
