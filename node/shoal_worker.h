/*  shoal_worker: a thread that runs blocking work handed to it by the
    reactor, one item at a time, in the order given.

    An item is the reactor's own pointer: it goes to the worker over the
    actor's pipe and comes back the same way once done, to be read from
    the actor (zsock_recv (worker, "p", &item)) by the reactor's loop or
    tick. Between the two, only the worker touches the item, and only
    what its run function writes; the reactor touches it before and after.
    The guest actor's workers and the sweep's repairs run on these.
*/
#ifndef SHOAL_WORKER_H_INCLUDED
#define SHOAL_WORKER_H_INCLUDED

#include <czmq.h>

//  Runs ITEM's work on the worker's thread.
typedef void (shoal_worker_fn) (void *item);

//  A worker thread named NAME (at most 15 characters) running FN on each
//  item given. Destroying it (zactor_destroy) ends the thread once the item
//  in hand is done; items given after it are never run nor sent back.
zactor_t *shoal_worker_new(const char *name, shoal_worker_fn *fn);

//  Hands ITEM (the caller's pointer) to WORKER.
void shoal_worker_give(zactor_t *worker, void *item);

#endif
