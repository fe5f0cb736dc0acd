/*
 * patch.h - the JSON Patch (RFC 6902) that turns one document into another,
 * as the admission webhook returns it: the difference between the pod the
 * API server sent and what the injector made of it.
 *
 * Applying the patch to `from` gives a document JSON-equal to `to`. It is
 * written to touch only what differs: map keys one by one (so an annotation
 * is added by its own path, escaped per RFC 6901), maps and arrays that do
 * not exist yet added whole (created before anything goes into them),
 * arrays of named objects (containers, volumes, env, volumeMounts) matched
 * by name and edited element by element. Only where an array changed in a
 * way those rules cannot express is it replaced whole.
 */
#ifndef DP_PATCH_H
#define DP_PATCH_H

#include "buf.h"
#include "doc.h"
#include "errors.h"

/*
 * Append the patch from -> to, as a JSON array, to out. *n_ops counts the
 * operations (0: the documents are equal, and out gets "[]"). DP_EUNSUPPORTED
 * with em when a value cannot be written as JSON (a YAML tag).
 */
int patch_diff(const struct doc_node *from, const struct doc_node *to, struct buf *out, size_t *n_ops,
	       struct err_msg *em);

/* RFC 6901: append key to the JSON Pointer in p, escaped ('~' -> "~0", '/' -> "~1"). */
void patch_pointer_append(struct buf *p, const char *key);

#endif
