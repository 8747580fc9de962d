"""Google Drive downloads (data/gdrive.py): the confirmation page, parsed offline and followed on a loopback server."""

from __future__ import annotations

import http.server
import threading
import urllib.parse
import zipfile
from pathlib import Path

import pytest

from pytest_medhelm.data import gdrive

WARNING_PAGE = """<!DOCTYPE html><html><head><title>Google Drive - Virus scan warning</title>
<meta http-equiv="content-type" content="text/html; charset=utf-8"/></head><body>
<div class="uc-main"><div id="uc-text"><p class="uc-warning-caption">Google Drive can't scan this file for viruses.</p>
<p class="uc-warning-subcaption"><span class="uc-name-size"><a href="/open?id=FILEID">data_clean.zip</a> (127M)</span>
is too large for Google to scan for viruses. Would you still like to download this file?</p>
<form id="download-form" action="{action}" method="get">
<input type="submit" id="uc-download-link" class="goog-inline-block jfk-button" value="Download anyway"/>
<input type="hidden" name="id" value="FILEID"><input type="hidden" name="export" value="download">
<input type="hidden" name="confirm" value="t"><input type="hidden" name="uuid" value="0a1b2c3d-uuid">
</form></div></div></body></html>"""


OLD_WARNING_PAGE = """<html><body><div class="uc-main">Google Drive can't scan this file for viruses.
<a id="uc-download-link" class="goog-inline-block jfk-button jfk-button-action"
   href="/uc?export=download&amp;confirm=Ab3_x-9&amp;id=FILEID">Download anyway</a></div></body></html>"""


QUOTA_PAGE = """<html><head><title>Google Drive - Quota exceeded</title></head><body><div class="uc-main">
<p class="uc-error-caption">Sorry, you can't view or download this file at this time.</p>
<p class="uc-error-subcaption">Too many users have viewed or downloaded this file recently. Please try accessing
the file again later.</p></div></body></html>"""


def test_drive_url_helpers() -> None:
    url = "https://drive.google.com/uc?export=download&id=1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw"
    assert gdrive.is_drive_url(url) and not gdrive.is_drive_url("https://raw.githubusercontent.com/x")
    assert gdrive.file_id(url) == "1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw"
    assert gdrive.file_id("https://drive.google.com/file/d/15VkJd_q-5/view?usp=sharing") == "15VkJd_q-5"
    assert gdrive.download_url("abc") == "https://drive.google.com/uc?export=download&id=abc"
    assert gdrive.with_confirm(url + "&confirm=old", "new").endswith("id=1ImYUSLk9JbgHXOemfvyiDiirluZHPeQw&confirm=new")


def test_confirm_url_of_the_current_warning_page() -> None:
    page = WARNING_PAGE.format(action="https://drive.usercontent.google.com/download")
    assert gdrive.confirm_url(page, "https://drive.google.com/uc?export=download&id=FILEID") == (
        "https://drive.usercontent.google.com/download?id=FILEID&export=download&confirm=t&uuid=0a1b2c3d-uuid"
    )


def test_confirm_url_of_the_older_warning_page() -> None:
    assert gdrive.confirm_url(OLD_WARNING_PAGE, "https://drive.google.com/uc?export=download&id=FILEID") == (
        "https://drive.google.com/uc?export=download&confirm=Ab3_x-9&id=FILEID"
    )


def test_quota_page_leads_nowhere() -> None:
    assert gdrive.confirm_url(QUOTA_PAGE, "https://drive.google.com/uc?id=FILEID") is None
    assert "quota" in gdrive.describe_page(QUOTA_PAGE) and "Too many users" in gdrive.describe_page(QUOTA_PAGE)
    assert "HTML page" in gdrive.describe_page("<html><body>Sign in</body></html>")


class _FakeDrive(http.server.BaseHTTPRequestHandler):
    """/uc?id=form-*: the current warning page; /uc?id=cookie-*: a cookie token; /uc?id=quota: the quota page."""

    payload = b"PK\x05\x06" + b"\x00" * 18  # an empty zip archive

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        file_id = query.get("id", "")
        if url.path == "/download" and query.get("confirm") == "t" and query.get("uuid"):
            return self._send(self.payload, "application/zip")
        if file_id == "quota":
            return self._send(QUOTA_PAGE.encode(), "text/html; charset=utf-8")
        if file_id.startswith("cookie"):
            if query.get("confirm") == "TOKEN1" and "download_warning_1=TOKEN1" in (self.headers.get("Cookie") or ""):
                return self._send(self.payload, "application/octet-stream")
            return self._send(b"<html><body>Virus scan warning</body></html>", "text/html",
                              {"Set-Cookie": "download_warning_1=TOKEN1; Path=/"})
        if file_id.startswith("small"):
            return self._send(self.payload, "application/zip")
        return self._send(WARNING_PAGE.format(action="/download").encode(), "text/html; charset=utf-8")


@pytest.fixture
def fake_drive():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeDrive)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("file_id", ["form-1", "cookie-1", "small-1"])
def test_urlopen_gets_past_the_confirmation(fake_drive: str, file_id: str, tmp_path: Path) -> None:
    url = f"{fake_drive}/uc?export=download&id={file_id}"
    with gdrive.urlopen(url, timeout=10) as response:
        assert response.read() == _FakeDrive.payload
    target = gdrive.download(url, tmp_path / "out" / "data.zip", timeout=10)
    assert target.read_bytes() == _FakeDrive.payload and zipfile.is_zipfile(target)


def test_urlopen_quota_is_an_error_and_leaves_no_file(fake_drive: str, tmp_path: Path) -> None:
    with pytest.raises(gdrive.GoogleDriveError, match="quota"):
        gdrive.download(f"{fake_drive}/uc?export=download&id=quota", tmp_path / "data.zip", timeout=10)
    assert list(tmp_path.iterdir()) == []


def test_data_download_routes_drive_urls_through_gdrive(fake_drive: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_medhelm.data import sources

    monkeypatch.setattr(gdrive, "DRIVE_HOSTS", gdrive.DRIVE_HOSTS | {"127.0.0.1"})
    target = tmp_path / "medmcqa" / "data.zip"
    sources._download(f"{fake_drive}/uc?export=download&id=form-2", target, "")
    assert target.read_bytes() == _FakeDrive.payload
