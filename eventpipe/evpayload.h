/*
 * evpayload.h - an event's payload read by its metadata's field list (the
 * self-describing events of EventSources: EventCounters, the Meter API's
 * MetricsEventSource, the logging provider). The runtime's own events carry
 * no field list; nettrace.h's reader reads those by hand.
 *
 * Fields come out flat, in order: an object's members follow it at depth
 * + 1 (EventCounters wrap their fields in an object named "Payload"). An
 * array is one value, its element count, followed by its elements at depth
 * + 1, each value marked with the element it belongs to (index): an array
 * of numbers or strings gives one value per element, named as the array;
 * an array of objects gives each element's members, in order, with no value
 * for the element itself (DiagnosticSource's Arguments, an array of
 * {Key, Value}, comes out as Arguments = n, then Key, Value with index 0,
 * Key, Value with index 1, ...). Strings are UTF-8. Bounded: at most
 * EVPAYLOAD_MAX_VALUES values, array elements included (an event past it is
 * DP_ETOOBIG); text up to the payload's own size times three.
 */
#ifndef DP_EVPAYLOAD_H
#define DP_EVPAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "nettrace.h"

#define EVPAYLOAD_MAX_VALUES 128

struct evvalue {
	const char *name; /* borrowed from the metadata */
	uint32_t type;    /* enum nettrace_type */
	int depth;        /* 0 top level */
	int32_t index;    /* inside an array: the element of the innermost array it belongs to (0-based); else -1 */
	int64_t i;        /* integers and booleans; NT_ARRAY: the element count */
	double d;         /* every number, also as a double */
	const char *s;    /* NT_STRING (and NT_GUID, NT_DATETIME as text); else NULL */
};

struct evpayload {
	struct evvalue v[EVPAYLOAD_MAX_VALUES];
	size_t n;
	char *text; /* the strings, owned; reused by the next decode */
	size_t text_cap;
};

/*
 * Decode e's payload into p (its previous values are dropped). 0, or
 * DP_ESYNTAX with em when the payload does not match its field list (too
 * short, a string without its end, an unknown type), DP_ETOOBIG past the
 * value cap. An event without a field list decodes to no values.
 */
int evpayload_decode(struct evpayload *p, const struct nettrace_event *e, struct err_msg *em);
/*
 * The first value of that name outside every array (any depth, exact case),
 * or NULL. Array elements are read by walking p->v after the array's value.
 */
const struct evvalue *evpayload_get(const struct evpayload *p, const char *name);
/* Its string, or "" when absent or not a string. */
const char *evpayload_str(const struct evpayload *p, const char *name);
/* Its number, or def when absent, or a string that is not a number (strings are read as numbers too). */
double evpayload_num(const struct evpayload *p, const char *name, double def);
/* Its number as an integer in [lo, hi] (the fraction dropped), or def when absent or outside it. */
long long evpayload_int(const struct evpayload *p, const char *name, long long lo, long long hi, long long def);
void evpayload_free(struct evpayload *p); /* the text; the struct itself is the caller's */

#endif
