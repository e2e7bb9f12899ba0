/*  shoal_objects_check: the consistency sweep's part for objects (seed
    001): the catalog, this node's instances, their bytes, locks and files,
    a slice at a time.
*/
#include "shoal_objects_internal.h"
#include "shoal_alloc.h"

//  A check's unit of work: a catalog key, a lock, a file, or this many
//  bytes of an instance hashed (about as long as reading a key here).
#define S_CHECK_UNIT 4096
//  What a check run whole (OBJECT_CHECK, shoal_objects_check) takes per step.
#define S_CHECK_WHOLE_STEP 1000

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
    for (shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zhashx_first(self->uploads); upload;
         upload = (shoal_objects_upload_t *) zhashx_next(self->uploads))
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
    body->tenant = shoal_strdup(info->tenant);
    body->storage_id = info->storage_id;
    body->copies = complete + 1;
    body->to = shoal_strdup(self->settings->node_id);
    char *arg = shoal_objects_id_text(info->storage_id);
    if (shoal_mesh_send(self->mesh, source, &request, OBJECTS_PEER_TIMEOUT_MS * 6, s_replicate_asked, arg)) {
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
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_object(key, info->storage_id);
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
        char instance_key[OBJECTS_KEY_MAX];
        shoal_objects_key_instance(instance_key, instance->storage_id, instance->instance_id);
        bool repaired = check->repair
                     && shoal_objects_instance_remove(self, instance->storage_id, instance->instance_id, error_p) == 0;
        s_finding(check, instance_key, repaired, "instance is being written but no add or transfer writes it%s",
                  repaired ? ": removed, bytes, lock and key" : "");
        stale++;
    }
    if (stale && stale == info->count)
        return 0;
    uint64_t bound = 0;
    if (*info->name && shoal_objects_binding(self, info->tenant, info->name, &bound, error_p))
        return -1;
    bool adding = s_upload_of_object(self, info->storage_id);
    if (info->count == 0 && !adding) {
        bool repaired = check->repair && bound != info->storage_id
                     && shoal_objects_catalog_delete(self, key, error_p) == 0;
        s_finding(check, key, repaired, "object '%s' of %s has no instance%s", info->name, info->tenant,
                  bound == info->storage_id ? ": its name is bound to nothing that can be read" : "");
        return 0;
    }
    if (bound != info->storage_id && !adding) {
        char message[OBJECTS_ERROR_MAX];
        bool repaired = check->repair && shoal_objects_object_remove(self, info, message, sizeof message, error_p) == 0;
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
    char instance_key[OBJECTS_KEY_MAX];
    shoal_objects_key_instance(instance_key, instance->storage_id, instance->instance_id);
    if (instance->state == SHOAL_INSTANCE_COMPLETE && check->repair)
        shoal_objects_instance_mark_corrupt(self, instance, why);
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
        if (shoal_objects_object_read(self, verify->sid, &info, &found, &error) == 0 && found)
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
        char why[OBJECTS_ERROR_MAX];
        if (verify->fd < 0) {
            char *path = shoal_objects_instance_path(check->self, verify->sid, verify->iid);
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
            buffer = (uint8_t *) shoal_malloc(OBJECTS_HASH_CHUNK);
        size_t want = (budget - used) * S_CHECK_UNIT;
        if (want > OBJECTS_HASH_CHUNK)
            want = OBJECTS_HASH_CHUNK;
        ssize_t got = pread(verify->fd, buffer, want, (off_t) verify->offset);
        if (got < 0 && errno == EINTR)
            continue;
        used += got > 0 ? ((size_t) got + S_CHECK_UNIT - 1) / S_CHECK_UNIT : 1;
        if (got > 0) {
            shoal_hasher_update(&verify->hash, buffer, (size_t) got);
            verify->offset += (uint64_t) got;
            continue;
        }
        char *path = shoal_objects_instance_path(check->self, verify->sid, verify->iid);
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
    char key[OBJECTS_KEY_MAX];
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
    char key[OBJECTS_KEY_MAX];
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
    check->after = shoal_strdup(item->key);
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
    char why[OBJECTS_ERROR_MAX];
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
            if (shoal_objects_instances_read(self, info.storage_id, &info, &error) == 0) {
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
                             && shoal_objects_instance_remove(self, instance.storage_id, instance.instance_id, &error) == 0;
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
    answer->findings = (shoal_msg_object_finding_t *) shoal_realloc(answer->findings,
                                                                    (answer->findings_count + 1) * sizeof *answer->findings);
    shoal_msg_object_finding_t *finding = &answer->findings[answer->findings_count++];
    finding->key = shoal_strdup(key);
    finding->what = shoal_strndup(what, 2 * SHOAL_OBJECT_URI_MAX + SHOAL_OBJECT_NAME_MAX);
    finding->repaired = repaired;
}

shoal_envelope_t *
shoal_objects_check_request(shoal_objects_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller,
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
        return shoal_objects_failed(request, self, error);
    }
    free(reply->message);
    reply->message = zsys_sprintf("%d finding(s)%s", found, body->repair ? ", safe ones repaired" : "");
    return reply;
}
