/*  shoal_checkpoint: a guest's image as one file. See shoal_checkpoint.h. */
#include "shoal_checkpoint.h"
#include "shoal_image.h"
#include "shoal_alloc.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <unistd.h>

_Static_assert(SHOAL_CHECKPOINT_HEADER_BYTES == SHOAL_IMAGE_PAGE, "a checkpoint's header is one image page");

//  "SHOALCKP" as a little-endian word.
#define CHECKPOINT_MAGIC UINT64_C(0x504b434c414f4853)
//  Pages copied at a time (1 MiB).
#define CHECKPOINT_BATCH_PAGES 256
//  Byte offsets of the header's fields.
#define CHECKPOINT_AT_MAGIC 0
#define CHECKPOINT_AT_VERSION 8
#define CHECKPOINT_AT_PAGE 12
#define CHECKPOINT_AT_MEMORY_BYTES 16
#define CHECKPOINT_AT_DISK_BYTES 24
#define CHECKPOINT_AT_MEMORY_PAGES 32
#define CHECKPOINT_AT_DISK_BLOCKS 40
//  The most pages of either kind a header may name (1 TiB, as images).
#define CHECKPOINT_PAGES_MAX ((UINT64_C(1) << 40) / SHOAL_IMAGE_PAGE)

static int CHECK_PRINTF(2)
s_fail(char **error_p, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *text = zsys_vprintf(format, args);
    va_end(args);
    if (error_p)
        *error_p = text;
    else
        free(text);
    return -1;
}

static void
s_put64(uint8_t *at, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        at[i] = (uint8_t) (value >> (8 * i));
}

static uint64_t
s_get64(const uint8_t *at)
{
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = (value << 8) | at[i];
    return value;
}

static bool
s_all_zero(const uint8_t *bytes, size_t size)
{
    //  sodium_is_zero is constant-time, which nothing here needs; a word
    //  at a time is as fast as a copy.
    const uint64_t *words = (const uint64_t *) bytes;
    for (size_t i = 0; i < size / sizeof *words; i++)
        if (words[i])
            return false;
    return true;
}

int
shoal_checkpoint_header_parse(const uint8_t *data, size_t size, shoal_checkpoint_header_t *header, char *why,
                              size_t why_size)
{
    if (size < SHOAL_CHECKPOINT_HEADER_BYTES) {
        snprintf(why, why_size, "it holds %zu bytes, fewer than a guest image's header (%d)", size,
                 SHOAL_CHECKPOINT_HEADER_BYTES);
        return -1;
    }
    if (s_get64(data + CHECKPOINT_AT_MAGIC) != CHECKPOINT_MAGIC) {
        snprintf(why, why_size, "its first bytes are not a guest image's header (no SHOALCKP magic)");
        return -1;
    }
    uint32_t version = (uint32_t) (s_get64(data + CHECKPOINT_AT_VERSION) & UINT32_MAX);
    uint32_t page = (uint32_t) (s_get64(data + CHECKPOINT_AT_PAGE) & UINT32_MAX);
    if (version != SHOAL_CHECKPOINT_VERSION || page != SHOAL_IMAGE_PAGE) {
        snprintf(why, why_size, "its header says version %u with pages of %u bytes, not version %d with %d",
                 version, page, SHOAL_CHECKPOINT_VERSION, SHOAL_IMAGE_PAGE);
        return -1;
    }
    header->memory_bytes = s_get64(data + CHECKPOINT_AT_MEMORY_BYTES);
    header->disk_bytes = s_get64(data + CHECKPOINT_AT_DISK_BYTES);
    header->memory_pages = s_get64(data + CHECKPOINT_AT_MEMORY_PAGES);
    header->disk_blocks = s_get64(data + CHECKPOINT_AT_DISK_BLOCKS);
    if (header->memory_bytes == 0 || header->memory_pages == 0 || header->memory_pages > CHECKPOINT_PAGES_MAX
    ||  header->disk_blocks > CHECKPOINT_PAGES_MAX
    ||  header->memory_bytes / SHOAL_IMAGE_PAGE > header->memory_pages
    ||  (header->disk_bytes + SHOAL_IMAGE_PAGE - 1) / SHOAL_IMAGE_PAGE != header->disk_blocks) {
        snprintf(why, why_size, "its header's sizes do not fit together (memory %" PRIu64 " bytes in %" PRIu64
                 " pages, disk %" PRIu64 " bytes in %" PRIu64 " blocks)", header->memory_bytes,
                 header->memory_pages, header->disk_bytes, header->disk_blocks);
        return -1;
    }
    return 0;
}

uint64_t
shoal_checkpoint_size(const shoal_checkpoint_header_t *header)
{
    return (1 + header->memory_pages + header->disk_blocks) * SHOAL_IMAGE_PAGE;
}

//  Writes (WRITE) or reads exactly SIZE bytes at DATA to or from FD at
//  OFFSET of the file at PATH.
static int
s_io_at(int fd, bool write, uint8_t *data, size_t size, uint64_t offset, const char *path, char **error_p)
{
    while (size) {
        ssize_t done = write ? pwrite(fd, data, size, (off_t) offset) : pread(fd, data, size, (off_t) offset);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return s_fail(error_p, "cannot %s %s at %" PRIu64 ": %s", write ? "write" : "read", path, offset,
                          done < 0 ? strerror(errno) : write ? "no room" : "it ends there");
        data += done;
        offset += (uint64_t) done;
        size -= (size_t) done;
    }
    return 0;
}

int
shoal_checkpoint_save(const char *dir, uint64_t memory_bytes, const char *path, shoal_checkpoint_header_t *header_p,
                      uint64_t *size_p, shoal_checksum_t *checksum, char **error_p)
{
    shoal_image_t *image = shoal_image_open(dir, error_p);
    if (!image)
        return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        shoal_image_destroy(&image);
        return s_fail(error_p, "cannot open %s: %s", path, strerror(errno));
    }
    shoal_checkpoint_header_t header = {
        .memory_bytes = memory_bytes,
        .disk_bytes = (uint64_t) shoal_image_pages(image, SHOAL_IMAGE_DISK) * SHOAL_IMAGE_PAGE,
        .memory_pages = shoal_image_pages(image, SHOAL_IMAGE_MEMORY),
        .disk_blocks = shoal_image_pages(image, SHOAL_IMAGE_DISK),
    };
    uint8_t page[SHOAL_CHECKPOINT_HEADER_BYTES] = { 0 };
    s_put64(page + CHECKPOINT_AT_MAGIC, CHECKPOINT_MAGIC);
    s_put64(page + CHECKPOINT_AT_VERSION, SHOAL_CHECKPOINT_VERSION);
    s_put64(page + CHECKPOINT_AT_PAGE, SHOAL_IMAGE_PAGE);
    s_put64(page + CHECKPOINT_AT_MEMORY_BYTES, header.memory_bytes);
    s_put64(page + CHECKPOINT_AT_DISK_BYTES, header.disk_bytes);
    s_put64(page + CHECKPOINT_AT_MEMORY_PAGES, header.memory_pages);
    s_put64(page + CHECKPOINT_AT_DISK_BLOCKS, header.disk_blocks);
    shoal_hasher_t hash;
    shoal_hasher_init(&hash, SHOAL_CHECKSUM_DEFAULT);
    shoal_hasher_update(&hash, page, sizeof page);
    int rc = s_io_at(fd, true, page, sizeof page, 0, path, error_p);
    uint64_t offset = sizeof page;
    //  The pages are read from the image's files, not through its mapping:
    //  a first touch of each page of a mapping costs far more than the
    //  kernel's copy where page tables are shadowed (shoal_image_read_pages).
    uint8_t *bytes = (uint8_t *) shoal_malloc(CHECKPOINT_BATCH_PAGES * SHOAL_IMAGE_PAGE);
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK && rc == 0; object++) {
        size_t pages = shoal_image_pages(image, (shoal_image_object_t) object);
        for (size_t first = 0; first < pages && rc == 0; first += CHECKPOINT_BATCH_PAGES) {
            size_t count = pages - first < CHECKPOINT_BATCH_PAGES ? pages - first : CHECKPOINT_BATCH_PAGES;
            size_t size = count * SHOAL_IMAGE_PAGE;
            rc = shoal_image_read_pages(image, (shoal_image_object_t) object, first, count, bytes, error_p);
            if (rc)
                break;
            shoal_hasher_update(&hash, bytes, size);
            //  Pages never written stay a hole.
            if (!s_all_zero(bytes, size))
                rc = s_io_at(fd, true, bytes, size, offset, path, error_p);
            offset += size;
        }
    }
    free(bytes);
    shoal_image_destroy(&image);
    if (rc == 0 && ftruncate(fd, (off_t) offset) != 0)
        rc = s_fail(error_p, "cannot size %s: %s", path, strerror(errno));
    if (rc == 0 && fdatasync(fd) != 0)
        rc = s_fail(error_p, "cannot sync %s: %s", path, strerror(errno));
    close(fd);
    shoal_hasher_final(&hash, checksum);
    *header_p = header;
    *size_p = offset;
    return rc;
}

int
shoal_checkpoint_restore(const char *path, uint64_t size, const shoal_checksum_t *checksum, const char *dir,
                         const char *memory_dir, shoal_checkpoint_header_t *header_p, char **error_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return s_fail(error_p, "cannot open %s: %s", path, strerror(errno));
    uint8_t *buffer = (uint8_t *) shoal_malloc(CHECKPOINT_BATCH_PAGES * SHOAL_IMAGE_PAGE);
    shoal_checkpoint_header_t header;
    shoal_image_t *image = NULL;
    bool made = false;
    char why[512];
    int rc = s_io_at(fd, false, buffer, SHOAL_CHECKPOINT_HEADER_BYTES, 0, path, error_p);
    if (rc == 0 && shoal_checkpoint_header_parse(buffer, SHOAL_CHECKPOINT_HEADER_BYTES, &header, why, sizeof why))
        rc = s_fail(error_p, "%s is not a guest image: %s", path, why);
    if (rc == 0 && shoal_checkpoint_size(&header) != size)
        rc = s_fail(error_p, "%s: its header names %" PRIu64 " bytes, the object has %" PRIu64, path,
                    shoal_checkpoint_size(&header), size);
    int algorithm = shoal_checksum_algorithm(checksum->bytes, checksum->size);
    if (rc == 0 && algorithm <= SHOAL_CHECKSUM_NONE)
        rc = s_fail(error_p, "%s: the object's checksum is of no algorithm this node knows", path);
    shoal_hasher_t hash;
    shoal_hasher_init(&hash, algorithm > SHOAL_CHECKSUM_NONE ? (shoal_checksum_algorithm_t) algorithm
                                                             : SHOAL_CHECKSUM_DEFAULT);
    if (rc == 0) {
        shoal_hasher_update(&hash, buffer, SHOAL_CHECKPOINT_HEADER_BYTES);
        rc = shoal_image_create_sparse_in(dir, memory_dir, header.memory_bytes, header.disk_bytes, error_p);
        made = rc == 0;
    }
    if (rc == 0 && !(image = shoal_image_open(dir, error_p)))
        rc = -1;
    if (rc == 0 && (shoal_image_pages(image, SHOAL_IMAGE_MEMORY) != header.memory_pages
                ||  shoal_image_pages(image, SHOAL_IMAGE_DISK) != header.disk_blocks))
        rc = s_fail(error_p, "%s: an image of %" PRIu64 " bytes of memory has %zu pages here, the checkpoint %"
                    PRIu64, path, header.memory_bytes, shoal_image_pages(image, SHOAL_IMAGE_MEMORY),
                    header.memory_pages);
    uint64_t offset = SHOAL_CHECKPOINT_HEADER_BYTES;
    for (int object = SHOAL_IMAGE_MEMORY; object <= SHOAL_IMAGE_DISK && rc == 0; object++) {
        size_t pages = shoal_image_pages(image, (shoal_image_object_t) object);
        for (size_t first = 0; first < pages && rc == 0; first += CHECKPOINT_BATCH_PAGES) {
            size_t count = pages - first < CHECKPOINT_BATCH_PAGES ? pages - first : CHECKPOINT_BATCH_PAGES;
            size_t bytes = count * SHOAL_IMAGE_PAGE;
            rc = s_io_at(fd, false, buffer, bytes, offset, path, error_p);
            if (rc)
                break;
            shoal_hasher_update(&hash, buffer, bytes);
            //  The new image's pages are zeros already (pristine).
            if (!s_all_zero(buffer, bytes))
                rc = shoal_image_write_pages(image, (shoal_image_object_t) object, first, count, buffer, error_p);
            offset += bytes;
        }
    }
    if (rc == 0) {
        shoal_checksum_t got;
        shoal_hasher_final(&hash, &got);
        if (!shoal_checksum_equal(&got, checksum)) {
            s_fail(error_p, "the bytes of %s do not match the object's checksum", path);
            rc = SHOAL_CHECKPOINT_MISMATCH;
        }
    }
    if (rc == 0 && (shoal_image_sync(image, SHOAL_IMAGE_MEMORY, true, error_p)
                ||  shoal_image_sync(image, SHOAL_IMAGE_DISK, true, error_p)))
        rc = -1;
    shoal_image_destroy(&image);
    free(buffer);
    close(fd);
    if (rc && made)
        shoal_image_remove(dir);
    if (rc == 0 && header_p)
        *header_p = header;
    return rc;
}
