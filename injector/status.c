/*
 * status.c - the status record: exactly what inject added to one workload.
 *
 * Format (one line, fits an ECS tag value):
 *   v1 mode=nosuspend flavour=diagport sidecar=native +WFLAGS NAME:FLAGS ...
 * The mode/flavour/sidecar words are for people; uninject reads the flags.
 *
 * Workload flags (+...):
 *   V  the volumes list was created       I  the initContainers list was created
 *   A  the annotations map was created    T  the pod template's metadata was created
 *   G  the ECS tags list was created      X  CloudFormation Metadata was created
 *   Y  Metadata.diagport was created      S  the agent is a regular container (k8s)
 * Container flags (NAME:...):
 *   M  diag and dumps mounts added        m  the mounts list was created
 *   E  the DOTNET_DiagnosticPorts entry was added
 *   e  our port was appended to its value with ';'
 *   z  ... to a value that was ""        Z  ... to an entry that had no value field
 *   l  the env list was created
 *   P  SYS_PTRACE added                   1 2 3  capability path levels created
 *   D  dependsOn on the agent added (ECS) d  the dependsOn list was created
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

bool inj_flag(const char *flags, char f)
{
	return strchr(flags, f) != NULL;
}

void inj_flag_add(char *flags, size_t size, char f)
{
	size_t n = strlen(flags);

	if (inj_flag(flags, f))
		return;
	if (n + 1 >= size)
		DP_FATAL("status flags overflow");
	flags[n] = f;
	flags[n + 1] = '\0';
}

char *inj_status_format(const struct inj_status *st, const struct inj_opts *o)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "v1 mode=%s flavour=%s sidecar=%s +%s", o->mode == INJ_SUSPEND ? "suspend" : "nosuspend",
		   o->flavour == INJ_FLAVOUR_DOTNET_MONITOR ? "dotnet-monitor" : "diagport",
		   o->sidecar == INJ_SIDECAR_CONTAINER ? "container" : "native", st->wflags);
	for (size_t i = 0; i < st->n; i++)
		buf_printf(&b, " %s:%s", st->c[i].name, st->c[i].flags);
	return buf_steal(&b, NULL);
}

int inj_status_parse(const char *text, struct inj_status *st, struct err_msg *em)
{
	char *copy = mem_strdup(text), *save = NULL;
	int rc = 0, i = 0;

	memset(st, 0, sizeof(*st));
	for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++) {
		char *colon;

		if (i == 0) {
			if (strcmp(tok, "v1") != 0) {
				rc = err_set(em, DP_EUNSUPPORTED, "status record '%s' is not version v1", text);
				break;
			}
		} else if (tok[0] == '+') {
			snprintf(st->wflags, sizeof(st->wflags), "%s", tok + 1);
		} else if ((colon = strchr(tok, ':')) != NULL) {
			if (st->n == INJ_MAX_CONTAINERS || (size_t)(colon - tok) >= sizeof(st->c[0].name)) {
				rc = err_set(em, DP_EUNSUPPORTED, "status record lists too many or too long container names");
				break;
			}
			snprintf(st->c[st->n].name, sizeof(st->c[0].name), "%.*s", (int)(colon - tok), tok);
			snprintf(st->c[st->n].flags, sizeof(st->c[0].flags), "%s", colon + 1);
			st->n++;
		} else if (strchr(tok, '=') == NULL) {
			rc = err_set(em, DP_EUNSUPPORTED, "status record: cannot read '%s'", tok);
			break;
		}
	}
	if (rc == 0 && i == 0)
		rc = err_set(em, DP_EUNSUPPORTED, "status record is empty");
	free(copy);
	return rc;
}
