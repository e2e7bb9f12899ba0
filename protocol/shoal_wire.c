/*  shoal_wire: the string check that runs on wire bytes before an unpack.

    The walk is protobuf's wire format and nothing more: a varint tag (field
    number and wire type), then a varint, 8 bytes, 4 bytes or a varint
    length and that many bytes. Only length-delimited fields matter here:
    a string field is checked, a message field is walked in turn (to a
    bounded depth, since shoal's messages nest only a few levels), bytes
    and unknown fields are stepped over. Whatever else is wrong with the
    bytes is the unpack's to refuse, so the walk stops quietly there.

    Offsets are counted from the start and the buffer is indexed, never a
    pointer moved past it: an empty message may arrive as a NULL buffer.
*/
#include "shoal_wire.h"
#include "shoal_names.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

//  Deepest nesting walked; deeper messages are not shoal's.
#define WIRE_DEPTH_MAX 16
//  Bits of a tag that hold the wire type, and bits of a varint byte that
//  hold the value.
#define WIRE_TYPE_BITS 3
#define WIRE_TYPE_MASK 0x7
#define VARINT_MORE 0x80
#define VARINT_VALUE 0x7F
#define VARINT_BITS 7
#define VARINT_SHIFT_MAX 63

//  protobuf's wire types.
#define WIRE_VARINT 0
#define WIRE_FIXED64 1
#define WIRE_LENGTH 2
#define WIRE_FIXED32 5
#define WIRE_FIXED64_SIZE 8
#define WIRE_FIXED32_SIZE 4
//  Room for a nested field's error before the outer field's name goes in
//  front of it.
#define WIRE_ERROR_MAX 256

//  Reads a varint at *AT of BYTES (SIZE bytes) into *VALUE. Returns false
//  when it runs past the end or past 64 bits.
static bool
s_varint(const uint8_t *bytes, size_t size, size_t *at, uint64_t *value)
{
    *value = 0;
    for (unsigned shift = 0; shift <= VARINT_SHIFT_MAX; shift += VARINT_BITS) {
        if (*at >= size)
            return false;
        uint8_t byte = bytes[(*at)++];
        *value |= (uint64_t) (byte & VARINT_VALUE) << shift;
        if (!(byte & VARINT_MORE))
            return true;
    }
    return false;
}

//  Checks a string field's LENGTH bytes at OFFSET of BYTES.
static int
s_text_check(const ProtobufCFieldDescriptor *field, const uint8_t *bytes, size_t offset,
             size_t length, char *error, size_t error_size)
{
    if (length == 0)
        return 0;
    const char *text = (const char *) bytes + offset;
    if (memchr(text, 0, length)) {
        snprintf(error, error_size, "%s holds a NUL byte (text fields may not)", field->name);
        return -1;
    }
    if (!shoal_utf8_valid(text, length)) {
        snprintf(error, error_size, "%s is not valid UTF-8 (text fields must be)", field->name);
        return -1;
    }
    return 0;
}

static int
s_walk(const ProtobufCMessageDescriptor *descriptor, const uint8_t *bytes, size_t size,
       int depth, char *error, size_t error_size)
{
    size_t at = 0;
    while (at < size) {
        uint64_t tag, length;
        if (!s_varint(bytes, size, &at, &tag))
            return 0;
        switch (tag & WIRE_TYPE_MASK) {
            case WIRE_VARINT:
                if (!s_varint(bytes, size, &at, &length))
                    return 0;
                continue;
            case WIRE_FIXED64:
                if (size - at < WIRE_FIXED64_SIZE)
                    return 0;
                at += WIRE_FIXED64_SIZE;
                continue;
            case WIRE_FIXED32:
                if (size - at < WIRE_FIXED32_SIZE)
                    return 0;
                at += WIRE_FIXED32_SIZE;
                continue;
            case WIRE_LENGTH:
                break;
            default:
                return 0;
        }
        if (!s_varint(bytes, size, &at, &length) || length > size - at)
            return 0;
        uint64_t number = tag >> WIRE_TYPE_BITS;
        const ProtobufCFieldDescriptor *field = number <= UINT32_MAX
            ? protobuf_c_message_descriptor_get_field(descriptor, (unsigned) number) : NULL;
        if (field && field->type == PROTOBUF_C_TYPE_STRING
        &&  s_text_check(field, bytes, at, (size_t) length, error, error_size))
            return -1;
        if (field && field->type == PROTOBUF_C_TYPE_MESSAGE && depth < WIRE_DEPTH_MAX && length
        &&  s_walk((const ProtobufCMessageDescriptor *) field->descriptor, bytes + at, (size_t) length,
                   depth + 1, error, error_size)) {
            //  Puts the outer field's name in front: "entries.key holds ...".
            char inner[WIRE_ERROR_MAX];
            snprintf(inner, sizeof inner, "%s", error);
            snprintf(error, error_size, "%s.%s", field->name, inner);
            return -1;
        }
        at += (size_t) length;
    }
    return 0;
}

int
shoal_wire_check(const ProtobufCMessageDescriptor *descriptor, const uint8_t *bytes, size_t size,
                 char *error, size_t error_size)
{
    if (size == 0 || !bytes)
        return 0;
    return s_walk(descriptor, bytes, size, 0, error, error_size);
}
