/*
 * port_dir.h - the connect_dir scanner (port_dir.c): runtimes found by their
 * default sockets in a directory, for apps started without
 * DOTNET_DiagnosticPorts. Called by port.c only.
 */
#ifndef DP_PORT_DIR_H
#define DP_PORT_DIR_H

#include "rtable.h"

/*
 * Connect to a Unix socket without waiting (a full listen queue answers
 * EAGAIN). 0 and *fd, a new blocking socket; DP_EIO with errno (ECONNREFUSED:
 * nobody listens there).
 */
int port_dial(const char *path, int *fd);
/* Start the scanner thread (p->dir is set). */
int port_dir_start(struct port *p, struct err_msg *em);
/* Stop it (p->stopping is already set) and free its state. Accepts a port without one. */
void port_dir_free(struct port *p);

#endif
