/*
 * util.c - small helpers the injector's files share: the dialect tables, the
 * settings sources (egress-settings, rules), messages with positions, typed
 * field access that names what is wrong, and the report.
 */
#include "inj_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

const struct inj_dialect inj_k8s_dialect = {
	.platform = "Kubernetes", .c_name = "name", .c_env = "env", .e_name = "name", .e_value = "value",
	.e_value_from = "valueFrom", .c_secrets = NULL, .c_mounts = "volumeMounts", .m_volume = "name",
	.m_path = "mountPath", .m_readonly = "readOnly", .caps = { "securityContext", "capabilities", "add" },
	.v_name = "name", .pascal = false,
};
const struct inj_dialect inj_ecs_dialect = {
	.platform = "ECS", .c_name = "name", .c_env = "environment", .e_name = "name", .e_value = "value",
	.e_value_from = NULL, .c_secrets = "secrets", .c_mounts = "mountPoints", .m_volume = "sourceVolume",
	.m_path = "containerPath", .m_readonly = "readOnly", .caps = { "linuxParameters", "capabilities", "add" },
	.v_name = "name", .pascal = false,
};
const struct inj_dialect inj_cfn_dialect = {
	.platform = "CloudFormation", .c_name = "Name", .c_env = "Environment", .e_name = "Name",
	.e_value = "Value", .e_value_from = NULL, .c_secrets = "Secrets", .c_mounts = "MountPoints",
	.m_volume = "SourceVolume", .m_path = "ContainerPath", .m_readonly = "ReadOnly",
	.caps = { "LinuxParameters", "Capabilities", "Add" }, .v_name = "Name", .pascal = true,
};

const struct inj_source inj_sources[INJ_NSOURCES] = {
	{ .option = "egress-settings", .off = offsetof(struct inj_opts, egress_settings), .k8s_kind = "Secret",
	  .k8s_source = "secret", .k8s_name_key = "secretName", .volume = INJ_VOL_EGRESS, .dir = INJ_EGRESS_DIR,
	  .ecs_var = "DIAGPORT_EGRESS_SETTINGS", .section = "Egress", .compose_list = "secrets", .compose_file = NULL },
	{ .option = "rules", .off = offsetof(struct inj_opts, rules), .k8s_kind = "ConfigMap",
	  .k8s_source = "configMap", .k8s_name_key = "name", .volume = INJ_VOL_RULES, .dir = INJ_RULES_DIR,
	  .ecs_var = "DIAGPORT_RULES", .section = "CollectionRules", .compose_list = "configs",
	  .compose_file = INJ_RULES_FILE },
};

const char *inj_source_value(const struct inj_source *s, const struct inj_opts *o)
{
	const char *v;

	memcpy(&v, (const char *)o + s->off, sizeof(v));
	return v;
}

int inj_fail(const struct inj_ctx *c, struct err_msg *em, const struct doc_node *at, int code,
	     const char *what, const char *fmt, ...)
{
	char msg[800], pos[128] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at && at->line)
		snprintf(pos, sizeof(pos), ":%u:%u", at->line, at->col);
	return err_set(em, code, "%s%s: %s%s%s", c && c->file ? c->file : "<input>", pos,
		       what ? what : "", what ? ": " : "", msg);
}

static const char *type_name(const struct doc_node *n)
{
	const char *f = inj_intrinsic(n);

	if (f)
		return f;
	switch (n->type) {
	case DOC_NULL: return "null";
	case DOC_BOOL: return "a boolean";
	case DOC_NUMBER: return "a number";
	case DOC_STRING: return "a string";
	case DOC_MAP: return "a map";
	case DOC_SEQ: return "a list";
	}
	return "?";
}

static int typed_field(const struct inj_ctx *c, struct doc_node *m, const char *k, const char *what,
		       enum doc_type t, struct doc_node **out, struct err_msg *em)
{
	struct doc_node *v = doc_get(m, k);

	if (v == NULL || (v->type == t && !inj_intrinsic(v)) || (v->type == DOC_NULL && v->tag == NULL)) {
		*out = v && v->type == t ? v : NULL;
		return 0;
	}
	if (inj_intrinsic(v))
		return inj_fail(c, em, v, DP_EUNSUPPORTED, what,
				"%s is the intrinsic function %s, not a %s; diagport cannot add to a value "
				"that is only known at deploy time (write it out, or leave this resource out of injection)",
				k, inj_intrinsic(v), t == DOC_SEQ ? "list" : "map");
	return inj_fail(c, em, v, DP_EUNSUPPORTED, what, "%s is %s, expected a %s", k, type_name(v),
			t == DOC_SEQ ? "list" : "map");
}

int inj_seq_field(const struct inj_ctx *c, struct doc_node *m, const char *k, const char *what,
		  struct doc_node **out, struct err_msg *em)
{
	return typed_field(c, m, k, what, DOC_SEQ, out, em);
}

int inj_map_field(const struct inj_ctx *c, struct doc_node *m, const char *k, const char *what,
		  struct doc_node **out, struct err_msg *em)
{
	return typed_field(c, m, k, what, DOC_MAP, out, em);
}

const char *inj_intrinsic(const struct doc_node *n)
{
	if (n == NULL)
		return NULL;
	if (n->tag && n->tag[0] == '!' && n->tag[1] != '!')
		return n->tag;
	if (n->type == DOC_MAP && n->n == 1) {
		const char *k = n->keys[0]->text;

		if (strcmp(k, "Ref") == 0 || strncmp(k, "Fn::", 4) == 0)
			return k;
	}
	return NULL;
}

long inj_seq_find(const struct doc_node *s, const char *k, const char *v)
{
	if (!doc_is(s, DOC_SEQ))
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		const char *x = doc_get_str(s->vals[i], k);

		if (x && strcmp(x, v) == 0)
			return (long)i;
	}
	return -1;
}

const char *inj_scalar_text(const struct doc_node *n)
{
	if (n == NULL || n->type == DOC_MAP || n->type == DOC_SEQ || n->type == DOC_NULL)
		return NULL;
	if (n->type == DOC_BOOL) {
		char c0 = n->text[0];

		return (c0 == 't' || c0 == 'T' || c0 == 'y' || c0 == 'Y' || strcasecmp(n->text, "on") == 0) ? "true" : "false";
	}
	return n->text;
}

void inj_pascalize(struct doc_node *n)
{
	if (n == NULL)
		return;
	if (n->type == DOC_MAP) {
		for (size_t i = 0; i < n->n; i++) {
			char *k = n->keys[i]->text;

			if (k[0] >= 'a' && k[0] <= 'z')
				k[0] = (char)toupper((unsigned char)k[0]);
			inj_pascalize(n->vals[i]);
		}
	} else if (n->type == DOC_SEQ) {
		for (size_t i = 0; i < n->n; i++)
			inj_pascalize(n->vals[i]);
	}
}

void inj_report_free(struct inj_report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->nwarn; i++)
		mem_free(r->warnings[i]);
	mem_free(r->warnings);
	memset(r, 0, sizeof(*r));
}

void inj_report_warn(struct inj_report *r, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (r == NULL)
		return;
	buf_init(&b, 0);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	r->warnings = mem_realloc(r->warnings, (r->nwarn + 1) * sizeof(char *));
	r->warnings[r->nwarn++] = buf_steal(&b, NULL);
}

const char *inj_detect(const struct doc_node *doc)
{
	const struct doc_node *res;

	if (!doc_is(doc, DOC_MAP))
		return NULL;
	if (doc_get(doc, "apiVersion") && doc_get(doc, "kind"))
		return "k8s";
	if (doc_get(doc, "containerDefinitions") || doc_get(doc_get(doc, "taskDefinition"), "containerDefinitions"))
		return "ecs";
	res = doc_get(doc, "Resources");
	if (doc_get(doc, "AWSTemplateFormatVersion") || (doc_is(res, DOC_MAP) && res->n > 0 && doc_get(res->vals[0], "Type")))
		return "cfn";
	/* what the checks above did not claim: a Compose file has services and none of their keys */
	if (doc_is(doc_get(doc, "services"), DOC_MAP) && !doc_get(doc, "apiVersion") && !doc_get(doc, "kind") &&
	    !res && !doc_get(doc, "containerDefinitions"))
		return "compose";
	return NULL;
}
