/*  shoal_image: a guest's whole state, as files both the guest and its node map.

    A guest directory holds:

        image   the memory image: one header page, the key/value area, then
                the memory pages the guest's load writes
        disk    the disk file (may be empty), in blocks of SHOAL_IMAGE_PAGE
        dirty   two bitmaps, one bit per memory page and one per disk block,
                shared by the guest and its node
        pid     the guest process's pid while it runs (locked by it)

    Before the guest writes a page or a disk block it sets that page's bit in
    the dirty bitmap; the node harvests the bitmap by atomic exchange of each
    word with zero, so a write is either in this harvest or in the next one,
    never lost. Memory and disk move the same way, in the same rounds.

    Every page the load writes carries a stamp (page index, sequence number,
    checksum of the page) so that shoal_image_verify can check every page of
    a copy; the header carries a tick clock the guest advances every
    millisecond, so the downtime it lived through can be read from its own
    memory afterwards.

    The key/value area is written by the node only (guest calls go through
    the owner node), which marks its pages dirty as the load does, so a move
    carries it with everything else.
*/
#ifndef SHOAL_IMAGE_H_INCLUDED
#define SHOAL_IMAGE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHOAL_IMAGE_PAGE 4096
#define SHOAL_IMAGE_VERSION 1
//  The key/value area: slots of one key and one value each.
#define SHOAL_IMAGE_KV_SLOTS 256
#define SHOAL_IMAGE_KV_KEY_MAX 63
#define SHOAL_IMAGE_KV_VALUE_MAX 447
//  The most of its load a throttle holds back, in percent: a throttled
//  guest still runs.
#define SHOAL_IMAGE_THROTTLE_MAX 99

//  What a harvest or a chunk refers to.
typedef enum {
    SHOAL_IMAGE_MEMORY = 0,     //  the image file, header and kv area included
    SHOAL_IMAGE_DISK = 1,       //  the disk file
} shoal_image_object_t;

typedef struct _shoal_image_t shoal_image_t;

//  Creates a guest directory DIR with MEMORY_BYTES of memory (rounded up to
//  pages; the header and kv area come on top), DISK_BYTES of disk (may be 0)
//  and a load writing RATE bytes/s (0: idle). The files are allocated now,
//  so that a full disk is an error here; every page starts as zeros
//  (pristine). Returns 0, or -1 with *ERROR_P (caller frees).
int shoal_image_create(const char *dir, uint64_t memory_bytes, uint64_t disk_bytes,
                       uint64_t rate, char **error_p);

//  The same for a move's target, which writes every page that is not
//  pristine with shoal_image_write_pages: the files are sparse, and only
//  checked to fit the file system now.
int shoal_image_create_sparse(const char *dir, uint64_t memory_bytes, uint64_t disk_bytes,
                              char **error_p);

//  The same, with the memory file and the dirty log in a directory of
//  their own made under MEMORY_DIR (a tmpfs, as a VM's memory is in RAM;
//  NULL or "": in DIR), which DIR links to by the same names: whoever
//  opens DIR finds them, and shoal_image_remove removes them too. The disk
//  file stays in DIR. See DESIGN in shoal_image.c for why and what a
//  reboot then means.
int shoal_image_create_in(const char *dir, const char *memory_dir, uint64_t memory_bytes, uint64_t disk_bytes,
                          uint64_t rate, char **error_p);
int shoal_image_create_sparse_in(const char *dir, const char *memory_dir, uint64_t memory_bytes,
                                 uint64_t disk_bytes, char **error_p);

//  Whether NAME, an entry of a memory directory, was made by
//  shoal_image_create_in for a guest directory lying in GUESTS_DIR (a
//  node's guest/dir): its name carries a tag of GUESTS_DIR's real path.
//  Another node's (two nodes of one machine may share a memory directory)
//  and what shoal did not make are not.
bool shoal_image_memory_owned(const char *guests_dir, const char *name);

//  Maps the files of DIR. Returns NULL with *ERROR_P on failure (missing or
//  short files, bad magic or version).
shoal_image_t *shoal_image_open(const char *dir, char **error_p);
void shoal_image_destroy(shoal_image_t **self_p);

//  Writes OBJECT's file back to storage: WAIT makes it durable before
//  returning (fdatasync), otherwise the writeback is only started, so that
//  a later durable sync has little left to do. An image without a disk
//  has nothing to sync for it. Returns 0, or -1 with *ERROR_P.
int shoal_image_sync(shoal_image_t *self, shoal_image_object_t object, bool wait, char **error_p);

//  Starts the writeback of OBJECT's file from byte *OFFSET_P on, a window
//  of WINDOW bytes at a time, until BUDGET_US went by or the file's end;
//  *OFFSET_P says where the next call goes on (0 again after the end:
//  *WRAPPED set). Starting a writeback blocks once the disk's queue is
//  full, so a caller that must not wait long (a move's sender, with the
//  guest dirtying pages as it runs) bounds it so. Returns 0, or -1 with
//  *ERROR_P.
int shoal_image_writeback(shoal_image_t *self, shoal_image_object_t object, uint64_t *offset_p, uint64_t window,
                          int64_t budget_us, bool *wrapped, char **error_p);

//  Removes DIR and its files, the memory files it links to included.
//  Returns 0 or -1.
int shoal_image_remove(const char *dir);

//  Sizes, in pages (memory includes the header and kv pages) and blocks.
size_t shoal_image_pages(shoal_image_t *self, shoal_image_object_t object);

//  A pointer to page INDEX of OBJECT (SHOAL_IMAGE_PAGE bytes), for a move's
//  harvest and apply.
uint8_t *shoal_image_page(shoal_image_t *self, shoal_image_object_t object, size_t index);

//  Moves the dirty bits of OBJECT into BITS (one bit per page, WORDS 64-bit
//  words, OR-ed in) by atomic exchange with zero. Returns the number of dirty
//  pages taken.
size_t shoal_image_harvest(shoal_image_t *self, shoal_image_object_t object,
                           uint64_t *bits, size_t words);

//  True when page INDEX of OBJECT is all zeros, as every page starts: a
//  move's baseline need not send it to a target image just created. The
//  file's holes are looked up a stretch at a time and remembered by SELF:
//  a page written after a call about its stretch may still be called
//  pristine. A baseline takes the dirty marks before it looks, so such a
//  page is marked again, and goes with the next round.
bool shoal_image_page_pristine(shoal_image_t *self, shoal_image_object_t object, size_t index);

//  True when page INDEX of OBJECT lies in a hole of its file, read as zeros
//  without a page being touched: pristine, as shoal_image_page_pristine
//  says, with the same caveat about a stretch looked up before.
bool shoal_image_page_in_hole(shoal_image_t *self, shoal_image_object_t object, size_t index);

//  True when the SHOAL_IMAGE_PAGE bytes at PAGE (a page read with
//  shoal_image_read_pages) are all zeros.
bool shoal_image_copy_pristine(const void *page);

//  Reads COUNT pages of OBJECT from INDEX FIRST into DATA, from the file
//  rather than through the mapping: a move's sender reads every page of
//  the image once, and a first touch of each page of a mapping costs far
//  more than the kernel's copy where page tables are shadowed (see DESIGN).
//  Returns 0, or -1 with *ERROR_P.
int shoal_image_read_pages(shoal_image_t *self, shoal_image_object_t object, size_t first, size_t count,
                           void *data, char **error_p);

//  Writes COUNT pages of OBJECT from INDEX FIRST with the bytes at DATA,
//  through the file rather than the mapping (no page faults; see DESIGN).
//  Returns 0, or -1 with *ERROR_P.
int shoal_image_write_pages(shoal_image_t *self, shoal_image_object_t object, size_t first,
                            size_t count, const void *data, char **error_p);

//  Marks every page of OBJECT dirty (a baseline round starts from this).
void shoal_image_mark_all(shoal_image_t *self, shoal_image_object_t object);

//  The guest's load: bytes/s it writes (live, the guest rereads it), and the
//  pages it has written so far.
uint64_t shoal_image_rate(shoal_image_t *self);
void shoal_image_set_rate(shoal_image_t *self, uint64_t rate);
uint64_t shoal_image_writes(shoal_image_t *self);

//  The guest's throttle: the percent of its load's rate it holds back
//  (live, the guest rereads it; at most SHOAL_IMAGE_THROTTLE_MAX). A move
//  that does not converge raises it step by step (auto-converge); the
//  header goes with the image, so whoever runs the guest next sets it back.
uint32_t shoal_image_throttle(shoal_image_t *self);
void shoal_image_set_throttle(shoal_image_t *self, uint32_t percent);

//  The guest's tick clock: wall time in ms it last wrote (every ms while it
//  runs), the longest gap between two ticks it has seen since
//  shoal_image_reset_gap, and the wall time in ms of the tick that began
//  that gap (0: no gap yet, or an image made before it was recorded).
uint64_t shoal_image_tick_ms(shoal_image_t *self);
uint64_t shoal_image_max_gap_ms(shoal_image_t *self);
uint64_t shoal_image_max_gap_at_ms(shoal_image_t *self);
void shoal_image_reset_gap(shoal_image_t *self);

//  The gap the guest's run that ticks now began with: from TICK_BEFORE, the
//  last tick of the run before it (read before this run started: a move's
//  source's last tick, as its target reads the image it received), to this
//  run's first tick, the gap that tick counted in the longest gap. 0 while
//  this run has not ticked, or when TICK_BEFORE is 0. It is not measured to
//  the tick a reader sees: a reader late by a scheduling delay sees the
//  clock moved on past the first tick.
uint64_t shoal_image_start_gap_ms(shoal_image_t *self, uint64_t tick_before);

//  The key/value area. Returns 0, or -1 with *ERROR_P: a key or value too
//  long, the area full (put), or the key absent (get: *FOUND false, 0).
int shoal_image_kv_put(shoal_image_t *self, const char *key, const void *value, size_t size,
                       char **error_p);
int shoal_image_kv_get(shoal_image_t *self, const char *key, void *value, size_t capacity,
                       size_t *size, bool *found);

//  Checks the header and every page's stamp of memory and disk. Returns 0,
//  or -1 with *ERROR_P naming the first bad page ("memory page 1234: stamp
//  says page 1233", "disk block 7: checksum mismatch").
int shoal_image_verify(shoal_image_t *self, char **error_p);

//  The pid of the guest running on DIR (it holds a lock on DIR/pid), or 0
//  when none does.
int shoal_image_running(const char *dir);

//  The pid written in DIR/pid, or 0, without looking at its lock: for a
//  parent waiting for the guest it started to take the file (a look that
//  takes the lock could make the starting guest believe another runs).
int shoal_image_pid(const char *dir);

// ---------------------------------------------------------------------------
//  For the guest process (shoal_load) and info; a node needs none of these.

//  The first memory page the load writes (pages before it are the header
//  and the kv area).
size_t shoal_image_load_first(shoal_image_t *self);

//  Reserves COUNT sequence numbers for stamps about to be written and
//  returns the first. The header's sequence is raised before any of those
//  stamps exists, so no stamp is ever ahead of it.
uint64_t shoal_image_reserve(shoal_image_t *self, uint64_t count);

//  Writes page INDEX of OBJECT with a stamp of sequence SEQ, following the
//  dirty-log protocol (mark, write, mark again).
void shoal_image_write(shoal_image_t *self, shoal_image_object_t object, size_t index,
                       uint64_t seq);

//  Counts MEMORY_PAGES and DISK_BLOCKS just written in the header.
void shoal_image_add_writes(shoal_image_t *self, uint64_t memory_pages, uint64_t disk_blocks);

//  Completes a write that the guest was stopped in the middle of (the
//  header names it until it is done), before a new run's load starts: after
//  a move the process that began it is gone. Returns true if there was one.
bool shoal_image_recover(shoal_image_t *self);

//  Disk blocks written so far (also counted in shoal_image_writes).
uint64_t shoal_image_disk_writes(shoal_image_t *self);

//  The last sequence number reserved.
uint64_t shoal_image_sequence(shoal_image_t *self);

//  Advances the tick clock to NOW_MS (wall time) and returns the gap since
//  the previous tick (0 for the image's first tick, or when the wall clock
//  went back). The first tick through SELF is its run's first (a guest
//  process opens its image once).
uint64_t shoal_image_tick(shoal_image_t *self, uint64_t now_ms);

#endif
