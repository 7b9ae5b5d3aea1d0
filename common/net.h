/*
 * The address of this host on the route to another: what the other nodes
 * of a step can reach it on, without guessing between interfaces.
 */
#ifndef DPT_COMMON_NET_H
#define DPT_COMMON_NET_H

#include <stddef.h>

/*
 * The local address (numeric, IPv4 or IPv6) that routes to HOST (a numeric
 * address or a name) and PORT, into OUT. A UDP connect chooses the route
 * and sends nothing. Returns 0, or DPT_ESYS with errno set (or
 * DPT_EINVAL when HOST does not resolve); OUT is then unchanged.
 */
int dpt__route_address(const char *host, const char *port, char *out,
		       size_t size);

#endif
