/*
 * t.h - the unit-test harness: each tests/unit/test_*.c is one program whose
 * main() calls T_RUN(fn) for each case. A case stops at its first failed check,
 * also one made in a helper the case calls (T_FAIL jumps back to T_RUN, so no
 * code after it runs: a failed case may leave its allocations behind).
 * Every case prints one line, "PASS unit/<file>/<case>" or
 * "FAIL unit/<file>/<case>: <file>:<line>: <what>", which tests/run counts.
 * The program exits 1 when any case failed.
 */
#ifndef DP_T_H
#define DP_T_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "doc.h" /* t_doc */

static int t_failed_cases;
static char t_why[2048];
static const char *t_file_name;
static jmp_buf t_case; /* where T_FAIL goes: the T_RUN of the case */

#define T_FAIL(...)                                                                      \
	do {                                                                             \
		int t_n_ = snprintf(t_why, sizeof(t_why), "%s:%d: ", __FILE__, __LINE__); \
		snprintf(t_why + t_n_, sizeof(t_why) - (size_t)t_n_, __VA_ARGS__);      \
		longjmp(t_case, 1);                                                      \
	} while (0)

#define T_CHECK(cond)                                                                    \
	do {                                                                             \
		if (!(cond))                                                             \
			T_FAIL("%s", #cond);                                             \
	} while (0)

#define T_STREQ(a, b)                                                                    \
	do {                                                                             \
		const char *t_a_ = (a), *t_b_ = (b);                                     \
		if (t_a_ == NULL || t_b_ == NULL || strcmp(t_a_, t_b_) != 0)             \
			T_FAIL("%s == %s (\"%s\" vs \"%s\")", #a, #b,                    \
			       t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)");           \
	} while (0)

#define T_RUN(fn)                                                                        \
	do {                                                                             \
		t_why[0] = '\0';                                                         \
		if (setjmp(t_case) == 0)                                                 \
			fn();                                                            \
		if (t_why[0]) {                                                          \
			printf("FAIL unit/%s/%s: %s\n", t_file_name, #fn, t_why);        \
			t_failed_cases++;                                                \
		} else {                                                                 \
			printf("PASS unit/%s/%s\n", t_file_name, #fn);                   \
		}                                                                        \
		fflush(stdout);                                                          \
	} while (0)

/* One document from text (JSON or YAML) as a new tree; NULL, with why on stderr, when it does not read. */
static inline struct doc_node *t_doc(const char *text)
{
	struct doc_stream s = { 0 };
	struct err_msg em;
	struct doc_node *n;
	int rc = doc_read(text, strlen(text), "t", &doc_default_limits, &s, &em);

	if (rc != 0 || s.n != 1) {
		fprintf(stderr, "t_doc: %s\n", rc != 0 ? em.text : "not one document");
		doc_stream_free(&s);
		return NULL;
	}
	n = s.docs[0];
	s.docs[0] = doc_null();
	doc_stream_free(&s);
	return n;
}

#define T_BEGIN(name) (t_file_name = (name))
#define T_END() return t_failed_cases ? 1 : 0

#endif
