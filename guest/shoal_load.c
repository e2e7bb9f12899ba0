/*  shoal_load: the load and tick loop that shoal_load.h describes.

    Pacing. The loop keeps a credit of bytes: each pass adds rate x time
    since the last pass and writes whole pages while the credit allows, at
    most LOAD_SLICE_PAGES before it looks at the clock again, so the tick is
    never more than a slice late however high the rate. When nothing is
    due it sleeps to the next millisecond boundary. The credit is capped at
    LOAD_CREDIT_MAX_MS of load: after a SIGSTOP or a move the load resumes
    at its rate instead of writing the whole pause's worth in one burst (which
    would also starve the tick). One thread does both jobs: at 1 GB/s a page
    costs about a microsecond, so a millisecond's pages take a quarter of it.
*/
#include "shoal_load.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

//  Pages written between two looks at the clock.
#define LOAD_SLICE_PAGES 16
//  Most load that may be owed, in ms of the current rate.
#define LOAD_CREDIT_MAX_MS 10
#define MS_PER_S 1000
#define NS_PER_MS 1000000
#define NS_PER_S 1000000000
//  xorshift64* multiplier, and a non-zero state for a zero seed.
#define LOAD_RANDOM_MULTIPLIER UINT64_C(0x2545f4914f6cdd1d)
#define LOAD_RANDOM_DEFAULT UINT64_C(0x853c49e6748fea9b)

struct _shoal_load_t {
    shoal_image_t *image;       //  the guest's image (borrowed)
    uint64_t random;            //  xorshift64* state that picks the pages
    double credit;              //  bytes the load may write now
    unsigned since_block;       //  memory pages written since the last disk block
};

shoal_load_t *
shoal_load_new(shoal_image_t *image, uint64_t seed)
{
    shoal_load_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->image = image;
    self->random = seed ? seed : LOAD_RANDOM_DEFAULT;
    return self;
}

void
shoal_load_destroy(shoal_load_t **self_p)
{
    if (self_p && *self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

static uint64_t
s_load_random(shoal_load_t *self)
{
    self->random ^= self->random >> 12;
    self->random ^= self->random << 25;
    self->random ^= self->random >> 27;
    return self->random * LOAD_RANDOM_MULTIPLIER;
}

static uint64_t
s_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t) ts.tv_sec * NS_PER_S + (uint64_t) ts.tv_nsec;
}

//  Writes COUNT pages: memory pages picked at random among the load's, and
//  a disk block after every SHOAL_LOAD_PAGES_PER_BLOCK of them.
static void
s_load_write(shoal_load_t *self, size_t count)
{
    shoal_image_t *image = self->image;
    size_t first = shoal_image_load_first(image);
    size_t memory_pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY) - first;
    size_t disk_blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK);
    uint64_t seq = shoal_image_reserve(image, count);
    uint64_t memory_written = 0, disk_written = 0;
    for (size_t i = 0; i < count; i++, seq++) {
        if (disk_blocks > 0 && self->since_block >= SHOAL_LOAD_PAGES_PER_BLOCK) {
            size_t block = (size_t) (s_load_random(self) % disk_blocks);
            shoal_image_write(image, SHOAL_IMAGE_DISK, block, seq);
            self->since_block = 0;
            disk_written++;
        }
        else {
            size_t page = first + (size_t) (s_load_random(self) % memory_pages);
            shoal_image_write(image, SHOAL_IMAGE_MEMORY, page, seq);
            self->since_block++;
            memory_written++;
        }
    }
    shoal_image_add_writes(image, memory_written, disk_written);
}

int
shoal_load_run(shoal_load_t *self, const volatile sig_atomic_t *stop)
{
    //  A previous run (here, or before a move) may have stopped mid-write.
    shoal_image_recover(self->image);
    uint64_t last_ns = s_clock_ns(CLOCK_MONOTONIC);
    uint64_t last_tick_ms = 0;
    while (!*stop) {
        //  The tick is wall time, so a gap can be measured across a move to
        //  another machine; pacing is monotonic time, immune to clock steps.
        uint64_t wall_ms = s_clock_ns(CLOCK_REALTIME) / NS_PER_MS;
        if (wall_ms != last_tick_ms) {
            shoal_image_tick(self->image, wall_ms);
            last_tick_ms = wall_ms;
        }
        uint64_t now_ns = s_clock_ns(CLOCK_MONOTONIC);
        //  A throttle (a move's auto-converge) holds back part of the rate.
        uint64_t rate = shoal_image_rate(self->image) * (100 - shoal_image_throttle(self->image)) / 100;
        self->credit += (double) rate * (double) (now_ns - last_ns) / NS_PER_S;
        last_ns = now_ns;
        double most = (double) rate * LOAD_CREDIT_MAX_MS / MS_PER_S;
        if (most < SHOAL_IMAGE_PAGE)
            most = SHOAL_IMAGE_PAGE;
        if (rate == 0 || self->credit > most)
            self->credit = rate == 0 ? 0 : most;

        size_t due = (size_t) (self->credit / SHOAL_IMAGE_PAGE);
        if (due > 0) {
            size_t count = due < LOAD_SLICE_PAGES ? due : LOAD_SLICE_PAGES;
            s_load_write(self, count);
            self->credit -= (double) count * SHOAL_IMAGE_PAGE;
            continue;
        }
        uint64_t wake_ns = (now_ns / NS_PER_MS + 1) * NS_PER_MS;
        struct timespec wake = { (time_t) (wake_ns / NS_PER_S), (long) (wake_ns % NS_PER_S) };
        //  A signal (SIGTERM) interrupts the sleep; the loop then sees *stop.
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL) == EINTR && !*stop)
            ;
    }
    return 0;
}
