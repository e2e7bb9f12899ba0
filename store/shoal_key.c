/*  shoal_key: the order-preserving tuple codec that shoal_key.h describes.

    Why the escaping keeps order: inside a string or byte string a 0x00 byte
    is written 0x00 0xFF and the element ends with a lone 0x00. No tag is 0xFF,
    so a 0x00 followed by 0xFF is always an escaped zero and any other 0x00 ends
    the element. The terminator is smaller than every byte an element can hold
    at that position (an escaped zero continues with 0xFF), so a string sorts
    before every longer string it is a prefix of, whatever follows it in the
    tuple. Integers are fixed width and big-endian, so memcmp compares them as
    numbers, and the tags order the types: bytes < string < u64.
*/
#include "shoal_key.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Width of an encoded u64 after its tag.
#define KEY_U64_SIZE 8
//  Bits in a byte, for shifting integers in and out of big-endian order.
#define KEY_BYTE_BITS 8
//  The byte that ends a string or byte string element.
#define KEY_TERMINATOR 0x00
//  The byte that follows 0x00 when the zero is data, not the terminator.
#define KEY_ESCAPE 0xFF
//  The largest byte value: a prefix made only of these has no upper bound.
#define KEY_BYTE_MAX 0xFF
//  Printable ASCII, shown as itself inside a quoted string.
#define KEY_PRINTABLE_FIRST 0x20
#define KEY_PRINTABLE_LAST 0x7E

void
shoal_key_init(shoal_key_t *key)
{
    key->size = 0;
    key->overflow = false;
}

//  Makes room for NEEDED more bytes. An element that does not fit marks the
//  key overflowed rather than being cut, since a cut key would address some
//  other record; every later element is then dropped too.
static bool
s_key_reserve(shoal_key_t *key, size_t needed)
{
    if (key->overflow)
        return false;
    if (needed > SHOAL_KEY_MAX - key->size) {
        key->overflow = true;
        return false;
    }
    return true;
}

//  Appends TAG and DATA with every zero escaped, then the terminator when
//  TERMINATE is set (a string prefix leaves it off).
static void
s_key_add_escaped(shoal_key_t *key, uint8_t tag, const uint8_t *data, size_t size,
                  bool terminate)
{
    //  Guards the size arithmetic below against absurd sizes.
    if (size > SHOAL_KEY_MAX) {
        key->overflow = true;
        return;
    }
    //  Most elements hold no zero (names, and seven hashes in eight): one
    //  search and one copy then. Keys are built at a high rate.
    const uint8_t *zero = size ? memchr(data, 0, size) : NULL;
    size_t zeros = 0;
    for (size_t i = zero ? (size_t) (zero - data) : size; i < size; i++)
        zeros += data[i] == 0;
    if (!s_key_reserve(key, 1 + size + zeros + (terminate ? 1 : 0)))
        return;

    uint8_t *out = key->bytes + key->size;
    *out++ = tag;
    if (zeros == 0) {
        if (size)
            memcpy(out, data, size);
        out += size;
    }
    else
        for (size_t i = 0; i < size; i++) {
            *out++ = data[i];
            if (data[i] == 0)
                *out++ = KEY_ESCAPE;
        }
    if (terminate)
        *out++ = KEY_TERMINATOR;
    key->size = (size_t) (out - key->bytes);
}

void
shoal_key_add_u64(shoal_key_t *key, uint64_t value)
{
    if (!s_key_reserve(key, 1 + KEY_U64_SIZE))
        return;
    uint8_t *out = key->bytes + key->size;
    *out++ = SHOAL_KEY_TAG_U64;
    for (int i = KEY_U64_SIZE - 1; i >= 0; i--)
        *out++ = (uint8_t) (value >> (i * KEY_BYTE_BITS));
    key->size = (size_t) (out - key->bytes);
}

void
shoal_key_add_str(shoal_key_t *key, const char *value)
{
    s_key_add_escaped(key, SHOAL_KEY_TAG_STRING, (const uint8_t *) value, strlen(value), true);
}

void
shoal_key_add_bytes(shoal_key_t *key, const void *data, size_t size)
{
    s_key_add_escaped(key, SHOAL_KEY_TAG_BYTES, data, size, true);
}

void
shoal_key_add_key(shoal_key_t *key, const shoal_key_t *elements)
{
    if (elements->overflow) {
        key->overflow = true;
        return;
    }
    if (!s_key_reserve(key, elements->size))
        return;
    memcpy(key->bytes + key->size, elements->bytes, elements->size);
    key->size += elements->size;
}

void
shoal_key_add_str_prefix(shoal_key_t *key, const char *value)
{
    s_key_add_escaped(key, SHOAL_KEY_TAG_STRING, (const uint8_t *) value, strlen(value), false);
}

void
shoal_key_reader_init(shoal_key_reader_t *reader, const void *bytes, size_t size)
{
    reader->bytes = bytes;
    reader->size = size;
    reader->pos = 0;
}

bool
shoal_key_reader_done(const shoal_key_reader_t *reader)
{
    return reader->pos >= reader->size;
}

//  Finds the end of the escaped element whose content starts at START. Sets
//  *END past its terminator, *LENGTH to its unescaped length and *HAS_ZERO when
//  it holds an escaped zero. Returns -1 when the terminator is missing.
static int
s_escaped_scan(const uint8_t *bytes, size_t size, size_t start,
               size_t *end, size_t *length, bool *has_zero)
{
    *length = 0;
    *has_zero = false;
    size_t pos = start;
    while (pos < size) {
        if (bytes[pos] != KEY_TERMINATOR) {
            pos++;
            (*length)++;
        }
        else
        if (pos + 1 < size && bytes[pos + 1] == KEY_ESCAPE) {
            pos += 2;
            (*length)++;
            *has_zero = true;
        }
        else {
            *end = pos + 1;
            return 0;
        }
    }
    return -1;
}

//  Copies the unescaped content of the element at [START, END) into OUT,
//  which has room for it. Returns the number of bytes copied.
static size_t
s_escaped_copy(const uint8_t *bytes, size_t start, size_t end, uint8_t *out)
{
    //  END is past the terminator, which is not content.
    size_t copied = 0;
    size_t pos = start;
    while (pos < end - 1) {
        out[copied++] = bytes[pos];
        pos += bytes[pos] == KEY_TERMINATOR ? 2 : 1;
    }
    return copied;
}

//  Checks that the next element has TAG and is complete: sets its content's
//  START and END (past the terminator). The reader does not move.
static int
s_reader_escaped(const shoal_key_reader_t *reader, uint8_t tag, size_t *start,
                 size_t *end, size_t *length, bool *has_zero)
{
    if (reader->pos >= reader->size || reader->bytes[reader->pos] != tag)
        return -1;
    *start = reader->pos + 1;
    return s_escaped_scan(reader->bytes, reader->size, *start, end, length, has_zero);
}

int
shoal_key_read_u64(shoal_key_reader_t *reader, uint64_t *value)
{
    if (reader->pos >= reader->size
    ||  reader->bytes[reader->pos] != SHOAL_KEY_TAG_U64
    ||  reader->size - reader->pos < 1 + KEY_U64_SIZE)
        return -1;
    const uint8_t *in = reader->bytes + reader->pos + 1;
    uint64_t result = 0;
    for (int i = 0; i < KEY_U64_SIZE; i++)
        result = (result << KEY_BYTE_BITS) | in[i];
    *value = result;
    reader->pos += 1 + KEY_U64_SIZE;
    return 0;
}

int
shoal_key_read_str(shoal_key_reader_t *reader, char *out, size_t out_size)
{
    size_t start, end, length;
    bool has_zero;
    if (s_reader_escaped(reader, SHOAL_KEY_TAG_STRING, &start, &end, &length, &has_zero)
    ||  has_zero
    ||  length >= out_size)
        return -1;
    memcpy(out, reader->bytes + start, length);
    out[length] = 0;
    reader->pos = end;
    return 0;
}

//  When the element is well formed but longer than OUT_SIZE, *SIZE still
//  receives its length, so that the caller can make room and read again.
int
shoal_key_read_bytes(shoal_key_reader_t *reader, uint8_t *out, size_t out_size, size_t *size)
{
    size_t start, end, length;
    bool has_zero;
    if (s_reader_escaped(reader, SHOAL_KEY_TAG_BYTES, &start, &end, &length, &has_zero))
        return -1;
    *size = length;
    if (length > out_size)
        return -1;
    s_escaped_copy(reader->bytes, start, end, out);
    reader->pos = end;
    return 0;
}

//  The offset just past the element that starts at POS, or 0 when no whole
//  element starts there.
static size_t
s_element_end(const uint8_t *bytes, size_t size, size_t pos)
{
    size_t end, length;
    bool has_zero;
    switch (bytes[pos]) {
        case SHOAL_KEY_TAG_U64:
            return size - pos >= 1 + KEY_U64_SIZE ? pos + 1 + KEY_U64_SIZE : 0;
        case SHOAL_KEY_TAG_STRING:
        case SHOAL_KEY_TAG_BYTES:
            return s_escaped_scan(bytes, size, pos + 1, &end, &length, &has_zero) == 0 ? end : 0;
        default:
            return 0;
    }
}

//  True when BYTES is a sequence of whole elements, as a key built with the
//  add calls is, and not one that ends inside an element (a string prefix).
static bool
s_elements_are_whole(const uint8_t *bytes, size_t size)
{
    size_t pos = 0;
    while (pos < size) {
        size_t end = s_element_end(bytes, size, pos);
        if (end == 0)
            return false;
        pos = end;
    }
    return true;
}

//  A prefix of whole elements ends just below PREFIX + 0xFF. Incrementing its
//  last byte would be wrong: (x'00') is 01 00 FF 00, a byte prefix of
//  (x'0000'), 01 00 FF 00 FF 00, which is not under it. After whole elements
//  a key under the prefix continues with a tag, always below 0xFF, while an
//  element that only looks prefixed continues with the 0xFF of an escaped
//  zero. A prefix that ends inside an element (shoal_key_add_str_prefix)
//  matches by bytes, so its end is the usual one: the last byte that can be
//  raised, raised. An overflowed PREFIX has no end: UPPER is then marked
//  overflowed too, so that a caller who ignores the -1 still cannot use it.
int
shoal_key_prefix_end(const shoal_key_t *prefix, shoal_key_t *upper)
{
    bool overflow = prefix->overflow;
    size_t size = prefix->size;
    if (upper != prefix)
        memcpy(upper->bytes, prefix->bytes, size);
    upper->size = size;
    upper->overflow = overflow;
    if (overflow || size == 0) {
        upper->size = 0;
        return -1;
    }
    //  A full-size prefix has nothing under it but itself, so the byte rule
    //  below gives the same range when there is no room for the 0xFF.
    if (size < SHOAL_KEY_MAX && s_elements_are_whole(upper->bytes, size)) {
        upper->bytes[upper->size++] = KEY_BYTE_MAX;
        return 0;
    }
    while (size > 0 && upper->bytes[size - 1] == KEY_BYTE_MAX)
        size--;
    upper->size = size;
    if (size == 0)
        return -1;
    upper->bytes[size - 1]++;
    return 0;
}

static void
s_format_hex(FILE *out, const uint8_t *bytes, size_t size)
{
    fputs("x'", out);
    for (size_t i = 0; i < size; i++)
        fprintf(out, "%02x", bytes[i]);
    fputc('\'', out);
}

//  Renders the whole element at [START, END) of BYTES.
static void
s_format_element(FILE *out, const uint8_t *bytes, size_t start, size_t end)
{
    uint8_t tag = bytes[start];
    if (tag == SHOAL_KEY_TAG_U64) {
        shoal_key_reader_t reader;
        shoal_key_reader_init(&reader, bytes + start, end - start);
        uint64_t value = 0;
        shoal_key_read_u64(&reader, &value);
        fprintf(out, "%" PRIu64, value);
        return;
    }
    //  Strings and byte strings are unescaped first; a string is quoted with
    //  anything that is not printable ASCII shown as \xNN, so that a message
    //  holding a key stays one readable line.
    size_t length = end - start - 1;
    uint8_t *content = malloc(length ? length : 1);
    if (!content)
        return;
    size_t content_size = s_escaped_copy(bytes, start + 1, end, content);
    if (tag == SHOAL_KEY_TAG_BYTES)
        s_format_hex(out, content, content_size);
    else {
        fputc('"', out);
        for (size_t i = 0; i < content_size; i++) {
            uint8_t c = content[i];
            if (c == '"' || c == '\\')
                fprintf(out, "\\%c", c);
            else
            if (c >= KEY_PRINTABLE_FIRST && c <= KEY_PRINTABLE_LAST)
                fputc(c, out);
            else
                fprintf(out, "\\x%02x", c);
        }
        fputc('"', out);
    }
    free(content);
}

char *
shoal_key_format(const void *bytes, size_t size)
{
    char *text = NULL;
    size_t text_size = 0;
    FILE *out = open_memstream(&text, &text_size);
    if (!out)
        return NULL;

    const uint8_t *data = bytes;
    size_t pos = 0;
    fputc('(', out);
    while (pos < size) {
        size_t end = s_element_end(data, size, pos);
        if (end == 0)
            break;
        if (pos > 0)
            fputs(", ", out);
        s_format_element(out, data, pos, end);
        pos = end;
    }
    fputc(')', out);
    if (pos < size) {
        fputs(" + ", out);
        s_format_hex(out, data + pos, size - pos);
    }
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
