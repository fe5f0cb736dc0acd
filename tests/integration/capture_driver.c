/*
 * capture_driver.c - a capture with no HTTP request in the middle, as a
 * collection rule will run one: the agent's own port, a capture value built
 * by hand, capture_run into a file, the outcome read from the operations
 * list (capture.h, ops.h). For tests/integration/capture_file.sh.
 *
 *   capture_driver SOCKET DUMPS_DIR KIND FILE   KIND: stacks | dump | trace
 *
 * Waits up to 30 s for a runtime to attach, runs the capture, prints
 * "Succeeded LOCATION" (exit 0) or "Failed: WHY" (exit 1); 2 on a setup error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/capture/capture.h"
#include "launcher/capture/ops.h"
#include "launcher/runtime/port.h"
#include "mem.h"

static int run(struct port *port, const char *dumps, const char *kind, const char *file)
{
	struct ops *ops = ops_new(10);
	struct captures_config cc = { .port = port, .ops = ops, .dumps_dir = dumps };
	struct captures *cs = captures_new(&cc);
	struct capture c = { 0 };
	struct port_runtime *l = NULL;
	struct err_msg em;
	char id[37], *loc = NULL, *err = NULL;
	size_t n = 0;
	int rc;

	for (int i = 0; i < 300 && (n = port_list(port, &l)) == 0; i++) {
		port_list_free(l, n);
		usleep(100000);
	}
	if (n == 0) {
		fprintf(stderr, "no runtime attached in 30 s\n");
		return 2;
	}
	c.target = l[0];
	memset(&l[0].info, 0, sizeof(l[0].info));
	port_list_free(l, n);
	c.file = mem_strdup(file);
	if (strcmp(kind, "stacks") == 0) {
		c.kind = CAPTURE_STACKS;
		c.format = CAPTURE_STACKS_TEXT;
	} else if (strcmp(kind, "dump") == 0) {
		c.kind = CAPTURE_DUMP;
		c.format = IPC_DUMP_NORMAL;
	} else {
		c.kind = CAPTURE_TRACE;
		c.duration_ms = 1000;
		if (trace_config_profile("Cpu", 5, &c.session, &em) != 0) {
			fprintf(stderr, "%s\n", em.text);
			return 2;
		}
	}
	if ((rc = capture_run(cs, &c, NULL, id)) != 0) {
		fprintf(stderr, "capture_run: %s\n", err_str(rc));
		return 2;
	}
	rc = ops_wait(ops, id, 60000, &loc, &err);
	if (rc == 0)
		printf("Succeeded %s\n", loc);
	else
		printf("Failed: %s\n", err ? err : err_str(rc));
	free(loc);
	free(err);
	ops_free(ops);
	captures_free(cs);
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct port_config pc = { 0 };
	struct port *port = NULL;
	struct err_msg em;
	int rc;

	mem_install();
	if (argc != 5) {
		fprintf(stderr, "usage: capture_driver SOCKET DUMPS_DIR stacks|dump|trace FILE\n");
		return 2;
	}
	pc.path = argv[1];
	if (port_open(&pc, &port, &em) != 0 || port_start(port, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		return 2;
	}
	rc = run(port, argv[2], argv[3], argv[4]);
	port_free(port);
	return rc;
}
