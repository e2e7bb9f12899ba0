/*  shoal_record: the typed values shoal keeps in RocksDB, and their codecs.

    A record is a plain C struct; a codec turns it into protobuf bytes and back.
    Both directions validate: a state outside its enumeration, a missing id, a
    value that is not protobuf at all are errors with a message, never a
    default. The store calls codecs through shoal_codec_t, so it needs to know
    nothing about any one record type.
*/
#ifndef SHOAL_RECORD_H_INCLUDED
#define SHOAL_RECORD_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  A record codec. RECORD points at the record type the codec is for.
typedef struct {
    const char *name;           //  record type, as error messages name it
    size_t record_size;         //  sizeof the C struct
    //  Encodes RECORD into a new buffer (*bytes_p, the caller frees it).
    //  Returns 0, or -1 with ERROR filled when the record is not valid.
    int (*encode) (const void *record, uint8_t **bytes_p, size_t *size_p,
                   char *error, size_t error_size);
    //  Decodes BYTES into RECORD (which it first zeroes). Returns 0, or -1 with
    //  ERROR filled and RECORD left empty.
    int (*decode) (const uint8_t *bytes, size_t size, void *record,
                   char *error, size_t error_size);
    //  Frees what RECORD owns and zeroes it; safe on a zeroed record.
    void (*clear) (void *record);
} shoal_codec_t;

typedef enum {
    SHOAL_CLAIM_CREATING = 1,
    SHOAL_CLAIM_RUNNING = 2,
    SHOAL_CLAIM_PAUSED = 3,
    SHOAL_CLAIM_MOVING = 4,
    SHOAL_CLAIM_STOPPED = 5,
    SHOAL_CLAIM_ERROR = 6,
    SHOAL_CLAIM_RELEASED = 7,
} shoal_claim_state_t;

//  "creating", "running", ...; NULL for a value outside the enumeration.
const char *shoal_claim_state_name(shoal_claim_state_t state);
//  Parses a state name. Returns 0, or -1 when NAME is not a claim state.
int shoal_claim_state_parse(const char *name, shoal_claim_state_t *state);

//  A claim as its owner keeps it. Strings are owned by the record.
typedef struct {
    char *id;                   //  claim id, never empty
    char *tenant;               //  "org/project", never empty
    shoal_claim_state_t state;  //  one of shoal_claim_state_t
    uint64_t memory_bytes;      //  guest memory size
    char *driver;               //  "proc" or "exec"
    uint64_t epoch;             //  ownership epoch
    uint64_t created_ms;        //  wall clock at create
    char *error;                //  why, when state is SHOAL_CLAIM_ERROR; may be NULL
} shoal_claim_record_t;

extern const shoal_codec_t shoal_claim_codec;

//  Admission counters of one scope (the node, or one tenant), as the owner
//  keeps them beside its claims.
typedef struct {
    uint64_t claims;            //  claims not released
    uint64_t running;           //  claims holding a guest (creating, running, paused, moving)
    uint64_t memory_bytes;      //  memory of the claims holding a guest
} shoal_counter_record_t;

extern const shoal_codec_t shoal_counter_codec;

#endif
