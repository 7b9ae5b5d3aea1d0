#!/usr/bin/python3
"""A fault-injecting HTTP proxy in front of the real S3 test server.

    s3_faults.py LISTEN_PORT UPSTREAM_PORT LOG RULE...

Each request is forwarded to 127.0.0.1:UPSTREAM_PORT unchanged (the Host
header too, so that the client's SigV4 signature still verifies there), and
the answer is relayed, except for the requests that a RULE picks:

    METHOD:SUBSTRING:ACTION:COUNT

picks the first COUNT requests whose method is METHOD and whose
"path?query" contains SUBSTRING. ACTION is
    503   answer 503 SlowDown without forwarding
    500   answer 500 InternalError without forwarding
    drop  forward, let the server act, then close the connection without
          an answer (a lost response)
    404   answer 404 NoSuchUpload without forwarding (what AWS may answer
          to a CompleteMultipartUpload retried after it completed)
    501   answer 501 NotImplemented without forwarding (an S3-compatible
          server without the request, e.g. s3rver and ListMultipartUploads)
    loop  answer a ListObjectsV2 page of no objects that says IsTruncated
          with the continuation token "same", without forwarding (a server
          whose listing never ends)
    hold  read the request, never forward it, never answer: the client
          waits with the request in flight until it closes the connection
          (or dies), then the proxy drops it (a transfer that is under way
          for as long as a test needs, to kill the client during it)
Each fault is appended to LOG as "ACTION METHOD PATH". As an HTTP proxy
(http_proxy=http://127.0.0.1:PORT) it forwards absolute-form targets
("PUT http://bucket.localhost:5055/key") as they are: virtual-hosted
addressing then reaches the server without DNS for the bucket's name. The proxy prints
"ready PORT" once it listens (LISTEN_PORT 0: a free one). Requests that
carry x-amz-security-token are logged as "token VALUE signed|unsigned".
"""
import http.client
import http.server
import select
import sys
import threading

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection",
       "te", "trailer", "upgrade"}


class Rule:
    def __init__(self, text):
        self.method, self.substring, self.action, count = text.split(":")
        self.left = int(count)


def main():
    listen, upstream, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rules = [Rule(t) for t in sys.argv[4:]]
    lock = threading.Lock()

    def pick(method, target):
        with lock:
            for r in rules:
                if r.left > 0 and r.method == method and r.substring in target:
                    r.left -= 1
                    with open(log, "a") as f:
                        f.write(f"{r.action} {method} {target}\n")
                    return r.action
        return None

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def error(self, status, code):
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}"
                    f"</Code><Message>injected by s3_faults.py</Message></Error>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def hold(self):
            # Logged (by pick) once the whole request is read: the client
            # has sent it and waits for an answer that never comes.
            sock = self.connection
            while True:
                select.select([sock], [], [])
                try:
                    if not sock.recv(65536):  # EOF: the client is gone
                        break
                except OSError:
                    break
            self.close_connection = True

        def handle_any(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            token = self.headers.get("x-amz-security-token")
            if token is not None:
                signed = "x-amz-security-token" in self.headers.get("Authorization", "")
                with lock, open(log, "a") as f:
                    f.write(f"token {token} {'signed' if signed else 'unsigned'}\n")
            action = pick(self.command, self.path)
            if action == "503":
                return self.error(503, "SlowDown")
            if action == "500":
                return self.error(500, "InternalError")
            if action == "404":
                return self.error(404, "NoSuchUpload")
            if action == "501":
                return self.error(501, "NotImplemented")
            if action == "hold":
                return self.hold()
            if action == "loop":
                body = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>"
                        b"<IsTruncated>true</IsTruncated><NextContinuationToken>same"
                        b"</NextContinuationToken></ListBucketResult>")
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if action == "drop":
                self.close_connection = True
                return
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() not in ("content-length", "date", "server"):
                    self.send_header(k, v)
            if self.command == "HEAD":
                self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
            else:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any

    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen), Handler)
    print("ready", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
