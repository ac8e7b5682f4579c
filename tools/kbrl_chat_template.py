#!/usr/bin/env python3
"""Renders a model's own Jinja chat template the way transformers' apply_chat_template does.

kbrl renders the template families it knows (ChatML, Qwen3, Llama 3) in C++; every other
template (Llama 3.1+, QwQ, DeepSeek-R1 distills, Mistral, Gemma, ...) is rendered here, with the
engine and environment transformers uses (transformers/utils/chat_template_utils.py):
python3-jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, the {% generation %} tag (rendered as its body), the tojson filter
(json.dumps, ensure_ascii=False), and the raise_exception and strftime_now globals.

Protocol: one JSON object per line on stdin, one answer per line on stdout.
  request  {"template": T, "messages": [...], "add_generation_prompt": bool,
            "variables": {name: value, ...}}      (special tokens, enable_thinking, date_string)
  answer   {"text": "..."}  or  {"error": "..."}
Compiled templates are kept (keyed by their text), so a run pays for each once.
"""

import datetime
import json
import sys

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # answer every request with what is missing
    for _ in sys.stdin:
        sys.stdout.write(json.dumps({"error": "python3-jinja2 is not installed for %s (%s): "
                                              "apt-get install python3-jinja2"
                                              % (sys.executable, e), "missing": True}) + "\n")
        sys.stdout.flush()
    sys.exit(0)


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: transformers marks assistant tokens with it;
    for rendering text it is its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    compiled = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            text = req["template"]
            template = compiled.get(text)
            if template is None:
                template = env.from_string(text)
                compiled[text] = template
            variables = dict(req.get("variables") or {})
            rendered = template.render(messages=req["messages"],
                                       add_generation_prompt=bool(req.get("add_generation_prompt")),
                                       **variables)
            answer = {"text": rendered}
        except jinja2.exceptions.TemplateError as e:
            answer = {"error": "the chat template: %s: %s" % (type(e).__name__, e)}
        except Exception as e:  # a bad request: say what, keep serving
            answer = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
