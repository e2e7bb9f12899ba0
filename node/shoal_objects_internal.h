/*  shoal_objects_internal: what the files of the objects module share, and
    nothing outside them includes. The module is split along its concerns:

        shoal_objects.c            the front: the module's life, requests,
                                   guest images for claims
        shoal_objects_catalog.c    the catalog's keys and records, ids, the
                                   local locks, removal, an instance's look
        shoal_objects_io.c         file work on the worker threads (adds,
                                   reads, discards, the verifier's hashes)
        shoal_objects_replicate.c  replication, arrivals, fetches
        shoal_objects_check.c      the consistency sweep's part

    The design of each operation is in shoal_objects.h.
*/
#ifndef SHOAL_OBJECTS_INTERNAL_H_INCLUDED
#define SHOAL_OBJECTS_INTERNAL_H_INCLUDED

#include "shoal_objects.h"
#include "shoal_object_store.h"
#include "shoal_fault.h"
#include "shoal_sink.h"
#include "shoal_transfer.h"
#include "shoal_worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

//  Room for a catalog key, and for a message of what went wrong.
#define OBJECTS_KEY_MAX 1100
#define OBJECTS_ERROR_MAX 512
//  The directory under the data directory that holds the instances.
#define OBJECTS_DIR "objects"
//  The holder of the write locks a removal takes.
#define OBJECTS_HOLDER_REMOVE "shoal:remove"
//  How long a peer has to answer a drop or a receive.
#define OBJECTS_PEER_TIMEOUT_MS 10000
//  An instance's bytes read per hash step when the node checks it.
#define OBJECTS_HASH_CHUNK (1024 * 1024)

//  An add in flight: the instance's file, written in order and hashed.
typedef struct {
    uint64_t sid;
    uint64_t iid;
    shoal_sink_t *sink;         //  its file: written on the worker while PENDING, closed by the reactor after
    uint64_t size;              //  the bytes announced
    uint64_t offset;            //  the bytes handed to the worker so far (the next chunk's offset)
    shoal_hasher_t hash;        //  of those bytes, with the algorithm the add named (the worker's while PENDING)
    size_t pending;             //  its file work on the worker, not back yet
    bool gone;                  //  given up while PENDING: the last answer frees it
    bool committing;            //  its commit is on the worker: no more chunks
    char *failed;               //  a chunk that could not be written: the add cannot commit (NULL: none)
    char *tenant;
    char *name;
    char *comment;
    bool update;                //  commit may move a bound name
    int64_t heard_ms;           //  monotonic ms of its last chunk
    bool local;                 //  a claim's checkpoint: the guest actor writes its file, no client does
    uint64_t memory_bytes;      //  a guest's image: its memory (0: plain bytes)
    uint64_t disk_bytes;        //  and its disk
} shoal_objects_upload_t;

//  An instance arriving on the object receiver.
typedef struct {
    char *id;                   //  the transfer's id ("o-IID")
    uint64_t sid;
    uint64_t iid;
    uint64_t size;
    shoal_checksum_t checksum;
    int64_t heard_ms;           //  monotonic ms the receiver last told of it
} shoal_objects_incoming_t;

struct _shoal_objects_t {
    const shoal_settings_t *settings;   //  the node's live settings (borrowed)
    char *endpoint;             //  where this node serves
    zcert_t *cluster;           //  presented by senders
    shoal_store_t *store;       //  locks and id reservations (borrowed)
    shoal_oplog_t *oplog;       //  the catalog (borrowed)
    shoal_mesh_t *mesh;         //  peers, for drops, receives and endpoints (borrowed)
    shoal_data_written_fn *written;     //  told of each catalog entry written here
    void *written_arg;
    zloop_t *loop;              //  the reactor's, once started
    zsock_t *router;            //  for late replies, once started
    shoal_receiver_t *receiver; //  takes replicas' bytes
    char *dir;                  //  DATA/objects
    uint64_t number;            //  this node's number in its ids
    uint64_t next[3];           //  by kind: the next id's counter
    uint64_t reserved[3];       //  by kind: counters below this are reserved
    zhashx_t *uploads;          //  adds in flight, by instance id text
    zhashx_t *incoming;         //  instances arriving, by transfer id
    zlistx_t *replications;     //  replicate requests being served
    zhashx_t *endpoints;        //  peers' endpoints, by node id
    zlistx_t *fetches;          //  fetches not ended yet (shoal_objects_replicate.c)
    zactor_t *worker;           //  the file work of adds and reads (made at start)
    zactor_t *verifier;         //  hashes instances for open and replicate (made at start): a long
                                //  hash of a forced verify holds up no add's chunks
    zlistx_t *ios;              //  shoal_objects_io_t handed to the workers and not back yet
    uint64_t holders;           //  numbers open holders, when the caller names none
};

// ---------------------------------------------------------------------------
//  Local locks (seed 001): readers, or one writer; a waiting writer stops
//  new readers.

typedef enum {
    OBJECTS_GRANTED,
    OBJECTS_WAITING,            //  a writer waits for readers to leave
    OBJECTS_REFUSED,
    OBJECTS_FAILED,
} shoal_objects_lock_result_t;

//  What a drop of an object's local instances did.
typedef struct {
    size_t removed;             //  gone now
    size_t waiting;             //  go when their last reader closes
    size_t busy;                //  another writer holds them: left to the sweep
} shoal_objects_drop_t;

// ---------------------------------------------------------------------------
//  Checksums of files

//  What a look at a local instance's file says.
typedef enum {
    OBJECTS_LOOK_GOOD,          //  present, of its size, and not to be hashed
    OBJECTS_LOOK_BAD,           //  missing, of another size, or of no checksum this node knows
    OBJECTS_LOOK_HASH,          //  its bytes must be hashed first (on the verifier)
} shoal_objects_look_t;

// ---------------------------------------------------------------------------
//  File work on the objects' workers (shoal_objects_io.c says how)

//  Told how the hash of an instance WAITER waits on ended: WHY NULL, the
//  bytes are the instance's; else what is wrong with them.
typedef void (shoal_objects_verified_fn) (shoal_objects_t *self, void *waiter, const char *why);

typedef enum {
    OBJECTS_IO_WRITE,           //  a chunk of an add, written at OFFSET and hashed
    OBJECTS_IO_COMMIT,          //  an add's bytes hashed to the end and synced
    OBJECTS_IO_READ,            //  LENGTH bytes of an instance's file from OFFSET
    OBJECTS_IO_DISCARD,         //  a removed instance's file, out of the way already: unlinked
    OBJECTS_IO_VERIFY,          //  an instance's file looked at, and hashed whole when it must be, for an
                                //  open or a replicate (the verifier's)
} shoal_objects_io_kind_t;

//  One piece of file work: made and freed on the reactor; the worker
//  writes only the results, and the upload's file and hash.
typedef struct {
    shoal_objects_io_kind_t kind;
    shoal_envelope_t *request;  //  the request's type and id, for the late reply
    zframe_t *routing_id;       //  the caller
    shoal_objects_upload_t *upload; //  write, commit: the add (its PENDING counts this)
    uint64_t instance_id;
    uint64_t offset;
    uint8_t *data;              //  write: the chunk (taken from the request)
    size_t size;                //  write: its bytes; read: the most to read; verify: the instance's
    shoal_checksum_t given;     //  commit: the caller's checksum (size 0: none given); verify: the instance's
    char *path;                 //  read, verify: the instance's file; discard: the file to unlink
    void *waiter;               //  verify: what waits for it (an open, a replicate)
    shoal_objects_verified_fn *verified;    //  told once it is back
    void (*forget) (void **waiter_p);   //  frees WAITER if it never comes back
    bool force;                 //  verify: hash the bytes whatever the look says
    uint64_t modified_ms;       //  verify: when the instance was checksummed
    //  Results, written by the worker.
    const char *call;           //  the call that failed (NULL: none)
    int error_no;               //  and its errno (0: it came short)
    shoal_checksum_t checksum;  //  commit, verify: what the bytes hash to
    uint64_t file_size;         //  read: the file's size; verify: the bytes hashed
    shoal_objects_look_t look;  //  verify: what the look at the file said
    char why[OBJECTS_ERROR_MAX];    //  verify: what is wrong with the file, when the look says BAD
    uint8_t *bytes;             //  read: what it read (GOT bytes)
    size_t got;
} shoal_objects_io_t;

// ---------------------------------------------------------------------------
//  shoal_objects_catalog.c

//  An id as its 16 hex digits (the caller frees it).
char *shoal_objects_id_text(uint64_t id);

//  Catalog keys, into KEY (OBJECTS_KEY_MAX bytes): name/TENANT/NAME,
//  object/SID, instance/SID/IID.

void shoal_objects_key_name(char *key, const char *tenant, const char *name);

void shoal_objects_key_object(char *key, uint64_t sid);

void shoal_objects_key_instance(char *key, uint64_t sid, uint64_t iid);

//  An instance's file (the caller frees it), and its URI in the catalog.
char *shoal_objects_instance_path(shoal_objects_t *self, uint64_t sid, uint64_t iid);

char *shoal_objects_instance_uri(uint64_t sid, uint64_t iid);

//  Wall-clock ms, as the catalog's times are.
uint64_t shoal_objects_now_ms(void);

//  Sets *FIELD to a copy of TEXT ("" for NULL), freeing what it held.
void shoal_objects_text_set(char **field, const char *text);

//  Writes RECORD (CODEC's) at catalog KEY, or deletes KEY, and tells the
//  sync. Each returns 0, or -1 with *ERROR_P.
int shoal_objects_catalog_put(shoal_objects_t *self, const char *key, const shoal_codec_t *codec, const void *record,
                              char **error_p);

int shoal_objects_catalog_delete(shoal_objects_t *self, const char *key, char **error_p);

//  The instances of SID in the catalog, appended to INFO. Returns 0 or -1.
int shoal_objects_instances_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, char **error_p);

//  Reads object SID with its instances into INFO. Returns 0 with
//  *FOUND_P, or -1.
int shoal_objects_object_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, bool *found_p,
                              char **error_p);

//  The storage id NAME of TENANT is bound to (0: none). Returns 0 or -1.
int shoal_objects_binding(shoal_objects_t *self, const char *tenant, const char *name, uint64_t *sid_p,
                          char **error_p);

//  An object's record as its own key holds it: INFO without instances.
int shoal_objects_object_write(shoal_objects_t *self, const shoal_msg_object_info_t *info, char **error_p);

//  An instance's record as its key holds it: no lock state, no endpoint.
int shoal_objects_instance_write(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, char **error_p);

//  One new id of KIND (0 with *ERROR_P when none can be given).
uint64_t shoal_objects_id_new(shoal_objects_t *self, shoal_object_id_kind_t kind, char **error_p);

//  Reads IID's lock into LOCK (a free one when it has none).
int shoal_objects_lock_read_state(shoal_objects_t *self, uint64_t iid, uint64_t sid, shoal_msg_object_lock_t *lock);

//  Takes HOLDER's lock of IID (of SID) in MODE ("read" or "write"); a
//  writer refused by readers waits (stops new readers) when WAIT. WHY
//  says why it was not granted.
shoal_objects_lock_result_t shoal_objects_lock_take(shoal_objects_t *self, uint64_t iid, uint64_t sid,
                                                    const char *holder, const char *mode, bool wait, char *why,
                                                    size_t why_size);

//  Releases HOLDER's lock of IID; LOCK_P (may be NULL) receives the lock
//  after. Returns 0, 1 when HOLDER held nothing, or -1.
int shoal_objects_lock_release(shoal_objects_t *self, uint64_t iid, const char *holder,
                               shoal_msg_object_lock_t *after);

//  Removes local instance IID of SID: its bytes, then its lock, then its
//  catalog key; once SID has no instance left, the object's key too.
int shoal_objects_instance_remove(shoal_objects_t *self, uint64_t sid, uint64_t iid, char **error_p);

//  Drops this node's instances of SID: each write-locked (or, while it
//  has readers, waited for), then removed.
int shoal_objects_drop_local(shoal_objects_t *self, uint64_t sid, shoal_objects_drop_t *drop, char **error_p);

//  Removes object INFO everywhere (seed 001's delete), its name unbound
//  first when still bound to it. MESSAGE receives what was done.
int shoal_objects_object_remove(shoal_objects_t *self, const shoal_msg_object_info_t *info, char *message,
                                size_t size, char **error_p);

//  Looks at an instance's file at PATH: present and of SIZE bytes. Its
//  bytes are to be hashed when FORCE, when it is small, or when the file
//  changed after MODIFIED_MS (when it was checksummed); EXPECTED (size 0:
//  of no algorithm this node knows) is what they must hash to. A stat
//  only, and of no node state: the verifier runs it (shoal_objects_verify_give),
//  never the reactor.
shoal_objects_look_t shoal_objects_file_look(const char *path, uint64_t size, uint64_t modified_ms,
                                             const shoal_checksum_t *expected, bool force, char *why,
                                             size_t why_size);

//  Marks local INSTANCE corrupt in the catalog: no open takes it again.
void shoal_objects_instance_mark_corrupt(shoal_objects_t *self, const shoal_msg_object_instance_t *instance,
                                         const char *why);

// ---------------------------------------------------------------------------
//  shoal_objects.c

//  The reply to REQUEST that failed with ERROR (taken): 507 when the store
//  is full, else 500; logged.
shoal_envelope_t *shoal_objects_failed(const shoal_envelope_t *request, shoal_objects_t *self, char *error);

//  Resolves the object a request names (a name, or a storage id) into
//  INFO for TENANT. Returns NULL, or the reply that ends the request.
shoal_envelope_t *shoal_objects_resolve(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                                        const shoal_msg_object_request_t *body, shoal_msg_object_info_t *info);

//  Frees an add (a zhashx destructor); one whose file work is still on
//  the worker is freed when the last of it comes back.
void shoal_objects_upload_destroy(void **item_p);

//  Sends REPLY (taken) to ROUTING_ID on the router: the answer to a request
//  answered after its handler returned.
void shoal_objects_reply_later(shoal_objects_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p);

//  Gives up an add: its bytes, lock and keys go.
void shoal_objects_upload_abort(shoal_objects_t *self, shoal_objects_upload_t *upload);

//  Steps 2 and 3 of an add whose bytes are complete, durable and hash to
//  CHECKSUM. Returns the reply to REQUEST (200: the object, bound).
shoal_envelope_t *shoal_objects_upload_commit(shoal_objects_t *self, const shoal_envelope_t *request,
                                              shoal_objects_upload_t *upload, const shoal_checksum_t *checksum);

// ---------------------------------------------------------------------------
//  shoal_objects_io.c

//  Frees a piece of file work (a zlistx destructor).
void shoal_objects_io_destroy(void **item_p);

//  The worker's run of one piece of work (shoal_worker).
void shoal_objects_io_run(void *item);

//  Hands work IO (made by REQUEST from ROUTING_ID) to the worker: the
//  request is answered once it is back.
void shoal_objects_io_give(shoal_objects_t *self, shoal_objects_io_t *io, const shoal_envelope_t *request,
                           zframe_t *routing_id);

//  Has the verifier look at local INSTANCE's file, read-locked, and hash
//  its bytes when the look says so (always when FORCE), for WAITER (taken;
//  FORGET frees it if the answer never comes back): VERIFIED is told once
//  it is done.
void shoal_objects_verify_give(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, bool force,
                               void *waiter, shoal_objects_verified_fn *verified, void (*forget) (void **waiter_p));

//  Takes the file at PATH (instance IID of SID) out of the way at once, by a
//  rename into DATA/objects/.discard, and has the worker unlink it: the
//  unlink of a large file can hold a thread for seconds (a 1 GiB replica's
//  took 2.4 s on this disk), and that thread must not be the reactor's.
//  Returns 0 when PATH is gone (or was), -1 when it is where it was (no
//  worker yet, or the rename failed: the caller unlinks it).
int shoal_objects_discard(shoal_objects_t *self, const char *path, uint64_t sid, uint64_t iid);

//  What a crash left in DATA/objects/.discard goes now, on the worker.
void shoal_objects_discard_leftovers(shoal_objects_t *self);

//  The worker is done with a piece of work: its request is answered.
int shoal_objects_worker_readable(zloop_t *loop, zsock_t *sock, void *arg);

// ---------------------------------------------------------------------------
//  shoal_objects_replicate.c

//  Frees a replication (a zlistx destructor): its senders stop.
void shoal_objects_replication_destroy(void **item_p);

//  Replicate: answered now, or once the copies are made (NULL: later).
//  The source, read-locked, is hashed first on the verifier when it is
//  small or changed since it was checksummed.
shoal_envelope_t *shoal_objects_replicate(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                                          const shoal_msg_object_request_t *body, zframe_t *routing_id);

//  Frees an arrival (a zhashx destructor).
void shoal_objects_incoming_destroy(void **item_p);

//  A peer's replicate: a new instance here, under a write lock, whose
//  bytes the object receiver takes.
shoal_envelope_t *shoal_objects_receive(shoal_objects_t *self, const shoal_envelope_t *request,
                                        const shoal_caller_t *caller);

//  An instance that arrived (or failed to): complete, or gone.
void shoal_objects_incoming_end(shoal_objects_t *self, shoal_objects_incoming_t *incoming, const char *error_text);

//  The object receiver told of an arrival.
int shoal_objects_receiver_readable(zloop_t *loop, zsock_t *reader, void *arg);

// ---------------------------------------------------------------------------
//  shoal_objects_check.c

//  OBJECT_CHECK: a whole check of this node's objects, its findings in the reply.
shoal_envelope_t *shoal_objects_check_request(shoal_objects_t *self, const shoal_envelope_t *request,
                                              const shoal_caller_t *caller, const shoal_msg_object_request_t *body);

#endif
