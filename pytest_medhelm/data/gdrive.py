"""Google Drive downloads and the zip archives they hold (MedQA, MedMCQA), with the standard library only.

``https://drive.google.com/uc?export=download&id=<id>`` returns the file itself when it is small. For a file too
large for Drive's virus scan it returns an HTML page instead ("Google Drive can't scan this file for viruses")
whose "Download anyway" button leads to the file. :func:`urlopen` does that confirmation dance:

* the current page: a ``<form id="download-form" action="https://drive.usercontent.google.com/download">`` with
  hidden inputs (``id``, ``export``, ``confirm``, ``uuid``): the file is at ``action?<inputs>``;
* the older page: a link ``/uc?export=download&confirm=<token>&id=<id>``, or a ``download_warning_*`` cookie
  whose value is the ``confirm`` token.

A quota page ("Too many users have viewed or downloaded this file recently") or any other HTML page is a
:class:`GoogleDriveError` that says so, never a file saved under the archive's name.

:func:`zip_jsonl` reads one JSON-lines member of a downloaded archive in memory, found by the end of its path, so
that a loader accepts the archive as published or the extracted member file alike.
"""

from __future__ import annotations

import os
import re
import tempfile
import urllib.parse
import zipfile
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pytest_medhelm.data.errors import DataError
from pytest_medhelm.data.readers import Row, check_not_empty, inflate_limit_problem, jsonl_rows

DRIVE_HOSTS = frozenset({"drive.google.com", "docs.google.com", "drive.usercontent.google.com"})
USER_AGENT = "pytest-medhelm (python urllib)"
#: confirmation pages followed before giving up (Drive needs one)
MAX_CONFIRMATIONS = 3
_QUOTA_MARKERS = ("too many users have viewed or downloaded this file", "quota exceeded")
_CONFIRM_IN_URL = re.compile(r"[?&;]confirm=([0-9A-Za-z_-]+)")


class GoogleDriveError(OSError):
    """Google Drive answered with a page instead of the file (quota exceeded, no access, unknown page)."""


def is_drive_url(url: str) -> bool:
    return urllib.parse.urlsplit(url).hostname in DRIVE_HOSTS


def file_id(url: str) -> str | None:
    """The Drive file id of ``.../uc?id=<id>``, ``.../open?id=<id>`` or ``.../file/d/<id>/view``."""
    parts = urllib.parse.urlsplit(url)
    ids = urllib.parse.parse_qs(parts.query).get("id")
    if ids:
        return ids[0]
    match = re.search(r"/file/d/([0-9A-Za-z_-]+)", parts.path)
    return match.group(1) if match else None


def download_url(drive_id: str) -> str:
    return f"https://drive.google.com/uc?export=download&id={drive_id}"


class _PageParser(HTMLParser):
    """Forms (action and named inputs), links and the visible text of a Drive page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, Any]] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self._form: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._form = {"id": attr.get("id", ""), "action": attr.get("action", ""), "inputs": {}}
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and attr.get("name"):
            self._form["inputs"][attr["name"]] = attr.get("value", "")
        elif tag == "a" and attr.get("href"):
            self.links.append(attr["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def confirm_url(html: str, page_url: str) -> str | None:
    """The URL that the "can't scan this file for viruses" page ``html`` (fetched from ``page_url``) leads to,
    or ``None`` when the page offers no way on (a quota page, an error page)."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    forms = sorted(parser.forms, key=lambda f: f["id"] != "download-form")  # the download form first
    for form in forms:
        if form["id"] == "download-form" or "confirm" in form["inputs"]:
            action = urllib.parse.urljoin(page_url, form["action"] or page_url)
            query = urllib.parse.urlencode(form["inputs"])
            return f"{action}{'&' if '?' in action else '?'}{query}" if query else action
    for href in parser.links:
        if _CONFIRM_IN_URL.search(href) and ("export=download" in href or "/download" in href):
            return urllib.parse.urljoin(page_url, unescape(href))
    match = _CONFIRM_IN_URL.search(unescape(html))
    if match:
        return with_confirm(page_url, match.group(1))
    return None


def with_confirm(url: str, token: str) -> str:
    """``url`` with its ``confirm`` query parameter set to ``token``."""
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k != "confirm"]
    query.append(("confirm", token))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def describe_page(html: str) -> str:
    """One line saying what a Drive HTML page is, for an error message."""
    parser = _PageParser()
    parser.feed(html)
    text = " ".join(" ".join(parser.text).split())
    if any(marker in text.lower() for marker in _QUOTA_MARKERS):
        return ("Google Drive's download quota for this file is exceeded (\"Too many users have viewed or "
                "downloaded this file recently\"); try again later or download it in a browser")
    return f"Google Drive returned an HTML page instead of the file: {text[:200]!r}"


def urlopen(url: str, timeout: float = 60.0) -> Any:
    """Open ``url`` and return the response of the file itself, past Drive's confirmation page.

    Raises :class:`GoogleDriveError` when Drive answers with a page that leads nowhere (quota exceeded, no
    access), and the usual :mod:`urllib` errors for HTTP and network failures."""
    # imported here: the catalogue imports this module for its URLs, and the HTTP client (with ssl) is a
    # noticeable part of a run's start-up that only a download needs
    import http.cookiejar
    import urllib.request

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    for _ in range(MAX_CONFIRMATIONS + 1):
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        response = opener.open(request, timeout=timeout)
        if response.headers.get_content_type() != "text/html":
            return response
        try:
            html = response.read(4 << 20).decode(response.headers.get_content_charset() or "utf-8", "replace")
        finally:
            response.close()
        following = confirm_url(html, response.geturl() or url)
        if following is None:
            token = next((c.value for c in jar if c.name.startswith("download_warning")), None)
            if token is None:
                raise GoogleDriveError(describe_page(html))
            following = with_confirm(url, token)
        if following == url:
            raise GoogleDriveError(describe_page(html))
        url = following
    raise GoogleDriveError(f"Google Drive kept answering with confirmation pages ({MAX_CONFIRMATIONS} followed)")


def download(url: str, target: Path, timeout: float = 60.0) -> Path:
    """Download a Drive file to ``target`` (written atomically: a failed download leaves nothing behind)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as out, urlopen(url, timeout) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


# ----------------------------------------------------------------------------------------------------- archives


def zip_member(archive: Path | str, suffix: str) -> tuple[str, bytes]:
    """``(name, bytes)`` of the one member of the zip ``archive`` whose path ends with ``suffix``.

    Errors name the archive: not a zip (for instance an HTML page saved in its place), no such member, or two."""
    archive = Path(archive)
    check_not_empty(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            wanted = "/" + suffix.lstrip("/")
            names = [n for n in zf.namelist() if ("/" + n).endswith(wanted) and not n.startswith("__MACOSX/")]
            if not names:
                raise DataError(archive, "", f"no member ending with {suffix!r} in the archive")
            if len(names) > 1:
                raise DataError(archive, "", f"several members end with {suffix!r}: {', '.join(names)}")
            # (zipfile stops a member at its declared size: checking the declaration bounds what is inflated)
            problem = inflate_limit_problem(zf.getinfo(names[0]).file_size)
            if problem:
                raise DataError(archive, "", f"{names[0]} {problem}")
            return names[0], zf.read(names[0])
    except zipfile.BadZipFile as exc:
        head = archive.read_bytes()[:200].lstrip().lower()
        hint = " (it is an HTML page: Google Drive's warning or quota page was saved instead)" if head.startswith(
            (b"<!doctype html", b"<html")) else ""
        raise DataError(archive, "", f"not a zip archive ({exc}){hint}") from None


def zip_jsonl(archive: Path | str, suffix: str) -> tuple[list[Row], str]:
    """The rows of the JSON-lines member ``*suffix`` of ``archive``, and the label errors name it by."""
    name, data = zip_member(archive, suffix)
    label = f"{archive}:{name}"
    return jsonl_rows(data, label), label
