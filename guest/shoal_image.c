/*  shoal_image: the guest directory, its image format and its dirty log, as
    shoal_image.h describes them.

    DESIGN

    Layout. The image file is page 0 (the header), the kv pages, then the
    load pages; the disk file is blocks of SHOAL_IMAGE_PAGE. Every load page
    and every disk block starts with a stamp (magic naming the object, page
    index, sequence number, checksum of the rest of the page) and is filled
    from a generator seeded by (object, index, sequence), so two writes of
    the same page never leave the same bytes and a copy that missed a write
    differs from the image.

    The dirty log. The dirty file is the memory bitmap, then the disk
    bitmap. A writer (the guest's load, or the node writing the kv area or
    the header) does, for each page:

        1. name the page (and the write's sequence) as in flight, in the header
        2. set the page's bit (atomic OR)
        3. write the page
        4. set the page's bit again (atomic OR, release)
        5. clear the in-flight name

    A harvest swaps each bitmap word with zero (atomic exchange, acquire),
    then adds the in-flight page and, for memory, page 0, and the caller
    copies what it took. Why each step is there:

      - Step 4 covers a page copied while it was being written: if the
        harvest took the bit of step 2, the copy may be torn, but step 4
        marks the page again after the last byte, so the next round copies
        it whole. If the harvest took the bit of step 4, release/acquire
        make every byte of the write visible to the copy.
      - Steps 1 and 2 cover a guest stopped (SIGSTOP) mid-write: its bit is
        set, or was taken by a running round whose copy may be torn; then
        the in-flight name still holds, and the final harvest (with the
        guest stopped, so nothing moves) takes the page again.
      - Page 0 is in every memory harvest: the header changes every
        millisecond anyway (the tick), and copying it each round means a
        header write cut short by a stop is carried as it stands, with no
        marking protocol of its own to get right. Header writes still mark
        page 0, so a baseline-free caller sees them too.
      - A guest stopped mid-write leaves a torn page that its process would
        have finished. The in-flight name lives in the header, so it moves
        with the image; the next run (here or on another node) rewrites
        that page from its sequence first (shoal_image_recover), and verify
        accepts that one page torn meanwhile.

    A page that is dirty in no harvest was therefore not written since the
    harvest that last copied it whole: nothing is lost, at the price of
    copying a page twice now and then.

    Pristine pages. A page never written is all zeros, as fresh memory is:
    verify accepts it, a move's baseline does not send it, and create has
    nothing to write but the header (a guest of 2 GiB is made in
    milliseconds, not seconds). The source's files are allocated
    (fallocate) so that the guest cannot run out of space mid-run; a move's
    target writes its copy with pwrite into files made sparse, as writing a
    fresh allocated file, or faulting a mapping page by page, costs 3-4
    times as much here (512 MiB: 0.15 s by pwrite into a sparse file,
    0.46-0.68 s into an allocated one, 0.16-0.64 s to populate a mapping).
    The pages written take their space then (a full disk fails the move);
    the holes left by pages never written are checked to fit at create but
    not reserved: allocating them after the baseline of a 2 GiB guest held
    the node's synced commits, and the downtime, up to 1.5 s here.
    Mappings are not populated: a node opening an image to read its tick
    or kv area touches a few pages, and a guest's first write to a page
    faults once, within its paced load. MADV_HUGEPAGE is asked for on every
    mapping: it helps where the directory is on tmpfs with huge pages
    enabled for shmem, and costs nothing elsewhere. A move's sender reads
    the pages it sends with shoal_image_read_pages (pread), not through its
    mapping: where the hypervisor shadows page tables (this machine), the
    first touch of each 4 KiB page of a mapping cost 15 us, 3.9 s for a
    GiB of a tmpfs file where pread read it in 0.2 s, and an 8 GiB
    baseline spent a third of its time so.

    Where memory lives. A guest's memory is the image file, mapped shared.
    On a disk's file system every page the guest writes is a dirty page of
    the page cache, written back by the kernel and counted in its
    dirty-page throttling, which holds any writer on the machine once dirty
    and in-writeback pages pass its limit: in moves of an 8 GiB guest
    writing 50 MB/s, with the move's target image written on the same disk,
    they stayed at 2.3-4.3 GiB for most of the move (limit 4.6 GiB), and
    the guest's own faults waited there (its longest gap 609-801 ms, and
    716-801 ms where a still guest beside it saw 266-427 ms; the move
    89-163 s, 4.8-4.9 times the raw stream of its bytes). A VM's memory is in
    RAM, not in a file on disk: shoal_image_create_in puts the image file
    and the dirty log in a directory of their own under a memory directory
    (guest/memory_dir, a tmpfs), linked from the guest directory by their
    usual names, so that everything that opens a guest directory finds
    them and shoal_image_remove takes them too; the disk file stays in the
    guest directory. There nothing is written back: the same moves took
    48-97 s (2.4-2.7 times the raw stream), and their guests' longest
    gaps were of a still guest's size on the same machine meanwhile. A
    tmpfs of small pages is slower to fill than ext4's page cache (an idle
    2 GiB guest moved at 0.38 of raw into /dev/shm, 0.63 into ext4), one
    mounted with huge pages (huge=within_size) faster (0.99).
    Each guest's directory there has a name of its own (mkdtemp), since
    two nodes of one machine (a move between them) may share the memory
    directory and the same guest name: GUEST-TAG-XXXXXX, where TAG is a
    hash of the real path of the directory the guest directories lie in
    (a node's guest/dir), so that a node's fsck can tell its own from
    another node's even when no guest directory links to one any more
    (shoal_image_memory_owned). What it costs: a tmpfs allocates
    what fallocate asks for, so a guest's memory is taken whole at create
    (as a VM's), and a move on one machine holds two copies in RAM until
    the source's goes; and a tmpfs does not outlive the machine: after a
    reboot the guest directory's links lead nowhere, the guest cannot be
    started from its image (guest/restart_at_start fails for it and its
    claim turns error), as a VM's memory is lost with its host. A restart
    of the node alone keeps it: guests run in sessions of their own.
*/
#include "shoal_image.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

//  "SHOALIMG", "SHOALMEM", "SHOALDSK" as little-endian words: the header's
//  magic and the stamps' magic per object.
#define IMAGE_MAGIC UINT64_C(0x474d494c414f4853)
#define IMAGE_STAMP_MEMORY UINT64_C(0x4d454d4c414f4853)
#define IMAGE_STAMP_DISK UINT64_C(0x4b53444c414f4853)
//  File names inside a guest directory.
#define IMAGE_FILE "image"
#define IMAGE_DISK_FILE "disk"
#define IMAGE_DIRTY_FILE "dirty"
#define IMAGE_PID_FILE "pid"
//  Bits per bitmap word.
#define IMAGE_WORD_BITS 64
//  Largest memory or disk a guest may have (1 TiB); keeps every size
//  computation far from overflow.
#define IMAGE_BYTES_MAX (UINT64_C(1) << 40)
//  The header's in-flight name: the top bit says disk, the rest is the page
//  index plus one (0: nothing in flight).
#define IMAGE_INFLIGHT_DISK (UINT64_C(1) << 63)
//  A verify that finds a bad page reads it again this many times, this many
//  ms apart, before it reports it: on a live image the page may have been
//  caught mid-write.
#define IMAGE_VERIFY_TRIES 4
#define IMAGE_VERIFY_PAUSE_MS 2
//  Room for a path inside a guest directory.
#define IMAGE_PATH_MAX 4096
//  Room for a guest's directory under the memory directory: a file name
//  of its own still fits after it.
#define IMAGE_MEMORY_PATH_MAX (IMAGE_PATH_MAX - 64)
//  A memory directory's name: hex digits of the tag, mkdtemp's template.
#define IMAGE_MEMORY_TAG 16
#define IMAGE_MEMORY_UNIQUE "XXXXXX"
//  Room for a pid written as text.
#define IMAGE_PID_TEXT 32
//  Constants of the page generator and checksum (splitmix64's and
//  xxhash64's primes: well-mixed odd numbers).
#define IMAGE_MIX_GOLDEN UINT64_C(0x9e3779b97f4a7c15)
#define IMAGE_MIX_A UINT64_C(0xbf58476d1ce4e5b9)
#define IMAGE_MIX_B UINT64_C(0x94d049bb133111eb)
#define IMAGE_SUM_PRIME UINT64_C(0x9fb21c651e98df25)
//  Checksum lanes: independent multiply chains, so the sum runs at the
//  speed of the multiplier's throughput rather than its latency.
#define IMAGE_SUM_LANES 4
#define NS_PER_MS 1000000

//  Page 0 of the image. Fields the guest and node both touch are accessed
//  with atomics only.
typedef struct {
    uint64_t magic;             //  IMAGE_MAGIC
    uint32_t version;           //  SHOAL_IMAGE_VERSION
    uint32_t page_size;         //  SHOAL_IMAGE_PAGE when written
    uint64_t memory_pages;      //  pages of the image file, header and kv included
    uint64_t disk_blocks;       //  blocks of the disk file
    uint64_t kv_first;          //  first kv page
    uint64_t kv_pages;          //  kv pages
    uint64_t load_first;        //  first page the load writes
    uint64_t kv_slots;          //  SHOAL_IMAGE_KV_SLOTS when written
    uint64_t rate;              //  load bytes/s, written by the node, reread by the guest
    uint64_t sequence;          //  last stamp sequence number reserved
    uint64_t writes;            //  pages and blocks written by the load
    uint64_t disk_writes;       //  of which disk blocks
    uint64_t tick_ms;           //  wall time of the last tick; 0 before the first
    uint64_t max_gap_ms;        //  longest gap between two ticks since the last reset
    uint64_t inflight;          //  the page being written now (see DESIGN), 0 for none
    uint64_t inflight_sequence; //  that write's sequence number
    uint64_t throttle;          //  percent of the load's rate withheld, written by the node (a move's
                                //  auto-converge); 0 in images made before it existed
    uint64_t max_gap_at_ms;     //  wall time of the tick that began the longest gap; 0 in images made
                                //  before it existed
    uint64_t run_tick_ms;       //  wall time of the first tick of the run that ticks now (a moved
                                //  guest's first on its target); 0 in images made before it existed
} image_header_t;

//  One kv slot; a slot whose key is empty is free.
typedef struct {
    uint32_t size;                              //  bytes of value
    char key[SHOAL_IMAGE_KV_KEY_MAX + 1];       //  NUL-terminated
    uint8_t value[SHOAL_IMAGE_KV_VALUE_MAX];    //  the value's bytes
} image_kv_slot_t;

//  What starts every load page and disk block.
typedef struct {
    uint64_t magic;             //  IMAGE_STAMP_MEMORY or IMAGE_STAMP_DISK
    uint64_t index;             //  the page's own index
    uint64_t sequence;          //  the write's sequence number (0: written at create)
    uint64_t checksum;          //  of the stamp's other fields and the rest of the page
} image_stamp_t;

#define IMAGE_KV_BYTES (SHOAL_IMAGE_KV_SLOTS * sizeof (image_kv_slot_t))
#define IMAGE_KV_PAGES ((IMAGE_KV_BYTES + SHOAL_IMAGE_PAGE - 1) / SHOAL_IMAGE_PAGE)
#define IMAGE_PAYLOAD_WORDS ((SHOAL_IMAGE_PAGE - sizeof (image_stamp_t)) / sizeof (uint64_t))

_Static_assert(sizeof (image_header_t) <= SHOAL_IMAGE_PAGE, "the header fits page 0");
_Static_assert(SHOAL_IMAGE_PAGE % sizeof (uint64_t) == 0, "pages are whole words");
_Static_assert(IMAGE_PAYLOAD_WORDS % IMAGE_SUM_LANES == 0, "the checksum lanes share the payload");

struct _shoal_image_t {
    char *dir;                  //  the guest directory
    uint8_t *memory;            //  the image file, mapped shared
    size_t memory_size;         //  its bytes
    uint8_t *disk;              //  the disk file, mapped shared; NULL when empty
    size_t disk_size;           //  its bytes
    uint8_t *dirty;             //  the dirty file, mapped shared
    size_t dirty_size;          //  its bytes
    image_header_t *header;     //  page 0 of memory
    bool ticked;                //  this handle ticked already: its run's first tick is recorded
    uint64_t *bits[2];          //  the dirty bitmaps, by shoal_image_object_t
    size_t words[2];            //  their sizes in words
    size_t pages[2];            //  pages of memory, blocks of disk
    int fds[2];                 //  the files, for pread, pwrite and lseek; -1 until needed
    //  The last data range found in each file (pages): [data_first,
    //  data_end), and before it a hole from hole_first.
    size_t hole_first[2];
    size_t data_first[2];
    size_t data_end[2];
};

// ---------------------------------------------------------------------------
//  Small helpers

static int
s_image_fail(char **error_p, const char *format, ...) __attribute__((format(printf, 2, 3)));

//  Sets *ERROR_P to a new message (when ERROR_P is not NULL). Returns -1.
static int
s_image_fail(char **error_p, const char *format, ...)
{
    if (error_p) {
        va_list args;
        va_start(args, format);
        char *text = NULL;
        if (vasprintf(&text, format, args) < 0)
            text = NULL;
        va_end(args);
        *error_p = text;
    }
    return -1;
}

static size_t
s_words_for(size_t pages)
{
    return (pages + IMAGE_WORD_BITS - 1) / IMAGE_WORD_BITS;
}

static void
s_image_path(char *path, const char *dir, const char *name)
{
    snprintf(path, IMAGE_PATH_MAX, "%s/%s", dir, name);
}

static void
s_map_advise(void *data, size_t size)
{
    //  Only a hint: refused where the mapping cannot have huge pages.
    if (data && size)
        (void) madvise(data, size, MADV_HUGEPAGE);
}

static uint64_t
s_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= IMAGE_MIX_A;
    x ^= x >> 27;
    x *= IMAGE_MIX_B;
    x ^= x >> 31;
    return x;
}

//  The checksum of a stamped page: its stamp's magic, index and sequence,
//  then every payload word.
static uint64_t
s_page_checksum(const image_stamp_t *stamp, const uint64_t *payload)
{
    uint64_t lanes[IMAGE_SUM_LANES] = { stamp->magic, stamp->index, stamp->sequence,
                                        IMAGE_SUM_PRIME };
    for (size_t i = 0; i < IMAGE_PAYLOAD_WORDS; i += IMAGE_SUM_LANES)
        for (size_t lane = 0; lane < IMAGE_SUM_LANES; lane++)
            lanes[lane] = (lanes[lane] ^ payload[i + lane]) * IMAGE_SUM_PRIME;
    uint64_t sum = 0;
    for (size_t lane = 0; lane < IMAGE_SUM_LANES; lane++)
        sum = s_mix(sum ^ lanes[lane]);
    return sum;
}

//  Fills PAGE with the stamp and payload of write SEQUENCE of page INDEX.
static void
s_page_fill(uint8_t *page, uint64_t magic, uint64_t index, uint64_t sequence)
{
    image_stamp_t stamp = { .magic = magic, .index = index, .sequence = sequence };
    uint64_t *payload = (uint64_t *) (page + sizeof stamp);
    uint64_t seed = s_mix(magic ^ s_mix(index) ^ (sequence * IMAGE_MIX_GOLDEN));
    for (size_t i = 0; i < IMAGE_PAYLOAD_WORDS; i++)
        payload[i] = s_mix(seed + i * IMAGE_MIX_GOLDEN);
    stamp.checksum = s_page_checksum(&stamp, payload);
    memcpy(page, &stamp, sizeof stamp);
}

static uint64_t
s_stamp_magic(shoal_image_object_t object)
{
    return object == SHOAL_IMAGE_DISK ? IMAGE_STAMP_DISK : IMAGE_STAMP_MEMORY;
}

static const char *
s_object_page_name(shoal_image_object_t object)
{
    return object == SHOAL_IMAGE_DISK ? "disk block" : "memory page";
}

static void
s_mark(shoal_image_t *self, shoal_image_object_t object, size_t index, int order)
{
    __atomic_fetch_or(&self->bits[object][index / IMAGE_WORD_BITS],
                      UINT64_C(1) << (index % IMAGE_WORD_BITS), order);
}

static uint64_t
s_inflight_name(shoal_image_object_t object, size_t index)
{
    return ((uint64_t) index + 1) | (object == SHOAL_IMAGE_DISK ? IMAGE_INFLIGHT_DISK : 0);
}

//  Steps 1-2 of the dirty-log protocol (see DESIGN) for page INDEX, written
//  with sequence SEQUENCE.
static void
s_write_begin(shoal_image_t *self, shoal_image_object_t object, size_t index, uint64_t sequence)
{
    __atomic_store_n(&self->header->inflight_sequence, sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&self->header->inflight, s_inflight_name(object, index), __ATOMIC_SEQ_CST);
    //  Acquire as well as release: the page's bytes must not be written
    //  before the bit is set.
    s_mark(self, object, index, __ATOMIC_ACQ_REL);
}

//  Steps 4-5: marks the page again once its last byte is written.
static void
s_write_end(shoal_image_t *self, shoal_image_object_t object, size_t index)
{
    s_mark(self, object, index, __ATOMIC_RELEASE);
    __atomic_store_n(&self->header->inflight, 0, __ATOMIC_RELEASE);
}

//  Steps 2 and 4 alone, for writes of the header and the kv area. They do
//  not name themselves in flight: the node writes too, concurrently with the
//  guest, and must not overwrite the name of the guest's page; and neither
//  needs it (the node is never stopped mid-write, and page 0 is in every
//  harvest).
static void
s_mark_begin(shoal_image_t *self, size_t index)
{
    s_mark(self, SHOAL_IMAGE_MEMORY, index, __ATOMIC_ACQ_REL);
}

static void
s_mark_end(shoal_image_t *self, size_t index)
{
    s_mark(self, SHOAL_IMAGE_MEMORY, index, __ATOMIC_RELEASE);
}

//  Header fields are written by both the guest and the node; every change
//  marks page 0 around it like any other write.
static void
s_header_store(shoal_image_t *self, uint64_t *field, uint64_t value)
{
    s_mark_begin(self, 0);
    __atomic_store_n(field, value, __ATOMIC_RELEASE);
    s_mark_end(self, 0);
}

static uint64_t
s_header_load(uint64_t *field)
{
    return __atomic_load_n(field, __ATOMIC_ACQUIRE);
}

// ---------------------------------------------------------------------------
//  Files

//  Creates PATH of SIZE bytes, its blocks allocated now so that a full disk
//  is an error here rather than a SIGBUS in a running guest; SPARSE only
//  checks that the file system has room for it (see DESIGN).
static int
s_file_create(const char *path, uint64_t size, bool sparse, char **error_p)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return s_image_fail(error_p, "%s: %s", path, strerror(errno));
    int rc = 0;
    struct statvfs fs;
    if (size > 0 && sparse) {
        if (fstatvfs(fd, &fs) == 0 && (uint64_t) fs.f_bavail * fs.f_frsize < size)
            rc = s_image_fail(error_p, "%s: needs %" PRIu64 " bytes, %" PRIu64 " free", path, size,
                              (uint64_t) fs.f_bavail * fs.f_frsize);
        else
        if (ftruncate(fd, (off_t) size) != 0)
            rc = s_image_fail(error_p, "%s: cannot size it to %" PRIu64 " bytes: %s", path, size,
                              strerror(errno));
    }
    else
    if (size > 0) {
        int error = posix_fallocate(fd, 0, (off_t) size);
        if (error != 0)
            rc = s_image_fail(error_p, "%s: cannot allocate %" PRIu64 " bytes: %s", path, size,
                              strerror(error));
    }
    close(fd);
    return rc;
}

//  Maps PATH shared, read-write, populated. *SIZE_P gets its size; a file
//  of EXPECTED bytes is required unless EXPECTED is 0 (any size but empty).
static uint8_t *
s_file_map(const char *path, size_t expected, size_t *size_p, char **error_p)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        s_image_fail(error_p, "%s: %s", path, strerror(errno));
        return NULL;
    }
    uint8_t *data = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0)
        s_image_fail(error_p, "%s: %s", path, strerror(errno));
    else
    if (expected && (uint64_t) st.st_size != expected)
        s_image_fail(error_p, "%s: %jd bytes, expected %zu", path, (intmax_t) st.st_size,
                     expected);
    else
    if (st.st_size == 0)
        s_image_fail(error_p, "%s: empty", path);
    else {
        void *mapped = mmap(NULL, (size_t) st.st_size, PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
        if (mapped == MAP_FAILED)
            s_image_fail(error_p, "%s: cannot map: %s", path, strerror(errno));
        else {
            data = mapped;
            *size_p = (size_t) st.st_size;
            s_map_advise(data, *size_p);
        }
    }
    close(fd);
    return data;
}

static void
s_file_unmap(uint8_t **data_p, size_t size)
{
    if (*data_p) {
        munmap(*data_p, size);
        *data_p = NULL;
    }
}

// ---------------------------------------------------------------------------
//  Create, open, remove

//  The files of DIR, by name: where each one lies (in DIR, or in the
//  guest's directory under the memory directory, linked from DIR).
typedef struct {
    char memory[IMAGE_MEMORY_PATH_MAX]; //  the guest's directory under MEMORY_DIR; "" when memory lies in DIR
    char image[IMAGE_PATH_MAX];     //  the image file
    char disk[IMAGE_PATH_MAX];      //  the disk file, always in DIR
    char dirty[IMAGE_PATH_MAX];     //  the dirty log
} s_image_paths_t;

//  The tag of the guest directories under GUESTS_DIR (a real path) in
//  their memory directories' names: FNV-1a of the path, as 16 hex digits.
static void
s_memory_tag(const char *guests_dir, char tag[IMAGE_MEMORY_TAG + 1])
{
    uint64_t hash = UINT64_C(0xcbf29ce484222325);
    for (const char *c = guests_dir; *c; c++)
        hash = (hash ^ (uint8_t) *c) * UINT64_C(0x100000001b3);
    snprintf(tag, IMAGE_MEMORY_TAG + 1, "%016" PRIx64, hash);
}

bool
shoal_image_memory_owned(const char *guests_dir, const char *name)
{
    char real[PATH_MAX], tag[IMAGE_MEMORY_TAG + 1];
    if (!realpath(guests_dir, real))
        return false;
    s_memory_tag(real, tag);
    //  GUEST-TAG-XXXXXX: a guest name of at least one character.
    size_t size = strlen(name), unique = sizeof IMAGE_MEMORY_UNIQUE - 1;
    if (size < 1 + 1 + IMAGE_MEMORY_TAG + 1 + unique)
        return false;
    const char *at = name + size - unique - 1 - IMAGE_MEMORY_TAG - 1;
    return at[0] == '-' && memcmp(at + 1, tag, IMAGE_MEMORY_TAG) == 0 && at[1 + IMAGE_MEMORY_TAG] == '-';
}

//  Makes the guest's directory under MEMORY_DIR (a name of its own, so
//  that two nodes sharing a memory directory never meet) and links DIR's
//  image and dirty file names to the files to be made there. Fails with
//  EEXIST, leaving DIR alone, when DIR holds an image already. Returns 0,
//  or -1 with *ERROR_P.
static int
s_memory_link(const char *dir, const char *memory_dir, s_image_paths_t *paths, char **error_p)
{
    char root[PATH_MAX];
    if (!realpath(memory_dir, root))
        return s_image_fail(error_p, "%s: the memory directory: %s", memory_dir, strerror(errno));
    char guests[PATH_MAX], tag[IMAGE_MEMORY_TAG + 1];
    if (!realpath(dir, guests))
        return s_image_fail(error_p, "%s: %s", dir, strerror(errno));
    char *slash = strrchr(guests, '/');
    if (slash == guests)
        slash[1] = 0;   //  a guest directory right under /
    else
        *slash = 0;
    s_memory_tag(guests, tag);
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    int size = snprintf(paths->memory, sizeof paths->memory, "%s/%.200s-%s-" IMAGE_MEMORY_UNIQUE, root, base, tag);
    if (size < 0 || (size_t) size >= sizeof paths->memory) {
        paths->memory[0] = 0;
        return s_image_fail(error_p, "%s: the memory directory's path is too long", root);
    }
    if (!mkdtemp(paths->memory)) {
        int error = errno;
        paths->memory[0] = 0;
        return s_image_fail(error_p, "%s: cannot make a directory there: %s", root, strerror(error));
    }
    s_image_path(paths->image, paths->memory, IMAGE_FILE);
    s_image_path(paths->dirty, paths->memory, IMAGE_DIRTY_FILE);
    char link[IMAGE_PATH_MAX];
    s_image_path(link, dir, IMAGE_FILE);
    if (symlink(paths->image, link) != 0) {
        int error = errno;
        rmdir(paths->memory);
        paths->memory[0] = 0;
        return s_image_fail(error_p, "%s: %s", link, strerror(error));
    }
    s_image_path(link, dir, IMAGE_DIRTY_FILE);
    if (symlink(paths->dirty, link) != 0)
        return s_image_fail(error_p, "%s: %s", link, strerror(errno));
    return 0;
}

static int
s_image_create(const char *dir, const char *memory_dir, uint64_t memory_bytes, uint64_t disk_bytes, uint64_t rate,
               bool sparse, char **error_p)
{
    if (error_p)
        *error_p = NULL;
    if (memory_bytes == 0)
        return s_image_fail(error_p, "%s: memory must be at least one byte", dir);
    if (memory_bytes > IMAGE_BYTES_MAX || disk_bytes > IMAGE_BYTES_MAX)
        return s_image_fail(error_p, "%s: memory and disk are limited to %" PRIu64 " bytes", dir,
                            IMAGE_BYTES_MAX);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return s_image_fail(error_p, "%s: %s", dir, strerror(errno));

    size_t load_pages = (size_t) ((memory_bytes + SHOAL_IMAGE_PAGE - 1) / SHOAL_IMAGE_PAGE);
    size_t memory_pages = 1 + IMAGE_KV_PAGES + load_pages;
    size_t disk_blocks = (size_t) ((disk_bytes + SHOAL_IMAGE_PAGE - 1) / SHOAL_IMAGE_PAGE);
    size_t dirty_size = (s_words_for(memory_pages) + s_words_for(disk_blocks)) * sizeof (uint64_t);

    s_image_paths_t paths = { .memory = "" };
    s_image_path(paths.image, dir, IMAGE_FILE);
    s_image_path(paths.disk, dir, IMAGE_DISK_FILE);
    s_image_path(paths.dirty, dir, IMAGE_DIRTY_FILE);
    int rc = -1;
    char path[IMAGE_PATH_MAX];
    if (memory_dir && *memory_dir && s_memory_link(dir, memory_dir, &paths, error_p) != 0) {
        if (!paths.memory[0])
            return -1;  //  Most likely an image is there already: leave it alone.
        goto cleanup;
    }
    if (s_file_create(paths.image, (uint64_t) memory_pages * SHOAL_IMAGE_PAGE, sparse, error_p) != 0) {
        if (!paths.memory[0])
            return -1;  //  Likewise.
        goto cleanup;
    }
    if (s_file_create(paths.disk, (uint64_t) disk_blocks * SHOAL_IMAGE_PAGE, sparse, error_p) != 0)
        goto cleanup;
    if (s_file_create(paths.dirty, dirty_size, false, error_p) != 0)
        goto cleanup;

    //  The header is all there is to write: the kv area and every page
    //  and block start as zeros, pristine (see DESIGN).
    image_header_t header = {
        .magic = IMAGE_MAGIC, .version = SHOAL_IMAGE_VERSION, .page_size = SHOAL_IMAGE_PAGE,
        .memory_pages = memory_pages, .disk_blocks = disk_blocks, .kv_first = 1,
        .kv_pages = IMAGE_KV_PAGES, .load_first = 1 + IMAGE_KV_PAGES,
        .kv_slots = SHOAL_IMAGE_KV_SLOTS, .rate = rate,
    };
    int fd = open(paths.image, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        s_image_fail(error_p, "%s: %s", paths.image, strerror(errno));
        goto cleanup;
    }
    ssize_t written = pwrite(fd, &header, sizeof header, 0);
    int error = errno;
    close(fd);
    if (written != (ssize_t) sizeof header) {
        s_image_fail(error_p, "%s: cannot write the header: %s", paths.image,
                     written < 0 ? strerror(error) : "short write");
        goto cleanup;
    }
    rc = 0;

cleanup:
    if (rc != 0) {
        const char *names[] = { IMAGE_FILE, IMAGE_DISK_FILE, IMAGE_DIRTY_FILE };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            s_image_path(path, dir, names[i]);
            unlink(path);
        }
        if (paths.memory[0]) {
            unlink(paths.image);
            unlink(paths.dirty);
            rmdir(paths.memory);
        }
        rmdir(dir);     //  Only if it is empty: a directory the caller made stays.
    }
    return rc;
}

int
shoal_image_create(const char *dir, uint64_t memory_bytes, uint64_t disk_bytes, uint64_t rate,
                   char **error_p)
{
    return s_image_create(dir, NULL, memory_bytes, disk_bytes, rate, false, error_p);
}

int
shoal_image_create_in(const char *dir, const char *memory_dir, uint64_t memory_bytes, uint64_t disk_bytes,
                      uint64_t rate, char **error_p)
{
    return s_image_create(dir, memory_dir, memory_bytes, disk_bytes, rate, false, error_p);
}

int
shoal_image_create_sparse(const char *dir, uint64_t memory_bytes, uint64_t disk_bytes,
                          char **error_p)
{
    return s_image_create(dir, NULL, memory_bytes, disk_bytes, 0, true, error_p);
}

int
shoal_image_create_sparse_in(const char *dir, const char *memory_dir, uint64_t memory_bytes, uint64_t disk_bytes,
                             char **error_p)
{
    return s_image_create(dir, memory_dir, memory_bytes, disk_bytes, 0, true, error_p);
}

//  Checks the header against the sizes of the files that hold the image.
static int
s_image_check_header(shoal_image_t *self, char **error_p)
{
    image_header_t *header = self->header;
    if (header->magic != IMAGE_MAGIC)
        return s_image_fail(error_p, "%s: not a shoal guest image (bad magic)", self->dir);
    if (header->version != SHOAL_IMAGE_VERSION)
        return s_image_fail(error_p, "%s: image version %u, expected %d", self->dir,
                            header->version, SHOAL_IMAGE_VERSION);
    if (header->page_size != SHOAL_IMAGE_PAGE)
        return s_image_fail(error_p, "%s: header: page size %u, expected %d", self->dir,
                            header->page_size, SHOAL_IMAGE_PAGE);
    if (header->memory_pages * SHOAL_IMAGE_PAGE != self->memory_size)
        return s_image_fail(error_p, "%s: header: %" PRIu64 " memory pages, the image file has %zu",
                            self->dir, header->memory_pages, self->memory_size / SHOAL_IMAGE_PAGE);
    if (header->kv_first != 1 || header->kv_pages != IMAGE_KV_PAGES
    ||  header->kv_slots != SHOAL_IMAGE_KV_SLOTS || header->load_first != 1 + IMAGE_KV_PAGES
    ||  header->load_first > header->memory_pages)
        return s_image_fail(error_p, "%s: header: kv area or load pages misplaced", self->dir);
    if (header->disk_blocks > IMAGE_BYTES_MAX / SHOAL_IMAGE_PAGE)
        return s_image_fail(error_p, "%s: header: %" PRIu64 " disk blocks is too many", self->dir,
                            header->disk_blocks);
    return 0;
}

shoal_image_t *
shoal_image_open(const char *dir, char **error_p)
{
    if (error_p)
        *error_p = NULL;
    shoal_image_t *self = calloc(1, sizeof *self);
    if (!self) {
        s_image_fail(error_p, "%s: out of memory", dir);
        return NULL;
    }
    self->dir = strdup(dir);
    self->fds[SHOAL_IMAGE_MEMORY] = self->fds[SHOAL_IMAGE_DISK] = -1;
    char path[IMAGE_PATH_MAX];
    if (!self->dir)
        goto fail;
    s_image_path(path, dir, IMAGE_FILE);
    self->memory = s_file_map(path, 0, &self->memory_size, error_p);
    if (!self->memory)
        goto fail;
    self->header = (image_header_t *) self->memory;
    if (self->memory_size < SHOAL_IMAGE_PAGE || self->memory_size % SHOAL_IMAGE_PAGE != 0) {
        s_image_fail(error_p, "%s: image file of %zu bytes is not whole pages", dir,
                     self->memory_size);
        goto fail;
    }
    if (s_image_check_header(self, error_p) != 0)
        goto fail;
    self->pages[SHOAL_IMAGE_MEMORY] = self->header->memory_pages;
    self->pages[SHOAL_IMAGE_DISK] = self->header->disk_blocks;
    if (self->pages[SHOAL_IMAGE_DISK] > 0) {
        s_image_path(path, dir, IMAGE_DISK_FILE);
        self->disk = s_file_map(path, self->pages[SHOAL_IMAGE_DISK] * SHOAL_IMAGE_PAGE,
                                &self->disk_size, error_p);
        if (!self->disk)
            goto fail;
    }
    self->words[SHOAL_IMAGE_MEMORY] = s_words_for(self->pages[SHOAL_IMAGE_MEMORY]);
    self->words[SHOAL_IMAGE_DISK] = s_words_for(self->pages[SHOAL_IMAGE_DISK]);
    s_image_path(path, dir, IMAGE_DIRTY_FILE);
    size_t dirty_size = (self->words[SHOAL_IMAGE_MEMORY] + self->words[SHOAL_IMAGE_DISK])
                        * sizeof (uint64_t);
    self->dirty = s_file_map(path, dirty_size, &self->dirty_size, error_p);
    if (!self->dirty)
        goto fail;
    self->bits[SHOAL_IMAGE_MEMORY] = (uint64_t *) self->dirty;
    self->bits[SHOAL_IMAGE_DISK] = self->bits[SHOAL_IMAGE_MEMORY] + self->words[SHOAL_IMAGE_MEMORY];
    return self;

fail:
    if (error_p && !*error_p)
        s_image_fail(error_p, "%s: out of memory", dir);
    shoal_image_destroy(&self);
    return NULL;
}

void
shoal_image_destroy(shoal_image_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    shoal_image_t *self = *self_p;
    s_file_unmap(&self->memory, self->memory_size);
    s_file_unmap(&self->disk, self->disk_size);
    s_file_unmap(&self->dirty, self->dirty_size);
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++)
        if (self->fds[object] >= 0)
            close(self->fds[object]);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

//  Removes every file of DIR (a guest directory has no subdirectories;
//  the node may keep a log there), then DIR. A DIR that is already gone is
//  removed, so destroy can be retried.
//  True when the SIZE bytes at DATA (whole words) are all zero.
static bool
s_zero(const uint8_t *data, size_t size)
{
    const uint64_t *words = (const uint64_t *) data;
    uint64_t any = 0;
    for (size_t i = 0; i < size / sizeof (uint64_t); i++)
        any |= words[i];
    return any == 0;
}

//  OBJECT's file, opened once. Returns its descriptor or -1 with *ERROR_P.
static int
s_image_fd(shoal_image_t *self, shoal_image_object_t object, char **error_p)
{
    if (self->fds[object] < 0) {
        char path[IMAGE_PATH_MAX];
        s_image_path(path, self->dir, object == SHOAL_IMAGE_DISK ? IMAGE_DISK_FILE : IMAGE_FILE);
        self->fds[object] = open(path, O_RDWR | O_CLOEXEC);
        if (self->fds[object] < 0)
            s_image_fail(error_p, "%s: %s", path, strerror(errno));
    }
    return self->fds[object];
}

//  True when page INDEX of OBJECT lies in a hole of its file: a range the
//  file system holds no data for (never written, or allocated and never
//  written), which reads as zeros without a page being touched.
static bool
s_in_hole(shoal_image_t *self, shoal_image_object_t object, size_t index)
{
    if (index < self->hole_first[object] || index >= self->data_end[object]) {
        int fd = s_image_fd(self, object, NULL);
        if (fd < 0)
            return false;
        size_t pages = self->pages[object];
        off_t data = lseek(fd, (off_t) (index * SHOAL_IMAGE_PAGE), SEEK_DATA);
        off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
        if (data < 0 && errno != ENXIO)
            return false;       //  no answer: the page is read
        self->hole_first[object] = index;
        self->data_first[object] = data < 0 ? pages : (size_t) data / SHOAL_IMAGE_PAGE;
        self->data_end[object] = hole < 0 ? pages
                               : ((size_t) hole + SHOAL_IMAGE_PAGE - 1) / SHOAL_IMAGE_PAGE;
        if (self->data_end[object] <= index)
            self->data_end[object] = index + 1;
    }
    return index < self->data_first[object];
}

bool
shoal_image_page_in_hole(shoal_image_t *self, shoal_image_object_t object, size_t index)
{
    return s_in_hole(self, object, index);
}

bool
shoal_image_copy_pristine(const void *page)
{
    //  The first word tells most written pages apart at once.
    return *(const uint64_t *) page == 0 && s_zero((const uint8_t *) page, SHOAL_IMAGE_PAGE);
}

int
shoal_image_read_pages(shoal_image_t *self, shoal_image_object_t object, size_t first, size_t count,
                       void *data, char **error_p)
{
    if (first + count > self->pages[object])
        return s_image_fail(error_p, "%s: pages %zu+%zu are past its %zu", self->dir, first, count,
                            self->pages[object]);
    if (s_image_fd(self, object, error_p) < 0)
        return -1;
    size_t size = count * SHOAL_IMAGE_PAGE;
    off_t offset = (off_t) (first * SHOAL_IMAGE_PAGE);
    uint8_t *bytes = (uint8_t *) data;
    while (size > 0) {
        ssize_t got = pread(self->fds[object], bytes, size, offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return s_image_fail(error_p, "%s: cannot read %s at %jd: %s", self->dir,
                                object == SHOAL_IMAGE_DISK ? IMAGE_DISK_FILE : IMAGE_FILE, (intmax_t) offset,
                                got < 0 ? strerror(errno) : "end of file");
        bytes += got;
        size -= (size_t) got;
        offset += got;
    }
    return 0;
}

bool
shoal_image_page_pristine(shoal_image_t *self, shoal_image_object_t object, size_t index)
{
    if (s_in_hole(self, object, index))
        return true;
    //  The first word tells most written pages apart at once.
    const uint8_t *page = shoal_image_page(self, object, index);
    return *(const uint64_t *) page == 0 && s_zero(page, SHOAL_IMAGE_PAGE);
}

int
shoal_image_write_pages(shoal_image_t *self, shoal_image_object_t object, size_t first, size_t count,
                        const void *data, char **error_p)
{
    if (first + count > self->pages[object])
        return s_image_fail(error_p, "%s: pages %zu+%zu are past its %zu", self->dir, first, count,
                            self->pages[object]);
    char path[IMAGE_PATH_MAX];
    s_image_path(path, self->dir, object == SHOAL_IMAGE_DISK ? IMAGE_DISK_FILE : IMAGE_FILE);
    if (s_image_fd(self, object, error_p) < 0)
        return -1;
    size_t size = count * SHOAL_IMAGE_PAGE;
    off_t offset = (off_t) (first * SHOAL_IMAGE_PAGE);
    const uint8_t *bytes = (const uint8_t *) data;
    while (size > 0) {
        ssize_t written = pwrite(self->fds[object], bytes, size, offset);
        if (written < 0 && errno == EINTR)
            continue;
        if (written <= 0)
            return s_image_fail(error_p, "%s: cannot write at %jd: %s", path, (intmax_t) offset,
                                written < 0 ? strerror(errno) : "no progress");
        bytes += written;
        size -= (size_t) written;
        offset += written;
    }
    return 0;
}

int
shoal_image_sync(shoal_image_t *self, shoal_image_object_t object, bool wait, char **error_p)
{
    if (object == SHOAL_IMAGE_DISK && !self->disk)
        return 0;
    char path[IMAGE_PATH_MAX];
    s_image_path(path, self->dir, object == SHOAL_IMAGE_DISK ? IMAGE_DISK_FILE : IMAGE_FILE);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return s_image_fail(error_p, "%s: %s", path, strerror(errno));
    int rc = wait ? fdatasync(fd) : sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    int error = errno;
    close(fd);
    if (rc)
        return s_image_fail(error_p, "%s: cannot %s: %s", path, wait ? "sync" : "start writeback",
                            strerror(error));
    return 0;
}

int
shoal_image_writeback(shoal_image_t *self, shoal_image_object_t object, uint64_t *offset_p, uint64_t window,
                      int64_t budget_us, bool *wrapped, char **error_p)
{
    *wrapped = false;
    uint64_t size = object == SHOAL_IMAGE_DISK ? self->disk_size : self->memory_size;
    if (size == 0 || window == 0)
        return 0;
    int fd = s_image_fd(self, object, error_p);
    if (fd < 0)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t deadline_us = (int64_t) now.tv_sec * 1000000 + now.tv_nsec / 1000 + budget_us;
    uint64_t offset = *offset_p < size ? *offset_p : 0;
    while (true) {
        uint64_t length = size - offset < window ? size - offset : window;
        if (sync_file_range(fd, (off_t) offset, (off_t) length, SYNC_FILE_RANGE_WRITE) != 0)
            return s_image_fail(error_p, "%s: cannot start writeback at %" PRIu64 ": %s", self->dir, offset,
                                strerror(errno));
        offset += length;
        if (offset >= size) {
            offset = 0;
            *wrapped = true;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t) now.tv_sec * 1000000 + now.tv_nsec / 1000 >= deadline_us)
            break;
    }
    *offset_p = offset;
    return 0;
}

int
shoal_image_remove(const char *dir)
{
    DIR *handle = opendir(dir);
    if (!handle)
        return errno == ENOENT ? 0 : -1;
    int fd = dirfd(handle);
    struct dirent *entry;
    char memory[IMAGE_PATH_MAX] = "";
    while ((entry = readdir(handle)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        //  The memory file and dirty log may lie in the memory directory,
        //  linked from here (see DESIGN): they go first, then their
        //  directory once empty.
        if (strcmp(entry->d_name, IMAGE_FILE) == 0 || strcmp(entry->d_name, IMAGE_DIRTY_FILE) == 0) {
            char target[IMAGE_PATH_MAX];
            ssize_t size = readlinkat(fd, entry->d_name, target, sizeof target - 1);
            if (size > 0 && target[0] == '/') {
                target[size] = 0;
                unlink(target);
                char *slash = strrchr(target, '/');
                *slash = 0;
                snprintf(memory, sizeof memory, "%s", target);
            }
        }
        unlinkat(fd, entry->d_name, 0);
    }
    closedir(handle);
    if (memory[0])
        rmdir(memory);
    //  Removed by another hand meanwhile: gone is what was asked.
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

int
shoal_image_pid(const char *dir)
{
    char path[IMAGE_PATH_MAX];
    s_image_path(path, dir, IMAGE_PID_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[IMAGE_PID_TEXT] = "";
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0)
        return 0;
    text[got] = 0;
    return atoi(text);
}

int
shoal_image_running(const char *dir)
{
    char path[IMAGE_PATH_MAX];
    s_image_path(path, dir, IMAGE_PID_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int pid = 0;
    //  The guest holds an exclusive lock for its lifetime: if a shared one
    //  can be had, the file is left over from a guest that has ended.
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        char text[IMAGE_PID_TEXT] = "";
        ssize_t got = read(fd, text, sizeof text - 1);
        if (got > 0) {
            text[got] = 0;
            pid = atoi(text);
        }
    }
    close(fd);
    return pid;
}

// ---------------------------------------------------------------------------
//  Pages and the dirty log

size_t
shoal_image_pages(shoal_image_t *self, shoal_image_object_t object)
{
    assert(object == SHOAL_IMAGE_MEMORY || object == SHOAL_IMAGE_DISK);
    return self->pages[object];
}

uint8_t *
shoal_image_page(shoal_image_t *self, shoal_image_object_t object, size_t index)
{
    if (index >= shoal_image_pages(self, object))
        return NULL;
    uint8_t *base = object == SHOAL_IMAGE_DISK ? self->disk : self->memory;
    return base + index * SHOAL_IMAGE_PAGE;
}

size_t
shoal_image_harvest(shoal_image_t *self, shoal_image_object_t object, uint64_t *bits,
                    size_t words)
{
    if (shoal_image_pages(self, object) == 0)
        return 0;
    //  Words beyond the caller's room stay dirty for a later harvest.
    size_t count = words < self->words[object] ? words : self->words[object];
    uint64_t *source = self->bits[object];
    size_t taken = 0;
    for (size_t i = 0; i < count; i++) {
        //  Reading first leaves clean words' cache lines unwritten; a bit set
        //  just after the read is simply taken by the next harvest.
        if (__atomic_load_n(&source[i], __ATOMIC_RELAXED) == 0)
            continue;
        uint64_t word = __atomic_exchange_n(&source[i], 0, __ATOMIC_ACQUIRE);
        taken += (size_t) __builtin_popcountll(word);
        bits[i] |= word;
    }
    //  Page 0 and the page being written are always taken (see DESIGN).
    if (object == SHOAL_IMAGE_MEMORY && count > 0 && !(bits[0] & 1)) {
        bits[0] |= 1;
        taken++;
    }
    uint64_t inflight = __atomic_load_n(&self->header->inflight, __ATOMIC_ACQUIRE);
    bool is_disk = (inflight & IMAGE_INFLIGHT_DISK) != 0;
    uint64_t index = (inflight & ~IMAGE_INFLIGHT_DISK) - 1;
    if (inflight && is_disk == (object == SHOAL_IMAGE_DISK) && index / IMAGE_WORD_BITS < count) {
        uint64_t bit = UINT64_C(1) << (index % IMAGE_WORD_BITS);
        if (!(bits[index / IMAGE_WORD_BITS] & bit)) {
            bits[index / IMAGE_WORD_BITS] |= bit;
            taken++;
        }
    }
    return taken;
}

void
shoal_image_mark_all(shoal_image_t *self, shoal_image_object_t object)
{
    size_t pages = shoal_image_pages(self, object);
    for (size_t i = 0; i < self->words[object]; i++) {
        size_t left = pages - i * IMAGE_WORD_BITS;
        uint64_t word = left >= IMAGE_WORD_BITS ? UINT64_MAX : (UINT64_C(1) << left) - 1;
        __atomic_fetch_or(&self->bits[object][i], word, __ATOMIC_RELEASE);
    }
}

size_t
shoal_image_load_first(shoal_image_t *self)
{
    return (size_t) self->header->load_first;
}

uint64_t
shoal_image_reserve(shoal_image_t *self, uint64_t count)
{
    uint64_t first = s_header_load(&self->header->sequence) + 1;
    s_header_store(self, &self->header->sequence, first + count - 1);
    return first;
}

void
shoal_image_write(shoal_image_t *self, shoal_image_object_t object, size_t index, uint64_t seq)
{
    uint8_t *page = shoal_image_page(self, object, index);
    assert(page);
    s_write_begin(self, object, index, seq);
    s_page_fill(page, s_stamp_magic(object), index, seq);
    s_write_end(self, object, index);
}

bool
shoal_image_recover(shoal_image_t *self)
{
    uint64_t inflight = s_header_load(&self->header->inflight);
    uint64_t sequence = s_header_load(&self->header->inflight_sequence);
    if (inflight == 0)
        return false;
    shoal_image_object_t object = inflight & IMAGE_INFLIGHT_DISK ? SHOAL_IMAGE_DISK
                                                                 : SHOAL_IMAGE_MEMORY;
    size_t index = (size_t) ((inflight & ~IMAGE_INFLIGHT_DISK) - 1);
    bool stamped = sequence > 0 && index < self->pages[object]
                && (object == SHOAL_IMAGE_DISK || index >= shoal_image_load_first(self));
    if (stamped)
        shoal_image_write(self, object, index, sequence);
    else
        s_header_store(self, &self->header->inflight, 0);
    return true;
}

void
shoal_image_add_writes(shoal_image_t *self, uint64_t memory_pages, uint64_t disk_blocks)
{
    image_header_t *header = self->header;
    s_mark_begin(self, 0);
    __atomic_fetch_add(&header->writes, memory_pages + disk_blocks, __ATOMIC_RELEASE);
    __atomic_fetch_add(&header->disk_writes, disk_blocks, __ATOMIC_RELEASE);
    s_mark_end(self, 0);
}

// ---------------------------------------------------------------------------
//  Header fields

uint64_t
shoal_image_rate(shoal_image_t *self)
{
    return s_header_load(&self->header->rate);
}

void
shoal_image_set_rate(shoal_image_t *self, uint64_t rate)
{
    s_header_store(self, &self->header->rate, rate);
}

uint32_t
shoal_image_throttle(shoal_image_t *self)
{
    uint64_t throttle = s_header_load(&self->header->throttle);
    return throttle > SHOAL_IMAGE_THROTTLE_MAX ? SHOAL_IMAGE_THROTTLE_MAX : (uint32_t) throttle;
}

void
shoal_image_set_throttle(shoal_image_t *self, uint32_t percent)
{
    s_header_store(self, &self->header->throttle, percent > SHOAL_IMAGE_THROTTLE_MAX ? SHOAL_IMAGE_THROTTLE_MAX
                                                                                      : percent);
}

uint64_t
shoal_image_writes(shoal_image_t *self)
{
    return s_header_load(&self->header->writes);
}

uint64_t
shoal_image_disk_writes(shoal_image_t *self)
{
    return s_header_load(&self->header->disk_writes);
}

uint64_t
shoal_image_sequence(shoal_image_t *self)
{
    return s_header_load(&self->header->sequence);
}

uint64_t
shoal_image_tick_ms(shoal_image_t *self)
{
    return s_header_load(&self->header->tick_ms);
}

uint64_t
shoal_image_max_gap_ms(shoal_image_t *self)
{
    return s_header_load(&self->header->max_gap_ms);
}

uint64_t
shoal_image_max_gap_at_ms(shoal_image_t *self)
{
    return s_header_load(&self->header->max_gap_at_ms);
}

void
shoal_image_reset_gap(shoal_image_t *self)
{
    s_header_store(self, &self->header->max_gap_ms, 0);
    s_header_store(self, &self->header->max_gap_at_ms, 0);
}

uint64_t
shoal_image_tick(shoal_image_t *self, uint64_t now_ms)
{
    image_header_t *header = self->header;
    uint64_t previous = s_header_load(&header->tick_ms);
    uint64_t gap = previous && now_ms > previous ? now_ms - previous : 0;
    s_mark_begin(self, 0);
    //  The tick is published last: a reader that sees it (acquire) sees the
    //  longest gap counting its gap, and, from a run's first tick on, the
    //  time of that first tick (shoal_image_start_gap_ms).
    //  The node may reset the maximum at any moment: compare-and-swap, so
    //  that a reset is never undone by a smaller gap.
    uint64_t longest = __atomic_load_n(&header->max_gap_ms, __ATOMIC_ACQUIRE);
    while (gap > longest
       && !__atomic_compare_exchange_n(&header->max_gap_ms, &longest, gap, false,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    //  When the gap began, beside its length: a reader compares it with
    //  the times of a move's steps. The two are not one atomic pair; a
    //  reset between them leaves the start of a gap no longer counted.
    if (gap > longest)
        __atomic_store_n(&header->max_gap_at_ms, previous, __ATOMIC_RELEASE);
    if (!self->ticked) {
        __atomic_store_n(&header->run_tick_ms, now_ms, __ATOMIC_RELEASE);
        self->ticked = true;
    }
    __atomic_store_n(&header->tick_ms, now_ms, __ATOMIC_RELEASE);
    s_mark_end(self, 0);
    return gap;
}

uint64_t
shoal_image_start_gap_ms(shoal_image_t *self, uint64_t tick_before)
{
    //  A run that has not ticked yet leaves the time of the previous run's
    //  first tick, which is not after TICK_BEFORE.
    uint64_t first = s_header_load(&self->header->run_tick_ms);
    return tick_before && first > tick_before ? first - tick_before : 0;
}

// ---------------------------------------------------------------------------
//  The key/value area

static image_kv_slot_t *
s_kv_slot(shoal_image_t *self, size_t slot)
{
    return (image_kv_slot_t *) (self->memory + self->header->kv_first * SHOAL_IMAGE_PAGE) + slot;
}

//  The pages a slot spans, for the dirty log.
static void
s_kv_pages(shoal_image_t *self, size_t slot, size_t *first_p, size_t *last_p)
{
    size_t offset = (size_t) ((uint8_t *) s_kv_slot(self, slot) - self->memory);
    *first_p = offset / SHOAL_IMAGE_PAGE;
    *last_p = (offset + sizeof (image_kv_slot_t) - 1) / SHOAL_IMAGE_PAGE;
}

int
shoal_image_kv_put(shoal_image_t *self, const char *key, const void *value, size_t size,
                   char **error_p)
{
    if (error_p)
        *error_p = NULL;
    size_t key_size = strlen(key);
    if (key_size == 0)
        return s_image_fail(error_p, "kv: empty key");
    if (key_size > SHOAL_IMAGE_KV_KEY_MAX)
        return s_image_fail(error_p, "kv: key '%.16s...' is %zu bytes, at most %d", key,
                            key_size, SHOAL_IMAGE_KV_KEY_MAX);
    if (size > SHOAL_IMAGE_KV_VALUE_MAX)
        return s_image_fail(error_p, "kv: value of '%s' is %zu bytes, at most %d", key, size,
                            SHOAL_IMAGE_KV_VALUE_MAX);
    size_t found = SHOAL_IMAGE_KV_SLOTS, free_slot = SHOAL_IMAGE_KV_SLOTS;
    for (size_t i = 0; i < SHOAL_IMAGE_KV_SLOTS && found == SHOAL_IMAGE_KV_SLOTS; i++) {
        image_kv_slot_t *slot = s_kv_slot(self, i);
        if (slot->key[0] == 0) {
            if (free_slot == SHOAL_IMAGE_KV_SLOTS)
                free_slot = i;
        }
        else
        if (strncmp(slot->key, key, sizeof slot->key) == 0)
            found = i;
    }
    size_t index = found < SHOAL_IMAGE_KV_SLOTS ? found : free_slot;
    if (index == SHOAL_IMAGE_KV_SLOTS)
        return s_image_fail(error_p, "kv: area full (%d keys), cannot add '%s'",
                            SHOAL_IMAGE_KV_SLOTS, key);
    size_t first, last;
    s_kv_pages(self, index, &first, &last);
    for (size_t page = first; page <= last; page++)
        s_mark_begin(self, page);
    image_kv_slot_t *slot = s_kv_slot(self, index);
    memcpy(slot->value, value, size);
    slot->size = (uint32_t) size;
    memcpy(slot->key, key, key_size + 1);
    for (size_t page = first; page <= last; page++)
        s_mark_end(self, page);
    return 0;
}

int
shoal_image_kv_get(shoal_image_t *self, const char *key, void *value, size_t capacity,
                   size_t *size, bool *found)
{
    *found = false;
    if (size)
        *size = 0;
    for (size_t i = 0; i < SHOAL_IMAGE_KV_SLOTS; i++) {
        image_kv_slot_t *slot = s_kv_slot(self, i);
        if (slot->key[0] && strncmp(slot->key, key, sizeof slot->key) == 0) {
            size_t stored = slot->size <= SHOAL_IMAGE_KV_VALUE_MAX ? slot->size : 0;
            memcpy(value, slot->value, stored < capacity ? stored : capacity);
            if (size)
                *size = stored;
            *found = true;
            return 0;
        }
    }
    return -1;
}

// ---------------------------------------------------------------------------
//  Verify

//  Checks one stamped page, from a private copy so that a live guest cannot
//  change it under the check. Returns 0, or -1 with *ERROR_P.
static int
s_verify_page(shoal_image_t *self, shoal_image_object_t object, size_t index, char **error_p)
{
    uint64_t copy[SHOAL_IMAGE_PAGE / sizeof (uint64_t)];
    memcpy(copy, shoal_image_page(self, object, index), SHOAL_IMAGE_PAGE);
    //  Never written (see DESIGN).
    if (s_zero((const uint8_t *) copy, SHOAL_IMAGE_PAGE))
        return 0;
    //  Read after the page: the sequence is raised before a stamp is written.
    uint64_t sequence = shoal_image_sequence(self);
    image_stamp_t stamp;
    memcpy(&stamp, copy, sizeof stamp);
    const char *name = s_object_page_name(object);
    if (stamp.magic != s_stamp_magic(object))
        return s_image_fail(error_p, "%s %zu: no %s stamp", name, index, name);
    if (stamp.index != index)
        return s_image_fail(error_p, "%s %zu: stamp says page %" PRIu64, name, index,
                            stamp.index);
    if (stamp.sequence > sequence)
        return s_image_fail(error_p, "%s %zu: stamp sequence %" PRIu64 " is ahead of the "
                            "header's %" PRIu64, name, index, stamp.sequence, sequence);
    if (stamp.checksum != s_page_checksum(&stamp, copy + sizeof stamp / sizeof (uint64_t)))
        return s_image_fail(error_p, "%s %zu: checksum mismatch", name, index);
    return 0;
}

static int
s_verify_kv(shoal_image_t *self, char **error_p)
{
    for (size_t i = 0; i < SHOAL_IMAGE_KV_SLOTS; i++) {
        image_kv_slot_t *slot = s_kv_slot(self, i);
        size_t first, last;
        s_kv_pages(self, i, &first, &last);
        if (memchr(slot->key, 0, sizeof slot->key) == NULL)
            return s_image_fail(error_p, "memory page %zu: kv slot %zu: key not terminated",
                                first, i);
        if (slot->key[0] && slot->size > SHOAL_IMAGE_KV_VALUE_MAX)
            return s_image_fail(error_p, "memory page %zu: kv slot %zu: value of %u bytes",
                                first, i, slot->size);
    }
    return 0;
}

int
shoal_image_verify(shoal_image_t *self, char **error_p)
{
    if (error_p)
        *error_p = NULL;
    if (s_image_check_header(self, error_p) != 0)
        return -1;
    uint64_t writes = shoal_image_writes(self);
    uint64_t disk_writes = shoal_image_disk_writes(self);
    uint64_t sequence = shoal_image_sequence(self);
    if (disk_writes > writes || writes > sequence)
        return s_image_fail(error_p, "memory page 0: header counts %" PRIu64 " writes (%" PRIu64
                            " disk) for %" PRIu64 " sequence numbers", writes, disk_writes,
                            sequence);
    if (s_verify_kv(self, error_p) != 0)
        return -1;
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK; object++) {
        size_t first = object == SHOAL_IMAGE_MEMORY ? shoal_image_load_first(self) : 0;
        for (size_t index = first; index < self->pages[object]; index++) {
            if (s_verify_page(self, (shoal_image_object_t) object, index, NULL) == 0)
                continue;
            //  A stopped guest's in-flight page is torn until its next run
            //  rewrites it (see DESIGN).
            if (s_header_load(&self->header->inflight)
                == s_inflight_name((shoal_image_object_t) object, index))
                continue;
            int tries = 1;
            int rc = -1;
            while (rc != 0 && tries++ < IMAGE_VERIFY_TRIES) {
                struct timespec pause = { 0, IMAGE_VERIFY_PAUSE_MS * NS_PER_MS };
                nanosleep(&pause, NULL);
                rc = s_verify_page(self, (shoal_image_object_t) object, index,
                                   tries == IMAGE_VERIFY_TRIES ? error_p : NULL);
            }
            if (rc != 0)
                return -1;
        }
    }
    return 0;
}
