#!/usr/bin/env python3
"""A minimal Episodic client for RAG pipelines (Python standard library only).

Copy this file into a pipeline. ``EpisodicRetriever.invoke(query)`` returns documents shaped
like LangChain's (``page_content`` + ``metadata``); ``page_content`` is the event's evidence
block, so put it in the prompt as evidence, not as instructions.

With LangChain installed, the same route also works through its own class::

    from langchain_community.retrievers import RemoteLangChainRetriever
    retriever = RemoteLangChainRetriever(
        url=BASE_URL + "/v1/retrievers/langchain",
        headers={"Authorization": "Bearer " + API_KEY},
    )

Run as a script for a demo: write an event, then retrieve it (prints JSON)::

    python3 episodic_client.py --url http://127.0.0.1:8080 --key <api key> --demo
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


class EpisodicError(Exception):
    """A problem+json answer from the server: ``code`` is stable, ``detail`` is for humans."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        self.code = problem.get("code", "unknown")
        super().__init__(f"{status} {self.code}: {problem.get('detail', '')}")


class EpisodicClient:
    """Thin JSON-over-HTTP client; one API key, one tenant."""

    def __init__(self, base_url, api_key, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.api_key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            try:
                problem = json.loads(err.read().decode("utf-8"))
            except ValueError:
                problem = {"detail": err.reason}
            raise EpisodicError(err.code, problem) from None

    def write_event(self, event):
        """Writes an event; returns ``{eventId, status, decision, ...}``."""
        return self._call("POST", "/v1/events?refresh=wait_for", event)

    def recall(self, query, limit=10, scope=None):
        """Full recall answer: ``results`` with score breakdowns and ``evidence``."""
        body = {"query": query, "limit": limit}
        if scope:
            body["scope"] = scope
        return self._call("POST", "/v1/recall", body)


class EpisodicRetriever:
    """Retriever with LangChain's document shape, over ``/v1/retrievers/langchain``."""

    def __init__(self, client, limit=5, scope=None):
        self.client = client
        self.limit = limit
        self.scope = scope

    def invoke(self, query):
        body = {"message": query, "limit": self.limit}
        if self.scope:
            body["scope"] = self.scope
        answer = self.client._call("POST", "/v1/retrievers/langchain", body)
        return answer["response"]


def demo(client):
    written = client.write_event({
        "eventType": "user_preference_stated",
        "occurredAt": "2026-03-01T09:30:00Z",
        "actorId": "user:dana",
        "resourceRefs": ["billing:invoices"],
        "summary": "Dana asked for invoices to be sent as PDF to the finance mailbox.",
        "sourceRefs": ["chat:session-17"],
        "sourceTrust": "user_provided",
        "confidence": "high",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": True},
    })
    docs = EpisodicRetriever(client, limit=3).invoke("How does Dana want invoices delivered?")
    return {"written": written["eventId"], "documents": docs}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--query")
    parser.add_argument("--demo", action="store_true")
    args = parser.parse_args(argv)
    client = EpisodicClient(args.url, args.key)
    try:
        if args.demo:
            out = demo(client)
        elif args.query:
            out = {"documents": EpisodicRetriever(client).invoke(args.query)}
        else:
            parser.error("give --query or --demo")
    except EpisodicError as err:
        print(json.dumps({"error": err.code, "status": err.status, "problem": err.problem}))
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
