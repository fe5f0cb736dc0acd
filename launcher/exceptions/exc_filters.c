/*
 * exc_filters.c - dotnet-monitor's ExceptionsConfiguration (exceptions.h):
 * the body of POST /exceptions and a CollectExceptions action's Filters.
 * Member names in any case, as ASP.NET Core reads them; every value a
 * string; nothing else in the document.
 */
#include "exceptions.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"
#include "launcher/trace/trace.h"

#define MAX_VALUE 1024

static const char *const fields[] = { "methodName", "typeName", "moduleName", "exceptionType" };

static void filter_free(struct exc_filter *f)
{
	free(f->method);
	free(f->type);
	free(f->module);
	free(f->exception);
}

void exc_filters_free(struct exc_filters *f)
{
	for (size_t i = 0; i < f->n_include; i++)
		filter_free(&f->include[i]);
	for (size_t i = 0; i < f->n_exclude; i++)
		filter_free(&f->exclude[i]);
	free(f->include);
	free(f->exclude);
	memset(f, 0, sizeof(*f));
}

static int one_filter(json_t *o, const char *where, struct exc_filter *f, struct err_msg *em)
{
	char **slot[] = { &f->method, &f->type, &f->module, &f->exception };
	const char *key;
	json_t *v;

	if (!json_is_object(o))
		return err_set(em, DP_EINVAL, "%s: an exception filter is an object of methodName, typeName, moduleName "
			       "and exceptionType", where);
	json_object_foreach(o, key, v) {
		size_t k = 0;

		while (k < 4 && strcasecmp(key, fields[k]) != 0)
			k++;
		if (k == 4)
			return err_set(em, DP_EINVAL, "%s: '%.64s' is not a filter field (methodName, typeName, moduleName, "
				       "exceptionType)", where, key);
		if (json_is_null(v))
			continue;
		if (!json_is_string(v) || json_string_length(v) > MAX_VALUE)
			return err_set(em, DP_EINVAL, "%s.%s: a string of at most %d bytes", where, fields[k], MAX_VALUE);
		free(*slot[k]);
		*slot[k] = mem_strdup(json_string_value(v));
	}
	return 0;
}

static int one_list(json_t *doc, const char *name, const char *where, struct exc_filter **out, size_t *n,
		    struct err_msg *em)
{
	json_t *a = trace_member(doc, name), *v;
	size_t i;

	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return err_set(em, DP_EINVAL, "%s.%s: a list of exception filters", where, name);
	if (json_array_size(a) > EXC_MAX_FILTERS)
		return err_set(em, DP_ETOOBIG, "%s.%s: at most %d filters", where, name, EXC_MAX_FILTERS);
	*out = mem_array(json_array_size(a) ? json_array_size(a) : 1, sizeof(**out));
	json_array_foreach(a, i, v) {
		char at[96];
		int rc;

		snprintf(at, sizeof(at), "%s.%s[%zu]", where, name, i);
		(*n)++;
		if ((rc = one_filter(v, at, &(*out)[i], em)) != 0)
			return rc;
	}
	return 0;
}

int exc_filters_from(json_t *doc, const char *where, struct exc_filters *out, struct err_msg *em)
{
	struct exc_filters f = { 0 };
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(doc))
		return err_set(em, DP_EINVAL, "%s: an object with include and exclude lists", where);
	json_object_foreach(doc, key, v)
		if (strcasecmp(key, "include") != 0 && strcasecmp(key, "exclude") != 0)
			return err_set(em, DP_EINVAL, "%s: '%.64s' is not include or exclude", where, key);
	if ((rc = one_list(doc, "include", where, &f.include, &f.n_include, em)) != 0 ||
	    (rc = one_list(doc, "exclude", where, &f.exclude, &f.n_exclude, em)) != 0) {
		exc_filters_free(&f);
		return rc;
	}
	*out = f;
	return 0;
}

int exc_filters_json(const char *body, size_t len, struct exc_filters *out, struct err_msg *em)
{
	json_error_t je;
	json_t *doc;
	int rc;

	if (len == 0)
		return err_set(em, DP_EINVAL, "$: the body is an ExceptionsConfiguration ({\"include\":[...], "
			       "\"exclude\":[...]}); it is empty");
	if ((doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je)) == NULL)
		return err_set(em, DP_ESYNTAX, "$: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
	rc = exc_filters_from(doc, "$", out, em);
	json_decref(doc);
	return rc;
}
