/*  shoal_tcp: what the kernel knows of one TCP connection, for the gate.

    Apart from the gate because <linux/tcp.h>, which has the counters,
    cannot be included beside glibc's <netinet/tcp.h>, which czmq includes.
*/
#ifndef SHOAL_TCP_H_INCLUDED
#define SHOAL_TCP_H_INCLUDED

#include <stdint.h>

//  Sets *BYTES to the bytes this side sent on the connection FD that the
//  peer acknowledged. Returns 0, or -1 when FD is no TCP socket (any more).
int shoal_tcp_bytes_acked(int fd, uint64_t *bytes);

#endif
