/*  shoal_round_trip: an envelope through the wire and back, for the
    protocol tests. */
#ifndef SHOAL_ROUND_TRIP_H_INCLUDED
#define SHOAL_ROUND_TRIP_H_INCLUDED

#include "shoal_proto.h"

#include <czmq.h>

//  Encodes ENVELOPE and decodes the bytes, checking on the way that what
//  decoded encodes to the same bytes: what decode accepts is always fit to
//  send. Returns the decoded envelope, or NULL with ERROR.
static inline shoal_envelope_t *
shoal_round_trip(const shoal_envelope_t *envelope, char *error, size_t error_size)
{
    zmsg_t *first = shoal_envelope_encode(envelope, error, error_size);
    if (!first)
        return NULL;
    shoal_envelope_t *decoded = shoal_envelope_decode(first, error, error_size);
    zmsg_t *second = decoded ? shoal_envelope_encode(decoded, error, error_size) : NULL;
    if (decoded && !(second && zframe_eq(zmsg_first(first), zmsg_first(second)))) {
        if (second)
            snprintf(error, error_size, "the second encoding differs from the first");
        shoal_envelope_destroy(&decoded);
    }
    zmsg_destroy(&first);
    zmsg_destroy(&second);
    return decoded;
}

#endif
