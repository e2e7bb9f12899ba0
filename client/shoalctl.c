/*  shoalctl: the admin tool. Every operation over the protocol, through libshoal.

    Output is for people by default and JSON with --json (before or after
    the command). `kv get` prints the value and a newline, as a shell
    prompt wants (none is added to a value that ends with one); --json
    gives the exact value. Exit codes: 0 when
    the node answered 200 (or a local command worked), 1 when it answered
    something else or could not be reached, 2 for a usage error.
*/
#include "shoal.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_EXIT_OK 0
#define S_EXIT_FAILED 1
#define S_EXIT_USAGE 2
//  fsck: the sweep left findings for an operator (or a check failed).
#define S_EXIT_FINDINGS 3
//  Room for the kinds a watch names.
#define SHOAL_WATCH_KINDS_TEXT 64
#define S_DEFAULT_ENDPOINT "tcp://127.0.0.1:7400"
#define S_DEFAULT_KEYS_DIR "./shoal-data/keys"
//  A node generates its admin key as admin-NODEID.cert; nodes before that
//  generated admin.cert, the default when no admin-*.cert is there.
#define S_DEFAULT_CERT_GLOB S_DEFAULT_KEYS_DIR "/admin-*.cert"
#define S_DEFAULT_CERT S_DEFAULT_KEYS_DIR "/admin.cert"
#define S_DEFAULT_CERT_HELP S_DEFAULT_KEYS_DIR "/admin-NODEID.cert"
//  Room for a time printed as a date.
#define S_DATE_MAX 64
#define S_DEFAULT_CLUSTER_KEY "./shoal-data/keys/cluster.cert"
#define S_MS_PER_S 1000
//  Size suffixes (K, M, G, T) are powers of this.
#define S_SIZE_STEP 1024

//  What every command that talks to a node needs.
typedef struct {
    const char *endpoint;       //  the node
    const char *cert;           //  our client certificate
    const char *cluster_key;    //  the cluster's public certificate
    int timeout_ms;             //  per request
    bool json;                  //  machine output
} s_options_t;

static void
s_usage(FILE *out)
{
    fprintf(out,
        "usage: shoalctl [OPTIONS] COMMAND ...\n"
        "\n"
        "commands:\n"
        "  status                                    a node's status\n"
        "  kv put -d DATASET KEY VALUE               write a key (VALUE '-' reads stdin)\n"
        "  kv get -d DATASET KEY                     read a key's value\n"
        "  kv del -d DATASET KEY                     delete a key\n"
        "  kv scan -d DATASET [-p PREFIX] [-n LIMIT] list keys (every page, unless -n)\n"
        "  oplog heads [-d DATASET]                  each node's last entry per dataset\n"
        "  oplog stats [-d DATASET]                  entries, keys, nodes, prune watermark\n"
        "  oplog prune --before TIME [-d DATASET]    remove entries stamped at or before TIME:\n"
        "                                            ms since the epoch, or an age: 30s, 10m, 2h, 7d\n"
        "  peers                                     the mesh as the node sees it: id, endpoint,\n"
        "                                            state, incarnation, last heard, lag\n"
        "  peers forget NODE                         retire NODE for good: prune stops waiting for it\n"
        "  damage                                    what the node's store lost or cannot read\n"
        "  damage forget ID                          forget an account once dealt with\n"
        "  claim create --tenant ORG/PROJECT --memory SIZE [--driver proc] [--id ID]\n"
        "               [--rate BYTES/S] [--disk SIZE]  admit and start a claim (SIZE: 64M, 1G...)\n"
        "  claim create --tenant ORG/PROJECT --from-object NAME [--id ID]\n"
        "                                            start a guest from an object's image (a\n"
        "                                            checkpoint), copied to the node if it has none\n"
        "  claim checkpoint ID --to NAME [--comment TEXT]\n"
        "                                            save a stopped or paused claim's guest (memory\n"
        "                                            and disk) as a new object NAME of its tenant\n"
        "  claim ls                                  your claims on the node\n"
        "  claim show|stop|start|pause|resume|release ID\n"
        "                                            one claim, or a change of its state\n"
        "  claim call ID put KEY VALUE | get KEY     a guest call (its key/value area)\n"
        "  claim key put ID KEY VALUE [--lease N]    write a key of the claim's own (VALUE '-': stdin)\n"
        "  claim key get ID KEY | del ID KEY [--prefix] | ls ID [PREFIX]\n"
        "                                            read, delete or list the claim's keys\n"
        "  claim txn ID [--if 'KEY TARGET OP VALUE']... [--then OP]... [--else OP]...\n"
        "                                            a transaction on the claim's keys: when every\n"
        "                                            compare holds (TARGET value|version|create|mod|\n"
        "                                            lease, OP = != > <) the --then operations run,\n"
        "                                            else the --else ones ('put KEY VALUE', 'get KEY',\n"
        "                                            'del KEY'; KEY* for a prefix)\n"
        "  claim txn ID --file FILE                  the same from JSON: {\"compare\": [{\"key\",\n"
        "                                            \"target\", \"result\": equal|not_equal|greater|less,\n"
        "                                            \"value\" or \"number\"}], \"success\": [{\"op\":\n"
        "                                            put|get|del, \"key\", \"value\", \"lease\", \"prefix\"}],\n"
        "                                            \"failure\": [...]}\n"
        "  lease grant TTL_MS [ID]                   a lease of the node (it may grant less: it says so), with\n"
        "                                            the id ID when given (else the node picks one)\n"
        "  lease keepalive ID                        keep it alive until interrupted (a third of its TTL apart)\n"
        "  lease revoke ID | ttl ID | ls             end it now (its keys go), what is left of it, all\n"
        "  lock acquire ID read|write [--wait] [--lease N] [--holder NAME]\n"
        "                                            a claim's read/write lock: many readers or one\n"
        "                                            writer; --wait stops new readers while readers hold it\n"
        "  lock release ID [--holder NAME] | lock ls ID   give it up; the lock and its records\n"
        "  object add NAME FILE [--update] [--comment TEXT]\n"
        "                                            add FILE's bytes as object NAME (--update: move\n"
        "                                            a bound name to them once they are complete)\n"
        "  object get NAME [-o FILE] | ls | rm NAME  an object and its instances (-o: its bytes);\n"
        "                                            your objects; remove one everywhere\n"
        "  object replicate NAME --copies N          instances on N nodes, checksummed on arrival\n"
        "  object open NAME [--holder H] [--verify]  a read lock on one good instance\n"
        "  object close IID --holder H [--at ENDPOINT]  release it\n"
        "  object ids storage|instance [--count N]   ids that are never given twice\n"
        "  object check [--repair]                   the objects' consistency on the node (exit 1\n"
        "                                            when something is found and not repaired)\n"
        "                                            (object commands take --tenant ORG/PROJECT)\n"
        "  lookup ID                                 who owns a claim, from the registry\n"
        "  fsck [--repair] [--last]                  the node's consistency sweep: every store and\n"
        "                                            module looked at, each inconsistency named with\n"
        "                                            its key; --repair mends what is safe and says what\n"
        "                                            it did; --last shows the last run (a periodic one\n"
        "                                            too) without starting one; exits 3 when findings\n"
        "                                            are left for an operator\n"
        "  counters [--tenant ORG/PROJECT]           admission counters: claims, running, memory and\n"
        "                                            what moves hold reserved, of the node and each\n"
        "                                            tenant (a tenant key: its own)\n"
        "  move ID --to NODE [--max-downtime-ms N] [--no-converge]\n"
        "                                            move a running (or paused) claim live to a peer,\n"
        "                                            with its progress; asks the claim's owner\n"
        "  move status ID                            a move's progress, or its result\n"
        "  drain NODE [--max-downtime-ms N] [--parallel K]\n"
        "                                            mark NODE draining (no new claims, no incoming\n"
        "                                            moves) and move its claims off live to peers\n"
        "                                            with room, K at a time; a result per claim\n"
        "  drain NODE --status                       the drain's progress, or where it ended\n"
        "  undrain NODE                              NODE takes claims and moves again\n"
        "  move ls                                   the move records a node holds\n"
        "  move resume ID                            run a committed move's guest on its source again\n"
        "                                            (its target was lost): risky, the reply says why\n"
        "  watch [claims|moves|members ...] [--after SEQ] [--count N]\n"
        "                                            follow the node's events as they come (all kinds\n"
        "                                            unless named); --after replays those after SEQ,\n"
        "                                            --count stops after N events\n"
        "  top [--once] [--interval MS]              a live view of the mesh: each node's claims,\n"
        "                                            running, memory and moves, the moves in flight\n"
        "                                            with their progress, peers and lag; --once prints\n"
        "                                            one frame, --json one frame as one object\n"
        "  keygen cluster DIR                        new cluster key: DIR/cluster.cert(_secret)\n"
        "  keygen client NAME --role admin|tenant [--tenant ORG/PROJECT] DIR\n"
        "                                            new client key: DIR/NAME.cert(_secret);\n"
        "                                            copy DIR/NAME.cert into a node's clients directory\n"
        "\n"
        "options (or their environment variables):\n"
        "  -e, --endpoint URL     the node (SHOAL_ENDPOINT, default " S_DEFAULT_ENDPOINT ")\n"
        "  -c, --cert FILE        your client certificate (SHOAL_CERT, default the one\n"
        "                         " S_DEFAULT_CERT_HELP ", else " S_DEFAULT_CERT ")\n"
        "  -k, --cluster-key FILE the cluster's public certificate (SHOAL_CLUSTER_KEY,\n"
        "                         default " S_DEFAULT_CLUSTER_KEY ")\n"
        "  -t, --timeout MS       how long to wait for a reply (default %d)\n"
        "  -j, --json             print JSON (also accepted after the command)\n",
        SHOAL_DEFAULT_TIMEOUT_MS);
}

static const char *
s_env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

//  The admin key a node made in ./shoal-data/keys: the one admin-*.cert
//  there, else admin.cert (a node from before names carried the node id).
//  Several admin-*.cert (keys of other nodes copied there) are ambiguous:
//  NULL, with the reason on stderr. Returns a new string.
static char *
s_default_cert(void)
{
    glob_t found;
    int rc = glob(S_DEFAULT_CERT_GLOB, 0, NULL, &found);
    char *cert = NULL;
    if (rc == 0 && found.gl_pathc == 1)
        cert = shoal_strdup(found.gl_pathv[0]);
    else
    if (rc == 0) {
        fprintf(stderr, "shoalctl: %zu admin keys in %s (", found.gl_pathc, S_DEFAULT_KEYS_DIR);
        for (size_t i = 0; i < found.gl_pathc; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", found.gl_pathv[i]);
        fprintf(stderr, "): name yours with --cert\n");
    }
    else
        cert = shoal_strdup(S_DEFAULT_CERT);
    if (rc == 0 || rc == GLOB_NOMATCH)
        globfree(&found);
    return cert;
}

//  Writes MS (milliseconds since the epoch) as a UTC date into TEXT.
static const char *
s_date(uint64_t ms, char *text, size_t size)
{
    time_t seconds = (time_t) (ms / S_MS_PER_S);
    struct tm utc;
    if (!gmtime_r(&seconds, &utc) || strftime(text, size, "%Y-%m-%d %H:%M:%S UTC", &utc) == 0)
        snprintf(text, size, "%" PRIu64 " ms since the epoch", ms);
    return text;
}

//  The length of the valid UTF-8 sequence at C (a lead byte of 0x80 or
//  more), or 0 when the bytes there are no valid sequence.
static size_t
s_utf8_sequence(const unsigned char *c)
{
    size_t size = (c[0] & 0xE0) == 0xC0 ? 2 : (c[0] & 0xF0) == 0xE0 ? 3 : (c[0] & 0xF8) == 0xF0 ? 4 : 0;
    uint32_t point = size == 2 ? c[0] & 0x1Fu : size == 3 ? c[0] & 0x0Fu : c[0] & 0x07u;
    for (size_t i = 1; i < size; i++) {
        //  A NUL ends the string here, and fails this test too.
        if ((c[i] & 0xC0) != 0x80)
            return 0;
        point = (point << 6) | (c[i] & 0x3Fu);
    }
    uint32_t least = size == 2 ? 0x80 : size == 3 ? 0x800 : 0x10000;
    if (size == 0 || point < least || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF))
        return 0;
    return size;
}

//  Prints S as a JSON string. A byte that is not part of valid UTF-8
//  becomes U+FFFD, so that the output is valid JSON whatever S holds.
static void
s_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *) (s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else
        if (*c < 0x20)
            printf("\\u%04x", *c);
        else
        if (*c < 0x80)
            putchar(*c);
        else {
            size_t size = s_utf8_sequence(c);
            if (size) {
                fwrite(c, 1, size, stdout);
                c += size - 1;
            }
            else
                printf("\\ufffd");
        }
    }
    putchar('"');
}

static shoal_client_t *
s_connect(const s_options_t *options)
{
    char *error = NULL;
    shoal_client_t *client = shoal_client_new(options->endpoint, options->cert, options->cluster_key, &error);
    if (!client) {
        fprintf(stderr, "shoalctl: %s\n", error ? error : "cannot create a client");
        free(error);
        return NULL;
    }
    shoal_client_set_timeout(client, options->timeout_ms);
    return client;
}

//  Reports a call that did not answer 200.
static int
s_failed(shoal_client_t *client, int rc, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":false,\"status\":%d,\"error\":", rc);
        s_json_string(shoal_client_error(client));
        printf("}\n");
    }
    else
        fprintf(stderr, "shoalctl: %s\n", shoal_client_error(client));
    return S_EXIT_FAILED;
}

//  The store's space and damage accounts of STATUS, as JSON fields.
static void
s_damage_json(const shoal_status_t *status)
{
    printf(",\"space\":{\"free_bytes\":%" PRIu64 ",\"reserve_bytes\":%" PRIu64 "},\"damage\":[",
           status->space_free_bytes, status->space_reserve_bytes);
    for (size_t i = 0; i < status->damage_count; i++) {
        const shoal_damage_info_t *damage = &status->damage[i];
        printf("%s{\"id\":", i ? "," : "");
        s_json_string(damage->id);
        printf(",\"kind\":");
        s_json_string(damage->kind);
        printf(",\"what\":");
        s_json_string(damage->what);
        printf(",\"keys\":");
        s_json_string(damage->keys);
        printf(",\"claim_id\":");
        s_json_string(damage->claim_id);
        printf(",\"found_ms\":%" PRIu64 ",\"action\":", damage->found_ms);
        s_json_string(damage->action);
        printf("}");
    }
    printf("]");
}

//  The store's space and damage accounts of STATUS, for people; ALL lists
//  every account in full, otherwise one line each.
static void
s_damage_print(const shoal_status_t *status, bool all)
{
    if (status->space_reserve_bytes || status->space_free_bytes)
        printf("space     %.1f MiB free, writes stop below %.1f MiB%s\n",
               (double) status->space_free_bytes / (1024.0 * 1024.0),
               (double) status->space_reserve_bytes / (1024.0 * 1024.0),
               status->space_free_bytes < status->space_reserve_bytes ? " (writes refused: 507)" : "");
    if (!all && status->damage_count)
        printf("damage    %zu account(s) (shoalctl damage)\n", status->damage_count);
    for (size_t i = 0; i < status->damage_count; i++) {
        const shoal_damage_info_t *damage = &status->damage[i];
        if (!all)
            printf("  %s: %s\n", damage->id, damage->what);
        else
            printf("%s  (%s)\n  %s\n  %s\n  %s%s%s\n", damage->id, damage->kind, damage->what, damage->keys,
                   *damage->claim_id ? "claim " : "", damage->claim_id, *damage->claim_id ? ": " : "");
        if (all)
            printf("  %s\n", damage->action);
    }
    if (all && !status->damage_count)
        printf("no damage\n");
}

//  X forget ID, for damage and peers: asks FORGET of ID and says so, AFTER
//  being what the plain output adds to "forgot ID".
static int
s_forget(const s_options_t *options, int (*forget)(shoal_client_t *, const char *), const char *id,
         const char *after)
{
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    int rc = forget(client, id);
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (options->json) {
        printf("{\"ok\":true,\"forgotten\":");
        s_json_string(id);
        printf("}\n");
    }
    else
        printf("forgot %s%s\n", id, after);
    shoal_client_destroy(&client);
    return code;
}

//  damage | damage forget ID: what the node's store lost or cannot read.
static int
s_cmd_damage(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "damage".
    bool forget = argc == 3 && streq(argv[1], "forget");
    if (argc != 1 && !forget) {
        fprintf(stderr, "shoalctl: usage: damage | damage forget ID\n");
        return S_EXIT_USAGE;
    }
    if (forget)
        return s_forget(options, shoal_client_damage_forget, argv[2], "");
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (options->json) {
        printf("{\"ok\":true");
        s_damage_json(&status);
        printf("}\n");
    }
    else
        s_damage_print(&status, true);
    if (rc == 200)
        shoal_status_clear(&status);
    shoal_client_destroy(&client);
    return code;
}

static int
s_cmd_status(const s_options_t *options)
{
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    int code = S_EXIT_OK;
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (options->json) {
        printf("{\"ok\":true,\"node_id\":");
        s_json_string(status.node_id);
        printf(",\"version\":");
        s_json_string(status.version);
        printf(",\"uptime_ms\":%" PRIu64 ",\"endpoint\":", status.uptime_ms);
        s_json_string(status.endpoint);
        printf(",\"data_dir\":");
        s_json_string(status.data_dir);
        printf(",\"claims\":%" PRIu64 ",\"peers\":%" PRIu64 ",\"clients\":%" PRIu64 ",\"role\":",
               status.claims, status.peers, status.clients);
        s_json_string(status.role);
        printf(",\"tenant\":");
        s_json_string(status.tenant);
        printf(",\"oplog_migrating\":%s,\"oplog_migrated\":%" PRIu64, status.oplog_migrating ? "true" : "false",
               status.oplog_migrated);
        s_damage_json(&status);
        printf("}\n");
    }
    else {
        printf("node      %s (shoald %s)\n", status.node_id, status.version);
        printf("endpoint  %s\n", status.endpoint);
        printf("uptime    %.1f s\n", (double) status.uptime_ms / S_MS_PER_S);
        if (*status.data_dir)
            printf("data      %s\n", status.data_dir);
        printf("claims    %" PRIu64 "\n", status.claims);
        printf("peers     %" PRIu64 "\n", status.peers);
        if (*status.data_dir)
            printf("clients   %" PRIu64 " key(s) admitted\n", status.clients);
        printf("you are   %s%s%s\n", status.role, *status.tenant ? " of " : "", status.tenant);
        if (status.oplog_migrating)
            printf("oplog     migrating from layout 1 (answering meanwhile): %" PRIu64 " entries moved\n",
                   status.oplog_migrated);
        s_damage_print(&status, false);
    }
    shoal_status_clear(&status);
    shoal_client_destroy(&client);
    return code;
}

static int
s_cmd_keygen(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "keygen".
    if (argc < 2) {
        fprintf(stderr, "shoalctl: keygen needs 'cluster DIR' or 'client NAME --role ROLE DIR'\n");
        return S_EXIT_USAGE;
    }
    char *error = NULL;
    char *path = NULL;
    int rc;
    if (strcmp(argv[1], "cluster") == 0) {
        if (argc != 3) {
            fprintf(stderr, "shoalctl: usage: keygen cluster DIR\n");
            return S_EXIT_USAGE;
        }
        path = zsys_sprintf("%s/cluster.cert", argv[2]);
        rc = shoal_keygen_cluster(path, &error);
    }
    else
    if (strcmp(argv[1], "client") == 0) {
        const char *name = NULL, *role = NULL, *tenant = NULL, *dir = NULL;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--role") == 0 && i + 1 < argc)
                role = argv[++i];
            else
            if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc)
                tenant = argv[++i];
            else
            if (!name)
                name = argv[i];
            else
            if (!dir)
                dir = argv[i];
            else {
                fprintf(stderr, "shoalctl: keygen client: unexpected '%s'\n", argv[i]);
                return S_EXIT_USAGE;
            }
        }
        if (!name || !dir || !role) {
            fprintf(stderr, "shoalctl: usage: keygen client NAME --role admin|tenant [--tenant ORG/PROJECT] DIR\n");
            return S_EXIT_USAGE;
        }
        path = zsys_sprintf("%s/%s.cert", dir, name);
        rc = shoal_keygen_client(path, name, role, tenant, &error);
    }
    else {
        fprintf(stderr, "shoalctl: keygen: '%s' is neither cluster nor client\n", argv[1]);
        return S_EXIT_USAGE;
    }
    if (rc) {
        fprintf(stderr, "shoalctl: %s\n", error);
        free(error);
        free(path);
        return S_EXIT_FAILED;
    }
    if (options->json) {
        printf("{\"ok\":true,\"public\":");
        s_json_string(path);
        printf(",\"secret\":\"%s_secret\"}\n", path);
    }
    else
        printf("wrote %s (public) and %s_secret (secret, keep it private)\n", path, path);
    free(path);
    return S_EXIT_OK;
}

//  Options of the kv and oplog commands, parsed after the command words.
typedef struct {
    const char *dataset;        //  -d, --dataset
    const char *prefix;         //  -p, --prefix
    const char *before;         //  --before
    long limit;                 //  -n, --limit (0: every page)
    const char *args[2];        //  positional arguments
    int arg_count;
} s_data_args_t;

//  Parses the words after "kv VERB" or "oplog VERB". Returns 0 or -1 after
//  printing what was wrong.
static int
s_data_args_parse(int argc, char **argv, s_data_args_t *args)
{
    memset(args, 0, sizeof *args);
    for (int i = 0; i < argc; i++) {
        const char *word = argv[i];
        bool has_value = i + 1 < argc;
        if ((strcmp(word, "-d") == 0 || strcmp(word, "--dataset") == 0) && has_value)
            args->dataset = argv[++i];
        else
        if ((strcmp(word, "-p") == 0 || strcmp(word, "--prefix") == 0) && has_value)
            args->prefix = argv[++i];
        else
        if (strcmp(word, "--before") == 0 && has_value)
            args->before = argv[++i];
        else
        if ((strcmp(word, "-n") == 0 || strcmp(word, "--limit") == 0) && has_value) {
            char *end;
            args->limit = strtol(argv[++i], &end, 10);
            if (*end || args->limit <= 0 || args->limit > UINT32_MAX) {
                fprintf(stderr, "shoalctl: --limit '%s': expected a positive integer\n", argv[i]);
                return -1;
            }
        }
        else
        if (word[0] == '-' && word[1] != 0) {
            fprintf(stderr, "shoalctl: unknown option '%s'%s\n", word, has_value ? "" : " (or its value is missing)");
            return -1;
        }
        else
        if (args->arg_count < 2)
            args->args[args->arg_count++] = word;
        else {
            fprintf(stderr, "shoalctl: unexpected '%s'\n", word);
            return -1;
        }
    }
    return 0;
}

//  Reads all of standard input into a new buffer.
static uint8_t *
s_read_stdin(size_t *size_p)
{
    size_t capacity = 4096, size = 0;
    uint8_t *data = (uint8_t *) malloc(capacity);
    size_t got;
    while (data && (got = fread(data + size, 1, capacity - size, stdin)) > 0) {
        size += got;
        if (size == capacity) {
            capacity *= 2;
            uint8_t *grown = (uint8_t *) realloc(data, capacity);
            if (!grown)
                free(data);
            data = grown;
        }
    }
    *size_p = size;
    return data;
}

//  Prints SIZE bytes as a JSON string (bytes outside printable ASCII escaped).
static void
s_json_bytes(const uint8_t *data, size_t size)
{
    putchar('"');
    for (size_t i = 0; i < size; i++) {
        uint8_t c = data[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else
        if (c < 0x20 || c >= 0x7F)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void
s_json_kv_value(const shoal_kv_value_t *value)
{
    printf("{\"dataset\":");
    s_json_string(value->dataset);
    printf(",\"key\":");
    s_json_string(value->key);
    printf(",\"value\":");
    s_json_bytes(value->value, value->size);
    printf(",\"deleted\":%s,\"wall_ms\":%" PRIu64 ",\"logic\":%u,\"node\":", value->deleted ? "true" : "false",
           value->wall_ms, value->logic);
    s_json_string(value->node);
    printf(",\"hash\":\"%s\"}", value->hash);
}

static int
s_cmd_kv(const s_options_t *options, const char *verb, const s_data_args_t *args)
{
    int needed = streq(verb, "put") ? 2 : streq(verb, "scan") ? 0 : 1;
    if (!args->dataset || args->arg_count != needed) {
        fprintf(stderr, "shoalctl: usage: kv %s -d DATASET%s\n", verb,
                needed == 2 ? " KEY VALUE" : needed == 1 ? " KEY" : " [-p PREFIX] [-n LIMIT]");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int rc, code = S_EXIT_OK;
    if (streq(verb, "scan")) {
        //  Without a limit, every page: each resumes after the last key seen.
        //  JSON is one document, an answer or an error: the pages are held
        //  until the last one came.
        char *after = NULL;
        zlistx_t *pages = zlistx_new();
        while (true) {
            shoal_kv_page_t *page = (shoal_kv_page_t *) zmalloc(sizeof *page);
            rc = shoal_client_kv_scan(client, args->dataset, args->prefix, after,
                                      (uint32_t) args->limit, page);
            if (rc != 200) {
                free(page);
                break;
            }
            if (!options->json)
                for (size_t i = 0; i < page->count; i++)
                    printf("%s\t%.*s\n", page->items[i].key, (int) page->items[i].size, (char *) page->items[i].value);
            bool more = page->more && page->count > 0 && args->limit == 0;
            free(after);
            after = page->count ? shoal_strdup(page->items[page->count - 1].key) : NULL;
            zlistx_add_end(pages, page);
            if (!more)
                break;
        }
        free(after);
        if (options->json && rc == 200) {
            printf("{\"ok\":true,\"items\":[");
            size_t shown = 0;
            for (shoal_kv_page_t *page = (shoal_kv_page_t *) zlistx_first(pages); page;
                 page = (shoal_kv_page_t *) zlistx_next(pages))
                for (size_t i = 0; i < page->count; i++, shown++) {
                    printf("%s", shown ? "," : "");
                    s_json_kv_value(&page->items[i]);
                }
            printf("]}\n");
        }
        for (shoal_kv_page_t *page = (shoal_kv_page_t *) zlistx_first(pages); page;
             page = (shoal_kv_page_t *) zlistx_next(pages)) {
            shoal_kv_page_clear(page);
            free(page);
        }
        zlistx_destroy(&pages);
        if (rc != 200)
            code = s_failed(client, rc, options);
    }
    else {
        shoal_kv_value_t value;
        if (streq(verb, "put")) {
            const char *text = args->args[1];
            size_t size = strlen(text);
            uint8_t *data = streq(text, "-") ? s_read_stdin(&size) : NULL;
            rc = shoal_client_kv_put(client, args->dataset, args->args[0], data ? data : (const uint8_t *) text,
                                     size, &value);
            free(data);
        }
        else
        if (streq(verb, "get"))
            rc = shoal_client_kv_get(client, args->dataset, args->args[0], &value);
        else
            rc = shoal_client_kv_del(client, args->dataset, args->args[0], &value);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else
        if (options->json) {
            printf("{\"ok\":true,\"item\":");
            s_json_kv_value(&value);
            printf("}\n");
        }
        else
        if (streq(verb, "get")) {
            fwrite(value.value, 1, value.size, stdout);
            if (value.size == 0 || ((const char *) value.value)[value.size - 1] != '\n')
                putchar('\n');
        }
        else
            printf("%s %s/%s as entry %.16s (node %s, clock %" PRIu64 ".%u)\n", streq(verb, "put") ? "wrote" : "deleted",
                   value.dataset, value.key, value.hash, value.node, value.wall_ms, value.logic);
        shoal_kv_value_clear(&value);
    }
    shoal_client_destroy(&client);
    return code;
}

//  Parses TIME: milliseconds since the epoch, or an age (30s, 10m, 2h, 7d)
//  counted back from now.
static int
s_parse_before(const char *text, uint64_t *before_ms)
{
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text)
        return -1;
    uint64_t unit_ms = 0;
    if (*end == 0) {
        *before_ms = value;
        return value > 0 ? 0 : -1;
    }
    if (streq(end, "s"))
        unit_ms = 1000;
    else
    if (streq(end, "m"))
        unit_ms = 60 * 1000;
    else
    if (streq(end, "h"))
        unit_ms = 3600 * 1000;
    else
    if (streq(end, "d"))
        unit_ms = 24 * 3600 * 1000;
    else
        return -1;
    uint64_t now = (uint64_t) zclock_time();
    uint64_t age = value * unit_ms;
    if (age >= now)
        return -1;
    *before_ms = now - age;
    return 0;
}

static int
s_cmd_oplog(const s_options_t *options, const char *verb, const s_data_args_t *args)
{
    uint64_t before_ms = 0;
    if (streq(verb, "prune") && (!args->before || s_parse_before(args->before, &before_ms))) {
        fprintf(stderr, "shoalctl: usage: oplog prune --before TIME [-d DATASET]; TIME is ms since "
                        "the epoch or an age such as 30s, 10m, 2h, 7d\n");
        return S_EXIT_USAGE;
    }
    if (args->arg_count) {
        fprintf(stderr, "shoalctl: oplog %s: unexpected '%s'\n", verb, args->args[0]);
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int rc, code = S_EXIT_OK;
    if (streq(verb, "heads")) {
        shoal_head_list_t heads;
        rc = shoal_client_oplog_heads(client, args->dataset, &heads);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else
        if (options->json) {
            printf("{\"ok\":true,\"heads\":[");
            for (size_t i = 0; i < heads.count; i++) {
                printf("%s{\"dataset\":", i ? "," : "");
                s_json_string(heads.heads[i].dataset);
                printf(",\"node\":");
                s_json_string(heads.heads[i].node);
                printf(",\"wall_ms\":%" PRIu64 ",\"logic\":%u,\"hash\":\"%s\"}", heads.heads[i].wall_ms,
                       heads.heads[i].logic, heads.heads[i].hash);
            }
            printf("]}\n");
        }
        else {
            printf("%-24s %-16s %-20s %s\n", "DATASET", "NODE", "CLOCK", "HASH");
            for (size_t i = 0; i < heads.count; i++)
                printf("%-24s %-16s %13" PRIu64 ".%-6u %.16s\n", heads.heads[i].dataset, heads.heads[i].node,
                       heads.heads[i].wall_ms, heads.heads[i].logic, heads.heads[i].hash);
        }
        shoal_head_list_clear(&heads);
    }
    else
    if (streq(verb, "stats")) {
        shoal_dataset_list_t stats;
        rc = shoal_client_oplog_stats(client, args->dataset, &stats);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else
        if (options->json) {
            printf("{\"ok\":true,\"datasets\":[");
            for (size_t i = 0; i < stats.count; i++) {
                printf("%s{\"dataset\":", i ? "," : "");
                s_json_string(stats.datasets[i].dataset);
                printf(",\"entries\":%" PRIu64 ",\"keys\":%" PRIu64 ",\"nodes\":%" PRIu64 ",\"watermark_ms\":%" PRIu64 "}",
                       stats.datasets[i].entries, stats.datasets[i].keys, stats.datasets[i].nodes,
                       stats.datasets[i].watermark_ms);
            }
            printf("]}\n");
        }
        else {
            printf("%-24s %10s %10s %6s %s\n", "DATASET", "ENTRIES", "KEYS", "NODES", "PRUNED TO");
            for (size_t i = 0; i < stats.count; i++) {
                char date[S_DATE_MAX] = "-";
                if (stats.datasets[i].watermark_ms)
                    s_date(stats.datasets[i].watermark_ms, date, sizeof date);
                printf("%-24s %10" PRIu64 " %10" PRIu64 " %6" PRIu64 " %s\n", stats.datasets[i].dataset,
                       stats.datasets[i].entries, stats.datasets[i].keys, stats.datasets[i].nodes, date);
            }
        }
        shoal_dataset_list_clear(&stats);
    }
    else
    if (streq(verb, "prune")) {
        uint64_t pruned = 0;
        rc = shoal_client_oplog_prune(client, args->dataset, before_ms, &pruned);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else
        if (options->json)
            printf("{\"ok\":true,\"pruned\":%" PRIu64 ",\"before_ms\":%" PRIu64 "}\n", pruned, before_ms);
        else
        {
            char date[S_DATE_MAX];
            printf("pruned %" PRIu64 " entries stamped at or before %s\n", pruned,
                   s_date(before_ms, date, sizeof date));
        }
    }
    else {
        fprintf(stderr, "shoalctl: oplog: '%s' is not heads, stats or prune\n", verb);
        code = S_EXIT_USAGE;
    }
    shoal_client_destroy(&client);
    return code;
}

static int
s_cmd_peers(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "peers".
    bool forget = argc == 3 && streq(argv[1], "forget");
    if (argc != 1 && !forget) {
        fprintf(stderr, "shoalctl: usage: peers | peers forget NODE\n");
        return S_EXIT_USAGE;
    }
    if (forget)
        return s_forget(options, shoal_client_peers_forget, argv[2], ": it is no longer tracked");
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    shoal_peer_list_t peers;
    int rc = shoal_client_peers(client, &peers);
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (options->json) {
        printf("{\"ok\":true,\"peers\":[");
        for (size_t i = 0; i < peers.count; i++) {
            const shoal_peer_info_t *peer = &peers.peers[i];
            printf("%s{\"node_id\":", i ? "," : "");
            s_json_string(peer->node_id);
            printf(",\"endpoint\":");
            s_json_string(peer->endpoint);
            printf(",\"state\":");
            s_json_string(peer->state);
            printf(",\"incarnation\":%" PRIu64 ",\"last_heard_ms\":%" PRIu64 ",\"lag\":%" PRIu64
                   ",\"self\":%s}", peer->incarnation, peer->last_heard_ms, peer->lag,
                   peer->self ? "true" : "false");
        }
        printf("]}\n");
    }
    else {
        printf("%-20s %-28s %-8s %-16s %-12s %s\n", "NODE", "ENDPOINT", "STATE", "INCARNATION",
               "LAST HEARD", "LAG");
        for (size_t i = 0; i < peers.count; i++) {
            const shoal_peer_info_t *peer = &peers.peers[i];
            char heard[32];
            if (peer->self)
                snprintf(heard, sizeof heard, "(self)");
            else
            if (peer->last_heard_ms == 0)
                snprintf(heard, sizeof heard, "never");
            else
                snprintf(heard, sizeof heard, "%.1f s ago", (double) peer->last_heard_ms / S_MS_PER_S);
            printf("%-20s %-28s %-8s %-16" PRIu64 " %-12s %" PRIu64 "\n", peer->node_id, peer->endpoint,
                   peer->state, peer->incarnation, heard, peer->lag);
        }
    }
    shoal_peer_list_clear(&peers);
    shoal_client_destroy(&client);
    return code;
}

//  Parses a size such as 4096, 64K, 200M or 1G (powers of 1024). Returns 0 or -1.
static int
s_parse_size(const char *text, uint64_t *value)
{
    char *end;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (errno || end == text || *text == '-')
        return -1;
    const char *suffixes = "KMGT";
    const char *suffix = *end ? strchr(suffixes, *end & ~0x20) : NULL;
    if (*end && (!suffix || end[1]))
        return -1;
    for (const char *step = suffixes; suffix && step <= suffix; step++) {
        if (parsed > UINT64_MAX / S_SIZE_STEP)
            return -1;
        parsed *= S_SIZE_STEP;
    }
    *value = parsed;
    return 0;
}

static void
s_json_claim(const shoal_claim_info_t *info)
{
    printf("{\"id\":");
    s_json_string(info->id);
    printf(",\"tenant\":");
    s_json_string(info->tenant);
    printf(",\"state\":");
    s_json_string(info->state);
    printf(",\"memory_bytes\":%" PRIu64 ",\"driver\":", info->memory_bytes);
    s_json_string(info->driver);
    printf(",\"epoch\":%" PRIu64 ",\"created_ms\":%" PRIu64 ",\"error\":", info->epoch, info->created_ms);
    s_json_string(info->error);
    printf(",\"owner\":");
    s_json_string(info->owner);
    printf("}");
}

static void
s_print_claim(const shoal_claim_info_t *info, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"claim\":");
        s_json_claim(info);
        printf("}\n");
        return;
    }
    printf("id:       %s\ntenant:   %s\nstate:    %s\nmemory:   %" PRIu64 " bytes\ndriver:   %s\n"
           "epoch:    %" PRIu64 "\nowner:    %s\n", info->id, info->tenant, info->state, info->memory_bytes,
           info->driver, info->epoch, info->owner);
    if (*info->error)
        printf("error:    %s\n", info->error);
}

//  claim create: the options after "claim create".
static int
s_claim_create(shoal_client_t *client, int argc, char **argv, const s_options_t *options)
{
    shoal_claim_spec_t spec = { 0 };
    for (int i = 0; i < argc; i++) {
        const char *word = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) {
            fprintf(stderr, "shoalctl: claim create: '%s' needs a value\n", word);
            return S_EXIT_USAGE;
        }
        i++;
        int bad = 0;
        if (streq(word, "--tenant")) spec.tenant = value;
        else if (streq(word, "--driver")) spec.driver = value;
        else if (streq(word, "--id")) spec.id = value;
        else if (streq(word, "--from-object")) spec.from_object = value;
        else if (streq(word, "--memory")) bad = s_parse_size(value, &spec.memory_bytes);
        else if (streq(word, "--disk")) bad = s_parse_size(value, &spec.disk_bytes);
        else if (streq(word, "--rate")) bad = s_parse_size(value, &spec.rate);
        else {
            fprintf(stderr, "shoalctl: claim create: unknown option '%s'\n", word);
            return S_EXIT_USAGE;
        }
        if (bad) {
            fprintf(stderr, "shoalctl: claim create: %s '%s' is not a size (4096, 64K, 200M, 1G)\n", word, value);
            return S_EXIT_USAGE;
        }
    }
    if (!spec.tenant || (!spec.memory_bytes && !spec.from_object)) {
        fprintf(stderr, "shoalctl: claim create needs --tenant ORG/PROJECT and --memory SIZE (or --from-object "
                "NAME)\n");
        return S_EXIT_USAGE;
    }
    shoal_claim_info_t info;
    int rc = shoal_client_claim_create(client, &spec, &info);
    if (rc != 200)
        return s_failed(client, rc, options);
    s_print_claim(&info, options);
    shoal_claim_info_clear(&info);
    return S_EXIT_OK;
}

static void s_print_object(const shoal_object_t *object, const s_options_t *options);

//  claim checkpoint ID --to NAME [--comment TEXT]
static int
s_claim_checkpoint(shoal_client_t *client, int argc, char **argv, const s_options_t *options)
{
    const char *name = NULL, *comment = NULL;
    for (int i = 1; i < argc; i++) {
        const char *word = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value || (!streq(word, "--to") && !streq(word, "--comment"))) {
            fprintf(stderr, "shoalctl: claim checkpoint: %s '%s'\n", value ? "unknown option" : "no value for",
                    word);
            return S_EXIT_USAGE;
        }
        *(streq(word, "--to") ? &name : &comment) = value;
        i++;
    }
    if (argc < 1 || !name) {
        fprintf(stderr, "shoalctl: usage: claim checkpoint ID --to NAME [--comment TEXT]\n");
        return S_EXIT_USAGE;
    }
    shoal_object_t object;
    int rc = shoal_client_claim_checkpoint(client, argv[0], name, comment, &object);
    if (rc != 200)
        return s_failed(client, rc, options);
    s_print_object(&object, options);
    shoal_object_clear(&object);
    return S_EXIT_OK;
}

static int
s_claim_list(shoal_client_t *client, const s_options_t *options)
{
    shoal_claim_list_t list;
    int rc = shoal_client_claim_list(client, &list);
    if (rc != 200)
        return s_failed(client, rc, options);
    if (options->json) {
        printf("{\"ok\":true,\"claims\":[");
        for (size_t i = 0; i < list.count; i++) {
            printf("%s", i ? "," : "");
            s_json_claim(&list.claims[i]);
        }
        printf("]}\n");
    }
    else {
        printf("%-24s %-24s %-9s %-14s %-6s %s\n", "ID", "TENANT", "STATE", "MEMORY", "EPOCH", "ERROR");
        for (size_t i = 0; i < list.count; i++) {
            const shoal_claim_info_t *info = &list.claims[i];
            printf("%-24s %-24s %-9s %-14" PRIu64 " %-6" PRIu64 " %s\n", info->id, info->tenant, info->state,
                   info->memory_bytes, info->epoch, info->error);
        }
    }
    shoal_claim_list_clear(&list);
    return S_EXIT_OK;
}

static int
s_claim_call(shoal_client_t *client, int argc, char **argv, const s_options_t *options)
{
    //  argv: ID put KEY VALUE | ID get KEY
    bool put = argc == 4 && streq(argv[1], "put");
    bool get = argc == 3 && streq(argv[1], "get");
    if (!put && !get) {
        fprintf(stderr, "shoalctl: usage: claim call ID put KEY VALUE | claim call ID get KEY\n");
        return S_EXIT_USAGE;
    }
    uint8_t *value = NULL;
    size_t size = 0;
    int rc = put ? shoal_client_claim_put(client, argv[0], argv[2], argv[3], strlen(argv[3]))
                 : shoal_client_claim_get(client, argv[0], argv[2], &value, &size);
    if (rc != 200)
        return s_failed(client, rc, options);
    if (options->json) {
        printf("{\"ok\":true");
        if (get) {
            printf(",\"value\":");
            s_json_bytes(value, size);
        }
        printf("}\n");
    }
    else
    if (get)
        printf("%.*s\n", (int) size, (const char *) value);
    else
        printf("wrote %s in claim %s\n", argv[2], argv[0]);
    free(value);
    return S_EXIT_OK;
}

//  Claim keys and transactions (claim key ..., claim txn ...).

//  Most compares and operations one command line or file gives.
#define S_TXN_PARTS_MAX 64

static const char *s_cmp_targets[] = { NULL, "value", "version", "create", "mod", "lease" };
static const char *s_cmp_results[] = { NULL, "=", "!=", ">", "<" };
static const char *s_cmp_result_words[] = { NULL, "equal", "not_equal", "greater", "less" };
static const char *s_op_names[] = { NULL, "put", "delete", "get" };

//  The index of NAME in NAMES (COUNT of them, the first unused), or 0.
static int
s_name_index(const char *name, const char **names, int count)
{
    for (int i = 1; i < count; i++)
        if (streq(name, names[i]))
            return i;
    return 0;
}

static void
s_json_key_value(const shoal_key_value_t *kv)
{
    printf("{\"key\":");
    s_json_string(kv->key);
    printf(",\"value\":");
    s_json_bytes(kv->value, kv->value_size);
    printf(",\"version\":%" PRIu64 ",\"create_revision\":%" PRIu64 ",\"mod_revision\":%" PRIu64
           ",\"lease\":%" PRIu64 "}", kv->version, kv->create_revision, kv->mod_revision, kv->lease);
}

static void
s_print_key_values(const shoal_key_value_t *kvs, size_t count)
{
    printf("%-32s %-8s %-8s %-8s %-8s %s\n", "KEY", "VERSION", "CREATE", "MOD", "LEASE", "VALUE");
    for (size_t i = 0; i < count; i++)
        printf("%-32s %-8" PRIu64 " %-8" PRIu64 " %-8" PRIu64 " %-8" PRIu64 " %.*s\n", kvs[i].key, kvs[i].version,
               kvs[i].create_revision, kvs[i].mod_revision, kvs[i].lease, (int) kvs[i].value_size,
               (const char *) kvs[i].value);
}

//  A transaction as the command line or a file gives it; the strings are
//  borrowed from argv or from the parsed file.
typedef struct {
    shoal_compare_t compares[S_TXN_PARTS_MAX];
    size_t compare_count;
    shoal_op_t success[S_TXN_PARTS_MAX];
    size_t success_count;
    shoal_op_t failure[S_TXN_PARTS_MAX];
    size_t failure_count;
    char *words[3 * S_TXN_PARTS_MAX * 3];   //  split argument words, owned
    size_t word_count;
    json_t *file;                           //  the parsed file, when one was given
} s_txn_args_t;

//  Splits TEXT at its first COUNT - 1 spaces into WORDS (kept in ARGS).
//  Returns the number of words.
static size_t
s_split(s_txn_args_t *args, const char *text, const char **words, size_t count)
{
    size_t found = 0;
    const char *at = text;
    while (found < count && *at) {
        while (*at == ' ')
            at++;
        if (!*at)
            break;
        const char *end = found == count - 1 ? at + strlen(at) : strchr(at, ' ');
        if (!end)
            end = at + strlen(at);
        char *word = shoal_strndup(at, (size_t) (end - at));
        args->words[args->word_count++] = word;
        words[found++] = word;
        at = end;
    }
    return found;
}

//  "KEY TARGET OP VALUE": version, create, mod and lease take a number.
static int
s_compare_parse(s_txn_args_t *args, const char *text)
{
    const char *words[4];
    if (args->compare_count == S_TXN_PARTS_MAX || args->word_count + 4 > sizeof args->words / sizeof args->words[0]
    ||  s_split(args, text, words, 4) != 4) {
        fprintf(stderr, "shoalctl: --if '%s': expected 'KEY TARGET OP VALUE', TARGET value|version|create|mod|lease, "
                "OP = != > <\n", text);
        return -1;
    }
    shoal_compare_t *compare = &args->compares[args->compare_count];
    compare->key = words[0];
    compare->target = s_name_index(words[1], s_cmp_targets, 6);
    compare->result = s_name_index(words[2], s_cmp_results, 5);
    if (!compare->result)
        compare->result = s_name_index(words[2], s_cmp_result_words, 5);
    char *end = NULL;
    if (compare->target == SHOAL_CMP_VALUE) {
        compare->value = words[3];
        compare->value_size = strlen(words[3]);
    }
    else
        compare->number = strtoull(words[3], &end, 10);
    if (!compare->target || !compare->result || (end && *end)) {
        fprintf(stderr, "shoalctl: --if '%s': TARGET is value|version|create|mod|lease, OP = != > <, and a "
                "number follows all but value\n", text);
        return -1;
    }
    args->compare_count++;
    return 0;
}

//  "put KEY VALUE", "get KEY", "del KEY"; a KEY ending in '*' is a prefix.
static int
s_op_parse(s_txn_args_t *args, const char *text, bool success)
{
    shoal_op_t *ops = success ? args->success : args->failure;
    size_t *count = success ? &args->success_count : &args->failure_count;
    const char *words[3];
    size_t found = *count < S_TXN_PARTS_MAX && args->word_count + 3 <= sizeof args->words / sizeof args->words[0]
                 ? s_split(args, text, words, 3) : 0;
    int type = found ? s_name_index(streq(words[0], "del") ? "delete" : words[0], s_op_names, 4) : 0;
    if (!type || found < 2 || (type == SHOAL_OP_PUT) != (found == 3)) {
        fprintf(stderr, "shoalctl: --%s '%s': expected 'put KEY VALUE', 'get KEY' or 'del KEY' (KEY* for a "
                "prefix)\n", success ? "then" : "else", text);
        return -1;
    }
    shoal_op_t *op = &ops[(*count)++];
    op->type = type;
    size_t length = strlen(words[1]);
    if (type != SHOAL_OP_PUT && length && words[1][length - 1] == '*') {
        ((char *) words[1])[length - 1] = 0;
        op->prefix = true;
    }
    op->key = words[1];
    if (type == SHOAL_OP_PUT) {
        op->value = words[2];
        op->value_size = strlen(words[2]);
    }
    return 0;
}

//  One compare of a JSON file: {"key", "target", "result", "value" | "number"}.
static int
s_compare_json(s_txn_args_t *args, json_t *item)
{
    const char *target = json_string_value(json_object_get(item, "target"));
    const char *result = json_string_value(json_object_get(item, "result"));
    shoal_compare_t *compare = &args->compares[args->compare_count];
    compare->key = json_string_value(json_object_get(item, "key"));
    compare->target = target ? s_name_index(target, s_cmp_targets, 6) : 0;
    compare->result = result ? s_name_index(result, s_cmp_result_words, 5) : 0;
    if (result && !compare->result)
        compare->result = s_name_index(result, s_cmp_results, 5);
    json_t *value = json_object_get(item, "value");
    json_t *number = json_object_get(item, "number");
    if (json_is_string(value)) {
        compare->value = json_string_value(value);
        compare->value_size = json_string_length(value);
    }
    compare->number = json_is_integer(number) ? (uint64_t) json_integer_value(number) : 0;
    if (!compare->key || !compare->target || !compare->result
    ||  (compare->target == SHOAL_CMP_VALUE ? !json_is_string(value) : !json_is_integer(number)))
        return -1;
    args->compare_count++;
    return 0;
}

//  One operation of a JSON file: {"op", "key", "value", "lease", "prefix"}.
static int
s_op_json(shoal_op_t *op, json_t *item)
{
    const char *name = json_string_value(json_object_get(item, "op"));
    op->type = name ? s_name_index(streq(name, "del") ? "delete" : name, s_op_names, 4) : 0;
    op->key = json_string_value(json_object_get(item, "key"));
    json_t *value = json_object_get(item, "value");
    if (json_is_string(value)) {
        op->value = json_string_value(value);
        op->value_size = json_string_length(value);
    }
    json_t *lease = json_object_get(item, "lease");
    op->lease = json_is_integer(lease) ? (uint64_t) json_integer_value(lease) : 0;
    op->prefix = json_is_true(json_object_get(item, "prefix"));
    return op->type && op->key && (op->type != SHOAL_OP_PUT || json_is_string(value)) ? 0 : -1;
}

//  Reads a transaction from the JSON file PATH:
//  {"compare": [...], "success": [...], "failure": [...]}.
static int
s_txn_file(s_txn_args_t *args, const char *path)
{
    json_error_t error;
    args->file = json_load_file(path, 0, &error);
    if (!args->file) {
        fprintf(stderr, "shoalctl: %s:%d: %s\n", path, error.line, error.text);
        return -1;
    }
    const char *parts[] = { "compare", "success", "failure" };
    for (int part = 0; part < 3; part++) {
        json_t *list = json_object_get(args->file, parts[part]);
        if (list && !json_is_array(list)) {
            fprintf(stderr, "shoalctl: %s: \"%s\" is not a list\n", path, parts[part]);
            return -1;
        }
        size_t index;
        json_t *item;
        json_array_foreach(list, index, item) {
            int rc = -1;
            if (index < S_TXN_PARTS_MAX)
                rc = part == 0 ? s_compare_json(args, item)
                   : part == 1 ? s_op_json(&args->success[args->success_count++], item)
                   : s_op_json(&args->failure[args->failure_count++], item);
            if (rc) {
                fprintf(stderr, "shoalctl: %s: %s[%zu] is not a %s (see `shoalctl --help`)\n", path, parts[part],
                        index, part == 0 ? "compare" : "operation");
                return -1;
            }
        }
    }
    return 0;
}

static void
s_txn_args_clear(s_txn_args_t *args)
{
    for (size_t i = 0; i < args->word_count; i++)
        free(args->words[i]);
    json_decref(args->file);
}

static void
s_txn_print(const shoal_txn_result_t *result, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"succeeded\":%s,\"revision\":%" PRIu64 ",\"owner\":", result->succeeded ? "true" : "false",
               result->revision);
        s_json_string(result->owner);
        printf(",\"results\":[");
        for (size_t i = 0; i < result->count; i++) {
            const shoal_op_result_t *each = &result->results[i];
            printf("%s{\"op\":\"%s\"", i ? "," : "", s_op_names[each->type]);
            if (each->type == SHOAL_OP_GET) {
                printf(",\"kvs\":[");
                for (size_t k = 0; k < each->count; k++) {
                    printf("%s", k ? "," : "");
                    s_json_key_value(&each->kvs[k]);
                }
                printf("]");
            }
            if (each->type == SHOAL_OP_DELETE)
                printf(",\"deleted\":%" PRIu64, each->deleted);
            printf("}");
        }
        printf("]}\n");
        return;
    }
    printf("%s: the %s branch ran, revision %" PRIu64 " (on %s)\n", result->succeeded ? "succeeded" : "failed",
           result->succeeded ? "success" : "failure", result->revision, result->owner);
    for (size_t i = 0; i < result->count; i++) {
        const shoal_op_result_t *each = &result->results[i];
        if (each->type == SHOAL_OP_GET)
            s_print_key_values(each->kvs, each->count);
        else
        if (each->type == SHOAL_OP_DELETE)
            printf("deleted %" PRIu64 " key(s)\n", each->deleted);
    }
}

//  claim txn ID [--if C]... [--then OP]... [--else OP]... | claim txn ID --file FILE
static int
s_claim_txn(shoal_client_t *client, int argc, char **argv, const s_options_t *options)
{
    s_txn_args_t *args = (s_txn_args_t *) shoal_calloc(1, sizeof *args);
    int rc = argc < 1 ? -1 : 0;
    for (int i = 1; i < argc && rc == 0; i += 2) {
        const char *flag = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value)
            rc = -1;
        else
        if (streq(flag, "--if"))
            rc = s_compare_parse(args, value);
        else
        if (streq(flag, "--then"))
            rc = s_op_parse(args, value, true);
        else
        if (streq(flag, "--else"))
            rc = s_op_parse(args, value, false);
        else
        if (streq(flag, "--file") && argc == 3)
            rc = s_txn_file(args, value);
        else
            rc = -1;
    }
    if (rc) {
        fprintf(stderr, "shoalctl: usage: claim txn ID [--if 'KEY TARGET OP VALUE']... [--then 'put KEY VALUE' | "
                "'get KEY' | 'del KEY']... [--else ...]... | claim txn ID --file FILE\n");
        s_txn_args_clear(args);
        free(args);
        return S_EXIT_USAGE;
    }
    shoal_txn_result_t result;
    int status = shoal_client_claim_txn(client, argv[0], args->compares, args->compare_count, args->success,
                                        args->success_count, args->failure, args->failure_count, &result);
    s_txn_args_clear(args);
    free(args);
    if (status != 200)
        return s_failed(client, status, options);
    s_txn_print(&result, options);
    shoal_txn_result_clear(&result);
    return S_EXIT_OK;
}

//  claim key put ID KEY VALUE [--lease N] | get ID KEY | del ID KEY [--prefix] | ls ID [PREFIX]
static int
s_claim_key(shoal_client_t *client, int argc, char **argv, const s_options_t *options)
{
    const char *verb = argc > 0 ? argv[0] : "";
    bool put = streq(verb, "put") && (argc == 4 || (argc == 6 && streq(argv[4], "--lease")));
    bool get = streq(verb, "get") && argc == 3;
    bool del = streq(verb, "del") && (argc == 3 || (argc == 4 && streq(argv[3], "--prefix")));
    bool ls = streq(verb, "ls") && (argc == 2 || argc == 3);
    char *end = NULL;
    uint64_t lease = put && argc == 6 ? strtoull(argv[5], &end, 10) : 0;
    if ((!put && !get && !del && !ls) || (end && *end)) {
        fprintf(stderr, "shoalctl: usage: claim key put ID KEY VALUE [--lease N] | get ID KEY | del ID KEY "
                "[--prefix] | ls ID [PREFIX]\n");
        return S_EXIT_USAGE;
    }
    const char *id = argv[1];
    int rc;
    if (put) {
        size_t size = strlen(argv[3]);
        uint8_t *stdin_value = streq(argv[3], "-") ? s_read_stdin(&size) : NULL;
        uint64_t revision = 0;
        rc = shoal_client_key_put(client, id, argv[2], stdin_value ? (const void *) stdin_value : argv[3], size,
                                  lease, &revision);
        free(stdin_value);
        if (rc != 200)
            return s_failed(client, rc, options);
        if (options->json)
            printf("{\"ok\":true,\"revision\":%" PRIu64 "}\n", revision);
        else
            printf("wrote %s of claim %s at revision %" PRIu64 "\n", argv[2], id, revision);
        return S_EXIT_OK;
    }
    if (get) {
        shoal_key_value_t kv;
        rc = shoal_client_key_get(client, id, argv[2], &kv);
        if (rc != 200)
            return s_failed(client, rc, options);
        if (options->json) {
            printf("{\"ok\":true,\"kv\":");
            s_json_key_value(&kv);
            printf("}\n");
        }
        else
            printf("%.*s\n", (int) kv.value_size, (const char *) kv.value);
        shoal_key_value_clear(&kv);
        return S_EXIT_OK;
    }
    if (del) {
        uint64_t deleted = 0;
        rc = shoal_client_key_delete(client, id, argv[2], argc == 4, &deleted);
        if (rc != 200)
            return s_failed(client, rc, options);
        if (options->json)
            printf("{\"ok\":true,\"deleted\":%" PRIu64 "}\n", deleted);
        else
            printf("deleted %" PRIu64 " key(s) of claim %s\n", deleted, id);
        return S_EXIT_OK;
    }
    shoal_key_value_t *kvs = NULL;
    size_t count = 0;
    rc = shoal_client_key_list(client, id, argc == 3 ? argv[2] : "", &kvs, &count);
    if (rc != 200)
        return s_failed(client, rc, options);
    if (options->json) {
        printf("{\"ok\":true,\"kvs\":[");
        for (size_t i = 0; i < count; i++) {
            printf("%s", i ? "," : "");
            s_json_key_value(&kvs[i]);
        }
        printf("]}\n");
    }
    else
        s_print_key_values(kvs, count);
    shoal_key_values_clear(&kvs, count);
    return S_EXIT_OK;
}

//  claim key ... and claim txn ...: ARGV[0] is "claim", ARGV[1] the verb.
static int
s_cmd_claim_keys(int argc, char **argv, const s_options_t *options)
{
    bool txn = streq(argv[1], "txn");
    if (argc < 3) {
        fprintf(stderr, "shoalctl: usage: claim key put|get|del|ls ... | claim txn ID ...\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = txn ? s_claim_txn(client, argc - 2, argv + 2, options) : s_claim_key(client, argc - 2, argv + 2, options);
    shoal_client_destroy(&client);
    return code;
}

static int
s_cmd_claim(int argc, char **argv, const s_options_t *options)
{
    if (argc > 1 && (streq(argv[1], "key") || streq(argv[1], "txn")))
        return s_cmd_claim_keys(argc, argv, options);
    //  argv[0] is "claim" or "lookup".
    bool lookup = streq(argv[0], "lookup");
    const char *verb = lookup ? "lookup" : argc > 1 ? argv[1] : "";
    bool by_id = streq(verb, "show") || streq(verb, "stop") || streq(verb, "start") || streq(verb, "pause")
              || streq(verb, "resume") || streq(verb, "release");
    if ((lookup && argc != 2) || (by_id && argc != 3) || (streq(verb, "ls") && argc != 2)
    ||  (!lookup && !by_id && !streq(verb, "ls") && !streq(verb, "create") && !streq(verb, "call")
         && !streq(verb, "checkpoint"))) {
        fprintf(stderr, "shoalctl: usage: claim create|ls|show|stop|start|pause|resume|release|call|checkpoint ..., "
                "lookup ID\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    if (lookup) {
        shoal_lookup_t found;
        int rc = shoal_client_lookup(client, argv[1], &found);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else
        if (options->json) {
            printf("{\"ok\":true,\"claim_id\":");
            s_json_string(found.claim_id);
            printf(",\"owner\":");
            s_json_string(found.owner);
            printf(",\"endpoint\":");
            s_json_string(found.endpoint);
            printf(",\"epoch\":%" PRIu64 "}\n", found.epoch);
        }
        else
            printf("%s is owned by %s at %s (epoch %" PRIu64 ")\n", found.claim_id, found.owner,
                   found.endpoint, found.epoch);
        if (rc == 200)
            shoal_lookup_clear(&found);
    }
    else
    if (streq(verb, "create"))
        code = s_claim_create(client, argc - 2, argv + 2, options);
    else
    if (streq(verb, "ls"))
        code = s_claim_list(client, options);
    else
    if (streq(verb, "call"))
        code = s_claim_call(client, argc - 2, argv + 2, options);
    else
    if (streq(verb, "checkpoint"))
        code = s_claim_checkpoint(client, argc - 2, argv + 2, options);
    else {
        shoal_claim_info_t info;
        const char *id = argv[2];
        int rc = streq(verb, "show") ? shoal_client_claim_show(client, id, &info)
               : streq(verb, "stop") ? shoal_client_claim_stop(client, id, &info)
               : streq(verb, "start") ? shoal_client_claim_start(client, id, &info)
               : streq(verb, "pause") ? shoal_client_claim_pause(client, id, &info)
               : streq(verb, "resume") ? shoal_client_claim_resume(client, id, &info)
               : shoal_client_claim_release(client, id, &info);
        if (rc != 200)
            code = s_failed(client, rc, options);
        else {
            s_print_claim(&info, options);
            shoal_claim_info_clear(&info);
        }
    }
    shoal_client_destroy(&client);
    return code;
}

static int
s_cmd_counters(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "counters".
    bool one = argc == 3 && streq(argv[1], "--tenant");
    if (argc != 1 && !one) {
        fprintf(stderr, "shoalctl: usage: counters [--tenant ORG/PROJECT]\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    shoal_counters_t counters;
    int rc = shoal_client_counters(client, one ? argv[2] : NULL, &counters);
    int code = S_EXIT_OK;
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (options->json) {
        printf("{\"ok\":true,\"counters\":[");
        for (size_t i = 0; i < counters.count; i++) {
            const shoal_counter_scope_t *scope = &counters.scopes[i];
            printf("%s{\"tenant\":", i ? "," : "");
            s_json_string(scope->tenant);
            printf(",\"claims\":%" PRIu64 ",\"running\":%" PRIu64 ",\"memory_bytes\":%" PRIu64
                   ",\"reserved_claims\":%" PRIu64 ",\"reserved_running\":%" PRIu64
                   ",\"reserved_memory_bytes\":%" PRIu64 "}", scope->claims, scope->running,
                   scope->memory_bytes, scope->reserved_claims, scope->reserved_running,
                   scope->reserved_memory_bytes);
        }
        printf("],\"more\":%s}\n", counters.more ? "true" : "false");
    }
    else {
        printf("%-24s %8s %8s %14s   %s\n", "SCOPE", "CLAIMS", "RUNNING", "MEMORY", "RESERVED (claims/running/memory)");
        for (size_t i = 0; i < counters.count; i++) {
            const shoal_counter_scope_t *scope = &counters.scopes[i];
            printf("%-24s %8" PRIu64 " %8" PRIu64 " %14" PRIu64 "   %" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n",
                   *scope->tenant ? scope->tenant : "(node)", scope->claims, scope->running, scope->memory_bytes,
                   scope->reserved_claims, scope->reserved_running, scope->reserved_memory_bytes);
        }
        if (counters.more)
            printf("(more tenants than one reply holds: ask for each with --tenant)\n");
    }
    if (rc == 200)
        shoal_counters_clear(&counters);
    shoal_client_destroy(&client);
    return code;
}

//  A line on stderr while a sweep runs, on a terminal.
static void
s_fsck_progress(const shoal_fsck_report_t *report, void *arg)
{
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rfsck run %" PRIu64 ": %-8s %" PRIu64 " keys and files, %" PRIu64 " finding(s) so far   ",
                report->run, report->check, report->keys, report->finding_count);
}

static void
s_fsck_print(const shoal_fsck_report_t *report, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"fsck\":{\"node\":");
        s_json_string(report->node_id);
        printf(",\"run\":%" PRIu64 ",\"done\":%s,\"repair\":%s,\"trigger\":", report->run,
               report->done ? "true" : "false", report->repair ? "true" : "false");
        s_json_string(report->trigger);
        printf(",\"keys\":%" PRIu64 ",\"started_ms\":%" PRIu64 ",\"finished_ms\":%" PRIu64 ",\"finding_count\":%"
               PRIu64 ",\"remaining\":%" PRIu64 ",\"error\":", report->keys, report->started_ms, report->finished_ms,
               report->finding_count, report->remaining);
        s_json_string(report->error);
        printf(",\"findings\":[");
        for (size_t i = 0; i < report->count; i++) {
            const shoal_fsck_finding_t *finding = &report->findings[i];
            printf("%s{\"check\":", i ? "," : "");
            s_json_string(finding->check);
            printf(",\"where\":");
            s_json_string(finding->where);
            printf(",\"key\":");
            s_json_string(finding->key);
            printf(",\"problem\":");
            s_json_string(finding->problem);
            printf(",\"repairable\":%s,\"repaired\":", finding->repairable ? "true" : "false");
            s_json_string(finding->repaired);
            printf("}");
        }
        printf("]}}\n");
        return;
    }
    if (!report->run) {
        printf("no fsck has run on %s since it started\n", report->node_id);
        return;
    }
    uint64_t took = report->finished_ms >= report->started_ms ? report->finished_ms - report->started_ms : 0;
    printf("fsck run %" PRIu64 " on %s (%s%s)%s: %" PRIu64 " keys and files looked at", report->run, report->node_id,
           report->trigger, report->repair ? ", repair" : "", report->done ? "" : ", in progress", report->keys);
    if (report->done)
        printf(" in %.1f s", (double) took / 1000.0);
    printf("\n");
    for (size_t i = 0; i < report->count; i++) {
        const shoal_fsck_finding_t *finding = &report->findings[i];
        printf("  %-7s %s %s: %s\n", finding->check, finding->where, finding->key, finding->problem);
        if (*finding->repaired)
            printf("          repaired: %s\n", finding->repaired);
        else
        if (report->done)
            printf("          %s\n", finding->repairable ? (report->repair ? "not repaired (it changed, or its repair "
                   "failed: see the node's log)" : "--repair mends it") : "left for an operator");
    }
    if (report->finding_count > report->count)
        printf("  (%" PRIu64 " more than a reply holds: mend these and run it again)\n", report->finding_count - report->count);
    if (*report->error)
        printf("failed: %s\n", report->error);
    if (!report->finding_count)
        printf("clean: nothing found\n");
    else
        printf("%" PRIu64 " finding(s), %" PRIu64 " repaired, %" PRIu64 " left\n", report->finding_count,
               report->finding_count - report->remaining, report->remaining);
}

static int
s_cmd_fsck(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "fsck".
    bool repair = false, last = false;
    for (int i = 1; i < argc; i++) {
        if (streq(argv[i], "--repair"))
            repair = true;
        else
        if (streq(argv[i], "--last"))
            last = true;
        else {
            fprintf(stderr, "shoalctl: fsck: unknown argument '%s' (usage: fsck [--repair] [--last])\n", argv[i]);
            return S_EXIT_USAGE;
        }
    }
    if (repair && last) {
        fprintf(stderr, "shoalctl: fsck: --repair starts a run, --last shows one: not both\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    shoal_fsck_report_t report;
    int rc = last ? shoal_client_fsck_status(client, &report)
                  : shoal_client_fsck(client, repair, 0, options->json ? NULL : s_fsck_progress, NULL, &report);
    if (!options->json && !last && isatty(STDERR_FILENO))
        fprintf(stderr, "\r%-78s\r", "");
    int code = S_EXIT_OK;
    if (rc != 200)
        code = s_failed(client, rc, options);
    else {
        s_fsck_print(&report, options);
        if (report.remaining || *report.error)
            code = S_EXIT_FINDINGS;
        shoal_fsck_report_clear(&report);
    }
    shoal_client_destroy(&client);
    return code;
}

static void
s_json_move(const shoal_move_info_t *info)
{
    printf("{\"move_id\":");
    s_json_string(info->move_id);
    printf(",\"claim_id\":");
    s_json_string(info->claim_id);
    printf(",\"from\":");
    s_json_string(info->from);
    printf(",\"to\":");
    s_json_string(info->to);
    printf(",\"state\":");
    s_json_string(info->state);
    printf(",\"phase\":");
    s_json_string(info->phase);
    printf(",\"error\":");
    s_json_string(info->error);
    printf(",\"round\":%u,\"max_downtime_ms\":%u,\"memory_bytes\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
           ",\"rate\":%" PRIu64 ",\"dirty_rate\":%" PRIu64 ",\"estimate_ms\":%" PRIu64 ",\"total_ms\":%" PRIu64
           ",\"node_downtime_ms\":%" PRIu64 ",\"guest_downtime_ms\":%" PRIu64 ",\"guest_switch_gap_ms\":%" PRIu64
           ",\"throttle_steps\":%u"
           ",\"throttle_percent\":%u,\"throttled_ms\":%" PRIu64 ",\"pause_us\":%" PRIu64
           ",\"final_wait_us\":%" PRIu64 ",\"final_bytes\":%" PRIu64 ",\"final_us\":%" PRIu64
           ",\"target_sync_us\":%" PRIu64 ",\"commit_asked_us\":%" PRIu64 ",\"commit_us\":%" PRIu64
           ",\"start_us\":%" PRIu64 ",\"done\":%s}",
           info->round, info->max_downtime_ms, info->memory_bytes, info->bytes_sent, info->rate,
           info->dirty_rate, info->estimate_ms, info->total_ms, info->node_downtime_ms,
           info->guest_downtime_ms, info->guest_switch_gap_ms, info->throttle_steps, info->throttle_percent,
           info->throttled_ms, info->pause_us, info->final_wait_us, info->final_bytes, info->final_us,
           info->target_sync_us, info->commit_asked_us, info->commit_us, info->start_us,
           info->done ? "true" : "false");
}

//  One line of progress, redrawn in place on a terminal.
static void
s_move_progress(const shoal_move_info_t *info, bool tty)
{
    int width = 24;
    int filled = info->memory_bytes
               ? (int) ((double) (info->bytes_sent > info->memory_bytes ? info->memory_bytes : info->bytes_sent)
                        / (double) info->memory_bytes * width)
               : 0;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "%s%-10s [%s] round %u  %.1f MB sent  %.0f MB/s  dirty %.1f MB/s  final ~%" PRIu64 " ms%s",
            tty ? "\r" : "", info->phase, bar, info->round, (double) info->bytes_sent / 1e6,
            (double) info->rate / 1e6, (double) info->dirty_rate / 1e6, info->estimate_ms, tty ? "  " : "\n");
    fflush(stderr);
}

static void
s_move_print(const shoal_move_info_t *info, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":%s,\"move\":", streq(info->phase, "aborted") ? "false" : "true");
        s_json_move(info);
        printf("}\n");
        return;
    }
    printf("claim:    %s\nmove:     %s -> %s (%s)\nphase:    %s\nrounds:   %u\nbytes:    %" PRIu64 "\n"
           "rate:     %.1f MB/s\ntime:     %" PRIu64 " ms\n", info->claim_id, info->from, info->to, info->move_id,
           info->phase, info->round, info->bytes_sent, (double) info->rate / 1e6, info->total_ms);
    if (info->done && !*info->error) {
        printf("downtime: %" PRIu64 " ms seen by the nodes, %" PRIu64 " ms seen by the guest across the switch; "
               "the guest's longest gap during the move %" PRIu64 " ms\n",
               info->node_downtime_ms, info->guest_switch_gap_ms, info->guest_downtime_ms);
        printf("steps:    from the pause: final round at %.1f ms, took %.1f ms for %" PRIu64 " bytes (target sync "
               "%.1f ms); commit asked at %.1f ms, written in %.1f ms; the target started the guest %.0f ms "
               "after the commit\n", info->final_wait_us / 1e3, info->final_us / 1e3, info->final_bytes,
               info->target_sync_us / 1e3, info->commit_asked_us / 1e3, info->commit_us / 1e3, info->start_us / 1e3);
    }
    else
    if (info->node_downtime_ms)
        printf("paused:   %" PRIu64 " ms, then it ran on %s again\n", info->node_downtime_ms, info->from);
    if (info->throttle_steps)
        printf("throttle: %u step(s), up to %u%% of the guest's writes held back for %" PRIu64 " ms\n",
               info->throttle_steps, info->throttle_percent, info->throttled_ms);
    if (*info->error)
        printf("error:    %s\n", info->error);
}

static int
s_cmd_move(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "move".
    const char *verb = argc > 1 ? argv[1] : "";
    if (streq(verb, "ls") && argc == 2) {
        shoal_client_t *client = s_connect(options);
        if (!client)
            return S_EXIT_FAILED;
        shoal_move_list_t list;
        int rc = shoal_client_move_list(client, &list);
        int code = rc == 200 ? S_EXIT_OK : s_failed(client, rc, options);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"moves\":[");
            for (size_t i = 0; i < list.count; i++) {
                printf("%s", i ? "," : "");
                s_json_move(&list.moves[i]);
            }
            printf("]}\n");
        }
        else
        if (rc == 200 && list.count == 0)
            printf("no move records on this node\n");
        else
        if (rc == 200)
            for (size_t i = 0; i < list.count; i++)
                printf("%-20s %-10s %s -> %s  %s\n", list.moves[i].claim_id, list.moves[i].state,
                       list.moves[i].from, list.moves[i].to, list.moves[i].move_id);
        if (rc == 200)
            shoal_move_list_clear(&list);
        shoal_client_destroy(&client);
        return code;
    }
    if ((streq(verb, "status") || streq(verb, "resume")) && argc == 3) {
        shoal_client_t *client = s_connect(options);
        if (!client)
            return S_EXIT_FAILED;
        shoal_move_info_t info;
        int rc = streq(verb, "status") ? shoal_client_move_status(client, argv[2], &info)
                                       : shoal_client_move_resume(client, argv[2], &info);
        int code = rc == 200 ? S_EXIT_OK : s_failed(client, rc, options);
        if (rc == 200 && streq(verb, "resume") && !options->json)
            fprintf(stderr, "%s\n", shoal_client_error(client));
        if (rc == 200) {
            s_move_print(&info, options);
            shoal_move_info_clear(&info);
        }
        shoal_client_destroy(&client);
        return code;
    }
    //  move ID --to NODE [--max-downtime-ms N] [--no-converge]
    const char *id = argc > 1 ? argv[1] : NULL;
    const char *to = NULL;
    long budget = 0;
    bool no_converge = false;
    bool usage = false;
    for (int i = 2; i < argc && !usage; i++) {
        if (streq(argv[i], "--no-converge"))
            no_converge = true;
        else
        if (streq(argv[i], "--to") && i + 1 < argc)
            to = argv[++i];
        else
        if (streq(argv[i], "--max-downtime-ms") && i + 1 < argc) {
            char *end;
            budget = strtol(argv[++i], &end, 10);
            if (*end || budget <= 0 || budget > INT32_MAX) {
                fprintf(stderr, "shoalctl: --max-downtime-ms '%s': expected a positive integer\n", argv[i]);
                return S_EXIT_USAGE;
            }
        }
        else
            usage = true;
    }
    if (!id || !to || usage) {
        fprintf(stderr, "shoalctl: usage: move ID --to NODE [--max-downtime-ms N] [--no-converge] | move "
                        "status|resume ID | move ls\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    //  The claim's owner runs the move: ask it, wherever the client is.
    shoal_lookup_t owner;
    if (shoal_client_lookup(client, id, &owner) == 200) {
        if (!streq(owner.endpoint, options->endpoint)) {
            s_options_t at_owner = *options;
            at_owner.endpoint = owner.endpoint;
            shoal_client_t *direct = s_connect(&at_owner);
            if (direct) {
                shoal_client_destroy(&client);
                client = direct;
            }
        }
        shoal_lookup_clear(&owner);
    }
    shoal_move_info_t info;
    shoal_move_options_t move_options = { .max_downtime_ms = (uint32_t) budget, .no_converge = no_converge };
    int rc = shoal_client_move_with(client, id, to, &move_options, &info);
    if (rc != 200) {
        int code = s_failed(client, rc, options);
        shoal_client_destroy(&client);
        return code;
    }
    bool tty = isatty(STDERR_FILENO);
    while (!info.done) {
        if (!options->json)
            s_move_progress(&info, tty);
        zclock_sleep(100);
        shoal_move_info_t next;
        rc = shoal_client_move_status(client, id, &next);
        if (rc != 200) {
            if (tty && !options->json)
                fprintf(stderr, "\n");
            int code = s_failed(client, rc, options);
            shoal_move_info_clear(&info);
            shoal_client_destroy(&client);
            return code;
        }
        shoal_move_info_clear(&info);
        info = next;
    }
    if (tty && !options->json)
        fprintf(stderr, "\n");
    s_move_print(&info, options);
    int code = streq(info.phase, "done") ? S_EXIT_OK : S_EXIT_FAILED;
    shoal_move_info_clear(&info);
    shoal_client_destroy(&client);
    return code;
}

//  Leases (lease grant|keepalive|revoke|ttl|ls).

//  How long the keepalive loop sleeps between looks at an interruption.
#define S_KEEPALIVE_STEP_MS 50

static void
s_json_lease(const shoal_lease_t *lease)
{
    printf("{\"id\":%" PRIu64 ",\"ttl_ms\":%" PRIu64 ",\"remaining_ms\":%" PRIu64 ",\"expires_ms\":%" PRIu64
           ",\"granted_ms\":%" PRIu64 ",\"attached\":%" PRIu64 ",\"holder\":", lease->id, lease->ttl_ms,
           lease->remaining_ms, lease->expires_ms, lease->granted_ms, lease->attached);
    s_json_string(lease->holder);
    printf(",\"tenant\":");
    s_json_string(lease->tenant);
    printf(",\"home\":");
    s_json_string(lease->home ? lease->home : "");
    printf("}");
}

static void
s_print_lease(const char *what, const shoal_lease_t *lease, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"lease\":");
        s_json_lease(lease);
        printf("}\n");
    }
    else
        printf("lease %" PRIu64 " %s: TTL %" PRIu64 " ms, %" PRIu64 " ms left, %" PRIu64 " key(s) attached "
               "(home %s)\n", lease->id, what, lease->ttl_ms, lease->remaining_ms, lease->attached,
               lease->home ? lease->home : "?");
}

//  Keeps lease ID alive, a third of its TTL apart, until interrupted or
//  the lease is gone.
static int
s_lease_keepalive(shoal_client_t *client, uint64_t id, const s_options_t *options)
{
    while (!zsys_interrupted) {
        shoal_lease_t lease;
        int rc = shoal_client_lease_keepalive(client, id, &lease);
        if (rc != 200)
            return s_failed(client, rc, options);
        s_print_lease("kept alive", &lease, options);
        fflush(stdout);
        int64_t next = zclock_mono() + (int64_t) lease.ttl_ms / 3;
        shoal_lease_clear(&lease);
        while (!zsys_interrupted && zclock_mono() < next)
            zclock_sleep(S_KEEPALIVE_STEP_MS);
    }
    return S_EXIT_OK;
}

static int
s_cmd_lease(int argc, char **argv, const s_options_t *options)
{
    //  argv[0] is "lease".
    const char *verb = argc > 1 ? argv[1] : "";
    char *end = NULL;
    uint64_t number = argc > 2 ? strtoull(argv[2], &end, 10) : 0;
    bool by_number = streq(verb, "grant") || streq(verb, "keepalive") || streq(verb, "revoke") || streq(verb, "ttl");
    //  A grant may name the lease's id (4th argument).
    bool with_id = streq(verb, "grant") && argc == 4;
    char *id_end = NULL;
    uint64_t chosen = with_id ? strtoull(argv[3], &id_end, 10) : 0;
    if ((by_number && (argc != (with_id ? 4 : 3) || !end || *end || !number))
    ||  (with_id && (!id_end || *id_end || !chosen)) || (streq(verb, "ls") && argc != 2)
    ||  (!by_number && !streq(verb, "ls"))) {
        fprintf(stderr, "shoalctl: usage: lease grant TTL_MS [ID] | keepalive ID | revoke ID | ttl ID | ls\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    shoal_lease_t lease;
    int rc = 200;
    if (streq(verb, "grant")) {
        bool shortened = false;
        rc = shoal_client_lease_grant(client, number, chosen, &lease, &shortened);
        if (rc == 200 && shortened && !options->json)
            fprintf(stderr, "shoalctl: the node granted %" PRIu64 " ms, not the %" PRIu64 " ms asked\n",
                    lease.ttl_ms, number);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"shortened\":%s,\"lease\":", shortened ? "true" : "false");
            s_json_lease(&lease);
            printf("}\n");
        }
        else
        if (rc == 200)
            s_print_lease("granted", &lease, options);
    }
    else
    if (streq(verb, "keepalive"))
        code = s_lease_keepalive(client, number, options);
    else
    if (streq(verb, "revoke")) {
        rc = shoal_client_lease_revoke(client, number);
        if (rc == 200)
            printf(options->json ? "{\"ok\":true}\n" : "lease %" PRIu64 " revoked\n", number);
    }
    else
    if (streq(verb, "ttl")) {
        rc = shoal_client_lease_ttl(client, number, &lease);
        if (rc == 200)
            s_print_lease("held", &lease, options);
    }
    else {
        shoal_lease_t *leases = NULL;
        size_t count = 0;
        rc = shoal_client_lease_list(client, &leases, &count);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"leases\":[");
            for (size_t i = 0; i < count; i++) {
                printf("%s", i ? "," : "");
                s_json_lease(&leases[i]);
            }
            printf("]}\n");
        }
        else
        if (rc == 200) {
            printf("%-20s %-10s %-10s %-8s %s\n", "ID", "TTL_MS", "LEFT_MS", "KEYS", "HOLDER");
            for (size_t i = 0; i < count; i++)
                printf("%-20" PRIu64 " %-10" PRIu64 " %-10" PRIu64 " %-8" PRIu64 " %s\n", leases[i].id,
                       leases[i].ttl_ms, leases[i].remaining_ms, leases[i].attached, leases[i].holder);
        }
        shoal_leases_clear(&leases, count);
    }
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (streq(verb, "grant") || streq(verb, "ttl"))
        shoal_lease_clear(&lease);
    shoal_client_destroy(&client);
    return code;
}

//  Locks (lock acquire|release|ls).

static void
s_print_lock(const char *id, const shoal_lock_state_t *state, const char *what, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"granted\":%s,\"readers\":%" PRIu64 ",\"writer\":", state->granted ? "true" : "false",
               state->readers);
        s_json_string(state->writer);
        printf(",\"waiter\":");
        s_json_string(state->waiter);
        printf(",\"records\":[");
        for (size_t i = 0; i < state->count; i++) {
            const shoal_lock_record_t *record = &state->records[i];
            printf("%s{\"holder\":", i ? "," : "");
            s_json_string(record->holder);
            printf(",\"holder_node\":");
            s_json_string(record->holder_node);
            printf(",\"mode\":\"%s\",\"lease\":%" PRIu64 ",\"time_ms\":%" PRIu64 "}", record->mode, record->lease,
                   record->time_ms);
        }
        printf("]}\n");
        return;
    }
    if (what)
        printf("%s\n", what);
    printf("claim %s: %" PRIu64 " reader(s), writer %s, waiting writer %s\n", id, state->readers,
           *state->writer ? state->writer : "-", *state->waiter ? state->waiter : "-");
    for (size_t i = 0; i < state->count; i++) {
        char date[S_DATE_MAX];
        const shoal_lock_record_t *record = &state->records[i];
        printf("  %-6s %-24s node %-12s lease %-20" PRIu64 " since %s\n", record->mode, record->holder,
               record->holder_node, record->lease, s_date(record->time_ms, date, sizeof date));
    }
}

//  lock acquire ID read|write [--wait] [--lease N] [--holder NAME] |
//  lock release ID [--holder NAME] | lock ls ID
static int
s_cmd_lock(int argc, char **argv, const s_options_t *options)
{
    const char *verb = argc > 1 ? argv[1] : "";
    bool acquire = streq(verb, "acquire") && argc >= 4 && (streq(argv[3], "read") || streq(argv[3], "write"));
    bool release = streq(verb, "release") && argc >= 3;
    bool ls = streq(verb, "ls") && argc == 3;
    const char *holder = NULL;
    bool wait = false;
    uint64_t lease = 0;
    bool usage = !acquire && !release && !ls;
    for (int i = acquire ? 4 : 3; i < argc && !usage; i++) {
        if (streq(argv[i], "--wait") && acquire)
            wait = true;
        else
        if (streq(argv[i], "--lease") && acquire && i + 1 < argc) {
            char *end = NULL;
            lease = strtoull(argv[++i], &end, 10);
            usage = !end || *end;
        }
        else
        if (streq(argv[i], "--holder") && !ls && i + 1 < argc)
            holder = argv[++i];
        else
            usage = true;
    }
    if (usage) {
        fprintf(stderr, "shoalctl: usage: lock acquire ID read|write [--wait] [--lease N] [--holder NAME] | "
                "lock release ID [--holder NAME] | lock ls ID\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    shoal_lock_state_t state;
    const char *id = argv[2];
    int rc = acquire ? shoal_client_lock_acquire(client, id, holder, argv[3], wait, lease, &state)
           : release ? shoal_client_lock_release(client, id, holder, &state)
           : shoal_client_lock_list(client, id, &state);
    int code = S_EXIT_OK;
    if (rc != 200)
        code = s_failed(client, rc, options);
    else {
        const char *what = acquire ? (state.granted ? "granted" : "waiting: new readers are refused; ask again")
                         : release ? "released" : NULL;
        s_print_lock(id, &state, what, options);
        shoal_lock_state_clear(&state);
    }
    shoal_client_destroy(&client);
    return code;
}

//  shoalctl watch

typedef struct {
    const s_options_t *options;
    long remaining;             //  events still to print (-1: no end)
} s_watch_t;

static int
s_watch_print(const shoal_event_t *event, const shoal_watch_info_t *info, void *arg)
{
    s_watch_t *watch = (s_watch_t *) arg;
    bool json = watch->options->json;
    if (zsys_interrupted)
        return 1;
    if (info && json) {
        printf("{\"watch\":");
        s_json_string(info->node_id);
        printf(",\"last_seq\":%" PRIu64 ",\"first_kept_seq\":%" PRIu64 ",\"missed_from\":%" PRIu64
               ",\"missed_to\":%" PRIu64 ",\"replayed\":%" PRIu64 ",\"message\":", info->last_seq,
               info->first_kept_seq, info->missed_from, info->missed_to, info->replayed);
        s_json_string(info->message);
        printf("}\n");
    }
    else
    if (info && info->replayed)
        fprintf(stderr, "shoalctl: %s: %" PRIu64 " missed event(s) follow\n", info->node_id, info->replayed);
    if (info && info->missed_to && !json)
        fprintf(stderr, "shoalctl: %s: %s\n", info->node_id, info->message);
    if (!event) {
        fflush(stdout);
        return 0;
    }
    if (json) {
        printf("{\"seq\":%" PRIu64 ",\"previous_seq\":%" PRIu64 ",\"kind\":", event->seq, event->previous_seq);
        s_json_string(event->kind);
        printf(",\"what\":");
        s_json_string(event->what);
        printf(",\"node\":");
        s_json_string(event->node_id);
        printf(",\"time_ms\":%" PRIu64 ",\"claim\":", event->time_ms);
        s_json_string(event->claim_id);
        printf(",\"tenant\":");
        s_json_string(event->tenant);
        printf(",\"peer\":");
        s_json_string(event->peer);
        printf(",\"detail\":");
        s_json_string(event->detail);
        printf(",\"round\":%u,\"bytes_sent\":%" PRIu64 ",\"epoch\":%" PRIu64 "}\n", event->round,
               event->bytes_sent, event->epoch);
    }
    else {
        char date[64];
        printf("%-6" PRIu64 " %s  %-6s %-10s %s", event->seq, s_date(event->time_ms, date, sizeof date), event->kind,
               event->what, *event->claim_id ? event->claim_id : event->peer);
        if (*event->tenant)
            printf(" (%s)", event->tenant);
        if (streq(event->kind, "move"))
            printf(" with %s, round %u, %" PRIu64 " bytes", event->peer, event->round, event->bytes_sent);
        if (*event->detail)
            printf(": %s", event->detail);
        printf("\n");
    }
    fflush(stdout);
    if (watch->remaining > 0 && --watch->remaining == 0)
        return 1;
    return 0;
}

static int
s_cmd_watch(int argc, char **argv, const s_options_t *options)
{
    char kinds[SHOAL_WATCH_KINDS_TEXT] = "";
    uint64_t after = 0;
    s_watch_t watch = { options, -1 };
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if ((streq(argv[i], "--after") || streq(argv[i], "--count")) && i + 1 < argc) {
            unsigned long long value = strtoull(argv[i + 1], &end, 10);
            if (*end || !*argv[i + 1]) {
                fprintf(stderr, "shoalctl: watch: %s '%s': expected a number\n", argv[i], argv[i + 1]);
                return S_EXIT_USAGE;
            }
            if (streq(argv[i], "--after"))
                after = value;
            else
                watch.remaining = (long) value;
            i++;
        }
        else
        if (streq(argv[i], "claims") || streq(argv[i], "moves") || streq(argv[i], "members")) {
            if (strlen(kinds) + strlen(argv[i]) + 2 > sizeof kinds)
                return S_EXIT_USAGE;
            if (*kinds)
                strcat(kinds, ",");
            strcat(kinds, argv[i]);
        }
        else {
            fprintf(stderr, "shoalctl: watch: '%s' is not claims, moves, members, --after SEQ or --count N\n",
                    argv[i]);
            return S_EXIT_USAGE;
        }
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int rc = shoal_client_watch(client, kinds, after, s_watch_print, &watch);
    int code = rc == 0 ? S_EXIT_OK : s_failed(client, rc, options);
    shoal_client_destroy(&client);
    return code;
}

//  shoalctl top

#define S_TOP_INTERVAL_MS 1000
#define S_TOP_STEP_MS 50
#define S_MIB (1024.0 * 1024.0)

//  One node's row (an object of the "nodes" array with --json, after a comma
//  unless FIRST): asked of the node itself, at its endpoint.
static void
s_top_node(const s_options_t *options, const shoal_peer_info_t *peer, shoal_move_list_t *moves, bool first)
{
    char *error = NULL;
    shoal_client_t *client = shoal_client_new(peer->endpoint, options->cert, options->cluster_key, &error);
    shoal_counters_t counters = { 0 };
    int rc = client ? (shoal_client_set_timeout(client, options->timeout_ms),
                       shoal_client_counters(client, NULL, &counters)) : -1;
    shoal_move_list_t mine = { 0 };
    if (rc == 200)
        rc = shoal_client_move_list(client, &mine);
    const char *state = peer->self ? "self" : peer->state;
    if (options->json) {
        printf("%s{\"node_id\":", first ? "" : ",");
        s_json_string(peer->node_id);
        printf(",\"state\":");
        s_json_string(state);
        printf(",\"endpoint\":");
        s_json_string(peer->endpoint);
    }
    if (rc == 200 && counters.count) {
        size_t in_flight = 0;
        for (size_t i = 0; i < mine.count; i++)
            in_flight += !mine.moves[i].done;
        const shoal_counter_scope_t *node = &counters.scopes[0];
        if (options->json)
            printf(",\"claims\":%" PRIu64 ",\"running\":%" PRIu64 ",\"memory_bytes\":%" PRIu64
                   ",\"moves_in_flight\":%zu}", node->claims, node->running, node->memory_bytes, in_flight);
        else
            printf("%-12s %-8s %7" PRIu64 " %8" PRIu64 " %10.1f %6zu   %s\n", peer->node_id, state, node->claims,
                   node->running, node->memory_bytes / S_MIB, in_flight, peer->endpoint);
        //  The moves each source holds, kept for the moves section.
        for (size_t i = 0; i < mine.count; i++) {
            if (strcmp(mine.moves[i].from, peer->node_id) != 0)
                continue;
            moves->moves = (shoal_move_info_t *) shoal_realloc(moves->moves, (moves->count + 1) * sizeof *moves->moves);
            moves->moves[moves->count++] = mine.moves[i];
            memset(&mine.moves[i], 0, sizeof mine.moves[i]);
        }
    }
    else {
        const char *why = client ? shoal_client_error(client) : (error ? error : "cannot connect");
        if (options->json) {
            printf(",\"error\":");
            s_json_string(why);
            printf("}");
        }
        else
            printf("%-12s %-8s %s\n", peer->node_id, state, why);
    }
    for (size_t i = 0; i < mine.count; i++)
        if (mine.moves[i].claim_id)
            shoal_move_info_clear(&mine.moves[i]);
    free(mine.moves);
    shoal_counters_clear(&counters);
    shoal_client_destroy(&client);
    free(error);
}

//  A move's progress in percent (of its memory, at most 100).
static double
s_top_progress(const shoal_move_info_t *move)
{
    double part = move->memory_bytes ? 100.0 * (double) move->bytes_sent / (double) move->memory_bytes : 0;
    return part > 100 ? 100 : part;
}

//  One frame: the mesh as the connected node sees it, each node's row, the
//  moves in flight, and the peers with their lag. With --json, one object
//  with the same: "nodes", "moves" (in flight) and "peers".
static int
s_top_frame(shoal_client_t *client, const s_options_t *options)
{
    shoal_status_t status;
    int rc = shoal_client_status(client, &status);
    if (rc != 200)
        return rc;
    shoal_peer_list_t peers = { 0 };
    rc = shoal_client_peers(client, &peers);
    if (rc != 200) {
        shoal_status_clear(&status);
        return rc;
    }
    uint64_t now = (uint64_t) zclock_time();
    if (options->json) {
        printf("{\"ok\":true,\"node_id\":");
        s_json_string(status.node_id);
        printf(",\"endpoint\":");
        s_json_string(status.endpoint);
        printf(",\"time_ms\":%" PRIu64 ",\"nodes\":[", now);
    }
    else {
        char date[64];
        printf("shoal top: %s at %s, %s, %zu node(s)\n\n", status.node_id, status.endpoint,
               s_date(now, date, sizeof date), peers.count);
        printf("%-12s %-8s %7s %8s %10s %6s   %s\n", "NODE", "STATE", "CLAIMS", "RUNNING", "MEMORY_MIB", "MOVES",
               "ENDPOINT");
    }
    shoal_move_list_t moves = { 0 };
    for (size_t i = 0; i < peers.count; i++) {
        const shoal_peer_info_t *peer = &peers.peers[i];
        if (peer->self || strcmp(peer->state, "alive") == 0)
            s_top_node(options, peer, &moves, i == 0);
        else
        if (options->json) {
            printf("%s{\"node_id\":", i ? "," : "");
            s_json_string(peer->node_id);
            printf(",\"state\":");
            s_json_string(peer->state);
            printf(",\"endpoint\":");
            s_json_string(peer->endpoint);
            printf("}");
        }
        else
            printf("%-12s %-8s\n", peer->node_id, peer->state);
    }
    if (options->json)
        printf("],\"moves\":[");
    else
        printf("\nMOVES IN FLIGHT\n%-20s %-12s %-12s %-10s %5s %10s %6s %10s\n", "CLAIM", "FROM", "TO", "PHASE",
               "ROUND", "SENT_MIB", "DONE%", "RATE_MB/S");
    size_t shown = 0;
    for (size_t i = 0; i < moves.count; i++) {
        const shoal_move_info_t *move = &moves.moves[i];
        if (!move->done && options->json) {
            printf("%s{\"claim_id\":", shown ? "," : "");
            s_json_string(move->claim_id);
            printf(",\"from\":");
            s_json_string(move->from);
            printf(",\"to\":");
            s_json_string(move->to);
            printf(",\"phase\":");
            s_json_string(move->phase);
            printf(",\"round\":%u,\"bytes_sent\":%" PRIu64 ",\"memory_bytes\":%" PRIu64
                   ",\"progress_percent\":%.1f,\"rate\":%" PRIu64 "}", move->round, move->bytes_sent,
                   move->memory_bytes, s_top_progress(move), move->rate);
            shown++;
        }
        else
        if (!move->done) {
            printf("%-20s %-12s %-12s %-10s %5u %10.1f %6.0f %10.1f\n", move->claim_id, move->from, move->to,
                   move->phase, move->round, move->bytes_sent / S_MIB, s_top_progress(move), move->rate / 1e6);
            shown++;
        }
        shoal_move_info_clear(&moves.moves[i]);
    }
    free(moves.moves);
    if (options->json)
        printf("],\"peers\":[");
    else {
        if (!shown)
            printf("(none)\n");
        printf("\nPEERS OF %s\n%-12s %-8s %12s %10s\n", status.node_id, "NODE", "STATE", "HEARD_MS_AGO", "LAG");
    }
    bool first = true;
    for (size_t i = 0; i < peers.count; i++) {
        const shoal_peer_info_t *peer = &peers.peers[i];
        if (peer->self)
            continue;
        if (options->json) {
            printf("%s{\"node_id\":", first ? "" : ",");
            s_json_string(peer->node_id);
            printf(",\"state\":");
            s_json_string(peer->state);
            printf(",\"last_heard_ms\":%" PRIu64 ",\"lag\":%" PRIu64 "}", peer->last_heard_ms, peer->lag);
        }
        else
            printf("%-12s %-8s %12" PRIu64 " %10" PRIu64 "\n", peer->node_id, peer->state, peer->last_heard_ms,
                   peer->lag);
        first = false;
    }
    if (options->json)
        printf("]}\n");
    fflush(stdout);
    shoal_peer_list_clear(&peers);
    shoal_status_clear(&status);
    return 200;
}

static int
s_cmd_top(int argc, char **argv, const s_options_t *options)
{
    bool once = false;
    long interval = S_TOP_INTERVAL_MS;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (streq(argv[i], "--once"))
            once = true;
        else
        if (streq(argv[i], "--interval") && i + 1 < argc && (interval = strtol(argv[i + 1], &end, 10)) > 0 && !*end)
            i++;
        else {
            fprintf(stderr, "shoalctl: top: '%s': expected --once or --interval MS\n", argv[i]);
            return S_EXIT_USAGE;
        }
    }
    //  JSON is for scripts: one frame.
    if (options->json)
        once = true;
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int code = S_EXIT_OK;
    while (!zsys_interrupted) {
        //  Refreshed in place: home and clear, then the frame.
        if (!once)
            printf("\033[H\033[2J");
        int rc = s_top_frame(client, options);
        if (rc != 200) {
            code = s_failed(client, rc, options);
            break;
        }
        if (once)
            break;
        int64_t next = zclock_mono() + interval;
        while (!zsys_interrupted && zclock_mono() < next)
            zclock_sleep(S_TOP_STEP_MS);
    }
    shoal_client_destroy(&client);
    return code;
}

//  shoalctl object

static void
s_json_object(const shoal_object_t *object)
{
    printf("{\"tenant\":");
    s_json_string(object->tenant);
    printf(",\"name\":");
    s_json_string(object->name);
    printf(",\"storage_id\":\"%016" PRIx64 "\",\"size\":%" PRIu64 ",\"checksum\":\"%s\",\"created_ms\":%" PRIu64
           ",\"comment\":", object->storage_id, object->size, object->checksum, object->created_ms);
    s_json_string(object->comment);
    printf(",\"memory_bytes\":%" PRIu64 ",\"disk_bytes\":%" PRIu64, object->memory_bytes, object->disk_bytes);
    printf(",\"instances\":[");
    for (size_t i = 0; i < object->count; i++) {
        const shoal_object_instance_t *instance = &object->instances[i];
        printf("%s{\"instance_id\":\"%016" PRIx64 "\",\"node\":", i ? "," : "", instance->instance_id);
        s_json_string(instance->node);
        printf(",\"uri\":");
        s_json_string(instance->uri);
        printf(",\"endpoint\":");
        s_json_string(instance->endpoint);
        printf(",\"state\":\"%s\",\"size\":%" PRIu64 ",\"checksum\":\"%s\",\"modified_ms\":%" PRIu64
               ",\"readers\":%" PRIu64 ",\"writer\":", instance->state, instance->size, instance->checksum,
               instance->modified_ms, instance->readers);
        s_json_string(instance->writer);
        printf(",\"waiter\":");
        s_json_string(instance->waiter);
        printf("}");
    }
    printf("]}");
}

static void
s_print_object(const shoal_object_t *object, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"object\":");
        s_json_object(object);
        printf("}\n");
        return;
    }
    char date[S_DATE_MAX];
    printf("name:      %s\n", object->name);
    printf("tenant:    %s\n", object->tenant);
    printf("storage:   %016" PRIx64 "\n", object->storage_id);
    printf("size:      %" PRIu64 " bytes\n", object->size);
    printf("checksum:  %s\n", object->checksum);
    printf("created:   %s\n", s_date(object->created_ms, date, sizeof date));
    if (*object->comment)
        printf("comment:   %s\n", object->comment);
    if (object->memory_bytes)
        printf("guest:     an image of %" PRIu64 " bytes of memory, %" PRIu64 " of disk\n", object->memory_bytes,
               object->disk_bytes);
    printf("instances: %zu\n", object->count);
    for (size_t i = 0; i < object->count; i++) {
        const shoal_object_instance_t *instance = &object->instances[i];
        printf("  %016" PRIx64 "  %-16s %-8s readers %" PRIu64 "%s%s%s%s  %s\n", instance->instance_id,
               instance->node, instance->state, instance->readers, *instance->writer ? ", writer " : "",
               instance->writer, *instance->waiter ? ", waiting writer " : "", instance->waiter, instance->uri);
    }
}

//  Downloads NAME into PATH through an open, reads and a close.
static int
s_object_download(shoal_client_t *client, const char *tenant, const char *name, const char *path,
                  const s_options_t *options)
{
    shoal_object_open_t open;
    int rc = shoal_client_object_open(client, tenant, name, NULL, false, &open);
    if (rc != 200)
        return s_failed(client, rc, options);
    FILE *out = streq(path, "-") ? stdout : fopen(path, "wb");
    if (!out) {
        fprintf(stderr, "shoalctl: cannot write %s: %s\n", path, strerror(errno));
        shoal_client_object_close(client, &open);
        shoal_object_open_clear(&open);
        return S_EXIT_FAILED;
    }
    size_t chunk = 1024 * 1024;
    uint8_t *buffer = (uint8_t *) shoal_malloc(chunk);
    uint64_t offset = 0;
    while (rc == 200 && offset < open.size) {
        size_t got = 0;
        rc = shoal_client_object_read(client, &open, offset, buffer, chunk, &got);
        if (rc == 200 && got == 0)
            break;
        if (rc == 200 && fwrite(buffer, 1, got, out) != got)
            rc = -1;
        offset += got;
    }
    free(buffer);
    bool wrote = out == stdout ? fflush(out) == 0 : fclose(out) == 0;
    int code = S_EXIT_OK;
    if (rc != 200)
        code = s_failed(client, rc, options);
    else
    if (!wrote || offset != open.size) {
        fprintf(stderr, "shoalctl: %s: %" PRIu64 " of %" PRIu64 " bytes written\n", path, offset, open.size);
        code = S_EXIT_FAILED;
    }
    else
    if (out != stdout) {
        if (options->json)
            printf("{\"ok\":true,\"path\":\"%s\",\"bytes\":%" PRIu64 ",\"instance_id\":\"%016" PRIx64 "\"}\n", path,
                   offset, open.instance_id);
        else
            printf("wrote %" PRIu64 " bytes of %s to %s (instance %016" PRIx64 " on %s)\n", offset, name, path,
                   open.instance_id, open.node);
    }
    shoal_client_object_close(client, &open);
    shoal_object_open_clear(&open);
    return code;
}

//  object add NAME FILE [--update] [--comment TEXT] | get NAME [-o FILE] | ls | rm NAME |
//  replicate NAME --copies N | open NAME [--holder H] [--verify] | close IID --holder H [--at ENDPOINT] |
//  ids storage|instance [--count N], each with [--tenant ORG/PROJECT]
static int
s_cmd_object(int argc, char **argv, const s_options_t *options)
{
    const char *verb = argc > 1 ? argv[1] : "";
    const char *tenant = NULL, *comment = NULL, *output = NULL, *holder = NULL, *at = NULL;
    bool update = false, verify = false, repair = false, usage = false;
    long copies = 0, count = 1;
    const char *words[2] = { NULL, NULL };
    int positional = 0;
    for (int i = 2; i < argc && !usage; i++) {
        if (streq(argv[i], "--tenant") && i + 1 < argc)
            tenant = argv[++i];
        else
        if (streq(argv[i], "--comment") && i + 1 < argc)
            comment = argv[++i];
        else
        if ((streq(argv[i], "-o") || streq(argv[i], "--output")) && i + 1 < argc)
            output = argv[++i];
        else
        if (streq(argv[i], "--holder") && i + 1 < argc)
            holder = argv[++i];
        else
        if (streq(argv[i], "--at") && i + 1 < argc)
            at = argv[++i];
        else
        if (streq(argv[i], "--update"))
            update = true;
        else
        if (streq(argv[i], "--verify"))
            verify = true;
        else
        if (streq(argv[i], "--repair"))
            repair = true;
        else
        if ((streq(argv[i], "--copies") || streq(argv[i], "--count")) && i + 1 < argc) {
            char *end = NULL;
            long value = strtol(argv[++i], &end, 10);
            usage = !end || *end || value <= 0 || value > 10000;
            if (streq(argv[i - 1], "--copies"))
                copies = value;
            else
                count = value;
        }
        else
        if (argv[i][0] != '-' && positional < 2)
            words[positional++] = argv[i];
        else
            usage = true;
    }
    int wanted = streq(verb, "add") ? 2 : streq(verb, "ls") || streq(verb, "check") ? 0 : 1;
    bool known = streq(verb, "check") || streq(verb, "add") || streq(verb, "get") || streq(verb, "ls") || streq(verb, "rm")
              || streq(verb, "replicate") || streq(verb, "open") || streq(verb, "close") || streq(verb, "ids");
    if (!known || usage || positional != wanted || (streq(verb, "replicate") && !copies)
    ||  (streq(verb, "close") && !holder) || (repair && !streq(verb, "check"))
    ||  (streq(verb, "ids") && !streq(words[0], "storage") && !streq(words[0], "instance"))) {
        fprintf(stderr, "shoalctl: usage: object add NAME FILE [--update] [--comment TEXT] | get NAME [-o FILE] | "
                "ls | rm NAME | replicate NAME --copies N | open NAME [--holder H] [--verify] | close IID --holder H "
                "[--at ENDPOINT] | ids storage|instance [--count N] | check [--repair]; each with [--tenant ORG/PROJECT]\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect(options);
    if (!client)
        return S_EXIT_FAILED;
    int rc = 200, code = S_EXIT_OK;
    if (streq(verb, "add") || streq(verb, "get")) {
        shoal_object_t object;
        if (streq(verb, "get") && output) {
            code = s_object_download(client, tenant, words[0], output, options);
            shoal_client_destroy(&client);
            return code;
        }
        rc = streq(verb, "add") ? shoal_client_object_add_file(client, tenant, words[0], words[1], update, comment,
                                                               &object)
           : shoal_client_object_get(client, tenant, words[0], &object);
        if (rc == 200) {
            s_print_object(&object, options);
            shoal_object_clear(&object);
        }
    }
    else
    if (streq(verb, "ls")) {
        shoal_object_t *objects = NULL;
        size_t found = 0;
        rc = shoal_client_object_list(client, tenant, &objects, &found);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"objects\":[");
            for (size_t i = 0; i < found; i++) {
                printf("%s", i ? "," : "");
                s_json_object(&objects[i]);
            }
            printf("]}\n");
        }
        else
        if (rc == 200) {
            printf("%-16s %-14s %12s %-9s %s\n", "STORAGE", "TENANT", "SIZE", "INSTANCES", "NAME");
            for (size_t i = 0; i < found; i++)
                printf("%016" PRIx64 " %-14s %12" PRIu64 " %-9zu %s\n", objects[i].storage_id, objects[i].tenant,
                       objects[i].size, objects[i].count, objects[i].name);
        }
        shoal_objects_clear(&objects, found);
    }
    else
    if (streq(verb, "check")) {
        shoal_object_finding_t *findings = NULL;
        size_t found = 0;
        rc = shoal_client_object_check(client, repair, &findings, &found);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"findings\":[");
            for (size_t i = 0; i < found; i++) {
                printf("%s{\"key\":", i ? "," : "");
                s_json_string(findings[i].key);
                printf(",\"what\":");
                s_json_string(findings[i].what);
                printf(",\"repaired\":%s}", findings[i].repaired ? "true" : "false");
            }
            printf("]}\n");
        }
        else
        if (rc == 200) {
            for (size_t i = 0; i < found; i++)
                printf("%s%s: %s\n", findings[i].repaired ? "repaired " : "", findings[i].key, findings[i].what);
            printf("%zu finding(s)\n", found);
        }
        shoal_object_findings_clear(&findings, found);
        if (rc == 200 && found && !repair)
            code = S_EXIT_FAILED;
    }
    else
    if (streq(verb, "rm")) {
        rc = shoal_client_object_remove(client, tenant, words[0]);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"message\":");
            s_json_string(shoal_client_error(client));
            printf("}\n");
        }
        else
        if (rc == 200)
            printf("%s\n", shoal_client_error(client));
    }
    else
    if (streq(verb, "replicate")) {
        uint32_t held = 0;
        rc = shoal_client_object_replicate(client, tenant, words[0], (uint32_t) copies, &held);
        if (rc == 200 && options->json)
            printf("{\"ok\":true,\"copies\":%u}\n", held);
        else
        if (rc == 200)
            printf("%u node(s) hold %s\n", held, words[0]);
    }
    else
    if (streq(verb, "open")) {
        shoal_object_open_t open;
        rc = shoal_client_object_open(client, tenant, words[0], holder, verify, &open);
        if (rc == 200 && options->json) {
            printf("{\"ok\":true,\"instance_id\":\"%016" PRIx64 "\",\"storage_id\":\"%016" PRIx64 "\",\"size\":%"
                   PRIu64 ",\"holder\":", open.instance_id, open.storage_id, open.size);
            s_json_string(open.holder);
            printf(",\"node\":");
            s_json_string(open.node);
            printf(",\"endpoint\":");
            s_json_string(open.endpoint);
            printf("}\n");
        }
        else
        if (rc == 200)
            printf("opened instance %016" PRIx64 " of %s on %s (holder %s; close it with: object close %016" PRIx64
                   " --holder %s --at %s)\n", open.instance_id, words[0], open.node, open.holder, open.instance_id,
                   open.holder, open.endpoint);
        if (rc == 200)
            shoal_object_open_clear(&open);
    }
    else
    if (streq(verb, "close")) {
        char *end = NULL;
        uint64_t iid = strtoull(words[0], &end, 16);
        if (!end || *end || !iid) {
            fprintf(stderr, "shoalctl: object close: '%s' is no instance id (16 hex digits)\n", words[0]);
            shoal_client_destroy(&client);
            return S_EXIT_USAGE;
        }
        rc = shoal_client_object_close_instance(client, at, iid, holder);
        if (rc == 200)
            printf(options->json ? "{\"ok\":true}\n" : "closed\n");
    }
    else {
        uint64_t *ids = (uint64_t *) shoal_calloc((size_t) count, sizeof *ids);
        rc = shoal_client_object_ids(client, words[0], (size_t) count, ids);
        if (rc == 200) {
            printf(options->json ? "{\"ok\":true,\"ids\":[" : "");
            for (long i = 0; i < count; i++)
                printf(options->json ? "%s%" PRIu64 : "%s%016" PRIx64, options->json ? (i ? "," : "") : "", ids[i]),
                printf(options->json ? "" : "\n");
            printf(options->json ? "]}\n" : "");
        }
        free(ids);
    }
    if (rc != 200)
        code = s_failed(client, rc, options);
    shoal_client_destroy(&client);
    return code;
}

//  Runs the command at ARGV[optind].
//  A client to node NODE_ID: the connected node when it is that node, else
//  NODE_ID's endpoint as the connected node knows it. NULL on failure
//  (said on stderr).
static shoal_client_t *
s_connect_node(const s_options_t *options, const char *node_id)
{
    shoal_client_t *client = s_connect(options);
    if (!client)
        return NULL;
    shoal_peer_list_t peers;
    int rc = shoal_client_peers(client, &peers);
    if (rc != 200) {
        fprintf(stderr, "shoalctl: cannot list the peers to find %s: %s\n", node_id, shoal_client_error(client));
        shoal_client_destroy(&client);
        return NULL;
    }
    const shoal_peer_info_t *found = NULL;
    for (size_t i = 0; i < peers.count; i++)
        if (streq(peers.peers[i].node_id, node_id))
            found = &peers.peers[i];
    if (!found)
        fprintf(stderr, "shoalctl: node '%s' is not in the mesh %s knows\n", node_id, options->endpoint);
    else
    if (!found->self && !streq(found->endpoint, options->endpoint)) {
        s_options_t at_node = *options;
        at_node.endpoint = found->endpoint;
        shoal_client_t *direct = s_connect(&at_node);
        shoal_client_destroy(&client);
        client = direct;
    }
    shoal_peer_list_clear(&peers);
    if (!found)
        shoal_client_destroy(&client);
    return client;
}

static void
s_json_drain(const shoal_drain_info_t *info)
{
    printf("{\"node_id\":");
    s_json_string(info->node_id);
    printf(",\"draining\":%s,\"phase\":", info->draining ? "true" : "false");
    s_json_string(info->phase);
    printf(",\"note\":");
    s_json_string(info->note);
    printf(",\"max_downtime_ms\":%u,\"parallel\":%u,\"started_ms\":%" PRIu64 ",\"total_ms\":%" PRIu64
           ",\"claims\":[", info->max_downtime_ms, info->parallel, info->started_ms, info->total_ms);
    for (size_t i = 0; i < info->count; i++) {
        const shoal_drain_claim_t *claim = &info->claims[i];
        printf("%s{\"claim_id\":", i ? "," : "");
        s_json_string(claim->claim_id);
        printf(",\"state\":");
        s_json_string(claim->state);
        printf(",\"to\":");
        s_json_string(claim->to);
        printf(",\"reason\":");
        s_json_string(claim->reason);
        printf(",\"phase\":");
        s_json_string(claim->phase);
        printf(",\"attempts\":%u,\"memory_bytes\":%" PRIu64 ",\"bytes_sent\":%" PRIu64 ",\"total_ms\":%" PRIu64
               ",\"node_downtime_ms\":%" PRIu64 "}", claim->attempts, claim->memory_bytes, claim->bytes_sent,
               claim->total_ms, claim->node_downtime_ms);
    }
    printf("]}");
}

//  The drain's counts by state.
static void
s_drain_counts(const shoal_drain_info_t *info, size_t *pending, size_t *moving, size_t *moved, size_t *stayed)
{
    *pending = *moving = *moved = *stayed = 0;
    for (size_t i = 0; i < info->count; i++) {
        const char *state = info->claims[i].state;
        *pending += streq(state, "pending");
        *moving += streq(state, "moving");
        *moved += streq(state, "moved");
        *stayed += streq(state, "stayed");
    }
}

//  One line of progress for the whole drain, redrawn in place on a terminal.
static void
s_drain_progress(const shoal_drain_info_t *info, bool tty)
{
    size_t pending, moving, moved, stayed;
    s_drain_counts(info, &pending, &moving, &moved, &stayed);
    uint64_t sent = 0;
    for (size_t i = 0; i < info->count; i++)
        if (streq(info->claims[i].state, "moving"))
            sent += info->claims[i].bytes_sent;
    fprintf(stderr, "%sdrain %-8s %zu claim(s): %zu moved, %zu moving (%.1f MB sent), %zu pending, %zu stayed  "
            "%.1f s%s", tty ? "\r" : "", info->phase, info->count, moved, moving, (double) sent / 1e6, pending,
            stayed, (double) info->total_ms / 1000, tty ? "  " : "\n");
    fflush(stderr);
}

static void
s_drain_print(const shoal_drain_info_t *info, const s_options_t *options)
{
    if (options->json) {
        printf("{\"ok\":true,\"drain\":");
        s_json_drain(info);
        printf("}\n");
        return;
    }
    size_t pending, moving, moved, stayed;
    s_drain_counts(info, &pending, &moving, &moved, &stayed);
    printf("node:     %s (%s)\ndrain:    %s after %.1f s: %zu moved, %zu moving, %zu pending, %zu stayed\n",
           info->node_id, info->draining ? "draining" : "not draining", info->phase, (double) info->total_ms / 1000,
           moved, moving, pending, stayed);
    if (*info->note)
        printf("note:     %s\n", info->note);
    for (size_t i = 0; i < info->count; i++) {
        const shoal_drain_claim_t *claim = &info->claims[i];
        if (streq(claim->state, "moved"))
            printf("  %-24s moved to %s in %" PRIu64 " ms, downtime %" PRIu64 " ms\n", claim->claim_id, claim->to,
                   claim->total_ms, claim->node_downtime_ms);
        else
        if (streq(claim->state, "moving"))
            printf("  %-24s moving to %s: %s, %.1f MB sent\n", claim->claim_id, claim->to, claim->phase,
                   (double) claim->bytes_sent / 1e6);
        else
            printf("  %-24s %s%s%s\n", claim->claim_id, claim->state, *claim->reason ? ": " : "", claim->reason);
    }
}

//  drain NODE [--max-downtime-ms N] [--parallel K] [--status]; undrain NODE
static int
s_cmd_drain(int argc, char **argv, const s_options_t *options)
{
    bool undrain = streq(argv[0], "undrain");
    const char *node = argc > 1 ? argv[1] : NULL;
    long budget = 0, parallel = 0;
    bool status_only = false;
    bool usage = !node || *node == '-';
    for (int i = 2; i < argc && !usage; i++) {
        long *number = streq(argv[i], "--max-downtime-ms") ? &budget : streq(argv[i], "--parallel") ? &parallel : NULL;
        if (!undrain && streq(argv[i], "--status"))
            status_only = true;
        else
        if (!undrain && number && i + 1 < argc) {
            char *end;
            *number = strtol(argv[++i], &end, 10);
            if (*end || *number <= 0 || *number > INT32_MAX) {
                fprintf(stderr, "shoalctl: %s '%s': expected a positive integer\n", argv[i - 1], argv[i]);
                return S_EXIT_USAGE;
            }
        }
        else
            usage = true;
    }
    if (usage) {
        fprintf(stderr, "shoalctl: usage: drain NODE [--max-downtime-ms N] [--parallel K] | drain NODE --status | "
                        "undrain NODE\n");
        return S_EXIT_USAGE;
    }
    shoal_client_t *client = s_connect_node(options, node);
    if (!client)
        return S_EXIT_FAILED;
    shoal_drain_info_t info;
    int rc = undrain ? shoal_client_undrain(client, node, &info)
           : status_only ? shoal_client_drain_status(client, node, &info)
           : shoal_client_drain(client, node, (uint32_t) budget, (uint32_t) parallel, &info);
    if (rc != 200) {
        int code = s_failed(client, rc, options);
        shoal_client_destroy(&client);
        return code;
    }
    bool tty = isatty(STDERR_FILENO);
    while (!undrain && !status_only && streq(info.phase, "running")) {
        if (!options->json)
            s_drain_progress(&info, tty);
        zclock_sleep(200);
        shoal_drain_info_t next;
        rc = shoal_client_drain_status(client, node, &next);
        if (rc != 200) {
            if (tty && !options->json)
                fprintf(stderr, "\n");
            int code = s_failed(client, rc, options);
            shoal_drain_info_clear(&info);
            shoal_client_destroy(&client);
            return code;
        }
        shoal_drain_info_clear(&info);
        info = next;
    }
    if (tty && !options->json && !undrain && !status_only)
        fprintf(stderr, "\n");
    s_drain_print(&info, options);
    size_t pending, moving, moved, stayed;
    s_drain_counts(&info, &pending, &moving, &moved, &stayed);
    //  A drain that left claims behind did not empty the node.
    int code = !undrain && !status_only && (stayed || !streq(info.phase, "done")) ? S_EXIT_FAILED : S_EXIT_OK;
    shoal_drain_info_clear(&info);
    shoal_client_destroy(&client);
    return code;
}

static int
s_run(int argc, char *argv[], const s_options_t *options)
{
    const char *command = argv[optind];
    if (strcmp(command, "status") == 0 && optind + 1 == argc)
        return s_cmd_status(options);
    if (strcmp(command, "keygen") == 0)
        return s_cmd_keygen(argc - optind, argv + optind, options);
    if (strcmp(command, "peers") == 0)
        return s_cmd_peers(argc - optind, argv + optind, options);
    if (strcmp(command, "damage") == 0)
        return s_cmd_damage(argc - optind, argv + optind, options);
    if (strcmp(command, "claim") == 0 || strcmp(command, "lookup") == 0)
        return s_cmd_claim(argc - optind, argv + optind, options);
    if (strcmp(command, "move") == 0)
        return s_cmd_move(argc - optind, argv + optind, options);
    if (strcmp(command, "drain") == 0 || strcmp(command, "undrain") == 0)
        return s_cmd_drain(argc - optind, argv + optind, options);
    if (strcmp(command, "counters") == 0)
        return s_cmd_counters(argc - optind, argv + optind, options);
    if (strcmp(command, "fsck") == 0)
        return s_cmd_fsck(argc - optind, argv + optind, options);
    if (strcmp(command, "lease") == 0)
        return s_cmd_lease(argc - optind, argv + optind, options);
    if (strcmp(command, "lock") == 0)
        return s_cmd_lock(argc - optind, argv + optind, options);
    if (strcmp(command, "object") == 0)
        return s_cmd_object(argc - optind, argv + optind, options);
    if (strcmp(command, "watch") == 0)
        return s_cmd_watch(argc - optind, argv + optind, options);
    if (strcmp(command, "top") == 0)
        return s_cmd_top(argc - optind, argv + optind, options);
    if ((strcmp(command, "kv") == 0 || strcmp(command, "oplog") == 0) && optind + 1 < argc) {
        const char *verb = argv[optind + 1];
        s_data_args_t args;
        if (s_data_args_parse(argc - optind - 2, argv + optind + 2, &args))
            return S_EXIT_USAGE;
        if (strcmp(command, "oplog") == 0)
            return s_cmd_oplog(options, verb, &args);
        if (streq(verb, "put") || streq(verb, "get") || streq(verb, "del") || streq(verb, "scan"))
            return s_cmd_kv(options, verb, &args);
        fprintf(stderr, "shoalctl: kv: '%s' is not put, get, del or scan\n", verb);
        return S_EXIT_USAGE;
    }
    fprintf(stderr, "shoalctl: unknown command '%s'\n", command);
    s_usage(stderr);
    return S_EXIT_USAGE;
}

int
main(int argc, char *argv[])
{
    s_options_t options = {
        .endpoint = s_env_or("SHOAL_ENDPOINT", S_DEFAULT_ENDPOINT),
        .cert = s_env_or("SHOAL_CERT", NULL),
        .cluster_key = s_env_or("SHOAL_CLUSTER_KEY", S_DEFAULT_CLUSTER_KEY),
        .timeout_ms = SHOAL_DEFAULT_TIMEOUT_MS,
    };
    static const struct option long_options[] = {
        { "endpoint", required_argument, NULL, 'e' },
        { "cert", required_argument, NULL, 'c' },
        { "cluster-key", required_argument, NULL, 'k' },
        { "timeout", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    //  --json is taken wherever it stands: after the command too.
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (streq(argv[i], "--json"))
            options.json = true;
        else
            argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = NULL;
    //  '+' stops at the first command word, so commands keep their own options.
    int option;
    while ((option = getopt_long(argc, argv, "+e:c:k:t:jh", long_options, NULL)) != -1) {
        switch (option) {
            case 'e': options.endpoint = optarg; break;
            case 'c': options.cert = optarg; break;
            case 'k': options.cluster_key = optarg; break;
            case 't': {
                char *end;
                long value = strtol(optarg, &end, 10);
                if (*end || value <= 0 || value > INT32_MAX) {
                    fprintf(stderr, "shoalctl: --timeout '%s': expected milliseconds, a positive integer\n", optarg);
                    return S_EXIT_USAGE;
                }
                options.timeout_ms = (int) value;
                break;
            }
            case 'j': options.json = true; break;
            case 'h': s_usage(stdout); return S_EXIT_OK;
            default: s_usage(stderr); return S_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        s_usage(stderr);
        return S_EXIT_USAGE;
    }
    char *default_cert = NULL;
    if (!options.cert) {
        default_cert = s_default_cert();
        if (!default_cert)
            return S_EXIT_USAGE;
        options.cert = default_cert;
    }
    zsys_init();
    zsys_set_logstream(stderr);
    int code = s_run(argc, argv, &options);
    free(default_cert);
    return code;
}
