/*  shoal_checkpoint: a guest's image as one file, what `claim checkpoint`
    saves into a storage object and `claim create --from-object` starts a
    guest from.

    The file is a header page, then every memory page of the image (its
    header and key/value area first, as shoal_image.h lays them out), then
    every disk block, each SHOAL_IMAGE_PAGE bytes:

        header  magic "SHOALCKP", u32 version, u32 page size, u64 memory
                bytes and u64 disk bytes the guest was made with, u64 memory
                pages and u64 disk blocks that follow (little-endian); the
                rest of the page is zeros

    A page that is all zeros (never written) is a hole in the file, so a
    checkpoint of a large idle guest takes little room. The guest's header
    page travels as it stands: its tick clock, its load's rate, a write its
    stop cut short (the next run finishes it, shoal_image_recover) and the
    sequence its stamps go on from.

    Both directions hash every byte (XXH3-128 for a save, the object's own
    algorithm for a restore: shoal_checksum.h) while they copy, so a save knows the checksum its object
    is committed with, and a restore refuses bytes that do not match
    before a guest is ever started from them. They read and write whole
    files: the guest actor runs them, never a node's reactor.
*/
#ifndef SHOAL_CHECKPOINT_H_INCLUDED
#define SHOAL_CHECKPOINT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_checksum.h"

#define SHOAL_CHECKPOINT_VERSION 1
//  The header's size: one page.
#define SHOAL_CHECKPOINT_HEADER_BYTES 4096
//  What a restore returns when the file's bytes do not match its checksum.
#define SHOAL_CHECKPOINT_MISMATCH (-2)

//  What a checkpoint's header says.
typedef struct {
    uint64_t memory_bytes;      //  the guest's memory, as it was created
    uint64_t disk_bytes;        //  its disk
    uint64_t memory_pages;      //  the image's pages that follow the header
    uint64_t disk_blocks;       //  the disk blocks that follow them
} shoal_checkpoint_header_t;

//  Reads the header in the SIZE bytes at DATA (the first bytes of a file).
//  Returns 0, or -1 with WHY saying what is not a checkpoint about them.
int shoal_checkpoint_header_parse(const uint8_t *data, size_t size, shoal_checkpoint_header_t *header,
                                  char *why, size_t why_size);

//  The bytes of a checkpoint with HEADER's pages.
uint64_t shoal_checkpoint_size(const shoal_checkpoint_header_t *header);

//  Writes the guest image in directory DIR (its guest stopped or paused:
//  nothing writes it meanwhile), made with MEMORY_BYTES of memory, into
//  the empty file at PATH, and makes it durable. *HEADER, *SIZE_P and
//  *CHECKSUM (SHOAL_CHECKSUM_DEFAULT's) receive what was written.
//  Returns 0, or -1 with *ERROR_P (the caller frees).
int shoal_checkpoint_save(const char *dir, uint64_t memory_bytes, const char *path, shoal_checkpoint_header_t *header,
                          uint64_t *size_p, shoal_checksum_t *checksum, char **error_p);

//  Makes the guest directory DIR (there must be none), its memory files
//  under MEMORY_DIR (NULL or "": in DIR; see shoal_image_create_in), from
//  the checkpoint at PATH, which must be SIZE bytes hashing to CHECKSUM (with the algorithm
//  it names: a checkpoint saved by an older node is BLAKE2b's); *HEADER (may be
//  NULL) receives its header. The image is durable when it returns 0; on
//  -1 (*ERROR_P says why: not a checkpoint, short, no room) or
//  SHOAL_CHECKPOINT_MISMATCH (the bytes do not hash to CHECKSUM) nothing of
//  DIR is left.
int shoal_checkpoint_restore(const char *path, uint64_t size, const shoal_checksum_t *checksum, const char *dir,
                             const char *memory_dir, shoal_checkpoint_header_t *header, char **error_p);

#endif
