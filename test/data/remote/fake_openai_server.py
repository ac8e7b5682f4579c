#!/usr/bin/python3
"""A fake OpenAI-compatible inference server for kbrl's remote sampler tests.

It listens on two ephemeral loopback ports and prints them as one JSON line on stdout:
    {"port": 40001, "control_port": 40002}
and exits when its stdin closes (the test that started it is gone) or on SIGTERM.

API port (what the sampler talks to), HTTP/1.1 with keep-alive:
    GET  /v1/models                the base model (--model) and every loaded LoRA adapter
    POST /v1/completions           prompt: a string or a list of token ids
    POST /v1/chat/completions      messages: [{role, content}]
    POST /v1/load_lora_adapter     {lora_name, lora_path}; the path must hold adapter_config.json
                                   (--no-lora: 404 {"detail": "Not Found"}, as vLLM without it)
    POST /v1/unload_lora_adapter   {lora_name}

"Generation" is deterministic, so tests can predict every token:
    prompt ids   the list given, or the UTF-8 bytes of the prompt text (chat: of the contents
                 joined)
    base         (sum(prompt ids) + 7 * seed + 3 * choice index + offset) % 100, where offset is
                 50 when the request names a LoRA adapter, else 0
    token k      (base + k) % 100, for k = 0, 1, ... up to max_tokens
    text         each token t adds " w<t>"; EOS (id 2) and stop token ids add no text
    logprob      -((t % 10) + 1) / 10
    stops        EOS (id 2): finish "stop", stop_reason null; a stop_token_ids member: "stop",
                 stop_reason the id; a stop string appearing in the text: the text is cut before
                 it, "stop", stop_reason the string (the token that completed it is kept);
                 max_tokens reached: "length"
Replies follow vLLM: with return_tokens_as_token_ids the logprob tokens read "token_id:<t>",
else they are the token text; stop_reason is present. --plain drops the vLLM extensions
(stop_reason, token ids, stop_token_ids) like a plain OpenAI-style server.
--no-token-prompts refuses list prompts with HTTP 400; --api-key KEY requires "Bearer KEY".

Control port (never counted in the statistics):
    POST /faults    {"faults": [fault, ...]} appends to a queue; each API request (except
                    GET /v1/models, unless the fault names it in "path") takes the first fault
                    whose "path" (if given) matches. A fault is one of
                      {"kind": "status", "status": 500, "retry_after": "1", "body": "..."}
                      {"kind": "slow", "delay_s": 2.0}      answer normally after a delay
                      {"kind": "truncate"}                  a 200 whose JSON is cut in half
                      {"kind": "close"}                     close the connection, no reply
                      {"kind": "partial"}                   headers promise more than is sent
                      {"kind": "body", "body": "..."}       a 200 with this body
    POST /settings  {"delay_s": 0.05}: every generation takes this long
    GET  /stats     {"connections", "requests", "max_concurrent", "active", "paths": {path: n},
                     "recent": [{"path", "body", "authorization"}, ...] (last 100, oldest first)}
    POST /reset     zeroes the statistics and empties the fault queue
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

VOCAB = 100
EOS = 2
ADAPTER_OFFSET = 50


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.adapters = {}  # name -> path
        self.faults = []
        self.delay_s = 0.0
        self.reset()

    def reset(self):
        self.connections = 0
        self.requests = 0
        self.active = 0
        self.max_concurrent = 0
        self.paths = {}
        self.recent = []
        self.faults = []

    def take_fault(self, path):
        with self.lock:
            for i, fault in enumerate(self.faults):
                wanted = fault.get("path")
                if wanted == path or (wanted is None and path != "/v1/models"):
                    return self.faults.pop(i)
        return None


def piece(t):
    return " w%d" % t


def logprob(t):
    return -((t % 10) + 1) / 10.0


def generate(prompt_ids, seed, index, offset, max_tokens, stops, stop_ids):
    base = (sum(prompt_ids) + 7 * seed + 3 * index + offset) % VOCAB
    tokens, text = [], ""
    for k in range(max_tokens):
        t = (base + k) % VOCAB
        tokens.append(t)
        if t == EOS:
            return tokens, text, "stop", None
        if t in stop_ids:
            return tokens, text, "stop", t
        text += piece(t)
        found = [(text.find(s), s) for s in stops if s and text.find(s) >= 0]
        if found:
            pos, s = min(found)
            return tokens, text[:pos], "stop", s
    return tokens, text, "length", None


class BadRequest(Exception):
    def __init__(self, status, message, err_type="BadRequestError"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type


def error_body(status, message, err_type):
    return {"error": {"message": message, "type": err_type, "param": None, "code": status}}


def make_api_handler(state):
    args = state.args

    class Api(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm holds the
            # body until the client's delayed ACK (~40 ms a request).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with state.lock:
                state.connections += 1

        def log_message(self, *a):
            pass

        def send_json(self, status, obj, extra_headers=()):
            self.send_bytes(status, json.dumps(obj).encode(), "application/json", extra_headers)

        def send_bytes(self, status, data, content_type, extra_headers=()):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in extra_headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self):
            self.handle_api(None)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length > 0 else b""
            self.handle_api(raw)

        def handle_api(self, raw):
            path = self.path
            with state.lock:
                state.requests += 1
                state.active += 1
                state.max_concurrent = max(state.max_concurrent, state.active)
                state.paths[path] = state.paths.get(path, 0) + 1
                state.recent.append({
                    "path": path,
                    "body": raw.decode("utf-8", "replace") if raw else "",
                    "authorization": self.headers.get("Authorization", ""),
                })
                del state.recent[:-100]
            try:
                self.serve(path, raw)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            finally:
                with state.lock:
                    state.active -= 1

        def serve(self, path, raw):
            if args.api_key and self.headers.get("Authorization") != "Bearer " + args.api_key:
                self.send_json(401, {"error": "Unauthorized"})
                return
            fault = state.take_fault(path)
            kind = fault.get("kind") if fault else None
            if kind == "close":
                self.close_connection = True
                return
            if kind == "status":
                status = int(fault.get("status", 500))
                headers = []
                if "retry_after" in fault:
                    headers.append(("Retry-After", str(fault["retry_after"])))
                body = fault.get("body")
                if body is None:
                    self.send_json(status, error_body(status, "injected failure %d" % status,
                                                      "InjectedError"), headers)
                else:
                    self.send_bytes(status, body.encode(), "application/json", headers)
                return
            if kind == "body":
                self.send_bytes(200, fault.get("body", "").encode(), "application/json")
                return
            if kind == "slow":
                time.sleep(float(fault.get("delay_s", 1.0)))
            if kind == "partial":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b'{"id": "cmpl-partial", "choices": [')
                self.wfile.flush()
                self.close_connection = True
                return
            try:
                status, reply = self.route(path, raw)
            except BadRequest as e:
                self.send_json(e.status, error_body(e.status, e.message, e.err_type))
                return
            if isinstance(reply, str):
                self.send_bytes(status, reply.encode(), "text/plain")
                return
            data = json.dumps(reply).encode()
            if kind == "truncate":
                data = data[: len(data) // 2]
            self.send_bytes(status, data, "application/json")

        def route(self, path, raw):
            if path == "/v1/models" and raw is None:
                return 200, self.models()
            if raw is None:
                return 404, {"detail": "Not Found"}
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                raise BadRequest(400, "the body is not JSON")
            if path == "/v1/completions":
                return 200, self.completions(body, chat=False)
            if path == "/v1/chat/completions":
                return 200, self.completions(body, chat=True)
            if path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter") and args.no_lora:
                return 404, {"detail": "Not Found"}
            if path == "/v1/load_lora_adapter":
                return self.load_lora(body)
            if path == "/v1/unload_lora_adapter":
                return self.unload_lora(body)
            return 404, {"detail": "Not Found"}

        def models(self):
            data = [{"id": args.model, "object": "model", "owned_by": "fake", "root": args.model,
                     "parent": None}]
            with state.lock:
                for name, path in state.adapters.items():
                    data.append({"id": name, "object": "model", "owned_by": "fake", "root": path,
                                 "parent": args.model})
            return {"object": "list", "data": data}

        def load_lora(self, body):
            name, path = body.get("lora_name"), body.get("lora_path")
            if not name or not path:
                raise BadRequest(400, "Both 'lora_name' and 'lora_path' must be provided.",
                                 "InvalidUserInput")
            with state.lock:
                if name in state.adapters:
                    raise BadRequest(400, "The lora adapter '%s' has already been loaded." % name,
                                     "InvalidUserInput")
            if not os.path.isfile(os.path.join(path, "adapter_config.json")):
                raise BadRequest(404, "Loading lora %s failed: No adapter found for %s"
                                 % (name, path), "NotFoundError")
            with state.lock:
                state.adapters[name] = path
            return 200, "Success: LoRA adapter '%s' added successfully." % name

        def unload_lora(self, body):
            name = body.get("lora_name")
            with state.lock:
                if name not in state.adapters:
                    raise BadRequest(404, "The lora adapter '%s' cannot be found." % name,
                                     "NotFoundError")
                del state.adapters[name]
            return 200, "Success: LoRA adapter '%s' removed successfully." % name

        def completions(self, body, chat):
            model = body.get("model")
            with state.lock:
                is_adapter = model in state.adapters
            if model != args.model and not is_adapter:
                raise BadRequest(404, "The model `%s` does not exist." % model, "NotFoundError")
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise BadRequest(400, "messages must be a non-empty list")
                text = "".join(str(m.get("content", "")) for m in messages)
                prompt_ids = list(text.encode("utf-8"))
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, str):
                    prompt_ids = list(prompt.encode("utf-8"))
                elif isinstance(prompt, list) and all(isinstance(x, int) for x in prompt):
                    if args.no_token_prompts:
                        raise BadRequest(400, "prompt must be a string")
                    prompt_ids = prompt
                else:
                    raise BadRequest(400, "prompt must be a string or a list of token ids")
            max_tokens = body.get("max_tokens", 16)
            n = body.get("n", 1)
            seed = body.get("seed", 0) or 0
            if not isinstance(max_tokens, int) or max_tokens < 1:
                raise BadRequest(400, "max_tokens must be at least 1")
            if not isinstance(n, int) or n < 1:
                raise BadRequest(400, "n must be at least 1")
            stops = body.get("stop") or []
            if isinstance(stops, str):
                stops = [stops]
            plain = args.plain
            stop_ids = [] if plain else (body.get("stop_token_ids") or [])
            as_ids = bool(body.get("return_tokens_as_token_ids")) and not plain
            wants_logprobs = body.get("logprobs") not in (None, False)
            if state.delay_s:
                time.sleep(state.delay_s)
            offset = ADAPTER_OFFSET if is_adapter else 0
            choices, completion_tokens = [], 0
            for i in range(n):
                tokens, text, finish, stop_reason = generate(prompt_ids, seed, i, offset,
                                                             max_tokens, stops, stop_ids)
                completion_tokens += len(tokens)
                names = ["token_id:%d" % t if as_ids else ("</s>" if t == EOS else piece(t))
                         for t in tokens]
                choice = {"index": i, "finish_reason": finish}
                if not plain:
                    choice["stop_reason"] = stop_reason
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                    choice["logprobs"] = None if not wants_logprobs else {"content": [
                        {"token": name, "logprob": logprob(t), "bytes": list(name.encode()),
                         "top_logprobs": []}
                        for name, t in zip(names, tokens)]}
                else:
                    choice["text"] = text
                    choice["logprobs"] = None if not wants_logprobs else {
                        "text_offset": list(range(len(tokens))),
                        "token_logprobs": [logprob(t) for t in tokens],
                        "tokens": names,
                        "top_logprobs": [{name: logprob(t)} for name, t in zip(names, tokens)],
                    }
                choices.append(choice)
            # Choices in reverse order: a client must sort them by index.
            choices.reverse()
            return {
                "id": "cmpl-fake",
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": choices,
                "usage": {"prompt_tokens": len(prompt_ids),
                          "completion_tokens": completion_tokens,
                          "total_tokens": len(prompt_ids) + completion_tokens},
            }

    return Api


def make_control_handler(state):
    class Control(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, obj):
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/stats":
                with state.lock:
                    self.reply({"connections": state.connections, "requests": state.requests,
                                "max_concurrent": state.max_concurrent, "active": state.active,
                                "paths": dict(state.paths), "recent": list(state.recent),
                                "faults_left": len(state.faults)})
            else:
                self.send_error(404)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with state.lock:
                if self.path == "/faults":
                    state.faults.extend(body.get("faults", []))
                elif self.path == "/settings":
                    state.delay_s = float(body.get("delay_s", state.delay_s))
                elif self.path == "/reset":
                    state.reset()
                else:
                    self.send_error(404)
                    return
            self.reply({"ok": True})

    return Control


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # A client that hung up mid-reply is normal here (timeouts are tested); stay quiet.
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--no-lora", action="store_true")
    parser.add_argument("--no-token-prompts", action="store_true")
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--api-key", default="")
    args = parser.parse_args()
    state = State(args)
    api = Server(("127.0.0.1", 0), make_api_handler(state))
    control = Server(("127.0.0.1", 0), make_control_handler(state))
    for server in (api, control):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": api.server_address[1], "control_port": control.server_address[1]}),
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # Runs until the test closes our stdin (or dies).
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, KeyboardInterrupt):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
