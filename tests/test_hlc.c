/*  test_hlc: the hybrid logical clock.

    The physical clock is a variable the tests move by hand, so that they can
    hold it still, set it back, or run a peer ahead of it, and check that the
    stamps the clock issues still only grow.
*/
#include <stdlib.h>

#include "shoal_hlc.h"
#include "shoal_store.h"
#include "shoal_test.h"

//  A plausible wall time to start from: 2023-11-14, in milliseconds.
#define BASE_MS UINT64_C(1700000000000)
//  The remote-clock bound the tests open the clock with.
#define MAX_AHEAD_MS 5000
//  Stamps issued in a row in the monotonic tests.
#define TICKS 1000
//  How far a restarted node's clock is set back.
#define SET_BACK_MS (60 * 60 * 1000)

//  The hand-moved physical clock.
typedef struct {
    uint64_t now_ms;
} fake_clock_t;

static uint64_t
s_fake_clock(void *arg)
{
    return ((fake_clock_t *) arg)->now_ms;
}

static shoal_store_t *
s_store_open(void)
{
    shoal_store_options_t options;
    shoal_store_options_default(&options);
    options.sync = false;
    char path[4200];
    snprintf(path, sizeof path, "%s/db", shoal_test_dir);
    return shoal_store_new(path, &options, NULL);
}

static bool
s_before(shoal_hlc_stamp_t a, shoal_hlc_stamp_t b)
{
    return shoal_hlc_compare(&a, &b) < 0;
}

//  now() grows strictly whether the physical clock stands, moves on or goes
//  back, and takes the physical time when that is ahead.
static void
test_now_is_monotonic(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    fake_clock_t clock = { BASE_MS };
    shoal_hlc_t *hlc = shoal_hlc_new(store, MAX_AHEAD_MS, s_fake_clock, &clock);
    CHECK(hlc);

    shoal_hlc_stamp_t previous;
    CHECK_INT(shoal_hlc_now(hlc, &previous), 0);
    CHECK_INT(previous.wall_ms, BASE_MS);
    CHECK_INT(previous.logic, 0);
    for (int i = 0; i < TICKS; i++) {
        //  Stands still, then jumps ahead, then falls back, in turn.
        if (i % 3 == 1)
            clock.now_ms += 7;
        else
        if (i % 3 == 2)
            clock.now_ms -= 5;
        shoal_hlc_stamp_t stamp;
        CHECK_INT(shoal_hlc_now(hlc, &stamp), 0);
        CHECK_MSG(s_before(previous, stamp), "tick %d: %" PRIu64 ".%u not after %" PRIu64 ".%u",
                  i, stamp.wall_ms, stamp.logic, previous.wall_ms, previous.logic);
        CHECK(stamp.wall_ms >= clock.now_ms);
        previous = stamp;
    }
    //  Once the physical clock is ahead, the stamp is physical time again.
    clock.now_ms = previous.wall_ms + 100;
    shoal_hlc_stamp_t stamp;
    CHECK_INT(shoal_hlc_now(hlc, &stamp), 0);
    CHECK_INT(stamp.wall_ms, clock.now_ms);
    CHECK_INT(stamp.logic, 0);

    shoal_hlc_destroy(&hlc);
    shoal_hlc_destroy(&hlc);
    CHECK(hlc == NULL);
    shoal_store_destroy(&store);
}

//  A peer's stamp within the bound is absorbed: the next local stamp sorts
//  after it. A peer too far ahead is refused and changes nothing.
static void
test_observe(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    fake_clock_t clock = { BASE_MS };
    shoal_hlc_t *hlc = shoal_hlc_new(store, MAX_AHEAD_MS, s_fake_clock, &clock);
    CHECK(hlc);

    shoal_hlc_stamp_t remote = { BASE_MS + MAX_AHEAD_MS, 42 };
    CHECK_INT(shoal_hlc_observe(hlc, &remote), 0);
    shoal_hlc_stamp_t stamp;
    CHECK_INT(shoal_hlc_now(hlc, &stamp), 0);
    CHECK(s_before(remote, stamp));
    CHECK_INT(stamp.wall_ms, remote.wall_ms);

    //  A remote stamp behind ours still moves the counter on.
    shoal_hlc_stamp_t before = shoal_hlc_last(hlc);
    shoal_hlc_stamp_t old = { BASE_MS - 1000, 7 };
    CHECK_INT(shoal_hlc_observe(hlc, &old), 0);
    CHECK(s_before(before, shoal_hlc_last(hlc)));

    before = shoal_hlc_last(hlc);
    shoal_hlc_stamp_t ahead = { BASE_MS + MAX_AHEAD_MS + 1, 0 };
    CHECK_INT(shoal_hlc_observe(hlc, &ahead), -1);
    CHECK_MSG(shoal_test_contains(shoal_hlc_error(hlc), "ahead"), "%s", shoal_hlc_error(hlc));
    shoal_hlc_stamp_t after = shoal_hlc_last(hlc);
    CHECK_INT(shoal_hlc_compare(&before, &after), 0);

    shoal_hlc_destroy(&hlc);
    shoal_store_destroy(&store);
}

//  A counter that is spent moves the clock to the next millisecond.
static void
test_logic_overflow(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    fake_clock_t clock = { BASE_MS };
    shoal_hlc_t *hlc = shoal_hlc_new(store, MAX_AHEAD_MS, s_fake_clock, &clock);
    CHECK(hlc);
    shoal_hlc_stamp_t remote = { BASE_MS, UINT32_MAX };
    CHECK_INT(shoal_hlc_observe(hlc, &remote), 0);
    shoal_hlc_stamp_t last = shoal_hlc_last(hlc);
    CHECK_INT(last.wall_ms, BASE_MS + 1);
    CHECK_INT(last.logic, 0);
    shoal_hlc_destroy(&hlc);
    shoal_store_destroy(&store);
}

//  Stamps keep growing across a restart even when the physical clock was set
//  back meanwhile, and the high-water mark is written once per reserve step,
//  not once per stamp.
static void
test_monotonic_across_restart(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    fake_clock_t clock = { BASE_MS };
    shoal_hlc_t *hlc = shoal_hlc_new(store, MAX_AHEAD_MS, s_fake_clock, &clock);
    CHECK(hlc);
    shoal_hlc_stamp_t last;
    for (int i = 0; i < TICKS; i++)
        CHECK_INT(shoal_hlc_now(hlc, &last), 0);
    //  One reservation covered every stamp of that millisecond.
    CHECK_INT(shoal_hlc_high_water(hlc), BASE_MS + SHOAL_HLC_RESERVE_MS);
    clock.now_ms += SHOAL_HLC_RESERVE_MS / 2;
    CHECK_INT(shoal_hlc_now(hlc, &last), 0);
    CHECK_INT(shoal_hlc_high_water(hlc), BASE_MS + SHOAL_HLC_RESERVE_MS);
    clock.now_ms = BASE_MS + SHOAL_HLC_RESERVE_MS;
    CHECK_INT(shoal_hlc_now(hlc, &last), 0);
    CHECK_INT(shoal_hlc_high_water(hlc), BASE_MS + 2 * SHOAL_HLC_RESERVE_MS);
    shoal_hlc_destroy(&hlc);
    shoal_store_destroy(&store);

    store = s_store_open();
    CHECK(store);
    clock.now_ms = BASE_MS - SET_BACK_MS;
    hlc = shoal_hlc_new(store, MAX_AHEAD_MS, s_fake_clock, &clock);
    CHECK(hlc);
    shoal_hlc_stamp_t first;
    CHECK_INT(shoal_hlc_now(hlc, &first), 0);
    CHECK_MSG(s_before(last, first), "after restart %" PRIu64 ".%u is not after %" PRIu64 ".%u",
              first.wall_ms, first.logic, last.wall_ms, last.logic);
    shoal_hlc_destroy(&hlc);
    shoal_store_destroy(&store);
}

//  A high-water mark that does not decode stops the clock from opening
//  rather than letting it start from zero.
static void
test_corrupt_high_water(void)
{
    shoal_store_t *store = s_store_open();
    CHECK(store);
    shoal_key_t key;
    shoal_key_init(&key);
    shoal_key_add_str(&key, "hlc");
    CHECK_INT(shoal_store_put(store, SHOAL_CF_OPLOG_META, &key, "junk", 4, false), 0);
    shoal_hlc_t *hlc = shoal_hlc_new(store, MAX_AHEAD_MS, NULL, NULL);
    CHECK(hlc == NULL);
    shoal_store_destroy(&store);
}

int
main(void)
{
    SHOAL_TEST(test_now_is_monotonic);
    SHOAL_TEST(test_observe);
    SHOAL_TEST(test_logic_overflow);
    SHOAL_TEST(test_monotonic_across_restart);
    SHOAL_TEST(test_corrupt_high_water);
    return shoal_test_finish();
}
