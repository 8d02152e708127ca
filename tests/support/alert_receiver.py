#!/usr/bin/env python3
"""A webhook receiver for the alert tests: records every POST it gets.

Usage: alert_receiver.py PORT OUT_FILE [KEY_FILE]

Each request becomes one JSON line in OUT_FILE: {"time", "path", "headers",
"body", "signature_ok"}; signature_ok says whether X-Ejob-Signature is
"sha256=" and the hex HMAC-SHA256 of the body under the key in KEY_FILE
(null without a key file). Answers 200 "ok", or the status the path names
(/status/503 answers 503).
"""
import hashlib
import hmac
import http.server
import json
import sys
import time

port, out = int(sys.argv[1]), sys.argv[2]
key = open(sys.argv[3], 'rb').read().split(b'\n')[0] if len(sys.argv) > 3 else None


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        ok = None
        if key is not None:
            want = 'sha256=' + hmac.new(key, body, hashlib.sha256).hexdigest()
            ok = hmac.compare_digest(want, self.headers.get('X-Ejob-Signature', ''))
        rec = {'time': time.time(), 'path': self.path, 'headers': dict(self.headers),
               'body': body.decode('utf-8', 'replace'), 'signature_ok': ok}
        with open(out, 'a') as f:
            f.write(json.dumps(rec) + '\n')
        status = 200
        if self.path.startswith('/status/'):
            status = int(self.path.split('/')[2])
        self.send_response(status)
        self.send_header('Content-Type', 'text/plain')
        self.end_headers()
        self.wfile.write(b'ok' if status == 200 else b'no')

    def log_message(self, *args):
        pass


http.server.HTTPServer(('127.0.0.1', port), Handler).serve_forever()
