"""Chat messages for one turn: system prompt, the last few exchanges, the new question."""

from __future__ import annotations

from collections.abc import Callable, Sequence

NEXT_QUESTION = "\x00next question\x00"  # placeholder where the next user message will go


def window(history: list[tuple[str, str]], history_turns: int) -> list[tuple[str, str]]:
    """The exchanges a prompt keeps: at most `history_turns`, the oldest dropped in blocks of
    half the window. The prompt's start then stays the same for several turns, so the LLM's
    cached prefix holds (dropping one exchange a turn would change it on every turn)."""
    kept = [(u, a) for u, a in history if u.strip() and a.strip()]
    if history_turns <= 0:
        return []
    block = max(1, history_turns // 2)
    excess = len(kept) - history_turns
    if excess <= 0:
        return kept
    return kept[-(-excess // block) * block :]


def prefix_messages(system_prompt: str, history: list[tuple[str, str]]) -> list[dict]:
    """The system prompt and the given exchanges as chat messages (no new question yet)."""
    messages: list[dict] = []
    if system_prompt.strip():
        messages.append({"role": "system", "content": system_prompt.strip()})
    for user, assistant in history:
        messages.append({"role": "user", "content": user.strip()})
        messages.append({"role": "assistant", "content": assistant.strip()})
    return messages


def build_messages(
    system_prompt: str,
    history: list[tuple[str, str]],
    user_text: str,
    history_turns: int,
) -> list[dict]:
    """Messages in the OpenAI chat shape, keeping at most `history_turns` exchanges (see
    `window`).

    `history` holds (user, assistant) pairs, oldest first. An exchange whose reply is empty
    (interrupted before any word was spoken) is dropped: two user messages in a row break the
    strict user/assistant alternation some chat templates require.
    """
    messages = prefix_messages(system_prompt, window(history, history_turns))
    messages.append({"role": "user", "content": user_text.strip()})
    return messages


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_ids(messages: list[dict], render: Callable[[list[dict]], str],
               encode: Callable[[str], list[int]], question: str = "") -> list[int]:
    """Token ids of the next prompt up to where its user message starts, or up to the end of
    the `question`'s first words when they are known (`render`: chat messages → the prompt
    text, `encode`: text → ids). Only the ids a whole prompt starts with too: the token at the
    cut may be written differently there."""
    start = f"{question.strip()} " if question.strip() else ""
    text = render([*messages, {"role": "user", "content": start + NEXT_QUESTION}])
    cut = text.rfind(NEXT_QUESTION)
    if cut < 0:
        return []
    ids = encode(text[:cut])
    full = encode(render([*messages, {"role": "user", "content": start + "Hi"}]))
    return ids[: common_prefix(ids, full)]
