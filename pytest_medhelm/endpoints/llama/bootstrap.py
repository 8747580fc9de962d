"""What the llama.cpp server process runs: ``python -m pytest_medhelm.endpoints.llama.bootstrap MODE PARENT_PID ARGS``.

First the parent-death signal (:func:`.parent_death.die_with_parent`), so that the server
never outlives the run even when the run is killed; then ``python -m llama_cpp.server ARGS``.

``MODE`` is ``extra-buffers`` or ``no-extra-buffers``: the latter turns llama.cpp's "extra buffer types" (weight
repacking, AMX) off first. ``llama_cpp.server`` has no flag for that, and ggml's AMX matrix multiply segfaults on
some AMX CPUs (llama.cpp issue #20824; it does on this project's machines), so :class:`~.server.LlamaServer` turns
it off where the CPU has AMX.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from typing import Any

EXTRA_BUFFERS = "extra-buffers"
NO_EXTRA_BUFFERS = "no-extra-buffers"


def _turn_off_extra_buffers() -> None:
    import llama_cpp.llama_cpp as bindings

    default_params = bindings.llama_model_default_params

    def params_without_extra_buffers() -> Any:  # llama.cpp's ctypes struct
        params = default_params()
        if "use_extra_bufts" in dict(type(params)._fields_):
            params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = params_without_extra_buffers


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    mode, parent_pid, server_args = args[0], int(args[1]), args[2:]
    if mode not in (EXTRA_BUFFERS, NO_EXTRA_BUFFERS):
        raise SystemExit(f"usage: python -m {__name__} {{{EXTRA_BUFFERS}|{NO_EXTRA_BUFFERS}}} PARENT_PID ARGS...")
    from pytest_medhelm.endpoints.llama.parent_death import die_with_parent

    die_with_parent(parent_pid)
    if mode == NO_EXTRA_BUFFERS:
        _turn_off_extra_buffers()
    sys.argv = ["llama_cpp.server", *server_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
