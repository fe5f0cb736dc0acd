/*
 * doc_vid.h - value ids: one number per distinct value in a tree, so that
 * "is this subtree equal to that one" costs one comparison once the ids are
 * known. The YAML writer asks it whether an alias may be written as `*name`.
 *
 * doc_vid_of() gives two nodes the same id exactly when doc_equal() says
 * they are equal (type, tag, text, children in order; style and position do
 * not count). It is exact, not a digest: each distinct value is kept once in
 * a hash table and a new node is compared with it in full (its children by
 * their ids), so a collision costs time, never a wrong answer. The id of a
 * node that carries an anchor or an alias is remembered, so asking for such
 * nodes only visits every node under them once in all, however they nest;
 * another node's id is worked out anew each time. The tree must not change
 * while the table lives; it borrows the nodes.
 */
#ifndef DP_DOC_VID_H
#define DP_DOC_VID_H

#include "doc.h"

struct doc_vid;

struct doc_vid *doc_vid_new(void);
/* The id of n's value (n not NULL): equal ids exactly for doc_equal values. */
size_t doc_vid_of(struct doc_vid *t, const struct doc_node *n);
void doc_vid_free(struct doc_vid *t); /* accepts NULL */

#endif
