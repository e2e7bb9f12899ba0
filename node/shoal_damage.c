/*  shoal_damage: the node's accounts of damage to its store. See
    shoal_damage.h.
*/
#include "shoal_damage.h"
#include "shoal_claim_store.h"
#include "shoal_alloc.h"

#include <czmq.h>

#define DAMAGE_KEY "damage"
#define DAMAGE_KIND_LOG "log"
#define DAMAGE_KIND_MOVE "move"
//  Room for an account's id.
#define DAMAGE_ID_MAX 256
//  Most keys one account of a lost log record names.
#define DAMAGE_KEYS_NAMED 64
#define DAMAGE_ERROR_MAX 512

struct _shoal_damage_t {
    shoal_store_t *store;               //  the node's store (borrowed)
    shoal_claim_store_t *claim_store;   //  where move records live (borrowed)
    shoal_moves_t *moves;               //  knows the unreadable move records (borrowed)
    zhashx_t *datasets;                 //  damaged dataset -> "id: what" of its first account
    shoal_sync_t *sync;                 //  takes damaged datasets again from peers (borrowed)
    int64_t next_repair_ms;             //  monotonic ms of the next repair attempt
};

//  How often a damaged dataset's repair is asked again while none finished.
#define DAMAGE_REPAIR_RETRY_MS 2000

static void
s_key(shoal_key_t *key, const char *id)
{
    shoal_key_init(key);
    shoal_key_add_str(key, DAMAGE_KEY);
    if (id)
        shoal_key_add_str(key, id);
}

static const char *
s_role_name(shoal_move_role_t role)
{
    return role == SHOAL_MOVE_SOURCE ? "source" : role == SHOAL_MOVE_TARGET ? "target" : "unknown";
}

//  The keys BAD held, for an account.
static char *
s_keys_text(const shoal_wal_bad_t *bad)
{
    shoal_wal_report_t one = { (shoal_wal_bad_t *) bad, 1 };
    //  The description starts with the place; only the part after it is kept.
    char *text = shoal_wal_report_describe(&one, shoal_store_cf_name_by_id, DAMAGE_KEYS_NAMED);
    const char *keys = text ? strstr(text, "; it wrote ") : NULL;
    char *result = shoal_strdup(keys ? keys + 2 : "its keys cannot be read");
    free(text);
    return result;
}

//  Adds to ACCOUNT the replicated dataset KEY (in family CF) belongs to.
static void
s_dataset_add(shoal_msg_damage_t *account, uint32_t cf, const shoal_wal_key_t *key)
{
    const char *family = shoal_store_cf_name_by_id(cf);
    if (!family || !(strncmp(family, "oplog_", 6) == 0 || streq(family, "kv")) || streq(family, "oplog_meta"))
        return;
    shoal_key_reader_t reader;
    shoal_key_reader_init(&reader, key->bytes, key->size);
    char dataset[SHOAL_DATASET_MAX + 1];
    if (shoal_key_read_str(&reader, dataset, sizeof dataset))
        return;
    for (size_t i = 0; i < account->dataset_count; i++)
        if (streq(account->datasets[i], dataset))
            return;
    account->datasets = (char **) shoal_realloc(account->datasets, (account->dataset_count + 1) * sizeof *account->datasets);
    account->datasets[account->dataset_count++] = shoal_strdup(dataset);
}

//  Writes an account for every record the salvage open dropped.
static void
s_record_salvage(shoal_damage_t *self)
{
    const shoal_wal_report_t *report = shoal_store_salvaged(self->store);
    for (size_t i = 0; i < report->count; i++) {
        const shoal_wal_bad_t *bad = &report->bad[i];
        char id[DAMAGE_ID_MAX];
        snprintf(id, sizeof id, "log-%" PRId64 "-%s-%" PRIu64, (int64_t) zclock_time(), bad->file, bad->offset);
        char *what = zsys_sprintf("write-ahead log %s at byte %" PRIu64 ": %s", bad->file, bad->offset, bad->why);
        char *keys = s_keys_text(bad);
        shoal_msg_damage_t account = {
            .id = id, .kind = DAMAGE_KIND_LOG, .what = what, .keys = keys, .claim_id = "",
            .found_ms = (uint64_t) zclock_time(),
        };
        for (size_t k = 0; k < bad->key_count; k++)
            s_dataset_add(&account, bad->keys[k].cf, &bad->keys[k]);
        account.action = account.dataset_count
            ? "lost in a salvage start: the datasets it touched answer 503 until they are taken again "
              "from a peer"
            : "lost in a salvage start: waits for an operator (the keys above may name claims)";
        shoal_batch_t *batch = shoal_batch_new(self->store);
        shoal_key_t key;
        s_key(&key, id);
        if (shoal_batch_put_record(batch, SHOAL_CF_DEFAULT, &key, &shoal_msg_damage_codec, &account)
        ||  shoal_store_write(self->store, batch, true))
            zsys_error("damage: cannot keep the account of %s: %s", what, shoal_store_error(self->store));
        shoal_batch_destroy(&batch);
        for (size_t k = 0; k < account.dataset_count; k++)
            free(account.datasets[k]);
        free(account.datasets);
        free(what);
        free(keys);
    }
}

//  Every account kept in the store into LIST (appended to, COUNT updated).
static int
s_list_kept(shoal_damage_t *self, shoal_msg_damage_t **list, size_t *count)
{
    shoal_key_t prefix;
    s_key(&prefix, NULL);
    shoal_iter_t *iter = shoal_iter_prefix(self->store, SHOAL_CF_DEFAULT, &prefix);
    if (!iter)
        return -1;
    for (bool valid = shoal_iter_first(iter); valid; valid = shoal_iter_next(iter)) {
        shoal_msg_damage_t account = { 0 };
        if (shoal_iter_record(iter, &shoal_msg_damage_codec, &account)) {
            //  An account that does not read is damage too: say so rather than drop it.
            size_t size;
            const uint8_t *bytes = shoal_iter_key(iter, &size);
            account.id = shoal_key_format(bytes, size);
            account.kind = shoal_strdup(DAMAGE_KIND_LOG);
            account.what = shoal_strdup(shoal_store_error(self->store));
            account.keys = shoal_strdup("");
            account.claim_id = shoal_strdup("");
            account.action = shoal_strdup("the account itself cannot be read");
        }
        *list = (shoal_msg_damage_t *) shoal_realloc(*list, (*count + 1) * sizeof **list);
        (*list)[(*count)++] = account;
    }
    int rc = shoal_iter_status(iter);
    shoal_iter_destroy(&iter);
    return rc;
}

//  The accounts of the unreadable move records into LIST.
static void
s_list_moves(shoal_damage_t *self, shoal_msg_damage_t **list, size_t *count)
{
    const shoal_move_unreadables_t *unreadable = shoal_moves_unreadable(self->moves);
    for (size_t i = 0; i < unreadable->count; i++) {
        const shoal_move_unreadable_t *bad = &unreadable->items[i];
        *list = (shoal_msg_damage_t *) shoal_realloc(*list, (*count + 1) * sizeof **list);
        shoal_msg_damage_t *account = &(*list)[(*count)++];
        memset(account, 0, sizeof *account);
        account->id = zsys_sprintf("move-%s-%s", s_role_name(bad->role), bad->claim_id);
        account->kind = shoal_strdup(DAMAGE_KIND_MOVE);
        account->what = zsys_sprintf("move record %s: %s", bad->key, bad->error);
        account->keys = shoal_strdup(bad->key);
        account->claim_id = shoal_strdup(bad->claim_id);
        account->action = zsys_sprintf("waits for an operator: the %s side of the move of claim '%s' is "
                                       "unknown; settle the claim, then forget this to delete the record",
                                       s_role_name(bad->role), bad->claim_id);
    }
}

//  Reloads the damaged datasets from the accounts kept.
static void
s_datasets_reload(shoal_damage_t *self)
{
    zhashx_purge(self->datasets);
    shoal_msg_damage_t *list = NULL;
    size_t count = 0;
    s_list_kept(self, &list, &count);
    for (size_t i = 0; i < count; i++) {
        for (size_t d = 0; d < list[i].dataset_count; d++)
            if (!zhashx_lookup(self->datasets, list[i].datasets[d])) {
                char *text = zsys_sprintf("%s: %s", list[i].id, list[i].what);
                zhashx_insert(self->datasets, list[i].datasets[d], text);
            }
        shoal_msg_damage_codec.clear(&list[i]);
    }
    free(list);
}

static void s_datasets_reload(shoal_damage_t *self);

//  A snapshot of DATASET from PEER was taken in full: every account naming
//  it says so and no longer names it, and the dataset is served again.
static void
s_taken(const char *dataset, const char *peer, void *arg)
{
    shoal_damage_t *self = (shoal_damage_t *) arg;
    if (!zhashx_lookup(self->datasets, dataset))
        return;
    shoal_msg_damage_t *list = NULL;
    size_t count = 0;
    s_list_kept(self, &list, &count);
    for (size_t i = 0; i < count; i++) {
        shoal_msg_damage_t *account = &list[i];
        bool named = false;
        for (size_t d = 0; d < account->dataset_count; d++)
            if (!named && streq(account->datasets[d], dataset)) {
                named = true;
                free(account->datasets[d]);
                memmove(&account->datasets[d], &account->datasets[d + 1],
                        (account->dataset_count - d - 1) * sizeof *account->datasets);
                account->dataset_count--;
            }
        if (named) {
            char *action = zsys_sprintf("%s; dataset '%s' taken again from %s", account->action, dataset, peer);
            free(account->action);
            account->action = action;
            shoal_key_t key;
            s_key(&key, account->id);
            shoal_batch_t *batch = shoal_batch_new(self->store);
            if (shoal_batch_put_record(batch, SHOAL_CF_DEFAULT, &key, &shoal_msg_damage_codec, account)
            ||  shoal_store_write(self->store, batch, true))
                zsys_error("damage: cannot update %s: %s", account->id, shoal_store_error(self->store));
            shoal_batch_destroy(&batch);
        }
        shoal_msg_damage_codec.clear(account);
    }
    free(list);
    zsys_info("damage: dataset '%s' repaired: taken again from %s; it is served again", dataset, peer);
    s_datasets_reload(self);
}

void
shoal_damage_tick(shoal_damage_t *self)
{
    if (zhashx_size(self->datasets) == 0 || zclock_mono() < self->next_repair_ms)
        return;
    self->next_repair_ms = zclock_mono() + DAMAGE_REPAIR_RETRY_MS;
    zlistx_t *datasets = zhashx_keys(self->datasets);
    for (const char *dataset = (const char *) zlistx_first(datasets); dataset;
         dataset = (const char *) zlistx_next(datasets))
        shoal_sync_repair(self->sync, dataset);
    zlistx_destroy(&datasets);
}

shoal_damage_t *
shoal_damage_new(shoal_store_t *store, shoal_claim_store_t *claim_store, shoal_moves_t *moves,
                 shoal_sync_t *sync)
{
    shoal_damage_t *self = (shoal_damage_t *) zmalloc(sizeof *self);
    self->store = store;
    self->claim_store = claim_store;
    self->moves = moves;
    self->sync = sync;
    shoal_sync_set_taken(sync, s_taken, self);
    self->datasets = zhashx_new();
    zhashx_set_destructor(self->datasets, (zhashx_destructor_fn *) zstr_free);
    s_record_salvage(self);
    shoal_msg_damage_t *list = NULL;
    size_t count = 0;
    if (s_list_kept(self, &list, &count))
        zsys_error("damage: cannot read the damage accounts: %s", shoal_store_error(self->store));
    for (size_t i = 0; i < count; i++) {
        zsys_warning("damage: %s: %s; %s (%s)", list[i].id, list[i].what, list[i].keys, list[i].action);
        shoal_msg_damage_codec.clear(&list[i]);
    }
    free(list);
    s_datasets_reload(self);
    return self;
}

void
shoal_damage_destroy(shoal_damage_t **self_p)
{
    if (*self_p) {
        zhashx_destroy(&(*self_p)->datasets);
        free(*self_p);
        *self_p = NULL;
    }
}

void
shoal_damage_status(shoal_damage_t *self, shoal_msg_status_reply_t *body)
{
    shoal_msg_damage_t *list = NULL;
    size_t count = 0;
    s_list_kept(self, &list, &count);
    s_list_moves(self, &list, &count);
    body->damage = list;
    body->damage_count = count;
    shoal_store_space(self->store, &body->space_free_bytes, &body->space_reserve_bytes);
}

shoal_envelope_t *
shoal_damage_refuse_data(shoal_damage_t *self, const shoal_envelope_t *request)
{
    if (zhashx_size(self->datasets) == 0)
        return NULL;
    const char *dataset = NULL;
    if (request->type == SHOAL_MSG_KV_PUT)
        dataset = ((const shoal_msg_kv_put_t *) request->body)->dataset;
    else
    if (request->type == SHOAL_MSG_KV_GET || request->type == SHOAL_MSG_KV_DEL)
        dataset = ((const shoal_msg_kv_key_t *) request->body)->dataset;
    else
    if (request->type == SHOAL_MSG_KV_SCAN)
        dataset = ((const shoal_msg_kv_scan_t *) request->body)->dataset;
    const char *damage = dataset ? (const char *) zhashx_lookup(self->datasets, dataset) : NULL;
    if (!damage)
        return NULL;
    return shoal_envelope_reply(request, SHOAL_STATUS_UNAVAILABLE,
                                "dataset '%s' is damaged on this node (%s); it is served again once "
                                "it is taken again from a peer, or the damage forgotten (shoalctl damage)",
                                dataset, damage);
}

bool
shoal_damage_handles(shoal_msg_type_t type)
{
    return type == SHOAL_MSG_DAMAGE_FORGET;
}

shoal_envelope_t *
shoal_damage_handle(shoal_damage_t *self, const shoal_envelope_t *request, const shoal_caller_t *caller)
{
    if (!streq(caller->role, SHOAL_ROLE_ADMIN))
        return shoal_envelope_reply(request, SHOAL_STATUS_FORBIDDEN, "damage is for operators (role %s)",
                                    caller->role);
    const shoal_msg_damage_ref_t *body = (const shoal_msg_damage_ref_t *) request->body;
    const shoal_move_unreadables_t *unreadable = shoal_moves_unreadable(self->moves);
    for (size_t i = 0; i < unreadable->count; i++) {
        char *id = zsys_sprintf("move-%s-%s", s_role_name(unreadable->items[i].role), unreadable->items[i].claim_id);
        bool same = streq(id, body->id);
        free(id);
        if (!same)
            continue;
        if (shoal_moves_forget_unreadable(self->moves, i))
            return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "cannot delete the move record: %s",
                                        shoal_claim_store_error(self->claim_store));
        zsys_info("damage: %s forgotten: its unreadable move record is deleted", body->id);
        return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
    }
    shoal_key_t key;
    s_key(&key, body->id);
    bool found = false;
    if (shoal_store_exists(self->store, SHOAL_CF_DEFAULT, &key, &found))
        return shoal_envelope_reply(request, SHOAL_STATUS_INTERNAL, "%s", shoal_store_error(self->store));
    if (!found)
        return shoal_envelope_reply(request, SHOAL_STATUS_NOT_FOUND, "no damage '%s' on this node", body->id);
    if (shoal_store_delete(self->store, SHOAL_CF_DEFAULT, &key, true))
        return shoal_envelope_reply(request, shoal_store_error_no_space(self->store)
                                    ? SHOAL_STATUS_NO_SPACE : SHOAL_STATUS_INTERNAL,
                                    "%s", shoal_store_error(self->store));
    zsys_info("damage: %s forgotten", body->id);
    s_datasets_reload(self);
    return shoal_envelope_reply(request, SHOAL_STATUS_OK, "%s", "OK");
}
