/*  shoal_io: whole writes to a file descriptor.

    pwrite may write less than asked (a signal, a full disk partway) or be
    interrupted before it writes anything: a caller that means "these bytes
    at this offset" loops, and the loop is here once.
*/
#ifndef SHOAL_IO_H_INCLUDED
#define SHOAL_IO_H_INCLUDED

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

//  Writes all of SIZE bytes of DATA to FD at OFFSET, again after an
//  interruption. Returns 0, or -1 with errno (ENOSPC when the file system
//  took no more bytes without saying why).
static inline int
shoal_pwrite_all(int fd, const void *data, size_t size, uint64_t offset)
{
    const uint8_t *from = (const uint8_t *) data;
    while (size) {
        ssize_t wrote = pwrite(fd, from, size, (off_t) offset);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            if (wrote == 0)
                errno = ENOSPC;
            return -1;
        }
        from += wrote;
        offset += (uint64_t) wrote;
        size -= (size_t) wrote;
    }
    return 0;
}

#endif
