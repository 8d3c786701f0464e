"""Chat messages for one turn: system prompt, the last few exchanges, the new question."""

from __future__ import annotations


def build_messages(
    system_prompt: str,
    history: list[tuple[str, str]],
    user_text: str,
    history_turns: int,
) -> list[dict]:
    """Messages in the OpenAI chat shape, keeping only the last `history_turns` exchanges.

    `history` holds (user, assistant) pairs, oldest first. An exchange whose reply is empty
    (interrupted before any word was spoken) is dropped: two user messages in a row break the
    strict user/assistant alternation some chat templates require.
    """
    messages: list[dict] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt.strip()})
    kept = [(u, a) for u, a in history if u.strip() and a.strip()]
    if history_turns > 0:
        for user, assistant in kept[-history_turns:]:
            messages.append({"role": "user", "content": user.strip()})
            messages.append({"role": "assistant", "content": assistant.strip()})
    messages.append({"role": "user", "content": user_text.strip()})
    return messages
