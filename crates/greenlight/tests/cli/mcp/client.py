"""Drives `greenlight mcp` through the official Python MCP SDK and prints what it saw.

Usage: client.py SCENARIO --server BIN --cwd DIR [options]

The server is started by the SDK's `stdio_client` (the way an MCP host starts it) in DIR, with
this process's whole environment (the test sets GREENLIGHT_STATE, HOME and the lock root).
Every scenario prints exactly one JSON document on stdout; the server's stderr goes to stderr.

Scenarios:
  tools     tools/list: each tool's schemas and annotations, and whether its schemas are valid
            Draft 2020-12 schemas.
  calls     --calls JSON: a list of {"tool", "arguments", "progress"} run in order, each one's
            result, its progress notifications (as the callback got them and in wire order) and
            its structured content checked against the tool's outputSchema. An argument
            value "$run_id" is replaced by the run_id of the last `verify` answer.
  cancel    --verify JSON, --wait-file PATH (repeatable), --cancelled-marker PATH,
            --resume-marker PATH, --then JSON: starts verify, cancels the call once every wait
            file holds a pid (the SDK sends notifications/cancelled when the caller's cancel
            scope ends the request), writes the cancelled marker, waits for the resume marker
            (the test checks the pids meanwhile, with the session still open), then runs verify
            with the --then arguments to show the server still answers. Reports how long after
            the cancel the pids were gone (measured here too, from the moment of cancelling).
  evidence  --verify JSON, --gate ID, --limit N, --out PATH: runs verify, then pages the gate's
            whole output through `evidence` until next_offset is null, writes the pages joined
            to PATH, and reports their length and SHA-256, the page count and the time it took.

Structured results are validated twice: by the SDK itself (call_tool raises when they do not
match the outputSchema) and here with jsonschema's Draft202012Validator; failures are reported
in the JSON, never raised, so the test sees all of them at once.
"""

import argparse
import hashlib
import json
import os
import sys
import time
import traceback

import anyio
import jsonschema
from mcp import ClientSession, StdioServerParameters, stdio_client


def schema_problems(schema):
    """Why `schema` is not a Draft 2020-12 schema (empty when it is one)."""
    if schema is None:
        return ["no schema"]
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        return [e.message]
    return []


def validation_errors(schema, value):
    """Every place `value` breaks `schema`, as `path: message`."""
    if schema is None:
        return ["the tool advertises no outputSchema"]
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in validator.iter_errors(value)
    ]


def error_record(exc):
    """An exception as the JSON shows it: its type, message and JSON-RPC error code if any."""
    record = {"type": type(exc).__name__, "message": str(exc)}
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(getattr(exc, "error", None), "code", None)
    if code is not None:
        record["code"] = code
    return record


class Wire:
    """Every message the server sent, in arrival order, read off the transport before the
    session sees it: which progress notifications came before which response."""

    def __init__(self):
        self.events = []

    def note(self, item):
        message = getattr(item, "message", None)
        if message is None:
            self.events.append({"kind": "transport-error", "text": str(item)})
            return
        data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
        data = data.get("root", data)
        method = data.get("method")
        if method == "notifications/progress":
            params = data.get("params", {})
            self.events.append(
                {
                    "kind": "progress",
                    "token": params.get("progressToken"),
                    "progress": params.get("progress"),
                    "message": params.get("message"),
                }
            )
        elif method is not None:
            self.events.append({"kind": "notification", "method": method})
        elif "error" in data:
            self.events.append({"kind": "error", "id": data.get("id"), "error": data["error"]})
        else:
            self.events.append({"kind": "response", "id": data.get("id")})

    def since(self, start):
        return self.events[start:]


class Driver:
    def __init__(self, session, wire):
        self.session = session
        self.wire = wire
        self.schemas = {}
        self.last_run_id = None

    async def list_tools(self):
        listed = await self.session.list_tools()
        tools = []
        for tool in listed.tools:
            self.schemas[tool.name] = tool.output_schema
            annotations = tool.annotations
            tools.append(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                    "output_schema": tool.output_schema,
                    "annotations": annotations.model_dump(by_alias=True, exclude_none=True)
                    if annotations is not None
                    else None,
                    "input_schema_problems": schema_problems(tool.input_schema),
                    "output_schema_problems": schema_problems(tool.output_schema),
                }
            )
        return tools

    def substitute(self, arguments):
        return {
            key: (self.last_run_id if value == "$run_id" else value)
            for key, value in (arguments or {}).items()
        }

    async def call(self, tool, arguments, progress=False, keep_text=True):
        """One tools/call, recorded: the result or the error, the progress it brought, and the
        structured content checked against the tool's outputSchema."""
        arguments = self.substitute(arguments)
        record = {"tool": tool, "arguments": arguments}
        seen = []

        async def on_progress(value, total, message):
            seen.append({"progress": value, "total": total, "message": message, "at": time.monotonic()})

        start = len(self.wire.events)
        began = time.monotonic()
        try:
            result = await self.session.call_tool(
                tool, arguments, progress_callback=on_progress if progress else None
            )
        except Exception as exc:  # the SDK's MCPError, or its own schema check failing
            record["error"] = error_record(exc)
            result = None
        # A copy taken as call_tool returns: a notification the callback got only afterwards
        # is missing here, and the test sees it.
        seen = list(seen)
        record["seconds"] = round(time.monotonic() - began, 3)
        for event in seen:
            event["after_ms"] = round((event.pop("at") - began) * 1000)
        record["progress"] = seen
        record["wire"] = self.wire.since(start)
        if result is not None:
            record["is_error"] = result.is_error
            texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
            record["text"] = "\n".join(texts) if keep_text else f"[{sum(map(len, texts))} chars]"
            record["structured"] = result.structured_content
            if result.structured_content is not None:
                record["schema_errors"] = validation_errors(self.schemas.get(tool), result.structured_content)
            if tool == "verify" and isinstance(result.structured_content, dict):
                self.last_run_id = result.structured_content.get("run_id")
        return record


async def wait_for_pids(paths, limit):
    deadline = time.monotonic() + limit
    while True:
        pids = []
        for path in paths:
            try:
                with open(path) as f:
                    text = f.read().strip()
            except OSError:
                text = ""
            if text.isdigit():
                pids.append(int(text))
        if len(pids) == len(paths):
            return pids
        if time.monotonic() > deadline:
            raise TimeoutError(f"{paths} did not all hold a pid within {limit} s")
        await anyio.sleep(0.02)


def alive(pid):
    """Whether `pid` runs (a zombie has ended; only its reaping is pending)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().rsplit(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


async def wait_until_gone(pids, since, limit):
    """Milliseconds from `since` until none of `pids` runs, or None past `limit` seconds."""
    while any(alive(pid) for pid in pids):
        if time.monotonic() - since > limit:
            return None
        await anyio.sleep(0.005)
    return round((time.monotonic() - since) * 1000)


async def wait_for_file(path, limit):
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {limit} s")
        await anyio.sleep(0.02)


async def scenario_tools(driver, args, out):
    out["tools"] = await driver.list_tools()


async def scenario_calls(driver, args, out):
    await driver.list_tools()
    out["calls"] = []
    for spec in json.loads(args.calls):
        out["calls"].append(
            await driver.call(spec["tool"], spec.get("arguments"), progress=spec.get("progress", False))
        )


async def scenario_cancel(driver, args, out):
    await driver.list_tools()
    verify_args = json.loads(args.verify)
    holder = {}
    start = len(driver.wire.events)

    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def call_verify():
            with scope:
                holder["record"] = await driver.call("verify", verify_args, progress=True)

        tg.start_soon(call_verify)
        out["pids"] = await wait_for_pids(args.wait_file, 30)
        began = time.monotonic()
        scope.cancel()
    out["cancel_returned_ms"] = round((time.monotonic() - began) * 1000)
    out["pids_gone_ms"] = await wait_until_gone(out["pids"], began, 10)
    # A call whose scope was cancelled never records a result; one that did finish is a bug.
    out["cancelled_call_finished"] = holder.get("record")
    # What the server sent for the cancelled call: its progress, and no answer is expected.
    out["cancelled_call_wire"] = driver.wire.since(start)
    with open(args.cancelled_marker, "w") as f:
        f.write("cancelled\n")
    await wait_for_file(args.resume_marker, 60)
    out["then"] = await driver.call("verify", json.loads(args.then), progress=True)
    out["wire"] = driver.wire.events


async def scenario_evidence(driver, args, out):
    await driver.list_tools()
    verify = await driver.call("verify", json.loads(args.verify))
    out["verify"] = verify
    structured = verify.get("structured") or {}
    run_id = structured.get("run_id")
    digest = hashlib.sha256()
    length = 0
    pages = 0
    offset = 0
    problems = []
    total = None
    joined = open(args.out, "wb")
    began = time.monotonic()
    while run_id is not None:
        page = await driver.call(
            "evidence",
            {"run_id": run_id, "gate": args.gate, "offset": offset, "limit": args.limit},
            keep_text=False,
        )
        pages += 1
        body = page.get("structured")
        if body is None:
            problems.append({"page": pages, "record": page})
            break
        if page.get("schema_errors"):
            problems.append({"page": pages, "schema_errors": page["schema_errors"]})
        if body["offset"] != offset:
            problems.append({"page": pages, "asked_offset": offset, "got_offset": body["offset"]})
        data = body["text"].encode("utf-8")
        if len(data) > args.limit:
            problems.append({"page": pages, "longer_than_limit": len(data)})
        digest.update(data)
        joined.write(data)
        length += len(data)
        total = body["total_bytes"]
        if body["next_offset"] is None:
            break
        if body["next_offset"] <= offset:
            problems.append({"page": pages, "next_offset_did_not_move": body["next_offset"]})
            break
        offset = body["next_offset"]
    joined.close()
    out["paging"] = {
        "pages": pages,
        "bytes": length,
        "sha256": digest.hexdigest(),
        "total_bytes": total,
        "seconds": round(time.monotonic() - began, 3),
        "problems": problems,
    }


SCENARIOS = {
    "tools": scenario_tools,
    "calls": scenario_calls,
    "cancel": scenario_cancel,
    "evidence": scenario_evidence,
}


async def run(args):
    out = {"scenario": args.scenario}
    wire = Wire()
    params = StdioServerParameters(
        command=args.server, args=["mcp"], env=dict(os.environ), cwd=args.cwd
    )
    try:
        async with stdio_client(params) as (server_read, server_write):
            tapped_send, tapped_read = anyio.create_memory_object_stream(0)

            async def tap():
                async with tapped_send:
                    async for item in server_read:
                        wire.note(item)
                        await tapped_send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(tap)
                async with ClientSession(tapped_read, server_write) as session:
                    init = await session.initialize()
                    out["protocol_version"] = init.protocol_version
                    out["server"] = init.server_info.model_dump(by_alias=True, exclude_none=True)
                    await SCENARIOS[args.scenario](Driver(session, wire), args, out)
                tg.cancel_scope.cancel()
    except Exception as exc:
        out["failure"] = error_record(exc)
        out["traceback"] = traceback.format_exc()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--server", required=True, help="the greenlight binary")
    parser.add_argument("--cwd", required=True, help="the server's working directory")
    parser.add_argument("--calls", default="[]")
    parser.add_argument("--verify", default="{}")
    parser.add_argument("--then", default="{}")
    parser.add_argument("--wait-file", action="append", default=[])
    parser.add_argument("--cancelled-marker")
    parser.add_argument("--resume-marker")
    parser.add_argument("--gate")
    parser.add_argument("--limit", type=int, default=1 << 20)
    parser.add_argument("--out")
    args = parser.parse_args()
    out = anyio.run(run, args)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
