/*
 * fdcurl.h - libcurl over a stream someone else connected (a fleet_dialer's
 * fd), for the runner: what it sets on an easy handle so that the transfer
 * uses the fd instead of connecting.
 *
 * The documented way is CURLOPT_OPENSOCKETFUNCTION returning the fd and
 * CURLOPT_SOCKOPTFUNCTION returning CURL_SOCKOPT_ALREADY_CONNECTED, but
 * libcurl 7.88.x (Debian 12's) ignores the latter and calls connect() on the
 * fd anyway (curl issue #10626, fixed in 8.0.0 by PR #10648), which fails
 * (EISCONN, or EINVAL for an AF_UNIX fd given an IP address). So the open
 * callback also points the address curl will connect() to at a listening
 * abstract AF_UNIX socket of this process whose backlog is full: on Linux
 * that connect() fails with EAGAIN before the kernel looks at the fd's own
 * state, libcurl takes EAGAIN for "in progress", polls the fd writable, reads
 * SO_ERROR 0, and goes on over the fd as connected. A libcurl that honours
 * ALREADY_CONNECTED never calls connect(), so the same settings work on both.
 */
#ifndef DP_FLEET_FDCURL_H
#define DP_FLEET_FDCURL_H

#include "errors.h"
#include "hclient.h"

/*
 * For a caller with its own CURLOPT_OPENSOCKETFUNCTION (one that dials in
 * it): aim the address libcurl will connect() the returned fd to at the
 * busy listener, as the callback's last step. 0, or DP_EIO with em when the
 * listener cannot be made (the callback then returns CURL_SOCKET_BAD).
 */
int fdcurl_aim(struct curl_sockaddr *addr, struct err_msg *em);

/*
 * Make c's next transfer run over *fd (connected; borrowed: libcurl does not
 * close it, the caller does, after kube_portfwd_explain if it failed). The
 * URL's "HOST:PORT" must be given as hostport: it is resolved to a
 * placeholder (*resolve, a list the caller frees with lib->slist_free_all
 * after the transfer) so that no DNS lookup happens. 0, or DP_EIO with em
 * when the process's busy listener cannot be made.
 */
int fdcurl_attach(const struct hclient_lib *lib, CURL *c, int *fd, const char *hostport, struct curl_slist **resolve,
		  struct err_msg *em);

#endif
