"""Patient data governance: ``--medhelm-local-only``.

Gated and private benchmarks hold patient text (MIMIC notes, a hospital's own records). With
``--medhelm-local-only`` the run refuses, *before any request*, to send that text to a model or judge endpoint
that is not on this machine or on a private network. This module decides what "private network" means (the
option's "local": loopback included) and lists the violations; the session turns a non-empty list into a usage
error (exit status 4) naming each benchmark and endpoint.

What counts as a private network
--------------------------------
* loopback: ``127.0.0.0/8``, ``::1`` and the host name ``localhost``;
* private networks: ``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16`` (RFC 1918) and IPv6 unique local
  addresses ``fc00::/7`` (RFC 4193); an IPv4 address written as IPv4-mapped IPv6 (``::ffff:10.0.0.5``) counts as
  the IPv4 address;
* a ``local/...`` model: a llama.cpp server this plugin starts on ``127.0.0.1``.

Not a private network:

* **any other host name**, even one that would resolve to a private address (``llm.hospital.internal``). Deciding
  by resolving it would need a DNS query (a network request made before the check that is meant to precede every
  request), and the answer can change between the check and the connection (DNS rebinding; a VPN or a
  ``/etc/hosts`` edit). A decision from the URL's text alone cannot be fooled that way. Use the endpoint's IP
  address in ``--medhelm-api-base`` / ``--medhelm-jury-api-base`` (``http://10.1.2.3:8000/v1``).
* link-local addresses (``169.254.0.0/16``, ``fe80::/10``): on cloud machines they are answered by the provider's
  own infrastructure (``169.254.169.254`` is the metadata service), so they do not mean "our network";
* carrier-grade NAT (``100.64.0.0/10``), the unspecified address (``0.0.0.0``, ``::``), multicast, and the
  documentation and benchmarking ranges that Python's ``ipaddress.is_private`` calls private (``192.0.2.0/24``,
  ``198.18.0.0/15``, ``203.0.113.0/24`` ...): the list above is explicit for that reason;
* a model without an API base (``openai/gpt-4o``, ``anthropic/...``): litellm sends it to the provider's cloud API.
  (Environment variables such as ``OPENAI_BASE_URL`` or ``OLLAMA_API_BASE`` may redirect litellm, but the plugin
  does not see what litellm will pick, so it does not count on them: pass the URL with ``--medhelm-api-base``,
  ``--medhelm-jury-api-base`` or a model's own ``--medhelm-endpoint MODEL=URL``.)

A model served by several endpoints (``--medhelm-endpoint MODEL=URL1,URL2``) is local only when every one of them
is. The shared answer cache (``--medhelm-cache-url``) holds every prompt and answer of the run: it is held to the
same rule (a ``unix://`` socket is on this machine). The models and judges checked are the session's resolved
ModelSpecs (:mod:`pytest_medhelm.endpoints.resolve`), so a judge's own endpoint is the one checked, not the judges'
default.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from pytest_medhelm.values import LLAMA_CPP_PREFIX, REPLICA_SEPARATOR, is_llama_cpp_model

#: the networks that count as local (see the module docstring for what is deliberately left out)
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7")
)
LOOPBACK_HOSTNAMES = frozenset({"localhost"})
#: the access levels whose data must stay on the network under --medhelm-local-only
PROTECTED_ACCESS = frozenset({"gated", "private"})


def _host(url: str) -> str | None:
    text = url.strip()
    if "://" not in text:
        text = "//" + text  # "10.0.0.5:8000/v1": urlsplit needs the // to see a network location
    try:
        host = urlsplit(text).hostname  # lower-cased, IPv6 brackets removed
    except ValueError:  # "http://[::1" and such
        return None
    if not host:
        return None
    return host.rstrip(".")


def is_private_network_address(host: str) -> bool:
    """Whether ``host`` (a literal IP address or ``localhost``) is loopback or on a private network."""
    host = host.strip().lower().rstrip(".")
    if host in LOOPBACK_HOSTNAMES:
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone ("fe80::1%eth0") names no network
    except ValueError:
        return False  # a host name: never resolved, never local (see the module docstring)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in PRIVATE_NETWORKS)


def is_private_network_endpoint(url: str | None) -> bool:
    """Whether requests to ``url`` stay on this machine or a private network, decided without any network access.

    Only literal IP addresses and ``localhost`` can be local; any other host name is not (it would have to be
    resolved, which is itself a network request and can change between this check and the connection).
    ``None`` (no endpoint: the provider's cloud API) is not local.
    """
    if not url:
        return False
    host = _host(url)
    return host is not None and is_private_network_address(host)


def _name_and_base(model: Any) -> tuple[str, str | None]:
    """A ModelSpec-like object (``.name``, ``.api_base``), a ``(name, api_base)`` pair, or a bare name."""
    if isinstance(model, str):
        return model, None
    if isinstance(model, (tuple, list)):
        name = model[0]
        return str(name), (model[1] if len(model) > 1 else None)
    return str(model.name), getattr(model, "api_base", None)


def endpoint_problem(model: Any) -> str | None:
    """None when ``model`` is served locally; otherwise where its requests would go and why that is not local."""
    name, api_base = _name_and_base(model)
    if is_llama_cpp_model(name):
        return None  # the llama.cpp server this plugin starts on 127.0.0.1
    if not api_base:
        return f"{name} (no API base: litellm sends it to the provider's cloud API)"
    # replicas of one model (their URLs joined, see values.replica_group): every one of them must be local
    outside = [url for url in api_base.split(REPLICA_SEPARATOR) if not is_private_network_endpoint(url)]
    if not outside:
        return None
    api_base = outside[0]
    host = _host(api_base)
    if host is None:
        why = "no host in the URL"
    else:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            why = "not a loopback or private-network address"
        except ValueError:
            why = ("a host name; only 'localhost' and literal loopback or private-network IP addresses count as "
                   "local, host names are not resolved")
    from pytest_medhelm.values import redact_url

    return f"{name} at {redact_url(api_base)} ({why})"


def cache_url_problem(url: str | None) -> str | None:
    """None when the shared cache at ``url`` (``--medhelm-cache-url``) is on this machine or a private network (or
    there is none); otherwise the option, the URL (redacted) and why it is not local."""
    if not url or urlsplit(url.strip()).scheme == "unix":
        return None
    if is_private_network_endpoint(url):
        return None
    from pytest_medhelm.values import redact_url

    host = _host(url)
    why = ("no host in the URL" if host is None else "a host name; host names are not resolved"
           if not _is_address(host) else "not a loopback or private-network address")
    return f"--medhelm-cache-url {redact_url(url)} ({why})"


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _benchmark(entry: Any) -> tuple[str, str, str | None]:
    """(slug, access, kind) from a ``(slug, access[, kind])`` tuple or a Benchmark-like object."""
    if isinstance(entry, (tuple, list)):
        slug, access = entry[0], entry[1]
        kind = entry[2] if len(entry) > 2 else None
        return str(slug), str(access), kind
    return str(entry.slug), str(entry.access), getattr(entry, "kind", None)


def private_network_violations(models: Iterable[Any], judges: Iterable[Any], benchmarks: Iterable[Any],
                               cache_url: str | None = None) -> list[str]:
    """Every gated or private benchmark × endpoint pair that would send patient data off the network.

    ``models`` and ``judges``: ModelSpec-like objects (``.name``, ``.api_base``) or ``(name, api_base)`` pairs; a
    model without an API base is a cloud provider; a ``local/...`` model is local. ``benchmarks``: ``(slug,
    access)`` or ``(slug, access, kind)`` tuples, or Benchmark-like objects. Judges only ever see the instances of
    open-ended benchmarks: when the kind is given and is ``"closed"``, the judges are not checked for it (without a
    kind they are, to be safe). ``cache_url``: the shared answer cache (``--medhelm-cache-url``), which gets every
    benchmark's prompts. Returns one line per violation, in a stable order; empty when nothing would leave the
    network. Makes no network access.
    """
    cache_problem = cache_url_problem(cache_url)
    model_problems = [(p, "model") for p in dict.fromkeys(endpoint_problem(m) for m in models) if p]
    judge_problems = [(p, "judge") for p in dict.fromkeys(endpoint_problem(j) for j in judges) if p]
    out: list[str] = []
    for entry in benchmarks:
        slug, access, kind = _benchmark(entry)
        if access not in PROTECTED_ACCESS:
            continue
        problems = model_problems + ([] if kind == "closed" else judge_problems)
        for problem, role in problems:
            out.append(f"{slug} ({access}) -> {role} {problem}")
        if cache_problem:
            out.append(f"{slug} ({access}) -> shared cache {cache_problem}")
    return out


def private_network_message(violations: Sequence[str]) -> str:
    """The usage error for ``--medhelm-local-only`` with the violations found."""
    lines = [f"--medhelm-local-only: {len(violations)} benchmark/endpoint pair(s) would send gated or private data "
             "off this machine's network; nothing was sent:"]
    lines += [f"  {v}" for v in violations]
    lines.append("serve the model and the judges on loopback or a private-network IP address (--medhelm-api-base, "
                 f"--medhelm-jury-api-base, --medhelm-endpoint MODEL=URL, {LLAMA_CPP_PREFIX}<model>) and the shared "
                 "cache too (--medhelm-cache-url, or leave it out), or leave those benchmarks out "
                 "(--medhelm-benchmark)")
    return "\n".join(lines)
