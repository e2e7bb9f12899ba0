/*  shoal_transfer: the receiver and sender actors. See shoal_transfer.h. */
#include "shoal_transfer.h"
#include "shoal_auth.h"
#include "shoal_fault.h"
#include "shoal_gate.h"
#include "shoal_sink.h"
#include "shoal_alloc.h"
#include "shoal_io.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_PAGE SHOAL_IMAGE_PAGE
//  Chunk buffers of copied pages kept for reuse: the window's chunks in
//  flight, and a few more.
#define S_POOL_MAX (SHOAL_TRANSFER_WINDOW + 4)
#define S_CHUNK_BYTES ((size_t) SHOAL_TRANSFER_CHUNK_PAGES * S_PAGE)
//  Most runs in one chunk's head.
#define S_RUNS_MAX SHOAL_TRANSFER_CHUNK_PAGES
#define S_HEAD_MAX (9 + S_RUNS_MAX * 8)
//  The rate assumed until enough bytes were sent to measure one.
#define S_RATE_GUESS (300ull * 1000 * 1000)
#define S_RATE_MIN_BYTES (4ull * 1024 * 1024)
//  Pausing the guest, the last acknowledgement, the commit and starting
//  the guest on the target, on top of the final round's bytes (10-15 ms
//  measured here with an empty final round).
#define S_FINAL_OVERHEAD_MS 10
//  Rounds in a row that may fail to shrink before the move gives up.
#define S_STALLS_MAX 2
//  The share of the budget the final round's estimate aims at while the
//  rounds still shrink fast (see s_sender_run).
#define S_FINAL_SHARE_PERCENT 50
//  How many times the source's image is synced before the pause (see
//  s_source_writeback): after as many syncs that the guest outran, the
//  final round starts without one.
#define S_FLUSHES_MAX 2
//  How often a pre-copy round starts the writeback of what the guest
//  dirtied in its image (a second of a guest writing 50 MB/s).
#define S_WRITEBACK_EVERY_US 1000000
//  How long a start of that writeback may hold the sender, how long the
//  one before the pause may (see s_source_writeback), and the window it
//  starts at a time.
#define S_WRITEBACK_SLICE_US 50000
#define S_FLUSH_SLICE_US 1000000
#define S_WRITEBACK_WINDOW ((uint64_t) 16 * 1024 * 1024)
//  Auto-converge: delta rounds in a row that do not shrink enough before
//  the first throttle step.
#define S_SLOW_ROUNDS 2
//  A FILE chunk's head before the path: u32 round, u64 offset.
#define S_FILE_HEAD 12
//  The longest path of a round file.
#define S_FILE_PATH_MAX 1024
//  How many files the sender keeps open for a round: one at a time.
#define S_FILE_CHUNK_BYTES ((size_t) SHOAL_TRANSFER_CHUNK_PAGES * SHOAL_IMAGE_PAGE)
//  How long teardown waits for libzmq to let go of the chunks it holds.
#define S_RELEASE_WAIT_MS 5000
#define S_POLL_MS 100
//  A receiver starts writing back every this many bytes of an image's
//  memory.
#define S_WRITE_BEHIND_BYTES ((uint64_t) 32 * 1024 * 1024)
//  An object's chunk is hashed and staged in pieces of this many bytes,
//  which stay in a core's cache between the two.
#define S_OBJECT_PIECE_BYTES ((size_t) 64 * 1024)

static void
s_put_u32(uint8_t *at, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        at[i] = (uint8_t) (value >> (8 * i));
}

static void
s_put_u64(uint8_t *at, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        at[i] = (uint8_t) (value >> (8 * i));
}

static uint32_t
s_get_u32(const uint8_t *at)
{
    uint32_t value = 0;
    for (int i = 0; i < 4; i++)
        value |= (uint32_t) at[i] << (8 * i);
    return value;
}

static uint64_t
s_get_u64(const uint8_t *at)
{
    uint64_t value = 0;
    for (int i = 0; i < 8; i++)
        value |= (uint64_t) at[i] << (8 * i);
    return value;
}

// ---------------------------------------------------------------------------
//  Receiver

struct _shoal_receiver_t {
    zactor_t *actor;
    char *endpoint;
};

typedef struct {
    const char *bind;
    zcert_t *cluster;
    const shoal_gate_options_t *gate;   //  the caps and deadline of its connections
    int port;                   //  set by the actor once bound (-1: failed)
    char error[256];
} s_receiver_args_t;

//  One move being received.
typedef struct {
    char *move_id;
    char *dir;                  //  where the image is, or the round files
    shoal_image_t *image;       //  NULL for a move in files
    bool files;                 //  a move in files
    int fd;                     //  a move in files: the file being written (-1: none)
    char *fd_path;              //  its path under DIR
    zlistx_t *written;          //  paths written this round, synced at its end
    uint64_t pages;             //  pages of the current round (bytes, in files)
    uint64_t unsynced;          //  an image: bytes of memory written since its writeback last started
    uint32_t owed;              //  chunks written and not yet given back as credit
    int64_t told_ms;            //  monotonic ms the node was last told chunks arrive
    char failed[256];           //  set once a chunk was refused
    //  An object's bytes: one file, written in order and checksummed as
    //  it arrives.
    bool object;
    shoal_sink_t *sink;         //  the object's file
    uint64_t object_size;       //  the bytes to come
    shoal_checksum_t checksum;  //  what they must hash to (its algorithm too)
    shoal_hasher_t hash;        //  of what arrived so far
} s_session_t;

static void
s_session_file_close(s_session_t *session)
{
    if (session->fd >= 0)
        close(session->fd);
    session->fd = -1;
    shoal_sink_destroy(&session->sink);
    free(session->fd_path);
    session->fd_path = NULL;
}

static void
s_session_destroy(void **item_p)
{
    s_session_t *session = (s_session_t *) *item_p;
    if (session) {
        s_session_file_close(session);
        zlistx_destroy(&session->written);
        shoal_image_destroy(&session->image);
        free(session->move_id);
        free(session->dir);
        free(session);
        *item_p = NULL;
    }
}

static void
s_receiver_emit(zsock_t *pipe, const shoal_receiver_event_t *event)
{
    zsock_send(pipe, "sb", "EVENT", event, sizeof *event);
}

static void
s_receiver_reply(zsock_t *router, zframe_t *routing_id, const char *kind, const char *move_id,
                 const void *data, size_t size)
{
    zmsg_t *msg = zmsg_new();
    zframe_t *to = zframe_dup(routing_id);
    zmsg_append(msg, &to);
    zmsg_addstr(msg, kind);
    zmsg_addstr(msg, move_id);
    zmsg_addmem(msg, data, size);
    zmsg_send(&msg, router);
}

//  Writes the pages of one chunk into SESSION's image. Returns 0, or -1
//  with ERROR saying what was wrong with it.
static int
s_chunk_apply(s_session_t *session, zframe_t *head, zframe_t *data, char *error, size_t error_size)
{
    const uint8_t *bytes = zframe_data(head);
    size_t size = zframe_size(head);
    if (size < 9) {
        snprintf(error, error_size, "chunk head of %zu bytes", size);
        return -1;
    }
    uint8_t object = bytes[4];
    uint32_t runs = s_get_u32(bytes + 5);
    if (object > SHOAL_IMAGE_DISK || runs > S_RUNS_MAX || size != 9 + (size_t) runs * 8) {
        snprintf(error, error_size, "chunk head is malformed (object %u, %u runs, %zu bytes)", object, runs, size);
        return -1;
    }
    size_t limit = shoal_image_pages(session->image, (shoal_image_object_t) object);
    size_t expected = 0;
    for (uint32_t i = 0; i < runs; i++) {
        uint64_t first = s_get_u32(bytes + 9 + i * 8);
        uint64_t count = s_get_u32(bytes + 13 + i * 8);
        if (count == 0 || first + count > limit) {
            snprintf(error, error_size, "chunk run %" PRIu64 "+%" PRIu64 " is outside %zu pages", first, count, limit);
            return -1;
        }
        expected += count * S_PAGE;
    }
    if (zframe_size(data) != expected) {
        snprintf(error, error_size, "chunk carries %zu bytes for %zu", zframe_size(data), expected);
        return -1;
    }
    const uint8_t *source = zframe_data(data);
    for (uint32_t i = 0; i < runs; i++) {
        size_t first = s_get_u32(bytes + 9 + i * 8);
        size_t count = s_get_u32(bytes + 13 + i * 8);
        char *why = NULL;
        if (shoal_image_write_pages(session->image, (shoal_image_object_t) object, first, count, source, &why)) {
            snprintf(error, error_size, "%s", why);
            free(why);
            return -1;
        }
        source += count * S_PAGE;
        session->pages += count;
        if (object == SHOAL_IMAGE_MEMORY)
            session->unsynced += count * S_PAGE;
    }
    //  Write-behind: the disk starts on the memory that arrived while the
    //  rest comes (see s_image_round_sync).
    if (session->unsynced >= S_WRITE_BEHIND_BYTES) {
        char *why = NULL;
        if (shoal_image_sync(session->image, SHOAL_IMAGE_MEMORY, false, &why))
            zsys_warning("transfer: %s", why);
        free(why);
        session->unsynced = 0;
    }
    return 0;
}

//  The end of a round of an image: its disk is made durable (every round:
//  the final sync, inside the downtime, then has only the final round to
//  write). Its memory is made durable at the end of every round before the
//  final one, and written behind while it arrives: not for its own sake
//  (a copy of a running guest's memory survives a crash of either process
//  in the page cache, and the guest's own would not outlive its machine's
//  crash either), but so that the downtime does not wait for it. Where the
//  store shares the disk, the commit's synced write (the source's, inside
//  the downtime) flushes the disk's cache, and waited there behind every
//  byte of the image still to be written back: 0.1-0.9 s of node downtime
//  in 4 of 5 moves of an idle 2 GiB guest here, 13-32 ms since. Written
//  and flushed during the rounds, while the guest runs, they leave the
//  final round's pages alone to the commit. The final round's memory is
//  not synced: that would put it back inside the downtime (here fdatasync
//  of a 13-16 MB final round took 200-320 ms). Returns 0, or -1 with
//  *ERROR_P.
static int
s_image_round_sync(s_session_t *session, bool final, char **error_p)
{
    if (!final) {
        session->unsynced = 0;
        if (shoal_image_sync(session->image, SHOAL_IMAGE_MEMORY, true, error_p))
            return -1;
    }
    return shoal_image_sync(session->image, SHOAL_IMAGE_DISK, true, error_p);
}

static int
s_remove_one(const char *path, const struct stat *info, int flag, struct FTW *ftw)
{
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int
shoal_transfer_files_remove(const char *dir)
{
    struct stat info;
    if (lstat(dir, &info) != 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(dir, s_remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

//  True when PATH names something under a directory: relative, with no
//  empty, "." or ".." part.
static bool
s_path_inside(const char *path)
{
    if (!*path || *path == '/')
        return false;
    for (const char *part = path; part; ) {
        const char *slash = strchr(part, '/');
        size_t length = slash ? (size_t) (slash - part) : strlen(part);
        if (length == 0 || (length == 1 && part[0] == '.') || (length == 2 && part[0] == '.' && part[1] == '.'))
            return false;
        part = slash ? slash + 1 : NULL;
    }
    return true;
}

//  Makes the directories above FULL, a file's path. Returns 0 or -1.
static int
s_parents_make(const char *full)
{
    char *copy = shoal_strdup(full);
    char *slash = strrchr(copy, '/');
    int rc = 0;
    if (slash) {
        *slash = '\0';
        rc = zsys_dir_create("%s", copy);
    }
    free(copy);
    return rc;
}

//  Writes one FILE chunk into SESSION's directory. Returns 0, or -1 with
//  ERROR saying what was wrong with it.
static int
s_file_chunk_apply(s_session_t *session, zframe_t *head, zframe_t *data, char *error, size_t error_size)
{
    const uint8_t *bytes = zframe_data(head);
    size_t size = zframe_size(head);
    if (!session->files) {
        snprintf(error, error_size, "a file chunk for a move of pages");
        return -1;
    }
    if (size <= S_FILE_HEAD || size - S_FILE_HEAD > S_FILE_PATH_MAX) {
        snprintf(error, error_size, "file chunk head of %zu bytes", size);
        return -1;
    }
    uint64_t offset = s_get_u64(bytes + 4);
    char path[S_FILE_PATH_MAX + 1];
    memcpy(path, bytes + S_FILE_HEAD, size - S_FILE_HEAD);
    path[size - S_FILE_HEAD] = '\0';
    if (strlen(path) != size - S_FILE_HEAD || !s_path_inside(path)) {
        snprintf(error, error_size, "file chunk path '%.120s' is not a relative path inside the move's directory",
                 path);
        return -1;
    }
    char *full = zsys_sprintf("%s/%s", session->dir, path);
    if (offset == 0 || !session->fd_path || !streq(session->fd_path, path)) {
        s_session_file_close(session);
        //  A file's first chunk makes it anew: a later round may carry it again.
        int flags = O_WRONLY | O_CLOEXEC | (offset == 0 ? O_CREAT | O_TRUNC : 0);
        if (offset == 0 && s_parents_make(full)) {
            snprintf(error, error_size, "cannot make the directory of %.120s: %.80s", path, strerror(errno));
            free(full);
            return -1;
        }
        session->fd = open(full, flags, 0600);
        if (session->fd < 0) {
            snprintf(error, error_size, "cannot open %.120s: %.80s", path, strerror(errno));
            free(full);
            return -1;
        }
        session->fd_path = shoal_strdup(path);
        if (!zlistx_find(session->written, path))
            zlistx_add_end(session->written, path);
    }
    if (shoal_pwrite_all(session->fd, zframe_data(data), zframe_size(data), offset)) {
        snprintf(error, error_size, "cannot write %.120s: %.80s", path, strerror(errno));
        free(full);
        return -1;
    }
    session->pages += zframe_size(data);
    free(full);
    return 0;
}

//  Writes one OBJECT chunk (u64 offset head) into SESSION's file, in
//  order, and hashes it. Returns 0, or -1 with ERROR.
static int
s_object_chunk_apply(s_session_t *session, zframe_t *head, zframe_t *data, char *error, size_t error_size)
{
    if (!session->object) {
        snprintf(error, error_size, "an object chunk for a move");
        return -1;
    }
    if (zframe_size(head) != 8) {
        snprintf(error, error_size, "object chunk head of %zu bytes", zframe_size(head));
        return -1;
    }
    uint64_t offset = s_get_u64(zframe_data(head));
    size_t size = zframe_size(data);
    if (offset != session->pages || offset + size > session->object_size) {
        snprintf(error, error_size, "object chunk of %zu bytes at %" PRIu64 ": %" PRIu64 " of %" PRIu64
                 " bytes arrived so far", size, offset, session->pages, session->object_size);
        return -1;
    }
    //  Hashed and staged a piece at a time: the copy reads what the hash
    //  just brought into the cache. The sink's wait for the disk holds the
    //  credit back, so a disk slower than the stream slows the sender.
    const uint8_t *bytes = zframe_data(data);
    for (size_t at = 0; at < size; at += S_OBJECT_PIECE_BYTES) {
        size_t piece = size - at < S_OBJECT_PIECE_BYTES ? size - at : S_OBJECT_PIECE_BYTES;
        shoal_hasher_update(&session->hash, bytes + at, piece);
        if (shoal_sink_write(session->sink, bytes + at, piece)) {
            snprintf(error, error_size, "cannot write %.160s: %.80s", session->dir, strerror(errno));
            return -1;
        }
    }
    session->pages += size;
    return 0;
}

//  An object's END: every byte arrived, they hash to the checksum, and
//  they are durable. Returns 0, or -1 with ERROR.
static int
s_object_finish(s_session_t *session, char *error, size_t error_size)
{
    shoal_checksum_t checksum;
    shoal_hasher_final(&session->hash, &checksum);
    if (session->pages != session->object_size) {
        snprintf(error, error_size, "%" PRIu64 " of %" PRIu64 " bytes arrived", session->pages, session->object_size);
        return -1;
    }
    if (!shoal_checksum_equal(&checksum, &session->checksum)) {
        snprintf(error, error_size, "the %" PRIu64 " bytes that arrived do not match the object's checksum",
                 session->pages);
        return -1;
    }
    if (shoal_sink_sync(session->sink) != 0) {
        snprintf(error, error_size, "cannot sync %.160s: %.80s", session->dir, strerror(errno));
        return -1;
    }
    return 0;
}

//  Makes the files SESSION's round wrote durable (and the directory that
//  names them). Returns 0, or -1 with *ERROR_P.
static int
s_files_sync(s_session_t *session, char **error_p)
{
    s_session_file_close(session);
    int rc = 0;
    for (const char *path = (const char *) zlistx_first(session->written); path && rc == 0;
         path = (const char *) zlistx_next(session->written)) {
        char *full = zsys_sprintf("%s/%s", session->dir, path);
        int fd = open(full, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fdatasync(fd) != 0) {
            *error_p = zsys_sprintf("cannot sync %s: %s", full, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
        free(full);
    }
    zlistx_purge(session->written);
    int fd = open(session->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    return rc;
}

//  Handles one message on the receiver's router.
static void
s_receiver_message(zsock_t *router, zsock_t *pipe, zhashx_t *sessions)
{
    zmsg_t *msg = zmsg_recv(router);
    if (!msg)
        return;
    zframe_t *routing_id = zmsg_pop(msg);
    zframe_t *kind = zmsg_first(msg);
    const char *role = kind ? zframe_meta(kind, SHOAL_META_ROLE) : NULL;
    char *kind_text = zmsg_popstr(msg);
    char *move_id = zmsg_popstr(msg);
    if (!role || !streq(role, SHOAL_ROLE_NODE)) {
        zsys_warning("transfer: refused a %s message from a caller without the node role",
                     kind_text ? kind_text : "malformed");
        goto done;
    }
    if (!kind_text || !move_id) {
        zsys_warning("transfer: dropped a malformed message");
        goto done;
    }
    s_session_t *session = (s_session_t *) zhashx_lookup(sessions, move_id);
    if (!session) {
        const char *text = "no such move on this node";
        s_receiver_reply(router, routing_id, "X", move_id, text, strlen(text));
        goto done;
    }
    if (*session->failed) {
        s_receiver_reply(router, routing_id, "X", move_id, session->failed, strlen(session->failed));
        goto done;
    }
    if (streq(kind_text, "P")) {
        //  The source is at work on its next round (a capture).
        if (zclock_mono() - session->told_ms >= SHOAL_TRANSFER_PROGRESS_MS) {
            session->told_ms = zclock_mono();
            shoal_receiver_event_t event = { .progress = true, .pages = session->pages };
            snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
            s_receiver_emit(pipe, &event);
        }
    }
    else
    if ((streq(kind_text, "C") || streq(kind_text, "F") || streq(kind_text, "O")) && zmsg_size(msg) == 2) {
        zframe_t *head = zmsg_first(msg);
        zframe_t *data = zmsg_next(msg);
        char error[256];
        int applied = -1;
        if (streq(kind_text, "F"))
            applied = s_file_chunk_apply(session, head, data, error, sizeof error);
        else
        if (streq(kind_text, "O"))
            applied = s_object_chunk_apply(session, head, data, error, sizeof error);
        else
        if (session->object)
            snprintf(error, sizeof error, "a page chunk for an object");
        else
        if (session->files)
            snprintf(error, sizeof error, "a page chunk for a move in files");
        else
            applied = s_chunk_apply(session, head, data, error, sizeof error);
        if (applied) {
            snprintf(session->failed, sizeof session->failed, "%s", error);
            shoal_receiver_event_t event = { .round = 0 };
            snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
            snprintf(event.error, sizeof event.error, "%s", error);
            s_receiver_emit(pipe, &event);
            s_receiver_reply(router, routing_id, "X", move_id, error, strlen(error));
        }
        else {
            if (++session->owed >= SHOAL_TRANSFER_CREDIT_BATCH) {
                uint8_t credit[4];
                s_put_u32(credit, session->owed);
                session->owed = 0;
                s_receiver_reply(router, routing_id, "K", move_id, credit, sizeof credit);
            }
            //  The node judges the source by this, not by how long a round lasts.
            if (zclock_mono() - session->told_ms >= SHOAL_TRANSFER_PROGRESS_MS) {
                session->told_ms = zclock_mono();
                shoal_receiver_event_t event = { .progress = true, .pages = session->pages };
                snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
                s_receiver_emit(pipe, &event);
            }
        }
    }
    else
    if (streq(kind_text, "E") && zmsg_size(msg) == 1 && zframe_size(zmsg_first(msg)) == 13) {
        const uint8_t *end = zframe_data(zmsg_first(msg));
        shoal_receiver_event_t event = { .round = s_get_u32(end), .final = end[4] != 0, .pages = session->pages };
        snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
        if (!session->object)
            session->pages = 0;
        if (s_get_u64(end + 5) != event.pages)
            snprintf(event.error, sizeof event.error, "round %u: the source sent %" PRIu64 " pages, %" PRIu64
                     " arrived", event.round, s_get_u64(end + 5), event.pages);
        shoal_fault_point("target", event.final ? "final" : "round", event.round);
        char *error = NULL;
        uint8_t ack[4];
        s_put_u32(ack, event.round);
        int64_t sync_started = zclock_usecs();
        //  What a round must have durable before it is acknowledged:
        //  s_image_round_sync for an image, every file for a move in files,
        //  the whole object for one.
        if (!*event.error && session->object) {
            char why[256];
            if (s_object_finish(session, why, sizeof why))
                snprintf(event.error, sizeof event.error, "%s", why);
        }
        else
        if (!*event.error && session->files && s_files_sync(session, &error))
            snprintf(event.error, sizeof event.error, "%s", error);
        else
        if (!*event.error && !session->files && !session->object && s_image_round_sync(session, event.final, &error))
            snprintf(event.error, sizeof event.error, "%s", error);
        event.sync_us = (uint64_t) (zclock_usecs() - sync_started);
        if (*event.error)
            s_receiver_reply(router, routing_id, "X", move_id, event.error, strlen(event.error));
        else
            s_receiver_reply(router, routing_id, "A", move_id, ack, sizeof ack);
        free(error);
        s_receiver_emit(pipe, &event);
    }
    else
        zsys_warning("transfer: dropped a malformed '%s' message for move %s", kind_text, move_id);
done:
    free(kind_text);
    free(move_id);
    zframe_destroy(&routing_id);
    zmsg_destroy(&msg);
}

//  Handles a command from the node. Returns -1 to stop.
static int
s_receiver_command(zsock_t *pipe, zhashx_t *sessions)
{
    zmsg_t *msg = zmsg_recv(pipe);
    if (!msg)
        return -1;
    char *command = zmsg_popstr(msg);
    int rc = 0;
    if (!command || streq(command, "$TERM"))
        rc = -1;
    else
    if (streq(command, "PREPARE")) {
        char *move_id = zmsg_popstr(msg);
        char *dir = zmsg_popstr(msg);
        char *memory = zmsg_popstr(msg);
        char *disk = zmsg_popstr(msg);
        char *pages = zmsg_popstr(msg);
        char *blocks = zmsg_popstr(msg);
        char *memory_dir = zmsg_popstr(msg);
        if (move_id && dir && memory && disk && pages && blocks && memory_dir) {
            shoal_receiver_event_t event = { .prepared = true };
            snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
            char *error = NULL;
            shoal_image_remove(dir);
            shoal_image_t *image = NULL;
            if (shoal_image_create_sparse_in(dir, memory_dir, strtoull(memory, NULL, 10), strtoull(disk, NULL, 10),
                                             &error) == 0)
                image = shoal_image_open(dir, &error);
            if (image && (shoal_image_pages(image, SHOAL_IMAGE_MEMORY) != strtoull(pages, NULL, 10)
                      ||  shoal_image_pages(image, SHOAL_IMAGE_DISK) != strtoull(blocks, NULL, 10))) {
                error = zsys_sprintf("%zu pages and %zu blocks here, %s and %s at the source",
                                     shoal_image_pages(image, SHOAL_IMAGE_MEMORY),
                                     shoal_image_pages(image, SHOAL_IMAGE_DISK), pages, blocks);
                shoal_image_destroy(&image);
            }
            if (image) {
                s_session_t *session = (s_session_t *) zmalloc(sizeof *session);
                session->move_id = shoal_strdup(move_id);
                session->dir = shoal_strdup(dir);
                session->image = image;
                session->fd = -1;
                session->written = zlistx_new();
                zhashx_update(sessions, move_id, session);
            }
            else
                snprintf(event.error, sizeof event.error, "cannot prepare the image: %s", error ? error : "unknown");
            free(error);
            s_receiver_emit(pipe, &event);
        }
        free(move_id);
        free(dir);
        free(memory);
        free(disk);
        free(pages);
        free(blocks);
        free(memory_dir);
    }
    else
    if (streq(command, "PREPARE-FILES")) {
        char *move_id = zmsg_popstr(msg);
        char *dir = zmsg_popstr(msg);
        if (move_id && dir) {
            shoal_receiver_event_t event = { .prepared = true };
            snprintf(event.move_id, sizeof event.move_id, "%s", move_id);
            if (shoal_transfer_files_remove(dir) || zsys_dir_create("%s", dir))
                snprintf(event.error, sizeof event.error, "cannot make %s: %s", dir, strerror(errno));
            else {
                s_session_t *session = (s_session_t *) zmalloc(sizeof *session);
                session->move_id = shoal_strdup(move_id);
                session->dir = shoal_strdup(dir);
                session->files = true;
                session->fd = -1;
                session->written = zlistx_new();
                zlistx_set_destructor(session->written, (zlistx_destructor_fn *) zstr_free);
                zlistx_set_duplicator(session->written, (zlistx_duplicator_fn *) shoal_strdup);
                zlistx_set_comparator(session->written, (zlistx_comparator_fn *) strcmp);
                zhashx_update(sessions, move_id, session);
            }
            s_receiver_emit(pipe, &event);
        }
        free(move_id);
        free(dir);
    }
    else
    if (streq(command, "PREPARE-OBJECT")) {
        char *id = zmsg_popstr(msg);
        char *path = zmsg_popstr(msg);
        char *size = zmsg_popstr(msg);
        zframe_t *checksum = zmsg_pop(msg);
        shoal_checksum_t expected = { .size = 0 };
        if (checksum)
            shoal_checksum_set(&expected, zframe_data(checksum), zframe_size(checksum));
        if (id && path && size && expected.size) {
            shoal_receiver_event_t event = { .prepared = true };
            snprintf(event.move_id, sizeof event.move_id, "%s", id);
            uint64_t object_size = strtoull(size, NULL, 10);
            shoal_sink_t *sink = shoal_sink_new(path, false, object_size);
            if (!sink)
                snprintf(event.error, sizeof event.error, "cannot make %s: %s", path, strerror(errno));
            else {
                s_session_t *session = (s_session_t *) zmalloc(sizeof *session);
                session->move_id = shoal_strdup(id);
                session->dir = shoal_strdup(path);
                session->object = true;
                session->object_size = object_size;
                session->checksum = expected;
                shoal_hasher_init(&session->hash, (shoal_checksum_algorithm_t) shoal_checksum_algorithm(
                                  expected.bytes, expected.size));
                session->fd = -1;
                session->sink = sink;
                session->written = zlistx_new();
                zhashx_update(sessions, id, session);
            }
            s_receiver_emit(pipe, &event);
        }
        free(id);
        free(path);
        free(size);
        zframe_destroy(&checksum);
    }
    else
    if (streq(command, "FORGET")) {
        char *move_id = zmsg_popstr(msg);
        char *remove = zmsg_popstr(msg);
        s_session_t *session = move_id ? (s_session_t *) zhashx_lookup(sessions, move_id) : NULL;
        if (session && remove && streq(remove, "remove")) {
            s_session_file_close(session);
            shoal_image_destroy(&session->image);
            if (session->object)
                unlink(session->dir);
            else
            if (session->files)
                shoal_transfer_files_remove(session->dir);
            else
                shoal_image_remove(session->dir);
        }
        if (move_id)
            zhashx_delete(sessions, move_id);
        free(move_id);
        free(remove);
    }
    free(command);
    zmsg_destroy(&msg);
    return rc;
}

static void
s_receiver_actor(zsock_t *pipe, void *arg)
{
    s_receiver_args_t *args = (s_receiver_args_t *) arg;
    pthread_setname_np(pthread_self(), "shoal-receiver");
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    zsock_set_zap_domain(router, "shoal");
    zcert_apply(args->cluster, router);
    zsock_set_curve_server(router, 1);
    zsock_set_linger(router, 0);
    zsock_set_rcvhwm(router, 0);
    zsock_set_sndhwm(router, 0);
    zsock_set_maxmsgsize(router, (int64_t) (SHOAL_TRANSFER_CHUNK_PAGES + 1) * S_PAGE);
    //  Its door is open to anyone who can connect, as the node's is.
    zactor_t *gate = shoal_gate_new(router, "move receiver", args->gate);
    args->port = gate ? zsock_bind(router, "%s", args->bind) : -1;
    if (args->port < 0) {
        snprintf(args->error, sizeof args->error, gate ? "cannot bind %s: %s" : "cannot watch %s's connections",
                 args->bind, zmq_strerror(zmq_errno()));
        zactor_destroy(&gate);
        zsock_destroy(&router);
        zsock_signal(pipe, 1);
        return;
    }
    zsock_signal(pipe, 0);
    zhashx_t *sessions = zhashx_new();
    zhashx_set_destructor(sessions, s_session_destroy);
    zpoller_t *poller = zpoller_new(pipe, router, NULL);
    while (true) {
        void *which = zpoller_wait(poller, -1);
        if (which == pipe) {
            if (s_receiver_command(pipe, sessions))
                break;
        }
        else
        if (which == router)
            s_receiver_message(router, pipe, sessions);
        else
        if (zpoller_terminated(poller))
            break;
    }
    zpoller_destroy(&poller);
    zhashx_destroy(&sessions);
    zactor_destroy(&gate);
    zsock_destroy(&router);
}

shoal_receiver_t *
shoal_receiver_new(const char *bind, const char *advertise, zcert_t *cluster, const shoal_gate_options_t *gate,
                   char **error_p)
{
    s_receiver_args_t args = { .bind = bind, .cluster = cluster, .gate = gate, .port = -1 };
    zactor_t *actor = zactor_new(s_receiver_actor, &args);
    if (args.port < 0) {
        *error_p = zsys_sprintf("move receiver: %s", *args.error ? args.error : "cannot start");
        zactor_destroy(&actor);
        return NULL;
    }
    shoal_receiver_t *self = (shoal_receiver_t *) zmalloc(sizeof *self);
    self->actor = actor;
    const char *colon = strrchr(advertise, ':');
    self->endpoint = zsys_sprintf("%.*s:%d", (int) (colon - advertise), advertise, args.port);
    return self;
}

void
shoal_receiver_destroy(shoal_receiver_t **self_p)
{
    if (*self_p) {
        shoal_receiver_t *self = *self_p;
        zactor_destroy(&self->actor);
        free(self->endpoint);
        free(self);
        *self_p = NULL;
    }
}

const char *
shoal_receiver_endpoint(shoal_receiver_t *self)
{
    return self->endpoint;
}

zsock_t *
shoal_receiver_sock(shoal_receiver_t *self)
{
    return zactor_sock(self->actor);
}

void
shoal_receiver_prepare(shoal_receiver_t *self, const char *move_id, const char *dir, const char *memory_dir,
                       uint64_t memory_bytes, uint64_t disk_bytes, uint64_t memory_pages, uint64_t disk_blocks)
{
    char memory[32], disk[32], pages[32], blocks[32];
    snprintf(memory, sizeof memory, "%" PRIu64, memory_bytes);
    snprintf(disk, sizeof disk, "%" PRIu64, disk_bytes);
    snprintf(pages, sizeof pages, "%" PRIu64, memory_pages);
    snprintf(blocks, sizeof blocks, "%" PRIu64, disk_blocks);
    zstr_sendx(self->actor, "PREPARE", move_id, dir, memory, disk, pages, blocks, memory_dir ? memory_dir : "", NULL);
}

void
shoal_receiver_prepare_files(shoal_receiver_t *self, const char *move_id, const char *dir)
{
    zstr_sendx(self->actor, "PREPARE-FILES", move_id, dir, NULL);
}

void
shoal_receiver_prepare_object(shoal_receiver_t *self, const char *id, const char *path, uint64_t size,
                              const shoal_checksum_t *checksum)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addstr(msg, "PREPARE-OBJECT");
    zmsg_addstr(msg, id);
    zmsg_addstr(msg, path);
    zmsg_addstrf(msg, "%" PRIu64, size);
    zmsg_addmem(msg, checksum->bytes, checksum->size);
    zmsg_send(&msg, zactor_sock(self->actor));
}

void
shoal_receiver_forget(shoal_receiver_t *self, const char *move_id, bool remove)
{
    zstr_sendx(self->actor, "FORGET", move_id, remove ? "remove" : "keep", NULL);
}

//  Reads an event of SIZE bytes, as an actor emitted it, into EVENT.
//  Returns 0, or -1 when what came is no such event.
static int
s_event_recv(void *actor, void *event, size_t size)
{
    char *kind = NULL;
    zframe_t *frame = NULL;
    int rc = -1;
    if (zsock_recv(actor, "sf", &kind, &frame) == 0 && kind && frame && zframe_size(frame) == size) {
        memcpy(event, zframe_data(frame), size);
        rc = 0;
    }
    free(kind);
    zframe_destroy(&frame);
    return rc;
}

int
shoal_receiver_event(shoal_receiver_t *self, shoal_receiver_event_t *event)
{
    return s_event_recv(self->actor, event, sizeof *event);
}

// ---------------------------------------------------------------------------
//  Sender

typedef struct {
    char *move_id;
    char *endpoint;
    zcert_t *cluster;
    char *server_key;
    char *image_dir;
    char *files_dir;
    char *object_path;
    uint32_t max_downtime_ms;
    int64_t step_timeout_ms;
    int64_t final_timeout_ms;
    bool converge;
} s_sender_args_t;

typedef struct {
    s_sender_args_t *args;
    zsock_t *pipe;
    zsock_t *dealer;
    void *dealer_handle;            //  the libzmq socket, for sends of buffers handed over
    shoal_image_t *image;
    uint64_t *bits[2];              //  pages to send, by object
    size_t words[2];
    int credit;                     //  chunks we may still send
    uint32_t acked;                 //  the last round acknowledged
    int64_t heard_ms;               //  monotonic ms the receiver last said anything
    bool final_asked;               //  the node said FINAL
    bool stopped;                   //  the node said $TERM
    char failed[512];               //  the receiver said no, or nothing
    int inflight;                   //  pooled chunks libzmq still holds (atomic)
    //  The chunk being built: its head, and its copied pages.
    uint8_t head[S_HEAD_MAX];
    uint32_t runs;
    uint8_t *buffer;                //  SHOAL_TRANSFER_CHUNK_PAGES pages
    size_t buffered;                //  pages in it
    //  Chunk buffers libzmq gave back (see s_pool_take).
    pthread_mutex_t pool_lock;
    uint8_t *pool[S_POOL_MAX];
    size_t pooled;
    uint8_t *region;                //  the mapping of S_POOL_MAX chunk buffers (NULL: none)
    uint8_t object;
    uint32_t round;
    bool final;                     //  the round is the final one (the guest is paused)
    int64_t writeback_us;           //  monotonic µs the source image's writeback was last started
    uint64_t writeback_offset[2];   //  where it goes on, by object
    uint64_t bytes;                 //  sent, all rounds
    uint64_t round_bytes;
    //  What the last progress event said, for those sent within a round.
    int64_t started_us;             //  the first round began
    int64_t progress_ms;            //  monotonic ms of the last progress event
    uint64_t dirty_rate;
    uint64_t estimate_ms;
    //  A move in files: the round the node captured last.
    shoal_driver_files_t files;     //  its files, as the manager listed them
    uint32_t files_round;           //  its number (0: none given yet)
    bool files_final;               //  the last round
    //  Auto-converge.
    uint32_t throttle;              //  the percent of the guest's writes held back, as the node said
    bool throttle_asked;            //  a step is asked and not answered yet
} s_sender_t;

static void
s_sender_emit(s_sender_t *self, shoal_sender_event_t *event)
{
    self->progress_ms = zclock_mono();
    zsock_send(self->pipe, "sb", "EVENT", event, sizeof *event);
}

//  Reads what the receiver and the node have to say, waiting up to
//  TIMEOUT_MS for anything. Returns -1 when the move must stop.
static int
s_sender_pump(s_sender_t *self, int timeout_ms)
{
    zmq_pollitem_t items[] = {
        { zsock_resolve(self->pipe), 0, ZMQ_POLLIN, 0 },
        { self->dealer_handle, 0, ZMQ_POLLIN, 0 },
    };
    if (zmq_poll(items, 2, timeout_ms) < 0)
        return -1;
    if (items[0].revents & ZMQ_POLLIN) {
        zmsg_t *msg = zmsg_recv(self->pipe);
        char *command = msg ? zmsg_popstr(msg) : NULL;
        if (!command || streq(command, "$TERM"))
            self->stopped = true;
        else
        if (streq(command, "FINAL"))
            self->final_asked = true;
        else
        if (streq(command, "THROTTLED")) {
            //  THROTTLED, percent, error ("" when it was set).
            char *percent = zmsg_popstr(msg);
            char *error = zmsg_popstr(msg);
            if (error && *error)
                snprintf(self->failed, sizeof self->failed, "auto-converge could not throttle the guest: %s", error);
            else
                self->throttle = percent ? (uint32_t) strtoul(percent, NULL, 10) : 0;
            self->throttle_asked = false;
            free(percent);
            free(error);
        }
        else
        if (streq(command, "FILES")) {
            //  FILES, round, final, then a path and a size per file.
            char *round = zmsg_popstr(msg);
            char *final = zmsg_popstr(msg);
            shoal_driver_files_clear(&self->files);
            size_t count = zmsg_size(msg) / 2;
            self->files.items = (shoal_driver_file_t *) zmalloc(sizeof(shoal_driver_file_t) * (count + 1));
            for (size_t i = 0; i < count; i++) {
                char *path = zmsg_popstr(msg);
                char *size = zmsg_popstr(msg);
                self->files.items[i].path = path;
                self->files.items[i].size = size ? strtoull(size, NULL, 10) : 0;
                free(size);
            }
            self->files.count = count;
            self->files_round = round ? (uint32_t) strtoul(round, NULL, 10) : 0;
            self->files_final = final && streq(final, "1");
            if (self->files_final)
                self->final_asked = true;
            free(round);
            free(final);
        }
        free(command);
        zmsg_destroy(&msg);
    }
    while (zsock_events(self->dealer) & ZMQ_POLLIN) {
        zmsg_t *msg = zmsg_recv(self->dealer);
        char *kind = msg ? zmsg_popstr(msg) : NULL;
        char *move_id = msg ? zmsg_popstr(msg) : NULL;
        zframe_t *data = msg ? zmsg_first(msg) : NULL;
        self->heard_ms = zclock_mono();
        if (kind && data && streq(kind, "K") && zframe_size(data) == 4)
            self->credit += (int) s_get_u32(zframe_data(data));
        else
        if (kind && data && streq(kind, "A") && zframe_size(data) == 4)
            self->acked = s_get_u32(zframe_data(data));
        else
        if (kind && data && streq(kind, "X"))
            snprintf(self->failed, sizeof self->failed, "the target refused the transfer: %.*s",
                     (int) zframe_size(data), (const char *) zframe_data(data));
        free(kind);
        free(move_id);
        zmsg_destroy(&msg);
    }
    return self->stopped || *self->failed ? -1 : 0;
}

//  Waits until READY says so, reading what comes meanwhile. What the
//  receiver sends is the move's progress: the wait fails only once it has
//  said nothing for the step timeout (the final round's, once the guest is
//  paused), however long the wait as a whole. Returns 0, or -1 with the
//  failure set.
static int
s_sender_wait_flag(s_sender_t *self, bool (*ready) (s_sender_t *), const char *what)
{
    int64_t started = zclock_mono();
    int64_t timeout = self->final_asked ? self->args->final_timeout_ms : self->args->step_timeout_ms;
    while (!ready(self)) {
        int64_t since = self->heard_ms > started ? self->heard_ms : started;
        int64_t left = since + timeout - zclock_mono();
        if (left <= 0) {
            snprintf(self->failed, sizeof self->failed, "no %s: nothing heard for %" PRId64 " ms (%s)", what, timeout,
                     self->final_asked ? "move/final_timeout_ms, the guest paused" : "move/step_timeout_ms");
            return -1;
        }
        if (s_sender_pump(self, (int) (left < S_POLL_MS ? left : S_POLL_MS)))
            return -1;
    }
    return 0;
}

static bool
s_has_credit(s_sender_t *self)
{
    return self->credit > 0;
}

static bool
s_round_acked(s_sender_t *self)
{
    return self->acked == self->round;
}

static void
s_copy_free(void *data, void *hint)
{
    free(data);
}

//  Whether BUFFER is one of the pool's mapping.
static bool
s_pool_owns(const s_sender_t *self, const uint8_t *buffer)
{
    return self->region && buffer >= self->region && buffer < self->region + S_POOL_MAX * S_CHUNK_BYTES;
}

//  Maps the pool's S_POOL_MAX buffers as one region aligned to a huge page,
//  asking for them, and pools them all. An object's bytes are read into
//  them around the page cache (s_sender_run_object), and a direct read
//  goes to the disk as one request per run of physically contiguous
//  memory: in 4 KiB pages a 1 MiB chunk took two requests (a virtio disk
//  takes 254 segments), each with the notification and the interrupt this
//  VM's hypervisor makes dear. Pages are touched only as buffers are used.
//  Without the mapping, buffers come one by one from posix_memalign.
static void
s_pool_map(s_sender_t *self)
{
    uint8_t *aligned = (uint8_t *) shoal_map_huge(S_POOL_MAX * S_CHUNK_BYTES);
    if (!aligned)
        return;
    self->region = aligned;
    //  Taken from the end first: the region's start is used first.
    for (size_t i = 0; i < S_POOL_MAX; i++)
        self->pool[self->pooled++] = aligned + (S_POOL_MAX - 1 - i) * S_CHUNK_BYTES;
}

//  A chunk buffer of SHOAL_TRANSFER_CHUNK_PAGES pages for copied pages,
//  aligned to a page: one the pool holds, else a new one. Reused rather
//  than allocated for each chunk: a new buffer's pages fault on their
//  first touch, and where page tables are shadowed (a VM without nested
//  paging) that costs more than the copy itself.
static uint8_t *
s_pool_take(s_sender_t *self)
{
    pthread_mutex_lock(&self->pool_lock);
    if (!self->region && !self->pooled)
        s_pool_map(self);
    uint8_t *buffer = self->pooled ? self->pool[--self->pooled] : NULL;
    pthread_mutex_unlock(&self->pool_lock);
    if (!buffer && posix_memalign((void **) &buffer, S_PAGE, S_CHUNK_BYTES) != 0)
        shoal_alloc_fail(S_CHUNK_BYTES);
    return buffer;
}

//  BUFFER, from s_pool_take, is not needed any more: back to the pool, or
//  freed when the pool is full (a buffer of the region stays mapped).
static void
s_pool_put(s_sender_t *self, uint8_t *buffer)
{
    pthread_mutex_lock(&self->pool_lock);
    if (self->pooled < S_POOL_MAX)
        self->pool[self->pooled++] = buffer;
    else
    if (!s_pool_owns(self, buffer))
        free(buffer);
    pthread_mutex_unlock(&self->pool_lock);
}

//  libzmq is done with a pooled chunk (called on its I/O thread).
static void
s_pool_give_back(void *data, void *hint)
{
    s_sender_t *self = (s_sender_t *) hint;
    s_pool_put(self, (uint8_t *) data);
    __atomic_sub_fetch(&self->inflight, 1, __ATOMIC_RELEASE);
}

//  Sends one chunk of KIND ("C", "F" or "O") with HEAD, and SIZE bytes at
//  DATA (malloc'd, handed over): libzmq ends it with FREE_FN once sent
//  (s_copy_free, or s_pool_give_back for a pooled buffer), and a chunk
//  that cannot go is freed here. Returns 0 or -1.
static int
s_frames_send(s_sender_t *self, const char *kind, const uint8_t *head, size_t head_size, void *data, size_t size,
              zmq_free_fn *free_fn)
{
    if (s_sender_wait_flag(self, s_has_credit, "credit from the target")) {
        if (free_fn == s_pool_give_back)
            s_pool_put(self, (uint8_t *) data);
        else
            free(data);
        return -1;
    }
    self->credit--;
    zstr_sendm(self->dealer, kind);
    zstr_sendm(self->dealer, self->args->move_id);
    zmq_send(self->dealer_handle, head, head_size, ZMQ_SNDMORE);
    zmq_msg_t msg;
    bool counted = free_fn == s_pool_give_back;
    if (counted)
        __atomic_add_fetch(&self->inflight, 1, __ATOMIC_ACQUIRE);
    zmq_msg_init_data(&msg, data, size, free_fn, counted ? (void *) self : NULL);
    if (zmq_msg_send(&msg, self->dealer_handle, 0) < 0) {
        zmq_msg_close(&msg);
        snprintf(self->failed, sizeof self->failed, "cannot send to %s: %s", self->args->endpoint,
                 zmq_strerror(zmq_errno()));
        return -1;
    }
    self->bytes += size;
    self->round_bytes += size;
    if (zclock_mono() - self->progress_ms >= SHOAL_TRANSFER_PROGRESS_MS) {
        int64_t spent_us = zclock_usecs() - self->started_us;
        shoal_sender_event_t event = {
            .what = SHOAL_SENDER_PROGRESS, .round = self->round, .bytes = self->bytes,
            .rate = spent_us > 0 ? (uint64_t) ((double) self->bytes * 1e6 / (double) spent_us) : 0,
            .dirty_rate = self->dirty_rate, .estimate_ms = self->estimate_ms,
        };
        s_sender_emit(self, &event);
    }
    return 0;
}

//  Sends one chunk of pages: the head of RUNS runs, and SIZE bytes at
//  DATA, which libzmq frees with FREE_FN. Returns 0 or -1.
static bool s_source_writeback(s_sender_t *self, bool wait, int64_t *spent_us);

static int
s_chunk_send(s_sender_t *self, uint32_t runs, const uint8_t *head_runs, void *data, size_t size,
             zmq_free_fn *free_fn)
{
    //  A long round (a baseline takes a minute over a slow link) starts
    //  the source image's writeback as it goes, not only at its end.
    if (!self->final && zclock_usecs() - self->writeback_us >= S_WRITEBACK_EVERY_US)
        s_source_writeback(self, false, NULL);
    uint8_t head[S_HEAD_MAX];
    s_put_u32(head, self->round);
    head[4] = self->object;
    s_put_u32(head + 5, runs);
    memcpy(head + 9, head_runs, (size_t) runs * 8);
    return s_frames_send(self, "C", head, 9 + (size_t) runs * 8, data, size, free_fn);
}

//  Sends the copied pages gathered so far, if any.
static int
s_buffer_flush(s_sender_t *self)
{
    if (self->buffered == 0)
        return 0;
    void *data = self->buffer;
    size_t size = self->buffered * S_PAGE;
    self->buffer = s_pool_take(self);
    int rc = s_chunk_send(self, self->runs, self->head, data, size, s_pool_give_back);
    self->buffered = 0;
    self->runs = 0;
    return rc;
}

//  Adds the run of COUNT pages from FIRST to what goes out, read from the
//  image's file into the chunks' buffers; with SKIP_PRISTINE, pages still
//  all zeros are left out. The pages are read with the kernel's copy
//  rather than handed to libzmq from the mapping: CURVE copies a message
//  to encrypt it anyway, and the first touch of each 4 KiB page of a
//  mapping cost 15 us here (a VM whose page tables are shadowed), as much
//  as the stream itself (an 8 GiB baseline at 0.27 of raw CURVE).
static int
s_run_add(s_sender_t *self, size_t first, size_t count, bool skip_pristine)
{
    while (count > 0) {
        if (self->buffered == SHOAL_TRANSFER_CHUNK_PAGES && s_buffer_flush(self))
            return -1;
        size_t take = SHOAL_TRANSFER_CHUNK_PAGES - self->buffered;
        if (take > count)
            take = count;
        uint8_t *at = self->buffer + self->buffered * S_PAGE;
        char *why = NULL;
        if (shoal_image_read_pages(self->image, (shoal_image_object_t) self->object, first, take, at, &why)) {
            snprintf(self->failed, sizeof self->failed, "cannot read the guest's image: %s", why);
            free(why);
            return -1;
        }
        //  Each page kept joins the last run when it follows it, else
        //  starts one: a chunk has at most as many runs as pages.
        size_t kept = 0;
        for (size_t i = 0; i < take; i++) {
            const uint8_t *page = at + i * S_PAGE;
            if (skip_pristine && shoal_image_copy_pristine(page))
                continue;
            if (kept != i)
                memcpy(at + kept * S_PAGE, page, S_PAGE);
            uint32_t index = (uint32_t) (first + i);
            uint8_t *last = self->runs ? self->head + (self->runs - 1) * 8 : NULL;
            if (last && s_get_u32(last) + s_get_u32(last + 4) == index)
                s_put_u32(last + 4, s_get_u32(last + 4) + 1);
            else {
                s_put_u32(self->head + self->runs * 8, index);
                s_put_u32(self->head + self->runs * 8 + 4, 1);
                self->runs++;
            }
            kept++;
        }
        self->buffered += kept;
        first += take;
        count -= take;
    }
    return 0;
}

//  Sends the pages marked in BITS of OBJECT (all but pristine ones when
//  SKIP_PRISTINE) and clears the marks. Returns 0 or -1.
static int
s_object_send(s_sender_t *self, shoal_image_object_t object, bool skip_pristine)
{
    self->object = (uint8_t) object;
    size_t pages = shoal_image_pages(self->image, object);
    uint64_t *bits = self->bits[object];
    size_t run_first = 0, run_count = 0;
    for (size_t word = 0; word < self->words[object]; word++) {
        uint64_t value = bits[word];
        bits[word] = 0;
        while (value) {
            size_t index = word * 64 + (size_t) __builtin_ctzll(value);
            value &= value - 1;
            if (index >= pages || (skip_pristine && shoal_image_page_in_hole(self->image, object, index)))
                continue;
            if (run_count && index == run_first + run_count) {
                run_count++;
                continue;
            }
            if (run_count && s_run_add(self, run_first, run_count, skip_pristine))
                return -1;
            run_first = index;
            run_count = 1;
        }
    }
    if (run_count && s_run_add(self, run_first, run_count, skip_pristine))
        return -1;
    return s_buffer_flush(self);
}

//  Takes the guest's dirty marks into the pages to send. Returns how many
//  pages are marked now.
static uint64_t
s_harvest(s_sender_t *self)
{
    uint64_t marked = 0;
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++) {
        if (!self->words[object])
            continue;
        shoal_image_harvest(self->image, (shoal_image_object_t) object, self->bits[object], self->words[object]);
        for (size_t word = 0; word < self->words[object]; word++)
            marked += (uint64_t) __builtin_popcountll(self->bits[object][word]);
    }
    return marked;
}

//  Sends one round: the pages marked now. Returns 0 or -1.
static int
s_round_send(s_sender_t *self, bool final)
{
    self->round++;
    self->round_bytes = 0;
    self->final = final;
    shoal_fault_point("source", final ? "final" : "round", self->round);
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++)
        if (self->words[object] && s_object_send(self, (shoal_image_object_t) object, self->round == 1))
            return -1;
    uint8_t end[13];
    s_put_u32(end, self->round);
    end[4] = final ? 1 : 0;
    s_put_u64(end + 5, self->round_bytes / S_PAGE);
    zstr_sendm(self->dealer, "E");
    zstr_sendm(self->dealer, self->args->move_id);
    zmq_send(self->dealer_handle, end, sizeof end, 0);
    return s_sender_wait_flag(self, s_round_acked, final ? "acknowledgement of the final round from the target"
                                                         : "acknowledgement of a round from the target");
}

static bool
s_final_asked(s_sender_t *self)
{
    return self->final_asked;
}

static int s_sender_wait_node(s_sender_t *self, bool (*ready) (s_sender_t *));

static bool
s_throttle_answered(s_sender_t *self)
{
    return !self->throttle_asked;
}

//  Auto-converge: asks the node for the next throttle step and waits until
//  the guest runs at it. Returns 0, or -1 with the failure set.
static int
s_throttle_step(s_sender_t *self, shoal_sender_event_t *event)
{
    uint32_t next = self->throttle ? self->throttle + SHOAL_TRANSFER_THROTTLE_STEP : SHOAL_TRANSFER_THROTTLE_FIRST;
    if (next > SHOAL_TRANSFER_THROTTLE_MAX)
        next = SHOAL_TRANSFER_THROTTLE_MAX;
    shoal_sender_event_t step = *event;
    step.what = SHOAL_SENDER_THROTTLE;
    step.throttle = next;
    self->throttle_asked = true;
    s_sender_emit(self, &step);
    return s_sender_wait_node(self, s_throttle_answered);
}

//  The source's own image is written back while the guest runs. The
//  guest's memory (and disk) is a file mapping whose pages the guest
//  dirties as it runs and that the kernel writes back in its own time
//  (pages older than 30 s, or past its dirty threshold: an 8 GiB guest
//  just filled leaves gigabytes). Where the store shares the disk, a
//  synced write waits behind whatever the disk was handed before it and
//  did not flush yet, so such a writeback landing in the final step held
//  the synced writes inside the downtime (the claim's keys on both sides,
//  the commit) for 0.1-0.5 s each: 1.1 s of node downtime for an 8 GiB
//  guest writing 50 MB/s here. So the writeback of what the guest dirtied
//  is started all along the pre-copy rounds (every S_WRITEBACK_EVERY_US
//  and at each round's end), and once the final round fits the budget the
//  image is synced, the disk's cache flushed with it, while the guest
//  still runs: what the guest dirties after that is young and stays in
//  the page cache through the final step.
//  Starting a writeback blocks once the disk's queue is full, and the
//  sender must go on sending: each start is bounded (S_WRITEBACK_SLICE_US,
//  a window at a time, going on where the last one stopped), and the sync
//  is made only when starting the writeback of the whole image took less
//  than S_FLUSH_SLICE_US (little was dirty), else the caller sends one
//  more round (an unbounded sync of gigabytes held a sender long enough
//  for the guest to dirty as much again, and a move for minutes).
//  Nothing needs this copy durable (it is removed once the move is done,
//  and a move that aborts leaves it as a running guest's is): a failure
//  is logged and the move goes on. Returns whether the image was synced
//  (WAIT), with the time it took in *SPENT_US (may be NULL).
static bool
s_source_writeback(s_sender_t *self, bool wait, int64_t *spent_us)
{
    int64_t started = zclock_usecs();
    self->writeback_us = started;
    bool synced = wait;
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++) {
        if (!self->words[object])
            continue;
        char *error = NULL;
        bool wrapped = false;
        uint64_t *offset = &self->writeback_offset[object];
        if (wait)
            *offset = 0;
        int64_t budget = wait ? S_FLUSH_SLICE_US : S_WRITEBACK_SLICE_US;
        int rc = shoal_image_writeback(self->image, (shoal_image_object_t) object, offset, S_WRITEBACK_WINDOW,
                                       budget, &wrapped, &error);
        if (rc == 0 && wait && wrapped)
            rc = shoal_image_sync(self->image, (shoal_image_object_t) object, true, &error);
        if (rc)
            zsys_warning("transfer: %s: %s", self->args->move_id, error);
        if (rc || !wrapped)
            synced = false;
        free(error);
    }
    if (spent_us)
        *spent_us = zclock_usecs() - started;
    return synced;
}

//  The final round's estimate for DIRTY pages at RATE bytes/s.
static uint64_t
s_final_estimate_ms(uint64_t dirty, uint64_t rate)
{
    return (uint64_t) ((double) dirty * S_PAGE * 1000.0 / (double) rate) + S_FINAL_OVERHEAD_MS;
}

//  The rounds, as shoal_transfer.h tells. Returns 0, or -1 with the failure set.
static int
s_sender_run(s_sender_t *self)
{
    shoal_sender_event_t event = { .what = SHOAL_SENDER_PROGRESS };
    shoal_image_mark_all(self->image, SHOAL_IMAGE_MEMORY);
    if (self->words[SHOAL_IMAGE_DISK])
        shoal_image_mark_all(self->image, SHOAL_IMAGE_DISK);
    s_harvest(self);
    self->started_us = zclock_usecs();
    self->progress_ms = zclock_mono();
    int64_t spent_us = 0;
    uint64_t previous = UINT64_MAX;
    int stalls = 0;
    int slow = 0;
    int flushes = 0;
    while (true) {
        int64_t started = zclock_usecs();
        if (s_round_send(self, false))
            return -1;
        int64_t round_us = zclock_usecs() - started;
        spent_us += round_us;
        uint64_t dirty = s_harvest(self);
        uint64_t rate = self->bytes >= S_RATE_MIN_BYTES && spent_us > 0
                      ? (uint64_t) ((double) self->bytes * 1e6 / (double) spent_us) : S_RATE_GUESS;
        //  The final round is estimated at the rate of the last delta
        //  round: pages a guest dirties are scattered, and go slower than
        //  the baseline's long runs of pages.
        uint64_t final_rate = self->round > 1 && self->round_bytes >= S_RATE_MIN_BYTES && round_us > 0
                            ? (uint64_t) ((double) self->round_bytes * 1e6 / (double) round_us) : rate;
        event.round = self->round;
        event.bytes = self->bytes;
        event.rate = rate;
        event.dirty_rate = round_us > 0 ? (uint64_t) ((double) dirty * S_PAGE * 1e6 / (double) round_us) : 0;
        event.estimate_ms = s_final_estimate_ms(dirty, final_rate);
        //  At least one delta round: it measures that rate, and what the
        //  guest dirtied during the baseline goes while the guest runs.
        //  While the rounds still halve what is left, one more round while
        //  the guest runs costs nothing of the downtime: the final round
        //  goes once it fits S_FINAL_SHARE_PERCENT of the budget, or the
        //  budget once rounds no longer shrink that fast (or the next
        //  would be the last one allowed). The estimate is of a
        //  round sent at the rate of the last one, and the final round of
        //  an 8 GiB guest writing 50 MB/s ran at half that rate here (its
        //  pages go to a target whose page cache is busy writing back).
        bool shrinking = dirty * 2 <= previous && self->round + 1 < SHOAL_TRANSFER_ROUNDS_MAX;
        uint64_t goal = shrinking ? self->args->max_downtime_ms * S_FINAL_SHARE_PERCENT / 100
                                  : self->args->max_downtime_ms;
        bool fits = self->round >= 2 && event.estimate_ms <= goal;
        if (fits && flushes < S_FLUSHES_MAX) {
            //  The image is synced before the pause, then the final round
            //  estimated again with what the guest dirtied meanwhile.
            flushes++;
            int64_t flush_us = 0;
            bool synced = s_source_writeback(self, true, &flush_us);
            dirty = s_harvest(self);
            event.estimate_ms = s_final_estimate_ms(dirty, final_rate);
            fits = synced && event.estimate_ms <= goal;
            if (fits)
                zsys_info("transfer: %s: the source's image was synced in %.1f ms, until %" PRId64 " ms (wall); "
                          "%" PRIu64 " pages are dirty now: the final round goes", self->args->move_id,
                          (double) flush_us / 1e3, zclock_time(), dirty);
            else
                zsys_info("transfer: %s: the source's image %s in %.1f ms, %" PRIu64 " pages are dirty now: "
                          "one more round", self->args->move_id, synced ? "was synced" : "was not synced",
                          (double) flush_us / 1e3, dirty);
        }
        else
        if (!fits)
            s_source_writeback(self, false, NULL);
        event.what = SHOAL_SENDER_PROGRESS;
        self->dirty_rate = event.dirty_rate;
        self->estimate_ms = event.estimate_ms;
        s_sender_emit(self, &event);
        if (fits)
            break;
        stalls = dirty >= previous ? stalls + 1 : 0;
        previous = dirty;
        //  Auto-converge: a delta round after which the guest had dirtied
        //  more than half of what it carried did not shrink enough.
        slow = self->round >= 2 && dirty * S_PAGE * 2 > self->round_bytes ? slow + 1 : 0;
        if (self->args->converge && self->throttle < SHOAL_TRANSFER_THROTTLE_MAX
        &&  (slow >= S_SLOW_ROUNDS || stalls >= S_STALLS_MAX) && self->round < SHOAL_TRANSFER_ROUNDS_MAX) {
            if (s_throttle_step(self, &event))
                return -1;
            //  One more such round at this step asks for the next.
            slow = S_SLOW_ROUNDS - 1;
            stalls = 0;
            continue;
        }
        if (stalls >= S_STALLS_MAX || self->round >= SHOAL_TRANSFER_ROUNDS_MAX) {
            char throttled[128] = "";
            if (self->throttle)
                snprintf(throttled, sizeof throttled, " with %u%% of its writes held back", self->throttle);
            snprintf(self->failed, sizeof self->failed,
                     "the guest dirties %.1f MB/s%s and the link moves %.1f MB/s: after %u rounds the final "
                     "round would take %" PRIu64 " ms, over the budget of %u ms",
                     (double) event.dirty_rate / 1e6, throttled, (double) rate / 1e6, self->round,
                     event.estimate_ms, self->args->max_downtime_ms);
            return -1;
        }
    }
    event.what = SHOAL_SENDER_READY;
    s_sender_emit(self, &event);
    if (s_sender_wait_flag(self, s_final_asked, "word from this node to start the final round"))
        return -1;
    //  The guest is paused now: what it dirtied since the last harvest is
    //  all that is left.
    int64_t started = zclock_usecs();
    s_harvest(self);
    if (s_round_send(self, true))
        return -1;
    event.what = SHOAL_SENDER_DONE;
    event.round = self->round;
    event.bytes = self->bytes;
    event.final_us = (uint64_t) (zclock_usecs() - started);
    event.final_bytes = self->round_bytes;
    s_sender_emit(self, &event);
    return 0;
}

// ---------------------------------------------------------------------------
//  A move in files

static bool
s_files_given(s_sender_t *self)
{
    return self->files_round == self->round + 1;
}

//  Waits for the node's word (a round's files), however long its capture
//  takes: the node bounds that, and ends this actor when it gives up.
//  Returns 0, or -1 when the move must stop.
static int
s_sender_wait_node(s_sender_t *self, bool (*ready) (s_sender_t *))
{
    int64_t told = 0;
    while (!ready(self)) {
        //  The capture is the move's progress too: the target, which hears
        //  no chunk meanwhile, is told the source is at work.
        if (zclock_mono() - told >= SHOAL_TRANSFER_PROGRESS_MS) {
            told = zclock_mono();
            zstr_sendm(self->dealer, "P");
            zstr_send(self->dealer, self->args->move_id);
        }
        if (s_sender_pump(self, S_POLL_MS) || self->stopped)
            return -1;
    }
    return 0;
}

//  Sends file PATH of SIZE bytes of the files dir. Returns 0 or -1.
static int
s_file_send(s_sender_t *self, const char *path, uint64_t size)
{
    size_t path_size = strlen(path);
    if (path_size > S_FILE_PATH_MAX) {
        snprintf(self->failed, sizeof self->failed, "round %u: the path %.200s... is too long", self->round, path);
        return -1;
    }
    char *full = zsys_sprintf("%s/%s", self->args->files_dir, path);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0 || (uint64_t) info.st_size != size) {
        snprintf(self->failed, sizeof self->failed, "round %u: %.300s: %s", self->round, full,
                 fd < 0 ? strerror(errno) : "its size is not the one the manager listed");
        if (fd >= 0)
            close(fd);
        free(full);
        return -1;
    }
    uint8_t head[S_FILE_HEAD + S_FILE_PATH_MAX];
    s_put_u32(head, self->round);
    memcpy(head + S_FILE_HEAD, path, path_size);
    uint64_t offset = 0;
    int rc = 0;
    //  An empty file is sent too, as one empty chunk: the target makes it.
    do {
        size_t chunk = size - offset < S_FILE_CHUNK_BYTES ? (size_t) (size - offset) : S_FILE_CHUNK_BYTES;
        uint8_t *data = (uint8_t *) shoal_malloc(chunk);
        size_t got = 0;
        while (got < chunk) {
            ssize_t read_size = pread(fd, data + got, chunk - got, (off_t) (offset + got));
            if (read_size <= 0)
                break;
            got += (size_t) read_size;
        }
        if (got < chunk) {
            snprintf(self->failed, sizeof self->failed, "round %u: cannot read %.300s: %s", self->round, full,
                     errno ? strerror(errno) : "it shrank");
            free(data);
            rc = -1;
            break;
        }
        s_put_u64(head + 4, offset);
        if (s_frames_send(self, "F", head, S_FILE_HEAD + path_size, data, chunk, s_copy_free)) {
            rc = -1;
            break;
        }
        offset += chunk;
    } while (offset < size);
    close(fd);
    free(full);
    return rc;
}

//  Sends the round the node captured. Returns 0 or -1.
static int
s_files_round_send(s_sender_t *self)
{
    self->round++;
    self->round_bytes = 0;
    bool final = self->files_final;
    shoal_fault_point("source", final ? "final" : "round", self->round);
    for (size_t i = 0; i < self->files.count; i++)
        if (s_file_send(self, self->files.items[i].path, self->files.items[i].size))
            return -1;
    uint8_t end[13];
    s_put_u32(end, self->round);
    end[4] = final ? 1 : 0;
    s_put_u64(end + 5, self->round_bytes);
    zstr_sendm(self->dealer, "E");
    zstr_sendm(self->dealer, self->args->move_id);
    zmq_send(self->dealer_handle, end, sizeof end, 0);
    return s_sender_wait_flag(self, s_round_acked, final ? "acknowledgement of the final round from the target"
                                                         : "acknowledgement of a round from the target");
}

//  The rounds of a move in files, as shoal_transfer.h tells. Returns 0, or
//  -1 with the failure set.
static int
s_sender_run_files(s_sender_t *self)
{
    shoal_sender_event_t event = { .what = SHOAL_SENDER_PROGRESS };
    self->started_us = zclock_usecs();
    self->progress_ms = zclock_mono();
    int64_t spent_us = 0;
    int64_t previous_start = 0;
    uint64_t previous = UINT64_MAX;
    int stalls = 0;
    while (true) {
        shoal_sender_event_t capture = { .what = SHOAL_SENDER_CAPTURE, .round = self->round + 1,
                                         .bytes = self->bytes };
        s_sender_emit(self, &capture);
        if (s_sender_wait_node(self, s_files_given))
            return -1;
        if (self->files_final) {
            snprintf(self->failed, sizeof self->failed, "round %u came as the final one before READY",
                     self->files_round);
            return -1;
        }
        int64_t started = zclock_usecs();
        if (s_files_round_send(self))
            return -1;
        int64_t round_us = zclock_usecs() - started;
        spent_us += round_us;
        uint64_t rate = self->bytes >= S_RATE_MIN_BYTES && spent_us > 0
                      ? (uint64_t) ((double) self->bytes * 1e6 / (double) spent_us) : S_RATE_GUESS;
        uint64_t final_rate = self->round > 1 && self->round_bytes >= S_RATE_MIN_BYTES && round_us > 0
                            ? (uint64_t) ((double) self->round_bytes * 1e6 / (double) round_us) : rate;
        event.round = self->round;
        event.bytes = self->bytes;
        event.rate = rate;
        //  What this round carried changed since the last one began.
        event.dirty_rate = previous_start && started > previous_start
                         ? (uint64_t) ((double) self->round_bytes * 1e6 / (double) (started - previous_start)) : 0;
        //  The next round's size is known only once it is captured: the
        //  last one's stands for it.
        event.estimate_ms = (uint64_t) ((double) self->round_bytes * 1000.0 / (double) final_rate)
                          + S_FINAL_OVERHEAD_MS;
        event.what = SHOAL_SENDER_PROGRESS;
        self->dirty_rate = event.dirty_rate;
        self->estimate_ms = event.estimate_ms;
        s_sender_emit(self, &event);
        previous_start = started;
        if (self->round >= 2 && event.estimate_ms <= self->args->max_downtime_ms)
            break;
        stalls = self->round_bytes >= previous ? stalls + 1 : 0;
        if (stalls >= S_STALLS_MAX || self->round >= SHOAL_TRANSFER_ROUNDS_MAX) {
            snprintf(self->failed, sizeof self->failed,
                     "rounds of %.1f MB that do not shrink and a link of %.1f MB/s: after %u rounds the final "
                     "round would take %" PRIu64 " ms, over the budget of %u ms",
                     (double) self->round_bytes / 1e6, (double) rate / 1e6, self->round, event.estimate_ms,
                     self->args->max_downtime_ms);
            return -1;
        }
        previous = self->round_bytes;
    }
    event.what = SHOAL_SENDER_READY;
    s_sender_emit(self, &event);
    if (s_sender_wait_node(self, s_files_given))
        return -1;
    if (!self->files_final) {
        snprintf(self->failed, sizeof self->failed, "round %u after READY is not the final one", self->files_round);
        return -1;
    }
    int64_t started = zclock_usecs();
    if (s_files_round_send(self))
        return -1;
    event.what = SHOAL_SENDER_DONE;
    event.round = self->round;
    event.bytes = self->bytes;
    event.final_us = (uint64_t) (zclock_usecs() - started);
    event.final_bytes = self->round_bytes;
    s_sender_emit(self, &event);
    return 0;
}

// ---------------------------------------------------------------------------
//  An object: one file, whole, in one final round

//  Sends the object's bytes, read from its file into the chunks' reused
//  buffers, then its END, and waits for the acknowledgement: the receiver
//  gives it once every byte arrived, hashed to the object's checksum, and
//  is durable. The bytes are read with the kernel's copy rather than
//  handed to libzmq from a mapping of the file: CURVE copies a message to
//  encrypt it anyway, and the first touch of each 4 KiB page of a mapping
//  costs more than the copy where page tables are shadowed (a VM without
//  nested paging: a 1 GiB object's stream spent 1.6 s of its I/O thread
//  per GiB from the mapping, beside 1.0 s for the raw stream's). They are
//  read around the page cache (O_DIRECT) where the file system allows:
//  an object written by a sink (shoal_sink.h) is not in it, and reading
//  it into fresh page-cache pages cost the sender 1.7 s of CPU per GiB,
//  against 0.1 s direct. Returns 0, or -1 with the failure set.
static int
s_sender_run_object(s_sender_t *self)
{
    bool direct = true;
    int fd = open(self->args->object_path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0 && errno == EINVAL) {
        direct = false;
        fd = open(self->args->object_path, O_RDONLY | O_CLOEXEC);
    }
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0) {
        snprintf(self->failed, sizeof self->failed, "cannot open %.300s: %s", self->args->object_path,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    //  The kernel reads ahead of the stream when the file is not cached.
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    size_t size = (size_t) info.st_size;
    self->round = 1;
    self->started_us = zclock_usecs();
    self->progress_ms = zclock_mono();
    self->final_asked = true;
    for (size_t offset = 0; offset < size; offset += S_FILE_CHUNK_BYTES) {
        size_t chunk = size - offset < S_FILE_CHUNK_BYTES ? size - offset : S_FILE_CHUNK_BYTES;
        //  The credit first, so that a buffer is taken only to be sent.
        if (s_sender_wait_flag(self, s_has_credit, "credit from the target")) {
            close(fd);
            return -1;
        }
        uint8_t *buffer = s_pool_take(self);
        size_t got = 0;
        while (got < chunk) {
            //  A direct read asks for whole pages (the end of the file
            //  cuts it short); a short one anywhere else, or a refusal,
            //  turns the file to ordinary reads.
            size_t want = direct ? (chunk - got + S_PAGE - 1) / S_PAGE * S_PAGE : chunk - got;
            ssize_t count = pread(fd, buffer + got, want, (off_t) (offset + got));
            if (count < 0 && errno == EINTR)
                continue;
            if (direct && ((count < 0 && errno == EINVAL) || (count >= 0 && (size_t) count < chunk - got))) {
                int flags = fcntl(fd, F_GETFL);
                direct = !(flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0);
                if (!direct && count < 0)
                    continue;
            }
            if (count > 0 && (size_t) count > chunk - got)
                count = (ssize_t) (chunk - got);
            if (count <= 0) {
                snprintf(self->failed, sizeof self->failed, "cannot read %.300s at %zu of %zu bytes: %s",
                         self->args->object_path, offset + got, size, count < 0 ? strerror(errno) : "it ended");
                s_pool_put(self, buffer);
                close(fd);
                return -1;
            }
            got += (size_t) count;
        }
        uint8_t head[8];
        s_put_u64(head, offset);
        if (s_frames_send(self, "O", head, sizeof head, buffer, chunk, s_pool_give_back)) {
            close(fd);
            return -1;
        }
    }
    close(fd);
    uint8_t end[13];
    s_put_u32(end, self->round);
    end[4] = 1;
    s_put_u64(end + 5, size);
    zstr_sendm(self->dealer, "E");
    zstr_sendm(self->dealer, self->args->move_id);
    zmq_send(self->dealer_handle, end, sizeof end, 0);
    if (s_sender_wait_flag(self, s_round_acked, "acknowledgement of the object from the target"))
        return -1;
    shoal_sender_event_t event = { .what = SHOAL_SENDER_DONE, .round = 1, .bytes = self->bytes };
    int64_t spent_us = zclock_usecs() - self->started_us;
    event.rate = spent_us > 0 ? (uint64_t) ((double) self->bytes * 1e6 / (double) spent_us) : 0;
    event.final_us = (uint64_t) spent_us;
    event.final_bytes = self->round_bytes;
    s_sender_emit(self, &event);
    return 0;
}

static void
s_sender_args_destroy(s_sender_args_t **args_p)
{
    s_sender_args_t *args = *args_p;
    if (args) {
        free(args->move_id);
        free(args->endpoint);
        zcert_destroy(&args->cluster);
        free(args->server_key);
        free(args->image_dir);
        free(args->files_dir);
        free(args->object_path);
        free(args);
        *args_p = NULL;
    }
}

static void
s_sender_actor(zsock_t *pipe, void *arg)
{
    s_sender_t self = { .args = (s_sender_args_t *) arg, .pipe = pipe, .credit = SHOAL_TRANSFER_WINDOW };
    pthread_setname_np(pthread_self(), "shoal-sender");
    zsock_signal(pipe, 0);
    char *error = NULL;
    bool files = self.args->files_dir != NULL;
    bool whole = self.args->object_path != NULL;
    if (!files && !whole)
        self.image = shoal_image_open(self.args->image_dir, &error);
    pthread_mutex_init(&self.pool_lock, NULL);
    self.buffer = s_pool_take(&self);
    if (!files && !whole && !self.image)
        snprintf(self.failed, sizeof self.failed, "cannot open the guest's image: %s", error);
    free(error);
    if (files || whole || self.image) {
        for (int object = SHOAL_IMAGE_MEMORY; self.image && object <= SHOAL_IMAGE_DISK; object++) {
            size_t pages = shoal_image_pages(self.image, (shoal_image_object_t) object);
            self.words[object] = (pages + 63) / 64;
            self.bits[object] = (uint64_t *) shoal_calloc(self.words[object] + 1, sizeof(uint64_t));
        }
        self.dealer = zsock_new(ZMQ_DEALER);
        zcert_apply(self.args->cluster, self.dealer);
        zsock_set_curve_serverkey(self.dealer, self.args->server_key);
        zsock_set_linger(self.dealer, 0);
        zsock_set_sndhwm(self.dealer, 0);
        zsock_set_rcvhwm(self.dealer, 0);
        zsock_connect(self.dealer, "%s", self.args->endpoint);
        self.dealer_handle = zsock_resolve(self.dealer);
        int run = whole ? s_sender_run_object(&self)
                : files ? s_sender_run_files(&self) : s_sender_run(&self);
        if (run) {
            shoal_sender_event_t event = { .what = SHOAL_SENDER_FAILED, .round = self.round, .bytes = self.bytes };
            snprintf(event.error, sizeof event.error, "%s", *self.failed ? self.failed : "stopped");
            if (!self.stopped)
                s_sender_emit(&self, &event);
        }
    }
    else {
        shoal_sender_event_t event = { .what = SHOAL_SENDER_FAILED };
        snprintf(event.error, sizeof event.error, "%s", self.failed);
        s_sender_emit(&self, &event);
    }
    //  Stay until the node ends the move: it destroys this actor.
    while (!self.stopped) {
        char *command = zstr_recv(pipe);
        if (!command || streq(command, "$TERM"))
            self.stopped = true;
        free(command);
    }
    zsock_destroy(&self.dealer);
    //  libzmq may still hold pooled buffers in messages it drops: the pool
    //  and the image stay until it has let go of them all.
    int64_t deadline = zclock_mono() + S_RELEASE_WAIT_MS;
    while (__atomic_load_n(&self.inflight, __ATOMIC_ACQUIRE) > 0 && zclock_mono() < deadline)
        zclock_sleep(1);
    if (__atomic_load_n(&self.inflight, __ATOMIC_ACQUIRE) > 0)
        zsys_error("transfer: %s: libzmq still holds %d chunk(s): the sender's buffers and image stay",
                   self.args->move_id, self.inflight);
    else {
        shoal_image_destroy(&self.image);
        if (self.buffer)
            s_pool_put(&self, self.buffer);
        self.buffer = NULL;
        for (size_t i = 0; i < self.pooled; i++)
            if (!s_pool_owns(&self, self.pool[i]))
                free(self.pool[i]);
        if (self.region)
            munmap(self.region, S_POOL_MAX * S_CHUNK_BYTES);
        pthread_mutex_destroy(&self.pool_lock);
    }
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++)
        free(self.bits[object]);
    if (!s_pool_owns(&self, self.buffer))
        free(self.buffer);
    shoal_driver_files_clear(&self.files);
    s_sender_args_destroy(&self.args);
}

zactor_t *
shoal_sender_new(const shoal_sender_args_t *args)
{
    s_sender_args_t *copy = (s_sender_args_t *) zmalloc(sizeof *copy);
    copy->move_id = shoal_strdup(args->move_id);
    copy->endpoint = shoal_strdup(args->endpoint);
    copy->cluster = zcert_dup(args->cluster);
    copy->server_key = shoal_strdup(args->server_key);
    copy->image_dir = args->image_dir ? shoal_strdup(args->image_dir) : NULL;
    copy->files_dir = args->files_dir ? shoal_strdup(args->files_dir) : NULL;
    copy->object_path = args->object_path ? shoal_strdup(args->object_path) : NULL;
    copy->max_downtime_ms = args->max_downtime_ms;
    copy->step_timeout_ms = args->step_timeout_ms;
    copy->final_timeout_ms = args->final_timeout_ms;
    copy->converge = args->converge && !args->files_dir;
    return zactor_new(s_sender_actor, copy);
}

void
shoal_sender_files(zactor_t *sender, uint32_t round, bool final, const shoal_driver_files_t *files)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addstr(msg, "FILES");
    zmsg_addstrf(msg, "%" PRIu32, round);
    zmsg_addstr(msg, final ? "1" : "0");
    for (size_t i = 0; i < files->count; i++) {
        zmsg_addstr(msg, files->items[i].path);
        zmsg_addstrf(msg, "%" PRIu64, files->items[i].size);
    }
    zmsg_send(&msg, zactor_sock(sender));
}

void
shoal_sender_throttled(zactor_t *sender, uint32_t throttle, const char *error)
{
    zmsg_t *msg = zmsg_new();
    zmsg_addstr(msg, "THROTTLED");
    zmsg_addstrf(msg, "%" PRIu32, throttle);
    zmsg_addstr(msg, error ? error : "");
    zmsg_send(&msg, zactor_sock(sender));
}

int
shoal_sender_event(zactor_t *sender, shoal_sender_event_t *event)
{
    return s_event_recv(sender, event, sizeof *event);
}
