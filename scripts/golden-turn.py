#!/usr/bin/env python3
"""Makes golden-turn files for crates/greenlight-openai/fixtures/golden-turns/.

Two ways in:

  golden-turn.py from-body BODY --format auto --provenance TEXT --description TEXT \
      [--split events|OFFSET,OFFSET,...] [--end eof|deadline] > NAME.json
      A response body saved with `curl -N` becomes a golden file, cut into chunks at each event
      (the default: how servers flush) or at the given byte offsets.

  golden-turn.py handwritten [OUTDIR]
      Writes the hand-written set: streams in the shape of the llama.cpp server, vLLM and Ollama,
      for the cases a small local setup cannot produce on demand.

Either way the file has no expected events yet: fill them with
  GREENLIGHT_UPDATE_GOLDEN=1 cargo test -p greenlight-openai --test golden_turns
and review them in `git diff` before committing. Needs only python3.
"""

import argparse
import base64
import json
import os
import sys

CREATED = 1763000000


def render(turn):
    """The layout golden::render writes: one chunk and one event per line."""
    s = lambda v: json.dumps(v, ensure_ascii=False)
    out = ["{"]
    for key in ("description", "provenance", "format", "end"):
        out.append(f"  {s(key)}: {s(turn[key])},")
    chunks = []
    for c in turn["chunks"]:
        try:
            chunks.append(s(c.decode("utf-8")))
        except UnicodeDecodeError:
            chunks.append('{"base64": %s}' % s(base64.b64encode(c).decode()))
    for key, items, after in (("chunks", chunks, ","), ("expected", turn.get("expected_lines", []), "")):
        if not items:
            out.append(f'  "{key}": []{after}')
            continue
        out.append(f'  "{key}": [')
        out.extend(f"    {item}{',' if i + 1 < len(items) else ''}" for i, item in enumerate(items))
        out.append(f"  ]{after}")
    out.append("}")
    return "\n".join(out) + "\n"


def split_events(body):
    """Cuts a body after each blank line (each event as the server flushed it); LF, CRLF or CR."""
    chunks, start, i, line_start = [], 0, 0, 0
    while i < len(body):
        c = body[i : i + 1]
        if c in (b"\n", b"\r"):
            end = i + 2 if body[i : i + 2] == b"\r\n" else i + 1
            if i == line_start:  # an empty line ends the event
                chunks.append(body[start:end])
                start = end
            i = line_start = end
        else:
            i += 1
    if start < len(body):
        chunks.append(body[start:])
    return chunks


def split_at(body, offsets):
    cuts = [0] + sorted(set(o for o in offsets if 0 < o < len(body))) + [len(body)]
    return [body[a:b] for a, b in zip(cuts, cuts[1:])]


# --- the three servers' chunk shapes -------------------------------------------------------


def llamacpp(delta, finish=None, model="qwen2.5-7b-instruct-q4_k_m", usage=None):
    """llama-server (--jinja): nlohmann JSON, keys sorted; usage and timings ride the finish chunk."""
    obj = {
        "choices": [{"delta": delta, "finish_reason": finish, "index": 0}],
        "created": CREATED,
        "id": "chatcmpl-4bR8k2QwYtNn0cFhX1mZpLsV7eJdGa3u",
        "model": model,
        "object": "chat.completion.chunk",
        "system_fingerprint": "b6550-5e2e7f1a",
    }
    if usage:
        obj["timings"] = {"predicted_n": usage[1], "predicted_ms": 812.4, "prompt_n": usage[0], "prompt_ms": 95.1}
        obj["usage"] = {"completion_tokens": usage[1], "prompt_tokens": usage[0], "total_tokens": sum(usage)}
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n"


def vllm(delta, finish=None, model="Qwen/Qwen3-8B"):
    obj = {
        "id": "chatcmpl-9f1c2a7e3b5d4c6f8a0b1c2d3e4f5a6b",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if finish is not None:
        obj["choices"][0]["stop_reason"] = None
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n\n"


def vllm_usage(prompt, completion, model="Qwen/Qwen3-8B"):
    obj = {
        "id": "chatcmpl-9f1c2a7e3b5d4c6f8a0b1c2d3e4f5a6b",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion},
    }
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def ollama_usage(prompt, completion, model="qwen3:8b"):
    obj = {
        "id": "chatcmpl-512",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
    return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"


def ollama(delta, finish=None, model="qwen3:8b", usage=None):
    obj = {
        "id": "chatcmpl-512",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        obj["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return "data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + ("\n\n")


DONE = "data: [DONE]\n\n"

WHY = (
    "no OpenAI-compatible server with a model could be run offline when the set was made, so "
    "the stream follows that server's chunk shape (field names, key order, where usage and "
    "finish reasons go) as its documentation and source code describe it"
)


def provenance(server):
    return f"hand-written by scripts/golden-turn.py in the shape of a stream from {server}: {WHY}"


def content_stream(make, pieces):
    return [make({"content": p}) for p in pieces]


def handwritten():
    turns = {}
    L = "the llama.cpp server (llama-server --jinja)"

    # Native calls: two parallel calls, arguments split over many deltas, usage on the finish.
    args0 = ['{"', 'path', '":"', 'src', '/lib', '.rs', '"}']
    args1 = ['{"', 'path', '":"', 'Cargo', '.toml', '","', 'max_lines', '":', '40', '}']
    chunks = [llamacpp({"content": None, "role": "assistant"})]
    chunks += content_stream(llamacpp, ["I'll", " read", " both", " files", "."])
    chunks.append(llamacpp({"tool_calls": [{"function": {"arguments": "", "name": "read_file"}, "id": "Xq3pLzR0aT8vKcW1mN5yB2dE6fGh9JuQ", "index": 0, "type": "function"}]}))
    chunks += [llamacpp({"tool_calls": [{"function": {"arguments": a}, "index": 0}]}) for a in args0]
    chunks.append(llamacpp({"tool_calls": [{"function": {"arguments": "", "name": "read_file"}, "id": "Hn7cVb2Ks9QwEr4Ty6Ui1Op3As5Df8Gj", "index": 1, "type": "function"}]}))
    chunks += [llamacpp({"tool_calls": [{"function": {"arguments": a}, "index": 1}]}) for a in args1]
    chunks.append(llamacpp({}, finish="tool_calls", usage=(412, 61)))
    chunks.append(DONE)
    turns["native-parallel-calls"] = dict(
        description="two native tool calls (index 0 and 1) whose arguments arrive a few characters per delta, after a sentence; usage and timings ride the finish chunk",
        provenance=provenance(L), format="native", end="eof", chunks=chunks)

    # vLLM: one call, the arguments split, usage in a last chunk with no choices.
    chunks = [vllm({"role": "assistant", "content": ""})]
    chunks.append(vllm({"tool_calls": [{"id": "chatcmpl-tool-3c9e1f0a8b7d4e2f", "type": "function", "index": 0, "function": {"name": "run_command"}}]}))
    for a in ['{"command": ', '"cargo test', ' -p greenlight', '-agent"', ', "timeout_s": 300}']:
        chunks.append(vllm({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}))
    chunks.append(vllm({"content": ""}, finish="tool_calls"))
    chunks.append(vllm_usage(1033, 29))
    chunks.append(DONE)
    turns["vllm-call-usage-chunk"] = dict(
        description="vLLM with stream_options.include_usage: one native call, arguments in pieces, then usage in a last chunk whose choices are empty",
        provenance=provenance("vLLM's OpenAI-compatible server (vllm serve --enable-auto-tool-choice --tool-call-parser hermes)"),
        format="auto", end="eof", chunks=chunks)

    # Ollama: reasoning under `reasoning`, a call sent whole in one chunk, no index on the call.
    chunks = [ollama({"role": "assistant", "content": "", "reasoning": r}) for r in ["The user", " wants the", " tests run", "."]]
    chunks.append(ollama({"role": "assistant", "content": "", "tool_calls": [{"id": "call_k2x9v4qz", "index": 0, "type": "function", "function": {"name": "run_command", "arguments": "{\"command\":\"cargo test\"}"}}]}))
    chunks.append(ollama({"role": "assistant", "content": ""}, finish="tool_calls"))
    chunks.append(ollama_usage(220, 48))
    chunks.append(DONE)
    turns["ollama-reasoning-whole-call"] = dict(
        description="Ollama's OpenAI-compatible endpoint: thinking under `reasoning`, one tool call sent whole in a single chunk, usage in a last chunk",
        provenance=provenance("Ollama's /v1/chat/completions"), format="auto", end="eof", chunks=chunks)

    # Hermes tags in the content, the tags cut across chunks.
    text = ["Let me look", ".\n<tool_", "call>\n{\"name\": \"list_dir", "ectory\", \"arguments\": {\"path\": \".\"}}\n</tool", "_call>\n<tool_call>", "\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"README.md\"}}\n</tool_call>"]
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, text)
    chunks += [llamacpp({}, finish="stop", usage=(300, 52)), DONE]
    turns["hermes-tags"] = dict(
        description="Hermes/Qwen <tool_call> tags written into the content (no native tool calling), the tags cut across deltas (`<tool_` | `call>`, `</tool` | `_call>`); two calls",
        provenance=provenance("the llama.cpp server without --jinja, where calls stay in the text"), format="tags", end="eof", chunks=chunks)

    # A fenced JSON call after an ordinary code block that must stay answer text.
    text = ["The test", " fails here:\n```", "rust\nassert_eq!(parse(\"<tool_call>\"), None);\n``", "`\nI'll run it.\n``", "`json\n{\"name\": \"run_command\",", " \"arguments\": {\"command\": \"cargo test parse\"}}\n", "```\n"]
    chunks = [vllm({"role": "assistant", "content": ""})] + content_stream(vllm, text) + [vllm({"content": ""}, finish="stop"), DONE]
    turns["fenced-json-call"] = dict(
        description="an ordinary ```rust block that mentions <tool_call> (answer text), then a ```json fence holding exactly a call object (a call); fences cut across deltas",
        provenance=provenance("vLLM's OpenAI-compatible server (no tool parser: calls stay in the text)"), format="tags", end="eof", chunks=chunks)

    # <think> tags in the content.
    text = ["<thi", "nk>\nThe gate", " failed on a", " missing import.", "\n</th", "ink>\n\nAdd `use std::fmt;` at the top", " of src/lib.rs."]
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, text) + [llamacpp({}, finish="stop", usage=(150, 40)), DONE]
    turns["think-tags"] = dict(
        description="reasoning written into the content between <think> tags (llama-server --reasoning-format none), the tags cut across deltas",
        provenance=provenance(L), format="auto", end="eof", chunks=chunks)

    # reasoning_content from the server, then the answer.
    chunks = [llamacpp({"content": None, "role": "assistant"})]
    chunks += [llamacpp({"reasoning_content": r}) for r in ["Two gates", " fail;", " both on", " the same", " line."]]
    chunks += content_stream(llamacpp, ["Fix the", " off-by-one", " in `tail`."])
    chunks += [llamacpp({}, finish="stop", usage=(180, 33)), DONE]
    turns["reasoning-content"] = dict(
        description="reasoning separated by the server into reasoning_content (llama-server --reasoning-format deepseek), then the answer",
        provenance=provenance(L), format="auto", end="eof", chunks=chunks)

    # A malformed call (bad JSON in the tag), then a good one.
    text = ["<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"}\n</tool_call>", "\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"}}\n</tool_call>"]
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, text) + [llamacpp({}, finish="stop", usage=(90, 70)), DONE]
    turns["malformed-call"] = dict(
        description="a <tool_call> whose JSON misses a closing brace (a violation with the raw text), then the same call written correctly",
        provenance=provenance("the llama.cpp server without --jinja"), format="tags", end="eof", chunks=chunks)

    # An unterminated ```tool_call fence, cut by the length limit.
    text = ["Running it:\n```tool_call\n{\"name\": \"run_command\", ", "\"arguments\": {\"command\": \"cargo build --rel"]
    chunks = [ollama({"role": "assistant", "content": p}) for p in text] + [ollama({"role": "assistant", "content": ""}, finish="length"), DONE]
    turns["unterminated-fence"] = dict(
        description="a ```tool_call fence the model never closed: generation stopped at max_tokens (finish_reason length)",
        provenance=provenance("Ollama's /v1/chat/completions"), format="tags", end="eof", chunks=chunks)

    # The connection drops inside a tag: no finish reason, no [DONE].
    text = ["Checking.", "\n<tool_call>\n{\"name\": \"read_file\", \"argu", "ments\": {\"path\": \"src/m"]
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, text)
    turns["cut-mid-tag"] = dict(
        description="the body ends inside a <tool_call> (the server went away): no finish reason, no [DONE]",
        provenance=provenance("the llama.cpp server without --jinja"), format="tags", end="eof", chunks=chunks)

    # An error object mid-stream.
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, ["Sure", ", the"])
    chunks.append('data: {"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}\n\n')
    turns["error-mid-stream"] = dict(
        description="the server reports an error object after some content and ends the body",
        provenance=provenance(L), format="auto", end="eof", chunks=chunks)

    # Emoji and CJK cut inside their UTF-8 sequences; CRLF line ends and keepalive comments.
    body = "".join([llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, ["テストは", "全部通りました", " 🎉🚀", " — 完了"]) + [llamacpp({}, finish="stop", usage=(60, 12)), DONE])
    raw = body.encode()
    cuts = []
    for needle in ["テ".encode(), "通".encode(), "🎉".encode(), "🚀".encode(), "完".encode()]:
        at = raw.find(needle)
        cuts += [at + 1, at + 2] if len(needle) == 3 else [at + 1, at + 3]
    turns["multibyte-split"] = dict(
        description="Japanese text and emoji whose UTF-8 sequences are cut across chunks (the chunks are base64 where they are not UTF-8 on their own)",
        provenance=provenance(L), format="auto", end="eof", chunks=split_at(raw, cuts))

    body = ": ping\r\n\r\n" + "".join(c.replace("\n\n", "\r\n\r\n") for c in [vllm({"role": "assistant", "content": ""}), vllm({"content": "Done"}), ": ping\n\n", vllm({"content": "."}), vllm({"content": ""}, finish="stop"), DONE])
    turns["crlf-keepalive"] = dict(
        description="CRLF line ends and `: ping` keepalive comments, as a proxy in front of the server may send; one chunk splits a CRLF",
        provenance=provenance("vLLM's OpenAI-compatible server behind a proxy"), format="auto", end="eof",
        chunks=split_at(body.encode(), [body.encode().find(b"\r\n", 300) + 1, 500]))

    # The deadline comes inside a tag and with a fragment held.
    text = ["Reading", " <tool_call>{\"name\": \"read_file\", \"arguments\": {\"pa"]
    chunks = [llamacpp({"content": None, "role": "assistant"})] + content_stream(llamacpp, text)
    turns["deadline-open-call"] = dict(
        description="the caller's deadline comes while a <tool_call> is open: its raw text is reported, nothing stays held",
        provenance=provenance("the llama.cpp server without --jinja"), format="tags", end="deadline", chunks=chunks)

    for t in turns.values():
        t["chunks"] = [c if isinstance(c, bytes) else c.encode() for c in t["chunks"]]
    return turns


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    fb = sub.add_parser("from-body", help="a body saved with curl -N -> a golden file on stdout")
    fb.add_argument("body")
    fb.add_argument("--format", choices=["native", "tags", "auto"], default="auto")
    fb.add_argument("--end", choices=["eof", "deadline"], default="eof")
    fb.add_argument("--provenance", required=True, help="server, version, model, request, date")
    fb.add_argument("--description", required=True)
    fb.add_argument("--split", default="events", help="`events` or byte offsets: 10,57,300")
    hw = sub.add_parser("handwritten", help="write the hand-written set")
    hw.add_argument("outdir", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "crates", "greenlight-openai", "fixtures", "golden-turns"))
    args = ap.parse_args()

    if args.cmd == "from-body":
        with open(args.body, "rb") as f:
            body = f.read()
        if args.split == "events":
            chunks = split_events(body)
        else:
            chunks = split_at(body, [int(x) for x in args.split.split(",") if x])
        sys.stdout.write(render(dict(description=args.description, provenance=args.provenance, format=args.format, end=args.end, chunks=chunks)))
        return
    os.makedirs(args.outdir, exist_ok=True)
    for name, turn in handwritten().items():
        path = os.path.join(args.outdir, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(turn))
        print(path)


if __name__ == "__main__":
    main()
