/*  test_readme: the README's walk-through and mesh sections, run as written.

    The commands are read from README.md itself, so the two cannot drift:
    every ```console block of the sections "A walk-through" and "A mesh of
    nodes" is a list of commands (lines starting "$ ", continued while a
    line ends with a backslash), each followed by the output the README
    shows for it. Each section runs in its own bash, in a fresh directory
    that holds `build` (a link to the build directory), as a person types
    it into a terminal in the checkout. What is changed, and only that:

    - ports 7400, 7401 and 7402 become free loopback ports, in the commands
      and in the output shown (other tests and nodes run beside this one);
    - "/tmp/" becomes a directory inside the test's own;
    - the walk-through's node is started first, as `scripts/run` starts it
      (build/shoald in the directory, node id "myhost", the README's host
      name), and SHOAL_ENDPOINT points shoalctl's default at its port.

    Output is compared line by line with whitespace runs made one space and
    every number or hex id (a run of hex digits holding a digit, not
    right after a letter) made '#': times, hashes, incarnations and clocks
    differ from run to run, words and names do not. A line "..." stands for
    any lines. A command that only reads (status, peers, get, scan, stats,
    lookup) is asked again, for a while, until its output matches: the
    README's reader types slower than the mesh gossips.
*/
#include "shoal_test.h"

#include <czmq.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_STEPS_MAX 64
#define S_LINES_MAX 64
#define S_TEXT_MAX 8192
#define S_PATH_MAX 4400
//  How long one command may take (a move included), and how long a
//  read-only command is asked again until its output matches.
#define S_COMMAND_TIMEOUT_MS 120000
#define S_RETRY_MS 30000
#define S_RETRY_PAUSE_US 300000
#define S_END_MARK "__shoal_readme_step_end__"
//  The ports the README uses.
static const char *s_ports[] = { "7400", "7401", "7402" };
#define S_PORTS (sizeof s_ports / sizeof s_ports[0])

//  One command of the README and what it shows.
typedef struct {
    char *command;              //  as typed, continuation lines joined
    char *expected[S_LINES_MAX];//  the output lines shown
    size_t lines;
} s_step_t;

typedef struct {
    s_step_t steps[S_STEPS_MAX];
    size_t count;
} s_section_t;

//  What the README's text becomes here.
typedef struct {
    char ports[S_PORTS][16];    //  the free port for each of s_ports
    char tmp[S_PATH_MAX];       //  what "/tmp/" becomes
} s_subst_t;

//  A bash in the test directory, fed commands on a pipe.
typedef struct {
    pid_t pid;                  //  the shell, leader of its process group
    int in;                     //  its stdin
    int out;                    //  its stdout and stderr
} s_shell_t;

static void
s_section_clear(s_section_t *section)
{
    for (size_t i = 0; i < section->count; i++) {
        free(section->steps[i].command);
        for (size_t j = 0; j < section->steps[i].lines; j++)
            free(section->steps[i].expected[j]);
    }
    section->count = 0;
}

//  A new string: TEXT with every FROM replaced by TO.
static char *
s_replace(const char *text, const char *from, const char *to)
{
    size_t from_size = strlen(from), to_size = strlen(to), count = 0;
    for (const char *at = strstr(text, from); at; at = strstr(at + from_size, from))
        count++;
    char *result = malloc(strlen(text) + count * (to_size + 1) + 1);
    char *out = result;
    const char *at;
    while ((at = strstr(text, from))) {
        memcpy(out, text, (size_t) (at - text));
        out += at - text;
        memcpy(out, to, to_size);
        out += to_size;
        text = at + from_size;
    }
    strcpy(out, text);
    return result;
}

static char *
s_substitute(const char *text, const s_subst_t *subst)
{
    char *result = s_replace(text, "/tmp/", subst->tmp);
    for (size_t i = 0; i < S_PORTS; i++) {
        char from[32], to[32];
        snprintf(from, sizeof from, "127.0.0.1:%s", s_ports[i]);
        snprintf(to, sizeof to, "127.0.0.1:%s", subst->ports[i]);
        char *next = s_replace(result, from, to);
        free(result);
        result = next;
    }
    return result;
}

//  Reads the console blocks of the README section titled TITLE.
static int
s_section_read(const char *readme, const char *title, const s_subst_t *subst, s_section_t *section)
{
    memset(section, 0, sizeof *section);
    char heading[256];
    snprintf(heading, sizeof heading, "\n## %s\n", title);
    const char *start = strstr(readme, heading);
    if (!start)
        return -1;
    start += strlen(heading);
    const char *end = strstr(start, "\n## ");
    if (!end)
        end = start + strlen(start);
    bool in_block = false;
    s_step_t *step = NULL;
    char *pending = NULL;       //  a command continued on the next line
    for (const char *line = start; line < end;) {
        const char *next = strchr(line, '\n');
        if (!next || next > end)
            next = end;
        char text[S_TEXT_MAX];
        snprintf(text, sizeof text, "%.*s", (int) (next - line), line);
        line = next + 1;
        if (strncmp(text, "```", 3) == 0) {
            in_block = !in_block && streq(text, "```console");
            step = NULL;
            continue;
        }
        if (!in_block)
            continue;
        size_t size = strlen(text);
        bool continued = size > 0 && text[size - 1] == '\\';
        if (pending || strncmp(text, "$ ", 2) == 0) {
            const char *part = pending ? text : text + 2;
            char *joined = zsys_sprintf("%s%s\n", pending ? pending : "", part);
            free(pending);
            pending = joined;
            if (continued)
                continue;
            if (section->count == S_STEPS_MAX)
                return -1;
            step = &section->steps[section->count++];
            step->command = s_substitute(pending, subst);
            free(pending);
            pending = NULL;
        }
        else
        if (step && step->lines < S_LINES_MAX)
            step->expected[step->lines++] = s_substitute(text, subst);
    }
    free(pending);
    return section->count ? 0 : -1;
}

//  LINE made comparable: whitespace runs one space, numbers and hex ids '#'.
static void
s_normalize(const char *line, char *out, size_t size)
{
    size_t used = 0;
    const char *c = line;
    while (*c == ' ' || *c == '\t')
        c++;
    while (*c && used + 2 < size) {
        if (*c == ' ' || *c == '\t') {
            while (*c == ' ' || *c == '\t')
                c++;
            if (*c)
                out[used++] = ' ';
            continue;
        }
        const char *run = c;
        bool digit = false;
        while (isxdigit((unsigned char) *run) && !isupper((unsigned char) *run)) {
            digit = digit || isdigit((unsigned char) *run);
            run++;
        }
        bool after_letter = c > line && isalpha((unsigned char) c[-1]);
        if (run > c && digit && !after_letter) {
            out[used++] = '#';
            c = run;
        }
        else
        if (run > c) {
            while (c < run && used + 2 < size)
                out[used++] = *c++;
        }
        else
            out[used++] = *c++;
    }
    out[used] = 0;
}

//  True when ACTUAL lines match EXPECTED lines ("..." stands for any lines).
static bool
s_match(char *const *expected, size_t expected_count, char *const *actual, size_t actual_count)
{
    if (expected_count == 0)
        return actual_count == 0;
    if (streq(expected[0], "..."))
        for (size_t skip = 0; skip <= actual_count; skip++)
            if (s_match(expected + 1, expected_count - 1, actual + skip, actual_count - skip))
                return true;
    if (actual_count == 0 || streq(expected[0], "..."))
        return false;
    char want[S_TEXT_MAX], got[S_TEXT_MAX];
    s_normalize(expected[0], want, sizeof want);
    s_normalize(actual[0], got, sizeof got);
    return streq(want, got) && s_match(expected + 1, expected_count - 1, actual + 1, actual_count - 1);
}

static int
s_shell_start(s_shell_t *shell, char *const env[])
{
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        return -1;
    shell->pid = fork();
    if (shell->pid == 0) {
        setsid();
        if (chdir(shoal_test_dir) != 0)
            _exit(127);
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        execl("/bin/bash", "bash", "--noprofile", "--norc", (char *) NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    shell->in = in[1];
    shell->out = out[0];
    return shell->pid > 0 ? 0 : -1;
}

//  Runs COMMAND in the shell; returns its output (caller frees) or NULL
//  when it did not end in time.
static char *
s_shell_run(s_shell_t *shell, const char *command)
{
    char *script = zsys_sprintf("%secho %s $?\n", command, S_END_MARK);
    ssize_t written = write(shell->in, script, strlen(script));
    free(script);
    if (written < 0)
        return NULL;
    size_t size = 0, capacity = S_TEXT_MAX;
    char *output = malloc(capacity);
    int64_t deadline = shoal_test_now_ms() + S_COMMAND_TIMEOUT_MS;
    while (shoal_test_now_ms() < deadline) {
        struct pollfd item = { shell->out, POLLIN, 0 };
        if (poll(&item, 1, 100) <= 0)
            continue;
        if (size + S_TEXT_MAX > capacity) {
            capacity *= 2;
            output = realloc(output, capacity);
        }
        ssize_t got = read(shell->out, output + size, capacity - size - 1);
        if (got <= 0)
            break;
        size += (size_t) got;
        output[size] = 0;
        char *mark = strstr(output, S_END_MARK);
        if (mark && strchr(mark, '\n')) {
            *mark = 0;
            return output;
        }
    }
    free(output);
    return NULL;
}

//  Ends the shell's process group (the nodes it started in the background
//  with it) and the guests under DIR's data directories.
static void
s_shell_stop(s_shell_t *shell)
{
    if (shell->pid <= 0)
        return;
    close(shell->in);
    kill(-shell->pid, SIGTERM);
    shoal_test_wait(shell->pid, 10000);
    kill(-shell->pid, SIGKILL);
    close(shell->out);
    shell->pid = 0;
}

//  Kills every shoal-guest whose pid file lies in DIR/*/guests/*.
static void
s_guests_kill(const char *dir)
{
    DIR *top = opendir(dir);
    for (struct dirent *node = top ? readdir(top) : NULL; node; node = readdir(top)) {
        if (node->d_name[0] == '.')
            continue;
        char guests_path[S_PATH_MAX];
        snprintf(guests_path, sizeof guests_path, "%s/%s/guests", dir, node->d_name);
        DIR *guests = opendir(guests_path);
        for (struct dirent *guest = guests ? readdir(guests) : NULL; guest; guest = readdir(guests)) {
            char path[S_PATH_MAX + 300];
            snprintf(path, sizeof path, "%s/%s/pid", guests_path, guest->d_name);
            char *text = guest->d_name[0] == '.' ? NULL : shoal_test_slurp(path);
            int pid = text ? atoi(text) : 0;
            free(text);
            snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
            char *cmdline = pid > 0 ? shoal_test_slurp(path) : NULL;
            if (cmdline && shoal_test_contains(cmdline, "shoal-guest"))
                kill(pid, SIGKILL);
            free(cmdline);
        }
        if (guests)
            closedir(guests);
    }
    if (top)
        closedir(top);
}

static bool
s_read_only(const char *command)
{
    const char *verbs[] = { " status", " peers\n", " kv get ", " kv scan ", " oplog stats", " lookup " };
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strstr(command, verbs[i]))
            return true;
    return false;
}

//  Runs every step of SECTION in SHELL, checking each output. Returns 0,
//  or -1 having said which step showed what.
static int
s_section_run(s_shell_t *shell, const s_section_t *section, const char *title)
{
    for (size_t i = 0; i < section->count; i++) {
        const s_step_t *step = &section->steps[i];
        int64_t deadline = shoal_test_now_ms() + (s_read_only(step->command) ? S_RETRY_MS : 0);
        while (true) {
            char *output = s_shell_run(shell, step->command);
            if (!output) {
                fprintf(stderr, "%s, step %zu: no end within %d ms: %s", title, i + 1, S_COMMAND_TIMEOUT_MS,
                        step->command);
                return -1;
            }
            char *lines[S_LINES_MAX * 4];
            size_t count = 0;
            char *rest = output;
            for (char *line = strsep(&rest, "\n"); line && count < S_LINES_MAX * 4; line = strsep(&rest, "\n"))
                if (*line || rest)
                    lines[count++] = line;
            bool matched = s_match(step->expected, step->lines, lines, count);
            if (matched) {
                free(output);
                break;
            }
            if (shoal_test_now_ms() >= deadline) {
                fprintf(stderr, "%s, step %zu: $ %s  the README shows:\n", title, i + 1, step->command);
                for (size_t j = 0; j < step->lines; j++)
                    fprintf(stderr, "    %s\n", step->expected[j]);
                fprintf(stderr, "  it printed:\n");
                for (size_t j = 0; j < count; j++)
                    fprintf(stderr, "    %s\n", lines[j]);
                free(output);
                return -1;
            }
            free(output);
            usleep(S_RETRY_PAUSE_US);
        }
    }
    return 0;
}

//  Reads the README, lays out the directory (build, tmp) and the ports.
static char *
s_prepare(s_subst_t *subst)
{
    const char *source = getenv("SHOAL_SOURCE_DIR");
    char path[S_PATH_MAX];
    snprintf(path, sizeof path, "%s/README.md", source ? source : ".");
    char *readme = shoal_test_slurp(path);
    if (!readme)
        return NULL;
    char link[S_PATH_MAX], bin[S_PATH_MAX];
    snprintf(link, sizeof link, "%s/build", shoal_test_dir);
    snprintf(bin, sizeof bin, "%s", shoal_test_program("shoald"));
    *strrchr(bin, '/') = 0;
    if (symlink(bin, link) != 0) {
        free(readme);
        return NULL;
    }
    snprintf(subst->tmp, sizeof subst->tmp, "%s/tmp/", shoal_test_dir);
    zsys_dir_create("%s", subst->tmp);
    for (size_t i = 0; i < S_PORTS; i++)
        snprintf(subst->ports[i], sizeof subst->ports[i], "%d", shoal_test_free_port());
    return readme;
}

static void
test_readme_walk_through(void)
{
    s_subst_t subst;
    char *readme = s_prepare(&subst);
    CHECK(readme);
    s_section_t section;
    int read = s_section_read(readme, "A walk-through", &subst, &section);
    free(readme);
    CHECK_MSG(read == 0, "README.md has no console commands under '## A walk-through'");
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "SHOAL_ENDPOINT=tcp://127.0.0.1:%s", subst.ports[0]);
    char *env[] = { endpoint, NULL };
    s_shell_t shell;
    CHECK(s_shell_start(&shell, env) == 0);
    //  What scripts/run does, on this test's port.
    char start[256];
    snprintf(start, sizeof start, "SHOAL_NODE_ID=myhost SHOAL_NODE_BIND=tcp://127.0.0.1:%s build/shoald > shoald.log 2>&1 &\n",
             subst.ports[0]);
    char *started = s_shell_run(&shell, start);
    free(started);
    int rc = started ? s_section_run(&shell, &section, "A walk-through") : -1;
    s_shell_stop(&shell);
    s_guests_kill(shoal_test_dir);
    s_section_clear(&section);
    CHECK_MSG(rc == 0, "the walk-through does not run as written (files in %s)", shoal_test_dir);
}

static void
test_readme_mesh(void)
{
    s_subst_t subst;
    char *readme = s_prepare(&subst);
    CHECK(readme);
    s_section_t section;
    int read = s_section_read(readme, "A mesh of nodes", &subst, &section);
    free(readme);
    CHECK_MSG(read == 0, "README.md has no console commands under '## A mesh of nodes'");
    s_shell_t shell;
    CHECK(s_shell_start(&shell, NULL) == 0);
    int rc = s_section_run(&shell, &section, "A mesh of nodes");
    s_shell_stop(&shell);
    s_guests_kill(shoal_test_dir);
    s_section_clear(&section);
    CHECK_MSG(rc == 0, "the mesh section does not run as written (files in %s)", shoal_test_dir);
}

int
main(void)
{
    SHOAL_TEST(test_readme_walk_through);
    SHOAL_TEST(test_readme_mesh);
    return shoal_test_finish();
}
