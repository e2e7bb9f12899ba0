/*  shoal_test: the small harness every test executable uses.

    A test executable runs several test functions with SHOAL_TEST(fn); a failed
    CHECK prints where and what, marks the current test failed and returns from
    it. shoal_test_finish prints "N passed, N failed" and gives the exit code.
    Each test function gets its own fresh temporary directory.
*/
#ifndef SHOAL_TEST_H_INCLUDED
#define SHOAL_TEST_H_INCLUDED

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

//  Set by the harness: the current test's temporary directory (removed after
//  the test passes, kept for inspection when it fails).
extern char shoal_test_dir[];
//  Set to true by a failed CHECK.
extern bool shoal_test_failed;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        shoal_test_failed = true; return; \
    } } while (0)

#define CHECK_MSG(cond, ...) do { \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
        shoal_test_failed = true; return; \
    } } while (0)

#define CHECK_INT(a, b) do { \
    long long _a = (long long) (a), _b = (long long) (b); \
    if (_a != _b) { \
        fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", \
                __FILE__, __LINE__, #a, #b, _a, _b); \
        shoal_test_failed = true; return; \
    } } while (0)

#define CHECK_STR(a, b) do { \
    const char *_a = (a), *_b = (b); \
    if (!_a || !_b || strcmp(_a, _b) != 0) { \
        fprintf(stderr, "%s:%d: check failed: %s == %s (\"%s\" != \"%s\")\n", \
                __FILE__, __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); \
        shoal_test_failed = true; return; \
    } } while (0)

//  True when HAYSTACK contains NEEDLE (both may be NULL: false).
bool shoal_test_contains(const char *haystack, const char *needle);

//  The number of entries in DIR, "." and ".." aside; -1 when it cannot be
//  opened (no such directory).
int shoal_test_dir_entries(const char *dir);

//  Makes a new shoal_test_dir, $TMPDIR/shoal-NAME-XXXXXX (TMPDIR: /tmp by
//  default). Returns 0, or -1 having said why not.
int shoal_test_dir_make(const char *name);

//  Runs FN as the test of that name (skipped unless its name contains
//  SHOAL_TEST_ONLY, when that is set).
#define SHOAL_TEST(fn) shoal_test_run(#fn, fn)
void shoal_test_run(const char *name, void (*fn)(void));
//  Prints the summary line; returns the process exit code.
int shoal_test_finish(void);

//  Removes PATH and everything under it.
void shoal_test_rmrf(const char *path);

//  The path of a built program (shoald, shoalctl...) from SHOAL_BIN_DIR.
//  The result is static storage, valid until the next call.
const char *shoal_test_program(const char *name);

//  Points SHOAL_BIN_DIR beside this program unless it is set, and checks
//  that shoald and shoal-guest are there (a benchmark run from anywhere).
//  Returns 0, or -1 having said what is missing.
int shoal_test_find_programs(void);

//  A TCP port on 127.0.0.1 that is free, outside the kernel's ephemeral
//  range, and reserved for this process until it ends: no other pick, in
//  this process or another test process, is handed it meanwhile (so a node
//  keeps its port across its restarts). -1 when none is left.
int shoal_test_free_port(void);

//  Starts ARGV (NULL-terminated) with extra environment ENV ("K=V" strings,
//  NULL-terminated, may be NULL), stdout and stderr appended to LOG_PATH.
//  Returns the pid or -1.
pid_t shoal_test_spawn(char *const argv[], char *const env[], const char *log_path);

//  Waits up to TIMEOUT_MS for PID to exit. Returns its exit code (128+signal
//  when killed), or -1 on timeout (the process is left running).
int shoal_test_wait(pid_t pid, int timeout_ms);

//  Sends SIGNAL to PID and waits for it (up to 10 s, then SIGKILL).
int shoal_test_stop(pid_t pid, int signal);

//  Runs ARGV to completion (up to TIMEOUT_MS), returns its exit code and
//  *OUTPUT_P (stdout and stderr together, caller frees), or -1 on timeout.
int shoal_test_capture(char *const argv[], char *const env[], int timeout_ms, char **output_p);

//  Reads a whole file into a new string (caller frees), or NULL.
char *shoal_test_slurp(const char *path);

//  Damages a store's write-ahead log as a bad disk would: flips one bit of
//  the byte one past the end of MARKER's first occurrence, in the first log
//  (*.log) of DB_DIR whose bytes hold MARKER. Returns 0 with *FILE_P the
//  log's name (caller frees; FILE_P may be NULL), or -1 when no log holds
//  MARKER or the log cannot be written.
int shoal_test_flip_in_log(const char *db_dir, const char *marker, char **file_p);

//  Milliseconds on a monotonic clock.
int64_t shoal_test_now_ms(void);

//  The seed of a randomized test: SHOAL_TEST_SEED, or else the time; it is
//  printed, so that SHOAL_TEST_SEED repeats the run.
uint64_t shoal_test_seed(void);

//  The next number of a small PRNG (splitmix64) whose state is *STATE (a
//  seed to begin with): a run repeats from its seed.
uint64_t shoal_test_random(uint64_t *state);

#endif
