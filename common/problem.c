/*
 * problem.c - application/problem+json bodies (problem.h).
 */
#include "problem.h"

#include <jansson.h>
#include <stdlib.h>

#include "errors.h"
#include "utf8.h"

static char *dump(json_t *p)
{
	char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(p);
	if (s == NULL)
		DP_FATAL("cannot write a problem body");
	return s;
}

char *problem_body(unsigned status, const char *title, const char *detail)
{
	json_t *p = json_object();

	json_object_set_new(p, "type", json_string("about:blank"));
	json_object_set_new(p, "title", utf8_json_str(title));
	json_object_set_new(p, "status", json_integer(status));
	json_object_set_new(p, "detail", utf8_json_str(detail));
	return dump(p);
}

char *problem_validation_body(const char *field, const char *detail)
{
	json_t *p = json_object(), *errors = json_object(), *list = json_array();

	json_object_set_new(p, "type", json_string("https://tools.ietf.org/html/rfc9110#section-15.5.1"));
	json_object_set_new(p, "title", json_string("One or more validation errors occurred."));
	json_object_set_new(p, "status", json_integer(400));
	json_object_set_new(p, "detail", utf8_json_str(detail));
	json_array_append_new(list, utf8_json_str(detail));
	json_object_set_new(errors, field, list);
	json_object_set_new(p, "errors", errors);
	return dump(p);
}
