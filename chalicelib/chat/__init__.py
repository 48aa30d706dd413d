"""Chat model backends (OpenAI-compatible Chat Completions over httpx, Amazon Bedrock Converse) behind one
interface, :class:`chalicelib.chat.base.ChatBackend`, routed by model name.

The face is the port's value types (re-exported from :mod:`chalicelib.chat.base`, which imports nothing but the
standard library) and :mod:`routing` (model → backend; import it by name). The backends themselves,
:mod:`openai_compat` and :mod:`bedrock`, are built by the router and imported only when chosen.
"""

from chalicelib.chat.base import (
    ChatBackend,
    ChatMessage,
    ChatRequest,
    ChatResult,
    Role,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "ChatBackend",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "Role",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "routing",
]
