/*
 * eproc_int.h - what the two sides of the egress process share: the
 * messages on their socket pair and the table of stores (eproc_msg.c), the
 * egress process's side (eproc_child.c), and the agent's (eproc.c). Both
 * sides call eproc_msg.c; neither calls the other (the agent forks, the
 * child runs eproc_child_main until the agent is gone).
 */
#ifndef DP_EPROC_INT_H
#define DP_EPROC_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "eproc.h"

#define MAX_UPLOADS 16 /* in flight at once */

/* ---- eproc_msg.c ---- */

/* Send one message (a tag letter, then JSON), with fd attached when fd >= 0, under mu when not NULL. 0, or -1 (errno). */
int eproc_msg_send(int sock, pthread_mutex_t *mu, char tag, json_t *body, int fd);
/* Receive one message: its tag and JSON (new reference), and *fd when one came (else -1). 0, 1 at EOF, -1 on error. */
int eproc_msg_recv(int sock, char *tag, json_t **body, int *fd);
/* The string member k of o (borrowed), or NULL. */
const char *eproc_jstr(const json_t *o, const char *k);
/* The store client for a provider's type ("S3Storage"), or NULL when this build has none. */
const struct egress_store *eproc_store_of(const char *type);
/* Replace the stores (eproc_start_with; before the fork, so both sides see the same). */
void eproc_stores_set(const struct egress_store *const *list);

/* ---- eproc_child.c ---- */

/* The egress process: reads the agent's messages on sock until it is gone, then exits. Never returns. */
void eproc_child_main(int sock, const struct launch_config *cfg, bool sandbox);

#endif
