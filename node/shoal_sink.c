/*  shoal_sink: a file written front to back, then made durable. See
    shoal_sink.h.

    DESIGN

    1. The file is opened with O_DIRECT. Direct writes need the buffer, the
       offset and the length aligned to the device's block; the bytes
       arrive in whatever buffers their sender had (a libzmq frame's data
       is not aligned), so they are copied into a staging buffer aligned to
       SINK_ALIGN. The copy costs a tenth of what filling page-cache pages
       costs here, and the staging buffer is touched once and reused.
    2. A full staging buffer is written at the offset it stands for, which
       is a whole number of stages, so always aligned. The write waits for
       the disk: the caller is a thread of its own (the receiver, the
       objects worker), and its wait holds back its credit or its answer,
       so a disk slower than the stream slows the sender instead of
       leaving a backlog for the final sync.
    3. At the end the last, partial stage is padded with zeros to the
       block, written, and the file cut back to the bytes written; then
       fdatasync, which has only the file's length and the disk's cache
       left to make durable.
    4. A file system that refuses O_DIRECT (at the open, or with EINVAL at
       the first write: tmpfs before Linux 6.6, some FUSE file systems)
       gets ordinary writes. Those go on with write-behind: as the bytes
       cross into a new 32 MiB step the disk starts on the step before,
       and the writer waits for the one two steps back, so the writeback
       keeps up and the final sync has little left.
*/
#include "shoal_sink.h"
#include "shoal_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  The alignment direct writes need: a device block, at most a page.
#define SINK_ALIGN 4096
//  The staging buffer: four of the transfer's 1 MiB chunks, written at once.
#define SINK_STAGE_BYTES ((size_t) 4 * 1024 * 1024)
//  Write-behind, for ordinary writes: the step, and how many steps the
//  writeback may lag behind the bytes.
#define SINK_BEHIND_BYTES ((uint64_t) 32 * 1024 * 1024)
#define SINK_BEHIND_LAG 2

struct _shoal_sink_t {
    int fd;                     //  the file
    bool direct;                //  written around the page cache
    uint8_t *stage;             //  direct: bytes not yet written, SINK_ALIGN-aligned
    size_t staged;              //  direct: how many
    uint64_t written;           //  bytes on their way to the disk (direct: a whole number of stages)
    uint64_t size;              //  bytes appended
};

shoal_sink_t *
shoal_sink_new(const char *path, bool exclusive)
{
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
    bool direct = true;
    int fd = open(path, flags | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
        direct = false;
        fd = open(path, flags, 0600);
    }
    if (fd < 0)
        return NULL;
    shoal_sink_t *self = (shoal_sink_t *) shoal_calloc(1, sizeof *self);
    self->fd = fd;
    self->direct = direct;
    if (direct && posix_memalign((void **) &self->stage, SINK_ALIGN, SINK_STAGE_BYTES) != 0)
        shoal_alloc_fail(SINK_STAGE_BYTES);
    return self;
}

void
shoal_sink_destroy(shoal_sink_t **self_p)
{
    shoal_sink_t *self = *self_p;
    if (!self)
        return;
    close(self->fd);
    free(self->stage);
    free(self);
    *self_p = NULL;
}

//  Writes all of SIZE bytes of DATA at OFFSET. Returns 0, or -1 with errno.
static int
s_write_all(int fd, const uint8_t *data, size_t size, uint64_t offset)
{
    while (size) {
        ssize_t wrote = pwrite(fd, data, size, (off_t) offset);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            if (wrote == 0)
                errno = ENOSPC;
            return -1;
        }
        data += wrote;
        offset += (uint64_t) wrote;
        size -= (size_t) wrote;
    }
    return 0;
}

//  Ordinary writes of SIZE bytes at the end, with write-behind (step 4).
static int
s_write_buffered(shoal_sink_t *self, const uint8_t *data, size_t size)
{
    if (s_write_all(self->fd, data, size, self->written))
        return -1;
    uint64_t step = self->written / SINK_BEHIND_BYTES;
    self->written += size;
    if (self->written / SINK_BEHIND_BYTES != step) {
        sync_file_range(self->fd, (off_t) (step * SINK_BEHIND_BYTES), SINK_BEHIND_BYTES, SYNC_FILE_RANGE_WRITE);
        if (step >= SINK_BEHIND_LAG)
            sync_file_range(self->fd, (off_t) ((step - SINK_BEHIND_LAG) * SINK_BEHIND_BYTES), SINK_BEHIND_BYTES,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    }
    return 0;
}

//  Writes the staged bytes, padded to LENGTH (a multiple of SINK_ALIGN).
//  A refusal of the first direct write turns the sink to ordinary writes
//  (step 4). Returns 0, or -1 with errno.
static int
s_stage_write(shoal_sink_t *self, size_t length)
{
    if (s_write_all(self->fd, self->stage, length, self->written) == 0) {
        self->written += self->staged;
        self->staged = 0;
        return 0;
    }
    if (errno != EINVAL || self->written != 0)
        return -1;
    int flags = fcntl(self->fd, F_GETFL);
    if (flags < 0 || fcntl(self->fd, F_SETFL, flags & ~O_DIRECT) != 0)
        return -1;
    self->direct = false;
    size_t staged = self->staged;
    self->staged = 0;
    return s_write_buffered(self, self->stage, staged);
}

int
shoal_sink_write(shoal_sink_t *self, const void *data, size_t size)
{
    const uint8_t *from = (const uint8_t *) data;
    self->size += size;
    while (size && self->direct) {
        size_t take = SINK_STAGE_BYTES - self->staged;
        if (take > size)
            take = size;
        memcpy(self->stage + self->staged, from, take);
        self->staged += take;
        from += take;
        size -= take;
        if (self->staged == SINK_STAGE_BYTES && s_stage_write(self, SINK_STAGE_BYTES))
            return -1;
    }
    return size ? s_write_buffered(self, from, size) : 0;
}

int
shoal_sink_sync(shoal_sink_t *self)
{
    if (self->direct && self->staged) {
        size_t length = (self->staged + SINK_ALIGN - 1) / SINK_ALIGN * SINK_ALIGN;
        memset(self->stage + self->staged, 0, length - self->staged);
        if (s_stage_write(self, length))
            return -1;
        //  The padding goes again (step 3).
        if (ftruncate(self->fd, (off_t) self->size) != 0)
            return -1;
    }
    return fdatasync(self->fd);
}

uint64_t
shoal_sink_size(const shoal_sink_t *self)
{
    return self->size;
}

bool
shoal_sink_direct(const shoal_sink_t *self)
{
    return self->direct;
}
