"""What a benchmark is: one small declarative object per MedHELM benchmark.

A :class:`Benchmark` names its data files (:class:`~pytest_medhelm.data.sources.DataFile`), a function that builds
:class:`Instance` objects from those files (in HELM's order), a prompt template that renders an instance into the
exact text HELM sends, generation settings, and a metric. Nothing here imports anything heavy: a definition is
imported in every process that collects its benchmark and must stay cheap.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pytest_medhelm.compat import is_medhelm, reproduces_helm
from pytest_medhelm.values import Instance

if TYPE_CHECKING:  # pragma: no cover
    from pytest_medhelm.data.sources import DataFile
    from pytest_medhelm.metrics.base import Metric
    from pytest_medhelm.prompting import PromptTemplate
    from pytest_medhelm.values import ChatRequest, ModelSpec

ACCESS_LEVELS = ("public", "gated", "private")
KINDS = ("closed", "open")


#: ``builder(files)`` gets the resolved data files, keyed by :attr:`DataFile.name`, and returns the instances in
#: HELM's order (the order its ``np.random.permutation`` sample indexes into).
#:
#: A builder whose filters drop source records (rows HELM skips, joins that find no partner, duplicates merged,
#: a sample cap) returns a :class:`Loaded` whose ``removed`` counts them by reason; the plugin reads
#: ``getattr(instances, "removed", {})``, so a plain list means "nothing removed". A record that is malformed
#: rather than filtered is a :class:`~pytest_medhelm.data.errors.DataError`, never a silent drop.
InstanceBuilder = Callable[[Mapping[str, Path]], Sequence[Instance]]


@dataclass(frozen=True)
class Benchmark:
    slug: str
    name: str
    #: a subcategory of the taxonomy (pytest_medhelm.catalogue.taxonomy), which also says the category: a built-in
    #: benchmark names it and nothing else of its place (its modules' folders are checked against it)
    subcategory: str
    access: str  # public | gated | private
    kind: str  # closed | open
    files: tuple[DataFile, ...]
    build_instances: InstanceBuilder
    prompt: PromptTemplate
    metric: Metric
    max_tokens: int
    stop: tuple[str, ...] = ()
    description: str = ""
    #: HELM's cap for this benchmark when it overrides the command line's (CLEAR: 100 per condition)
    max_instances: int | None = None
    #: how to obtain the files, shown in the skip reason when they are absent (gated/private benchmarks, which end
    #: it with a synthetic example record: "Synthetic example …")
    data_help: str = ""
    #: documentation (docs/data.md, ``python -m pytest_medhelm.catalogue.docs``): one synthetic example record of
    #: the data file (public benchmarks; gated and private ones carry theirs in ``data_help``) …
    example: str = ""
    #: … the number of instances on the pinned public data (None: it depends on the user's files) …
    instance_count: int | None = None
    #: … and what the loader's filters remove (counted in :attr:`Loaded.removed`); "" when nothing is filtered
    filters: str = ""
    #: the benchmark's own data folder, holding its files by name (``<data_dir>/<file name>``), for a benchmark
    #: shipped with its data; relative to the folder of the file that creates the Benchmark. ``--medhelm-data-dir
    #: DIR/<slug>/`` still wins when it holds the files. None: the usual lookup (pytest_medhelm.data.sources).
    data_dir: str | Path | None = None
    #: the loader under ``--medhelm-compat helm`` when HELM's instances differ from ours (MTSamples Procedures:
    #: HELM cannot download the files with a '#' in their name); None: ``build_instances`` in both modes
    build_instances_helm: InstanceBuilder | None = None
    #: the loader under ``--medhelm-compat medhelm`` when medhelm 0.8.0 changed the instances (EHRSQL drops the
    #: unanswerable questions, ProxySender's three-class question); None: ``build_instances_helm`` if any (the fork
    #: kept HELM 0.5.16's scenario), else ``build_instances``
    build_instances_medhelm: InstanceBuilder | None = None
    #: the prompt under ``--medhelm-compat medhelm`` when medhelm 0.8.0 changed it (EHRSQL's instructions); None:
    #: ``prompt`` in every mode
    prompt_medhelm: PromptTemplate | None = None
    #: run configuration -> the Benchmark a run uses, for a benchmark whose files depend on a run option
    #: (HealthBench's ``--medhelm-healthbench-subset``); None: this one
    select: Callable[[Any], Benchmark] | None = None
    #: HELM run-entry arguments the benchmark takes (``--medhelm-benchmark-args SLUG:NAME=VALUE,...``; SCT-Bench's
    #: ``reason`` and ``few_shot``): (name, meaning) pairs. Empty: the benchmark takes none
    arguments: tuple[tuple[str, str], ...] = ()
    #: ``read_arguments(given (name, value) pairs, compat)`` -> the value the loader gets as ``arguments=``; raises
    #: ValueError naming the argument and what was expected (a usage error). Set with ``arguments``
    read_arguments: Callable[[tuple[tuple[str, str], ...], str], object] | None = None
    #: a category slug (a display name or code is accepted and kept as the slug). Omitted: the category of
    #: ``subcategory``. Given, it must be that category when the subcategory is the taxonomy's; a plugin's benchmark
    #: whose subcategory is its own gives it (listed "outside the taxonomy" by ``--medhelm-tree``)
    category: str = field(default="", kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "category", self._place())
        if self.data_dir is not None and not Path(self.data_dir).is_absolute():
            object.__setattr__(self, "data_dir", _caller_dir() / self.data_dir)
        if self.access not in ACCESS_LEVELS:
            raise ValueError(f"{self.slug}: access must be one of {ACCESS_LEVELS}, got {self.access!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{self.slug}: kind must be one of {KINDS}, got {self.kind!r}")

    def _place(self) -> str:
        """The category slug, checked against the taxonomy (and the subcategory spelled as the taxonomy does)."""
        from pytest_medhelm.catalogue.taxonomy import CATEGORIES, SUBCATEGORIES, category_named, subcategory_named

        subcategory = subcategory_named(self.subcategory) if isinstance(self.subcategory, str) else None
        if not self.category:
            if subcategory is None:
                raise ValueError(f"benchmark {self.slug!r}: subcategory {self.subcategory!r} is not a MedHELM "
                                 "subcategory, so it says no category: give category=, or one of: "
                                 + ", ".join(s.name for s in SUBCATEGORIES))
            category_slug = subcategory.category
        else:
            category = category_named(self.category) if isinstance(self.category, str) else None
            if category is None:
                raise ValueError(f"benchmark {self.slug!r}: category {self.category!r} is not a MedHELM category; "
                                 "expected one of: " + ", ".join(f"{c.slug} ({c.name})" for c in CATEGORIES))
            category_slug = category.slug
            if subcategory is not None and subcategory.category != category_slug:
                raise ValueError(f"benchmark {self.slug!r}: subcategory {subcategory.name!r} belongs to "
                                 f"{subcategory.category}, not to {category_slug}; omit category= (the "
                                 "subcategory says it)")
        if subcategory is not None:
            object.__setattr__(self, "subcategory", subcategory.name)  # as the taxonomy spells it
        return category_slug

    def instance_builder(self, compat: str = "default", arguments: tuple[tuple[str, str], ...] = ()
                         ) -> InstanceBuilder:
        """The loader of this benchmark under ``compat`` (a mode of :mod:`pytest_medhelm.compat`), given the run's
        ``--medhelm-benchmark-args`` for it (a benchmark with :attr:`read_arguments` always gets them read, its
        defaults when none were given)."""
        if is_medhelm(compat) and self.build_instances_medhelm is not None:
            return self.build_instances_medhelm
        if reproduces_helm(compat) and self.build_instances_helm is not None:
            return self.build_instances_helm
        if self.read_arguments is not None:
            import functools

            # a benchmark that reads arguments has a builder taking them as the ``arguments`` keyword
            build_with_arguments: Callable[..., Sequence[Instance]] = self.build_instances
            return functools.partial(build_with_arguments, arguments=self.read_arguments(arguments, compat))
        return self.build_instances

    def prompt_for(self, compat: str = "default") -> PromptTemplate:
        """The prompt template of this benchmark under ``compat``."""
        if is_medhelm(compat) and self.prompt_medhelm is not None:
            return self.prompt_medhelm
        return self.prompt

    def render_prompt(self, instance: Instance, compat: str = "default") -> str:
        return self.prompt_for(compat).render(instance)

    def request_for(self, model: ModelSpec, instance: Instance, max_tokens: int | None = None,
                    compat: str = "default") -> ChatRequest:
        """The model's request for ``instance``: the rendered prompt as one user message (HELM), or a chat
        benchmark's messages as they are (its prompt's ``messages(instance)``); ``max_tokens`` (default the
        benchmark's) as the run caps it; the prompt of the run's ``compat`` mode."""
        from pytest_medhelm.values import ChatRequest

        limit = self.max_tokens if max_tokens is None else max_tokens
        messages = getattr(self.prompt, "messages", None)
        if messages is None:
            return ChatRequest.for_prompt(model, self.render_prompt(instance, compat), limit, self.stop)
        return ChatRequest.for_messages(model, messages(instance), limit, self.stop)

    def prompt_text(self, request: ChatRequest) -> str:
        """The text whose sha256 is the answer's ``prompt_sha256``: the one user message, or a chat benchmark's
        messages as compact JSON."""
        if getattr(self.prompt, "chat", False):
            from pytest_medhelm.prompting import messages_json

            return messages_json(request.messages)
        return request.prompt_text

    def for_run(self, run_config: Any) -> Benchmark:
        """The benchmark as a run uses it: a benchmark whose files depend on a run option (HealthBench's subset)
        gives ``select``'s; every other benchmark is itself."""
        return self if self.select is None else self.select(run_config)

    @property
    def is_judged(self) -> bool:
        """Whether the LLM jury scores this benchmark (its metric asks for judges): the one answer to that
        question, for planning, sending, the dry run's estimate and the reports."""
        return bool(getattr(self.metric, "judged", False))


def _caller_dir() -> Path:
    """The folder of the source file whose code is creating a Benchmark (past this module and the dataclass's
    generated ``__init__``, whose file name is ``<string>``)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and not filename.startswith("<"):
            return Path(filename).resolve().parent
        frame = frame.f_back
    return Path.cwd()
