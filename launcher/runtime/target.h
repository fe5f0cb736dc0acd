/*
 * target.h - which attached runtime a request means: dotnet-monitor's
 * process selectors (pid, uid, name; none given means the only one), and the
 * process identifier its API returns.
 */
#ifndef DP_TARGET_H
#define DP_TARGET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "port.h"

/* The selectors of a request; each NULL when not given. */
struct target_sel {
	const char *pid, *uid, *name;
};

/*
 * The one runtime of port that sel matches. 0 with *out (its info new: free
 * with ipc_process_info_free); DP_EINVAL when pid is not a number,
 * DP_ENOTFOUND when none matches (or none is attached), DP_EREFUSED when
 * more than one does (em lists them); em says which in a sentence for the
 * client.
 */
int target_choose(struct port *port, const struct target_sel *sel, struct port_runtime *out, struct err_msg *em);
/* The process name dotnet-monitor shows: the entry assembly, else the command line's program file name. Borrowed;
 * *len is its length (the command line goes on after it). */
const char *target_name(const struct port_runtime *p, size_t *len);
/* The runtime's cookie as a GUID string, the uid of the API. */
void target_uid(const struct port_runtime *p, char out[37]);
/* {"pid","uid","name","isDefault"}: a new object (strings repaired to UTF-8). */
json_t *target_identifier(const struct port_runtime *p, bool is_default);

#endif
