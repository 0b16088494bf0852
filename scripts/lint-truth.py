#!/usr/bin/env python3
"""Turns a linter's or compiler's own structured report into the fixture's truth.json.

Usage: lint-truth.py KIND REPORT OUT
KIND names the report's shape (gcc-json, mypy-json, ruff-json, pyright-json, shellcheck-json1,
eslint-json, go-vet-json, biome-json, deno-json, cargo-json, cc-plain, file-list). truth.json is
{"source": KIND, "problems": [{file, line, column, severity, code, message}]}, lines and
columns 1-based, severity "error" or "warning", message its first line; a field the tool's
human output does not print is null (mypy prints no column, a file list no line).
"""
import json
import re
import sys


def problem(file, line, column, severity, code, message):
    return {
        "file": file,
        "line": line,
        "column": column,
        "severity": "error" if severity in ("error", "fatal", "fatal error") else "warning",
        "code": code,
        "message": message.split("\n")[0].strip(),
    }


def json_doc(text, empty):
    """The JSON document in a report, past any warning a tool printed around it on stderr."""
    lines = text.splitlines(True)
    start = next((i for i, l in enumerate(lines) if l.startswith(("{", "["))), None)
    if start is None:
        return empty
    # The first document only: biome prints more lines after it.
    return json.JSONDecoder().raw_decode("".join(lines[start:]))[0]


def gcc_json(text):
    out = []
    for d in json_doc(text, []):
        if d["kind"] == "note":
            continue
        caret = d["locations"][0]["caret"]
        out.append(problem(caret["file"], caret["line"], caret["column"], d["kind"], d.get("option"), d["message"]))
    return out


def cc_plain(text):
    # clang has no structured report: its one-line form (-fno-caret-diagnostics) instead.
    out = []
    for m in re.finditer(r"^(\S+):(\d+):(\d+): (error|warning|fatal error): (.*?)(?: \[(-W[^\]]+)\])?$", text, re.M):
        out.append(problem(m[1], int(m[2]), int(m[3]), m[4], m[6], m[5]))
    return out


def mypy_json(text):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            if d["severity"] != "note":
                out.append(problem(d["file"], d["line"], None, d["severity"], d["code"], d["message"]))
    return out


def ruff_json(text):
    return [
        problem(d["filename"], d["location"]["row"], d["location"]["column"], "error", d["code"], d["message"])
        for d in json_doc(text, [])
    ]


def pyright_json(text):
    d = json_doc(text, {})
    return [
        problem(x["file"], x["range"]["start"]["line"] + 1, x["range"]["start"]["character"] + 1,
                x["severity"], x.get("rule"), x["message"])
        for x in d["generalDiagnostics"]
    ]


def shellcheck_json1(text):
    return [
        problem(c["file"], c["line"], c["column"], c["level"], f"SC{c['code']}", c["message"])
        for c in json_doc(text, {"comments": []})["comments"]
    ]


def eslint_json(text):
    return [
        problem(f["filePath"], m.get("line"), m.get("column"), "error" if m["severity"] == 2 else "warning",
                m.get("ruleId"), m["message"])
        for f in json_doc(text, []) for m in f["messages"]
    ]


def go_vet_json(text):
    # `go vet -json` prints `# pkg` lines between its JSON objects.
    body = "".join(l for l in text.splitlines(True) if not l.startswith("#"))
    out, decoder, i = [], json.JSONDecoder(), 0
    while i < len(body):
        if body[i].isspace():
            i += 1
            continue
        obj, i = decoder.raw_decode(body, i)
        for analyzers in obj.values():
            for findings in analyzers.values():
                for f in findings:
                    file, line, col = f["posn"].rsplit(":", 2)
                    out.append(problem(file, int(line), int(col), "error", None, f["message"]))
    return out


def biome_json(text):
    # biome warns on stderr that its JSON reporter is experimental.
    d = json_doc(text, {"diagnostics": []})
    out = []
    for x in d["diagnostics"]:
        loc = x["location"]
        start = loc.get("start") or {}
        # biome's places are 1-based; 0 is a finding of the whole file (format).
        line, column = start.get("line") or None, start.get("column") or None
        out.append(problem(loc["path"], line, column, x["severity"], x["category"], x["message"]))
    return out


def deno_json(text):
    return [
        problem(x["filename"].removeprefix("file://"), x["range"]["start"]["line"], x["range"]["start"]["col"] + 1,
                "error", x["code"], x["message"])
        for x in json_doc(text, {"diagnostics": []})["diagnostics"]
    ]


def cargo_json(text):
    out = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        m = d.get("message") if d.get("reason") == "compiler-message" else None
        if not m or not m["spans"] or m["level"] not in ("error", "warning"):
            continue
        span = next((s for s in m["spans"] if s["is_primary"]), m["spans"][0])
        code = (m.get("code") or {}).get("code")
        out.append(problem(span["file_name"], span["line_start"], span["column_start"], m["level"], code, m["message"]))
    return out


def file_list(text):
    return [problem(f, None, None, "error", None, "not formatted") for f in text.split()]


KINDS = {k.replace("_", "-"): v for k, v in globals().items() if callable(v) and k not in ("problem",)}

if __name__ == "__main__":
    kind, report, out = sys.argv[1:4]
    with open(report, encoding="utf-8") as f:
        problems = KINDS[kind](f.read())
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"source": kind, "problems": problems}, f, indent=1, ensure_ascii=False)
        f.write("\n")
