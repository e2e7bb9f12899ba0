/*  fuzz_key: the order-preserving key codec (store/shoal_key.c), both ways.

    The input's first byte chooses. Even: the rest is an encoded key, read
    element by element (the type of each element chosen by the bytes
    themselves, as a reader that trusts nothing would) and formatted for a
    message. Odd: the rest is a script of elements to append (a type byte,
    a length byte, that many bytes); the key built from them must read back
    to exactly those elements, and its order must follow theirs against a
    second key built from the script's second half.
*/
#include "shoal_fuzz.h"
#include "shoal_key.h"

#include <stdbool.h>
#include <string.h>

//  Elements a script may append.
#define S_ELEMENTS_MAX 16
//  Room for one element read back.
#define S_ELEMENT_MAX (SHOAL_KEY_MAX + 1)
#define S_U64_SIZE 8

typedef enum { S_U64, S_STR, S_BYTES } s_kind_t;

typedef struct {
    s_kind_t kind;              //  which element type
    const uint8_t *data;        //  its bytes (a string's have no NUL)
    size_t size;                //  how many
    uint64_t number;            //  a u64's value
} s_element_t;

//  Reads an encoded key through, trusting nothing.
static void
s_read_any(const uint8_t *data, size_t size)
{
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, data, size);
    uint8_t out[S_ELEMENT_MAX];
    while (!shoal_key_reader_done(&reader)) {
        size_t pos = reader.pos, got;
        uint64_t number;
        int rc;
        switch (data[pos]) {
            case SHOAL_KEY_TAG_U64:
                rc = shoal_key_read_u64(&reader, &number);
                break;
            case SHOAL_KEY_TAG_STRING:
                rc = shoal_key_read_str(&reader, (char *) out, sizeof out);
                break;
            default:
                rc = shoal_key_read_bytes(&reader, out, sizeof out, &got);
                break;
        }
        if (rc)
            break;
        SHOAL_FUZZ_ASSERT(reader.pos > pos && reader.pos <= size, "a read moved from %zu to %zu of %zu",
                          pos, reader.pos, size);
    }
    free(shoal_key_format(data, size));
}

//  Parses a script into ELEMENTS. Returns how many.
static size_t
s_script_parse(const uint8_t *data, size_t size, s_element_t *elements)
{
    size_t count = 0, at = 0;
    while (count < S_ELEMENTS_MAX && at + 2 <= size) {
        s_element_t *element = &elements[count];
        element->kind = (s_kind_t) (data[at] % 3);
        size_t length = data[at + 1];
        at += 2;
        if (length > size - at)
            length = size - at;
        element->data = data + at;
        element->size = length;
        at += length;
        if (element->kind == S_U64) {
            uint8_t be[S_U64_SIZE] = { 0 };
            memcpy(be + S_U64_SIZE - (length < S_U64_SIZE ? length : S_U64_SIZE), element->data,
                   length < S_U64_SIZE ? length : S_U64_SIZE);
            element->number = 0;
            for (size_t i = 0; i < S_U64_SIZE; i++)
                element->number = element->number << 8 | be[i];
        }
        else
        if (element->kind == S_STR && memchr(element->data, 0, length))
            //  A string holds no NUL: keep what comes before it.
            element->size = (const uint8_t *) memchr(element->data, 0, length) - element->data;
        count++;
    }
    return count;
}

static void
s_build(shoal_key_t *key, const s_element_t *elements, size_t count)
{
    shoal_key_init(key);
    for (size_t i = 0; i < count; i++) {
        const s_element_t *element = &elements[i];
        if (element->kind == S_U64)
            shoal_key_add_u64(key, element->number);
        else
        if (element->kind == S_STR) {
            char text[S_ELEMENT_MAX];
            memcpy(text, element->data, element->size);
            text[element->size] = 0;
            shoal_key_add_str(key, text);
        }
        else
            shoal_key_add_bytes(key, element->data, element->size);
    }
}

//  The order of two elements of one kind, as their tuples are ordered.
static int
s_element_compare(const s_element_t *a, const s_element_t *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == S_U64)
        return a->number < b->number ? -1 : a->number > b->number;
    size_t common = a->size < b->size ? a->size : b->size;
    int rc = memcmp(a->data, b->data, common);
    if (rc)
        return rc < 0 ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

static void
s_round_trip(const uint8_t *data, size_t size)
{
    s_element_t elements[S_ELEMENTS_MAX];
    size_t count = s_script_parse(data, size, elements);
    shoal_key_t key;
    s_build(&key, elements, count);
    if (key.overflow)
        return;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key.bytes, key.size);
    for (size_t i = 0; i < count; i++) {
        const s_element_t *element = &elements[i];
        uint8_t out[S_ELEMENT_MAX];
        size_t got = 0;
        uint64_t number = 0;
        if (element->kind == S_U64) {
            SHOAL_FUZZ_ASSERT(shoal_key_read_u64(&reader, &number) == 0, "element %zu: no u64", i);
            SHOAL_FUZZ_ASSERT(number == element->number, "element %zu: another u64", i);
        }
        else
        if (element->kind == S_STR) {
            SHOAL_FUZZ_ASSERT(shoal_key_read_str(&reader, (char *) out, sizeof out) == 0,
                              "element %zu: no string", i);
            SHOAL_FUZZ_ASSERT(strlen((char *) out) == element->size
                              && memcmp(out, element->data, element->size) == 0,
                              "element %zu: another string", i);
        }
        else {
            SHOAL_FUZZ_ASSERT(shoal_key_read_bytes(&reader, out, sizeof out, &got) == 0,
                              "element %zu: no bytes", i);
            SHOAL_FUZZ_ASSERT(got == element->size && memcmp(out, element->data, got) == 0,
                              "element %zu: other bytes", i);
        }
    }
    SHOAL_FUZZ_ASSERT(shoal_key_reader_done(&reader), "%zu bytes left after every element",
                      key.size - reader.pos);
    //  Order: two keys whose first elements differ, both of one kind,
    //  compare as those elements do.
    if (count >= 2 && elements[0].kind == elements[1].kind) {
        shoal_key_t first, second;
        s_build(&first, &elements[0], 1);
        s_build(&second, &elements[1], 1);
        int expected = s_element_compare(&elements[0], &elements[1]);
        size_t common = first.size < second.size ? first.size : second.size;
        int got = memcmp(first.bytes, second.bytes, common);
        if (got == 0)
            got = first.size < second.size ? -1 : first.size > second.size;
        got = got < 0 ? -1 : got > 0;
        SHOAL_FUZZ_ASSERT(got == expected, "keys order %d, their elements %d", got, expected);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        s_round_trip(data + 1, size - 1);
    else
        s_read_any(data + 1, size - 1);
    return 0;
}
