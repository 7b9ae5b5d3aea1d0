/*
 * Just enough XML for S3 responses: find an element by name inside a span
 * of text and decode the entities of its text. S3's response documents are
 * flat, machine-written and without CDATA, mixed content or namespaces on
 * the elements we read; this is not a general XML parser and says so by
 * failing (not found) on anything it does not understand.
 */
#ifndef DPT_STORAGE_XML_H
#define DPT_STORAGE_XML_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* A span of the document: [p, p + len). */
struct dpt__xml_span {
	const char *p;
	size_t len;
};

/*
 * dpt__xml_next - find the next element named NAME in IN, starting at
 * *CURSOR bytes from IN.p (0 for the start). On success *INNER is its
 * content between the start and end tags (empty for <NAME/>) and *CURSOR
 * is moved past its end tag, so that repeated calls walk sibling elements.
 * Tags are matched by exact name: <Key> does not match <KeyMarker>. Elements
 * of the same name nested in each other are not supported (S3 has none).
 * Returns true when found, false at the end or on a malformed element.
 */
bool dpt__xml_next(struct dpt__xml_span in, const char *name, size_t *cursor,
		   struct dpt__xml_span *inner);

/* The first element NAME of IN (dpt__xml_next from the start). */
bool dpt__xml_find(struct dpt__xml_span in, const char *name,
		   struct dpt__xml_span *inner);

/*
 * dpt__xml_text - append the text IN to OUT with the five predefined
 * entities and numeric character references (&#38; &#x26;, encoded as
 * UTF-8) decoded. Returns 0, DPT_EPROTO for an unknown or malformed entity
 * or a reference to NUL, DPT_ETOOBIG, DPT_ENOMEM.
 */
int dpt__xml_text(struct dpt__buf *out, struct dpt__xml_span in);

/* Appends S to OUT with & < > " ' escaped, for request bodies. */
int dpt__xml_escape(struct dpt__buf *out, const char *s);

#endif
