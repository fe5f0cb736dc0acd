/*
 * pftab.h - what the port-forward dialer (portfwd.c) and its tunnels'
 * pump threads (pfpump.c) share: the reasons tunnels ended early, kept
 * until the caller asks (kube_portfwd_explain), keyed by the caller's end
 * of the tunnel. Reference-counted: the dialer holds one reference and
 * every running pump one, so a pump may outlive the dialer's free.
 * Thread-safe.
 */
#ifndef DP_FLEET_PFTAB_H
#define DP_FLEET_PFTAB_H

#include <stdbool.h>

#include "errors.h"

struct pf_tab;

struct pf_tab *pf_tab_new(void);           /* one reference */
void pf_tab_ref(struct pf_tab *t);
void pf_tab_unref(struct pf_tab *t);       /* the last one frees it; NULL-safe */

/*
 * A new tunnel whose caller holds fd: forgets what was kept for an earlier
 * tunnel whose caller had the same fd number, and returns this tunnel's
 * generation, which pf_tab_note and pf_tab_end name it by.
 */
unsigned long pf_tab_begin(struct pf_tab *t, int fd);

/* Keep msg (copied) as the reason tunnel (fd, gen) ended, unless it already has one. */
void pf_tab_note(struct pf_tab *t, int fd, unsigned long gen, const char *msg);

/* Tunnel (fd, gen) ended: forget its slot unless it holds a reason. */
void pf_tab_end(struct pf_tab *t, int fd, unsigned long gen);

/* The reason kept for fd, into em (returns true), and forget it; false when there is none. */
bool pf_tab_take(struct pf_tab *t, int fd, struct err_msg *em);

#endif
