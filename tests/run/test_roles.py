"""The role of each process of a run (central, xdist's controller, a worker) is one object chosen once; each does
its own part: the controller sends and reports and runs no item, a worker runs items and neither sends the planned
answers nor reports. How an xdist run stopped is read from structured signals, not from xdist's message."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest
from pytester_runs import run, toy_args
from toy_benchmark import TOY_CONFTEST

from pytest_medhelm.testing.server import running_server

#: each process writes what it is: the class of the run's plugin, and how many items it ran
ROLE_PROBE = textwrap.dedent('''
    import json, os

    def pytest_sessionfinish(session):
        run = session.config.pluginmanager.get_plugin("medhelm-run")
        if run is None:
            return
        worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
        ran = sum(1 for item in session.items if not item.get_closest_marker("skip"))
        path = os.path.join(str(session.config.rootpath), f"role-{worker}.json")
        with open(path, "w") as f:
            json.dump({"role": type(run).__name__, "items": len(session.items) if worker != "main" else ran,
                       "reports": run.reports, "sends": run.sends_answers}, f)
''')


def roles_of(pytester: pytest.Pytester) -> dict[str, dict]:
    return {p.stem.removeprefix("role-"): json.loads(p.read_text()) for p in pytester.path.glob("role-*.json")}


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_each_process_does_its_roles_part(pytester, toy, mode):
    data = toy(6)
    pytester.makeconftest(TOY_CONFTEST + ROLE_PROBE)
    out = pytester.path / "r.json"
    with running_server(answer="A") as server:
        result = run(pytester, *toy_args(server, data, "--medhelm-json", str(out), "--medhelm-cache-dir",
                                         str(pytester.path / "cache"), *mode), subprocess=True)
        sent = server.count
    assert result.ret == 0, result.stdout.str()
    roles = roles_of(pytester)
    if mode == ["-p", "no:xdist"]:
        assert roles == {"main": {"role": "Central", "items": 6, "reports": True, "sends": True}}
    else:
        main = roles.pop("main")
        assert main == {"role": "Controller", "items": 0, "reports": True, "sends": True}  # it runs no item
        assert set(roles) == {"gw0", "gw1"}
        assert all(r["role"] == "Worker" and not r["reports"] and not r["sends"] for r in roles.values()), roles
    assert sent == 6  # each planned answer asked once, by the process that sends
    results = json.loads(out.read_text())  # written once, by the process that reports, with every item
    assert len(results["instances"]) == 6 and results["run"]["interrupted"] is False


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [pytest.param(["-p", "no:xdist"], id="serial"),
                                  pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.e2e)])
def test_every_model_broken_stops_the_run_as_an_error_not_an_interruption(pytester, toy, mode):
    data = toy(8)
    out = pytester.path / "r.json"
    with running_server(answer="A", api_key="sk-right") as server:
        result = run(pytester, *toy_args(server, data, "--medhelm-retries", "0", "--medhelm-json", str(out), *mode),
                     subprocess=True)
    assert result.ret == 1, result.stdout.str()  # a run with errors, not Ctrl-C's 2
    result.stdout.fnmatch_lines(["*every model under test fails every request*"])
    assert json.loads(out.read_text())["run"]["interrupted"] is False


def fake_config(workerinput=None, dist="no", tx=()):
    config = SimpleNamespace(option=SimpleNamespace(dist=dist, tx=list(tx)))
    if workerinput is not None:
        config.workerinput = workerinput
    return config


def test_the_role_is_chosen_from_xdist_options_and_hand_over():
    from pytest_medhelm.run import choose_role
    from pytest_medhelm.run.roles import Central
    from pytest_medhelm.run.xdist import Controller, Worker

    # (the ignores: a stand-in with the options only, not a pytest.Config)
    assert choose_role(fake_config()) is Central  # type: ignore[arg-type]  # a stand-in
    assert choose_role(fake_config(dist="load", tx=["popen"] * 2)) is Controller  # type: ignore[arg-type]  # a stand-in
    assert choose_role(fake_config(workerinput={"workerid": "gw0"}, dist="load",  # type: ignore[arg-type]  # a stand-in
                                   tx=["popen"])) is Worker
    assert (Central.sends_answers, Central.reports, Central.runs_items) == (True, True, True)
    assert (Controller.sends_answers, Controller.reports, Controller.runs_items) == (True, True, False)
    assert (Worker.sends_answers, Worker.reports, Worker.runs_items) == (False, False, True)


def test_no_role_string_is_compared_in_the_run():
    import pathlib
    import re

    import pytest_medhelm.run

    root = pathlib.Path(pytest_medhelm.run.__file__).parent
    pattern = re.compile(r"""[=!]=\s*["'](central|controller|worker)["']|\b(CENTRAL|CONTROLLER|WORKER)\b|is_worker""")
    found = [f"{p.name}:{n}" for p in root.glob("*.py") for n, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert found == []
