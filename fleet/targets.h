/*
 * targets.h - static targets (targets.c): agents named by their URLs, on the
 * command line or in a file, and the token files they need.
 */
#ifndef DP_FLEET_TARGETS_H
#define DP_FLEET_TARGETS_H

#include "errors.h"
#include "fleet.h"

/* Add the agent at url (http(s)://HOST[:PORT][/PREFIX]) with token (copied; may be NULL). 0 or DP_EINVAL. */
int fleet_targets_add_url(struct fleet_set *s, const char *url, const char *token, struct err_msg *em);

/*
 * Add every target of file: one a line, "URL [name=N] [workload=W]
 * [token-file=F]", '#' comments. token (may be NULL) for lines without a
 * token-file. 0, or a DP_E* code with em naming file:line; a file without
 * targets is an error.
 */
int fleet_targets_add_file(struct fleet_set *s, const char *file, const char *token, struct err_msg *em);

/* The token in file, one line, trailing white space removed: new (wipe it), or NULL with em. */
char *fleet_read_token(const char *file, struct err_msg *em);

#endif
