#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "net.h"

int dpt__route_address(const char *host, const char *port, char *out,
		       size_t size)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_DGRAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[NI_MAXHOST];
	int fd = -1, rc = DPT_ESYS, saved;

	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		errno = EHOSTUNREACH;
		return DPT_EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, len, addr, sizeof(addr), NULL,
			0, NI_NUMERICHOST) == 0) {
		if (strlen(addr) < size) {
			memcpy(out, addr, strlen(addr) + 1);
			rc = 0;
		} else {
			errno = ENAMETOOLONG;
		}
	}
	saved = errno;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	errno = saved;
	return rc;
}

int dpt__tcp_endpoint(const char *host, const char *port, char *out,
		      size_t size)
{
	char buf[INET6_ADDRSTRLEN + 16];
	struct in6_addr a6;
	struct in_addr a4;
	long value = 0;
	size_t i;
	bool v6;
	int n;

	if (!host || !port || !out)
		return DPT_EINVAL;
	/* Digits only: strtol would also take a sign and leading spaces. */
	for (i = 0; port[i]; i++) {
		if (port[i] < '0' || port[i] > '9' || i >= 5)
			return DPT_EINVAL;
		value = value * 10 + (port[i] - '0');
	}
	if (i == 0 || value < 1 || value > 65535)
		return DPT_EINVAL;
	v6 = inet_pton(AF_INET6, host, &a6) == 1;
	if (!v6 && inet_pton(AF_INET, host, &a4) != 1)
		return DPT_EINVAL;
	/* An accepted address is at most INET6_ADDRSTRLEN - 1 characters. */
	n = snprintf(buf, sizeof(buf), v6 ? "tcp://[%s]:%ld" : "tcp://%s:%ld",
		     host, value);
	if (n < 0 || (size_t)n >= sizeof(buf) || (size_t)n >= size)
		return DPT_EINVAL;
	memcpy(out, buf, (size_t)n + 1);
	return 0;
}

void dpt__host_address(char *buf, size_t size)
{
	char name[256];
	struct addrinfo hints = {.ai_family = AF_INET,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	struct ifaddrs *ifs = NULL;

	snprintf(buf, size, "127.0.0.1");
	if (gethostname(name, sizeof(name)) == 0 &&
	    getaddrinfo(name, NULL, &hints, &res) == 0) {
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			struct sockaddr_in *in = (void *)a->ai_addr;
			if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
				continue;
			inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size);
			freeaddrinfo(res);
			return;
		}
		freeaddrinfo(res);
	}
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			struct sockaddr_in *in = (void *)i->ifa_addr;
			if (!in || in->sin_family != AF_INET ||
			    (ntohl(in->sin_addr.s_addr) >> 24) == 127)
				continue;
			inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size);
			break;
		}
		freeifaddrs(ifs);
	}
}
