/*  shoal_alloc: allocations that return memory or end the process.

    The release build defines NDEBUG, so an assert after malloc is compiled
    out and a failed allocation would go on to write through NULL. A node
    cannot go on without the memory it asked for, and neither can a client
    halfway through copying a reply: like czmq's zmalloc, these say on stderr
    how many bytes were wanted and abort. A size of 0 asks for 1 byte, so
    that NULL from the system always means failure.

    Code that can refuse one request and keep serving (a message larger than
    memory allows, a value read from disk) checks malloc itself instead.
*/
#ifndef SHOAL_ALLOC_H_INCLUDED
#define SHOAL_ALLOC_H_INCLUDED

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

//  Prints what was wanted and aborts; never returns.
static inline void
shoal_alloc_fail(size_t size)
{
    fprintf(stderr, "shoal: out of memory: %zu bytes wanted\n", size);
    fflush(stderr);
    abort();
}

//  SIZE bytes, not zeroed; the caller frees them.
static inline void *
shoal_malloc(size_t size)
{
    void *memory = malloc(size ? size : 1);
    if (!memory)
        shoal_alloc_fail(size);
    return memory;
}

//  COUNT items of SIZE bytes, zeroed; the caller frees them.
static inline void *
shoal_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        shoal_alloc_fail(SIZE_MAX);
    void *memory = calloc(count && size ? count : 1, count && size ? size : 1);
    if (!memory)
        shoal_alloc_fail(count * size);
    return memory;
}

//  POINTER (NULL or from these functions or malloc) grown or shrunk to SIZE
//  bytes; on return the old pointer is no longer valid.
static inline void *
shoal_realloc(void *pointer, size_t size)
{
    void *memory = realloc(pointer, size ? size : 1);
    if (!memory)
        shoal_alloc_fail(size);
    return memory;
}

//  A copy of TEXT; the caller frees it.
static inline char *
shoal_strdup(const char *text)
{
    size_t size = strlen(text) + 1;
    char *copy = (char *) shoal_malloc(size);
    memcpy(copy, text, size);
    return copy;
}

//  A copy of at most the first MAX bytes of TEXT, ended by a null byte; the
//  caller frees it.
static inline char *
shoal_strndup(const char *text, size_t max)
{
    size_t length = strnlen(text, max);
    char *copy = (char *) shoal_malloc(length + 1);
    memcpy(copy, text, length);
    copy[length] = 0;
    return copy;
}

//  Frees *ITEM_P, one allocated block, and sets it to NULL: the destructor
//  of a czmq container whose items are such blocks.
static inline void
shoal_free_item(void **item_p)
{
    free(*item_p);
    *item_p = NULL;
}

//  The size of a huge page, which shoal_map_huge aligns to.
#define SHOAL_HUGE_PAGE ((size_t) 2 * 1024 * 1024)

//  BYTES of zeroed memory in a mapping of their own, aligned to a huge page
//  and asking the kernel to back them with huge pages (MADV_HUGEPAGE: the
//  usual setting of transparent huge pages). For buffers that direct I/O
//  reads or writes: a disk request takes a bounded number of physically
//  contiguous runs, and in 4 KiB pages a megabyte is 256 of them. Pages
//  are backed as they are first touched. Returns NULL when the mapping
//  fails; the caller gives it back with munmap(MEMORY, BYTES).
static inline void *
shoal_map_huge(size_t bytes)
{
    //  Mapped a huge page larger, then trimmed to the aligned BYTES.
    size_t mapped = bytes + SHOAL_HUGE_PAGE;
    uint8_t *base = (uint8_t *) mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    uint8_t *aligned = (uint8_t *) (((uintptr_t) base + SHOAL_HUGE_PAGE - 1) & ~(uintptr_t) (SHOAL_HUGE_PAGE - 1));
    if (aligned > base)
        munmap(base, (size_t) (aligned - base));
    size_t after = (size_t) (base + mapped - (aligned + bytes));
    if (after)
        munmap(aligned + bytes, after);
    madvise(aligned, bytes, MADV_HUGEPAGE);
    return aligned;
}

//  Sets glibc's allocator up as shoald runs it (and the benchmarks' raw
//  sides, so that they compare like with like):
//  - libzmq allocates and frees message buffers at a high rate; without the
//    first two, glibc trims and re-faults the heap on every large message;
//  - glibc gives each thread that meets a locked arena an arena of its own,
//    up to eight per core: the loader's table makers each faulted in a
//    fresh heap. Two arenas per core are shared instead.
static inline void
shoal_malloc_tune(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    mallopt(M_ARENA_MAX, (int) (2 * (cores > 0 ? cores : 1)));
}

#endif
