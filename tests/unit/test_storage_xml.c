/*
 * The tag extractor on S3's response documents (shapes taken from the S3
 * API reference: ListObjectsV2, Error, InitiateMultipartUpload,
 * ListMultipartUploads, DeleteObjects).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "buf.h"
#include "storage/xml.h"

static struct dpt__xml_span span(const char *s)
{
	return (struct dpt__xml_span){s, strlen(s)};
}

static char *text(struct dpt__xml_span in)
{
	struct dpt__buf b;
	dpt__buf_init(&b, 1 << 16);
	assert_int_equal(dpt__xml_text(&b, in), 0);
	return dpt__buf_steal(&b);
}

static void list_objects_v2(void **state)
{
	const char *doc =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
		"2006-03-01/\">\n"
		"  "
		"<Name>ckpt</Name><Prefix>runs/</Prefix><KeyCount>2</KeyCount>"
		"<MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>\n"
		"  "
		"<Contents><Key>runs/a&amp;b</Key><LastModified>2024-01-01T00:"
		"00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag>"
		"<Size>10</Size><StorageClass>STANDARD</StorageClass></"
		"Contents>"
		"\n  <Contents>\n    <Key>runs/c</Key>\n    "
		"<Size>20971520</Size>\n"
		"  </Contents>\n"
		"  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/"
		"wm36Hy4vbOwM=</NextContinuationToken>\n"
		"</ListBucketResult>";
	struct dpt__xml_span d = span(doc), c, v;
	size_t cursor = 0;
	char *s;
	(void)state;

	assert_true(dpt__xml_next(d, "Contents", &cursor, &c));
	assert_true(dpt__xml_find(c, "Key", &v));
	s = text(v);
	assert_string_equal(s, "runs/a&b");
	free(s);
	assert_true(dpt__xml_find(c, "ETag", &v));
	s = text(v);
	assert_string_equal(s, "\"abc\"");
	free(s);
	assert_true(dpt__xml_next(d, "Contents", &cursor, &c));
	assert_true(dpt__xml_find(c, "Size", &v));
	assert_int_equal(v.len, 8);
	assert_memory_equal(v.p, "20971520", 8);
	assert_false(dpt__xml_next(d, "Contents", &cursor, &c));
	assert_int_equal(cursor, d.len);
	assert_true(dpt__xml_find(d, "IsTruncated", &v));
	assert_memory_equal(v.p, "true", 4);
	assert_true(dpt__xml_find(d, "NextContinuationToken", &v));
	s = text(v);
	assert_string_equal(s, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	free(s);
}

static void names_match_exactly(void **state)
{
	const char *doc = "<ListMultipartUploadsResult><KeyMarker></KeyMarker>"
			  "<NextKeyMarker>k2</NextKeyMarker>"
			  "<Upload><Key>k1</Key><UploadId>u1</UploadId>"
			  "<Initiated>2024-05-24T00:00:00.000Z</Initiated>"
			  "</Upload><Uploads/><Upload >"
			  "<Key>k2</Key></Upload >"
			  "</ListMultipartUploadsResult>";
	struct dpt__xml_span d = span(doc), u, v;
	size_t cursor = 0;
	(void)state;

	assert_true(dpt__xml_find(d, "KeyMarker", &v));
	assert_int_equal(v.len, 0);
	assert_true(dpt__xml_find(d, "Key", &v)); /* not KeyMarker */
	assert_memory_equal(v.p, "k1", 2);
	assert_true(dpt__xml_next(d, "Upload", &cursor, &u)); /* not Uploads */
	assert_true(dpt__xml_find(u, "UploadId", &v));
	assert_memory_equal(v.p, "u1", 2);
	assert_true(dpt__xml_next(d, "Upload", &cursor, &u));
	assert_true(dpt__xml_find(u, "Key", &v));
	assert_memory_equal(v.p, "k2", 2);
	assert_false(dpt__xml_next(d, "Upload", &cursor, &u));
	/* Self-closing element. */
	assert_true(dpt__xml_find(d, "Uploads", &v));
	assert_int_equal(v.len, 0);
	assert_false(dpt__xml_find(d, "", &v));
	assert_false(dpt__xml_find(d, "Missing", &v));
}

static void errors_and_malformed(void **state)
{
	const char *err = "<?xml version=\"1.0\"?><Error><Code>"
			  "SignatureDoesNotMatch</Code><Message>The request "
			  "signature we calculated does not match</Message>"
			  "<RequestId>x</RequestId></Error>";
	struct dpt__xml_span v;
	(void)state;

	assert_true(dpt__xml_find(span(err), "Code", &v));
	assert_memory_equal(v.p, "SignatureDoesNotMatch", v.len);
	/* Unterminated or truncated documents are not found. */
	assert_false(dpt__xml_find(span("<Code>abc"), "Code", &v));
	assert_false(dpt__xml_find(span("<Code>abc</Code"), "Code", &v));
	assert_false(dpt__xml_find(span("<Code"), "Code", &v));
	assert_false(dpt__xml_find(span("<Code>a</Cod>"), "Code", &v));
	/* A span is a bound: nothing past it is read. */
	assert_false(
		dpt__xml_find((struct dpt__xml_span){"<A>x</A>", 7}, "A", &v));
	assert_true(dpt__xml_find(span("<A>x</A >"), "A", &v));
}

static void entities(void **state)
{
	struct dpt__buf b;
	char *s;
	(void)state;

	s = text(span("a&lt;b&gt;&apos;&quot;&amp;&#65;&#x263a;&#x1F600;"));
	assert_string_equal(s, "a<b>'\"&A\xe2\x98\xba\xf0\x9f\x98\x80");
	free(s);
	dpt__buf_init(&b, 64);
	const char *bad[] = {"&",    "&amp",	 "&bogus;",
			     "&#0;", "&#xD800;", "&#x110000;",
			     "&#;",  "&#12a;",	 "&verylongname;"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dpt__buf_reset(&b);
		if (dpt__xml_text(&b, span(bad[i])) != DPT_EPROTO)
			fail_msg("'%s' was decoded", bad[i]);
	}
	dpt__buf_reset(&b);
	assert_int_equal(dpt__xml_escape(&b, "a<b>&\"'c"), 0);
	assert_string_equal(b.data, "a&lt;b&gt;&amp;&quot;&apos;c");
	dpt__buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(list_objects_v2),
		cmocka_unit_test(names_match_exactly),
		cmocka_unit_test(errors_and_malformed),
		cmocka_unit_test(entities),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
