/*  shoal_load: the reference guest's work, a memory-writing load and a tick
    clock, run in one loop on the guest's image until asked to stop.

    Every millisecond the loop ticks the image's clock, then writes the pages
    the rate allows since the last pass (shoal_image_write stamps them and
    keeps the dirty log), then sleeps to the next millisecond. One disk block
    is written after every SHOAL_LOAD_PAGES_PER_BLOCK memory pages when the
    disk is not empty; the rate counts memory pages and disk blocks alike.
*/
#ifndef SHOAL_LOAD_H_INCLUDED
#define SHOAL_LOAD_H_INCLUDED

#include <signal.h>

#include "shoal_image.h"

//  Memory pages written for each disk block.
#define SHOAL_LOAD_PAGES_PER_BLOCK 8

typedef struct _shoal_load_t shoal_load_t;

//  A load on IMAGE (borrowed; it must outlive the load). SEED picks the
//  pages it writes. Returns NULL when out of memory.
shoal_load_t *shoal_load_new(shoal_image_t *image, uint64_t seed);
void shoal_load_destroy(shoal_load_t **self_p);

//  Completes the write a previous run was stopped in (shoal_image_recover),
//  then runs the tick and the load until *STOP is non-zero (a signal handler
//  sets it; the loop's sleeps are short, so it stops within a millisecond).
//  Returns 0.
int shoal_load_run(shoal_load_t *self, const volatile sig_atomic_t *stop);

#endif
