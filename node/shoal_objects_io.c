/*  shoal_objects_io: the objects' file work on their worker threads (an
    add's chunks and commit, reads, discards, and the look at and hash of
    an instance an open or a replicate takes, on the verifier), and the
    answers it comes back to.
*/
#include "shoal_objects_internal.h"
#include "shoal_alloc.h"

//  Under DATA/objects: removed instances' files, until the worker unlinks them
//  (a dot: the sweep's look at the files passes it by).
#define S_DISCARD_DIR ".discard"
//  How often the worker looks again at a hold (SHOAL_FAULT objects:io:hold).
#define S_HOLD_POLL_MS 20

// ---------------------------------------------------------------------------
//  File work on the objects' worker
//
//  A chunk of an add, an add's commit (its hash and sync) and a read touch
//  the disk, which may take long on a busy machine; the reactor never
//  does. It checks the request, hands the work to the worker thread, and
//  answers once the work comes back as an event (a late reply, as a
//  replicate's). The worker runs work in the order given, so one add's
//  chunks are written and hashed in order and its commit comes after the
//  last of them; the reactor counts the chunks it handed over (offset), so
//  a chunk checked after another is checked against where that one ends.
//  The look at an instance's file (a stat) and, when it must be, the hash
//  of its bytes for an open or a replicate run on a second thread, the
//  verifier, so that a forced check of a large instance holds up no add's
//  chunks; what waits for it is told as it comes back.

void
shoal_objects_io_destroy(void **item_p)
{
    shoal_objects_io_t *io = (shoal_objects_io_t *) *item_p;
    if (io) {
        shoal_envelope_destroy(&io->request);
        zframe_destroy(&io->routing_id);
        free(io->data);
        free(io->path);
        free(io->bytes);
        //  A verify never back (the node stops): what waited goes with it.
        if (io->waiter)
            io->forget(&io->waiter);
        if (io->upload && --io->upload->pending == 0 && io->upload->gone) {
            io->upload->gone = false;
            void *upload = io->upload;
            shoal_objects_upload_destroy(&upload);
        }
        free(io);
        *item_p = NULL;
    }
}

static int
s_io_fail(shoal_objects_io_t *io, const char *call, int error_no)
{
    io->call = call;
    io->error_no = error_no;
    return -1;
}

//  Hashes the file at IO's path with the algorithm of its checksum.
static void
s_io_hash(shoal_objects_io_t *io)
{
    int fd = open(io->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        s_io_fail(io, "open", errno);
        return;
    }
    shoal_hasher_t hasher;
    shoal_hasher_init(&hasher, (shoal_checksum_algorithm_t) shoal_checksum_algorithm(io->given.bytes,
                                                                                    io->given.size));
    uint8_t *buffer = (uint8_t *) shoal_malloc(OBJECTS_HASH_CHUNK);
    while (true) {
        ssize_t got = read(fd, buffer, OBJECTS_HASH_CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            s_io_fail(io, "read", errno);
        if (got <= 0)
            break;
        shoal_hasher_update(&hasher, buffer, (size_t) got);
        io->file_size += (uint64_t) got;
    }
    shoal_hasher_final(&hasher, &io->checksum);
    free(buffer);
    close(fd);
}

void
shoal_objects_io_run(void *item)
{
    shoal_objects_io_t *io = (shoal_objects_io_t *) item;
    //  A test holds the worker here to see the reactor serve meanwhile.
    while (shoal_fault_held("objects", "io"))
        zclock_sleep(S_HOLD_POLL_MS);
    if (io->kind == OBJECTS_IO_WRITE) {
        //  The sink waits for the disk, as a replica's receiver does: a
        //  disk slower than the add holds the worker, and so the answers.
        if (shoal_sink_write(io->upload->sink, io->data, io->size) == 0)
            shoal_hasher_update(&io->upload->hash, io->data, io->size);
        else
            s_io_fail(io, "write", errno);
    }
    else
    if (io->kind == OBJECTS_IO_COMMIT) {
        shoal_hasher_final(&io->upload->hash, &io->checksum);
        if (shoal_sink_sync(io->upload->sink) != 0)
            s_io_fail(io, "sync", errno);
    }
    else
    if (io->kind == OBJECTS_IO_DISCARD) {
        if (unlink(io->path) != 0 && errno != ENOENT)
            s_io_fail(io, "unlink", errno);
    }
    else
    if (io->kind == OBJECTS_IO_VERIFY) {
        //  The look at the file is a stat, which may wait on a busy disk
        //  as long as a read: it is the verifier's too, not the reactor's.
        io->look = shoal_objects_file_look(io->path, io->size, io->modified_ms, &io->given, io->force, io->why,
                                           sizeof io->why);
        if (io->look == OBJECTS_LOOK_HASH)
            s_io_hash(io);
    }
    else {
        int fd = open(io->path, O_RDONLY | O_CLOEXEC);
        struct stat info;
        if (fd < 0 || fstat(fd, &info) != 0) {
            s_io_fail(io, "open", errno);
            if (fd >= 0)
                close(fd);
            return;
        }
        io->file_size = (uint64_t) info.st_size;
        size_t length = io->size;
        if (io->offset >= io->file_size)
            length = 0;
        else
        if (io->file_size - io->offset < length)
            length = (size_t) (io->file_size - io->offset);
        io->bytes = length ? (uint8_t *) shoal_malloc(length) : NULL;
        while (io->got < length) {
            ssize_t count = pread(fd, io->bytes + io->got, length - io->got, (off_t) (io->offset + io->got));
            if (count < 0 && errno == EINTR)
                continue;
            if (count <= 0) {
                s_io_fail(io, "read", count < 0 ? errno : 0);
                break;
            }
            io->got += (size_t) count;
        }
        close(fd);
    }
}

void
shoal_objects_io_give(shoal_objects_t *self, shoal_objects_io_t *io, const shoal_envelope_t *request, zframe_t *routing_id)
{
    io->request = shoal_envelope_new(request->type, request->request_id);
    io->routing_id = zframe_dup(routing_id);
    if (io->upload)
        io->upload->pending++;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->worker, io);
}

void
shoal_objects_verify_give(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, bool force,
                          void *waiter, shoal_objects_verified_fn *verified, void (*forget) (void **waiter_p))
{
    shoal_objects_io_t *io = (shoal_objects_io_t *) zmalloc(sizeof *io);
    io->kind = OBJECTS_IO_VERIFY;
    io->instance_id = instance->instance_id;
    io->size = instance->size;
    io->force = force;
    io->modified_ms = instance->modified_ms;
    shoal_checksum_set(&io->given, instance->checksum, instance->checksum_size);
    io->path = shoal_objects_instance_path(self, instance->storage_id, instance->instance_id);
    io->waiter = waiter;
    io->verified = verified;
    io->forget = forget;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->verifier, io);
}

//  Has the worker unlink PATH (taken).
static void
s_discard_give(shoal_objects_t *self, char *path)
{
    shoal_objects_io_t *io = (shoal_objects_io_t *) zmalloc(sizeof *io);
    io->kind = OBJECTS_IO_DISCARD;
    io->path = path;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->worker, io);
}

int
shoal_objects_discard(shoal_objects_t *self, const char *path, uint64_t sid, uint64_t iid)
{
    if (!self->worker)
        return -1;
    char *dir = zsys_sprintf("%s/" S_DISCARD_DIR, self->dir);
    char *aside = zsys_sprintf("%s/%016" PRIx64 "-%016" PRIx64, dir, sid, iid);
    bool moved = (mkdir(dir, 0700) == 0 || errno == EEXIST) && rename(path, aside) == 0;
    bool absent = !moved && errno == ENOENT && access(path, F_OK) != 0;
    free(dir);
    if (moved)
        s_discard_give(self, aside);
    else
        free(aside);
    return moved || absent ? 0 : -1;
}

void
shoal_objects_discard_leftovers(shoal_objects_t *self)
{
    char *dir = zsys_sprintf("%s/" S_DISCARD_DIR, self->dir);
    DIR *handle = opendir(dir);
    struct dirent *entry;
    while (handle && (entry = readdir(handle)))
        if (entry->d_name[0] != '.')
            s_discard_give(self, zsys_sprintf("%s/%s", dir, entry->d_name));
    if (handle)
        closedir(handle);
    free(dir);
}

//  What failed in IO, in words (the caller frees it).
static char *
s_io_error(const shoal_objects_io_t *io, const char *what)
{
    return zsys_sprintf("cannot %s %s: %s", io->call, what, io->error_no ? strerror(io->error_no) : "it came short");
}

//  Whether the bytes verify IO hashed are its instance's: 0, or 1 with WHY.
static int
s_io_verdict(const shoal_objects_io_t *io, char *why, size_t why_size)
{
    if (io->look == OBJECTS_LOOK_GOOD)
        return 0;
    if (io->look == OBJECTS_LOOK_BAD) {
        snprintf(why, why_size, "%s", io->why);
        return 1;
    }
    if (io->call) {
        char *error = s_io_error(io, io->path);
        snprintf(why, why_size, "%s", error);
        free(error);
        return 1;
    }
    if (io->file_size != io->size) {
        snprintf(why, why_size, "its file %s holds %" PRIu64 " bytes, not %zu", io->path, io->file_size, io->size);
        return 1;
    }
    if (!shoal_checksum_equal(&io->checksum, &io->given)) {
        snprintf(why, why_size, "its bytes in %s do not match its checksum", io->path);
        return 1;
    }
    return 0;
}

//  The reply to a chunk IO wrote.
static shoal_envelope_t *
s_io_written(shoal_objects_t *self, shoal_objects_io_t *io)
{
    shoal_objects_upload_t *upload = io->upload;
    if (upload->gone)
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the add of instance %016" PRIx64 " was "
                                    "given up", io->instance_id);
    if (io->call) {
        char *error = s_io_error(io, "the instance's file");
        if (!upload->failed)
            upload->failed = shoal_strdup(error);
        uint32_t status = io->error_no == ENOSPC ? SHOAL_STATUS_NO_SPACE : SHOAL_STATUS_INTERNAL;
        shoal_envelope_t *reply = shoal_envelope_reply(io->request, status, "instance %016" PRIx64 ": %s",
                                                       io->instance_id, error);
        free(error);
        return reply;
    }
    shoal_envelope_t *reply = shoal_envelope_reply(io->request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_chunk_t *answer = (shoal_msg_object_chunk_t *) shoal_envelope_new_body(reply);
    answer->instance_id = io->instance_id;
    answer->offset = io->offset + io->size;
    return reply;
}

//  The reply to a commit whose bytes IO hashed and synced: steps 2 and 3
//  of the add, or its end.
static shoal_envelope_t *
s_io_committed(shoal_objects_t *self, shoal_objects_io_t *io)
{
    shoal_objects_upload_t *upload = io->upload;
    if (upload->gone)
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the add of instance %016" PRIx64 " was "
                                    "given up while its bytes were synced", io->instance_id);
    upload->committing = false;
    if (io->call) {
        char *error = s_io_error(io, "the instance's file");
        shoal_objects_upload_abort(self, upload);
        return shoal_objects_failed(io->request, self, error);
    }
    if (io->given.size && !shoal_checksum_equal(&io->checksum, &io->given)) {
        const char *algorithm = shoal_checksum_algorithm_name(upload->hash.algorithm);
        shoal_objects_upload_abort(self, upload);
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the bytes that arrived do not match the "
                                    "checksum sent with the commit (%s, as the add named): the add is given up",
                                    algorithm);
    }
    shoal_sink_destroy(&upload->sink);
    return shoal_objects_upload_commit(self, io->request, upload, &io->checksum);
}

//  The reply to a read IO made.
static shoal_envelope_t *
s_io_read(shoal_objects_t *self, shoal_objects_io_t *io)
{
    if (io->call) {
        char *error = s_io_error(io, io->path);
        return shoal_objects_failed(io->request, self, error);
    }
    shoal_envelope_t *reply = shoal_envelope_reply(io->request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_chunk_t *answer = (shoal_msg_object_chunk_t *) shoal_envelope_new_body(reply);
    answer->instance_id = io->instance_id;
    answer->offset = io->offset;
    answer->data = io->bytes;
    io->bytes = NULL;
    answer->data_size = io->got;
    answer->length = (uint32_t) io->got;
    answer->last = io->offset + io->got >= io->file_size;
    return reply;
}

int
shoal_objects_worker_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    void *pointer = NULL;
    if (zsock_recv(sock, "p", &pointer) || !pointer)
        return 0;
    shoal_objects_io_t *io = (shoal_objects_io_t *) pointer;
    void *handle = zlistx_find(self->ios, io);
    assert(handle);
    if (io->kind == OBJECTS_IO_DISCARD) {
        if (io->call)
            zsys_warning("objects: cannot remove %s (%s: %s); the next start tries again", io->path, io->call,
                         strerror(io->error_no));
        zlistx_delete(self->ios, handle);
        return 0;
    }
    if (io->kind == OBJECTS_IO_VERIFY) {
        char why[OBJECTS_ERROR_MAX];
        void *waiter = io->waiter;
        io->waiter = NULL;
        io->verified(self, waiter, s_io_verdict(io, why, sizeof why) ? why : NULL);
        zlistx_delete(self->ios, handle);
        return 0;
    }
    shoal_envelope_t *reply = io->kind == OBJECTS_IO_WRITE ? s_io_written(self, io)
                            : io->kind == OBJECTS_IO_COMMIT ? s_io_committed(self, io)
                            : s_io_read(self, io);
    shoal_objects_reply_later(self, io->routing_id, &reply);
    zlistx_delete(self->ios, handle);
    return 0;
}
