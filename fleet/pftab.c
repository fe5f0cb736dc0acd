/*
 * pftab.c - the port-forward tunnels' shared table of reasons (pftab.h):
 * one slot per live or explained tunnel, a mutex around it, and the
 * reference count that lets pump threads outlive the dialer. Slots are
 * keyed by the caller's fd and a generation, so that a pump still ending
 * cannot leave its reason on a newer tunnel that got the same fd number.
 * The table holds at most one slot per fd number.
 */
#include "pftab.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

struct pf_slot {
	int fd;
	unsigned long gen;
	char *msg; /* NULL: none yet */
};

struct pf_tab {
	pthread_mutex_t lock;
	int refs;
	unsigned long gen;
	struct pf_slot *v;
	size_t n, cap;
};

struct pf_tab *pf_tab_new(void)
{
	struct pf_tab *t = mem_zalloc(sizeof(*t));

	pthread_mutex_init(&t->lock, NULL);
	t->refs = 1;
	return t;
}

void pf_tab_ref(struct pf_tab *t)
{
	pthread_mutex_lock(&t->lock);
	t->refs++;
	pthread_mutex_unlock(&t->lock);
}

void pf_tab_unref(struct pf_tab *t)
{
	int left;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	left = --t->refs;
	pthread_mutex_unlock(&t->lock);
	if (left > 0)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].msg);
	free(t->v);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* the slot of fd (and gen, unless gen is 0), or NULL; with the lock held */
static struct pf_slot *find(struct pf_tab *t, int fd, unsigned long gen)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].fd == fd && (gen == 0 || t->v[i].gen == gen))
			return &t->v[i];
	return NULL;
}

static void drop(struct pf_tab *t, struct pf_slot *s)
{
	free(s->msg);
	*s = t->v[--t->n];
}

unsigned long pf_tab_begin(struct pf_tab *t, int fd)
{
	struct pf_slot *s;
	unsigned long gen;

	pthread_mutex_lock(&t->lock);
	gen = ++t->gen;
	if ((s = find(t, fd, 0)) == NULL) {
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 16;
			t->v = mem_realloc(t->v, t->cap * sizeof(*t->v));
		}
		s = &t->v[t->n++];
	} else {
		free(s->msg);
	}
	*s = (struct pf_slot){ .fd = fd, .gen = gen };
	pthread_mutex_unlock(&t->lock);
	return gen;
}

void pf_tab_note(struct pf_tab *t, int fd, unsigned long gen, const char *msg)
{
	struct pf_slot *s;

	pthread_mutex_lock(&t->lock);
	if ((s = find(t, fd, gen)) != NULL && s->msg == NULL)
		s->msg = mem_strdup(msg);
	pthread_mutex_unlock(&t->lock);
}

void pf_tab_end(struct pf_tab *t, int fd, unsigned long gen)
{
	struct pf_slot *s;

	pthread_mutex_lock(&t->lock);
	if ((s = find(t, fd, gen)) != NULL && s->msg == NULL)
		drop(t, s);
	pthread_mutex_unlock(&t->lock);
}

bool pf_tab_take(struct pf_tab *t, int fd, struct err_msg *em)
{
	struct pf_slot *s;
	bool found = false;

	pthread_mutex_lock(&t->lock);
	if ((s = find(t, fd, 0)) != NULL && s->msg != NULL) {
		err_set(em, DP_EREMOTE, "%s", s->msg);
		drop(t, s);
		found = true;
	}
	pthread_mutex_unlock(&t->lock);
	return found;
}
