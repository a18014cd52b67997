/*
 * lockcheck's peer-link library: LD_PRELOAD it into an ensemble member so that every connection
 * it opens to another member goes through the proxy of that link, whatever address it dials.
 *
 * Why: a member dials its peers at the addresses its configuration names, which lockcheck points
 * at per-link proxies, so that a partition (the proxies cut) really separates the members. But
 * ZooKeeper's leader election also dials addresses it learns at run time: a member that receives
 * an election connection from a lower id drops it and connects back to the address that member
 * advertises, its own listening address (QuorumCnxManager.handleConnection). That connection
 * bypasses every proxy, outlives every cut, and let election messages through a partition: a
 * member cut off from the others still voted with them. Rewriting the destination of connect()
 * sends it through the proxy of the link it belongs to.
 *
 * LOCKCHECK_PEER_PORTS names the rewrites: "from>to,from>to,..." where `from` is a peer's real
 * port on 127.0.0.1 and `to` the port of this member's proxy to it. A connection to 127.0.0.1 (or
 * its IPv4-mapped IPv6 form, which a JVM's dual-stack sockets dial) on a `from` port is sent to
 * the `to` port instead; every other connection is untouched. Like the time-shift library, this
 * allocates nothing and resolves nothing: the real connect is the raw system call.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The port to dial instead of `port` (host order), or 0 for none. */
static unsigned rewrite(unsigned port) {
    const char *p = getenv("LOCKCHECK_PEER_PORTS");
    if (p == NULL)
        return 0;
    while (*p != '\0') {
        unsigned from = 0, to = 0;
        while (*p >= '0' && *p <= '9')
            from = from * 10 + (unsigned)(*p++ - '0');
        if (*p++ != '>')
            return 0;
        while (*p >= '0' && *p <= '9')
            to = to * 10 + (unsigned)(*p++ - '0');
        if (from == port && to > 0 && to < 65536)
            return to;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return 0;
    }
    return 0;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    if (addr != NULL && addr->sa_family == AF_INET && len >= (socklen_t)sizeof v4) {
        memcpy(&v4, addr, sizeof v4);
        unsigned to = rewrite(ntohs(v4.sin_port));
        if (to != 0 && v4.sin_addr.s_addr == htonl(INADDR_LOOPBACK)) {
            v4.sin_port = htons((unsigned short)to);
            addr = (const struct sockaddr *)&v4;
        }
    } else if (addr != NULL && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof v6) {
        memcpy(&v6, addr, sizeof v6);
        static const unsigned char mapped_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                          0, 0, 0xff, 0xff, 127, 0, 0, 1};
        unsigned to = rewrite(ntohs(v6.sin6_port));
        if (to != 0 && memcmp(&v6.sin6_addr, mapped_loopback, 16) == 0) {
            v6.sin6_port = htons((unsigned short)to);
            addr = (const struct sockaddr *)&v6;
        }
    }
    return (int)syscall(SYS_connect, fd, addr, len);
}
