#!/usr/bin/env python3
"""Episodic's MCP tools driven by the official MCP Python SDK (``mcp`` on PyPI), as an
agent's host drives them: over stdio, by starting ``episodic mcp --stdio``, or over
streamable HTTP, against ``/mcp`` of a running ``episodic serve``.

Every step is checked; the first that fails ends the run with exit status 1 and a line on
stderr naming it. On success it prints one JSON object (what was written and which errors
were seen) and exits 0. ``tests/it/mcp_python.rs`` runs it with the SDK version it pins::

    python mcp_sdk_client.py stdio --binary target/debug/episodic \\
        --data-dir DIR --model-dir models --key KEY
    python mcp_sdk_client.py http --url http://127.0.0.1:8080/mcp --key KEY
"""

import argparse
import asyncio
import json
import sys
import traceback

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

TOOLS = [
    "correct_event",
    "current_datetime",
    "forget_event",
    "get_event",
    "get_timeline",
    "observe_interaction",
    "recall",
    "record_event",
]
MINIMAL = ["actorId", "occurredAt", "sourceRefs", "summary"]
OCCURRED_AT = "2026-06-17T09:20:00Z"


class StepFailed(Exception):
    """A check that did not hold, named by its step."""


def check(condition, step, detail=""):
    if not condition:
        raise StepFailed(f"{step}: {detail}" if detail else step)


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def succeed(session, step, tool, arguments):
    """Calls a tool that must succeed; the SDK checks the structured content against the
    tool's output schema when it declares one. Returns (structured content, text)."""
    result = await session.call_tool(tool, arguments)
    check(not result.is_error, step, f"tool error: {text_of(result)}")
    check(isinstance(result.structured_content, dict), step, "no structured content")
    return result.structured_content, text_of(result)


async def fail(session, step, tool, arguments, code):
    """Calls a tool that must fail with `code`: a tool error whose structured content is the
    problem body (type, title, status, detail, code) and whose text starts with
    `<code>: <detail>`. Returns the problem."""
    result = await session.call_tool(tool, arguments)
    check(result.is_error, step, "expected a tool error")
    problem = result.structured_content
    check(isinstance(problem, dict), step, "no problem body")
    for member in ["type", "title", "status", "detail", "code"]:
        check(member in problem, step, f"problem lacks {member}: {problem}")
    check(problem["code"] == code, step, f"code {problem['code']}, not {code}")
    check(problem["type"] == f"urn:episodic:problem:{code}", step, str(problem))
    text = text_of(result)
    check(text.startswith(f"{code}: {problem['detail']}"), step, text)
    return problem


async def scenario(session):
    info = await session.initialize()
    check(info.server_info.name == "episodic", "initialize", str(info.server_info))
    check(bool(info.instructions), "initialize", "no instructions")

    listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    check(sorted(tools) == TOOLS, "list_tools", str(sorted(tools)))
    for name, tool in tools.items():
        check(len(tool.description or "") >= 100, "list_tools", f"{name}: short description")
        schema = tool.input_schema
        check(schema.get("type") == "object", "list_tools", f"{name}: not an object schema")
        for combinator in ["anyOf", "oneOf", "allOf"]:
            check(combinator not in schema, "list_tools", f"{name}: {combinator} at the top")
    required = sorted(tools["record_event"].input_schema.get("required", []))
    check(required == MINIMAL, "list_tools", f"record_event requires {required}")
    required = tools["correct_event"].input_schema.get("required", [])
    check(required == ["correctsEventId"], "list_tools", f"correct_event requires {required}")
    output = tools["recall"].output_schema
    check(output is not None and output.get("type") == "object", "list_tools", "recall output")

    now, now_text = await succeed(session, "current_datetime", "current_datetime", {})
    check(now_text.endswith("Z") and now["now"] == now_text, "current_datetime", now_text)

    # A write with only the minimal arguments.
    recorded, _ = await succeed(
        session,
        "record_event (minimal)",
        "record_event",
        {
            "summary": "Dana prefers renewal notices by email instead of post",
            "actorId": "user:dana",
            "occurredAt": OCCURRED_AT,
            "sourceRefs": ["chat-17"],
        },
    )
    check(recorded.get("status") == "active", "record_event (minimal)", str(recorded))
    first = recorded["eventId"]
    derived = [d["field"] for d in recorded.get("derived", [])]
    check("eventType" in derived and "sourceTrust" in derived, "record_event", str(derived))

    # Recall: the evidence block as text, the hits with ids and scores as structured content.
    recall, evidence = await succeed(
        session, "recall", "recall", {"query": "How does Dana want renewal notices?"}
    )
    check(evidence.startswith("Past event, not current instruction:"), "recall", evidence)
    check(f"event_id: {first}" in evidence, "recall", evidence)
    check(recall["evidence"] == evidence, "recall", "structured evidence differs from the text")
    hits = recall["results"]
    check(len(hits) >= 1 and hits[0]["eventId"] == first, "recall", json.dumps(hits)[:500])
    top = hits[0]
    check(isinstance(top["score"], (int, float)), "recall", "score")
    breakdown = top["scoreBreakdown"]
    for part in ["relevance", "lexical", "recency", "trust", "confidence", "cosine", "bm25"]:
        check(isinstance(breakdown.get(part), (int, float)), "recall", f"scoreBreakdown.{part}")
    stats = recall["stats"]
    check(stats["candidates"] >= 1 and stats["path"] == "exact", "recall", str(stats))

    # A partial correction: the target and only what changes.
    corrected, _ = await succeed(
        session,
        "correct_event (partial)",
        "correct_event",
        {
            "correctsEventId": first,
            "summary": "Dana now prefers renewal notices by text message",
            "sourceTrust": "user_provided",
        },
    )
    check(corrected["status"] == "active", "correct_event (partial)", str(corrected))
    second = corrected["eventId"]
    event = corrected["event"]
    check(event["supersedesEventIds"] == [first], "correct_event (partial)", str(event))
    check(event["actorId"] == "user:dana", "correct_event (partial)", "actorId carried over")
    old, _ = await succeed(session, "get_event", "get_event", {"eventId": first})
    check(old["status"] == "superseded", "get_event", str(old))
    check(old["supersededBy"] == second, "get_event", str(old))

    # Errors: problem-shaped, each naming what to change.
    seen = []
    problem = await fail(
        session,
        "record_event (missing summary)",
        "record_event",
        {"actorId": "user:dana", "occurredAt": OCCURRED_AT, "sourceRefs": ["c"], "colour": 1},
        "validation_failed",
    )
    check(problem["status"] == 422 and problem["title"] == "validation failed", "422", "")
    fields = {e["field"]: e["message"] for e in problem["errors"]}
    check(fields.get("summary") == "is required", "record_event (missing summary)", str(fields))
    check("known fields" in fields.get("colour", ""), "unknown argument", str(fields))
    check("summary: is required" in problem["detail"], "detail names the fix", problem["detail"])
    seen.append(problem["code"])

    problem = await fail(
        session, "correct_event (no target)", "correct_event", {"summary": "x"},
        "validation_failed",
    )
    check(problem["errors"][0]["field"] == "correctsEventId", "correct_event", str(problem))
    seen.append(problem["code"])

    problem = await fail(
        session, "get_event (unknown id)", "get_event", {"eventId": "no-such-event"}, "not_found"
    )
    check("recall" in problem["detail"], "not_found names the fix", problem["detail"])
    seen.append(problem["code"])

    try:
        await session.call_tool("remember_everything", {})
        raise StepFailed("unknown tool: expected a protocol error")
    except MCPError as e:
        check("record_event" in e.error.message, "unknown tool", e.error.message)
        data = e.error.data or {}
        check(data.get("code") == "bad_request", "unknown tool", str(data))
        seen.append("protocol:" + data["code"])

    return {"recorded": first, "corrected": second, "hits": len(hits), "errors": seen}


async def over_stdio(args):
    server = StdioServerParameters(
        command=args.binary,
        args=["mcp", "--stdio"],
        env={
            "EPISODIC_DATA_DIR": args.data_dir,
            "EPISODIC_MODEL_DIR": args.model_dir,
            "EPISODIC_API_KEY": args.key,
        },
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            return await scenario(session)


async def over_http(args):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.key}"})
    async with http:
        async with streamable_http_client(args.url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                return await scenario(session)


def leaves(error):
    """The exceptions inside `error` (task groups wrap what their body raised)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="transport", required=True)
    stdio = sub.add_parser("stdio", help="start `episodic mcp --stdio` and talk to it")
    stdio.add_argument("--binary", required=True)
    stdio.add_argument("--data-dir", required=True)
    stdio.add_argument("--model-dir", required=True)
    stdio.add_argument("--key", required=True)
    http = sub.add_parser("http", help="talk to /mcp of a running `episodic serve`")
    http.add_argument("--url", required=True)
    http.add_argument("--key", required=True)
    args = parser.parse_args()
    run = over_stdio if args.transport == "stdio" else over_http
    try:
        summary = asyncio.run(run(args))
    except Exception as e:  # noqa: BLE001 - every failure ends the run, named
        for leaf in leaves(e):
            if isinstance(leaf, StepFailed):
                print(f"step failed: {leaf}", file=sys.stderr)
            else:
                traceback.print_exception(leaf, file=sys.stderr)
        return 1
    summary["transport"] = args.transport
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
