#!/usr/bin/python3
"""A scripted OpenAI-compatible completions server for kbrl-eval's multi-turn tests.

    scripted_openai_server.py --script SCRIPT.json --log PROMPTS.jsonl [--model NAME]

It listens on an ephemeral loopback port, prints {"port": N} as one line on stdout, and exits
when its stdin closes (the test that started it is gone) or on SIGTERM.

SCRIPT.json maps a phrase to the answers of successive turns:
    {"performs a ReLU activation": ["turn 0 answer", "turn 1 answer", ...], ...}
A request's problem is the first phrase found in its prompt; its turn is the number of
"Your previous answer:" in the prompt (the feedback kbrl puts before each later turn). The answer
is the script's entry for that turn (the last one when the script is shorter); a prompt matching
no phrase gets "no script for this prompt". Every request is appended to PROMPTS.jsonl as
{"phrase": ..., "turn": ..., "prompt": ...} before it is answered.

API (enough of it for kbrl's remote sampler):
    GET  /v1/models         the one model
    POST /v1/completions    prompt: a string; logprobs answered as "token_id:<k>" tokens
"""

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FEEDBACK = "Your previous answer:"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--model", default="scripted-coder")
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        script = json.load(f)
    lock = threading.Lock()

    class Api(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/models":
                return self.reply(200, {"object": "list",
                                        "data": [{"id": args.model, "object": "model"}]})
            self.reply(404, {"error": {"message": "no such path"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/v1/completions":
                return self.reply(404, {"error": {"message": "no such path"}})
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return self.reply(400, {"error": {"message": "prompt must be a string"}})
            phrase = next((p for p in script if p in prompt), None)
            turn = prompt.count(FEEDBACK)
            if phrase is None:
                text = "no script for this prompt"
            else:
                answers = script[phrase]
                text = answers[min(turn, len(answers) - 1)]
            with lock:
                with open(args.log, "a", encoding="utf-8") as log:
                    log.write(json.dumps({"phrase": phrase, "turn": turn, "prompt": prompt}) + "\n")
            tokens = ["token_id:%d" % (10 + k) for k in range(3)]
            self.reply(200, {
                "id": "cmpl-scripted", "object": "text_completion", "model": args.model,
                "choices": [{"index": 0, "text": text, "finish_reason": "stop",
                             "logprobs": {"tokens": tokens, "token_logprobs": [-0.5] * 3,
                                          "text_offset": [0, 1, 2], "top_logprobs": None}}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": 3,
                          "total_tokens": len(prompt) + 3},
            })

    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, KeyboardInterrupt):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
