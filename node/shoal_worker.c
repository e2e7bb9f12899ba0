/*  shoal_worker: a thread that runs blocking work. See shoal_worker.h. */
#include "shoal_worker.h"

#include <pthread.h>

#define WORKER_ITEM "ITEM"

typedef struct {
    char name[16];              //  the thread's name
    shoal_worker_fn *fn;
} s_args_t;

static void
s_worker(zsock_t *pipe, void *args_in)
{
    s_args_t *args = (s_args_t *) args_in;
    pthread_setname_np(pthread_self(), args->name);
    zsock_signal(pipe, 0);
    while (true) {
        zmsg_t *msg = zmsg_recv(pipe);
        if (!msg)
            break;
        char *command = zmsg_popstr(msg);
        bool term = !command || streq(command, "$TERM");
        if (!term && streq(command, WORKER_ITEM)) {
            zframe_t *frame = zmsg_pop(msg);
            void *item = NULL;
            if (frame && zframe_size(frame) == sizeof item)
                memcpy(&item, zframe_data(frame), sizeof item);
            zframe_destroy(&frame);
            if (item) {
                args->fn(item);
                zsock_send(pipe, "p", item);
            }
        }
        free(command);
        zmsg_destroy(&msg);
        if (term)
            break;
    }
    free(args);
}

zactor_t *
shoal_worker_new(const char *name, shoal_worker_fn *fn)
{
    s_args_t *args = (s_args_t *) zmalloc(sizeof *args);
    snprintf(args->name, sizeof args->name, "%s", name);
    args->fn = fn;
    zactor_t *worker = zactor_new(s_worker, args);
    if (!worker)
        free(args);
    return worker;
}

void
shoal_worker_give(zactor_t *worker, void *item)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addstr(msg, WORKER_ITEM);
    zmsg_addmem(msg, &item, sizeof item);
    zmsg_send(&msg, worker);
}
