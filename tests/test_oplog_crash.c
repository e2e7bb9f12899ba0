/*  test_oplog_crash: kill -9 at random moments during 100,000 appends.

    An appender process (this program, run with --append) writes to one
    store what a node writes to its log: local writes one at a time and
    peer chains in batches, in two datasets, and acknowledges each on its
    stdout once the call returned. The test kills it with SIGKILL after a
    random number of acknowledgements, reads the ones it sent before it
    died, and opens the store as shoald does at start (the clean mark,
    whether the log is torn, a reconcile if so). The store must then equal
    a replay of the acknowledged entries:
      - every acknowledged entry is there;
      - at most the one write in flight at the kill is there besides them,
        whole (all of its batch) or not at all;
      - a full reconcile finds nothing to repair: every index key, head
        and count agrees with the entries;
      - each dataset's state equals the state a fresh store materialises
        from the same entries.
    The next appender goes on from what the store holds, until 100,000
    entries were acknowledged.

    The appender writes with the store's sync off: a kill -9 loses no
    write a process made (the kernel keeps it), so an acknowledged write
    must survive it; power loss is the store tests' concern. The kill
    points come from a seeded PRNG; SHOAL_TEST_SEED repeats a run.
*/
#include <czmq.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shoal_oplog.h"
#include "shoal_oplog_chain.h"
#include "shoal_store.h"
#include "shoal_test.h"

//  Entries acknowledged in all before the test ends.
#define CRASH_ENTRIES 100000
//  An appender is killed after this many acknowledgements, or up to
//  CRASH_KILL_SPAN more (the PRNG picks).
#define CRASH_KILL_MIN 500
#define CRASH_KILL_SPAN 6000
//  Entries of a peer batch; one operation in CRASH_PEER_SHARE is one.
#define CRASH_PEER_BATCH 25
#define CRASH_PEER_SHARE 8
#define CRASH_KEYS 97
#define CRASH_PEER "peer"
#define CRASH_SELF "self"
#define CRASH_REPLAYER "replayer"
#define CRASH_LINE_MAX (4 + CRASH_PEER_BATCH * (2 * SHOAL_HASH_SIZE + 1) + 2)
#define CRASH_PATH_MAX 4200
//  An appender that neither dies nor acknowledges within this long is hung.
#define CRASH_HANG_MS 300000

static const char *s_datasets[] = { "alpha", "beta" };
#define CRASH_DATASETS 2

// ---------------------------------------------------------------------------
//  The appender

static void
s_hex(const uint8_t *hash, char *text)
{
    sodium_bin2hex(text, 2 * SHOAL_HASH_SIZE + 1, hash, SHOAL_HASH_SIZE);
}

//  Writes LINE whole to stdout, or exits.
static void
s_ack(const char *line)
{
    size_t size = strlen(line), done = 0;
    while (done < size) {
        ssize_t wrote = write(STDOUT_FILENO, line + done, size - done);
        if (wrote <= 0)
            _exit(3);
        done += (size_t) wrote;
    }
}

//  Appends operations to the store in DIR for ever (until killed), from
//  operation number FIRST on. Each is acknowledged on stdout: "L HASH" for a
//  local write, "P HASH..." for a peer batch.
static int
s_appender(const char *dir, uint64_t first)
{
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    char *error = NULL;
    shoal_store_t *store = shoal_store_new(dir, &store_options, &error);
    if (!store) {
        fprintf(stderr, "appender: %s\n", error ? error : "the store does not open");
        return 1;
    }
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.node = CRASH_SELF;
    shoal_oplog_t *oplog = shoal_oplog_new(store, &options);
    bool clean;
    if (!oplog || shoal_oplog_take_clean_mark(oplog, &clean)) {
        fprintf(stderr, "appender: %s\n", oplog ? shoal_oplog_error(oplog) : "no oplog");
        return 1;
    }
    char line[CRASH_LINE_MAX];
    for (uint64_t op = first;; op++) {
        const char *dataset = s_datasets[op % CRASH_DATASETS];
        if (op % CRASH_PEER_SHARE == CRASH_PEER_SHARE - 1) {
            //  The peer's chain goes on from its head here, whatever the
            //  last appender acknowledged of it.
            shoal_oplog_head_t head;
            bool found;
            if (shoal_oplog_head(oplog, dataset, CRASH_PEER, &head, &found)) {
                fprintf(stderr, "appender: %s\n", shoal_oplog_error(oplog));
                return 1;
            }
            chain_t chain = { CRASH_PEER, found, { 0 } };
            uint64_t wall_ms = found ? head.stamp.wall_ms + 1 : (uint64_t) time(NULL) * 1000 - 3600000;
            if (found) {
                memcpy(chain.prev, head.hash, SHOAL_HASH_SIZE);
                free(head.node);
            }
            shoal_oplog_entry_t entries[CRASH_PEER_BATCH];
            for (size_t i = 0; i < CRASH_PEER_BATCH; i++) {
                char key[32], value[64];
                snprintf(key, sizeof key, "p%" PRIu64, (op + i) % CRASH_KEYS);
                snprintf(value, sizeof value, "peer %" PRIu64 "/%zu", op, i);
                s_entry_init(&entries[i], &chain, dataset, key,
                             i % 5 == 4 ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                             i % 5 == 4 ? NULL : value, wall_ms + i, 0);
            }
            size_t added = 0;
            if (shoal_oplog_append_batch(oplog, entries, CRASH_PEER_BATCH, &added) || added != CRASH_PEER_BATCH) {
                fprintf(stderr, "appender: peer batch %" PRIu64 ": %s (%zu added)\n", op,
                        shoal_oplog_error(oplog), added);
                return 1;
            }
            size_t used = (size_t) snprintf(line, sizeof line, "P");
            for (size_t i = 0; i < CRASH_PEER_BATCH; i++) {
                line[used++] = ' ';
                s_hex(entries[i].hash, line + used);
                used += 2 * SHOAL_HASH_SIZE;
            }
            line[used++] = '\n';
            line[used] = 0;
            s_entries_clear(entries, CRASH_PEER_BATCH);
        }
        else {
            char key[32], value[64];
            snprintf(key, sizeof key, "k%" PRIu64, op % CRASH_KEYS);
            snprintf(value, sizeof value, "local %" PRIu64, op);
            bool deleted = op % 13 == 0;
            shoal_oplog_entry_t entry;
            if (shoal_oplog_write(oplog, dataset, key, deleted ? SHOAL_OPLOG_DELETE : SHOAL_OPLOG_PUT,
                                  deleted ? NULL : value, deleted ? 0 : strlen(value), &entry)) {
                fprintf(stderr, "appender: write %" PRIu64 ": %s\n", op, shoal_oplog_error(oplog));
                return 1;
            }
            line[0] = 'L';
            line[1] = ' ';
            s_hex(entry.hash, line + 2);
            strcpy(line + 2 + 2 * SHOAL_HASH_SIZE, "\n");
            shoal_oplog_entry_codec.clear(&entry);
        }
        s_ack(line);
    }
}

// ---------------------------------------------------------------------------
//  The test

//  What the appenders acknowledged: hashes (hex) in a set, and counts.
typedef struct {
    zhashx_t *acked;            //  hex hash -> non-NULL
    size_t entries;             //  entries acknowledged in all
    uint64_t operations;        //  operations acknowledged in all (the next one's number)
} acks_t;

//  Reads one acknowledgement LINE into ACKS. Returns 0, or -1 when it does
//  not parse.
static int
s_acks_add(acks_t *acks, char *line)
{
    if ((line[0] != 'L' && line[0] != 'P') || line[1] != ' ')
        return -1;
    size_t count = 0;
    for (char *hash = line + 2; *hash && *hash != '\n'; hash += 2 * SHOAL_HASH_SIZE + 1) {
        if (strlen(hash) < 2 * SHOAL_HASH_SIZE)
            return -1;
        char text[2 * SHOAL_HASH_SIZE + 1];
        memcpy(text, hash, 2 * SHOAL_HASH_SIZE);
        text[2 * SHOAL_HASH_SIZE] = 0;
        zhashx_insert(acks->acked, text, (void *) 1);
        count++;
        if (hash[2 * SHOAL_HASH_SIZE] != ' ')
            break;
    }
    if (count != (line[0] == 'L' ? 1 : CRASH_PEER_BATCH))
        return -1;
    acks->entries += count;
    acks->operations++;
    return 0;
}

//  Runs an appender on DIR from ACKS->operations on, kills it with SIGKILL
//  after KILL_AFTER acknowledgements, and reads every acknowledgement it
//  sent into ACKS. Returns 0 once it died by the kill, or -1.
static int
s_append_and_kill(const char *dir, acks_t *acks, uint64_t kill_after)
{
    int out[2];
    if (pipe(out))
        return -1;
    char first[32];
    snprintf(first, sizeof first, "%" PRIu64, acks->operations);
    char self[CRASH_PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0)
        return -1;
    self[length] = 0;
    char *argv[] = { self, (char *) "--append", (char *) dir, first, NULL };
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    pid_t pid;
    extern char **environ;
    int spawned = posix_spawn(&pid, self, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (spawned) {
        close(out[0]);
        return -1;
    }
    FILE *stream = fdopen(out[0], "r");
    char line[CRASH_LINE_MAX + 2];
    uint64_t seen = 0;
    bool killed = false, bad = false;
    //  Past the kill, the lines it wrote before it died are still read.
    while (fgets(line, sizeof line, stream)) {
        //  A line cut by the kill was never a whole acknowledgement.
        if (!strchr(line, '\n'))
            break;
        if (s_acks_add(acks, line)) {
            bad = true;
            break;
        }
        if (++seen == kill_after && !killed) {
            kill(pid, SIGKILL);
            killed = true;
        }
    }
    fclose(stream);
    if (!killed)
        kill(pid, SIGKILL);
    int code = shoal_test_wait(pid, CRASH_HANG_MS);
    if (bad)
        fprintf(stderr, "an acknowledgement did not parse: %s\n", line);
    return !bad && killed && code == 128 + SIGKILL ? 0 : -1;
}

//  Opens DIR as shoald opens its store at start: the clean mark, and a
//  reconcile when the log may be torn. *CLEAN receives the mark.
static shoal_oplog_t *
s_start(const char *dir, const char *node, shoal_store_t **store_p, bool *clean)
{
    shoal_store_options_t store_options;
    shoal_store_options_default(&store_options);
    store_options.sync = false;
    *store_p = shoal_store_new(dir, &store_options, NULL);
    if (!*store_p)
        return NULL;
    shoal_oplog_options_t options;
    shoal_oplog_options_default(&options);
    options.sync = false;
    options.node = node;
    shoal_oplog_t *oplog = shoal_oplog_new(*store_p, &options);
    bool torn = false;
    const char *why = "";
    if (oplog && (shoal_oplog_take_clean_mark(oplog, clean) || shoal_oplog_torn(oplog, &torn, &why)
                  || (torn && shoal_oplog_reconcile(oplog, NULL)))) {
        fprintf(stderr, "start: %s\n", shoal_oplog_error(oplog));
        shoal_oplog_destroy(&oplog);
    }
    return oplog;
}

static void
s_stop(shoal_oplog_t **oplog_p, shoal_store_t **store_p)
{
    shoal_oplog_destroy(oplog_p);
    shoal_store_destroy(store_p);
}

//  The store in DIR after a kill against ACKS: see the header. The write in
//  flight, when it is there, joins ACKS: the next appender goes on from it.
static void
s_check_after_kill(const char *dir, acks_t *acks, size_t round)
{
    shoal_store_t *store = NULL;
    bool clean = true;
    shoal_oplog_t *oplog = s_start(dir, CRASH_SELF, &store, &clean);
    CHECK_MSG(oplog, "round %zu: the store does not start", round);
    CHECK_MSG(!clean, "round %zu: a killed appender left the clean mark", round);

    //  Every acknowledged entry is there; what else is there is at most the
    //  write in flight, whole.
    size_t held = 0, unacked = 0, missing = 0;
    shoal_oplog_list_t lists[CRASH_DATASETS];
    memset(lists, 0, sizeof lists);
    for (size_t d = 0; d < CRASH_DATASETS; d++) {
        CHECK_INT(shoal_oplog_export(oplog, s_datasets[d], &lists[d]), 0);
        for (size_t i = 0; i < lists[d].count; i++) {
            char text[2 * SHOAL_HASH_SIZE + 1];
            s_hex(lists[d].entries[i].hash, text);
            held++;
            if (!zhashx_lookup(acks->acked, text)) {
                zhashx_insert(acks->acked, text, (void *) 2);
                unacked++;
            }
        }
    }
    missing = acks->entries + unacked - held;
    acks->entries += unacked;
    CHECK_MSG(missing == 0, "round %zu: %zu acknowledged entries are missing", round, missing);
    CHECK_MSG(unacked == 0 || unacked == 1 || unacked == CRASH_PEER_BATCH,
              "round %zu: %zu entries not acknowledged are held: more than the one write in flight, or "
              "part of it", round, unacked);

    //  Nothing for a full reconcile to repair, and counts as a walk finds them.
    shoal_oplog_repair_t repair = { 0 };
    CHECK_INT(shoal_oplog_reconcile(oplog, &repair), 0);
    CHECK_MSG(repair.corrupt + repair.index_written + repair.index_removed + repair.heads_written
              + repair.heads_removed + repair.counts_written == 0,
              "round %zu: reconcile repaired %zu corrupt, %zu/%zu index keys, %zu/%zu heads, %zu counts",
              round, repair.corrupt, repair.index_written, repair.index_removed, repair.heads_written,
              repair.heads_removed, repair.counts_written);
    CHECK_INT(repair.entries, held);

    //  The state a fresh store materialises from the same entries.
    char replay_dir[CRASH_PATH_MAX];
    snprintf(replay_dir, sizeof replay_dir, "%s/replay-%zu", shoal_test_dir, round);
    shoal_store_t *replay_store = NULL;
    bool replay_clean;
    shoal_oplog_t *replay = s_start(replay_dir, CRASH_REPLAYER, &replay_store, &replay_clean);
    CHECK(replay);
    for (size_t d = 0; d < CRASH_DATASETS; d++) {
        size_t added = 0;
        CHECK_INT(shoal_oplog_append_batch(replay, lists[d].entries, lists[d].count, &added), 0);
        CHECK_INT(added, lists[d].count);
        size_t size, replay_size;
        char *state = s_family_dump(store, SHOAL_CF_KV, s_datasets[d], &size);
        char *replayed = s_family_dump(replay_store, SHOAL_CF_KV, s_datasets[d], &replay_size);
        bool same = state && replayed && size == replay_size && memcmp(state, replayed, size) == 0;
        free(state);
        free(replayed);
        CHECK_MSG(same, "round %zu: the state of %s differs from a replay of its entries", round,
                  s_datasets[d]);
        shoal_oplog_counts_t counts, recount;
        CHECK_INT(shoal_oplog_counts(oplog, s_datasets[d], &counts), 0);
        CHECK_INT(shoal_oplog_recount(oplog, s_datasets[d], &recount), 0);
        CHECK_INT(counts.entries, recount.entries);
        CHECK_INT(counts.live, recount.live);
        shoal_oplog_list_clear(&lists[d]);
    }
    s_stop(&replay, &replay_store);
    shoal_test_rmrf(replay_dir);
    s_stop(&oplog, &store);
}

static void
test_kill_during_appends(void)
{
    uint64_t state = shoal_test_seed();
    char dir[CRASH_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/db", shoal_test_dir);
    acks_t acks = { .acked = zhashx_new() };
    size_t round = 0;
    while (acks.entries < CRASH_ENTRIES && !shoal_test_failed) {
        round++;
        uint64_t kill_after = CRASH_KILL_MIN + shoal_test_random(&state) % CRASH_KILL_SPAN;
        int killed = s_append_and_kill(dir, &acks, kill_after);
        CHECK_MSG(killed == 0, "round %zu: the appender did not run until killed", round);
        printf("     round %zu: killed after %" PRIu64 " acknowledgements, %zu entries acknowledged in all\n",
               round, kill_after, acks.entries);
        s_check_after_kill(dir, &acks, round);
    }
    zhashx_destroy(&acks.acked);
    CHECK(round >= 3);
}

int
main(int argc, char *argv[])
{
    if (argc == 4 && streq(argv[1], "--append"))
        return s_appender(argv[2], strtoull(argv[3], NULL, 10));
    SHOAL_TEST(test_kill_during_appends);
    return shoal_test_finish();
}
