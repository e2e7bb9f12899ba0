/*  shoal_sink: a file written front to back, then made durable. See
    shoal_sink.h.

    DESIGN

    1. The file is opened with O_DIRECT. Direct writes need the buffer, the
       offset and the length aligned to the device's block; the bytes
       arrive in whatever buffers their sender had (a libzmq frame's data
       is not aligned), so they are copied into a staging buffer aligned to
       SINK_ALIGN. The copy costs a tenth of what filling page-cache pages
       costs here.
    2. A full stage is handed to the sink's writer thread, which writes it
       at the offset it stands for (a whole number of stages, so always
       aligned), while the caller fills the other stage. A direct write
       waits for the disk; without the writer, the caller would wait too,
       and an add whose client keeps as many bytes in flight as one stage
       holds would alternate between sending and writing. The caller waits
       only when the writer still holds the other stage: a disk slower
       than the bytes arrive slows the sender (the receiver's credit, the
       add's answers) instead of leaving a backlog for the final sync.
    3. The stages and the writer come with the first stage that fills: a
       small file is one stage of its own size (SIZE_HINT), written by the
       sync, with no thread. A whole stage is a mapping of its own, aligned
       to a huge page and asking for them: a direct write is cut into one
       disk request per run of physically contiguous memory (a virtio disk
       takes up to 254 segments a request), and in 4 KiB pages a 4 MiB
       stage went as five requests, each with its notification and its
       interrupt, which this VM's hypervisor makes dear.
    4. At the sync, once the writer is idle, the last, partial stage is
       padded with zeros to the block, written, and the file cut back to
       the bytes written; then fdatasync, which has only the file's length
       and the disk's cache left to make durable.
    5. The disk's cache is flushed while the bytes still arrive: a direct
       write returns once the disk holds it, in its volatile cache, and
       the fdatasync at the end flushed all of it at once (here 0.40-0.45 s
       for a 1 GiB replica that took 1.4-1.5 s to arrive: a fifth of the
       replicate). The sink's flusher thread fdatasyncs every 64 MiB
       written, beside the writer, so the disk flushes the file in
       steps while the stream runs and the last step is all the sync has
       left. A flush waits for the disk, not for the CPU.
    6. A file system that refuses O_DIRECT (at the open, or with EINVAL at
       the first write: tmpfs before Linux 6.6, some FUSE file systems)
       gets ordinary writes of the same stages, with write-behind: as the
       bytes cross into a new 32 MiB step the disk starts on the step
       before, and the writer waits for the one two steps back, so the
       writeback keeps up and the final sync has little left.

    The writer and flusher threads and the caller share only the stage
    handed over, the flush asked for, and the outcome of each, under the
    sink's lock. A failed flush fails the sink: an fsync reports a write's
    failure once, so the caller's own sync could not see it. The caller's
    sync waits for a flush under way before its own. A sink destroyed
    while its threads run becomes theirs: each ends once its write or
    flush under way is done, and the last to end frees the sink, so that
    the caller (an add given up on the node's reactor) never waits for the
    disk.
*/
#include "shoal_sink.h"
#include "shoal_alloc.h"
#include "shoal_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

//  The alignment direct writes need: a device block, at most a page.
#define SINK_ALIGN 4096
//  A stage: four of the transfer's 1 MiB chunks, written at once.
#define SINK_STAGE_BYTES ((size_t) 4 * 1024 * 1024)
//  Write-behind, for ordinary writes: the step, and how many steps the
//  writeback may lag behind the bytes.
#define SINK_BEHIND_BYTES ((uint64_t) 32 * 1024 * 1024)
#define SINK_BEHIND_LAG 2
//  Direct writes: the disk's cache is flushed every this many bytes
//  written (step 5).
#define SINK_FLUSH_BYTES ((uint64_t) 64 * 1024 * 1024)

struct _shoal_sink_t {
    int fd;                     //  the file
    uint64_t size;              //  bytes appended
    uint8_t *stages[2];         //  SINK_ALIGN-aligned, STAGE_BYTES each (step 3: made when needed)
    size_t stage_bytes;         //  a stage's size
    int current;                //  the stage being filled
    size_t staged;              //  bytes in it
    uint64_t handed;            //  bytes handed to the writer (a whole number of stages)
    bool threads_started;       //  the writer and the flusher were started (detached)
    //  Shared with the threads, under LOCK.
    pthread_mutex_t lock;
    pthread_cond_t changed;     //  a stage handed over or written, a flush asked for or done, the end
    int threads;                //  threads running
    bool ending;                //  the threads are to end
    bool destroyed;             //  the caller let go: the last thread to end frees the sink
    int pending;                //  the stage handed over and not yet written (-1: none)
    uint64_t pending_offset;    //  where it goes
    uint64_t flush_asked;       //  the flusher is to make the bytes up to here durable (step 5)
    uint64_t flushed;           //  the bytes a flush made durable, or one under way is making
    bool flushing;              //  a flush is under way
    uint64_t durable;           //  the bytes a flush or the sync made durable
    int failed;                 //  errno of the first write or flush that failed (0: none)
    bool direct;                //  writes go around the page cache (step 6 clears it)
    uint64_t written;           //  bytes written, for write-behind and the flusher
};

shoal_sink_t *
shoal_sink_new(const char *path, bool exclusive, uint64_t size_hint)
{
    //  A file that exists is replaced, not emptied: a new inode, which the
    //  writer of a sink destroyed at the same path cannot write into.
    if (!exclusive && unlink(path) != 0 && errno != ENOENT)
        return NULL;
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
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
    self->pending = -1;
    self->stage_bytes = SINK_STAGE_BYTES;
    if (size_hint < SINK_STAGE_BYTES)
        self->stage_bytes = size_hint ? (size_t) (size_hint + SINK_ALIGN - 1) / SINK_ALIGN * SINK_ALIGN : SINK_ALIGN;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->changed, NULL);
    return self;
}

//  A stage of BYTES (a whole number of SINK_ALIGN), aligned (step 3).
static uint8_t *
s_stage_new(size_t bytes)
{
    void *stage = NULL;
    if (bytes < SHOAL_HUGE_PAGE) {
        if (posix_memalign(&stage, SINK_ALIGN, bytes) != 0)
            shoal_alloc_fail(bytes);
        return (uint8_t *) stage;
    }
    void *mapped = shoal_map_huge(bytes);
    if (!mapped)
        shoal_alloc_fail(bytes);
    return (uint8_t *) mapped;
}

static void s_sink_free(shoal_sink_t *self);

static void
s_stage_destroy(uint8_t **stage_p, size_t bytes)
{
    if (*stage_p && bytes < SHOAL_HUGE_PAGE)
        free(*stage_p);
    else
    if (*stage_p)
        munmap(*stage_p, bytes);
    *stage_p = NULL;
}

//  Waits until the writer holds no stage and, if FLUSHER_TOO, no flush is
//  under way. Returns 0, or -1 with errno set to the first failure.
static int
s_threads_idle(shoal_sink_t *self, bool flusher_too)
{
    pthread_mutex_lock(&self->lock);
    while (self->pending >= 0 || (flusher_too && self->flushing))
        pthread_cond_wait(&self->changed, &self->lock);
    int failed = self->failed;
    pthread_mutex_unlock(&self->lock);
    errno = failed;
    return failed ? -1 : 0;
}

void
shoal_sink_destroy(shoal_sink_t **self_p)
{
    shoal_sink_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    pthread_mutex_lock(&self->lock);
    bool theirs = self->threads > 0;
    self->ending = true;
    self->destroyed = true;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
    //  Else the last thread to end frees it.
    if (!theirs)
        s_sink_free(self);
}

static void
s_sink_free(shoal_sink_t *self)
{
    close(self->fd);
    s_stage_destroy(&self->stages[0], self->stage_bytes);
    s_stage_destroy(&self->stages[1], self->stage_bytes);
    pthread_cond_destroy(&self->changed);
    pthread_mutex_destroy(&self->lock);
    free(self);
}

//  Writes LENGTH bytes of DATA at OFFSET, BYTES of them the file's (the
//  rest padding to the block): direct, or, once the file system refused
//  that, ordinary writes with write-behind (step 5). Called by the writer,
//  or by the caller while the writer is idle. Returns 0, or -1 with errno.
static int
s_stage_write(shoal_sink_t *self, const uint8_t *data, size_t length, size_t bytes, uint64_t offset)
{
    if (self->direct) {
        if (shoal_pwrite_all(self->fd, data, length, offset) == 0)
            return 0;
        if (errno != EINVAL || offset != 0)
            return -1;
        int flags = fcntl(self->fd, F_GETFL);
        if (flags < 0 || fcntl(self->fd, F_SETFL, flags & ~O_DIRECT) != 0)
            return -1;
        self->direct = false;
    }
    if (shoal_pwrite_all(self->fd, data, bytes, offset))
        return -1;
    //  Ordinary writes: WRITTEN is only touched by whoever writes (the
    //  writer, or the caller while the writer is idle).
    uint64_t step = self->written / SINK_BEHIND_BYTES;
    self->written = offset + bytes;
    if (self->written / SINK_BEHIND_BYTES != step) {
        sync_file_range(self->fd, (off_t) (step * SINK_BEHIND_BYTES), SINK_BEHIND_BYTES, SYNC_FILE_RANGE_WRITE);
        if (step >= SINK_BEHIND_LAG)
            sync_file_range(self->fd, (off_t) ((step - SINK_BEHIND_LAG) * SINK_BEHIND_BYTES), SINK_BEHIND_BYTES,
                            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    }
    return 0;
}

//  A thread's end: the last one frees a destroyed sink. Called and
//  returns with the lock held by none.
static void
s_thread_end(shoal_sink_t *self)
{
    pthread_mutex_lock(&self->lock);
    bool last = --self->threads == 0 && self->destroyed;
    pthread_mutex_unlock(&self->lock);
    if (last)
        s_sink_free(self);
}

//  The writer: writes each stage handed over until told to end, and asks
//  the flusher for a flush every SINK_FLUSH_BYTES written direct.
static void *
s_writer(void *arg)
{
    shoal_sink_t *self = (shoal_sink_t *) arg;
    pthread_mutex_lock(&self->lock);
    while (true) {
        while (self->pending < 0 && !self->ending)
            pthread_cond_wait(&self->changed, &self->lock);
        if (self->pending < 0)
            break;
        int stage = self->pending;
        uint64_t offset = self->pending_offset;
        pthread_mutex_unlock(&self->lock);
        int rc = s_stage_write(self, self->stages[stage], self->stage_bytes, self->stage_bytes, offset);
        int error = errno;
        pthread_mutex_lock(&self->lock);
        if (rc && !self->failed)
            self->failed = error ? error : EIO;
        if (rc == 0 && self->direct) {
            self->written = offset + self->stage_bytes;
            if (self->written - self->flush_asked >= SINK_FLUSH_BYTES)
                self->flush_asked = self->written;
        }
        self->pending = -1;
        pthread_cond_broadcast(&self->changed);
    }
    pthread_mutex_unlock(&self->lock);
    s_thread_end(self);
    return NULL;
}

//  The flusher: makes the bytes written durable each time the writer asks
//  (step 5), until told to end.
static void *
s_flusher(void *arg)
{
    shoal_sink_t *self = (shoal_sink_t *) arg;
    pthread_mutex_lock(&self->lock);
    while (true) {
        while (self->flush_asked == self->flushed && !self->ending)
            pthread_cond_wait(&self->changed, &self->lock);
        if (self->ending)
            break;
        self->flushed = self->flush_asked;
        self->flushing = true;
        pthread_mutex_unlock(&self->lock);
        int rc = fdatasync(self->fd);
        int error = errno;
        pthread_mutex_lock(&self->lock);
        if (rc && !self->failed)
            self->failed = error ? error : EIO;
        if (rc == 0)
            self->durable = self->flushed;
        self->flushing = false;
        pthread_cond_broadcast(&self->changed);
    }
    pthread_mutex_unlock(&self->lock);
    s_thread_end(self);
    return NULL;
}

//  Starts the writer and the flusher, detached. Returns 0, or -1 with
//  errno EAGAIN: the sink has failed, and a thread that did start ends.
static int
s_threads_start(shoal_sink_t *self)
{
    void *(*bodies[2])(void *) = { s_writer, s_flusher };
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int started = 0;
    pthread_mutex_lock(&self->lock);
    for (; started < 2; started++) {
        pthread_t thread;
        self->threads++;
        if (pthread_create(&thread, &attributes, bodies[started], self) != 0) {
            self->threads--;
            break;
        }
    }
    if (started < 2) {
        //  The sink fails; a thread that started ends at once, and leaves
        //  the sink to the caller's destroy.
        self->ending = true;
        self->failed = EAGAIN;
    }
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
    pthread_attr_destroy(&attributes);
    self->threads_started = true;
    if (started == 2)
        return 0;
    errno = EAGAIN;
    return -1;
}

//  Hands the full current stage to the writer, started with the flusher
//  on the first (step 3), and turns to the other. Returns 0, or -1 with errno.
static int
s_stage_hand_over(shoal_sink_t *self)
{
    if (!self->threads_started && s_threads_start(self))
        return -1;
    if (s_threads_idle(self, false))
        return -1;
    pthread_mutex_lock(&self->lock);
    self->pending = self->current;
    self->pending_offset = self->handed;
    pthread_cond_broadcast(&self->changed);
    pthread_mutex_unlock(&self->lock);
    self->handed += self->staged;
    self->current ^= 1;
    self->staged = 0;
    return 0;
}

int
shoal_sink_write(shoal_sink_t *self, const void *data, size_t size)
{
    const uint8_t *from = (const uint8_t *) data;
    while (size) {
        uint8_t **stage = &self->stages[self->current];
        if (!*stage)
            *stage = s_stage_new(self->stage_bytes);
        size_t take = self->stage_bytes - self->staged;
        if (take > size)
            take = size;
        memcpy(*stage + self->staged, from, take);
        self->staged += take;
        self->size += take;
        from += take;
        size -= take;
        if (self->staged == self->stage_bytes && s_stage_hand_over(self))
            return -1;
    }
    return 0;
}

int
shoal_sink_sync(shoal_sink_t *self)
{
    //  A flush under way is waited for: its failure is the sink's.
    if (self->threads_started && s_threads_idle(self, true))
        return -1;
    if (self->staged) {
        size_t length = (self->staged + SINK_ALIGN - 1) / SINK_ALIGN * SINK_ALIGN;
        uint8_t *stage = self->stages[self->current];
        memset(stage + self->staged, 0, length - self->staged);
        if (s_stage_write(self, stage, length, self->staged, self->handed))
            return -1;
        self->handed += self->staged;
        self->staged = 0;
    }
    //  The padding goes again (step 4).
    if (self->direct && ftruncate(self->fd, (off_t) self->size) != 0)
        return -1;
    if (fdatasync(self->fd) != 0)
        return -1;
    pthread_mutex_lock(&self->lock);
    self->durable = self->size;
    pthread_mutex_unlock(&self->lock);
    return 0;
}

uint64_t
shoal_sink_size(const shoal_sink_t *self)
{
    return self->size;
}

uint64_t
shoal_sink_durable(shoal_sink_t *self)
{
    pthread_mutex_lock(&self->lock);
    uint64_t durable = self->durable;
    pthread_mutex_unlock(&self->lock);
    return durable;
}

bool
shoal_sink_direct(shoal_sink_t *self)
{
    if (self->threads_started)
        s_threads_idle(self, false);
    return self->direct;
}
