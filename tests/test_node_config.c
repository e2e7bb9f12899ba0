/*  test_node_config: settings from defaults, a file and the environment. */
#include "shoal_test.h"
#include "shoal_config.h"

#include <czmq.h>
#include <stdlib.h>

static char *
s_write(const char *name, const char *text)
{
    char *path = zsys_sprintf("%s/%s", shoal_test_dir, name);
    FILE *file = fopen(path, "w");
    if (file) {
        fputs(text, file);
        fclose(file);
    }
    return path;
}

static void
test_defaults(void)
{
    shoal_settings_t settings;
    char error[512];
    CHECK(shoal_config_load(NULL, &settings, error, sizeof error) == 0);
    CHECK_STR(settings.data_dir, "./shoal-data");
    CHECK_STR(settings.bind, "tcp://127.0.0.1:7400");
    CHECK_STR(settings.advertise, "tcp://127.0.0.1:7400");
    CHECK_STR(settings.cluster_cert, "./shoal-data/keys/cluster.cert");
    CHECK_STR(settings.clients_dir, "./shoal-data/clients");
    CHECK(*settings.node_id);
    CHECK_INT(settings.cache_mb, 64);
    CHECK(settings.store_sync);
    CHECK(!settings.verbose);
    CHECK_STR(settings.exec_sched, "normal");
    shoal_settings_clear(&settings);
}

static void
test_file_then_environment(void)
{
    char *path = s_write("a.cfg", "node\n    id = \"n1\"\n    data_dir = \"/srv/shoal\"\nstore\n    cache_mb = 10\n");
    setenv("SHOAL_STORE_CACHE_MB", "20", 1);
    shoal_settings_t settings;
    char error[512];
    int rc = shoal_config_load(path, &settings, error, sizeof error);
    unsetenv("SHOAL_STORE_CACHE_MB");
    free(path);
    CHECK_MSG(rc == 0, "%s", error);
    CHECK_STR(settings.node_id, "n1");
    CHECK_INT(settings.cache_mb, 20);
    //  Derived defaults follow the data directory the file chose.
    CHECK_STR(settings.cluster_cert, "/srv/shoal/keys/cluster.cert");
    shoal_settings_clear(&settings);
}

static void
test_bad_values_are_named(void)
{
    struct { const char *variable, *value, *expect; } cases[] = {
        { "SHOAL_STORE_CACHE_MB", "0", "store/cache_mb = '0' (SHOAL_STORE_CACHE_MB): expected an integer from 1 to 65536" },
        { "SHOAL_STORE_SYNC", "maybe", "store/sync = 'maybe'" },
        { "SHOAL_NODE_ID", "bad id!", "node/id = 'bad id!'" },
        { "SHOAL_NODE_BIND", "udp://x:1", "node/bind = 'udp://x:1'" },
        { "SHOAL_NODE_BIND", "tcp://host:0", "with a port from 1 to 65535" },
        { "SHOAL_NODE_DATA_DIR", "", "node/data_dir (SHOAL_NODE_DATA_DIR): must not be empty" },
        { "SHOAL_LIMITS_MAX_MESSAGE_MB", "12x", "limits/max_message_mb = '12x'" },
        { "SHOAL_DRIVERS_EXEC_TIMEOUT_MS", "50", "drivers/exec_timeout_ms = '50' (SHOAL_DRIVERS_EXEC_TIMEOUT_MS): "
                                                 "expected an integer from 100 to 600000" },
        { "SHOAL_DRIVERS_EXEC_SCHED", "batch", "drivers/exec_sched = 'batch' (SHOAL_DRIVERS_EXEC_SCHED): "
                                               "expected normal or idle" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].variable, cases[i].value, 1);
        shoal_settings_t settings;
        char error[512] = "";
        int rc = shoal_config_load(NULL, &settings, error, sizeof error);
        unsetenv(cases[i].variable);
        CHECK_MSG(rc == -1, "%s=%s was accepted", cases[i].variable, cases[i].value);
        CHECK_MSG(shoal_test_contains(error, cases[i].expect), "got '%s'", error);
    }
}

static void
test_file_errors(void)
{
    shoal_settings_t settings;
    char error[512];
    char *path = s_write("typo.cfg", "node\n    idd = \"n1\"\n");
    CHECK(shoal_config_load(path, &settings, error, sizeof error) == -1);
    CHECK_MSG(shoal_test_contains(error, "unknown key 'node/idd'"), "%s", error);
    free(path);
    char *missing = zsys_sprintf("%s/none.cfg", shoal_test_dir);
    CHECK(shoal_config_load(missing, &settings, error, sizeof error) == -1);
    CHECK_MSG(shoal_test_contains(error, missing), "%s", error);
    free(missing);
}

static void
test_reload_applies_only_reloadable(void)
{
    shoal_settings_t live, fresh;
    char error[512];
    CHECK(shoal_config_load(NULL, &live, error, sizeof error) == 0);
    setenv("SHOAL_LOG_VERBOSE", "1", 1);
    setenv("SHOAL_STORE_CACHE_MB", "99", 1);
    int rc = shoal_config_load(NULL, &fresh, error, sizeof error);
    unsetenv("SHOAL_LOG_VERBOSE");
    unsetenv("SHOAL_STORE_CACHE_MB");
    CHECK(rc == 0);
    CHECK_INT(shoal_config_apply_reload(&live, &fresh), 1);
    CHECK(live.verbose);
    CHECK_INT(live.cache_mb, 64);
    shoal_settings_clear(&live);
    shoal_settings_clear(&fresh);
}

//  A SHOAL_ variable that is no setting is refused at start, named, with
//  the setting it was likely meant to be; shoald exits 2 saying so. Names
//  that other programs of shoal read are no typo.
static void
test_unknown_environment_variable(void)
{
    shoal_settings_t settings;
    char error[512] = "";
    setenv("SHOAL_MESH_JION", "tcp://127.0.0.1:7401", 1);
    int rc = shoal_config_load(NULL, &settings, error, sizeof error);
    unsetenv("SHOAL_MESH_JION");
    CHECK_MSG(rc == -1, "SHOAL_MESH_JION was accepted");
    CHECK_STR(error, "environment: unknown setting SHOAL_MESH_JION (did you mean SHOAL_MESH_JOIN?)");

    setenv("SHOAL_WHATEVER", "1", 1);
    rc = shoal_config_load(NULL, &settings, error, sizeof error);
    unsetenv("SHOAL_WHATEVER");
    CHECK_MSG(rc == -1, "SHOAL_WHATEVER was accepted");
    CHECK_MSG(shoal_test_contains(error, "unknown setting SHOAL_WHATEVER"), "%s", error);

    setenv("SHOAL_ENDPOINT", "tcp://127.0.0.1:7400", 1);
    rc = shoal_config_load(NULL, &settings, error, sizeof error);
    unsetenv("SHOAL_ENDPOINT");
    CHECK_MSG(rc == 0, "shoalctl's SHOAL_ENDPOINT refused: %s", error);
    shoal_settings_clear(&settings);

    char typo[] = "SHOAL_NODE_BIDN=tcp://127.0.0.1:7499";
    char *env[] = { typo, NULL };
    char *argv[] = { (char *) shoal_test_program("shoald"), "--print-config", NULL };
    char *output = NULL;
    int code = shoal_test_capture(argv, env, 10000, &output);
    bool named = shoal_test_contains(output, "unknown setting SHOAL_NODE_BIDN (did you mean SHOAL_NODE_BIND?)");
    CHECK_MSG(code == 2 && named, "shoald exited %d: %s", code, output ? output : "");
    free(output);
}

int
main(void)
{
    SHOAL_TEST(test_defaults);
    SHOAL_TEST(test_file_then_environment);
    SHOAL_TEST(test_bad_values_are_named);
    SHOAL_TEST(test_file_errors);
    SHOAL_TEST(test_unknown_environment_variable);
    SHOAL_TEST(test_reload_applies_only_reloadable);
    return shoal_test_finish();
}
