/*
 * problem.h - the one writer of application/problem+json bodies (RFC 9457),
 * for the agent's API and the webhook alike. Every string that goes in may
 * come from outside (a query parameter echoed in a message): it is repaired
 * to UTF-8 (utf8.h) and escaped by jansson, so the body is always JSON.
 */
#ifndef DP_PROBLEM_H
#define DP_PROBLEM_H

#define PROBLEM_CTYPE "application/problem+json; charset=utf-8"

/* {"type","title","status","detail"}: a new string (never NULL). */
char *problem_body(unsigned status, const char *title, const char *detail);
/*
 * A 400 for a parameter or body field that failed validation, in the shape
 * ASP.NET (and so dotnet-monitor) gives: {"type", "title": "One or more
 * validation errors occurred.", "status": 400, "detail", "errors": {field:
 * [detail]}}. A new string.
 */
char *problem_validation_body(const char *field, const char *detail);

#endif
