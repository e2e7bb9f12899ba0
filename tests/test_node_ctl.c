/*  test_node_ctl: shoalctl as a person at a terminal uses it, against a
    real shoald: the admin key found at its default place, output that ends
    its line, --json wherever it is typed, and answers that say what
    happened (a released claim, no moves, a prune's date). */
#include "shoal_test.h"
#include "shoal_node_fixture.h"

#include <czmq.h>
#include <signal.h>
#include <unistd.h>

#define S_CTL_TIMEOUT_MS 20000
#define S_ARGS_MAX 16
//  The node's name is also its data directory's: shoalctl's default one.
#define S_NODE_NAME "shoal-data"

//  Runs shoalctl in the test directory with ARGS (NULL-terminated) after
//  the node's endpoint and cluster key, with no --cert unless ARGS has
//  one: the admin key is found at its default place. Returns the exit code
//  and *OUTPUT_P.
static int
s_ctl(const shoal_node_fixture_t *node, char **output_p, const char *const args[])
{
    char *argv[S_ARGS_MAX + 6] = { (char *) shoal_test_program("shoalctl"), "-e", (char *) node->endpoint };
    int used = 3;
    for (int i = 0; args[i] && i < S_ARGS_MAX; i++)
        argv[used++] = (char *) args[i];
    argv[used] = NULL;
    char cwd[4400];
    if (!getcwd(cwd, sizeof cwd) || chdir(shoal_test_dir) != 0)
        return -1;
    int code = shoal_test_capture(argv, NULL, S_CTL_TIMEOUT_MS, output_p);
    if (chdir(cwd) != 0)
        return -1;
    return code;
}

#define S_CTL(node, output_p, ...) s_ctl(node, output_p, (const char *const[]) { __VA_ARGS__, NULL })

static void
test_shoalctl_for_people(void)
{
    shoal_node_fixture_t node;
    shoal_node_fixture_init(&node, S_NODE_NAME, 0);
    CHECK(shoal_node_fixture_start(&node, NULL));
    char *status = NULL, *put = NULL, *get = NULL, *get_json = NULL, *moves = NULL, *prune = NULL;
    char *created = NULL, *released = NULL, *lookup = NULL;
    int status_code = S_CTL(&node, &status, "status");
    int put_code = S_CTL(&node, &put, "kv", "put", "-d", "app", "greeting", "hello");
    int get_code = S_CTL(&node, &get, "kv", "get", "-d", "app", "greeting");
    int get_json_code = S_CTL(&node, &get_json, "kv", "get", "-d", "app", "greeting", "--json");
    int moves_code = S_CTL(&node, &moves, "move", "ls");
    int prune_code = S_CTL(&node, &prune, "oplog", "prune", "--before", "7d");
    int created_code = S_CTL(&node, &created, "claim", "create", "--tenant", "acme/web", "--memory", "8M",
                             "--id", "web-1");
    int released_code = S_CTL(&node, &released, "claim", "release", "web-1");
    int lookup_code = S_CTL(&node, &lookup, "lookup", "web-1");
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK_MSG(status_code == 0 && shoal_test_contains(status, "you are   admin"), "status: %s", status);
    CHECK_MSG(put_code == 0, "%s", put);
    //  The value and a newline, nothing else.
    CHECK_STR(get, "hello\n");
    CHECK_INT(get_code, 0);
    CHECK_MSG(get_json_code == 0 && shoal_test_contains(get_json, "\"value\":\"hello\""), "%s", get_json);
    CHECK_INT(moves_code, 0);
    CHECK_STR(moves, "no move records on this node\n");
    //  A date, not milliseconds since the epoch.
    CHECK_MSG(prune_code == 0 && shoal_test_contains(prune, "pruned 0 entries stamped at or before 2")
              && shoal_test_contains(prune, " UTC\n"), "%s", prune);
    CHECK_MSG(created_code == 0, "%s", created);
    CHECK_MSG(released_code == 0, "%s", released);
    CHECK_MSG(lookup_code == 1 && shoal_test_contains(lookup, "claim 'web-1' was released"), "%d: %s",
              lookup_code, lookup);
    free(status);
    free(put);
    free(get);
    free(get_json);
    free(moves);
    free(prune);
    free(created);
    free(released);
    free(lookup);
}

//  Copies the public half of FROM to TO.
static bool
s_copy_public(const char *from, const char *to)
{
    zcert_t *cert = zcert_load(from);
    bool ok = cert && zcert_save_public(cert, to) == 0;
    zcert_destroy(&cert);
    return ok;
}

//  Each node's admin key is named after the node: admitting another node's
//  admin key adds a file beside this node's own and replaces nothing; in
//  the keys directory, two admin keys make shoalctl ask which one; a data
//  directory from before (admin.cert) still works.
static void
test_admin_key_named_after_its_node(void)
{
    shoal_node_fixture_t node, other;
    shoal_node_fixture_init(&node, S_NODE_NAME, 0);
    shoal_node_fixture_init(&other, "n2", 0);
    CHECK(shoal_node_fixture_start(&node, NULL));
    CHECK(shoal_node_fixture_start(&other, NULL));
    int other_stop = shoal_test_stop(other.pid, SIGTERM);
    CHECK_INT(other_stop, 0);
    char mine[4400], admitted[4400], copied[4400], legacy[4400];
    snprintf(mine, sizeof mine, "%s/clients/admin-%s.cert", node.data_dir, S_NODE_NAME);
    snprintf(admitted, sizeof admitted, "%s/clients/admin-n2.cert", node.data_dir);
    bool own_public = access(mine, R_OK) == 0 && access(node.admin_cert, R_OK) == 0;
    bool copy_ok = s_copy_public(other.admin_cert, admitted);
    //  Both admins reach the node: the copy replaced nothing.
    char *by_mine = NULL, *by_other = NULL, *ambiguous = NULL, *by_legacy = NULL;
    usleep(500000);
    int mine_code = S_CTL(&node, &by_mine, "status");
    int other_code = S_CTL(&node, &by_other, "--cert", other.admin_cert, "status");
    //  A second admin key in the keys directory: shoalctl asks which.
    snprintf(copied, sizeof copied, "%s/keys/admin-n2.cert", node.data_dir);
    bool second = s_copy_public(other.admin_cert, copied);
    int ambiguous_code = S_CTL(&node, &ambiguous, "status");
    unlink(copied);
    //  An admin key named as before (admin.cert) is found when it is the only one.
    snprintf(legacy, sizeof legacy, "%s/keys/admin.cert", node.data_dir);
    char legacy_secret[4500], mine_secret[4500];
    snprintf(legacy_secret, sizeof legacy_secret, "%s_secret", legacy);
    snprintf(mine_secret, sizeof mine_secret, "%s_secret", node.admin_cert);
    bool renamed = rename(node.admin_cert, legacy) == 0 && rename(mine_secret, legacy_secret) == 0;
    int legacy_code = S_CTL(&node, &by_legacy, "status");
    CHECK_INT(shoal_test_stop(node.pid, SIGTERM), 0);
    CHECK(own_public);
    CHECK(copy_ok);
    CHECK_MSG(mine_code == 0, "%s", by_mine);
    CHECK_MSG(other_code == 0, "%s", by_other);
    CHECK(second);
    CHECK_MSG(ambiguous_code == 2 && shoal_test_contains(ambiguous, "2 admin keys")
              && shoal_test_contains(ambiguous, "--cert"), "%d: %s", ambiguous_code, ambiguous);
    CHECK(renamed);
    CHECK_MSG(legacy_code == 0, "%s", by_legacy);
    free(by_mine);
    free(by_other);
    free(ambiguous);
    free(by_legacy);
}

int
main(void)
{
    SHOAL_TEST(test_shoalctl_for_people);
    SHOAL_TEST(test_admin_key_named_after_its_node);
    return shoal_test_finish();
}
