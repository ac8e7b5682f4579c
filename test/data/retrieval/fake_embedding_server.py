#!/usr/bin/python3
"""A fake OpenAI-compatible embeddings server for kbrl's retrieval tests.

Listens on an ephemeral loopback port and prints it as one JSON line on stdout:
    {"port": 40001}
and exits when its stdin closes (the test that started it is gone) or on SIGTERM.

    POST /v1/embeddings   {"input": [texts] or "text", "model": ..., "encoding_format": ...}
    GET  /stats           {"requests": n, "batch_sizes": [...], "models": [...],
                           "connections": n, "max_concurrent": n, "first_inputs": [...]}

The embedding of a text is predictable: DIM values, value j = 1 + the number of its bytes b
with b % DIM == j (so texts with similar bytes are near each other). Items come back in
reverse order with their "index", so a client must sort by index.

Flags make it misbehave:
    --dim N            vector length (default 8)
    --fail-first N     answer the first N requests with HTTP 503 (then behave)
    --retry-after S    send Retry-After: S with those 503s
    --wrong-dim-at N   request number N (1-based) returns vectors one value short
    --garbage-at N     request number N gets a 200 with a body that is not JSON
    --drop-item-at N   request number N returns one embedding fewer than inputs
    --error-400        every request is refused with {"error": {"message": "input too long"}}
    --delay S          every request takes S seconds
    --require-model M  refuse requests whose model is not M (HTTP 404, vLLM's wording)
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--retry-after", default="")
    p.add_argument("--wrong-dim-at", type=int, default=0)
    p.add_argument("--garbage-at", type=int, default=0)
    p.add_argument("--drop-item-at", type=int, default=0)
    p.add_argument("--error-400", action="store_true")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--require-model", default="")
    return p.parse_args()


ARGS = parse_args()
LOCK = threading.Lock()
STATS = {"requests": 0, "batch_sizes": [], "models": [], "connections": 0,
         "max_concurrent": 0, "first_inputs": []}
ACTIVE = [0]


def embed(text, dim):
    values = [1.0] * dim
    for b in text.encode("utf-8"):
        values[b % dim] += 1.0
    return values


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with LOCK:
            STATS["connections"] += 1

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, headers=None):
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                self.reply(200, json.dumps(STATS))
        else:
            self.reply(404, json.dumps({"detail": "Not Found"}))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path != "/v1/embeddings":
            self.reply(404, json.dumps({"detail": "Not Found"}))
            return
        with LOCK:
            STATS["requests"] += 1
            number = STATS["requests"]
            ACTIVE[0] += 1
            STATS["max_concurrent"] = max(STATS["max_concurrent"], ACTIVE[0])
        try:
            self.answer(number, raw)
        finally:
            with LOCK:
                ACTIVE[0] -= 1

    def answer(self, number, raw):
        if ARGS.delay > 0:
            time.sleep(ARGS.delay)
        try:
            body = json.loads(raw)
        except ValueError:
            self.reply(400, json.dumps({"error": {"message": "body is not JSON"}}))
            return
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        with LOCK:
            STATS["batch_sizes"].append(len(inputs or []))
            STATS["models"].append(body.get("model"))
            STATS["first_inputs"].append((inputs or [""])[0][:200])
        if number <= ARGS.fail_first:
            headers = {"Retry-After": ARGS.retry_after} if ARGS.retry_after else None
            self.reply(503, json.dumps({"error": {"message": "warming up"}}), headers)
            return
        if ARGS.error_400:
            self.reply(400, json.dumps({"error": {"message": "input too long"}}))
            return
        if ARGS.require_model and body.get("model") != ARGS.require_model:
            self.reply(404, json.dumps({"error": {
                "message": "The model `%s` does not exist." % body.get("model")}}))
            return
        if number == ARGS.garbage_at:
            self.reply(200, "<html>upstream proxy error</html>")
            return
        dim = ARGS.dim - 1 if number == ARGS.wrong_dim_at else ARGS.dim
        data = [{"object": "embedding", "index": i, "embedding": embed(t, dim)}
                for i, t in enumerate(inputs)]
        if number == ARGS.drop_item_at:
            data = data[:-1]
        data.reverse()
        self.reply(200, json.dumps({"object": "list", "data": data, "model": body.get("model"),
                                    "usage": {"prompt_tokens": 0, "total_tokens": 0}}))


def main():
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write(json.dumps({"port": server.server_address[1]}) + "\n")
    sys.stdout.flush()
    # Exit when the parent closes our stdin (or dies).
    while sys.stdin.read(1):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
