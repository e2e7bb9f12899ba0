/*  bench_cpu: where the CPU went while a bench timed something.

    On two cores a transfer's ratio to its raw limit is decided as much by
    what else wants a core (the other node's cipher, kernel writeback, a
    worker's copy) as by any wait, so a bench prints, beside a time, the
    machine's busy share and each of its nodes' threads' CPU seconds over
    the same interval, and how much of it the kernel spent on the
    thread's behalf (system). Threads that end within the interval are
    not seen. Read from /proc: clock ticks, so figures are good to
    a hundredth of a second.
*/
#ifndef BENCH_CPU_H_INCLUDED
#define BENCH_CPU_H_INCLUDED

#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

//  Most threads of a process a sample keeps.
#define BENCH_CPU_THREADS 64
//  Room for a thread's name (comm is at most 15 characters).
#define BENCH_CPU_NAME 24

typedef struct {
    int tid;
    char name[BENCH_CPU_NAME];
    unsigned long long ticks;           //  user + system
    unsigned long long system;          //  system alone
} bench_cpu_thread_t;

//  One process's threads at one moment.
typedef struct {
    unsigned long long ticks, system;   //  the whole process's, threads ended before included
    int count;
    bench_cpu_thread_t threads[BENCH_CPU_THREADS];
} bench_cpu_process_t;

//  The whole machine at one moment: ticks busy and ticks in all.
typedef struct {
    unsigned long long busy, total;
} bench_cpu_machine_t;

//  CPU seconds (user + system) of the children waited for so far: around
//  a raw transfer, what its two processes spent.
static inline double
bench_cpu_children(double *system)
{
    struct rusage usage;
    if (getrusage(RUSAGE_CHILDREN, &usage) != 0)
        return *system = 0;
    *system = (double) usage.ru_stime.tv_sec + (double) usage.ru_stime.tv_usec / 1e6;
    return (double) usage.ru_utime.tv_sec + (double) usage.ru_utime.tv_usec / 1e6 + *system;
}

static inline void
bench_cpu_machine_sample(bench_cpu_machine_t *sample)
{
    sample->busy = sample->total = 0;
    FILE *file = fopen("/proc/stat", "r");
    if (!file)
        return;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    if (fscanf(file, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait, &irq,
               &softirq, &steal) == 8) {
        sample->busy = user + nice + system + irq + softirq + steal;
        sample->total = sample->busy + idle + iowait;
    }
    fclose(file);
}

//  The share of all cores busy between BEFORE and AFTER, 0 to 1.
static inline double
bench_cpu_machine_busy(const bench_cpu_machine_t *before, const bench_cpu_machine_t *after)
{
    unsigned long long total = after->total - before->total;
    return total ? (double) (after->busy - before->busy) / (double) total : 0;
}

//  Reads user and system ticks from the stat line of a process or thread
//  at PATH. Returns 0, or -1.
static inline int
bench_cpu_stat_read(const char *path, char *name, size_t name_size, unsigned long long *ticks,
                    unsigned long long *system)
{
    char line[512];
    FILE *file = fopen(path, "r");
    if (!file)
        return -1;
    bool read = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    //  pid (comm) state ... utime is field 14, stime 15; comm may hold
    //  spaces, so the fields are counted from its closing parenthesis.
    char *open = read ? strchr(line, '(') : NULL, *close = read ? strrchr(line, ')') : NULL;
    unsigned long long utime, stime;
    if (!open || !close || close < open
        || sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    size_t length = (size_t) (close - open - 1);
    if (length >= name_size)
        length = name_size - 1;
    memcpy(name, open + 1, length);
    name[length] = 0;
    *ticks = utime + stime;
    *system = stime;
    return 0;
}

static inline void
bench_cpu_process_sample(pid_t pid, bench_cpu_process_t *sample)
{
    sample->count = 0;
    sample->ticks = sample->system = 0;
    char path[64], name[BENCH_CPU_NAME];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    bench_cpu_stat_read(path, name, sizeof name, &sample->ticks, &sample->system);
    snprintf(path, sizeof path, "/proc/%d/task", (int) pid);
    DIR *dir = opendir(path);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir(dir)) && sample->count < BENCH_CPU_THREADS) {
        if (entry->d_name[0] == '.')
            continue;
        char stat_path[320];
        snprintf(stat_path, sizeof stat_path, "/proc/%d/task/%s/stat", (int) pid, entry->d_name);
        bench_cpu_thread_t *thread = &sample->threads[sample->count];
        if (bench_cpu_stat_read(stat_path, thread->name, sizeof thread->name, &thread->ticks, &thread->system))
            continue;
        thread->tid = atoi(entry->d_name);
        sample->count++;
    }
    closedir(dir);
}

//  Prints, on one line after LABEL, the CPU seconds each thread of the
//  process spent between BEFORE and AFTER, threads of one name summed, the
//  busiest first, those under a hundredth of a second left out; then what
//  threads that ended meanwhile spent, and the process's whole.
static inline void
bench_cpu_process_print(const char *label, const bench_cpu_process_t *before, const bench_cpu_process_t *after)
{
    char names[BENCH_CPU_THREADS][BENCH_CPU_NAME];
    double seconds[BENCH_CPU_THREADS], system[BENCH_CPU_THREADS];
    int kinds = 0;
    double tick = (double) sysconf(_SC_CLK_TCK);
    for (int i = 0; i < after->count; i++) {
        unsigned long long earlier = 0, earlier_system = 0;
        for (int j = 0; j < before->count; j++)
            if (before->threads[j].tid == after->threads[i].tid) {
                earlier = before->threads[j].ticks;
                earlier_system = before->threads[j].system;
            }
        double spent = (double) (after->threads[i].ticks - earlier) / tick;
        double spent_system = (double) (after->threads[i].system - earlier_system) / tick;
        int kind = 0;
        while (kind < kinds && strcmp(names[kind], after->threads[i].name) != 0)
            kind++;
        if (kind == kinds) {
            memcpy(names[kinds], after->threads[i].name, BENCH_CPU_NAME);
            seconds[kinds] = system[kinds] = 0;
            kinds++;
        }
        seconds[kind] += spent;
        system[kind] += spent_system;
    }
    double threads = 0;
    for (int kind = 0; kind < kinds; kind++)
        threads += seconds[kind];
    printf("    %s:", label);
    for (int shown = 0; shown < kinds; shown++) {
        int most = -1;
        for (int kind = 0; kind < kinds; kind++)
            if (seconds[kind] >= 0 && (most < 0 || seconds[kind] > seconds[most]))
                most = kind;
        if (most < 0 || seconds[most] < 0.01)
            break;
        printf(" %s %.2f (system %.2f)", names[most], seconds[most], system[most]);
        seconds[most] = -1;
    }
    //  What threads that ended spent: the process's total less its
    //  threads'.
    double whole = (double) (after->ticks - before->ticks) / tick;
    double whole_system = (double) (after->system - before->system) / tick;
    if (whole - threads >= 0.01)
        printf(" ended-threads %.2f", whole - threads);
    printf(" (%.2f s of CPU, system %.2f)\n", whole, whole_system);
}

#endif
