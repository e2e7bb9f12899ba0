/*  shoal_record: claim state names and the ClaimRecord and CounterRecord codecs.

    The C record and the protobuf message are kept apart so that only protocol/
    sees protobuf-c. One check, s_claim_check, runs on encode and on decode, so
    what is refused on write is exactly what is refused on read. protobuf-c
    keeps an enum number it does not know in the field (proto3 enums are open),
    so the state is checked against the enumeration here, never trusted.
*/
#include "shoal_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.pb-c.h"
#include "shoal_wire.h"

//  The record's states are the message's numbers: encode and decode copy them
//  across unchanged.
_Static_assert((int) SHOAL_CLAIM_CREATING == (int) SHOAL__CLAIM_STATE__CLAIM_CREATING
            && (int) SHOAL_CLAIM_RUNNING == (int) SHOAL__CLAIM_STATE__CLAIM_RUNNING
            && (int) SHOAL_CLAIM_PAUSED == (int) SHOAL__CLAIM_STATE__CLAIM_PAUSED
            && (int) SHOAL_CLAIM_MOVING == (int) SHOAL__CLAIM_STATE__CLAIM_MOVING
            && (int) SHOAL_CLAIM_STOPPED == (int) SHOAL__CLAIM_STATE__CLAIM_STOPPED
            && (int) SHOAL_CLAIM_ERROR == (int) SHOAL__CLAIM_STATE__CLAIM_ERROR
            && (int) SHOAL_CLAIM_RELEASED == (int) SHOAL__CLAIM_STATE__CLAIM_RELEASED,
               "shoal_claim_state_t must match ClaimState in shoal.proto");

//  Indexed by shoal_claim_state_t; the unused slot 0 is the protobuf default.
static const char *s_claim_state_names[] = {
    [SHOAL_CLAIM_CREATING] = "creating",
    [SHOAL_CLAIM_RUNNING] = "running",
    [SHOAL_CLAIM_PAUSED] = "paused",
    [SHOAL_CLAIM_MOVING] = "moving",
    [SHOAL_CLAIM_STOPPED] = "stopped",
    [SHOAL_CLAIM_ERROR] = "error",
    [SHOAL_CLAIM_RELEASED] = "released",
};

//  The guest drivers a claim may name (see design.md, Guests).
static const char *s_claim_drivers[] = { "proc", "exec" };

#define CLAIM_DRIVER_COUNT (sizeof s_claim_drivers / sizeof s_claim_drivers[0])

const char *
shoal_claim_state_name(shoal_claim_state_t state)
{
    //  Compared as int: a value read from outside may be any number, and the
    //  enum's own type may be unsigned.
    int value = (int) state;
    if (value < SHOAL_CLAIM_CREATING || value > SHOAL_CLAIM_RELEASED)
        return NULL;
    return s_claim_state_names[value];
}

int
shoal_claim_state_parse(const char *name, shoal_claim_state_t *state)
{
    for (int value = SHOAL_CLAIM_CREATING; value <= SHOAL_CLAIM_RELEASED; value++)
        if (name && strcmp(name, s_claim_state_names[value]) == 0) {
            *state = (shoal_claim_state_t) value;
            return 0;
        }
    return -1;
}

//  True when TENANT reads "org/project": one slash, text on both sides.
static bool
s_tenant_is_valid(const char *tenant)
{
    const char *slash = strchr(tenant, '/');
    return slash && slash != tenant && slash[1] != '\0' && strchr(slash + 1, '/') == NULL;
}

static bool
s_driver_is_valid(const char *driver)
{
    for (size_t i = 0; i < CLAIM_DRIVER_COUNT; i++)
        if (strcmp(driver, s_claim_drivers[i]) == 0)
            return true;
    return false;
}

//  Checks the fields a claim must have. Strings may be NULL (an unset record
//  field), which counts as empty. Returns 0, or -1 with ERROR naming the field
//  and its value.
static int
s_claim_check(const char *id, const char *tenant, int state, const char *driver,
              char *error, size_t error_size)
{
    if (!id || !*id)
        snprintf(error, error_size, "id is empty");
    else
    if (!tenant || !*tenant)
        snprintf(error, error_size, "tenant is empty");
    else
    if (!s_tenant_is_valid(tenant))
        snprintf(error, error_size, "tenant \"%s\" is not org/project", tenant);
    else
    if (!shoal_claim_state_name((shoal_claim_state_t) state))
        snprintf(error, error_size, "state %d is not a claim state", state);
    else
    if (!driver || !s_driver_is_valid(driver))
        snprintf(error, error_size, "driver \"%s\" is not proc or exec", driver ? driver : "");
    else
        return 0;
    return -1;
}

static int
s_claim_encode(const void *record_in, uint8_t **bytes_p, size_t *size_p,
               char *error, size_t error_size)
{
    const shoal_claim_record_t *record = record_in;
    *bytes_p = NULL;
    *size_p = 0;
    if (s_claim_check(record->id, record->tenant, (int) record->state, record->driver,
                      error, error_size))
        return -1;

    Shoal__ClaimRecord message = SHOAL__CLAIM_RECORD__INIT;
    message.id = record->id;
    message.tenant = record->tenant;
    message.state = (Shoal__ClaimState) record->state;
    message.memory_bytes = record->memory_bytes;
    message.driver = record->driver;
    message.epoch = record->epoch;
    message.created_ms = record->created_ms;
    if (record->error)
        message.error = record->error;

    size_t size = shoal__claim_record__get_packed_size(&message);
    //  One byte at least, so that an empty encoding is still a buffer.
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) {
        snprintf(error, error_size, "out of memory for %zu bytes", size);
        return -1;
    }
    shoal__claim_record__pack(&message, bytes);
    *bytes_p = bytes;
    *size_p = size;
    return 0;
}

static void
s_claim_clear(void *record_in)
{
    shoal_claim_record_t *record = record_in;
    free(record->id);
    free(record->tenant);
    free(record->driver);
    free(record->error);
    memset(record, 0, sizeof *record);
}

static int
s_claim_decode(const uint8_t *bytes, size_t size, void *record_out,
               char *error, size_t error_size)
{
    shoal_claim_record_t *record = record_out;
    memset(record, 0, sizeof *record);
    if (shoal_wire_check(&shoal__claim_record__descriptor, bytes, size, error, error_size))
        return -1;
    Shoal__ClaimRecord *message = shoal__claim_record__unpack(NULL, size, bytes);
    if (!message) {
        snprintf(error, error_size, "%zu bytes are not a protobuf ClaimRecord", size);
        return -1;
    }
    int rc = s_claim_check(message->id, message->tenant, (int) message->state,
                           message->driver, error, error_size);
    if (rc == 0) {
        record->id = strdup(message->id);
        record->tenant = strdup(message->tenant);
        record->state = (shoal_claim_state_t) message->state;
        record->memory_bytes = message->memory_bytes;
        record->driver = strdup(message->driver);
        record->epoch = message->epoch;
        record->created_ms = message->created_ms;
        //  An unset error field is an empty string on the wire: the record
        //  says "no error" with NULL.
        bool has_error = message->error && *message->error;
        if (has_error)
            record->error = strdup(message->error);
        if (!record->id || !record->tenant || !record->driver || (has_error && !record->error)) {
            s_claim_clear(record);
            snprintf(error, error_size, "out of memory");
            rc = -1;
        }
    }
    shoal__claim_record__free_unpacked(message, NULL);
    return rc;
}

const shoal_codec_t shoal_claim_codec = {
    .name = "ClaimRecord",
    .record_size = sizeof(shoal_claim_record_t),
    .encode = s_claim_encode,
    .decode = s_claim_decode,
    .clear = s_claim_clear,
};

//  CounterRecord. One check, as for claims, on encode and on decode.

//  A scope cannot run more claims than it has.
static int
s_counter_check(const shoal_counter_record_t *record, char *error, size_t error_size)
{
    if (record->running > record->claims) {
        snprintf(error, error_size, "%" PRIu64 " running claims exceed %" PRIu64 " claims",
                 record->running, record->claims);
        return -1;
    }
    return 0;
}

static int
s_counter_encode(const void *record_in, uint8_t **bytes_p, size_t *size_p,
                 char *error, size_t error_size)
{
    const shoal_counter_record_t *record = record_in;
    *bytes_p = NULL;
    *size_p = 0;
    if (s_counter_check(record, error, error_size))
        return -1;
    Shoal__CounterRecord message = SHOAL__COUNTER_RECORD__INIT;
    message.claims = record->claims;
    message.running = record->running;
    message.memory_bytes = record->memory_bytes;
    size_t size = shoal__counter_record__get_packed_size(&message);
    //  One byte at least: an all-zero record packs to nothing.
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) {
        snprintf(error, error_size, "out of memory for %zu bytes", size);
        return -1;
    }
    shoal__counter_record__pack(&message, bytes);
    *bytes_p = bytes;
    *size_p = size;
    return 0;
}

static void
s_counter_clear(void *record_in)
{
    memset(record_in, 0, sizeof(shoal_counter_record_t));
}

static int
s_counter_decode(const uint8_t *bytes, size_t size, void *record_out,
                 char *error, size_t error_size)
{
    shoal_counter_record_t *record = record_out;
    memset(record, 0, sizeof *record);
    if (shoal_wire_check(&shoal__counter_record__descriptor, bytes, size, error, error_size))
        return -1;
    Shoal__CounterRecord *message = shoal__counter_record__unpack(NULL, size, bytes);
    if (!message) {
        snprintf(error, error_size, "%zu bytes are not a protobuf CounterRecord", size);
        return -1;
    }
    record->claims = message->claims;
    record->running = message->running;
    record->memory_bytes = message->memory_bytes;
    shoal__counter_record__free_unpacked(message, NULL);
    if (s_counter_check(record, error, error_size)) {
        memset(record, 0, sizeof *record);
        return -1;
    }
    return 0;
}

const shoal_codec_t shoal_counter_codec = {
    .name = "CounterRecord",
    .record_size = sizeof(shoal_counter_record_t),
    .encode = s_counter_encode,
    .decode = s_counter_decode,
    .clear = s_counter_clear,
};
