/*
 * test_eproc.c - the egress process (launcher/capture/eproc.h) with a store of the
 * test's own, which keeps each upload's length and checksum: a real fork, a real pipe passed by SCM_RIGHTS, the real seccomp
 * profile. An artifact arrives whole and committed; an abort leaves nothing;
 * a store that fails midway gives its own words and stops the writer
 * (EPIPE), not hangs it; the egress process killed fails what is in flight
 * and what comes after, and the agent sees it gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/config.h"
#include "launcher/capture/eproc.h"
#include "mem.h"
#include "t.h"

/* An upload kept as its length and a checksum (FNV-1a): the egress process may open files only to read. */
struct up {
	char name[128];
	uint64_t n, sum, fail_after;
	int cancel_fd;
};

static const char *setting(const struct egress_provider *p, const char *k)
{
	const struct settings_node *n = settings_find(p->set, k);

	return n ? n->value : NULL;
}

static int t_check(const struct egress_provider *p, struct err_msg *em)
{
	return setting(p, "FailAfter") ? 0 : err_set(em, DP_EINVAL, "%s: no FailAfter", p->name);
}

/* One attempt from the egress process: "ok" or the errno's name. */
static const char *outcome(int rc)
{
	return rc >= 0 ? "ok" : errno == EPERM ? "EPERM" : strerror(errno);
}

/*
 * What a compromised store client tries under SANDBOX_EGRESS, as one message: a Unix socket (the runtimes'
 * and the agent's own listeners are Unix sockets), opening a file to write, to truncate, to create, and
 * removing or renaming one. Every one must be refused.
 */
static int probe(const char *dir, struct err_msg *em)
{
	char f[300], g[300];
	int fd, u;

	snprintf(f, sizeof(f), "%s/kept", dir);
	snprintf(g, sizeof(g), "%s/new", dir);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	err_set(em, DP_EREMOTE, "unix=%s", outcome(u));
	fd = open(f, O_WRONLY);
	err_prefix(em, "write=%s", outcome(fd));
	if (fd >= 0)
		close(fd);
	fd = open(f, O_RDONLY | O_TRUNC);
	err_prefix(em, "trunc=%s", outcome(fd));
	if (fd >= 0)
		close(fd);
	fd = open(g, O_RDONLY | O_CREAT, 0644);
	err_prefix(em, "create=%s", outcome(fd));
	if (fd >= 0)
		close(fd);
	err_prefix(em, "unlink=%s", outcome(unlink(f)));
	err_prefix(em, "rename=%s", outcome(rename(f, g)));
	err_prefix(em, "mkdir=%s", outcome(mkdir(g, 0755)));
	return DP_EREMOTE;
}

static int t_begin(const struct egress_provider *p, const char *name, const char *const *meta, int cancel_fd,
		   void **out, struct err_msg *em)
{
	struct up *u;

	if (setting(p, "Probe")) /* a store gone bad: what may it do from inside the sandbox? */
		return probe(setting(p, "Probe"), em);
	u = mem_zalloc(sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->cancel_fd = cancel_fd;
	u->fail_after = strtoull(setting(p, "FailAfter"), NULL, 10);
	u->sum = 14695981039346656037ull;
	for (size_t i = 0; meta[i]; i += 2)
		if (strcmp(meta[i], "pid") == 0 && strcmp(meta[i + 1], "42") != 0) {
			free(u);
			return err_set(em, DP_EINVAL, "metadata pid is not 42");
		}
	*out = u;
	return 0;
}

static int t_write(void *h, const void *d, size_t n, struct err_msg *em)
{
	struct up *u = h;

	struct pollfd pf = { .fd = u->cancel_fd, .events = POLLIN };

	/* a store that stopped answering ("hang-*"): only the cancel fd ends the wait; every other upload
	 * fails at once when its cancel fd is readable (a slot's earlier cancel left behind) */
	if (poll(&pf, 1, strncmp(u->name, "hang-", 5) == 0 ? 120000 : 0) > 0)
		return err_set(em, DP_ECANCELED, "cancelled");
	if (strncmp(u->name, "hang-", 5) == 0)
		return err_set(em, DP_EIO, "the hung store was never cancelled");
	if (u->fail_after && u->n + n > u->fail_after)
		return err_set(em, DP_EREMOTE, "InternalError: the test store gave up after %llu bytes",
			       (unsigned long long)u->n);
	for (size_t i = 0; i < n; i++)
		u->sum = (u->sum ^ ((const unsigned char *)d)[i]) * 1099511628211ull;
	u->n += n;
	return 0;
}

static int t_finish(void *h, char **location, struct err_msg *em)
{
	struct up *u = h;
	struct pollfd pf = { .fd = u->cancel_fd, .events = POLLIN };

	if (strncmp(u->name, "hangfin-", 8) == 0) { /* a store that never completes the upload */
		int rc = poll(&pf, 1, 120000) > 0 ? err_set(em, DP_ECANCELED, "cancelled")
						  : err_set(em, DP_EIO, "the hung completion was never cancelled");

		free(u);
		return rc;
	}

	*location = mem_printf("test://%s?bytes=%llu&sum=%016llx", u->name, (unsigned long long)u->n,
			       (unsigned long long)u->sum);
	free(u);
	return 0;
}

static void t_abort(void *h)
{
	free(h);
}

static uint64_t t_sent(void *h)
{
	return ((struct up *)h)->n;
}

static const struct egress_store test_store = { "S3Storage", t_check, t_begin, t_write, t_finish, t_abort, t_sent };
static const struct egress_store *const test_stores[] = { &test_store, NULL };

static struct settings_node *sets; /* the provider's settings: a tree's root */
static struct egress_provider prov;
static struct launch_config cfg;
static struct eproc *ep;

static int start(const char *fail_after)
{
	struct err_msg em;

	memset(&cfg, 0, sizeof(cfg));
	sets = settings_new();
	settings_put(sets, "FailAfter", fail_after ? fail_after : "0", "test", 0, &em);
	settings_put(sets, "Region", "secret-ish", "test", 0, &em);
	prov = (struct egress_provider){ .name = mem_strdup("store"), .type = "S3Storage", .set = sets };
	cfg.egress = &prov;
	cfg.n_egress = 1;
	return eproc_start_with(&cfg, true, test_stores, &ep, &em);
}

static void stop(void)
{
	eproc_free(ep);
	ep = NULL;
	settings_free(sets);
	sets = NULL;
	free(prov.name);
}

static const char *const meta[] = { "pid", "42", "artifacttype", "dump", NULL };

static uint64_t progressed;
static void got_progress(void *ctx, uint64_t sent)
{
	*(uint64_t *)ctx = sent;
}

static void committed_whole(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	char *loc = NULL, *chunk = malloc(1 << 20);
	int fd, rc;

	T_CHECK(start(NULL) == 0 && ep != NULL);
	T_CHECK(eproc_alive(ep));
	/* the agent's copy of the settings is wiped: only the egress process holds them */
	T_CHECK(settings_find(prov.set, "Region")->value[0] == '\0');
	T_CHECK(eproc_open(ep, &prov, "a.dmp", meta, got_progress, &progressed, &fd, &u, &em) == 0);
	memset(chunk, 'x', 1 << 20);
	for (int i = 0; i < 24; i++)
		T_CHECK(write(fd, chunk, 1 << 20) == 1 << 20);
	free(chunk);
	rc = eproc_close(u, true, 24u << 20, NULL, &loc, &em);
	if (rc != 0)
		T_FAIL("eproc_close: %d %s", rc, em.text);
	{
		uint64_t sum = 14695981039346656037ull;
		char want[128];

		for (int i = 0; i < 24 << 20; i++)
			sum = (sum ^ 'x') * 1099511628211ull;
		snprintf(want, sizeof(want), "test://a.dmp?bytes=%d&sum=%016llx", 24 << 20, (unsigned long long)sum);
		T_STREQ(loc, want);
	}
	free(loc);
	/* the store's progress reached the agent: the last report is the whole artifact */
	T_CHECK(progressed == 24u << 20);
	stop();
}

static void short_refused(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	int fd;

	T_CHECK(start(NULL) == 0);
	T_CHECK(eproc_open(ep, &prov, "b.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
	T_CHECK(write(fd, "abc", 3) == 3);
	/* the agent says 10 bytes; 3 came: not committed */
	T_CHECK(eproc_close(u, true, 10, NULL, NULL, &em) == DP_EREMOTE);
	T_CHECK(strstr(em.text, "short") != NULL);
	stop();
}

static void aborted(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	int fd;

	T_CHECK(start(NULL) == 0);
	T_CHECK(eproc_open(ep, &prov, "c.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
	T_CHECK(write(fd, "abc", 3) == 3);
	T_CHECK(eproc_close(u, false, 0, NULL, NULL, &em) == DP_ECANCELED);
	T_CHECK(strstr(em.text, "aborted") != NULL);
	stop();
}

/*
 * The store hangs (a dead endpoint): the agent's abort ends its wait through the cancel fd, and the
 * operation ends at once, not after the store's timeouts; so does a commit cancelled while the store
 * completes; every slot then takes an upload whole (each slot's cancel was cleared).
 */
static void abort_ends_hung_store(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	struct timespec t0, t1;
	char name[32], *loc = NULL;
	int fd, rc;
	double took;

	T_CHECK(start(NULL) == 0);
	T_CHECK(eproc_open(ep, &prov, "hang-1.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
	T_CHECK(write(fd, "abc", 3) == 3);
	usleep(200000); /* the store is inside its write, waiting */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = eproc_close(u, false, 0, NULL, NULL, &em);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (rc != DP_ECANCELED || took > 10)
		T_FAIL("abort of a hung upload: %d (%s) after %.1f s; the store would have held it 120 s", rc, em.text,
		       took);
	/* cancelled while the store completes the upload: the commit becomes an abort */
	{
		atomic_bool cancel = true;

		T_CHECK(eproc_open(ep, &prov, "hangfin-1.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
		T_CHECK(write(fd, "abc", 3) == 3);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = eproc_close(u, true, 3, &cancel, &loc, &em);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (rc != DP_ECANCELED || took > 10)
			T_FAIL("a commit cancelled while the store completes: %d (%s) after %.1f s", rc, em.text, took);
	}
	for (int i = 0; i < 20; i++) { /* more than the slots: the ones cancelled are reused */
		snprintf(name, sizeof(name), "ok-%d.dmp", i);
		T_CHECK(eproc_open(ep, &prov, name, meta, NULL, NULL, &fd, &u, &em) == 0);
		T_CHECK(write(fd, "abc", 3) == 3);
		rc = eproc_close(u, true, 3, NULL, &loc, &em);
		if (rc != 0)
			T_FAIL("upload %d after the cancel: %d %s", i, rc, em.text);
		free(loc);
	}
	stop();
}

static void store_fails(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	char *chunk = malloc(1 << 20);
	int fd, rc = 0;
	ssize_t n = 0;

	T_CHECK(start("3000000") == 0);
	T_CHECK(eproc_open(ep, &prov, "d.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
	memset(chunk, 'y', 1 << 20);
	/* the writer is stopped (EPIPE) once the store gave up, not left blocked on a full pipe */
	for (int i = 0; i < 64 && n >= 0; i++)
		n = write(fd, chunk, 1 << 20);
	free(chunk);
	T_CHECK(n < 0 && errno == EPIPE);
	rc = eproc_close(u, false, 0, NULL, NULL, &em);
	if (rc != DP_EREMOTE)
		T_FAIL("eproc_close: %d %s", rc, em.text);
	T_CHECK(strstr(em.text, "InternalError: the test store gave up") != NULL);
	stop();
}

static void process_killed(void)
{
	struct eproc_upload *u;
	struct err_msg em;
	int fd, rc;
	char name[32];
	FILE *f;

	T_CHECK(start(NULL) == 0);
	T_CHECK(eproc_open(ep, &prov, "e.dmp", meta, NULL, NULL, &fd, &u, &em) == 0);
	/* find the egress process: the agent's only child */
	snprintf(name, sizeof(name), "/proc/%d/task/%d/children", getpid(), getpid());
	f = fopen(name, "r");
	T_CHECK(f != NULL);
	{
		int pid = 0;

		T_CHECK(fscanf(f, "%d", &pid) == 1 && pid > 0);
		fclose(f);
		kill(pid, SIGKILL);
	}
	rc = eproc_close(u, true, 0, NULL, NULL, &em);
	if (rc != DP_EIO)
		T_FAIL("eproc_close after the kill: %d %s", rc, em.text);
	for (int i = 0; i < 100 && eproc_alive(ep); i++)
		usleep(10000);
	T_CHECK(!eproc_alive(ep));
	T_CHECK(eproc_open(ep, &prov, "f.dmp", meta, NULL, NULL, &fd, &u, &em) == DP_EIO);
	T_CHECK(strstr(em.text, "exited") != NULL);
	stop();
}

/* The egress process under its own seccomp profile: no Unix socket, no file written, truncated, created,
 * removed or renamed (it may open files only to read: CA bundle, token files) */
static void sandbox_holds(void)
{
	char dir[] = "/tmp/dp-eproc-XXXXXX", f[300], g[300], *saved;
	struct eproc_upload *u;
	struct err_msg em;
	struct stat st;
	FILE *fp;
	int fd;

	T_CHECK(mkdtemp(dir) != NULL);
	snprintf(f, sizeof(f), "%s/kept", dir);
	snprintf(g, sizeof(g), "%s/new", dir);
	fp = fopen(f, "w");
	T_CHECK(fp != NULL);
	fputs("the agent's file\n", fp);
	fclose(fp);
	/* the test store, told to probe the sandbox instead of storing */
	memset(&cfg, 0, sizeof(cfg));
	sets = settings_new();
	settings_put(sets, "Probe", dir, "test", 0, &em);
	settings_put(sets, "FailAfter", "0", "test", 0, &em);
	prov = (struct egress_provider){ .name = mem_strdup("store"), .type = "S3Storage", .set = sets };
	cfg.egress = &prov;
	cfg.n_egress = 1;
	T_CHECK(eproc_start_with(&cfg, true, test_stores, &ep, &em) == 0);
	T_CHECK(eproc_open(ep, &prov, "p", meta, NULL, NULL, &fd, &u, &em) == 0);
	close(fd);
	T_CHECK(eproc_close(u, true, 0, NULL, NULL, &em) == DP_EREMOTE);
	saved = mem_strdup(em.text);
	stop();
	T_STREQ(saved, "mkdir=EPERM: rename=EPERM: unlink=EPERM: create=EPERM: trunc=EPERM: write=EPERM: unix=EPERM");
	free(saved);
	T_CHECK(stat(f, &st) == 0 && st.st_size == 17);
	T_CHECK(stat(g, &st) != 0);
	unlink(f);
	rmdir(dir);
}

int main(void)
{
	t_file_name = "test_eproc";
	signal(SIGPIPE, SIG_IGN);
	T_RUN(committed_whole);
	T_RUN(short_refused);
	T_RUN(aborted);
	T_RUN(abort_ends_hung_store);
	T_RUN(store_fails);
	T_RUN(process_killed);
	T_RUN(sandbox_holds);
	return t_failed_cases ? 1 : 0;
}
