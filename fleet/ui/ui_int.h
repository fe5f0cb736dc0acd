/*
 * ui_int.h - what the files of `diagport ui` share: ui.c serves (the
 * secret, the Origin, the routes, the page's files), ui_targets.c keeps the
 * process list fresh, ui_capture.c runs captures into files, ui_relay.c
 * passes an agent's live answer (counters, exceptions) through to the page.
 * Private to fleet/ui/.
 */
#ifndef DP_FLEET_UI_INT_H
#define DP_FLEET_UI_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "fleet/fleet.h"
#include "http/httpd.h"
#include "ui.h"

#define UI_REFRESH_MS 10000L     /* the targets found and asked again this often */
#define UI_CALL_TIMEOUT_MS 20000L /* a small call to an agent */
#define UI_MAX_CAPTURES 64        /* kept in the list; the oldest finished one is forgotten (and its file removed) */
#define UI_MAX_RUNNING 16         /* captures running at once */
#define UI_MAX_BODY ((size_t)16 * 1024)

/*
 * One discovery and its answers: the set (agents, their tokens, the dialer)
 * and the ProcessList document made from it. Shared by reference: a request
 * or a capture holds the snapshot it started with while a newer one replaces
 * it.
 */
struct ui_snap {
	atomic_int refs;
	struct fleet_set set;
	json_t *doc;
};

struct ui_cap; /* ui_capture.c */

struct ui {
	const struct ui_opts *o;
	struct httpd *httpd;
	char secret[65];         /* 32 random bytes in hex: in the printed URL, then the cookie */
	char cookie_name[32];    /* "diagport-ui-PORT": two servers on one host keep their own */
	char origin[2][48];      /* "http://127.0.0.1:PORT", "http://localhost:PORT" */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ui_snap *snap;    /* the newest; NULL before the first */
	char *refresh_error;     /* why the last discovery failed, or NULL */
	char refreshed_at[CLOCK_RFC3339_LEN];
	bool refresh_now, stopping;
	pthread_t refresher;
	/* captures (ui_capture.c), under mu */
	struct ui_cap **caps;
	size_t n_caps, caps_cap;
	unsigned next_id, running;
	char *dir;               /* where artifacts are written */
	bool own_dir;            /* made by us: removed at exit */
};

/* ui_targets.c */
/* Start the refresher with first (stolen) as the first snapshot. */
void ui_targets_start(struct ui *u, struct fleet_set *first);
void ui_targets_stop(struct ui *u);
/* The newest snapshot, held (ui_snap_put), or NULL. */
struct ui_snap *ui_snap_get(struct ui *u);
void ui_snap_put(struct ui_snap *s); /* accepts NULL */
/* The agent of s named target (fleet_agent.name), callable, or NULL with a 404/409 problem answered on r. */
const struct fleet_agent *ui_snap_agent(struct ui_snap *s, const char *target, struct httpd_req *r);
void ui_route_processes(struct ui *u, struct httpd_req *r);
void ui_route_refresh(struct ui *u, struct httpd_req *r);

/* ui_capture.c */
void ui_route_capture_start(struct ui *u, struct httpd_req *r);
void ui_route_captures(struct ui *u, struct httpd_req *r);
void ui_route_capture_one(struct ui *u, struct httpd_req *r); /* /api/captures/ID and /api/captures/ID/data */
/* Cancel every running capture, wait for them, forget them all (and their files when the directory is ours). */
void ui_captures_end(struct ui *u);

/* ui_relay.c */
void ui_route_live(struct ui *u, struct httpd_req *r);
void ui_route_exceptions(struct ui *u, struct httpd_req *r);

/* The page's files, embedded at build time (build/fleet/ui/ui_assets.c, made by scripts/embed-assets.py). */
struct ui_asset {
	const char *name;  /* "app.js" */
	const char *ctype; /* "text/javascript; charset=utf-8" */
	const unsigned char *data;
	size_t len;
};
extern const struct ui_asset ui_assets[];
extern const size_t ui_n_assets;

#endif
