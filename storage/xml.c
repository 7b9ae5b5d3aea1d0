#include "config.h"

#include <string.h>

#include <dptrain/error.h>

#include "xml.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Is there "NAME" at P (with N bytes left) followed by a byte in ENDS? */
static bool name_at(const char *p, size_t n, const char *name, size_t nlen,
		    bool closing)
{
	char c;
	if (n <= nlen || memcmp(p, name, nlen) != 0)
		return false;
	c = p[nlen];
	return c == '>' || is_blank(c) || (!closing && c == '/');
}

bool dpt__xml_next(struct dpt__xml_span in, const char *name, size_t *cursor,
		   struct dpt__xml_span *inner)
{
	size_t nlen = strlen(name), i = *cursor;

	if (nlen == 0)
		return false;
	for (; i < in.len; i++) {
		size_t tag_end, j;
		if (in.p[i] != '<' ||
		    !name_at(in.p + i + 1, in.len - i - 1, name, nlen, false))
			continue;
		/* The start tag ends at the next '>' (S3 puts no '>' in
		 * attribute values). */
		for (tag_end = i + 1 + nlen; tag_end < in.len; tag_end++)
			if (in.p[tag_end] == '>')
				break;
		if (tag_end >= in.len)
			return false;
		if (in.p[tag_end - 1] == '/') {
			inner->p = in.p + tag_end + 1;
			inner->len = 0;
			*cursor = tag_end + 1;
			return true;
		}
		for (j = tag_end + 1; j + 2 + nlen <= in.len; j++) {
			size_t k;
			if (in.p[j] != '<' || in.p[j + 1] != '/' ||
			    !name_at(in.p + j + 2, in.len - j - 2, name, nlen,
				     true))
				continue;
			for (k = j + 2 + nlen; k < in.len && is_blank(in.p[k]);
			     k++)
				;
			if (k >= in.len || in.p[k] != '>')
				return false;
			inner->p = in.p + tag_end + 1;
			inner->len = j - tag_end - 1;
			*cursor = k + 1;
			return true;
		}
		return false;
	}
	*cursor = in.len;
	return false;
}

bool dpt__xml_find(struct dpt__xml_span in, const char *name,
		   struct dpt__xml_span *inner)
{
	size_t cursor = 0;
	return dpt__xml_next(in, name, &cursor, inner);
}

static int put_utf8(struct dpt__buf *out, unsigned long cp)
{
	char u[4];
	size_t n;

	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return DPT_EPROTO;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return dpt__buf_append(out, u, n);
}

static int numeric_ref(struct dpt__buf *out, const char *p, size_t n)
{
	unsigned long cp = 0;
	int base = 10;
	size_t i = 0;

	if (n > 0 && (p[0] == 'x' || p[0] == 'X')) {
		base = 16;
		i = 1;
	}
	if (i >= n || n - i > 8)
		return DPT_EPROTO;
	for (; i < n; i++) {
		char c = p[i];
		int d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return DPT_EPROTO;
		cp = cp * (unsigned long)base + (unsigned long)d;
	}
	return put_utf8(out, cp);
}

int dpt__xml_text(struct dpt__buf *out, struct dpt__xml_span in)
{
	static const struct {
		const char *name;
		char c;
	} entities[] = {
		{"amp", '&'},  {"lt", '<'},    {"gt", '>'},
		{"quot", '"'}, {"apos", '\''},
	};
	size_t i = 0;
	int rc = 0;

	while (i < in.len && !rc) {
		size_t start = i, semi, n;
		while (i < in.len && in.p[i] != '&')
			i++;
		rc = dpt__buf_append(out, in.p + start, i - start);
		if (rc || i >= in.len)
			break;
		for (semi = i + 1; semi < in.len && semi - i <= 10; semi++)
			if (in.p[semi] == ';')
				break;
		if (semi >= in.len || in.p[semi] != ';')
			return DPT_EPROTO;
		n = semi - i - 1;
		if (n > 0 && in.p[i + 1] == '#') {
			rc = numeric_ref(out, in.p + i + 2, n - 1);
		} else {
			rc = DPT_EPROTO;
			for (size_t e = 0; e < 5; e++) {
				if (strlen(entities[e].name) == n &&
				    memcmp(in.p + i + 1, entities[e].name, n) ==
					    0) {
					rc = dpt__buf_append(out,
							     &entities[e].c, 1);
					break;
				}
			}
		}
		i = semi + 1;
	}
	return rc;
}

int dpt__xml_escape(struct dpt__buf *out, const char *s)
{
	int rc = 0;
	for (; *s && !rc; s++) {
		switch (*s) {
		case '&':
			rc = dpt__buf_puts(out, "&amp;");
			break;
		case '<':
			rc = dpt__buf_puts(out, "&lt;");
			break;
		case '>':
			rc = dpt__buf_puts(out, "&gt;");
			break;
		case '"':
			rc = dpt__buf_puts(out, "&quot;");
			break;
		case '\'':
			rc = dpt__buf_puts(out, "&apos;");
			break;
		default:
			rc = dpt__buf_append(out, s, 1);
		}
	}
	return rc;
}
