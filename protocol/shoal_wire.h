/*  shoal_wire: a walk over protobuf wire bytes, before protobuf-c sees them.

    protobuf-c copies a string field up to its length and terminates it, so a
    NUL inside the string silently cuts it ("nulds\0evil" reads as "nulds"),
    and it never checks UTF-8. This walk reads the tags and lengths of a
    message and of every message nested in it, with the protobuf-c
    descriptor telling which fields are strings, and refuses a string that
    holds a NUL or is not valid UTF-8, naming the field. Every decoder of
    protocol/ runs it before it unpacks, so nothing past it meets such a
    string.
*/
#ifndef SHOAL_WIRE_H_INCLUDED
#define SHOAL_WIRE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

struct ProtobufCMessageDescriptor;

//  Checks the encoded message BYTES (SIZE bytes; BYTES may be NULL when SIZE
//  is 0) of DESCRIPTOR's type. Returns 0, or -1 with ERROR naming the field
//  and the rule it breaks. Bytes that are no protobuf at all are left to the
//  unpack that follows (it names them as such): only a broken length stops
//  the walk.
int shoal_wire_check(const struct ProtobufCMessageDescriptor *descriptor, const uint8_t *bytes,
                     size_t size, char *error, size_t error_size);

#endif
