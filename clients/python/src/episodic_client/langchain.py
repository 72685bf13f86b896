"""A LangChain retriever over Episodic's recall (``pip install 'episodic-client[langchain]'``).

::

    from episodic_client import EpisodicClient
    from episodic_client.langchain import EpisodicRetriever

    retriever = EpisodicRetriever(
        client=EpisodicClient("http://127.0.0.1:8080", key),
        scope={"actorIds": ["user:dana"]},
        limit=5,
    )
    docs = retriever.invoke("How does Dana want renewal notices?")

Each ``Document``'s ``page_content`` is the hit's evidence block (memory framed as a past
event, never as an instruction) and its ``metadata`` the provenance and score breakdown;
``Document.id`` is the event id. Give ``async_client`` (an ``AsyncEpisodicClient``) for
``ainvoke`` to use the async client rather than a thread.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "episodic_client.langchain needs langchain-core: pip install 'episodic-client[langchain]'"
    ) from exc

from ._hits import documents
from .client import AsyncEpisodicClient, EpisodicClient

__all__ = ["EpisodicRetriever"]


class EpisodicRetriever(BaseRetriever):
    """Recall as LangChain documents: the query, ``scope`` and ``limit`` go to ``POST /v1/recall``."""

    client: Optional[EpisodicClient] = None
    async_client: Optional[AsyncEpisodicClient] = None
    scope: Optional[Dict[str, Any]] = None
    limit: int = 10
    include_stale: Optional[bool] = None
    include_superseded: Optional[bool] = None

    def _recall_kwargs(self) -> Dict[str, Any]:
        return {
            "scope": self.scope,
            "limit": self.limit,
            "include_stale": self.include_stale,
            "include_superseded": self.include_superseded,
        }

    @staticmethod
    def _documents(recall: Dict[str, Any]) -> List[Document]:
        return [
            Document(page_content=block, metadata=meta, id=meta["eventId"])
            for block, meta in documents(recall)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> List[Document]:
        if self.client is None:
            raise ValueError("EpisodicRetriever needs client=EpisodicClient(...) for invoke")
        return self._documents(self.client.recall(query, **self._recall_kwargs()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> List[Document]:
        if self.async_client is None:
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        recall = await self.async_client.recall(query, **self._recall_kwargs())
        return self._documents(recall)
