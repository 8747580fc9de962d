"""Start-up: pytest rewrites the asserts of the modules users' tests rely on, and parses no other module of ours.

pytest marks every package of an installed ``pytest11`` plugin's distribution for assertion rewriting; the
package narrows that to ``pytest_medhelm.assertions`` and ``pytest_medhelm.testing`` (``pytest_medhelm/__init__``),
so that a cold session does not parse, rewrite and compile its other modules from source (BENCHMARKS.md, start-up).
"""

from __future__ import annotations

import os
import textwrap

import pytest
import pytester_runs

LOADERS = """
    import sys

    from _pytest.assertion.rewrite import AssertionRewritingHook

    import pytest_medhelm.assertions
    import pytest_medhelm.config
    import pytest_medhelm.testing.server


    def rewritten():
        return {name for name, module in sys.modules.items()
                if name.startswith("pytest_medhelm") and isinstance(module.__spec__.loader, AssertionRewritingHook)}


    def test_loaders():
        # the package itself is imported (rewritten) before it can narrow the marking; nothing else is, but for
        # the modules (and the test server's submodules) whose asserts users rely on
        names = rewritten() - {"pytest_medhelm", *EXPECTED_TOO}
        assert {name for name in names
                if not name.startswith(("pytest_medhelm.assertions", "pytest_medhelm.testing"))} == set()
        if MARKED:
            assert {"pytest_medhelm.assertions", "pytest_medhelm.testing", "pytest_medhelm.testing.server"} <= names
"""


@pytest.mark.e2e
def test_an_installed_session_rewrites_only_the_assertion_modules(pytester, monkeypatch):
    # as installed: the plugin loads from its entry point, which is what makes pytest mark the whole package
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    # (an editable install, as in a development checkout, lists a path finder as its files, not the package's
    # modules: pytest then marks nothing of ours, and only "nothing else is rewritten" can be checked here; the
    # test below marks the package by hand and checks the narrowing itself)
    pytester.makepyfile(test_loaders="EXPECTED_TOO = ()\nMARKED = False\n" + textwrap.dedent(LOADERS))
    result = pytester_runs.run(pytester, subprocess=True)
    result.assert_outcomes(passed=1)


@pytest.mark.e2e
def test_the_whole_package_marked_by_hand_is_narrowed_too(pytester, monkeypatch):
    # pytest marks the package before the entry point imports it; a -p plugin loaded first does the same here,
    # with autoloading off, so that the narrowing is tested whatever else is installed
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(mark_package="""
        import sys

        for finder in sys.meta_path:
            if callable(getattr(finder, "mark_rewrite", None)):
                finder.mark_rewrite("pytest_medhelm")
    """)
    # (pytest marks a module named by -p itself: the plugin module is rewritten in this session)
    pytester.makepyfile(test_loaders="EXPECTED_TOO = ('pytest_medhelm.plugin',)\nMARKED = True\n"
                        + textwrap.dedent(LOADERS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(pytester.path), os.environ.get("PYTHONPATH")))))
    result = pytester_runs.run(pytester, "-p", "mark_package", "-p", "pytest_medhelm.plugin", subprocess=True)
    result.assert_outcomes(passed=1)
