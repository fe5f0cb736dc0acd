/*
 * proc.c - single commands to a runtime answered at once: /env and /perfmap (proc.h).
 */
#include "proc.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "ipc.h"
#include "mem.h"
#include "utf8.h"

#define TAKE_TIMEOUT_MS 5000
#define ENV_MAX_BYTES (1 << 20)

/* Run one command on a fresh connection of runtime p. */
static int command(struct port *port, const struct port_runtime *p, const struct buf *req, struct ipc_header *h,
		   struct buf *pl, int *fd_out, int timeout_ms)
{
	int fd, rc = port_take(port, p->cookie, TAKE_TIMEOUT_MS, &fd);

	if (rc != 0)
		return rc;
	rc = ipc_transact(fd, req, h, pl, timeout_ms);
	if (rc == 0 && fd_out) {
		*fd_out = fd;
		return 0;
	}
	close(fd);
	port_release(port, p->cookie);
	return rc;
}

void proc_env(struct port *port, const struct port_runtime *p, struct httpd_req *r)
{
	struct ipc_header h;
	struct buf req, pl;
	json_t *o;
	char **vars = NULL;
	size_t n = 0;
	int fd = -1, rc;

	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, ENV_MAX_BYTES);
	ipc_begin(&req, IPC_SET_PROCESS, IPC_PROCESS_ENV);
	ipc_end(&req);
	rc = command(port, p, &req, &h, &pl, &fd, 10000);
	if (rc == 0) {
		struct ipc_reader rd = { (const uint8_t *)pl.data, (const uint8_t *)pl.data + pl.len };
		uint32_t incoming = 0;

		uint32_t hr = 0;
		char *text = NULL;

		if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_ERROR &&
		    ipc_parse_error((const uint8_t *)pl.data, pl.len, &hr, &text) == 0 && hr == IPC_E_UNKNOWN_COMMAND)
			rc = DP_EUNSUPPORTED; /* a runtime older than .NET 5 */
		else if (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK || ipc_get_u32(&rd, &incoming) != 0 ||
			 incoming > ENV_MAX_BYTES)
			rc = DP_ESYNTAX;
		free(text);
		buf_reset(&pl);
		if (rc == 0) {
			char *tmp = mem_alloc(incoming ? incoming : 1);

			rc = ipc_read_full(fd, tmp, incoming, 10000);
			if (rc == 0)
				rc = ipc_parse_env((const uint8_t *)tmp, incoming, &vars, &n);
			free(tmp);
		}
		close(fd);
		port_release(port, p->cookie);
	}
	if (rc == DP_EUNSUPPORTED) {
		httpd_problem(r, 400, "Bad Request", "pid %llu runs a .NET older than 5.0, which cannot report its "
			      "environment (the runtime does not know ProcessEnvironment)", (unsigned long long)p->pid);
	} else if (rc != 0) {
		httpd_problem(r, 500, "Internal Server Error", "could not read the environment of pid %llu: %s",
			      (unsigned long long)p->pid, err_str(rc));
	} else {
		o = json_object();
		for (size_t i = 0; i < n; i++) {
			char *eq = strchr(vars[i], '=');

			if (eq) {
				json_t *k = utf8_json(vars[i], (size_t)(eq - vars[i]));

				json_object_set_new(o, json_string_value(k), utf8_json_str(eq + 1));
				json_decref(k);
			}
		}
		httpd_send_json(r, 200, o);
	}
	ipc_env_free(vars, n);
	buf_free(&req);
	buf_free(&pl);
}


static const char *const perfmap_types[] = { NULL, "All", "JitDump", "PerfMap" };

unsigned proc_perfmap_type(const char *name)
{
	if (name == NULL)
		return 3;
	for (unsigned i = 1; i < 4; i++)
		if (strcasecmp(name, perfmap_types[i]) == 0)
			return i;
	return 0;
}

int proc_perfmap_set(struct port *port, const uint8_t cookie[16], bool enable, unsigned type, uint32_t *hresult)
{
	struct ipc_header h;
	struct buf req, pl;
	uint32_t hr = 0;
	char *text = NULL;
	int fd, rc = port_take(port, cookie, TAKE_TIMEOUT_MS, &fd);

	*hresult = 0;
	if (rc != 0)
		return rc;
	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, IPC_MAX_MESSAGE);
	ipc_begin(&req, IPC_SET_PROCESS, enable ? IPC_PROCESS_PERFMAP_ENABLE : IPC_PROCESS_PERFMAP_DISABLE);
	if (enable)
		ipc_put_u32(&req, type);
	ipc_end(&req);
	rc = ipc_transact(fd, &req, &h, &pl, 10000);
	close(fd);
	port_release(port, cookie);
	if (rc == 0 && !(h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK)) {
		rc = DP_EREMOTE;
		if (ipc_parse_error((const uint8_t *)pl.data, pl.len, &hr, &text) == 0) {
			*hresult = hr;
			if (hr == IPC_E_UNKNOWN_COMMAND || hr == IPC_E_NOTSUPPORTED)
				rc = DP_EUNSUPPORTED;
		}
	}
	free(text);
	buf_free(&req);
	buf_free(&pl);
	return rc;
}

void proc_perfmap(struct port *port, const struct port_runtime *p, struct httpd_req *r, bool enable, unsigned type)
{
	uint32_t hr = 0;
	int rc = proc_perfmap_set(port, p->cookie, enable, type, &hr);

	if (rc == 0) {
		json_t *files = json_array();
		char f[64];

		if (enable && type != 2) {
			snprintf(f, sizeof(f), "/tmp/perf-%llu.map", (unsigned long long)p->pid);
			json_array_append_new(files, json_string(f));
		}
		if (enable && type != 3) {
			snprintf(f, sizeof(f), "/tmp/jit-%llu.dump", (unsigned long long)p->pid);
			json_array_append_new(files, json_string(f));
		}
		httpd_send_json(r, 200, json_pack("{s:I, s:s, s:o}", "pid", (json_int_t)p->pid, "perfMap",
						  enable ? perfmap_types[type] : "Disabled", "files", files));
	} else if (rc == DP_EUNSUPPORTED) {
		httpd_problem(r, 400, "Bad Request", "pid %llu cannot write perf maps on request: %s (it needs .NET 8 "
			      "or later, and not NativeAOT)", (unsigned long long)p->pid, ipc_hresult_str(hr));
	} else if (rc == DP_EREMOTE) {
		httpd_problem(r, 500, "Internal Server Error", "pid %llu refused %sPerfMap: 0x%08x (%s)",
			      (unsigned long long)p->pid, enable ? "Enable" : "Disable", hr, ipc_hresult_str(hr));
	} else {
		httpd_problem(r, 500, "Internal Server Error", "pid %llu: no answer from the runtime: %s",
			      (unsigned long long)p->pid, err_str(rc));
	}
}

void proc_thread_name(uint64_t pid, uint64_t tid, char *out, size_t max)
{
	char path[80];
	int fd;
	ssize_t n;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%llu/task/%llu/comm", (unsigned long long)pid, (unsigned long long)tid);
	else
		snprintf(path, sizeof(path), "/proc/%llu/comm", (unsigned long long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 && max > 1 ? read(fd, out, max - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (max == 0)
		return;
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

int proc_local_pid(struct port *port, const uint8_t cookie[16], uint64_t *pid)
{
	struct ucred cr = { 0 };
	socklen_t len = sizeof(cr);
	int fd, rc = port_take(port, cookie, TAKE_TIMEOUT_MS, &fd);

	if (rc != 0)
		return rc;
	*pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid > 0 ? (uint64_t)cr.pid : 0;
	close(fd); /* no command: the runtime sees the connection end and advertises itself again */
	port_release(port, cookie);
	return 0;
}

int proc_info(struct port *port, const uint8_t cookie[16], int timeout_ms, struct ipc_process_info *out)
{
	static const struct {
		uint8_t id;
		int version;
	} tries[] = { { IPC_PROCESS_INFO2, 2 }, { IPC_PROCESS_INFO, 1 } };
	int rc = DP_EUNSUPPORTED;

	for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]) && rc == DP_EUNSUPPORTED; i++) {
		struct ipc_header h;
		struct buf req, pl;
		int fd;

		if ((rc = port_take(port, cookie, timeout_ms, &fd)) != 0)
			return rc;
		buf_init(&req, IPC_MAX_MESSAGE);
		buf_init(&pl, IPC_MAX_MESSAGE);
		ipc_begin(&req, IPC_SET_PROCESS, tries[i].id);
		ipc_end(&req);
		rc = ipc_transact(fd, &req, &h, &pl, timeout_ms);
		if (rc == 0 && (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK ||
				ipc_parse_process_info((const uint8_t *)pl.data, pl.len, tries[i].version, out) != 0))
			rc = DP_EUNSUPPORTED;
		close(fd);
		port_release(port, cookie);
		buf_free(&req);
		buf_free(&pl);
	}
	return rc;
}
