"""`python -m llama_cpp.server` for the OpenAI-backend tests, with llama.cpp's AMX matmul kept
out where the build uses it (it segfaults the first answer on some Sapphire Rapids CPUs,
ggml-org/llama.cpp#20824; our own llama-cpp backend does the same in its loader).

    python tests/helpers/llama_server.py --model M --port P ...   (the server's own arguments)
"""

from __future__ import annotations

import runpy

import llama_cpp
import llama_cpp.llama_cpp as low_level

from s2s_desktop.engines.llm.llama_cpp import has_amx

if has_amx(llama_cpp):
    _defaults = low_level.llama_model_default_params

    def _plain_buffers():
        params = _defaults()
        params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = _plain_buffers  # read by Llama.__init__

runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
