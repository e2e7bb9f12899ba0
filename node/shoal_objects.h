/*  shoal_objects: storage objects and their instances (seed 001).

    An object is a tenant's named bytes: an image a claim starts from, a
    claim's checkpoint, a disk. Its external name (tenant-scoped) is bound
    to a storage id; the bytes live in instances, one copy each on one node,
    under that node's data directory (DATA/objects/SID/IID). The catalog is
    the replicated "objects" dataset, one key per fact, each written by the
    node that owns the fact:

        name/TENANT/NAME      -> ObjectInfo   the binding (its storage id)
        object/SID            -> ObjectInfo   the object (size, checksum, ...)
        instance/SID/IID      -> ObjectInstance  written by the instance's node
        node/NUMBER           -> node id      who allocates ids with that number

    An instance's read/write lock and its lock records live on its node
    (shoal_object_store.h), changed together in one synced batch.

    DESIGN: the operations, each step with why it is there.

    Ids. Storage and instance ids (each their own namespace) are positive
    63-bit numbers: 24 bits of the node's number (BLAKE2b of its id, with
    its catalog key node/NUMBER to catch a collision) above a 39-bit
    counter. The counter is reserved ahead in blocks, the reservation
    synced before an id of the block is given out: a node killed at any
    point starts again above everything it could have given, so no id is
    ever given twice, and no node asks another.

    Checksums. An object's checksum carries its algorithm
    (shoal_checksum.h): XXH3-128 for what libshoal adds and what the node
    checkpoints, BLAKE2b-256 for what older nodes and clients wrote (and an
    add that names no algorithm). Each instance is checked with the
    algorithm of its own checksum, wherever it is checked (open, a restore,
    an arrival, the sweep), so that a catalog written by nodes of any age
    stays checkable. XXH3 because the checksum guards against corruption
    only (the bytes travel CURVE-authenticated): BLAKE2b cost a receiver
    about half as much again as the transfer's decryption, per byte, on
    the one core it has.

    Add. 1. A new object and instance are made: the instance's file created
    empty, its write lock and lock record written, then its catalog key
    (writing) and the object's. 2. Chunks come in order; each is written and
    hashed as it arrives (the node never reads a whole object back). 3.
    Commit: every byte arrived, the checksum matches the caller's, the file
    is durable; then the instance turns complete, the write lock goes, and
    only then is the name bound. A reader resolving the name meanwhile
    finds nothing, or the object it was bound to before: never bytes
    half-written.

    Update. An add with update set: the new object is made and committed as
    above while the old one serves its readers; commit moves the name to the
    new object in one write of its key (atomic: a reader resolves the old
    object or the new one). The old object is then removed as rm does; an
    instance a reader holds open goes when its last reader closes (its
    remover waits, which keeps new readers off); one abandoned in between
    is left to the sweep (shoal_objects_check).

    Remove. Every local instance is write-locked (or, while readers hold it,
    waited for: no new reader gets in); the name is unbound; then each
    locked instance's bytes go, then its catalog key and lock, and once no
    instance is left, the object's key. Instances on other nodes are
    dropped the same way by their nodes, told with OBJECT_DROP.

    Open and close. Open resolves the name and takes a read lock on one of
    this node's complete instances, trying each; an instance whose file
    changed since it was checksummed (size or time), or that is small, or
    when verify is asked, is checksummed first, and one that does not match
    is marked corrupt and skipped. When every local instance is locked for
    writing the caller is told to resolve the name again (409), never to
    spin on an instance that may be going; when this node has none, the
    reply lists the nodes that have (libshoal opens there).

    File work. An add's chunks, its commit's hash and sync, and a read's
    bytes are done by the objects' worker thread (shoal_worker.h), never
    the reactor, which checks each request, hands the work over and
    answers when it comes back as an event. The worker runs work in the
    order given: one add's chunks are written and hashed in order, and its
    commit follows the last. The reactor counts the bytes it handed over,
    so the next chunk is checked against where the last one will end; a
    chunk that cannot be written fails the add (only an abort is taken
    then). An add given up while its work is on the worker is freed when
    the last of it comes back. Open's check of an instance it takes, and
    replicate's of its source, hash the bytes on a second thread, the
    verifier (a forced check of a large instance holds up no add), under
    the read lock: the request waits there and goes on when the hash comes
    back, answered, or (open, the bytes bad) trying the next instance after
    resolving the name again.

    Guest images. An object may hold a guest's image (shoal_checkpoint.h):
    its record then carries the memory and disk the guest is made with.
    A claim's checkpoint is an add made by the node itself: the object and
    instance made under a write lock as above, the guest actor writing and
    hashing the file (never the reactor), then the same commit. A claim
    made from an object read-locks a complete local instance while the
    guest actor makes the guest from it, checking the checksum as it
    reads; a node with none first has the nearest node that holds one
    replicate it here (replicate with to = this node), then reads its own.

    Replicate. From a complete local instance, read-locked while it is sent,
    to nodes without a complete one: each target makes an instance under a
    write lock (OBJECT_RECEIVE) and its object receiver takes the bytes over
    a CURVE transfer stream (shoal_transfer.h), hashing them as they arrive;
    it acknowledges only bytes that match the checksum and are durable, and
    then its instance turns complete.
*/
#ifndef SHOAL_OBJECTS_H_INCLUDED
#define SHOAL_OBJECTS_H_INCLUDED

#include "shoal_auth.h"
#include "shoal_config.h"
#include "shoal_data.h"
#include "shoal_mesh.h"
#include "shoal_oplog.h"
#include "shoal_proto.h"
#include "shoal_store.h"

#define SHOAL_OBJECTS_DATASET "objects"
//  Ids: the node's number above a counter of this many bits.
#define SHOAL_OBJECTS_COUNTER_BITS 39
#define SHOAL_OBJECTS_NODE_BITS 24
//  Ids reserved ahead at a time (one synced write per block).
#define SHOAL_OBJECTS_ID_BLOCK 4096

typedef struct _shoal_objects_t shoal_objects_t;

//  The objects of the node NODE_ID in SETTINGS (borrowed, live), kept in
//  STORE and OPLOG (borrowed); WRITTEN with ARG is told of every catalog
//  entry written here (the sync pushes it). Its object receiver binds on
//  node/bind's host, any port, presenting CLUSTER (copied). Returns NULL
//  with *ERROR_P on failure.
shoal_objects_t *shoal_objects_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster,
                                   shoal_store_t *store, shoal_oplog_t *oplog, shoal_mesh_t *mesh,
                                   shoal_data_written_fn *written, void *arg, char **error_p);
void shoal_objects_destroy(shoal_objects_t **self_p);

//  Starts reading the object receiver's events on LOOP; late replies go
//  out on ROUTER.
int shoal_objects_start(shoal_objects_t *self, zloop_t *loop, zsock_t *router);

//  Gives up adds that sent nothing for ten minutes and arrivals whose
//  source went silent for move/step_timeout_ms. Call it from the tick.
void shoal_objects_tick(shoal_objects_t *self);

//  Leaves the loop: replications in flight end, their senders stop.
void shoal_objects_stop(shoal_objects_t *self);

bool shoal_objects_handles(shoal_msg_type_t type);

//  Answers REQUEST from CALLER. Returns the reply, or NULL when it is sent
//  later (replicate) to ROUTING_ID.
shoal_envelope_t *shoal_objects_handle(shoal_objects_t *self, const shoal_envelope_t *request,
                                       const shoal_caller_t *caller, zframe_t *routing_id);

//  Told of membership events (subscribe with shoal_mesh_subscribe): it
//  learns where peers serve.
void shoal_objects_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg);

//  Allocates COUNT ids of KIND into IDS. Returns 0, or -1 (the store
//  failed, or another node uses this node's number) with *ERROR_P.
int shoal_objects_ids(shoal_objects_t *self, shoal_object_id_kind_t kind, size_t count, uint64_t *ids,
                      char **error_p);

//  The number in the top bits of the ids NODE_ID allocates.
uint64_t shoal_objects_node_number(const char *node_id);

// ---------------------------------------------------------------------------
//  Guest images, for claims (claim create --from-object, claim checkpoint).
//  Replies are made for REQUEST, whose type's reply body is ObjectReply
//  where one is carried (claim checkpoint).

//  An object's guest image, as a guest is made from it.
typedef struct {
    uint64_t storage_id;
    uint64_t instance_id;       //  this node's instance, read-locked (0: this node holds none)
    char *holder;               //  the read lock's holder
    char *path;                 //  the instance's file
    uint64_t size;
    shoal_checksum_t checksum;  //  with its algorithm
    uint64_t memory_bytes;      //  the guest's memory
    uint64_t disk_bytes;        //  and its disk
} shoal_objects_image_t;

//  Resolves object NAME of TENANT, which must hold a guest's image, into
//  IMAGE, and read-locks one of this node's complete instances of it for
//  HOLDER (none: instance_id 0, fetch it). Returns NULL, or the reply that
//  ends the request (404 no such object, 400 not a guest image, 409 being
//  removed or replaced).
shoal_envelope_t *shoal_objects_image_open(shoal_objects_t *self, const shoal_envelope_t *request,
                                           const char *tenant, const char *name, const char *holder,
                                           shoal_objects_image_t *image);

//  Releases IMAGE's read lock, if it holds one, and frees what it holds.
//  With CORRUPT (why), its instance is marked corrupt first: its bytes did
//  not hash to the checksum. Safe on a zeroed image.
void shoal_objects_image_close(shoal_objects_t *self, shoal_objects_image_t *image, const char *corrupt);

//  Told how a fetch ended: RC 0 (this node holds a complete instance now)
//  or -1 with WHY; CANCELLED when the node stops (do nothing but free).
typedef void (shoal_objects_fetched_fn) (int rc, const char *why, bool cancelled, void *arg);

//  Has the nearest node that holds a complete instance of IMAGE's object
//  (TENANT's) replicate it here over the transfer streams, checksummed on
//  arrival (the mesh measures no distances: the nearest is the first alive
//  holder the catalog lists). Returns 0, and DONE (with ARG) is told later;
//  or -1 with *ERROR_P when no alive node holds one (DONE is not told).
int shoal_objects_fetch(shoal_objects_t *self, const char *tenant, const shoal_objects_image_t *image,
                        shoal_objects_fetched_fn *done, void *arg, char **error_p);

//  Begins the node's own add of NAME (with COMMENT) for TENANT: a new
//  object and its instance here under a write lock, its file empty at
//  *PATH_P (the caller frees it), to be written by the guest actor.
//  Returns NULL with *IID_P, or the reply that ends the request (409: the
//  name is bound).
shoal_envelope_t *shoal_objects_image_add(shoal_objects_t *self, const shoal_envelope_t *request,
                                          const char *tenant, const char *name, const char *comment,
                                          uint64_t *iid_p, char **path_p);

//  Commits the add of IID: its file holds SIZE bytes, durable, hashing to
//  CHECKSUM, a guest image of MEMORY_BYTES and DISK_BYTES. The instance
//  turns complete, its lock goes and the name is bound. Returns the reply
//  (200 carries the object).
shoal_envelope_t *shoal_objects_image_commit(shoal_objects_t *self, const shoal_envelope_t *request,
                                             uint64_t iid, uint64_t size, const shoal_checksum_t *checksum,
                                             uint64_t memory_bytes, uint64_t disk_bytes);

//  Gives up the add of IID: its bytes, lock and keys go.
void shoal_objects_image_abort(shoal_objects_t *self, uint64_t iid);

// ---------------------------------------------------------------------------
//  The consistency sweep's part for objects (seed 001), for fsck to call.

//  One finding: KEY names what is wrong ("instance/SID/IID", a file, a lock
//  record), WHAT says what, REPAIRED whether the check mended it (and how,
//  in WHAT). All borrowed for the call.
typedef void (shoal_objects_finding_fn) (const char *key, const char *what, bool repaired, void *arg);

//  A check walks the catalog and this node's instances, locks and files:
//    - every object has at least one instance, every instance an object;
//    - each local complete instance has its file, of its size, and its
//      bytes hash to its checksum (with REPAIR: marked corrupt, and a node
//      with a good copy asked to replicate here);
//    - a local instance being written has an add or a transfer in flight
//      (with REPAIR: removed, bytes, lock and key);
//    - each local lock's readers, writer and waiter equal its lock records,
//      and every record belongs to a lock of a local instance in the
//      catalog (with REPAIR: the lock recounted from its records, orphan
//      records removed);
//    - files under DATA/objects that no instance names (with REPAIR: removed);
//    - an object with no name bound and no reader left (an update's
//      abandoned object, with REPAIR: removed).
//  It reads the live catalog, a slice at a time on the reactor: a page of
//  catalog keys, a file, or a few KiB of an instance's bytes per unit (an
//  instance is hashed across many slices and named only if the catalog
//  still says what it said once its hash is done). It mends as it goes.
typedef struct _shoal_objects_check_t shoal_objects_check_t;

shoal_objects_check_t *shoal_objects_check_new(shoal_objects_t *self, bool repair);
void shoal_objects_check_destroy(shoal_objects_check_t **check_p);

//  Looks at up to BUDGET units, telling FN of each finding; *DONE once it
//  has seen everything. Returns the units looked at, or -1 when the catalog
//  or the store cannot be read (*ERROR_P says why; the check is over).
int64_t shoal_objects_check_step(shoal_objects_check_t *check, size_t budget, bool *done,
                                 shoal_objects_finding_fn *fn, void *arg, char **error_p);

//  A whole check at once, step after step (an operator's object check).
//  Returns the number of findings, or -1 with *ERROR_P.
int shoal_objects_check(shoal_objects_t *self, bool repair, shoal_objects_finding_fn *fn, void *arg,
                        char **error_p);

#endif
