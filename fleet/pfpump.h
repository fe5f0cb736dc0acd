/*
 * pfpump.h - one port-forward tunnel's pump (pfpump.c): a detached thread
 * that moves bytes both ways between one end of a socketpair and the
 * WebSocket (v4.channel.k8s.io) the dialer (portfwd.c) opened, until
 * either side ends.
 */
#ifndef DP_FLEET_PFPUMP_H
#define DP_FLEET_PFPUMP_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "hclient.h"
#include "pftab.h"

/* A frame from the API server may carry at most this much (the kubelet sends 32 KiB at most) */
#define PF_FRAME_MAX (1u << 20)

/* What the dialer hands a new pump, after the 101. */
struct pf_stream {
	const struct hclient_lib *lib;
	CURL *c;              /* the upgraded connection (CURLOPT_CONNECT_ONLY) */
	int sock;             /* its socket (CURLINFO_ACTIVESOCKET), for poll */
	int fd;               /* the pump's end of the socketpair */
	int caller_fd;        /* the caller's end: the key of this tunnel's reason in tab */
	unsigned long gen;    /* this tunnel's generation in tab (pf_tab_begin) */
	struct pf_tab *tab;   /* a reference */
	int port;             /* the pod's port: the server's first message on each channel names it */
	const char *what;     /* "NS/POD:PORT", for reasons (copied) */
	const uint8_t *early; /* bytes that came after the 101's head (copied) */
	size_t early_len;
};

/*
 * Start s's pump on a detached thread, which from then on owns the CURL
 * handle, fd and the reference to tab, and ends them when the tunnel ends:
 * the caller closing its end sends a close frame; the server's close frame,
 * the connection's end, a message on the port's error channel (kept in tab
 * as the reason) or a protocol error (likewise) close fd, so the caller
 * reads the end. 0, or DP_EIO with em when no thread could start (then the
 * caller still owns all of s).
 */
int pf_pump_start(const struct pf_stream *s, struct err_msg *em);

#endif
