/*  test_protocol_keys: the bodies of claim keys, leases and locks go
    through the envelope and back unchanged, and what breaks their rules is
    refused in both directions, naming what was wrong. */
#include "shoal_test.h"
#include "shoal_proto.h"
#include "shoal_round_trip.h"
#include "shoal_alloc.h"

#include <czmq.h>

#define ERROR_MAX 512


static void
test_txn_round_trip(void)
{
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_CLAIM_TXN, 7);
    shoal_msg_claim_txn_t *body = (shoal_msg_claim_txn_t *) shoal_envelope_new_body(request);
    body->claim_id = shoal_strdup("acme/web/vm1");
    body->compares = (shoal_msg_key_compare_t *) zmalloc(2 * sizeof *body->compares);
    body->compare_count = 2;
    body->compares[0] = (shoal_msg_key_compare_t) { .key = shoal_strdup("lock"), .target = SHOAL_KEY_TARGET_VERSION,
                                                    .result = SHOAL_KEY_EQUAL, .number = 0 };
    body->compares[1] = (shoal_msg_key_compare_t) { .key = shoal_strdup("vm"), .target = SHOAL_KEY_TARGET_VALUE,
                                                    .result = SHOAL_KEY_NOT_EQUAL, .value = (uint8_t *) shoal_strdup("x"),
                                                    .value_size = 1 };
    body->success = (shoal_msg_key_op_t *) zmalloc(2 * sizeof *body->success);
    body->success_count = 2;
    body->success[0] = (shoal_msg_key_op_t) { .type = SHOAL_KEY_PUT, .key = shoal_strdup("lock"),
                                              .value = (uint8_t *) shoal_strdup("n1"), .value_size = 2, .lease = 9 };
    body->success[1] = (shoal_msg_key_op_t) { .type = SHOAL_KEY_GET, .key = shoal_strdup(""), .prefix = true };
    char error[ERROR_MAX] = "";
    shoal_envelope_t *decoded = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    if (decoded) {
        const shoal_msg_claim_txn_t *got = (const shoal_msg_claim_txn_t *) decoded->body;
        CHECK_STR(got->claim_id, "acme/web/vm1");
        CHECK(got->compare_count == 2 && got->compares[1].target == SHOAL_KEY_TARGET_VALUE
              && got->compares[1].value_size == 1 && got->compares[1].value[0] == 'x');
        CHECK(got->success_count == 2 && got->success[0].lease == 9 && got->success[1].prefix
              && got->failure_count == 0);
    }
    shoal_envelope_destroy(&decoded);

    //  Refused: an unknown op, a put with a prefix, a get with a value, an
    //  empty key without prefix, a compare target out of its enumeration.
    body->success[1].type = 9;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "success[1]: op 9"));
    body->success[1].type = SHOAL_KEY_PUT;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "asks for a prefix"));
    body->success[1].type = SHOAL_KEY_GET;
    body->success[1].prefix = false;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "key is empty"));
    body->success[1].prefix = true;
    body->compares[0].target = 6;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "compares[0]: target 6"));
    shoal_envelope_destroy(&request);

    //  The reply, with a key and its bookkeeping.
    shoal_envelope_t *ask = shoal_envelope_new(SHOAL_MSG_CLAIM_TXN, 8);
    shoal_envelope_t *reply = shoal_envelope_reply(ask, SHOAL_STATUS_OK, "OK");
    shoal_msg_claim_txn_reply_t *answer = (shoal_msg_claim_txn_reply_t *) shoal_envelope_new_body(reply);
    answer->succeeded = true;
    answer->revision = 12;
    answer->owner = shoal_strdup("n1");
    answer->results = (shoal_msg_key_result_t *) zmalloc(sizeof *answer->results);
    answer->count = 1;
    answer->results[0].type = SHOAL_KEY_GET;
    answer->results[0].kvs = (shoal_msg_key_value_t *) zmalloc(sizeof *answer->results[0].kvs);
    answer->results[0].count = 1;
    answer->results[0].kvs[0] = (shoal_msg_key_value_t) { .key = shoal_strdup("lock"), .version = 2,
                                                          .create_revision = 3, .mod_revision = 12 };
    decoded = shoal_round_trip(reply, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    if (decoded) {
        const shoal_msg_claim_txn_reply_t *got = (const shoal_msg_claim_txn_reply_t *) decoded->body;
        CHECK(got->succeeded && got->revision == 12 && got->count == 1 && got->results[0].count == 1
              && got->results[0].kvs[0].mod_revision == 12);
    }
    shoal_envelope_destroy(&decoded);
    //  A key written before it was created is no key.
    answer->results[0].kvs[0].mod_revision = 2;
    CHECK(!shoal_round_trip(reply, error, sizeof error) && shoal_test_contains(error, "do not make a key"));
    shoal_envelope_destroy(&reply);
    shoal_envelope_destroy(&ask);
}

static void
test_lease_and_lock_bodies(void)
{
    char error[ERROR_MAX] = "";
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_LEASE, 1);
    shoal_msg_lease_request_t *lease = (shoal_msg_lease_request_t *) shoal_envelope_new_body(request);
    lease->op = SHOAL_LEASE_GRANT;
    lease->ttl_ms = 10;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "below the 100 ms"));
    lease->op = SHOAL_LEASE_KEEPALIVE;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "names no lease"));
    lease->id = 42;
    shoal_envelope_t *decoded = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(decoded && ((shoal_msg_lease_request_t *) decoded->body)->id == 42, "%s", error);
    shoal_envelope_destroy(&decoded);
    shoal_envelope_destroy(&request);

    request = shoal_envelope_new(SHOAL_MSG_LOCK, 2);
    shoal_msg_lock_request_t *lock = (shoal_msg_lock_request_t *) shoal_envelope_new_body(request);
    lock->op = SHOAL_LOCK_ACQUIRE;
    lock->claim_id = shoal_strdup("c1");
    lock->mode = SHOAL_LOCK_READ;
    lock->wait = true;
    CHECK(!shoal_round_trip(request, error, sizeof error) && shoal_test_contains(error, "only a writer's acquire may wait"));
    lock->mode = SHOAL_LOCK_WRITE;
    decoded = shoal_round_trip(request, error, sizeof error);
    CHECK_MSG(decoded && ((shoal_msg_lock_request_t *) decoded->body)->wait, "%s", error);
    shoal_envelope_destroy(&decoded);

    //  A lock state with readers beside a writer is refused either way.
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_locks_t *state = (shoal_msg_locks_t *) shoal_envelope_new_body(reply);
    state->claim_id = shoal_strdup("c1");
    state->readers = 1;
    state->writer = shoal_strdup("w");
    CHECK(!shoal_round_trip(reply, error, sizeof error) && shoal_test_contains(error, "reader(s) beside writer"));
    state->readers = 0;
    decoded = shoal_round_trip(reply, error, sizeof error);
    CHECK_MSG(decoded, "%s", error);
    shoal_envelope_destroy(&decoded);
    shoal_envelope_destroy(&reply);
    shoal_envelope_destroy(&request);

    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_CLAIM_TXN), "claim_txn");
    CHECK_STR(shoal_msg_type_name(SHOAL_MSG_LOCK), "lock");
}

int
main(void)
{
    SHOAL_TEST(test_txn_round_trip);
    SHOAL_TEST(test_lease_and_lock_bodies);
    return shoal_test_finish();
}
