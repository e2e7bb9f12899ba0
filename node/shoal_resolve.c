/*  shoal_resolve: the addresses behind a join name. See shoal_resolve.h. */
#include "shoal_resolve.h"
#include "shoal_alloc.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <string.h>

#define RESOLVE_SCHEME "tcp://"
//  Room for a host name or a numeric address and a port.
#define RESOLVE_HOST_MAX 256
#define RESOLVE_PORT_MAX 8

struct _shoal_resolve_t {
    char *endpoint;             //  as configured: tcp://HOST:PORT
    char host[RESOLVE_HOST_MAX];    //  the name looked up
    char port[RESOLVE_PORT_MAX];    //  the port every address is joined at
    struct addrinfo hints;      //  stream sockets, any family
    struct gaicb request;       //  the lookup getaddrinfo_a runs
    bool in_flight;             //  a lookup was started and not taken yet
};

//  Splits tcp://HOST:PORT. Returns 0 or -1.
static int
s_split(const char *endpoint, char *host, char *port)
{
    if (strncmp(endpoint, RESOLVE_SCHEME, strlen(RESOLVE_SCHEME)) != 0)
        return -1;
    const char *start = endpoint + strlen(RESOLVE_SCHEME);
    const char *colon = strrchr(start, ':');
    if (!colon || colon == start || (size_t) (colon - start) >= RESOLVE_HOST_MAX
    ||  strlen(colon + 1) == 0 || strlen(colon + 1) >= RESOLVE_PORT_MAX)
        return -1;
    memcpy(host, start, (size_t) (colon - start));
    host[colon - start] = 0;
    strcpy(port, colon + 1);
    return 0;
}

//  True when HOST is a numeric address (which needs no lookup) or '*'.
static bool
s_is_address(const char *host)
{
    unsigned char buffer[sizeof (struct in6_addr)];
    if (streq(host, "*") || host[0] == '[')
        return true;
    return inet_pton(AF_INET, host, buffer) == 1 || inet_pton(AF_INET6, host, buffer) == 1;
}

//  The numeric text of ADDRESS into TEXT (size NI_MAXHOST). Returns 0 or -1.
static int
s_numeric(const struct sockaddr *address, socklen_t size, char *text)
{
    return getnameinfo(address, size, text, NI_MAXHOST, NULL, 0, NI_NUMERICHOST) == 0 ? 0 : -1;
}

//  True when TEXT is one of this host's interface addresses.
static bool
s_is_own(struct ifaddrs *own, const char *text)
{
    for (struct ifaddrs *item = own; item; item = item->ifa_next) {
        if (!item->ifa_addr
        ||  (item->ifa_addr->sa_family != AF_INET && item->ifa_addr->sa_family != AF_INET6))
            continue;
        socklen_t size = item->ifa_addr->sa_family == AF_INET ? sizeof (struct sockaddr_in)
                                                              : sizeof (struct sockaddr_in6);
        char address[NI_MAXHOST];
        if (s_numeric(item->ifa_addr, size, address) == 0 && streq(address, text))
            return true;
    }
    return false;
}

shoal_resolve_t *
shoal_resolve_new(const char *endpoint)
{
    char host[RESOLVE_HOST_MAX], port[RESOLVE_PORT_MAX];
    if (s_split(endpoint, host, port) || s_is_address(host))
        return NULL;
    shoal_resolve_t *self = (shoal_resolve_t *) zmalloc(sizeof *self);
    self->endpoint = shoal_strdup(endpoint);
    strcpy(self->host, host);
    strcpy(self->port, port);
    return self;
}

void
shoal_resolve_destroy(shoal_resolve_t **self_p)
{
    if (*self_p) {
        shoal_resolve_t *self = *self_p;
        if (self->in_flight) {
            //  The resolver's thread writes into the request: it must be
            //  done with it before the memory goes.
            if (gai_cancel(&self->request) != EAI_CANCELED) {
                const struct gaicb *list[] = { &self->request };
                while (gai_error(&self->request) == EAI_INPROGRESS)
                    gai_suspend(list, 1, NULL);
            }
            if (self->request.ar_result)
                freeaddrinfo(self->request.ar_result);
        }
        free(self->endpoint);
        free(self);
        *self_p = NULL;
    }
}

const char *
shoal_resolve_endpoint(shoal_resolve_t *self)
{
    return self->endpoint;
}

int
shoal_resolve_start(shoal_resolve_t *self)
{
    if (self->in_flight)
        return 0;
    memset(&self->hints, 0, sizeof self->hints);
    self->hints.ai_family = AF_UNSPEC;
    self->hints.ai_socktype = SOCK_STREAM;
    memset(&self->request, 0, sizeof self->request);
    self->request.ar_name = self->host;
    self->request.ar_service = self->port;
    self->request.ar_request = &self->hints;
    struct gaicb *list[] = { &self->request };
    int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, NULL);
    if (rc != 0) {
        zsys_warning("mesh: cannot look up join name %s: %s", self->host, gai_strerror(rc));
        return -1;
    }
    self->in_flight = true;
    return 0;
}

zlistx_t *
shoal_resolve_poll(shoal_resolve_t *self)
{
    if (!self->in_flight)
        return NULL;
    int rc = gai_error(&self->request);
    if (rc == EAI_INPROGRESS)
        return NULL;
    self->in_flight = false;
    zlistx_t *endpoints = zlistx_new();
    zlistx_set_duplicator(endpoints, (zlistx_duplicator_fn *) shoal_strdup);
    zlistx_set_destructor(endpoints, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator(endpoints, (zlistx_comparator_fn *) strcmp);
    if (rc != 0) {
        zsys_warning("mesh: join name %s does not resolve (yet): %s", self->host, gai_strerror(rc));
        return endpoints;
    }
    struct ifaddrs *own = NULL;
    if (getifaddrs(&own) != 0)
        own = NULL;
    for (struct addrinfo *item = self->request.ar_result; item; item = item->ai_next) {
        char address[NI_MAXHOST];
        if (s_numeric(item->ai_addr, item->ai_addrlen, address) || s_is_own(own, address))
            continue;
        char *endpoint = item->ai_family == AF_INET6
                       ? zsys_sprintf(RESOLVE_SCHEME "[%s]:%s", address, self->port)
                       : zsys_sprintf(RESOLVE_SCHEME "%s:%s", address, self->port);
        if (!zlistx_find(endpoints, endpoint))
            zlistx_add_end(endpoints, endpoint);
        zstr_free(&endpoint);
    }
    if (own)
        freeifaddrs(own);
    freeaddrinfo(self->request.ar_result);
    self->request.ar_result = NULL;
    return endpoints;
}
