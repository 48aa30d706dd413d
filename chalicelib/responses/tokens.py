"""Token counts estimated without a tokenizer: cheap, deterministic and the same for every model.

Used for the summarization threshold (``settings.summary_threshold_tokens``), never for billing: ``usage`` reports
the backend's own counts. The estimate follows OpenAI's rule of thumb "one token ≈ 4 characters of English text"
(OpenAI Help Center, "What are tokens and how to count them?") plus 3 tokens of framing per chat message (OpenAI
Cookbook, "How to count tokens with tiktoken": ``tokens_per_message = 3``). Non-English text and code run higher,
so thresholds should keep a margin below the model's context window.
"""

from __future__ import annotations

from collections.abc import Iterable

from chalicelib.chat.base import ChatMessage

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 3


def text_tokens(text: str | None) -> int:
    """Estimated tokens of ``text``: ``ceil(len(text) / 4)`` (0 for empty or None)."""
    if not text:
        return 0
    return -(-len(text) // CHARS_PER_TOKEN)


def message_tokens(message: ChatMessage) -> int:
    """Estimated tokens of one chat message: framing + content + each tool call's name and arguments."""
    total = TOKENS_PER_MESSAGE + text_tokens(message.content)
    for call in message.tool_calls:
        total += text_tokens(call.name) + text_tokens(call.arguments)
    return total


def messages_tokens(messages: Iterable[ChatMessage]) -> int:
    """Estimated tokens of a conversation: the sum of :func:`message_tokens`."""
    return sum(message_tokens(m) for m in messages)
