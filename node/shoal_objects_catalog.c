/*  shoal_objects_catalog: the catalog's keys and records (the replicated
    "objects" dataset), ids, the local read/write locks of instances, the
    removal of instances and objects, and the look at an instance's file.
*/
#include "shoal_objects_internal.h"
#include "shoal_alloc.h"

//  An instance smaller than this is checksummed at every open.
#define S_VERIFY_ALWAYS_BYTES (64ull * 1024 * 1024)

// ---------------------------------------------------------------------------
//  Small helpers

char *
shoal_objects_id_text(uint64_t id)
{
    return zsys_sprintf("%016" PRIx64, id);
}

void
shoal_objects_key_name(char *key, const char *tenant, const char *name)
{
    snprintf(key, OBJECTS_KEY_MAX, "name/%s/%s", tenant, name);
}

void
shoal_objects_key_object(char *key, uint64_t sid)
{
    snprintf(key, OBJECTS_KEY_MAX, "object/%016" PRIx64, sid);
}

void
shoal_objects_key_instance(char *key, uint64_t sid, uint64_t iid)
{
    snprintf(key, OBJECTS_KEY_MAX, "instance/%016" PRIx64 "/%016" PRIx64, sid, iid);
}

char *
shoal_objects_instance_path(shoal_objects_t *self, uint64_t sid, uint64_t iid)
{
    return zsys_sprintf("%s/%016" PRIx64 "/%016" PRIx64, self->dir, sid, iid);
}

char *
shoal_objects_instance_uri(uint64_t sid, uint64_t iid)
{
    return zsys_sprintf("file:%s/%016" PRIx64 "/%016" PRIx64, OBJECTS_DIR, sid, iid);
}

uint64_t
shoal_objects_now_ms(void)
{
    return (uint64_t) zclock_time();
}

void
shoal_objects_text_set(char **field, const char *text)
{
    free(*field);
    *field = shoal_strdup(text ? text : "");
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

int
shoal_objects_catalog_put(shoal_objects_t *self, const char *key, const shoal_codec_t *codec, const void *record,
              char **error_p)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    char error[OBJECTS_ERROR_MAX];
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

int
shoal_objects_catalog_delete(shoal_objects_t *self, const char *key, char **error_p)
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
        char error[OBJECTS_ERROR_MAX];
        if (codec->decode(value.value, value.value_size, record, error, sizeof error)) {
            *error_p = zsys_sprintf("catalog key %s holds no %s: %s", key, codec->name, error);
            *found_p = false;
            rc = -1;
        }
    }
    shoal_kv_codec.clear(&value);
    return rc;
}

int
shoal_objects_instances_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, char **error_p)
{
    char prefix[OBJECTS_KEY_MAX];
    snprintf(prefix, sizeof prefix, "instance/%016" PRIx64 "/", sid);
    shoal_kv_list_t list = { 0 };
    if (shoal_oplog_kv_scan(self->oplog, SHOAL_OBJECTS_DATASET, prefix, NULL, SHOAL_OBJECT_INSTANCES_MAX, &list)) {
        *error_p = zsys_sprintf("cannot scan catalog keys %s: %s", prefix, shoal_oplog_error(self->oplog));
        return -1;
    }
    int rc = 0;
    info->instances = (shoal_msg_object_instance_t *) zmalloc((list.count + 1) * sizeof *info->instances);
    for (size_t i = 0; i < list.count && rc == 0; i++) {
        char error[OBJECTS_ERROR_MAX];
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
        shoal_objects_text_set(&instance->endpoint, endpoint ? endpoint : "");
        if (!mine)
            continue;
        shoal_msg_object_lock_t lock = { 0 };
        bool found = false;
        if (shoal_object_store_lock_get(self->store, instance->instance_id, &lock, &found) == 0 && found) {
            instance->readers = lock.readers;
            shoal_objects_text_set(&instance->writer, lock.writer);
            shoal_objects_text_set(&instance->waiter, lock.waiter);
        }
        shoal_msg_object_lock_codec.clear(&lock);
    }
}

int
shoal_objects_object_read(shoal_objects_t *self, uint64_t sid, shoal_msg_object_info_t *info, bool *found_p, char **error_p)
{
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_object(key, sid);
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
    if (shoal_objects_instances_read(self, sid, info, error_p)) {
        shoal_msg_object_info_codec.clear(info);
        return -1;
    }
    s_instances_annotate(self, info);
    return 0;
}

int
shoal_objects_binding(shoal_objects_t *self, const char *tenant, const char *name, uint64_t *sid_p, char **error_p)
{
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_name(key, tenant, name);
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

int
shoal_objects_object_write(shoal_objects_t *self, const shoal_msg_object_info_t *info, char **error_p)
{
    shoal_msg_object_info_t bare = *info;
    bare.instances = NULL;
    bare.count = 0;
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_object(key, info->storage_id);
    return shoal_objects_catalog_put(self, key, &shoal_msg_object_info_codec, &bare, error_p);
}

int
shoal_objects_instance_write(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, char **error_p)
{
    //  Lock state and endpoint belong to replies, not to the catalog.
    shoal_msg_object_instance_t bare = *instance;
    bare.readers = 0;
    bare.writer = NULL;
    bare.waiter = NULL;
    bare.endpoint = NULL;
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_instance(key, instance->storage_id, instance->instance_id);
    return shoal_objects_catalog_put(self, key, &shoal_msg_object_instance_codec, &bare, error_p);
}

// ---------------------------------------------------------------------------
//  Ids

//  Checks that no other node claims this node's number, and claims it
//  when nobody does. Returns 0, or -1 with *ERROR_P.
static int
s_number_check(shoal_objects_t *self, char **error_p)
{
    char key[OBJECTS_KEY_MAX];
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

uint64_t
shoal_objects_id_new(shoal_objects_t *self, shoal_object_id_kind_t kind, char **error_p)
{
    uint64_t id = 0;
    return shoal_objects_ids(self, kind, 1, &id, error_p) == 0 ? id : 0;
}

static void
s_lock_init(shoal_msg_object_lock_t *lock, uint64_t iid, uint64_t sid)
{
    memset(lock, 0, sizeof *lock);
    lock->instance_id = iid;
    lock->storage_id = sid;
    lock->writer = shoal_strdup("");
    lock->waiter = shoal_strdup("");
}

int
shoal_objects_lock_read_state(shoal_objects_t *self, uint64_t iid, uint64_t sid, shoal_msg_object_lock_t *lock)
{
    bool found = false;
    if (shoal_object_store_lock_get(self->store, iid, lock, &found))
        return -1;
    if (!found)
        s_lock_init(lock, iid, sid);
    return 0;
}

shoal_objects_lock_result_t
shoal_objects_lock_take(shoal_objects_t *self, uint64_t iid, uint64_t sid, const char *holder, const char *mode, bool wait,
            char *why, size_t why_size)
{
    shoal_msg_object_lock_t lock;
    if (shoal_objects_lock_read_state(self, iid, sid, &lock)) {
        snprintf(why, why_size, "%s", shoal_store_error(self->store));
        return OBJECTS_FAILED;
    }
    shoal_objects_lock_result_t result = OBJECTS_GRANTED;
    const char *record_mode = mode;
    if (streq(mode, "read")) {
        if (*lock.writer || *lock.waiter) {
            snprintf(why, why_size, "instance %016" PRIx64 " is %s %s", iid,
                     *lock.writer ? "locked for writing by" : "awaited by writer", *lock.writer ? lock.writer : lock.waiter);
            result = OBJECTS_REFUSED;
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
        result = OBJECTS_REFUSED;
    }
    else
    if (lock.readers) {
        if (!wait) {
            snprintf(why, why_size, "instance %016" PRIx64 " has %" PRIu64 " reader(s)", iid, lock.readers);
            result = OBJECTS_REFUSED;
        }
        else {
            result = OBJECTS_WAITING;
            if (streq(lock.waiter, holder))
                record_mode = NULL;
            else {
                shoal_objects_text_set(&lock.waiter, holder);
                record_mode = "wait";
            }
        }
    }
    else {
        shoal_objects_text_set(&lock.writer, holder);
        if (streq(lock.waiter, holder))
            shoal_objects_text_set(&lock.waiter, "");
    }
    if (result != OBJECTS_REFUSED && record_mode) {
        shoal_msg_object_lock_record_t record = {
            .instance_id = iid, .holder = (char *) holder, .mode = (char *) record_mode, .time_ms = shoal_objects_now_ms()
        };
        if (shoal_object_store_lock_write(self->store, &lock, &record, NULL)) {
            snprintf(why, why_size, "%s", shoal_store_error(self->store));
            result = OBJECTS_FAILED;
        }
    }
    shoal_msg_object_lock_codec.clear(&lock);
    return result;
}

int
shoal_objects_lock_release(shoal_objects_t *self, uint64_t iid, const char *holder, shoal_msg_object_lock_t *after)
{
    shoal_msg_object_lock_record_t record = { 0 };
    bool found = false;
    if (shoal_object_store_record_get(self->store, iid, holder, &record, &found))
        return -1;
    if (!found)
        return 1;
    shoal_msg_object_lock_t lock;
    int rc = shoal_objects_lock_read_state(self, iid, 0, &lock);
    if (rc == 0) {
        if (streq(record.mode, "read") && lock.readers)
            lock.readers--;
        if (streq(record.mode, "write") && streq(lock.writer, holder))
            shoal_objects_text_set(&lock.writer, "");
        if (streq(record.mode, "wait") && streq(lock.waiter, holder))
            shoal_objects_text_set(&lock.waiter, "");
        rc = shoal_object_store_lock_write(self->store, &lock, NULL, holder);
    }
    if (rc == 0 && after)
        *after = lock;
    else
        shoal_msg_object_lock_codec.clear(&lock);
    shoal_msg_object_lock_record_codec.clear(&record);
    return rc;
}

int
shoal_objects_instance_remove(shoal_objects_t *self, uint64_t sid, uint64_t iid, char **error_p)
{
    char *path = shoal_objects_instance_path(self, sid, iid);
    int rc = 0;
    if (shoal_objects_discard(self, path, sid, iid) != 0 && unlink(path) != 0 && errno != ENOENT) {
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
    char key[OBJECTS_KEY_MAX];
    shoal_objects_key_instance(key, sid, iid);
    if (rc == 0)
        rc = shoal_objects_catalog_delete(self, key, error_p);
    shoal_msg_object_info_t left = { 0 };
    if (rc == 0)
        rc = shoal_objects_instances_read(self, sid, &left, error_p);
    if (rc == 0 && left.count == 0) {
        shoal_objects_key_object(key, sid);
        rc = shoal_objects_catalog_delete(self, key, error_p);
    }
    shoal_msg_object_info_codec.clear(&left);
    return rc;
}

int
shoal_objects_drop_local(shoal_objects_t *self, uint64_t sid, shoal_objects_drop_t *drop, char **error_p)
{
    memset(drop, 0, sizeof *drop);
    shoal_msg_object_info_t info = { 0 };
    info.storage_id = sid;
    if (shoal_objects_instances_read(self, sid, &info, error_p))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < info.count && rc == 0; i++) {
        const shoal_msg_object_instance_t *instance = &info.instances[i];
        if (!streq(instance->node, self->settings->node_id))
            continue;
        char id[32];
        snprintf(id, sizeof id, "%" PRIu64, instance->instance_id);
        shoal_objects_upload_t *upload = (shoal_objects_upload_t *) zhashx_lookup(self->uploads, id);
        if (upload) {
            //  An add still writing it: it is given up.
            zhashx_delete(self->uploads, id);
            shoal_object_store_lock_remove(self->store, instance->instance_id);
        }
        char why[OBJECTS_ERROR_MAX];
        shoal_objects_lock_result_t taken = shoal_objects_lock_take(self, instance->instance_id, sid, OBJECTS_HOLDER_REMOVE, "write", true, why,
                                            sizeof why);
        if (taken == OBJECTS_GRANTED) {
            rc = shoal_objects_instance_remove(self, sid, instance->instance_id, error_p);
            drop->removed += rc == 0;
        }
        else
        if (taken == OBJECTS_WAITING)
            drop->waiting++;
        else
        if (taken == OBJECTS_REFUSED) {
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
        body->tenant = shoal_strdup(info->tenant);
        body->storage_id = info->storage_id;
        char *arg = shoal_objects_id_text(info->storage_id);
        if (shoal_mesh_send(self->mesh, node, &request, OBJECTS_PEER_TIMEOUT_MS, s_drop_answered, arg) == 0)
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

int
shoal_objects_object_remove(shoal_objects_t *self, const shoal_msg_object_info_t *info, char *message, size_t size,
                char **error_p)
{
    uint64_t bound = 0;
    if (*info->name && shoal_objects_binding(self, info->tenant, info->name, &bound, error_p))
        return -1;
    if (bound == info->storage_id) {
        char key[OBJECTS_KEY_MAX];
        shoal_objects_key_name(key, info->tenant, info->name);
        if (shoal_objects_catalog_delete(self, key, error_p))
            return -1;
    }
    shoal_objects_drop_t drop;
    if (shoal_objects_drop_local(self, info->storage_id, &drop, error_p))
        return -1;
    size_t told = s_drop_remote(self, info);
    snprintf(message, size, "removed object %016" PRIx64 ": %zu instance(s) here, %zu waiting for their readers, "
             "%zu busy, %zu node(s) told to drop theirs", info->storage_id, drop.removed, drop.waiting, drop.busy, told);
    return 0;
}

shoal_objects_look_t
shoal_objects_file_look(const char *path, uint64_t size, uint64_t modified_ms, const shoal_checksum_t *expected,
                        bool force, char *why, size_t why_size)
{
    struct stat info;
    if (stat(path, &info) != 0) {
        snprintf(why, why_size, "its file %s is missing: %s", path, strerror(errno));
        return OBJECTS_LOOK_BAD;
    }
    if ((uint64_t) info.st_size != size) {
        snprintf(why, why_size, "its file %s holds %" PRIu64 " bytes, not %" PRIu64, path, (uint64_t) info.st_size,
                 size);
        return OBJECTS_LOOK_BAD;
    }
    uint64_t changed_ms = (uint64_t) info.st_mtim.tv_sec * 1000 + (uint64_t) info.st_mtim.tv_nsec / 1000000;
    if (!force && size >= S_VERIFY_ALWAYS_BYTES && changed_ms <= modified_ms)
        return OBJECTS_LOOK_GOOD;
    //  The instance's checksum names the algorithm it was made with.
    if (!expected->size) {
        snprintf(why, why_size, "it has no checksum of an algorithm this node knows");
        return OBJECTS_LOOK_BAD;
    }
    return OBJECTS_LOOK_HASH;
}

void
shoal_objects_instance_mark_corrupt(shoal_objects_t *self, const shoal_msg_object_instance_t *instance, const char *why)
{
    shoal_msg_object_instance_t copy = *instance;
    copy.state = SHOAL_INSTANCE_CORRUPT;
    copy.modified_ms = shoal_objects_now_ms();
    char *error = NULL;
    if (shoal_objects_instance_write(self, &copy, &error)) {
        zsys_error("objects: cannot mark instance %016" PRIx64 " corrupt: %s", instance->instance_id, error);
        free(error);
    }
    else
        zsys_warning("objects: instance %016" PRIx64 " of object %016" PRIx64 " is corrupt: %s",
                     instance->instance_id, instance->storage_id, why);
}
