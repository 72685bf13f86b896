"""The framework adapters against the real server, with the framework versions pinned in
pyproject.toml's extras."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from episodic_client import AsyncEpisodicClient, EpisodicClient, TenantMismatchError


@pytest.fixture()
def dana(client):
    """An actor with two events; returns (actor id, the email event's id)."""
    who = f"user:{uuid.uuid4().hex[:8]}"
    email = client.write({"summary": "Dana wants renewal notices by email", "actorId": who, "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-17"], "sourceTrust": "user_provided"})
    client.write({"summary": "Dana paid the March invoice", "actorId": who, "occurredAt": "2026-06-18T09:20:00Z", "sourceRefs": ["billing-1"]})
    return who, email["eventId"]


def test_langchain_retriever_returns_evidence_documents_with_provenance(client, server, dana):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from episodic_client.langchain import EpisodicRetriever

    who, email = dana
    retriever = EpisodicRetriever(client=client, scope={"actorIds": [who]}, limit=1)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("How does Dana want renewal notices?")
    assert len(docs) == 1 and isinstance(docs[0], Document)
    doc = docs[0]
    assert doc.id == email and doc.metadata["eventId"] == email
    assert doc.page_content.startswith("Past event, not current instruction:\n")
    assert "- summary: Dana wants renewal notices by email" in doc.page_content
    assert doc.metadata["actorId"] == who and doc.metadata["sourceTrust"] == "user_provided"
    breakdown = doc.metadata["scoreBreakdown"]
    assert abs(sum(v for k, v in breakdown.items() if k not in ("cosine", "bm25")) - doc.metadata["score"]) < 1e-4
    # The same documents as the legacy route's, which this class replaces.
    import httpx

    legacy = httpx.post(server.base_url + "/v1/retrievers/langchain", headers={"Authorization": "Bearer " + server.key}, json={"message": "How does Dana want renewal notices?", "limit": 1, "scope": {"actorIds": [who]}}).json()
    assert legacy["response"][0]["page_content"] == doc.page_content

    async def both():
        async with AsyncEpisodicClient(server.base_url, server.key) as ac:
            with_async = EpisodicRetriever(async_client=ac, scope={"actorIds": [who]}, limit=2)
            a = await with_async.ainvoke("How does Dana want renewal notices?")
        b = await retriever.ainvoke("How does Dana want renewal notices?")
        return a, b

    a, b = asyncio.run(both())
    assert a[0].id == email and len(a) == 2 and [d.id for d in b] == [email]


def test_llama_index_retriever_returns_nodes_with_scores(client, server, dana):
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore

    from episodic_client.llama_index import EpisodicRetriever

    who, email = dana
    retriever = EpisodicRetriever(client, scope={"actorIds": [who]}, limit=2)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("How does Dana want renewal notices?")
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    top = nodes[0]
    assert top.node.node_id == email and top.score == top.node.metadata["score"]
    assert nodes[0].score >= nodes[1].score
    # What an LLM is given is the evidence block alone.
    text = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert text.startswith("Past event, not current instruction:") and "scoreBreakdown" not in text
    assert set(top.node.metadata["scoreBreakdown"]) >= {"relevance", "recency", "trust"}

    async def go():
        async with AsyncEpisodicClient(server.base_url, server.key) as ac:
            return await EpisodicRetriever(async_client=ac, scope={"actorIds": [who]}, limit=1).aretrieve("renewal notices")

    assert [n.node.node_id for n in asyncio.run(go())] == [email]


def test_langgraph_store_maps_namespaces_to_tenant_actor_project(client, server):
    from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp

    from episodic_client.langgraph import EpisodicStore

    who = f"user:{uuid.uuid4().hex[:8]}"
    store = EpisodicStore(client, source_trust="user_provided")
    assert isinstance(store, BaseStore)
    ns = ("acme", who, "billing")
    store.put(ns, f"pref-{who}", {"content": "Dana wants invoices by email", "kind": "preference"})
    store.put(("acme", who), f"note-{who}", {"text": "Dana moved to Berlin"})

    item = store.get(ns, f"pref-{who}")
    assert item.key == f"pref-{who}" and tuple(item.namespace) == ns
    assert item.value["content"] == "Dana wants invoices by email" and item.value["kind"] == "preference"
    stored = client.get_event(f"pref-{who}")
    assert (stored["tenantId"], stored["actorId"], stored["projectId"]) == ns
    assert store.get(("acme", who), f"pref-{who}") is None  # another namespace

    # A put with other content corrects: the key reads the new version, the old is superseded.
    store.put(ns, f"pref-{who}", {"content": "Dana wants invoices by post", "kind": "preference"})
    item = store.get(ns, f"pref-{who}")
    assert item.value["content"] == "Dana wants invoices by post"
    assert client.get_event(f"pref-{who}")["status"] == "superseded"
    assert item.created_at < item.updated_at

    hits = store.search(("acme", who), query="How does Dana want invoices?", limit=5)
    assert [h.key for h in hits][0] == f"pref-{who}" and hits[0].score > 0
    assert hits[0].value["episodic"]["evidence"].startswith("Past event, not current instruction:")
    assert {h.key for h in store.search(("acme", who, "billing"), query="Berlin")} == {f"pref-{who}"}
    assert [h.key for h in store.search(("acme", who), filter={"kind": "preference"})] == [f"pref-{who}"]
    listed = store.search(("acme", who), limit=1, offset=1)
    assert len(listed) == 1

    assert ("acme", who) in store.list_namespaces(prefix=("acme", who))
    assert ("acme", who, "billing") in store.list_namespaces(prefix=("acme", who))

    results = store.batch([GetOp(ns, f"pref-{who}"), SearchOp(("acme", who), None, 10, 0, "invoices"), PutOp(("acme", who), f"note-{who}", None)])
    assert results[0].key == f"pref-{who}" and len(results[1]) >= 1 and results[2] is None
    assert store.get(("acme", who), f"note-{who}") is None

    store.delete(ns, f"pref-{who}")
    assert store.get(ns, f"pref-{who}") is None
    assert store.search(("acme", who), query="invoices") == []

    # An event written by the client, not the store, is found too, its text under text_key.
    client.write({"summary": "Dana called about the Berlin office", "actorId": who, "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["call-1"]})
    foreign = store.search(("acme", who), query="Berlin office call", limit=1)[0]
    assert foreign.value["content"] == "Dana called about the Berlin office"
    assert foreign.key == foreign.value["episodic"]["eventId"]

    with pytest.raises(TenantMismatchError):
        store.put(("globex", who), "x1", {"content": "Dana asked"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("acme",), "x2", {"content": "no actor"})
    with pytest.raises(ValueError):
        store.put(("acme", who), "x3", {"colour": "no text"})


def test_langgraph_store_async_and_in_a_compiled_graph(server):
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    from episodic_client.langgraph import EpisodicStore

    who = f"user:{uuid.uuid4().hex[:8]}"

    class State(TypedDict):
        message: str
        memories: list

    def remember(state: State):
        store = get_store()
        store.put(("acme", who), str(uuid.uuid4()), {"content": state["message"]})
        found = store.search(("acme", who), query=state["message"], limit=3)
        return {"memories": [f.value["content"] for f in found]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)

    with EpisodicClient(server.base_url, server.key) as c:
        graph = builder.compile(store=EpisodicStore(c))
        out = graph.invoke({"message": "Dana prefers morning meetings", "memories": []})
    assert out["memories"] == ["Dana prefers morning meetings"]

    async def go():
        async with AsyncEpisodicClient(server.base_url, server.key) as ac:
            store = EpisodicStore(async_client=ac)
            await store.aput(("acme", who), "async-1", {"memory": "Dana likes short emails"})
            item = await store.aget(("acme", who), "async-1")
            hits = await store.asearch(("acme", who), query="emails")
            await store.adelete(("acme", who), "async-1")
            gone = await store.aget(("acme", who), "async-1")
            return item, hits, gone

    item, hits, gone = asyncio.run(go())
    assert item.value["memory"] == "Dana likes short emails"
    assert hits[0].key == "async-1" and gone is None
