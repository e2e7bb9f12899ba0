/*  shoal_objects: storage objects, instances, their locks and their ids.
    See shoal_objects.h for the design of each operation. */
#include "shoal_objects.h"
#include "shoal_object_store.h"
#include "shoal_fault.h"
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

#define S_KEY_MAX 1100
#define S_ERROR_MAX 512
//  The directory under the data directory that holds the instances.
#define S_OBJECTS_DIR "objects"
//  Under DATA/objects: removed instances' files, until the worker unlinks them
//  (a dot: the sweep's look at the files passes it by).
#define S_DISCARD_DIR ".discard"
//  An instance smaller than this is checksummed at every open.
#define S_VERIFY_ALWAYS_BYTES (64ull * 1024 * 1024)
//  Holders of the locks the node takes itself.
#define S_HOLDER_ADD "shoal:add"
#define S_HOLDER_REMOVE "shoal:remove"
#define S_HOLDER_RECEIVE "shoal:receive"
#define S_HOLDER_REPLICATE "shoal:replicate"
//  How long a peer has to answer a drop or a receive.
#define S_PEER_TIMEOUT_MS 10000
//  An add that wrote nothing for this long is given up.
#define S_UPLOAD_IDLE_MS (10 * 60 * 1000)
//  How long a source has to answer a fetch: its answer comes once the
//  copy is done (an arrival that is still under way ends the fetch itself).
#define S_FETCH_ANSWER_MS (10 * 60 * 1000)
//  A check's unit of work: a catalog key, a lock, a file, or this many
//  bytes of an instance hashed (about as long as reading a key here).
#define S_CHECK_UNIT 4096
//  What a check run whole (OBJECT_CHECK, shoal_objects_check) takes per step.
#define S_CHECK_WHOLE_STEP 1000
//  A transfer's bytes read per hash step when the node checks an instance.
#define S_HASH_CHUNK (1024 * 1024)
//  How often the worker looks again at a hold (SHOAL_FAULT objects:io:hold).
#define S_HOLD_POLL_MS 20

//  An add in flight: the instance's file, written in order and hashed.
typedef struct {
    uint64_t sid;
    uint64_t iid;
    int fd;                     //  written on the worker while PENDING, closed by the reactor after
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
} s_upload_t;

//  An instance arriving on the object receiver.
typedef struct {
    char *id;                   //  the transfer's id ("o-IID")
    uint64_t sid;
    uint64_t iid;
    uint64_t size;
    shoal_checksum_t checksum;
    int64_t heard_ms;           //  monotonic ms the receiver last told of it
} s_incoming_t;

typedef struct _s_replication_t s_replication_t;

//  An open that tries this node's instances one after the other. While an
//  instance's bytes are hashed on the verifier it waits there, read lock
//  held; then it is answered, or it resolves the name again and goes on.
typedef struct {
    shoal_envelope_t *request;  //  the request's type and id, for a late reply
    zframe_t *routing_id;       //  the caller
    char *tenant;
    char *name;                 //  what the open names: a name,
    uint64_t storage_id;        //  or a storage id
    uint64_t instance_id;       //  one instance only (0: any)
    bool verify;                //  every instance taken is hashed
    char *holder;               //  the read lock's holder
    shoal_msg_object_info_t info;   //  the object as last resolved
    size_t index;               //  the instance of INFO being hashed
    zhashx_t *bad;              //  instance ids (text) found bad: never hashed again, even unmarked
} s_opening_t;

//  A fetch of an object to this node, for a guest to start from. It ends
//  when its instance arrived (or failed to), or when the source's answer
//  says it will not come; it is freed once both the end and the answer
//  (which the mesh always gives, NULL at worst) are in.
typedef struct {
    shoal_objects_t *self;
    uint64_t sid;
    char *source;               //  the node asked to replicate it here
    shoal_objects_fetched_fn *done;
    void *arg;
    bool ended;                 //  DONE was told
    bool answered;              //  the source's answer came
} s_fetch_t;

//  One target of a replication.
typedef struct {
    s_replication_t *replication;   //  the one it belongs to
    char *node;                 //  the target
    uint64_t iid;               //  the instance it made (0: not yet)
    zactor_t *sender;           //  the stream, once the target prepared
    bool done;                  //  ended, well or not
    bool ok;
} s_target_t;

//  A replicate request being served.
struct _s_replication_t {
    shoal_objects_t *self;
    uint64_t sid;
    uint64_t source_iid;        //  the local instance read-locked while it is sent
    char *holder;               //  that lock's holder
    char *tenant;
    char *name;
    uint64_t size;
    shoal_checksum_t checksum;
    shoal_envelope_t *request;  //  for the late reply
    zframe_t *routing_id;       //  the caller
    s_target_t *targets;        //  COUNT
    size_t count;
    uint32_t had;               //  complete instances before it began
    char error[S_ERROR_MAX];    //  the first failure
    //  Until its targets are chosen (its source hashed first, maybe).
    shoal_msg_object_info_t info;   //  the object
    uint32_t copies;            //  complete instances wanted
    char *to;                   //  the one node to copy to (NULL: any)
};

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
    zlistx_t *fetches;          //  s_fetch_t not ended yet
    zactor_t *worker;           //  the file work of adds and reads (made at start)
    zactor_t *verifier;         //  hashes instances for open and replicate (made at start): a long
                                //  hash of a forced verify holds up no add's chunks
    zlistx_t *ios;              //  s_io_t handed to it and not back yet
    uint64_t holders;           //  numbers open holders, when the caller names none
};

// ---------------------------------------------------------------------------
//  Small helpers

static char *
s_id_text(uint64_t id)
{
    return zsys_sprintf("%016" PRIx64, id);
}

static void
s_key_name(char *key, const char *tenant, const char *name)
{
    snprintf(key, S_KEY_MAX, "name/%s/%s", tenant, name);
}

static void
s_key_object(char *key, uint64_t sid)
{
    snprintf(key, S_KEY_MAX, "object/%016" PRIx64, sid);
}

static void
s_key_instance(char *key, uint64_t sid, uint64_t iid)
{
    snprintf(key, S_KEY_MAX, "instance/%016" PRIx64 "/%016" PRIx64, sid, iid);
}

static char *
s_instance_path(shoal_objects_t *self, uint64_t sid, uint64_t iid)
{
    return zsys_sprintf("%s/%016" PRIx64 "/%016" PRIx64, self->dir, sid, iid);
}

static char *
s_instance_uri(uint64_t sid, uint64_t iid)
{
    return zsys_sprintf("file:%s/%016" PRIx64 "/%016" PRIx64, S_OBJECTS_DIR, sid, iid);
}

static uint64_t
s_now_ms(void)
{
    return (uint64_t) zclock_time();
}

static void
s_text_set(char **field, const char *text)
{
    free(*field);
    *field = strdup(text ? text : "");
}

uint64_t
shoal_objects_node_number(const char *node_id)
{
    uint8_t digest[crypto_generichash_BYTES];
    crypto_generichash(digest, sizeof digest, (const uint8_t *) node_id, strlen(node_id), NULL, 0);
    uint64_t number = ((uint64_t) digest[0] << 16) | ((uint64_t) digest[1] << 8) | digest[2];
    return number & ((1ull << SHOAL_OBJECTS_NODE_BITS) - 1);
}

// ---------------------------------------------------------------------------
//  The catalog: keys of the replicated "objects" dataset

static int
s_catalog_put(shoal_objects_t *self, const char *key, const shoal_codec_t *codec, const void *record,
              char **error_p)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[S_ERROR_MAX];
    if (codec->encode(record, &bytes, &size, error, sizeof error)) {
        *error_p = zsys_sprintf("catalog key %s: %s", key, error);
        return -1;
    }
    shoal_oplog_entry_t entry = { 0 };
    int rc = shoal_oplog_write(self->oplog, SHOAL_OBJECTS_DATASET, key, SHOAL_OPLOG_PUT, bytes, size, &entry);
    free(bytes);
    if (rc) {
        *error_p = zsys_sprintf("cannot write catalog key %s: %s", key, shoal_oplog_error(self->oplog));
        return -1;
    }
    if (self->written)
        self->written(&entry, self->written_arg);
    shoal_oplog_entry_codec.clear(&entry);
    return 0;
}

static int
s_catalog_delete(shoal_objects_t *self, const char *key, char **error_p)
{
    shoal_oplog_entry_t entry = { 0 };
    if (shoal_oplog_write(self->oplog, SHOAL_OBJECTS_DATASET, key, SHOAL_OPLOG_DELETE, NULL, 0, &entry)) {
        *error_p = zsys_sprintf("cannot delete catalog key %s: %s", key, shoal_oplog_error(self->oplog));
        return -1;
    }
    if (self->written)
        self->written(&entry, self->written_arg);
    shoal_oplog_entry_codec.clear(&entry);
    return 0;
}

//  Reads KEY into RECORD (CODEC's). Returns 0 with *FOUND_P (a tombstone
//  is not found), or -1 with *ERROR_P: the store failed, or the value does
//  not decode (a corrupt value is an error naming its key, never skipped).
static int
s_catalog_get(shoal_objects_t *self, const char *key, const shoal_codec_t *codec, void *record, bool *found_p,
              char **error_p)
{
    shoal_kv_record_t value = { 0 };
    *found_p = false;
    if (shoal_oplog_kv_get(self->oplog, SHOAL_OBJECTS_DATASET, key, &value, found_p)) {
        *error_p = zsys_sprintf("cannot read catalog key %s: %s", key, shoal_oplog_error(self->oplog));
        return -1;
    }
    int rc = 0;
    if (*found_p && value.deleted)
        *found_p = false;
    else
    if (*found_p) {
        char error[S_ERROR_MAX];
        if (codec->decode(value.value, value.value_size, record, error, sizeof error)) {
            *error_p = zsys_sprintf("catalog key %s holds no %s: %s", key, codec->name, error);
            *found_p = false;
            rc = -1;
        }
    }
    shoal_kv_codec.clear(&value);
    return rc;
}

//  The instances of SID in the catalog, appended to INFO. Returns 0 or -1.
static int
s_instances_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, char **error_p)
{
    char prefix[S_KEY_MAX];
    snprintf(prefix, sizeof prefix, "instance/%016" PRIx64 "/", sid);
    shoal_kv_list_t list = { 0 };
    if (shoal_oplog_kv_scan(self->oplog, SHOAL_OBJECTS_DATASET, prefix, NULL, SHOAL_OBJECT_INSTANCES_MAX, &list)) {
        *error_p = zsys_sprintf("cannot scan catalog keys %s: %s", prefix, shoal_oplog_error(self->oplog));
        return -1;
    }
    int rc = 0;
    info->instances = (shoal_msg_object_instance_t *) zmalloc((list.count + 1) * sizeof *info->instances);
    for (size_t i = 0; i < list.count && rc == 0; i++) {
        char error[S_ERROR_MAX];
        shoal_msg_object_instance_t *instance = &info->instances[info->count];
        if (shoal_msg_object_instance_codec.decode(list.items[i].record.value, list.items[i].record.value_size,
                                                   instance, error, sizeof error)) {
            *error_p = zsys_sprintf("catalog key %s holds no instance: %s", list.items[i].key, error);
            rc = -1;
        }
        else
            info->count++;
    }
    shoal_kv_list_clear(&list);
    return rc;
}

//  Fills what this node knows beside the catalog: the locks of its own
//  instances, and where each instance's node serves.
static void
s_instances_annotate(shoal_objects_t *self, shoal_msg_object_info_t *info)
{
    for (size_t i = 0; i < info->count; i++) {
        shoal_msg_object_instance_t *instance = &info->instances[i];
        bool mine = streq(instance->node, self->settings->node_id);
        const char *endpoint = mine ? self->endpoint : (const char *) zhashx_lookup(self->endpoints, instance->node);
        s_text_set(&instance->endpoint, endpoint ? endpoint : "");
        if (!mine)
            continue;
        shoal_msg_object_lock_t lock = { 0 };
        bool found = false;
        if (shoal_object_store_lock_get(self->store, instance->instance_id, &lock, &found) == 0 && found) {
            instance->readers = lock.readers;
            s_text_set(&instance->writer, lock.writer);
            s_text_set(&instance->waiter, lock.waiter);
        }
        shoal_msg_object_lock_codec.clear(&lock);
    }
}

//  Reads object SID with its instances into INFO. Returns 0 with
//  *FOUND_P, or -1.
static int
s_object_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, bool *found_p, char **error_p)
{
    char key[S_KEY_MAX];
    s_key_object(key, sid);
    if (s_catalog_get(self, key, &shoal_msg_object_info_codec, info, found_p, error_p))
        return -1;
    if (!*found_p)
        return 0;
    //  The object's own key carries no instances: they are keys of their own.
    if (info->count) {
        *error_p = zsys_sprintf("catalog key %s holds %zu instances: an object's instances are keys of their own",
                                key, info->count);
        shoal_msg_object_info_codec.clear(info);
        *found_p = false;
        return -1;
    }
    if (s_instances_read(self, sid, info, error_p)) {
        shoal_msg_object_info_codec.clear(info);
        return -1;
    }
    s_instances_annotate(self, info);
    return 0;
}

//  The storage id NAME of TENANT is bound to (0: none). Returns 0 or -1.
static int
s_binding(shoal_objects_t *self, const char *tenant, const char *name, uint64_t *sid_p, char **error_p)
{
    char key[S_KEY_MAX];
    s_key_name(key, tenant, name);
    shoal_msg_object_info_t binding = { 0 };
    bool found = false;
    *sid_p = 0;
    if (s_catalog_get(self, key, &shoal_msg_object_info_codec, &binding, &found, error_p))
        return -1;
    if (found)
        *sid_p = binding.storage_id;
    shoal_msg_object_info_codec.clear(&binding);
    return 0;
}

//  An object's record as its own key holds it: INFO without instances.
static int
s_object_write(shoal_objects_t *self, const shoal_msg_object_info_t *info, char **error_p)
{
    shoal_msg_object_info_t bare = *info;
    bare.instances = NULL;
    bare.count = 0;
    char key[S_KEY_MAX];
    s_key_object(key, info->storage_id);
    return s_catalog_put(self, key, &shoal_msg_object_info_codec, &bare, error_p);
}

static int
s_instance_write(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, char **error_p)
{
    //  Lock state and endpoint belong to replies, not to the catalog.
    shoal_msg_object_instance_t bare = *instance;
    bare.readers = 0;
    bare.writer = NULL;
    bare.waiter = NULL;
    bare.endpoint = NULL;
    char key[S_KEY_MAX];
    s_key_instance(key, instance->storage_id, instance->instance_id);
    return s_catalog_put(self, key, &shoal_msg_object_instance_codec, &bare, error_p);
}

// ---------------------------------------------------------------------------
//  Ids

//  Checks that no other node claims this node's number, and claims it
//  when nobody does. Returns 0, or -1 with *ERROR_P.
static int
s_number_check(shoal_objects_t *self, char **error_p)
{
    char key[S_KEY_MAX];
    snprintf(key, sizeof key, "node/%06" PRIx64, self->number);
    shoal_kv_record_t value = { 0 };
    bool found = false;
    if (shoal_oplog_kv_get(self->oplog, SHOAL_OBJECTS_DATASET, key, &value, &found)) {
        *error_p = zsys_sprintf("cannot read catalog key %s: %s", key, shoal_oplog_error(self->oplog));
        return -1;
    }
    int rc = 0;
    const char *me = self->settings->node_id;
    if (found && !value.deleted && (value.value_size != strlen(me) || memcmp(value.value, me, value.value_size))) {
        *error_p = zsys_sprintf("ids: node %.*s uses this node's number %06" PRIx64 " (catalog key %s): ids "
                                "would not be unique; rename one of the two nodes", (int) value.value_size,
                                (const char *) value.value, self->number, key);
        rc = -1;
    }
    else
    if (!found || value.deleted) {
        shoal_oplog_entry_t entry = { 0 };
        rc = shoal_oplog_write(self->oplog, SHOAL_OBJECTS_DATASET, key, SHOAL_OPLOG_PUT, me, strlen(me), &entry);
        if (rc)
            *error_p = zsys_sprintf("cannot write catalog key %s: %s", key, shoal_oplog_error(self->oplog));
        else
        if (self->written)
            self->written(&entry, self->written_arg);
        shoal_oplog_entry_codec.clear(&entry);
    }
    shoal_kv_codec.clear(&value);
    return rc;
}

int
shoal_objects_ids(shoal_objects_t *self, shoal_object_id_kind_t kind, size_t count, uint64_t *ids, char **error_p)
{
    if (kind != SHOAL_OBJECT_ID_STORAGE && kind != SHOAL_OBJECT_ID_INSTANCE) {
        *error_p = zsys_sprintf("id kind %d is neither storage nor instance", (int) kind);
        return -1;
    }
    const uint64_t limit = 1ull << SHOAL_OBJECTS_COUNTER_BITS;
    for (size_t i = 0; i < count; i++) {
        if (self->next[kind] >= self->reserved[kind]) {
            //  Every block checks the number again: a node that joined
            //  since with the same number is found before more ids go.
            if (s_number_check(self, error_p))
                return -1;
            uint64_t reserve = self->reserved[kind] + SHOAL_OBJECTS_ID_BLOCK;
            if (reserve > limit) {
                *error_p = zsys_sprintf("ids: this node gave out every %s id its number allows",
                                        kind == SHOAL_OBJECT_ID_STORAGE ? "storage" : "instance");
                return -1;
            }
            if (shoal_object_store_ids_reserve(self->store, kind, reserve)) {
                *error_p = zsys_sprintf("ids: cannot reserve the next block: %s", shoal_store_error(self->store));
                return -1;
            }
            self->reserved[kind] = reserve;
        }
        ids[i] = (self->number << SHOAL_OBJECTS_COUNTER_BITS) | self->next[kind]++;
    }
    return 0;
}

static uint64_t
s_id_new(shoal_objects_t *self, shoal_object_id_kind_t kind, char **error_p)
{
    uint64_t id = 0;
    return shoal_objects_ids(self, kind, 1, &id, error_p) == 0 ? id : 0;
}

// ---------------------------------------------------------------------------
//  Local locks (seed 001): readers, or one writer; a waiting writer stops
//  new readers.

typedef enum {
    S_GRANTED,
    S_WAITING,                  //  a writer waits for readers to leave
    S_REFUSED,
    S_FAILED,
} s_lock_result_t;

static void
s_lock_init(shoal_msg_object_lock_t *lock, uint64_t iid, uint64_t sid)
{
    memset(lock, 0, sizeof *lock);
    lock->instance_id = iid;
    lock->storage_id = sid;
    lock->writer = strdup("");
    lock->waiter = strdup("");
}

//  Reads IID's lock into LOCK (a free one when it has none).
static int
s_lock_read_state(shoal_objects_t *self, uint64_t iid, uint64_t sid, shoal_msg_object_lock_t *lock)
{
    bool found = false;
    if (shoal_object_store_lock_get(self->store, iid, lock, &found))
        return -1;
    if (!found)
        s_lock_init(lock, iid, sid);
    return 0;
}

static s_lock_result_t
s_lock_take(shoal_objects_t *self, uint64_t iid, uint64_t sid, const char *holder, const char *mode, bool wait,
            char *why, size_t why_size)
{
    shoal_msg_object_lock_t lock;
    if (s_lock_read_state(self, iid, sid, &lock)) {
        snprintf(why, why_size, "%s", shoal_store_error(self->store));
        return S_FAILED;
    }
    s_lock_result_t result = S_GRANTED;
    const char *record_mode = mode;
    if (streq(mode, "read")) {
        if (*lock.writer || *lock.waiter) {
            snprintf(why, why_size, "instance %016" PRIx64 " is %s %s", iid,
                     *lock.writer ? "locked for writing by" : "awaited by writer", *lock.writer ? lock.writer : lock.waiter);
            result = S_REFUSED;
        }
        else
            lock.readers++;
    }
    else
    if (streq(lock.writer, holder))
        record_mode = NULL;
    else
    if (*lock.writer || (*lock.waiter && !streq(lock.waiter, holder))) {
        snprintf(why, why_size, "instance %016" PRIx64 " is %s %s", iid, *lock.writer ? "locked for writing by"
                 : "awaited by writer", *lock.writer ? lock.writer : lock.waiter);
        result = S_REFUSED;
    }
    else
    if (lock.readers) {
        if (!wait) {
            snprintf(why, why_size, "instance %016" PRIx64 " has %" PRIu64 " reader(s)", iid, lock.readers);
            result = S_REFUSED;
        }
        else {
            result = S_WAITING;
            if (streq(lock.waiter, holder))
                record_mode = NULL;
            else {
                s_text_set(&lock.waiter, holder);
                record_mode = "wait";
            }
        }
    }
    else {
        s_text_set(&lock.writer, holder);
        if (streq(lock.waiter, holder))
            s_text_set(&lock.waiter, "");
    }
    if (result != S_REFUSED && record_mode) {
        shoal_msg_object_lock_record_t record = {
            .instance_id = iid, .holder = (char *) holder, .mode = (char *) record_mode, .time_ms = s_now_ms()
        };
        if (shoal_object_store_lock_write(self->store, &lock, &record, NULL)) {
            snprintf(why, why_size, "%s", shoal_store_error(self->store));
            result = S_FAILED;
        }
    }
    shoal_msg_object_lock_codec.clear(&lock);
    return result;
}

//  Releases HOLDER's lock of IID; LOCK_P (may be NULL) receives the lock
//  after. Returns 0, 1 when HOLDER held nothing, or -1.
static int
s_lock_release(shoal_objects_t *self, uint64_t iid, const char *holder, shoal_msg_object_lock_t *after)
{
    shoal_msg_object_lock_record_t record = { 0 };
    bool found = false;
    if (shoal_object_store_record_get(self->store, iid, holder, &record, &found))
        return -1;
    if (!found)
        return 1;
    shoal_msg_object_lock_t lock;
    int rc = s_lock_read_state(self, iid, 0, &lock);
    if (rc == 0) {
        if (streq(record.mode, "read") && lock.readers)
            lock.readers--;
        if (streq(record.mode, "write") && streq(lock.writer, holder))
            s_text_set(&lock.writer, "");
        if (streq(record.mode, "wait") && streq(lock.waiter, holder))
            s_text_set(&lock.waiter, "");
        rc = shoal_object_store_lock_write(self->store, &lock, NULL, holder);
    }
    if (rc == 0 && after)
        *after = lock;
    else
        shoal_msg_object_lock_codec.clear(&lock);
    shoal_msg_object_lock_record_codec.clear(&record);
    return rc;
}

// ---------------------------------------------------------------------------
//  Removing instances and objects

static int s_discard(shoal_objects_t *self, const char *path, uint64_t sid, uint64_t iid);

//  Removes local instance IID of SID: its bytes, then its lock, then its
//  catalog key; once SID has no instance left, the object's key too.
static int
s_instance_remove(shoal_objects_t *self, uint64_t sid, uint64_t iid, char **error_p)
{
    char *path = s_instance_path(self, sid, iid);
    int rc = 0;
    if (s_discard(self, path, sid, iid) != 0 && unlink(path) != 0 && errno != ENOENT) {
        *error_p = zsys_sprintf("cannot remove %s: %s", path, strerror(errno));
        rc = -1;
    }
    //  The object's directory goes with its last instance here.
    char *dir = zsys_sprintf("%s/%016" PRIx64, self->dir, sid);
    rmdir(dir);
    free(dir);
    free(path);
    if (rc == 0 && shoal_object_store_lock_remove(self->store, iid)) {
        *error_p = zsys_sprintf("cannot remove the lock of instance %016" PRIx64 ": %s", iid,
                                shoal_store_error(self->store));
        rc = -1;
    }
    char key[S_KEY_MAX];
    s_key_instance(key, sid, iid);
    if (rc == 0)
        rc = s_catalog_delete(self, key, error_p);
    shoal_msg_object_info_t left = { 0 };
    if (rc == 0)
        rc = s_instances_read(self, sid, &left, error_p);
    if (rc == 0 && left.count == 0) {
        s_key_object(key, sid);
        rc = s_catalog_delete(self, key, error_p);
    }
    shoal_msg_object_info_codec.clear(&left);
    return rc;
}

//  What a drop of an object's local instances did.
typedef struct {
    size_t removed;             //  gone now
    size_t waiting;             //  go when their last reader closes
    size_t busy;                //  another writer holds them: left to the sweep
} s_drop_t;

//  Drops this node's instances of SID: each write-locked (or, while it
//  has readers, waited for), then removed.
static int
s_drop_local(shoal_objects_t *self, uint64_t sid, s_drop_t *drop, char **error_p)
{
    memset(drop, 0, sizeof *drop);
    shoal_msg_object_info_t info = { 0 };
    info.storage_id = sid;
    if (s_instances_read(self, sid, &info, error_p))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < info.count && rc == 0; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (!streq(instance->node, self->settings->node_id))
            continue;
        char id[32];
        snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
        s_upload_t *upload = (s_upload_t *) zhashx_lookup(self->uploads, id);
        if (upload) {
            //  An add still writing it: it is given up.
            zhashx_delete(self->uploads, id);
            shoal_object_store_lock_remove(self->store, instance->instance_id);
        }
        char why[S_ERROR_MAX];
        s_lock_result_t taken = s_lock_take(self, instance->instance_id, sid, S_HOLDER_REMOVE, "write", true, why,
                                            sizeof why);
        if (taken == S_GRANTED) {
            rc = s_instance_remove(self, sid, instance->instance_id, error_p);
            drop->removed += rc == 0;
        }
        else
        if (taken == S_WAITING)
            drop->waiting++;
        else
        if (taken == S_REFUSED) {
            zsys_warning("objects: instance %016" PRIx64 " of object %016" PRIx64 " stays for now: %s",
                         instance->instance_id, sid, why);
            drop->busy++;
        }
        else {
            *error_p = zsys_sprintf("cannot lock instance %016" PRIx64 ": %s", instance->instance_id, why);
            rc = -1;
        }
    }
    shoal_msg_object_info_codec.clear(&info);
    return rc;
}

static void
s_drop_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    char *sid = (char *) arg;
    if (!reply || reply->status != SHOAL_STATUS_OK)
        zsys_warning("objects: %s did not drop its instances of object %s (%s): the sweep will", node_id, sid,
                     reply ? reply->message : "no answer");
    free(sid);
}

//  Tells each other node holding an instance of INFO to drop it. Returns
//  how many were told.
static size_t
s_drop_remote(shoal_objects_t *self, const shoal_msg_object_info_t *info)
{
    zhashx_t *told = zhashx_new();
    size_t count = 0;
    for (size_t i = 0; i < info->count; i++) {
        const char *node = info->instances[i].node;
        if (streq(node, self->settings->node_id) || zhashx_lookup(told, node))
            continue;
        zhashx_insert(told, node, (void *) node);
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 0);
        shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
        body->op = SHOAL_OBJECT_DROP;
        body->tenant = strdup(info->tenant);
        body->storage_id = info->storage_id;
        char *arg = s_id_text(info->storage_id);
        if (shoal_mesh_send(self->mesh, node, &request, S_PEER_TIMEOUT_MS, s_drop_answered, arg) == 0)
            count++;
        else {
            zsys_warning("objects: %s is no peer now: its instances of object %s are left to the sweep", node, arg);
            free(arg);
            shoal_envelope_destroy(&request);
        }
    }
    zhashx_destroy(&told);
    return count;
}

//  Removes object INFO everywhere (seed 001's delete), its name unbound
//  first when still bound to it. MESSAGE receives what was done.
static int
s_object_remove(shoal_objects_t *self, const shoal_msg_object_info_t *info, char *message, size_t size,
                char **error_p)
{
    uint64_t bound = 0;
    if (*info->name && s_binding(self, info->tenant, info->name, &bound, error_p))
        return -1;
    if (bound == info->storage_id) {
        char key[S_KEY_MAX];
        s_key_name(key, info->tenant, info->name);
        if (s_catalog_delete(self, key, error_p))
            return -1;
    }
    s_drop_t drop;
    if (s_drop_local(self, info->storage_id, &drop, error_p))
        return -1;
    size_t told = s_drop_remote(self, info);
    snprintf(message, size, "removed object %016" PRIx64 ": %zu instance(s) here, %zu waiting for their readers, "
             "%zu busy, %zu node(s) told to drop theirs", info->storage_id, drop.removed, drop.waiting, drop.busy, told);
    return 0;
}

// ---------------------------------------------------------------------------
//  Checksums of files

//  What a look at a local instance's file says.
typedef enum {
    S_LOOK_GOOD,                //  present, of its size, and not to be hashed
    S_LOOK_BAD,                 //  missing, of another size, or of no checksum this node knows
    S_LOOK_HASH,                //  its bytes must be hashed first (on the verifier)
} s_look_t;

//  Looks at local INSTANCE's file: present and of its size. Its bytes are
//  to be hashed when FORCE, when it is small, or when it changed since it
//  was checksummed. A stat only: the hash is the verifier's (s_verify_give).
static s_look_t
s_instance_look(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, bool force, char *why,
                size_t why_size)
{
    char *path = s_instance_path(self, instance->storage_id, instance->instance_id);
    struct stat info;
    shoal_checksum_t expected;
    s_look_t look = S_LOOK_GOOD;
    if (stat(path, &info) != 0)
        snprintf(why, why_size, "its file %s is missing: %s", path, strerror(errno)), look = S_LOOK_BAD;
    else
    if ((uint64_t) info.st_size != instance->size)
        snprintf(why, why_size, "its file %s holds %" PRIu64 " bytes, not %" PRIu64, path, (uint64_t) info.st_size,
                 instance->size), look = S_LOOK_BAD;
    else {
        uint64_t changed_ms = (uint64_t) info.st_mtim.tv_sec * 1000 + (uint64_t) info.st_mtim.tv_nsec / 1000000;
        if (force || instance->size < S_VERIFY_ALWAYS_BYTES || changed_ms > instance->modified_ms) {
            //  The instance's checksum names the algorithm it was made with.
            if (shoal_checksum_set(&expected, instance->checksum, instance->checksum_size) || !expected.size)
                snprintf(why, why_size, "it has no checksum of an algorithm this node knows"), look = S_LOOK_BAD;
            else
                look = S_LOOK_HASH;
        }
    }
    free(path);
    return look;
}

//  Marks local INSTANCE corrupt in the catalog: no open takes it again.
static void
s_instance_mark_corrupt(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, const char *why)
{
    shoal_msg_object_instance_t copy = *instance;
    copy.state = SHOAL_INSTANCE_CORRUPT;
    copy.modified_ms = s_now_ms();
    char *error = NULL;
    if (s_instance_write(self, &copy, &error)) {
        zsys_error("objects: cannot mark instance %016" PRIx64 " corrupt: %s", instance->instance_id, error);
        free(error);
    }
    else
        zsys_warning("objects: instance %016" PRIx64 " of object %016" PRIx64 " is corrupt: %s",
                     instance->instance_id, instance->storage_id, why);
}

// ---------------------------------------------------------------------------
//  Requests

//  The tenant a request acts for: a tenant's own; an admin's or a node's
//  named one (REQUIRED: one must be named). NULL with *REPLY_P otherwise.
static const char *
s_tenant(const shoal_envelope_t *request, const shoal_caller_t *caller, const char *named, bool required,
         shoal_envelope_t **reply_p)
{
    if (shoal_caller_is_tenant(caller)) {
        if (*named && !streq(named, caller->tenant)) {
            *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object of tenant '%s' here", named);
            return NULL;
        }
        return caller->tenant;
    }
    if (!streq(caller->role, SHOAL_ROLE_ADMIN) && !streq(caller->role, SHOAL_ROLE_NODE)) {
        *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "role '%s' has no objects", caller->role);
        return NULL;
    }
    if (required && !*named) {
        *reply_p = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "name the object's tenant (org/project)");
        return NULL;
    }
    return named;
}

//  A 200 reply with its (empty) body: every 200 of an object request
//  carries one.
static shoal_envelope_t * CHECK_PRINTF(2)
s_ok(const shoal_envelope_t *request, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *message = zsys_vprintf(format, args);
    va_end(args);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    free(message);
    shoal_envelope_new_body(reply);
    return reply;
}

static shoal_envelope_t *
s_failed(const shoal_envelope_t *request, shoal_objects_t *self, char *error)
{
    uint32_t status = shoal_store_error_no_space(self->store) ? SHOAL_STATUS_NO_SPACE : SHOAL_STATUS_INTERNAL;
    shoal_envelope_t *reply = shoal_envelope_reply(request, status, "%s", error ? error : "failed");
    zsys_error("objects: %s: %s", shoal_msg_type_name(request->type), error ? error : "failed");
    free(error);
    return reply;
}

//  Resolves the object a request names (a name, or a storage id) into
//  INFO for TENANT. Returns NULL, or the reply that ends the request.
static shoal_envelope_t *
s_resolve(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
          const shoal_msg_object_request_t *body, shoal_msg_object_info_t *info)
{
    char *error = NULL;
    uint64_t sid = body->storage_id;
    memset(info, 0, sizeof *info);
    if (*body->name && s_binding(self, tenant, body->name, &sid, &error))
        return s_failed(request, self, error);
    if (!sid)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object '%s' of tenant %s", body->name,
                                    tenant);
    bool found = false;
    if (s_object_read(self, sid, info, &found, &error))
        return s_failed(request, self, error);
    if (!found || (*tenant && !streq(info->tenant, tenant))) {
        shoal_msg_object_info_codec.clear(info);
        if (*body->name)
            return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "object '%s' of tenant %s is gone (its "
                                        "storage id %016" PRIx64 " has no record): resolve it again", body->name,
                                        tenant, sid);
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no object %016" PRIx64, sid);
    }
    return NULL;
}

//  A 200 reply whose body carries INFO (taken).
static shoal_envelope_t *
s_info_reply(const shoal_envelope_t *request, shoal_msg_object_info_t *info, const char *message)
{
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", message);
    shoal_msg_object_reply_t *body = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    body->objects = (shoal_msg_object_info_t *) zmalloc(sizeof *body->objects);
    body->objects[0] = *info;
    body->count = 1;
    body->storage_id = info->storage_id;
    memset(info, 0, sizeof *info);
    return reply;
}

static void
s_upload_destroy(void **item_p)
{
    s_upload_t *upload = (s_upload_t *) *item_p;
    *item_p = NULL;
    //  The worker still writes its file: the last answer frees it.
    if (upload && upload->pending) {
        upload->gone = true;
        return;
    }
    if (upload) {
        free(upload->failed);
        if (upload->fd >= 0)
            close(upload->fd);
        free(upload->tenant);
        free(upload->name);
        free(upload->comment);
        free(upload);
        *item_p = NULL;
    }
}

//  Gives up an add: its bytes, lock and keys go.
static void
s_upload_abort(shoal_objects_t *self, s_upload_t *upload)
{
    char *error = NULL;
    uint64_t sid = upload->sid, iid = upload->iid;
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_delete(self->uploads, id);
    if (s_instance_remove(self, sid, iid, &error)) {
        zsys_warning("objects: an abandoned add of instance %016" PRIx64 " left something behind: %s", iid, error);
        free(error);
    }
}

//  Step 1 of an add of NAME (with COMMENT) for TENANT, SIZE bytes, made
//  by REQUEST: a new object and its instance, under a write lock, whose
//  bytes come next. Returns NULL with *UPLOAD_P (kept in self->uploads),
//  or the reply that ends the request.
static shoal_envelope_t *
s_upload_begin(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant, const char *name,
               const char *comment, uint64_t size, bool update, shoal_checksum_algorithm_t algorithm,
               s_upload_t **upload_p)
{
    if (!*name)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "an add names its object");
    char *error = NULL;
    uint64_t bound = 0;
    if (s_binding(self, tenant, name, &bound, &error))
        return s_failed(request, self, error);
    if (bound && !update)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s' of tenant %s exists: update it, or "
                                    "remove it first", name, tenant);
    uint64_t sid = s_id_new(self, SHOAL_OBJECT_ID_STORAGE, &error);
    uint64_t iid = sid ? s_id_new(self, SHOAL_OBJECT_ID_INSTANCE, &error) : 0;
    if (!iid)
        return s_failed(request, self, error);
    //  1. The instance is made under a write lock, before any byte.
    char *dir = zsys_sprintf("%s/%016" PRIx64, self->dir, sid);
    char *path = s_instance_path(self, sid, iid);
    int fd = zsys_dir_create("%s", dir) == 0 ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (fd < 0)
        error = zsys_sprintf("cannot make %s: %s", path, strerror(errno));
    free(dir);
    free(path);
    if (fd < 0)
        return s_failed(request, self, error);
    char why[S_ERROR_MAX];
    if (s_lock_take(self, iid, sid, S_HOLDER_ADD, "write", false, why, sizeof why) != S_GRANTED) {
        close(fd);
        return s_failed(request, self, zsys_sprintf("cannot write-lock the new instance: %s", why));
    }
    shoal_msg_object_info_t info = {
        .tenant = (char *) tenant, .name = (char *) name, .storage_id = sid, .size = size,
        .created_ms = s_now_ms(), .comment = (char *) comment
    };
    char *uri = s_instance_uri(sid, iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = iid, .storage_id = sid, .node = self->settings->node_id, .uri = uri, .size = size,
        .state = SHOAL_INSTANCE_WRITING, .modified_ms = s_now_ms()
    };
    int rc = s_instance_write(self, &instance, &error);
    if (rc == 0)
        rc = s_object_write(self, &info, &error);
    free(uri);
    s_upload_t *upload = (s_upload_t *) zmalloc(sizeof *upload);
    upload->sid = sid;
    upload->iid = iid;
    upload->fd = fd;
    upload->size = size;
    shoal_hasher_init(&upload->hash, algorithm);
    upload->tenant = strdup(tenant);
    upload->name = strdup(name);
    upload->comment = strdup(comment ? comment : "");
    upload->update = update;
    upload->heard_ms = zclock_mono();
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_update(self->uploads, id, upload);
    if (rc) {
        s_upload_abort(self, upload);
        return s_failed(request, self, error);
    }
    *upload_p = upload;
    return NULL;
}

static shoal_envelope_t *
s_add(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
      const shoal_msg_object_request_t *body)
{
    s_upload_t *upload = NULL;
    //  An add that names no algorithm is an older client's: BLAKE2b.
    shoal_checksum_algorithm_t algorithm = body->algorithm ? body->algorithm : SHOAL_CHECKSUM_BLAKE2B;
    shoal_envelope_t *reply = s_upload_begin(self, request, tenant, body->name, body->comment, body->size,
                                             body->update, algorithm, &upload);
    if (reply)
        return reply;
    reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "send %" PRIu64 " bytes to instance %016" PRIx64,
                                 body->size, upload->iid);
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    answer->storage_id = upload->sid;
    answer->instance_id = upload->iid;
    answer->node = strdup(self->settings->node_id);
    return reply;
}

//  The add of instance IID a client of TENANT makes (a checkpoint's is
//  the node's own: no client writes, commits or aborts it).
static s_upload_t *
s_upload_find(shoal_objects_t *self, uint64_t iid, const char *tenant)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    s_upload_t *upload = (s_upload_t *) zhashx_lookup(self->uploads, id);
    if (upload && ((*tenant && !streq(upload->tenant, tenant)) || upload->local))
        return NULL;
    return upload;
}

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

static void s_opening_destroy(s_opening_t **opening_p);
static void s_replication_destroy(void **item_p);

typedef enum {
    S_IO_WRITE,                 //  a chunk of an add, written at OFFSET and hashed
    S_IO_COMMIT,                //  an add's bytes hashed to the end and synced
    S_IO_READ,                  //  LENGTH bytes of an instance's file from OFFSET
    S_IO_DISCARD,               //  a removed instance's file, out of the way already: unlinked
    S_IO_VERIFY,                //  an instance's file hashed whole, for an open or a replicate (the verifier's)
} s_io_kind_t;

//  One piece of file work: made and freed on the reactor; the worker
//  writes only the results, and the upload's file and hash.
typedef struct {
    s_io_kind_t kind;
    shoal_envelope_t *request;  //  the request's type and id, for the late reply
    zframe_t *routing_id;       //  the caller
    s_upload_t *upload;         //  write, commit: the add (its PENDING counts this)
    uint64_t instance_id;
    uint64_t offset;
    uint8_t *data;              //  write: the chunk (taken from the request)
    size_t size;                //  write: its bytes; read: the most to read; verify: the instance's
    shoal_checksum_t given;     //  commit: the caller's checksum (size 0: none given); verify: the instance's
    char *path;                 //  read, verify: the instance's file; discard: the file to unlink
    s_opening_t *opening;       //  verify: the open that waits for it (or)
    s_replication_t *replication;   //  the replicate that does
    //  Results, written by the worker.
    const char *call;           //  the call that failed (NULL: none)
    int error_no;               //  and its errno (0: it came short)
    shoal_checksum_t checksum;  //  commit, verify: what the bytes hash to
    uint64_t file_size;         //  read: the file's size; verify: the bytes hashed
    uint8_t *bytes;             //  read: what it read (GOT bytes)
    size_t got;
} s_io_t;

static void
s_io_destroy(void **item_p)
{
    s_io_t *io = (s_io_t *) *item_p;
    if (io) {
        shoal_envelope_destroy(&io->request);
        zframe_destroy(&io->routing_id);
        free(io->data);
        free(io->path);
        free(io->bytes);
        //  A verify never back (the node stops): what waited goes with it.
        s_opening_destroy(&io->opening);
        void *replication = io->replication;
        s_replication_destroy(&replication);
        if (io->upload && --io->upload->pending == 0 && io->upload->gone) {
            io->upload->gone = false;
            void *upload = io->upload;
            s_upload_destroy(&upload);
        }
        free(io);
        *item_p = NULL;
    }
}

static int
s_io_fail(s_io_t *io, const char *call, int error_no)
{
    io->call = call;
    io->error_no = error_no;
    return -1;
}

//  Writes all of DATA (SIZE bytes) at OFFSET of FD. Returns 0, or -1 with
//  the failure in IO.
static int
s_io_pwrite(s_io_t *io, int fd, const uint8_t *data, size_t size, uint64_t offset)
{
    while (size) {
        ssize_t wrote = pwrite(fd, data, size, (off_t) offset);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            return s_io_fail(io, "write", wrote < 0 ? errno : 0);
        data += wrote;
        offset += (uint64_t) wrote;
        size -= (size_t) wrote;
    }
    return 0;
}

//  Hashes the file at IO's path with the algorithm of its checksum.
static void
s_io_hash(s_io_t *io)
{
    int fd = open(io->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        s_io_fail(io, "open", errno);
        return;
    }
    shoal_hasher_t hasher;
    shoal_hasher_init(&hasher, (shoal_checksum_algorithm_t) shoal_checksum_algorithm(io->given.bytes,
                                                                                    io->given.size));
    uint8_t *buffer = (uint8_t *) malloc(S_HASH_CHUNK);
    assert(buffer);
    while (true) {
        ssize_t got = read(fd, buffer, S_HASH_CHUNK);
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

//  The worker's run of one piece of work (shoal_worker).
static void
s_io_run(void *item)
{
    s_io_t *io = (s_io_t *) item;
    //  A test holds the worker here to see the reactor serve meanwhile.
    while (shoal_fault_held("objects", "io"))
        zclock_sleep(S_HOLD_POLL_MS);
    if (io->kind == S_IO_WRITE) {
        if (s_io_pwrite(io, io->upload->fd, io->data, io->size, io->offset) == 0)
            shoal_hasher_update(&io->upload->hash, io->data, io->size);
    }
    else
    if (io->kind == S_IO_COMMIT) {
        shoal_hasher_final(&io->upload->hash, &io->checksum);
        if (fdatasync(io->upload->fd) != 0)
            s_io_fail(io, "sync", errno);
    }
    else
    if (io->kind == S_IO_DISCARD) {
        if (unlink(io->path) != 0 && errno != ENOENT)
            s_io_fail(io, "unlink", errno);
    }
    else
    if (io->kind == S_IO_VERIFY)
        s_io_hash(io);
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
        io->bytes = length ? (uint8_t *) malloc(length) : NULL;
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

//  Hands work IO (made by REQUEST from ROUTING_ID) to the worker: the
//  request is answered once it is back.
static void
s_io_give(shoal_objects_t *self, s_io_t *io, const shoal_envelope_t *request, zframe_t *routing_id)
{
    io->request = shoal_envelope_new(request->type, request->request_id);
    io->routing_id = zframe_dup(routing_id);
    if (io->upload)
        io->upload->pending++;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->worker, io);
}

//  Has the verifier hash local INSTANCE's bytes, read-locked, for OPENING
//  or REPLICATION (one of the two, taken): it goes on once they are back
//  (s_io_verified).
static void
s_verify_give(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, s_opening_t *opening,
              s_replication_t *replication)
{
    s_io_t *io = (s_io_t *) zmalloc(sizeof *io);
    io->kind = S_IO_VERIFY;
    io->instance_id = instance->instance_id;
    io->size = instance->size;
    shoal_checksum_set(&io->given, instance->checksum, instance->checksum_size);
    io->path = s_instance_path(self, instance->storage_id, instance->instance_id);
    io->opening = opening;
    io->replication = replication;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->verifier, io);
}

//  Has the worker unlink PATH (taken).
static void
s_discard_give(shoal_objects_t *self, char *path)
{
    s_io_t *io = (s_io_t *) zmalloc(sizeof *io);
    io->kind = S_IO_DISCARD;
    io->path = path;
    zlistx_add_end(self->ios, io);
    shoal_worker_give(self->worker, io);
}

//  Takes the file at PATH (instance IID of SID) out of the way at once, by a
//  rename into DATA/objects/.discard, and has the worker unlink it: the
//  unlink of a large file can hold a thread for seconds (a 1 GiB replica's
//  took 2.4 s on this disk), and that thread must not be the reactor's.
//  Returns 0 when PATH is gone (or was), -1 when it is where it was (no
//  worker yet, or the rename failed: the caller unlinks it).
static int
s_discard(shoal_objects_t *self, const char *path, uint64_t sid, uint64_t iid)
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

//  What a crash left in DATA/objects/.discard goes now, on the worker.
static void
s_discard_leftovers(shoal_objects_t *self)
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
s_io_error(const s_io_t *io, const char *what)
{
    return zsys_sprintf("cannot %s %s: %s", io->call, what, io->error_no ? strerror(io->error_no) : "it came short");
}

static shoal_envelope_t *s_upload_commit(shoal_objects_t *self, const shoal_envelope_t *request,
                                         s_upload_t *upload, const shoal_checksum_t *checksum);
static void s_reply_later(shoal_objects_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p);
static void s_open_verified(shoal_objects_t *self, s_io_t *io);
static void s_replicate_verified(shoal_objects_t *self, s_io_t *io);

//  Whether the bytes verify IO hashed are its instance's: 0, or 1 with WHY.
static int
s_io_verdict(const s_io_t *io, char *why, size_t why_size)
{
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
s_io_written(shoal_objects_t *self, s_io_t *io)
{
    s_upload_t *upload = io->upload;
    if (upload->gone)
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the add of instance %016" PRIx64 " was "
                                    "given up", io->instance_id);
    if (io->call) {
        char *error = s_io_error(io, "the instance's file");
        if (!upload->failed)
            upload->failed = strdup(error);
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
s_io_committed(shoal_objects_t *self, s_io_t *io)
{
    s_upload_t *upload = io->upload;
    if (upload->gone)
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the add of instance %016" PRIx64 " was "
                                    "given up while its bytes were synced", io->instance_id);
    upload->committing = false;
    if (io->call) {
        char *error = s_io_error(io, "the instance's file");
        s_upload_abort(self, upload);
        return s_failed(io->request, self, error);
    }
    if (io->given.size && !shoal_checksum_equal(&io->checksum, &io->given)) {
        const char *algorithm = shoal_checksum_algorithm_name(upload->hash.algorithm);
        s_upload_abort(self, upload);
        return shoal_envelope_reply(io->request, SHOAL_STATUS_CONFLICT, "the bytes that arrived do not match the "
                                    "checksum sent with the commit (%s, as the add named): the add is given up",
                                    algorithm);
    }
    close(upload->fd);
    upload->fd = -1;
    return s_upload_commit(self, io->request, upload, &io->checksum);
}

//  The reply to a read IO made.
static shoal_envelope_t *
s_io_read(shoal_objects_t *self, s_io_t *io)
{
    if (io->call) {
        char *error = s_io_error(io, io->path);
        return s_failed(io->request, self, error);
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

//  The worker is done with a piece of work: its request is answered.
static int
s_worker_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    void *pointer = NULL;
    if (zsock_recv(sock, "p", &pointer) || !pointer)
        return 0;
    s_io_t *io = (s_io_t *) pointer;
    void *handle = zlistx_find(self->ios, io);
    assert(handle);
    if (io->kind == S_IO_DISCARD) {
        if (io->call)
            zsys_warning("objects: cannot remove %s (%s: %s); the next start tries again", io->path, io->call,
                         strerror(io->error_no));
        zlistx_delete(self->ios, handle);
        return 0;
    }
    if (io->kind == S_IO_VERIFY) {
        if (io->opening)
            s_open_verified(self, io);
        else
            s_replicate_verified(self, io);
        zlistx_delete(self->ios, handle);
        return 0;
    }
    shoal_envelope_t *reply = io->kind == S_IO_WRITE ? s_io_written(self, io)
                            : io->kind == S_IO_COMMIT ? s_io_committed(self, io)
                            : s_io_read(self, io);
    s_reply_later(self, io->routing_id, &reply);
    zlistx_delete(self->ios, handle);
    return 0;
}

//  A chunk of an add: checked here, written and hashed on the worker,
//  answered when it is back (NULL: later).
static shoal_envelope_t *
s_write(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    shoal_msg_object_chunk_t *body = (shoal_msg_object_chunk_t *) request->body;
    shoal_envelope_t *refusal = NULL;
    const char *tenant = s_tenant(request, caller, "", false, &refusal);
    if (!tenant)
        return refusal;
    s_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    if (upload->failed)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " lost a chunk (%s): "
                                    "abort the add", body->instance_id, upload->failed);
    if (upload->committing)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " is being committed",
                                    body->instance_id);
    if (body->offset != upload->offset)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " takes its bytes in "
                                    "order: the next is at offset %" PRIu64 ", not %" PRIu64, body->instance_id,
                                    upload->offset, body->offset);
    if (upload->offset + body->data_size > upload->size)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%zu bytes at offset %" PRIu64 " run past "
                                    "the %" PRIu64 " bytes the add announced", body->data_size, body->offset,
                                    upload->size);
    s_io_t *io = (s_io_t *) zmalloc(sizeof *io);
    io->kind = S_IO_WRITE;
    io->upload = upload;
    io->instance_id = body->instance_id;
    io->offset = body->offset;
    //  The chunk's bytes go with the work rather than be copied: the node
    //  destroys the request once this returns, and it frees no NULL.
    io->data = body->data;
    io->size = body->data_size;
    body->data = NULL;
    body->data_size = 0;
    upload->offset += io->size;
    upload->heard_ms = zclock_mono();
    s_io_give(self, io, request, routing_id);
    return NULL;
}

static shoal_envelope_t *s_upload_commit(shoal_objects_t *self, const shoal_envelope_t *request,
                                         s_upload_t *upload, const shoal_checksum_t *checksum);

//  An add's commit: its bytes are hashed to the end and synced on the
//  worker, after every chunk handed to it; then steps 2 and 3 (NULL: the
//  answer comes later).
static shoal_envelope_t *
s_commit(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
         const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    s_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    if (upload->committing)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " is being committed",
                                    body->instance_id);
    if (upload->failed)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " lost a chunk (%s): "
                                    "abort the add", body->instance_id, upload->failed);
    if (upload->offset != upload->size)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "instance %016" PRIx64 " has %" PRIu64 " of its %"
                                    PRIu64 " bytes: send the rest before the commit", body->instance_id,
                                    upload->offset, upload->size);
    s_io_t *io = (s_io_t *) zmalloc(sizeof *io);
    io->kind = S_IO_COMMIT;
    io->upload = upload;
    io->instance_id = body->instance_id;
    shoal_checksum_set(&io->given, body->checksum, body->checksum_size);
    upload->committing = true;
    s_io_give(self, io, request, routing_id);
    return NULL;
}

//  Steps 2 and 3 of an add whose bytes are complete, durable and hash to
//  CHECKSUM. Returns the reply to REQUEST (200: the object, bound).
static shoal_envelope_t *
s_upload_commit(shoal_objects_t *self, const shoal_envelope_t *request, s_upload_t *upload,
                const shoal_checksum_t *checksum)
{
    char *error = NULL;
    //  2. The bytes are complete and checksummed: the instance says so, and
    //  its write lock goes.
    char *uri = s_instance_uri(upload->sid, upload->iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = upload->iid, .storage_id = upload->sid, .node = self->settings->node_id, .uri = uri,
        .checksum = (uint8_t *) checksum->bytes, .checksum_size = checksum->size, .size = upload->size,
        .state = SHOAL_INSTANCE_COMPLETE, .modified_ms = s_now_ms()
    };
    shoal_msg_object_info_t info = {
        .tenant = upload->tenant, .name = upload->name, .storage_id = upload->sid, .size = upload->size,
        .checksum = (uint8_t *) checksum->bytes, .checksum_size = checksum->size, .created_ms = s_now_ms(),
        .comment = upload->comment, .memory_bytes = upload->memory_bytes, .disk_bytes = upload->disk_bytes
    };
    int rc = s_instance_write(self, &instance, &error);
    if (rc == 0)
        rc = s_object_write(self, &info, &error);
    free(uri);
    if (rc == 0 && s_lock_release(self, upload->iid, S_HOLDER_ADD, NULL) < 0) {
        error = zsys_sprintf("cannot release the add's write lock: %s", shoal_store_error(self->store));
        rc = -1;
    }
    //  3. Only now is the name bound, or moved, in one write of its key.
    uint64_t old = 0;
    if (rc == 0)
        rc = s_binding(self, upload->tenant, upload->name, &old, &error);
    if (rc == 0 && old && !upload->update) {
        //  Someone else bound the name meanwhile: this object is left unbound.
        char key[S_KEY_MAX];
        s_key_name(key, upload->tenant, upload->name);
        shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s' was added "
                                                       "meanwhile by another: update it instead", upload->name);
        s_upload_abort(self, upload);
        return reply;
    }
    if (rc == 0) {
        char key[S_KEY_MAX];
        s_key_name(key, upload->tenant, upload->name);
        rc = s_catalog_put(self, key, &shoal_msg_object_info_codec, &info, &error);
    }
    if (rc) {
        s_upload_abort(self, upload);
        return s_failed(request, self, error);
    }
    uint64_t sid = upload->sid, iid = upload->iid;
    char message[2 * S_ERROR_MAX] = "committed";
    //  An update's old object goes as a removal does; readers holding it
    //  open keep reading it whole until they close.
    if (old && old != sid) {
        shoal_msg_object_info_t previous = { 0 };
        bool found = false;
        if (s_object_read(self, old, &previous, &found, &error) == 0 && found) {
            char removed[S_ERROR_MAX];
            if (s_object_remove(self, &previous, removed, sizeof removed, &error) == 0)
                snprintf(message, sizeof message, "committed; the name moved from object %016" PRIx64 " (%s)", old,
                         removed);
        }
        if (error) {
            zsys_warning("objects: the old object %016" PRIx64 " of '%s' is left to the sweep: %s", old, info.name,
                         error);
            free(error);
            error = NULL;
        }
        shoal_msg_object_info_codec.clear(&previous);
    }
    //  INFO borrowed the upload's strings until here.
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    zhashx_delete(self->uploads, id);
    shoal_msg_object_info_t committed = { 0 };
    bool found = false;
    if (s_object_read(self, sid, &committed, &found, &error) || !found)
        return s_failed(request, self, error ? error : zsys_sprintf("object %016" PRIx64 " vanished", sid));
    shoal_envelope_t *reply = s_info_reply(request, &committed, message);
    ((shoal_msg_object_reply_t *) reply->body)->instance_id = iid;
    return reply;
}

static shoal_envelope_t *
s_abort(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
        const shoal_msg_object_request_t *body)
{
    s_upload_t *upload = s_upload_find(self, body->instance_id, tenant);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no add of instance %016" PRIx64 " is in flight "
                                    "here", body->instance_id);
    s_upload_abort(self, upload);
    return s_ok(request, "the add of instance %016" PRIx64 " was given up",
                                body->instance_id);
}

static shoal_envelope_t *
s_get(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
      const shoal_msg_object_request_t *body)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = s_resolve(self, request, tenant, body, &info);
    return reply ? reply : s_info_reply(request, &info, "OK");
}

static shoal_envelope_t *
s_list(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
       const shoal_msg_object_request_t *body)
{
    char prefix[S_KEY_MAX], after[S_KEY_MAX] = "";
    snprintf(prefix, sizeof prefix, *tenant ? "name/%s/" : "name/", tenant);
    if (*body->start_after)
        snprintf(after, sizeof after, "%s%s", prefix, body->start_after);
    size_t limit = body->limit ? body->limit : SHOAL_SCAN_LIMIT_DEFAULT;
    shoal_kv_list_t list = { 0 };
    if (shoal_oplog_kv_scan(self->oplog, SHOAL_OBJECTS_DATASET, prefix, after, limit + 1, &list))
        return s_failed(request, self, zsys_sprintf("cannot scan the catalog: %s", shoal_oplog_error(self->oplog)));
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    size_t wanted = list.count > limit ? limit : list.count;
    answer->objects = (shoal_msg_object_info_t *) zmalloc((wanted + 1) * sizeof *answer->objects);
    char *error = NULL;
    size_t bytes = 0;
    for (size_t i = 0; i < wanted && !error; i++) {
        shoal_msg_object_info_t binding = { 0 };
        char why[S_ERROR_MAX];
        if (shoal_msg_object_info_codec.decode(list.items[i].record.value, list.items[i].record.value_size, &binding,
                                               why, sizeof why)) {
            error = zsys_sprintf("catalog key %s holds no binding: %s", list.items[i].key, why);
            break;
        }
        shoal_msg_object_info_t *info = &answer->objects[answer->count];
        bool found = false;
        if (s_object_read(self, binding.storage_id, info, &found, &error) == 0 && found) {
            //  The name it is listed under is the binding's.
            s_text_set(&info->name, binding.name);
            uint8_t *encoded = NULL;
            size_t size = 0;
            if (shoal_msg_object_info_codec.encode(info, &encoded, &size, why, sizeof why) == 0)
                bytes += size + SHOAL_PAGE_ELEMENT_OVERHEAD;
            free(encoded);
            if (answer->count && bytes > SHOAL_PAGE_BYTES_MAX) {
                shoal_msg_object_info_codec.clear(info);
                shoal_msg_object_info_codec.clear(&binding);
                wanted = i;
                break;
            }
            answer->count++;
        }
        shoal_msg_object_info_codec.clear(&binding);
    }
    answer->more = list.count > wanted;
    shoal_kv_list_clear(&list);
    if (error) {
        shoal_envelope_destroy(&reply);
        return s_failed(request, self, error);
    }
    return reply;
}

static shoal_envelope_t *
s_remove(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
         const shoal_msg_object_request_t *body)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = s_resolve(self, request, tenant, body, &info);
    if (reply)
        return reply;
    char message[S_ERROR_MAX];
    char *error = NULL;
    if (s_object_remove(self, &info, message, sizeof message, &error))
        reply = s_failed(request, self, error);
    else
        reply = s_ok(request, "%s", message);
    shoal_msg_object_info_codec.clear(&info);
    return reply;
}

//  A node's drop of its instances of an object another node removes.
static shoal_envelope_t *
s_drop(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
       const shoal_msg_object_request_t *body)
{
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "drop is asked by nodes only");
    s_drop_t drop;
    char *error = NULL;
    if (s_drop_local(self, body->storage_id, &drop, &error))
        return s_failed(request, self, error);
    return s_ok(request, "%zu instance(s) removed, %zu waiting for readers",
                                drop.removed, drop.waiting);
}

//  Finishes the removal a remover waits for, once the last reader left.
static void
s_removal_resume(shoal_objects_t *self, const shoal_msg_object_lock_t *lock)
{
    if (lock->readers || !streq(lock->waiter, S_HOLDER_REMOVE))
        return;
    char why[S_ERROR_MAX];
    char *error = NULL;
    if (s_lock_take(self, lock->instance_id, lock->storage_id, S_HOLDER_REMOVE, "write", true, why, sizeof why)
        != S_GRANTED)
        zsys_warning("objects: the removal of instance %016" PRIx64 " waits on: %s", lock->instance_id, why);
    else
    if (s_instance_remove(self, lock->storage_id, lock->instance_id, &error)) {
        zsys_warning("objects: cannot remove instance %016" PRIx64 " after its last reader: %s", lock->instance_id,
                     error);
        free(error);
    }
}

static void
s_opening_destroy(s_opening_t **opening_p)
{
    s_opening_t *opening = *opening_p;
    if (opening) {
        shoal_envelope_destroy(&opening->request);
        zframe_destroy(&opening->routing_id);
        free(opening->tenant);
        free(opening->name);
        free(opening->holder);
        shoal_msg_object_info_codec.clear(&opening->info);
        zhashx_destroy(&opening->bad);
        free(opening);
        *opening_p = NULL;
    }
}

//  Local INSTANCE of OPENING's object is bad (WHY): its lock goes, it is
//  marked corrupt, and the open never takes it again.
static void
s_opening_bad(shoal_objects_t *self, s_opening_t *opening, const shoal_msg_object_instance_t *instance,
              const char *why)
{
    s_lock_release(self, instance->instance_id, opening->holder, NULL);
    s_instance_mark_corrupt(self, instance, why);
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
    zhashx_update(opening->bad, id, (void *) 1);
}

//  The reply to OPENING once it holds INSTANCE (of its object) read-locked.
static shoal_envelope_t *
s_opening_granted(shoal_objects_t *self, s_opening_t *opening, uint64_t iid)
{
    shoal_envelope_t *reply = s_info_reply(opening->request, &opening->info, "opened");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) reply->body;
    answer->instance_id = iid;
    answer->holder = strdup(opening->holder);
    answer->node = strdup(self->settings->node_id);
    answer->endpoint = strdup(self->endpoint);
    answer->granted = true;
    return reply;
}

//  Resolves OPENING's object (again) and tries this node's instances of it
//  that are not known bad. Returns the reply that ends the open, or NULL
//  while an instance's bytes are hashed on the verifier (s_open_verified
//  goes on).
static shoal_envelope_t *
s_opening_try(shoal_objects_t *self, s_opening_t *opening)
{
    shoal_msg_object_request_t body = { .name = opening->name, .storage_id = opening->storage_id };
    shoal_msg_object_info_t *info = &opening->info;
    shoal_msg_object_info_codec.clear(info);
    shoal_envelope_t *reply = s_resolve(self, opening->request, opening->tenant, &body, info);
    if (reply)
        return reply;
    size_t locked = 0, corrupt = 0, elsewhere = 0;
    const shoal_msg_object_instance_t *granted = NULL;
    char last_why[S_ERROR_MAX] = "";
    for (size_t i = 0; i < info->count && !granted && !reply; i++) {
        const shoal_msg_object_instance_t *instance = &info->instances[i];
        if (opening->instance_id && instance->instance_id != opening->instance_id)
            continue;
        if (!streq(instance->node, self->settings->node_id)) {
            elsewhere += instance->state == SHOAL_INSTANCE_COMPLETE;
            continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
        if (instance->state != SHOAL_INSTANCE_COMPLETE || zhashx_lookup(opening->bad, id)) {
            corrupt += instance->state == SHOAL_INSTANCE_CORRUPT || zhashx_lookup(opening->bad, id);
            continue;
        }
        char why[S_ERROR_MAX];
        s_lock_result_t taken = s_lock_take(self, instance->instance_id, info->storage_id, opening->holder, "read",
                                            false, why, sizeof why);
        if (taken == S_FAILED)
            reply = s_failed(opening->request, self, zsys_sprintf("cannot read-lock: %s", why));
        else
        if (taken == S_REFUSED) {
            locked++;
            snprintf(last_why, sizeof last_why, "%s", why);
        }
        else {
            //  Held now: the bytes are checked under the lock, so that no
            //  writer changes them between the check and the read.
            s_look_t look = s_instance_look(self, instance, opening->verify, why, sizeof why);
            if (look == S_LOOK_GOOD)
                granted = instance;
            else
            if (look == S_LOOK_HASH) {
                opening->index = i;
                s_verify_give(self, instance, opening, NULL);
                return NULL;
            }
            else {
                s_opening_bad(self, opening, instance, why);
                corrupt++;
            }
        }
    }
    if (!reply && granted)
        reply = s_opening_granted(self, opening, granted->instance_id);
    else
    if (!reply && locked)
        reply = shoal_envelope_reply(opening->request, SHOAL_STATUS_CONFLICT, "object '%s': %s: it is being removed "
                                     "or replaced; resolve its name again rather than spin on it", opening->name,
                                     last_why);
    else
    if (!reply && elsewhere) {
        reply = s_info_reply(opening->request, info, "no good instance here: open it at a node that holds one");
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) reply->body;
        answer->node = strdup(self->settings->node_id);
    }
    else
    if (!reply)
        reply = shoal_envelope_reply(opening->request, SHOAL_STATUS_NOT_FOUND, "object '%s' has no good instance "
                                     "(%zu corrupt here)", opening->name, corrupt);
    return reply;
}

//  The verifier hashed the instance an open waits on (IO): the open is
//  answered, or, the instance bad, it goes on with the others.
static void
s_open_verified(shoal_objects_t *self, s_io_t *io)
{
    s_opening_t *opening = io->opening;
    io->opening = NULL;
    const shoal_msg_object_instance_t *instance = &opening->info.instances[opening->index];
    char why[S_ERROR_MAX];
    shoal_envelope_t *reply;
    if (s_io_verdict(io, why, sizeof why) == 0)
        reply = s_opening_granted(self, opening, instance->instance_id);
    else {
        s_opening_bad(self, opening, instance, why);
        //  The name may have moved meanwhile: it is resolved again.
        reply = s_opening_try(self, opening);
        if (!reply)
            return;
    }
    s_reply_later(self, opening->routing_id, &reply);
    s_opening_destroy(&opening);
}

//  Open: answered now, or once the bytes of the instance it takes are
//  hashed (NULL: later).
static shoal_envelope_t *
s_open(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, const char *tenant,
       const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    s_opening_t *opening = (s_opening_t *) zmalloc(sizeof *opening);
    opening->request = shoal_envelope_new(request->type, request->request_id);
    opening->routing_id = zframe_dup(routing_id);
    opening->tenant = strdup(tenant);
    opening->name = strdup(body->name);
    opening->storage_id = body->storage_id;
    opening->instance_id = body->instance_id;
    opening->verify = body->verify;
    opening->holder = *body->holder ? strdup(body->holder)
                    : zsys_sprintf("%s#%" PRIu64, *caller->name ? caller->name : "reader", ++self->holders);
    opening->bad = zhashx_new();
    shoal_envelope_t *reply = s_opening_try(self, opening);
    if (reply)
        s_opening_destroy(&opening);
    return reply;
}

static shoal_envelope_t *
s_close(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
        const shoal_msg_object_request_t *body)
{
    if (!body->instance_id || !*body->holder)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a close names the instance and the holder "
                                    "its open gave");
    shoal_msg_object_lock_record_t record = { 0 };
    bool found = false;
    if (shoal_object_store_record_get(self->store, body->instance_id, body->holder, &record, &found))
        return s_failed(request, self, strdup(shoal_store_error(self->store)));
    bool reader = found && streq(record.mode, "read");
    shoal_msg_object_lock_record_codec.clear(&record);
    if (!reader)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "%s has instance %016" PRIx64 " not open here",
                                    body->holder, body->instance_id);
    shoal_msg_object_lock_t after = { 0 };
    if (s_lock_release(self, body->instance_id, body->holder, &after) < 0)
        return s_failed(request, self, strdup(shoal_store_error(self->store)));
    s_removal_resume(self, &after);
    shoal_msg_object_lock_codec.clear(&after);
    return s_ok(request, "closed");
}

//  A read under a read lock: checked here, read on the worker, answered
//  when it is back (NULL: later).
static shoal_envelope_t *
s_read(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller, zframe_t *routing_id)
{
    const shoal_msg_object_chunk_t *body = (const shoal_msg_object_chunk_t *) request->body;
    shoal_msg_object_lock_record_t record = { 0 };
    bool found = false;
    if (shoal_object_store_record_get(self->store, body->instance_id, body->holder, &record, &found))
        return s_failed(request, self, strdup(shoal_store_error(self->store)));
    bool reader = found && streq(record.mode, "read");
    shoal_msg_object_lock_record_codec.clear(&record);
    if (!reader)
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "'%s' holds no read lock of instance %016" PRIx64
                                    " here: open the object first", body->holder, body->instance_id);
    shoal_msg_object_lock_t lock;
    if (s_lock_read_state(self, body->instance_id, 0, &lock))
        return s_failed(request, self, strdup(shoal_store_error(self->store)));
    s_io_t *io = (s_io_t *) zmalloc(sizeof *io);
    io->kind = S_IO_READ;
    io->instance_id = body->instance_id;
    io->offset = body->offset;
    io->size = body->length ? body->length : SHOAL_OBJECT_CHUNK_MAX;
    io->path = s_instance_path(self, lock.storage_id, lock.instance_id);
    shoal_msg_object_lock_codec.clear(&lock);
    s_io_give(self, io, request, routing_id);
    return NULL;
}

// ---------------------------------------------------------------------------
//  Replication

static void
s_replication_destroy(void **item_p)
{
    s_replication_t *replication = (s_replication_t *) *item_p;
    if (replication) {
        for (size_t i = 0; i < replication->count; i++) {
            s_target_t *target = &replication->targets[i];
            if (target->sender && replication->self->loop)
                zloop_reader_end(replication->self->loop, zactor_sock(target->sender));
            zactor_destroy(&target->sender);
            free(target->node);
        }
        free(replication->targets);
        shoal_msg_object_info_codec.clear(&replication->info);
        free(replication->to);
        free(replication->holder);
        free(replication->tenant);
        free(replication->name);
        shoal_envelope_destroy(&replication->request);
        zframe_destroy(&replication->routing_id);
        free(replication);
        *item_p = NULL;
    }
}

static void
s_reply_later(shoal_objects_t *self, zframe_t *routing_id, shoal_envelope_t **reply_p)
{
    char error[S_ERROR_MAX];
    zmsg_t *msg = shoal_envelope_encode(*reply_p, error, sizeof error);
    if (msg && self->router) {
        zframe_t *to = zframe_dup(routing_id);
        zmsg_prepend(msg, &to);
        zmsg_send(&msg, self->router);
    }
    else
        zsys_error("objects: cannot send a late reply: %s", msg ? "no router" : error);
    zmsg_destroy(&msg);
    shoal_envelope_destroy(reply_p);
}

//  Ends REPLICATION once each target is done: the source's read lock goes
//  and the caller hears how many nodes hold the object now.
static void
s_replication_check(shoal_objects_t *self, s_replication_t *replication)
{
    uint32_t ok = 0;
    for (size_t i = 0; i < replication->count; i++) {
        if (!replication->targets[i].done)
            return;
        ok += replication->targets[i].ok;
    }
    s_lock_release(self, replication->source_iid, replication->holder, NULL);
    uint32_t copies = replication->had + ok;
    shoal_envelope_t *reply;
    if (ok < replication->count)
        reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_INTERNAL, "%u of %zu new instance(s) made: "
                                     "%s", ok, replication->count, replication->error);
    else {
        reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_OK, "%u node(s) hold object %016" PRIx64,
                                     copies, replication->sid);
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
        answer->copies = copies;
        answer->storage_id = replication->sid;
    }
    s_reply_later(self, replication->routing_id, &reply);
    void *cursor = zlistx_find(self->replications, replication);
    if (cursor)
        zlistx_delete(self->replications, cursor);
}

static void
s_target_failed(s_target_t *target, const char *why)
{
    s_replication_t *replication = target->replication;
    target->done = true;
    target->ok = false;
    if (!*replication->error)
        snprintf(replication->error, sizeof replication->error, "%s: %s", target->node, why);
    zsys_warning("objects: replication of object %016" PRIx64 " to %s failed: %s", replication->sid, target->node,
                 why);
}

static int
s_sender_readable(zloop_t *loop, zsock_t *reader, void *arg)
{
    s_target_t *target = (s_target_t *) arg;
    s_replication_t *replication = target->replication;
    shoal_objects_t *self = replication->self;
    shoal_sender_event_t event;
    if (shoal_sender_event(target->sender, &event))
        return 0;
    if (event.what == SHOAL_SENDER_DONE) {
        target->done = true;
        target->ok = true;
        zsys_info("objects: object %016" PRIx64 " replicated to %s: %" PRIu64 " bytes at %.1f MB/s", replication->sid,
                  target->node, event.bytes, (double) event.rate / 1e6);
    }
    else
    if (event.what == SHOAL_SENDER_FAILED)
        s_target_failed(target, event.error);
    else
        return 0;
    zloop_reader_end(loop, zactor_sock(target->sender));
    zactor_destroy(&target->sender);
    s_replication_check(self, replication);
    return 0;
}

static void
s_receive_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_target_t *target = (s_target_t *) arg;
    s_replication_t *replication = target->replication;
    shoal_objects_t *self = replication->self;
    if (!reply || reply->status != SHOAL_STATUS_OK) {
        s_target_failed(target, reply ? reply->message : "no answer to the receive");
        s_replication_check(self, replication);
        return;
    }
    const shoal_msg_object_reply_t *answer = (const shoal_msg_object_reply_t *) reply->body;
    target->iid = answer->instance_id;
    char *source = s_instance_path(self, replication->sid, replication->source_iid);
    char id[64];
    snprintf(id, sizeof id, "o-%016" PRIx64, answer->instance_id);
    shoal_sender_args_t args = {
        .move_id = id, .endpoint = answer->endpoint, .cluster = self->cluster,
        .server_key = zcert_public_txt(self->cluster), .object_path = source,
        .step_timeout_ms = self->settings->move_step_ms, .final_timeout_ms = self->settings->move_step_ms,
    };
    target->sender = shoal_sender_new(&args);
    free(source);
    if (!target->sender || zloop_reader(self->loop, zactor_sock(target->sender), s_sender_readable, target)) {
        zactor_destroy(&target->sender);
        s_target_failed(target, "cannot start the transfer");
        s_replication_check(self, replication);
    }
}

//  The nodes of INFO that hold a complete instance of it, in a new hash
//  (its keys borrowed from INFO).
static zhashx_t *
s_holding(const shoal_msg_object_info_t *info)
{
    zhashx_t *holding = zhashx_new();
    for (size_t i = 0; i < info->count; i++)
        if (info->instances[i].state == SHOAL_INSTANCE_COMPLETE)
            zhashx_update(holding, info->instances[i].node, (void *) info->instances[i].node);
    return holding;
}

//  REPLICATION's source is read-locked and good: its targets are chosen
//  and asked to receive. Returns NULL while it is under way (it is then
//  self's), or the reply that ends it, its source's lock released (the
//  caller destroys it).
static shoal_envelope_t *
s_replication_begin(shoal_objects_t *self, s_replication_t *replication)
{
    shoal_msg_object_info_t *info = &replication->info;
    zhashx_t *holding = s_holding(info);
    uint32_t had = replication->had, copies = replication->copies;
    const char *to = replication->to;
    //  Targets: alive peers without a complete instance, in name order.
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    zlistx_set_comparator(alive, (zlistx_comparator_fn *) strcmp);
    zlistx_sort(alive);
    replication->targets = (s_target_t *) zmalloc((copies + 1) * sizeof *replication->targets);
    for (const char *node = (const char *) zlistx_first(alive); node && had + replication->count < copies;
         node = (const char *) zlistx_next(alive))
        if (!zhashx_lookup(holding, node) && (!to || streq(node, to))) {
            s_target_t *target = &replication->targets[replication->count++];
            target->replication = replication;
            target->node = strdup(node);
        }
    zlistx_destroy(&alive);
    zhashx_destroy(&holding);
    if (had + replication->count < copies) {
        shoal_envelope_t *reply;
        if (to)
            reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "node %s is not alive to take "
                                         "'%s'", to, info->name);
        else
            reply = shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "%u node(s) hold '%s' and %zu "
                                         "more are alive to take it: %u cannot hold it", had, info->name,
                                         replication->count, copies);
        s_lock_release(self, replication->source_iid, replication->holder, NULL);
        return reply;
    }
    zlistx_add_end(self->replications, replication);
    for (size_t i = 0; i < replication->count; i++) {
        s_target_t *target = &replication->targets[i];
        shoal_envelope_t *receive = shoal_envelope_new(SHOAL_MSG_OBJECT_RECEIVE, 0);
        shoal_msg_object_request_t *ask = (shoal_msg_object_request_t *) shoal_envelope_new_body(receive);
        ask->op = SHOAL_OBJECT_ADD;
        ask->tenant = strdup(info->tenant);
        ask->name = strdup(info->name);
        ask->storage_id = info->storage_id;
        ask->size = info->size;
        ask->checksum = (uint8_t *) zmalloc(replication->checksum.size);
        memcpy(ask->checksum, replication->checksum.bytes, replication->checksum.size);
        ask->checksum_size = replication->checksum.size;
        if (shoal_mesh_send(self->mesh, target->node, &receive, S_PEER_TIMEOUT_MS, s_receive_answered, target)) {
            shoal_envelope_destroy(&receive);
            s_target_failed(target, "no peer");
        }
    }
    shoal_msg_object_info_codec.clear(info);
    //  Every target may have failed at once.
    s_replication_check(self, replication);
    return NULL;
}

//  The reply to a replicate whose source (read-locked) is bad (WHY): its
//  lock goes and it is marked corrupt, as an open would.
static shoal_envelope_t *
s_replication_bad(shoal_objects_t *self, s_replication_t *replication, const char *why)
{
    s_lock_release(self, replication->source_iid, replication->holder, NULL);
    for (size_t i = 0; i < replication->info.count; i++)
        if (replication->info.instances[i].instance_id == replication->source_iid)
            s_instance_mark_corrupt(self, &replication->info.instances[i], why);
    return shoal_envelope_reply(replication->request, SHOAL_STATUS_CONFLICT, "the instance here cannot be sent: %s",
                                why);
}

//  The verifier hashed a replicate's source (IO): it begins, or ends.
static void
s_replicate_verified(shoal_objects_t *self, s_io_t *io)
{
    s_replication_t *replication = io->replication;
    io->replication = NULL;
    char why[S_ERROR_MAX];
    shoal_envelope_t *reply = s_io_verdict(io, why, sizeof why) == 0 ? s_replication_begin(self, replication)
                            : s_replication_bad(self, replication, why);
    if (reply) {
        s_reply_later(self, replication->routing_id, &reply);
        void *item = replication;
        s_replication_destroy(&item);
    }
}

//  Replicate: answered now, or once the copies are made (NULL: later).
//  The source, read-locked, is hashed first on the verifier when it is
//  small or changed since it was checksummed.
static shoal_envelope_t *
s_replicate(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
            const shoal_msg_object_request_t *body, zframe_t *routing_id)
{
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = s_resolve(self, request, tenant, body, &info);
    if (reply)
        return reply;
    uint32_t copies = body->copies ? body->copies : 2;
    //  The nodes that hold a complete instance, and one of this node's.
    zhashx_t *holding = s_holding(&info);
    const shoal_msg_object_instance_t *source = NULL;
    for (size_t i = 0; i < info.count && !source; i++)
        if (info.instances[i].state == SHOAL_INSTANCE_COMPLETE
        &&  streq(info.instances[i].node, self->settings->node_id))
            source = &info.instances[i];
    uint32_t had = (uint32_t) zhashx_size(holding);
    //  A copy asked for on one node: that node, whatever the count.
    const char *to = body->to && *body->to ? body->to : NULL;
    if (to)
        copies = zhashx_lookup(holding, to) ? had : had + 1;
    zhashx_destroy(&holding);
    if (had >= copies) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "%u node(s) hold object '%s' already", had, info.name);
        shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
        answer->copies = had;
        answer->storage_id = info.storage_id;
        shoal_msg_object_info_codec.clear(&info);
        return reply;
    }
    if (!source) {
        shoal_msg_object_info_codec.clear(&info);
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "this node holds no complete instance of '%s': "
                                    "replicate from a node that does (%u hold one)", body->name, had);
    }
    char *holder = zsys_sprintf("%s#%" PRIu64, S_HOLDER_REPLICATE, ++self->holders);
    char why[S_ERROR_MAX];
    if (s_lock_take(self, source->instance_id, info.storage_id, holder, "read", false, why, sizeof why)
        != S_GRANTED) {
        s_lock_release(self, source->instance_id, holder, NULL);
        free(holder);
        shoal_msg_object_info_codec.clear(&info);
        return shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "the instance here cannot be sent: %s", why);
    }
    s_replication_t *replication = (s_replication_t *) zmalloc(sizeof *replication);
    replication->self = self;
    replication->sid = info.storage_id;
    replication->source_iid = source->instance_id;
    replication->holder = holder;
    replication->tenant = strdup(info.tenant);
    replication->name = strdup(info.name);
    replication->size = info.size;
    shoal_checksum_set(&replication->checksum, source->checksum, source->checksum_size);
    //  What the late reply answers: the request's type and id.
    replication->request = shoal_envelope_new(request->type, request->request_id);
    replication->routing_id = zframe_dup(routing_id);
    replication->had = had;
    replication->copies = copies;
    replication->to = to ? strdup(to) : NULL;
    replication->info = info;
    s_look_t look = s_instance_look(self, source, false, why, sizeof why);
    if (look == S_LOOK_HASH) {
        s_verify_give(self, source, NULL, replication);
        return NULL;
    }
    reply = look == S_LOOK_GOOD ? s_replication_begin(self, replication) : s_replication_bad(self, replication, why);
    if (reply) {
        void *item = replication;
        s_replication_destroy(&item);
    }
    return reply;
}

static void
s_incoming_destroy(void **item_p)
{
    s_incoming_t *incoming = (s_incoming_t *) *item_p;
    if (incoming) {
        free(incoming->id);
        free(incoming);
        *item_p = NULL;
    }
}

//  A peer's replicate: a new instance here, under a write lock, whose
//  bytes the object receiver takes.
static shoal_envelope_t *
s_receive(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_object_request_t *body = (const shoal_msg_object_request_t *) request->body;
    if (!streq(caller->role, SHOAL_ROLE_NODE))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "receive is asked by nodes only");
    shoal_checksum_t checksum;
    if (!body->storage_id || shoal_checksum_set(&checksum, body->checksum, body->checksum_size) || !checksum.size)
        return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "a receive names the object and its checksum");
    char *error = NULL;
    uint64_t iid = s_id_new(self, SHOAL_OBJECT_ID_INSTANCE, &error);
    if (!iid)
        return s_failed(request, self, error);
    char *dir = zsys_sprintf("%s/%016" PRIx64, self->dir, body->storage_id);
    int made = zsys_dir_create("%s", dir);
    free(dir);
    if (made)
        return s_failed(request, self, zsys_sprintf("cannot make the object's directory: %s", strerror(errno)));
    char why[S_ERROR_MAX];
    if (s_lock_take(self, iid, body->storage_id, S_HOLDER_RECEIVE, "write", false, why, sizeof why) != S_GRANTED)
        return s_failed(request, self, zsys_sprintf("cannot write-lock the new instance: %s", why));
    char *uri = s_instance_uri(body->storage_id, iid);
    shoal_msg_object_instance_t instance = {
        .instance_id = iid, .storage_id = body->storage_id, .node = self->settings->node_id, .uri = uri,
        .size = body->size, .state = SHOAL_INSTANCE_WRITING, .modified_ms = s_now_ms()
    };
    int rc = s_instance_write(self, &instance, &error);
    free(uri);
    if (rc) {
        shoal_object_store_lock_remove(self->store, iid);
        return s_failed(request, self, error);
    }
    s_incoming_t *incoming = (s_incoming_t *) zmalloc(sizeof *incoming);
    incoming->id = zsys_sprintf("o-%016" PRIx64, iid);
    incoming->sid = body->storage_id;
    incoming->iid = iid;
    incoming->size = body->size;
    incoming->checksum = checksum;
    incoming->heard_ms = zclock_mono();
    zhashx_update(self->incoming, incoming->id, incoming);
    char *path = s_instance_path(self, body->storage_id, iid);
    shoal_receiver_prepare_object(self->receiver, incoming->id, path, body->size, &checksum);
    free(path);
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    answer->instance_id = iid;
    answer->storage_id = body->storage_id;
    answer->endpoint = strdup(shoal_receiver_endpoint(self->receiver));
    answer->node = strdup(self->settings->node_id);
    return reply;
}

static void s_fetches_end(shoal_objects_t *self, uint64_t sid, const char *error_text);

//  An instance that arrived (or failed to): complete, or gone.
static void
s_incoming_end(shoal_objects_t *self, s_incoming_t *incoming, const char *error_text)
{
    char *error = NULL;
    shoal_receiver_forget(self->receiver, incoming->id, *error_text != '\0');
    if (*error_text) {
        zsys_warning("objects: instance %016" PRIx64 " of object %016" PRIx64 " did not arrive: %s", incoming->iid,
                     incoming->sid, error_text);
        if (s_instance_remove(self, incoming->sid, incoming->iid, &error))
            zsys_warning("objects: and cannot be removed: %s", error);
    }
    else {
        char *uri = s_instance_uri(incoming->sid, incoming->iid);
        shoal_msg_object_instance_t instance = {
            .instance_id = incoming->iid, .storage_id = incoming->sid, .node = self->settings->node_id, .uri = uri,
            .checksum = incoming->checksum.bytes, .checksum_size = incoming->checksum.size, .size = incoming->size,
            .state = SHOAL_INSTANCE_COMPLETE, .modified_ms = s_now_ms()
        };
        if (s_instance_write(self, &instance, &error) == 0 && s_lock_release(self, incoming->iid, S_HOLDER_RECEIVE,
                                                                             NULL) >= 0) {
            zsys_info("objects: instance %016" PRIx64 " of object %016" PRIx64 " arrived whole (%" PRIu64 " bytes)",
                      incoming->iid, incoming->sid, incoming->size);
            //  A corrupt instance of the same object here is replaced now.
            shoal_msg_object_info_t info = { 0 };
            char *why = NULL;
            if (s_instances_read(self, incoming->sid, &info, &why) == 0)
                for (size_t i = 0; i < info.count; i++)
                    if (streq(info.instances[i].node, self->settings->node_id)
                    &&  info.instances[i].state == SHOAL_INSTANCE_CORRUPT) {
                        char *failed = NULL;
                        if (s_instance_remove(self, incoming->sid, info.instances[i].instance_id, &failed) == 0)
                            zsys_info("objects: corrupt instance %016" PRIx64 " replaced by %016" PRIx64,
                                      info.instances[i].instance_id, incoming->iid);
                        free(failed);
                    }
            free(why);
            shoal_msg_object_info_codec.clear(&info);
        }
        else
            zsys_error("objects: instance %016" PRIx64 " arrived but cannot be recorded: %s", incoming->iid,
                       error ? error : shoal_store_error(self->store));
        free(uri);
    }
    free(error);
    uint64_t sid = incoming->sid;
    zhashx_delete(self->incoming, incoming->id);
    s_fetches_end(self, sid, *error_text ? error_text : NULL);
}

static int
s_receiver_readable(zloop_t *loop, zsock_t *reader, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    shoal_receiver_event_t event;
    if (shoal_receiver_event(self->receiver, &event))
        return 0;
    s_incoming_t *incoming = (s_incoming_t *) zhashx_lookup(self->incoming, event.move_id);
    if (!incoming)
        return 0;
    incoming->heard_ms = zclock_mono();
    if (event.prepared && *event.error)
        s_incoming_end(self, incoming, event.error);
    else
    if (!event.prepared && !event.progress && (event.final || *event.error))
        s_incoming_end(self, incoming, event.error);
    return 0;
}

// ---------------------------------------------------------------------------
//  Ids over the protocol

static shoal_envelope_t *
s_ids(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    const shoal_msg_object_ids_t *body = (const shoal_msg_object_ids_t *) request->body;
    if (shoal_caller_is_tenant(caller))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "ids are allocated for admins");
    size_t count = body->count ? body->count : 1;
    uint64_t *ids = (uint64_t *) zmalloc(count * sizeof *ids);
    char *error = NULL;
    if (shoal_objects_ids(self, body->kind, count, ids, &error)) {
        free(ids);
        return s_failed(request, self, error);
    }
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_ids_t *answer = (shoal_msg_object_ids_t *) shoal_envelope_new_body(reply);
    answer->kind = body->kind;
    answer->count = (uint32_t) count;
    answer->ids = ids;
    answer->ids_count = count;
    return reply;
}

static shoal_envelope_t *s_check_request(shoal_objects_t *self, const shoal_envelope_t *request,
                                         const shoal_caller_t *caller, const shoal_msg_object_request_t *body);

// ---------------------------------------------------------------------------
//  Guest images, for claims

shoal_envelope_t *
shoal_objects_image_open(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                         const char *name, const char *holder, shoal_objects_image_t *image)
{
    memset(image, 0, sizeof *image);
    shoal_msg_object_request_t body = { .name = (char *) name };
    shoal_msg_object_info_t info;
    shoal_envelope_t *reply = s_resolve(self, request, tenant, &body, &info);
    if (reply)
        return reply;
    if (!info.memory_bytes || shoal_checksum_set(&image->checksum, info.checksum, info.checksum_size)
    ||  !image->checksum.size) {
        reply = shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "object '%s' of tenant %s is not a guest "
                                     "image (claim checkpoint makes those): no guest starts from it", name, tenant);
        shoal_msg_object_info_codec.clear(&info);
        return reply;
    }
    image->storage_id = info.storage_id;
    image->size = info.size;
    image->memory_bytes = info.memory_bytes;
    image->disk_bytes = info.disk_bytes;
    image->holder = strdup(holder);
    size_t complete = 0, locked = 0;
    char why[S_ERROR_MAX] = "";
    //  No checksum here: the guest actor checks every byte as it reads.
    for (size_t i = 0; i < info.count && !image->instance_id && !reply; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (instance->state != SHOAL_INSTANCE_COMPLETE)
            continue;
        complete++;
        if (!streq(instance->node, self->settings->node_id))
            continue;
        s_lock_result_t taken = s_lock_take(self, instance->instance_id, info.storage_id, holder, "read", false,
                                            why, sizeof why);
        if (taken == S_FAILED)
            reply = s_failed(request, self, zsys_sprintf("cannot read-lock: %s", why));
        else
        if (taken == S_REFUSED)
            locked++;
        else {
            image->instance_id = instance->instance_id;
            image->path = s_instance_path(self, info.storage_id, instance->instance_id);
        }
    }
    if (!reply && !image->instance_id && locked)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_CONFLICT, "object '%s': %s: it is being removed or "
                                     "replaced; resolve its name again", name, why);
    else
    if (!reply && !complete)
        reply = shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "object '%s' of tenant %s has no good instance "
                                     "anywhere", name, tenant);
    shoal_msg_object_info_codec.clear(&info);
    if (reply)
        shoal_objects_image_close(self, image, NULL);
    return reply;
}

void
shoal_objects_image_close(shoal_objects_t *self, shoal_objects_image_t *image, const char *corrupt)
{
    if (image->instance_id && corrupt) {
        shoal_msg_object_info_t info = { 0 };
        char *error = NULL;
        if (s_instances_read(self, image->storage_id, &info, &error) == 0) {
            for (size_t i = 0; i < info.count; i++)
                if (info.instances[i].instance_id == image->instance_id)
                    s_instance_mark_corrupt(self, &info.instances[i], corrupt);
        }
        free(error);
        shoal_msg_object_info_codec.clear(&info);
    }
    if (image->instance_id) {
        shoal_msg_object_lock_t after = { 0 };
        if (s_lock_release(self, image->instance_id, image->holder, &after) >= 0)
            s_removal_resume(self, &after);
        shoal_msg_object_lock_codec.clear(&after);
    }
    free(image->holder);
    free(image->path);
    memset(image, 0, sizeof *image);
}

static void
s_fetch_destroy(s_fetch_t **fetch_p)
{
    if (*fetch_p) {
        free((*fetch_p)->source);
        free(*fetch_p);
        *fetch_p = NULL;
    }
}

//  Tells FETCH's caller how it ended (ERROR_TEXT NULL: well), once.
static void
s_fetch_end(s_fetch_t *fetch, const char *error_text, bool cancelled)
{
    if (fetch->ended)
        return;
    fetch->ended = true;
    void *cursor = zlistx_find(fetch->self->fetches, fetch);
    if (cursor)
        zlistx_detach_cur(fetch->self->fetches);
    fetch->done(error_text ? -1 : 0, error_text ? error_text : "", cancelled, fetch->arg);
}

//  An instance of SID arrived here (ERROR_TEXT NULL) or failed to: the
//  fetches waiting for it end.
static void
s_fetches_end(shoal_objects_t *self, uint64_t sid, const char *error_text)
{
    s_fetch_t *fetch = (s_fetch_t *) zlistx_first(self->fetches);
    while (fetch) {
        s_fetch_t *next = (s_fetch_t *) zlistx_next(self->fetches);
        if (fetch->sid == sid) {
            char *why = error_text ? zsys_sprintf("its copy from %s failed: %s", fetch->source, error_text) : NULL;
            s_fetch_end(fetch, why, false);
            free(why);
            if (fetch->answered)
                s_fetch_destroy(&fetch);
            //  The list changed: walk it again from the start.
            next = (s_fetch_t *) zlistx_first(self->fetches);
        }
        fetch = next;
    }
}

//  Whether an instance of SID is arriving here.
static bool
s_arriving(shoal_objects_t *self, uint64_t sid)
{
    for (s_incoming_t *incoming = (s_incoming_t *) zhashx_first(self->incoming); incoming;
         incoming = (s_incoming_t *) zhashx_next(self->incoming))
        if (incoming->sid == sid)
            return true;
    return false;
}

//  Whether this node holds a complete instance of SID.
static bool
s_holds(shoal_objects_t *self, uint64_t sid)
{
    shoal_msg_object_info_t info = { 0 };
    char *error = NULL;
    bool holds = false;
    if (s_instances_read(self, sid, &info, &error) == 0)
        for (size_t i = 0; i < info.count; i++)
            holds |= info.instances[i].state == SHOAL_INSTANCE_COMPLETE
                  && streq(info.instances[i].node, self->settings->node_id);
    free(error);
    shoal_msg_object_info_codec.clear(&info);
    return holds;
}

static void
s_fetch_answered(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    s_fetch_t *fetch = (s_fetch_t *) arg;
    shoal_objects_t *self = fetch->self;
    fetch->answered = true;
    if (!fetch->ended) {
        if (!reply && shoal_mesh_stopping(mesh))
            s_fetch_end(fetch, "the node is stopping", true);
        else
        if (s_holds(self, fetch->sid))
            s_fetch_end(fetch, NULL, false);
        else
        if (!s_arriving(self, fetch->sid)) {
            char *why = zsys_sprintf("%s did not copy it here: %s", node_id,
                                     reply ? reply->message : "no answer in time");
            s_fetch_end(fetch, why, false);
            free(why);
        }
        //  Otherwise its bytes are arriving still: the arrival ends it.
    }
    if (fetch->ended)
        s_fetch_destroy(&fetch);
}

int
shoal_objects_fetch(shoal_objects_t *self, const char *tenant, const shoal_objects_image_t *image,
                    shoal_objects_fetched_fn *done, void *arg, char **error_p)
{
    shoal_msg_object_info_t info = { 0 };
    if (s_instances_read(self, image->storage_id, &info, error_p))
        return -1;
    zlistx_t *alive = shoal_mesh_alive(self->mesh);
    const char *source = NULL;
    for (size_t i = 0; i < info.count && !source; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (instance->state != SHOAL_INSTANCE_COMPLETE || streq(instance->node, self->settings->node_id))
            continue;
        for (const char *node = (const char *) zlistx_first(alive); node; node = (const char *) zlistx_next(alive))
            if (streq(node, instance->node))
                source = instance->node;
    }
    int rc = 0;
    if (!source) {
        *error_p = zsys_sprintf("no alive node holds a complete instance of object %016" PRIx64 " (%zu instance(s) "
                                "in the catalog)", image->storage_id, info.count);
        rc = -1;
    }
    else {
        s_fetch_t *fetch = (s_fetch_t *) zmalloc(sizeof *fetch);
        fetch->self = self;
        fetch->sid = image->storage_id;
        fetch->source = strdup(source);
        fetch->done = done;
        fetch->arg = arg;
        shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 0);
        shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
        body->op = SHOAL_OBJECT_REPLICATE;
        body->tenant = strdup(tenant);
        body->storage_id = image->storage_id;
        body->to = strdup(self->settings->node_id);
        if (shoal_mesh_send(self->mesh, source, &request, S_FETCH_ANSWER_MS, s_fetch_answered, fetch)) {
            shoal_envelope_destroy(&request);
            *error_p = zsys_sprintf("cannot ask %s for object %016" PRIx64 ": no such peer", source,
                                    image->storage_id);
            s_fetch_destroy(&fetch);
            rc = -1;
        }
        else {
            zlistx_add_end(self->fetches, fetch);
            zsys_info("objects: object %016" PRIx64 " is copied here from %s", image->storage_id, source);
        }
    }
    zlistx_destroy(&alive);
    shoal_msg_object_info_codec.clear(&info);
    return rc;
}

shoal_envelope_t *
shoal_objects_image_add(shoal_objects_t *self, const shoal_envelope_t *request, const char *tenant,
                        const char *name, const char *comment, uint64_t *iid_p, char **path_p)
{
    s_upload_t *upload = NULL;
    //  The guest actor hashes the file (shoal_checkpoint_write): not this module.
    shoal_envelope_t *reply = s_upload_begin(self, request, tenant, name, comment, 0, false, SHOAL_CHECKSUM_DEFAULT,
                                             &upload);
    if (reply)
        return reply;
    //  The guest actor writes the file: nothing goes through this module.
    upload->local = true;
    close(upload->fd);
    upload->fd = -1;
    *iid_p = upload->iid;
    *path_p = s_instance_path(self, upload->sid, upload->iid);
    return NULL;
}

static s_upload_t *
s_upload_local(shoal_objects_t *self, uint64_t iid)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    s_upload_t *upload = (s_upload_t *) zhashx_lookup(self->uploads, id);
    return upload && upload->local ? upload : NULL;
}

shoal_envelope_t *
shoal_objects_image_commit(shoal_objects_t *self, const shoal_envelope_t *request, uint64_t iid, uint64_t size,
                           const shoal_checksum_t *checksum, uint64_t memory_bytes, uint64_t disk_bytes)
{
    s_upload_t *upload = s_upload_local(self, iid);
    if (!upload)
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "the add of instance %016" PRIx64 " is gone", iid);
    upload->size = size;
    upload->offset = size;
    upload->memory_bytes = memory_bytes;
    upload->disk_bytes = disk_bytes;
    return s_upload_commit(self, request, upload, checksum);
}

void
shoal_objects_image_abort(shoal_objects_t *self, uint64_t iid)
{
    s_upload_t *upload = s_upload_local(self, iid);
    if (upload)
        s_upload_abort(self, upload);
}

// ---------------------------------------------------------------------------
//  The module

shoal_objects_t *
shoal_objects_new(const shoal_settings_t *settings, const char *endpoint, zcert_t *cluster, shoal_store_t *store,
                  shoal_oplog_t *oplog, shoal_mesh_t *mesh, shoal_data_written_fn *written, void *arg,
                  char **error_p)
{
    char *dir = zsys_sprintf("%s/%s", settings->data_dir, S_OBJECTS_DIR);
    if (zsys_dir_create("%s", dir)) {
        *error_p = zsys_sprintf("cannot make %s: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    uint64_t reserved[3] = { 0 };
    for (int kind = SHOAL_OBJECT_ID_STORAGE; kind <= SHOAL_OBJECT_ID_INSTANCE; kind++)
        if (shoal_object_store_ids_reserved(store, (shoal_object_id_kind_t) kind, &reserved[kind])) {
            *error_p = zsys_sprintf("cannot read the ids reserved: %s", shoal_store_error(store));
            free(dir);
            return NULL;
        }
    const char *colon = strrchr(settings->bind, ':');
    char *bind = zsys_sprintf("%.*s:*", (int) (colon - settings->bind), settings->bind);
    shoal_gate_options_t gate = shoal_gate_options(settings);
    shoal_receiver_t *receiver = shoal_receiver_new(bind, endpoint, cluster, &gate, error_p);
    free(bind);
    if (!receiver) {
        free(dir);
        return NULL;
    }
    shoal_objects_t *self = (shoal_objects_t *) zmalloc(sizeof *self);
    self->settings = settings;
    self->endpoint = strdup(endpoint);
    self->cluster = zcert_dup(cluster);
    self->store = store;
    self->oplog = oplog;
    self->mesh = mesh;
    self->written = written;
    self->written_arg = arg;
    self->receiver = receiver;
    self->dir = dir;
    self->number = shoal_objects_node_number(settings->node_id);
    for (int kind = SHOAL_OBJECT_ID_STORAGE; kind <= SHOAL_OBJECT_ID_INSTANCE; kind++) {
        //  What was reserved may have been given out before a crash: the
        //  counter starts above all of it (1 when nothing was).
        self->reserved[kind] = reserved[kind];
        self->next[kind] = reserved[kind] ? reserved[kind] : 1;
        if (self->reserved[kind] < self->next[kind])
            self->reserved[kind] = self->next[kind];
    }
    self->uploads = zhashx_new();
    zhashx_set_destructor(self->uploads, s_upload_destroy);
    self->incoming = zhashx_new();
    zhashx_set_destructor(self->incoming, s_incoming_destroy);
    self->replications = zlistx_new();
    zlistx_set_destructor(self->replications, s_replication_destroy);
    self->fetches = zlistx_new();
    self->ios = zlistx_new();
    zlistx_set_destructor(self->ios, s_io_destroy);
    self->endpoints = zhashx_new();
    zhashx_set_destructor(self->endpoints, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_duplicator(self->endpoints, (zhashx_duplicator_fn *) strdup);
    return self;
}

void
shoal_objects_destroy(shoal_objects_t **self_p)
{
    if (*self_p) {
        shoal_objects_t *self = *self_p;
        zlistx_destroy(&self->replications);
        if (self->worker && self->loop)
            zloop_reader_end(self->loop, zactor_sock(self->worker));
        if (self->verifier && self->loop)
            zloop_reader_end(self->loop, zactor_sock(self->verifier));
        //  The workers end first (the work in hand finished): then the
        //  work they never sent back, and the adds written, are freed here.
        zactor_destroy(&self->worker);
        zactor_destroy(&self->verifier);
        zhashx_destroy(&self->uploads);
        zlistx_destroy(&self->ios);
        zhashx_destroy(&self->incoming);
        zhashx_destroy(&self->endpoints);
        //  Each fetch is its answer's to free: the mesh, gone before this,
        //  told them all.
        zlistx_destroy(&self->fetches);
        if (self->loop)
            zloop_reader_end(self->loop, shoal_receiver_sock(self->receiver));
        shoal_receiver_destroy(&self->receiver);
        zcert_destroy(&self->cluster);
        free(self->endpoint);
        free(self->dir);
        free(self);
        *self_p = NULL;
    }
}

int
shoal_objects_start(shoal_objects_t *self, zloop_t *loop, zsock_t *router)
{
    self->loop = loop;
    self->router = router;
    self->worker = shoal_worker_new("shoal-objects", s_io_run);
    if (!self->worker)
        return -1;
    if (zloop_reader(loop, zactor_sock(self->worker), s_worker_readable, self))
        return -1;
    self->verifier = shoal_worker_new("shoal-verify", s_io_run);
    if (!self->verifier || zloop_reader(loop, zactor_sock(self->verifier), s_worker_readable, self))
        return -1;
    s_discard_leftovers(self);
    return zloop_reader(loop, shoal_receiver_sock(self->receiver), s_receiver_readable, self);
}

void
shoal_objects_stop(shoal_objects_t *self)
{
    if (!self->loop)
        return;
    zlistx_purge(self->replications);
    zloop_reader_end(self->loop, shoal_receiver_sock(self->receiver));
    if (self->worker)
        zloop_reader_end(self->loop, zactor_sock(self->worker));
    if (self->verifier)
        zloop_reader_end(self->loop, zactor_sock(self->verifier));
    self->loop = NULL;
    self->router = NULL;
}

//  Gives up adds and arrivals nobody spoke of for too long. Called from
//  the node's tick.
void
shoal_objects_tick(shoal_objects_t *self)
{
    int64_t now = zclock_mono();
    zlistx_t *stale = zlistx_new();
    for (s_upload_t *upload = (s_upload_t *) zhashx_first(self->uploads); upload;
         upload = (s_upload_t *) zhashx_next(self->uploads))
        if (!upload->local && now - upload->heard_ms > S_UPLOAD_IDLE_MS)
            zlistx_add_end(stale, upload);
    for (s_upload_t *upload = (s_upload_t *) zlistx_first(stale); upload; upload = (s_upload_t *) zlistx_next(stale)) {
        zsys_warning("objects: the add of instance %016" PRIx64 " sent nothing for %d s: given up", upload->iid,
                     S_UPLOAD_IDLE_MS / 1000);
        s_upload_abort(self, upload);
    }
    zlistx_purge(stale);
    int64_t limit = self->settings->move_step_ms > 0 ? self->settings->move_step_ms : S_PEER_TIMEOUT_MS;
    for (s_incoming_t *incoming = (s_incoming_t *) zhashx_first(self->incoming); incoming;
         incoming = (s_incoming_t *) zhashx_next(self->incoming))
        if (now - incoming->heard_ms > limit)
            zlistx_add_end(stale, incoming);
    for (s_incoming_t *incoming = (s_incoming_t *) zlistx_first(stale); incoming;
         incoming = (s_incoming_t *) zlistx_next(stale))
        s_incoming_end(self, incoming, "its source sent nothing for move/step_timeout_ms");
    zlistx_destroy(&stale);
}

bool
shoal_objects_handles(shoal_msg_type_t type)
{
    return type >= SHOAL_MSG_OBJECT && type <= SHOAL_MSG_OBJECT_IDS;
}

void
shoal_objects_mesh_event(shoal_mesh_event_t event, const char *node_id, const char *endpoint, void *arg)
{
    shoal_objects_t *self = (shoal_objects_t *) arg;
    if (endpoint && *endpoint && (event == SHOAL_MESH_JOINED || event == SHOAL_MESH_ALIVE
                                  || event == SHOAL_MESH_REJOINED))
        zhashx_update(self->endpoints, node_id, (void *) endpoint);
}

shoal_envelope_t *
shoal_objects_handle(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                     zframe_t *routing_id)
{
    switch (request->type) {
        case SHOAL_MSG_OBJECT_WRITE:
            return s_write(self, request, caller, routing_id);
        case SHOAL_MSG_OBJECT_READ:
            return s_read(self, request, caller, routing_id);
        case SHOAL_MSG_OBJECT_RECEIVE:
            return s_receive(self, request, caller);
        case SHOAL_MSG_OBJECT_IDS:
            return s_ids(self, request, caller);
        case SHOAL_MSG_OBJECT:
            break;
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "%s is no object request",
                                        shoal_msg_type_name(request->type));
    }
    const shoal_msg_object_request_t *body = (const shoal_msg_object_request_t *) request->body;
    if (body->op == SHOAL_OBJECT_DROP)
        return s_drop(self, request, caller, body);
    if (body->op == SHOAL_OBJECT_CLOSE)
        return s_close(self, request, caller, body);
    if (body->op == SHOAL_OBJECT_CHECK)
        return s_check_request(self, request, caller, body);
    bool required = body->op != SHOAL_OBJECT_LIST && body->op != SHOAL_OBJECT_COMMIT && body->op != SHOAL_OBJECT_ABORT
                 && !(body->storage_id && !*body->name);
    shoal_envelope_t *refusal = NULL;
    const char *tenant = s_tenant(request, caller, body->tenant, required, &refusal);
    if (!tenant)
        return refusal;
    switch (body->op) {
        case SHOAL_OBJECT_ADD: return s_add(self, request, tenant, body);
        case SHOAL_OBJECT_COMMIT: return s_commit(self, request, tenant, body, routing_id);
        case SHOAL_OBJECT_ABORT: return s_abort(self, request, tenant, body);
        case SHOAL_OBJECT_GET: return s_get(self, request, tenant, body);
        case SHOAL_OBJECT_LIST: return s_list(self, request, tenant, body);
        case SHOAL_OBJECT_REMOVE: return s_remove(self, request, tenant, body);
        case SHOAL_OBJECT_OPEN: return s_open(self, request, caller, tenant, body, routing_id);
        case SHOAL_OBJECT_REPLICATE: return s_replicate(self, request, tenant, body, routing_id);
        default:
            return shoal_envelope_reply(request, SHOAL_STATUS_BAD_REQUEST, "op %s is not asked this way",
                                        shoal_object_op_name(body->op));
    }
}

// ---------------------------------------------------------------------------
//  The consistency sweep's part (seed 001)

//  The phases of a check, in order.
typedef enum {
    S_CHECK_OBJECTS,            //  the catalog's objects, with their instances (and their bytes' hashes)
    S_CHECK_INSTANCES,          //  the catalog's instances, against the objects seen
    S_CHECK_LOCKS,              //  this node's locks and records
    S_CHECK_FILES,              //  the files under DATA/objects
    S_CHECK_DONE
} s_check_phase_t;

//  A local instance whose bytes are being hashed, a slice at a time.
typedef struct {
    uint64_t sid;
    uint64_t iid;
    int fd;                     //  -1 until opened
    uint64_t size;              //  the catalog's
    uint64_t offset;            //  hashed so far
    shoal_hasher_t hash;        //  with the algorithm CHECKSUM names
    shoal_checksum_t checksum;  //  what it must hash to (empty: none it may have)
} s_verify_t;

struct _shoal_objects_check_t {
    shoal_objects_t *self;
    bool repair;                //  mends what it finds as it goes
    shoal_objects_finding_fn *fn;   //  the step's
    void *arg;
    int findings;
    zhashx_t *local;            //  instance ids (text) of this node's instances in the catalog
    zhashx_t *objects;          //  storage ids (text) of the catalog's objects
    s_check_phase_t phase;
    shoal_kv_list_t page;       //  the catalog keys at hand
    size_t next;                //  the next of them
    char *after;                //  the next page starts after this key ("": the first)
    zlistx_t *verifies;         //  s_verify_t, hashed one after the other
    DIR *root;                  //  files: DATA/objects
    char *sub;                  //  files: the object directory at hand
    DIR *dir;                   //  and its listing
};

typedef shoal_objects_check_t s_check_t;

static void CHECK_PRINTF(4)
s_finding(s_check_t *check, const char *key, bool repaired, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *what = zsys_vprintf(format, args);
    va_end(args);
    check->findings++;
    if (check->fn)
        check->fn(key, what, repaired, check->arg);
    zsys_info("objects: check: %s: %s%s", key, what, repaired ? " (repaired)" : "");
    free(what);
}

static bool
s_upload_of_object(shoal_objects_t *self, uint64_t sid)
{
    for (s_upload_t *upload = (s_upload_t *) zhashx_first(self->uploads); upload;
         upload = (s_upload_t *) zhashx_next(self->uploads))
        if (upload->sid == sid)
            return true;
    return false;
}

static bool
s_in_flight(shoal_objects_t *self, uint64_t iid)
{
    char id[64];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    if (zhashx_lookup(self->uploads, id))
        return true;
    snprintf(id, sizeof id, "o-%016" PRIx64, iid);
    return zhashx_lookup(self->incoming, id) != NULL;
}

static void
s_replicate_asked(shoal_mesh_t *mesh, const char *node_id, const shoal_envelope_t *reply, void *arg)
{
    char *sid = (char *) arg;
    zsys_info("objects: check: %s answered the replicate of object %s: %s", node_id, sid,
              reply ? reply->message : "nothing");
    free(sid);
}

//  Asks a node that holds a complete instance of INFO to replicate it to
//  every node of the mesh that lacks one (this one among them).
static bool
s_ask_replicate(shoal_objects_t *self, const shoal_msg_object_info_t *info)
{
    uint32_t complete = 0;
    const char *source = NULL;
    for (size_t i = 0; i < info->count; i++)
        if (info->instances[i].state == SHOAL_INSTANCE_COMPLETE) {
            complete++;
            if (!streq(info->instances[i].node, self->settings->node_id))
                source = info->instances[i].node;
        }
    if (!source)
        return false;
    shoal_envelope_t *request = shoal_envelope_new(SHOAL_MSG_OBJECT, 0);
    shoal_msg_object_request_t *body = (shoal_msg_object_request_t *) shoal_envelope_new_body(request);
    body->op = SHOAL_OBJECT_REPLICATE;
    body->tenant = strdup(info->tenant);
    body->storage_id = info->storage_id;
    body->copies = complete + 1;
    body->to = strdup(self->settings->node_id);
    char *arg = s_id_text(info->storage_id);
    if (shoal_mesh_send(self->mesh, source, &request, S_PEER_TIMEOUT_MS * 6, s_replicate_asked, arg)) {
        shoal_envelope_destroy(&request);
        free(arg);
        return false;
    }
    return true;
}

static void s_bad_instance(s_check_t *check, const shoal_msg_object_info_t *info,
                           const shoal_msg_object_instance_t *instance, const char *why);

//  One object of the catalog, with its instances; the bytes of this node's
//  complete ones wait to be hashed.
static int
s_check_object(s_check_t *check, const shoal_msg_object_info_t *info, char **error_p)
{
    shoal_objects_t *self = check->self;
    char key[S_KEY_MAX];
    s_key_object(key, info->storage_id);
    //  This node's instances, whatever comes of the object below.
    for (size_t i = 0; i < info->count; i++)
        if (streq(info->instances[i].node, self->settings->node_id)) {
            char id[32];
            snprintf(id, sizeof id, "%" PRIu64, info->instances[i].instance_id);
            zhashx_update(check->local, id, (void *) 1);
        }
    //  Instances being written by nobody (an add or a transfer cut off by
    //  a crash) first: an object made of nothing else is only that.
    size_t stale = 0;
    for (size_t i = 0; i < info->count; i++) {
        const shoal_msg_object_instance_t *instance = &info->instances[i];
        if (!streq(instance->node, self->settings->node_id) || instance->state != SHOAL_INSTANCE_WRITING
        ||  s_in_flight(self, instance->instance_id))
            continue;
        char instance_key[S_KEY_MAX];
        s_key_instance(instance_key, instance->storage_id, instance->instance_id);
        bool repaired = check->repair
                     && s_instance_remove(self, instance->storage_id, instance->instance_id, error_p) == 0;
        s_finding(check, instance_key, repaired, "instance is being written but no add or transfer writes it%s",
                  repaired ? ": removed, bytes, lock and key" : "");
        stale++;
    }
    if (stale && stale == info->count)
        return 0;
    uint64_t bound = 0;
    if (*info->name && s_binding(self, info->tenant, info->name, &bound, error_p))
        return -1;
    bool adding = s_upload_of_object(self, info->storage_id);
    if (info->count == 0 && !adding) {
        bool repaired = check->repair && bound != info->storage_id
                     && s_catalog_delete(self, key, error_p) == 0;
        s_finding(check, key, repaired, "object '%s' of %s has no instance%s", info->name, info->tenant,
                  bound == info->storage_id ? ": its name is bound to nothing that can be read" : "");
        return 0;
    }
    if (bound != info->storage_id && !adding) {
        char message[S_ERROR_MAX];
        bool repaired = check->repair && s_object_remove(self, info, message, sizeof message, error_p) == 0;
        s_finding(check, key, repaired, "object '%s' of %s is bound to no name (an update or a removal left it)%s%s",
                  info->name, info->tenant, repaired ? ": " : "", repaired ? message : "");
        return 0;
    }
    for (size_t i = 0; i < info->count; i++) {
        const shoal_msg_object_instance_t *instance = &info->instances[i];
        if (!streq(instance->node, self->settings->node_id) || instance->state == SHOAL_INSTANCE_WRITING)
            continue;
        if (instance->state == SHOAL_INSTANCE_CORRUPT) {
            s_bad_instance(check, info, instance, "instance is marked corrupt");
            continue;
        }
        //  Its bytes are hashed a slice at a time (s_verify_step).
        s_verify_t *verify = (s_verify_t *) zmalloc(sizeof *verify);
        verify->sid = instance->storage_id;
        verify->iid = instance->instance_id;
        verify->fd = -1;
        verify->size = instance->size;
        //  Each instance is hashed with the algorithm its checksum names
        //  (BLAKE2b for those written before XXH3); one without a checksum
        //  matches none.
        shoal_checksum_set(&verify->checksum, instance->checksum, instance->checksum_size);
        int algorithm = shoal_checksum_algorithm(verify->checksum.bytes, verify->checksum.size);
        shoal_hasher_init(&verify->hash, algorithm > SHOAL_CHECKSUM_NONE ? (shoal_checksum_algorithm_t) algorithm
                                                                         : SHOAL_CHECKSUM_DEFAULT);
        zlistx_add_end(check->verifies, verify);
    }
    return 0;
}

//  A local INSTANCE of INFO whose bytes are bad (WHY): with repair, marked
//  corrupt and a good copy asked for.
static void
s_bad_instance(s_check_t *check, const shoal_msg_object_info_t *info, const shoal_msg_object_instance_t *instance,
               const char *why)
{
    shoal_objects_t *self = check->self;
    char instance_key[S_KEY_MAX];
    s_key_instance(instance_key, instance->storage_id, instance->instance_id);
    if (instance->state == SHOAL_INSTANCE_COMPLETE && check->repair)
        s_instance_mark_corrupt(self, instance, why);
    bool asked = check->repair && s_ask_replicate(self, info);
    s_finding(check, instance_key, asked, "%s%s", why, asked ? ": marked corrupt, and a node with a good copy "
              "asked to replicate it here" : check->repair ? ": no other node holds a good copy" : "");
}

static void
s_verify_destroy(void **item_p)
{
    s_verify_t *verify = (s_verify_t *) *item_p;
    if (verify) {
        if (verify->fd >= 0)
            close(verify->fd);
        free(verify);
        *item_p = NULL;
    }
}

//  The end of VERIFY's look (WHY: what is wrong, NULL: nothing): the
//  instance is read again, live, and named only if it is still as it was.
static void
s_verify_end(s_check_t *check, s_verify_t *verify, const char *why)
{
    shoal_objects_t *self = check->self;
    if (why) {
        shoal_msg_object_info_t info = { 0 };
        bool found = false;
        char *error = NULL;
        if (s_object_read(self, verify->sid, &info, &found, &error) == 0 && found)
            for (size_t i = 0; i < info.count; i++)
                if (info.instances[i].instance_id == verify->iid
                &&  info.instances[i].state == SHOAL_INSTANCE_COMPLETE)
                    s_bad_instance(check, &info, &info.instances[i], why);
        free(error);
        shoal_msg_object_info_codec.clear(&info);
    }
    //  VERIFY is always the first one waiting.
    zlistx_first(check->verifies);
    zlistx_delete(check->verifies, zlistx_cursor(check->verifies));
}

//  Hashes up to BUDGET units (S_CHECK_UNIT bytes each) of the instances
//  waiting. Returns the units used.
static size_t
s_verify_step(s_check_t *check, size_t budget)
{
    size_t used = 0;
    uint8_t *buffer = NULL;
    s_verify_t *verify;
    while (used < budget && (verify = (s_verify_t *) zlistx_first(check->verifies))) {
        char why[S_ERROR_MAX];
        if (verify->fd < 0) {
            char *path = s_instance_path(check->self, verify->sid, verify->iid);
            struct stat info;
            verify->fd = open(path, O_RDONLY | O_CLOEXEC);
            if (verify->fd < 0 || fstat(verify->fd, &info) != 0)
                snprintf(why, sizeof why, "its file %s is missing: %s", path, strerror(errno));
            else
            if ((uint64_t) info.st_size != verify->size)
                snprintf(why, sizeof why, "its file %s holds %" PRIu64 " bytes, not %" PRIu64, path,
                         (uint64_t) info.st_size, verify->size);
            else
                *why = '\0';
            free(path);
            used++;
            if (*why) {
                s_verify_end(check, verify, why);
                continue;
            }
        }
        if (!buffer)
            buffer = (uint8_t *) malloc(S_HASH_CHUNK);
        assert(buffer);
        size_t want = (budget - used) * S_CHECK_UNIT;
        if (want > S_HASH_CHUNK)
            want = S_HASH_CHUNK;
        ssize_t got = pread(verify->fd, buffer, want, (off_t) verify->offset);
        if (got < 0 && errno == EINTR)
            continue;
        used += got > 0 ? ((size_t) got + S_CHECK_UNIT - 1) / S_CHECK_UNIT : 1;
        if (got > 0) {
            shoal_hasher_update(&verify->hash, buffer, (size_t) got);
            verify->offset += (uint64_t) got;
            continue;
        }
        char *path = s_instance_path(check->self, verify->sid, verify->iid);
        shoal_checksum_t checksum;
        shoal_hasher_final(&verify->hash, &checksum);
        *why = '\0';
        if (got < 0)
            snprintf(why, sizeof why, "cannot read %s: %s", path, strerror(errno));
        else
        if (verify->offset != verify->size || !shoal_checksum_equal(&checksum, &verify->checksum))
            snprintf(why, sizeof why, "its bytes in %s do not match its checksum", path);
        free(path);
        s_verify_end(check, verify, *why ? why : NULL);
    }
    free(buffer);
    return used;
}

//  One local lock against its records and the catalog.
static int
s_check_lock(const shoal_msg_object_lock_t *lock, const shoal_msg_object_lock_record_t *records, size_t count,
             void *arg)
{
    s_check_t *check = (s_check_t *) arg;
    shoal_objects_t *self = check->self;
    char key[S_KEY_MAX];
    snprintf(key, sizeof key, "lock/%016" PRIx64, lock->instance_id);
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, lock->instance_id);
    if (!zhashx_lookup(check->local, id) && !s_in_flight(self, lock->instance_id)) {
        bool repaired = check->repair && shoal_object_store_lock_remove(self->store, lock->instance_id) == 0;
        s_finding(check, key, repaired, "lock with %zu record(s) of an instance this node does not hold%s", count,
                  repaired ? ": lock and records removed" : "");
        return 0;
    }
    //  The count and the holders its records give.
    shoal_msg_object_lock_t counted = { 0 };
    counted.instance_id = lock->instance_id;
    counted.storage_id = lock->storage_id;
    const char *writer = "", *waiter = "";
    for (size_t i = 0; i < count; i++) {
        if (streq(records[i].mode, "read"))
            counted.readers++;
        else
        if (streq(records[i].mode, "write"))
            writer = records[i].holder;
        else
            waiter = records[i].holder;
    }
    if (counted.readers != lock->readers || !streq(writer, lock->writer) || !streq(waiter, lock->waiter)) {
        counted.writer = (char *) writer;
        counted.waiter = (char *) waiter;
        bool plausible = !(counted.readers && *writer);
        bool repaired = check->repair && plausible
                     && shoal_object_store_lock_write(self->store, &counted, NULL, NULL) == 0;
        s_finding(check, key, repaired, "lock says %" PRIu64 " reader(s), writer '%s', waiter '%s'; its records say %"
                  PRIu64 ", '%s', '%s'%s", lock->readers, lock->writer, lock->waiter, counted.readers, writer, waiter,
                  repaired ? ": recounted from its records" : plausible ? "" : ": records are implausible (readers "
                  "beside a writer), left for an operator");
    }
    return 0;
}

static int
s_check_orphan(const shoal_msg_object_lock_t *lock, const shoal_msg_object_lock_record_t *records, size_t count,
               void *arg)
{
    s_check_t *check = (s_check_t *) arg;
    char key[S_KEY_MAX];
    snprintf(key, sizeof key, "record/%016" PRIx64 "/%s", lock->instance_id, records[0].holder);
    bool repaired = check->repair && shoal_object_store_lock_remove(check->self->store, lock->instance_id) == 0;
    s_finding(check, key, repaired, "%s lock record of an instance without a lock%s", records[0].mode,
              repaired ? ": removed" : "");
    return 0;
}

//  One file of DATA/objects (the object directory SUB, entry NAME): named
//  when no local instance names it.
static void
s_check_file(s_check_t *check, const char *sub, const char *name)
{
    shoal_objects_t *self = check->self;
    char *end = NULL;
    uint64_t iid = strtoull(name, &end, 16);
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, iid);
    if (end && !*end && (zhashx_lookup(check->local, id) || s_in_flight(self, iid)))
        return;
    char *path = zsys_sprintf("%s/%s", sub, name);
    bool repaired = check->repair && unlink(path) == 0;
    s_finding(check, path, repaired, "file that no instance of this node names%s", repaired ? ": removed" : "");
    free(path);
}

//  Looks at up to BUDGET files under DATA/objects. Returns those looked at.
static size_t
s_files_step(s_check_t *check, size_t budget)
{
    shoal_objects_t *self = check->self;
    size_t looked = 0;
    if (!check->root && !(check->root = opendir(self->dir))) {
        check->phase = S_CHECK_DONE;
        return 1;
    }
    while (looked < budget && check->phase == S_CHECK_FILES) {
        if (!check->dir) {
            struct dirent *entry = readdir(check->root);
            looked++;
            if (!entry) {
                check->phase = S_CHECK_DONE;
                break;
            }
            if (entry->d_name[0] == '.')
                continue;
            free(check->sub);
            check->sub = zsys_sprintf("%s/%s", self->dir, entry->d_name);
            check->dir = opendir(check->sub);
            continue;
        }
        struct dirent *file = readdir(check->dir);
        looked++;
        if (!file) {
            closedir(check->dir);
            check->dir = NULL;
            if (check->repair)
                rmdir(check->sub);
            continue;
        }
        if (file->d_name[0] != '.')
            s_check_file(check, check->sub, file->d_name);
    }
    return looked;
}

//  The next catalog key of PREFIX (a page at a time), or NULL at its end.
//  -1 in *FAILED (with *ERROR_P) when the catalog cannot be read.
static const shoal_kv_item_t *
s_catalog_next(s_check_t *check, const char *prefix, size_t budget, int *failed, char **error_p)
{
    if (check->next >= check->page.count) {
        bool full = check->page.count > 0;
        shoal_kv_list_clear(&check->page);
        check->next = 0;
        if (check->after && !full)
            return NULL;
        if (shoal_oplog_kv_scan(check->self->oplog, SHOAL_OBJECTS_DATASET, prefix, check->after, budget,
                                &check->page)) {
            *error_p = zsys_sprintf("cannot scan the catalog: %s", shoal_oplog_error(check->self->oplog));
            *failed = -1;
            return NULL;
        }
        if (check->page.count == 0)
            return NULL;
    }
    const shoal_kv_item_t *item = &check->page.items[check->next++];
    free(check->after);
    check->after = strdup(item->key);
    return item;
}

//  Moves to the next phase: its catalog walk starts from the first key.
static void
s_check_phase_next(s_check_t *check)
{
    check->phase++;
    shoal_kv_list_clear(&check->page);
    check->next = 0;
    zstr_free(&check->after);
}

//  The next catalog key of PREFIX decoded by CODEC into RECORD: 1, with
//  *KEY_P (borrowed until the next call). 0 when nothing was decoded: the
//  phase is over (or *FAILED), or the value is named as not decoding.
static int
s_catalog_record(s_check_t *check, const char *prefix, const shoal_codec_t *codec, void *record, size_t budget,
                 int *failed, char **error_p, const char **key_p)
{
    const shoal_kv_item_t *item = s_catalog_next(check, prefix, budget, failed, error_p);
    if (!item) {
        if (!*failed)
            s_check_phase_next(check);
        return 0;
    }
    char why[S_ERROR_MAX];
    if (codec->decode(item->record.value, item->record.value_size, record, why, sizeof why)) {
        s_finding(check, item->key, false, "value does not decode: %s", why);
        return 0;
    }
    *key_p = item->key;
    return 1;
}

shoal_objects_check_t *
shoal_objects_check_new(shoal_objects_t *self, bool repair)
{
    s_check_t *check = (s_check_t *) zmalloc(sizeof *check);
    check->self = self;
    check->repair = repair;
    check->local = zhashx_new();
    check->objects = zhashx_new();
    check->verifies = zlistx_new();
    zlistx_set_destructor(check->verifies, s_verify_destroy);
    return check;
}

void
shoal_objects_check_destroy(shoal_objects_check_t **check_p)
{
    s_check_t *check = *check_p;
    if (check) {
        zhashx_destroy(&check->local);
        zhashx_destroy(&check->objects);
        zlistx_destroy(&check->verifies);
        shoal_kv_list_clear(&check->page);
        free(check->after);
        free(check->sub);
        if (check->dir)
            closedir(check->dir);
        if (check->root)
            closedir(check->root);
        free(check);
        *check_p = NULL;
    }
}

int64_t
shoal_objects_check_step(shoal_objects_check_t *check, size_t budget, bool *done, shoal_objects_finding_fn *fn,
                         void *arg, char **error_p)
{
    shoal_objects_t *self = check->self;
    check->fn = fn;
    check->arg = arg;
    size_t looked = 0;
    int failed = 0;
    if (budget == 0)
        budget = 1;
    while (looked < budget && check->phase != S_CHECK_DONE && !failed) {
        //  The bytes of the instances met so far first: they are checked
        //  against the catalog as it is when their hash ends.
        if (zlistx_size(check->verifies)) {
            looked += s_verify_step(check, budget - looked);
            continue;
        }
        if (check->phase == S_CHECK_OBJECTS) {
            //  Objects, with their instances.
            shoal_msg_object_info_t info = { 0 };
            const char *key = NULL;
            looked++;
            if (!s_catalog_record(check, "object/", &shoal_msg_object_info_codec, &info, budget, &failed, error_p,
                                  &key))
                continue;
            char sid[32];
            snprintf(sid, sizeof sid, "%016" PRIx64, info.storage_id);
            zhashx_update(check->objects, sid, (void *) 1);
            char *error = NULL;
            if (s_instances_read(self, info.storage_id, &info, &error) == 0) {
                if (s_check_object(check, &info, &error))
                    failed = -1, *error_p = error, error = NULL;
            }
            else
                s_finding(check, key, false, "its instances cannot be read: %s", error);
            free(error);
            shoal_msg_object_info_codec.clear(&info);
        }
        else
        if (check->phase == S_CHECK_INSTANCES) {
            //  Instances whose object is gone.
            shoal_msg_object_instance_t instance = { 0 };
            const char *key = NULL;
            looked++;
            if (!s_catalog_record(check, "instance/", &shoal_msg_object_instance_codec, &instance, budget, &failed,
                                  error_p, &key))
                continue;
            char sid[32];
            snprintf(sid, sizeof sid, "%016" PRIx64, instance.storage_id);
            if (!zhashx_lookup(check->objects, sid) && !s_in_flight(self, instance.instance_id)) {
                bool mine = streq(instance.node, self->settings->node_id);
                char *error = NULL;
                bool repaired = check->repair && mine
                             && s_instance_remove(self, instance.storage_id, instance.instance_id, &error) == 0;
                s_finding(check, key, repaired, "instance on %s of an object the catalog does not hold%s",
                          instance.node, repaired ? ": removed" : mine ? "" : " (its node's check removes it)");
                free(error);
            }
            shoal_msg_object_instance_codec.clear(&instance);
        }
        else
        if (check->phase == S_CHECK_LOCKS) {
            //  This node's locks and records: one per local instance, read
            //  in one walk, each counted.
            size_t before = (size_t) check->findings;
            if (shoal_object_store_lock_each(self->store, s_check_lock, check)
            ||  shoal_object_store_orphan_records(self->store, s_check_orphan, check)) {
                *error_p = zsys_sprintf("cannot read the instances' locks: %s", shoal_store_error(self->store));
                failed = -1;
            }
            looked += 1 + zhashx_size(check->local) + ((size_t) check->findings - before);
            s_check_phase_next(check);
        }
        else
            looked += s_files_step(check, budget - looked);
    }
    *done = failed || check->phase == S_CHECK_DONE;
    return failed ? -1 : (int64_t) looked;
}

int
shoal_objects_check(shoal_objects_t *self, bool repair, shoal_objects_finding_fn *fn, void *arg, char **error_p)
{
    shoal_objects_check_t *check = shoal_objects_check_new(self, repair);
    bool done = false;
    int rc = 0;
    while (!done && rc == 0)
        if (shoal_objects_check_step(check, S_CHECK_WHOLE_STEP, &done, fn, arg, error_p) < 0)
            rc = -1;
    int findings = check->findings;
    shoal_objects_check_destroy(&check);
    return rc == 0 ? findings : -1;
}

//  Gathers a check's findings into a reply body.
static void
s_finding_collect(const char *key, const char *what, bool repaired, void *arg)
{
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) arg;
    if (answer->findings_count >= SHOAL_OBJECT_LIST_MAX)
        return;
    answer->findings = (shoal_msg_object_finding_t *) realloc(answer->findings,
                                                              (answer->findings_count + 1) * sizeof *answer->findings);
    assert(answer->findings);
    shoal_msg_object_finding_t *finding = &answer->findings[answer->findings_count++];
    finding->key = strdup(key);
    finding->what = strndup(what, 2 * SHOAL_OBJECT_URI_MAX + SHOAL_OBJECT_NAME_MAX);
    finding->repaired = repaired;
}

static shoal_envelope_t *
s_check_request(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
                const shoal_msg_object_request_t *body)
{
    if (!streq(caller->role, SHOAL_ROLE_ADMIN))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "a check of the objects is for admins");
    shoal_envelope_t *reply = shoal_envelope_reply(request, SHOAL_STATUS_OK, "OK");
    shoal_msg_object_reply_t *answer = (shoal_msg_object_reply_t *) shoal_envelope_new_body(reply);
    char *error = NULL;
    int found = shoal_objects_check(self, body->repair, s_finding_collect, answer, &error);
    if (found < 0) {
        shoal_envelope_destroy(&reply);
        return s_failed(request, self, error);
    }
    free(reply->message);
    reply->message = zsys_sprintf("%d finding(s)%s", found, body->repair ? ", safe ones repaired" : "");
    return reply;
}
