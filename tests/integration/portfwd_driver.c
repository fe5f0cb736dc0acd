/*
 * portfwd_driver.c - the port-forward dialer (fleet/portfwd.c) driven as the
 * fleet runner drives it, for tests/integration/fleet_portfwd.sh: dial, then
 * libcurl over the stream (CURLOPT_OPENSOCKETFUNCTION gives it the dialled fd,
 * CURLOPT_SOCKOPTFUNCTION says it is already connected, CURLOPT_RESOLVE keeps
 * the agent's "NS.POD" host name away from DNS), kube_portfwd_explain before
 * closing the fd when the request failed.
 *
 *   portfwd_driver SERVER CA TOKEN-FILE NS POD PORT get PATH OUT AGENT-TOKEN
 *       one request; the body into OUT; prints "status N bytes M hwm-kb K",
 *       or "curl: ..." and "explain: ..." (exit 1)
 *   ... many N PATH AGENT-TOKEN     N dials at once from N threads, each one request;
 *       prints "ok K of N" and each failure
 *   ... dial                        one dial; prints "dial 0" or "dial RC: MESSAGE"
 *   ... early                       dial, send half a request, close; prints "threads N" once the
 *       tunnel's thread is gone (or after 10 s)
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "fleet/fdcurl.h"
#include "fleet/kconn.h"
#include "hclient.h"
#include "mem.h"

static struct fleet_dialer *dialer;
static struct fleet_agent agent;
static const struct hclient_lib *lib;

static size_t to_file(char *p, size_t size, size_t n, void *u)
{
	return fwrite(p, size, n, u) * size;
}

/* one request through a new tunnel: 0, or -1 with why (curl's and the tunnel's reasons) */
static int request(const char *path, const char *token, FILE *out, long *status, char *why, size_t cap)
{
	struct err_msg em = { "" };
	struct curl_slist *h = NULL, *res = NULL;
	char url[512], auth[512], hostport[512], errbuf[CURL_ERROR_SIZE] = "";
	CURL *c;
	CURLcode r;
	int fd, rc;

	if ((rc = dialer->dial(dialer, &agent, &fd, &em)) != 0) {
		snprintf(why, cap, "dial %d: %s", rc, em.text);
		return -1;
	}
	snprintf(url, sizeof(url), "http://%s.%s:%d%s", agent.namespace_, agent.pod, agent.port, path);
	snprintf(hostport, sizeof(hostport), "%s.%s:%d", agent.namespace_, agent.pod, agent.port);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	h = lib->slist_append(NULL, auth);
	c = lib->easy_init();
	if (fdcurl_attach(lib, c, &fd, hostport, &res, &em) != 0) {
		snprintf(why, cap, "fdcurl: %s", em.text);
		lib->easy_cleanup(c);
		lib->slist_free_all(h);
		close(fd);
		return -1;
	}
	lib->easy_setopt(c, CURLOPT_URL, url);
	lib->easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (getenv("PF_VERBOSE"))
		lib->easy_setopt(c, CURLOPT_VERBOSE, 1L);
	lib->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	lib->easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	lib->easy_setopt(c, CURLOPT_WRITEFUNCTION, to_file);
	lib->easy_setopt(c, CURLOPT_WRITEDATA, out);
	r = lib->easy_perform(c);
	lib->easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	lib->easy_cleanup(c);
	lib->slist_free_all(h);
	lib->slist_free_all(res);
	if (r != CURLE_OK) {
		int n = snprintf(why, cap, "curl: %s", errbuf[0] ? errbuf : lib->easy_strerror(r));

		if (kube_portfwd_explain(dialer, fd, &em) && n > 0 && (size_t)n < cap)
			snprintf(why + n, cap - (size_t)n, "\nexplain: %s", em.text);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static long hwm_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

struct job {
	const char *path, *token;
	int rc;
	long status;
	char why[2048];
	pthread_t t;
};

static void *one(void *arg)
{
	struct job *j = arg;
	FILE *sink = fopen("/dev/null", "w");

	j->rc = request(j->path, j->token, sink, &j->status, j->why, sizeof(j->why));
	if (j->rc == 0 && j->status != 200) {
		snprintf(j->why, sizeof(j->why), "status %ld", j->status);
		j->rc = -1;
	}
	fclose(sink);
	return NULL;
}

static int many(int n, const char *path, const char *token)
{
	struct job *jobs = mem_array((size_t)n, sizeof(*jobs));
	int ok = 0;

	for (int i = 0; i < n; i++) {
		jobs[i].path = path;
		jobs[i].token = token;
		pthread_create(&jobs[i].t, NULL, one, &jobs[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(jobs[i].t, NULL);
		if (jobs[i].rc == 0)
			ok++;
		else
			printf("failed %d: %s\n", i, jobs[i].why);
	}
	printf("ok %d of %d\n", ok, n);
	free(jobs);
	return ok == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct kube_conn k = { 0 };
	struct err_msg em = { "" };
	struct buf tok;
	const char *mode;
	int rc = 2;

	if (argc < 8) {
		fprintf(stderr, "usage: portfwd_driver SERVER CA TOKEN-FILE NS POD PORT MODE [ARGS]\n");
		return 2;
	}
	mem_install();
	if ((lib = hclient_lib(&em)) == NULL) {
		fprintf(stderr, "%s\n", em.text);
		return 2;
	}
	buf_init(&tok, 4096);
	if (buf_read_path(&tok, argv[3], NULL, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		return 2;
	}
	while (tok.len && (tok.data[tok.len - 1] == '\n' || tok.data[tok.len - 1] == '\r'))
		tok.data[--tok.len] = '\0';
	k.server = argv[1];
	k.ca_file = argv[2];
	k.token = tok.data;
	dialer = kube_portfwd_new(&k, 10000);
	mem_wipe(tok.data, tok.len);
	buf_free(&tok);
	agent.namespace_ = argv[4];
	agent.pod = argv[5];
	agent.port = atoi(argv[6]);
	mode = argv[7];
	if (strcmp(mode, "get") == 0 && argc == 11) {
		FILE *out = fopen(argv[9], "w");
		char why[4096];
		long status = 0;

		if (out == NULL)
			return 2;
		long bytes;

		rc = request(argv[8], argv[10], out, &status, why, sizeof(why));
		bytes = ftell(out);
		if (fclose(out) != 0)
			rc = -1;
		if (rc == 0)
			printf("status %ld bytes %ld hwm-kb %ld\n", status, bytes, hwm_kb());
		else
			printf("%s\n", why);
		rc = rc == 0 ? 0 : 1;
	} else if (strcmp(mode, "many") == 0 && argc == 11) {
		rc = many(atoi(argv[8]), argv[9], argv[10]);
	} else if (strcmp(mode, "dial") == 0) {
		int fd;

		rc = dialer->dial(dialer, &agent, &fd, &em);
		if (rc == 0) {
			printf("dial 0\n");
			close(fd);
		} else {
			printf("dial %d: %s\n", rc, em.text);
		}
		rc = 0;
	} else if (strcmp(mode, "early") == 0) {
		static const char half[] = "GET /processes HTTP/1.1\r\nHost: x\r\n";
		int fd, n = 0;

		if ((rc = dialer->dial(dialer, &agent, &fd, &em)) != 0) {
			printf("dial %d: %s\n", rc, em.text);
			return 1;
		}
		if (write(fd, half, sizeof(half) - 1) < 0)
			return 1;
		printf("threads-open %d\n", threads());
		close(fd);
		for (int i = 0; i < 200 && (n = threads()) > 1; i++)
			usleep(50 * 1000);
		printf("threads %d\n", n);
		rc = 0;
	} else {
		fprintf(stderr, "portfwd_driver: unknown mode or arguments\n");
	}
	dialer->free(dialer);
	return rc;
}
