/*
 * The address of this host on the route to another: what the other nodes
 * of a step can reach it on, without guessing between interfaces; and
 * the guess, where nothing names another.
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

/*
 * The ZeroMQ endpoint "tcp://HOST:PORT" ("tcp://[HOST]:PORT" for IPv6) of
 * a coordinator, into OUT (SIZE bytes), from a HOST that is a numeric IPv4
 * or IPv6 address and a PORT of only digits, 1..65535: what Slurm puts in
 * SLURM_LAUNCH_NODE_IPADDR and srun's plugin in DPTRAIN_COORDINATOR_PORT.
 * Both come from a job's environment, which its user may change, and
 * libzmq reads more than an address into an endpoint: a host name is
 * resolved, and "1023;10.0.0.9:2049" binds source port 1023 first.
 * Returns 0, or DPT_EINVAL (HOST or PORT is anything else, or OUT is too
 * small); OUT is then unchanged.
 */
int dpt__tcp_endpoint(const char *host, const char *port, char *out,
		      size_t size);

/*
 * This host's address for others to connect to when nothing says which
 * (the coordinator's --advertise left out and a wildcard bind): the host
 * name's address unless it is a loopback one (Debian maps the host name
 * to 127.0.1.1), else the first non-loopback IPv4 interface's, else
 * 127.0.0.1, numeric, into BUF (SIZE bytes). A host with several networks
 * is told which (--advertise, or the route to a peer: dpt__route_address).
 */
void dpt__host_address(char *buf, size_t size);

#endif
