"""Python client for Episodic, a long-term episodic memory server for AI agents.

``EpisodicClient`` (blocking) and ``AsyncEpisodicClient`` cover the routes an agent or a
pipeline uses; errors are typed (:mod:`episodic_client.errors`); request and answer shapes
are typed in :mod:`episodic_client.models`. Framework adapters are in
``episodic_client.langchain``, ``episodic_client.langgraph`` and
``episodic_client.llama_index`` (installed with the extras of the same names).
"""

from .client import AsyncEpisodicClient, EpisodicClient, RetryPolicy, evidence_blocks, new_event_id
from .errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    EpisodicConnectionError,
    EpisodicError,
    FieldError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PolicyDeniedError,
    RateLimitedError,
    SelfApprovalError,
    ServerError,
    TenantMismatchError,
    UnavailableError,
    ValidationError,
)

__version__ = "0.1.0"

__all__ = [
    "EpisodicClient",
    "AsyncEpisodicClient",
    "RetryPolicy",
    "evidence_blocks",
    "new_event_id",
    "EpisodicError",
    "EpisodicConnectionError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "TenantMismatchError",
    "SelfApprovalError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "ValidationError",
    "PolicyDeniedError",
    "RateLimitedError",
    "ServerError",
    "UnavailableError",
    "FieldError",
]
