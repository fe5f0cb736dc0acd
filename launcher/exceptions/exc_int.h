/*
 * exc_int.h - what exceptions.c (sessions, rundowns) and exc_out.c (names,
 * filters, formats) share. Not for other files: they use exceptions.h.
 */
#ifndef DP_EXC_INT_H
#define DP_EXC_INT_H

#include "exc_history.h"
#include "exceptions.h"
#include "launcher/trace/symbols.h"

/*
 * Entries e (oldest first) written in fmt into out, those f keeps, their
 * frames named by sym (NULL: no names; an address no method holds is native
 * code and left out). pid and command_line as for exceptions_write.
 */
void exc_out_write(const struct exc_entry *e, size_t n, const struct symbols *sym, const struct exc_filters *f,
		   enum exc_format fmt, uint64_t pid, const char *command_line, struct buf *out);

#endif
