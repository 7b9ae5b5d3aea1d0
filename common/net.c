#include "config.h"

#include <errno.h>
#include <netdb.h>
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
