/*
 * cli.c - `diagport launch [--socket PATH] [-- CMD ARGS...]`.
 *
 * Sidecar mode (no command): own the diagnostic port until SIGTERM/SIGINT.
 * Init mode (a command after --): also start the app with
 * DOTNET_DiagnosticPorts pointing at our socket (appended to any value it
 * already has), forward SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it,
 * reap orphans when we are PID 1, and exit with the app's status.
 *
 * The HTTP API (api.c) listens on --urls. Secure by default: without a token
 * the default URL is loopback only, and a non-loopback URL is refused unless
 * --no-auth says so explicitly. Settings come from flags, then DIAGPORT_*
 * variables, then the dotnet-monitor names of the same settings, so the agent
 * drops into an existing dotnet-monitor sidecar manifest.
 *
 * Not built yet (issue 3 continues): --config (YAML) and --dumps-limit; they
 * are refused with a message rather than silently ignored.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <fcntl.h>

#include "api.h"
#include "buf.h"
#include "httpd.h"
#include "mem.h"
#include "port.h"
#include "sandbox.h"

#define DEFAULT_SOCKET "/diag/port"
#define DEFAULT_PORT 52323
#define MAX_TOKEN 4096

/* Signals we take with sigwaitinfo: blocked in every thread before any thread starts. */
static const int handled[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };

static void handled_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		sigaddset(set, handled[i]);
}

static void log_event(const char *line)
{
	fprintf(stderr, "%s\n", line);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport launch [--socket PATH] [--urls URL[;URL...]] [--dumps DIR]\n"
		   "                       [--auth-token-file FILE | --no-auth] [--dump-transport file|fifo]\n"
		   "                       [--connect-dir DIR] [--no-sandbox] [-- COMMAND [ARGS...]]\n\n"
		   "Owns the .NET diagnostic port at PATH (default %s): every runtime that connects is\n"
		   "resumed at once and kept attached, and captures are served over HTTP on URLS\n"
		   "(default http://+:%d with a token, http://127.0.0.1:%d without one). With a command,\n"
		   "also starts it with DOTNET_DiagnosticPorts pointing here, forwards signals, and exits\n"
		   "with its status. Environment: DIAGPORT_SOCKET, DIAGPORT_URLS, DIAGPORT_DUMPS,\n"
		   "DIAGPORT_AUTH_TOKEN(_FILE), DIAGPORT_DUMP_TRANSPORT, and dotnet-monitor's DOTNETMONITOR_Urls,\n"
		   "DOTNETMONITOR_DiagnosticPort__EndpointName, DOTNETMONITOR_Storage__DumpTempFolder.\n"
		   "--connect-dir DIR (DIAGPORT_CONNECT_DIR): also attach runtimes by their default sockets in DIR.\n",
		   DEFAULT_SOCKET, DEFAULT_PORT, DEFAULT_PORT);
}

/* DOTNET_DiagnosticPorts for the child: ours appended to what it had, never twice. */
static char *child_ports(const char *socket)
{
	const char *old = getenv("DOTNET_DiagnosticPorts");
	char *ours = mem_printf("%s,nosuspend,connect", socket);
	char *v;

	if (old == NULL || *old == '\0')
		return ours;
	if (strstr(old, socket) != NULL) {
		free(ours);
		return mem_strdup(old);
	}
	v = mem_printf("%s;%s", old, ours);
	free(ours);
	return v;
}

static int run_child(char **cmd, const char *socket, const sigset_t *old, bool sandbox)
{
	char *ports = child_ports(socket);
	sigset_t set;
	pid_t child;
	int status = 0;

	handled_set(&set);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "diagport: cannot start %s: %s\n", cmd[0], strerror(errno));
		free(ports);
		return 127;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		setenv("DOTNET_DiagnosticPorts", ports, 1);
		execvp(cmd[0], cmd);
		fprintf(stderr, "diagport: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	free(ports);
	if (sandbox)
		sandbox_enter(SANDBOX_AGENT); /* after the fork: the app must not inherit the filter */
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		pid_t w;

		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(child, sig);
			continue;
		}
		/* Reap everything that exited: our child, and orphans when we are PID 1. */
		while ((w = waitpid(-1, &status, WNOHANG)) > 0)
			if (w == child)
				goto done;
	}
done:
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static const char *env2(const char *a, const char *b)
{
	const char *v = getenv(a), *w = getenv(b);

	return v && *v ? v : w && *w ? w : NULL;
}

/* The token from a file (a mounted Secret), trailing whitespace removed. NULL and a message on failure. */
static char *read_token(const char *file)
{
	struct buf b;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0) {
		fprintf(stderr, "diagport: launch: cannot open the token file %s: %s\n", file, strerror(errno));
		return NULL;
	}
	buf_init(&b, MAX_TOKEN);
	rc = buf_read_fd(&b, fd);
	close(fd);
	while (rc == 0 && b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r' || b.data[b.len - 1] == ' '))
		b.data[--b.len] = '\0';
	if (rc != 0 || b.len == 0) {
		fprintf(stderr, "diagport: launch: the token file %s is %s\n", file,
			rc == DP_ETOOBIG ? "larger than 4 KiB" : rc ? "unreadable" : "empty");
		if (b.data)
			mem_wipe(b.data, b.len);
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

int launch_cli(int argc, char **argv)
{
	const char *socket = env2("DIAGPORT_SOCKET", "DOTNETMONITOR_DiagnosticPort__EndpointName");
	const char *urls = env2("DIAGPORT_URLS", "DOTNETMONITOR_Urls");
	const char *dumps = env2("DIAGPORT_DUMPS", "DOTNETMONITOR_Storage__DumpTempFolder");
	const char *token_file = env2("DIAGPORT_AUTH_TOKEN_FILE", "");
	const char *transport = env2("DIAGPORT_DUMP_TRANSPORT", "");
	const char *connect_dir = env2("DIAGPORT_CONNECT_DIR", "");
	const char *env_token = getenv("DIAGPORT_AUTH_TOKEN");
	char *token = NULL, *default_urls = NULL;
	bool no_auth = false, sandbox = true;
	struct httpd *h = NULL;
	struct api *api = NULL;
	char **cmd = NULL;
	struct port_config cfg = { 0 };
	struct port *p = NULL;
	struct err_msg em;
	sigset_t old_mask;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			if (i + 1 == argc) {
				fprintf(stderr, "diagport: launch: nothing after --\n");
				return 2;
			}
			cmd = argv + i + 1;
			break;
		} else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			socket = argv[++i];
		} else if (strcmp(argv[i], "--urls") == 0 && i + 1 < argc) {
			urls = argv[++i];
		} else if (strcmp(argv[i], "--dumps") == 0 && i + 1 < argc) {
			dumps = argv[++i];
		} else if (strcmp(argv[i], "--auth-token-file") == 0 && i + 1 < argc) {
			token_file = argv[++i];
		} else if (strcmp(argv[i], "--dump-transport") == 0 && i + 1 < argc) {
			transport = argv[++i];
			if (strcmp(transport, "file") != 0 && strcmp(transport, "fifo") != 0) {
				fprintf(stderr, "diagport: launch: --dump-transport takes file or fifo\n");
				return 2;
			}
		} else if (strcmp(argv[i], "--connect-dir") == 0 && i + 1 < argc) {
			connect_dir = argv[++i];
		} else if (strcmp(argv[i], "--no-sandbox") == 0) {
			sandbox = false;
		} else if (strcmp(argv[i], "--no-auth") == 0) {
			no_auth = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--dumps-limit") == 0) {
			fprintf(stderr, "diagport: launch: %s is not supported by this build yet\n", argv[i]);
			return 2;
		} else {
			fprintf(stderr, "diagport: launch: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (transport && *transport && strcmp(transport, "file") != 0 && strcmp(transport, "fifo") != 0) {
		fprintf(stderr, "diagport: launch: DIAGPORT_DUMP_TRANSPORT takes file or fifo, not '%s'\n", transport);
		return 2;
	}
	if (socket == NULL)
		socket = DEFAULT_SOCKET;
	if (dumps == NULL)
		dumps = "/dumps";
	if (token_file && *token_file && no_auth) {
		fprintf(stderr, "diagport: launch: --auth-token-file and --no-auth contradict each other\n");
		return 2;
	}
	if (token_file && *token_file) {
		if ((token = read_token(token_file)) == NULL)
			return 2;
	} else if (!no_auth && env_token && *env_token) {
		token = mem_strdup(env_token); /* ECS injects a Secrets Manager secret this way */
	}
	if (urls == NULL) {
		default_urls = mem_printf("http://%s:%d", token || no_auth ? "+" : "127.0.0.1", DEFAULT_PORT);
		urls = default_urls;
	}
	if (!token && !no_auth && !httpd_urls_loopback_only(urls)) {
		fprintf(stderr, "diagport: launch: %s is reachable from the network, and no token is configured; "
				"give --auth-token-file FILE, listen on loopback only, or turn authentication off "
				"explicitly with --no-auth\n", urls);
		free(default_urls);
		return 2;
	}
	cfg.path = socket;
	cfg.connect_dir = connect_dir && *connect_dir ? connect_dir : NULL;
	cfg.on_event = log_event;
	{
		sigset_t set;

		handled_set(&set);
		sigprocmask(SIG_BLOCK, &set, &old_mask);
	}
	if (port_open(&cfg, &p, &em) != 0 || port_start(p, &em) != 0) {
		fprintf(stderr, "diagport: launch: %s\n", em.text);
		port_free(p);
		return 1;
	}
	{
		struct api_config ac = { .port = p, .socket_path = socket, .dumps_dir = dumps, .token = token,
					 .dump_transport = transport };
		struct httpd_config hc = { .urls = urls };

		api = api_new(&ac);
		if (token) {
			mem_wipe(token, strlen(token));
			free(token);
			token = NULL;
		}
		if (httpd_start(&hc, api_handle, api, &h, &em) != 0) {
			fprintf(stderr, "diagport: launch: %s\n", em.text);
			api_free(api);
			port_free(p);
			free(default_urls);
			return 1;
		}
	}
	if (cmd) {
		rc = run_child(cmd, socket, &old_mask, sandbox);
	} else {
		sigset_t stop;
		int sig;

		if (sandbox)
			sandbox_enter(SANDBOX_AGENT);
		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		do
			sig = sigwaitinfo(&stop, NULL);
		while (sig < 0);
		rc = 0;
	}
	httpd_free(h);
	api_free(api);
	port_free(p);
	free(default_urls);
	return rc;
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
	(void)p;
	(void)u;
	return size * n;
}

int health_cli(int argc, char **argv)
{
	int port = DEFAULT_PORT;
	long code = 0;
	char url[64];
	CURL *c;
	CURLcode rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			char *end;

			port = (int)strtol(argv[++i], &end, 10);
			if (*end != '\0')
				port = 0;
		} else {
			fprintf(stderr, "usage: diagport health [--port N]\n"
					"Exits 0 when the agent on this host answers /healthz (for probes without a shell).\n");
			return 2;
		}
	}
	if (port < 1 || port > 65535) {
		fprintf(stderr, "diagport: health: bad port\n");
		return 2;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
	c = curl_easy_init();
	if (c == NULL)
		return 1;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (code == 200)
		return 0;
	fprintf(stderr, "diagport: health: %s: %s\n", url, rc != CURLE_OK ? curl_easy_strerror(rc) : "not healthy");
	return 1;
}
