"""The HTML report's typed views of the results (pytest_medhelm.report.html.views)."""

from __future__ import annotations

import json

from pytest_medhelm.report.html.views import instance_view, script_json


def test_script_json_cannot_close_its_script():
    text = script_json({"a": "</script><!-- \u2028 & é"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & é"}


def test_an_instance_id_zero_is_shown_as_0():
    assert instance_view({"instance_id": 0}).instance_id == "0"
    assert instance_view({"instance_id": None}).instance_id == ""
