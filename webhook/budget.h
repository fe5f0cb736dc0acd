/*
 * budget.h - what the webhook's connections hold of it: the memory of
 * request bodies in flight (one budget for all) and connection slots; and
 * which connection gives them back, by being closed, when a request that
 * must be answered needs them (docs/webhook.md, "Memory under load").
 *
 * Nothing here looks at client addresses: behind a sidecar proxy, a node's
 * SNAT or konnectivity, the API server and everyone else arrive from one
 * address, so a share per address would let any client starve it. What is
 * looked at instead is what a connection does:
 *
 * - An ordinary body (a declared Content-Length up to BUDGET_SMALL, or a
 *   chunked one so far) is charged as it arrives. When the budget cannot take
 *   it, holders are shed to make room: the slowest first (the fewest bytes a
 *   second since their request began), and only holders whose request began
 *   BUDGET_SHED_AGE_MS ago or more, so a body coming at the speed of a network
 *   is never the one shed. The API server sends a review at once; a client
 *   that holds the budget by sending slowly loses it to the next review.
 * - A larger body is charged its declared length before it is read and is
 *   refused (503) when that does not fit in the budget less BUDGET_RESERVE,
 *   which only ordinary bodies may use. It never sheds anyone.
 * - Connection slots: when more than three quarters of them are open, each new
 *   connection sheds another, so that the server never reaches its own limit
 *   (where it would stop accepting, and no new connection could shed): first
 *   one that has begun no request (a handshake or a head still coming), or a
 *   body, for BUDGET_SHED_AGE_MS or more; else the keep-alive connection idle
 *   longest; else a younger one that has begun no request. Never one being
 *   answered; among equals the longest waiting. Idle, half-sent and slowly
 *   sent connections, however fast they arrive, cannot take every slot.
 *
 * To shed is to shut the socket down (the server's thread for that connection
 * then sees it closed and ends it) and to give its bytes back at once.
 *
 * Ownership: a budget_conn belongs to the budget from budget_open until
 * budget_close; the caller uses it only on the connection's own thread.
 * Every function is thread-safe.
 */
#ifndef DP_WEBHOOK_BUDGET_H
#define DP_WEBHOOK_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#define BUDGET_SMALL (256u << 10)      /* an ordinary review: a few KiB; 67 KiB for a pod with 1,500 env vars */
#define BUDGET_RESERVE ((size_t)4 << 20) /* of the budget, only for ordinary bodies */
#define BUDGET_SHED_AGE_MS 100

struct budget;
struct budget_conn;

enum budget_ans {
	BUDGET_OK,
	BUDGET_FULL, /* the bytes do not fit: answer 503 */
	BUDGET_SHED, /* this connection was shed for another: close it */
};

/* A budget of bytes for bodies in flight, and connection slots (the server's own connection limit). */
struct budget *budget_new(size_t bytes, unsigned slots);
/* Accepts NULL. Every connection must have been closed. */
void budget_free(struct budget *b);

/* A new connection on socket fd: a new budget_conn. May shed another connection (slots, above). */
struct budget_conn *budget_open(struct budget *b, int fd);
/* The connection is gone: gives back what it holds, frees c. Accepts NULL. */
void budget_close(struct budget *b, struct budget_conn *c);

/*
 * A request begins on c with a declared body length (0: none or chunked).
 * BUDGET_FULL when it is over BUDGET_SMALL and does not fit (nothing is held).
 */
enum budget_ans budget_begin(struct budget *b, struct budget_conn *c, unsigned long long declared);
/* got bytes of the body have arrived in all: hold as many (an ordinary body may shed others for them). */
enum budget_ans budget_take(struct budget *b, struct budget_conn *c, size_t got);
/* The body is whole and is being answered: c is not shed from now on. BUDGET_SHED when it was, meanwhile. */
enum budget_ans budget_answer(struct budget *b, struct budget_conn *c);
/* The request on c ended: its bytes go back. */
void budget_end(struct budget *b, struct budget_conn *c);

/* Connections shed so far: for a body that needed their bytes, and for a slot. */
void budget_stats(struct budget *b, unsigned long long *for_bytes, unsigned long long *for_slots);

#endif
