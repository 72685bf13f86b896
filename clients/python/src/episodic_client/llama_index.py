"""A LlamaIndex retriever over Episodic's recall (``pip install 'episodic-client[llama-index]'``).

::

    from episodic_client import EpisodicClient
    from episodic_client.llama_index import EpisodicRetriever

    retriever = EpisodicRetriever(EpisodicClient("http://127.0.0.1:8080", key),
                                  scope={"actorIds": ["user:dana"]}, limit=5)
    nodes = retriever.retrieve("How does Dana want renewal notices?")

Each ``NodeWithScore`` holds a ``TextNode`` whose text is the hit's evidence block, whose
``id_`` is the event id and whose metadata holds the provenance and score breakdown (kept
out of the text LlamaIndex gives an LLM or an embedder: the block already states its
provenance); ``score`` is the recall score.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "episodic_client.llama_index needs llama-index-core: "
        "pip install 'episodic-client[llama-index]'"
    ) from exc

from ._hits import documents
from .client import AsyncEpisodicClient, EpisodicClient

__all__ = ["EpisodicRetriever"]


class EpisodicRetriever(BaseRetriever):
    """Recall as LlamaIndex nodes: the query string, ``scope`` and ``limit`` go to ``POST /v1/recall``."""

    def __init__(
        self,
        client: Optional[EpisodicClient] = None,
        *,
        async_client: Optional[AsyncEpisodicClient] = None,
        scope: Optional[Dict[str, Any]] = None,
        limit: int = 10,
        include_stale: Optional[bool] = None,
        include_superseded: Optional[bool] = None,
        **kwargs: Any,
    ) -> None:
        if client is None and async_client is None:
            raise ValueError("EpisodicRetriever needs client= or async_client=")
        super().__init__(**kwargs)
        self.client = client
        self.async_client = async_client
        self.scope = scope
        self.limit = limit
        self.include_stale = include_stale
        self.include_superseded = include_superseded

    def _recall_kwargs(self) -> Dict[str, Any]:
        return {
            "scope": self.scope,
            "limit": self.limit,
            "include_stale": self.include_stale,
            "include_superseded": self.include_superseded,
        }

    @staticmethod
    def _nodes(recall: Dict[str, Any]) -> List[NodeWithScore]:
        nodes = []
        for block, meta in documents(recall):
            keys = list(meta)
            node = TextNode(
                id_=meta["eventId"],
                text=block,
                metadata=meta,
                excluded_llm_metadata_keys=keys,
                excluded_embed_metadata_keys=keys,
            )
            nodes.append(NodeWithScore(node=node, score=meta["score"]))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        if self.client is None:
            raise ValueError("EpisodicRetriever needs client=EpisodicClient(...) for retrieve")
        return self._nodes(self.client.recall(query_bundle.query_str, **self._recall_kwargs()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        if self.async_client is None:
            return self._retrieve(query_bundle)
        recall = await self.async_client.recall(query_bundle.query_str, **self._recall_kwargs())
        return self._nodes(recall)
