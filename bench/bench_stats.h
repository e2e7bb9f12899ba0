/*  bench_stats: the figures every benchmark reduces its runs to.

    The machine is noisy (limits.md): a benchmark quotes the median of its
    repetitions, never one run.
*/
#ifndef BENCH_STATS_H_INCLUDED
#define BENCH_STATS_H_INCLUDED

#include <stddef.h>
#include <stdlib.h>

static inline int
bench_compare_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  The median of COUNT values, which it sorts in place (the mean of the two
//  middle ones for an even count); 0 when there are none.
static inline double
bench_median(double *values, size_t count)
{
    if (count == 0)
        return 0;
    qsort(values, count, sizeof *values, bench_compare_double);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

#endif
