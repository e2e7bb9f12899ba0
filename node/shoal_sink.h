/*  shoal_sink: a file written once, front to back, then made durable: an
    object's bytes as they arrive (a replica's receiver, an add's objects
    worker).

    The bytes go to the disk around the page cache (O_DIRECT), through an
    aligned staging buffer: on a virtual machine whose hypervisor backs
    memory as it is first touched, filling fresh page-cache pages cost the
    writing thread 0.7-2.4 s of kernel time per GiB (bench_objects' CPU
    lines: 2.4 s for a 1 GiB replica), against 0.2 s written direct. A file
    system that refuses O_DIRECT gets ordinary writes, with write-behind
    so that the final sync has little left. See shoal_sink.c.
*/
#ifndef SHOAL_SINK_H_INCLUDED
#define SHOAL_SINK_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _shoal_sink_t shoal_sink_t;

//  Creates the file at PATH (mode 0600) to be written in order. If it
//  exists, it is replaced by a new file, or, when EXCLUSIVE, refused
//  (EEXIST). SIZE_HINT
//  is the bytes to come, if known (0: not known): a small file is staged
//  in a buffer of its own size. Returns NULL with errno set.
shoal_sink_t *
    shoal_sink_new(const char *path, bool exclusive, uint64_t size_hint);

//  Closes the file (it stays where it is, as written so far: what was
//  appended but not synced may be missing). Never waits for the disk: a
//  stage still being written is finished by the sink's own thread, which
//  then frees what is left. Safe twice.
void
    shoal_sink_destroy(shoal_sink_t **self_p);

//  Appends SIZE bytes of DATA. The sink's own thread writes them while the
//  caller goes on; the caller waits only when the disk is behind by more
//  than a few MiB. Returns 0, or -1 with errno set (ENOSPC: the disk is
//  full), here or at a later write or the sync, once a write failed; after
//  a failure the file is not to be trusted.
int
    shoal_sink_write(shoal_sink_t *self, const void *data, size_t size);

//  Writes what is staged, sets the file's length to the bytes written and
//  makes them durable. Returns 0, or -1 with errno set.
int
    shoal_sink_sync(shoal_sink_t *self);

//  Bytes appended so far.
uint64_t
    shoal_sink_size(const shoal_sink_t *self);

//  Bytes made durable so far: by the sync, and, for a file written direct,
//  in steps while it is written (shoal_sink.c, step 5).
uint64_t
    shoal_sink_durable(shoal_sink_t *self);

//  Whether the bytes go around the page cache (false: the file system
//  refused O_DIRECT). Waits for the write under way.
bool
    shoal_sink_direct(shoal_sink_t *self);

#endif
