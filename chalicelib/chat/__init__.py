"""Chat model backends (OpenAI-compatible Chat Completions over httpx, Amazon Bedrock Converse) behind one
interface, :class:`chalicelib.chat.base.ChatBackend`, routed by model name."""
