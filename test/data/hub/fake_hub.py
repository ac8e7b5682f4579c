#!/usr/bin/python3
"""A stand-in for the Hugging Face hub, for kbrl's download tests.

Serves model repositories from local folders under the hub's URL layout, on 127.0.0.1 and an
ephemeral port, with a thread per connection:

  GET  /api/models/<org>/<name>/revision/<rev>[?blobs=true]
         {"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256", "size"}}]}
  GET|HEAD /<org>/<name>/resolve/<rev>/<file>
         small files: 200 with the bytes, ETag = git blob SHA-1, X-Repo-Commit
         *.safetensors: 302 to http://<host>/cdn/<sha256> with X-Linked-Etag (SHA-256), X-Linked-Size,
         X-Repo-Commit, as the hub redirects weights to its storage
  GET  /cdn/<sha256>   the bytes; honours "Range: bytes=A-" and "bytes=A-B" (206, or 416)

Usage: fake_hub.py CONFIG.json LOG.jsonl
Prints "port <n>" on stdout once listening, then serves until killed. Every request is appended
to LOG.jsonl as {"method", "path", "range", "auth"}. CONFIG.json:
  {"repos": {"Org/Name": {"dir": "/folder/with/files", "sha": "<40 hex>",
                          "refs": {"main": "<40 hex>"}}},
   "token": "secret",            # optional: every request needs "Authorization: Bearer secret"
                                 # (none: 401; another: 403 with X-Error-Code GatedRepo)
   "drop": {"file": "model.safetensors", "after": 1000, "times": 1},
                                 # optional: close the connection after sending `after` bytes of
                                 # that file's body, the first `times` times it is served
   "fail": [{"match": "/resolve/", "status": 500, "times": 2}],
                                 # optional: answer requests whose path contains `match` with
                                 # `status`, `times` times (-1: always)
   "no_blob_ids": false,         # optional: the API omits blobId and lfs (clients must HEAD)
   "ignore_range": false,        # optional: answer ranged requests with the whole file (200)
   "corrupt": "model.safetensors"  # optional: serve that file with its first byte flipped
  }
"""

import hashlib
import http.server
import json
import os
import socket
import sys
import threading
import urllib.parse

CONFIG = {}
LOG_PATH = None
LOCK = threading.Lock()
REPOS = {}  # repo id -> {"sha", "refs", "files": {name: {"path", "size", "sha1", "sha256"}}}
BY_SHA256 = {}  # sha256 -> (repo id, file name)


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(name):
    return name.endswith(".safetensors")


def load_repos():
    for repo_id, spec in CONFIG.get("repos", {}).items():
        files = {}
        root = spec["dir"]
        for folder, _, names in os.walk(root):
            for n in sorted(names):
                path = os.path.join(folder, n)
                rel = os.path.relpath(path, root)
                with open(path, "rb") as f:
                    data = f.read()
                entry = {"path": path, "size": len(data), "sha1": git_blob_sha1(data),
                         "sha256": hashlib.sha256(data).hexdigest()}
                files[rel] = entry
                if is_lfs(rel):
                    BY_SHA256[entry["sha256"]] = (repo_id, rel)
        REPOS[repo_id] = {"sha": spec["sha"], "refs": spec.get("refs", {}), "files": files}


def take(counter_holder, key="times"):
    """True if a limited behaviour still applies, counting one use."""
    with LOCK:
        times = counter_holder.get(key, -1)
        if times == 0:
            return False
        if times > 0:
            counter_holder[key] = times - 1
        return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the JSONL log is what tests read
        pass

    def record(self):
        line = json.dumps({"method": self.command, "path": self.path,
                           "range": self.headers.get("Range"),
                           "auth": self.headers.get("Authorization")})
        with LOCK:
            with open(LOG_PATH, "a") as f:
                f.write(line + "\n")

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        self.reply(status, message.encode(), {"X-Error-Code": code, "X-Error-Message": message,
                                              "Content-Type": "text/plain"})

    def do_HEAD(self):
        self.handle_request()

    def do_GET(self):
        self.handle_request()

    def handle_request(self):
        self.record()
        path = urllib.parse.urlsplit(self.path).path
        for rule in CONFIG.get("fail", []):
            if rule["match"] in path and take(rule):
                return self.error(rule["status"], "Injected", "injected failure")
        token = CONFIG.get("token")
        if token and not path.startswith("/cdn/"):
            auth = self.headers.get("Authorization")
            if auth is None:
                return self.error(401, "GatedRepo", "Access to this gated model is restricted.")
            if auth != "Bearer " + token:
                return self.error(403, "GatedRepo", "Your token has no access to this gated model.")
        if path.startswith("/api/models/"):
            return self.api(path[len("/api/models/"):])
        if path.startswith("/cdn/"):
            return self.cdn(path[len("/cdn/"):])
        if "/resolve/" in path:
            return self.resolve(path)
        return self.error(404, "NotFound", "no route")

    def find_repo(self, repo_id, rev):
        repo = REPOS.get(repo_id)
        if repo is None:
            self.error(404, "RepoNotFound", "Repository not found")
            return None, None
        sha = rev if rev == repo["sha"] else repo["refs"].get(rev)
        if sha is None:
            self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
            return None, None
        return repo, sha

    def api(self, rest):
        if "/revision/" not in rest:
            return self.error(404, "NotFound", "no route")
        repo_id, rev = rest.split("/revision/", 1)
        repo, sha = self.find_repo(repo_id, urllib.parse.unquote(rev))
        if repo is None:
            return
        siblings = []
        for name, f in sorted(repo["files"].items()):
            s = {"rfilename": name}
            if not CONFIG.get("no_blob_ids"):
                s["size"] = f["size"]
                s["blobId"] = f["sha1"]
                if is_lfs(name):
                    s["lfs"] = {"sha256": f["sha256"], "size": f["size"], "pointerSize": 134}
            siblings.append(s)
        body = json.dumps({"id": repo_id, "sha": sha, "siblings": siblings}).encode()
        self.reply(200, body, {"Content-Type": "application/json"})

    def resolve(self, path):
        head, name = path.split("/resolve/", 1)
        rev, _, name = name.partition("/")
        name = urllib.parse.unquote(name)
        repo, sha = self.find_repo(head.lstrip("/"), urllib.parse.unquote(rev))
        if repo is None:
            return
        f = repo["files"].get(name)
        if f is None:
            return self.error(404, "EntryNotFound", name + " does not exist on " + rev)
        if is_lfs(name):
            # Absolute, to "storage", as the hub redirects weights to its CDN.
            location = "http://%s/cdn/%s" % (self.headers.get("Host"), f["sha256"])
            return self.reply(302, b"", {"Location": location,
                                         "X-Repo-Commit": sha,
                                         "X-Linked-Etag": '"%s"' % f["sha256"],
                                         "X-Linked-Size": str(f["size"]),
                                         "ETag": '"%s"' % f["sha1"]})
        self.send_file(name, f, {"X-Repo-Commit": sha, "ETag": '"%s"' % f["sha1"]})

    def cdn(self, sha256):
        found = BY_SHA256.get(sha256)
        if found is None:
            return self.error(404, "NotFound", "no such object")
        repo_id, name = found
        self.send_file(name, REPOS[repo_id]["files"][name], {})

    def send_file(self, name, f, headers):
        with open(f["path"], "rb") as fh:
            data = fh.read()
        if CONFIG.get("corrupt") == name and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        status, start, end = 200, 0, len(data)
        rng = self.headers.get("Range")
        if rng and not CONFIG.get("ignore_range") and self.command == "GET":
            spec = rng.replace("bytes=", "", 1)
            a, _, b = spec.partition("-")
            start = int(a)
            end = int(b) + 1 if b else len(data)
            if start >= len(data):
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % len(data)})
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, len(data))
        body = data[start:end]
        drop = CONFIG.get("drop")
        if (self.command == "GET" and drop and drop["file"] == name and len(body) > drop["after"]
                and take(drop)):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:drop["after"]])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.reply(status, body, headers)


def main():
    global CONFIG, LOG_PATH
    with open(sys.argv[1]) as f:
        CONFIG = json.load(f)
    LOG_PATH = sys.argv[2]
    load_repos()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("port %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
