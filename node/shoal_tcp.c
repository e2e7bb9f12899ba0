/*  shoal_tcp: what the kernel knows of one TCP connection (see shoal_tcp.h).
*/
#include "shoal_tcp.h"

#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/tcp.h>

int
shoal_tcp_bytes_acked(int fd, uint64_t *bytes)
{
    struct tcp_info info;
    memset(&info, 0, sizeof info);
    socklen_t size = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0)
        return -1;
    //  Kernels before 4.1 fill a shorter struct without the counter.
    if (size < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked)
        return -1;
    *bytes = info.tcpi_bytes_acked;
    return 0;
}
