/*  shoald: the shoal node daemon.

    The main thread only relays signals: SIGHUP becomes RELOAD on the node
    actor's pipe, SIGTERM and SIGINT end the actor, which closes the store
    cleanly. Signals are blocked in every thread and read from a signalfd, so
    no handler ever runs in the middle of the reactor's work.

    Run as process 1 (a container's first process), shoald is also the
    container's init: every orphan of the container becomes its child, and a
    guest whose node was restarted is one. It then forks at once: the parent
    stays process 1, reaps every child that ends and forwards the stopping
    and reloading signals to the child, which is the node, and exits with
    the node's exit code. The node never reaps what it did not start, so no
    exit status it waits for is taken from it.

    Exit codes: 0 after a clean stop, 1 when the node cannot start, 2 when the
    configuration is invalid, 3 when the store is damaged (the message names
    what was lost; --salvage starts on what is intact and records the rest
    as damage).
*/
#include "shoal_config.h"
#include "shoal_node.h"
#include "shoal_fault.h"
#include "shoal_store.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>

#define S_EXIT_START 1
#define S_EXIT_CONFIG 2
#define S_EXIT_DAMAGED 3

static void
s_usage(FILE *out)
{
    fprintf(out,
        "usage: shoald [-c FILE] [--print-config]\n"
        "  -c, --config FILE   settings in ZPL (also SHOAL_CONFIG); every key can be\n"
        "                      overridden by SHOAL_<SECTION>_<KEY>, e.g. SHOAL_NODE_BIND\n"
        "  --print-config      print the settings that would be used, and exit\n"
        "  --salvage           start on a damaged store: skip what cannot be read,\n"
        "                      record it as damage (shoalctl damage) and serve the rest\n"
        "  --version           print the version, and exit\n");
}

//  Raises the soft limit of open files to the hard one: every connection,
//  accepted or not yet authenticated, holds a descriptor, and the usual
//  soft default (1024) is reached by a thousand idle connections. Logs
//  what it did.
static void
s_raise_file_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        zsys_warning("node: cannot read the open files limit: %s", strerror(errno));
        return;
    }
    if (limit.rlim_cur >= limit.rlim_max)
        return;
    rlim_t was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
        zsys_warning("node: cannot raise the open files limit from %ju to %ju: %s", (uintmax_t) was,
                     (uintmax_t) limit.rlim_max, strerror(errno));
    else
        zsys_info("node: open files limit raised from %ju to %ju", (uintmax_t) was, (uintmax_t) limit.rlim_max);
}

//  As process 1: forks the node and, in the parent, reaps every child and
//  forwards SIGNALS (blocked) to the node until it ends. Returns in the
//  child only; the parent exits with the node's exit code.
static void
s_run_as_init(const sigset_t *signals)
{
    sigset_t waited = *signals;
    sigaddset(&waited, SIGCHLD);
    sigaddset(&waited, SIGQUIT);
    sigaddset(&waited, SIGUSR1);
    sigaddset(&waited, SIGUSR2);
    sigprocmask(SIG_BLOCK, &waited, NULL);
    pid_t node = fork();
    if (node < 0) {
        fprintf(stderr, "shoald: as process 1, cannot fork the node: %s\n", strerror(errno));
        exit(S_EXIT_START);
    }
    if (node == 0) {
        sigset_t extra;
        sigemptyset(&extra);
        sigaddset(&extra, SIGCHLD);
        sigaddset(&extra, SIGQUIT);
        sigaddset(&extra, SIGUSR1);
        sigaddset(&extra, SIGUSR2);
        sigprocmask(SIG_UNBLOCK, &extra, NULL);
        return;
    }
    while (true) {
        siginfo_t info;
        if (sigwaitinfo(&waited, &info) < 0)
            continue;
        if (info.si_signo != SIGCHLD) {
            kill(node, info.si_signo);
            continue;
        }
        int status;
        pid_t ended;
        while ((ended = waitpid(-1, &status, WNOHANG)) > 0)
            if (ended == node)
                exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
}

//  The shoalctl beside this shoald (as the build and an install put them),
//  relative to the working directory when it is below it (build/shoalctl),
//  else "shoalctl". A new string.
static char *
s_shoalctl_path(void)
{
    char exe[PATH_MAX], cwd[PATH_MAX];
    ssize_t size = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (size <= 0)
        return shoal_strdup("shoalctl");
    exe[size] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return shoal_strdup("shoalctl");
    *slash = 0;
    char *path = zsys_sprintf("%s/shoalctl", exe);
    if (access(path, X_OK) != 0) {
        free(path);
        return shoal_strdup("shoalctl");
    }
    size_t cwd_size = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    if (cwd_size > 1 && strncmp(path, cwd, cwd_size) == 0 && path[cwd_size] == '/') {
        char *relative = shoal_strdup(path + cwd_size + 1);
        free(path);
        return relative;
    }
    return path;
}

//  Relays signals to the node until it stops. Returns the exit code.
static int
s_relay_signals(zactor_t *node, int signal_fd)
{
    zmq_pollitem_t items[] = {
        { zsock_resolve(node), 0, ZMQ_POLLIN, 0 },
        { NULL, signal_fd, ZMQ_POLLIN, 0 },
    };
    while (true) {
        if (zmq_poll(items, 2, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            return S_EXIT_START;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            //  The actor only speaks when asked; anything else means it
            //  ended, saying why when it could.
            char *what = NULL, *why = NULL;
            if (zstr_recvx(node, &what, &why, NULL) >= 2 && streq(what, "FAILED"))
                fprintf(stderr, "shoald: node cannot serve: %s\n", why);
            else
                zsys_error("shoald: the node stopped on its own");
            zstr_free(&what);
            zstr_free(&why);
            return S_EXIT_START;
        }
        struct signalfd_siginfo info;
        if (read(signal_fd, &info, sizeof info) != sizeof info)
            continue;
        if (info.ssi_signo == SIGHUP) {
            zstr_send(node, "RELOAD");
            zsock_wait(node);
        }
        else {
            zsys_info("shoald: %s received, stopping", strsignal((int) info.ssi_signo));
            return 0;
        }
    }
}

int
main(int argc, char *argv[])
{
    //  Blocked before any thread exists, so every thread inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigprocmask(SIG_BLOCK, &signals, NULL);
    zsys_handler_set(NULL);
    if (getpid() == 1)
        s_run_as_init(&signals);

    const char *config_path = getenv("SHOAL_CONFIG");
    bool print_config = false;
    bool salvage = false;
    for (int i = 1; i < argc; i++) {
        if ((streq(argv[i], "-c") || streq(argv[i], "--config")) && i + 1 < argc)
            config_path = argv[++i];
        else
        if (streq(argv[i], "--print-config"))
            print_config = true;
        else
        if (streq(argv[i], "--salvage"))
            salvage = true;
        else
        if (streq(argv[i], "--version")) {
            printf("shoald %s\n", SHOAL_VERSION);
            return 0;
        }
        else
        if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
            s_usage(stdout);
            return 0;
        }
        else {
            fprintf(stderr, "shoald: unknown argument '%s'\n", argv[i]);
            s_usage(stderr);
            return S_EXIT_CONFIG;
        }
    }
    if (config_path && !*config_path)
        config_path = NULL;

    shoal_settings_t settings;
    char error[512];
    if (shoal_config_load(config_path, &settings, error, sizeof error)) {
        fprintf(stderr, "shoald: invalid configuration: %s\n", error);
        return S_EXIT_CONFIG;
    }
    if (salvage)
        settings.salvage = true;
    char *fault_error = NULL;
    if (shoal_fault_init(&fault_error)) {
        fprintf(stderr, "shoald: %s\n", fault_error);
        free(fault_error);
        shoal_settings_clear(&settings);
        return S_EXIT_CONFIG;
    }
    if (print_config) {
        char *text = shoal_config_describe(&settings);
        fputs(text, stdout);
        free(text);
        shoal_settings_clear(&settings);
        return 0;
    }
    shoal_malloc_tune();
    zsys_init();
    zsys_set_logident("shoald");
    zsys_set_logstream(stderr);
    s_raise_file_limit();

    char *node_id = shoal_strdup(settings.node_id);
    char *data_dir = shoal_strdup(settings.data_dir);
    char *cluster_cert = shoal_strdup(settings.cluster_cert);
    char *start_error = NULL;
    shoal_node_t *node = shoal_node_new(&settings, config_path, &start_error);
    int code = S_EXIT_START;
    if (!node) {
        fprintf(stderr, "shoald: cannot start node %s: %s\n", node_id, start_error ? start_error : "unknown error");
        if (start_error && strstr(start_error, SHOAL_STORE_DAMAGED))
            code = S_EXIT_DAMAGED;
        goto cleanup;
    }
    printf("shoald %s: node %s serving at %s (data in %s)\n", SHOAL_VERSION, node_id,
           shoal_node_endpoint(node), data_dir);
    const char *client = shoal_node_admin_cert(node);
    char *shoalctl = s_shoalctl_path();
    printf("reach it with:\n  %s --endpoint %s --cert %s --cluster-key %s status\n", shoalctl,
           shoal_node_endpoint(node), client ? client : "YOUR_CLIENT.cert", cluster_cert);
    free(shoalctl);
    fflush(stdout);

    int signal_fd = signalfd(-1, &signals, SFD_CLOEXEC);
    zactor_t *actor = zactor_new(shoal_node_actor, node);
    code = s_relay_signals(actor, signal_fd);
    zactor_destroy(&actor);
    close(signal_fd);
cleanup:
    free(start_error);
    free(node_id);
    free(data_dir);
    free(cluster_cert);
    shoal_settings_clear(&settings);
    return code;
}
