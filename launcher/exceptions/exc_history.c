/*
 * exc_history.c - the bounded history of one runtime's exceptions
 * (exc_history.h).
 *
 * Payloads (the runtime's manifest, ClrEtwAll.man): ExceptionThrown_V1
 * (80): ExceptionType, ExceptionMessage (UTF-16, NUL-ended),
 * ExceptionEIPCodeThrown (pointer), ExceptionHRESULT (u32), ExceptionFlags
 * (u16), ClrInstanceID (u16). ExceptionCatchStart (250): EntryEIP, MethodID,
 * MethodName, ClrInstanceID; ExceptionCatchStop (251): none.
 *
 * A round of `catch (E e) { throw new F(..., e); }` reads, at Informational:
 * 80 E, 250 (E caught), 80 F (flag 0x1: F has an inner exception), 250 (F
 * caught), 251, 256; each with a stack walk in the app. The session asks for
 * Error only (80 alone: a third of the app's cost, bench/exceptions.sh), and
 * F's inner exception is the thread's last one, E. What that gets wrong, the
 * catch events would too: an inner exception never thrown, or thrown on
 * another thread (docs/agent/exceptions.md).
 */
#include "exc_history.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define EV_THROWN 80
#define FLAG_HAS_INNER 0x1
#define MAX_THREADS 4096 /* threads tracked; past it the table starts again */

struct thread {
	uint64_t tid;
	uint64_t last; /* the last exception thrown on it */
};

void exc_history_init(struct exc_history *h, size_t max_count, size_t max_bytes)
{
	memset(h, 0, sizeof(*h));
	h->max_count = max_count ? max_count : 1;
	h->max_bytes = max_bytes;
	h->next_id = 1;
	htab_init(&h->threads, sizeof(struct thread));
}

static void entry_clear(struct exc_entry *e)
{
	free(e->type);
	free(e->message);
	free(e->ips);
	memset(e, 0, sizeof(*e));
}

void exc_history_free(struct exc_history *h)
{
	for (size_t i = 0; h->ring && i < h->n; i++)
		entry_clear(&h->ring[(h->head + i) % h->max_count]);
	free(h->ring);
	htab_free(&h->threads);
	memset(h, 0, sizeof(*h));
}

static bool thread_eq(const void *slot, const void *key)
{
	return ((const struct thread *)slot)->tid == *(const uint64_t *)key;
}

static struct thread *thread_of(struct exc_history *h, uint64_t tid)
{
	uint64_t hash = htab_u64(tid);
	struct thread *t = htab_find(&h->threads, hash, thread_eq, &tid);

	if (t)
		return t;
	if (h->threads.n >= MAX_THREADS) { /* threads come and go: the ones gone are forgotten this way */
		htab_free(&h->threads);
		htab_init(&h->threads, sizeof(struct thread));
	}
	t = htab_put(&h->threads, hash);
	t->tid = tid;
	return t;
}

static void drop_oldest(struct exc_history *h)
{
	struct exc_entry *e = &h->ring[h->head];

	h->bytes -= e->bytes;
	entry_clear(e);
	h->head = (h->head + 1) % h->max_count;
	h->n--;
	h->dropped++;
}

/* A message longer than the cap is cut on a UTF-8 character boundary, with "..." after it. */
static void cap_message(char *m)
{
	size_t n = strlen(m);

	if (n <= EXC_MAX_MESSAGE)
		return;
	n = EXC_MAX_MESSAGE - 3;
	while (n > 0 && ((unsigned char)m[n] & 0xC0) == 0x80)
		n--;
	memcpy(m + n, "...", 4);
}

static void thrown(struct exc_history *h, const struct nettrace_event *ev, int64_t wall_ms)
{
	struct nettrace_reader r = { ev->payload, ev->payload + ev->payload_len, false };
	struct exc_entry e = { .wall_ms = wall_ms, .thread = ev->thread_id };
	struct thread *t;

	e.type = nettrace_utf16z(&r);
	e.message = nettrace_utf16z(&r);
	nettrace_u64(&r); /* the throwing instruction: the stack has it */
	e.hresult = nettrace_u32(&r);
	e.flags = nettrace_u16(&r);
	if (r.bad || e.type == NULL) {
		entry_clear(&e);
		return;
	}
	if (e.message == NULL)
		e.message = mem_strdup("");
	cap_message(e.message);
	e.n_ips = ev->stack_n < EXC_MAX_IPS ? ev->stack_n : EXC_MAX_IPS;
	e.ips = mem_array(e.n_ips ? e.n_ips : 1, sizeof(uint64_t));
	if (e.n_ips)
		memcpy(e.ips, ev->stack, e.n_ips * sizeof(uint64_t));
	e.id = h->next_id++;
	e.bytes = sizeof(e) + strlen(e.type) + 1 + strlen(e.message) + 1 + e.n_ips * sizeof(uint64_t);
	t = thread_of(h, ev->thread_id);
	if (e.flags & FLAG_HAS_INNER)
		e.inner = t->last;
	t->last = e.id;
	h->seen++;
	if (h->ring == NULL)
		h->ring = mem_array(h->max_count, sizeof(*h->ring));
	while (h->n && (h->n == h->max_count || (h->max_bytes && h->bytes + e.bytes > h->max_bytes)))
		drop_oldest(h);
	if (h->max_bytes && e.bytes > h->max_bytes) { /* one larger than the whole cap is not kept */
		entry_clear(&e);
		h->dropped++;
		return;
	}
	h->ring[(h->head + h->n) % h->max_count] = e;
	h->n++;
	h->bytes += e.bytes;
}

bool exc_history_event(struct exc_history *h, const struct nettrace_event *e, int64_t wall_ms)
{
	if (e->meta->event_id != EV_THROWN || strcmp(e->meta->provider, EXC_PROVIDER) != 0)
		return false;
	thrown(h, e, wall_ms);
	return true;
}

size_t exc_history_copy(const struct exc_history *h, struct exc_entry **out)
{
	struct exc_entry *c = mem_array(h->n ? h->n : 1, sizeof(*c));

	for (size_t i = 0; i < h->n; i++) {
		const struct exc_entry *e = &h->ring[(h->head + i) % h->max_count];

		c[i] = *e;
		c[i].type = mem_strdup(e->type);
		c[i].message = mem_strdup(e->message);
		c[i].ips = mem_array(e->n_ips ? e->n_ips : 1, sizeof(uint64_t));
		if (e->n_ips)
			memcpy(c[i].ips, e->ips, e->n_ips * sizeof(uint64_t));
	}
	*out = c;
	return h->n;
}

void exc_entries_free(struct exc_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		entry_clear(&e[i]);
	free(e);
}
